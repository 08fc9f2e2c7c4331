/* SPDX-License-Identifier: MIT */
/*
 * sweep.h - what the parts of `bpbench sweep` share: the presets' shape,
 * the parsed options, the results grid, and the calls between the parts
 * (in this folder: sweep.c the subcommand and its options, presets.c the
 * presets, child.c one child process, csv.c its CSV, run.c the points and
 * the interleaved runs, report.c the table, CSV and plot).
 */
#ifndef BPBENCH_SWEEP_H
#define BPBENCH_SWEEP_H

#include <stddef.h>
#include <stdio.h>

#include "lab/bpbench.h"

#define BENCH_CMD "bpbench sweep"

#define SW_MAX_B     32
#define SW_MAX_P2    16
#define SW_MAX_RUNS  1000
#define SW_MAX_ARGS  256
#define SW_MAX_ROWS  4096
#define SW_MAX_COLS  128
#define SW_NAME_LEN  64
#define SW_MAX_BOPTS 2
/* a child's deadline, seconds: generous, it catches hangs, not slowness */
#define SW_CHILD_TIMEOUT     600
#define SW_MAX_CHILD_TIMEOUT 604800

/*
 * What a preset knows about its subcommand: the options that give one
 * point, which option(s) carry B, and where throughput and p99 are.
 */
struct sw_preset {
	const char *sub;
	const char *param;		 /* B's name in the output */
	const char *bopts[SW_MAX_BOPTS]; /* child options set to B */
	const char *fixed;		 /* child options, space separated */
	const char *tput;		 /* throughput column */
	const char *p99[2];		 /* p99 columns, the first found wins */
	const char *rows;		 /* COL=VALUE row filter, or NULL */
	const char *quick_ms;		 /* the child's own quick --ms */
	const char *p99_note;		 /* what p99 is or why none; NULL */
	int rdma;			 /* depth and provider are chosen */
};

/* The presets (presets.c): the one for subcommand `sub`, or NULL. */
const struct sw_preset *sw_preset_find(const char *sub);

struct sw_opts {
	const struct sw_preset *preset; /* NULL: the generic form */
	const char *sub;
	char param[SW_NAME_LEN]; /* B's name in the output */
	const char *bopts[SW_MAX_BOPTS];
	int nbopts;
	char bopt_buf[SW_NAME_LEN];
	unsigned b[SW_MAX_B];
	int nb;
	char p2name[SW_NAME_LEN];
	char p2buf[1024];
	const char *p2[SW_MAX_P2];
	int np2; /* 0: no second parameter */
	const char *tput, *p99_user;
	const char *p99[2];
	char rows_col[SW_NAME_LEN];
	const char *rows_val;
	char fixed_buf[512];
	char *fixed[32];
	int nfixed;
	char provider[32]; /* rdma: "--providers" value, "" if extras set it */
	char depth[16];	   /* rdma: "--depth" value, "" if param2 is depth */
	char **extra;
	int nextra;
	struct bench_args a;	/* runs, seed, quick, csv, out, name */
	unsigned child_timeout; /* seconds a child may run */
	int b_set, param_set;	/* --batches, --param given */
	char name_buf[SW_NAME_LEN + 8];
};

/* The column names found in the child's CSV (the same in every child). */
struct sw_cols {
	char tput[SW_NAME_LEN], p99[SW_NAME_LEN]; /* p99 "": none */
	int known;
};

struct sw_results {
	int runs, nb, np;   /* np: second-parameter values, at least 1 */
	double *tput, *p99; /* [run][p2][b] */
	struct sw_cols cols;
};

static inline double *sw_cell(double *a, const struct sw_results *r, int run,
			      int p2, int b)
{
	return &a[((size_t)run * (size_t)r->np + (size_t)p2) * (size_t)r->nb +
		  (size_t)b];
}

/* child.c */
#define SW_SPAWN_TIMEOUT (-2) /* sw_spawn: killed at its deadline */
int sw_spawn(char *const *args, char **out, FILE *errf, unsigned timeout_s);
void sw_print_cmd(FILE *f, char *const *args);
void sw_dump_stderr(FILE *errf);

/* csv.c */
#define SW_BAD_COLUMN (-3) /* sw_parse_csv: --tput, --p99 or --rows names
			      no column of the child's CSV */
int sw_parse_csv(const struct sw_opts *o, char *text, struct sw_cols *cols,
		 double *tput, double *p99);

/* run.c */
/*
 * A sweep that failed on bad usage: a column the options name is not in
 * the child's CSV, or the child itself exited 2 (a bad option after --).
 * sw_rdma_provider and sw_sweep return it; bpbench sweep exits 2 then.
 */
#define SW_USAGE (-4) /* unlike the -2s of sw_spawn and sw_parse_csv */
void sw_end_progress(void); /* end an open progress line before a message */
void sw_args(const struct sw_opts *o, unsigned b, int p2, char **args,
	     char *bval, size_t bval_len);
int sw_rdma_provider(struct sw_opts *o);
int sw_sweep(const struct sw_opts *o, struct sw_results *r);

/* report.c: what the printers get (bench_emit's ctx) */
struct sw_report {
	const struct sw_opts *o;
	const struct sw_results *r;
};

void sw_print_table(FILE *f, const void *report);
void sw_print_csv(FILE *f, const void *report);
int sw_write_out(const struct sw_opts *o, const struct sw_results *r);

#endif /* BPBENCH_SWEEP_H */
