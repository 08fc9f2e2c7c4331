/* SPDX-License-Identifier: MIT */
/*
 * tests/bp_test.h - small helpers shared by the test programs.
 *
 * Worker threads never call cmocka asserts (cmocka is not thread-safe and
 * longjmps out of the test): they count failures with bp_test_fail() and the
 * main thread asserts bp_test_failures() == 0.
 */
#ifndef BP_TESTS_BP_TEST_H
#define BP_TESTS_BP_TEST_H

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Build-time sanitizer detection: sanitized runs get smaller defaults. */
#if defined(__SANITIZE_THREAD__)
#define BPT_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define BPT_TSAN 1
#endif
#endif
#ifndef BPT_TSAN
#define BPT_TSAN 0
#endif
#if defined(__SANITIZE_ADDRESS__)
#define BPT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BPT_ASAN 1
#endif
#endif
#ifndef BPT_ASAN
#define BPT_ASAN 0
#endif

/* The exit status meson reads as "skipped". */
#define BPT_SKIP 77

#ifndef BPT_STRESS_SCALE
#define BPT_STRESS_SCALE 1
#endif

/* An item: (producer id, sequence) packed so that bit 0 stays clear. */
static inline void *bpt_item(unsigned pid, uint64_t seq)
{
	return (void *)(uintptr_t)(((seq << 8) | (pid & 0xffu)) << 1);
}

static inline unsigned bpt_item_pid(const void *item)
{
	return (unsigned)(((uintptr_t)item >> 1) & 0xffu);
}

static inline uint64_t bpt_item_seq(const void *item)
{
	return (uint64_t)((uintptr_t)item >> 9);
}

static inline int64_t bpt_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void bpt_sleep_ns(int64_t ns)
{
	struct timespec ts = {(time_t)(ns / 1000000000),
			      (long)(ns % 1000000000)};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static inline void bpt_sleep_ms(unsigned ms)
{
	bpt_sleep_ns((int64_t)ms * 1000000);
}

/*
 * A positive integer from the environment, else `def`. Lets a slow run
 * (TSAN, valgrind) shorten a test: BP_STRESS_ITEMS=10000 meson test ...
 */
static inline unsigned long bpt_env_ulong(const char *name, unsigned long def)
{
	const char *s = getenv(name);
	char *end;
	unsigned long v;

	if (s == NULL || *s == '\0')
		return def;
	errno = 0;
	v = strtoul(s, &end, 0);
	if (errno != 0 || *end != '\0' || v == 0) {
		fprintf(stderr, "ignoring %s=%s (want a positive integer)\n",
			name, s);
		return def;
	}
	return v;
}

/* Failure bookkeeping for worker threads. */
extern atomic_uint bpt_failures;

#define bp_test_fail(...) bpt_fail_at(__FILE__, __LINE__, __VA_ARGS__)

static inline void bpt_fail_at(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static inline void bpt_fail_at(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	/* relaxed: the main thread reads the count after joining the workers */
	if (atomic_fetch_add_explicit(&bpt_failures, 1, memory_order_relaxed) <
	    10) {
		fprintf(stderr, "FAIL %s:%d: ", file, line);
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
		fputc('\n', stderr);
	}
}

static inline unsigned bp_test_failures(void)
{
	return atomic_load_explicit(&bpt_failures, memory_order_relaxed);
}

static inline void bp_test_reset_failures(void)
{
	atomic_store_explicit(&bpt_failures, 0, memory_order_relaxed);
}

/*
 * Watchdog: a hang (lost wake-up, livelock, lost item that a consumer waits
 * for) must fail the test with a message, not eat the CI timeout silently.
 * bpt_watchdog_arm(s, what) starts or re-arms it; _disarm stops counting.
 * The environment variable BP_WATCHDOG_S overrides every limit.
 */
struct bpt_watchdog {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int64_t deadline_ns; /* 0: disarmed */
	char what[160];
	int started;
};

extern struct bpt_watchdog bpt_wd;

/* Exactly one file per program says BPT_DEFINE_GLOBALS; at file scope. */
#define BPT_DEFINE_GLOBALS                                                     \
	atomic_uint bpt_failures;                                              \
	struct bpt_watchdog bpt_wd = {PTHREAD_MUTEX_INITIALIZER,               \
				      PTHREAD_COND_INITIALIZER, 0, "", 0};     \
	char bpt_alarm_msg_[256]

static inline void *bpt_watchdog_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&bpt_wd.lock);
	for (;;) {
		int64_t now = bpt_now_ns();

		if (bpt_wd.deadline_ns != 0 && now >= bpt_wd.deadline_ns) {
			fprintf(stderr,
				"WATCHDOG: '%s' did not finish in time "
				"(hang: lost wake-up or lost item?)\n",
				bpt_wd.what);
			fflush(stderr);
			_exit(1);
		}
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1; /* poll once a second; CLOCK_REALTIME for the
				   condvar */
		pthread_cond_timedwait(&bpt_wd.cond, &bpt_wd.lock, &ts);
	}
	return NULL;
}

static inline void bpt_watchdog_arm(unsigned seconds, const char *fmt, ...)
{
	va_list ap;
	pthread_t t;

	pthread_mutex_lock(&bpt_wd.lock);
	if (!bpt_wd.started) {
		if (pthread_create(&t, NULL, bpt_watchdog_main, NULL) == 0) {
			pthread_detach(t);
			bpt_wd.started = 1;
		}
	}
	va_start(ap, fmt);
	vsnprintf(bpt_wd.what, sizeof(bpt_wd.what), fmt, ap);
	va_end(ap);
	/* BP_WATCHDOG_S replaces every limit (slow checkers, quick bisects). */
	seconds = (unsigned)bpt_env_ulong("BP_WATCHDOG_S", seconds);
	bpt_wd.deadline_ns = bpt_now_ns() + (int64_t)seconds * 1000000000;
	pthread_mutex_unlock(&bpt_wd.lock);
}

static inline void bpt_watchdog_disarm(void)
{
	pthread_mutex_lock(&bpt_wd.lock);
	bpt_wd.deadline_ns = 0;
	pthread_mutex_unlock(&bpt_wd.lock);
}

/*
 * The same watchdog without a thread of its own, for the programs that
 * count their threads (the pipeline tests) or fork: alarm(2) and an
 * async-signal-safe handler. bpt_alarm_arm(s, what) starts or re-arms it,
 * _disarm stops it; BP_WATCHDOG_S overrides the limit here too.
 */
extern char bpt_alarm_msg_[256];

static inline void bpt_alarm_handler_(int sig)
{
	static const char head[] = "WATCHDOG: did not finish in time: ";
	ssize_t rc;

	(void)sig;
	rc = write(2, head, sizeof(head) - 1);
	rc = write(2, bpt_alarm_msg_, strnlen(bpt_alarm_msg_, 255));
	rc = write(2, "\n", 1);
	(void)rc;
	_exit(1);
}

static inline void bpt_alarm_arm(unsigned seconds, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static inline void bpt_alarm_arm(unsigned seconds, const char *fmt, ...)
{
	va_list ap;

	alarm(0);
	va_start(ap, fmt);
	vsnprintf(bpt_alarm_msg_, sizeof(bpt_alarm_msg_), fmt, ap);
	va_end(ap);
	signal(SIGALRM, bpt_alarm_handler_);
	alarm((unsigned)bpt_env_ulong("BP_WATCHDOG_S", seconds));
}

static inline void bpt_alarm_disarm(void)
{
	alarm(0);
}

static inline pid_t bpt_gettid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/*
 * Scheduler state of one of our threads ('R', 'S', ...), from
 * /proc/self/task/TID/stat; '?' if it cannot be read.
 */
static inline char bpt_thread_state(pid_t tid)
{
	char path[64], buf[512];
	const char *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	f = fopen(path, "r");
	if (f == NULL)
		return '?';
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* the command name may hold spaces */
	if (p == NULL || p[1] != ' ')
		return '?';
	return p[2];
}

/*
 * Best effort: wait up to timeout_ms until every thread in tids[] (0 = not
 * yet known) is asleep. Returns 1 if they all were seen sleeping at once.
 * Used only to make "a sleeper is woken" tests exercise real sleeps; the
 * tests stay correct (just weaker) if it returns 0.
 */
static inline int bpt_wait_sleeping(_Atomic pid_t *tids, unsigned n,
				    unsigned timeout_ms)
{
	int64_t end = bpt_now_ns() + (int64_t)timeout_ms * 1000000;

	do {
		unsigned asleep = 0;

		for (unsigned i = 0; i < n; i++) {
			pid_t t = atomic_load_explicit(&tids[i],
						       memory_order_acquire);

			if (t != 0 && bpt_thread_state(t) == 'S')
				asleep++;
		}
		if (asleep == n)
			return 1;
		bpt_sleep_ms(1);
	} while (bpt_now_ns() < end);
	return 0;
}

/*
 * libfabric's shm provider keeps a file per endpoint in /dev/shm, named
 * after the endpoint ("bp-PID-RANDOM:N:M" for the RDMA stage's, "PID:N:M"
 * by default), and removes it at exit; a process killed with SIGKILL
 * leaves them behind (16 MiB each). Tests that kill a peer remove what it
 * left.
 */
static inline void bpt_shm_cleanup(long pid)
{
	char mine[40], plain[32], path[300];
	struct dirent *e;
	DIR *d = opendir("/dev/shm");
	size_t nm, np;

	if (!d)
		return;
	nm = (size_t)snprintf(mine, sizeof(mine), "bp-%ld-", pid);
	np = (size_t)snprintf(plain, sizeof(plain), "%ld:", pid);
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, mine, nm) ||
		    !strncmp(e->d_name, plain, np)) {
			snprintf(path, sizeof(path), "/dev/shm/%s", e->d_name);
			unlink(path);
		}
	closedir(d);
}

#endif /* BP_TESTS_BP_TEST_H */
