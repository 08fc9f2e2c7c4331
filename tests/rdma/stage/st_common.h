/* SPDX-License-Identifier: MIT */
/*
 * tests/rdma/stage/st_common.h - what the RDMA stage tests share: the
 * provider probe (skip with 77 where it is missing), a passive node in the
 * same process exposing a target buffer, a stage + pipeline whose sink
 * counts every job (and fails on a second delivery), a log that the tests
 * can search, byte patterns, and an alarm watchdog.
 *
 * Threads other than main (the sink, the node's progress threads, log
 * callbacks) never abort: they record failures with bp_test_fail(), and
 * main returns non-zero when any was recorded.
 *
 * Each program says ST_DEFINE_GLOBALS once, at file scope.
 */
#ifndef BP_TESTS_RDMA_STAGE_ST_COMMON_H
#define BP_TESTS_RDMA_STAGE_ST_COMMON_H

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <batchpipe/batchpipe.h>
#include <batchpipe/rdma.h>

#include "src/rdma/rdma_internal.h" /* bpi_fab_getinfo: the stage's own hints */

#include "../../bp_test.h"

#define ST_SKIP BPT_SKIP

/* Sizes shrink under TSAN (5-10x slower, and every byte copy is checked). */
#define ST_SCALE(n) (BPT_TSAN ? ((n) / 5 ? (n) / 5 : 1) : (n))

#define ST_CHECK(cond, ...)                                                    \
	do {                                                                   \
		if (!(cond))                                                   \
			bp_test_fail(__VA_ARGS__);                             \
	} while (0)

#define ST_DEFINE_GLOBALS                                                      \
	BPT_DEFINE_GLOBALS;                                                    \
	struct st_log st_log_

/* ------------------------------------------------------------ watchdog */

/*
 * A hang (an operation that never completes, a lost job the drain waits
 * for) fails with a message naming what hung, not a meson timeout:
 * bp_test.h's alarm watchdog, its limit 5x under TSAN.
 */
#define st_watchdog(seconds, ...)                                              \
	bpt_alarm_arm((BPT_TSAN ? 5u : 1u) * (seconds), __VA_ARGS__)
#define st_watchdog_off bpt_alarm_disarm

/* ----------------------------------------------------------------- log */

/*
 * The library's log callback: every line is kept (the last ST_LOG_LINES)
 * so that a test can ask whether a text was said; ST_VERBOSE=1 prints them.
 * Called from worker threads: a mutex, cold path.
 */
#define ST_LOG_LINES 256

struct st_log {
	pthread_mutex_t lock;
	unsigned n; /* lines ever logged */
	char line[ST_LOG_LINES][256];
};

extern struct st_log st_log_;

static inline void st_log_fn(void *ctx, enum bp_log_level level,
			     const char *msg)
{
	static const char *const lv[] = {"ERROR", "WARN", "INFO"};

	(void)ctx;
	pthread_mutex_lock(&st_log_.lock);
	snprintf(st_log_.line[st_log_.n % ST_LOG_LINES], 256, "%s", msg);
	st_log_.n++;
	pthread_mutex_unlock(&st_log_.lock);
	if (getenv("ST_VERBOSE"))
		fprintf(stderr, "  log %s: %s\n",
			(unsigned)level < 3 ? lv[level] : "?", msg);
}

static inline void st_log_clear(void)
{
	pthread_mutex_lock(&st_log_.lock);
	st_log_.n = 0;
	pthread_mutex_unlock(&st_log_.lock);
}

/* Copy the first kept line containing every one of the (NULL-ended)
 * needles into out; returns whether there was one. */
static inline bool st_log_find(char *out, size_t outsz, const char *needle, ...)
{
	bool found = false;

	pthread_mutex_lock(&st_log_.lock);
	unsigned first =
		st_log_.n > ST_LOG_LINES ? st_log_.n - ST_LOG_LINES : 0;
	for (unsigned i = first; i < st_log_.n && !found; i++) {
		const char *l = st_log_.line[i % ST_LOG_LINES];
		const char *s = needle;
		va_list ap;

		va_start(ap, needle);
		found = true;
		while (s) {
			if (!strstr(l, s))
				found = false;
			s = va_arg(ap, const char *);
		}
		va_end(ap);
		if (found && out)
			snprintf(out, outsz, "%s", l);
	}
	pthread_mutex_unlock(&st_log_.lock);
	return found;
}

/*
 * Copy the kept lines from the last one containing header on into out (at
 * most max); returns how many, 0 when no line ever logged has header, -1
 * when no kept line has it but some were pushed out of the ring (it may
 * have been among them).
 */
static inline int st_log_from_last(const char *header, char (*out)[256],
				   unsigned max)
{
	int got = 0;

	pthread_mutex_lock(&st_log_.lock);
	unsigned first =
		st_log_.n > ST_LOG_LINES ? st_log_.n - ST_LOG_LINES : 0;
	unsigned at = st_log_.n;

	for (unsigned i = st_log_.n; i-- > first;)
		if (strstr(st_log_.line[i % ST_LOG_LINES], header)) {
			at = i;
			break;
		}
	if (at == st_log_.n && first > 0)
		got = -1; /* the header may have been pushed out */
	for (unsigned i = at; i < st_log_.n && got >= 0 && (unsigned)got < max;
	     i++)
		snprintf(out[got++], 256, "%s", st_log_.line[i % ST_LOG_LINES]);
	pthread_mutex_unlock(&st_log_.lock);
	return got;
}

/* ------------------------------------------------------------ provider */

static inline const char *st_node_addr(const char *prov)
{
	return strcmp(prov, "shm") ? "127.0.0.1" : NULL;
}

/*
 * Loopback only: eth0 has an address too. Before any libfabric call, so
 * the programs behave the same outside meson.
 */
static inline void st_env(void)
{
	setenv("FI_TCP_IFACE", "lo", 0);
	setenv("FI_SOCKETS_IFACE", "lo", 0);
	pthread_mutex_init(&st_log_.lock, NULL);
}

/*
 * Whether fi_getinfo finds the provider with the hints the stage and the
 * node use (RDM, RMA, remote access). Prints the SKIP line if not.
 */
static inline bool st_provider_ok(const char *prov)
{
	struct bpi_fab_want want = {
		.provider = prov, .node = st_node_addr(prov), .passive = true};
	struct fi_info *info = NULL;
	int rc = bpi_fab_getinfo(&want, NULL, &info);

	if (rc) {
		printf("SKIP: libfabric provider '%s' with RDM endpoints and "
		       "RMA is not available here (fi_getinfo: %s)\n",
		       prov, bp_strerror(rc));
		return false;
	}
	fi_freeinfo(info);
	return true;
}

/* --------------------------------------------------------------- bytes */

/*
 * Memory that a remote operation changes (the node's target buffer) is
 * written by libfabric on the node's progress thread, and the test reads it
 * after the initiator's completion: the happens-before runs through a
 * socket or a shared-memory queue inside the uninstrumented provider,
 * which TSAN cannot see. So the few functions that touch such memory are
 * not instrumented (and use no intercepted memcmp/memset): only this test
 * code is exempt, never the library's, and libfabric's own accesses stay
 * visible to TSAN through its interceptors. Plain C otherwise.
 */
#if BPT_TSAN
#define ST_REMOTE_MEM __attribute__((unused, noinline, no_sanitize("thread")))
#else
#define ST_REMOTE_MEM __attribute__((unused))
#endif

/* Byte i of pattern `seed` (splitmix64 of both): neighbouring bytes and
 * other seeds differ, so a shifted or stale copy never matches. */
static inline uint8_t st_byte(uint64_t seed, uint64_t i)
{
	uint64_t x = i * 0x9e3779b97f4a7c15ull + seed * 0xd1b54a32d192ed03ull;

	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return (uint8_t)(x ^ (x >> 31));
}

ST_REMOTE_MEM static void st_fill(uint8_t *buf, uint64_t off, size_t len,
				  uint64_t seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = st_byte(seed, off + i);
}

/* The first index in [0, len) where buf differs from the pattern, or -1. */
ST_REMOTE_MEM static long st_mismatch(const uint8_t *buf, uint64_t off,
				      size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i] != st_byte(seed, off + i))
			return (long)i;
	return -1;
}

/* The first non-zero byte, or -1. */
ST_REMOTE_MEM static long st_nonzero(const uint8_t *buf, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i])
			return (long)i;
	return -1;
}

/* Zero len bytes (a loop: memset is intercepted). */
ST_REMOTE_MEM static void st_zero(uint8_t *buf, size_t len)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = 0;
}

/* Copy len bytes of remote-written memory (memcpy is intercepted). */
ST_REMOTE_MEM static void st_copy(uint8_t *dst, const uint8_t *src, size_t len)
{
	for (size_t i = 0; i < len; i++)
		dst[i] = src[i];
}

/* The first index where a and b differ, or -1 (memcmp is intercepted). */
ST_REMOTE_MEM static long st_differ(const uint8_t *a, const uint8_t *b,
				    size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (a[i] != b[i])
			return (long)i;
	return -1;
}

static inline void *st_alloc(size_t len)
{
	void *p = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);

	if (p)
		memset(p, 0, len);
	return p;
}

/* ---------------------------------------------------------------- jobs */

struct st_job {
	struct bp_rdma_job rj; /* first: the pipeline gets &rj.hdr */
	uint32_t idx;
	atomic_uint deliveries;
	int32_t status; /* as the sink saw it */
};

static inline void st_jobs_init(struct st_job *j, unsigned n)
{
	memset(j, 0, n * sizeof(*j));
	for (unsigned i = 0; i < n; i++) {
		j[i].idx = i;
		j[i].status = 1; /* not delivered */
	}
}

/* --------------------------------------------------------------- fixture */

/*
 * A node with a target buffer of tlen bytes exposed on every rail, and a
 * stage + pipeline that reaches it as peer `peer`.
 */
struct st_fix {
	const char *prov;
	unsigned rails, workers;
	struct bp_rdma_node *node;
	struct bp_rdma_region *reg;
	uint8_t *tgt;
	size_t tlen;
	struct bp_rdma_peer_desc desc;
	struct bp_rdma *r;
	struct bp_pipeline *p;
	int peer;
	/* sink: written by the sink thread; release so that main, after an
	 * acquire load of delivered, sees the jobs' statuses */
	atomic_ulong delivered;
	unsigned long ok, failed, cancelled; /* sink thread only */
	/* on_data: progress threads */
	atomic_ulong imm_count, imm_sum;
	/* per imm value 0..imm_max-1, counted when set (st_track_imm) */
	_Atomic(atomic_uchar *) imm_seen;
	uint64_t imm_max;
	atomic_uint imm_bad_rail;
};

static inline void st_sink(void *ctx, struct bp_job **jobs, unsigned n)
{
	struct st_fix *f = ctx;

	for (unsigned i = 0; i < n; i++) {
		struct st_job *j = (struct st_job *)jobs[i];

		/* relaxed: the count is this thread's; main reads after the
		 * release below (or after the join) */
		if (atomic_fetch_add_explicit(&j->deliveries, 1,
					      memory_order_relaxed))
			bp_test_fail("job %u delivered twice", j->idx);
		j->status = j->rj.hdr.status;
		if (j->status == BP_JOB_OK)
			f->ok++;
		else if (j->status == BP_JOB_CANCELLED)
			f->cancelled++;
		else
			f->failed++;
	}
	/* release: pairs with st_wait_delivered's acquire (statuses) */
	atomic_fetch_add_explicit(&f->delivered, n, memory_order_release);
}

static inline void st_on_data(void *ctx, unsigned rail, uint64_t imm)
{
	struct st_fix *f = ctx;

	if (rail >= f->rails)
		atomic_fetch_add_explicit(&f->imm_bad_rail, 1,
					  memory_order_relaxed);
	/* relaxed: counts, read by main after a deadline poll */
	atomic_fetch_add_explicit(&f->imm_count, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&f->imm_sum, imm, memory_order_relaxed);
	/* acquire: pairs with st_track_imm's release (imm_max) */
	atomic_uchar *seen =
		atomic_load_explicit(&f->imm_seen, memory_order_acquire);
	if (seen && imm < f->imm_max &&
	    atomic_fetch_add_explicit(&seen[imm], 1, memory_order_relaxed))
		bp_test_fail("immediate %" PRIu64 " arrived twice", imm);
}

/* Count each immediate 0..n-1 as it arrives (the node runs already). */
static inline atomic_uchar *st_track_imm(struct st_fix *f, uint64_t n)
{
	atomic_uchar *seen = calloc(n, sizeof(*seen));

	f->imm_max = n;
	/* release: on_data sees imm_max with the array */
	atomic_store_explicit(&f->imm_seen, seen, memory_order_release);
	return seen;
}

/*
 * The node of st_node_open from `base` (NULL: the defaults), whose
 * provider, address, rails, on_data, data_ctx and log this sets.
 */
static inline int st_node_open_config(struct st_fix *f, const char *prov,
				      unsigned rails, size_t tlen,
				      const struct bp_rdma_node_config *base)
{
	struct bp_rdma_node_config nc;
	int rc;

	memset(f, 0, sizeof(*f));
	f->prov = prov;
	f->rails = rails;
	f->peer = -1;
	if (base)
		nc = *base;
	else
		bp_rdma_node_config_init(&nc);
	nc.provider = prov;
	nc.node = st_node_addr(prov);
	nc.rails = rails;
	nc.on_data = st_on_data;
	nc.data_ctx = f;
	nc.log = st_log_fn;
	rc = bp_rdma_node_create(&nc, &f->node);
	if (rc) {
		fprintf(stderr, "bp_rdma_node_create(%s): %s\n", prov,
			bp_strerror(rc));
		return rc;
	}
	f->tlen = tlen;
	f->tgt = st_alloc(tlen);
	if (!f->tgt)
		return -ENOMEM;
	rc = bp_rdma_node_expose(f->node, f->tgt, tlen, NULL, &f->reg);
	if (rc) {
		fprintf(stderr, "bp_rdma_node_expose: %s\n", bp_strerror(rc));
		return rc;
	}
	bp_rdma_region_describe(f->reg, &f->desc);
	return 0;
}

static inline int st_node_open(struct st_fix *f, const char *prov,
			       unsigned rails, size_t tlen)
{
	return st_node_open_config(f, prov, rails, tlen, NULL);
}

/*
 * The body of a child process that is a peer: a node with 2 rails and a
 * region of len bytes; the create's result, then the region's description,
 * to wfd; then it waits to be killed (or stopped). Fork before any
 * libfabric call in the parent.
 */
static inline void st_child_node(const char *prov, int wfd, size_t len)
{
	struct bp_rdma_node_config nc;
	struct bp_rdma_node *n;
	struct bp_rdma_region *reg;
	struct bp_rdma_peer_desc d;
	int rc;
	void *buf;

	st_env();
	bp_rdma_node_config_init(&nc);
	nc.provider = prov;
	nc.node = st_node_addr(prov);
	nc.rails = 2;
	rc = bp_rdma_node_create(&nc, &n);
	buf = st_alloc(len);
	if (!rc)
		rc = bp_rdma_node_expose(n, buf, len, NULL, &reg);
	if (!rc)
		bp_rdma_region_describe(reg, &d);
	if (write(wfd, &rc, sizeof(rc)) != sizeof(rc) ||
	    (!rc && write(wfd, &d, sizeof(d)) != sizeof(d)))
		_exit(1);
	for (;;)
		pause();
}

/* The stage config the tests start from: 2 workers, f's rails. */
static inline void st_rdma_config(const struct st_fix *f,
				  struct bp_rdma_config *c)
{
	bp_rdma_config_init(c);
	c->provider = f->prov;
	c->node = st_node_addr(f->prov);
	c->workers = 2;
	c->rails = f->rails;
	c->log = st_log_fn;
}

static inline void st_pipeline_config(struct st_fix *f,
				      struct bp_pipeline_config *pc)
{
	bp_pipeline_config_init(pc);
	pc->workers = f->workers;
	pc->stage = bp_rdma_stage(f->r);
	pc->stage_ctx = f->r;
	pc->sink = st_sink;
	pc->sink_ctx = f;
	pc->log = st_log_fn;
}

/* Create the stage from c, add f's region as a peer; pc NULL: defaults. */
static inline int st_stage_open(struct st_fix *f,
				const struct bp_rdma_config *c,
				const struct bp_pipeline_config *pc_in)
{
	struct bp_pipeline_config pc;
	int rc;

	f->workers = c->workers;
	rc = bp_rdma_create(c, &f->r);
	if (rc) {
		fprintf(stderr, "bp_rdma_create(%s): %s\n", f->prov,
			bp_strerror(rc));
		return rc;
	}
	if (strcmp(bp_rdma_provider(f->r), f->prov)) {
		fprintf(stderr, "asked for provider %s, got %s\n", f->prov,
			bp_rdma_provider(f->r));
		return -EPROTO;
	}
	f->peer = bp_rdma_peer_add(f->r, &f->desc);
	if (f->peer < 0) {
		fprintf(stderr, "bp_rdma_peer_add: %s\n", bp_strerror(f->peer));
		return f->peer;
	}
	if (pc_in) {
		pc = *pc_in;
		pc.stage = bp_rdma_stage(f->r);
		pc.stage_ctx = f->r;
		pc.sink = st_sink;
		pc.sink_ctx = f;
	} else {
		st_pipeline_config(f, &pc);
	}
	rc = bp_pipeline_create(&pc, &f->p);
	if (rc) {
		fprintf(stderr, "bp_pipeline_create: %s\n", bp_strerror(rc));
		return rc;
	}
	return 0;
}

static inline int st_start(struct st_fix *f)
{
	int rc = bp_pipeline_start(f->p);

	if (rc)
		fprintf(stderr, "bp_pipeline_start: %s\n", bp_strerror(rc));
	return rc;
}

/* Submit every job (blocking); returns how many were accepted. */
static inline unsigned st_submit(struct st_fix *f, struct st_job *jobs,
				 unsigned n)
{
	struct bp_job *ptrs[64];
	unsigned done = 0;

	while (done < n) {
		unsigned k = n - done < 64 ? n - done : 64;
		int rc;

		for (unsigned i = 0; i < k; i++)
			ptrs[i] = &jobs[done + i].rj.hdr;
		rc = bp_pipeline_submit(f->p, ptrs, k, 0, 10 * 1000000000ll);
		if (rc <= 0) {
			bp_test_fail("bp_pipeline_submit: %s", bp_strerror(rc));
			break;
		}
		done += (unsigned)rc;
	}
	return done;
}

/* Wait until the sink has seen `count` jobs in all; false on timeout. */
static inline bool st_wait_delivered(struct st_fix *f, unsigned long count,
				     unsigned timeout_s)
{
	int64_t end = bpt_now_ns() +
		      (int64_t)timeout_s * 1000000000 * (BPT_TSAN ? 5 : 1);

	/* acquire: pairs with st_sink's release */
	while (atomic_load_explicit(&f->delivered, memory_order_acquire) <
	       count) {
		if (bpt_now_ns() > end)
			return false;
		bpt_sleep_ms(1);
	}
	return true;
}

/* Sum of every worker's and rail's counters. */
static inline void st_rail_sum(const struct bp_rdma *r, unsigned workers,
			       unsigned rails, struct bp_rdma_rail_stats *sum,
			       uint64_t *pending_high_max)
{
	memset(sum, 0, sizeof(*sum));
	if (pending_high_max)
		*pending_high_max = 0;
	for (unsigned w = 0; w < workers; w++)
		for (unsigned k = 0; k < rails; k++) {
			struct bp_rdma_rail_stats s;

			if (bp_rdma_get_rail_stats(r, w, k, &s)) {
				bp_test_fail("bp_rdma_get_rail_stats(%u, %u)",
					     w, k);
				continue;
			}
			sum->posted += s.posted;
			sum->completed += s.completed;
			sum->failed += s.failed;
			sum->eagain += s.eagain;
			sum->cq_reads += s.cq_reads;
			sum->cq_empty += s.cq_empty;
			sum->mr_cache_misses += s.mr_cache_misses;
			if (s.pending_high > sum->pending_high)
				sum->pending_high = s.pending_high;
			if (pending_high_max &&
			    s.pending_high > *pending_high_max)
				*pending_high_max = s.pending_high;
		}
}

/*
 * Conservation after drain or abort: submitted == ok + failed + cancelled,
 * equal to what was accepted and what the sink counted, and every job in
 * jobs[0..n) delivered exactly once (or never, past `accepted`).
 */
static inline void st_check_conservation(struct st_fix *f, struct st_job *jobs,
					 unsigned n, unsigned accepted)
{
	struct bp_pipeline_stats st;

	ST_CHECK(bp_pipeline_get_stats(f->p, &st) == 0, "bp_pipeline_stats");
	ST_CHECK(st.submitted == st.ok + st.failed + st.cancelled,
		 "conservation: submitted %" PRIu64 " != ok %" PRIu64
		 " + failed %" PRIu64 " + cancelled %" PRIu64,
		 st.submitted, st.ok, st.failed, st.cancelled);
	ST_CHECK(st.submitted == accepted,
		 "submitted %" PRIu64 " but %u accepted", st.submitted,
		 accepted);
	ST_CHECK(st.ok == f->ok && st.failed == f->failed &&
			 st.cancelled == f->cancelled,
		 "pipeline stats %" PRIu64 "/%" PRIu64 "/%" PRIu64
		 " differ from the sink's %lu/%lu/%lu",
		 st.ok, st.failed, st.cancelled, f->ok, f->failed,
		 f->cancelled);
	for (unsigned i = 0; i < n; i++) {
		unsigned d = atomic_load_explicit(&jobs[i].deliveries,
						  memory_order_relaxed);

		if (d != (i < accepted ? 1u : 0u)) {
			bp_test_fail("job %u delivered %u times", i, d);
			break;
		}
	}
}

/*
 * The target goes first: node_destroy stops its progress threads, then
 * closes the region and its endpoints, before the stage's endpoints close.
 * The other order (stage, region, node) crashed once inside libfabric's shm
 * progress on a node thread, target and stage in one process (ASAN build,
 * test_stage_abort shm, about 1 CI run in 12).
 */
static inline void st_close(struct st_fix *f)
{
	bp_pipeline_destroy(f->p);
	f->p = NULL;
	bp_rdma_node_destroy(f->node); /* closes f->reg */
	f->node = NULL;
	f->reg = NULL;
	bp_rdma_destroy(f->r);
	f->r = NULL;
	free(f->tgt);
	f->tgt = NULL;
}

static inline int st_result(const char *name)
{
	unsigned n = bp_test_failures();

	if (n)
		printf("FAIL %s: %u check(s) failed\n", name, n);
	else
		printf("PASS %s\n", name);
	return n ? 1 : 0;
}

#endif /* BP_TESTS_RDMA_STAGE_ST_COMMON_H */
