/* SPDX-License-Identifier: MIT */
/*
 * pipeline/ring_ref.c - the ring reference of `bpbench pipeline`: one producer
 * and one consumer thread over a bp_ring MPMC of capacity 4096, burst B,
 * pinned to two CPUs (ring's batchpipe 1x1 point, same retry policy).
 */
#include "pipeline/experiments.h"

#include <inttypes.h>
#include <stdlib.h>

#include <batchpipe/error.h>

#include "queues/queues.h"

struct pb_ring_run {
	void *q;
	unsigned B;
	pthread_barrier_t start;
	atomic_int stop __attribute__((aligned(BENCH_CACHELINE)));
	atomic_int done;
	uint64_t enqueued, dequeued, bad;
	int64_t t_start, t_end;
};

static void *pb_ring_producer(void *arg)
{
	struct pb_ring_run *rr = arg;
	void **items = bench_zalloc(sizeof(void *) * rr->B);
	unsigned B = rr->B, off = 0;
	uint64_t seq = 0;
	struct bench_backoff bo = {0};

	for (unsigned i = 0; i < B; i++)
		items[i] = (void *)(uintptr_t)(seq++ << 1);
	pthread_barrier_wait(&rr->start);
	rr->t_start = bench_now_ns();
	/* relaxed: a time signal; the join publishes the results */
	while (!atomic_load_explicit(&rr->stop, memory_order_relaxed)) {
		int r = bench_q_batchpipe.enqueue(rr->q, 0, items + off,
						  B - off);

		if (r < 0)
			bench_die("bpbench pipeline: ring enqueue: %s\n",
				  bp_strerror(r));
		if (r == 0) {
			bench_backoff_wait(&bo);
			continue;
		}
		bench_backoff_reset(&bo);
		off += (unsigned)r;
		if (off == B) {
			for (unsigned i = 0; i < B; i++)
				items[i] = (void *)(uintptr_t)(seq++ << 1);
			off = 0;
		}
	}
	rr->enqueued = seq - (B - off);
	free(items);
	/* release: the consumer that sees done sees every enqueue */
	atomic_store_explicit(&rr->done, 1, memory_order_release);
	return NULL;
}

static void *pb_ring_consumer(void *arg)
{
	struct pb_ring_run *rr = arg;
	void **items = bench_zalloc(sizeof(void *) * rr->B);
	uint64_t next = 0;
	struct bench_backoff bo = {0};

	pthread_barrier_wait(&rr->start);
	for (;;) {
		/* acquire: pairs with the producer's release of done */
		int done =
			atomic_load_explicit(&rr->done, memory_order_acquire);
		int m = bench_q_batchpipe.dequeue(rr->q, 0, items, rr->B);

		if (m < 0)
			bench_die("bpbench pipeline: ring dequeue: %s\n",
				  bp_strerror(m));
		if (m == 0) {
			if (done)
				break;
			bench_backoff_wait(&bo);
			continue;
		}
		bench_backoff_reset(&bo);
		for (int i = 0; i < m; i++)
			if ((uintptr_t)items[i] != (uintptr_t)(next++ << 1))
				rr->bad++;
	}
	rr->dequeued = next;
	rr->t_end = bench_now_ns();
	free(items);
	return NULL;
}

double pb_ring_once(const struct pb_opts *o, unsigned B, unsigned ms)
{
	struct pb_ring_run *rr = bench_zalloc(sizeof(*rr));
	pthread_t pt, ct;
	double m;

	rr->B = B;
	atomic_init(&rr->stop, 0);
	atomic_init(&rr->done, 0);
	rr->q = bench_q_batchpipe.create(4096, 1, 1, &rr->stop);
	if (!rr->q)
		bench_die("bpbench pipeline: cannot create the ring\n");
	pthread_barrier_init(&rr->start, NULL, 3);
	pb_spawn(&pt, pb_ring_producer, rr, o->a.cpus[0]);
	pb_spawn(&ct, pb_ring_consumer, rr, o->a.cpus[1 % o->a.ncpus]);
	pthread_barrier_wait(&rr->start);
	bench_sleep_ns((int64_t)ms * 1000000);
	atomic_store_explicit(&rr->stop, 1, memory_order_relaxed);
	pthread_join(pt, NULL);
	pthread_join(ct, NULL);
	if (rr->bad || rr->dequeued != rr->enqueued) {
		fprintf(stderr,
			"bpbench pipeline: VERIFY FAILED: ring 1x1 B=%u: "
			"enqueued %" PRIu64 ", dequeued %" PRIu64 ", %" PRIu64
			" out of order\n",
			B, rr->enqueued, rr->dequeued, rr->bad);
		exit(1);
	}
	m = (double)rr->dequeued * 1e3 / (double)(rr->t_end - rr->t_start);
	pthread_barrier_destroy(&rr->start);
	bench_q_batchpipe.destroy(rr->q);
	free(rr);
	return m;
}
