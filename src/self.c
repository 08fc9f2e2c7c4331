/* SPDX-License-Identifier: MIT */
/*
 * The calling thread's pipeline (see self.h). A plain thread-local: only
 * the thread itself writes or reads it, so it needs no atomics. The
 * default TLS model (a call to __tls_get_addr from a shared library) is
 * fine for cold paths and keeps the library loadable with dlopen.
 */
#include "src/self.h"

static _Thread_local const struct bp_pipeline *self;

void bpi_self_set(const struct bp_pipeline *p)
{
	self = p;
}

bool bpi_self_is(const struct bp_pipeline *p)
{
	return self == p;
}
