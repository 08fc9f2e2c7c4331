/* SPDX-License-Identifier: MIT */
/*
 * test_stage_api PROVIDER - bad input to the stage's and the node's public
 * calls gets the documented error, and nothing half-built stays behind
 * (the ASAN+UBSan build checks the leaks):
 *
 *   bp_rdma_create       unknown provider -ENOENT (log says so); every
 *                        config field out of range -EINVAL (log names it);
 *                        NULL -EINVAL; cq_wait EVENT: 0 on tcp, -EOPNOTSUPP
 *                        on shm (no wait object); AUTO 0 on both; hmem: 0
 *                        or -EOPNOTSUPP
 *   bp_rdma_peer_add     NULL, rails mismatch, addrlen 0 or too long, len 0
 *   bp_rdma_peer_remove  NULL, out of range, twice; the id is reused
 *                        -EINVAL; ids 0, 1, 2 ..; -ENOSPC past max_peers
 *   bp_rdma_peer_gone    NULL, out of range, free id -EINVAL; twice 0;
 *                        a job naming it fails -ECONNABORTED; removed
 *                        like any peer (then -EINVAL)
 *   bp_rdma_register     NULL / len 0 / unknown iface -EINVAL, CUDA without
 *                        hmem -EOPNOTSUPP, 0 before start, -EBUSY after
 *   start                a pipeline with more workers than the stage's, or
 *                        a stage_ctx that is not a bp_rdma: start fails with
 *                        a negative errno, all is destroyed cleanly
 *   stats                rail_stats out of range -EINVAL; stats_json
 *                        follows snprintf rules
 *   node                 create / expose / progress with bad input
 *   node thread hooks    thread_start / thread_stop run once on each rail's
 *                        progress thread (role RDMA_PROGRESS, index = the
 *                        rail, thread_ctx passed), with SIGUSR1/SIGTERM
 *                        blocked there; stop runs by node_destroy's return
 *   stall watch          a worker held in its prepare callback:
 *                        bp_rdma_worker_calls reads the same odd count
 *                        twice, site "prepare"; the stage's stall_report
 *                        names worker and site (not shm), its duration
 *                        grows from the first sight; a foreign ctx gets
 *                        nothing; drain_timeout's log carries it; released,
 *                        the job completes, and each worker's count is
 *                        exactly two per call its rail stats account for
 */
#include "st_common.h"

ST_DEFINE_GLOBALS;

static const char *prov;

static void noop_sink(void *ctx, struct bp_job **jobs, unsigned n)
{
	(void)ctx;
	(void)jobs;
	(void)n;
}

static void base_config(struct bp_rdma_config *c)
{
	bp_rdma_config_init(c);
	c->provider = prov;
	c->node = st_node_addr(prov);
	c->log = st_log_fn;
}

/* create must fail with want, and log a line containing what */
static void create_fails(const struct bp_rdma_config *c, int want,
			 const char *what)
{
	struct bp_rdma *r = (struct bp_rdma *)(uintptr_t)0x1;
	int rc;

	st_log_clear();
	rc = bp_rdma_create(c, &r);
	ST_CHECK(rc == want, "create with %s: %d (%s), want %d", what, rc,
		 bp_strerror(rc), want);
	ST_CHECK(r == (struct bp_rdma *)(uintptr_t)0x1,
		 "create with %s failed but wrote *out", what);
	if (rc == 0 && r != (struct bp_rdma *)(uintptr_t)0x1)
		bp_rdma_destroy(r);
	if (want == -EINVAL)
		ST_CHECK(st_log_find(NULL, 0, what, NULL),
			 "create with bad %s: no log line naming it", what);
}

static void test_create(void)
{
	struct bp_rdma_config c;
	struct bp_rdma *r;
	const int bad_cpu[] = {-1};
	const int big_cpu[] = {CPU_SETSIZE};
	int rc;

	ST_CHECK(bp_rdma_create(NULL, &r) == -EINVAL, "create(NULL)");
	base_config(&c);
	ST_CHECK(bp_rdma_create(&c, NULL) == -EINVAL, "create(c, NULL)");
	c.provider = "no-such-provider";
	create_fails(&c, -ENOENT, "provider");
	ST_CHECK(st_log_find(NULL, 0, "no-such-provider", NULL),
		 "the log does not name the missing provider");

#define BAD(field, value, name)                                                \
	do {                                                                   \
		base_config(&c);                                               \
		c.field = value;                                               \
		create_fails(&c, -EINVAL, name);                               \
	} while (0)
	BAD(workers, 0, "workers");
	BAD(workers, BP_MAX_WORKERS + 1, "workers");
	BAD(rails, 0, "rails");
	BAD(rails, BP_RDMA_MAX_RAILS + 1, "rails");
	BAD(credits, 0, "credits");
	BAD(credits, 65537, "credits");
	BAD(post_batch, 0, "post_batch");
	BAD(post_batch, 4097, "post_batch");
	BAD(reap_batch, 0, "reap_batch");
	BAD(reap_batch, 1025, "reap_batch");
	BAD(max_peers, 0, "max_peers");
	BAD(max_peers, 65537, "max_peers");
	BAD(cq_wait, (enum bp_rdma_cq_wait)(BP_RDMA_CQ_AUTO + 1), "cq_wait");
	BAD(sleep_max_ns, 999, "sleep_max_ns");
	BAD(sleep_max_ns, 1000000001, "sleep_max_ns");
	BAD(peer_timeout_ns, 999999, "peer_timeout_ns");
	BAD(pin, (enum bp_rdma_pin)2, "pin");
	BAD(n_fallback_cpus, 1, "fallback_cpus");
	base_config(&c);
	c.cq_wait = BP_RDMA_CQ_EVENT;
	c.event_timeout_ns = 999;
	create_fails(&c, -EINVAL, "event_timeout_ns");
	c.event_timeout_ns = 10000000001ull;
	create_fails(&c, -EINVAL, "event_timeout_ns");
	base_config(&c);
	c.fallback_cpus = bad_cpu;
	c.n_fallback_cpus = 1;
	create_fails(&c, -EINVAL, "fallback_cpus");
	c.fallback_cpus = big_cpu;
	create_fails(&c, -EINVAL, "fallback_cpus");
#undef BAD

	/* EVENT: tcp has a wait fd, shm has none */
	base_config(&c);
	c.cq_wait = BP_RDMA_CQ_EVENT;
	c.workers = 2;
	c.rails = 2;
	if (!strcmp(prov, "shm")) {
		create_fails(&c, -EOPNOTSUPP, "EVENT");
		ST_CHECK(st_log_find(NULL, 0, "wait object", NULL),
			 "EVENT on shm: the log does not say why");
	} else {
		rc = bp_rdma_create(&c, &r);
		ST_CHECK(rc == 0, "EVENT on %s: %s", prov, bp_strerror(rc));
		if (!rc)
			bp_rdma_destroy(r);
	}
	/* AUTO: EVENT where there is a wait fd, SPIN_SLEEP on shm */
	c.cq_wait = BP_RDMA_CQ_AUTO;
	rc = bp_rdma_create(&c, &r);
	ST_CHECK(rc == 0, "AUTO on %s: %s", prov, bp_strerror(rc));
	if (!rc)
		bp_rdma_destroy(r);
	/* hmem: whatever the provider says, cleanly */
	base_config(&c);
	c.hmem = true;
	rc = bp_rdma_create(&c, &r);
	ST_CHECK(rc == 0 || rc == -EOPNOTSUPP, "hmem: %s", bp_strerror(rc));
	printf("  hmem on %s: %s\n", prov, rc ? bp_strerror(rc) : "ok");
	if (!rc)
		bp_rdma_destroy(r);
	/* the names it reports */
	base_config(&c);
	c.rails = 3;
	rc = bp_rdma_create(&c, &r);
	ST_CHECK(rc == 0, "create: %s", bp_strerror(rc));
	if (!rc) {
		ST_CHECK(!strcmp(bp_rdma_provider(r), prov), "provider %s",
			 bp_rdma_provider(r));
		ST_CHECK(bp_rdma_rails(r) == 3, "rails %u", bp_rdma_rails(r));
		ST_CHECK(bp_rdma_stage(r) && bp_rdma_stage(r)->process,
			 "stage table");
		bp_rdma_destroy(r);
	}
	ST_CHECK(bp_rdma_stage(NULL) == NULL &&
			 bp_rdma_provider(NULL) == NULL &&
			 bp_rdma_rails(NULL) == 0,
		 "NULL accessors");
	bp_rdma_destroy(NULL);
}

static _Atomic int gone_status; /* the sink writes, main reads after drain */

static void gone_sink(void *ctx, struct bp_job **jobs, unsigned n)
{
	(void)ctx;
	for (unsigned i = 0; i < n; i++)
		gone_status = jobs[i]->status;
}

static void test_peers_register(struct st_fix *f)
{
	struct bp_rdma_config c;
	struct bp_rdma *r;
	struct bp_rdma_peer_desc d;
	struct bp_rdma_mem cuda = {.iface = BP_RDMA_MEM_CUDA, .device = 0};
	struct bp_rdma_mem weird = {.iface = (enum bp_rdma_mem_iface)7};
	struct bp_rdma_mem sys = {.iface = BP_RDMA_MEM_SYSTEM};
	struct bp_pipeline_config pc;
	struct bp_pipeline *p;
	struct bp_rdma_rail_stats rs;
	char js[16];
	uint8_t *buf = st_alloc(1 << 16);
	int rc;

	base_config(&c);
	c.rails = f->rails;
	c.max_peers = 3;
	rc = bp_rdma_create(&c, &r);
	ST_CHECK(rc == 0, "create: %s", bp_strerror(rc));
	if (rc)
		return;
	ST_CHECK(bp_rdma_peer_add(NULL, &f->desc) == -EINVAL,
		 "peer_add NULL r");
	ST_CHECK(bp_rdma_peer_add(r, NULL) == -EINVAL, "peer_add NULL desc");
	d = f->desc;
	d.rails = f->rails + 1;
	ST_CHECK(bp_rdma_peer_add(r, &d) == -EINVAL, "peer_add rails + 1");
	d.rails = 0;
	ST_CHECK(bp_rdma_peer_add(r, &d) == -EINVAL, "peer_add rails 0");
	d = f->desc;
	d.rail[1].addrlen = 0;
	ST_CHECK(bp_rdma_peer_add(r, &d) == -EINVAL, "peer_add addrlen 0");
	d = f->desc;
	d.rail[0].addrlen = BP_RDMA_ADDR_MAX + 1;
	ST_CHECK(bp_rdma_peer_add(r, &d) == -EINVAL, "peer_add addrlen > max");
	d = f->desc;
	d.len = 0;
	ST_CHECK(bp_rdma_peer_add(r, &d) == -EINVAL, "peer_add len 0");
	for (int i = 0; i < 3; i++) {
		rc = bp_rdma_peer_add(r, &f->desc);
		ST_CHECK(rc == i, "peer_add %d: %d", i, rc);
	}
	rc = bp_rdma_peer_add(r, &f->desc);
	ST_CHECK(rc == -ENOSPC, "peer_add past max_peers: %d (%s)", rc,
		 bp_strerror(rc));
	/* an id given back is handed out again; nothing else is */
	ST_CHECK(bp_rdma_peer_remove(NULL, 1) == -EINVAL, "peer_remove NULL");
	ST_CHECK(bp_rdma_peer_remove(r, -1) == -EINVAL, "peer_remove -1");
	ST_CHECK(bp_rdma_peer_remove(r, 3) == -EINVAL, "peer_remove 3 of 3");
	ST_CHECK(bp_rdma_peer_remove(r, 1) == 0, "peer_remove 1");
	ST_CHECK(bp_rdma_peer_remove(r, 1) == -EINVAL, "peer_remove 1 twice");
	rc = bp_rdma_peer_add(r, &f->desc);
	ST_CHECK(rc == 1, "peer_add after remove: %d", rc);
	rc = bp_rdma_peer_add(r, &f->desc);
	ST_CHECK(rc == -ENOSPC, "peer_add past max_peers again: %d", rc);
	/* told gone: taken until removed, then free */
	ST_CHECK(bp_rdma_peer_gone(NULL, 2) == -EINVAL, "peer_gone NULL");
	ST_CHECK(bp_rdma_peer_gone(r, -1) == -EINVAL, "peer_gone -1");
	ST_CHECK(bp_rdma_peer_gone(r, 3) == -EINVAL, "peer_gone 3 of 3");
	ST_CHECK(bp_rdma_peer_gone(r, 2) == 0, "peer_gone 2");
	ST_CHECK(bp_rdma_peer_gone(r, 2) == 0, "peer_gone 2 twice");
	rc = bp_rdma_peer_add(r, &f->desc);
	ST_CHECK(rc == -ENOSPC, "peer_add with 2 gone, not removed: %d", rc);
	ST_CHECK(bp_rdma_peer_remove(r, 2) == 0, "peer_remove of a gone one");
	ST_CHECK(bp_rdma_peer_gone(r, 2) == -EINVAL, "peer_gone of a free id");
	rc = bp_rdma_peer_add(r, &f->desc);
	ST_CHECK(rc == 2, "peer_add after removing a gone one: %d", rc);
	ST_CHECK(bp_rdma_peer_gone(r, 2) == 0, "peer_gone 2 again");

	ST_CHECK(bp_rdma_register(NULL, buf, 64, NULL) == -EINVAL,
		 "register NULL r");
	ST_CHECK(bp_rdma_register(r, NULL, 64, NULL) == -EINVAL,
		 "register NULL addr");
	ST_CHECK(bp_rdma_register(r, buf, 0, NULL) == -EINVAL,
		 "register len 0");
	ST_CHECK(bp_rdma_register(r, buf, 64, &weird) == -EINVAL,
		 "register unknown iface");
	st_log_clear();
	rc = bp_rdma_register(r, buf, 64, &cuda);
	ST_CHECK(rc == -EOPNOTSUPP, "register CUDA without hmem: %s",
		 bp_strerror(rc));
	ST_CHECK(st_log_find(NULL, 0, "hmem", NULL),
		 "register CUDA: the log does not mention hmem");
	ST_CHECK(bp_rdma_register(r, buf, 1 << 16, NULL) == 0,
		 "register before start");
	ST_CHECK(bp_rdma_register(r, buf, 4096, &sys) == 0,
		 "register system memory before start");

	ST_CHECK(bp_rdma_get_rail_stats(r, 1, 0, &rs) == -EINVAL,
		 "rail_stats worker out of range");
	ST_CHECK(bp_rdma_get_rail_stats(r, 0, f->rails, &rs) == -EINVAL,
		 "rail_stats rail out of range");
	ST_CHECK(bp_rdma_get_rail_stats(r, 0, 0, NULL) == -EINVAL,
		 "rail_stats NULL");
	ST_CHECK(bp_rdma_get_rail_stats(r, 0, 0, &rs) == 0 && rs.posted == 0,
		 "rail_stats");
	rc = bp_rdma_stats_json(r, NULL, 0);
	ST_CHECK(rc > 16, "stats_json length %d", rc);
	memset(js, 'x', sizeof(js));
	ST_CHECK(bp_rdma_stats_json(r, js, sizeof(js)) == rc &&
			 js[sizeof(js) - 1] == '\0' && js[0] == '{',
		 "stats_json truncation");

	/* the pipeline's workers must match the stage's (1 here) */
	bp_pipeline_config_init(&pc);
	pc.workers = 2;
	pc.stage = bp_rdma_stage(r);
	pc.stage_ctx = r;
	pc.sink = noop_sink;
	pc.log = st_log_fn;
	ST_CHECK(bp_pipeline_create(&pc, &p) == 0, "pipeline create");
	st_log_clear();
	rc = bp_pipeline_start(p);
	ST_CHECK(rc < 0, "start with 2 workers on a 1-worker stage: %d", rc);
	ST_CHECK(st_log_find(NULL, 0, "more workers", NULL),
		 "the log does not say why start failed");
	bp_pipeline_destroy(p);
	/* stage_ctx that is not a bp_rdma */
	pc.workers = 1;
	pc.stage_ctx = buf;
	ST_CHECK(bp_pipeline_create(&pc, &p) == 0, "pipeline create");
	rc = bp_pipeline_start(p);
	ST_CHECK(rc < 0, "start with a foreign stage_ctx: %d", rc);
	bp_pipeline_destroy(p);
	/* a good one: register is refused while it runs */
	pc.stage_ctx = r;
	pc.sink = gone_sink;
	ST_CHECK(bp_pipeline_create(&pc, &p) == 0, "pipeline create");
	rc = bp_pipeline_start(p);
	ST_CHECK(rc == 0, "start: %s", bp_strerror(rc));
	rc = bp_rdma_register(r, buf, 4096, NULL);
	ST_CHECK(rc == -EBUSY, "register after start: %d (%s)", rc,
		 bp_strerror(rc));
	{
		/* a job for the gone peer fails at once, nothing posted */
		struct bp_rdma_job j;
		struct bp_job *h = &j.hdr;

		gone_status = 1;
		bp_rdma_job_set(&j, BP_RDMA_WRITE, 2, buf, 64, 0);
		ST_CHECK(bp_pipeline_submit(p, &h, 1, 0, -1) == 1,
			 "submit to a gone peer");
		ST_CHECK(bp_pipeline_drain(p) == 0, "drain");
		ST_CHECK(gone_status == -ECONNABORTED,
			 "a job for a gone peer: status %d (%s)", gone_status,
			 bp_strerror(gone_status));
	}
	bp_pipeline_destroy(p);
	bp_rdma_destroy(r);
	free(buf);
}

static void test_node(void)
{
	struct bp_rdma_node_config nc;
	struct bp_rdma_node *n = NULL;
	struct bp_rdma_region *reg = NULL;
	struct bp_rdma_mem cuda = {.iface = BP_RDMA_MEM_CUDA};
	struct bp_rdma_mem weird = {.iface = (enum bp_rdma_mem_iface)9};
	uint8_t *buf = st_alloc(4096);
	int rc;

	ST_CHECK(bp_rdma_node_create(NULL, &n) == -EINVAL, "node_create NULL");
	bp_rdma_node_config_init(&nc);
	nc.provider = prov;
	nc.node = st_node_addr(prov);
	nc.log = st_log_fn;
	ST_CHECK(bp_rdma_node_create(&nc, NULL) == -EINVAL,
		 "node_create NULL out");
	nc.rails = 0;
	ST_CHECK(bp_rdma_node_create(&nc, &n) == -EINVAL, "node rails 0");
	nc.rails = BP_RDMA_MAX_RAILS + 1;
	ST_CHECK(bp_rdma_node_create(&nc, &n) == -EINVAL, "node rails 9");
	nc.rails = 1;
	nc.progress_wait = (enum bp_rdma_cq_wait)(BP_RDMA_CQ_AUTO + 1);
	ST_CHECK(bp_rdma_node_create(&nc, &n) == -EINVAL,
		 "node progress_wait past AUTO");
	nc.progress_wait = BP_RDMA_CQ_SPIN_SLEEP;
	nc.sleep_max_ns = 10;
	ST_CHECK(bp_rdma_node_create(&nc, &n) == -EINVAL,
		 "node sleep_max_ns 10");
	nc.sleep_max_ns = 50000;
	nc.provider = "no-such-provider";
	ST_CHECK(bp_rdma_node_create(&nc, &n) == -ENOENT,
		 "node unknown provider");
	nc.provider = prov;
	nc.progress_wait = BP_RDMA_CQ_EVENT;
	rc = bp_rdma_node_create(&nc, &n);
	if (!strcmp(prov, "shm"))
		ST_CHECK(rc == -EOPNOTSUPP, "node EVENT on shm: %s",
			 bp_strerror(rc));
	else
		ST_CHECK(rc == 0, "node EVENT on %s: %s", prov,
			 bp_strerror(rc));
	if (!rc)
		bp_rdma_node_destroy(n);
	nc.progress_wait = BP_RDMA_CQ_SPIN_SLEEP;
	rc = bp_rdma_node_create(&nc, &n);
	ST_CHECK(rc == 0, "node_create: %s", bp_strerror(rc));
	if (rc)
		return;
	ST_CHECK(!strcmp(bp_rdma_node_provider(n), prov), "node provider %s",
		 bp_rdma_node_provider(n));
	ST_CHECK(bp_rdma_node_expose(NULL, buf, 64, NULL, &reg) == -EINVAL,
		 "expose NULL node");
	ST_CHECK(bp_rdma_node_expose(n, NULL, 64, NULL, &reg) == -EINVAL,
		 "expose NULL addr");
	ST_CHECK(bp_rdma_node_expose(n, buf, 0, NULL, &reg) == -EINVAL,
		 "expose len 0");
	ST_CHECK(bp_rdma_node_expose(n, buf, 64, NULL, NULL) == -EINVAL,
		 "expose NULL out");
	ST_CHECK(bp_rdma_node_expose(n, buf, 64, &weird, &reg) == -EINVAL,
		 "expose unknown iface");
	ST_CHECK(bp_rdma_node_expose(n, buf, 64, &cuda, &reg) == -EOPNOTSUPP,
		 "expose CUDA without hmem");
	ST_CHECK(bp_rdma_node_progress(n) == -EINVAL,
		 "node_progress with progress threads");
	ST_CHECK(bp_rdma_node_progress(NULL) == -EINVAL, "node_progress NULL");
	ST_CHECK(bp_rdma_node_data_count(n) == 0, "data count");
	ST_CHECK(bp_rdma_node_data_count(NULL) == 0, "data count NULL");
	bp_rdma_region_close(NULL);
	bp_rdma_node_destroy(n);
	bp_rdma_node_destroy(NULL);
	/* without progress threads: progress polls */
	nc.progress_threads = false;
	rc = bp_rdma_node_create(&nc, &n);
	ST_CHECK(rc == 0, "node without threads: %s", bp_strerror(rc));
	if (!rc) {
		ST_CHECK(bp_rdma_node_progress(n) == 0,
			 "progress on idle node");
		bp_rdma_node_destroy(n);
	}
	free(buf);
}

/* --------------------------------------------------- node thread hooks */

struct hooks {
	atomic_uint starts[BP_RDMA_MAX_RAILS], stops[BP_RDMA_MAX_RAILS];
	atomic_uint wrong; /* a bad role, index or ctx; a signal not blocked */
	void *self;
};

static void hook_check(struct hooks *h, void *ctx, enum bp_thread_role role,
		       unsigned index)
{
	sigset_t cur;

	pthread_sigmask(SIG_BLOCK, NULL, &cur);
	if (ctx != h->self || role != BP_THREAD_RDMA_PROGRESS ||
	    index >= BP_RDMA_MAX_RAILS || !sigismember(&cur, SIGUSR1) ||
	    !sigismember(&cur, SIGTERM))
		atomic_fetch_add(&h->wrong, 1);
}

static void hook_start(void *ctx, enum bp_thread_role role, unsigned index)
{
	struct hooks *h = ctx;

	hook_check(h, ctx, role, index);
	if (index < BP_RDMA_MAX_RAILS)
		atomic_fetch_add(&h->starts[index], 1);
}

static void hook_stop(void *ctx, enum bp_thread_role role, unsigned index)
{
	struct hooks *h = ctx;

	hook_check(h, ctx, role, index);
	if (index < BP_RDMA_MAX_RAILS)
		atomic_fetch_add(&h->stops[index], 1);
}

static void test_node_hooks(void)
{
	struct bp_rdma_node_config nc;
	struct bp_rdma_node *n = NULL;
	struct hooks h = {0};
	unsigned rails = 2;
	int rc;

	h.self = &h;
	bp_rdma_node_config_init(&nc);
	nc.provider = prov;
	nc.node = st_node_addr(prov);
	nc.rails = rails;
	nc.log = st_log_fn;
	nc.thread_start = hook_start;
	nc.thread_stop = hook_stop;
	nc.thread_ctx = &h;
	rc = bp_rdma_node_create(&nc, &n);
	ST_CHECK(rc == 0, "node_create with hooks: %s", bp_strerror(rc));
	if (rc)
		return;
	/* the hooks run on the threads: give them a moment to start */
	for (int i = 0; i < 5000; i++) {
		unsigned started = 0;

		for (unsigned k = 0; k < rails; k++)
			started += atomic_load(&h.starts[k]);
		if (started == rails)
			break;
		bpt_sleep_ms(1);
	}
	bp_rdma_node_destroy(n);
	for (unsigned k = 0; k < BP_RDMA_MAX_RAILS; k++) {
		unsigned want = k < rails ? 1 : 0;

		ST_CHECK(atomic_load(&h.starts[k]) == want &&
				 atomic_load(&h.stops[k]) == want,
			 "rail %u: thread_start ran %u times, thread_stop %u "
			 "(want %u each)",
			 k, atomic_load(&h.starts[k]), atomic_load(&h.stops[k]),
			 want);
	}
	ST_CHECK(atomic_load(&h.wrong) == 0,
		 "%u hook calls with a wrong role, index or ctx, or signals "
		 "not blocked",
		 atomic_load(&h.wrong));

	/* without progress threads the hooks never run */
	memset(&h, 0, sizeof(h));
	h.self = &h;
	nc.progress_threads = false;
	rc = bp_rdma_node_create(&nc, &n);
	ST_CHECK(rc == 0, "node_create without progress threads: %s",
		 bp_strerror(rc));
	if (!rc)
		bp_rdma_node_destroy(n);
	ST_CHECK(atomic_load(&h.starts[0]) == 0 &&
			 atomic_load(&h.stops[0]) == 0,
		 "hooks ran without progress threads");
}

/* ------------------------------------------------------- stall watch */

struct hold {
	atomic_int entered, release; /* set by the prepare / by main */
};

/* Holds the worker inside the stage until main releases it. */
static int holding_prepare(void *ctx, struct bp_rdma_job *job)
{
	struct hold *h = ctx;

	(void)job;
	/* release/acquire: main's watch sees the worker inside */
	atomic_store_explicit(&h->entered, 1, memory_order_release);
	while (!atomic_load_explicit(&h->release, memory_order_acquire))
		bpt_sleep_ms(1);
	return 0;
}

/* The worker whose count is odd, or -1; *site its call. */
static int worker_inside(const struct st_fix *f, uint64_t *calls,
			 const char **site)
{
	for (unsigned w = 0; w < f->workers; w++) {
		int rc = bp_rdma_worker_calls(f->r, w, calls, site);

		ST_CHECK(rc == 0, "bp_rdma_worker_calls(%u): %d", w, rc);
		if (!rc && (*calls & 1))
			return (int)w;
	}
	return -1;
}

/* The seconds a stall report gives worker w inside site, or -1. */
static double report_secs(const char *rep, int w, const char *site)
{
	char needle[96];
	const char *at;
	double secs;

	snprintf(needle, sizeof(needle), "worker %d inside %s for at least ", w,
		 site);
	at = strstr(rep, needle);
	if (!at || sscanf(at + strlen(needle), "%lf", &secs) != 1)
		return -1;
	return secs;
}

static void test_stall(void)
{
	struct st_fix f;
	struct bp_rdma_config c;
	struct hold h = {0};
	struct st_job job;
	const struct bp_stage *stage;
	const char *site = "unset";
	char rep[512], line[256];
	uint64_t c1, c2, calls;
	double s1, s2;
	int w, rc, n;
	uint8_t *src = st_alloc(4096);

	if (st_node_open(&f, prov, 1, 1 << 16))
		exit(1);
	st_rdma_config(&f, &c);
	c.prepare = holding_prepare;
	c.prepare_ctx = &h;
	if (st_stage_open(&f, &c, NULL))
		exit(1);
	stage = bp_rdma_stage(f.r);
	ST_CHECK(stage->stall_report != NULL, "the stage has no stall_report");
	if (!stage->stall_report) {
		st_close(&f);
		free(src);
		return;
	}
	ST_CHECK(bp_rdma_worker_calls(NULL, 0, &calls, NULL) == -EINVAL,
		 "worker_calls NULL r");
	ST_CHECK(bp_rdma_worker_calls(f.r, 0, NULL, NULL) == -EINVAL,
		 "worker_calls NULL calls");
	ST_CHECK(bp_rdma_worker_calls(f.r, f.workers, &calls, NULL) == -EINVAL,
		 "worker_calls past the workers");
	ST_CHECK(worker_inside(&f, &calls, &site) < 0 && calls == 0 && !site,
		 "before start: a count of %" PRIu64 ", site %s", calls,
		 site ? site : "NULL");
	n = stage->stall_report(f.r, rep, sizeof(rep));
	ST_CHECK(n == 0 && rep[0] == '\0',
		 "stall report before start: %d \"%s\"", n, rep);
	/* not a stage context: nothing to say, no crash */
	n = stage->stall_report(&f, rep, sizeof(rep));
	ST_CHECK(n == 0 && rep[0] == '\0', "stall report of a foreign ctx: %d",
		 n);
	ST_CHECK(stage->stall_report(NULL, NULL, 0) == 0,
		 "stall report of NULL");
	if (st_start(&f))
		exit(1);

	st_jobs_init(&job, 1);
	bp_rdma_job_set(&job.rj, BP_RDMA_WRITE, (uint32_t)f.peer, src, 4096, 0);
	ST_CHECK(st_submit(&f, &job, 1) == 1, "submit");
	/* acquire: pairs with the prepare's release */
	while (!atomic_load_explicit(&h.entered, memory_order_acquire))
		bpt_sleep_ms(1);

	w = worker_inside(&f, &c1, &site);
	ST_CHECK(w >= 0 && site && !strcmp(site, "prepare"),
		 "while held in prepare: worker %d, site %s", w,
		 site ? site : "NULL");
	bpt_sleep_ms(50);
	ST_CHECK(worker_inside(&f, &c2, &site) == w && c2 == c1,
		 "worker %d's count moved while it was held (%" PRIu64
		 " -> %" PRIu64 ")",
		 w, c1, c2);

	n = stage->stall_report(f.r, rep, sizeof(rep));
	s1 = report_secs(rep, w, "prepare");
	ST_CHECK(n > 0 && (size_t)n == strlen(rep) && s1 >= 0.015,
		 "first stall report: %d \"%s\"", n, rep);
	ST_CHECK(strstr(rep, "cannot be interrupted") != NULL,
		 "the stall report does not say why it matters: \"%s\"", rep);
	ST_CHECK(!strstr(rep, "shm posts"),
		 "a stall in prepare blamed on shm: \"%s\"", rep);
	ST_CHECK(stage->stall_report(f.r, rep, 8) == n && strlen(rep) == 7,
		 "a short buffer: not the length needed, or not cut at 7");
	bpt_sleep_ms(200);
	stage->stall_report(f.r, rep, sizeof(rep));
	s2 = report_secs(rep, w, "prepare");
	ST_CHECK(s2 >= s1 + 0.19,
		 "the later report does not count from the first sight: "
		 "%.2f s then %.2f s (\"%s\")",
		 s1, s2, rep);

	st_log_clear();
	rc = bp_pipeline_drain_timeout(f.p, 100 * 1000000ll);
	ST_CHECK(rc == -ETIMEDOUT, "drain_timeout with a held worker: %s",
		 bp_strerror(rc));
	ST_CHECK(st_log_find(line, sizeof(line), "stage rdma: worker",
			     "inside prepare for at least", NULL),
		 "drain_timeout's log does not carry the stage's stall report");

	/* release: pairs with the prepare's acquire */
	atomic_store_explicit(&h.release, 1, memory_order_release);
	rc = bp_pipeline_drain(f.p);
	ST_CHECK(rc == 0, "drain after the release: %s", bp_strerror(rc));
	ST_CHECK(job.status == BP_JOB_OK, "the held job: status %d",
		 job.status);
	ST_CHECK(worker_inside(&f, &calls, NULL) < 0,
		 "a worker's count is odd after drain");
	/*
	 * Every call was counted, in and out: the worker that took the job
	 * made prepare, one fi_av_insert (the peer's first use), its
	 * registrations, its posts and its CQ reads, and nothing else
	 * (spin-sleep: no fi_trywait; no error: no fi_cq_readerr); the other
	 * never called out.
	 */
	for (unsigned i = 0; i < f.workers; i++) {
		struct bp_rdma_rail_stats rs = {0};
		uint64_t want = 0;

		bp_rdma_worker_calls(f.r, i, &calls, &site);
		if (bp_rdma_get_rail_stats(f.r, i, 0, &rs) == 0 && (int)i == w)
			want = 2 * (2 + rs.posted + rs.eagain + rs.cq_reads +
				    rs.mr_cache_misses);
		ST_CHECK(calls == want && ((int)i != w ||
					   (site && strcmp(site, "prepare"))),
			 "after drain: worker %u counted %" PRIu64
			 ", want %" PRIu64 " (last call %s; posted %" PRIu64
			 " eagain %" PRIu64 " cq_reads %" PRIu64 " mr %" PRIu64
			 ")",
			 i, calls, want, site ? site : "NULL", rs.posted,
			 rs.eagain, rs.cq_reads, rs.mr_cache_misses);
	}
	n = stage->stall_report(f.r, rep, sizeof(rep));
	ST_CHECK(n == 0, "stall report after drain: \"%s\"", rep);
	st_close(&f);
	free(src);
}

int main(int argc, char **argv)
{
	struct st_fix f;
	char name[96];

	prov = argc > 1 ? argv[1] : "tcp;ofi_rxm";
	st_env();
	snprintf(name, sizeof(name), "stage_api %s", prov);
	if (!st_provider_ok(prov))
		return ST_SKIP;
	st_watchdog(60, "%s", name);
	test_create();
	test_node();
	test_node_hooks();
	if (st_node_open(&f, prov, 2, 1 << 16))
		return 1;
	test_peers_register(&f);
	st_close(&f);
	test_stall();
	st_watchdog_off();
	return st_result(name);
}
