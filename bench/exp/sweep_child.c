/* SPDX-License-Identifier: MIT */
/*
 * sweep_child.c - one child of `bpbench sweep`: `/proc/self/exe` run with
 * the point's arguments, its stdout read whole, its stderr kept in a file to
 * show when it fails.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sweep.h"

/*
 * Run `/proc/self/exe args...`; its stdout into *out (NUL-terminated, to
 * free), its stderr into errf. Returns the wait status, or -1.
 */
int sw_spawn(char *const *args, char **out, FILE *errf)
{
	int fds[2], st;
	pid_t pid;
	size_t len = 0, cap = 65536;
	char *buf = malloc(cap);

	if (!buf || pipe(fds) != 0) {
		free(buf);
		return -1;
	}
	fflush(NULL); /* the child must not repeat our buffered output */
	pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		free(buf);
		return -1;
	}
	if (pid == 0) {
		dup2(fds[1], STDOUT_FILENO);
		dup2(fileno(errf), STDERR_FILENO);
		close(fds[0]);
		close(fds[1]);
		execv("/proc/self/exe", args);
		fprintf(stderr, "exec /proc/self/exe: %s\n", strerror(errno));
		_exit(127);
	}
	close(fds[1]);
	for (;;) {
		ssize_t n;

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
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fds[0]);
	buf[len] = '\0';
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR) {
			free(buf);
			return -1;
		}
	*out = buf;
	return st;
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
