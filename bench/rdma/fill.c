/* SPDX-License-Identifier: MIT */
/*
 * rdma/fill.c - `bpbench rdma-fill`: the random fill over RDMA. A client
 * exposes an N-byte buffer through a bp_rdma_node; bp-target (started here
 * on an ephemeral port, or a running one given with --target) RDMA-writes
 * the page generator's output into it (bp_rdma_conn_fill); then every byte
 * is checked against bp_rdma_fill_page(seed, page index) page by page.
 *
 * Beside it, in the same run, the raw reference: this process writes the
 * same number of pages of the same size with the raw libfabric loop of
 * rdma_raw.c (depth 64, post 16, reap 16) into the daemon's region for us
 * (bp_rdma_conn_peer). The directions differ (the fill writes daemon ->
 * client, the raw loop client -> daemon), and the fill also generates its
 * pages; the ratio says what the daemon's path costs over a bare loop on
 * the same provider and page size. Runs alternate fill, raw (--runs).
 *
 * Exit status: 0 all bytes verified, 1 a byte differs or a step failed,
 * 2 bad usage.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <batchpipe/error.h>
#include <batchpipe/rdma.h>

#include "lab/bpbench.h"
#include "rdma/rdma_raw.h"
#include "rdma/rdma_target.h"

#define BENCH_CMD      "bpbench rdma-fill"
#define RF_MAX_RUNS    20
#define RF_PROGRESS_NS INT64_C(500000000)
#define RF_FILL_BYTE   0xa5 /* the buffer before each fill: no page is that */

struct rf_opts {
	const char *provider; /* NULL: the daemon's */
	const char *node;
	const char *target;  /* HOST:PORT of a running daemon, or NULL */
	struct bench_args a; /* runs, seed, output */
	uint64_t bytes;
	unsigned page, rails;
	int no_raw;
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
		"%s: %6.1f %%  %" PRIu64 " / %" PRIu64 " bytes  %.2f Gbps\n",
		BENCH_CMD, 100.0 * (double)done / (double)len, done, len,
		(double)done * 8 / (double)(now - p->t0));
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

/* The raw loop: bytes / page writes of page bytes into the daemon. */
static double rf_raw_once(const struct rf_opts *o, struct rr_lane *l,
			  struct bp_rdma_conn *conn, unsigned run)
{
	atomic_int stop = 0;
	pthread_t th;
	uint64_t pages = (o->bytes + o->page - 1) / o->page;
	struct bp_rdma_target_query q;
	uint64_t tag, off;
	int rc;

	l->stop = &stop;
	l->max_ops = pages;
	l->run = run;
	rc = pthread_create(&th, NULL, rr_lane_throughput, l);
	if (rc)
		bench_die("%s: pthread_create: %s\n", BENCH_CMD, strerror(rc));
	pthread_join(th, NULL);
	if (l->err)
		bench_die("%s: raw loop: %s\n", BENCH_CMD, l->errmsg);
	if (l->posted != pages || l->completed != pages)
		bench_die("%s: VERIFY FAILED: raw loop: %" PRIu64
			  " posts, %" PRIu64 " completions for %" PRIu64
			  " pages\n",
			  BENCH_CMD, l->posted, l->completed, pages);
	/* the last page's tag must be in the daemon's memory (it may still
	 * be landing on tcp: ask again for a while) */
	tag = RR_TAG(run, 0, pages - 1);
	off = rr_offset(0, pages - 1, l->slots, l->size);
	for (int64_t end = bench_now_ns() + INT64_C(3000000000);;) {
		rc = bp_rdma_conn_query(conn, off, 8, &q);
		if (rc)
			bench_die("%s: query: %s\n", BENCH_CMD,
				  bp_strerror(rc));
		if (q.digest == bp_rdma_digest(&tag, 8))
			break;
		if (bench_now_ns() > end)
			bench_die("%s: VERIFY FAILED: raw loop: the last page "
				  "is not in the daemon's memory\n",
				  BENCH_CMD);
		bench_sleep_ns(1000000);
	}
	return (double)(l->posted * l->size) * 8 /
	       (double)(l->t_end - l->t_start);
}

static int rf_set_bytes(struct bench_args *a, const char *arg)
{
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
	 "buffer size, K/M/G suffixes (default 256M)"},
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
	BENCH_OPT_RUNS("fills (each verified) and raw loops, alternating "
		       "(default 1)"),
	{"no-raw", NULL, rf_set_no_raw, "skip the raw reference"},
	BENCH_OPT_CSV("CSV on stdout, a row per run: run,seed,provider,rails,"
		      "bytes,\npage,fill_Gbps,fill_Mpages_per_s,raw_Gbps,"
		      "raw_Mops_per_s,\nverified_bytes"),
	BENCH_OPT_OUT,
	BENCH_OPT_NAME,
	BENCH_OPT_HELP,
	BENCH_OPT_END,
};

static const struct bench_cmd rf_cmd = {
	.name = "rdma-fill",
	.about = "The random fill: bp-target RDMA-writes generated "
		 "pages into a buffer of\nthis process; every byte is "
		 "verified; the raw libfabric loop of the same page\nsize and "
		 "total bytes (this process -> the daemon's region) runs "
		 "beside it.\n",
	.opts = rf_options,
	.epilog = "Progress on stderr about every 0.5 s. Exit 0: every byte "
		  "verified; 1: a byte\ndiffers or a step failed; 2: bad "
		  "usage.\n",
	.max_runs = RF_MAX_RUNS,
};

static int rf_parse(int argc, char **argv, struct rf_opts *o)
{
	memset(o, 0, sizeof(*o));
	bench_args_init(&o->a, &rf_cmd, o);
	o->a.runs = 1;
	o->bytes = 256ull << 20;
	o->page = 65536;
	o->rails = 1;
	o->node = "127.0.0.1";
	return bench_opts_parse(&o->a, argc, argv);
}

/* What the printers get (bench_emit's ctx): one row per run. */
struct rf_report {
	const struct rf_opts *o;
	const char *provider;
	uint64_t pages, verified;
	double fill_gbps[RF_MAX_RUNS], fill_mops[RF_MAX_RUNS];
	double raw_gbps[RF_MAX_RUNS], raw_mops[RF_MAX_RUNS];
	double ratio[RF_MAX_RUNS]; /* fill / raw of the same run */
};

/* Median of n values, leaving v in run order (bench_median sorts). */
static double rf_median(const double *v, unsigned n)
{
	double tmp[RF_MAX_RUNS];

	memcpy(tmp, v, sizeof(*v) * n);
	return bench_median(tmp, (int)n);
}

static void rf_print_csv(FILE *f, const void *ctx)
{
	const struct rf_report *rep = ctx;
	const struct rf_opts *o = rep->o;

	fprintf(f,
		"run,seed,provider,rails,bytes,page,fill_Gbps,"
		"fill_Mpages_per_s,raw_Gbps,raw_Mops_per_s,verified_bytes\n");
	for (unsigned run = 0; run < o->a.runs; run++) {
		fprintf(f, "%u,%" PRIu64 ",%s,%u,%" PRIu64 ",%u,", run,
			o->a.seed + run, rep->provider, o->rails, o->bytes,
			o->page);
		bench_csv_num(f, rep->fill_gbps[run], 3);
		fputc(',', f);
		bench_csv_num(f, rep->fill_mops[run], 4);
		fputc(',', f);
		bench_csv_num(f, rep->raw_gbps[run], 3);
		fputc(',', f);
		bench_csv_num(f, rep->raw_mops[run], 4);
		fprintf(f, ",%" PRIu64 "\n", o->bytes);
	}
}

static void rf_print_table(FILE *f, const void *ctx)
{
	const struct rf_report *rep = ctx;
	const struct rf_opts *o = rep->o;
	unsigned runs = o->a.runs;

	fprintf(f,
		"rdma-fill: provider %s, rails %u, %" PRIu64
		" bytes in %" PRIu64 " pages of %u, seeds %" PRIu64 "..%" PRIu64
		", %u run%s (medians)\n",
		rep->provider, o->rails, o->bytes, rep->pages, o->page,
		o->a.seed, o->a.seed + runs - 1, runs, runs > 1 ? "s" : "");
	fprintf(f,
		"  fill (bp-target -> this process): %8.2f Gbps  %7.4f M "
		"pages/s\n",
		rf_median(rep->fill_gbps, runs),
		rf_median(rep->fill_mops, runs));
	if (!o->no_raw) {
		fprintf(f,
			"  raw loop (this process -> bp-target's region, "
			"depth 64, post 16, reap 16):\n"
			"                                    %8.2f Gbps  "
			"%7.4f M ops/s\n",
			rf_median(rep->raw_gbps, runs),
			rf_median(rep->raw_mops, runs));
		fprintf(f, "  fill / raw: %.3f (median of per-run ratios)\n",
			rf_median(rep->ratio, runs));
	}
	fprintf(f,
		"  verified: %" PRIu64 " bytes, every byte equal to "
		"bp_rdma_fill_page\n",
		rep->verified);
}

int bench_rdma_fill_main(int argc, char **argv)
{
	struct rf_opts o;
	struct rt_daemon d = {0};
	struct bp_rdma_conn_config cc;
	struct bp_rdma_conn *conn;
	struct bp_rdma_node_config nc;
	struct bp_rdma_node *node;
	struct bp_rdma_region *reg;
	struct bp_rdma_peer_desc desc, dpeer;
	struct rr_lane lane;
	char host[64], why[512], provider[64];
	static struct rf_report rep;
	double *fill_gbps = rep.fill_gbps, *fill_mops = rep.fill_mops;
	double *raw_gbps = rep.raw_gbps, *raw_mops = rep.raw_mops;
	uint64_t pages, verified = 0;
	const char *node_addr;
	unsigned port;
	uint8_t *buf;
	int rc;

	rc = rf_parse(argc, argv, &o);
	if (rc != BENCH_OPTS_RUN)
		return rc;
	setenv("FI_TCP_IFACE", "lo", 0); /* loopback only */
	pages = (o.bytes + o.page - 1) / o.page;
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
	cc.region_len = o.bytes; /* the raw loop writes there */
	cc.log = rf_log;
	rc = bp_rdma_connect(&cc, &conn);
	if (rc)
		bench_die("%s: bp_rdma_connect %s:%u: %s\n", BENCH_CMD, host,
			  port, bp_strerror(rc));
	snprintf(provider, sizeof(provider), "%s", bp_rdma_conn_provider(conn));
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
	buf = bench_zalloc(o.bytes); /* touched: no page faults in the run */
	rc = bp_rdma_node_expose(node, buf, o.bytes, NULL, &reg);
	if (rc)
		bench_die("%s: bp_rdma_node_expose: %s\n", BENCH_CMD,
			  bp_strerror(rc));
	bp_rdma_region_describe(reg, &desc);

	memset(&lane, 0, sizeof(lane));
	if (!o.no_raw) {
		struct rr_config rc2 = {
			.provider = provider,
			.node = node_addr,
			.depth = 64,
			.post_batch = 16,
			.reap_batch = 16,
		};

		bp_rdma_conn_peer(conn, &dpeer);
		lane.lane = 0;
		lane.slots = (unsigned)pages; /* page i at i * page */
		if (rr_lane_open(&lane, &rc2, 1, &dpeer, o.page))
			bench_die("%s: raw loop: %s\n", BENCH_CMD, lane.errmsg);
	}

	for (unsigned run = 0; run < o.a.runs; run++) {
		struct rf_progress pr;
		uint64_t bad, first;
		int64_t t0, t1;

		memset(buf, RF_FILL_BYTE, o.bytes);
		pr.t0 = pr.last = bench_now_ns();
		t0 = bench_now_ns();
		rc = bp_rdma_conn_fill(conn, &desc, o.bytes, o.page,
				       o.a.seed + run, rf_on_progress, &pr);
		t1 = bench_now_ns();
		if (rc)
			bench_die("%s: bp_rdma_conn_fill: %s\n", BENCH_CMD,
				  bp_strerror(rc));
		bad = rf_verify(buf, o.bytes, o.page, o.a.seed + run, &first);
		if (bad) {
			/* tell late data from wrong data before failing */
			bench_sleep_ns(1000000000);
			uint64_t later = rf_verify(buf, o.bytes, o.page,
						   o.a.seed + run, &first);

			bench_die("%s: VERIFY FAILED: run %u: %" PRIu64
				  " of %" PRIu64 " bytes differ right after "
				  "the fill returned (first at offset %" PRIu64
				  "), %" PRIu64 " still 1 s later\n",
				  BENCH_CMD, run, bad, o.bytes, first, later);
		}
		verified += o.bytes;
		fill_gbps[run] = (double)o.bytes * 8 / (double)(t1 - t0);
		fill_mops[run] = (double)pages / (double)(t1 - t0) * 1e3;
		if (!o.no_raw) {
			raw_gbps[run] = rf_raw_once(&o, &lane, conn, run + 1);
			raw_mops[run] = raw_gbps[run] * 1e3 / 8 / o.page;
		} else {
			raw_gbps[run] = raw_mops[run] = NAN;
		}
		fprintf(stderr,
			"%s: run %u: fill %.2f Gbps, raw %.2f Gbps, %" PRIu64
			" bytes verified\n",
			BENCH_CMD, run, fill_gbps[run], raw_gbps[run], o.bytes);
	}

	rep.o = &o;
	rep.provider = provider;
	rep.pages = pages;
	rep.verified = verified;
	for (unsigned r = 0; r < o.a.runs; r++)
		rep.ratio[r] = fill_gbps[r] / raw_gbps[r];
	rc = bench_emit(&o.a, rf_print_csv, rf_print_table, NULL, &rep);

	if (!o.no_raw)
		rr_lane_close(&lane);
	bp_rdma_region_close(reg);
	bp_rdma_conn_close(conn);
	bp_rdma_node_destroy(node);
	free(buf);
	rt_daemon_stop(&d);
	return rc;
}
