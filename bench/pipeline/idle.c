/* SPDX-License-Identifier: MIT */
/*
 * pipeline/idle.c - idle CPU: a started pipeline with nothing to do, and
 * the process CPU time it burns, per wait strategy.
 */
#include "pipeline/experiments.h"

#include <sys/resource.h>

static int64_t pb_cpu_ns(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ((int64_t)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000 +
	       ((int64_t)ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000;
}

/*
 * A started pipeline (default size: 2 workers and the sink) with nothing to
 * do: process CPU time over `ms`, in percent of one core. The main thread
 * sleeps meanwhile; nothing else runs in the process.
 */
double pb_idle_once(const struct pb_opts *o, struct pb_producer *prod, int wait,
		    unsigned ms)
{
	struct pb_run run;
	struct bp_pipeline_stats st;
	int64_t c0, t0, c1, t1;

	pb_run_init(&run, o, prod, 1);
	run.W = 2;
	run.B = PB_HEAD_B;
	run.wait = (unsigned)wait;
	run.mode = PB_LATENCY;
	pb_pipeline_up(&run);
	/* let the threads finish starting and reach their idle wait */
	bench_sleep_ns(20 * 1000000);
	c0 = pb_cpu_ns();
	t0 = bench_now_ns();
	bench_sleep_ns((int64_t)ms * 1000000);
	c1 = pb_cpu_ns();
	t1 = bench_now_ns();
	bp_pipeline_drain(run.p);
	bp_pipeline_get_stats(run.p, &st);
	if (st.submitted || st.ok)
		bench_die("bpbench pipeline: idle pipeline delivered jobs\n");
	bp_pipeline_destroy(run.p);
	pb_run_fini(&run);
	return 100.0 * (double)(c1 - c0) / (double)(t1 - t0);
}
