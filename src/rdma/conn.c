/* SPDX-License-Identifier: MIT */
/*
 * conn.c - the client side of the bp-target control protocol (proto.h):
 * one TCP connection, one exchange at a time, every wait bounded by the
 * configured timeout. Cold path: plain blocking logic over a non-blocking
 * socket and poll(), so that a daemon that stops answering costs a
 * timeout, never a hang.
 *
 * After an error that may leave the byte stream out of step (a timeout in
 * the middle of an exchange, a malformed answer, a closed connection) the
 * connection is marked broken and later calls fail with -EPIPE instead of
 * reading the answer to a question they did not ask.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <batchpipe/rdma.h>

#include "src/rdma/proto.h"

#define CONN_DEFAULT_TIMEOUT_NS (5ll * 1000000000ll)
#define CONN_DEFAULT_REGION	(1ull << 20)
#define CONN_BYE_TIMEOUT_NS	(200ll * 1000000ll)

struct bp_rdma_conn {
	int fd;
	int broken; /* 0, or the error that broke the stream */
	int64_t timeout_ns;
	void (*log)(void *log_ctx, enum bp_log_level level, const char *msg);
	void *log_ctx;
	char provider[BPI_PROVIDER_MAX + 1];
	struct bp_rdma_peer_desc peer;
	size_t inlen;
	uint8_t in[BPI_MSG_MAX];  /* bytes received, not yet parsed */
	uint8_t out[BPI_MSG_MAX]; /* one encoded message */
};

__attribute__((format(printf, 3, 4))) static void
conn_log(const struct bp_rdma_conn *c, enum bp_log_level level, const char *fmt,
	 ...)
{
	char msg[BPI_TEXT_MAX + 256];
	va_list ap;

	if (c->log == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	c->log(c->log_ctx, level, msg);
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* A deadline timeout_ns from now; INT64_MAX for no limit (< 0). */
static int64_t deadline_after(int64_t timeout_ns)
{
	return timeout_ns < 0 ? INT64_MAX : now_ns() + timeout_ns;
}

/* Wait for events on fd until the deadline: 1 ready, -ETIMEDOUT, -errno. */
static int wait_fd(int fd, short events, int64_t deadline)
{
	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = events};
		int64_t left = deadline == INT64_MAX ? -1 : deadline - now_ns();
		int ms, rc;

		if (deadline != INT64_MAX && left <= 0)
			return -ETIMEDOUT;
		/* round up: a 0.5 ms remainder must not become a busy poll */
		ms = left < 0 ? -1
		     : left > 3600000000000ll
			     ? 3600000
			     : (int)((left + 999999) / 1000000);
		rc = poll(&pfd, 1, ms);
		if (rc > 0)
			return 1;
		if (rc < 0 && errno != EINTR)
			return -errno;
	}
}

static void conn_break(struct bp_rdma_conn *c, int err)
{
	if (!c->broken)
		c->broken = err;
}

static int send_msg(struct bp_rdma_conn *c, const struct bpi_msg *m,
		    int64_t deadline)
{
	ssize_t len = bpi_proto_encode(m, c->out, sizeof(c->out));
	size_t off = 0;

	if (len < 0)
		return (int)len; /* a field we were given is out of range */
	while (off < (size_t)len) {
		ssize_t n = send(c->fd, c->out + off, (size_t)len - off,
				 MSG_NOSIGNAL);
		int rc;

		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
			rc = -errno;
			conn_log(c, BP_LOG_ERROR, "bp-target: send %s: %s",
				 bpi_proto_type_name(m->type), strerror(-rc));
			conn_break(c, rc);
			return rc;
		}
		rc = wait_fd(c->fd, POLLOUT, deadline);
		if (rc < 0) {
			conn_log(c, BP_LOG_ERROR, "bp-target: send %s: %s",
				 bpi_proto_type_name(m->type), strerror(-rc));
			/* part of a message may be out: the stream is lost */
			conn_break(c, rc);
			return rc;
		}
	}
	return 0;
}

/* The next message from the daemon: 0, -ETIMEDOUT, -EPROTO, -ECONNRESET. */
static int recv_msg(struct bp_rdma_conn *c, struct bpi_msg *m, int64_t deadline)
{
	for (;;) {
		ssize_t r = bpi_proto_parse(c->in, c->inlen, m);
		int rc;

		if (r > 0) {
			c->inlen -= (size_t)r;
			memmove(c->in, c->in + r, c->inlen);
			return 0;
		}
		if (r < 0) {
			conn_log(c, BP_LOG_ERROR,
				 "bp-target sent a malformed message: %s",
				 strerror((int)-r));
			conn_break(c, -EPROTO);
			return -EPROTO;
		}
		/* r == 0: the parser bounds a message to BPI_MSG_MAX, the
		 * size of in, so there is always room for the rest */
		r = recv(c->fd, c->in + c->inlen, sizeof(c->in) - c->inlen, 0);
		if (r > 0) {
			c->inlen += (size_t)r;
			continue;
		}
		if (r == 0) {
			conn_log(c, BP_LOG_ERROR,
				 "bp-target closed the connection%s",
				 c->inlen ? " in the middle of a message" : "");
			conn_break(c, -ECONNRESET);
			return -ECONNRESET;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK) {
			rc = -errno;
			conn_log(c, BP_LOG_ERROR, "bp-target: recv: %s",
				 strerror(errno));
			conn_break(c, rc);
			return rc;
		}
		rc = wait_fd(c->fd, POLLIN, deadline);
		if (rc < 0) {
			conn_log(c, BP_LOG_ERROR,
				 "bp-target did not answer in time: %s",
				 strerror(-rc));
			conn_break(c, rc);
			return rc;
		}
	}
}

/* The daemon's ERROR as our return value, logged with its text. The daemon
 * closes the connection after an ERROR: later calls get -EPIPE. */
static int daemon_error(struct bp_rdma_conn *c, const struct bpi_msg *m,
			const char *what)
{
	conn_break(c, m->u.error.code);
	conn_log(c, BP_LOG_ERROR, "bp-target refused %s: %s (%s)", what,
		 m->u.error.text, strerror(-m->u.error.code));
	return m->u.error.code;
}

static int unexpected(struct bp_rdma_conn *c, const struct bpi_msg *m,
		      const char *what)
{
	conn_log(c, BP_LOG_ERROR, "bp-target answered %s with %s", what,
		 bpi_proto_type_name(m->type));
	conn_break(c, -EPROTO);
	return -EPROTO;
}

void bp_rdma_conn_config_init(struct bp_rdma_conn_config *c)
{
	if (c == NULL)
		return;
	memset(c, 0, sizeof(*c));
	c->host = "127.0.0.1";
	c->port = BPI_DEFAULT_PORT;
	c->rails = 1;
	c->region_len = CONN_DEFAULT_REGION;
	c->timeout_ns = CONN_DEFAULT_TIMEOUT_NS;
}

static int map_connect_errno(int e)
{
	switch (e) {
	case ECONNREFUSED:
	case ETIMEDOUT:
	case EHOSTUNREACH:
		return -e;
	case ENETUNREACH:
	case EHOSTDOWN:
	case ENETDOWN:
	case EADDRNOTAVAIL:
		return -EHOSTUNREACH;
	default:
		return -e;
	}
}

/* One non-blocking connect, bounded by the deadline. */
static int connect_one(const struct addrinfo *ai, int64_t deadline, int *fdp)
{
	int fd, rc, err = 0, one = 1;
	socklen_t elen = sizeof(err);

	fd = socket(ai->ai_family,
		    ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    ai->ai_protocol);
	if (fd < 0)
		return -errno;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		if (errno != EINPROGRESS && errno != EINTR) {
			rc = map_connect_errno(errno);
			close(fd);
			return rc;
		}
		rc = wait_fd(fd, POLLOUT, deadline);
		if (rc < 0) {
			close(fd);
			return rc;
		}
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0)
			err = errno;
		if (err) {
			close(fd);
			return map_connect_errno(err);
		}
	}
	/* small request/answer messages: do not let Nagle hold them */
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	*fdp = fd;
	return 0;
}

static int tcp_connect(struct bp_rdma_conn *c, const char *host, unsigned port,
		       int64_t deadline)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICSERV};
	struct addrinfo *res, *ai;
	char service[16];
	int rc, gai;

	snprintf(service, sizeof(service), "%u", port);
	gai = getaddrinfo(host, service, &hints, &res);
	if (gai != 0) {
		conn_log(c, BP_LOG_ERROR, "bp-target: cannot resolve %s: %s",
			 host, gai_strerror(gai));
		return -EHOSTUNREACH;
	}
	rc = -EHOSTUNREACH;
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		rc = connect_one(ai, deadline, &c->fd);
		if (rc == 0 || rc == -ETIMEDOUT)
			break; /* the deadline covers all addresses */
	}
	freeaddrinfo(res);
	if (rc < 0)
		conn_log(c, BP_LOG_ERROR, "bp-target at %s:%u: %s", host, port,
			 strerror(-rc));
	return rc;
}

static int check_config(const struct bp_rdma_conn_config *c,
			struct bp_rdma_conn *log_as)
{
	const char *why = NULL;

	if (c->host == NULL || c->host[0] == '\0')
		why = "host is empty";
	else if (c->port < 1 || c->port > 65535)
		why = "port is out of 1..65535";
	else if (c->rails < 1 || c->rails > BP_RDMA_MAX_RAILS)
		why = "rails is out of 1..BP_RDMA_MAX_RAILS";
	else if (c->region_len == 0)
		why = "region_len is 0";
	else if (c->timeout_ns == 0)
		why = "timeout_ns is 0 (< 0 for no limit)";
	else if (c->token != NULL && strlen(c->token) > BPI_TOKEN_MAX)
		why = "token is longer than 256 bytes";
	else if (c->provider != NULL && strlen(c->provider) > BPI_PROVIDER_MAX)
		why = "provider name is longer than 64 bytes";
	if (why == NULL)
		return 0;
	conn_log(log_as, BP_LOG_ERROR, "bp_rdma_connect: %s", why);
	return -EINVAL;
}

static int hello(struct bp_rdma_conn *c, const struct bp_rdma_conn_config *cfg)
{
	int64_t deadline = deadline_after(c->timeout_ns);
	struct bpi_msg m = {.type = BPI_MSG_HELLO};
	const struct bp_rdma_peer_desc *d;
	int rc;

	if (cfg->token != NULL)
		strcpy(m.u.hello.token, cfg->token); /* length checked */
	if (cfg->provider != NULL)
		strcpy(m.u.hello.provider, cfg->provider);
	m.u.hello.rails = cfg->rails;
	m.u.hello.region_len = cfg->region_len;
	rc = send_msg(c, &m, deadline);
	if (rc < 0)
		return rc;
	rc = recv_msg(c, &m, deadline);
	if (rc < 0)
		return rc;
	if (m.type == BPI_MSG_ERROR)
		return daemon_error(c, &m, "this client");
	if (m.type != BPI_MSG_WELCOME)
		return unexpected(c, &m, "HELLO");
	d = &m.u.welcome.desc;
	/* The daemon checks provider and rails; an answer that does not
	 * match the question is a daemon we do not understand. */
	if ((cfg->provider != NULL && cfg->provider[0] != '\0' &&
	     strcmp(m.u.welcome.provider, cfg->provider) != 0) ||
	    d->rails != cfg->rails || d->len != cfg->region_len) {
		conn_log(c, BP_LOG_ERROR,
			 "bp-target WELCOME does not match HELLO: provider "
			 "%s rails %u len %llu for %s rails %u len %llu",
			 m.u.welcome.provider, d->rails,
			 (unsigned long long)d->len,
			 cfg->provider ? cfg->provider : "(any)", cfg->rails,
			 (unsigned long long)cfg->region_len);
		conn_break(c, -EPROTO);
		return -EPROTO;
	}
	memcpy(c->provider, m.u.welcome.provider, sizeof(c->provider));
	c->peer = *d;
	return 0;
}

int bp_rdma_connect(const struct bp_rdma_conn_config *cfg,
		    struct bp_rdma_conn **out)
{
	struct bp_rdma_conn *c;
	int rc;

	if (cfg == NULL || out == NULL)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return -ENOMEM;
	c->fd = -1;
	c->log = cfg->log;
	c->log_ctx = cfg->log_ctx;
	c->timeout_ns = cfg->timeout_ns;
	rc = check_config(cfg, c);
	if (rc == 0)
		rc = tcp_connect(c, cfg->host, cfg->port,
				 deadline_after(c->timeout_ns));
	if (rc == 0)
		rc = hello(c, cfg);
	if (rc < 0) {
		if (c->fd >= 0)
			close(c->fd);
		free(c);
		return rc;
	}
	*out = c;
	return 0;
}

void bp_rdma_conn_peer(const struct bp_rdma_conn *conn,
		       struct bp_rdma_peer_desc *d)
{
	if (d == NULL)
		return;
	if (conn == NULL) {
		memset(d, 0, sizeof(*d)); /* rails 0: peer_add refuses it */
		return;
	}
	*d = conn->peer;
}

const char *bp_rdma_conn_provider(const struct bp_rdma_conn *conn)
{
	return conn != NULL ? conn->provider : NULL;
}

static int check_desc(const struct bp_rdma_peer_desc *d)
{
	if (d->rails < 1 || d->rails > BP_RDMA_MAX_RAILS)
		return -EINVAL;
	for (unsigned i = 0; i < d->rails; i++)
		if (d->rail[i].addrlen < 1 ||
		    d->rail[i].addrlen > BP_RDMA_ADDR_MAX)
			return -EINVAL;
	return 0;
}

int bp_rdma_conn_fill(struct bp_rdma_conn *conn,
		      const struct bp_rdma_peer_desc *d, uint64_t len,
		      uint32_t page, uint64_t seed,
		      void (*progress)(void *ctx, uint64_t done, uint64_t len),
		      void *progress_ctx)
{
	struct bpi_msg m = {.type = BPI_MSG_FILL};
	uint64_t last_done = 0;
	int64_t stall_deadline;
	int rc;

	if (conn == NULL || d == NULL || check_desc(d) < 0 || len == 0 ||
	    len > d->len || page == 0 || page > BPI_FILL_PAGE_MAX)
		return -EINVAL;
	if (conn->broken)
		return -EPIPE;
	m.u.fill.desc = *d;
	m.u.fill.len = len;
	m.u.fill.page = page;
	m.u.fill.seed = seed;
	rc = send_msg(conn, &m, deadline_after(conn->timeout_ns));
	if (rc < 0)
		return rc;
	/*
	 * The daemon reports about every 100 ms. Each message restarts the
	 * wait for the next, but only progress restarts the stall clock: a
	 * daemon that keeps saying "0 bytes" for a whole timeout is stuck
	 * (e.g. writes that never land), not slow.
	 */
	stall_deadline = deadline_after(conn->timeout_ns);
	for (;;) {
		rc = recv_msg(conn, &m, stall_deadline);
		if (rc < 0)
			return rc;
		switch (m.type) {
		case BPI_MSG_FILL_PROGRESS:
			if (m.u.progress.done != last_done) {
				last_done = m.u.progress.done;
				stall_deadline =
					deadline_after(conn->timeout_ns);
			}
			if (progress != NULL)
				progress(progress_ctx, m.u.progress.done, len);
			break;
		case BPI_MSG_FILL_DONE:
			if (m.u.done.status == 0 && progress != NULL)
				progress(progress_ctx, m.u.done.bytes, len);
			if (m.u.done.status < 0)
				conn_log(conn, BP_LOG_ERROR,
					 "bp-target fill failed after %llu "
					 "bytes: %s",
					 (unsigned long long)m.u.done.bytes,
					 strerror(-m.u.done.status));
			return m.u.done.status;
		case BPI_MSG_ERROR:
			return daemon_error(conn, &m, "the fill");
		default:
			return unexpected(conn, &m, "FILL");
		}
	}
}

int bp_rdma_conn_query(struct bp_rdma_conn *conn, uint64_t offset, uint64_t len,
		       struct bp_rdma_target_query *q)
{
	struct bpi_msg m = {.type = BPI_MSG_QUERY};
	int64_t deadline;
	int rc;

	if (conn == NULL || q == NULL)
		return -EINVAL;
	if (conn->broken)
		return -EPIPE;
	deadline = deadline_after(conn->timeout_ns);
	m.u.query.offset = offset;
	m.u.query.len = len;
	rc = send_msg(conn, &m, deadline);
	if (rc < 0)
		return rc;
	rc = recv_msg(conn, &m, deadline);
	if (rc < 0)
		return rc;
	if (m.type == BPI_MSG_ERROR)
		return daemon_error(conn, &m, "the query");
	if (m.type != BPI_MSG_QUERY_REPLY)
		return unexpected(conn, &m, "QUERY");
	if (m.u.reply.status < 0)
		return m.u.reply.status;
	q->digest = m.u.reply.digest;
	q->imm_count = m.u.reply.imm_count;
	q->imm_sum = m.u.reply.imm_sum;
	return 0;
}

void bp_rdma_conn_close(struct bp_rdma_conn *conn)
{
	struct bpi_msg m = {.type = BPI_MSG_BYE};

	if (conn == NULL)
		return;
	/* best effort: the daemon frees the region on EOF as well */
	if (!conn->broken)
		(void)send_msg(conn, &m, deadline_after(CONN_BYE_TIMEOUT_NS));
	close(conn->fd);
	free(conn);
}
