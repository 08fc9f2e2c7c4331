/* SPDX-License-Identifier: MIT */
/*
 * The sink thread: takes completed jobs from every worker's egress ring (it
 * is their only consumer) and calls the application's sink in batches.
 *
 * Unordered: each burst goes to the sink callback as it comes.
 *
 * Ordered: jobs go into a reorder window indexed by seq (their ingress
 * position, so seqs are dense) and leave it strictly in seq order. The
 * window never overflows because workers count a job against their
 * max_inflight until the sink has *delivered* it (the sink credits them
 * through worker->delivered): at most workers * max_inflight jobs are
 * between ingress and delivery, and since workers take ingress positions
 * in order, every seq in [next_seq, newest taken] belongs to one of them.
 * So the window holds workers * max_inflight slots and no more.
 *
 * A chain's links do not keep ingress order, so there the bound is the
 * gate instead (pipeline_internal.h): the sink counts what it delivered in
 * gate_delivered, stage 0 takes only while it is less than the gate
 * behind, and the window is the gate plus what stage 0 takes at once.
 */
#include <errno.h>
#include <string.h>
/* window_free's vector form: 8-byte pointers, two to a 16-byte load */
#if defined(__SSE2__) && defined(__x86_64__) && defined(__LP64__)
#define WINDOW_SSE2 1
#include <emmintrin.h>
#endif

#include "src/pipeline_internal.h"
#include "src/ring_internal.h"
#include "src/self.h"
#include "src/wait_internal.h"

#define SINK_BATCH 256
/* deliver()'s look-ahead; the batch arrays and the window have as many
 * spare entries past their end (pipeline_internal.h) */
#define SINK_AHEAD BPI_SINK_AHEAD

static inline void count_latency(struct bp_pipeline *p, int64_t lat,
				 uint64_t jobs)
{
	bpi_stat_add(&p->st_lat[bpi_lat_bucket(lat > 0 ? (uint64_t)lat : 0)],
		     jobs);
}

/*
 * Count statuses and latencies, then hand the batch to the application.
 * Jobs of one bp_pipeline_submit call share a submit time and usually arrive
 * together, so the latency bucket is computed and counted once per run of
 * equal submit times, not once per job (a counter bumped per job would
 * chain every job through a store and a reload of the same word).
 */
static void deliver(struct bp_pipeline *p, struct bp_job **jobs, unsigned n)
{
	int64_t now = bpi_now_ns();
	uint64_t ok = n, cancelled = 0;
	int64_t run_ns;
	uint32_t any = 0; /* the statuses ORed: 0 when every job is ok */
	struct bp_job **jp = jobs, **run = jobs, **end = jobs + n;

	/*
	 * Each job's line was last written on a worker's core: ask for it
	 * SINK_AHEAD jobs early, so the transfers overlap instead of queueing
	 * (jobs has SINK_AHEAD spare entries past n: pipeline_internal.h).
	 */
	for (unsigned i = 0; i < SINK_AHEAD && i < n; i++)
		__builtin_prefetch(jobs[i], 0, 3);
	/* a run starts at `run`; its length is counted where it ends */
	run_ns = n ? jobs[0]->submit_ns : 0;
#pragma GCC unroll 4
	for (; jp < end; jp++) {
		const struct bp_job *j = *jp;

		__builtin_prefetch(jp[SINK_AHEAD], 0, 3);
		any |= (uint32_t)j->status;
		if (__builtin_expect(j->submit_ns != run_ns, 0)) {
			count_latency(p, now - run_ns, (uint64_t)(jp - run));
			run_ns = j->submit_ns;
			run = jp;
		}
	}
	if (end > run)
		count_latency(p, now - run_ns, (uint64_t)(end - run));
	if (__builtin_expect(any != 0, 0)) {
		/* a failure or a cancellation among them: count by status */
		ok = 0;
		for (unsigned i = 0; i < n; i++) {
			int32_t st = jobs[i]->status;

			ok += st == BP_JOB_OK;
			cancelled += st == BP_JOB_CANCELLED;
		}
	}
	bpi_stat_add(&p->st_ok, ok);
	bpi_stat_add(&p->st_failed, n - ok - cancelled);
	bpi_stat_add(&p->st_cancelled, cancelled);
	bpi_stat_add(&p->st_sink_batches, 1);
	/* the seqs before the callback, which may recycle the jobs; the
	 * answer after it, once they are delivered */
	bool flushed = bpi_flush_count(&p->flush, jobs, n, SEQ_MASK);

	p->cfg.sink(p->cfg.sink_ctx, jobs, n);
	if (__builtin_expect(flushed, 0))
		bpi_flush_sink_done(&p->flush);
	if (__builtin_expect(p->gate != 0, 0)) {
		/* relaxed: the sink is the only writer; stage 0's workers
		 * read it as a count (worker.c's gate_room) */
		atomic_store_explicit(
			&p->gate_delivered,
			(atomic_load_explicit(&p->gate_delivered,
					      memory_order_relaxed) +
			 n) & SEQ_MASK,
			memory_order_relaxed);
		bpi_waitq_wake_all(&p->gate_wq);
	}
}

/*
 * A job whose seq is already in the window, or behind next_seq (delivered),
 * is one a stage completed twice: the worker's counts cannot see a repeat
 * while the stage holds other jobs. It is not delivered again; its worker
 * is credited as for a delivery, since the worker counted it handed.
 */
static void __attribute__((noinline, cold))
refuse_repeat(struct bp_pipeline *p, const struct bp_job *j, unsigned worker,
	      uint64_t *credit)
{
	bpi_log(&p->log, BP_LOG_ERROR,
		"sink: job seq %llu from worker %u was completed twice: "
		"not delivered again",
		(unsigned long long)j->seq, worker);
	bpi_stat_add(&p->st_repeats, 1);
	credit[worker]++;
}

/*
 * A worker held back by the sink waits on its own queue: wake it once its
 * egress ring has room or its credit came back, after publishing that
 * (the dequeue's cons store, the store of delivered). Only it can use what
 * changed; waking every held-back worker made each of the others wake,
 * re-check and sleep again, per sink batch. With no sleeper this is a
 * fence and a load (a waker-fences queue).
 */
static inline void wake_worker(struct bp_pipeline *p, unsigned w)
{
	bpi_waitq_wake(&p->workers[w].progress);
}

/*
 * Ordered mode. The window holds every job handed and not yet delivered at
 * window[seq & mask]; a job leaves it only once every seq before it has
 * left. Jobs come from a worker in runs of consecutive seqs (a worker takes
 * a batch of consecutive ingress positions and completes it in order), so
 * the window files and delivers whole runs: a run is copied in at once,
 * with its length and worker noted at its first seq (window_run), and the
 * runs that follow next_seq back to back are delivered straight from the
 * window and cleared at once. Per job that leaves a look at its seq; the
 * rest is per run.
 */

/* Whether n window entries from w are all empty. */
static inline bool window_free(struct bp_job *const *w, unsigned n)
{
	uintptr_t any = 0;
	unsigned i = 0;

#ifdef WINDOW_SSE2
	/* four entries per two 16-byte loads: the sink's own memory */
	__m128i v = _mm_setzero_si128();

	for (; i + 4 <= n; i += 4) {
		__m128i a = _mm_loadu_si128((const void *)&w[i]);
		__m128i b = _mm_loadu_si128((const void *)&w[i + 2]);

		v = _mm_or_si128(v, _mm_or_si128(a, b));
	}
	v = _mm_or_si128(v, _mm_unpackhi_epi64(v, v));
	any = (uintptr_t)_mm_cvtsi128_si64(v);
#endif
	for (; i < n; i++)
		any |= (uintptr_t)w[i];
	return any == 0;
}

/*
 * File one job. A job whose seq is already in the window, or outside it
 * (behind next_seq: delivered; or further ahead than any seq in flight
 * can be), is refused as a repeat.
 */
static void file_job(struct bp_pipeline *p, struct bp_job *j, unsigned worker,
		     uint64_t *credit)
{
	uint64_t seq = j->seq, at = seq & p->window_mask;

	if (((seq - p->next_seq) & SEQ_MASK) > p->window_mask ||
	    p->window[at]) {
		refuse_repeat(p, j, worker, credit);
		return;
	}
	p->window[at] = j;
	p->window_run[at] = (struct bpi_window_run){1, worker};
}

/*
 * File a run of n jobs with consecutive seqs from seq: at once where it
 * fits in the window and finds it empty, split at the window's end (a run
 * never wraps); job by job otherwise, which refuses the repeats among
 * them.
 */
static void file_run(struct bp_pipeline *p, struct bp_job **jobs, unsigned n,
		     uint64_t seq, unsigned worker, uint64_t *credit)
{
	const uint64_t mask = p->window_mask;
	uint64_t at = seq & mask, off = (seq - p->next_seq) & SEQ_MASK;
	unsigned first = n, rest = 0;

	if (n == 1) { /* jobs completed out of order come one by one */
		file_job(p, jobs[0], worker, credit);
		return;
	}
	if (at + n > mask + 1) {
		first = (unsigned)(mask + 1 - at);
		rest = n - first;
	}
	/* every seq in flight is in [next_seq, next_seq + window size): the
	 * run's last is (off < 2^63, so off + n - 1 does not wrap) */
	if (off + n - 1 > mask || !window_free(p->window + at, first) ||
	    !window_free(p->window, rest)) {
		for (unsigned i = 0; i < n; i++)
			file_job(p, jobs[i], worker, credit);
		return;
	}
	memcpy(p->window + at, jobs, first * sizeof(*jobs));
	p->window_run[at] = (struct bpi_window_run){first, worker};
	if (rest) {
		memcpy(p->window, jobs + first, rest * sizeof(*jobs));
		p->window_run[0] = (struct bpi_window_run){rest, worker};
	}
}

/*
 * Take the runs that start at next_seq and follow each other, up to
 * SINK_BATCH jobs and the window's end (the NULL spare entries there stop
 * it), crediting each run's worker. Returns how many; they are at
 * window[next_seq & mask] on. A run longer than what is left of the batch
 * is split: its rest is a run of its own.
 */
static unsigned take_runs(struct bp_pipeline *p, uint64_t *credit)
{
	uint64_t at = p->next_seq & p->window_mask;
	struct bp_job **w = p->window + at;
	struct bpi_window_run *run = p->window_run + at;
	unsigned k = 0;

	while (k < SINK_BATCH && w[k]) {
		struct bpi_window_run r = run[k];

		if (r.len > SINK_BATCH - k) {
			run[SINK_BATCH] = (struct bpi_window_run){
				r.len - (SINK_BATCH - k), r.worker};
			r.len = SINK_BATCH - k;
		}
		credit[r.worker] += r.len;
		k += r.len;
	}
	return k;
}

/* Whether jobs[k] continues the run of consecutive seqs from jobs[i]. */
static inline bool in_run(struct bp_job *const *jobs, unsigned i, unsigned k,
			  uint64_t seq)
{
	return ((jobs[k]->seq - seq) & SEQ_MASK) == k - i;
}

/*
 * The end of the run of consecutive seqs from jobs[i] (seq), in a batch
 * whose seqs increase (a worker's stream in order: worker.c's order
 * check). There jobs[k] is in the run exactly when its seq is seq + k - i
 * (no seq was skipped up to it), so the run ends where that first fails,
 * found from a few jobs instead of each: first where a run as long as the
 * last one would end (one or two reads when the runs keep their length,
 * a worker's batch), else by steps doubling from there, then by halving
 * (about twice the log of the run's length).
 */
static unsigned sorted_run_end(struct bp_pipeline *p,
			       struct bp_job *const *jobs, unsigned i,
			       unsigned n, uint64_t seq)
{
	/* in_run(lo) holds; hi == n, or in_run(hi) does not */
	unsigned lo = i, hi = n, h = p->run_hint;

	if (h >= 1 && h <= n - i) {
		unsigned e = i + h; /* where a run of h would end */

		if (h > 1 && !in_run(jobs, i, e - 1, seq)) {
			hi = e - 1;
		} else {
			if (e == n || !in_run(jobs, i, e, seq))
				return e;
			lo = e;
		}
	}
	for (unsigned step = 1; lo + step < hi; step *= 2) {
		if (!in_run(jobs, i, lo + step, seq)) {
			hi = lo + step;
			break;
		}
		lo += step;
	}
	while (hi - lo > 1) {
		unsigned mid = lo + (hi - lo) / 2;

		if (in_run(jobs, i, mid, seq))
			lo = mid;
		else
			hi = mid;
	}
	p->run_hint = hi - i;
	return hi;
}

/*
 * File the jobs from `worker`'s egress ring, then deliver the runs from
 * next_seq on, crediting each job's worker once per delivery and waking
 * it. Returns whether `worker` was woken, so that the caller need not wake
 * it again.
 */
static bool deliver_ordered(struct bp_pipeline *p, struct bp_job **jobs,
			    unsigned n, unsigned worker, uint64_t *credit)
{
	bool woke = false, by_delivery = p->stages[0].by_delivery;
	/*
	 * relaxed: the worker set it before publishing the first job out of
	 * order, and these jobs were taken from its ring (an acquire): if
	 * one of them is, the flag is seen.
	 */
	bool sorted = !atomic_load_explicit(&p->workers[worker].unsorted,
					    memory_order_relaxed);

	/* the seqs are in the jobs' lines, last written on a worker's core:
	 * ask for them ahead, as deliver() does (jobs has spare entries) */
	for (unsigned i = 0; i < SINK_AHEAD && i < n; i++)
		__builtin_prefetch(jobs[i], 0, 3);
	for (unsigned i = 0, e; i < n; i = e) {
		/* the run of consecutive seqs from jobs[i] (the job by job
		 * look splits one that crosses the seq space's wrap in two;
		 * file_run takes either) */
		uint64_t seq = jobs[i]->seq, want = seq + 1;

		if (sorted) {
			/* short runs: read the lines ahead, as below */
			__builtin_prefetch(jobs[i + SINK_AHEAD], 0, 3);
			e = sorted_run_end(p, jobs, i, n, seq);
		} else {
			for (e = i + 1; e < n; e++, want++) {
				__builtin_prefetch(jobs[e + SINK_AHEAD], 0, 3);
				if (jobs[e]->seq != want)
					break;
			}
		}
		file_run(p, jobs + i, e - i, seq, worker, credit);
	}
	for (;;) {
		uint64_t at = p->next_seq & p->window_mask;
		unsigned k = take_runs(p, credit);

		if (k == 0)
			return woke;
		deliver(p, p->window + at, k);
		/* after the callback, which was handed these entries */
		memset(p->window + at, 0, k * sizeof(*p->window));
		p->next_seq = (p->next_seq + k) & SEQ_MASK;
		for (unsigned w = 0; w < p->nworkers; w++) {
			if (!credit[w])
				continue;
			if (!by_delivery) { /* a chain: credit is handed */
				credit[w] = 0;
				continue;
			}
			/* relaxed: the worker only uses it as a count */
			atomic_store_explicit(
				&p->workers[w].delivered,
				atomic_load_explicit(&p->workers[w].delivered,
						     memory_order_relaxed) +
					credit[w],
				memory_order_relaxed);
			credit[w] = 0;
			wake_worker(p, w);
			woke |= w == worker;
		}
	}
}

/* Wake condition of an idle sink: a job to take, a stream to end, or a
 * flush to mark. */
static int sink_has_work(void *arg)
{
	struct bp_pipeline *p = arg;

	if (bpi_flush_pending(&p->flush) != 0)
		return 1;

	for (unsigned i = 0; i < p->nworkers; i++) {
		struct bp_ring *r = p->workers[i].egress;

		if (!p->sink_ended[i] && bpi_ring_ready(r))
			return 1;
	}
	return 0;
}

void *bpi_sink_main(void *arg)
{
	struct bp_pipeline *p = arg;
	/* zeroed once: deliver()'s look-ahead reads past n (SINK_AHEAD) */
	struct bp_job *buf[SINK_BATCH + SINK_AHEAD] = {0};
	uint64_t *credit = p->sink_credit;
	bool *ended = p->sink_ended;
	unsigned open = p->nworkers;

	bpi_self_set(p);
	while (open > 0) {
		unsigned progress = 0;

		uint64_t flush_req = bpi_flush_pending(&p->flush);

		if (__builtin_expect(flush_req != 0, 0))
			bpi_flush_sink_adopt(p, &p->flush, flush_req);

		for (unsigned i = 0; i < p->nworkers; i++) {
			int n;

			if (ended[i])
				continue;
			/* quiet: the worker sleeps on its progress queue */
			n = bpi_ring_dequeue_burst_quiet(
				p->workers[i].egress, (void **)buf, SINK_BATCH);
			if (n > 0) {
				bool woke = false;

				progress++;
				if (p->cfg.ordered)
					woke = deliver_ordered(
						p, buf, (unsigned)n, i, credit);
				else
					deliver(p, buf, (unsigned)n);
				if (!woke) /* room in its egress ring */
					wake_worker(p, i);
			} else if (n == -EPIPE) {
				ended[i] = true;
				open--;
			}
		}
		if (!progress && open > 0) {
			struct bp_wait_policy pol = p->cfg.sink_wait;

			bpi_wait_loop(&pol, &p->sink_wq, sink_has_work, p, -1);
		}
	}
	bpi_thread_exited(p, &p->sink_exited);
	/* a flush waiting for the sink: everything is through */
	bpi_waitq_wake_all_slow(&p->flush.wq);
	return NULL;
}
