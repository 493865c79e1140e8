# scripts/torch/harness.py - what the real-GPU harnesses share
# (scripts/gpu-validate, scripts/gpu-compare, scripts/gpu-minitrain,
# tests/gpu): finding the carried libraries, which vmem policies the
# carried libvmem.so really has, reading the JSON the training scripts
# print, comparing losses with an oracle, and reading the exit statistics
# of libvmem.so (VMEM_STATS=1) and of the unified-memory baseline.
#
# Python 3 standard library only (no torch): it runs on the harness side.
"""Helpers shared by the real-GPU harnesses (no torch needed)."""

import glob
import json
import math
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.realpath(os.path.abspath(__file__)))
SCRIPTS = os.path.dirname(HERE)
SRC = os.path.dirname(SCRIPTS)
VMEM_RUN = os.path.join(SCRIPTS, 'vmem-run')

# Every policy vmem-run knows, and the variants the comparison runs: the
# workspace ILP (wd) on top of dyn.  (name, vmem-run options)
POLICY_VARIANTS = [
	('none', ['--policy', 'none']),
	('all', ['--policy', 'all']),
	('conv', ['--policy', 'conv']),
	('dyn', ['--policy', 'dyn']),
	('dyn-wd', ['--policy', 'dyn', '--workspace', 'wd']),
]
# Asked for by name only (scripts/gpu-minitrain --policies): dyn without
# µ-cuDNN's micro-batches, which give other bits than the whole
# convolution; with VMEM_CONV_ALGO=app it must give the oracle's weights.
EXTRA_VARIANTS = [
	('dyn-nows', ['--policy', 'dyn', '--workspace', 'off']),
]

# What libvmem.so or vmem-run says about a setting it does not have: an
# option vmem-run rejects, or libvmem.so's start-up warning that the
# policy (or workspace mode) is not implemented and it runs as "none".
UNAVAILABLE_RX = re.compile(r'not implemented|not available|not built|not supported|'
			    r'is not one of|unknown value|unrecognized arguments|invalid choice', re.I)
# ... and only about the setting probed (a policy that exists may still
# warn about something else).
SETTING_RX = re.compile(r'polic|workspace|vmem-run', re.I)
# The preload did not load at all (ld.so goes on without it).
PRELOAD_FAILED_RX = re.compile(r'cannot be preloaded|cannot open shared object', re.I)


class Fatal(Exception):
	"""The harness cannot start; the message says what to do."""


def find_lib(env_names, pattern, what):
	"""A carried library: the first of the environment variables `env_names`
	that is set (a file, or a directory holding it), else the newest
	SRC/<pattern> match."""
	base = os.path.basename(pattern)
	for name in env_names:
		lib = os.environ.get(name)
		if lib:
			if os.path.isdir(lib):
				lib = os.path.join(lib, base)
			if not os.path.isfile(lib):
				raise Fatal('%s=%s: no such file; point %s at the carried %s' % (
					name, os.environ[name], name, what))
			return os.path.abspath(lib)
	found = glob.glob(os.path.join(SRC, pattern))
	if not found:
		raise Fatal('%s not found in %s; carry a build or set %s=/path/to/%s' % (
			base, os.path.join(SRC, os.path.dirname(pattern)), env_names[0], base))
	return max(found, key=os.path.getmtime)


def find_libvmem():
	return find_lib(['LIBVMEM', 'VMEM_LIB'], os.path.join('build*', 'interpose', 'libvmem.so'),
			'build/interpose/libvmem.so')


def find_libvmemum():
	return find_lib(['LIBVMEM_UM'], os.path.join('build*', 'scripts', 'um', 'libvmemum.so'),
			'build/scripts/um/libvmemum.so')


def with_libdir(env, libdir):
	"""env with `libdir` (GLPK's shared libraries) first in LD_LIBRARY_PATH."""
	env = dict(env)
	if libdir:
		env['LD_LIBRARY_PATH'] = libdir + (':' + env['LD_LIBRARY_PATH']
						   if env.get('LD_LIBRARY_PATH') else '')
	return env


def probe_policy(lib, options, env=None, timeout=60):
	"""(available, why): runs `vmem-run --lib LIB OPTIONS -- true`.
	libvmem.so reads its configuration in its constructor, so even `true`
	makes it say whether it has the policy; no GPU is touched."""
	e = dict(env if env is not None else os.environ)
	e['VMEM_LOG'] = 'warn'
	cmd = [sys.executable, VMEM_RUN, '--lib', lib] + list(options) + ['--', 'true']
	try:
		p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
				   universal_newlines=True, env=e, timeout=timeout)
	except (OSError, subprocess.TimeoutExpired) as ex:
		return False, 'vmem-run %s: %s' % (' '.join(options), ex)
	lines = [l.strip() for l in (p.stderr + p.stdout).splitlines() if l.strip()]
	bad = [l for l in lines if PRELOAD_FAILED_RX.search(l)]
	if bad:
		raise Fatal('%s does not load: %s; carry its shared libraries (GLPK_LIBDIR)' % (lib, bad[0]))
	said = [l for l in lines if UNAVAILABLE_RX.search(l) and SETTING_RX.search(l)]
	if p.returncode != 0:
		return False, 'vmem-run %s exits %d: %s' % (' '.join(options), p.returncode,
							  (said or lines or ['(no message)'])[-1])
	if said:
		return False, said[0]
	return True, ''


def detect_policies(lib, env=None, wanted=None):
	"""{variant: (available, why)} for POLICY_VARIANTS (or the names in
	`wanted`, in that order).  dyn-wd needs dyn."""
	out = {}
	for name, options in POLICY_VARIANTS:
		if wanted is not None and name not in wanted:
			continue
		out[name] = probe_policy(lib, options, env)
	if 'dyn-wd' in out and 'dyn' in out and not out['dyn'][0]:
		out['dyn-wd'] = (False, 'needs dyn: ' + out['dyn'][1])
	return out


def unavailable_message(stderr_text):
	"""The line of a run's stderr saying its policy or workspace mode is
	not there (libvmem.so then runs as VMEM_POLICY=none), or None."""
	for l in stderr_text.splitlines():
		if UNAVAILABLE_RX.search(l) and SETTING_RX.search(l):
			return l.strip()
	return None


def policy_env(name):
	"""The VMEM_* variables of a policy variant, for runs that preload
	libvmem.so without vmem-run."""
	opts = policy_options(name)
	keys = {'--policy': 'VMEM_POLICY', '--workspace': 'VMEM_WORKSPACE'}
	return {keys[o]: v for o, v in zip(opts[::2], opts[1::2])}


def policy_options(name):
	for n, opts in POLICY_VARIANTS + EXTRA_VARIANTS:
		if n == name:
			return list(opts)
	raise KeyError(name)


# ---------------------------------------------------------------- JSON output

def json_lines(text):
	"""Every line of `text` that is a JSON object, parsed (others skipped)."""
	out = []
	for line in text.splitlines():
		line = line.strip()
		if line.startswith('{'):
			try:
				obj = json.loads(line)
			except ValueError:
				continue
			if isinstance(obj, dict):
				out.append(obj)
	return out


def last_json(text):
	for line in reversed(text.splitlines()):
		line = line.strip()
		if line.startswith('{'):
			try:
				return json.loads(line)
			except ValueError:
				return None
	return None


# ---------------------------------------------------------------- losses

def compare_losses(base, run):
	"""('same' | 'DIFFERENT' | 'error' | 'no result', detail): losses and
	weight checksum compared bit for bit through their float.hex()."""
	if run is None or base is None:
		return 'no result', 'no JSON summary from %s' % ('the run' if run is None else 'the baseline')
	if run.get('error'):
		return 'error', run['error']
	if base.get('error'):
		return 'no result', 'baseline failed: ' + base['error']
	a, b = base.get('loss_hex') or [], run.get('loss_hex') or []
	for i, (x, y) in enumerate(zip(a, b)):
		if x != y:
			return 'DIFFERENT', 'iteration %d: %s vs %s' % (i, x, y)
	if len(a) != len(b):
		return 'DIFFERENT', '%d vs %d iterations' % (len(a), len(b))
	if base.get('checksum_hex') != run.get('checksum_hex'):
		return 'DIFFERENT', 'weight checksum %s vs %s' % (base.get('checksum_hex'), run.get('checksum_hex'))
	return 'same', ''


# The tolerance where other algorithms run (a different convolution
# algorithm, save_on_cpu's contiguous copies feeding other kernels, the
# order of a reduction): the first loss comes from the same weights and
# data and only its rounding may differ; later ones follow SGD steps that
# amplify it (save_on_cpu on ResNet-50 differed by 3.2e-3 at iteration 2 on
# the H100, run 2).
TOL_FIRST = 1e-4
TOL_LATER = 2e-2


def compare_close(oracle_losses, oracle_hex, losses, hexes):
	"""(verdict, max_rel, detail) for losses against the oracle's over the
	iterations both have: 'bitwise', 'close' (within TOL_FIRST for the
	first, TOL_LATER after) or 'DIFFERENT'; 'no losses' when either has
	none."""
	n = min(len(oracle_losses or []), len(losses or []))
	if n == 0:
		return 'no losses', None, ''
	if list(oracle_hex[:n]) == list(hexes[:n]):
		return 'bitwise', 0.0, '%d iterations' % n
	worst, where, bad = 0.0, 0, None
	for i in range(n):
		a, b = oracle_losses[i], losses[i]
		if not (math.isfinite(a) and math.isfinite(b)):
			rel = math.inf
		else:
			rel = abs(a - b) / max(abs(a), 1e-30)
		if rel > worst:
			worst, where = rel, i
		if bad is None and rel > (TOL_FIRST if i == 0 else TOL_LATER):
			bad = i
	if bad is not None:
		return 'DIFFERENT', worst, 'iteration %d: %r vs %r' % (bad, oracle_losses[bad], losses[bad])
	return 'close', worst, 'max rel. diff. %.1e at iteration %d' % (worst, where)


# ---------------------------------------------------------------- exit stats

_VMEM_GAUGE_RX = re.compile(r'^vmem: (allocated|mapped|resident|host \(pinned\))\s+(\d+)\s+(\d+)\s+(\d+)\s*$')
_VMEM_COUNTER_RX = re.compile(r'^vmem: (misses \(fault-ins\)|evictions|bytes faulted in|bytes evicted|'
			      r'offloads|bytes offloaded|prefetches|bytes prefetched|stalls|'
			      r'stall time \(ns\)|out-of-memory answers)\s+(\d+)\s*$')


def parse_vmem_stats(text):
	"""The VMEM_STATS=1 table libvmem.so prints at exit: {gauge: {current,
	peak, total}} for allocated/mapped/resident/host and {counter: value};
	None when there is no table (killed, or not under vmem).  Bytes moved:
	h2d = faulted in + prefetched, d2h = evicted + offloaded."""
	gauges, counters, seen = {}, {}, False
	for line in text.splitlines():
		if line.startswith('vmem: stats'):
			seen = True
		m = _VMEM_GAUGE_RX.match(line)
		if m:
			gauges[m.group(1).split(' ')[0]] = {'current': int(m.group(2)), 'peak': int(m.group(3)),
							    'total': int(m.group(4))}
			continue
		m = _VMEM_COUNTER_RX.match(line)
		if m:
			counters[m.group(1)] = int(m.group(2))
	if not seen:
		return None
	return {'gauges': gauges, 'counters': counters,
		'h2d': counters.get('bytes faulted in', 0) + counters.get('bytes prefetched', 0),
		'd2h': counters.get('bytes evicted', 0) + counters.get('bytes offloaded', 0),
		'resident_peak': gauges.get('resident', {}).get('peak'),
		'host_peak': gauges.get('host', {}).get('peak')}


_PLAN_RX = re.compile(r'^policy: iterations planned\s+(\d+)\s+suspended\s+(\d+)', re.M)
_PLAN_MISSES_RX = re.compile(r'^policy: misses in planned iterations\s+(\d+)', re.M)


def parse_plan_stats(text):
	"""The proactive layer's lines of the VMEM_STATS table: {planned,
	suspended, misses} (iterations planned, suspensions, misses in planned
	iterations; None for a line not printed), or None when it printed
	neither (no policy, or killed)."""
	m = _PLAN_RX.search(text)
	k = _PLAN_MISSES_RX.search(text)
	if not m and not k:
		return None
	return {'planned': int(m.group(1)) if m else None,
		'suspended': int(m.group(2)) if m else None,
		'misses': int(k.group(1)) if k else None}


def parse_um_stats(text):
	"""The line libvmemum.so prints at exit, as a dict, or None."""
	for line in reversed(text.splitlines()):
		if line.startswith('vmem-um: stats '):
			try:
				return json.loads(line[len('vmem-um: stats '):])
			except ValueError:
				return None
	return None


def host_memory():
	"""MemTotal in bytes, or None."""
	try:
		with open('/proc/meminfo') as f:
			for line in f:
				if line.startswith('MemTotal:'):
					return int(line.split()[1]) * 1024
	except OSError:
		pass
	return None
