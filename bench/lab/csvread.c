/* SPDX-License-Identifier: MIT */
/*
 * csvread.c - lines, fields, columns and numbers of a bpbench CSV
 * (csvread.h).
 */
#include "lab/csvread.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

char *bench_csv_line(char **p)
{
	char *s = *p, *nl;
	size_t n;

	if (!*s)
		return NULL;
	nl = strchr(s, '\n');
	if (nl) {
		*nl = '\0';
		*p = nl + 1;
	} else {
		*p = s + strlen(s);
	}
	n = strlen(s);
	if (n && s[n - 1] == '\r')
		s[n - 1] = '\0';
	return s;
}

int bench_csv_split(char *s, char **f, int max)
{
	int n = 0;

	for (;;) {
		if (n >= max)
			return -1;
		f[n++] = s;
		s = strchr(s, ',');
		if (!s)
			return n;
		*s++ = '\0';
	}
}

int bench_csv_col(char *const *h, int n, const char *name)
{
	for (int i = 0; name && i < n; i++)
		if (!strcmp(h[i], name))
			return i;
	return -1;
}

int bench_csv_number(const char *s, double *v)
{
	char *end;

	if (!*s)
		return -1;
	errno = 0;
	*v = strtod(s, &end);
	return errno || *end || !isfinite(*v) ? -1 : 0;
}
