#!/usr/bin/env python3
# Tests of scripts/vmem-fuzz's reading of vmem's out-of-memory lines
# (runtime_oom_report): the cause each kind of line gives.
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from scriptmod import load_script  # noqa: E402

SCRIPTS = os.environ.get('VMEM_SCRIPTS_DIR') or os.path.join(HERE, '..', '..', '..', 'scripts')
VF = load_script(os.path.join(SCRIPTS, 'vmem-fuzz'), 'vmem_fuzz')


class SaidCauseTest(unittest.TestCase):
	def check(self, line, cause, detail):
		got = VF.said_cause(line)
		self.assertEqual(got, (cause, detail), 'line %r: expected %r, got %r'
				 % (line, (cause, detail), got))

	def test_each_kind_of_line(self):
		self.check('cudaLaunchKernel (kernel k) is answered out of memory: it needs 17 pages of '
			   '2 MiB resident at once (34 MiB), more than the budget of 22 MiB (11 pages).  '
			   'Raise the budget', 'call-exceeds-budget',
			   'cudaLaunchKernel (kernel k): it needs 17 pages of 2 MiB resident at once '
			   '(34 MiB), more than the budget of 22 MiB (11 pages)')
		self.check('cudaMalloc of 20 MiB is answered out of memory: an allocation larger than '
			   'the budget (16 MiB) cannot be resident, and vmem does not take one.  Raise',
			   'call-exceeds-budget', 'cudaMalloc of 20 MiB: an allocation larger than the '
			   'budget (16 MiB) cannot be resident, and vmem does not take one')
		self.check('cudaMemcpy is answered out of memory: it needs 3 pages (6 MiB) resident at '
			   'once, within the budget of 8 MiB (4 pages), but 2 of the budget\'s pages were '
			   'locked by calls in flight on other threads.  Raise', 'locked-by-other-threads',
			   'cudaMemcpy: it needs 3 pages (6 MiB) resident at once, within the budget of 8 '
			   'MiB (4 pages), but 2 of the budget\'s pages were locked by calls in flight on '
			   'other threads')
		self.check('x is answered out of memory: it needs 3 pages (6 MiB) resident at once, '
			   'within the budget of 8 MiB, but the device gave vmem only 4 MiB (2 pages): '
			   'other processes or libraries use the rest.  Set', 'device-short',
			   'x: it needs 3 pages (6 MiB) resident at once, within the budget of 8 MiB, but '
			   'the device gave vmem only 4 MiB (2 pages): other processes or libraries use '
			   'the rest')
		self.check('cudnnConvolutionForward is answered out of memory: its memory needs 2 pages '
			   '(4 MiB) of the budget\'s 3 (6 MiB), but no algorithm vmem could run it with '
			   'has a workspace that fits beside its tensors, whole or in slices of its batch.  '
			   'Raise', 'no-fitting-algorithm', 'cudnnConvolutionForward: its memory needs 2 '
			   'pages (4 MiB) of the budget\'s 3 (6 MiB), but no algorithm vmem could run it '
			   'with has a workspace that fits beside its tensors, whole or in slices of its '
			   'batch')
		self.check('y is answered out of memory: it needs 3 pages (6 MiB) resident at once, '
			   'within the budget of 8 MiB (4 pages), and nothing else was locked, yet vmem '
			   'could not free the room - please report it', 'unexplained',
			   'y: it needs 3 pages (6 MiB) resident at once, within the budget of 8 MiB (4 '
			   'pages), and nothing else was locked, yet vmem could not free the room - please '
			   'report it')


class PolicyStatTest(unittest.TestCase):
	ERR = ('policy: iterations planned          4  suspended 0\n'
	       'policy: misses in planned iterations         30  elsewhere        234\n'
	       'policy:   of them beside the call before       30  (the two calls need more '
	       'pages than the budget together)\n')

	def test_planned_misses_and_those_beside_the_call_before(self):
		for name, want in (('misses in planned iterations', 30),
				   ('  of them beside the call before', 30),
				   ('iterations planned', 4)):
			got = VF.policy_stat(self.ERR, name)
			self.assertEqual(got, want, '%r: expected %d, got %d' % (name, want, got))
		# a run whose misses are not beside the call before has no such line
		got = VF.policy_stat(self.ERR.splitlines()[1], '  of them beside the call before')
		self.assertEqual(got, 0, 'no line: expected 0, got %d' % got)


class StatTest(unittest.TestCase):
	# the runtime's VMEM_STATS lines start with 'vmem: ', the pool's with
	# spaces (calls run with pages mapped from the host)
	ERR = ('vmem: misses (fault-ins)                             62\n'
	       '  calls run from host                30\n'
	       '  evictions                         101\n')

	def test_runtime_and_pool_lines(self):
		for name, want in (('misses (fault-ins)', 62), ('calls run from host', 30),
				   ('evictions', 101), ('waits to leave host', 0)):
			got = VF.stat(self.ERR, name)
			self.assertEqual(got, want, '%r: expected %d, got %d' % (name, want, got))


class KernelFloorTest(unittest.TestCase):
	def floor(self, text):
		import tempfile
		with tempfile.NamedTemporaryFile('w', suffix='.txt', delete=False) as f:
			f.write(text)
		try:
			return VF.kernel_floor(f.name)
		finally:
			os.unlink(f.name)

	def test_the_largest_launch_of_a_report(self):
		got = self.floor('model: titanx\nkernels: 9\nlargest_kernel_bytes: 25165824 '
				 'mt_channel_copy\n')
		self.assertEqual(got, (25165824, 'mt_channel_copy'),
				 'expected (25165824, mt_channel_copy), got %r' % (got,))

	def test_no_floor_without_a_launch_or_a_report(self):
		# no kernel ran (or the race checker was off): "0 -"
		got = self.floor('kernels: 0\nlargest_kernel_bytes: 0 -\n')
		self.assertIsNone(got, 'no launch: expected None, got %r' % (got,))
		got = self.floor('model: titanx\n')
		self.assertIsNone(got, 'no line: expected None, got %r' % (got,))
		got = VF.kernel_floor('/nonexistent/report.txt')
		self.assertIsNone(got, 'no report: expected None, got %r' % (got,))

	def test_infeasible_only_with_host_mapping_off(self):
		# with host mapping (the simulated GPU's default) a launch past
		# the budget runs: its floor no longer names a run infeasible
		for env, want in (({}, True), ({'VMEM_HOST_MAP': '0'}, False),
				  ({'VMEM_HOST_MAP': 'off'}, False), ({'VMEM_HOST_MAP': '1'}, True),
				  ({'SIMGPU_HOST_VMM': '0'}, False)):
			got = VF.host_mapping(env)
			self.assertEqual(got, want, '%r: expected host mapping %s, got %s' % (env, want, got))


if __name__ == '__main__':
	unittest.main()
