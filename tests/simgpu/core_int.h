/* tests/simgpu/core_int.h - state shared by libsimgpu's own files.
 *
 * core.c holds memory (physical allocations, cudaMalloc blocks, the VMM
 * address map, pinned host ranges), start-up and the fault handler;
 * core_exec.c holds streams, events, the submission path of every op, the
 * race checker's agents and reports, pinned-page protection and the
 * stream-ordered allocator's pool; core_graph.c holds stream capture and
 * graphs.  They share the structures and the one mutex below; nothing
 * here is exported from libsimgpu.so.
 *
 * Locking: `simgpu_lock` guards every structure in this header, the
 * agents' vector clocks and all shadows.  `simgpu_pin_lock` serialises the
 * simulator's own accesses to protected pinned pages (taken before
 * simgpu_lock, never after).  Neither is held while a kernel or a library
 * op computes, except that copies touching pinned memory hold the pin lock
 * around their memmove.
 */
#ifndef SIMGPU_CORE_INT_H
#define SIMGPU_CORE_INT_H

#include <pthread.h>
#include <sys/types.h>

#include "core.h"
#include "core_race.h"

#define SG_HIDDEN __attribute__((visibility("hidden")))

extern SG_HIDDEN pthread_mutex_t simgpu_lock;
extern SG_HIDDEN pthread_mutex_t simgpu_pin_lock;
extern SG_HIDDEN simgpu_model_t sg_model;
extern SG_HIDDEN bool sg_dryrun;
extern SG_HIDDEN double sg_poll_cost;   /* SIMGPU_POLL_COST in seconds; < 0: "end" */
extern SG_HIDDEN size_t sg_page;
extern SG_HIDDEN simgpu_clock_t sg_clk;
extern SG_HIDDEN uint64_t sg_bytes_h2d, sg_bytes_d2h, sg_bytes_d2d, sg_n_compute;
/* The most device memory one kernel launch touched (distinct bytes of its
 * declared accesses) and its kernel; kept while SIMGPU_REPORT is set and
 * the race checker is on (it declares the accesses).  Lock held. */
extern SG_HIDDEN bool sg_footprints;
extern SG_HIDDEN uint64_t sg_kernel_footprint;
/* Bytes of host-located memory (cuMemCreate with a host location) kernels
 * declared they touch, over the link; such objects alive now. */
extern SG_HIDDEN uint64_t sg_kernel_host_bytes;
extern SG_HIDDEN unsigned sg_host_phys;
extern SG_HIDDEN const char *sg_kernel_footprint_name;

/* ---- sorted arrays of ranges: every element starts with
 * { uintptr_t base; size_t size; } ---- */
struct sarr {
	char *a;
	size_t n, cap, esz;
};

struct range_head {
	uintptr_t base;
	size_t size;
};

SG_HIDDEN void *sa_at(const struct sarr *s, size_t i);
SG_HIDDEN size_t sa_upper(const struct sarr *s, uintptr_t addr);
SG_HIDDEN long sa_find(const struct sarr *s, uintptr_t addr);

/* A physical allocation (cuMemCreate, or the pages of one cudaMalloc
 * block).  Its shadow is keyed by offsets inside it, so a chunk unmapped
 * at one address and mapped at another keeps its history. */
struct phys {
	uint32_t magic;
	int maps;               /* live mappings of this allocation */
	bool released;          /* cuMemRelease called for every reference */
	int retains;            /* cuMemRetainAllocationHandle references */
	bool host;              /* located in host memory (cuMemCreate with a host
				   location): not charged to the device, and a kernel
				   or copy reaches it over the link */
	uint64_t off;           /* file offset in the memfd */
	size_t size;
	simgpu_shadow_t sh;
};

/* A virtual reservation: a VMM range, or one cudaMalloc (with guard). */
enum { RESV_VMM, RESV_ALLOC };
struct resv {
	uintptr_t base;
	size_t size;
	int kind;
	size_t charged;         /* RESV_ALLOC: bytes accounted */
	uint64_t off;           /* RESV_ALLOC: memfd offset */
	size_t map_len;         /* RESV_ALLOC: bytes mapped */
	struct phys *obj;       /* RESV_ALLOC: the block's shadow owner */
	/* RESV_ALLOC freed with cudaFreeAsync, kept by the stream-ordered
	 * pool until reused or released: its region is gone (a touch is an
	 * illegal address) and its bytes are kept */
	bool pooled;
	bool async_alloc;       /* made by cudaMallocAsync */
	uint32_t free_agent, free_clock;
};

extern SG_HIDDEN struct sarr sg_resvs;

/* Accessible device memory: a cudaMalloc'd block (exact size) or a VMM
 * mapping.  prot: 0 none, 1 read, 3 read-write. */
/* The last access through a VMM mapping by each agent (up to
 * REGION_THRU agents; `thru_full`: more came, and the mapping's own record
 * is not to be trusted).  A physical allocation mapped at two addresses
 * lives on when one of them is unmapped: that unmap ends only what went
 * through it (core_exec.c, hazard_piece). */
#define REGION_THRU 8
struct thru {
	simgpu_epoch_t e;
	bool write;
};

struct region {
	uintptr_t base;
	size_t size;
	int prot;
	struct phys *phys;      /* VMM mapping; NULL for cudaMalloc blocks */
	size_t phys_off;        /* offset inside phys */
	struct phys *obj;       /* whose shadow: phys, or the block's own */
	uint64_t obj_off;       /* offset of base inside obj */
	uint8_t nthru;
	bool thru_full;
	struct thru thru[REGION_THRU];
};

enum { HOST_ALLOC, HOST_REGISTERED };
struct host_range {
	uintptr_t base;
	size_t size;
	int kind;
	simgpu_shadow_t *sh;
};

extern SG_HIDDEN struct sarr sg_regions, sg_hosts;

/* ---- agents: index 0 is the host, 1 the legacy default stream ---- */
enum { AGENT_HOST = 0, AGENT_LEGACY = 1 };

struct capture;

struct stream {
	uint32_t magic;
	unsigned flags;
	int priority;
	double t;               /* virtual time its queued work ends */
	struct stream *next;    /* every stream ever made (dead ones too) */
	uint32_t agent;
	simgpu_vc_t vc;
	bool dead;              /* destroyed: kept so a later use is caught */
	bool ptds;              /* a thread's per-thread default stream */
	pid_t tid;              /* ptds: its thread */
	struct capture *cap;    /* capture sequence it belongs to, or NULL */
};

struct event {
	uint32_t magic;
	unsigned flags;
	bool recorded;
	double t;
	simgpu_vc_t vc;
	uint64_t cap_id;        /* last recorded inside this capture (0: none) */
};

extern SG_HIDDEN struct stream sg_legacy;
extern SG_HIDDEN struct stream *sg_streams;
extern SG_HIDDEN simgpu_vc_t sg_host_vc;
extern SG_HIDDEN int sg_race_mode;     /* 0 off, 1 warn, 2 abort */
extern SG_HIDDEN bool sg_poison;

/* (lock held) The stream object for a handle: NULL, 0x1 are the legacy
 * default stream, 0x2 the calling thread's per-thread default stream;
 * NULL when not a stream (a destroyed one aborts with a line). */
SG_HIDDEN struct stream *sg_stream_of(void *s);
/* (lock held) The joins an op on st implies before it runs (the host's
 * issue order; the legacy stream's ordering with blocking streams), then
 * the tick: *e becomes the op's epoch. */
SG_HIDDEN void sg_op_epoch(struct stream *st, const char *op,
			   simgpu_epoch_t *e);
/* (lock held) The host learns everything `vc` knows (a synchronisation);
 * pinned pages whose copies it now follows are unprotected and pooled
 * frees it now follows are released. */
SG_HIDDEN void sg_host_join(const simgpu_vc_t *vc);
/* (lock held) The host waits for all work of every stream (a device-wide
 * synchronisation, explicit or implied). */
SG_HIDDEN void sg_host_syncs_device(void);
/* (lock held) Host-side hazard: `what` (cuMemUnmap, cudaFree, ...) is
 * about to end the life of [p, p+n); reports every access to it the host
 * has not synchronised with. */
SG_HIDDEN void sg_host_hazard(const void *p, size_t n, const char *what,
			      const char *verb);
/* (lock held) The same for a whole physical object about to be freed. */
SG_HIDDEN void sg_phys_hazard(struct phys *ph, const char *what,
			      const char *verb);
/* (lock held) A pinned range leaves the simulator: drops its protected
 * pages. */
SG_HIDDEN void sg_pins_drop(uintptr_t base, size_t size);
/* Fault handler hook: true when addr is a protected pinned page (the race
 * was reported; in warn mode the page is opened and the access retried). */
SG_HIDDEN bool sg_pin_fault(uintptr_t addr, int is_write);
/* Next call number (race reports name ops by it). */
SG_HIDDEN uint64_t sg_next_seq(void);

/* ---- memory pieces (core.c) ---- */
/* (lock held) Index in sg_resvs of the live cudaMalloc block at p, or -1. */
SG_HIDDEN long sg_block_find(const void *p);
/* (lock held) Releases blocks the stream-ordered pool keeps: those whose
 * cudaFreeAsync the host has synchronised with, or with `all` every one
 * (the driver synchronises first, as CUDA does when memory runs short).
 * True when something was released. */
SG_HIDDEN bool sg_pool_release(bool all);
/* Clears this thread's declared accesses (a new outermost op begins). */
SG_HIDDEN void sg_access_reset(void);
/* (lock held) Frees a block found by its base (cudaFree and the pool's
 * release): unmaps, returns pages and accounting. */
SG_HIDDEN void sg_block_destroy(size_t resv_index);
/* (lock held) A new poisoned cudaMalloc block. */
SG_HIDDEN simgpu_status_t sg_block_new(void **p, size_t size);
/* (lock held) Region map edits for the pool's reuse and free. */
SG_HIDDEN int sg_region_insert(const struct region *rg);
SG_HIDDEN void sa_remove_region(size_t i);

/* ---- capture (core_graph.c) ---- */
/* (lock held) Capture rules for an op about to be issued on st: 0 when it
 * runs now; 1 when st captures (the caller records the op); a status
 * (negative) when the op is illegal in the current capture state. */
SG_HIDDEN int sg_capture_check_op(struct stream *st);
/* (lock held) True when some capture forbids the calling thread
 * "potentially unsafe" calls; invalidates it. */
SG_HIDDEN bool sg_capture_forbids_unsafe(void);
/* (lock held) True when any capture is active: a device-wide
 * synchronisation is refused and every capture invalidated. */
SG_HIDDEN bool sg_capture_forbids_device_sync(void);
/* (lock held) The active capture an event was last recorded in, or NULL. */
SG_HIDDEN struct capture *sg_event_capture(struct event *ev);
/* (lock held) cudaMallocAsync inside a capture: the graph owns p (freed
 * with it); cudaFreeAsync inside one: only of memory it owns. */
SG_HIDDEN void sg_capture_own(struct stream *st, void *p);
SG_HIDDEN simgpu_status_t sg_capture_free(struct stream *st, void *p);
/* (lock held) Invalidates st's capture sequence (if any). */
SG_HIDDEN void sg_capture_invalidate(struct capture *c);
/* (lock held) Adds a node to st's capture. */
SG_HIDDEN simgpu_status_t sg_capture_add(struct stream *st, const char *op,
					 simgpu_replay_fn fn, const void *args,
					 size_t size);
SG_HIDDEN void sg_capture_event_recorded(struct event *ev, struct stream *st);
SG_HIDDEN simgpu_status_t sg_capture_wait_event(struct stream *st,
						struct event *ev);

#endif
