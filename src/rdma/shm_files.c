/* SPDX-License-Identifier: MIT */
/*
 * The shm endpoint files the library's names leave in /dev/shm. libfabric's
 * shm provider backs each endpoint with a 16 MiB file named after it and
 * removes it when the endpoint closes; a process killed with SIGKILL never
 * does. The library names its shm endpoints "bp-PID-RANDOM" (fabric.c), so
 * a file of that form whose PID no longer exists is an orphan: removed here,
 * once per process when it opens its first shm endpoint, and whenever a
 * caller asks (bp-target does periodically). The same PID in a peer's
 * address lets the stage watch the peer's process (stage.c's peer_exited).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/rdma/rdma_internal.h"

#define SHM_DIR "/dev/shm"

/* "bp-PID-..." -> PID, or -1. */
static long name_pid(const char *name)
{
	char *end;
	long pid;

	if (strncmp(name, "bp-", 3) != 0)
		return -1;
	pid = strtol(name + 3, &end, 10);
	return *end == '-' && pid > 0 ? pid : -1;
}

int bp_rdma_shm_sweep(void)
{
	DIR *d = opendir(SHM_DIR);
	struct dirent *e;
	uid_t me = geteuid();
	int removed = 0;

	if (!d)
		return -errno;
	while ((e = readdir(d)) != NULL) {
		long pid = name_pid(e->d_name);
		struct stat st;

		if (pid < 0 || pid == (long)getpid())
			continue;
		/* alive (or another user's, EPERM): not an orphan */
		if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISREG(st.st_mode) || (me != 0 && st.st_uid != me))
			continue;
		if (unlinkat(dirfd(d), e->d_name, 0) == 0)
			removed++;
	}
	closedir(d);
	return removed;
}

/* Where PID namespaces share /dev/shm, a name's PID is not a process here. */
static bool pids_off(void)
{
	const char *off = getenv("BP_RDMA_NO_SHM_SWEEP");

	return off && *off && strcmp(off, "0") != 0;
}

static void sweep_once(void)
{
	if (!pids_off())
		(void)bp_rdma_shm_sweep();
}

long bpi_shm_addr_pid(const void *addr, size_t len)
{
	static const char scheme[] = "fi_shm://";
	char name[BP_RDMA_ADDR_MAX + 1];

	if (len > BP_RDMA_ADDR_MAX || pids_off())
		return -1;
	memcpy(name, addr, len);
	name[len] = '\0';
	if (strncmp(name, scheme, sizeof(scheme) - 1) != 0)
		return -1;
	return name_pid(name + sizeof(scheme) - 1);
}

void bpi_shm_sweep_once(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, sweep_once);
}
