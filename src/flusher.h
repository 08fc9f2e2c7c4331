/* SPDX-License-Identifier: MIT */
/*
 * The flusher (src/flusher.c): a pipeline's registry of producer handles,
 * the thread that submits a handle's staged jobs once its flush deadline
 * passes, and what start, drain and destroy do with the handles. Its whole
 * API; the pipeline embeds struct bpi_flusher.
 */
#ifndef BP_SRC_FLUSHER_H
#define BP_SRC_FLUSHER_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "src/base/alloc.h"
#include "src/waitq.h"

struct bp_pipeline;
struct bp_producer;

/*
 * The pipeline's producer handles and the thread that flushes their staged
 * jobs when a flush deadline passes (flusher.c). Zeroed memory is a valid,
 * empty one.
 */
struct bpi_flusher {
	_Atomic int lock; /* bpi_spin_lock: registry changes, drain, destroy */
	_Atomic(struct bp_producer *) handles; /* walked without the lock */
	bool closed;  /* under lock: drain took every handle, none may join */
	bool started; /* under lock: the thread runs */
	bool running; /* under lock: bp_pipeline_start succeeded */
	pthread_t thread;
	_Atomic int stop;
	_Atomic uint64_t walks; /* odd while the flusher walks the handles */
	/* when the flusher wakes by itself; 0 while awake */
	alignas(BP_FALSE_SHARING) _Atomic int64_t sleep_until;
	struct bpi_waitq wq;	  /* the flusher sleeps here */
	struct bpi_waitq walk_wq; /* handle removal waits here for a walk */
	/* the flusher's own, for bp_pipeline_flush's round (flusher.c) */
	uint64_t force_round;  /* the request it answers, 0: none */
	int64_t force_poll_ns; /* how soon to look again at a busy owner */
	bool force_left;       /* a walk saw jobs the round waits for */
	/* with ingress lanes: the longest next wait for room in a full
	 * lane with no handle due (flusher.c's full_wait_ns) */
	int64_t full_backoff_ns;
	/*
	 * bp_pipeline_flush's first step (src/flush.h): callers fetch_add
	 * force_req and wake wq; the flusher answers in force_done once
	 * every handle's staged jobs of then are submitted. A line of its
	 * own: waiting callers read force_done.
	 */
	alignas(BP_FALSE_SHARING) _Atomic uint64_t force_req;
	_Atomic uint64_t force_done;
};

/* Whether the flusher thread runs (it does from the first handle on). */
bool bpi_flusher_started(struct bp_pipeline *p);

/* Add pr to p's registry; the first handle starts the flusher thread. */
int bpi_flusher_add(struct bp_pipeline *p, struct bp_producer *pr);
/* Unlink pr; returns whether the caller frees it (false: drain will). */
bool bpi_flusher_remove(struct bp_pipeline *p, struct bp_producer *pr);
/* From bp_pipeline_start, once running: handles take jobs from now on. */
void bpi_flusher_open(struct bp_pipeline *p);
/*
 * From stop(), before intake closes: submit every handle's staged jobs and
 * close the handles (their later submits get -EPIPE), tell the flusher to
 * stop. Waits for submits until the CLOCK_MONOTONIC deadline (< 0: none):
 * returns 0, or -ETIMEDOUT / a submit error after logging what stays
 * staged (the owners get it back from bp_producer_flush/destroy).
 * Idempotent. bpi_flusher_join (after intake closed, so that a flusher
 * blocked in a submit gets -EPIPE) joins the flusher thread.
 */
int bpi_flusher_close(struct bp_pipeline *p, int64_t deadline);
void bpi_flusher_join(struct bp_pipeline *p);
/* From destroy: close, then detach handles still alive (logged). */
void bpi_flusher_destroy(struct bp_pipeline *p);

#endif
