#!/usr/bin/env python3
# Tests of scripts/vmem-trace on synthetic traces (tracegen.py): summary
# numbers, steady-iteration detection, dataflow-graph edges, Chrome JSON,
# the SVG plot, and the errors for truncated and foreign files.
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tracegen  # noqa: E402

SCRIPTS = os.environ.get('VMEM_SCRIPTS_DIR') or os.path.join(HERE, '..', '..', '..', 'scripts')
VMEM_TRACE = os.path.join(SCRIPTS, 'vmem-trace')


def run(*args):
	"""(exit status, stdout, stderr) of vmem-trace ARGS."""
	p = subprocess.run([sys.executable, VMEM_TRACE] + [str(a) for a in args],
			   stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
	return p.returncode, p.stdout, p.stderr


def parse_dot(text):
	"""{seq: label} and [(src seq, dst seq, label)] of vmem-trace's DOT."""
	nodes = {}
	edges = []
	for line in text.splitlines():
		m = re.match(r'\s*n(\d+) \[label="((?:[^"\\]|\\.)*)"', line)
		if m:
			nodes[int(m.group(1))] = m.group(2).replace('\\n', '\n')
			continue
		m = re.match(r'\s*n(\d+) -> n(\d+) \[label="([^"]*)"', line)
		if m:
			edges.append((int(m.group(1)), int(m.group(2)), m.group(3)))
	return nodes, edges


class TraceCase(unittest.TestCase):
	def setUp(self):
		self.tmp = tempfile.TemporaryDirectory()
		self.dir = self.tmp.name

	def tearDown(self):
		self.tmp.cleanup()

	def path(self, name):
		return os.path.join(self.dir, name)

	def ok(self, *args):
		rc, out, err = run(*args)
		self.assertEqual(rc, 0, 'vmem-trace %s: exit %d\nstderr:\n%s' % (args, rc, err))
		self.assertNotIn('Traceback', err)
		return out, err

	def summary(self, path):
		out, _ = self.ok('summary', path, '--json', '--top', '0')
		return json.loads(out)

	def small_trace(self, name, build):
		"""A hand-made trace: build(tb) adds records."""
		p = self.path(name)
		tb = tracegen.TraceBuilder(p)
		build(tb)
		tb.end()
		tb.close()
		return p


class SummaryTest(TraceCase):
	def test_summary_counts_every_op_and_memory_record(self):
		p = self.path('v.jsonl')
		info = tracegen.vgg16_trace(p, iters=3, budget=True)
		s = self.summary(p)
		got = defaultdict(int)
		for e in s['ops']:
			got[e['op']] += e['calls']
		want = {k[3:]: v for k, v in info['counts'].items() if k.startswith('op:')}
		self.assertEqual(dict(got), want)
		for kind in ('alloc', 'free', 'offload', 'prefetch', 'fault_in', 'evict'):
			self.assertEqual(s['memory']['events'][kind]['count'], info['counts'].get(kind, 0), kind)
		self.assertEqual(s['memory']['events']['offload']['count'], 12 * 3)
		self.assertEqual(s['memory']['peak_resident'], info['peak_resident'])
		self.assertEqual(s['memory']['peak_host'], info['peak_host'])
		self.assertEqual(s['memory']['budget'], info['budget'])
		self.assertEqual(s['allocations_total'], len(info['allocs']))
		sizes = {e['alloc']: e['bytes'] for e in s['allocations']}
		self.assertEqual(sizes, info['allocs'])
		self.assertTrue(s['records']['end'])
		self.assertFalse(s['truncated'])

	def test_summary_counts_a_sliced_call_once(self):
		def build(tb):
			a = tb.alloc(4 << 20)
			b = tb.alloc(4 << 20)
			# a pooling call the shim ran in 3 slices, then one whole
			for i in (1, 2, 3):
				tb.op('pool_fwd', 'cudnnPoolingForward', [(a, 'r', 'x'), (b, 'w', 'y')],
				      args={'slice': '%d/3' % i, 'images': 2})
			tb.op('pool_fwd', 'cudnnPoolingForward', [(a, 'r', 'x'), (b, 'w', 'y')])
			# a convolution in 2 slices of images
			for off in (0, 4):
				tb.op('conv_fwd', 'cudnnConvolutionForward', [(a, 'r', 'x'), (b, 'w', 'y')],
				      args={'slice_images': '%d+4 of 8' % off})
		p = self.small_trace('slices.jsonl', build)
		ops = {e['op']: e for e in self.summary(p)['ops']}
		self.assertEqual((ops['pool_fwd']['calls'], ops['pool_fwd']['slices']), (2, 3))
		self.assertEqual((ops['conv_fwd']['calls'], ops['conv_fwd']['slices']), (1, 2))
		out, _ = self.ok('summary', p)
		self.assertIn('in slices', out)

	def test_summary_shows_the_gaps_of_the_set_in_effect(self):
		def build(tb):
			a = tb.alloc(1 << 20)
			tb.op('conv_fwd', 'cudnnConvolutionForward', [(a, 'w', 'y')])
			g = {'added': 3, 'wraps': 1, 'hidden': 3, 'late': 0, 'bytes': 6 << 20,
			     'need_before': 300 << 20, 'need_after': 200 << 20, 'fits': True}
			tb.plan('made', offload='none', gaps=g)
			tb.plan('kept', offload='conv', iter=3, trial={'conv': 1, 'none': 2},
				gaps=dict(g, added=5))
		p = self.small_trace('gaps.jsonl', build)
		g = self.summary(p)['plans']['gaps']
		self.assertEqual((g['added'], g['offload'], g['fits']), (5, 'conv', True))
		out, _ = self.ok('summary', p)
		self.assertIn('gaps (plan', out)
		self.assertIn('5 intervals (1 into the next iteration)', out)

	def test_summary_shows_dyn_passes_and_timed_iterations(self):
		def build(tb):
			a = tb.alloc(1 << 20)
			tb.op('conv_fwd', 'cudnnConvolutionForward', [(a, 'w', 'y')])
			tb.plan('made', offload='conv')
			tb.plan('trial', offload='conv', iter=1, trial={'conv': 0, 'none': 0})
			tb.plan('trial', offload='none', iter=2, trial={'conv': 0, 'none': 0})
			tb.plan('timed', offload='conv', iter=1, ns=3000000)
			tb.plan('kept', offload='none', iter=3, trial={'conv': 3000000, 'none': 2000000})
			tb.plan('timed', offload='none', iter=2, ns=2000000)
			tb.plan('timed', offload='none', iter=3, ns=2500000)
		p = self.small_trace('trials.jsonl', build)
		pl = self.summary(p)['plans']
		self.assertEqual(pl['events'], {'kept': 1, 'made': 1, 'timed': 3, 'trial': 2})
		self.assertEqual(pl['timed']['none'], {'iterations': 2, 'fastest_ns': 2000000,
						       'last_ns': 2500000})
		self.assertEqual(pl['timed']['conv']['iterations'], 1)
		self.assertEqual(pl['passes']['event'], 'kept')
		self.assertEqual(pl['passes']['offload'], 'none')
		out, _ = self.ok('summary', p)
		self.assertIn('dyn passes (plan 1): conv 3.000 ms, none 2.000 ms; kept none', out)

	def test_summary_names_least_workspace_passes_and_their_misses(self):
		def build(tb):
			a = tb.alloc(1 << 20)
			tb.op('conv_fwd', 'cudnnConvolutionForward', [(a, 'w', 'y')])
			tb.plan('made', offload='conv', **{'pass': 'conv'})
			tb.plan('trial', offload='conv', iter=1, trial={'conv': 0, 'conv(m)': 0},
				**{'pass': 'conv'})
			tb.plan('trial', offload='conv', iter=2, trial={'conv': 0, 'conv(m)': 0},
				**{'pass': 'conv(m)'})
			tb.plan('timed', offload='conv', iter=1, ns=3000000, **{'pass': 'conv'})
			tb.plan('kept', offload='conv', iter=3, trial={'conv': 3000000, 'conv(m)': 2990000},
				misses={'conv': 0, 'conv(m)': 5}, **{'pass': 'conv'})
			tb.plan('timed', offload='conv', iter=2, ns=2990000, **{'pass': 'conv(m)'})
		p = self.small_trace('least.jsonl', build)
		pl = self.summary(p)['plans']
		self.assertEqual(sorted(pl['timed']), ['conv', 'conv(m)'])
		self.assertEqual(pl['passes']['offload'], 'conv')
		out, _ = self.ok('summary', p)
		self.assertIn('dyn passes (plan 1): conv 3.000 ms, conv(m) 2.990 ms (5 pages missed); '
			      'kept conv', out)

	def test_summary_names_the_passes_ruled_out_with_their_floor(self):
		def build(tb):
			a = tb.alloc(1 << 20)
			tb.op('conv_fwd', 'cudnnConvolutionForward', [(a, 'w', 'y')])
			tb.plan('made', offload='conv', **{'pass': 'conv'})
			tb.plan('kept', offload='conv', iter=3, trial={'conv': 3000000, 'conv(m)': 0},
				misses={'conv': 0, 'conv(m)': 0}, not_run={'conv(m)': 15000000},
				**{'pass': 'conv'})
		p = self.small_trace('ruled-out.jsonl', build)
		self.assertEqual(self.summary(p)['plans']['passes']['not_run'], {'conv(m)': 15000000})
		out, _ = self.ok('summary', p)
		self.assertIn('dyn passes (plan 1): conv 3.000 ms, conv(m) not run (its convolutions '
			      'alone 15.000 ms); kept conv', out)

	def test_summary_allocation_lifetime_is_first_to_last_use(self):
		def build(tb):
			a = tb.alloc(4096)                                        # seq 1
			b = tb.alloc(8192)                                        # seq 2
			tb.op('conv_fwd', 'cudnnConvolutionForward', [(a, 'r', 'x'), (b, 'w', 'y')])  # 3
			tb.op('memset', 'cudaMemset', [(a, 'w', 'dst')])          # 4
			tb.op('act_fwd', 'cudnnActivationForward', [(b, 'r', 'x'), (b, 'w', 'y')])  # 5
			tb.free(a)                                                # 6
		s = self.summary(self.small_trace('l.jsonl', build))
		by = {e['alloc']: e for e in s['allocations']}
		self.assertEqual((by[1]['bytes'], by[1]['alloc_seq'], by[1]['free_seq']), (4096, 1, 6))
		self.assertEqual((by[1]['first_use'], by[1]['last_use'], by[1]['uses']), (3, 4, 2))
		self.assertEqual((by[1]['reads'], by[1]['writes']), (1, 1))
		self.assertEqual((by[2]['first_use'], by[2]['last_use'], by[2]['uses']), (3, 5, 2))
		self.assertIsNone(by[2]['free_seq'])
		# Largest first.
		self.assertEqual([e['alloc'] for e in s['allocations']], [2, 1])

	def test_summary_text_has_tables_and_steady_iteration(self):
		p = self.path('v.jsonl')
		info = tracegen.vgg16_trace(p, iters=3)
		out, _ = self.ok('summary', p)
		for heading in ('ops (', 'steady iteration', 'memory', 'allocations ('):
			self.assertIn(heading, out)
		a, b = info['last_iter']
		self.assertIn('last complete repetition: seq %d..%d' % (a, b), out)
		self.assertRegex(out, r'conv_fwd\s+cudnnConvolutionForward\s+13\n')


class SteadyTest(TraceCase):
	def test_steady_iteration_is_the_last_iteration(self):
		for iters in (2, 3, 5):
			p = self.path('v%d.jsonl' % iters)
			info = tracegen.vgg16_trace(p, iters=iters)
			st = self.summary(p)['steady']
			self.assertIsNotNone(st, 'no steady iteration in %d iterations' % iters)
			a, b = info['last_iter']
			self.assertEqual((st['start_seq'], st['end_seq']), (a, b), 'iters=%d' % iters)
			# One iteration, not two: 2 memcpy in, 13 conv, ... 1 sync.
			self.assertEqual(st['per_kind']['conv_fwd'], 13)
			self.assertEqual(st['per_kind']['sync'], 1)
			self.assertEqual(st['period'], st['ops'])

	def test_steady_iteration_without_teardown_ops(self):
		p = self.path('v.jsonl')
		info = tracegen.vgg16_trace(p, iters=4, teardown=False)
		st = self.summary(p)['steady']
		self.assertEqual((st['start_seq'], st['end_seq']), info['last_iter'])

	def test_steady_iteration_when_scanned_extents_move(self):
		# a kernel argument's extent is the rest of its allocation: where a
		# caching allocator puts the block changes it every iteration
		def build(tb):
			seg = tb.alloc(1 << 20)
			for it in range(4):
				off = 4096 * (it % 2)
				tb.op('conv_fwd', 'cudnnConvolutionForward', [(seg, 'w', 'y', 1024, 0)])
				tb.op('launch', 'cudaLaunchKernel', [(seg, 'rw', 'arg0', (1 << 20) - off, off)],
				      {'kernel': 'relu'})
				tb.op('gemm', 'cublasSgemm_v2', [(seg, 'r', 'B', 1024, 0)])
				tb.op('sync', 'cudaStreamSynchronize')
		p = self.small_trace('mv.jsonl', build)
		st = self.summary(p)['steady']
		self.assertIsNotNone(st)
		self.assertEqual(st['period'], 4)

	def test_steady_iteration_when_a_launch_scans_other_words(self):
		# PyTorch's reduce_kernel on an H200: how many of its argument words
		# fall inside vmem's memory changes from one iteration to the next
		def build(tb):
			seg = tb.alloc(1 << 20)
			scratch = tb.alloc(1 << 20)
			for it in range(4):
				args = [(seg, 'rw', 'arg0', 1 << 20, 0)]
				if it % 2:
					args.append((scratch, 'rw', 'arg0', 1 << 20, 0))
				tb.op('conv_fwd', 'cudnnConvolutionForward', [(seg, 'w', 'y', 1024, 0)])
				tb.op('launch', '__cudaLaunchKernel', args, {'kernel': 'reduce_kernel'})
				tb.op('gemm', 'cublasSgemm_v2', [(seg, 'r', 'B', 1024, 0)])
				tb.op('sync', 'cudaStreamSynchronize')
		p = self.small_trace('sc.jsonl', build)
		st = self.summary(p)['steady']
		self.assertIsNotNone(st, 'no steady iteration found when a launch scans 1 or 2 words')
		self.assertEqual(st['period'], 4)

	def test_no_steady_iteration_in_a_single_iteration(self):
		p = self.path('one.jsonl')
		tracegen.vgg16_trace(p, iters=1)
		self.assertIsNone(self.summary(p)['steady'])
		out, _ = self.ok('summary', p)
		self.assertIn('none found', out)


class ResidentTest(TraceCase):
	def build(self, tb):
		MiB = 1 << 20
		a = tb.alloc(8 * MiB)          # mapped at once: 4 pages of 2 MiB
		b = tb.alloc(4 * MiB)
		tb.op('conv_fwd', 'cudnnConvolutionForward', [(a, 'r', 'x', 2 * MiB, 0), (b, 'w', 'y')])
		tb.op('launch', '__cudaLaunchKernel', [(a, 'rw', 'arg0', 6 * MiB, 2 * MiB)],
		      {'kernel': 'relu'})
		tb.plan('made')
		tb.evict(b)
		self.seq_fault = tb.fault_in(b)
		tb.op('gemm', 'cublasSgemm_v2', [(b, 'r', 'A')])
		tb.evict(a)

	def test_pages_and_who_touched_them_before_the_first_eviction_after_the_plan(self):
		p = self.small_trace('r.jsonl', self.build)
		out, _ = self.ok('resident', p)
		self.assertIn('evict of alloc 2', out)
		self.assertIn(': 6 pages of 2.0 MiB, 12.0 MiB', out)
		# pages 1-3 of alloc 1 were last touched by the launch, page 0 by the conv
		self.assertIn('last touched by a kernel launch (scanned argument: its extent is the '
			      'rest of the allocation): 3 pages, 6.0 MiB', out)
		self.assertIn('launch arg0 @+2.0 MiB 6.0 MiB (scanned) x3', out)
		self.assertIn('conv_fwd y @+0 B 4.0 MiB x2', out)

	def test_the_nth_eviction_and_a_given_seq(self):
		p = self.small_trace('r2.jsonl', self.build)
		out, _ = self.ok('resident', p, '--evict', '1')
		self.assertIn('evict of alloc 1', out)
		self.assertIn(': 6 pages of 2.0 MiB', out)   # b faulted back in
		self.assertIn('gemm A @+0 B 4.0 MiB x2', out)
		out, _ = self.ok('resident', p, '--seq', str(self.seq_fault))
		self.assertIn(': 4 pages of 2.0 MiB', out)   # b evicted, not back yet

	def test_a_moment_not_in_the_trace_is_a_clear_error(self):
		p = self.small_trace('r3.jsonl', self.build)
		rc, out, err = run('resident', p, '--evict', '5')
		self.assertEqual(rc, 2, out + err)
		self.assertIn('eviction 5 after the first plan (2 evictions there)', err)
		self.assertNotIn('Traceback', err)


class GraphTest(TraceCase):
	def graph(self, path, *extra):
		out, err = self.ok('graph', path, *extra)
		return parse_dot(out), out, err

	def test_graph_of_vgg16_shows_13_conv_and_3_fc_chain(self):
		p = self.path('v.jsonl')
		info = tracegen.vgg16_trace(p, iters=3, budget=True)
		(nodes, edges), text, _ = self.graph(p)
		a, b = info['last_iter']
		self.assertTrue(all(a <= s <= b for s in nodes), 'nodes outside the last iteration')
		kind = {s: lbl.split('\n')[0] for s, lbl in nodes.items()}
		softmax = [s for s in nodes if kind[s] == 'softmax_fwd']
		self.assertEqual(len(softmax), 1)
		forward = sorted(s for s in nodes if s < softmax[0])
		layers = [s for s in forward if kind[s] in ('conv_fwd', 'gemm')]
		self.assertEqual([kind[s] for s in layers], ['conv_fwd'] * 13 + ['gemm'] * 3)
		succ = defaultdict(set)
		for s, d, _ in edges:
			succ[s].add(d)

		def reaches(x, y):
			seen, todo = set(), [x]
			while todo:
				n = todo.pop()
				if n == y:
					return True
				for m in succ[n]:
					if m not in seen and m <= y:
						seen.add(m)
						todo.append(m)
			return False
		for x, y in zip(layers, layers[1:]):
			self.assertTrue(reaches(x, y), 'no path from %s #%d to %s #%d' % (kind[x], x, kind[y], y))
		# The forward chain goes through the layers in order: no layer
		# reaches an earlier one, and the workspace makes no conv->conv edge.
		for s, d, _ in edges:
			self.assertLess(s, d)
			if kind[s] == 'conv_fwd':
				self.assertNotEqual(kind[d], 'conv_fwd', 'workspace edge %d->%d' % (s, d))
		self.assertIn('digraph vmem', text)

	def test_graph_three_layer_chain(self):
		def build(tb):
			x, w1, y1, y2, w3, y3 = (tb.alloc(n) for n in (1024, 256, 2048, 2048, 512, 4096))
			tb.op('memcpy', 'cudaMemcpy', [(x, 'w', 'dst')])
			tb.op('conv_fwd', 'cudnnConvolutionForward', [(x, 'r', 'x'), (w1, 'r', 'w'), (y1, 'w', 'y')])
			tb.op('act_fwd', 'cudnnActivationForward', [(y1, 'r', 'x'), (y2, 'w', 'y')])
			tb.op('gemm', 'cublasSgemm_v2', [(w3, 'r', 'A'), (y2, 'r', 'B'), (y3, 'w', 'C')])
		(nodes, edges), _, _ = self.graph(self.small_trace('c.jsonl', build), '--iter', 'all')
		kind = {s: lbl.split('\n')[0] for s, lbl in nodes.items()}
		self.assertEqual(sorted(kind.values()), ['act_fwd', 'conv_fwd', 'gemm'])
		inv = {v: k for k, v in kind.items()}
		self.assertEqual(sorted((s, d) for s, d, _ in edges),
				 [(inv['conv_fwd'], inv['act_fwd']), (inv['act_fwd'], inv['gemm'])])
		self.assertEqual(sorted(lbl for _, _, lbl in edges), ['2.0 KiB', '2.0 KiB'])

	def test_graph_fork_and_join(self):
		def build(tb):
			x, y, p, q = (tb.alloc(4096) for _ in range(4))
			tb.op('conv_fwd', 'cudnnConvolutionForward', [(x, 'r', 'x'), (y, 'w', 'y')])   # 5
			tb.op('act_fwd', 'cudnnActivationForward', [(y, 'r', 'x'), (p, 'w', 'y')])     # 6
			tb.op('pool_fwd', 'cudnnPoolingForward', [(y, 'r', 'x'), (q, 'w', 'y')])       # 7
			tb.op('add_tensor', 'cudnnAddTensor', [(p, 'r', 'a'), (q, 'rw', 'c')])         # 8
			tb.op('softmax_fwd', 'cudnnSoftmaxForward', [(q, 'r', 'x'), (x, 'w', 'y')])    # 9
		(nodes, edges), _, _ = self.graph(self.small_trace('f.jsonl', build))
		self.assertEqual(sorted(nodes), [5, 6, 7, 8, 9])
		self.assertEqual(sorted((s, d) for s, d, _ in edges), [(5, 6), (5, 7), (6, 8), (7, 8), (8, 9)])

	def test_graph_edge_carries_only_the_overlap(self):
		def build(tb):
			a = tb.alloc(1 << 20)
			tb.op('conv_fwd', 'cudnnConvolutionForward', [(a, 'w', 'y', 4096, 0)])       # 2
			tb.op('act_fwd', 'cudnnActivationForward', [(a, 'w', 'y', 4096, 4096)])      # 3
			tb.op('gemm', 'cublasSgemm_v2', [(a, 'r', 'B', 4096, 2048)])                 # 4
			tb.op('gemm', 'cublasSgemm_v2', [(a, 'r', 'B', 1024, 65536)])                # 5
		(nodes, edges), _, _ = self.graph(self.small_trace('o.jsonl', build))
		self.assertEqual(sorted(edges), [(2, 4, '2.0 KiB'), (3, 4, '2.0 KiB')])

	def test_graph_non_compute_write_and_workspace_make_no_edge(self):
		def build(tb):
			a, ws, out = tb.alloc(4096), tb.alloc(8192), tb.alloc(4096)
			tb.op('conv_fwd', 'cudnnConvolutionForward', [(ws, 'rw', 'ws'), (a, 'w', 'y')])  # 4
			tb.op('memcpy', 'cudaMemcpy', [(a, 'w', 'dst')])                                # 5
			tb.op('conv_fwd', 'cudnnConvolutionForward', [(a, 'r', 'x'), (ws, 'rw', 'ws'), (out, 'w', 'y')])  # 6
		(nodes, edges), _, _ = self.graph(self.small_trace('n.jsonl', build))
		self.assertEqual(sorted(nodes), [4, 6])
		self.assertEqual(edges, [])

	def test_graph_writes_output_file(self):
		p = self.path('v.jsonl')
		tracegen.vgg16_trace(p, iters=2)
		out = self.path('g.dot')
		self.ok('graph', p, '-o', out)
		with open(out) as f:
			nodes, edges = parse_dot(f.read())
		self.assertGreater(len(nodes), 16)
		self.assertGreater(len(edges), 16)


class GraphPhaseTest(TraceCase):
	def test_graph_clusters_forward_and_backward_and_marks_offload_candidates(self):
		p = self.path('v.jsonl')
		tracegen.vgg16_trace(p, iters=3)
		out, _ = self.ok('graph', p)
		fwd = out[out.index('subgraph cluster_forward'):out.index('subgraph cluster_backward')]
		bwd = out[out.index('subgraph cluster_backward'):]
		bwd = bwd[:bwd.index('  }')]
		(nodes, edges) = parse_dot(out)
		kind = {s: lbl.split('\n')[0] for s, lbl in nodes.items()}
		in_fwd = {int(m) for m in re.findall(r'n(\d+) \[label', fwd)}
		in_bwd = {int(m) for m in re.findall(r'n(\d+) \[label', bwd)}
		self.assertEqual(in_fwd | in_bwd, set(nodes))
		# forward ends with the softmax; the loss kernel starts backward
		self.assertEqual(max(in_fwd), max(s for s in nodes if kind[s] == 'softmax_fwd'))
		self.assertTrue(all(kind[s] != 'conv_fwd' for s in in_bwd))
		self.assertTrue(all(not kind[s].endswith('_bwd') for s in in_fwd))
		# red edges: exactly those from forward to backward
		red = set(re.findall(r'n(\d+) -> n(\d+) \[[^\n]*offload candidate', out))
		expect = {(str(a), str(b)) for a, b, _ in edges if a in in_fwd and b in in_bwd}
		self.assertTrue(expect)
		self.assertEqual(red, expect)
		m = re.search(r'(\d+) offload candidates', out)
		self.assertEqual(int(m.group(1)), len(expect))
		# conv and GEMM nodes carry the shape the trace gives
		convs = [lbl for lbl in nodes.values() if lbl.startswith('conv_fwd')]
		self.assertTrue(convs and all(lbl.split('\n')[2] == 'n2' for lbl in convs), convs[:2])
		self.assertIn('m4096 n2 k4096', [lbl.split('\n')[2] for lbl in nodes.values()
						  if lbl.startswith('gemm')])


class EventsTest(TraceCase):
	def test_events_lines_are_the_calls_with_whole_writes_inferred(self):
		def build(tb):
			a, b = tb.alloc(4096), tb.alloc(8192)
			tb.op('memcpy', 'cudaMemcpyAsync', [(a, 'w', 'dst')], {'bytes': 4096, 'kind': 1})  # 3
			tb.op('sync', 'cudaStreamSynchronize')                                             # 4
			tb.op('conv_fwd', 'cudnnConvolutionForward', [(a, 'r', 'x'), (b, 'w', 'y')],
			      {'algo': 1, 'ws': 0, 'n': 2, 'c': 3, 'h': 8, 'w': 8, 'k': 4, 'r': 3, 's': 3})  # 5
			tb.op('launch', 'cudaLaunchKernel', [(b, 'rw', 'arg0')], {'kernel': 'k', 'grid': [4, 1, 1],
										   'block': [256, 1, 1]})  # 6
			tb.op('stream', 'cudnnSetStream')                                                  # 7
			tb.free(a)
		p = self.small_trace('e.jsonl', build)
		out, _ = self.ok('events', p)
		lines = [x for x in out.splitlines() if not x.startswith('#')]
		self.assertEqual(lines[0], 'A 1 4096')
		self.assertEqual(lines[1], 'A 2 8192')
		self.assertEqual(lines[2].split(' | ')[1], '1:0:4096:w!:dst')
		self.assertIn(' memcpy cudaMemcpyAsync 3000 copy:4096:1', lines[2])
		self.assertEqual(lines[3].split()[4], 'sync')
		self.assertEqual(lines[4].split()[7], 'conv:0:2:3:8:8:4:3:3:1:0:0')
		self.assertEqual(lines[4].split(' | ')[1], '1:0:4096:r:x 2:0:8192:w!:y')
		# a kernel argument stays read-write; the stream op is left out
		self.assertEqual(lines[5].split(' | ')[1], '2:0:8192:rw:arg0')
		self.assertEqual(lines[6], 'F 1')
		out, _ = self.ok('events', p, '--no-infer-whole', '--from', '5', '--to', '5')
		lines = [x for x in out.splitlines() if not x.startswith('#')]
		self.assertEqual(len(lines), 1)
		self.assertTrue(lines[0].endswith('1:0:4096:r:x 2:0:8192:w:y'))


@unittest.skipUnless(os.environ.get('VMEM_PLAN_BIN'), 'VMEM_PLAN_BIN (build/policy/vmem-plan) not set')
class PlanTest(TraceCase):
	def test_plan_dry_run_finds_the_iteration_and_plans_offloads(self):
		p = self.path('v.jsonl')
		tracegen.vgg16_trace(p, iters=5)
		out, _ = self.ok('plan', p, '--offload', 'conv', '--offload-min', '0', '-a')
		m = re.search(r'plan 1 made \(period (\d+)', out)
		self.assertIsNotNone(m, out)
		self.assertIn('policy: ', out)
		# iterations planned whole: each offloads the 12 conv inputs that
		# are not the preloaded batch (written by a copy nobody waits for)
		m = re.search(r'iterations planned +(\d+)', out)
		self.assertGreaterEqual(int(m.group(1)), 1)
		self.assertRegex(out, r'offload +[1-9][0-9]* ')
		self.assertIn(': offload a', out)
		self.assertIn(': prefetch a', out)

	def test_plan_without_the_tool_is_a_clear_error(self):
		p = self.path('v.jsonl')
		tracegen.vgg16_trace(p, iters=2)
		env = dict(os.environ)
		env.pop('VMEM_PLAN_BIN', None)
		env['PATH'] = '/nonexistent'
		proc = subprocess.run([sys.executable, os.path.abspath(VMEM_TRACE), 'plan', p,
				       '--plan-bin', '/no/such'],
				      stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
				      env=env, cwd=self.dir)
		self.assertEqual(proc.returncode, 2)
		self.assertIn('--plan-bin /no/such: not an executable file', proc.stderr)


class ChromeTest(TraceCase):
	def test_chrome_is_valid_json_with_stream_copy_and_counter_tracks(self):
		p = self.path('v.jsonl')
		info = tracegen.vgg16_trace(p, iters=2, budget=True)
		out = self.path('c.json')
		self.ok('chrome', p, '-o', out)
		with open(out) as f:
			doc = json.load(f)
		ev = doc['traceEvents']
		names = {e['tid']: e['args']['name'] for e in ev
			 if e['ph'] == 'M' and e['name'] == 'thread_name'}
		self.assertIn('stream 0x0', names.values())
		self.assertIn('copies on stream 0xd2h', names.values())
		self.assertIn('copies on stream 0xh2d', names.values())
		self.assertEqual(len(set(names)), len(names), 'a tid named twice')
		nops = sum(v for k, v in info['counts'].items() if k.startswith('op:'))
		xs = [e for e in ev if e['ph'] == 'X' and e['cat'] not in tracegen_mem_kinds()]
		self.assertEqual(len(xs), nops)
		stream_tid = [t for t, n in names.items() if n == 'stream 0x0'][0]
		self.assertTrue(all(e['tid'] == stream_tid for e in xs))
		offl = [e for e in ev if e.get('cat') == 'offload']
		self.assertEqual(len(offl), info['counts']['offload'])
		self.assertTrue(all(names[e['tid']] == 'copies on stream 0xd2h' for e in offl))
		counters = {e['name'] for e in ev if e['ph'] == 'C'}
		self.assertEqual(counters, {'resident bytes', 'host bytes', 'budget bytes'})
		for e in ev:
			if e['ph'] in ('X', 'C', 'i'):
				self.assertIsInstance(e['ts'], (int, float))
			if e['ph'] == 'X':
				self.assertGreaterEqual(e['dur'], 0)

	def test_chrome_of_truncated_trace_is_still_valid_json(self):
		p = self.path('v.jsonl')
		tracegen.vgg16_trace(p, iters=2)
		with open(p, 'rb') as f:
			data = f.read()
		with open(p, 'wb') as f:
			f.write(data[:len(data) // 2])
		rc, out, err = run('chrome', p)
		self.assertEqual(rc, 0, err)
		json.loads(out)
		self.assertIn('truncated', err)


def tracegen_mem_kinds():
	return {'alloc', 'free', 'offload', 'prefetch', 'fault_in', 'evict', 'oom'}


class MemoryTest(TraceCase):
	def test_memory_svg_is_well_formed_with_three_series_and_shading(self):
		p = self.path('v.jsonl')
		tracegen.vgg16_trace(p, iters=3, budget=True)
		for xmode in ('time', 'seq'):
			out = self.path('m-%s.svg' % xmode)
			self.ok('memory', p, '-o', out, '--x', xmode)
			root = ET.parse(out).getroot()
			ns = '{http://www.w3.org/2000/svg}'
			self.assertEqual(root.tag, ns + 'svg')
			self.assertEqual(len(root.findall(ns + 'polyline')), 3)
			texts = ' '.join(t.text or '' for t in root.iter(ns + 'text'))
			self.assertIn('MiB', texts)
			self.assertIn('resident', texts)
			self.assertIn('budget', texts)
			self.assertIn('steady iteration', texts)

	def test_memory_svg_legend_fits_and_plans_are_marked(self):
		def build(tb):
			big = tb.alloc(3 << 30)        # "resident (peak 3.0 GiB)"
			a = tb.alloc(1 << 20)
			tb.op('conv_fwd', 'cudnnConvolutionForward', [(a, 'w', 'y')])
			tb.plan('made', plan=1, period=2)
			tb.offload(a)
			tb.op('act_fwd', 'cudnnActivationForward', [(a, 'r', 'x')])
			tb.prefetch(a)
			tb.drop(big)
			tb.plan('suspended', plan=1, period=2)
			tb.op('act_fwd', 'cudnnActivationForward', [(a, 'r', 'x')])
			tb.plan('resumed', plan=1, period=2)
			tb.free(a)
		p = self.small_trace('pl.jsonl', build)
		out = self.path('pl.svg')
		_, err = self.ok('memory', p, '-o', out)
		self.assertNotIn('do not know', err)
		root = ET.parse(out).getroot()
		ns = '{http://www.w3.org/2000/svg}'
		width = float(root.get('width'))
		for t in root.iter(ns + 'text'):
			x = float(t.get('x'))
			# 12 px Helvetica: under 7 px a character
			self.assertLessEqual(x + 7 * len(t.text or ''), width,
					     'legend text %r cut at the right edge (%s)' % (t.text, width))
		texts = [t.text for t in root.iter(ns + 'text')]
		self.assertIn('planned iterations', texts)
		for k in ('drop (1)', 'offload (1)', 'prefetch (1)'):
			self.assertIn(k, texts)
		bands = [r for r in root.iter(ns + 'rect') if r.get('fill') == '#7fbf7f' and r.find(ns + 'title') is not None]
		self.assertEqual(len(bands), 2)   # made..suspended, resumed..end

	def test_memory_svg_falls_back_to_seq_when_clocks_disagree(self):
		def build(tb):
			a = tb.alloc(1 << 20)
			tb.t += 10 ** 12   # ops stamped with an absolute clock
			tb.op('conv_fwd', 'cudnnConvolutionForward', [(a, 'w', 'y')])
			tb.op('act_fwd', 'cudnnActivationForward', [(a, 'r', 'x')])
			tb.t -= 10 ** 12
			tb.free(a)
		p = self.small_trace('clk.jsonl', build)
		out = self.path('clk.svg')
		_, err = self.ok('memory', p, '-o', out)
		self.assertIn('do not share a clock', err)
		ns = '{http://www.w3.org/2000/svg}'
		texts = [t.text for t in ET.parse(out).getroot().iter(ns + 'text')]
		self.assertIn('sequence number', texts)

	def test_memory_svg_without_memory_records_warns(self):
		def build(tb):
			tb.op('sync', 'cudaDeviceSynchronize')
		p = self.small_trace('e.jsonl', build)
		out = self.path('e.svg')
		_, err = self.ok('memory', p, '-o', out)
		self.assertIn('no memory records', err)
		ET.parse(out)


class BadInputTest(TraceCase):
	def write(self, name, data):
		p = self.path(name)
		with open(p, 'wb') as f:
			f.write(data)
		return p

	def assertFails(self, args, pattern):
		rc, out, err = run(*args)
		self.assertEqual(rc, 2, 'exit status; stderr:\n' + err)
		self.assertNotIn('Traceback', err)
		self.assertRegex(err, pattern)
		self.assertEqual(len(err.strip().splitlines()), 1, 'one line expected:\n' + err)

	def test_foreign_file_is_rejected_with_its_first_line(self):
		p = self.write('f.txt', b'hello world\nmore\n')
		for cmd in ('summary', 'graph', 'chrome', 'memory'):
			self.assertFails([cmd, p], r"^vmem-trace: .*f\.txt: not a vmem trace \(first line is "
				r"'hello world'\); expected a header written by VMEM_TRACE$")

	def test_json_without_header_is_foreign(self):
		p = self.write('j.jsonl', b'{"type":"op","seq":1}\n')
		self.assertFails(['summary', p], r'not a vmem trace \(first line is')

	def test_binary_and_empty_files_are_foreign(self):
		self.assertFails(['summary', self.write('b.bin', b'\x00\xff\xfe' * 100)], 'not a vmem trace')
		self.assertFails(['summary', self.write('e.jsonl', b'')], r'not a vmem trace \(the file is empty\)')

	def test_unknown_format_version_is_a_clear_error(self):
		p = self.write('v.jsonl', b'{"type":"header","format":99,"vmem":"9.0"}\n')
		self.assertFails(['summary', p], r'trace format 99 is not supported .*reads format 1.*vmem 9\.0')

	def test_missing_file(self):
		self.assertFails(['summary', self.path('nope.jsonl')], 'cannot read: No such file')

	def test_unwritable_output(self):
		p = self.path('v.jsonl')
		tracegen.vgg16_trace(p, iters=1)
		self.assertFails(['graph', p, '-o', self.path('no/such/dir/g.dot')], 'cannot write')

	def test_missing_end_record_warns_and_reads_the_records(self):
		p = self.path('t.jsonl')
		info = tracegen.vgg16_trace(p, iters=2, end=False)
		rc, out, err = run('summary', p, '--json')
		self.assertEqual(rc, 0, err)
		self.assertIn('no "end" record: the trace is truncated', err)
		s = json.loads(out)
		self.assertTrue(s['truncated'])
		self.assertEqual(s['records']['ops'] + s['records']['memory'], info['records'] - 1)

	def test_cut_last_line_warns_and_reads_the_rest(self):
		p = self.path('t.jsonl')
		tracegen.vgg16_trace(p, iters=2)
		with open(p, 'rb') as f:
			lines = f.read().splitlines(True)
		keep = lines[:100]
		with open(p, 'wb') as f:
			f.write(b''.join(keep) + lines[100][:17])
		rc, out, err = run('summary', p, '--json')
		self.assertEqual(rc, 0, err)
		self.assertIn('the last line (line 101) is cut', err)
		s = json.loads(out)
		self.assertEqual(s['records']['ops'] + s['records']['memory'], 99)

	def test_damaged_middle_line_is_skipped_with_a_warning(self):
		p = self.path('t.jsonl')
		tracegen.vgg16_trace(p, iters=1)
		with open(p, 'rb') as f:
			lines = f.read().splitlines(True)
		lines[5] = b'{"type":"op", garbage\n'
		with open(p, 'wb') as f:
			f.write(b''.join(lines))
		rc, _, err = run('summary', p)
		self.assertEqual(rc, 0, err)
		self.assertIn('1 line(s) are not JSON objects and were skipped (first: line 6)', err)

	def test_dropped_records_are_reported(self):
		p = self.path('d.jsonl')
		tracegen.vgg16_trace(p, iters=1, dropped=7)
		_, err = self.ok('summary', p)
		self.assertIn('dropped 7 record(s)', err)

	def test_gzip_trace_is_read(self):
		p = self.path('v.jsonl')
		tracegen.vgg16_trace(p, iters=2)
		with open(p, 'rb') as f, gzip.open(p + '.gz', 'wb') as g:
			g.write(f.read())
		self.assertEqual(self.summary(p + '.gz')['records'], self.summary(p)['records'])

	def test_odd_field_values_give_valid_output(self):
		# NaN is not JSON but Python writes and reads it; odd types where
		# numbers belong must not break any subcommand.
		p = self.write('odd.jsonl', (
			b'{"type":"header","format":1,"device":{"name":7,"total":"lots"},"settings":[]}\n'
			b'{"type":"op","seq":1,"t":NaN,"dur":"x","op":"conv_fwd","args":{"algo":Infinity},'
			b'"tensors":[{"alloc":"a","off":null,"bytes":-5,"acc":null},"junk"]}\n'
			b'{"type":"alloc","seq":2,"t":5,"alloc":1,"bytes":NaN,"resident":[1],"host":"2"}\n'))
		for cmd in ('summary', 'graph', 'chrome', 'memory'):
			rc, out, err = run(cmd, p)
			self.assertEqual(rc, 0, '%s: %s' % (cmd, err))
			self.assertNotIn('Traceback', err)
			if cmd == 'chrome':
				json.loads(out, parse_constant=lambda c: self.fail('%s in output' % c))
			if cmd == 'memory':
				ET.fromstring(out.encode())

	def test_bad_command_line_is_a_usage_error(self):
		rc, _, err = run('graph')
		self.assertEqual(rc, 2)
		self.assertIn('usage:', err)
		self.assertNotIn('Traceback', err)


if __name__ == '__main__':
	unittest.main()
