/* SPDX-License-Identifier: MIT */
/*
 * lk_mutex.c - the baselines: jobs and results both through a mutex +
 * condvar queue, as the write-up's program started out.
 *
 *  mutex:          next_job() takes one job per lock hold (sleeping while
 *                  there is none); every result is emitted on its own: lock,
 *                  put, signal the consumer, unlock (a queued Qt signal).
 *  mutex-batched:  the same job source; results go in batches of B, one
 *                  lock hold per batch (the write-up's step 1).
 *
 * B does not apply to `mutex`: the experiment runs it at B = 1 only.
 */
#include <stdlib.h>

#include "locks/lk_condq.h"
#include "locks/locks.h"

struct lk_mutex_pair {
	struct lk_condq jobs;
	struct lk_condq results;
};

static void *lk_mutex_create(const struct lk_config *c)
{
	struct lk_mutex_pair *m = bench_zalloc(sizeof(*m));

	lk_condq_init(&m->jobs, c->capacity);
	lk_condq_init(&m->results, c->capacity);
	return m;
}

static void lk_mutex_destroy(void *v)
{
	struct lk_mutex_pair *m = v;

	lk_condq_fini(&m->jobs);
	lk_condq_fini(&m->results);
	free(m);
}

static int lk_mutex_take_jobs(void *v, unsigned tid, void **jobs, unsigned max,
			      int wait)
{
	struct lk_mutex_pair *m = v;

	(void)tid;
	(void)max; /* next_job(): one at a time */
	return lk_condq_take(&m->jobs, jobs, 1, wait);
}

static int lk_mutex_emit_each(void *v, unsigned tid, void *const *results,
			      unsigned n)
{
	struct lk_mutex_pair *m = v;

	(void)tid;
	for (unsigned i = 0; i < n; i++) {
		int r = lk_condq_put(&m->results, results + i, 1);

		if (r < 0)
			return r;
	}
	return (int)n;
}

static int lk_mutex_emit_batch(void *v, unsigned tid, void *const *results,
			       unsigned n)
{
	struct lk_mutex_pair *m = v;

	(void)tid;
	return lk_condq_put(&m->results, results, n);
}

static int lk_mutex_take_results(void *v, void **results, unsigned max,
				 int wait)
{
	struct lk_mutex_pair *m = v;

	return lk_condq_take(&m->results, results, max, wait);
}

static int lk_mutex_give_jobs(void *v, void *const *jobs, unsigned n)
{
	struct lk_mutex_pair *m = v;

	return lk_condq_put(&m->jobs, jobs, n);
}

static void lk_mutex_wake_all(void *v)
{
	struct lk_mutex_pair *m = v;

	lk_condq_close(&m->jobs);
	lk_condq_close(&m->results);
}

const struct lk_variant lk_mutex = {
	.name = "mutex",
	.summary = "mutex+condvar job queue, one result per lock hold",
	.flags = LK_BLOCKING_JOBS | LK_BLOCKING_RESULTS,
	.create = lk_mutex_create,
	.destroy = lk_mutex_destroy,
	.take_jobs = lk_mutex_take_jobs,
	.emit = lk_mutex_emit_each,
	.take_results = lk_mutex_take_results,
	.give_jobs = lk_mutex_give_jobs,
	.wake_all = lk_mutex_wake_all,
};

const struct lk_variant lk_mutex_batched = {
	.name = "mutex-batched",
	.summary = "mutex+condvar job queue, B results per lock hold",
	.flags = LK_BATCHED | LK_BLOCKING_JOBS | LK_BLOCKING_RESULTS,
	.create = lk_mutex_create,
	.destroy = lk_mutex_destroy,
	.take_jobs = lk_mutex_take_jobs,
	.emit = lk_mutex_emit_batch,
	.take_results = lk_mutex_take_results,
	.give_jobs = lk_mutex_give_jobs,
	.wake_all = lk_mutex_wake_all,
};
