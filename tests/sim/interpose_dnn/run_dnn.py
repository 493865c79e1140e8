#!/usr/bin/env python3
"""vmem's cuDNN and cuBLAS hooks on the simulated GPU (suite 'sim').

usage: run_dnn.py --vmem LIBVMEM --minitrain MINITRAIN --callcount CALLCOUNT_SO
                  [--net vgg16] [--keep DIR]

For --conv-api legacy and --conv-api graph, runs minitrain without vmem and
then under LD_PRELOAD=callcount.so:libvmem.so with VMEM_TRACE, and checks:
  checksum     the weight checksum is the same with and without vmem
  one-per-call each cuDNN/cuBLAS function has as many op events in the
               trace as calls counted by callcount.so (an independent
               preloaded counter in front of vmem)
  conv-roles   every convolution event carries its tensors with the roles
               and accesses the API defines (forward x r, w r, y w; backward
               data w r, dy r, dx w; backward filter x r, dy r, dw w) and a
               known byte extent; graph-API executions resolve to a conv
               kind through a known plan
  gemm         every GEMM reads a and b and writes c, extents known
  same-convs   both APIs give the same multiset of convolution events
               (kind, shape, roles, accesses, extents)
  budget       with --budget SIZE: under VMEM_DEVICE_LIMIT=SIZE (below the
               run's peak, so tensors are evicted and faulted back in by the
               extents these hooks report) the checksum is still the same
Every failure prints what was expected and what was got; exit 1 on failure,
77 when the machine cannot run the counter (not x86-64 Linux).
"""
import argparse
import collections
import json
import os
import platform
import re
import subprocess
import sys
import tempfile

CHECKSUM = re.compile(r"^checksum: (0x[0-9a-f]{16})$", re.M)

CONV_ROLES = {
    "conv_fwd": {"x": "r", "w": "r", "y": "w"},
    "conv_bwd_data": {"w": "r", "dy": "r", "dx": "w"},
    "conv_bwd_filter": {"x": "r", "dy": "r", "dw": "w"},
}

failures = []


def check(name, ok, expected, got):
    status = "ok  " if ok else "FAIL"
    print("%s %-12s expected: %s" % (status, name, expected))
    print("     %-12s got:      %s" % ("", got))
    if not ok:
        failures.append(name)


def run(cmd, env_extra):
    env = dict(os.environ)
    env.update(env_extra)
    shown = " ".join("%s=%s" % kv for kv in env_extra.items())
    print("$ %s %s" % (shown, " ".join(cmd)))
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        print(p.stdout[-3000:])
        print(p.stderr[-3000:])
        print("FAIL run: expected exit code 0, got %d" % p.returncode)
        sys.exit(1)
    return p


def checksum_of(p):
    cs = CHECKSUM.findall(p.stdout)
    if len(cs) != 1:
        print(p.stdout[-2000:])
        print("FAIL output: expected one 'checksum:' line, got %d" % len(cs))
        sys.exit(1)
    return cs[0]


def read_trace(path):
    recs = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            try:
                recs.append(json.loads(line))
            except ValueError as e:
                print("FAIL trace: line %d of %s is not JSON (%s): %r" % (n, path, e, line[:200]))
                sys.exit(1)
    if not recs or recs[0].get("type") != "header":
        print("FAIL trace: expected a header first line in %s, got %r" % (path, recs[:1]))
        sys.exit(1)
    return recs


def read_counts(path):
    counts = {}
    with open(path) as f:
        for line in f:
            name, n = line.split()
            counts[name] = int(n)
    return counts


def conv_key(op):
    a = op.get("args", {})
    shape = tuple(a.get(k) for k in ("n", "c", "h", "w", "k", "r", "s"))
    tensors = tuple(sorted((t["role"], t["acc"], t["bytes"])
                           for t in op["tensors"] if t["role"] != "ws"))
    return (op["op"], shape, tensors)


def check_api(args, api, tmp):
    mt = [args.minitrain, "--net", args.net, "--batch", "2", "--image", "32",
          "--iters", "2", "--seed", "7", "--conv-api", api]
    base = checksum_of(run(mt, {}))
    trace = os.path.join(tmp, "trace-%s.jsonl" % api)
    counts_path = os.path.join(tmp, "calls-%s.txt" % api)
    p = run(mt, {"LD_PRELOAD": args.callcount + ":" + args.vmem,
                 "VMEM_TRACE": trace, "VMEM_POLICY": "none",
                 "CALLCOUNT_OUT": counts_path})
    got = checksum_of(p)
    print("== --conv-api %s" % api)
    check("checksum", got == base, "%s (without vmem)" % base, got)
    if args.budget:
        p = run(mt, {"LD_PRELOAD": args.vmem, "VMEM_POLICY": "none",
                     "VMEM_DEVICE_LIMIT": args.budget, "VMEM_STATS": "1"})
        faults = re.findall(r"misses \(fault-ins\)\s+(\d+)", p.stderr)
        check("budget", checksum_of(p) == base and faults and int(faults[0]) > 0,
              "%s under VMEM_DEVICE_LIMIT=%s, with fault-ins" % (base, args.budget),
              "%s, fault-ins %s" % (checksum_of(p), faults[0] if faults else "not reported"))

    recs = read_trace(trace)
    ops = [r for r in recs if r.get("type") == "op"]
    end = [r for r in recs if r.get("type") == "end"]
    check("trace-end", len(end) == 1 and end[0].get("dropped") == 0,
          "one 'end' record with dropped 0", end[-1] if end else "no 'end' record")

    counts = read_counts(counts_path)
    per_api = collections.Counter(o["api"] for o in ops)
    bad = {n: (c, per_api.get(n, 0)) for n, c in counts.items() if per_api.get(n, 0) != c}
    called = {n: c for n, c in counts.items() if c}
    check("one-per-call", not bad,
          "op events per function == calls counted (%d functions called: %s)" % (
              len(called), ", ".join("%s %d" % kv for kv in sorted(called.items()))),
          "mismatches (calls, events): %s" % bad if bad else "all equal")

    convs = [o for o in ops if o["op"] in CONV_ROLES]
    role_errors = []
    for o in convs:
        want = CONV_ROLES[o["op"]]
        have = {t["role"]: t for t in o["tensors"]}
        for role, acc in want.items():
            t = have.get(role)
            if t is None or t["acc"] != acc or not t["bytes"]:
                role_errors.append("seq %d %s %s: want %s with bytes > 0, got %s" % (
                    o["seq"], o["api"], o["op"], role + " " + acc,
                    "missing" if t is None else "%s %s bytes %s" % (role, t["acc"], t["bytes"])))
        if o["api"] == "cudnnBackendExecute" and o.get("args", {}).get("plan") != "known":
            role_errors.append("seq %d: cudnnBackendExecute with plan %r" % (
                o["seq"], o.get("args", {}).get("plan")))
    kinds = collections.Counter(o["op"] for o in convs)
    check("conv-roles", convs and not role_errors,
          "every conv event with its roles (%s)" % dict(kinds),
          "; ".join(role_errors[:5]) if role_errors else "%d conv events, all right" % len(convs))
    if api == "graph":
        other = [o["seq"] for o in ops if o["api"] == "cudnnBackendExecute" and o["op"] not in CONV_ROLES]
        check("graph-kinds", not other and counts.get("cudnnBackendExecute", 0) > 0,
              "every cudnnBackendExecute is a convolution kind (and there are some)",
              "non-conv executions at seq %s" % other[:5] if other else
              "%d executions" % counts.get("cudnnBackendExecute", 0))

    gemms = [o for o in ops if o["op"] == "gemm"]
    gemm_errors = []
    for o in gemms:
        have = {t["role"]: t for t in o["tensors"]}
        for role, accs in (("a", ("r",)), ("b", ("r",)), ("c", ("w", "rw"))):
            t = have.get(role)
            if t is None or t["acc"] not in accs or not t["bytes"]:
                gemm_errors.append("seq %d %s: %s want %s, got %s" % (
                    o["seq"], o["api"], role, "/".join(accs), t))
        if not all(k in o.get("args", {}) for k in ("m", "n", "k")):
            gemm_errors.append("seq %d: args without m, n, k: %s" % (o["seq"], o.get("args")))
    check("gemm", gemms and not gemm_errors, "every GEMM: a r, b r, c w|rw, extents and m,n,k",
          "; ".join(gemm_errors[:5]) if gemm_errors else "%d GEMM events, all right" % len(gemms))
    return collections.Counter(conv_key(o) for o in convs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vmem", required=True)
    ap.add_argument("--minitrain", required=True)
    ap.add_argument("--callcount", required=True)
    ap.add_argument("--net", default="vgg16")
    ap.add_argument("--keep", help="keep traces in this directory")
    ap.add_argument("--budget", help="also run under VMEM_DEVICE_LIMIT=BUDGET")
    args = ap.parse_args()
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        print("SKIP: callcount.so needs x86-64 Linux, this is %s %s" % (
            platform.system(), platform.machine()))
        return 77
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
        tmp = args.keep
        legacy = check_api(args, "legacy", tmp)
        graph = check_api(args, "graph", tmp)
    else:
        with tempfile.TemporaryDirectory(prefix="vmem-dnn-") as tmp:
            legacy = check_api(args, "legacy", tmp)
            graph = check_api(args, "graph", tmp)
    print("== legacy vs graph")
    only_l = legacy - graph
    only_g = graph - legacy
    check("same-convs", not only_l and not only_g,
          "the same %d conv events in both APIs" % sum(legacy.values()),
          "only legacy: %s; only graph: %s" % (list(only_l.items())[:3], list(only_g.items())[:3])
          if only_l or only_g else "identical")
    if failures:
        print("FAILED: %s" % ", ".join(failures))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
