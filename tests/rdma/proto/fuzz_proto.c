/* SPDX-License-Identifier: MIT */
/*
 * fuzz_proto.c - libFuzzer target for the control protocol parser.
 *
 * Besides "never crashes, never reads out of bounds" (ASAN), it checks
 * what the parser promises: an error is one of the three documented
 * errnos; a success consumed no more than it was given, and the message it
 * produced encodes back to exactly the bytes it came from (the format has
 * one encoding per message, so parse and encode are inverse); one byte
 * fewer is "need more", never a different message.
 *
 * Build: clang -g -fsanitize=fuzzer,address -Iinclude -Isrc/rdma
 *        tests/rdma/proto/fuzz_proto.c src/rdma/proto.c
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "src/rdma/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t out[BPI_MSG_MAX];
	struct bpi_msg m;
	ssize_t r = bpi_proto_parse(data, size, &m), n;

	if (r < 0) {
		if (r != -EPROTO && r != -EMSGSIZE && r != -EBADMSG)
			__builtin_trap();
		return 0;
	}
	if (r == 0) {
		/* "need more" only while a header or body is incomplete */
		if (size >= BPI_HDR_LEN) {
			uint32_t blen = (uint32_t)data[8] |
					(uint32_t)data[9] << 8 |
					(uint32_t)data[10] << 16 |
					(uint32_t)data[11] << 24;

			if (size - BPI_HDR_LEN >= blen)
				__builtin_trap();
		}
		return 0;
	}
	if ((size_t)r > size || (size_t)r > BPI_MSG_MAX)
		__builtin_trap();
	n = bpi_proto_encode(&m, out, sizeof(out));
	if (n != r || memcmp(out, data, (size_t)r) != 0)
		__builtin_trap();
	if (bpi_proto_parse(data, (size_t)r - 1, NULL) != 0)
		__builtin_trap();
	return 0;
}
