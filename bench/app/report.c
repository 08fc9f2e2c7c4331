/* SPDX-License-Identifier: MIT */
/*
 * report.c - what `bpbench app` reports: per B, each variant's median
 * throughput with its range, batchpipe's ratios to the mutex queue and to
 * the ceiling (medians of per-run ratios: the runs of one index ran side by
 * side), each variant's CPU time per job; the headline against the targets;
 * the CSV.
 */
#include <inttypes.h>
#include <math.h>

#include "app/app.h"

/* The targets of the headline. */
#define APP_TARGET_MUTEX       1.0 /* x the mutex queue, every B in 1..64 */
#define APP_TARGET_MUTEX_SMALL 1.3 /* ... and at B <= 4 */
#define APP_TARGET_CEILING     0.9 /* of the ceiling at B >= 32 */

static double app_median_mps(const struct app_results *r, int b, int v,
			     double *min, double *max)
{
	double x[APP_MAX_RUNS];

	for (int run = 0; run < r->runs; run++)
		x[run] = app_cell(r, run, b, v)->mps;
	return bench_median_range(x, r->runs, min, max);
}

static double app_median_cpu(const struct app_results *r, int b, int v)
{
	double x[APP_MAX_RUNS];

	for (int run = 0; run < r->runs; run++)
		x[run] = app_cell(r, run, b, v)->cpu_ns_job;
	return bench_median(x, r->runs);
}

/* The median over runs of batchpipe's throughput / v's in the same run. */
static double app_ratio(const struct app_results *r, int b, int v)
{
	double x[APP_MAX_RUNS];

	for (int run = 0; run < r->runs; run++)
		x[run] = app_cell(r, run, b, APP_BATCHPIPE)->mps /
			 app_cell(r, run, b, v)->mps;
	return bench_median(x, r->runs);
}

static uint64_t app_slot_waits(const struct app_results *r, int v)
{
	uint64_t n = 0;

	for (int run = 0; run < r->runs; run++)
		for (int b = 0; b < r->nbatches; b++)
			n += app_cell(r, run, b, v)->slot_waits;
	return n;
}

void app_print_csv(FILE *f, const void *report)
{
	const struct app_report *rep = report;
	const struct app_opts *o = rep->o;
	const struct app_results *r = rep->r;
	uint64_t jobs = (uint64_t)o->producers * o->jobs;

	fprintf(f, "variant,B,run,jobs,Mjobs_per_s,cpu_ns_per_job,"
		   "slot_waits\n");
	for (int b = 0; b < r->nbatches; b++)
		for (int v = 0; v < APP_NVARIANTS; v++)
			for (int run = 0; o->run[v] && run < r->runs; run++) {
				const struct app_outcome *c =
					app_cell(r, run, b, v);

				fprintf(f, "%s,%u,%d,%" PRIu64 ",",
					app_variant_names[v], o->batches[b],
					run, jobs);
				bench_csv_num(f, c->mps, 4);
				fputc(',', f);
				bench_csv_num(f, c->cpu_ns_job, 1);
				fprintf(f, ",%" PRIu64 "\n", c->slot_waits);
			}
	fprintf(f, "B,batchpipe_Mjobs_per_s,mutex_Mjobs_per_s,"
		   "ceiling_Mjobs_per_s,batchpipe_over_mutex,"
		   "batchpipe_over_ceiling,batchpipe_cpu_ns_per_job,"
		   "mutex_cpu_ns_per_job,ceiling_cpu_ns_per_job\n");
	for (int b = 0; b < r->nbatches; b++) {
		fprintf(f, "%u", o->batches[b]);
		for (int v = 0; v < APP_NVARIANTS; v++) {
			fputc(',', f);
			bench_csv_num(f, app_median_mps(r, b, v, NULL, NULL),
				      4);
		}
		fputc(',', f);
		bench_csv_num(f, app_ratio(r, b, APP_MUTEX), 3);
		fputc(',', f);
		bench_csv_num(f, app_ratio(r, b, APP_CEILING), 3);
		for (int v = 0; v < APP_NVARIANTS; v++) {
			fputc(',', f);
			bench_csv_num(f, app_median_cpu(r, b, v), 1);
		}
		fputc('\n', f);
	}
}

static void app_print_legend(FILE *f, const struct app_opts *o)
{
	char cpus[256];

	bench_cpus_format(o->a.cpus, o->a.ncpus, cpus, sizeof(cpus));
	fprintf(f,
		"bpbench app: %u producers x %u jobs of %d bytes, work = "
		"CRC32C (slice-by-8), %u workers,\none ordered sink that "
		"checks every job; %u runs per B, interleaved; CPUs %s; "
		"ceiling on %u\npinned threads; %u job slots per producer; "
		"seed %" PRIu64 "\n\n",
		o->producers, o->jobs, APP_PAYLOAD, o->workers, o->a.runs, cpus,
		o->ceiling_threads, o->pool, o->a.seed);
}

static void app_print_rows(FILE *f, const struct app_opts *o,
			   const struct app_results *r)
{
	struct bench_table t;

	bench_table_init(&t, f);
	bench_table_col(&t, "B", 4, BENCH_RIGHT);
	for (int v = 0; v < APP_NVARIANTS; v++)
		bench_table_col(&t, app_variant_names[v], 19, BENCH_RIGHT);
	bench_table_col(&t, "bp/mutex", 0, BENCH_RIGHT);
	bench_table_col(&t, "bp/ceiling", 0, BENCH_RIGHT);
	bench_table_col(&t, "cpu:bp", 7, BENCH_RIGHT);
	bench_table_col(&t, "mutex", 6, BENCH_RIGHT);
	bench_table_col(&t, "ceiling", 0, BENCH_RIGHT);
	fprintf(f, "throughput: M jobs/s, median [min-max]; ratios: median "
		   "of per-run ratios; cpu: process CPU ns per job\n");
	bench_table_head(&t);
	for (int b = 0; b < r->nbatches; b++) {
		bench_table_fmt(&t, "%u", o->batches[b]);
		for (int v = 0; v < APP_NVARIANTS; v++) {
			double lo, hi, m = app_median_mps(r, b, v, &lo, &hi);

			if (isnan(m))
				bench_table_str(&t, "-");
			else
				bench_table_fmt(&t, "%.2f [%.2f-%.2f]", m, lo,
						hi);
		}
		if (isnan(app_ratio(r, b, APP_MUTEX)))
			bench_table_str(&t, "-");
		else
			bench_table_fmt(&t, "%.2fx",
					app_ratio(r, b, APP_MUTEX));
		bench_table_num(&t, app_ratio(r, b, APP_CEILING), 2);
		for (int v = 0; v < APP_NVARIANTS; v++)
			bench_table_num(&t, app_median_cpu(r, b, v), 0);
	}
}

/*
 * One headline line: batchpipe's ratio to variant v at every measured B in
 * [lo, hi] against target; "met" only if every one of them meets it.
 */
static void app_headline(FILE *f, const struct app_opts *o,
			 const struct app_results *r, int v, unsigned lo,
			 unsigned hi, double target, const char *what)
{
	int n = 0, met = 1;

	fprintf(f, "  batchpipe >= %.1f%s %s: ", target,
		v == APP_MUTEX ? "x the mutex queue" : " of the ceiling", what);
	if (!o->run[APP_BATCHPIPE] || !o->run[v]) {
		fprintf(f, "not measured (--variants)\n");
		return;
	}
	for (int b = 0; b < r->nbatches; b++) {
		if (o->batches[b] < lo || o->batches[b] > hi)
			continue;
		met &= app_ratio(r, b, v) >= target;
		n++;
	}
	if (!n) {
		fprintf(f, "not measured (no such B in --batches)\n");
		return;
	}
	fprintf(f, "%s (", met ? "met" : "MISSED");
	for (int b = 0, i = 0; b < r->nbatches; b++) {
		if (o->batches[b] < lo || o->batches[b] > hi)
			continue;
		fprintf(f, "%sB=%u %.2f%s", i++ ? ", " : "", o->batches[b],
			app_ratio(r, b, v), v == APP_MUTEX ? "x" : "");
	}
	fprintf(f, ")\n");
}

void app_print_table(FILE *f, const void *report)
{
	const struct app_report *rep = report;
	const struct app_opts *o = rep->o;
	const struct app_results *r = rep->r;
	uint64_t waits[APP_NVARIANTS];

	app_print_legend(f, o);
	app_print_rows(f, o, r);
	for (int v = 0; v < APP_NVARIANTS; v++)
		waits[v] = app_slot_waits(r, v);
	if (waits[APP_BATCHPIPE] || waits[APP_MUTEX])
		fprintf(f,
			"(a producer found all its --pool job slots in flight "
			"and waited, yielding,\nfor the sink to free one: "
			"%" PRIu64 " times in batchpipe's runs, %" PRIu64
			" in the mutex queue's)\n",
			waits[APP_BATCHPIPE], waits[APP_MUTEX]);
	fprintf(f, "\nHEADLINE (targets; medians of per-run ratios)\n");
	app_headline(f, o, r, APP_MUTEX, 1, 64, APP_TARGET_MUTEX,
		     "at every B in 1..64");
	app_headline(f, o, r, APP_MUTEX, 1, 4, APP_TARGET_MUTEX_SMALL,
		     "at B <= 4");
	app_headline(f, o, r, APP_CEILING, 32, UINT32_MAX, APP_TARGET_CEILING,
		     "at B >= 32");
}
