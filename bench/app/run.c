/* SPDX-License-Identifier: MIT */
/*
 * run.c - one verified run of `bpbench app`: the producers' slots and
 * threads, the clocks around the run, and the totals after it.
 *
 * Jobs live in per-producer slot pools, reused from run to run: job k of a
 * producer goes into slot k % pool once the sink has checked job k - pool
 * (app_check_release gives the slots back in batches). Every variant moves
 * the same objects the same way, so the pools cost all of them alike; the
 * default pool holds more jobs than either queue system can have in flight,
 * so a producer waits for a slot only where a variant holds more than that
 * (counted: slot_waits).
 *
 * Wall time: from just before the producers are released to when every job
 * was delivered and the variant's threads have been joined; CPU time: the
 * whole process's (CLOCK_PROCESS_CPUTIME_ID) over the same interval, so
 * threads spinning while they wait show, threads asleep do not.
 */
#include "app/app.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static struct app_pool *app_pools;
static unsigned app_npools;

const char *const app_variant_names[APP_NVARIANTS] = {"batchpipe", "mutex",
						      "ceiling"};

static struct app_pool *app_pools_get(const struct app_opts *o)
{
	if (!app_pools) {
		app_npools = o->producers;
		app_pools = bench_zalloc(sizeof(*app_pools) * app_npools);
		for (unsigned p = 0; p < app_npools; p++) {
			app_pools[p].size = o->pool;
			app_pools[p].slots =
				bench_zalloc(sizeof(struct app_job) * o->pool);
		}
	}
	for (unsigned p = 0; p < app_npools; p++)
		/* relaxed: no thread of the run exists yet; pthread_create
		 * publishes it */
		atomic_store_explicit(&app_pools[p].released, 0,
				      memory_order_relaxed);
	return app_pools;
}

void app_run_cleanup(void)
{
	for (unsigned p = 0; p < app_npools; p++)
		free(app_pools[p].slots);
	free(app_pools);
	app_pools = NULL;
	app_npools = 0;
}

struct app_job *app_job_take(struct app_producer *pr, uint64_t k)
{
	struct app_pool *pool = pr->pool;
	struct app_job *j;

	if (__builtin_expect(k >= pr->limit, 0)) {
		struct bench_backoff bo = {0};

		for (;;) {
			/* acquire: pairs with the sink's release in
			 * app_check_release, so its reads of the slot's last
			 * job are done before this producer rewrites it */
			pr->limit = atomic_load_explicit(&pool->released,
							 memory_order_acquire) +
				    pool->size;
			if (k < pr->limit)
				break;
			if (!bo.failures)
				pr->slot_waits++;
			bench_backoff_wait(&bo);
		}
	}
	j = &pool->slots[k % pool->size];
	app_fill(j, pr->index, k);
	return j;
}

void app_run_spawn_producers(struct app_run *r, void *(*fn)(void *), void *ctx)
{
	unsigned n = r->o->producers;

	pthread_barrier_init(&r->start, NULL, n + 1);
	for (unsigned i = 0; i < n; i++) {
		struct app_producer *pr = &r->prods[i];
		int rc;

		pr->run = r;
		pr->pool = &r->check.pools[i];
		pr->ctx = ctx;
		pr->index = i;
		pr->limit = pr->pool->size; /* every slot is free */
		pr->slot_waits = 0;
		rc = pthread_create(&pr->thread, NULL, fn, pr);
		if (rc)
			bench_die("bpbench app: producer thread: %s\n",
				  strerror(rc));
	}
}

void app_run_wait_start(struct app_run *r)
{
	pthread_barrier_wait(&r->start);
}

void app_run_begin(struct app_run *r)
{
	r->cpu0 = bench_process_cpu_ns();
	r->t0 = bench_now_ns();
	pthread_barrier_wait(&r->start);
}

void app_run_join_producers(struct app_run *r)
{
	for (unsigned i = 0; i < r->o->producers; i++)
		pthread_join(r->prods[i].thread, NULL);
	pthread_barrier_destroy(&r->start);
}

void app_run_end(struct app_run *r)
{
	r->t1 = bench_now_ns();
	r->cpu1 = bench_process_cpu_ns();
}

/* Every job was checked, each producer's up to its last: nothing lost. */
static void app_run_totals(const struct app_run *r)
{
	const struct app_opts *o = r->o;
	const struct app_check *c = &r->check;
	uint64_t total = (uint64_t)o->producers * o->jobs;

	for (unsigned p = 0; p < o->producers; p++)
		if (c->next_k[p] != o->jobs)
			bench_die("bpbench app: VERIFY FAILED: %s B=%u: "
				  "producer %u: %" PRIu64 " of %u jobs "
				  "delivered\n",
				  c->variant, r->B, p, c->next_k[p], o->jobs);
	if (c->next_gseq != total)
		bench_die("bpbench app: VERIFY FAILED: %s B=%u: %" PRIu64
			  " of %" PRIu64 " jobs delivered\n",
			  c->variant, r->B, c->next_gseq, total);
}

void app_run_verified(const struct app_opts *o, enum app_variant v, unsigned B,
		      struct app_outcome *out)
{
	struct app_run r = {.o = o, .B = B};
	uint64_t total = (uint64_t)o->producers * o->jobs;

	app_check_init(&r.check, o, app_pools_get(o), app_variant_names[v], B);
	r.prods = bench_zalloc(sizeof(*r.prods) * o->producers);
	switch (v) {
	case APP_BATCHPIPE:
		app_run_batchpipe(&r);
		break;
	case APP_MUTEX:
		app_run_mutex(&r);
		break;
	default:
		app_run_ceiling(&r);
		break;
	}
	/* the ceiling checks its jobs in its own threads (ceiling.c) */
	if (v != APP_CEILING)
		app_run_totals(&r);
	out->mps = (double)total * 1e3 / (double)(r.t1 - r.t0);
	out->cpu_ns_job = (double)(r.cpu1 - r.cpu0) / (double)total;
	out->slot_waits = 0;
	for (unsigned i = 0; v != APP_CEILING && i < o->producers; i++)
		out->slot_waits += r.prods[i].slot_waits;
	app_check_fini(&r.check);
	free(r.prods);
}
