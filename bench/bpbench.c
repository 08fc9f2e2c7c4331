/* SPDX-License-Identifier: MIT */
/*
 * bpbench - batchpipe's benchmark driver: the table of subcommands and the
 * dispatch to one of them. Each experiment lives in a folder of its own
 * (ring/, pipeline/, sweep/, locks/, app/, rdma/), the harness they share in
 * lab/, the queues that ring/ and pipeline/ compare in queues/ (see README.md).
 */
#include "lab/bpbench.h"

#include "bp_config.h"

#include <string.h>

#include <batchpipe/error.h>

struct bench_subcommand {
	const char *name;
	int (*main)(int argc, char **argv);
	const char *summary;
};

static const struct bench_subcommand bench_subcommands[] = {
	{"ring", bench_ring_main,
	 "bp_ring against rte_ring, moodycamel, ck_ring, wfcqueue, locks"},
	{"pipeline", bench_pipeline_main,
	 "bp_pipeline end to end: throughput, latency, idle CPU, wake-up"},
	{"sweep", bench_sweep_main, "batch-size sweeps of another subcommand"},
	{"locks", bench_locks_main,
	 "mutex vs spinlock vs lock-free job hand-offs (the 150x write-up)"},
	{"app", bench_app_main,
	 "a user's app: 4 producers, CRC32C of 256-byte jobs, ordered sink"},
#if BP_HAVE_RDMA
	{"rdma", bench_rdma_main,
	 "RDMA stage against raw libfabric: throughput, CPU/op, latency"},
	{"rdma-fill", bench_rdma_fill_main,
	 "the random fill: bp-target RDMA-writes pages, every byte verified"},
	{"rdma-target", bench_rdma_target_main,
	 "raw writes into bp-target against a plain busy-polling target"},
#endif
};

#define BENCH_NSUB (sizeof(bench_subcommands) / sizeof(bench_subcommands[0]))

static void bench_usage(FILE *f)
{
	fprintf(f, "usage: bpbench <subcommand> [options]   (bpbench "
		   "<subcommand> --help)\n"
		   "       bpbench --version\n"
		   "subcommands:\n");
	for (size_t i = 0; i < BENCH_NSUB; i++)
		fprintf(f, "  %-11s %s\n", bench_subcommands[i].name,
			bench_subcommands[i].summary);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		bench_usage(stderr);
		return BENCH_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "help")) {
		bench_usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
		/* the library it measures, as loaded */
		printf("bpbench %s\n", bp_version());
		return 0;
	}
	for (size_t i = 0; i < BENCH_NSUB; i++)
		if (!strcmp(argv[1], bench_subcommands[i].name))
			return bench_subcommands[i].main(argc - 1, argv + 1);
	fprintf(stderr, "bpbench: unknown subcommand '%s' (", argv[1]);
	for (size_t i = 0; i < BENCH_NSUB; i++)
		fprintf(stderr, "%s%s", i ? ", " : "",
			bench_subcommands[i].name);
	fprintf(stderr, ")\nbpbench: see bpbench --help\n");
	return BENCH_EXIT_USAGE;
}
