/* SPDX-License-Identifier: MIT */
/*
 * q_rte_ring.c - DPDK's rte_ring in its three multi-producer /
 * multi-consumer modes: the classic one (MP/MC: a CAS on the head, then
 * each thread waits for the ones before it to move the tail), head/tail
 * sync (HTS: one thread at a time per side) and relaxed tail sync (RTS:
 * the last thread out moves the tail). Used without the EAL, as a plain
 * library: rte_ring_init() on cache-line-aligned ordinary memory. Its
 * enqueue/dequeue paths are inline in DPDK's headers, so this file is
 * compiled with DPDK's own flags (bench/meson.build), apart from the rest.
 * RING_F_EXACT_SZ: the ring holds exactly `capacity` items, as the others.
 */
#include "queues/queues.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_ring.h>

#include "lab/errors.h"

static void *bench_rte_create(unsigned capacity, unsigned flags)
{
	unsigned f = flags | RING_F_EXACT_SZ;
	/* an exact-size ring of N items has the next power of two above N
	 * slots (rte_ring_create_elem sizes its memory the same way) */
	ssize_t size = rte_ring_get_memsize_elem(sizeof(void *),
						 rte_align32pow2(capacity + 1));
	struct rte_ring *r;
	int rc;

	if (size < 0) {
		fprintf(stderr, "rte_ring_get_memsize_elem(%u): %zd\n",
			capacity, size);
		return NULL;
	}
	r = aligned_alloc(RTE_CACHE_LINE_SIZE,
			  ((size_t)size + RTE_CACHE_LINE_SIZE - 1) &
				  ~(size_t)(RTE_CACHE_LINE_SIZE - 1));
	if (!r)
		bench_die("bpbench: out of memory\n");
	memset(r, 0, (size_t)size);
	rc = rte_ring_init(r, "bpbench", capacity, f);
	if (rc < 0) {
		fprintf(stderr, "rte_ring_init(%u, %#x): %s\n", capacity, f,
			strerror(-rc));
		free(r);
		return NULL;
	}
	return r;
}

static void *bench_rte_create_mpmc(unsigned capacity, unsigned p, unsigned c,
				   const atomic_int *stop)
{
	return bench_rte_create(capacity, 0);
}

static void *bench_rte_create_hts(unsigned capacity, unsigned p, unsigned c,
				  const atomic_int *stop)
{
	return bench_rte_create(capacity,
				RING_F_MP_HTS_ENQ | RING_F_MC_HTS_DEQ);
}

static void *bench_rte_create_rts(unsigned capacity, unsigned p, unsigned c,
				  const atomic_int *stop)
{
	return bench_rte_create(capacity,
				RING_F_MP_RTS_ENQ | RING_F_MC_RTS_DEQ);
}

static void bench_rte_destroy(void *q)
{
	free(q);
}

/* The mode-generic burst calls: they dispatch on the mode set at init. */
static int bench_rte_enqueue(void *q, unsigned tid, void *const *items,
			     unsigned n)
{
	return (int)rte_ring_enqueue_burst(q, items, n, NULL);
}

static int bench_rte_dequeue(void *q, unsigned tid, void **items, unsigned n)
{
	return (int)rte_ring_dequeue_burst(q, items, n, NULL);
}

const struct bench_queue_ops bench_q_rte_ring = {
	.name = "rte_ring",
	.create = bench_rte_create_mpmc,
	.destroy = bench_rte_destroy,
	.enqueue = bench_rte_enqueue,
	.dequeue = bench_rte_dequeue,
};

const struct bench_queue_ops bench_q_rte_ring_hts = {
	.name = "rte_ring-hts",
	.create = bench_rte_create_hts,
	.destroy = bench_rte_destroy,
	.enqueue = bench_rte_enqueue,
	.dequeue = bench_rte_dequeue,
};

const struct bench_queue_ops bench_q_rte_ring_rts = {
	.name = "rte_ring-rts",
	.create = bench_rte_create_rts,
	.destroy = bench_rte_destroy,
	.enqueue = bench_rte_enqueue,
	.dequeue = bench_rte_dequeue,
};
