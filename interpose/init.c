/* interpose/init.c - start-up and exit of libvmem.so.
 *
 * Two phases, because LD_PRELOAD is inherited by every process a job
 * starts (shells, compilers, `nvidia-smi`), most of which never touch the
 * GPU:
 *  - the constructor reads the configuration (cheap, no CUDA), so a bad
 *    VMEM_* value is reported at start-up by the process that has it;
 *  - the first hooked call runs vmem_startup (pthread_once, re-entry guard
 *    set): runtime_init (reserves the pool's range, creates the CUDA
 *    context), then the trace, whose header asks the real CUDA for the
 *    device.  A process that never calls CUDA never creates a context.
 * Exit: vmem_shutdown runs from an atexit handler registered at the end
 * of vmem_startup -- after the CUDA runtime registered its own teardown,
 * so it runs first, while CUDA still works -- or from the destructor when
 * start-up never happened.
 */
#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <library_types.h>

#include "interpose/config.h"
#include "interpose/hooks.h"
#include "interpose/log.h"
#include "interpose/runtime.h"
#include "interpose/stats.h"
#include "interpose/trace.h"

static pthread_once_t config_once = PTHREAD_ONCE_INIT;
static bool config_ok;
static bool started;
static bool shut_down;

static const char *env_get(const char *name, void *ctx)
{
	(void)ctx;
	return getenv(name);
}

static void env_err(const char *line, void *ctx)
{
	(void)ctx;
	vmem_error("%s (vmem stays pass-through)", line);
}

static void config_read(void)
{
	int bad = vmem_config_parse(&vmem_cfg, env_get, NULL, env_err, NULL);

	vmem_log_set_level(vmem_cfg.log_level);
	config_ok = bad == 0;
	vmem_config_print(&vmem_cfg);
}

static void stats_line(const char *line, void *ctx)
{
	(void)ctx;
	vmem_log_raw(line);
}

void vmem_shutdown(void)
{
	if (__atomic_exchange_n(&shut_down, true, __ATOMIC_ACQ_REL))
		return;
	if (!started)
		return;
	/* Hooks still running on other threads pass through from here on. */
	vmem_set_enabled(false);
	if (vmem_cfg.stats)
		stats_print(stats_line, NULL);
	runtime_shutdown();
	trace_close();
}

static void shutdown_atexit(void)
{
	bool guard = hook_guard_enter();

	vmem_shutdown();
	if (guard)
		hook_guard_leave();
}

void vmem_startup(void)
{
	pthread_once(&config_once, config_read);
	if (!config_ok || !vmem_cfg.enabled) {
		if (config_ok)
			vmem_info("VMEM_DISABLE is set: vmem stays pass-through");
		return;
	}
	if (runtime_init() != 0) {
		vmem_error("the device pool could not be set up (see above); vmem stays pass-through");
		return;
	}
	started = true;
	if (vmem_cfg.trace_path[0]) {
		size_t free_b = 0, total_b = 0;
		uintptr_t va_base = 0;
		uint64_t va_size = 0;

		/* The budget is what cudaMemGetInfo reports as total. */
		if (runtime_active() && runtime_mem_get_info(&free_b, &total_b) == cudaSuccess) {
			runtime_va(&va_base, &va_size);
			trace_set_va(va_base, va_size, total_b);
		}
		trace_open(vmem_cfg.trace_path);
	}
	hook_set_timing(vmem_cfg.stats || trace_enabled());
	vmem_set_enabled(true);
	atexit(shutdown_atexit);
}

__attribute__((constructor)) static void vmem_ctor(void)
{
	pthread_once(&config_once, config_read);
}

__attribute__((destructor)) static void vmem_dtor(void)
{
	shutdown_atexit();
}

/* ---- trace header and end fields ---- */

typedef cudaError_t (*get_device_fn)(int *);
typedef cudaError_t (*get_props_fn)(struct cudaDeviceProp *, int);
typedef cudaError_t (*rt_version_fn)(int *);
typedef size_t (*cudnn_version_fn)(void);
typedef int (*cublas_prop_fn)(libraryPropertyType, int *);

static int lib_versions(char *buf, size_t len)
{
	cudnn_version_fn cudnn_v = (cudnn_version_fn)hook_real("cudnnGetVersion");
	cublas_prop_fn cublas_p = (cublas_prop_fn)hook_real("cublasGetProperty");
	char cudnn[32] = "null", cublas[32] = "null";

	if (cudnn_v)
		snprintf(cudnn, sizeof(cudnn), "%zu", cudnn_v());
	if (cublas_p) {
		int ma = 0, mi = 0, pa = 0;

		if (cublas_p(MAJOR_VERSION, &ma) == 0 && cublas_p(MINOR_VERSION, &mi) == 0 &&
		    cublas_p(PATCH_LEVEL, &pa) == 0)
			snprintf(cublas, sizeof(cublas), "%d", ma * 10000 + mi * 100 + pa);
	}
	return snprintf(buf, len, "\"cudnn\":%s,\"cublas\":%s", cudnn, cublas);
}

void trace_header_fields(char *buf, size_t len)
{
	get_device_fn get_dev = (get_device_fn)hook_real_load("cudaGetDevice");
	get_props_fn get_props = (get_props_fn)hook_real_load("cudaGetDeviceProperties");
	rt_version_fn rt_ver = (rt_version_fn)hook_real_load("cudaRuntimeGetVersion");
	struct cudaDeviceProp prop;
	char name[300];
	int dev = 0, rtv = 0;
	size_t n;

	if (get_props && (!get_dev || get_dev(&dev) == cudaSuccess) &&
	    get_props(&prop, dev) == cudaSuccess) {
		prop.name[sizeof(prop.name) - 1] = '\0';
		vmem_json_escape(prop.name, name, sizeof(name));
		n = (size_t)snprintf(buf, len, "\"device\":{\"name\":%s,\"total\":%zu,\"cc\":\"%d.%d\"}",
				     name, prop.totalGlobalMem, prop.major, prop.minor);
	} else {
		n = (size_t)snprintf(buf, len, "\"device\":{\"name\":null,\"total\":null,\"cc\":null}");
	}
	if (n >= len)
		return;
	n += (size_t)snprintf(buf + n, len - n, ",");
	if (n >= len)
		return;
	n += (size_t)lib_versions(buf + n, len - n);
	if (n >= len)
		return;
	if (rt_ver && rt_ver(&rtv) == cudaSuccess)
		snprintf(buf + n, len - n, ",\"cudart\":%d", rtv);
	else
		snprintf(buf + n, len - n, ",\"cudart\":null");
}

void trace_end_fields(char *buf, size_t len)
{
	/* cuDNN and cuBLAS are usually loaded after start-up: the end record
	 * gives their versions as found at exit. */
	lib_versions(buf, len);
}
