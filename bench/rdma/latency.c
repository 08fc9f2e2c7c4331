/* SPDX-License-Identifier: MIT */
/*
 * rdma/latency.c - `bpbench rdma --latency`: 4 KiB writes at depth 1 per
 * completion wait, pipeline and raw, and the idle and paced CPU of the
 * pipeline's threads.
 */
#include "rdma/rdma_harness.h"

const char *const rb_lat_name[RB_NLAT] = {
	"pipeline busy-poll", "pipeline spin-sleep", "pipeline event-wait",
	"direct busy-poll",   "direct event-wait",   "raw busy-poll",
	"raw event-wait"};

const char *const rb_lat_csv[RB_NLAT] = {"pipeline", "pipeline", "pipeline",
					 "direct",   "direct",   "raw",
					 "raw"};

const char *const rb_lat_wait[RB_NLAT] = {"busy",  "spin-sleep", "event",
					  "busy",  "event",	 "busy",
					  "event"};

const char *const rb_wait_name[RB_NIDLE] = {"busy", "spin-sleep", "event"};

static int rb_cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

void rb_lat_percentiles(int64_t *s, unsigned n, struct rb_lat *l)
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
	l->max = (double)s[n - 1] / 1e3;
}

/*
 * A measured window with no latency sample (a lane that never ran: the
 * machine was that busy) is no result: n/a with the reason, not rates
 * and CPU shares divided by a wall time of nothing.
 */
static bool rb_lat_empty(struct rb_lat *out, unsigned n, double wall,
			 unsigned ms)
{
	if (n > 0 && wall > 0)
		return false;
	out->na = true;
	snprintf(out->note, sizeof(out->note),
		 "no write completed in its %u ms window (the machine too "
		 "busy to run it?)",
		 ms);
	return true;
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
		bp_pipeline_get_stats(pp.p, &s0);
		j = &pp.prod[0].jobs[0];
		h = &j->rj.hdr;
		rr_stamp(j->rj.buf, pp.size, RR_TAG(pp.run, 0, 0));
		j->rj.offset = rr_offset(0, 0, pp.slots, pp.size);
		c0 = rt_tids_cpu_ns(pp.tids, pp.ntids);
		tc0 = rb_target_cpu_ns(t);
		w0 = bench_now_ns();
		j->t0 = w0;
		rc = bp_pipeline_submit(pp.p, &h, 1, 0, -1);
		if (rc != 1)
			bench_die("%s: bp_pipeline_submit: %s\n", BENCH_CMD,
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
		rb_pipe_verify(t, &pp, 1, &ops, 1, "pipeline latency");
		if (pass && !rb_lat_empty(out, pp.nsamples, (double)(w1 - w0),
					      ms)) {
			rb_lat_percentiles(samples, pp.nsamples, out);
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
		if (pass && !rb_lat_empty(out, lt.n,
					      (double)(rw.lanes[0].t_end -
						       rw.lanes[0].t_start),
					      ms)) {
			double wall = (double)(rw.lanes[0].t_end -
					       rw.lanes[0].t_start);

			rb_lat_percentiles(samples, lt.n, out);
			out->ops_s = (double)lt.ops / wall * 1e9;
			out->client_cpu =
				100.0 * (double)rw.lanes[0].cpu_ns / wall;
			out->target_cpu = 100.0 * (double)(tc1 - tc0) / wall;
		}
	}
	rb_raw_close(&rw);
}

/* The run-to-completion loop: post, poll until it is back, again. */
struct rb_direct_lat {
	struct bp_rdma *r;
	struct bp_rdma_direct *d;
	struct bp_rdma_job j;
	uint8_t *buf;
	size_t size;
	unsigned slots, run;
	int64_t *samples;
	unsigned max, n;
	uint64_t ops;
	int err;
	int64_t t_start, t_end, cpu_ns;
	atomic_int *stop;
};

static void *rb_direct_lane(void *arg)
{
	struct rb_direct_lat *x = arg;
	struct bp_rdma_job *got;
	int64_t c0 = bench_thread_cpu_ns();

	x->t_start = bench_now_ns();
	/* relaxed: a flag; the join publishes the rest */
	while (!atomic_load_explicit(x->stop, memory_order_relaxed)) {
		struct bp_rdma_job *j = &x->j;
		int64_t t0;
		int rc;

		rr_stamp(x->buf, x->size, RR_TAG(x->run, 0, x->ops));
		j->offset = rr_offset(0, x->ops, x->slots, x->size);
		t0 = bench_now_ns();
		rc = bp_rdma_direct_post(x->d, &j, 1);
		if (rc == 1)
			rc = bp_rdma_direct_poll(x->d, &got, 1, -1);
		if (rc != 1 || got != j || j->hdr.status) {
			x->err = rc < 0 ? rc : j->hdr.status ? j->hdr.status
							     : -EIO;
			break;
		}
		if (x->n < x->max)
			x->samples[x->n++] = bench_now_ns() - t0;
		x->ops++;
	}
	x->t_end = bench_now_ns();
	x->cpu_ns = bench_thread_cpu_ns() - c0;
	return NULL;
}

/* Run to completion: one thread posts and reaps, no pipeline. */
static void rb_lat_direct(const struct rb_opts *o, struct rb_target *t,
			  enum bp_rdma_cq_wait wait, int64_t *samples,
			  struct rb_lat *out)
{
	struct rb_pipe_cfg c;
	struct bp_rdma_config rc;
	struct bp_rdma_peer_desc d;
	struct rb_direct_lat x;
	struct rb_check chk;
	atomic_int stop;
	pthread_t th;
	int64_t tc0, tc1;
	int peer, err;

	rb_lat_cfg(o, &c);
	memset(&x, 0, sizeof(x));
	bp_rdma_config_init(&rc);
	rc.provider = t->provider;
	rc.node = t->node;
	rc.workers = rc.rails = rc.credits = 1;
	rc.post_batch = rc.reap_batch = 1;
	rc.cq_wait = wait;
	rc.log = rb_log;
	x.size = c.size;
	x.slots = c.slots;
	x.buf = bench_zalloc(c.size);
	err = bp_rdma_create(&rc, &x.r);
	if (!err) {
		rb_target_desc(t, 1, &d);
		peer = bp_rdma_peer_add(x.r, &d);
		err = peer < 0 ? peer
			       : bp_rdma_register(x.r, x.buf, c.size, NULL);
	}
	if (!err)
		err = bp_rdma_direct_open(x.r, 0, &x.d);
	if (err) {
		out->na = true;
		snprintf(out->note, sizeof(out->note), "%s", bp_strerror(err));
		bp_rdma_destroy(x.r);
		free(x.buf);
		return;
	}
	bp_rdma_job_set(&x.j, BP_RDMA_WRITE, (uint32_t)peer, x.buf, c.size, 0);
	x.samples = samples;
	x.max = RB_MAX_SAMPLES;
	x.stop = &stop;
	for (int pass = 0; pass < 2; pass++) { /* 0: warm-up */
		unsigned ms = pass ? o->lat_ms : 50;

		x.run = rb_next_run();
		x.n = 0;
		x.ops = 0;
		/* relaxed: the thread starts after this */
		atomic_store_explicit(&stop, 0, memory_order_relaxed);
		tc0 = rb_target_cpu_ns(t);
		rb_spawn(&th, rb_direct_lane, &x);
		bench_sleep_ns((int64_t)ms * 1000000);
		atomic_store_explicit(&stop, 1, memory_order_relaxed);
		pthread_join(th, NULL);
		tc1 = rb_target_cpu_ns(t);
		if (x.err)
			bench_die("%s: VERIFY FAILED: direct latency: %s\n",
				  BENCH_CMD, bp_strerror(x.err));
		chk = (struct rb_check){.run = x.run,
					.nlanes = 1,
					.slots = c.slots,
					.ops = &x.ops,
					.size = c.size,
					.outstanding = 1};
		rb_verify_target(t, &chk, "direct latency");
		if (pass &&
		    !rb_lat_empty(out, x.n, (double)(x.t_end - x.t_start),
				  ms)) {
			double wall = (double)(x.t_end - x.t_start);

			rb_lat_percentiles(samples, x.n, out);
			out->ops_s = (double)x.ops / wall * 1e9;
			out->client_cpu = 100.0 * (double)x.cpu_ns / wall;
			out->target_cpu = 100.0 * (double)(tc1 - tc0) / wall;
		}
	}
	if (bp_rdma_direct_close(x.d))
		bench_die("%s: direct latency: close\n", BENCH_CMD);
	bp_rdma_destroy(x.r);
	free(x.buf);
}

/*
 * Run to completion against raw, busy-poll, interleaved: RB_RTC_RUNS pairs
 * of lat_ms / 4 each (at least 50 ms), the order alternating, so that the
 * machine's drift (on loopback tcp, p50 moves between two levels over
 * seconds) falls on both alike.
 */
static void rb_lat_rtc(const struct rb_opts *o, struct rb_target *t,
		       int64_t *samples, struct rb_prov_lat *pl)
{
	struct rb_opts q = *o;

	q.lat_ms = o->lat_ms / 4 < 50 ? 50 : o->lat_ms / 4;
	for (int i = 0; i < RB_RTC_RUNS; i++)
		for (int k = 0; k < 2; k++) {
			int v = (i & 1) ? 1 - k : k; /* 0 direct, 1 raw */
			struct rb_lat l;

			memset(&l, 0, sizeof(l));
			if (v == 0)
				rb_lat_direct(&q, t, BP_RDMA_CQ_BUSY, samples,
					      &l);
			else
				rb_lat_raw(&q, t, false, samples, &l);
			if (l.na)
				return;
			pl->rtc_p50[v][i] = l.p50;
			pl->rtc_p99[v][i] = l.p99;
		}
	pl->rtc_n = RB_RTC_RUNS;
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

	bp_pipeline_get_stats(pp.p, &s0);
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
		rc = bp_pipeline_submit(pp.p, &h, 1, 0, -1);
		if (rc != 1)
			bench_die("%s: bp_pipeline_submit: %s\n", BENCH_CMD,
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
	rb_pipe_verify(t, &pp, 1, &ops, 1, "paced");
	pp.samples = NULL;
	rb_pipe_close(&pp);
}

void rb_latency(const struct rb_opts *o, struct rb_target *t,
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
	rb_lat_direct(o, t, BP_RDMA_CQ_BUSY, samples, &pl->lat[RB_L_DBUSY]);
	rb_lat_direct(o, t, BP_RDMA_CQ_EVENT, samples, &pl->lat[RB_L_DEVENT]);
	rb_lat_rtc(o, t, samples, pl);
	fprintf(stderr, "%s: %s: idle CPU\n", BENCH_CMD, t->provider);
	for (int w = 0; w < RB_NIDLE; w++)
		rb_idle_pipe(o, t, waits[w], samples, &pl->idle[w]);
	pl->done = true;
	free(samples);
}
