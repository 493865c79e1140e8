#!/usr/bin/env python3
# scripts/torch/vmm_cost.py - the cost of CUDA virtual memory management
# per physical chunk, measured through ctypes on libcuda.so.1 (no torch).
#
# vmem offloads a tensor by unmapping its chunks and prefetches it by
# mapping chunks back at the same address (DESIGN.md point 1; the
# out-of-core paper's virtual addressing), so cuMemMap + cuMemSetAccess and
# cuMemUnmap sit on its hot path.  This measures, per chunk size: create,
# map, set access, unmap, release, and a steady remap cycle
# (map + access + unmap of chunks that already exist, as vmem's chunk
# cache does), and the same with one cuMemSetAccess (and, where the driver
# takes it, one cuMemUnmap) over 4 and 16 adjacent chunks, per chunk: what
# batching a fault's pages would save.  Times are host wall time per call.
#
#   python3 vmm_cost.py [--chunks 256] [--sizes 2M,32M] [--lib libcuda.so.1] [--json]
"""cuMemCreate / cuMemMap / cuMemSetAccess / cuMemUnmap / cuMemRelease cost per chunk."""

import argparse
import ctypes
import json
import statistics
import sys
import time

CU_MEM_ALLOCATION_TYPE_PINNED = 1
CU_MEM_LOCATION_TYPE_DEVICE = 1
CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3
CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0


class CUmemLocation(ctypes.Structure):
	_fields_ = [('type', ctypes.c_int), ('id', ctypes.c_int)]


class CUmemAllocFlags(ctypes.Structure):
	_fields_ = [('compressionType', ctypes.c_ubyte), ('gpuDirectRDMACapable', ctypes.c_ubyte),
		    ('usage', ctypes.c_ushort), ('reserved', ctypes.c_ubyte * 4)]


class CUmemAllocationProp(ctypes.Structure):
	# cuda.h CUmemAllocationProp_v1 (CUDA 12 and 13)
	_fields_ = [('type', ctypes.c_int), ('requestedHandleTypes', ctypes.c_int),
		    ('location', CUmemLocation), ('win32HandleMetaData', ctypes.c_void_p),
		    ('allocFlags', CUmemAllocFlags)]


class CUmemAccessDesc(ctypes.Structure):
	_fields_ = [('location', CUmemLocation), ('flags', ctypes.c_int)]


class Driver:
	def __init__(self, path):
		try:
			self.lib = ctypes.CDLL(path)
		except OSError as e:
			sys.exit('vmm_cost: error: cannot load %s: %s' % (path, e))
		u64, sz, vp, ci = ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_int
		P = ctypes.POINTER
		self.sig = {
			'cuInit': [ctypes.c_uint],
			'cuDeviceGet': [P(ci), ci],
			'cuDevicePrimaryCtxRetain': [P(vp), ci],
			'cuCtxSetCurrent': [vp],
			'cuCtxSynchronize': [],
			'cuMemGetAllocationGranularity': [P(sz), P(CUmemAllocationProp), ci],
			'cuMemAddressReserve': [P(u64), sz, sz, u64, ctypes.c_ulonglong],
			'cuMemAddressFree': [u64, sz],
			'cuMemCreate': [P(u64), sz, P(CUmemAllocationProp), ctypes.c_ulonglong],
			'cuMemRelease': [u64],
			'cuMemMap': [u64, sz, sz, u64, ctypes.c_ulonglong],
			'cuMemUnmap': [u64, sz],
			'cuMemSetAccess': [u64, sz, P(CUmemAccessDesc), sz],
			'cuMemsetD8_v2': [u64, ctypes.c_ubyte, sz],
			'cuGetErrorName': [ci, P(ctypes.c_char_p)],
		}
		self.fn = {}
		for name, args in self.sig.items():
			f = getattr(self.lib, name, None)
			if f is None:
				sys.exit('vmm_cost: error: %s has no %s' % (path, name))
			f.argtypes = args
			f.restype = ci
			self.fn[name] = f

	def rc(self, name, *args):
		"""The call's status, 0 or the driver's error name; never exits."""
		rc = self.fn[name](*args)
		if rc == 0:
			return 0
		s = ctypes.c_char_p()
		self.fn['cuGetErrorName'](rc, ctypes.byref(s))
		return '%s (%d)' % (s.value.decode() if s.value else '?', rc)

	def __call__(self, name, *args):
		rc = self.fn[name](*args)
		if rc != 0:
			s = ctypes.c_char_p()
			self.fn['cuGetErrorName'](rc, ctypes.byref(s))
			sys.exit('vmm_cost: error: %s failed: %s (%d)' % (
				name, s.value.decode() if s.value else '?', rc))


def stats(ns):
	ns = sorted(ns)
	def pct(p):
		return ns[min(len(ns) - 1, int(round(p / 100 * (len(ns) - 1))))] / 1e3
	return {'n': len(ns), 'median_us': statistics.median(ns) / 1e3, 'p90_us': pct(90),
		'p99_us': pct(99), 'mean_us': statistics.mean(ns) / 1e3}


def measure(cu, dev, chunk, count):
	prop = CUmemAllocationProp()
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE
	prop.location.id = dev
	desc = CUmemAccessDesc()
	desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE
	desc.location.id = dev
	desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE
	base = ctypes.c_uint64()
	cu('cuMemAddressReserve', ctypes.byref(base), chunk * count, chunk, 0, 0)
	t = {k: [] for k in ('create', 'map', 'set_access', 'unmap', 'release', 'remap_map_access', 'remap_unmap')}
	clock = time.perf_counter_ns
	handles = []
	for i in range(count):
		h = ctypes.c_uint64()
		t0 = clock()
		cu('cuMemCreate', ctypes.byref(h), chunk, ctypes.byref(prop), 0)
		t['create'].append(clock() - t0)
		handles.append(h.value)
	for i, h in enumerate(handles):
		va = base.value + i * chunk
		t0 = clock()
		cu('cuMemMap', va, chunk, 0, h, 0)
		t1 = clock()
		cu('cuMemSetAccess', va, chunk, ctypes.byref(desc), 1)
		t2 = clock()
		t['map'].append(t1 - t0)
		t['set_access'].append(t2 - t1)
	cu('cuMemsetD8_v2', base.value, 0, chunk * count)   # the mappings are usable
	cu('cuCtxSynchronize')
	for i in range(count):
		t0 = clock()
		cu('cuMemUnmap', base.value + i * chunk, chunk)
		t['unmap'].append(clock() - t0)
	# Steady state: chunks exist, only the mapping changes (vmem's
	# offload/prefetch with a chunk cache).
	for rnd in range(2):
		for i, h in enumerate(handles):
			va = base.value + i * chunk
			t0 = clock()
			cu('cuMemMap', va, chunk, 0, h, 0)
			cu('cuMemSetAccess', va, chunk, ctypes.byref(desc), 1)
			t['remap_map_access'].append(clock() - t0)
		cu('cuCtxSynchronize')
		for i in range(count):
			t0 = clock()
			cu('cuMemUnmap', base.value + i * chunk, chunk)
			t['remap_unmap'].append(clock() - t0)
	batched = {}
	for k in (4, 16):
		if count % k:
			continue
		batched[str(k)] = measure_batched(cu, base.value, chunk, handles, desc, k)
	for h in handles:
		t0 = clock()
		cu('cuMemRelease', h)
		t['release'].append(clock() - t0)
	cu('cuMemAddressFree', base.value, chunk * count)
	out = {k: stats(v) for k, v in t.items()}
	out['batched'] = batched
	return out


def measure_batched(cu, base, chunk, handles, desc, k):
	"""Chunks mapped one by one (cuMemMap each) but given access in one
	cuMemSetAccess over k adjacent chunks, then unmapped in one cuMemUnmap
	over the k (if the driver takes a range spanning k mappings; else one by
	one, and the error is reported).  Per chunk, as the other rows."""
	clock = time.perf_counter_ns
	res = {'map_access_per_chunk': [], 'unmap_per_chunk': [], 'unmap_spanning': 'ok'}
	for g in range(0, len(handles), k):
		va = base + g * chunk
		t0 = clock()
		for i in range(k):
			cu('cuMemMap', va + i * chunk, chunk, 0, handles[g + i], 0)
		cu('cuMemSetAccess', va, chunk * k, ctypes.byref(desc), 1)
		res['map_access_per_chunk'].append((clock() - t0) / k)
	cu('cuCtxSynchronize')
	for g in range(0, len(handles), k):
		va = base + g * chunk
		t0 = clock()
		rc = cu.rc('cuMemUnmap', va, chunk * k) if res['unmap_spanning'] == 'ok' else 'skipped'
		if rc != 0:
			if res['unmap_spanning'] == 'ok':
				res['unmap_spanning'] = 'refused: %s' % rc
			t0 = clock()
			for i in range(k):
				cu('cuMemUnmap', va + i * chunk, chunk)
		res['unmap_per_chunk'].append((clock() - t0) / k)
	return {'map_access_per_chunk': stats(res['map_access_per_chunk']),
		'unmap_per_chunk': stats(res['unmap_per_chunk']), 'unmap_spanning': res['unmap_spanning']}


def main():
	p = argparse.ArgumentParser(description=__doc__)
	p.add_argument('--chunks', type=int, default=256, help='chunks per size (default 256)')
	p.add_argument('--sizes', default='2M,32M',
		       help='chunk sizes, comma-separated, rounded up to the granularity (default 2M,32M)')
	p.add_argument('--lib', default='libcuda.so.1', help='driver library (default libcuda.so.1)')
	p.add_argument('--device', type=int, default=0)
	p.add_argument('--json', action='store_true', help='print a JSON summary as the last line')
	a = p.parse_args()
	cu = Driver(a.lib)
	cu('cuInit', 0)
	dev = ctypes.c_int()
	cu('cuDeviceGet', ctypes.byref(dev), a.device)
	ctx = ctypes.c_void_p()
	cu('cuDevicePrimaryCtxRetain', ctypes.byref(ctx), dev)
	cu('cuCtxSetCurrent', ctx)
	prop = CUmemAllocationProp()
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE
	prop.location.id = dev.value
	gran = ctypes.c_size_t()
	cu('cuMemGetAllocationGranularity', ctypes.byref(gran), ctypes.byref(prop),
	   CU_MEM_ALLOC_GRANULARITY_MINIMUM)
	res = {'granularity': gran.value, 'chunks': a.chunks, 'sizes': {}}
	print('granularity %d bytes (%.1f MiB)' % (gran.value, gran.value / 2**20))
	for text in a.sizes.split(','):
		text = text.strip().upper()
		mult = {'K': 1 << 10, 'M': 1 << 20, 'G': 1 << 30}.get(text[-1:], 1)
		try:
			size = int(float(text.rstrip('KMG')) * mult)
		except ValueError:
			sys.exit('vmm_cost: error: --sizes: %r is not a size (e.g. 2M)' % text)
		size = max(gran.value, (size + gran.value - 1) // gran.value * gran.value)
		r = measure(cu, dev.value, size, a.chunks)
		res['sizes'][str(size)] = r
		print('\nchunk %.1f MiB, %d chunks: per call, microseconds' % (size / 2**20, a.chunks))
		print('  %-18s %10s %10s %10s %10s' % ('call', 'median', 'p90', 'p99', 'mean'))
		for k, s in r.items():
			if k == 'batched':
				continue
			print('  %-18s %10.2f %10.2f %10.2f %10.2f' % (k, s['median_us'], s['p90_us'],
								    s['p99_us'], s['mean_us']))
		for k, b in r['batched'].items():
			for row in ('map_access_per_chunk', 'unmap_per_chunk'):
				s = b[row]
				print('  %-18s %10.2f %10.2f %10.2f %10.2f' % (
					'%s x%s' % (row.split('_per')[0], k), s['median_us'], s['p90_us'],
					s['p99_us'], s['mean_us']))
			print('  unmap over %s chunks in one call: %s' % (k, b['unmap_spanning']))
	if a.json:
		print(json.dumps(res, sort_keys=True))
	return 0


if __name__ == '__main__':
	sys.exit(main())
