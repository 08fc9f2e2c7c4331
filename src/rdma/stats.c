/* SPDX-License-Identifier: MIT */
/*
 * The stage's statistics: per worker and rail counters (written by the
 * worker alone, plain stores), read here as a snapshot, and as JSON.
 * A run must show where the bottleneck is: a full
 * pending queue says the provider pushes back (credits), empty CQ reads say
 * the workers wait on the wire, a reap histogram stuck at 1 says batches
 * never form.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "src/rdma/rdma_internal.h"
#include "src/base/json_put.h"

int bp_rdma_get_rail_stats(const struct bp_rdma *r, unsigned worker, unsigned rail,
		       struct bp_rdma_rail_stats *s)
{
	const struct bpi_rail_stats *st;

	if (!r || !s || worker >= r->cfg.workers || rail >= r->cfg.rails)
		return -EINVAL;
	st = &r->workers[worker].rails[rail].st;
	s->posted = bpi_stat_get(&st->posted);
	s->completed = bpi_stat_get(&st->completed);
	s->failed = bpi_stat_get(&st->failed);
	s->eagain = bpi_stat_get(&st->eagain);
	s->pending_high = bpi_stat_get(&st->pending_high);
	s->cq_reads = bpi_stat_get(&st->cq_reads);
	s->cq_empty = bpi_stat_get(&st->cq_empty);
	s->mr_cache_misses = bpi_stat_get(&st->mr_misses);
	for (unsigned i = 0; i < BP_RDMA_REAP_BUCKETS; i++)
		s->reap_hist[i] = bpi_stat_get(&st->reap_hist[i]);
	return 0;
}

#define PUT BP_JSON_PUT

int bp_rdma_stats_json(const struct bp_rdma *r, char *buf, size_t size)
{
	size_t len = 0;

	if (!r || (!buf && size))
		return -EINVAL;
	PUT("{\"provider\":\"%s\",\"rails\":%u,\"credits\":%u,"
	    "\"post_batch\":%u,\"reap_batch\":%u,\"workers\":[",
	    r->provider, r->cfg.rails, r->cfg.credits, r->cfg.post_batch,
	    r->cfg.reap_batch);
	for (unsigned i = 0; i < r->cfg.workers; i++) {
		PUT("%s{\"rails\":[", i ? "," : "");
		for (unsigned k = 0; k < r->cfg.rails; k++) {
			struct bp_rdma_rail_stats s;

			bp_rdma_get_rail_stats(r, i, k, &s);
			PUT("%s{\"posted\":%llu,\"completed\":%llu,"
			    "\"failed\":%llu,\"eagain\":%llu,"
			    "\"pending_high\":%llu,\"cq_reads\":%llu,"
			    "\"cq_empty\":%llu,\"mr_cache_misses\":%llu,"
			    "\"reap_hist\":[",
			    k ? "," : "", (unsigned long long)s.posted,
			    (unsigned long long)s.completed,
			    (unsigned long long)s.failed,
			    (unsigned long long)s.eagain,
			    (unsigned long long)s.pending_high,
			    (unsigned long long)s.cq_reads,
			    (unsigned long long)s.cq_empty,
			    (unsigned long long)s.mr_cache_misses);
			for (unsigned b = 0; b < BP_RDMA_REAP_BUCKETS; b++)
				PUT("%s%llu", b ? "," : "",
				    (unsigned long long)s.reap_hist[b]);
			PUT("]}");
		}
		PUT("]}");
	}
	PUT("]}");
	return (int)len;
}
