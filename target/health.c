/* SPDX-License-Identifier: MIT */
/*
 * health.c - bp-target keeping itself alive and stoppable when the
 * provider is not. libfabric 1.17's shm posts under a spinlock that lives
 * in the peer's shared region; a client killed while holding it leaves
 * every later call on that region spinning for ever, the daemon's rail
 * progress thread among them (inside fi_cq_read). Nothing can interrupt a
 * call that never returns, so the daemon
 *
 *   - watches each rail's progress thread (bp_rdma_node_rail_calls) and
 *     each fill worker (bp_rdma_worker_calls): one provider call that has
 *     not returned for --wedge-ms is logged, the thread is reported as
 *     wedged and new clients are refused (ERROR -EIO naming it) until it
 *     moves again, so an operator sees it before a client hangs;
 *   - bounds its stop: a watchdog thread armed when the stop begins; if the
 *     stop has not ended within --stop-timeout-ms (it cannot join a thread
 *     stuck inside the provider), it logs the step, closes the listening
 *     socket, removes the daemon's own shm files and exits with status 3;
 *   - sweeps /dev/shm every 10 s for the files of killed processes
 *     (bp_rdma_shm_sweep), its clients' included.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "target.h"

#define SWEEP_EVERY_NS (10ll * 1000000000ll)

/* One thread's count of provider calls (odd inside one), as last seen. */
struct call_watch {
	uint64_t calls; /* the count last seen */
	int64_t since;	/* when it was first seen at that value */
	bool wedged;	/* reported */
};

struct health {
	struct call_watch rail[BP_RDMA_MAX_RAILS];
	struct call_watch worker[BP_MAX_WORKERS]; /* the fill stage's */
	int64_t next_sweep;
};

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/*
 * One thread (what: "rail 0's progress thread", site: the call it is in):
 * the same odd count for --wedge-ms is a call that has not returned.
 */
static void watch(struct target *t, struct call_watch *w, uint64_t c,
		  int64_t now, const char *what, const char *site)
{
	if (c != w->calls || !(c & 1)) {
		if (w->wedged)
			tlog(t, 0, NULL,
			     "%s is back from the provider after %.1f s", what,
			     (double)(now - w->since) / 1e9);
		w->calls = c;
		w->since = now;
		w->wedged = false;
		return;
	}
	if (!w->wedged && now - w->since > (int64_t)t->o.wedge_ms * 1000000ll) {
		w->wedged = true;
		tlog(t, 0, NULL,
		     "WEDGED: %s has been inside %s for %.1f s (libfabric's "
		     "shm spins for ever on a lock a killed peer held); new "
		     "clients are refused, and a stop will end with status 3 "
		     "after --stop-timeout-ms",
		     what, site, (double)(now - w->since) / 1e9);
	}
}

static void watch_threads(struct target *t, struct health *h, int64_t now)
{
	const struct bp_rdma *r = t->filler ? filler_rdma(t->filler) : NULL;
	char what[64];
	uint64_t c;

	for (unsigned k = 0; t->node && k < t->o.rails; k++)
		if (bp_rdma_node_rail_calls(t->node, k, &c) == 0) {
			snprintf(what, sizeof(what),
				 "rail %u's progress thread", k);
			watch(t, &h->rail[k], c, now, what, "fi_cq_read");
		}
	for (unsigned w = 0; r && w < t->o.fill_workers; w++) {
		const char *site = NULL;

		if (bp_rdma_worker_calls(r, w, &c, &site) != 0)
			continue;
		snprintf(what, sizeof(what), "fill worker %u", w);
		watch(t, &h->worker[w], c, now, what,
		      site ? site : "a provider call");
	}
}

void health_tick(struct target *t)
{
	int64_t now = now_ns();
	struct health *h = t->health;

	if (!h) {
		h = t->health = calloc(1, sizeof(*h));
		if (!h)
			return;
	}
	watch_threads(t, h, now);
	if (now >= h->next_sweep) {
		int n = bp_rdma_shm_sweep();

		h->next_sweep = now + SWEEP_EVERY_NS;
		if (n > 0)
			tlog(t, 0, NULL,
			     "removed %d shm file(s) of processes that are "
			     "gone (/dev/shm/bp-PID-...)",
			     n);
	}
}

bool health_wedged(const struct target *t, char *why, size_t n)
{
	const struct health *h = t->health;

	for (unsigned k = 0; h && k < t->o.rails; k++)
		if (h->rail[k].wedged) {
			snprintf(why, n,
				 "daemon wedged: rail %u is stuck inside the "
				 "provider (fi_cq_read); restart it",
				 k);
			return true;
		}
	for (unsigned w = 0; h && w < t->o.fill_workers; w++)
		if (h->worker[w].wedged) {
			snprintf(why, n,
				 "daemon wedged: fill worker %u is stuck "
				 "inside the provider; restart it",
				 w);
			return true;
		}
	return false;
}

/* ------------------------------------------------------------ the stop */

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool ended;
	const char *_Atomic step;
	pthread_t thread;
	bool started;
} stop = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* The daemon's own shm files: bp-OURPID-... (the sweep leaves them). */
static void remove_own_shm_files(void)
{
	DIR *d = opendir("/dev/shm");
	struct dirent *e;
	char prefix[32];

	if (!d)
		return;
	snprintf(prefix, sizeof(prefix), "bp-%ld-", (long)getpid());
	while ((e = readdir(d)) != NULL)
		if (strncmp(e->d_name, prefix, strlen(prefix)) == 0)
			unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
}

static void *watchdog(void *arg)
{
	struct target *t = arg;
	struct timespec until;
	bool ended;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += t->o.stop_timeout_ms / 1000;
	until.tv_nsec += (long)(t->o.stop_timeout_ms % 1000) * 1000000l;
	if (until.tv_nsec >= 1000000000l) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000l;
	}
	pthread_mutex_lock(&stop.lock);
	while (!stop.ended && pthread_cond_timedwait(&stop.cond, &stop.lock,
						     &until) != ETIMEDOUT)
		;
	ended = stop.ended; /* a stop that ended at the deadline ended */
	pthread_mutex_unlock(&stop.lock);
	if (ended)
		return NULL;
	/* release first: a log line to a full stderr must not hold it up */
	if (t->lfd >= 0)
		close(t->lfd);
	remove_own_shm_files();
	fcntl(STDERR_FILENO, F_SETFL,
	      fcntl(STDERR_FILENO, F_GETFL) | O_NONBLOCK);
	/* relaxed: a name for the log; the stop thread may still move */
	tlog(t, 0, NULL,
	     "stop: still %s after %u ms: a thread is stuck inside the "
	     "provider and cannot be joined; exiting without it (status 3), "
	     "shm files and the control port released",
	     atomic_load_explicit(&stop.step, memory_order_relaxed),
	     t->o.stop_timeout_ms);
	_exit(3);
}

void health_stop_begin(struct target *t)
{
	pthread_condattr_t ca;
	sigset_t all, old;

	/* the deadline on the monotonic clock: a clock step moves nothing */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&stop.cond, &ca);
	pthread_condattr_destroy(&ca);
	/* the watchdog takes no signals: the loop's signalfd has them */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	stop.started = pthread_create(&stop.thread, NULL, watchdog, t) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!stop.started)
		tlog(t, 0, NULL,
		     "stop: no watchdog thread: the stop is not "
		     "bounded");
}

void health_stop_step(const char *step)
{
	/* relaxed: read by the watchdog for its log line only */
	atomic_store_explicit(&stop.step, step, memory_order_relaxed);
}

void health_stop_end(struct target *t)
{
	pthread_mutex_lock(&stop.lock);
	stop.ended = true;
	pthread_cond_signal(&stop.cond);
	pthread_mutex_unlock(&stop.lock);
	if (stop.started)
		pthread_join(stop.thread, NULL);
	free(t->health);
	t->health = NULL;
}
