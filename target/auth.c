/* SPDX-License-Identifier: MIT */
/*
 * auth.c - the shared secret: loaded once from --token-file, compared in
 * constant time with what each HELLO carries, so that the time an answer
 * takes says nothing about how much of a guess was right.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "target.h"

/* The first line of the file, without its line end; 1..256 bytes. */
int auth_load(struct target *t, const char *path)
{
	char buf[BPI_TOKEN_MAX + 3];
	size_t n;
	FILE *f = fopen(path, "re");

	if (f == NULL) {
		tlog(t, 0, NULL, "cannot read token file %s: %s", path,
		     strerror(errno));
		return -errno;
	}
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	n = strcspn(buf, "\r\n");
	buf[n] = '\0';
	if (n == 0 || n > BPI_TOKEN_MAX || strlen(buf) != n) {
		tlog(t, 0, NULL,
		     "token file %s: want one line of 1..%u bytes (no NUL)",
		     path, BPI_TOKEN_MAX);
		return -EINVAL;
	}
	memcpy(t->token, buf, n + 1);
	t->token_len = n;
	t->have_token = true;
	explicit_bzero(buf, sizeof(buf));
	return 0;
}

bool auth_check(const struct target *t, const char *token, size_t len)
{
	volatile unsigned char diff;
	unsigned char d = 0;

	if (!t->have_token)
		return true; /* loopback daemon without a secret */
	/*
	 * Every byte of the longest possible token is looked at, whatever
	 * the lengths: no early exit. Both buffers are BPI_TOKEN_MAX + 1
	 * bytes and NUL-padded past their lengths (the parser and auth_load
	 * copy into zeroed storage), so reading them all is in bounds.
	 */
	d |= (unsigned char)(len != t->token_len);
	for (size_t i = 0; i <= BPI_TOKEN_MAX; i++)
		d |= (unsigned char)(token[i] ^ t->token[i]);
	diff = d; /* keep the compiler from turning this into a branch */
	return diff == 0;
}
