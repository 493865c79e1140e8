#!/usr/bin/env python3
# fakepython.py - stands in for the GPU machine's python3 in the tests of
# scripts/gpu-validate and scripts/gpu-compare: answers the torch probe as
# if a GPU were there and "runs" scripts/torch/*.py by printing their
# output conventions, so the plumbing (runs, comparisons, trace summaries,
# scheduling, report, archive) is tested without a GPU.
#
# train_vision.py / transformer_block.py (gpu-validate): under VMEM_TRACE
# a synthetic trace is written.  FAKE_DIFFER=SUBSTRING makes the vmem runs
# whose environment or arguments contain SUBSTRING print a different last
# loss; FAKE_NONDET=1 makes the transformer's losses change from run to run.
#
# compare_rows.py / bandwidth.py (gpu-compare): waits for "go" with
# --ready-wait, prints the process line, one line per row and per search
# probe with fixed figures (an oracle peak of 6 GiB reserved, 4 GiB
# allocated; vmem 0.6 s per iteration moving 10 GB in and 12 GB out;
# save_on_cpu a loss that differs within the tolerance; plain PyTorch out
# of memory below 4 GiB), VMEM_STATS on stderr under VMEM_POLICY and the
# unified-memory stats line under VMEM_UM_BUDGET.  FAKE_DIFFER=SUBSTRING
# makes such vmem rows' last loss 7.0 (beyond the tolerance);
# FAKE_HANG=SUBSTRING makes such processes sleep after "go", FAKE_CRASH=
# SUBSTRING makes them exit 139 without a result.
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

GiB = 1 << 30
LOSSES = [6.9, 6.8, 6.7, 6.6]
PEAK, ALLOCATED = 6 * GiB, 4 * GiB


def matches(var, args):
	s = os.environ.get(var)
	return bool(s) and (s in ' '.join(sys.argv[1:]) or any(
		s in '%s=%s' % kv for kv in os.environ.items() if not kv[0].startswith('FAKE_')))


def wait_go(args):
	if '--ready-wait' in args:
		line = sys.stdin.readline()
		if not line.startswith('go'):
			print('fake: not started', file=sys.stderr)
			sys.exit(3)
	if matches('FAKE_HANG', args):
		time.sleep(3600)
	if matches('FAKE_CRASH', args):
		print('fake: Segmentation fault', file=sys.stderr, flush=True)
		os._exit(139)


def emit(obj):
	print(json.dumps(obj, sort_keys=True), flush=True)


def arg(args, name, default=None):
	return args[args.index(name) + 1] if name in args else default


def fake_bandwidth(args):
	wait_go(args)
	print('pinned H2D alone          50.00 GB/s (fake)')
	emit({'h2d_GBps': 50.0, 'd2h_GBps': 40.0, 'both_total_GBps': 90.0,
	      'nvml': {'error': 'NVML PCIe counters unavailable: fake'}})
	return 0


def row_out(name, mode, batch, iter_ms, losses, **kw):
	out = {'row': name, 'mode': mode, 'batch': batch, 'iter_ms': iter_ms, 'warmup': 1,
	       'losses': losses, 'loss_hex': [v.hex() for v in losses], 'error': None,
	       'items_per_batch': batch, 'unit': 'images', 'saved_d2h': [0] * len(losses),
	       'saved_h2d': [0] * len(losses), 'pcie_tx': [None] * len(losses),
	       'pcie_rx': [None] * len(losses), 'checksum_hex': (1.5).hex()}
	out.update(kw)
	return out


def fake_compare_rows(args):
	rows = json.loads(arg(args, '--rows'))
	batch = int(arg(args, '--batch', 32))
	wait_go(args)
	emit({'process': {'model': arg(args, '--model'), 'batch': batch, 'torch': '2.11.0+fake',
			  'cuda': '13.0', 'cudnn': 91900, 'gpu': 'Fake GPU', 'pcie_counters': False,
			  'pcie_error': 'NVML PCIe counters unavailable: fake'}})
	policy = os.environ.get('VMEM_POLICY')
	um = os.environ.get('VMEM_UM_BUDGET')
	external = int(os.environ.get('VMEM_DEVICE_LIMIT') or um or 0)
	done = {}
	iters_run = 0
	for r in rows:
		b = r.get('budget')
		budget = None if b is None else external if b == 'external' else \
			b['bytes'] if 'bytes' in b else done[b['of']]['max_memory_reserved'] // b['div']
		mode = r.get('mode', 'plain')
		name = r['name']
		if r.get('search'):
			emit(fake_search(r, mode, budget, policy, um))
			continue
		if name == 'oracle':
			out = row_out(name, mode, batch, [1000.0, 30.0, 30.0, 30.0], LOSSES,
				      max_memory_reserved=PEAK, max_memory_allocated=ALLOCATED)
		elif policy:
			losses = list(LOSSES)
			if matches('FAKE_DIFFER', args):
				losses[-1] = 7.0
			out = row_out(name, mode, batch, [3000.0, 600.0, 600.0, 600.0], losses,
				      max_memory_reserved=PEAK, max_memory_allocated=ALLOCATED)
			iters_run += 4
		elif um:
			out = row_out(name, mode, batch, [5000.0, 2000.0], LOSSES[:2], cut_short=True,
				      max_memory_reserved=PEAK, max_memory_allocated=ALLOCATED,
				      used_delta_peak=external)
		elif mode == 'save_on_cpu':
			losses = list(LOSSES)
			losses[2] *= 1 + 1e-7
			out = row_out(name, mode, batch, [1500.0, 360.0, 360.0, 360.0], losses,
				      max_memory_reserved=min(budget, 3 * GiB), saved_d2h=[3e9] * 4,
				      saved_h2d=[3e9] * 4)
		elif mode == 'checkpoint' and budget >= 2 * GiB:
			out = row_out(name, mode, batch, [1200.0, 42.0, 42.0, 42.0], LOSSES,
				      max_memory_reserved=min(budget, int(2.5 * GiB)))
		elif budget is None or budget >= ALLOCATED:
			out = row_out(name, mode, batch, [1000.0, 30.0, 30.0, 30.0], LOSSES,
				      max_memory_reserved=PEAK)
		else:
			out = row_out(name, mode, batch, [], [], error='OutOfMemoryError: CUDA out of memory. '
				      'Tried to allocate 392.00 MiB', max_memory_reserved=budget)
		out['budget'] = budget
		done[name] = out
		emit(out)
	if policy:
		n = max(1, iters_run)
		print('vmem: stats ----------------------------------------------------------', file=sys.stderr)
		print('vmem: %-16s %16d %16d %16d' % ('resident', external, external, 0), file=sys.stderr)
		print('vmem: %-16s %16d %16d %16d' % ('host (pinned)', 0, 3 * GiB, 0), file=sys.stderr)
		print('vmem: %-32s %16d' % ('bytes faulted in', 10 * 10**9 * n), file=sys.stderr)
		print('vmem: %-32s %16d' % ('bytes evicted', 12 * 10**9 * n), file=sys.stderr)
	if um:
		print('vmem-um: stats {"budget":%s,"balloon":%d,"managed_peak":%d,"refused":0}' % (
			um, 70 * GiB, PEAK), file=sys.stderr)
	return 0


def fake_search(r, mode, budget, policy, um):
	"""Doubling then bisection over a fake 'largest batch that fits'."""
	s = r['search']
	start, cap = s['start'], s['cap']
	fits = cap if policy else cap // 2 if um else {'plain': 16, 'save_on_cpu': 40,
							'checkpoint': 60}[mode] * budget // (3 * GiB)
	probes = []

	def probe(b):
		ok = b <= fits
		p = {'probe': r['name'], 'batch': b, 'ok': ok, 'seconds': 0.1,
		     'error': None if ok else 'OutOfMemoryError: fake'}
		emit(p)
		probes.append(p)
		return ok
	lo, hi, b = 0, None, start
	if probe(b):
		lo = b
		while lo < cap:
			b = min(cap, 2 * lo)
			if not probe(b):
				hi = b
				break
			lo = b
	else:
		hi = b
		while hi > 1:
			b = hi // 2
			if probe(b):
				lo = b
				break
			hi = b
	while hi is not None and hi - lo > max(1, lo // 8):
		b = (lo + hi) // 2
		if probe(b):
			lo = b
		else:
			hi = b
	return {'row': r['name'], 'mode': mode, 'budget': budget, 'error': None, 'probes': probes,
		'search': {'largest': lo, 'smallest_failing': hi, 'cap': cap, 'capped': lo >= cap,
			   'cut_by_time': False, 'probe_iters': 2, 'start': start}}


def main():
	if len(sys.argv) > 2 and sys.argv[1] == '-c':
		print(json.dumps({'torch': '2.11.0+fake', 'cuda': '13.0', 'cudnn': 91000,
				  'available': True, 'gpu': 'Fake GPU'}))
		return 0
	script = os.path.basename(sys.argv[1])
	args = sys.argv[2:]
	if script == 'compare_rows.py':
		return fake_compare_rows(args)
	if script == 'bandwidth.py' and '--ready-wait' in args:
		return fake_bandwidth(args)
	if script in ('bandwidth.py', 'vmm_cost.py'):
		print('%s: fake measurement' % script)
		print(json.dumps({'fake': True}))
		return 0
	under_vmem = 'VMEM_POLICY' in os.environ
	losses = [6.9, 6.8, 6.7, 6.6]
	differ = os.environ.get('FAKE_DIFFER')
	if under_vmem and differ and (differ in ' '.join(args) or
				       any(differ in '%s=%s' % kv for kv in os.environ.items()
						   if kv[0] != 'FAKE_DIFFER')):
		losses[-1] = 6.600000000000001
	if os.environ.get('FAKE_NONDET') and script == 'transformer_block.py':
		losses[0] += os.getpid() * 1e-12   # an oracle that does not repeat itself
	if os.environ.get('VMEM_TRACE'):
		import tracegen
		tracegen.vgg16_trace(os.environ['VMEM_TRACE'], iters=3)
	for i, v in enumerate(losses):
		print('iter %d loss %r hex %s ms 10.0' % (i, v, v.hex()))
	print(json.dumps({'losses': losses, 'loss_hex': [v.hex() for v in losses],
			  'checksum_hex': (1.5).hex(), 'items_per_s': 100.0,
			  'iter_ms': [12.0, 10.0, 10.0, 10.0] + [10.0] * 11,
			  'max_memory_allocated': 3 << 30, 'max_memory_reserved': 4 << 30,
			  'error': None, 'env': {k: v for k, v in os.environ.items() if k.startswith('VMEM_')}}))
	return 0


if __name__ == '__main__':
	sys.exit(main())
