/* interpose/hook_cudnn_backend.c - the cuDNN graph (backend) API.
 *
 * PyTorch's default convolution path (cudnn-frontend over cuDNN 9)
 * describes a convolution with backend descriptors and runs it with
 * cudnnBackendExecute(handle, plan, variantPack).  The variant pack holds
 * only (uid, pointer) pairs, and the uids' meaning changes per operation
 * (docs/cudnn-graph.md).  So vmem follows the descriptors as they are
 * built: Create, SetAttribute, GetAttribute (heuristics results) and
 * Destroy feed the side table of hook_dnn.c, which at Execute yields the
 * op kind and each pointer's role, access and extent.
 *
 * Only Execute is an event in the trace: building descriptors touches no
 * device memory.  Convolutions are decided in interpose/conv_graph.c: a
 * finalized conv plan is benchmarked under VMEM_WORKSPACE=wr|wd, its
 * workspace size and the engine heuristics' order are answered there, and
 * Execute may run vmem's own plans (micro-batches, or an engine whose
 * workspace fits the budget).  Descriptor calls made while vmem is disabled or from
 * inside vmem are not followed; a plan vmem never saw built executes as
 * kind "other" with every pointer read-write, which is slow but safe.
 */
#include <pthread.h>
#include <string.h>

#include <cudnn.h>

#include "interpose/conv_exec.h"
#include "interpose/hook_dnn.h"
#include "interpose/hooks.h"
#include "interpose/log.h"

#define HOOK_EXPORT __attribute__((visibility("default")))

#define CUDNN_BACKEND_REALS(X)                                                            \
	X(cudnnGetStream, cudnnStatus_t, (cudnnHandle_t h, cudaStream_t *s), (h, s))       \
	X(cudnnBackendCreateDescriptor, cudnnStatus_t,                                     \
	  (cudnnBackendDescriptorType_t type, cudnnBackendDescriptor_t *d), (type, d))     \
	X(cudnnBackendDestroyDescriptor, cudnnStatus_t, (cudnnBackendDescriptor_t d), (d)) \
	X(cudnnBackendFinalize, cudnnStatus_t, (cudnnBackendDescriptor_t d), (d))          \
	X(cudnnBackendSetAttribute, cudnnStatus_t,                                         \
	  (cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,                   \
	   cudnnBackendAttributeType_t type, int64_t count, const void *elems),            \
	  (d, name, type, count, elems))                                                   \
	X(cudnnBackendGetAttribute, cudnnStatus_t,                                         \
	  (cudnnBackendDescriptor_t const d, cudnnBackendAttributeName_t name,             \
	   cudnnBackendAttributeType_t type, int64_t req, int64_t *count, void *elems),    \
	  (d, name, type, req, count, elems))                                              \
	X(cudnnBackendExecute, cudnnStatus_t,                                              \
	  (cudnnHandle_t h, cudnnBackendDescriptor_t plan, cudnnBackendDescriptor_t vp),   \
	  (h, plan, vp))

#define CUDNN_BACKEND_REAL(name, ret, params, args) \
	HOOK_DEFINE_REAL(HOOK_LIB_CUDNN, name, ret, params, args)
CUDNN_BACKEND_REALS(CUDNN_BACKEND_REAL)

#define DNN_MISSING(name) \
	((cudnnStatus_t)hook_missing(name, CUDNN_STATUS_NOT_INITIALIZED))

/* At most this many descriptors are followed at once (under 500 bytes
 * each, so at most 32 MiB); PyTorch keeps up to 10000 cached plans by
 * default (TORCH_CUDNN_V8_API_LRU_CACHE_LIMIT), each holding a plan, an
 * engine config and an engine. */
#define BDT_MAX_ENTRIES 65536

static hook_bdt_t *bdt;
static pthread_once_t bdt_once = PTHREAD_ONCE_INIT;

static void bdt_fork_prepare(void) { hook_bdt_atfork_prepare(bdt); }
static void bdt_fork_parent(void) { hook_bdt_atfork_parent(bdt); }
static void bdt_fork_child(void) { hook_bdt_atfork_child(bdt); }

/* Runs once (bdt_once).  The fork handlers are registered only once the
 * table exists, so they never see it appear half-way through a fork. */
static void bdt_init(void)
{
	bdt = hook_bdt_new(BDT_MAX_ENTRIES);
	if (!bdt) {
		vmem_warn("cuDNN graph API: no memory for the descriptor table; "
			  "cudnnBackendExecute calls are traced as \"other\"");
		return;
	}
	pthread_atfork(bdt_fork_prepare, bdt_fork_parent, bdt_fork_child);
}

static hook_bdt_t *table(void)
{
	pthread_once(&bdt_once, bdt_init);
	return bdt;
}

HOOK_EXPORT cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t descriptorType,
						    cudnnBackendDescriptor_t *descriptor)
{
	real_cudnnBackendCreateDescriptor_t real = real_cudnnBackendCreateDescriptor();
	cudnnStatus_t st;

	if (!real)
		return DNN_MISSING("cudnnBackendCreateDescriptor");
	if (!hook_begin())
		return real(descriptorType, descriptor);
	st = real(descriptorType, descriptor);
	if (st == CUDNN_STATUS_SUCCESS && descriptor &&
	    !hook_bdt_create(table(), (uintptr_t)*descriptor, (int)descriptorType))
		vmem_debug("cuDNN graph API: descriptor table full, %p not followed",
			   (void *)*descriptor);
	hook_end();
	return st;
}

HOOK_EXPORT cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t descriptor)
{
	real_cudnnBackendDestroyDescriptor_t real = real_cudnnBackendDestroyDescriptor();
	cudnnStatus_t st;

	if (!real)
		return DNN_MISSING("cudnnBackendDestroyDescriptor");
	if (!hook_begin())
		return real(descriptor);
	/* forget first: once destroyed, cuDNN may hand the same handle to
	 * another thread's Create */
	hook_bdt_destroy(table(), (uintptr_t)descriptor);
	st = real(descriptor);
	hook_end();
	return st;
}

HOOK_EXPORT cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t descriptor,
						cudnnBackendAttributeName_t attributeName,
						cudnnBackendAttributeType_t attributeType,
						int64_t elementCount, const void *arrayOfElements)
{
	real_cudnnBackendSetAttribute_t real = real_cudnnBackendSetAttribute();
	cudnnStatus_t st;

	if (!real)
		return DNN_MISSING("cudnnBackendSetAttribute");
	if (!hook_begin())
		return real(descriptor, attributeName, attributeType, elementCount,
			    arrayOfElements);
	st = real(descriptor, attributeName, attributeType, elementCount, arrayOfElements);
	if (st == CUDNN_STATUS_SUCCESS)
		hook_bdt_set(table(), (uintptr_t)descriptor, (int)attributeName,
			     (int)attributeType, elementCount, arrayOfElements);
	hook_end();
	return st;
}

HOOK_EXPORT cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const descriptor,
						cudnnBackendAttributeName_t attributeName,
						cudnnBackendAttributeType_t attributeType,
						int64_t requestedElementCount,
						int64_t *elementCount, void *arrayOfElements)
{
	real_cudnnBackendGetAttribute_t real = real_cudnnBackendGetAttribute();
	cudnnStatus_t st;
	int64_t n;

	if (!real)
		return DNN_MISSING("cudnnBackendGetAttribute");
	if (!hook_begin())
		return real(descriptor, attributeName, attributeType, requestedElementCount,
			    elementCount, arrayOfElements);
	st = real(descriptor, attributeName, attributeType, requestedElementCount, elementCount,
		  arrayOfElements);
	if (st == CUDNN_STATUS_SUCCESS && arrayOfElements) {
		/* elementCount may be NULL (cudnn-frontend passes NULL when it
		 * asks for exactly one element) */
		n = requestedElementCount;
		if (elementCount && *elementCount < n)
			n = *elementCount;
		/* vmem's answer (plan workspace, heuristics order) first, so the
		 * table records what the application was told */
		conv_exec_graph_get(table(), descriptor, (int)attributeName, (int)attributeType, n,
				    arrayOfElements);
		hook_bdt_get(table(), (uintptr_t)descriptor, (int)attributeName,
			     (int)attributeType, n, arrayOfElements);
	}
	hook_end();
	return st;
}

HOOK_EXPORT cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t descriptor)
{
	real_cudnnBackendFinalize_t real = real_cudnnBackendFinalize();
	real_cudnnBackendGetAttribute_t get;
	cudnnStatus_t st;
	int64_t ws = 0, n = 0;

	if (!real)
		return DNN_MISSING("cudnnBackendFinalize");
	if (!hook_begin())
		return real(descriptor);
	st = real(descriptor);
	/* The plan's workspace size sizes the "ws" ref at Execute; the
	 * application may never ask for it itself. */
	if (st == CUDNN_STATUS_SUCCESS &&
	    hook_bdt_type(table(), (uintptr_t)descriptor) ==
		    CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR &&
	    (get = real_cudnnBackendGetAttribute()) != NULL &&
	    get(descriptor, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n,
		&ws) == CUDNN_STATUS_SUCCESS &&
	    n == 1 && ws >= 0) {
		hook_bdt_set_ws(table(), (uintptr_t)descriptor, (uint64_t)ws);
		conv_exec_graph_finalized(table(), descriptor);
	}
	hook_end();
	return st;
}

HOOK_EXPORT cudnnStatus_t cudnnBackendExecute(cudnnHandle_t handle,
					   cudnnBackendDescriptor_t executionPlan,
					   cudnnBackendDescriptor_t variantPack)
{
	real_cudnnBackendExecute_t real = real_cudnnBackendExecute();
	real_cudnnGetStream_t get_stream = real_cudnnGetStream();
	cudaStream_t stream = NULL;
	hook_bdt_exec_t ex;
	hook_call_t c;
	cudnnStatus_t st = CUDNN_STATUS_ALLOC_FAILED;

	if (!real)
		return DNN_MISSING("cudnnBackendExecute");
	if (!hook_begin())
		return real(handle, executionPlan, variantPack);
	if (get_stream && get_stream(handle, &stream) != CUDNN_STATUS_SUCCESS)
		stream = NULL;
	hook_bdt_execute(table(), (uintptr_t)executionPlan, (uintptr_t)variantPack, &ex);
	hook_call_init(&c, ex.kind, "cudnnBackendExecute", stream);
	c.refs_lost = ex.refs_lost;
	for (int i = 0; i < ex.nrefs; i++)
		hook_call_ref(&c, (const void *)ex.refs[i].ptr, ex.refs[i].bytes,
			      ex.refs[i].access, ex.refs[i].role);
	hook_call_args(&c, "\"plan\":\"%s\",\"ws\":%llu", ex.known_plan ? "known" : "unknown",
		       (unsigned long long)ex.ws_bytes);
	if (ex.have_conv) {
		vmem_conv_info_t *ci = &c.info.u.conv;

		c.info.type = VMEM_INFO_CONV;
		ci->dir = ex.kind == VMEM_OP_CONV_BWD_DATA ? VMEM_CONV_DIR_BWD_DATA :
			  ex.kind == VMEM_OP_CONV_BWD_FILTER ? VMEM_CONV_DIR_BWD_FILTER :
							       VMEM_CONV_DIR_FWD;
		ci->n = (int32_t)ex.conv[0];
		ci->c = (int32_t)ex.conv[1];
		ci->h = (int32_t)ex.conv[2];
		ci->w = (int32_t)ex.conv[3];
		ci->k = (int32_t)ex.conv[4];
		ci->r = (int32_t)ex.conv[5];
		ci->s = (int32_t)ex.conv[6];
		ci->algo = -1;   /* the graph API has engines */
		ci->workspace = ex.ws_bytes;
		ci->dtype = (uint8_t)hook_cudnn_dtype(ex.conv_dtype);
	}
	if (ex.have_conv)
		hook_call_args(&c, "\"n\":%lld,\"c\":%lld,\"h\":%lld,\"w\":%lld,"
				   "\"k\":%lld,\"r\":%lld,\"s\":%lld",
			       (long long)ex.conv[0], (long long)ex.conv[1], (long long)ex.conv[2],
			       (long long)ex.conv[3], (long long)ex.conv[4], (long long)ex.conv[5],
			       (long long)ex.conv[6]);
	/* prepares, runs (the plan, or vmem's plans for a convolution) and finishes */
	st = conv_exec_graph(&c, table(), handle, executionPlan, variantPack, &ex);
	hook_end();
	return st;
}
