/* SPDX-License-Identifier: MIT */
/*
 * lk_spin.c - the write-up's step 2: the job source behind a spinlock
 * instead of the mutex; results still go in batches of B through the
 * mutex + condvar queue of step 1.
 *
 *  tas           test-and-set with a pause, exactly the write-up's loop
 *                (while (test_and_set_acquire) pause;: spin while the flag
 *                was already set), never yielding
 *  pthread-spin  pthread_spinlock_t
 *  ck-ticket     ConcurrencyKit's ticket lock (FIFO)
 *  ck-mcs        ConcurrencyKit's MCS queue lock (FIFO, one node per thread)
 *
 * next_job() takes one job per lock hold. The lock, head and tail share a
 * cache line on purpose: whoever holds the lock needs all three. A worker
 * that finds the source empty returns at once and takes the common retry
 * policy; a worker waiting for the lock itself only spins, as each lock does.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include <ck_spinlock.h>

#include "locks/lk_condq.h"
#include "locks/locks.h"

enum lk_lock_kind { LK_LOCK_TAS, LK_LOCK_PTHREAD, LK_LOCK_TICKET, LK_LOCK_MCS };

struct lk_mcs_node {
	ck_spinlock_mcs_context_t ctx;
} __attribute__((aligned(BENCH_CACHELINE)));

struct lk_spin_source {
	struct {
		atomic_int tas;
		pthread_spinlock_t pthread;
		ck_spinlock_ticket_t ticket;
		ck_spinlock_mcs_t mcs;
		unsigned long head, tail;
	} __attribute__((aligned(BENCH_CACHELINE)));
	unsigned mask;
	void **slots;
	struct lk_mcs_node *nodes; /* [threads + 1]: the consumer is last */
	unsigned consumer_tid;
	struct lk_condq results;
};

static inline void lk_lock(struct lk_spin_source *s, enum lk_lock_kind kind,
			   unsigned tid)
{
	switch (kind) {
	case LK_LOCK_TAS:
		/* acquire: pairs with the release in lk_unlock, so the last
		 * holder's head/tail writes are visible to us */
		while (atomic_exchange_explicit(&s->tas, 1,
						memory_order_acquire))
			bench_cpu_pause();
		break;
	case LK_LOCK_PTHREAD:
		pthread_spin_lock(&s->pthread);
		break;
	case LK_LOCK_TICKET:
		ck_spinlock_ticket_lock(&s->ticket);
		break;
	case LK_LOCK_MCS:
		ck_spinlock_mcs_lock(&s->mcs, &s->nodes[tid].ctx);
		break;
	}
}

static inline void lk_unlock(struct lk_spin_source *s, enum lk_lock_kind kind,
			     unsigned tid)
{
	switch (kind) {
	case LK_LOCK_TAS:
		/* release: publishes our head/tail writes to the next
		 * holder's acquire exchange */
		atomic_store_explicit(&s->tas, 0, memory_order_release);
		break;
	case LK_LOCK_PTHREAD:
		pthread_spin_unlock(&s->pthread);
		break;
	case LK_LOCK_TICKET:
		ck_spinlock_ticket_unlock(&s->ticket);
		break;
	case LK_LOCK_MCS:
		ck_spinlock_mcs_unlock(&s->mcs, &s->nodes[tid].ctx);
		break;
	}
}

static void *lk_spin_create(const struct lk_config *c)
{
	struct lk_spin_source *s = bench_zalloc(sizeof(*s));

	atomic_init(&s->tas, 0);
	pthread_spin_init(&s->pthread, PTHREAD_PROCESS_PRIVATE);
	ck_spinlock_ticket_init(&s->ticket);
	ck_spinlock_mcs_init(&s->mcs);
	s->mask = c->capacity - 1;
	s->slots = bench_zalloc(sizeof(void *) * c->capacity);
	s->nodes = bench_zalloc(sizeof(*s->nodes) * (c->threads + 1));
	s->consumer_tid = c->threads;
	lk_condq_init(&s->results, c->capacity);
	return s;
}

static void lk_spin_destroy(void *v)
{
	struct lk_spin_source *s = v;

	pthread_spin_destroy(&s->pthread);
	lk_condq_fini(&s->results);
	free(s->nodes);
	free(s->slots);
	free(s);
}

static inline int lk_spin_take(void *v, unsigned tid, void **jobs,
			       enum lk_lock_kind kind)
{
	struct lk_spin_source *s = v;
	int k = 0;

	lk_lock(s, kind, tid);
	if (s->head != s->tail) {
		jobs[0] = s->slots[s->head++ & s->mask];
		k = 1;
	}
	lk_unlock(s, kind, tid);
	return k;
}

static inline int lk_spin_give(void *v, void *const *jobs, unsigned n,
			       enum lk_lock_kind kind)
{
	struct lk_spin_source *s = v;
	int r = (int)n;

	lk_lock(s, kind, s->consumer_tid);
	if (s->tail - s->head + n > (unsigned long)s->mask + 1)
		r = -ENOSPC; /* more values than circulate: a broken invariant
			      */
	else
		for (unsigned i = 0; i < n; i++)
			s->slots[s->tail++ & s->mask] = jobs[i];
	lk_unlock(s, kind, s->consumer_tid);
	return r;
}

static int lk_spin_emit(void *v, unsigned tid, void *const *results, unsigned n)
{
	struct lk_spin_source *s = v;

	(void)tid;
	return lk_condq_put(&s->results, results, n);
}

static int lk_spin_take_results(void *v, void **results, unsigned max, int wait)
{
	struct lk_spin_source *s = v;

	return lk_condq_take(&s->results, results, max, wait);
}

static void lk_spin_wake_all(void *v)
{
	struct lk_spin_source *s = v;

	lk_condq_close(&s->results);
}

/* One variant per lock kind; the kind is a constant in each copy. */
#define LK_SPIN_VARIANT(var, str, kind, what)                                  \
	static int var##_take_jobs(void *v, unsigned tid, void **jobs,         \
				   unsigned max, int wait)                     \
	{                                                                      \
		(void)max;                                                     \
		(void)wait;                                                    \
		return lk_spin_take(v, tid, jobs, kind);                       \
	}                                                                      \
	static int var##_give_jobs(void *v, void *const *jobs, unsigned n)     \
	{                                                                      \
		return lk_spin_give(v, jobs, n, kind);                         \
	}                                                                      \
	const struct lk_variant var = {                                        \
		.name = str,                                                   \
		.summary = what,                                               \
		.flags = LK_BATCHED | LK_BLOCKING_RESULTS,                     \
		.create = lk_spin_create,                                      \
		.destroy = lk_spin_destroy,                                    \
		.take_jobs = var##_take_jobs,                                  \
		.emit = lk_spin_emit,                                          \
		.take_results = lk_spin_take_results,                          \
		.give_jobs = var##_give_jobs,                                  \
		.wake_all = lk_spin_wake_all,                                  \
	}

LK_SPIN_VARIANT(lk_tas, "tas", LK_LOCK_TAS,
		"test-and-set + pause job source, B results per mutex hold");
LK_SPIN_VARIANT(lk_pthread_spin, "pthread-spin", LK_LOCK_PTHREAD,
		"pthread_spinlock_t job source, B results per mutex hold");
LK_SPIN_VARIANT(lk_ck_ticket, "ck-ticket", LK_LOCK_TICKET,
		"ck ticket lock job source, B results per mutex hold");
LK_SPIN_VARIANT(lk_ck_mcs, "ck-mcs", LK_LOCK_MCS,
		"ck MCS lock job source, B results per mutex hold");
