/* SPDX-License-Identifier: MIT */
/*
 * test_proto.c - the bp-target control protocol parser and encoder
 * (src/rdma/proto.c), and the fill generator and digest (src/rdma/fill.c).
 *
 * Every message type round-trips; every prefix of a valid message asks for
 * more bytes; every malformation the format defines is refused with its
 * errno. Messages under test are built byte by byte here, independently of
 * the encoder, so an encoder bug cannot hide a parser bug.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "src/rdma/proto.h"

/* ------------------------------------------------- a raw message builder */

struct bb {
	size_t n;
	uint8_t b[BPI_MSG_MAX + 64];
};

/* bytes: 1..8 */
static void put(struct bb *m, uint64_t v, unsigned bytes)
{
	for (unsigned i = 0; i < bytes; i++)
		m->b[m->n++] = (uint8_t)(v >> (8 * i));
}

static void put_raw(struct bb *m, const void *p, size_t n)
{
	memcpy(m->b + m->n, p, n);
	m->n += n;
}

static void put_str(struct bb *m, const char *s, size_t n)
{
	put(m, n, 2);
	put_raw(m, s, n);
}

/* Start a message: the header, body length patched by end(). */
static void begin(struct bb *m, uint16_t type)
{
	m->n = 0;
	put_raw(m, "BPRT", 4);
	put(m, BPI_PROTO_VERSION, 2);
	put(m, type, 2);
	put(m, 0, 4);
}

static size_t end(struct bb *m)
{
	uint32_t blen = (uint32_t)(m->n - BPI_HDR_LEN);

	for (unsigned i = 0; i < 4; i++)
		m->b[8 + i] = (uint8_t)(blen >> (8 * i));
	return m->n;
}

static void set_blen(struct bb *m, uint32_t blen)
{
	for (unsigned i = 0; i < 4; i++)
		m->b[8 + i] = (uint8_t)(blen >> (8 * i));
}

static void put_desc(struct bb *m, unsigned rails, uint32_t addrlen)
{
	put(m, rails, 4);
	put(m, 1u << 20, 8);
	for (unsigned r = 0; r < rails; r++) {
		put(m, addrlen, 4);
		for (uint32_t i = 0; i < addrlen; i++)
			put(m, (uint8_t)(r * 31 + i), 1);
		put(m, 0x1000u * (r + 1), 8);
		put(m, 0xabc0u + r, 8);
	}
}

static void hello_raw(struct bb *m, const char *tok, size_t toklen,
		      const char *prov, size_t provlen, uint32_t rails)
{
	begin(m, BPI_MSG_HELLO);
	put_str(m, tok, toklen);
	put_str(m, prov, provlen);
	put(m, rails, 4);
	put(m, 4096, 8);
	end(m);
}

static ssize_t parse(const struct bb *m, struct bpi_msg *out)
{
	return bpi_proto_parse(m->b, m->n, out);
}

/* ------------------------------------------------------------- samples */

static void sample_desc(struct bp_rdma_peer_desc *d, unsigned rails)
{
	memset(d, 0, sizeof(*d));
	d->rails = rails;
	d->len = 123456789;
	for (unsigned r = 0; r < rails; r++) {
		d->rail[r].addrlen = r == 0 ? BP_RDMA_ADDR_MAX : 1 + r * 7;
		for (unsigned i = 0; i < d->rail[r].addrlen; i++)
			d->rail[r].addr[i] = (uint8_t)(i * 13 + r);
		d->rail[r].base = 0x7f0000000000ull + r;
		d->rail[r].key = 0xfeedface00000000ull | r;
	}
}

/* One valid message of each type, with extreme values where they exist. */
static void sample(unsigned type, struct bpi_msg *m)
{
	memset(m, 0, sizeof(*m));
	m->type = (uint16_t)type;
	switch (type) {
	case BPI_MSG_HELLO:
		memset(m->u.hello.token, 't', BPI_TOKEN_MAX);
		m->u.hello.token_len = BPI_TOKEN_MAX;
		strcpy(m->u.hello.provider, "tcp;ofi_rxm");
		m->u.hello.rails = BP_RDMA_MAX_RAILS;
		m->u.hello.region_len = UINT64_MAX;
		break;
	case BPI_MSG_WELCOME:
		strcpy(m->u.welcome.provider, "shm");
		sample_desc(&m->u.welcome.desc, BP_RDMA_MAX_RAILS);
		break;
	case BPI_MSG_FILL:
		sample_desc(&m->u.fill.desc, 3);
		m->u.fill.len = 1ull << 40;
		m->u.fill.page = BPI_FILL_PAGE_MAX;
		m->u.fill.seed = 0x0123456789abcdefull;
		break;
	case BPI_MSG_FILL_PROGRESS:
		m->u.progress.done = 42;
		break;
	case BPI_MSG_FILL_DONE:
		m->u.done.status = INT32_MIN;
		m->u.done.bytes = 7;
		m->u.done.ns = UINT64_MAX;
		break;
	case BPI_MSG_QUERY:
		m->u.query.offset = UINT64_MAX;
		m->u.query.len = 1;
		break;
	case BPI_MSG_QUERY_REPLY:
		m->u.reply.status = -ERANGE;
		m->u.reply.digest = 0xcbf29ce484222325ull;
		m->u.reply.imm_count = 3;
		m->u.reply.imm_sum = 99;
		break;
	case BPI_MSG_ERROR:
		m->u.error.code = -EACCES;
		memset(m->u.error.text, 'e', BPI_TEXT_MAX);
		break;
	case BPI_MSG_BYE:
		break;
	}
}

/* Field by field: the padding of the union is not part of a message. */
static void assert_desc_equal(const struct bp_rdma_peer_desc *a,
			      const struct bp_rdma_peer_desc *b)
{
	assert_int_equal(a->rails, b->rails);
	assert_int_equal(a->len, b->len);
	for (unsigned r = 0; r < a->rails; r++) {
		assert_int_equal(a->rail[r].addrlen, b->rail[r].addrlen);
		assert_memory_equal(a->rail[r].addr, b->rail[r].addr,
				    a->rail[r].addrlen);
		assert_int_equal(a->rail[r].base, b->rail[r].base);
		assert_int_equal(a->rail[r].key, b->rail[r].key);
	}
}

static void assert_msg_equal(const struct bpi_msg *a, const struct bpi_msg *b)
{
	assert_int_equal(a->type, b->type);
	switch (a->type) {
	case BPI_MSG_HELLO:
		assert_string_equal(a->u.hello.token, b->u.hello.token);
		assert_int_equal(a->u.hello.token_len, b->u.hello.token_len);
		assert_string_equal(a->u.hello.provider, b->u.hello.provider);
		assert_int_equal(a->u.hello.rails, b->u.hello.rails);
		assert_int_equal(a->u.hello.region_len, b->u.hello.region_len);
		break;
	case BPI_MSG_WELCOME:
		assert_string_equal(a->u.welcome.provider,
				    b->u.welcome.provider);
		assert_desc_equal(&a->u.welcome.desc, &b->u.welcome.desc);
		break;
	case BPI_MSG_FILL:
		assert_desc_equal(&a->u.fill.desc, &b->u.fill.desc);
		assert_int_equal(a->u.fill.len, b->u.fill.len);
		assert_int_equal(a->u.fill.page, b->u.fill.page);
		assert_int_equal(a->u.fill.seed, b->u.fill.seed);
		break;
	case BPI_MSG_FILL_PROGRESS:
		assert_int_equal(a->u.progress.done, b->u.progress.done);
		break;
	case BPI_MSG_FILL_DONE:
		assert_int_equal(a->u.done.status, b->u.done.status);
		assert_int_equal(a->u.done.bytes, b->u.done.bytes);
		assert_int_equal(a->u.done.ns, b->u.done.ns);
		break;
	case BPI_MSG_QUERY:
		assert_int_equal(a->u.query.offset, b->u.query.offset);
		assert_int_equal(a->u.query.len, b->u.query.len);
		break;
	case BPI_MSG_QUERY_REPLY:
		assert_int_equal(a->u.reply.status, b->u.reply.status);
		assert_int_equal(a->u.reply.digest, b->u.reply.digest);
		assert_int_equal(a->u.reply.imm_count, b->u.reply.imm_count);
		assert_int_equal(a->u.reply.imm_sum, b->u.reply.imm_sum);
		break;
	case BPI_MSG_ERROR:
		assert_int_equal(a->u.error.code, b->u.error.code);
		assert_string_equal(a->u.error.text, b->u.error.text);
		break;
	}
}

/* --------------------------------------------------------------- tests */

static void test_round_trip_every_type(void **state)
{
	static uint8_t buf[BPI_MSG_MAX];
	struct bpi_msg in, out;

	(void)state;
	for (unsigned type = BPI_MSG_HELLO; type <= BPI_MSG_TYPE_MAX; type++) {
		ssize_t len, r;

		sample(type, &in);
		len = bpi_proto_encode(&in, buf, sizeof(buf));
		assert_true(len >= (ssize_t)BPI_HDR_LEN);
		memset(&out, 0x55, sizeof(out));
		r = bpi_proto_parse(buf, (size_t)len, &out);
		assert_int_equal(r, len);
		assert_msg_equal(&in, &out);
		/* every proper prefix: valid so far, need more */
		for (ssize_t k = 0; k < len; k++)
			assert_int_equal(bpi_proto_parse(buf, (size_t)k, &out),
					 0);
		/* exactly the size needed is enough, one less is not */
		assert_int_equal(bpi_proto_encode(&in, buf, (size_t)len), len);
		assert_int_equal(bpi_proto_encode(&in, buf, (size_t)len - 1),
				 -ENOSPC);
		assert_string_not_equal(bpi_proto_type_name(type), "unknown");
	}
}

static void test_wire_layout(void **state)
{
	struct bpi_msg m = {.type = BPI_MSG_QUERY};
	uint8_t buf[64];
	struct bb raw;

	(void)state;
	m.u.query.offset = 0x0102030405060708ull;
	m.u.query.len = 9;
	assert_int_equal(bpi_proto_encode(&m, buf, sizeof(buf)), 12 + 16);
	/* the encoder's bytes are the documented little-endian layout */
	begin(&raw, BPI_MSG_QUERY);
	put(&raw, 0x0102030405060708ull, 8);
	put(&raw, 9, 8);
	end(&raw);
	assert_int_equal(raw.n, 28);
	assert_memory_equal(buf, raw.b, raw.n);
	assert_memory_equal(buf, "BPRT\x01\x00\x06\x00\x10\x00\x00\x00", 12);
}

static void test_back_to_back(void **state)
{
	uint8_t buf[256];
	struct bpi_msg a = {.type = BPI_MSG_BYE}, b, out;
	ssize_t n1, n2;

	(void)state;
	sample(BPI_MSG_QUERY, &b);
	n1 = bpi_proto_encode(&a, buf, sizeof(buf));
	n2 = bpi_proto_encode(&b, buf + n1, sizeof(buf) - (size_t)n1);
	assert_true(n1 == 12 && n2 > 0);
	assert_int_equal(bpi_proto_parse(buf, (size_t)(n1 + n2), &out), n1);
	assert_int_equal(out.type, BPI_MSG_BYE);
	assert_int_equal(bpi_proto_parse(buf + n1, (size_t)n2, &out), n2);
	assert_msg_equal(&b, &out);
	/* out may be NULL: a validity check only */
	assert_int_equal(bpi_proto_parse(buf, (size_t)n1, NULL), n1);
}

static void test_bad_magic(void **state)
{
	struct bpi_msg out;
	struct bb m;

	(void)state;
	/* refused on the first wrong byte, before the header is complete */
	assert_int_equal(bpi_proto_parse("X", 1, &out), -EPROTO);
	assert_int_equal(bpi_proto_parse("BPX", 3, &out), -EPROTO);
	assert_int_equal(bpi_proto_parse("GET / HTTP/1.0\r\n", 16, &out),
			 -EPROTO);
	assert_int_equal(bpi_proto_parse("BPR", 3, &out), 0);
	begin(&m, BPI_MSG_BYE);
	end(&m);
	m.b[3] = 'X';
	assert_int_equal(parse(&m, &out), -EPROTO);
	m.b[3] = 't'; /* case matters */
	assert_int_equal(parse(&m, &out), -EPROTO);
}

static void test_bad_version_and_type(void **state)
{
	static const uint16_t versions[] = {0, 2, 0x100, 0xffff};
	static const uint16_t types[] = {0, BPI_MSG_TYPE_MAX + 1, 0x100,
					 0xffff};
	struct bpi_msg out;
	struct bb m;

	(void)state;
	for (unsigned i = 0; i < 4; i++) {
		begin(&m, BPI_MSG_BYE);
		end(&m);
		m.b[4] = (uint8_t)versions[i];
		m.b[5] = (uint8_t)(versions[i] >> 8);
		assert_int_equal(parse(&m, &out), -EPROTO);
		begin(&m, types[i]);
		end(&m);
		assert_int_equal(parse(&m, &out), -EPROTO);
		/* known from the header alone: a body is not waited for */
		set_blen(&m, 100);
		assert_int_equal(parse(&m, &out), -EPROTO);
	}
	assert_string_equal(bpi_proto_type_name(0), "unknown");
	assert_string_equal(bpi_proto_type_name(BPI_MSG_TYPE_MAX + 1),
			    "unknown");
}

static void test_oversized(void **state)
{
	static const uint32_t lens[] = {BPI_MSG_MAX - BPI_HDR_LEN + 1,
					BPI_MSG_MAX, 1u << 31, UINT32_MAX};
	struct bpi_msg out;
	struct bb m;

	(void)state;
	for (unsigned i = 0; i < 4; i++) {
		begin(&m, BPI_MSG_HELLO);
		set_blen(&m, lens[i]);
		/* the header alone decides */
		assert_int_equal(parse(&m, &out), -EMSGSIZE);
	}
	/* the largest allowed length only waits for its body */
	begin(&m, BPI_MSG_HELLO);
	set_blen(&m, BPI_MSG_MAX - BPI_HDR_LEN);
	assert_int_equal(parse(&m, &out), 0);
}

/* For each type, a body one byte short and one byte long. */
static void test_length_mismatch(void **state)
{
	static uint8_t buf[BPI_MSG_MAX + 1];
	struct bpi_msg in, out;

	(void)state;
	for (unsigned type = BPI_MSG_HELLO; type <= BPI_MSG_TYPE_MAX; type++) {
		ssize_t len;
		uint32_t blen;

		sample(type, &in);
		len = bpi_proto_encode(&in, buf, sizeof(buf));
		assert_true(len > 0);
		blen = (uint32_t)len - BPI_HDR_LEN;
		/* one byte long: a trailing byte */
		buf[len] = 0;
		buf[8] = (uint8_t)(blen + 1);
		buf[9] = (uint8_t)((blen + 1) >> 8);
		assert_int_equal(bpi_proto_parse(buf, (size_t)len + 1, &out),
				 -EBADMSG);
		if (blen == 0)
			continue; /* BYE has nothing to cut */
		/* one byte short: the last field runs out */
		buf[8] = (uint8_t)(blen - 1);
		buf[9] = (uint8_t)((blen - 1) >> 8);
		assert_int_equal(bpi_proto_parse(buf, (size_t)len - 1, &out),
				 -EBADMSG);
		/* short announced length, full bytes: still malformed, and
		 * the extra byte is not read as the next message's */
		assert_int_equal(bpi_proto_parse(buf, (size_t)len, &out),
				 -EBADMSG);
	}
}

static void test_hello_fields(void **state)
{
	char big[BPI_TOKEN_MAX + 2];
	struct bpi_msg out;
	struct bb m;

	(void)state;
	memset(big, 'a', sizeof(big));
	hello_raw(&m, big, BPI_TOKEN_MAX, "shm", 3, 1);
	assert_int_equal(parse(&m, &out), (ssize_t)m.n);
	assert_int_equal(out.u.hello.token_len, BPI_TOKEN_MAX);
	assert_int_equal(strlen(out.u.hello.token), BPI_TOKEN_MAX);
	hello_raw(&m, big, BPI_TOKEN_MAX + 1, "shm", 3, 1);
	assert_int_equal(parse(&m, &out), -EBADMSG);
	hello_raw(&m, "ab\0cd", 5, "shm", 3, 1); /* a NUL inside */
	assert_int_equal(parse(&m, &out), -EBADMSG);
	hello_raw(&m, "", 0, "sh\0", 3, 1);
	assert_int_equal(parse(&m, &out), -EBADMSG);
	hello_raw(&m, "", 0, big, BPI_PROVIDER_MAX, 1);
	assert_int_equal(parse(&m, &out), (ssize_t)m.n);
	hello_raw(&m, "", 0, big, BPI_PROVIDER_MAX + 1, 1);
	assert_int_equal(parse(&m, &out), -EBADMSG);
	hello_raw(&m, "", 0, "", 0, 0);
	assert_int_equal(parse(&m, &out), -EBADMSG);
	hello_raw(&m, "", 0, "", 0, BP_RDMA_MAX_RAILS + 1);
	assert_int_equal(parse(&m, &out), -EBADMSG);
	hello_raw(&m, "", 0, "", 0, BP_RDMA_MAX_RAILS);
	assert_int_equal(parse(&m, &out), (ssize_t)m.n);
	assert_string_equal(out.u.hello.token, "");
	/* a string length past the end of the body */
	begin(&m, BPI_MSG_HELLO);
	put(&m, 200, 2);
	put_raw(&m, "abc", 3);
	end(&m);
	assert_int_equal(parse(&m, &out), -EBADMSG);
}

static void desc_msg(struct bb *m, uint16_t type, unsigned rails,
		     uint32_t addrlen)
{
	begin(m, type);
	if (type == BPI_MSG_WELCOME)
		put_str(m, "tcp", 3);
	put_desc(m, rails, addrlen);
	if (type == BPI_MSG_FILL) {
		put(m, 4096, 8);
		put(m, 4096, 4);
		put(m, 1, 8);
	}
	end(m);
}

static void test_desc_fields(void **state)
{
	static const uint16_t types[] = {BPI_MSG_WELCOME, BPI_MSG_FILL};
	struct bpi_msg out;
	struct bb m;

	(void)state;
	for (unsigned i = 0; i < 2; i++) {
		desc_msg(&m, types[i], 2, 16);
		assert_int_equal(parse(&m, &out), (ssize_t)m.n);
		desc_msg(&m, types[i], BP_RDMA_MAX_RAILS, BP_RDMA_ADDR_MAX);
		assert_int_equal(parse(&m, &out), (ssize_t)m.n);
		desc_msg(&m, types[i], 0, 16);
		assert_int_equal(parse(&m, &out), -EBADMSG);
		desc_msg(&m, types[i], BP_RDMA_MAX_RAILS + 1, 16);
		assert_int_equal(parse(&m, &out), -EBADMSG);
		desc_msg(&m, types[i], 1, 0);
		assert_int_equal(parse(&m, &out), -EBADMSG);
		desc_msg(&m, types[i], 1, BP_RDMA_ADDR_MAX + 1);
		assert_int_equal(parse(&m, &out), -EBADMSG);
	}
	/* an address length larger than what is left of the body */
	begin(&m, BPI_MSG_WELCOME);
	put_str(&m, "tcp", 3);
	put(&m, 1, 4);
	put(&m, 4096, 8);
	put(&m, 100, 4);
	put_raw(&m, "short", 5);
	end(&m);
	assert_int_equal(parse(&m, &out), -EBADMSG);
	/* a huge rail count is refused before any rail is read */
	begin(&m, BPI_MSG_FILL);
	put(&m, UINT32_MAX, 4);
	end(&m);
	assert_int_equal(parse(&m, &out), -EBADMSG);
}

static void fill_raw(struct bb *m, uint32_t page)
{
	begin(m, BPI_MSG_FILL);
	put_desc(m, 1, 8);
	put(m, 1u << 20, 8);
	put(m, page, 4);
	put(m, 7, 8);
	end(m);
}

static void test_fill_page_bounds(void **state)
{
	struct bpi_msg out;
	struct bb m;

	(void)state;
	fill_raw(&m, 1);
	assert_int_equal(parse(&m, &out), (ssize_t)m.n);
	fill_raw(&m, BPI_FILL_PAGE_MAX);
	assert_int_equal(parse(&m, &out), (ssize_t)m.n);
	fill_raw(&m, 0);
	assert_int_equal(parse(&m, &out), -EBADMSG);
	fill_raw(&m, BPI_FILL_PAGE_MAX + 1);
	assert_int_equal(parse(&m, &out), -EBADMSG);
}

static void test_status_signs(void **state)
{
	struct bpi_msg out;
	struct bb m;

	(void)state;
	/* FILL_DONE and QUERY_REPLY: 0 or negative */
	begin(&m, BPI_MSG_FILL_DONE);
	put(&m, 1, 4);
	put(&m, 0, 8);
	put(&m, 0, 8);
	end(&m);
	assert_int_equal(parse(&m, &out), -EBADMSG);
	m.b[12] = 0;
	assert_int_equal(parse(&m, &out), (ssize_t)m.n);
	assert_int_equal(out.u.done.status, 0);
	memset(m.b + 12, 0xff, 4);
	assert_int_equal(parse(&m, &out), (ssize_t)m.n);
	assert_int_equal(out.u.done.status, -1);
	begin(&m, BPI_MSG_QUERY_REPLY);
	put(&m, INT32_MAX, 4);
	put(&m, 0, 8);
	put(&m, 0, 8);
	put(&m, 0, 8);
	end(&m);
	assert_int_equal(parse(&m, &out), -EBADMSG);
	/* ERROR: strictly negative, bounded text without NUL */
	begin(&m, BPI_MSG_ERROR);
	put(&m, 0, 4);
	put_str(&m, "x", 1);
	end(&m);
	assert_int_equal(parse(&m, &out), -EBADMSG);
	begin(&m, BPI_MSG_ERROR);
	put(&m, (uint32_t)-EACCES, 4);
	put_str(&m, "x\0y", 3);
	end(&m);
	assert_int_equal(parse(&m, &out), -EBADMSG);
	begin(&m, BPI_MSG_ERROR);
	put(&m, (uint32_t)-EACCES, 4);
	put(&m, BPI_TEXT_MAX + 1, 2);
	for (unsigned i = 0; i <= BPI_TEXT_MAX; i++)
		put(&m, 'z', 1);
	end(&m);
	assert_int_equal(parse(&m, &out), -EBADMSG);
	begin(&m, BPI_MSG_ERROR);
	put(&m, (uint32_t)-EACCES, 4);
	put_str(&m, "wrong token", 11);
	end(&m);
	assert_int_equal(parse(&m, &out), (ssize_t)m.n);
	assert_int_equal(out.u.error.code, -EACCES);
	assert_string_equal(out.u.error.text, "wrong token");
}

static void test_bad_arguments(void **state)
{
	struct bpi_msg m, out;
	uint8_t buf[BPI_MSG_MAX];

	(void)state;
	assert_int_equal(bpi_proto_parse(NULL, 1, &out), -EINVAL);
	assert_int_equal(bpi_proto_parse(NULL, 0, &out), 0);
	assert_int_equal(bpi_proto_encode(NULL, buf, sizeof(buf)), -EINVAL);
	sample(BPI_MSG_BYE, &m);
	assert_int_equal(bpi_proto_encode(&m, NULL, 12), -EINVAL);
	assert_int_equal(bpi_proto_encode(&m, buf, 11), -ENOSPC);
	m.type = 0;
	assert_int_equal(bpi_proto_encode(&m, buf, sizeof(buf)), -EINVAL);
	m.type = BPI_MSG_TYPE_MAX + 1;
	assert_int_equal(bpi_proto_encode(&m, buf, sizeof(buf)), -EINVAL);
	/* the encoder refuses what the parser would: it never emits a
	 * message the other side must reject; and it says so even into a
	 * buffer too small for the message */
	sample(BPI_MSG_HELLO, &m);
	m.u.hello.rails = 0;
	assert_int_equal(bpi_proto_encode(&m, buf, sizeof(buf)), -EINVAL);
	assert_int_equal(bpi_proto_encode(&m, buf, 4), -EINVAL);
	sample(BPI_MSG_HELLO, &m);
	memset(m.u.hello.token, 'a', sizeof(m.u.hello.token)); /* no NUL */
	assert_int_equal(bpi_proto_encode(&m, buf, sizeof(buf)), -EINVAL);
	sample(BPI_MSG_WELCOME, &m);
	m.u.welcome.desc.rail[2].addrlen = 0;
	assert_int_equal(bpi_proto_encode(&m, buf, sizeof(buf)), -EINVAL);
	m.u.welcome.desc.rail[2].addrlen = BP_RDMA_ADDR_MAX + 1;
	assert_int_equal(bpi_proto_encode(&m, buf, sizeof(buf)), -EINVAL);
	sample(BPI_MSG_FILL, &m);
	m.u.fill.desc.rails = BP_RDMA_MAX_RAILS + 1;
	assert_int_equal(bpi_proto_encode(&m, buf, sizeof(buf)), -EINVAL);
	sample(BPI_MSG_FILL, &m);
	m.u.fill.page = 0;
	assert_int_equal(bpi_proto_encode(&m, buf, sizeof(buf)), -EINVAL);
	sample(BPI_MSG_ERROR, &m);
	m.u.error.code = 0;
	assert_int_equal(bpi_proto_encode(&m, buf, sizeof(buf)), -EINVAL);
	sample(BPI_MSG_FILL_DONE, &m);
	m.u.done.status = 5;
	assert_int_equal(bpi_proto_encode(&m, buf, sizeof(buf)), -EINVAL);
	sample(BPI_MSG_QUERY_REPLY, &m);
	m.u.reply.status = 1;
	assert_int_equal(bpi_proto_encode(&m, buf, sizeof(buf)), -EINVAL);
}

/* ------------------------------------------------- fill and digest */

#define GOLDEN 0x9e3779b97f4a7c15ull

static uint64_t ref_mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void test_fill_page(void **state)
{
	uint8_t a[4096 + 8], b[4096 + 8], c[13];

	(void)state;
	bp_rdma_fill_page(1, 2, a, 4096);
	bp_rdma_fill_page(1, 2, b, 4096);
	assert_memory_equal(a, b, 4096); /* deterministic */
	bp_rdma_fill_page(1, 3, b, 4096);
	assert_memory_not_equal(a, b, 4096); /* index matters */
	bp_rdma_fill_page(2, 2, b, 4096);
	assert_memory_not_equal(a, b, 4096); /* seed matters */
	/* a shorter page, even one not a multiple of 8, is a prefix */
	bp_rdma_fill_page(1, 2, c, sizeof(c));
	assert_memory_equal(a, c, sizeof(c));
	/* unaligned buffers, and nothing written past page */
	memset(b, 0xee, sizeof(b));
	bp_rdma_fill_page(1, 2, b + 1, 4095);
	assert_memory_equal(a, b + 1, 4095);
	assert_int_equal(b[4096], 0xee);
	bp_rdma_fill_page(1, 2, NULL, 4096); /* ignored */
	bp_rdma_fill_page(1, 2, b, 0);
	/* the documented formula, written out again here: little-endian
	 * words of a splitmix64 stream whose start depends on seed and
	 * index; both ends of a fill depend on it staying this */
	{
		uint64_t start = ref_mix(1 ^ ref_mix(2 + GOLDEN)), w;

		for (unsigned j = 0; j < 4096 / 8; j++) {
			w = 0;
			for (int i = 7; i >= 0; i--)
				w = w << 8 | a[8 * j + (unsigned)i];
			assert_int_equal(w, ref_mix(start + (j + 1) * GOLDEN));
		}
		/* the tail of a 13-byte page: the low 5 bytes of word 1 */
		w = ref_mix(start + 2 * GOLDEN);
		for (unsigned i = 0; i < 5; i++)
			assert_int_equal(c[8 + i], (uint8_t)(w >> (8 * i)));
	}
}

static void test_digest(void **state)
{
	const uint64_t off = 0xcbf29ce484222325ull, prime = 0x100000001b3ull;
	uint8_t buf[19];
	uint64_t h, w;

	(void)state;
	assert_int_equal(bp_rdma_digest(NULL, 0), off);
	assert_int_equal(bp_rdma_digest(NULL, 100), off);
	assert_int_equal(bp_rdma_digest(buf, 0), off);
	for (unsigned i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 7 + 1);
	/* by the definition: two little-endian words, then 3 bytes */
	h = off;
	for (unsigned k = 0; k < 2; k++) {
		w = 0;
		for (int i = 7; i >= 0; i--)
			w = w << 8 | buf[8 * k + (unsigned)i];
		h = (h ^ w) * prime;
	}
	for (unsigned i = 16; i < 19; i++)
		h = (h ^ buf[i]) * prime;
	assert_int_equal(bp_rdma_digest(buf, sizeof(buf)), h);
	/* in pieces of multiples of 8, the last one any length: the same */
	assert_int_equal(BP_RDMA_DIGEST_INIT, off);
	assert_int_equal(
		bp_rdma_digest_more(
			bp_rdma_digest_more(BP_RDMA_DIGEST_INIT, buf, 8),
			buf + 8, 11),
		h);
	assert_int_equal(
		bp_rdma_digest_more(
			bp_rdma_digest_more(BP_RDMA_DIGEST_INIT, buf, 16),
			buf + 16, 3),
		h);
	assert_int_equal(bp_rdma_digest_more(h, NULL, 5), h);
	/* one bit anywhere changes it */
	for (unsigned i = 0; i < sizeof(buf); i++) {
		buf[i] ^= 0x10;
		assert_int_not_equal(bp_rdma_digest(buf, sizeof(buf)), h);
		buf[i] ^= 0x10;
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip_every_type),
		cmocka_unit_test(test_wire_layout),
		cmocka_unit_test(test_back_to_back),
		cmocka_unit_test(test_bad_magic),
		cmocka_unit_test(test_bad_version_and_type),
		cmocka_unit_test(test_oversized),
		cmocka_unit_test(test_length_mismatch),
		cmocka_unit_test(test_hello_fields),
		cmocka_unit_test(test_desc_fields),
		cmocka_unit_test(test_fill_page_bounds),
		cmocka_unit_test(test_status_signs),
		cmocka_unit_test(test_bad_arguments),
		cmocka_unit_test(test_fill_page),
		cmocka_unit_test(test_digest),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
