/* SPDX-License-Identifier: MIT */
/*
 * experiments.h - the measurements `bpbench pipeline` interleaves, one per
 * file, and its printers. pipeline.c is the subcommand: options, the
 * throughput sweep and the order of everything. In this folder:
 *
 *   latency.c    low-load and wake-up latency, and the interleaved
 *                latency phase
 *   idle.c       idle CPU of a pipeline with nothing to do
 *   ring_ref.c   the ring reference (bp_ring 1x1, burst B)
 *   plain.c      the plain variant: the same jobs through hand-written
 *                rings and waits, no library (plain_rings.h,
 *                plain_wait.h)
 *   handoff.c    the cross-core hand-off floor
 *   wakefloor.c  the wake-up floor without the library
 *   report.c     the tables and the CSV
 *   harness.c    what they share (harness.h), points.c the points
 */
#ifndef BPBENCH_PIPELINE_EXPERIMENTS_H
#define BPBENCH_PIPELINE_EXPERIMENTS_H

#include "pipeline/points.h"

/*
 * One producer, one worker, one job at a time: gap 0 is the low-load
 * latency, a gap of >= 5 ms the wake-up latency after idle.
 */
struct pb_lat_result pb_latency_once(const struct pb_opts *o,
				     struct pb_producer *lp, int wait,
				     int prod_wait, int64_t gap_ns,
				     unsigned max_n, unsigned ms);
/* Every latency task (and idle, hand-off, wake floor) per run, shuffled. */
void pb_latency_sweep(const struct pb_opts *o, struct pb_results *r,
		      struct pb_producer *lp, struct pb_producer *prod);
/* % of one core that an idle pipeline uses over ms */
double pb_idle_once(const struct pb_opts *o, struct pb_producer *prod, int wait,
		    unsigned ms);
/* The plain variant (P producers, W workers, B, wait): M jobs/s and CPU
 * per job (no p50/p99) */
struct pb_result pb_plain_once(const struct pb_opts *o,
			       struct pb_producer *prod, unsigned P, unsigned W,
			       unsigned B, int wait, unsigned ms);
/* M items/s through bp_ring MPMC 1x1, burst B, over ms */
double pb_ring_once(const struct pb_opts *o, unsigned B, unsigned ms);
/* ns one way, a cache line ping-ponged `rounds` times */
double pb_handoff_once(const struct pb_opts *o, unsigned rounds);
/* two futex wake-ups in a row after the wake-up gap; v: n samples */
struct pb_lat_result pb_wakefloor_once(const struct pb_opts *o, int64_t *v,
				       unsigned n);

/* What the printers get (bench_emit's ctx). */
struct pb_report {
	const struct pb_opts *o;
	const struct pb_results *r;
	const char *load0, *load1; /* load averages at start and end */
};

void pb_print_table(FILE *f, const void *ctx);
void pb_print_csv(FILE *f, const void *ctx);

#endif /* BPBENCH_PIPELINE_EXPERIMENTS_H */
