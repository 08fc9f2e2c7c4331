/* SPDX-License-Identifier: MIT */
/*
 * ring_handoff: two producer threads hand lines of work to one consumer
 * thread through a batchpipe ring, in batches, with blocking calls and an
 * end of stream. The consumer sums what it gets; the program checks the sum.
 *
 *   ring_handoff [items-per-producer]
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <batchpipe/batchpipe.h>

#define PRODUCERS 2
#define BATCH     32

struct work {
	uint64_t value; /* structs are 8-aligned: bit 0 of the pointer is free */
};

static struct bp_ring *ring;
static long per_producer = 100000;
static _Atomic int producers_left = PRODUCERS;

static void *produce(void *arg)
{
	struct work *w = calloc((size_t)per_producer, sizeof(*w));
	void *batch[BATCH];
	long done = 0;

	(void)arg;
	while (w && done < per_producer) {
		unsigned n = 0;

		while (n < BATCH && done + n < per_producer) {
			w[done + n].value = (uint64_t)(done + n + 1);
			batch[n] = &w[done + n];
			n++;
		}
		/* blocks while the ring is full; returns how many it took */
		for (unsigned off = 0; off < n;) {
			int rc = bp_ring_enqueue_burst_wait(ring, batch + off,
							    n - off, -1);
			if (rc < 0) {
				fprintf(stderr, "enqueue: %s\n", bp_strerror(rc));
				exit(1);
			}
			off += (unsigned)rc;
		}
		done += n;
	}
	/* the last producer to finish ends the stream (multi-producer ring) */
	if (atomic_fetch_sub(&producers_left, 1) == 1)
		bp_ring_close(ring);
	return w; /* freed by main once the consumer is done */
}

int main(int argc, char **argv)
{
	pthread_t prod[PRODUCERS];
	void *batch[BATCH];
	uint64_t sum = 0, expect;
	long got = 0;
	int rc;

	if (argc > 1)
		per_producer = atol(argv[1]);
	if (per_producer <= 0) {
		fprintf(stderr, "usage: ring_handoff [items-per-producer > 0]\n");
		return 2;
	}
	rc = bp_ring_create(1024, BP_RING_SC, &ring);
	if (rc < 0) {
		fprintf(stderr, "bp_ring_create: %s\n", bp_strerror(rc));
		return 1;
	}
	for (int i = 0; i < PRODUCERS; i++)
		pthread_create(&prod[i], NULL, produce, NULL);

	/* take whatever is there, up to BATCH; -EPIPE is the end of stream */
	while ((rc = bp_ring_dequeue_burst_wait(ring, batch, BATCH, -1)) != -EPIPE) {
		if (rc < 0) {
			fprintf(stderr, "dequeue: %s\n", bp_strerror(rc));
			return 1;
		}
		for (int i = 0; i < rc; i++)
			sum += ((struct work *)batch[i])->value;
		got += rc;
	}
	for (int i = 0; i < PRODUCERS; i++) {
		void *mem;

		pthread_join(prod[i], &mem);
		free(mem);
	}
	bp_ring_destroy(ring);

	expect = (uint64_t)PRODUCERS * (uint64_t)per_producer *
		 (uint64_t)(per_producer + 1) / 2;
	printf("items %ld, sum %llu (expected %llu)\n", got,
	       (unsigned long long)sum, (unsigned long long)expect);
	return sum == expect && got == PRODUCERS * per_producer ? 0 : 1;
}
