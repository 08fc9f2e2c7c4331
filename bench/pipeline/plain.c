/* SPDX-License-Identifier: MIT */
/*
 * pipeline/plain.c - the plain variant of `bpbench pipeline`: what a good
 * engineer writes by hand for exactly this job, with no library, moving
 * the same jobs as the pipeline variant (the harness's pools, stamps,
 * stage work, sink checks and verification; harness.c).
 *
 *   P producers -> one lane each (plain_rings.h, single producer, the
 *   workers claim with one CAS per batch of up to B) -> W workers: the
 *   stage's work, then the whole batch into the worker's own SP/SC result
 *   ring -> one sink thread, round-robin over the result rings, the sink's
 *   checks (pb_sink).
 *
 * The ingress is per-producer lanes that the workers scan, not one shared
 * MPMC ring: a producer never contends with another producer (one release
 * store per batch, no CAS), and no thread ever waits for another thread's
 * half-finished step. A shared MPMC ring with one CAS per batch on each
 * side must publish and free per slot, so a consumer stops at the slots
 * of a producer that claimed them and lost its CPU, and a producer at
 * those of a slow reader (shared/RING-NOTES.md, point 1). A prototype of
 * it (per-slot sequence numbers, the same waits), interleaved with this
 * design over W = 1, 2, 4, 16 x B = 1, 8, 32, spin-sleep and busy-poll,
 * was slower in 26 of 36 cells, geometric mean of shared / lanes 0.90 and
 * 0.96 in two sweeps; it was ahead only at W=16, B=32 (1.34-1.39).
 *
 * Waiting (plain_wait.h): the same three strategies as the pipeline's wait
 * column, with the library's spin_ns and yields, and a futex word per
 * sleeper: an idle worker, the idle sink (woken by a worker's hand-off), a
 * producer on its full lane (by the worker's take that leaves it half
 * empty, plain_rings.h) and a worker on its full result ring (by the
 * sink's take that leaves it half empty). Under busy-poll
 * nobody sleeps and wakers skip the check.
 *
 * Idle workers are interchangeable, so a producer that publishes wakes
 * one parked worker, and only when no other wake-up is in flight (the
 * `waking` flag): the worker it woke clears the flag after its first take
 * and, if jobs are left behind, wakes the next one. Without the flag each
 * batch woke another worker before the first one even ran: at W=16 on 2
 * CPUs, a herd in slow motion that cost 10x in the sleeping modes. The
 * last producer out wakes them all.
 *
 * The jobs come back to their producers through the harness's free rings
 * (bp_ring, inside pb_sink and pb_take_free), exactly as in the pipeline
 * variant: that part is the benchmark's, the same on both sides. The
 * clock runs from the first producer's start to the sink's last job.
 * Besides pb_verify's checks (every job once: counts and pseq sums per
 * producer, every job back in its pool), every lane and result ring must
 * be empty at the end and the workers must have taken exactly what the
 * sink saw.
 */
#include "pipeline/experiments.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/plain_rings.h"

/* what a job's status says between its producer and the stage */
#define PL_PENDING (-EINPROGRESS)

struct pl_run;

struct pl_worker {
	struct pl_parker park; /* while it has nothing to do */
	struct pl_run *pl;
	struct pl_out *out; /* its result ring */
	pthread_t thread;
	unsigned next_lane;
	bool pass_on; /* woken by a producer: its first take passes on */
	uint64_t taken;
	uint64_t *head_cache; /* [P]: its copy of each lane's head */
	struct bp_job **batch;
};

struct pl_run {
	struct pb_run run; /* first: the producers find it as pr->run */
	struct pl_wait wait;
	bool wake;		   /* not busy-poll: wakers look for sleepers */
	struct pl_lane *lanes;	   /* [P] */
	struct pl_worker *workers; /* [W] */
	struct pl_parker sink_park;	    /* the idle sink */
	_Alignas(PL_LINE) atomic_uint idle; /* workers parked */
	atomic_uint waking; /* a wake-up of a worker in flight */
	_Alignas(PL_LINE) atomic_uint workers_left;
	pthread_t sink;
	uint64_t delivered;
	int64_t t_end;
};

static unsigned pl_pow2(unsigned n)
{
	unsigned c = 2;

	while (c < n)
		c <<= 1;
	return c;
}

/* ---- producers ----------------------------------------------------------- */

/* Claim and wake the first parked worker from worker 0 up (which keeps
 * the jobs on few, warm workers); false if none was parked. */
static bool pl_unpark_a_worker(struct pl_run *pl)
{
	for (unsigned i = 0; i < pl->run.W; i++)
		if (pl_try_unpark(&pl->workers[i].park))
			return true;
	return false;
}

static bool pl_ingress_ready(struct pl_run *pl)
{
	for (unsigned l = 0; l < pl->run.P; l++)
		if (pl_ready(&pl->lanes[l].x))
			return true;
	return false;
}

/*
 * After a publication: wake one parked worker, if one is parked and no
 * wake-up is in flight. Whoever sees `waking` set leaves its jobs to the
 * wake-up in flight; so whoever clears it (the woken worker in
 * pl_pass_on, or this function when it found nobody to wake) fences and
 * looks at the lanes again.
 */
static void pl_wake_a_worker(struct pl_run *pl)
{
	pl_fence();
	/* relaxed: ordered by the fence (a worker counts itself before its
	 * own fence; whoever clears waking fences after) */
	if (!atomic_load_explicit(&pl->idle, memory_order_relaxed) ||
	    atomic_load_explicit(&pl->waking, memory_order_relaxed) ||
	    atomic_exchange_explicit(&pl->waking, 1, memory_order_relaxed))
		return;
	if (pl_unpark_a_worker(pl))
		return;
	/* relaxed: ordered by the fence below */
	atomic_store_explicit(&pl->waking, 0, memory_order_relaxed);
	pl_fence();
	/* nobody parked now means everybody looks again before sleeping */
	if (pl_ingress_ready(pl))
		pl_unpark_a_worker(pl);
}

/* The end of the stream: every parked worker looks once more. */
static void pl_wake_all_workers(struct pl_run *pl)
{
	pl_fence();
	for (unsigned i = 0; i < pl->run.W; i++)
		pl_try_unpark(&pl->workers[i].park);
}

static void pl_submit(struct pl_run *pl, struct pl_lane *lane,
		      struct bp_job **jobs, unsigned n)
{
	while (n) {
		unsigned k = pl_lane_push(lane, jobs, n);

		if (!k) {
			pl_wait_until(&pl->wait, &lane->x.room, NULL, pl_can_go,
				      &lane->x);
			continue;
		}
		if (pl->wake)
			pl_wake_a_worker(pl);
		jobs += k;
		n -= k;
	}
}

static void *pl_producer_main(void *arg)
{
	struct pb_producer *pr = arg;
	struct pl_run *pl = (struct pl_run *)pr->run;
	struct pl_lane *lane = &pl->lanes[pr->id];
	unsigned B = pl->run.B;

	pthread_setname_np(pthread_self(), "pl-producer");
	pthread_barrier_wait(&pl->run.start);
	pr->t_start = bench_now_ns();
	pr->cpu_ns = bench_thread_cpu_ns();
	/* relaxed: stop is a time signal; the joins publish the results */
	while (!atomic_load_explicit(&pl->run.stop, memory_order_relaxed)) {
		if (!pb_take_free(pr, B))
			break;
		pb_stamp(pr, B);
		/* the stage sets OK: the sink's status check proves it ran */
		for (unsigned i = 0; i < B; i++)
			pr->batch[i]->status = PL_PENDING;
		pl_submit(pl, lane, pr->batch, B);
		pr->submitted += B;
		pr->held = 0;
	}
	/* acq_rel: the last one out has every producer's last head store
	 * before its wake (release: ours, acquire: the others') */
	if (atomic_fetch_sub_explicit(&pl->run.producers_left, 1,
				      memory_order_acq_rel) == 1)
		pl_wake_all_workers(pl);
	pr->cpu_ns = bench_thread_cpu_ns() - pr->cpu_ns;
	return NULL;
}

/* ---- workers ------------------------------------------------------------- */

/* Up to B jobs from the next lane that has some, round-robin. */
static unsigned pl_take(struct pl_worker *w)
{
	struct pl_run *pl = w->pl;
	unsigned P = pl->run.P, l = w->next_lane;

	for (unsigned i = 0; i < P; i++) {
		unsigned n = pl_lane_take(&pl->lanes[l], &w->head_cache[l],
					  w->batch, pl->run.B);

		if (n) {
			w->next_lane = l + 1 == P ? 0 : l + 1;
			if (pl->wake)
				pl_wake_producer(&pl->lanes[l].x);
			return n;
		}
		l = l + 1 == P ? 0 : l + 1;
	}
	return 0;
}

static bool pl_producers_done(struct pl_run *pl)
{
	/* acquire: pairs with the producers' acq_rel decrements: their
	 * last head stores are seen */
	return atomic_load_explicit(&pl->run.producers_left,
				    memory_order_acquire) == 0;
}

/* Idle worker: a lane with jobs, or the end of the stream. */
static bool pl_worker_ready(void *arg)
{
	struct pl_worker *w = arg;
	struct pl_run *pl = w->pl;

	return pl_ingress_ready(pl) || pl_producers_done(pl);
}

/* Nothing will come: every producer is out and every lane empty. */
static bool pl_ingress_ended(struct pl_run *pl)
{
	return pl_producers_done(pl) && !pl_ingress_ready(pl);
}

/* A woken worker got going: the next wake-up may go, now if jobs wait. */
static void pl_pass_on(struct pl_run *pl)
{
	/* relaxed: ordered by the fence below (the claim that woke us was
	 * made after waking was set: see pl_try_unpark) */
	atomic_store_explicit(&pl->waking, 0, memory_order_relaxed);
	/* pairs with pl_wake_a_worker's fence (Dekker): either a producer
	 * that saw waking set published before it, and we see its jobs
	 * below, or it sees waking clear */
	pl_fence();
	if (pl_ingress_ready(pl))
		pl_wake_a_worker(pl);
}

static void pl_hand_off(struct pl_worker *w, unsigned n)
{
	struct pl_run *pl = w->pl;
	struct bp_job **jobs = w->batch;

	while (n) {
		unsigned k = pl_out_push(w->out, jobs, n);

		if (!k) {
			pl_wait_until(&pl->wait, &w->out->x.room, NULL,
				      pl_can_go, &w->out->x);
			continue;
		}
		if (pl->wake)
			pl_unpark(&pl->sink_park);
		jobs += k;
		n -= k;
	}
}

static void *pl_worker_main(void *arg)
{
	struct pl_worker *w = arg;
	struct pl_run *pl = w->pl;

	pthread_setname_np(pthread_self(), "pl-worker");
	for (;;) {
		unsigned n = pl_take(w);

		if (w->pass_on) {
			w->pass_on = false;
			pl_pass_on(pl);
		}
		if (!n) {
			if (pl_ingress_ended(pl))
				break;
			w->pass_on =
				pl_wait_until(&pl->wait, &w->park, &pl->idle,
					      pl_worker_ready, w);
			continue;
		}
		pb_stage_work(&pl->run, w->batch, n);
		w->taken += n;
		pl_hand_off(w, n);
	}
	/* release: our last head store before the sink sees us gone;
	 * pairs with pl_workers_done's acquire */
	atomic_fetch_sub_explicit(&pl->workers_left, 1, memory_order_release);
	pl_unpark(&pl->sink_park);
	return NULL;
}

/* ---- the sink ------------------------------------------------------------ */

static bool pl_workers_done(struct pl_run *pl)
{
	/* acquire: pairs with the workers' release decrements */
	return atomic_load_explicit(&pl->workers_left, memory_order_acquire) ==
	       0;
}

static bool pl_results_ready(struct pl_run *pl)
{
	for (unsigned i = 0; i < pl->run.W; i++)
		if (pl_ready(&pl->workers[i].out->x))
			return true;
	return false;
}

/* Idle sink: a result ring with jobs, or every worker gone. */
static bool pl_sink_ready(void *arg)
{
	struct pl_run *pl = arg;

	return pl_results_ready(pl) || pl_workers_done(pl);
}

static void *pl_sink_main(void *arg)
{
	struct pl_run *pl = arg;
	struct bp_job *jobs[PB_SINK_CHUNK];
	unsigned W = pl->run.W;

	pthread_setname_np(pthread_self(), "pl-sink");
	for (;;) {
		bool any = false;

		for (unsigned i = 0; i < W; i++) {
			struct pl_out *o = pl->workers[i].out;
			unsigned n = pl_out_take(o, jobs, PB_SINK_CHUNK);

			if (!n)
				continue;
			any = true;
			if (pl->wake) {
				pl_fence(); /* after the take's store of tail */
				pl_wake_producer(&o->x);
			}
			pb_sink(&pl->run, jobs, n);
			pl->delivered += n;
		}
		if (any)
			continue;
		/* done once every worker is out and, after that, every
		 * result ring is empty */
		if (pl_workers_done(pl) && !pl_results_ready(pl))
			break;
		pl_wait_until(&pl->wait, &pl->sink_park, NULL, pl_sink_ready,
			      pl);
	}
	pl->t_end = bench_now_ns();
	return NULL;
}

/* ---- one run ------------------------------------------------------------- */

static void *pl_alloc(size_t size)
{
	size_t rounded = (size + PL_LINE - 1) / PL_LINE * PL_LINE;
	void *p = aligned_alloc(PL_LINE, rounded);

	if (!p)
		bench_die("bpbench pipeline: out of memory\n");
	memset(p, 0, rounded);
	return p;
}

/* cap: a power of two; wake: a blocked producer may sleep (plain_rings.h) */
static void pl_idx_init(struct pl_idx *x, unsigned cap, bool wake)
{
	x->cap = cap;
	x->mask = cap - 1;
	x->wake_at = wake ? cap / 2 : cap - 1;
}

static struct pl_run *pl_create(const struct pb_opts *o, unsigned P, unsigned W,
				unsigned B, int wait)
{
	struct pl_run *pl = pl_alloc(sizeof(*pl));
	struct bp_wait_policy pol;
	/* the library's defaults: ingress 4096 shared (here split over the
	 * lanes), egress 1024 per worker; both hold a whole batch */
	unsigned lane_cap = pl_pow2((o->ingress ? o->ingress : 4096) / P);
	unsigned out_cap = pl_pow2(o->egress ? o->egress : 1024);

	lane_cap = pl_pow2(lane_cap < B ? B : lane_cap);
	out_cap = pl_pow2(out_cap < B ? B : out_cap);
	pb_policy(&pol, wait); /* the same tuning as the library's waits */
	pl->wait.how = pol.strategy == BP_WAIT_BUSY_POLL    ? PL_BUSY_POLL
		       : pol.strategy == BP_WAIT_SPIN_SLEEP ? PL_SPIN_SLEEP
							    : PL_SLEEP;
	pl->wait.spin_ns = pol.spin_ns;
	pl->wait.yields = pol.yields;
	pl->wake = pl->wait.how != PL_BUSY_POLL;
	pl->lanes = pl_alloc(sizeof(*pl->lanes) * P);
	for (unsigned i = 0; i < P; i++) {
		pl_idx_init(&pl->lanes[i].x, lane_cap, pl->wake);
		pl->lanes[i].slots =
			bench_zalloc(sizeof(*pl->lanes[i].slots) * lane_cap);
	}
	pl->workers = pl_alloc(sizeof(*pl->workers) * W);
	for (unsigned i = 0; i < W; i++) {
		struct pl_worker *w = &pl->workers[i];

		w->pl = pl;
		w->next_lane = i % P; /* spread the workers over the lanes */
		w->head_cache = bench_zalloc(sizeof(*w->head_cache) * P);
		w->batch = bench_zalloc(sizeof(*w->batch) * B);
		w->out = pl_alloc(sizeof(*w->out));
		pl_idx_init(&w->out->x, out_cap, pl->wake);
		w->out->slots = bench_zalloc(sizeof(*w->out->slots) * out_cap);
	}
	atomic_init(&pl->workers_left, W);
	return pl;
}

static void pl_destroy(struct pl_run *pl)
{
	for (unsigned i = 0; i < pl->run.W; i++) {
		free(pl->workers[i].head_cache);
		free(pl->workers[i].batch);
		free(pl->workers[i].out->slots);
		free(pl->workers[i].out);
	}
	for (unsigned i = 0; i < pl->run.P; i++)
		free(pl->lanes[i].slots);
	free(pl->workers);
	free(pl->lanes);
	free(pl);
}

/* The plain variant's own books, after every thread is joined. */
static void pl_check(struct pl_run *pl)
{
	uint64_t taken = 0, submitted = 0;
	int bad = 0;

	for (unsigned i = 0; i < pl->run.P; i++) {
		/* relaxed here and below: the joins ordered everything */
		uint64_t h = atomic_load_explicit(&pl->lanes[i].x.head,
						  memory_order_relaxed);
		uint64_t t = atomic_load_explicit(&pl->lanes[i].x.tail,
						  memory_order_relaxed);

		submitted += pl->run.prod[i].submitted;
		if (h != t) {
			fprintf(stderr,
				"bpbench pipeline: VERIFY FAILED: plain: lane "
				"%u still holds %" PRIu64 " jobs\n",
				i, h - t);
			bad++;
		}
	}
	for (unsigned i = 0; i < pl->run.W; i++) {
		struct pl_out *o = pl->workers[i].out;

		taken += pl->workers[i].taken;
		if (atomic_load_explicit(&o->x.head, memory_order_relaxed) !=
		    atomic_load_explicit(&o->x.tail, memory_order_relaxed)) {
			fprintf(stderr,
				"bpbench pipeline: VERIFY FAILED: plain: the "
				"result ring of worker %u is not empty\n",
				i);
			bad++;
		}
	}
	if (taken != submitted || pl->delivered != submitted) {
		fprintf(stderr,
			"bpbench pipeline: VERIFY FAILED: plain P=%u W=%u "
			"B=%u %s: producers submitted %" PRIu64
			", workers took %" PRIu64 ", the sink got %" PRIu64
			"\n",
			pl->run.P, pl->run.W, pl->run.B,
			pb_waits[pl->run.wait].name, submitted, taken,
			pl->delivered);
		bad++;
	}
	if (bad)
		exit(1);
}

/* One throughput run of the plain variant: M jobs/s and CPU per job (as
 * the pipeline's, over the run: until every thread is joined). */
struct pb_result pb_plain_once(const struct pb_opts *o,
			       struct pb_producer *prod, unsigned P, unsigned W,
			       unsigned B, int wait, unsigned ms)
{
	struct pl_run *pl = pl_create(o, P, W, B, wait);
	struct pb_run *run = &pl->run;
	unsigned nc = (unsigned)o->a.ncpus;
	struct pb_result res = {NAN, NAN, NAN, NAN, NAN};
	int64_t t0, c0, c1, prod_cpu = 0;

	pb_run_init(run, o, prod, P);
	run->W = W;
	run->B = B;
	run->wait = (unsigned)wait;
	run->mode = PB_THROUGHPUT;
	run->prod_wait = (unsigned)wait; /* one strategy for every thread */
	run->variant = "plain";
	pb_prepare_producers(run);
	/* pinned as pb_pipeline_up pins: producers, workers, then the sink */
	for (unsigned i = 0; i < W; i++)
		pb_spawn(&pl->workers[i].thread, pl_worker_main,
			 &pl->workers[i],
			 o->pin ? o->a.cpus[(P + i) % nc] : -1);
	pb_spawn(&pl->sink, pl_sink_main, pl,
		 o->pin ? o->a.cpus[(P + W) % nc] : -1);
	for (unsigned i = 0; i < P; i++)
		pb_spawn(&prod[i].thread, pl_producer_main, &prod[i],
			 o->pin ? o->a.cpus[i % nc] : -1);
	pthread_barrier_wait(&run->start);
	t0 = bench_now_ns();
	c0 = bench_process_cpu_ns();
	bench_sleep_ns((int64_t)ms * 1000000);
	/* relaxed: a time signal; the joins publish the results */
	atomic_store_explicit(&run->stop, 1, memory_order_relaxed);
	for (unsigned i = 0; i < P; i++) {
		pthread_join(prod[i].thread, NULL);
		/* the clock starts with the first thread to run */
		if (prod[i].t_start < t0)
			t0 = prod[i].t_start;
		prod_cpu += prod[i].cpu_ns;
	}
	for (unsigned i = 0; i < W; i++)
		pthread_join(pl->workers[i].thread, NULL);
	pthread_join(pl->sink, NULL);
	c1 = bench_process_cpu_ns();
	pl_check(pl);
	pb_verify(run, NULL);
	res.mjobs = (double)pl->delivered * 1e3 / (double)(pl->t_end - t0);
	if (pl->delivered) {
		res.cpu_ns = (double)(c1 - c0) / (double)pl->delivered;
		res.prod_cpu_ns = (double)prod_cpu / (double)pl->delivered;
	}
	pb_run_fini(run);
	pl_destroy(pl);
	return res;
}
