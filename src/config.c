/* SPDX-License-Identifier: MIT */
/*
 * A pipeline's configuration: its defaults (bp_pipeline_config_init) and
 * the checks bp_pipeline_create makes before it allocates anything, each
 * failure logged through the config's own log callback, saying which field
 * and what range.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "src/pipeline_internal.h"

void bp_pipeline_config_init(struct bp_pipeline_config *c)
{
	if (!c)
		return;
	memset(c, 0, sizeof(*c));
	c->workers = 2;
	c->ingress_capacity = 4096;
	c->egress_capacity = 1024;
	c->max_batch = 32;
	c->max_inflight = 1024;
	c->flush_deadline_ns = 50000;
	bp_wait_policy_init(&c->worker_wait);
	bp_wait_policy_init(&c->sink_wait);
	bp_wait_policy_init(&c->producer_wait);
	c->sink_cpu = -1;
}

/* Validation reports through the caller's log callback, if any. */
static int invalid(const struct bp_pipeline_config *c, const char *what)
{
	if (c->log) {
		char msg[160];

		snprintf(msg, sizeof(msg), "bp_pipeline_create: invalid %s",
			 what);
		c->log(c->log_ctx, BP_LOG_ERROR, msg);
	}
	return -EINVAL;
}

int bpi_config_check(const struct bp_pipeline_config *c)
{
	if (c->workers < 1 || c->workers > BP_MAX_WORKERS)
		return invalid(c, "workers (1..256)");
	if (c->ingress_capacity < 1 || c->ingress_capacity > BP_MAX_RING)
		return invalid(c, "ingress_capacity (1..2^24)");
	if (c->egress_capacity < 1 || c->egress_capacity > BP_MAX_RING)
		return invalid(c, "egress_capacity (1..2^24)");
	if (c->max_batch < 1 || c->max_batch > BP_MAX_BATCH)
		return invalid(c, "max_batch (1..4096)");
	if (c->max_inflight < c->max_batch || c->max_inflight > BP_MAX_INFLIGHT)
		return invalid(c, "max_inflight (max_batch..65536)");
	if (bp_wait_policy_check(&c->worker_wait))
		return invalid(c, "worker_wait (unknown strategy)");
	if (bp_wait_policy_check(&c->sink_wait))
		return invalid(c, "sink_wait (unknown strategy)");
	if (bp_wait_policy_check(&c->producer_wait))
		return invalid(c, "producer_wait (unknown strategy)");
	if (c->n_worker_cpus > 0 && !c->worker_cpus)
		return invalid(c, "worker_cpus (NULL with n_worker_cpus > 0)");
	for (unsigned i = 0; i < c->n_worker_cpus; i++)
		if (c->worker_cpus[i] < 0 || c->worker_cpus[i] >= CPU_SETSIZE)
			return invalid(c, "worker_cpus entry");
	if (c->sink_cpu < -1 || c->sink_cpu >= CPU_SETSIZE)
		return invalid(c, "sink_cpu");
	if (!c->stage || !c->stage->process)
		return invalid(c, "stage (NULL, or no process callback)");
	if (!c->sink)
		return invalid(c, "sink (NULL)");
	for (unsigned i = 0; i < sizeof(c->reserved_) / sizeof(c->reserved_[0]);
	     i++)
		if (c->reserved_[i])
			return invalid(c, "reserved_ (not zero: a field of a "
					  "later version, or not built with "
					  "bp_pipeline_config_init)");
	for (unsigned i = 0;
	     i < sizeof(c->stage->reserved_) / sizeof(c->stage->reserved_[0]);
	     i++)
		if (c->stage->reserved_[i])
			return invalid(c, "stage reserved_ (not NULL: a "
					  "callback of a later version)");
	return 0;
}
