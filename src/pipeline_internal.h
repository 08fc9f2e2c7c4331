/* SPDX-License-Identifier: MIT */
/* The pipeline's private structures, shared by pipeline.c, worker.c, sink.c. */
#ifndef BP_SRC_PIPELINE_INTERNAL_H
#define BP_SRC_PIPELINE_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <batchpipe/error.h>
#include <batchpipe/pipeline.h>
#include <batchpipe/ring.h>

#include "src/base/alloc.h"
#include "src/base/clock.h"
#include "src/base/counter.h"
#include "src/base/log.h"
#include "src/flush.h"
#include "src/flusher.h"
#include "src/lanes.h"
#include "src/ring_internal.h"
#include "src/waitq.h"

/*
 * bp_job.pipeline_word: submit stamps JOB_SUBMITTED, bp_worker_complete
 * accepts only a job that carries it and marks it JOB_COMPLETED, so a job
 * completed twice is told from one completed once (worker.c). Values that
 * uninitialised memory is unlikely to hold.
 */
#define JOB_SUBMITTED 0x62705375u /* "bpSu" */
#define JOB_COMPLETED 0x6270436fu /* "bpCo" */
/*
 * In a chain, stage k accepts STAGE_MARK(k) and leaves STAGE_MARK(k + 1)
 * (the last stage JOB_COMPLETED): a job handed on is marked for the next
 * stage by its completion itself, with no store at the hand-off, and a
 * completion that comes twice, or from the wrong stage, is refused.
 */
#define STAGE_MARK(k) (JOB_SUBMITTED + ((uint32_t)(k) << 24))

/*
 * bp_job.status and pipeline_word side by side (job.h): one 8-byte word
 * that submit stamps with one store and a completion checks with one load
 * (worker.c's flip_marks; it writes pipeline_word alone). Built through
 * this struct, a word's halves are the fields on either byte order.
 */
struct bpi_status_mark {
	int32_t status;
	uint32_t pipeline_word;
};
_Static_assert(offsetof(struct bp_job, pipeline_word) ==
		       offsetof(struct bp_job, status) + 4,
	       "bp_job.pipeline_word follows status");
_Static_assert(offsetof(struct bp_job, status) % 8 == 0,
	       "bp_job.status starts an 8-byte word");
_Static_assert(sizeof(struct bpi_status_mark) == 8, "two words, no padding");

/* The 8-byte word of a status and a mark. */
static inline uint64_t bpi_status_mark_word(int32_t status, uint32_t mark)
{
	const struct bpi_status_mark sm = {status, mark};
	uint64_t w;

	memcpy(&w, &sm, sizeof(w));
	return w;
}

/* The pipeline's seqs are ingress positions (with lanes: src/lanes.h):
 * they wrap with them. */
#define SEQ_MASK (BPI_RING_POS_SPACE - 1)

/*
 * Bit 62 of (b - a), for seqs a and b: set when b comes before a, that is
 * when b - a mod 2^63 is 2^62 or more (a step back, or a jump forward of
 * half the seq space, which no two seqs in flight are apart). Bit 63 of
 * the 64-bit difference is not looked at (worker.c's order check).
 */
#define SEQ_BACK (BPI_RING_POS_SPACE >> 1)

/*
 * What workers read each pass: replaced, never changed (reconfigure() in
 * pipeline.c). gen counts the copies: the first is LIVE_GEN_FIRST.
 */
struct bpi_live_cfg {
	uint64_t gen;
	unsigned max_batch;
	struct bp_wait_policy worker_wait;
	void *stage_ctx;
};

/*
 * One stage of the chain as the pipeline runs it (src/chain.c); a
 * one-stage pipeline is a chain of one. Set by create, read-only after
 * start but for live and running.
 */
struct bpi_stage {
	struct bp_stage table; /* the caller's, copied */
	void *create_ctx;      /* the context given to create (stats_json) */
	unsigned index;
	unsigned first, nworkers; /* its workers: p->workers[first..+n) */
	unsigned max_batch;	  /* as created (live: live->max_batch) */
	unsigned max_inflight;	  /* per worker */
	unsigned flags;		  /* BP_STAGE_* */
	/* workers kept awake at most by passed-on wake-ups (worker.c's
	 * pass_wake_on; set by start) */
	unsigned wake_limit;
	/* ordered one-stage pipeline: a worker's credit is what the sink
	 * delivered (sink.c); otherwise what it handed on */
	bool by_delivery;
	/* the next stage takes failed jobs too (BP_STAGE_TAKES_FAILED) */
	bool next_takes_failed;
	/* pipeline_word: what bp_worker_complete accepts, and the flip
	 * that marks a job completed (STAGE_MARK above) */
	uint32_t mark_in, mark_flip;
	/* in a chain: jobs it fails are named (job->stage) as completed */
	bool names_failures;
	/* a serial stage is behind: hand every job on, failed or not, so
	 * that its seqs come dense (src/chain.c) */
	bool forward_all;
	/* failed jobs come in (the stage before forwards all): those this
	 * stage does not take skip process */
	bool filter_failed;
	/*
	 * BP_STAGE_SERIAL after stage 0: its one worker files what it takes
	 * by seq in order[] and processes the run from order_next, so
	 * process sees jobs in submission order. parked: filed, not yet
	 * their turn (not counted in the worker's taken). The worker's own.
	 */
	struct bp_job **order;
	uint64_t order_mask, order_next;
	unsigned parked;
	bool flush_logged; /* order_flush said so once */
	/* parked and order_next as last published, for stall reports
	 * (relaxed: a snapshot) */
	_Atomic unsigned stall_parked;
	_Atomic uint64_t stall_next;
	int *cpus; /* copied worker_cpus, ncpus of them */
	unsigned ncpus;
	struct bp_ring *in;   /* ingress (stage 0) or the link in front */
	struct bp_ring *next; /* the link to the next stage; NULL: last */
	/* read by the stage's workers each pass; replaced by reconfigure() */
	_Atomic(struct bpi_live_cfg *) live;
	/* its workers that have not ended: the last one closes next */
	_Atomic unsigned running;
};

struct bp_worker {
	/* owned by the worker thread */
	alignas(BP_FALSE_SHARING) struct bp_pipeline *p;
	struct bpi_stage *st; /* its stage */
	struct bp_ring *in;   /* st->in */
	/* stage 0 with ingress lanes: takes from p->lanes, not `in` alone,
	 * from lane_next on (src/lanes.h) */
	bool lanes;
	unsigned lane_next;
	unsigned id;	      /* within its stage (bp_worker_id) */
	unsigned gid;	      /* within p->workers */
	int cpu; /* -1: not pinned */
	void *state;
	struct bp_ring *egress; /* this worker -> sink, single/single */
	struct bp_job **buf;	/* dequeue buffer, max_inflight entries */
	struct bp_job **done; /* completed: [dhead, dend) not yet handed off */
	unsigned dhead, dend;
	unsigned done_cap;
	/*
	 * A chain's worker before the last stage (worker.c's
	 * hand_off_sort): done[dhead, dscan) are sorted, all going on to
	 * the next stage; out[ohead, oend) go to the sink (failed). Both
	 * count as pending.
	 */
	unsigned dscan, ohead, oend;
	struct bp_job **out;
	uint64_t taken;	 /* jobs ever taken from ingress */
	uint64_t handed; /* jobs ever handed to egress (unordered credit) */
	uint64_t delivered_seen; /* ordered: `delivered` at the last look */
	/*
	 * Ordered mode, the last stage: whether the jobs this worker completed
	 * so far (its egress stream) came in seq order, and the seq after the
	 * last one's, which the next may not come before (worker.c's order
	 * check). Once one comes out of order the check stops and `unsorted`
	 * is set.
	 */
	bool seq_check;
	uint64_t seq_next;
	const struct bpi_live_cfg *cfg; /* valid during one pass */
	/*
	 * written by the worker, read by reconfigure(): the gen of the copy
	 * in use, LIVE_GEN_OFFLINE while none is, LIVE_GEN_FIRST while coming
	 * back (see worker.c)
	 */
	_Atomic uint64_t cfg_seen;
	bool cancel_called;
	bool pass_on; /* back from an idle wait on ingress: see take_batch */
	bool intake_armed; /* between bp_worker_intake_arm and _disarm */
	struct bpi_waitq *armed_q; /* the queue armed on: intake, or the gate */
	/* a chain's hand-off left jobs for a full link (worker.c) */
	bool link_blocked;
	/* a chain: a job completed since the last hand-off is not ok, so
	 * the hand-off sorts them (worker.c's hand_off_sort) */
	bool failed_pending;

	pthread_t thread;
	bool thread_started;
	_Atomic int init_rc;

	/* statistics: written by this worker only */
	bpi_counter st_batches, st_jobs;
	bpi_counter st_batch_hist[BP_BATCH_BUCKETS];
	/* what a stopper that gives up reports: jobs completed, handed off */
	bpi_counter st_completed, st_handed;
	_Atomic int exited; /* 1: the thread is done with the pipeline */

	/* ordered mode: jobs of this worker the sink has delivered (sink
	 * writes) */
	alignas(BP_FALSE_SHARING) _Atomic uint64_t delivered;
	/*
	 * Ordered mode: 1 once this worker's egress stream may be out of seq
	 * order (it never goes back to 0); the sink then finds the runs in
	 * each batch job by job, else from a few jobs (sink.c). Written by
	 * the worker, once; in this line, which the sink writes anyway, so
	 * that its read per batch costs no transfer.
	 */
	_Atomic int unsorted;
	/*
	 * This worker sleeps here while the sink holds it back (egress full,
	 * or no ordered credit); the sink wakes it after taking from its
	 * egress ring or crediting it, and nobody else. Next to delivered:
	 * the sink reads it right after writing that line.
	 */
	struct bpi_waitq progress;
};

enum bpi_pipeline_state {
	P_CREATED = 0,
	P_RUNNING,
	P_STOPPING, /* drain or abort begun */
	P_STOPPED,  /* threads joined */
};

struct bp_pipeline {
	/* validated copy; worker_cpus -> cpus, stage -> &stage */
	/* validated copy; cfg.stage, max_batch, max_inflight: stage 0's */
	struct bp_pipeline_config cfg;
	struct bpi_logger log; /* cfg.log, cfg.log_ctx */
	struct bp_ring *ingress; /* lane 0's ring (the only one by default) */
	struct bpi_lane *lanes;	 /* src/lanes.h */
	unsigned nlanes;	 /* a power of two, 1 by default */
	unsigned lane_bits;	 /* log2(nlanes): a seq's lane bits */
	struct bpi_waitq *intake_wq; /* lane 0's not-empty (src/lanes.h) */
	uint64_t lanes_id;	     /* names p to its producers' threads */
	_Atomic unsigned lanes_dealt; /* lanes dealt (src/lanes.c) */
	struct bpi_stage *stages; /* the chain, nstages of them */
	unsigned nstages;
	struct bp_worker *workers; /* every stage's, stage by stage */
	unsigned nworkers;
	/*
	 * A chain's limit on jobs taken from ingress and not yet delivered
	 * (0: none): stage 0's workers take only while ingress's consumer
	 * position is less than gate ahead of gate_delivered, which the sink
	 * advances as it delivers (and wakes gate_wq). An ordered chain has
	 * one, so that its reorder window never overflows.
	 */
	unsigned gate;
	/* what submit writes in job->stage: 0, or BP_JOB_NO_STAGE in a
	 * chain (its hand-offs name the first stage that failed a job) */
	uint32_t stage_unset;

	/* live values read by producers (not RCU readers): relaxed atomics */
	_Atomic unsigned live_max_batch;
	_Atomic int64_t live_flush_ns; /* saturated at INT64_MAX */
	_Atomic int
		reconfig_busy; /* one reconfiguration at a time (cold path) */

	_Atomic int state;
	_Atomic int aborting;
	_Atomic int start_go; /* 1: run, -1: start failed, exit */
	_Atomic unsigned inits_done;
	struct bpi_waitq start_wq;
	struct bpi_waitq
		stop_wq; /* stoppers wait here, for threads or others */
	_Atomic int start_called;  /* one bp_pipeline_start, ever */
	_Atomic int joiner;	   /* 1: a stopper is joining the threads */
	_Atomic int stop_gave_up;  /* a drain or abort returned -ETIMEDOUT */
	/* the stopper left accepted jobs staged in handles (flush.c) */
	_Atomic int handles_stranded;
	_Atomic unsigned stoppers; /* drain, abort, destroy calls inside */

	/* sink */
	pthread_t sink_thread;
	bool sink_started; /* a joiner clears it once it joined the sink */
	/* the sink was started: set by start, never changed after (what
	 * bp_pipeline_flush reads, also while a drain joins the sink) */
	bool sink_ran;
	_Atomic int sink_exited;  /* 1: the sink is done with the pipeline */
	struct bpi_waitq sink_wq; /* the sink sleeps here; workers wake it */
	bool *sink_ended;	  /* per worker: its egress stream has ended */
	uint64_t *sink_credit; /* ordered mode: per-worker credit to publish */
	/* ordered mode: the reorder window, by seq (src/sink.c), with
	 * BPI_SINK_AHEAD spare entries past its end, always NULL */
	struct bp_job **window;
	struct bpi_window_run *window_run; /* at each filed run's first seq */
	uint64_t window_mask;
	uint64_t next_seq;
	unsigned run_hint; /* ordered: the last run's length (sink.c) */
	bpi_counter st_ok, st_failed, st_cancelled, st_sink_batches;
	bpi_counter st_repeats; /* completions the sink refused (seq seen) */
	bpi_counter st_lat[BP_LAT_BUCKETS];

	/* the gate (see above): jobs the sink delivered, mod 2^63; stage
	 * 0's workers read it, the sink writes it: a line of its own */
	alignas(BP_FALSE_SHARING) _Atomic uint64_t gate_delivered;
	struct bpi_waitq gate_wq; /* stage 0 workers held by the gate */

	alignas(BP_FALSE_SHARING) struct bpi_flusher fl;
	struct bpi_flush flush; /* bp_pipeline_flush (src/flush.h) */
};

/* A flush deadline as the ns that live_flush_ns holds: past INT64_MAX, never.
 */
static inline int64_t bpi_flush_age(uint64_t ns)
{
	return ns > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)ns;
}

/* A stopper waiting without a deadline says what it waits for this often. */
#define STALL_REPORT_NS INT64_C(10000000000)

#define LIVE_GEN_OFFLINE 0u
#define LIVE_GEN_FIRST	 1u

/* The config checks of bp_pipeline_create, logged (src/config.c). */
int bpi_config_check(const struct bp_pipeline_config *c);

/*
 * The chain (src/chain.c): build p->stages, their links and p->workers
 * from the checked config (a one-stage config is a chain of one); the
 * free of what it built; the wake limits start sets.
 */
int bpi_chain_create(struct bp_pipeline *p, const struct bp_pipeline_config *c);
void bpi_chain_free(struct bp_pipeline *p);
void bpi_chain_set_wake_limits(struct bp_pipeline *p);
/* The stage of p named by a public call's index, or NULL (logged). */
struct bpi_stage *bpi_chain_stage(struct bp_pipeline *p, unsigned stage,
				  const char *who);
/* Free p and all it owns, threads joined (src/pipeline.c). */
void bpi_pipeline_free(struct bp_pipeline *p);
/*
 * The sink's deliveries prefetch the job this many places ahead, so every
 * array it delivers from has as many readable entries past its end (a
 * prefetch of a stale or NULL pointer neither faults nor matters).
 */
#define BPI_SINK_AHEAD 8

/*
 * The ordered sink's window files jobs by runs of consecutive seqs, as
 * they come from a worker: at a run's first seq, its length and whom to
 * credit on delivery (src/sink.c).
 */
struct bpi_window_run {
	uint32_t len;
	uint32_t worker;
};

/* How long a waiter for room waits for more than it needs (src/submit.c). */
#define ROOM_LOW_WATER_NS INT64_C(1000000)

/*
 * Wait until ingress lane l has room for `want` jobs, or after
 * ROOM_LOW_WATER_NS for `need` (both clamped to 1..half the lane: see
 * src/submit.c), or intake is closed, as the producers' wait policy says;
 * timeout_ns < 0: no limit. Returns > 0, -ETIMEDOUT or -EINTR. Holds no
 * room: the caller reserves after it, and may find less (other producers
 * took it) or, after -ETIMEDOUT, some.
 */
int bpi_ingress_wait(struct bp_pipeline *p, struct bpi_lane *l, unsigned need,
		     unsigned want, int64_t timeout_ns);

/* The waker's half of bpi_ingress_wait, out of line (src/submit.c). */
void bpi_ingress_wake(struct bpi_lane *l);

/*
 * Submit n jobs into lane l: bp_pipeline_submit's body, for the calls that
 * choose the lane (a producer handle's own). Same arguments and returns.
 */
int bpi_submit_lane(struct bp_pipeline *p, struct bpi_lane *l,
		    struct bp_job **jobs, unsigned n, unsigned flags,
		    int64_t timeout_ns);

/*
 * After a worker's take from ingress lane l: wake the threads waiting for
 * room in it once there is as much as one of them waits for. A take that leaves
 * less wakes nobody, so a waiter sleeps through the takes that would only let
 * it in for one batch and out again. With nobody waiting (the usual case) this
 * is one load of a line nobody writes: the count of free slots, which reads the
 * producers' line, only when somebody waits.
 */
static inline void bpi_ingress_taken(struct bpi_lane *l)
{
	/*
	 * seq_cst: Dekker with room_try's publication of its need (or its
	 * look at one as small): the take's claim was a seq_cst CAS (ingress
	 * has many consumers), this load follows it, so either we see the
	 * need or the waiter's count sees our take. The count below is of
	 * now, after our take: room another take made counts too.
	 */
	unsigned need =
		atomic_load_explicit(&l->room_need, memory_order_seq_cst);

	if (__builtin_expect(need != ROOM_NOBODY, 0) &&
	    bp_ring_free_count(l->ring) >= need)
		bpi_ingress_wake(l);
}

void *bpi_worker_main(void *arg);
void *bpi_sink_main(void *arg);

/*
 * The last thing a worker or the sink does: set its exited flag and wake
 * the stoppers, which may then join it and free the pipeline.
 */
void bpi_thread_exited(struct bp_pipeline *p, _Atomic int *exited);

/* Join the workers that were started (src/threads.c). */
void bpi_join_workers(struct bp_pipeline *p);

/*
 * Start one of p's threads through bpi_thread_start (thread.h): named after
 * role and index ("bp-worker-3"), pinned to cpu (-1: not), with the
 * config's thread hooks. Returns 0 and *t, or a negative errno. Cold path.
 */
int bpi_pipeline_thread_start(struct bp_pipeline *p, pthread_t *t,
			      enum bp_thread_role role, unsigned index, int cpu,
			      void *(*fn)(void *), void *arg);
/* Latency bucket of a duration in ns: 4 buckets per power of two. */
static inline unsigned bpi_lat_bucket(uint64_t ns)
{
	unsigned log, b;

	if (ns < 8)
		return (unsigned)
			ns; /* buckets 0..7 are exact: [0,1) .. [7,8) */
	log = 63u - (unsigned)__builtin_clzll(ns); /* >= 3 */
	/* the two bits below the leading one pick the quarter */
	b = 4 * (log - 1) + (unsigned)((ns >> (log - 2)) & 3);
	return b < BP_LAT_BUCKETS ? b : BP_LAT_BUCKETS - 1;
}

#endif
