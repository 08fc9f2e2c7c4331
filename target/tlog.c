/* SPDX-License-Identifier: MIT */
/*
 * tlog.c - bp-target's log lines: one line per event on stderr, each
 * naming the client it is about, so that an operator can tell which
 * connection was dropped and why. stdout carries only the "listening" line
 * that tests and scripts parse.
 */
#include <stdarg.h>
#include <stdio.h>

#include "target.h"

void tlog(const struct target *t, int verbose_only, const struct client *c,
	  const char *fmt, ...)
{
	char line[2048];
	va_list ap;

	if (verbose_only && !t->o.verbose)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* one fprintf per line: stderr is unbuffered, and a single write
	 * keeps lines from the library's threads from interleaving */
	if (c != NULL)
		fprintf(stderr, "bp-target: %s: %s\n", client_name(c), line);
	else
		fprintf(stderr, "bp-target: %s\n", line);
}

void tlog_lib(void *ctx, enum bp_log_level level, const char *msg)
{
	const struct target *t = ctx;
	static const char *const names[] = {"error", "warning", "info"};

	if (level == BP_LOG_INFO && !t->o.verbose)
		return;
	fprintf(stderr, "bp-target: rdma %s: %s\n",
		(unsigned)level <= BP_LOG_INFO ? names[level] : "log", msg);
}
