/* tests/sim/interpose_dnn/callcount.c - an independent count of the cuDNN
 * and cuBLAS calls a program makes, to check that vmem's trace has exactly
 * one op event per call.
 *
 * Preloaded in front of libvmem.so (LD_PRELOAD=callcount.so:libvmem.so),
 * each listed function is a two-instruction x86-64 stub: count the call,
 * jump to the next definition (libvmem's hook).  The stub touches neither
 * argument registers nor the stack, so any signature (doubles, stack
 * arguments) passes through unchanged; no prototype is needed.  At exit
 * the counts go to the file named by CALLCOUNT_OUT, one "name count" line
 * each.  x86-64 Linux only (the runner skips elsewhere).
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define CC_NAMES(X)                                        \
	X(0, cudnnConvolutionForward)                      \
	X(1, cudnnConvolutionBackwardData)                 \
	X(2, cudnnConvolutionBackwardFilter)               \
	X(3, cudnnConvolutionBackwardBias)                 \
	X(4, cudnnAddTensor)                               \
	X(5, cudnnActivationForward)                       \
	X(6, cudnnActivationBackward)                      \
	X(7, cudnnPoolingForward)                          \
	X(8, cudnnPoolingBackward)                         \
	X(9, cudnnSoftmaxForward)                          \
	X(10, cudnnBatchNormalizationForwardTraining)      \
	X(11, cudnnBatchNormalizationForwardInference)     \
	X(12, cudnnBatchNormalizationBackward)             \
	X(13, cudnnGetConvolutionForwardAlgorithm_v7)      \
	X(14, cudnnGetConvolutionBackwardDataAlgorithm_v7) \
	X(15, cudnnGetConvolutionBackwardFilterAlgorithm_v7) \
	X(16, cudnnFindConvolutionForwardAlgorithm)        \
	X(17, cudnnFindConvolutionBackwardDataAlgorithm)   \
	X(18, cudnnFindConvolutionBackwardFilterAlgorithm) \
	X(19, cudnnGetConvolutionForwardWorkspaceSize)     \
	X(20, cudnnGetConvolutionBackwardDataWorkspaceSize) \
	X(21, cudnnGetConvolutionBackwardFilterWorkspaceSize) \
	X(22, cudnnSetStream)                              \
	X(23, cudnnBackendExecute)                         \
	X(24, cublasSgemm_v2)                              \
	X(25, cublasGemmEx)                                \
	X(26, cublasSaxpy_v2)                              \
	X(27, cublasSscal_v2)                              \
	X(28, cublasSetStream_v2)                          \
	X(29, cublasLtMatmul)

#define CC_N 30

__attribute__((visibility("hidden"), used)) uint64_t cc_count[CC_N];
__attribute__((visibility("hidden"), used)) void *cc_real[CC_N];

#define CC_STUB(i, name)                                                    \
	__asm__(".text\n"                                                   \
		".globl " #name "\n"                                        \
		".type " #name ", @function\n" #name ":\n"                  \
		"\tlock incq cc_count+8*" #i "(%rip)\n"                     \
		"\tjmp *cc_real+8*" #i "(%rip)\n"                           \
		".size " #name ", .-" #name "\n");
CC_NAMES(CC_STUB)

static const char *const cc_name[CC_N] = {
#define CC_NAME(i, name) [i] = #name,
	CC_NAMES(CC_NAME)
};

/* Where a function nobody defines lands: say which and stop loudly. */
static void cc_missing(void)
{
	static const char msg[] = "callcount: called a function no library defines\n";

	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(98);
	_exit(99);
}

/* Every object of the program is mapped before any constructor runs, so
 * the next definitions are all found here. */
__attribute__((constructor)) static void cc_init(void)
{
	for (int i = 0; i < CC_N; i++) {
		cc_real[i] = dlsym(RTLD_NEXT, cc_name[i]);
		if (!cc_real[i])
			cc_real[i] = (void *)cc_missing;
	}
}

__attribute__((destructor)) static void cc_fini(void)
{
	const char *path = getenv("CALLCOUNT_OUT");
	FILE *f;

	if (!path || !(f = fopen(path, "w")))
		return;
	for (int i = 0; i < CC_N; i++)
		fprintf(f, "%s %llu\n", cc_name[i],
			(unsigned long long)__atomic_load_n(&cc_count[i], __ATOMIC_RELAXED));
	fclose(f);
}
