/* SPDX-License-Identifier: MIT */
/*
 * sweep/child.c - one child of `bpbench sweep`: `/proc/self/exe` run with
 * the point's arguments, its stdout read whole, its stderr kept in a file to
 * show when it fails. A child has a deadline (--child-timeout), and a sweep
 * stopped by SIGTERM or SIGINT kills its running child first: neither a hung
 * child nor a killed sweep leaves a process behind.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sweep/sweep.h"

/*
 * The running child's process group (its pid; 0: none), for the signal
 * handler. The child leads a group of its own so that a kill reaches what
 * it started too (bpbench rdma's target daemon).
 */
static volatile sig_atomic_t sw_child_pgid;

/*
 * SIGTERM / SIGINT of the sweep: kill and reap the running child, then die
 * of the same signal. Async-signal-safe calls only.
 */
static void sw_on_signal(int sig)
{
	/* a progress line is open most likely: end it */
	static const char msg[] = "\n" BENCH_CMD ": stopped by a signal\n";
	static const char killed[] = BENCH_CMD ": the running child was "
					       "killed\n";
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	pid_t pg = (pid_t)sw_child_pgid;
	ssize_t w;

	w = write(STDERR_FILENO, msg, sizeof(msg) - 1);
	if (pg > 0) {
		kill(-pg, SIGKILL);
		waitpid(pg, NULL, 0);
		w = write(STDERR_FILENO, killed, sizeof(killed) - 1);
	}
	(void)w;
	sigaction(sig, &dfl, NULL);
	raise(sig);
}

static void sw_install_handlers(void)
{
	static int installed;
	struct sigaction sa = {.sa_handler = sw_on_signal};

	if (installed)
		return;
	installed = 1;
	sigemptyset(&sa.sa_mask);
	for (int i = 0; i < 2; i++) {
		int sig = i ? SIGINT : SIGTERM;
		struct sigaction was;

		/* a signal ignored at our start (nohup, a background job of
		 * a shell) stays ignored, for the child too */
		if (sigaction(sig, NULL, &was) == 0 &&
		    was.sa_handler == SIG_IGN)
			continue;
		sigaction(sig, &sa, NULL);
	}
}

/* Reap the child if it has exited; 1 when reaped (status in *st), 0 when
 * it still runs, -1 on an error. The handler must not see a reaped pid:
 * the reap and the clear happen with the signals blocked. */
static int sw_try_reap(pid_t pid, int *st)
{
	sigset_t block, old;
	pid_t r;

	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigprocmask(SIG_BLOCK, &block, &old);
	do
		r = waitpid(pid, st, WNOHANG);
	while (r < 0 && errno == EINTR);
	if (r == pid)
		sw_child_pgid = 0;
	sigprocmask(SIG_SETMASK, &old, NULL);
	return r == pid ? 1 : r == 0 ? 0 : -1;
}

/* Wait for the child until the deadline: 1 reaped, 0 deadline, -1 error. */
static int sw_reap_by(pid_t pid, int *st, int64_t deadline)
{
	for (;;) {
		int r = sw_try_reap(pid, st);

		if (r)
			return r;
		if (bench_now_ns() >= deadline)
			return 0;
		bench_sleep_ns(1000000);
	}
}

/* Past the deadline: kill the child's group and reap the child. */
static void sw_kill_child(pid_t pid)
{
	int st;

	kill(-pid, SIGKILL);
	while (sw_try_reap(pid, &st) == 0)
		bench_sleep_ns(1000000);
}

/*
 * Run `/proc/self/exe args...`; its stdout into *out (NUL-terminated, to
 * free), its stderr into errf. A child still running `timeout_s` seconds
 * after its start is killed, with what it started (SW_SPAWN_TIMEOUT).
 * Returns the wait status, SW_SPAWN_TIMEOUT, or -1.
 */
int sw_spawn(char *const *args, char **out, FILE *errf, unsigned timeout_s)
{
	int64_t deadline = bench_now_ns() + (int64_t)timeout_s * 1000000000;
	int fds[2], st, r;
	pid_t pid;
	size_t len = 0, cap = 65536;
	char *buf = malloc(cap);
	sigset_t block, old;

	if (!buf || pipe(fds) != 0) {
		free(buf);
		return -1;
	}
	sw_install_handlers();
	fflush(NULL); /* the child must not repeat our buffered output */
	/* blocked until sw_child_pgid names the child: a signal in between
	 * would leave it running */
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigprocmask(SIG_BLOCK, &block, &old);
	pid = fork();
	if (pid < 0) {
		sigprocmask(SIG_SETMASK, &old, NULL);
		close(fds[0]);
		close(fds[1]);
		free(buf);
		return -1;
	}
	if (pid == 0) {
		struct sigaction dfl = {.sa_handler = SIG_DFL}, was;

		/* ours are the sweep's; an ignored signal stays ignored */
		for (int i = 0; i < 2; i++) {
			int sig = i ? SIGINT : SIGTERM;

			if (sigaction(sig, NULL, &was) == 0 &&
			    was.sa_handler == sw_on_signal)
				sigaction(sig, &dfl, NULL);
		}
		sigprocmask(SIG_SETMASK, &old, NULL);
		setpgid(0, 0);
		dup2(fds[1], STDOUT_FILENO);
		dup2(fileno(errf), STDERR_FILENO);
		close(fds[0]);
		close(fds[1]);
		execv("/proc/self/exe", args);
		fprintf(stderr, "exec /proc/self/exe: %s\n", strerror(errno));
		_exit(127);
	}
	/* both sides set the group: whichever runs first, it exists before
	 * anyone signals it */
	setpgid(pid, pid);
	sw_child_pgid = pid;
	sigprocmask(SIG_SETMASK, &old, NULL);
	close(fds[1]);
	for (;;) {
		int64_t left = deadline - bench_now_ns();
		struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
		ssize_t n;

		if (left <= 0)
			break;
		r = poll(&pfd, 1, (int)((left + 999999) / 1000000));
		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0)
			break;
		if (cap - len < 4096) {
			char *nb = realloc(buf, cap * 2);

			if (!nb)
				bench_die("%s: out of memory\n", BENCH_CMD);
			buf = nb;
			cap *= 2;
		}
		n = read(fds[0], buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			/* end of its output: now its exit, by the deadline */
			r = sw_reap_by(pid, &st, deadline);
			if (r < 0) {
				close(fds[0]);
				free(buf);
				return -1;
			}
			if (r > 0) {
				close(fds[0]);
				buf[len] = '\0';
				*out = buf;
				return st;
			}
			break;
		}
		len += (size_t)n;
	}
	sw_kill_child(pid);
	close(fds[0]);
	free(buf);
	return SW_SPAWN_TIMEOUT;
}

void sw_print_cmd(FILE *f, char *const *args)
{
	fprintf(f, "bpbench");
	for (int i = 1; args[i]; i++)
		fprintf(f, " %s", args[i]);
	fprintf(f, "\n");
}

void sw_dump_stderr(FILE *errf)
{
	char buf[4096];
	size_t n;

	fflush(errf);
	rewind(errf);
	fprintf(stderr, "---- the child's stderr ----\n");
	while ((n = fread(buf, 1, sizeof(buf), errf)) > 0)
		fwrite(buf, 1, n, stderr);
	fprintf(stderr, "---- end of the child's stderr ----\n");
}
