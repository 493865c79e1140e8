/* tests/simgpu/ref.h - reference CPU kernels behind the simulated cuDNN and
 * cuBLAS.
 *
 * The simulated libcudnn.so.9 and libcublas.so.13 compute every operation
 * with these functions, on host float memory.  They know nothing about CUDA:
 * tensors are packed float32 arrays (NCHW for images, KCRS for filters,
 * column-major matrices for GEMM), so they can be unit-tested without the
 * simulator (tests/unit/simgpu_ref).
 *
 * Determinism is the point.  vmem must produce the same weights bit for bit
 * as a run without it, and vmem changes how a convolution is issued (another
 * algorithm, micro-batches along N as in µ-cuDNN §III).  So each output
 * element is summed in one fixed order that depends on neither:
 *   - convolution forward: y[n,k,p,q] sums c, r, s in ascending order
 *     (filter index order), then y = alpha*sum + beta*y;
 *   - backward data: dcol = sum over k ascending, then scattered into dx in
 *     (c, r, s, p, q) order per image, then dx = alpha*sum + beta*dx;
 *   - backward filter and bias backward: ONE running float sum per weight,
 *     started at beta*dw (0 when beta == 0) and extended with
 *     alpha*dy*x terms over images n ascending, then output pixels
 *     (p, q) ascending.
 * Consequences (tested in tests/unit/simgpu_ref):
 *   - forward and backward-data split into micro-batches along N equal the
 *     undivided call bit for bit (every image is independent);
 *   - backward-filter/bias over micro-batches issued in ascending N order,
 *     the first with the caller's beta and the rest with beta = 1 and the
 *     same alpha, equal the undivided call bit for bit (the running sum
 *     just continues; 1*dw is exact).  Summing per-micro-batch partial sums
 *     in another buffer and adding them would NOT be bit-identical.
 *   - GEMM: C[i,j] sums l ascending, then C = alpha*sum + beta*C.
 * beta == 0 never reads the output, so NaN or garbage there cannot leak.
 * Blocking (image groups, column tiles) only changes which elements are
 * computed together, never the order of one element's additions.
 *
 * Thread-safety: all functions are re-entrant and thread-safe; scratch
 * memory is cached per thread and grown on demand (ref_scratch_free()
 * releases the calling thread's).  Functions returning int return 0, or -1
 * when scratch memory could not be allocated (outputs are then untouched).
 */
#ifndef SIMGPU_REF_H
#define SIMGPU_REF_H

#include <stdbool.h>
#include <stddef.h>

/* Frees the calling thread's cached scratch buffers (optional). */
void ref_scratch_free(void);

/* ---- convolution (2-D, NCHW x KCRS -> NKPQ, groups) */
typedef struct {
	int n, c, h, w;         /* input x */
	int k, r, s;            /* filter w: k x (c/groups) x r x s */
	int pad_h, pad_w;
	int stride_h, stride_w;
	int dil_h, dil_w;
	int groups;             /* c and k are multiples of it */
	bool flip;              /* true: CUDNN_CONVOLUTION (filter flipped);
	                           false: CUDNN_CROSS_CORRELATION */
	int p, q;               /* output height/width, set by ref_conv_init */
} ref_conv_t;

/* Checks the geometry and sets p and q.  Returns 0, or -1 when a size is
 * not positive, channels do not divide into groups, or the output would be
 * empty. */
int ref_conv_init(ref_conv_t *cv);
/* Multiply-adds of one direction of the convolution (each direction has
 * the same count): n*k*(c/groups)*r*s*p*q. */
double ref_conv_macs(const ref_conv_t *cv);

/* y = alpha * conv(x, w) + beta * y */
int ref_conv_fwd(const ref_conv_t *cv, float alpha, const float *x,
		 const float *w, float beta, float *y);
/* dx = alpha * conv_transpose(dy, w) + beta * dx */
int ref_conv_bwd_data(const ref_conv_t *cv, float alpha, const float *w,
		      const float *dy, float beta, float *dx);
/* dw = beta * dw + sum over n, p, q of alpha * dy * x (running sum, see above) */
int ref_conv_bwd_filter(const ref_conv_t *cv, float alpha, const float *x,
			const float *dy, float beta, float *dw);

/* db[k] = beta*db[k] + sum over n, hw of alpha*dy[n,k,hw] (running sum) */
void ref_bias_bwd(int n, int k, size_t hw, float alpha, const float *dy,
		  float beta, float *db);

/* ---- elementwise tensor ops on packed 4-D tensors.  A "broadcast" tensor
 * has each dimension equal to the destination's or 1. */
typedef struct { int n, c, h, w; } ref_dims_t;

/* c = alpha * a (broadcast) + beta * c */
void ref_add_tensor(ref_dims_t cd, float alpha, ref_dims_t ad, const float *a,
		    float beta, float *c);

typedef enum { REF_OP_ADD, REF_OP_MUL, REF_OP_MIN, REF_OP_MAX, REF_OP_SQRT } ref_op_t;
/* c = op(alpha1 * a, alpha2 * b (broadcast)) + beta * c; SQRT ignores b.
 * a has c's dims.  c may alias a. */
void ref_op_tensor(ref_op_t op, ref_dims_t cd, float alpha1, const float *a,
		   float alpha2, ref_dims_t bd, const float *b, float beta, float *c);

/* y = alpha * s (scalar) ... helpers used by cudnnSetTensor/ScaleTensor */
void ref_fill(size_t count, float value, float *y);
void ref_scale(size_t count, float alpha, float *y);

/* ---- activation */
typedef enum {
	REF_ACT_SIGMOID, REF_ACT_RELU, REF_ACT_TANH, REF_ACT_CLIPPED_RELU,
	REF_ACT_ELU, REF_ACT_IDENTITY
} ref_act_t;
/* y = alpha * f(x) + beta * y; coef is the ceiling of clipped ReLU and
 * the alpha of ELU.  x and y may alias. */
void ref_act_fwd(ref_act_t mode, double coef, size_t count, float alpha,
		 const float *x, float beta, float *y);
/* dx = alpha * dy * f'(.) + beta * dx.  ReLU/clipped/ELU look at x (or at
 * y when x is NULL), sigmoid/tanh at y. */
void ref_act_bwd(ref_act_t mode, double coef, size_t count, float alpha,
		 const float *y, const float *dy, const float *x, float beta,
		 float *dx);

/* ---- pooling (2-D) */
typedef enum {
	REF_POOL_MAX, REF_POOL_AVG_INCLUDE_PAD, REF_POOL_AVG_EXCLUDE_PAD
} ref_pool_mode_t;
typedef struct {
	ref_pool_mode_t mode;
	int n, c, h, w;
	int win_h, win_w, pad_h, pad_w, stride_h, stride_w;
	int p, q;               /* set by ref_pool_init */
} ref_pool_t;
int ref_pool_init(ref_pool_t *pl);
/* y = alpha * pool(x) + beta * y.  Max ignores padding; a window that lies
 * entirely in padding yields 0. */
void ref_pool_fwd(const ref_pool_t *pl, float alpha, const float *x,
		  float beta, float *y);
/* dx = alpha * pool'(dy) + beta * dx.  Max routes each dy to the first
 * maximum of its window in x (row-major window order). */
int ref_pool_bwd(const ref_pool_t *pl, float alpha, const float *dy,
		 const float *x, float beta, float *dx);

/* ---- softmax over c for every (n, pixel) of a packed n x c x hw tensor
 * (cuDNN's channel mode; instance mode is c' = c*hw, hw' = 1). */
typedef enum { REF_SOFTMAX_ACCURATE, REF_SOFTMAX_LOG } ref_softmax_t;
void ref_softmax_fwd(ref_softmax_t algo, int n, int c, size_t hw, float alpha,
		     const float *x, float beta, float *y);
void ref_softmax_bwd(ref_softmax_t algo, int n, int c, size_t hw, float alpha,
		     const float *y, const float *dy, float beta, float *dx);

/* ---- batch normalisation.  Spatial: one feature per channel, statistics
 * over n, h, w.  Per-activation: one feature per (c, h, w), statistics
 * over n.  Statistics are summed in double, images then pixels ascending.
 * The running variance is updated with the unbiased variance, the saved
 * inverse deviation is 1/sqrt(biased variance + eps), as cuDNN does. */
typedef enum { REF_BN_PER_ACTIVATION, REF_BN_SPATIAL } ref_bn_mode_t;
int ref_bn_fwd_train(ref_bn_mode_t mode, ref_dims_t d, float alpha, float beta,
		     const float *x, float *y, const float *scale,
		     const float *bias, double factor, float *run_mean,
		     float *run_var, double eps, float *save_mean,
		     float *save_invstd);
void ref_bn_fwd_infer(ref_bn_mode_t mode, ref_dims_t d, float alpha,
		      float beta, const float *x, float *y, const float *scale,
		      const float *bias, const float *mean, const float *var,
		      double eps);
/* saved_mean/saved_invstd may be NULL: they are then recomputed from x. */
int ref_bn_bwd(ref_bn_mode_t mode, ref_dims_t d, float alpha_d, float beta_d,
	       float alpha_p, float beta_p, const float *x, const float *dy,
	       float *dx, const float *scale, float *dscale, float *dbias,
	       double eps, const float *saved_mean, const float *saved_invstd);

/* ---- BLAS, column-major as cuBLAS.  C (m x n) = alpha*op(A)*op(B) + beta*C */
int ref_sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
	      const float *a, int lda, const float *b, int ldb, float beta,
	      float *c, int ldc);
/* y = alpha*x + y;  x = alpha*x  (BLAS increments, negative allowed) */
void ref_saxpy(int n, float alpha, const float *x, int incx, float *y, int incy);
void ref_sscal(int n, float alpha, float *x, int incx);

#endif
