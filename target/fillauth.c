/* SPDX-License-Identifier: MIT */
/*
 * fillauth.c - whom a FILL may write to. FILL names the endpoints and the
 * region the daemon's pipeline writes into; nothing but this check stands
 * between a client of the control port and the daemon writing wherever the
 * description says. The rule (also in src/rdma/proto.h):
 *
 *   Every rail's endpoint must belong to the client that asks: the process
 *   at the other end of that control connection.
 *
 *   - shm (names "fi_shm://bp-PID-..."): the control connection comes from
 *     this host, from a socket of the daemon's own user, and process PID
 *     holds it; the name's /dev/shm file is a regular file of that user
 *     with one link, and none of the daemon's own. Never the daemon's own
 *     pid. Over shm the boundary is the user: a process of the daemon's
 *     user can rename another process's file to a name of its own (shm
 *     writes where the file's header says), as it could ptrace that
 *     process; another user's process gets nothing.
 *   - tcp and the other socket-address providers: the endpoint's IP is the
 *     control connection's source IP. When the client is on this host (its
 *     socket is in this network namespace's /proc/net/tcp), the endpoint
 *     is a listening socket held by a process that also holds the client's
 *     control socket, and so is every other listener that takes that
 *     address (the wildcards of its family): the daemon's own endpoints, a
 *     third address and another local client's endpoints are all refused.
 *     A client on another host is told apart by its address only.
 *   - any other address form: refused.
 *
 * Within the client's own endpoint the provider decides what a key and a
 * range reach: tcp;ofi_rxm checks both (a wrong key or a write past the
 * registered range fails the fill), shm checks neither (the daemon can then
 * write anywhere in the client's own process, nowhere else).
 *
 * Ownership is read from /proc: /proc/net/tcp{,6} map an address pair to
 * the socket's inode and uid, /proc/PID/fd links name the sockets a
 * process holds. A daemon that cannot read a process's fd links (another
 * user's, without root) cannot tell, and refuses.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "target.h"

/* An address and port, IPv4 as IPv4-mapped IPv6: one form to compare. */
struct ipport {
	uint8_t ip[16];
	unsigned port;
};

static const uint8_t v4_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

static bool from_sockaddr(const void *sa, size_t len, struct ipport *out)
{
	sa_family_t fam;

	if (len < sizeof(fam))
		return false;
	memcpy(&fam, sa, sizeof(fam));
	if (fam == AF_INET && len >= sizeof(struct sockaddr_in)) {
		struct sockaddr_in a;

		memcpy(&a, sa, sizeof(a));
		memcpy(out->ip, v4_prefix, sizeof(v4_prefix));
		memcpy(out->ip + 12, &a.sin_addr, 4);
		out->port = ntohs(a.sin_port);
		return true;
	}
	if (fam == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
		struct sockaddr_in6 a;

		memcpy(&a, sa, sizeof(a));
		memcpy(out->ip, &a.sin6_addr, 16);
		out->port = ntohs(a.sin6_port);
		return true;
	}
	return false;
}

static bool same_ip(const struct ipport *a, const struct ipport *b)
{
	return memcmp(a->ip, b->ip, 16) == 0;
}

/* v4: IPv4-mapped (every address of a tcp line is made so). */
static bool is_v4(const struct ipport *a)
{
	return memcmp(a->ip, v4_prefix, 12) == 0;
}

/*
 * Whether a listener bound to l (from tcp, or tcp6 when six) takes
 * connections to ep: the same address, or the wildcard of ep's family (a
 * tcp6 "::" listener takes IPv4 too, unless it is V6ONLY, which /proc does
 * not say: counted as taking it).
 */
static bool listener_takes(const struct ipport *l, bool six,
			   const struct ipport *ep)
{
	static const uint8_t zero[16];

	if (same_ip(l, ep))
		return true;
	if (six)
		return memcmp(l->ip, zero, 16) == 0;	      /* "::" */
	return is_v4(ep) && memcmp(l->ip + 12, zero, 4) == 0; /* 0.0.0.0 */
}

/*
 * "0100007F:1F90" (tcp: the 32-bit address as the kernel holds it, in hex)
 * or 32 hex digits (tcp6: four such words), then the port in hex.
 */
static bool parse_proc_addr(const char *s, bool v6, struct ipport *out)
{
	unsigned words = v6 ? 4 : 1;
	uint8_t raw[16];

	for (unsigned w = 0; w < words; w++) {
		char hex[9];
		uint32_t v;

		memcpy(hex, s + 8 * w, 8);
		hex[8] = '\0';
		for (unsigned i = 0; i < 8; i++)
			if (!isxdigit((unsigned char)hex[i]))
				return false;
		v = (uint32_t)strtoul(hex, NULL, 16);
		memcpy(raw + 4 * w, &v, 4); /* the kernel's bytes, as held */
	}
	s += 8 * words;
	if (*s != ':')
		return false;
	if (v6) {
		memcpy(out->ip, raw, 16);
	} else {
		memcpy(out->ip, v4_prefix, sizeof(v4_prefix));
		memcpy(out->ip + 12, raw, 4);
	}
	out->port = (unsigned)strtoul(s + 1, NULL, 16);
	return true;
}

struct sock_entry {
	unsigned long inode;
	unsigned uid;
};

#define MAX_LISTENERS 8

/*
 * Sockets from /proc/net/tcp and tcp6. remote != NULL: the connection
 * whose local end is `local` and remote end `remote` (at most one).
 * remote == NULL: every listener that takes connections to `local` (its
 * exact address and the wildcards; the kernel picks the most specific, so
 * all of them must be the client's). Returns how many were found (up to
 * max), or max + 1 when there were more.
 */
static unsigned find_sockets(const struct ipport *local,
			     const struct ipport *remote,
			     struct sock_entry *out, unsigned max)
{
	static const char *const files[2] = {"/proc/net/tcp", "/proc/net/tcp6"};
	unsigned n = 0;

	for (unsigned f = 0; f < 2; f++) {
		FILE *fp = fopen(files[f], "r");
		char line[512];

		if (!fp)
			continue;
		if (!fgets(line, sizeof(line), fp)) { /* the header */
			fclose(fp);
			continue;
		}
		while (fgets(line, sizeof(line), fp)) {
			char la[64], ra[64];
			unsigned st, uid;
			unsigned long inode;
			struct ipport l, r;

			if (sscanf(line,
				   " %*u: %63s %63s %x %*s %*s %*s %u %*d %lu",
				   la, ra, &st, &uid, &inode) != 5 ||
			    !parse_proc_addr(la, f == 1, &l) ||
			    !parse_proc_addr(ra, f == 1, &r))
				continue;
			if (l.port != local->port)
				continue;
			if (remote) {
				if (!same_ip(&l, local) ||
				    !same_ip(&r, remote) ||
				    r.port != remote->port)
					continue;
			} else if (st != 0x0A || /* TCP_LISTEN */
				   !listener_takes(&l, f == 1, local)) {
				continue;
			}
			if (n == max) {
				fclose(fp);
				return max + 1;
			}
			out[n++] = (struct sock_entry){inode, uid};
			if (remote) {
				fclose(fp);
				return n;
			}
		}
		fclose(fp);
	}
	return n;
}

/* Whether fd link `name` in directory dfd names socket `inode`. */
static bool link_is_socket(int dfd, const char *name, unsigned long inode)
{
	char buf[64], want[40];
	ssize_t n = readlinkat(dfd, name, buf, sizeof(buf) - 1);

	if (n <= 0)
		return false;
	buf[n] = '\0';
	snprintf(want, sizeof(want), "socket:[%lu]", inode);
	return strcmp(buf, want) == 0;
}

/*
 * Which of the sockets a and b (b == 0: none) process pid holds: bit 0 a,
 * bit 1 b; -errno when its fd links cannot be read.
 */
static int held_by(long pid, unsigned long a, unsigned long b)
{
	char dir[64];
	struct dirent *e;
	int held = 0;
	DIR *d;

	snprintf(dir, sizeof(dir), "/proc/%ld/fd", pid);
	d = opendir(dir);
	if (!d)
		return -errno;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		if (link_is_socket(dirfd(d), e->d_name, a))
			held |= 1;
		else if (b && link_is_socket(dirfd(d), e->d_name, b))
			held |= 2;
	}
	closedir(d);
	return held;
}

/*
 * Whether one process (not this one) holds both sockets a and b. *hint: a
 * process that held a before (0: none): looked at first, so that a client's
 * later FILLs cost a look at its own fds, not at every process's; set to
 * the one found.
 */
static bool one_process_holds(unsigned long a, unsigned long b, long *hint,
			      bool *unreadable)
{
	DIR *d;
	struct dirent *e;
	bool found = false;

	*unreadable = false;
	if (*hint > 0 && held_by(*hint, a, b) == 3)
		return true;
	d = opendir("/proc");
	if (!d)
		return false;
	while (!found && (e = readdir(d)) != NULL) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		int h;

		if (*end != '\0' || pid <= 0 || pid == (long)getpid())
			continue;
		h = held_by(pid, a, b);
		if (h == -EACCES || h == -EPERM)
			*unreadable = true;
		if (h == 3) {
			found = true;
			*hint = pid;
		}
	}
	closedir(d);
	return found;
}

/* "fi_shm://bp-PID-HEX..." (the library's shm names): PID, or -1. */
static long shm_owner(const uint8_t *addr, uint32_t len)
{
	static const char prefix[] = "fi_shm://bp-";
	char name[BP_RDMA_ADDR_MAX + 1];
	char *end;
	long pid;

	if (len == 0 || len > BP_RDMA_ADDR_MAX)
		return -1;
	memcpy(name, addr, len);
	name[len] = '\0';
	if (strncmp(name, prefix, sizeof(prefix) - 1) != 0)
		return -1;
	pid = strtol(name + sizeof(prefix) - 1, &end, 10);
	return *end == '-' && pid > 0 ? pid : -1;
}

static int refuse_why(char *why, size_t n, const char *fmt, unsigned rail)
{
	snprintf(why, n, fmt, rail);
	return -EACCES;
}

/* Inodes of the daemon's own shm files, noted at start (fill_auth_init). */
#define MAX_OWN_FILES 64
static ino_t own_files[MAX_OWN_FILES];
static unsigned n_own_files;

void fill_auth_init(void)
{
	DIR *d = opendir("/dev/shm");
	struct dirent *e;
	char prefix[32];
	struct stat st;

	if (!d)
		return;
	snprintf(prefix, sizeof(prefix), "bp-%ld-", (long)getpid());
	while ((e = readdir(d)) != NULL && n_own_files < MAX_OWN_FILES)
		if (strncmp(e->d_name, prefix, strlen(prefix)) == 0 &&
		    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
			own_files[n_own_files++] = st.st_ino;
	closedir(d);
}

/*
 * The file behind a shm endpoint name, as a process of the client's user
 * could have arranged it: a regular file of that user with one link (a
 * hard link to the daemon's or another process's file has two), none of
 * the daemon's own (renamed). Returns NULL or what is wrong.
 */
static const char *shm_file_problem(const uint8_t *addr, uint32_t len,
				    unsigned uid)
{
	char name[BP_RDMA_ADDR_MAX + 1];
	struct stat st;
	int dfd;

	memcpy(name, addr, len);
	name[len] = '\0';
	dfd = open("/dev/shm", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return "/dev/shm cannot be opened";
	/* the name after "fi_shm://" is the file's */
	if (fstatat(dfd, name + 9, &st, AT_SYMLINK_NOFOLLOW) != 0) {
		close(dfd);
		return "its /dev/shm file does not exist";
	}
	close(dfd);
	if (!S_ISREG(st.st_mode) || st.st_nlink != 1)
		return "its /dev/shm file is a link";
	if (st.st_uid != uid)
		return "its /dev/shm file is another user's";
	for (unsigned k = 0; k < n_own_files; k++)
		if (own_files[k] == st.st_ino)
			return "its /dev/shm file is the daemon's own";
	return NULL;
}

/* The rule for a shm rail (see the top of this file). */
static int check_shm_rail(unsigned i, long pid, bool on_host,
			  const struct sock_entry *ctl, const uint8_t *a,
			  uint32_t len, char *why, size_t n)
{
	const char *bad;
	int h;

	if (pid == (long)getpid())
		return refuse_why(why, n,
				  "rail %u names the daemon's own shm endpoint",
				  i);
	if (!on_host)
		return refuse_why(why, n,
				  "rail %u is a shm endpoint, and the client "
				  "is not on this host",
				  i);
	if (ctl->uid != (unsigned)geteuid())
		return refuse_why(why, n,
				  "rail %u: FILL over shm is served to "
				  "processes of the daemon's own user only",
				  i);
	h = held_by(pid, ctl->inode, 0);
	if (h < 0)
		return refuse_why(why, n,
				  "rail %u names a shm endpoint of a process "
				  "that is gone or cannot be looked at",
				  i);
	if (!(h & 1))
		return refuse_why(why, n,
				  "rail %u names another process's shm "
				  "endpoint, not the client's",
				  i);
	bad = shm_file_problem(a, len, ctl->uid);
	if (bad) {
		snprintf(why, n,
			 "rail %u names a shm endpoint whose file "
			 "is not as its process made it: %s",
			 i, bad);
		return -EACCES;
	}
	return 0;
}

/* The rule for a socket-address rail (see the top of this file). */
static int check_ip_rail(unsigned i, const struct ipport *ep,
			 const struct ipport *cp, bool on_host,
			 const struct sock_entry *ctl, long *hint, char *why,
			 size_t n)
{
	struct sock_entry lis[MAX_LISTENERS];
	unsigned nl;

	if (!same_ip(ep, cp))
		return refuse_why(why, n,
				  "rail %u names an address other than the "
				  "client's own",
				  i);
	if (!on_host)
		return 0; /* another host: told apart by its address */
	nl = find_sockets(ep, NULL, lis, MAX_LISTENERS);
	if (nl == 0)
		return refuse_why(why, n,
				  "rail %u: nothing listens at that address "
				  "on this host",
				  i);
	if (nl > MAX_LISTENERS)
		return refuse_why(why, n,
				  "rail %u: too many listeners take that "
				  "address",
				  i);
	for (unsigned k = 0; k < nl; k++) {
		bool unreadable;

		if (!one_process_holds(ctl->inode, lis[k].inode, hint,
				       &unreadable))
			return refuse_why(
				why, n,
				unreadable
					? "rail %u: cannot tell who owns that "
					  "endpoint (another user's process)"
					: "rail %u names an endpoint that is "
					  "not the client's (the daemon's own, "
					  "or another process's)",
				i);
	}
	return 0;
}

int fill_auth_check(const struct sockaddr_storage *peer,
		    const struct sockaddr_storage *local,
		    const struct bp_rdma_peer_desc *d, long *hint, char *why,
		    size_t n)
{
	struct ipport cp, cl; /* the control connection: client, ours */
	struct sock_entry ctl;
	bool on_host;

	if (!from_sockaddr(peer, sizeof(*peer), &cp) ||
	    !from_sockaddr(local, sizeof(*local), &cl)) {
		snprintf(why, n, "the control connection has no IP address");
		return -EACCES;
	}
	/* the client's end of our connection: local end cp, remote end cl */
	on_host = find_sockets(&cp, &cl, &ctl, 1) == 1;
	for (unsigned i = 0; i < d->rails; i++) {
		const uint8_t *a = d->rail[i].addr;
		uint32_t len = d->rail[i].addrlen;
		long pid = shm_owner(a, len);
		struct ipport ep;
		int rc;

		if (pid > 0)
			rc = check_shm_rail(i, pid, on_host, &ctl, a, len, why,
					    n);
		else if (from_sockaddr(a, len, &ep))
			rc = check_ip_rail(i, &ep, &cp, on_host, &ctl, hint,
					   why, n);
		else
			rc = refuse_why(why, n,
					"rail %u: an endpoint address this "
					"daemon cannot attribute to the "
					"client (shm names must be the "
					"library's, fi_shm://bp-PID-...)",
					i);
		if (rc)
			return rc;
	}
	return 0;
}
