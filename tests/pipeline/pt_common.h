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
 * bookkeeping, clock, sleep, environment), under the pipeline tests' names.
 */
#include "../bp_test.h"

#define PT_TSAN		 BPT_TSAN
#define PT_STRESS_SCALE	 BPT_STRESS_SCALE
#define pt_fail		 bp_test_fail
#define pt_failures	 bp_test_failures
#define pt_now_ns	 bpt_now_ns
#define pt_sleep_ms	 bpt_sleep_ms
#define pt_env_ulong	 bpt_env_ulong

#if defined(__SANITIZE_ADDRESS__)
#define PT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PT_ASAN 1
#endif
#endif
#ifndef PT_ASAN
#define PT_ASAN 0
#endif

#define PT_SKIP 77

#define PT_DEFINE_GLOBALS                                                      \
	BPT_DEFINE_GLOBALS;                                                    \
	char pt_watchdog_msg_[256]

static inline void pt_sleep_ns(int64_t ns)
{
	struct timespec ts = {(time_t)(ns / 1000000000),
			      (long)(ns % 1000000000)};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/*
 * Watchdog: a hang (lost wake-up, lost job the drain waits for) fails the
 * test with a message naming what hung instead of eating the meson timeout.
 * alarm(2) plus an async-signal-safe handler; BP_WATCHDOG_S overrides.
 */
extern char pt_watchdog_msg_[256];

static inline void pt_watchdog_handler_(int sig)
{
	static const char head[] = "WATCHDOG: did not finish in time: ";
	ssize_t rc;

	(void)sig;
	rc = write(2, head, sizeof(head) - 1);
	rc = write(2, pt_watchdog_msg_, strnlen(pt_watchdog_msg_, 255));
	rc = write(2, "\n", 1);
	(void)rc;
	_exit(1);
}

static inline void pt_watchdog_arm(unsigned seconds, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static inline void pt_watchdog_arm(unsigned seconds, const char *fmt, ...)
{
	va_list ap;

	alarm(0);
	va_start(ap, fmt);
	vsnprintf(pt_watchdog_msg_, sizeof(pt_watchdog_msg_), fmt, ap);
	va_end(ap);
	signal(SIGALRM, pt_watchdog_handler_);
	alarm((unsigned)pt_env_ulong("BP_WATCHDOG_S", seconds));
}

static inline void pt_watchdog_disarm(void)
{
	alarm(0);
}

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
