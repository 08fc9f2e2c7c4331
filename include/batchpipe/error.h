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

/*
 * The linked library's version as "MAJOR.MINOR.PATCH", and as one number
 * encoded like BP_VERSION (batchpipe/version.h, the headers' version):
 * compare the two to learn whether the library is the one compiled against.
 * Any thread.
 */
const char *bp_version(void);
unsigned bp_version_number(void);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif /* BATCHPIPE_ERROR_H */
