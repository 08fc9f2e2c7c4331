// SPDX-License-Identifier: MIT
/*
 * q_moodycamel.cpp - moodycamel::ConcurrentQueue (header-only C++), the
 * lock-free queue of the "150x in three steps" write-up, behind the C ops
 * table. Bounded the way its documentation says: constructed with a
 * capacity (it preallocates that many slots in blocks of 32) and used only
 * through the try_ calls, which never allocate. Producers are implicit (no
 * token: an implicit producer hands its emptied blocks back, so a bounded
 * queue does not starve a late producer); each consumer uses a
 * ConsumerToken. try_enqueue_bulk is all-or-nothing, so a burst that does
 * not fit is retried at half its size, down to one item. The queue keeps
 * per-producer order only, which is what the harness checks.
 */
#include <new>
#include <vector>

#include <concurrentqueue/concurrentqueue.h>

extern "C" {
#include "queues/queues.h"
}

namespace {

struct mc_queue {
	moodycamel::ConcurrentQueue<void *> q;
	std::vector<moodycamel::ConsumerToken> tokens;

	mc_queue(unsigned capacity, unsigned consumers) : q(capacity)
	{
		tokens.reserve(consumers);
		for (unsigned i = 0; i < consumers; i++)
			tokens.emplace_back(q);
	}
};

void *mc_create(unsigned capacity, unsigned producers, unsigned consumers,
		const atomic_int *stop)
{
	(void)producers;
	(void)stop;
	return new (std::nothrow) mc_queue(capacity, consumers ? consumers : 1);
}

void mc_destroy(void *p)
{
	delete static_cast<mc_queue *>(p);
}

int mc_enqueue(void *p, unsigned tid, void *const *items, unsigned n)
{
	mc_queue *m = static_cast<mc_queue *>(p);

	(void)tid;
	for (unsigned k = n; k > 0; k /= 2)
		if (m->q.try_enqueue_bulk(items, k))
			return (int)k;
	return 0;
}

int mc_dequeue(void *p, unsigned tid, void **items, unsigned n)
{
	mc_queue *m = static_cast<mc_queue *>(p);

	return (int)m->q.try_dequeue_bulk(m->tokens[tid], items, n);
}

} // namespace

extern "C" const struct bench_queue_ops bench_q_moodycamel = {
	/* .name = */ "moodycamel",
	/* .max_producers = */ 0,
	/* .max_consumers = */ 0,
	/* .blocking = */ 0,
	/* .ceiling = */ 0,
	/* .create = */ mc_create,
	/* .destroy = */ mc_destroy,
	/* .enqueue = */ mc_enqueue,
	/* .dequeue = */ mc_dequeue,
	/* .close = */ nullptr,
};
