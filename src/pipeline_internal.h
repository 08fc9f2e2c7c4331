/* SPDX-License-Identifier: MIT */
/* The pipeline's private structures, shared by pipeline.c, worker.c, sink.c. */
#ifndef BP_SRC_PIPELINE_INTERNAL_H
#define BP_SRC_PIPELINE_INTERNAL_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <batchpipe/error.h>
#include <batchpipe/pipeline.h>
#include <batchpipe/ring.h>

#include "alloc.h"
#include "counter.h"

/* What workers read each pass through RCU (QSBR): replaced, never changed. */
struct live_cfg {
	unsigned max_batch;
	struct bp_wait_policy worker_wait;
	void *stage_ctx;
};

struct bp_worker {
	/* owned by the worker thread */
	alignas(BP_FALSE_SHARING) struct bp_pipeline *p;
	unsigned id;
	int cpu; /* -1: not pinned */
	void *state;
	struct bp_ring *egress; /* this worker -> sink, single/single */
	struct bp_job **buf;	/* dequeue buffer, max_inflight entries */
	struct bp_job **done;	/* completed: [dhead, dend) not yet handed off */
	unsigned dhead, dend;
	unsigned done_cap;
	uint64_t taken;	 /* jobs ever taken from ingress */
	uint64_t handed; /* jobs ever handed to egress (unordered credit) */
	const struct live_cfg *cfg; /* valid during one pass */
	bool cancel_called;
	bool pass_on; /* back from an idle wait on ingress: see take_batch */

	pthread_t thread;
	bool thread_started;
	_Atomic int init_rc;

	/* statistics: written by this worker only */
	bp_counter st_batches, st_jobs;
	bp_counter st_batch_hist[BP_BATCH_BUCKETS];

	/* ordered mode: jobs of this worker the sink has delivered (sink
	 * writes) */
	alignas(BP_FALSE_SHARING) _Atomic uint64_t delivered;
};

/*
 * The pipeline's producer handles and the thread that flushes their staged
 * jobs when a flush deadline passes (flusher.c). Zeroed memory is a valid,
 * empty one.
 */
struct bpi_flusher {
	_Atomic int lock; /* registry changes, drain, destroy (cold paths) */
	_Atomic(struct bp_producer *) handles; /* walked without the lock */
	bool closed;  /* under lock: drain took every handle, none may join */
	bool started; /* under lock: the thread runs */
	bool running; /* under lock: bp_pipeline_start succeeded */
	pthread_t thread;
	_Atomic int stop;
	_Atomic uint64_t walks; /* odd while the flusher walks the handles */
	/* when the flusher wakes by itself; 0 while awake */
	alignas(BP_FALSE_SHARING) _Atomic int64_t sleep_until;
	struct bp_waitq wq;	 /* the flusher sleeps here */
	struct bp_waitq walk_wq; /* handle removal waits here for a walk */
};

enum pipeline_state {
	P_CREATED = 0,
	P_RUNNING,
	P_STOPPING, /* drain or abort begun */
	P_STOPPED,  /* threads joined */
};

struct bp_pipeline {
	struct bp_pipeline_config cfg; /* validated copy; worker_cpus -> cpus */
	int *cpus;
	struct bp_ring *ingress;
	struct bp_worker *workers;
	unsigned nworkers;

	/* live values read by producers (not RCU readers): relaxed atomics */
	_Atomic unsigned live_max_batch;
	_Atomic uint64_t live_flush_ns;
	/* read by workers through RCU */
	struct live_cfg *live;
	_Atomic int
		reconfig_busy; /* one reconfiguration at a time (cold path) */

	_Atomic int state;
	_Atomic int aborting;
	_Atomic int start_go; /* 1: run, -1: start failed, exit */
	_Atomic unsigned inits_done;
	struct bp_waitq start_wq;
	struct bp_waitq stop_wq; /* second stoppers wait here */

	/* sink */
	pthread_t sink_thread;
	bool sink_started;
	struct bp_waitq sink_wq; /* the sink sleeps here; workers wake it */
	struct bp_waitq
		progress_wq;	/* workers held back by the sink sleep here */
	bool *sink_ended;	/* per worker: its egress stream has ended */
	uint64_t *sink_credit;	/* ordered mode: per-worker credit to publish */
	struct bp_job **window; /* ordered mode: reorder window, by seq */
	uint32_t *window_worker; /* ordered mode: who handed each window job */
	uint64_t window_mask;
	uint64_t next_seq;
	bp_counter st_ok, st_failed, st_cancelled, st_sink_batches;
	bp_counter st_lat[BP_LAT_BUCKETS];

	alignas(BP_FALSE_SHARING) struct bpi_flusher fl;
};

void bpi_log(const struct bp_pipeline *p, enum bp_log_level lvl,
	     const char *fmt, ...) __attribute__((format(printf, 3, 4)));

void *bpi_worker_main(void *arg);
void *bpi_sink_main(void *arg);

/* From bp_pipeline_start, once running: handles take jobs from now on. */
void bpi_flusher_open(struct bp_pipeline *p);
/*
 * From stop(), before intake closes: submit every handle's staged jobs and
 * close the handles (their later submits get -EPIPE), stop the flusher.
 * Idempotent.
 */
void bpi_flusher_close(struct bp_pipeline *p);
/* From destroy: close, then detach handles still alive (logged). */
void bpi_flusher_destroy(struct bp_pipeline *p);

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
