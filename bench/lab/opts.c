/* SPDX-License-Identifier: MIT */
/*
 * opts.c - the shared command-line parser: getopt_long over the
 * subcommand's option table, the shared options' validation, the messages
 * for bad usage and the generated usage text.
 */
#include "lab/opts.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lab/lists.h"
#include "lab/plot.h"

#define BENCH_MAX_OPTS 64
/* getopt_long's val for table entry i: above every character */
#define BENCH_OPT_VAL0 256

void bench_args_init(struct bench_args *a, const struct bench_cmd *cmd,
		     void *ctx)
{
	memset(a, 0, sizeof(*a));
	a->cmd = cmd;
	a->ctx = ctx;
	snprintf(a->prog, sizeof(a->prog), "bpbench %s", cmd->name);
	a->runs = 5;
	a->ms = 100;
	a->seed = 1;
	a->name = cmd->name;
}

int bench_opt_runs(struct bench_args *a, const char *arg)
{
	if (bench_parse_uint(arg, &a->runs, 1, a->cmd->max_runs))
		return -1;
	a->runs_set = true;
	return 0;
}

int bench_opt_ms(struct bench_args *a, const char *arg)
{
	if (bench_parse_uint(arg, &a->ms, 1, 600000))
		return -1;
	a->ms_set = true;
	return 0;
}

int bench_opt_quick(struct bench_args *a, const char *arg)
{
	(void)arg;
	a->quick = true;
	return 0;
}

int bench_opt_csv(struct bench_args *a, const char *arg)
{
	(void)arg;
	a->csv = true;
	return 0;
}

int bench_opt_json(struct bench_args *a, const char *arg)
{
	(void)arg;
	a->json = true;
	return 0;
}

int bench_opt_out(struct bench_args *a, const char *arg)
{
	/* the plots' gnuplot scripts quote their paths with ' */
	if (!*arg || strchr(arg, '\'') || strlen(arg) >= 4000) {
		fprintf(stderr,
			"%s: bad value '%s' for --out DIR: a directory, without "
			"a ' and shorter than 4000 bytes\n",
			a->prog, arg);
		return -2;
	}
	a->out = arg;
	return 0;
}

int bench_opt_name(struct bench_args *a, const char *arg)
{
	/* a file name, not a path: --out says where */
	if (!*arg || strchr(arg, '/') || !strcmp(arg, ".") ||
	    !strcmp(arg, ".."))
		return -1;
	a->name = arg;
	return 0;
}

int bench_opt_seed(struct bench_args *a, const char *arg)
{
	unsigned v;

	if (bench_parse_uint(arg, &v, 0, UINT32_MAX))
		return -1;
	a->seed = v;
	return 0;
}

int bench_opt_cpus(struct bench_args *a, const char *arg)
{
	a->ncpus = bench_cpus_parse(arg, a->cpus, BENCH_MAX_CPUS);
	if (a->ncpus < 0) {
		fprintf(stderr,
			"%s: bad --cpus '%s' (syntax, or a CPU this process "
			"may not use)\n",
			a->prog, arg);
		return -2;
	}
	return 0;
}

/* "--name ARG": the left column of the usage text */
static int bench_opt_label(const struct bench_opt *o, char *buf, size_t len)
{
	return snprintf(buf, len, "--%s%s%s", o->name, o->arg ? " " : "",
			o->arg ? o->arg : "");
}

void bench_opts_usage(const struct bench_cmd *cmd, FILE *f)
{
	int col = 15;
	char label[64];

	for (const struct bench_opt *o = cmd->opts; o->name; o++) {
		int w = bench_opt_label(o, label, sizeof(label));

		if (w + 1 > col)
			col = w + 1;
	}
	fprintf(f, "usage: bpbench %s %s\n%s", cmd->name,
		cmd->synopsis ? cmd->synopsis : "[options]", cmd->about);
	for (const struct bench_opt *o = cmd->opts; o->name; o++) {
		const char *h = o->help;

		bench_opt_label(o, label, sizeof(label));
		fprintf(f, "  %-*s", col, label);
		for (;;) {
			size_t n = strcspn(h, "\n");

			fprintf(f, " %.*s\n", (int)n, h);
			if (!h[n])
				break;
			h += n + 1;
			fprintf(f, "  %-*s", col, "");
		}
	}
	if (cmd->epilog)
		fputs(cmd->epilog, f);
}

/* After the one line that says what is wrong: where the whole usage is. */
static int bench_usage_hint(const struct bench_args *a)
{
	fprintf(stderr, "%s: see %s --help\n", a->prog, a->prog);
	return BENCH_EXIT_USAGE;
}

int bench_usage_error(const struct bench_args *a, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", a->prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return bench_usage_hint(a);
}

/* "bad value 'X' for --NAME ARG: " and the option's help on one line. */
static void bench_opts_bad_value(const struct bench_args *a,
				 const struct bench_opt *o, const char *arg)
{
	fprintf(stderr, "%s: bad value '%s' for --%s %s: ", a->prog,
		arg ? arg : "", o->name, o->arg);
	for (const char *h = o->help; *h; h++)
		fputc(*h == '\n' ? ' ' : *h, stderr);
	fputc('\n', stderr);
}

/*
 * --out DIR: made now and written to once (a file created and removed), so
 * that a directory that cannot hold the results fails before the
 * experiment runs, not after.
 */
static int bench_out_check(const struct bench_args *a)
{
	char probe[4096];
	int fd;

	if (bench_mkdir_p(a->prog, a->out))
		return -1;
	if (snprintf(probe, sizeof(probe), "%s/.%s.XXXXXX", a->out, a->name) >=
	    (int)sizeof(probe)) {
		fprintf(stderr, "%s: --out path too long\n", a->prog);
		return -1;
	}
	fd = mkstemp(probe);
	if (fd < 0) {
		fprintf(stderr, "%s: --out %s: cannot write there: %s\n",
			a->prog, a->out, strerror(errno));
		return -1;
	}
	close(fd);
	unlink(probe);
	return 0;
}

int bench_opts_ready(const struct bench_args *a)
{
	return a->out && bench_out_check(a) ? BENCH_EXIT_USAGE
					    : BENCH_OPTS_RUN;
}

/* An unknown option, or one missing its value: say which, like getopt. */
static void bench_opts_bad_option(const struct bench_args *a, int optopt_,
				  const char *word)
{
	int i = optopt_ - BENCH_OPT_VAL0;

	if (optopt_ >= BENCH_OPT_VAL0)
		fprintf(stderr, "%s: --%s needs a value\n", a->prog,
			a->cmd->opts[i].name);
	else if (optopt_)
		fprintf(stderr, "%s: bad option '-%c'\n", a->prog, optopt_);
	else
		fprintf(stderr, "%s: bad option '%s'\n", a->prog, word);
}

int bench_opts_parse(struct bench_args *a, int argc, char **argv)
{
	struct option longopts[BENCH_MAX_OPTS + 1];
	const struct bench_opt *opts = a->cmd->opts;
	int n = 0, opt;

	for (; opts[n].name; n++) {
		if (n == BENCH_MAX_OPTS)
			bench_die("%s: more than %d options\n", a->prog,
				  BENCH_MAX_OPTS);
		longopts[n] = (struct option){opts[n].name,
					      opts[n].arg ? required_argument
							  : no_argument,
					      NULL, BENCH_OPT_VAL0 + n};
	}
	longopts[n] = (struct option){NULL, 0, NULL, 0};

	optind = 1; /* a fresh scan: main may have parsed another argv */
	opterr = 0; /* our own message, then the usage */
	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		const struct bench_opt *o;
		int rc;

		if (opt == 'h') {
			bench_opts_usage(a->cmd, stdout);
			return 0;
		}
		if (opt < BENCH_OPT_VAL0) {
			bench_opts_bad_option(a, optopt, argv[optind - 1]);
			goto usage;
		}
		o = &opts[opt - BENCH_OPT_VAL0];
		if (!o->set) { /* --help */
			bench_opts_usage(a->cmd, stdout);
			return 0;
		}
		rc = o->set(a, optarg);
		if (rc == -1)
			bench_opts_bad_value(a, o, optarg);
		if (rc)
			goto usage;
	}
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument '%s'\n", a->prog,
			argv[optind]);
		goto usage;
	}
	if (a->csv && a->json) {
		fprintf(stderr, "%s: --csv and --json exclude each other\n",
			a->prog);
		goto usage;
	}
	if (a->ncpus == 0) {
		a->ncpus = bench_cpus_available(a->cpus, BENCH_MAX_CPUS);
		if (a->ncpus <= 0)
			bench_die("%s: sched_getaffinity failed\n", a->prog);
	}
	return BENCH_OPTS_RUN;
usage:
	return bench_usage_hint(a);
}
