/* SPDX-License-Identifier: MIT */
/* batchpipe/error.h - error codes and their text. */
#ifndef BATCHPIPE_ERROR_H
#define BATCHPIPE_ERROR_H

#include <errno.h> /* the API returns negative errno values */

#ifdef __cplusplus
extern "C" {
#endif

#pragma GCC visibility push(default)

/*
 * Text for a return value of a batchpipe call: a negative errno (-EPIPE ...)
 * or 0. Positive values are taken as errno values too. Never returns NULL;
 * the string is static and must not be freed. Thread-safe.
 */
const char *bp_strerror(int err);

/* Library version as "MAJOR.MINOR.PATCH". */
const char *bp_version(void);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif /* BATCHPIPE_ERROR_H */
