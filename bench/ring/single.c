/* SPDX-License-Identifier: MIT */
/*
 * single.c - the single-thread cost of `bpbench ring`: one thread enqueues
 * B items then dequeues them, over and over, each round checked; the time
 * per item is the cost of the code path without cross-core traffic.
 */
#include <stdlib.h>

#include "ring/ring.h"

static void ring_single_round(const struct bench_queue_ops *ops, void *q,
			      void **items, void **out, unsigned B,
			      uint64_t *seq)
{
	unsigned off;

	for (unsigned i = 0; i < B; i++)
		items[i] = ring_item(*seq + i, 0);
	for (off = 0; off < B;) {
		int r = ops->enqueue(q, 0, items + off, B - off);

		if (r <= 0)
			bench_die("bpbench ring: %s single-thread enqueue of "
				  "%u into an "
				  "empty queue returned %d\n",
				  ops->name, B - off, r);
		off += (unsigned)r;
	}
	for (off = 0; off < B;) {
		int r = ops->dequeue(q, 0, out + off, B - off);

		if (r <= 0)
			bench_die("bpbench ring: %s single-thread dequeue "
				  "returned %d with "
				  "%u items in the queue\n",
				  ops->name, r, B - off);
		off += (unsigned)r;
	}
	for (unsigned i = 0; i < B; i++)
		if (out[i] != ring_item(*seq + i, 0))
			bench_die("bpbench ring: VERIFY FAILED: %s "
				  "single-thread B=%u: "
				  "got %p, expected %p\n",
				  ops->name, B, out[i], ring_item(*seq + i, 0));
	*seq += B;
}

double ring_single_once(const struct ring_opts *o,
			const struct bench_queue_ops *ops, unsigned B,
			unsigned ms)
{
	void *q = ops->create(o->capacity, 1, 1, NULL);
	void **items = bench_zalloc(sizeof(void *) * B);
	void **out = bench_zalloc(sizeof(void *) * B);
	unsigned rounds = B >= 4096 ? 1 : 4096 / B; /* between clock reads */
	uint64_t seq = 0, items_done = 0;
	int64_t t0, t;

	if (!q)
		bench_die("bpbench ring: cannot create %s\n", ops->name);
	/* warm the slots and the code once around the ring */
	for (unsigned i = 0; i < rounds; i++)
		ring_single_round(ops, q, items, out, B, &seq);
	t0 = bench_now_ns();
	do {
		for (unsigned i = 0; i < rounds; i++)
			ring_single_round(ops, q, items, out, B, &seq);
		items_done += (uint64_t)rounds * B;
		t = bench_now_ns();
	} while (t - t0 < (int64_t)ms * 1000000);
	free(items);
	free(out);
	ops->destroy(q);
	return (double)(t - t0) / (double)items_done;
}
