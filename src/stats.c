/* SPDX-License-Identifier: MIT */
/*
 * Pipeline statistics: every counter has one writer (a worker or the sink)
 * and is summed here when read. Latency buckets are log-scale: 4 per power
 * of two of nanoseconds (bucket upper bounds 1, 2, 3, 4, 5, 6, 7, 8, 10, 12,
 * 14, 16, 20, ... ns), so a percentile is known to within 25 %.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "src/base/json_put.h"
#include "src/pipeline_internal.h"
#include "src/ring_internal.h"

uint64_t bp_lat_bucket_ns(unsigned i)
{
	unsigned log, q;

	if (i < 8)
		return i + 1;
	log = i / 4 + 1;
	q = i % 4;
	if (log > 63 || (log == 63 && q == 3))
		return UINT64_MAX; /* the bound would be 2^64 or beyond */
	/* bucket covers [2^log + q*2^(log-2), 2^log + (q+1)*2^(log-2)) */
	return (UINT64_C(1) << log) + ((uint64_t)(q + 1) << (log - 2));
}

/* Nearest rank: the smallest bucket holding at least ceil(q * total) samples.
 */
static uint64_t percentile(const uint64_t *hist, uint64_t total, double q)
{
	double rank = (double)total * q;
	uint64_t want = (uint64_t)rank, seen = 0;

	if (total == 0)
		return 0;
	if ((double)want < rank)
		want++; /* ceil */
	if (want == 0)
		want = 1;
	want--; /* 0-based: the sample at that rank */
	if (want >= total)
		want = total - 1;
	for (unsigned i = 0; i < BP_LAT_BUCKETS; i++) {
		seen += hist[i];
		if (seen > want)
			return bp_lat_bucket_ns(i);
	}
	return bp_lat_bucket_ns(BP_LAT_BUCKETS - 1);
}

int bp_pipeline_get_stats(struct bp_pipeline *p, struct bp_pipeline_stats *s)
{
	uint64_t lat_total = 0;

	if (!p || !s)
		return -EINVAL;
	memset(s, 0, sizeof(*s));
	/* every job that got a ring position was accepted by bp_pipeline_submit
	 */
	s->submitted = bpi_lanes_enqueued(p);
	s->ok = bpi_stat_get(&p->st_ok);
	s->failed = bpi_stat_get(&p->st_failed);
	s->cancelled = bpi_stat_get(&p->st_cancelled);
	s->sink_batches = bpi_stat_get(&p->st_sink_batches);
	for (unsigned i = 0; i < p->nworkers; i++) {
		struct bp_worker *w = &p->workers[i];
		long hwm = bp_ring_high_water(w->egress);

		s->worker_batches += bpi_stat_get(&w->st_batches);
		s->worker_jobs += bpi_stat_get(&w->st_jobs);
		for (unsigned b = 0; b < BP_BATCH_BUCKETS; b++)
			s->batch_hist[b] += bpi_stat_get(&w->st_batch_hist[b]);
		if (hwm > (long)s->egress_high_water)
			s->egress_high_water = (unsigned)hwm;
	}
	s->ingress_high_water = (unsigned)bpi_lanes_high_water(p);
	for (unsigned i = 0; i < BP_LAT_BUCKETS; i++) {
		s->lat_hist[i] = bpi_stat_get(&p->st_lat[i]);
		lat_total += s->lat_hist[i];
	}
	s->lat_p50_ns = percentile(s->lat_hist, lat_total, 0.50);
	s->lat_p99_ns = percentile(s->lat_hist, lat_total, 0.99);
	s->lat_p999_ns = percentile(s->lat_hist, lat_total, 0.999);
	return 0;
}

/* Stage st's counters: the sums over its workers. */
static void stage_sums(const struct bp_pipeline *p, const struct bpi_stage *st,
		       struct bp_stage_stats *s)
{
	long hwm = st->index ? bp_ring_high_water(st->in)
			     : bpi_lanes_high_water(p);

	memset(s, 0, sizeof(*s));
	s->workers = st->nworkers;
	s->queue_high_water = hwm > 0 ? (unsigned)hwm : 0;
	for (unsigned i = st->first; i < st->first + st->nworkers; i++) {
		struct bp_worker *w = &p->workers[i];

		s->batches += bpi_stat_get(&w->st_batches);
		s->jobs += bpi_stat_get(&w->st_jobs);
		s->completed += bpi_stat_get(&w->st_completed);
		s->handed += bpi_stat_get(&w->st_handed);
		for (unsigned b = 0; b < BP_BATCH_BUCKETS; b++)
			s->batch_hist[b] += bpi_stat_get(&w->st_batch_hist[b]);
	}
}

int bp_pipeline_get_stage_stats(struct bp_pipeline *p, unsigned stage,
				struct bp_stage_stats *s)
{
	const struct bpi_stage *st;

	if (!p || !s ||
	    !(st = bpi_chain_stage(p, stage, "bp_pipeline_get_stage_stats")))
		return -EINVAL;
	stage_sums(p, st, s);
	return 0;
}

#define PUT BP_JSON_PUT

int bp_pipeline_stats_json(const struct bp_pipeline_stats *s, char *buf,
			   size_t size)
{
	size_t len = 0;
	const char *sep = "";

	if (!s || (!buf && size))
		return -EINVAL;
	PUT("{\"submitted\":%llu,\"ok\":%llu,\"failed\":%llu,\"cancelled\":%"
	    "llu,",
	    (unsigned long long)s->submitted, (unsigned long long)s->ok,
	    (unsigned long long)s->failed, (unsigned long long)s->cancelled);
	PUT("\"worker_batches\":%llu,\"worker_jobs\":%llu,\"sink_batches\":%"
	    "llu,",
	    (unsigned long long)s->worker_batches,
	    (unsigned long long)s->worker_jobs,
	    (unsigned long long)s->sink_batches);
	PUT("\"ingress_high_water\":%u,\"egress_high_water\":%u,",
	    s->ingress_high_water, s->egress_high_water);
	PUT("\"latency_ns\":{\"p50\":%llu,\"p99\":%llu,\"p999\":%llu},",
	    (unsigned long long)s->lat_p50_ns,
	    (unsigned long long)s->lat_p99_ns,
	    (unsigned long long)s->lat_p999_ns);
	PUT("\"batch_size_hist\":{");
	for (unsigned b = 0; b < BP_BATCH_BUCKETS; b++) {
		if (!s->batch_hist[b])
			continue;
		PUT("%s\"%u\":%llu", sep, 1u << b,
		    (unsigned long long)s->batch_hist[b]);
		sep = ",";
	}
	PUT("},\"latency_hist_ns\":{");
	sep = "";
	for (unsigned i = 0; i < BP_LAT_BUCKETS; i++) {
		if (!s->lat_hist[i])
			continue;
		PUT("%s\"%llu\":%llu", sep,
		    (unsigned long long)bp_lat_bucket_ns(i),
		    (unsigned long long)s->lat_hist[i]);
		sep = ",";
	}
	PUT("}}");
	return (int)len;
}

/* A stage table's own stats_json with its context, or null. */
static size_t stage_stats(const struct bp_stage *t, void *ctx, char *buf,
			  size_t size, size_t len)
{
	int n;

	if (!t->stats_json) {
		PUT("null");
		return len;
	}
	n = t->stats_json(ctx, len < size ? buf + len : NULL,
			  len < size ? size - len : 0);
	return len + (n > 0 ? (size_t)n : 0);
}

/* A stage's JSON in the report: its counts, and its own stats_json. */
static size_t stage_json(const struct bp_pipeline *p,
			 const struct bpi_stage *st, char *buf, size_t size,
			 size_t len)
{
	struct bp_stage_stats s;

	stage_sums(p, st, &s);
	PUT("{\"name\":\"%s\",\"workers\":%u,\"jobs\":%llu,\"batches\":%llu,"
	    "\"completed\":%llu,\"handed\":%llu,\"queue_high_water\":%u,"
	    "\"stats\":",
	    st->table.name ? st->table.name : "", s.workers,
	    (unsigned long long)s.jobs, (unsigned long long)s.batches,
	    (unsigned long long)s.completed, (unsigned long long)s.handed,
	    s.queue_high_water);
	len = stage_stats(&st->table, st->create_ctx, buf, size, len);
	PUT("}");
	return len;
}

int bp_pipeline_report_json(struct bp_pipeline *p, char *buf, size_t size)
{
	const struct bp_stage *st;
	struct bp_pipeline_stats s;
	size_t len = 0;
	int n;

	if (!p || (!buf && size) || bp_pipeline_get_stats(p, &s))
		return -EINVAL;
	st = p->cfg.stage;
	PUT("{\"pipeline\":");
	n = bp_pipeline_stats_json(&s, len < size ? buf + len : NULL,
				   len < size ? size - len : 0);
	len += n > 0 ? (size_t)n : 0;
	PUT(",\"stage\":{\"name\":\"%s\",\"stats\":", st->name ? st->name : "");
	len = stage_stats(st, p->cfg.stage_ctx, buf, size, len);
	PUT("},\"stages\":[");
	for (unsigned k = 0; k < p->nstages; k++) {
		if (k)
			PUT(",");
		len = stage_json(p, &p->stages[k], buf, size, len);
	}
	PUT("]}");
	return (int)len;
}
