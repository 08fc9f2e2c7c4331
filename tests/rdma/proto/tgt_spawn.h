/* SPDX-License-Identifier: MIT */
/*
 * tgt_spawn.h - start the real bp-target on an ephemeral loopback port and
 * talk raw TCP to it: what the daemon tests share.
 */
#ifndef BP_TESTS_TGT_SPAWN_H
#define BP_TESTS_TGT_SPAWN_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <batchpipe/wait.h> /* BP_TSAN */

#include "src/rdma/proto.h"

/*
 * Memory written by one-sided RDMA is copied in by a libfabric progress
 * thread with nothing the CPU side can synchronise with; the tests poll it
 * until it holds what they expect. Under TSAN those reads are excluded.
 */
#if BP_TSAN
void AnnotateIgnoreReadsBegin(const char *file, int line);
void AnnotateIgnoreReadsEnd(const char *file, int line);
void AnnotateIgnoreWritesBegin(const char *file, int line);
void AnnotateIgnoreWritesEnd(const char *file, int line);
#define tgt_rdma_reads_begin()	AnnotateIgnoreReadsBegin(__FILE__, __LINE__)
#define tgt_rdma_reads_end()	AnnotateIgnoreReadsEnd(__FILE__, __LINE__)
#define tgt_rdma_writes_begin() AnnotateIgnoreWritesBegin(__FILE__, __LINE__)
#define tgt_rdma_writes_end()	AnnotateIgnoreWritesEnd(__FILE__, __LINE__)
#else
#define tgt_rdma_reads_begin()	((void)0)
#define tgt_rdma_reads_end()	((void)0)
#define tgt_rdma_writes_begin() ((void)0)
#define tgt_rdma_writes_end()	((void)0)
#endif

/* Clear memory that RDMA writes into (between fills). */
static inline void tgt_rdma_zero(void *p, size_t n)
{
	tgt_rdma_writes_begin();
	memset(p, 0, n);
	tgt_rdma_writes_end();
}

struct tgt {
	pid_t pid;
	unsigned port;
	int out; /* the daemon's stdout */
};

static inline int64_t tgt_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* 0 when fi_info knows the provider (tests skip otherwise). */
static inline int tgt_have_provider(const char *prov)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "fi_info -p '%s' >/dev/null 2>&1", prov);
	return system(cmd) == 0 ? 0 : -1;
}

/*
 * Run exe with args (NULL-terminated, after the program name), FI_TCP_IFACE
 * set to lo, and read its "listening on ADDR:PORT" line. Returns 0, or -1
 * when it exited or said nothing in time (*status then set if it exited).
 */
static inline int tgt_spawn(struct tgt *t, const char *exe,
			    const char *const *args, int *status,
			    bool merge_stderr)
{
	const char *argv[32];
	char line[512];
	size_t n = 0, a = 0;
	int p[2];
	int64_t end = tgt_now_ms() + 30000; /* sanitizers, loaded machines */

	argv[a++] = exe;
	for (; args[a - 1] != NULL && a < 31; a++)
		argv[a] = args[a - 1];
	argv[a] = NULL;
	if (pipe(p) < 0)
		return -1;
	t->pid = fork();
	if (t->pid < 0)
		return -1;
	if (t->pid == 0) {
		/* a test that fails half-way leaves no daemon behind */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(p[1], 1);
		if (merge_stderr)
			dup2(p[1], 2);
		close(p[0]);
		close(p[1]);
		setenv("FI_TCP_IFACE", "lo", 1);
		execv(exe, (char *const *)argv);
		_exit(127);
	}
	close(p[1]);
	t->out = p[0];
	while (n < sizeof(line) - 1) {
		struct pollfd pfd = {.fd = t->out, .events = POLLIN};
		ssize_t r;

		if (poll(&pfd, 1, (int)(end - tgt_now_ms())) <= 0)
			break;
		r = read(t->out, line + n, 1);
		if (r <= 0)
			break;
		if (line[n] == '\n') {
			const char *colon;

			line[n] = '\0';
			fprintf(stderr, "[daemon] %s\n", line);
			colon = strrchr(line, ':');
			if (merge_stderr &&
			    strncmp(line, "bp-target: listening on ", 24)) {
				n = 0; /* a log line before it */
				continue;
			}
			if (strncmp(line, "bp-target: listening on ", 24) ||
			    colon == NULL)
				break;
			t->port = (unsigned)strtoul(colon + 1, NULL, 10);
			return t->port ? 0 : -1;
		}
		n++;
	}
	/* no line: it exited (a refused configuration) or hangs */
	for (int i = 0; i < 100; i++) {
		if (waitpid(t->pid, status, WNOHANG) == t->pid) {
			fprintf(stderr, "bp-target exited (status %#x)\n",
				*status);
			t->pid = 0;
			return -1;
		}
		usleep(50000);
	}
	fprintf(stderr, "bp-target said nothing in 30 s: killing it\n");
	kill(t->pid, SIGABRT); /* a core or a sanitizer report, if any */
	usleep(500000);
	kill(t->pid, SIGKILL);
	waitpid(t->pid, status, 0);
	t->pid = 0;
	return -1;
}

static inline int tgt_start(struct tgt *t, const char *exe,
			    const char *const *args, int *status)
{
	return tgt_spawn(t, exe, args, status, false);
}

/* The same, with the daemon's log (stderr) on t->out too, after the
 * "listening" line. */
static inline int tgt_start_logged(struct tgt *t, const char *exe,
				   const char *const *args, int *status)
{
	return tgt_spawn(t, exe, args, status, true);
}

/* SIGTERM and wait (10 s, then SIGKILL). Returns the exit status or -1. */
static inline int tgt_stop(struct tgt *t)
{
	int st = 0;

	if (t->pid <= 0)
		return -1;
	kill(t->pid, SIGTERM);
	for (int i = 0; i < 200; i++) {
		if (waitpid(t->pid, &st, WNOHANG) == t->pid) {
			t->pid = 0;
			close(t->out);
			return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
		}
		usleep(50000);
	}
	fprintf(stderr, "bp-target did not exit on SIGTERM\n");
	kill(t->pid, SIGKILL);
	waitpid(t->pid, &st, 0);
	t->pid = 0;
	close(t->out);
	return -1;
}

/* A raw, blocking TCP connection to 127.0.0.1:port. */
static inline int tgt_raw(unsigned port)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static inline int tgt_send(int fd, const void *b, size_t n)
{
	return send(fd, b, n, MSG_NOSIGNAL) == (ssize_t)n ? 0 : -1;
}

/*
 * Read until the daemon closes the connection, at most ms. Returns the
 * bytes received before the close (into buf, if any), or -1 on timeout
 * (the connection is still open).
 */
static inline ssize_t tgt_wait_closed(int fd, void *buf, size_t size, int ms)
{
	int64_t end = tgt_now_ms() + ms;
	size_t got = 0;
	char scratch[4096];

	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		int64_t left = end - tgt_now_ms();
		ssize_t r;

		if (left <= 0 || poll(&pfd, 1, (int)left) <= 0)
			return -1;
		if (buf != NULL && got < size)
			r = recv(fd, (char *)buf + got, size - got, 0);
		else
			r = recv(fd, scratch, sizeof(scratch), 0);
		if (r == 0 || (r < 0 && errno == ECONNRESET))
			return (ssize_t)got;
		if (r < 0 && errno != EINTR)
			return (ssize_t)got;
		if (r > 0 && buf != NULL && got < size)
			got += (size_t)r;
	}
}

/*
 * A HELLO for a 4 KiB region over prov, one rail: 0 for WELCOME, the
 * ERROR's code (its text into text), or 1 for no answer in 5 s.
 */
static inline int tgt_hello(unsigned port, const char *prov, char *text,
			    size_t n)
{
	static uint8_t buf[BPI_MSG_MAX];
	struct bpi_msg m = {.type = BPI_MSG_HELLO};
	int fd = tgt_raw(port);
	size_t got = 0;
	ssize_t k;
	int rc = 1;

	text[0] = '\0';
	if (fd < 0)
		return 1;
	snprintf(m.u.hello.provider, sizeof(m.u.hello.provider), "%s", prov);
	m.u.hello.rails = 1;
	m.u.hello.region_len = 4096;
	k = bpi_proto_encode(&m, buf, sizeof(buf));
	if (k > 0 && tgt_send(fd, buf, (size_t)k) == 0) {
		int64_t end = tgt_now_ms() + 5000;

		while ((k = bpi_proto_parse(buf, got, &m)) == 0) {
			struct pollfd pfd = {.fd = fd, .events = POLLIN};
			ssize_t r;

			if (poll(&pfd, 1, (int)(end - tgt_now_ms())) <= 0)
				break;
			r = recv(fd, buf + got, sizeof(buf) - got, 0);
			if (r <= 0)
				break;
			got += (size_t)r;
		}
		if (k > 0 && m.type == BPI_MSG_WELCOME)
			rc = 0;
		else if (k > 0 && m.type == BPI_MSG_ERROR) {
			rc = m.u.error.code;
			snprintf(text, n, "%s", m.u.error.text);
		}
	}
	close(fd);
	return rc;
}

/* Checks that count failures and go on (kill loops: report them all). */
static int tgt_fails __attribute__((unused));

#define TGT_CHECK(cond, ...)                                                   \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);   \
			fprintf(stderr, __VA_ARGS__);                          \
			fprintf(stderr, "\n");                                 \
			tgt_fails++;                                           \
		}                                                              \
	} while (0)

/*
 * The start of a kill-loop test: children are this program re-run as
 * "PROG CHILD_FLAG PORT" and killed. Sets FI_TCP_IFACE, ignores SIGPIPE,
 * takes BP_TEST_PROVIDER into *prov and BP_KILLS into *kills. Returns the
 * port when this process is such a child (alarm 120 s: killed long before),
 * 0 for the test itself (alarm 300 s), -2 for bad usage, -77 when fi_info
 * has no such provider (said on stdout).
 */
static inline int tgt_loop_start(int argc, char **argv, const char *child_flag,
				 const char **prov, unsigned *kills)
{
	setenv("FI_TCP_IFACE", "lo", 1);
	signal(SIGPIPE, SIG_IGN);
	if (getenv("BP_TEST_PROVIDER"))
		*prov = getenv("BP_TEST_PROVIDER");
	if (argc == 3 && strcmp(argv[1], child_flag) == 0) {
		alarm(120);
		return atoi(argv[2]);
	}
	if (argc < 2) {
		fprintf(stderr, "usage: %s PATH/bp-target\n", argv[0]);
		return -2;
	}
	alarm(300);
	if (getenv("BP_KILLS"))
		*kills = (unsigned)atoi(getenv("BP_KILLS"));
	if (tgt_have_provider(strncmp(*prov, "shm", 3) ? "tcp" : "shm") != 0) {
		printf("SKIP: fi_info finds no provider for %s\n", *prov);
		return -77;
	}
	return 0;
}

#endif /* BP_TESTS_TGT_SPAWN_H */
