/* tests/sim/interpose/bnprog.c - drives libvmem.so's cuDNN batch-norm Ex
 * hooks on the simulated GPU the way PyTorch's cudnn_batch_norm does
 * (cudnnBatchNormalizationForwardTrainingEx / BackwardEx with a workspace
 * and a reserve space).  Linked against the real libcudart and libcudnn
 * like an application.
 *
 *   bnprog spatial|per-activation
 *	x is 2x3x4x5.  Runs every step twice from identical inputs, once
 *	with the plain calls (set P) and once with the Ex calls (set E), and
 *	compares every output bit for bit:
 *	  fwd1  beta 0, no z                      (PyTorch's call)
 *	  fwd2  beta 1, z given                   (y read, z read)
 *	  bwd1  betas 0, no y, no dz              (PyTorch's call)
 *	  bwd2  betas 1, y and dz given           (dx, dscale, dbias read)
 *	Prints "name=pointer" for each Ex buffer, "name=bytes" for the sizes,
 *	then "ok".
 * Exit status 0 on success; every failure prints what was expected and got.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <cudnn.h>

#define CHECK(call)                                                                  \
	do {                                                                         \
		cudaError_t e_ = (call);                                             \
		if (e_ != cudaSuccess) {                                             \
			fprintf(stderr, "bnprog: %s failed: %s (%d), expected cudaSuccess\n", \
				#call, cudaGetErrorName(e_), (int)e_);               \
			exit(1);                                                     \
		}                                                                    \
	} while (0)

#define CK(call)                                                                     \
	do {                                                                         \
		cudnnStatus_t s_ = (call);                                           \
		if (s_ != CUDNN_STATUS_SUCCESS) {                                    \
			fprintf(stderr, "bnprog: %s returned %s (%d), expected CUDNN_STATUS_SUCCESS\n", \
				#call, cudnnGetErrorString(s_), (int)s_);            \
			exit(1);                                                     \
		}                                                                    \
	} while (0)

enum { N = 2, C = 3, H = 4, W = 5, NX = N * C * H * W };

/* Outputs of one run (plain or Ex). */
typedef struct {
	float *y, *rmean, *rvar, *smean, *sinv, *dx, *dscale, *dbias;
} outs_t;

static size_t np;

static float *dev(size_t n, const float *init)
{
	float *p;

	CHECK(cudaMalloc((void **)&p, n * sizeof(float)));
	if (init)
		CHECK(cudaMemcpy(p, init, n * sizeof(float), cudaMemcpyHostToDevice));
	else
		CHECK(cudaMemset(p, 0, n * sizeof(float)));
	return p;
}

static void outs_alloc(outs_t *o, const float *hy, const float *hp)
{
	o->y = dev(NX, hy), o->dx = dev(NX, hy);
	o->rmean = dev(np, hp), o->rvar = dev(np, hp);
	o->smean = dev(np, NULL), o->sinv = dev(np, NULL);
	o->dscale = dev(np, hp), o->dbias = dev(np, hp);
}

/* Bit-for-bit comparison of one output of both runs. */
static int same(const char *step, const char *what, const float *p, const float *e, size_t n)
{
	float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
	int bad = 0;

	if (!a || !b) {
		fprintf(stderr, "bnprog: out of host memory\n");
		exit(1);
	}
	CHECK(cudaMemcpy(a, p, n * sizeof(float), cudaMemcpyDeviceToHost));
	CHECK(cudaMemcpy(b, e, n * sizeof(float), cudaMemcpyDeviceToHost));
	for (size_t i = 0; i < n && !bad; i++)
		if (memcmp(&a[i], &b[i], sizeof(float))) {
			fprintf(stderr, "bnprog: %s %s[%zu]: Ex call gave %.9g, plain call %.9g; "
				"expected identical bits\n", step, what, i, b[i], a[i]);
			bad = 1;
		}
	free(a);
	free(b);
	return bad;
}

static int compare(const char *step, const outs_t *p, const outs_t *e, int bwd)
{
	if (!bwd)
		return same(step, "y", p->y, e->y, NX) | same(step, "rmean", p->rmean, e->rmean, np) |
		       same(step, "rvar", p->rvar, e->rvar, np) |
		       same(step, "smean", p->smean, e->smean, np) |
		       same(step, "sinvvar", p->sinv, e->sinv, np);
	return same(step, "dx", p->dx, e->dx, NX) | same(step, "dscale", p->dscale, e->dscale, np) |
	       same(step, "dbias", p->dbias, e->dbias, np);
}

int main(int argc, char **argv)
{
	const char *mname = argc > 1 ? argv[1] : "spatial";
	cudnnBatchNormMode_t mode;
	const cudnnBatchNormOps_t ops = CUDNN_BATCHNORM_OPS_BN;
	const float one = 1.0f, zero = 0.0f;
	const double factor = 0.1, eps = 1e-5;
	float hx[NX], hdy[NX], hy[NX], hp[C * H * W], hs[C * H * W];
	size_t wsf_b, wsb_b, rs_b;
	cudnnHandle_t h;
	cudnnTensorDescriptor_t xd, pd;
	outs_t P, E;
	int bad = 0;

	if (strcmp(mname, "spatial") == 0) {
		mode = CUDNN_BATCHNORM_SPATIAL;
		np = C;
	} else if (strcmp(mname, "per-activation") == 0) {
		mode = CUDNN_BATCHNORM_PER_ACTIVATION;
		np = C * H * W;
	} else {
		fprintf(stderr, "bnprog: unknown mode '%s'; expected spatial or per-activation\n",
			mname);
		return 2;
	}
	for (int i = 0; i < NX; i++) {
		hx[i] = (float)((i * 7) % 11) * 0.25f - 1.0f;
		hdy[i] = (float)((i * 5) % 13) * 0.125f - 0.75f;
		hy[i] = (float)(i % 3) - 1.0f;
	}
	for (size_t i = 0; i < np; i++) {
		hp[i] = 0.5f + 0.125f * (float)i;
		hs[i] = 1.0f - 0.0625f * (float)i;
	}
	CK(cudnnCreate(&h));
	CK(cudnnCreateTensorDescriptor(&xd));
	CK(cudnnCreateTensorDescriptor(&pd));
	CK(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, C, H, W));
	CK(cudnnDeriveBNTensorDescriptor(pd, xd, mode));
	float *x = dev(NX, hx), *dy = dev(NX, hdy), *z = dev(NX, hdy), *dz = dev(NX, NULL);
	float *scale = dev(np, hs), *bias = dev(np, hp);
	outs_alloc(&P, hy, hp);
	outs_alloc(&E, hy, hp);
	CK(cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(h, mode, ops, xd, NULL, xd, pd,
								     NULL, &wsf_b));
	CK(cudnnGetBatchNormalizationBackwardExWorkspaceSize(h, mode, ops, xd, NULL, xd, NULL, xd,
							      pd, NULL, &wsb_b));
	CK(cudnnGetBatchNormalizationTrainingExReserveSpaceSize(h, mode, ops, NULL, xd, &rs_b));
	void *wsf, *wsb, *rs;
	CHECK(cudaMalloc(&wsf, wsf_b));
	CHECK(cudaMalloc(&wsb, wsb_b));
	CHECK(cudaMalloc(&rs, rs_b));

	/* fwd1: PyTorch's call */
	CK(cudnnBatchNormalizationForwardTraining(h, mode, &one, &zero, xd, x, xd, P.y, pd, scale,
						  bias, factor, P.rmean, P.rvar, eps, P.smean, P.sinv));
	CK(cudnnBatchNormalizationForwardTrainingEx(h, mode, ops, &one, &zero, xd, x, NULL, NULL,
						    xd, E.y, pd, scale, bias, factor, E.rmean,
						    E.rvar, eps, E.smean, E.sinv, NULL, wsf, wsf_b,
						    rs, rs_b));
	bad |= compare("fwd1", &P, &E, 0);
	/* fwd2: blends into y; z is given (unused by CUDNN_BATCHNORM_OPS_BN) */
	CK(cudnnBatchNormalizationForwardTraining(h, mode, &one, &one, xd, x, xd, P.y, pd, scale,
						  bias, factor, P.rmean, P.rvar, eps, P.smean, P.sinv));
	CK(cudnnBatchNormalizationForwardTrainingEx(h, mode, ops, &one, &one, xd, x, xd, z, xd,
						    E.y, pd, scale, bias, factor, E.rmean, E.rvar,
						    eps, E.smean, E.sinv, NULL, wsf, wsf_b, rs,
						    rs_b));
	bad |= compare("fwd2", &P, &E, 0);
	/* bwd1: PyTorch's call */
	CK(cudnnBatchNormalizationBackward(h, mode, &one, &zero, &one, &zero, xd, x, xd, dy, xd,
					   P.dx, pd, scale, P.dscale, P.dbias, eps, P.smean,
					   P.sinv));
	CK(cudnnBatchNormalizationBackwardEx(h, mode, ops, &one, &zero, &one, &zero, xd, x, NULL,
					     NULL, xd, dy, NULL, NULL, xd, E.dx, pd, scale, bias,
					     E.dscale, E.dbias, eps, E.smean, E.sinv, NULL, wsb,
					     wsb_b, rs, rs_b));
	bad |= compare("bwd1", &P, &E, 1);
	/* bwd2: accumulates into dx, dscale, dbias; y and dz given */
	CK(cudnnBatchNormalizationBackward(h, mode, &one, &one, &one, &one, xd, x, xd, dy, xd,
					   P.dx, pd, scale, P.dscale, P.dbias, eps, P.smean,
					   P.sinv));
	CK(cudnnBatchNormalizationBackwardEx(h, mode, ops, &one, &one, &one, &one, xd, x, xd, E.y,
					     xd, dy, xd, dz, xd, E.dx, pd, scale, bias, E.dscale,
					     E.dbias, eps, E.smean, E.sinv, NULL, wsb, wsb_b, rs,
					     rs_b));
	bad |= compare("bwd2", &P, &E, 1);
	if (bad)
		return 1;
	CHECK(cudaDeviceSynchronize());
	printf("x=%p z=%p dy=%p dz=%p scale=%p bias=%p y=%p rmean=%p rvar=%p smean=%p "
	       "sinvvar=%p dx=%p dscale=%p dbias=%p wsf=%p wsb=%p reserve=%p\n",
	       (void *)x, (void *)z, (void *)dy, (void *)dz, (void *)scale, (void *)bias,
	       (void *)E.y, (void *)E.rmean, (void *)E.rvar, (void *)E.smean, (void *)E.sinv,
	       (void *)E.dx, (void *)E.dscale, (void *)E.dbias, wsf, wsb, rs);
	printf("x_bytes=%zu param_bytes=%zu wsf_bytes=%zu wsb_bytes=%zu reserve_bytes=%zu\n",
	       (size_t)NX * sizeof(float), np * sizeof(float), wsf_b, wsb_b, rs_b);
	cudnnDestroyTensorDescriptor(xd);
	cudnnDestroyTensorDescriptor(pd);
	cudnnDestroy(h);
	printf("ok\n");
	return 0;
}
