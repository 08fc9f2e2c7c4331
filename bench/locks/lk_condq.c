/* SPDX-License-Identifier: MIT */
/* lk_condq.c - mutex + condvar bounded FIFO (see lk_condq.h). */
#include "locks/lk_condq.h"

#include <errno.h>
#include <stdlib.h>

unsigned lk_capacity_for(unsigned values)
{
	unsigned cap = 2;

	while (cap <= values)
		cap <<= 1;
	return cap;
}

void lk_condq_init(struct lk_condq *q, unsigned capacity)
{
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->not_empty, NULL);
	q->head = q->tail = 0;
	q->mask = capacity - 1;
	q->sleepers = 0;
	q->closed = 0;
	q->slots = bench_zalloc(sizeof(void *) * capacity);
}

void lk_condq_fini(struct lk_condq *q)
{
	pthread_cond_destroy(&q->not_empty);
	pthread_mutex_destroy(&q->lock);
	free(q->slots);
}

int lk_condq_put(struct lk_condq *q, void *const *items, unsigned n)
{
	unsigned wake;

	pthread_mutex_lock(&q->lock);
	if (q->tail - q->head + n > (unsigned long)q->mask + 1) {
		pthread_mutex_unlock(&q->lock);
		return -ENOSPC;
	}
	for (unsigned i = 0; i < n; i++)
		q->slots[q->tail++ & q->mask] = items[i];
	/* one signal per value, and none when nobody sleeps: a broadcast
	 * would wake takers that then find nothing */
	wake = q->sleepers < n ? q->sleepers : n;
	for (unsigned i = 0; i < wake; i++)
		pthread_cond_signal(&q->not_empty);
	pthread_mutex_unlock(&q->lock);
	return (int)n;
}

int lk_condq_take(struct lk_condq *q, void **items, unsigned max, int wait)
{
	unsigned k = 0;

	pthread_mutex_lock(&q->lock);
	while (wait && q->head == q->tail && !q->closed) {
		q->sleepers++;
		pthread_cond_wait(&q->not_empty, &q->lock);
		q->sleepers--;
	}
	while (k < max && q->head != q->tail)
		items[k++] = q->slots[q->head++ & q->mask];
	pthread_mutex_unlock(&q->lock);
	return (int)k;
}

void lk_condq_close(struct lk_condq *q)
{
	pthread_mutex_lock(&q->lock);
	q->closed = 1;
	pthread_cond_broadcast(&q->not_empty);
	pthread_mutex_unlock(&q->lock);
}
