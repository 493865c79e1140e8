/* policy/replay.c - events as text (see replay.h). */
#include "policy/replay.h"

#include <stdlib.h>
#include <string.h>

void policy_replay_init(policy_replay_t *r)
{
	memset(r, 0, sizeof(*r));
}

void policy_replay_free(policy_replay_t *r)
{
	for (int i = 0; i < r->nstr; i++)
		free(r->str[i]);
	free(r->str);
	free(r->rg);
	memset(r, 0, sizeof(*r));
}

static const char *intern(policy_replay_t *r, const char *s)
{
	for (int i = 0; i < r->nstr; i++)
		if (strcmp(r->str[i], s) == 0)
			return r->str[i];
	if (r->nstr == r->capstr) {
		int cap = r->capstr ? r->capstr * 2 : 64;
		char **ns = realloc(r->str, (size_t)cap * sizeof(*ns));

		if (!ns)
			return NULL;
		r->str = ns;
		r->capstr = cap;
	}
	r->str[r->nstr] = strdup(s);
	return r->str[r->nstr] ? r->str[r->nstr++] : NULL;
}

static int parse_info(char *s, vmem_op_info_t *in)
{
	long long v[12] = { 0 };
	int n = 0;
	char *p = strchr(s, ':'), *end;

	memset(in, 0, sizeof(*in));
	if (strcmp(s, "-") == 0)
		return 0;
	if (!p)
		return -1;
	*p = '\0';
	while (p && n < 12) {
		v[n++] = strtoll(p + 1, &end, 0);
		p = *end == ':' ? end : NULL;
	}
	if (strcmp(s, "conv") == 0 && n >= 10) {
		in->type = VMEM_INFO_CONV;
		in->u.conv.dir = (uint8_t)v[0];
		in->u.conv.n = (int32_t)v[1];
		in->u.conv.c = (int32_t)v[2];
		in->u.conv.h = (int32_t)v[3];
		in->u.conv.w = (int32_t)v[4];
		in->u.conv.k = (int32_t)v[5];
		in->u.conv.r = (int32_t)v[6];
		in->u.conv.s = (int32_t)v[7];
		in->u.conv.algo = (int32_t)v[8];
		in->u.conv.workspace = (uint64_t)v[9];
		in->u.conv.dtype = (uint8_t)v[10];
	} else if (strcmp(s, "gemm") == 0 && n >= 6) {
		in->type = VMEM_INFO_GEMM;
		in->u.gemm.m = v[0];
		in->u.gemm.n = v[1];
		in->u.gemm.k = v[2];
		in->u.gemm.transa = (uint8_t)v[3];
		in->u.gemm.transb = (uint8_t)v[4];
		in->u.gemm.batch = v[5];
	} else if (strcmp(s, "copy") == 0 && n >= 2) {
		in->type = VMEM_INFO_COPY;
		in->u.copy.bytes = (uint64_t)v[0];
		in->u.copy.kind = (uint8_t)v[1];
	} else if (strcmp(s, "launch") == 0 && n >= 3) {
		in->type = VMEM_INFO_LAUNCH;
		in->u.launch.func = (uintptr_t)v[0];
		in->u.launch.grid[0] = (uint32_t)v[1];
		in->u.launch.block[0] = (uint32_t)v[2];
	} else {
		return -1;
	}
	return 0;
}

static int parse_range(policy_replay_t *r, char *s, vmem_range_t *out)
{
	char *f[5], *save = NULL;
	int n = 0;

	for (char *t = strtok_r(s, ":", &save); t && n < 5; t = strtok_r(NULL, ":", &save))
		f[n++] = t;
	if (n != 5)
		return -1;
	memset(out, 0, sizeof(*out));
	out->alloc_id = strtoull(f[0], NULL, 10);
	out->offset = strtoull(f[1], NULL, 16);
	out->bytes = strtoull(f[2], NULL, 10);
	/* a synthetic address: distinct per allocation, offsets preserved */
	out->ptr = out->alloc_id ? (uintptr_t)((out->alloc_id << 32) + out->offset)
				 : (uintptr_t)out->offset;
	if (strcmp(f[3], "r") == 0)
		out->access = VMEM_ACCESS_R;
	else if (strcmp(f[3], "w") == 0)
		out->access = VMEM_ACCESS_W;
	else if (strcmp(f[3], "w!") == 0)
		out->access = VMEM_ACCESS_W | VMEM_ACCESS_WHOLE;
	else if (strcmp(f[3], "rw") == 0)
		out->access = VMEM_ACCESS_RW;
	else
		return -1;
	out->role = intern(r, f[4]);
	return out->role ? 0 : -1;
}

policy_rec_t policy_replay_line(policy_replay_t *r, char *line, vmem_event_t *ev,
				uint64_t *alloc_id, uint64_t *bytes)
{
	char *fld[7], *save = NULL, *bar, *tok;
	int nf = 0, nr = 0;

	line[strcspn(line, "\r\n")] = '\0';
	while (*line == ' ')
		line++;
	if (line[0] == '\0' || line[0] == '#')
		return POLICY_REC_NONE;
	if (line[0] == 'A' || line[0] == 'F') {
		char *end;

		*alloc_id = strtoull(line + 1, &end, 10);
		*bytes = line[0] == 'A' ? strtoull(end, &end, 10) : 0;
		return end == line + 1 ? POLICY_REC_BAD
				       : line[0] == 'A' ? POLICY_REC_ALLOC : POLICY_REC_FREE;
	}
	if (line[0] != 'E' || line[1] != ' ')
		return POLICY_REC_BAD;
	bar = strstr(line, " |");
	if (bar)
		*bar = '\0';
	for (tok = strtok_r(line + 2, " ", &save); tok && nf < 7; tok = strtok_r(NULL, " ", &save))
		fld[nf++] = tok;
	if (nf != 7 || tok)
		return POLICY_REC_BAD;
	memset(ev, 0, sizeof(*ev));
	if (bar) {
		char *rs = NULL;

		for (tok = strtok_r(bar + 2, " ", &rs); tok; tok = strtok_r(NULL, " ", &rs)) {
			if (nr == r->caprg) {
				int cap = r->caprg ? r->caprg * 2 : 64;
				vmem_range_t *ng = realloc(r->rg, (size_t)cap * sizeof(*ng));

				if (!ng)
					return POLICY_REC_BAD;
				r->rg = ng;
				r->caprg = cap;
			}
			if (parse_range(r, tok, &r->rg[nr++]) < 0)
				return POLICY_REC_BAD;
		}
	}
	ev->seq = strtoull(fld[0], NULL, 10);
	ev->thread = strtoull(fld[1], NULL, 10);
	ev->stream = (uintptr_t)strtoull(fld[2], NULL, 16);
	ev->kind = vmem_op_from_name(fld[3]);
	ev->api = intern(r, fld[4]);
	ev->dur_ns = strtoull(fld[5], NULL, 10);
	if (ev->kind == VMEM_OP_COUNT || !ev->api || parse_info(fld[6], &ev->info) < 0)
		return POLICY_REC_BAD;
	ev->nranges = nr;
	ev->ranges = r->rg;
	ev->t_ns = 0;
	return POLICY_REC_EVENT;
}
