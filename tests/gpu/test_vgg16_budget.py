#!/usr/bin/env python3
# tests/gpu/test_vgg16_budget.py - a short torchvision VGG-16 run under
# vmem with a device budget of half its measured peak (VMEM_POLICY=none:
# reactive eviction and fault-in only) must print the same losses and
# weight checksum, bit for bit, as the same run without vmem.
#
# Exit 77 (meson: skipped) where there is no GPU; 0 when the losses match;
# 1 with expected vs got when they differ or a run fails.
import argparse
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.environ.get('VMEM_SCRIPTS_DIR') or os.path.join(HERE, '..', '..', 'scripts')
SKIP = 77


def skip(why):
	print('SKIP: %s' % why)
	sys.exit(SKIP)


def torch_python():
	for py in (os.environ.get('VMEM_TORCH_PYTHON'), os.environ.get('PYTHON'), sys.executable,
		   shutil.which('python3')):
		if not py:
			continue
		try:
			p = subprocess.run([py, '-c', 'import torch, torchvision; '
					    'print(int(torch.cuda.is_available()))'],
					   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
					   universal_newlines=True, timeout=120)
		except (OSError, subprocess.TimeoutExpired):
			continue
		if p.returncode == 0:
			return py, p.stdout.strip().endswith('1')
	return None, False


def run(cmd, env):
	print('$ ' + ' '.join(cmd), flush=True)
	p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
			   universal_newlines=True, env=env, timeout=800)
	sys.stdout.write(p.stdout)
	sys.stdout.write(p.stderr[-4000:])
	js = None
	for line in reversed(p.stdout.splitlines()):
		if line.startswith('{'):
			js = json.loads(line)
			break
	if p.returncode != 0 or js is None:
		print('FAIL: %s exited %d without a result' % (cmd[-1], p.returncode))
		sys.exit(1)
	return js


def main():
	ap = argparse.ArgumentParser()
	ap.add_argument('--lib', required=True, help='libvmem.so')
	ap.add_argument('--batch', type=int, default=16)
	ap.add_argument('--iters', type=int, default=3)
	a = ap.parse_args()
	if not shutil.which('nvidia-smi'):
		skip('no nvidia-smi on PATH')
	if not os.path.exists('/dev/nvidia0'):
		skip('no /dev/nvidia0')
	py, cuda = torch_python()
	if py is None:
		skip('no python3 with torch and torchvision (set PYTHON)')
	if not cuda:
		skip('torch.cuda.is_available() is False')
	if not os.path.isfile(a.lib):
		print('FAIL: %s not built' % a.lib)
		return 1
	train = [py, os.path.join(SCRIPTS, 'torch', 'train_vision.py'), '--model', 'vgg16',
		 '--batch', str(a.batch), '--iters', str(a.iters), '--json']
	env = dict(os.environ)
	base = run(train, env)
	peak = base['max_memory_reserved']
	limit = peak // 2
	venv = dict(env)
	if os.environ.get('GLPK_LIBDIR'):
		venv['LD_LIBRARY_PATH'] = os.environ['GLPK_LIBDIR'] + ':' + venv.get('LD_LIBRARY_PATH', '')
	vm = run([sys.executable, os.path.join(SCRIPTS, 'vmem-run'), '--lib', a.lib, '--policy', 'none',
		  '--device-limit', str(limit), '--stats', '--'] + train, venv)
	print('peak without vmem: %d bytes reserved, %d allocated; vmem budget %d bytes' % (
		peak, base['max_memory_allocated'], limit))
	ok = True
	for i, (x, y) in enumerate(zip(base['loss_hex'], vm['loss_hex'])):
		if x != y:
			print('FAIL: iteration %d loss: expected %s (no vmem), got %s (vmem)' % (i, x, y))
			ok = False
	if len(base['loss_hex']) != len(vm['loss_hex']):
		print('FAIL: expected %d losses, got %d' % (len(base['loss_hex']), len(vm['loss_hex'])))
		ok = False
	if base['checksum_hex'] != vm['checksum_hex']:
		print('FAIL: weight checksum: expected %s, got %s' % (base['checksum_hex'], vm['checksum_hex']))
		ok = False
	print('images/s: %.1f without vmem, %.1f under vmem at half the peak' % (
		base['items_per_s'], vm['items_per_s']))
	print('PASS' if ok else 'FAIL')
	return 0 if ok else 1


if __name__ == '__main__':
	sys.exit(main())
