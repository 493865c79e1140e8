#!/usr/bin/env python3
# Tests of scripts/bench-policies with fake_minitrain.py in place of
# minitrain on the simulated GPU: which rows run (the library's own
# VMEM_LOG=info lines decide), the figures in the tables (worked out from
# the fake's memory and time model), the batch search, failures shown with
# their reason, the deadline, and the same tables whatever -j.
import datetime
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tracegen  # noqa: E402
from scriptmod import load_script  # noqa: E402

SCRIPTS = os.environ.get('VMEM_SCRIPTS_DIR') or os.path.join(HERE, '..', '..', '..', 'scripts')
BENCH = os.path.join(SCRIPTS, 'bench-policies')
VMEM_BOUND = os.path.join(SCRIPTS, 'vmem-bound')
FAKE = os.path.join(HERE, 'fake_minitrain.py')
MiB, GiB = 1 << 20, 1 << 30
TODAY = datetime.date.today().isoformat()

ALL_VARS = {
	'VMEM_DISABLE': ['0'], 'VMEM_POLICY': ['none', 'all', 'conv', 'dyn'],
	'VMEM_DEVICE_RESERVE': ['512M'], 'VMEM_VA_SIZE': ['0'], 'VMEM_HOST_LIMIT': ['0'],
	'VMEM_CONV_ALGO': ['fit', 'app', 'mem', 'perf'], 'VMEM_PREFETCH': ['vdnn', 'timed'],
	'VMEM_LIVENESS': ['lazy', 'off', 'eager'], 'VMEM_EVICTION': ['plan', 'lru'],
	'VMEM_TRACE': [''], 'VMEM_LOG': ['warn', 'error', 'info', 'debug'], 'VMEM_STATS': ['0', '1'],
}


def load_bench():
	return load_script(BENCH, 'bench_policies')


class Case(unittest.TestCase):
	"""Runs bench-policies against the fake with a given config."""

	def setUp(self):
		self.tmp = tempfile.mkdtemp(prefix='bench-policies-test-')
		self.mt = os.path.join(self.tmp, 'minitrain')
		with open(self.mt, 'w') as f:
			f.write('#!/bin/sh\nexec "%s" "%s" "$@"\n' % (sys.executable, FAKE))
		os.chmod(self.mt, os.stat(self.mt).st_mode | stat.S_IXUSR)
		self.lib = os.environ.get('VMEM_TEST_STUB_LIB')
		if not self.lib or not os.path.isfile(self.lib):
			self.lib = os.path.join(self.tmp, 'libvmem.so')    # never loaded for real
			open(self.lib, 'w').close()
		self.simdir = os.path.join(self.tmp, 'simgpu')
		os.mkdir(self.simdir)
		self.out = os.path.join(self.tmp, 'out')

	def tearDown(self):
		shutil.rmtree(self.tmp, ignore_errors=True)

	def bench(self, cfg, *args, out=None):
		path = os.path.join(self.tmp, 'fake.json')
		with open(path, 'w') as f:
			json.dump(cfg, f)
		env = dict(os.environ, FAKE_MT_CONFIG=path)
		out = out or self.out
		cmd = [sys.executable, BENCH, '--minitrain', self.mt, '--lib', self.lib,
		       '--simgpu-dir', self.simdir, '-q'] + [str(a) for a in args] + [out]
		t0 = time.monotonic()
		p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
				   universal_newlines=True, timeout=600)
		self.wall = time.monotonic() - t0
		self.rc, self.stdout, self.stderr = p.returncode, p.stdout, p.stderr
		self.md = self.js = None
		if os.path.exists(os.path.join(out, 'summary.json')):
			with open(os.path.join(out, 'summary.json')) as f:
				self.js = json.load(f)
			with open(os.path.join(out, 'summary.md')) as f:
				self.md = f.read()
		return self.rc

	def rows(self, **kw):
		return [r for r in self.js['rows'] if all(r.get(k) == v for k, v in kw.items())]

	def one(self, **kw):
		rr = self.rows(**kw)
		self.assertEqual(len(rr), 1, 'expected one row with %r, got %d: %r' % (kw, len(rr), rr))
		return rr[0]

	def assertClose(self, got, want, rel=2e-5, what=""):
		self.assertIsNotNone(got, '%s: expected %r, got None' % (what, want))
		self.assertLessEqual(abs(got - want), rel * abs(want) + 1e-9,
				     '%s: expected %r, got %r' % (what, want, got))


class TodayRows(Case):
	"""The library of today: VMEM_POLICY=none only, the others warn."""

	CFG = {'per_image': {'alexnet': 128 * MiB}, 'ms_per_image': {'alexnet': 0.5}}

	def test_rows_that_exist_run_and_the_others_say_not_yet_available(self):
		rc = self.bench(self.CFG, '--tables', 't1', '--nets', 'alexnet')
		self.assertEqual(rc, 0, self.stderr)
		# alexnet 128: per-tensor need 16 GiB, network 24 GiB; 0.5 ms per image.
		orc = self.one(table='t1', row='base, unlimited')
		self.assertEqual(orc['status'], 'ok')
		self.assertEqual(orc['peak_device_bytes'], 24 * GiB)
		self.assertClose(orc['steady_ms'], 64.0, what='oracle ms')
		b12 = self.one(table='t1', row='base, 12 GiB')
		self.assertEqual(b12['status'], 'oom', b12)
		self.assertIn('device memory: cudaMalloc', b12['limit'])
		none = self.one(table='t1', row='none')
		self.assertEqual(none['status'], 'ok', none)
		# 4 GiB over 12: 64 * (1 + 2 * 4/12) ms
		self.assertClose(none['steady_ms'], 64 * (1 + 2 * 4 / 12), what='none ms')
		self.assertClose(none['speed'], 1 / (1 + 2 * 4 / 12), what='none speed')
		self.assertEqual(none['steady']['peak'], 12 * GiB)
		self.assertEqual(none['steady']['in_bytes'], 4 * GiB + MiB)
		for p in ('all(m)', 'all(p)', 'conv(m)', 'conv(p)', 'dyn'):
			r = self.one(table='t1', row=p)
			self.assertEqual(r['status'], 'n/a', r)
			self.assertIn('not implemented', r['reason'])
		self.assertEqual(self.md.count('not yet available on %s' % TODAY), 5, self.md)
		for p in ('all(m)', 'dyn'):
			self.assertIn('| %s | not yet available on %s (VMEM_POLICY=%s: not implemented) |'
				      % (p, TODAY, p.split('(')[0]), self.md)
		# no run of an unavailable policy was started
		logs = os.listdir(os.path.join(self.out, 'logs'))
		self.assertFalse([l for l in logs if 'policy-all' in l or 'policy-dyn' in l], logs)

	def test_lower_bound_is_vmem_bound_on_the_unlimited_per_tensor_trace(self):
		rc = self.bench(self.CFG, '--tables', 't1', '--nets', 'alexnet')
		self.assertEqual(rc, 0, self.stderr)
		# the traced run: vmem with room for 1.25x the need + 1 GiB, not the whole 1 TiB
		self.assertEqual(16 * GiB * 5 // 4 + GiB, 21 * GiB)
		with open(os.path.join(self.out, 'logs', 'titanx-alexnet-b128-i224-per-tensor-1t-n6-vmem-'
				       'device-limit-21g-trace.cmd')) as f:
			self.assertIn('VMEM_DEVICE_LIMIT=21G', f.read())
		b = self.one(table='t1', row='lower bound')
		self.assertEqual(b['status'], 'ok', b)
		# live = need + 1 MiB = 16 GiB + 1 MiB at a 12 GiB budget on a 16 GB/s link;
		# compute 64 ms (the unlimited network-style run).
		h2d = 4 * GiB + MiB
		self.assertEqual(b['h2d_bytes'], h2d)
		self.assertClose(b['bound_ms'], max(64.0, h2d / 16e9 * 1e3), what='bound ms')
		self.assertEqual(b['limited_by'], 'H2D')
		none = self.one(table='t1', row='none')
		self.assertClose(none['vs_bound'], none['steady_ms'] / b['bound_ms'], what='x bound')
		# the h100 part uses its own trace and link, at 1/2 and 1/4 of the per-tensor peak
		rc = self.bench(self.CFG, '--tables', 't1h', '--nets', 'alexnet', out=self.out + '2')
		self.assertEqual(rc, 0, self.stderr)
		for frac in (2, 4):
			b = self.one(table='t1h', row='lower bound', budget_label='1/%d' % frac)
			budget = 16 * GiB // frac
			self.assertEqual(b['budget'], budget)
			self.assertClose(b['bound_ms'], max(64.0, (16 * GiB + MiB - budget) / 55e9 * 1e3),
					 what='h100 bound at 1/%d' % frac)

	def test_settings_the_library_does_not_list_or_accept_are_not_available(self):
		cfg = dict(self.CFG)
		cfg['vars'] = dict(ALL_VARS, VMEM_CONV_ALGO=['default', 'perf'])
		del cfg['vars']['VMEM_LIVENESS']
		cfg['not_implemented'] = []
		rc = self.bench(cfg, '--tables', 't1,t3', '--nets', 'alexnet,vgg16', '--t3-models', 'titanx')
		self.assertEqual(rc, 0, self.stderr)
		r = self.one(table='t1', row='all(m)')
		self.assertEqual(r['status'], 'n/a')
		self.assertIn('VMEM_CONV_ALGO=mem not accepted', r['reason'])
		self.assertEqual(self.one(table='t1', row='all(p)')['status'], 'ok')
		r = self.one(table='t3', row='liveness eager', alloc='network')
		self.assertEqual(r['status'], 'n/a')
		self.assertIn('no VMEM_LIVENESS in this libvmem.so', r['reason'])
		self.assertEqual(self.one(table='t3', row='plan eviction', alloc='network')['status'], 'ok')


class EveryRow(Case):
	"""A library with every setting: every row has numbers."""

	CFG = {'vars': ALL_VARS, 'not_implemented': [],
	       'per_image': {'vgg19': 96 * MiB, 'vgg16': 64 * MiB},
	       'ms_per_image': {'vgg19': 2.0, 'vgg16': 1.0}}

	def test_every_row_is_filled(self):
		rc = self.bench(self.CFG, '--tables', 't1,t1p,t3,check', '--nets', 'vgg19,vgg16',
				'--t3-models', 'h100', '--t3-batch', '32')
		self.assertEqual(rc, 0, self.stderr)
		bad = [r for r in self.js['rows'] if r['status'] not in ('ok', 'oom')]
		self.assertEqual(bad, [], 'rows without numbers')
		self.assertNotIn('not yet available', self.md)
		# dyn (vgg19 256 at 12 GiB: need 24 GiB): 512 ms * (1 + 0.125 * 12/12)
		r = self.one(table='t1', row='dyn', net='VGG-16 (256)')
		self.assertClose(r['steady_ms'], 512 * 1.125, what='dyn ms')
		self.assertEqual(len(r['iter_ms']), 14,
				 'dyn runs --iters + 8 iterations (its timed passes) unless --dyn-iters')
		# the steady time: the last 2; what dyn chose and kept, from VMEM_STATS
		self.assertEqual(r['dyn_choice'], 'conv')
		self.assertEqual(r['dyn_kept'], 'conv(m)')
		self.assertEqual(r['planned'], 10)
		self.assertIn('| dyn | trained (chose conv, kept conv(m), 10 planned) |', self.md)
		# the prefetch table has its lower bound beside every row: Table 1's, at the same budget
		for model, budget in (('titanx', 12 * GiB), ('h100', 256 * 96 * MiB // 2)):
			b = self.one(table='t1p', model=model, net='VGG-16 (256)', row='lower bound')
			self.assertEqual(b['budget'], budget)
			for r in self.rows(table='t1p', model=model, net='VGG-16 (256)'):
				if r['row'] != 'lower bound':
					self.assertClose(r['vs_bound'], r['steady_ms'] / b['bound_ms'],
							 what='%s %s x bound' % (model, r['row']))
		r = self.one(table='t1', row='conv(p)', net='VGG-16 (128)')
		self.assertClose(r['speed'], 1 / (1 + 0.75 * 0 / 12) if 128 * 96 * MiB <= 12 * GiB
				 else 1 / (1 + 0.75 * (128 * 96 * MiB - 12 * GiB) / (12 * GiB)), what='conv(p)')

	def test_liveness_and_eviction_order_in_table_3(self):
		rc = self.bench(self.CFG, '--tables', 't3', '--nets', 'vgg16', '--t3-models', 'titanx,h100',
				'--t3-batch', '32')
		self.assertEqual(rc, 0, self.stderr)
		# vgg16 b32: per-tensor need 2 GiB, network 3 GiB, caching 2.5 GiB.
		for model in ('titanx', 'h100'):
			for alloc, need in (('network', 3 * GiB), ('caching', 5 * GiB // 2)):
				off = self.one(table='t3', model=model, alloc=alloc, row='liveness off')
				eager = self.one(table='t3', model=model, alloc=alloc, row='liveness eager')
				self.assertEqual(off['steady']['peak'], need + MiB)
				self.assertEqual(eager['steady']['peak'], 2 * GiB + MiB)
				lru = self.one(table='t3', model=model, alloc=alloc, row='LRU eviction')
				plan = self.one(table='t3', model=model, alloc=alloc, row='plan eviction')
				self.assertEqual(lru['budget'], need // 2)
				self.assertClose(lru['speed'], 1 / (1 + 2.0 * (need - need // 2) / (need // 2)),
						 what='LRU speed')
				self.assertClose(plan['speed'], 1 / (1 + 1.0 * (need - need // 2) / (need // 2)),
						 what='plan speed')
		# the saving column: eager against the style's own peak without vmem
		line = next(l for l in self.md.splitlines()
			    if l.startswith('| titanx | VGG-16 | network | liveness eager |'))
		self.assertIn('| 33% |', line)

	def test_the_issue_11_check_runs_at_1_05_of_the_per_tensor_need(self):
		rc = self.bench(self.CFG, '--tables', 'check')
		self.assertEqual(rc, 0, self.stderr)
		need = 256 * 96 * MiB
		for r in self.rows(table='check'):
			self.assertEqual(r['budget'], int(need * 1.05), r['row'])
		eager = self.one(table='check', row='liveness eager')
		self.assertClose(eager['speed'], 1.0, what='eager fits')
		default = self.one(table='check', row='none (default)')
		over = need * 1.5 - int(need * 1.05)
		self.assertClose(default['speed'], 1 / (1 + 2.0 * over / int(need * 1.05)), rel=1e-4,
				 what='default speed')
		self.assertIn('| none (default) | trained (2 planned) |', self.md)
		self.assertIn('| liveness off | trained |', self.md)      # no policy: no plan
		self.assertRegex(self.md, r"\| none \(default\) \| trained \(2 planned\) \|.*\| no \|")

	def test_eviction_setting_is_found_by_name_with_the_accepted_values(self):
		cfg = dict(self.CFG)
		cfg['vars'] = dict(ALL_VARS)
		del cfg['vars']['VMEM_EVICTION']
		cfg['vars']['VMEM_EVICT_ORDER'] = ['belady', 'lru']
		rc = self.bench(cfg, '--tables', 't3', '--nets', 'vgg16', '--t3-models', 'titanx',
				'--t3-batch', '32')
		self.assertEqual(rc, 0, self.stderr)
		self.assertEqual(self.js['meta']['eviction']['var'], 'VMEM_EVICT_ORDER')
		self.assertEqual(self.js['meta']['eviction']['plan'], 'belady')
		logs = os.path.join(self.out, 'logs')
		cmds = []
		for f in sorted(os.listdir(logs)):
			if f.endswith('.cmd'):
				with open(os.path.join(logs, f)) as fh:
					cmds.append(fh.read())
		self.assertTrue(any('VMEM_EVICT_ORDER=belady' in c for c in cmds), cmds)
		self.assertTrue(any('VMEM_EVICT_ORDER=lru' in c for c in cmds), cmds)
		plan = self.one(table='t3', alloc='network', row='plan eviction')
		self.assertEqual(plan['status'], 'ok')


class NoEvictionSetting(Case):
	"""The library of 2026-11-23: every policy, the plan's eviction order
	always on, no setting to switch it."""

	CFG = {'vars': {k: v for k, v in ALL_VARS.items() if k != 'VMEM_EVICTION'},
	       'not_implemented': [],
	       'per_image': {'vgg19': 96 * MiB, 'vgg16': 64 * MiB},
	       'ms_per_image': {'vgg19': 2.0, 'vgg16': 1.0}}

	def test_lru_against_plan_order_is_no_policy_against_the_default(self):
		rc = self.bench(self.CFG, '--tables', 't3', '--nets', 'vgg16', '--t3-models', 'titanx',
				'--t3-batch', '32')
		self.assertEqual(rc, 0, self.stderr)
		self.assertIsNone(self.js['meta']['eviction'])
		self.assertEqual(self.rows(table='t3', row='LRU eviction'), [])
		self.assertEqual(self.rows(table='t3', row='plan eviction'), [])
		self.assertIn('not separately switchable', self.md)
		with open(os.path.join(self.out, 'logs', 'titanx-vgg16-b32-i224-network-1536m-n6-vmem-'
				       'liveness-off-trace.cmd')) as f:
			cmd = f.read()
		self.assertIn('VMEM_LIVENESS=off', cmd)
		self.assertIn('VMEM_POLICY=none', cmd)
		# network style: need 3 GiB, half 1.5 GiB; no policy is slower (3.0) than the default (2.0)
		need, half = 3 * GiB, 3 * GiB // 2
		lru = self.one(table='t3', alloc='network', row='no policy (LRU)')
		default = self.one(table='t3', alloc='network', row='none (default)', budget_label='1/2')
		self.assertEqual(lru['budget'], half)
		self.assertClose(lru['speed'], 1 / (1 + 3.0 * (need - half) / half), what='no policy speed')
		self.assertClose(default['speed'], 1 / (1 + 2.0 * (need - half) / half), what='default speed')
		self.assertClose(lru['x_unlimited'], 1 + 3.0 * (need - half) / half, what='x unlimited')

	def test_every_row_of_table_3_and_the_check_has_its_lower_bound(self):
		rc = self.bench(self.CFG, '--tables', 't3,check', '--nets', 'vgg16', '--t3-models', 'titanx',
				'--t3-batch', '32')
		self.assertEqual(rc, 0, self.stderr)
		# the bound reads the per-tensor run's trace (live 2 GiB + 1 MiB) at the style's half,
		# with the style's unlimited time (32 ms) as compute time, on titanx's 16 GB/s
		for alloc, need in (('network', 3 * GiB), ('caching', 5 * GiB // 2), ('per-tensor', 2 * GiB)):
			b = self.one(table='t3', alloc=alloc, row='lower bound')
			self.assertEqual(b['status'], 'ok', b)
			self.assertEqual(b['budget'], need // 2)
			h2d = 2 * GiB + MiB - need // 2
			self.assertEqual(b['h2d_bytes'], h2d, alloc)
			self.assertClose(b['bound_ms'], max(32.0, h2d / 16e9 * 1e3), what='%s bound' % alloc)
			for name in ('none (default)', 'no policy (LRU)'):
				r = self.one(table='t3', alloc=alloc, row=name, budget_label='1/2')
				self.assertClose(r['vs_bound'], r['steady_ms'] / b['bound_ms'],
						 what='%s %s x bound' % (alloc, name))
			# unlimited memory: the bound is the unlimited run's own time
			r = self.one(table='t3', alloc=alloc, row='liveness eager')
			self.assertClose(r['vs_bound'], r['steady_ms'] / 32.0, what='unlimited x bound')
		# one traced run serves every style's bound
		logs = os.listdir(os.path.join(self.out, 'logs'))
		self.assertEqual([l for l in logs if l.startswith('titanx-vgg16-b32-i224-per-tensor-1t-n6-vmem-device')
				  and l.endswith('.cmd')],
				 ['titanx-vgg16-b32-i224-per-tensor-1t-n6-vmem-device-limit-3584m-trace.cmd'])
		line = next(l for l in self.md.splitlines()
			    if l.startswith('| titanx | VGG-16 | network | lower bound at 1/2 (1.50 GiB) |'))
		self.assertIn('limited by H2D', line)
		# the check: at 1.05x the per-tensor need nothing must move, the bound is the compute time
		need = 256 * 96 * MiB
		b = self.one(table='check', row='lower bound')
		self.assertEqual(b['budget'], int(need * 1.05))
		self.assertClose(b['bound_ms'], 512.0, what='check bound')
		r = self.one(table='check', row='none (default)')
		self.assertClose(r['vs_bound'], r['steady_ms'] / 512.0, what='check x bound')
		self.assertRegex(self.md, r'\| lower bound \| limited by compute \|')


class Failures(Case):
	CFG = {'per_image': {'alexnet': 128 * MiB}, 'ms_per_image': {'alexnet': 0.5}}

	def test_a_crashed_row_is_shown_with_its_reason_and_fails_the_run(self):
		cfg = dict(self.CFG, crash=[{'net': 'alexnet', 'policy': 'none', 'mem': '12G'}])
		rc = self.bench(cfg, '--tables', 't1', '--nets', 'alexnet')
		self.assertEqual(rc, 1)
		r = self.one(table='t1', row='none')
		self.assertEqual(r['status'], 'crash')
		self.assertIn('SIGABRT', r['reason'])
		self.assertIn('simgpu: illegal address', r['reason'])
		self.assertIn('| none | CRASHED: killed by SIGABRT: simgpu: illegal address', self.md)

	def test_a_failed_unlimited_run_stops_its_rows_with_the_reason(self):
		cfg = dict(self.CFG, crash=[{'net': 'alexnet', 'policy': 'None', 'alloc': 'network',
					     'mem': '1T'}])
		rc = self.bench(cfg, '--tables', 't1', '--nets', 'alexnet')
		self.assertEqual(rc, 1)
		self.assertEqual(self.one(table='t1', row='base, unlimited')['status'], 'crash')
		r = self.one(table='t1', row='none')
		self.assertEqual(r['status'], 'skipped')
		self.assertIn('the unlimited run failed: killed by SIGABRT', r['reason'])
		self.assertEqual(self.one(table='t1', row='dyn')['status'], 'n/a')
		self.assertIn('| none | not run: the unlimited run failed', self.md)

	def test_other_weights_than_the_unlimited_run_show_when_computing(self):
		cfg = dict(self.CFG, wrong=[{'policy': 'none', 'mem': '12G'}])
		rc = self.bench(cfg, '--tables', 't1', '--nets', 'alexnet', '--no-dryrun')
		self.assertEqual(rc, 1)
		r = self.one(table='t1', row='none')
		self.assertEqual(r['status'], 'wrong', r)
		self.assertIn('| none | WRONG WEIGHTS: weights differ', self.md)
		# in dry-run the same difference is not a failure: nothing was computed
		rc = self.bench(cfg, '--tables', 't1', '--nets', 'alexnet', out=self.out + '2')
		self.assertEqual(rc, 0)
		self.assertIn('Weights cannot be compared in dry-run', self.md)

	def test_the_deadline_stops_running_jobs_and_reports_the_rest_not_run(self):
		cfg = dict(self.CFG, sleep_s=30)
		# the deadline counts from the start, availability probes included
		rc = self.bench(cfg, '--tables', 't1', '--nets', 'alexnet', '--deadline', '10', '-j', '1')
		self.assertEqual(rc, 1)
		self.assertLess(self.wall, 28, 'the deadline did not stop the 30 s runs')
		r = self.one(table='t1', row='base, unlimited')
		self.assertEqual(r['status'], 'deadline')
		self.assertIn('| base, unlimited | not run: stopped after', self.md)
		self.assertIn('| base, 12 GiB | not run: not started (deadline) |', self.md)
		self.assertIn('| none | not run: the unlimited run was cut by the deadline |', self.md)
		self.assertIn('| dyn | not yet available on', self.md)

	def test_bad_options_exit_2_and_say_what_to_do(self):
		for args, text in ((['-j', '0'], '-j 0: give at least 1'),
				   (['--tables', 't9'], '--tables t9: unknown'),
				   (['--iters', '1'], 'the first iteration is never a steady one'),
				   (['--eviction-setting', 'lru'], 'write VAR=LRU,PLAN')):
			rc = self.bench(self.CFG, *args)
			self.assertEqual(rc, 2, args)
			self.assertIn(text, self.stderr)
		cmd = [sys.executable, BENCH, '--minitrain', '/nonexistent/minitrain', '--lib', self.lib,
		       '--simgpu-dir', self.simdir, self.out]
		p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
		self.assertEqual(p.returncode, 2)
		self.assertIn('minitrain not found at /nonexistent/minitrain', p.stderr)


class Search(Case):
	# resnet50: 100 MiB per image (per-tensor), 150 MiB network.
	CFG = {'vars': ALL_VARS, 'not_implemented': ['VMEM_POLICY=conv', 'VMEM_POLICY=all'],
	       'per_image': {'resnet50': 100 * MiB}, 'ms_per_image': {'resnet50': 1.0}}

	def test_the_largest_batch_is_found_exactly_and_its_limit_named(self):
		rc = self.bench(self.CFG, '--tables', 't2', '--nets', 'resnet50', '--search-precision', '0',
				'--host-limit', '20G')
		self.assertEqual(rc, 0, self.stderr)
		base = self.one(table='t2', row='no vmem, per-tensor')
		self.assertEqual(base['largest'], 12 * GiB // (100 * MiB))          # 122
		self.assertEqual(base['first_failing'], base['largest'] + 1)
		self.assertIn('device memory: cudaMalloc', base['limit'])
		net = self.one(table='t2', row='no vmem, network')
		self.assertEqual(net['largest'], int(12 * GiB / (150 * MiB)))         # 81
		# under vmem: need - 12 GiB must fit in the 20 GiB host limit: 32 GiB / 100 MiB
		none = self.one(table='t2', row='none')
		self.assertEqual(none['largest'], 32 * GiB // (100 * MiB))           # 327
		self.assertEqual(none['limit'], 'host memory (VMEM_HOST_LIMIT=20.00 GiB is full of offloaded data)')
		self.assertIn('| ResNet-50 | none | 327 | 2.68 |', self.md)
		# speed at that batch against the unlimited run at the same batch
		self.assertClose(none['speed'], 1 / (1 + 2.0 * (327 * 100 * MiB - 12 * GiB) / (12 * GiB)),
				 what='speed at the largest batch')
		self.assertEqual(self.one(table='t2', row='conv(m)')['status'], 'n/a')

	def test_a_single_call_too_large_for_the_device_is_named(self):
		rc = self.bench(self.CFG, '--tables', 't2', '--nets', 'resnet50', '--search-precision', '0',
				'--host-limit', '0')
		self.assertEqual(rc, 0, self.stderr)
		none = self.one(table='t2', row='none')
		# the largest call is need / 8: at most 12 GiB, so 8 * 12 GiB / 100 MiB
		self.assertEqual(none['largest'], 8 * 12 * GiB // (100 * MiB))
		self.assertIn("one call's tensors and workspace do not fit: cudnnConvolutionForward",
			      none['limit'])


class Deterministic(Case):
	CFG = {'vars': ALL_VARS, 'not_implemented': ['VMEM_POLICY=dyn', 'VMEM_POLICY=conv'],
	       'per_image': {'alexnet': 128 * MiB, 'resnet50': 100 * MiB}}

	def test_the_tables_do_not_depend_on_the_number_of_jobs(self):
		def strip(js):
			out = []
			for r in js['rows']:
				out.append({k: v for k, v in r.items() if k not in ('wall_s', 'trace')})
			return out
		args = ('--tables', 't1,t2', '--nets', 'alexnet,resnet50', '--search-precision', '0.1')
		self.assertEqual(self.bench(self.CFG, '-j', '1', *args), 0, self.stderr)
		one = strip(self.js)
		md1 = self.md
		self.assertEqual(self.bench(self.CFG, '-j', '4', *args, out=self.out + '4'), 0, self.stderr)
		self.assertEqual(strip(self.js), one)
		cut = lambda md: [l for l in md.splitlines() if l.startswith('|')]
		self.assertEqual(cut(self.md), cut(md1))

	def test_render_rewrites_the_same_summary_from_the_json(self):
		self.assertEqual(self.bench(self.CFG, '--tables', 't1', '--nets', 'alexnet'), 0, self.stderr)
		md = os.path.join(self.out, 'summary.md')
		with open(md) as f:
			before = f.read()
		os.unlink(md)
		p = subprocess.run([sys.executable, BENCH, '--render', self.out], stdout=subprocess.PIPE,
				   stderr=subprocess.PIPE, universal_newlines=True)
		self.assertEqual(p.returncode, 0, p.stderr)
		with open(md) as f:
			self.assertEqual(f.read(), before)
		self.assertFalse([f for f in os.listdir(os.path.join(self.out, 'logs')) if f.startswith('render')])


class Units(unittest.TestCase):

	def setUp(self):
		self.bp = load_bench()
		self.tmp = tempfile.mkdtemp(prefix='bench-policies-unit-')

	def tearDown(self):
		shutil.rmtree(self.tmp, ignore_errors=True)

	def test_steady_time_is_the_median_of_the_last_iterations_never_the_first(self):
		st = self.bp.steady_ms
		self.assertEqual(st([300.0, 100.0, 140.0, 90.0, 100.0, 110.0], 3), 100.0)
		self.assertEqual(st([300.0, 100.0], 3), 100.0)
		self.assertEqual(st([300.0, 120.0, 100.0], 5), 110.0)
		self.assertIsNone(st([], 3))

	def test_trace_steady_follows_every_record_with_a_resident_count(self):
		"""Three iterations of: op0 (X resident), an eviction of 30 MiB, op1,
		a 'drop' record of a kind added later (20 MiB less), op2, a fault-in
		of 30 MiB.  Last iteration, by hand: resident at op0 = 100 MiB (+ the
		weights 10), op1 70+10, op2 50+10; peak 110 MiB; average over the
		three calls (110 + 80 + 60) / 3 MiB; in 30 MiB, out 30 MiB."""
		path = os.path.join(self.tmp, 't.jsonl')
		b = tracegen.TraceBuilder(path, budget=1 << 30, device='Simulated NVIDIA GeForce GTX TITAN X')
		x = b.alloc(100 * MiB)
		w = b.alloc(10 * MiB)
		for _ in range(3):
			b.op('conv_fwd', 'cudnnConvolutionForward', [(x, 'w', 'y'), (w, 'r', 'w')])
			b.resident -= 30 * MiB
			b._mem('evict', x, 30 * MiB, 30 * MiB)
			b.op('act_fwd', 'cudnnActivationForward', [(x, 'rw', 'x')])
			b.resident -= 20 * MiB
			b._mem('drop', x, 20 * MiB, 20 * MiB)
			b.op('conv_bwd_filter', 'cudnnConvolutionBackwardFilter', [(x, 'r', 'x'), (w, 'w', 'dw')])
			b.resident += 50 * MiB
			b._mem('fault_in', x, 30 * MiB, 30 * MiB)
		b.end()
		b.close()
		s = self.bp.trace_steady(self.bp.load_vmem_trace(), path)
		self.assertEqual(s['ops'], 3)
		self.assertEqual(s['peak'], 110 * MiB)
		self.assertEqual(s['avg'], (110 + 80 + 60) * MiB // 3)
		self.assertEqual(s['in_bytes'], 30 * MiB)
		self.assertEqual(s['out_bytes'], 30 * MiB)
		self.assertEqual(s['records'].get('drop'), 1)

	def test_what_stopped_a_run_is_named(self):
		lim = self.bp.limit_of
		self.assertEqual(lim({'stderr': 'vmem: error: pinned host memory exhausted while allocating '
					      '(2097152 bytes): 20480 MiB of host memory hold offloaded data, '
					      'VMEM_HOST_LIMIT=20480 MiB (0 = unlimited); raise VMEM_HOST_LIMIT'}, GiB),
				 'host memory (VMEM_HOST_LIMIT=20.00 GiB is full of offloaded data)')
		self.assertEqual(lim({'oom': {'call': 'cudaMalloc', 'bytes': 3 * GiB}}, 2 * GiB),
				 'one allocation of 3.00 GiB is larger than the device (2.00 GiB)')
		self.assertEqual(lim({'oom': {'call': 'cudaMalloc', 'bytes': 64 * MiB}}, 2 * GiB),
				 'device memory: cudaMalloc of 64 MiB failed')
		self.assertIn("one call's tensors and workspace do not fit: cudnnConvolutionForward",
			      lim({'oom': {'call': 'cudnnConvolutionForward', 'bytes': 0}}, GiB))
		self.assertIn("virtual range", lim(
			{'stderr': "vmem: error: vmem's virtual range (64 GiB) is exhausted while allocating"}, GiB))

	def test_settings_come_from_the_info_lines(self):
		text = ('vmem: info: vmem 0.1.0, enabled\nvmem: info: VMEM_POLICY=all\n'
			'vmem: info: VMEM_LOG=info\nvmem: info: VMEM_CONV_ALGO=default (default)\n'
			'vmem: warning: VMEM_POLICY=all: the vDNN policies are not implemented\n')
		settings, warnings, errors, passthrough = self.bp.parse_settings(text)
		self.assertEqual(settings, {'VMEM_POLICY': 'all', 'VMEM_LOG': 'info', 'VMEM_CONV_ALGO': 'default'})
		self.assertEqual(len(warnings), 1)
		self.assertFalse(passthrough)
		self.assertTrue(self.bp.parse_settings('vmem: info: vmem 0.1.0, pass-through\n')[3])


if __name__ == '__main__':
	unittest.main()
