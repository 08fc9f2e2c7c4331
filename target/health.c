/* SPDX-License-Identifier: MIT */
/*
 * health.c - bp-target keeping itself alive and stoppable when the
 * provider is not. libfabric 1.17's shm posts under a spinlock that lives
 * in the peer's shared region; a client killed while holding it leaves
 * every later call on that region spinning for ever, the daemon's rail
 * progress thread among them (inside fi_cq_read). Nothing can interrupt a
 * call that never returns, so the daemon
 *
 *   - watches each rail's progress thread (bp_rdma_node_rail_calls): one
 *     provider call that has not returned for --wedge-ms is logged, the
 *     rail is reported as wedged and new clients are refused (ERROR -EIO
 *     naming it) until it moves again, so an operator sees it before a
 *     client hangs;
 *   - bounds its stop: a watchdog thread armed when the stop begins; if the
 *     stop has not ended within --stop-timeout-ms (it cannot join a thread
 *     stuck inside the provider), it logs the step, closes the listening
 *     socket, removes the daemon's own shm files and exits with status 3;
 *   - sweeps /dev/shm every 10 s for the files of killed processes
 *     (bp_rdma_shm_sweep), its clients' included.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "target.h"

#define SWEEP_EVERY_NS (10ll * 1000000000ll)

struct rail_watch {
	uint64_t calls; /* the count last seen */
	int64_t since;	/* when it was first seen odd and unchanged */
	bool wedged;	/* reported */
};

struct health {
	struct rail_watch rail[BP_RDMA_MAX_RAILS];
	int64_t next_sweep;
};

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static void watch_rails(struct target *t, struct health *h, int64_t now)
{
	for (unsigned k = 0; k < t->o.rails; k++) {
		struct rail_watch *w = &h->rail[k];
		uint64_t c;

		if (bp_rdma_node_rail_calls(t->node, k, &c) != 0)
			continue;
		if (c != w->calls || !(c & 1)) {
			if (w->wedged)
				tlog(t, 0, NULL,
				     "rail %u: its progress thread is back "
				     "from the provider after %.1f s",
				     k, (double)(now - w->since) / 1e9);
			w->calls = c;
			w->since = now;
			w->wedged = false;
			continue;
		}
		if (!w->wedged &&
		    now - w->since > (int64_t)t->o.wedge_ms * 1000000ll) {
			w->wedged = true;
			tlog(t, 0, NULL,
			     "rail %u: WEDGED: its progress thread has been "
			     "inside fi_cq_read for %.1f s (libfabric's shm "
			     "spins for ever on a lock a killed peer held); "
			     "new clients are refused, and a stop will end "
			     "with status 3 after --stop-timeout-ms",
			     k, (double)(now - w->since) / 1e9);
		}
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
	if (t->node)
		watch_rails(t, h, now);
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
} stop = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

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
	int rc = 0;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += t->o.stop_timeout_ms / 1000;
	until.tv_nsec += (long)(t->o.stop_timeout_ms % 1000) * 1000000l;
	if (until.tv_nsec >= 1000000000l) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000l;
	}
	pthread_mutex_lock(&stop.lock);
	while (!stop.ended && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&stop.cond, &stop.lock, &until);
	pthread_mutex_unlock(&stop.lock);
	if (rc != ETIMEDOUT)
		return NULL;
	/* relaxed: a name for the log; the stop thread may still move */
	tlog(t, 0, NULL,
	     "stop: still %s after %u ms: a thread is stuck inside the "
	     "provider and cannot be joined; exiting without it (status 3), "
	     "shm files and the control port released",
	     atomic_load_explicit(&stop.step, memory_order_relaxed),
	     t->o.stop_timeout_ms);
	if (t->lfd >= 0)
		close(t->lfd);
	remove_own_shm_files();
	_exit(3);
}

void health_stop_begin(struct target *t)
{
	sigset_t all, old;

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
