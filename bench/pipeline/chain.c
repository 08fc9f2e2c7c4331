/* SPDX-License-Identifier: MIT */
/*
 * chain.c - `bpbench pipeline --stages N`: a chain of N stages against one
 * stage doing the same total work, and a serial stage against a
 * mutex-protected section.
 *
 * Per (work, W, B), interleaved in random order in every run:
 *
 *   one-stage   one stage, W workers, all of each job's work
 *   chain-N     N stages, W workers each, the work split evenly (each
 *               stage continues the LCG where the previous one stopped,
 *               so the result the sink checks is the same)
 *
 * and per (W, B), with the work's last SERIAL_SHARE (a quarter) needing
 * the jobs one at a time:
 *
 *   mutex       one stage, W workers: the first part, then the last one
 *               inside a pthread mutex, one lock per batch
 *   serial      two stages: W workers on the first part, then a serial
 *               stage (BP_STAGE_SERIAL, one worker, submission order)
 *
 * Every run is verified as every other pipeline run (pb_verify: counts,
 * sums, each job's result). Reported: M jobs/s, CPU per job (the process's
 * CPU time over the jobs, so threads that spin show), ratios as medians of
 * per-run ratios with their range, and the extra time per job of a stage.
 * The instructions of an extra stage: scripts/instructions.py --stages N.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab/clock.h"
#include "lab/rand.h"
#include "lab/stats.h"
#include "pipeline/chain.h"

#define SERIAL_SHARE 4 /* the serial part: 1 / SERIAL_SHARE of the work */
#define MAXV	     512

enum variant { V_ONE, V_CHAIN, V_MUTEX, V_SERIAL, NV };

struct cpoint {
	enum variant v;
	unsigned W, B;
	uint64_t iters; /* 0: trivial */
	double mj[PB_MAX_RUNS], cpu[PB_MAX_RUNS];
};

static void run_point(const struct pb_opts *o, struct pb_producer *prod,
		      struct cpoint *c, int run)
{
	unsigned stages = c->v == V_CHAIN ? o->stages : 1;
	enum pb_serial serial = c->v == V_MUTEX	   ? PB_SERIAL_MUTEX
				: c->v == V_SERIAL ? PB_SERIAL_STAGE
						   : PB_SERIAL_NONE;
	double cpu0 = (double)bench_process_cpu_ns();
	struct pb_result r = pb_run_shaped(
		o, prod, o->producers, c->W, c->B, PB_HEAD_WAIT, false,
		c->iters, o->a.ms, stages, serial, c->iters / SERIAL_SHARE);
	double cpu = (double)bench_process_cpu_ns() - cpu0;

	c->mj[run] = r.mjobs;
	/* jobs: the rate over the producing time, near enough for CPU/job */
	c->cpu[run] = cpu / (r.mjobs * 1e3 * o->a.ms);
}

static int find(const struct cpoint *pt, int n, enum variant v, unsigned W,
		unsigned B, uint64_t iters)
{
	for (int i = 0; i < n; i++)
		if (pt[i].v == v && pt[i].W == W && pt[i].B == B &&
		    pt[i].iters == iters)
			return i;
	return -1;
}

/* Median (and range) of the per-run ratios a / b. */
static double ratio(const struct cpoint *a, const struct cpoint *b, int runs,
		    double *lo, double *hi)
{
	double v[PB_MAX_RUNS];

	for (int r = 0; r < runs; r++)
		v[r] = a->mj[r] / b->mj[r];
	return bench_median_range(v, runs, lo, hi);
}

static double med(const double *x, int runs)
{
	double v[PB_MAX_RUNS];

	memcpy(v, x, sizeof(*v) * (size_t)runs);
	return bench_median(v, runs);
}

int pb_chain_main(const struct pb_opts *o, struct pb_producer *prod,
		  uint64_t iters)
{
	static struct cpoint pt[MAXV];
	int n = 0, runs = (int)o->a.runs, order[MAXV];
	uint64_t works[2] = {0, iters}, rng = o->a.seed;
	double head = NAN, head_lo = NAN, head_hi = NAN, ser = NAN;

	for (int w = 0; w < 2; w++) {
		if (w == 1 && !iters)
			break;
		for (int i = 0; i < o->nworkers; i++)
			for (int b = 0; b < o->nbatches && n + 4 <= MAXV; b++) {
				for (enum variant v = V_ONE; v < NV; v++) {
					if (v >= V_MUTEX && !works[w])
						continue; /* nothing serial */
					pt[n++] = (struct cpoint){
						.v = v,
						.W = o->workers[i],
						.B = o->batches[b],
						.iters = works[w]};
				}
			}
	}
	/* warm-up, not recorded */
	if (o->warmup)
		pb_run_shaped(o, prod, o->producers, PB_HEAD_W, PB_HEAD_B,
			      PB_HEAD_WAIT, false, 0, o->a.quick ? 10 : 50,
			      o->stages, PB_SERIAL_NONE, 0);
	for (int r = 0; r < runs; r++) {
		fprintf(stderr, "bpbench pipeline --stages %u: run %d/%d ",
			o->stages, r + 1, runs);
		bench_order(order, n, &rng);
		for (int k = 0; k < n; k++) {
			run_point(o, prod, &pt[order[k]], r);
			if (k % 8 == 7)
				fputc('.', stderr);
		}
		fputc('\n', stderr);
	}

	printf("bpbench pipeline --stages %u: %u producers, %s waits, "
	       "unordered; a job's work %" PRIu64 " LCG steps "
	       "(--work-ns %u) or trivial; medians of %d runs\n\n",
	       o->stages, o->producers, pb_waits[PB_HEAD_WAIT].name, iters,
	       o->work_ns, runs);
	printf("%-8s %3s %4s %11s %11s %9s %9s %17s %10s\n", "work", "W", "B",
	       "one M/s", "chain M/s", "one CPU", "chain CPU",
	       "chain/one [range]", "extra ns");
	for (int i = 0; i < n; i++) {
		int j;
		double lo, hi, rr, m1, m2;

		if (pt[i].v != V_ONE ||
		    (j = find(pt, n, V_CHAIN, pt[i].W, pt[i].B, pt[i].iters)) <
			    0)
			continue;
		rr = ratio(&pt[j], &pt[i], runs, &lo, &hi);
		m1 = med(pt[i].mj, runs);
		m2 = med(pt[j].mj, runs);
		printf("%-8s %3u %4u %11.2f %11.2f %7.0fns %7.0fns %6.3f "
		       "[%.2f-%.2f] %10.1f\n",
		       pt[i].iters ? "work" : "trivial", pt[i].W, pt[i].B, m1,
		       m2, med(pt[i].cpu, runs), med(pt[j].cpu, runs), rr, lo,
		       hi, 1e3 / m2 - 1e3 / m1);
		if (pt[i].iters && pt[i].W == 2 && pt[i].B == PB_HEAD_B) {
			head = rr;
			head_lo = lo;
			head_hi = hi;
		}
	}
	if (iters) {
		printf("\nthe last 1/%d of the work one job at a time: a "
		       "mutex section (one lock per batch) against a\nserial "
		       "stage (BP_STAGE_SERIAL, submission order)\n\n",
		       SERIAL_SHARE);
		printf("%3s %4s %11s %11s %9s %9s %18s\n", "W", "B",
		       "mutex M/s", "serial M/s", "mutex CPU", "serial CPU",
		       "serial/mutex [range]");
		for (int i = 0; i < n; i++) {
			int j;
			double lo, hi, rr;

			if (pt[i].v != V_MUTEX ||
			    (j = find(pt, n, V_SERIAL, pt[i].W, pt[i].B,
				      pt[i].iters)) < 0)
				continue;
			rr = ratio(&pt[j], &pt[i], runs, &lo, &hi);
			printf("%3u %4u %11.2f %11.2f %7.0fns %8.0fns %6.3f "
			       "[%.2f-%.2f]\n",
			       pt[i].W, pt[i].B, med(pt[i].mj, runs),
			       med(pt[j].mj, runs), med(pt[i].cpu, runs),
			       med(pt[j].cpu, runs), rr, lo, hi);
			if (pt[i].W == 2 && pt[i].B == PB_HEAD_B)
				ser = rr;
		}
	}
	printf("\nHEADLINE (medians of per-run ratios)\n");
	printf("1. %u-stage chain (1/%u of the work per stage, W=2 per "
	       "stage, B=%u) / one stage: %.3f [%.2f-%.2f] (target >= 0.9: "
	       "%s)\n",
	       o->stages, o->stages, PB_HEAD_B, head, head_lo, head_hi,
	       isnan(head)	   ? "n/a (no W=2, B=32 point with work)"
	       : head >= 0.9 ? "met"
			     : "MISSED");
	printf("2. an extra stage's library instructions per job at B=%u: "
	       "scripts/instructions.py --stages %u\n",
	       PB_HEAD_B, o->stages);
	printf("3. serial stage / mutex section, W=2, B=%u: %.3f\n",
	       PB_HEAD_B, ser);
	return 0;
}
