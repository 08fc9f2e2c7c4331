/* SPDX-License-Identifier: MIT */
/*
 * q_ckring.c - ConcurrencyKit's ck_ring: MPMC (in `bpbench ring`'s table),
 * and the SP/MC and MP/SC modes that a fixed topology can use (exported for
 * such callers, not in the table). ck offers no batch call for pointer rings
 * shared by several threads, so a batch is n single-item calls; that per-item
 * atomic is part of what is being compared. ck_ring keeps one slot empty:
 * a ring of `capacity` slots holds capacity - 1 items.
 */
#include "queues/queues.h"

#include <stdatomic.h>
#include <stdlib.h>

#include <ck_ring.h>

#include "lab/bpbench.h"

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

/*
 * A multi-producer enqueue waits, spinning, for the producer before it to
 * publish; when that one is preempted the wait lasts a time slice. Stop
 * between items once the run is over (relaxed: a time signal only), or a
 * batch of 256 overruns it by a second.
 */
static int bench_ck_stopped(const struct bench_ck_ring *q, unsigned i)
{
	return i && q->stop &&
	       atomic_load_explicit(q->stop, memory_order_relaxed);
}

/*
 * One batch loop per ck mode, the same loop each time; a macro rather than a
 * function pointer so that each ck call stays inlined, as a user's would.
 * `mp`: a multi-producer mode, which checks the stop between items.
 */
#define BENCH_CK_ENQUEUE(mode, mp)                                             \
	static int bench_ck_enqueue_##mode(void *p, unsigned tid,              \
					   void *const *items, unsigned n)     \
	{                                                                      \
		struct bench_ck_ring *q = p;                                   \
		unsigned i;                                                    \
                                                                               \
		for (i = 0; i < n; i++) {                                      \
			if ((mp) && bench_ck_stopped(q, i))                    \
				break;                                         \
			if (!ck_ring_enqueue_##mode(&q->ring, q->buf,          \
						    items[i]))                 \
				break;                                         \
		}                                                              \
		return (int)i;                                                 \
	}

#define BENCH_CK_DEQUEUE(mode)                                                 \
	static int bench_ck_dequeue_##mode(void *p, unsigned tid,              \
					   void **items, unsigned n)           \
	{                                                                      \
		struct bench_ck_ring *q = p;                                   \
		unsigned i;                                                    \
                                                                               \
		for (i = 0; i < n; i++)                                        \
			if (!ck_ring_dequeue_##mode(&q->ring, q->buf,          \
						    &items[i]))                \
				break;                                         \
		return (int)i;                                                 \
	}

BENCH_CK_ENQUEUE(mpmc, 1)
BENCH_CK_DEQUEUE(mpmc)
/* one producer: no other producer to wait for, so no stop check */
BENCH_CK_ENQUEUE(spmc, 0)
BENCH_CK_DEQUEUE(spmc)
BENCH_CK_ENQUEUE(mpsc, 1)
BENCH_CK_DEQUEUE(mpsc)

const struct bench_queue_ops bench_q_ckring = {
	.name = "ck_ring",
	.create = bench_ck_create,
	.destroy = bench_ck_destroy,
	.enqueue = bench_ck_enqueue_mpmc,
	.dequeue = bench_ck_dequeue_mpmc,
};

const struct bench_queue_ops bench_q_ckring_sp_mc = {
	.name = "ck_ring-sp-mc",
	.max_producers = 1,
	.create = bench_ck_create,
	.destroy = bench_ck_destroy,
	.enqueue = bench_ck_enqueue_spmc,
	.dequeue = bench_ck_dequeue_spmc,
};

const struct bench_queue_ops bench_q_ckring_mp_sc = {
	.name = "ck_ring-mp-sc",
	.max_consumers = 1,
	.create = bench_ck_create,
	.destroy = bench_ck_destroy,
	.enqueue = bench_ck_enqueue_mpsc,
	.dequeue = bench_ck_dequeue_mpsc,
};
