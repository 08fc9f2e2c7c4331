/* SPDX-License-Identifier: MIT */
/*
 * q_wfcq.c - liburcu's wait-free concurrent queue (wfcqueue), made bounded.
 *
 * wfcqueue is an unbounded linked list, so two things are added to make it
 * do the same job as a ring of `capacity` slots:
 *  - an atomic count of items in the queue, which producers raise (one CAS
 *    per batch) before enqueueing and consumers lower after dequeueing, kept
 *    <= capacity;
 *  - nodes from a per-producer pool (2 x capacity, used round-robin), each
 *    with a `busy` flag that the consumer clears only after it has read the
 *    item, so a node is never reused while somebody may still read it.
 *
 * Batches use the best public means: a producer links its batch into a
 * private wfcqueue and splices it onto the shared one (one contended
 * exchange per batch); a consumer takes the dequeue lock once per batch
 * (no lock at all with a single consumer, which needs no mutual exclusion).
 * The non-blocking dequeue is used so that a half-finished enqueue makes the
 * consumer return what it has and take the common retry policy, instead of
 * liburcu's own busy-wait, which sleeps in poll() for 10 ms.
 */
#define _LGPL_SOURCE /* the inline fast paths, as an LGPL user would */
#include "queues/queues.h"

#include <stdatomic.h>
#include <stdlib.h>

#include <urcu/compiler.h>
#include <urcu/wfcqueue.h>

#include "lab/bpbench.h"

struct bench_wfcq_node {
	struct cds_wfcq_node node;
	void *item;
	atomic_int busy; /* 1 from enqueue until the consumer has read item */
};

struct bench_wfcq_producer {
	struct bench_wfcq_node *pool;
	unsigned mask;
	unsigned long next; /* pool index of the next node to use */
	/* private queue in which a batch is linked before the splice */
	struct __cds_wfcq_head batch_head;
	struct cds_wfcq_tail batch_tail;
} __attribute__((aligned(BENCH_CACHELINE)));

struct bench_wfcq {
	/* wfcqueue.h asks for head and tail on separate lines */
	struct cds_wfcq_head head __attribute__((aligned(BENCH_CACHELINE)));
	struct cds_wfcq_tail tail __attribute__((aligned(BENCH_CACHELINE)));
	atomic_long count __attribute__((aligned(BENCH_CACHELINE)));
	long cap; /* read with count, so on its line */
	int single_consumer;
	unsigned nprod;
	struct bench_wfcq_producer *prod;
};

static void *bench_wfcq_create(unsigned capacity, unsigned producers,
			       unsigned consumers, const atomic_int *stop)
{
	struct bench_wfcq *q = bench_zalloc(sizeof(*q));
	unsigned pool = 2 * capacity;

	cds_wfcq_init(&q->head, &q->tail);
	atomic_init(&q->count, 0);
	q->cap = capacity;
	q->single_consumer = consumers == 1;
	q->nprod = producers;
	q->prod = bench_zalloc(sizeof(*q->prod) * producers);
	for (unsigned p = 0; p < producers; p++) {
		struct bench_wfcq_producer *pr = &q->prod[p];

		pr->pool = bench_zalloc(sizeof(*pr->pool) * pool);
		pr->mask = pool - 1;
		for (unsigned i = 0; i < pool; i++)
			atomic_init(&pr->pool[i].busy, 0);
		__cds_wfcq_init(&pr->batch_head, &pr->batch_tail);
	}
	return q;
}

static void bench_wfcq_destroy(void *p)
{
	struct bench_wfcq *q = p;

	for (unsigned i = 0; i < q->nprod; i++)
		free(q->prod[i].pool);
	free(q->prod);
	cds_wfcq_destroy(&q->head, &q->tail);
	free(q);
}

/* Take up to `want` units of room from the count; returns what it got. */
static unsigned bench_wfcq_reserve(struct bench_wfcq *q, unsigned want)
{
	/* relaxed: the count only bounds occupancy; items are published by
	 * wfcqueue's own barriers and nodes are guarded by their busy flags */
	long cur = atomic_load_explicit(&q->count, memory_order_relaxed);
	long take;

	do {
		if (cur >= q->cap)
			return 0;
		take = q->cap - cur < (long)want ? q->cap - cur : (long)want;
	} while (!atomic_compare_exchange_weak_explicit(
		&q->count, &cur, cur + take, memory_order_relaxed,
		memory_order_relaxed));
	return (unsigned)take;
}

static int bench_wfcq_enqueue(void *p, unsigned tid, void *const *items,
			      unsigned n)
{
	struct bench_wfcq *q = p;
	struct bench_wfcq_producer *pr = &q->prod[tid];
	unsigned k = 0;

	/* acquire: pairs with the consumer's release of busy, so its read of
	 * the old item is done before we overwrite it */
	while (k < n &&
	       !atomic_load_explicit(&pr->pool[(pr->next + k) & pr->mask].busy,
				     memory_order_acquire))
		k++;
	if (k == 0 || (k = bench_wfcq_reserve(q, k)) == 0)
		return 0;

	for (unsigned i = 0; i < k; i++) {
		struct bench_wfcq_node *nd =
			&pr->pool[(pr->next + i) & pr->mask];

		cds_wfcq_node_init(&nd->node);
		nd->item = items[i];
		/* relaxed: published by the enqueue's full barrier */
		atomic_store_explicit(&nd->busy, 1, memory_order_relaxed);
		if (k == 1)
			cds_wfcq_enqueue(&q->head, &q->tail, &nd->node);
		else
			cds_wfcq_enqueue(&pr->batch_head, &pr->batch_tail,
					 &nd->node);
	}
	if (k > 1)
		__cds_wfcq_splice_blocking(&q->head, &q->tail, &pr->batch_head,
					   &pr->batch_tail);
	pr->next += k;
	return (int)k;
}

static int bench_wfcq_dequeue(void *p, unsigned tid, void **items, unsigned n)
{
	struct bench_wfcq *q = p;
	unsigned i;

	if (!q->single_consumer)
		cds_wfcq_dequeue_lock(&q->head, &q->tail);
	for (i = 0; i < n; i++) {
		struct cds_wfcq_node *node =
			__cds_wfcq_dequeue_nonblocking(&q->head, &q->tail);
		struct bench_wfcq_node *nd;

		/* NULL: empty; WOULDBLOCK: an enqueue is half done */
		if (!node || node == CDS_WFCQ_WOULDBLOCK)
			break;
		nd = caa_container_of(node, struct bench_wfcq_node, node);
		items[i] = nd->item;
		/* release: our read of item before the node's reuse */
		atomic_store_explicit(&nd->busy, 0, memory_order_release);
	}
	if (!q->single_consumer)
		cds_wfcq_dequeue_unlock(&q->head, &q->tail);
	if (i)
		atomic_fetch_sub_explicit(&q->count, (long)i,
					  memory_order_relaxed);
	return (int)i;
}

const struct bench_queue_ops bench_q_wfcq = {
	.name = "urcu_wfcq",
	.create = bench_wfcq_create,
	.destroy = bench_wfcq_destroy,
	.enqueue = bench_wfcq_enqueue,
	.dequeue = bench_wfcq_dequeue,
};
