/* SPDX-License-Identifier: MIT */
/*
 * main.c - bp-target, the RDMA peer daemon: options, start-up, the epoll
 * loop and an orderly exit on SIGTERM / SIGINT.
 *
 * It serves memory: every client that says HELLO gets a region of its own
 * (exposed through one bp_rdma_node, a progress thread per rail) that the
 * client's stage writes and reads; QUERY digests it. And it writes memory:
 * FILL has the daemon's own pipeline RDMA-write generated pages into a
 * region of the client's (filler.c).
 *
 * Exit status: 0 after a signal, 1 when start-up fails, 2 for a usage error
 * or a refused configuration (a non-loopback address without a token), 3
 * when a stop could not finish within --stop-timeout-ms because a thread
 * is stuck inside the provider (health.c: what it could release, it did).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <batchpipe/error.h>

#include "target.h"

/* epoll tags for the daemon's own descriptors (clients are their struct) */
static char tag_listen, tag_signal, tag_event;

/* "4096", "64K", "1M", "1G": bytes; -1 when malformed. */
static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || s[0] == '-')
		return -1;
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		end++;
		break;
	case 'm':
	case 'M':
		shift = 20;
		end++;
		break;
	case 'g':
	case 'G':
		shift = 30;
		end++;
		break;
	default:
		break;
	}
	if (*end != '\0' || (shift && v > (UINT64_MAX >> shift)))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

/*
 * The options: one row each, in the order getopt_long lists the candidates
 * of an ambiguous abbreviation and the usage text shows them.
 */
enum opt_kind {
	OPT_STR,      /* const char *: the argument as is */
	OPT_STR_AUTO, /* const char *: the argument, NULL for "auto" */
	OPT_UINT,     /* unsigned: a size (parse_size) within lo..hi */
	OPT_U64,      /* uint64_t: a size (parse_size) within lo..hi */
	OPT_CQ_WAIT,  /* enum bp_rdma_cq_wait: by name */
	OPT_COUNT,    /* int: one more per use; no argument */
	OPT_HELP,     /* the usage on stdout, exit 0; no argument */
	OPT_VERSION,  /* the version on stdout, exit 0; no argument */
};

struct opt {
	const char *name;
	char short_name; /* 0: none; one is shown instead of --name */
	const char *arg; /* in the usage; NULL: takes no argument */
	enum opt_kind kind;
	size_t field; /* FIELD() in struct target_opts */
	uint64_t lo, hi;
	unsigned num;	  /* what "%u" in help prints */
	const char *help; /* NULL: not shown; '\n' starts an indented line */
};

/* The offset of target_opts' member m, which must be a T: a mismatch is a
 * "comparison of distinct pointer types" warning. */
#define FIELD(m, T)                                                            \
	(offsetof(struct target_opts, m) +                                     \
	 0 * sizeof((T *)0 == &((struct target_opts *)0)->m))
#define STR(m)	FIELD(m, const char *)
#define UINT(m) FIELD(m, unsigned)

static const struct opt opts[] = {
	/* name, short, arg, kind, field, lo, hi, num, help */
	{"listen", 0, "ADDR", OPT_STR, STR(listen), 0, 0, 0,
	 "control address (127.0.0.1)"},
	{"port", 0, "N", OPT_UINT, UINT(port), 0, 65535, BPI_DEFAULT_PORT,
	 "control port (%u; 0: ephemeral)"},
	{"provider", 0, "NAME", OPT_STR_AUTO, STR(provider), 0, 0, 0,
	 "libfabric provider (auto), e.g. \"tcp;ofi_rxm\", shm"},
	{"rails", 0, "N", OPT_UINT, UINT(rails), 1, BP_RDMA_MAX_RAILS,
	 BP_RDMA_MAX_RAILS, "endpoints (1..%u, default 1)"},
	{"fabric-node", 0, "ADDR", OPT_STR, STR(fabric_node), 0, 0, 0,
	 "address libfabric binds (127.0.0.1)"},
	{"token-file", 0, "PATH", OPT_STR, STR(token_file), 0, 0, 0,
	 "shared secret every HELLO must carry\n"
	 "(required off loopback)"},
	{"max-clients", 0, "N", OPT_UINT, UINT(max_clients), 1, 1u << 20, 0,
	 "(64)"},
	{"max-region", 0, "BYTES", OPT_U64, FIELD(max_region, uint64_t), 1,
	 SIZE_MAX, 0, "largest region per client (1G)"},
	{"fill-workers", 0, "N", OPT_UINT, UINT(fill_workers), 1,
	 BP_MAX_WORKERS, 0, "fill pipeline workers (= rails)"},
	{"stall-ms", 0, "N", OPT_UINT, UINT(stall_ms), 1, 3600000, 0,
	 "drop a client silent mid-message (2000)"},
	{"stage-slot", 0, "BYTES", OPT_UINT, UINT(stage_slot), 8,
	 BPI_FILL_PAGE_MAX, 0, "staging buffer = largest fill page (1M)"},
	{"stage-slots", 0, "N", OPT_UINT, UINT(stage_slots), 1, 1u << 16, 0,
	 "staging buffers (64)"},
	{"max-fill-peers", 0, "N", OPT_UINT, UINT(max_fill_peers), 1, 65536, 0,
	 "clients holding a region to fill at\n"
	 "once (one each, freed when the\n"
	 "connection ends; 256)"},
	{"progress-wait", 0, "W", OPT_CQ_WAIT,
	 FIELD(progress_wait, enum bp_rdma_cq_wait), 0, 0, 0,
	 "how idle progress threads wait: busy,\n"
	 "spin-sleep, event, auto (event where\n"
	 "the provider has a wait fd)"},
	{"stop-timeout-ms", 0, "N", OPT_UINT, UINT(stop_timeout_ms), 100,
	 3600000, 0,
	 "a stop that cannot finish in N ms (a\n"
	 "thread stuck inside the provider) exits\n"
	 "without it, status 3 (5000)"},
	{"wedge-ms", 0, "N", OPT_UINT, UINT(wedge_ms), 100, 3600000, 0,
	 "a rail stuck inside one provider call\n"
	 "this long is reported, and new clients\n"
	 "are refused (3000)"},
	{"peer-timeout-ms", 0, "N", OPT_UINT, UINT(peer_timeout_ms), 100,
	 3600000, 0,
	 "a fill whose pages complete nothing\n"
	 "this long (a dead client the daemon\n"
	 "was not told of) is failed (5000)"},
	{"verbose", 'v', NULL, OPT_COUNT, FIELD(verbose, int), 0, 0, 0,
	 "log every connection and request"},
	{"version", 'V', NULL, OPT_VERSION, 0, 0, 0, 0,
	 "print the version and exit"},
	{"help", 'h', NULL, OPT_HELP, 0, 0, 0, 0, NULL},
};
#undef STR
#undef UINT
#define NOPTS	 (sizeof(opts) / sizeof(opts[0]))
#define HELP_COL 22 /* where the help text starts */

/* r's help, its %u filled in; each '\n' becomes `nl`. */
static void put_help(FILE *f, const struct opt *r, const char *nl)
{
	for (const char *p = r->help; *p; p++) {
		if (p[0] == '%' && p[1] == 'u') {
			fprintf(f, "%u", r->num);
			p++;
		} else if (*p == '\n') {
			fputs(nl, f);
		} else {
			fputc(*p, f);
		}
	}
}

static void usage(FILE *f)
{
	char nl[HELP_COL + 2];

	snprintf(nl, sizeof(nl), "\n%*s", HELP_COL, "");
	fprintf(f, "usage: bp-target [options]\n");
	for (const struct opt *r = opts; r < opts + NOPTS; r++) {
		char left[HELP_COL];

		if (r->help == NULL)
			continue;
		if (r->short_name)
			snprintf(left, sizeof(left), "-%c, --%s",
				 r->short_name, r->name);
		else
			snprintf(left, sizeof(left), "--%s %s", r->name,
				 r->arg);
		fprintf(f, "  %-*s ", HELP_COL - 3, left);
		put_help(f, r, nl);
		fputc('\n', f);
	}
}

/* Set r's field from arg: 0, or -1 for a bad value. */
static int set_opt(const struct opt *r, const char *arg, struct target_opts *o)
{
	static const char *const waits[] = {
		[BP_RDMA_CQ_BUSY] = "busy",
		[BP_RDMA_CQ_SPIN_SLEEP] = "spin-sleep",
		[BP_RDMA_CQ_EVENT] = "event",
		[BP_RDMA_CQ_AUTO] = "auto",
	};
	void *p = (char *)o + r->field;
	uint64_t v;

	switch (r->kind) {
	case OPT_STR:
		*(const char **)p = arg;
		return 0;
	case OPT_STR_AUTO:
		*(const char **)p = strcmp(arg, "auto") ? arg : NULL;
		return 0;
	case OPT_UINT:
	case OPT_U64:
		if (parse_size(arg, &v) < 0 || v < r->lo || v > r->hi)
			return -1;
		if (r->kind == OPT_UINT)
			*(unsigned *)p = (unsigned)v;
		else
			*(uint64_t *)p = v;
		return 0;
	case OPT_CQ_WAIT:
		for (unsigned i = 0; i < sizeof(waits) / sizeof(waits[0]); i++)
			if (!strcmp(arg, waits[i])) {
				*(enum bp_rdma_cq_wait *)p =
					(enum bp_rdma_cq_wait)i;
				return 0;
			}
		return -1;
	case OPT_COUNT:
		(*(int *)p)++;
		return 0;
	case OPT_HELP:
		usage(stdout);
		exit(0);
	case OPT_VERSION:
		/* the library it runs on, which speaks the protocol */
		printf("bp-target %s\n", bp_version());
		exit(0);
	}
	return -1;
}

/* getopt_long's tables from opts: a row's value is its short name or
 * 256 + its index. */
static void getopt_tables(struct option *lo, char *shorts)
{
	for (size_t i = 0; i < NOPTS; i++) {
		const struct opt *r = &opts[i];

		lo[i] = (struct option){
			r->name, r->arg ? required_argument : no_argument, NULL,
			r->short_name ? r->short_name : 256 + (int)i};
		if (r->short_name) {
			*shorts++ = r->short_name;
			if (r->arg)
				*shorts++ = ':';
		}
	}
	lo[NOPTS] = (struct option){0};
	*shorts = '\0';
}

static int parse_opts(int argc, char **argv, struct target_opts *o)
{
	struct option lo[NOPTS + 1];
	char shorts[2 * NOPTS + 1];
	int ch;

	*o = (struct target_opts){
		.listen = "127.0.0.1",
		.port = BPI_DEFAULT_PORT,
		.rails = 1,
		.fabric_node = "127.0.0.1",
		.max_clients = 64,
		.max_region = 1ull << 30,
		.stall_ms = 2000,
		.stage_slot = 1u << 20,
		.stage_slots = 64,
		.max_fill_peers = 256,
		.progress_wait = BP_RDMA_CQ_AUTO,
		.stop_timeout_ms = 5000,
		.wedge_ms = 3000,
		.peer_timeout_ms = 5000,
	};
	getopt_tables(lo, shorts);
	opterr = 0; /* our own message, which names the option */
	while ((ch = getopt_long(argc, argv, shorts, lo, NULL)) != -1) {
		const struct opt *r = ch >= 256 ? &opts[ch - 256] : NULL;

		for (size_t i = 0; r == NULL && i < NOPTS; i++)
			if (ch == opts[i].short_name)
				r = &opts[i];
		if (r == NULL) { /* '?' or ':' */
			/* a short option inside a group (-xv): optopt names
			 * it; argv[optind - 1] may be another word */
			if (optopt > 0 && optopt < 256)
				fprintf(stderr,
					"bp-target: bad option, or one missing "
					"its value: -%c\n",
					optopt);
			else
				fprintf(stderr,
					"bp-target: bad option, or one missing "
					"its value: %s\n",
					argv[optind - 1]);
			return -1;
		}
		if (set_opt(r, optarg, o) < 0) {
			fprintf(stderr, "bp-target: bad value '%s' for --%s %s: ",
				optarg, r->name, r->arg ? r->arg : "");
			put_help(stderr, r, " ");
			fputc('\n', stderr);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "bp-target: unexpected argument %s\n",
			argv[optind]);
		return -1;
	}
	if (o->fill_workers == 0)
		o->fill_workers = o->rails;
	return 0;
}

static bool is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)sa;

		return (ntohl(a->sin_addr.s_addr) >> 24) == 127;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const void *)sa;
		const uint8_t *b = a->sin6_addr.s6_addr;

		if (IN6_IS_ADDR_LOOPBACK(&a->sin6_addr))
			return true;
		return IN6_IS_ADDR_V4MAPPED(&a->sin6_addr) && b[12] == 127;
	}
	return false;
}

/* Bind and listen; print nothing. 0 or exit status. */
static int open_listener(struct target *t, char *host, size_t hostlen,
			 unsigned *port)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *res;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char service[8];
	int one = 1, gai, fd;

	snprintf(service, sizeof(service), "%u", t->o.port);
	gai = getaddrinfo(t->o.listen, service, &hints, &res);
	if (gai != 0) {
		tlog(t, 0, NULL, "--listen %s: %s", t->o.listen,
		     gai_strerror(gai));
		return 2;
	}
	if (!is_loopback(res->ai_addr) && t->o.token_file == NULL) {
		tlog(t, 0, NULL,
		     "refusing to listen on non-loopback address %s without "
		     "--token-file: anyone who can reach it could read and "
		     "write the memory this daemon serves",
		     t->o.listen);
		freeaddrinfo(res);
		return 2;
	}
	fd = socket(res->ai_family,
		    res->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    res->ai_protocol);
	if (fd < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, res->ai_addr, res->ai_addrlen) < 0 ||
	    listen(fd, 128) < 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
		tlog(t, 0, NULL, "listen on %s:%u: %s", t->o.listen, t->o.port,
		     strerror(errno));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(res);
		return 1;
	}
	freeaddrinfo(res);
	if (getnameinfo((struct sockaddr *)&ss, sl, host, (socklen_t)hostlen,
			service, sizeof(service),
			NI_NUMERICHOST | NI_NUMERICSERV) != 0)
		snprintf(host, hostlen, "%s", t->o.listen);
	*port = (unsigned)atoi(service);
	t->lfd = fd;
	return 0;
}

/*
 * Immediate data arrived (a progress thread). relaxed: imm_sum is a
 * statistic that QUERY reads; it orders nothing and publishes nothing, and
 * the adds of several progress threads only need to be atomic to all be
 * counted.
 */
static void on_data(void *ctx, unsigned rail, uint64_t imm)
{
	struct target *t = ctx;

	(void)rail;
	atomic_fetch_add_explicit(&t->imm_sum, imm, memory_order_relaxed);
}

static int add_fd(struct target *t, int fd, void *tag)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = tag};

	return epoll_ctl(t->epfd, EPOLL_CTL_ADD, fd, &ev);
}

static void on_signal(struct target *t)
{
	struct signalfd_siginfo si;

	while (read(t->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		tlog(t, 0, NULL, "%s: shutting down",
		     strsignal((int)si.ssi_signo));
		t->quit = true;
	}
}

static void run_loop(struct target *t)
{
	struct epoll_event evs[64];

	while (!t->quit) {
		int n = epoll_wait(t->epfd, evs, 64, clients_next_tick_ms(t));

		if (n < 0 && errno != EINTR) {
			tlog(t, 0, NULL, "epoll_wait: %s", strerror(errno));
			return;
		}
		for (int i = 0; i < n; i++) {
			void *p = evs[i].data.ptr;

			if (p == &tag_listen) {
				clients_accept(t);
			} else if (p == &tag_signal) {
				on_signal(t);
			} else if (p == &tag_event) {
				uint64_t v;

				(void)!read(t->evfd, &v, sizeof(v));
			} else {
				clients_event(t, p, evs[i].events);
			}
		}
		clients_work(t);
		clients_tick(t);
		health_tick(t);
	}
}

int main(int argc, char **argv)
{
	static struct target t; /* zeroed: the token buffer must be */
	struct bp_rdma_node_config nc;
	char host[INET6_ADDRSTRLEN + 8];
	unsigned port = 0;
	sigset_t sigs;
	int rc, status = 1;

	t.lfd = t.sigfd = t.evfd = t.epfd = -1;
	if (parse_opts(argc, argv, &t.o) < 0) {
		fprintf(stderr, "bp-target: see bp-target --help\n");
		return 2;
	}
	if (t.o.token_file != NULL && auth_load(&t, t.o.token_file) < 0)
		return 2;
	/*
	 * Block the signals before any thread exists (the node's and the
	 * pipeline's threads inherit the mask), so that they arrive only
	 * through the signalfd in the loop. SIGPIPE: sends use MSG_NOSIGNAL;
	 * ignoring it covers any write that does not.
	 */
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);

	rc = open_listener(&t, host, sizeof(host), &port);
	if (rc)
		return rc;
	t.epfd = epoll_create1(EPOLL_CLOEXEC);
	t.sigfd = signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC);
	t.evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (t.epfd < 0 || t.sigfd < 0 || t.evfd < 0 ||
	    add_fd(&t, t.lfd, &tag_listen) < 0 ||
	    add_fd(&t, t.sigfd, &tag_signal) < 0 ||
	    add_fd(&t, t.evfd, &tag_event) < 0) {
		tlog(&t, 0, NULL, "epoll set-up: %s", strerror(errno));
		goto out;
	}

	bp_rdma_node_config_init(&nc);
	nc.provider = t.o.provider;
	nc.node = t.o.fabric_node;
	nc.rails = t.o.rails;
	nc.progress_threads = true;
	nc.progress_wait = t.o.progress_wait;
	nc.on_data = on_data;
	nc.data_ctx = &t;
	nc.log = tlog_lib;
	nc.log_ctx = &t;
	rc = bp_rdma_node_create(&nc, &t.node);
	if (rc < 0) {
		t.node = NULL;
		tlog(&t, 0, NULL, "node (provider %s, rails %u, %s): %s",
		     t.o.provider ? t.o.provider : "auto", t.o.rails,
		     t.o.fabric_node, strerror(-rc));
		goto out;
	}
	rc = filler_create(&t, &t.filler);
	if (rc < 0) {
		t.filler = NULL;
		goto out;
	}

	printf("bp-target: listening on %s:%u provider=%s rails=%u\n", host,
	       port, bp_rdma_node_provider(t.node), t.o.rails);
	fflush(stdout);
	health_tick(&t);  /* what killed processes left in /dev/shm */
	fill_auth_init(); /* the daemon's own shm files: never a target */
	run_loop(&t);
	status = t.quit ? 0 : 1;
out:
	/* bounded: a thread stuck inside the provider must not hang it */
	health_stop_begin(&t);
	health_stop_step("stopping the fills");
	clients_stop_fills(&t);
	health_stop_step("destroying the fill pipeline");
	filler_destroy(t.filler);
	t.filler = NULL; /* clients' peer ids went with it */
	health_stop_step("closing the clients' regions");
	clients_close_all(&t);
	health_stop_step("destroying the node (joining its rail threads)");
	bp_rdma_node_destroy(t.node);
	clients_release_memory(&t); /* no rail thread writes into it now */
	health_stop_end(&t);
	if (t.evfd >= 0)
		close(t.evfd);
	if (t.sigfd >= 0)
		close(t.sigfd);
	if (t.epfd >= 0)
		close(t.epfd);
	if (t.lfd >= 0)
		close(t.lfd);
	return status;
}
