/* SPDX-License-Identifier: MIT */
/*
 * lists.c - numbers and lists from the command line.
 */
#include "lists.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int bench_parse_uint(const char *s, unsigned *out, unsigned lo, unsigned hi)
{
	char *end;
	unsigned long v;

	if (!s || !*s || *s == '-')
		return -1;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return -1;
	*out = (unsigned)v;
	return 0;
}

int bench_parse_uints(const char *s, unsigned *out, int max, unsigned lo,
		      unsigned hi)
{
	int n = 0;

	while (*s) {
		char *end;
		unsigned long v;

		if (*s < '0' || *s > '9' || n >= max)
			return -1;
		errno = 0;
		v = strtoul(s, &end, 10);
		if (errno || v < lo || v > hi)
			return -1;
		out[n++] = (unsigned)v;
		s = end;
		if (*s == ',')
			s++;
		else if (*s)
			return -1;
	}
	return n > 0 ? n : -1;
}

int bench_parse_pairs(const char *s, unsigned (*out)[2], int max, unsigned lo,
		      unsigned hi)
{
	int n = 0;

	while (*s) {
		char *end;
		unsigned long a, b;

		if (*s < '0' || *s > '9' || n >= max)
			return -1;
		a = strtoul(s, &end, 10);
		if (*end != 'x' && *end != 'X')
			return -1;
		s = end + 1;
		if (*s < '0' || *s > '9')
			return -1;
		b = strtoul(s, &end, 10);
		if (a < lo || a > hi || b < lo || b > hi)
			return -1;
		out[n][0] = (unsigned)a;
		out[n][1] = (unsigned)b;
		n++;
		s = end;
		if (*s == ',')
			s++;
		else if (*s)
			return -1;
	}
	return n > 0 ? n : -1;
}

int bench_parse_names(char *s, const char **out, int max)
{
	int n = 0;
	char *save = NULL;

	for (char *t = strtok_r(s, ",", &save); t;
	     t = strtok_r(NULL, ",", &save)) {
		if (n >= max)
			return -1;
		out[n++] = t;
	}
	return n > 0 ? n : -1;
}
