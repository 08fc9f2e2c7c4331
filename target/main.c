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

#include "target.h"

/* epoll tags for the daemon's own descriptors (clients are their struct) */
static char tag_listen, tag_signal, tag_event;

static void usage(FILE *f)
{
	fprintf(f,
		"usage: bp-target [options]\n"
		"  --listen ADDR       control address (127.0.0.1)\n"
		"  --port N            control port (%u; 0: ephemeral)\n"
		"  --provider NAME     libfabric provider (auto), e.g. "
		"\"tcp;ofi_rxm\", shm\n"
		"  --rails N           endpoints (1..%u, default 1)\n"
		"  --fabric-node ADDR  address libfabric binds (127.0.0.1)\n"
		"  --token-file PATH   shared secret every HELLO must carry\n"
		"                      (required off loopback)\n"
		"  --max-clients N     (64)\n"
		"  --max-region BYTES  largest region per client (1G)\n"
		"  --fill-workers N    fill pipeline workers (= rails)\n"
		"  --stall-ms N        drop a client silent mid-message "
		"(2000)\n"
		"  --stage-slot BYTES  staging buffer = largest fill page "
		"(1M)\n"
		"  --stage-slots N     staging buffers (64)\n"
		"  --max-fill-peers N  clients holding a region to fill at\n"
		"                      once (one each, freed when the\n"
		"                      connection ends; 256)\n"
		"  --progress-wait W   how idle progress threads wait: busy,\n"
		"                      spin-sleep, event, auto (event where\n"
		"                      the provider has a wait fd)\n"
		"  --stop-timeout-ms N a stop that cannot finish in N ms (a\n"
		"                      thread stuck inside the provider) "
		"exits\n"
		"                      without it, status 3 (5000)\n"
		"  --wedge-ms N        a rail stuck inside one provider call\n"
		"                      this long is reported, and new clients\n"
		"                      are refused (3000)\n"
		"  --peer-timeout-ms N a fill whose pages complete nothing\n"
		"                      this long (a dead client the daemon\n"
		"                      was not told of) is failed (5000)\n"
		"  -v                  log every connection and request\n",
		BPI_DEFAULT_PORT, BP_RDMA_MAX_RAILS);
}

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

static int parse_uint(const char *s, unsigned lo, unsigned hi, unsigned *out)
{
	uint64_t v;

	if (parse_size(s, &v) < 0 || v < lo || v > hi)
		return -1;
	*out = (unsigned)v;
	return 0;
}

static int parse_opts(int argc, char **argv, struct target_opts *o)
{
	enum {
		O_LISTEN = 256,
		O_PORT,
		O_PROVIDER,
		O_RAILS,
		O_FNODE,
		O_TOKEN,
		O_MAXC,
		O_MAXR,
		O_FW,
		O_STALL,
		O_SLOT,
		O_SLOTS,
		O_MAXP,
		O_PWAIT,
		O_STOPT,
		O_WEDGE,
		O_PEERT
	};
	static const struct option lo[] = {
		{"listen", required_argument, NULL, O_LISTEN},
		{"port", required_argument, NULL, O_PORT},
		{"provider", required_argument, NULL, O_PROVIDER},
		{"rails", required_argument, NULL, O_RAILS},
		{"fabric-node", required_argument, NULL, O_FNODE},
		{"token-file", required_argument, NULL, O_TOKEN},
		{"max-clients", required_argument, NULL, O_MAXC},
		{"max-region", required_argument, NULL, O_MAXR},
		{"fill-workers", required_argument, NULL, O_FW},
		{"stall-ms", required_argument, NULL, O_STALL},
		{"stage-slot", required_argument, NULL, O_SLOT},
		{"stage-slots", required_argument, NULL, O_SLOTS},
		{"max-fill-peers", required_argument, NULL, O_MAXP},
		{"progress-wait", required_argument, NULL, O_PWAIT},
		{"stop-timeout-ms", required_argument, NULL, O_STOPT},
		{"wedge-ms", required_argument, NULL, O_WEDGE},
		{"peer-timeout-ms", required_argument, NULL, O_PEERT},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	uint64_t v;
	int ch, bad = 0;

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
	while ((ch = getopt_long(argc, argv, "vh", lo, NULL)) != -1) {
		switch (ch) {
		case O_LISTEN:
			o->listen = optarg;
			break;
		case O_PORT:
			bad |= parse_uint(optarg, 0, 65535, &o->port);
			break;
		case O_PROVIDER:
			o->provider = strcmp(optarg, "auto") ? optarg : NULL;
			break;
		case O_RAILS:
			bad |= parse_uint(optarg, 1, BP_RDMA_MAX_RAILS,
					  &o->rails);
			break;
		case O_FNODE:
			o->fabric_node = optarg;
			break;
		case O_TOKEN:
			o->token_file = optarg;
			break;
		case O_MAXC:
			bad |= parse_uint(optarg, 1, 1u << 20, &o->max_clients);
			break;
		case O_MAXR:
			if (parse_size(optarg, &v) < 0 || v == 0 ||
			    v > SIZE_MAX)
				bad = 1;
			else
				o->max_region = v;
			break;
		case O_FW:
			bad |= parse_uint(optarg, 1, BP_MAX_WORKERS,
					  &o->fill_workers);
			break;
		case O_STALL:
			bad |= parse_uint(optarg, 1, 3600000, &o->stall_ms);
			break;
		case O_SLOT: {
			unsigned s;

			bad |= parse_uint(optarg, 8, BPI_FILL_PAGE_MAX, &s);
			o->stage_slot = s;
			break;
		}
		case O_SLOTS:
			bad |= parse_uint(optarg, 1, 1u << 16, &o->stage_slots);
			break;
		case O_MAXP:
			bad |= parse_uint(optarg, 1, 65536, &o->max_fill_peers);
			break;
		case O_STOPT:
			bad |= parse_uint(optarg, 100, 3600000,
					  &o->stop_timeout_ms);
			break;
		case O_WEDGE:
			bad |= parse_uint(optarg, 100, 3600000, &o->wedge_ms);
			break;
		case O_PEERT:
			bad |= parse_uint(optarg, 100, 3600000,
					  &o->peer_timeout_ms);
			break;
		case O_PWAIT: {
			static const char *const names[] = {
				[BP_RDMA_CQ_BUSY] = "busy",
				[BP_RDMA_CQ_SPIN_SLEEP] = "spin-sleep",
				[BP_RDMA_CQ_EVENT] = "event",
				[BP_RDMA_CQ_AUTO] = "auto"};

			bad = 1;
			for (unsigned i = 0; i < 4; i++)
				if (!strcmp(optarg, names[i])) {
					o->progress_wait =
						(enum bp_rdma_cq_wait)i;
					bad = 0;
				}
			break;
		}
		case 'v':
			o->verbose++;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			return -1;
		}
		if (bad) {
			fprintf(stderr, "bp-target: bad value for --%s: %s\n",
				lo[ch - O_LISTEN].name, optarg);
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
		usage(stderr);
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
