/* SPDX-License-Identifier: MIT */
/*
 * pipeline_bench.c - `bpbench pipeline`: end-to-end throughput and latency
 * through producers -> workers -> sink (bp_pipeline).
 *
 * Throughput sweep: P producer threads take B free jobs from their pool,
 * stamp them and submit them with one blocking bp_submit, for a fixed time;
 * then they stop and the last one out calls bp_pipeline_drain (not the main
 * thread: on an oversubscribed machine it may wait for a CPU, and the time
 * would include that). Throughput = jobs delivered / (first producer start
 * .. drain returned). Points: workers x B x wait strategy (one strategy for
 * worker_wait, sink_wait, producer_wait and the producers' free-job wait),
 * unordered; the ordered variant at 2 workers for every B; jobs that each do
 * --work-ns of arithmetic; and the ring reference: one producer and one
 * consumer thread over a bp_ring MPMC of capacity 4096, burst B, pinned to
 * two CPUs (ring_bench's batchpipe 1x1 point, same retry policy).
 *
 * Interleaving: for each run index every point runs once, in a freshly
 * shuffled order. Tables show medians over runs; ratios are medians of the
 * per-run ratios, whose two sides come from the same run index.
 *
 * Jobs are allocated and touched once per producer at start (page faults on
 * this VM cost more than the pipeline), then recycled: the sink gives each
 * delivered job back to its producer through a single-producer,
 * single-consumer bp_ring (the producer's free ring). Nothing is allocated
 * per run but the pipeline itself.
 *
 * Verification, every run: the sink checks every job (status OK, payload =
 * mix(producer, pseq), result = what the stage had to compute; ordered: seq
 * strictly +1 and each producer's pseq strictly +1) and counts and sums pseq
 * per producer. Afterwards: stats submitted == ok + failed + cancelled ==
 * what the producers submitted, nothing failed or cancelled, per-producer
 * counts and sums match, and every job is back in its pool. Any failure is
 * fatal (exit 1).
 *
 * Latency. The sweep's p50_us / p99_us are bp_pipeline_stats' lat_p50_ns /
 * lat_p99_ns of that run (submit -> sink, bucket upper bounds, within 25 %);
 * at saturation they measure queueing in the bounded rings, not speed. The
 * low-load and wake-up latencies are the benchmark's own, exact: clock read
 * just before bp_submit -> clock read on entry to the sink callback, one way
 * (both are CLOCK_MONOTONIC, one clock for all CPUs). The pipeline's own
 * percentiles of those runs are printed beside them.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <batchpipe/error.h>
#include <batchpipe/pipeline.h>
#include <batchpipe/ring.h>

#include "bpbench.h"

#define BENCH_CMD "bpbench pipeline"
#include "queues.h"

#define PB_MAX_WLIST	 8
#define PB_MAX_BATCHES	 8
#define PB_MAX_RUNS	 100
#define PB_MAX_PRODUCERS 64
#define PB_MAX_POINTS	 256
#define PB_NWAITS	 3
#define PB_SINK_CHUNK	 256
/* a blocked producer re-checks the stop flag this often */
#define PB_FREE_WAIT_NS 1000000
/* a job that has not come back after this long is lost: fatal */
#define PB_LOST_NS     INT64_C(5000000000)
#define PB_MAX_SAMPLES (1u << 20)
/* the headline point */
#define PB_HEAD_W      2
#define PB_HEAD_B      32
#define PB_HEAD_W_MANY 16
#define PB_HEAD_WAIT   1 /* index of spin-sleep in pb_waits */

static const struct {
	const char *name;
	enum bp_wait_strategy strategy;
} pb_waits[PB_NWAITS] = {
	{"busy-poll", BP_WAIT_BUSY_POLL},
	{"spin-sleep", BP_WAIT_SPIN_SLEEP},
	{"sleep", BP_WAIT_SLEEP},
};

struct pb_opts {
	struct bench_args a; /* runs, ms, seed, cpus, output */
	unsigned producers, pool, work_ns, lat_ms, wake_samples;
	unsigned wake_gap_us, idle_ms;
	unsigned inflight, ingress, egress; /* 0: the library's default */
	unsigned workers[PB_MAX_WLIST];
	int nworkers;
	unsigned batches[PB_MAX_BATCHES];
	int nbatches;
	int waits[PB_NWAITS];
	int nwaits;
	int pin, latency, sweep_only;
	int lat_set, wake_set, idle_set; /* given: --quick leaves them */
};

/* ---- jobs ---------------------------------------------------------------- */

/*
 * The benchmark's fields come first so that they and the header fields the
 * pipeline touches (seq, submit_ns, status) share one cache line: a job
 * costs one line, as in a well-laid-out application.
 */
struct pb_job {
	uint64_t payload;  /* pb_mix(producer, pseq), set by the producer */
	uint64_t result;   /* set by the stage, checked by the sink */
	uint64_t pseq;	   /* the producer's submission count */
	uint32_t producer; /* index of the producer (and its pool) */
	uint32_t pad;
	struct bp_job hdr;
	int64_t seen_ns; /* latency runs: the sink callback's clock */
} __attribute__((aligned(BENCH_CACHELINE)));

_Static_assert(offsetof(struct pb_job, hdr) +
			       offsetof(struct bp_job, op_context) <=
		       BENCH_CACHELINE,
	       "the header fields the pipeline writes share the first line");

static inline struct pb_job *pb_job_of(struct bp_job *h)
{
	return (struct pb_job *)((char *)h - offsetof(struct pb_job, hdr));
}

static inline uint64_t pb_mix(unsigned producer, uint64_t pseq)
{
	/*
	 * One multiply by an odd constant: a bijection of (pseq, producer),
	 * so a payload moved to another job, or a pseq or producer changed,
	 * no longer matches. Cheap, because the sink checks every job.
	 */
	return ((pseq << 16) ^ producer) * UINT64_C(0x9e3779b97f4a7c15);
}

/* What a trivial stage writes: proves the stage saw the job. */
#define PB_TRIVIAL_MARK UINT64_C(0x5a5a5a5a5a5a5a5a)

/* The CPU work of --work-ns: an LCG iterated `iters` times. */
#define PB_LCG_A UINT64_C(6364136223846793005)
#define PB_LCG_C UINT64_C(1442695040888963407)

static uint64_t pb_spin(uint64_t x, uint64_t iters)
{
	for (uint64_t i = 0; i < iters; i++) {
		x = x * PB_LCG_A + PB_LCG_C;
		/* opaque to the compiler: no closed form, no skipped work */
		__asm__("" : "+r"(x));
	}
	return x;
}

/* pb_spin's result in O(log iters) (LCG jump-ahead): the sink's check. */
static uint64_t pb_spin_jump(uint64_t x, uint64_t iters)
{
	uint64_t acc_mult = 1, acc_plus = 0, mult = PB_LCG_A, plus = PB_LCG_C;

	while (iters) {
		if (iters & 1) {
			acc_mult *= mult;
			acc_plus = acc_plus * mult + plus;
		}
		plus = (mult + 1) * plus;
		mult *= mult;
		iters >>= 1;
	}
	return acc_mult * x + acc_plus;
}

/* Sum of 0..n-1 modulo 2^64. */
static uint64_t pb_seq_sum(uint64_t n)
{
	if (n == 0)
		return 0;
	return n % 2 ? n * ((n - 1) / 2) : (n / 2) * (n - 1);
}

/* ---- producers' pools ---------------------------------------------------- */

struct pb_run;

struct pb_producer {
	struct pb_job *jobs; /* the pool, touched at creation */
	unsigned njobs;
	struct bp_ring *free; /* SP: the sink; SC: this producer */
	struct bp_job **batch;
	unsigned batch_cap;
	/* per run */
	struct pb_run *run;
	unsigned id;
	pthread_t thread;
	unsigned held; /* free jobs taken and not submitted: batch[0..held) */
	uint64_t submitted;
	int64_t t_start;
	int err;
	/* latency runs */
	int64_t *samples;
	unsigned nsamples, max_samples;
} __attribute__((aligned(BENCH_CACHELINE)));

static void pb_pool_init(struct pb_producer *pr, unsigned id, unsigned njobs,
			 unsigned batch_cap)
{
	int rc;

	memset(pr, 0, sizeof(*pr));
	pr->id = id;
	pr->njobs = njobs;
	/* bench_zalloc writes every byte: no page fault later */
	pr->jobs = bench_zalloc(sizeof(*pr->jobs) * njobs);
	pr->batch_cap = batch_cap;
	pr->batch = bench_zalloc(sizeof(*pr->batch) * batch_cap);
	rc = bp_ring_create(njobs < 2 ? 2 : njobs, BP_RING_SP | BP_RING_SC,
			    &pr->free);
	if (rc)
		bench_die("bpbench pipeline: bp_ring_create(%u): %s\n", njobs,
			  bp_strerror(rc));
	for (unsigned i = 0; i < njobs; i++) {
		struct bp_job *h = &pr->jobs[i].hdr;

		pr->jobs[i].producer = id;
		if (bp_ring_enqueue_burst(pr->free, (void **)&h, 1, NULL) != 1)
			bench_die("bpbench pipeline: cannot fill the pool\n");
	}
}

static void pb_pool_fini(struct pb_producer *pr)
{
	bp_ring_destroy(pr->free);
	free(pr->jobs);
	free(pr->batch);
	free(pr->samples);
}

/* ---- one pipeline run ---------------------------------------------------- */

struct pb_sink_state {
	uint64_t *count, *sum; /* [P] jobs and sum of pseq per producer */
	uint64_t *next_pseq;   /* [P] ordered: the pseq expected next */
	uint64_t next_seq;     /* ordered: the seq expected next */
	bool seq_started;
	uint64_t bad;
	struct bp_job **ret; /* [P][PB_SINK_CHUNK] jobs going back */
	unsigned *nret;	     /* [P] */
};

enum pb_mode { PB_THROUGHPUT, PB_LATENCY };

struct pb_run {
	const struct pb_opts *o;
	struct bp_pipeline *p;
	struct pb_producer *prod;
	unsigned P, W, B, wait;
	bool ordered;
	uint64_t iters; /* per job: 0 = trivial */
	enum pb_mode mode;
	int64_t lat_until_ns; /* latency: stop sampling after this */
	int64_t gap_ns;	      /* latency: idle time before each job */
	unsigned prod_wait;   /* how producers wait for free jobs */
	pthread_barrier_t start;
	struct pb_sink_state sink;
	atomic_int stop __attribute__((aligned(BENCH_CACHELINE)));
	atomic_uint producers_left;
	int64_t t_drain_end;
};

/* The stage's work on a batch, without the pipeline around it. */
static inline void pb_stage_work(const struct pb_run *run, struct bp_job **jobs,
				 unsigned n)
{
	uint64_t iters = run->iters;

	/* fetch the whole batch's lines for writing at once (see pb_stamp) */
	for (unsigned i = 0; i < n; i++)
		__builtin_prefetch(jobs[i], 1, 3);
	for (unsigned i = 0; i < n; i++) {
		struct pb_job *j = pb_job_of(jobs[i]);

		j->result = iters ? pb_spin(j->payload, iters)
				  : j->payload ^ PB_TRIVIAL_MARK;
		jobs[i]->status = BP_JOB_OK;
	}
}

static void pb_stage_process(void *state, struct bp_worker *w,
			     struct bp_job **jobs, unsigned n)
{
	(void)state;
	pb_stage_work(bp_worker_stage_ctx(w), jobs, n);
	bp_worker_complete(w, jobs, n);
}

static const struct bp_stage pb_stage = {
	.name = "bpbench",
	.process = pb_stage_process,
};

static void pb_sink_bad(struct pb_run *run, const struct pb_job *j,
			const char *why)
{
	if (run->sink.bad++)
		return; /* the first one tells the story */
	fprintf(stderr,
		"bpbench pipeline: VERIFY FAILED: P=%u W=%u B=%u %s%s: sink "
		"got job %p (producer %u, pseq %" PRIu64 ", seq %" PRIu64
		", status %d): %s\n",
		run->P, run->W, run->B, pb_waits[run->wait].name,
		run->ordered ? " ordered" : "", (const void *)j, j->producer,
		j->pseq, j->hdr.seq, j->hdr.status, why);
}

/* Check every job, count it, and give it back to its producer's pool. */
static void pb_sink(void *ctx, struct bp_job **jobs, unsigned n)
{
	struct pb_run *run = ctx;
	struct pb_sink_state *s = &run->sink;
	int64_t now = run->mode == PB_LATENCY ? bench_now_ns() : 0;
	unsigned P = run->P;

	for (unsigned base = 0; base < n; base += PB_SINK_CHUNK) {
		unsigned end =
			n - base < PB_SINK_CHUNK ? n : base + PB_SINK_CHUNK;

		for (unsigned i = base; i < end; i++) {
			struct pb_job *j = pb_job_of(jobs[i]);
			unsigned pid = j->producer;
			uint64_t want;

			if (pid >= P) {
				pb_sink_bad(run, j, "no such producer");
				continue; /* not ours: do not recycle it */
			}
			want = run->iters ? pb_spin_jump(j->payload, run->iters)
					  : j->payload ^ PB_TRIVIAL_MARK;
			if (j->hdr.status != BP_JOB_OK)
				pb_sink_bad(run, j, "status not OK");
			else if (j->payload != pb_mix(pid, j->pseq))
				pb_sink_bad(run, j, "payload corrupted");
			else if (j->result != want)
				pb_sink_bad(run, j, "wrong stage result");
			if (run->ordered) {
				if (s->seq_started && j->hdr.seq != s->next_seq)
					pb_sink_bad(run, j, "seq not +1");
				s->next_seq = j->hdr.seq + 1;
				s->seq_started = true;
				if (j->pseq != s->next_pseq[pid])
					pb_sink_bad(run, j,
						    "producer's pseq not +1");
				s->next_pseq[pid] = j->pseq + 1;
			}
			s->count[pid]++;
			s->sum[pid] += j->pseq;
			if (now) /* latency runs only: a second cache line */
				j->seen_ns = now;
			s->ret[pid * PB_SINK_CHUNK + s->nret[pid]++] = jobs[i];
		}
		for (unsigned p = 0; p < P; p++) {
			int k;

			if (!s->nret[p])
				continue;
			/* the free ring holds the whole pool: never full */
			k = bp_ring_enqueue_burst(
				run->prod[p].free,
				(void **)&s->ret[p * PB_SINK_CHUNK], s->nret[p],
				NULL);
			if (k != (int)s->nret[p])
				bench_die("bpbench pipeline: free ring of "
					  "producer %u refused %u jobs (%d)\n",
					  p, s->nret[p], k);
			s->nret[p] = 0;
		}
	}
}

/* Take free jobs until batch[0..want) is full; false if stopped first. */
static bool pb_take_free(struct pb_producer *pr, unsigned want)
{
	struct pb_run *run = pr->run;
	int64_t t_wait = 0;

	while (pr->held < want) {
		int k = bp_ring_dequeue_burst_wait(
			pr->free, (void **)pr->batch + pr->held,
			want - pr->held, PB_FREE_WAIT_NS);

		if (k > 0) {
			pr->held += (unsigned)k;
			t_wait = 0;
			continue;
		}
		if (k != -ETIMEDOUT && k != -EINTR) {
			pr->err = k;
			return false;
		}
		if (run->mode == PB_THROUGHPUT &&
		    atomic_load_explicit(&run->stop, memory_order_relaxed))
			return false;
		if (run->mode == PB_LATENCY) {
			/* one job in flight: it must come back */
			int64_t now = bench_now_ns();

			if (!t_wait)
				t_wait = now;
			else if (now - t_wait > PB_LOST_NS)
				bench_die("bpbench pipeline: VERIFY FAILED: "
					  "the latency job did not come back "
					  "in 5 s\n");
		}
	}
	return true;
}

static void pb_stamp(struct pb_producer *pr, unsigned n)
{
	/*
	 * The jobs' lines were last used on the sink's core: ask for all of
	 * them, for writing, before the first store waits for one.
	 */
	for (unsigned i = 0; i < n; i++)
		__builtin_prefetch(pr->batch[i], 1, 3);
	for (unsigned i = 0; i < n; i++) {
		struct pb_job *j = pb_job_of(pr->batch[i]);

		j->pseq = pr->submitted + i;
		j->payload = pb_mix(pr->id, j->pseq);
	}
}

static void pb_submit_held(struct pb_producer *pr)
{
	int rc = bp_submit(pr->run->p, pr->batch, pr->held, 0, -1);

	if (rc != (int)pr->held)
		bench_die("bpbench pipeline: bp_submit(%u) returned %d (%s)\n",
			  pr->held, rc, rc < 0 ? bp_strerror(rc) : "short");
	pr->submitted += pr->held;
	pr->held = 0;
}

static void pb_last_out(struct pb_run *run)
{
	/*
	 * The last producer out drains; acq_rel collects every producer's
	 * submissions before it (they are complete anyway: bp_submit returned).
	 */
	if (atomic_fetch_sub_explicit(&run->producers_left, 1,
				      memory_order_acq_rel) == 1) {
		bp_pipeline_drain(run->p);
		run->t_drain_end = bench_now_ns();
	}
}

static void *pb_producer_main(void *arg)
{
	struct pb_producer *pr = arg;
	struct pb_run *run = pr->run;
	unsigned B = run->B;

	pthread_setname_np(pthread_self(), "pb-producer");
	pthread_barrier_wait(&run->start);
	pr->t_start = bench_now_ns();
	/* relaxed: stop is a time signal; the joins publish the results */
	while (!atomic_load_explicit(&run->stop, memory_order_relaxed)) {
		if (!pb_take_free(pr, B))
			break;
		pb_stamp(pr, B);
		pb_submit_held(pr);
	}
	pb_last_out(run);
	return NULL;
}

/*
 * Latency: one job at a time. Take the job back from the free ring (the sink
 * put it there after stamping seen_ns), record seen - sent, optionally idle,
 * submit it again.
 */
static void *pb_latency_main(void *arg)
{
	struct pb_producer *pr = arg;
	struct pb_run *run = pr->run;
	int64_t sent = -1;

	pthread_barrier_wait(&run->start);
	pr->t_start = bench_now_ns();
	for (;;) {
		if (!pb_take_free(pr, 1))
			break;
		if (sent >= 0)
			pr->samples[pr->nsamples++] =
				pb_job_of(pr->batch[0])->seen_ns - sent;
		if (pr->nsamples >= pr->max_samples ||
		    bench_now_ns() >= run->lat_until_ns)
			break;
		if (run->gap_ns)
			bench_sleep_ns(run->gap_ns);
		pb_stamp(pr, 1);
		sent = bench_now_ns();
		pb_submit_held(pr);
	}
	pb_last_out(run);
	return NULL;
}

static void pb_spawn(pthread_t *t, void *(*fn)(void *), void *arg, int cpu)
{
	pthread_attr_t attr;
	int rc;

	pthread_attr_init(&attr);
	if (cpu >= 0) {
		rc = bench_attr_pin(&attr, cpu);
		if (rc)
			bench_die("bpbench pipeline: cannot pin to CPU %d: "
				  "%s\n",
				  cpu, strerror(rc));
	}
	rc = pthread_create(t, &attr, fn, arg);
	if (rc)
		bench_die("bpbench pipeline: pthread_create: %s\n",
			  strerror(rc));
	pthread_attr_destroy(&attr);
}

static void pb_log(void *ctx, enum bp_log_level level, const char *msg)
{
	fprintf(stderr, "bpbench pipeline: batchpipe says: %s\n", msg);
}

/* spin_ns and yields of every spin-sleep policy (-1: the default) */
static int pb_spin_ns = -1, pb_yields = -1;

static void pb_policy(struct bp_wait_policy *pol, int wait)
{
	bp_wait_policy_init(pol);
	pol->strategy = pb_waits[wait].strategy;
	if (pb_spin_ns >= 0)
		pol->spin_ns = (uint32_t)pb_spin_ns;
	if (pb_yields >= 0)
		pol->yields = (uint32_t)pb_yields;
}

/* Build and start a pipeline for *run (config copied: cpus may be local). */
static void pb_pipeline_up(struct pb_run *run)
{
	const struct pb_opts *o = run->o;
	struct bp_pipeline_config c;
	int cpus[BENCH_MAX_CPUS], rc;

	bp_pipeline_config_init(&c);
	c.workers = run->W;
	c.max_batch = run->B;
	if (o->inflight)
		c.max_inflight = o->inflight;
	if (o->ingress)
		c.ingress_capacity = o->ingress;
	if (o->egress)
		c.egress_capacity = o->egress;
	if (c.max_inflight < run->B)
		c.max_inflight = run->B;
	c.ordered = run->ordered;
	pb_policy(&c.worker_wait, (int)run->wait);
	pb_policy(&c.sink_wait, (int)run->wait);
	pb_policy(&c.producer_wait, (int)run->wait);
	if (o->pin) {
		/* producers first, then workers, then the sink, round-robin */
		for (int i = 0; i < o->a.ncpus; i++)
			cpus[i] = o->a.cpus[(run->P + (unsigned)i) %
					    (unsigned)o->a.ncpus];
		c.worker_cpus = cpus;
		c.n_worker_cpus = (unsigned)o->a.ncpus;
		c.sink_cpu =
			o->a.cpus[(run->P + run->W) % (unsigned)o->a.ncpus];
	}
	c.stage = &pb_stage;
	c.stage_ctx = run;
	c.sink = pb_sink;
	c.sink_ctx = run;
	c.log = pb_log;
	rc = bp_pipeline_create(&c, &run->p);
	if (rc)
		bench_die("bpbench pipeline: bp_pipeline_create: %s\n",
			  bp_strerror(rc));
	rc = bp_pipeline_start(run->p);
	if (rc)
		bench_die("bpbench pipeline: bp_pipeline_start: %s\n",
			  bp_strerror(rc));
}

/* Jobs checked by every pb_verify so far (reported at the end). */
static uint64_t pb_jobs_verified;

/*
 * After a run: every job accounted for, and every job back in its pool.
 * st: the pipeline's statistics, NULL for a run without a pipeline.
 */
static void pb_verify(struct pb_run *run, const struct bp_pipeline_stats *st)
{
	struct pb_sink_state *s = &run->sink;
	uint64_t want_total = 0, bad = s->bad;
	char what[96];

	if (st)
		snprintf(what, sizeof(what), "P=%u W=%u B=%u %s%s%s", run->P,
			 run->W, run->B, pb_waits[run->wait].name,
			 run->ordered ? " ordered" : "",
			 run->iters ? " work" : "");
	else
		snprintf(what, sizeof(what), "alone B=%u", run->B);
	for (unsigned p = 0; p < run->P; p++) {
		struct pb_producer *pr = &run->prod[p];

		if (pr->err)
			bench_die("bpbench pipeline: %s: producer %u: free "
				  "ring wait failed: %s\n",
				  what, p, bp_strerror(pr->err));
		want_total += pr->submitted;
		if (s->count[p] != pr->submitted ||
		    s->sum[p] != pb_seq_sum(pr->submitted)) {
			fprintf(stderr,
				"bpbench pipeline: VERIFY FAILED: %s: producer "
				"%u submitted %" PRIu64
				" jobs (pseq sum %" PRIu64
				"), the sink saw %" PRIu64 " (sum %" PRIu64
				")\n",
				what, p, pr->submitted,
				pb_seq_sum(pr->submitted), s->count[p],
				s->sum[p]);
			bad++;
		}
		/* jobs taken but not submitted go back by hand: the sink,
		 * the free ring's only producer, has been joined */
		if (pr->held &&
		    bp_ring_enqueue_burst(pr->free, (void **)pr->batch,
					  pr->held, NULL) != (int)pr->held)
			bench_die("bpbench pipeline: cannot return held "
				  "jobs\n");
		pr->held = 0;
		if (bp_ring_count(pr->free) != pr->njobs) {
			fprintf(stderr,
				"bpbench pipeline: VERIFY FAILED: %s: producer "
				"%u has %u of its %u jobs back\n",
				what, p, bp_ring_count(pr->free), pr->njobs);
			bad++;
		}
	}
	if (st &&
	    (st->submitted != st->ok + st->failed + st->cancelled ||
	     st->submitted != want_total || st->failed || st->cancelled)) {
		fprintf(stderr,
			"bpbench pipeline: VERIFY FAILED: %s: stats submitted "
			"%" PRIu64 ", ok %" PRIu64 ", failed %" PRIu64
			", cancelled %" PRIu64 "; producers submitted %" PRIu64
			"\n",
			what, st->submitted, st->ok, st->failed, st->cancelled,
			want_total);
		bad++;
	}
	if (bad)
		exit(1);
	pb_jobs_verified += want_total;
}

static void pb_run_init(struct pb_run *run, const struct pb_opts *o,
			struct pb_producer *prod, unsigned P)
{
	struct pb_sink_state *s = &run->sink;

	memset(run, 0, sizeof(*run));
	run->o = o;
	run->prod = prod;
	run->P = P;
	atomic_init(&run->stop, 0);
	atomic_init(&run->producers_left, P);
	s->count = bench_zalloc(sizeof(*s->count) * P);
	s->sum = bench_zalloc(sizeof(*s->sum) * P);
	s->next_pseq = bench_zalloc(sizeof(*s->next_pseq) * P);
	s->nret = bench_zalloc(sizeof(*s->nret) * P);
	s->ret = bench_zalloc(sizeof(*s->ret) * P * PB_SINK_CHUNK);
	pthread_barrier_init(&run->start, NULL, P + 1);
}

static void pb_run_fini(struct pb_run *run)
{
	free(run->sink.count);
	free(run->sink.sum);
	free(run->sink.next_pseq);
	free(run->sink.nret);
	free(run->sink.ret);
	pthread_barrier_destroy(&run->start);
}

static void pb_prepare_producers(struct pb_run *run)
{
	struct bp_wait_policy pol;

	for (unsigned i = 0; i < run->P; i++) {
		struct pb_producer *pr = &run->prod[i];

		pr->run = run;
		pr->held = 0;
		pr->submitted = 0;
		pr->err = 0;
		pr->nsamples = 0;
		pb_policy(&pol, (int)run->prod_wait);
		bp_ring_set_wait_policy(pr->free, &pol);
	}
}

struct pb_result {
	double mjobs, p50_us, p99_us;
};

/* One throughput run of one point. */
static struct pb_result pb_run_once(const struct pb_opts *o,
				    struct pb_producer *prod, unsigned P,
				    unsigned W, unsigned B, int wait,
				    bool ordered, uint64_t iters, unsigned ms)
{
	struct pb_run run;
	struct bp_pipeline_stats st;
	struct pb_result res;
	int64_t t0;

	pb_run_init(&run, o, prod, P);
	run.W = W;
	run.B = B;
	run.wait = (unsigned)wait;
	run.ordered = ordered;
	run.iters = iters;
	run.mode = PB_THROUGHPUT;
	run.prod_wait = (unsigned)wait; /* one strategy for every thread */
	pb_pipeline_up(&run);
	pb_prepare_producers(&run);
	for (unsigned i = 0; i < P; i++)
		pb_spawn(&prod[i].thread, pb_producer_main, &prod[i],
			 o->pin ? o->a.cpus[i % (unsigned)o->a.ncpus] : -1);
	pthread_barrier_wait(&run.start);
	t0 = bench_now_ns();
	bench_sleep_ns((int64_t)ms * 1000000);
	atomic_store_explicit(&run.stop, 1, memory_order_relaxed);
	for (unsigned i = 0; i < P; i++) {
		pthread_join(prod[i].thread, NULL);
		/* the clock starts with the first thread to run */
		if (prod[i].t_start < t0)
			t0 = prod[i].t_start;
	}
	bp_pipeline_stats(run.p, &st);
	pb_verify(&run, &st);
	bp_pipeline_destroy(run.p);
	pb_run_fini(&run);
	res.mjobs = (double)st.ok * 1e3 / (double)(run.t_drain_end - t0);
	res.p50_us = (double)st.lat_p50_ns / 1e3;
	res.p99_us = (double)st.lat_p99_ns / 1e3;
	return res;
}

/*
 * The benchmark's own work per job with no pipeline: one thread takes B
 * jobs from its pool, stamps them, runs the stage's work on them and hands
 * them to the sink callback, which checks them and returns them to the
 * pool. What the pipeline adds on top (three threads, rings, stamps,
 * statistics, the jobs' trips between cores) is the difference.
 */
static double pb_alone_once(const struct pb_opts *o, struct pb_producer *prod,
			    unsigned B, unsigned ms)
{
	struct pb_run run;
	struct pb_producer *pr = &prod[0];
	int64_t t0, t1, end;

	pb_run_init(&run, o, prod, 1);
	run.B = B;
	run.mode = PB_THROUGHPUT;
	pb_prepare_producers(&run);
	t0 = bench_now_ns();
	end = t0 + (int64_t)ms * 1000000;
	do {
		for (int i = 0; i < 64; i++) {
			if (!pb_take_free(pr, B))
				bench_die("bpbench pipeline: alone: the pool "
					  "ran dry\n");
			pb_stamp(pr, B);
			pb_stage_work(&run, pr->batch, B);
			pb_sink(&run, pr->batch, B);
			pr->submitted += B;
			pr->held = 0;
		}
		t1 = bench_now_ns();
	} while (t1 < end);
	pb_verify(&run, NULL);
	pb_run_fini(&run);
	return (double)pr->submitted * 1e3 / (double)(t1 - t0);
}

/* ---- latency, wake-up, idle CPU, hand-off -------------------------------- */

static int pb_cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted v[0..n). */
static double pb_pct(const int64_t *v, unsigned n, double q)
{
	size_t i;

	if (n == 0)
		return NAN;
	i = (size_t)ceil(q * n);
	i = i ? i - 1 : 0;
	return (double)v[i < n ? i : n - 1];
}

struct pb_lat_result {
	double p50_us, p99_us;	     /* benchmark: submit call -> sink */
	double bp_p50_us, bp_p99_us; /* bp_pipeline_stats of the run */
	unsigned n;
};

/*
 * One producer, one worker, one job at a time: gap 0 is the low-load
 * latency, a gap of >= 5 ms the wake-up latency after idle. prod_wait: how
 * the producer waits for its job to come back (not part of what is
 * measured, but what the producer does with its CPU meanwhile matters).
 */
static struct pb_lat_result pb_latency_once(const struct pb_opts *o,
					    struct pb_producer *lp, int wait,
					    int prod_wait, int64_t gap_ns,
					    unsigned max_n, unsigned ms)
{
	struct pb_run run;
	struct bp_pipeline_stats st;
	struct pb_lat_result res;

	pb_run_init(&run, o, lp, 1);
	run.W = 1;
	run.B = PB_HEAD_B;
	run.wait = (unsigned)wait;
	run.mode = PB_LATENCY;
	run.gap_ns = gap_ns;
	run.prod_wait = (unsigned)prod_wait;
	pb_pipeline_up(&run);
	pb_prepare_producers(&run);
	lp->max_samples = max_n;
	pb_spawn(&lp->thread, pb_latency_main, lp, o->pin ? o->a.cpus[0] : -1);
	run.lat_until_ns = bench_now_ns() + (int64_t)ms * 1000000;
	pthread_barrier_wait(&run.start);
	pthread_join(lp->thread, NULL);
	bp_pipeline_stats(run.p, &st);
	pb_verify(&run, &st);
	bp_pipeline_destroy(run.p);
	pb_run_fini(&run);
	qsort(lp->samples, lp->nsamples, sizeof(*lp->samples), pb_cmp_i64);
	res.n = lp->nsamples;
	res.p50_us = pb_pct(lp->samples, lp->nsamples, 0.50) / 1e3;
	res.p99_us = pb_pct(lp->samples, lp->nsamples, 0.99) / 1e3;
	res.bp_p50_us = (double)st.lat_p50_ns / 1e3;
	res.bp_p99_us = (double)st.lat_p99_ns / 1e3;
	return res;
}

static int64_t pb_cpu_ns(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ((int64_t)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000 +
	       ((int64_t)ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000;
}

/*
 * A started pipeline (default size: 2 workers and the sink) with nothing to
 * do: process CPU time over `ms`, in percent of one core. The main thread
 * sleeps meanwhile; nothing else runs in the process.
 */
static double pb_idle_once(const struct pb_opts *o, struct pb_producer *prod,
			   int wait, unsigned ms)
{
	struct pb_run run;
	struct bp_pipeline_stats st;
	int64_t c0, t0, c1, t1;

	pb_run_init(&run, o, prod, 1);
	run.W = 2;
	run.B = PB_HEAD_B;
	run.wait = (unsigned)wait;
	run.mode = PB_LATENCY;
	pb_pipeline_up(&run);
	/* let the threads finish starting and reach their idle wait */
	bench_sleep_ns(20 * 1000000);
	c0 = pb_cpu_ns();
	t0 = bench_now_ns();
	bench_sleep_ns((int64_t)ms * 1000000);
	c1 = pb_cpu_ns();
	t1 = bench_now_ns();
	bp_pipeline_drain(run.p);
	bp_pipeline_stats(run.p, &st);
	if (st.submitted || st.ok)
		bench_die("bpbench pipeline: idle pipeline delivered jobs\n");
	bp_pipeline_destroy(run.p);
	pb_run_fini(&run);
	return 100.0 * (double)(c1 - c0) / (double)(t1 - t0);
}

struct pb_pingpong {
	_Alignas(BENCH_CACHELINE) atomic_uint_fast64_t word;
	unsigned rounds;
	pthread_barrier_t start;
	int64_t t0, t1;
};

static void pb_pp_wait(atomic_uint_fast64_t *w, uint64_t v)
{
	unsigned spins = 0;

	/* acquire: nothing to publish; relaxed would do, acquire is free */
	while (atomic_load_explicit(w, memory_order_acquire) != v)
		if (++spins % 4096 == 0)
			sched_yield(); /* the other side was preempted */
		else
			bench_cpu_pause();
}

static void *pb_pp_ping(void *arg)
{
	struct pb_pingpong *pp = arg;

	pthread_barrier_wait(&pp->start);
	pp->t0 = bench_now_ns();
	for (uint64_t i = 0; i < pp->rounds; i++) {
		/* release: orders nothing but keeps the store a plain one */
		atomic_store_explicit(&pp->word, 2 * i + 1,
				      memory_order_release);
		pb_pp_wait(&pp->word, 2 * i + 2);
	}
	pp->t1 = bench_now_ns();
	return NULL;
}

static void *pb_pp_pong(void *arg)
{
	struct pb_pingpong *pp = arg;

	pthread_barrier_wait(&pp->start);
	for (uint64_t i = 0; i < pp->rounds; i++) {
		pb_pp_wait(&pp->word, 2 * i + 1);
		atomic_store_explicit(&pp->word, 2 * i + 2,
				      memory_order_release);
	}
	return NULL;
}

/*
 * The wake-up floor, without the library: after the same idle gap as the
 * wake-up test, wake a thread blocked in FUTEX_WAIT, which wakes a second
 * one, which reads the clock: the two wake-ups in a row that a job pays
 * when both a worker and the sink are asleep. The measuring thread sleeps
 * through the gap and waits for the end in the kernel too, as the
 * wake-up test's producer does.
 */
struct pb_wf {
	_Alignas(BENCH_CACHELINE) _Atomic uint32_t w[3]; /* futex words */
	_Alignas(BENCH_CACHELINE) _Atomic int64_t t_end;
	atomic_int stop;
};

static void pb_fx_wait(_Atomic uint32_t *w, uint32_t v)
{
	/* acquire: pairs with pb_fx_wake's release (t_end, stop) */
	while (atomic_load_explicit(w, memory_order_acquire) == v)
		syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0);
}

static void pb_fx_wake(_Atomic uint32_t *w)
{
	/* release: what the waker wrote before is seen by the woken */
	atomic_fetch_add_explicit(w, 1, memory_order_release);
	syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Stage 1 (the "worker") wakes stage 2 (the "sink"), which reads the clock
 * and wakes the measuring thread. */
static void *pb_wf_main(void *arg, int stage)
{
	struct pb_wf *f = arg;

	for (uint32_t v = 0;; v++) {
		pb_fx_wait(&f->w[stage - 1], v);
		/* relaxed: ordered by the futex word's release/acquire */
		if (atomic_load_explicit(&f->stop, memory_order_relaxed))
			return NULL;
		if (stage == 2)
			atomic_store_explicit(&f->t_end, bench_now_ns(),
					      memory_order_relaxed);
		pb_fx_wake(&f->w[stage]);
	}
}

static void *pb_wf_first(void *arg)
{
	return pb_wf_main(arg, 1);
}

static void *pb_wf_second(void *arg)
{
	return pb_wf_main(arg, 2);
}

static struct pb_lat_result pb_wakefloor_once(const struct pb_opts *o,
					      int64_t *v, unsigned n)
{
	struct pb_wf *f = bench_zalloc(sizeof(*f));
	struct pb_lat_result res = {NAN, NAN, NAN, NAN, n};
	pthread_t a, b;

	pb_spawn(&a, pb_wf_first, f, -1);
	pb_spawn(&b, pb_wf_second, f, -1);
	for (unsigned i = 0; i < n; i++) {
		int64_t t0;

		bench_sleep_ns((int64_t)o->wake_gap_us * 1000);
		/* relaxed here and below: the futex words order them */
		atomic_store_explicit(&f->t_end, 0, memory_order_relaxed);
		t0 = bench_now_ns();
		pb_fx_wake(&f->w[0]);
		pb_fx_wait(&f->w[2], i);
		v[i] = atomic_load_explicit(&f->t_end, memory_order_relaxed) -
		       t0;
		if (v[i] <= 0)
			bench_die("bpbench pipeline: wake floor: the second "
				  "thread did not read the clock\n");
	}
	atomic_store_explicit(&f->stop, 1, memory_order_relaxed);
	pb_fx_wake(&f->w[0]);
	pb_fx_wake(&f->w[1]);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	free(f);
	qsort(v, n, sizeof(*v), pb_cmp_i64);
	res.p50_us = pb_pct(v, n, 0.50) / 1e3;
	res.p99_us = pb_pct(v, n, 0.99) / 1e3;
	return res;
}

/* Cross-core hand-off: one cache line ping-ponged; ns one way. */
static double pb_handoff_once(const struct pb_opts *o, unsigned rounds)
{
	struct pb_pingpong *pp = bench_zalloc(sizeof(*pp));
	pthread_t a, b;
	double ns;

	atomic_init(&pp->word, 0);
	pp->rounds = rounds;
	pthread_barrier_init(&pp->start, NULL, 2);
	pb_spawn(&a, pb_pp_ping, pp, o->a.cpus[0]);
	pb_spawn(&b, pb_pp_pong, pp, o->a.cpus[1 % o->a.ncpus]);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	pthread_barrier_destroy(&pp->start);
	ns = (double)(pp->t1 - pp->t0) / (2.0 * rounds);
	free(pp);
	return ns;
}

/* ---- the ring reference: bp_ring MPMC 1x1, burst B (ring_bench's point) -- */

struct pb_ring_run {
	void *q;
	unsigned B;
	pthread_barrier_t start;
	atomic_int stop __attribute__((aligned(BENCH_CACHELINE)));
	atomic_int done;
	uint64_t enqueued, dequeued, bad;
	int64_t t_start, t_end;
};

static void *pb_ring_producer(void *arg)
{
	struct pb_ring_run *rr = arg;
	void **items = bench_zalloc(sizeof(void *) * rr->B);
	unsigned B = rr->B, off = 0;
	uint64_t seq = 0;
	struct bench_backoff bo = {0};

	for (unsigned i = 0; i < B; i++)
		items[i] = (void *)(uintptr_t)(seq++ << 1);
	pthread_barrier_wait(&rr->start);
	rr->t_start = bench_now_ns();
	/* relaxed: a time signal; the join publishes the results */
	while (!atomic_load_explicit(&rr->stop, memory_order_relaxed)) {
		int r = bench_q_batchpipe.enqueue(rr->q, 0, items + off,
						  B - off);

		if (r < 0)
			bench_die("bpbench pipeline: ring enqueue: %s\n",
				  bp_strerror(r));
		if (r == 0) {
			bench_backoff_wait(&bo);
			continue;
		}
		bench_backoff_reset(&bo);
		off += (unsigned)r;
		if (off == B) {
			for (unsigned i = 0; i < B; i++)
				items[i] = (void *)(uintptr_t)(seq++ << 1);
			off = 0;
		}
	}
	rr->enqueued = seq - (B - off);
	free(items);
	/* release: the consumer that sees done sees every enqueue */
	atomic_store_explicit(&rr->done, 1, memory_order_release);
	return NULL;
}

static void *pb_ring_consumer(void *arg)
{
	struct pb_ring_run *rr = arg;
	void **items = bench_zalloc(sizeof(void *) * rr->B);
	uint64_t next = 0;
	struct bench_backoff bo = {0};

	pthread_barrier_wait(&rr->start);
	for (;;) {
		/* acquire: pairs with the producer's release of done */
		int done =
			atomic_load_explicit(&rr->done, memory_order_acquire);
		int m = bench_q_batchpipe.dequeue(rr->q, 0, items, rr->B);

		if (m < 0)
			bench_die("bpbench pipeline: ring dequeue: %s\n",
				  bp_strerror(m));
		if (m == 0) {
			if (done)
				break;
			bench_backoff_wait(&bo);
			continue;
		}
		bench_backoff_reset(&bo);
		for (int i = 0; i < m; i++)
			if ((uintptr_t)items[i] != (uintptr_t)(next++ << 1))
				rr->bad++;
	}
	rr->dequeued = next;
	rr->t_end = bench_now_ns();
	free(items);
	return NULL;
}

static double pb_ring_once(const struct pb_opts *o, unsigned B, unsigned ms)
{
	struct pb_ring_run *rr = bench_zalloc(sizeof(*rr));
	pthread_t pt, ct;
	double m;

	rr->B = B;
	atomic_init(&rr->stop, 0);
	atomic_init(&rr->done, 0);
	rr->q = bench_q_batchpipe.create(4096, 1, 1, &rr->stop);
	if (!rr->q)
		bench_die("bpbench pipeline: cannot create the ring\n");
	pthread_barrier_init(&rr->start, NULL, 3);
	pb_spawn(&pt, pb_ring_producer, rr, o->a.cpus[0]);
	pb_spawn(&ct, pb_ring_consumer, rr, o->a.cpus[1 % o->a.ncpus]);
	pthread_barrier_wait(&rr->start);
	bench_sleep_ns((int64_t)ms * 1000000);
	atomic_store_explicit(&rr->stop, 1, memory_order_relaxed);
	pthread_join(pt, NULL);
	pthread_join(ct, NULL);
	if (rr->bad || rr->dequeued != rr->enqueued) {
		fprintf(stderr,
			"bpbench pipeline: VERIFY FAILED: ring 1x1 B=%u: "
			"enqueued %" PRIu64 ", dequeued %" PRIu64 ", %" PRIu64
			" out of order\n",
			B, rr->enqueued, rr->dequeued, rr->bad);
		exit(1);
	}
	m = (double)rr->dequeued * 1e3 / (double)(rr->t_end - rr->t_start);
	pthread_barrier_destroy(&rr->start);
	bench_q_batchpipe.destroy(rr->q);
	free(rr);
	return m;
}

/* ---- points and results -------------------------------------------------- */

/* PB_ALONE: the benchmark's own per-job work in one thread, no pipeline */
enum pb_kind { PB_PIPE, PB_WORK, PB_RING, PB_ALONE };

struct pb_point {
	enum pb_kind kind;
	unsigned W, B;
	int wait;
	bool ordered;
};

struct pb_results {
	int runs, npoints;
	struct pb_point pt[PB_MAX_POINTS];
	double *mj, *p50, *p99; /* [run][point] */
	/* latency phase: [run][wait] */
	double *lat_p50, *lat_p99, *lat_bp50, *lat_bp99;
	double *same_p50, *same_p99; /* producer waits as the pipeline */
	double *wake_p50, *wake_p99, *wake_bp50, *wake_bp99;
	double *idle;
	double *handoff;	       /* [run] */
	double *floor_p50, *floor_p99; /* [run]: bare futex wake-up floor */
	uint64_t iters;
	double iters_per_ns;
};

static int pb_find(const struct pb_results *r, enum pb_kind kind, unsigned W,
		   unsigned B, int wait, bool ordered)
{
	for (int i = 0; i < r->npoints; i++) {
		const struct pb_point *p = &r->pt[i];

		if (p->kind == kind && p->B == B &&
		    (kind == PB_RING || kind == PB_ALONE ||
		     (p->W == W && p->wait == wait && p->ordered == ordered)))
			return i;
	}
	return -1;
}

static void pb_add(struct pb_results *r, enum pb_kind kind, unsigned W,
		   unsigned B, int wait, bool ordered)
{
	if (pb_find(r, kind, W, B, wait, ordered) >= 0)
		return;
	if (r->npoints >= PB_MAX_POINTS)
		bench_die("bpbench pipeline: too many points\n");
	r->pt[r->npoints++] = (struct pb_point){kind, W, B, wait, ordered};
}

static void pb_build_points(const struct pb_opts *o, struct pb_results *r)
{
	for (int w = 0; w < o->nworkers; w++)
		for (int b = 0; b < o->nbatches; b++)
			for (int i = 0; i < o->nwaits; i++)
				pb_add(r, PB_PIPE, o->workers[w], o->batches[b],
				       o->waits[i], false);
	if (o->sweep_only)
		return;
	for (int b = 0; b < o->nbatches; b++) {
		pb_add(r, PB_PIPE, PB_HEAD_W, o->batches[b], PB_HEAD_WAIT,
		       true);
		pb_add(r, PB_RING, 1, o->batches[b], 0, false);
		pb_add(r, PB_ALONE, 1, o->batches[b], 0, false);
	}
	/* the headline points, whatever the lists say */
	pb_add(r, PB_PIPE, PB_HEAD_W, PB_HEAD_B, PB_HEAD_WAIT, false);
	pb_add(r, PB_PIPE, PB_HEAD_W, PB_HEAD_B, PB_HEAD_WAIT, true);
	pb_add(r, PB_PIPE, PB_HEAD_W_MANY, PB_HEAD_B, PB_HEAD_WAIT, false);
	pb_add(r, PB_RING, 1, PB_HEAD_B, 0, false);
	pb_add(r, PB_ALONE, 1, PB_HEAD_B, 0, false);
	if (o->work_ns)
		for (int w = 0; w < o->nworkers; w++)
			pb_add(r, PB_WORK, o->workers[w], PB_HEAD_B,
			       PB_HEAD_WAIT, false);
}

static double *pb_cell(const struct pb_results *r, double *a, int run, int i)
{
	return &a[run * r->npoints + i];
}

static double *pb_wcell(double *a, int run, int wait)
{
	return &a[run * PB_NWAITS + wait];
}

/* Median over runs of a[run][i] (stride: points, or waits). */
static double pb_med(const double *a, int runs, int stride, int i, double *lo,
		     double *hi)
{
	double v[PB_MAX_RUNS];

	for (int run = 0; run < runs; run++)
		v[run] = a[run * stride + i];
	if (lo)
		*lo = bench_min(v, runs);
	if (hi)
		*hi = bench_max(v, runs);
	return bench_median(v, runs);
}

static double pb_med_pt(const struct pb_results *r, const double *a, int i,
			double *lo, double *hi)
{
	if (i < 0) {
		if (lo)
			*lo = NAN;
		if (hi)
			*hi = NAN;
		return NAN;
	}
	return pb_med(a, r->runs, r->npoints, i, lo, hi);
}

/* Median over runs of a[run][i] / a[run][j]. */
static double pb_med_ratio(const struct pb_results *r, int i, int j)
{
	double v[PB_MAX_RUNS];

	if (i < 0 || j < 0)
		return NAN;
	for (int run = 0; run < r->runs; run++) {
		double den = *pb_cell(r, r->mj, run, j);

		v[run] = den > 0 ? *pb_cell(r, r->mj, run, i) / den : NAN;
	}
	return bench_median(v, r->runs);
}

/* ---- the measurements, interleaved --------------------------------------- */

static double pb_calibrate(void)
{
	double v[7];
	uint64_t iters = 2000000, sink = 0;

	for (int i = 0; i < 7; i++) {
		int64_t t0 = bench_now_ns();

		sink += pb_spin((uint64_t)i, iters);
		v[i] = (double)iters / (double)(bench_now_ns() - t0);
	}
	if (sink == 42) /* keep the result alive */
		fprintf(stderr, " ");
	return bench_median(v, 7);
}

static void pb_sweep(const struct pb_opts *o, struct pb_results *r,
		     struct pb_producer *prod)
{
	uint64_t rng = o->a.seed;
	int64_t t_start = bench_now_ns();
	int order[PB_MAX_POINTS];

	/* warm-up, not recorded: code, pools, the allocator's arenas */
	pb_run_once(o, prod, o->producers, PB_HEAD_W, PB_HEAD_B, PB_HEAD_WAIT,
		    false, 0, o->a.quick ? 10 : 50);
	for (int run = 0; run < r->runs; run++) {
		fprintf(stderr,
			"bpbench pipeline: throughput run %d/%d: %d "
			"points ",
			run + 1, r->runs, r->npoints);
		for (int i = 0; i < r->npoints; i++)
			order[i] = i;
		bench_shuffle(order, r->npoints, &rng);
		for (int k = 0; k < r->npoints; k++) {
			int i = order[k];
			const struct pb_point *p = &r->pt[i];
			struct pb_result res = {NAN, NAN, NAN};

			if (p->kind == PB_RING)
				res.mjobs = pb_ring_once(o, p->B, o->a.ms);
			else if (p->kind == PB_ALONE)
				res.mjobs =
					pb_alone_once(o, prod, p->B, o->a.ms);
			else
				res = pb_run_once(o, prod, o->producers, p->W,
						  p->B, p->wait, p->ordered,
						  p->kind == PB_WORK ? r->iters
								     : 0,
						  o->a.ms);
			*pb_cell(r, r->mj, run, i) = res.mjobs;
			*pb_cell(r, r->p50, run, i) = res.p50_us;
			*pb_cell(r, r->p99, run, i) = res.p99_us;
			if (k % 8 == 7)
				fputc('.', stderr);
		}
		fprintf(stderr, " (%.1f s)\n",
			(double)(bench_now_ns() - t_start) / 1e9);
	}
}

static void pb_latency_sweep(const struct pb_opts *o, struct pb_results *r,
			     struct pb_producer *lp, struct pb_producer *prod)
{
	uint64_t rng = o->a.seed ^ UINT64_C(0x1a7e1c);
	int64_t t_start = bench_now_ns();
	/*
	 * Tasks, each per wait strategy: low-load latency with a producer that
	 * spins and yields for its job (busy-poll); the same with a producer
	 * that waits with the strategy under test; wake-up after idle (the
	 * producer sleeps through the gap: its own wake-up is not measured
	 * and it leaves the CPUs to the pipeline); idle CPU. Then hand-off.
	 */
	enum { T_LAT, T_SAME, T_WAKE, T_IDLE, T_HANDOFF, T_FLOOR };
	int order[T_HANDOFF * PB_NWAITS + 2], n;
	int64_t *fv = bench_zalloc(sizeof(*fv) * o->wake_samples);

	for (int run = 0; run < r->runs; run++) {
		fprintf(stderr, "bpbench pipeline: latency run %d/%d:", run + 1,
			r->runs);
		n = 0;
		for (int t = T_LAT; t < T_HANDOFF; t++)
			for (int i = 0; i < o->nwaits; i++)
				order[n++] = t * PB_NWAITS + o->waits[i];
		order[n++] = T_HANDOFF * PB_NWAITS;
		order[n++] = T_FLOOR * PB_NWAITS;
		bench_shuffle(order, n, &rng);
		for (int k = 0; k < n; k++) {
			int task = order[k] / PB_NWAITS,
			    w = order[k] % PB_NWAITS;
			int64_t gap = (int64_t)o->wake_gap_us * 1000;
			struct pb_lat_result lr;

			switch (task) {
			case T_LAT:
				lr = pb_latency_once(o, lp, w, 0, 0,
						     PB_MAX_SAMPLES, o->lat_ms);
				*pb_wcell(r->lat_p50, run, w) = lr.p50_us;
				*pb_wcell(r->lat_p99, run, w) = lr.p99_us;
				*pb_wcell(r->lat_bp50, run, w) = lr.bp_p50_us;
				*pb_wcell(r->lat_bp99, run, w) = lr.bp_p99_us;
				fprintf(stderr, " lat/%s(%u)", pb_waits[w].name,
					lr.n);
				break;
			case T_SAME:
				lr = pb_latency_once(o, lp, w, w, 0,
						     PB_MAX_SAMPLES, o->lat_ms);
				*pb_wcell(r->same_p50, run, w) = lr.p50_us;
				*pb_wcell(r->same_p99, run, w) = lr.p99_us;
				fprintf(stderr, " same/%s(%u)",
					pb_waits[w].name, lr.n);
				break;
			case T_WAKE:
				lr = pb_latency_once(o, lp, w, 2, gap,
						     o->wake_samples, 600000);
				*pb_wcell(r->wake_p50, run, w) = lr.p50_us;
				*pb_wcell(r->wake_p99, run, w) = lr.p99_us;
				*pb_wcell(r->wake_bp50, run, w) = lr.bp_p50_us;
				*pb_wcell(r->wake_bp99, run, w) = lr.bp_p99_us;
				fprintf(stderr, " wake/%s", pb_waits[w].name);
				break;
			case T_IDLE:
				*pb_wcell(r->idle, run, w) =
					pb_idle_once(o, prod, w, o->idle_ms);
				fprintf(stderr, " idle/%s", pb_waits[w].name);
				break;
			case T_FLOOR:
				lr = pb_wakefloor_once(o, fv, o->wake_samples);
				r->floor_p50[run] = lr.p50_us;
				r->floor_p99[run] = lr.p99_us;
				fprintf(stderr, " wake-floor");
				break;
			default:
				r->handoff[run] = pb_handoff_once(
					o, o->a.quick ? 20000 : 100000);
				fprintf(stderr, " hand-off");
			}
		}
		fprintf(stderr, " (%.1f s)\n",
			(double)(bench_now_ns() - t_start) / 1e9);
	}
	free(fv);
}

/* ---- reports ------------------------------------------------------------- */

static void pb_loadavg(char *buf, size_t len)
{
	FILE *f = fopen("/proc/loadavg", "r");

	snprintf(buf, len, "?");
	if (f) {
		if (fgets(buf, (int)len, f))
			buf[strcspn(buf, "\n")] = '\0';
		fclose(f);
	}
}

static const char *pb_target(double v, double target, int at_least)
{
	if (isnan(v))
		return "n/a";
	return (at_least ? v >= target : v <= target) ? "meets" : "MISSES";
}

/* A cell of the workers x batches grids: point i, `width` characters. */
typedef void pb_cell_fn(const struct pb_results *r, int i, char *buf,
			size_t len);

static void pb_cell_mjobs(const struct pb_results *r, int i, char *buf,
			  size_t len)
{
	double lo, hi, m = pb_med_pt(r, r->mj, i, &lo, &hi);
	char range[32];

	snprintf(range, sizeof(range), "[%.1f-%.1f]", lo, hi);
	snprintf(buf, len, "%7.2f %-13s", m, range);
}

static void pb_cell_latency(const struct pb_results *r, int i, char *buf,
			    size_t len)
{
	char cell[40];

	snprintf(cell, sizeof(cell), "%.1f / %.1f",
		 pb_med_pt(r, r->p50, i, NULL, NULL),
		 pb_med_pt(r, r->p99, i, NULL, NULL));
	snprintf(buf, len, "%18s", cell);
}

/* One table per wait strategy: a row per worker count, a column per B. */
static void pb_print_grid(FILE *f, const struct pb_opts *o,
			  const struct pb_results *r, int width,
			  pb_cell_fn *cell)
{
	for (int wi = 0; wi < o->nwaits; wi++) {
		int w = o->waits[wi];

		fprintf(f, "\nwait = %s\n%4s", pb_waits[w].name, "W");
		for (int b = 0; b < o->nbatches; b++)
			fprintf(f, "  %*s%-4u", width - 4, "B=", o->batches[b]);
		fprintf(f, "\n");
		for (int wk = 0; wk < o->nworkers; wk++) {
			fprintf(f, "%4u", o->workers[wk]);
			for (int b = 0; b < o->nbatches; b++) {
				char buf[64];

				cell(r,
				     pb_find(r, PB_PIPE, o->workers[wk],
					     o->batches[b], w, false),
				     buf, sizeof(buf));
				fprintf(f, "  %s", buf);
			}
			fprintf(f, "\n");
		}
	}
}

/* What the printers get (bench_emit's ctx). */
struct pb_report {
	const struct pb_opts *o;
	const struct pb_results *r;
	const char *load0, *load1; /* load averages at start and end */
};

static void pb_print_table(FILE *f, const void *ctx)
{
	const struct pb_report *rep = ctx;
	const struct pb_opts *o = rep->o;
	const struct pb_results *r = rep->r;
	const char *load0 = rep->load0, *load1 = rep->load1;
	char cpus[256];
	int ordered_any = 0;

	bench_cpus_format(o->a.cpus, o->a.ncpus, cpus, sizeof(cpus));
	fprintf(f,
		"bpbench pipeline: %u producers, %u runs x %u ms per point "
		"(interleaved), pool %u jobs per producer,\n"
		"threads %s (CPUs %s), seed %" PRIu64 "\n",
		o->producers, o->a.runs, o->a.ms, o->pool,
		o->pin ? "pinned round-robin" : "not pinned", cpus, o->a.seed);
	fprintf(f, "load average at start: %s\n", load0);
	fprintf(f, "load average at end:   %s\n", load1);
	fprintf(f,
		"\nTrivial jobs (the stage writes a result and completes), "
		"unordered.\n"
		"Median M jobs/s end to end (producers' first submit .. drain "
		"returned); [min-max]\n");
	pb_print_grid(f, o, r, 21, pb_cell_mjobs);
	fprintf(f,
		"\nLatency submit -> sink under that load, from "
		"bp_pipeline_stats (bucket\nupper bounds; at saturation this "
		"is queueing in the bounded rings):\nmedian p50 / p99, us\n");
	pb_print_grid(f, o, r, 18, pb_cell_latency);

	fprintf(f,
		"\nOrdered vs unordered, %u producers, %u workers, wait %s "
		"(cost = 1 - median of per-run ordered/unordered)\n",
		o->producers, PB_HEAD_W, pb_waits[PB_HEAD_WAIT].name);
	fprintf(f, "%5s %12s %12s %8s %14s\n", "B", "unordered", "ordered",
		"cost", "ordered p99us");
	for (int i = 0; i < r->npoints; i++) {
		const struct pb_point *p = &r->pt[i];
		int u;

		if (p->kind != PB_PIPE || !p->ordered)
			continue;
		u = pb_find(r, PB_PIPE, p->W, p->B, p->wait, false);
		ordered_any = 1;
		fprintf(f, "%5u %12.2f %12.2f %7.1f%% %14.1f\n", p->B,
			pb_med_pt(r, r->mj, u, NULL, NULL),
			pb_med_pt(r, r->mj, i, NULL, NULL),
			100.0 * (1.0 - pb_med_ratio(r, i, u)),
			pb_med_pt(r, r->p99, i, NULL, NULL));
	}
	if (!ordered_any)
		fprintf(f, "  (none)\n");

	fprintf(f,
		"\nRing reference: bp_ring MPMC 1x1, capacity 4096, burst B, "
		"pinned to CPUs %d and %d,\nagainst the pipeline (%u "
		"producers, %u workers, %s, unordered)\n",
		o->a.cpus[0], o->a.cpus[1 % o->a.ncpus], o->producers,
		PB_HEAD_W, pb_waits[PB_HEAD_WAIT].name);
	fprintf(f, "and against the benchmark's own per-job work alone: one "
		   "thread "
		   "takes B jobs from\nits pool, stamps them, runs the stage's "
		   "work and the sink's checks, no pipeline\n");
	fprintf(f, "%5s %14s %14s %8s %14s %10s\n", "B", "ring Mitems/s",
		"pipe Mjobs/s", "ratio", "alone Mjobs/s", "pipe/alone");
	for (int i = 0; i < r->npoints; i++) {
		const struct pb_point *p = &r->pt[i];
		int pp, al;

		if (p->kind != PB_RING)
			continue;
		pp = pb_find(r, PB_PIPE, PB_HEAD_W, p->B, PB_HEAD_WAIT, false);
		al = pb_find(r, PB_ALONE, 1, p->B, 0, false);
		fprintf(f, "%5u %14.2f %14.2f %8.3f %14.2f %10.3f\n", p->B,
			pb_med_pt(r, r->mj, i, NULL, NULL),
			pb_med_pt(r, r->mj, pp, NULL, NULL),
			pb_med_ratio(r, pp, i),
			pb_med_pt(r, r->mj, al, NULL, NULL),
			pb_med_ratio(r, pp, al));
	}

	if (o->work_ns && !o->sweep_only) {
		fprintf(f,
			"\nJobs with %u ns of CPU work each (%" PRIu64
			" LCG steps, calibrated at %.3f steps/ns),\nB=%u, "
			"wait %s, unordered; cores busy = Mjobs/s x work_ns / "
			"1000\n",
			o->work_ns, r->iters, r->iters_per_ns, PB_HEAD_B,
			pb_waits[PB_HEAD_WAIT].name);
		fprintf(f, "%4s %10s %12s %10s %10s\n", "W", "Mjobs/s",
			"cores busy", "p50 us", "p99 us");
		for (int wk = 0; wk < o->nworkers; wk++) {
			int i = pb_find(r, PB_WORK, o->workers[wk], PB_HEAD_B,
					PB_HEAD_WAIT, false);
			double m = pb_med_pt(r, r->mj, i, NULL, NULL);

			fprintf(f, "%4u %10.3f %12.2f %10.1f %10.1f\n",
				o->workers[wk], m, m * o->work_ns / 1e3,
				pb_med_pt(r, r->p50, i, NULL, NULL),
				pb_med_pt(r, r->p99, i, NULL, NULL));
		}
	}

	if (o->latency) {
		double ho_lo, ho_hi,
			ho = pb_med(r->handoff, r->runs, 1, 0, &ho_lo, &ho_hi);

		fprintf(f,
			"\nLatency, 1 producer, 1 worker, one job at a time "
			"(medians over runs, us).\n"
			"bench = clock before bp_submit -> clock in the sink "
			"callback, one way, exact;\n"
			"bp = bp_pipeline_stats of the same runs (bucket upper "
			"bounds).\n"
			"low-load: the producer spins and yields (busy-poll) "
			"until its job is back;\n"
			"low-load same-wait: the producer waits with the "
			"strategy of the row;\n"
			"wake-up: %u us idle before each job (the producer "
			"sleeps through it);\n"
			"idle CPU: 2 workers + sink, no jobs, %u ms, %% of one "
			"core.\n",
			o->wake_gap_us, o->idle_ms);
		fprintf(f,
			"cross-core hand-off (the floor): %.0f ns one way "
			"[%.0f-%.0f]\n",
			ho, ho_lo, ho_hi);
		fprintf(f,
			"wake-up floor, no library: two futex wake-ups in a "
			"row "
			"after the same idle\ngap, p50 / p99: %.1f / %.1f us\n",
			pb_med(r->floor_p50, r->runs, 1, 0, NULL, NULL),
			pb_med(r->floor_p99, r->runs, 1, 0, NULL, NULL));
		fprintf(f, "%-11s %15s %15s %15s %15s %15s %8s\n", "",
			"low-load", "low-load", "low-load", "wake-up",
			"wake-up", "idle");
		fprintf(f, "%-11s %15s %15s %15s %15s %15s %8s\n", "wait",
			"bench", "bp", "same-wait", "bench", "bp", "CPU");
		fprintf(f, "%-11s %15s %15s %15s %15s %15s %8s\n", "",
			"p50 / p99", "p50 / p99", "p50 / p99", "p50 / p99",
			"p50 / p99", "%");
		for (int wi = 0; wi < o->nwaits; wi++) {
			int w = o->waits[wi];
			char c[5][40];
			const double *a[5][2] = {
				{r->lat_p50, r->lat_p99},
				{r->lat_bp50, r->lat_bp99},
				{r->same_p50, r->same_p99},
				{r->wake_p50, r->wake_p99},
				{r->wake_bp50, r->wake_bp99},
			};

			for (int k = 0; k < 5; k++)
				snprintf(c[k], sizeof(c[k]), "%.1f / %.1f",
					 pb_med(a[k][0], r->runs, PB_NWAITS, w,
						NULL, NULL),
					 pb_med(a[k][1], r->runs, PB_NWAITS, w,
						NULL, NULL));
			fprintf(f, "%-11s %15s %15s %15s %15s %15s %8.2f\n",
				pb_waits[w].name, c[0], c[1], c[2], c[3], c[4],
				pb_med(r->idle, r->runs, PB_NWAITS, w, NULL,
				       NULL));
		}
	}

	/* ---- the summary the lead quotes
	 * ----------------------------------------- */
	{
		int head = pb_find(r, PB_PIPE, PB_HEAD_W, PB_HEAD_B,
				   PB_HEAD_WAIT, false);
		int ord = pb_find(r, PB_PIPE, PB_HEAD_W, PB_HEAD_B,
				  PB_HEAD_WAIT, true);
		int many = pb_find(r, PB_PIPE, PB_HEAD_W_MANY, PB_HEAD_B,
				   PB_HEAD_WAIT, false);
		int ring = pb_find(r, PB_RING, 1, PB_HEAD_B, 0, false);
		double hm = pb_med_pt(r, r->mj, head, NULL, NULL);
		double rm = pb_med_pt(r, r->mj, ring, NULL, NULL);
		double rr = pb_med_ratio(r, head, ring);
		int alone = pb_find(r, PB_ALONE, 1, PB_HEAD_B, 0, false);
		double am = pb_med_pt(r, r->mj, alone, NULL, NULL);
		double ra = pb_med_ratio(r, head, alone);
		double sc = pb_med_ratio(r, many, head);
		double oc = 100.0 * (1.0 - pb_med_ratio(r, ord, head));

		fprintf(f,
			"\nHEADLINE (medians; ratios are medians of per-run "
			"ratios; load %s -> %s)\n",
			load0, load1);
		fprintf(f,
			"1. trivial, %uP/%uW, B=%u, unordered, %s: %.2f M "
			"jobs/s (target >= 80: %s)\n",
			o->producers, PB_HEAD_W, PB_HEAD_B,
			pb_waits[PB_HEAD_WAIT].name, hm, pb_target(hm, 80, 1));
		fprintf(f,
			"   ring 1x1 B=%u: %.2f M items/s; pipeline / ring = "
			"%.3f (target >= 0.40: %s)\n",
			PB_HEAD_B, rm, rr, pb_target(rr, 0.40, 1));
		fprintf(f,
			"   the benchmark's own per-job work alone, one "
			"thread, "
			"B=%u: %.2f M jobs/s\n   (%.1f ns/job); pipeline / "
			"alone = %.3f\n",
			PB_HEAD_B, am, 1e3 / am, ra);
		fprintf(f,
			"2. %u workers / %u workers at B=%u: %.3f (target >= "
			"0.70: %s)\n",
			PB_HEAD_W_MANY, PB_HEAD_W, PB_HEAD_B, sc,
			pb_target(sc, 0.70, 1));
		fprintf(f,
			"3. ordered vs unordered, B=%u, %uP/%uW: cost %.1f %% "
			"(target <= 15 %%: %s)\n",
			PB_HEAD_B, o->producers, PB_HEAD_W, oc,
			pb_target(oc, 15, 0));
		if (o->latency) {
			double bp50 = pb_med(r->lat_p50, r->runs, PB_NWAITS, 0,
					     NULL, NULL),
			       bp99 = pb_med(r->lat_p99, r->runs, PB_NWAITS, 0,
					     NULL, NULL),
			       ss99 = pb_med(r->wake_p99, r->runs, PB_NWAITS, 1,
					     NULL, NULL),
			       ssidle = pb_med(r->idle, r->runs, PB_NWAITS, 1,
					       NULL, NULL);

			fprintf(f,
				"4. latency, submit -> sink seen, one way, us "
				"(p50 / p99), 1P/1W, one job at a time;\n"
				"   hand-off floor %.0f ns. low-load: producer "
				"spins+yields; same-wait: producer\n"
				"   waits with the row's strategy; wake-up: "
				"after %u us idle\n",
				pb_med(r->handoff, r->runs, 1, 0, NULL, NULL),
				o->wake_gap_us);
			fprintf(f, "   %-10s %15s %15s %15s %9s\n", "wait",
				"low-load", "same-wait", "wake-up", "idle CPU");
			for (int wi = 0; wi < o->nwaits; wi++) {
				int w = o->waits[wi];
				const double *a[3][2] = {
					{r->lat_p50, r->lat_p99},
					{r->same_p50, r->same_p99},
					{r->wake_p50, r->wake_p99},
				};
				char c[3][40];

				for (int k = 0; k < 3; k++)
					snprintf(c[k], sizeof(c[k]),
						 "%.1f / %.1f",
						 pb_med(a[k][0], r->runs,
							PB_NWAITS, w, NULL,
							NULL),
						 pb_med(a[k][1], r->runs,
							PB_NWAITS, w, NULL,
							NULL));
				fprintf(f, "   %-10s %15s %15s %15s %7.2f %%\n",
					pb_waits[w].name, c[0], c[1], c[2],
					pb_med(r->idle, r->runs, PB_NWAITS, w,
					       NULL, NULL));
			}
			fprintf(f,
				"   busy-poll p50 <= 5 us: %s; p99 <= 50 us: "
				"%s\n",
				pb_target(bp50, 5, 0), pb_target(bp99, 50, 0));
			fprintf(f,
				"   spin-sleep idle CPU < 1 %%: %s; wake-up "
				"p99 "
				"<= 100 us: %s\n",
				pb_target(ssidle, 0.999, 0),
				pb_target(ss99, 100, 0));
			fprintf(f,
				"5. cross-core hand-off, one way (round trip / "
				"2), median: %.0f ns\n",
				pb_med(r->handoff, r->runs, 1, 0, NULL, NULL));
			fprintf(f,
				"6. wake-up floor, no library (two futex "
				"wake-ups in a row after %u us idle),\n"
				"   p50 / p99: %.1f / %.1f us\n",
				o->wake_gap_us,
				pb_med(r->floor_p50, r->runs, 1, 0, NULL, NULL),
				pb_med(r->floor_p99, r->runs, 1, 0, NULL,
				       NULL));
		}
	}
}

static void pb_print_csv(FILE *f, const void *ctx)
{
	const struct pb_report *rep = ctx;
	const struct pb_opts *o = rep->o;
	const struct pb_results *r = rep->r;

	/* p50_us, p99_us: bp_pipeline_stats lat_p50_ns / lat_p99_ns of the
	 * run (bucket upper bounds) */
	fprintf(f,
		"producers,workers,B,wait,ordered,run,Mjobs_per_s,p50_us,p99_"
		"us\n");
	for (int i = 0; i < r->npoints; i++) {
		const struct pb_point *p = &r->pt[i];

		if (p->kind != PB_PIPE)
			continue;
		for (int run = 0; run < r->runs; run++)
			fprintf(f, "%u,%u,%u,%s,%d,%d,%.3f,%.3f,%.3f\n",
				o->producers, p->W, p->B,
				pb_waits[p->wait].name, p->ordered ? 1 : 0, run,
				*pb_cell(r, r->mj, run, i),
				*pb_cell(r, r->p50, run, i),
				*pb_cell(r, r->p99, run, i));
	}
	fprintf(f, "ring1x1,B,run,Mitems_per_s\n");
	for (int i = 0; i < r->npoints; i++)
		if (r->pt[i].kind == PB_RING)
			for (int run = 0; run < r->runs; run++)
				fprintf(f, "ring1x1,%u,%d,%.3f\n", r->pt[i].B,
					run, *pb_cell(r, r->mj, run, i));
	fprintf(f, "alone,B,run,Mjobs_per_s\n");
	for (int i = 0; i < r->npoints; i++)
		if (r->pt[i].kind == PB_ALONE)
			for (int run = 0; run < r->runs; run++)
				fprintf(f, "alone,%u,%d,%.3f\n", r->pt[i].B,
					run, *pb_cell(r, r->mj, run, i));
	if (o->work_ns && !o->sweep_only) {
		fprintf(f, "work,work_ns,producers,workers,B,wait,ordered,run,"
			   "Mjobs_per_s,p50_us,p99_us\n");
		for (int i = 0; i < r->npoints; i++) {
			const struct pb_point *p = &r->pt[i];

			if (p->kind != PB_WORK)
				continue;
			for (int run = 0; run < r->runs; run++)
				fprintf(f,
					"work,%u,%u,%u,%u,%s,0,%d,%.3f,%.3f,%."
					"3f\n",
					o->work_ns, o->producers, p->W, p->B,
					pb_waits[p->wait].name, run,
					*pb_cell(r, r->mj, run, i),
					*pb_cell(r, r->p50, run, i),
					*pb_cell(r, r->p99, run, i));
		}
	}
	if (!o->latency)
		return;
	/* bench_*: the benchmark's own one-way clock; bp_*: the stats' */
	fprintf(f,
		"latency,wait,test,run,bench_p50_us,bench_p99_us,bp_p50_us,bp_"
		"p99_us,idle_cpu_pct\n");
	for (int wi = 0; wi < o->nwaits; wi++) {
		int w = o->waits[wi];

		for (int run = 0; run < r->runs; run++) {
			fprintf(f,
				"latency,%s,low-load,%d,%.3f,%.3f,%.3f,%.3f,\n",
				pb_waits[w].name, run,
				*pb_wcell(r->lat_p50, run, w),
				*pb_wcell(r->lat_p99, run, w),
				*pb_wcell(r->lat_bp50, run, w),
				*pb_wcell(r->lat_bp99, run, w));
			fprintf(f,
				"latency,%s,low-load-same-wait,%d,%.3f,%.3f,,,"
				"\n",
				pb_waits[w].name, run,
				*pb_wcell(r->same_p50, run, w),
				*pb_wcell(r->same_p99, run, w));
			fprintf(f,
				"latency,%s,wake-up,%d,%.3f,%.3f,%.3f,%.3f,\n",
				pb_waits[w].name, run,
				*pb_wcell(r->wake_p50, run, w),
				*pb_wcell(r->wake_p99, run, w),
				*pb_wcell(r->wake_bp50, run, w),
				*pb_wcell(r->wake_bp99, run, w));
			fprintf(f, "latency,%s,idle,%d,,,,,%.3f\n",
				pb_waits[w].name, run,
				*pb_wcell(r->idle, run, w));
		}
	}
	fprintf(f, "handoff,run,ns_one_way\n");
	for (int run = 0; run < r->runs; run++)
		fprintf(f, "handoff,%d,%.1f\n", run, r->handoff[run]);
	fprintf(f, "wakefloor,run,p50_us,p99_us\n");
	for (int run = 0; run < r->runs; run++)
		fprintf(f, "wakefloor,%d,%.3f,%.3f\n", run, r->floor_p50[run],
			r->floor_p99[run]);
}

/* ---- options ------------------------------------------------------------- */

static int pb_set_waits(struct bench_args *a, const char *arg)
{
	struct pb_opts *o = a->ctx;
	const char *names[PB_NWAITS + 1];
	char buf[256];
	int n;

	if (strlen(arg) >= sizeof(buf))
		return -1;
	strcpy(buf, arg);
	n = bench_parse_names(buf, names, PB_NWAITS);
	if (n < 0)
		return -1;
	for (int i = 0; i < n; i++) {
		o->waits[i] = -1;
		for (int w = 0; w < PB_NWAITS; w++)
			if (!strcmp(names[i], pb_waits[w].name))
				o->waits[i] = w;
		if (o->waits[i] < 0)
			return -1;
		for (int j = 0; j < i; j++)
			if (o->waits[j] == o->waits[i])
				return -1;
	}
	o->nwaits = n;
	return 0;
}

/* An option with one unsigned value in [lo, hi], stored at o + off. */
#define PB_UINT_OPT(fn, field, lo, hi, flag)                                   \
	static int fn(struct bench_args *a, const char *arg)                   \
	{                                                                      \
		struct pb_opts *o = a->ctx;                                    \
                                                                               \
		if (bench_parse_uint(arg, &o->field, lo, hi))                  \
			return -1;                                             \
		flag;                                                          \
		return 0;                                                      \
	}

PB_UINT_OPT(pb_set_producers, producers, 1, PB_MAX_PRODUCERS, )
PB_UINT_OPT(pb_set_work_ns, work_ns, 0, 10000000, )
PB_UINT_OPT(pb_set_pool, pool, 2, 1u << 24, )
PB_UINT_OPT(pb_set_lat_ms, lat_ms, 1, 600000, o->lat_set = 1)
PB_UINT_OPT(pb_set_wake_samples, wake_samples, 1, PB_MAX_SAMPLES,
	    o->wake_set = 1)
PB_UINT_OPT(pb_set_wake_gap_us, wake_gap_us, 0, 10000000, )
PB_UINT_OPT(pb_set_idle_ms, idle_ms, 1, 600000, o->idle_set = 1)
PB_UINT_OPT(pb_set_inflight, inflight, 1, BP_MAX_INFLIGHT, )
PB_UINT_OPT(pb_set_ingress, ingress, 1, BP_MAX_RING, )
PB_UINT_OPT(pb_set_egress, egress, 1, BP_MAX_RING, )

static int pb_set_workers(struct bench_args *a, const char *arg)
{
	struct pb_opts *o = a->ctx;

	o->nworkers = bench_parse_uints(arg, o->workers, PB_MAX_WLIST, 1,
					BP_MAX_WORKERS);
	return o->nworkers < 0 ? -1 : 0;
}

static int pb_set_batches(struct bench_args *a, const char *arg)
{
	struct pb_opts *o = a->ctx;

	o->nbatches = bench_parse_uints(arg, o->batches, PB_MAX_BATCHES, 1,
					BP_MAX_BATCH);
	return o->nbatches < 0 ? -1 : 0;
}

static int pb_set_spin_ns(struct bench_args *a, const char *arg)
{
	unsigned v;

	(void)a;
	if (bench_parse_uint(arg, &v, 0, 100000000))
		return -1;
	pb_spin_ns = (int)v;
	return 0;
}

static int pb_set_yields(struct bench_args *a, const char *arg)
{
	unsigned v;

	(void)a;
	if (bench_parse_uint(arg, &v, 0, 1000000))
		return -1;
	pb_yields = (int)v;
	return 0;
}

static int pb_set_no_latency(struct bench_args *a, const char *arg)
{
	(void)arg;
	((struct pb_opts *)a->ctx)->latency = 0;
	return 0;
}

static int pb_set_sweep_only(struct bench_args *a, const char *arg)
{
	(void)arg;
	((struct pb_opts *)a->ctx)->sweep_only = 1;
	return 0;
}

static int pb_set_pin(struct bench_args *a, const char *arg)
{
	(void)arg;
	((struct pb_opts *)a->ctx)->pin = 1;
	return 0;
}

static const struct bench_opt pb_options[] = {
	BENCH_OPT_RUNS("runs per point (default 5; --quick: 3)"),
	BENCH_OPT_MS("producing time per run, ms (default 150; --quick: 20)"),
	{"producers", "N", pb_set_producers, "producer threads (default 2)"},
	{"workers", "LIST", pb_set_workers,
	 "worker counts (default 1,2,4,8,16)"},
	{"batches", "LIST", pb_set_batches,
	 "B: submit batch and max_batch (default 1,8,32,128)"},
	{"waits", "LIST", pb_set_waits,
	 "busy-poll,spin-sleep,sleep (default: all; one strategy\n"
	 "for worker, sink and producer waits)"},
	{"work-ns", "N", pb_set_work_ns,
	 "also run jobs that do N ns of arithmetic each, B=32,\n"
	 "spin-sleep, every worker count (default 1000; 0: off)"},
	{"pool", "N", pb_set_pool,
	 "jobs per producer, recycled (default 4096)"},
	{"lat-ms", "N", pb_set_lat_ms,
	 "low-load latency sampling per run, ms (default 100;\n--quick: 30)"},
	{"wake-samples", "N", pb_set_wake_samples,
	 "wake-up samples per run (default 100; --quick: 20)"},
	{"wake-gap-us", "N", pb_set_wake_gap_us,
	 "idle time before each wake-up job (default 5000)"},
	{"idle-ms", "N", pb_set_idle_ms,
	 "idle-CPU window (default 1000; --quick: 500)"},
	{"no-latency", NULL, pb_set_no_latency,
	 "skip latency, wake-up, idle, hand-off and the wake floor"},
	{"sweep-only", NULL, pb_set_sweep_only,
	 "only workers x batches x waits, unordered: no ordered,\n"
	 "ring, work or headline points (for profiling one point)"},
	{"pin", NULL, pb_set_pin,
	 "pin producers, workers and the sink round-robin\n"
	 "(default: only the ring reference and the hand-off\n"
	 "threads are pinned)"},
	{"inflight", "N", pb_set_inflight,
	 "max_inflight per worker (default: the library's, 1024,\n"
	 "raised to B)"},
	{"ingress", "N", pb_set_ingress,
	 "ingress_capacity (default: the library's, 4096)"},
	{"egress", "N", pb_set_egress,
	 "egress_capacity (default: the library's, 1024)"},
	{"spin-ns", "N", pb_set_spin_ns,
	 "spin-sleep: spin_ns of every wait (default: the library's,\n"
	 "20000)"},
	{"yields", "N", pb_set_yields,
	 "spin-sleep: yields of every wait (default: the library's, 8)"},
	BENCH_OPT_CPUS("CPUs to use for pinning (default: all allowed)"),
	BENCH_OPT_SEED("seed of the order shuffles (default 1)"),
	BENCH_OPT_QUICK("short runs, the whole thing in under 30 s"),
	BENCH_OPT_CSV("CSV on stdout: producers,workers,B,wait,ordered,run,\n"
		      "Mjobs_per_s,p50_us,p99_us (p50/p99: bp_pipeline_stats "
		      "of\nthe run), then tagged blocks ring1x1, alone, work, "
		      "latency,\nhandoff, wakefloor"),
	BENCH_OPT_OUT,
	BENCH_OPT_NAME,
	BENCH_OPT_HELP,
	BENCH_OPT_END,
};

static const struct bench_cmd pb_cmd = {
	.name = "pipeline",
	.about = "End-to-end throughput and latency of bp_pipeline (producers "
		 "-> workers -> sink),\ninterleaved runs, medians; the bp_ring "
		 "1x1 reference in the same runs; low-load\nand wake-up "
		 "latency, idle CPU and the cross-core hand-off time.\n",
	.opts = pb_options,
	.epilog = "Progress goes to stderr. Exit status: 0 ok, 1 a run failed "
		  "its\nverification, 2 bad usage.\n",
	.max_runs = PB_MAX_RUNS,
};

static int pb_parse(int argc, char **argv, struct pb_opts *o)
{
	int rc;

	memset(o, 0, sizeof(*o));
	bench_args_init(&o->a, &pb_cmd, o);
	o->a.ms = 150;
	o->producers = 2;
	o->pool = 4096;
	o->work_ns = 1000;
	o->lat_ms = 100;
	o->wake_samples = 100;
	o->wake_gap_us = 5000;
	o->idle_ms = 1000;
	o->latency = 1;
	o->nworkers = bench_parse_uints("1,2,4,8,16", o->workers, PB_MAX_WLIST,
					1, BP_MAX_WORKERS);
	o->nbatches = bench_parse_uints("1,8,32,128", o->batches,
					PB_MAX_BATCHES, 1, BP_MAX_BATCH);
	o->nwaits = PB_NWAITS;
	for (int i = 0; i < PB_NWAITS; i++)
		o->waits[i] = i;

	rc = bench_opts_parse(&o->a, argc, argv);
	if (rc != BENCH_OPTS_RUN)
		return rc;
	for (int b = 0; b < o->nbatches; b++)
		if (o->batches[b] > o->pool / 2)
			/* a producer gathers a whole batch from its pool */
			return bench_usage_error(
				&o->a, "batch %u is more than half the pool %u",
				o->batches[b], o->pool);
	if (o->pool < 2 * PB_HEAD_B)
		return bench_usage_error(&o->a, "--pool must be >= %u",
					 2 * PB_HEAD_B);
	if (o->a.quick) {
		if (!o->a.runs_set)
			o->a.runs = 3;
		if (!o->a.ms_set)
			o->a.ms = 20;
		if (!o->lat_set)
			o->lat_ms = 30;
		if (!o->wake_set)
			o->wake_samples = 20;
		if (!o->idle_set)
			o->idle_ms = 500;
	}
	return BENCH_OPTS_RUN;
}

static double *pb_nan_array(size_t n)
{
	double *a = bench_zalloc(sizeof(double) * n);

	for (size_t i = 0; i < n; i++)
		a[i] = NAN;
	return a;
}

int bench_pipeline_main(int argc, char **argv)
{
	struct pb_opts o;
	struct pb_results *r;
	struct pb_producer *prod, *lp;
	char load0[128], load1[128];
	struct pb_report rep;
	size_t ncell, nw;
	int64_t t0;
	int rc;

	rc = pb_parse(argc, argv, &o);
	if (rc != BENCH_OPTS_RUN)
		return rc;
	pb_loadavg(load0, sizeof(load0));
	fprintf(stderr, "bpbench pipeline: load average at start: %s\n", load0);
	t0 = bench_now_ns();

	r = bench_zalloc(sizeof(*r));
	r->runs = (int)o.a.runs;
	pb_build_points(&o, r);
	ncell = (size_t)r->runs * (size_t)r->npoints;
	nw = (size_t)r->runs * PB_NWAITS;
	r->mj = pb_nan_array(ncell);
	r->p50 = pb_nan_array(ncell);
	r->p99 = pb_nan_array(ncell);
	r->lat_p50 = pb_nan_array(nw);
	r->lat_p99 = pb_nan_array(nw);
	r->lat_bp50 = pb_nan_array(nw);
	r->lat_bp99 = pb_nan_array(nw);
	r->same_p50 = pb_nan_array(nw);
	r->same_p99 = pb_nan_array(nw);
	r->wake_p50 = pb_nan_array(nw);
	r->wake_p99 = pb_nan_array(nw);
	r->wake_bp50 = pb_nan_array(nw);
	r->wake_bp99 = pb_nan_array(nw);
	r->idle = pb_nan_array(nw);
	r->handoff = pb_nan_array((size_t)r->runs);
	r->floor_p50 = pb_nan_array((size_t)r->runs);
	r->floor_p99 = pb_nan_array((size_t)r->runs);
	if (o.work_ns) {
		r->iters_per_ns = pb_calibrate();
		r->iters = (uint64_t)(r->iters_per_ns * o.work_ns + 0.5);
		if (r->iters == 0)
			r->iters = 1;
		fprintf(stderr,
			"bpbench pipeline: --work-ns %u = %" PRIu64
			" LCG steps (%.3f steps/ns)\n",
			o.work_ns, r->iters, r->iters_per_ns);
	}

	/* pools: allocated and touched once, recycled by every run */
	prod = bench_zalloc(sizeof(*prod) * o.producers);
	for (unsigned i = 0; i < o.producers; i++)
		pb_pool_init(&prod[i], i, o.pool, o.pool);
	lp = bench_zalloc(sizeof(*lp));
	pb_pool_init(lp, 0, 1, 1);
	lp->samples = bench_zalloc(sizeof(*lp->samples) * PB_MAX_SAMPLES);

	pb_sweep(&o, r, prod);
	if (o.latency)
		pb_latency_sweep(&o, r, lp, prod);
	pb_loadavg(load1, sizeof(load1));
	fprintf(stderr,
		"bpbench pipeline: done in %.1f s, every run verified (%" PRIu64
		" jobs); load average at end: %s\n",
		(double)(bench_now_ns() - t0) / 1e9, pb_jobs_verified, load1);

	rep = (struct pb_report){&o, r, load0, load1};
	rc = bench_emit(&o.a, pb_print_csv, pb_print_table, NULL, &rep);

	for (unsigned i = 0; i < o.producers; i++)
		pb_pool_fini(&prod[i]);
	pb_pool_fini(lp);
	free(prod);
	free(lp);
	free(r->mj);
	free(r->p50);
	free(r->p99);
	free(r->lat_p50);
	free(r->lat_p99);
	free(r->lat_bp50);
	free(r->lat_bp99);
	free(r->same_p50);
	free(r->same_p99);
	free(r->wake_p50);
	free(r->wake_p99);
	free(r->wake_bp50);
	free(r->wake_bp99);
	free(r->idle);
	free(r->handoff);
	free(r->floor_p50);
	free(r->floor_p99);
	free(r);
	return rc;
}
