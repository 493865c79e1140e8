#!/usr/bin/env python3
"""Runner of the tests/sim/interpose checks: runs hookprog (or minitrain)
with LD_PRELOAD=libvmem.so on the simulated GPU and checks its output, its
stderr and the VMEM_TRACE file.  Every failure prints what was expected and
what was got.  Exit 0 pass, 1 fail, 77 skipped."""
import argparse
import json
import shutil
import os
import re
import subprocess
import sys
import tempfile

SKIP = 77


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run(args, cmd, env_extra=None, preload=True, check=True):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("VMEM_"):
            del env[k]
    if preload:
        env["LD_PRELOAD"] = args.vmem
    else:
        env.pop("LD_PRELOAD", None)
    env.update(env_extra or {})
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=550)
    if check and p.returncode != 0:
        fail("%s exited %d, expected 0\n--- stdout\n%s--- stderr\n%s" %
             (" ".join(cmd), p.returncode, p.stdout, p.stderr))
    return p


def read_trace(path, drops_allowed=False):
    """The trace's records, checked whole: JSON lines, header first, end
    last, times in range, nothing dropped - unless drops_allowed (a test
    that hammers the hooks from a thread on a loaded machine can outrun
    the writer; the ring then drops and counts, and the file must hold
    exactly the records the end record says were written)."""
    with open(path) as f:
        lines = f.read().splitlines()
    recs = []
    for i, line in enumerate(lines):
        try:
            recs.append(json.loads(line))
        except json.JSONDecodeError as e:
            fail("trace line %d is not JSON (%s): %r" % (i + 1, e, line[:200]))
    if not recs or recs[0].get("type") != "header":
        fail("trace: first record should be the header, got %r" % (recs[:1],))
    if recs[-1].get("type") != "end":
        fail("trace: last record should be 'end', got %r" % (recs[-1],))
    if recs[-1].get("dropped") != 0 and not drops_allowed:
        fail("trace: %s records dropped, expected 0" % recs[-1].get("dropped"))
    if recs[-1].get("records") != len(recs) - 1:
        fail("trace: the end record says %s records were written, the file holds %d"
             % (recs[-1].get("records"), len(recs) - 1))
    late = [r for r in recs[1:-1] if not 0 <= r["t"] <= recs[-1]["t"]]
    if late:
        fail("trace: records with t outside [0, end.t=%d] (t is ns since vmem start): %s"
             % (recs[-1]["t"], late[:2]))
    seqs = [r["seq"] for r in recs[1:]]
    if len(set(seqs)) != len(seqs):
        fail("trace: duplicate seq numbers")
    return recs


def ops(recs, **match):
    return [r for r in recs if r.get("type") == "op" and
            all(r.get(k) == v for k, v in match.items())]


def t_exports(args):
    nm = subprocess.run(["nm", "-D", "--defined-only", args.vmem], capture_output=True,
                        text=True, check=True).stdout
    exported = {l.split()[-1].split("@")[0] for l in nm.splitlines()
                if len(l.split()) >= 3 and l.split()[1] in "TtWiV"}
    text = re.sub(r"/\*.*?\*/", "", open(args.map).read(), flags=re.S)
    m = re.search(r"global:(.*?)local:", text, re.S)
    if not m:
        fail("no 'global: ... local:' block in %s" % args.map)
    listed = {n.strip() for n in m.group(1).split(";") if n.strip()}
    extra = sorted(exported - listed)
    missing = sorted(listed - exported)
    if extra or missing:
        fail("exports differ from %s\n  exported but not listed: %s\n  listed but not exported: %s"
             % (args.map, extra or "none", missing or "none"))
    print("ok: %d exported symbols match vmem.map" % len(exported))


def t_passthrough(args):
    p = run(args, [args.prog, "basic"], {"VMEM_DISABLE": "1"})
    if p.stdout.strip() != "ok" or p.stderr:
        fail("VMEM_DISABLE=1: expected stdout 'ok' and no stderr, got %r / %r" % (p.stdout, p.stderr))
    print("ok")


BAD = [
    ("VMEM_POLICY", "fastest", "unknown value; accepted: none, all, conv, dyn"),
    ("VMEM_DEVICE_LIMIT", "8Q", "not a size"),
    ("VMEM_DEVICE_LIMIT", "-1", "not a size"),
    ("VMEM_HOST_LIMIT", "99999999999999999999", "too large"),
    ("VMEM_CHUNK_SIZE", "3M", "not a multiple"),
    ("VMEM_VA_SIZE", "1M", "out of range"),
    ("VMEM_STATS", "maybe", "not a boolean"),
    ("VMEM_LOG", "verbose", "unknown value; accepted: error, warn, info, debug"),
    ("VMEM_WORKSPACE", "max", "unknown value"),
    ("VMEM_MICROBATCH", "3", "unknown value"),
]


def t_bad_settings(args):
    with tempfile.TemporaryDirectory() as d:
        trace = os.path.join(d, "t.jsonl")
        for var, val, what in BAD:
            p = run(args, [args.prog, "basic"], {var: val, "VMEM_TRACE": trace})
            lines = p.stderr.splitlines()
            want = "vmem: error: %s=%s: " % (var, val)
            if p.stdout.strip() != "ok":
                fail("%s=%s: program output %r, expected 'ok' (pass-through)" % (var, val, p.stdout))
            if len(lines) != 1 or not lines[0].startswith(want) or what not in lines[0]:
                fail("%s=%s: expected one stderr line starting %r and containing %r, got:\n%s"
                     % (var, val, want, what, p.stderr))
            if os.path.exists(trace):
                fail("%s=%s: vmem should be pass-through, but it wrote a trace" % (var, val))
            print("ok: %s" % lines[0])


def t_unimplemented_settings(args):
    # Every accepted value is implemented now (the vDNN policies, liveness,
    # prefetch placement, the workspace solver): none may warn that it is
    # not, and each is silent where nothing runs to act on.
    for var, vals in [("VMEM_POLICY", ("none", "all", "conv", "dyn")),
                      ("VMEM_LIVENESS", ("lazy", "eager", "off")),
                      ("VMEM_PREFETCH", ("vdnn", "timed")),
                      ("VMEM_WORKSPACE", ("wr", "wd"))]:
        for val in vals:
            p = run(args, [args.prog, "basic"], {var: val})
            if p.stdout.strip() != "ok" or p.stderr.strip():
                fail("%s=%s: expected output 'ok' and no message, got %r and:\n%s"
                     % (var, val, p.stdout, p.stderr))
            print("ok: %s=%s says nothing" % (var, val))


def t_bad_trace_path(args):
    path = "/nonexistent-vmem-dir/t.jsonl"
    p = run(args, [args.prog, "basic"], {"VMEM_TRACE": path})
    lines = p.stderr.splitlines()
    want = "vmem: warning: VMEM_TRACE=%s: cannot open" % path
    if p.stdout.strip() != "ok":
        fail("program output %r, expected 'ok'" % p.stdout)
    if len(lines) != 1 or not lines[0].startswith(want):
        fail("expected one stderr line starting %r, got:\n%s" % (want, p.stderr))
    print("ok: " + lines[0])


def t_threads(args):
    with tempfile.TemporaryDirectory() as d:
        trace = os.path.join(d, "t.jsonl")
        p = run(args, [args.prog, "threads"], {"VMEM_TRACE": trace})
        if p.stdout.strip() != "ok 400 allocations":
            fail("expected 'ok 400 allocations', got %r; stderr:\n%s" % (p.stdout, p.stderr))
        recs = read_trace(trace)
    launches = ops(recs, op="launch")
    copies = ops(recs, op="memcpy")
    tids = {r["tid"] for r in launches}
    if len(launches) != 400 or len(copies) != 400:
        fail("expected 400 launch and 400 memcpy ops, got %d and %d" % (len(launches), len(copies)))
    if len(tids) != 2:
        fail("expected launches from 2 threads, got tids %s" % sorted(tids))
    allocs = [r for r in recs if r["type"] == "alloc"]
    frees = [r for r in recs if r["type"] == "free"]
    # Every cudaMalloc is vmem's: exactly one alloc and one free record each.
    if len(allocs) != 400 or len(frees) != 400:
        fail("expected 400 alloc and 400 free records (one per cudaMalloc/cudaFree of the two "
             "threads), got %d and %d" % (len(allocs), len(frees)))
    # Replay in seq order: every allocation freed once, no two live
    # allocations overlap, every launch and copy touches the live
    # allocation its thread made last, at its start, over its whole size.
    live, last = {}, {}
    for r in sorted(recs[1:-1], key=lambda r: r["seq"]):
        if r["type"] == "alloc":
            lo = int(r["ptr"], 16)
            for aid, (plo, phi) in live.items():
                if lo < phi and plo < lo + r["bytes"]:
                    fail("alloc %d [%#x, +%d) overlaps live alloc %d [%#x, %#x)"
                         % (r["alloc"], lo, r["bytes"], aid, plo, phi))
            live[r["alloc"]] = (lo, lo + r["bytes"])
            last[r["tid"]] = r["alloc"]
        elif r["type"] == "free":
            if r["alloc"] not in live:
                fail("free of alloc %d that is not live: %s" % (r["alloc"], r))
            del live[r["alloc"]]
        elif r["type"] == "op" and r["op"] in ("launch", "memcpy"):
            dev = [t for t in r["tensors"] if t["alloc"] != 0]
            want = last.get(r["tid"])
            if len(dev) != 1 or dev[0]["alloc"] != want or want not in live or dev[0]["off"] != 0:
                fail("%s on thread %d should touch that thread's live allocation %s at offset 0, "
                     "got %s" % (r["op"], r["tid"], want, r["tensors"]))
            lo, hi = live[want]
            if r["op"] == "memcpy" and dev[0]["bytes"] != hi - lo:
                fail("memcpy should touch all %d bytes of alloc %d, got %s"
                     % (hi - lo, want, dev[0]))
    if live:
        fail("%d allocations never freed (lost): %s" % (len(live), sorted(live)[:10]))
    print("ok: 400 launches, 400 copies from 2 threads; %d alloc / %d free records, none lost or overlapping"
          % (len(allocs), len(frees)))


def t_probe(args):
    with tempfile.TemporaryDirectory() as d:
        trace = os.path.join(d, "t.jsonl")
        p = run(args, [args.prog, "probe"], {"VMEM_TRACE": trace})
        m = re.match(r"a=(0x[0-9a-f]+) b=(0x[0-9a-f]+) x=(0x[0-9a-f]+) c=(0x[0-9a-f]+)", p.stdout)
        if not m:
            fail("unexpected probe output %r" % p.stdout)
        a, b, x, c = (int(v, 16) for v in m.groups())
        recs = read_trace(trace)
    launch = ops(recs, op="launch")
    if len(launch) != 1:
        fail("expected 1 launch op, got %d" % len(launch))
    allocs = sorted(int(r["ptr"], 16) for r in recs if r["type"] == "alloc")
    if allocs != sorted([a, b]):
        fail("expected alloc records for exactly a and b (%s), got %s"
             % ([hex(a), hex(b)], [hex(v) for v in allocs]))
    got = sorted(int(t["ptr"], 16) for t in launch[0]["tensors"])
    if got != sorted([a, b]):
        fail("mt_probe launch: expected exactly the tensors %s, got %s (x=%#x, host c=%#x)"
             % ([hex(a), hex(b)], [hex(v) for v in got], x, c))
    roles = sorted(t["role"] for t in launch[0]["tensors"])
    if roles != ["arg0", "arg2"] or any(t["acc"] != "rw" for t in launch[0]["tensors"]):
        fail("expected roles arg0, arg2 with access rw, got %s" % launch[0]["tensors"])
    print("ok: launch traced exactly a (arg0) and b (arg2)")


def t_stub_launch(args):
    # nvcc 13's <<<...>>> stubs (every ATen kernel of a CUDA 13 PyTorch)
    # launch through __cudaLaunchKernel with a kernel handle.  On the first
    # real GPU run vmem did not hook it: no launch was seen, and a kernel
    # touched evicted memory (illegal address).  Here `a` is evicted before
    # the launch: unseen, the simulator faults.
    with tempfile.TemporaryDirectory() as d:
        trace = os.path.join(d, "t.jsonl")
        p = run(args, [args.prog, "stub-launch"], {"VMEM_TRACE": trace, "VMEM_DEVICE_LIMIT": "8M"},
                check=False)
        if p.returncode != 0:
            fail("stub-launch under VMEM_DEVICE_LIMIT=8M: exit %d, expected 0\n--- stdout\n%s"
                 "--- stderr\n%s" % (p.returncode, p.stdout, p.stderr[-3000:]))
        m = re.match(r"a=(0x[0-9a-f]+) b=(0x[0-9a-f]+)", p.stdout)
        if not m:
            fail("unexpected stub-launch output %r" % p.stdout)
        a, b = (int(v, 16) for v in m.groups())
        recs = read_trace(trace)
    launch = ops(recs, op="launch", api="__cudaLaunchKernel")
    if len(launch) != 1:
        fail("expected 1 launch op with api __cudaLaunchKernel, got %d (apis seen: %s)"
             % (len(launch), sorted({r.get("api") for r in ops(recs)})))
    got = sorted(int(t["ptr"], 16) for t in launch[0]["tensors"])
    if got != sorted([a, b]):
        fail("__cudaLaunchKernel of mt_probe: expected tensors %s, got %s"
             % ([hex(a), hex(b)], [hex(v) for v in got]))
    if not [r for r in recs if r.get("type") == "fault_in"]:
        fail("expected a fault_in record (a was evicted before the launch), got none")
    print("ok: __cudaLaunchKernel seen, a faulted back in before the kernel ran")


def t_many_args(args):
    # PyTorch's foreach optimizer kernels pass over a hundred tensors in one
    # launch; vmem used to keep 16 and leave the rest neither resident nor
    # locked (an illegal address on the first real-GPU budget run).
    with tempfile.TemporaryDirectory() as d:
        trace = os.path.join(d, "t.jsonl")
        p = run(args, [args.prog, "many-args"], {"VMEM_TRACE": trace, "VMEM_DEVICE_LIMIT": "48M"},
                check=False)
        if p.returncode != 0 or p.stdout.strip() != "ok":
            fail("many-args under VMEM_DEVICE_LIMIT=48M: exit %d, stdout %r, expected 0 and 'ok'"
                 "\n--- stderr\n%s" % (p.returncode, p.stdout, p.stderr[-3000:]))
        recs = read_trace(trace)
    launch = [r for r in ops(recs, op="launch") if r["args"].get("kernel") == "mt_list_fill"]
    if len(launch) != 1 or len(launch[0]["tensors"]) != 20:
        fail("expected one mt_list_fill launch with 20 tensors, got %s"
             % [len(r["tensors"]) for r in launch])
    print("ok: one launch with 20 tensors, all made resident")


def t_destroyed_streams(args):
    # The simulator aborts on any use of a destroyed stream; vmem's cudaFree
    # fences must skip streams the application destroyed.
    p = run(args, [args.prog, "destroyed-streams"], {}, check=False)
    if p.returncode != 0 or p.stdout.strip() != "ok":
        fail("destroyed-streams: expected exit 0 and 'ok', got exit %d, stdout %r, stderr:\n%s"
             % (p.returncode, p.stdout, p.stderr[-2000:]))
    print("ok: cudaFree after cudaStreamDestroy touches no destroyed stream")


def t_small_device(args):
    # The default reserve is proportional to the device (1/8, 32 MiB to
    # 1 GiB): with the fixed 512 MiB of before, any device with less free
    # memory got a zero budget and vmem switched itself off.
    p = run(args, [args.prog, "basic"], {"SIMGPU_MEM": "256M", "VMEM_LOG": "info"})
    want = "vmem: info: pool: budget 224 MiB of 256 MiB free (256 MiB total, reserve 32 MiB)"
    if p.stdout.strip() != "ok" or want not in p.stderr or "error" in p.stderr:
        fail("a 256 MiB device: expected 'ok', the line %r and no error, got stdout %r, stderr:\n%s"
             % (want, p.stdout, p.stderr))
    p = run(args, [args.prog, "basic"], {"SIMGPU_MEM": "4G", "VMEM_LOG": "info"})
    want4 = "vmem: info: pool: budget 3584 MiB of 4096 MiB free (4096 MiB total, reserve 512 MiB)"
    if p.stdout.strip() != "ok" or want4 not in p.stderr:
        fail("a 4 GiB device: expected 'ok' and the line %r, got stdout %r, stderr:\n%s"
             % (want4, p.stdout, p.stderr))
    # A device too small even for the floor: the message names the
    # reserve, how it was chosen and what to set; the program still runs.
    p = run(args, [args.prog, "basic"], {"SIMGPU_MEM": "24M"})
    lines = p.stderr.splitlines()
    want = ("vmem: error: device budget 0 bytes is below one chunk (2097152 bytes): free device "
            "memory 24 MiB of 24 MiB, VMEM_DEVICE_RESERVE 32 MiB (auto: 1/8 of the device, 32 MiB "
            "to 1 GiB); lower VMEM_DEVICE_RESERVE or set VMEM_DEVICE_LIMIT")
    if p.stdout.strip() != "ok" or not lines or lines[0] != want:
        fail("a 24 MiB device: expected 'ok' (pass-through) and first line\n  %s\ngot stdout %r, "
             "stderr:\n%s" % (want, p.stdout, p.stderr))
    p = run(args, [args.prog, "basic"], {"SIMGPU_MEM": "24M", "VMEM_DEVICE_RESERVE": "4M",
                                          "VMEM_LOG": "info"})
    if "pool: budget 20 MiB" not in p.stderr or "error" in p.stderr:
        fail("a 24 MiB device with VMEM_DEVICE_RESERVE=4M: expected a 20 MiB budget, got:\n%s"
             % p.stderr)
    print("ok: 256 MiB device: 224 MiB budget; 4 GiB: 3584 MiB; 24 MiB: clear message, "
          "pass-through; an explicit reserve is used as given")


def t_copies_and_sets(args):
    # Each copy and set vmem hooks, on tensors it has evicted (copyprog's
    # header says how): unhooked, the simulator stops with an illegal
    # address; hooked with the wrong access, the bytes come back stale.
    names = run(args, [args.copyprog, "list"], preload=False).stdout.split()
    if len(names) < 60:
        fail("copyprog list: expected at least 60 cases, got %d: %s" % (len(names), names))
    failures = []
    for name in names:
        p = run(args, [args.copyprog, name], {"VMEM_DEVICE_LIMIT": "8M", "VMEM_STATS": "1"},
                check=False)
        if p.returncode != 0 or p.stdout.strip() != "ok " + name:
            failures.append("%s: exit %d, stdout %r\n%s" % (name, p.returncode, p.stdout.strip(),
                                                            p.stderr.strip()[-600:]))
            continue
        miss = [l for l in p.stderr.splitlines() if "misses (fault-ins)" in l]
        if not miss or int(miss[0].split()[-1]) < 2:
            failures.append("%s: expected fault-ins in VMEM_STATS, got %s" % (name, miss))
    if failures:
        fail("%d of %d cases failed:\n%s" % (len(failures), len(names), "\n".join(failures)))
    print("ok: %d copies and sets on evicted tensors, bytes as expected" % len(names))


def ok_with_stats(args, mode, env, want):
    """Runs hookprog MODE with VMEM_STATS (and env): fails unless it prints
    "ok" and the VMEM_STATS lines named in want end with those counts."""
    p = run(args, [args.prog, mode], dict(env, VMEM_STATS="1"), check=False)
    if p.returncode != 0 or p.stdout.strip() != "ok":
        fail("%s: expected exit 0 and 'ok', got exit %d, stdout %r, stderr:\n%s"
             % (mode, p.returncode, p.stdout, p.stderr[-3000:]))
    got = {}
    for line in p.stderr.splitlines():
        text = line[len("vmem: "):] if line.startswith("vmem: ") else line.strip()
        for key in want:
            if text.startswith(key):
                got[key] = int(line.split()[-1])
    if got != want:
        fail("%s: VMEM_STATS: expected %s, got %s\n%s" % (mode, want, got, p.stderr))


def t_unseen_write(args):
    # A launch whose parameter layout vmem cannot learn (unknown, or not
    # asked because an error of the application is pending) may write
    # vmem memory unseen: the hook must tell the runtime
    # (runtime_unseen_write, "possible unseen writes" in VMEM_STATS), so
    # that no host copy is trusted afterwards; and the pending error must
    # reach the application untouched.
    ok_with_stats(args, "unseen-write", {},
                  {"possible unseen writes": 2, "launches with unknown params": 2})
    print("ok: two launches with unknown parameters counted as possible unseen writes; "
          "the application's pending error survived")


def t_unseen_rest(args):
    # A page brought back for a memset of its middle keeps its other bytes
    # on the host; a launch vmem cannot see into then fills the tensor
    # whole: vmem must bring those bytes back before the launch, or they
    # come back old after the next eviction.
    ok_with_stats(args, "unseen-rest", {"VMEM_DEVICE_LIMIT": "4M"},
                  {"copies skipped (rest on host)": 1, "rests brought back": 1})
    print("ok: the rest kept on the host came back before the unseen launch; every element "
          "as it wrote")


def t_ipc(args):
    # Handles and queries that would expose vmem's chunks are refused with
    # one line naming VMEM_DISABLE=1, which does make them work; the
    # harmless pointer attributes are answered as for cudaMalloc memory,
    # even while the memory is evicted; other memory passes through.
    p = run(args, [args.prog, "ipc"], {"VMEM_DEVICE_LIMIT": "8M"}, check=False)
    got = dict(l.split("=", 1) for l in p.stdout.splitlines() if "=" in l)
    want = {
        "cudaIpcGetMemHandle": "cudaErrorNotSupported",
        "cuIpcGetMemHandle": "CUDA_ERROR_NOT_SUPPORTED",
        "cuMemRetainAllocationHandle": "CUDA_ERROR_NOT_SUPPORTED",
        "cuMemGetAddressRange": "CUDA_ERROR_NOT_SUPPORTED",
        "cuPointerGetAttribute(RANGE_START_ADDR)": "CUDA_ERROR_NOT_SUPPORTED",
        "cuPointerGetAttribute": "type 2 ptr_ok 1 device 0 mapped 1",
        "cuPointerGetAttributes": "type 2 host (nil) managed 0",
        "cudaPointerGetAttributes": "type 2 ptr_ok 1 device 0",
        "cudaPointerGetAttributes(host)": "type 1",
        "byte": "1",
    }
    diff = {k: (want[k], got.get(k)) for k in want if got.get(k) != want[k]}
    if p.returncode != 0 or diff:
        fail("ipc under vmem: exit %d; differing (expected, got): %s\nstdout:\n%sstderr:\n%s"
             % (p.returncode, diff, p.stdout, p.stderr))
    lines = [l for l in p.stderr.splitlines() if l.startswith("vmem: error: ")]
    calls = ["cudaIpcGetMemHandle(", "cuIpcGetMemHandle(", "cuMemRetainAllocationHandle(",
             "cuMemGetAddressRange(", "cuPointerGetAttribute("]
    if len(lines) != len(calls) or any(
            not l.startswith("vmem: error: " + c) or "VMEM_DISABLE=1" not in l
            for l, c in zip(lines, calls)):
        fail("expected one error line per refused call, in order %s, each naming "
             "VMEM_DISABLE=1; got:\n%s" % (calls, p.stderr))
    # the advice works: with vmem off, the driver answers (the simulator,
    # like CUDA, exports cudaMalloc memory)
    p = run(args, [args.prog, "ipc"], {"VMEM_DISABLE": "1"}, check=False)
    got = dict(l.split("=", 1) for l in p.stdout.splitlines() if "=" in l)
    if got.get("cudaIpcGetMemHandle") != "cudaSuccess" or \
            got.get("cuMemGetAddressRange") != "CUDA_SUCCESS" or "vmem:" in p.stderr:
        fail("ipc with VMEM_DISABLE=1: expected cudaIpcGetMemHandle=cudaSuccess and "
             "cuMemGetAddressRange=CUDA_SUCCESS without vmem messages, got:\n%s%s"
             % (p.stdout, p.stderr))
    print("ok: 5 refusals naming VMEM_DISABLE=1, attributes answered on evicted memory, "
          "host memory passed through; with VMEM_DISABLE=1 IPC works")


def t_refs_not_held(args):
    # A launch with more tensors than a call holds inline, when the host
    # cannot give vmem the memory to list them (failshim makes libvmem's
    # 1024-byte mallocs fail: the grown ref arrays): the call is refused,
    # never run on memory that may not be resident.  A refused call is not
    # issued, so it writes nothing: it is not an unseen write.
    p = run(args, [args.prog, "many-args"],
            {"VMEM_DEVICE_LIMIT": "48M", "VMEM_STATS": "1", "FAILSHIM_SIZE": "1024",
             "LD_PRELOAD": args.failshim + " " + args.vmem}, check=False)
    got = {}
    for line in p.stderr.splitlines():
        for key in ("possible unseen writes", "refs not held (calls refused)"):
            if line.startswith("vmem: " + key):
                got[key] = int(line.split()[-1])
    refused = "tensors seen and more that vmem could not hold" in p.stderr
    failed = "cudaLaunchKernel" in p.stderr and "cudaErrorMemoryAllocation" in p.stderr
    # 20 tensors, 16 held inline: 4 not held, one call refused
    want = {"refs not held (calls refused)": 4}
    if p.returncode != 1 or not refused or not failed or got != want:
        fail("many-args with libvmem's 1024-byte mallocs failing: expected exit 1 (the launch "
             "refused with cudaErrorMemoryAllocation, vmem's refusal line) and %s in VMEM_STATS; "
             "got exit %d, %s\n%s" % (want, p.returncode, got, p.stderr[-3000:]))
    print("ok: a launch whose refs could not be held was refused, not issued, and not "
          "counted as an unseen write")


def t_launch_oom(args):
    # A launch whose arguments cannot be resident together is not made; a
    # <<<>>> launch ignores the status, so the error must reach
    # cudaGetLastError (PyTorch's C10_CUDA_KERNEL_LAUNCH_CHECK).
    p = run(args, [args.prog, "launch-oom"], {"VMEM_DEVICE_LIMIT": "8M", "VMEM_HOST_MAP": "0"},
            check=False)
    if p.returncode != 0 or "last=cudaErrorMemoryAllocation" not in p.stdout:
        fail("launch-oom under VMEM_DEVICE_LIMIT=8M: expected exit 0 and "
             "last=cudaErrorMemoryAllocation, got exit %d\n--- stdout\n%s--- stderr\n%s"
             % (p.returncode, p.stdout, p.stderr))
    # and vmem says why, once: mt_probe's two 6 MiB arguments have no
    # stated size, so each is taken to the end of its allocation (3 pages
    # of 2 MiB each) where their first pages alone (4 MiB) would fit
    want = ("cudaLaunchKernel (kernel mt_probe) is answered out of memory: it needs 6 pages "
            "of 2 MiB resident at once (12 MiB), more than the budget of 8 MiB (4 pages); "
            "4 of those pages only because pointer arguments of unknown size are taken to "
            "the end of their allocations (4 MiB with the stated sizes alone, which would fit")
    lines = [l for l in p.stderr.splitlines() if l.startswith("vmem: error:")]
    if len(lines) != 1 or want not in lines[0]:
        fail("launch-oom: expected one error line containing\n  %s\ngot %d:\n%s"
             % (want, len(lines), "\n".join(lines)))
    print("ok: a launch that cannot fit is reported through cudaGetLastError, and "
          "vmem's error line says what it needed and why")


def t_launch_host_map(args):
    # The same launch where the device maps host memory (the simulator
    # says it can): it runs, with the pages past its pointers' first that
    # the budget cannot hold mapped from the host; every byte is right.
    d = tempfile.mkdtemp()
    trace = os.path.join(d, "t.jsonl")
    p = run(args, [args.prog, "launch-host-map"], {"VMEM_DEVICE_LIMIT": "8M", "VMEM_STATS": "1",
                                                   "VMEM_TRACE": trace}, check=False)
    got = [int(l.split()[-1]) for l in p.stderr.splitlines() if "calls run from host" in l]
    if p.returncode != 0 or p.stdout.strip() != "ok" or got != [1]:
        fail("launch-host-map under VMEM_DEVICE_LIMIT=8M: expected exit 0, ok and 1 call run "
             "from host in VMEM_STATS; got exit %d, %r, %s\n%s"
             % (p.returncode, p.stdout, got, p.stderr[-3000:]))
    # the trace has a host_map record for each page mapped so
    maps = [r for r in read_trace(trace) if r.get("type") == "host_map"]
    if not maps or any(r.get("mapped") != 0 or not r.get("alloc") for r in maps):
        fail("launch-host-map's trace: expected host_map records (mapped 0, an allocation), "
             "got %r" % maps[:3])
    shutil.rmtree(d)
    # VMEM_HOST_MAP=1 where the device cannot: vmem says so and stays
    # pass-through (as for any pool it cannot set up)
    p = run(args, [args.prog, "launch-host-map"],
            {"VMEM_DEVICE_LIMIT": "8M", "VMEM_HOST_MAP": "1", "SIMGPU_HOST_VMM": "0"}, check=False)
    if ("VMEM_HOST_MAP=1: host memory cannot be mapped" not in p.stderr or
            "vmem stays pass-through" not in p.stderr):
        fail("VMEM_HOST_MAP=1 on a device without host VMM: expected vmem's line naming it and "
             "pass-through, got exit %d\n%s" % (p.returncode, p.stderr[-2000:]))
    print("ok: a launch past the budget runs with its tail mapped from the host, bytes intact; "
          "VMEM_HOST_MAP=1 without device support is refused")


def t_torch_bounds(args):
    # PyTorch's vectorized fill and foreach add over the heads of 20 MiB
    # segments under a 24 MiB budget: the foreach add fits only when vmem
    # bounds the scanned pointers by the kernel's own counts; the values
    # come back right, and the stats count every bounded argument (3
    # fills, then a and b of the foreach add) and the stale slot's c as
    # untouched (no block of the launch names its slot).
    p = run(args, [args.prog, "torch-bounds"],
            {"VMEM_DEVICE_LIMIT": "24M", "VMEM_STATS": "1", "VMEM_HOST_MAP": "0"}, check=False)
    if p.returncode != 0 or p.stdout.strip() != "ok":
        fail("torch-bounds under VMEM_DEVICE_LIMIT=24M: expected exit 0 and 'ok', got exit %d"
             "\n--- stdout\n%s--- stderr\n%s" % (p.returncode, p.stdout, p.stderr))
    for what, want in (("bounded", "5"), ("untouched", "1")):
        got = [l.split()[-1] for l in p.stderr.splitlines() if "kernel arguments " + what in l]
        if got != [want]:
            fail("torch-bounds: expected the stats line 'kernel arguments %s %s', got %s\n%s"
                 % (what, want, got, p.stderr))
    print("ok: PyTorch's elementwise and foreach kernels ran over segment heads under a budget "
          "smaller than two segments, 5 arguments bounded, a leftover slot untouched")


def t_sgemm_batched(args):
    # PyTorch's float bmm goes to cublasSgemmStridedBatched: one gemm op
    # with a, b, c spanning all three batches (4x5, 5x6, 4x6 floats each).
    if not args.blasprog:
        print("skipped: no --blasprog")
        sys.exit(SKIP)
    with tempfile.TemporaryDirectory() as d:
        trace = os.path.join(d, "t.jsonl")
        p = run(args, [args.blasprog, "sgemm-batched"], {"VMEM_TRACE": trace})
        recs = read_trace(trace)
    ptrs = dict(kv.split("=") for kv in p.stdout.split()[:3])
    g = ops(recs, api="cublasSgemmStridedBatched")
    if len(g) != 1 or g[0]["op"] != "gemm":
        fail("expected 1 gemm op from cublasSgemmStridedBatched, got %s" % g)
    want = {"a": (ptrs["a"], 3 * 4 * 5 * 4), "b": (ptrs["b"], 3 * 5 * 6 * 4),
            "c": (ptrs["c"], 3 * 4 * 6 * 4)}
    got = {t["role"]: (t["ptr"], t["bytes"]) for t in g[0]["tensors"]}
    norm = lambda v: {k: (int(p_, 16), b) for k, (p_, b) in v.items()}
    if norm(got) != norm(want):
        fail("cublasSgemmStridedBatched tensors: expected %s, got %s" % (want, got))
    acc = {t["role"]: t["acc"] for t in g[0]["tensors"]}
    if acc != {"a": "r", "b": "r", "c": "w"}:
        fail("expected access a r, b r, c w (beta 0), got %s" % acc)
    print("ok: cublasSgemmStridedBatched traced with a, b, c over all batches")


def t_bn_ex(args):
    # PyTorch's cudnn_batch_norm: the Ex calls with a workspace and a
    # reserve space.  bnprog checks the results against the plain calls;
    # here each Ex call's trace record must list every pointer with its
    # role, access and extent.
    if not args.bnprog:
        print("skipped: no --bnprog")
        sys.exit(SKIP)
    with tempfile.TemporaryDirectory() as d:
        trace = os.path.join(d, "t.jsonl")
        p = run(args, [args.bnprog, args.bn_mode], {"VMEM_TRACE": trace})
        recs = read_trace(trace)
    lines = p.stdout.split("\n")
    if len(lines) < 3 or lines[2] != "ok":
        fail("bnprog %s: expected pointers, sizes and 'ok', got %r" % (args.bn_mode, p.stdout))
    ptr = {k: int(v, 16) for k, v in (kv.split("=") for kv in lines[0].split())}
    size = {k: int(v) for k, v in (kv.split("=") for kv in lines[1].split())}
    xb, pb = size["x_bytes"], size["param_bytes"]

    queries = [("cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize", "ws", "wsf_bytes"),
               ("cudnnGetBatchNormalizationBackwardExWorkspaceSize", "ws", "wsb_bytes"),
               ("cudnnGetBatchNormalizationTrainingExReserveSpaceSize", "reserve", "reserve_bytes")]
    for api, key, sk in queries:
        q = ops(recs, api=api)
        if len(q) != 1 or q[0]["op"] != "ws_query" or q[0]["tensors"]:
            fail("%s: expected 1 ws_query op without tensors, got %s" % (api, q))
        if q[0]["args"].get(key) != size[sk]:
            fail("%s: expected args.%s = %d (what the call answered), got %s"
                 % (api, key, size[sk], q[0]["args"]))

    def want(spec):
        return {role: (ptr[name], nbytes, acc) for role, name, nbytes, acc in spec}

    fwd_common = [("x", "x", xb, "r"), ("scale", "scale", pb, "r"), ("bias", "bias", pb, "r"),
                  ("rmean", "rmean", pb, "rw"), ("rvar", "rvar", pb, "rw"),
                  ("smean", "smean", pb, "w"), ("sinvvar", "sinvvar", pb, "w"),
                  ("ws", "wsf", size["wsf_bytes"], "w"),
                  ("reserve", "reserve", size["reserve_bytes"], "w")]
    bwd_common = [("x", "x", xb, "r"), ("dy", "dy", xb, "r"), ("scale", "scale", pb, "r"),
                  ("bias", "bias", pb, "r"), ("smean", "smean", pb, "r"),
                  ("sinvvar", "sinvvar", pb, "r"), ("ws", "wsb", size["wsb_bytes"], "w"),
                  ("reserve", "reserve", size["reserve_bytes"], "r")]
    expect = {
        ("cudnnBatchNormalizationForwardTrainingEx", "bn_fwd_train"): [
            want(fwd_common + [("y", "y", xb, "w")]),
            want(fwd_common + [("y", "y", xb, "rw"), ("z", "z", xb, "r")])],
        ("cudnnBatchNormalizationBackwardEx", "bn_bwd"): [
            want(bwd_common + [("dx", "dx", xb, "w"), ("dscale", "dscale", pb, "w"),
                               ("dbias", "dbias", pb, "w")]),
            want(bwd_common + [("dx", "dx", xb, "rw"), ("dscale", "dscale", pb, "rw"),
                               ("dbias", "dbias", pb, "rw"), ("y", "y", xb, "r"),
                               ("dz", "dz", xb, "w")])],
    }
    for (api, kind), calls in expect.items():
        got_ops = ops(recs, api=api)
        if len(got_ops) != len(calls):
            fail("%s: expected %d ops, got %d" % (api, len(calls), len(got_ops)))
        for i, (w, r) in enumerate(zip(calls, got_ops)):
            if r["op"] != kind:
                fail("%s call %d: expected op %s, got %s" % (api, i + 1, kind, r["op"]))
            got = {t["role"]: (int(t["ptr"], 16), t["bytes"], t["acc"]) for t in r["tensors"]}
            if len(got) != len(r["tensors"]) or got != w:
                lines_ = []
                for role in sorted(set(w) | set(got)):
                    e, g = w.get(role), got.get(role)
                    mark = "  " if e == g else "!!"
                    fmt = lambda v: "-" if v is None else "%#x %d bytes %s" % v
                    lines_.append("%s %-8s expected %-40s got %s" % (mark, role, fmt(e), fmt(g)))
                fail("%s call %d (%s): tensors differ (role: ptr, bytes, access)\n%s\n"
                     "raw: %s" % (api, i + 1, args.bn_mode, "\n".join(lines_), r["tensors"]))
    print("ok: %s batch norm Ex: results equal the plain calls; 3 size queries, "
          "2 forward and 2 backward calls traced with every role and access" % args.bn_mode)


def t_fork(args):
    # DataLoader workers fork while the training thread calls CUDA: every
    # child of forkprog must exit 0 at once (a lock copied held hangs it;
    # forkprog gives each child 10 s).  First untraced: the hooks are then
    # short, so the hammer thread spends much of its time holding vmem's
    # locks, and a fork without handlers hangs within a few forks.  Then
    # traced, so the trace ring and its writer thread are live across the
    # forks; the parent's trace must stay whole, with nothing from the
    # children (they do not trace).
    if not args.forkprog:
        print("skipped: no --forkprog")
        sys.exit(SKIP)
    p = run(args, [args.forkprog, "50"])
    if not p.stdout.startswith("ok 50 forks"):
        fail("forkprog: expected 'ok 50 forks', got %r; stderr:\n%s" % (p.stdout, p.stderr))
    untraced = p.stdout.strip()
    with tempfile.TemporaryDirectory() as d:
        trace = os.path.join(d, "t.jsonl")
        p = run(args, [args.forkprog, "50"], {"VMEM_TRACE": trace})
        if not p.stdout.startswith("ok 50 forks"):
            fail("forkprog under VMEM_TRACE: expected 'ok 50 forks', got %r; stderr:\n%s"
                 % (p.stdout, p.stderr))
        # the hammer thread may outrun the writer on a loaded machine:
        # counted drops are allowed, a record lost or torn is not
        recs = read_trace(trace, drops_allowed=True)
    heads = [r for r in recs if r["type"] in ("header", "end")]
    if len(heads) != 2:
        fail("trace: expected one header and one end record, got %d (children wrote to it?)"
             % len(heads))
    tids = {r["tid"] for r in recs if "tid" in r}
    if len(tids) > 2:
        fail("trace: expected records from the parent's 2 threads only, got tids %s" % sorted(tids))
    if len(ops(recs, api="cublasSetWorkspace_v2")) < 50:
        fail("trace: expected at least 50 cublasSetWorkspace_v2 ops (one per fork), got %d"
             % len(ops(recs, api="cublasSetWorkspace_v2")))
    print("ok: 50 forks while a thread was inside the hooks, untraced (%s) and traced (%s); "
          "every child exited 0; parent's trace whole" % (untraced, p.stdout.strip()))


def stats_calls(stderr):
    calls = {}
    for line in stderr.splitlines():
        f = line.split()
        if len(f) >= 3 and f[0] == "vmem:" and f[2].isdigit():
            calls[f[1]] = int(f[2])
    return calls


def t_driver(args):
    p = run(args, [args.prog, "driver"], {"VMEM_STATS": "1"})
    if p.stdout.strip() != "ok":
        fail("expected 'ok', got %r\n%s" % (p.stdout, p.stderr))
    calls = stats_calls(p.stderr)
    want = {"malloc": 1, "free": 1, "meminfo": 1, "launch": 1}
    got = {k: calls.get(k) for k in want}
    if got != want:
        fail("entry points should be vmem's wrappers: expected calls %s, got %s\n%s"
             % (want, got, p.stderr))
    print("ok: cuMemAlloc/cuMemFree/cuMemGetInfo from the entry-point query went through vmem")


def t_stats(args):
    p = run(args, [args.prog, "basic"], {"VMEM_STATS": "1"})
    calls = stats_calls(p.stderr)
    want = {"malloc": 1, "free": 1, "memset": 1, "launch": 1, "memcpy": 1, "sync": 1}
    got = {k: calls.get(k) for k in want}
    if got != want or "call kind" not in p.stderr:
        fail("VMEM_STATS=1: expected the table with calls %s, got %s\n%s" % (want, got, p.stderr))
    print("ok: stats table\n" + p.stderr)


def checksums(out):
    return [l for l in out.splitlines() if l.startswith("checksum:")]


def t_minitrain_checksums(args):
    if not args.minitrain or not os.path.exists(args.minitrain):
        print("SKIP: minitrain not built")
        sys.exit(SKIP)
    # every style on the smaller nets; the larger ones, whose calls are
    # the same kinds at more cost, per-tensor only
    every = ["per-tensor", "network", "caching"]
    combos = [
        (["--net", "alexnet"], every), (["--net", "vgg16"], every), (["--net", "resnet"], every),
        (["--net", "inception"], every), (["--net", "random:7"], every),
        (["--net", "vgg16", "--conv-api", "graph"], every),
        (["--net", "vgg19"], ["per-tensor"]), (["--net", "resnet50"], ["per-tensor"]),
        (["--net", "densenet"], ["per-tensor", "caching"]),
    ]
    failures = []
    for net, styles in combos:
        # minitrain's allocation styles give the same weights (the
        # minitrain-checksum-styles-* tests): one run without vmem per net
        # is every style's reference
        cmd = [args.minitrain] + net + ["--alloc", "per-tensor"] + args.mt_args
        base = run(args, cmd, preload=False, check=False)
        if base.returncode != 0:
            failures.append("%s: fails without vmem (exit %d): %s"
                            % (" ".join(cmd), base.returncode, base.stderr.strip()[-300:]))
            continue
        for style in styles:
            cmd = [args.minitrain] + net + ["--alloc", style] + args.mt_args
            got = run(args, cmd, {"VMEM_POLICY": "none"}, check=False)
            exp_c, got_c = checksums(base.stdout), checksums(got.stdout)
            if got.returncode != 0 or exp_c != got_c or not exp_c:
                failures.append("%s\n  expected %s\n  got      %s (exit %d) %s"
                                % (" ".join(cmd), exp_c, got_c, got.returncode,
                                   got.stderr.strip()[-300:]))
            else:
                print("ok: %s: %s" % (" ".join(cmd[1:]), exp_c[-1]))
    if failures:
        fail("\n".join(failures))


def t_minitrain_trace(args):
    if not args.minitrain or not os.path.exists(args.minitrain):
        print("SKIP: minitrain not built")
        sys.exit(SKIP)
    for api in ("legacy", "graph"):
        with tempfile.TemporaryDirectory() as d:
            trace = os.path.join(d, "vgg16.jsonl")
            counts_file = os.path.join(d, "counts.txt")
            cmd = [args.minitrain, "--net", "vgg16", "--conv-api", api] + args.mt_args
            # countshim sits in front of vmem and counts the calls minitrain
            # makes; the trace must have exactly one op per counted call.
            run(args, cmd, {"VMEM_POLICY": "none", "VMEM_TRACE": trace,
                            "COUNTSHIM_OUT": counts_file,
                            "LD_PRELOAD": args.countshim + " " + args.vmem})
            recs = read_trace(trace)
            counts = {}
            for line in open(counts_file):
                name, n = line.split()
                counts[name] = int(n)
            by_api = {}
            for r in ops(recs):
                by_api[r["api"]] = by_api.get(r["api"], 0) + 1

            def traced(name):
                return by_api.get(name, 0) + (by_api.get(name[:-3], 0) if name.endswith("_v2") else 0)

            bad = {k: {"calls": v, "ops": traced(k)} for k, v in counts.items() if traced(k) != v}
            if bad:
                fail("vgg16 --conv-api %s: op events per API differ from the calls minitrain made: %s"
                     % (api, bad))
            convs = len(ops(recs, op="conv_fwd"))
            print("ok: --conv-api %s: one op per call for %d APIs (%s); %d conv_fwd ops"
                  % (api, len(counts), ", ".join("%s %d" % kv for kv in sorted(counts.items())), convs))
            if api == "legacy" and os.path.exists(args.vmem_trace):
                g = subprocess.run([sys.executable, args.vmem_trace, "graph", trace],
                                   capture_output=True, text=True)
                if g.returncode != 0 or "digraph" not in g.stdout:
                    fail("vmem-trace graph failed (exit %d): %s" % (g.returncode, g.stderr))
                print("ok: vmem-trace graph wrote %d lines of DOT" % len(g.stdout.splitlines()))


TESTS = {
    "exports": t_exports, "passthrough": t_passthrough, "bad-settings": t_bad_settings,
    "unimplemented-settings": t_unimplemented_settings,
    "bad-trace-path": t_bad_trace_path, "threads": t_threads, "probe": t_probe,
    "driver-entry-points": t_driver, "stats": t_stats, "launch-oom": t_launch_oom, "launch-host-map": t_launch_host_map, "torch-bounds": t_torch_bounds,
    "stub-launch": t_stub_launch, "small-device": t_small_device,
    "copies-and-sets": t_copies_and_sets, "unseen-write": t_unseen_write,
    "unseen-rest": t_unseen_rest, "ipc": t_ipc,
    "refs-not-held": t_refs_not_held, "many-args": t_many_args,
    "destroyed-streams": t_destroyed_streams,
    "sgemm-batched": t_sgemm_batched, "bn-ex": t_bn_ex,
    "fork": t_fork,
    "minitrain-checksums": t_minitrain_checksums, "minitrain-trace": t_minitrain_trace,
}

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("test", choices=sorted(TESTS))
    ap.add_argument("--vmem", required=True)
    ap.add_argument("--prog", required=True)
    ap.add_argument("--map", required=True)
    ap.add_argument("--minitrain")
    ap.add_argument("--countshim", default="")
    ap.add_argument("--blasprog", default="")
    ap.add_argument("--bnprog", default="")
    ap.add_argument("--forkprog", default="")
    ap.add_argument("--copyprog", default="")
    ap.add_argument("--failshim", default="")
    ap.add_argument("--bn-mode", default="spatial")
    ap.add_argument("--vmem-trace", default="")
    ap.add_argument("--mt-args", nargs="*", default=["--iters", "2"])
    TESTS[ap.parse_args().test](ap.parse_args())
