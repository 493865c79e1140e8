#!/usr/bin/env python3
# scripts/gpu-compare and what it shares (scripts/torch/harness.py,
# scripts/torch/compare_rows.py) without a GPU: its plan and priority
# order, end to end with fakepython.py in place of the GPU machine's
# python3 (a stub in place of libvmem.so that says, as libvmem.so does,
# which policies it does not implement; a fake nvidia-smi), deadlines and
# time-outs, the exit-statistics readers, the loss tolerance, and the
# largest-batch search of compare_rows.py against a fake torch.
import json
import os
import stat
import subprocess
import sys
import tarfile
import tempfile
import time
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.environ.get('VMEM_SCRIPTS_DIR') or os.path.join(HERE, '..', '..', '..', 'scripts')
GPU_COMPARE = os.path.join(SCRIPTS, 'gpu-compare')
sys.path.insert(0, os.path.join(SCRIPTS, 'torch'))
import harness  # noqa: E402
sys.path.insert(0, HERE)
from scriptmod import load_script  # noqa: E402

GiB = 1 << 30


def stub_lib(d):
	stub = os.environ.get('VMEM_TEST_STUB_LIB')
	if not stub or not os.path.isfile(stub):
		stub = os.path.join(d, 'libvmem.so')
		open(stub, 'wb').close()
	return stub


def fake_bin(d):
	"""A directory with a fake nvidia-smi, for PATH."""
	b = os.path.join(d, 'bin')
	os.makedirs(b, exist_ok=True)
	p = os.path.join(b, 'nvidia-smi')
	with open(p, 'w') as f:
		f.write('#!/bin/sh\ncase "$1" in --query-gpu*) echo "Fake GPU, 580.00, 81559 MiB";; '
			'*) echo "fake nvidia-smi";; esac\n')
	os.chmod(p, os.stat(p).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
	return b


def um_lib(d):
	lib = os.environ.get('VMEM_TEST_UM_LIB')
	if lib and os.path.isfile(lib):
		return lib
	lib = os.path.join(d, 'libvmemum.so')
	open(lib, 'wb').close()
	return lib


def run_compare(d, args, unimplemented='conv,wd', extra_env=None, with_gpu=True, timeout=300):
	env = dict(os.environ, PYTHON=os.path.join(HERE, 'fakepython.py'), LIBVMEM=stub_lib(d),
		   LIBVMEM_UM=um_lib(d), VMEM_STUB_UNIMPLEMENTED=unimplemented)
	for k in list(env):
		if k.startswith('FAKE_'):
			del env[k]
	if with_gpu:
		env['PATH'] = fake_bin(d) + os.pathsep + env['PATH']
	else:
		env['PATH'] = os.pathsep.join(p for p in env['PATH'].split(os.pathsep)
					      if not os.path.exists(os.path.join(p, 'nvidia-smi')))
	env.update(extra_env or {})
	res = os.path.join(d, 'res')
	p = subprocess.run([sys.executable, GPU_COMPARE] + args + [res], stdout=subprocess.PIPE,
			   stderr=subprocess.PIPE, universal_newlines=True, env=env, timeout=timeout)
	md = ''
	if os.path.exists(os.path.join(res, 'summary.md')):
		with open(os.path.join(res, 'summary.md')) as f:
			md = f.read()
	return p, md, res


def table_row(md, budget, label):
	"""The cells of the summary.md row for (budget, label) of the first model."""
	for line in md.splitlines():
		cells = [c.strip() for c in line.strip().strip('|').split('|')]
		if len(cells) >= 10 and cells[0] == budget and cells[1] == label:
			return cells
	raise AssertionError('no row %r %r in:\n%s' % (budget, label, md))


class PlanTest(unittest.TestCase):
	def plan(self, d, extra=(), unimplemented=''):
		p, _, _ = run_compare(d, ['--plan'] + list(extra), unimplemented=unimplemented)
		self.assertEqual(p.returncode, 0, p.stderr)
		return p.stdout

	def test_priority_order_oracles_then_half_then_third_then_quarter_then_searches(self):
		with tempfile.TemporaryDirectory() as d:
			out = self.plan(d)
		names = [l.split()[0] for l in out.splitlines() if ' est ' in l]
		pos = {n: i for i, n in enumerate(names)}
		self.assertEqual(names[:3], ['vgg16-base', 'resnet50-base', 'bandwidth'])
		# every vmem policy at 1/2 before unified memory at 1/2
		for pol in ('none', 'all', 'conv', 'dyn', 'dyn-wd'):
			self.assertLess(pos['vgg16-vmem-%s-2' % pol], pos['vgg16-um-2'])
			self.assertLess(pos['resnet50-vmem-%s-2' % pol], pos['vgg16-um-2'])
		self.assertLess(pos['resnet50-um-2'], pos['vgg16-vmem-none-3'])
		self.assertLess(pos['resnet50-um-3'], pos['vgg16-vmem-none-4'])
		# save_on_cpu/checkpointing before unified memory at a fraction
		self.assertLess(pos['resnet50-alt-3'], pos['vgg16-um-3'])
		last_row = max(pos[n] for n in names if not n.startswith('transformer') and 'search' not in n)
		first_search = min(pos[n] for n in names if 'search' in n)
		self.assertLess(last_row, first_search)
		# one vmem search per model (the preferred policy), then the others
		self.assertIn('vgg16-search-vmem-dyn-wd', pos)
		self.assertNotIn('vgg16-search-vmem-none', pos)
		self.assertIn('vgg16-search-alt', pos)
		self.assertIn('vgg16-search-um', pos)
		# the transformer comes last
		self.assertTrue(all(n.startswith('transformer') for n in names[pos['transformer-base']:]))
		self.assertGreater(pos['transformer-base'], max(pos[n] for n in names if 'search' in n
								 and not n.startswith('transformer')))

	def test_policies_libvmem_does_not_have_are_not_planned(self):
		with tempfile.TemporaryDirectory() as d:
			out = self.plan(d, unimplemented='all,conv,dyn')
		self.assertIn('vgg16-vmem-none-2', out)
		for pol in ('all', 'conv', 'dyn', 'dyn-wd'):
			self.assertNotIn('vgg16-vmem-%s-2' % pol, out)
		self.assertIn('policies: none yes; all no (vmem: warning: VMEM_POLICY=all: the vDNN '
			      'policies are not implemented', out)
		self.assertIn('dyn-wd no (needs dyn', out)
		# the search then uses the best that exists
		self.assertIn('vgg16-search-vmem-none', out)

	def test_workspace_wd_needs_its_own_support(self):
		with tempfile.TemporaryDirectory() as d:
			out = self.plan(d, unimplemented='wd')
		self.assertIn('vgg16-vmem-dyn-2', out)
		self.assertNotIn('vgg16-vmem-dyn-wd-2', out)
		self.assertIn('dyn-wd no (vmem: warning: VMEM_WORKSPACE=wd', out)

	def test_estimate_is_printed_against_the_deadline(self):
		with tempfile.TemporaryDirectory() as d:
			out = self.plan(d, ['--deadline', '100', '--models', 'vgg16'])
		self.assertRegex(out, r'estimated \d+ s before the searches .* deadline 100 s')
		self.assertIn('PAST DEADLINE', out)

	def test_bad_arguments_are_rejected(self):
		with tempfile.TemporaryDirectory() as d:
			for args in (['--fractions', '1,2'], ['--models', 'alexnet'], ['--policies', 'fast']):
				p, _, _ = run_compare(d, args)
				self.assertEqual(p.returncode, 2, args)
				self.assertIn('gpu-compare: error:', p.stderr)
				self.assertNotIn('Traceback', p.stderr)


class EndToEndTest(unittest.TestCase):
	def test_every_row_side_by_side_with_figures_from_each_source(self):
		with tempfile.TemporaryDirectory() as d:
			archive = os.path.join(d, 'out.tar.gz')
			p, md, res = run_compare(d, ['--models', 'vgg16', '--fractions', '2,3',
						     '--archive', archive])
			self.assertNotIn('Traceback', p.stderr)
			self.assertEqual(p.returncode, 0, p.stdout[-3000:] + p.stderr[-3000:])
			# oracle: 32 images per 30 ms
			o = table_row(md, '-', 'oracle (no limit)')
			self.assertEqual(o[2:5], ['1066.7', '1.000', '6144 MiB (r)'])
			# vmem: 0.6 s per iteration, VMEM_STATS bytes / 4 iterations,
			# link use against the measured 50 / 40 GB/s, peak = resident
			v = table_row(md, '1/2 (3072 MiB)', 'vmem `none`')
			self.assertEqual(v[2:9], ['53.3', '0.050', '3072 MiB (v)', '10.00 GB', '12.00 GB',
						  '33% / 50%', 'bitwise'])
			self.assertIn('bytes: VMEM_STATS, mean of 4 iterations', v[9])
			self.assertEqual(table_row(md, '1/3 (2048 MiB)', 'vmem `dyn`')[8], 'bitwise')
			# not in the (stub) libvmem.so: listed, not run, not a failure
			self.assertEqual(table_row(md, '1/2 (3072 MiB)', 'vmem `conv`')[8], 'not available')
			self.assertEqual(table_row(md, '1/2 (3072 MiB)', 'vmem `dyn` + `wd`')[8], 'not available')
			self.assertFalse(os.path.exists(os.path.join(res, 'logs', 'vgg16-vmem-conv-2.cmd')))
			# save_on_cpu: bytes counted in its hooks, losses within tolerance
			s = table_row(md, '1/2 (3072 MiB)', 'save_on_cpu')
			self.assertEqual(s[5:8], ['3.00 GB', '3.00 GB', '17% / 21%'])
			self.assertEqual(s[8], 'within tol. (1.0e-07)')
			self.assertEqual(table_row(md, '1/2 (3072 MiB)', 'checkpointing')[8], 'bitwise')
			self.assertIn('OutOfMemoryError', table_row(md, '1/2 (3072 MiB)', 'plain PyTorch')[9])
			# unified memory: no byte counts without NVML, and it says so
			u = table_row(md, '1/2 (3072 MiB)', 'unified memory')
			self.assertEqual(u[2:5], ['16.0', '0.015', '6144 MiB (m)'])
			self.assertIn('bytes moved: not measurable', u[9])
			self.assertIn('stopped after 2 iterations', u[9])
			# the unified-memory process got the preload and the budget
			with open(os.path.join(res, 'logs', 'vgg16-um-2.cmd')) as f:
				cmd = f.read()
			self.assertIn('VMEM_UM_BUDGET=%d' % (3 * GiB), cmd)
			self.assertIn('LD_PRELOAD=', cmd)
			with open(os.path.join(res, 'logs', 'vgg16-vmem-dyn-3.cmd')) as f:
				cmd = f.read()
			self.assertIn('--policy dyn --device-limit %d' % (2 * GiB), cmd)
			# the largest batch at 1/2, each technique
			self.assertIn('Largest batch that trains (2 iterations) at 1/2 of the peak (3072 MiB)', md)
			self.assertRegex(md, r'\| plain PyTorch \| 16 \| 18 \| 32: OutOfMemoryError, 16: ok')
			self.assertRegex(md, r'\| checkpointing \| 60 \| 64 \|')
			self.assertIn('bandwidth (bandwidth.py, this run): H2D 50.0 GB/s, D2H 40.0 GB/s', md)
			self.assertIn('0 problem(s).', md)
			# one archive, small
			with tarfile.open(archive) as t:
				names = t.getnames()
			self.assertIn('res/summary.md', names)
			self.assertIn('res/summary.json', names)
			self.assertIn('res/logs/vgg16-base.out', names)
			self.assertLess(os.path.getsize(archive), 16 << 20)
			with open(os.path.join(res, 'summary.json')) as f:
				js = json.load(f)
			self.assertEqual(js['problems'], [])
			self.assertTrue(all(j['state'] == 'done' for j in js['jobs']), js['jobs'])
			# processes start ahead, strictly in priority order, and run in it
			launched = sorted(js['jobs'], key=lambda j: j['launched_at_s'])
			self.assertEqual([j['name'] for j in launched], [j['name'] for j in js['jobs']])
			gone = sorted(js['jobs'], key=lambda j: j['go_at_s'])
			self.assertEqual([j['name'] for j in gone], [j['name'] for j in js['jobs']])
			# never more than --prewarm (3) waiting besides the one running
			for j in js['jobs']:
				waiting = [k for k in js['jobs'] if k['launched_at_s'] <= j['go_at_s'] < k['go_at_s']]
				self.assertLessEqual(len(waiting), 3, (j['name'], [k['name'] for k in waiting]))

	def test_processes_start_ahead_strictly_in_priority_order(self):
		# The transformer's oracle needs no peak, but must not be started
		# ahead of VGG-16's vmem jobs that wait for theirs.
		with tempfile.TemporaryDirectory() as d:
			p, md, res = run_compare(d, ['--models', 'vgg16,transformer', '--fractions', '2',
						     '--no-search'])
			self.assertEqual(p.returncode, 0, md)
			with open(os.path.join(res, 'summary.json')) as f:
				jobs = json.load(f)['jobs']
		launched = [j['name'] for j in sorted(jobs, key=lambda j: j['launched_at_s'])]
		self.assertEqual(launched, [j['name'] for j in jobs])

	def test_a_vmem_policy_whose_losses_differ_is_a_problem(self):
		with tempfile.TemporaryDirectory() as d:
			p, md, _ = run_compare(d, ['--models', 'vgg16', '--fractions', '2', '--no-search'],
					       extra_env={'FAKE_DIFFER': 'VMEM_POLICY=all'})
			self.assertEqual(p.returncode, 1, md)
			self.assertIn('**DIFFERENT** (iteration 3: 6.6 vs 7.0)',
				      table_row(md, '1/2 (3072 MiB)', 'vmem `all`')[8])
			self.assertEqual(table_row(md, '1/2 (3072 MiB)', 'vmem `none`')[8], 'bitwise')
			self.assertIn('- vgg16 vmem-all 1/2: losses differ', md)

	def test_a_hanging_job_is_killed_and_smaller_budgets_of_it_are_skipped(self):
		with tempfile.TemporaryDirectory() as d:
			t0 = time.time()
			p, md, _ = run_compare(d, ['--models', 'vgg16', '--fractions', '2,3', '--no-search',
						   '--um-seconds', '1', '--slack', '2'],
					       extra_env={'FAKE_HANG': 'VMEM_UM_BUDGET'})
			self.assertLess(time.time() - t0, 60)
			self.assertEqual(p.returncode, 1, md)
			self.assertIn('timeout (killed after 3 s)', table_row(md, '1/2 (3072 MiB)', 'unified memory')[9])
			self.assertIn('skipped: after vgg16 unified memory at 1/2 timed out: a smaller budget '
				      'would be slower', table_row(md, '1/3 (2048 MiB)', 'unified memory')[9])
			# the rest ran
			self.assertEqual(table_row(md, '1/3 (2048 MiB)', 'vmem `none`')[8], 'bitwise')
			self.assertIn('- vgg16-um-2 timed out', md)

	def test_a_crashing_policy_is_reported_and_the_rest_runs(self):
		with tempfile.TemporaryDirectory() as d:
			p, md, _ = run_compare(d, ['--models', 'vgg16', '--fractions', '2', '--no-search'],
					       extra_env={'FAKE_CRASH': 'VMEM_POLICY=dyn'})
			self.assertEqual(p.returncode, 1, md)
			self.assertIn('no result (rc 139)', table_row(md, '1/2 (3072 MiB)', 'vmem `dyn`')[9])
			self.assertEqual(table_row(md, '1/2 (3072 MiB)', 'vmem `all`')[8], 'bitwise')
			self.assertIn('- vgg16 vmem-dyn 1/2: no result (rc 139)', md)

	def test_deadline_skips_the_lowest_priorities_and_says_so(self):
		with tempfile.TemporaryDirectory() as d:
			# A job gets what is left less 5 s and needs --min-job of it: with a
			# 15 s deadline the oracle runs, bandwidth.py hangs until its ~9 s
			# are up, and nothing after it has the time.
			p, md, res = run_compare(d, ['--models', 'vgg16', '--deadline', '15', '--min-job', '2.5'],
						 extra_env={'FAKE_HANG': 'bandwidth'})
			self.assertIn('## Skipped', md)
			self.assertRegex(md, r'- vgg16-search-um: deadline: -?\d+ s left')
			with open(os.path.join(res, 'summary.json')) as f:
				js = json.load(f)
			states = {j['name']: (j['state'], j['rc']) for j in js['jobs']}
			self.assertEqual(states['vgg16-base'], ('done', 0))
			self.assertEqual(states['bandwidth'], ('done', 'timeout'))
			self.assertEqual(states['vgg16-search-um'], ('skipped', None))
			self.assertIn('- bandwidth timed out', md)
			self.assertEqual(p.returncode, 1)

	def test_sigterm_stops_the_jobs_and_still_reports(self):
		with tempfile.TemporaryDirectory() as d:
			env = dict(os.environ, PYTHON=os.path.join(HERE, 'fakepython.py'), LIBVMEM=stub_lib(d),
				   LIBVMEM_UM=um_lib(d), FAKE_HANG='--model resnet50',
				   PATH=fake_bin(d) + os.pathsep + os.environ['PATH'])
			res = os.path.join(d, 'res')
			p = subprocess.Popen([sys.executable, GPU_COMPARE, '--archive', os.path.join(d, 'a.tar.gz'),
					      res], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
					     universal_newlines=True, env=env)
			# Once vgg16-base is done, resnet50-base gets "go" and hangs.
			log = os.path.join(res, 'logs', 'vgg16-base.out')
			for _ in range(600):
				if os.path.exists(log) and '"row": "plain-2"' in open(log).read():
					break
				time.sleep(0.1)
			time.sleep(1.0)
			p.terminate()
			out, err = p.communicate(timeout=60)
			self.assertEqual(p.returncode, 1, err)
			self.assertIn('gpu-compare: SIGTERM: stopping, reporting what ran', err)
			with open(os.path.join(res, 'summary.md')) as f:
				md = f.read()
			self.assertIn('| resnet50-base | oracle | timeout |', md)
			self.assertIn('stopped by SIGTERM', md)
			self.assertEqual(table_row(md, '-', 'oracle (no limit)')[2], '1066.7')
			self.assertTrue(os.path.exists(os.path.join(d, 'a.tar.gz')))

	def test_device_wrapper_leaves_three_files(self):
		with tempfile.TemporaryDirectory() as d:
			build = os.path.join(d, 'build-gpu')
			os.makedirs(os.path.join(build, 'interpose'))
			os.makedirs(os.path.join(build, 'scripts', 'um'))
			os.symlink(stub_lib(d), os.path.join(build, 'interpose', 'libvmem.so'))
			os.symlink(um_lib(d), os.path.join(build, 'scripts', 'um', 'libvmemum.so'))
			out = os.path.join(d, 'out')
			env = dict(os.environ, PYTHON=os.path.join(HERE, 'fakepython.py'), BUILD=build,
				   DEADLINE='60', GPU_COMPARE_ARGS='--models vgg16 --fractions 2 --no-search',
				   PATH=fake_bin(d) + os.pathsep + os.environ['PATH'])
			p = subprocess.run([os.path.join(SCRIPTS, 'gpu-compare-device'), out],
					   stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
					   env=env, timeout=120)
			self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
			self.assertEqual(sorted(os.listdir(out)), ['gpu-compare-console.log',
								   'gpu-compare-summary.md', 'gpu-compare.tar.gz'])
			self.assertIn('0 problem(s).', p.stdout)
			with open(os.path.join(out, 'gpu-compare-console.log')) as f:
				self.assertIn('--deadline 60', f.read())
			# without a build it says what to do
			env['BUILD'] = os.path.join(d, 'nothing')
			p = subprocess.run([os.path.join(SCRIPTS, 'gpu-compare-device'), out],
					   stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
					   env=env, timeout=60)
			self.assertEqual(p.returncode, 2)
			self.assertIn('meson setup build-gpu -Dtests=false', p.stderr)

	def test_no_gpu_exits_2_with_a_message(self):
		with tempfile.TemporaryDirectory() as d:
			p, _, _ = run_compare(d, [], with_gpu=False)
			self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
			self.assertIn('gpu-compare: error: nvidia-smi failed', p.stderr)
			self.assertNotIn('Traceback', p.stderr)

	def test_missing_libvmem_exits_2(self):
		with tempfile.TemporaryDirectory() as d:
			p, _, _ = run_compare(d, [], extra_env={'LIBVMEM': os.path.join(d, 'nope.so')})
			self.assertEqual(p.returncode, 2)
			self.assertIn('LIBVMEM=%s: no such file' % os.path.join(d, 'nope.so'), p.stderr)


class HarnessTest(unittest.TestCase):
	def test_detects_policies_from_what_libvmem_says(self):
		with tempfile.TemporaryDirectory() as d:
			stub = stub_lib(d)
			if not os.path.getsize(stub):
				self.skipTest('no stub library built (VMEM_TEST_STUB_LIB)')
			env = dict(os.environ, VMEM_STUB_UNIMPLEMENTED='dyn')
			got = harness.detect_policies(stub, env)
		self.assertEqual([k for k, v in got.items() if v[0]], ['none', 'all', 'conv'])
		self.assertIn('VMEM_POLICY=dyn: the vDNN policies are not implemented', got['dyn'][1])
		self.assertTrue(got['dyn-wd'][1].startswith('needs dyn'))

	def test_a_library_that_does_not_preload_is_fatal(self):
		with tempfile.TemporaryDirectory() as d:
			bad = os.path.join(d, 'libbroken.so')
			with open(bad, 'w') as f:
				f.write('not an ELF file')
			with self.assertRaises(harness.Fatal) as cm:
				harness.detect_policies(bad, dict(os.environ))
		self.assertIn('does not load', str(cm.exception))

	def test_reads_libvmem_exit_statistics(self):
		# From results/gpu/2026-11-22-run3: ResNet-50 at 1/2 under none.
		text = '\n'.join([
			'vmem: stats ----------------------------------------------------------',
			'vmem: conv_fwd                  212       331679.6      1564526        83322.6',
			'vmem: bytes                     current             peak            total',
			'vmem: allocated              3705667584       3705667584       3705667584',
			'vmem: mapped                 1851785216       1851785216                0',
			'vmem: resident               1851785216       1851785216                0',
			'vmem: host (pinned)          2090860544       2329935872                0',
			'vmem: misses (fault-ins)                           7616',
			'vmem: bytes faulted in                      15971909632',
			'vmem: bytes evicted                         17792237568',
			'vmem: bytes prefetched                          1000000',
			'vmem: bytes offloaded                           2000000',
			'  pool                          current           peak          total',
			'  resident                       1766.0         1766.0        15000.0 MiB'])
		s = harness.parse_vmem_stats(text)
		self.assertEqual(s['resident_peak'], 1851785216)
		self.assertEqual(s['host_peak'], 2329935872)
		self.assertEqual(s['h2d'], 15971909632 + 1000000)
		self.assertEqual(s['d2h'], 17792237568 + 2000000)
		self.assertEqual(s['counters']['misses (fault-ins)'], 7616)
		self.assertIsNone(harness.parse_vmem_stats('no table here\n'))

	def test_reads_unified_memory_statistics(self):
		s = harness.parse_um_stats('x\nvmem-um: stats {"budget":5,"balloon":7,"refused":1}\n')
		self.assertEqual((s['budget'], s['balloon'], s['refused']), (5, 7, 1))
		self.assertIsNone(harness.parse_um_stats('vmem-um: budget 3 MiB\n'))

	def test_loss_tolerance(self):
		o = [6.9, 6.8, 6.7]
		hx = [v.hex() for v in o]
		self.assertEqual(harness.compare_close(o, hx, o, hx)[0], 'bitwise')
		# The first loss may differ by rounding only ...
		a = [6.9 * (1 + 5e-4), 6.8, 6.7]
		self.assertEqual(harness.compare_close(o, hx, a, [v.hex() for v in a])[0], 'DIFFERENT')
		# ... later ones by what SGD makes of it (ResNet-50 save_on_cpu: 3.2e-3).
		b = [6.9, 6.8 * (1 + 3.2e-3), 6.7]
		v, rel, _ = harness.compare_close(o, hx, b, [x.hex() for x in b])
		self.assertEqual(v, 'close')
		self.assertAlmostEqual(rel, 3.2e-3, places=6)
		c = [6.9, 6.8, 6.7 * 1.05]
		self.assertEqual(harness.compare_close(o, hx, c, [x.hex() for x in c])[0], 'DIFFERENT')
		self.assertEqual(harness.compare_close(o, hx, [], [])[0], 'no losses')
		nan = [6.9, float('nan')]
		self.assertEqual(harness.compare_close(o, hx, nan, [x.hex() for x in nan])[0], 'DIFFERENT')


# ---------------------------------------------------------------- fake torch

def fake_torch_modules():
	"""Just enough of torch for importing scripts/torch/common.py and
	compare_rows.py (their GPU work is not reached)."""
	torch = types.ModuleType('torch')
	torch.__path__ = []
	utils = types.ModuleType('torch.utils')
	utils.__path__ = []
	ckpt = types.ModuleType('torch.utils.checkpoint')
	torch.utils = utils
	utils.checkpoint = ckpt
	return {'torch': torch, 'torch.utils': utils, 'torch.utils.checkpoint': ckpt}


def load_with_fake_torch(path, name, extra=None):
	mods = fake_torch_modules()
	mods.update(extra or {})
	saved = {k: sys.modules.get(k) for k in list(mods) + ['common']}
	sys.modules.update(mods)
	try:
		mod = load_script(path, name)
	finally:
		for k, v in saved.items():
			if v is None:
				sys.modules.pop(k, None)
			else:
				sys.modules[k] = v
	return mod, mods


class SearchTest(unittest.TestCase):
	"""compare_rows.py's largest-batch search: doubling from the start,
	then bisection to within 1/8, bounded in time."""

	def setUp(self):
		torch_dir = os.path.join(SCRIPTS, 'torch')
		common, _ = load_with_fake_torch(os.path.join(torch_dir, 'common.py'), 'common')
		self.cr, _ = load_with_fake_torch(os.path.join(torch_dir, 'compare_rows.py'),
						  'compare_rows_under_test', {'common': common})
		self.cr.emit = lambda obj: None

	def runner(self, fits, probe_s=0.0, deadline=None):
		r = object.__new__(self.cr.Runner)
		r.a = types.SimpleNamespace(batch=32)
		r.deadline = deadline
		r.limit = lambda budget: None
		tried = []

		def train_once(mode, b, iters, warmup, deadline, data_count=2):
			tried.append(b)
			if probe_s:
				time.sleep(probe_s)
			if b <= fits:
				return {'losses': [1.0] * iters, 'error': None}
			return {'losses': [], 'error': 'OutOfMemoryError: fake'}
		r.train_once = train_once
		return r, tried

	def test_doubles_then_bisects_to_within_an_eighth(self):
		r, tried = self.runner(fits=100)
		s = self.cr.Runner.search(r, {'name': 'x', 'search': {'start': 32, 'cap': 1024,
								      'seconds': 60}}, 'plain', None)['search']
		self.assertEqual(tried[:3], [32, 64, 128])
		self.assertLessEqual(s['largest'], 100)
		self.assertGreaterEqual(s['largest'], 100 - max(1, s['largest'] // 8))
		self.assertEqual(s['smallest_failing'] - s['largest'] <= max(1, s['largest'] // 8), True)
		self.assertFalse(s['capped'] or s['cut_by_time'])

	def test_halves_when_the_start_does_not_fit(self):
		r, tried = self.runner(fits=5)
		s = self.cr.Runner.search(r, {'name': 'x', 'search': {'start': 32, 'cap': 1024}},
					  'plain', None)['search']
		self.assertEqual(tried[:4], [32, 16, 8, 4])
		self.assertEqual(s['largest'], 5)
		self.assertEqual(s['smallest_failing'], 6)

	def test_nothing_fits(self):
		r, tried = self.runner(fits=0)
		s = self.cr.Runner.search(r, {'name': 'x', 'search': {'start': 4, 'cap': 64}},
					  'plain', None)['search']
		self.assertEqual(tried, [4, 2, 1])
		self.assertEqual((s['largest'], s['smallest_failing']), (0, 1))

	def test_stops_at_the_cap(self):
		r, tried = self.runner(fits=10 ** 6)
		s = self.cr.Runner.search(r, {'name': 'x', 'search': {'start': 32, 'cap': 200}},
					  'plain', None)['search']
		self.assertEqual(tried, [32, 64, 128, 200])
		self.assertTrue(s['capped'])
		self.assertEqual(s['largest'], 200)

	def test_a_probe_that_would_pass_the_time_is_not_started(self):
		r, tried = self.runner(fits=10 ** 6, probe_s=0.2)
		s = self.cr.Runner.search(r, {'name': 'x', 'search': {'start': 32, 'cap': 4096,
								      'seconds': 0.5}}, 'plain', None)['search']
		# 32 takes 0.2 s, 64 is guessed at 0.4 s: past 0.5 s, so not started
		self.assertEqual(tried, [32])
		self.assertTrue(s['cut_by_time'])
		self.assertEqual(s['largest'], 32)


def torch_python():
	"""A python that imports torch and torchvision, or None."""
	for py in (os.environ.get('VMEM_TORCH_PYTHON'), sys.executable, '/usr/bin/python3'):
		if py and os.path.exists(py) and subprocess.call(
				[py, '-c', 'import torch, torchvision'], stdout=subprocess.DEVNULL,
				stderr=subprocess.DEVNULL) == 0:
			return py
	return None


@unittest.skipIf(torch_python() is None, 'no python3 with torch and torchvision here')
class CompareRowsCpuTest(unittest.TestCase):
	"""compare_rows.py for real on the CPU (tiny ResNet-50): it must give
	train_vision.py's losses bit for bit (same weights, data and dropout
	draws), the alternatives theirs, and search."""

	def test_rows_reproduce_train_vision_and_search(self):
		py = torch_python()
		torch_dir = os.path.join(SCRIPTS, 'torch')
		small = ['--model', 'resnet50', '--batch', '2', '--image-size', '32', '--classes', '10',
			 '--device', 'cpu']
		rows = [{'name': 'oracle', 'iters': 2}, {'name': 'save_on_cpu-2', 'mode': 'save_on_cpu', 'iters': 2},
			{'name': 'checkpoint-2', 'mode': 'checkpoint', 'iters': 2},
			{'name': 'search-plain', 'search': {'start': 2, 'cap': 4, 'seconds': 120}}]
		p = subprocess.run([py, os.path.join(torch_dir, 'compare_rows.py')] + small +
				   ['--rows', json.dumps(rows), '--ready-wait'], input='go {"deadline_s": 250}\n',
				   stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
				   timeout=280)
		self.assertEqual(p.returncode, 0, p.stderr[-3000:])
		out = {o['row']: o for o in harness.json_lines(p.stdout) if 'row' in o}
		q = subprocess.run([py, os.path.join(torch_dir, 'train_vision.py'), '--iters', '2', '--json'] +
				   small, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
				   universal_newlines=True, timeout=280)
		self.assertEqual(q.returncode, 0, q.stderr[-3000:])
		tv = harness.last_json(q.stdout)
		self.assertEqual(out['oracle']['loss_hex'], tv['loss_hex'])
		self.assertEqual(out['oracle']['checksum_hex'], tv['checksum_hex'])
		for name in ('save_on_cpu-2', 'checkpoint-2'):
			self.assertIsNone(out[name]['error'])
			self.assertEqual(out[name]['loss_hex'][0], tv['loss_hex'][0], name)
		self.assertEqual(out['search-plain']['search']['largest'], 4)
		self.assertTrue(out['search-plain']['search']['capped'])

	def test_no_go_means_no_start(self):
		py = torch_python()
		p = subprocess.run([py, os.path.join(SCRIPTS, 'torch', 'compare_rows.py'), '--model', 'resnet50',
				    '--batch', '1', '--image-size', '32', '--classes', '10', '--device', 'cpu',
				    '--rows', '[{"name": "oracle"}]', '--ready-wait'], input='',
				   stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
				   timeout=280)
		self.assertEqual(p.returncode, 3)
		self.assertIn('not started', p.stderr)
		self.assertEqual(p.stdout, '')


if __name__ == '__main__':
	unittest.main()
