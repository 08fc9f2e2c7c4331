/* SPDX-License-Identifier: MIT */
/*
 * Where the library says something: the application's log callback of the
 * pipeline, the RDMA stage or node, or none. Cold paths only.
 */
#ifndef BP_SRC_BASE_LOG_H
#define BP_SRC_BASE_LOG_H

#include <batchpipe/pipeline.h> /* enum bp_log_level */

struct bpi_logger {
	void (*fn)(void *ctx, enum bp_log_level level, const char *msg);
	void *ctx;
};

/* Format (at most 511 bytes) and hand to l->fn; nothing if l or fn is NULL. */
void bpi_log(const struct bpi_logger *l, enum bp_log_level lvl, const char *fmt,
	     ...) __attribute__((format(printf, 3, 4)));

#endif
