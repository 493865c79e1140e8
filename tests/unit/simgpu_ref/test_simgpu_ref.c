/* tests/unit/simgpu_ref/test_simgpu_ref.c - the simulated GPU's reference
 * kernels (tests/simgpu/ref.c): hand-computed cases, adjoint identities,
 * naive-loop comparisons, beta = 0 never reading the output, and the
 * bit-identity under micro-batch splits that vmem's µ-cuDNN mode relies on.
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

#include "tests/simgpu/ref.h"

/* ------------------------------------------------------------- helpers */

static uint64_t rng_state;

static float rnd(void)
{
	rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
	return (float)((rng_state >> 40) & 0xffffff) / (float)0x800000 - 1.0f;
}

static float *rnd_buf(size_t n)
{
	float *p = malloc(sizeof(float) * n);
	assert_non_null(p);
	for (size_t i = 0; i < n; i++)
		p[i] = rnd();
	return p;
}

static float *nan_buf(size_t n)
{
	float *p = malloc(sizeof(float) * n);
	assert_non_null(p);
	for (size_t i = 0; i < n; i++)
		p[i] = NAN;
	return p;
}

static void expect_near(const char *what, size_t i, double want, double got, double tol)
{
	if (!(fabs(want - got) <= tol * (1.0 + fabs(want)))) {
		fail_msg("%s[%zu]: expected %.9g, got %.9g (tolerance %g)",
			 what, i, want, got, tol);
	}
}

static void expect_bits(const char *what, const float *want, const float *got, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (memcmp(&want[i], &got[i], sizeof(float)) != 0)
			fail_msg("%s: element %zu differs: expected %.9g (0x%08x), got %.9g (0x%08x)",
				 what, i, want[i], *(const uint32_t *)&want[i],
				 got[i], *(const uint32_t *)&got[i]);
}

static void expect_finite(const char *what, const float *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isfinite(p[i]))
			fail_msg("%s[%zu]: expected a finite value (beta = 0 must not read the output), got %g",
				 what, i, p[i]);
}

static ref_conv_t conv_geom(int n, int c, int h, int w, int k, int r, int s,
			    int pad, int stride, int dil, int groups, bool flip)
{
	ref_conv_t cv = {
		.n = n, .c = c, .h = h, .w = w, .k = k, .r = r, .s = s,
		.pad_h = pad, .pad_w = pad, .stride_h = stride, .stride_w = stride,
		.dil_h = dil, .dil_w = dil, .groups = groups, .flip = flip,
	};
	assert_int_equal(ref_conv_init(&cv), 0);
	return cv;
}

static size_t xsz(const ref_conv_t *cv) { return (size_t)cv->n * cv->c * cv->h * cv->w; }
static size_t wsz(const ref_conv_t *cv) { return (size_t)cv->k * (cv->c / cv->groups) * cv->r * cv->s; }
static size_t ysz(const ref_conv_t *cv) { return (size_t)cv->n * cv->k * cv->p * cv->q; }

static double dot(const float *a, const float *b, size_t n)
{
	double s = 0.0;
	for (size_t i = 0; i < n; i++)
		s += (double)a[i] * b[i];
	return s;
}

/* naive convolution forward, straight from the definition */
static void naive_conv_fwd(const ref_conv_t *cv, const float *x, const float *w, double *y)
{
	int Cg = cv->c / cv->groups, Kg = cv->k / cv->groups;
	for (int n = 0; n < cv->n; n++)
		for (int k = 0; k < cv->k; k++)
			for (int p = 0; p < cv->p; p++)
				for (int q = 0; q < cv->q; q++) {
					double s = 0.0;
					int g = k / Kg;
					for (int c = 0; c < Cg; c++)
						for (int r = 0; r < cv->r; r++)
							for (int t = 0; t < cv->s; t++) {
								int ih = p * cv->stride_h - cv->pad_h + r * cv->dil_h;
								int iw = q * cv->stride_w - cv->pad_w + t * cv->dil_w;
								if (ih < 0 || ih >= cv->h || iw < 0 || iw >= cv->w)
									continue;
								int rr = cv->flip ? cv->r - 1 - r : r;
								int tt = cv->flip ? cv->s - 1 - t : t;
								s += (double)x[(((size_t)n * cv->c + g * Cg + c) * cv->h + ih) * cv->w + iw] *
								     w[(((size_t)k * Cg + c) * cv->r + rr) * cv->s + tt];
							}
					y[(((size_t)n * cv->k + k) * cv->p + p) * cv->q + q] = s;
				}
}

/* --------------------------------------------------------------- conv */

static void test_conv_fwd_hand_computed_pad1_stride2(void **state)
{
	(void)state;
	float x[9] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 };
	float w[9] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 };
	float y[4];
	ref_conv_t cv = conv_geom(1, 1, 3, 3, 1, 3, 3, 1, 2, 1, 1, false);

	assert_int_equal(cv.p, 2);
	assert_int_equal(cv.q, 2);
	assert_int_equal(ref_conv_fwd(&cv, 1.0f, x, w, 0.0f, y), 0);
	/* e.g. y[0][0] = 5*1 + 6*2 + 8*4 + 9*5 (the window hangs over the
	 * top-left padding) */
	const float want[4] = { 94, 106, 106, 94 };
	for (int i = 0; i < 4; i++)
		expect_near("y", i, want[i], y[i], 0);

	/* true convolution flips the filter: y[0][0] = 5*1 + 4*2 + 2*4 + 1*5 */
	cv.flip = true;
	assert_int_equal(ref_conv_fwd(&cv, 1.0f, x, w, 0.0f, y), 0);
	expect_near("y(flip)", 0, 26, y[0], 0);
}

static void test_conv_fwd_matches_naive_definition(void **state)
{
	(void)state;
	const ref_conv_t geoms[] = {
		conv_geom(2, 3, 7, 6, 4, 3, 3, 1, 1, 1, 1, false),
		conv_geom(3, 4, 9, 9, 6, 3, 2, 2, 2, 2, 2, true),
		conv_geom(1, 5, 5, 5, 7, 1, 1, 0, 1, 1, 1, false),
		conv_geom(2, 2, 11, 11, 5, 5, 5, 2, 3, 1, 1, false),
	};
	rng_state = 1;
	for (size_t gi = 0; gi < sizeof(geoms) / sizeof(geoms[0]); gi++) {
		const ref_conv_t *cv = &geoms[gi];
		float *x = rnd_buf(xsz(cv)), *w = rnd_buf(wsz(cv)), *y = nan_buf(ysz(cv));
		double *yn = malloc(sizeof(double) * ysz(cv));
		naive_conv_fwd(cv, x, w, yn);
		assert_int_equal(ref_conv_fwd(cv, 1.0f, x, w, 0.0f, y), 0);
		for (size_t i = 0; i < ysz(cv); i++)
			expect_near("y", i, yn[i], y[i], 1e-5);
		free(x), free(w), free(y), free(yn);
	}
}

/* <conv(x, w), y> == <x, bwd_data(y, w)> == <w, bwd_filter(x, y)> */
static void test_conv_adjoint_identity_holds(void **state)
{
	(void)state;
	const ref_conv_t geoms[] = {
		conv_geom(2, 3, 8, 8, 4, 3, 3, 1, 1, 1, 1, false),
		conv_geom(3, 4, 9, 7, 6, 3, 3, 1, 2, 1, 2, true),
		conv_geom(2, 2, 10, 10, 3, 3, 3, 2, 1, 2, 1, false),
		conv_geom(4, 8, 4, 4, 8, 1, 1, 0, 1, 1, 4, false),
		conv_geom(1, 3, 13, 13, 2, 5, 3, 2, 3, 1, 1, true),
	};
	rng_state = 7;
	for (size_t gi = 0; gi < sizeof(geoms) / sizeof(geoms[0]); gi++) {
		const ref_conv_t *cv = &geoms[gi];
		float *x = rnd_buf(xsz(cv)), *w = rnd_buf(wsz(cv)), *y = rnd_buf(ysz(cv));
		float *cx = nan_buf(ysz(cv)), *dx = nan_buf(xsz(cv)), *dw = nan_buf(wsz(cv));

		assert_int_equal(ref_conv_fwd(cv, 1.0f, x, w, 0.0f, cx), 0);
		assert_int_equal(ref_conv_bwd_data(cv, 1.0f, w, y, 0.0f, dx), 0);
		assert_int_equal(ref_conv_bwd_filter(cv, 1.0f, x, y, 0.0f, dw), 0);
		double a = dot(cx, y, ysz(cv));
		double b = dot(x, dx, xsz(cv));
		double c = dot(w, dw, wsz(cv));
		expect_near("<x, conv_bwd_data(y, w)> vs <conv(x, w), y>", gi, a, b, 1e-4);
		expect_near("<w, conv_bwd_filter(x, y)> vs <conv(x, w), y>", gi, a, c, 1e-4);
		free(x), free(w), free(y), free(cx), free(dx), free(dw);
	}
}

static void test_conv_alpha_beta_blend_output(void **state)
{
	(void)state;
	ref_conv_t cv = conv_geom(2, 3, 6, 6, 4, 3, 3, 1, 1, 1, 1, false);
	rng_state = 3;
	float *x = rnd_buf(xsz(&cv)), *w = rnd_buf(wsz(&cv));
	float *y0 = rnd_buf(ysz(&cv)), *y = malloc(sizeof(float) * ysz(&cv));
	float *plain = malloc(sizeof(float) * ysz(&cv));

	assert_int_equal(ref_conv_fwd(&cv, 1.0f, x, w, 0.0f, plain), 0);
	memcpy(y, y0, sizeof(float) * ysz(&cv));
	assert_int_equal(ref_conv_fwd(&cv, 0.5f, x, w, 2.0f, y), 0);
	for (size_t i = 0; i < ysz(&cv); i++)
		expect_near("y = 0.5*conv + 2*y0", i, 0.5 * plain[i] + 2.0 * y0[i], y[i], 1e-6);

	/* backward filter: dw = 3*dw0 + 0.25*grad */
	float *dy = rnd_buf(ysz(&cv)), *g = malloc(sizeof(float) * wsz(&cv));
	float *dw0 = rnd_buf(wsz(&cv)), *dw = malloc(sizeof(float) * wsz(&cv));
	assert_int_equal(ref_conv_bwd_filter(&cv, 1.0f, x, dy, 0.0f, g), 0);
	memcpy(dw, dw0, sizeof(float) * wsz(&cv));
	assert_int_equal(ref_conv_bwd_filter(&cv, 0.25f, x, dy, 3.0f, dw), 0);
	for (size_t i = 0; i < wsz(&cv); i++)
		expect_near("dw = 3*dw0 + 0.25*grad", i, 3.0 * dw0[i] + 0.25 * g[i], dw[i], 1e-5);
	free(x), free(w), free(y0), free(y), free(plain), free(dy), free(g), free(dw0), free(dw);
}

static void test_beta_zero_ignores_nan_in_output(void **state)
{
	(void)state;
	ref_conv_t cv = conv_geom(2, 3, 6, 6, 4, 3, 3, 1, 1, 1, 1, false);
	rng_state = 5;
	float *x = rnd_buf(xsz(&cv)), *w = rnd_buf(wsz(&cv)), *dy = rnd_buf(ysz(&cv));
	float *y = nan_buf(ysz(&cv)), *dx = nan_buf(xsz(&cv)), *dw = nan_buf(wsz(&cv));
	float db[4] = { NAN, NAN, NAN, NAN };

	assert_int_equal(ref_conv_fwd(&cv, 1.0f, x, w, 0.0f, y), 0);
	expect_finite("conv fwd y", y, ysz(&cv));
	assert_int_equal(ref_conv_bwd_data(&cv, 1.0f, w, dy, 0.0f, dx), 0);
	expect_finite("conv bwd data dx", dx, xsz(&cv));
	assert_int_equal(ref_conv_bwd_filter(&cv, 1.0f, x, dy, 0.0f, dw), 0);
	expect_finite("conv bwd filter dw", dw, wsz(&cv));
	ref_bias_bwd(cv.n, cv.k, (size_t)cv.p * cv.q, 1.0f, dy, 0.0f, db);
	expect_finite("bias bwd db", db, 4);

	float *c = nan_buf(6 * 5), *a = rnd_buf(6 * 4), *b = rnd_buf(4 * 5);
	assert_int_equal(ref_sgemm(false, false, 6, 5, 4, 1.0f, a, 6, b, 4, 0.0f, c, 6), 0);
	expect_finite("sgemm C", c, 30);

	size_t n = xsz(&cv);
	float *o = nan_buf(n);
	ref_act_fwd(REF_ACT_RELU, 0, n, 1.0f, x, 0.0f, o);
	expect_finite("activation fwd", o, n);
	free(o), o = nan_buf(n);
	ref_softmax_fwd(REF_SOFTMAX_ACCURATE, cv.n, cv.c, 36, 1.0f, x, 0.0f, o);
	expect_finite("softmax fwd", o, n);
	free(o), o = nan_buf(n);
	ref_dims_t d = { cv.n, cv.c, cv.h, cv.w }, bd = { 1, cv.c, 1, 1 };
	float bias[3] = { 1, 2, 3 };
	ref_add_tensor(d, 1.0f, bd, bias, 0.0f, o);
	expect_finite("add tensor", o, n);
	free(o), o = nan_buf(n);
	float sc[3] = { 1, 1, 1 }, sh[3] = { 0, 0, 0 };
	ref_bn_fwd_train(REF_BN_SPATIAL, d, 1.0f, 0.0f, x, o, sc, sh, 0.1, NULL, NULL, 1e-5, NULL, NULL);
	expect_finite("batch norm fwd", o, n);
	free(o);
	ref_pool_t pl = { .mode = REF_POOL_MAX, .n = 2, .c = 3, .h = 6, .w = 6,
			  .win_h = 2, .win_w = 2, .stride_h = 2, .stride_w = 2 };
	assert_int_equal(ref_pool_init(&pl), 0);
	o = nan_buf(2 * 3 * 9);
	ref_pool_fwd(&pl, 1.0f, x, 0.0f, o);
	expect_finite("pool fwd", o, 54);
	float *px = nan_buf(n);
	assert_int_equal(ref_pool_bwd(&pl, 1.0f, o, x, 0.0f, px), 0);
	expect_finite("pool bwd", px, n);
	free(o), free(px), free(x), free(w), free(dy), free(y), free(dx), free(dw), free(c), free(a), free(b);
}

/* µ-cuDNN §III: a conv split along N must give the undivided result */
static void test_microbatch_split_is_bit_identical(void **state)
{
	(void)state;
	const ref_conv_t geoms[] = {
		conv_geom(7, 16, 8, 8, 12, 3, 3, 1, 1, 1, 1, false),
		conv_geom(5, 4, 32, 32, 8, 3, 3, 1, 1, 1, 1, false), /* 1 image per group */
		conv_geom(9, 6, 3, 3, 4, 3, 3, 1, 2, 1, 2, true),    /* many images per group */
	};
	const int splits[][4] = { { 1, 2, 4, 0 }, { 3, 3, 0, 0 }, { 1, 1, 1, 1 } };

	rng_state = 11;
	for (size_t gi = 0; gi < sizeof(geoms) / sizeof(geoms[0]); gi++) {
		const ref_conv_t *cv = &geoms[gi];
		size_t xi = (size_t)cv->c * cv->h * cv->w, yi = (size_t)cv->k * cv->p * cv->q;
		float *x = rnd_buf(xsz(cv)), *w = rnd_buf(wsz(cv)), *dy = rnd_buf(ysz(cv));
		float *y1 = rnd_buf(ysz(cv)), *y2 = malloc(sizeof(float) * ysz(cv));
		float *dx1 = rnd_buf(xsz(cv)), *dx2 = malloc(sizeof(float) * xsz(cv));
		float *dw1 = rnd_buf(wsz(cv)), *dw2 = malloc(sizeof(float) * wsz(cv));
		float *db1 = rnd_buf(cv->k), *db2 = malloc(sizeof(float) * cv->k);

		for (size_t si = 0; si < sizeof(splits) / sizeof(splits[0]); si++) {
			/* beta != 0 and alpha != 1 so the blend is exercised too */
			memcpy(y2, y1, sizeof(float) * ysz(cv));
			memcpy(dx2, dx1, sizeof(float) * xsz(cv));
			memcpy(dw2, dw1, sizeof(float) * wsz(cv));
			memcpy(db2, db1, sizeof(float) * cv->k);
			float *yw = malloc(sizeof(float) * ysz(cv));
			float *dxw = malloc(sizeof(float) * xsz(cv));
			float *dww = malloc(sizeof(float) * wsz(cv));
			float *dbw = malloc(sizeof(float) * cv->k);
			memcpy(yw, y1, sizeof(float) * ysz(cv));
			memcpy(dxw, dx1, sizeof(float) * xsz(cv));
			memcpy(dww, dw1, sizeof(float) * wsz(cv));
			memcpy(dbw, db1, sizeof(float) * cv->k);
			assert_int_equal(ref_conv_fwd(cv, 0.75f, x, w, 0.5f, yw), 0);
			assert_int_equal(ref_conv_bwd_data(cv, 0.75f, w, dy, 0.5f, dxw), 0);
			assert_int_equal(ref_conv_bwd_filter(cv, 0.75f, x, dy, 0.5f, dww), 0);
			ref_bias_bwd(cv->n, cv->k, (size_t)cv->p * cv->q, 0.75f, dy, 0.5f, dbw);

			int n0 = 0, part = 0;
			while (n0 < cv->n) {
				int nb = splits[si][part % 4] ? splits[si][part % 4] : 1;
				if (nb > cv->n - n0)
					nb = cv->n - n0;
				ref_conv_t mb = *cv;
				mb.n = nb;
				assert_int_equal(ref_conv_init(&mb), 0);
				assert_int_equal(ref_conv_fwd(&mb, 0.75f, x + n0 * xi, w, 0.5f, y2 + n0 * yi), 0);
				assert_int_equal(ref_conv_bwd_data(&mb, 0.75f, w, dy + n0 * yi, 0.5f, dx2 + n0 * xi), 0);
				/* backward filter/bias: first piece with the caller's
				 * beta, later pieces accumulate with beta = 1 */
				float beta = part == 0 ? 0.5f : 1.0f;
				assert_int_equal(ref_conv_bwd_filter(&mb, 0.75f, x + n0 * xi, dy + n0 * yi, beta, dw2), 0);
				ref_bias_bwd(nb, cv->k, (size_t)cv->p * cv->q, 0.75f, dy + n0 * yi, beta, db2);
				n0 += nb;
				part++;
			}
			expect_bits("forward, micro-batched vs whole", yw, y2, ysz(cv));
			expect_bits("backward data, micro-batched vs whole", dxw, dx2, xsz(cv));
			expect_bits("backward filter, micro-batched (beta=1) vs whole", dww, dw2, wsz(cv));
			expect_bits("bias backward, micro-batched (beta=1) vs whole", dbw, db2, cv->k);
			free(yw), free(dxw), free(dww), free(dbw);
		}
		free(x), free(w), free(dy), free(y1), free(y2), free(dx1), free(dx2);
		free(dw1), free(dw2), free(db1), free(db2);
	}
}

static void test_conv_is_deterministic_run_to_run(void **state)
{
	(void)state;
	ref_conv_t cv = conv_geom(4, 8, 10, 10, 8, 3, 3, 1, 1, 1, 1, false);
	rng_state = 13;
	float *x = rnd_buf(xsz(&cv)), *dy = rnd_buf(ysz(&cv));
	float *a = malloc(sizeof(float) * wsz(&cv)), *b = malloc(sizeof(float) * wsz(&cv));
	assert_int_equal(ref_conv_bwd_filter(&cv, 1.0f, x, dy, 0.0f, a), 0);
	assert_int_equal(ref_conv_bwd_filter(&cv, 1.0f, x, dy, 0.0f, b), 0);
	expect_bits("backward filter, second run", a, b, wsz(&cv));
	free(x), free(dy), free(a), free(b);
}

static void test_conv_init_rejects_bad_geometry(void **state)
{
	(void)state;
	ref_conv_t cv = { .n = 1, .c = 3, .h = 2, .w = 2, .k = 4, .r = 3, .s = 3,
			  .stride_h = 1, .stride_w = 1, .dil_h = 1, .dil_w = 1, .groups = 1 };
	assert_int_equal(ref_conv_init(&cv), -1); /* filter larger than input */
	cv.pad_h = cv.pad_w = 1;
	assert_int_equal(ref_conv_init(&cv), 0);
	cv.groups = 2; /* 3 channels do not split in 2 */
	assert_int_equal(ref_conv_init(&cv), -1);
	cv.groups = 1;
	cv.stride_h = 0;
	assert_int_equal(ref_conv_init(&cv), -1);
}

static void test_bias_bwd_sums_over_n_h_w(void **state)
{
	(void)state;
	/* n=2, k=2, hw=3 */
	float dy[12] = { 1, 2, 3, 10, 20, 30, 4, 5, 6, 40, 50, 60 };
	float db[2] = { 100, 1000 };
	ref_bias_bwd(2, 2, 3, 1.0f, dy, 1.0f, db);
	expect_near("db", 0, 100 + 21, db[0], 0);
	expect_near("db", 1, 1000 + 210, db[1], 0);
}

/* --------------------------------------------------------------- GEMM */

static void test_sgemm_matches_naive_all_transposes(void **state)
{
	(void)state;
	const int m = 7, n = 9, k = 11, lda = 13, ldb = 12, ldc = 10;
	rng_state = 17;
	for (int ta = 0; ta < 2; ta++)
		for (int tb = 0; tb < 2; tb++) {
			float *a = rnd_buf((size_t)lda * 13), *b = rnd_buf((size_t)ldb * 13);
			float *c = rnd_buf((size_t)ldc * n), *c0 = malloc(sizeof(float) * ldc * n);
			memcpy(c0, c, sizeof(float) * ldc * n);
			assert_int_equal(ref_sgemm(ta, tb, m, n, k, 1.5f, a, lda, b, ldb, -0.5f, c, ldc), 0);
			for (int j = 0; j < n; j++)
				for (int i = 0; i < ldc; i++) {
					if (i >= m) { /* rows past m are not touched */
						expect_near("C padding", (size_t)j * ldc + i,
							    c0[(size_t)j * ldc + i], c[(size_t)j * ldc + i], 0);
						continue;
					}
					double s = 0.0;
					for (int l = 0; l < k; l++) {
						double av = ta ? a[(size_t)i * lda + l] : a[(size_t)l * lda + i];
						double bv = tb ? b[(size_t)l * ldb + j] : b[(size_t)j * ldb + l];
						s += av * bv;
					}
					char what[64];
					snprintf(what, sizeof(what), "C (transa=%d transb=%d)", ta, tb);
					expect_near(what, (size_t)j * ldc + i,
						    1.5 * s - 0.5 * c0[(size_t)j * ldc + i],
						    c[(size_t)j * ldc + i], 1e-5);
				}
			free(a), free(b), free(c), free(c0);
		}
}

static void test_sgemm_large_tiles_match_naive(void **state)
{
	(void)state;
	/* sizes crossing the 4-row and 256-column tiles */
	const int m = 300, n = 6, k = 33;
	rng_state = 19;
	float *a = rnd_buf((size_t)m * k), *b = rnd_buf((size_t)k * n), *c = nan_buf((size_t)m * n);
	assert_int_equal(ref_sgemm(false, false, m, n, k, 1.0f, a, m, b, k, 0.0f, c, m), 0);
	for (int j = 0; j < n; j++)
		for (int i = 0; i < m; i++) {
			double s = 0.0;
			for (int l = 0; l < k; l++)
				s += (double)a[(size_t)l * m + i] * b[(size_t)j * k + l];
			expect_near("C", (size_t)j * m + i, s, c[(size_t)j * m + i], 1e-5);
		}
	free(a), free(b), free(c);
}

static void test_saxpy_sscal_follow_blas_increments(void **state)
{
	(void)state;
	float x[6] = { 1, 2, 3, 4, 5, 6 }, y[3] = { 10, 20, 30 };
	ref_saxpy(3, 2.0f, x, 2, y, 1);         /* x[0], x[2], x[4] */
	expect_near("y", 0, 12, y[0], 0);
	expect_near("y", 1, 26, y[1], 0);
	expect_near("y", 2, 40, y[2], 0);
	ref_saxpy(3, 1.0f, x, 1, y, -1);        /* y walked backwards */
	expect_near("y", 2, 41, y[2], 0);
	expect_near("y", 0, 15, y[0], 0);
	ref_sscal(3, 0.5f, x, 2);
	expect_near("x", 0, 0.5, x[0], 0);
	expect_near("x", 1, 2, x[1], 0);
	expect_near("x", 4, 2.5, x[4], 0);
}

/* ------------------------------------------------------ pooling, softmax */

static void test_pool_max_bwd_routes_gradient_to_argmax(void **state)
{
	(void)state;
	float x[16] = { 1, 9, 2, 3,
			4, 5, 8, 7,
			0, 6, 1, 1,
			2, 3, 1, 4 };
	float y[4], dy[4] = { 10, 20, 30, 40 }, dx[16];
	ref_pool_t pl = { .mode = REF_POOL_MAX, .n = 1, .c = 1, .h = 4, .w = 4,
			  .win_h = 2, .win_w = 2, .stride_h = 2, .stride_w = 2 };
	assert_int_equal(ref_pool_init(&pl), 0);
	ref_pool_fwd(&pl, 1.0f, x, 0.0f, y);
	const float wy[4] = { 9, 8, 6, 4 };
	for (int i = 0; i < 4; i++)
		expect_near("y", i, wy[i], y[i], 0);
	assert_int_equal(ref_pool_bwd(&pl, 1.0f, dy, x, 0.0f, dx), 0);
	const float wdx[16] = { 0, 10, 0, 0,  0, 0, 20, 0,  0, 30, 0, 0,  0, 0, 0, 40 };
	for (int i = 0; i < 16; i++)
		expect_near("dx", i, wdx[i], dx[i], 0);
}

static void test_pool_average_include_and_exclude_padding(void **state)
{
	(void)state;
	float x[4] = { 1, 2, 3, 4 }, y[4];
	ref_pool_t pl = { .mode = REF_POOL_AVG_INCLUDE_PAD, .n = 1, .c = 1, .h = 2, .w = 2,
			  .win_h = 2, .win_w = 2, .pad_h = 1, .pad_w = 1,
			  .stride_h = 2, .stride_w = 2 };
	assert_int_equal(ref_pool_init(&pl), 0);
	assert_int_equal(pl.p, 2);
	ref_pool_fwd(&pl, 1.0f, x, 0.0f, y);
	expect_near("y include", 0, 0.25, y[0], 0);   /* 1/4 */
	expect_near("y include", 3, 1.0, y[3], 0);    /* 4/4 */
	pl.mode = REF_POOL_AVG_EXCLUDE_PAD;
	ref_pool_fwd(&pl, 1.0f, x, 0.0f, y);
	expect_near("y exclude", 0, 1.0, y[0], 0);    /* only x[0] valid */
	expect_near("y exclude", 2, 3.0, y[2], 0);
	float dy[4] = { 4, 4, 4, 4 }, dx[4];
	assert_int_equal(ref_pool_bwd(&pl, 1.0f, dy, x, 0.0f, dx), 0);
	for (int i = 0; i < 4; i++)
		expect_near("dx exclude", i, 4, dx[i], 0);
}

static void test_softmax_rows_sum_to_one(void **state)
{
	(void)state;
	const int n = 3, c = 5;
	const size_t hw = 4;
	rng_state = 23;
	float *x = rnd_buf(n * c * hw), *y = nan_buf(n * c * hw);
	for (size_t i = 0; i < n * c * hw; i++)
		x[i] *= 20.0f; /* large logits: accurate mode must not overflow */
	ref_softmax_fwd(REF_SOFTMAX_ACCURATE, n, c, hw, 1.0f, x, 0.0f, y);
	for (int i = 0; i < n; i++)
		for (size_t p = 0; p < hw; p++) {
			double s = 0.0;
			for (int k = 0; k < c; k++)
				s += y[((size_t)i * c + k) * hw + p];
			expect_near("channel-mode row sum", (size_t)i * hw + p, 1.0, s, 1e-6);
		}
	/* instance mode: over c*hw per image */
	ref_softmax_fwd(REF_SOFTMAX_ACCURATE, n, c * (int)hw, 1, 1.0f, x, 0.0f, y);
	for (int i = 0; i < n; i++) {
		double s = 0.0;
		for (size_t j = 0; j < c * hw; j++)
			s += y[(size_t)i * c * hw + j];
		expect_near("instance-mode sum", i, 1.0, s, 1e-6);
	}
	/* log softmax: exp sums to 1; backward of softmax sums to 0 */
	ref_softmax_fwd(REF_SOFTMAX_LOG, n, c, hw, 1.0f, x, 0.0f, y);
	double s = 0.0;
	for (int k = 0; k < c; k++)
		s += exp(y[(size_t)k * hw]);
	expect_near("log-softmax exp sum", 0, 1.0, s, 1e-6);
	ref_softmax_fwd(REF_SOFTMAX_ACCURATE, n, c, hw, 1.0f, x, 0.0f, y);
	float *dy = rnd_buf(n * c * hw), *dx = nan_buf(n * c * hw);
	ref_softmax_bwd(REF_SOFTMAX_ACCURATE, n, c, hw, 1.0f, y, dy, 0.0f, dx);
	s = 0.0;
	for (int k = 0; k < c; k++)
		s += dx[(size_t)k * hw];
	expect_near("softmax bwd column sum", 0, 0.0, s, 1e-6);
	free(x), free(y), free(dy), free(dx);
}

/* --------------------------------------------------- activation, tensors */

static void test_activation_forward_backward_values(void **state)
{
	(void)state;
	float x[4] = { -2, -0.5f, 0.5f, 3 }, y[4], dy[4] = { 1, 1, 1, 1 }, dx[4];
	ref_act_fwd(REF_ACT_RELU, 0, 4, 1.0f, x, 0.0f, y);
	expect_near("relu", 0, 0, y[0], 0);
	expect_near("relu", 3, 3, y[3], 0);
	ref_act_bwd(REF_ACT_RELU, 0, 4, 1.0f, y, dy, x, 0.0f, dx);
	expect_near("relu'", 1, 0, dx[1], 0);
	expect_near("relu'", 2, 1, dx[2], 0);
	ref_act_fwd(REF_ACT_CLIPPED_RELU, 2.0, 4, 1.0f, x, 0.0f, y);
	expect_near("clipped relu", 3, 2, y[3], 0);
	ref_act_fwd(REF_ACT_SIGMOID, 0, 4, 1.0f, x, 0.0f, y);
	expect_near("sigmoid", 2, 1.0 / (1.0 + exp(-0.5)), y[2], 1e-6);
	ref_act_bwd(REF_ACT_SIGMOID, 0, 4, 1.0f, y, dy, x, 0.0f, dx);
	expect_near("sigmoid'", 2, y[2] * (1.0 - y[2]), dx[2], 1e-6);
	ref_act_fwd(REF_ACT_TANH, 0, 4, 1.0f, x, 0.0f, y);
	expect_near("tanh", 0, tanh(-2.0), y[0], 1e-6);
	ref_act_bwd(REF_ACT_TANH, 0, 4, 2.0f, y, dy, x, 0.0f, dx);
	expect_near("2*tanh'", 0, 2.0 * (1.0 - y[0] * y[0]), dx[0], 1e-6);
}

static void test_add_tensor_broadcasts_channel_bias(void **state)
{
	(void)state;
	ref_dims_t cd = { 2, 3, 2, 2 }, bd = { 1, 3, 1, 1 };
	float bias[3] = { 1, 2, 3 }, c[24];
	for (int i = 0; i < 24; i++)
		c[i] = (float)i;
	ref_add_tensor(cd, 2.0f, bd, bias, 1.0f, c);
	for (int i = 0; i < 24; i++)
		expect_near("c", i, i + 2.0 * bias[(i / 4) % 3], c[i], 0);
}

static void test_op_tensor_add_mul_min_max(void **state)
{
	(void)state;
	ref_dims_t d = { 1, 2, 1, 2 }, bd = { 1, 2, 1, 1 };
	float a[4] = { 1, -2, 3, 4 }, b[2] = { 0.5f, 10 }, c[4];
	ref_op_tensor(REF_OP_ADD, d, 1.0f, a, 2.0f, bd, b, 0.0f, c);
	expect_near("add", 1, -1, c[1], 0);
	expect_near("add", 2, 23, c[2], 0);
	ref_op_tensor(REF_OP_MUL, d, 1.0f, a, 1.0f, bd, b, 0.0f, c);
	expect_near("mul", 1, -1, c[1], 0);
	ref_op_tensor(REF_OP_MIN, d, 1.0f, a, 1.0f, bd, b, 0.0f, c);
	expect_near("min", 0, 0.5, c[0], 0);
	expect_near("min", 3, 4, c[3], 0);
	ref_op_tensor(REF_OP_MAX, d, 1.0f, a, 1.0f, bd, b, 0.0f, c);
	expect_near("max", 1, 0.5, c[1], 0);
	expect_near("max", 2, 10, c[2], 0);
}

/* --------------------------------------------------------- batch norm */

static void test_batchnorm_train_normalises_to_mean0_var1(void **state)
{
	(void)state;
	ref_dims_t d = { 4, 3, 5, 5 };
	size_t n = 4 * 3 * 25;
	rng_state = 29;
	float *x = rnd_buf(n), *y = nan_buf(n);
	for (size_t i = 0; i < n; i++)
		x[i] = 3.0f * x[i] + 7.0f;
	float sc[3] = { 1, 1, 1 }, sh[3] = { 0, 0, 0 };
	float rm[3] = { 1, 1, 1 }, rv[3] = { 2, 2, 2 }, sm[3], si[3];
	assert_int_equal(ref_bn_fwd_train(REF_BN_SPATIAL, d, 1.0f, 0.0f, x, y, sc, sh,
					  0.25, rm, rv, 1e-5, sm, si), 0);
	for (int c = 0; c < 3; c++) {
		double s = 0, ss = 0, xs = 0;
		for (int i = 0; i < 4; i++)
			for (int j = 0; j < 25; j++) {
				double v = y[((size_t)i * 3 + c) * 25 + j];
				s += v, ss += v * v;
				xs += x[((size_t)i * 3 + c) * 25 + j];
			}
		expect_near("channel mean of y", c, 0.0, s / 100, 1e-5);
		expect_near("channel variance of y", c, 1.0, ss / 100, 1e-3);
		expect_near("saved mean", c, xs / 100, sm[c], 1e-5);
		expect_near("running mean", c, 0.75 * 1 + 0.25 * xs / 100, rm[c], 1e-5);
	}
	/* backward: dbias = sum dy, dx sums to 0 per channel */
	float *dy = rnd_buf(n), *dx = nan_buf(n), ds[3], db[3];
	assert_int_equal(ref_bn_bwd(REF_BN_SPATIAL, d, 1.0f, 0.0f, 1.0f, 0.0f, x, dy, dx,
				    sc, ds, db, 1e-5, sm, si), 0);
	for (int c = 0; c < 3; c++) {
		double sdy = 0, sdx = 0;
		for (int i = 0; i < 4; i++)
			for (int j = 0; j < 25; j++) {
				sdy += dy[((size_t)i * 3 + c) * 25 + j];
				sdx += dx[((size_t)i * 3 + c) * 25 + j];
			}
		expect_near("dbias", c, sdy, db[c], 1e-5);
		expect_near("sum of dx", c, 0.0, sdx, 1e-4);
	}
	/* inference with the batch statistics reproduces training output */
	float var[3], *yi = nan_buf(n);
	for (int c = 0; c < 3; c++)
		var[c] = (float)(1.0 / ((double)si[c] * si[c]) - 1e-5);
	ref_bn_fwd_infer(REF_BN_SPATIAL, d, 1.0f, 0.0f, x, yi, sc, sh, sm, var, 1e-5);
	for (size_t i = 0; i < n; i++)
		expect_near("inference vs training", i, y[i], yi[i], 1e-3);
	free(x), free(y), free(dy), free(dx), free(yi);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_conv_fwd_hand_computed_pad1_stride2),
		cmocka_unit_test(test_conv_fwd_matches_naive_definition),
		cmocka_unit_test(test_conv_adjoint_identity_holds),
		cmocka_unit_test(test_conv_alpha_beta_blend_output),
		cmocka_unit_test(test_beta_zero_ignores_nan_in_output),
		cmocka_unit_test(test_microbatch_split_is_bit_identical),
		cmocka_unit_test(test_conv_is_deterministic_run_to_run),
		cmocka_unit_test(test_conv_init_rejects_bad_geometry),
		cmocka_unit_test(test_bias_bwd_sums_over_n_h_w),
		cmocka_unit_test(test_sgemm_matches_naive_all_transposes),
		cmocka_unit_test(test_sgemm_large_tiles_match_naive),
		cmocka_unit_test(test_saxpy_sscal_follow_blas_increments),
		cmocka_unit_test(test_pool_max_bwd_routes_gradient_to_argmax),
		cmocka_unit_test(test_pool_average_include_and_exclude_padding),
		cmocka_unit_test(test_softmax_rows_sum_to_one),
		cmocka_unit_test(test_activation_forward_backward_values),
		cmocka_unit_test(test_add_tensor_broadcasts_channel_bias),
		cmocka_unit_test(test_op_tensor_add_mul_min_max),
		cmocka_unit_test(test_batchnorm_train_normalises_to_mean0_var1),
	};
	int failed = cmocka_run_group_tests_name("simgpu_ref", tests, NULL, NULL);
	ref_scratch_free();
	return failed;
}
