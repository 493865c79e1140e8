#!/usr/bin/env python3
"""vmem's convolution decisions on the simulated GPU (suite 'sim'):
µ-cuDNN micro-batches (VMEM_WORKSPACE=wr|wd, issue 13) and the algorithm
choice under the budget (VMEM_CONV_ALGO, the rescue; issue 12).

usage: run_solver.py CHECK --vmem LIBVMEM --minitrain MINITRAIN [options]

checks (each prints what it expected and what it got; exit 1 on failure):
  checksums --net NET [--image N]   minitrain NET trained under wr and wd, on
        both conv APIs, gives the weight checksum of a run without vmem:
        with the benchmark as measured, and with a cache whose micro-batch
        times are scaled down (seeded) so that nearly every convolution runs
        as several micro-batches of mixed algorithms and sizes
  time       dry run, AlexNet at batch 64 on the titanx model, WR at 64 MiB:
        pow2 is faster than undivided per iteration, every kernel's
        configuration is no slower than undivided, and strictly faster
        wherever a faster algorithm that does not fit at the full batch fits
        at a smaller one in few enough pieces to pay (some do)
  noglpk     with GLPK hidden (noglpk.so refuses to dlopen it): wd says so in
        one line naming the package, runs wr, same checksum; and libvmem.so
        does not need libglpk (no DT_NEEDED)
  infeasible a cache without zero-workspace algorithms and a 1-byte limit:
        wd and wr fall back to the memory-optimal algorithms and say so once,
        same checksum
  cache      VMEM_CACHE: written, then read instead of benchmarking again; a
        damaged file is ignored with one warning and rewritten; a foreign file
        is ignored with one warning and left untouched
  rescue     minitrain vgg19 at batch 256 in dry run on the 12 GiB titanx (the
        application's FFT workspace cannot sit beside the layer's tensors)
        trains; random:39 with the caching allocator at half its peak trains
        to the checksum of a run without vmem
  plan-room  under a policy, each kernel's limit is what the plan leaves
        free where it runs (issue 13): the vDNN paper's VGG-16 at batch 256
        on the 12 GiB titanx (dry run) under dyn + wr, some limits lowered to
        a room between 0 and the budget beside the tensors, every chosen
        workspace within its room, the change made between two iterations and
        a plan made after it that holds; resnet18 at half its peak (caching
        allocator) under dyn + wr and + wd trains to the checksum of a run
        without vmem, every configuration within its room
  conv-algo  VMEM_CONV_ALGO=mem answers every legacy query with a
        zero-workspace algorithm and the workspace queries agree; on the graph
        API the heuristics' first engine config needs no workspace; perf keeps
        the fastest; fit under a budget keeps every workspace beside its
        tensors within it
"""
import argparse
import collections
import json
import os
import random
import re
import subprocess
import sys
import tempfile

CHECKSUM = re.compile(r"^checksum: (0x[0-9a-f]{16})$", re.M)
ITER = re.compile(r"^iter (\d+) loss \S+ time (\S+) ms$", re.M)
MiB = 1 << 20

failures = []


def check(name, ok, expected, got):
    print("%s %-14s expected: %s" % ("ok  " if ok else "FAIL", name, expected))
    print("     %-14s got:      %s" % ("", got))
    if not ok:
        failures.append(name)
    return ok


def run(cmd, env_extra, expect_rc=0):
    env = dict(os.environ)
    env.update(env_extra)
    print("$ %s %s" % (" ".join("%s=%s" % kv for kv in sorted(env_extra.items())),
                       " ".join(cmd)), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if expect_rc is not None and p.returncode != expect_rc:
        print(p.stdout[-3000:])
        print(p.stderr[-3000:])
        print("FAIL run: expected exit code %d, got %d" % (expect_rc, p.returncode))
        sys.exit(1)
    return p


def checksum_of(p):
    cs = CHECKSUM.findall(p.stdout)
    if len(cs) != 1:
        print(p.stdout[-2000:])
        print("FAIL output: expected one 'checksum:' line, got %d" % len(cs))
        sys.exit(1)
    return cs[0]


def iter_ms(p, i):
    for n, t in ITER.findall(p.stdout):
        if int(n) == i:
            return float(t)
    print(p.stdout[-2000:])
    print("FAIL output: expected an 'iter %d' line" % i)
    sys.exit(1)


def read_trace(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def ops(recs):
    return [r for r in recs if r.get("type") == "op"]


def solver_recs(recs, mode=None):
    return [r for r in recs if r.get("type") == "solver" and (mode is None or r["mode"] == mode)]


def convs(recs):
    return [r for r in ops(recs) if r["op"] in ("conv_fwd", "conv_bwd_data", "conv_bwd_filter")]


def stat(p, name):
    m = re.search(r"vmem: %s\s+(\d+)" % re.escape(name), p.stderr)
    return int(m.group(1)) if m else 0


def warn_lines(p, needle):
    return [l for l in p.stderr.splitlines() if l.startswith("vmem: warn") and needle in l]


# ---- cache files (the format of solver/cache.c) ----

def fnv1a(data):
    h = 0xcbf29ce484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001b3) & 0xffffffffffffffff
    return h


def cache_read(path):
    """[(key, cap, batch, quantum, rows)] of a cache file, checksum verified."""
    text = open(path, "rb").read()
    body, last = text.rstrip(b"\n").rsplit(b"\n", 1)
    body += b"\n"
    assert last.startswith(b"sum ") and int(last[4:], 16) == fnv1a(body), "bad cache checksum"
    lines = body.decode().splitlines()
    assert lines[0] == "vmem-solver-cache 1"
    out, i = [], 1
    while i < len(lines):
        _, key, cap, batch, q, n = lines[i].split()
        rows = [tuple(l.split()) for l in lines[i + 1:i + 1 + int(n)]]
        rows = [(int(b), int(a), float(t), int(w)) for b, a, t, w in rows]
        out.append((key, int(cap), int(batch), int(q), rows))
        i += 1 + int(n)
    return out


def cache_write(path, entries):
    s = "vmem-solver-cache 1\n"
    for key, cap, batch, q, rows in entries:
        s += "k %s %d %d %d %d\n" % (key, cap, batch, q, len(rows))
        for b, a, t, w in rows:
            s += "%d %d %.17g %d\n" % (b, a, t, w)
    data = s.encode()
    data += b"sum %016x\n" % fnv1a(data)
    with open(path, "wb") as f:
        f.write(data)


# ---- checks ----

def mt_cmd(args, net, extra):
    return [args.minitrain, "--net", net, "--iters", "2", "--seed", "3"] + extra


def count_split(recs, how):
    runs = [o for o in convs(recs) if o["args"].get("ran") == how]
    return len(runs), sum(1 for o in runs if o["args"]["calls"] > 1)


def check_checksums(args, tmp):
    shape = ["--batch", str(args.batch), "--image", str(args.image)]
    for api in ("legacy", "graph"):
        mt = mt_cmd(args, args.net, shape + ["--conv-api", api])
        base = checksum_of(run(mt, {}))
        print("== %s, --conv-api %s: without vmem %s" % (args.net, api, base))
        cache = os.path.join(tmp, "cache-%s" % api)
        trace = os.path.join(tmp, "t-%s.jsonl" % api)
        env = {"LD_PRELOAD": args.vmem, "VMEM_WORKSPACE": "wr", "VMEM_MICROBATCH": "all",
               "VMEM_WORKSPACE_LIMIT": args.limit, "VMEM_CACHE": cache, "VMEM_TRACE": trace}
        p = run(mt, env)
        n, split = count_split(read_trace(trace), "wr")
        check("wr-measured", checksum_of(p) == base and n > 0,
              "%s, every conv run by vmem's configuration" % base,
              "%s, %d convs as configurations (%d split)" % (checksum_of(p), n, split))
        # scaled: micro-batches made cheap, so configurations split; the
        # benchmark behind it is taken under the larger (wd) limit, so the
        # cache serves both runs
        os.unlink(cache)
        run(mt, dict(env, VMEM_WORKSPACE_LIMIT="8M"))
        rnd = random.Random(11)
        entries = []
        for key, cap, batch, q, rows in cache_read(cache):
            rows = [(b, a, t * (rnd.uniform(0.02, 0.3) if b < batch else 1.0), w)
                    for b, a, t, w in rows]
            entries.append((key, cap, batch, q, rows))
        scaled = os.path.join(tmp, "scaled-%s" % api)
        cache_write(scaled, entries)
        for ws, lim in (("wr", args.limit), ("wd", "8M")):
            t2 = os.path.join(tmp, "t2-%s-%s.jsonl" % (api, ws))
            p = run(mt, dict(env, VMEM_WORKSPACE=ws, VMEM_CACHE=scaled, VMEM_TRACE=t2,
                             VMEM_WORKSPACE_LIMIT=lim, VMEM_STATS="1"))
            recs = read_trace(t2)
            n, split = count_split(recs, ws)
            sizes = collections.Counter()
            for o in convs(recs):
                if o["args"].get("ran") == ws:
                    sizes[o["args"]["calls"]] += 1
            # wd runs its first iteration memory-optimal ("wd-first") and
            # solves the program once all kernels have been seen
            first = count_split(recs, "wd-first")[0] if ws == "wd" else 0
            check("%s-split" % ws,
                  checksum_of(p) == base and split > n // 2 and
                  stat(p, "convs run as micro-batches") == n + first and
                  stat(p, "conv kernels benchmarked") == 0,
                  "%s, most convs run as several micro-batches" % base,
                  "%s, %d of %d split (calls per conv: %s)" % (
                      checksum_of(p), split, n, dict(sorted(sizes.items()))))
            if ws == "wd":
                wq = [o for o in ops(recs) if o["op"] == "ws_query" and "vmem_ws" in o["args"]]
                wd = solver_recs(recs, "wd")
                # graph API: the plan's workspace size is answered through
                # cudnnBackendGetAttribute; the side table records the answer
                # as the plan's "ws" at Execute
                if api == "graph":
                    wq = [o for o in convs(recs) if o["api"] == "cudnnBackendExecute"]
                    answered = [o["args"]["ws"] for o in wq]
                else:
                    answered = [o["args"]["vmem_ws"] for o in wq]
                check("wd-answers",
                      wq and all(a == 0 for a in answered)
                      and wd and wd[-1]["status"] == "optimal" and wd[-1]["vars"] > 0,
                      "workspace sizes answered 0, a solved program in the trace",
                      "%d workspace answers %s; last solve %s" % (
                          len(wq), sorted(set(answered)),
                          {k: wd[-1][k] for k in ("status", "vars", "unpruned", "objective_ms",
                                                  "solve_ns")} if wd else None))


def check_time(args, tmp):
    mt = mt_cmd(args, "alexnet", ["--batch", "64", "--image", "224", "--classes", "1000",
                                  "--iters", "3"])
    env = {"LD_PRELOAD": args.vmem, "SIMGPU_DRYRUN": "1", "SIMGPU_MODEL": "titanx",
           "VMEM_WORKSPACE": "wr", "VMEM_WORKSPACE_LIMIT": "64M"}
    res = {}
    for mb in ("undivided", "pow2"):
        cache = os.path.join(tmp, "cache-%s" % mb)
        trace = os.path.join(tmp, "t-%s.jsonl" % mb)
        p = run(mt, dict(env, VMEM_MICROBATCH=mb, VMEM_CACHE=cache, VMEM_TRACE=trace))
        res[mb] = (iter_ms(p, 2), read_trace(trace), cache)
    check("iteration", res["pow2"][0] < res["undivided"][0],
          "pow2 faster than undivided at 64 MiB", "%.3f ms vs %.3f ms (%.2fx)" % (
              res["pow2"][0], res["undivided"][0], res["undivided"][0] / res["pow2"][0]))
    # every algorithm's time, also those that do not fit 64 MiB: a benchmark
    # without a limit
    full_cache = os.path.join(tmp, "cache-nolimit")
    run(mt, dict(env, VMEM_MICROBATCH="pow2", VMEM_CACHE=full_cache, VMEM_WORKSPACE_LIMIT="0"))
    tables = {key.split(";mb=")[0]: (batch, rows)
              for key, cap, batch, q, rows in cache_read(full_cache)}
    limit = 64 * MiB
    bad, better, must = [], 0, 0
    for r in solver_recs(res["pow2"][1], "wr"):
        und = r["undivided_ms"]
        if r["time_ms"] > und * (1 + 1e-9):
            bad.append("%s slower than undivided (%f > %f)" % (r["kernel"], r["time_ms"], und))
        better += r["time_ms"] < und * (1 - 1e-9)
    # the kernels where a faster algorithm does not fit at the full batch and
    # k pieces of the largest size where it fits (plus the remainder, run
    # the fastest way that fits) beat undivided: the DP is optimal, so their
    # configuration must be strictly faster than undivided
    must, missed = set(), []
    for r in solver_recs(res["pow2"][1], "wr"):
        batch, rows = tables[r["key"].split(";mb=")[0]]
        full = [(t, a, w) for b, a, t, w in rows if b == batch]
        und = min(t for t, a, w in full if w <= limit)
        for t, a, w in full:
            fits = [(b, tt) for b, aa, tt, ww in rows if aa == a and ww <= limit and b < batch]
            if t >= und or w <= limit or not fits:
                continue
            b, tt = max(fits)
            rest = batch % b
            cost = (batch // b) * tt
            if rest:
                rr = [t2 for b2, a2, t2, w2 in rows if b2 == rest and w2 <= limit]
                cost += min(rr) if rr else 1e30
            if cost < und * (1 - 1e-6):
                must.add(r["kernel"])
                if not r["time_ms"] < r["undivided_ms"] * (1 - 1e-9):
                    missed.append("%s (%f, undivided %f, algorithm %d in %dx%d: %f)" % (
                        r["kernel"], r["time_ms"], r["undivided_ms"], a, batch // b, b, cost))
    bad += missed
    check("per-kernel", not bad and must,
          "every configuration no slower than undivided; strictly faster where a "
          "faster algorithm fits in pieces that pay (%d such kernels)" % len(must),
          "%d faster, %s" % (better, "; ".join(bad) or "none slower"))


def check_noglpk(args, tmp):
    out = subprocess.run(["readelf", "-d", args.vmem], capture_output=True, text=True).stdout
    needed = re.findall(r"\(NEEDED\).*\[(.*)\]", out)
    check("no-needed", needed and not any("glpk" in n for n in needed),
          "libvmem.so does not need libglpk (dlopen'ed for wd only)", needed)
    mt = mt_cmd(args, "alexnet", ["--batch", "8", "--image", "64"])
    base = checksum_of(run(mt, {}))
    trace = os.path.join(tmp, "t.jsonl")
    p = run(mt, {"LD_PRELOAD": args.noglpk + ":" + args.vmem, "VMEM_WORKSPACE": "wd",
                 "VMEM_WORKSPACE_LIMIT": "8M", "VMEM_TRACE": trace})
    lines = [l for l in p.stderr.splitlines() if "GLPK" in l]
    recs = read_trace(trace)
    check("fallback", checksum_of(p) == base and len(lines) == 1 and "libglpk40" in lines[0]
          and "wr" in lines[0] and solver_recs(recs, "wr") and not solver_recs(recs, "wd"),
          "%s; one line naming the package and wr; wr decisions, no wd" % base,
          "%s; %d line(s) %s; %d wr, %d wd decisions" % (
              checksum_of(p), len(lines), lines, len(solver_recs(recs, "wr")),
              len(solver_recs(recs, "wd"))))
    # and with GLPK there, the same run solves the program
    p = run(mt, {"LD_PRELOAD": args.vmem, "VMEM_WORKSPACE": "wd", "VMEM_WORKSPACE_LIMIT": "8M",
                 "VMEM_TRACE": trace})
    check("with-glpk", solver_recs(read_trace(trace), "wd") and not
          [l for l in p.stderr.splitlines() if "GLPK" in l],
          "wd decisions and no GLPK message when it is installed",
          "%d wd records" % len(solver_recs(read_trace(trace), "wd")))


def check_infeasible(args, tmp):
    mt = mt_cmd(args, "alexnet", ["--batch", "2", "--image", "64"])
    base = checksum_of(run(mt, {}))
    cache = os.path.join(tmp, "cache")
    run(mt, {"LD_PRELOAD": args.vmem, "VMEM_WORKSPACE": "wr", "VMEM_CACHE": cache})
    entries = [(k, c, b, q, [r for r in rows if r[3] > 0]) for k, c, b, q, rows in cache_read(cache)]
    entries = [e for e in entries if e[4]]
    cache_write(cache, entries)
    for ws, needle in (("wd", "cannot all fit"), ("wr", "no configuration")):
        trace = os.path.join(tmp, "t-%s.jsonl" % ws)
        p = run(mt, {"LD_PRELOAD": args.vmem, "VMEM_WORKSPACE": ws, "VMEM_WORKSPACE_LIMIT": "1",
                     "VMEM_CACHE": cache, "VMEM_TRACE": trace, "VMEM_STATS": "1"})
        lines = warn_lines(p, needle)
        recs = solver_recs(read_trace(trace), ws)
        least = True
        tables = {k: rows for k, c, b, q, rows in entries}
        status = [r["status"] for r in recs]
        check("%s-infeasible" % ws,
              checksum_of(p) == base and len(lines) == 1 and "memory-optimal" in lines[0]
              and "infeasible" in status and stat(p, "conv kernels from VMEM_CACHE") > 0,
              "%s; one line saying memory-optimal; decisions marked infeasible" % base,
              "%s; %d line(s): %s; statuses %s" % (checksum_of(p), len(lines), lines,
                                                   sorted(set(status))))
        del least, tables


def check_cache(args, tmp):
    # batch 2: what is checked is the file (written, read, damaged,
    # foreign); three of the four runs benchmark every kernel, and a
    # smaller batch has fewer micro-batch sizes to benchmark
    mt = mt_cmd(args, "alexnet", ["--batch", "2", "--image", "64"])
    cache = os.path.join(tmp, "cache")
    env = {"LD_PRELOAD": args.vmem, "VMEM_WORKSPACE": "wr", "VMEM_CACHE": cache,
           "VMEM_STATS": "1"}
    p1 = run(mt, env)
    n = stat(p1, "conv kernels benchmarked")
    entries = cache_read(cache) if os.path.exists(cache) else []
    check("written", n > 0 and len(entries) == n,
          "every benchmarked kernel in the file", "%d benchmarked, %d in the file" % (n, len(entries)))
    p2 = run(mt, env)
    check("read", stat(p2, "conv kernels benchmarked") == 0 and
          stat(p2, "conv kernels from VMEM_CACHE") == n and checksum_of(p2) == checksum_of(p1),
          "no benchmark, %d kernels from the cache, same checksum" % n,
          "%d benchmarked, %d from the cache, %s vs %s" % (
              stat(p2, "conv kernels benchmarked"), stat(p2, "conv kernels from VMEM_CACHE"),
              checksum_of(p2), checksum_of(p1)))
    data = bytearray(open(cache, "rb").read())
    data[len(data) // 2] ^= 0x04
    open(cache, "wb").write(bytes(data))
    p3 = run(mt, env)
    lines = warn_lines(p3, "VMEM_CACHE")
    ok_after = True
    try:
        cache_read(cache)
    except Exception:
        ok_after = False
    check("damaged", len(lines) == 1 and "damaged" in lines[0] and
          stat(p3, "conv kernels benchmarked") == n and ok_after,
          "one warning, benchmarked again, the file rewritten whole",
          "%d warning(s) %s, %d benchmarked, file valid after: %s" % (
              len(lines), lines, stat(p3, "conv kernels benchmarked"), ok_after))
    foreign = b'{"not": "a vmem cache"}\n'
    open(cache, "wb").write(foreign)
    p4 = run(mt, env)
    lines = warn_lines(p4, "VMEM_CACHE")
    check("foreign", len(lines) == 1 and "not a vmem solver cache" in lines[0] and
          open(cache, "rb").read() == foreign,
          "one warning, the file left untouched",
          "%d warning(s) %s, file unchanged: %s" % (len(lines), lines,
                                                    open(cache, "rb").read() == foreign))


def check_rescue(args, tmp):
    mt = [args.minitrain, "--net", "vgg19", "--batch", "256", "--image", "224", "--iters", "1",
          "--classes", "1000"]
    p = run(mt, {"LD_PRELOAD": args.vmem, "SIMGPU_DRYRUN": "1", "SIMGPU_MODEL": "titanx",
                 "VMEM_STATS": "1"}, expect_rc=None)
    check("vgg19-b256", p.returncode == 0 and stat(p, "convs rescued (ws did not fit)") > 0,
          "trains on the 12 GiB titanx (exit 0), some convs rescued",
          "exit %d, %d rescued; %s" % (p.returncode, stat(p, "convs rescued (ws did not fit)"),
                                       (p.stdout + p.stderr).strip().splitlines()[-1:]))
    mt = [args.minitrain, "--net", "random:39", "--image", "32", "--batch", "8", "--iters", "2",
          "--alloc", "caching"]
    base = checksum_of(run(mt, {}))
    trace = os.path.join(tmp, "t.jsonl")
    p = run(mt, {"LD_PRELOAD": args.vmem, "VMEM_DEVICE_LIMIT": "28M", "VMEM_STATS": "1",
                 "VMEM_TRACE": trace}, expect_rc=None)
    resc = [o for o in convs(read_trace(trace)) if o["args"].get("ran") == "rescue"]
    check("random-half", p.returncode == 0 and checksum_of(p) == base and resc,
          "%s at 28 MiB (half its peak), the FFT-class workspaces rescued" % base,
          "exit %d, %s, %d rescued (%s)" % (
              p.returncode, CHECKSUM.findall(p.stdout), len(resc),
              sorted(set((o["args"]["algo"], o["args"]["ran_algo"]) for o in resc))))
    # per-tensor: the application allocates the workspace of its algorithm
    # (cudnnGet*WorkspaceSize, the plan's workspace size), 27 MB for the
    # FFT-class ones - more than the whole 21 MiB budget, so that cudaMalloc
    # failed before the call could be rescued.  vmem answers the rescue's
    # size, and the rescue runs in what the application allocated.
    mt = [args.minitrain, "--net", "random:39", "--image", "32", "--batch", "8", "--iters", "3",
          "--alloc", "per-tensor"]
    base = checksum_of(run(mt, {}))
    for api in ("legacy", "graph"):
        p = run(mt + ["--conv-api", api],
                {"LD_PRELOAD": args.vmem, "VMEM_DEVICE_LIMIT": "21M", "VMEM_CONV_ALGO": "app",
                 "VMEM_STATS": "1", "VMEM_TRACE": trace}, expect_rc=None)
        recs = read_trace(trace)
        resc = [o for o in convs(recs) if o["args"].get("ran") == "rescue"]
        own = [r for r in recs if r.get("type") == "alloc" and r.get("api") == "vmem:conv"]
        answered = stat(p, "conv queries answered by vmem")
        check("per-tensor-" + api,
              p.returncode == 0 and checksum_of(p) == base and resc and answered > 0 and not own,
              "%s at 21 MiB, workspace sizes answered with the rescue's, the rescued calls "
              "in the application's workspace (no allocation of vmem's own)" % base,
              "exit %d, %s, %d answered, %d rescued, %d workspaces of vmem's; %s" % (
                  p.returncode, CHECKSUM.findall(p.stdout), answered, len(resc), len(own),
                  (p.stdout + p.stderr).strip().splitlines()[-1:]))
    # per-tensor where a layer's tensors alone fill the budget: random:55555
    # at 15 MiB (about 1/3 of its peak) asks about a 19.6 MB workspace for
    # convolutions whose tensors take the whole budget.  vmem answers with
    # the workspace of the algorithm its slices will run beside a quarter
    # of the budget, and runs them so (the legacy API's rescue in slices;
    # on the H100 the whole rescue found no room: out of memory).  Before,
    # cuDNN's answer stood and the application's cudaMalloc of it failed.
    mt = [args.minitrain, "--net", "random:55555", "--image", "64", "--batch", "16",
          "--iters", "2", "--alloc", "per-tensor"]
    base = checksum_of(run(mt, {}))
    for api in ("legacy", "graph"):
        p = run(mt + ["--conv-api", api],
                {"LD_PRELOAD": args.vmem, "VMEM_DEVICE_LIMIT": "15M", "VMEM_CONV_ALGO": "app",
                 "VMEM_STATS": "1", "VMEM_TRACE": trace}, expect_rc=None)
        sl = [o for o in convs(read_trace(trace)) if "slice_images" in o["args"]]
        answered = stat(p, "conv queries answered by vmem")
        check("full-" + api,
              p.returncode == 0 and checksum_of(p) == base and sl and answered > 0,
              "%s at 15 MiB, workspace sizes answered, convolutions run in slices" % base,
              "exit %d, %s, %d answered, %d slices; %s" % (
                  p.returncode, CHECKSUM.findall(p.stdout), answered, len(sl),
                  (p.stdout + p.stderr).strip().splitlines()[-1:]))


def check_conv_algo(args, tmp):
    mt = mt_cmd(args, "alexnet", ["--batch", "8", "--image", "64"])
    base = checksum_of(run(mt, {}))
    trace = os.path.join(tmp, "t.jsonl")
    # mem: every answer needs no workspace, and the workspace queries agree
    p = run(mt, {"LD_PRELOAD": args.vmem, "VMEM_CONV_ALGO": "mem", "VMEM_TRACE": trace})
    recs = read_trace(trace)
    q = [o for o in ops(recs) if o["op"] == "algo_query"]
    w = [o for o in ops(recs) if o["op"] == "ws_query"]
    c = convs(recs)
    check("mem-legacy", checksum_of(p) == base and q and all(o["args"]["ws"] == 0 for o in q)
          and all(o["args"]["ws"] == 0 for o in w) and all(o["args"]["ws"] == 0 for o in c),
          "%s; every query answered with a zero-workspace algorithm, ws queries 0, "
          "convs run without workspace" % base,
          "%s; answers %s, ws queries %s, conv ws %s" % (
              checksum_of(p), sorted(set((o["args"]["algo"], o["args"]["ws"]) for o in q)),
              sorted(set(o["args"]["ws"] for o in w)), sorted(set(o["args"]["ws"] for o in c))))
    p = run(mt + ["--conv-api", "graph"], {"LD_PRELOAD": args.vmem, "VMEM_CONV_ALGO": "mem",
                                           "VMEM_TRACE": trace})
    c = convs(read_trace(trace))
    check("mem-graph", checksum_of(p) == base and c and all(o["args"]["ws"] == 0 for o in c),
          "%s; every plan chosen from the reordered heuristics needs no workspace" % base,
          "%s; plan workspaces %s" % (checksum_of(p), sorted(set(o["args"]["ws"] for o in c))))
    # perf: the fastest, as cuDNN lists it (what minitrain picks without vmem)
    p0 = run(mt, {"LD_PRELOAD": args.vmem, "VMEM_CONV_ALGO": "app", "VMEM_TRACE": trace})
    app = [(o["op"], o["args"]["algo"]) for o in convs(read_trace(trace))]
    p = run(mt, {"LD_PRELOAD": args.vmem, "VMEM_CONV_ALGO": "perf", "VMEM_TRACE": trace})
    perf = [(o["op"], o["args"]["algo"]) for o in convs(read_trace(trace))]
    check("perf", perf == app and checksum_of(p) == checksum_of(p0),
          "the algorithms cuDNN lists first", "same as the application's: %s" % (perf == app))
    # fit: random:39 at half its peak, where the fastest (FFT-class)
    # workspaces do not fit beside their tensors: answered, nothing to rescue
    mt = [args.minitrain, "--net", "random:39", "--image", "32", "--batch", "8", "--iters", "2",
          "--alloc", "caching"]
    base = checksum_of(run(mt, {}))
    run(mt, {"LD_PRELOAD": args.vmem, "VMEM_TRACE": trace})
    big = max(o["args"]["ws"] for o in convs(read_trace(trace)))
    budget = 28 * MiB
    p = run(mt, {"LD_PRELOAD": args.vmem, "VMEM_CONV_ALGO": "fit", "VMEM_TRACE": trace,
                 "VMEM_DEVICE_LIMIT": str(budget), "VMEM_STATS": "1"})
    c = convs(read_trace(trace))
    worst = max(o["args"]["ws"] + sum(t["bytes"] for t in o["tensors"] if t["role"] != "ws")
                for o in c)
    check("fit", checksum_of(p) == base and worst <= budget and
          stat(p, "convs rescued (ws did not fit)") == 0,
          "%s; every conv's workspace beside its tensors within 28 MiB (the fastest needs "
          "%d bytes), nothing left to rescue" % (base, big),
          "%s; largest ws + tensors %d bytes, %d rescued" % (
              checksum_of(p), worst, stat(p, "convs rescued (ws did not fit)")))


def plan_room_records(recs):
    """(kernel, limit, plan_room, ws) of every WR decision and WD choice
    taken with a room from the plan."""
    out = []
    for r in solver_recs(recs):
        if r["mode"] == "wr" and r.get("plan_room", -1) >= 0:
            out.append((r["kernel"], r["limit"], r["plan_room"], r["ws"], r["seq"]))
        elif r["mode"] == "wd":
            out += [(c["kernel"], None, c["plan_room"], c["ws"], r["seq"])
                    for c in r["choices"] if c.get("plan_room", -1) >= 0]
    return out


def check_plan_room(args, tmp):
    # the paper-scale case, dry run: rooms strictly between 0 and the limit
    # each kernel had beside its own tensors.  At the Titan X's whole 12 GiB
    # the plan leaves every kernel the room WR chose (since tensors alone in
    # their pages move, 2026-11-26); at 10 GiB it does not
    trace = os.path.join(tmp, "vgg.jsonl")
    mt = [args.minitrain, "--net", "vgg19", "--batch", "256", "--image", "224", "--iters", "12",
          "--classes", "1000", "--alloc", "network"]
    p = run(mt, {"LD_PRELOAD": args.vmem, "SIMGPU_DRYRUN": "1", "SIMGPU_MODEL": "titanx",
                 "VMEM_POLICY": "dyn", "VMEM_WORKSPACE": "wr", "VMEM_STATS": "1",
                 "VMEM_DEVICE_LIMIT": str(10 << 30), "VMEM_TRACE": trace})
    recs = read_trace(trace)
    first = {}
    for r in solver_recs(recs, "wr"):
        first.setdefault(r["kernel"], r["limit"])
    rooms = plan_room_records(recs)
    lowered = [(k, first[k], room, ws) for k, lim, room, ws, _ in rooms if 0 < room < first[k]]
    bad = [(k, lim, room, ws) for k, lim, room, ws, _ in rooms if lim > room or ws > room]
    check("vgg19-rooms", lowered and not bad and stat(p, "conv limits lowered by the plan") > 0,
          "limits lowered to the plan's room (0 < room < the first limit), every workspace "
          "within it",
          "%d lowered %s; %d outside their room %s" % (
              len(lowered), [(k, l // MiB, r // MiB, w // MiB) for k, l, r, w in lowered[:4]],
              len(bad), bad[:3]))
    # one change between two iterations, then a plan that holds to the end:
    # a convolution whose workspace vmem sized again is the same call (its
    # workspace bytes are not part of its signature), so the plan made
    # before the change goes on
    seqs = sorted(set(s for *_, s in rooms))
    made = [r for r in recs if r.get("type") == "plan" and r["event"] == "made"]
    # (the run's end, a copy of the weights to the host, suspends it once)
    later = [r["event"] for r in recs if r.get("type") == "plan" and seqs and
             r["seq"] > seqs[-1]]
    held = made and "abandoned" not in later and later.count("suspended") <= 1
    convs_between = [o for o in convs(recs) if seqs and seqs[0] <= o["seq"] <= seqs[-1]]
    check("vgg19-one-change", seqs and not convs_between and held,
          "every lowered kernel decided again at one point (the iteration's start), the "
          "plan in effect after it not suspended (the run's end aside) nor abandoned",
          "%d decision records (%d convs between the first and last), plans made at %s, "
          "decisions at %s, then %s" % (len(seqs), len(convs_between), [r["seq"] for r in made],
                                        seqs, later))

    # real computation at half the peak: the same weights.  resnet18's
    # vDNN modes all keep more resident than half its peak (dyn: "nothing
    # fits"); with VMEM_GAPS=0 the plan does not hold and gives no rooms
    # (policy_conv_room: rooms from such a plan are zero where the
    # pressure is and cost WR its fast algorithms).  With the gaps
    # (the default) the plan moves weights, gradients and momenta too and
    # fits: its rooms hold every workspace decided within one
    mt = [args.minitrain, "--net", "resnet18", "--batch", "8", "--image", "32", "--iters", "12",
          "--alloc", "caching", "--json"]
    base = run(mt, {})
    peak = json.loads(base.stdout.strip().splitlines()[-1])["peak_bytes"]
    limit = max(peak // 2 // (2 * MiB) * (2 * MiB), 2 * MiB)
    for ws, gaps in (("wr", "0"), ("wr", "1"), ("wd", "1")):
        trace = os.path.join(tmp, "r-%s-%s.jsonl" % (ws, gaps))
        p = run(mt, {"LD_PRELOAD": args.vmem, "VMEM_DEVICE_LIMIT": str(limit),
                     "VMEM_POLICY": "dyn", "VMEM_WORKSPACE": ws, "VMEM_STATS": "1",
                     "VMEM_GAPS": gaps, "VMEM_TRACE": trace})
        rooms = plan_room_records(read_trace(trace))
        nothing_fits = "nothing fits" in p.stderr
        lowered = stat(p, "conv limits lowered by the plan")
        if gaps == "0":
            check("resnet18-%s-nogaps" % ws,
                  checksum_of(p) == checksum_of(base) and nothing_fits and not rooms and
                  not lowered,
                  "%s at %d MiB (half its peak), VMEM_GAPS=0: dyn's 'nothing fits', no "
                  "decision with a room" % (checksum_of(base), limit // MiB),
                  "%s, 'nothing fits' %s, %d decisions with a room, %s limits lowered" % (
                      checksum_of(p), nothing_fits, len(rooms), lowered))
            continue
        # WD's micro-batch workspaces leave the plan 3 MiB over the limit
        # at one op now that each page is counted once (it "fitted" with
        # shared pages counted twice, and missed 204 pages in planned
        # iterations; 130 now): a gaps line there, fitting or not
        line = re.search(r"^policy: gaps: .*$", p.stderr, re.M)
        fits = line and line.group(0).endswith("(fits)")
        bad = [(k, lim, room, w) for k, lim, room, w, _ in rooms
               if w > room or (lim is not None and lim > room)]
        check("resnet18-%s-gaps" % ws,
              checksum_of(p) == checksum_of(base) and (fits or (ws == "wd" and line)) and
              not bad,
              "%s at %d MiB (half its peak): a plan with the gaps (that fits, under WR), every "
              "workspace within its room" % (checksum_of(base), limit // MiB),
              "%s, gaps line %s, %d decisions with a room, %d outside it %s" % (
                  checksum_of(p), line.group(0) if line else "none",
                  len(rooms), len(bad), bad[:3]))


def check_remap_price(args, tmp):
    # VGG-16 (minitrain vgg19, batch 64) on the h100 model at half its
    # peak, caching style, dry run, dyn: once the budget binds, WR prices
    # each 2 MiB of workspace at a remap (VMEM_REMAP_COST) and decides
    # again; the workspaces shrink and the iteration (remaps charged by
    # the simulator, SIMGPU_VMM_COST) is faster than with workspace free.
    # 16 iterations: dyn's six passes (each mode also with least-workspace
    # convolutions) end before the last, which runs the pass kept (at 10
    # the last iteration was a pass still being timed, a different one in
    # each run: the comparison hung on which)
    mt = [args.minitrain, "--net", "vgg19", "--batch", "64", "--image", "224", "--iters", "16",
          "--classes", "1000", "--alloc", "caching"]
    env = {"SIMGPU_DRYRUN": "1", "SIMGPU_MODEL": "h100", "SIMGPU_MEM": "3346M"}
    res = {}
    for cost in ("61", "0"):
        trace = os.path.join(tmp, "price-%s.jsonl" % cost)
        p = run(mt, dict(env, LD_PRELOAD=args.vmem, VMEM_POLICY="dyn", VMEM_LOG="info",
                         VMEM_DEVICE_RESERVE="0", VMEM_REMAP_COST=cost, VMEM_TRACE=trace))
        last = {}
        for r in solver_recs(read_trace(trace), "wr"):
            last[r["kernel"]] = r["ws"]
        res[cost] = (p, sum(last.values()), iter_ms(p, 15))
    p, ws, ms = res["61"]
    p0, ws0, ms0 = res["0"]
    said = "the budget binds" in p.stderr
    check("priced", said and "the budget binds" not in p0.stderr and ws < ws0 and ms < ms0,
          "a re-decision once the budget binds (VMEM_REMAP_COST=61, none with 0), less "
          "workspace in all and a faster last iteration than with workspace free",
          "line %s/%s; workspace %d MiB vs %d MiB; last iteration %.1f ms vs %.1f ms" % (
              said, "the budget binds" in p0.stderr, ws // MiB, ws0 // MiB, ms, ms0))
    # a budget that never binds prices nothing
    p = run(mt, dict(env, SIMGPU_MEM="40G", LD_PRELOAD=args.vmem, VMEM_POLICY="dyn",
                     VMEM_LOG="info", VMEM_DEVICE_RESERVE="0", VMEM_STATS="1",
                     VMEM_REMAP_COST="61"))
    check("unbound", "the budget binds" not in p.stderr and not stat(p, "evictions"),
          "no eviction and no re-decision at 40 GiB", p.stderr[-400:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("check")
    ap.add_argument("--vmem", required=True)
    ap.add_argument("--minitrain", required=True)
    ap.add_argument("--noglpk")
    ap.add_argument("--net", default="alexnet")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--image", type=int, default=64)
    ap.add_argument("--limit", default="2M")
    ap.add_argument("--keep")
    args = ap.parse_args()
    fn = {"checksums": check_checksums, "time": check_time, "noglpk": check_noglpk,
          "infeasible": check_infeasible, "cache": check_cache, "rescue": check_rescue,
          "conv-algo": check_conv_algo, "plan-room": check_plan_room,
          "remap-price": check_remap_price}.get(args.check)
    if not fn:
        print("unknown check %r" % args.check)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        fn(args, args.keep or tmp)
    if failures:
        print("FAILED: %s" % ", ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
