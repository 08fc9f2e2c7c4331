/* SPDX-License-Identifier: MIT */
/*
 * Producer handles: stage jobs in a private buffer, submit them as one
 * batch. The flush deadline is a max age measured from the oldest staged
 * job: adding jobs never postpones it (no debounce).
 */
#include <errno.h>
#include <stdlib.h>

#include "pipeline_internal.h"

struct bp_producer {
	struct bp_pipeline *p;
	struct bp_job **staged;
	unsigned n, cap;
	int64_t oldest_ns; /* when the first staged job was added */
};

int bp_producer_create(struct bp_pipeline *p, struct bp_producer **out)
{
	struct bp_producer *pr;

	if (!p || !out)
		return -EINVAL;
	pr = calloc(1, sizeof(*pr));
	if (!pr)
		return -ENOMEM;
	/* live max_batch never exceeds max_inflight (set_max_batch checks) */
	pr->cap = p->cfg.max_inflight;
	pr->staged = malloc(pr->cap * sizeof(*pr->staged));
	if (!pr->staged) {
		free(pr);
		return -ENOMEM;
	}
	pr->p = p;
	*out = pr;
	return 0;
}

int bp_producer_flush(struct bp_producer *pr)
{
	unsigned off = 0;

	if (!pr)
		return -EINVAL;
	while (off < pr->n) {
		int rc = bp_pipeline_submit(pr->p, pr->staged + off,
					    pr->n - off, 0, -1);

		if (rc < 0) {
			/* keep what was not accepted staged, in order */
			for (unsigned i = off; i < pr->n; i++)
				pr->staged[i - off] = pr->staged[i];
			pr->n -= off;
			return rc;
		}
		off += (unsigned)rc;
	}
	pr->n = 0;
	return 0;
}

int bp_producer_submit(struct bp_producer *pr, struct bp_job *job)
{
	int64_t now;

	if (!pr || !job || ((uintptr_t)job & 1))
		return -EINVAL;
	if (pr->n == pr->cap) {
		int rc = bp_producer_flush(pr);

		if (rc < 0)
			return rc;
	}
	now = bp_now_ns();
	if (pr->n == 0)
		pr->oldest_ns = now;
	pr->staged[pr->n++] = job;
	/* relaxed: live settings, picked up on the next call at the latest */
	if (pr->n >= atomic_load_explicit(&pr->p->live_max_batch,
					  memory_order_relaxed) ||
	    (uint64_t)(now - pr->oldest_ns) >=
		    atomic_load_explicit(&pr->p->live_flush_ns,
					 memory_order_relaxed)) {
		int rc = bp_producer_flush(pr);

		/*
		 * An error means this job was not taken: the flush submits in
		 * order and keeps what was not accepted, so it is still the
		 * last staged job. Unstage it, so a retry cannot submit it
		 * twice; the jobs staged before it stay staged.
		 */
		if (rc < 0)
			pr->n--;
		return rc;
	}
	return 0;
}

unsigned bp_producer_staged(const struct bp_producer *pr)
{
	return pr ? pr->n : 0;
}

int bp_producer_destroy(struct bp_producer *pr)
{
	int rc;

	if (!pr)
		return 0;
	rc = bp_producer_flush(pr);
	free(pr->staged);
	free(pr);
	return rc < 0 ? rc : 0;
}
