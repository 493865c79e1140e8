#!/usr/bin/env python3
"""Checks minitrain on the simulated GPU (suite 'sim').

usage: check_minitrain.py MINITRAIN CHECK [ARGS...]

Checks (each prints what it expected and what it got, exit 1 on failure):
  train NET [minitrain args]      runs; loss lines, checksum and peak printed
  decreasing NET [args]           as train, and the last loss is below the first
  same ARGSETS...                 every ';'-separated argument set gives the
                                  same checksum (and the same losses)
  oom MEM [args]                  with SIMGPU_MEM=MEM: exit 3, 'out of memory'
  vmem-oom LIB BUDGET WANT [args] under libvmem LIB with that budget, host
                                  mapping off (VMEM_HOST_MAP=0) and a
                                  trace: exit 3, vmem's one error line
                                  contains WANT, the trace is whole
  vmem-host LIB BUDGET API [args] the same with host mapping on: trains to
                                  the unlimited run's checksum, and the
                                  trace shows API calls run with their
                                  pages past the budget from the host
                                  ("ran":"host")
  dryrun MEM [args]               with SIMGPU_DRYRUN=1 SIMGPU_MEM=MEM: runs,
                                  reports the peak (and --mem-report lines)
  badargs                         bad options exit 2 naming option and value
  fuzz FIRST COUNT [args]         random:SEED for COUNT seeds from FIRST: the
                                  allocation styles and conv APIs agree
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

CHECKSUM = re.compile(r"^checksum: (0x[0-9a-f]{16})$", re.M)
PEAK = re.compile(r"^peak: (\d+) MiB$", re.M)
ITER = re.compile(r"^iter (\d+) loss (\S+) time (\S+) ms$", re.M)
EVAL = re.compile(r"^eval (\d+) loss (\S+) time (\S+) ms$", re.M)
REUSE = re.compile(r"^cache reuse: (\d+) larger, (\d+) smaller, (\d+) same size$", re.M)


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run(binary, args, env_extra=None, expect_rc=0):
    env = dict(os.environ)
    env.update(env_extra or {})
    cmd = [binary] + args
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    dt = time.time() - t0
    print("$ %s%s  (%.1f s, exit %d)" % (
        "".join("%s=%s " % kv for kv in (env_extra or {}).items()),
        " ".join(cmd), dt, p.returncode))
    out = p.stdout
    if expect_rc is not None and p.returncode != expect_rc:
        print(out[-3000:])
        print(p.stderr[-3000:])
        fail("expected exit code %d, got %d" % (expect_rc, p.returncode))
    return p


def parse(p, args):
    iters = [(int(i), float(l), float(t)) for i, l, t in ITER.findall(p.stdout)]
    cs = CHECKSUM.findall(p.stdout)
    pk = PEAK.findall(p.stdout)
    want = int(args[args.index("--iters") + 1]) if "--iters" in args else 5
    if len(iters) != want:
        print(p.stdout[-3000:])
        fail("expected %d 'iter' lines, got %d" % (want, len(iters)))
    if len(cs) != 1 or len(pk) != 1:
        print(p.stdout[-3000:])
        fail("expected one 'checksum:' and one 'peak:' line, got %d and %d"
             % (len(cs), len(pk)))
    if "caching" in args:
        # the caching style must hand out block starts for tensors of other
        # sizes, larger ones included: what defeats extent guessing in a shim
        m = REUSE.search(p.stdout)
        if not m or int(m.group(1)) == 0 or int(m.group(2)) == 0:
            fail("caching style: expected 'cache reuse: N larger, M smaller, K same size' with "
                 "N, M > 0, got %r" % (m.group(0) if m else None))
    if "--json" in args:
        last = p.stdout.strip().splitlines()[-1]
        j = json.loads(last)
        for k in ("net", "batch", "image", "iters", "alloc", "losses",
                  "checksum", "peak_bytes", "iter_ms"):
            if k not in j:
                fail("JSON summary lacks '%s': %s" % (k, last))
        if j["checksum"] != cs[0]:
            fail("JSON checksum %s, text checksum %s" % (j["checksum"], cs[0]))
    return iters, cs[0], int(pk[0])


def check_train(binary, args, decreasing=False):
    net = args[0]
    args = ["--net", net] + args[1:]
    p = run(binary, args)
    iters, cs, peak = parse(p, args)
    losses = [l for _, l, _ in iters]
    print("losses %s checksum %s peak %d MiB" % (
        " ".join("%.4f" % l for l in losses), cs, peak))
    for l in losses:
        if l != l or l <= 0 or l > 1e4:
            fail("loss %r is not a finite positive number" % l)
    if peak <= 0:
        fail("expected a positive peak, got %d MiB" % peak)
    if decreasing and not losses[-1] < losses[0]:
        fail("expected the loss to go down: first %.6f, last %.6f"
             % (losses[0], losses[-1]))
    print("OK")


def check_same(binary, argsets):
    ref = None
    for a in argsets:
        args = a.split()
        p = run(binary, args)
        iters, cs, peak = parse(p, args)
        losses = [l for _, l, _ in iters] + [
            float(l) for _, l, _ in EVAL.findall(p.stdout)]
        print("  checksum %s peak %d MiB losses %s" % (
            cs, peak, " ".join("%.6f" % l for l in losses)))
        if ref is None:
            ref = (a, cs, losses)
        else:
            if cs != ref[1]:
                fail("expected checksum %s (from: %s), got %s (from: %s)"
                     % (ref[1], ref[0], cs, a))
            if losses != ref[2]:
                fail("expected losses %s (from: %s), got %s (from: %s)"
                     % (ref[2], ref[0], losses, a))
    print("OK: %d runs, checksum %s" % (len(argsets), ref[1]))


def check_fuzz(binary, first, count, args):
    variants = ["--alloc per-tensor", "--alloc network",
                "--alloc caching --conv-api graph"]
    for seed in range(first, first + count):
        base = "--net random:%d %s" % (seed, " ".join(args))
        check_same(binary, [base + " " + v for v in variants])


def check_oom(binary, mem, args):
    p = run(binary, args, {"SIMGPU_MEM": mem}, expect_rc=None)
    err = p.stderr
    m = re.search(r"out of memory: (\S+) requested (\d+) bytes", err)
    if p.returncode != 3 or not m:
        print(p.stdout[-2000:])
        print(err[-2000:])
        fail("expected exit 3 and 'out of memory: <call> requested <n> bytes', "
             "got exit %d" % p.returncode)
    if "checksum:" in p.stdout:
        fail("expected no checksum after out of memory")
    print("OK: %s" % m.group(0))


def check_vmem_oom(binary, lib, budget, want, args):
    """Under vmem (LIB) with VMEM_DEVICE_LIMIT=BUDGET and a trace: minitrain
    stops with exit 3, vmem's one error line says why (contains WANT), and
    the trace is whole - every line a JSON record, the refused call's op
    record among them with its tensors' roles (a convolution refused before
    any prepare once wrote uninitialised ones and crashed)."""
    with tempfile.TemporaryDirectory() as d:
        tr = os.path.join(d, "t.jsonl")
        # host mapping off: with it a call nothing else fits runs with its
        # pages past the budget mapped from the host instead
        p = run(binary, args, {"LD_PRELOAD": lib, "VMEM_DEVICE_LIMIT": budget,
                               "VMEM_TRACE": tr, "VMEM_HOST_MAP": "0"}, expect_rc=None)
        lines = [l for l in p.stderr.splitlines()
                 if l.startswith("vmem: error:") and "answered out of memory" in l]
        if p.returncode != 3 or len(lines) != 1 or want not in lines[0]:
            print(p.stderr[-3000:])
            fail("expected exit 3 and one vmem error line containing\n  %s\ngot exit %d and "
                 "%d lines:\n%s" % (want, p.returncode, len(lines), "\n".join(lines)))
        api = want.split(" ", 1)[0]
        ops = []
        with open(tr) as f:
            for n, line in enumerate(f, 1):
                try:
                    r = json.loads(line)
                except ValueError:
                    fail("trace line %d is not JSON: %r" % (n, line[:200]))
                if r.get("type") == "op" and r.get("api") == api:
                    ops.append(r)
        if not ops or not all(isinstance(t.get("role"), str) for t in ops[-1].get("tensors", [])):
            fail("expected the refused %s's op record with its tensors' roles in the trace, "
                 "got %s" % (api, ops[-1] if ops else "none"))
    print("OK: %s" % lines[0])


def check_vmem_host(binary, lib, budget, api, args):
    """Under vmem (LIB) with VMEM_DEVICE_LIMIT=BUDGET and host mapping on,
    a net check_vmem_oom sees refused trains to the unlimited run's
    checksum, and API's calls ran from the host (the trace's "ran")."""
    base = CHECKSUM.findall(run(binary, args).stdout)
    with tempfile.TemporaryDirectory() as d:
        tr = os.path.join(d, "t.jsonl")
        p = run(binary, args, {"LD_PRELOAD": lib, "VMEM_DEVICE_LIMIT": budget,
                               "VMEM_TRACE": tr, "VMEM_HOST_MAP": "1"}, expect_rc=None)
        got = CHECKSUM.findall(p.stdout)
        if p.returncode != 0 or not base or got != base:
            print(p.stderr[-3000:])
            fail("expected exit 0 and the unlimited checksum %s, got exit %d and %s"
                 % (base, p.returncode, got))
        ran = 0
        with open(tr) as f:
            for line in f:
                r = json.loads(line)
                if r.get("type") == "op" and r.get("api") == api and \
                        r.get("args", {}).get("ran") == "host":
                    ran += 1
        if not ran:
            fail("expected %s calls run from the host (\"ran\":\"host\") in the trace, "
                 "got none" % api)
    print("OK: checksum %s, %d %s calls run from the host" % (got[0], ran, api))


def check_dryrun(binary, mem, args):
    p = run(binary, args, {"SIMGPU_DRYRUN": "1", "SIMGPU_MEM": mem})
    iters, cs, peak = parse(p, args)
    print("dry run peak: %d MiB (%.1f GiB)" % (peak, peak / 1024.0))
    for line in p.stdout.splitlines():
        if line.startswith("  ") or line.startswith("memory report"):
            print(line)
    if peak < 1024:
        fail("expected a peak of several GiB, got %d MiB" % peak)
    print("OK")


def check_badargs(binary):
    cases = [
        (["--net", "vgg16", "--batch", "zero"], "--batch", "zero"),
        (["--net", "vgg16", "--alloc", "pooled"], "--alloc", "pooled"),
        (["--net", "nosuchnet"], "--net", "nosuchnet"),
        (["--net", "vgg16", "--conv-api", "v8"], "--conv-api", "v8"),
        (["--net", "vgg16", "--batch-change", "3"], "--batch-change", "3"),
        (["--net", "alexnet", "--image", "4"], "--image", "4"),
        (["--net", "vgg16", "--lr", "-1"], "--lr", "-1"),
    ]
    for args, opt, val in cases:
        p = run(binary, args, expect_rc=2)
        lines = p.stderr.strip().splitlines()
        if len(lines) != 1 or opt not in lines[0] or val not in lines[0]:
            fail("expected one line naming %s and '%s', got %r" % (opt, val, p.stderr))
    p = run(binary, ["--help"])
    for net in ("alexnet", "vgg16", "vgg19", "vgg416", "resnet", "inception",
                "densenet", "random:SEED"):
        if net not in p.stdout:
            fail("--help does not list %s" % net)
    print("OK")


def main():
    if len(sys.argv) < 3:
        fail(__doc__)
    binary, check, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
    if check == "train":
        check_train(binary, rest)
    elif check == "decreasing":
        check_train(binary, rest, decreasing=True)
    elif check == "same":
        check_same(binary, " ".join(rest).split(";"))
    elif check == "oom":
        check_oom(binary, rest[0], rest[1:])
    elif check == "vmem-oom":
        check_vmem_oom(binary, rest[0], rest[1], rest[2], rest[3:])
    elif check == "vmem-host":
        check_vmem_host(binary, rest[0], rest[1], rest[2], rest[3:])
    elif check == "dryrun":
        check_dryrun(binary, rest[0], rest[1:])
    elif check == "fuzz":
        check_fuzz(binary, int(rest[0]), int(rest[1]), rest[2:])
    elif check == "badargs":
        check_badargs(binary)
    else:
        fail("unknown check %s" % check)


if __name__ == "__main__":
    main()
