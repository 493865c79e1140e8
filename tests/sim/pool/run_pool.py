#!/usr/bin/env python3
"""tests/sim/pool/run_pool.py - runs the pool's simulated-GPU cases.

Each case runs a program with LD_PRELOAD=libvmem.so on the simulated GPU
(LD_LIBRARY_PATH comes from the test environment) and checks its exit
status, its output, the simulator's report (SIMGPU_REPORT: peak device
bytes) and the VMEM_STATS table.  Every failure prints what was expected
and what was got.
"""
import argparse
import os
import re
import subprocess
import sys

MiB = 1 << 20


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run(cmd, env_extra, preload, vmem):
    env = dict(os.environ)
    env.update(env_extra)
    if preload:
        env["LD_PRELOAD"] = vmem
    else:
        env.pop("LD_PRELOAD", None)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    print("$ " + " ".join("%s=%s" % kv for kv in env_extra.items()) +
          (" LD_PRELOAD=libvmem.so " if preload else " ") + " ".join(cmd))
    print("  exit %d" % p.returncode)
    for line in (p.stdout + p.stderr).splitlines()[-60:]:
        print("  | " + line)
    if "simgpu: illegal address" in p.stderr:
        fail("the simulator caught a stray access (see above)")
    return p


def report(path):
    vals = {}
    with open(path) as f:
        for line in f:
            k, _, v = line.partition(":")
            vals[k.strip()] = v.strip()
    return vals


def stat(text, name):
    m = re.search(r"^vmem: %s\s+(\d+)" % re.escape(name), text, re.M)
    return int(m.group(1)) if m else None


def expect_ok(p, what):
    if p.returncode != 0 or "ok" not in p.stdout.split():
        fail("%s: expected exit 0 and 'ok', got exit %d" % (what, p.returncode))


def case_meminfo(a):
    p = run([a.prog, "meminfo", str(1 << 30)],
            {"SIMGPU_MEM": "12G", "VMEM_DEVICE_LIMIT": "1G"}, True, a.vmem)
    expect_ok(p, "cudaMemGetInfo under VMEM_DEVICE_LIMIT=1G on a 12 GB device")
    # without vmem the same program sees the device
    p = run([a.prog, "meminfo", str(12 << 30)], {"SIMGPU_MEM": "12G"}, False, a.vmem)
    expect_ok(p, "cudaMemGetInfo without vmem")


def case_fork(a):
    # DataLoader workers fork while other threads allocate; with the trace
    # on, the trace's fork handler and the pool's lock once deadlocked.
    p = run([a.prog, "fork", "300", str(12 << 30)],
            {"SIMGPU_MEM": "12G", "VMEM_DEVICE_LIMIT": "1G",
             "VMEM_TRACE": os.path.join(a.workdir, "fork.trace")}, True, a.vmem)
    expect_ok(p, "forks while another thread allocates")


def stress(a, extra, rounds, seed, limit):
    rep = os.path.join(a.workdir, "pool-stress-report-%s.txt" % seed)
    env = {"SIMGPU_MEM": "1G", "VMEM_DEVICE_LIMIT": "%dM" % limit,
           "VMEM_DEVICE_RESERVE": "0", "VMEM_STATS": "1", "SIMGPU_REPORT": rep}
    env.update(extra)
    p = run([a.prog, "stress", str(rounds), str(seed)], env, True, a.vmem)
    expect_ok(p, "stress against a %d MiB budget" % limit)
    peak = int(report(rep)["peak_device_bytes"])
    if peak > limit * MiB:
        fail("simulated device peak %d bytes, expected at most the budget %d" % (peak, limit * MiB))
    ev, miss = stat(p.stderr, "evictions"), stat(p.stderr, "misses (fault-ins)")
    if not ev or not miss:
        fail("expected evictions and misses in VMEM_STATS, got evictions=%s misses=%s" % (ev, miss))
    print("peak device bytes %d (budget %d), evictions %d, misses %d" % (peak, limit * MiB, ev, miss))


def case_stress(a):
    stress(a, {}, 400, 1, 64)
    stress(a, {}, 400, 2, 64)


def case_stress_small_chunks(a):
    # chunks of 4 granules: fewer, larger mappings; small threshold off
    stress(a, {"VMEM_CHUNK_SIZE": "8M", "VMEM_SMALL_THRESHOLD": "0"}, 300, 3, 96)


def case_oom(a):
    # host mapping off: with it both would run, their pages past the
    # budget mapped from the host (docs/pool.md)
    p = run([a.prog, "oom"], {"SIMGPU_MEM": "1G", "VMEM_DEVICE_LIMIT": "64M",
                              "VMEM_HOST_MAP": "0"}, True, a.vmem)
    expect_ok(p, "out of memory without losing data")
    # vmem's error lines: the allocation of the budget + 1 byte, and the
    # copy whose two 48 MiB tensors (24 pages of 2 MiB each) cannot be
    # resident in 64 MiB together
    want = ["cudaMalloc of 64 MiB is answered out of memory: an allocation larger than the "
            "budget (64 MiB) cannot be resident",
            "cudaMemcpy is answered out of memory: it needs 48 pages of 2 MiB resident at "
            "once (96 MiB), more than the budget of 64 MiB (32 pages).  Raise the budget"]
    lines = [l for l in p.stderr.splitlines() if l.startswith("vmem: error:")]
    if len(lines) != 2 or any(w not in l for w, l in zip(want, lines)):
        fail("expected two error lines containing\n  %s\ngot %d:\n%s"
             % ("\n  ".join(want), len(lines), "\n".join(lines)))


def case_host_limit(a):
    p = run([a.prog, "hostlimit"], {"SIMGPU_MEM": "1G", "VMEM_DEVICE_LIMIT": "64M",
                                    "VMEM_HOST_LIMIT": "32M"}, True, a.vmem)
    expect_ok(p, "host limit")
    if "pinned host memory exhausted" not in p.stderr or "VMEM_HOST_LIMIT=32 MiB" not in p.stderr:
        fail("expected the error 'pinned host memory exhausted ... VMEM_HOST_LIMIT=32 MiB' on stderr")
    m = re.search(r"tensors before the host limit: (\d+)", p.stdout)
    # 64 MiB budget + 32 MiB host = 12 tensors of 8 MiB, the small pool aside
    if not m or not 9 <= int(m.group(1)) <= 12:
        fail("expected about 12 tensors of 8 MiB before failing, got %s" % (m and m.group(1)))


def case_small(a):
    # issue 10: small allocations of many sizes take a third of a 64 MiB
    # budget, then large tensors fill the rest and more: the small chunks
    # must be packed (one per size class took most of the budget) and, when
    # cold, evicted whole; every byte is checked.
    p = run([a.prog, "small"], {"SIMGPU_MEM": "1G", "VMEM_DEVICE_LIMIT": "64M",
                                "VMEM_STATS": "1"}, True, a.vmem)
    expect_ok(p, "small allocations beside large ones under a 64 MiB budget")
    m = re.search(r"^\s*small slack\s+([\d.]+)\s+([\d.]+)", p.stderr, re.M)
    if not m:
        fail("expected a 'small slack' row in VMEM_STATS")
    if float(m.group(2)) > 0.05 * 64:
        fail("small allocations' waste on the device peaked at %s MiB, expected at most 5%% of "
             "the 64 MiB budget" % m.group(2))
    print("small slack: %s MiB now, %s MiB at peak" % (m.group(1), m.group(2)))


def case_expandable(a):
    # issue 14: what PyTorch's expandable segments do (driver entry points,
    # a reserved range grown by 2 and 20 MiB handles) to 120 MiB under a
    # 64 MiB budget.  Served by vmem, the segment is in the budget: the
    # simulated device never holds more than it, and every byte survives.
    rep = os.path.join(a.workdir, "pool-expandable-report.txt")
    grow = str(120 * MiB)
    alone = run([a.prog, "expandable", grow], {"SIMGPU_MEM": "80M"}, False, a.vmem)
    if alone.returncode == 0:
        fail("without vmem on an 80 MiB device: expected the 120 MiB segment to fail, got exit 0")
    p = run([a.prog, "expandable", grow],
            {"SIMGPU_MEM": "1G", "VMEM_DEVICE_LIMIT": "64M", "VMEM_STATS": "1",
             "SIMGPU_REPORT": rep}, True, a.vmem)
    expect_ok(p, "an expandable segment of 120 MiB under a 64 MiB budget")
    peak = int(report(rep)["peak_device_bytes"])
    if peak > 64 * MiB:
        fail("simulated device peak %d bytes, expected at most the 64 MiB budget: the segment's "
             "memory was not vmem's" % peak)
    ev = stat(p.stderr, "evictions")
    if not ev:
        fail("expected evictions in VMEM_STATS (the segment is larger than the budget), got %s" % ev)
    if "cuMemExportToShareableHandle: refused" not in p.stderr:
        fail("expected the export of a vmem handle to be refused with a message on stderr")
    print("expandable: peak device bytes %d (budget %d), evictions %d" % (peak, 64 * MiB, ev))


def checksum(p):
    m = re.search(r"checksum: (0x[0-9a-f]+)", p.stdout)
    return m and m.group(1)


def vtime(path):
    return float(report(path)["virtual_time_s"])


def case_vgg16_half(a):
    # batch 4, 64x64 images: about 590 MiB (per-tensor) or 720 MiB
    # (caching) at peak; 300 MiB is half of what per-tensor needs.  The
    # largest single call, SGD on the 4096x4096 FC layer, touches 192 MiB.
    args = [a.minitrain, "--net", "vgg16", "--batch", "4", "--image", "64",
            "--iters", "2", "--alloc", a.alloc] + (a.mt_args.split() if a.mt_args else [])
    r_full = os.path.join(a.workdir, "pool-vgg16-%s-full.txt" % a.alloc)
    r_half = os.path.join(a.workdir, "pool-vgg16-%s-half.txt" % a.alloc)
    full = run(args, {"SIMGPU_MEM": "12G", "SIMGPU_REPORT": r_full}, False, a.vmem)
    if full.returncode != 0 or not checksum(full):
        fail("unlimited run: expected exit 0 with a checksum, got exit %d" % full.returncode)
    alone = run(args, {"SIMGPU_MEM": "300M"}, False, a.vmem)
    if alone.returncode != 3 or "out of memory" not in alone.stdout + alone.stderr:
        fail("at 300M without vmem: expected exit 3 and 'out of memory', got exit %d" % alone.returncode)
    under = run(args, {"SIMGPU_MEM": "300M", "VMEM_POLICY": "none", "VMEM_DEVICE_RESERVE": "4M",
                       "VMEM_STATS": "1", "SIMGPU_REPORT": r_half}, True, a.vmem)
    if under.returncode != 0:
        fail("at 300M under vmem: expected exit 0, got %d" % under.returncode)
    if checksum(under) != checksum(full):
        fail("checksum under vmem %s, expected the unlimited run's %s" % (checksum(under), checksum(full)))
    ev, miss = stat(under.stderr, "evictions"), stat(under.stderr, "misses (fault-ins)")
    if not ev or not miss:
        fail("expected evictions and misses in VMEM_STATS, got evictions=%s misses=%s" % (ev, miss))
    tf, th = vtime(r_full), vtime(r_half)
    print("vgg16 %s: checksum %s both; simulated time %.4f s unlimited, %.4f s at half memory "
          "(%.1fx); misses %d, evictions %d" % (a.alloc, checksum(full), tf, th, th / tf, miss, ev))


def pool_stat(text, name):
    """A line of the pool's table in VMEM_STATS ('  maps   1234')."""
    m = re.search(r"^\s+%s\s+(\d+)$" % re.escape(name), text, re.M)
    return int(m.group(1)) if m else None


def case_range_fit(a):
    # Per-tensor allocation under dyn at half the peak frees and allocates
    # every tensor each iteration: best fit reuses freed ranges in place
    # where exact fit unmaps one range and maps another, and pending (the
    # default) also takes ranges whose free has not completed, ordered on
    # the device.  All three must train to the unlimited run's weights
    # with the race checker and poison on; best fit must map fewer chunks
    # than exact, pending fewer than best, and pending must take ranges
    # before their free completed.
    args = [a.minitrain, "--net", "vgg16", "--batch", "8", "--image", "32",
            "--iters", "6", "--alloc", "per-tensor"]
    full = run(args, {"SIMGPU_MEM": "12G"}, False, a.vmem)
    if full.returncode != 0 or not checksum(full):
        fail("unlimited run: expected exit 0 with a checksum, got exit %d" % full.returncode)
    got = {}
    for fit in ("exact", "best", "pending"):
        p = run(args, {"SIMGPU_MEM": "12G", "VMEM_DEVICE_LIMIT": "216M", "VMEM_POLICY": "dyn",
                       "VMEM_STATS": "1", "VMEM_RANGE_FIT": fit}, True, a.vmem)
        if p.returncode != 0:
            fail("VMEM_RANGE_FIT=%s at 216M: expected exit 0, got %d" % (fit, p.returncode))
        if checksum(p) != checksum(full):
            fail("VMEM_RANGE_FIT=%s: checksum %s, expected the unlimited run's %s"
                 % (fit, checksum(p), checksum(full)))
        got[fit] = {k: pool_stat(p.stderr, k) for k in ("maps", "ranges reused", "split",
                                                        "merged", "reclaimed in part",
                                                        "before their free completed")}
        if None in got[fit].values():
            fail("VMEM_RANGE_FIT=%s: expected the pool's maps and ranges lines in VMEM_STATS, "
                 "got %s" % (fit, got[fit]))
    e, b, q = got["exact"], got["best"], got["pending"]
    if e["split"] or e["merged"] or e["reclaimed in part"]:
        fail("exact fit carved or merged ranges: %s" % e)
    if not b["split"] or not b["reclaimed in part"]:
        fail("best fit: expected ranges split and reclaimed in part, got %s" % b)
    if b["maps"] >= e["maps"]:
        fail("best fit mapped %d chunks, exact %d: expected fewer" % (b["maps"], e["maps"]))
    if b["before their free completed"]:
        fail("best fit took %d ranges before their free completed: expected none"
             % b["before their free completed"])
    if not q["before their free completed"] or q["maps"] >= b["maps"]:
        fail("pending: expected ranges taken before their free completed and fewer maps than "
             "best fit's %d, got %s" % (b["maps"], q))
    print("range-fit: maps %d exact, %d best (%.2fx), %d pending (%.2fx); pending: %s"
          % (e["maps"], b["maps"], b["maps"] / e["maps"], q["maps"], q["maps"] / e["maps"], q))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("--vmem", required=True)
    ap.add_argument("--prog", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--minitrain")
    ap.add_argument("--alloc", default="per-tensor")
    ap.add_argument("--mt-args", default="", help="more minitrain arguments")
    a = ap.parse_args()
    cases = {"meminfo": case_meminfo, "stress": case_stress,
             "stress-small-chunks": case_stress_small_chunks, "oom": case_oom,
             "host-limit": case_host_limit, "fork": case_fork, "vgg16-half": case_vgg16_half,
             "small": case_small, "expandable": case_expandable, "range-fit": case_range_fit}
    if a.case not in cases:
        fail("unknown case %r; known: %s" % (a.case, ", ".join(sorted(cases))))
    cases[a.case](a)
    print("PASS")


if __name__ == "__main__":
    main()
