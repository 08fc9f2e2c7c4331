/* SPDX-License-Identifier: MIT */
/* plot.c - gnuplot as a child process (see plot.h). */
#include "lab/plot.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

int bench_gnuplot_available(void)
{
	static int known = -1;

	if (known < 0)
		known = system("command -v gnuplot >/dev/null 2>&1") == 0;
	return known;
}

int bench_gnuplot(const char *what, const char *const *outputs, const char *fmt,
		  ...)
{
	va_list ap;
	FILE *gp;
	int st, bad = 0;

	if (!bench_gnuplot_available()) {
		fprintf(stderr,
			"%s: gnuplot not found, no plot drawn "
			"(apt-get install gnuplot-nox)\n",
			what);
		return -1;
	}
	fflush(NULL); /* the child must not repeat our buffered output */
	gp = popen("gnuplot", "w");
	if (!gp) {
		fprintf(stderr, "%s: cannot run gnuplot: %s\n", what,
			strerror(errno));
		return -1;
	}
	va_start(ap, fmt);
	vfprintf(gp, fmt, ap);
	va_end(ap);
	st = pclose(gp);
	if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "%s: gnuplot failed (status %d)\n", what, st);
		return -1;
	}
	for (int i = 0; outputs && outputs[i]; i++) {
		struct stat sb;

		if (stat(outputs[i], &sb) != 0 || sb.st_size == 0) {
			fprintf(stderr, "%s: gnuplot wrote no %s\n", what,
				outputs[i]);
			bad = 1;
		}
	}
	return bad ? -1 : 0;
}

int bench_mkdir_p(const char *who, const char *dir)
{
	char path[4096];
	size_t n = strlen(dir);

	if (n == 0 || n >= sizeof(path)) {
		fprintf(stderr, "%s: bad directory '%s'\n", who, dir);
		return -1;
	}
	memcpy(path, dir, n + 1);
	for (char *p = path + 1;; p++) {
		char c = *p;

		if (c != '/' && c != '\0')
			continue;
		*p = '\0';
		if (mkdir(path, 0777) != 0 && errno != EEXIST) {
			fprintf(stderr, "%s: cannot create %s: %s\n", who,
				path, strerror(errno));
			return -1;
		}
		*p = c;
		if (c == '\0')
			return 0;
	}
}
