/* SPDX-License-Identifier: MIT */
/*
 * pipeline/report.c - what `bpbench pipeline` prints: the tables and the
 * headline, or the CSV blocks (bench/README.md lists their columns).
 */
#include "pipeline/experiments.h"

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <string.h>

static const char *pb_target(double v, double target, int at_least)
{
	if (isnan(v))
		return "n/a";
	return (at_least ? v >= target : v <= target) ? "meets" : "MISSES";
}

/* A cell of the workers x batches grids: point i, `width` characters. */
typedef void pb_cell_fn(const struct pb_results *r, int i, char *buf,
			size_t len);

static void pb_cell_mjobs(const struct pb_results *r, int i, char *buf,
			  size_t len)
{
	double lo, hi, m = pb_med_pt(r, r->mj, i, &lo, &hi);
	char range[32];

	snprintf(range, sizeof(range), "[%.1f-%.1f]", lo, hi);
	snprintf(buf, len, "%7.2f %-13s", m, range);
}

static void pb_cell_latency(const struct pb_results *r, int i, char *buf,
			    size_t len)
{
	char cell[40];

	snprintf(cell, sizeof(cell), "%.1f / %.1f",
		 pb_med_pt(r, r->p50, i, NULL, NULL),
		 pb_med_pt(r, r->p99, i, NULL, NULL));
	snprintf(buf, len, "%18s", cell);
}

/* Pipeline / plain at point i: median of per-run ratios, then the plain
 * variant's median M jobs/s [min-max]. */
static void pb_cell_plain(const struct pb_results *r, int i, char *buf,
			  size_t len)
{
	const struct pb_point *p = i < 0 ? NULL : &r->pt[i];
	int j = p ? pb_find(r, PB_PLAIN, p->W, p->B, p->wait, false) : -1;
	double lo, hi, m = pb_med_pt(r, r->mj, j, &lo, &hi);
	char range[32];

	snprintf(range, sizeof(range), "[%.1f-%.1f]", lo, hi);
	snprintf(buf, len, "%6.3f %7.2f %-13s", pb_med_ratio(r, i, j), m,
		 range);
}

/* The same with the pipeline's ingress lanes twin of point i (PB_LANES):
 * lanes / plain, then lanes / one ingress ring, medians of per-run ratios;
 * blank where no twin was run. */
static void pb_cell_lanes(const struct pb_results *r, int i, char *buf,
			  size_t len)
{
	const struct pb_point *p = i < 0 ? NULL : &r->pt[i];
	int l = p ? pb_find(r, PB_LANES, p->W, p->B, p->wait, false) : -1;
	int j = p ? pb_find(r, PB_PLAIN, p->W, p->B, p->wait, false) : -1;

	if (l < 0)
		snprintf(buf, len, "%13s", "");
	else
		snprintf(buf, len, "%6.3f %6.3f", pb_med_ratio(r, l, j),
			 pb_med_ratio(r, l, i));
}

/* CPU per job at point i: the pipeline's median ns (its producers' part),
 * the plain variant's, then the median of per-run ratios pipeline /
 * plain. */
static void pb_cell_cpu(const struct pb_results *r, int i, char *buf,
			size_t len)
{
	const struct pb_point *p = i < 0 ? NULL : &r->pt[i];
	int j = p ? pb_find(r, PB_PLAIN, p->W, p->B, p->wait, false) : -1;
	char a[24], b[24];

	snprintf(a, sizeof(a), "%.0f (%.0f)",
		 pb_med_pt(r, r->cpu, i, NULL, NULL),
		 pb_med_pt(r, r->pcpu, i, NULL, NULL));
	snprintf(b, sizeof(b), "%.0f (%.0f)",
		 pb_med_pt(r, r->cpu, j, NULL, NULL),
		 pb_med_pt(r, r->pcpu, j, NULL, NULL));
	snprintf(buf, len, "%13s %13s %5.2f", a, b,
		 pb_med_ratio_of(r, r->cpu, i, j));
}

/* One table per wait strategy: a row per worker count, a column per B. */
static void pb_print_grid(FILE *f, const struct pb_opts *o,
			  const struct pb_results *r, int width,
			  pb_cell_fn *cell)
{
	for (int wi = 0; wi < o->nwaits; wi++) {
		int w = o->waits[wi];

		fprintf(f, "\nwait = %s\n%4s", pb_waits[w].name, "W");
		for (int b = 0; b < o->nbatches; b++)
			fprintf(f, "  %*s%-4u", width - 4, "B=", o->batches[b]);
		fprintf(f, "\n");
		for (int wk = 0; wk < o->nworkers; wk++) {
			fprintf(f, "%4u", o->workers[wk]);
			for (int b = 0; b < o->nbatches; b++) {
				char buf[64];

				cell(r,
				     pb_find(r, PB_PIPE, o->workers[wk],
					     o->batches[b], w,
					     o->sweep_ordered),
				     buf, sizeof(buf));
				fprintf(f, "  %s", buf);
			}
			fprintf(f, "\n");
		}
	}
}

/* The run, the load, then throughput and latency per wait, W and B. */
static void pb_print_grids(FILE *f, const struct pb_report *rep)
{
	const struct pb_opts *o = rep->o;
	const struct pb_results *r = rep->r;
	char cpus[256];

	bench_cpus_format(o->a.cpus, o->a.ncpus, cpus, sizeof(cpus));
	fprintf(f,
		"bpbench pipeline: %u producers, %u runs x %u ms per point "
		"(interleaved), pool %u jobs per producer,\n"
		"threads %s (CPUs %s), seed %" PRIu64 "\n",
		o->producers, o->a.runs, o->a.ms, o->pool,
		o->pin ? "pinned round-robin" : "not pinned", cpus, o->a.seed);
	fprintf(f, "load average at start: %s\n", rep->load0);
	fprintf(f, "load average at end:   %s\n", rep->load1);
	fprintf(f,
		"\nTrivial jobs (the stage writes a result and completes), "
		"%s.\n"
		"Median M jobs/s end to end (producers' first submit .. drain "
		"returned); [min-max]\n",
		o->sweep_ordered ? "ordered" : "unordered");
	pb_print_grid(f, o, r, 21, pb_cell_mjobs);
	fprintf(f,
		"\nLatency submit -> sink under that load, from "
		"bp_pipeline_stats (bucket\nupper bounds; at saturation this "
		"is queueing in the bounded rings):\nmedian p50 / p99, us\n");
	pb_print_grid(f, o, r, 18, pb_cell_latency);
}

/* The pipeline against the plain hand-written variant, per wait, W, B. */
static void pb_print_plain(FILE *f, const struct pb_report *rep)
{
	const struct pb_opts *o = rep->o;
	const struct pb_results *r = rep->r;

	if (!o->plain || o->sweep_only)
		return;
	fprintf(f,
		"\nPipeline / plain: the same jobs, stage work and sink checks "
		"through the design a\ngood engineer writes by hand for this "
		"job alone, no library (pipeline/plain.c:\na lane per "
		"producer, one CAS per worker batch, a cached-index SP/SC "
		"result\nring per worker, a futex word per sleeper). Cell: "
		"median of per-run ratios\npipeline / plain, then plain's "
		"median M jobs/s [min-max]\n");
	pb_print_grid(f, o, r, 28, pb_cell_plain);
	fprintf(f,
		"\nCPU per job, the same runs: CPU time of the whole process "
		"from the start of a\nrun to its end (drain returned; plain: "
		"every thread joined) over the jobs\ndelivered, median ns, the "
		"producer threads' part in brackets: pipeline,\nplain, then "
		"the median of per-run ratios pipeline / plain (lower: less "
		"CPU)\n");
	pb_print_grid(f, o, r, 33, pb_cell_cpu);
	if (o->lanes || o->producers < 2)
		return;
	fprintf(f,
		"\nIngress lanes: the same pipeline with a lane per producer "
		"(ingress_lanes = %u),\nrun in the same runs at B <= %u, "
		"wait %s. Cell: median of per-run ratios\nlanes / plain, then "
		"lanes / one ingress ring\n",
		pb_lanes_of(o->producers), PB_LANES_MAX_B,
		pb_waits[PB_HEAD_WAIT].name);
	fprintf(f, "%4s", "W");
	for (int b = 0; b < o->nbatches; b++)
		if (o->batches[b] <= PB_LANES_MAX_B)
			fprintf(f, "  %9s%-4u", "B=", o->batches[b]);
	fprintf(f, "\n");
	for (int wk = 0; wk < o->nworkers; wk++) {
		fprintf(f, "%4u", o->workers[wk]);
		for (int b = 0; b < o->nbatches; b++) {
			char buf[64];

			if (o->batches[b] > PB_LANES_MAX_B)
				continue;
			pb_cell_lanes(r,
				      pb_find(r, PB_PIPE, o->workers[wk],
					      o->batches[b], PB_HEAD_WAIT,
					      false),
				      buf, sizeof(buf));
			fprintf(f, "  %s", buf);
		}
		fprintf(f, "\n");
	}
}

/* What ordered output costs against unordered, per B. */
static void pb_print_ordered(FILE *f, const struct pb_report *rep)
{
	const struct pb_opts *o = rep->o;
	const struct pb_results *r = rep->r;
	struct bench_table t;
	int ordered_any = 0;

	fprintf(f,
		"\nOrdered vs unordered, %u producers, %u workers, wait %s "
		"(cost = 1 - median of per-run ordered/unordered)\n",
		o->producers, PB_HEAD_W, pb_waits[PB_HEAD_WAIT].name);
	bench_table_init(&t, f);
	bench_table_col(&t, "B", 5, BENCH_RIGHT);
	bench_table_col(&t, "unordered", 11, BENCH_RIGHT);
	bench_table_col(&t, "ordered", 11, BENCH_RIGHT);
	bench_table_col(&t, "cost %", 7, BENCH_RIGHT);
	bench_table_col(&t, "ordered p99us", 0, BENCH_RIGHT);
	bench_table_head(&t);
	for (int i = 0; i < r->npoints; i++) {
		const struct pb_point *p = &r->pt[i];
		int u;

		if (p->kind != PB_PIPE || !p->ordered)
			continue;
		u = pb_find(r, PB_PIPE, p->W, p->B, p->wait, false);
		ordered_any = 1;
		bench_table_fmt(&t, "%u", p->B);
		bench_table_num(&t, pb_med_pt(r, r->mj, u, NULL, NULL), 2);
		bench_table_num(&t, pb_med_pt(r, r->mj, i, NULL, NULL), 2);
		bench_table_num(&t, 100.0 * (1.0 - pb_med_ratio(r, i, u)), 1);
		bench_table_num(&t, pb_med_pt(r, r->p99, i, NULL, NULL), 1);
	}
	if (!ordered_any)
		fprintf(f, "  (none)\n");
}

/* The pipeline against bp_ring alone and against its own per-job work. */
static void pb_print_ring_ref(FILE *f, const struct pb_report *rep)
{
	const struct pb_opts *o = rep->o;
	const struct pb_results *r = rep->r;
	struct bench_table t;

	fprintf(f,
		"\nRing reference: bp_ring MPMC 1x1, capacity 4096, burst B, "
		"pinned to CPUs %d and %d,\nagainst the pipeline (%u "
		"producers, %u workers, %s, unordered)\n",
		o->a.cpus[0], o->a.cpus[1 % o->a.ncpus], o->producers,
		PB_HEAD_W, pb_waits[PB_HEAD_WAIT].name);
	fprintf(f, "and against the benchmark's own per-job work alone: one "
		   "thread "
		   "takes B jobs from\nits pool, stamps them, runs the stage's "
		   "work and the sink's checks, no pipeline\n");
	bench_table_init(&t, f);
	bench_table_col(&t, "B", 5, BENCH_RIGHT);
	bench_table_col(&t, "ring Mitems/s", 0, BENCH_RIGHT);
	bench_table_col(&t, "pipe Mjobs/s", 0, BENCH_RIGHT);
	bench_table_col(&t, "ratio", 7, BENCH_RIGHT);
	bench_table_col(&t, "alone Mjobs/s", 0, BENCH_RIGHT);
	bench_table_col(&t, "pipe/alone", 0, BENCH_RIGHT);
	bench_table_head(&t);
	for (int i = 0; i < r->npoints; i++) {
		const struct pb_point *p = &r->pt[i];
		int pp, al;

		if (p->kind != PB_RING)
			continue;
		pp = pb_find(r, PB_PIPE, PB_HEAD_W, p->B, PB_HEAD_WAIT, false);
		al = pb_find(r, PB_ALONE, 1, p->B, 0, false);
		bench_table_fmt(&t, "%u", p->B);
		bench_table_num(&t, pb_med_pt(r, r->mj, i, NULL, NULL), 2);
		bench_table_num(&t, pb_med_pt(r, r->mj, pp, NULL, NULL), 2);
		bench_table_num(&t, pb_med_ratio(r, pp, i), 3);
		bench_table_num(&t, pb_med_pt(r, r->mj, al, NULL, NULL), 2);
		bench_table_num(&t, pb_med_ratio(r, pp, al), 3);
	}
}

/* Jobs with real CPU work: throughput and cores busy per W. */
static void pb_print_work(FILE *f, const struct pb_report *rep)
{
	const struct pb_opts *o = rep->o;
	const struct pb_results *r = rep->r;
	struct bench_table t;

	if (!o->work_ns || o->sweep_only)
		return;
	fprintf(f,
		"\nJobs with %u ns of CPU work each (%" PRIu64
		" LCG steps, calibrated at %.3f steps/ns),\nB=%u, "
		"wait %s, unordered; cores busy = Mjobs/s x work_ns / "
		"1000\n",
		o->work_ns, r->iters, r->iters_per_ns, PB_HEAD_B,
		pb_waits[PB_HEAD_WAIT].name);
	bench_table_init(&t, f);
	bench_table_col(&t, "W", 4, BENCH_RIGHT);
	bench_table_col(&t, "Mjobs/s", 9, BENCH_RIGHT);
	bench_table_col(&t, "cores busy", 0, BENCH_RIGHT);
	bench_table_col(&t, "p50 us", 9, BENCH_RIGHT);
	bench_table_col(&t, "p99 us", 9, BENCH_RIGHT);
	bench_table_head(&t);
	for (int wk = 0; wk < o->nworkers; wk++) {
		int i = pb_find(r, PB_WORK, o->workers[wk], PB_HEAD_B,
				PB_HEAD_WAIT, false);
		double m = pb_med_pt(r, r->mj, i, NULL, NULL);

		bench_table_fmt(&t, "%u", o->workers[wk]);
		bench_table_num(&t, m, 3);
		bench_table_num(&t, m * o->work_ns / 1e3, 2);
		bench_table_num(&t, pb_med_pt(r, r->p50, i, NULL, NULL), 1);
		bench_table_num(&t, pb_med_pt(r, r->p99, i, NULL, NULL), 1);
	}
}

/* Low-load and wake-up latency, idle CPU, and their floors, per wait. */
static void pb_print_latency(FILE *f, const struct pb_report *rep)
{
	const struct pb_opts *o = rep->o;
	const struct pb_results *r = rep->r;
	if (!o->latency)
		return;
	double ho_lo, ho_hi,
		ho = pb_med(r->handoff, r->runs, 1, 0, &ho_lo, &ho_hi);

	fprintf(f,
		"\nLatency, 1 producer, 1 worker, one job at a time "
		"(medians over runs, us).\n"
		"bench = clock before bp_pipeline_submit -> clock in "
		"the sink "
		"callback, one way, exact;\n"
		"bp = bp_pipeline_stats of the same runs (bucket upper "
		"bounds).\n"
		"low-load: the producer spins and yields (busy-poll) "
		"until its job is back;\n"
		"low-load same-wait: the producer waits with the "
		"strategy of the row;\n"
		"wake-up: %u us idle before each job (the producer "
		"sleeps through it);\n"
		"idle CPU: 2 workers + sink, no jobs, %u ms, %% of one "
		"core.\n",
		o->wake_gap_us, o->idle_ms);
	fprintf(f,
		"cross-core hand-off (the floor): %.0f ns one way "
		"[%.0f-%.0f]\n",
		ho, ho_lo, ho_hi);
	fprintf(f,
		"wake-up floor, no library: two futex wake-ups in a "
		"row "
		"after the same idle\ngap, p50 / p99: %.1f / %.1f us\n",
		pb_med(r->floor_p50, r->runs, 1, 0, NULL, NULL),
		pb_med(r->floor_p99, r->runs, 1, 0, NULL, NULL));
	fprintf(f, "%-11s %15s %15s %15s %15s %15s %8s\n", "", "low-load",
		"low-load", "low-load", "wake-up", "wake-up", "idle");
	fprintf(f, "%-11s %15s %15s %15s %15s %15s %8s\n", "wait", "bench",
		"bp", "same-wait", "bench", "bp", "CPU");
	fprintf(f, "%-11s %15s %15s %15s %15s %15s %8s\n", "", "p50 / p99",
		"p50 / p99", "p50 / p99", "p50 / p99", "p50 / p99", "%");
	for (int wi = 0; wi < o->nwaits; wi++) {
		int w = o->waits[wi];
		char c[5][40];
		const double *a[5][2] = {
			{r->lat_p50, r->lat_p99},
			{r->lat_bp50, r->lat_bp99},
			{r->same_p50, r->same_p99},
			{r->wake_p50, r->wake_p99},
			{r->wake_bp50, r->wake_bp99},
		};

		for (int k = 0; k < 5; k++)
			snprintf(c[k], sizeof(c[k]), "%.1f / %.1f",
				 pb_med(a[k][0], r->runs, PB_NWAITS, w, NULL,
					NULL),
				 pb_med(a[k][1], r->runs, PB_NWAITS, w, NULL,
					NULL));
		fprintf(f, "%-11s %15s %15s %15s %15s %15s %8.2f\n",
			pb_waits[w].name, c[0], c[1], c[2], c[3], c[4],
			pb_med(r->idle, r->runs, PB_NWAITS, w, NULL, NULL));
	}
}

/* The headline's latency lines and their targets. */
static void pb_print_headline_latency(FILE *f, const struct pb_report *rep)
{
	const struct pb_opts *o = rep->o;
	const struct pb_results *r = rep->r;
	if (!o->latency)
		return;
	double bp50 = pb_med(r->lat_p50, r->runs, PB_NWAITS, 0, NULL, NULL),
	       bp99 = pb_med(r->lat_p99, r->runs, PB_NWAITS, 0, NULL, NULL),
	       ss99 = pb_med(r->wake_p99, r->runs, PB_NWAITS, 1, NULL, NULL),
	       ssidle = pb_med(r->idle, r->runs, PB_NWAITS, 1, NULL, NULL);

	fprintf(f,
		"4. latency, submit -> sink seen, one way, us "
		"(p50 / p99), 1P/1W, one job at a time;\n"
		"   hand-off floor %.0f ns. low-load: producer "
		"spins+yields; same-wait: producer\n"
		"   waits with the row's strategy; wake-up: "
		"after %u us idle\n",
		pb_med(r->handoff, r->runs, 1, 0, NULL, NULL), o->wake_gap_us);
	fprintf(f, "   %-10s %15s %15s %15s %9s\n", "wait", "low-load",
		"same-wait", "wake-up", "idle CPU");
	for (int wi = 0; wi < o->nwaits; wi++) {
		int w = o->waits[wi];
		const double *a[3][2] = {
			{r->lat_p50, r->lat_p99},
			{r->same_p50, r->same_p99},
			{r->wake_p50, r->wake_p99},
		};
		char c[3][40];

		for (int k = 0; k < 3; k++)
			snprintf(c[k], sizeof(c[k]), "%.1f / %.1f",
				 pb_med(a[k][0], r->runs, PB_NWAITS, w, NULL,
					NULL),
				 pb_med(a[k][1], r->runs, PB_NWAITS, w, NULL,
					NULL));
		fprintf(f, "   %-10s %15s %15s %15s %7.2f %%\n",
			pb_waits[w].name, c[0], c[1], c[2],
			pb_med(r->idle, r->runs, PB_NWAITS, w, NULL, NULL));
	}
	fprintf(f,
		"   busy-poll p50 <= 5 us: %s; p99 <= 50 us: "
		"%s\n",
		pb_target(bp50, 5, 0), pb_target(bp99, 50, 0));
	fprintf(f,
		"   spin-sleep idle CPU < 1 %%: %s; wake-up "
		"p99 "
		"<= 100 us: %s\n",
		pb_target(ssidle, 0.999, 0), pb_target(ss99, 100, 0));
	fprintf(f,
		"5. cross-core hand-off, one way (round trip / "
		"2), median: %.0f ns\n",
		pb_med(r->handoff, r->runs, 1, 0, NULL, NULL));
	fprintf(f,
		"6. wake-up floor, no library (two futex "
		"wake-ups in a row after %u us idle),\n"
		"   p50 / p99: %.1f / %.1f us\n",
		o->wake_gap_us, pb_med(r->floor_p50, r->runs, 1, 0, NULL, NULL),
		pb_med(r->floor_p99, r->runs, 1, 0, NULL, NULL));
}

/* The W of the plain targets (the list) */
static const unsigned pb_plain_ws[] = {1, 2, 4, 16};
#define PB_NPLAIN_WS (sizeof(pb_plain_ws) / sizeof(pb_plain_ws[0]))

/* Pipeline (kind: PB_PIPE, or PB_LANES) / plain at spin-sleep, (W, B):
 * median of per-run ratios. */
static double pb_plain_ratio(const struct pb_results *r, enum pb_kind kind,
			     unsigned W, unsigned B)
{
	return pb_med_ratio(r, pb_find(r, kind, W, B, PB_HEAD_WAIT, false),
			    pb_find(r, PB_PLAIN, W, B, PB_HEAD_WAIT, false));
}

/*
 * The B of the plain points at the headline's wait in [bmin, bmax],
 * ascending (the --batches in range, and the headline's B=32 if in
 * range); returns how many.
 */
static int pb_plain_bs(const struct pb_results *r, unsigned bmin, unsigned bmax,
		       unsigned *bs)
{
	int n = 0;

	for (int i = 0; i < r->npoints; i++) {
		const struct pb_point *p = &r->pt[i];
		int k = n;

		if (p->kind != PB_PLAIN || p->wait != PB_HEAD_WAIT ||
		    p->B < bmin || p->B > bmax)
			continue;
		while (k > 0 && bs[k - 1] > p->B)
			k--;
		if (k > 0 && bs[k - 1] == p->B)
			continue;
		memmove(&bs[k + 1], &bs[k], sizeof(*bs) * (size_t)(n - k));
		bs[k] = p->B;
		n++;
	}
	return n;
}

/*
 * One headline target: pipeline / plain >= target for every W of the
 * issue and every measured B in [bmin, bmax]. The verdict line, then the
 * numbers, a line per B. met only when every one was measured and meets.
 */
static void pb_print_plain_target(FILE *f, const struct pb_report *rep,
				  enum pb_kind kind, unsigned bmin,
				  unsigned bmax, double target)
{
	const struct pb_results *r = rep->r;
	unsigned bs[PB_MAX_POINTS], worst_w = 0, worst_b = 0;
	int nb = pb_plain_bs(r, bmin, bmax, bs), measured = 0, below = 0;
	int cells = nb * (int)PB_NPLAIN_WS;
	double worst = INFINITY;

	for (int b = 0; b < nb; b++)
		for (size_t k = 0; k < PB_NPLAIN_WS; k++) {
			double v = pb_plain_ratio(r, kind, pb_plain_ws[k],
						  bs[b]);

			if (isnan(v))
				continue;
			measured++;
			below += v < target;
			if (v < worst) {
				worst = v;
				worst_w = pb_plain_ws[k];
				worst_b = bs[b];
			}
		}
	fprintf(f, "   B%s%u%s, target >= %.2f: ", bmin == bmax ? "=" : ">=",
		bmin, kind == PB_LANES ? " with lanes" : "", target);
	if (!measured)
		fprintf(f, "n/a (not measured)\n");
	else if (below)
		fprintf(f, "MISSED: %d of %d below, worst %.3f (W=%u B=%u)\n",
			below, measured, worst, worst_w, worst_b);
	else /* n/a: every one measured meets it, but not all were */
		fprintf(f, "%s: %d of %d below, worst %.3f (W=%u B=%u)\n",
			measured < cells ? "n/a" : "met", below, measured,
			worst, worst_w, worst_b);
	for (int b = 0; b < nb; b++) {
		fprintf(f, "      B=%-4u", bs[b]);
		for (size_t k = 0; k < PB_NPLAIN_WS; k++) {
			double v = pb_plain_ratio(r, kind, pb_plain_ws[k],
						  bs[b]);

			if (isnan(v))
				fprintf(f, "  W=%-2u   n/a", pb_plain_ws[k]);
			else
				fprintf(f, "  W=%-2u %5.3f", pb_plain_ws[k], v);
		}
		fprintf(f, "\n");
	}
}

/* The headline's targets against the plain variant (a verdict each). */
static void pb_print_headline_plain(FILE *f, const struct pb_report *rep)
{
	if (!rep->o->plain || rep->o->sweep_only)
		return;
	fprintf(f,
		"7. pipeline / plain (the same jobs by hand, no library), "
		"%s, W = 1, 2, 4, 16;\n   medians of per-run ratios (n/a: "
		"not measured, see --workers, --batches, --waits)\n",
		pb_waits[PB_HEAD_WAIT].name);
	pb_print_plain_target(f, rep, PB_PIPE, 1, 1, 0.90);
	pb_print_plain_target(f, rep, PB_PIPE, 8, UINT_MAX, 1.00);
	if (rep->o->lanes || rep->o->producers < 2)
		return;
	fprintf(f,
		"   with an ingress lane per producer (ingress_lanes = %u, "
		"--lanes %u):\n",
		pb_lanes_of(rep->o->producers), pb_lanes_of(rep->o->producers));
	pb_print_plain_target(f, rep, PB_LANES, 1, 1, 0.90);
	pb_print_plain_target(f, rep, PB_LANES, 8, PB_LANES_MAX_B, 1.00);
}

/* The headline: the key points, each with its target. */
static void pb_print_headline(FILE *f, const struct pb_report *rep)
{
	const struct pb_opts *o = rep->o;
	const struct pb_results *r = rep->r;
	const char *load0 = rep->load0, *load1 = rep->load1;
	int head =
		pb_find(r, PB_PIPE, PB_HEAD_W, PB_HEAD_B, PB_HEAD_WAIT, false);
	int ord = pb_find(r, PB_PIPE, PB_HEAD_W, PB_HEAD_B, PB_HEAD_WAIT, true);
	int many = pb_find(r, PB_PIPE, PB_HEAD_W_MANY, PB_HEAD_B, PB_HEAD_WAIT,
			   false);
	int ring = pb_find(r, PB_RING, 1, PB_HEAD_B, 0, false);
	double hm = pb_med_pt(r, r->mj, head, NULL, NULL);
	double rm = pb_med_pt(r, r->mj, ring, NULL, NULL);
	double rr = pb_med_ratio(r, head, ring);
	int alone = pb_find(r, PB_ALONE, 1, PB_HEAD_B, 0, false);
	double am = pb_med_pt(r, r->mj, alone, NULL, NULL);
	double ra = pb_med_ratio(r, head, alone);
	double sc = pb_med_ratio(r, many, head);
	double oc = 100.0 * (1.0 - pb_med_ratio(r, ord, head));
	int head1 = pb_find(r, PB_PIPE, PB_HEAD_W, 1, PB_HEAD_WAIT, false);
	int ord1 = pb_find(r, PB_PIPE, PB_HEAD_W, 1, PB_HEAD_WAIT, true);
	double oc1 = 100.0 * (1.0 - pb_med_ratio(r, ord1, head1));

	fprintf(f,
		"\nHEADLINE (medians; ratios are medians of per-run "
		"ratios; load %s -> %s)\n",
		load0, load1);
	/* the old absolute targets (>= 80 M jobs/s, >= 0.40 of the ring) are
	 * retired: the pipeline is held to the plain design (7.) instead */
	fprintf(f,
		"1. trivial, %uP/%uW, B=%u, unordered, %s: %.2f M "
		"jobs/s (held to the plain design: 7.)\n",
		o->producers, PB_HEAD_W, PB_HEAD_B, pb_waits[PB_HEAD_WAIT].name,
		hm);
	fprintf(f,
		"   ring 1x1 B=%u: %.2f M items/s; pipeline / ring = "
		"%.3f\n",
		PB_HEAD_B, rm, rr);
	fprintf(f,
		"   the benchmark's own per-job work alone, one "
		"thread, "
		"B=%u: %.2f M jobs/s\n   (%.1f ns/job); pipeline / "
		"alone = %.3f\n",
		PB_HEAD_B, am, 1e3 / am, ra);
	fprintf(f,
		"2. %u workers / %u workers at B=%u: %.3f (target >= "
		"0.70: %s)\n",
		PB_HEAD_W_MANY, PB_HEAD_W, PB_HEAD_B, sc,
		pb_target(sc, 0.70, 1));
	fprintf(f,
		"3. ordered vs unordered, %uP/%uW: cost at B=%u %.1f %% "
		"(target <= 15 %%: %s), at B=1 %.1f %% (target <= 25 %%: "
		"%s)\n",
		o->producers, PB_HEAD_W, PB_HEAD_B, oc, pb_target(oc, 15, 0),
		oc1, pb_target(oc1, 25, 0));
	pb_print_headline_latency(f, rep);
	pb_print_headline_plain(f, rep);
}

void pb_print_table(FILE *f, const void *ctx)
{
	const struct pb_report *rep = ctx;

	pb_print_grids(f, rep);
	pb_print_plain(f, rep);
	pb_print_ordered(f, rep);
	pb_print_ring_ref(f, rep);
	pb_print_work(f, rep);
	pb_print_latency(f, rep);
	pb_print_headline(f, rep);
}

/* The latency blocks: latency, handoff, wakefloor. */
static void pb_print_csv_latency(FILE *f, const struct pb_report *rep)
{
	const struct pb_opts *o = rep->o;
	const struct pb_results *r = rep->r;

	/* bench_*: the benchmark's own one-way clock; bp_*: the stats' */
	fprintf(f,
		"latency,wait,test,run,bench_p50_us,bench_p99_us,bp_p50_us,bp_"
		"p99_us,idle_cpu_pct\n");
	for (int wi = 0; wi < o->nwaits; wi++) {
		int w = o->waits[wi];

		for (int run = 0; run < r->runs; run++) {
			fprintf(f,
				"latency,%s,low-load,%d,%.3f,%.3f,%.3f,%.3f,\n",
				pb_waits[w].name, run,
				*pb_wcell(r->lat_p50, run, w),
				*pb_wcell(r->lat_p99, run, w),
				*pb_wcell(r->lat_bp50, run, w),
				*pb_wcell(r->lat_bp99, run, w));
			fprintf(f,
				"latency,%s,low-load-same-wait,%d,%.3f,%.3f,,,"
				"\n",
				pb_waits[w].name, run,
				*pb_wcell(r->same_p50, run, w),
				*pb_wcell(r->same_p99, run, w));
			fprintf(f,
				"latency,%s,wake-up,%d,%.3f,%.3f,%.3f,%.3f,\n",
				pb_waits[w].name, run,
				*pb_wcell(r->wake_p50, run, w),
				*pb_wcell(r->wake_p99, run, w),
				*pb_wcell(r->wake_bp50, run, w),
				*pb_wcell(r->wake_bp99, run, w));
			fprintf(f, "latency,%s,idle,%d,,,,,%.3f\n",
				pb_waits[w].name, run,
				*pb_wcell(r->idle, run, w));
		}
	}
	fprintf(f, "handoff,run,ns_one_way\n");
	for (int run = 0; run < r->runs; run++)
		fprintf(f, "handoff,%d,%.1f\n", run, r->handoff[run]);
	fprintf(f, "wakefloor,run,p50_us,p99_us\n");
	for (int run = 0; run < r->runs; run++)
		fprintf(f, "wakefloor,%d,%.3f,%.3f\n", run, r->floor_p50[run],
			r->floor_p99[run]);
}

/* The plain variant's block (no rows with --no-plain or --sweep-only). */
static void pb_print_csv_plain(FILE *f, const struct pb_report *rep)
{
	const struct pb_opts *o = rep->o;
	const struct pb_results *r = rep->r;

	/* pipe_over_plain: the twin pipeline point's run of the same index
	 * over this one */
	fprintf(f, "plain,producers,workers,B,wait,run,Mjobs_per_s,pipe_over_"
		   "plain,cpu_ns_per_job\n");
	for (int j = 0; j < r->npoints; j++) {
		const struct pb_point *p = &r->pt[j];
		int i;

		if (p->kind != PB_PLAIN)
			continue;
		i = pb_find(r, PB_PIPE, p->W, p->B, p->wait, false);
		for (int run = 0; run < r->runs; run++)
			fprintf(f, "plain,%u,%u,%u,%s,%d,%.3f,%.4f,%.1f\n",
				o->producers, p->W, p->B,
				pb_waits[p->wait].name, run,
				*pb_cell(r, r->mj, run, j),
				*pb_cell(r, r->mj, run, i) /
					*pb_cell(r, r->mj, run, j),
				*pb_cell(r, r->cpu, run, j));
	}
}

/* The lanes twins' block (PB_LANES; none with --lanes, --no-plain, one
 * producer or --sweep-only). */
static void pb_print_csv_lanes(FILE *f, const struct pb_report *rep)
{
	const struct pb_results *r = rep->r;

	/* lanes_over_plain, lanes_over_pipe: this run over the twins' run of
	 * the same index */
	fprintf(f, "lanes,producers,lanes,workers,B,wait,run,Mjobs_per_s,"
		   "lanes_over_plain,lanes_over_pipe,cpu_ns_per_job\n");
	for (int l = 0; l < r->npoints; l++) {
		const struct pb_point *p = &r->pt[l];
		int i, j;

		if (p->kind != PB_LANES)
			continue;
		i = pb_find(r, PB_PIPE, p->W, p->B, p->wait, false);
		j = pb_find(r, PB_PLAIN, p->W, p->B, p->wait, false);
		for (int run = 0; run < r->runs; run++) {
			double mj = *pb_cell(r, r->mj, run, l);

			fprintf(f,
				"lanes,%u,%u,%u,%u,%s,%d,%.3f,%.4f,%.4f,%.1f\n",
				rep->o->producers,
				pb_lanes_of(rep->o->producers), p->W, p->B,
				pb_waits[p->wait].name, run, mj,
				mj / *pb_cell(r, r->mj, run, j),
				mj / *pb_cell(r, r->mj, run, i),
				*pb_cell(r, r->cpu, run, l));
		}
	}
}

void pb_print_csv(FILE *f, const void *ctx)
{
	const struct pb_report *rep = ctx;
	const struct pb_opts *o = rep->o;
	const struct pb_results *r = rep->r;

	/* p50_us, p99_us: bp_pipeline_stats lat_p50_ns / lat_p99_ns of the
	 * run (bucket upper bounds) */
	fprintf(f,
		"producers,workers,B,wait,ordered,run,Mjobs_per_s,p50_us,p99_"
		"us,cpu_ns_per_job\n");
	for (int i = 0; i < r->npoints; i++) {
		const struct pb_point *p = &r->pt[i];

		if (p->kind != PB_PIPE)
			continue;
		for (int run = 0; run < r->runs; run++)
			fprintf(f, "%u,%u,%u,%s,%d,%d,%.3f,%.3f,%.3f,%.1f\n",
				o->producers, p->W, p->B,
				pb_waits[p->wait].name, p->ordered ? 1 : 0, run,
				*pb_cell(r, r->mj, run, i),
				*pb_cell(r, r->p50, run, i),
				*pb_cell(r, r->p99, run, i),
				*pb_cell(r, r->cpu, run, i));
	}
	fprintf(f, "ring1x1,B,run,Mitems_per_s\n");
	for (int i = 0; i < r->npoints; i++)
		if (r->pt[i].kind == PB_RING)
			for (int run = 0; run < r->runs; run++)
				fprintf(f, "ring1x1,%u,%d,%.3f\n", r->pt[i].B,
					run, *pb_cell(r, r->mj, run, i));
	fprintf(f, "alone,B,run,Mjobs_per_s\n");
	for (int i = 0; i < r->npoints; i++)
		if (r->pt[i].kind == PB_ALONE)
			for (int run = 0; run < r->runs; run++)
				fprintf(f, "alone,%u,%d,%.3f\n", r->pt[i].B,
					run, *pb_cell(r, r->mj, run, i));
	if (o->work_ns && !o->sweep_only) {
		fprintf(f, "work,work_ns,producers,workers,B,wait,ordered,run,"
			   "Mjobs_per_s,p50_us,p99_us\n");
		for (int i = 0; i < r->npoints; i++) {
			const struct pb_point *p = &r->pt[i];

			if (p->kind != PB_WORK)
				continue;
			for (int run = 0; run < r->runs; run++)
				fprintf(f,
					"work,%u,%u,%u,%u,%s,0,%d,%.3f,%.3f,%."
					"3f\n",
					o->work_ns, o->producers, p->W, p->B,
					pb_waits[p->wait].name, run,
					*pb_cell(r, r->mj, run, i),
					*pb_cell(r, r->p50, run, i),
					*pb_cell(r, r->p99, run, i));
		}
	}
	if (o->latency)
		pb_print_csv_latency(f, rep);
	pb_print_csv_plain(f, rep);
	pb_print_csv_lanes(f, rep);
}
