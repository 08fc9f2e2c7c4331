/* SPDX-License-Identifier: MIT */
/*
 * bp-plain-target - the target a libfabric user writes by hand: one RDM
 * endpoint with one registered region that peers RDMA-write into, and a
 * thread that busy-polls the completion queue, which is what makes the
 * writes land on providers with manual progress (tcp;ofi_rxm). No
 * batchpipe in it: `bpbench rdma-target` holds bp-target to it.
 *
 *	bp-plain-target --provider P --size BYTES [--node ADDR] [--port N]
 *
 * Once ready it prints one line on stdout and flushes it:
 *
 *	bp-plain-target: ready provider=P addr=HEX base=0xB key=0xK len=N
 *
 * the endpoint's name (fi_getname) in hex, the region's base as a writer
 * gives it (its address with FI_MR_VIRT_ADDR, else 0), its key and its
 * length. Then it polls until stdin reaches its end, or SIGTERM or SIGINT.
 *
 * stdin also carries one command, for whoever checks what was written:
 * "peek OFF" answers one line on stdout, the 8 bytes at offset OFF of the
 * region as a 64-bit number in hex ("0x0123456789abcdef"), or "error ...".
 * stdin is looked at once every 1024 polls (one poll(2) with no timeout),
 * so that the loop stays a loop of fi_cq_read.
 *
 * Exit status: 0 after a clean stop, 1 when a libfabric call fails (the
 * message names the call), 2 on bad usage; killed by SIGALRM when a stop
 * takes more than STOP_TIMEOUT_S.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#define PROG "bp-plain-target"
/* how many fi_cq_read calls between two looks at stdin */
#define POLLS_PER_STDIN_CHECK 1024
/* a key for providers that let the application choose it (no
 * FI_MR_PROV_KEY); this target has one region, any value does */
#define REQUESTED_KEY 0x5eedu

/*
 * A stop that has not ended this long after it began ends the process
 * (SIGALRM's default action): libfabric 1.17's shm can spin for ever inside
 * fi_cq_read on a lock in a peer's shared memory that a killed peer held.
 */
#define STOP_TIMEOUT_S 2

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
	alarm(STOP_TIMEOUT_S); /* async-signal-safe */
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " --provider P --size BYTES [--node ADDR] "
		"[--port N]\n"
		"  --provider P   libfabric provider (shm, \"tcp;ofi_rxm\", "
		"...)\n"
		"  --size BYTES   the region peers write into; K, M, G "
		"suffixes\n"
		"  --node ADDR    address to bind (not for shm; e.g. "
		"127.0.0.1)\n"
		"  --port N       port to bind with --node (default: any)\n"
		"  --help         this text\n"
		"Prints one line when ready: \"" PROG
		": ready provider=P addr=HEX\nbase=0xB key=0xK len=N\", then "
		"busy-polls its completion queue until stdin\nends or "
		"SIGTERM. \"peek OFF\" on stdin prints the region's 8 bytes at "
		"OFF.\n");
}

__attribute__((format(printf, 1, 2), noreturn)) static void
bad_usage(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, PROG ": ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n" PROG ": see " PROG " --help\n");
	exit(2);
}

/* A libfabric call failed: say which and why, and exit 1. */
__attribute__((noreturn)) static void fi_failed(const char *call, int rc)
{
	fprintf(stderr, PROG ": %s failed: %s (%d)\n", call,
		fi_strerror(rc < 0 ? -rc : rc), rc);
	exit(1);
}

/* "64K", "1M", "123": bytes; 0 when it is not a size. */
static uint64_t parse_size(const char *s)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || s[0] == '-')
		return 0;
	switch (*end) {
	case 'K':
	case 'k':
		v <<= 10, end++;
		break;
	case 'M':
	case 'm':
		v <<= 20, end++;
		break;
	case 'G':
	case 'g':
		v <<= 30, end++;
		break;
	}
	return *end ? 0 : (uint64_t)v;
}

struct plain_target {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct fid_mr *mr;
	uint8_t *region;
	uint64_t len;
};

/*
 * Ask for an RDM endpoint that peers can write into and read from, with
 * manual progress: the provider moves data only while we call into it,
 * which the loop below does all the time. mr_mode offers every mode a
 * target can honour; open_region honours those the provider keeps.
 */
static void get_info(struct plain_target *t, const char *provider,
		     const char *node, const char *port)
{
	struct fi_info *hints = fi_allocinfo();
	int rc;

	if (!hints)
		fi_failed("fi_allocinfo", -FI_ENOMEM);
	hints->caps = FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_READ;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR |
				      FI_MR_ALLOCATED | FI_MR_PROV_KEY |
				      FI_MR_ENDPOINT;
	hints->domain_attr->threading = FI_THREAD_DOMAIN; /* one thread */
	hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	hints->domain_attr->control_progress = FI_PROGRESS_MANUAL;
	hints->fabric_attr->prov_name = strdup(provider);
	rc = fi_getinfo(FI_VERSION(1, 9), node, port, node ? FI_SOURCE : 0,
			hints, &t->info);
	fi_freeinfo(hints);
	if (rc == -FI_ENODATA) {
		fprintf(stderr,
			PROG
			": no provider '%s' with RDM endpoints and RMA%s%s "
			"(fi_info -l lists the providers)\n",
			provider, node ? " at " : "", node ? node : "");
		exit(1);
	}
	if (rc)
		fi_failed("fi_getinfo", rc);
}

/* Fabric, domain, completion queue, address vector, endpoint. */
static void open_endpoint(struct plain_target *t)
{
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_CONTEXT,
				     .wait_obj = FI_WAIT_NONE};
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	int rc;

	rc = fi_fabric(t->info->fabric_attr, &t->fabric, NULL);
	if (rc)
		fi_failed("fi_fabric", rc);
	rc = fi_domain(t->fabric, t->info, &t->domain, NULL);
	if (rc)
		fi_failed("fi_domain", rc);
	rc = fi_cq_open(t->domain, &cq_attr, &t->cq, NULL);
	if (rc)
		fi_failed("fi_cq_open", rc);
	rc = fi_av_open(t->domain, &av_attr, &t->av, NULL);
	if (rc)
		fi_failed("fi_av_open", rc);
	rc = fi_endpoint(t->domain, t->info, &t->ep, NULL);
	if (rc)
		fi_failed("fi_endpoint", rc);
	rc = fi_ep_bind(t->ep, &t->cq->fid, FI_TRANSMIT | FI_RECV);
	if (rc)
		fi_failed("fi_ep_bind(cq)", rc);
	rc = fi_ep_bind(t->ep, &t->av->fid, 0);
	if (rc)
		fi_failed("fi_ep_bind(av)", rc);
	rc = fi_enable(t->ep);
	if (rc)
		fi_failed("fi_enable", rc);
}

/* The region: allocated, touched (no page faults while peers write),
 * registered for remote access, bound to the endpoint where asked. */
static void open_region(struct plain_target *t)
{
	uint64_t mr_mode = t->info->domain_attr->mr_mode;
	int rc;

	if (posix_memalign((void **)&t->region, 4096, t->len))
		fi_failed("posix_memalign", -FI_ENOMEM);
	memset(t->region, 0, t->len);
	rc = fi_mr_reg(t->domain, t->region, t->len,
		       FI_REMOTE_WRITE | FI_REMOTE_READ, 0, REQUESTED_KEY, 0,
		       &t->mr, NULL);
	if (rc)
		fi_failed("fi_mr_reg", rc);
	if (mr_mode & FI_MR_ENDPOINT) {
		rc = fi_mr_bind(t->mr, &t->ep->fid, 0);
		if (rc)
			fi_failed("fi_mr_bind", rc);
		rc = fi_mr_enable(t->mr);
		if (rc)
			fi_failed("fi_mr_enable", rc);
	}
}

/* The ready line: everything a writer needs (see the top of the file). */
static void print_ready(const struct plain_target *t)
{
	uint8_t name[256];
	size_t namelen = sizeof(name);
	uint64_t base = t->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR
				? (uint64_t)(uintptr_t)t->region
				: 0;
	int rc = fi_getname(&t->ep->fid, name, &namelen);

	if (rc)
		fi_failed("fi_getname", rc);
	printf(PROG ": ready provider=%s addr=",
	       t->info->fabric_attr->prov_name);
	for (size_t i = 0; i < namelen; i++)
		printf("%02x", name[i]);
	printf(" base=0x%" PRIx64 " key=0x%" PRIx64 " len=%" PRIu64 "\n", base,
	       fi_mr_key(t->mr), t->len);
	fflush(stdout);
}

/* One command line from stdin. */
static void do_command(const struct plain_target *t, const char *line)
{
	unsigned long long off;
	uint64_t word;

	if (sscanf(line, "peek %llu", &off) != 1) {
		printf("error: unknown command\n");
	} else if (off > t->len - 8) {
		printf("error: offset %llu outside the region\n", off);
	} else {
		/* a write may be landing here now: any value is a fair read */
		memcpy(&word, t->region + off, 8);
		printf("0x%016" PRIx64 "\n", word);
	}
	fflush(stdout);
}

/*
 * Whatever stdin has for us, without waiting. Returns 0 to go on, 1 when
 * stdin has ended.
 */
static int check_stdin(const struct plain_target *t)
{
	static char line[128];
	static size_t used;
	struct pollfd pfd = {.fd = STDIN_FILENO, .events = POLLIN};
	ssize_t n;

	if (poll(&pfd, 1, 0) <= 0)
		return 0;
	n = read(STDIN_FILENO, line + used, sizeof(line) - 1 - used);
	if (n <= 0)
		return 1; /* the end (or an error: nobody left to answer) */
	used += (size_t)n;
	for (char *nl; (nl = memchr(line, '\n', used));) {
		*nl = '\0';
		do_command(t, line);
		used -= (size_t)(nl + 1 - line);
		memmove(line, nl + 1, used);
	}
	if (used == sizeof(line) - 1)
		used = 0; /* a line longer than any command: drop it */
	return 0;
}

/*
 * The target's only job: call into the provider all the time. Nothing
 * completes here for plain remote writes (no FI_RMA_EVENT), but each
 * fi_cq_read runs the provider's progress, which lands them.
 */
static void poll_loop(const struct plain_target *t)
{
	struct fi_cq_entry entries[16];
	unsigned polls = 0;

	while (!stop_requested) {
		ssize_t n = fi_cq_read(t->cq, entries, 16);

		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {0};

			if (fi_cq_readerr(t->cq, &err, 0) == 1)
				fprintf(stderr, PROG ": error completion: %s\n",
					fi_strerror(err.err));
		} else if (n < 0 && n != -FI_EAGAIN) {
			fi_failed("fi_cq_read", (int)n);
		}
		if (++polls == POLLS_PER_STDIN_CHECK) {
			polls = 0;
			if (check_stdin(t))
				break;
		}
	}
}

static void close_all(struct plain_target *t)
{
	if (t->mr)
		fi_close(&t->mr->fid);
	if (t->ep)
		fi_close(&t->ep->fid);
	if (t->av)
		fi_close(&t->av->fid);
	if (t->cq)
		fi_close(&t->cq->fid);
	if (t->domain)
		fi_close(&t->domain->fid);
	if (t->fabric)
		fi_close(&t->fabric->fid);
	fi_freeinfo(t->info);
	free(t->region);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"provider", required_argument, NULL, 'p'},
		{"size", required_argument, NULL, 's'},
		{"node", required_argument, NULL, 'n'},
		{"port", required_argument, NULL, 'P'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *provider = NULL, *node = NULL, *port = NULL;
	struct plain_target t = {0};
	struct sigaction sa = {.sa_handler = on_signal};
	int c;

	opterr = 0; /* bad_usage says it */
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			provider = optarg;
			break;
		case 's':
			t.len = parse_size(optarg);
			if (t.len < 8)
				bad_usage("bad --size '%s' (bytes, at least "
					  "8; K, M, G suffixes)",
					  optarg);
			break;
		case 'n':
			node = optarg;
			break;
		case 'P':
			port = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			bad_usage("unknown option or missing value: '%s'",
				  argv[optind - 1]);
		}
	}
	if (optind < argc)
		bad_usage("unexpected argument '%s'", argv[optind]);
	if (!provider)
		bad_usage("--provider is required");
	if (!t.len)
		bad_usage("--size is required");
	if (port && !node)
		bad_usage("--port needs --node");

	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	get_info(&t, provider, node, port);
	open_endpoint(&t);
	open_region(&t);
	print_ready(&t);
	poll_loop(&t);
	if (!stop_requested)
		alarm(STOP_TIMEOUT_S); /* stdin ended */
	close_all(&t);
	return 0;
}
