/* SPDX-License-Identifier: MIT */
/*
 * harness.h - what the experiments of `bpbench pipeline` share: the jobs
 * and their check values, the producers' recycling pools, one pipeline run
 * (stage, sink, producer threads, verification) and the throughput run
 * built from them. The experiments themselves are the other files of
 * pipeline/ (declared in experiments.h).
 *
 * Jobs are allocated and touched once per producer at start (page faults on
 * this VM cost more than the pipeline), then recycled: the sink gives each
 * delivered job back to its producer through a single-producer,
 * single-consumer bp_ring (the producer's free ring).
 */
#ifndef BPBENCH_PIPELINE_HARNESS_H
#define BPBENCH_PIPELINE_HARNESS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <batchpipe/pipeline.h>

#include "lab/bpbench.h"

#define PB_MAX_WLIST	 8
#define PB_MAX_BATCHES	 8
#define PB_MAX_RUNS	 100
#define PB_MAX_PRODUCERS 64
#define PB_MAX_POINTS	 512
#define PB_MAX_STAGES	 8
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

/* The wait strategies, by index: --waits and the tables use the names. */
struct pb_wait {
	const char *name;
	enum bp_wait_strategy strategy;
};
extern const struct pb_wait pb_waits[PB_NWAITS];

struct pb_opts {
	struct bench_args a; /* runs, ms, seed, cpus, output */
	unsigned producers, pool, work_ns, lat_ms, wake_samples;
	unsigned wake_gap_us, idle_ms;
	unsigned inflight, ingress, egress; /* 0: the library's default */
	unsigned lanes; /* ingress_lanes of unordered pipelines (0: 1) */
	unsigned workers[PB_MAX_WLIST];
	int nworkers;
	unsigned batches[PB_MAX_BATCHES];
	int nbatches;
	int waits[PB_NWAITS];
	int nwaits;
	int pin, latency, sweep_only, plain;
	int warmup; /* the unrecorded run before the sweep */
	int sweep_ordered; /* --ordered (with --sweep-only, checked): the
			    * sweep's pipelines are ordered */
	unsigned stages; /* --stages: each pipeline a chain of this many */
	int workers_set, batches_set; /* given: --stages keeps them */
	int lat_set, wake_set, idle_set; /* given: --quick leaves them */
};

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
	int64_t cpu_ns; /* throughput runs: this thread's CPU over its run */
	int err;
	/* latency runs */
	int64_t *samples;
	unsigned nsamples, max_samples;
} __attribute__((aligned(BENCH_CACHELINE)));

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

/*
 * The shape of a run's pipeline (pipeline/chain.c): one stage, or a chain
 * of `stages`, each with W workers and its share of the work; serial: the
 * run's serial part (serial_iters of every job's work) in a serial stage
 * after one parallel stage, or, PB_SERIAL_MUTEX, inside a mutex in the
 * one stage.
 */
enum pb_serial { PB_SERIAL_NONE, PB_SERIAL_STAGE, PB_SERIAL_MUTEX };

/* One stage's part of every job's work (its stage context). */
struct pb_part {
	const struct pb_run *run;
	uint64_t iters;	      /* LCG steps, continuing the previous part's */
	uint64_t lock_iters;  /* PB_SERIAL_MUTEX: steps under the lock */
	pthread_mutex_t *lock;
	bool first;	      /* starts from the payload */
};

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
	const char *variant;  /* in messages: NULL = the pipeline (or alone) */
	unsigned stages;      /* 1: one stage; else a chain (pb_part each) */
	enum pb_serial serial;
	uint64_t serial_iters; /* of iters, what the serial part does */
	struct pb_part parts[PB_MAX_STAGES];
	pthread_mutex_t lock;  /* PB_SERIAL_MUTEX */
	pthread_barrier_t start;
	struct pb_sink_state sink;
	atomic_int stop __attribute__((aligned(BENCH_CACHELINE)));
	atomic_uint producers_left;
	int64_t t_drain_end;
};

/*
 * cpu_ns: CPU time of the whole process from the start of the run to its
 * end (drain returned, or the plain variant's threads joined) per job;
 * prod_cpu_ns: the producer threads' part of it. NAN where not measured.
 */
struct pb_result {
	double mjobs, p50_us, p99_us, cpu_ns, prod_cpu_ns;
};

struct pb_lat_result {
	double p50_us, p99_us;	     /* benchmark: submit call -> sink */
	double bp_p50_us, bp_p99_us; /* bp_pipeline_stats of the run */
	unsigned n;
};

/* ---- the harness (pipeline/harness.c) ------------------------------------ */

/* spin_ns and yields of every spin-sleep policy (-1: the default) */
extern int pb_spin_ns, pb_yields;
/* Jobs checked by every pb_verify so far (reported at the end). */
extern uint64_t pb_jobs_verified;

/* The --work-ns arithmetic, and its result computed the short way. */
uint64_t pb_spin(uint64_t x, uint64_t iters);
uint64_t pb_spin_jump(uint64_t x, uint64_t iters);
uint64_t pb_seq_sum(uint64_t n);
/* LCG steps per ns on this CPU, median of 7 */
double pb_calibrate(void);

void pb_pool_init(struct pb_producer *pr, unsigned id, unsigned njobs,
		  unsigned batch_cap);
void pb_pool_fini(struct pb_producer *pr);

/* A run's life: init, pipeline up, producers ready, ..., verify, fini. */
void pb_run_init(struct pb_run *run, const struct pb_opts *o,
		 struct pb_producer *prod, unsigned P);
void pb_pipeline_up(struct pb_run *run);
void pb_prepare_producers(struct pb_run *run);
void pb_verify(struct pb_run *run, const struct bp_pipeline_stats *st);
void pb_run_fini(struct pb_run *run);

/* What the producer threads do: take free jobs, stamp them, submit them. */
bool pb_take_free(struct pb_producer *pr, unsigned want);
void pb_stamp(struct pb_producer *pr, unsigned n);
void pb_submit_held(struct pb_producer *pr);
void pb_last_out(struct pb_run *run);

/* The stage's work on a batch, and the sink's check, without a pipeline. */
void pb_stage_work(const struct pb_run *run, struct bp_job **jobs, unsigned n);
void pb_sink(void *ctx, struct bp_job **jobs, unsigned n);

void pb_policy(struct bp_wait_policy *pol, int wait);
/* A thread pinned to cpu (-1: not pinned); dies on failure. */
void pb_spawn(pthread_t *t, void *(*fn)(void *), void *arg, int cpu);

/* One throughput run of one point. */
/* pb_run_once with a shape: stages (1: one), serial part, its steps. */
struct pb_result pb_run_shaped(const struct pb_opts *o,
			       struct pb_producer *prod, unsigned P, unsigned W,
			       unsigned B, int wait, bool ordered,
			       uint64_t iters, unsigned ms, unsigned stages,
			       enum pb_serial serial, uint64_t serial_iters);
struct pb_result pb_run_once(const struct pb_opts *o, struct pb_producer *prod,
			     unsigned P, unsigned W, unsigned B, int wait,
			     bool ordered, uint64_t iters, unsigned ms);
/* The benchmark's own per-job work in one thread: M jobs/s. */
double pb_alone_once(const struct pb_opts *o, struct pb_producer *prod,
		     unsigned B, unsigned ms);

#endif /* BPBENCH_PIPELINE_HARNESS_H */
