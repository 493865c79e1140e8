#!/usr/bin/env python3
# scripts/torch/vmm_cost.py against the simulated libcuda.so.1 (suite
# 'sim'): its ctypes structures and call sequence (reserve, create, map,
# set access, memset, unmap, remap, release) must work on a driver that
# checks them, before the script meets a real one.
import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.environ.get('VMEM_SCRIPTS_DIR') or os.path.join(HERE, '..', '..', '..', 'scripts')
LIBCUDA = os.environ.get('VMEM_SIMGPU_LIBCUDA')


@unittest.skipIf(not LIBCUDA, 'VMEM_SIMGPU_LIBCUDA not set (run through meson)')
class VmmCostSimTest(unittest.TestCase):
	def test_every_call_is_measured_per_chunk(self):
		p = subprocess.run([sys.executable, os.path.join(SCRIPTS, 'torch', 'vmm_cost.py'),
				    '--lib', LIBCUDA, '--chunks', '8', '--sizes', '2M,3M', '--json'],
				   stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
				   timeout=120, env=dict(os.environ, SIMGPU_MEM='1G'))
		self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
		res = json.loads(p.stdout.strip().splitlines()[-1])
		g = res['granularity']
		self.assertEqual(g, 2 << 20)
		# 3M rounds up to the granularity: 4 MiB.
		self.assertEqual(sorted(int(k) for k in res['sizes']), [2 << 20, 4 << 20])
		for size, calls in res['sizes'].items():
			self.assertEqual(set(calls), {'create', 'map', 'set_access', 'unmap', 'release',
						      'remap_map_access', 'remap_unmap', 'batched'})
			batched = calls.pop('batched')
			self.assertEqual(calls['map']['n'], 8)
			self.assertEqual(calls['remap_unmap']['n'], 16)
			for c in calls.values():
				self.assertGreater(c['median_us'], 0)
			# 8 chunks: two groups of 4 given access in one call each; 16
			# does not divide 8 and is left out
			self.assertEqual(sorted(batched), ['4'])
			self.assertEqual(batched['4']['map_access_per_chunk']['n'], 2)
			self.assertEqual(batched['4']['unmap_per_chunk']['n'], 2)
			self.assertEqual(batched['4']['unmap_spanning'], 'ok')   # the simulator takes it

	def test_missing_library_is_a_clear_error(self):
		p = subprocess.run([sys.executable, os.path.join(SCRIPTS, 'torch', 'vmm_cost.py'),
				    '--lib', '/nonexistent/libcuda.so.1'], stdout=subprocess.PIPE,
				   stderr=subprocess.PIPE, universal_newlines=True)
		self.assertEqual(p.returncode, 1)
		self.assertIn('vmm_cost: error: cannot load /nonexistent/libcuda.so.1', p.stderr)
		self.assertNotIn('Traceback', p.stderr)


if __name__ == '__main__':
	unittest.main()
