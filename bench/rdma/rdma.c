/* SPDX-License-Identifier: MIT */
/*
 * rdma.c - `bpbench rdma`: one-sided RDMA writes through the pipeline
 * with the RDMA stage, against the same writes made with plain libfabric
 * calls (rdma_raw.c), interleaved in the same run, on every provider that
 * opens here (shm, tcp;ofi_rxm).
 *
 * Target. Both variants write into the same target of the run: bp-target
 * as a separate process when it is built next to bpbench and starts (the
 * default; --in-process to skip it), else a bp_rdma_node in this process
 * (progress threads on, the library's default progress wait) exposing a
 * region of --region-mib MiB. The region is split in lanes (a producer
 * thread of the pipeline, a thread of the raw loop); lane L's op i writes
 * slot L * S + i % S, S = min(--slots, region / (lanes * size)). --slots
 * is 16 by default, so that the target memory of a lane stays in cache up
 * to 64 KiB writes (16 x 1 MiB at 1 MiB): the numbers are about the
 * transport and the pipeline, not about this VM's DRAM (a 64 MiB streaming
 * target runs shm at a third of the speed, for both variants alike).
 *
 * Pipeline variant, per point: bp_rdma_create (workers W, rails R, credits
 * = depth, post_batch, reap_batch, cq_wait BUSY) and a pipeline of W
 * workers (max_batch = post_batch * rails, max_inflight = depth * rails,
 * waits at their defaults, or --waits). P producer threads (--producers,
 * default 1) each own a pool of preallocated jobs with their buffers
 * (registered with bp_rdma_register before start); a producer takes up to
 * max_batch free jobs from its free ring (a bp_ring, SPSC), stamps them and
 * submits them with one blocking bp_pipeline_submit; the sink checks each job
 * and gives it back through the free ring. Raw variant: W threads, each with
 * its own fabric, domain, endpoint, CQ and AV per rail, `depth` writes in
 * flight per rail, posted post_batch at a time, reaped reap_batch per
 * fi_cq_read, polling.
 *
 * One run of a variant: its threads write for --ms, then stop posting, and
 * the run ends when the last completion is in (the sink's clock for the
 * pipeline, the threads' own for raw). GB/s = ops * size / (first post ..
 * last completion), 1 GB = 1e9 bytes. For each point the two variants run
 * once unmeasured (connections, page faults), then --runs times each,
 * alternating which goes first; tables show medians, ratios are medians of
 * the per-run ratios.
 *
 * CPU ns/op: the CPU time of the variant's own threads over the run
 * (CLOCK_THREAD_CPUTIME_ID, read by each thread for the producers and the
 * raw threads; the per-thread CPU clocks of the pipeline's workers and
 * sink, found as the threads bp_pipeline_start created), divided by ops.
 * The target's CPU (progress threads, or the daemon) is not in either.
 * Both variants busy-poll, so their CPU per op includes the polling.
 *
 * Verification, every measured run (a broken fast variant must not win):
 * pipeline: every job reaches the sink with BP_JOB_OK and the sink's count
 * equals what the producers submitted, and the pipeline's statistics agree
 * (ok += submitted, failed and cancelled unchanged); raw: completions =
 * posts, no error completion. Then the target: every write carries the tag
 * (run, lane, op) in its first and last 8 bytes; for up to 32 slots per
 * lane (8 with the daemon, queried with bp_rdma_conn_query), both words
 * must be the tag of an op of this run, this lane, that slot, among the
 * last ones written there. Re-checked for up to 3 s while writes land. Any
 * failure exits 1.
 *
 * --latency: 4 KiB writes at depth 1, one worker, per completion wait
 * (busy polling against sleeping): the pipeline closes the loop in the sink
 * (the sink resubmits the job it got, BP_SUBMIT_NONBLOCK, which cannot fail
 * with one job in a ring of thousands), latency = the clock just before
 * bp_pipeline_submit
 * -> the clock on entry to the sink; raw: post -> completion reaped. Then
 * idle CPU: a started pipeline with nothing to do, and one fed 100 ops/s.
 */
#include "rdma/rdma_harness.h"

const char *const rb_var_name[RB_NVAR] = {"pipeline", "raw", "direct"};

static void rb_add(struct rb_results *r, int prov, unsigned size, unsigned post,
		   unsigned reap, unsigned depth, unsigned W, unsigned R)
{
	struct rb_point *p;

	for (int i = 0; i < r->npoints; i++) {
		p = &r->pt[i];
		if (p->prov == prov && p->size == size && p->post == post &&
		    p->reap == reap && p->depth == depth && p->workers == W &&
		    p->rails == R)
			return;
	}
	if (r->npoints >= RB_MAX_POINTS)
		bench_die("%s: more than %d points\n", BENCH_CMD,
			  RB_MAX_POINTS);
	p = &r->pt[r->npoints++];
	memset(p, 0, sizeof(*p));
	p->prov = prov;
	p->size = size;
	p->post = post;
	p->reap = reap;
	p->depth = depth;
	p->workers = W;
	p->rails = R;
	for (int v = 0; v < RB_NVAR; v++)
		for (int k = 0; k < RB_MAX_RUNS; k++)
			p->gbps[v][k] = p->mops[v][k] = p->cpu[v][k] = NAN;
}

static void rb_build_points(const struct rb_opts *o, struct rb_results *r)
{
	static const unsigned sizes[] = {64, 4096, 65536, 1u << 20};

	for (int pv = 0; pv < o->nprov; pv++) {
		if (o->grid) {
			for (int a = 0; a < o->nsizes; a++)
				for (int b = 0; b < o->npost; b++)
					for (int c = 0; c < o->nreap; c++)
						for (int d = 0; d < o->ndepth;
						     d++)
							for (int e = 0;
							     e < o->nworkers;
							     e++)
								for (int f = 0;
								     f <
								     o->nrails;
								     f++)
									rb_add(r,
									       pv,
									       o->sizes[a],
									       o->post[b],
									       o->reap[c],
									       o->depth[d],
									       o->workers
										       [e],
									       o->rails[f]);
			continue;
		}
		/* 1: sizes at the base point (target 1 at 64 KiB, 1 MiB) */
		for (int a = 0; a < 4; a++)
			rb_add(r, pv, sizes[a], RB_BASE_POST, RB_BASE_REAP,
			       RB_BASE_DEPTH, 1, 1);
		/* 2: 64 B batching, unbatched against batched (target 2) */
		rb_add(r, pv, 64, 1, 1, 1, 1, 1);
		rb_add(r, pv, 64, 16, 16, 64, 1, 1);
		if (o->a.quick)
			continue;
		/* 3: at 64 B each knob alone around post 16 reap 16 depth 64 */
		for (unsigned v = 1; v <= 64; v *= 4)
			rb_add(r, pv, 64, v, 16, 64, 1, 1);
		for (unsigned v = 1; v <= 64; v = v == 1 ? 16 : v * 4)
			rb_add(r, pv, 64, 16, v, 64, 1, 1);
		for (unsigned v = 1; v <= 64; v = v == 1 ? 16 : v * 4)
			rb_add(r, pv, 64, 16, 16, v, 1, 1);
		/* 4: at 64 KiB workers x rails */
		for (unsigned w = 1; w <= 4; w *= 2)
			for (unsigned k = 1; k <= 2; k++)
				rb_add(r, pv, 65536, RB_BASE_POST, RB_BASE_REAP,
				       RB_BASE_DEPTH, w, k);
	}
}

/*
 * Jobs in a producer's pool: every credit busy, plus a batch per rail on
 * its way in and one on its way back. Not more: each job has its own
 * buffer, and the raw loop writes from one buffer per credit, so a larger
 * pool would give the pipeline a larger (colder) source working set than
 * raw's - measured here, 2x the credits cost the pipeline 10-30 % at 1 MiB
 * on shm, through the cache, not the library.
 */
static unsigned rb_pool_opt; /* --pool: jobs per producer, 0 auto */

unsigned rb_pool_jobs(const struct rb_point *p, unsigned P)
{
	uint64_t credits = (uint64_t)p->workers * p->depth * p->rails;
	uint64_t want = credits + 2 * (uint64_t)p->post * p->rails;
	uint64_t cap = RB_POOL_BYTES / p->size;

	if (want > cap)
		want = cap;
	if (want < credits + (uint64_t)p->post * p->rails)
		want = credits + (uint64_t)p->post * p->rails;
	want = (want + P - 1) / P;
	if (rb_pool_opt)
		want = rb_pool_opt;
	return want < 2 ? 2 : (unsigned)want;
}

static void rb_point_cfg(const struct rb_opts *o, const struct rb_point *p,
			 struct rb_pipe_cfg *c)
{
	unsigned lanes = o->producers > p->workers ? o->producers : p->workers;
	uint64_t slots = (uint64_t)o->region_mib * 1048576 / lanes / p->size;

	memset(c, 0, sizeof(*c));
	c->workers = p->workers;
	c->rails = p->rails;
	c->depth = p->depth;
	c->post = p->post;
	c->reap = p->reap;
	c->P = o->producers;
	c->size = p->size;
	c->slots = slots > o->max_slots ? o->max_slots : (unsigned)slots;
	c->njobs = rb_pool_jobs(p, o->producers);
	c->cq_wait = BP_RDMA_CQ_BUSY;
	c->mode = RB_SINK_LOOP;
}

static void rb_point_name(const struct rb_opts *o, const struct rb_point *p,
			  char *buf, size_t len)
{
	snprintf(buf, len, "%s size %u post %u reap %u depth %u W %u R %u",
		 o->prov[p->prov], p->size, p->post, p->reap, p->depth,
		 p->workers, p->rails);
}

static void rb_measure_point(const struct rb_opts *o, struct rb_target *t,
			     struct rb_point *p, int runs)
{
	struct rb_pipe_cfg c;
	struct rb_pipe pp;
	struct rb_raw rw;
	struct rb_direct dx;
	char name[160], what[200], why[256];
	uint64_t out_pipe, out_raw;
	unsigned warm = o->a.ms / 4 < 20 ? 20 : o->a.ms / 4;
	int rc;

	rb_point_cfg(o, p, &c);
	rb_point_name(o, p, name, sizeof(name));
	if (c.slots == 0) {
		p->skipped = true;
		snprintf(p->note, sizeof(p->note),
			 "region too small for %u lanes of %u B", c.P, p->size);
		return;
	}
	rc = rb_pipe_open(&pp, t, &c);
	if (rc) {
		p->skipped = true;
		snprintf(p->note, sizeof(p->note), "pipeline: %s",
			 bp_strerror(rc));
		rb_pipe_close(&pp);
		return;
	}
	rc = rb_raw_open(&rw, t, &c, false, why, sizeof(why));
	if (rc) {
		p->skipped = true;
		snprintf(p->note, sizeof(p->note), "raw: %s", why);
		rb_pipe_close(&pp);
		return;
	}
	if (o->direct) {
		rc = rb_direct_open(&dx, t, &c);
		if (rc) {
			p->skipped = true;
			snprintf(p->note, sizeof(p->note), "direct: %s",
				 bp_strerror(rc));
			rb_direct_close(&dx);
			rb_raw_close(&rw);
			rb_pipe_close(&pp);
			return;
		}
	}
	fprintf(stderr, "%s: %s\n", BENCH_CMD, name);
	/*
	 * The most writes of a variant that may be in flight at once. With
	 * several workers a job can lag behind without bound (its worker off
	 * the CPU while the others cycle the rest of the pool through its
	 * slot), and with several rails a write on one connection can land
	 * after later ones on another (a tcp completion says the data left,
	 * not that it arrived): any write of the run to a slot may then be
	 * the one that lands last there, and the check accepts any of them.
	 */
	out_pipe = c.workers > 1 || c.rails > 1 ? UINT64_MAX
						: (uint64_t)c.P * c.njobs;
	out_raw = c.rails > 1 ? UINT64_MAX : (uint64_t)c.depth * c.rails;
	snprintf(what, sizeof(what), "%s warm-up", name);
	rb_pipe_run(&pp, t, warm, out_pipe, what);
	rb_raw_run(&rw, t, warm, out_raw, what);
	if (o->direct)
		rb_direct_run(&dx, t, warm, out_pipe, what);
	for (int r = 0; r < runs; r++) {
		int nv = o->direct ? RB_NVAR : 2;

		for (int k = 0; k < nv; k++) {
			/* the order turns around every run */
			int v = (r % 2) ? nv - 1 - k : k;
			struct rb_result res;

			snprintf(what, sizeof(what), "%s %s run %d", name,
				 rb_var_name[v], r);
			res = v == RB_PIPE  ? rb_pipe_run(&pp, t, o->a.ms,
							  out_pipe, what)
			      : v == RB_RAW ? rb_raw_run(&rw, t, o->a.ms,
							 out_raw, what)
					    : rb_direct_run(&dx, t, o->a.ms,
							    out_pipe, what);
			p->gbps[v][r] = res.gbps;
			p->mops[v][r] = res.mops;
			p->cpu[v][r] = res.cpu_ns;
		}
	}
	if (o->direct)
		rb_direct_close(&dx);
	rb_raw_close(&rw);
	rb_pipe_close(&pp);
}

int rb_copy_providers(char *buf, size_t len, const char *arg)
{
	if (strlen(arg) >= len)
		return -1;
	strcpy(buf, arg);
	return 0;
}

int rb_parse_sizes(const char *arg, unsigned *sizes, int max)
{
	int n = bench_parse_sizes(arg, sizes, max, 16, 64u << 20);

	for (int i = 0; i < n; i++)
		if (sizes[i] % 8) /* the checks read whole words */
			return -1;
	return n;
}

static int rb_set_providers(struct bench_args *a, const char *arg)
{
	struct rb_opts *o = a->ctx;

	return rb_copy_providers(o->prov_buf, sizeof(o->prov_buf), arg);
}

static int rb_set_sizes(struct bench_args *a, const char *arg)
{
	struct rb_opts *o = a->ctx;

	o->nsizes = rb_parse_sizes(arg, o->sizes, RB_MAX_LIST);
	o->grid = 1;
	return o->nsizes < 0 ? -1 : 0;
}

/* One of the point lists: a list given makes the points a cross product. */
#define RB_LIST_OPT(fn, list, count, hi)                                       \
	static int fn(struct bench_args *a, const char *arg)                   \
	{                                                                      \
		struct rb_opts *o = a->ctx;                                    \
                                                                               \
		o->count =                                                     \
			bench_parse_uints(arg, o->list, RB_MAX_LIST, 1, hi);   \
		o->grid = 1;                                                   \
		return o->count < 0 ? -1 : 0;                                  \
	}

RB_LIST_OPT(rb_set_post, post, npost, 4096)

RB_LIST_OPT(rb_set_reap, reap, nreap, 1024)

RB_LIST_OPT(rb_set_depth, depth, ndepth, 4096)

RB_LIST_OPT(rb_set_workers, workers, nworkers, 64)

RB_LIST_OPT(rb_set_rails, rails, nrails, BP_RDMA_MAX_RAILS)

/* An option with one unsigned value in [lo, hi]. */
#define RB_UINT_OPT(fn, dst, lo, hi, flag)                                     \
	static int fn(struct bench_args *a, const char *arg)                   \
	{                                                                      \
		struct rb_opts *o = a->ctx;                                    \
                                                                               \
		(void)o;                                                       \
		if (bench_parse_uint(arg, &(dst), lo, hi))                     \
			return -1;                                             \
		flag;                                                          \
		return 0;                                                      \
	}

RB_UINT_OPT(rb_set_producers, o->producers, 1, RB_MAX_PRODUCERS, )

RB_UINT_OPT(rb_set_region, o->region_mib, 1, 16384, )

RB_UINT_OPT(rb_set_slots, o->max_slots, 1, RB_MAX_SLOTS, )

RB_UINT_OPT(rb_set_pool, rb_pool_opt, 2, 65536, )

RB_UINT_OPT(rb_set_lat_ms, o->lat_ms, 1, 600000, o->lat_set = 1)

RB_UINT_OPT(rb_set_idle_ms, o->idle_ms, 1, 600000, o->idle_set = 1)

static int rb_set_raw_buffers(struct bench_args *a, const char *arg)
{
	(void)a;
	if (!strcmp(arg, "pool"))
		rb_raw_same_src = 1;
	else if (!strcmp(arg, "depth"))
		rb_raw_same_src = 0;
	else
		return -1;
	return 0;
}

static int rb_set_waits(struct bench_args *a, const char *arg)
{
	(void)a;
	if (!strcmp(arg, "spin-sleep"))
		rb_thread_wait = BP_WAIT_SPIN_SLEEP;
	else if (!strcmp(arg, "busy"))
		rb_thread_wait = BP_WAIT_BUSY_POLL;
	else if (!strcmp(arg, "sleep"))
		rb_thread_wait = BP_WAIT_SLEEP;
	else
		return -1;
	return 0;
}

static int rb_set_target_wait(struct bench_args *a, const char *arg)
{
	(void)a;
	rb_target_wait = rb_cq_wait_parse(arg);
	return rb_target_wait < 0 ? -1 : 0;
}

int rb_opt_verbose(struct bench_args *a, const char *arg)
{
	(void)a, (void)arg;
	rb_verbose = 1;
	return 0;
}

static int rb_set_node(struct bench_args *a, const char *arg)
{
	((struct rb_opts *)a->ctx)->node = arg;
	return 0;
}

static int rb_set_target_process(struct bench_args *a, const char *arg)
{
	(void)arg;
	((struct rb_opts *)a->ctx)->target_mode = RB_TARGET_DAEMON;
	return 0;
}

static int rb_set_in_process(struct bench_args *a, const char *arg)
{
	(void)arg;
	((struct rb_opts *)a->ctx)->target_mode = RB_TARGET_NODE;
	return 0;
}

static int rb_set_latency(struct bench_args *a, const char *arg)
{
	(void)arg;
	((struct rb_opts *)a->ctx)->latency_only = 1;
	return 0;
}

static int rb_set_direct(struct bench_args *a, const char *arg)
{
	(void)arg;
	((struct rb_opts *)a->ctx)->direct = 1;
	return 0;
}

static int rb_set_intake(struct bench_args *a, const char *arg)
{
	(void)arg;
	((struct rb_opts *)a->ctx)->intake_only = 1;
	return 0;
}

RB_UINT_OPT(rb_set_intake_samples, o->intake_samples, 1, 100000, )

static int rb_set_no_latency(struct bench_args *a, const char *arg)
{
	(void)arg;
	((struct rb_opts *)a->ctx)->no_latency = 1;
	return 0;
}

static const struct bench_opt rb_options[] = {
	{"providers", "LIST", rb_set_providers,
	 "libfabric providers (default shm,tcp;ofi_rxm; quote the ';';\n"
	 "one that does not open is skipped with a note)"},
	{"sizes", "LIST", rb_set_sizes,
	 "write sizes, K/M suffixes (64,4K,64K,1M)"},
	{"post", "LIST", rb_set_post,
	 "post batches (stage post_batch; raw writes per FI_MORE chain)"},
	{"reap", "LIST", rb_set_reap,
	 "reap batches (completions per fi_cq_read)"},
	{"depth", "LIST", rb_set_depth,
	 "writes in flight per rail (stage credits)"},
	{"workers", "LIST", rb_set_workers, "worker threads (raw: threads)"},
	{"rails", "LIST", rb_set_rails,
	 "endpoints per worker\n"
	 "Default points (without any of the six lists), per provider:\n"
	 "sizes 64,4K,64K,1M at post 16 reap 16 depth 16 W 1 R 1;\n"
	 "64 B at post/reap/depth 1/1/1 and 16/16/64; and (not with\n"
	 "--quick) at 64 B post 1,4,16,64 | reap 1,16,64 | depth\n"
	 "1,16,64 one at a time around 16/16/64, and at 64 KiB\n"
	 "workers 1,2,4 x rails 1,2. With a list given: the cross\n"
	 "product of the lists, the others at 64K/16/16/16/1/1."},
	BENCH_OPT_RUNS("measured runs per variant and point (default 5; "
		       "--quick 3)"),
	BENCH_OPT_MS("writing time per run (default 200; --quick 100)"),
	{"producers", "N", rb_set_producers,
	 "pipeline producer threads (default 1)"},
	{"region-mib", "N", rb_set_region, "target region (default 64)"},
	{"slots", "N", rb_set_slots,
	 "target slots per lane, each one write (default 16: cache-\n"
	 "resident up to 64 KiB writes; up to 1024)"},
	{"raw-buffers", "M", rb_set_raw_buffers,
	 "the raw loop's source buffers: pool (default: as many\n"
	 "as the pipeline's pool, used in turn, so both read the\n"
	 "same source memory) or depth (one per credit, reused hot)"},
	{"pool", "N", rb_set_pool,
	 "jobs per producer (default: the credits of all workers\n"
	 "and rails + 2 batches, at most 256 MiB of buffers)"},
	{"waits", "W", rb_set_waits,
	 "the pipeline's worker, sink and producer waits and the free\n"
	 "rings': busy, spin-sleep or sleep (default: the library's)"},
	{"target-wait", "W", rb_set_target_wait,
	 "the target's progress wait (in-process node, or\n"
	 "bp-target --progress-wait): busy, spin-sleep, event,\n"
	 "auto (default: the library's, auto)"},
	{"verbose", NULL, rb_opt_verbose,
	 "per run, the pipeline's CPU per op by thread (stderr)"},
	{"node", "ADDR", rb_set_node,
	 "address to bind for non-shm providers (127.0.0.1)"},
	{"target-process", NULL, rb_set_target_process,
	 "write into bp-target (../target/bp-target next to bpbench);\n"
	 "fail if it does not start (default: use it if it starts,\n"
	 "else an in-process bp_rdma_node)"},
	{"in-process", NULL, rb_set_in_process,
	 "always the in-process bp_rdma_node"},
	{"latency", NULL, rb_set_latency,
	 "only the latency table (4 KiB, depth 1, per completion\n"
	 "wait) and the idle CPU"},
	{"direct", NULL, rb_set_direct,
	 "a third variant at every point: the stage run to\n"
	 "completion (bp_rdma_direct_*, one thread per worker\n"
	 "slot, no pipeline), its CPU per op beside raw's"},
	{"intake", NULL, rb_set_intake,
	 "only the intake table: a 64 B write submitted while a\n"
	 "16 MiB write is in flight, submit -> post per completion\n"
	 "wait (table only: no --csv)"},
	{"intake-samples", "N", rb_set_intake_samples,
	 "intake samples per completion wait (default 200;\n"
	 "--quick 50)"},
	{"no-latency", NULL, rb_set_no_latency,
	 "skip them (default and --quick run them after the points)"},
	{"lat-ms", "N", rb_set_lat_ms,
	 "latency sampling per row (default 1000; --quick 300)"},
	{"idle-ms", "N", rb_set_idle_ms,
	 "idle and paced CPU windows (default 1000; --quick 500)"},
	BENCH_OPT_QUICK("a handful of points (about 30 s)"),
	BENCH_OPT_CSV("CSV on stdout: provider,mode,size,post_batch,"
		      "reap_batch,\ndepth,workers,rails,run,GBps,Mops,"
		      "cpu_ns_per_op; with the\nlatency part, a second block "
		      "after an empty line"),
	BENCH_OPT_OUT,
	BENCH_OPT_NAME,
	BENCH_OPT_HELP,
	BENCH_OPT_END,
};

static const struct bench_cmd rb_cmd = {
	.name = "rdma",
	.about = "One-sided RDMA writes through the pipeline's RDMA stage "
		 "against a raw libfabric\nloop (same writes, same target, "
		 "interleaved runs, medians), per provider.\n",
	.opts = rb_options,
	.epilog = "CPU ns/op: CLOCK_THREAD_CPUTIME of the variant's threads "
		  "(pipeline: producers,\nworkers, sink; raw: its threads), "
		  "never the target's. Every run is verified\n(completions, "
		  "statuses, the data in the target); exit 1 if one fails, 2 "
		  "bad usage.\nSets FI_TCP_IFACE=lo unless set.\n",
	.max_runs = RB_MAX_RUNS,
};

static int rb_parse(int argc, char **argv, struct rb_opts *o)
{
	int rc;

	memset(o, 0, sizeof(*o));
	bench_args_init(&o->a, &rb_cmd, o);
	o->a.ms = 200;
	o->producers = 1;
	o->region_mib = 64;
	o->max_slots = RB_DEF_SLOTS;
	o->lat_ms = 1000;
	o->idle_ms = 1000;
	o->node = "127.0.0.1";
	strcpy(o->prov_buf, "shm,tcp;ofi_rxm");
	o->nsizes = 1, o->sizes[0] = 65536;
	o->npost = 1, o->post[0] = RB_BASE_POST;
	o->nreap = 1, o->reap[0] = RB_BASE_REAP;
	o->ndepth = 1, o->depth[0] = RB_BASE_DEPTH;
	o->nworkers = 1, o->workers[0] = 1;
	o->nrails = 1, o->rails[0] = 1;

	rc = bench_opts_parse(&o->a, argc, argv);
	if (rc != BENCH_OPTS_RUN)
		return rc;
	if (o->latency_only && o->no_latency)
		return bench_usage_error(&o->a, "--latency and --no-latency");
	if (o->intake_only && (o->latency_only || o->a.csv || o->a.out))
		return bench_usage_error(&o->a, "--intake prints its table "
						"alone: not with --latency, "
						"--csv or --out");
	if (!o->intake_samples)
		o->intake_samples = o->a.quick ? 50 : 200;
	o->nprov = bench_parse_names(o->prov_buf, o->prov, RB_MAX_PROV);
	if (o->nprov < 0)
		return bench_usage_error(&o->a, "bad --providers");
	if (o->a.quick) {
		if (!o->a.runs_set)
			o->a.runs = 3;
		if (!o->a.ms_set)
			o->a.ms = 100;
		if (!o->lat_set)
			o->lat_ms = 300;
		if (!o->idle_set)
			o->idle_ms = 500;
	}
	return bench_opts_ready(&o->a);
}

void rb_print_done(int64_t t0, int measured, int nprov)
{
	if (!measured)
		fprintf(stderr,
			"%s: done in %.1f s: NOTHING MEASURED, no provider "
			"of --providers opens here\n",
			BENCH_CMD, (double)(bench_now_ns() - t0) / 1e9);
	else
		fprintf(stderr,
			"%s: done in %.1f s, %d of %d providers measured, "
			"every run verified (%" PRIu64
			" target words checked)\n",
			BENCH_CMD, (double)(bench_now_ns() - t0) / 1e9,
			measured, nprov, rb_words_checked);
}

int bench_rdma_main(int argc, char **argv)
{
	struct rb_opts o;
	struct rb_results *r;
	struct rb_prov_lat *pl;
	struct rb_prov_intake *pi;
	const char *tdesc[RB_MAX_PROV];
	static char tdesc_buf[RB_MAX_PROV][64];
	struct rb_report rep;
	int64_t t0;
	int status, nskipped = 0;

	status = rb_parse(argc, argv, &o);
	if (status != BENCH_OPTS_RUN)
		return status;
	/* loopback only: libfabric's tcp would otherwise pick eth0 */
	setenv("FI_TCP_IFACE", "lo", 0);
	t0 = bench_now_ns();
	r = bench_zalloc(sizeof(*r));
	r->pt = bench_zalloc(sizeof(*r->pt) * RB_MAX_POINTS);
	r->runs = (int)o.a.runs;
	pl = bench_zalloc(sizeof(*pl) * RB_MAX_PROV);
	if (!o.latency_only && !o.intake_only)
		rb_build_points(&o, r);
	pi = bench_zalloc(sizeof(*pi) * RB_MAX_PROV);

	for (int pv = 0; pv < o.nprov; pv++) {
		struct rb_target t;
		const char *node = strcmp(o.prov[pv], "shm") ? o.node : NULL;
		unsigned rails = 1;
		int rc;

		tdesc[pv] = "none";
		for (int i = 0; i < r->npoints; i++)
			if (r->pt[i].prov == pv && r->pt[i].rails > rails)
				rails = r->pt[i].rails;
		/* asked first, so that a missing provider is called that,
		 * not a target that did not start */
		rc = rr_provider_probe(o.prov[pv], node);
		if (rc)
			fprintf(stderr,
				"%s: %s: not here: fi_getinfo found no such "
				"provider with RDM endpoints and RMA%s%s (%s; "
				"fi_info -l lists the providers)\n",
				BENCH_CMD, o.prov[pv], node ? " at " : "",
				node ? node : "", fi_strerror(-rc));
		else
			rc = rb_target_open(&t, o.prov[pv], node, rails,
					    (uint64_t)o.region_mib << 20,
					    o.target_mode);
		if (rc) {
			fprintf(stderr,
				"%s: %s: skipped, the provider does not open "
				"here: %s\n",
				BENCH_CMD, o.prov[pv], bp_strerror(rc));
			nskipped++;
			for (int i = 0; i < r->npoints; i++)
				if (r->pt[i].prov == pv) {
					r->pt[i].skipped = true;
					snprintf(r->pt[i].note,
						 sizeof(r->pt[i].note),
						 "provider does not open");
				}
			tdesc[pv] = "provider does not open";
			continue;
		}
		if (t.daemon)
			snprintf(tdesc_buf[pv], sizeof(tdesc_buf[pv]),
				 "bp-target process");
		else
			snprintf(tdesc_buf[pv], sizeof(tdesc_buf[pv]),
				 "in-process bp_rdma_node");
		tdesc[pv] = tdesc_buf[pv];
		for (int i = 0; i < r->npoints; i++)
			if (r->pt[i].prov == pv)
				rb_measure_point(&o, &t, &r->pt[i], r->runs);
		if (o.intake_only)
			rb_intake(&o, &t, &pi[pv]);
		else if (!o.no_latency)
			rb_latency(&o, &t, &pl[pv]);
		rb_target_close(&t);
	}
	rb_print_done(t0, o.nprov - nskipped, o.nprov);
	rep = (struct rb_report){&o, r, pl, tdesc};
	if (o.intake_only) {
		rb_intake_table(stdout, &o, pi);
		status = 0;
	} else {
		status = bench_emit(&o.a, rb_csv, rb_table, NULL, &rep);
	}
	/* a run that measured nothing is not a success */
	if (nskipped == o.nprov && status == 0)
		status = 1;
	free(r->pt);
	free(r);
	free(pl);
	free(pi);
	return status;
}
