/* SPDX-License-Identifier: MIT */
/*
 * bp_pipeline_submit: jobs into ingress. Submission order is the ingress
 * ring's position: it reserves k slots (bpi_ring_reserve_burst), stamps
 * each job with its position as seq, and publishes them (bpi_ring_publish).
 * A reservation is a commitment (nothing is handed back), so every job is
 * checked first, seqs are dense and the ordered sink never waits for a gap.
 */
#include <errno.h>
#include <limits.h>

#include "src/jobcheck.h"
#include "src/pipeline_internal.h"
#include "src/ring_internal.h"
#include "src/self.h"
#include "src/wait_internal.h"

int bpi_ingress_room(void *arg)
{
	struct bp_ring *r = arg;

	return bp_ring_free_count(r) > 0 || bp_ring_is_closed(r);
}

/*
 * Stamp k jobs with seqs from pos on. Positions wrap modulo 2^63 (SEQ_MASK),
 * once in 2^63 jobs: the loop without the mask unless this batch crosses.
 */
static inline void stamp(struct bp_job **js, unsigned k, uint64_t pos,
			 int64_t now)
{
	uint64_t seq = pos & SEQ_MASK;

	if (__builtin_expect(seq + k - 1 > SEQ_MASK, 0)) {
		for (unsigned i = 0; i < k; i++) {
			js[i]->seq = (seq + i) & SEQ_MASK;
			js[i]->submit_ns = now;
			js[i]->status = BP_JOB_OK;
			js[i]->pipeline_word = JOB_SUBMITTED;
		}
		return;
	}
#pragma GCC unroll 4
	for (unsigned i = 0; i < k; i++) {
		struct bp_job *j = js[i];

		j->seq = seq + i;
		j->submit_ns = now;
		j->status = BP_JOB_OK;
		j->pipeline_word = JOB_SUBMITTED;
	}
}

int bp_pipeline_submit(struct bp_pipeline *p, struct bp_job **jobs, unsigned n,
		       unsigned flags, int64_t timeout_ns)
{
	int64_t now, deadline;
	unsigned done = 0;

	/* n > INT_MAX: the count accepted would not fit the return value */
	if (!p || !jobs || n == 0 || n > INT_MAX ||
	    (flags & ~BP_SUBMIT_NONBLOCK))
		return -EINVAL;
	/* relaxed: a stale RUNNING is caught by the ring's -EPIPE */
	if (atomic_load_explicit(&p->state, memory_order_relaxed) == P_CREATED)
		return -EINVAL;
	/* validate before reserving: a reservation cannot be handed back */
	if (bpi_bad_job_pointers(jobs, n))
		return -EINVAL;
	now = bpi_now_ns();
	deadline = bpi_deadline(now, timeout_ns);
	while (done < n) {
		uint64_t pos;
		int k = bpi_ring_reserve_burst(p->ingress, n - done, &pos);

		if (k > 0) {
			struct bp_job **js = jobs + done;

			/* the position is the seq: stamp, then publish */
			stamp(js, (unsigned)k, pos, now);
			bpi_ring_publish(p->ingress, pos, (void *const *)js,
					 (unsigned)k);
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
		int rc = bpi_wait_loop(&p->cfg.producer_wait,
				       bpi_ring_not_full(p->ingress),
				       bpi_ingress_room, p->ingress, left);
		if (rc < 0)
			return done ? (int)done : rc;
		now = bpi_now_ns();
	}
	return (int)done;
}
