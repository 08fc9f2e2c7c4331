/* SPDX-License-Identifier: MIT */
/*
 * Library threads: signal mask, name, CPU, the application's start and stop
 * hooks.
 *
 * A process-directed signal (kill, a terminal's SIGINT, a timer's SIGALRM)
 * goes to any thread that does not block it. The application arranges
 * which of its threads take signals (often: all block them but one); a
 * library thread that inherited an open mask would take them instead, run
 * the application's handler in the middle of a worker pass, and interrupt
 * its sleeps. So every thread starts with them blocked: they are blocked
 * around pthread_create, the new thread inherits that mask, and the
 * caller's own mask is restored at once.
 *
 * Signals raised by a fault (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP,
 * SIGSYS) stay open: they go to the faulting thread only, so they cannot
 * stray, and a blocked one makes the kernel kill the process without
 * running the application's handler (a crash reporter, a sanitizer).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "src/base/thread.h"

struct boot {
	struct bpi_thread_spec s;
	char name[16]; /* the kernel keeps 15 characters */
};

static void *boot_main(void *arg)
{
	struct boot b = *(struct boot *)arg;
	void *ret;

	free(arg);
	/* a name is a courtesy: a failure changes nothing else */
	pthread_setname_np(pthread_self(), b.name);
	if (b.s.on_start)
		b.s.on_start(b.s.hook_ctx, b.s.role, b.s.index);
	ret = b.s.fn(b.s.arg);
	if (b.s.on_stop)
		b.s.on_stop(b.s.hook_ctx, b.s.role, b.s.index);
	return ret;
}

static void block_async_signals(sigset_t *set)
{
	static const int faults[] = {SIGSEGV, SIGBUS,  SIGFPE,
				     SIGILL,  SIGTRAP, SIGSYS};

	sigfillset(set);
	for (unsigned i = 0; i < sizeof(faults) / sizeof(faults[0]); i++)
		sigdelset(set, faults[i]);
}

int bpi_thread_start(pthread_t *t, const struct bpi_thread_spec *s)
{
	struct boot *b = malloc(sizeof(*b));
	pthread_attr_t attr;
	sigset_t block, old;
	int rc;

	if (!b)
		return -ENOMEM;
	b->s = *s;
	snprintf(b->name, sizeof(b->name), "%s", s->name ? s->name : "bp");
	rc = pthread_attr_init(&attr);
	if (rc) {
		free(b);
		return -rc;
	}
	if (s->cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(s->cpu, &set);
		pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
	}
	block_async_signals(&block);
	/* the new thread inherits the mask in force here */
	pthread_sigmask(SIG_BLOCK, &block, &old);
	rc = pthread_create(t, &attr, boot_main, b);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (rc)
		free(b);
	return -rc;
}
