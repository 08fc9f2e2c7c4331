/* SPDX-License-Identifier: MIT */
/*
 * lk_condq.h - the textbook hand-off: a bounded array FIFO of pointer values
 * under a pthread mutex, with takers sleeping on a "not empty" condvar.
 *
 * No "not full" condvar: in the experiment's closed loop every value in
 * circulation fits in each queue at once, so a put that finds no room is a
 * broken invariant, reported as -ENOSPC.
 */
#ifndef BPBENCH_LK_CONDQ_H
#define BPBENCH_LK_CONDQ_H

#include <pthread.h>

#include "lab/bpbench.h"

struct lk_condq {
	pthread_mutex_t lock;
	pthread_cond_t not_empty;
	unsigned long head, tail; /* next slot to take / to fill */
	unsigned mask;		  /* capacity - 1, a power of two */
	unsigned sleepers;	  /* takers in pthread_cond_wait */
	int closed;
	void **slots;
} __attribute__((aligned(BENCH_CACHELINE)));

void lk_condq_init(struct lk_condq *q, unsigned capacity);
void lk_condq_fini(struct lk_condq *q);

/* All n values in one lock hold, waking up to n sleepers; n or -ENOSPC. */
int lk_condq_put(struct lk_condq *q, void *const *items, unsigned n);

/*
 * Up to max values in one lock hold. wait: sleep while empty, until a put
 * or lk_condq_close. Returns the count (0: empty, or closed).
 */
int lk_condq_take(struct lk_condq *q, void **items, unsigned max, int wait);

/* Wake every sleeper; takes no longer sleep. */
void lk_condq_close(struct lk_condq *q);

/* The capacity for `values` values: the next power of two above. */
unsigned lk_capacity_for(unsigned values);

#endif /* BPBENCH_LK_CONDQ_H */
