/* tests/unit/simgpu/test_simgpu_kernels.c - the kernel registry: parameter
 * layout (what vmem's argument scanning relies on), handles, the host
 * implementations' arithmetic and dry-run behaviour.
 *
 * kernels.c is compiled in alone; simgpu_dryrun and simgpu_check are faked
 * here (the real ones live in libsimgpu's core). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core.h"

/* ---- fakes of the core ---- */
static bool fake_dryrun;
static const void *checked_p[8];
static size_t checked_n[8];
static int nchecked;

bool simgpu_dryrun(void)
{
	return fake_dryrun;
}

void simgpu_check(const void *p, size_t n, bool host_ok)
{
	(void)host_ok;
	if (nchecked < 8) {
		checked_p[nchecked] = p;
		checked_n[nchecked] = n;
	}
	nchecked++;
}

/* simgpu_access: what each launch declares to the race checker */
static struct {
	const void *p;
	size_t n;
	unsigned mode;
} declared[16];
static int ndeclared;

void simgpu_access(const void *p, size_t n, unsigned mode)
{
	if (ndeclared < 16) {
		declared[ndeclared].p = p;
		declared[ndeclared].n = n;
		declared[ndeclared].mode = mode;
	}
	ndeclared++;
}

static int reset(void **state)
{
	(void)state;
	fake_dryrun = false;
	nchecked = 0;
	ndeclared = 0;
	return 0;
}

static void expect_declared(int i, const void *p, size_t n, unsigned mode)
{
	if (i >= ndeclared || declared[i].p != p || declared[i].n != n ||
	    declared[i].mode != mode)
		fail_msg("access %d: expected %p, %zu bytes, mode %u; got %p, %zu "
			 "bytes, mode %u (%d declared)", i, p, n, mode,
			 i < ndeclared ? declared[i].p : NULL,
			 i < ndeclared ? declared[i].n : 0,
			 i < ndeclared ? declared[i].mode : 0, ndeclared);
}

static const simgpu_kernel_t *kernel(const char *name)
{
	const simgpu_kernel_t *k = simgpu_kernel_find(name);

	if (!k)
		fail_msg("kernel %s is not registered", name);
	return k;
}

static void expect_layout(const char *name, const size_t *off,
			  const size_t *size, int n)
{
	const simgpu_kernel_t *k = kernel(name);
	size_t o, s;
	int i;

	assert_int_equal(k->nparams, n);
	for (i = 0; i < n; i++) {
		assert_int_equal(simgpu_kernel_param(k, (size_t)i, &o, &s),
				 SIMGPU_OK);
		if (o != off[i] || s != size[i])
			fail_msg("%s param %d: expected offset %zu size %zu, got %zu %zu",
				 name, i, off[i], size[i], o, s);
	}
	assert_int_equal(simgpu_kernel_param(k, (size_t)n, &o, &s),
			 SIMGPU_EINVAL);
}

static void test_param_layout_matches_the_cuda_prototypes(void **state)
{
	static const size_t probe_off[] = { 0, 8, 16, 24, 32, 40 };
	static const size_t probe_sz[] = { 8, 8, 8, 4, 8, 8 };
	static const size_t sgd_off[] = { 0, 8, 16, 24, 28, 32, 40 };
	static const size_t sgd_sz[] = { 8, 8, 8, 4, 4, 4, 8 };
	static const size_t xent_off[] = { 0, 8, 16, 24, 32, 36, 40 };
	static const size_t xent_sz[] = { 8, 8, 8, 8, 4, 4, 4 };
	static const size_t chan_off[] = { 0, 8, 16, 20, 24, 28, 32, 36 };
	static const size_t chan_sz[] = { 8, 8, 4, 4, 4, 4, 4, 4 };
	static const size_t fill_off[] = { 0, 8, 16 };
	static const size_t fill_sz[] = { 8, 4, 8 };

	(void)state;
	expect_layout("mt_probe", probe_off, probe_sz, 6);
	expect_layout("mt_sgd_momentum", sgd_off, sgd_sz, 7);
	expect_layout("mt_xent_grad", xent_off, xent_sz, 7);
	expect_layout("mt_channel_copy", chan_off, chan_sz, 8);
	expect_layout("mt_channel_slice", chan_off, chan_sz, 8);
	expect_layout("mt_fill", fill_off, fill_sz, 3);
	/* a foreach-style struct of 48 pointers, then int, u64, float */
	static const size_t list_off[] = { 0, 384, 392, 400 };
	static const size_t list_sz[] = { 384, 4, 8, 4 };
	expect_layout("mt_list_fill", list_off, list_sz, 4);
}

static void test_handles_are_registry_entries_only(void **state)
{
	const simgpu_kernel_t *k = kernel("mt_fill");
	size_t n;
	const simgpu_kernel_t *tab = simgpu_kernel_table(&n);
	int other;

	(void)state;
	assert_int_equal(n, 10);   /* minitrain's 7, two of PyTorch's, minitrain's foreach */
	assert_ptr_equal(simgpu_kernel_from_handle(k), k);
	assert_ptr_equal(simgpu_kernel_from_handle(&tab[n - 1]), &tab[n - 1]);
	assert_null(simgpu_kernel_from_handle(&other));
	assert_null(simgpu_kernel_from_handle((const char *)k + 1));
	assert_null(simgpu_kernel_from_handle(&tab[n]));
	assert_null(simgpu_kernel_find("mt_nonexistent"));
}

static void test_sgd_momentum_updates_velocity_then_weight(void **state)
{
	float w[2] = { 1.0f, -2.0f }, v[2] = { 0.5f, 0.0f }, dw[2] = { 0.25f, 1.0f };
	float *pw = w, *pv = v;
	const float *pdw = dw;
	float lr = 0.1f, mom = 0.9f, wd = 0.01f;
	unsigned long long n = 2;
	void *args[] = { &pw, &pv, &pdw, &lr, &mom, &wd, &n };
	float v0 = 0.9f * 0.5f + 0.25f + 0.01f * 1.0f;
	float v1 = 0.9f * 0.0f + 1.0f + 0.01f * -2.0f;

	(void)state;
	kernel("mt_sgd_momentum")->run(args, 2);
	assert_float_equal(v[0], v0, 1e-7);
	assert_float_equal(v[1], v1, 1e-7);
	assert_float_equal(w[0], 1.0f - 0.1f * v0, 1e-7);
	assert_float_equal(w[1], -2.0f - 0.1f * v1, 1e-7);
}

static void test_xent_grad_gives_scaled_gradient_and_loss(void **state)
{
	float prob[6] = { 0.2f, 0.5f, 0.3f, 0.7f, 0.1f, 0.2f };
	int labels[2] = { 1, 0 };
	float dl[6], loss[2];
	const float *pp = prob;
	const int *pl = labels;
	float *pd = dl, *ploss = loss, scale = 0.5f;
	int batch = 2, classes = 3;
	void *args[] = { &pp, &pl, &pd, &ploss, &batch, &classes, &scale };

	(void)state;
	kernel("mt_xent_grad")->run(args, 2);
	assert_float_equal(dl[0], 0.2f * 0.5f, 1e-7);
	assert_float_equal(dl[1], (0.5f - 1.0f) * 0.5f, 1e-7);
	assert_float_equal(dl[3], (0.7f - 1.0f) * 0.5f, 1e-7);
	assert_float_equal(loss[0], -logf(0.5f), 1e-6);
	assert_float_equal(loss[1], -logf(0.7f), 1e-6);
}

static void test_channel_copy_then_slice_round_trips(void **state)
{
	/* n=2 images, src 2 channels of hw=3, into dst of 5 channels at 1 */
	float src[12], dst[30], back[12];
	float *pd = dst, *pb = back;
	const float *ps = src, *pdc = dst;
	int n = 2, c_src = 2, c_dst = 5, c_off = 1, hw = 3, acc = 0;
	void *cargs[] = { &pd, &ps, &n, &c_src, &c_dst, &c_off, &hw, &acc };
	int c_back = 2, c_from = 5;
	void *sargs[] = { &pb, &pdc, &n, &c_back, &c_from, &c_off, &hw, &acc };
	int i;

	(void)state;
	for (i = 0; i < 12; i++)
		src[i] = (float)i + 1.0f;
	memset(dst, 0, sizeof(dst));
	kernel("mt_channel_copy")->run(cargs, 1);
	/* image 1, channel 0 of src lands at channel 1+0 of image 1 */
	assert_float_equal(dst[(1 * 5 + 1) * 3 + 2], src[(1 * 2 + 0) * 3 + 2], 0);
	assert_float_equal(dst[0], 0.0f, 0);
	kernel("mt_channel_slice")->run(sargs, 1);
	assert_memory_equal(back, src, sizeof(src));
	acc = 1;
	kernel("mt_channel_slice")->run(sargs, 1);
	for (i = 0; i < 12; i++)
		assert_float_equal(back[i], 2.0f * src[i], 0);
}

static void test_probe_writes_y_and_z_and_never_reads_c(void **state)
{
	float a = 0, b = 0, *pa = &a, *pb = &b;
	unsigned long long x = 5;
	int y = -3;
	double z = 6.5;
	const void *c = (const void *)(uintptr_t)0x10;   /* not mapped */
	void *args[] = { &pa, &x, &pb, &y, &z, &c };

	(void)state;
	kernel("mt_probe")->run(args, 1);
	assert_float_equal(a, -3.0f, 0);
	assert_float_equal(b, 6.5f, 0);
}

/* The race checker must see what a kernel touches, byte-exact: a channel
 * copy into a concatenation buffer writes one block per image, leaving
 * the other channels (another layer's output) alone. */
static void test_kernels_declare_exact_reads_and_writes(void **state)
{
	float w[4], v[4], dw[4], src[2 * 2 * 3], dst[2 * 5 * 3];
	float *pw = w, *pv = v, *psrc = src, *pdst = dst;
	const float *pdw = dw;
	float lr = 0.1f, mom = 0.9f, wd = 0.0f;
	unsigned long long n = 4;
	int ni = 2, c_src = 2, c_dst = 5, c_off = 1, hw = 3, accum = 1;
	void *sargs[] = { &pw, &pv, &pdw, &lr, &mom, &wd, &n };
	void *cargs[] = { &pdst, &psrc, &ni, &c_src, &c_dst, &c_off, &hw, &accum };

	(void)state;
	memset(w, 0, sizeof(w)), memset(v, 0, sizeof(v)), memset(dw, 0, sizeof(dw));
	memset(src, 0, sizeof(src)), memset(dst, 0, sizeof(dst));
	kernel("mt_sgd_momentum")->run(sargs, 1);
	assert_int_equal(ndeclared, 3);
	expect_declared(0, w, sizeof(w), SIMGPU_ACC_RW);
	expect_declared(1, v, sizeof(v), SIMGPU_ACC_RW);
	expect_declared(2, dw, sizeof(dw), SIMGPU_ACC_R);

	ndeclared = 0;
	kernel("mt_channel_copy")->run(cargs, 1);
	assert_int_equal(ndeclared, 4);
	/* image i: dst channels 1..2 (read too: accumulate), src image i */
	expect_declared(0, dst + 1 * 3, 2 * 3 * sizeof(float), SIMGPU_ACC_RW);
	expect_declared(1, src, 2 * 3 * sizeof(float), SIMGPU_ACC_R);
	expect_declared(2, dst + (5 + 1) * 3, 2 * 3 * sizeof(float), SIMGPU_ACC_RW);
	expect_declared(3, src + 2 * 3, 2 * 3 * sizeof(float), SIMGPU_ACC_R);
}

static void test_dryrun_checks_ranges_without_writing(void **state)
{
	float buf[4] = { 7, 7, 7, 7 }, *p = buf, v = 1.0f;
	unsigned long long n = 4;
	void *args[] = { &p, &v, &n };
	double flops, bytes;

	(void)state;
	fake_dryrun = true;
	kernel("mt_fill")->run(args, 4);
	assert_float_equal(buf[0], 7.0f, 0);
	assert_int_equal(nchecked, 1);
	assert_ptr_equal(checked_p[0], buf);
	assert_int_equal(checked_n[0], sizeof(buf));
	kernel("mt_fill")->cost(args, &flops, &bytes);
	assert_float_equal(bytes, 16.0, 0);
}

/* PyTorch's kernels under their mangled names: the layouts vmem's bounds
 * read (interpose/kernel_bounds.h), and the foreach add touching only the
 * chunks its blocks name. */
static void test_torch_kernels_keep_pytorchs_layouts(void **state)
{
	static const char fill[] = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11Fill"
				   "FunctorIfEESt5arrayIPcLm1EEEEviT0_T1_";
	const simgpu_kernel_t *f = kernel(fill), *a = NULL;
	size_t n, off, sz;
	const simgpu_kernel_t *tab = simgpu_kernel_table(&n);
	static const size_t fill_off[] = { 0, 4, 8 }, add_off[] = { 0, 3144, 3145, 3148 };
	enum { M = 64, BLOCKS = 320, CHUNK = 65536 };
	static uint64_t meta[3144 / 8];
	static float x[CHUNK + 10], y[CHUNK + 10];
	float alpha = 0.5f, *px = x, *py = y;
	unsigned char fn = 0, plus = 0;
	void *args[] = { meta, &fn, &plus, &alpha };
	int chunk1 = 1;

	(void)state;
	for (size_t i = 0; i < n; i++)
		if (strstr(tab[i].name, "multi_tensor_apply_kernel"))
			a = &tab[i];
	assert_non_null(a);
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(simgpu_kernel_param(f, i, &off, &sz), SIMGPU_OK);
		assert_int_equal(off, fill_off[i]);
	}
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(simgpu_kernel_param(a, i, &off, &sz), SIMGPU_OK);
		if (off != add_off[i])
			fail_msg("foreach add parameter %zu: expected offset %zu, got %zu", i,
				 add_off[i], off);
	}
	/* one tensor of CHUNK + 10 elements; the launch's one block runs its
	 * second chunk only: elements CHUNK .. CHUNK + 9 */
	memset(meta, 0, sizeof(meta));
	meta[0] = (uintptr_t)px, meta[M] = (uintptr_t)py, meta[2 * M] = CHUNK + 10;
	memcpy((unsigned char *)meta + 2 * M * 8 + M * 8 + BLOCKS, &chunk1, 4);
	for (int i = 0; i < CHUNK + 10; i++)
		x[i] = 1.0f, y[i] = 2.0f;
	a->run(args, 512);
	assert_int_equal(ndeclared, 2);
	expect_declared(0, x + CHUNK, 10 * sizeof(float), SIMGPU_ACC_RW);
	expect_declared(1, y + CHUNK, 10 * sizeof(float), SIMGPU_ACC_R);
	assert_float_equal(x[CHUNK - 1], 1.0f, 0);
	assert_float_equal(x[CHUNK], 2.0f, 0);
	assert_float_equal(x[CHUNK + 9], 2.0f, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_param_layout_matches_the_cuda_prototypes, reset),
		cmocka_unit_test_setup(test_handles_are_registry_entries_only, reset),
		cmocka_unit_test_setup(test_sgd_momentum_updates_velocity_then_weight, reset),
		cmocka_unit_test_setup(test_xent_grad_gives_scaled_gradient_and_loss, reset),
		cmocka_unit_test_setup(test_channel_copy_then_slice_round_trips, reset),
		cmocka_unit_test_setup(test_probe_writes_y_and_z_and_never_reads_c, reset),
		cmocka_unit_test_setup(test_kernels_declare_exact_reads_and_writes, reset),
		cmocka_unit_test_setup(test_dryrun_checks_ranges_without_writing, reset),
		cmocka_unit_test_setup(test_torch_kernels_keep_pytorchs_layouts, reset),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
