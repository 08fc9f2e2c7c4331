/* SPDX-License-Identifier: MIT */
/*
 * report.c - what `bpbench ring` prints: the throughput table with the
 * ratio of batchpipe to the best other queue and its geometric mean, the
 * scaling, the latency table and the single-thread costs; the same as CSV
 * and JSON.
 */
#include <inttypes.h>
#include <math.h>

#include "ring/ring.h"

/* Median over runs of one (point, batch, queue); also min and max. */
static double ring_median(const struct ring_results *r, int pt, int b, int q,
			  double *min, double *max)
{
	double v[RING_MAX_RUNS];

	for (int run = 0; run < r->runs; run++)
		v[run] = *ring_cell(r, run, pt, b, q);
	if (min)
		*min = bench_min(v, r->runs);
	if (max)
		*max = bench_max(v, r->runs);
	return bench_median(v, r->runs);
}

/* Median over runs of a latency array (p50 or p99) at one cell. */
static double ring_lat_median(const struct ring_results *r, const double *a,
			      int pt, int b, int q)
{
	double v[RING_MAX_RUNS];

	for (int run = 0; run < r->runs; run++)
		v[run] = a[ring_index(r, run, pt, b, q)];
	return bench_median(v, r->runs);
}

/* A JSON number, or null for NaN. */
static void ring_json_num(FILE *f, double v)
{
	if (isnan(v))
		fputs("null", f);
	else
		fprintf(f, "%.1f", v);
}

static double ring_single_median(const struct ring_results *r, int b, int q)
{
	double v[RING_MAX_RUNS];

	for (int run = 0; run < r->runs; run++)
		v[run] = *ring_single_cell(r, run, b, q);
	return bench_median(v, r->runs);
}

/* Queue q's single-thread cost over queue d's, as a ratio of medians. */
static double ring_single_ratio_of_medians(const struct ring_results *r, int b,
					   int q, int d)
{
	return ring_single_median(r, b, q) / ring_single_median(r, b, d);
}

/*
 * The same as the median of per-run ratios: the two queues of one run are
 * measured back to back (ring.c), so a run pairs them under the same
 * machine conditions, which a clock that moves between runs does not
 * disturb.
 */
static double ring_single_median_ratio(const struct ring_results *r, int b,
				       int q, int d)
{
	double v[RING_MAX_RUNS];

	for (int run = 0; run < r->runs; run++)
		v[run] = *ring_single_cell(r, run, b, q) /
			 *ring_single_cell(r, run, b, d);
	return bench_median(v, r->runs);
}

/* batchpipe (default mode) over the best non-batchpipe queue at one point. */
static double ring_ratio(const struct ring_opts *o,
			 const struct ring_results *r, int pt, int b,
			 int *best_q)
{
	double bp = NAN, best = NAN;

	*best_q = -1;
	for (int q = 0; q < o->nqueues; q++) {
		double m = ring_median(r, pt, b, q, NULL, NULL);

		if (isnan(m))
			continue;
		if (o->queues[q] == &bench_q_batchpipe)
			bp = m;
		else if (!bench_queue_is_batchpipe(o->queues[q]) &&
			 !o->queues[q]->ceiling && (isnan(best) || m > best)) {
			best = m;
			*best_q = q;
		}
	}
	return isnan(bp) || isnan(best) || best <= 0 ? NAN : bp / best;
}

static int ring_find_queue(const struct ring_opts *o,
			   const struct bench_queue_ops *ops)
{
	for (int q = 0; q < o->nqueues; q++)
		if (o->queues[q] == ops)
			return q;
	return -1;
}

/* DPDK's MP/MC rte_ring, where it is built and runs; else -1. */
static int ring_find_rte(const struct ring_opts *o)
{
#if BENCH_HAVE_DPDK
	return ring_find_queue(o, &bench_q_rte_ring);
#else
	(void)o;
	return -1;
#endif
}

static int ring_find_point(const struct ring_opts *o, unsigned P, unsigned C)
{
	for (int pt = 0; pt < o->npoints; pt++)
		if (o->points[pt][0] == P && o->points[pt][1] == C)
			return pt;
	return -1;
}

/* One row per point and batch: "PxC", B, then a cell per queue. */
static void ring_table_cols(struct bench_table *t, const struct ring_opts *o,
			    int width)
{
	bench_table_col(t, "PxC", 5, BENCH_LEFT);
	bench_table_col(t, "B", 4, BENCH_RIGHT);
	for (int q = 0; q < o->nqueues; q++)
		bench_table_col(t, o->queues[q]->name, width, BENCH_RIGHT);
}

static void ring_table_row_head(struct bench_table *t,
				const struct ring_opts *o, int pt, int b)
{
	bench_table_fmt(t, "%ux%u", o->points[pt][0], o->points[pt][1]);
	bench_table_fmt(t, "%u", o->batches[b]);
}

/*
 * batchpipe's SP/SC mode against the plain SPSC ring, the ceiling for
 * that topology: threaded at 1x1 (throughput ratio, higher is better) and
 * single-thread (cost ratio, lower is better), per B.
 */
static void ring_print_ceiling(FILE *f, const struct ring_opts *o,
			       const struct ring_results *r)
{
	int sp = ring_find_queue(o, &bench_q_batchpipe_sp_sc);
	int ce = ring_find_queue(o, &bench_q_spsc);
	int p11 = ring_find_point(o, 1, 1);
	struct bench_table t;

	if (sp < 0 || ce < 0)
		return;
	fprintf(f,
		"\nbatchpipe-sp-sc against %s (the plain cached-index SPSC "
		"ring):\nthroughput at 1x1 (median / median, higher is "
		"better), "
		"single-thread cost\n(ns / ns, lower is better)\n\n",
		o->queues[ce]->name);
	bench_table_init(&t, f);
	bench_table_col(&t, "B", 4, BENCH_RIGHT);
	bench_table_col(&t, "1x1 ratio", 0, BENCH_RIGHT);
	bench_table_col(&t, "single-thread ratio", 0, BENCH_RIGHT);
	bench_table_head(&t);
	for (int b = 0; b < o->nbatches; b++) {
		bench_table_fmt(&t, "%u", o->batches[b]);
		if (p11 >= 0)
			bench_table_num(
				&t,
				ring_median(r, p11, b, sp, NULL, NULL) /
					ring_median(r, p11, b, ce, NULL, NULL),
				2);
		else
			bench_table_str(&t, "-");
		if (o->single)
			bench_table_num(&t,
					ring_single_median(r, b, sp) /
						ring_single_median(r, b, ce),
					2);
		else
			bench_table_str(&t, "-");
	}
}

static const char *verdict(bool met)
{
	return met ? "met" : "MISSED";
}

/* Every PxC x B point: batchpipe / best other >= 1; the worst one. */
static void ring_headline_points(FILE *f, const struct ring_opts *o,
				 const struct ring_results *r, double geomean,
				 int nratio)
{
	double worst = INFINITY;
	int below = 0, wpt = 0, wb = 0, best_q;

	for (int pt = 0; pt < o->npoints; pt++)
		for (int b = 0; b < o->nbatches; b++) {
			double ratio = ring_ratio(o, r, pt, b, &best_q);

			if (isnan(ratio))
				continue;
			below += ratio < 1.0;
			if (ratio < worst) {
				worst = ratio;
				wpt = pt;
				wb = b;
			}
		}
	if (!nratio) {
		fprintf(f, "  every PxC x B point >= the best other queue: n/a "
			   "(no other queue ran)\n");
		fprintf(f, "  geometric mean of the ratios >= 1.6: n/a\n");
		return;
	}
	/* three digits: a value printed rounded up to the bar it missed
	 * would contradict its verdict */
	fprintf(f,
		"  every PxC x B point >= the best other queue: %s (%d of %d "
		"below; worst %.3f at %ux%u B=%u)\n",
		verdict(!below), below, nratio, worst, o->points[wpt][0],
		o->points[wpt][1], o->batches[wb]);
	fprintf(f, "  geometric mean of the ratios >= 1.6: %s (%.3f)\n",
		verdict(geomean >= 1.6), geomean);
}

/*
 * The ring's targets, judged on this run: the points against the best
 * other queue, batchpipe-sp-sc against the SPSC ceiling at 1x1, and the
 * single-thread cost of batchpipe (MP/MC) against DPDK's rte_ring (MP/MC)
 * at every B. A target whose queues did not run says n/a.
 */
static void ring_print_headline(FILE *f, const struct ring_opts *o,
				const struct ring_results *r, double geomean,
				int nratio)
{
	int sp = ring_find_queue(o, &bench_q_batchpipe_sp_sc);
	int ce = ring_find_queue(o, &bench_q_spsc);
	int bp = ring_find_queue(o, &bench_q_batchpipe);
	int rte = ring_find_rte(o);
	int p11 = ring_find_point(o, 1, 1);

	fprintf(f, "\nHEADLINE (targets; medians of this run)\n");
	ring_headline_points(f, o, r, geomean, nratio);
	if (sp >= 0 && ce >= 0 && p11 >= 0) {
		double worst = INFINITY;

		for (int b = 0; b < o->nbatches; b++) {
			double v = ring_median(r, p11, b, sp, NULL, NULL) /
				   ring_median(r, p11, b, ce, NULL, NULL);

			if (v < worst) /* NaN: not measured, left out */
				worst = v;
		}
		if (isinf(worst))
			fprintf(f, "  batchpipe-sp-sc >= 0.9 of %s at 1x1: n/a "
				   "(not measured)\n", o->queues[ce]->name);
		else
			fprintf(f,
				"  batchpipe-sp-sc >= 0.9 of %s at 1x1, every "
				"B: %s (worst %.3f)\n",
				o->queues[ce]->name, verdict(worst >= 0.9),
				worst);
	} else {
		fprintf(f, "  batchpipe-sp-sc >= 0.9 of the SPSC ceiling: n/a "
			   "(needs both queues and the 1x1 point)\n");
	}
	if (o->single && bp >= 0 && rte >= 0) {
		double worst = -INFINITY;
		unsigned wb = 0;

		/* judged on both statistics: the worse of them at each B */
		for (int b = 0; b < o->nbatches; b++) {
			double v = fmax(
				ring_single_ratio_of_medians(r, b, bp, rte),
				ring_single_median_ratio(r, b, bp, rte));

			if (v > worst) { /* NaN: not measured, left out */
				worst = v;
				wb = o->batches[b];
			}
		}
		if (isinf(worst)) {
			fprintf(f, "  single thread, batchpipe's cost <= "
				   "rte_ring's: n/a (not measured)\n");
			return;
		}
		fprintf(f,
			"  single thread, batchpipe's cost <= rte_ring's at "
			"every B: %s (worst %.3fx at B=%u; per B, ratio of "
			"medians / median of per-run ratios:",
			verdict(worst <= 1.0), worst, wb);
		for (int b = 0; b < o->nbatches; b++)
			fprintf(f, " %u: %.2f/%.2f", o->batches[b],
				ring_single_ratio_of_medians(r, b, bp, rte),
				ring_single_median_ratio(r, b, bp, rte));
		fprintf(f, ")\n");
	} else {
		fprintf(f, "  single thread, batchpipe's cost <= rte_ring's: "
			   "n/a (needs the single-thread table and rte_ring)\n");
	}
}

static void ring_print_single(FILE *f, const struct ring_opts *o,
			      const struct ring_results *r);

void ring_print_table(FILE *f, const void *ctx)
{
	const struct ring_report *rep = ctx;
	const struct ring_opts *o = rep->o;
	const struct ring_results *r = rep->r;
	char cpus[256];
	int bpq = ring_find_queue(o, &bench_q_batchpipe);
	double log_sum = 0;
	int nratio = 0, p11;
	struct bench_table t;

	bench_cpus_format(o->a.cpus, o->a.ncpus, cpus, sizeof(cpus));
	fprintf(f,
		"bpbench ring: capacity %u, %u runs x %u ms per point and "
		"queue, CPUs %s, seed %" PRIu64 "\n",
		o->capacity, o->a.runs, o->a.ms, cpus, o->a.seed);
	fputs(bench_queues_missing(), f);
	fprintf(f,
		"median throughput, Mitems/s (ratio = batchpipe / best "
		"other queue; %s is a ceiling, not a competitor)\n\n",
		bench_q_spsc.name);
	bench_table_init(&t, f);
	ring_table_cols(&t, o, 8);
	if (bpq >= 0) {
		bench_table_col(&t, "best other", 10, BENCH_LEFT);
		bench_table_col(&t, "ratio", 6, BENCH_RIGHT);
		bench_table_col(&t, "batchpipe min-max", 0, BENCH_LEFT);
	}
	bench_table_head(&t);
	for (int pt = 0; pt < o->npoints; pt++) {
		for (int b = 0; b < o->nbatches; b++) {
			ring_table_row_head(&t, o, pt, b);
			for (int q = 0; q < o->nqueues; q++)
				bench_table_num(
					&t,
					ring_median(r, pt, b, q, NULL, NULL),
					2);
			if (bpq >= 0) {
				int best_q;
				double ratio = ring_ratio(o, r, pt, b, &best_q),
				       lo, hi;

				ring_median(r, pt, b, bpq, &lo, &hi);
				bench_table_str(
					&t, best_q >= 0
						    ? o->queues[best_q]->name
						    : "-");
				bench_table_num(&t, ratio, 2);
				bench_table_fmt(&t, "%.1f-%.1f", lo, hi);
				if (!isnan(ratio) && ratio > 0) {
					log_sum += log(ratio);
					nratio++;
				}
			}
		}
	}
	if (nratio)
		fprintf(f,
			"\ngeometric mean of batchpipe / best other over %d "
			"points: %.2f\n",
			nratio, exp(log_sum / nratio));

	ring_print_ceiling(f, o, r);

	p11 = ring_find_point(o, 1, 1);
	if (bpq >= 0 && p11 >= 0 && o->npoints > 1) {
		fprintf(f, "\nbatchpipe scaling, median at PxC / median at "
			   "1x1:\n");
		for (int pt = 0; pt < o->npoints; pt++) {
			if (pt == p11)
				continue;
			fprintf(f, "  %ux%u:", o->points[pt][0],
				o->points[pt][1]);
			for (int b = 0; b < o->nbatches; b++) {
				double base =
					ring_median(r, p11, b, bpq, NULL, NULL);
				double m =
					ring_median(r, pt, b, bpq, NULL, NULL);

				fprintf(f, "  B=%u %.2f", o->batches[b],
					m / base);
			}
			fprintf(f, "\n");
		}
	}

	fprintf(f, "\nlatency, enqueue -> dequeue of every 64th item: median "
		   "over runs of p50 / p99, us\n(under saturation: time "
		   "waiting in a full queue)\n\n");
	bench_table_init(&t, f);
	ring_table_cols(&t, o, 15);
	bench_table_head(&t);
	for (int pt = 0; pt < o->npoints; pt++)
		for (int b = 0; b < o->nbatches; b++) {
			ring_table_row_head(&t, o, pt, b);
			for (int q = 0; q < o->nqueues; q++) {
				double p50 = ring_lat_median(r, r->p50, pt, b,
							     q),
				       p99 = ring_lat_median(r, r->p99, pt, b,
							     q);

				if (isnan(p50))
					bench_table_str(&t, "-");
				else
					bench_table_fmt(&t, "%.1f / %.1f",
							p50 / 1e3, p99 / 1e3);
			}
		}

	if (o->single)
		ring_print_single(f, o, r);
	if (bpq >= 0)
		ring_print_headline(f, o, r,
				    nratio ? exp(log_sum / nratio) : NAN,
				    nratio);
}

/* The single-thread table: ns per item, enqueue B then dequeue B. */
static void ring_print_single(FILE *f, const struct ring_opts *o,
			      const struct ring_results *r)
{
	struct bench_table t;

	fprintf(f,
		"\nsingle thread, enqueue B then dequeue B: ns per item "
		"(median of %u, %u ms each)\n",
		o->a.runs, o->single_ms);
	bench_table_init(&t, f);
	bench_table_col(&t, "B", 4, BENCH_RIGHT);
	for (int q = 0; q < o->nqueues; q++)
		bench_table_col(&t, o->queues[q]->name, 8, BENCH_RIGHT);
	bench_table_head(&t);
	for (int b = 0; b < o->nbatches; b++) {
		bench_table_fmt(&t, "%u", o->batches[b]);
		for (int q = 0; q < o->nqueues; q++)
			bench_table_num(&t, ring_single_median(r, b, q), 2);
	}
}

void ring_print_csv(FILE *f, const void *ctx)
{
	const struct ring_report *rep = ctx;
	const struct ring_opts *o = rep->o;
	const struct ring_results *r = rep->r;
	/* p50_ns, p99_ns: enqueue -> dequeue of every 64th item, that run */
	fprintf(f, "queue,P,C,B,run,Mitems_per_s,p50_ns,p99_ns\n");
	for (int pt = 0; pt < o->npoints; pt++)
		for (int b = 0; b < o->nbatches; b++)
			for (int q = 0; q < o->nqueues; q++)
				for (int run = 0; run < r->runs; run++) {
					size_t k = ring_index(r, run, pt, b, q);

					if (isnan(r->mitems[k]))
						continue;
					fprintf(f, "%s,%u,%u,%u,%d,%.3f,",
						o->queues[q]->name,
						o->points[pt][0],
						o->points[pt][1], o->batches[b],
						run, r->mitems[k]);
					bench_csv_num(f, r->p50[k], 1);
					fputc(',', f);
					bench_csv_num(f, r->p99[k], 1);
					fputc('\n', f);
				}
	if (!o->single)
		return;
	fprintf(f, "single,queue,B,ns_per_item\n");
	for (int b = 0; b < o->nbatches; b++)
		for (int q = 0; q < o->nqueues; q++)
			fprintf(f, "single,%s,%u,%.3f\n", o->queues[q]->name,
				o->batches[b], ring_single_median(r, b, q));
}

void ring_print_json(FILE *f, const void *ctx)
{
	const struct ring_report *rep = ctx;
	const struct ring_opts *o = rep->o;
	const struct ring_results *r = rep->r;
	const char *sep = "";
	double log_sum = 0;
	int nratio = 0;

	fprintf(f,
		"{\"benchmark\":\"ring\",\"capacity\":%u,\"ms\":%u,\"runs\":%u,"
		"\"seed\":%" PRIu64 ",\"cpus\":[",
		o->capacity, o->a.ms, o->a.runs, o->a.seed);
	for (int i = 0; i < o->a.ncpus; i++)
		fprintf(f, "%s%d", i ? "," : "", o->a.cpus[i]);
	fprintf(f, "],\n\"results\":[");
	for (int pt = 0; pt < o->npoints; pt++)
		for (int b = 0; b < o->nbatches; b++)
			for (int q = 0; q < o->nqueues; q++) {
				double med =
					ring_median(r, pt, b, q, NULL, NULL);

				if (isnan(med))
					continue;
				fprintf(f,
					"%s\n "
					"{\"queue\":\"%s\",\"P\":%u,\"C\":%u,"
					"\"B\":%u,"
					"\"median_mitems_per_s\":%.3f,\"runs\":"
					"[",
					sep, o->queues[q]->name,
					o->points[pt][0], o->points[pt][1],
					o->batches[b], med);
				for (int run = 0; run < r->runs; run++)
					fprintf(f, "%s%.3f", run ? "," : "",
						*ring_cell(r, run, pt, b, q));
				fprintf(f, "],\"median_p50_ns\":");
				ring_json_num(f, ring_lat_median(r, r->p50, pt,
								 b, q));
				fprintf(f, ",\"median_p99_ns\":");
				ring_json_num(f, ring_lat_median(r, r->p99, pt,
								 b, q));
				fputc('}', f);
				sep = ",";
			}
	fprintf(f, "],\n\"ratios\":[");
	sep = "";
	for (int pt = 0; pt < o->npoints; pt++)
		for (int b = 0; b < o->nbatches; b++) {
			int best_q;
			double ratio = ring_ratio(o, r, pt, b, &best_q);

			if (isnan(ratio))
				continue;
			fprintf(f,
				"%s\n "
				"{\"P\":%u,\"C\":%u,\"B\":%u,\"best_other\":\"%"
				"s\","
				"\"ratio\":%.4f}",
				sep, o->points[pt][0], o->points[pt][1],
				o->batches[b], o->queues[best_q]->name, ratio);
			sep = ",";
			if (ratio > 0) {
				log_sum += log(ratio);
				nratio++;
			}
		}
	fprintf(f, "],\n\"geomean_ratio\":");
	if (nratio)
		fprintf(f, "%.4f", exp(log_sum / nratio));
	else
		fprintf(f, "null");
	fprintf(f, ",\n\"single\":[");
	sep = "";
	if (o->single)
		for (int b = 0; b < o->nbatches; b++)
			for (int q = 0; q < o->nqueues; q++) {
				fprintf(f,
					"%s\n "
					"{\"queue\":\"%s\",\"B\":%u,\"ns_per_"
					"item\":%.3f}",
					sep, o->queues[q]->name, o->batches[b],
					ring_single_median(r, b, q));
				sep = ",";
			}
	fprintf(f, "]}\n");
}
