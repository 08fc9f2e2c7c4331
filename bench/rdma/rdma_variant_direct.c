/* SPDX-License-Identifier: MIT */
/*
 * rdma_variant_direct.c - the run-to-completion variant of `bpbench rdma`
 * (--direct): the stage driven without a pipeline, one thread per worker
 * slot (bp_rdma_direct_post / _poll), the same writes, buffers, tags and
 * target check as the other two variants; one timed run.
 *
 * Each thread keeps its pool of jobs busy: it posts up to post_batch free
 * jobs, makes one pass (bp_rdma_direct_poll with timeout 0, the stage's
 * busy completion wait), takes back what completed, and again. Its CPU
 * time per op is the stage's cost without the pipeline's hand-offs: the
 * figure to hold against the raw loop's.
 */
#include "rdma/rdma_harness.h"

struct rb_dlane {
	struct rb_direct *x;
	struct bp_rdma_direct *d;
	unsigned lane, njobs, slots, post, run;
	size_t size;
	struct bp_rdma_job *jobs;
	struct bp_rdma_job **free_jobs, **batch, **done;
	uint8_t *bufs;
	uint64_t ops; /* completed ok this run */
	int err;
	int64_t t_start, t_end, cpu_ns;
};

void rb_direct_close(struct rb_direct *x)
{
	for (unsigned w = 0; x->lanes && w < x->W; w++) {
		struct rb_dlane *l = &x->lanes[w];

		if (l->d && bp_rdma_direct_close(l->d))
			bench_die("%s: direct: close with jobs out\n",
				  BENCH_CMD);
		free(l->jobs);
		free(l->free_jobs);
		free(l->batch);
		free(l->done);
		free(l->bufs);
	}
	free(x->lanes);
	bp_rdma_destroy(x->r);
	memset(x, 0, sizeof(*x));
}

int rb_direct_open(struct rb_direct *x, struct rb_target *t,
		   const struct rb_pipe_cfg *c)
{
	/* the pipeline's pool, per worker (see rb_pool_jobs) */
	unsigned njobs = (unsigned)((uint64_t)c->P * c->njobs / c->workers);
	struct rb_pipe_cfg cb = *c;
	int peer, err;

	memset(x, 0, sizeof(*x));
	cb.cq_wait = BP_RDMA_CQ_BUSY;
	peer = rb_stage_open(t, &cb, &x->r);
	if (peer < 0)
		return peer;
	x->W = c->workers;
	x->R = c->rails;
	x->lanes = bench_zalloc(sizeof(*x->lanes) * c->workers);
	for (unsigned w = 0; w < c->workers; w++) {
		struct rb_dlane *l = &x->lanes[w];

		l->x = x;
		l->lane = w;
		l->njobs = njobs < c->post ? c->post : njobs;
		l->slots = c->slots;
		l->post = c->post;
		l->size = c->size;
		l->jobs = bench_zalloc(sizeof(*l->jobs) * l->njobs);
		l->free_jobs = bench_zalloc(sizeof(*l->free_jobs) * l->njobs);
		l->batch = bench_zalloc(sizeof(*l->batch) * c->post);
		l->done = bench_zalloc(sizeof(*l->done) * l->njobs);
		l->bufs = bench_zalloc(c->size * l->njobs);
		err = bp_rdma_register(x->r, l->bufs, c->size * l->njobs,
				       NULL);
		if (err)
			return err;
		for (unsigned i = 0; i < l->njobs; i++)
			bp_rdma_job_set(&l->jobs[i], BP_RDMA_WRITE,
					(uint32_t)peer, l->bufs + i * c->size,
					c->size, 0);
	}
	/* the slots are taken once every buffer is registered */
	for (unsigned w = 0; w < c->workers; w++) {
		err = bp_rdma_direct_open(x->r, w, &x->lanes[w].d);
		if (err)
			return err;
	}
	return 0;
}

static void *rb_direct_lane(void *arg)
{
	struct rb_dlane *l = arg;
	unsigned nfree = l->njobs;
	uint64_t next = 0; /* ops posted: the tag and slot of the next */
	int64_t c0 = bench_thread_cpu_ns();
	bool stopping = false;

	for (unsigned i = 0; i < l->njobs; i++)
		l->free_jobs[i] = &l->jobs[i];
	l->ops = 0;
	l->t_start = bench_now_ns();
	for (;;) {
		unsigned k = 0;
		int n;

		/* relaxed: a flag; the join publishes the results */
		if (!stopping && atomic_load_explicit(&l->x->stop,
						      memory_order_relaxed))
			stopping = true;
		while (!stopping && k < l->post && nfree) {
			struct bp_rdma_job *j = l->free_jobs[--nfree];

			rr_stamp(j->buf, l->size, RR_TAG(l->run, l->lane, next));
			j->offset = rr_offset(l->lane, next, l->slots, l->size);
			l->batch[k++] = j;
			next++;
		}
		if (k && bp_rdma_direct_post(l->d, l->batch, k) != (int)k) {
			l->err = -EIO;
			break;
		}
		if (stopping && !bp_rdma_direct_outstanding(l->d))
			break;
		n = bp_rdma_direct_poll(l->d, l->done, l->njobs,
					stopping ? RB_LOST_NS : 0);
		if (n < 0) {
			l->err = n;
			break;
		}
		for (int i = 0; i < n; i++) {
			if (l->done[i]->hdr.status) {
				l->err = l->done[i]->hdr.status;
				break;
			}
			l->free_jobs[nfree++] = l->done[i];
		}
		if (l->err)
			break;
		l->ops += (uint64_t)n;
	}
	l->t_end = bench_now_ns();
	l->cpu_ns = bench_thread_cpu_ns() - c0;
	if (!l->err && l->ops != next)
		l->err = -EPROTO; /* posted, never back */
	return NULL;
}

struct rb_result rb_direct_run(struct rb_direct *x, struct rb_target *t,
			       unsigned ms, uint64_t outstanding,
			       const char *what)
{
	unsigned run = rb_next_run();
	pthread_t th[BP_MAX_WORKERS];
	uint64_t total = 0, ops[BP_MAX_WORKERS];
	int64_t t0 = INT64_MAX, t1 = 0, cpu = 0;
	struct rb_check chk;

	struct bp_rdma_rail_stats s0, s1;

	rb_rail_sum(x->r, x->W, x->R, &s0);
	/* relaxed: the threads start after this (pthread_create orders it) */
	atomic_store_explicit(&x->stop, 0, memory_order_relaxed);
	for (unsigned w = 0; w < x->W; w++) {
		x->lanes[w].run = run;
		x->lanes[w].err = 0;
		rb_spawn(&th[w], rb_direct_lane, &x->lanes[w]);
	}
	bench_sleep_ns((int64_t)ms * 1000000);
	atomic_store_explicit(&x->stop, 1, memory_order_relaxed);
	for (unsigned w = 0; w < x->W; w++) {
		struct rb_dlane *l = &x->lanes[w];

		pthread_join(th[w], NULL);
		if (l->err)
			bench_die("%s: VERIFY FAILED: %s: direct thread %u: "
				  "%s\n",
				  BENCH_CMD, what, w, bp_strerror(l->err));
		if (rb_verbose)
			fprintf(stderr,
				"%s: %s: direct thread %u: %" PRIu64
				" ops in %.1f ms, cpu %.0f ns/op\n",
				BENCH_CMD, what, w, l->ops,
				(double)(l->t_end - l->t_start) / 1e6,
				l->ops ? (double)l->cpu_ns / (double)l->ops
				       : NAN);
		ops[w] = l->ops;
		total += l->ops;
		cpu += l->cpu_ns;
		if (l->t_start < t0)
			t0 = l->t_start;
		if (l->t_end > t1)
			t1 = l->t_end;
	}
	rb_rail_sum(x->r, x->W, x->R, &s1);
	if (rb_verbose && total)
		fprintf(stderr,
			"%s: %s: direct: fi_cq_read per op %.2f (empty %.2f), "
			"-FI_EAGAIN per op %.3f\n",
			BENCH_CMD, what,
			(double)(s1.cq_reads - s0.cq_reads) / (double)total,
			(double)(s1.cq_empty - s0.cq_empty) / (double)total,
			(double)(s1.eagain - s0.eagain) / (double)total);
	chk = (struct rb_check){.run = run,
				.nlanes = x->W,
				.slots = x->lanes[0].slots,
				.ops = ops,
				.size = x->lanes[0].size,
				.outstanding = outstanding};
	return rb_lanes_result(t, what, &chk, t0, t1, cpu);
}
