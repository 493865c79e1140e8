#!/usr/bin/env python3
# scripts/torch/compare_rows.py - the rows of issue 14's comparison that one
# process runs, for scripts/gpu-compare.  Plain PyTorch: vmem or the
# unified-memory baseline (scripts/um) is put under it with LD_PRELOAD by
# the harness; the alternatives a user has without either
# (torch.autograd.graph.save_on_cpu, activation checkpointing) are rows
# here, their budget enforced with torch.cuda.set_per_process_memory_fraction.
#
#   compare_rows.py --model vgg16 --batch 32 --rows '[{"name": "oracle"}, ...]'
#                   [--ready-wait] [--image-size 224] [--seed 0]
#
# Start-up is split so that the harness can overlap one process's imports
# with another's GPU work: everything that needs no GPU (importing torch
# and torchvision, building the model on the CPU, generating the data) is
# done first; with --ready-wait the script then reads one line from
# standard input and starts touching CUDA only on "go" (optionally
# followed by a JSON object: {"deadline_s": seconds this process has}).
# End of input without "go" exits with status 3 and no CUDA call.
#
# Each row (a JSON object):
#   name        required, unique in the process
#   mode        plain (default) | save_on_cpu | checkpoint
#   budget      null (default: no limit) | {"bytes": N} | {"of": ROW, "div": K}
#               (max_memory_reserved of row ROW of this process, // K) |
#               "external" (enforced outside: vmem, unified memory)
#   iters, warmup   default 4 and 1
#   seconds     stop after this many seconds once a timed iteration is done
#   search      null, or {"start": B, "cap": B, "probe_iters": 2, "seconds": S}:
#               instead of one run, the largest batch that trains at the
#               row's budget (doubling from start, then bisection)
#
# Output: one JSON line per row ({"row": NAME, ...}), one per search probe
# ({"probe": NAME, ...}) as soon as it is known, and first a description of
# the process ({"process": {...}}).  Everything else on stdout is for people.
"""Run rows of the vmem comparison (oracle, save_on_cpu, checkpointing, searches)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402  (sets CUBLAS_WORKSPACE_CONFIG before torch loads)

import argparse  # noqa: E402
import copy  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402

MODES = ('plain', 'save_on_cpu', 'checkpoint')
EXIT_NOT_STARTED = 3


def emit(obj):
	print(json.dumps(obj, sort_keys=True), flush=True)


class Workload:
	"""The model (built once on the CPU, copied to the device per row), the
	data and the loss of one network, as train_vision.py and
	transformer_block.py build them (same seeds: the same weights and
	batches)."""

	def __init__(self, a):
		self.a = a
		torch.manual_seed(a.seed)
		if a.model == 'transformer':
			import transformer_block as tb
			self.model_cpu = tb.Model(a.vocab, a.d_model, a.heads, a.ff, a.layers, a.seq,
						  'sdpa' if hasattr(torch.nn.functional,
								    'scaled_dot_product_attention') else 'math')
			self.unit, self.per_item = 'tokens', a.seq
		else:
			import train_vision as tv
			self.tv = tv
			self.model_cpu = tv.build(a.model, a.classes)
			self.unit, self.per_item = 'images', 1
		self.model_cpu.train()
		self.params = sum(q.numel() for q in self.model_cpu.parameters())
		self._data = {}

	def batches(self, batch, count=2):
		"""`count` CPU batches of `batch` items, generated as the training
		scripts do (generator seeded with seed + 1)."""
		key = (batch, count)
		if key not in self._data:
			a = self.a
			g = torch.Generator().manual_seed(a.seed + 1)
			out = []
			for _ in range(count):
				if a.model == 'transformer':
					t = torch.randint(0, a.vocab, (batch, a.seq + 1), generator=g)
					out.append((t[:, :-1].contiguous(), t[:, 1:].contiguous()))
				else:
					x = torch.randn(batch, 3, a.image_size, a.image_size, generator=g)
					y = torch.randint(0, a.classes, (batch,), generator=g)
					out.append((x, y))
			self._data = {key: out}   # keep one size only: searches go through many
		return self._data[key]

	def step_loss(self, mode):
		a = self.a
		F = torch.nn.functional
		if a.model == 'transformer':
			def loss(m, x, y):
				if mode == 'checkpoint':
					h = common.checkpoint_sequential(list(m.blocks), a.checkpoint_segments, m.embed(x))
					logits = m.head(m.ln(h))
				else:
					logits = m(x)
				return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.view(-1))
			return loss

		def loss(m, x, y):
			if mode == 'checkpoint':
				trunk, head = self.tv.trunk_and_head(m, a.model)
				out = head(common.checkpoint_sequential(trunk, a.checkpoint_segments, x))
			else:
				out = m(x)
			return F.cross_entropy(out, y)
		return loss


class Runner:
	def __init__(self, a, wl, dev, deadline):
		self.a, self.wl, self.dev, self.deadline = a, wl, dev, deadline
		self.results = {}
		self.total = torch.cuda.mem_get_info(dev)[1] if dev.type == 'cuda' else 0
		self.pcie = common.PcieCounters(dev) if dev.type == 'cuda' else None
		self.fraction_set = False

	def budget(self, row):
		b = row.get('budget')
		if b is None or b == 'external':
			return None
		if 'bytes' in b:
			return int(b['bytes'])
		ref = self.results.get(b['of']) or {}
		peak = ref.get('max_memory_reserved')
		if not peak or ref.get('error'):
			raise LookupError('no peak from row %r (%s)' % (b['of'], ref.get('error') or 'not run'))
		return int(peak) // int(b['div'])

	def limit(self, budget):
		"""The caching allocator may hold at most `budget` bytes (None: no
		limit).  The fraction is set only when a row has a budget: once set,
		PyTorch checks every reservation against cudaMemGetInfo's total,
		which vmem reports as its budget while it lets PyTorch reserve more
		(virtual memory), so a vmem process must never set it."""
		gc.collect()
		if self.dev.type != 'cuda':
			return
		torch.cuda.empty_cache()
		if budget is not None:
			torch.cuda.set_per_process_memory_fraction(max(1e-6, min(1.0, budget / self.total)),
								   self.dev)
			self.fraction_set = True
		elif self.fraction_set:
			torch.cuda.set_per_process_memory_fraction(1.0, self.dev)
		torch.cuda.reset_peak_memory_stats(self.dev)

	def row_deadline(self, row):
		ends = [self.deadline] if self.deadline else []
		if row.get('seconds'):
			ends.append(time.monotonic() + float(row['seconds']))
		return min(ends) if ends else None

	def train_once(self, mode, batch, iters, warmup, deadline, data_count=2):
		"""One model, freshly copied from the CPU, trained `iters`
		iterations; returns run_iterations' dict plus memory figures."""
		a, dev = self.a, self.dev
		model = batches = None
		used0 = None
		if dev.type == 'cuda':
			free, total = torch.cuda.mem_get_info(dev)
			used0 = total - free
		ns = argparse.Namespace(iters=iters, warmup=warmup, lr=a.lr, momentum=a.momentum,
					dtype='float32', save_on_cpu=mode == 'save_on_cpu')
		try:
			model = copy.deepcopy(self.wl.model_cpu).to(dev)
			batches = [(x.to(dev), y.to(dev)) for x, y in self.wl.batches(batch, data_count)]
			torch.manual_seed(a.seed)   # dropout draws from the device generator
			out = common.run_iterations(ns, dev, model, batches, self.wl.step_loss(mode),
						    deadline=deadline, pcie=self.pcie, log=None,
						    name='compare_rows')
			if out['error'] is None:
				with torch.no_grad():
					ck = float(sum(p.detach().double().sum() for p in model.parameters()))
				out['checksum_hex'] = ck.hex()
		except Exception as e:   # out of memory while copying the model or data
			msg = str(e).splitlines()[0] if str(e) else ''
			out = {'losses': [], 'iter_ms': [], 'error': '%s: %s (before training)' % (
				type(e).__name__, msg[:400])}
		del model, batches
		gc.collect()
		if dev.type == 'cuda':
			out['max_memory_reserved'] = torch.cuda.max_memory_reserved(dev)
			out['max_memory_allocated'] = torch.cuda.max_memory_allocated(dev)
			if out.get('used') and used0 is not None:
				out['used_delta_peak'] = max(out['used']) - used0
			torch.cuda.empty_cache()
		out['loss_hex'] = [float(v).hex() for v in out['losses']]
		return out

	def run_row(self, row):
		a = self.a
		name = row['name']
		mode = row.get('mode', 'plain')
		res = {'row': name, 'mode': mode, 'batch': row.get('batch', a.batch),
		       'budget_kind': 'external' if row.get('budget') == 'external' else
		       'none' if row.get('budget') is None else 'memory_fraction'}
		if mode not in MODES:
			res['error'] = 'unknown mode %r (expected one of %s)' % (mode, ', '.join(MODES))
			return res
		try:
			budget = self.budget(row)
		except LookupError as e:
			res['error'] = 'skipped: %s' % e
			return res
		res['budget'] = budget
		self.limit(budget)
		if row.get('search'):
			res.update(self.search(row, mode, budget))
			return res
		t0 = time.monotonic()
		out = self.train_once(mode, res['batch'], int(row.get('iters', 4)),
				      int(row.get('warmup', 1)), self.row_deadline(row))
		out['seconds'] = time.monotonic() - t0
		out['warmup'] = int(row.get('warmup', 1))
		out['items_per_batch'] = res['batch'] * self.wl.per_item
		out['unit'] = self.wl.unit
		res.update(out)
		return res

	def search(self, row, mode, budget):
		"""Largest batch that trains `probe_iters` iterations at the row's
		budget: doubling from `start`, then bisection, within `seconds`."""
		s = row['search']
		start, cap = int(s.get('start', self.a.batch)), int(s.get('cap', 32 * self.a.batch))
		iters = int(s.get('probe_iters', 2))
		end = time.monotonic() + float(s.get('seconds', 60))
		if self.deadline:
			end = min(end, self.deadline)
		probes = []
		last = {'batch': None, 'seconds': None}

		def probe(b):
			# A probe that would run past the end is not started: its time is
			# guessed from the last one, linear in the batch.
			if last['seconds'] is not None:
				guess = last['seconds'] * b / max(1, last['batch'])
				if time.monotonic() + guess > end:
					return None
			elif time.monotonic() >= end:
				return None
			self.limit(budget)
			t0 = time.monotonic()
			out = self.train_once(mode, b, iters, 0, None, data_count=1)
			ok = out.get('error') is None and len(out['losses']) == iters and \
				all(math.isfinite(v) for v in out['losses'])
			p = {'probe': row['name'], 'batch': b, 'ok': ok, 'error': out.get('error'),
			     'seconds': time.monotonic() - t0, 'iter_ms': out.get('iter_ms'),
			     'max_memory_reserved': out.get('max_memory_reserved')}
			probes.append(p)
			emit(p)
			last['batch'], last['seconds'] = b, p['seconds']
			return ok

		lo, hi, cut = 0, None, False
		b = max(1, min(start, cap))
		r = probe(b)
		if r is None:
			cut = True
		elif r:
			lo = b
			while lo < cap:
				b = min(cap, lo * 2)
				r = probe(b)
				if r is None:
					cut = True
					break
				if not r:
					hi = b
					break
				lo = b
		else:
			hi = b
			while hi > 1:
				b = hi // 2
				r = probe(b)
				if r is None:
					cut = True
					break
				if r:
					lo = b
					break
				hi = b
		while not cut and hi is not None and hi - lo > max(1, lo // 8):
			b = (lo + hi) // 2
			r = probe(b)
			if r is None:
				cut = True
			elif r:
				lo = b
			else:
				hi = b
		return {'search': {'largest': lo, 'smallest_failing': hi, 'cap': cap, 'capped': lo >= cap,
				   'cut_by_time': cut, 'probe_iters': iters, 'start': start},
			'probes': probes, 'error': None}


def parse_args(argv=None):
	p = common.parser('Run rows of the vmem comparison (scripts/gpu-compare): the oracle, '
			  'save_on_cpu and activation checkpointing at a memory budget, and '
			  'largest-batch searches. Plain PyTorch.')
	p.add_argument('--model', choices=['vgg16', 'resnet50', 'transformer'], default='vgg16')
	p.add_argument('--batch', type=int, default=32)
	p.add_argument('--rows', required=True,
		       help='JSON list of rows (see the header of this script), or @FILE')
	p.add_argument('--ready-wait', action='store_true',
		       help='after the CPU-side start-up, wait for "go" on standard input')
	p.add_argument('--image-size', type=int, default=224)
	p.add_argument('--classes', type=int, default=1000)
	p.add_argument('--layers', type=int, default=4)
	p.add_argument('--d-model', type=int, default=1024)
	p.add_argument('--heads', type=int, default=16)
	p.add_argument('--ff', type=int, default=4096)
	p.add_argument('--seq', type=int, default=512)
	p.add_argument('--vocab', type=int, default=32000)
	p.add_argument('--seed', type=int, default=0)
	p.add_argument('--lr', type=float, default=0.01)
	p.add_argument('--momentum', type=float, default=0.9)
	p.add_argument('--checkpoint-segments', type=int, default=4)
	p.add_argument('--device', default='cuda')
	a = p.parse_args(argv)
	text = a.rows
	if text.startswith('@'):
		with open(text[1:]) as f:
			text = f.read()
	try:
		a.rows = json.loads(text)
		if not isinstance(a.rows, list) or not all(isinstance(r, dict) and r.get('name')
							   for r in a.rows):
			raise ValueError('expected a list of objects with a "name"')
	except ValueError as e:
		p.error('--rows: %s' % e)
	return a


def main():
	a = parse_args()
	started = time.monotonic()
	wl = Workload(a)
	for r in a.rows:
		if not r.get('search'):
			wl.batches(r.get('batch', a.batch))
			break
	warm_s = time.monotonic() - started
	deadline = None
	if a.ready_wait:
		line = sys.stdin.readline()
		if not line.startswith('go'):
			print('compare_rows: not started (no "go" on standard input)', file=sys.stderr)
			return EXIT_NOT_STARTED
		opts = json.loads(line[2:].strip() or '{}')
		if opts.get('deadline_s'):
			deadline = time.monotonic() + float(opts['deadline_s'])
	go_at = time.monotonic()
	dev = torch.device(a.device)
	if dev.type == 'cuda' and not torch.cuda.is_available():
		print('compare_rows: error: CUDA is not available (torch %s)' % torch.__version__,
		      file=sys.stderr)
		return 2
	torch.backends.cudnn.deterministic = True
	torch.backends.cudnn.benchmark = False
	torch.use_deterministic_algorithms(True, warn_only=True)
	if dev.type == 'cuda':
		torch.cuda.init()
		# A first allocation: a preloaded allocator takes what it must here
		# (the unified-memory balloon), before any row measures memory.
		torch.empty(1, device=dev)
		torch.cuda.synchronize(dev)
	runner = Runner(a, wl, dev, deadline)
	emit({'process': {
		'model': a.model, 'batch': a.batch, 'params': wl.params, 'unit': wl.unit,
		'warm_s': warm_s, 'cuda_init_s': time.monotonic() - go_at,
		'torch': torch.__version__, 'cuda': torch.version.cuda,
		'cudnn': torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
		'gpu': torch.cuda.get_device_name(dev) if dev.type == 'cuda' else None,
		'total_memory': runner.total,
		'pcie_counters': runner.pcie is not None and runner.pcie.error is None,
		'pcie_error': runner.pcie.error if runner.pcie is not None else 'no CUDA device',
		'env': {k: os.environ[k] for k in sorted(os.environ)
			if k in common.ENV_KEYS or k.startswith('VMEM_')}}})
	for row in a.rows:
		res = runner.run_row(row)
		runner.results[row['name']] = res
		emit(res)
		if deadline and time.monotonic() > deadline:
			for rest in a.rows[a.rows.index(row) + 1:]:
				emit({'row': rest['name'], 'error': 'skipped: the process deadline passed'})
			break
	return 0


if __name__ == '__main__':
	sys.exit(main())
