/* SPDX-License-Identifier: MIT */
/*
 * lists.c - numbers and lists from the command line.
 */
#include "lab/lists.h"

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

/*
 * One number at s, *endp just past it; with `suffix`, an optional K, M or G
 * after the digits multiplies it by 1024, 1024^2 or 1024^3. 0 or -1.
 */
static int parse_one(const char *s, char **endp, uint64_t *out, int suffix)
{
	unsigned shift = 0;
	unsigned long long v;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, endp, 10);
	if (errno)
		return -1;
	switch (suffix ? **endp : 0) {
	case 'k':
	case 'K':
		shift = 10;
		break;
	case 'm':
	case 'M':
		shift = 20;
		break;
	case 'g':
	case 'G':
		shift = 30;
		break;
	default:
		break;
	}
	if (shift) {
		if (v > (UINT64_MAX >> shift))
			return -1;
		v <<= shift;
		(*endp)++;
	}
	*out = v;
	return 0;
}

/* "a,b,c": each in [lo, hi]; the count, or -1 */
static int parse_list(const char *s, unsigned *out, int max, unsigned lo,
		      unsigned hi, int suffix)
{
	int n = 0;

	while (*s) {
		char *end;
		uint64_t v;

		if (n >= max || parse_one(s, &end, &v, suffix) || v < lo ||
		    v > hi)
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

int bench_parse_uints(const char *s, unsigned *out, int max, unsigned lo,
		      unsigned hi)
{
	return parse_list(s, out, max, lo, hi, 0);
}

int bench_parse_sizes(const char *s, unsigned *out, int max, unsigned lo,
		      unsigned hi)
{
	return parse_list(s, out, max, lo, hi, 1);
}

int bench_parse_size(const char *s, uint64_t *out, uint64_t lo, uint64_t hi)
{
	char *end;
	uint64_t v;

	if (parse_one(s, &end, &v, 1) || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}
