/* SPDX-License-Identifier: MIT */
/*
 * lk_experiment.h - what the parts of `bpbench locks` share: its options,
 * its results, and the entry points of its parts:
 *
 *   locks/locks.c          the subcommand: options, the interleaved sweep
 *   locks/lk_calibrate.c the work per job
 *   locks/lk_ceiling.c   the compute ceiling, measured between the runs
 *   locks/lk_run.c       one verified run: threads, closed loop, the check
 *   locks/lk_report.c    medians, the tables, the headline, CSV and JSON
 *   locks/lk_plot.c      the plots of --out
 *
 * The variants themselves are in locks.h.
 */
#ifndef BPBENCH_LK_EXPERIMENT_H
#define BPBENCH_LK_EXPERIMENT_H

#include <stdint.h>
#include <stdio.h>

#include "lab/bpbench.h"
#include "locks/locks.h"

#define LK_MAX_THREADS	64
#define LK_MAX_TLIST	16
#define LK_MAX_BATCHES	16
#define LK_MAX_BATCH	4096 /* bp_pipeline's limit */
#define LK_MAX_VARIANTS 16
#define LK_MAX_RUNS	1000
#define LK_MAX_WORK_NS	100000
#define LK_MAX_POOL	(1u << 22)

struct lk_opts {
	struct bench_args a; /* runs, ms, seed, cpus, csv, out, name */
	unsigned pool, work_ns;
	unsigned threads[LK_MAX_TLIST];
	int nthreads;
	unsigned batches[LK_MAX_BATCHES];
	int nbatches;
	const struct lk_variant *vars[LK_MAX_VARIANTS];
	int nvars;
	/* calibration */
	uint64_t iters;
	double work_ns_measured; /* per job, one thread, no hand-offs */
	/*
	 * The compute ceiling with u CPUs computing (lk_ceiling.c), M results
	 * per second: the median of its runs, NaN where not measured (trivial
	 * jobs, or no thread count gave that u).
	 */
	double ceil_mps[LK_MAX_THREADS + 1];
};

struct lk_results {
	int runs, nthreads, nbatches, nvars;
	/* [run][var][threads][batch], NaN: not run */
	double *mps;
	double *cpus;	/* CPUs the process got in the window */
	double *jobpct; /* % of that CPU time spent in the jobs' own work */
	/* the compute-ceiling run beside each run (lk_ceiling.c), M/s */
	double *ceil;
};

/* What the printers get (bench_emit's ctx). */
struct lk_report {
	const struct lk_opts *o;
	const struct lk_results *r;
};

static inline int lk_batched(const struct lk_variant *v)
{
	return !!(v->flags & LK_BATCHED);
}

/* B indices a variant runs at: every B, or just the first (as B = 1). */
static inline int lk_nb(const struct lk_opts *o, const struct lk_variant *v)
{
	return lk_batched(v) ? o->nbatches : 1;
}

static inline unsigned lk_B(const struct lk_opts *o, const struct lk_variant *v,
			    int b)
{
	return lk_batched(v) ? o->batches[b] : 1;
}

static inline size_t lk_index(const struct lk_results *r, int run, int v, int t,
			      int b)
{
	return (((size_t)run * (size_t)r->nvars + (size_t)v) *
			(size_t)r->nthreads +
		(size_t)t) *
		       (size_t)r->nbatches +
	       (size_t)b;
}

/* lk_calibrate.c: set o->iters for --work-ns, measure o->work_ns_measured */
void lk_calibrate(struct lk_opts *o);
/* CPUs that `threads` workers can keep busy: min(threads, usable CPUs). */
unsigned lk_ceiling_cpus(const struct lk_opts *o, unsigned threads);
/* The most CPUs a ceiling was measured on (every usable CPU unless no
 * thread count reached that many); 0 for trivial jobs. */
unsigned lk_ceiling_top(const struct lk_opts *o);
/* The compute ceiling at `threads` workers, M results/s; NaN for trivial. */
double lk_ceiling(const struct lk_opts *o, unsigned threads);
/* lk_ceiling.c: one verified compute-only run on u CPUs, M results/s. */
double lk_ceiling_run(const struct lk_opts *o, unsigned u);

/*
 * lk_run.c: one run of var at (threads, B) with `pool` jobs circulating,
 * verified (bench_die on a failure): its outcome in *out.
 */
void lk_run_verified(const struct lk_opts *o, const struct lk_variant *var,
		     unsigned threads, unsigned B, unsigned pool,
		     struct lk_outcome *out);
/* Sum of lk_result(s, iters) over s < n (cached: one iters per sweep). */
uint64_t lk_expected_sum(uint64_t n, uint64_t iters);
/* Results checked by every run so far. */
uint64_t lk_results_verified(void);
/* Free what the checks kept between runs. */
void lk_run_cleanup(void);

/* lk_report.c */
double lk_median(const struct lk_results *r, int v, int t, int b, double *min,
		 double *max);
/* 100 x the median of (v, t, b) / the ceiling at thread index t; NaN: none. */
double lk_pct_ceiling(const struct lk_opts *o, const struct lk_results *r,
		      int v, int t, int b);
/* A variant's best median at one thread count, and the B index of it. */
double lk_best(const struct lk_opts *o, const struct lk_results *r, int v,
	       int t, int *best_b);
void lk_print_csv(FILE *f, const void *report);
void lk_print_table(FILE *f, const void *report);
/* --out: NAME.json and the plots next to NAME.csv; 0 or -1 (said why) */
int lk_write_out(const struct lk_report *rep);
/* Open DIR/NAMEsuffix for writing (its path into path), or say why not. */
FILE *lk_open(const struct lk_opts *o, const char *suffix, char *path,
	      size_t len);

/* lk_plot.c: NAME-plot.dat, NAME-threads.png, NAME-best.png */
int lk_plots(const struct lk_opts *o, const struct lk_results *r);

#endif /* BPBENCH_LK_EXPERIMENT_H */
