/* tests/unit/policy/fixture.c - see fixture.h. */
#include "fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Strings live as long as the process: the policy keeps api/role pointers. */
static const char *intern(const char *s)
{
	static char **tab;
	static int n, cap;

	for (int i = 0; i < n; i++)
		if (strcmp(tab[i], s) == 0)
			return tab[i];
	if (n == cap) {
		cap = cap ? cap * 2 : 64;
		tab = realloc(tab, (size_t)cap * sizeof(*tab));
		if (!tab)
			abort();
	}
	tab[n] = strdup(s);
	if (!tab[n])
		abort();
	return tab[n++];
}

static int parse_info(const char *s, vmem_op_info_t *in)
{
	long long v[12] = { 0 };
	char kind[16];
	int n = 0;
	const char *p = strchr(s, ':');

	memset(in, 0, sizeof(*in));
	if (strcmp(s, "-") == 0)
		return 0;
	if (!p || (size_t)(p - s) >= sizeof(kind))
		return -1;
	memcpy(kind, s, (size_t)(p - s));
	kind[p - s] = '\0';
	while (p && *p == ':' && n < 12) {
		char *end;

		v[n++] = strtoll(p + 1, &end, 0);
		p = end;
	}
	if (strcmp(kind, "conv") == 0 && n >= 11) {
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
	} else if (strcmp(kind, "gemm") == 0 && n >= 6) {
		in->type = VMEM_INFO_GEMM;
		in->u.gemm.m = v[0];
		in->u.gemm.n = v[1];
		in->u.gemm.k = v[2];
		in->u.gemm.transa = (uint8_t)v[3];
		in->u.gemm.transb = (uint8_t)v[4];
		in->u.gemm.batch = v[5];
	} else if (strcmp(kind, "copy") == 0 && n >= 2) {
		in->type = VMEM_INFO_COPY;
		in->u.copy.bytes = (uint64_t)v[0];
		in->u.copy.kind = (uint8_t)v[1];
	} else if (strcmp(kind, "launch") == 0 && n >= 3) {
		in->type = VMEM_INFO_LAUNCH;
		in->u.launch.func = (uintptr_t)v[0];
		in->u.launch.grid[0] = (uint32_t)v[1];
		in->u.launch.block[0] = (uint32_t)v[2];
	} else {
		return -1;
	}
	return 0;
}

static int parse_range(char *s, vmem_range_t *r)
{
	char *f[5];
	int n = 0;

	for (char *t = strtok(s, ":"); t && n < 5; t = strtok(NULL, ":"))
		f[n++] = t;
	if (n != 5)
		return -1;
	memset(r, 0, sizeof(*r));
	r->alloc_id = strtoull(f[0], NULL, 0);
	r->offset = strtoull(f[1], NULL, 16);
	r->bytes = strtoull(f[2], NULL, 0);
	r->ptr = (uintptr_t)(r->alloc_id << 32) + r->offset;
	if (strcmp(f[3], "r") == 0)
		r->access = VMEM_ACCESS_R;
	else if (strcmp(f[3], "w") == 0)
		r->access = VMEM_ACCESS_W;
	else if (strcmp(f[3], "w!") == 0)
		r->access = VMEM_ACCESS_W | VMEM_ACCESS_WHOLE;
	else if (strcmp(f[3], "rw") == 0)
		r->access = VMEM_ACCESS_RW;
	else
		return -1;
	r->role = intern(f[4]);
	return 0;
}

int fixture_replay(drv_t *d, const char *name, fixture_stats_t *st)
{
	const char *dir = getenv("VMEM_POLICY_FIXTURES");
	char path[1024], line[1 << 16];
	FILE *f;
	int lineno = 0;
	vmem_range_t *rg = malloc(4096 * sizeof(*rg));

	memset(st, 0, sizeof(*st));
	snprintf(path, sizeof(path), "%s/%s", dir ? dir : "fixtures", name);
	f = fopen(path, "r");
	if (!f || !rg) {
		fprintf(stderr, "fixture %s: cannot open (set VMEM_POLICY_FIXTURES)\n", path);
		free(rg);
		if (f)
			fclose(f);
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		char *save = NULL, *tok;
		char *fld[8];
		int nf = 0, nr = 0;

		lineno++;
		line[strcspn(line, "\n")] = '\0';
		if (line[0] == '#' || line[0] == '\0')
			continue;
		if (line[0] == 'A') {
			unsigned long long id, bytes;

			if (sscanf(line, "A %llu %llu", &id, &bytes) == 2)
				policy_allocated(d->p, id, bytes);
			continue;
		}
		if (line[0] == 'F') {
			unsigned long long id;

			if (sscanf(line, "F %llu", &id) == 1)
				policy_freed(d->p, id);
			continue;
		}
		if (line[0] != 'E')
			goto bad;
		{
			char *bar = strstr(line, " |");
			char *ranges = bar ? bar + 2 : NULL;
			vmem_event_t ev = { 0 };

			if (bar)
				*bar = '\0';
			for (tok = strtok_r(line + 1, " ", &save); tok && nf < 8;
			     tok = strtok_r(NULL, " ", &save))
				fld[nf++] = tok;
			if (nf != 7)
				goto bad;
			if (ranges) {
				char *rs = NULL;

				for (tok = strtok_r(ranges, " ", &rs); tok && nr < 4096;
				     tok = strtok_r(NULL, " ", &rs))
					if (parse_range(tok, &rg[nr++]) < 0)
						goto bad;
			}
			ev.seq = strtoull(fld[0], NULL, 0);
			ev.thread = strtoull(fld[1], NULL, 0);
			ev.stream = (uintptr_t)strtoull(fld[2], NULL, 16);
			ev.kind = vmem_op_from_name(fld[3]);
			if (ev.kind == VMEM_OP_COUNT)
				goto bad;
			ev.api = intern(fld[4]);
			ev.dur_ns = 0;
			if (parse_info(fld[6], &ev.info) < 0)
				goto bad;
			ev.nranges = nr;
			ev.ranges = rg;
			ev.t_ns = ev.seq * 1000;
			policy_before(d->p, &ev, &d->buf);
			d->seq = ev.seq;
			drv_keep(d, ev.seq);
			ev.dur_ns = strtoull(fld[5], NULL, 0);
			policy_after(d->p, &ev, &d->buf);
			drv_keep(d, ev.seq);
			st->events++;
			st->significant += policy_event_significant(ev.kind);
			if (!st->first_seq)
				st->first_seq = ev.seq;
			st->last_seq = ev.seq;
		}
		continue;
bad:
		fprintf(stderr, "fixture %s:%d: bad line\n", path, lineno);
		fclose(f);
		free(rg);
		return -1;
	}
	fclose(f);
	free(rg);
	return 0;
}
