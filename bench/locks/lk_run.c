/* SPDX-License-Identifier: MIT */
/*
 * lk_run.c - one verified run of `bpbench locks` (lk_experiment.h).
 *
 * N worker threads run `while (job = next_job()) emit(process(job))`; one
 * consumer thread receives the results. Closed loop, time-bounded: a fixed
 * pool of jobs circulates. The consumer counts every result, adds it to a
 * checksum and gives a fresh job (the next sequence number) back to the job
 * source, so jobs never run out and no queue overflows. A worker that finds
 * the source empty first hands over the results it holds (a partial batch),
 * so no result waits for jobs that only its own delivery would bring.
 *
 * Verification, every run, outside the timed window: the threads are
 * joined, what is left in the job source and the result queue is taken out,
 * and then issued == received + left over, and the consumer's checksum plus
 * the results the left-overs stand for == the sum of lk_result(s) over every
 * issued sequence number s. A variant that loses, duplicates or miscomputes
 * a job stops the experiment (exit 1) before it can report a number.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "locks/lk_condq.h"
#include "locks/lk_experiment.h"
#include "locks/lk_work.h"

/* the consumer takes up to this many results at once (or B if larger) */
#define LK_CONSUMER_CHUNK 256

/* ---- a fault, for the test of the verification --------------------------- */

/*
 * The verification must be able to fail; tests/lab/test_locks.sh shows it
 * does, by setting BPBENCH_LOCKS_FAULT (it exists for that test only):
 *  drop        the consumer drops one result per run without counting it
 *  miscompute  one worker per run returns one wrong result
 * Read once, at the first run; the queue variants only (the `run` variants,
 * batchpipe-pipeline and plain-lockfree, have threads of their own). Unset or
 * empty: no fault, and the hot loops pay one predictable branch on a value that
 * never changes.
 */
enum lk_fault { LK_FAULT_NONE, LK_FAULT_DROP, LK_FAULT_MISCOMPUTE };

static enum lk_fault lk_fault = LK_FAULT_NONE;

static void lk_fault_read(void)
{
	static int read;
	const char *f;

	if (read)
		return;
	read = 1;
	f = getenv("BPBENCH_LOCKS_FAULT");
	if (!f || !*f)
		return;
	if (!strcmp(f, "drop")) {
		lk_fault = LK_FAULT_DROP;
	} else if (!strcmp(f, "miscompute")) {
		lk_fault = LK_FAULT_MISCOMPUTE;
	} else {
		fprintf(stderr,
			"bpbench locks: BPBENCH_LOCKS_FAULT=%s: not drop or "
			"miscompute\n",
			f);
		exit(2);
	}
}

/* ---- the expected checksum ---------------------------------------------- */

/*
 * Sums of lk_result(s) over s < n, modulo 2^64, for the check after every
 * run. Runs of one sweep issue overlapping ranges, so prefix sums at every
 * multiple of LK_SUM_STEP are kept and each value is computed once.
 */
#define LK_SUM_STEP 4096
static uint64_t *lk_prefix; /* lk_prefix[k] = sum over s < k * LK_SUM_STEP */
static size_t lk_nprefix, lk_prefix_cap;

uint64_t lk_expected_sum(uint64_t n, uint64_t iters)
{
	size_t k = (size_t)(n / LK_SUM_STEP);
	uint64_t sum;

	if (!lk_prefix) {
		lk_prefix_cap = 1024;
		lk_prefix = bench_zalloc(sizeof(*lk_prefix) * lk_prefix_cap);
		lk_nprefix = 1; /* lk_prefix[0] = 0 */
	}
	while (lk_nprefix <= k) {
		uint64_t base = (uint64_t)(lk_nprefix - 1) * LK_SUM_STEP;

		sum = lk_prefix[lk_nprefix - 1];
		for (uint64_t s = base; s < base + LK_SUM_STEP; s++)
			sum += lk_result_fast(s, iters);
		if (lk_nprefix == lk_prefix_cap) {
			lk_prefix_cap *= 2;
			lk_prefix = realloc(lk_prefix,
					    sizeof(*lk_prefix) * lk_prefix_cap);
			if (!lk_prefix)
				bench_die("bpbench locks: out of memory\n");
		}
		lk_prefix[lk_nprefix++] = sum;
	}
	sum = lk_prefix[k];
	for (uint64_t s = (uint64_t)k * LK_SUM_STEP; s < n; s++)
		sum += lk_result_fast(s, iters);
	return sum;
}

/* ---- one timed run of a queue variant ----------------------------------- */

struct lk_run;

struct lk_worker {
	struct lk_run *run;
	unsigned tid;
	pthread_t thread;
	int err;
	void **left; /* [nleft] results it still held at the end */
	unsigned nleft;
} __attribute__((aligned(BENCH_CACHELINE)));

struct lk_run {
	const struct lk_variant *var;
	void *v;
	unsigned threads, B, chunk, pool;
	uint64_t iters;
	pthread_barrier_t start;
	/* written once per run, read in every loop: a line of its own */
	atomic_int stop __attribute__((aligned(BENCH_CACHELINE)));
	/* LK_FAULT_MISCOMPUTE: 1 until a worker has miscomputed this run */
	atomic_int fault_left;
	struct lk_worker *workers;
	/* the consumer's, written by it alone, read after its join */
	struct {
		pthread_t thread;
		uint64_t issued, received, checksum;
		int64_t t_start, t_end;
		int err;
	} cons __attribute__((aligned(BENCH_CACHELINE)));
};

/*
 * Hand over results[0..n): all of them, or, once the run is over, what the
 * variant takes without waiting; the rest move to the front of results.
 * Returns the count not handed over, or a negative errno. (A worker must not
 * flush a whole batch after the stop: through a queue whose producers wait
 * for one another, like ck_ring's MPMC enqueue, with more threads than
 * CPUs, that takes a time slice per value.)
 */
static int lk_emit_all(struct lk_run *run, unsigned tid, void **results,
		       unsigned n)
{
	struct bench_backoff bo = {0};
	unsigned off = 0;

	while (off < n) {
		int r = run->var->emit(run->v, tid, results + off, n - off);

		if (r < 0)
			return r;
		off += (unsigned)r;
		/* relaxed: a time signal; the join publishes what is left */
		if (off < n &&
		    atomic_load_explicit(&run->stop, memory_order_relaxed))
			break;
		if (r == 0) {
			bench_backoff_wait(&bo);
			continue;
		}
		bench_backoff_reset(&bo);
	}
	memmove(results, results + off, (n - off) * sizeof(*results));
	return (int)(n - off);
}

static void *lk_worker_main(void *arg)
{
	struct lk_worker *self = arg;
	struct lk_run *run = self->run;
	const struct lk_variant *var = run->var;
	unsigned B = run->B, held = 0, tid = self->tid;
	int blocking = !!(var->flags & LK_BLOCKING_JOBS);
	uint64_t iters = run->iters;
	void **jobs = bench_zalloc(sizeof(void *) * B);
	void **res = bench_zalloc(sizeof(void *) * B);
	struct bench_backoff bo = {0};
	int rc = 0;

	pthread_barrier_wait(&run->start);
	/* relaxed: stop is a time signal; the join publishes the rest */
	while (!atomic_load_explicit(&run->stop, memory_order_relaxed)) {
		/* sleep for jobs only with no results in hand */
		int n = var->take_jobs(run->v, tid, jobs, B - held, held == 0);

		if (n < 0) {
			rc = n;
			break;
		}
		if (n == 0) {
			if (held) {
				rc = lk_emit_all(run, tid, res, held);
				if (rc < 0)
					break;
				held = (unsigned)rc;
				rc = 0;
			} else if (!blocking) {
				bench_backoff_wait(&bo);
			}
			continue;
		}
		bench_backoff_reset(&bo);
		for (int i = 0; i < n; i++)
			res[held++] =
				lk_result_value(lk_job_seq(jobs[i]), iters);
		/* relaxed: only which worker takes the one fault */
		if (lk_fault == LK_FAULT_MISCOMPUTE &&
		    atomic_exchange_explicit(&run->fault_left, 0,
					     memory_order_relaxed))
			res[held - 1] = (void *)((uintptr_t)res[held - 1] + 2);
		if (held == B) {
			rc = lk_emit_all(run, tid, res, held);
			if (rc < 0)
				break;
			held = (unsigned)rc;
			rc = 0;
		}
	}
	if (!rc && held) {
		rc = lk_emit_all(run, tid, res, held);
		if (rc >= 0) {
			held = (unsigned)rc;
			rc = 0;
		}
	}
	self->err = rc;
	/* results never handed over: the experiment counts them as left */
	self->left = res;
	self->nleft = rc ? 0 : held;
	free(jobs);
	return NULL;
}

static void *lk_consumer_main(void *arg)
{
	struct lk_run *run = arg;
	const struct lk_variant *var = run->var;
	int blocking = !!(var->flags & LK_BLOCKING_RESULTS);
	unsigned chunk = run->chunk;
	void **res = bench_zalloc(sizeof(void *) * chunk);
	void **fresh = bench_zalloc(sizeof(void *) * chunk);
	uint64_t seq = run->pool, received = 0, sum = 0;
	struct bench_backoff bo = {0};
	int rc = 0, drop = lk_fault == LK_FAULT_DROP;

	pthread_barrier_wait(&run->start);
	run->cons.t_start = bench_now_ns();
	/* relaxed: stop is a time signal; the join publishes the rest */
	while (!atomic_load_explicit(&run->stop, memory_order_relaxed)) {
		int n = var->take_results(run->v, res, chunk, 1);
		unsigned off = 0;

		if (n < 0) {
			rc = n;
			break;
		}
		if (n == 0) {
			if (!blocking)
				bench_backoff_wait(&bo);
			continue;
		}
		bench_backoff_reset(&bo);
		received += (unsigned)n;
		for (int i = 0; i < n; i++) {
			sum += (uintptr_t)res[i];
			fresh[i] = lk_job(seq + (uint64_t)i);
		}
		seq += (unsigned)n;
		if (drop) {
			/* the fault: res[0] is lost, yet its job is renewed */
			received--;
			sum -= (uintptr_t)res[0];
			drop = 0;
		}
		while (off < (unsigned)n) {
			int r = var->give_jobs(run->v, fresh + off,
					       (unsigned)n - off);

			if (r < 0) {
				rc = r;
				break;
			}
			if (r == 0) {
				bench_backoff_wait(&bo);
				continue;
			}
			off += (unsigned)r;
		}
		bench_backoff_reset(&bo);
		if (rc)
			break;
	}
	run->cons.t_end = bench_now_ns();
	/* a short give on an error: only what went in was issued */
	run->cons.issued = seq;
	run->cons.received = received;
	run->cons.checksum = sum;
	run->cons.err = rc;
	free(res);
	free(fresh);
	return NULL;
}

/* After the joins: take out what is left, as jobs and as results. */
static void lk_collect_leftovers(struct lk_run *run, struct lk_outcome *out)
{
	const struct lk_variant *var = run->var;
	void *tmp[64];
	int n;

	for (unsigned w = 0; w < run->threads; w++) {
		for (unsigned i = 0; i < run->workers[w].nleft; i++) {
			out->inflight++;
			out->inflight_sum += (uintptr_t)run->workers[w].left[i];
		}
		free(run->workers[w].left);
	}
	while ((n = var->take_jobs(run->v, 0, tmp, 64, 0)) > 0)
		for (int i = 0; i < n; i++) {
			uintptr_t j = (uintptr_t)tmp[i];

			if ((j & 1) || lk_job_seq(tmp[i]) >= out->issued)
				bench_die("bpbench locks: VERIFY FAILED: %s "
					  "threads=%u B=%u: job source holds "
					  "%#" PRIxPTR
					  ", not a job that was issued\n",
					  var->name, run->threads, run->B, j);
			out->inflight++;
			out->inflight_sum +=
				lk_result_fast(lk_job_seq(tmp[i]), run->iters);
		}
	if (n < 0)
		bench_die("bpbench locks: %s: taking jobs after the run: %s\n",
			  var->name, strerror(-n));
	while ((n = var->take_results(run->v, tmp, 64, 0)) > 0)
		for (int i = 0; i < n; i++) {
			out->inflight++;
			out->inflight_sum += (uintptr_t)tmp[i];
		}
	if (n < 0)
		bench_die("bpbench locks: %s: taking results after the run: "
			  "%s\n",
			  var->name, strerror(-n));
}

static void lk_run_queue(const struct lk_opts *o, const struct lk_variant *var,
			 unsigned threads, unsigned B, unsigned pool,
			 struct lk_outcome *out)
{
	int64_t cpu0, wall0;
	struct lk_run run = {.var = var,
			     .threads = threads,
			     .B = B,
			     .pool = pool,
			     .iters = o->iters};
	struct lk_config c = {.threads = threads,
			      .batch = B,
			      .capacity = lk_capacity_for(pool),
			      .stop = &run.stop};
	void **fill = bench_zalloc(sizeof(void *) * pool);
	unsigned off = 0;

	run.chunk = B > LK_CONSUMER_CHUNK ? B : LK_CONSUMER_CHUNK;
	atomic_init(&run.stop, 0);
	atomic_init(&run.fault_left, 1);
	run.v = var->create(&c);
	/* the pool's jobs, sequence numbers 0 .. pool-1, before any thread */
	for (unsigned i = 0; i < pool; i++)
		fill[i] = lk_job(i);
	while (off < pool) {
		int r = var->give_jobs(run.v, fill + off, pool - off);

		if (r <= 0)
			bench_die("bpbench locks: %s: cannot fill the job "
				  "source (%d)\n",
				  var->name, r);
		off += (unsigned)r;
	}
	free(fill);

	run.workers = bench_zalloc(sizeof(*run.workers) * threads);
	pthread_barrier_init(&run.start, NULL, threads + 2);
	/* the consumer on the first CPU, workers round-robin after it */
	bench_spawn_pinned(&run.cons.thread, lk_consumer_main, &run,
			   o->a.cpus[0], "bpbench locks");
	for (unsigned i = 0; i < threads; i++) {
		run.workers[i].run = &run;
		run.workers[i].tid = i;
		bench_spawn_pinned(&run.workers[i].thread, lk_worker_main,
				   &run.workers[i],
				   o->a.cpus[(i + 1) % (unsigned)o->a.ncpus],
				   "bpbench locks");
	}
	pthread_barrier_wait(&run.start);
	cpu0 = lk_process_cpu_ns();
	wall0 = bench_now_ns();
	bench_sleep_ns((int64_t)o->a.ms * 1000000);
	/* relaxed: a time signal; the joins publish everything else */
	atomic_store_explicit(&run.stop, 1, memory_order_relaxed);
	cpu0 = lk_process_cpu_ns() - cpu0;
	wall0 = bench_now_ns() - wall0;
	if (var->wake_all)
		var->wake_all(run.v);
	pthread_join(run.cons.thread, NULL);
	for (unsigned i = 0; i < threads; i++) {
		pthread_join(run.workers[i].thread, NULL);
		if (run.workers[i].err)
			bench_die("bpbench locks: %s: worker %u: %s\n",
				  var->name, i, strerror(-run.workers[i].err));
	}
	if (run.cons.err)
		bench_die("bpbench locks: %s: consumer: %s\n", var->name,
			  strerror(-run.cons.err));

	memset(out, 0, sizeof(*out));
	out->issued = run.cons.issued;
	out->received = run.cons.received;
	out->checksum = run.cons.checksum;
	out->window_count = run.cons.received;
	out->window_ns = run.cons.t_end - run.cons.t_start;
	out->cpu_ns = cpu0;
	out->cpu_wall_ns = wall0;
	lk_collect_leftovers(&run, out);

	pthread_barrier_destroy(&run.start);
	free(run.workers);
	var->destroy(run.v);
}

/* Results checked by every lk_verify so far (reported at the end). */
static uint64_t lk_nverified;

static void lk_verify(const struct lk_opts *o, const struct lk_variant *var,
		      unsigned threads, unsigned B,
		      const struct lk_outcome *out)
{
	uint64_t want = lk_expected_sum(out->issued, o->iters);

	/*
	 * window_count is not checked: every variant takes it as a snapshot of
	 * its own received count (the queue variants at the end, the pipeline
	 * at the stop), so it cannot disagree with the counts checked here.
	 */
	if (out->received + out->inflight != out->issued ||
	    out->checksum + out->inflight_sum != want || out->window_ns <= 0)
		bench_die("bpbench locks: VERIFY FAILED: %s threads=%u B=%u: "
			  "issued %" PRIu64 ", received %" PRIu64 " + %" PRIu64
			  " left over; checksum %#" PRIx64 " + %#" PRIx64
			  " for the left-overs, expected %#" PRIx64
			  " (window %" PRIu64 " results in %" PRId64 " ns)\n",
			  var->name, threads, B, out->issued, out->received,
			  out->inflight, out->checksum, out->inflight_sum, want,
			  out->window_count, out->window_ns);
	lk_nverified += out->received;
}

void lk_run_verified(const struct lk_opts *o, const struct lk_variant *var,
		     unsigned threads, unsigned B, unsigned pool,
		     struct lk_outcome *out)
{
	memset(out, 0, sizeof(*out));
	lk_fault_read();
	if (var->run) {
		atomic_int unused;
		struct lk_run_params p = {
			.c = {.threads = threads,
			      .batch = B,
			      .capacity = lk_capacity_for(pool),
			      .stop = &unused},
			.pool = pool,
			.iters = o->iters,
			.cpus = o->a.cpus,
			.ncpus = o->a.ncpus,
			.ms = o->a.ms,
		};

		atomic_init(&unused, 0);
		var->run(&p, out);
	} else {
		lk_run_queue(o, var, threads, B, pool, out);
	}
	lk_verify(o, var, threads, B, out);
}

uint64_t lk_results_verified(void)
{
	return lk_nverified;
}

void lk_run_cleanup(void)
{
	free(lk_prefix);
	lk_prefix = NULL;
	lk_nprefix = lk_prefix_cap = 0;
}
