#!/usr/bin/env python3
# Checks of the GPU-machine scripts that can run without a GPU:
# scripts/torch/*.py and scripts/gpu-validate compile; gpu-validate's plan
# and its loss comparison; and, with --cpu-runs, where a python3 with
# torch + torchvision is found (VMEM_TORCH_PYTHON, this python,
# /usr/bin/python3), short CPU runs of the training scripts that must
# repeat bit for bit.  Without such a python, --cpu-runs exits 77, which
# meson counts as skipped (a skipped unittest class would count as a pass).
import glob
import json
import os
import py_compile
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from scriptmod import load_script  # noqa: E402

SCRIPTS = os.environ.get('VMEM_SCRIPTS_DIR') or os.path.join(HERE, '..', '..', '..', 'scripts')
TORCH_DIR = os.path.join(SCRIPTS, 'torch')
GPU_VALIDATE = os.path.join(SCRIPTS, 'gpu-validate')


def torch_python():
	"""A python that imports torch and torchvision, or None."""
	cands = [os.environ.get('VMEM_TORCH_PYTHON'), sys.executable, '/usr/bin/python3']
	for py in cands:
		if not py or not os.path.exists(py):
			continue
		if subprocess.call([py, '-c', 'import torch, torchvision'], stdout=subprocess.DEVNULL,
				   stderr=subprocess.DEVNULL) == 0:
			return py
	return None


def run_json(py, script, args):
	p = subprocess.run([py, os.path.join(TORCH_DIR, script)] + args + ['--device', 'cpu', '--json'],
			   stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
			   timeout=600)
	if p.returncode != 0:
		raise AssertionError('%s %s: exit %d\n%s' % (script, args, p.returncode, p.stderr[-3000:]))
	return json.loads(p.stdout.strip().splitlines()[-1])


class CompileTest(unittest.TestCase):
	def test_scripts_compile(self):
		files = sorted(glob.glob(os.path.join(TORCH_DIR, '*.py'))) + [GPU_VALIDATE]
		self.assertGreaterEqual(len(files), 6, files)
		with tempfile.TemporaryDirectory() as d:
			for f in files:
				py_compile.compile(f, cfile=os.path.join(d, os.path.basename(f) + '.pyc'),
						   doraise=True)

	def test_gpu_validate_plan_lists_every_configuration(self):
		with tempfile.TemporaryDirectory() as d:
			p = subprocess.run([sys.executable, GPU_VALIDATE, '--plan', d], stdout=subprocess.PIPE,
					   stderr=subprocess.PIPE, universal_newlines=True)
			self.assertEqual(p.returncode, 0, p.stderr)
			out = p.stdout
		for name in ('vgg16-fp32-base', 'vgg16-fp32-vmem', 'vgg16-fp32-nocache-vmem',
			     'vgg16-fp32-expandable-vmem', 'vgg16-fp32-legacyconv-vmem',
			     'vgg16-fp32-budget', 'resnet50-fp32-budget', 'resnet50-fp32-vmem',
			     'vgg16-bf16-vmem', 'transformer-fp32-vmem', 'bandwidth', 'vmm_cost',
			     'overhead'):
			self.assertIn(name, out)
		self.assertIn('PYTORCH_NO_CUDA_MEMORY_CACHING=1', out)
		self.assertIn('PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True', out)
		self.assertIn('TORCH_CUDNN_V8_API_DISABLED=1', out)

	def plan_with_stub(self, unimplemented):
		with tempfile.TemporaryDirectory() as d:
			stub = os.environ.get('VMEM_TEST_STUB_LIB')
			if not stub or not os.path.isfile(stub):
				self.skipTest('no stub library built (VMEM_TEST_STUB_LIB)')
			env = dict(os.environ, LIBVMEM=stub, VMEM_STUB_UNIMPLEMENTED=unimplemented)
			p = subprocess.run([sys.executable, GPU_VALIDATE, '--plan', d], stdout=subprocess.PIPE,
					   stderr=subprocess.PIPE, universal_newlines=True, env=env)
			self.assertEqual(p.returncode, 0, p.stderr)
			return p.stdout

	def test_gpu_validate_runs_every_policy_libvmem_has(self):
		out = self.plan_with_stub('')
		for pol in ('all', 'conv', 'dyn', 'dyn-wd'):
			for model in ('vgg16', 'resnet50'):
				for suffix in ('budget', 'budget3', 'vmem'):
					self.assertIn('%s-fp32-%s-%s ' % (model, pol, suffix), out)
		self.assertRegex(out, r'vgg16-fp32-dyn-wd-budget3 +vmem-run --policy dyn --workspace wd '
				 r'--device-limit <0.333 of vgg16-fp32-base max_memory_reserved>')
		# dyn without micro-batches, bitwise with the application's algorithms
		for model in ('vgg16', 'resnet50'):
			self.assertRegex(out, r'%s-fp32-dyn-nows-budget +vmem-run --policy dyn --workspace off '
					 r'--device-limit <0.5 of %s-fp32-base' % (model, model))
		# the reactive-only runs come first
		self.assertLess(out.index('resnet50-fp32-nocache-budget3'), out.index('vgg16-fp32-all-budget'))

	def test_gpu_validate_leaves_out_policies_libvmem_lacks(self):
		out = self.plan_with_stub('all,dyn')
		self.assertIn('vgg16-fp32-conv-budget ', out)
		for pol in ('all', 'dyn', 'dyn-wd'):
			self.assertNotIn('vgg16-fp32-%s-' % pol, out)
		self.assertIn('all no (vmem: warning: VMEM_POLICY=all: the vDNN policies are not implemented', out)

	def test_gpu_validate_without_gpu_fails_clearly(self):
		with tempfile.TemporaryDirectory() as d:
			env = dict(os.environ, LIBVMEM=os.path.join(d, 'missing.so'))
			p = subprocess.run([sys.executable, GPU_VALIDATE, d], stdout=subprocess.PIPE,
					   stderr=subprocess.PIPE, universal_newlines=True, env=env)
			self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
			self.assertIn('gpu-validate: error:', p.stderr)
			self.assertNotIn('Traceback', p.stderr)


class CompareTest(unittest.TestCase):
	def setUp(self):
		self.gv = load_script(GPU_VALIDATE, 'gpu_validate')

	def test_same_losses_bitwise(self):
		a = {'loss_hex': ['0x1.8p+1', '0x1.4p+1'], 'checksum_hex': '0x1p+0', 'error': None}
		self.assertEqual(self.gv.compare_losses(a, dict(a)), ('same', ''))

	def test_plan_stats_from_the_policy_lines(self):
		err = ('vmem: stats ---\n'
		       'policy: iterations planned       10  suspended     25  resumed     23  ops matched 7000\n'
		       'policy: misses in planned iterations        705  elsewhere       5531\n')
		self.assertEqual(self.gv.plan_stats(err), {'planned': 10, 'suspended': 25, 'misses': 705})
		self.assertIsNone(self.gv.plan_stats('vmem: stats ---\n'))   # VMEM_POLICY unset

	def test_one_ulp_differs(self):
		a = {'loss_hex': ['0x1.8p+1', '0x1.4p+1'], 'checksum_hex': '0x1p+0', 'error': None}
		b = dict(a, loss_hex=['0x1.8p+1', '0x1.4000000000001p+1'])
		verdict, why = self.gv.compare_losses(a, b)
		self.assertEqual(verdict, 'DIFFERENT')
		self.assertIn('iteration 1', why)

	def test_error_and_missing_runs(self):
		a = {'loss_hex': ['0x1.8p+1'], 'checksum_hex': '0x1p+0', 'error': None}
		self.assertEqual(self.gv.compare_losses(a, None)[0], 'no result')
		self.assertEqual(self.gv.compare_losses(a, dict(a, error='OutOfMemoryError: x'))[0], 'error')


class GpuValidateFakeRunTest(unittest.TestCase):
	"""gpu-validate end to end with fakepython.py in place of the GPU
	machine's python3 and an empty library in place of libvmem.so."""

	def run_validate(self, d, differ=None, only='vgg16-fp32-(nocache-)?(base|vmem|budget)$|bandwidth',
			 nondet=False, unimplemented='all,conv,dyn,wd'):
		stub = os.environ.get('VMEM_TEST_STUB_LIB')
		if not stub or not os.path.isfile(stub):
			stub = os.path.join(d, 'libvmem.so')
			open(stub, 'wb').close()
		env = dict(os.environ, PYTHON=os.path.join(HERE, 'fakepython.py'), LIBVMEM=stub,
			   VMEM_STUB_UNIMPLEMENTED=unimplemented)
		env.pop('FAKE_DIFFER', None)
		if differ:
			env['FAKE_DIFFER'] = differ
		if nondet:
			env['FAKE_NONDET'] = '1'
		res = os.path.join(d, 'res')
		p = subprocess.run([sys.executable, GPU_VALIDATE, '--only', only, '--archive',
				    os.path.join(d, 'out.tar.gz'), res],
				   stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
				   env=env, timeout=600)
		self.assertNotIn('Traceback', p.stderr)
		with open(os.path.join(res, 'summary.md')) as f:
			return p.returncode, f.read(), res

	def test_all_same_exits_0_and_writes_summary_traces_and_archive(self):
		with tempfile.TemporaryDirectory() as d:
			rc, md, res = self.run_validate(d)
			self.assertEqual(rc, 0, md)
			self.assertRegex(md, r'\| vgg16-fp32-vmem \| .* \| same \|')
			self.assertRegex(md, r'\| vgg16-fp32-nocache-vmem \| .* \| same \|')
			# The budget is half the baseline's max_memory_reserved (4 GiB).
			self.assertRegex(md, r'\| vgg16-fp32-budget \| .* \| same \| .* \| 2048 MiB \|')
			self.assertIn('vgg16-fp32-vmem: 157 ops per iteration', md)
			self.assertIn('cudnnConvolutionForward 13', md)
			self.assertTrue(os.path.exists(os.path.join(res, 'traces', 'vgg16-fp32-vmem.jsonl.gz')))
			self.assertTrue(os.path.exists(os.path.join(res, 'traces', 'vgg16-fp32-vmem.dot')))
			self.assertTrue(os.path.exists(os.path.join(res, 'logs', 'vgg16-fp32-base.out')))
			import tarfile
			with tarfile.open(os.path.join(d, 'out.tar.gz')) as t:
				names = t.getnames()
			self.assertIn('res/summary.md', names)
			self.assertFalse(any(n.endswith('.jsonl.gz') for n in names))
			with tarfile.open(os.path.join(d, 'out-traces.tar')) as t:
				self.assertIn('res/traces/vgg16-fp32-vmem.jsonl.gz', t.getnames())

	def test_a_different_loss_is_reported_and_exits_1(self):
		with tempfile.TemporaryDirectory() as d:
			rc, md, _ = self.run_validate(d, differ='PYTORCH_NO_CUDA_MEMORY_CACHING')
			self.assertEqual(rc, 1, md)
			self.assertRegex(md, r'\| vgg16-fp32-nocache-vmem \| .* \| DIFFERENT \| iteration 3: '
					 r'0x1\.a666666666666p\+2 vs 0x1\.a666666666668p\+2 \|')
			self.assertRegex(md, r'\| vgg16-fp32-vmem \| .* \| same \|')


	def test_every_policy_is_compared_with_the_oracle(self):
		with tempfile.TemporaryDirectory() as d:
			rc, md, _ = self.run_validate(d, only='vgg16-fp32-(base|(all|dyn|dyn-wd)-budget)$',
						      unimplemented='')
			self.assertEqual(rc, 0, md)
			for pol in ('all', 'dyn', 'dyn-wd'):
				self.assertRegex(md, r'\| vgg16-fp32-%s-budget \| VMEM_POLICY=%s.* \| same \|' % (
					pol, pol.replace('-', ' \\+ VMEM_WORKSPACE=')))

	def test_a_policy_that_changes_algorithms_may_differ_within_tolerance_only(self):
		with tempfile.TemporaryDirectory() as d:
			# One ulp on the last loss: bitwise different, within tolerance.
			rc, md, _ = self.run_validate(d, only='vgg16-fp32-(base|(all|dyn)-budget)$',
						      unimplemented='', differ='--iters')
			self.assertEqual(rc, 1, md)
			self.assertRegex(md, r'\| vgg16-fp32-dyn-budget \| .* \| within tolerance \| max rel')
			self.assertRegex(md, r'\| vgg16-fp32-all-budget \| .* \| DIFFERENT \| iteration 3')

	def test_an_oracle_that_does_not_repeat_makes_comparisons_inconclusive(self):
		with tempfile.TemporaryDirectory() as d:
			rc, md, _ = self.run_validate(d, only='transformer-fp32-(base|base2|vmem)$', nondet=True)
			self.assertEqual(rc, 0, md)
			self.assertRegex(md, r'\| transformer-fp32-base2 \| .* \| inconclusive \| '
					 r'transformer-fp32-base does not repeat itself')
			self.assertRegex(md, r'\| transformer-fp32-vmem \| .* \| inconclusive \|')


class CheckpointSplitTest(unittest.TestCase):
	"""common.checkpoint_sequential against a fake torch that keeps what
	the real one keeps: a non-reentrant checkpoint saves its input for the
	recomputation with the input's version counter, and backward fails when
	the version changed (an in-place op modified it).  On the H100 both
	torchvision networks failed so under --checkpoint: the plain split began
	chunks with ReLU(inplace=True)."""

	class Tensor:
		def __init__(self):
			self.version = 0

	class Module:
		inplace = False

		def children(self):
			return iter(())

		def __call__(self, t):
			return CheckpointSplitTest.Tensor()

	class ReLU(Module):
		def __init__(self, inplace):
			self.inplace = inplace

		def __call__(self, t):
			if self.inplace:
				t.version += 1
				return t
			return CheckpointSplitTest.Tensor()

	class Sequential(Module):
		def __init__(self, *mods):
			self.mods = mods

		def children(self):
			return iter(self.mods)

		def __call__(self, t):
			for m in self.mods:
				t = m(t)
			return t

	def setUp(self):
		import types
		self.saved = []
		saved = self.saved

		def checkpoint(fn, x, use_reentrant=True):
			self.assertFalse(use_reentrant)
			saved.append((x, x.version))
			return fn(x)
		torch = types.ModuleType('torch')
		utils = types.ModuleType('torch.utils')
		ck = types.ModuleType('torch.utils.checkpoint')
		ck.checkpoint = checkpoint
		torch.utils, utils.checkpoint = utils, ck
		fakes = {'torch': torch, 'torch.utils': utils, 'torch.utils.checkpoint': ck}
		old = {k: sys.modules.get(k) for k in fakes}

		def restore():
			for k, v in old.items():
				if v is None:
					sys.modules.pop(k, None)
				else:
					sys.modules[k] = v
		# checkpoint_sequential imports torch.utils.checkpoint when called:
		# the fakes stay until the test ends.
		self.addCleanup(restore)
		sys.modules.update(fakes)
		self.common = load_script(os.path.join(TORCH_DIR, 'common.py'), 'common_under_test')

	def backward(self):
		for i, (t, v) in enumerate(self.saved):
			if t.version != v:
				raise AssertionError('checkpointed chunk %d: one of the variables needed for '
						     'gradient computation has been modified by an inplace '
						     'operation (version %d, saved at %d)' % (i, t.version, v))

	def vgg16_features(self):
		"""torchvision's VGG-16 `features`: 3x3 convs each followed by
		ReLU(inplace=True), max-pools between the blocks (31 modules)."""
		mods = []
		for v in [64, 64, 'M', 128, 128, 'M', 256, 256, 256, 'M', 512, 512, 512, 'M',
			  512, 512, 512, 'M']:
			mods += [self.Module()] if v == 'M' else [self.Module(), self.ReLU(True)]
		return mods

	def resnet50_trunk(self):
		"""train_vision.py's ResNet-50 trunk: conv1, bn1, relu (in place),
		maxpool, layer1..4 (Sequentials of bottlenecks that start with a
		conv)."""
		return [self.Module(), self.Module(), self.ReLU(True), self.Module()] + \
			[self.Sequential(self.Module(), self.ReLU(True)) for _ in range(4)]

	def test_vgg16_trains_checkpointed(self):
		mods = self.vgg16_features()
		self.assertEqual(len(mods), 31)
		for segments in (2, 3, 4, 6, 8):
			self.saved.clear()
			self.common.checkpoint_sequential(mods, segments, self.Tensor())
			self.backward()
			self.assertGreaterEqual(len(self.saved), 1)

	def test_resnet50_trains_checkpointed(self):
		for segments in (2, 3, 4):
			self.saved.clear()
			self.common.checkpoint_sequential(self.resnet50_trunk(), segments, self.Tensor())
			self.backward()

	def test_chunks_keep_every_module_in_order_and_never_start_in_place(self):
		for mods in (self.vgg16_features(), self.resnet50_trunk()):
			for segments in range(1, 12):
				chunks = self.common.safe_chunks(mods, segments)
				self.assertEqual([m for c in chunks for m in c], mods)
				self.assertTrue(all(c for c in chunks))
				for c in chunks[1:]:
					self.assertFalse(self.common.starts_in_place(c[0]), (segments, c[0]))
				self.assertLessEqual(len(chunks), segments)

	def test_a_sequential_starting_in_place_counts_as_in_place(self):
		c = self.common
		self.assertTrue(c.starts_in_place(self.Sequential(self.ReLU(True), self.Module())))
		self.assertFalse(c.starts_in_place(self.Sequential(self.Module(), self.ReLU(True))))
		self.assertFalse(c.starts_in_place(self.ReLU(False)))


class GpuSuiteTest(unittest.TestCase):
	"""tests/gpu/test_vgg16_budget.py's checks with fakepython.py in place
	of the GPU machine's python3: one budget run per policy asked for."""

	def setUp(self):
		self.t = load_script(os.path.join(HERE, '..', '..', 'gpu', 'test_vgg16_budget.py'),
				     'gpu_vgg16_budget')
		self.stub = os.environ.get('VMEM_TEST_STUB_LIB')
		if not self.stub or not os.path.isfile(self.stub):
			self.skipTest('no stub library built (VMEM_TEST_STUB_LIB)')
		for k in ('FAKE_DIFFER', 'VMEM_STUB_UNIMPLEMENTED'):
			os.environ.pop(k, None)

	def tearDown(self):
		for k in ('FAKE_DIFFER', 'VMEM_STUB_UNIMPLEMENTED'):
			os.environ.pop(k, None)

	def checks(self, policies):
		import contextlib
		import io
		with contextlib.redirect_stdout(io.StringIO()):
			return self.t.budget_checks(os.path.join(HERE, 'fakepython.py'), self.stub, policies, 16, 3)

	def test_each_policy_runs_and_matches(self):
		self.assertEqual(self.checks(['none', 'all', 'dyn-wd']), {'none': [], 'all': [], 'dyn-wd': []})

	def test_a_differing_policy_fails_with_expected_and_got(self):
		os.environ['FAKE_DIFFER'] = 'VMEM_POLICY=all'
		res = self.checks(['none', 'all', 'dyn'])
		self.assertEqual(res['none'], [])
		self.assertEqual(res['all'], ['iteration 3 loss: expected 0x1.a666666666666p+2 (no vmem), '
					      'got 0x1.a666666666668p+2 (vmem all)'])

	def test_a_policy_the_library_lacks_is_a_failure_not_a_silent_none(self):
		os.environ['VMEM_STUB_UNIMPLEMENTED'] = 'conv'
		res = self.checks(['conv'])
		self.assertEqual(len(res['conv']), 1)
		self.assertIn('libvmem.so does not have it: vmem: warning: VMEM_POLICY=conv', res['conv'][0])


class CpuRunTest(unittest.TestCase):
	def test_train_vision_repeats_bit_for_bit(self):
		py = torch_python()
		args = ['--model', 'resnet50', '--batch', '2', '--iters', '2', '--image-size', '32',
			'--classes', '10']
		a = run_json(py, 'train_vision.py', args)
		b = run_json(py, 'train_vision.py', args)
		self.assertEqual(a['loss_hex'], b['loss_hex'])
		self.assertEqual(a['checksum_hex'], b['checksum_hex'])
		self.assertEqual(len(a['losses']), 2)
		self.assertIsNone(a['error'])

	def test_train_vision_alternatives_run(self):
		py = torch_python()
		base = ['--model', 'resnet50', '--batch', '2', '--iters', '2', '--image-size', '32',
			'--classes', '10']
		plain = run_json(py, 'train_vision.py', base)
		ck = run_json(py, 'train_vision.py', base + ['--checkpoint'])
		self.assertEqual(ck['mode'], 'checkpoint')
		# Recomputation in training mode gives the same first loss.
		self.assertEqual(ck['loss_hex'][0], plain['loss_hex'][0])
		soc = run_json(py, 'train_vision.py', base + ['--save-on-cpu'])
		self.assertEqual(soc['loss_hex'], plain['loss_hex'])
		bf = run_json(py, 'train_vision.py', base + ['--dtype', 'bf16'])
		self.assertEqual(bf['dtype'], 'bf16')

	def test_transformer_repeats_bit_for_bit(self):
		py = torch_python()
		args = ['--layers', '2', '--d-model', '64', '--heads', '4', '--ff', '128', '--seq', '16',
			'--vocab', '50', '--batch', '2', '--iters', '2', '--attention', 'math']
		a = run_json(py, 'transformer_block.py', args)
		b = run_json(py, 'transformer_block.py', args + ['--checkpoint', '--checkpoint-segments', '2'])
		self.assertEqual(a['loss_hex'], b['loss_hex'])


SKIP = 77

if __name__ == '__main__':
	if '--cpu-runs' in sys.argv:
		sys.argv.remove('--cpu-runs')
		if torch_python() is None:
			print('SKIP: no python3 with torch and torchvision here (set VMEM_TORCH_PYTHON)')
			sys.exit(SKIP)
		unittest.main(defaultTest='CpuRunTest')
	unittest.main(defaultTest=['CompileTest', 'CompareTest', 'GpuValidateFakeRunTest', 'CheckpointSplitTest',
				   'GpuSuiteTest'])
