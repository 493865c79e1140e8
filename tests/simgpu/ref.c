/* tests/simgpu/ref.c - reference CPU kernels (see ref.h for the contract,
 * and above all for the summation orders that make results bit-identical
 * across algorithms and micro-batch splits).
 *
 * Convolutions are lowered to one dense kernel, gemm_acc(), over im2col
 * buffers built for a group of images at a time.  gemm_acc adds the
 * products of one output element strictly in ascending inner index, so the
 * grouping and tiling change speed only, never a result bit.  Inner loops
 * have a constant trip count so that gcc vectorises them at -O2.
 */
#include "ref.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define JT 256                  /* column tile of gemm_acc (an AXPY_TILES width) */
#define COLS_TARGET 1024        /* columns per im2col group of images */
#define GROUP_BYTES (64u << 20) /* cap of an im2col buffer for >1 image */

/* Scratch buffers, cached per thread and grown on demand: the kernels run
 * once per layer per iteration, and a fresh malloc of many megabytes costs
 * a page fault per 4 KiB every time.  Slots let one call hold several. */
enum { SCRATCH_SLOTS = 5 };
static _Thread_local struct { void *p; size_t n; } scratch[SCRATCH_SLOTS];

static void *scratch_get(int slot, size_t bytes)
{
	if (bytes == 0)
		bytes = 1;
	if (scratch[slot].n < bytes) {
		free(scratch[slot].p);
		scratch[slot].p = malloc(bytes);
		scratch[slot].n = scratch[slot].p ? bytes : 0;
	}
	return scratch[slot].p;
}

void ref_scratch_free(void)
{
	for (int i = 0; i < SCRATCH_SLOTS; i++) {
		free(scratch[i].p);
		scratch[i].p = NULL;
		scratch[i].n = 0;
	}
}

/* dst[j][i] = src[i][j] for an r x c row-major src (ld lds), in 32x32
 * blocks so both sides stay in cache. */
static void transpose(int r, int c, const float *src, size_t lds, float *dst, size_t ldd)
{
	for (int i0 = 0; i0 < r; i0 += 32)
		for (int j0 = 0; j0 < c; j0 += 32) {
			int i1 = i0 + 32 < r ? i0 + 32 : r, j1 = j0 + 32 < c ? j0 + 32 : c;
			for (int i = i0; i < i1; i++)
				for (int j = j0; j < j1; j++)
					dst[(size_t)j * ldd + i] = src[(size_t)i * lds + j];
		}
}

/* c0..c3[j] += a0..a3 * b[j] for j < width: the vectorised inner kernels,
 * one per constant width (gcc -O2 vectorises only constant trip counts). */
#define AXPY_TILES(W)							\
static void axpy4_##W(float *restrict c0, float *restrict c1,		\
		      float *restrict c2, float *restrict c3,		\
		      const float *restrict b, float a0, float a1,	\
		      float a2, float a3)				\
{									\
	for (int j = 0; j < W; j++) {					\
		float bv = b[j];					\
		c0[j] += a0 * bv;					\
		c1[j] += a1 * bv;					\
		c2[j] += a2 * bv;					\
		c3[j] += a3 * bv;					\
	}								\
}									\
static void axpy1_##W(float *restrict c0, const float *restrict b, float a0) \
{									\
	for (int j = 0; j < W; j++)					\
		c0[j] += a0 * b[j];					\
}
AXPY_TILES(256)
AXPY_TILES(16)

/* C[i][j] += sum_l A[i][l] * B[l][j] (row-major, strides in elements), each
 * element's products added in ascending l. */
static void gemm_acc(int m, int n, int kd, const float *a, size_t lda,
		     const float *b, size_t ldb, float *c, size_t ldc)
{
	int i = 0;

	for (; i + 4 <= m; i += 4) {
		for (int j0 = 0; j0 < n; j0 += JT) {
			int jn = n - j0 < JT ? n - j0 : JT;
			float *c0 = c + (size_t)i * ldc + j0;
			float *c1 = c0 + ldc, *c2 = c1 + ldc, *c3 = c2 + ldc;
			const float *ar = a + (size_t)i * lda;

			for (int l = 0; l < kd; l++) {
				const float *bl = b + (size_t)l * ldb + j0;
				float a0 = ar[l], a1 = ar[lda + l];
				float a2 = ar[2 * lda + l], a3 = ar[3 * lda + l];

				if (jn == JT) {
					axpy4_256(c0, c1, c2, c3, bl, a0, a1, a2, a3);
					continue;
				}
				int j = 0;
				for (; j + 16 <= jn; j += 16)
					axpy4_16(c0 + j, c1 + j, c2 + j, c3 + j, bl + j,
						 a0, a1, a2, a3);
				for (; j < jn; j++) {
					float bv = bl[j];
					c0[j] += a0 * bv;
					c1[j] += a1 * bv;
					c2[j] += a2 * bv;
					c3[j] += a3 * bv;
				}
			}
		}
	}
	for (; i < m; i++) {
		for (int j0 = 0; j0 < n; j0 += JT) {
			int jn = n - j0 < JT ? n - j0 : JT;
			float *c0 = c + (size_t)i * ldc + j0;
			const float *ar = a + (size_t)i * lda;

			for (int l = 0; l < kd; l++) {
				const float *bl = b + (size_t)l * ldb + j0;

				if (jn == JT) {
					axpy1_256(c0, bl, ar[l]);
					continue;
				}
				int j = 0;
				for (; j + 16 <= jn; j += 16)
					axpy1_16(c0 + j, bl + j, ar[l]);
				for (; j < jn; j++)
					c0[j] += ar[l] * bl[j];
			}
		}
	}
}

/* ---------------------------------------------------------------- conv */

int ref_conv_init(ref_conv_t *cv)
{
	if (cv->n <= 0 || cv->c <= 0 || cv->h <= 0 || cv->w <= 0 ||
	    cv->k <= 0 || cv->r <= 0 || cv->s <= 0 || cv->groups <= 0 ||
	    cv->pad_h < 0 || cv->pad_w < 0 || cv->stride_h <= 0 ||
	    cv->stride_w <= 0 || cv->dil_h <= 0 || cv->dil_w <= 0)
		return -1;
	if (cv->c % cv->groups || cv->k % cv->groups)
		return -1;
	long eh = (long)(cv->r - 1) * cv->dil_h + 1;
	long ew = (long)(cv->s - 1) * cv->dil_w + 1;
	long ph = (long)cv->h + 2L * cv->pad_h - eh;
	long pw = (long)cv->w + 2L * cv->pad_w - ew;
	if (ph < 0 || pw < 0)
		return -1;
	cv->p = (int)(ph / cv->stride_h + 1);
	cv->q = (int)(pw / cv->stride_w + 1);
	return 0;
}

double ref_conv_macs(const ref_conv_t *cv)
{
	return (double)cv->n * cv->k * (cv->c / cv->groups) * cv->r * cv->s *
	       cv->p * cv->q;
}

/* Images per im2col group: enough columns to keep gemm_acc's tiles full
 * on small feature maps, bounded in memory.  Depends on the per-image shape
 * only (never on N beyond clamping), though results do not depend on it. */
static int conv_group(const ref_conv_t *cv)
{
	size_t pq = (size_t)cv->p * cv->q;
	size_t crs = (size_t)cv->c * cv->r * cv->s;
	size_t nb = (COLS_TARGET + pq - 1) / pq;

	while (nb > 1 && nb * pq * crs * sizeof(float) > GROUP_BYTES)
		nb--;
	if (nb > (size_t)cv->n)
		nb = (size_t)cv->n;
	return (int)(nb ? nb : 1);
}

/* col[(c*R + r)*S + s][j0 + p*Q + q] = x[c][ih][iw] or 0 in the padding */
static void im2col(const ref_conv_t *cv, const float *x, float *col,
		   size_t ldcol, size_t j0)
{
	int C = cv->c, H = cv->h, W = cv->w, R = cv->r, S = cv->s;
	int P = cv->p, Q = cv->q;

	for (int c = 0; c < C; c++) {
		const float *xc = x + (size_t)c * H * W;
		for (int r = 0; r < R; r++) {
			for (int s = 0; s < S; s++) {
				float *row = col + ((size_t)(c * R + r) * S + s) * ldcol + j0;
				for (int p = 0; p < P; p++) {
					int ih = p * cv->stride_h - cv->pad_h + r * cv->dil_h;
					float *o = row + (size_t)p * Q;
					if (ih < 0 || ih >= H) {
						memset(o, 0, sizeof(float) * Q);
						continue;
					}
					const float *xr = xc + (size_t)ih * W;
					for (int q = 0; q < Q; q++) {
						int iw = q * cv->stride_w - cv->pad_w + s * cv->dil_w;
						o[q] = (iw >= 0 && iw < W) ? xr[iw] : 0.0f;
					}
				}
			}
		}
	}
}

/* The filter as the GEMM sees it: w, or w with r and s reversed (true
 * convolution), in scratch slot 0.  Returns w itself when no copy is
 * needed, NULL when scratch memory ran out. */
static const float *conv_filter(const ref_conv_t *cv, const float *w)
{
	size_t crs = (size_t)(cv->c / cv->groups) * cv->r * cv->s;
	size_t rs = (size_t)cv->r * cv->s;

	if (!cv->flip)
		return w;
	float *f = scratch_get(0, sizeof(float) * crs * cv->k);
	if (!f)
		return NULL;
	for (size_t kc = 0; kc < crs * cv->k / rs; kc++)
		for (size_t i = 0; i < rs; i++)
			f[kc * rs + i] = w[kc * rs + rs - 1 - i];
	return f;
}

int ref_conv_fwd(const ref_conv_t *cv, float alpha, const float *x,
		 const float *w, float beta, float *y)
{
	int G = cv->groups, Kg = cv->k / G;
	size_t pq = (size_t)cv->p * cv->q;
	size_t crs_g = (size_t)(cv->c / G) * cv->r * cv->s;
	size_t crs = crs_g * G;
	size_t chw = (size_t)cv->c * cv->h * cv->w;
	size_t kpq = (size_t)cv->k * pq;
	int nb = conv_group(cv);
	float *col, *acc;
	const float *wf = conv_filter(cv, w);

	col = scratch_get(1, sizeof(float) * crs * pq * nb);
	acc = scratch_get(2, sizeof(float) * cv->k * pq * nb);
	if (!wf || !col || !acc)
		return -1;
	for (int n0 = 0; n0 < cv->n; n0 += nb) {
		int nn = cv->n - n0 < nb ? cv->n - n0 : nb;
		size_t cols = pq * nn;

		for (int i = 0; i < nn; i++)
			im2col(cv, x + (size_t)(n0 + i) * chw, col, cols, pq * i);
		memset(acc, 0, sizeof(float) * cv->k * cols);
		for (int g = 0; g < G; g++)
			gemm_acc(Kg, (int)cols, (int)crs_g, wf + g * Kg * crs_g,
				 crs_g, col + g * crs_g * cols, cols,
				 acc + (size_t)g * Kg * cols, cols);
		for (int i = 0; i < nn; i++) {
			float *yi = y + (size_t)(n0 + i) * kpq;
			for (int k = 0; k < cv->k; k++) {
				const float *a = acc + (size_t)k * cols + pq * i;
				float *o = yi + (size_t)k * pq;
				if (beta == 0.0f)
					for (size_t j = 0; j < pq; j++)
						o[j] = alpha * a[j];
				else
					for (size_t j = 0; j < pq; j++)
						o[j] = alpha * a[j] + beta * o[j];
			}
		}
	}
	return 0;
}

int ref_conv_bwd_data(const ref_conv_t *cv, float alpha, const float *w,
		      const float *dy, float beta, float *dx)
{
	int G = cv->groups, Kg = cv->k / G;
	int C = cv->c, H = cv->h, W = cv->w, R = cv->r, S = cv->s;
	int P = cv->p, Q = cv->q;
	size_t pq = (size_t)P * Q;
	size_t crs_g = (size_t)(C / G) * R * S;
	size_t crs = crs_g * G;
	size_t chw = (size_t)C * H * W;
	size_t kpq = (size_t)cv->k * pq;
	int nb = conv_group(cv);
	float *wt, *dyc, *dcol, *acc;
	const float *wf = conv_filter(cv, w);

	wt = scratch_get(1, sizeof(float) * crs_g * cv->k);
	dyc = scratch_get(2, sizeof(float) * kpq * nb);
	dcol = scratch_get(3, sizeof(float) * crs * pq * nb);
	acc = scratch_get(4, sizeof(float) * chw);
	if (!wf || !wt || !dyc || !dcol || !acc)
		return -1;
	/* wt[g][crs][k] = w[g*Kg + k][crs] */
	for (int g = 0; g < G; g++)
		for (int k = 0; k < Kg; k++)
			for (size_t i = 0; i < crs_g; i++)
				wt[((size_t)g * crs_g + i) * Kg + k] =
					wf[((size_t)g * Kg + k) * crs_g + i];
	for (int n0 = 0; n0 < cv->n; n0 += nb) {
		int nn = cv->n - n0 < nb ? cv->n - n0 : nb;
		size_t cols = pq * nn;

		for (int i = 0; i < nn; i++)
			for (int k = 0; k < cv->k; k++)
				memcpy(dyc + (size_t)k * cols + pq * i,
				       dy + (size_t)(n0 + i) * kpq + (size_t)k * pq,
				       sizeof(float) * pq);
		memset(dcol, 0, sizeof(float) * crs * cols);
		for (int g = 0; g < G; g++)
			gemm_acc((int)crs_g, (int)cols, Kg, wt + g * crs_g * Kg, Kg,
				 dyc + (size_t)g * Kg * cols, cols,
				 dcol + g * crs_g * cols, cols);
		for (int i = 0; i < nn; i++) {
			/* col2im: (c, r, s, p, q) order, per image */
			memset(acc, 0, sizeof(float) * chw);
			for (int c = 0; c < C; c++) {
				float *ac = acc + (size_t)c * H * W;
				for (int r = 0; r < R; r++) {
					for (int s = 0; s < S; s++) {
						const float *row = dcol + ((size_t)(c * R + r) * S + s) * cols + pq * i;
						for (int p = 0; p < P; p++) {
							int ih = p * cv->stride_h - cv->pad_h + r * cv->dil_h;
							if (ih < 0 || ih >= H)
								continue;
							float *ar = ac + (size_t)ih * W;
							const float *o = row + (size_t)p * Q;
							for (int q = 0; q < Q; q++) {
								int iw = q * cv->stride_w - cv->pad_w + s * cv->dil_w;
								if (iw >= 0 && iw < W)
									ar[iw] += o[q];
							}
						}
					}
				}
			}
			float *o = dx + (size_t)(n0 + i) * chw;
			if (beta == 0.0f)
				for (size_t j = 0; j < chw; j++)
					o[j] = alpha * acc[j];
			else
				for (size_t j = 0; j < chw; j++)
					o[j] = alpha * acc[j] + beta * o[j];
		}
	}
	return 0;
}

/* colT[j0 + p*Q + q][(c*R + r)*S + s]: the transposed im2col of one image */
static void im2row(const ref_conv_t *cv, const float *x, float *colt, size_t j0)
{
	int C = cv->c, H = cv->h, W = cv->w, R = cv->r, S = cv->s;
	size_t crs = (size_t)C * R * S;

	for (int p = 0; p < cv->p; p++) {
		for (int q = 0; q < cv->q; q++) {
			float *row = colt + (j0 + (size_t)p * cv->q + q) * crs;
			for (int c = 0; c < C; c++) {
				const float *xc = x + (size_t)c * H * W;
				for (int r = 0; r < R; r++) {
					int ih = p * cv->stride_h - cv->pad_h + r * cv->dil_h;
					float *o = row + (size_t)(c * R + r) * S;
					if (ih < 0 || ih >= H) {
						memset(o, 0, sizeof(float) * S);
						continue;
					}
					for (int s = 0; s < S; s++) {
						int iw = q * cv->stride_w - cv->pad_w + s * cv->dil_w;
						o[s] = (iw >= 0 && iw < W) ? xc[(size_t)ih * W + iw] : 0.0f;
					}
				}
			}
		}
	}
}

int ref_conv_bwd_filter(const ref_conv_t *cv, float alpha, const float *x,
			const float *dy, float beta, float *dw)
{
	int G = cv->groups, Kg = cv->k / G;
	size_t pq = (size_t)cv->p * cv->q;
	size_t rs = (size_t)cv->r * cv->s;
	size_t crs_g = (size_t)(cv->c / G) * rs;
	size_t crs = crs_g * G;
	size_t chw = (size_t)cv->c * cv->h * cv->w;
	size_t kpq = (size_t)cv->k * pq;
	size_t nw = crs_g * cv->k;
	int nb = conv_group(cv);
	float *colt, *dyc, *acc;

	colt = scratch_get(0, sizeof(float) * crs * pq * nb);
	dyc = scratch_get(1, sizeof(float) * kpq * nb);
	acc = scratch_get(2, sizeof(float) * nw);
	if (!colt || !dyc || !acc)
		return -1;
	/* the running sum starts at beta*dw, in the un-flipped filter order */
	for (size_t kc = 0; kc < nw / rs; kc++)
		for (size_t i = 0; i < rs; i++) {
			size_t src = kc * rs + (cv->flip ? rs - 1 - i : i);
			acc[kc * rs + i] = beta == 0.0f ? 0.0f : beta * dw[src];
		}
	for (int n0 = 0; n0 < cv->n; n0 += nb) {
		int nn = cv->n - n0 < nb ? cv->n - n0 : nb;
		size_t cols = pq * nn;

		for (int i = 0; i < nn; i++) {
			im2row(cv, x + (size_t)(n0 + i) * chw, colt, pq * i);
			for (int k = 0; k < cv->k; k++) {
				const float *d = dy + (size_t)(n0 + i) * kpq + (size_t)k * pq;
				float *o = dyc + (size_t)k * cols + pq * i;
				for (size_t j = 0; j < pq; j++)
					o[j] = alpha * d[j];
			}
		}
		for (int g = 0; g < G; g++)
			gemm_acc(Kg, (int)crs_g, (int)cols, dyc + (size_t)g * Kg * cols,
				 cols, colt + g * crs_g, crs,
				 acc + (size_t)g * Kg * crs_g, crs_g);
	}
	for (size_t kc = 0; kc < nw / rs; kc++)
		for (size_t i = 0; i < rs; i++)
			dw[kc * rs + (cv->flip ? rs - 1 - i : i)] = acc[kc * rs + i];
	return 0;
}

void ref_bias_bwd(int n, int k, size_t hw, float alpha, const float *dy,
		  float beta, float *db)
{
	for (int c = 0; c < k; c++) {
		float acc = beta == 0.0f ? 0.0f : beta * db[c];
		for (int i = 0; i < n; i++) {
			const float *d = dy + ((size_t)i * k + c) * hw;
			for (size_t j = 0; j < hw; j++)
				acc += alpha * d[j];
		}
		db[c] = acc;
	}
}

/* ---------------------------------------------------------- elementwise */

static size_t bidx(ref_dims_t bd, int n, int c, int h, int w)
{
	return (((size_t)(bd.n > 1 ? n : 0) * bd.c + (bd.c > 1 ? c : 0)) * bd.h +
		(bd.h > 1 ? h : 0)) * bd.w + (bd.w > 1 ? w : 0);
}

void ref_add_tensor(ref_dims_t cd, float alpha, ref_dims_t ad, const float *a,
		    float beta, float *c)
{
	size_t i = 0;

	for (int n = 0; n < cd.n; n++)
		for (int ch = 0; ch < cd.c; ch++)
			for (int h = 0; h < cd.h; h++)
				for (int w = 0; w < cd.w; w++, i++) {
					float v = alpha * a[bidx(ad, n, ch, h, w)];
					c[i] = beta == 0.0f ? v : v + beta * c[i];
				}
}

void ref_op_tensor(ref_op_t op, ref_dims_t cd, float alpha1, const float *a,
		   float alpha2, ref_dims_t bd, const float *b, float beta, float *c)
{
	size_t i = 0;

	for (int n = 0; n < cd.n; n++)
		for (int ch = 0; ch < cd.c; ch++)
			for (int h = 0; h < cd.h; h++)
				for (int w = 0; w < cd.w; w++, i++) {
					float u = alpha1 * a[i], v = 0.0f, r;
					if (op != REF_OP_SQRT)
						v = alpha2 * b[bidx(bd, n, ch, h, w)];
					switch (op) {
					case REF_OP_ADD: r = u + v; break;
					case REF_OP_MUL: r = u * v; break;
					case REF_OP_MIN: r = u < v ? u : v; break;
					case REF_OP_MAX: r = u > v ? u : v; break;
					default: r = sqrtf(u); break;
					}
					c[i] = beta == 0.0f ? r : r + beta * c[i];
				}
}

void ref_fill(size_t count, float value, float *y)
{
	for (size_t i = 0; i < count; i++)
		y[i] = value;
}

void ref_scale(size_t count, float alpha, float *y)
{
	for (size_t i = 0; i < count; i++)
		y[i] *= alpha;
}

static float act(ref_act_t mode, double coef, float x)
{
	switch (mode) {
	case REF_ACT_SIGMOID: return 1.0f / (1.0f + expf(-x));
	case REF_ACT_RELU: return x > 0.0f ? x : 0.0f;
	case REF_ACT_TANH: return tanhf(x);
	case REF_ACT_CLIPPED_RELU:
		return x > 0.0f ? (x < (float)coef ? x : (float)coef) : 0.0f;
	case REF_ACT_ELU: return x > 0.0f ? x : (float)coef * expm1f(x);
	default: return x;
	}
}

void ref_act_fwd(ref_act_t mode, double coef, size_t count, float alpha,
		 const float *x, float beta, float *y)
{
	for (size_t i = 0; i < count; i++) {
		float v = alpha * act(mode, coef, x[i]);
		y[i] = beta == 0.0f ? v : v + beta * y[i];
	}
}

void ref_act_bwd(ref_act_t mode, double coef, size_t count, float alpha,
		 const float *y, const float *dy, const float *x, float beta,
		 float *dx)
{
	const float *in = x ? x : y;

	for (size_t i = 0; i < count; i++) {
		float g, d = dy[i];
		switch (mode) {
		case REF_ACT_SIGMOID: g = d * y[i] * (1.0f - y[i]); break;
		case REF_ACT_RELU: g = in[i] > 0.0f ? d : 0.0f; break;
		case REF_ACT_TANH: g = d * (1.0f - y[i] * y[i]); break;
		case REF_ACT_CLIPPED_RELU:
			g = (in[i] > 0.0f && in[i] < (float)coef) ? d : 0.0f;
			break;
		case REF_ACT_ELU:
			g = in[i] > 0.0f ? d : d * (float)coef * expf(in[i]);
			break;
		default: g = d; break;
		}
		float v = alpha * g;
		dx[i] = beta == 0.0f ? v : v + beta * dx[i];
	}
}

/* -------------------------------------------------------------- pooling */

int ref_pool_init(ref_pool_t *pl)
{
	if (pl->n <= 0 || pl->c <= 0 || pl->h <= 0 || pl->w <= 0 ||
	    pl->win_h <= 0 || pl->win_w <= 0 || pl->pad_h < 0 || pl->pad_w < 0 ||
	    pl->stride_h <= 0 || pl->stride_w <= 0)
		return -1;
	long ph = (long)pl->h + 2L * pl->pad_h - pl->win_h;
	long pw = (long)pl->w + 2L * pl->pad_w - pl->win_w;
	if (ph < 0 || pw < 0)
		return -1;
	pl->p = (int)(ph / pl->stride_h + 1);
	pl->q = (int)(pw / pl->stride_w + 1);
	return 0;
}

/* window [h0, h1) x [w0, w1) clipped to the image; *full = window size */
static void pool_window(const ref_pool_t *pl, int p, int q, int *h0, int *h1,
			int *w0, int *w1)
{
	*h0 = p * pl->stride_h - pl->pad_h;
	*w0 = q * pl->stride_w - pl->pad_w;
	*h1 = *h0 + pl->win_h;
	*w1 = *w0 + pl->win_w;
	if (*h0 < 0) *h0 = 0;
	if (*w0 < 0) *w0 = 0;
	if (*h1 > pl->h) *h1 = pl->h;
	if (*w1 > pl->w) *w1 = pl->w;
}

void ref_pool_fwd(const ref_pool_t *pl, float alpha, const float *x,
		  float beta, float *y)
{
	size_t hw = (size_t)pl->h * pl->w, pq = (size_t)pl->p * pl->q;

	for (size_t nc = 0; nc < (size_t)pl->n * pl->c; nc++) {
		const float *xi = x + nc * hw;
		float *yo = y + nc * pq;
		for (int p = 0; p < pl->p; p++) {
			for (int q = 0; q < pl->q; q++) {
				int h0, h1, w0, w1;
				float v;
				pool_window(pl, p, q, &h0, &h1, &w0, &w1);
				if (pl->mode == REF_POOL_MAX) {
					v = -INFINITY;
					for (int h = h0; h < h1; h++)
						for (int w = w0; w < w1; w++)
							if (xi[(size_t)h * pl->w + w] > v)
								v = xi[(size_t)h * pl->w + w];
					if (v == -INFINITY && (h0 >= h1 || w0 >= w1))
						v = 0.0f;
				} else {
					float sum = 0.0f;
					int cnt = (h1 - h0) * (w1 - w0);
					for (int h = h0; h < h1; h++)
						for (int w = w0; w < w1; w++)
							sum += xi[(size_t)h * pl->w + w];
					if (pl->mode == REF_POOL_AVG_INCLUDE_PAD)
						cnt = pl->win_h * pl->win_w;
					v = cnt > 0 ? sum / (float)cnt : 0.0f;
				}
				float *o = yo + (size_t)p * pl->q + q;
				*o = beta == 0.0f ? alpha * v : alpha * v + beta * *o;
			}
		}
	}
}

int ref_pool_bwd(const ref_pool_t *pl, float alpha, const float *dy,
		 const float *x, float beta, float *dx)
{
	size_t hw = (size_t)pl->h * pl->w, pq = (size_t)pl->p * pl->q;
	float *acc = scratch_get(0, sizeof(float) * hw);

	if (!acc)
		return -1;
	for (size_t nc = 0; nc < (size_t)pl->n * pl->c; nc++) {
		const float *xi = x + nc * hw, *d = dy + nc * pq;
		memset(acc, 0, sizeof(float) * hw);
		for (int p = 0; p < pl->p; p++) {
			for (int q = 0; q < pl->q; q++) {
				int h0, h1, w0, w1;
				float g = d[(size_t)p * pl->q + q];
				pool_window(pl, p, q, &h0, &h1, &w0, &w1);
				if (h0 >= h1 || w0 >= w1)
					continue;
				if (pl->mode == REF_POOL_MAX) {
					size_t best = (size_t)h0 * pl->w + w0;
					for (int h = h0; h < h1; h++)
						for (int w = w0; w < w1; w++)
							if (xi[(size_t)h * pl->w + w] > xi[best])
								best = (size_t)h * pl->w + w;
					acc[best] += g;
				} else {
					int cnt = pl->mode == REF_POOL_AVG_INCLUDE_PAD ?
						  pl->win_h * pl->win_w : (h1 - h0) * (w1 - w0);
					float v = g / (float)cnt;
					for (int h = h0; h < h1; h++)
						for (int w = w0; w < w1; w++)
							acc[(size_t)h * pl->w + w] += v;
				}
			}
		}
		float *o = dx + nc * hw;
		for (size_t j = 0; j < hw; j++)
			o[j] = beta == 0.0f ? alpha * acc[j] : alpha * acc[j] + beta * o[j];
	}
	return 0;
}

/* -------------------------------------------------------------- softmax */

void ref_softmax_fwd(ref_softmax_t algo, int n, int c, size_t hw, float alpha,
		     const float *x, float beta, float *y)
{
	for (int i = 0; i < n; i++) {
		for (size_t p = 0; p < hw; p++) {
			const float *xi = x + (size_t)i * c * hw + p;
			float *yo = y + (size_t)i * c * hw + p;
			float mx = -INFINITY;
			double sum = 0.0;
			for (int k = 0; k < c; k++)
				if (xi[k * hw] > mx)
					mx = xi[k * hw];
			for (int k = 0; k < c; k++)
				sum += exp((double)xi[k * hw] - mx);
			double lsum = log(sum);
			for (int k = 0; k < c; k++) {
				double d = (double)xi[k * hw] - mx;
				float v = algo == REF_SOFTMAX_LOG ? (float)(d - lsum)
								  : (float)(exp(d) / sum);
				float *o = yo + k * hw;
				*o = beta == 0.0f ? alpha * v : alpha * v + beta * *o;
			}
		}
	}
}

void ref_softmax_bwd(ref_softmax_t algo, int n, int c, size_t hw, float alpha,
		     const float *y, const float *dy, float beta, float *dx)
{
	for (int i = 0; i < n; i++) {
		for (size_t p = 0; p < hw; p++) {
			size_t base = (size_t)i * c * hw + p;
			double dot = 0.0;
			for (int k = 0; k < c; k++) {
				size_t j = base + k * hw;
				dot += algo == REF_SOFTMAX_LOG ? (double)dy[j]
							       : (double)dy[j] * y[j];
			}
			for (int k = 0; k < c; k++) {
				size_t j = base + k * hw;
				float v = algo == REF_SOFTMAX_LOG ?
					  (float)(dy[j] - exp((double)y[j]) * dot) :
					  (float)(y[j] * (dy[j] - dot));
				dx[j] = beta == 0.0f ? alpha * v : alpha * v + beta * dx[j];
			}
		}
	}
}

/* ----------------------------------------------------------- batch norm */

/* feature f of F, each sampled at n images x I inner positions:
 * element (i, f, j) lives at ((i*F) + f)*I + j */
static void bn_shape(ref_bn_mode_t mode, ref_dims_t d, size_t *F, size_t *I)
{
	if (mode == REF_BN_SPATIAL) {
		*F = (size_t)d.c;
		*I = (size_t)d.h * d.w;
	} else {
		*F = (size_t)d.c * d.h * d.w;
		*I = 1;
	}
}

static void bn_stats(const float *x, int n, size_t F, size_t I, size_t f,
		     double *mean, double *var)
{
	double s = 0.0, ss = 0.0, m = (double)n * I;

	for (int i = 0; i < n; i++) {
		const float *xi = x + ((size_t)i * F + f) * I;
		for (size_t j = 0; j < I; j++)
			s += xi[j];
	}
	*mean = s / m;
	for (int i = 0; i < n; i++) {
		const float *xi = x + ((size_t)i * F + f) * I;
		for (size_t j = 0; j < I; j++) {
			double dv = xi[j] - *mean;
			ss += dv * dv;
		}
	}
	*var = ss / m;
}

static void bn_apply(const float *x, float *y, int n, size_t F, size_t I,
		     size_t f, float alpha, float beta, double mean,
		     double invstd, float scale, float bias)
{
	for (int i = 0; i < n; i++) {
		const float *xi = x + ((size_t)i * F + f) * I;
		float *yo = y + ((size_t)i * F + f) * I;
		for (size_t j = 0; j < I; j++) {
			float v = (float)(scale * ((xi[j] - mean) * invstd) + bias);
			yo[j] = beta == 0.0f ? alpha * v : alpha * v + beta * yo[j];
		}
	}
}

int ref_bn_fwd_train(ref_bn_mode_t mode, ref_dims_t d, float alpha, float beta,
		     const float *x, float *y, const float *scale,
		     const float *bias, double factor, float *run_mean,
		     float *run_var, double eps, float *save_mean,
		     float *save_invstd)
{
	size_t F, I;
	bn_shape(mode, d, &F, &I);
	double m = (double)d.n * I;

	for (size_t f = 0; f < F; f++) {
		double mean, var;
		bn_stats(x, d.n, F, I, f, &mean, &var);
		double invstd = 1.0 / sqrt(var + eps);
		if (run_mean)
			run_mean[f] = (float)((1.0 - factor) * run_mean[f] + factor * mean);
		if (run_var) {
			double unbiased = m > 1.0 ? var * m / (m - 1.0) : var;
			run_var[f] = (float)((1.0 - factor) * run_var[f] + factor * unbiased);
		}
		if (save_mean)
			save_mean[f] = (float)mean;
		if (save_invstd)
			save_invstd[f] = (float)invstd;
		bn_apply(x, y, d.n, F, I, f, alpha, beta, mean, invstd, scale[f], bias[f]);
	}
	return 0;
}

void ref_bn_fwd_infer(ref_bn_mode_t mode, ref_dims_t d, float alpha,
		      float beta, const float *x, float *y, const float *scale,
		      const float *bias, const float *mean, const float *var,
		      double eps)
{
	size_t F, I;
	bn_shape(mode, d, &F, &I);

	for (size_t f = 0; f < F; f++)
		bn_apply(x, y, d.n, F, I, f, alpha, beta, mean[f],
			 1.0 / sqrt((double)var[f] + eps), scale[f], bias[f]);
}

int ref_bn_bwd(ref_bn_mode_t mode, ref_dims_t d, float alpha_d, float beta_d,
	       float alpha_p, float beta_p, const float *x, const float *dy,
	       float *dx, const float *scale, float *dscale, float *dbias,
	       double eps, const float *saved_mean, const float *saved_invstd)
{
	size_t F, I;
	bn_shape(mode, d, &F, &I);
	double m = (double)d.n * I;

	for (size_t f = 0; f < F; f++) {
		double mean, invstd, sdy = 0.0, sdyx = 0.0;
		if (saved_mean && saved_invstd) {
			mean = saved_mean[f];
			invstd = saved_invstd[f];
		} else {
			double var;
			bn_stats(x, d.n, F, I, f, &mean, &var);
			invstd = 1.0 / sqrt(var + eps);
		}
		for (int i = 0; i < d.n; i++) {
			size_t o = ((size_t)i * F + f) * I;
			for (size_t j = 0; j < I; j++) {
				sdy += dy[o + j];
				sdyx += dy[o + j] * ((x[o + j] - mean) * invstd);
			}
		}
		double k = scale[f] * invstd / m;
		for (int i = 0; i < d.n; i++) {
			size_t o = ((size_t)i * F + f) * I;
			for (size_t j = 0; j < I; j++) {
				double xh = (x[o + j] - mean) * invstd;
				float v = (float)(k * (m * dy[o + j] - sdy - xh * sdyx));
				dx[o + j] = beta_d == 0.0f ? alpha_d * v
							   : alpha_d * v + beta_d * dx[o + j];
			}
		}
		float ds = (float)sdyx, db = (float)sdy;
		dscale[f] = beta_p == 0.0f ? alpha_p * ds : alpha_p * ds + beta_p * dscale[f];
		dbias[f] = beta_p == 0.0f ? alpha_p * db : alpha_p * db + beta_p * dbias[f];
	}
	return 0;
}

/* ----------------------------------------------------------------- BLAS */

int ref_sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
	      const float *a, int lda, const float *b, int ldb, float beta,
	      float *c, int ldc)
{
	/* Row-major view: C^T (n x m, ld ldc) = op(B)^T (n x k) * op(A)^T (k x m).
	 * op(A)^T is A itself as row-major k x m with ld lda when A is not
	 * transposed; op(B)^T is B itself as row-major n x k when B is not. */
	const float *pa = a, *pb = b;
	size_t la = (size_t)lda, lb = (size_t)ldb;
	float *acc;

	if (m <= 0 || n <= 0)
		return 0;
	acc = scratch_get(0, sizeof(float) * (size_t)m * n);
	if (!acc)
		return -1;
	memset(acc, 0, sizeof(float) * (size_t)m * n);
	if (k > 0 && trans_a) { /* op(A)^T[l][i] = A[l + i*lda]: A as m x k row-major */
		float *at = scratch_get(1, sizeof(float) * (size_t)k * m);
		if (!at)
			return -1;
		transpose(m, k, a, (size_t)lda, at, (size_t)m);
		pa = at, la = (size_t)m;
	}
	if (k > 0 && trans_b) { /* op(B)^T[j][l] = B[j + l*ldb]: B as k x n row-major */
		float *bt = scratch_get(2, sizeof(float) * (size_t)n * k);
		if (!bt)
			return -1;
		transpose(k, n, b, (size_t)ldb, bt, (size_t)k);
		pb = bt, lb = (size_t)k;
	}
	if (k > 0)
		gemm_acc(n, m, k, pb, lb, pa, la, acc, (size_t)m);
	for (int j = 0; j < n; j++) {
		float *cj = c + (size_t)j * ldc;
		const float *aj = acc + (size_t)j * m;
		if (beta == 0.0f)
			for (int i = 0; i < m; i++)
				cj[i] = alpha * aj[i];
		else
			for (int i = 0; i < m; i++)
				cj[i] = alpha * aj[i] + beta * cj[i];
	}
	return 0;
}

static ptrdiff_t blas_start(int n, int inc)
{
	return inc < 0 ? (ptrdiff_t)(1 - n) * inc : 0;
}

void ref_saxpy(int n, float alpha, const float *x, int incx, float *y, int incy)
{
	if (n <= 0)
		return;
	ptrdiff_t ix = blas_start(n, incx), iy = blas_start(n, incy);
	for (int i = 0; i < n; i++, ix += incx, iy += incy)
		y[iy] += alpha * x[ix];
}

void ref_sscal(int n, float alpha, float *x, int incx)
{
	if (n <= 0 || incx <= 0)
		return;
	for (int i = 0; i < n; i++)
		x[(size_t)i * incx] *= alpha;
}
