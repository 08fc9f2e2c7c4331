/* SPDX-License-Identifier: MIT */
/*
 * batchpipe/pipeline.h - producers -> workers -> one result sink.
 *
 *   app threads                worker threads (N)                 sink thread
 *   bp_pipeline_submit(jobs, n) --> [ingress ring] --> burst <= B --> stage -->
 * [egress ring per worker]
 *                                                              --> sink(jobs,
 * n)
 *
 * Every job accepted by bp_pipeline_submit reaches the sink exactly once, with
 * a status (BP_JOB_OK, a negative errno, BP_JOB_CANCELLED); after drain or
 * abort, submitted == ok + failed + cancelled. With ordered output the sink
 * sees jobs in submission order. No lock is taken on the way.
 *
 * Lifecycle: bp_pipeline_config_init -> bp_pipeline_create -> start ->
 * bp_pipeline_submit ... -> bp_pipeline_drain (finish everything) or
 * bp_pipeline_abort (cancel what has not started) -> bp_pipeline_destroy.
 * Submits after drain or abort fail with -EPIPE; destroy on a running
 * pipeline drains first.
 *
 * Errors are negative errno values (bp_strerror()); the library never
 * prints, aborts or exits: it reports through the optional log callback.
 */
#ifndef BATCHPIPE_PIPELINE_H
#define BATCHPIPE_PIPELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <batchpipe/job.h>
#include <batchpipe/stage.h>
#include <batchpipe/wait.h>

#ifdef __cplusplus
extern "C" {
#endif

#pragma GCC visibility push(default)

struct bp_pipeline;

/* Limits checked by bp_pipeline_create (-EINVAL outside them). */
#define BP_MAX_WORKERS	256
#define BP_MAX_BATCH	4096
#define BP_MAX_INFLIGHT 65536
#define BP_MAX_RING	(1u << 24)

/* Log levels for the log callback. */
enum bp_log_level { BP_LOG_ERROR = 0, BP_LOG_WARN = 1, BP_LOG_INFO = 2 };

struct bp_pipeline_config {
	unsigned workers;	   /* 1..BP_MAX_WORKERS (default 2) */
	unsigned ingress_capacity; /* jobs queued before workers (default 4096)
				    */
	unsigned egress_capacity;  /* per worker, jobs queued for the sink
				      (default 1024) */
	unsigned max_batch; /* B: most jobs per dequeue / hand-off (default 32)
			     */
	unsigned max_inflight; /* per worker, >= max_batch (default 1024) */
	bool ordered; /* sink sees jobs in submission order (default false) */
	uint64_t flush_deadline_ns; /* bp_producer staging max age (default 50
				       us) */

	struct bp_wait_policy worker_wait; /* workers with nothing to do */
	struct bp_wait_policy sink_wait; /* the sink with nothing to deliver */
	struct bp_wait_policy
		producer_wait; /* bp_pipeline_submit on a full ingress */

	/* optional pinning: worker i runs on worker_cpus[i % n_worker_cpus] */
	const int *worker_cpus;
	unsigned n_worker_cpus;
	int sink_cpu; /* -1: not pinned (default) */

	const struct bp_stage *stage; /* required */
	void *stage_ctx;	      /* see bp_worker_stage_ctx() */

	/* required: receives completed jobs in batches, on the sink thread */
	void (*sink)(void *sink_ctx, struct bp_job **jobs, unsigned n);
	void *sink_ctx;

	/* optional: the library's only way to say something */
	void (*log)(void *log_ctx, enum bp_log_level level, const char *msg);
	void *log_ctx;
};

/* Fill *c with the defaults above (stage and sink left NULL). */
void bp_pipeline_config_init(struct bp_pipeline_config *c);

/*
 * Validate *c and build a pipeline (rings, threads not yet started).
 * Returns 0 and *pp, -EINVAL (the log callback, if any, says which field),
 * -ENOMEM. Nothing is left allocated on failure. *c may be freed afterwards
 * (worker_cpus is copied).
 */
int bp_pipeline_create(const struct bp_pipeline_config *c,
		       struct bp_pipeline **pp);

/*
 * Start the workers (running stage init) and the sink. Returns 0, -EINVAL
 * (already started, or stopped), a stage init error or a thread-creation
 * error; on failure nothing is left running and the pipeline can only be
 * destroyed. Call it once, from one thread, before any drain or abort.
 */
int bp_pipeline_start(struct bp_pipeline *p);

/* bp_pipeline_submit flags */
#define BP_SUBMIT_NONBLOCK 0x1u /* take what fits now; -EAGAIN if nothing */

/*
 * Submit n jobs; each gets seq, submit_ns and is owned by the pipeline
 * until the sink returns it. Blocking (default): waits for room, up to
 * timeout_ns (< 0: no limit), and returns n, or the count accepted before
 * the timeout, or -ETIMEDOUT if none. BP_SUBMIT_NONBLOCK: returns the count
 * accepted (1..n) or -EAGAIN. Any thread may submit; jobs of one thread
 * keep their order. Returns -EPIPE once drain or abort has begun, -EINTR
 * when a signal interrupted a sleep before any job was accepted, -EINVAL
 * before start, for n == 0, NULL jobs (or a NULL or odd job pointer) or an
 * unknown flag. Jobs not counted in the return value were not taken.
 */
int bp_pipeline_submit(struct bp_pipeline *p, struct bp_job **jobs, unsigned n,
		       unsigned flags, int64_t timeout_ns);

/*
 * Stop intake, let the workers finish every job, deliver everything, join
 * the threads. Returns 0 (also when already drained/aborted). May be
 * called from several threads: the first does the work, the others return
 * when it is done. After it, bp_pipeline_stats() shows submitted == ok +
 * failed + cancelled.
 */
int bp_pipeline_drain(struct bp_pipeline *p);

/*
 * Stop intake; jobs not yet taken by a worker reach the sink as
 * BP_JOB_CANCELLED; in-flight jobs finish or are cancelled through the
 * stage's cancel callback; join the threads. Returns 0. Also turns a drain
 * running in another thread into an abort.
 */
int bp_pipeline_abort(struct bp_pipeline *p);

/* Drain if running, then free everything. NULL is accepted. No other call
 * on the pipeline may be running or follow. */
void bp_pipeline_destroy(struct bp_pipeline *p);

/* ------------------------------------------------------- live changes */
/*
 * These take effect while the pipeline runs, without stopping workers:
 * workers read the configuration through RCU and pay one load per pass.
 * Each returns 0, -EINVAL for an out-of-range value (max_batch: 1 ..
 * min(BP_MAX_BATCH, max_inflight)), or -ENOMEM. They may be called from
 * any thread but not from a stage or sink callback.
 */
int bp_pipeline_set_max_batch(struct bp_pipeline *p, unsigned max_batch);
int bp_pipeline_set_flush_deadline(struct bp_pipeline *p, uint64_t ns);
int bp_pipeline_set_worker_wait(struct bp_pipeline *p,
				const struct bp_wait_policy *w);
/*
 * Replace the stage context. Returns once no worker can still be using the
 * old one: the caller may free it then.
 */
int bp_pipeline_set_stage_ctx(struct bp_pipeline *p, void *ctx);

/* ----------------------------------------------------------- producers */
/*
 * A producer handle stages jobs in a buffer of its own and submits them as
 * one batch (bp_pipeline_submit, blocking) when max_batch are staged, when a
 * call finds the oldest staged job older than the flush deadline, or on
 * bp_producer_flush. The deadline is a real max age, measured from the
 * oldest staged job (adding jobs never postpones it): once it passes, the
 * pipeline's flusher thread (started with the first handle) submits what is
 * staged even if the owner never calls again. The jobs of one handle enter
 * the pipeline in the order they were staged, whoever submits them.
 *
 * Drain and abort submit everything staged in every handle before intake
 * closes (abort: those jobs then reach the sink as BP_JOB_CANCELLED), so a
 * job whose bp_producer_submit returned 0 reaches the sink. From then on
 * the handles refuse jobs with -EPIPE. A live max_batch or flush deadline
 * applies to each handle's next batch at the latest.
 *
 * Threads: one thread at a time per handle (the owner; it may change, with
 * the caller ordering the hand-over); the flusher is the library's. The
 * owner pays no lock and no atomic read-modify-write per job. Destroy
 * handles before their pipeline: bp_pipeline_destroy logs an error for each
 * handle left, closes it (its calls return -EPIPE, bp_producer_staged 0)
 * and bp_producer_destroy still frees it afterwards.
 */
struct bp_producer;

/*
 * Create a handle on p, before or after bp_pipeline_start (the first one
 * starts the flusher thread). Any thread. Returns 0 and *out (after drain
 * or abort the handle is closed: its submits return -EPIPE), -EINVAL (NULL
 * argument), -ENOMEM, or the flusher's thread-creation error (logged).
 */
int bp_producer_create(struct bp_pipeline *p, struct bp_producer **out);
/*
 * Stage one job; may submit (blocking, like bp_pipeline_submit). Returns 0:
 * the job is staged or submitted and will reach the sink. Otherwise the job
 * was not taken (jobs staged by earlier calls stay staged, for
 * bp_producer_flush): -EINVAL (NULL handle or job, odd job pointer, or the
 * pipeline not started yet), -EPIPE (drain or abort has begun, or the
 * pipeline was destroyed), -EINTR (a signal interrupted a submit before it
 * took anything). The owner thread only.
 */
int bp_producer_submit(struct bp_producer *pr, struct bp_job *job);
/*
 * Submit everything staged (blocking; waits for a flush of the flusher in
 * progress, then submits what is left). Returns 0 (nothing left staged),
 * -EINVAL (NULL), or bp_pipeline_submit's errors (-EPIPE, -EINTR): the jobs
 * not accepted stay staged, in order. The owner thread only.
 */
int bp_producer_flush(struct bp_producer *pr);
/*
 * Jobs staged now, not yet handed to bp_pipeline_submit (by the owner, the
 * flusher or drain); 0 for NULL. After drain: 0, or what a failed flush
 * left. The owner thread only.
 */
unsigned bp_producer_staged(const struct bp_producer *pr);
/*
 * Flush, then free. NULL is accepted. Returns 0, or the flush's error: the
 * jobs still staged then were not submitted (the caller owns them). The
 * owner thread only; no call on the handle may follow.
 */
int bp_producer_destroy(struct bp_producer *pr);

/* --------------------------------------------------------- statistics */

#define BP_BATCH_BUCKETS 13  /* batch sizes: bucket i holds [2^i, 2^(i+1)) */
#define BP_LAT_BUCKETS	 256 /* latency: 4 buckets per power of two of ns */

struct bp_pipeline_stats {
	uint64_t submitted; /* jobs accepted by bp_pipeline_submit */
	uint64_t ok, failed, cancelled; /* delivered to the sink, by status */
	uint64_t worker_batches;	/* dequeues that returned jobs */
	uint64_t worker_jobs;		/* jobs taken by workers */
	uint64_t sink_batches;		/* sink callback calls */
	uint64_t batch_hist[BP_BATCH_BUCKETS]; /* worker dequeue sizes */
	unsigned ingress_high_water;
	unsigned egress_high_water; /* largest of the workers' egress rings */
	uint64_t lat_hist[BP_LAT_BUCKETS];	      /* submit -> sink, see
							 bp_lat_bucket_ns */
	uint64_t lat_p50_ns, lat_p99_ns, lat_p999_ns; /* bucket upper bounds */
};

/*
 * Fill *s with the sum of the per-thread counters (a snapshot while
 * running; exact after drain/abort). Returns 0 or -EINVAL.
 */
int bp_pipeline_stats(struct bp_pipeline *p, struct bp_pipeline_stats *s);

/*
 * Write the stats as one JSON object into buf (snprintf rules: returns the
 * length it needs, excluding the NUL; truncates if size is too small).
 */
int bp_pipeline_stats_json(const struct bp_pipeline_stats *s, char *buf,
			   size_t size);

/*
 * The pipeline's statistics and its stage's, as one JSON object
 * {"pipeline":{..},"stage":{"name":"..","stats":{..} or null}}: snprintf
 * rules (returns the length needed, excluding the NUL), -EINVAL.
 */
int bp_pipeline_report_json(struct bp_pipeline *p, char *buf, size_t size);

/* Upper bound in ns of latency bucket i. */
uint64_t bp_lat_bucket_ns(unsigned i);

/* -------------------------------------------------------------- pool */
/*
 * A pool of fixed-size objects (cache-line aligned) for applications that
 * want their jobs from the library: any thread allocates, any thread frees
 * (cheap cross-thread free: the sink frees what producers allocated).
 */
struct bp_pool;

/* Returns 0, -EINVAL (size 0, count 0 or too large), -ENOMEM. */
int bp_pool_create(size_t obj_size, unsigned count, struct bp_pool **out);
/* Up to n objects into objs; returns the count (0 when empty). */
unsigned bp_pool_alloc(struct bp_pool *pool, void **objs, unsigned n);
/* Return n objects (from this pool). Returns 0, or -EINVAL for a foreign
 * pointer. */
int bp_pool_free(struct bp_pool *pool, void *const *objs, unsigned n);
unsigned bp_pool_available(const struct bp_pool *pool);
/* All objects must have been freed back. NULL is accepted. */
void bp_pool_destroy(struct bp_pool *pool);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif /* BATCHPIPE_PIPELINE_H */
