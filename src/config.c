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

/* A stage table's checks, for the config's one stage or a chain's. */
static int check_table(const struct bp_pipeline_config *c,
		       const struct bp_stage *st, const char *what)
{
	char msg[120];

	if (!st || !st->process) {
		snprintf(msg, sizeof(msg), "%s (NULL, or no process callback)",
			 what);
		return invalid(c, msg);
	}
	for (unsigned i = 0;
	     i < sizeof(st->reserved_) / sizeof(st->reserved_[0]); i++)
		if (st->reserved_[i]) {
			snprintf(msg, sizeof(msg),
				 "%s reserved_ (not NULL: a callback of a "
				 "later version)",
				 what);
			return invalid(c, msg);
		}
	return 0;
}

static int check_cpus(const struct bp_pipeline_config *c, const int *cpus,
		      unsigned n, const char *what)
{
	char msg[120];

	if (n > 0 && !cpus) {
		snprintf(msg, sizeof(msg), "%s (NULL with a count > 0)", what);
		return invalid(c, msg);
	}
	for (unsigned i = 0; i < n; i++)
		if (cpus[i] < 0 || cpus[i] >= CPU_SETSIZE) {
			snprintf(msg, sizeof(msg), "%s entry %u (%d)", what, i,
				 cpus[i]);
			return invalid(c, msg);
		}
	return 0;
}

/* One entry of a chain: each failure names the stage and the field. */
static int check_chain_stage(const struct bp_pipeline_config *c, unsigned k)
{
	const struct bp_chain_stage *s = &c->stages[k];
	unsigned batch = s->max_batch ? s->max_batch : c->max_batch;
	unsigned inflight = s->max_inflight ? s->max_inflight : c->max_inflight;
	char what[120];
	int rc;

#define STAGE_FIELD(...) (snprintf(what, sizeof(what), __VA_ARGS__), what)
	rc = check_table(c, s->stage, STAGE_FIELD("stages[%u].stage", k));
	if (rc)
		return rc;
	if (s->workers < 1 || s->workers > BP_MAX_WORKERS)
		return invalid(c, STAGE_FIELD("stages[%u].workers: %u (1..256)",
					      k, s->workers));
	if (batch < 1 || batch > BP_MAX_BATCH)
		return invalid(c,
			       STAGE_FIELD("stages[%u].max_batch (1..4096)", k));
	if (inflight < batch || inflight > BP_MAX_INFLIGHT)
		return invalid(c, STAGE_FIELD("stages[%u].max_inflight "
					      "(max_batch..65536)",
					      k));
	if (k == 0 && s->capacity)
		return invalid(c, "stages[0].capacity (0: stage 0's queue is "
				  "ingress, ingress_capacity)");
	if (s->capacity > BP_MAX_RING)
		return invalid(c,
			       STAGE_FIELD("stages[%u].capacity (0..2^24)", k));
	if (s->flags & ~(BP_STAGE_TAKES_FAILED | BP_STAGE_SERIAL))
		return invalid(c, STAGE_FIELD("stages[%u].flags (unknown "
					      "bits 0x%x)",
					      k,
					      s->flags &
						      ~(BP_STAGE_TAKES_FAILED |
							BP_STAGE_SERIAL)));
	if ((s->flags & BP_STAGE_SERIAL) && s->workers != 1)
		return invalid(c, STAGE_FIELD("stages[%u].workers: %u (a "
					      "serial stage, BP_STAGE_SERIAL, "
					      "has one)",
					      k, s->workers));
	if (k == 0 && (s->flags & BP_STAGE_TAKES_FAILED))
		return invalid(c, "stages[0].flags (BP_STAGE_TAKES_FAILED: "
				  "no stage is before it)");
	rc = check_cpus(c, s->worker_cpus, s->n_worker_cpus,
			STAGE_FIELD("stages[%u].worker_cpus", k));
	if (rc)
		return rc;
	for (unsigned i = 0; i < sizeof(s->reserved_) / sizeof(s->reserved_[0]);
	     i++)
		if (s->reserved_[i])
			return invalid(c, STAGE_FIELD("stages[%u].reserved_ "
						      "(not zero)",
						      k));
#undef STAGE_FIELD
	return 0;
}

/* The chain, or the one stage: exactly one of the two is given. */
static int check_stages(const struct bp_pipeline_config *c)
{
	int rc;

	if (!c->n_stages) {
		if (c->stages)
			return invalid(c, "stages (given, with n_stages 0: an "
					  "empty chain)");
		if (c->chain_max_inflight)
			return invalid(c, "chain_max_inflight (a one-stage "
					  "pipeline: use max_inflight)");
		if (c->workers < 1 || c->workers > BP_MAX_WORKERS)
			return invalid(c, "workers (1..256)");
		rc = check_cpus(c, c->worker_cpus, c->n_worker_cpus,
				"worker_cpus");
		return rc ? rc : check_table(c, c->stage, "stage");
	}
	if (c->stage)
		return invalid(c, "stage (set together with stages: give "
				  "one stage or a chain)");
	if (!c->stages)
		return invalid(c, "stages (NULL with n_stages > 0)");
	if (c->n_stages > BP_MAX_STAGES)
		return invalid(c, "n_stages (1..16)");
	if (c->n_stages == 1 && c->chain_max_inflight)
		return invalid(c, "chain_max_inflight (a chain of one stage: "
				  "use max_inflight)");
	if (c->chain_max_inflight > BP_MAX_RING)
		return invalid(c, "chain_max_inflight (0..2^24)");
	for (unsigned k = 0; k < c->n_stages; k++)
		if ((rc = check_chain_stage(c, k)) != 0)
			return rc;
	if (c->chain_max_inflight &&
	    c->chain_max_inflight < (c->stages[0].max_batch
					     ? c->stages[0].max_batch
					     : c->max_batch))
		return invalid(c, "chain_max_inflight (below stage 0's "
				  "max_batch)");
	return 0;
}

/*
 * Ingress lanes: seqs are unique but not dense (pipeline.h), and what
 * needs them dense in submission order refuses them: the ordered sink's
 * window and a serial stage's order buffer would wait for seqs that no
 * lane is about to hand out.
 */
static int check_lanes(const struct bp_pipeline_config *c)
{
	unsigned n = c->ingress_lanes;

	if (n <= 1)
		return 0;
	if (n > BP_MAX_LANES || (n & (n - 1)))
		return invalid(c, "ingress_lanes (0, 1, or a power of two up "
				  "to 64)");
	if (c->ordered)
		return invalid(c, "ingress_lanes (more than one with ordered "
				  "output: seqs per lane are not submission "
				  "order)");
	for (unsigned k = 0; k < c->n_stages; k++)
		if (c->stages[k].flags & BP_STAGE_SERIAL) {
			char msg[120];

			snprintf(msg, sizeof(msg),
				 "ingress_lanes (more than one with a serial "
				 "stage, stages[%u]: seqs per lane are not "
				 "submission order)",
				 k);
			return invalid(c, msg);
		}
	return 0;
}

int bpi_config_check(const struct bp_pipeline_config *c)
{
	int rc;

	if (c->ingress_capacity < 1 || c->ingress_capacity > BP_MAX_RING)
		return invalid(c, "ingress_capacity (1..2^24)");
	if (c->egress_capacity < 1 || c->egress_capacity > BP_MAX_RING)
		return invalid(c, "egress_capacity (1..2^24)");
	/* a chain checks them as each entry's defaults (check_chain_stage) */
	if (!c->n_stages && (c->max_batch < 1 || c->max_batch > BP_MAX_BATCH))
		return invalid(c, "max_batch (1..4096)");
	if (!c->n_stages && (c->max_inflight < c->max_batch ||
			     c->max_inflight > BP_MAX_INFLIGHT))
		return invalid(c, "max_inflight (max_batch..65536)");
	if (bp_wait_policy_check(&c->worker_wait))
		return invalid(c, "worker_wait (unknown strategy)");
	if (bp_wait_policy_check(&c->sink_wait))
		return invalid(c, "sink_wait (unknown strategy)");
	if (bp_wait_policy_check(&c->producer_wait))
		return invalid(c, "producer_wait (unknown strategy)");
	if (c->sink_cpu < -1 || c->sink_cpu >= CPU_SETSIZE)
		return invalid(c, "sink_cpu");
	if (!c->sink)
		return invalid(c, "sink (NULL)");
	for (unsigned i = 0; i < sizeof(c->reserved_) / sizeof(c->reserved_[0]);
	     i++)
		if (c->reserved_[i])
			return invalid(c, "reserved_ (not zero: a field of a "
					  "later version, or not built with "
					  "bp_pipeline_config_init)");
	if (c->reserved32_)
		return invalid(c, "reserved32_ (not zero: a field of a later "
				  "version, or not built with "
				  "bp_pipeline_config_init)");
	rc = check_stages(c);
	if (rc)
		return rc;
	return check_lanes(c);
}
