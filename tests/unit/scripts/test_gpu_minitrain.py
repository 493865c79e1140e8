#!/usr/bin/env python3
# scripts/gpu-minitrain's verdicts (suite 'unit'): what a vmem run against
# its oracle is called.  The runs themselves need a GPU (or the simulated
# one through --libdirs); the verdict is the part that decides pass or fail.
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from scriptmod import load_script  # noqa: E402

SCRIPTS = os.environ.get('VMEM_SCRIPTS_DIR') or os.path.join(HERE, '..', '..', '..', 'scripts')


def load():
	sys.path.insert(0, os.path.join(SCRIPTS, 'torch'))
	return load_script(os.path.join(SCRIPTS, 'gpu-minitrain'), 'gpu_minitrain')


GM = load()
ORACLE = {'checksum': '0x1', 'losses': [2.0, 1.0]}


def run(rc=0, checksum='0x1', losses=(2.0, 1.0), answered=0, rescued=0):
	return {'rc': rc, 'json': {'checksum': checksum, 'losses': list(losses)},
		'answered': answered, 'rescued': rescued}


class VerdictTest(unittest.TestCase):
	def test_same_weights(self):
		self.assertEqual(GM.verdict(run(answered=26), ORACLE, True), 'same')

	def test_a_failed_run_fails_whatever_its_output(self):
		self.assertEqual(GM.verdict(run(rc=3), ORACLE, True), 'FAILED rc 3')

	def test_other_weights_with_the_applications_algorithms_are_different(self):
		v = GM.verdict(run(checksum='0x2', losses=(2.0, 1.5)), ORACLE, True)
		self.assertTrue(v.startswith('DIFFERENT (0x2 vs 0x1)'), v)

	def test_other_weights_where_vmem_chose_the_algorithms_say_so(self):
		v = GM.verdict(run(checksum='0x2', losses=(2.0, 1.01), rescued=8), ORACLE, True)
		self.assertEqual(v, 'other algorithms (0 answered, 8 rescued; losses within 1.0e-02)')
		v = GM.verdict(run(checksum='0x2', losses=(2.0,), answered=3), ORACLE, True)
		self.assertEqual(v, 'other algorithms (3 answered, 0 rescued; losses within n/a)')

	def test_an_oracle_that_does_not_repeat_itself_decides_nothing(self):
		v = GM.verdict(run(checksum='0x2'), ORACLE, False)
		self.assertEqual(v, 'inconclusive (oracle differs)')

	def test_no_checksum_is_not_the_same(self):
		r = run()
		r['json'] = {}
		self.assertTrue(GM.verdict(r, {}, True).startswith('DIFFERENT'))


if __name__ == '__main__':
	unittest.main()
