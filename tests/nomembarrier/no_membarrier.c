/* SPDX-License-Identifier: MIT */
/*
 * no_membarrier.c - an LD_PRELOAD shim that makes membarrier(2) fail with
 * ENOSYS, as in a container whose seccomp profile refuses it or on a
 * kernel older than 4.14: the library then runs its other fence mode,
 * where every wait queue's wakers fence (src/waitq.c). It interposes
 * syscall(3), through which the library calls membarrier, and passes every
 * other call on. The first refusal writes "refused" to the file that
 * $BPT_NO_MEMBARRIER_MARK names, so that the test knows the library took
 * this path and did not reach membarrier some other way.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* RTLD_NEXT; meson defines it already */
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

long syscall(long nr, ...);

static void mark_refused(void)
{
	static atomic_int said;
	const char *path = getenv("BPT_NO_MEMBARRIER_MARK");
	int fd;

	/* relaxed: one writer is enough, any of them */
	if (!path || atomic_exchange_explicit(&said, 1, memory_order_relaxed))
		return;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd >= 0) {
		(void)!write(fd, "refused\n", 8);
		close(fd);
	}
}

long syscall(long nr, ...)
{
	long (*real)(long, ...) =
		(long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
	long a[6];
	va_list ap;

	if (nr == SYS_membarrier) {
		mark_refused();
		errno = ENOSYS;
		return -1;
	}
	va_start(ap, nr);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	return real(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}
