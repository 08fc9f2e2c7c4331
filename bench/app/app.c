/* SPDX-License-Identifier: MIT */
/*
 * app.c - `bpbench app`: a user's application, reproduced. P producer
 * threads (default 4) make J jobs each (default 1,000,000), every job a
 * 256-byte payload filled from its numbers; W worker threads (default 2)
 * compute the CRC32C of each payload; one sink thread receives the results
 * in submission order, checks every CRC against the value computed
 * beforehand with another CRC32C implementation, checks the order, and
 * counts them. A run that loses, duplicates, reorders or miscomputes a job
 * dies with VERIFY FAILED (exit 1).
 *
 * Three variants, at every B of --batches:
 *  (a) batchpipe  producer handles (max_batch = B) -> bp_pipeline, W
 *                 workers, ordered, default waits (app/run_batchpipe.c);
 *  (b) mutex      a mutex + condvar job queue (B jobs per lock hold), a
 *                 second one for results, a reorder buffer in the sink
 *                 (app/run_mutex.c);
 *  (c) ceiling    the same work on min(W, CPUs) pinned threads with no
 *                 hand-off at all (app/ceiling.c).
 * Interleaving: for each run index, the B values in a shuffled order, and
 * at each B the three variants in a shuffled order, back to back; so the
 * ratios are taken per run, between runs made side by side, and their
 * medians reported (app/report.c).
 */
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "app/app.h"

/* ---- the sweep ---------------------------------------------------------- */

static int app_nvariants(const struct app_opts *o)
{
	int n = 0;

	for (int v = 0; v < APP_NVARIANTS; v++)
		n += o->run[v];
	return n;
}

static void app_sweep(const struct app_opts *o, struct app_results *res)
{
	uint64_t rng = o->a.seed;
	int border[APP_MAX_BATCHES], vorder[APP_NVARIANTS];

	for (int run = 0; run < (int)o->a.runs; run++) {
		int64_t t0 = bench_now_ns();

		bench_order(border, o->nbatches, &rng);
		for (int i = 0; i < o->nbatches; i++) {
			int b = border[i];

			bench_order(vorder, APP_NVARIANTS, &rng);
			for (int w = 0; w < APP_NVARIANTS; w++) {
				int v = vorder[w];

				if (o->run[v])
					app_run_verified(
						o, (enum app_variant)v,
						o->batches[b],
						app_cell(res, run, b, v));
			}
		}
		fprintf(stderr, "bpbench app: run %d/%u: %d points (%.1f s)\n",
			run + 1, o->a.runs, o->nbatches * app_nvariants(o),
			(double)(bench_now_ns() - t0) / 1e9);
	}
}

/* ---- options ------------------------------------------------------------ */

struct app_parse {
	struct app_opts *o;
	int batches_set, jobs_set;
};

static int app_set_batches(struct bench_args *a, const char *arg)
{
	struct app_parse *p = a->ctx;

	p->o->nbatches = bench_parse_uints(arg, p->o->batches, APP_MAX_BATCHES,
					   1, APP_MAX_BATCH);
	p->batches_set = 1;
	return p->o->nbatches < 0 ? -1 : 0;
}

/* A number option into the unsigned at `off` in struct app_opts. */
static int app_set_uint(struct bench_args *a, const char *arg, size_t off,
			unsigned lo, unsigned hi)
{
	unsigned *v =
		(unsigned *)((char *)((struct app_parse *)a->ctx)->o + off);

	return bench_parse_uint(arg, v, lo, hi) ? -1 : 0;
}

static int app_set_jobs(struct bench_args *a, const char *arg)
{
	((struct app_parse *)a->ctx)->jobs_set = 1;
	return app_set_uint(a, arg, offsetof(struct app_opts, jobs), 1,
			    APP_MAX_JOBS_ALL);
}

static int app_set_producers(struct bench_args *a, const char *arg)
{
	return app_set_uint(a, arg, offsetof(struct app_opts, producers), 1,
			    APP_MAX_THREADS);
}

static int app_set_workers(struct bench_args *a, const char *arg)
{
	return app_set_uint(a, arg, offsetof(struct app_opts, workers), 1,
			    APP_MAX_THREADS);
}

static int app_set_pool(struct bench_args *a, const char *arg)
{
	return app_set_uint(a, arg, offsetof(struct app_opts, pool), 2,
			    APP_MAX_POOL);
}

static int app_set_variants(struct bench_args *a, const char *arg)
{
	struct app_opts *o = ((struct app_parse *)a->ctx)->o;
	char names[256];
	const char *v[APP_NVARIANTS + 1];
	int n;

	if (strlen(arg) >= sizeof(names))
		return -1;
	strcpy(names, arg);
	n = bench_parse_names(names, v, APP_NVARIANTS + 1);
	if (n < 0)
		return -1;
	memset(o->run, 0, sizeof(o->run));
	for (int i = 0; i < n; i++) {
		int found = -1;

		for (int k = 0; k < APP_NVARIANTS; k++)
			if (!strcmp(v[i], app_variant_names[k]))
				found = k;
		if (found < 0 || o->run[found]) {
			fprintf(stderr, "%s: variant '%s' %s\n", a->prog, v[i],
				found < 0 ? "unknown" : "given twice");
			return -2;
		}
		o->run[found] = true;
	}
	return 0;
}

static const struct bench_opt app_options[] = {
	{"jobs", "N", app_set_jobs,
	 "jobs per producer (default 1000000; --quick: 25000)"},
	{"batches", "LIST", app_set_batches,
	 "batch sizes B, 1..1024 (default 1,2,4,8,16,32,64;\n--quick: 1,4,32)"},
	{"variants", "LIST", app_set_variants,
	 "which of batchpipe, mutex, ceiling to run (default: all;\nthe "
	 "ratios need batchpipe and the other one)"},
	{"producers", "N", app_set_producers, "producer threads (default 4)"},
	{"workers", "N", app_set_workers, "worker threads (default 2)"},
	{"pool", "N", app_set_pool,
	 "job slots per producer, at least 2 x the largest B\n(default 8192: "
	 "more than either variant holds in flight)"},
	BENCH_OPT_RUNS("runs per B and variant (default 5; --quick: 3)"),
	BENCH_OPT_CPUS("CPUs the run may use, e.g. \"0,1\" or \"0-3\": every "
		       "thread of\n(a) and (b) is confined to them, unpinned; "
		       "the ceiling pins\none thread on each of the first "
		       "min(workers, CPUs) (default:\nevery CPU this process "
		       "may use)"),
	BENCH_OPT_SEED("seed of the run-order shuffle (default 1)"),
	BENCH_OPT_QUICK("the short settings above, a few seconds on 2 CPUs"),
	BENCH_OPT_CSV("CSV on stdout instead of the table: a row per run\n"
		      "(variant,B,run,jobs,Mjobs_per_s,cpu_ns_per_job,slot_"
		      "waits),\nthen a row per B (medians and ratios)"),
	BENCH_OPT_OUT,
	BENCH_OPT_NAME,
	BENCH_OPT_HELP,
	BENCH_OPT_END,
};

static const struct bench_cmd app_cmd = {
	.name = "app",
	.about = "A user's application: P producers x J jobs of 256 bytes, W "
		 "workers computing\neach job's CRC32C, one sink that gets "
		 "them in submission order and checks\nevery one. batchpipe "
		 "(producer handles, ordered pipeline, default waits)\nagainst "
		 "a mutex + condvar queue with a reorder buffer, and against "
		 "the\ncompute ceiling (no hand-off); interleaved runs, "
		 "medians, every run verified.\n",
	.opts = app_options,
	.epilog = "Progress goes to stderr. Exit status: 0 ok, 1 a run failed "
		  "its verification\n(or --out could not be written), 2 bad "
		  "usage.\n",
	.max_runs = APP_MAX_RUNS,
};

static int app_parse(int argc, char **argv, struct app_opts *o)
{
	struct app_parse p = {.o = o};
	unsigned maxb = 0;
	int rc;

	memset(o, 0, sizeof(*o));
	o->producers = 4;
	o->workers = 2;
	o->pool = 8192;
	for (int v = 0; v < APP_NVARIANTS; v++)
		o->run[v] = true;
	bench_args_init(&o->a, &app_cmd, &p);
	rc = bench_opts_parse(&o->a, argc, argv);
	if (rc != BENCH_OPTS_RUN)
		return rc;
	for (int i = 1; i < o->a.ncpus; i++)
		for (int j = 0; j < i; j++)
			if (o->a.cpus[j] == o->a.cpus[i])
				return bench_usage_error(
					&o->a, "bad --cpus: CPU %d given twice",
					o->a.cpus[i]);
	if (!p.jobs_set)
		o->jobs = o->a.quick ? 25000 : 1000000;
	if ((uint64_t)o->jobs * o->producers > APP_MAX_JOBS_ALL)
		return bench_usage_error(&o->a,
					 "--producers x --jobs is over %u",
					 APP_MAX_JOBS_ALL);
	if (!p.batches_set)
		o->nbatches = bench_parse_uints(
			o->a.quick ? "1,4,32" : "1,2,4,8,16,32,64", o->batches,
			APP_MAX_BATCHES, 1, APP_MAX_BATCH);
	for (int b = 0; b < o->nbatches; b++) {
		for (int c = 0; c < b; c++)
			if (o->batches[c] == o->batches[b])
				return bench_usage_error(&o->a,
							 "B=%u given twice",
							 o->batches[b]);
		if (o->batches[b] > maxb)
			maxb = o->batches[b];
	}
	if (o->pool < 2 * maxb)
		return bench_usage_error(&o->a,
					 "--pool %u is less than 2 x B=%u",
					 o->pool, maxb);
	if (o->a.quick && !o->a.runs_set)
		o->a.runs = 3;
	o->ceiling_threads = o->workers < (unsigned)o->a.ncpus
				     ? o->workers
				     : (unsigned)o->a.ncpus;
	return bench_opts_ready(&o->a);
}

/* Confine this thread, and so every thread it creates, to --cpus. */
static void app_confine(const struct app_opts *o)
{
	cpu_set_t set;
	int rc;

	CPU_ZERO(&set);
	for (int i = 0; i < o->a.ncpus; i++)
		CPU_SET(o->a.cpus[i], &set);
	rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	if (rc)
		bench_die("bpbench app: cannot confine to --cpus: %s\n",
			  strerror(rc));
}

int bench_app_main(int argc, char **argv)
{
	struct app_opts o;
	struct app_results res;
	struct app_report rep = {&o, &res};
	size_t ncell;
	int64_t t0;
	int rc;

	rc = app_parse(argc, argv, &o);
	if (rc != BENCH_OPTS_RUN)
		return rc;
	app_fault_read();
	app_confine(&o);
	t0 = bench_now_ns();
	app_crc32c_init();
	app_expected_build(&o);
	fprintf(stderr,
		"bpbench app: CRC32C checked (\"123456789\" = e3069283); "
		"expected CRCs of %" PRIu64 " jobs with %s in %.1f s\n",
		(uint64_t)o.producers * o.jobs, app_crc32c_ref_name(),
		(double)(bench_now_ns() - t0) / 1e9);

	res.runs = (int)o.a.runs;
	res.nbatches = o.nbatches;
	ncell = (size_t)o.a.runs * (size_t)o.nbatches * APP_NVARIANTS;
	res.cell = bench_zalloc(sizeof(*res.cell) * ncell);
	for (size_t i = 0; i < ncell; i++)
		res.cell[i].mps = res.cell[i].cpu_ns_job = NAN;
	app_sweep(&o, &res);
	fprintf(stderr,
		"bpbench app: done in %.1f s, every run verified (%" PRIu64
		" jobs checked)\n",
		(double)(bench_now_ns() - t0) / 1e9,
		(uint64_t)o.producers * o.jobs * o.a.runs *
			(uint64_t)o.nbatches * (uint64_t)app_nvariants(&o));

	rc = bench_emit(&o.a, app_print_csv, app_print_table, NULL, &rep);
	free(res.cell);
	free((void *)o.expected);
	app_run_cleanup();
	return rc;
}
