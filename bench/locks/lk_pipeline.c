/* SPDX-License-Identifier: MIT */
/*
 * lk_pipeline.c - batchpipe-pipeline: the library's own producers ->
 * workers -> sink (bp_pipeline) doing the experiment's job.
 *
 * The consumer's two duties are split as the pipeline splits them: one
 * producer thread stamps fresh sequence numbers on free jobs and submits
 * them B at a time; the sink counts the results, adds them to the checksum
 * and gives each job back to the producer through a single-producer
 * single-consumer bp_ring (the free ring), so the same pool circulates and
 * nothing is allocated per job. Threads = workers. The jobs here are
 * objects (a bp_job header each), the one difference from the value-moving
 * variants, and it is the pipeline's own cost.
 *
 * Pinning continues the other variants' round-robin: the producer on
 * cpus[0] (the consumer's place), worker i on cpus[(i + 1) % ncpus], and the
 * sink, the one thread more, on the next CPU after the last worker. Waits
 * are the library's default policy.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <batchpipe/error.h>
#include <batchpipe/pipeline.h>
#include <batchpipe/ring.h>

#include "lab/bpbench.h"
#include "locks/locks.h"
#include "locks/lk_work.h"

struct lk_pjob {
	uint64_t seq;
	uint64_t result;
	struct bp_job hdr;
} __attribute__((aligned(BENCH_CACHELINE)));

struct lk_prun {
	const struct lk_run_params *p;
	struct bp_pipeline *pl;
	struct bp_ring *free; /* SP: the sink; SC: the producer */
	pthread_barrier_t start;
	/* set when the window is over; read in every loop: a line of its own */
	atomic_int stop __attribute__((aligned(BENCH_CACHELINE)));
	/* the producer's */
	uint64_t issued;
	int64_t t_start;
	unsigned held; /* taken from the free ring, never submitted */
	/* the sink's */
	uint64_t received, checksum, window_count;
	int64_t t_end;
	int window_closed;
};

static inline struct lk_pjob *lk_pjob_of(struct bp_job *h)
{
	return (struct lk_pjob *)((char *)h - offsetof(struct lk_pjob, hdr));
}

static void lk_pstage_process(void *state, struct bp_worker *w,
			      struct bp_job **jobs, unsigned n)
{
	const struct lk_prun *run = bp_worker_stage_ctx(w);
	uint64_t iters = run->p->iters;

	(void)state;
	for (unsigned i = 0; i < n; i++) {
		struct lk_pjob *j = lk_pjob_of(jobs[i]);

		j->result = lk_result(j->seq, iters);
		jobs[i]->status = BP_JOB_OK;
	}
	bp_worker_complete(w, jobs, n);
}

static const struct bp_stage lk_pstage = {
	.name = "bpbench-locks",
	.process = lk_pstage_process,
};

static void lk_psink(void *ctx, struct bp_job **jobs, unsigned n)
{
	struct lk_prun *run = ctx;
	uint64_t sum = 0;
	int k;

	/* relaxed: a time signal; what came before this batch is the
	 * window's */
	if (!run->window_closed &&
	    atomic_load_explicit(&run->stop, memory_order_relaxed)) {
		run->window_count = run->received;
		run->t_end = bench_now_ns();
		run->window_closed = 1;
	}
	for (unsigned i = 0; i < n; i++) {
		const struct lk_pjob *j = lk_pjob_of(jobs[i]);

		/* a failed job reaches the checksum as a wrong value */
		sum += jobs[i]->status == BP_JOB_OK ? j->result : 1;
	}
	run->received += n;
	run->checksum += sum;
	/* the free ring holds the whole pool: never full */
	k = bp_ring_enqueue_burst(run->free, (void **)jobs, n, NULL);
	if (k != (int)n)
		bench_die("bpbench locks: batchpipe-pipeline: the free ring "
			  "refused %u jobs (%d)\n",
			  n, k);
}

static void *lk_pproducer_main(void *arg)
{
	struct lk_prun *run = arg;
	unsigned B = run->p->c.batch, held = 0;
	struct bp_job **batch = bench_zalloc(sizeof(*batch) * B);
	struct bench_backoff bo = {0};

	pthread_barrier_wait(&run->start);
	run->t_start = bench_now_ns();
	/* relaxed: stop is a time signal; the join publishes the counts */
	while (!atomic_load_explicit(&run->stop, memory_order_relaxed)) {
		int k = bp_ring_dequeue_burst(run->free, (void **)batch + held,
					      B - held, NULL);
		int rc;

		if (k < 0)
			bench_die("bpbench locks: free ring: %s\n",
				  bp_strerror(k));
		if (k == 0) {
			bench_backoff_wait(&bo);
			continue;
		}
		bench_backoff_reset(&bo);
		held += (unsigned)k;
		if (held < B)
			continue;
		for (unsigned i = 0; i < B; i++)
			lk_pjob_of(batch[i])->seq = run->issued + i;
		rc = bp_pipeline_submit(run->pl, batch, B, 0, -1);
		if (rc != (int)B)
			bench_die("bpbench locks: bp_pipeline_submit(%u) "
				  "returned %d "
				  "(%s)\n",
				  B, rc, rc < 0 ? bp_strerror(rc) : "short");
		run->issued += B;
		held = 0;
	}
	/*
	 * Jobs taken but never submitted stay held: the sink is the free
	 * ring's one producer and still runs until the drain, so putting them
	 * back from here would break the ring's single-producer contract. The
	 * main thread counts them instead (the join publishes `held`).
	 */
	run->held = held;
	free(batch);
	return NULL;
}

static void lk_plog(void *ctx, enum bp_log_level level, const char *msg)
{
	(void)ctx;
	(void)level;
	fprintf(stderr, "bpbench locks: batchpipe says: %s\n", msg);
}

static void lk_pipeline_run(const struct lk_run_params *p,
			    struct lk_outcome *out)
{
	struct lk_prun run = {.p = p};
	struct bp_pipeline_config c;
	struct bp_pipeline_stats st;
	struct lk_pjob *jobs = bench_zalloc(sizeof(*jobs) * p->pool);
	int *wcpus = bench_zalloc(sizeof(int) * (size_t)p->ncpus);
	pthread_attr_t attr;
	pthread_t prod;
	int rc;

	atomic_init(&run.stop, 0);
	rc = bp_ring_create(p->c.capacity, BP_RING_SP | BP_RING_SC, &run.free);
	if (rc)
		bench_die("bpbench locks: bp_ring_create: %s\n",
			  bp_strerror(rc));
	for (unsigned i = 0; i < p->pool; i++) {
		struct bp_job *h = &jobs[i].hdr;

		if (bp_ring_enqueue_burst(run.free, (void **)&h, 1, NULL) != 1)
			bench_die("bpbench locks: cannot fill the pool\n");
	}

	bp_pipeline_config_init(&c);
	c.workers = p->c.threads;
	c.max_batch = p->c.batch;
	if (c.max_inflight < p->c.batch)
		c.max_inflight = p->c.batch;
	/* like the other variants' queues: the whole pool fits */
	c.ingress_capacity = p->c.capacity;
	/* waits: the library's defaults (spin, yield, then sleep), what a
	 * user gets; with more workers than CPUs the sleeping ones leave the
	 * CPU to the producer and the sink */
	for (int i = 0; i < p->ncpus; i++)
		wcpus[i] = p->cpus[(i + 1) % p->ncpus];
	c.worker_cpus = wcpus;
	c.n_worker_cpus = (unsigned)p->ncpus;
	c.sink_cpu = p->cpus[(p->c.threads + 1) % (unsigned)p->ncpus];
	c.stage = &lk_pstage;
	c.stage_ctx = &run;
	c.sink = lk_psink;
	c.sink_ctx = &run;
	c.log = lk_plog;
	rc = bp_pipeline_create(&c, &run.pl);
	if (rc)
		bench_die("bpbench locks: bp_pipeline_create: %s\n",
			  bp_strerror(rc));
	rc = bp_pipeline_start(run.pl);
	if (rc)
		bench_die("bpbench locks: bp_pipeline_start: %s\n",
			  bp_strerror(rc));

	pthread_barrier_init(&run.start, NULL, 2);
	pthread_attr_init(&attr);
	rc = bench_attr_pin(&attr, p->cpus[0]);
	if (!rc)
		rc = pthread_create(&prod, &attr, lk_pproducer_main, &run);
	if (rc)
		bench_die("bpbench locks: producer thread: %s\n", strerror(rc));
	pthread_attr_destroy(&attr);
	pthread_barrier_wait(&run.start);
	out->cpu_ns = lk_process_cpu_ns();
	out->cpu_wall_ns = bench_now_ns();
	bench_sleep_ns((int64_t)p->ms * 1000000);
	out->cpu_ns = lk_process_cpu_ns() - out->cpu_ns;
	out->cpu_wall_ns = bench_now_ns() - out->cpu_wall_ns;
	/* relaxed: a time signal; the join and the drain publish the rest */
	atomic_store_explicit(&run.stop, 1, memory_order_relaxed);
	pthread_join(prod, NULL);
	/* outside the window: every submitted job reaches the sink */
	bp_pipeline_drain(run.pl);
	if (!run.window_closed) {
		/* no batch reached the sink after the stop */
		run.window_count = run.received;
		run.t_end = bench_now_ns();
	}
	bp_pipeline_get_stats(run.pl, &st);
	if (st.submitted != run.issued || st.ok != run.issued || st.failed ||
	    st.cancelled)
		bench_die("bpbench locks: VERIFY FAILED: batchpipe-pipeline "
			  "threads=%u B=%u: issued %llu, pipeline submitted "
			  "%llu ok %llu failed %llu cancelled %llu\n",
			  p->c.threads, p->c.batch,
			  (unsigned long long)run.issued,
			  (unsigned long long)st.submitted,
			  (unsigned long long)st.ok,
			  (unsigned long long)st.failed,
			  (unsigned long long)st.cancelled);
	/* the pool is whole: every job is back in the free ring or was
	 * still held by the producer at the stop */
	if (bp_ring_count(run.free) + run.held != p->pool)
		bench_die("bpbench locks: VERIFY FAILED: batchpipe-pipeline "
			  "threads=%u B=%u: %u of %u jobs came back (%u more "
			  "held by the producer)\n",
			  p->c.threads, p->c.batch, bp_ring_count(run.free),
			  p->pool, run.held);
	bp_pipeline_destroy(run.pl);
	pthread_barrier_destroy(&run.start);
	bp_ring_destroy(run.free);
	free(wcpus);
	free(jobs);

	out->issued = run.issued;
	out->received = run.received;
	out->checksum = run.checksum;
	out->inflight = 0;
	out->inflight_sum = 0;
	out->window_count = run.window_count;
	out->window_ns = run.t_end - run.t_start;
}

const struct lk_variant lk_batchpipe_pipeline = {
	.name = "batchpipe-pipeline",
	.summary = "bp_pipeline: 1 producer -> N workers -> sink, B per batch",
	.flags = LK_BATCHED | LK_BATCHPIPE,
	.run = lk_pipeline_run,
};
