/* SPDX-License-Identifier: MIT */
/*
 * q_batchpipe.c - bp_ring in each synchronisation mode, through the
 * non-blocking burst calls, so it gets exactly the retry policy the other
 * non-blocking queues get.
 */
#include "queues/queues.h"

#include <stdio.h>

#include <batchpipe/error.h>
#include <batchpipe/ring.h>

static void *bench_bp_create(unsigned capacity, unsigned flags)
{
	struct bp_ring *r = NULL;
	int rc = bp_ring_create(capacity, flags, &r);

	if (rc < 0) {
		fprintf(stderr, "bp_ring_create(%u, %#x): %s\n", capacity,
			flags, bp_strerror(rc));
		return NULL;
	}
	return r;
}

static void *bench_bp_create_mpmc(unsigned capacity, unsigned p, unsigned c,
				  const atomic_int *stop)
{
	return bench_bp_create(capacity, 0);
}

static void *bench_bp_create_spsc(unsigned capacity, unsigned p, unsigned c,
				  const atomic_int *stop)
{
	return bench_bp_create(capacity, BP_RING_SP | BP_RING_SC);
}

static void *bench_bp_create_mpsc(unsigned capacity, unsigned p, unsigned c,
				  const atomic_int *stop)
{
	return bench_bp_create(capacity, BP_RING_SC);
}

static void *bench_bp_create_spmc(unsigned capacity, unsigned p, unsigned c,
				  const atomic_int *stop)
{
	return bench_bp_create(capacity, BP_RING_SP);
}

static void bench_bp_destroy(void *q)
{
	bp_ring_destroy(q);
}

static int bench_bp_enqueue(void *q, unsigned tid, void *const *items,
			    unsigned n)
{
	return bp_ring_enqueue_burst(q, items, n, NULL);
}

static int bench_bp_dequeue(void *q, unsigned tid, void **items, unsigned n)
{
	return bp_ring_dequeue_burst(q, items, n, NULL);
}

const struct bench_queue_ops bench_q_batchpipe = {
	.name = "batchpipe",
	.create = bench_bp_create_mpmc,
	.destroy = bench_bp_destroy,
	.enqueue = bench_bp_enqueue,
	.dequeue = bench_bp_dequeue,
};

const struct bench_queue_ops bench_q_batchpipe_sp_sc = {
	.name = "batchpipe-sp-sc",
	.max_producers = 1,
	.max_consumers = 1,
	.create = bench_bp_create_spsc,
	.destroy = bench_bp_destroy,
	.enqueue = bench_bp_enqueue,
	.dequeue = bench_bp_dequeue,
};

const struct bench_queue_ops bench_q_batchpipe_mp_sc = {
	.name = "batchpipe-mp-sc",
	.max_consumers = 1,
	.create = bench_bp_create_mpsc,
	.destroy = bench_bp_destroy,
	.enqueue = bench_bp_enqueue,
	.dequeue = bench_bp_dequeue,
};

const struct bench_queue_ops bench_q_batchpipe_sp_mc = {
	.name = "batchpipe-sp-mc",
	.max_producers = 1,
	.create = bench_bp_create_spmc,
	.destroy = bench_bp_destroy,
	.enqueue = bench_bp_enqueue,
	.dequeue = bench_bp_dequeue,
};
