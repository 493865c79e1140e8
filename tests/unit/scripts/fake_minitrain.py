#!/usr/bin/env python3
# fake_minitrain.py - stands in for minitrain on the simulated GPU, with
# libvmem.so "preloaded", for the tests of scripts/bench-policies.  It
# speaks minitrain's command line and output (--json last line, exit 3 and
# "out of memory: <call> requested N bytes" when out of memory), writes
# SIMGPU_REPORT, prints vmem's VMEM_LOG=info settings, warnings and
# VMEM_STATS lines, and writes a VMEM_TRACE, all from a memory and time
# model simple enough for the tests to work out every figure by hand.
#
# The model (config: JSON file named by FAKE_MT_CONFIG; see DEFAULTS):
#   need(net, batch, style) = batch * per_image[net] * STYLE[style]
#     (with vmem and VMEM_LIVENESS=eager: the per-tensor style's need);
#   the largest call's tensors = need / 8;
#   without vmem: out of memory (cudaMalloc) when need > SIMGPU_MEM;
#   with vmem (budget: SIMGPU_MEM, or VMEM_DEVICE_LIMIT when smaller): out
#     of memory when the largest call > budget, or "pinned host memory
#     exhausted" when need - budget > VMEM_HOST_LIMIT;
#   time per iteration = batch * ms_per_image[net], times
#     1 + slow[policy or eviction] * (need - mem) / mem under pressure;
#     the first iteration is first_factor times slower.
#   The trace: one allocation A of `need` bytes, written then read each
#   iteration (live = need throughout), so vmem-bound's lower bound at a
#   budget B is max(compute, (need - B) / link).
"""A fake minitrain for tests/unit/scripts/test_bench_policies.py."""

import hashlib
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tracegen  # noqa: E402

MiB, GiB = 1 << 20, 1 << 30
STYLE = {'network': 1.5, 'per-tensor': 1.0, 'caching': 1.25}
DEVICE = {'titanx': 'Simulated NVIDIA GeForce GTX TITAN X', 'v100': 'Simulated Tesla V100-SXM2-16GB',
	  'h100': 'Simulated NVIDIA H100 80GB HBM3'}

DEFAULTS = {
	# the settings the fake libvmem.so knows: name -> accepted values (first = default)
	'vars': {'VMEM_DISABLE': ['0'], 'VMEM_POLICY': ['none', 'all', 'conv', 'dyn'],
		 'VMEM_DEVICE_RESERVE': ['512M'], 'VMEM_VA_SIZE': ['0'], 'VMEM_HOST_LIMIT': ['0'],
		 'VMEM_CONV_ALGO': ['default', 'mem', 'perf'], 'VMEM_TRACE': [''],
		 'VMEM_LOG': ['warn', 'error', 'info', 'debug'], 'VMEM_STATS': ['0', '1']},
	# settings whose use prints vmem's "not implemented" warning
	'not_implemented': ['VMEM_POLICY=all', 'VMEM_POLICY=conv', 'VMEM_POLICY=dyn'],
	'per_image': {}, 'ms_per_image': {},
	'default_per_image': 64 * MiB, 'default_ms_per_image': 1.0,
	'slow': {'none': 2.0, 'all': 0.5, 'conv': 0.75, 'dyn': 0.125, 'lru': 2.0, 'plan': 1.0,
		 'belady': 1.0, 'nopolicy': 3.0},
	'dyn_choice': 'conv',     # what VMEM_POLICY=dyn says it chose (VMEM_STATS=1)
	'first_factor': 3.0,
	'crash': [],          # list of {key: value} matched against the run (net, policy, alloc, mem)
	'wrong': [],          # same, with --no-dryrun: a different checksum
	'sleep_s': 0.0,
}


def parse_size(s):
	s = s.strip()
	mult = {'K': 1 << 10, 'M': MiB, 'G': GiB, 'T': 1 << 40}
	if s and s[-1].upper() in mult:
		return int(float(s[:-1]) * mult[s[-1].upper()])
	return int(s)


def args_of(argv):
	a = {'batch': 4, 'image': 32, 'iters': 5, 'alloc': 'per-tensor', 'json': False}
	i = 0
	while i < len(argv):
		k = argv[i]
		if k == '--json':
			a['json'] = True
		elif k.startswith('--'):
			a[k[2:]] = argv[i + 1]
			i += 1
		i += 1
	for k in ('batch', 'image', 'iters'):
		a[k] = int(a[k])
	return a


def matches(rules, facts):
	return any(all(str(facts.get(k)) == str(v) for k, v in rule.items()) for rule in rules)


def main():
	cfg = dict(DEFAULTS)
	path = os.environ.get('FAKE_MT_CONFIG')
	if path:
		with open(path) as f:
			cfg.update(json.load(f))
	a = args_of(sys.argv[1:])
	net, batch, alloc, iters = a['net'], a['batch'], a['alloc'], a['iters']
	env = os.environ
	mem = parse_size(env.get('SIMGPU_MEM', '12G'))
	model = env.get('SIMGPU_MODEL', 'titanx')
	dry = env.get('SIMGPU_DRYRUN', '0') == '1'
	vmem = 'libvmem' in env.get('LD_PRELOAD', '') or 'vmemrunstub' in env.get('LD_PRELOAD', '')
	err = sys.stderr

	# ---- vmem's start-up: settings, errors, warnings
	settings = {}
	if vmem:
		passthrough = False
		for k, vals in cfg['vars'].items():
			v = env.get(k)
			if v is None:
				settings[k] = vals[0]
			elif vals and k not in ('VMEM_TRACE', 'VMEM_DEVICE_RESERVE', 'VMEM_VA_SIZE',
						'VMEM_HOST_LIMIT') and v not in vals:
				err.write('vmem: error: %s=%s: unknown value; accepted: %s (vmem stays pass-through)\n'
					  % (k, v, ', '.join(vals)))
				passthrough = True
				settings[k] = vals[0]
			else:
				settings[k] = v
		if env.get('VMEM_LOG') == 'info':
			err.write('vmem: info: vmem 0.1.0, %s\n' % ('pass-through' if passthrough else 'enabled'))
			for k in cfg['vars']:
				err.write('vmem: info: %s=%s%s\n' % (k, settings[k],
								 ' (default)' if k not in env else ''))
		if not passthrough:
			for item in cfg['not_implemented']:
				k, _, v = item.partition('=')
				if settings.get(k) == v:
					err.write('vmem: warning: %s: not implemented in this version; running '
						  'as VMEM_POLICY=none\n' % item)
		if passthrough:
			vmem = False
	policy = settings.get('VMEM_POLICY', 'none') if vmem else None
	evict = next((settings[k] for k in settings if 'EVICT' in k and k in env), None) if vmem else None
	liveness = settings.get('VMEM_LIVENESS') if vmem else None
	facts = {'net': net, 'policy': policy, 'alloc': alloc, 'mem': env.get('SIMGPU_MEM'),
		 'model': model, 'batch': batch, 'evict': evict, 'liveness': liveness}
	if cfg['sleep_s'] and a['json']:      # not the availability probes
		time.sleep(cfg['sleep_s'])
	if matches(cfg['crash'], facts):
		err.write('simgpu: illegal address 0x7f0000001000 in cudnnConvolutionForward\n')
		err.flush()
		os.abort()

	per_image = cfg['per_image'].get(net, cfg['default_per_image'])
	need_pt = batch * per_image
	need = int(need_pt * STYLE[alloc])
	if vmem and liveness == 'eager':
		need = need_pt
	layer = need // 8
	ms = batch * cfg['ms_per_image'].get(net, cfg['default_ms_per_image'])
	peak = need
	h2d = d2h = 0
	stats = {}

	def oom(call, nbytes, held):
		print('out of memory: %s requested %d bytes (minitrain held %d bytes, peak %d bytes)'
		      % (call, nbytes, held, held))
		write_report(model, mem, dry, min(held, mem), 0, 0, 0.0)
		sys.exit(3)

	if vmem and env.get('VMEM_DEVICE_LIMIT'):
		mem = min(mem, parse_size(env['VMEM_DEVICE_LIMIT']))
	if not vmem:
		if need > mem:
			oom('cudaMalloc', 256 * MiB, mem - 128 * MiB)
	else:
		host = max(0, need - mem)
		hl = parse_size(env.get('VMEM_HOST_LIMIT', '0'))
		if layer > mem:
			oom('cudnnConvolutionForward(g_h, &one, x, w, y)', 0, mem)
		if hl and host > hl:
			err.write('vmem: error: pinned host memory exhausted while allocating (%d bytes): %d MiB '
				  'of host memory hold offloaded data, VMEM_HOST_LIMIT=%d MiB (0 = unlimited); '
				  'raise VMEM_HOST_LIMIT or lower the batch size\n' % (2 * MiB, hl // MiB, hl // MiB))
			oom('cudaMalloc', 2 * MiB, mem)
		if host:
			# VMEM_LIVENESS=off with VMEM_POLICY=none: no policy at all (LRU)
			nopolicy = policy == 'none' and liveness == 'off' and not evict
			slow = cfg['slow'].get('nopolicy' if nopolicy else evict or policy, 1.0)
			ms = ms * (1 + slow * host / mem)
			h2d = d2h = host
			stats = {'misses (fault-ins)': host // (2 * MiB), 'evictions': host // (2 * MiB),
				 'bytes faulted in': host, 'bytes evicted': host}
		peak = min(need, mem)
	iter_ms = [round(ms * cfg['first_factor'], 3)] + [round(ms, 3)] * (iters - 1)
	for i, t in enumerate(iter_ms):
		print('iter %d loss 0.000000 time %.3f ms' % (i, t))
	key = '%s/%d/%d' % (net, batch, a['image'])
	if not dry and matches(cfg['wrong'], facts):
		key += '/wrong'
	checksum = '0x' + hashlib.sha1(key.encode()).hexdigest()[:16]
	print('checksum: %s' % checksum)
	print('peak: %d MiB' % (peak // MiB))
	if vmem and env.get('VMEM_TRACE'):
		write_trace(env['VMEM_TRACE'], model, need, mem, iters)
	if vmem and env.get('VMEM_STATS') == '1':
		err.write('vmem: stats ----------------------------------------------------------\n')
		err.write('vmem: %-16s %16s %16s %16s\n' % ('bytes', 'current', 'peak', 'total'))
		err.write('vmem: %-16s %16d %16d %16d\n' % ('resident', 0, peak, peak))
		for k, v in stats.items():
			err.write('vmem: %-32s %16d\n' % (k, v))
		if not (policy == 'none' and liveness == 'off'):
			# the shim's plan: made at the end of iteration 3, iterations 4.. by it
			err.write('policy: iterations planned %8d  suspended      0  resumed      0  '
				  'ops matched %10d\n' % (max(0, iters - 4), 2 * max(0, iters - 4)))
			if policy == 'dyn':
				# the kept pass runs the least-workspace convolutions ("(m)")
				err.write('policy: dyn: measured conv 530.0 ms, none 600.0 ms, conv(m) 512.0 '
					  'ms an iteration: kept %s(m)\n' % cfg['dyn_choice'])
				err.write('policy: dyn: chose %s (peaks: none 17.4 GiB, conv 10.8 GiB, all 10.8 '
					  'GiB; budget 12.0 GiB)\n' % cfg['dyn_choice'])
	write_report(model, mem, dry, peak, h2d * iters, d2h * iters, sum(iter_ms) / 1e3)
	if a['json']:
		print(json.dumps({'net': net, 'batch': batch, 'image': a['image'], 'iters': iters,
				  'alloc': alloc, 'conv_api': 'legacy', 'losses': [0.0] * iters,
				  'checksum': checksum, 'peak_bytes': peak, 'iter_ms': iter_ms}))
	return 0


def write_report(model, mem, dry, peak, h2d, d2h, vt):
	path = os.environ.get('SIMGPU_REPORT')
	if not path:
		return
	with open(path, 'w') as f:
		f.write('model: %s\ndryrun: %d\ncapacity_bytes: %d\nvirtual_time_s: %.9f\n'
			'peak_device_bytes: %d\nbytes_h2d: %d\nbytes_d2h: %d\nbytes_d2d: 0\nkernels: 1\n'
			% (model, 1 if dry else 0, mem, vt, peak, h2d, d2h))


def write_trace(path, model, need, mem, iters):
	"""Per iteration: op 1 writes A (need bytes) and reads W (1 MiB), op 2
	reads A and writes W.  Over the budget the excess of A is evicted once
	after the allocations and then, each iteration, evicted and faulted in
	again between the two ops: the steady iteration's resident bytes stay
	min(need + 1 MiB, mem) and it moves the excess each way.  vmem-bound's
	live curve is need + 1 MiB at both ops."""
	b = tracegen.TraceBuilder(path, budget=mem, device=DEVICE.get(model, 'Simulated GPU'))
	A = b.alloc(need)
	W = b.alloc(1 * MiB)
	over = need + MiB - mem

	def move(kind, n):
		sign = -1 if kind == 'evict' else 1
		b.resident += sign * n
		b.host -= sign * n
		b._mem(kind, A, n, n)
	if over > 0:
		move('evict', over)
	for _ in range(iters):
		b.op('conv_fwd', 'cudnnConvolutionForward', [(A, 'w', 'y'), (W, 'r', 'w')])
		if over > 0:
			move('evict', over)
			move('fault_in', over)
		b.op('conv_bwd_filter', 'cudnnConvolutionBackwardFilter', [(A, 'r', 'x'), (W, 'w', 'dw')])
	b.end()
	b.close()


if __name__ == '__main__':
	sys.exit(main())
