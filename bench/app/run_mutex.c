/* SPDX-License-Identifier: MIT */
/*
 * run_mutex.c - variant (b) of `bpbench app`: the same application over
 * the straightforward locked design. Producers fill B jobs, then push them
 * into one mutex + condvar job queue in one lock hold, which stamps each
 * with a global sequence number (the submission order); workers pop up to
 * B jobs per lock hold, compute their CRCs and push them, B per lock hold,
 * into a second such queue; the sink pops up to B results per lock hold and
 * puts them back in submission order with a reorder buffer indexed by the
 * sequence number, then checks them like (a)'s sink.
 *
 * The queues are as large as (a)'s rings by default: the job queue as its
 * ingress (4096), the result queue as its egress rings together (1024 per
 * worker). The reorder buffer has a place for every job slot there is, so
 * it cannot overflow: every job between the next one due and the newest
 * one received still holds its slot.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "app/app.h"
#include "app/mutexq.h"

#define APP_MQ_JOBS	  4096 /* bp_pipeline_config_init's ingress */
#define APP_MQ_PER_WORKER 1024 /* ... and egress per worker */

struct app_mx {
	struct app_mq jobs, results;
	struct app_run *run;
	struct app_job **rob; /* the reorder buffer, by gseq & rob_mask */
	uint64_t rob_mask;
	pthread_t *workers, sink;
};

static void *app_mx_producer(void *arg)
{
	struct app_producer *pr = arg;
	struct app_mx *mx = pr->ctx;
	unsigned B = pr->run->B, n = 0, jobs = pr->run->o->jobs;
	struct app_job **batch = bench_zalloc(sizeof(*batch) * B);

	app_run_wait_start(pr->run);
	for (uint64_t k = 0; k < jobs; k++) {
		batch[n++] = app_job_take(pr, k);
		if (n == B) {
			app_mq_put(&mx->jobs, batch, n, true);
			n = 0;
		}
	}
	if (n)
		app_mq_put(&mx->jobs, batch, n, true);
	free(batch);
	return NULL;
}

static void *app_mx_worker(void *arg)
{
	struct app_mx *mx = arg;
	unsigned B = mx->run->B, n;
	struct app_job **batch = bench_zalloc(sizeof(*batch) * B);

	while ((n = app_mq_take(&mx->jobs, batch, B)) > 0) {
		for (unsigned i = 0; i < n; i++)
			app_compute(batch[i]);
		app_mq_put(&mx->results, batch, n, false);
	}
	free(batch);
	return NULL;
}

static void *app_mx_sink(void *arg)
{
	struct app_mx *mx = arg;
	struct app_check *c = &mx->run->check;
	const uint64_t total = (uint64_t)c->o->producers * c->o->jobs;
	unsigned B = mx->run->B;
	struct app_job **batch = bench_zalloc(sizeof(*batch) * B);
	uint64_t next = 0; /* the next gseq to deliver */

	while (next < total) {
		unsigned n = app_mq_take(&mx->results, batch, B);

		if (!n)
			bench_die("bpbench app: VERIFY FAILED: mutex B=%u: "
				  "%" PRIu64 " of %" PRIu64 " jobs delivered, "
				  "nothing more will come\n",
				  B, next, total);
		for (unsigned i = 0; i < n; i++) {
			uint64_t g = batch[i]->gseq;

			if (g - next > mx->rob_mask ||
			    mx->rob[g & mx->rob_mask])
				bench_die(
					"bpbench app: VERIFY FAILED: mutex "
					"B=%u: job %" PRIu64 " received twice "
					"or out of range (next %" PRIu64 ")\n",
					B, g, next);
			mx->rob[g & mx->rob_mask] = batch[i];
		}
		while (mx->rob[next & mx->rob_mask]) {
			struct app_job *j = mx->rob[next & mx->rob_mask];

			mx->rob[next & mx->rob_mask] = NULL;
			next++;
			app_check_job(c, j, j->gseq);
		}
		app_check_release(c);
	}
	free(batch);
	return NULL;
}

static void app_mx_spawn(pthread_t *t, void *(*fn)(void *), void *arg)
{
	int rc = pthread_create(t, NULL, fn, arg);

	if (rc)
		bench_die("bpbench app: mutex variant thread: %s\n",
			  strerror(rc));
}

void app_run_mutex(struct app_run *r)
{
	const struct app_opts *o = r->o;
	struct app_mx mx = {.run = r};
	uint64_t slots = (uint64_t)o->producers * o->pool, rob = 1;

	while (rob < slots)
		rob <<= 1;
	mx.rob = bench_zalloc(sizeof(*mx.rob) * rob);
	mx.rob_mask = rob - 1;
	app_mq_init(&mx.jobs, APP_MQ_JOBS);
	app_mq_init(&mx.results, APP_MQ_PER_WORKER * o->workers);
	mx.workers = bench_zalloc(sizeof(pthread_t) * o->workers);
	for (unsigned i = 0; i < o->workers; i++)
		app_mx_spawn(&mx.workers[i], app_mx_worker, &mx);
	app_mx_spawn(&mx.sink, app_mx_sink, &mx);
	app_run_spawn_producers(r, app_mx_producer, &mx);
	app_run_begin(r);
	app_run_join_producers(r);
	app_mq_close(&mx.jobs);
	for (unsigned i = 0; i < o->workers; i++)
		pthread_join(mx.workers[i], NULL);
	app_mq_close(&mx.results);
	pthread_join(mx.sink, NULL);
	app_run_end(r);
	app_mq_fini(&mx.jobs);
	app_mq_fini(&mx.results);
	free(mx.workers);
	free(mx.rob);
}
