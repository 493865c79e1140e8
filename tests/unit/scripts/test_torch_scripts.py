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
		import importlib.machinery
		import importlib.util
		loader = importlib.machinery.SourceFileLoader('gpu_validate', GPU_VALIDATE)
		spec = importlib.util.spec_from_loader('gpu_validate', loader)
		self.gv = importlib.util.module_from_spec(spec)
		loader.exec_module(self.gv)

	def test_same_losses_bitwise(self):
		a = {'loss_hex': ['0x1.8p+1', '0x1.4p+1'], 'checksum_hex': '0x1p+0', 'error': None}
		self.assertEqual(self.gv.compare_losses(a, dict(a)), ('same', ''))

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
			 nondet=False):
		stub = os.environ.get('VMEM_TEST_STUB_LIB')
		if not stub or not os.path.isfile(stub):
			stub = os.path.join(d, 'libvmem.so')
			open(stub, 'wb').close()
		env = dict(os.environ, PYTHON=os.path.join(HERE, 'fakepython.py'), LIBVMEM=stub)
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


	def test_an_oracle_that_does_not_repeat_makes_comparisons_inconclusive(self):
		with tempfile.TemporaryDirectory() as d:
			rc, md, _ = self.run_validate(d, only='transformer-fp32-(base|base2|vmem)$', nondet=True)
			self.assertEqual(rc, 0, md)
			self.assertRegex(md, r'\| transformer-fp32-base2 \| .* \| inconclusive \| '
					 r'transformer-fp32-base does not repeat itself')
			self.assertRegex(md, r'\| transformer-fp32-vmem \| .* \| inconclusive \|')


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
	unittest.main(defaultTest=['CompileTest', 'CompareTest', 'GpuValidateFakeRunTest'])
