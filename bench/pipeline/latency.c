/* SPDX-License-Identifier: MIT */
/*
 * pipeline/latency.c - `bpbench pipeline`'s latency phase: low-load and
 * wake-up latency, measured by the benchmark's own clock (read just before
 * bp_pipeline_submit -> read on entry to the sink callback, one way;
 * CLOCK_MONOTONIC, one clock for all CPUs), beside the pipeline's own
 * percentiles of the same runs; and the interleaving of every latency task.
 */
#include "pipeline/experiments.h"

#include <math.h>
#include <stdlib.h>

/*
 * Latency: one job at a time. Take the job back from the free ring (the sink
 * put it there after stamping seen_ns), record seen - sent, optionally idle,
 * submit it again.
 */
static void *pb_latency_main(void *arg)
{
	struct pb_producer *pr = arg;
	struct pb_run *run = pr->run;
	int64_t sent = -1;

	pthread_barrier_wait(&run->start);
	pr->t_start = bench_now_ns();
	for (;;) {
		if (!pb_take_free(pr, 1))
			break;
		if (sent >= 0)
			pr->samples[pr->nsamples++] =
				pb_job_of(pr->batch[0])->seen_ns - sent;
		if (pr->nsamples >= pr->max_samples ||
		    bench_now_ns() >= run->lat_until_ns)
			break;
		if (run->gap_ns)
			bench_sleep_ns(run->gap_ns);
		pb_stamp(pr, 1);
		sent = bench_now_ns();
		pb_submit_held(pr);
	}
	pb_last_out(run);
	return NULL;
}

/*
 * One producer, one worker, one job at a time: gap 0 is the low-load
 * latency, a gap of >= 5 ms the wake-up latency after idle. prod_wait: how
 * the producer waits for its job to come back (not part of what is
 * measured, but what the producer does with its CPU meanwhile matters).
 */
struct pb_lat_result pb_latency_once(const struct pb_opts *o,
				     struct pb_producer *lp, int wait,
				     int prod_wait, int64_t gap_ns,
				     unsigned max_n, unsigned ms)
{
	struct pb_run run;
	struct bp_pipeline_stats st;
	struct pb_lat_result res;

	pb_run_init(&run, o, lp, 1);
	run.W = 1;
	run.B = PB_HEAD_B;
	run.wait = (unsigned)wait;
	run.mode = PB_LATENCY;
	run.gap_ns = gap_ns;
	run.prod_wait = (unsigned)prod_wait;
	pb_pipeline_up(&run);
	pb_prepare_producers(&run);
	lp->max_samples = max_n;
	pb_spawn(&lp->thread, pb_latency_main, lp, o->pin ? o->a.cpus[0] : -1);
	run.lat_until_ns = bench_now_ns() + (int64_t)ms * 1000000;
	pthread_barrier_wait(&run.start);
	pthread_join(lp->thread, NULL);
	bp_pipeline_get_stats(run.p, &st);
	pb_verify(&run, &st);
	bp_pipeline_destroy(run.p);
	pb_run_fini(&run);
	bench_sort_i64(lp->samples, lp->nsamples);
	res.n = lp->nsamples;
	res.p50_us = bench_pct_i64(lp->samples, lp->nsamples, 0.50) / 1e3;
	res.p99_us = bench_pct_i64(lp->samples, lp->nsamples, 0.99) / 1e3;
	res.bp_p50_us = (double)st.lat_p50_ns / 1e3;
	res.bp_p99_us = (double)st.lat_p99_ns / 1e3;
	return res;
}

void pb_latency_sweep(const struct pb_opts *o, struct pb_results *r,
		      struct pb_producer *lp, struct pb_producer *prod)
{
	uint64_t rng = o->a.seed ^ UINT64_C(0x1a7e1c);
	int64_t t_start = bench_now_ns();
	/*
	 * Tasks, each per wait strategy: low-load latency with a producer that
	 * spins and yields for its job (busy-poll); the same with a producer
	 * that waits with the strategy under test; wake-up after idle (the
	 * producer sleeps through the gap: its own wake-up is not measured
	 * and it leaves the CPUs to the pipeline); idle CPU. Then hand-off.
	 */
	enum { T_LAT, T_SAME, T_WAKE, T_IDLE, T_HANDOFF, T_FLOOR };
	int order[T_HANDOFF * PB_NWAITS + 2], n;
	int64_t *fv = bench_zalloc(sizeof(*fv) * o->wake_samples);

	for (int run = 0; run < r->runs; run++) {
		fprintf(stderr, "bpbench pipeline: latency run %d/%d:", run + 1,
			r->runs);
		n = 0;
		for (int t = T_LAT; t < T_HANDOFF; t++)
			for (int i = 0; i < o->nwaits; i++)
				order[n++] = t * PB_NWAITS + o->waits[i];
		order[n++] = T_HANDOFF * PB_NWAITS;
		order[n++] = T_FLOOR * PB_NWAITS;
		bench_shuffle(order, n, &rng);
		for (int k = 0; k < n; k++) {
			int task = order[k] / PB_NWAITS,
			    w = order[k] % PB_NWAITS;
			int64_t gap = (int64_t)o->wake_gap_us * 1000;
			struct pb_lat_result lr;

			switch (task) {
			case T_LAT:
				lr = pb_latency_once(o, lp, w, 0, 0,
						     PB_MAX_SAMPLES, o->lat_ms);
				*pb_wcell(r->lat_p50, run, w) = lr.p50_us;
				*pb_wcell(r->lat_p99, run, w) = lr.p99_us;
				*pb_wcell(r->lat_bp50, run, w) = lr.bp_p50_us;
				*pb_wcell(r->lat_bp99, run, w) = lr.bp_p99_us;
				fprintf(stderr, " lat/%s(%u)", pb_waits[w].name,
					lr.n);
				break;
			case T_SAME:
				lr = pb_latency_once(o, lp, w, w, 0,
						     PB_MAX_SAMPLES, o->lat_ms);
				*pb_wcell(r->same_p50, run, w) = lr.p50_us;
				*pb_wcell(r->same_p99, run, w) = lr.p99_us;
				fprintf(stderr, " same/%s(%u)",
					pb_waits[w].name, lr.n);
				break;
			case T_WAKE:
				lr = pb_latency_once(o, lp, w, 2, gap,
						     o->wake_samples, 600000);
				*pb_wcell(r->wake_p50, run, w) = lr.p50_us;
				*pb_wcell(r->wake_p99, run, w) = lr.p99_us;
				*pb_wcell(r->wake_bp50, run, w) = lr.bp_p50_us;
				*pb_wcell(r->wake_bp99, run, w) = lr.bp_p99_us;
				fprintf(stderr, " wake/%s", pb_waits[w].name);
				break;
			case T_IDLE:
				*pb_wcell(r->idle, run, w) =
					pb_idle_once(o, prod, w, o->idle_ms);
				fprintf(stderr, " idle/%s", pb_waits[w].name);
				break;
			case T_FLOOR:
				lr = pb_wakefloor_once(o, fv, o->wake_samples);
				r->floor_p50[run] = lr.p50_us;
				r->floor_p99[run] = lr.p99_us;
				fprintf(stderr, " wake-floor");
				break;
			default:
				r->handoff[run] = pb_handoff_once(
					o, o->a.quick ? 20000 : 100000);
				fprintf(stderr, " hand-off");
			}
		}
		fprintf(stderr, " (%.1f s)\n",
			(double)(bench_now_ns() - t_start) / 1e9);
	}
	free(fv);
}
