/* SPDX-License-Identifier: MIT */
/*
 * rdma/fill.c - `bpbench rdma-fill`: the random fill over RDMA, against a
 * raw reference doing the same work. A client exposes an N-byte buffer
 * through a bp_rdma_node; bp-target (started here on an ephemeral port, or
 * a running one given with --target) RDMA-writes the page generator's
 * output into it (bp_rdma_conn_fill); then every byte is checked against
 * bp_rdma_fill_page(seed, page index) page by page.
 *
 * The raw reference (fill_writer.c) is the same work without the library:
 * another process, as the daemon is, writes the same pages of the same
 * size, generated the same way with the same seed just before each is
 * posted, into the same buffer through the same region, with the raw
 * libfabric loop of rdma_raw.c at the stage's depth and batches, each
 * write delivered before it completes as the fill's are. Both are timed by
 * this process from the request to the answer that everything is in its
 * memory, and every byte of both is verified by the same check; the buffer
 * is reset to a byte no page holds before each run of either. So fill /
 * raw is what bp-target's path costs over a bare loop doing its job.
 *
 * Runs alternate fill, raw (--runs, default 9: the headline's target is
 * judged on medians of >= 9 interleaved runs), run i of both with seed +
 * i, after one unmeasured page of each (rxm connects on the first write).
 * The table gives each one's GB/s median [min-max], the ratio of the
 * medians and the median of per-run ratios, and the HEADLINE: fill / raw
 * >= 0.9 on the median of per-run ratios.
 *
 * Exit status: 0 all bytes verified, 1 a byte differs or a step failed,
 * 2 bad usage.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <batchpipe/error.h>
#include <batchpipe/rdma.h>

#include "lab/bpbench.h"
#include "rdma/fill_writer.h"
#include "rdma/rdma_target.h"

#define BENCH_CMD      "bpbench rdma-fill"
#define RF_MAX_RUNS    50
#define RF_RUNS	       9 /* the default, and what the target is judged on */
#define RF_TARGET      0.9
#define RF_PROGRESS_NS INT64_C(500000000)
#define RF_FILL_BYTE   0xa5 /* the buffer before each run: no page is that */

enum { RF_FILL, RF_RAW, RF_NVAR };
static const char *const rf_var_name[RF_NVAR] = {"fill", "raw"};

struct rf_opts {
	const char *provider; /* NULL: the daemon's */
	const char *node;
	const char *target;  /* HOST:PORT of a running daemon, or NULL */
	struct bench_args a; /* runs, seed, output */
	uint64_t bytes;
	unsigned page, rails;
	int no_raw, bytes_set;
};

static void rf_log(void *ctx, enum bp_log_level level, const char *msg)
{
	(void)ctx;
	if (level <= BP_LOG_WARN)
		fprintf(stderr, "%s: batchpipe says: %s\n", BENCH_CMD, msg);
}

struct rf_progress {
	int64_t t0, last;
};

static void rf_on_progress(void *ctx, uint64_t done, uint64_t len)
{
	struct rf_progress *p = ctx;
	int64_t now = bench_now_ns();

	if (now - p->last < RF_PROGRESS_NS && done != len)
		return;
	p->last = now;
	fprintf(stderr,
		"%s: %6.1f %%  %" PRIu64 " / %" PRIu64 " bytes  %.2f GB/s\n",
		BENCH_CMD, 100.0 * (double)done / (double)len, done, len,
		(double)done / (double)(now - p->t0));
}

/* Every byte of buf against the generator; returns the bytes that differ. */
static uint64_t rf_verify(const uint8_t *buf, uint64_t len, uint32_t page,
			  uint64_t seed, uint64_t *first_bad)
{
	uint8_t *want = bench_zalloc(page);
	uint64_t bad = 0;

	*first_bad = UINT64_MAX;
	for (uint64_t i = 0, off = 0; off < len; i++, off += page) {
		size_t n = len - off < page ? (size_t)(len - off) : page;

		bp_rdma_fill_page(seed, i, want, n);
		if (memcmp(want, buf + off, n) == 0)
			continue;
		for (size_t b = 0; b < n; b++)
			if (want[b] != buf[off + b]) {
				if (*first_bad == UINT64_MAX)
					*first_bad = off + b;
				bad++;
			}
	}
	free(want);
	return bad;
}

/* The check after every run of either: all len bytes, or die saying so. */
static void rf_check(const uint8_t *buf, uint64_t len, uint32_t page,
		     uint64_t seed, int var, unsigned run)
{
	uint64_t first, later, bad = rf_verify(buf, len, page, seed, &first);

	if (!bad)
		return;
	/* tell late data from wrong data before failing */
	bench_sleep_ns(1000000000);
	later = rf_verify(buf, len, page, seed, &first);
	bench_die("%s: VERIFY FAILED: %s run %u: %" PRIu64 " of %" PRIu64
		  " bytes differ right after it returned (first at offset "
		  "%" PRIu64 "), %" PRIu64 " still 1 s later\n",
		  BENCH_CMD, rf_var_name[var], run, bad, len, first, later);
}

static int rf_set_bytes(struct bench_args *a, const char *arg)
{
	((struct rf_opts *)a->ctx)->bytes_set = 1;
	return bench_parse_size(arg, &((struct rf_opts *)a->ctx)->bytes, 1,
				UINT64_MAX);
}

static int rf_set_page(struct bench_args *a, const char *arg)
{
	uint64_t v;

	if (bench_parse_size(arg, &v, 1, 64u << 20) || v % 8)
		return -1;
	((struct rf_opts *)a->ctx)->page = (unsigned)v;
	return 0;
}

static int rf_set_rails(struct bench_args *a, const char *arg)
{
	return bench_parse_uint(arg, &((struct rf_opts *)a->ctx)->rails, 1,
				BP_RDMA_MAX_RAILS);
}

static int rf_set_provider(struct bench_args *a, const char *arg)
{
	((struct rf_opts *)a->ctx)->provider = arg;
	return 0;
}

static int rf_set_node(struct bench_args *a, const char *arg)
{
	((struct rf_opts *)a->ctx)->node = arg;
	return 0;
}

static int rf_set_target(struct bench_args *a, const char *arg)
{
	if (!strchr(arg, ':'))
		return -1;
	((struct rf_opts *)a->ctx)->target = arg;
	return 0;
}

static int rf_set_no_raw(struct bench_args *a, const char *arg)
{
	(void)arg;
	((struct rf_opts *)a->ctx)->no_raw = 1;
	return 0;
}

static const struct bench_opt rf_options[] = {
	{"bytes", "N", rf_set_bytes,
	 "buffer size, K/M/G suffixes (default 256M; --quick 64M)"},
	{"page", "N", rf_set_page,
	 "page size, a multiple of 8 (default 64K; bp-target takes\n"
	 "pages up to its --stage-slot, 1M by default)"},
	{"rails", "N", rf_set_rails,
	 "rails of the daemon and of our node (default 1)"},
	{"provider", "P", rf_set_provider,
	 "libfabric provider (default tcp;ofi_rxm; with --target: the\n"
	 "daemon's)"},
	{"node", "ADDR", rf_set_node,
	 "address to bind (127.0.0.1; none for shm)"},
	BENCH_OPT_SEED("generator seed (default 1; run i uses seed + i)"),
	{"target", "HOST:PORT", rf_set_target,
	 "use a running bp-target (its control address) instead of\n"
	 "starting one"},
	BENCH_OPT_RUNS("fills and raw passes, alternating, each verified\n"
		       "(default 9: the headline's target is judged on >= 9)"),
	BENCH_OPT_QUICK("a smaller buffer (64M), the same 9 runs"),
	{"no-raw", NULL, rf_set_no_raw, "skip the raw reference"},
	BENCH_OPT_CSV("CSV on stdout, a row per run: run,seed,provider,rails,"
		      "bytes,\npage,fill_Gbps,fill_Mpages_per_s,raw_Gbps,"
		      "raw_Mops_per_s,\nverified_bytes,raw_verified_bytes"),
	BENCH_OPT_OUT,
	BENCH_OPT_NAME,
	BENCH_OPT_HELP,
	BENCH_OPT_END,
};

static const struct bench_cmd rf_cmd = {
	.name = "rdma-fill",
	.about = "The random fill: bp-target RDMA-writes generated pages "
		 "into a buffer of\nthis process, against a raw reference "
		 "doing the same work: a writer process\n(a fork of this one) "
		 "writes the same pages, generated the same way just\nbefore "
		 "each is posted, into the same buffer with the raw libfabric "
		 "loop\n(depth 64, post 16, reap 16: the RDMA stage's "
		 "defaults; each write delivered\nbefore it completes, as the "
		 "fill's). Runs alternate fill, raw; this process\ntimes both "
		 "from its request to the answer that all pages are in its "
		 "memory,\nand verifies every byte of both. The table: GB/s "
		 "median [min-max] of each,\nfill / raw as the ratio of "
		 "medians and the median of per-run ratios, and\nthe "
		 "HEADLINE: fill / raw >= 0.9 (median of per-run ratios, "
		 ">= 9 runs).\n",
	.opts = rf_options,
	.epilog = "Progress on stderr about every 0.5 s. Exit 0: every byte "
		  "verified; 1: a byte\ndiffers or a step failed; 2: bad "
		  "usage.\n",
	.max_runs = RF_MAX_RUNS,
};

static int rf_parse(int argc, char **argv, struct rf_opts *o)
{
	int rc;

	memset(o, 0, sizeof(*o));
	bench_args_init(&o->a, &rf_cmd, o);
	o->a.runs = RF_RUNS;
	o->bytes = 256ull << 20;
	o->page = 65536;
	o->rails = 1;
	o->node = "127.0.0.1";
	rc = bench_opts_parse(&o->a, argc, argv);
	if (rc != BENCH_OPTS_RUN)
		return rc;
	if (o->a.quick && !o->bytes_set)
		o->bytes = 64ull << 20;
	return bench_opts_ready(&o->a);
}

/* What the printers get (bench_emit's ctx): one row per run. */
struct rf_report {
	const struct rf_opts *o;
	const char *provider;
	uint64_t pages, verified[RF_NVAR];
	double gbps[RF_NVAR][RF_MAX_RUNS], mops[RF_NVAR][RF_MAX_RUNS];
	double ratio[RF_MAX_RUNS]; /* fill / raw of the same run */
};

/* Median of n values, leaving v in run order (bench_median sorts). */
static double rf_median(const double *v, unsigned n, double *min, double *max)
{
	double tmp[RF_MAX_RUNS];

	memcpy(tmp, v, sizeof(*v) * n);
	return bench_median_range(tmp, (int)n, min, max);
}

static void rf_print_csv(FILE *f, const void *ctx)
{
	const struct rf_report *rep = ctx;
	const struct rf_opts *o = rep->o;

	fprintf(f, "run,seed,provider,rails,bytes,page,fill_Gbps,"
		   "fill_Mpages_per_s,raw_Gbps,raw_Mops_per_s,verified_bytes,"
		   "raw_verified_bytes\n");
	for (unsigned run = 0; run < o->a.runs; run++) {
		fprintf(f, "%u,%" PRIu64 ",%s,%u,%" PRIu64 ",%u,", run,
			o->a.seed + run, rep->provider, o->rails, o->bytes,
			o->page);
		for (int v = 0; v < RF_NVAR; v++) {
			bench_csv_num(f, rep->gbps[v][run], 3);
			fputc(',', f);
			bench_csv_num(f, rep->mops[v][run], 4);
			fputc(',', f);
		}
		fprintf(f, "%" PRIu64 ",", o->bytes);
		if (!o->no_raw)
			fprintf(f, "%" PRIu64, o->bytes);
		fputc('\n', f);
	}
}

/* One variant's row: GB/s median [min-max], M pages/s median. */
static void rf_print_row(FILE *f, const struct rf_report *rep, int v,
			 const char *what)
{
	unsigned runs = rep->o->a.runs;
	double gb[RF_MAX_RUNS], lo, hi, med;

	for (unsigned r = 0; r < runs; r++)
		gb[r] = rep->gbps[v][r] / 8;
	char range[48];

	med = rf_median(gb, runs, &lo, &hi);
	snprintf(range, sizeof(range), "[%.2f-%.2f]", lo, hi);
	fprintf(f, "  %-5s %6.2f %-15s %9.4f  %s\n", rf_var_name[v], med, range,
		rf_median(rep->mops[v], runs, NULL, NULL), what);
}

static void rf_print_table(FILE *f, const void *ctx)
{
	const struct rf_report *rep = ctx;
	const struct rf_opts *o = rep->o;
	unsigned runs = o->a.runs;
	double of_medians = NAN, per_run = NAN;

	fprintf(f,
		"rdma-fill: provider %s, rails %u, %" PRIu64
		" bytes in %" PRIu64 " pages of %u, seeds %" PRIu64 "..%" PRIu64
		", %u run%s%s\n",
		rep->provider, o->rails, o->bytes, rep->pages, o->page,
		o->a.seed, o->a.seed + runs - 1, runs, runs > 1 ? "s" : "",
		o->no_raw ? "" : " of each, fill and raw alternating");
	fprintf(f, "  %-5s %6s %-15s %9s  (medians)\n", "", "GB/s", "[min-max]",
		"M pages/s");
	rf_print_row(f, rep, RF_FILL,
		     "bp-target writes generated pages into this process");
	if (!o->no_raw) {
		rf_print_row(f, rep, RF_RAW,
			     "a writer process, the same pages into the same "
			     "buffer (rdma_raw.c's loop)");
		of_medians = rf_median(rep->gbps[RF_FILL], runs, NULL, NULL) /
			     rf_median(rep->gbps[RF_RAW], runs, NULL, NULL);
		per_run = rf_median(rep->ratio, runs, NULL, NULL);
		fprintf(f,
			"  fill / raw: %.3f (ratio of medians), %.3f (median "
			"of per-run ratios)\n",
			of_medians, per_run);
	}
	fprintf(f,
		"  verified: %" PRIu64 " bytes of fills, %" PRIu64
		" of raw passes, every byte equal to bp_rdma_fill_page\n",
		rep->verified[RF_FILL], rep->verified[RF_RAW]);

	fprintf(f,
		"\nHEADLINE (target; median of per-run ratios over "
		">= %d interleaved runs)\n",
		RF_RUNS);
	fprintf(f, "  fill / raw >= %.1f (%s, %u-byte pages): ", RF_TARGET,
		rep->provider, o->page);
	if (o->no_raw)
		fprintf(f, "n/a (--no-raw)\n");
	else if (runs < RF_RUNS)
		fprintf(f, "n/a (%u runs, judged on >= %d; %.3f)\n", runs,
			RF_RUNS, per_run);
	else
		fprintf(f, "%s (%.3f, ratio of medians %.3f)\n",
			per_run >= RF_TARGET ? "met" : "MISSED", per_run,
			of_medians);
}

/* Fills and raw passes: where they write and how they are started. */
struct rf_run {
	const struct rf_opts *o;
	struct bp_rdma_conn *conn;
	struct bp_rdma_peer_desc desc; /* our buffer's region */
	struct fw_writer writer;
	uint8_t *buf;
};

/* One fill of len bytes under seed (progress on stderr unless quiet);
 * returns its ns. */
static int64_t rf_fill_once(struct rf_run *x, uint64_t len, uint64_t seed,
			    bool quiet)
{
	struct rf_progress pr;
	int64_t t0;
	int rc;

	pr.t0 = pr.last = t0 = bench_now_ns();
	rc = bp_rdma_conn_fill(x->conn, &x->desc, len, x->o->page, seed,
			       quiet ? NULL : rf_on_progress, &pr);
	if (rc)
		bench_die("%s: bp_rdma_conn_fill: %s\n", BENCH_CMD,
			  bp_strerror(rc));
	return bench_now_ns() - t0;
}

/* One raw pass of len bytes under seed; returns its ns. */
static int64_t rf_raw_once(struct rf_run *x, uint64_t len, uint64_t seed)
{
	uint64_t pages = (len + x->o->page - 1) / x->o->page;
	/* a writer slower than 20 MB/s is stuck, not slow */
	int64_t timeout = INT64_C(10000000000) + (int64_t)(len * 50);
	struct fw_result res;
	char why[300];
	int64_t t0 = bench_now_ns(), t1;
	int rc = fw_run(&x->writer, seed, len, x->o->page, pages, timeout, &res,
			why, sizeof(why));

	t1 = bench_now_ns();
	if (rc)
		bench_die("%s: raw pass: %s\n", BENCH_CMD, why);
	if (res.posted != pages || res.completed != pages)
		bench_die("%s: VERIFY FAILED: raw pass: %" PRIu64
			  " posts, %" PRIu64 " completions for %" PRIu64
			  " pages\n",
			  BENCH_CMD, res.posted, res.completed, pages);
	return t1 - t0;
}

/* Run `run` of variant v: reset, write, check, record. */
static void rf_measure(struct rf_run *x, struct rf_report *rep, int v,
		       unsigned run)
{
	const struct rf_opts *o = x->o;
	uint64_t seed = o->a.seed + run;
	int64_t ns;

	memset(x->buf, RF_FILL_BYTE, o->bytes);
	ns = v == RF_FILL ? rf_fill_once(x, o->bytes, seed, false)
			  : rf_raw_once(x, o->bytes, seed);
	rf_check(x->buf, o->bytes, o->page, seed, v, run);
	rep->verified[v] += o->bytes;
	rep->gbps[v][run] = (double)o->bytes * 8 / (double)ns;
	rep->mops[v][run] = (double)rep->pages / (double)ns * 1e3;
}

int bench_rdma_fill_main(int argc, char **argv)
{
	struct rf_opts o;
	struct rt_daemon d = {0};
	struct bp_rdma_conn_config cc;
	struct bp_rdma_node_config nc;
	struct bp_rdma_node *node;
	struct bp_rdma_region *reg;
	static struct rf_run x;
	static struct rf_report rep;
	char host[64], why[512], provider[64];
	const char *node_addr;
	unsigned port;
	uint64_t warm;
	int rc;

	rc = rf_parse(argc, argv, &o);
	if (rc != BENCH_OPTS_RUN)
		return rc;
	setenv("FI_TCP_IFACE", "lo", 0); /* loopback only */
	x.o = &o;
	/* first: the writer is a copy of this process before it opens any
	 * endpoint or starts a thread */
	if (!o.no_raw && (rc = fw_start(&x.writer)))
		bench_die("%s: the writer process: %s\n", BENCH_CMD,
			  strerror(-rc));
	rep.pages = (o.bytes + o.page - 1) / o.page;
	snprintf(provider, sizeof(provider), "%s",
		 o.provider ? o.provider : "tcp;ofi_rxm");
	node_addr = strcmp(provider, "shm") ? o.node : NULL;
	if (o.target) {
		if (sscanf(o.target, "%63[^:]:%u", host, &port) != 2)
			bench_die("%s: bad --target '%s'\n", BENCH_CMD,
				  o.target);
	} else {
		rc = rt_daemon_start(provider, node_addr, NULL, o.rails,
				     o.bytes, &d, why, sizeof(why));
		if (rc)
			bench_die("%s: %s\n", BENCH_CMD, why);
		snprintf(host, sizeof(host), "%s", d.host);
		port = d.port;
		fprintf(stderr,
			"%s: bp-target pid %d on %s:%u provider=%s "
			"rails=%u\n",
			BENCH_CMD, (int)d.pid, host, port, d.provider, d.rails);
	}
	bp_rdma_conn_config_init(&cc);
	cc.host = host;
	cc.port = port;
	cc.provider = o.target ? o.provider : provider;
	cc.rails = o.rails;
	/* the fill writes into our buffer: of the daemon's memory it needs
	 * no more than the smallest region */
	cc.region_len = o.bytes < 4096 ? o.bytes : 4096;
	cc.log = rf_log;
	rc = bp_rdma_connect(&cc, &x.conn);
	if (rc)
		bench_die("%s: bp_rdma_connect %s:%u: %s\n", BENCH_CMD, host,
			  port, bp_strerror(rc));
	snprintf(provider, sizeof(provider), "%s",
		 bp_rdma_conn_provider(x.conn));
	node_addr = strcmp(provider, "shm") ? o.node : NULL;

	bp_rdma_node_config_init(&nc);
	nc.provider = provider;
	nc.node = node_addr;
	nc.rails = o.rails;
	nc.progress_threads = true; /* tcp lands writes while we poll */
	nc.log = rf_log;
	rc = bp_rdma_node_create(&nc, &node);
	if (rc)
		bench_die("%s: bp_rdma_node_create(%s): %s\n", BENCH_CMD,
			  provider, bp_strerror(rc));
	x.buf = bench_zalloc(o.bytes); /* touched: no page faults in a run */
	rc = bp_rdma_node_expose(node, x.buf, o.bytes, NULL, &reg);
	if (rc)
		bench_die("%s: bp_rdma_node_expose: %s\n", BENCH_CMD,
			  bp_strerror(rc));
	bp_rdma_region_describe(reg, &x.desc);
	if (!o.no_raw && fw_open(&x.writer, provider, node_addr, &x.desc,
				 o.page, why, sizeof(why)))
		bench_die("%s: raw writer: %s\n", BENCH_CMD, why);

	/* one page of each, not measured: connections are made on the
	 * first write, and neither run 0 should pay for them */
	warm = o.bytes < o.page ? o.bytes : o.page;
	rf_fill_once(&x, warm, o.a.seed, true);
	if (!o.no_raw)
		rf_raw_once(&x, warm, o.a.seed);

	for (unsigned run = 0; run < o.a.runs; run++) {
		rf_measure(&x, &rep, RF_FILL, run);
		if (!o.no_raw) {
			rf_measure(&x, &rep, RF_RAW, run);
			rep.ratio[run] =
				rep.gbps[RF_FILL][run] / rep.gbps[RF_RAW][run];
		} else {
			rep.gbps[RF_RAW][run] = rep.mops[RF_RAW][run] = NAN;
			rep.ratio[run] = NAN;
		}
		fprintf(stderr, "%s: run %u: fill %.2f GB/s", BENCH_CMD, run,
			rep.gbps[RF_FILL][run] / 8);
		if (!o.no_raw)
			fprintf(stderr, ", raw %.2f GB/s",
				rep.gbps[RF_RAW][run] / 8);
		fprintf(stderr, ", every byte verified\n");
	}

	rep.o = &o;
	rep.provider = provider;
	rc = bench_emit(&o.a, rf_print_csv, rf_print_table, NULL, &rep);

	fw_stop(&x.writer);
	bp_rdma_region_close(reg);
	bp_rdma_conn_close(x.conn);
	bp_rdma_node_destroy(node);
	free(x.buf);
	rt_daemon_stop(&d);
	return rc;
}
