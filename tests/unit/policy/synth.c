/* tests/unit/policy/synth.c - see synth.h. */
#include "synth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- driver ---- */

void drv_init(drv_t *d, const policy_config_t *cfg)
{
	memset(d, 0, sizeof(*d));
	if (policy_create(cfg, &d->p) != 0)
		abort();
	d->seq = 1;
	d->thread = 1;
	policy_actions_init(&d->buf);
}

void drv_free(drv_t *d)
{
	policy_destroy(d->p);
	policy_actions_free(&d->buf);
	free(d->acts);
	free(d->rec);
	memset(d, 0, sizeof(*d));
}

void drv_keep(drv_t *d, uint64_t seq)
{
	for (int i = 0; i < d->buf.n; i++) {
		if (d->nacts == d->capacts) {
			d->capacts = d->capacts ? d->capacts * 2 : 256;
			d->acts = realloc(d->acts, (size_t)d->capacts * sizeof(*d->acts));
			if (!d->acts)
				abort();
		}
		d->acts[d->nacts].seq = seq;
		d->acts[d->nacts].kind = d->buf.v[i].kind;
		d->acts[d->nacts].a = d->buf.v[i];
		d->nacts++;
	}
	policy_actions_clear(&d->buf);
}

uint64_t drv_op(drv_t *d, vmem_op_kind_t kind, const char *api, const vmem_op_info_t *info,
		int n, const vmem_range_t *r)
{
	vmem_event_t ev = { 0 };

	if (d->record) {
		drv_rec_t *x;

		if (d->nrec == d->caprec) {
			d->caprec = d->caprec ? d->caprec * 2 : 1024;
			d->rec = realloc(d->rec, (size_t)d->caprec * sizeof(*d->rec));
			if (!d->rec)
				abort();
		}
		x = &d->rec[d->nrec++];
		memset(x, 0, sizeof(*x));
		x->ev.kind = kind;
		x->ev.api = api;
		x->ev.thread = d->thread;
		x->ev.stream = d->stream;
		x->ev.seq = d->seq++;
		x->ev.nranges = n < 8 ? n : 8;
		if (info)
			x->ev.info = *info;
		if (x->ev.nranges)
			memcpy(x->r, r, (size_t)x->ev.nranges * sizeof(*r));
		return x->ev.seq;
	}
	ev.kind = kind;
	ev.api = api;
	ev.stream = d->stream;
	ev.thread = d->thread;
	ev.seq = d->seq++;
	ev.nranges = n;
	ev.ranges = r;
	if (info)
		ev.info = *info;
	ev.t_ns = ev.seq * 1000;
	{
		uint64_t seq = ev.seq;

		if (d->seq_late)
			ev.seq = 0;
		policy_before(d->p, &ev, &d->buf);
		ev.seq = seq;
	}
	drv_keep(d, ev.seq);
	ev.dur_ns = d->dur_ns;
	policy_after(d->p, &ev, &d->buf);
	drv_keep(d, ev.seq);
	return ev.seq;
}

void drv_sync(drv_t *d)
{
	drv_op(d, VMEM_OP_SYNC, "cudaStreamSynchronize", NULL, 0, NULL);
}

int drv_count(const drv_t *d, policy_act_kind_t kind, int note)
{
	int c = 0;

	for (int i = 0; i < d->nacts; i++)
		if (d->acts[i].kind == (int)kind && (note < 0 || d->acts[i].a.note == note))
			c++;
	return c;
}

vmem_range_t R(uint64_t alloc, uint64_t off, uint64_t bytes, uint8_t acc, const char *role)
{
	vmem_range_t r = { 0 };

	r.alloc_id = alloc;
	r.offset = off;
	r.bytes = bytes;
	r.ptr = alloc ? (uintptr_t)(0x100000000ull * alloc + off) : (uintptr_t)(0x7f0000000000ull + off);
	r.access = acc;
	r.role = role;
	return r;
}

/* ---- the net ---- */

#define H 8
#define WK 1u   /* whole overwrite */
static const uint8_t W_ = VMEM_ACCESS_W | VMEM_ACCESS_WHOLE;
static const uint8_t R_ = VMEM_ACCESS_R;
static const uint8_t RW_ = VMEM_ACCESS_RW;

static int chans(const net_t *n, int l)
{
	if (n->cfg.identical)
		return 16;
	return 8 + 8 * (l % 4) + 4 * l;
}

uint64_t net_act_bytes(const net_t *n, int l)
{
	return (uint64_t)n->cfg.batch * (uint64_t)chans(n, l) * H * H * 4;
}

static uint64_t w_bytes(const net_t *n, int l)
{
	return (uint64_t)chans(n, l + 1) * (uint64_t)chans(n, l) * 9 * 4;
}

static uint64_t ws_bytes(const net_t *n, bool warm)
{
	return warm ? 4096 : 8192 + (uint64_t)n->cfg.batch * 16;
}

#define LOSS_BYTES(n) ((uint64_t)(n)->cfg.batch * 40)

int net_period(const net_cfg_t *cfg)
{
	return 6 * cfg->layers + 3;
}

/* The allocation and offset of each kind of buffer this iteration. */
typedef struct {
	uint64_t a, off;
} loc_t;

enum { B_IN, B_X, B_Y, B_GX, B_GY, B_WS, B_LOSS };

static loc_t where(net_t *n, int kind, int l)
{
	int L = n->cfg.layers;
	loc_t r = { 0, 0 };

	if (n->cfg.style == NET_CACHING) {
		uint64_t seg = (n->cfg.growing && n->iter == 0) ? n->seg0 : n->seg;
		uint64_t shift = (n->cfg.growing && n->iter == 0) ? 256 : 0;
		uint64_t off = shift;

		r.a = seg;
		/* layout: in[2] | x[1..L] | y[0..L-1] | gx[1..L] | gy[0..L-1] | ws | loss */
		for (int b = 0; b < 2; b++) {
			if (kind == B_IN && l == b)
				return (loc_t){ seg, off };
			off += net_act_bytes(n, 0);
		}
		for (int i = 1; i <= L; i++) {
			if (kind == B_X && l == i)
				return (loc_t){ seg, off };
			off += net_act_bytes(n, i);
		}
		for (int i = 0; i < L; i++) {
			if (kind == B_Y && l == i)
				return (loc_t){ seg, off };
			off += net_act_bytes(n, i + 1);
		}
		for (int i = 1; i <= L; i++) {
			if (kind == B_GX && l == i)
				return (loc_t){ seg, off };
			off += net_act_bytes(n, i);
		}
		for (int i = 0; i < L; i++) {
			if (kind == B_GY && l == i)
				return (loc_t){ seg, off };
			off += net_act_bytes(n, i + 1);
		}
		if (kind == B_WS)
			return (loc_t){ seg, off };
		off += 65536;
		return (loc_t){ seg, off };   /* loss */
	}
	switch (kind) {
	case B_IN: r.a = n->in[n->cfg.double_buffer ? l : 0]; break;
	case B_X: r.a = n->x[l]; break;
	case B_Y: r.a = n->y[l]; break;
	case B_GX: r.a = n->dx[l]; break;
	case B_GY: r.a = n->dy[l]; break;
	case B_WS: r.a = n->ws[0]; break;
	default: r.a = n->loss; break;
	}
	return r;
}

static uint64_t fresh(net_t *n, drv_t *d, uint64_t bytes)
{
	uint64_t id = n->next_id++;

	policy_allocated(d->p, id, bytes);
	return id;
}

/* (Re)allocates the activation-side buffers (NETWORK at start, PER_TENSOR
 * every iteration, CACHING never: the segments are made in net_init). */
static void alloc_acts(net_t *n, drv_t *d)
{
	int L = n->cfg.layers;

	for (int b = 0; b < 2; b++)
		n->in[b] = fresh(n, d, net_act_bytes(n, 0));
	for (int l = 0; l <= L; l++) {
		n->x[l] = l ? fresh(n, d, net_act_bytes(n, l)) : 0;
		n->dx[l] = l ? fresh(n, d, net_act_bytes(n, l)) : 0;
	}
	for (int l = 0; l < L; l++) {
		n->y[l] = fresh(n, d, net_act_bytes(n, l + 1));
		n->dy[l] = fresh(n, d, net_act_bytes(n, l + 1));
	}
	n->ws[0] = fresh(n, d, ws_bytes(n, false));
	n->loss = fresh(n, d, LOSS_BYTES(n));
}

static void free_acts(net_t *n, drv_t *d)
{
	int L = n->cfg.layers;

	for (int b = 0; b < 2; b++)
		policy_freed(d->p, n->in[b]);
	for (int l = 1; l <= L; l++) {
		policy_freed(d->p, n->x[l]);
		policy_freed(d->p, n->dx[l]);
	}
	for (int l = 0; l < L; l++) {
		policy_freed(d->p, n->y[l]);
		policy_freed(d->p, n->dy[l]);
	}
	policy_freed(d->p, n->ws[0]);
	policy_freed(d->p, n->loss);
}

void net_init(net_t *n, drv_t *d, const net_cfg_t *cfg)
{
	int L = cfg->layers;

	memset(n, 0, sizeof(*n));
	n->cfg = *cfg;
	n->next_id = 10;
	n->x = calloc((size_t)L + 1, sizeof(uint64_t));
	n->y = calloc((size_t)L + 1, sizeof(uint64_t));
	n->w = calloc((size_t)L + 1, sizeof(uint64_t));
	n->dw = calloc((size_t)L + 1, sizeof(uint64_t));
	n->mom = calloc((size_t)L + 1, sizeof(uint64_t));
	n->dx = calloc((size_t)L + 1, sizeof(uint64_t));
	n->dy = calloc((size_t)L + 1, sizeof(uint64_t));
	n->ws = calloc(1, sizeof(uint64_t));
	for (int l = 0; l < L; l++) {
		n->w[l] = fresh(n, d, w_bytes(n, l));
		n->dw[l] = fresh(n, d, w_bytes(n, l));
		n->mom[l] = fresh(n, d, w_bytes(n, l));
	}
	if (cfg->style == NET_CACHING) {
		n->seg0 = fresh(n, d, 1);
		n->seg = fresh(n, d, 1);
	} else if (cfg->style == NET_NETWORK) {
		alloc_acts(n, d);
	}
}

void net_free(net_t *n)
{
	free(n->x);
	free(n->y);
	free(n->w);
	free(n->dw);
	free(n->mom);
	free(n->dx);
	free(n->dy);
	free(n->ws);
	memset(n, 0, sizeof(*n));
}

static vmem_op_info_t conv_info(const net_t *n, int l, int dir, bool warm)
{
	vmem_op_info_t in = { 0 };

	in.type = VMEM_INFO_CONV;
	in.u.conv.n = n->cfg.batch;
	in.u.conv.c = chans(n, l);
	in.u.conv.h = H;
	in.u.conv.w = H;
	in.u.conv.k = chans(n, l + 1);
	in.u.conv.r = in.u.conv.s = 3;
	in.u.conv.stride[0] = in.u.conv.stride[1] = 1;
	in.u.conv.pad[0] = in.u.conv.pad[1] = 1;
	in.u.conv.dilation[0] = in.u.conv.dilation[1] = 1;
	in.u.conv.groups = 1;
	in.u.conv.algo = warm ? 0 : 1;
	if (l == n->redecided_layer && dir == VMEM_CONV_DIR_BWD_DATA)
		in.u.conv.algo = 2;   /* a kernel decided again for good */
	in.u.conv.workspace = ws_bytes(n, warm);
	in.u.conv.dir = (uint8_t)dir;
	in.u.conv.dtype = VMEM_DTYPE_F32;
	return in;
}

static vmem_op_info_t copy_info(uint64_t bytes, int kind)
{
	vmem_op_info_t in = { 0 };

	in.type = VMEM_INFO_COPY;
	in.u.copy.bytes = bytes;
	in.u.copy.kind = (uint8_t)kind;
	return in;
}

static vmem_op_info_t launch_info(uintptr_t func, int n)
{
	vmem_op_info_t in = { 0 };

	in.type = VMEM_INFO_LAUNCH;
	in.u.launch.func = func;
	in.u.launch.grid[0] = (uint32_t)n;
	in.u.launch.grid[1] = in.u.launch.grid[2] = 1;
	in.u.launch.block[0] = 256;
	in.u.launch.block[1] = in.u.launch.block[2] = 1;
	return in;
}

#define LOC(kind, l) where(n, kind, l)
#define RR(kind, l, bytes, acc, role) \
	R(LOC(kind, l).a, LOC(kind, l).off, bytes, acc, role)

static void forward(net_t *n, drv_t *d, bool warm)
{
	int L = n->cfg.layers;
	int b = n->cfg.double_buffer ? n->iter % 2 : 0;
	vmem_op_info_t in;
	vmem_range_t r[5];

	in = copy_info(net_act_bytes(n, 0), 1);
	/* the batch comes from one of a DataLoader's pinned buffers */
	r[0] = R(0, 0x1000 + (uint64_t)(n->iter % 3) * 0x1000000, net_act_bytes(n, 0), R_, "src");
	r[1] = RR(B_IN, b, net_act_bytes(n, 0), W_, "dst");
	drv_op(d, VMEM_OP_MEMCPY, "cudaMemcpyAsync", &in, 2, r);
	for (int l = 0; l < L; l++) {
		vmem_range_t xr = l ? RR(B_X, l, net_act_bytes(n, l), R_, "x")
				    : RR(B_IN, b, net_act_bytes(n, 0), R_, "x");
		uint64_t ws = ws_bytes(n, warm);

		if (warm) {
			drv_op(d, VMEM_OP_ALGO_QUERY, "cudnnFindConvolutionForwardAlgorithm", NULL, 0, NULL);
			drv_op(d, VMEM_OP_WS_QUERY, "cudnnGetConvolutionForwardWorkspaceSize", NULL, 0,
			       NULL);
		}
		in = conv_info(n, l, VMEM_CONV_DIR_FWD, warm);
		r[0] = xr;
		r[1] = R(n->w[l], 0, w_bytes(n, l), R_, "w");
		r[2] = RR(B_Y, l, net_act_bytes(n, l + 1), W_, "y");
		r[3] = RR(B_WS, 0, ws, W_, "ws");
		drv_op(d, VMEM_OP_CONV_FWD, "cudnnConvolutionForward", &in, 4, r);
		r[0] = RR(B_Y, l, net_act_bytes(n, l + 1), R_, "x");
		r[1] = RR(B_X, l + 1, net_act_bytes(n, l + 1), W_, "y");
		drv_op(d, VMEM_OP_ACT_FWD, "cudnnActivationForward", NULL, 2, r);
	}
	r[0] = RR(B_X, L, net_act_bytes(n, L), R_, "x");
	r[1] = RR(B_LOSS, 0, LOSS_BYTES(n), W_, "y");
	drv_op(d, VMEM_OP_SOFTMAX_FWD, "cudnnSoftmaxForward", NULL, 2, r);
}

int net_train(net_t *n, drv_t *d)
{
	int L = n->cfg.layers;
	bool warm = n->cfg.warmup && n->iter == 0;
	uint64_t before = d->seq;
	vmem_op_info_t in;
	vmem_range_t r[5];
	uint64_t main_thread = d->thread;
	int sig = 0;

	(void)before;
	if (n->cfg.style == NET_PER_TENSOR)
		alloc_acts(n, d);
	forward(n, d, warm);
	if (n->cfg.bwd_thread)
		d->thread = main_thread + 1;
	r[0] = RR(B_LOSS, 0, LOSS_BYTES(n), R_, "y");
	r[1] = RR(B_GX, L, net_act_bytes(n, L), W_, "dx");
	drv_op(d, VMEM_OP_SOFTMAX_BWD, "cudnnSoftmaxBackward", NULL, 2, r);
	for (int l = L - 1; l >= 0; l--) {
		vmem_range_t xr = l ? RR(B_X, l, net_act_bytes(n, l), R_, "x")
				    : RR(B_IN, n->cfg.double_buffer ? n->iter % 2 : 0,
					 net_act_bytes(n, 0), R_, "x");
		uint64_t ws = ws_bytes(n, warm);

		r[0] = RR(B_Y, l, net_act_bytes(n, l + 1), R_, "x");
		r[1] = RR(B_X, l + 1, net_act_bytes(n, l + 1), R_, "y");
		r[2] = RR(B_GX, l + 1, net_act_bytes(n, l + 1), R_, "dy");
		r[3] = RR(B_GY, l, net_act_bytes(n, l + 1), W_, "dx");
		drv_op(d, VMEM_OP_ACT_BWD, "cudnnActivationBackward", NULL, 4, r);
		if (l > 0) {
			in = conv_info(n, l, VMEM_CONV_DIR_BWD_DATA, warm);
			r[0] = R(n->w[l], 0, w_bytes(n, l), R_, "w");
			r[1] = RR(B_GY, l, net_act_bytes(n, l + 1), R_, "dy");
			r[2] = RR(B_GX, l, net_act_bytes(n, l), W_, "dx");
			r[3] = RR(B_WS, 0, l == n->ran_small_layer ? ws / 4 : ws, W_, "ws");
			drv_op(d, VMEM_OP_CONV_BWD_DATA, "cudnnConvolutionBackwardData", &in, 4, r);
		}
		in = conv_info(n, l, VMEM_CONV_DIR_BWD_FILTER, warm);
		r[0] = xr;
		r[1] = RR(B_GY, l, net_act_bytes(n, l + 1), R_, "dy");
		r[2] = R(n->dw[l], 0, w_bytes(n, l), W_, "dw");
		r[3] = RR(B_WS, 0, ws, W_, "ws");
		drv_op(d, VMEM_OP_CONV_BWD_FILTER, "cudnnConvolutionBackwardFilter", &in, 4, r);
	}
	d->thread = main_thread;
	for (int l = 0; l < L; l++) {
		r[0] = R(n->w[l], 0, w_bytes(n, l), RW_, "arg0");
		r[1] = R(n->dw[l], 0, w_bytes(n, l), RW_, "arg1");
		if (warm) {
			/* optimizer state created lazily on the first step */
			in = copy_info(w_bytes(n, l), VMEM_COPY_SET);
			r[2] = R(n->mom[l], 0, w_bytes(n, l), W_, "dst");
			drv_op(d, VMEM_OP_MEMSET, "cudaMemsetAsync", &in, 1, &r[2]);
			in = launch_info(0xabc0, (int)l);
			drv_op(d, VMEM_OP_LAUNCH, "cudaLaunchKernel", &in, 2, r);
		} else {
			in = launch_info(0xabc1, (int)l);
			r[2] = R(n->mom[l], 0, w_bytes(n, l), RW_, "arg2");
			drv_op(d, VMEM_OP_LAUNCH, "cudaLaunchKernel", &in, 3, r);
		}
	}
	in = copy_info(4, 2);
	r[0] = RR(B_LOSS, 0, 4, R_, "src");
	r[1] = R(0, 0x2000, 4, W_, "dst");
	drv_op(d, VMEM_OP_MEMCPY, "cudaMemcpyAsync", &in, 2, r);
	drv_sync(d);
	if (n->cfg.style == NET_PER_TENSOR)
		free_acts(n, d);
	n->iter++;
	sig = net_period(&n->cfg);
	return sig;
}

int net_eval(net_t *n, drv_t *d)
{
	vmem_op_info_t in;
	vmem_range_t r[2];

	if (n->cfg.style == NET_PER_TENSOR)
		alloc_acts(n, d);
	forward(n, d, false);
	in = copy_info(4, 2);
	r[0] = RR(B_LOSS, 0, 4, R_, "src");
	r[1] = R(0, 0x2000, 4, W_, "dst");
	drv_op(d, VMEM_OP_MEMCPY, "cudaMemcpyAsync", &in, 2, r);
	drv_sync(d);
	if (n->cfg.style == NET_PER_TENSOR)
		free_acts(n, d);
	return 2 * n->cfg.layers + 3;
}

/* ---- hand-written iterations ---- */

static const char *kind_api(vmem_op_kind_t k)
{
	return vmem_op_name(k);
}

int prog_graph(policy_history_t *h, policy_graph_t *g, const pop_t *ops, int n, int reps,
	       uint64_t young_from)
{
	uint64_t seq = 1, wm = 0, first = 0;

	if (policy_history_init(h, 4096, 65536) < 0)
		return -1;
	for (int rep = 0; rep < reps; rep++) {
		if (rep == reps - 1)
			first = h->tail;
		for (int k = 0; k < n; k++) {
			vmem_event_t ev = { 0 };
			vmem_range_t r[8];

			for (int j = 0; j < ops[k].n; j++) {
				r[j] = ops[k].r[j];
				if (young_from && r[j].alloc_id >= young_from)
					r[j].alloc_id += 1000 * (uint64_t)rep;
			}
			ev.kind = ops[k].kind;
			ev.api = kind_api(ops[k].kind);
			ev.thread = ops[k].thread ? ops[k].thread : 1;
			ev.seq = seq++;
			ev.nranges = ops[k].n;
			ev.ranges = r;
			ev.dur_ns = ops[k].dur_ns;
			/* the ids of this repetition's fresh allocations are known from its start */
			if (k == 0 && young_from)
				wm = young_from + 1000 * (uint64_t)rep - 1;
			if (policy_history_push(h, &ev, 0, wm) == UINT64_MAX)
				return -1;
			for (int j = 0; j < ops[k].n; j++)
				if (r[j].alloc_id > wm && (!young_from || r[j].alloc_id < young_from))
					wm = r[j].alloc_id;
			if (ops[k].free_after) {
				uint64_t id = ops[k].free_after;

				if (young_from && id >= young_from)
					id += 1000 * (uint64_t)rep;
				if (policy_history_freed(h, id) < 0)
					return -1;
			}
		}
	}
	return policy_graph_build(g, h, first, (uint32_t)n, 0);
}

void sink(void *ctx, const char *line)
{
	sink_t *s = ctx;
	int k = snprintf(s->text + s->len, sizeof(s->text) - s->len, "%s\n", line);

	if (k > 0 && s->len + (size_t)k < sizeof(s->text))
		s->len += (size_t)k;
}
