#!/usr/bin/env python3
"""vmem-trace on a real trace: minitrain VGG-16 under libvmem.so on the
simulated GPU, with a budget below its need (so the trace has fault-ins and
evictions), then every vmem-trace subcommand on that trace.

Checks (issue 4, "Done when"): the dataflow graph of the steady iteration
holds the forward chain of 13 convolutions and 3 fully connected layers, each
reachable from the one before; the Chrome trace is valid JSON with a compute
stream track, a copy track and the memory counters; the memory plot is a
well-formed SVG; the summary finds the steady iteration.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run(cmd, env=None):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        fail("%s\n  expected exit 0, got %d\n  stderr: %s"
             % (" ".join(cmd), p.returncode, p.stderr[-2000:]))
    return p


def parse_dot(text):
    nodes = {}
    for m in re.finditer(r'^\s*n(\d+) \[label="([a-z_0-9]+)\\n', text, re.M):
        nodes[int(m.group(1))] = m.group(2)
    edges = {}
    for m in re.finditer(r'^\s*n(\d+) -> n(\d+)', text, re.M):
        edges.setdefault(int(m.group(1)), set()).add(int(m.group(2)))
    return nodes, edges


def reachable(edges, a, b):
    seen, todo = {a}, [a]
    while todo:
        n = todo.pop()
        if n == b:
            return True
        for m in edges.get(n, ()):
            if m not in seen:
                seen.add(m)
                todo.append(m)
    return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minitrain", required=True)
    ap.add_argument("--vmem", required=True)
    ap.add_argument("--vmem-trace", required=True)
    a = ap.parse_args()

    with tempfile.TemporaryDirectory() as d:
        trace = os.path.join(d, "vgg16.jsonl")
        env = dict(os.environ, LD_PRELOAD=a.vmem, VMEM_TRACE=trace, SIMGPU_MEM="256M",
                   VMEM_DEVICE_RESERVE="0")
        run([a.minitrain, "--net", "vgg16", "--batch", "2", "--iters", "3"], env)
        vt = [sys.executable, a.vmem_trace]

        # graph: the forward chain of the steady iteration
        dot = run(vt + ["graph", trace]).stdout
        nodes, edges = parse_dot(dot)
        convs = sorted(n for n, op in nodes.items() if op == "conv_fwd")
        if len(convs) != 13:
            fail("graph: expected 13 conv_fwd nodes in one iteration, got %d" % len(convs))
        fcs = sorted(n for n, op in nodes.items() if op == "gemm" and n > convs[-1])[:3]
        if len(fcs) != 3:
            fail("graph: expected 3 gemm nodes after the last conv_fwd, got %d" % len(fcs))
        chain = convs + fcs
        for x, y in zip(chain, chain[1:]):
            if not reachable(edges, x, y):
                fail("graph: expected %s #%d to reach %s #%d through tensor edges; it does not"
                     % (nodes[x], x, nodes[y], y))
        print("ok: graph: chain of 13 conv_fwd and 3 gemm, %d nodes, %d edges"
              % (len(nodes), sum(len(v) for v in edges.values())))

        # chrome: valid JSON, the expected tracks and counters
        cj = os.path.join(d, "chrome.json")
        run(vt + ["chrome", trace, "-o", cj])
        try:
            doc = json.load(open(cj))
        except ValueError as e:
            fail("chrome: expected valid JSON, got %s" % e)
        ev = doc["traceEvents"] if isinstance(doc, dict) else doc
        names = {e["tid"]: e["args"]["name"] for e in ev
                 if e.get("ph") == "M" and e.get("name") == "thread_name"}
        x_tids = {e["tid"] for e in ev if e.get("ph") == "X"}
        stream_tracks = [t for t in x_tids if names.get(t, "").startswith("stream ")]
        copy_tracks = [t for t, n in names.items() if n.startswith("copies")]
        counters = {k for e in ev if e.get("ph") == "C" for k in e.get("args", {})}
        if not stream_tracks:
            fail("chrome: expected a 'stream ...' track with op slices, got tracks %s" % names)
        if not copy_tracks:
            fail("chrome: expected a 'copies ...' track, got tracks %s" % names)
        if not {"resident", "host", "budget"} <= counters:
            fail("chrome: expected counters resident, host, budget; got %s" % sorted(counters))
        print("ok: chrome: %d events, tracks %s" % (len(ev), sorted(names.values())))

        # memory: a well-formed SVG
        svg = os.path.join(d, "memory.svg")
        run(vt + ["memory", trace, "-o", svg])
        root = ET.parse(svg).getroot()
        if not root.tag.endswith("svg") or "resident" not in open(svg).read():
            fail("memory: expected an <svg> with a resident series, got root <%s>" % root.tag)
        print("ok: memory: SVG %d bytes" % os.path.getsize(svg))

        # summary: the steady iteration is found
        s = run(vt + ["summary", trace]).stdout
        if "steady iteration" not in s or "period" not in s:
            fail("summary: expected a steady iteration, got:\n" + s[-2000:])
        if not re.search(r"fault_in|fault-in", s):
            fail("summary: expected fault-in counts under a 256M budget, got:\n" + s[-2000:])
        print("ok: summary finds the steady iteration")


if __name__ == "__main__":
    main()
