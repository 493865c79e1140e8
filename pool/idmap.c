/* pool/idmap.c - live allocation ids: id -> allocation (and, for a small
 * one, its block in the slab).
 *
 * The policies name ranges by allocation id (pool.h, the policies'
 * operations): an id is never reused, so an action planned for a tensor
 * that was freed since cannot reach a later one at the same address.
 * Open addressing with linear probing and backward-shift deletion (no
 * tombstones: training frees and allocates all the time); the table keeps
 * its load under one half.
 */
#include "pool/pool_internal.h"

static uint64_t slot_of(uint64_t id, uint64_t cap)
{
	id ^= id >> 33;
	id *= 0xff51afd7ed558ccdull;
	id ^= id >> 33;
	return id & (cap - 1);
}

static int id_grow(pool_t *p)
{
	uint64_t nc = p->capids ? p->capids * 2 : 1024;
	struct idslot *n = calloc(nc, sizeof(*n));
	if (!n)
		return -1;
	for (uint64_t i = 0; i < p->capids; i++) {
		if (!p->ids[i].id)
			continue;
		uint64_t k = slot_of(p->ids[i].id, nc);
		while (n[k].id)
			k = (k + 1) & (nc - 1);
		n[k] = p->ids[i];
	}
	free(p->ids);
	p->ids = n;
	p->capids = nc;
	return 0;
}

int pool_id_put(pool_t *p, uint64_t id, struct alloc *a, uint32_t block)
{
	if ((p->nids + 1) * 2 > p->capids && id_grow(p))
		return -1;
	uint64_t k = slot_of(id, p->capids);
	while (p->ids[k].id && p->ids[k].id != id)
		k = (k + 1) & (p->capids - 1);
	if (!p->ids[k].id)
		p->nids++;
	p->ids[k] = (struct idslot){ id, a, block };
	return 0;
}

const struct idslot *pool_id_get(const pool_t *p, uint64_t id)
{
	if (!id || !p->capids)
		return NULL;
	uint64_t k = slot_of(id, p->capids);
	while (p->ids[k].id) {
		if (p->ids[k].id == id)
			return &p->ids[k];
		k = (k + 1) & (p->capids - 1);
	}
	return NULL;
}

void pool_id_del(pool_t *p, uint64_t id)
{
	if (!id || !p->capids)
		return;
	uint64_t mask = p->capids - 1, k = slot_of(id, p->capids);
	while (p->ids[k].id && p->ids[k].id != id)
		k = (k + 1) & mask;
	if (!p->ids[k].id)
		return;
	/* backward shift: move later entries of the run into the hole when
	 * their home slot is not between the hole and them */
	uint64_t hole = k;
	for (uint64_t j = (k + 1) & mask; p->ids[j].id; j = (j + 1) & mask) {
		uint64_t home = slot_of(p->ids[j].id, p->capids);
		if (((j - home) & mask) >= ((j - hole) & mask)) {
			p->ids[hole] = p->ids[j];
			hole = j;
		}
	}
	p->ids[hole].id = 0;
	p->nids--;
}

void pool_id_fini(pool_t *p)
{
	free(p->ids);
	p->ids = NULL;
	p->nids = p->capids = 0;
}
