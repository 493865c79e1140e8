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


def saved_tensors(args, dev):
	if args.save_on_cpu:
		return torch.autograd.graph.save_on_cpu(pin_memory=dev.type == 'cuda')
	return contextlib.nullcontext()


def checkpoint_sequential(modules, segments, x):
	"""Runs `modules` (a list) in `segments` checkpointed chunks (the last
	chunk is not checkpointed: its activations are needed right away)."""
	from torch.utils.checkpoint import checkpoint
	n = len(modules)
	segments = max(1, min(segments, n))
	size = (n + segments - 1) // segments
	chunks = [modules[i:i + size] for i in range(0, n, size)]

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


def train(args, dev, model, batches, step_loss, items_per_batch, name, extra):
	"""The training loop.  batches: list of (input, target) cycled;
	step_loss(model, x, y) -> loss tensor (forward only).  Prints one line
	per iteration and the summary; returns the exit status."""
	opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
	losses, times = [], []
	if dev.type == 'cuda':
		torch.cuda.reset_peak_memory_stats(dev)
	error = None
	try:
		for it in range(args.iters):
			x, y = batches[it % len(batches)]
			sync(dev)
			t0 = time.perf_counter()
			opt.zero_grad(set_to_none=True)
			with saved_tensors(args, dev):
				with autocast(args, dev):
					loss = step_loss(model, x, y)
			loss.backward()
			opt.step()
			value = loss.item()   # synchronises
			sync(dev)
			dt = time.perf_counter() - t0
			losses.append(value)
			times.append(dt)
			print('iter %d loss %r hex %s ms %.2f' % (it, value, float(value).hex(), dt * 1e3),
			      flush=True)
	except RuntimeError as e:   # torch.cuda.OutOfMemoryError is a RuntimeError
		error = '%s: %s' % (type(e).__name__, str(e).splitlines()[0] if str(e) else '')
		print('%s: error in iteration %d: %s' % (name, len(losses), error), file=sys.stderr, flush=True)

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
