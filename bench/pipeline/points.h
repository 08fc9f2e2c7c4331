/* SPDX-License-Identifier: MIT */
/*
 * points.h - the points `bpbench pipeline` measures and the results it
 * keeps: [run][point] for the throughput sweep, [run][wait] for the latency
 * phase. NaN: not measured. Medians are over runs; ratios are medians of
 * per-run ratios, whose two sides come from the same run index.
 */
#ifndef BPBENCH_PIPELINE_POINTS_H
#define BPBENCH_PIPELINE_POINTS_H

#include "pipeline/harness.h"

/*
 * PB_ALONE: the benchmark's own per-job work in one thread, no pipeline;
 * PB_PLAIN: the same jobs through the plain hand-written design (plain.c),
 * the twin of every unordered PB_PIPE point; PB_LANES: the pipeline with
 * an ingress lane per producer (pb_lanes_of), the twin of every unordered
 * PB_PIPE point at the headline's wait and B <= PB_LANES_MAX_B, where one
 * contended claim per job is what lanes remove
 */
enum pb_kind { PB_PIPE, PB_WORK, PB_RING, PB_ALONE, PB_PLAIN, PB_LANES };
#define PB_LANES_MAX_B 8

/* ingress_lanes of the PB_LANES points: the producers, to a power of two */
unsigned pb_lanes_of(unsigned producers);

struct pb_point {
	enum pb_kind kind;
	unsigned W, B;
	int wait;
	bool ordered;
};

struct pb_results {
	int runs, npoints;
	struct pb_point pt[PB_MAX_POINTS];
	double *mj, *p50, *p99; /* [run][point] */
	double *cpu, *pcpu; /* [run][point]: CPU ns per job, all / producers */
	/* latency phase: [run][wait] */
	double *lat_p50, *lat_p99, *lat_bp50, *lat_bp99;
	double *same_p50, *same_p99; /* producer waits as the pipeline */
	double *wake_p50, *wake_p99, *wake_bp50, *wake_bp99;
	double *idle;
	double *handoff;	       /* [run] */
	double *floor_p50, *floor_p99; /* [run]: bare futex wake-up floor */
	uint64_t iters;
	double iters_per_ns;
};

int pb_find(const struct pb_results *r, enum pb_kind kind, unsigned W,
	    unsigned B, int wait, bool ordered);
void pb_add(struct pb_results *r, enum pb_kind kind, unsigned W, unsigned B,
	    int wait, bool ordered);
/* The points the options ask for, plus the headline points. */
void pb_build_points(const struct pb_opts *o, struct pb_results *r);

double *pb_cell(const struct pb_results *r, double *a, int run, int i);
double *pb_wcell(double *a, int run, int wait);
/* Median over runs of a[run][i] (stride: points, or waits); lo, hi: range */
double pb_med(const double *a, int runs, int stride, int i, double *lo,
	      double *hi);
/* Median over runs at point i (NaN for i < 0). */
double pb_med_pt(const struct pb_results *r, const double *a, int i, double *lo,
		 double *hi);
/* Median over runs of mj[run][i] / mj[run][j]. */
double pb_med_ratio(const struct pb_results *r, int i, int j);
/* The same of another [run][point] array a (r->cpu) */
double pb_med_ratio_of(const struct pb_results *r, double *a, int i, int j);
/* n doubles, all NaN */
double *pb_nan_array(size_t n);

#endif /* BPBENCH_PIPELINE_POINTS_H */
