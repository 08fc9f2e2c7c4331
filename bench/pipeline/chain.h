/* SPDX-License-Identifier: MIT */
/*
 * chain.h - `bpbench pipeline --stages N` (pipeline/chain.c): a chain of
 * stages against one stage doing the same work, a serial stage against a
 * mutex section. Prints its tables and HEADLINE; returns the exit status.
 */
#ifndef BPBENCH_PIPELINE_CHAIN_H
#define BPBENCH_PIPELINE_CHAIN_H

#include "pipeline/harness.h"

int pb_chain_main(const struct pb_opts *o, struct pb_producer *prod,
		  uint64_t iters);

#endif /* BPBENCH_PIPELINE_CHAIN_H */
