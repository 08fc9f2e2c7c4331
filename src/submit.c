/* SPDX-License-Identifier: MIT */
/*
 * bp_pipeline_submit: jobs into ingress. Submission order is the ingress
 * ring's position: it reserves k slots (bpi_ring_reserve_burst), stamps
 * each job with its position as seq, and publishes them (bpi_ring_publish,
 * or bpi_ring_publish_one for one job).
 * A reservation is a commitment (nothing is handed back), so every job is
 * checked first, seqs are dense and the ordered sink never waits for a gap.
 * With ingress lanes (src/lanes.h) the same in the caller's lane, and the
 * seq is made of the lane position and the lane.
 */
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <string.h>

#include "src/jobcheck.h"
#include "src/pipeline_internal.h"
#include "src/ring_internal.h"
#include "src/self.h"
#include "src/wait_internal.h"

/*
 * Room in ingress. A thread that finds ingress full waits for a need of
 * its own, at most half the ring, not for the first free slot: waiting for
 * one slot made every worker's take wake a producer, who put one batch in
 * and slept again, a wake-up and a sleep per batch (with 4 producers on 2
 * CPUs, `bpbench app`'s producers made 65,000 context switches a second).
 * A blocking submit without a deadline waits for half (the low-water mark:
 * it comes back to room for many batches), the flusher for a batch, both
 * for ROOM_LOW_WATER_NS at most, then for what they need; a submit with a
 * deadline, and drain, for what they have left.
 *
 * The waiters say what they wait for in their lane's room_need, the
 * smallest need of them all (ROOM_NOBODY when none). A worker's take wakes
 * not-full only once that many slots are free (bpi_ingress_taken), and first
 * puts ROOM_NOBODY back: every waiter it wakes, and any that was not
 * asleep yet, says its need again before it sleeps again (room_try runs
 * after the waitq's prepare, every time). docs/wakeup.md, "Room in
 * ingress", has the argument that no waiter sleeps through room it waits
 * for.
 */
struct room_want {
	struct bpi_lane *l;
	unsigned need;
};

static int room_try(void *arg)
{
	struct room_want *w = arg;
	struct bpi_lane *l = w->l;
	/* relaxed: only to skip the write; the CAS below orders */
	unsigned cur =
		atomic_load_explicit(&l->room_need, memory_order_relaxed);

	/*
	 * seq_cst: Dekker with the worker's take (bpi_ingress_taken): either
	 * its load of room_need sees our need, or our count below sees its
	 * take. Where a need as small is there already, its owner's
	 * publication stands for ours, and if a wake takes it away meanwhile,
	 * that wake comes after our prepare and wakes us too.
	 */
	while (cur > w->need &&
	       !atomic_compare_exchange_weak_explicit(
		       &l->room_need, &cur, w->need, memory_order_seq_cst,
		       memory_order_relaxed))
		;
	/*
	 * The count after a full fence: the CAS (or the look at a need as
	 * small) before it, the take's CAS and load on the other side. An
	 * acquire count could be read before the CAS is seen (store then
	 * load), and the look is only a relaxed read without it.
	 */
	bpi_full_fence();
	return bp_ring_free_count(l->ring) >= w->need ||
	       bp_ring_is_closed(l->ring);
}

/* 1..half the lane */
static unsigned room_clamp(const struct bpi_lane *l, unsigned n)
{
	unsigned half = bp_ring_capacity(l->ring) / 2;

	n = n < half ? n : half;
	return n ? n : 1;
}

int bpi_ingress_wait(struct bp_pipeline *p, struct bpi_lane *l, unsigned need,
		     unsigned want, int64_t timeout_ns)
{
	const struct bp_wait_policy *pol = &p->cfg.producer_wait;
	struct bpi_waitq *q = bpi_ring_not_full(l->ring);
	struct room_want w = {.l = l, .need = room_clamp(l, want)};
	int64_t t0, left;
	int rc;

	need = room_clamp(l, need);
	if (w.need <= need) {
		w.need = need;
		return bpi_wait_loop(pol, q, room_try, &w, timeout_ns);
	}
	/*
	 * The low-water mark for ROOM_LOW_WATER_NS at most: room that comes
	 * and then stops coming (workers held back by a sink that waits for
	 * this very thread) lets the caller in after that, as it did before.
	 */
	t0 = bpi_now_ns();
	left = timeout_ns >= 0 && timeout_ns < ROOM_LOW_WATER_NS
		       ? timeout_ns
		       : ROOM_LOW_WATER_NS;
	rc = bpi_wait_loop(pol, q, room_try, &w, left);
	if (rc != -ETIMEDOUT || left != ROOM_LOW_WATER_NS)
		return rc;
	w.need = need;
	left = timeout_ns < 0 ? -1 : timeout_ns - (bpi_now_ns() - t0);
	if (timeout_ns >= 0 && left <= 0)
		return -ETIMEDOUT;
	return bpi_wait_loop(pol, q, room_try, &w, left);
}

void bpi_ingress_wake(struct bpi_lane *l)
{
	/*
	 * seq_cst: this exchange is the waker's read-modify-write of
	 * bpi_waitq_wake_after_rmw; a need said after it is for a later take
	 * to answer, and its owner's re-check sees this one.
	 */
	atomic_exchange_explicit(&l->room_need, ROOM_NOBODY,
				 memory_order_seq_cst);
	bpi_waitq_wake_after_rmw(bpi_ring_not_full(l->ring));
}

/*
 * Stamp k jobs with seqs from seq on, step apart (1, or with lanes their
 * count: src/lanes.h). Seqs wrap modulo 2^63 (SEQ_MASK), once in 2^63 /
 * step jobs: the loop without the mask unless this batch crosses.
 */
static inline void stamp(struct bp_job **js, unsigned k, uint64_t seq,
			 uint64_t step, int64_t now, uint32_t stage)
{
	/* status and pipeline_word: one 8-byte store a job */
	const uint64_t marks = bpi_status_mark_word(BP_JOB_OK, JOB_SUBMITTED);

	if (__builtin_expect(seq + (k - 1) * step > SEQ_MASK, 0)) {
		for (unsigned i = 0; i < k; i++) {
			js[i]->seq = (seq + i * step) & SEQ_MASK;
			js[i]->submit_ns = now;
			js[i]->status = BP_JOB_OK;
			js[i]->pipeline_word = JOB_SUBMITTED;
			js[i]->stage = stage;
		}
		return;
	}
#pragma GCC unroll 4
	for (unsigned i = 0; i < k; i++) {
		struct bp_job *j = js[i];

		j->seq = seq;
		seq += step;
		j->submit_ns = now;
		/* from the job's start: the copy spans two members */
		memcpy((char *)j + offsetof(struct bp_job, status), &marks,
		       sizeof(marks));
		j->stage = stage;
	}
}

/*
 * Stamp the k jobs reserved at pos and publish them: with one lane the
 * seq is the position and the publication wakes the workers itself; with
 * lanes (src/lanes.h) the seq is made of the lane position and the lane,
 * and the lane publishes quietly, then wakes the one queue idle workers
 * sleep on, lane 0's.
 */
static inline __attribute__((always_inline)) void
put(struct bp_pipeline *p, struct bpi_lane *l, struct bp_job **js, unsigned k,
    uint64_t pos, int64_t now, bool lanes)
{
	const uint64_t step = lanes ? UINT64_C(1) << p->lane_bits : 1;

	stamp(js, k,
	      lanes ? bpi_lane_seq(pos, l->index, p->lane_bits)
		    : pos & SEQ_MASK,
	      step, now, p->stage_unset);
	/* one job (B=1) without the set-up that runs of any length need */
	if (lanes) {
		if (k == 1)
			bpi_ring_publish_one_quiet(l->ring, pos, js[0]);
		else
			bpi_ring_publish_quiet(l->ring, pos,
					       (void *const *)js, k);
		bpi_waitq_wake(p->intake_wq);
	} else if (k == 1) {
		bpi_ring_publish_one(l->ring, pos, js[0]);
	} else {
		bpi_ring_publish(l->ring, pos, (void *const *)js, k);
	}
}

/*
 * The submit's loop, from the first job on: reserve what there is room
 * for, stamp and publish it, wait for room for the rest (or give up as
 * flags and timeout_ns say). now: the clock at the call.
 */
static inline __attribute__((always_inline)) int
submit_loop(struct bp_pipeline *p, struct bpi_lane *l, struct bp_job **jobs,
	    unsigned n, unsigned flags, int64_t timeout_ns, int64_t now,
	    bool lanes)
{
	int64_t deadline = bpi_deadline(now, timeout_ns);
	unsigned done = 0;

	while (done < n) {
		uint64_t pos;
		int k = bpi_ring_reserve_burst(l->ring, n - done, &pos);

		if (k > 0) {
			/* the position is the seq: stamp, then publish */
			put(p, l, jobs + done, (unsigned)k, pos, now, lanes);
			done += (unsigned)k;
			continue;
		}
		if (k < 0) /* -EPIPE: drain or abort has begun */
			return done ? (int)done : k;
		if (flags & BP_SUBMIT_NONBLOCK)
			return done ? (int)done : -EAGAIN;
		int64_t left = deadline < 0 ? -1 : deadline - bpi_now_ns();

		if (deadline >= 0 && left <= 0)
			return done ? (int)done : -ETIMEDOUT;
		/* only the pipeline's own threads make room in ingress */
		if (bpi_self_is(p)) {
			bpi_log(&p->log, BP_LOG_ERROR,
				"bp_pipeline_submit: a blocking submit from a "
				"stage or sink callback would wait for its own "
				"thread (ingress is full; use "
				"BP_SUBMIT_NONBLOCK)");
			return done ? (int)done : -EDEADLK;
		}
		/*
		 * Without a deadline, wait for the low-water mark, half the
		 * ring: the caller has nothing to do but wait, and it comes
		 * back to room for many batches (a socket's writer is woken
		 * the same way). With one, for room for what is left; at the
		 * deadline, one more try: any room there is will do.
		 */
		int rc = bpi_ingress_wait(
			p, l, n - done, deadline < 0 ? UINT_MAX : n - done,
			left);

		if (rc < 0 && rc != -ETIMEDOUT)
			return done ? (int)done : rc;
		now = bpi_now_ns();
	}
	return (int)done;
}

/*
 * The submit, into lane l. lanes: false only where the pipeline has one
 * lane; true works for any count, one included. One job with room for it
 * goes in a straight line (B=1); anything else takes the loop.
 */
static inline __attribute__((always_inline)) int
submit(struct bp_pipeline *p, struct bpi_lane *l, struct bp_job **jobs,
       unsigned n, unsigned flags, int64_t timeout_ns, bool lanes)
{
	int64_t now;

	/* n > INT_MAX: the count accepted would not fit the return value */
	if (!jobs || n == 0 || n > INT_MAX ||
	    (flags & ~BP_SUBMIT_NONBLOCK))
		return -EINVAL;
	/* relaxed: a stale RUNNING is caught by the ring's -EPIPE */
	if (atomic_load_explicit(&p->state, memory_order_relaxed) == P_CREATED)
		return -EINVAL;
	/* validate before reserving: a reservation cannot be handed back */
	if (bpi_bad_job_pointers(jobs, n))
		return -EINVAL;
	now = bpi_now_ns();
	if (n == 1) {
		uint64_t pos;

		if (__builtin_expect(
			    bpi_ring_reserve_burst(l->ring, 1, &pos) == 1, 1)) {
			put(p, l, jobs, 1, pos, now, lanes);
			return 1;
		}
	}
	return submit_loop(p, l, jobs, n, flags, timeout_ns, now, lanes);
}

int bpi_submit_lane(struct bp_pipeline *p, struct bpi_lane *l,
		    struct bp_job **jobs, unsigned n, unsigned flags,
		    int64_t timeout_ns)
{
	return submit(p, l, jobs, n, flags, timeout_ns, true);
}

int bp_pipeline_submit(struct bp_pipeline *p, struct bp_job **jobs, unsigned n,
		       unsigned flags, int64_t timeout_ns)
{
	struct bpi_lane *l;

	if (!p)
		return -EINVAL;
	/* nlanes is set by create, never changed */
	if (__builtin_expect(p->nlanes == 1, 1))
		return submit(p, p->lanes, jobs, n, flags, timeout_ns, false);
	/* the caller's lane: as dealt at its first submit (lanes.h) */
	l = __builtin_expect(bpi_thread_lane.id == p->lanes_id, 1)
		    ? bpi_thread_lane.lane
		    : bpi_lane_deal_thread(p);
	return submit(p, l, jobs, n, flags, timeout_ns, true);
}
