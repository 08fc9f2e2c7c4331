/* SPDX-License-Identifier: MIT */
/*
 * The worker loop. Each pass:
 *
 *   load the live configuration          (acknowledge a new copy)
 *   poll the stage                       (asynchronous completions)
 *   dequeue a burst <= B from ingress    only while below max_inflight
 *   process it                           (or cancel it, when aborting)
 *   hand completed jobs to the sink      one enqueue on the worker's own ring
 *
 * Nothing here is shared with another worker: the only shared writes are
 * the ingress consumer CAS (one per batch) and the egress ring (this
 * worker is its only producer); in a chain (src/chain.c), the link in
 * front of the stage instead of ingress, and the link behind it, one
 * reservation and one publication per batch. Counters are the worker's
 * own.
 *
 * A worker with nothing to do and nothing in flight waits on the ingress
 * ring's eventcount as its wait policy says, offline meanwhile (a sleeping
 * worker must not hold up a reconfiguration). A worker held back by the
 * sink (egress full, or no ordered credit) waits the same way on its own
 * progress queue, which only the sink wakes, and only for it
 * (docs/wakeup.md). With jobs in flight it keeps polling the stage,
 * yielding the CPU between passes.
 */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "src/jobcheck.h"
#include "src/pipeline_internal.h"
#include "src/ring_internal.h"
#include "src/self.h"
#include "src/wait_internal.h"

/*
 * The live configuration, as pipeline.c's reconfigure() replaces it. Each
 * pass loads the pointer; only when it changed does the worker acknowledge
 * the new copy's gen in cfg_seen, with a release that orders every use of
 * the old copy (and of the stage context it held) before it. No fence, no
 * call on the pass: one acquire load and a compare when nothing changed.
 *
 * Counted with valgrind (scripts/instructions.py and the per-pass split of
 * the same profiles; 2 producers, 2 workers, B=32): this is 5.4
 * instructions per pass. Through liburcu QSBR as before, rcu_dereference
 * and urcu_qsbr_quiescent_state were calls into the shared library, 28
 * instructions there per pass plus the calls, and the worker loop cost
 * 490.6 instructions per pass (15.3 per job) against 458.8 (14.3) with
 * this (19.2 per job since bp_worker_complete checks what it is given).
 * Defining _LGPL_SOURCE, which liburcu's LGPL permits for its small
 * functions in a program that links it dynamically, as this MIT library
 * does, would have inlined them to 5.7 per pass (460.4 per pass, 14.4 per
 * job): as cheap, but still tying every live change to the process-wide
 * grace period.
 */
static inline void cfg_refresh(struct bp_worker *w)
{
	/* acquire: pairs with reconfigure()'s store: nc's fields are seen */
	const struct bpi_live_cfg *c =
		atomic_load_explicit(&w->st->live, memory_order_acquire);

	if (__builtin_expect(c == w->cfg, 1))
		return;
	w->cfg = c;
	/* release: pairs with wait_ack()'s load; the old copy is done with */
	atomic_store_explicit(&w->cfg_seen, c->gen, memory_order_release);
}

/* Before a wait: the worker holds no copy until cfg_online. */
static void cfg_offline(struct bp_worker *w)
{
	/* release: pairs with wait_ack()'s load; the copy is done with */
	atomic_store_explicit(&w->cfg_seen, LIVE_GEN_OFFLINE,
			      memory_order_release);
}

/*
 * After a wait (or at thread start): say "online, copy unknown" before
 * loading the pointer. seq_cst store then seq_cst load, against
 * reconfigure()'s seq_cst store of the pointer then seq_cst load of
 * cfg_seen: one of the two sees the other's store (see wait_ack()).
 */
static void cfg_online(struct bp_worker *w)
{
	const struct bpi_live_cfg *c;

	atomic_store_explicit(&w->cfg_seen, LIVE_GEN_FIRST,
			      memory_order_seq_cst);
	c = atomic_load_explicit(&w->st->live, memory_order_seq_cst);
	w->cfg = c;
	/* release: as in cfg_refresh */
	atomic_store_explicit(&w->cfg_seen, c->gen, memory_order_release);
}

unsigned bp_worker_id(const struct bp_worker *w)
{
	return w ? w->id : UINT_MAX;
}

void *bp_worker_stage_ctx(const struct bp_worker *w)
{
	return w ? w->cfg->stage_ctx : NULL;
}

static inline uint64_t credited(const struct bp_worker *w)
{
	if (w->st->by_delivery)
		/* relaxed: a count of jobs released, only used as credit */
		return atomic_load_explicit(&w->delivered,
					    memory_order_relaxed);
	return w->handed;
}

unsigned bp_worker_inflight(const struct bp_worker *w)
{
	return w ? (unsigned)(w->taken - credited(w)) : 0;
}

/* Completed jobs not yet handed to the sink: done[dhead..dend). */
static inline unsigned pending(const struct bp_worker *w)
{
	return w->dend - w->dhead + (w->oend - w->ohead);
}

/* Jobs in the stage: taken, and neither completed nor handed off. */
static inline uint64_t in_stage(const struct bp_worker *w)
{
	return w->taken - w->handed - pending(w);
}

/* "worker 3", or in a chain "stage 1 worker 3": for log lines. */
static const char *worker_name(const struct bp_worker *w, char *buf,
			       size_t size)
{
	if (w->p->nstages > 1)
		snprintf(buf, size, "stage %u worker %u", w->st->index, w->id);
	else
		snprintf(buf, size, "worker %u", w->id);
	return buf;
}

/*
 * A completion that would complete more jobs than the stage holds, or a
 * NULL or odd job pointer (the egress ring does not check items again),
 * is refused whole: accepting part of it could hand the sink another
 * worker's job.
 */
static int __attribute__((noinline, cold))
refuse(struct bp_worker *w, unsigned n, const char *why)
{
	char who[48];

	bpi_log(&w->p->log, BP_LOG_ERROR,
		"%s: bp_worker_complete of %u jobs refused, none accepted: %s "
		"(the stage holds %llu)",
		worker_name(w, who, sizeof(who)), n, why,
		(unsigned long long)in_stage(w));
	return -EINVAL;
}

/* An overrun found after k jobs were marked: they are the stage's again. */
static int __attribute__((noinline, cold))
refuse_overrun(struct bp_worker *w, struct bp_job **marked, unsigned k,
	       unsigned n)
{
	for (unsigned i = 0; i < k; i++)
		marked[i]->pipeline_word = w->st->mark_in;
	return refuse(w, n,
		      "more than the stage holds (another worker's job, or "
		      "one this worker never took)");
}

/* Jobs of one call that were completed already: skipped, logged once. */
static void __attribute__((noinline, cold))
log_repeats(struct bp_worker *w, const struct bp_job *first, unsigned repeats,
	    unsigned n)
{
	char who[48];

	bpi_log(&w->p->log, BP_LOG_ERROR,
		"%s: bp_worker_complete: %u of %u jobs refused: completed "
		"already%s (the first: job seq %llu); the other %u accepted",
		worker_name(w, who, sizeof(who)), repeats, n,
		w->p->nstages > 1 ? ", or not this stage's" : "",
		(unsigned long long)first->seq, n - repeats);
}

/* Name this stage in a job it failed, unless an earlier stage did. */
static inline void name_failure(const struct bpi_stage *st, struct bp_job *j)
{
	if (j->status != BP_JOB_OK && j->stage == BP_JOB_NO_STAGE)
		j->stage = st->index;
}

/*
 * The order check (ordered mode, the last stage: w->seq_check). The sink
 * finds the runs of consecutive seqs in a batch from a few jobs, not job
 * by job, when the worker's egress stream is in seq order (sink.c), and
 * only then: its jobs reach egress in the order they are completed, so
 * the completions are checked: in one call each job must have the seq
 * after the one before (an XOR and an OR a job), and the call's first must
 * not come before the last call's end (seq_next; SEQ_BACK), since the
 * worker's next take may start further on. That is stricter than in
 * order: a call whose jobs are in order with a gap also stops the check.
 * A synchronous stage completing what it took, in turn, passes; one that
 * does not (an asynchronous stage, a job completed out of turn or twice)
 * stops the check for good, and the sink looks at every job from then
 * on. Done here, where the job's line is loaded anyway, it costs the
 * worker about four instructions a job and saves the sink, the one thread
 * every job passes, about nine (scripts/instructions.py --ordered, B=32,
 * when it came: workers 26.8 -> 31.0, sink 31.8 -> 22.7).
 */
static void __attribute__((noinline, cold)) stream_unsorted(struct bp_worker *w)
{
	w->seq_check = false;
	/*
	 * relaxed: the hand-off publishes the job that broke the order after
	 * this store (a release), and the sink reads the flag after taking
	 * it (an acquire); a batch taken before then was still in order.
	 */
	atomic_store_explicit(&w->unsorted, 1, memory_order_relaxed);
}

/*
 * The fast path's loop: flip each job's pipeline_word from mark_in to its
 * completed value into out[]; return non-zero unless every word was
 * mark_in. That is tested on the words ORed and ANDed (all equal to
 * mark_in exactly when both are: a bit set in any word is set in mark_in,
 * and a bit set in mark_in is set in every word), two operations a job
 * where XORing each with mark_in first took three. The loads, the ORs and
 * the ANDs are of the 8-byte word of status and pipeline_word (struct
 * bpi_status_mark): the mark's half is the check, and (BP_JOB_OK is 0) in
 * the status half the OR is every status ORed, the AND 0. chain: that OR
 * goes to *any, for a chain's failure naming and hand-off sort; a
 * one-stage pipeline leaves it. The store is pipeline_word ^= flip, one
 * instruction on x86 beside the load, which the compiler cannot fold into
 * the 8-byte one: a job costs six. It is of pipeline_word alone, never of
 * status: a stage that completes a job twice, the second time after the
 * next stage got it, must not write back a status that stage has set
 * meanwhile. order: the order check; *back is non-zero when it fails, and
 * *next becomes the seq after the last job's.
 */
static inline __attribute__((always_inline)) uint32_t
flip_marks(struct bp_job **jobs, unsigned n, struct bp_job **out, uint32_t in,
	   uint32_t flip, bool chain, uint32_t *any, bool order, uint64_t *next,
	   uint64_t *back)
{
	/* from mark_in: no job (n == 0) passes, and mark_in changes neither */
	const uint64_t in2 = bpi_status_mark_word(BP_JOB_OK, in);
	uint64_t all_or = in2, all_and = in2, nx = 0, bk = 0;
	struct bpi_status_mark d;

	if (order && n) {
		/* after the last call's; then each one after the one before */
		nx = jobs[0]->seq;
		bk = (nx - *next) & SEQ_BACK;
	}

#pragma GCC unroll 4
	for (unsigned i = 0; i < n; i++) {
		struct bp_job *j = jobs[i];
		uint64_t v;

		memcpy(&v, (char *)j + offsetof(struct bp_job, status),
		       sizeof(v));
		all_or |= v;
		all_and &= v;
		j->pipeline_word ^= flip;
		if (order)
			bk |= j->seq ^ nx++;
		out[i] = j;
	}
	if (order && n) {
		*next = nx & SEQ_MASK;
		*back = bk & SEQ_MASK;
	}
	all_or = (all_or ^ in2) | (all_and ^ in2);
	memcpy(&d, &all_or, sizeof(d));
	*any = chain ? (uint32_t)d.status : 0;
	return d.pipeline_word;
}

/* A chain's completion with a job not ok among them (cold). */
static void __attribute__((noinline))
chain_failures(struct bp_worker *w, struct bp_job **out, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		name_failure(w->st, out[i]);
	w->failed_pending = true;
}

/*
 * A stage that takes failed jobs and completes one ok has recovered it:
 * no stage failed it any more (a later failure is named afresh).
 */
static void __attribute__((noinline))
recovered(struct bp_job **out, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (out[i]->status == BP_JOB_OK)
			out[i]->stage = BP_JOB_NO_STAGE;
}

/* A repeat among them, or more than the stage holds: job by job (cold). */
static int __attribute__((noinline, cold))
complete_each(struct bp_worker *w, struct bp_job **jobs, unsigned n,
	      struct bp_job **out, uint64_t room)
{
	const struct bp_job *first_repeat = NULL;
	unsigned k = 0, repeats = 0;

	if (w->seq_check) /* not worth checking on this path */
		stream_unsorted(w);
	for (unsigned i = 0; i < n; i++) {
		struct bp_job *j = jobs[i];

		if (__builtin_expect(j->pipeline_word != w->st->mark_in, 0)) {
			if (!repeats++)
				first_repeat = j;
			continue;
		}
		if (__builtin_expect(k == room, 0))
			return refuse_overrun(w, out, k, n);
		j->pipeline_word = w->st->mark_in ^ w->st->mark_flip;
		out[k++] = j;
	}
	if (repeats)
		log_repeats(w, first_repeat, repeats, n);
	if (w->st->names_failures)
		chain_failures(w, out, k);
	if (w->st->flags & BP_STAGE_TAKES_FAILED)
		recovered(out, k);
	w->dend += k;
	bpi_stat_add(&w->st_completed, k);
	return (int)k;
}

/*
 * Each job is checked and marked in its pipeline_word (a load and a store
 * in the line whose status the stage has just set): a job completed twice,
 * in one call or two, is refused by itself, and the others are accepted,
 * so a repeat can neither reach the sink twice nor eat the count of a job
 * the stage still holds. In a chain the mark is the stage's (STAGE_MARK),
 * and a job this stage failed is named with it here.
 */
static inline __attribute__((always_inline)) int
complete_body(struct bp_worker *w, struct bp_job **jobs, unsigned n, bool order)
{
	struct bp_job **out;
	uint64_t room;

	if (!jobs && n)
		return refuse(w, n, "NULL jobs");
	if (bpi_bad_job_pointers(jobs, n))
		return refuse(w, n, "a NULL or odd job pointer");
	room = in_stage(w);
	/* done has room for every job the worker may hold (max_inflight) */
	if (w->dend + (n < room ? n : room) > w->done_cap && w->dhead) {
		/* the sink fell behind mid-run: slide what is left down */
		memmove(w->done, w->done + w->dhead,
			(w->dend - w->dhead) * sizeof(*w->done));
		w->dend -= w->dhead;
		if (w->st->next) /* hand_off_chain's: dscan >= dhead */
			w->dscan -= w->dhead;
		w->dhead = 0;
	}
	out = w->done + w->dend;
	if (__builtin_expect(n <= room, 1)) {
		/*
		 * The common case in one pass without a branch per job: each
		 * word is flipped between mark_in and its completed value (a
		 * load and a store) and diff is non-zero if any was not
		 * mark_in (flip_marks). Then flipping them all again restores
		 * every word exactly, a job named twice in this call included
		 * (flipped twice, twice).
		 */
		const uint32_t in = w->st->mark_in, flip = w->st->mark_flip;
		uint32_t diff, any = 0;
		uint64_t next = order ? w->seq_next : 0, back = 0;

		if (__builtin_expect(w->st->names_failures, 0))
			diff = flip_marks(jobs, n, out, in, flip, true, &any,
					  order, &next, &back);
		else
			diff = flip_marks(jobs, n, out, in, flip, false, &any,
					  order, &next, &back);
		if (__builtin_expect(!diff, 1)) {
			if (order) {
				w->seq_next = next;
				if (__builtin_expect(back != 0, 0))
					stream_unsorted(w);
			}
			if (__builtin_expect(any != 0, 0))
				chain_failures(w, out, n);
			if (__builtin_expect(w->st->flags & BP_STAGE_TAKES_FAILED,
					     0))
				recovered(out, n);
			w->dend += n;
			bpi_stat_add(&w->st_completed, n);
			return (int)n;
		}
		for (unsigned i = 0; i < n; i++)
			jobs[i]->pipeline_word ^= flip;
	}
	return complete_each(w, jobs, n, out, room);
}

/* Without the order check, and with it (the worker's seq_check). */
static __attribute__((noinline)) int
complete_plain(struct bp_worker *w, struct bp_job **jobs, unsigned n)
{
	return complete_body(w, jobs, n, false);
}

static __attribute__((noinline)) int
complete_ordered(struct bp_worker *w, struct bp_job **jobs, unsigned n)
{
	return complete_body(w, jobs, n, true);
}

static int complete_many(struct bp_worker *w, struct bp_job **jobs, unsigned n)
{
	if (!w)
		return -EINVAL;
	if (__builtin_expect(w->seq_check, 0))
		return complete_ordered(w, jobs, n);
	return complete_plain(w, jobs, n);
}

/*
 * One job (B=1), as complete_many() would take it when all is well: a
 * valid pointer, a job the stage holds, room in done[] without a slide,
 * its mark mark_in. Anything else goes the general way, which refuses
 * and logs. Out of line, it keeps to the few registers one job needs.
 */
static __attribute__((noinline)) int complete_one(struct bp_worker *w,
						  struct bp_job **jobs)
{
	const struct bpi_stage *st = w->st;
	struct bp_job *j = jobs[0];

	if (bpi_bad_job_pointers(jobs, 1) || in_stage(w) == 0 ||
	    w->dend >= w->done_cap || j->pipeline_word != st->mark_in)
		return complete_many(w, jobs, 1);
	j->pipeline_word ^= st->mark_flip;
	if (w->seq_check) { /* the order check, as flip_marks does it */
		uint64_t s = j->seq;

		if ((s - w->seq_next) & SEQ_BACK)
			stream_unsorted(w);
		w->seq_next = (s + 1) & SEQ_MASK;
	}
	w->done[w->dend] = j;
	if (__builtin_expect(st->names_failures, 0) &&
	    j->status != BP_JOB_OK)
		chain_failures(w, w->done + w->dend, 1);
	if (__builtin_expect(st->flags & BP_STAGE_TAKES_FAILED, 0))
		recovered(w->done + w->dend, 1);
	w->dend++;
	bpi_stat_add(&w->st_completed, 1);
	return 1;
}

/* The checks and the marks as complete_many() says; one job on its own path. */
int bp_worker_complete(struct bp_worker *w, struct bp_job **jobs, unsigned n)
{
	if (n == 1 && w && jobs)
		return complete_one(w, jobs);
	return complete_many(w, jobs, n);
}

/*
 * A chain's hand-off, for every stage but the last: jobs that go on (ok,
 * or failed when the next stage takes failed jobs, never cancelled) are
 * published to the link in one batch, the others go to the sink through
 * the egress ring, named with the stage that failed them. Each completed
 * job is looked at once (done[dscan, dend), in this worker's cache: the
 * stage has just completed it): one going to the sink moves to out[],
 * one going on stays in done[]; what a full ring leaves waits there for
 * the next pass. Only a hand-off after a completion with a failed job
 * among them (failed_pending) looks at the jobs; the others publish what
 * done[] holds. A job going on carries the next stage's mark already
 * (bp_worker_complete). link_blocked: a job waits for the link.
 */
static bool goes_on(const struct bpi_stage *st, const struct bp_job *j)
{
	return j->status == BP_JOB_OK || st->forward_all ||
	       (st->next_takes_failed && j->status != BP_JOB_CANCELLED);
}

/*
 * Publish done[dhead, dend) (not empty) to the link, as much as it takes;
 * returns how many went. What a full link leaves waits for the next pass
 * (link_blocked). The jobs carry the next stage's mark already
 * (bp_worker_complete).
 */
static inline unsigned link_publish(struct bp_worker *w)
{
	uint64_t pos;
	int r = bpi_ring_reserve_burst(w->st->next, w->dend - w->dhead, &pos);

	if (r > 0) {
		bpi_ring_publish(w->st->next, pos,
				 (void *const *)(w->done + w->dhead),
				 (unsigned)r);
		w->dhead += (unsigned)r;
		if (w->dhead == w->dend)
			w->dhead = w->dend = w->dscan = 0;
	}
	w->link_blocked = w->dend > w->dhead;
	return r > 0 ? (unsigned)r : 0;
}

static unsigned __attribute__((noinline)) hand_off_sort(struct bp_worker *w)
{
	const struct bpi_stage *st = w->st;
	unsigned k = w->dscan, on = 0, out = 0;
	uint64_t pos;
	int r;

	/* every job completed since the last look was ok: all go on */
	if (!w->failed_pending)
		k = w->dend;
	w->failed_pending = false;
	for (unsigned i = k; i < w->dend; i++) {
		struct bp_job *j = w->done[i];

		if (goes_on(st, j)) {
			w->done[k++] = j;
			continue;
		}
		if (w->oend == w->done_cap) {
			/* out[] slides down: it holds what the worker holds */
			memmove(w->out, w->out + w->ohead,
				(w->oend - w->ohead) * sizeof(*w->out));
			w->oend -= w->ohead;
			w->ohead = 0;
		}
		w->out[w->oend++] = j;
	}
	w->dend = w->dscan = k;
	if (w->dend > w->dhead)
		on = link_publish(w);
	else
		w->link_blocked = false;
	if (w->oend > w->ohead &&
	    (r = bpi_ring_reserve_burst(w->egress, w->oend - w->ohead,
					&pos)) > 0) {
		out = (unsigned)r;
		/* quiet: the sink sleeps on sink_wq, woken below */
		bpi_ring_publish_quiet(w->egress, pos,
				       (void *const *)(w->out + w->ohead), out);
		w->ohead += out;
		if (w->ohead == w->oend)
			w->ohead = w->oend = 0;
		bpi_waitq_wake_all(&w->p->sink_wq);
	}
	w->handed += on + out;
	bpi_stat_add(&w->st_handed, on + out);
	return on + out;
}

/*
 * The common case: every job completed since the last hand-off was ok and
 * none waits for the sink, so done[dhead, dend) goes on as it is (a full
 * link leaves the rest for the next pass, as hand_off_sort does).
 */
static unsigned hand_off_chain(struct bp_worker *w)
{
	unsigned on;

	if (__builtin_expect(w->failed_pending || w->oend != w->ohead, 0))
		return hand_off_sort(w);
	w->dscan = w->dend;
	on = link_publish(w);
	w->handed += on;
	bpi_stat_add(&w->st_handed, on);
	return on;
}

/*
 * Hand completed jobs to the sink; returns how many went. bp_pipeline_submit
 * checked every job, so the egress enqueue skips the item check, which would
 * re-read all held jobs on every pass while egress is full.
 */
static unsigned hand_off(struct bp_worker *w)
{
	uint64_t pos;
	int n;

	if (w->st->next)
		return hand_off_chain(w);
	n = bpi_ring_reserve_burst(w->egress, pending(w), &pos);
	if (n <= 0)
		return 0; /* egress full: the sink is behind, retry next pass */
	/* quiet: the sink sleeps on sink_wq, woken below */
	bpi_ring_publish_quiet(w->egress, pos,
			       (void *const *)(w->done + w->dhead),
			       (unsigned)n);
	w->dhead += (unsigned)n;
	if (w->dhead == w->dend)
		w->dhead = w->dend = 0;
	w->handed += (uint64_t)n;
	bpi_stat_add(&w->st_handed, (uint64_t)n);
	bpi_waitq_wake_all(&w->p->sink_wq);
	return (unsigned)n;
}

/* Jobs taken while aborting: not started. One that an earlier stage of
 * a chain failed (BP_STAGE_TAKES_FAILED) keeps its status. */
static void cancel_jobs(struct bp_worker *w, struct bp_job **jobs, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (jobs[i]->status == BP_JOB_OK)
			jobs[i]->status = BP_JOB_CANCELLED;
	bp_worker_complete(w, jobs, n);
}

static void note_batch(struct bp_worker *w, unsigned n)
{
	/* bucket b holds [2^b, 2^(b+1)): the leading bit of n >= 1 */
	unsigned b = 31u - (unsigned)__builtin_clz(n);

	if (b > BP_BATCH_BUCKETS - 1)
		b = BP_BATCH_BUCKETS - 1;
	bpi_stat_add(&w->st_batches, 1);
	bpi_stat_add(&w->st_jobs, n);
	bpi_stat_add(&w->st_batch_hist[b], 1);
}

/* Jobs to take from intake (ingress, its lanes, or a link), or its end. */
static int intake_ready(const struct bp_worker *w)
{
	return w->lanes ? bpi_lanes_ready(w->p) : bpi_ring_ready(w->in);
}

/* Intake closed and drained: no job can come. */
static int intake_ended(const struct bp_worker *w)
{
	if (w->lanes)
		return bpi_lanes_ended(w->p);
	return bpi_ring_peek(w->in) < 0;
}

/*
 * Ingress wakes one idle worker per publication (a wake-one queue), and
 * the wake disarms it. A worker back from an idle wait that takes jobs
 * arms it again for the workers still asleep, and if it sees more ready,
 * wakes one of them, once per wait: a burst fans out to as many workers as
 * it keeps busy, one wake-up each, and a saturated pipeline makes no system
 * calls. No job waits on this: the woken worker keeps taking while it
 * finds jobs.
 */
static int ingress_ready(void *arg)
{
	return intake_ready(arg);
}

/*
 * Workers of a stage asleep in a futex wait: on its intake (ingress or its
 * link), on their progress queue (held back by the sink), on the next
 * link's not-full queue (held back by the next stage) or on the gate
 * (stage 0 of a gated chain). relaxed: a hint, a stale count wakes one
 * worker too many or too few. A worker still in its wait's spin phase
 * counts as awake: it holds a CPU, and it takes what comes without a
 * wake-up.
 */
static unsigned workers_asleep(const struct bp_pipeline *p,
			       const struct bpi_stage *st,
			       struct bpi_waitq *in_q)
{
	unsigned n = __atomic_load_n(&in_q->sleepers, __ATOMIC_RELAXED);

	if (st->next)
		n += __atomic_load_n(&bpi_ring_not_full(st->next)->sleepers,
				     __ATOMIC_RELAXED);
	if (st->index == 0 && p->gate)
		n += __atomic_load_n(&p->gate_wq.sleepers,
				     __ATOMIC_RELAXED);
	for (unsigned i = st->first; i < st->first + st->nworkers; i++)
		n += __atomic_load_n(&p->workers[i].progress.sleepers,
				     __ATOMIC_RELAXED);
	/* stale counts may see a worker on both queues at once */
	return n < st->nworkers ? n : st->nworkers;
}

static inline void pass_wake_on(struct bp_worker *w)
{
	const struct bpi_stage *st = w->st;
	/* with lanes too: lane 0's is the queue of them all (lanes.h) */
	struct bpi_waitq *q = bpi_ring_not_empty(w->in);

	w->pass_on = false;
	/*
	 * As many workers awake, not asleep in a wait, as there are CPUs to
	 * run them: leave the others asleep, and the queue disarmed, so that
	 * publications wake nobody. With more workers than cores, waking one
	 * per publication only made them take the CPU from each other (and
	 * from the producers and the sink), a wake-up and a sleep per batch.
	 * Nothing is stranded: an awake worker takes what comes, or waits
	 * for the sink, which wakes it; each one that goes to sleep on
	 * ingress arms the queue in its own bpi_waitq_prepare and looks at
	 * ingress once more first. (wake_limit is nworkers, no limit, for a
	 * stage with poll: see chain.c.) Once per wait, so the walk over
	 * the workers' queues is not on the per-batch path. (Ingress, or the
	 * link in front of a later stage of a chain: the stage's own.)
	 */
	if (st->wake_limit < st->nworkers &&
	    st->nworkers - workers_asleep(w->p, st, q) >= st->wake_limit)
		return;
	bpi_waitq_pass_on(q, ingress_ready, w);
}

/*
 * Room to take more, by the credit the worker last saw. In ordered mode
 * the credit is `delivered`, which the sink writes: reading it on every
 * pass cost a cache miss per pass at small batches. A stale credit only
 * understates the room, so it is read again only when the room it gives
 * falls short of a whole batch.
 */
/*
 * The gate of a chain (pipeline_internal.h): how many more jobs stage 0
 * may take from ingress before the sink delivers some. relaxed: counts
 * only; the jobs travel through the rings, which order them.
 */
static unsigned gate_room(const struct bp_worker *w)
{
	const struct bp_pipeline *p = w->p;
	uint64_t taken = bpi_lanes_dequeued(p);
	uint64_t done = atomic_load_explicit(&p->gate_delivered,
					     memory_order_relaxed);
	uint64_t out = (taken - done) & SEQ_MASK;

	return out < p->gate ? p->gate - (unsigned)out : 0;
}

static inline unsigned take_room(struct bp_worker *w, unsigned batch)
{
	unsigned max = w->st->max_inflight;
	unsigned room;

	if (!w->st->by_delivery) {
		room = max - (unsigned)(w->taken - w->handed);
		if (__builtin_expect(w->p->gate != 0, 0) &&
		    w->st->index == 0 && room) {
			unsigned g = gate_room(w);

			room = g < room ? g : room;
		}
		return room;
	}
	room = max - (unsigned)(w->taken - w->delivered_seen);
	if (room < batch) {
		/* relaxed: a count of jobs released, only used as credit */
		w->delivered_seen = atomic_load_explicit(&w->delivered,
							 memory_order_relaxed);
		room = max - (unsigned)(w->taken - w->delivered_seen);
	}
	return room;
}

int bp_worker_intake_fd(struct bp_worker *w)
{
	int fd;

	if (!w)
		return -EINVAL;
	/* with lanes too: lane 0's is the queue of them all (lanes.h) */
	fd = bpi_waitq_fd(bpi_ring_not_empty(w->in));
	/* stage 0 of a gated chain may also sleep armed on the gate: on the
	 * same descriptor, which the sink writes when the gate opens */
	if (fd >= 0 && w->st->index == 0 && w->p->gate)
		bpi_waitq_borrow_fd(&w->p->gate_wq, fd);
	return fd;
}

/*
 * Stage 0 of a gated chain that could take jobs but for the gate: arm on
 * the gate's queue (its descriptor is intake's), then look at the gate,
 * as every sleeper does: the sink's wake after a delivery either sees the
 * arm or is seen by the look. Returns as bp_worker_intake_arm.
 */
static int arm_gate(struct bp_worker *w)
{
	struct bpi_waitq *q = &w->p->gate_wq;

	/* acquire: the borrowed descriptor (bp_worker_intake_fd) is whole */
	if (!__atomic_load_n(&q->efd1, __ATOMIC_ACQUIRE))
		return 0; /* no descriptor: the stage sleeps as before */
	bpi_waitq_prepare_fd(q);
	if (gate_room(w) > 0) {
		bpi_waitq_cancel_fd(q);
		return 1;
	}
	w->intake_armed = true;
	w->armed_q = q;
	return 0;
}

/*
 * The stage's sleep as a sleeper on ingress (src/waitq.c's descriptor
 * sleepers): announce and arm, then look at ingress, as every sleeper
 * does, so that a publication either sees the arm or is seen here.
 */
int bp_worker_intake_arm(struct bp_worker *w)
{
	struct bpi_waitq *q;

	if (!w)
		return -EINVAL;
	if (w->intake_armed)
		return 0; /* armed already */
	/* a serial stage's next job, filed and now its turn, or filed jobs
	 * at the end of its stream (flushed): take them */
	if (w->st->order &&
	    (w->st->order[w->st->order_next & w->st->order_mask] ||
	     (w->st->parked && bp_ring_is_closed(w->in) &&
	      !bp_ring_count(w->in))))
		return take_room(w, 1) ? 1 : 0;
	if (take_room(w, 1) == 0) {
		/* held by the gate alone: wake when it opens */
		if (w->p->gate && w->st->index == 0 && !w->st->by_delivery &&
		    w->taken - w->handed < w->st->max_inflight)
			return arm_gate(w);
		return 0; /* could take nothing */
	}
	/* intake closed and empty: no job can come (intake_ready below
	 * says yes to the end of the stream too), sleep unarmed */
	if (intake_ended(w))
		return 0;
	q = bpi_ring_not_empty(w->in);
	if (bpi_waitq_fd(q) < 0)
		return 0; /* no descriptor: the stage sleeps as before */
	bpi_waitq_prepare_fd(q);
	if (intake_ready(w)) {
		bpi_waitq_cancel_fd(q);
		/* closed meanwhile with nothing left: as above; anything else
		 * (a job, perhaps taken by another worker since) says look
		 * again rather than sleep unarmed */
		return intake_ended(w) ? 0 : 1;
	}
	w->intake_armed = true;
	w->armed_q = q;
	return 0;
}

void bp_worker_intake_disarm(struct bp_worker *w)
{
	if (!w || !w->intake_armed)
		return;
	w->intake_armed = false;
	bpi_waitq_cancel_fd(w->armed_q);
	/* a wake-one queue may have woken this worker alone: pass it on at
	 * the next take, as after an idle wait */
	w->pass_on = true;
}

/*
 * A serial stage's take (BP_STAGE_SERIAL after stage 0): file the n jobs
 * in w->buf by seq, then put back in w->buf the run that starts at
 * order_next, in submission order, at most `most` (the batch: the rest
 * waits for the next pass); returns its length. The stages before
 * hand every job on and the gate bounds the seqs in flight by the
 * buffer's size, so every seq comes, and fits: a job that does not (a
 * bug) is not lost but goes at once, out of turn, logged.
 */
static unsigned __attribute__((noinline, cold))
order_misfit(struct bp_worker *w, const struct bp_job *j)
{
	bpi_log(&w->p->log, BP_LOG_ERROR,
		"stage %u (serial): job seq %llu does not fit its order "
		"buffer at seq %llu: processed out of turn",
		w->st->index, (unsigned long long)j->seq,
		(unsigned long long)w->st->order_next);
	return 1;
}

static unsigned order_take(struct bp_worker *w, unsigned n, unsigned most)
{
	struct bpi_stage *st = w->st;
	const uint64_t mask = st->order_mask;
	uint64_t next = st->order_next;
	unsigned k = 0, misfits = 0;
	struct bp_job *j;

	for (unsigned i = 0; i < n; i++) {
		j = w->buf[i];
		if (__builtin_expect(((j->seq - next) & SEQ_MASK) > mask ||
					     st->order[j->seq & mask],
				     0)) {
			misfits += order_misfit(w, j);
			w->buf[k++] = j; /* k <= i: read already */
			continue;
		}
		st->order[j->seq & mask] = j;
	}
	while (k < most && (j = st->order[next & mask]) != NULL) {
		st->order[next & mask] = NULL;
		w->buf[k++] = j;
		next = (next + 1) & SEQ_MASK;
	}
	st->order_next = next;
	st->parked += n - misfits;
	st->parked -= k - misfits;
	/* relaxed: a snapshot for stall reports */
	atomic_store_explicit(&st->stall_parked, st->parked,
			      memory_order_relaxed);
	atomic_store_explicit(&st->stall_next, next, memory_order_relaxed);
	return k;
}

/*
 * The end of a serial stage's stream with jobs still parked: a seq that
 * never came (a bug upstream). They go in seq order rather than never.
 */
static unsigned __attribute__((noinline, cold))
order_flush(struct bp_worker *w, unsigned most)
{
	struct bpi_stage *st = w->st;
	unsigned k = 0;

	if (!st->flush_logged)
		bpi_log(&w->p->log, BP_LOG_ERROR,
			"stage %u (serial): its intake ended with %u jobs "
			"waiting for seq %llu, which never came: processed in "
			"order without it",
			st->index, st->parked,
			(unsigned long long)st->order_next);
	st->flush_logged = true;
	for (uint64_t i = 0; i <= st->order_mask && k < most; i++) {
		uint64_t at = (st->order_next + i) & st->order_mask;

		if (st->order[at]) {
			w->buf[k++] = st->order[at];
			st->order[at] = NULL;
		}
	}
	st->parked -= k;
	/* relaxed: a snapshot for stall reports, as in order_take */
	atomic_store_explicit(&st->stall_parked, st->parked,
			      memory_order_relaxed);
	return k;
}

/*
 * A serial stage's take: file what its link has (room: the order buffer,
 * which the gate keeps from filling), then release the run that is its
 * turn, within max_batch and what max_inflight leaves. Returns what was
 * released (in w->buf, in seq order), 1 as progress when jobs were only
 * filed, 0, or -EPIPE at the end of the stream with nothing parked.
 */
static int take_serial(struct bp_worker *w, unsigned batch)
{
	struct bpi_stage *st = w->st;
	unsigned held = (unsigned)(w->taken - w->handed), got = 0, k;
	uint64_t size = st->order_mask + 1;
	unsigned room = size > (uint64_t)held + st->parked
				? (unsigned)(size - held - st->parked)
				: 0;
	unsigned cap = st->max_inflight > held ? st->max_inflight - held : 0;
	int n = 0;

	if (cap > batch)
		cap = batch;
	/* at most cap: what is released (and a misfit, which goes at once)
	 * never takes the worker past max_inflight */
	if (room > cap)
		room = cap;
	if (room) {
		/* the previous stage's workers wait for room on the link's
		 * not-full queue, which the dequeue wakes */
		n = bp_ring_dequeue_burst(w->in, (void **)w->buf, room, NULL);
		got = n > 0 ? (unsigned)n : 0;
	} else if (bp_ring_is_closed(w->in) && !bp_ring_count(w->in)) {
		n = -EPIPE; /* the flush below needs to know */
	}
	if (n == -EPIPE && !st->parked)
		return -EPIPE;
	k = order_take(w, got, cap);
	if (k == 0 && n == -EPIPE && cap)
		k = order_flush(w, cap);
	if (k == 0)
		return got ? -EAGAIN : 0; /* filed only: progress */
	return (int)k;
}

/* A job that came failed and this stage does not take (filter_failed). */
static inline bool skips(const struct bpi_stage *st, const struct bp_job *j)
{
	return j->status != BP_JOB_OK &&
	       (j->status == BP_JOB_CANCELLED ||
		!(st->flags & BP_STAGE_TAKES_FAILED));
}

/* Run the stage on what was taken: cancelled when aborting; a job that
 * came failed and is not for this stage completed as it is. */
static void start_jobs(struct bp_worker *w, unsigned n)
{
	struct bp_job **b = w->buf;
	unsigned k = 0;

	/* acquire: jobs taken after abort began are not started */
	if (atomic_load_explicit(&w->p->aborting, memory_order_acquire)) {
		cancel_jobs(w, b, n);
		return;
	}
	if (__builtin_expect(w->st->filter_failed, 0)) {
		/* in order: a serial stage's process sees the rest in turn */
		for (unsigned i = 0; i < n; i++) {
			struct bp_job *j = b[i];

			if (skips(w->st, j))
				bp_worker_complete(w, &j, 1);
			else
				b[k++] = j;
		}
		n = k;
		if (!n)
			return;
	}
	w->st->table.process(w->state, w, b, n);
}

/* Take and start up to B jobs; -EPIPE at the end of the ingress stream. */
static int take_batch(struct bp_worker *w)
{
	struct bp_pipeline *p = w->p;
	unsigned room, want;
	int n;

	if (__builtin_expect(w->st->order != NULL, 0)) {
		n = take_serial(w, w->cfg->max_batch);
		if (n == -EAGAIN)
			return 1; /* filed, not yet their turn: progress */
		if (n <= 0)
			return n;
		goto taken;
	}
	room = take_room(w, w->cfg->max_batch);
	want = w->cfg->max_batch < room ? w->cfg->max_batch : room;
	if (want == 0) {
		return 0;
	} else if (w->lanes) {
		struct bpi_lane *l;

		/* as below, from one lane, the lanes in turn */
		n = bpi_lanes_take(p, &w->lane_next, (void **)w->buf, want,
				   &l);
		if (n <= 0)
			return n;
		bpi_ingress_taken(l);
	} else if (w->in == p->ingress) {
		/* no wake check of the ring's own: threads waiting for room
		 * wait for a need of theirs, and bpi_ingress_taken wakes them
		 * then */
		n = bpi_ring_dequeue_burst_nowake(p->ingress, (void **)w->buf,
						  want);
		if (n <= 0)
			return n;
		bpi_ingress_taken(p->lanes);
	} else {
		/* a link: the previous stage's workers wait for room on its
		 * not-full queue, which the dequeue wakes */
		n = bp_ring_dequeue_burst(w->in, (void **)w->buf, want, NULL);
		if (n <= 0)
			return n;
	}
taken:
	if (w->pass_on)
		pass_wake_on(w);
	w->taken += (uint64_t)n;
	note_batch(w, (unsigned)n);
	/*
	 * The worker does not touch the jobs themselves (in a one-stage
	 * pipeline): a stage that leaves them alone costs no cache-line
	 * transfer to this core.
	 */
	start_jobs(w, (unsigned)n);
	return n;
}

/* Wake condition of an idle worker: jobs to take, or the stream ended. */
static int worker_has_work(void *arg)
{
	struct bp_worker *w = arg;
	const struct bpi_stage *st = w->st;

	/* a serial stage: also its own next job, filed and now its turn
	 * (this worker is the only one that touches order) */
	return intake_ready(w) ||
	       (st->order && st->order[st->order_next & st->order_mask]);
}

/*
 * Wake condition of a worker held back by the sink: room in its egress
 * ring for the jobs it holds, or (ordered mode) credit to take more. The
 * sink changes both, and wakes w->progress after each (sink.c).
 */
static int sink_made_progress(void *arg)
{
	struct bp_worker *w = arg;

	if (pending(w))
		return bp_ring_free_count(w->egress) > 0;
	return bp_worker_inflight(w) < w->st->max_inflight;
}

/* Wake condition of a chain's worker held back by a full link. */
static int link_has_room(void *arg)
{
	struct bp_worker *w = arg;

	return bp_ring_free_count(w->st->next) > 0;
}

/* Wake condition of a stage 0 worker held back by the gate. */
static int gate_open(void *arg)
{
	return gate_room(arg) > 0;
}

static void idle(struct bp_worker *w, bool eos)
{
	struct bp_wait_policy pol = w->cfg->worker_wait;
	struct bpi_waitq *q = bpi_ring_not_empty(w->in);
	int (*ready)(void *) = worker_has_work;

	if (w->taken != w->handed + pending(w)) {
		/* jobs in the stage: poll again soon, let others run */
		sched_yield();
		return;
	}
	if (pending(w) && w->link_blocked) {
		/* held back by the next stage: its takes wake the link's
		 * not-full queue */
		q = bpi_ring_not_full(w->st->next);
		ready = link_has_room;
	} else if (pending(w) ||
		   bp_worker_inflight(w) >= w->st->max_inflight) {
		/* held back by the sink: wait for it as the policy says */
		q = &w->progress;
		ready = sink_made_progress;
	} else if (eos) {
		return; /* nothing held, stream ended: the loop exits */
	} else if (__builtin_expect(w->p->gate != 0, 0) &&
		   w->st->index == 0 && gate_room(w) == 0) {
		/* held back by the gate: the sink's deliveries open it */
		q = &w->p->gate_wq;
		ready = gate_open;
	}
	cfg_offline(w);
	bpi_wait_loop(&pol, q, ready, w, -1);
	cfg_online(w);
	/*
	 * Back from a wait on intake, the wake-one queue may have woken this
	 * worker alone: pass it on at the next take. Also after a wait on
	 * the gate that an intake wake-up led to (pass_on still set: the
	 * take found the gate closed and took nothing), or the workers still
	 * asleep on intake would stay so while it never empties.
	 */
	w->pass_on = w->pass_on || ready == worker_has_work ||
		     ready == gate_open;
}
static int go_said(void *arg)
{
	struct bp_pipeline *p = arg;

	/* acquire: pairs with start()'s release of start_go */
	return atomic_load_explicit(&p->start_go, memory_order_acquire);
}

/* Wait for start() to say go (1) or give up (-1); cold path: sleep. */
static int wait_go(struct bp_pipeline *p)
{
	struct bp_wait_policy pol;

	bp_wait_policy_init(&pol);
	pol.strategy = BP_WAIT_SLEEP;
	int rc;

	do /* -EINTR is a signal, not start's answer: wait again */
		rc = bpi_wait_loop(&pol, &p->start_wq, go_said, p, -1);
	while (rc == -EINTR);
	return rc;
}

void *bpi_worker_main(void *arg)
{
	struct bp_worker *w = arg;
	struct bp_pipeline *p = w->p;
	const struct bp_stage *st = &w->st->table;
	bool eos = false;
	int rc = 0;

	bpi_self_set(p);
	cfg_online(w);
	if (st->init)
		rc = st->init(w, &w->state);
	/* release: start() reads the result after seeing inits_done */
	atomic_store_explicit(&w->init_rc, rc, memory_order_relaxed);
	atomic_fetch_add_explicit(&p->inits_done, 1, memory_order_release);
	bpi_waitq_wake_all_slow(&p->start_wq);
	cfg_offline(w);
	int go = wait_go(p);
	cfg_online(w); /* the copy init saw may be gone */
	if (go < 0 || rc != 0)
		goto out;

	for (;;) {
		unsigned progress = 0;

		cfg_refresh(w);
		if (st->poll && w->taken != w->handed + pending(w))
			st->poll(w->state, w);
		/* acquire: pairs with abort()'s release */
		if (!w->cancel_called &&
		    atomic_load_explicit(&p->aborting, memory_order_acquire)) {
			w->cancel_called = true;
			if (st->cancel)
				st->cancel(w->state, w);
		}
		if (!eos) {
			int n = take_batch(w);

			if (n > 0) {
				progress++;
			} else if (n == -EPIPE) {
				eos = true;
				/*
				 * Pass the end of the stream on: ingress wakes
				 * one worker per publication, so the last
				 * publication after close may have woken only
				 * this one while others sleep.
				 */
				bpi_waitq_wake_all_slow(
					bpi_ring_not_empty(w->in));
			}
		}
		if (pending(w))
			progress += hand_off(w);
		if (eos && w->taken == w->handed)
			break;
		if (!progress)
			idle(w, eos);
	}
out:
	if (rc == 0 && st->fini)
		st->fini(w->state, w);
	/* this worker is its egress ring's only producer: it ends the stream */
	bp_ring_close(w->egress);
	bpi_waitq_wake_all_slow(&p->sink_wq);
	/*
	 * The last of its stage ends the next stage's intake (close wakes
	 * its sleepers). acq_rel: the last one's close comes after every
	 * other worker's publications to the link, which it acquires.
	 */
	if (w->st->next && atomic_fetch_sub_explicit(&w->st->running, 1,
						     memory_order_acq_rel) == 1)
		bp_ring_close(w->st->next);
	cfg_offline(w);
	bpi_thread_exited(p, &w->exited);
	return NULL;
}
