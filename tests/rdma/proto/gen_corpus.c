/* SPDX-License-Identifier: MIT */
/*
 * gen_corpus.c - writes the fuzzer's seed corpus: one valid message of each
 * type, a few back to back, and a few broken ones (wrong magic, version,
 * oversized, truncated). Run once; the files are committed in corpus/.
 * usage: gen_corpus DIR
 */
#include <stdio.h>
#include <string.h>

#include "src/rdma/proto.h"

static int save(const char *dir, const char *name, const void *b, size_t n)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (f == NULL || fwrite(b, 1, n, f) != n) {
		perror(path);
		return 1;
	}
	return fclose(f) != 0;
}

static void desc(struct bp_rdma_peer_desc *d, unsigned rails)
{
	memset(d, 0, sizeof(*d));
	d->rails = rails;
	d->len = 1 << 20;
	for (unsigned r = 0; r < rails; r++) {
		d->rail[r].addrlen = 16;
		memset(d->rail[r].addr, 0x10 + (int)r, 16);
		d->rail[r].base = 0x1000;
		d->rail[r].key = r + 1;
	}
}

int main(int argc, char **argv)
{
	static uint8_t buf[2 * BPI_MSG_MAX];
	struct bpi_msg m[BPI_MSG_TYPE_MAX + 1];
	ssize_t len[BPI_MSG_TYPE_MAX + 1];
	size_t all = 0;
	int bad = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: gen_corpus DIR\n");
		return 2;
	}
	memset(m, 0, sizeof(m));
	for (unsigned t = BPI_MSG_HELLO; t <= BPI_MSG_TYPE_MAX; t++)
		m[t].type = (uint16_t)t;
	strcpy(m[BPI_MSG_HELLO].u.hello.token, "secret");
	strcpy(m[BPI_MSG_HELLO].u.hello.provider, "tcp;ofi_rxm");
	m[BPI_MSG_HELLO].u.hello.rails = 1;
	m[BPI_MSG_HELLO].u.hello.region_len = 1 << 20;
	strcpy(m[BPI_MSG_WELCOME].u.welcome.provider, "tcp;ofi_rxm");
	desc(&m[BPI_MSG_WELCOME].u.welcome.desc, 2);
	desc(&m[BPI_MSG_FILL].u.fill.desc, 1);
	m[BPI_MSG_FILL].u.fill.len = 1 << 20;
	m[BPI_MSG_FILL].u.fill.page = 4096;
	m[BPI_MSG_FILL].u.fill.seed = 42;
	m[BPI_MSG_FILL_PROGRESS].u.progress.done = 4096;
	m[BPI_MSG_FILL_DONE].u.done.bytes = 1 << 20;
	m[BPI_MSG_QUERY].u.query.len = 4096;
	m[BPI_MSG_QUERY_REPLY].u.reply.digest = 1;
	m[BPI_MSG_ERROR].u.error.code = -13;
	strcpy(m[BPI_MSG_ERROR].u.error.text, "wrong token");
	for (unsigned t = BPI_MSG_HELLO; t <= BPI_MSG_TYPE_MAX; t++) {
		char name[64];

		len[t] = bpi_proto_encode(&m[t], buf + all, sizeof(buf) - all);
		if (len[t] < 0) {
			fprintf(stderr, "encode %u failed\n", t);
			return 1;
		}
		snprintf(name, sizeof(name), "valid-%s",
			 bpi_proto_type_name(t));
		bad |= save(argv[1], name, buf + all, (size_t)len[t]);
		all += (size_t)len[t];
	}
	bad |= save(argv[1], "valid-all-types", buf, all);
	/* broken ones, from the HELLO at the start of buf */
	bad |= save(argv[1], "bad-truncated-hello", buf,
		    (size_t)len[BPI_MSG_HELLO] - 3);
	buf[3] = 'X';
	bad |= save(argv[1], "bad-magic", buf, (size_t)len[BPI_MSG_HELLO]);
	buf[3] = 'T';
	buf[4] = 2;
	bad |= save(argv[1], "bad-version", buf, (size_t)len[BPI_MSG_HELLO]);
	buf[4] = 1;
	buf[6] = 0x77;
	bad |= save(argv[1], "bad-type", buf, (size_t)len[BPI_MSG_HELLO]);
	buf[6] = 1;
	buf[10] = 0x10; /* body length + 1 MiB */
	bad |= save(argv[1], "bad-oversized", buf, BPI_HDR_LEN);
	buf[10] = 0;
	bad |= save(argv[1], "bad-garbage", "GET / HTTP/1.0\r\n\r\n", 18);
	return bad;
}
