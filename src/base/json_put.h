/* SPDX-License-Identifier: MIT */
/* Building JSON into a caller's buffer with snprintf rules. */
#ifndef BP_SRC_BASE_JSON_PUT_H
#define BP_SRC_BASE_JSON_PUT_H

#include <stdio.h>

/*
 * Append to buf (size bytes) at len; len counts what would have been
 * written, so the caller returns the length needed. Needs locals buf,
 * size and len (size_t).
 */
#define BP_JSON_PUT(...)                                                       \
	do {                                                                   \
		int n_ = snprintf(len < size ? buf + len : NULL,               \
				  len < size ? size - len : 0, __VA_ARGS__);   \
		if (n_ > 0)                                                    \
			len += (size_t)n_;                                     \
	} while (0)

#endif
