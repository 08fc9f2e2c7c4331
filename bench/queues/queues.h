/* SPDX-License-Identifier: MIT */
/*
 * queues.h - the common face of every queue bpbench compares.
 *
 * Each competitor lives in its own q_*.c file and exports one or more
 * struct bench_queue_ops. The harness calls them through this table, so
 * every queue pays the same indirect call per operation.
 *
 * Contract, the same for all:
 *  - items are pointer-sized values with bit 0 clear (batchpipe's rule; the
 *    others do not care);
 *  - enqueue/dequeue move up to n items, keep their order, and return the
 *    count moved (0: full / empty for now) or a negative errno on a real
 *    error (which the harness treats as fatal);
 *  - `tid` is the calling producer's (enqueue) or consumer's (dequeue) index,
 *    0 <= tid < P (or C); queues that need per-thread state (node pools) use
 *    it, the others ignore it;
 *  - non-blocking queues return 0 at once when they cannot move anything, and
 *    the harness applies the common retry policy (bench_backoff_wait);
 *    a queue with `blocking` set sleeps instead, until it can move at least
 *    one item or close() was called (then dequeue returns 0 once empty);
 *  - batches: every queue moves a batch with its best public means (one lock
 *    hold, one reservation, a splice), never item by item when it has better.
 */
#ifndef BPBENCH_QUEUES_H
#define BPBENCH_QUEUES_H

#include "bench_config.h" /* BENCH_HAVE_DPDK, BENCH_HAVE_MOODYCAMEL */

#ifdef __cplusplus
#include <atomic> /* q_moodycamel.cpp: the same layout as C's atomic_int */
using std::atomic_int;
#else
#include <stdatomic.h>
#endif

struct bench_queue_ops {
	const char *name;
	/* largest P and C this mode supports (0: any) */
	unsigned max_producers, max_consumers;
	/* enqueue/dequeue sleep when they cannot proceed (see above) */
	int blocking;
	/*
	 * A ceiling, not a competitor: code written for one topology only
	 * (the plain SPSC ring). batchpipe's mode for that topology is held
	 * to it; it never counts as "the best other queue".
	 */
	int ceiling;
	/*
	 * capacity: at most this many items may be in the queue at once.
	 * stop (may be NULL): set when the run's producing time is over. A
	 * queue whose batch is a loop of single-item calls, each of which can
	 * wait for a preempted thread, checks it between items, so that a run
	 * stays time-bounded (a batch of 256 such calls can take a second).
	 */
	void *(*create)(unsigned capacity, unsigned producers,
			unsigned consumers, const atomic_int *stop);
	void (*destroy)(void *q);
	int (*enqueue)(void *q, unsigned tid, void *const *items, unsigned n);
	int (*dequeue)(void *q, unsigned tid, void **items, unsigned n);
	/* blocking queues only: no more enqueues; wake every sleeper */
	void (*close)(void *q);
};

/* The competitors (q_*.c). */
extern const struct bench_queue_ops bench_q_batchpipe;
extern const struct bench_queue_ops bench_q_batchpipe_sp_sc;
extern const struct bench_queue_ops bench_q_batchpipe_mp_sc;
extern const struct bench_queue_ops bench_q_batchpipe_sp_mc;
extern const struct bench_queue_ops bench_q_mutex;
extern const struct bench_queue_ops bench_q_spinlock;
extern const struct bench_queue_ops bench_q_ckring;
extern const struct bench_queue_ops bench_q_wfcq;
extern const struct bench_queue_ops bench_q_spsc;
/* Optional: built where the system has them (bench/meson.build). */
#if BENCH_HAVE_DPDK
extern const struct bench_queue_ops bench_q_rte_ring;
extern const struct bench_queue_ops bench_q_rte_ring_hts;
extern const struct bench_queue_ops bench_q_rte_ring_rts;
#endif
#if BENCH_HAVE_MOODYCAMEL
extern const struct bench_queue_ops bench_q_moodycamel;
#endif
/* ck_ring's single-producer / single-consumer modes, for callers with a fixed
 * topology; not in bench_queues[] (`bpbench ring` compares ck_ring MPMC). */
extern const struct bench_queue_ops bench_q_ckring_sp_mc;
extern const struct bench_queue_ops bench_q_ckring_mp_sc;

/* Every queue, in display order (queues.c); NULL-terminated. */
extern const struct bench_queue_ops *const bench_queues[];

/*
 * The optional competitors this build lacks, one line each: what it is
 * and how to get it ("" when none is missing).
 */
const char *bench_queues_missing(void);

/* Look a queue up by name; NULL if unknown. */
const struct bench_queue_ops *bench_queue_find(const char *name);

/* Whether a queue can run with P producers and C consumers. */
int bench_queue_fits(const struct bench_queue_ops *ops, unsigned producers,
		     unsigned consumers);

/* batchpipe's own modes are measured against the best of the others. */
int bench_queue_is_batchpipe(const struct bench_queue_ops *ops);

#endif /* BPBENCH_QUEUES_H */
