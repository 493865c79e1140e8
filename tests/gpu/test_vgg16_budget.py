#!/usr/bin/env python3
# tests/gpu/test_vgg16_budget.py - a short torchvision VGG-16 run under
# vmem with a device budget of half its measured peak must print the same
# losses and weight checksum, bit for bit, as the same run without vmem:
# under VMEM_POLICY=none (reactive eviction and fault-in only) and under
# every other policy the libvmem.so has (--policies auto asks it, see
# scripts/torch/harness.py); policies that may choose other convolution
# algorithms (dyn, dyn-wd) may differ within harness.compare_close's
# tolerance instead.
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
sys.path.insert(0, os.path.join(SCRIPTS, 'torch'))
import harness  # noqa: E402

SKIP = 77
ALGORITHM_POLICIES = ('dyn', 'dyn-wd')


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


class RunFailed(Exception):
	pass


def run(cmd, env):
	print('$ ' + ' '.join(cmd), flush=True)
	p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
			   universal_newlines=True, env=env, timeout=800)
	sys.stdout.write(p.stdout)
	sys.stdout.write(p.stderr[-4000:])
	js = harness.last_json(p.stdout)
	if p.returncode != 0 or js is None:
		raise RunFailed('%s exited %d without a result' % (cmd[-1], p.returncode))
	return js, p.stderr


def compare(base, vm, policy):
	"""Lines saying what differs (empty: the same)."""
	bad = []
	for i, (x, y) in enumerate(zip(base['loss_hex'], vm['loss_hex'])):
		if x != y:
			bad.append('iteration %d loss: expected %s (no vmem), got %s (vmem %s)' % (i, x, y, policy))
	if len(base['loss_hex']) != len(vm['loss_hex']):
		bad.append('expected %d losses, got %d' % (len(base['loss_hex']), len(vm['loss_hex'])))
	if base['checksum_hex'] != vm['checksum_hex']:
		bad.append('weight checksum: expected %s, got %s' % (base['checksum_hex'], vm['checksum_hex']))
	if bad and policy in ALGORITHM_POLICIES:
		v, _, detail = harness.compare_close(base.get('losses'), base['loss_hex'], vm.get('losses'),
						     vm['loss_hex'])
		if v == 'close':
			print('note: %s is not bitwise but within tolerance (%s): %s may choose other '
			      'convolution algorithms' % (policy, detail, policy))
			return []
	return bad


def budget_checks(py, lib, policies, batch, iters, glpk=None):
	"""Runs the oracle and one vmem run at half its peak per policy; returns
	{policy: [problems]} (empty list: same losses)."""
	train = [py, os.path.join(SCRIPTS, 'torch', 'train_vision.py'), '--model', 'vgg16',
		 '--batch', str(batch), '--iters', str(iters), '--json']
	env = dict(os.environ)
	base, _ = run(train, env)
	peak = base['max_memory_reserved']
	limit = peak // 2
	venv = harness.with_libdir(env, glpk)
	print('peak without vmem: %d bytes reserved, %d allocated; vmem budget %d bytes' % (
		peak, base['max_memory_allocated'], limit))
	out = {}
	for pol in policies:
		try:
			vm, err = run([sys.executable, os.path.join(SCRIPTS, 'vmem-run'), '--lib', lib] +
				      harness.policy_options(pol) + ['--device-limit', str(limit), '--stats', '--'] +
				      train, venv)
		except RunFailed as e:
			out[pol] = [str(e)]
			continue
		said = harness.unavailable_message(err)
		out[pol] = ['libvmem.so does not have it: %s' % said] if said else compare(base, vm, pol)
		print('images/s: %.1f without vmem, %.1f under vmem %s at half the peak' % (
			base['items_per_s'], vm['items_per_s'], pol))
	return out


def main():
	ap = argparse.ArgumentParser()
	ap.add_argument('--lib', required=True, help='libvmem.so')
	ap.add_argument('--batch', type=int, default=16)
	ap.add_argument('--iters', type=int, default=3)
	ap.add_argument('--policies', default='auto',
			help='auto (every policy the library has) or a list such as none,dyn')
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
	glpk = os.environ.get('GLPK_LIBDIR')
	if a.policies == 'auto':
		avail = harness.detect_policies(a.lib, harness.with_libdir(os.environ, glpk))
		policies = [n for n, (ok, _) in avail.items() if ok]
		print('policies: %s' % ', '.join('%s %s' % (n, 'yes' if ok else 'no')
						 for n, (ok, _) in avail.items()))
	else:
		policies = [x for x in a.policies.split(',') if x]
	try:
		res = budget_checks(py, a.lib, policies, a.batch, a.iters, glpk)
	except RunFailed as e:
		print('FAIL: %s' % e)
		return 1
	ok = True
	for pol, problems in res.items():
		for line in problems:
			print('FAIL: %s: %s' % (pol, line))
			ok = False
	print('PASS' if ok else 'FAIL')
	return 0 if ok else 1


if __name__ == '__main__':
	sys.exit(main())
