/* SPDX-License-Identifier: MIT */
/*
 * mutexq.h - the textbook blocking queue of `bpbench app`'s variant (b): a
 * bounded array FIFO of job pointers under one pthread mutex, takers
 * sleeping on "not empty", putters on "not full". Batches move in one lock
 * hold each way, and a condvar is signalled only when someone sleeps on it.
 */
#ifndef BPBENCH_APP_MUTEXQ_H
#define BPBENCH_APP_MUTEXQ_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "app/app.h"

struct app_mq {
	pthread_mutex_t lock;
	pthread_cond_t not_empty, not_full;
	uint64_t head, tail;	  /* next slot to take / to fill */
	uint64_t next_seq;	  /* app_mq_put with stamp: the next gseq */
	unsigned cap;		  /* a power of two */
	unsigned takers, putters; /* asleep on not_empty / not_full */
	bool closed;
	struct app_job **slots;
} __attribute__((aligned(BENCH_CACHELINE)));

/* A queue of at least `capacity` jobs. */
void app_mq_init(struct app_mq *q, unsigned capacity);
void app_mq_fini(struct app_mq *q);

/*
 * Put n jobs (n <= capacity) in one lock hold, sleeping until they fit.
 * stamp: each gets the queue's next global sequence number (j->gseq) under
 * the lock, so gseq is the order of the queue. Dies when closed.
 */
void app_mq_put(struct app_mq *q, struct app_job *const *jobs, unsigned n,
		bool stamp);

/* Take 1..max jobs in one lock hold, sleeping while empty; 0 once closed
 * and empty. */
unsigned app_mq_take(struct app_mq *q, struct app_job **jobs, unsigned max);

/* No more puts; wake every sleeper. */
void app_mq_close(struct app_mq *q);

#endif /* BPBENCH_APP_MUTEXQ_H */
