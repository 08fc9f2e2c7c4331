/* SPDX-License-Identifier: MIT */
/*
 * clients.c - bp-target's control connections. Each is a non-blocking
 * socket in the main epoll loop with an input buffer of one maximum message
 * (so a message that fits the protocol always fits the buffer) and a small
 * output buffer. Every byte goes through bpi_proto_parse; anything it
 * refuses, a message out of turn, a client that stops in the middle of a
 * message for --stall-ms, or one that does not read its answers closes
 * that connection alone, with a log line saying which and why.
 *
 * A client's region is daemon memory (anonymous mmap: zeroed and page
 * aligned) exposed through the node under keys of its own; it lives from
 * WELCOME to the end of the connection. A client whose fill is still in the
 * pipeline when its connection ends stays in the list, without a socket,
 * until the fill's last page is back (the jobs point at its request).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "target.h"

#define OUT_MAX		  (16u << 10) /* answers not yet sent */
#define PROGRESS_EVERY_NS (100ll * 1000000ll)

enum client_state {
	CS_HELLO, /* connected, HELLO not yet seen */
	CS_READY, /* WELCOME sent: QUERY, FILL, BYE */
	CS_GONE,  /* socket closed; waits for its fill to come back */
};

struct client {
	struct client *prev, *next;
	uint64_t id;
	int fd;
	enum client_state state;
	bool out_armed; /* EPOLLOUT requested */
	char name[96];
	struct sockaddr_storage peer, local; /* the control connection */
	long owner_hint; /* the process last found holding its socket */
	int fill_peer;	 /* the fill stage's peer id it holds, or -1 */
	/* a QUERY being digested, QUERY_STEP bytes per pass of the loop:
	 * [q_off, q_end) is left, q_h the digest so far */
	bool query;
	uint64_t q_off, q_end, q_h;
	bool eof; /* it stopped sending with a query pending: answer, close */
	int64_t accepted_ns;
	int64_t partial_since_ns; /* first byte of an incomplete message */
	void *mem;		  /* the region */
	size_t map_len;
	uint64_t region_len;
	struct bp_rdma_region *reg;
	struct fill_req *fill;
	int64_t progress_ns; /* last FILL_PROGRESS */
	size_t inlen, outoff, outlen;
	uint8_t in[BPI_MSG_MAX];
	uint8_t out[OUT_MAX];
};

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

const char *client_name(const struct client *c)
{
	return c->name;
}

/*
 * A region's memory outlives its keys by a while. A write the provider
 * had begun receiving before the keys went (tcp: a recv() into the
 * region) may still land; so the range is replaced by fresh anonymous
 * pages at the same addresses (the client's bytes are gone, nothing else
 * can be mapped there) and unmapped only QUARANTINE_NS later.
 */
#define QUARANTINE_NS (5 * 1000000000ll)

struct quarantined {
	void *mem;
	size_t len;
	int64_t since;
	struct quarantined *next;
};

static void quarantine(struct target *t, void *mem, size_t len)
{
	struct quarantined *q = malloc(sizeof(*q));

	if (!q || mmap(mem, len, PROT_READ | PROT_WRITE,
		       MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		       -1, 0) == MAP_FAILED) {
		free(q);
		munmap(mem, len); /* no quarantine possible: unmap now */
		return;
	}
	*q = (struct quarantined){mem, len, now_ns(), t->quarantine};
	t->quarantine = q;
}

/* Unmap what has been quarantined long enough (all, with force). */
static void quarantine_release(struct target *t, bool force)
{
	struct quarantined **pp = &t->quarantine;
	int64_t now = now_ns();

	while (*pp) {
		struct quarantined *q = *pp;

		if (!force && now - q->since < QUARANTINE_NS) {
			pp = &q->next;
			continue;
		}
		*pp = q->next;
		munmap(q->mem, q->len);
		free(q);
	}
}

static void client_free(struct target *t, struct client *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		t->clients = c->next;
	if (c->next)
		c->next->prev = c->prev;
	t->nclients--;
	/* its fill is back (or the pipeline gone): the peer id is free */
	if (t->filler)
		filler_peer_put(t->filler, c->fill_peer);
	/* withdraw the keys before the memory goes */
	bp_rdma_region_close(c->reg);
	if (c->mem != NULL)
		quarantine(t, c->mem, c->map_len);
	fill_req_free(c->fill);
	free(c);
}

/* End the conversation (the region stays while a fill is out). */
static void client_drop(struct target *t, struct client *c, int verbose_only,
			const char *why)
{
	c->query = false; /* nobody to answer */
	if (c->state != CS_GONE) {
		tlog(t, verbose_only, c, "closing: %s", why);
		epoll_ctl(t->epfd, EPOLL_CTL_DEL, c->fd, NULL);
		close(c->fd);
		c->fd = -1;
		c->state = CS_GONE;
	}
	if (c->fill != NULL) {
		fill_req_stop(c->fill);
		if (t->filler)
			filler_peer_abandon(t->filler, c->fill_peer);
		tlog(t, 0, c,
		     "its fill is still in flight: its region is kept until "
		     "the pages out are back");
		return; /* freed by clients_tick once the fill is back */
	}
	client_free(t, c);
}

/* What epoll reports for c: its input until it ended, output while owed. */
static void epoll_set(struct target *t, struct client *c)
{
	struct epoll_event ev = {.events = (c->eof ? 0 : EPOLLIN) |
					   (c->out_armed ? EPOLLOUT : 0),
				 .data.ptr = c};

	epoll_ctl(t->epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

static void arm_out(struct target *t, struct client *c, bool on)
{
	if (c->out_armed == on)
		return;
	c->out_armed = on;
	epoll_set(t, c);
}

/* Send what is queued. 0, or -1 when the client was dropped. */
static int flush_out(struct target *t, struct client *c)
{
	while (c->outoff < c->outlen) {
		ssize_t n = send(c->fd, c->out + c->outoff,
				 c->outlen - c->outoff, MSG_NOSIGNAL);

		if (n > 0) {
			c->outoff += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			arm_out(t, c, true);
			return 0;
		}
		client_drop(t, c, 0, n < 0 ? strerror(errno) : "send failed");
		return -1;
	}
	c->outoff = c->outlen = 0;
	arm_out(t, c, false);
	return 0;
}

/* Queue m and send what can go now. 0, or -1 when the client was dropped. */
static int send_msg(struct target *t, struct client *c, const struct bpi_msg *m)
{
	ssize_t n;

	if (c->outoff > 0 && c->outoff == c->outlen)
		c->outoff = c->outlen = 0;
	n = bpi_proto_encode(m, c->out + c->outlen, sizeof(c->out) - c->outlen);
	if (n == -ENOSPC) {
		client_drop(t, c, 0, "does not read its answers");
		return -1;
	}
	if (n < 0) { /* a bug of ours: say so rather than send garbage */
		tlog(t, 0, c, "cannot encode %s: %s",
		     bpi_proto_type_name(m->type), strerror((int)-n));
		client_drop(t, c, 0, "internal error");
		return -1;
	}
	c->outlen += (size_t)n;
	return flush_out(t, c);
}

/* ERROR(code, text), then close: for what ends a conversation. */
static void refuse(struct target *t, struct client *c, int code,
		   const char *text)
{
	struct bpi_msg m = {.type = BPI_MSG_ERROR};

	m.u.error.code = code;
	snprintf(m.u.error.text, sizeof(m.u.error.text), "%s", text);
	if (send_msg(t, c, &m) == 0)
		client_drop(t, c, 0, text);
}

/* What a parser error means, for the log: which check failed. */
static void describe_bad(const struct client *c, ssize_t err, char *buf,
			 size_t size)
{
	const uint8_t *b = c->in;
	unsigned version = c->inlen >= 6 ? b[4] | (unsigned)b[5] << 8 : 0;
	unsigned type = c->inlen >= 8 ? b[6] | (unsigned)b[7] << 8 : 0;
	unsigned long blen = c->inlen >= 12
				     ? (unsigned long)b[8] |
					       (unsigned long)b[9] << 8 |
					       (unsigned long)b[10] << 16 |
					       (unsigned long)b[11] << 24
				     : 0;

	if (err == -EMSGSIZE)
		snprintf(buf, size,
			 "oversized message: header announces %lu body bytes "
			 "(limit %u)",
			 blen, BPI_MSG_MAX - BPI_HDR_LEN);
	else if (err == -EPROTO && c->inlen >= 4 && memcmp(b, "BPRT", 4) != 0)
		snprintf(buf, size, "garbage: wrong magic %02x %02x %02x %02x",
			 b[0], b[1], b[2], b[3]);
	else if (err == -EPROTO && c->inlen < 4)
		snprintf(buf, size, "garbage: wrong magic");
	else if (err == -EPROTO && version != BPI_PROTO_VERSION)
		snprintf(buf, size, "wrong protocol version %u (want %u)",
			 version, BPI_PROTO_VERSION);
	else if (err == -EPROTO)
		snprintf(buf, size, "unknown message type %u", type);
	else
		snprintf(buf, size, "malformed %s body (%lu bytes)",
			 bpi_proto_type_name(type), blen);
}

/* The handlers return 0, or -1 when the client was dropped (c may be
 * freed: do not touch it). */
static int on_hello(struct target *t, struct client *c, const struct bpi_msg *m)
{
	const char *prov = bp_rdma_node_provider(t->node);
	struct bpi_msg w = {.type = BPI_MSG_WELCOME};
	uint64_t len = m->u.hello.region_len;
	long pagesz = sysconf(_SC_PAGESIZE);
	char text[BPI_TEXT_MAX];
	int rc;

	if (!auth_check(t, m->u.hello.token, m->u.hello.token_len)) {
		refuse(t, c, -EACCES, "wrong token");
		return -1;
	}
	if (health_wedged(t, text, sizeof(text))) {
		refuse(t, c, -EIO, text);
		return -1;
	}
	if (m->u.hello.provider[0] != '\0' &&
	    strcmp(m->u.hello.provider, prov) != 0) {
		snprintf(text, sizeof(text),
			 "provider %s not served: this daemon serves %s",
			 m->u.hello.provider, prov);
		refuse(t, c, -EINVAL, text);
		return -1;
	}
	if (m->u.hello.rails != t->o.rails) {
		snprintf(text, sizeof(text),
			 "rails %u asked: this daemon has %u rails",
			 m->u.hello.rails, t->o.rails);
		refuse(t, c, -EINVAL, text);
		return -1;
	}
	if (len == 0 || len > t->o.max_region) {
		snprintf(text, sizeof(text),
			 "region of %llu bytes refused (1..%llu, --max-region)",
			 (unsigned long long)len,
			 (unsigned long long)t->o.max_region);
		refuse(t, c, len == 0 ? -EINVAL : -ENOMEM, text);
		return -1;
	}
	c->map_len = (size_t)((len + (uint64_t)pagesz - 1) &
			      ~((uint64_t)pagesz - 1));
	/* anonymous mmap: zeroed and page aligned, and given back whole */
	c->mem = mmap(NULL, c->map_len, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (c->mem == MAP_FAILED) {
		c->mem = NULL;
		snprintf(text, sizeof(text), "cannot allocate %llu bytes",
			 (unsigned long long)len);
		refuse(t, c, -ENOMEM, text);
		return -1;
	}
	c->region_len = len;
	rc = bp_rdma_node_expose(t->node, c->mem, (size_t)len, NULL, &c->reg);
	if (rc < 0) {
		c->reg = NULL;
		snprintf(text, sizeof(text), "cannot expose the region: %s",
			 strerror(-rc));
		refuse(t, c, rc, text);
		return -1;
	}
	snprintf(w.u.welcome.provider, sizeof(w.u.welcome.provider), "%s",
		 prov);
	bp_rdma_region_describe(c->reg, &w.u.welcome.desc);
	if (send_msg(t, c, &w) < 0)
		return -1;
	c->state = CS_READY;
	tlog(t, 1, c, "welcome: region of %llu bytes", (unsigned long long)len);
	return 0;
}

/*
 * A QUERY's digest goes QUERY_STEP bytes per pass of the main loop, every
 * client's in turn (clients_work), so that one client's query of a large
 * region holds up nobody's control traffic (a 1 GiB one took 0.49 s in one
 * go): about 0.5 ms a step here.
 */
#define QUERY_STEP (1u << 20)

static int query_reply(struct target *t, struct client *c, int status,
		       uint64_t digest)
{
	struct bpi_msg r = {.type = BPI_MSG_QUERY_REPLY};

	r.u.reply.status = status;
	r.u.reply.digest = digest;
	r.u.reply.imm_count = bp_rdma_node_data_count(t->node);
	/* relaxed: a statistic; on_data's adds are ordered with nothing */
	r.u.reply.imm_sum =
		atomic_load_explicit(&t->imm_sum, memory_order_relaxed);
	return send_msg(t, c, &r);
}

static int on_query(struct target *t, struct client *c, const struct bpi_msg *m)
{
	uint64_t off = m->u.query.offset, len = m->u.query.len;

	if (off > c->region_len || len > c->region_len - off) {
		tlog(t, 1, c, "query [%llu, +%llu) outside the region",
		     (unsigned long long)off, (unsigned long long)len);
		return query_reply(t, c, -ERANGE, 0);
	}
	/* the rest of its input waits until the reply is out (one request
	 * at a time, answered in order) */
	c->query = true;
	c->q_off = off;
	c->q_end = off + len;
	c->q_h = BP_RDMA_DIGEST_INIT;
	return 0;
}

static int drain_input(struct target *t, struct client *c);

/* One step of c's query; the reply once it is whole. -1: c dropped. */
static int query_step(struct target *t, struct client *c)
{
	uint64_t n = c->q_end - c->q_off;

	if (n > QUERY_STEP)
		n = QUERY_STEP; /* a multiple of 8: the digest goes on */
	rdma_reads_begin();	/* see target.h */
	c->q_h = bp_rdma_digest_more(c->q_h, (const uint8_t *)c->mem + c->q_off,
				     (size_t)n);
	rdma_reads_end();
	c->q_off += n;
	if (c->q_off < c->q_end)
		return 0;
	c->query = false;
	if (query_reply(t, c, 0, c->q_h) < 0 || drain_input(t, c) < 0)
		return -1;	   /* and what came meanwhile */
	if (c->eof && !c->query) { /* it had said all it would */
		client_drop(t, c, c->inlen == 0,
			    c->inlen ? "truncated: connection ended inside "
				       "a message"
				     : "disconnected");
		return -1;
	}
	return 0;
}

void clients_work(struct target *t)
{
	struct client *c, *next;

	for (c = t->clients; c != NULL; c = next) {
		next = c->next; /* c may be freed below */
		if (c->query && c->state != CS_GONE)
			query_step(t, c);
	}
}

/*
 * Whether the FILL's endpoints are the client's own (fillauth.c). Looked
 * at anew for every FILL (a port can change hands between two); the
 * process found holding the client's socket is looked at first, so that
 * costs a read of /proc/net/tcp and of that process's fds, not of every
 * process's.
 */
static int fill_allowed(struct target *t, struct client *c,
			const struct bp_rdma_peer_desc *d)
{
	char why[256];
	int rc = fill_auth_check(&c->peer, &c->local, d, &c->owner_hint, why,
				 sizeof(why));

	if (rc < 0)
		tlog(t, 0, c, "fill refused: %s", why);
	return rc;
}

static int on_fill(struct target *t, struct client *c, const struct bpi_msg *m)
{
	struct bpi_msg d = {.type = BPI_MSG_FILL_DONE};
	int rc;

	if (c->fill != NULL) {
		refuse(t, c, -EPROTO, "FILL while its fill is running");
		return -1;
	}
	if (m->u.fill.desc.rails > BP_RDMA_MAX_RAILS) /* the parser's bound */
		rc = -EINVAL;
	else
		rc = fill_allowed(t, c, &m->u.fill.desc);
	/*
	 * One peer id per client: a FILL of another region gives the old
	 * one back first (none of its pages is in flight: one fill at a
	 * time), so a client asking for many regions holds one slot.
	 */
	if (rc == 0 &&
	    !filler_peer_is(t->filler, c->fill_peer, &m->u.fill.desc)) {
		filler_peer_put(t->filler, c->fill_peer);
		c->fill_peer = filler_peer_get(t->filler, &m->u.fill.desc);
		rc = c->fill_peer < 0 ? c->fill_peer : 0;
		if (rc == -ENOSPC)
			tlog(t, 0, c,
			     "fill refused: every fill peer slot is held by "
			     "a client (--max-fill-peers %u)",
			     t->o.max_fill_peers);
	}
	if (rc < 0) {
		d.u.done.status = rc;
		return send_msg(t, c, &d);
	}
	rc = filler_start(t->filler, m, c->fill_peer, &c->fill);
	if (rc < 0) {
		c->fill = NULL;
		tlog(t, 0, c, "fill of %llu bytes in pages of %u refused: %s%s",
		     (unsigned long long)m->u.fill.len, m->u.fill.page,
		     strerror(-rc),
		     rc == -EINVAL ? " (page over the staging buffer, or "
				     "len/rails do not fit the region)"
				   : "");
		d.u.done.status = rc;
		return send_msg(t, c, &d);
	}
	c->progress_ns = now_ns();
	tlog(t, 1, c, "fill: %llu bytes in pages of %u, seed %llu",
	     (unsigned long long)m->u.fill.len, m->u.fill.page,
	     (unsigned long long)m->u.fill.seed);
	return 0;
}

/* One parsed message. Returns -1 when the client was dropped. */
static int on_msg(struct target *t, struct client *c, const struct bpi_msg *m)
{
	char text[128];

	if (c->state == CS_HELLO && m->type != BPI_MSG_HELLO) {
		snprintf(text, sizeof(text), "expected HELLO, got %s",
			 bpi_proto_type_name(m->type));
		refuse(t, c, -EPROTO, text);
		return -1;
	}
	switch (m->type) {
	case BPI_MSG_HELLO:
		if (c->state != CS_HELLO)
			break;
		return on_hello(t, c, m);
	case BPI_MSG_QUERY:
		return on_query(t, c, m);
	case BPI_MSG_FILL:
		return on_fill(t, c, m);
	case BPI_MSG_BYE:
		client_drop(t, c, 1, "BYE");
		return -1;
	default:
		break;
	}
	snprintf(text, sizeof(text), "%s out of turn",
		 bpi_proto_type_name(m->type));
	refuse(t, c, -EPROTO, text);
	return -1;
}

/* Parse and act on what is in the buffer. -1 when dropped. */
static int drain_input(struct target *t, struct client *c)
{
	for (;;) {
		if (c->query)
			return 0; /* the rest waits for its reply */
		struct bpi_msg m;
		ssize_t r = bpi_proto_parse(c->in, c->inlen, &m);
		char why[160];

		if (r == 0) {
			/* a stall is measured from the first byte of the
			 * message that is not complete */
			if (c->inlen == 0)
				c->partial_since_ns = 0;
			else if (c->partial_since_ns == 0)
				c->partial_since_ns = now_ns();
			return 0;
		}
		if (r < 0) {
			describe_bad(c, r, why, sizeof(why));
			/* no ERROR back: whoever sends this does not speak
			 * the protocol, or is probing it */
			client_drop(t, c, 0, why);
			return -1;
		}
		c->inlen -= (size_t)r;
		memmove(c->in, c->in + r, c->inlen);
		c->partial_since_ns = 0;
		if (on_msg(t, c, &m) < 0)
			return -1;
	}
}

static void on_readable(struct target *t, struct client *c)
{
	for (;;) {
		ssize_t n;
		char why[96];

		/* a full buffer behind a pending reply: read on after it;
		 * after the end of its input, nothing more to read */
		if (c->eof || (c->query && c->inlen == sizeof(c->in)))
			return;

		/* the buffer holds one maximum message, and a complete one
		 * is always consumed: it is never full here */
		n = recv(c->fd, c->in + c->inlen, sizeof(c->in) - c->inlen, 0);
		if (n > 0) {
			c->inlen += (size_t)n;
			if (drain_input(t, c) < 0)
				return;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n == 0 && c->query) {
			/* answer the query and what is buffered, then close */
			c->eof = true;
			epoll_set(t, c);
			return;
		}
		if (n == 0 && c->inlen > 0)
			snprintf(why, sizeof(why),
				 "truncated: connection ended %zu bytes into "
				 "a message",
				 c->inlen);
		else if (n == 0)
			snprintf(why, sizeof(why), "disconnected");
		else
			snprintf(why, sizeof(why), "recv: %s", strerror(errno));
		client_drop(t, c, n == 0 && c->inlen == 0, why);
		return;
	}
}

void clients_event(struct target *t, struct client *c, uint32_t events)
{
	if (events & EPOLLOUT) {
		if (flush_out(t, c) < 0)
			return;
	}
	if (events & (EPOLLIN | EPOLLERR | EPOLLHUP))
		on_readable(t, c);
}

void clients_accept(struct target *t)
{
	for (;;) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		char host[INET6_ADDRSTRLEN] = "?";
		unsigned port = 0;
		struct epoll_event ev;
		struct client *c;
		int fd;

		fd = accept4(t->lfd, (struct sockaddr *)&ss, &sl,
			     SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				tlog(t, 0, NULL, "accept: %s", strerror(errno));
			return;
		}
		if (ss.ss_family == AF_INET) {
			const struct sockaddr_in *a = (void *)&ss;

			inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
			port = ntohs(a->sin_port);
		} else if (ss.ss_family == AF_INET6) {
			const struct sockaddr_in6 *a = (void *)&ss;

			inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
			port = ntohs(a->sin6_port);
		}
		if (t->nclients >= t->o.max_clients) {
			static const char busy[] = "too many clients";
			uint8_t buf[64];
			struct bpi_msg m = {.type = BPI_MSG_ERROR};
			ssize_t n;

			m.u.error.code = -EBUSY;
			memcpy(m.u.error.text, busy, sizeof(busy));
			n = bpi_proto_encode(&m, buf, sizeof(buf));
			if (n > 0) /* best effort: a fresh socket has room */
				(void)!send(fd, buf, (size_t)n, MSG_NOSIGNAL);
			tlog(t, 0, NULL, "refusing %s:%u: %u clients already",
			     host, port, t->nclients);
			close(fd);
			continue;
		}
		c = calloc(1, sizeof(*c));
		if (c == NULL) {
			tlog(t, 0, NULL, "refusing %s:%u: out of memory", host,
			     port);
			close(fd);
			continue;
		}
		c->id = ++t->next_id;
		c->fd = fd;
		c->fill_peer = -1;
		c->peer = ss;
		sl = sizeof(c->local);
		if (getsockname(fd, (struct sockaddr *)&c->local, &sl) < 0)
			c->local.ss_family = AF_UNSPEC; /* FILL is refused */
		c->accepted_ns = now_ns();
		snprintf(c->name, sizeof(c->name), "client %llu (%s:%u)",
			 (unsigned long long)c->id, host, port);
		ev = (struct epoll_event){.events = EPOLLIN, .data.ptr = c};
		if (epoll_ctl(t->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
			tlog(t, 0, c, "epoll: %s", strerror(errno));
			close(fd);
			free(c);
			continue;
		}
		c->next = t->clients;
		if (c->next)
			c->next->prev = c;
		t->clients = c;
		t->nclients++;
		tlog(t, 1, c, "connected");
	}
}

/* The fill of c: progress now and then, FILL_DONE once all is back.
 * Returns -1 when c was freed or dropped. */
static int tick_fill(struct target *t, struct client *c, int64_t now)
{
	struct bpi_msg m;
	uint64_t done, ns;
	int status;

	if (!fill_req_poll(c->fill, &done, &status, &ns)) {
		if (c->state == CS_GONE)
			return -1;
		if (now - c->progress_ns < PROGRESS_EVERY_NS)
			return 0;
		c->progress_ns = now;
		m = (struct bpi_msg){.type = BPI_MSG_FILL_PROGRESS};
		m.u.progress.done = done;
		return send_msg(t, c, &m);
	}
	fill_req_free(c->fill);
	c->fill = NULL;
	if (c->state == CS_GONE) {
		tlog(t, 0, c,
		     "the fill of a client that went away is back (%llu bytes "
		     "written, %s): its region is freed",
		     (unsigned long long)done,
		     status < 0 ? strerror(-status) : "complete");
		client_free(t, c);
		return -1;
	}
	if (status < 0)
		tlog(t, 0, c, "fill failed after %llu bytes: %s",
		     (unsigned long long)done, strerror(-status));
	else
		tlog(t, 1, c, "fill done: %llu bytes in %.3f s",
		     (unsigned long long)done, (double)ns / 1e9);
	m = (struct bpi_msg){.type = BPI_MSG_FILL_DONE};
	m.u.done.status = status;
	m.u.done.bytes = done;
	m.u.done.ns = ns;
	return send_msg(t, c, &m);
}

void clients_tick(struct target *t)
{
	int64_t now = now_ns(), stall = (int64_t)t->o.stall_ms * 1000000ll;
	struct client *c, *next;
	char why[128];

	quarantine_release(t, false);
	for (c = t->clients; c != NULL; c = next) {
		next = c->next; /* c may be freed below */
		if (c->fill != NULL && tick_fill(t, c, now) < 0)
			continue;
		if (c->state == CS_GONE)
			continue;
		if (c->partial_since_ns && now - c->partial_since_ns > stall) {
			snprintf(why, sizeof(why),
				 "stalled mid-message: %zu bytes, nothing more "
				 "for %u ms",
				 c->inlen, t->o.stall_ms);
			client_drop(t, c, 0, why);
		} else if (c->state == CS_HELLO &&
			   now - c->accepted_ns > stall) {
			snprintf(why, sizeof(why), "no HELLO within %u ms",
				 t->o.stall_ms);
			client_drop(t, c, 0, why);
		}
	}
}

int clients_next_tick_ms(const struct target *t)
{
	/* progress is due every 100 ms and stalls are checked at the same
	 * pace (within 50 ms of --stall-ms); idle, the loop wakes 20 times
	 * a second, which costs nothing measurable */
	for (const struct client *c = t->clients; c != NULL; c = c->next)
		if (c->query && c->state != CS_GONE)
			return 0; /* a query to go on with */
	return t->clients != NULL || t->quarantine != NULL ? 50 : 500;
}

void clients_stop_fills(struct target *t)
{
	for (struct client *c = t->clients; c != NULL; c = c->next) {
		if (c->fill != NULL) {
			fill_req_stop(c->fill);
			fill_req_join(c->fill);
		}
	}
}

void clients_close_all(struct target *t)
{
	while (t->clients != NULL) {
		struct client *c = t->clients;

		if (c->state != CS_GONE) {
			tlog(t, 1, c, "closing: daemon exits");
			epoll_ctl(t->epfd, EPOLL_CTL_DEL, c->fd, NULL);
			close(c->fd);
			c->state = CS_GONE;
		}
		/* the pipeline is gone: nothing of the fill is in flight */
		client_free(t, c);
	}
}

void clients_release_memory(struct target *t)
{
	/*
	 * Only once no rail thread runs: the provider's progress (tcp: a
	 * recv() of a client's write into its region) may still be writing
	 * into the quarantined pages until bp_rdma_node_destroy joined it.
	 * Unmapping them before made bp-target die of SIGSEGV inside
	 * fi_trywait while it stopped with a client's writes in flight.
	 */
	quarantine_release(t, true);
}
