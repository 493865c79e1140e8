#!/usr/bin/env python3
# scripts/torch/bandwidth.py - pinned host <-> device copy bandwidth, each
# direction alone and both at once (two streams), timed with CUDA events.
# This is the link vmem's offloads (D2H) and prefetches (H2D) share; the
# vDNN paper's overlap argument (vDNN §III-C) depends on both directions
# running concurrently on separate copy engines.
#
#   python3 bandwidth.py [--size 256M] [--repeat 10] [--json]
"""Pinned host-device copy bandwidth, H2D, D2H and both at once."""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402  (PcieCounters: NVML's PCIe byte counters)

import torch  # noqa: E402


def parse_size(text):
	scale = {'K': 1 << 10, 'M': 1 << 20, 'G': 1 << 30}
	t = text.strip().upper().rstrip('B').rstrip('I')
	try:
		if t and t[-1] in scale:
			return int(float(t[:-1]) * scale[t[-1]])
		return int(t)
	except ValueError:
		raise argparse.ArgumentTypeError('%r is not a size (e.g. 256M)' % text)


def main():
	p = argparse.ArgumentParser(description=__doc__)
	p.add_argument('--size', type=parse_size, default=256 << 20, help='bytes per copy (default 256M)')
	p.add_argument('--repeat', type=int, default=10, help='copies per measurement (default 10)')
	p.add_argument('--json', action='store_true', help='print a JSON summary as the last line')
	p.add_argument('--ready-wait', action='store_true',
		       help='after importing torch, wait for "go" on standard input before touching '
			    'the GPU (scripts/gpu-compare starts it ahead of its turn)')
	a = p.parse_args()
	if a.ready_wait and not sys.stdin.readline().startswith('go'):
		print('bandwidth: not started (no "go" on standard input)', file=sys.stderr)
		return 3
	if not torch.cuda.is_available():
		sys.exit('bandwidth: error: CUDA is not available (torch %s)' % torch.__version__)
	n = a.size
	dev = torch.device('cuda')
	h_src = torch.empty(n, dtype=torch.uint8, pin_memory=True).fill_(1)
	h_dst = torch.empty(n, dtype=torch.uint8, pin_memory=True)
	d_src = torch.ones(n, dtype=torch.uint8, device=dev)
	d_dst = torch.empty(n, dtype=torch.uint8, device=dev)
	page = torch.empty(n, dtype=torch.uint8).fill_(1)
	s_h2d, s_d2h = torch.cuda.Stream(), torch.cuda.Stream()

	def timed(copies):
		"""copies: list of (stream, fn).  Returns seconds from a common start
		to each stream's end, and to the end of all."""
		torch.cuda.synchronize()
		start = torch.cuda.Event(enable_timing=True)
		start.record()
		ends = []
		for stream, fn in copies:
			stream.wait_event(start)
			with torch.cuda.stream(stream):
				for _ in range(a.repeat):
					fn()
				e = torch.cuda.Event(enable_timing=True)
				e.record(stream)
				ends.append(e)
		torch.cuda.synchronize()
		secs = [start.elapsed_time(e) / 1e3 for e in ends]
		return secs, max(secs)

	def h2d():
		d_dst.copy_(h_src, non_blocking=True)

	def d2h():
		h_dst.copy_(d_src, non_blocking=True)

	def h2d_pageable():
		d_dst.copy_(page, non_blocking=False)

	for fn, s in ((h2d, s_h2d), (d2h, s_d2h)):
		timed([(s, fn)])   # warm-up
	gb = n * a.repeat / 1e9
	res = {'size': n, 'repeat': a.repeat, 'gpu': torch.cuda.get_device_name(dev),
	       'torch': torch.__version__, 'cuda': torch.version.cuda}
	# NVML's PCIe byte counters around the copies that are alone on the
	# link: how many counted bytes per byte copied (what gpu-compare's
	# "PCIe (NVML)" columns mean), or why there are none.
	pcie = common.PcieCounters(dev)
	c0 = pcie.read()
	(t,), _ = timed([(s_h2d, h2d)])
	c1 = pcie.read()
	res['h2d_GBps'] = gb / t
	(t,), _ = timed([(s_d2h, d2h)])
	c2 = pcie.read()
	res['d2h_GBps'] = gb / t
	dh, dd = common.PcieCounters.delta(c0, c1), common.PcieCounters.delta(c1, c2)
	res['nvml'] = {'error': pcie.error} if dh is None or dd is None else {
		'h2d_copied': n * a.repeat, 'h2d_rx': dh[1], 'h2d_tx': dh[0],
		'd2h_copied': n * a.repeat, 'd2h_tx': dd[0], 'd2h_rx': dd[1]}
	(th, td), tall = timed([(s_h2d, h2d), (s_d2h, d2h)])
	res['both_h2d_GBps'] = gb / th
	res['both_d2h_GBps'] = gb / td
	res['both_total_GBps'] = 2 * gb / tall
	(t,), _ = timed([(s_h2d, h2d_pageable)])
	res['h2d_pageable_GBps'] = gb / t
	if not torch.equal(h_dst[:4096].cpu(), torch.ones(4096, dtype=torch.uint8)):
		sys.exit('bandwidth: error: D2H copy did not arrive')
	print('pinned H2D alone        %7.2f GB/s' % res['h2d_GBps'])
	print('pinned D2H alone        %7.2f GB/s' % res['d2h_GBps'])
	print('both at once: H2D %7.2f GB/s, D2H %7.2f GB/s, total %7.2f GB/s' % (
		res['both_h2d_GBps'], res['both_d2h_GBps'], res['both_total_GBps']))
	print('pageable H2D (reference) %6.2f GB/s' % res['h2d_pageable_GBps'])
	print('(%d copies of %.0f MiB each; GB = 1e9 bytes)' % (a.repeat, n / 2**20))
	nv = res['nvml']
	if 'error' in nv:
		print('NVML PCIe counters: %s' % nv['error'])
	else:
		print('NVML PCIe counters: H2D copy of %d bytes counted RX %d (x%.3f); D2H copy of %d '
		      'bytes counted TX %d (x%.3f)' % (nv['h2d_copied'], nv['h2d_rx'],
						       nv['h2d_rx'] / nv['h2d_copied'], nv['d2h_copied'],
						       nv['d2h_tx'], nv['d2h_tx'] / nv['d2h_copied']))
	if a.json:
		print(json.dumps(res, sort_keys=True))
	return 0


if __name__ == '__main__':
	sys.exit(main())
