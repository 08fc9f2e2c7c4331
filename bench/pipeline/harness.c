/* SPDX-License-Identifier: MIT */
/*
 * harness.c - one run of the pipeline for `bpbench pipeline` (harness.h):
 * the jobs, the producers' pools, the stage and the sink that check every
 * job, the producer threads, and the verification after every run.
 *
 * Verification, every run: the sink checks every job (status OK, payload =
 * mix(producer, pseq), result = what the stage had to compute; ordered: seq
 * strictly +1 and each producer's pseq strictly +1) and counts and sums pseq
 * per producer. Afterwards: stats submitted == ok + failed + cancelled ==
 * what the producers submitted, nothing failed or cancelled, per-producer
 * counts and sums match, and every job is back in its pool. Any failure is
 * fatal (exit 1).
 */
#include "pipeline/harness.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <batchpipe/error.h>
#include <batchpipe/ring.h>

#include "lab/lcg.h"

const struct pb_wait pb_waits[PB_NWAITS] = {
	{"busy-poll", BP_WAIT_BUSY_POLL},
	{"spin-sleep", BP_WAIT_SPIN_SLEEP},
	{"sleep", BP_WAIT_SLEEP},
};

int pb_spin_ns = -1, pb_yields = -1;
uint64_t pb_jobs_verified;

/* What a trivial stage writes: proves the stage saw the job. */
#define PB_TRIVIAL_MARK UINT64_C(0x5a5a5a5a5a5a5a5a)

/* The CPU work of --work-ns: the lab's LCG iterated `iters` times. */
uint64_t pb_spin(uint64_t x, uint64_t iters)
{
	return bench_lcg_spin(x, iters);
}

/* pb_spin's result in O(log iters) (LCG jump-ahead): the sink's check. */
uint64_t pb_spin_jump(uint64_t x, uint64_t iters)
{
	return bench_lcg_jump(x, iters);
}

/* Sum of 0..n-1 modulo 2^64. */
uint64_t pb_seq_sum(uint64_t n)
{
	if (n == 0)
		return 0;
	return n % 2 ? n * ((n - 1) / 2) : (n / 2) * (n - 1);
}

void pb_pool_init(struct pb_producer *pr, unsigned id, unsigned njobs,
		  unsigned batch_cap)
{
	int rc;

	memset(pr, 0, sizeof(*pr));
	pr->id = id;
	pr->njobs = njobs;
	/* bench_zalloc writes every byte: no page fault later */
	pr->jobs = bench_zalloc(sizeof(*pr->jobs) * njobs);
	pr->batch_cap = batch_cap;
	pr->batch = bench_zalloc(sizeof(*pr->batch) * batch_cap);
	rc = bp_ring_create(njobs < 2 ? 2 : njobs, BP_RING_SP | BP_RING_SC,
			    &pr->free);
	if (rc)
		bench_die("bpbench pipeline: bp_ring_create(%u): %s\n", njobs,
			  bp_strerror(rc));
	for (unsigned i = 0; i < njobs; i++) {
		struct bp_job *h = &pr->jobs[i].hdr;

		pr->jobs[i].producer = id;
		if (bp_ring_enqueue_burst(pr->free, (void **)&h, 1, NULL) != 1)
			bench_die("bpbench pipeline: cannot fill the pool\n");
	}
}

void pb_pool_fini(struct pb_producer *pr)
{
	bp_ring_destroy(pr->free);
	free(pr->jobs);
	free(pr->batch);
	free(pr->samples);
}

/* The stage's work on a batch, without the pipeline around it. */
void pb_stage_work(const struct pb_run *run, struct bp_job **jobs, unsigned n)
{
	uint64_t iters = run->iters;

	/* fetch the whole batch's lines for writing at once (see pb_stamp) */
	for (unsigned i = 0; i < n; i++)
		__builtin_prefetch(jobs[i], 1, 3);
	for (unsigned i = 0; i < n; i++) {
		struct pb_job *j = pb_job_of(jobs[i]);

		j->result = iters ? pb_spin(j->payload, iters)
				  : j->payload ^ PB_TRIVIAL_MARK;
		jobs[i]->status = BP_JOB_OK;
	}
}

/*
 * A stage's part of the work: from the payload (the first part) or the
 * previous part's result, its LCG steps, and under the lock the steps of
 * the mutex-protected section. The steps of all parts add up to the run's
 * iters, so the result is what one stage doing all of it computes, and
 * the sink's check is the same. Trivial work (iters 0): the first part
 * marks, the others carry the result on (a read and a write each).
 */
static void pb_part_work(const struct pb_part *pt, struct bp_job **jobs,
			 unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		__builtin_prefetch(jobs[i], 1, 3);
	for (unsigned i = 0; i < n; i++) {
		struct pb_job *j = pb_job_of(jobs[i]);
		uint64_t x = pt->first ? j->payload : j->result;

		if (pt->run->iters == 0)
			x = pt->first ? x ^ PB_TRIVIAL_MARK : x;
		else
			x = pb_spin(x, pt->iters);
		j->result = x;
		jobs[i]->status = BP_JOB_OK;
	}
	if (pt->lock) {
		/* the section a batch of jobs needs alone, as a user who
		 * batches writes it: one lock per batch */
		pthread_mutex_lock(pt->lock);
		for (unsigned i = 0; i < n; i++) {
			struct pb_job *j = pb_job_of(jobs[i]);

			j->result = pb_spin(j->result, pt->lock_iters);
		}
		pthread_mutex_unlock(pt->lock);
	}
}

static void pb_stage_process(void *state, struct bp_worker *w,
			     struct bp_job **jobs, unsigned n)
{
	(void)state;
	pb_part_work(bp_worker_stage_ctx(w), jobs, n);
	bp_worker_complete(w, jobs, n);
}

static const struct bp_stage pb_stage = {
	.name = "bpbench",
	.process = pb_stage_process,
};

static void pb_sink_bad(struct pb_run *run, const struct pb_job *j,
			const char *why)
{
	if (run->sink.bad++)
		return; /* the first one tells the story */
	fprintf(stderr,
		"bpbench pipeline: VERIFY FAILED: %s%sP=%u W=%u B=%u %s%s: "
		"sink got job %p (producer %u, pseq %" PRIu64 ", seq %" PRIu64
		", status %d): %s\n",
		run->variant ? run->variant : "", run->variant ? " " : "",
		run->P, run->W, run->B, pb_waits[run->wait].name,
		run->ordered ? " ordered" : "", (const void *)j, j->producer,
		j->pseq, j->hdr.seq, j->hdr.status, why);
}

/* Check every job, count it, and give it back to its producer's pool. */
void pb_sink(void *ctx, struct bp_job **jobs, unsigned n)
{
	struct pb_run *run = ctx;
	struct pb_sink_state *s = &run->sink;
	int64_t now = run->mode == PB_LATENCY ? bench_now_ns() : 0;
	unsigned P = run->P;

	for (unsigned base = 0; base < n; base += PB_SINK_CHUNK) {
		unsigned end =
			n - base < PB_SINK_CHUNK ? n : base + PB_SINK_CHUNK;

		for (unsigned i = base; i < end; i++) {
			struct pb_job *j = pb_job_of(jobs[i]);
			unsigned pid = j->producer;
			uint64_t want;

			if (pid >= P) {
				pb_sink_bad(run, j, "no such producer");
				continue; /* not ours: do not recycle it */
			}
			want = run->iters ? pb_spin_jump(j->payload, run->iters)
					  : j->payload ^ PB_TRIVIAL_MARK;
			if (j->hdr.status != BP_JOB_OK)
				pb_sink_bad(run, j, "status not OK");
			else if (j->payload != pb_mix(pid, j->pseq))
				pb_sink_bad(run, j, "payload corrupted");
			else if (j->result != want)
				pb_sink_bad(run, j, "wrong stage result");
			if (run->ordered) {
				if (s->seq_started && j->hdr.seq != s->next_seq)
					pb_sink_bad(run, j, "seq not +1");
				s->next_seq = j->hdr.seq + 1;
				s->seq_started = true;
				if (j->pseq != s->next_pseq[pid])
					pb_sink_bad(run, j,
						    "producer's pseq not +1");
				s->next_pseq[pid] = j->pseq + 1;
			}
			s->count[pid]++;
			s->sum[pid] += j->pseq;
			if (now) /* latency runs only: a second cache line */
				j->seen_ns = now;
			s->ret[pid * PB_SINK_CHUNK + s->nret[pid]++] = jobs[i];
		}
		for (unsigned p = 0; p < P; p++) {
			int k;

			if (!s->nret[p])
				continue;
			/* the free ring holds the whole pool: never full */
			k = bp_ring_enqueue_burst(
				run->prod[p].free,
				(void **)&s->ret[p * PB_SINK_CHUNK], s->nret[p],
				NULL);
			if (k != (int)s->nret[p])
				bench_die("bpbench pipeline: free ring of "
					  "producer %u refused %u jobs (%d)\n",
					  p, s->nret[p], k);
			s->nret[p] = 0;
		}
	}
}

/* Take free jobs until batch[0..want) is full; false if stopped first. */
bool pb_take_free(struct pb_producer *pr, unsigned want)
{
	struct pb_run *run = pr->run;
	int64_t t_wait = 0;

	while (pr->held < want) {
		int k = bp_ring_dequeue_burst_wait(
			pr->free, (void **)pr->batch + pr->held,
			want - pr->held, PB_FREE_WAIT_NS);

		if (k > 0) {
			pr->held += (unsigned)k;
			t_wait = 0;
			continue;
		}
		if (k != -ETIMEDOUT && k != -EINTR) {
			pr->err = k;
			return false;
		}
		if (run->mode == PB_THROUGHPUT &&
		    atomic_load_explicit(&run->stop, memory_order_relaxed))
			return false;
		if (run->mode == PB_LATENCY) {
			/* one job in flight: it must come back */
			int64_t now = bench_now_ns();

			if (!t_wait)
				t_wait = now;
			else if (now - t_wait > PB_LOST_NS)
				bench_die("bpbench pipeline: VERIFY FAILED: "
					  "the latency job did not come back "
					  "in 5 s\n");
		}
	}
	return true;
}

void pb_stamp(struct pb_producer *pr, unsigned n)
{
	/*
	 * The jobs' lines were last used on the sink's core: ask for all of
	 * them, for writing, before the first store waits for one.
	 */
	for (unsigned i = 0; i < n; i++)
		__builtin_prefetch(pr->batch[i], 1, 3);
	for (unsigned i = 0; i < n; i++) {
		struct pb_job *j = pb_job_of(pr->batch[i]);

		j->pseq = pr->submitted + i;
		j->payload = pb_mix(pr->id, j->pseq);
	}
}

void pb_submit_held(struct pb_producer *pr)
{
	int rc = bp_pipeline_submit(pr->run->p, pr->batch, pr->held, 0, -1);

	if (rc != (int)pr->held)
		bench_die("bpbench pipeline: bp_pipeline_submit(%u) returned "
			  "%d (%s)\n",
			  pr->held, rc, rc < 0 ? bp_strerror(rc) : "short");
	pr->submitted += pr->held;
	pr->held = 0;
}

void pb_last_out(struct pb_run *run)
{
	/*
	 * The last producer out drains; acq_rel collects every producer's
	 * submissions before it (they are complete anyway: bp_pipeline_submit
	 * returned).
	 */
	if (atomic_fetch_sub_explicit(&run->producers_left, 1,
				      memory_order_acq_rel) == 1) {
		bp_pipeline_drain(run->p);
		run->t_drain_end = bench_now_ns();
	}
}

static void *pb_producer_main(void *arg)
{
	struct pb_producer *pr = arg;
	struct pb_run *run = pr->run;
	unsigned B = run->B;

	pthread_setname_np(pthread_self(), "pb-producer");
	pthread_barrier_wait(&run->start);
	pr->t_start = bench_now_ns();
	pr->cpu_ns = bench_thread_cpu_ns();
	/* relaxed: stop is a time signal; the joins publish the results */
	while (!atomic_load_explicit(&run->stop, memory_order_relaxed)) {
		if (!pb_take_free(pr, B))
			break;
		pb_stamp(pr, B);
		pb_submit_held(pr);
	}
	pb_last_out(run);
	pr->cpu_ns = bench_thread_cpu_ns() - pr->cpu_ns;
	return NULL;
}

void pb_spawn(pthread_t *t, void *(*fn)(void *), void *arg, int cpu)
{
	pthread_attr_t attr;
	int rc;

	pthread_attr_init(&attr);
	if (cpu >= 0) {
		rc = bench_attr_pin(&attr, cpu);
		if (rc)
			bench_die("bpbench pipeline: cannot pin to CPU %d: "
				  "%s\n",
				  cpu, strerror(rc));
	}
	rc = pthread_create(t, &attr, fn, arg);
	if (rc)
		bench_die("bpbench pipeline: pthread_create: %s\n",
			  strerror(rc));
	pthread_attr_destroy(&attr);
}

static void pb_log(void *ctx, enum bp_log_level level, const char *msg)
{
	fprintf(stderr, "bpbench pipeline: batchpipe says: %s\n", msg);
}

void pb_policy(struct bp_wait_policy *pol, int wait)
{
	bp_wait_policy_init(pol);
	pol->strategy = pb_waits[wait].strategy;
	if (pb_spin_ns >= 0)
		pol->spin_ns = (uint32_t)pb_spin_ns;
	if (pb_yields >= 0)
		pol->yields = (uint32_t)pb_yields;
}

/* Build and start a pipeline for *run (config copied: cpus may be local). */
/*
 * The run's parts, and with more than one stage (or a serial stage) the
 * chain in c (chain: the caller's array): each stage W workers, its share
 * of the work, the config's pinning.
 */
static void pb_shape(struct pb_run *run, struct bp_pipeline_config *c,
		     struct bp_chain_stage *chain)
{
	unsigned n = run->stages ? run->stages : 1;
	uint64_t shared = run->iters, serial = 0;

	if (run->serial != PB_SERIAL_NONE) {
		n = run->serial == PB_SERIAL_STAGE ? 2 : 1;
		serial = run->serial_iters;
		shared = run->iters - serial;
	}
	for (unsigned k = 0; k < n; k++) {
		struct pb_part *pt = &run->parts[k];

		pt->run = run;
		pt->first = k == 0;
		/* the shared steps split evenly, the last takes the rest */
		pt->iters = shared / n + (k == n - 1 ? shared % n : 0);
	}
	if (run->serial == PB_SERIAL_STAGE) {
		run->parts[0].iters = shared;
		run->parts[1].iters = serial;
	} else if (run->serial == PB_SERIAL_MUTEX) {
		run->parts[0].lock = &run->lock;
		run->parts[0].lock_iters = serial;
	}
	if (n == 1)
		return;
	for (unsigned k = 0; k < n; k++) {
		chain[k] = (struct bp_chain_stage){
			.stage = c->stage,
			.stage_ctx = &run->parts[k],
			.workers = c->workers,
			.worker_cpus = c->worker_cpus,
			.n_worker_cpus = c->n_worker_cpus};
		if (k == 1 && run->serial == PB_SERIAL_STAGE) {
			chain[k].workers = 1;
			chain[k].flags = BP_STAGE_SERIAL;
		}
	}
	c->stages = chain;
	c->n_stages = n;
	c->stage = NULL;
	c->stage_ctx = NULL;
	c->worker_cpus = NULL;
	c->n_worker_cpus = 0;
}

void pb_pipeline_up(struct pb_run *run)
{
	const struct pb_opts *o = run->o;
	struct bp_pipeline_config c;
	struct bp_chain_stage chain[PB_MAX_STAGES];
	int cpus[BENCH_MAX_CPUS], rc;

	bp_pipeline_config_init(&c);
	c.workers = run->W;
	c.max_batch = run->B;
	if (o->inflight)
		c.max_inflight = o->inflight;
	if (o->ingress)
		c.ingress_capacity = o->ingress;
	if (o->egress)
		c.egress_capacity = o->egress;
	if (c.max_inflight < run->B)
		c.max_inflight = run->B;
	c.ordered = run->ordered;
	/* ordered output refuses lanes (their seqs are not dense) */
	if (!run->ordered)
		c.ingress_lanes = o->lanes;
	pb_policy(&c.worker_wait, (int)run->wait);
	pb_policy(&c.sink_wait, (int)run->wait);
	pb_policy(&c.producer_wait, (int)run->wait);
	if (o->pin) {
		/* producers first, then workers, then the sink, round-robin */
		for (int i = 0; i < o->a.ncpus; i++)
			cpus[i] = o->a.cpus[(run->P + (unsigned)i) %
					    (unsigned)o->a.ncpus];
		c.worker_cpus = cpus;
		c.n_worker_cpus = (unsigned)o->a.ncpus;
		c.sink_cpu =
			o->a.cpus[(run->P + run->W) % (unsigned)o->a.ncpus];
	}
	c.stage = &pb_stage;
	c.stage_ctx = &run->parts[0];
	pb_shape(run, &c, chain);
	c.sink = pb_sink;
	c.sink_ctx = run;
	c.log = pb_log;
	rc = bp_pipeline_create(&c, &run->p);
	if (rc)
		bench_die("bpbench pipeline: bp_pipeline_create: %s\n",
			  bp_strerror(rc));
	rc = bp_pipeline_start(run->p);
	if (rc)
		bench_die("bpbench pipeline: bp_pipeline_start: %s\n",
			  bp_strerror(rc));
}

/*
 * After a run: every job accounted for, and every job back in its pool.
 * st: the pipeline's statistics, NULL for a run without a pipeline (alone,
 * or the plain variant, which names itself in run->variant).
 */
void pb_verify(struct pb_run *run, const struct bp_pipeline_stats *st)
{
	struct pb_sink_state *s = &run->sink;
	uint64_t want_total = 0, bad = s->bad;
	char what[96];

	if (run->variant)
		snprintf(what, sizeof(what), "%s P=%u W=%u B=%u %s",
			 run->variant, run->P, run->W, run->B,
			 pb_waits[run->wait].name);
	else if (st)
		snprintf(what, sizeof(what), "P=%u W=%u B=%u %s%s%s", run->P,
			 run->W, run->B, pb_waits[run->wait].name,
			 run->ordered ? " ordered" : "",
			 run->iters ? " work" : "");
	else
		snprintf(what, sizeof(what), "alone B=%u", run->B);
	for (unsigned p = 0; p < run->P; p++) {
		struct pb_producer *pr = &run->prod[p];

		if (pr->err)
			bench_die("bpbench pipeline: %s: producer %u: free "
				  "ring wait failed: %s\n",
				  what, p, bp_strerror(pr->err));
		want_total += pr->submitted;
		if (s->count[p] != pr->submitted ||
		    s->sum[p] != pb_seq_sum(pr->submitted)) {
			fprintf(stderr,
				"bpbench pipeline: VERIFY FAILED: %s: producer "
				"%u submitted %" PRIu64
				" jobs (pseq sum %" PRIu64
				"), the sink saw %" PRIu64 " (sum %" PRIu64
				")\n",
				what, p, pr->submitted,
				pb_seq_sum(pr->submitted), s->count[p],
				s->sum[p]);
			bad++;
		}
		/* jobs taken but not submitted go back by hand: the sink,
		 * the free ring's only producer, has been joined */
		if (pr->held &&
		    bp_ring_enqueue_burst(pr->free, (void **)pr->batch,
					  pr->held, NULL) != (int)pr->held)
			bench_die("bpbench pipeline: cannot return held "
				  "jobs\n");
		pr->held = 0;
		if (bp_ring_count(pr->free) != pr->njobs) {
			fprintf(stderr,
				"bpbench pipeline: VERIFY FAILED: %s: producer "
				"%u has %u of its %u jobs back\n",
				what, p, bp_ring_count(pr->free), pr->njobs);
			bad++;
		}
	}
	if (st &&
	    (st->submitted != st->ok + st->failed + st->cancelled ||
	     st->submitted != want_total || st->failed || st->cancelled)) {
		fprintf(stderr,
			"bpbench pipeline: VERIFY FAILED: %s: stats submitted "
			"%" PRIu64 ", ok %" PRIu64 ", failed %" PRIu64
			", cancelled %" PRIu64 "; producers submitted %" PRIu64
			"\n",
			what, st->submitted, st->ok, st->failed, st->cancelled,
			want_total);
		bad++;
	}
	if (bad)
		exit(1);
	pb_jobs_verified += want_total;
}

void pb_run_init(struct pb_run *run, const struct pb_opts *o,
		 struct pb_producer *prod, unsigned P)
{
	struct pb_sink_state *s = &run->sink;

	memset(run, 0, sizeof(*run));
	run->o = o;
	run->prod = prod;
	run->P = P;
	atomic_init(&run->stop, 0);
	atomic_init(&run->producers_left, P);
	s->count = bench_zalloc(sizeof(*s->count) * P);
	s->sum = bench_zalloc(sizeof(*s->sum) * P);
	s->next_pseq = bench_zalloc(sizeof(*s->next_pseq) * P);
	s->nret = bench_zalloc(sizeof(*s->nret) * P);
	s->ret = bench_zalloc(sizeof(*s->ret) * P * PB_SINK_CHUNK);
	pthread_barrier_init(&run->start, NULL, P + 1);
	pthread_mutex_init(&run->lock, NULL);
	run->stages = 1;
}

void pb_run_fini(struct pb_run *run)
{
	free(run->sink.count);
	free(run->sink.sum);
	free(run->sink.next_pseq);
	free(run->sink.nret);
	free(run->sink.ret);
	pthread_barrier_destroy(&run->start);
	pthread_mutex_destroy(&run->lock);
}

void pb_prepare_producers(struct pb_run *run)
{
	struct bp_wait_policy pol;

	for (unsigned i = 0; i < run->P; i++) {
		struct pb_producer *pr = &run->prod[i];

		pr->run = run;
		pr->held = 0;
		pr->submitted = 0;
		pr->err = 0;
		pr->nsamples = 0;
		pb_policy(&pol, (int)run->prod_wait);
		bp_ring_set_wait_policy(pr->free, &pol);
	}
}

/* One throughput run of one point. */
struct pb_result pb_run_once(const struct pb_opts *o, struct pb_producer *prod,
			     unsigned P, unsigned W, unsigned B, int wait,
			     bool ordered, uint64_t iters, unsigned ms)
{
	return pb_run_shaped(o, prod, P, W, B, wait, ordered, iters, ms,
			     o->stages, PB_SERIAL_NONE, 0);
}

struct pb_result pb_run_shaped(const struct pb_opts *o,
			       struct pb_producer *prod, unsigned P, unsigned W,
			       unsigned B, int wait, bool ordered,
			       uint64_t iters, unsigned ms, unsigned stages,
			       enum pb_serial serial, uint64_t serial_iters)
{
	struct pb_run run;
	struct bp_pipeline_stats st;
	struct pb_result res;
	int64_t t0, c0, c1, prod_cpu = 0;

	pb_run_init(&run, o, prod, P);
	run.stages = stages;
	run.serial = serial;
	run.serial_iters = serial_iters;
	run.W = W;
	run.B = B;
	run.wait = (unsigned)wait;
	run.ordered = ordered;
	run.iters = iters;
	run.mode = PB_THROUGHPUT;
	run.prod_wait = (unsigned)wait; /* one strategy for every thread */
	pb_pipeline_up(&run);
	pb_prepare_producers(&run);
	for (unsigned i = 0; i < P; i++)
		pb_spawn(&prod[i].thread, pb_producer_main, &prod[i],
			 o->pin ? o->a.cpus[i % (unsigned)o->a.ncpus] : -1);
	pthread_barrier_wait(&run.start);
	t0 = bench_now_ns();
	c0 = bench_process_cpu_ns();
	bench_sleep_ns((int64_t)ms * 1000000);
	atomic_store_explicit(&run.stop, 1, memory_order_relaxed);
	for (unsigned i = 0; i < P; i++) {
		pthread_join(prod[i].thread, NULL);
		/* the clock starts with the first thread to run */
		if (prod[i].t_start < t0)
			t0 = prod[i].t_start;
		prod_cpu += prod[i].cpu_ns;
	}
	/* the last producer returned from drain: every job is delivered */
	c1 = bench_process_cpu_ns();
	bp_pipeline_get_stats(run.p, &st);
	pb_verify(&run, &st);
	bp_pipeline_destroy(run.p);
	pb_run_fini(&run);
	res.mjobs = (double)st.ok * 1e3 / (double)(run.t_drain_end - t0);
	res.p50_us = (double)st.lat_p50_ns / 1e3;
	res.p99_us = (double)st.lat_p99_ns / 1e3;
	res.cpu_ns = st.ok ? (double)(c1 - c0) / (double)st.ok : NAN;
	res.prod_cpu_ns = st.ok ? (double)prod_cpu / (double)st.ok : NAN;
	return res;
}

/*
 * The benchmark's own work per job with no pipeline: one thread takes B
 * jobs from its pool, stamps them, runs the stage's work on them and hands
 * them to the sink callback, which checks them and returns them to the
 * pool. What the pipeline adds on top (three threads, rings, stamps,
 * statistics, the jobs' trips between cores) is the difference.
 */
double pb_alone_once(const struct pb_opts *o, struct pb_producer *prod,
		     unsigned B, unsigned ms)
{
	struct pb_run run;
	struct pb_producer *pr = &prod[0];
	int64_t t0, t1, end;

	pb_run_init(&run, o, prod, 1);
	run.B = B;
	run.mode = PB_THROUGHPUT;
	pb_prepare_producers(&run);
	t0 = bench_now_ns();
	end = t0 + (int64_t)ms * 1000000;
	do {
		for (int i = 0; i < 64; i++) {
			if (!pb_take_free(pr, B))
				bench_die("bpbench pipeline: alone: the pool "
					  "ran dry\n");
			pb_stamp(pr, B);
			pb_stage_work(&run, pr->batch, B);
			pb_sink(&run, pr->batch, B);
			pr->submitted += B;
			pr->held = 0;
		}
		t1 = bench_now_ns();
	} while (t1 < end);
	pb_verify(&run, NULL);
	pb_run_fini(&run);
	return (double)pr->submitted * 1e3 / (double)(t1 - t0);
}

double pb_calibrate(void)
{
	double v[7];
	uint64_t iters = 2000000, sink = 0;

	for (int i = 0; i < 7; i++) {
		int64_t t0 = bench_now_ns();

		sink += pb_spin((uint64_t)i, iters);
		v[i] = (double)iters / (double)(bench_now_ns() - t0);
	}
	if (sink == 42) /* keep the result alive */
		fprintf(stderr, " ");
	return bench_median(v, 7);
}
