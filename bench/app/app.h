/* SPDX-License-Identifier: MIT */
/*
 * app.h - what the parts of `bpbench app` share: its options, the job, the
 * producers' slot pools, the sink's check, one run's outcome and the
 * results of the sweep; the entry points of its parts:
 *
 *   app/app.c            the subcommand: options, the interleaved sweep
 *   app/crc32c.c         the work: CRC32C, and the independent reference
 *   app/jobs.c           payloads, expected CRCs, slot pools, the check
 *   app/run.c            one verified run: producers, clocks, the totals
 *   app/run_batchpipe.c  (a) producer handles -> bp_pipeline, ordered
 *   app/run_mutex.c      (b) mutex + condvar queues, a reorder buffer
 *   app/mutexq.c         the mutex + condvar queue of (b)
 *   app/ceiling.c        (c) the compute ceiling, no hand-off
 *   app/report.c         medians, ratios, the table, headline, CSV
 */
#ifndef BPBENCH_APP_H
#define BPBENCH_APP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <batchpipe/job.h>

#include "lab/bpbench.h"

#define APP_PAYLOAD	 256 /* bytes a job carries */
#define APP_MAX_BATCHES	 16
#define APP_MAX_BATCH	 1024 /* bp_pipeline_config_init's max_inflight */
#define APP_MAX_THREADS	 64   /* producers, workers */
#define APP_MAX_RUNS	 1000
#define APP_MAX_JOBS_ALL (1u << 28) /* producers x jobs: the expected CRCs */
#define APP_MAX_POOL	 (1u << 20)

enum app_variant { APP_BATCHPIPE, APP_MUTEX, APP_CEILING, APP_NVARIANTS };

/* "batchpipe", "mutex", "ceiling": the CSV's and the table's names */
extern const char *const app_variant_names[APP_NVARIANTS];

struct app_opts {
	struct bench_args a; /* runs, seed, cpus, quick, csv, out, name */
	unsigned producers, workers;
	unsigned jobs; /* per producer */
	unsigned pool; /* job slots per producer */
	unsigned batches[APP_MAX_BATCHES];
	int nbatches;
	bool run[APP_NVARIANTS];  /* --variants */
	unsigned ceiling_threads; /* min(workers, usable CPUs) */
	/* expected[p * jobs + k]: CRC32C of producer p's job k (jobs.c) */
	const uint32_t *expected;
};

/*
 * One job: the pipeline's header first (so a struct bp_job * is a struct
 * app_job *), then what the sink checks, then the payload on a line of its
 * own. The mutex variant carries the header too, unused: both move the
 * same objects.
 */
struct app_job {
	struct bp_job hdr;
	uint64_t k;    /* the producer's own sequence number */
	uint64_t gseq; /* (b): global submission order, set under the lock */
	uint32_t producer; /* index of the producer that made it */
	uint32_t crc;	   /* the work's result; 0 until a worker set it */
	uint8_t payload[APP_PAYLOAD] __attribute__((aligned(BENCH_CACHELINE)));
} __attribute__((aligned(BENCH_CACHELINE)));

/* ---- crc32c.c ----------------------------------------------------------- */

/* Build the tables and check every implementation (exits 1 on a fault). */
void app_crc32c_init(void);
/* The work: table-driven slice-by-8 software CRC32C. */
uint32_t app_crc32c(const void *buf, size_t len);
/* The reference the check uses: the SSE4.2 instruction where the CPU has
 * it, else byte at a time; never the code of the work. */
uint32_t app_crc32c_ref(const void *buf, size_t len);
/* Which reference app_crc32c_ref uses: "sse4.2" or "bytewise". */
const char *app_crc32c_ref_name(void);

/* ---- jobs.c ------------------------------------------------------------- */

/* The payload of producer p's job k, deterministic; j->producer, k set, crc
 * cleared. */
void app_fill(struct app_job *j, uint32_t p, uint64_t k);

/* The miscompute fault's job (jobs.c): k of producer 0, or UINT64_MAX. */
extern uint64_t app_fault_miscompute_k;

/* The work of one job: its CRC32C into j->crc. */
static inline void app_compute(struct app_job *j)
{
	uint32_t crc = app_crc32c(j->payload, APP_PAYLOAD);

	if (__builtin_expect(j->k == app_fault_miscompute_k && !j->producer, 0))
		crc ^= 1;
	j->crc = crc;
}

/* Read BPBENCH_APP_FAULT once (exit 2 on a bad value). */
void app_fault_read(void);

/* The expected CRCs of every job, with app_crc32c_ref; sets o->expected. */
void app_expected_build(struct app_opts *o);

/*
 * A producer's job slots, used round robin: job k lives in slot k % size
 * and may be written once the sink has released job k - size. `released`
 * is the count of this producer's jobs the sink has checked.
 */
struct app_pool {
	struct app_job *slots;
	unsigned size;
	/* written by the sink, read by the producer: a line of its own */
	atomic_uint_least64_t released
		__attribute__((aligned(BENCH_CACHELINE)));
} __attribute__((aligned(BENCH_CACHELINE)));

/* The sink's state: what it expects next, per producer and overall. */
struct app_check {
	const struct app_opts *o;
	struct app_pool *pools;
	uint64_t next_gseq;   /* jobs checked = the next global seq */
	uint64_t *next_k;     /* per producer: its next job */
	uint64_t *published;  /* per producer: the last `released` stored */
	uint64_t fault_at;    /* drop, dup, reorder: where; else UINT64_MAX */
	struct app_job *held; /* the reorder fault's job, held back */
	uint64_t held_gseq;
	const char *variant;
	unsigned B;
};

/* The sink's state for one run of `variant` at B, pools' credits at 0. */
void app_check_init(struct app_check *c, const struct app_opts *o,
		    struct app_pool *pools, const char *variant, unsigned B);
void app_check_fini(struct app_check *c);
void __attribute__((noreturn))
app_check_failed(const struct app_check *c, const struct app_job *j,
		 uint64_t gseq);
void app_check_fault(struct app_check *c, struct app_job *j, uint64_t gseq);

/*
 * The sink checks one job delivered as the gseq-th: it must be the next in
 * submission order overall and for its producer, with the CRC32C of its
 * payload. Anything else is fatal (exit 1).
 */
static inline void app_check_job(struct app_check *c, struct app_job *j,
				 uint64_t gseq)
{
	const struct app_opts *o = c->o;
	uint32_t p = j->producer;

	if (__builtin_expect(c->next_gseq == c->fault_at, 0)) {
		app_check_fault(c, j, gseq);
		return;
	}
	if (__builtin_expect(
		    gseq != c->next_gseq || p >= o->producers ||
			    j->k != c->next_k[p] || j->k >= o->jobs ||
			    j->crc != o->expected[(uint64_t)p * o->jobs + j->k],
		    0))
		app_check_failed(c, j, gseq);
	c->next_k[p]++;
	c->next_gseq++;
}

/* After a sink batch: give the checked jobs' slots back to their
 * producers. */
void app_check_release(struct app_check *c);

/* ---- run.c -------------------------------------------------------------- */

struct app_run;

/* A producer thread of a variant: its pool and where it stands in it. */
struct app_producer {
	struct app_run *run;
	struct app_pool *pool;
	void *ctx; /* the variant's */
	uint32_t index;
	uint64_t limit;	     /* jobs below this have a free slot */
	uint64_t slot_waits; /* times it found its pool full */
	pthread_t thread;
} __attribute__((aligned(BENCH_CACHELINE)));

/* What one run measured. */
struct app_outcome {
	double mps;	   /* jobs / wall, 10^6/s */
	double cpu_ns_job; /* process CPU time in the run / jobs */
	uint64_t slot_waits;
};

struct app_run {
	const struct app_opts *o;
	unsigned B;
	struct app_check check;
	struct app_producer *prods;
	pthread_barrier_t start; /* the producers and the main thread */
	int64_t t0, cpu0, t1, cpu1;
};

/* The slot of producer pr's job k, filled, once the sink has freed it. */
struct app_job *app_job_take(struct app_producer *pr, uint64_t k);

/*
 * For the variants: start the producers (fn(pr) each, unpinned; they call
 * app_run_wait_start first), then app_run_begin releases them and starts
 * the clocks; app_run_join_producers; app_run_end stops the clocks once
 * every job was delivered.
 */
void app_run_spawn_producers(struct app_run *r, void *(*fn)(void *), void *ctx);
void app_run_wait_start(struct app_run *r);
void app_run_begin(struct app_run *r);
void app_run_join_producers(struct app_run *r);
void app_run_end(struct app_run *r);

/* One verified run of variant v at batch B (bench_die on a failure). */
void app_run_verified(const struct app_opts *o, enum app_variant v, unsigned B,
		      struct app_outcome *out);
/* Free what the runs keep between them (the pools). */
void app_run_cleanup(void);

/* The variants' runs (run_batchpipe.c, run_mutex.c, ceiling.c). */
void app_run_batchpipe(struct app_run *r);
void app_run_mutex(struct app_run *r);
void app_run_ceiling(struct app_run *r);

/* ---- report.c ----------------------------------------------------------- */

struct app_results {
	int runs, nbatches;
	/* [run][batch][variant] */
	struct app_outcome *cell;
};

static inline struct app_outcome *app_cell(const struct app_results *r, int run,
					   int b, int v)
{
	return &r->cell[((size_t)run * (size_t)r->nbatches + (size_t)b) *
				APP_NVARIANTS +
			(size_t)v];
}

/* What the printers get (bench_emit's ctx). */
struct app_report {
	const struct app_opts *o;
	const struct app_results *r;
};

void app_print_csv(FILE *f, const void *report);
void app_print_table(FILE *f, const void *report);

#endif /* BPBENCH_APP_H */
