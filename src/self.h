/* SPDX-License-Identifier: MIT */
/*
 * Which pipeline's worker or sink the calling thread is, so that lifecycle
 * calls made from a stage or sink callback can refuse to wait for their own
 * thread (-EDEADLK) instead of hanging. Set once at the start of each
 * pipeline thread; read only on cold paths (drain, abort, destroy,
 * reconfiguration) and on a blocking submit's slow path, never per job.
 */
#ifndef BP_SRC_SELF_H
#define BP_SRC_SELF_H

#include <stdbool.h>

struct bp_pipeline;

/* The calling thread is a worker or the sink of p, for the rest of its life. */
void bpi_self_set(const struct bp_pipeline *p);

/* Whether the calling thread is one of p's own threads. */
bool bpi_self_is(const struct bp_pipeline *p);

#endif
