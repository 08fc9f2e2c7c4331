/* SPDX-License-Identifier: MIT */
/*
 * bp_pipeline_flush: wait until every job accepted before the call has been
 * delivered, while intake stays open (the two steps: src/flush.h). Also the
 * sink's side of the second step: setting the mark and answering.
 */
#include <errno.h>

#include "src/flusher.h"
#include "src/pipeline_internal.h"
#include "src/ring_internal.h"
#include "src/self.h"
#include "src/wait_internal.h"

void bpi_flush_sink_adopt(struct bp_pipeline *p, struct bpi_flush *f,
			  uint64_t req)
{
	f->adopted = req;
	/*
	 * Every job accepted before the requests up to req, and every job
	 * delivered so far, was reserved before this look: below the mark.
	 * The acquire that read req orders the look after their submits.
	 */
	f->target = 0;
	for (unsigned i = 0; i < p->nlanes; i++) {
		uint64_t n;

		f->mark[i] = bpi_ring_reserved_pos(p->lanes[i].ring, &n) &
			     (SEQ_MASK >> f->lane_bits);
		f->target += n;
	}
	f->below = f->delivered;
	f->open = true;
	if (f->below >= f->target)
		bpi_flush_sink_done(f);
}

void bpi_flush_sink_done(struct bpi_flush *f)
{
	f->open = false;
	/* release: the deliveries before the answer */
	atomic_store_explicit(&f->done, f->adopted, memory_order_release);
	/* default queue: the callers sleep with a membarrier, so this is a
	 * load; they are rare */
	bpi_waitq_wake_all(&f->wq);
}

struct flush_wait {
	struct bp_pipeline *p;
	uint64_t gen;
};

/* Step 1's condition: the flusher's round answered, or the flusher stops. */
static int handles_flushed(void *arg)
{
	struct flush_wait *w = arg;
	struct bpi_flusher *fl = &w->p->fl;

	/* acquire: pairs with force_end's release (the submits before) */
	if (atomic_load_explicit(&fl->force_done, memory_order_acquire) >=
	    w->gen)
		return 1;
	/* acquire: pairs with bpi_flusher_close's release */
	return atomic_load_explicit(&fl->stop, memory_order_acquire) ? 2 : 0;
}

/* Step 2's condition: the sink answered, or it is gone (all delivered). */
static int sink_marked(void *arg)
{
	struct flush_wait *w = arg;
	struct bp_pipeline *p = w->p;

	/* acquire: pairs with bpi_flush_sink_done's release */
	if (atomic_load_explicit(&p->flush.done, memory_order_acquire) >=
	    w->gen)
		return 1;
	/* acquire: pairs with bpi_thread_exited's release */
	return atomic_load_explicit(&p->sink_exited, memory_order_acquire)
		       ? 2
		       : 0;
}

/* Wait for cond as the producers' policy says; -EINTR is not an answer. */
static int flush_wait(struct bp_pipeline *p, int (*cond)(void *),
		      struct flush_wait *w, int64_t deadline)
{
	for (;;) {
		int64_t left = deadline < 0 ? -1 : deadline - bpi_now_ns();
		int rc;

		if (deadline >= 0 && left < 0)
			left = 0;
		rc = bpi_wait_loop(&p->cfg.producer_wait, &p->flush.wq, cond,
				   w, left);
		if (rc != -EINTR)
			return rc;
	}
}

static int flush_timed_out(struct bp_pipeline *p, const char *what)
{
	struct bp_pipeline_stats st;

	bp_pipeline_get_stats(p, &st);
	bpi_log(&p->log, BP_LOG_WARN,
		"bp_pipeline_flush: timed out %s; the pipeline holds %llu "
		"job(s) now (submitted %llu, delivered %llu)",
		what,
		(unsigned long long)(st.submitted - st.ok - st.failed -
				     st.cancelled),
		(unsigned long long)st.submitted,
		(unsigned long long)(st.ok + st.failed + st.cancelled));
	return -ETIMEDOUT;
}

/*
 * The pipeline stopped under the flush: wait for the sink's end, after
 * which every job in ingress is delivered. Jobs are lost to the flush only
 * if the stopper left some staged in handles (handles_stranded).
 */
static int flush_at_stop(struct bp_pipeline *p, int64_t deadline)
{
	struct flush_wait w = {.p = p, .gen = UINT64_MAX};
	int rc = flush_wait(p, sink_marked, &w, deadline);

	if (rc == -ETIMEDOUT)
		return flush_timed_out(p, "while drain or abort ran");
	/* acquire: the stopper stored it before it closed ingress, which
	 * came before the sink's end that sink_marked acquired */
	return atomic_load_explicit(&p->handles_stranded,
				    memory_order_acquire)
		       ? -EPIPE
		       : 0;
}

int bp_pipeline_flush(struct bp_pipeline *p, int64_t timeout_ns)
{
	struct flush_wait w = {.p = p};
	int64_t deadline;
	int rc;

	if (!p)
		return -EINVAL;
	if (bpi_self_is(p)) {
		bpi_log(&p->log, BP_LOG_ERROR,
			"bp_pipeline_flush from a stage or sink callback would "
			"wait for its own thread");
		return -EDEADLK;
	}
	/*
	 * acquire: pairs with start's release of the state, after which
	 * sink_ran says whether the sink ever ran: not before start, nor
	 * after a failed start or a drain before start, and with no sink
	 * nothing was accepted (and nobody would answer). Not sink_started,
	 * which a drain's joiner clears meanwhile (found racing a drain).
	 */
	if (atomic_load_explicit(&p->state, memory_order_acquire) == P_CREATED ||
	    !p->sink_ran)
		return 0;
	deadline = bpi_deadline(bpi_now_ns(), timeout_ns);

	/* 1. the jobs staged in producer handles, into ingress */
	if (bpi_flusher_started(p)) {
		/* seq_cst: the flusher's prepare-and-look (force_asked)
		 * sees it, or the wake below finds it armed */
		w.gen = atomic_fetch_add_explicit(&p->fl.force_req, 1,
						  memory_order_seq_cst) +
			1;
		bpi_waitq_wake_all_slow(&p->fl.wq);
		rc = flush_wait(p, handles_flushed, &w, deadline);
		if (rc == -ETIMEDOUT)
			return flush_timed_out(
				p, "with jobs staged in producer handles");
		if (rc == 2) /* drain or abort took the handles */
			return flush_at_stop(p, deadline);
	}

	/* 2. everything reserved in ingress until now, through the sink */
	w.gen = atomic_fetch_add_explicit(&p->flush.req, 1,
					  memory_order_seq_cst) +
		1;
	/* the sink sleeps on sink_wq (waker fences: this fences) */
	bpi_waitq_wake_all(&p->sink_wq);
	rc = flush_wait(p, sink_marked, &w, deadline);
	if (rc == -ETIMEDOUT)
		return flush_timed_out(p, "with jobs on their way to the sink");
	/* 2: the sink ended, after every job in ingress */
	return 0;
}
