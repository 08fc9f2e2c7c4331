/* SPDX-License-Identifier: MIT */
/*
 * rdma_fill.c - `bpbench rdma-fill`: seed 000's random fill. A client
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
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <batchpipe/error.h>
#include <batchpipe/rdma.h>

#include "bpbench.h"
#include "rdma_raw.h"
#include "rdma_target.h"

#define BENCH_CMD      "bpbench rdma-fill"
#define RF_MAX_RUNS    20
#define RF_PROGRESS_NS INT64_C(500000000)
#define RF_FILL_BYTE   0xa5 /* the buffer before each fill: no page is that */

struct rf_opts {
	const char *provider; /* NULL: the daemon's */
	const char *node;
	const char *target; /* HOST:PORT of a running daemon, or NULL */
	uint64_t bytes;
	unsigned page, rails, runs;
	uint64_t seed;
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

static void rf_usage(FILE *f)
{
	fprintf(f,
		"usage: bpbench rdma-fill [options]\n"
		"Seed 000's random fill: bp-target RDMA-writes generated pages "
		"into a buffer of\nthis process; every byte is verified; the "
		"raw libfabric loop of the same page\nsize and total bytes "
		"(this process -> the daemon's region) runs beside it.\n"
		"  --bytes N      buffer size, K/M/G suffixes (default 256M)\n"
		"  --page N       page size, a multiple of 8 (default 64K; "
		"bp-target takes\n"
		"                 pages up to its --stage-slot, 1M by "
		"default)\n"
		"  --rails N      rails of the daemon and of our node (default "
		"1)\n"
		"  --provider P   libfabric provider (default tcp;ofi_rxm; "
		"with "
		"--target: the\n"
		"                 daemon's)\n"
		"  --node ADDR    address to bind (127.0.0.1; none for shm)\n"
		"  --seed N       generator seed (default 1)\n"
		"  --target H:P   use a running bp-target instead of starting "
		"one\n"
		"  --runs N       fills (each verified) and raw loops, "
		"alternating (default 1)\n"
		"  --no-raw       skip the raw reference\n"
		"  --help         this text\n"
		"Progress on stderr about every 0.5 s. Exit 0: every byte "
		"verified; 1: a byte\ndiffers or a step failed; 2: bad "
		"usage.\n");
}

static int rf_parse_bytes(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -1;
	switch (*end) {
	case 'k':
	case 'K':
		v <<= 10;
		end++;
		break;
	case 'm':
	case 'M':
		v <<= 20;
		end++;
		break;
	case 'g':
	case 'G':
		v <<= 30;
		end++;
		break;
	default:
		break;
	}
	if (*end || v == 0)
		return -1;
	*out = v;
	return 0;
}

static int rf_parse(int argc, char **argv, struct rf_opts *o)
{
	static const struct option longopts[] = {
		{"bytes", required_argument, NULL, 'b'},
		{"page", required_argument, NULL, 'p'},
		{"rails", required_argument, NULL, 'r'},
		{"provider", required_argument, NULL, 'P'},
		{"node", required_argument, NULL, 'N'},
		{"seed", required_argument, NULL, 's'},
		{"target", required_argument, NULL, 't'},
		{"runs", required_argument, NULL, 'n'},
		{"no-raw", no_argument, NULL, 'R'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	uint64_t v;
	unsigned u;
	int opt;

	memset(o, 0, sizeof(*o));
	o->bytes = 256ull << 20;
	o->page = 65536;
	o->rails = 1;
	o->runs = 1;
	o->seed = 1;
	o->node = "127.0.0.1";
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'b':
			if (rf_parse_bytes(optarg, &o->bytes))
				goto bad_value;
			break;
		case 'p':
			if (rf_parse_bytes(optarg, &v) || v % 8 ||
			    v > (64u << 20))
				goto bad_value;
			o->page = (unsigned)v;
			break;
		case 'r':
			if (bench_parse_uint(optarg, &o->rails, 1,
					     BP_RDMA_MAX_RAILS))
				goto bad_value;
			break;
		case 'P':
			o->provider = optarg;
			break;
		case 'N':
			o->node = optarg;
			break;
		case 's':
			if (bench_parse_uint(optarg, &u, 0, UINT32_MAX))
				goto bad_value;
			o->seed = u;
			break;
		case 't':
			if (!strchr(optarg, ':'))
				goto bad_value;
			o->target = optarg;
			break;
		case 'n':
			if (bench_parse_uint(optarg, &o->runs, 1, RF_MAX_RUNS))
				goto bad_value;
			break;
		case 'R':
			o->no_raw = 1;
			break;
		case 'h':
			rf_usage(stdout);
			exit(0);
		default:
			bench_bad_option(BENCH_CMD, longopts, optopt,
					 argv[optind - 1]);
			goto usage;
		}
		continue;
	bad_value:
		bench_bad_value(BENCH_CMD, longopts, opt, optarg);
		goto usage;
	}
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument '%s'\n", BENCH_CMD,
			argv[optind]);
		goto usage;
	}
	return 0;
usage:
	rf_usage(stderr);
	return -1;
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
	double fill_gbps[RF_MAX_RUNS], fill_mops[RF_MAX_RUNS];
	double raw_gbps[RF_MAX_RUNS], raw_mops[RF_MAX_RUNS];
	uint64_t pages, verified = 0;
	const char *node_addr;
	unsigned port;
	uint8_t *buf;
	int rc;

	if (rf_parse(argc, argv, &o))
		return BENCH_EXIT_USAGE;
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

	for (unsigned run = 0; run < o.runs; run++) {
		struct rf_progress pr;
		uint64_t bad, first;
		int64_t t0, t1;

		memset(buf, RF_FILL_BYTE, o.bytes);
		pr.t0 = pr.last = bench_now_ns();
		t0 = bench_now_ns();
		rc = bp_rdma_conn_fill(conn, &desc, o.bytes, o.page,
				       o.seed + run, rf_on_progress, &pr);
		t1 = bench_now_ns();
		if (rc)
			bench_die("%s: bp_rdma_conn_fill: %s\n", BENCH_CMD,
				  bp_strerror(rc));
		bad = rf_verify(buf, o.bytes, o.page, o.seed + run, &first);
		if (bad) {
			/* tell late data from wrong data before failing */
			bench_sleep_ns(1000000000);
			uint64_t later = rf_verify(buf, o.bytes, o.page,
						   o.seed + run, &first);

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

	printf("rdma-fill: provider %s, rails %u, %" PRIu64 " bytes in %" PRIu64
	       " pages of %u, seeds %" PRIu64 "..%" PRIu64
	       ", %u run%s (medians)\n",
	       provider, o.rails, o.bytes, pages, o.page, o.seed,
	       o.seed + o.runs - 1, o.runs, o.runs > 1 ? "s" : "");
	printf("  fill (bp-target -> this process): %8.2f Gbps  %7.4f M "
	       "pages/s\n",
	       bench_median(fill_gbps, (int)o.runs),
	       bench_median(fill_mops, (int)o.runs));
	if (!o.no_raw) {
		double ratio[RF_MAX_RUNS];

		for (unsigned r = 0; r < o.runs; r++)
			ratio[r] = fill_gbps[r] / raw_gbps[r];
		printf("  raw loop (this process -> bp-target's region, "
		       "depth 64, post 16, reap 16):\n"
		       "                                    %8.2f Gbps  "
		       "%7.4f M ops/s\n",
		       bench_median(raw_gbps, (int)o.runs),
		       bench_median(raw_mops, (int)o.runs));
		printf("  fill / raw: %.3f\n",
		       bench_median(ratio, (int)o.runs));
	}
	printf("  verified: %" PRIu64 " bytes, every byte equal to "
	       "bp_rdma_fill_page\n",
	       verified);

	if (!o.no_raw)
		rr_lane_close(&lane);
	bp_rdma_region_close(reg);
	bp_rdma_conn_close(conn);
	bp_rdma_node_destroy(node);
	free(buf);
	rt_daemon_stop(&d);
	return 0;
}
