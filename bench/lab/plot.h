/* SPDX-License-Identifier: MIT */
/*
 * plot.h - drawing PNG plots with gnuplot (pngcairo), for every experiment.
 *
 * An experiment writes its data file (usually the CSV it prints with --csv)
 * and hands gnuplot a script built printf-style. gnuplot is a separate
 * program: when it is missing or fails, bench_gnuplot says so on stderr and
 * returns -1; the experiment's numbers are still printed, only the picture
 * is missing, and the caller decides whether that is an error.
 */
#ifndef BPBENCH_PLOT_H
#define BPBENCH_PLOT_H

/*
 * Run gnuplot on the script `fmt` (printf format). `what` names the plot in
 * messages ("bpbench locks: threads plot"). The script should set its own
 * terminal and output; BENCH_PLOT_TERM is the common one.
 * Returns 0 when gnuplot exited 0 and every file in `outputs` (NULL-
 * terminated, may be NULL) exists and is not empty, -1 otherwise.
 */
int bench_gnuplot(const char *what, const char *const *outputs, const char *fmt,
		  ...) __attribute__((format(printf, 3, 4)));

/* Whether gnuplot can be run at all (looked up once, on PATH). */
int bench_gnuplot_available(void);

/* The terminal every bpbench plot uses: PNG through cairo, readable fonts. */
#define BENCH_PLOT_TERM                                                        \
	"set terminal pngcairo size %d,%d enhanced font 'DejaVu Sans,10'\n"

/*
 * Make directory `dir` (and its parents) if missing; 0 or -1 with a message
 * that starts with `who` ("bpbench ring"). For the --out DIR option every
 * experiment offers.
 */
int bench_mkdir_p(const char *who, const char *dir);

#endif /* BPBENCH_PLOT_H */
