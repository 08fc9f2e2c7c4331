/* SPDX-License-Identifier: MIT */
/*
 * The chain of stages a pipeline runs: each stage's copy of its table and
 * CPUs, its workers (every stage's in one array, stage by stage), the link
 * in front of each stage after the first, and the ordered sink's reorder
 * window. A one-stage config (cfg.stage) is a chain of one, built from the
 * config's own fields, so the workers never ask which kind they run.
 *
 *   ingress -> stage 0 -> link 1 -> stage 1 -> ... -> stage N-1
 *   every worker -> its egress ring -> the sink
 *
 * Every worker has an egress ring: the last stage's for everything it
 * completes, the others' for the jobs that skip the later stages (failed
 * or cancelled). A link is a multi-producer, multi-consumer ring of the
 * library's (the previous stage's workers publish one batch at a time,
 * this stage's take one batch at a time), with the same wake-up protocol
 * as ingress: wake one idle worker per publication, which passes it on.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "src/pipeline_internal.h"
#include "src/ring_internal.h"

/* The config's one stage as a chain entry. */
static void one_stage(const struct bp_pipeline_config *c,
		      struct bp_chain_stage *s)
{
	memset(s, 0, sizeof(*s));
	s->stage = c->stage;
	s->stage_ctx = c->stage_ctx;
	s->workers = c->workers;
	s->worker_cpus = c->worker_cpus;
	s->n_worker_cpus = c->n_worker_cpus;
}

/* The entry of stage k with the config's defaults filled in. */
static struct bp_chain_stage spec_of(const struct bp_pipeline_config *c,
				     unsigned k)
{
	struct bp_chain_stage s;

	if (c->n_stages)
		s = c->stages[k];
	else
		one_stage(c, &s);
	if (!s.max_batch)
		s.max_batch = c->max_batch;
	if (!s.max_inflight)
		s.max_inflight = c->max_inflight;
	if (!s.capacity)
		s.capacity = c->ingress_capacity;
	if (!s.stage_ctx)
		s.stage_ctx = s.stage->ctx; /* the table's own (stage.h) */
	return s;
}

static int create_stage(struct bp_pipeline *p, struct bpi_stage *st,
			const struct bp_chain_stage *s, unsigned k,
			unsigned first)
{
	struct bpi_live_cfg *live = malloc(sizeof(*live));

	if (!live)
		return -ENOMEM;
	/* the caller may free or reuse its table (a compound literal in a
	 * helper's frame) once create returns */
	st->table = *s->stage;
	st->create_ctx = s->stage_ctx;
	st->index = k;
	st->first = first;
	st->nworkers = s->workers;
	st->max_batch = s->max_batch;
	st->max_inflight = s->max_inflight;
	st->flags = s->flags;
	st->by_delivery = p->cfg.ordered && p->nstages == 1;
	st->names_failures = p->nstages > 1;
	st->mark_in = STAGE_MARK(k);
	st->mark_flip = st->mark_in ^ (k + 1 < p->nstages ? STAGE_MARK(k + 1)
							: JOB_COMPLETED);
	live->gen = LIVE_GEN_FIRST;
	live->max_batch = s->max_batch;
	live->worker_wait = p->cfg.worker_wait;
	live->stage_ctx = s->stage_ctx;
	atomic_init(&st->live, live);
	atomic_init(&st->running, s->workers);
	if (s->n_worker_cpus) {
		st->cpus = malloc(s->n_worker_cpus * sizeof(int));
		if (!st->cpus)
			return -ENOMEM;
		memcpy(st->cpus, s->worker_cpus, s->n_worker_cpus * sizeof(int));
		st->ncpus = s->n_worker_cpus;
	}
	if (k == 0) {
		st->in = p->ingress;
		return 0;
	}
	int rc = bp_ring_create(s->capacity, BP_RING_HWM, &st->in);

	if (rc)
		return rc;
	/* as ingress (lanes.c): wake one idle worker per publication,
	 * the wakers pay the fences */
	bpi_waitq_set_waker_fences(bpi_ring_not_empty(st->in));
	bpi_waitq_set_wake_one(bpi_ring_not_empty(st->in));
	/* the previous stage's workers wait here when the link is full,
	 * and with a slow stage behind them they do so often */
	bpi_waitq_set_waker_fences(bpi_ring_not_full(st->in));
	p->stages[k - 1].next = st->in;
	p->stages[k - 1].next_takes_failed = s->flags & BP_STAGE_TAKES_FAILED;
	return 0;
}

/*
 * A serial stage after stage 0 (BP_STAGE_SERIAL): its order buffer, as
 * large as the sink's reorder window, for the same reason (the gate
 * bounds the seqs in flight). Its worker files up to that many, and holds
 * (releases to process) up to its own max_inflight. Every
 * stage before the last serial one hands every job on (forward_all), and
 * the stages after such a stage skip the failed ones they do not take
 * (filter_failed), so the serial stage's seqs come dense.
 */
static int create_order(struct bp_pipeline *p, uint64_t size)
{
	unsigned last = 0;

	for (unsigned k = 1; k < p->nstages; k++)
		if (p->stages[k].flags & BP_STAGE_SERIAL)
			last = k;
	for (unsigned k = 0; k < last; k++) {
		p->stages[k].forward_all = true;
		p->stages[k + 1].filter_failed = true;
	}
	for (unsigned k = 1; k < p->nstages; k++) {
		struct bpi_stage *st = &p->stages[k];

		if (!(st->flags & BP_STAGE_SERIAL))
			continue;
		st->order = calloc(size, sizeof(*st->order));
		if (!st->order)
			return -ENOMEM;
		st->order_mask = size - 1;
	}
	return 0;
}

/* Worker i of stage st: its state and egress ring. */
static int create_worker(struct bp_pipeline *p, struct bpi_stage *st,
			 unsigned i)
{
	struct bp_worker *w = &p->workers[st->first + i];
	int rc;

	w->p = p;
	w->st = st;
	w->in = st->in;
	w->lanes = st->index == 0 && p->nlanes > 1;
	w->lane_next = i; /* the workers start spread over the lanes */
	w->id = i;
	w->gid = st->first + i;
	w->cpu = st->ncpus ? st->cpus[i % st->ncpus] : -1;
	w->done_cap = st->max_inflight;
	/*
	 * The order check, for the streams that carry every job of the
	 * last stage. Before it the egress stream carries only the failed
	 * jobs (the others go on by the link): the sink takes those job by
	 * job. seq_next 0: ordered mode has one ingress ring, whose
	 * positions (the seqs) start at 0.
	 */
	w->seq_check = p->cfg.ordered && !st->next;
	w->seq_next = 0;
	/* relaxed: before the threads exist */
	atomic_store_explicit(&w->unsorted, !w->seq_check,
			      memory_order_relaxed);
	bpi_waitq_init(&w->progress);
	/* the worker sleeps and wakes per sink batch: as sink_wq */
	bpi_waitq_set_waker_fences(&w->progress);
	w->buf = malloc(st->max_inflight * sizeof(*w->buf));
	w->done = malloc(st->max_inflight * sizeof(*w->done));
	if (st->next && !(w->out = malloc(st->max_inflight * sizeof(*w->out))))
		return -ENOMEM;
	/*
	 * Quiet: the sink sleeps on sink_wq and the worker on its progress
	 * queue, never on the ring's own queues, so hand-off and take use
	 * the calls without wake checks.
	 */
	rc = bpi_ring_create_at(p->cfg.egress_capacity,
				BP_RING_SP | BP_RING_SC | BP_RING_HWM |
					BPI_RING_QUIET,
				0, &w->egress);
	if (rc || !w->buf || !w->done)
		return rc ? rc : -ENOMEM;
	return 0;
}

/*
 * The ordered sink's reorder window, a power of two. Every seq in flight
 * is in [next_seq, next_seq + window): in a one-stage pipeline at most
 * workers * max_inflight jobs are between ingress and delivery (sink.c).
 * In a chain the gate bounds them, give or take what stage 0's workers
 * take at once past it: each checks the gate, then takes up to its
 * max_inflight.
 */
static uint64_t window_size(const struct bp_pipeline *p)
{
	const struct bpi_stage *s0 = &p->stages[0];
	uint64_t need = (uint64_t)s0->nworkers * s0->max_inflight, size = 1;

	if (p->gate)
		need += p->gate;
	while (size < need)
		size <<= 1;
	return size;
}

static int create_window(struct bp_pipeline *p, uint64_t size)
{
	/* the spare entries past the end stay NULL: deliveries straight from
	 * the window read them ahead, and a run stops at them */
	p->window = calloc(size + BPI_SINK_AHEAD, sizeof(*p->window));
	p->window_run = calloc(size, sizeof(*p->window_run));
	if (!p->window || !p->window_run)
		return -ENOMEM;
	p->window_mask = size - 1;
	return 0;
}

int bpi_chain_create(struct bp_pipeline *p, const struct bp_pipeline_config *c)
{
	unsigned n = c->n_stages ? c->n_stages : 1, total = 0;
	uint64_t all_inflight = 0;
	bool serial = false;
	int rc;

	p->stages = calloc(n, sizeof(*p->stages));
	if (!p->stages)
		return -ENOMEM;
	p->nstages = n;
	for (unsigned k = 0; k < n; k++) {
		struct bp_chain_stage s = spec_of(c, k);

		total += s.workers;
		all_inflight += (uint64_t)s.workers * s.max_inflight;
		serial |= k > 0 && (s.flags & BP_STAGE_SERIAL);
	}
	if (c->chain_max_inflight)
		p->gate = c->chain_max_inflight;
	else if (n > 1 && (c->ordered || serial))
		p->gate = all_inflight < BP_MAX_RING ? (unsigned)all_inflight
						     : BP_MAX_RING;
	p->stage_unset = n > 1 ? BP_JOB_NO_STAGE : 0;
	p->workers = bpi_alloc_aligned(total * sizeof(*p->workers),
				       BP_FALSE_SHARING);
	if (!p->workers)
		return -ENOMEM;
	p->nworkers = total;
	total = 0;
	for (unsigned k = 0; k < n; k++) {
		struct bp_chain_stage s = spec_of(c, k);

		rc = create_stage(p, &p->stages[k], &s, k, total);
		if (rc)
			return rc;
		total += s.workers;
	}
	/* the serial stages' sizes first: their workers hold that many */
	if (serial && (rc = create_order(p, window_size(p))) != 0)
		return rc;
	for (unsigned k = 0; k < n; k++)
		for (unsigned i = 0; i < p->stages[k].nworkers; i++)
			if ((rc = create_worker(p, &p->stages[k], i)) != 0)
				return rc;
	return c->ordered ? create_window(p, window_size(p)) : 0;
}

void bpi_chain_free(struct bp_pipeline *p)
{
	if (p->workers) {
		for (unsigned i = 0; i < p->nworkers; i++) {
			struct bp_worker *w = &p->workers[i];

			bp_ring_destroy(w->egress);
			free(w->buf);
			free(w->done);
			free(w->out);
		}
		bpi_free_aligned(p->workers, p->nworkers * sizeof(*p->workers),
				 BP_FALSE_SHARING);
	}
	for (unsigned k = 0; p->stages && k < p->nstages; k++) {
		struct bpi_stage *st = &p->stages[k];

		if (k > 0)
			bp_ring_destroy(st->in);
		free(st->cpus);
		free(st->order);
		free(atomic_load_explicit(&st->live, memory_order_relaxed));
	}
	free(p->stages);
	free(p->window);
	free(p->window_run);
}

/*
 * How many workers of a stage a passed-on wake-up keeps awake at most
 * (worker.c's pass_wake_on): the CPUs they can run on, the distinct
 * worker_cpus, else those of the affinity mask of the thread that starts
 * them (they inherit it). A stage with poll gets no limit: its workers
 * stay awake with jobs in flight that they cannot add to, and the sleepers
 * are the ones that could. Where the mask cannot be read, no limit either.
 */
static unsigned wake_limit(const struct bpi_stage *st)
{
	cpu_set_t set;
	int n;

	if (st->table.poll)
		return st->nworkers;
	CPU_ZERO(&set);
	if (st->ncpus) {
		for (unsigned i = 0; i < st->ncpus; i++)
			if (st->cpus[i] >= 0 && st->cpus[i] < CPU_SETSIZE)
				CPU_SET(st->cpus[i], &set);
	} else if (sched_getaffinity(0, sizeof(set), &set) != 0) {
		return st->nworkers;
	}
	n = CPU_COUNT(&set);
	return n > 0 ? (unsigned)n : st->nworkers;
}

void bpi_chain_set_wake_limits(struct bp_pipeline *p)
{
	for (unsigned k = 0; k < p->nstages; k++)
		p->stages[k].wake_limit = wake_limit(&p->stages[k]);
}

struct bpi_stage *bpi_chain_stage(struct bp_pipeline *p, unsigned stage,
				  const char *who)
{
	if (stage < p->nstages)
		return &p->stages[stage];
	bpi_log(&p->log, BP_LOG_ERROR,
		"%s: stage %u: the pipeline has %u stage%s", who, stage,
		p->nstages, p->nstages == 1 ? "" : "s");
	return NULL;
}
