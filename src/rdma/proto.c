/* SPDX-License-Identifier: MIT */
/*
 * proto.c - encode and parse the bp-target control protocol (proto.h has
 * the wire format). The parser is the daemon's only contact with bytes from
 * the network: it never reads past len, never trusts a length before
 * checking it against what remains, and fails closed (any doubt is
 * -EBADMSG). It is fuzzed (tests/rdma/proto/fuzz_proto.c).
 */
#include <errno.h>
#include <string.h>

#include "src/rdma/proto.h"

/* ------------------------------------------------------------- reading */

/*
 * A cursor over the body. Once a read fails, bad is set and every later
 * read returns zeroes: the callers check bad once at the end instead of
 * after every field.
 */
struct rd {
	const uint8_t *p;
	size_t left;
	int bad;
};

static uint64_t rd_le(struct rd *r, unsigned bytes)
{
	uint64_t v = 0;

	if (r->bad || r->left < bytes) {
		r->bad = 1;
		return 0;
	}
	for (unsigned i = 0; i < bytes; i++)
		v |= (uint64_t)r->p[i] << (8 * i);
	r->p += bytes;
	r->left -= bytes;
	return v;
}

static uint32_t rd_u32(struct rd *r)
{
	return (uint32_t)rd_le(r, 4);
}

static uint64_t rd_u64(struct rd *r)
{
	return rd_le(r, 8);
}

static int32_t rd_i32(struct rd *r)
{
	/* the format is two's complement; converting an out-of-range
	 * uint32_t to int32_t is implementation-defined in C, so map it by
	 * arithmetic that is exact for every value */
	uint32_t u = rd_u32(r);

	return u <= INT32_MAX ? (int32_t)u : -(int32_t)(~u) - 1;
}

/* A str field into dst (size max + 1), NUL-terminated. */
static uint32_t rd_str(struct rd *r, char *dst, uint32_t max)
{
	uint32_t n = (uint32_t)rd_le(r, 2);

	if (r->bad || n > max || n > r->left || memchr(r->p, '\0', n) != NULL) {
		r->bad = 1;
		dst[0] = '\0';
		return 0;
	}
	memcpy(dst, r->p, n);
	dst[n] = '\0';
	r->p += n;
	r->left -= n;
	return n;
}

static void rd_desc(struct rd *r, struct bp_rdma_peer_desc *d)
{
	uint32_t rails = rd_u32(r);

	memset(d, 0, sizeof(*d));
	if (r->bad || rails < 1 || rails > BP_RDMA_MAX_RAILS) {
		r->bad = 1;
		return;
	}
	d->rails = rails;
	d->len = rd_u64(r);
	for (uint32_t i = 0; i < rails && !r->bad; i++) {
		uint32_t n = rd_u32(r);

		if (r->bad || n < 1 || n > BP_RDMA_ADDR_MAX || n > r->left) {
			r->bad = 1;
			return;
		}
		memcpy(d->rail[i].addr, r->p, n);
		d->rail[i].addrlen = n;
		r->p += n;
		r->left -= n;
		d->rail[i].base = rd_u64(r);
		d->rail[i].key = rd_u64(r);
	}
}

static int parse_body(uint16_t type, struct rd *r, struct bpi_msg *m)
{
	switch (type) {
	case BPI_MSG_HELLO:
		m->u.hello.token_len =
			rd_str(r, m->u.hello.token, BPI_TOKEN_MAX);
		rd_str(r, m->u.hello.provider, BPI_PROVIDER_MAX);
		m->u.hello.rails = rd_u32(r);
		m->u.hello.region_len = rd_u64(r);
		if (m->u.hello.rails < 1 ||
		    m->u.hello.rails > BP_RDMA_MAX_RAILS)
			r->bad = 1;
		break;
	case BPI_MSG_WELCOME:
		rd_str(r, m->u.welcome.provider, BPI_PROVIDER_MAX);
		rd_desc(r, &m->u.welcome.desc);
		break;
	case BPI_MSG_FILL:
		rd_desc(r, &m->u.fill.desc);
		m->u.fill.len = rd_u64(r);
		m->u.fill.page = rd_u32(r);
		m->u.fill.seed = rd_u64(r);
		if (m->u.fill.page < 1 || m->u.fill.page > BPI_FILL_PAGE_MAX)
			r->bad = 1;
		break;
	case BPI_MSG_FILL_PROGRESS:
		m->u.progress.done = rd_u64(r);
		break;
	case BPI_MSG_FILL_DONE:
		m->u.done.status = rd_i32(r);
		m->u.done.bytes = rd_u64(r);
		m->u.done.ns = rd_u64(r);
		if (m->u.done.status > 0)
			r->bad = 1;
		break;
	case BPI_MSG_QUERY:
		m->u.query.offset = rd_u64(r);
		m->u.query.len = rd_u64(r);
		break;
	case BPI_MSG_QUERY_REPLY:
		m->u.reply.status = rd_i32(r);
		m->u.reply.digest = rd_u64(r);
		m->u.reply.imm_count = rd_u64(r);
		m->u.reply.imm_sum = rd_u64(r);
		if (m->u.reply.status > 0)
			r->bad = 1;
		break;
	case BPI_MSG_ERROR:
		m->u.error.code = rd_i32(r);
		rd_str(r, m->u.error.text, BPI_TEXT_MAX);
		if (m->u.error.code >= 0)
			r->bad = 1;
		break;
	case BPI_MSG_BYE:
		break;
	default:
		return -EPROTO; /* the caller checked already; keep it closed */
	}
	/* trailing bytes are as wrong as missing ones */
	return r->bad || r->left != 0 ? -EBADMSG : 0;
}

ssize_t bpi_proto_parse(const void *buf, size_t len, struct bpi_msg *out)
{
	static const uint8_t magic[4] = {'B', 'P', 'R', 'T'};
	const uint8_t *b = buf;
	struct rd hdr, body;
	uint16_t version, type;
	uint32_t blen;
	struct bpi_msg m;
	int rc;

	if (buf == NULL && len > 0)
		return -EINVAL;
	/* Magic first, on as many bytes as have come: a client speaking
	 * another protocol is turned away on its first byte. */
	for (size_t i = 0; i < len && i < sizeof(magic); i++)
		if (b[i] != magic[i])
			return -EPROTO;
	if (len < BPI_HDR_LEN)
		return 0;
	hdr = (struct rd){.p = b + 4, .left = BPI_HDR_LEN - 4};
	version = (uint16_t)rd_le(&hdr, 2);
	type = (uint16_t)rd_le(&hdr, 2);
	blen = rd_u32(&hdr);
	if (version != BPI_PROTO_VERSION)
		return -EPROTO;
	if (type < BPI_MSG_HELLO || type > BPI_MSG_TYPE_MAX)
		return -EPROTO;
	if (blen > BPI_MSG_MAX - BPI_HDR_LEN)
		return -EMSGSIZE;
	if (len - BPI_HDR_LEN < blen)
		return 0;
	body = (struct rd){.p = b + BPI_HDR_LEN, .left = blen};
	memset(&m, 0, sizeof(m));
	m.type = type;
	rc = parse_body(type, &body, &m);
	if (rc < 0)
		return rc;
	if (out != NULL)
		*out = m;
	return (ssize_t)(BPI_HDR_LEN + blen);
}

/* ------------------------------------------------------------- writing */

/* The writer mirrors the reader: sticky failure, checked once. p NULL
 * counts bytes without writing them (the validating dry run). */
struct wr {
	uint8_t *p;
	size_t left;
	int err; /* 0, -ENOSPC, -EINVAL */
};

static void wr_le(struct wr *w, uint64_t v, unsigned bytes)
{
	if (w->err)
		return;
	if (w->left < bytes) {
		w->err = -ENOSPC;
		return;
	}
	w->left -= bytes;
	if (w->p == NULL)
		return;
	for (unsigned i = 0; i < bytes; i++)
		w->p[i] = (uint8_t)(v >> (8 * i));
	w->p += bytes;
}

static void wr_raw(struct wr *w, const void *src, size_t n)
{
	if (w->err)
		return;
	if (w->left < n) {
		w->err = -ENOSPC;
		return;
	}
	w->left -= n;
	if (w->p == NULL || n == 0)
		return;
	memcpy(w->p, src, n);
	w->p += n;
}

static void wr_str(struct wr *w, const char *s, uint32_t max)
{
	size_t n = s != NULL ? strnlen(s, (size_t)max + 1) : 0;

	if (n > max) {
		w->err = w->err ? w->err : -EINVAL;
		return;
	}
	wr_le(w, n, 2);
	wr_raw(w, s, n);
}

static void wr_desc(struct wr *w, const struct bp_rdma_peer_desc *d)
{
	if (d->rails < 1 || d->rails > BP_RDMA_MAX_RAILS) {
		w->err = w->err ? w->err : -EINVAL;
		return;
	}
	wr_le(w, d->rails, 4);
	wr_le(w, d->len, 8);
	for (unsigned i = 0; i < d->rails; i++) {
		uint32_t n = d->rail[i].addrlen;

		if (n < 1 || n > BP_RDMA_ADDR_MAX) {
			w->err = w->err ? w->err : -EINVAL;
			return;
		}
		wr_le(w, n, 4);
		wr_raw(w, d->rail[i].addr, n);
		wr_le(w, d->rail[i].base, 8);
		wr_le(w, d->rail[i].key, 8);
	}
}

static void wr_i32(struct wr *w, int32_t v)
{
	wr_le(w, (uint32_t)v, 4); /* two's complement, as rd_i32 reads it */
}

static void encode_body(const struct bpi_msg *m, struct wr *w)
{
	switch (m->type) {
	case BPI_MSG_HELLO:
		if (m->u.hello.rails < 1 ||
		    m->u.hello.rails > BP_RDMA_MAX_RAILS)
			w->err = -EINVAL;
		wr_str(w, m->u.hello.token, BPI_TOKEN_MAX);
		wr_str(w, m->u.hello.provider, BPI_PROVIDER_MAX);
		wr_le(w, m->u.hello.rails, 4);
		wr_le(w, m->u.hello.region_len, 8);
		break;
	case BPI_MSG_WELCOME:
		wr_str(w, m->u.welcome.provider, BPI_PROVIDER_MAX);
		wr_desc(w, &m->u.welcome.desc);
		break;
	case BPI_MSG_FILL:
		if (m->u.fill.page < 1 || m->u.fill.page > BPI_FILL_PAGE_MAX)
			w->err = -EINVAL;
		wr_desc(w, &m->u.fill.desc);
		wr_le(w, m->u.fill.len, 8);
		wr_le(w, m->u.fill.page, 4);
		wr_le(w, m->u.fill.seed, 8);
		break;
	case BPI_MSG_FILL_PROGRESS:
		wr_le(w, m->u.progress.done, 8);
		break;
	case BPI_MSG_FILL_DONE:
		if (m->u.done.status > 0)
			w->err = -EINVAL;
		wr_i32(w, m->u.done.status);
		wr_le(w, m->u.done.bytes, 8);
		wr_le(w, m->u.done.ns, 8);
		break;
	case BPI_MSG_QUERY:
		wr_le(w, m->u.query.offset, 8);
		wr_le(w, m->u.query.len, 8);
		break;
	case BPI_MSG_QUERY_REPLY:
		if (m->u.reply.status > 0)
			w->err = -EINVAL;
		wr_i32(w, m->u.reply.status);
		wr_le(w, m->u.reply.digest, 8);
		wr_le(w, m->u.reply.imm_count, 8);
		wr_le(w, m->u.reply.imm_sum, 8);
		break;
	case BPI_MSG_ERROR:
		if (m->u.error.code >= 0)
			w->err = -EINVAL;
		wr_i32(w, m->u.error.code);
		wr_str(w, m->u.error.text, BPI_TEXT_MAX);
		break;
	case BPI_MSG_BYE:
		break;
	default:
		w->err = -EINVAL;
	}
}

ssize_t bpi_proto_encode(const struct bpi_msg *m, void *buf, size_t size)
{
	struct wr w;
	size_t blen;

	if (m == NULL || (buf == NULL && size > 0))
		return -EINVAL;
	/* A dry run (p NULL: count only) validates every field before a
	 * byte is written, so a bad message is -EINVAL whatever the size. */
	w = (struct wr){.p = NULL, .left = BPI_MSG_MAX - BPI_HDR_LEN};
	encode_body(m, &w);
	if (w.err)
		return w.err == -ENOSPC ? -EINVAL : w.err;
	blen = BPI_MSG_MAX - BPI_HDR_LEN - w.left;
	if (size < BPI_HDR_LEN + blen)
		return -ENOSPC;
	w = (struct wr){.p = buf, .left = BPI_HDR_LEN};
	wr_le(&w, BPI_PROTO_MAGIC, 4);
	wr_le(&w, BPI_PROTO_VERSION, 2);
	wr_le(&w, m->type, 2);
	wr_le(&w, blen, 4);
	w.left = blen;
	encode_body(m, &w);
	return (ssize_t)(BPI_HDR_LEN + blen);
}

const char *bpi_proto_type_name(unsigned type)
{
	static const char *const names[] = {
		[BPI_MSG_HELLO] = "HELLO",
		[BPI_MSG_WELCOME] = "WELCOME",
		[BPI_MSG_FILL] = "FILL",
		[BPI_MSG_FILL_PROGRESS] = "FILL_PROGRESS",
		[BPI_MSG_FILL_DONE] = "FILL_DONE",
		[BPI_MSG_QUERY] = "QUERY",
		[BPI_MSG_QUERY_REPLY] = "QUERY_REPLY",
		[BPI_MSG_ERROR] = "ERROR",
		[BPI_MSG_BYE] = "BYE",
	};

	if (type < BPI_MSG_HELLO || type > BPI_MSG_TYPE_MAX)
		return "unknown";
	return names[type];
}
