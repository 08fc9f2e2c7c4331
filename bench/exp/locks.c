/* SPDX-License-Identifier: MIT */
/*
 * locks.c - `bpbench locks`: mutex vs spinlock vs lock-free hand-offs, the
 * experiment of "Speeding up a multi-threaded program 150x in three simple
 * steps".
 *
 * N worker threads run `while (job = next_job()) emit(process(job))`; one
 * consumer thread receives the results. The variants (bench/locks/) differ
 * only in how jobs and results move: a mutex, batches of results under the
 * mutex, spinlocks on the job source, lock-free queues at both ends, and
 * batchpipe's own pipeline.
 *
 * Closed loop, time-bounded runs: a fixed pool of jobs circulates. The
 * consumer counts every result, adds it to a checksum and gives a fresh job
 * (the next sequence number) back to the job source, so jobs never run out
 * and no queue overflows. A worker that finds the source empty first hands
 * over the results it holds (a partial batch), so no result waits for jobs
 * that only its own delivery would bring.
 *
 * Verification, every run, outside the timed window: the threads are
 * joined, what is left in the job source and the result queue is taken out,
 * and then issued == received + left over, and the consumer's checksum plus
 * the results the left-overs stand for == the sum of lk_result(s) over every
 * issued sequence number s. A variant that loses, duplicates or miscomputes
 * a job stops the experiment (exit 1) before it can report a number.
 *
 * Throughput = results the consumer received in the window / the window.
 * Interleaving: for each run index, every (variant, threads, B) point once,
 * in a freshly shuffled order; tables and plots show medians.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "bpbench.h"
#include "lk_condq.h"
#include "lk_work.h"
#include "locks.h"
#include "plot.h"

#define BENCH_CMD "bpbench locks"

#define LK_MAX_THREADS	64
#define LK_MAX_TLIST	16
#define LK_MAX_BATCHES	16
#define LK_MAX_BATCH	4096 /* bp_pipeline's limit */
#define LK_MAX_VARIANTS 16
#define LK_MAX_RUNS	1000
#define LK_MAX_WORK_NS	100000
#define LK_MAX_POOL	(1u << 22)
/* the consumer takes up to this many results at once (or B if larger) */
#define LK_CONSUMER_CHUNK 256

struct lk_opts {
	unsigned runs, ms, pool, work_ns;
	unsigned threads[LK_MAX_TLIST];
	int nthreads;
	unsigned batches[LK_MAX_BATCHES];
	int nbatches;
	const struct lk_variant *vars[LK_MAX_VARIANTS];
	int nvars;
	int cpus[BENCH_MAX_CPUS];
	int ncpus;
	int csv, quick;
	const char *out, *name;
	uint64_t seed;
	/* calibration */
	uint64_t iters;
	double work_ns_measured; /* per job, one thread, no hand-offs */
};

/* ---- the work: calibration and the expected checksum -------------------- */

/* CPU time of the calling thread, ns. */
static int64_t lk_thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * Nanoseconds per job of lk_result(., iters), one thread: median of 5. In
 * the thread's CPU time, not wall time: on a shared machine the wall clock
 * also counts the time other processes had the CPU.
 */
static double lk_time_work(uint64_t iters)
{
	double t[5];
	uint64_t sink = 0;

	for (int r = 0; r < 5; r++) {
		uint64_t n = 0;
		int64_t t0 = lk_thread_cpu_ns(), t1;

		do {
			for (int i = 0; i < 4096; i++)
				sink += lk_result(n + (uint64_t)i, iters);
			n += 4096;
			t1 = lk_thread_cpu_ns();
		} while (t1 - t0 < 20000000);
		t[r] = (double)(t1 - t0) / (double)n;
	}
	/* keep the loop: its result is used */
	__asm__ volatile("" : : "r"(sink));
	return bench_median(t, 5);
}

/*
 * Pick iters so that a job takes about work_ns, then measure what it takes.
 * The first guess comes from the cost of one step in a long chain; short
 * chains of consecutive jobs overlap in the CPU, so the guess is corrected
 * from the measured time per job a few times.
 */
static void lk_calibrate(struct lk_opts *o)
{
	double t = lk_time_work(0);

	o->iters = 0;
	if (o->work_ns > 0) {
		double per_iter = (lk_time_work(1000) - t) / 1000;
		double want = (double)o->work_ns - t;

		o->iters = per_iter > 0 && want > 0
				   ? (uint64_t)llround(want / per_iter)
				   : 1;
		for (int round = 0; round < 6; round++) {
			double next;

			if (o->iters == 0)
				o->iters = 1;
			t = lk_time_work(o->iters);
			if (fabs(t - o->work_ns) < 0.02 * o->work_ns)
				break;
			next = (double)o->iters * o->work_ns / t;
			o->iters = (uint64_t)llround(next);
		}
	}
	o->work_ns_measured = lk_time_work(o->iters);
}

/*
 * Sums of lk_result(s) over s < n, modulo 2^64, for the check after every
 * run. Runs of one sweep issue overlapping ranges, so prefix sums at every
 * multiple of LK_SUM_STEP are kept and each value is computed once.
 */
#define LK_SUM_STEP 4096
static uint64_t *lk_prefix; /* lk_prefix[k] = sum over s < k * LK_SUM_STEP */
static size_t lk_nprefix, lk_prefix_cap;

static uint64_t lk_expected_sum(uint64_t n, uint64_t iters)
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
	int rc = 0;

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

static void lk_spawn(pthread_t *t, void *(*fn)(void *), void *arg, int cpu)
{
	pthread_attr_t attr;
	int rc;

	pthread_attr_init(&attr);
	rc = bench_attr_pin(&attr, cpu);
	if (rc)
		bench_die("bpbench locks: cannot pin to CPU %d: %s\n", cpu,
			  strerror(rc));
	rc = pthread_create(t, &attr, fn, arg);
	if (rc)
		bench_die("bpbench locks: pthread_create: %s\n", strerror(rc));
	pthread_attr_destroy(&attr);
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
	lk_spawn(&run.cons.thread, lk_consumer_main, &run, o->cpus[0]);
	for (unsigned i = 0; i < threads; i++) {
		run.workers[i].run = &run;
		run.workers[i].tid = i;
		lk_spawn(&run.workers[i].thread, lk_worker_main,
			 &run.workers[i],
			 o->cpus[(i + 1) % (unsigned)o->ncpus]);
	}
	pthread_barrier_wait(&run.start);
	cpu0 = lk_process_cpu_ns();
	wall0 = bench_now_ns();
	bench_sleep_ns((int64_t)o->ms * 1000000);
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
static uint64_t lk_results_verified;

static void lk_verify(const struct lk_opts *o, const struct lk_variant *var,
		      unsigned threads, unsigned B,
		      const struct lk_outcome *out)
{
	uint64_t want = lk_expected_sum(out->issued, o->iters);

	if (out->received + out->inflight != out->issued ||
	    out->checksum + out->inflight_sum != want ||
	    out->window_count > out->received || out->window_ns <= 0)
		bench_die("bpbench locks: VERIFY FAILED: %s threads=%u B=%u: "
			  "issued %" PRIu64 ", received %" PRIu64 " + %" PRIu64
			  " left over; checksum %#" PRIx64 " + %#" PRIx64
			  " for the left-overs, expected %#" PRIx64
			  " (window %" PRIu64 " results in %" PRId64 " ns)\n",
			  var->name, threads, B, out->issued, out->received,
			  out->inflight, out->checksum, out->inflight_sum, want,
			  out->window_count, out->window_ns);
	lk_results_verified += out->received;
}

/* ---- the sweep ---------------------------------------------------------- */

static int lk_batched(const struct lk_variant *v)
{
	return !!(v->flags & LK_BATCHED);
}

/* B indices a variant runs at: every B, or just the first (as B = 1). */
static int lk_nb(const struct lk_opts *o, const struct lk_variant *v)
{
	return lk_batched(v) ? o->nbatches : 1;
}

static unsigned lk_B(const struct lk_opts *o, const struct lk_variant *v, int b)
{
	return lk_batched(v) ? o->batches[b] : 1;
}

static unsigned lk_pool_for(const struct lk_opts *o, unsigned threads,
			    unsigned B)
{
	unsigned auto_pool = 8 * threads * B;

	if (o->pool)
		return o->pool;
	return auto_pool > 4096 ? auto_pool : 4096;
}

struct lk_results {
	int runs, nthreads, nbatches, nvars;
	/* [run][var][threads][batch], NaN: not run */
	double *mps;
	double *cpus;	/* CPUs the process got in the window */
	double *jobpct; /* % of that CPU time spent in the jobs' own work */
};

static size_t lk_index(const struct lk_results *r, int run, int v, int t, int b)
{
	return (((size_t)run * (size_t)r->nvars + (size_t)v) *
			(size_t)r->nthreads +
		(size_t)t) *
		       (size_t)r->nbatches +
	       (size_t)b;
}

static double *lk_cell(const struct lk_results *r, int run, int v, int t, int b)
{
	return &r->mps[lk_index(r, run, v, t, b)];
}

/* Median over runs of one of the per-run arrays. */
static double lk_median_of(const struct lk_results *r, const double *a, int v,
			   int t, int b)
{
	double x[LK_MAX_RUNS];

	for (int run = 0; run < r->runs; run++)
		x[run] = a[lk_index(r, run, v, t, b)];
	return bench_median(x, r->runs);
}

static double lk_median(const struct lk_results *r, int v, int t, int b,
			double *min, double *max)
{
	double x[LK_MAX_RUNS];

	for (int run = 0; run < r->runs; run++)
		x[run] = *lk_cell(r, run, v, t, b);
	if (min)
		*min = bench_min(x, r->runs);
	if (max)
		*max = bench_max(x, r->runs);
	return bench_median(x, r->runs);
}

static void lk_run_point(const struct lk_opts *o, const struct lk_variant *var,
			 unsigned threads, unsigned B, struct lk_results *res,
			 size_t cell)
{
	unsigned pool = lk_pool_for(o, threads, B);
	struct lk_outcome out;

	memset(&out, 0, sizeof(out));
	if (var->run) {
		atomic_int unused;
		struct lk_run_params p = {
			.c = {.threads = threads,
			      .batch = B,
			      .capacity = lk_capacity_for(pool),
			      .stop = &unused},
			.pool = pool,
			.iters = o->iters,
			.cpus = o->cpus,
			.ncpus = o->ncpus,
			.ms = o->ms,
		};

		atomic_init(&unused, 0);
		var->run(&p, &out);
	} else {
		lk_run_queue(o, var, threads, B, pool, &out);
	}
	lk_verify(o, var, threads, B, &out);
	/* results per microsecond = millions per second */
	res->mps[cell] = (double)out.window_count * 1e3 / (double)out.window_ns;
	res->cpus[cell] = out.cpu_wall_ns > 0
				  ? (double)out.cpu_ns / (double)out.cpu_wall_ns
				  : NAN;
	/* the results of the window, each worth one job's measured time */
	res->jobpct[cell] = out.cpu_ns > 0 ? 100.0 * (double)out.window_count *
						     o->work_ns_measured /
						     (double)out.cpu_ns
					   : NAN;
}

static void lk_sweep(const struct lk_opts *o, struct lk_results *res)
{
	int npts = 0, *order;
	uint64_t rng = o->seed;

	for (int v = 0; v < o->nvars; v++)
		npts += o->nthreads * lk_nb(o, o->vars[v]);
	order = bench_zalloc(sizeof(int) * (size_t)npts *
			     4); /* + idx[3][npts] */
	for (int run = 0; run < (int)o->runs; run++) {
		int64_t t0 = bench_now_ns();
		int n = 0, *idx = order + npts;

		for (int v = 0; v < o->nvars; v++)
			for (int t = 0; t < o->nthreads; t++)
				for (int b = 0; b < lk_nb(o, o->vars[v]); b++) {
					idx[3 * n] = v;
					idx[3 * n + 1] = t;
					idx[3 * n + 2] = b;
					order[n] = n;
					n++;
				}
		bench_shuffle(order, npts, &rng);
		for (int i = 0; i < npts; i++) {
			const int *pt = idx + 3 * order[i];
			const struct lk_variant *var = o->vars[pt[0]];

			lk_run_point(o, var, o->threads[pt[1]],
				     lk_B(o, var, pt[2]), res,
				     lk_index(res, run, pt[0], pt[1], pt[2]));
		}
		fprintf(stderr,
			"bpbench locks: run %d/%u: %d points (%.1f s)\n",
			run + 1, o->runs, npts,
			(double)(bench_now_ns() - t0) / 1e9);
	}
	free(order);
}

/* ---- summaries ---------------------------------------------------------- */

/* The compute ceiling at `threads` workers, M results/s; NaN for trivial. */
static double lk_ceiling(const struct lk_opts *o, unsigned threads)
{
	unsigned usable =
		threads < (unsigned)o->ncpus ? threads : (unsigned)o->ncpus;

	if (o->work_ns == 0)
		return NAN;
	return (double)usable * 1e3 / o->work_ns_measured;
}

/* A variant's best median at one thread count, and the B index of it. */
static double lk_best(const struct lk_opts *o, const struct lk_results *r,
		      int v, int t, int *best_b)
{
	double best = NAN;

	*best_b = -1;
	for (int b = 0; b < lk_nb(o, o->vars[v]); b++) {
		double m = lk_median(r, v, t, b, NULL, NULL);

		if (!isnan(m) && (isnan(best) || m > best)) {
			best = m;
			*best_b = b;
		}
	}
	return best;
}

static int lk_find_var(const struct lk_opts *o, const struct lk_variant *v)
{
	for (int i = 0; i < o->nvars; i++)
		if (o->vars[i] == v)
			return i;
	return -1;
}

struct lk_headline {
	int best_v, best_b; /* -1: no batchpipe variant ran */
	double best, mutex, pipeline;
	int pipeline_b;
};

static void lk_headline(const struct lk_opts *o, const struct lk_results *r,
			int t, struct lk_headline *h)
{
	int mv = lk_find_var(o, &lk_mutex),
	    pv = lk_find_var(o, &lk_batchpipe_pipeline), b;

	h->best_v = h->best_b = h->pipeline_b = -1;
	h->best = h->mutex = h->pipeline = NAN;
	for (int v = 0; v < o->nvars; v++) {
		double m;

		if (!(o->vars[v]->flags & LK_BATCHPIPE))
			continue;
		m = lk_best(o, r, v, t, &b);
		if (!isnan(m) && (isnan(h->best) || m > h->best)) {
			h->best = m;
			h->best_v = v;
			h->best_b = b;
		}
	}
	if (mv >= 0)
		h->mutex = lk_best(o, r, mv, t, &b);
	if (pv >= 0)
		h->pipeline = lk_best(o, r, pv, t, &h->pipeline_b);
}

static void lk_print_headlines(FILE *f, const struct lk_opts *o,
			       const struct lk_results *r)
{
	for (int t = 0; t < o->nthreads; t++) {
		struct lk_headline h;
		double ceil = lk_ceiling(o, o->threads[t]);
		const char *pn = lk_batchpipe_pipeline.name;

		lk_headline(o, r, t, &h);
		if (h.best_v < 0)
			continue;
		fprintf(f, "%u threads, ", o->threads[t]);
		if (o->work_ns)
			fprintf(f, "%u ns jobs", o->work_ns);
		else
			fprintf(f, "trivial");
		fprintf(f, ": best batchpipe variant = %s (B=%u) %.2f M/s",
			o->vars[h.best_v]->name,
			lk_B(o, o->vars[h.best_v], h.best_b), h.best);
		if (!isnan(h.mutex) && h.mutex > 0)
			fprintf(f, " = %.0fx mutex", h.best / h.mutex);
		if (!isnan(ceil))
			fprintf(f, " = %.0f %% of the ceiling (%.2f M/s)",
				100 * h.best / ceil, ceil);
		fprintf(f, " [run got %.2f CPUs",
			lk_median_of(r, r->cpus, h.best_v, t, h.best_b));
		if (o->work_ns)
			fprintf(f, ", %.0f %% of them in jobs",
				lk_median_of(r, r->jobpct, h.best_v, t,
					     h.best_b));
		fprintf(f, "]");
		if (!isnan(h.pipeline)) {
			fprintf(f, " (%s: B=%u %.2f M/s", pn,
				o->batches[h.pipeline_b], h.pipeline);
			if (!isnan(h.mutex) && h.mutex > 0)
				fprintf(f, " = %.0fx mutex",
					h.pipeline / h.mutex);
			if (!isnan(ceil))
				fprintf(f, " = %.0f %% of the ceiling",
					100 * h.pipeline / ceil);
			fprintf(f, ")");
		}
		fprintf(f, "\n");
	}
}

static int lk_name_width(const struct lk_opts *o)
{
	int w = 7;

	for (int v = 0; v < o->nvars; v++)
		if ((int)strlen(o->vars[v]->name) > w)
			w = (int)strlen(o->vars[v]->name);
	return w;
}

static void lk_print_table(const struct lk_opts *o, const struct lk_results *r)
{
	char cpus[256];
	int mv = lk_find_var(o, &lk_mutex), w = lk_name_width(o);

	bench_cpus_format(o->cpus, o->ncpus, cpus, sizeof(cpus));
	printf("bpbench locks: %u runs x %u ms per point, CPUs %s (%d usable), "
	       "seed %" PRIu64 ", pool %s\n",
	       o->runs, o->ms, cpus, o->ncpus, o->seed,
	       o->pool ? "fixed" : "max(4096, 8 x threads x B)");
	if (o->work_ns)
		printf("jobs: --work-ns %u -> %" PRIu64
		       " LCG steps, measured %.2f ns (thread CPU time) per job "
		       "on one thread;\n"
		       "compute ceiling = min(threads, %d CPUs) / %.2f ns = "
		       "%.2f M results/s with every CPU\n",
		       o->work_ns, o->iters, o->work_ns_measured, o->ncpus,
		       o->work_ns_measured, lk_ceiling(o, (unsigned)o->ncpus));
	else
		printf("jobs: trivial (one multiply, measured %.2f ns per job "
		       "on one thread): hand-offs are everything\n",
		       o->work_ns_measured);
	printf("median M results/s at each variant's best B; x mutex = over "
	       "mutex at the same threads%s\n",
	       o->work_ns ? "; % ceil = of the compute ceiling at those threads"
			  : "");
	printf("CPUs = CPU time the process got in the window / the window (on "
	       "a "
	       "shared machine\nless than the usable CPUs)%s\n",
	       o->work_ns ? "; job % = results x measured job time / that CPU "
			    "time: the share\nof the CPU the run got that went "
			    "into the jobs themselves"
			  : "");
	printf("(mutex does not batch: it runs at B = 1 only)\n\n");
	printf("%7s  %-*s %6s %10s %9s", "threads", w, "variant", "best B",
	       "M/s", "x mutex");
	if (o->work_ns)
		printf(" %7s", "% ceil");
	printf(" %5s", "CPUs");
	if (o->work_ns)
		printf(" %6s", "job %");
	printf("\n");
	for (int t = 0; t < o->nthreads; t++) {
		int b;
		double mutex = mv >= 0 ? lk_best(o, r, mv, t, &b) : NAN;
		double ceil = lk_ceiling(o, o->threads[t]);

		for (int v = 0; v < o->nvars; v++) {
			double m = lk_best(o, r, v, t, &b);

			char tc[16] = "";

			if (v == 0)
				snprintf(tc, sizeof(tc), "%u", o->threads[t]);
			printf("%7s  %-*s %6u %10.3f", tc, w, o->vars[v]->name,
			       lk_B(o, o->vars[v], b), m);
			if (!isnan(mutex) && mutex > 0)
				printf(" %9.1f", m / mutex);
			else
				printf(" %9s", "-");
			if (o->work_ns)
				printf(" %6.1f%%", 100 * m / ceil);
			printf(" %5.2f",
			       b >= 0 ? lk_median_of(r, r->cpus, v, t, b)
				      : NAN);
			if (o->work_ns)
				printf(" %5.1f%%",
				       b >= 0 ? lk_median_of(r, r->jobpct, v, t,
							     b)
					      : NAN);
			printf("\n");
		}
	}

	printf("\nevery (variant, B): median M results/s by worker threads "
	       "(every run: --csv)\n");
	printf("%-*s %5s", w, "variant", "B");
	for (int t = 0; t < o->nthreads; t++)
		printf(" %9u", o->threads[t]);
	printf("\n");
	for (int v = 0; v < o->nvars; v++)
		for (int b = 0; b < lk_nb(o, o->vars[v]); b++) {
			printf("%-*s %5u", w, o->vars[v]->name,
			       lk_B(o, o->vars[v], b));
			for (int t = 0; t < o->nthreads; t++)
				printf(" %9.3f",
				       lk_median(r, v, t, b, NULL, NULL));
			printf("\n");
		}
	printf("\n");
	lk_print_headlines(stdout, o, r);
}

static void lk_write_csv(FILE *f, const struct lk_opts *o,
			 const struct lk_results *r)
{
	fprintf(f, "variant,threads,B,run,Mitems_per_s\n");
	for (int v = 0; v < o->nvars; v++)
		for (int t = 0; t < o->nthreads; t++)
			for (int b = 0; b < lk_nb(o, o->vars[v]); b++)
				for (int run = 0; run < r->runs; run++) {
					double x = *lk_cell(r, run, v, t, b);

					if (!isnan(x))
						fprintf(f, "%s,%u,%u,%d,%.4f\n",
							o->vars[v]->name,
							o->threads[t],
							lk_B(o, o->vars[v], b),
							run, x);
				}
}

/* A JSON number, or null for NaN / infinity. */
static void lk_json_num(FILE *f, double x)
{
	if (isfinite(x))
		fprintf(f, "%.4f", x);
	else
		fprintf(f, "null");
}

static void lk_write_json(FILE *f, const struct lk_opts *o,
			  const struct lk_results *r)
{
	fprintf(f,
		"{\"benchmark\":\"locks\",\"work_ns\":%u,\"work_iters\":"
		"%" PRIu64 ",\"work_ns_measured\":",
		o->work_ns, o->iters);
	lk_json_num(f, o->work_ns_measured);
	fprintf(f, ",\"usable_cpus\":%d,\"ceiling_mps\":", o->ncpus);
	lk_json_num(f, lk_ceiling(o, (unsigned)o->ncpus));
	fprintf(f, ",\"runs\":%u,\"ms\":%u,\"seed\":%" PRIu64 ",\"threads\":[",
		o->runs, o->ms, o->seed);
	for (int t = 0; t < o->nthreads; t++)
		fprintf(f, "%s%u", t ? "," : "", o->threads[t]);
	fprintf(f, "],\"batches\":[");
	for (int b = 0; b < o->nbatches; b++)
		fprintf(f, "%s%u", b ? "," : "", o->batches[b]);
	fprintf(f, "],\"variants\":[");
	for (int v = 0; v < o->nvars; v++)
		fprintf(f, "%s\"%s\"", v ? "," : "", o->vars[v]->name);
	fprintf(f, "],\n\"headline\":[");
	for (int t = 0; t < o->nthreads; t++) {
		struct lk_headline h;

		lk_headline(o, r, t, &h);
		fprintf(f, "%s\n {\"threads\":%u,\"best_batchpipe\":",
			t ? "," : "", o->threads[t]);
		if (h.best_v >= 0)
			fprintf(f, "\"%s\",\"best_B\":%u",
				o->vars[h.best_v]->name,
				lk_B(o, o->vars[h.best_v], h.best_b));
		else
			fprintf(f, "null,\"best_B\":null");
		fprintf(f, ",\"best_mps\":");
		lk_json_num(f, h.best);
		fprintf(f, ",\"mutex_mps\":");
		lk_json_num(f, h.mutex);
		fprintf(f, ",\"ratio\":");
		lk_json_num(f, h.mutex > 0 ? h.best / h.mutex : NAN);
		fprintf(f, ",\"pipeline_mps\":");
		lk_json_num(f, h.pipeline);
		if (h.pipeline_b >= 0)
			fprintf(f, ",\"pipeline_B\":%u",
				o->batches[h.pipeline_b]);
		else
			fprintf(f, ",\"pipeline_B\":null");
		fprintf(f, ",\"ceiling_mps\":");
		lk_json_num(f, lk_ceiling(o, o->threads[t]));
		fprintf(f, ",\"best_pct_of_ceiling\":");
		lk_json_num(f, 100 * h.best / lk_ceiling(o, o->threads[t]));
		fprintf(f, ",\"best_cpus\":");
		lk_json_num(f, h.best_v >= 0
				       ? lk_median_of(r, r->cpus, h.best_v, t,
						      h.best_b)
				       : NAN);
		fprintf(f, ",\"best_job_cpu_pct\":");
		lk_json_num(f, h.best_v >= 0 && o->work_ns
				       ? lk_median_of(r, r->jobpct, h.best_v, t,
						      h.best_b)
				       : NAN);
		fprintf(f, "}");
	}
	fprintf(f, "],\n\"medians\":[");
	for (int v = 0, sep = 0; v < o->nvars; v++)
		for (int t = 0; t < o->nthreads; t++)
			for (int b = 0; b < lk_nb(o, o->vars[v]); b++) {
				fprintf(f,
					"%s\n "
					"{\"variant\":\"%s\",\"threads\":%u,"
					"\"B\":%u,\"mps\":",
					sep++ ? "," : "", o->vars[v]->name,
					o->threads[t], lk_B(o, o->vars[v], b));
				lk_json_num(f,
					    lk_median(r, v, t, b, NULL, NULL));
				fprintf(f, "}");
			}
	fprintf(f, "]}\n");
}

/* ---- plots -------------------------------------------------------------- */

static FILE *lk_open(const char *dir, const char *name, const char *suffix,
		     char *path, size_t len)
{
	FILE *f;

	snprintf(path, len, "%s/%s%s", dir, name, suffix);
	f = fopen(path, "w");
	if (!f)
		fprintf(stderr, "bpbench locks: cannot write %s: %s\n", path,
			strerror(errno));
	return f;
}

/*
 * The data file gnuplot reads: one block (index) per (variant, B) that has a
 * positive median, then one per variant for its best B. Columns: threads,
 * median, min, max (best blocks: threads, median, B). blocks[] records each
 * block's index, -1 for none.
 */
static int lk_write_dat(FILE *f, const struct lk_opts *o,
			const struct lk_results *r,
			int (*vb_index)[LK_MAX_BATCHES], int *best_index,
			double *ymin, double *ymax)
{
	int idx = 0;

	*ymin = INFINITY;
	*ymax = 0;
	for (int v = 0; v < o->nvars; v++)
		for (int b = 0; b < LK_MAX_BATCHES; b++) {
			int any = 0;

			vb_index[v][b] = -1;
			if (b >= lk_nb(o, o->vars[v]))
				continue;
			for (int t = 0; t < o->nthreads; t++) {
				double lo, hi,
					m = lk_median(r, v, t, b, &lo, &hi);

				if (!(m > 0))
					continue;
				if (!any)
					fprintf(f, "# %s B=%u\n",
						o->vars[v]->name,
						lk_B(o, o->vars[v], b));
				any = 1;
				fprintf(f, "%u %.6g %.6g %.6g\n", o->threads[t],
					m, lo, hi);
				if (m < *ymin)
					*ymin = m;
				if (m > *ymax)
					*ymax = m;
			}
			if (any) {
				fprintf(f, "\n\n");
				vb_index[v][b] = idx++;
			}
		}
	for (int v = 0; v < o->nvars; v++) {
		int any = 0;

		for (int t = 0; t < o->nthreads; t++) {
			int b;
			double m = lk_best(o, r, v, t, &b);

			if (!(m > 0))
				continue;
			if (!any)
				fprintf(f, "# %s best B\n", o->vars[v]->name);
			any = 1;
			fprintf(f, "%u %.6g %u\n", o->threads[t], m,
				lk_B(o, o->vars[v], b));
		}
		if (any)
			fprintf(f, "\n\n");
		best_index[v] = any ? idx++ : -1;
	}
	return idx;
}

/* gnuplot script text built piece by piece. */
struct lk_script {
	char buf[65536];
	size_t len;
};

static void lk_sprintf(struct lk_script *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void lk_sprintf(struct lk_script *s, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(s->buf + s->len, sizeof(s->buf) - s->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(s->buf) - s->len)
		bench_die("bpbench locks: plot script too long\n");
	s->len += (size_t)n;
}

/* one colour per variant in the best-B plot (gnuplot's default repeats) */
#define LK_NCOLOURS 10
static const char *const lk_colours[LK_NCOLOURS] = {
	"#000000", "#7f7f7f", "#d62728", "#ff7f0e", "#bcbd22",
	"#8c564b", "#9467bd", "#17becf", "#1f77b4", "#2ca02c",
};

static void lk_axes(struct lk_script *s, const struct lk_opts *o, double ymin,
		    double ymax)
{
	unsigned tmin = o->threads[0], tmax = o->threads[0];

	for (int t = 1; t < o->nthreads; t++) {
		if (o->threads[t] < tmin)
			tmin = o->threads[t];
		if (o->threads[t] > tmax)
			tmax = o->threads[t];
	}
	lk_sprintf(s,
		   "set termoption noenhanced\nset samples 400\n"
		   "set logscale xy\nset grid\nset key bottom left font ',8'\n"
		   "set xrange [%g:%g]\nset yrange [%g:%g]\n"
		   "set xlabel 'worker threads'\n"
		   "set ylabel 'M results/s'\nset xtics (",
		   tmin / 1.4, tmax * 1.4, ymin / 2, ymax * 2);
	for (int t = 0; t < o->nthreads; t++)
		lk_sprintf(s, "%s'%u' %u", t ? ", " : "", o->threads[t],
			   o->threads[t]);
	lk_sprintf(s, ")\n");
	if (o->work_ns)
		lk_sprintf(s, "cap(x) = (x < %d ? x : %d) * %g\n", o->ncpus,
			   o->ncpus, 1e3 / o->work_ns_measured);
}

static int lk_plots(const struct lk_opts *o, const struct lk_results *r)
{
	static int vb_index[LK_MAX_VARIANTS][LK_MAX_BATCHES];
	int best_index[LK_MAX_VARIANTS];
	char dat[4096], png_t[4096], png_b[4096];
	const char *outs[2] = {NULL, NULL};
	double ymin, ymax;
	struct lk_script *s = bench_zalloc(sizeof(*s));
	int cols = o->nvars < 3 ? o->nvars : 3;
	int rows = (o->nvars + cols - 1) / cols, rc = 0;
	FILE *f = lk_open(o->out, o->name, "-plot.dat", dat, sizeof(dat));

	if (!f) {
		free(s);
		return -1;
	}
	lk_write_dat(f, o, r, vb_index, best_index, &ymin, &ymax);
	fclose(f);
	if (o->work_ns) {
		double c = lk_ceiling(o, (unsigned)o->ncpus);

		if (c > ymax)
			ymax = c;
	}
	if (!(ymax > 0)) {
		fprintf(stderr, "bpbench locks: nothing positive to plot\n");
		free(s);
		return -1;
	}
	if (!isfinite(ymin))
		ymin = ymax;
	snprintf(png_t, sizeof(png_t), "%s/%s-threads.png", o->out, o->name);
	snprintf(png_b, sizeof(png_b), "%s/%s-best.png", o->out, o->name);

	/* the write-up's figure: one panel per variant, one line per B */
	lk_sprintf(s, BENCH_PLOT_TERM, 420 * cols, 330 * rows);
	lk_sprintf(s, "set output '%s'\n", png_t);
	lk_axes(s, o, ymin, ymax);
	lk_sprintf(s,
		   "set multiplot layout %d,%d title 'throughput vs worker "
		   "threads, one line per batch size B (%s)'\n",
		   rows, cols,
		   o->work_ns ? "jobs of --work-ns, dashed: compute ceiling"
			      : "trivial jobs");
	for (int v = 0; v < o->nvars; v++) {
		const char *sep = "";

		lk_sprintf(s, "set title '%s'\nplot ", o->vars[v]->name);
		for (int b = 0; b < lk_nb(o, o->vars[v]); b++) {
			if (vb_index[v][b] < 0)
				continue;
			lk_sprintf(s,
				   "%s'%s' index %d using 1:2 with linespoints "
				   "lw 2 title 'B=%u'",
				   sep, dat, vb_index[v][b],
				   lk_B(o, o->vars[v], b));
			sep = ", ";
		}
		if (o->work_ns) {
			lk_sprintf(s,
				   "%scap(x) with lines dt 2 lc 'black' "
				   "title 'ceiling'",
				   sep);
			sep = ", ";
		}
		if (!*sep) /* nothing measured above zero: an empty panel */
			lk_sprintf(s, "%g with lines notitle", ymin / 4);
		lk_sprintf(s, "\n");
	}
	lk_sprintf(s, "unset multiplot\n");
	outs[0] = png_t;
	if (bench_gnuplot("bpbench locks: threads plot", outs, "%s", s->buf))
		rc = -1;

	/* each variant at its best B */
	s->len = 0;
	lk_sprintf(s, BENCH_PLOT_TERM, 900, 620);
	lk_sprintf(s, "set output '%s'\n", png_b);
	lk_axes(s, o, ymin, ymax);
	lk_sprintf(s,
		   "set key outside right\n"
		   "set title 'each variant at its best B (medians)'\nplot ");
	{
		const char *sep = "";

		for (int v = 0; v < o->nvars; v++) {
			if (best_index[v] < 0)
				continue;
			lk_sprintf(s,
				   "%s'%s' index %d using 1:2 with linespoints "
				   "lw 2 lc rgb '%s' pt %d title '%s'",
				   sep, dat, best_index[v],
				   lk_colours[v % LK_NCOLOURS], v + 1,
				   o->vars[v]->name);
			sep = ", ";
		}
		if (o->work_ns) {
			lk_sprintf(s,
				   "%scap(x) with lines dt 2 lc 'black' "
				   "title 'compute ceiling'",
				   sep);
			sep = ", ";
		}
		if (!*sep)
			lk_sprintf(s, "%g with lines notitle", ymin / 4);
	}
	lk_sprintf(s, "\n");
	outs[0] = png_b;
	if (bench_gnuplot("bpbench locks: best-B plot", outs, "%s", s->buf))
		rc = -1;
	free(s);
	return rc;
}

static int lk_write_out(const struct lk_opts *o, const struct lk_results *r)
{
	char path[4096];
	FILE *f;

	if (bench_mkdir_p(o->out))
		return -1;
	f = lk_open(o->out, o->name, ".csv", path, sizeof(path));
	if (!f)
		return -1;
	lk_write_csv(f, o, r);
	if (fclose(f))
		return -1;
	f = lk_open(o->out, o->name, ".json", path, sizeof(path));
	if (!f)
		return -1;
	lk_write_json(f, o, r);
	if (fclose(f))
		return -1;
	return lk_plots(o, r);
}

/* ---- options ------------------------------------------------------------ */

static void lk_usage(FILE *f)
{
	fprintf(f,
		"usage: bpbench locks [options]\n"
		"N workers run `while (job = next_job()) emit(process(job))`, "
		"one consumer\ntakes the results and issues fresh jobs (closed "
		"loop); the variants differ\nin how jobs and results move. "
		"Interleaved runs, medians, every run verified.\n"
		"  --threads LIST   worker threads (default 1,2,4,8,16,32; "
		"--quick: 1,4,16)\n"
		"  --batches LIST   batch sizes B, 1..%u (default "
		"1,4,16,32,128; --quick: 1,32,128)\n"
		"  --variants LIST  variants to run (default: all of them; "
		"mutex does not batch\n"
		"                   and runs at B = 1 only):\n",
		LK_MAX_BATCH);
	for (int i = 0; lk_variants[i]; i++)
		fprintf(f, "                     %-19s %s\n",
			lk_variants[i]->name, lk_variants[i]->summary);
	fprintf(f,
		"  --work-ns N      CPU work per job in ns, 0 = trivial "
		"(default 0)\n"
		"  --runs N         runs per point (default 5; --quick: 3)\n"
		"  --ms N           measuring window per run, ms (default 100; "
		"--quick: 15)\n"
		"  --pool N         jobs circulating (default: max(4096, 8 x "
		"threads x B)\n"
		"                   per point; at least the largest B)\n"
		"  --cpus LIST      CPUs to pin on, e.g. \"0,1\" or \"0-3\": "
		"the "
		"consumer on the\n"
		"                   first, workers round-robin after it "
		"(default: every CPU\n"
		"                   this process may use)\n"
		"  --seed N         seed of the run-order shuffle (default 1)\n"
		"  --quick          the short sweep above, well under 30 s at "
		"--work-ns 0 on 2 CPUs\n"
		"  --csv            CSV on stdout instead of the tables: "
		"variant,threads,B,run,Mitems_per_s\n"
		"  --out DIR        also write DIR/NAME.csv, NAME.json, "
		"NAME-threads.png,\n"
		"                   NAME-best.png and NAME-plot.dat (needs "
		"gnuplot)\n"
		"  --name NAME      file name stem for --out (default locks)\n"
		"  --help           this text\n"
		"Progress goes to stderr. Exit status: 0 ok, 1 a run failed "
		"its "
		"verification\n(or --out could not be written), 2 bad "
		"usage.\n");
}

static int lk_parse(int argc, char **argv, struct lk_opts *o)
{
	static const struct option longopts[] = {
		{"threads", required_argument, NULL, 't'},
		{"batches", required_argument, NULL, 'b'},
		{"variants", required_argument, NULL, 'v'},
		{"work-ns", required_argument, NULL, 'w'},
		{"runs", required_argument, NULL, 'r'},
		{"ms", required_argument, NULL, 'm'},
		{"pool", required_argument, NULL, 'p'},
		{"cpus", required_argument, NULL, 'c'},
		{"seed", required_argument, NULL, 's'},
		{"quick", no_argument, NULL, 'Q'},
		{"csv", no_argument, NULL, 'C'},
		{"out", required_argument, NULL, 'o'},
		{"name", required_argument, NULL, 'n'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int runs_set = 0, ms_set = 0, threads_set = 0, batches_set = 0, opt;
	static char var_names[4096];
	const char *names[LK_MAX_VARIANTS];
	unsigned maxb = 0;

	memset(o, 0, sizeof(*o));
	o->runs = 5;
	o->ms = 100;
	o->seed = 1;
	o->name = "locks";
	for (int i = 0; lk_variants[i]; i++)
		o->vars[o->nvars++] = lk_variants[i];

	opterr = 0; /* our own message, then the usage */
	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		unsigned v;

		switch (opt) {
		case 't':
			o->nthreads = bench_parse_uints(optarg, o->threads,
							LK_MAX_TLIST, 1,
							LK_MAX_THREADS);
			if (o->nthreads < 0)
				goto bad_value;
			threads_set = 1;
			break;
		case 'b':
			o->nbatches = bench_parse_uints(optarg, o->batches,
							LK_MAX_BATCHES, 1,
							LK_MAX_BATCH);
			if (o->nbatches < 0)
				goto bad_value;
			batches_set = 1;
			break;
		case 'v':
			if (strlen(optarg) >= sizeof(var_names))
				goto bad_value;
			strcpy(var_names, optarg);
			o->nvars = bench_parse_names(var_names, names,
						     LK_MAX_VARIANTS);
			if (o->nvars < 0)
				goto bad_value;
			for (int i = 0; i < o->nvars; i++) {
				o->vars[i] = lk_variant_find(names[i]);
				if (!o->vars[i]) {
					fprintf(stderr,
						BENCH_CMD ": unknown variant "
							  "'%s'\n",
						names[i]);
					goto usage;
				}
				for (int j = 0; j < i; j++)
					if (o->vars[j] == o->vars[i]) {
						fprintf(stderr,
							BENCH_CMD ": variant "
								  "'%s' given "
								  "twice\n",
							names[i]);
						goto usage;
					}
			}
			break;
		case 'w':
			if (bench_parse_uint(optarg, &o->work_ns, 0,
					     LK_MAX_WORK_NS))
				goto bad_value;
			break;
		case 'r':
			if (bench_parse_uint(optarg, &o->runs, 1, LK_MAX_RUNS))
				goto bad_value;
			runs_set = 1;
			break;
		case 'm':
			if (bench_parse_uint(optarg, &o->ms, 1, 600000))
				goto bad_value;
			ms_set = 1;
			break;
		case 'p':
			if (bench_parse_uint(optarg, &o->pool, 1, LK_MAX_POOL))
				goto bad_value;
			break;
		case 'c':
			o->ncpus = bench_cpus_parse(optarg, o->cpus,
						    BENCH_MAX_CPUS);
			/* the ceiling counts CPUs: each one once */
			for (int i = 1; o->ncpus > 0 && i < o->ncpus; i++)
				for (int j = 0; j < i; j++)
					if (o->cpus[j] == o->cpus[i])
						o->ncpus = -1;
			if (o->ncpus < 0) {
				fprintf(stderr,
					BENCH_CMD ": bad --cpus '%s' (syntax, "
						  "a CPU twice, or one this "
						  "process may not use)\n",
					optarg);
				goto usage;
			}
			break;
		case 's':
			if (bench_parse_uint(optarg, &v, 0, UINT32_MAX))
				goto bad_value;
			o->seed = v;
			break;
		case 'Q':
			o->quick = 1;
			break;
		case 'C':
			o->csv = 1;
			break;
		case 'o':
			if (!*optarg)
				goto bad_value;
			o->out = optarg;
			break;
		case 'n':
			if (!*optarg || strchr(optarg, '/') ||
			    strchr(optarg, '\'') || strlen(optarg) > 200)
				goto bad_value;
			o->name = optarg;
			break;
		case 'h':
			lk_usage(stdout);
			exit(0);
		default:
			bench_bad_option(BENCH_CMD, longopts, optopt,
					 argv[optind - 1]);
			goto usage;
		}
		continue;
	bad_value:
		bench_bad_value(BENCH_CMD, longopts, opt, optarg);
		goto usage;
	}
	if (optind < argc) {
		fprintf(stderr, BENCH_CMD ": unexpected argument '%s'\n",
			argv[optind]);
		goto usage;
	}
	if (o->out && strchr(o->out, '\'')) {
		/* the path goes into gnuplot's quoted strings */
		fprintf(stderr, BENCH_CMD ": --out may not contain a quote\n");
		goto usage;
	}
	if (!threads_set)
		o->nthreads = bench_parse_uints(
			o->quick ? "1,4,16" : "1,2,4,8,16,32", o->threads,
			LK_MAX_TLIST, 1, LK_MAX_THREADS);
	if (!batches_set)
		o->nbatches = bench_parse_uints(
			o->quick ? "1,32,128" : "1,4,16,32,128", o->batches,
			LK_MAX_BATCHES, 1, LK_MAX_BATCH);
	for (int b = 0; b < o->nbatches; b++) {
		if (o->batches[b] > maxb)
			maxb = o->batches[b];
		for (int j = 0; j < b; j++)
			if (o->batches[j] == o->batches[b]) {
				fprintf(stderr,
					BENCH_CMD ": B=%u given twice\n",
					o->batches[b]);
				goto usage;
			}
	}
	for (int t = 0; t < o->nthreads; t++)
		for (int j = 0; j < t; j++)
			if (o->threads[j] == o->threads[t]) {
				fprintf(stderr,
					BENCH_CMD ": %u threads given twice\n",
					o->threads[t]);
				goto usage;
			}
	if (o->pool && o->pool < maxb) {
		/* the pipeline's producer gathers a whole batch of jobs */
		fprintf(stderr, BENCH_CMD ": --pool %u is less than B=%u\n",
			o->pool, maxb);
		goto usage;
	}
	if (o->quick) {
		if (!runs_set)
			o->runs = 3;
		if (!ms_set)
			o->ms = 15;
	}
	if (o->ncpus == 0) {
		o->ncpus = bench_cpus_available(o->cpus, BENCH_MAX_CPUS);
		if (o->ncpus <= 0)
			bench_die(BENCH_CMD ": sched_getaffinity failed\n");
	}
	return 0;
usage:
	lk_usage(stderr);
	return -1;
}

int bench_locks_main(int argc, char **argv)
{
	struct lk_opts o;
	struct lk_results res;
	size_t ncell;
	int64_t t0;
	int rc = 0;

	if (lk_parse(argc, argv, &o))
		return BENCH_EXIT_USAGE;
	if (o.out && !bench_gnuplot_available()) {
		fprintf(stderr,
			BENCH_CMD ": --out needs gnuplot for its plots, "
				  "and it is not on PATH (apt-get install "
				  "gnuplot-nox)\n");
		return 1;
	}

	t0 = bench_now_ns();
	lk_calibrate(&o);
	fprintf(stderr,
		BENCH_CMD ": %s, %.2f ns per job measured on one thread\n",
		o.work_ns ? "calibrated" : "trivial jobs", o.work_ns_measured);

	res.runs = (int)o.runs;
	res.nthreads = o.nthreads;
	res.nbatches = o.nbatches;
	res.nvars = o.nvars;
	ncell = (size_t)o.runs * (size_t)o.nvars * (size_t)o.nthreads *
		(size_t)o.nbatches;
	res.mps = bench_zalloc(sizeof(double) * ncell);
	res.cpus = bench_zalloc(sizeof(double) * ncell);
	res.jobpct = bench_zalloc(sizeof(double) * ncell);
	for (size_t i = 0; i < ncell; i++)
		res.mps[i] = res.cpus[i] = res.jobpct[i] = NAN;

	lk_sweep(&o, &res);
	fprintf(stderr,
		BENCH_CMD ": done in %.1f s, every run verified (%" PRIu64
			  " results checked)\n",
		(double)(bench_now_ns() - t0) / 1e9, lk_results_verified);

	if (o.csv)
		lk_write_csv(stdout, &o, &res);
	else
		lk_print_table(&o, &res);
	fflush(stdout);
	if (o.out && lk_write_out(&o, &res))
		rc = 1;
	free(res.mps);
	free(res.cpus);
	free(res.jobpct);
	free(lk_prefix);
	return rc;
}
