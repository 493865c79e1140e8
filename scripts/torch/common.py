# scripts/torch/common.py - what the plain PyTorch training scripts share:
# deterministic settings, the training loop with its timing, and the output
# conventions (one line per iteration with the loss in full precision, a
# summary, and with --json one JSON object on the last line of stdout).
#
# Nothing here knows about vmem: the scripts are what a user would run,
# and vmem is put under them with LD_PRELOAD (scripts/vmem-run).
"""Shared training loop and output for the vmem PyTorch validation scripts."""

import os

# cuBLAS is deterministic only with a fixed workspace configuration, which
# must be in the environment before CUDA is initialised.
os.environ.setdefault('CUBLAS_WORKSPACE_CONFIG', ':4096:8')

import argparse  # noqa: E402
import contextlib  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402

# Environment that changes what PyTorch or vmem do; echoed in the summary
# so a log says what it ran under.
ENV_KEYS = ('LD_PRELOAD', 'PYTORCH_CUDA_ALLOC_CONF', 'PYTORCH_NO_CUDA_MEMORY_CACHING',
	    'TORCH_CUDNN_V8_API_DISABLED', 'CUBLAS_WORKSPACE_CONFIG')


def add_common_args(p, batch, iters):
	p.add_argument('--batch', type=int, default=batch, help='mini-batch size (default %(default)s)')
	p.add_argument('--iters', type=int, default=iters, help='training iterations (default %(default)s)')
	p.add_argument('--warmup', type=int, default=1,
		       help='first iterations left out of the throughput (default %(default)s)')
	p.add_argument('--dtype', choices=['float32', 'bf16'], default='float32',
		       help='float32, or bf16 through torch.autocast (default %(default)s)')
	p.add_argument('--seed', type=int, default=0, help='seed of the weights and the data')
	p.add_argument('--lr', type=float, default=0.01, help='SGD learning rate')
	p.add_argument('--momentum', type=float, default=0.9, help='SGD momentum')
	p.add_argument('--checkpoint', action='store_true',
		       help='activation checkpointing (torch.utils.checkpoint, non-reentrant)')
	p.add_argument('--checkpoint-segments', type=int, default=4, metavar='N',
		       help='segments for --checkpoint (default %(default)s)')
	p.add_argument('--save-on-cpu', action='store_true',
		       help='keep saved activations in pinned host memory (torch.autograd.graph.save_on_cpu)')
	p.add_argument('--device', default='cuda', help='cuda (default) or cpu for a smoke test')
	p.add_argument('--nondeterministic', action='store_true',
		       help='leave cuDNN autotuning on and deterministic algorithms off')
	p.add_argument('--json', action='store_true',
		       help='print a JSON summary as the last line of standard output')


def setup(args):
	"""Seeds and deterministic settings; returns the torch.device."""
	if args.checkpoint and args.save_on_cpu:
		sys.exit('%s: error: --checkpoint and --save-on-cpu are alternatives; give one'
			 % os.path.basename(sys.argv[0]))
	if args.iters < 1 or args.batch < 1:
		sys.exit('%s: error: --iters and --batch must be at least 1' % os.path.basename(sys.argv[0]))
	dev = torch.device(args.device)
	if dev.type == 'cuda' and not torch.cuda.is_available():
		sys.exit('%s: error: CUDA is not available (torch %s); run on a GPU machine or '
			 'pass --device cpu' % (os.path.basename(sys.argv[0]), torch.__version__))
	torch.manual_seed(args.seed)
	if not args.nondeterministic:
		torch.backends.cudnn.deterministic = True
		torch.backends.cudnn.benchmark = False
		# warn_only: an op without a deterministic implementation warns
		# instead of failing; two runs then may differ, and the log says why.
		torch.use_deterministic_algorithms(True, warn_only=True)
	return dev


def autocast(args, dev):
	if args.dtype == 'bf16':
		return torch.autocast(device_type=dev.type, dtype=torch.bfloat16)
	return contextlib.nullcontext()


class TransferCount:
	"""Bytes save_on_cpu moves: packed (device to host) and unpacked (host
	to device).  The hooks see every saved tensor, so this is exact, not
	sampled."""

	def __init__(self):
		self.d2h = 0
		self.h2d = 0
		self.tensors = 0

	def take(self):
		"""(d2h, h2d) since the last take."""
		out = (self.d2h, self.h2d)
		self.d2h = self.h2d = 0
		return out


def nbytes(t):
	return t.numel() * t.element_size()


def counted_save_on_cpu(pin_memory, count):
	"""torch.autograd.graph.save_on_cpu with its pack and unpack hooks
	wrapped to add the bytes they copy to `count` (a TransferCount)."""
	ctx = torch.autograd.graph.save_on_cpu(pin_memory=pin_memory)
	pack, unpack = ctx.pack_hook, ctx.unpack_hook

	def pack_counted(t):
		if t.device.type != 'cpu':
			count.d2h += nbytes(t)
			count.tensors += 1
		return pack(t)

	def unpack_counted(packed):
		device, t = packed
		if getattr(device, 'type', 'cpu') != 'cpu':
			count.h2d += nbytes(t)
		return unpack(packed)
	ctx.pack_hook, ctx.unpack_hook = pack_counted, unpack_counted
	return ctx


def saved_tensors(args, dev, count=None):
	if args.save_on_cpu:
		if count is not None:
			return counted_save_on_cpu(dev.type == 'cuda', count)
		return torch.autograd.graph.save_on_cpu(pin_memory=dev.type == 'cuda')
	return contextlib.nullcontext()


def starts_in_place(m):
	"""True when the first thing module `m` does is modify its input in
	place: a module with inplace=True (nn.ReLU(inplace=True), torchvision's
	default) or a Sequential whose first module does."""
	if getattr(m, 'inplace', False):
		return True
	if type(m).__name__ == 'Sequential':
		first = next(iter(m.children()), None)
		return first is not None and starts_in_place(first)
	return False


def safe_chunks(modules, segments):
	"""`modules` split into about `segments` consecutive chunks, none of
	which starts with a module that works in place.  A checkpointed chunk
	saves its input for the recomputation (with its version counter); an
	in-place first module changes that input, and backward fails with "one
	of the variables needed for gradient computation has been modified by
	an inplace operation" -- what torchvision's VGG-16 and ResNet-50 did on
	the GPU with the plain split, whose chunks began with
	ReLU(inplace=True).  Such a module moves to the end of the chunk before
	it, where it modifies a tensor of its own chunk, as in the unsplit
	model."""
	n = len(modules)
	if n == 0:
		return []
	segments = max(1, min(segments, n))
	size = (n + segments - 1) // segments
	starts = []
	for s in range(size, n, size):
		while s < n and starts_in_place(modules[s]):
			s += 1
		if s < n and (not starts or s > starts[-1]):
			starts.append(s)
	bounds = [0] + starts + [n]
	return [modules[a:b] for a, b in zip(bounds, bounds[1:])]


def checkpoint_sequential(modules, segments, x):
	"""Runs `modules` (a list) in about `segments` checkpointed chunks split
	at safe points (safe_chunks); the last chunk is not checkpointed: its
	activations are needed right away."""
	from torch.utils.checkpoint import checkpoint
	chunks = safe_chunks(modules, segments)

	def run(chunk):
		def f(t):
			for m in chunk:
				t = m(t)
			return t
		return f
	for i, chunk in enumerate(chunks):
		if i < len(chunks) - 1:
			x = checkpoint(run(chunk), x, use_reentrant=False)
		else:
			x = run(chunk)(x)
	return x


def sync(dev):
	if dev.type == 'cuda':
		torch.cuda.synchronize(dev)


class PcieCounters:
	"""Bytes the GPU sent (TX, device to host) and received (RX, host to
	device) over PCIe, from NVML's field counters
	NVML_FI_DEV_PCIE_COUNT_TX_BYTES (197) and _RX_BYTES (198), read through
	ctypes from the driver's libnvidia-ml.so.1 (no Python package needed).
	They count every transfer of the device, whoever makes it -- also the
	page migrations of unified memory, which no API of the process reports
	-- plus protocol overhead.  `error` says why there are none (no NVML, a
	driver or GPU without these fields): read() then returns None."""

	FIELD_TX, FIELD_RX = 197, 198

	def __init__(self, dev=None):
		import ctypes
		self.ct = ctypes
		self.error = None
		self.lib = None
		self.handle = None
		try:
			class Value(ctypes.Union):
				_fields_ = [('dVal', ctypes.c_double), ('uiVal', ctypes.c_uint),
					    ('ulVal', ctypes.c_ulong), ('ullVal', ctypes.c_ulonglong),
					    ('sllVal', ctypes.c_longlong), ('siVal', ctypes.c_int),
					    ('usVal', ctypes.c_ushort)]

			class Field(ctypes.Structure):
				_fields_ = [('fieldId', ctypes.c_uint), ('scopeId', ctypes.c_uint),
					    ('timestamp', ctypes.c_longlong), ('latencyUsec', ctypes.c_longlong),
					    ('valueType', ctypes.c_int), ('nvmlReturn', ctypes.c_int),
					    ('value', Value)]
			self.Field = Field
			lib = ctypes.CDLL('libnvidia-ml.so.1')
			if lib.nvmlInit_v2() != 0:
				raise OSError('nvmlInit_v2 failed')
			handle = ctypes.c_void_p()
			rc = -1
			if dev is not None and dev.type == 'cuda':
				p = torch.cuda.get_device_properties(dev)
				if hasattr(p, 'pci_bus_id') and hasattr(p, 'pci_device_id'):
					bus = b'%08x:%02x:%02x.0' % (getattr(p, 'pci_domain_id', 0), p.pci_bus_id,
								      p.pci_device_id)
					rc = lib.nvmlDeviceGetHandleByPciBusId_v2(bus, ctypes.byref(handle))
			if rc != 0:
				rc = lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(handle))
			if rc != 0:
				raise OSError('no NVML handle for the device (NVML error %d)' % rc)
			self.lib, self.handle = lib, handle
			if self.read() is None and self.error is None:
				self.error = 'NVML returned no PCIe byte counters'
		except (OSError, AttributeError, RuntimeError) as e:
			self.error = 'NVML PCIe counters unavailable: %s' % e
			self.lib = None

	def read(self):
		"""(tx, rx, wrap) or None."""
		if self.lib is None:
			return None
		vals = (self.Field * 2)()
		vals[0].fieldId, vals[1].fieldId = self.FIELD_TX, self.FIELD_RX
		rc = self.lib.nvmlDeviceGetFieldValues(self.handle, 2, vals)
		if rc != 0 or vals[0].nvmlReturn != 0 or vals[1].nvmlReturn != 0:
			self.error = ('NVML PCIe byte counters not supported here (nvmlDeviceGetFieldValues '
				      '%d, fields %d/%d)' % (rc, vals[0].nvmlReturn, vals[1].nvmlReturn))
			self.lib = None
			return None
		out = []
		wrap = 1 << 64
		for v in vals:
			if v.valueType == 1:
				out.append(v.value.uiVal)
				wrap = 1 << 32
			elif v.valueType == 0:
				out.append(int(v.value.dVal))
			elif v.valueType == 4:
				out.append(v.value.sllVal)
			else:
				out.append(v.value.ullVal)
		return out[0], out[1], wrap

	@staticmethod
	def delta(a, b):
		"""(tx, rx) bytes between two read()s, or None."""
		if a is None or b is None:
			return None
		w = a[2]
		return (b[0] - a[0]) % w, (b[1] - a[1]) % w


def run_iterations(args, dev, model, batches, step_loss, deadline=None, pcie=None,
		   log=print, name='train'):
	"""The training loop shared by the scripts.  args: iters, warmup, lr,
	momentum, dtype, save_on_cpu.  batches: list of (input, target)
	cycled; step_loss(model, x, y) -> loss tensor (forward only).
	deadline: a time.monotonic() after which no further iteration starts
	once one timed iteration is done.  Returns a dict: losses, iter_ms,
	per-iteration bytes save_on_cpu moved (saved_d2h, saved_h2d), PCIe
	counter deltas (pcie_tx, pcie_rx: None when unavailable), device memory
	in use after each iteration (used: cudaMemGetInfo), error, cut_short."""
	opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
	out = {'losses': [], 'iter_ms': [], 'saved_d2h': [], 'saved_h2d': [], 'pcie_tx': [],
	       'pcie_rx': [], 'used': [], 'error': None, 'cut_short': False}
	count = TransferCount()
	try:
		for it in range(args.iters):
			x, y = batches[it % len(batches)]
			sync(dev)
			before = pcie.read() if pcie else None
			t0 = time.perf_counter()
			opt.zero_grad(set_to_none=True)
			with saved_tensors(args, dev, count):
				with autocast(args, dev):
					loss = step_loss(model, x, y)
			loss.backward()
			opt.step()
			value = loss.item()   # synchronises
			sync(dev)
			dt = time.perf_counter() - t0
			d = PcieCounters.delta(before, pcie.read()) if pcie else None
			d2h, h2d = count.take()
			out['losses'].append(value)
			out['iter_ms'].append(dt * 1e3)
			out['saved_d2h'].append(d2h)
			out['saved_h2d'].append(h2d)
			out['pcie_tx'].append(d[0] if d else None)
			out['pcie_rx'].append(d[1] if d else None)
			if dev.type == 'cuda':
				free, total = torch.cuda.mem_get_info(dev)
				out['used'].append(total - free)
			if log:
				log('iter %d loss %r hex %s ms %.2f' % (it, value, float(value).hex(), dt * 1e3))
			del loss
			if deadline is not None and len(out['iter_ms']) > args.warmup and \
			   it + 1 < args.iters and time.monotonic() > deadline:
				out['cut_short'] = True
				break
	except Exception as e:   # torch.cuda.OutOfMemoryError is a RuntimeError
		msg = str(e).splitlines()[0] if str(e) else ''
		out['error'] = '%s: %s' % (type(e).__name__, msg[:400])
		print('%s: error in iteration %d: %s' % (name, len(out['losses']), out['error']),
		      file=sys.stderr, flush=True)
	del opt
	return out


def train(args, dev, model, batches, step_loss, items_per_batch, name, extra):
	"""The training loop of the single-run scripts.  batches: list of
	(input, target) cycled; step_loss(model, x, y) -> loss tensor (forward
	only).  Prints one line per iteration and the summary; returns the exit
	status."""
	if dev.type == 'cuda':
		torch.cuda.reset_peak_memory_stats(dev)
	res = run_iterations(args, dev, model, batches, step_loss,
			     log=lambda line: print(line, flush=True), name=name)
	losses, error = res['losses'], res['error']
	times = [t / 1e3 for t in res['iter_ms']]

	timed = times[args.warmup:] if len(times) > args.warmup else times
	ips = (items_per_batch * len(timed) / sum(timed)) if timed and sum(timed) > 0 else 0.0
	with torch.no_grad():
		checksum = float(sum(p.detach().double().sum() for p in model.parameters())) if error is None else None
	summary = {
		'script': name, 'device': args.device, 'dtype': args.dtype, 'batch': args.batch,
		'iters': args.iters, 'warmup': args.warmup, 'seed': args.seed,
		'mode': 'checkpoint' if args.checkpoint else 'save_on_cpu' if args.save_on_cpu else 'plain',
		'deterministic': not args.nondeterministic,
		'losses': losses, 'loss_hex': [float(v).hex() for v in losses],
		'iter_ms': [t * 1e3 for t in times],
		'items_per_s': ips,
		'checksum': checksum, 'checksum_hex': None if checksum is None else float(checksum).hex(),
		'torch': torch.__version__, 'cuda': torch.version.cuda,
		'cudnn': torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
		'env': {k: os.environ[k] for k in sorted(os.environ)
			if k in ENV_KEYS or k.startswith('VMEM_')},
		'error': error,
		# save_on_cpu only: bytes its hooks copied, per iteration.
		'saved_d2h': res['saved_d2h'], 'saved_h2d': res['saved_h2d'],
	}
	summary.update(extra)
	if dev.type == 'cuda':
		summary['gpu'] = torch.cuda.get_device_name(dev)
		summary['max_memory_allocated'] = torch.cuda.max_memory_allocated(dev)
		summary['max_memory_reserved'] = torch.cuda.max_memory_reserved(dev)
		free, total = torch.cuda.mem_get_info(dev)
		summary['mem_get_info'] = [free, total]
	print('%s: %s %s batch %d: %.1f %s/s over iterations %d..%d' % (
		name, extra.get('model', ''), args.dtype, args.batch, ips, extra.get('unit', 'items'),
		min(args.warmup, len(times) - 1) if times else 0, len(times) - 1))
	if dev.type == 'cuda':
		print('max_memory_allocated %d (%.1f MiB), max_memory_reserved %d (%.1f MiB)' % (
			summary['max_memory_allocated'], summary['max_memory_allocated'] / 2**20,
			summary['max_memory_reserved'], summary['max_memory_reserved'] / 2**20))
	if checksum is not None:
		print('checksum %r hex %s' % (checksum, float(checksum).hex()))
	if args.json:
		print(json.dumps(summary, sort_keys=True), flush=True)
	return 0 if error is None else 1


def parser(description):
	return argparse.ArgumentParser(description=description)
