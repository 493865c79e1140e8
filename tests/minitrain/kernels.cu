// tests/minitrain/kernels.cu - minitrain's elementwise kernels.
//
// Compiled with `nvcc -ptx -arch=compute_80` at build time and embedded in
// minitrain as a string; loaded with cudaLibraryLoadData and looked up with
// cudaLibraryGetKernel.  The names and parameter lists are a contract with
// the simulated GPU (tests/simgpu/kernels.c), which runs host versions of
// them.  Grid-stride loops: any grid size is correct.  No atomics, so every
// result is deterministic; the loss is reduced on the host.

#define MT_FOR(i, n) \
	for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; \
	     i < (n); i += (unsigned long long)gridDim.x * blockDim.x)

// SGD with momentum and weight decay: v = m*v + dw + wd*w; w -= lr*v.
extern "C" __global__ void mt_sgd_momentum(float *w, float *v, const float *dw,
					   float lr, float momentum,
					   float weight_decay,
					   unsigned long long n)
{
	MT_FOR(i, n) {
		float vi = momentum * v[i] + dw[i] + weight_decay * w[i];
		v[i] = vi;
		w[i] = w[i] - lr * vi;
	}
}

// Softmax cross-entropy gradient and per-sample loss.
extern "C" __global__ void mt_xent_grad(const float *prob, const int *labels,
					float *dlogits, float *sample_loss,
					int batch, int classes, float scale)
{
	MT_FOR(i, (unsigned long long)batch * classes) {
		int b = (int)(i / classes), c = (int)(i % classes);
		float p = prob[i];
		dlogits[i] = (p - (c == labels[b] ? 1.0f : 0.0f)) * scale;
		if (c == labels[b])
			sample_loss[b] = -logf(fmaxf(p, 1e-12f));
	}
}

// Concat forward: src's channels into dst at channel offset c_off.
extern "C" __global__ void mt_channel_copy(float *dst, const float *src, int n,
					   int c_src, int c_dst, int c_off,
					   int hw, int accumulate)
{
	MT_FOR(i, (unsigned long long)n * c_src * hw) {
		unsigned long long p = i % hw, c = (i / hw) % c_src, im = i / ((unsigned long long)hw * c_src);
		unsigned long long d = ((im * c_dst) + c_off + c) * hw + p;
		dst[d] = accumulate ? dst[d] + src[i] : src[i];
	}
}

// Concat backward: a channel slice of src (at c_off) into dst.
extern "C" __global__ void mt_channel_slice(float *dst, const float *src, int n,
					    int c_dst, int c_src, int c_off,
					    int hw, int accumulate)
{
	MT_FOR(i, (unsigned long long)n * c_dst * hw) {
		unsigned long long p = i % hw, c = (i / hw) % c_dst, im = i / ((unsigned long long)hw * c_dst);
		unsigned long long s = ((im * c_src) + c_off + c) * hw + p;
		dst[i] = accumulate ? dst[i] + src[s] : src[s];
	}
}

extern "C" __global__ void mt_fill(float *p, float value, unsigned long long n)
{
	MT_FOR(i, n)
		p[i] = value;
}

// Parameter-scanning test kernel (see tests/simgpu): c is never dereferenced.
extern "C" __global__ void mt_probe(float *a, unsigned long long x, float *b,
				    int y, double z, const void *c)
{
	(void)x;
	(void)c;
	if (blockIdx.x == 0 && threadIdx.x == 0) {
		a[0] = (float)y;
		b[0] = (float)z;
	}
}

// PyTorch's foreach add, _foreach_add_(a, b, alpha): a[i] += alpha * b[i]
// over lists of tensors, under PyTorch's own template names and parameter
// layout (ATen/native/cuda/MultiTensorApply.cuh, ForeachFunctors.cuh) so
// that vmem's bound on its scanned arguments (interpose/kernel_bounds.h)
// applies as it does to PyTorch's optimizers (minitrain --optim foreach).
// Written from the layout, not PyTorch's code: block k adds chunk
// block_to_chunk[k] (65536 elements) of tensor block_to_tensor[k].  Named
// in at::native itself (PyTorch's sit in a per-file anonymous namespace,
// whose name nvcc derives from the file).
#include <functional>
#include <type_traits>

namespace at {
namespace native {

template <int n, bool large_kernel_arg>
struct TensorListMetadata {
	const void *addresses[n][64];
	long long numel_for_tensor[64];
	unsigned char block_to_tensor[320];
	int block_to_chunk[320];
	int start_tensor_this_launch;
};

template <typename T, int depth, int r_args_depth, int res_arg_index>
struct BinaryOpListAlphaFunctor {
	static constexpr bool use_large_kernel_arg = false;
	__device__ void operator()(int chunk_size, TensorListMetadata<depth, false> &tl,
				   std::plus<float>, float alpha)
	{
		int t = tl.block_to_tensor[blockIdx.x];
		long long lo = (long long)tl.block_to_chunk[blockIdx.x] * chunk_size;
		long long hi = lo + chunk_size < tl.numel_for_tensor[t] ? lo + chunk_size
									 : tl.numel_for_tensor[t];
		T *a = (T *)tl.addresses[0][t];
		const T *b = (const T *)tl.addresses[1][t];

		for (long long i = lo + threadIdx.x; i < hi; i += blockDim.x)
			a[i] += alpha * b[i];
	}
};

template <typename T, typename U, typename... ArgTypes>
__global__ typename std::enable_if<!U::use_large_kernel_arg, void>::type
multi_tensor_apply_kernel(T tensorListMeta, U callable, ArgTypes... args)
{
	callable(65536, tensorListMeta, args...);
}

template __global__ void
multi_tensor_apply_kernel<TensorListMetadata<2, false>, BinaryOpListAlphaFunctor<float, 2, 2, 0>,
			  std::plus<float>, float>(TensorListMetadata<2, false>,
						   BinaryOpListAlphaFunctor<float, 2, 2, 0>,
						   std::plus<float>, float);

}  // namespace native
}  // namespace at
