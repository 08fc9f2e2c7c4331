/* SPDX-License-Identifier: MIT */
/*
 * q_spsc.c - the single-producer / single-consumer ceiling: the plain
 * cached-index ring a good engineer writes for one producer and one
 * consumer and nothing else. Each side owns its index on a line of its
 * own and keeps a private copy of the other side's, reloaded only when the
 * batch does not seem to fit (or nothing seems ready). A batch is one
 * reload at most, k plain copies and one release store. No close, no
 * waiting, no item rules: the floor that batchpipe's SP/SC mode is held to.
 */
#include "queues/queues.h"

#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "lab/bpbench.h"

/* two lines: x86 fetches adjacent line pairs, so each index gets a pair */
#define BENCH_SPSC_LINE 128

struct bench_spsc {
	/* producer's line: its index and its copy of the consumer's */
	alignas(BENCH_SPSC_LINE) _Atomic unsigned long head;
	unsigned long tail_cache;
	/* consumer's line */
	alignas(BENCH_SPSC_LINE) _Atomic unsigned long tail;
	unsigned long head_cache;
	/* read-only after create */
	alignas(BENCH_SPSC_LINE) unsigned long cap, mask;
	void **slots;
};

static void *bench_spsc_create(unsigned capacity, unsigned p, unsigned c,
			       const atomic_int *stop)
{
	struct bench_spsc *q = aligned_alloc(BENCH_SPSC_LINE, sizeof(*q));

	if (!q)
		bench_die("bpbench: out of memory\n");
	memset(q, 0, sizeof(*q));
	q->cap = capacity; /* a power of two (the harness insists) */
	q->mask = capacity - 1;
	q->slots = bench_zalloc(sizeof(void *) * capacity);
	return q;
}

static void bench_spsc_destroy(void *p)
{
	struct bench_spsc *q = p;

	free(q->slots);
	free(q);
}

static int bench_spsc_enqueue(void *p, unsigned tid, void *const *items,
			      unsigned n)
{
	struct bench_spsc *q = p;
	/* relaxed: only this thread writes head */
	unsigned long h = atomic_load_explicit(&q->head, memory_order_relaxed);
	unsigned long room = q->cap - (h - q->tail_cache), k, i, first;

	if (room < n) {
		/* acquire: the consumer read those slots before it moved on */
		q->tail_cache =
			atomic_load_explicit(&q->tail, memory_order_acquire);
		room = q->cap - (h - q->tail_cache);
	}
	k = n < room ? n : room;
	i = h & q->mask;
	first = q->cap - i < k ? q->cap - i : k;
	memcpy(q->slots + i, items, first * sizeof(void *));
	memcpy(q->slots, items + first, (k - first) * sizeof(void *));
	/* release: the items before the index that shows them */
	atomic_store_explicit(&q->head, h + k, memory_order_release);
	return (int)k;
}

static int bench_spsc_dequeue(void *p, unsigned tid, void **items, unsigned n)
{
	struct bench_spsc *q = p;
	/* relaxed: only this thread writes tail */
	unsigned long t = atomic_load_explicit(&q->tail, memory_order_relaxed);
	unsigned long ready = q->head_cache - t, k, i, first;

	if (ready < n) {
		/* acquire: pairs with the producer's release of head */
		q->head_cache =
			atomic_load_explicit(&q->head, memory_order_acquire);
		ready = q->head_cache - t;
	}
	k = n < ready ? n : ready;
	i = t & q->mask;
	first = q->cap - i < k ? q->cap - i : k;
	memcpy(items, q->slots + i, first * sizeof(void *));
	memcpy(items + first, q->slots, (k - first) * sizeof(void *));
	/* release: our reads of the slots before the producer reuses them */
	atomic_store_explicit(&q->tail, t + k, memory_order_release);
	return (int)k;
}

const struct bench_queue_ops bench_q_spsc = {
	.name = "spsc-ceiling",
	.max_producers = 1,
	.max_consumers = 1,
	.ceiling = 1,
	.create = bench_spsc_create,
	.destroy = bench_spsc_destroy,
	.enqueue = bench_spsc_enqueue,
	.dequeue = bench_spsc_dequeue,
};
