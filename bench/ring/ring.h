/* SPDX-License-Identifier: MIT */
/*
 * ring.h - what the parts of `bpbench ring` share: the options, one run's
 * result, the results grid and the calls between the parts. In this folder:
 *
 *   ring.c    the subcommand: the design of the experiment (its opening
 *             comment), options, the interleaved sweep, main
 *   run.c     one timed threaded run: producers, consumers, latency
 *             samples, the verification after it
 *   single.c  the single-thread cost per item
 *   report.c  the table, CSV and JSON
 *
 * The queues compared are in ../queues/.
 */
#ifndef BPBENCH_RING_H
#define BPBENCH_RING_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lab/bpbench.h"

#include "queues/queues.h"

#define RING_MAX_POINTS	 16
#define RING_MAX_BATCHES 16
#define RING_MAX_QUEUES	 16
#define RING_MAX_RUNS	 1000
/* the producer id lives in 8 bits of each item */
#define RING_MAX_SIDE 255
/* latency: every 2^RING_SAMPLE_SHIFT-th sequence number is stamped */
#define RING_SAMPLE_SHIFT 6
#define RING_SAMPLE_MASK  ((UINT64_C(1) << RING_SAMPLE_SHIFT) - 1)
/* a stamp: ns since the run's base << 16 | the lap of its slot, 16 bits */
#define RING_TAG_BITS 16
#define RING_TAG_MASK ((UINT64_C(1) << RING_TAG_BITS) - 1)

struct ring_opts {
	struct bench_args a; /* runs, ms, seed, cpus, output */
	unsigned capacity, single_ms;
	unsigned points[RING_MAX_POINTS][2];
	int npoints;
	unsigned batches[RING_MAX_BATCHES];
	int nbatches;
	const struct bench_queue_ops *queues[RING_MAX_QUEUES];
	int nqueues;
	int single;
};

/* Bit 0 clear (bp_ring's rule), producer id in bits 1-8, sequence above. */
static inline void *ring_item(uint64_t seq, unsigned pid)
{
	return (void *)(uintptr_t)(((seq << 8) | pid) << 1);
}

/* What one threaded run measured. */
struct ring_result {
	double mitems;	       /* millions of items per second */
	double p50_ns, p99_ns; /* latency of the sampled items; NaN: none */
};

/* One run of one queue at one point (run.c); dies on a failed check. */
struct ring_result ring_run_once(const struct ring_opts *o,
				 const struct bench_queue_ops *ops, unsigned P,
				 unsigned C, unsigned B, unsigned ms);
/* Items checked by every ring_run_once so far (reported at the end). */
extern uint64_t ring_items_verified;

/* Nanoseconds per item, one enqueue plus one dequeue, over about `ms`
 * (single.c). */
double ring_single_once(const struct ring_opts *o,
			const struct bench_queue_ops *ops, unsigned B,
			unsigned ms);

struct ring_results {
	int runs, npoints, nbatches, nqueues;
	double *mitems;	   /* [run][point][batch][queue], NaN: not run */
	double *p50, *p99; /* the same cells: latency, ns; NaN: no samples */
	double *single;	   /* [run][batch][queue] ns per item */
};

static inline size_t ring_index(const struct ring_results *r, int run, int pt,
				int b, int q)
{
	return (size_t)(((run * r->npoints + pt) * r->nbatches + b) *
				r->nqueues +
			q);
}

static inline double *ring_cell(const struct ring_results *r, int run, int pt,
				int b, int q)
{
	return &r->mitems[ring_index(r, run, pt, b, q)];
}

static inline double *ring_single_cell(const struct ring_results *r, int run,
				       int b, int q)
{
	return &r->single[(run * r->nbatches + b) * r->nqueues + q];
}

/* What the printers get (bench_emit's ctx); report.c. */
struct ring_report {
	const struct ring_opts *o;
	const struct ring_results *r;
};

void ring_print_table(FILE *f, const void *ctx);
void ring_print_csv(FILE *f, const void *ctx);
void ring_print_json(FILE *f, const void *ctx);

#endif /* BPBENCH_RING_H */
