/* SPDX-License-Identifier: MIT */
/*
 * batchpipe/pipeline.h - producers -> workers -> one result sink.
 *
 *   app threads           worker threads (N)               sink thread
 *   bp_pipeline_submit --> [ingress ring] --> burst <= B --> stage
 *        (jobs, n)                                             |
 *                     sink(jobs, n) <-- [egress ring per worker]
 *
 * Every job accepted by bp_pipeline_submit reaches the sink exactly once, with
 * a status (BP_JOB_OK, a negative errno, BP_JOB_CANCELLED); after drain or
 * abort, submitted == ok + failed + cancelled. With ordered output the sink
 * sees jobs in submission order. No lock is taken on the way.
 *
 * Lifecycle: bp_pipeline_config_init -> bp_pipeline_create -> start ->
 * bp_pipeline_submit ... -> bp_pipeline_drain (finish everything; with
 * bp_pipeline_drain_timeout, up to a deadline) or bp_pipeline_abort (cancel
 * what has not started) -> bp_pipeline_destroy. Submits and live changes
 * after drain or abort began fail with -EPIPE; destroy on a running
 * pipeline drains first. Calls that would wait for the pipeline's own
 * threads fail with -EDEADLK when made from a stage or sink callback.
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
#define BP_MAX_LANES	64

/* Log levels for the log callback. */
enum bp_log_level { BP_LOG_ERROR = 0, BP_LOG_WARN = 1, BP_LOG_INFO = 2 };

/* What a thread the library created is for (the thread hooks' role). */
enum bp_thread_role {
	BP_THREAD_WORKER = 0,	     /* index: the worker, 0..workers-1 */
	BP_THREAD_SINK = 1,	     /* index 0 */
	BP_THREAD_FLUSHER = 2,	     /* producers' staging flusher */
	BP_THREAD_RDMA_PROGRESS = 3, /* an RDMA node's rail; index: the rail */
};

/*
 * A thread hook: called on the library's thread itself (pthread_self() is
 * that thread), with its role and index and the config's thread_ctx.
 * Hooks of different threads run concurrently.
 */
typedef void bp_thread_hook(void *thread_ctx, enum bp_thread_role role,
			    unsigned index);

/*
 * ------------------------------------------------------ chains of stages
 *
 *   producers -> [ingress] -> stage 0 workers -> [link] -> stage 1 workers
 *      -> ... -> stage N-1 workers -> [egress per worker] -> sink
 *
 * Each stage has its own stage table and context, its own workers, batch
 * size, in-flight limit and CPUs. A worker of stage k hands its completed
 * batch to stage k+1 itself, through the link in front of stage k+1: a
 * ring of the library's, one reservation and one publication per batch
 * (never an atomic per job), with no other thread in between. The stages
 * run concurrently; a job is in one stage at a time.
 *
 * Failures: a job that a stage completes with a status other than
 * BP_JOB_OK skips the later stages and goes to the sink, with its status,
 * and job->stage says which stage failed it first; unless the next stage
 * has BP_STAGE_TAKES_FAILED, which gets the failed jobs too (a cancelled
 * job always skips). A stage may be serial in order (BP_STAGE_SERIAL).
 * Every accepted job reaches the sink exactly once, as in a one-stage
 * pipeline.
 *
 * Order: ordered output is submission order end to end, whatever order
 * the stages complete jobs in. An ordered chain bounds the jobs between
 * ingress and delivery by chain_max_inflight (the sink's reorder window);
 * an unordered chain does so only when chain_max_inflight is set.
 *
 * bp_worker_id() is the worker's index within its stage (0..workers-1),
 * so a stage that keeps per-worker slots (the RDMA stage) works at any
 * place in a chain. Drain finishes the stages in order: stage k+1's
 * intake ends when every worker of stage k has ended. Abort cancels what
 * every stage has not started.
 */
#define BP_MAX_STAGES 16

/* bp_chain_stage.flags */
#define BP_STAGE_TAKES_FAILED 0x1u /* also take jobs an earlier stage failed */
/*
 * serial in order (oneTBB's serial_in_order filter): one worker, and its
 * process sees the jobs in submission order, one call after another, every
 * job that reaches the stage (a job an earlier stage failed is skipped in
 * its turn, unless BP_STAGE_TAKES_FAILED). The stages before it hand
 * failed jobs on instead of to the sink, so that none leaves a gap; the
 * chain then has a gate (chain_max_inflight) bounding its reorder buffer.
 */
#define BP_STAGE_SERIAL 0x2u

struct bp_chain_stage {
	const struct bp_stage *stage; /* required (copied by create) */
	void *stage_ctx;   /* NULL: stage->ctx */
	unsigned workers;  /* 1..BP_MAX_WORKERS */
	unsigned max_batch;    /* 0: the config's max_batch */
	unsigned max_inflight; /* per worker, 0: the config's max_inflight */
	/* jobs queued in front of this stage: stage 0's is the config's
	 * ingress_capacity, and this must be 0 there; later stages' links
	 * (0: ingress_capacity) */
	unsigned capacity;
	unsigned flags; /* BP_STAGE_TAKES_FAILED, BP_STAGE_SERIAL */
	/* optional pinning, as the config's worker_cpus */
	unsigned n_worker_cpus;
	const int *worker_cpus;
	uint64_t reserved_[4]; /* zero */
};

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
	void *stage_ctx; /* see bp_worker_stage_ctx(); NULL: stage->ctx */

	/*
	 * required: receives completed jobs in batches, on the sink thread.
	 * The jobs are the application's from the call on (the library reads
	 * nothing of them after): it may free, reuse or resubmit them before
	 * it returns. The jobs array is the library's, valid during the call.
	 */
	void (*sink)(void *sink_ctx, struct bp_job **jobs, unsigned n);
	void *sink_ctx;

	/* optional: the library's only way to say something */
	void (*log)(void *log_ctx, enum bp_log_level level, const char *msg);
	void *log_ctx;

	/*
	 * optional: thread_start runs first on every thread the pipeline
	 * creates (workers, the sink, the producers' flusher), before
	 * anything else there, the stage's init included; thread_stop runs
	 * last on it, after the stage's fini, just before the thread ends
	 * (bp_pipeline_drain, abort, a failed start or destroy joins it).
	 * Each runs once per thread. Use them to pin, name (the library has
	 * named it "bp-worker-N", "bp-sink" or "bp-flush-0" already), set
	 * the scheduling policy, or register the
	 * thread with a runtime (liburcu included: see "live changes") and
	 * unregister it. The threads start with every signal blocked but
	 * those a fault raises (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP,
	 * SIGSYS), so that signals meant for the application never land on
	 * them; a hook may unblock some for its thread.
	 */
	bp_thread_hook *thread_start;
	bp_thread_hook *thread_stop;
	void *thread_ctx;

	/*
	 * optional: a chain of stages (see "chains of stages" below) instead
	 * of the one stage above. With n_stages > 0, stage must be NULL, and
	 * workers, worker_cpus, n_worker_cpus and stage_ctx are not used:
	 * each entry has its own; max_batch and max_inflight are the defaults
	 * of entries that leave theirs 0. The array is copied by create.
	 */
	const struct bp_chain_stage *stages;
	unsigned n_stages; /* 0..BP_MAX_STAGES */
	/*
	 * a chain's limit on jobs taken from ingress and not yet delivered
	 * (0: unordered without a serial stage, none; ordered, or a serial
	 * stage after the first, the sum of workers * max_inflight over the
	 * stages); a one-stage pipeline must leave it 0
	 */
	unsigned chain_max_inflight;
	/*
	 * Ingress lanes (0 or 1: one ingress ring, the default). A power of
	 * two up to BP_MAX_LANES: ingress is that many rings, each with
	 * ingress_capacity / ingress_lanes slots (rounded up, to a power
	 * of two as every ring), and a
	 * producer reserves in its own lane, so producers do not contend
	 * for one claim. bp_pipeline_submit uses the calling thread's lane
	 * (threads are dealt lanes round-robin on their first submit), a
	 * producer handle a lane of its own, fixed at its creation. Workers
	 * take from the lanes in turn. A job's seq is then its position in
	 * its lane times ingress_lanes plus the lane: unique, increasing
	 * within a lane, not dense, so lanes refuse (-EINVAL) ordered
	 * output and serial stages, which need seqs in submission order.
	 */
	unsigned ingress_lanes;
	uint32_t reserved32_; /* zero */
	/*
	 * Room for fields of later versions, so that the struct keeps its
	 * size (callers allocate it). bp_pipeline_config_init zeroes it, and
	 * it must stay zero: bp_pipeline_create returns -EINVAL (logged) when
	 * it is not, which is what a program built against newer headers that
	 * sets a field this library does not know gets. A field added here
	 * means "as before" when zero.
	 */
	uint64_t reserved_[5];
};

/* Fill *c with the defaults above (stage and sink left NULL). NULL is
 * ignored. */
void bp_pipeline_config_init(struct bp_pipeline_config *c);

/*
 * Validate *c and build a pipeline (rings, threads not yet started).
 * Returns 0 and *pp, -EINVAL (the log callback, if any, says which field),
 * -ENOMEM. Nothing is left allocated on failure. *c may be freed afterwards:
 * worker_cpus and the stage table (*c->stage) are copied, so a stage table
 * built on the caller's stack is fine. What the table points to (its name,
 * stage_ctx) must stay valid while the pipeline exists.
 */
int bp_pipeline_create(const struct bp_pipeline_config *c,
		       struct bp_pipeline **pp);

/*
 * Start the workers (running stage init) and the sink. Returns 0, -EINVAL
 * (NULL; a second call, also one made while the first runs, from another
 * thread or a stage init; or already stopped: each logged), a stage init
 * error or a thread-creation error; on failure nothing is left running and
 * the pipeline can only be destroyed. Call it once, from an application
 * thread, before any drain or abort.
 */
int bp_pipeline_start(struct bp_pipeline *p);

/* bp_pipeline_submit flags */
#define BP_SUBMIT_NONBLOCK 0x1u /* take what fits now; -EAGAIN if nothing */

/*
 * Submit n jobs; each gets seq, submit_ns and is owned by the pipeline until
 * the sink callback is called with it. Blocking (default): waits for room, up
 * to timeout_ns (< 0: no limit), and returns n, or the count accepted before
 * the timeout, or -ETIMEDOUT if none. Finding ingress (with lanes: the calling
 * thread's lane) full, a submit without a
 * limit waits until half of it is free (so that it comes back to room for many
 * batches, not for one), for a millisecond at most, then for room for what it
 * has left; one with a limit waits for room for what it has left, and takes any
 * room there is at the limit. BP_SUBMIT_NONBLOCK: returns the count accepted
 * (1..n) or -EAGAIN. Any thread may submit; jobs of one thread keep their
 * order. Returns -EPIPE once drain or abort has begun, -EINTR when a signal
 * interrupted a sleep before any job was accepted, -EINVAL before start,
 * for n == 0 or n > INT_MAX, NULL jobs (or a NULL or odd job pointer) or an
 * unknown flag. From a stage or sink callback of this pipeline a blocking
 * submit that finds ingress full returns -EDEADLK (or the count accepted
 * before; logged) instead of waiting for room only its own thread could
 * make; BP_SUBMIT_NONBLOCK works there as anywhere. Jobs not counted in the
 * return value were not taken.
 */
int bp_pipeline_submit(struct bp_pipeline *p, struct bp_job **jobs, unsigned n,
		       unsigned flags, int64_t timeout_ns);

/*
 * Wait until every job accepted before the call has been delivered to the
 * sink (the sink callback has been called with it), up to timeout_ns (< 0:
 * no limit), without ending the pipeline: intake stays open, and other
 * threads submit meanwhile (their jobs are not waited for, though some may
 * be delivered first). Accepted: taken by bp_pipeline_submit, or staged by
 * bp_producer_submit in any handle of this pipeline (the flusher submits
 * those at once, without waiting for their flush deadline). Ordered
 * pipelines deliver those jobs in order, as always; jobs cancelled by an
 * abort count as delivered (with their status).
 *
 * Returns 0; -ETIMEDOUT at the deadline (logged, with how many jobs the
 * pipeline holds); -EDEADLK from a stage or sink callback of this
 * pipeline (logged: its own thread would have to deliver); -EPIPE when a
 * drain or abort that gave up at its deadline left jobs of before the call
 * staged in handles (bp_producer_destroy returns them); -EINVAL for NULL.
 * Before bp_pipeline_start: 0 (nothing was accepted). During a drain or
 * abort it waits for the end of the stream. Any thread, and several at
 * once; not concurrently with bp_pipeline_destroy.
 */
int bp_pipeline_flush(struct bp_pipeline *p, int64_t timeout_ns);

/*
 * Stop intake, let the workers finish every job, deliver everything, join
 * the threads, waiting up to timeout_ns (< 0: no limit). Returns 0 once
 * every job was delivered, those that producer handles had staged
 * included, and the threads joined (also when already drained or aborted,
 * or never started); -ETIMEDOUT at the deadline, after logging
 * (BP_LOG_ERROR) which workers still hold how many jobs (taken, completed,
 * handed to the sink) and whether the sink is behind, or when a handle's
 * owner held its staged jobs in a blocked submit past it (they stay
 * staged, and the handle's calls return -EPIPE with them); -EDEADLK
 * (logged) from a stage or sink callback of this pipeline, which would wait
 * for its own thread; -EINVAL for NULL.
 *
 * After -ETIMEDOUT the pipeline keeps stopping (intake stays closed, the
 * threads keep running): call drain or drain_timeout again to keep waiting (its
 * 0 then says the workers' jobs were delivered; jobs the timed-out call left
 * staged in producer handles stay theirs, and bp_producer_destroy returns
 * -EPIPE with them), bp_pipeline_abort to have the stage cancel what it holds,
 * or bp_pipeline_destroy (which then aborts). May be called from several
 * threads at once, each with its own timeout: one joins the threads, the others
 * wait for it up to their deadlines, and one of them takes over if it gives up.
 * After a 0 return, bp_pipeline_get_stats() shows submitted == ok + failed +
 * cancelled (a stage that lost jobs is logged then). Any thread but this
 * pipeline's own.
 */
int bp_pipeline_drain_timeout(struct bp_pipeline *p, int64_t timeout_ns);

/*
 * bp_pipeline_drain_timeout(p, -1): returns 0, -EDEADLK or -EINVAL. While
 * it waits for a stage that does not complete its jobs it logs what it
 * waits for every 10 s (BP_LOG_WARN) rather than hang silently.
 */
int bp_pipeline_drain(struct bp_pipeline *p);

/*
 * Stop intake; jobs not yet taken by a worker reach the sink as
 * BP_JOB_CANCELLED; in-flight jobs finish or are cancelled through the
 * stage's cancel callback; join the threads, without a limit (logging every
 * 10 s, as drain, while the stage still holds jobs). Returns 0 (also when
 * already stopped), -EDEADLK (logged) from a stage or sink callback of this
 * pipeline, -EINVAL for NULL. Also turns a drain running or timed out in
 * another thread into an abort. Any thread but this pipeline's own.
 */
int bp_pipeline_abort(struct bp_pipeline *p);

/*
 * Drain if running (abort instead if a drain timed out and the pipeline has
 * not stopped since), then free everything. It never frees what a running
 * thread uses: it waits without a limit for the threads (logging every
 * 10 s what it waits for), so a stage that neither completes nor cancels
 * its jobs blocks it for ever. NULL is accepted. From a stage or sink
 * callback of this pipeline it logs an error and does nothing. A drain,
 * drain_timeout or abort already running in another thread is waited for
 * until it has returned; no other call on the pipeline may be running, and
 * none may begin once destroy has.
 */
void bp_pipeline_destroy(struct bp_pipeline *p);

/* ------------------------------------------------------- live changes */
/*
 * These take effect while the pipeline runs, without stopping workers:
 * the live configuration is a copy that is replaced, never changed, and
 * each worker pass reads it with one load and a compare (about 5
 * instructions, counted with valgrind: see worker.c); a worker that finds
 * a new copy acknowledges it with one store. set_max_batch, set_worker_wait
 * and set_stage_ctx publish a new copy and return once every worker of
 * this pipeline has acknowledged it or is idle (asleep, not started, or
 * stopped): from then on no dequeue uses the old max_batch or wait policy,
 * and no callback sees the old stage context. set_flush_deadline is one
 * store that producers read on their next call. A worker inside a long
 * stage callback holds the call up until that callback returns; after 1 s
 * of this the log callback gets a warning naming the worker. Nothing else
 * does: neither other pipelines nor the application's threads.
 *
 * liburcu: the library registers no thread with liburcu and never waits
 * for an RCU grace period, so an application (or a stage) using any
 * liburcu flavour, QSBR included, neither delays these calls nor is
 * delayed by the pipeline's threads. A stage that uses urcu-qsbr on a
 * worker must register the thread itself (thread_start / thread_stop
 * hooks) and announce quiescent states from its callbacks; an idle worker
 * sleeps without telling liburcu, so such a stage should rather go
 * offline at the end of each callback (urcu_qsbr_thread_offline) or use
 * the memb flavour, whose readers need no announcements.
 *
 * Each returns 0, -EINVAL for NULL p or an out-of-range value (max_batch:
 * 1 .. min(BP_MAX_BATCH, max_inflight); logged), -EPIPE once drain or abort
 * has begun, -ENOMEM, or -EDEADLK (logged) when called from one of this
 * pipeline's own stage or sink callbacks (its worker could never
 * acknowledge; set_flush_deadline works there too). They may be called
 * from any other thread, before or after start; several at once are
 * applied one after another.
 */
int bp_pipeline_set_max_batch(struct bp_pipeline *p, unsigned max_batch);
int bp_pipeline_set_flush_deadline(struct bp_pipeline *p, uint64_t ns);
int bp_pipeline_set_worker_wait(struct bp_pipeline *p,
				const struct bp_wait_policy *w);
/*
 * Replace the stage context. Returns once no worker can still be using the
 * old one (see above): the caller may free it then, unless it is the one
 * given to bp_pipeline_create and the stage has a stats_json callback,
 * which bp_pipeline_report_json keeps calling with that one (stage.h).
 */
int bp_pipeline_set_stage_ctx(struct bp_pipeline *p, void *ctx);

/*
 * A chain's live changes, per stage (0..n_stages-1; -EINVAL, logged, for
 * another index): as above, waiting for that stage's workers only; a
 * max_batch must fit the stage's max_inflight (stage 0's also the
 * chain's gate, chain_max_inflight). bp_pipeline_set_max_batch sets every
 * stage's (-EINVAL, nothing changed, unless it fits every stage; a drain
 * or abort that begins meanwhile may leave later stages unchanged, with
 * -EPIPE), bp_pipeline_set_worker_wait every stage's policy, and
 * bp_pipeline_set_stage_ctx stage 0's context. Stage 0's max_batch is
 * also the producer handles' batch.
 */
int bp_pipeline_set_max_batch_at(struct bp_pipeline *p, unsigned stage,
				 unsigned max_batch);
int bp_pipeline_set_stage_ctx_at(struct bp_pipeline *p, unsigned stage,
				 void *ctx);

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
 * job whose bp_producer_submit returned 0 reaches the sink. The exception is
 * bp_pipeline_drain_timeout whose deadline passes first: what it could not
 * submit stays staged in the (closed) handle, logged, and the owner learns
 * it from bp_producer_staged and from bp_producer_flush / destroy returning
 * -EPIPE. From then on the handles refuse jobs with -EPIPE. A live
 * max_batch or flush deadline applies to each handle's next batch at the
 * latest.
 *
 * Threads: one thread at a time per handle (the owner; it may change, with
 * the caller ordering the hand-over); the flusher is the library's. The
 * owner pays no lock and no atomic read-modify-write per job. Destroy
 * handles before their pipeline: bp_pipeline_destroy logs an error for each
 * handle left, closes it (its calls return -EPIPE; bp_producer_staged says
 * what a timed-out drain left in it) and bp_producer_destroy still frees it
 * afterwards. Handles may be created and destroyed from any thread, stage
 * and sink callbacks included, also while a drain runs.
 */
struct bp_producer;

/*
 * Create a handle on p, before or after bp_pipeline_start (the first one
 * starts the flusher thread). Any thread. Returns 0 and *out (after drain,
 * abort or a failed start the handle is closed: its submits return
 * -EPIPE), -EINVAL (NULL argument), -ENOMEM, or the flusher's
 * thread-creation error (logged).
 */
int bp_producer_create(struct bp_pipeline *p, struct bp_producer **out);
/*
 * Stage one job; may submit (blocking, like bp_pipeline_submit). Returns 0:
 * the job is staged or submitted and will reach the sink. Otherwise the job
 * was not taken (jobs staged by earlier calls stay staged, for
 * bp_producer_flush): -EINVAL (NULL handle or job, odd job pointer, or the
 * pipeline not started yet), -EPIPE (drain or abort has begun, or the
 * pipeline was destroyed), -EINTR (a signal interrupted a submit before it
 * took anything), -EDEADLK (from a stage or sink callback of this pipeline,
 * a submit found ingress full; logged). The owner thread only.
 */
int bp_producer_submit(struct bp_producer *pr, struct bp_job *job);
/*
 * Submit everything staged (blocking; waits for a flush of the flusher in
 * progress, which never waits itself, then submits what is left). Returns
 * 0 (nothing left staged), -EINVAL (NULL), or bp_pipeline_submit's errors
 * (-EPIPE, -EINTR, -EDEADLK): the jobs not accepted stay staged, in order.
 * The owner thread only.
 */
int bp_producer_flush(struct bp_producer *pr);
/*
 * Jobs staged now that are still the owner's: not yet handed to
 * bp_pipeline_submit (by the owner or the flusher), nor taken by a drain or
 * abort that closed the handle to submit them; 0 for NULL (and whenever
 * bp_producer_flush just returned 0). After drain: 0, or what a timed-out
 * or failed drain, or a failed flush, left. The owner thread only.
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
	/* a chain's are summed over its stages (a job counts once per
	 * stage it is taken by): bp_pipeline_report_json has each stage's */
	uint64_t worker_batches;	/* dequeues that returned jobs */
	uint64_t worker_jobs;		/* jobs taken by workers */
	uint64_t sink_batches;		/* sink callback calls */
	uint64_t batch_hist[BP_BATCH_BUCKETS]; /* worker dequeue sizes */
	unsigned ingress_high_water;
	unsigned egress_high_water; /* largest of the workers' egress rings */
	uint64_t lat_hist[BP_LAT_BUCKETS];	      /* submit -> sink, see
							 bp_lat_bucket_ns */
	uint64_t lat_p50_ns, lat_p99_ns, lat_p999_ns; /* bucket upper bounds */
	/* room for counters of later versions (written as zero): the struct
	 * keeps its size */
	uint64_t reserved_[8];
};

/*
 * Fill *s with the sum of the per-thread counters (a snapshot while
 * running; exact after drain/abort). Returns 0 or -EINVAL.
 */
int bp_pipeline_get_stats(struct bp_pipeline *p, struct bp_pipeline_stats *s);

/* One stage's counters (bp_pipeline_get_stage_stats): its workers' sums. */
struct bp_stage_stats {
	unsigned workers;	   /* the stage's worker threads */
	unsigned queue_high_water; /* of the ring in front of it: ingress for
				      stage 0, the link from the stage before */
	uint64_t batches;	   /* takes that returned jobs */
	uint64_t jobs;		   /* jobs taken */
	uint64_t completed;	   /* jobs completed (bp_worker_complete) */
	uint64_t handed;	   /* handed on: to the next stage or the sink */
	uint64_t batch_hist[BP_BATCH_BUCKETS]; /* take sizes, as above */
	/* room for counters of later versions (written as zero) */
	uint64_t reserved_[8];
};

/*
 * Fill *s with stage `stage`'s counters (0 .. n_stages - 1; a one-stage
 * pipeline has stage 0): a snapshot while running, exact after drain or
 * abort. Returns 0 or -EINVAL (NULL argument, or no such stage: logged).
 */
int bp_pipeline_get_stage_stats(struct bp_pipeline *p, unsigned stage,
				struct bp_stage_stats *s);

/*
 * Write the stats as one JSON object into buf (snprintf rules: returns the
 * length it needs, excluding the NUL; truncates if size is too small).
 */
int bp_pipeline_stats_json(const struct bp_pipeline_stats *s, char *buf,
			   size_t size);

/*
 * The pipeline's statistics and its stages', as one JSON object
 * {"pipeline":{..},"stage":{"name":"..","stats":{..} or null},
 *  "stages":[{"name":"..","workers":W,"jobs":N,"batches":N,
 *             "queue_high_water":N,"stats":{..} or null}, ..]}
 * ("stage" is stage 0; "stages" has every stage of the chain, one for a
 * one-stage pipeline; queue_high_water is the fullest that the ring in
 * front of the stage, ingress or a link, has been): snprintf rules
 * (returns the length needed, excluding the NUL), -EINVAL.
 */
int bp_pipeline_report_json(struct bp_pipeline *p, char *buf, size_t size);

/* Upper bound in ns of latency bucket i. */
uint64_t bp_lat_bucket_ns(unsigned i);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif /* BATCHPIPE_PIPELINE_H */
