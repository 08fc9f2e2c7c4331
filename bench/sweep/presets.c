/* SPDX-License-Identifier: MIT */
/*
 * sweep/presets.c - `bpbench sweep`'s presets: for each subcommand it knows,
 * the child options that give one point, the option(s) that carry B, and
 * where throughput and p99 are in the child's CSV.
 */
#include <string.h>

#include "bp_config.h"
#include "sweep/sweep.h"

static const struct sw_preset sw_presets[] = {
	{"ring",
	 "batches",
	 {"batches"},
	 "--queues batchpipe --points 2x2 --runs 1 --no-single",
	 "Mitems_per_s",
	 {"p99_ns", "p99_us"},
	 NULL,
	 "20",
	 NULL,
	 0},
	{"pipeline",
	 "batches",
	 {"batches"},
	 "--sweep-only --no-latency --workers 2 --waits spin-sleep --runs 1",
	 "Mjobs_per_s",
	 {"p99_us"},
	 NULL,
	 "20",
	 "p99: bp_pipeline_stats of each run, submit -> sink at full load, "
	 "so mostly\n     queueing in the bounded rings (histogram bucket "
	 "upper bounds, within 25 %)",
	 0},
#if BP_HAVE_RDMA
	{"rdma",
	 "post+reap",
	 {"post", "reap"},
	 "--sizes 4K --workers 1 --rails 1 --runs 1 --no-latency",
	 "Mops",
	 {NULL},
	 "mode=pipeline",
	 "100",
	 "p99: missing, bpbench rdma does not measure it per batch size (its "
	 "--latency\n     is 4 KiB at depth 1, one op at a time)",
	 1},
#endif
};

#define SW_NPRESETS (sizeof(sw_presets) / sizeof(sw_presets[0]))

const struct sw_preset *sw_preset_find(const char *sub)
{
	for (size_t i = 0; i < SW_NPRESETS; i++)
		if (!strcmp(sub, sw_presets[i].sub))
			return &sw_presets[i];
	return NULL;
}
