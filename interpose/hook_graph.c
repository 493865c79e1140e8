/* interpose/hook_graph.c - CUDA runtime hooks for stream capture and
 * graphs.
 *
 * A captured call runs at cudaGraphLaunch, when vmem sees no call: the
 * hooks of the captured calls record their ranges into the capture
 * (hooks.c, runtime_capture_note); these hooks follow the capture into its
 * graph and instantiations, and prepare each launch like one call that
 * touches all of the graph's ranges (resident and locked for the launch,
 * the launch stream waiting for the fault-in copies, the use fenced on
 * it).  Begin/end also tell the runtime when captures are active, so its
 * own calls stay out of the application's capture (runtime.h).
 */
#include <cuda_runtime_api.h>

#include "interpose/hooks.h"
#include "interpose/runtime.h"

#define HOOK_EXPORT __attribute__((visibility("default")))

#define GRAPH_REALS(X)                                                                \
	X(cudaStreamBeginCapture, cudaError_t,                                        \
	  (cudaStream_t s, enum cudaStreamCaptureMode m), (s, m))                     \
	X(cudaStreamBeginCapture_ptsz, cudaError_t,                                   \
	  (cudaStream_t s, enum cudaStreamCaptureMode m), (s, m))                     \
	X(cudaStreamEndCapture, cudaError_t, (cudaStream_t s, cudaGraph_t *g), (s, g)) \
	X(cudaStreamEndCapture_ptsz, cudaError_t, (cudaStream_t s, cudaGraph_t *g), (s, g)) \
	X(cudaGraphInstantiate, cudaError_t,                                          \
	  (cudaGraphExec_t *x, cudaGraph_t g, unsigned long long f), (x, g, f))       \
	X(cudaGraphInstantiateWithFlags, cudaError_t,                                 \
	  (cudaGraphExec_t *x, cudaGraph_t g, unsigned long long f), (x, g, f))       \
	X(cudaGraphLaunch, cudaError_t, (cudaGraphExec_t x, cudaStream_t s), (x, s))  \
	X(cudaGraphLaunch_ptsz, cudaError_t, (cudaGraphExec_t x, cudaStream_t s), (x, s)) \
	X(cudaGraphExecDestroy, cudaError_t, (cudaGraphExec_t x), (x))               \
	X(cudaGraphDestroy, cudaError_t, (cudaGraph_t g), (g))

#define GRAPH_REAL(name, ret, params, args) HOOK_DEFINE_REAL(HOOK_LIB_CUDART, name, ret, params, args)
GRAPH_REALS(GRAPH_REAL)

#define MISSING(name) ((cudaError_t)hook_missing(#name, cudaErrorSymbolNotFound))
/* _ptsz: a NULL stream is the calling thread's per-thread default stream */
#define PTSZ(s) ((s) ? (s) : cudaStreamPerThread)

static cudaError_t begin(cudaError_t (*real)(cudaStream_t, enum cudaStreamCaptureMode),
			 cudaStream_t s, cudaStream_t query, enum cudaStreamCaptureMode m)
{
	cudaError_t st;

	if (!hook_begin())
		return real(s, m);
	st = real(s, m);
	if (st == cudaSuccess && runtime_active())
		runtime_capture_begin(query);
	hook_end();
	return st;
}

HOOK_EXPORT cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode m)
{
	real_cudaStreamBeginCapture_t real = real_cudaStreamBeginCapture();

	if (!real)
		return MISSING(cudaStreamBeginCapture);
	return begin(real, s, s, m);
}

HOOK_EXPORT cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t s, enum cudaStreamCaptureMode m)
{
	real_cudaStreamBeginCapture_ptsz_t real = real_cudaStreamBeginCapture_ptsz();

	if (!real)
		return MISSING(cudaStreamBeginCapture_ptsz);
	return begin(real, s, PTSZ(s), m);
}

static cudaError_t end(cudaError_t (*real)(cudaStream_t, cudaGraph_t *), cudaStream_t s,
		       cudaStream_t query, cudaGraph_t *g)
{
	uint64_t id;
	cudaError_t st;

	if (!hook_begin())
		return real(s, g);
	/* the capture's id is gone once it ended */
	id = runtime_active() ? runtime_capture_id(query) : 0;
	st = real(s, g);
	if (id)
		runtime_capture_end(id, st == cudaSuccess && g ? *g : NULL);
	hook_end();
	return st;
}

HOOK_EXPORT cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g)
{
	real_cudaStreamEndCapture_t real = real_cudaStreamEndCapture();

	if (!real)
		return MISSING(cudaStreamEndCapture);
	return end(real, s, s, g);
}

HOOK_EXPORT cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t s, cudaGraph_t *g)
{
	real_cudaStreamEndCapture_ptsz_t real = real_cudaStreamEndCapture_ptsz();

	if (!real)
		return MISSING(cudaStreamEndCapture_ptsz);
	return end(real, s, PTSZ(s), g);
}

static cudaError_t instantiate(cudaError_t (*real)(cudaGraphExec_t *, cudaGraph_t,
						   unsigned long long),
			       cudaGraphExec_t *x, cudaGraph_t g, unsigned long long f)
{
	cudaError_t st;

	if (!hook_begin())
		return real(x, g, f);
	st = real(x, g, f);
	if (st == cudaSuccess && x && runtime_active())
		runtime_graph_instantiate(g, *x);
	hook_end();
	return st;
}

HOOK_EXPORT cudaError_t cudaGraphInstantiate(cudaGraphExec_t *x, cudaGraph_t g,
					     unsigned long long f)
{
	real_cudaGraphInstantiate_t real = real_cudaGraphInstantiate();

	if (!real)
		return MISSING(cudaGraphInstantiate);
	return instantiate(real, x, g, f);
}

HOOK_EXPORT cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *x, cudaGraph_t g,
						      unsigned long long f)
{
	real_cudaGraphInstantiateWithFlags_t real = real_cudaGraphInstantiateWithFlags();

	if (!real)
		return MISSING(cudaGraphInstantiateWithFlags);
	return instantiate(real, x, g, f);
}

static void add_ref(void *ctx, uintptr_t ptr, uint64_t bytes, uint8_t access)
{
	hook_call_ref(ctx, (const void *)ptr, bytes, access, "graph");
}

/* One launch = one call touching every range the graph captured: a graph
 * whose ranges cannot be resident together within the budget cannot run
 * (cudaErrorMemoryAllocation, the graph untouched). */
static cudaError_t launch(cudaError_t (*real)(cudaGraphExec_t, cudaStream_t), const char *api,
			  cudaGraphExec_t x, cudaStream_t s, cudaStream_t on)
{
	hook_call_t c;
	cudaError_t st;

	if (!hook_begin())
		return real(x, s);
	hook_call_init(&c, VMEM_OP_LAUNCH, api, on);
	if (runtime_active()) {
		runtime_graph_each_ref(x, add_ref, &c);
		/* a captured call vmem could not see into runs again */
		c.unseen = runtime_graph_unseen(x);
	}
	st = hook_call_prepare(&c);
	if (st == cudaSuccess)
		st = real(x, s);
	else
		hook_set_last_error_oom();
	hook_call_finish(&c);
	hook_end();
	return st;
}

HOOK_EXPORT cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t s)
{
	real_cudaGraphLaunch_t real = real_cudaGraphLaunch();

	if (!real)
		return MISSING(cudaGraphLaunch);
	return launch(real, "cudaGraphLaunch", x, s, s);
}

HOOK_EXPORT cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t x, cudaStream_t s)
{
	real_cudaGraphLaunch_ptsz_t real = real_cudaGraphLaunch_ptsz();

	if (!real)
		return MISSING(cudaGraphLaunch_ptsz);
	return launch(real, "cudaGraphLaunch_ptsz", x, s, PTSZ(s));
}

HOOK_EXPORT cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x)
{
	real_cudaGraphExecDestroy_t real = real_cudaGraphExecDestroy();
	cudaError_t st;

	if (!real)
		return MISSING(cudaGraphExecDestroy);
	if (!hook_begin())
		return real(x);
	st = real(x);
	if (st == cudaSuccess && runtime_active())
		runtime_graph_forget(x);
	hook_end();
	return st;
}

HOOK_EXPORT cudaError_t cudaGraphDestroy(cudaGraph_t g)
{
	real_cudaGraphDestroy_t real = real_cudaGraphDestroy();
	cudaError_t st;

	if (!real)
		return MISSING(cudaGraphDestroy);
	if (!hook_begin())
		return real(g);
	st = real(g);
	if (st == cudaSuccess && runtime_active())
		runtime_graph_forget(g);
	hook_end();
	return st;
}
