/* SPDX-License-Identifier: MIT */
/*
 * Run to completion: the calling thread drives one worker slot of a
 * bp_rdma itself, without a pipeline. It posts (bp_rdma_direct_post) and
 * reaps (bp_rdma_direct_poll) on the slot's rails with the stage's own
 * engine (stage.c: the same checks, pending queues, credits, batches,
 * peer handling and error statuses), and gets its jobs back from poll
 * instead of through a sink: no thread hand-off on the way, for the
 * latency-bound user (docs/api/rdma.md, "Threaded or run to completion").
 *
 * The handle owns its slot as a pipeline worker would (bpi_rdma_worker's
 * owner word): a pipeline whose worker would take the same slot fails to
 * start, and the other way round. One thread at a time per handle.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>

#include <batchpipe/error.h>

#include "src/rdma/rdma_internal.h"

/*
 * bp_job.pipeline_word of a job in a direct handle's hands, from post
 * until poll returns it, and after: a job posted again while out is
 * refused (it would loop the pending queue), as the pipeline refuses a
 * job completed twice. Values uninitialised memory is unlikely to hold.
 */
#define DIRECT_OUT  0x6270446fu /* "bpDo" */
#define DIRECT_BACK 0x62704462u /* "bpDb" */

struct bp_rdma_direct {
	struct bp_rdma *r;
	struct bpi_rdma_worker *ws;
	bool cancelled;
};

int bp_rdma_direct_open(struct bp_rdma *r, unsigned slot,
			struct bp_rdma_direct **out)
{
	struct bp_rdma_direct *d;
	struct bpi_rdma_worker *ws;
	int free_slot = BPI_OWNER_NONE;

	if (!r || !out || r->magic != BPI_RDMA_MAGIC)
		return -EINVAL;
	*out = NULL;
	if (slot >= r->cfg.workers) {
		bpi_log(&r->log, BP_LOG_ERROR,
			"bp_rdma_direct_open: slot %u: the stage has %u "
			"(bp_rdma_config.workers)",
			slot, r->cfg.workers);
		return -EINVAL;
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	ws = &r->workers[slot];
	/* acq_rel: the slot's state is the last owner's, whole */
	if (!atomic_compare_exchange_strong_explicit(
		    &ws->owner, &free_slot, BPI_OWNER_DIRECT,
		    memory_order_acq_rel, memory_order_acquire)) {
		bpi_log(&r->log, BP_LOG_ERROR,
			"bp_rdma_direct_open: slot %u is in use (%s)", slot,
			free_slot == BPI_OWNER_DIRECT ? "another direct handle"
						      : "a pipeline's worker");
		free(d);
		return -EBUSY;
	}
	d->r = r;
	d->ws = ws;
	ws->direct = true;
	ws->done_head = NULL;
	ws->done_tail = &ws->done_head;
	ws->out = 0;
	ws->intake_fd = -1; /* no pipeline: its waits wake for completions */
	bpi_rdma_moved(ws); /* the waits start afresh */
	bpi_rdma_slot_start(r, ws);
	*out = d;
	return 0;
}

int bp_rdma_direct_post(struct bp_rdma_direct *d,
			struct bp_rdma_job *const *jobs, unsigned n)
{
	if (!d || (n && !jobs) || n > INT_MAX)
		return -EINVAL;
	for (unsigned i = 0; i < n; i++)
		if (!jobs[i])
			return -EINVAL;
	if (d->cancelled) {
		bpi_log(&d->r->log, BP_LOG_ERROR,
			"bp_rdma_direct_post after bp_rdma_direct_cancel: "
			"refused, the handle only finishes now");
		return -EPIPE;
	}
	for (unsigned i = 0; i < n; i++) {
		/* out already: posted earlier, or twice in this call */
		if (jobs[i]->hdr.pipeline_word == DIRECT_OUT) {
			for (unsigned m = 0; m < i; m++)
				jobs[m]->hdr.pipeline_word = DIRECT_BACK;
			bpi_log(&d->r->log, BP_LOG_ERROR,
				"bp_rdma_direct_post: job %u of %u is posted "
				"already and not yet back from "
				"bp_rdma_direct_poll: none of the %u taken",
				i, n, n);
			return -EBUSY;
		}
		jobs[i]->hdr.pipeline_word = DIRECT_OUT;
	}
	d->ws->out += n;
	bpi_rdma_take(d->ws, NULL, jobs, n);
	return (int)n;
}

/* Up to max finished jobs off the FIFO into done. */
static unsigned pop_done(struct bpi_rdma_worker *ws, struct bp_rdma_job **done,
			 unsigned max)
{
	unsigned n = 0;

	while (n < max && ws->done_head) {
		struct bp_rdma_job *j = ws->done_head;

		ws->done_head = j->hdr.op_context[0];
		j->hdr.pipeline_word = DIRECT_BACK;
		done[n++] = j;
	}
	if (!ws->done_head)
		ws->done_tail = &ws->done_head;
	ws->out -= n;
	return n;
}

int bp_rdma_direct_poll(struct bp_rdma_direct *d, struct bp_rdma_job **done,
			unsigned max, int64_t timeout_ns)
{
	struct bpi_rdma_worker *ws;
	int64_t deadline = -1;
	uint64_t cap = 0;

	if (!d || (max && !done) || max > INT_MAX)
		return -EINVAL;
	ws = d->ws;
	for (;;) {
		unsigned busy, moved = bpi_rdma_pass(ws, NULL, &busy);
		unsigned n = pop_done(ws, done, max);

		if (moved)
			bpi_rdma_moved(ws); /* the waits start over */
		if (n || !max || timeout_ns == 0)
			return (int)n;
		if (!busy && !ws->done_head)
			return 0; /* nothing posted: nothing to wait for */
		if (moved)
			continue;
		if (timeout_ns > 0) {
			int64_t t = bpi_now_ns();

			if (deadline < 0)
				deadline = t + timeout_ns;
			else if (t >= deadline)
				return 0;
			cap = (uint64_t)(deadline - t);
		}
		/* BUSY: poll again at once; SPIN_SLEEP: a back-off step;
		 * EVENT: the CQs' fds, up to event_timeout_ns; neither past
		 * the deadline */
		bpi_rdma_wait(ws, NULL, cap);
	}
}

int bp_rdma_direct_cancel(struct bp_rdma_direct *d)
{
	if (!d)
		return -EINVAL;
	d->cancelled = true;
	bpi_rdma_cancel(d->ws, NULL);
	return 0;
}

uint64_t bp_rdma_direct_outstanding(const struct bp_rdma_direct *d)
{
	return d ? d->ws->out : 0;
}

int bp_rdma_direct_close(struct bp_rdma_direct *d)
{
	struct bp_rdma *r;
	struct bpi_rdma_worker *ws;

	if (!d)
		return -EINVAL;
	r = d->r;
	ws = d->ws;
	if (ws->out) {
		bpi_log(&r->log, BP_LOG_ERROR,
			"bp_rdma_direct_close: %llu jobs not yet returned by "
			"bp_rdma_direct_poll: poll them first (after "
			"bp_rdma_direct_cancel if they should not run)",
			(unsigned long long)ws->out);
		return -EBUSY;
	}
	ws->direct = false;
	ws->cancel_ns = 0;
	/* release: the next owner's acquire sees the slot as left here */
	atomic_store_explicit(&ws->owner, BPI_OWNER_NONE, memory_order_release);
	free(d);
	return 0;
}
