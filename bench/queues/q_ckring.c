/* SPDX-License-Identifier: MIT */
/*
 * q_ckring.c - ConcurrencyKit's ck_ring in MPMC mode. ck offers no batch call
 * for MPMC pointer rings, so a batch is n single-item calls; that per-item
 * atomic is part of what is being compared. ck_ring keeps one slot empty:
 * a ring of `capacity` slots holds capacity - 1 items.
 */
#include "queues.h"

#include <stdatomic.h>
#include <stdlib.h>

#include <ck_ring.h>

#include "bpbench.h"

struct bench_ck_ring {
	struct ck_ring ring; /* ck pads its producer and consumer indices */
	struct ck_ring_buffer *buf;
	const atomic_int *stop;
};

static void *bench_ck_create(unsigned capacity, unsigned p, unsigned c,
			     const atomic_int *stop)
{
	struct bench_ck_ring *q = bench_zalloc(sizeof(*q));

	q->stop = stop;
	q->buf = bench_zalloc(sizeof(*q->buf) * capacity);
	ck_ring_init(&q->ring, capacity);
	return q;
}

static void bench_ck_destroy(void *p)
{
	struct bench_ck_ring *q = p;

	free(q->buf);
	free(q);
}

static int bench_ck_enqueue(void *p, unsigned tid, void *const *items,
			    unsigned n)
{
	struct bench_ck_ring *q = p;
	unsigned i;

	for (i = 0; i < n; i++) {
		/*
		 * Each enqueue_mpmc waits, spinning, for the producer before it
		 * to publish; when that one is preempted the wait lasts a time
		 * slice. Stop between items once the run is over (relaxed: a
		 * time signal only), or a batch of 256 overruns it by a second.
		 */
		if (i && q->stop &&
		    atomic_load_explicit(q->stop, memory_order_relaxed))
			break;
		if (!ck_ring_enqueue_mpmc(&q->ring, q->buf, items[i]))
			break;
	}
	return (int)i;
}

static int bench_ck_dequeue(void *p, unsigned tid, void **items, unsigned n)
{
	struct bench_ck_ring *q = p;
	unsigned i;

	for (i = 0; i < n; i++)
		if (!ck_ring_dequeue_mpmc(&q->ring, q->buf, &items[i]))
			break;
	return (int)i;
}

const struct bench_queue_ops bench_q_ckring = {
	.name = "ck_ring",
	.create = bench_ck_create,
	.destroy = bench_ck_destroy,
	.enqueue = bench_ck_enqueue,
	.dequeue = bench_ck_dequeue,
};
