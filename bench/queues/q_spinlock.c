/* SPDX-License-Identifier: MIT */
/*
 * q_spinlock.c - a bounded ring under one pthread_spinlock_t, moving up to n
 * items per lock hold. Lock, head and tail share a cache line on purpose:
 * whoever takes the lock needs all three, so one line moves per operation.
 * Full / empty returns 0 and the harness applies the common retry policy.
 */
#include "queues/queues.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "lab/bpbench.h"

struct bench_spin_ring {
	pthread_spinlock_t lock;
	unsigned cap; /* a power of two (the harness insists) */
	unsigned mask;
	unsigned long head; /* next slot to dequeue */
	unsigned long tail; /* next slot to enqueue */
	void **slots;
};

static void *bench_spin_create(unsigned capacity, unsigned p, unsigned c,
			       const atomic_int *stop)
{
	struct bench_spin_ring *q = bench_zalloc(sizeof(*q));

	pthread_spin_init(&q->lock, PTHREAD_PROCESS_PRIVATE);
	q->cap = capacity;
	q->mask = capacity - 1;
	q->slots = bench_zalloc(sizeof(void *) * capacity);
	return q;
}

static void bench_spin_destroy(void *p)
{
	struct bench_spin_ring *q = p;

	pthread_spin_destroy(&q->lock);
	free(q->slots);
	free(q);
}

static int bench_spin_enqueue(void *p, unsigned tid, void *const *items,
			      unsigned n)
{
	struct bench_spin_ring *q = p;
	unsigned room, k, i, first;

	pthread_spin_lock(&q->lock);
	room = q->cap - (unsigned)(q->tail - q->head);
	k = n < room ? n : room;
	i = (unsigned)q->tail & q->mask;
	first = q->cap - i < k ? q->cap - i : k;
	memcpy(q->slots + i, items, first * sizeof(void *));
	memcpy(q->slots, items + first, (k - first) * sizeof(void *));
	q->tail += k;
	pthread_spin_unlock(&q->lock);
	return (int)k;
}

static int bench_spin_dequeue(void *p, unsigned tid, void **items, unsigned n)
{
	struct bench_spin_ring *q = p;
	unsigned avail, k, i, first;

	pthread_spin_lock(&q->lock);
	avail = (unsigned)(q->tail - q->head);
	k = n < avail ? n : avail;
	i = (unsigned)q->head & q->mask;
	first = q->cap - i < k ? q->cap - i : k;
	memcpy(items, q->slots + i, first * sizeof(void *));
	memcpy(items + first, q->slots, (k - first) * sizeof(void *));
	q->head += k;
	pthread_spin_unlock(&q->lock);
	return (int)k;
}

const struct bench_queue_ops bench_q_spinlock = {
	.name = "spinlock",
	.create = bench_spin_create,
	.destroy = bench_spin_destroy,
	.enqueue = bench_spin_enqueue,
	.dequeue = bench_spin_dequeue,
};
