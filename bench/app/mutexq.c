/* SPDX-License-Identifier: MIT */
/* mutexq.c - mutex + condvar blocking FIFO of jobs (see mutexq.h). */
#include "app/mutexq.h"

#include <stdlib.h>

void app_mq_init(struct app_mq *q, unsigned capacity)
{
	q->cap = 1;
	while (q->cap < capacity)
		q->cap <<= 1;
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->not_empty, NULL);
	pthread_cond_init(&q->not_full, NULL);
	q->head = q->tail = q->next_seq = 0;
	q->takers = q->putters = 0;
	q->closed = false;
	q->slots = bench_zalloc(sizeof(*q->slots) * q->cap);
}

void app_mq_fini(struct app_mq *q)
{
	pthread_cond_destroy(&q->not_full);
	pthread_cond_destroy(&q->not_empty);
	pthread_mutex_destroy(&q->lock);
	free(q->slots);
}

void app_mq_put(struct app_mq *q, struct app_job *const *jobs, unsigned n,
		bool stamp)
{
	const uint64_t mask = q->cap - 1;

	pthread_mutex_lock(&q->lock);
	while (q->cap - (q->tail - q->head) < n && !q->closed) {
		q->putters++;
		pthread_cond_wait(&q->not_full, &q->lock);
		q->putters--;
	}
	if (q->closed)
		bench_die("bpbench app: mutex queue: put after close\n");
	for (unsigned i = 0; i < n; i++) {
		if (stamp)
			jobs[i]->gseq = q->next_seq++;
		q->slots[q->tail++ & mask] = jobs[i];
	}
	/* one taker takes the whole batch; it wakes another if it leaves
	 * jobs behind */
	if (q->takers)
		pthread_cond_signal(&q->not_empty);
	/* room left: another putter may fit now (the take woke only one) */
	if (q->putters && q->tail - q->head < q->cap)
		pthread_cond_signal(&q->not_full);
	pthread_mutex_unlock(&q->lock);
}

unsigned app_mq_take(struct app_mq *q, struct app_job **jobs, unsigned max)
{
	const uint64_t mask = q->cap - 1;
	unsigned k = 0;

	pthread_mutex_lock(&q->lock);
	while (q->head == q->tail && !q->closed) {
		q->takers++;
		pthread_cond_wait(&q->not_empty, &q->lock);
		q->takers--;
	}
	while (k < max && q->head != q->tail)
		jobs[k++] = q->slots[q->head++ & mask];
	if (k && q->putters)
		pthread_cond_signal(&q->not_full);
	if (q->head != q->tail && q->takers)
		pthread_cond_signal(&q->not_empty);
	pthread_mutex_unlock(&q->lock);
	return k;
}

void app_mq_close(struct app_mq *q)
{
	pthread_mutex_lock(&q->lock);
	q->closed = true;
	pthread_cond_broadcast(&q->not_empty);
	pthread_cond_broadcast(&q->not_full);
	pthread_mutex_unlock(&q->lock);
}
