/* SPDX-License-Identifier: MIT */
/*
 * rdma_variant_raw.c - the raw variant of `bpbench rdma`: the plain
 * libfabric write loop of rdma_raw.c on the same target; one timed run.
 */
#include "rdma/rdma_harness.h"

void rb_raw_close(struct rb_raw *rw)
{
	for (unsigned w = 0; rw->lanes && w < rw->W; w++)
		rr_lane_close(&rw->lanes[w]);
	free(rw->lanes);
	memset(rw, 0, sizeof(*rw));
}

int rb_raw_open(struct rb_raw *rw, struct rb_target *t,
		const struct rb_pipe_cfg *c, bool wait_fd, char *why,
		size_t len)
{
	struct rr_config rc = {
		.provider = t->provider,
		.node = t->node,
		.depth = c->depth,
		/* the pipeline's pool, per lane and rail (see rb_pool_jobs) */
		.buffers = rb_raw_same_src
				   ? (unsigned)((uint64_t)c->P * c->njobs /
						c->workers / c->rails)
				   : 0,
		.post_batch = c->post,
		.reap_batch = c->reap,
		.wait_fd = wait_fd,
	};
	struct bp_rdma_peer_desc d;

	memset(rw, 0, sizeof(*rw));
	rw->W = c->workers;
	rw->lanes = bench_zalloc(sizeof(*rw->lanes) * c->workers);
	rb_target_desc(t, c->rails, &d);
	for (unsigned w = 0; w < c->workers; w++) {
		struct rr_lane *l = &rw->lanes[w];
		int rc2;

		l->lane = w;
		l->slots = c->slots;
		l->stop = &rw->stop;
		rc2 = rr_lane_open(l, &rc, c->rails, &d, c->size);
		if (rc2) {
			snprintf(why, len, "%s", l->errmsg);
			rw->W = w;
			rb_raw_close(rw);
			return rc2;
		}
	}
	return 0;
}

struct rb_result rb_raw_run(struct rb_raw *rw, struct rb_target *t, unsigned ms,
			    uint64_t outstanding, const char *what)
{
	unsigned run = rb_next_run();
	pthread_t th[BP_MAX_WORKERS];
	uint64_t total = 0, ops[BP_MAX_WORKERS];
	int64_t t0 = INT64_MAX, t1 = 0, cpu = 0;
	struct rb_check chk;

	/* relaxed: the threads start after this (pthread_create orders it) */
	atomic_store_explicit(&rw->stop, 0, memory_order_relaxed);
	for (unsigned w = 0; w < rw->W; w++) {
		rw->lanes[w].run = run;
		rb_spawn(&th[w], rr_lane_throughput, &rw->lanes[w]);
	}
	bench_sleep_ns((int64_t)ms * 1000000);
	/* relaxed: a flag; join publishes the lanes' results */
	atomic_store_explicit(&rw->stop, 1, memory_order_relaxed);
	for (unsigned w = 0; w < rw->W; w++) {
		struct rr_lane *l = &rw->lanes[w];

		pthread_join(th[w], NULL);
		if (l->err)
			bench_die("%s: VERIFY FAILED: %s: raw thread %u: %s\n",
				  BENCH_CMD, what, w, l->errmsg);
		if (l->completed != l->posted)
			bench_die("%s: VERIFY FAILED: %s: raw thread %u: "
				  "%" PRIu64 " completions for %" PRIu64
				  " posts\n",
				  BENCH_CMD, what, w, l->completed, l->posted);
		if (rb_verbose)
			fprintf(stderr,
				"%s: %s: raw thread %u: %" PRIu64
				" ops in %.1f ms, %" PRIu64 " EAGAIN, %" PRIu64
				" empty reads, cpu %.0f ns/op\n",
				BENCH_CMD, what, w, l->posted,
				(double)(l->t_end - l->t_start) / 1e6,
				l->eagain, l->cq_empty,
				l->posted
					? (double)l->cpu_ns / (double)l->posted
					: NAN);
		ops[w] = l->posted;
		total += l->posted;
		cpu += l->cpu_ns;
		if (l->t_start < t0)
			t0 = l->t_start;
		if (l->t_end > t1)
			t1 = l->t_end;
	}
	chk = (struct rb_check){.run = run,
				.nlanes = rw->W,
				.slots = rw->lanes[0].slots,
				.ops = ops,
				.size = rw->lanes[0].size,
				.outstanding = outstanding};
	return rb_lanes_result(t, what, &chk, t0, t1, cpu);
}
