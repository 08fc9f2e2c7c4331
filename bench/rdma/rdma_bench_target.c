/* SPDX-License-Identifier: MIT */
/*
 * rdma_bench_target.c - the target of a `bpbench rdma` run (bp-target, or an
 * in-process bp_rdma_node; `bpbench rdma-target` adds bp-plain-target) and
 * the check of what landed in it after every measured run.
 */
#include "rdma/rdma_harness.h"

const char *rb_cmd_name = "bpbench rdma";

void rb_log(void *ctx, enum bp_log_level level, const char *msg)
{
	(void)ctx;
	if (level <= BP_LOG_WARN)
		fprintf(stderr, "%s: batchpipe says: %s\n", BENCH_CMD, msg);
}

int rb_target_wait = -1; /* --target-wait, -1: the default */

/* --raw-buffers: raw reads as many source buffers as the pool (1) or one
 * per credit (0) */
int rb_raw_same_src = 1;

const char *const rb_cq_wait_word[RB_NCQ_WAIT] = {
	[BP_RDMA_CQ_BUSY] = "busy",
	[BP_RDMA_CQ_SPIN_SLEEP] = "spin-sleep",
	[BP_RDMA_CQ_EVENT] = "event",
	[BP_RDMA_CQ_AUTO] = "auto",
};

int rb_cq_wait_parse(const char *word)
{
	for (int w = 0; w < RB_NCQ_WAIT; w++)
		if (!strcmp(word, rb_cq_wait_word[w]))
			return w;
	return -1;
}

/* The same for bp-target: its --progress-wait word, or NULL. */
static const char *rb_target_wait_name(void)
{
	return rb_target_wait >= 0 ? rb_cq_wait_word[rb_target_wait] : NULL;
}

static int rb_target_open_node(struct rb_target *t)
{
	struct bp_rdma_node_config nc;
	pid_t before[RB_MAX_TIDS], now[RB_MAX_TIDS];
	int nb, nn, rc;

	bp_rdma_node_config_init(&nc);
	nc.provider = t->provider;
	nc.node = t->node;
	nc.rails = t->rails;
	nc.progress_threads = true;
	if (rb_target_wait >= 0)
		nc.progress_wait = (enum bp_rdma_cq_wait)rb_target_wait;
	nc.log = rb_log;
	nb = rt_tasks(before, RB_MAX_TIDS);
	rc = bp_rdma_node_create(&nc, &t->n);
	if (rc)
		return rc;
	/* the threads the node started: its progress threads */
	nn = rt_tasks(now, RB_MAX_TIDS);
	t->ntids = rt_tasks_new(before, nb, now, nn, t->tids, RB_MAX_TIDS);
	t->mem = bench_zalloc(t->len);
	rc = bp_rdma_node_expose(t->n, t->mem, t->len, NULL, &t->reg);
	if (rc)
		return rc;
	bp_rdma_region_describe(t->reg, &t->desc);
	return 0;
}

static int rb_target_open_daemon(struct rb_target *t, char *why, size_t len)
{
	struct bp_rdma_conn_config cc;
	int rc;

	rc = rt_daemon_start(t->provider, t->node, rb_target_wait_name(),
			     t->rails, t->len, &t->d, why, len);
	if (rc)
		return rc;
	bp_rdma_conn_config_init(&cc);
	cc.host = t->d.host;
	cc.port = t->d.port;
	cc.provider = t->provider;
	cc.rails = t->rails;
	cc.region_len = t->len;
	cc.log = rb_log;
	rc = bp_rdma_connect(&cc, &t->conn);
	if (rc) {
		snprintf(why, len, "bp_rdma_connect: %s", bp_strerror(rc));
		t->conn = NULL;
		rt_daemon_stop(&t->d);
		return rc;
	}
	bp_rdma_conn_peer(t->conn, &t->desc);
	t->daemon = true;
	return 0;
}

static int rb_target_open_plain(struct rb_target *t, char *why, size_t len)
{
	int rc = rt_plain_start(t->provider, t->node, t->len, &t->pl, why, len);

	if (rc)
		return rc;
	t->desc = t->pl.desc;
	t->plain = true;
	return 0;
}

void rb_target_close(struct rb_target *t)
{
	if (t->conn)
		bp_rdma_conn_close(t->conn);
	rt_daemon_stop(&t->d);
	if (t->plain)
		rt_plain_stop(&t->pl);
	bp_rdma_region_close(t->reg);
	bp_rdma_node_destroy(t->n);
	free(t->mem);
	memset(t, 0, sizeof(*t));
}

int rb_target_start(struct rb_target *t, const char *provider, const char *node,
		    unsigned rails, uint64_t len, int kind, char *why,
		    size_t whylen)
{
	memset(t, 0, sizeof(*t));
	snprintf(t->provider, sizeof(t->provider), "%s", provider);
	t->node = node;
	t->rails = rails;
	t->len = len;
	if (kind == RB_TARGET_PLAIN)
		return rails == 1 ? rb_target_open_plain(t, why, whylen)
				  : -EINVAL;
	return rb_target_open_daemon(t, why, whylen);
}

int rb_target_open(struct rb_target *t, const char *provider, const char *node,
		   unsigned rails, uint64_t len, int kind)
{
	char why[512] = "";
	int rc;

	if (kind != RB_TARGET_NODE) {
		rc = rb_target_start(t, provider, node, rails, len,
				     kind == RB_TARGET_PLAIN ? kind
							     : RB_TARGET_DAEMON,
				     why, sizeof(why));
		if (!rc) {
			fprintf(stderr, "%s: %s: target = %s pid %d", BENCH_CMD,
				provider,
				t->plain ? "bp-plain-target" : "bp-target",
				(int)rb_target_pid(t));
			if (t->daemon)
				fprintf(stderr, " (%s:%u, rails %u)", t->d.host,
					t->d.port, t->d.rails);
			fprintf(stderr, "\n");
			return 0;
		}
		if (kind != RB_TARGET_AUTO)
			bench_die("%s: %s: %s%s\n", BENCH_CMD, provider,
				  kind == RB_TARGET_DAEMON
					  ? "--target-process: "
					  : "",
				  why);
		fprintf(stderr,
			"%s: %s: bp-target not used (%s): in-process node\n",
			BENCH_CMD, provider, why);
	}
	memset(t, 0, sizeof(*t));
	snprintf(t->provider, sizeof(t->provider), "%s", provider);
	t->node = node;
	t->rails = rails;
	t->len = len;
	rc = rb_target_open_node(t);
	if (rc) {
		rb_target_close(t);
		return rc;
	}
	fprintf(stderr,
		"%s: %s: target = in-process bp_rdma_node (%d progress "
		"threads)\n",
		BENCH_CMD, provider, t->ntids);
	return 0;
}

pid_t rb_target_pid(const struct rb_target *t)
{
	return t->daemon ? t->d.pid : t->plain ? t->pl.pid : 0;
}

int64_t rb_target_cpu_ns(const struct rb_target *t)
{
	return rb_target_pid(t) ? rt_proc_cpu_ns(rb_target_pid(t))
				: rt_tids_cpu_ns(t->tids, t->ntids);
}

int rb_target_fp(struct rb_target *t, uint64_t off, uint64_t *fp)
{
	struct bp_rdma_target_query q;
	int rc;

	if (t->plain) {
		uint64_t w;

		rc = rt_plain_peek(&t->pl, off, &w);
		if (rc)
			return rc;
		*fp = bp_rdma_digest(&w, 8);
		return 0;
	}
	if (!t->daemon) {
		uint64_t w;

		/* writes may still be landing: any value is a valid read */
		memcpy(&w, (const void *)(t->mem + off), 8);
		*fp = bp_rdma_digest(&w, 8);
		return 0;
	}
	rc = bp_rdma_conn_query(t->conn, off, 8, &q);
	if (rc)
		return rc;
	*fp = q.digest;
	return 0;
}

/* The target's region description cut to the stage's rail count. */
void rb_target_desc(const struct rb_target *t, unsigned rails,
		    struct bp_rdma_peer_desc *d)
{
	*d = t->desc;
	d->rails = rails;
}

/*
 * One pass over the spots; 0 when every word checks (*words: how many),
 * 1 when not yet.
 */
static int rb_check_once(struct rb_target *t, const struct rb_check *c,
			 char *why, size_t len, uint64_t *words)
{
	/* a question to another process per word: fewer */
	unsigned spots = rb_target_pid(t) ? 8 : 32;
	/* reordering across rails and workers: only the last few ops of a
	 * slot can still be in the way */
	uint64_t K = c->outstanding == UINT64_MAX
			     ? UINT64_MAX
			     : c->outstanding / c->slots + 2;

	for (unsigned lane = 0; lane < c->nlanes; lane++) {
		uint64_t n = c->ops[lane];
		unsigned used = n < c->slots ? (unsigned)n : c->slots;
		unsigned ns = used < spots ? used : spots;

		for (unsigned k = 0; k < ns; k++) {
			/* spread over the used slots; the last spot is the
			 * slot of the lane's last op */
			unsigned s =
				k + 1 == ns && n
					? (unsigned)((n - 1) % c->slots)
					: (unsigned)((uint64_t)k * used / ns);
			uint64_t imax = s + (n - 1 - s) / c->slots * c->slots;

			for (int w = 0; w < 2; w++) {
				uint64_t off =
					rr_offset(lane, s, c->slots, c->size) +
					(w ? c->size - 8 : 0);
				uint64_t fp;
				bool ok = false;
				int rc = rb_target_fp(t, off, &fp);

				if (rc)
					bench_die("%s: VERIFY FAILED: target "
						  "query: %s\n",
						  BENCH_CMD, bp_strerror(rc));
				for (uint64_t j = 0; j < K && !ok; j++) {
					uint64_t tag;

					if (j * c->slots > imax)
						break;
					tag = RR_TAG(c->run, lane,
						     imax - j * c->slots);
					ok = bp_rdma_digest(&tag, 8) == fp;
				}
				if (!ok) {
					snprintf(why, len,
						 "lane %u slot %u (%s word, "
						 "offset %" PRIu64
						 "): not one of the last "
						 "%" PRIu64 " writes of run %u "
						 "there (lane wrote %" PRIu64
						 " ops)",
						 lane, s, w ? "last" : "first",
						 off, K, c->run, n);
					return 1;
				}
			}
			*words += 2;
		}
	}
	return 0;
}

uint64_t rb_words_checked;

void rb_verify_target(struct rb_target *t, const struct rb_check *c,
		      const char *what)
{
	int64_t deadline = bench_now_ns() + RB_LAND_NS;
	char why[512];
	uint64_t words = 0;

	while (rb_check_once(t, c, why, sizeof(why), &words)) {
		words = 0;
		if (bench_now_ns() > deadline)
			bench_die("%s: VERIFY FAILED: %s: target region after "
				  "%.1f s: %s\n",
				  BENCH_CMD, what, RB_LAND_NS / 1e9, why);
		bench_sleep_ns(1000000);
	}
	rb_words_checked += words;
}

void rb_rail_sum(const struct bp_rdma *r, unsigned W, unsigned R,
		 struct bp_rdma_rail_stats *sum)
{
	memset(sum, 0, sizeof(*sum));
	for (unsigned w = 0; w < W; w++)
		for (unsigned k = 0; k < R; k++) {
			struct bp_rdma_rail_stats s;

			if (bp_rdma_get_rail_stats(r, w, k, &s))
				continue;
			sum->cq_reads += s.cq_reads;
			sum->cq_empty += s.cq_empty;
			sum->eagain += s.eagain;
		}
}

struct rb_result rb_lanes_result(struct rb_target *t, const char *what,
				 const struct rb_check *chk, int64_t t0,
				 int64_t t1, int64_t cpu_ns)
{
	struct rb_result res;
	uint64_t total = 0;

	for (unsigned l = 0; l < chk->nlanes; l++)
		total += chk->ops[l];
	rb_verify_target(t, chk, what);
	res.mops = (double)total / (double)(t1 - t0) * 1e3;
	res.gbps = (double)total * (double)chk->size / (double)(t1 - t0);
	res.cpu_ns = total ? (double)cpu_ns / (double)total : NAN;
	return res;
}

int rb_stage_open(struct rb_target *t, const struct rb_pipe_cfg *c,
		  struct bp_rdma **out)
{
	struct bp_rdma_config rc;
	struct bp_rdma_peer_desc d;
	int err;

	bp_rdma_config_init(&rc);
	rc.provider = t->provider;
	rc.node = t->node;
	rc.workers = c->workers;
	rc.rails = c->rails;
	rc.credits = c->depth;
	rc.post_batch = c->post;
	rc.reap_batch = c->reap;
	rc.cq_wait = c->cq_wait;
	rc.log = rb_log;
	err = bp_rdma_create(&rc, out);
	if (err) {
		*out = NULL;
		return err;
	}
	rb_target_desc(t, c->rails, &d);
	return bp_rdma_peer_add(*out, &d);
}

static unsigned rb_run_counter; /* tags: a run's writes are its own */

unsigned rb_next_run(void)
{
	rb_run_counter = (rb_run_counter + 1) & 0xfff;
	if (!rb_run_counter)
		rb_run_counter = 1;
	return rb_run_counter;
}

void rb_spawn(pthread_t *t, void *(*fn)(void *), void *arg)
{
	int rc = pthread_create(t, NULL, fn, arg);

	if (rc)
		bench_die("%s: pthread_create: %s\n", BENCH_CMD, strerror(rc));
}
