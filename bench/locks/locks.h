/* SPDX-License-Identifier: MIT */
/*
 * locks.h - the variants `bpbench locks` compares: each one a real job
 * source (the workers' next_job()) and a real result hand-off (their emit())
 * to one consumer thread.
 *
 * The experiment's threads run the same loops for every variant (see
 * locks/locks.c); a variant only moves values:
 *
 *   worker:   take_jobs -> compute -> emit          (N threads, tid 0..N-1)
 *   consumer: take_results -> count -> give_jobs     (one thread)
 *
 * Jobs and results are pointer-sized values with bit 0 clear, so that no
 * variant pays for cache misses on job objects that another avoids.
 *
 * Waiting: with LK_BLOCKING_JOBS (LK_BLOCKING_RESULTS), take_jobs
 * (take_results) sleeps when asked to wait (wait != 0) and nothing is there,
 * until a value arrives or wake_all() was called. Otherwise it returns 0 at
 * once and the caller applies the common retry policy (bench_backoff_wait).
 *
 * Every call returns the count moved (take: 0 .. max; emit / give: 1 .. n,
 * or 0 for "no room now, retry") or a negative errno, which is fatal.
 *
 * A variant with a `run` op (the pipeline, plain-lockfree) has threads of
 * its own and runs the whole closed loop itself; it fills the same outcome,
 * which the experiment verifies the same way.
 */
#ifndef BPBENCH_LOCKS_H
#define BPBENCH_LOCKS_H

#include <stdatomic.h>
#include <stdint.h>

#include "lab/clock.h"

/* the batch size B applies: results (and, lock-free, jobs) move B at a time */
#define LK_BATCHED 0x1u
/* take_jobs / take_results sleep when asked to wait */
#define LK_BLOCKING_JOBS    0x2u
#define LK_BLOCKING_RESULTS 0x4u
/* one of batchpipe's own: the headline compares the best of these */
#define LK_BATCHPIPE 0x8u

struct lk_config {
	unsigned threads;  /* workers */
	unsigned batch;	   /* B */
	unsigned capacity; /* every value fits at once in either queue */
	/* set when the run's measuring time is over (read-only here; a `run`
	 * variant keeps its own) */
	const atomic_int *stop;
};

/* What a `run` variant needs besides its config. */
struct lk_run_params {
	struct lk_config c;
	unsigned pool;	 /* jobs circulating */
	uint64_t iters;	 /* work per job (lk_work) */
	const int *cpus; /* pin round-robin: consumer side first, on */
	int ncpus;	 /* cpus[0]; worker i on cpus[(i + 1) % ncpus] */
	unsigned ms;	 /* measuring window */
};

/*
 * What a run produced. The experiment checks that issued == received +
 * inflight and that checksum + inflight_sum == the sum of lk_result(s) over
 * every issued sequence number s.
 */
struct lk_outcome {
	uint64_t issued;   /* jobs handed out: sequence numbers 0 .. issued-1 */
	uint64_t received; /* results the consumer took, in all */
	uint64_t checksum; /* sum of those results */
	uint64_t inflight; /* values found after the run, jobs or results */
	uint64_t inflight_sum; /* the results those stand for */
	uint64_t window_count; /* results received inside the window */
	int64_t window_ns;     /* its length */
	/*
	 * CPU time the whole process used while the main thread slept through
	 * the window, and that sleep's wall time: how many CPUs the run got
	 * (on a shared machine, fewer than it asked for).
	 */
	int64_t cpu_ns, cpu_wall_ns;
};

struct lk_variant {
	const char *name;
	const char *summary; /* one line for --help */
	unsigned flags;

	void *(*create)(const struct lk_config *c);
	void (*destroy)(void *v);
	/* worker tid: up to max jobs */
	int (*take_jobs)(void *v, unsigned tid, void **jobs, unsigned max,
			 int wait);
	/* worker tid: results in one hand-off (its best public means) */
	int (*emit)(void *v, unsigned tid, void *const *results, unsigned n);
	/* the consumer */
	int (*take_results)(void *v, void **results, unsigned max, int wait);
	int (*give_jobs)(void *v, void *const *jobs, unsigned n);
	/* LK_BLOCKING: wake every sleeper for good (the run is over) */
	void (*wake_all)(void *v);

	/* instead of all of the above */
	void (*run)(const struct lk_run_params *p, struct lk_outcome *out);
};

/* CPU time of every thread of this process, ns. */
static inline int64_t lk_process_cpu_ns(void)
{
	return bench_process_cpu_ns();
}

/* The variants (lk_*.c), in display order; NULL-terminated (lk_registry.c). */
extern const struct lk_variant lk_mutex, lk_mutex_batched;
extern const struct lk_variant lk_tas, lk_pthread_spin, lk_ck_ticket, lk_ck_mcs;
extern const struct lk_variant lk_ck_ring, lk_urcu_wfcq, lk_batchpipe_ring;
extern const struct lk_variant lk_plain_lockfree, lk_batchpipe_pipeline;
extern const struct lk_variant *const lk_variants[];

const struct lk_variant *lk_variant_find(const char *name);

#endif /* BPBENCH_LOCKS_H */
