#!/usr/bin/env python3
"""scripts/simgpu-idle on hand-made SIMGPU_TIMELINE files: the compute
engine's idle time split by what it waited for."""
import os
import subprocess
import sys
import tempfile
import unittest

TOOL = os.path.join(os.environ.get('VMEM_SCRIPTS_DIR', os.path.join(
	os.path.dirname(__file__), '..', '..', '..', 'scripts')), 'simgpu-idle')

# start end engine stream op host_at_issue stream_ready engine_free
TIMELINE = """\
0.000 0.100 compute 0x1 convA 0.000 0.000 0.000
0.100 0.400 h2d 0x2 cudaMemcpyAsync 0.100 0.100 0.000
0.400 0.500 compute 0x1 convB 0.100 0.400 0.100
0.700 0.800 compute 0x1 convC 0.700 0.500 0.500
0.800 0.850 d2h 0x3 cudaMemcpyAsync 0.800 0.800 0.000
"""


class IdleTest(unittest.TestCase):
	def run_tool(self, text, *extra):
		with tempfile.NamedTemporaryFile('w', suffix='.txt', delete=False) as f:
			f.write(text)
			path = f.name
		try:
			p = subprocess.run([sys.executable, TOOL, path] + list(extra),
					   capture_output=True, text=True)
		finally:
			os.unlink(path)
		return p

	def test_gaps_are_split_by_cause(self):
		p = self.run_tool(TIMELINE)
		self.assertEqual(p.returncode, 0, p.stderr)
		# convB waited 0.3 s for its stream (the copy), convC 0.2 s for the host
		self.assertIn('compute busy 0.300 s, idle 0.500 s', p.stdout)
		self.assertIn('idle waiting for the host      0.200 s over 1 gaps', p.stdout)
		self.assertIn('idle waiting for the stream    0.300 s over 1 gaps', p.stdout)
		self.assertIn('300.000 ms (stream) before convB', p.stdout)
		self.assertIn('copy engines busy: h2d 0.300 s, d2h 0.050 s', p.stdout)

	def test_last_window_keeps_only_its_ops(self):
		p = self.run_tool(TIMELINE, '--last', '0.3')
		self.assertEqual(p.returncode, 0, p.stderr)
		self.assertIn('window 0.300 s of virtual time: compute busy 0.100 s, idle 0.000 s',
			      p.stdout)

	def test_bad_line_names_file_and_line(self):
		p = self.run_tool(TIMELINE + "1 2 3\n")
		self.assertEqual(p.returncode, 1)
		self.assertIn(':6: expected 8 columns, got 3', p.stderr)


if __name__ == '__main__':
	unittest.main()
