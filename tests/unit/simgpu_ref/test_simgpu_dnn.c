/* tests/unit/simgpu_ref/test_simgpu_dnn.c - the simulated cuDNN (legacy and
 * backend API) and cuBLAS layers, linked with a fake simgpu core: "device"
 * buffers are host buffers registered here, simgpu_check records faults
 * instead of aborting, and virtual time is summed.  Pins: algorithm table
 * order and workspace growth, workspace writes and BAD_PARAM on an
 * undersized workspace, bit-identical algorithms, backend == legacy, bad
 * backend input rejected, dry-run checks without computing, batch-norm Ex
 * == plain batch norm with its workspace and reserve space written.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cublasLt.h>
#include <cudnn.h>

#include "tests/simgpu/ref.h"
#include "tests/simgpu/simgpu.h"

/* ------------------------------------------------------ fake simgpu core */

#define MAX_BUFS 64
static struct { char *p; size_t n; } bufs[MAX_BUFS];
static bool fake_dry;
static double fake_time;
static int fake_faults, fake_checks;
static const char *fake_op = "";
static char fault_op[64];

void simgpu_init(void) {}
bool simgpu_dryrun(void) { return fake_dry; }
void simgpu_op_begin(const char *op) { fake_op = op; }
void simgpu_op_end(void) {}
bool simgpu_is_device(const void *p, size_t n)
{
	for (int i = 0; i < MAX_BUFS; i++)
		if (bufs[i].p && (const char *)p >= bufs[i].p &&
		    (const char *)p + n <= bufs[i].p + bufs[i].n)
			return true;
	return false;
}
void simgpu_check(const void *p, size_t n, bool host_ok)
{
	(void)host_ok;
	fake_checks++;
	if (!simgpu_is_device(p, n)) {
		fake_faults++;
		snprintf(fault_op, sizeof(fault_op), "%s", fake_op);
	}
}
double simgpu_submit(void *stream, simgpu_engine_t e, double s)
{
	(void)stream, (void)e;
	fake_time += s;
	return fake_time;
}
double simgpu_op_seconds(double flops, double bytes)
{
	return 5e-6 + fmax(flops / 7e12, bytes / 336e9);
}

/* what the op being built declares to the race checker (simgpu_access);
 * the list is kept until the next op begins, so a test reads it after
 * the call */
#define MAX_DECL 64
static struct { const void *p; size_t n; unsigned mode; } decl[MAX_DECL];
static int ndecl;
void simgpu_access(const void *p, size_t n, unsigned mode)
{
	if (ndecl < MAX_DECL)
		decl[ndecl].p = p, decl[ndecl].n = n, decl[ndecl].mode = mode;
	ndecl++;
}
void simgpu_access_discard(void) { ndecl = 0; }
/* capture: a test makes the handle's stream "capturing" with fake_capturing */
static bool fake_capturing;
static int fake_captured;
int simgpu_capture(void *stream, const char *op, simgpu_replay_fn fn, const void *args, size_t size)
{
	(void)stream, (void)op, (void)fn, (void)args, (void)size;
	if (!fake_capturing)
		return 0;
	fake_captured++;
	return 1;
}
bool simgpu_capture_refuse(void *stream, const char *op)
{
	(void)stream, (void)op;
	return fake_capturing;
}

static void *dev_alloc(size_t n)
{
	for (int i = 0; i < MAX_BUFS; i++)
		if (!bufs[i].p) {
			bufs[i].p = malloc(n);
			bufs[i].n = n;
			assert_non_null(bufs[i].p);
			return bufs[i].p;
		}
	fail_msg("fake device: more than %d buffers", MAX_BUFS);
	return NULL;
}

static void dev_free_all(void)
{
	for (int i = 0; i < MAX_BUFS; i++) {
		free(bufs[i].p);
		bufs[i].p = NULL;
	}
}

static uint64_t rng = 1;
static float *dev_rand(size_t n)
{
	float *p = dev_alloc(n * sizeof(float));
	for (size_t i = 0; i < n; i++) {
		rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
		p[i] = (float)((rng >> 40) & 0xffff) / 32768.0f - 1.0f;
	}
	return p;
}

#define CK(call) do { cudnnStatus_t s_ = (call); \
	if (s_ != CUDNN_STATUS_SUCCESS) fail_msg("%s: expected CUDNN_STATUS_SUCCESS, got %s (%d)", \
		#call, cudnnGetErrorString(s_), (int)s_); } while (0)
#define EXPECT_ST(want, call) do { cudnnStatus_t s_ = (call); \
	if (s_ != (want)) fail_msg("%s: expected %s, got %s (%d)", #call, cudnnGetErrorString(want), \
		cudnnGetErrorString(s_), (int)s_); } while (0)

/* -------------------------------------------------------------- fixture */

typedef struct {
	cudnnHandle_t h;
	cudnnTensorDescriptor_t xd, yd;
	cudnnFilterDescriptor_t wd;
	cudnnConvolutionDescriptor_t cd;
	int n, c, hw, k, p;
	size_t xs, ws_, ys;
	float *x, *w, *y;
} conv_fx_t;

static void conv_setup(conv_fx_t *f, int n, int c, int hw, int k)
{
	memset(f, 0, sizeof(*f));
	f->n = n, f->c = c, f->hw = hw, f->k = k;
	CK(cudnnCreate(&f->h));
	CK(cudnnCreateTensorDescriptor(&f->xd));
	CK(cudnnCreateTensorDescriptor(&f->yd));
	CK(cudnnCreateFilterDescriptor(&f->wd));
	CK(cudnnCreateConvolutionDescriptor(&f->cd));
	CK(cudnnSetTensor4dDescriptor(f->xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, hw, hw));
	CK(cudnnSetFilter4dDescriptor(f->wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, k, c, 3, 3));
	CK(cudnnSetConvolution2dDescriptor(f->cd, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
					   CUDNN_DATA_FLOAT));
	int on, oc, oh, ow;
	CK(cudnnGetConvolution2dForwardOutputDim(f->cd, f->xd, f->wd, &on, &oc, &oh, &ow));
	assert_int_equal(on, n);
	assert_int_equal(oc, k);
	assert_int_equal(oh, hw);
	f->p = oh;
	CK(cudnnSetTensor4dDescriptor(f->yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, k, oh, ow));
	f->xs = (size_t)n * c * hw * hw, f->ws_ = (size_t)k * c * 9, f->ys = (size_t)n * k * oh * ow;
	f->x = dev_rand(f->xs), f->w = dev_rand(f->ws_), f->y = dev_rand(f->ys);
	fake_faults = 0, fake_dry = false;
}

static void conv_teardown(conv_fx_t *f)
{
	cudnnDestroyTensorDescriptor(f->xd);
	cudnnDestroyTensorDescriptor(f->yd);
	cudnnDestroyFilterDescriptor(f->wd);
	cudnnDestroyConvolutionDescriptor(f->cd);
	cudnnDestroy(f->h);
	dev_free_all();
}

/* ----------------------------------------------------- legacy algorithms */

static void test_get_v7_lists_fastest_first_and_gemm_workspace_grows_with_n(void **state)
{
	(void)state;
	conv_fx_t f2, f4;
	cudnnConvolutionFwdAlgoPerf_t p2[8], p4[8];
	int r2, r4, max;

	conv_setup(&f2, 2, 16, 16, 32);
	CK(cudnnGetConvolutionForwardAlgorithmMaxCount(f2.h, &max));
	assert_int_equal(max, CUDNN_CONVOLUTION_FWD_ALGO_COUNT);
	CK(cudnnGetConvolutionForwardAlgorithm_v7(f2.h, f2.xd, f2.wd, f2.cd, f2.yd, 8, &r2, p2));
	assert_int_equal(r2, 8);
	int ok = 0;
	for (int i = 0; i < r2; i++) {
		if (p2[i].status != CUDNN_STATUS_SUCCESS)
			continue;
		ok++;
		if (i > 0 && p2[i - 1].status == CUDNN_STATUS_SUCCESS && p2[i].time < p2[i - 1].time)
			fail_msg("perf[%d].time %g < perf[%d].time %g: not fastest first", i, p2[i].time,
				 i - 1, p2[i - 1].time);
		if (i > 0 && p2[i - 1].status != CUDNN_STATUS_SUCCESS)
			fail_msg("supported algorithm %d listed after an unsupported one", p2[i].algo);
	}
	if (ok < 4)
		fail_msg("expected at least 4 supported forward algorithms for a 3x3 conv, got %d", ok);
	conv_teardown(&f2);

	conv_setup(&f4, 4, 16, 16, 32);
	CK(cudnnGetConvolutionForwardAlgorithm_v7(f4.h, f4.xd, f4.wd, f4.cd, f4.yd, 8, &r4, p4));
	size_t ws2[8] = { 0 }, ws4[8] = { 0 };
	for (int i = 0; i < 8; i++) {
		if (p2[i].status == CUDNN_STATUS_SUCCESS)
			ws2[p2[i].algo] = p2[i].memory;
		if (p4[i].status == CUDNN_STATUS_SUCCESS)
			ws4[p4[i].algo] = p4[i].memory;
	}
	assert_int_equal(ws2[CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM], 0);
	if (ws2[CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM] == 0 ||
	    ws2[CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM] != ws4[CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM])
		fail_msg("PRECOMP workspace: expected small and independent of N, got %zu (N=2) and %zu (N=4)",
			 ws2[1], ws4[1]);
	if (ws4[CUDNN_CONVOLUTION_FWD_ALGO_GEMM] != 2 * ws2[CUDNN_CONVOLUTION_FWD_ALGO_GEMM])
		fail_msg("GEMM workspace: expected to double from N=2 to N=4, got %zu and %zu",
			 ws2[CUDNN_CONVOLUTION_FWD_ALGO_GEMM], ws4[CUDNN_CONVOLUTION_FWD_ALGO_GEMM]);
	if (ws4[CUDNN_CONVOLUTION_FWD_ALGO_FFT] <= ws2[CUDNN_CONVOLUTION_FWD_ALGO_FFT])
		fail_msg("FFT workspace: expected to grow with N, got %zu and %zu",
			 ws2[CUDNN_CONVOLUTION_FWD_ALGO_FFT], ws4[CUDNN_CONVOLUTION_FWD_ALGO_FFT]);
	size_t q;
	CK(cudnnGetConvolutionForwardWorkspaceSize(f4.h, f4.xd, f4.wd, f4.cd, f4.yd,
						   CUDNN_CONVOLUTION_FWD_ALGO_GEMM, &q));
	assert_int_equal(q, ws4[CUDNN_CONVOLUTION_FWD_ALGO_GEMM]);
	EXPECT_ST(CUDNN_STATUS_NOT_SUPPORTED,
		  cudnnGetConvolutionForwardWorkspaceSize(f4.h, f4.xd, f4.wd, f4.cd, f4.yd,
							  CUDNN_CONVOLUTION_FWD_ALGO_DIRECT, &q));
	conv_teardown(&f4);
}

static void test_undersized_workspace_is_bad_param(void **state)
{
	(void)state;
	conv_fx_t f;
	const float one = 1, zero = 0;
	size_t need;

	conv_setup(&f, 2, 8, 8, 8);
	CK(cudnnGetConvolutionForwardWorkspaceSize(f.h, f.xd, f.wd, f.cd, f.yd,
						   CUDNN_CONVOLUTION_FWD_ALGO_GEMM, &need));
	void *ws = dev_alloc(need);
	EXPECT_ST(CUDNN_STATUS_BAD_PARAM,
		  cudnnConvolutionForward(f.h, &one, f.xd, f.x, f.wd, f.w, f.cd,
					  CUDNN_CONVOLUTION_FWD_ALGO_GEMM, ws, need - 1, &zero, f.yd, f.y));
	EXPECT_ST(CUDNN_STATUS_BAD_PARAM,
		  cudnnConvolutionForward(f.h, &one, f.xd, f.x, f.wd, f.w, f.cd,
					  CUDNN_CONVOLUTION_FWD_ALGO_GEMM, NULL, need, &zero, f.yd, f.y));
	EXPECT_ST(CUDNN_STATUS_NOT_SUPPORTED,
		  cudnnConvolutionForward(f.h, &one, f.xd, f.x, f.wd, f.w, f.cd,
					  CUDNN_CONVOLUTION_FWD_ALGO_DIRECT, ws, need, &zero, f.yd, f.y));
	CK(cudnnConvolutionForward(f.h, &one, f.xd, f.x, f.wd, f.w, f.cd,
				   CUDNN_CONVOLUTION_FWD_ALGO_GEMM, ws, need, &zero, f.yd, f.y));
	assert_int_equal(fake_faults, 0);
	conv_teardown(&f);
}

static void test_every_algorithm_writes_its_whole_workspace(void **state)
{
	(void)state;
	conv_fx_t f;
	const float one = 1, zero = 0;

	conv_setup(&f, 2, 8, 8, 8);
	for (int a = 0; a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; a++) {
		size_t need;
		if (cudnnGetConvolutionForwardWorkspaceSize(f.h, f.xd, f.wd, f.cd, f.yd,
							    (cudnnConvolutionFwdAlgo_t)a, &need))
			continue;
		unsigned char *ws = dev_alloc(need + 64);
		memset(ws, 0, need + 64);
		CK(cudnnConvolutionForward(f.h, &one, f.xd, f.x, f.wd, f.w, f.cd,
					   (cudnnConvolutionFwdAlgo_t)a, need ? ws : NULL, need + 64,
					   &zero, f.yd, f.y));
		for (size_t i = 0; i < need; i++)
			if (ws[i] == 0)
				fail_msg("algo %d: workspace byte %zu of %zu not written", a, i, need);
		for (size_t i = need; i < need + 64; i++)
			if (ws[i] != 0)
				fail_msg("algo %d: wrote past its %zu-byte workspace at %zu", a, need, i);
	}
	/* a workspace that is not device memory is caught under the op's name */
	size_t need;
	CK(cudnnGetConvolutionForwardWorkspaceSize(f.h, f.xd, f.wd, f.cd, f.yd,
						   CUDNN_CONVOLUTION_FWD_ALGO_GEMM, &need));
	void *host = malloc(need);
	fake_faults = 0;
	CK(cudnnConvolutionForward(f.h, &one, f.xd, f.x, f.wd, f.w, f.cd,
				   CUDNN_CONVOLUTION_FWD_ALGO_GEMM, host, need, &zero, f.yd, f.y));
	if (fake_faults != 1 || strcmp(fault_op, "cudnnConvolutionForward") != 0)
		fail_msg("expected 1 fault in cudnnConvolutionForward, got %d in '%s'", fake_faults, fault_op);
	free(host);
	conv_teardown(&f);
}

static void expect_decl(int i, const void *p, size_t n, unsigned mode)
{
	if (i >= ndecl || decl[i].p != p || decl[i].n != n || decl[i].mode != mode)
		fail_msg("access %d: expected %p, %zu bytes, mode %u; got %p, %zu bytes, mode %u "
			 "(%d declared)", i, p, n, mode, i < ndecl ? decl[i].p : NULL,
			 i < ndecl ? decl[i].n : 0, i < ndecl ? decl[i].mode : 0, ndecl);
}

/* The race checker judges what each call declares: inputs read, the
 * output written (read too when beta != 0), the workspace written; a
 * channel slice of a wider buffer as one range per image. */
static void test_conv_declares_its_reads_and_writes(void **state)
{
	(void)state;
	conv_fx_t f;
	const float one = 1, zero = 0;
	size_t need;

	conv_setup(&f, 2, 8, 8, 8);
	CK(cudnnGetConvolutionForwardWorkspaceSize(f.h, f.xd, f.wd, f.cd, f.yd,
						   CUDNN_CONVOLUTION_FWD_ALGO_GEMM, &need));
	void *ws = dev_alloc(need);
	ndecl = 0;
	CK(cudnnConvolutionForward(f.h, &one, f.xd, f.x, f.wd, f.w, f.cd,
				   CUDNN_CONVOLUTION_FWD_ALGO_GEMM, ws, need, &zero, f.yd, f.y));
	assert_int_equal(ndecl, 4);
	expect_decl(0, f.x, f.xs * sizeof(float), SIMGPU_ACC_R);
	expect_decl(1, f.w, f.ws_ * sizeof(float), SIMGPU_ACC_R);
	expect_decl(2, f.y, f.ys * sizeof(float), SIMGPU_ACC_W);
	expect_decl(3, ws, need, SIMGPU_ACC_W);
	ndecl = 0;
	CK(cudnnConvolutionBackwardFilter(f.h, &one, f.xd, f.x, f.yd, f.y, f.cd,
					  CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, NULL, 0, &one, f.wd,
					  f.w));
	expect_decl(2, f.w, f.ws_ * sizeof(float), SIMGPU_ACC_RW);

	/* y as channels 2..9 of a 12-channel buffer: one range per image */
	cudnnTensorDescriptor_t sd;
	float *wide = dev_alloc((size_t)2 * 12 * 8 * 8 * sizeof(float));
	CK(cudnnCreateTensorDescriptor(&sd));
	CK(cudnnSetTensor4dDescriptorEx(sd, CUDNN_DATA_FLOAT, 2, 8, 8, 8, 12 * 64, 64, 8, 1));
	ndecl = 0;
	CK(cudnnConvolutionForward(f.h, &one, f.xd, f.x, f.wd, f.w, f.cd,
				   CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0, &zero, sd,
				   wide + 2 * 64));
	assert_int_equal(ndecl, 4);
	expect_decl(2, wide + 2 * 64, 8 * 64 * sizeof(float), SIMGPU_ACC_W);
	expect_decl(3, wide + 12 * 64 + 2 * 64, 8 * 64 * sizeof(float), SIMGPU_ACC_W);
	cudnnDestroyTensorDescriptor(sd);
	conv_teardown(&f);
}

/* On a capturing stream a convolution is recorded, not run; a call the
 * simulator cannot capture is refused. */
static void test_capture_records_conv_and_refuses_other_calls(void **state)
{
	(void)state;
	conv_fx_t f;
	const float one = 1, zero = 0;

	conv_setup(&f, 1, 2, 4, 2);
	float before = f.y[0];
	double t0 = fake_time;
	fake_capturing = true;
	fake_captured = 0;
	CK(cudnnConvolutionForward(f.h, &one, f.xd, f.x, f.wd, f.w, f.cd,
				   CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0, &zero, f.yd, f.y));
	assert_int_equal(fake_captured, 1);
	assert_true(f.y[0] == before);       /* nothing computed */
	assert_true(fake_time == t0);        /* nothing submitted */
	EXPECT_ST(CUDNN_STATUS_NOT_SUPPORTED, cudnnAddTensor(f.h, &one, f.yd, f.y, &one, f.yd, f.y));
	fake_capturing = false;
	conv_teardown(&f);
}

static void expect_same_bits(const char *what, int algo, const float *a, const float *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (memcmp(&a[i], &b[i], sizeof(float)))
			fail_msg("%s: algorithm %d differs at %zu: expected %.9g, got %.9g", what, algo, i,
				 a[i], b[i]);
}

static void test_all_algorithms_give_identical_bits(void **state)
{
	(void)state;
	conv_fx_t f;
	const float one = 1, half = 0.5f;

	conv_setup(&f, 3, 8, 9, 6);
	float *ref = malloc(sizeof(float) * f.ys), *y0 = malloc(sizeof(float) * f.ys);
	memcpy(y0, f.y, sizeof(float) * f.ys);
	void *ws = dev_alloc(64 << 20);
	for (int a = 0; a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; a++) {
		memcpy(f.y, y0, sizeof(float) * f.ys);
		cudnnStatus_t st = cudnnConvolutionForward(f.h, &one, f.xd, f.x, f.wd, f.w, f.cd,
							   (cudnnConvolutionFwdAlgo_t)a, ws, 64 << 20,
							   &half, f.yd, f.y);
		if (st == CUDNN_STATUS_NOT_SUPPORTED)
			continue;
		CK(st);
		if (a == 0)
			memcpy(ref, f.y, sizeof(float) * f.ys);
		else
			expect_same_bits("forward", a, ref, f.y, f.ys);
	}
	float *dx = dev_alloc(sizeof(float) * f.xs), *dxr = malloc(sizeof(float) * f.xs);
	for (int a = 0; a < CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT; a++) {
		memset(dx, 0, sizeof(float) * f.xs);
		cudnnStatus_t st = cudnnConvolutionBackwardData(f.h, &one, f.wd, f.w, f.yd, f.y, f.cd,
						  (cudnnConvolutionBwdDataAlgo_t)a, ws, 64 << 20, &half,
						  f.xd, dx);
		if (st == CUDNN_STATUS_NOT_SUPPORTED)
			continue;
		CK(st);
		if (a == 0)
			memcpy(dxr, dx, sizeof(float) * f.xs);
		else
			expect_same_bits("backward data", a, dxr, dx, f.xs);
	}
	float *dw = dev_alloc(sizeof(float) * f.ws_), *dwr = malloc(sizeof(float) * f.ws_);
	for (int a = 0; a < CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT; a++) {
		memset(dw, 0, sizeof(float) * f.ws_);
		cudnnStatus_t st = cudnnConvolutionBackwardFilter(f.h, &one, f.xd, f.x, f.yd, f.y, f.cd,
								  (cudnnConvolutionBwdFilterAlgo_t)a, ws,
								  64 << 20, &half, f.wd, dw);
		if (st == CUDNN_STATUS_NOT_SUPPORTED)
			continue;
		CK(st);
		if (a == 0)
			memcpy(dwr, dw, sizeof(float) * f.ws_);
		else
			expect_same_bits("backward filter", a, dwr, dw, f.ws_);
	}
	free(ref), free(y0), free(dxr), free(dwr);
	conv_teardown(&f);
}

static void test_dryrun_checks_ranges_without_computing(void **state)
{
	(void)state;
	conv_fx_t f;
	const float one = 1, zero = 0;
	size_t need;

	conv_setup(&f, 2, 4, 8, 4);
	CK(cudnnGetConvolutionForwardWorkspaceSize(f.h, f.xd, f.wd, f.cd, f.yd,
						   CUDNN_CONVOLUTION_FWD_ALGO_GEMM, &need));
	unsigned char *ws = dev_alloc(need);
	memset(ws, 0, need);
	for (size_t i = 0; i < f.ys; i++)
		f.y[i] = NAN;
	fake_dry = true;
	fake_checks = 0, fake_time = 0;
	CK(cudnnConvolutionForward(f.h, &one, f.xd, f.x, f.wd, f.w, f.cd,
				   CUDNN_CONVOLUTION_FWD_ALGO_GEMM, ws, need, &zero, f.yd, f.y));
	if (fake_checks < 4)
		fail_msg("dry run: expected x, w, y and workspace checked, got %d checks", fake_checks);
	if (!isnan(f.y[0]) || ws[0] != 0)
		fail_msg("dry run: expected nothing written, y[0] = %g, ws[0] = %d", f.y[0], ws[0]);
	if (!(fake_time > 0))
		fail_msg("dry run: expected virtual time to be submitted, got %g", fake_time);
	/* a freed ("offloaded") input is still caught */
	fake_faults = 0;
	float *gone = malloc(sizeof(float) * f.xs);
	CK(cudnnConvolutionForward(f.h, &one, f.xd, gone, f.wd, f.w, f.cd,
				   CUDNN_CONVOLUTION_FWD_ALGO_GEMM, ws, need, &zero, f.yd, f.y));
	assert_int_equal(fake_faults, 1);
	free(gone);
	fake_dry = false;
	conv_teardown(&f);
}

/* ----------------------------------------------------------- backend API */

#define BK(d, a, t, n, p) CK(cudnnBackendSetAttribute((d), (a), (t), (n), (p)))

static cudnnBackendDescriptor_t bk_tensor(int64_t uid, int n, int c, int h, int w)
{
	cudnnBackendDescriptor_t d;
	int64_t dims[4] = { n, c, h, w }, str[4] = { (int64_t)c * h * w, (int64_t)h * w, w, 1 };
	int64_t align = 16;
	cudnnDataType_t dt = CUDNN_DATA_FLOAT;
	CK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, &d));
	BK(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
	BK(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
	BK(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, str);
	BK(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
	BK(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
	CK(cudnnBackendFinalize(d));
	return d;
}

/* Builds a one-conv graph of direction `kind` (0 fwd, 1 bwd data, 2 bwd
 * filter), returns the heuristic engine ids in *algos and the plan of
 * heuristic entry `pick`. */
static cudnnBackendDescriptor_t bk_plan(conv_fx_t *f, int kind, int pick, int *algos, int *nalgo,
					int64_t *ws)
{
	static const cudnnBackendDescriptorType_t types[3] = {
		CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
		CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
		CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
	};
	static const cudnnBackendAttributeName_t attrs[3][6] = {
		{ CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
		  CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
		  CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA },
		{ CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
		  CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
		  CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA },
		{ CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
		  CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
		  CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA },
	};
	cudnnBackendDescriptor_t x = bk_tensor('x', f->n, f->c, f->hw, f->hw);
	cudnnBackendDescriptor_t w = bk_tensor('w', f->k, f->c, 3, 3);
	cudnnBackendDescriptor_t y = bk_tensor('y', f->n, f->k, f->p, f->p);
	cudnnBackendDescriptor_t cv, op, g, heur, plan;
	int64_t sd = 2, one2[2] = { 1, 1 };
	cudnnDataType_t ct = CUDNN_DATA_FLOAT;
	cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
	float alpha = 1.0f, beta = 0.5f;

	CK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, &cv));
	BK(cv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &ct);
	BK(cv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
	BK(cv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &sd);
	BK(cv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, one2);
	BK(cv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, one2);
	BK(cv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, one2);
	BK(cv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, one2);
	CK(cudnnBackendFinalize(cv));
	CK(cudnnBackendCreateDescriptor(types[kind], &op));
	BK(op, attrs[kind][0], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
	BK(op, attrs[kind][1], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w);
	BK(op, attrs[kind][2], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
	BK(op, attrs[kind][3], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cv);
	BK(op, attrs[kind][4], CUDNN_TYPE_FLOAT, 1, &alpha);
	BK(op, attrs[kind][5], CUDNN_TYPE_FLOAT, 1, &beta);
	CK(cudnnBackendFinalize(op));
	CK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &g));
	BK(g, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op);
	BK(g, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &f->h);
	CK(cudnnBackendFinalize(g));
	CK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur));
	cudnnBackendHeurMode_t hm = CUDNN_HEUR_MODE_INSTANT;
	BK(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g);
	BK(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &hm);
	CK(cudnnBackendFinalize(heur));
	/* the graph's building blocks may go before the plan is made */
	cudnnBackendDestroyDescriptor(x), cudnnBackendDestroyDescriptor(w);
	cudnnBackendDestroyDescriptor(y), cudnnBackendDestroyDescriptor(cv);
	cudnnBackendDestroyDescriptor(op), cudnnBackendDestroyDescriptor(g);
	int64_t count = 0, got = 0;
	CK(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
				    0, &count, NULL));
	assert_true(count > 0 && count <= 8);
	cudnnBackendDescriptor_t cfg[8];
	for (int i = 0; i < count; i++)
		CK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfg[i]));
	CK(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
				    count, &got, cfg));
	assert_int_equal(got, count);
	for (int i = 0; i < count; i++) {
		cudnnBackendDescriptor_t e;
		int64_t idx, n1;
		CK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &e));
		CK(cudnnBackendGetAttribute(cfg[i], CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR,
					    1, &n1, &e));
		CK(cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n1, &idx));
		algos[i] = (int)idx;
		cudnnBackendDestroyDescriptor(e);
	}
	*nalgo = (int)count;
	CK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan));
	BK(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &f->h);
	BK(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg[pick]);
	CK(cudnnBackendFinalize(plan));
	int64_t n1;
	CK(cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
				    &n1, ws));
	for (int i = 0; i < count; i++)
		cudnnBackendDestroyDescriptor(cfg[i]);
	cudnnBackendDestroyDescriptor(heur);
	return plan;
}

static void bk_execute(conv_fx_t *f, cudnnBackendDescriptor_t plan, void *x, void *y, void *w, void *ws)
{
	cudnnBackendDescriptor_t vp;
	int64_t uids[3] = { 'x', 'y', 'w' };
	void *ptrs[3] = { x, y, w };
	CK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp));
	BK(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids);
	BK(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, ptrs);
	BK(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
	CK(cudnnBackendFinalize(vp));
	CK(cudnnBackendExecute(f->h, plan, vp));
	cudnnBackendDestroyDescriptor(vp);
}

static void test_backend_engines_match_legacy_algorithms_bit_for_bit(void **state)
{
	(void)state;
	conv_fx_t f;
	const float one = 1, half = 0.5f;
	int algos[8], n;
	int64_t ws_bytes;

	conv_setup(&f, 2, 8, 8, 8);
	void *ws = dev_alloc(64 << 20);
	for (int kind = 0; kind < 3; kind++) {
		/* heuristic order == _v7 order; plan workspace == legacy size */
		cudnnBackendDescriptor_t plan = bk_plan(&f, kind, 0, algos, &n, &ws_bytes);
		int r;
		size_t legacy_ws;
		if (kind == 0) {
			cudnnConvolutionFwdAlgoPerf_t p[8];
			CK(cudnnGetConvolutionForwardAlgorithm_v7(f.h, f.xd, f.wd, f.cd, f.yd, 8, &r, p));
			for (int i = 0; i < n; i++)
				if ((int)p[i].algo != algos[i])
					fail_msg("forward: heuristic entry %d is engine %d, _v7 lists algo %d", i, algos[i], p[i].algo);
			CK(cudnnGetConvolutionForwardWorkspaceSize(f.h, f.xd, f.wd, f.cd, f.yd,
								   (cudnnConvolutionFwdAlgo_t)algos[0], &legacy_ws));
		} else if (kind == 1) {
			cudnnConvolutionBwdDataAlgoPerf_t p[8];
			CK(cudnnGetConvolutionBackwardDataAlgorithm_v7(f.h, f.wd, f.yd, f.cd, f.xd, 8, &r, p));
			for (int i = 0; i < n; i++)
				if ((int)p[i].algo != algos[i])
					fail_msg("backward data: heuristic entry %d is engine %d, _v7 lists algo %d", i, algos[i], p[i].algo);
			CK(cudnnGetConvolutionBackwardDataWorkspaceSize(f.h, f.wd, f.yd, f.cd, f.xd,
									(cudnnConvolutionBwdDataAlgo_t)algos[0], &legacy_ws));
		} else {
			cudnnConvolutionBwdFilterAlgoPerf_t p[8];
			CK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(f.h, f.xd, f.yd, f.cd, f.wd, 8, &r, p));
			for (int i = 0; i < n; i++)
				if ((int)p[i].algo != algos[i])
					fail_msg("backward filter: heuristic entry %d is engine %d, _v7 lists algo %d", i, algos[i], p[i].algo);
			CK(cudnnGetConvolutionBackwardFilterWorkspaceSize(f.h, f.xd, f.yd, f.cd, f.wd,
									  (cudnnConvolutionBwdFilterAlgo_t)algos[0], &legacy_ws));
		}
		if ((size_t)ws_bytes != legacy_ws)
			fail_msg("direction %d: plan workspace %lld, legacy algorithm %d needs %zu", kind,
				 (long long)ws_bytes, algos[0], legacy_ws);

		/* same bits through both APIs, with beta = 0.5 */
		size_t on = kind == 0 ? f.ys : kind == 1 ? f.xs : f.ws_;
		float *o1 = dev_alloc(on * sizeof(float)), *o2 = dev_alloc(on * sizeof(float));
		for (size_t i = 0; i < on; i++)
			o1[i] = o2[i] = (float)i * 0.25f;
		if (kind == 0) {
			CK(cudnnConvolutionForward(f.h, &one, f.xd, f.x, f.wd, f.w, f.cd, (cudnnConvolutionFwdAlgo_t)algos[0],
						   ws, 64 << 20, &half, f.yd, o1));
			bk_execute(&f, plan, f.x, o2, f.w, ws);
		} else if (kind == 1) {
			CK(cudnnConvolutionBackwardData(f.h, &one, f.wd, f.w, f.yd, f.y, f.cd,
							(cudnnConvolutionBwdDataAlgo_t)algos[0], ws, 64 << 20, &half, f.xd, o1));
			bk_execute(&f, plan, o2, f.y, f.w, ws);
		} else {
			CK(cudnnConvolutionBackwardFilter(f.h, &one, f.xd, f.x, f.yd, f.y, f.cd,
							  (cudnnConvolutionBwdFilterAlgo_t)algos[0], ws, 64 << 20, &half, f.wd, o1));
			bk_execute(&f, plan, f.x, f.y, o2, ws);
		}
		expect_same_bits("backend vs legacy", algos[0], o1, o2, on);
		cudnnBackendDestroyDescriptor(plan);
	}
	assert_int_equal(fake_faults, 0);
	conv_teardown(&f);
}

static void test_backend_rejects_bad_input_without_crashing(void **state)
{
	(void)state;
	cudnnBackendDescriptor_t t, vp;
	int64_t dims[4] = { 1, 2, 3, 4 };
	float f1 = 1.0f;

	EXPECT_ST(CUDNN_STATUS_BAD_PARAM_NULL_POINTER,
		  cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, NULL));
	EXPECT_ST(CUDNN_STATUS_BAD_PARAM, cudnnBackendFinalize(NULL));
	EXPECT_ST(CUDNN_STATUS_BAD_PARAM,
		  cudnnBackendSetAttribute(NULL, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims));
	CK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, &t));
	/* wrong element type, wrong attribute for the descriptor, bad count */
	EXPECT_ST(CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE,
		  cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_FLOAT, 1, &f1));
	EXPECT_ST(CUDNN_STATUS_BAD_PARAM,
		  cudnnBackendSetAttribute(t, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 4, dims));
	EXPECT_ST(CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND,
		  cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 99, dims));
	EXPECT_ST(CUDNN_STATUS_BAD_PARAM_NULL_POINTER,
		  cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, NULL));
	/* incomplete: no strides, no uid, no type */
	BK(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
	EXPECT_ST(CUDNN_STATUS_BAD_PARAM, cudnnBackendFinalize(t));
	int64_t n1, got[4];
	EXPECT_ST(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED,
		  cudnnBackendGetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, &n1, got));
	cudnnBackendDestroyDescriptor(t);
	/* a finalized descriptor cannot change */
	t = bk_tensor(7, 1, 2, 3, 4);
	EXPECT_ST(CUDNN_STATUS_BAD_PARAM,
		  cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims));
	CK(cudnnBackendGetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, &n1, got));
	assert_int_equal(n1, 4);
	assert_int_equal(got[3], 4);
	/* a tensor where a convolution descriptor is expected */
	cudnnBackendDescriptor_t op;
	CK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, &op));
	EXPECT_ST(CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE,
		  cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
					   CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t));
	EXPECT_ST(CUDNN_STATUS_BAD_PARAM, cudnnBackendFinalize(op)); /* nothing set */
	cudnnBackendDestroyDescriptor(op);
	/* executing with a missing uid or a NULL workspace */
	conv_fx_t f;
	int algos[8], n;
	int64_t ws_bytes;
	conv_setup(&f, 1, 4, 6, 4);
	cudnnBackendDescriptor_t plan = NULL;
	for (int pick = 0; !plan; pick++) {
		plan = bk_plan(&f, 0, pick, algos, &n, &ws_bytes);
		if (ws_bytes == 0 && pick + 1 < n) {
			cudnnBackendDestroyDescriptor(plan);
			plan = NULL;
		}
	}
	CK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp));
	int64_t uids[2] = { 'x', 'y' };
	void *ptrs[2] = { f.x, f.y }, *nows = NULL;
	BK(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 2, uids);
	BK(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 2, ptrs);
	BK(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &nows);
	CK(cudnnBackendFinalize(vp));
	EXPECT_ST(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, cudnnBackendExecute(f.h, plan, vp));
	EXPECT_ST(CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE, cudnnBackendExecute(f.h, vp, plan));
	EXPECT_ST(CUDNN_STATUS_BAD_PARAM, cudnnBackendExecute(NULL, plan, vp));
	cudnnBackendDestroyDescriptor(vp);
	if (ws_bytes > 0) {
		float *ws = NULL;
		cudnnBackendDescriptor_t v2;
		int64_t u3[3] = { 'x', 'y', 'w' };
		void *p3[3] = { f.x, f.y, f.w };
		CK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &v2));
		BK(v2, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, u3);
		BK(v2, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, p3);
		BK(v2, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
		CK(cudnnBackendFinalize(v2));
		EXPECT_ST(CUDNN_STATUS_BAD_PARAM, cudnnBackendExecute(f.h, plan, v2));
		cudnnBackendDestroyDescriptor(v2);
	}
	cudnnBackendDestroyDescriptor(plan);
	cudnnBackendDestroyDescriptor(t);
	conv_teardown(&f);
}

/* --------------------------------------------------------- other ops */

static void test_nhwc_input_gives_the_nchw_result(void **state)
{
	(void)state;
	conv_fx_t f;
	const float one = 1, zero = 0;
	cudnnTensorDescriptor_t nhwc;

	conv_setup(&f, 2, 3, 5, 4);
	float *xh = dev_alloc(sizeof(float) * f.xs), *y2 = dev_alloc(sizeof(float) * f.ys);
	for (int n = 0; n < 2; n++)
		for (int c = 0; c < 3; c++)
			for (int p = 0; p < 25; p++)
				xh[(n * 25 + p) * 3 + c] = f.x[(n * 3 + c) * 25 + p];
	CK(cudnnCreateTensorDescriptor(&nhwc));
	CK(cudnnSetTensor4dDescriptor(nhwc, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, 2, 3, 5, 5));
	CK(cudnnConvolutionForward(f.h, &one, f.xd, f.x, f.wd, f.w, f.cd,
				   CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0, &zero, f.yd, f.y));
	CK(cudnnConvolutionForward(f.h, &one, nhwc, xh, f.wd, f.w, f.cd,
				   CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0, &zero, f.yd, y2));
	expect_same_bits("NHWC input", 0, f.y, y2, f.ys);
	cudnnDestroyTensorDescriptor(nhwc);
	conv_teardown(&f);
}

static void test_legacy_calls_reject_bad_arguments(void **state)
{
	(void)state;
	conv_fx_t f;
	const float one = 1, zero = 0;
	cudnnTensorDescriptor_t bad;

	conv_setup(&f, 1, 2, 4, 2);
	EXPECT_ST(CUDNN_STATUS_BAD_PARAM, cudnnCreate(NULL));
	EXPECT_ST(CUDNN_STATUS_BAD_PARAM,
		  cudnnSetTensor4dDescriptor(f.xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 0, 1, 1, 1));
	CK(cudnnCreateTensorDescriptor(&bad));
	CK(cudnnSetTensor4dDescriptor(bad, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 2, 3, 3));
	/* y of the wrong size */
	EXPECT_ST(CUDNN_STATUS_BAD_PARAM,
		  cudnnConvolutionForward(f.h, &one, f.xd, f.x, f.wd, f.w, f.cd,
					  CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0, &zero, bad, f.y));
	EXPECT_ST(CUDNN_STATUS_BAD_PARAM,
		  cudnnConvolutionForward(NULL, &one, f.xd, f.x, f.wd, f.w, f.cd,
					  CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0, &zero, f.yd, f.y));
	EXPECT_ST(CUDNN_STATUS_BAD_PARAM,
		  cudnnConvolutionForward(f.h, NULL, f.xd, f.x, f.wd, f.w, f.cd,
					  CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0, &zero, f.yd, f.y));
	CK(cudnnSetTensor4dDescriptor(bad, CUDNN_TENSOR_NCHW, CUDNN_DATA_HALF, 1, 2, 4, 4));
	EXPECT_ST(CUDNN_STATUS_NOT_SUPPORTED,
		  cudnnConvolutionForward(f.h, &one, bad, f.x, f.wd, f.w, f.cd,
					  CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0, &zero, f.yd, f.y));
	assert_true((size_t)cudnnGetVersion() == CUDNN_VERSION);
	assert_string_equal(cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM), "CUDNN_STATUS_BAD_PARAM");
	cudnnDestroyTensorDescriptor(bad);
	conv_teardown(&f);
}

/* ------------------------------------------------------ batch norm Ex */

/* One batch-norm problem run twice: by the plain calls into set 0 and by
 * the Ex calls into set 1, from identical inputs. */
typedef struct {
	float *y, *rmean, *rvar, *smean, *sinv, *dx, *dscale, *dbias;
} bn_out_t;

static void bn_out_alloc(bn_out_t *o, size_t nx, size_t np)
{
	o->y = dev_rand(nx), o->dx = dev_rand(nx);
	o->rmean = dev_alloc(np * sizeof(float)), o->rvar = dev_alloc(np * sizeof(float));
	o->smean = dev_alloc(np * sizeof(float)), o->sinv = dev_alloc(np * sizeof(float));
	o->dscale = dev_alloc(np * sizeof(float)), o->dbias = dev_alloc(np * sizeof(float));
	for (size_t i = 0; i < np; i++) {
		o->rmean[i] = 0.25f * (float)i, o->rvar[i] = 1.0f + (float)i;
		o->dscale[i] = 0.5f, o->dbias[i] = -0.5f;
	}
}

static void test_batchnorm_ex_matches_plain_calls_bit_for_bit(void **state)
{
	(void)state;
	const cudnnBatchNormMode_t modes[] = { CUDNN_BATCHNORM_SPATIAL, CUDNN_BATCHNORM_PER_ACTIVATION };
	const float one = 1, zero = 0;
	const int n = 3, c = 4, hw = 5;
	const size_t nx = (size_t)n * c * hw * hw;

	for (int m = 0; m < 2; m++) {
		cudnnHandle_t h;
		cudnnTensorDescriptor_t xd, pd;
		size_t np = modes[m] == CUDNN_BATCHNORM_SPATIAL ? (size_t)c : (size_t)c * hw * hw;
		size_t wsf, wsb, rsz;
		bn_out_t o[2];

		CK(cudnnCreate(&h));
		CK(cudnnCreateTensorDescriptor(&xd));
		CK(cudnnCreateTensorDescriptor(&pd));
		CK(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, hw, hw));
		CK(cudnnDeriveBNTensorDescriptor(pd, xd, modes[m]));
		float *x = dev_rand(nx), *dy = dev_rand(nx), *scale = dev_rand(np), *bias = dev_rand(np);
		bn_out_alloc(&o[0], nx, np);
		bn_out_alloc(&o[1], nx, np);
		memcpy(o[1].y, o[0].y, nx * sizeof(float));
		memcpy(o[1].dx, o[0].dx, nx * sizeof(float));
		CK(cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(
			h, modes[m], CUDNN_BATCHNORM_OPS_BN, xd, NULL, xd, pd, NULL, &wsf));
		CK(cudnnGetBatchNormalizationBackwardExWorkspaceSize(
			h, modes[m], CUDNN_BATCHNORM_OPS_BN, xd, xd, xd, NULL, xd, pd, NULL, &wsb));
		CK(cudnnGetBatchNormalizationTrainingExReserveSpaceSize(
			h, modes[m], CUDNN_BATCHNORM_OPS_BN, NULL, xd, &rsz));
		if (!wsf || !wsb || !rsz)
			fail_msg("mode %d: expected nonzero sizes, got workspace %zu/%zu, reserve %zu",
				 (int)modes[m], wsf, wsb, rsz);
		EXPECT_ST(CUDNN_STATUS_NOT_SUPPORTED,
			  cudnnGetBatchNormalizationTrainingExReserveSpaceSize(
				  h, modes[m], CUDNN_BATCHNORM_OPS_BN_ACTIVATION, NULL, xd, &rsz));
		/* 64 guard bytes past each buffer: written by nobody */
		unsigned char *wf = dev_alloc(wsf + 64), *wb = dev_alloc(wsb + 64), *rs = dev_alloc(rsz + 64);
		memset(wf, 0, wsf + 64), memset(wb, 0, wsb + 64), memset(rs, 0, rsz + 64);
		fake_faults = 0;

		CK(cudnnBatchNormalizationForwardTraining(h, modes[m], &one, &zero, xd, x, xd, o[0].y, pd,
							  scale, bias, 0.1, o[0].rmean, o[0].rvar, 1e-5,
							  o[0].smean, o[0].sinv));
		EXPECT_ST(CUDNN_STATUS_NOT_SUPPORTED,
			  cudnnBatchNormalizationForwardTrainingEx(
				  h, modes[m], CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION, &one, &zero, xd, x,
				  NULL, NULL, xd, o[1].y, pd, scale, bias, 0.1, o[1].rmean, o[1].rvar,
				  1e-5, o[1].smean, o[1].sinv, NULL, wf, wsf, rs, rsz));
		EXPECT_ST(CUDNN_STATUS_BAD_PARAM,
			  cudnnBatchNormalizationForwardTrainingEx(
				  h, modes[m], CUDNN_BATCHNORM_OPS_BN, &one, &zero, xd, x, NULL, NULL, xd,
				  o[1].y, pd, scale, bias, 0.1, o[1].rmean, o[1].rvar, 1e-5, o[1].smean,
				  o[1].sinv, NULL, wf, wsf - 1, rs, rsz));
		EXPECT_ST(CUDNN_STATUS_BAD_PARAM,
			  cudnnBatchNormalizationForwardTrainingEx(
				  h, modes[m], CUDNN_BATCHNORM_OPS_BN, &one, &zero, xd, x, NULL, NULL, xd,
				  o[1].y, pd, scale, bias, 0.1, o[1].rmean, o[1].rvar, 1e-5, o[1].smean,
				  o[1].sinv, NULL, wf, wsf, rs, rsz - 1));
		CK(cudnnBatchNormalizationForwardTrainingEx(
			h, modes[m], CUDNN_BATCHNORM_OPS_BN, &one, &zero, xd, x, NULL, NULL, xd, o[1].y,
			pd, scale, bias, 0.1, o[1].rmean, o[1].rvar, 1e-5, o[1].smean, o[1].sinv, NULL,
			wf, wsf, rs, rsz));
		expect_same_bits("Ex forward y", m, o[0].y, o[1].y, nx);
		expect_same_bits("Ex running mean", m, o[0].rmean, o[1].rmean, np);
		expect_same_bits("Ex running variance", m, o[0].rvar, o[1].rvar, np);
		expect_same_bits("Ex saved mean", m, o[0].smean, o[1].smean, np);
		expect_same_bits("Ex saved inverse variance", m, o[0].sinv, o[1].sinv, np);

		/* beta of the parameter gradients 1: they accumulate alike */
		CK(cudnnBatchNormalizationBackward(h, modes[m], &one, &zero, &one, &one, xd, x, xd, dy,
						   xd, o[0].dx, pd, scale, o[0].dscale, o[0].dbias,
						   1e-5, o[0].smean, o[0].sinv));
		CK(cudnnBatchNormalizationBackwardEx(
			h, modes[m], CUDNN_BATCHNORM_OPS_BN, &one, &zero, &one, &one, xd, x, NULL, NULL,
			xd, dy, NULL, NULL, xd, o[1].dx, pd, scale, bias, o[1].dscale, o[1].dbias, 1e-5,
			o[1].smean, o[1].sinv, NULL, wb, wsb, rs, rsz));
		expect_same_bits("Ex backward dx", m, o[0].dx, o[1].dx, nx);
		expect_same_bits("Ex backward dscale", m, o[0].dscale, o[1].dscale, np);
		expect_same_bits("Ex backward dbias", m, o[0].dbias, o[1].dbias, np);
		assert_int_equal(fake_faults, 0);

		for (size_t i = 0; i < wsf; i++)
			if (!wf[i])
				fail_msg("mode %d: forward workspace byte %zu of %zu not written", m, i, wsf);
		for (size_t i = 0; i < wsb; i++)
			if (!wb[i])
				fail_msg("mode %d: backward workspace byte %zu of %zu not written", m, i, wsb);
		for (size_t i = 0; i < rsz; i++)
			if (!rs[i])
				fail_msg("mode %d: reserve byte %zu of %zu not written", m, i, rsz);
		for (size_t i = 0; i < 64; i++)
			if (wf[wsf + i] || wb[wsb + i] || rs[rsz + i])
				fail_msg("mode %d: a call wrote past its workspace or reserve (guard byte %zu)", m, i);

		/* a reserve space that lost its contents (say, dropped while
		 * offloaded) is refused, not silently used */
		rs[rsz / 2] ^= 0xff;
		EXPECT_ST(CUDNN_STATUS_BAD_PARAM,
			  cudnnBatchNormalizationBackwardEx(
				  h, modes[m], CUDNN_BATCHNORM_OPS_BN, &one, &zero, &one, &one, xd, x,
				  NULL, NULL, xd, dy, NULL, NULL, xd, o[1].dx, pd, scale, bias,
				  o[1].dscale, o[1].dbias, 1e-5, o[1].smean, o[1].sinv, NULL, wb, wsb,
				  rs, rsz));
		rs[rsz / 2] ^= 0xff;
		/* a workspace that is not device memory faults under the Ex name */
		void *host = malloc(wsb);
		fake_faults = 0;
		CK(cudnnBatchNormalizationBackwardEx(
			h, modes[m], CUDNN_BATCHNORM_OPS_BN, &one, &zero, &one, &one, xd, x, NULL, NULL,
			xd, dy, NULL, NULL, xd, o[1].dx, pd, scale, bias, o[1].dscale, o[1].dbias, 1e-5,
			o[1].smean, o[1].sinv, NULL, host, wsb, rs, rsz));
		if (fake_faults != 1 || strcmp(fault_op, "cudnnBatchNormalizationBackwardEx") != 0)
			fail_msg("expected 1 fault in cudnnBatchNormalizationBackwardEx, got %d in '%s'",
				 fake_faults, fault_op);
		free(host);
		cudnnDestroyTensorDescriptor(xd);
		cudnnDestroyTensorDescriptor(pd);
		cudnnDestroy(h);
		dev_free_all();
	}
}

static void test_cublas_sgemm_matches_reference_and_checks_ranges(void **state)
{
	(void)state;
	cublasHandle_t h;
	const int m = 5, n = 4, k = 3;
	float *a = dev_rand(m * k), *b = dev_rand(k * n), *c = dev_alloc(sizeof(float) * m * n);
	float want[20], one = 1, zero = 0;

	assert_int_equal(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
	assert_int_equal(ref_sgemm(false, true, m, n, k, 1, a, m, b, n, 0, want, m), 0);
	/* B given as n x k, transposed */
	float *bt = dev_alloc(sizeof(float) * n * k);
	for (int l = 0; l < k; l++)
		for (int j = 0; j < n; j++)
			bt[l * n + j] = b[j * k + l];
	assert_int_equal(ref_sgemm(false, true, m, n, k, 1, a, m, bt, n, 0, want, m), 0);
	fake_faults = 0;
	assert_int_equal(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, m, n, k, &one, a, m, bt, n, &zero, c, m),
			 CUBLAS_STATUS_SUCCESS);
	expect_same_bits("cublasSgemm", 0, want, c, (size_t)m * n);
	assert_int_equal(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_T, m, n, k, &one, a, CUDA_R_32F, m, bt,
				      CUDA_R_32F, n, &zero, c, CUDA_R_32F, m, CUBLAS_COMPUTE_32F_FAST_TF32,
				      CUBLAS_GEMM_DEFAULT), CUBLAS_STATUS_SUCCESS);
	expect_same_bits("cublasGemmEx", 0, want, c, (size_t)m * n);
	assert_int_equal(fake_faults, 0);
	assert_int_equal(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_T, m, n, k, &one, a, CUDA_R_16F, m, bt,
				      CUDA_R_16F, n, &zero, c, CUDA_R_16F, m, CUBLAS_COMPUTE_32F,
				      CUBLAS_GEMM_DEFAULT), CUBLAS_STATUS_NOT_SUPPORTED);
	assert_int_equal(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, a, m - 1, b, k, &zero, c, m),
			 CUBLAS_STATUS_INVALID_VALUE); /* lda < m */
	float host[20];
	assert_int_equal(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, m, n, k, &one, a, m, bt, n, &zero, host, m),
			 CUBLAS_STATUS_SUCCESS);
	if (fake_faults != 1 || strcmp(fault_op, "cublasSgemm_v2") != 0)
		fail_msg("host C: expected 1 fault in cublasSgemm_v2, got %d in '%s'", fake_faults, fault_op);
	float two = 2;
	assert_int_equal(cublasSaxpy(h, m, &two, a, 1, c, 1), CUBLAS_STATUS_SUCCESS);
	assert_int_equal(cublasSscal(h, m, &two, c, 1), CUBLAS_STATUS_SUCCESS);
	expect_same_bits("saxpy+sscal", 0, (float[]){ 2 * (want[0] + 2 * a[0]) }, c, 1);
	assert_int_equal(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
	dev_free_all();
}

/* bf16 round-to-nearest-even, as the simulated cuBLASLt stores D */
static uint16_t bf16(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

static float from_bf16(uint16_t v)
{
	uint32_t u = (uint32_t)v << 16;
	float f;

	memcpy(&f, &u, 4);
	return f;
}

static cublasLtMatrixLayout_t lt_layout(cudaDataType t, uint64_t r, uint64_t c, int64_t ld,
				       int32_t order)
{
	cublasLtMatrixLayout_t l;

	assert_int_equal(cublasLtMatrixLayoutCreate(&l, t, r, c, ld), CUBLAS_STATUS_SUCCESS);
	assert_int_equal(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ORDER, &order,
							  sizeof(order)), CUBLAS_STATUS_SUCCESS);
	return l;
}

/* cuBLASLt: float results equal cublasSgemm's (+ the bias as
 * cudnnAddTensor adds it), whatever the layout order; BGRADB sums dY over
 * k ascending; bf16 is widened exactly and rounded to nearest even; the
 * heuristic honours the workspace limit and cublasLtMatmul refuses a
 * smaller workspace; attributes follow cuBLASLt's size rules; the bias
 * is declared read (BIAS) or written (BGRADB). */
static void test_cublaslt_matches_reference_with_epilogues_orders_and_bf16(void **state)
{
	(void)state;
	const int m = 5, n = 4, k = 3;
	float *a = dev_rand(m * k), *bt = dev_rand(n * k), *bias = dev_rand(m);
	float *d = dev_alloc(sizeof(float) * m * n), *db = dev_alloc(sizeof(float) * n);
	float *ar = dev_alloc(sizeof(float) * m * k), want[20], one = 1, zero = 0;
	cublasLtHandle_t h;
	cublasLtMatmulDesc_t md;
	cublasLtMatmulPreference_t pref;
	cublasLtMatmulHeuristicResult_t res[2];
	cublasOperation_t tt = CUBLAS_OP_T;
	cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
	int got = 0;
	size_t need = 0;
	uint64_t big = 1 << 20;

	assert_int_equal(cublasLtCreate(&h), CUBLAS_STATUS_SUCCESS);
	assert_int_equal(cublasLtMatmulDescCreate(&md, CUBLAS_COMPUTE_32F, CUDA_R_32F),
			 CUBLAS_STATUS_SUCCESS);
	/* attributes: exact sizes only; a size query answers the size */
	assert_int_equal(cublasLtMatmulDescSetAttribute(md, CUBLASLT_MATMUL_DESC_TRANSB, &tt, 2),
			 CUBLAS_STATUS_INVALID_VALUE);
	assert_int_equal(cublasLtMatmulDescSetAttribute(md, CUBLASLT_MATMUL_DESC_TRANSB, &tt, sizeof(tt)),
			 CUBLAS_STATUS_SUCCESS);
	assert_int_equal(cublasLtMatmulDescGetAttribute(md, CUBLASLT_MATMUL_DESC_BIAS_POINTER, NULL, 0,
							&need), CUBLAS_STATUS_SUCCESS);
	assert_int_equal(need, sizeof(void *));
	assert_int_equal(cublasLtMatmulDescSetAttribute(md, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
							sizeof(epi)), CUBLAS_STATUS_SUCCESS);
	assert_int_equal(cublasLtMatmulDescSetAttribute(md, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
							sizeof(bias)), CUBLAS_STATUS_SUCCESS);
	cublasLtMatrixLayout_t la = lt_layout(CUDA_R_32F, m, k, m, CUBLASLT_ORDER_COL);
	cublasLtMatrixLayout_t lb = lt_layout(CUDA_R_32F, n, k, n, CUBLASLT_ORDER_COL);
	cublasLtMatrixLayout_t ld = lt_layout(CUDA_R_32F, m, n, m, CUBLASLT_ORDER_COL);
	assert_int_equal(cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);

	/* the workspace limit: none allowed by default, then 1 MiB */
	assert_int_equal(cublasLtMatmulAlgoGetHeuristic(h, md, la, lb, ld, ld, pref, 2, res, &got),
			 CUBLAS_STATUS_SUCCESS);
	assert_int_equal(got, 1);
	assert_int_equal(res[0].workspaceSize, 0);
	assert_int_equal(cublasLtMatmulPreferenceSetAttribute(pref,
		CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &big, sizeof(big)), CUBLAS_STATUS_SUCCESS);
	assert_int_equal(cublasLtMatmulAlgoGetHeuristic(h, md, la, lb, ld, ld, pref, 2, res, &got),
			 CUBLAS_STATUS_SUCCESS);
	assert_int_equal(got, 2);
	assert_int_equal(res[0].workspaceSize, 8 * m * n);     /* fastest first */
	unsigned char *ws = dev_alloc(res[0].workspaceSize);
	assert_int_equal(cublasLtMatmul(h, md, &one, a, la, bt, lb, &zero, d, ld, d, ld, &res[0].algo,
					ws, res[0].workspaceSize - 1, NULL), CUBLAS_STATUS_INVALID_VALUE);

	/* float: cublasSgemm's bits, then + bias */
	assert_int_equal(ref_sgemm(false, true, m, n, k, 1, a, m, bt, n, 0, want, m), 0);
	for (int j = 0; j < n; j++)
		for (int i = 0; i < m; i++)
			want[i + j * m] += bias[i];
	ndecl = 0;
	assert_int_equal(cublasLtMatmul(h, md, &one, a, la, bt, lb, &zero, d, ld, d, ld, &res[0].algo,
					ws, res[0].workspaceSize, NULL), CUBLAS_STATUS_SUCCESS);
	expect_same_bits("cublasLtMatmul bias", 0, want, d, (size_t)m * n);
	for (size_t i = 0; i < res[0].workspaceSize; i++)
		if (ws[i] != 0x5a)
			fail_msg("workspace byte %zu of %zu not written", i, res[0].workspaceSize);
	expect_decl(3, bias, m * sizeof(float), SIMGPU_ACC_R);

	/* A given row-major (the same matrix): the same bits */
	for (int i = 0; i < m; i++)
		for (int l = 0; l < k; l++)
			ar[i * k + l] = a[i + l * m];
	cublasLtMatrixLayout_t lar = lt_layout(CUDA_R_32F, m, k, k, CUBLASLT_ORDER_ROW);
	memset(d, 0, sizeof(float) * m * n);
	assert_int_equal(cublasLtMatmul(h, md, &one, ar, lar, bt, lb, &zero, d, ld, d, ld, NULL, NULL, 0,
					NULL), CUBLAS_STATUS_SUCCESS);
	expect_same_bits("cublasLtMatmul row-major A", 0, want, d, (size_t)m * n);

	/* BGRADB: db[j] = sum over l of op(B)[l][j] = bt[j + l*n], ascending */
	epi = CUBLASLT_EPILOGUE_BGRADB;
	assert_int_equal(cublasLtMatmulDescSetAttribute(md, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
							sizeof(epi)), CUBLAS_STATUS_SUCCESS);
	assert_int_equal(cublasLtMatmulDescSetAttribute(md, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &db,
							sizeof(db)), CUBLAS_STATUS_SUCCESS);
	ndecl = 0;
	assert_int_equal(cublasLtMatmul(h, md, &one, a, la, bt, lb, &zero, d, ld, d, ld, NULL, NULL, 0,
					NULL), CUBLAS_STATUS_SUCCESS);
	for (int j = 0; j < n; j++) {
		float acc = 0.0f;

		for (int l = 0; l < k; l++)
			acc += bt[j + l * n];
		expect_same_bits("BGRADB", 0, &acc, &db[j], 1);
	}
	expect_decl(3, db, n * sizeof(float), SIMGPU_ACC_W);

	/* bf16 in and out, fp32 compute: widened exactly, rounded once */
	uint16_t *ah = dev_alloc(2 * m * k), *bh = dev_alloc(2 * n * k), *dh = dev_alloc(2 * m * n);
	float af[15], bf[12], ref[20];
	for (int i = 0; i < m * k; i++)
		ah[i] = bf16(a[i]), af[i] = from_bf16(ah[i]);
	for (int i = 0; i < n * k; i++)
		bh[i] = bf16(bt[i]), bf[i] = from_bf16(bh[i]);
	assert_int_equal(ref_sgemm(false, true, m, n, k, 1, af, m, bf, n, 0, ref, m), 0);
	epi = CUBLASLT_EPILOGUE_DEFAULT;
	assert_int_equal(cublasLtMatmulDescSetAttribute(md, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
							sizeof(epi)), CUBLAS_STATUS_SUCCESS);
	cublasLtMatrixLayout_t lah = lt_layout(CUDA_R_16BF, m, k, m, CUBLASLT_ORDER_COL);
	cublasLtMatrixLayout_t lbh = lt_layout(CUDA_R_16BF, n, k, n, CUBLASLT_ORDER_COL);
	cublasLtMatrixLayout_t ldh = lt_layout(CUDA_R_16BF, m, n, m, CUBLASLT_ORDER_COL);
	assert_int_equal(cublasLtMatmul(h, md, &one, ah, lah, bh, lbh, &zero, dh, ldh, dh, ldh, NULL,
					NULL, 0, NULL), CUBLAS_STATUS_SUCCESS);
	for (int i = 0; i < m * n; i++)
		if (dh[i] != bf16(ref[i]))
			fail_msg("bf16 D[%d]: expected 0x%04x, got 0x%04x", i, bf16(ref[i]), dh[i]);
	/* mixed A/B types are not supported */
	assert_int_equal(cublasLtMatmul(h, md, &one, ah, lah, bt, lb, &zero, dh, ldh, dh, ldh, NULL,
					NULL, 0, NULL), CUBLAS_STATUS_NOT_SUPPORTED);

	cublasLtMatrixLayoutDestroy(la), cublasLtMatrixLayoutDestroy(lb);
	cublasLtMatrixLayoutDestroy(ld), cublasLtMatrixLayoutDestroy(lar);
	cublasLtMatrixLayoutDestroy(lah), cublasLtMatrixLayoutDestroy(lbh);
	cublasLtMatrixLayoutDestroy(ldh);
	cublasLtMatmulPreferenceDestroy(pref);
	cublasLtMatmulDescDestroy(md);
	assert_int_equal(cublasLtDestroy(h), CUBLAS_STATUS_SUCCESS);
	dev_free_all();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_get_v7_lists_fastest_first_and_gemm_workspace_grows_with_n),
		cmocka_unit_test(test_undersized_workspace_is_bad_param),
		cmocka_unit_test(test_every_algorithm_writes_its_whole_workspace),
		cmocka_unit_test(test_conv_declares_its_reads_and_writes),
		cmocka_unit_test(test_capture_records_conv_and_refuses_other_calls),
		cmocka_unit_test(test_all_algorithms_give_identical_bits),
		cmocka_unit_test(test_dryrun_checks_ranges_without_computing),
		cmocka_unit_test(test_backend_engines_match_legacy_algorithms_bit_for_bit),
		cmocka_unit_test(test_backend_rejects_bad_input_without_crashing),
		cmocka_unit_test(test_nhwc_input_gives_the_nchw_result),
		cmocka_unit_test(test_legacy_calls_reject_bad_arguments),
		cmocka_unit_test(test_batchnorm_ex_matches_plain_calls_bit_for_bit),
		cmocka_unit_test(test_cublas_sgemm_matches_reference_and_checks_ranges),
		cmocka_unit_test(test_cublaslt_matches_reference_with_epilogues_orders_and_bf16),
	};
	int failed = cmocka_run_group_tests_name("simgpu_dnn", tests, NULL, NULL);
	ref_scratch_free();
	return failed;
}
