/* SPDX-License-Identifier: MIT */
/*
 * opts.h - one command-line parser for every subcommand.
 *
 * A subcommand declares its options once, in a table of struct bench_opt:
 * the name, what its value looks like, a handler and the help text. The
 * options every experiment shares (--runs, --ms, --quick, --csv, --json,
 * --out, --name, --seed, --cpus, --help) have their handler and validation
 * here and are listed in that table with the BENCH_OPT_* macros, each with
 * the subcommand's own help text (their defaults differ). The usage text is
 * generated from the table, so an option cannot be accepted and missing
 * from --help, or the reverse.
 *
 * Bad usage (an unknown option, a missing or bad value, a stray argument)
 * prints one line saying what is wrong (for a bad value: with the option's
 * help, which says the range or the format), then "see bpbench SUB --help",
 * on stderr, and the subcommand exits with BENCH_EXIT_USAGE (2). --out DIR
 * is made and tried with a file before the experiment runs.
 */
#ifndef BPBENCH_OPTS_H
#define BPBENCH_OPTS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "lab/cpus.h"
#include "lab/errors.h"

struct bench_args;

/*
 * An option's handler: arg is its value (NULL for a flag). Returns 0, -1
 * for a bad value (the parser reports "bad value 'X' for --name"), or -2
 * when it printed its own message.
 */
typedef int bench_opt_fn(struct bench_args *a, const char *arg);

struct bench_opt {
	const char *name; /* without the leading "--" */
	const char *arg;  /* what the value looks like ("N"); NULL: a flag */
	bench_opt_fn *set;
	const char *help; /* lines separated by '\n', indented for you */
};

struct bench_cmd {
	const char *name; /* the subcommand: "ring" */
	/* what follows "usage: bpbench NAME" (may hold more lines); NULL:
	 * "[options]" */
	const char *synopsis;
	const char *about;	      /* what it does, printed under "usage:" */
	const struct bench_opt *opts; /* ends with BENCH_OPT_END */
	const char *epilog; /* printed after the options, may be NULL */
	unsigned max_runs;  /* the largest --runs */
};

/* What the common options set; ctx is the subcommand's own options. */
struct bench_args {
	const struct bench_cmd *cmd;
	void *ctx;
	char prog[64]; /* "bpbench ring", for messages */
	unsigned runs, ms;
	bool runs_set, ms_set; /* given: --quick leaves them alone */
	bool quick, csv, json;
	const char *out;  /* --out DIR, or NULL */
	const char *name; /* --name, default cmd->name */
	uint64_t seed;
	int cpus[BENCH_MAX_CPUS];
	int ncpus; /* after parsing: the --cpus list, or every allowed CPU */
};

/* The shared options' handlers (use them through the macros below). */
bench_opt_fn bench_opt_runs, bench_opt_ms, bench_opt_quick, bench_opt_csv,
	bench_opt_json, bench_opt_out, bench_opt_name, bench_opt_seed,
	bench_opt_cpus;

#define BENCH_OPT_RUNS(help)                                                   \
	{                                                                      \
		"runs", "N", bench_opt_runs, help                              \
	}
#define BENCH_OPT_MS(help)                                                     \
	{                                                                      \
		"ms", "N", bench_opt_ms, help                                  \
	}
#define BENCH_OPT_QUICK(help)                                                  \
	{                                                                      \
		"quick", NULL, bench_opt_quick, help                           \
	}
#define BENCH_OPT_CSV(help)                                                    \
	{                                                                      \
		"csv", NULL, bench_opt_csv, help                               \
	}
#define BENCH_OPT_JSON(help)                                                   \
	{                                                                      \
		"json", NULL, bench_opt_json, help                             \
	}
#define BENCH_OPT_SEED(help)                                                   \
	{                                                                      \
		"seed", "N", bench_opt_seed, help                              \
	}
#define BENCH_OPT_CPUS(help)                                                   \
	{                                                                      \
		"cpus", "LIST", bench_opt_cpus, help                           \
	}
/*
 * --out and --name with the shared handlers; the _HELP forms for a
 * subcommand that writes more than DIR/NAME.csv or names its files itself.
 */
#define BENCH_OPT_OUT_HELP(help)                                               \
	{                                                                      \
		"out", "DIR", bench_opt_out, help                              \
	}
#define BENCH_OPT_OUT                                                          \
	BENCH_OPT_OUT_HELP("print the usual output and also write the CSV to " \
			   "DIR/NAME.csv\n"                                    \
			   "(DIR is created)")
#define BENCH_OPT_NAME_HELP(help)                                              \
	{                                                                      \
		"name", "NAME", bench_opt_name, help                           \
	}
#define BENCH_OPT_NAME                                                         \
	BENCH_OPT_NAME_HELP("file name for --out, without .csv (default: the " \
			    "subcommand)")
#define BENCH_OPT_HELP                                                         \
	{                                                                      \
		"help", NULL, NULL, "this text"                                \
	}
#define BENCH_OPT_END                                                          \
	{                                                                      \
		NULL, NULL, NULL, NULL                                         \
	}

/*
 * Set a's defaults (runs 5, ms 100, seed 1, nothing else) for subcommand
 * cmd with its own options ctx; the subcommand then sets its own defaults
 * of runs and ms before bench_opts_parse().
 */
void bench_args_init(struct bench_args *a, const struct bench_cmd *cmd,
		     void *ctx);

/*
 * Parse argv (argv[0] is the subcommand's name). Returns BENCH_OPTS_RUN
 * when the subcommand should run, else the exit status to return: 0 after
 * --help (usage on stdout), BENCH_EXIT_USAGE after bad usage.
 * --csv with --json is bad usage. Without --cpus, a->cpus is every CPU
 * this process may use. Nothing is made on disk here: see
 * bench_opts_ready.
 */
#define BENCH_OPTS_RUN (-1)
int bench_opts_parse(struct bench_args *a, int argc, char **argv);

/*
 * The last call of a subcommand's parsing, after its own checks of one
 * option against another: make --out DIR and try it with a file, so that
 * a directory that cannot hold the results fails before the experiment
 * runs, and bad usage leaves no directory behind. Returns BENCH_OPTS_RUN
 * or BENCH_EXIT_USAGE.
 */
int bench_opts_ready(const struct bench_args *a);

/* The generated usage text. */
void bench_opts_usage(const struct bench_cmd *cmd, FILE *f);

/*
 * For checks after parsing (one option against another): print
 * "bpbench CMD: <message>" and where the usage is on stderr; returns
 * BENCH_EXIT_USAGE for the subcommand to return.
 */
int bench_usage_error(const struct bench_args *a, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif /* BPBENCH_OPTS_H */
