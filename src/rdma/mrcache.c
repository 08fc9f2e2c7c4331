/* SPDX-License-Identifier: MIT */
/*
 * The registration cache: which fid_mr covers an address range, per slot
 * (worker and rail), in liburcu's lock-free hash table (rculfhash).
 *
 * Workers look up without locks on every job whose buffer is not the one
 * their rail used last (stage.c keeps that one entry). Nodes are added by
 * the slot's owner, or by the application before the pipeline starts, and
 * are never removed while readers may run: the table is destroyed with the
 * stage. So no reader ever walks freed memory, and the table is created
 * without automatic resizing, whose bucket tables are freed after a grace
 * period that threads outside RCU (an application calling
 * bp_rdma_register) would not be part of. Lookups stay correct at any
 * size; chains grow only past thousands of registrations.
 */
#include <errno.h>
#include <stdlib.h>

#include <urcu/urcu-qsbr.h>

#include <urcu/rculfhash.h>

#include "src/rdma/rdma_internal.h"

#define GRANULE_SHIFT 21 /* 2 MiB */
#define BUCKETS	      4096
#define MAX_GRANULES  (1u << 16) /* one registration: 128 GiB at most */

struct mr_node {
	struct cds_lfht_node node;
	uint64_t granule;
	uint32_t slot;
	struct mr_rec *rec;
};

struct mr_rec {
	struct bpi_mr_entry e;
	struct mr_rec *next; /* every record, for destroy */
	unsigned nnodes;
	struct mr_node nodes[];
};

struct bpi_mrcache {
	struct cds_lfht *ht;
	/* records, pushed by any adder; read only by destroy */
	_Atomic(struct mr_rec *) all;
};

struct mr_key {
	uint64_t granule;
	uint32_t slot;
};

static unsigned long key_hash(uint32_t slot, uint64_t granule)
{
	uint64_t h = granule * 0x9e3779b97f4a7c15ull ^ slot;

	h ^= h >> 31;
	h *= 0xbf58476d1ce4e5b9ull;
	return (unsigned long)(h ^ (h >> 29));
}

static int key_match(struct cds_lfht_node *n, const void *key)
{
	const struct mr_node *m = caa_container_of(n, struct mr_node, node);
	const struct mr_key *k = key;

	return m->granule == k->granule && m->slot == k->slot;
}

int bpi_mrcache_create(struct bpi_mrcache **out)
{
	struct bpi_mrcache *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->ht = cds_lfht_new_flavor(BUCKETS, BUCKETS, BUCKETS, 0,
				    &urcu_qsbr_flavor, NULL);
	if (!c->ht) {
		free(c);
		return -ENOMEM;
	}
	*out = c;
	return 0;
}

const struct bpi_mr_entry *bpi_mrcache_find(struct bpi_mrcache *c,
					    uint32_t slot, uintptr_t addr,
					    size_t len)
{
	struct mr_key k = {.granule = addr >> GRANULE_SHIFT, .slot = slot};
	struct cds_lfht_iter it;
	struct cds_lfht_node *n;

	cds_lfht_lookup(c->ht, key_hash(slot, k.granule), key_match, &k, &it);
	while ((n = cds_lfht_iter_get_node(&it))) {
		const struct mr_rec *r =
			caa_container_of(n, struct mr_node, node)->rec;

		if (addr >= r->e.base && addr + len <= r->e.base + r->e.len)
			return &r->e;
		cds_lfht_next_duplicate(c->ht, key_match, &k, &it);
	}
	return NULL;
}

int bpi_mrcache_add(struct bpi_mrcache *c, uint32_t slot, uintptr_t base,
		    size_t len, struct fid_mr *mr,
		    const struct bpi_mr_entry **out)
{
	uint64_t g0 = base >> GRANULE_SHIFT;
	uint64_t g1 = (base + len - 1) >> GRANULE_SHIFT;
	uint64_t ng = g1 - g0 + 1;
	struct mr_rec *r;

	if (ng > MAX_GRANULES)
		return -E2BIG;
	r = calloc(1, sizeof(*r) + ng * sizeof(r->nodes[0]));
	if (!r)
		return -ENOMEM;
	r->e = (struct bpi_mr_entry){.base = base,
				     .len = len,
				     .slot = slot,
				     .mr = mr,
				     .desc = fi_mr_desc(mr)};
	r->nnodes = (unsigned)ng;
	/* push onto the destroy list; relaxed: only destroy reads it, after
	 * every adder has returned (the stage's threads are joined) */
	r->next = atomic_load_explicit(&c->all, memory_order_relaxed);
	while (!atomic_compare_exchange_weak_explicit(&c->all, &r->next, r,
						      memory_order_relaxed,
						      memory_order_relaxed))
		;
	for (unsigned i = 0; i < r->nnodes; i++) {
		struct mr_node *m = &r->nodes[i];

		m->granule = g0 + i;
		m->slot = slot;
		m->rec = r;
		cds_lfht_node_init(&m->node);
		/* rculfhash publishes the node (and the record written
		 * above) with a release: lookups that find it see it whole */
		cds_lfht_add(c->ht, key_hash(slot, m->granule), &m->node);
	}
	if (out)
		*out = &r->e;
	return 0;
}

void bpi_mrcache_destroy(struct bpi_mrcache *c)
{
	struct mr_rec *r, *next;

	if (!c)
		return;
	/* relaxed: no adder or reader is left (see bpi_mrcache_add) */
	for (r = atomic_load_explicit(&c->all, memory_order_relaxed); r;
	     r = next) {
		next = r->next;
		for (unsigned i = 0; i < r->nnodes; i++)
			cds_lfht_del(c->ht, &r->nodes[i].node);
		if (r->e.mr)
			fi_close(&r->e.mr->fid);
		free(r);
	}
	cds_lfht_destroy(c->ht, NULL);
	free(c);
}
