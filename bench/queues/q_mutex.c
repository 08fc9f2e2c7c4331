/* SPDX-License-Identifier: MIT */
/*
 * q_mutex.c - the textbook bounded buffer: a ring under a pthread mutex, with
 * producers sleeping on "not full" and consumers on "not empty". This is how
 * such a queue is used in practice, so it blocks instead of taking the
 * harness's spin-then-yield policy. It moves up to n items per lock hold,
 * which gives it the same batching advantage as the lock-free rings, and it
 * signals a condvar only when somebody sleeps on it.
 */
#include "queues/queues.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "lab/bpbench.h"

struct bench_mutex_ring {
	pthread_mutex_t lock;
	pthread_cond_t not_full;
	pthread_cond_t not_empty;
	unsigned long head; /* next slot to dequeue */
	unsigned long tail; /* next slot to enqueue */
	unsigned cap;	    /* a power of two (the harness insists) */
	unsigned mask;
	unsigned full_waiters;
	unsigned empty_waiters;
	int closed;
	void **slots;
};

static void *bench_mutex_create(unsigned capacity, unsigned p, unsigned c,
				const atomic_int *stop)
{
	struct bench_mutex_ring *q = bench_zalloc(sizeof(*q));

	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->not_full, NULL);
	pthread_cond_init(&q->not_empty, NULL);
	q->cap = capacity;
	q->mask = capacity - 1;
	q->slots = bench_zalloc(sizeof(void *) * capacity);
	return q;
}

static void bench_mutex_destroy(void *p)
{
	struct bench_mutex_ring *q = p;

	pthread_cond_destroy(&q->not_empty);
	pthread_cond_destroy(&q->not_full);
	pthread_mutex_destroy(&q->lock);
	free(q->slots);
	free(q);
}

/* Copy k items at ring position pos, in up to two pieces around the wrap. */
static void bench_mutex_put(struct bench_mutex_ring *q, unsigned long pos,
			    void *const *items, unsigned k)
{
	unsigned i = (unsigned)pos & q->mask, first = q->cap - i;

	if (first > k)
		first = k;
	memcpy(q->slots + i, items, first * sizeof(void *));
	memcpy(q->slots, items + first, (k - first) * sizeof(void *));
}

static void bench_mutex_get(struct bench_mutex_ring *q, unsigned long pos,
			    void **items, unsigned k)
{
	unsigned i = (unsigned)pos & q->mask, first = q->cap - i;

	if (first > k)
		first = k;
	memcpy(items, q->slots + i, first * sizeof(void *));
	memcpy(items + first, q->slots, (k - first) * sizeof(void *));
}

static int bench_mutex_enqueue(void *p, unsigned tid, void *const *items,
			       unsigned n)
{
	struct bench_mutex_ring *q = p;
	unsigned room, k;

	pthread_mutex_lock(&q->lock);
	while ((room = q->cap - (unsigned)(q->tail - q->head)) == 0 &&
	       !q->closed) {
		q->full_waiters++;
		pthread_cond_wait(&q->not_full, &q->lock);
		q->full_waiters--;
	}
	k = n < room ? n : room;
	bench_mutex_put(q, q->tail, items, k);
	q->tail += k;
	/* one item can satisfy one sleeper; more may satisfy several */
	if (k && q->empty_waiters) {
		if (k == 1)
			pthread_cond_signal(&q->not_empty);
		else
			pthread_cond_broadcast(&q->not_empty);
	}
	pthread_mutex_unlock(&q->lock);
	return (int)k;
}

static int bench_mutex_dequeue(void *p, unsigned tid, void **items, unsigned n)
{
	struct bench_mutex_ring *q = p;
	unsigned avail, k;

	pthread_mutex_lock(&q->lock);
	while ((avail = (unsigned)(q->tail - q->head)) == 0 && !q->closed) {
		q->empty_waiters++;
		pthread_cond_wait(&q->not_empty, &q->lock);
		q->empty_waiters--;
	}
	k = n < avail ? n : avail;
	bench_mutex_get(q, q->head, items, k);
	q->head += k;
	if (k && q->full_waiters) {
		if (k == 1)
			pthread_cond_signal(&q->not_full);
		else
			pthread_cond_broadcast(&q->not_full);
	}
	pthread_mutex_unlock(&q->lock);
	return (int)k;
}

static void bench_mutex_close(void *p)
{
	struct bench_mutex_ring *q = p;

	pthread_mutex_lock(&q->lock);
	q->closed = 1;
	pthread_cond_broadcast(&q->not_empty);
	pthread_cond_broadcast(&q->not_full);
	pthread_mutex_unlock(&q->lock);
}

const struct bench_queue_ops bench_q_mutex = {
	.name = "mutex",
	.blocking = 1,
	.create = bench_mutex_create,
	.destroy = bench_mutex_destroy,
	.enqueue = bench_mutex_enqueue,
	.dequeue = bench_mutex_dequeue,
	.close = bench_mutex_close,
};
