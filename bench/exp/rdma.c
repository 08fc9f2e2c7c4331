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
 * submits them with one blocking bp_submit; the sink checks each job and gives
 * it back through the free ring. Raw variant: W threads, each with its own
 * fabric, domain, endpoint, CQ and AV per rail, `depth` writes in flight per
 * rail, posted post_batch at a time, reaped reap_batch per fi_cq_read, polling.
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
 * (document 001): the pipeline closes the loop in the sink (the sink
 * resubmits the job it got, BP_SUBMIT_NONBLOCK, which cannot fail with one
 * job in a ring of thousands), latency = the clock just before bp_submit
 * -> the clock on entry to the sink; raw: post -> completion reaped. Then
 * idle CPU: a started pipeline with nothing to do, and one fed 100 ops/s.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <batchpipe/error.h>
#include <batchpipe/pipeline.h>
#include <batchpipe/rdma.h>
#include <batchpipe/ring.h>

#include "bpbench.h"
#include "rdma_raw.h"
#include "rdma_target.h"

#define BENCH_CMD "bpbench rdma"

#define RB_MAX_PROV	 4
#define RB_MAX_LIST	 8
#define RB_MAX_RUNS	 100
#define RB_MAX_POINTS	 1024
#define RB_MAX_TIDS	 512
#define RB_MAX_PRODUCERS 16
#define RB_MAX_SLOTS	 1024
#define RB_DEF_SLOTS	 16
#define RB_SINK_CHUNK	 256
#define RB_FREE_WAIT_NS	 1000000 /* a producer re-checks stop this often */
#define RB_LOST_NS	 INT64_C(10000000000) /* a run not done by then: fatal */
#define RB_LAND_NS	 INT64_C(3000000000)  /* writes must land by then */
#define RB_POOL_BYTES	 (256u << 20)	      /* most pipeline buffer bytes */
#define RB_MAX_SAMPLES	 (1u << 21)
#define RB_LAT_SIZE	 4096
#define RB_PACE_NS	 10000000 /* 100 ops/s */

enum { RB_PIPE = 0, RB_RAW = 1, RB_NVAR = 2 };
static const char *const rb_var_name[RB_NVAR] = {"pipeline", "raw"};

/* the base point: a dimension not given on the command line */
#define RB_BASE_POST  16
#define RB_BASE_REAP  16
#define RB_BASE_DEPTH 16

struct rb_opts {
	const char *prov[RB_MAX_PROV];
	int nprov;
	char prov_buf[256];
	unsigned sizes[RB_MAX_LIST], post[RB_MAX_LIST], reap[RB_MAX_LIST];
	unsigned depth[RB_MAX_LIST], workers[RB_MAX_LIST], rails[RB_MAX_LIST];
	int nsizes, npost, nreap, ndepth, nworkers, nrails;
	int grid;	     /* a list was given: the cross product */
	struct bench_args a; /* runs, ms, output */
	unsigned producers, region_mib, lat_ms, idle_ms, max_slots;
	const char *node;
	int latency_only, no_latency;
	int lat_set, idle_set; /* given: --quick leaves them */
	int target_mode;       /* 0 auto, 1 daemon, 2 in-process */
};

/* ---- the target ------------------------------------------------------- */

struct rb_target {
	char provider[64];
	const char *node;
	unsigned rails;
	uint64_t len;
	bool daemon;
	/* in-process */
	struct bp_rdma_node *n;
	struct bp_rdma_region *reg;
	uint8_t *mem;
	pid_t tids[RB_MAX_TIDS];
	int ntids;
	/* daemon */
	struct rt_daemon d;
	struct bp_rdma_conn *conn;
	struct bp_rdma_peer_desc desc;
};

static void rb_log(void *ctx, enum bp_log_level level, const char *msg)
{
	(void)ctx;
	if (level <= BP_LOG_WARN)
		fprintf(stderr, "%s: batchpipe says: %s\n", BENCH_CMD, msg);
}

static int rb_target_wait = -1; /* --target-wait, -1: the default */
/* --raw-buffers: raw reads as many source buffers as the pool (1) or one
 * per credit (0) */
static int rb_raw_same_src = 1;

/* The same for bp-target: its --progress-wait word, or NULL. */
static const char *rb_target_wait_name(void)
{
	static const char *const names[] = {
		[BP_RDMA_CQ_BUSY] = "busy",
		[BP_RDMA_CQ_SPIN_SLEEP] = "spin-sleep",
		[BP_RDMA_CQ_EVENT] = "event",
		[BP_RDMA_CQ_AUTO] = "auto",
	};

	return rb_target_wait >= 0 ? names[rb_target_wait] : NULL;
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

static void rb_target_close(struct rb_target *t)
{
	if (t->conn)
		bp_rdma_conn_close(t->conn);
	rt_daemon_stop(&t->d);
	bp_rdma_region_close(t->reg);
	bp_rdma_node_destroy(t->n);
	free(t->mem);
	memset(t, 0, sizeof(*t));
}

/* mode: 0 auto (the daemon where it starts), 1 daemon only, 2 node only */
static int rb_target_open(struct rb_target *t, const char *provider,
			  const char *node, unsigned rails, uint64_t len,
			  int mode)
{
	char why[512] = "";
	int rc;

	memset(t, 0, sizeof(*t));
	snprintf(t->provider, sizeof(t->provider), "%s", provider);
	t->node = node;
	t->rails = rails;
	t->len = len;
	if (mode != 2) {
		rc = rb_target_open_daemon(t, why, sizeof(why));
		if (!rc) {
			fprintf(stderr,
				"%s: %s: target = bp-target pid %d (%s:%u, "
				"rails %u)\n",
				BENCH_CMD, provider, (int)t->d.pid, t->d.host,
				t->d.port, t->d.rails);
			return 0;
		}
		if (mode == 1)
			bench_die("%s: %s: --target-process: %s\n", BENCH_CMD,
				  provider, why);
		fprintf(stderr,
			"%s: %s: bp-target not used (%s): in-process node\n",
			BENCH_CMD, provider, why);
	}
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

static int64_t rb_target_cpu_ns(const struct rb_target *t)
{
	return t->daemon ? rt_proc_cpu_ns(t->d.pid)
			 : rt_tids_cpu_ns(t->tids, t->ntids);
}

/* The digest of the 8 bytes at off in the target region. */
static int rb_target_fp(struct rb_target *t, uint64_t off, uint64_t *fp)
{
	struct bp_rdma_target_query q;
	int rc;

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
static void rb_target_desc(const struct rb_target *t, unsigned rails,
			   struct bp_rdma_peer_desc *d)
{
	*d = t->desc;
	d->rails = rails;
}

/* ---- verification of the target -------------------------------------- */

struct rb_check {
	unsigned run, nlanes, slots;
	const uint64_t *ops; /* [nlanes] ops written by each lane */
	size_t size;
	uint64_t outstanding; /* most writes of the variant in flight at once */
};

/*
 * One pass over the spots; 0 when every word checks (*words: how many),
 * 1 when not yet.
 */
static int rb_check_once(struct rb_target *t, const struct rb_check *c,
			 char *why, size_t len, uint64_t *words)
{
	unsigned spots = t->daemon ? 8 : 32;
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

static uint64_t rb_words_checked;

static void rb_verify_target(struct rb_target *t, const struct rb_check *c,
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

/* ---- one point -------------------------------------------------------- */

struct rb_point {
	int prov;
	unsigned size, post, reap, depth, workers, rails;
	bool skipped;
	char note[300];
	/* [variant][run] */
	double gbps[RB_NVAR][RB_MAX_RUNS], mops[RB_NVAR][RB_MAX_RUNS];
	double cpu[RB_NVAR][RB_MAX_RUNS];
};

struct rb_result {
	double gbps, mops, cpu_ns; /* per op */
};

static unsigned rb_run_counter; /* tags: a run's writes are its own */

static unsigned rb_next_run(void)
{
	rb_run_counter = (rb_run_counter + 1) & 0xfff;
	if (!rb_run_counter)
		rb_run_counter = 1;
	return rb_run_counter;
}

static int64_t rb_thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void rb_spawn(pthread_t *t, void *(*fn)(void *), void *arg)
{
	int rc = pthread_create(t, NULL, fn, arg);

	if (rc)
		bench_die("%s: pthread_create: %s\n", BENCH_CMD, strerror(rc));
}

/* ---- the pipeline variant ---------------------------------------------- */

struct rb_pjob {
	struct bp_rdma_job rj; /* first: the sink's bp_job is &rj.hdr */
	int64_t t0;	       /* latency runs: the clock before bp_submit */
	unsigned lane;
} __attribute__((aligned(BENCH_CACHELINE)));

struct rb_pipe;

struct rb_prod {
	struct rb_pipe *pp;
	unsigned lane;
	struct rb_pjob *jobs;
	unsigned njobs;
	uint8_t *bufs;
	struct bp_ring *free; /* SP: the sink; SC: this producer */
	struct bp_job **batch;
	pthread_t th;
	uint64_t next_i; /* ops submitted this run */
	int64_t t_start, cpu_ns;
} __attribute__((aligned(BENCH_CACHELINE)));

enum rb_sink_mode { RB_SINK_LOOP, RB_SINK_LAT, RB_SINK_PACED };

struct rb_pipe {
	struct bp_rdma *r;
	struct bp_pipeline *p;
	size_t size;
	unsigned P, B, slots, run;
	int peer;
	struct rb_prod *prod;
	pid_t tids[RB_MAX_TIDS]; /* the pipeline's workers and sink */
	int ntids;
	enum rb_sink_mode mode;
	atomic_int stop;
	/* the sink's, read by the main thread after done says so */
	_Alignas(BENCH_CACHELINE) _Atomic uint64_t done;
	int64_t last_ns;
	uint64_t bad;
	int bad_status;
	struct bp_job **ret; /* [P][RB_SINK_CHUNK] */
	unsigned *nret;	     /* [P] */
	/* latency and paced runs */
	int64_t *samples;
	unsigned max_samples, nsamples;
	uint64_t lat_next_i;
	int lat_err;
	atomic_int lat_end;  /* the sink stopped resubmitting */
	atomic_int job_free; /* paced: the job is back */
};

/* Throughput: check each job, give it back to its producer's free ring. */
static void rb_sink_loop(struct rb_pipe *pp, struct bp_job **jobs, unsigned n)
{
	for (unsigned base = 0; base < n; base += RB_SINK_CHUNK) {
		unsigned end =
			n - base < RB_SINK_CHUNK ? n : base + RB_SINK_CHUNK;

		for (unsigned i = base; i < end; i++) {
			struct rb_pjob *j = (struct rb_pjob *)jobs[i];
			unsigned lane = j->lane;

			if (j->rj.hdr.status != BP_JOB_OK && !pp->bad++)
				pp->bad_status = j->rj.hdr.status;
			pp->ret[lane * RB_SINK_CHUNK + pp->nret[lane]++] =
				jobs[i];
		}
		for (unsigned l = 0; l < pp->P; l++) {
			int k;

			if (!pp->nret[l])
				continue;
			/* the free ring holds the whole pool: never full */
			k = bp_ring_enqueue_burst(
				pp->prod[l].free,
				(void **)&pp->ret[l * RB_SINK_CHUNK],
				pp->nret[l], NULL);
			if (k != (int)pp->nret[l])
				bench_die("%s: free ring %u refused jobs\n",
					  BENCH_CMD, l);
			pp->nret[l] = 0;
		}
	}
}

/* Latency: sample, then send the same job again (depth 1, closed loop). */
static void rb_sink_lat(struct rb_pipe *pp, struct bp_job **jobs, unsigned n,
			int64_t now)
{
	for (unsigned i = 0; i < n; i++) {
		struct rb_pjob *j = (struct rb_pjob *)jobs[i];
		uint64_t op;
		int rc;

		if (j->rj.hdr.status != BP_JOB_OK && !pp->bad++)
			pp->bad_status = j->rj.hdr.status;
		if (pp->nsamples < pp->max_samples)
			pp->samples[pp->nsamples++] = now - j->t0;
		if (pp->mode == RB_SINK_PACED) {
			/* release: pairs with the pacer's acquire; the job
			 * and the samples are the pacer's again */
			atomic_store_explicit(&pp->job_free, 1,
					      memory_order_release);
			continue;
		}
		/* relaxed: only a flag; the main thread learns the rest
		 * from lat_end's release below */
		if (pp->bad ||
		    atomic_load_explicit(&pp->stop, memory_order_relaxed)) {
			/* release: pairs with the main thread's acquire;
			 * samples, counts and bad are final */
			atomic_store_explicit(&pp->lat_end, 1,
					      memory_order_release);
			continue;
		}
		op = pp->lat_next_i++;
		rr_stamp(j->rj.buf, pp->size, RR_TAG(pp->run, 0, op));
		j->rj.offset = rr_offset(0, op, pp->slots, pp->size);
		j->t0 = bench_now_ns();
		/* one job, rings of thousands: it cannot find them full */
		rc = bp_submit(pp->p, &jobs[i], 1, BP_SUBMIT_NONBLOCK, 0);
		if (rc != 1) {
			pp->lat_err = rc;
			/* release: as above */
			atomic_store_explicit(&pp->lat_end, 1,
					      memory_order_release);
		}
	}
}

static void rb_sink(void *ctx, struct bp_job **jobs, unsigned n)
{
	struct rb_pipe *pp = ctx;
	int64_t now = bench_now_ns();

	if (pp->mode == RB_SINK_LOOP)
		rb_sink_loop(pp, jobs, n);
	else
		rb_sink_lat(pp, jobs, n, now);
	pp->last_ns = now;
	/*
	 * release: pairs with the main thread's acquire in rb_pipe_run; it
	 * sees last_ns and bad once it sees the count. The sink is the only
	 * writer, so load + store is an increment.
	 */
	atomic_store_explicit(
		&pp->done,
		atomic_load_explicit(&pp->done, memory_order_relaxed) + n,
		memory_order_release);
}

static void *rb_producer_main(void *arg)
{
	struct rb_prod *pr = arg;
	struct rb_pipe *pp = pr->pp;

	pr->next_i = 0;
	pr->cpu_ns = rb_thread_cpu_ns();
	pr->t_start = bench_now_ns();
	/* relaxed: a flag to stop; the results travel by join */
	while (!atomic_load_explicit(&pp->stop, memory_order_relaxed)) {
		int k = bp_ring_dequeue_burst_wait(pr->free, (void **)pr->batch,
						   pp->B, RB_FREE_WAIT_NS);
		int rc;

		if (k <= 0)
			continue; /* -ETIMEDOUT: look at stop again */
		for (int j = 0; j < k; j++) {
			struct rb_pjob *jb = (struct rb_pjob *)pr->batch[j];
			uint64_t i = pr->next_i++;

			rr_stamp(jb->rj.buf, pp->size,
				 RR_TAG(pp->run, pr->lane, i));
			jb->rj.offset =
				rr_offset(pr->lane, i, pp->slots, pp->size);
		}
		rc = bp_submit(pp->p, pr->batch, (unsigned)k, 0, -1);
		if (rc != k)
			bench_die("%s: bp_submit: %d of %d (%s)\n", BENCH_CMD,
				  rc, k, rc < 0 ? bp_strerror(rc) : "short");
	}
	pr->cpu_ns = rb_thread_cpu_ns() - pr->cpu_ns;
	return NULL;
}

struct rb_pipe_cfg {
	unsigned workers, rails, depth, post, reap, P, njobs;
	size_t size;
	unsigned slots;
	enum bp_rdma_cq_wait cq_wait;
	bool busy_threads; /* workers and sink busy-poll too */
	enum rb_sink_mode mode;
};

static int rb_thread_wait = -1; /* --waits: the pipeline's thread waits */
static int rb_verbose;		/* --verbose: CPU per thread on stderr */

static void rb_pipe_close(struct rb_pipe *pp)
{
	if (pp->p)
		bp_pipeline_destroy(pp->p);
	if (pp->r)
		bp_rdma_destroy(pp->r);
	for (unsigned l = 0; pp->prod && l < pp->P; l++) {
		bp_ring_destroy(pp->prod[l].free);
		free(pp->prod[l].jobs);
		free(pp->prod[l].bufs);
		free(pp->prod[l].batch);
	}
	free(pp->prod);
	free(pp->ret);
	free(pp->nret);
	free(pp->samples);
	memset(pp, 0, sizeof(*pp));
}

/* Build the stage and the pipeline; returns 0 or a negative errno. */
static int rb_pipe_open(struct rb_pipe *pp, struct rb_target *t,
			const struct rb_pipe_cfg *c)
{
	struct bp_rdma_config rc;
	struct bp_pipeline_config pc;
	struct bp_rdma_peer_desc d;
	pid_t before[RB_MAX_TIDS], now[RB_MAX_TIDS];
	int nb, nn, err;

	memset(pp, 0, sizeof(*pp));
	pp->size = c->size;
	pp->P = c->P;
	pp->slots = c->slots;
	pp->mode = c->mode;
	pp->B = c->post * c->rails;
	if (pp->B > c->depth * c->rails)
		pp->B = c->depth * c->rails;
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
	err = bp_rdma_create(&rc, &pp->r);
	if (err) {
		pp->r = NULL;
		return err;
	}
	rb_target_desc(t, c->rails, &d);
	pp->peer = bp_rdma_peer_add(pp->r, &d);
	if (pp->peer < 0)
		return pp->peer;
	pp->prod = bench_zalloc(sizeof(*pp->prod) * c->P);
	pp->ret = bench_zalloc(sizeof(*pp->ret) * c->P * RB_SINK_CHUNK);
	pp->nret = bench_zalloc(sizeof(*pp->nret) * c->P);
	for (unsigned l = 0; l < c->P; l++) {
		struct rb_prod *pr = &pp->prod[l];

		pr->pp = pp;
		pr->lane = l;
		pr->njobs = c->njobs;
		pr->jobs = bench_zalloc(sizeof(*pr->jobs) * c->njobs);
		/* touched by bench_zalloc: page faults belong to setup */
		pr->bufs = bench_zalloc(c->size * c->njobs);
		pr->batch = bench_zalloc(sizeof(*pr->batch) *
					 (pp->B > c->njobs ? pp->B : c->njobs));
		err = bp_ring_create(c->njobs < 2 ? 2 : c->njobs,
				     BP_RING_SP | BP_RING_SC, &pr->free);
		if (err)
			bench_die("%s: bp_ring_create: %s\n", BENCH_CMD,
				  bp_strerror(err));
		if (rb_thread_wait >= 0) {
			struct bp_wait_policy wp;

			bp_wait_policy_init(&wp);
			wp.strategy = (enum bp_wait_strategy)rb_thread_wait;
			bp_ring_set_wait_policy(pr->free, &wp);
		}
		err = bp_rdma_register(pp->r, pr->bufs, c->size * c->njobs,
				       NULL);
		if (err)
			return err;
		for (unsigned i = 0; i < c->njobs; i++) {
			struct rb_pjob *j = &pr->jobs[i];
			struct bp_job *h = &j->rj.hdr;

			bp_rdma_job_set(
				&j->rj, BP_RDMA_WRITE, (uint32_t)pp->peer,
				pr->bufs + (size_t)i * c->size, c->size, 0);
			j->lane = l;
			if (c->mode == RB_SINK_LOOP &&
			    bp_ring_enqueue_burst(pr->free, (void **)&h, 1,
						  NULL) != 1)
				bench_die("%s: cannot fill the pool\n",
					  BENCH_CMD);
		}
	}
	bp_pipeline_config_init(&pc);
	pc.workers = c->workers;
	pc.max_batch = pp->B;
	pc.max_inflight = c->depth * c->rails;
	if (pc.max_inflight < pc.max_batch)
		pc.max_inflight = pc.max_batch;
	if (c->busy_threads) {
		pc.worker_wait.strategy = BP_WAIT_BUSY_POLL;
		pc.sink_wait.strategy = BP_WAIT_BUSY_POLL;
	} else if (rb_thread_wait >= 0) {
		pc.worker_wait.strategy = (enum bp_wait_strategy)rb_thread_wait;
		pc.sink_wait.strategy = (enum bp_wait_strategy)rb_thread_wait;
		pc.producer_wait.strategy =
			(enum bp_wait_strategy)rb_thread_wait;
	}
	pc.stage = bp_rdma_stage(pp->r);
	pc.stage_ctx = pp->r;
	pc.sink = rb_sink;
	pc.sink_ctx = pp;
	pc.log = rb_log;
	err = bp_pipeline_create(&pc, &pp->p);
	if (err) {
		pp->p = NULL;
		return err;
	}
	nb = rt_tasks(before, RB_MAX_TIDS);
	err = bp_pipeline_start(pp->p);
	if (err)
		return err;
	nn = rt_tasks(now, RB_MAX_TIDS);
	pp->ntids = rt_tasks_new(before, nb, now, nn, pp->tids, RB_MAX_TIDS);
	if (pp->ntids != (int)c->workers + 1)
		fprintf(stderr,
			"%s: note: bp_pipeline_start created %d threads, "
			"expected %u workers + the sink; CPU counts them all\n",
			BENCH_CMD, pp->ntids, c->workers);
	return 0;
}

/* Wait until the sink has seen `total` jobs (acquire). */
static void rb_pipe_wait_done(struct rb_pipe *pp, uint64_t total,
			      const char *what)
{
	int64_t deadline = bench_now_ns() + RB_LOST_NS;

	/* acquire: pairs with the sink's release; last_ns, bad are final */
	while (atomic_load_explicit(&pp->done, memory_order_acquire) < total) {
		if (bench_now_ns() > deadline)
			bench_die("%s: VERIFY FAILED: %s: %" PRIu64
				  " of %" PRIu64
				  " jobs reached the sink after %.0f s\n",
				  BENCH_CMD, what,
				  atomic_load_explicit(&pp->done,
						       memory_order_acquire),
				  total, RB_LOST_NS / 1e9);
		bench_sleep_ns(20000);
	}
}

static void rb_pipe_check_stats(struct rb_pipe *pp,
				const struct bp_pipeline_stats *s0,
				uint64_t total, const char *what)
{
	struct bp_pipeline_stats s1;
	uint64_t done = atomic_load_explicit(&pp->done, memory_order_acquire);

	bp_pipeline_stats(pp->p, &s1);
	if (pp->bad)
		bench_die("%s: VERIFY FAILED: %s: %" PRIu64
			  " jobs failed (first status %d: %s)\n",
			  BENCH_CMD, what, pp->bad, pp->bad_status,
			  bp_strerror(pp->bad_status));
	if (done != total || s1.ok - s0->ok != total ||
	    s1.failed != s0->failed || s1.cancelled != s0->cancelled)
		bench_die("%s: VERIFY FAILED: %s: submitted %" PRIu64
			  ", sink saw %" PRIu64 ", stats ok +%" PRIu64
			  " failed +%" PRIu64 " cancelled +%" PRIu64 "\n",
			  BENCH_CMD, what, total, done, s1.ok - s0->ok,
			  s1.failed - s0->failed, s1.cancelled - s0->cancelled);
}

static struct rb_result rb_pipe_run(struct rb_pipe *pp, struct rb_target *t,
				    unsigned ms, uint64_t outstanding,
				    const char *what)
{
	struct bp_pipeline_stats s0;
	uint64_t total = 0, ops[RB_MAX_PRODUCERS];
	int64_t c0, c1, t0 = INT64_MAX, tc[RB_MAX_TIDS];
	struct rb_result res;
	struct rb_check chk;

	pp->run = rb_next_run();
	/* relaxed: the producers start after these stores (pthread_create
	 * orders them), and the sink sees done = 0 through the chain of
	 * release/acquire steps its first job took */
	atomic_store_explicit(&pp->stop, 0, memory_order_relaxed);
	atomic_store_explicit(&pp->done, 0, memory_order_relaxed);
	pp->bad = 0;
	bp_pipeline_stats(pp->p, &s0);
	for (int k = 0; k < pp->ntids; k++)
		tc[k] = rt_tid_cpu_ns(pp->tids[k]);
	c0 = rt_tids_cpu_ns(pp->tids, pp->ntids);
	for (unsigned l = 0; l < pp->P; l++)
		rb_spawn(&pp->prod[l].th, rb_producer_main, &pp->prod[l]);
	bench_sleep_ns((int64_t)ms * 1000000);
	/* relaxed: a flag; join publishes what the producers did */
	atomic_store_explicit(&pp->stop, 1, memory_order_relaxed);
	for (unsigned l = 0; l < pp->P; l++) {
		pthread_join(pp->prod[l].th, NULL);
		ops[l] = pp->prod[l].next_i;
		total += ops[l];
		if (pp->prod[l].t_start < t0)
			t0 = pp->prod[l].t_start;
	}
	rb_pipe_wait_done(pp, total, what);
	c1 = rt_tids_cpu_ns(pp->tids, pp->ntids);
	if (rb_verbose && total) {
		/* threads in start order: the workers, then the sink (as
		 * bp_pipeline_start creates them; /proc lists by tid) */
		fprintf(stderr, "%s: %s: cpu ns/op:", BENCH_CMD, what);
		for (int l = 0; l < (int)pp->P; l++)
			fprintf(stderr, " producer %.0f",
				(double)pp->prod[l].cpu_ns / (double)total);
		for (int k = 0; k < pp->ntids; k++)
			fprintf(stderr, " tid%d %.0f", (int)pp->tids[k],
				(double)(rt_tid_cpu_ns(pp->tids[k]) - tc[k]) /
					(double)total);
		fprintf(stderr, "\n");
	}
	rb_pipe_check_stats(pp, &s0, total, what);
	for (unsigned l = 0; l < pp->P; l++)
		c1 += pp->prod[l].cpu_ns;
	chk = (struct rb_check){.run = pp->run,
				.nlanes = pp->P,
				.slots = pp->slots,
				.ops = ops,
				.size = pp->size,
				.outstanding = outstanding};
	rb_verify_target(t, &chk, what);
	res.mops = (double)total / (double)(pp->last_ns - t0) * 1e3;
	res.gbps =
		(double)total * (double)pp->size / (double)(pp->last_ns - t0);
	res.cpu_ns = total ? (double)(c1 - c0) / (double)total : NAN;
	return res;
}

/* ---- the raw variant ------------------------------------------------------
 */

struct rb_raw {
	struct rr_lane *lanes;
	unsigned W;
	atomic_int stop;
};

static void rb_raw_close(struct rb_raw *rw)
{
	for (unsigned w = 0; rw->lanes && w < rw->W; w++)
		rr_lane_close(&rw->lanes[w]);
	free(rw->lanes);
	memset(rw, 0, sizeof(*rw));
}

static int rb_raw_open(struct rb_raw *rw, struct rb_target *t,
		       const struct rb_pipe_cfg *c, bool wait_fd, char *why,
		       size_t len)
{
	struct rr_config rc = {
		.provider = t->provider,
		.node = t->node,
		.depth = c->depth,
		/* the pipeline's pool, per lane and rail (see rb_pool_jobs) */
		.buffers = rb_raw_same_src
				   ? (unsigned)((uint64_t)c->P * c->njobs /
						c->workers / c->rails)
				   : 0,
		.post_batch = c->post,
		.reap_batch = c->reap,
		.wait_fd = wait_fd,
	};
	struct bp_rdma_peer_desc d;

	memset(rw, 0, sizeof(*rw));
	rw->W = c->workers;
	rw->lanes = bench_zalloc(sizeof(*rw->lanes) * c->workers);
	rb_target_desc(t, c->rails, &d);
	for (unsigned w = 0; w < c->workers; w++) {
		struct rr_lane *l = &rw->lanes[w];
		int rc2;

		l->lane = w;
		l->slots = c->slots;
		l->stop = &rw->stop;
		rc2 = rr_lane_open(l, &rc, c->rails, &d, c->size);
		if (rc2) {
			snprintf(why, len, "%s", l->errmsg);
			rw->W = w;
			rb_raw_close(rw);
			return rc2;
		}
	}
	return 0;
}

static struct rb_result rb_raw_run(struct rb_raw *rw, struct rb_target *t,
				   unsigned ms, uint64_t outstanding,
				   const char *what)
{
	unsigned run = rb_next_run();
	pthread_t th[BP_MAX_WORKERS];
	uint64_t total = 0, ops[BP_MAX_WORKERS];
	int64_t t0 = INT64_MAX, t1 = 0, cpu = 0;
	struct rb_result res;
	struct rb_check chk;

	/* relaxed: the threads start after this (pthread_create orders it) */
	atomic_store_explicit(&rw->stop, 0, memory_order_relaxed);
	for (unsigned w = 0; w < rw->W; w++) {
		rw->lanes[w].run = run;
		rb_spawn(&th[w], rr_lane_throughput, &rw->lanes[w]);
	}
	bench_sleep_ns((int64_t)ms * 1000000);
	/* relaxed: a flag; join publishes the lanes' results */
	atomic_store_explicit(&rw->stop, 1, memory_order_relaxed);
	for (unsigned w = 0; w < rw->W; w++) {
		struct rr_lane *l = &rw->lanes[w];

		pthread_join(th[w], NULL);
		if (l->err)
			bench_die("%s: VERIFY FAILED: %s: raw thread %u: %s\n",
				  BENCH_CMD, what, w, l->errmsg);
		if (l->completed != l->posted)
			bench_die("%s: VERIFY FAILED: %s: raw thread %u: "
				  "%" PRIu64 " completions for %" PRIu64
				  " posts\n",
				  BENCH_CMD, what, w, l->completed, l->posted);
		if (rb_verbose)
			fprintf(stderr,
				"%s: %s: raw thread %u: %" PRIu64
				" ops in %.1f ms, %" PRIu64 " EAGAIN, %" PRIu64
				" empty reads, cpu %.0f ns/op\n",
				BENCH_CMD, what, w, l->posted,
				(double)(l->t_end - l->t_start) / 1e6,
				l->eagain, l->cq_empty,
				l->posted
					? (double)l->cpu_ns / (double)l->posted
					: NAN);
		ops[w] = l->posted;
		total += l->posted;
		cpu += l->cpu_ns;
		if (l->t_start < t0)
			t0 = l->t_start;
		if (l->t_end > t1)
			t1 = l->t_end;
	}
	chk = (struct rb_check){.run = run,
				.nlanes = rw->W,
				.slots = rw->lanes[0].slots,
				.ops = ops,
				.size = rw->lanes[0].size,
				.outstanding = outstanding};
	rb_verify_target(t, &chk, what);
	res.mops = (double)total / (double)(t1 - t0) * 1e3;
	res.gbps =
		(double)total * (double)rw->lanes[0].size / (double)(t1 - t0);
	res.cpu_ns = total ? (double)cpu / (double)total : NAN;
	return res;
}

/* ---- points ----------------------------------------------------------------
 */

struct rb_results {
	struct rb_point *pt;
	int npoints;
	int runs;
};

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

static unsigned rb_pool_jobs(const struct rb_point *p, unsigned P)
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
	for (int r = 0; r < runs; r++) {
		for (int k = 0; k < RB_NVAR; k++) {
			int v = (r % 2) ? RB_NVAR - 1 - k : k;
			struct rb_result res;

			snprintf(what, sizeof(what), "%s %s run %d", name,
				 rb_var_name[v], r);
			res = v == RB_PIPE ? rb_pipe_run(&pp, t, o->a.ms,
							 out_pipe, what)
					   : rb_raw_run(&rw, t, o->a.ms,
							out_raw, what);
			p->gbps[v][r] = res.gbps;
			p->mops[v][r] = res.mops;
			p->cpu[v][r] = res.cpu_ns;
		}
	}
	rb_raw_close(&rw);
	rb_pipe_close(&pp);
}

/* ---- latency and idle CPU ------------------------------------------------ */

#define RB_NLAT 5
enum { RB_L_PBUSY, RB_L_PSPIN, RB_L_PEVENT, RB_L_RBUSY, RB_L_REVENT };
static const char *const rb_lat_name[RB_NLAT] = {
	"pipeline busy-poll", "pipeline spin-sleep", "pipeline event-wait",
	"raw busy-poll", "raw event-wait"};
static const char *const rb_lat_csv[RB_NLAT] = {"pipeline", "pipeline",
						"pipeline", "raw", "raw"};
static const char *const rb_lat_wait[RB_NLAT] = {"busy", "spin-sleep", "event",
						 "busy", "event"};

struct rb_lat {
	bool na; /* the provider has no wait fd */
	char note[300];
	double avg, p50, p90, p99, p999; /* us */
	double ops_s, client_cpu, target_cpu;
};

#define RB_NIDLE 3 /* the stage's cq_wait modes */
static const char *const rb_wait_name[RB_NIDLE] = {"busy", "spin-sleep",
						   "event"};

struct rb_idle {
	bool na;
	double idle_cpu, paced_cpu; /* % of one core */
};

struct rb_prov_lat {
	bool done;
	struct rb_lat lat[RB_NLAT];
	struct rb_idle idle[RB_NIDLE];
};

static int rb_cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

static void rb_lat_stats(int64_t *s, unsigned n, struct rb_lat *l)
{
	double sum = 0;

	if (!n)
		return;
	qsort(s, n, sizeof(*s), rb_cmp_i64);
	for (unsigned i = 0; i < n; i++)
		sum += (double)s[i];
	l->avg = sum / n / 1e3;
	l->p50 = (double)s[(size_t)(0.50 * (n - 1))] / 1e3;
	l->p90 = (double)s[(size_t)(0.90 * (n - 1))] / 1e3;
	l->p99 = (double)s[(size_t)(0.99 * (n - 1))] / 1e3;
	l->p999 = (double)s[(size_t)(0.999 * (n - 1))] / 1e3;
}

static void rb_lat_cfg(const struct rb_opts *o, struct rb_pipe_cfg *c)
{
	uint64_t slots = (uint64_t)o->region_mib * 1048576 / RB_LAT_SIZE;

	memset(c, 0, sizeof(*c));
	c->workers = c->rails = c->depth = c->post = c->reap = 1;
	c->P = 1;
	c->njobs = 1;
	c->size = RB_LAT_SIZE;
	c->slots = slots > o->max_slots ? o->max_slots : (unsigned)slots;
}

/* Pipeline latency in one cq_wait mode: the sink's closed loop. */
static void rb_lat_pipe(const struct rb_opts *o, struct rb_target *t,
			enum bp_rdma_cq_wait wait, int64_t *samples,
			struct rb_lat *out)
{
	struct rb_pipe_cfg c;
	struct rb_pipe pp;
	struct bp_pipeline_stats s0;
	struct bp_job *h;
	struct rb_pjob *j;
	struct rb_check chk;
	int64_t c0, c1, tc0, tc1, w0, w1;
	uint64_t ops;
	int rc;

	rb_lat_cfg(o, &c);
	c.cq_wait = wait;
	c.busy_threads = wait == BP_RDMA_CQ_BUSY;
	c.mode = RB_SINK_LAT;
	rc = rb_pipe_open(&pp, t, &c);
	if (rc) {
		out->na = true;
		snprintf(out->note, sizeof(out->note), "%s", bp_strerror(rc));
		rb_pipe_close(&pp);
		return;
	}
	pp.samples = samples;
	pp.max_samples = RB_MAX_SAMPLES;
	for (int pass = 0; pass < 2; pass++) { /* 0: warm-up */
		unsigned ms = pass ? o->lat_ms : 50;

		pp.run = rb_next_run();
		pp.nsamples = 0;
		pp.lat_next_i = 1;
		pp.bad = 0;
		/* relaxed: the sink is idle until the submit below, which
		 * orders these stores before it (release/acquire chain) */
		atomic_store_explicit(&pp.stop, 0, memory_order_relaxed);
		atomic_store_explicit(&pp.lat_end, 0, memory_order_relaxed);
		atomic_store_explicit(&pp.done, 0, memory_order_relaxed);
		bp_pipeline_stats(pp.p, &s0);
		j = &pp.prod[0].jobs[0];
		h = &j->rj.hdr;
		rr_stamp(j->rj.buf, pp.size, RR_TAG(pp.run, 0, 0));
		j->rj.offset = rr_offset(0, 0, pp.slots, pp.size);
		c0 = rt_tids_cpu_ns(pp.tids, pp.ntids);
		tc0 = rb_target_cpu_ns(t);
		w0 = bench_now_ns();
		j->t0 = w0;
		rc = bp_submit(pp.p, &h, 1, 0, -1);
		if (rc != 1)
			bench_die("%s: bp_submit: %s\n", BENCH_CMD,
				  bp_strerror(rc));
		bench_sleep_ns((int64_t)ms * 1000000);
		/* relaxed: a flag; lat_end's release publishes the rest */
		atomic_store_explicit(&pp.stop, 1, memory_order_relaxed);
		{
			int64_t deadline = bench_now_ns() + RB_LOST_NS;

			/* acquire: pairs with the sink's release */
			while (!atomic_load_explicit(&pp.lat_end,
						     memory_order_acquire)) {
				if (bench_now_ns() > deadline)
					bench_die("%s: VERIFY FAILED: latency "
						  "job lost\n",
						  BENCH_CMD);
				bench_sleep_ns(100000);
			}
		}
		w1 = bench_now_ns();
		c1 = rt_tids_cpu_ns(pp.tids, pp.ntids);
		tc1 = rb_target_cpu_ns(t);
		ops = pp.lat_next_i;
		if (pp.lat_err)
			bench_die("%s: latency resubmit: %s\n", BENCH_CMD,
				  bp_strerror(pp.lat_err));
		/* the sink is done with the job: ops submitted = delivered */
		rb_pipe_check_stats(&pp, &s0, ops, "pipeline latency");
		chk = (struct rb_check){.run = pp.run,
					.nlanes = 1,
					.slots = pp.slots,
					.ops = &ops,
					.size = pp.size,
					.outstanding = 1};
		rb_verify_target(t, &chk, "pipeline latency");
		if (pass) {
			rb_lat_stats(samples, pp.nsamples, out);
			out->ops_s = (double)ops / (double)(w1 - w0) * 1e9;
			out->client_cpu =
				100.0 * (double)(c1 - c0) / (double)(w1 - w0);
			out->target_cpu =
				100.0 * (double)(tc1 - tc0) / (double)(w1 - w0);
		}
	}
	pp.samples = NULL; /* the caller's */
	rb_pipe_close(&pp);
}

static void rb_lat_raw(const struct rb_opts *o, struct rb_target *t, bool event,
		       int64_t *samples, struct rb_lat *out)
{
	struct rb_pipe_cfg c;
	struct rb_raw rw;
	struct rr_lat lt;
	struct rb_check chk;
	char why[256];
	pthread_t th;
	int64_t tc0, tc1;
	uint64_t ops;
	int rc;

	rb_lat_cfg(o, &c);
	rc = rb_raw_open(&rw, t, &c, event, why, sizeof(why));
	if (rc) {
		out->na = true;
		snprintf(out->note, sizeof(out->note), "%s", why);
		return;
	}
	for (int pass = 0; pass < 2; pass++) {
		unsigned ms = pass ? o->lat_ms : 50;

		memset(&lt, 0, sizeof(lt));
		lt.l = &rw.lanes[0];
		lt.event = event;
		lt.samples = samples;
		lt.max = RB_MAX_SAMPLES;
		rw.lanes[0].run = rb_next_run();
		/* relaxed: the thread starts after this */
		atomic_store_explicit(&rw.stop, 0, memory_order_relaxed);
		tc0 = rb_target_cpu_ns(t);
		rb_spawn(&th, rr_lane_latency, &lt);
		bench_sleep_ns((int64_t)ms * 1000000);
		/* relaxed: a flag; join publishes the rest */
		atomic_store_explicit(&rw.stop, 1, memory_order_relaxed);
		pthread_join(th, NULL);
		tc1 = rb_target_cpu_ns(t);
		if (rw.lanes[0].err)
			bench_die("%s: VERIFY FAILED: raw latency: %s\n",
				  BENCH_CMD, rw.lanes[0].errmsg);
		if (rw.lanes[0].completed != rw.lanes[0].posted ||
		    lt.ops != rw.lanes[0].posted)
			bench_die("%s: VERIFY FAILED: raw latency: %" PRIu64
				  " completions, %" PRIu64 " posts\n",
				  BENCH_CMD, rw.lanes[0].completed,
				  rw.lanes[0].posted);
		ops = rw.lanes[0].posted;
		chk = (struct rb_check){.run = rw.lanes[0].run,
					.nlanes = 1,
					.slots = c.slots,
					.ops = &ops,
					.size = c.size,
					.outstanding = 1};
		rb_verify_target(t, &chk, "raw latency");
		if (pass) {
			double wall = (double)(rw.lanes[0].t_end -
					       rw.lanes[0].t_start);

			rb_lat_stats(samples, lt.n, out);
			out->ops_s = (double)lt.ops / wall * 1e9;
			out->client_cpu =
				100.0 * (double)rw.lanes[0].cpu_ns / wall;
			out->target_cpu = 100.0 * (double)(tc1 - tc0) / wall;
		}
	}
	rb_raw_close(&rw);
}

/*
 * Idle CPU of a started pipeline with the stage in mode `wait` (waits at
 * their defaults): nothing to do for idle_ms, then one job every 10 ms
 * (the main thread paces; its own CPU is not counted).
 */
static void rb_idle_pipe(const struct rb_opts *o, struct rb_target *t,
			 enum bp_rdma_cq_wait wait, int64_t *samples,
			 struct rb_idle *out)
{
	struct rb_pipe_cfg c;
	struct rb_pipe pp;
	struct bp_pipeline_stats s0;
	struct rb_pjob *j;
	struct bp_job *h;
	struct rb_check chk;
	int64_t c0, c1, w0, w1, next;
	uint64_t ops = 0;
	int rc;

	rb_lat_cfg(o, &c);
	c.cq_wait = wait;
	c.mode = RB_SINK_PACED;
	rc = rb_pipe_open(&pp, t, &c);
	if (rc) {
		out->na = true;
		rb_pipe_close(&pp);
		return;
	}
	pp.samples = samples;
	pp.max_samples = RB_MAX_SAMPLES;
	pp.run = rb_next_run();
	/* let the threads reach their idle wait */
	bench_sleep_ns(50 * 1000000);
	c0 = rt_tids_cpu_ns(pp.tids, pp.ntids);
	w0 = bench_now_ns();
	bench_sleep_ns((int64_t)o->idle_ms * 1000000);
	c1 = rt_tids_cpu_ns(pp.tids, pp.ntids);
	w1 = bench_now_ns();
	out->idle_cpu = 100.0 * (double)(c1 - c0) / (double)(w1 - w0);

	bp_pipeline_stats(pp.p, &s0);
	j = &pp.prod[0].jobs[0];
	h = &j->rj.hdr;
	c0 = rt_tids_cpu_ns(pp.tids, pp.ntids);
	w0 = next = bench_now_ns();
	while (bench_now_ns() - w0 < (int64_t)o->idle_ms * 1000000) {
		int64_t deadline = bench_now_ns() + RB_LOST_NS;

		/* relaxed: the sink has not seen this job yet; the submit
		 * below orders the store before its delivery */
		atomic_store_explicit(&pp.job_free, 0, memory_order_relaxed);
		rr_stamp(j->rj.buf, pp.size, RR_TAG(pp.run, 0, ops));
		j->rj.offset = rr_offset(0, ops, pp.slots, pp.size);
		j->t0 = bench_now_ns();
		rc = bp_submit(pp.p, &h, 1, 0, -1);
		if (rc != 1)
			bench_die("%s: bp_submit: %s\n", BENCH_CMD,
				  bp_strerror(rc));
		ops++;
		/* acquire: pairs with the sink's release; the job is ours */
		while (!atomic_load_explicit(&pp.job_free,
					     memory_order_acquire)) {
			if (bench_now_ns() > deadline)
				bench_die("%s: VERIFY FAILED: paced job lost\n",
					  BENCH_CMD);
			bench_sleep_ns(200000);
		}
		next += RB_PACE_NS;
		if (next > bench_now_ns())
			bench_sleep_ns(next - bench_now_ns());
	}
	c1 = rt_tids_cpu_ns(pp.tids, pp.ntids);
	w1 = bench_now_ns();
	out->paced_cpu = 100.0 * (double)(c1 - c0) / (double)(w1 - w0);
	rb_pipe_wait_done(&pp, ops, "paced");
	rb_pipe_check_stats(&pp, &s0, ops, "paced");
	chk = (struct rb_check){.run = pp.run,
				.nlanes = 1,
				.slots = pp.slots,
				.ops = &ops,
				.size = pp.size,
				.outstanding = 1};
	rb_verify_target(t, &chk, "paced");
	pp.samples = NULL;
	rb_pipe_close(&pp);
}

static void rb_latency(const struct rb_opts *o, struct rb_target *t,
		       struct rb_prov_lat *pl)
{
	int64_t *samples = bench_zalloc(sizeof(*samples) * RB_MAX_SAMPLES);
	static const enum bp_rdma_cq_wait waits[RB_NIDLE] = {
		BP_RDMA_CQ_BUSY, BP_RDMA_CQ_SPIN_SLEEP, BP_RDMA_CQ_EVENT};

	fprintf(stderr, "%s: %s: latency, 4 KiB at depth 1\n", BENCH_CMD,
		t->provider);
	rb_lat_pipe(o, t, BP_RDMA_CQ_BUSY, samples, &pl->lat[RB_L_PBUSY]);
	rb_lat_raw(o, t, false, samples, &pl->lat[RB_L_RBUSY]);
	rb_lat_pipe(o, t, BP_RDMA_CQ_SPIN_SLEEP, samples, &pl->lat[RB_L_PSPIN]);
	rb_lat_pipe(o, t, BP_RDMA_CQ_EVENT, samples, &pl->lat[RB_L_PEVENT]);
	rb_lat_raw(o, t, true, samples, &pl->lat[RB_L_REVENT]);
	fprintf(stderr, "%s: %s: idle CPU\n", BENCH_CMD, t->provider);
	for (int w = 0; w < RB_NIDLE; w++)
		rb_idle_pipe(o, t, waits[w], samples, &pl->idle[w]);
	pl->done = true;
	free(samples);
}

/* ---- output ----------------------------------------------------------------
 */

static double rb_med(const double *v, int n)
{
	double tmp[RB_MAX_RUNS];

	memcpy(tmp, v, sizeof(double) * (size_t)n);
	return bench_median(tmp, n);
}

static double rb_med_ratio(const double *a, const double *b, int n)
{
	double tmp[RB_MAX_RUNS];

	for (int i = 0; i < n; i++)
		tmp[i] = a[i] / b[i];
	return bench_median(tmp, n);
}

static double rb_med_diff(const double *a, const double *b, int n)
{
	double tmp[RB_MAX_RUNS];

	for (int i = 0; i < n; i++)
		tmp[i] = a[i] - b[i];
	return bench_median(tmp, n);
}

static const char *rb_size_str(unsigned size, char *buf, size_t len)
{
	if (size >= 1048576 && size % 1048576 == 0)
		snprintf(buf, len, "%uM", size / 1048576);
	else if (size >= 1024 && size % 1024 == 0)
		snprintf(buf, len, "%uK", size / 1024);
	else
		snprintf(buf, len, "%u", size);
	return buf;
}

static void rb_print_table(FILE *f, const struct rb_opts *o,
			   const struct rb_results *r,
			   const char *const *target_desc)
{
	for (int pv = 0; pv < o->nprov; pv++) {
		int any = 0;

		for (int i = 0; i < r->npoints; i++)
			any |= r->pt[i].prov == pv;
		if (!any)
			continue;
		fprintf(f,
			"\n%s (target: %s), medians of %d interleaved runs of "
			"%u ms\n",
			o->prov[pv], target_desc[pv], r->runs, o->a.ms);
		fprintf(f,
			"%5s %4s %4s %5s %2s %2s | %8s %8s %6s | %8s %8s | "
			"%9s %9s %8s\n",
			"size", "post", "reap", "depth", "W", "R", "pipe GB/s",
			"raw GB/s", "ratio", "pipeMops", "raw Mops",
			"pipe ns/op", "raw ns/op", "extra");
		for (int i = 0; i < r->npoints; i++) {
			const struct rb_point *p = &r->pt[i];
			char sz[16];

			if (p->prov != pv)
				continue;
			rb_size_str(p->size, sz, sizeof(sz));
			fprintf(f, "%5s %4u %4u %5u %2u %2u | ", sz, p->post,
				p->reap, p->depth, p->workers, p->rails);
			if (p->skipped) {
				fprintf(f, "skipped: %s\n", p->note);
				continue;
			}
			fprintf(f,
				"%9.3f %8.3f %6.3f | %8.3f %8.3f | %10.0f "
				"%9.0f %8.0f\n",
				rb_med(p->gbps[RB_PIPE], r->runs),
				rb_med(p->gbps[RB_RAW], r->runs),
				rb_med_ratio(p->gbps[RB_PIPE], p->gbps[RB_RAW],
					     r->runs),
				rb_med(p->mops[RB_PIPE], r->runs),
				rb_med(p->mops[RB_RAW], r->runs),
				rb_med(p->cpu[RB_PIPE], r->runs),
				rb_med(p->cpu[RB_RAW], r->runs),
				rb_med_diff(p->cpu[RB_PIPE], p->cpu[RB_RAW],
					    r->runs));
		}
	}
	fprintf(f,
		"\nratio: pipeline / raw GB/s, median of per-run ratios. "
		"ns/op: CPU time of the\nvariant's threads (pipeline: "
		"producers, workers, sink; raw: its threads) per\nop; extra = "
		"pipeline - raw (median of per-run differences). The "
		"target's\nCPU is in neither.\n");
}

static void rb_print_csv(FILE *f, const struct rb_opts *o,
			 const struct rb_results *r)
{
	fprintf(f,
		"provider,mode,size,post_batch,reap_batch,depth,workers,rails,"
		"run,GBps,Mops,cpu_ns_per_op\n");
	for (int i = 0; i < r->npoints; i++) {
		const struct rb_point *p = &r->pt[i];

		if (p->skipped)
			continue;
		for (int run = 0; run < r->runs; run++)
			for (int v = 0; v < RB_NVAR; v++)
				fprintf(f,
					"%s,%s,%u,%u,%u,%u,%u,%u,%d,%.4f,%.4f,"
					"%.1f\n",
					o->prov[p->prov], rb_var_name[v],
					p->size, p->post, p->reap, p->depth,
					p->workers, p->rails, run,
					p->gbps[v][run], p->mops[v][run],
					p->cpu[v][run]);
	}
}

static void rb_print_latency(FILE *f, const struct rb_opts *o,
			     const struct rb_prov_lat *pl,
			     const char *const *target_desc)
{
	for (int pv = 0; pv < o->nprov; pv++) {
		if (!pl[pv].done)
			continue;
		fprintf(f,
			"\n%s: 4 KiB writes, depth 1, one worker (target: %s), "
			"%u ms each\n",
			o->prov[pv], target_desc[pv], o->lat_ms);
		fprintf(f, "%-20s | %8s %8s %8s %8s %8s | %9s | %7s %7s\n",
			"completion wait", "avg us", "p50 us", "p90 us",
			"p99 us", "p99.9 us", "ops/s", "client%", "target%");
		for (int k = 0; k < RB_NLAT; k++) {
			const struct rb_lat *l = &pl[pv].lat[k];

			fprintf(f, "%-20s | ", rb_lat_name[k]);
			if (l->na) {
				fprintf(f, "n/a (%s)\n", l->note);
				continue;
			}
			fprintf(f,
				"%8.1f %8.1f %8.1f %8.1f %8.1f | %9.0f | %7.1f "
				"%7.1f\n",
				l->avg, l->p50, l->p90, l->p99, l->p999,
				l->ops_s, l->client_cpu, l->target_cpu);
		}
		fprintf(f,
			"idle CPU of the pipeline's threads (%% of one core), "
			"stage cq_wait:\n");
		for (int w = 0; w < RB_NIDLE; w++) {
			const struct rb_idle *id = &pl[pv].idle[w];

			if (id->na)
				fprintf(f, "  %-10s  n/a\n", rb_wait_name[w]);
			else
				fprintf(f,
					"  %-10s  idle %u ms: %6.2f %%   "
					"100 ops/s paced: %6.2f %%\n",
					rb_wait_name[w], o->idle_ms,
					id->idle_cpu, id->paced_cpu);
		}
	}
	fprintf(f,
		"\nlatency: pipeline = clock before bp_submit -> sink entry, "
		"the sink resubmitting\n(closed loop); raw = post -> "
		"completion reaped. client%%: CPU of the pipeline's\nworkers "
		"and sink, or of the raw thread; target%%: the target's "
		"progress threads\n(or the bp-target process).\n");
}

static void rb_print_latency_csv(FILE *f, const struct rb_opts *o,
				 const struct rb_prov_lat *pl)
{
	fprintf(f, "provider,mode,wait,avg_us,p50_us,p90_us,p99_us,p999_us,"
		   "ops_per_s,client_cpu_pct,target_cpu_pct\n");
	for (int pv = 0; pv < o->nprov; pv++)
		for (int k = 0; pl[pv].done && k < RB_NLAT; k++) {
			const struct rb_lat *l = &pl[pv].lat[k];

			if (l->na)
				continue;
			fprintf(f,
				"%s,%s,%s,%.2f,%.2f,%.2f,%.2f,%.2f,%.0f,%.2f,"
				"%.2f\n",
				o->prov[pv], rb_lat_csv[k], rb_lat_wait[k],
				l->avg, l->p50, l->p90, l->p99, l->p999,
				l->ops_s, l->client_cpu, l->target_cpu);
		}
}

static const struct rb_point *rb_find(const struct rb_results *r, int pv,
				      unsigned size, unsigned post,
				      unsigned reap, unsigned depth)
{
	for (int i = 0; i < r->npoints; i++) {
		const struct rb_point *p = &r->pt[i];

		if (p->prov == pv && p->size == size && p->post == post &&
		    p->reap == reap && p->depth == depth && p->workers == 1 &&
		    p->rails == 1 && !p->skipped)
			return p;
	}
	return NULL;
}

static const char *rb_verdict(bool ok)
{
	return ok ? "MET" : "MISSED";
}

static void rb_print_targets(FILE *f, const struct rb_opts *o,
			     const struct rb_results *r,
			     const struct rb_prov_lat *pl)
{
	int n = r->runs;

	fprintf(f, "\ntargets\n");
	for (int pv = 0; pv < o->nprov; pv++) {
		const char *name = o->prov[pv];
		static const unsigned big[2] = {65536, 1u << 20};
		double worst = NAN;

		for (int b = 0; b < 2; b++) {
			const struct rb_point *p =
				rb_find(r, pv, big[b], RB_BASE_POST,
					RB_BASE_REAP, RB_BASE_DEPTH);
			double ratio;
			char sz[16];

			if (!p)
				continue;
			ratio = rb_med_ratio(p->gbps[RB_PIPE], p->gbps[RB_RAW],
					     n);
			fprintf(f,
				"  1. %-12s %4s: pipeline %.2f GB/s = %.1f %% "
				"of raw %.2f GB/s (>= 90 %%): %s\n",
				name, rb_size_str(big[b], sz, sizeof(sz)),
				rb_med(p->gbps[RB_PIPE], n), 100 * ratio,
				rb_med(p->gbps[RB_RAW], n),
				rb_verdict(ratio >= 0.90));
		}
		{
			const struct rb_point *a = rb_find(r, pv, 64, 1, 1, 1);
			const struct rb_point *b =
				rb_find(r, pv, 64, 16, 16, 64);

			if (a && b) {
				double ma = rb_med(a->mops[RB_PIPE], n);
				double mb = rb_med(b->mops[RB_PIPE], n);

				fprintf(f,
					"  2. %-12s   64 B: post 16 reap 16 "
					"depth 64 %.3f Mops/s = %.2fx post 1 "
					"reap 1 depth 1 %.3f (>= 2x%s): %s\n",
					name, mb, mb / ma, ma,
					strncmp(name, "tcp", 3)
						? ", asked for tcp"
						: "",
					rb_verdict(mb / ma >= 2));
			}
		}
		{
			const struct rb_point *a = rb_find(r, pv, 64, 1, 1, 1);
			const struct rb_point *b =
				rb_find(r, pv, 64, 16, 16, 64);

			for (int i = 0; i < r->npoints; i++) {
				const struct rb_point *p = &r->pt[i];
				double d;

				if (p->prov != pv || p->skipped ||
				    p->size != 64)
					continue;
				d = rb_med_diff(p->cpu[RB_PIPE], p->cpu[RB_RAW],
						n);
				if (isnan(worst) || d > worst)
					worst = d;
			}
			if (b)
				fprintf(f,
					"  3. %-12s extra CPU per 64 B op: "
					"post 16 reap 16 depth 64 %+.0f ns, "
					"1/1/1 %+.0f ns, worst 64 B point "
					"%+.0f "
					"ns (<= 100 ns at 16/16/64): %s\n",
					name,
					rb_med_diff(b->cpu[RB_PIPE],
						    b->cpu[RB_RAW], n),
					a ? rb_med_diff(a->cpu[RB_PIPE],
							a->cpu[RB_RAW], n)
					  : NAN,
					worst,
					rb_verdict(rb_med_diff(b->cpu[RB_PIPE],
							       b->cpu[RB_RAW],
							       n) <= 100));
		}
		if (pl[pv].done) {
			const struct rb_lat *pb = &pl[pv].lat[RB_L_PBUSY];
			const struct rb_lat *rbz = &pl[pv].lat[RB_L_RBUSY];
			const struct rb_idle *ev = &pl[pv].idle[2];

			if (!pb->na && !rbz->na)
				fprintf(f,
					"  4. %-12s busy-poll p50: pipeline "
					"%.1f us, raw %.1f us, +%.1f us (<= 2 "
					"us): %s\n",
					name, pb->p50, rbz->p50,
					pb->p50 - rbz->p50,
					rb_verdict(pb->p50 - rbz->p50 <= 2));
			if (ev->na)
				fprintf(f,
					"  4. %-12s event-wait idle CPU: n/a "
					"(no wait fd)\n",
					name);
			else
				fprintf(f,
					"  4. %-12s event-wait idle CPU %.2f "
					"%% "
					"(paced 100 ops/s %.2f %%) (< 1 %%): "
					"%s\n",
					name, ev->idle_cpu, ev->paced_cpu,
					rb_verdict(ev->idle_cpu < 1));
		}
	}
}

/* What the printers get (bench_emit's ctx). */
struct rb_report {
	const struct rb_opts *o;
	const struct rb_results *r;
	const struct rb_prov_lat *pl;
	const char *const *tdesc; /* per provider: what the target was */
};

static void rb_csv(FILE *f, const void *ctx)
{
	const struct rb_report *rep = ctx;

	if (!rep->o->latency_only)
		rb_print_csv(f, rep->o, rep->r);
	if (!rep->o->no_latency) {
		if (!rep->o->latency_only)
			fprintf(f, "\n");
		rb_print_latency_csv(f, rep->o, rep->pl);
	}
}

static void rb_table(FILE *f, const void *ctx)
{
	const struct rb_report *rep = ctx;

	if (!rep->o->latency_only)
		rb_print_table(f, rep->o, rep->r, rep->tdesc);
	if (!rep->o->no_latency)
		rb_print_latency(f, rep->o, rep->pl, rep->tdesc);
	rb_print_targets(f, rep->o, rep->r, rep->pl);
}

/* ---- options ------------------------------------------------------------ */

/* "64,4K,1M" */
static int rb_parse_sizes(const char *s, unsigned *out, int max)
{
	int n = 0;

	while (*s) {
		char *end;
		unsigned long v;

		if (*s < '0' || *s > '9' || n >= max)
			return -1;
		v = strtoul(s, &end, 10);
		if (*end == 'K' || *end == 'k')
			v <<= 10, end++;
		else if (*end == 'M' || *end == 'm')
			v <<= 20, end++;
		if (v < 16 || v > (64ul << 20) || v % 8)
			return -1;
		out[n++] = (unsigned)v;
		s = end;
		if (*s == ',')
			s++;
		else if (*s)
			return -1;
	}
	return n > 0 ? n : -1;
}

static int rb_set_providers(struct bench_args *a, const char *arg)
{
	struct rb_opts *o = a->ctx;

	if (strlen(arg) >= sizeof(o->prov_buf))
		return -1;
	strcpy(o->prov_buf, arg);
	return 0;
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
	if (!strcmp(arg, "spin-sleep"))
		rb_target_wait = BP_RDMA_CQ_SPIN_SLEEP;
	else if (!strcmp(arg, "busy"))
		rb_target_wait = BP_RDMA_CQ_BUSY;
	else if (!strcmp(arg, "event"))
		rb_target_wait = BP_RDMA_CQ_EVENT;
	else if (!strcmp(arg, "auto"))
		rb_target_wait = BP_RDMA_CQ_AUTO;
	else
		return -1;
	return 0;
}

static int rb_set_verbose(struct bench_args *a, const char *arg)
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
	((struct rb_opts *)a->ctx)->target_mode = 1;
	return 0;
}

static int rb_set_in_process(struct bench_args *a, const char *arg)
{
	(void)arg;
	((struct rb_opts *)a->ctx)->target_mode = 2;
	return 0;
}

static int rb_set_latency(struct bench_args *a, const char *arg)
{
	(void)arg;
	((struct rb_opts *)a->ctx)->latency_only = 1;
	return 0;
}

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
	{"verbose", NULL, rb_set_verbose,
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
	return BENCH_OPTS_RUN;
}

int bench_rdma_main(int argc, char **argv)
{
	struct rb_opts o;
	struct rb_results *r;
	struct rb_prov_lat *pl;
	const char *tdesc[RB_MAX_PROV];
	static char tdesc_buf[RB_MAX_PROV][64];
	struct rb_report rep;
	int64_t t0;
	int status;

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
	if (!o.latency_only)
		rb_build_points(&o, r);

	for (int pv = 0; pv < o.nprov; pv++) {
		struct rb_target t;
		const char *node = strcmp(o.prov[pv], "shm") ? o.node : NULL;
		unsigned rails = 1;
		int rc;

		tdesc[pv] = "none";
		for (int i = 0; i < r->npoints; i++)
			if (r->pt[i].prov == pv && r->pt[i].rails > rails)
				rails = r->pt[i].rails;
		rc = rb_target_open(&t, o.prov[pv], node, rails,
				    (uint64_t)o.region_mib << 20,
				    o.target_mode);
		if (rc) {
			fprintf(stderr,
				"%s: %s: skipped, the provider does not open "
				"here: %s\n",
				BENCH_CMD, o.prov[pv], bp_strerror(rc));
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
		if (!o.no_latency)
			rb_latency(&o, &t, &pl[pv]);
		rb_target_close(&t);
	}
	fprintf(stderr,
		"%s: done in %.1f s, every run verified (%" PRIu64
		" target words checked)\n",
		BENCH_CMD, (double)(bench_now_ns() - t0) / 1e9,
		rb_words_checked);
	rep = (struct rb_report){&o, r, pl, tdesc};
	status = bench_emit(&o.a, rb_csv, rb_table, NULL, &rep);
	free(r->pt);
	free(r);
	free(pl);
	return status;
}
