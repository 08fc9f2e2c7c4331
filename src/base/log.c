/* SPDX-License-Identifier: MIT */
/* The library's one logger (log.h). */
#include <stdarg.h>
#include <stdio.h>

#include "src/base/log.h"

void bpi_log(const struct bpi_logger *l, enum bp_log_level lvl, const char *fmt,
	     ...)
{
	char msg[512];
	va_list ap;

	if (!l || !l->fn)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	l->fn(l->ctx, lvl, msg);
}
