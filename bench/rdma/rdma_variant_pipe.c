/* SPDX-License-Identifier: MIT */
/*
 * rdma_variant_pipe.c - the pipeline variant of `bpbench rdma`: producers
 * with recycling pools of registered jobs, the RDMA stage, a sink that
 * checks every job; one timed run and its verification.
 */
#include "rdma/rdma_harness.h"

/* Throughput: check each job, give it back to its producer's free ring. */
static void rb_sink_loop(struct rb_pipe *pp, struct bp_job **jobs, unsigned n)
{
	for (unsigned base = 0; base < n; base += RB_SINK_CHUNK) {
		unsigned end =
			n - base < RB_SINK_CHUNK ? n : base + RB_SINK_CHUNK;

		for (unsigned i = base; i < end; i++) {
			struct rb_pjob *j = (struct rb_pjob *)jobs[i];
			unsigned lane = j->lane;

			if (j->rj.hdr.status != BP_JOB_OK && !pp->bad++)
				pp->bad_status = j->rj.hdr.status;
			pp->ret[lane * RB_SINK_CHUNK + pp->nret[lane]++] =
				jobs[i];
		}
		for (unsigned l = 0; l < pp->P; l++) {
			int k;

			if (!pp->nret[l])
				continue;
			/* the free ring holds the whole pool: never full */
			k = bp_ring_enqueue_burst(
				pp->prod[l].free,
				(void **)&pp->ret[l * RB_SINK_CHUNK],
				pp->nret[l], NULL);
			if (k != (int)pp->nret[l])
				bench_die("%s: free ring %u refused jobs\n",
					  BENCH_CMD, l);
			pp->nret[l] = 0;
		}
	}
}

/* Latency: sample, then send the same job again (depth 1, closed loop). */
static void rb_sink_lat(struct rb_pipe *pp, struct bp_job **jobs, unsigned n,
			int64_t now)
{
	for (unsigned i = 0; i < n; i++) {
		struct rb_pjob *j = (struct rb_pjob *)jobs[i];
		uint64_t op;
		int rc;

		if (j->rj.hdr.status != BP_JOB_OK && !pp->bad++)
			pp->bad_status = j->rj.hdr.status;
		if (pp->nsamples < pp->max_samples)
			pp->samples[pp->nsamples++] = now - j->t0;
		if (pp->mode == RB_SINK_PACED) {
			/* release: pairs with the pacer's acquire; the job
			 * and the samples are the pacer's again */
			atomic_store_explicit(&pp->job_free, 1,
					      memory_order_release);
			continue;
		}
		/* relaxed: only a flag; the main thread learns the rest
		 * from lat_end's release below */
		if (pp->bad ||
		    atomic_load_explicit(&pp->stop, memory_order_relaxed)) {
			/* release: pairs with the main thread's acquire;
			 * samples, counts and bad are final */
			atomic_store_explicit(&pp->lat_end, 1,
					      memory_order_release);
			continue;
		}
		op = pp->lat_next_i++;
		rr_stamp(j->rj.buf, pp->size, RR_TAG(pp->run, 0, op));
		j->rj.offset = rr_offset(0, op, pp->slots, pp->size);
		j->t0 = bench_now_ns();
		/* one job, rings of thousands: it cannot find them full */
		rc = bp_pipeline_submit(pp->p, &jobs[i], 1, BP_SUBMIT_NONBLOCK,
					0);
		if (rc != 1) {
			pp->lat_err = rc;
			/* release: as above */
			atomic_store_explicit(&pp->lat_end, 1,
					      memory_order_release);
		}
	}
}

static void rb_sink(void *ctx, struct bp_job **jobs, unsigned n)
{
	struct rb_pipe *pp = ctx;
	int64_t now = bench_now_ns();

	if (pp->mode == RB_SINK_LOOP)
		rb_sink_loop(pp, jobs, n);
	else
		rb_sink_lat(pp, jobs, n, now);
	pp->last_ns = now;
	/*
	 * release: pairs with the main thread's acquire in rb_pipe_run; it
	 * sees last_ns and bad once it sees the count. The sink is the only
	 * writer, so load + store is an increment.
	 */
	atomic_store_explicit(
		&pp->done,
		atomic_load_explicit(&pp->done, memory_order_relaxed) + n,
		memory_order_release);
}

static void *rb_producer_main(void *arg)
{
	struct rb_prod *pr = arg;
	struct rb_pipe *pp = pr->pp;

	pr->next_i = 0;
	pr->cpu_ns = bench_thread_cpu_ns();
	pr->t_start = bench_now_ns();
	/* relaxed: a flag to stop; the results travel by join */
	while (!atomic_load_explicit(&pp->stop, memory_order_relaxed)) {
		int k = bp_ring_dequeue_burst_wait(pr->free, (void **)pr->batch,
						   pp->B, RB_FREE_WAIT_NS);
		int rc;

		if (k <= 0)
			continue; /* -ETIMEDOUT: look at stop again */
		for (int j = 0; j < k; j++) {
			struct rb_pjob *jb = (struct rb_pjob *)pr->batch[j];
			uint64_t i = pr->next_i++;

			rr_stamp(jb->rj.buf, pp->size,
				 RR_TAG(pp->run, pr->lane, i));
			jb->rj.offset =
				rr_offset(pr->lane, i, pp->slots, pp->size);
		}
		rc = bp_pipeline_submit(pp->p, pr->batch, (unsigned)k, 0, -1);
		if (rc != k)
			bench_die("%s: bp_pipeline_submit: %d of %d (%s)\n",
				  BENCH_CMD, rc, k,
				  rc < 0 ? bp_strerror(rc) : "short");
	}
	pr->cpu_ns = bench_thread_cpu_ns() - pr->cpu_ns;
	return NULL;
}

int rb_thread_wait = -1; /* --waits: the pipeline's thread waits */

int rb_verbose; /* --verbose: CPU per thread on stderr */

void rb_pipe_close(struct rb_pipe *pp)
{
	if (pp->p)
		bp_pipeline_destroy(pp->p);
	if (pp->r)
		bp_rdma_destroy(pp->r);
	for (unsigned l = 0; pp->prod && l < pp->P; l++) {
		bp_ring_destroy(pp->prod[l].free);
		free(pp->prod[l].jobs);
		free(pp->prod[l].bufs);
		free(pp->prod[l].batch);
	}
	free(pp->prod);
	free(pp->ret);
	free(pp->nret);
	free(pp->samples);
	memset(pp, 0, sizeof(*pp));
}

/* Build the stage and the pipeline; returns 0 or a negative errno. */
int rb_pipe_open(struct rb_pipe *pp, struct rb_target *t,
		 const struct rb_pipe_cfg *c)
{
	struct bp_pipeline_config pc;
	pid_t before[RB_MAX_TIDS], now[RB_MAX_TIDS];
	int nb, nn, err;

	memset(pp, 0, sizeof(*pp));
	pp->W = c->workers;
	pp->R = c->rails;
	pp->size = c->size;
	pp->P = c->P;
	pp->slots = c->slots;
	pp->mode = c->mode;
	pp->B = c->post * c->rails;
	if (pp->B > c->depth * c->rails)
		pp->B = c->depth * c->rails;
	pp->peer = rb_stage_open(t, c, &pp->r);
	if (pp->peer < 0)
		return pp->peer;
	pp->prod = bench_zalloc(sizeof(*pp->prod) * c->P);
	pp->ret = bench_zalloc(sizeof(*pp->ret) * c->P * RB_SINK_CHUNK);
	pp->nret = bench_zalloc(sizeof(*pp->nret) * c->P);
	for (unsigned l = 0; l < c->P; l++) {
		struct rb_prod *pr = &pp->prod[l];

		pr->pp = pp;
		pr->lane = l;
		pr->njobs = c->njobs;
		pr->jobs = bench_zalloc(sizeof(*pr->jobs) * c->njobs);
		/* touched by bench_zalloc: page faults belong to setup */
		pr->bufs = bench_zalloc(c->size * c->njobs);
		pr->batch = bench_zalloc(sizeof(*pr->batch) *
					 (pp->B > c->njobs ? pp->B : c->njobs));
		err = bp_ring_create(c->njobs < 2 ? 2 : c->njobs,
				     BP_RING_SP | BP_RING_SC, &pr->free);
		if (err)
			bench_die("%s: bp_ring_create: %s\n", BENCH_CMD,
				  bp_strerror(err));
		if (rb_thread_wait >= 0) {
			struct bp_wait_policy wp;

			bp_wait_policy_init(&wp);
			wp.strategy = (enum bp_wait_strategy)rb_thread_wait;
			bp_ring_set_wait_policy(pr->free, &wp);
		}
		err = bp_rdma_register(pp->r, pr->bufs, c->size * c->njobs,
				       NULL);
		if (err)
			return err;
		for (unsigned i = 0; i < c->njobs; i++) {
			struct rb_pjob *j = &pr->jobs[i];
			struct bp_job *h = &j->rj.hdr;

			bp_rdma_job_set(
				&j->rj, BP_RDMA_WRITE, (uint32_t)pp->peer,
				pr->bufs + (size_t)i * c->size, c->size, 0);
			j->lane = l;
			if (c->mode == RB_SINK_LOOP &&
			    bp_ring_enqueue_burst(pr->free, (void **)&h, 1,
						  NULL) != 1)
				bench_die("%s: cannot fill the pool\n",
					  BENCH_CMD);
		}
	}
	bp_pipeline_config_init(&pc);
	pc.workers = c->workers;
	pc.max_batch = pp->B;
	pc.max_inflight = c->depth * c->rails;
	if (pc.max_inflight < pc.max_batch)
		pc.max_inflight = pc.max_batch;
	if (c->busy_threads) {
		pc.worker_wait.strategy = BP_WAIT_BUSY_POLL;
		pc.sink_wait.strategy = BP_WAIT_BUSY_POLL;
	} else if (rb_thread_wait >= 0) {
		pc.worker_wait.strategy = (enum bp_wait_strategy)rb_thread_wait;
		pc.sink_wait.strategy = (enum bp_wait_strategy)rb_thread_wait;
		pc.producer_wait.strategy =
			(enum bp_wait_strategy)rb_thread_wait;
	}
	pc.stage = bp_rdma_stage(pp->r);
	pc.stage_ctx = pp->r;
	pc.sink = rb_sink;
	pc.sink_ctx = pp;
	pc.log = rb_log;
	err = bp_pipeline_create(&pc, &pp->p);
	if (err) {
		pp->p = NULL;
		return err;
	}
	nb = rt_tasks(before, RB_MAX_TIDS);
	err = bp_pipeline_start(pp->p);
	if (err)
		return err;
	nn = rt_tasks(now, RB_MAX_TIDS);
	pp->ntids = rt_tasks_new(before, nb, now, nn, pp->tids, RB_MAX_TIDS);
	if (pp->ntids != (int)c->workers + 1)
		fprintf(stderr,
			"%s: note: bp_pipeline_start created %d threads, "
			"expected %u workers + the sink; CPU counts them all\n",
			BENCH_CMD, pp->ntids, c->workers);
	return 0;
}

/* Wait until the sink has seen `total` jobs (acquire). */
void rb_pipe_wait_done(struct rb_pipe *pp, uint64_t total, const char *what)
{
	int64_t deadline = bench_now_ns() + RB_LOST_NS;

	/* acquire: pairs with the sink's release; last_ns, bad are final */
	while (atomic_load_explicit(&pp->done, memory_order_acquire) < total) {
		if (bench_now_ns() > deadline)
			bench_die("%s: VERIFY FAILED: %s: %" PRIu64
				  " of %" PRIu64
				  " jobs reached the sink after %.0f s\n",
				  BENCH_CMD, what,
				  atomic_load_explicit(&pp->done,
						       memory_order_acquire),
				  total, RB_LOST_NS / 1e9);
		bench_sleep_ns(20000);
	}
}

void rb_pipe_check_stats(struct rb_pipe *pp, const struct bp_pipeline_stats *s0,
			 uint64_t total, const char *what)
{
	struct bp_pipeline_stats s1;
	uint64_t done = atomic_load_explicit(&pp->done, memory_order_acquire);

	bp_pipeline_get_stats(pp->p, &s1);
	if (pp->bad)
		bench_die("%s: VERIFY FAILED: %s: %" PRIu64
			  " jobs failed (first status %d: %s)\n",
			  BENCH_CMD, what, pp->bad, pp->bad_status,
			  bp_strerror(pp->bad_status));
	if (done != total || s1.ok - s0->ok != total ||
	    s1.failed != s0->failed || s1.cancelled != s0->cancelled)
		bench_die("%s: VERIFY FAILED: %s: submitted %" PRIu64
			  ", sink saw %" PRIu64 ", stats ok +%" PRIu64
			  " failed +%" PRIu64 " cancelled +%" PRIu64 "\n",
			  BENCH_CMD, what, total, done, s1.ok - s0->ok,
			  s1.failed - s0->failed, s1.cancelled - s0->cancelled);
}

struct rb_result rb_pipe_run(struct rb_pipe *pp, struct rb_target *t,
			     unsigned ms, uint64_t outstanding,
			     const char *what)
{
	struct bp_rdma_rail_stats rs0, rs1;
	struct bp_pipeline_stats s0;
	uint64_t total = 0, ops[RB_MAX_PRODUCERS];
	int64_t c0, c1, t0 = INT64_MAX, tc[RB_MAX_TIDS];
	struct rb_result res;

	pp->run = rb_next_run();
	/* relaxed: the producers start after these stores (pthread_create
	 * orders them), and the sink sees done = 0 through the chain of
	 * release/acquire steps its first job took */
	atomic_store_explicit(&pp->stop, 0, memory_order_relaxed);
	atomic_store_explicit(&pp->done, 0, memory_order_relaxed);
	pp->bad = 0;
	bp_pipeline_get_stats(pp->p, &s0);
	rb_rail_sum(pp->r, pp->W, pp->R, &rs0);
	for (int k = 0; k < pp->ntids; k++)
		tc[k] = rt_tid_cpu_ns(pp->tids[k]);
	c0 = rt_tids_cpu_ns(pp->tids, pp->ntids);
	for (unsigned l = 0; l < pp->P; l++)
		rb_spawn(&pp->prod[l].th, rb_producer_main, &pp->prod[l]);
	bench_sleep_ns((int64_t)ms * 1000000);
	/* relaxed: a flag; join publishes what the producers did */
	atomic_store_explicit(&pp->stop, 1, memory_order_relaxed);
	for (unsigned l = 0; l < pp->P; l++) {
		pthread_join(pp->prod[l].th, NULL);
		ops[l] = pp->prod[l].next_i;
		total += ops[l];
		if (pp->prod[l].t_start < t0)
			t0 = pp->prod[l].t_start;
	}
	rb_pipe_wait_done(pp, total, what);
	c1 = rt_tids_cpu_ns(pp->tids, pp->ntids);
	if (rb_verbose && total) {
		/* threads in start order: the workers, then the sink (as
		 * bp_pipeline_start creates them; /proc lists by tid) */
		fprintf(stderr, "%s: %s: cpu ns/op:", BENCH_CMD, what);
		for (int l = 0; l < (int)pp->P; l++)
			fprintf(stderr, " producer %.0f",
				(double)pp->prod[l].cpu_ns / (double)total);
		for (int k = 0; k < pp->ntids; k++)
			fprintf(stderr, " tid%d %.0f", (int)pp->tids[k],
				(double)(rt_tid_cpu_ns(pp->tids[k]) - tc[k]) /
					(double)total);
		rb_rail_sum(pp->r, pp->W, pp->R, &rs1);
		fprintf(stderr,
			"; %" PRIu64 " ops, fi_cq_read per op %.2f (empty "
			"%.2f)\n",
			total,
			(double)(rs1.cq_reads - rs0.cq_reads) / (double)total,
			(double)(rs1.cq_empty - rs0.cq_empty) / (double)total);
	}
	rb_pipe_check_stats(pp, &s0, total, what);
	for (unsigned l = 0; l < pp->P; l++)
		c1 += pp->prod[l].cpu_ns;
	rb_pipe_verify(t, pp, pp->P, ops, outstanding, what);
	res.mops = (double)total / (double)(pp->last_ns - t0) * 1e3;
	res.gbps =
		(double)total * (double)pp->size / (double)(pp->last_ns - t0);
	res.cpu_ns = total ? (double)(c1 - c0) / (double)total : NAN;
	return res;
}

void rb_pipe_verify(struct rb_target *t, const struct rb_pipe *pp,
		    unsigned nlanes, const uint64_t *ops, uint64_t outstanding,
		    const char *what)
{
	struct rb_check chk = {.run = pp->run,
			       .nlanes = nlanes,
			       .slots = pp->slots,
			       .ops = ops,
			       .size = pp->size,
			       .outstanding = outstanding};

	rb_verify_target(t, &chk, what);
}
