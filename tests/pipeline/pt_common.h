/* SPDX-License-Identifier: MIT */
/*
 * tests/pipeline/pt_common.h - helpers shared by the pipeline tests.
 *
 * Threads other than main never call cmocka asserts (cmocka is not
 * thread-safe and longjmps out of the test): they record failures with
 * pt_fail() and the main thread asserts pt_failures() == 0.
 *
 * Each program that includes this says PT_DEFINE_GLOBALS once, at file
 * scope.
 */
#ifndef BP_TESTS_PIPELINE_PT_COMMON_H
#define BP_TESTS_PIPELINE_PT_COMMON_H

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/*
 * What the ring tests have already (sanitizer detection, failure
 * bookkeeping, clock, sleep, environment, the alarm watchdog), under the
 * pipeline tests' names.
 */
#include "../bp_test.h"

#define PT_TSAN		   BPT_TSAN
#define PT_ASAN		   BPT_ASAN
#define PT_STRESS_SCALE	   BPT_STRESS_SCALE
#define PT_SKIP		   BPT_SKIP
#define PT_DEFINE_GLOBALS  BPT_DEFINE_GLOBALS
#define pt_fail		   bp_test_fail
#define pt_failures	   bp_test_failures
#define pt_now_ns	   bpt_now_ns
#define pt_sleep_ns	   bpt_sleep_ns
#define pt_sleep_ms	   bpt_sleep_ms
#define pt_env_ulong	   bpt_env_ulong
#define pt_watchdog_arm	   bpt_alarm_arm
#define pt_watchdog_disarm bpt_alarm_disarm

/* Number of threads of this process (from /proc/self/status), or -1. */
static inline int pt_thread_count(void)
{
	char line[256];
	int n = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Threads: %d", &n) == 1)
			break;
	fclose(f);
	return n;
}

#endif /* BP_TESTS_PIPELINE_PT_COMMON_H */
