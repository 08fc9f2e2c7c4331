/* SPDX-License-Identifier: MIT */
/* bp_strerror: text for batchpipe's return values. */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include <batchpipe/error.h>
#include <batchpipe/version.h>

/*
 * The library's own meaning of the codes it returns comes first; any other
 * errno falls back to the C library's text (strerrordesc_np is thread-safe
 * and static, unlike strerror).
 */
const char *bp_strerror(int err)
{
	if (err == INT_MIN)
		return "unknown error";
	if (err < 0)
		err = -err;
	switch (err) {
	case 0:
		return "success";
	case EPIPE:
		return "closed: no more input accepted (end of stream)";
	case EAGAIN:
		return "would block: no room or nothing ready now, try again";
	case ETIMEDOUT:
		return "timed out before the operation could complete";
	case EINVAL:
		return "invalid argument";
	case ENOMEM:
		return "out of memory";
	case EOPNOTSUPP:
		return "operation not supported in this mode";
	case ERANGE:
		return "out of range";
	case EINTR:
		return "interrupted by a signal";
	case EDEADLK:
		return "would deadlock: called from a thread the call would "
		       "wait for (a callback of the same pipeline)";
	case EBUSY:
		return "busy: still in use";
	default: {
		const char *s = strerrordesc_np(err);
		return s ? s : "unknown error";
	}
	}
}

const char *bp_version(void)
{
	return BP_VERSION_STRING;
}

unsigned bp_version_number(void)
{
	return BP_VERSION;
}
