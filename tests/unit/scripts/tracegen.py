#!/usr/bin/env python3
# tracegen.py - writes synthetic vmem traces (format 1) for the tests of
# scripts/vmem-trace and for the examples in docs/trace-tools.md.
#
# The traces follow /tmp/vmem-trace-spec.md = docs/trace-format.md: a
# header, "op" records, memory records with running resident / host /
# budget totals, and an "end" record.  vgg16_trace() mimics what libvmem
# writes for `minitrain vgg16`: the first iteration has the algorithm and
# workspace queries and the allocations, every iteration copies a batch in,
# runs 13 conv + 3 FC layers forward, the loss kernel, the backward pass
# and one SGD kernel per parameter, and the run ends with a checksum copy.
#
#   python3 tracegen.py vgg16 out.jsonl [--iters N] [--budget]
"""Synthetic vmem traces for tests and examples."""

import argparse
import json

MiB = 1 << 20


class TraceBuilder:
	"""Writes one trace; keeps seq, time and the memory totals."""

	def __init__(self, path, budget=8 << 30, device='Simulated H100', pid=4242):
		self.f = open(path, 'w', encoding='utf-8')
		self.seq = 0
		self.t = 1000
		self.records = 0
		self.next_alloc = 1
		self.allocs = {}          # id -> bytes
		self.ptrs = {}            # id -> base address
		self.base = 0x7f0000000000
		self.resident = 0
		self.host = 0
		self.budget = budget
		self.peak_resident = 0
		self.peak_host = 0
		self.counts = {}
		self._line({'type': 'header', 'format': 1, 'vmem': '0.1.0', 'pid': pid,
			    'start_unix_ns': 1700000000000000000,
			    'device': {'name': device, 'total': 80 << 30, 'cc': '9.0'},
			    'cudnn': 91000, 'cublas': 130100, 'cudart': 13000,
			    'settings': {'policy': 'none', 'device_limit': budget, 'host_limit': 0,
					 'conv_algo': 'default', 'workspace': 'off'},
			    'va': {'base': hex(self.base), 'size': 1 << 40}, 'budget': budget})

	def _line(self, obj):
		self.f.write(json.dumps(obj, separators=(',', ':')) + '\n')
		self.records += 1

	def _tick(self, dur):
		self.seq += 1
		self.t += dur + 200
		return self.seq, self.t

	def _mem(self, kind, aid, nbytes, mapped, stream='0x0', api='vmem', dur=None):
		seq, t = self._tick(dur or 500)
		self.counts[kind] = self.counts.get(kind, 0) + 1
		self.peak_resident = max(self.peak_resident, self.resident)
		self.peak_host = max(self.peak_host, self.host)
		rec = {'type': kind, 'seq': seq, 't': t, 'tid': 1, 'alloc': aid,
		       'ptr': hex(self.ptrs.get(aid, 0)), 'off': 0, 'bytes': nbytes,
		       'mapped': mapped, 'stream': stream, 'api': api,
		       'resident': self.resident, 'host': self.host, 'budget': self.budget}
		if dur is not None:
			rec['dur'] = dur
		self._line(rec)
		return seq

	def alloc(self, nbytes, api='cudaMalloc'):
		aid = self.next_alloc
		self.next_alloc += 1
		self.allocs[aid] = nbytes
		self.ptrs[aid] = self.base
		self.base += (nbytes + (2 * MiB - 1)) // (2 * MiB) * (2 * MiB)
		self.resident += nbytes
		self._mem('alloc', aid, nbytes, nbytes, api=api)
		return aid

	def free(self, aid):
		self.resident -= self.allocs[aid]
		return self._mem('free', aid, self.allocs[aid], self.allocs[aid], api='cudaFree')

	def offload(self, aid):
		n = self.allocs[aid]
		self.resident -= n
		self.host += n
		return self._mem('offload', aid, n, n, stream='0xd2h', dur=n // 20)

	def prefetch(self, aid):
		n = self.allocs[aid]
		self.resident += n
		self.host -= n
		return self._mem('prefetch', aid, n, n, stream='0xh2d', dur=n // 20)

	def drop(self, aid):
		"""Pages of a dead range dropped without a copy (liveness)."""
		n = self.allocs[aid]
		self.resident -= n
		return self._mem('drop', aid, n, n, api='liveness')

	def plan(self, event, plan=1, period=10, **extra):
		"""A plan record of the proactive layer (docs/trace-format.md)."""
		seq, t = self._tick(0)
		rec = {'type': 'plan', 'seq': seq, 't': t, 'tid': 1, 'event': event, 'plan': plan,
		       'period': period}
		rec.update(extra)
		self._line(rec)
		return seq

	def evict(self, aid):
		n = self.allocs[aid]
		self.resident -= n
		self.host += n
		return self._mem('evict', aid, n, n, stream='0xd2h', dur=n // 20)

	def fault_in(self, aid):
		n = self.allocs[aid]
		self.resident += n
		self.host -= n
		return self._mem('fault_in', aid, n, n, stream='0xh2d', dur=n // 20)

	def op(self, kind, api, refs=(), args=None, stream='0x0', dur=3000):
		"""refs: (alloc id, acc, role[, bytes[, off]]) tuples."""
		seq, t = self._tick(dur)
		tensors = []
		for r in refs:
			aid, acc, role = r[0], r[1], r[2]
			nbytes = r[3] if len(r) > 3 else self.allocs.get(aid, 0)
			off = r[4] if len(r) > 4 else 0
			tensors.append({'alloc': aid, 'off': off, 'bytes': nbytes,
					'ptr': hex(self.ptrs.get(aid, 0x1000) + off), 'acc': acc, 'role': role})
		rec = {'type': 'op', 'seq': seq, 't': t, 'dur': dur, 'tid': 1, 'stream': stream,
		       'op': kind, 'api': api, 'args': args or {}, 'tensors': tensors}
		self._line(rec)
		self.counts['op:' + kind] = self.counts.get('op:' + kind, 0) + 1
		return seq

	def end(self, dropped=0):
		seq, t = self._tick(0)
		self._line({'type': 'end', 'seq': seq, 't': t, 'records': self.records + 1,
			    'dropped': dropped})

	def close(self):
		self.f.close()


VGG16 = [64, 64, 'M', 128, 128, 'M', 256, 256, 256, 'M', 512, 512, 512, 'M',
	 512, 512, 512, 'M']


def vgg16_trace(path, iters=3, batch=2, image=32, budget=False, teardown=True,
		dropped=0, end=True):
	"""A minitrain-vgg16-like trace.  Returns facts the tests check:
	iters, per-iteration op counts, the seq range of the last iteration,
	the number of memory records by kind, the peaks."""
	tb = TraceBuilder(path, budget=(64 * MiB) if budget else (8 << 30))
	f = 4  # float32

	# Parameters and activations, allocated once (per-tensor style).
	x0 = tb.alloc(batch * 3 * image * image * f)
	labels = tb.alloc(batch * 4)
	layers = []
	c_in, hw = 3, image
	cur = x0
	for v in VGG16:
		if v == 'M':
			hw //= 2
			out = tb.alloc(batch * c_in * hw * hw * f)
			layers.append(('pool', cur, out))
			cur = out
			continue
		w = tb.alloc(v * c_in * 9 * f)
		b = tb.alloc(v * f)
		y = tb.alloc(batch * v * hw * hw * f)
		a = tb.alloc(batch * v * hw * hw * f)
		layers.append(('conv', cur, w, b, y, a))
		c_in = v
		cur = a
	fc_dims = [c_in * hw * hw, 4096, 4096, 10]
	for i in range(3):
		w = tb.alloc(fc_dims[i] * fc_dims[i + 1] * f)
		b = tb.alloc(fc_dims[i + 1] * f)
		y = tb.alloc(batch * fc_dims[i + 1] * f)
		a = tb.alloc(batch * fc_dims[i + 1] * f) if i < 2 else y
		layers.append(('fc', cur, w, b, y, a, fc_dims[i], fc_dims[i + 1]))
		cur = a
	prob = tb.alloc(batch * 10 * f)
	dlogits = tb.alloc(batch * 10 * f)
	sample_loss = tb.alloc(batch * f)
	ws = tb.alloc(4 * MiB, api='cudaMalloc')
	# Gradients: one per activation and parameter, allocated up front.
	grad = {}
	for L in layers:
		for aid in L[1:6] if L[0] != 'pool' else L[1:3]:
			if isinstance(aid, int) and aid not in grad:
				grad[aid] = tb.alloc(tb.allocs[aid])
	moment = {}
	for L in layers:
		if L[0] in ('conv', 'fc'):
			for aid in (L[2], L[3]):
				moment[aid] = tb.alloc(tb.allocs[aid])

	per_iter_start = []
	per_iter_end = []
	for it in range(iters):
		first = it == 0
		start = tb.op('memcpy', 'cudaMemcpyAsync', [(x0, 'w', 'dst')], {'kind': 'h2d'})
		tb.op('memcpy', 'cudaMemcpyAsync', [(labels, 'w', 'dst')], {'kind': 'h2d'})
		per_iter_start.append(start)
		# Forward.
		for L in layers:
			if L[0] == 'pool':
				tb.op('pool_fwd', 'cudnnPoolingForward', [(L[1], 'r', 'x'), (L[2], 'w', 'y')])
				continue
			if L[0] == 'conv':
				_, x, w, b, y, a = L
				if first:
					tb.op('algo_query', 'cudnnGetConvolutionForwardAlgorithm_v7')
					tb.op('ws_query', 'cudnnGetConvolutionForwardWorkspaceSize')
				tb.op('conv_fwd', 'cudnnConvolutionForward',
				      [(x, 'r', 'x'), (w, 'r', 'w'), (ws, 'rw', 'ws'), (y, 'w', 'y')],
				      {'algo': 1, 'ws': 4 * MiB, 'n': batch})
				tb.op('add_tensor', 'cudnnAddTensor', [(b, 'r', 'a'), (y, 'rw', 'c')])
				tb.op('act_fwd', 'cudnnActivationForward', [(y, 'r', 'x'), (a, 'w', 'y')])
				if budget and x != x0:
					tb.offload(x)
				continue
			_, x, w, b, y, a, k, n = L
			tb.op('gemm', 'cublasSgemm_v2', [(w, 'r', 'A'), (x, 'r', 'B'), (y, 'w', 'C')],
			      {'m': n, 'n': batch, 'k': k})
			tb.op('add_tensor', 'cudnnAddTensor', [(b, 'r', 'a'), (y, 'rw', 'c')])
			if a != y:
				tb.op('act_fwd', 'cudnnActivationForward', [(y, 'r', 'x'), (a, 'w', 'y')])
		logits = layers[-1][5]
		tb.op('softmax_fwd', 'cudnnSoftmaxForward', [(logits, 'r', 'x'), (prob, 'w', 'y')])
		tb.op('launch', 'cudaLaunchKernel',
		      [(prob, 'rw', 'arg0'), (labels, 'rw', 'arg1'), (dlogits, 'rw', 'arg2'),
		       (sample_loss, 'rw', 'arg3')], {'kernel': 'mt_xent_grad'})
		tb.op('memcpy', 'cudaMemcpyAsync', [(sample_loss, 'r', 'src')], {'kind': 'd2h'})
		# Backward.
		dcur = dlogits
		for L in reversed(layers):
			if L[0] == 'pool':
				_, x, y = L
				tb.op('pool_bwd', 'cudnnPoolingBackward',
				      [(y, 'r', 'y'), (dcur, 'r', 'dy'), (x, 'r', 'x'), (grad[x], 'w', 'dx')])
				dcur = grad[x]
				continue
			if L[0] == 'fc':
				_, x, w, b, y, a, k, n = L
				if a != y:
					tb.op('act_bwd', 'cudnnActivationBackward',
					      [(a, 'r', 'y'), (dcur, 'r', 'dy'), (y, 'r', 'x'), (grad[y], 'w', 'dx')])
					dcur = grad[y]
				tb.op('gemm', 'cublasSgemm_v2', [(dcur, 'r', 'A'), (x, 'r', 'B'), (grad[w], 'w', 'C')],
				      {'m': n, 'n': k, 'k': batch})
				tb.op('launch', 'cudaLaunchKernel', [(dcur, 'rw', 'arg0'), (grad[b], 'rw', 'arg1')],
				      {'kernel': 'mt_bias_grad'})
				tb.op('gemm', 'cublasSgemm_v2', [(w, 'r', 'A'), (dcur, 'r', 'B'), (grad[x], 'w', 'C')],
				      {'m': k, 'n': batch, 'k': n})
				dcur = grad[x]
				continue
			_, x, w, b, y, a = L
			if budget and x != x0:
				tb.prefetch(x)
			tb.op('act_bwd', 'cudnnActivationBackward',
			      [(a, 'r', 'y'), (dcur, 'r', 'dy'), (y, 'r', 'x'), (grad[y], 'w', 'dx')])
			dy = grad[y]
			tb.op('conv_bwd_bias', 'cudnnConvolutionBackwardBias', [(dy, 'r', 'dy'), (grad[b], 'w', 'db')])
			if first:
				tb.op('algo_query', 'cudnnGetConvolutionBackwardFilterAlgorithm_v7')
			tb.op('conv_bwd_filter', 'cudnnConvolutionBackwardFilter',
			      [(x, 'r', 'x'), (dy, 'r', 'dy'), (ws, 'rw', 'ws'), (grad[w], 'w', 'dw')],
			      {'algo': 0, 'ws': 4 * MiB})
			if x != x0:
				if first:
					tb.op('algo_query', 'cudnnGetConvolutionBackwardDataAlgorithm_v7')
				tb.op('conv_bwd_data', 'cudnnConvolutionBackwardData',
				      [(w, 'r', 'w'), (dy, 'r', 'dy'), (ws, 'rw', 'ws'), (grad[x], 'w', 'dx')],
				      {'algo': 1, 'ws': 4 * MiB})
				dcur = grad[x]
		if budget and it == iters - 1:
			# One miss: a tensor evicted by the LRU and faulted back in.
			tb.evict(x0)
			tb.fault_in(x0)
		# SGD, one kernel per parameter.
		for L in layers:
			if L[0] in ('conv', 'fc'):
				for p in (L[2], L[3]):
					tb.op('launch', 'cudaLaunchKernel',
					      [(p, 'rw', 'arg0'), (moment[p], 'rw', 'arg1'), (grad[p], 'rw', 'arg2')],
					      {'kernel': 'mt_sgd_momentum'})
		per_iter_end.append(tb.op('sync', 'cudaStreamSynchronize'))
	if teardown:
		for L in layers:
			if L[0] in ('conv', 'fc'):
				tb.op('memcpy', 'cudaMemcpy', [(L[2], 'r', 'src')], {'kind': 'd2h'})
		for aid in sorted(tb.allocs):
			tb.free(aid)
	if end:
		tb.end(dropped=dropped)
	tb.close()
	return {
		'iters': iters,
		'last_iter': (per_iter_start[-1], per_iter_end[-1]),
		'iter_starts': per_iter_start,
		'counts': dict(tb.counts),
		'peak_resident': tb.peak_resident,
		'peak_host': tb.peak_host,
		'budget': tb.budget,
		'allocs': dict(tb.allocs),
		'records': tb.records,
	}


def main():
	p = argparse.ArgumentParser(description='Write a synthetic vmem trace.')
	p.add_argument('kind', choices=['vgg16'])
	p.add_argument('out')
	p.add_argument('--iters', type=int, default=3)
	p.add_argument('--budget', action='store_true',
		       help='a small budget: offload each conv input after its forward use, '
			    'prefetch it before its backward use')
	a = p.parse_args()
	info = vgg16_trace(a.out, iters=a.iters, budget=a.budget)
	print('wrote %s: %d records, last iteration seq %d..%d' % (
		a.out, info['records'], info['last_iter'][0], info['last_iter'][1]))


if __name__ == '__main__':
	main()
