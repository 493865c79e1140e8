#!/usr/bin/env python3
# scripts/um/libvmemum.so preloaded into a program linked against a fake
# libcudart.so.13 (fakecudart/): what it asks of CUDA (the balloon, every
# cudaMalloc turned managed, nothing managed beyond the free memory), what
# the application sees (statuses, the last error) and what it prints.
import json
import os
import re
import subprocess
import unittest

PROG = os.environ.get('VMEM_TEST_UM_PROG')
LIB = os.environ.get('VMEM_TEST_UM_LIB')
MiB = 1 << 20


def run(args, budget=None, free_mib=80000, total_mib=81559, extra=None, cmd=None):
	env = dict(os.environ, LD_PRELOAD=LIB, FAKE_CUDA_FREE_MIB=str(free_mib),
		   FAKE_CUDA_TOTAL_MIB=str(total_mib))
	env.pop('VMEM_UM_BUDGET', None)
	if budget is not None:
		env['VMEM_UM_BUDGET'] = budget
	env.update(extra or {})
	p = subprocess.run(cmd or [PROG] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
			   universal_newlines=True, env=env, timeout=60)
	return p


def stats(stderr):
	for line in stderr.splitlines():
		if line.startswith('vmem-um: stats '):
			return json.loads(line[len('vmem-um: stats '):])
	raise AssertionError('no "vmem-um: stats" line in:\n' + stderr)


def cuda_calls(stderr):
	"""[(call, bytes, status)] of the fake libcudart, in order."""
	out = []
	for line in stderr.splitlines():
		m = re.match(r'fake-cudart: (cudaMallocManaged|cudaMalloc) (\d+) -> (\d+)$', line)
		if m:
			out.append((m.group(1), int(m.group(2)), int(m.group(3))))
	return out


@unittest.skipUnless(PROG and LIB and os.path.isfile(PROG) and os.path.isfile(LIB),
		     'VMEM_TEST_UM_PROG / VMEM_TEST_UM_LIB not built')
class UmPreloadTest(unittest.TestCase):
	def test_balloon_then_every_cudaMalloc_is_managed(self):
		p = run(['+100', '+200'], budget='3000M')
		self.assertEqual(p.returncode, 0, p.stderr)
		self.assertEqual(p.stdout.splitlines(), ['alloc 100: status 0, last error 0',
							 'alloc 200: status 0, last error 0'])
		# expected: the balloon (free 80000 MiB - budget 3000 MiB), then two managed
		self.assertEqual(cuda_calls(p.stderr), [('cudaMalloc', 77000 * MiB, 0),
							('cudaMallocManaged', 100 * MiB, 0),
							('cudaMallocManaged', 200 * MiB, 0)])
		s = stats(p.stderr)
		self.assertEqual((s['budget'], s['balloon'], s['managed_peak'], s['refused']),
				 (3000 * MiB, 77000 * MiB, 300 * MiB, 0))
		self.assertIn('vmem-um: budget 3000 MiB: balloon of 77000 MiB taken', p.stderr)

	def test_managed_total_never_passes_the_free_memory_at_start(self):
		p = run(['+6000', '+5000', '-0', '+5000'], budget='2000M', free_mib=10000)
		self.assertEqual(p.returncode, 0, p.stderr)
		self.assertEqual(p.stdout.splitlines(), ['alloc 6000: status 0, last error 0',
							 'alloc 5000: status 2, last error 2',
							 'free 0: status 0',
							 'alloc 5000: status 0, last error 0'])
		managed = [c for c in cuda_calls(p.stderr) if c[0] == 'cudaMallocManaged']
		# The refused 5000 MiB was never asked of CUDA; after the free it was.
		self.assertEqual(managed, [('cudaMallocManaged', 6000 * MiB, 0),
					   ('cudaMallocManaged', 5000 * MiB, 0)])
		self.assertRegex(p.stderr, r'vmem-um: refused a cudaMalloc of 5000\.0 MiB: managed memory '
				 r'would reach 11000\.0 MiB, more than the 10000\.0 MiB the device had free')
		s = stats(p.stderr)
		self.assertEqual((s['refused'], s['largest_refused'], s['managed']), (1, 5000 * MiB, 5000 * MiB))

	def test_bad_budget_refuses_every_allocation_with_a_clear_message(self):
		p = run(['+10'], budget='lots')
		self.assertEqual(p.returncode, 0, p.stderr)
		self.assertEqual(p.stdout.splitlines(), ['alloc 10: status 2, last error 2'])
		self.assertIn('vmem-um: error: VMEM_UM_BUDGET=lots is not a size', p.stderr)
		self.assertFalse([c for c in cuda_calls(p.stderr) if c[0] == 'cudaMallocManaged'])

	def test_a_process_without_cuda_is_untouched(self):
		p = run([], budget='1G', cmd=['sh', '-c', 'echo hello'])
		self.assertEqual(p.returncode, 0)
		self.assertEqual(p.stdout, 'hello\n')
		self.assertEqual(p.stderr, '')

	def test_no_budget_means_no_balloon(self):
		p = run(['+64'])
		self.assertEqual(cuda_calls(p.stderr), [('cudaMallocManaged', 64 * MiB, 0)])
		self.assertEqual(stats(p.stderr)['balloon'], 0)


if __name__ == '__main__':
	unittest.main()
