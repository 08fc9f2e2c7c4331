/* SPDX-License-Identifier: MIT */
/*
 * rdma/intake.c - `bpbench rdma --intake`: how long a job submitted while
 * the stage's worker waits for a completion waits to be posted.
 *
 * One worker, one rail, bp-target as the target. Per sample: bp-target is
 * stopped (SIGSTOP), so that a write cannot complete, and a 64 B DELIVERED
 * write (the first) is submitted: posted, it stays in flight. After a
 * random pause of 100-1000 us, long enough for the worker to be past its
 * spin and asleep in its completion wait, main submits a second 64 B write
 * (the probe) and takes the clock. The stage's prepare callback, which
 * runs just before the probe is posted, takes it again: submit -> post is
 * the sample. Then bp-target goes on (SIGCONT) and both complete. (A large
 * write as the one in flight does not measure this: providers copy much
 * of it inside the post call itself, so the probe waits for the post, not
 * for the wait.) Per completion wait: busy (the reference), spin-sleep and
 * event (where the provider has wait fds).
 *
 * Every sample is checked: both writes complete ok, the first only after
 * the probe was posted, and their tags are in the target (the first 8
 * bytes of each, read back through the target's digest, as the other
 * experiments do).
 */
#include <sched.h>
#include <signal.h>
#include "rdma/rdma_harness.h"

#define RI_LEN	      64u		/* both writes */
#define RI_PROBE_OFF  (1ull << 20)	/* the probe's offset; the first's: 0 */
#define RI_PAUSE_MIN  100000
#define RI_PAUSE_SPAN 900000
#define RI_POST_NS    INT64_C(2000000000) /* the probe posted by then */
#define RI_TARGET_NS  10000 /* the bar: a submitted job posted within */

struct ri_run {
	struct bp_rdma *r;
	struct bp_pipeline *p;
	struct bp_rdma_job held, probe; /* in flight; the one measured */
	/* prepare's clock for the probe; the sink's for each */
	_Atomic int64_t probe_post_ns, held_seen_ns, probe_seen_ns;
	_Atomic int held_status, probe_status;
};

static int ri_prepare(void *ctx, struct bp_rdma_job *j)
{
	struct ri_run *x = ctx;

	/* release: pairs with main's acquire in ri_wait_post */
	if (j == &x->probe)
		atomic_store_explicit(&x->probe_post_ns, bench_now_ns(),
				      memory_order_release);
	return 0;
}

static void ri_sink(void *ctx, struct bp_job **jobs, unsigned n)
{
	struct ri_run *x = ctx;
	int64_t t = bench_now_ns();

	for (unsigned i = 0; i < n; i++) {
		bool held = jobs[i] == &x->held.hdr;

		/* relaxed: the release store of *_seen_ns publishes it */
		atomic_store_explicit(held ? &x->held_status
					   : &x->probe_status,
				      jobs[i]->status, memory_order_relaxed);
		/* release: pairs with main's acquire */
		atomic_store_explicit(held ? &x->held_seen_ns
					   : &x->probe_seen_ns,
				      t, memory_order_release);
	}
}

/* Wait (20 us naps) until *v is set; dies after limit_ns. */
static int64_t ri_wait_set(_Atomic int64_t *v, int64_t limit_ns,
			   const char *what)
{
	int64_t deadline = bench_now_ns() + limit_ns, got;

	/* acquire: pairs with ri_sink's or ri_prepare's release */
	while (!(got = atomic_load_explicit(v, memory_order_acquire))) {
		if (bench_now_ns() > deadline)
			bench_die("%s: VERIFY FAILED: intake: %s\n", BENCH_CMD,
				  what);
		bench_sleep_ns(20000);
	}
	return got;
}

/* The tag must be at off in the target (first 8 bytes of the write). */
static void ri_check_tag(struct rb_target *t, uint64_t off, uint64_t tag,
			 const char *what)
{
	int64_t deadline = bench_now_ns() + RB_LAND_NS;
	uint64_t fp;
	int rc;

	for (;;) {
		rc = rb_target_fp(t, off, &fp);
		if (rc)
			bench_die("%s: VERIFY FAILED: intake: target query: "
				  "%s\n",
				  BENCH_CMD, bp_strerror(rc));
		if (fp == bp_rdma_digest(&tag, 8))
			break;
		if (bench_now_ns() > deadline)
			bench_die("%s: VERIFY FAILED: intake: the %s write's "
				  "bytes are not in the target\n",
				  BENCH_CMD, what);
		bench_sleep_ns(1000000);
	}
	rb_words_checked++;
}

static int ri_open(struct ri_run *x, struct rb_target *t,
		   enum bp_rdma_cq_wait wait, uint8_t *bufs)
{
	struct bp_rdma_config rc;
	struct bp_pipeline_config pc;
	struct bp_rdma_peer_desc d;
	int peer, err;

	bp_rdma_config_init(&rc);
	rc.provider = t->provider;
	rc.node = t->node;
	rc.workers = 1;
	rc.rails = 1;
	rc.cq_wait = wait;
	rc.prepare = ri_prepare;
	rc.prepare_ctx = x;
	rc.log = rb_log;
	err = bp_rdma_create(&rc, &x->r);
	if (err) {
		x->r = NULL;
		return err;
	}
	rb_target_desc(t, 1, &d);
	peer = bp_rdma_peer_add(x->r, &d);
	if (peer < 0)
		return peer;
	err = bp_rdma_register(x->r, bufs, 2 * RI_LEN, NULL);
	if (err)
		return err;
	bp_rdma_job_set(&x->held, BP_RDMA_WRITE, (uint32_t)peer, bufs, RI_LEN,
			0);
	bp_rdma_job_set(&x->probe, BP_RDMA_WRITE, (uint32_t)peer,
			bufs + RI_LEN, RI_LEN, RI_PROBE_OFF);
	/* completes only once the target has it: in flight while stopped */
	x->held.flags = x->probe.flags = BP_RDMA_JOB_DELIVERED;
	bp_pipeline_config_init(&pc);
	pc.workers = 1;
	pc.stage = bp_rdma_stage(x->r);
	pc.stage_ctx = x->r;
	pc.sink = ri_sink;
	pc.sink_ctx = x;
	pc.log = rb_log;
	if (wait == BP_RDMA_CQ_BUSY) {
		pc.worker_wait.strategy = BP_WAIT_BUSY_POLL;
		pc.sink_wait.strategy = BP_WAIT_BUSY_POLL;
	}
	err = bp_pipeline_create(&pc, &x->p);
	if (!err)
		err = bp_pipeline_start(x->p);
	return err;
}

static void ri_close(struct ri_run *x)
{
	if (x->p) {
		int rc = bp_pipeline_drain(x->p);

		if (rc)
			bench_die("%s: intake: drain: %s\n", BENCH_CMD,
				  bp_strerror(rc));
		bp_pipeline_destroy(x->p);
	}
	bp_rdma_destroy(x->r);
	memset(x, 0, sizeof(*x));
}

static void ri_submit(struct ri_run *x, struct bp_rdma_job *j)
{
	struct bp_job *h = &j->hdr;
	int rc = bp_pipeline_submit(x->p, &h, 1, 0, -1);

	if (rc != 1)
		bench_die("%s: intake: bp_pipeline_submit: %s\n", BENCH_CMD,
			  bp_strerror(rc));
}

/* bp-target's state letter in /proc (R, S, T ...), or 0. */
static char ri_state(pid_t pid)
{
	char path[64], buf[512], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* the name may hold spaces */
	return p && p[1] == ' ' ? p[2] : 0;
}

/* Stop or continue bp-target; a stop is waited for (kill does not). */
static void ri_signal(struct rb_target *t, int sig)
{
	int64_t deadline = bench_now_ns() + 1000000000;

	if (kill(t->d.pid, sig))
		bench_die("%s: intake: kill(bp-target, %d): %s\n", BENCH_CMD,
			  sig, strerror(errno));
	while (sig == SIGSTOP && ri_state(t->d.pid) != 'T') {
		if (bench_now_ns() > deadline)
			bench_die("%s: intake: bp-target did not stop\n",
				  BENCH_CMD);
		sched_yield();
	}
}

/*
 * One sample: submit -> post of the probe, the first write in flight; -1
 * if the first write was not in flight when the probe was posted.
 */
static int64_t ri_sample(struct ri_run *x, struct rb_target *t, uint8_t *bufs,
			 unsigned run, unsigned i, int64_t pause_ns)
{
	uint64_t tag_h = RR_TAG(run, 0, i), tag_p = RR_TAG(run, 1, i);
	int64_t t0, post, held_seen;

	rr_stamp(bufs, RI_LEN, tag_h);
	rr_stamp(bufs + RI_LEN, RI_LEN, tag_p);
	/* relaxed: the sink and prepare are idle (both jobs are back) */
	atomic_store_explicit(&x->held_seen_ns, 0, memory_order_relaxed);
	atomic_store_explicit(&x->probe_seen_ns, 0, memory_order_relaxed);
	atomic_store_explicit(&x->probe_post_ns, 0, memory_order_relaxed);
	ri_signal(t, SIGSTOP);
	ri_submit(x, &x->held);
	bench_sleep_ns(pause_ns);
	t0 = bench_now_ns();
	ri_submit(x, &x->probe);
	post = ri_wait_set(&x->probe_post_ns, RI_POST_NS,
			   "the probe was not posted within 2 s");
	ri_signal(t, SIGCONT);
	held_seen = ri_wait_set(&x->held_seen_ns, RB_LOST_NS,
				"the first write never came back");
	ri_wait_set(&x->probe_seen_ns, RB_LOST_NS,
		    "the probe never came back");
	/* relaxed: ordered by the acquire loads in ri_wait_set */
	if (atomic_load_explicit(&x->held_status, memory_order_relaxed) ||
	    atomic_load_explicit(&x->probe_status, memory_order_relaxed))
		bench_die("%s: VERIFY FAILED: intake: status %s, probe %s\n",
			  BENCH_CMD, bp_strerror(atomic_load(&x->held_status)),
			  bp_strerror(atomic_load(&x->probe_status)));
	ri_check_tag(t, 0, tag_h, "first");
	ri_check_tag(t, RI_PROBE_OFF, tag_p, "probe");
	/* completed with the target stopped: the provider writes without
	 * it (shm copies into the peer's memory itself); no sample */
	return held_seen < post ? -1 : post - t0;
}

/* One completion wait's samples; the submit -> post times into out. */
static void ri_measure(const struct rb_opts *o, struct rb_target *t,
		       enum bp_rdma_cq_wait wait, struct rb_intake *out)
{
	static struct ri_run x;
	uint8_t *bufs = bench_zalloc(2 * RI_LEN);
	int64_t *s = bench_zalloc(sizeof(*s) * o->intake_samples);
	unsigned run = rb_next_run();
	uint64_t rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)wait;
	int err;

	memset(&x, 0, sizeof(x));
	err = ri_open(&x, t, wait, bufs);
	if (err) {
		out->na = true;
		snprintf(out->note, sizeof(out->note), "%s", bp_strerror(err));
		if (x.p)
			bp_pipeline_destroy(x.p);
		bp_rdma_destroy(x.r);
		goto out;
	}
	/* warm-up: the connection (tcp) and the registration */
	ri_sample(&x, t, bufs, run, 0, 0);
	for (unsigned i = 0; i < o->intake_samples; i++) {
		int64_t v;

		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		v = ri_sample(&x, t, bufs, run, i + 1,
			      RI_PAUSE_MIN +
				      (int64_t)((rng >> 33) % RI_PAUSE_SPAN));
		if (v >= 0)
			s[out->samples++] = v;
		else if (++out->not_held >= 5 && !out->samples)
			break; /* the provider holds nothing in flight */
	}
	ri_close(&x);
	if (!out->samples) {
		out->na = true;
		snprintf(out->note, sizeof(out->note),
			 "writes complete with the target stopped (the "
			 "provider copies them itself): none stays in flight");
		goto out;
	}
	rb_lat_percentiles(s, out->samples, &out->lat);
out:
	free(bufs);
	free(s);
}

void rb_intake(const struct rb_opts *o, struct rb_target *t,
	       struct rb_prov_intake *pi)
{
	static const enum bp_rdma_cq_wait waits[RB_NIDLE] = {
		BP_RDMA_CQ_BUSY, BP_RDMA_CQ_SPIN_SLEEP, BP_RDMA_CQ_EVENT};

	if (!t->daemon) {
		for (int w = 0; w < RB_NIDLE; w++) {
			pi->w[w].na = true;
			snprintf(pi->w[w].note, sizeof(pi->w[w].note),
				 "needs bp-target (it is stopped to hold a "
				 "write in flight)");
		}
		pi->done = true;
		return;
	}
	fprintf(stderr,
		"%s: %s: intake, a write submitted while one is in flight, "
		"%u samples per wait\n",
		BENCH_CMD, t->provider, o->intake_samples);
	for (int w = 0; w < RB_NIDLE; w++)
		ri_measure(o, t, waits[w], &pi->w[w]);
	pi->done = true;
}

void rb_intake_table(FILE *f, const struct rb_opts *o,
		     const struct rb_prov_intake *pi)
{
	fprintf(f,
		"\nIntake: a %u B write submitted %u-%u us after another, "
		"which is in flight (bp-target stopped), until the stage "
		"posts it (its prepare callback), us\n",
		RI_LEN, RI_PAUSE_MIN / 1000,
		(RI_PAUSE_MIN + RI_PAUSE_SPAN) / 1000);
	fprintf(f, "%-14s %-11s %8s %8s %8s %8s %8s\n", "provider",
		"cq_wait", "samples", "p50", "p90", "p99", "max");
	for (int pv = 0; pv < o->nprov; pv++) {
		if (!pi[pv].done)
			continue;
		for (int w = 0; w < RB_NIDLE; w++) {
			const struct rb_intake *x = &pi[pv].w[w];

			if (x->na) {
				fprintf(f, "%-14s %-11s %8s  %s\n", o->prov[pv],
					rb_wait_name[w], "-", x->note);
				continue;
			}
			fprintf(f, "%-14s %-11s %8u %8.1f %8.1f %8.1f %8.1f",
				o->prov[pv], rb_wait_name[w], x->samples,
				x->lat.p50, x->lat.p90, x->lat.p99, x->lat.max);
			if (x->not_held)
				fprintf(f, "  (%u more: not in flight)",
					x->not_held);
			fprintf(f, "\n");
		}
	}
	fprintf(f, "\nHEADLINE (target: a job submitted while operations "
		   "are in flight is posted within %u us, median)\n",
		RI_TARGET_NS / 1000);
	for (int pv = 0; pv < o->nprov; pv++) {
		if (!pi[pv].done)
			continue;
		for (int w = 1; w < RB_NIDLE; w++) {
			const struct rb_intake *x = &pi[pv].w[w];

			fprintf(f, "  intake %s, %s: %s", rb_wait_name[w],
				o->prov[pv],
				x->na			   ? "n/a"
				: x->lat.p50 * 1e3 <= RI_TARGET_NS ? "met"
								   : "MISSED");
			if (!x->na)
				fprintf(f, " (p50 %.1f us, p99 %.1f us)",
					x->lat.p50, x->lat.p99);
			fprintf(f, "\n");
		}
	}
}
