/* SPDX-License-Identifier: MIT */
/*
 * lk_lockfree.c - steps 3 and 4: the job source and the result hand-off are
 * both a lock-free queue, B values per operation at both ends. The queues
 * are bpbench's own competitors (queues.h), so they are the very code
 * `bpbench ring` measures:
 *
 *  ck_ring         ConcurrencyKit ck_ring in the mode each side needs, as
 *                  batchpipe-ring below: jobs SP/MC, results MP/SC
 *  urcu_wfcq       liburcu wfcqueue, made bounded (q_wfcq.c)
 *  batchpipe-ring  bp_ring in the mode each side needs: jobs single-producer
 *                  (the consumer) multi-consumer, results multi-producer
 *                  single-consumer
 *
 * Empty returns 0 at once: the experiment applies bench_backoff_wait.
 */
#include <stdlib.h>

#include "lab/bpbench.h"
#include "locks/locks.h"
#include "queues/queues.h"

struct lk_lockfree {
	const struct bench_queue_ops *jops, *rops;
	void *jq, *rq;
};

static void *lk_lockfree_create(const struct lk_config *c,
				const struct bench_queue_ops *jops,
				const struct bench_queue_ops *rops)
{
	struct lk_lockfree *l = bench_zalloc(sizeof(*l));

	l->jops = jops;
	l->rops = rops;
	/* jobs: the consumer puts, N workers take; results the reverse */
	l->jq = jops->create(c->capacity, 1, c->threads, c->stop);
	l->rq = rops->create(c->capacity, c->threads, 1, c->stop);
	if (!l->jq || !l->rq)
		bench_die("bpbench locks: cannot create %s / %s\n", jops->name,
			  rops->name);
	return l;
}

static void lk_lockfree_destroy(void *v)
{
	struct lk_lockfree *l = v;

	l->jops->destroy(l->jq);
	l->rops->destroy(l->rq);
	free(l);
}

static int lk_lockfree_take_jobs(void *v, unsigned tid, void **jobs,
				 unsigned max, int wait)
{
	struct lk_lockfree *l = v;

	(void)wait;
	return l->jops->dequeue(l->jq, tid, jobs, max);
}

static int lk_lockfree_emit(void *v, unsigned tid, void *const *results,
			    unsigned n)
{
	struct lk_lockfree *l = v;

	return l->rops->enqueue(l->rq, tid, results, n);
}

static int lk_lockfree_take_results(void *v, void **results, unsigned max,
				    int wait)
{
	struct lk_lockfree *l = v;

	(void)wait;
	return l->rops->dequeue(l->rq, 0, results, max);
}

static int lk_lockfree_give_jobs(void *v, void *const *jobs, unsigned n)
{
	struct lk_lockfree *l = v;

	return l->jops->enqueue(l->jq, 0, jobs, n);
}

static void *lk_ck_ring_create(const struct lk_config *c)
{
	return lk_lockfree_create(c, &bench_q_ckring_sp_mc,
				  &bench_q_ckring_mp_sc);
}

static void *lk_wfcq_create(const struct lk_config *c)
{
	return lk_lockfree_create(c, &bench_q_wfcq, &bench_q_wfcq);
}

static void *lk_bp_ring_create(const struct lk_config *c)
{
	return lk_lockfree_create(c, &bench_q_batchpipe_sp_mc,
				  &bench_q_batchpipe_mp_sc);
}

#define LK_LOCKFREE_OPS                                                        \
	.destroy = lk_lockfree_destroy, .take_jobs = lk_lockfree_take_jobs,    \
	.emit = lk_lockfree_emit, .take_results = lk_lockfree_take_results,    \
	.give_jobs = lk_lockfree_give_jobs

const struct lk_variant lk_ck_ring = {
	.name = "ck_ring",
	.summary = "ck_ring (SP/MC jobs, MP/SC results), B per operation",
	.flags = LK_BATCHED,
	.create = lk_ck_ring_create,
	LK_LOCKFREE_OPS,
};

const struct lk_variant lk_urcu_wfcq = {
	.name = "urcu_wfcq",
	.summary = "liburcu wfcqueue for jobs and results, B per operation",
	.flags = LK_BATCHED,
	.create = lk_wfcq_create,
	LK_LOCKFREE_OPS,
};

const struct lk_variant lk_batchpipe_ring = {
	.name = "batchpipe-ring",
	.summary = "bp_ring (SP/MC jobs, MP/SC results), B per operation",
	.flags = LK_BATCHED | LK_BATCHPIPE,
	.create = lk_bp_ring_create,
	LK_LOCKFREE_OPS,
};
