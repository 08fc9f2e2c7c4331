/* SPDX-License-Identifier: MIT */
/*
 * bpbench.h - what every bpbench subcommand shares: the subcommand entry
 * points and the harness in lab/, one header per concept:
 *
 *   clock.h    the clock and sleeping
 *   cpus.h     CPU lists and pinning
 *   stats.h    medians, min, max, percentiles of samples
 *   hist.h     log-linear latency histograms
 *   lists.h    numbers and lists from the command line
 *   rand.h     the seeded generator, shuffles and run orders
 *   errors.h   dying on broken invariants, allocation, exit statuses
 *   backoff.h  the retry policy of every queue when full or empty
 *   opts.h     the shared option parser and usage text
 *   csv.h      output: --csv, --json, the table, --out DIR
 *   csvread.h  reading another subcommand's CSV
 *   table.h    aligned text tables
 *
 * plot.h (gnuplot) and queues.h (the ring's competitors) are included by
 * the experiments that use them.
 */
#ifndef BPBENCH_H
#define BPBENCH_H

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>

#include "lab/backoff.h"
#include "lab/clock.h"
#include "lab/cpus.h"
#include "lab/csv.h"
#include "lab/csvread.h"
#include "lab/errors.h"
#include "lab/hist.h"
#include "lab/lists.h"
#include "lab/opts.h"
#include "lab/rand.h"
#include "lab/stats.h"
#include "lab/table.h"

/* Subcommands: argv[0] is the subcommand name; return the exit status. */
int bench_ring_main(int argc, char **argv);
int bench_pipeline_main(int argc, char **argv);
int bench_sweep_main(int argc, char **argv);
int bench_locks_main(int argc, char **argv);
int bench_app_main(int argc, char **argv);
/* Built only with the RDMA stage (BP_HAVE_RDMA in bp_config.h). */
int bench_rdma_main(int argc, char **argv);
int bench_rdma_fill_main(int argc, char **argv);
int bench_rdma_target_main(int argc, char **argv);

#endif /* BPBENCH_H */
