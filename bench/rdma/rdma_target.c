/* SPDX-License-Identifier: MIT */
/*
 * rdma_target.c - bp-target as a child process, and CPU clocks of threads
 * and processes (rdma_target.h).
 */
#include "rdma/rdma_target.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lab/bpbench.h"

/* how long bp-target may take to print its "listening" line */
#define RT_START_TIMEOUT_MS 10000
#define RT_MAX_CHILDREN	    8

/*
 * Children to stop at exit: written by the main thread only; volatile
 * because the signal handler reads them. Whatever ends bpbench, its
 * bp-target children go with it: at exit and on SIGINT, SIGTERM, SIGHUP
 * and SIGPIPE they get SIGTERM (their own stop removes their /dev/shm
 * files, bounded by their --stop-timeout-ms) and are waited for, up to
 * RT_STOP_MS, then SIGKILLed; a bpbench killed outright hands them SIGTERM
 * through PR_SET_PDEATHSIG.
 */
static volatile pid_t rt_children[RT_MAX_CHILDREN];
static int rt_atexit_done;

/* The daemon's stop is bounded by its --stop-timeout-ms (5 s): more. */
#define RT_STOP_MS 8000

/* SIGTERM every child, wait up to RT_STOP_MS, SIGKILL what is left. */
static void rt_stop_children(void)
{
	struct timespec tick = {0, 10000000};
	int left = 0;

	/* async-signal-safe: kill, waitpid, nanosleep only */
	for (int i = 0; i < RT_MAX_CHILDREN; i++)
		if (rt_children[i] > 0 && kill(rt_children[i], SIGTERM) == 0) {
			kill(rt_children[i], SIGCONT); /* one paused */
			left++;
		}
	for (int ms = 0; left > 0 && ms < RT_STOP_MS; ms += 10) {
		nanosleep(&tick, NULL);
		for (int i = 0; i < RT_MAX_CHILDREN; i++)
			if (rt_children[i] > 0 &&
			    waitpid(rt_children[i], NULL, WNOHANG) ==
				    rt_children[i]) {
				rt_children[i] = 0;
				left--;
			}
	}
	for (int i = 0; i < RT_MAX_CHILDREN; i++)
		if (rt_children[i] > 0) {
			kill(rt_children[i], SIGKILL);
			waitpid(rt_children[i], NULL, 0);
			rt_children[i] = 0;
		}
}

static void rt_on_signal(int sig)
{
	rt_stop_children();
	signal(sig, SIG_DFL);
	raise(sig); /* and die of it, as without the handler */
}

static void rt_track(pid_t pid, int add)
{
	if (!rt_atexit_done) {
		static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};

		atexit(rt_stop_children); /* bench_die exits: no orphan */
		for (unsigned i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
			signal(sigs[i], rt_on_signal);
		rt_atexit_done = 1;
	}
	for (int i = 0; i < RT_MAX_CHILDREN; i++)
		if (add ? rt_children[i] == 0 : rt_children[i] == pid) {
			rt_children[i] = add ? pid : 0;
			return;
		}
}

/* A program of this build: rel, relative to the directory of bpbench. */
static int rt_exe_path(const char *rel, char *buf, size_t len)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char *slash;

	if (n <= 0)
		return -ENOENT;
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	if (!slash)
		return -ENOENT;
	*slash = '\0';
	if ((size_t)snprintf(buf, len, "%s/%s", exe, rel) >= len)
		return -ENAMETOOLONG;
	return access(buf, X_OK) == 0 ? 0 : -ENOENT;
}

int rt_daemon_path(char *buf, size_t len)
{
	return rt_exe_path("../target/bp-target", buf, len);
}

/* Read one line from fd within the deadline. */
static int rt_read_line(int fd, char *line, size_t len, int64_t deadline)
{
	size_t off = 0;

	while (off + 1 < len) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		int64_t left = (deadline - bench_now_ns()) / 1000000;
		ssize_t n;

		if (left <= 0 || poll(&pfd, 1, (int)left) <= 0)
			return -ETIMEDOUT;
		n = read(fd, line + off, 1);
		if (n <= 0)
			return -EPIPE; /* the daemon exited */
		if (line[off] == '\n') {
			line[off] = '\0';
			return 0;
		}
		off++;
	}
	line[off] = '\0';
	return 0;
}

/* SIGKILL a child that never got going, reap it, forget it. */
static void rt_child_kill(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	rt_track(pid, 0);
}

/*
 * Start path with argv, its stdout a pipe to us (*from_child), and with
 * to_child its stdin a pipe from us (*to_child; else it has ours), and
 * read its first line within RT_START_TIMEOUT_MS. Returns 0 and the pid,
 * or a negative errno (-EPIPE: it exited first; the child is gone). The
 * child gets SIGTERM when bpbench dies, and is stopped at exit.
 */
static int rt_spawn(const char *path, const char *const *argv, int *to_child,
		    int *from_child, char *line, size_t len, pid_t *out)
{
	int opipe[2], ipipe[2] = {-1, -1}, rc;
	pid_t pid, parent;

	if (pipe2(opipe, O_CLOEXEC))
		return -errno;
	if (to_child && pipe2(ipipe, O_CLOEXEC)) {
		rc = -errno;
		close(opipe[0]);
		close(opipe[1]);
		return rc;
	}
	fflush(NULL);
	parent = getpid();
	pid = fork();
	if (pid < 0) {
		rc = -errno;
		close(opipe[0]);
		close(opipe[1]);
		if (to_child) {
			close(ipipe[0]);
			close(ipipe[1]);
		}
		return rc;
	}
	if (pid == 0) {
		/* bpbench killed outright: the child is told to stop */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(127); /* it died before the prctl */
		/*
		 * A group of its own: a paused child (rt_pause) would keep
		 * that SIGTERM pending for ever, but a group left without
		 * its parent in the session with a stopped member is sent
		 * SIGHUP and SIGCONT by the kernel (an orphaned process
		 * group). SIGHUP is ignored, so that the SIGTERM is what
		 * ends it: its orderly stop removes its shm files. Signals
		 * for bpbench's group reach the child through bpbench's
		 * handler instead.
		 */
		setpgid(0, 0);
		signal(SIGHUP, SIG_IGN);
		dup2(opipe[1], STDOUT_FILENO);
		if (to_child)
			dup2(ipipe[0], STDIN_FILENO);
		execv(path, (char *const *)argv);
		_exit(127);
	}
	close(opipe[1]);
	if (to_child)
		close(ipipe[0]);
	rt_track(pid, 1);
	rc = rt_read_line(opipe[0], line, len,
			  bench_now_ns() +
				  RT_START_TIMEOUT_MS * INT64_C(1000000));
	if (rc) {
		close(opipe[0]);
		if (to_child)
			close(ipipe[1]);
		rt_child_kill(pid);
		return rc;
	}
	*from_child = opipe[0];
	if (to_child)
		*to_child = ipipe[1];
	*out = pid;
	return 0;
}

/* The reason a child did not start, for err. */
static void rt_start_failed(const char *prog, int rc, const char *line,
			    char *err, size_t errlen)
{
	snprintf(err, errlen, "%s did not start (%s%s%s)", prog,
		 rc == -EPROTO ? "first line: " : strerror(-rc),
		 rc == -EPROTO ? line : "",
		 rc == -EPIPE ? ", see its stderr" : "");
}

int rt_daemon_start(const char *provider, const char *fabric_node,
		    const char *progress_wait, unsigned rails,
		    uint64_t max_region, struct rt_daemon *d, char *err,
		    size_t errlen)
{
	char path[PATH_MAX], rails_s[16], region_s[32], line[512], prov[64];
	const char *argv[16];
	int argc = 0, fd, rc;

	memset(d, 0, sizeof(*d));
	if (rt_daemon_path(path, sizeof(path))) {
		snprintf(err, errlen, "no bp-target next to bpbench");
		return -ENOENT;
	}
	snprintf(rails_s, sizeof(rails_s), "%u", rails);
	snprintf(region_s, sizeof(region_s), "%llu",
		 (unsigned long long)max_region);
	argv[argc++] = path;
	argv[argc++] = "--port";
	argv[argc++] = "0";
	argv[argc++] = "--provider";
	argv[argc++] = provider;
	argv[argc++] = "--rails";
	argv[argc++] = rails_s;
	argv[argc++] = "--max-region";
	argv[argc++] = region_s;
	if (fabric_node) {
		argv[argc++] = "--fabric-node";
		argv[argc++] = fabric_node;
	}
	if (progress_wait) {
		argv[argc++] = "--progress-wait";
		argv[argc++] = progress_wait;
	}
	argv[argc] = NULL;
	rc = rt_spawn(path, argv, NULL, &fd, line, sizeof(line), &d->pid);
	if (!rc) {
		close(fd); /* the daemon writes nothing more to stdout */
		if (sscanf(line,
			   "bp-target: listening on %63[^:]:%u provider=%63s "
			   "rails=%u",
			   d->host, &d->port, prov, &d->rails) != 4) {
			rc = -EPROTO;
			rt_child_kill(d->pid);
			d->pid = 0;
		}
	}
	if (rc) {
		rt_start_failed("bp-target", rc, line, err, errlen);
		return rc;
	}
	snprintf(d->provider, sizeof(d->provider), "%s", prov);
	return 0;
}

/* SIGTERM (and SIGCONT, for one paused), wait (up to RT_STOP_MS), then
 * SIGKILL; *pid = 0. */
static void rt_child_stop(pid_t *pid)
{
	sigset_t sigs, old;
	int64_t deadline;

	if (*pid <= 0)
		return;
	/*
	 * The handler stops the children it tracks: not one reaped here and
	 * not yet untracked (its pid may be reused by then).
	 */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	sigaddset(&sigs, SIGPIPE);
	sigprocmask(SIG_BLOCK, &sigs, &old);
	kill(*pid, SIGTERM);
	kill(*pid, SIGCONT);
	/* its stop is bounded by its --stop-timeout-ms: wait past it */
	deadline = bench_now_ns() + RT_STOP_MS * INT64_C(1000000);
	while (waitpid(*pid, NULL, WNOHANG) == 0) {
		if (bench_now_ns() > deadline) {
			kill(*pid, SIGKILL);
			waitpid(*pid, NULL, 0);
			break;
		}
		bench_sleep_ns(1000000);
	}
	rt_track(*pid, 0);
	*pid = 0;
	sigprocmask(SIG_SETMASK, &old, NULL);
}

void rt_daemon_stop(struct rt_daemon *d)
{
	rt_child_stop(&d->pid);
}

int rt_pause(pid_t pid, bool pause)
{
	int st;

	if (kill(pid, pause ? SIGSTOP : SIGCONT))
		return -errno;
	/* the signal is delivered when this says it was */
	if (waitpid(pid, &st, pause ? WUNTRACED : WCONTINUED) != pid)
		return -errno;
	if (pause ? !WIFSTOPPED(st) : !WIFCONTINUED(st))
		return -ECHILD; /* it exited */
	return 0;
}

/* "HEX": bytes into out (at most max); their count, or -1. */
static int rt_unhex(const char *s, uint8_t *out, size_t max)
{
	size_t n = strlen(s);

	if (n % 2 || n / 2 > max)
		return -1;
	for (size_t i = 0; i < n / 2; i++) {
		unsigned v;

		if (sscanf(s + 2 * i, "%2x", &v) != 1)
			return -1;
		out[i] = (uint8_t)v;
	}
	return (int)(n / 2);
}

int rt_plain_start(const char *provider, const char *node, uint64_t len,
		   struct rt_plain *p, char *err, size_t errlen)
{
	char path[PATH_MAX], size_s[32], line[1024], prov[64], addr[600];
	unsigned long long base, key, got_len;
	const char *argv[10];
	int argc = 0, n, rc;

	memset(p, 0, sizeof(*p));
	p->cmd_fd = p->reply_fd = -1;
	if (rt_exe_path("bp-plain-target", path, sizeof(path))) {
		snprintf(err, errlen, "no bp-plain-target next to bpbench");
		return -ENOENT;
	}
	snprintf(size_s, sizeof(size_s), "%llu", (unsigned long long)len);
	argv[argc++] = path;
	argv[argc++] = "--provider";
	argv[argc++] = provider;
	argv[argc++] = "--size";
	argv[argc++] = size_s;
	if (node) {
		argv[argc++] = "--node";
		argv[argc++] = node;
	}
	argv[argc] = NULL;
	rc = rt_spawn(path, argv, &p->cmd_fd, &p->reply_fd, line, sizeof(line),
		      &p->pid);
	if (!rc && (sscanf(line,
			   "bp-plain-target: ready provider=%63s addr=%599s "
			   "base=0x%llx key=0x%llx len=%llu",
			   prov, addr, &base, &key, &got_len) != 5 ||
		    got_len != len ||
		    (n = rt_unhex(addr, p->desc.rail[0].addr,
				  sizeof(p->desc.rail[0].addr))) <= 0)) {
		rc = -EPROTO;
		rt_plain_stop(p);
	}
	if (rc) {
		rt_start_failed("bp-plain-target", rc, line, err, errlen);
		return rc;
	}
	p->desc.rails = 1;
	p->desc.len = len;
	p->desc.rail[0].addrlen = (uint32_t)n;
	p->desc.rail[0].base = base;
	p->desc.rail[0].key = key;
	return 0;
}

int rt_plain_peek(struct rt_plain *p, uint64_t off, uint64_t *word)
{
	char cmd[64], line[128];
	unsigned long long v;
	int n = snprintf(cmd, sizeof(cmd), "peek %llu\n",
			 (unsigned long long)off);
	int rc;

	if (write(p->cmd_fd, cmd, (size_t)n) != n)
		return -EPIPE;
	rc = rt_read_line(p->reply_fd, line, sizeof(line),
			  bench_now_ns() +
				  RT_START_TIMEOUT_MS * INT64_C(1000000));
	if (rc)
		return rc;
	if (sscanf(line, "0x%llx", &v) != 1)
		return -EPROTO;
	*word = v;
	return 0;
}

void rt_plain_stop(struct rt_plain *p)
{
	/* the end of its stdin stops it too; SIGTERM makes sure */
	if (p->cmd_fd >= 0)
		close(p->cmd_fd);
	if (p->reply_fd >= 0)
		close(p->reply_fd);
	p->cmd_fd = p->reply_fd = -1;
	rt_child_stop(&p->pid);
}

int64_t rt_proc_cpu_ns(pid_t pid)
{
	char path[64], buf[1024];
	unsigned long long ut, st;
	const char *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* fields after the command name, which may hold spaces and ')' */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 2,
			 "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu "
			 "%llu",
			 &ut, &st) != 2)
		return -1;
	return (int64_t)((ut + st) *
			 (1000000000ull /
			  (unsigned long long)sysconf(_SC_CLK_TCK)));
}

int rt_tasks(pid_t *out, int max)
{
	DIR *dir = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	if (!dir)
		return -1;
	while ((e = readdir(dir)) && n < max)
		if (e->d_name[0] != '.')
			out[n++] = (pid_t)atoi(e->d_name);
	closedir(dir);
	return n;
}

int rt_tasks_new(const pid_t *before, int nb, const pid_t *now, int nn,
		 pid_t *out, int max)
{
	int n = 0;

	for (int i = 0; i < nn && n < max; i++) {
		int seen = 0;

		for (int j = 0; j < nb && !seen; j++)
			seen = before[j] == now[i];
		if (!seen)
			out[n++] = now[i];
	}
	return n;
}

int64_t rt_tid_cpu_ns(pid_t tid)
{
	/*
	 * Linux's per-thread CPU clock of any thread in this process, the id
	 * glibc's pthread_getcpuclockid builds: ~tid << 3 | CPUCLOCK_SCHED (2)
	 * | CPUCLOCK_PERTHREAD (4). Needed for threads the library created,
	 * whose pthread_t we do not have.
	 */
	clockid_t c = (clockid_t)((~(unsigned)tid << 3) | 6u);
	struct timespec ts;

	if (clock_gettime(c, &ts))
		return -1;
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t rt_tids_cpu_ns(const pid_t *tids, int n)
{
	int64_t sum = 0;

	for (int i = 0; i < n; i++) {
		int64_t v = rt_tid_cpu_ns(tids[i]);

		if (v > 0)
			sum += v;
	}
	return sum;
}
