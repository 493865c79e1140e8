#!/usr/bin/env python3
# Tests of scripts/vmem-bound on synthetic traces whose live-memory curve is
# worked out by hand: a two-layer net (X -> Y -> loss, backward, SGD), a
# workspace, a read-only constant, wrap-around of the weights.
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tracegen  # noqa: E402
from scriptmod import load_script  # noqa: E402

SCRIPTS = os.environ.get('VMEM_SCRIPTS_DIR') or os.path.join(HERE, '..', '..', '..', 'scripts')
VMEM_BOUND = os.path.join(SCRIPTS, 'vmem-bound')
MiB = 1 << 20

VB = load_script(VMEM_BOUND, 'vmem_bound')


def run(*args):
	p = subprocess.run([sys.executable, VMEM_BOUND] + [str(a) for a in args],
			   stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
	return p.returncode, p.stdout, p.stderr


def two_layer_trace(path, iters=3):
	"""Per iteration (op index: what it does):
	  0 copy input -> X (write X)
	  1 fwd1: read X, W1, C (constant), ws; write Y
	  2 fwd2: read Y, W2; write L
	  3 bwd2: read L, Y, W2; write dY
	  4 bwd1: read dY, X, W1, ws; write dW1
	  5 sgd1: rw W1, read dW1
	  6 sgd2: rw W2
	Sizes: X 100, Y 50, L 10, dY 50, dW1 20, W1 20, W2 30, C 7, ws 40 MiB.
	Live (MiB) at each op, by hand: values live from their write to their
	last read; W1, W2 from their SGD write around to the next; C always
	(never written: 'unwritten'); ws only at ops 1 and 4.
	  op0: X100 W1 20 W2 30 C7                      = 157
	  op1: X100 Y50 W1 20 W2 30 C7 ws40             = 247
	  op2: X100 Y50 L10 W1 20 W2 30 C7              = 217
	  op3: X100 Y50 L10 dY50 W1 20 W2 30 C7         = 267
	  op4: X100 dY50 dW1 20 W1 20 W2 30 C7 ws40     = 267
	  op5: dW1 20 W1 20 W2 30 C7                    = 77
	  op6: W1 20 W2 30 C7                           = 57
	"""
	b = tracegen.TraceBuilder(path, budget=1 << 30, device='Simulated NVIDIA GeForce GTX TITAN X')
	a = {n: b.alloc(s * MiB) for n, s in
	     [('X', 100), ('Y', 50), ('L', 10), ('dY', 50), ('dW1', 20), ('W1', 20), ('W2', 30),
	      ('C', 7), ('ws', 40)]}
	for _ in range(iters):
		b.op('memcpy', 'cudaMemcpyAsync', [(a['X'], 'w', 'dst')])
		b.op('conv_fwd', 'cudnnConvolutionForward',
		     [(a['X'], 'r', 'x'), (a['W1'], 'r', 'w'), (a['C'], 'r', 'b'), (a['ws'], 'w', 'ws'),
		      (a['Y'], 'w', 'y')])
		b.op('gemm', 'cublasSgemm_v2', [(a['Y'], 'r', 'a'), (a['W2'], 'r', 'b'), (a['L'], 'w', 'c')])
		b.op('gemm', 'cublasSgemm_v2', [(a['L'], 'r', 'a'), (a['Y'], 'r', 'x'),
						(a['W2'], 'r', 'b'), (a['dY'], 'w', 'c')])
		b.op('conv_bwd_filter', 'cudnnConvolutionBackwardFilter',
		     [(a['dY'], 'r', 'dy'), (a['X'], 'r', 'x'), (a['W1'], 'r', 'w'), (a['ws'], 'w', 'ws'),
		      (a['dW1'], 'w', 'dw')])
		b.op('launch', 'cudaLaunchKernel', [(a['W1'], 'rw', 'arg0'), (a['dW1'], 'rw', 'arg1')],
		     args={'kernel': 'sgd'})
		b.op('launch', 'cudaLaunchKernel', [(a['W2'], 'rw', 'arg0')], args={'kernel': 'sgd'})
	b.end()
	b.close()


class VmemBoundTest(unittest.TestCase):
	def setUp(self):
		self.d = tempfile.TemporaryDirectory()
		self.trace = os.path.join(self.d.name, 't.jsonl')
		two_layer_trace(self.trace)

	def tearDown(self):
		self.d.cleanup()

	def bound(self, *extra):
		rc, out, err = run(self.trace, '--json', *extra)
		self.assertEqual(rc, 0, 'vmem-bound failed: %s' % err)
		return json.loads(out)

	def test_live_curve_matches_the_hand_count(self):
		curve = os.path.join(self.d.name, 'c.csv')
		rc, out, err = run(self.trace, '--budget', '1G', '--compute-ms', '10', '--curve', curve)
		self.assertEqual(rc, 0, err)
		with open(curve) as f:
			rows = f.read().splitlines()[1:]
		got = [int(r.split(',')[3]) // MiB for r in rows]
		want = [157, 247, 217, 267, 267, 77, 57]
		self.assertEqual(got, want, 'live MiB per op: expected %s, got %s' % (want, got))

	def test_no_excess_under_a_budget_above_the_peak(self):
		r = self.bound('--budget', '267M', '--compute-ms', '10')
		self.assertEqual((r['h2d_bytes'], r['d2h_bytes'], r['fits']), (0, 0, True))
		self.assertEqual(r['bound_ms'], 10)
		self.assertEqual(r['limited_by'], 'compute')

	def test_excess_must_cross_the_link_both_ways_except_unwritten_bytes(self):
		# budget 167 MiB: 100 MiB over at the peak; C (7 MiB) is never
		# written, so its host copy stays valid: 93 MiB must leave
		r = self.bound('--budget', '167M', '--compute-ms', '1', '--link', '1')
		self.assertEqual(r['peak_live'], 267 * MiB)
		self.assertEqual(r['h2d_bytes'], 100 * MiB)
		self.assertEqual(r['d2h_bytes'], 93 * MiB)
		self.assertAlmostEqual(r['h2d_ms'], 100 * MiB / 1e9 * 1e3)
		self.assertEqual(r['link_bound_ms'], r['h2d_ms'])
		# but the round trip is longer (test_round_trip_...)
		self.assertEqual(r['limited_by'], 'round trip')
		self.assertAlmostEqual(r['bound_ms'], r['round_trip_ms'])

	def test_classes_of_the_live_bytes_match_the_hand_count(self):
		# at each op: own (touched by it), x (written before it, read after
		# it, in the iteration), y (from the previous iteration, read
		# after it), z (written before it, read in the next iteration), w
		# (never written, its reads done); they sum to the live curve
		vt = VB.load_vmem_trace()
		ops = vt.find_steady(vt.load_trace(self.trace).ops)['ops']
		live, _, c = VB.live_curve(ops, classes=True)
		got = [tuple(c[k][i] // MiB for k in ('own', 'x', 'y', 'z', 'w')) for i in range(7)]
		want = [(100, 0, 57, 0, 0),      # X; W1 W2 C from before, read later
			(217, 0, 30, 0, 0),      # X W1 C ws Y; W2
			(90, 100, 20, 0, 7),     # Y W2 L; X; W1; C done
			(140, 100, 20, 0, 7),    # L Y W2 dY; X; W1; C
			(230, 0, 30, 0, 7),      # dY X W1 ws dW1; W2; C
			(40, 0, 30, 0, 7),       # W1 dW1; W2; C
			(30, 0, 0, 20, 7)]       # W2; W1 written at op 5, read next
		self.assertEqual(got, want, 'MiB (own, x, y, z, w) per op: expected %s, got %s'
				 % (want, got))
		self.assertEqual([sum(g) for g in got], [l // MiB for l in live])

	def test_round_trip_adds_the_two_directions_at_the_worst_op(self):
		# budget 167 MiB.  Op 3 has 100 MiB over it: C (7, never written
		# again) leaves for free, W1 (20) only has to come back, and the
		# other 73 MiB (of X) went out before op 3 and come back after it:
		# 73 + 93 MiB over a 1 GB/s link, against 100 MiB for the old term
		r = self.bound('--budget', '167M', '--compute-ms', '1', '--link', '1')
		self.assertEqual((r['round_trip_op'], r['round_trip_bytes']), (3, 73 * MiB))
		self.assertAlmostEqual(r['round_trip_ms'], (73 + 93) * MiB / 1e6)
		self.assertAlmostEqual(r['link_bound_ms'], 100 * MiB / 1e6)
		# two links at other rates: out at 1, back at 2 GB/s
		r = self.bound('--budget', '167M', '--compute-ms', '1', '--d2h', '1', '--h2d', '2')
		self.assertAlmostEqual(r['round_trip_ms'], 73 * MiB / 1e6 + 93 * MiB / 2e6)
		# above the peak there is nothing to move
		r = self.bound('--budget', '267M', '--compute-ms', '10')
		self.assertEqual((r['round_trip_ms'], r['round_trip_op'], r['bound_ms']), (0, None, 10))

	def test_keeping_addresses_adds_the_remaps_on_the_host(self):
		# 100 MiB back (50 chunks) and 93 MiB out (46 chunks, rounded down)
		r = self.bound('--budget', '167M', '--compute-ms', '1', '--link', '100',
			       '--remap-us', '40,20')
		self.assertAlmostEqual(r['remap_ms'], (50 * 40 + 46 * 20) * 1e-3)
		self.assertEqual(r['vmm_limited_by'], 'remaps')
		self.assertAlmostEqual(r['vmm_bound_ms'], r['remap_ms'])
		self.assertLess(r['bound_ms'], r['vmm_bound_ms'])
		r = self.bound('--budget', '167M', '--compute-ms', '1', '--link', '1', '--remap-us', '0,0')
		self.assertEqual((r['remap_ms'], r['vmm_bound_ms']), (0, r['bound_ms']))
		rc, out, err = run(self.trace, '--budget', '1G', '--compute-ms', '1', '--remap-us', '5')
		self.assertEqual(rc, 2)
		self.assertIn('--remap-us 5: expected two microsecond figures', err)

	def test_remaps_are_counted_per_chunk_of_the_pool(self):
		# 4 MiB chunks: 25 come back, 23 leave (rounded down); the cost is
		# per mapping, whatever its size
		r = self.bound('--budget', '167M', '--compute-ms', '1', '--link', '100',
			       '--remap-us', '40,20', '--chunk', '4M')
		self.assertEqual(r['chunk'], 4 * MiB)
		self.assertAlmostEqual(r['remap_ms'], (25 * 40 + 23 * 20) * 1e-3)
		# by default the pool's own choice: 2 MiB below a 1 GiB budget
		r = self.bound('--budget', '167M', '--compute-ms', '1', '--link', '100')
		self.assertEqual(r['chunk'], 2 * MiB)
		rc, out, err = run(self.trace, '--budget', '167M', '--compute-ms', '1', '--chunk', '3M')
		self.assertEqual(rc, 2)
		self.assertIn('--chunk 3145728: expected a multiple of 2 MiB', err)

	def test_auto_chunk_follows_the_pool(self):
		# budget / 128 (cdf340a), a power of two, 2 to 16 MiB
		for budget, want in ((167 * MiB, 2 * MiB), (511 * MiB, 2 * MiB), (512 * MiB, 4 * MiB),
				     (1 << 30, 8 * MiB), (3575653990, 16 * MiB),
				     (12 << 30, 16 * MiB), (80 << 30, 16 * MiB)):
			self.assertEqual(VB.auto_chunk(budget), want, 'budget %d' % budget)

	def test_link_comes_from_the_device_model_in_the_header(self):
		r = self.bound('--budget', '167M', '--compute-ms', '1')
		self.assertEqual((r['h2d_gbs'], r['d2h_gbs']), (16.0, 16.0))

	def test_unknown_device_needs_a_link_and_says_so(self):
		path = os.path.join(self.d.name, 'u.jsonl')
		b = tracegen.TraceBuilder(path, device='Some GPU')
		x = b.alloc(MiB)
		for _ in range(3):
			for k in range(5):
				b.op('launch', 'cudaLaunchKernel', [(x, 'rw', 'arg0')], args={'kernel': 'k%d' % k})
		b.end()
		b.close()
		rc, out, err = run(path, '--budget', '1G', '--compute-ms', '1')
		self.assertEqual(rc, 2)
		self.assertIn("'Some GPU', not a known model", err)
		self.assertIn('--link', err)


if __name__ == '__main__':
	unittest.main()
