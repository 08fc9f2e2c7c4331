/* SPDX-License-Identifier: MIT */
/* batchpipe/batchpipe.h - the whole public API. */
#ifndef BATCHPIPE_BATCHPIPE_H
#define BATCHPIPE_BATCHPIPE_H

#include <batchpipe/version.h>
#include <batchpipe/error.h>
#include <batchpipe/wait.h>
#include <batchpipe/ring.h>
#include <batchpipe/job.h>
#include <batchpipe/stage.h>
#include <batchpipe/pipeline.h>
#include <batchpipe/pool.h>

#endif /* BATCHPIPE_BATCHPIPE_H */
