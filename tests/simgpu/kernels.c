/* tests/simgpu/kernels.c - host implementations of the kernels the
 * simulator can launch, by extern "C" name.
 *
 * The simulated GPU cannot run PTX.  minitrain's kernels.cu (and the
 * tests) name their kernels; cudaLibraryGetKernel / cuLibraryGetKernel
 * look the name up here and hand out a pointer into this table as the
 * kernel handle.  Parameter sizes must match the CUDA prototypes exactly:
 * vmem reads the parameter buffer layout through cudaFuncGetParamInfo to
 * find the device pointers a launch touches.
 *
 * Each run function first declares every range it reads or writes
 * (simgpu_access: the race checker judges them when the launch is
 * submitted), exactly as large as the kernel touches, so neighbouring
 * tensors are not confused; in dry-run mode it then only checks those
 * ranges (simgpu_check), so stray pointers are still caught without
 * computing.  The cost functions count FLOPs and bytes moved for the
 * roofline model in simgpu_op_seconds.
 */
#include <math.h>
#include <string.h>

#include "core.h"

#define ARG(type, i) (*(type *)args[i])

/* Declares an access; in dry-run also checks the range (nothing else
 * would touch it). */
static void acc(const void *p, size_t n, unsigned mode)
{
	simgpu_access(p, n, mode);
	if (simgpu_dryrun())
		simgpu_check(p, n, false);
}

/* ---- mt_sgd_momentum(float *w, float *v, const float *dw, float lr,
 *                      float momentum, float weight_decay,
 *                      unsigned long long n) */
static const uint16_t sgd_sizes[] = { 8, 8, 8, 4, 4, 4, 8 };

static void sgd_run(void **args, unsigned threads)
{
	float *w = ARG(float *, 0), *v = ARG(float *, 1);
	const float *dw = ARG(const float *, 2);
	float lr = ARG(float, 3), mom = ARG(float, 4), wd = ARG(float, 5);
	unsigned long long n = ARG(unsigned long long, 6), i;

	(void)threads;
	acc(w, n * sizeof(float), SIMGPU_ACC_RW);
	acc(v, n * sizeof(float), SIMGPU_ACC_RW);
	acc(dw, n * sizeof(float), SIMGPU_ACC_R);
	if (simgpu_dryrun())
		return;
	for (i = 0; i < n; i++) {
		v[i] = mom * v[i] + dw[i] + wd * w[i];
		w[i] = w[i] - lr * v[i];
	}
}

static void sgd_cost(void **args, double *flops, double *bytes)
{
	double n = (double)ARG(unsigned long long, 6);

	*flops = 6.0 * n;
	*bytes = 5.0 * 4.0 * n;
}

/* ---- mt_xent_grad(const float *prob, const int *labels, float *dlogits,
 *                   float *sample_loss, int batch, int classes,
 *                   float scale) */
static const uint16_t xent_sizes[] = { 8, 8, 8, 8, 4, 4, 4 };

static void xent_run(void **args, unsigned threads)
{
	const float *prob = ARG(const float *, 0);
	const int *labels = ARG(const int *, 1);
	float *dlogits = ARG(float *, 2), *loss = ARG(float *, 3);
	int batch = ARG(int, 4), classes = ARG(int, 5);
	float scale = ARG(float, 6);
	size_t b, c, nc;

	(void)threads;
	if (batch <= 0 || classes <= 0)
		return;
	nc = (size_t)batch * (size_t)classes;
	acc(prob, nc * sizeof(float), SIMGPU_ACC_R);
	acc(labels, (size_t)batch * sizeof(int), SIMGPU_ACC_R);
	acc(dlogits, nc * sizeof(float), SIMGPU_ACC_W);
	acc(loss, (size_t)batch * sizeof(float), SIMGPU_ACC_W);
	if (simgpu_dryrun())
		return;
	for (b = 0; b < (size_t)batch; b++) {
		int label = labels[b];
		const float *pr = prob + b * (size_t)classes;
		float *dl = dlogits + b * (size_t)classes;
		float p;

		for (c = 0; c < (size_t)classes; c++)
			dl[c] = (pr[c] - ((int)c == label ? 1.0f : 0.0f)) * scale;
		/* an out-of-range label reads nothing: its loss is that of
		 * probability 0 */
		p = label >= 0 && label < classes ? pr[label] : 0.0f;
		loss[b] = -logf(fmaxf(p, 1e-12f));
	}
}

static void xent_cost(void **args, double *flops, double *bytes)
{
	double nb = (double)ARG(int, 4), nc = nb * (double)ARG(int, 5);

	*flops = 2.0 * nc + 20.0 * nb;
	*bytes = 4.0 * (2.0 * nc + 2.0 * nb);
}

/* ---- mt_channel_copy / mt_channel_slice(float *dst, const float *src,
 *      int n, int c_a, int c_b, int c_off, int hw, int accumulate)
 * copy:  dst[(i*c_dst + c_off + c)*hw + p] (=|+=) src[(i*c_src + c)*hw + p]
 *        for c < c_src (parameters: n, c_src, c_dst, c_off)
 * slice: dst[(i*c_dst + c)*hw + p] (=|+=) src[(i*c_src + c_off + c)*hw + p]
 *        for c < c_dst (parameters: n, c_dst, c_src, c_off) */
static const uint16_t chan_sizes[] = { 8, 8, 4, 4, 4, 4, 4, 4 };

/* Moves `nimg` blocks of `len` floats: block i goes from
 * src + i*sstride to dst + i*dstride. */
static void chan_move(float *dst, size_t dstride, const float *src,
		      size_t sstride, size_t nimg, size_t len, int acc_mode)
{
	size_t i, k;

	for (i = 0; i < nimg; i++) {
		acc(dst + i * dstride, len * sizeof(float),
		    acc_mode ? SIMGPU_ACC_RW : SIMGPU_ACC_W);
		acc(src + i * sstride, len * sizeof(float), SIMGPU_ACC_R);
	}
	if (simgpu_dryrun())
		return;
	for (i = 0; i < nimg; i++) {
		float *d = dst + i * dstride;
		const float *s = src + i * sstride;

		if (acc_mode) {
			for (k = 0; k < len; k++)
				d[k] += s[k];
		} else {
			memmove(d, s, len * sizeof(float));
		}
	}
}

static bool chan_dims(void **args, size_t *n, size_t *ca, size_t *cb,
		      size_t *off, size_t *hw)
{
	int v[5], i;

	for (i = 0; i < 5; i++) {
		v[i] = ARG(int, 2 + i);
		if (v[i] < 0)
			return false;
	}
	*n = (size_t)v[0];
	*ca = (size_t)v[1];
	*cb = (size_t)v[2];
	*off = (size_t)v[3];
	*hw = (size_t)v[4];
	return true;
}

static void copy_run(void **args, unsigned threads)
{
	size_t n, c_src, c_dst, c_off, hw;

	(void)threads;
	if (!chan_dims(args, &n, &c_src, &c_dst, &c_off, &hw))
		return;
	chan_move(ARG(float *, 0) + c_off * hw, c_dst * hw,
		  ARG(const float *, 1), c_src * hw, n, c_src * hw,
		  ARG(int, 7));
}

static void slice_run(void **args, unsigned threads)
{
	size_t n, c_dst, c_src, c_off, hw;

	(void)threads;
	if (!chan_dims(args, &n, &c_dst, &c_src, &c_off, &hw))
		return;
	chan_move(ARG(float *, 0), c_dst * hw,
		  ARG(const float *, 1) + c_off * hw, c_src * hw, n,
		  c_dst * hw, ARG(int, 7));
}

/* both move n * c_a * hw floats (c_a: the channels copied) */
static void chan_cost(void **args, double *flops, double *bytes)
{
	double moved = (double)ARG(int, 2) * ARG(int, 3) * ARG(int, 6);
	int acc = ARG(int, 7);

	*flops = acc ? moved : 0.0;
	*bytes = 4.0 * moved * (acc ? 3.0 : 2.0);
}

/* ---- mt_fill(float *p, float value, unsigned long long n) */
static const uint16_t fill_sizes[] = { 8, 4, 8 };

static void fill_run(void **args, unsigned threads)
{
	float *p = ARG(float *, 0), value = ARG(float, 1);
	unsigned long long n = ARG(unsigned long long, 2), i;

	(void)threads;
	acc(p, n * sizeof(float), SIMGPU_ACC_W);
	if (simgpu_dryrun())
		return;
	for (i = 0; i < n; i++)
		p[i] = value;
}

static void fill_cost(void **args, double *flops, double *bytes)
{
	*flops = 0.0;
	*bytes = 4.0 * (double)ARG(unsigned long long, 2);
}

/* ---- mt_probe(float *a, unsigned long long x, float *b, int y, double z,
 *               const void *c): a parameter-scanning test kernel; c is
 * never dereferenced. */
static const uint16_t probe_sizes[] = { 8, 8, 8, 4, 8, 8 };

static void probe_run(void **args, unsigned threads)
{
	float *a = ARG(float *, 0), *b = ARG(float *, 2);

	(void)threads;
	acc(a, sizeof(float), SIMGPU_ACC_W);
	acc(b, sizeof(float), SIMGPU_ACC_W);
	if (simgpu_dryrun())
		return;
	a[0] = (float)ARG(int, 3);
	b[0] = (float)ARG(double, 4);
}

static void probe_cost(void **args, double *flops, double *bytes)
{
	(void)args;
	*flops = 0.0;
	*bytes = 8.0;
}

/* ---- mt_list_fill(struct { float *p[48]; } list, int n,
 *                   unsigned long long count, float v): sets the first
 * `count` floats of each of the n arrays to v.  The shape of PyTorch's
 * foreach kernels (_foreach_add_ and friends): one struct parameter
 * carrying many tensor addresses. */
#define LIST_MAX 48
static const uint16_t list_sizes[] = { 8 * LIST_MAX, 4, 8, 4 };

static void list_run(void **args, unsigned threads)
{
	float *const *p = (float *const *)args[0];
	int n = ARG(int, 1);
	unsigned long long count = ARG(unsigned long long, 2), i;
	float v = ARG(float, 3);

	(void)threads;
	for (int k = 0; k < n && k < LIST_MAX; k++) {
		acc(p[k], count * sizeof(float), SIMGPU_ACC_W);
		if (simgpu_dryrun())
			continue;
		for (i = 0; i < count; i++)
			p[k][i] = v;
	}
}

static void list_cost(void **args, double *flops, double *bytes)
{
	*flops = 0.0;
	*bytes = 4.0 * (double)ARG(unsigned long long, 2) * (double)ARG(int, 1);
}

/* ---- Two of PyTorch's kernels, by their mangled names, so that vmem's
 * bounds on their scanned arguments (interpose/kernel_bounds.h) are
 * exercised end to end: the name and layout vmem queries, the refs it
 * bounds, the pool's residency under a budget.
 *
 * at::native::vectorized_elementwise_kernel<4, FillFunctor<float>,
 *     std::array<char *, 1>>(int N, FillFunctor<float> f, array data):
 * data[0][0..N) = f.value. */
#define TORCH_FILL_F "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEE" \
	"St5arrayIPcLm1EEEEviT0_T1_"
static const uint16_t tfill_sizes[] = { 4, 4, 8 };

static void tfill_run(void **args, unsigned threads)
{
	int n = ARG(int, 0);
	float v = ARG(float, 1);
	float *p = ARG(float *, 2);

	(void)threads;
	if (n <= 0)
		return;
	acc(p, (size_t)n * sizeof(float), SIMGPU_ACC_W);
	if (simgpu_dryrun())
		return;
	for (int i = 0; i < n; i++)
		p[i] = v;
}

static void tfill_cost(void **args, double *flops, double *bytes)
{
	*flops = 0.0;
	*bytes = 4.0 * (double)ARG(int, 0);
}

/* at::native::(anonymous)::multi_tensor_apply_kernel<TensorListMetadata<2,
 * false>, BinaryOpListAlphaFunctor<float, 2, 2, 0>, std::plus<float>,
 * float>(meta, functor, plus, alpha): _foreach_add_(a, b, alpha=alpha).
 * Block k of the launch (512 threads each) adds chunk block_to_chunk[k]
 * (65536 elements) of tensor block_to_tensor[k]: a[i] += alpha * b[i]. */
#define TORCH_FOREACH_ADD_F "_ZN2at6native55_GLOBAL__N__d25d856e_22_ForeachBinaryOpList_cu_" \
	"a911ec4325multi_tensor_apply_kernelINS1_18TensorListMetadataILi2ELb0EEENS1_24BinaryOp" \
	"ListAlphaFunctorIfLi2ELi2ELi0EEEJSt4plusIfEfEEENSt9enable_ifIXntsrT0_20use_large_kern" \
	"el_argEvE4typeET_SA_DpT1_"
/* The same kernel as minitrain's kernels.cu names it (--optim foreach):
 * at::native itself, not a file's anonymous namespace. */
#define MT_FOREACH_ADD_F "_ZN2at6native25multi_tensor_apply_kernelINS0_18TensorListMetadata" \
	"ILi2ELb0EEENS0_24BinaryOpListAlphaFunctorIfLi2ELi2ELi0EEEJSt4plusIfEfEEENSt9enable_if" \
	"IXntsrT0_20use_large_kernel_argEvE4typeET_S9_DpT1_"
enum { TFE_M = 64, TFE_BLOCKS = 320, TFE_CHUNK = 65536 };
static const uint16_t tforeach_sizes[] = { 3144, 1, 1, 4 };

static void tforeach_run(void **args, unsigned threads)
{
	const unsigned char *meta = args[0];
	float alpha = ARG(float, 3);
	unsigned blocks = threads / 512;

	for (unsigned k = 0; k < blocks && k < TFE_BLOCKS; k++) {
		unsigned t = meta[2 * TFE_M * 8 + TFE_M * 8 + k];
		int chunk;
		int64_t numel, lo, hi;
		float *a, *b;

		memcpy(&chunk, meta + 2 * TFE_M * 8 + TFE_M * 8 + TFE_BLOCKS + 4 * k, 4);
		memcpy(&a, meta + 8 * (size_t)t, 8);
		memcpy(&b, meta + 8 * (size_t)(TFE_M + t), 8);
		memcpy(&numel, meta + 8 * (size_t)(2 * TFE_M + t), 8);
		lo = (int64_t)chunk * TFE_CHUNK;
		hi = lo + TFE_CHUNK < numel ? lo + TFE_CHUNK : numel;
		if (t >= TFE_M || lo >= hi)
			continue;
		acc(a + lo, (size_t)(hi - lo) * sizeof(float), SIMGPU_ACC_RW);
		acc(b + lo, (size_t)(hi - lo) * sizeof(float), SIMGPU_ACC_R);
		if (simgpu_dryrun())
			continue;
		for (int64_t i = lo; i < hi; i++)
			a[i] += alpha * b[i];
	}
}

static void tforeach_cost(void **args, double *flops, double *bytes)
{
	(void)args;
	*flops = 0.0;
	*bytes = 12.0 * TFE_CHUNK;
}

#define KERNEL(name, sizes, run, cost) \
	{ name, (int)(sizeof(sizes) / sizeof(sizes[0])), sizes, run, cost }

static const simgpu_kernel_t kernels[] = {
	KERNEL("mt_sgd_momentum", sgd_sizes, sgd_run, sgd_cost),
	KERNEL("mt_xent_grad", xent_sizes, xent_run, xent_cost),
	KERNEL("mt_channel_copy", chan_sizes, copy_run, chan_cost),
	KERNEL("mt_channel_slice", chan_sizes, slice_run, chan_cost),
	KERNEL("mt_fill", fill_sizes, fill_run, fill_cost),
	KERNEL("mt_probe", probe_sizes, probe_run, probe_cost),
	KERNEL("mt_list_fill", list_sizes, list_run, list_cost),
	KERNEL(TORCH_FILL_F, tfill_sizes, tfill_run, tfill_cost),
	KERNEL(TORCH_FOREACH_ADD_F, tforeach_sizes, tforeach_run, tforeach_cost),
	KERNEL(MT_FOREACH_ADD_F, tforeach_sizes, tforeach_run, tforeach_cost),
};

#define NKERNELS (sizeof(kernels) / sizeof(kernels[0]))

const simgpu_kernel_t *simgpu_kernel_table(size_t *count)
{
	*count = NKERNELS;
	return kernels;
}

const simgpu_kernel_t *simgpu_kernel_find(const char *name)
{
	size_t i;

	for (i = 0; name && i < NKERNELS; i++) {
		if (!strcmp(kernels[i].name, name))
			return &kernels[i];
	}
	return NULL;
}

/* A handle is the address of the kernel's table entry; anything else
 * (e.g. an nvcc host stub) is not ours. */
const simgpu_kernel_t *simgpu_kernel_from_handle(const void *func)
{
	uintptr_t p = (uintptr_t)func, b = (uintptr_t)kernels;

	if (p < b || p >= b + sizeof(kernels))
		return NULL;
	if ((p - b) % sizeof(kernels[0]))
		return NULL;
	return (const simgpu_kernel_t *)func;
}

simgpu_status_t simgpu_kernel_param(const simgpu_kernel_t *k, size_t i,
				    size_t *offset, size_t *size)
{
	size_t off = 0, j, sz;

	if (!k || i >= (size_t)k->nparams)
		return SIMGPU_EINVAL;
	for (j = 0; j <= i; j++) {
		sz = k->param_size[j];
		/* natural alignment: a parameter of n bytes (n <= 8) sits
		 * at a multiple of n */
		if (sz)
			off = (off + sz - 1) / sz * sz;
		if (j < i)
			off += sz;
	}
	*offset = off;
	*size = k->param_size[i];
	return SIMGPU_OK;
}
