/* SPDX-License-Identifier: MIT */
/*
 * proto.h - the control protocol between a client (conn.c) and the
 * bp-target daemon. Internal: the library exports none of it.
 *
 * Wire format. Every integer is little-endian, written and read byte by
 * byte (so the format does not depend on the host). A message is a 12-byte
 * header and a body:
 *
 *   offset 0  u32 magic    0x54525042: the bytes "BPRT" on the wire
 *          4  u16 version  1
 *          6  u16 type     enum bpi_msg_type
 *          8  u32 length   body bytes; header + body <= BPI_MSG_MAX
 *
 * Field types in the bodies:
 *   u32 / u64 / i32   little-endian
 *   str               u16 length, then that many bytes: no NUL inside, no
 *                     terminator, at most the field's bound
 *   bytes             u32 length, then the bytes (addresses: 1..128)
 *   desc              u32 rails (1..BP_RDMA_MAX_RAILS), u64 len, then per
 *                     rail: bytes addr, u64 base, u64 key
 *
 * Bodies (-> daemon, <- client):
 *   HELLO          ->  str token (<= 256), str provider (<= 64, "" = the
 *                      daemon's), u32 rails (1..8), u64 region_len
 *   WELCOME        <-  str provider, desc (the client's region on the
 *                      daemon: rails and len as asked)
 *   FILL           ->  desc (a region of the client's), u64 fill_len, u32
 *                      page (1..BPI_FILL_PAGE_MAX), u64 seed
 *   FILL_PROGRESS  <-  u64 done (bytes written so far)
 *   FILL_DONE      <-  i32 status (0 or a negative errno), u64 bytes, u64 ns
 *   QUERY          ->  u64 offset, u64 len
 *   QUERY_REPLY    <-  i32 status (0 or negative), u64 digest, u64
 *                      imm_count, u64 imm_sum
 *   ERROR          <-  i32 code (< 0), str text (<= 1024)
 *   BYE            ->  (empty)
 *
 * The body must be exactly as long as its fields: a byte short or a byte
 * over is malformed. Semantic checks that need the daemon's state (is the
 * region small enough, does the provider match) are the daemon's, not the
 * parser's; the parser checks what the format itself bounds.
 *
 * Conversation: HELLO, then WELCOME or ERROR. Then any number of QUERY ->
 * QUERY_REPLY and FILL -> FILL_PROGRESS* FILL_DONE, one at a time, and
 * BYE. A request the daemon cannot do is answered in its own reply's status
 * (QUERY_REPLY -ERANGE, FILL_DONE -EINVAL) and the conversation goes on.
 * ERROR always ends it: the daemon closes the connection after sending it
 * (a refused HELLO, a message out of turn). A malformed message, or one
 * that stalls, is not answered at all: the connection is just closed.
 *
 * Whom FILL may write to (the daemon checks it: target/fillauth.c): every
 * rail of the FILL's desc must be an endpoint of the client that asks, the
 * process at the other end of this control connection. shm: a library name
 * "fi_shm://bp-PID-..." whose PID holds the connection's socket, of the
 * daemon's own user, its /dev/shm file a regular one of that user with one
 * link and not the daemon's. tcp and other socket addresses: the
 * connection's source IP, and, for a client on the daemon's host, every
 * listener that takes that address held by a process that also holds the
 * connection's socket. Anything else
 * (the daemon's own endpoints, a third address, another process's or
 * user's endpoint, an address form it cannot attribute) is answered
 * FILL_DONE -EACCES and the conversation goes on. Keys and bounds within
 * the client's endpoint are the provider's: tcp;ofi_rxm checks them, shm
 * does not (the daemon may then write anywhere in the asking process).
 */
#ifndef BP_RDMA_PROTO_H
#define BP_RDMA_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <batchpipe/rdma.h>

#define BPI_PROTO_MAGIC	  0x54525042u /* "BPRT" as little-endian bytes */
#define BPI_PROTO_VERSION 1u
#define BPI_HDR_LEN	  12u
#define BPI_MSG_MAX	  65536u /* header + body */
#define BPI_TOKEN_MAX	  256u
#define BPI_PROVIDER_MAX  64u
#define BPI_TEXT_MAX	  1024u
#define BPI_FILL_PAGE_MAX (64u << 20)
#define BPI_DEFAULT_PORT  7471u

enum bpi_msg_type {
	BPI_MSG_HELLO = 1,
	BPI_MSG_WELCOME = 2,
	BPI_MSG_FILL = 3,
	BPI_MSG_FILL_PROGRESS = 4,
	BPI_MSG_FILL_DONE = 5,
	BPI_MSG_QUERY = 6,
	BPI_MSG_QUERY_REPLY = 7,
	BPI_MSG_ERROR = 8,
	BPI_MSG_BYE = 9,
};
#define BPI_MSG_TYPE_MAX BPI_MSG_BYE

/*
 * A decoded message. Strings are copied out NUL-terminated (the wire form
 * has no NUL: a string can never be cut short by one); *_len says how many
 * bytes the wire carried.
 */
struct bpi_msg {
	uint16_t type; /* enum bpi_msg_type */
	union {
		struct {
			char token[BPI_TOKEN_MAX + 1];
			uint32_t token_len;
			char provider[BPI_PROVIDER_MAX + 1];
			uint32_t rails;
			uint64_t region_len;
		} hello;
		struct {
			char provider[BPI_PROVIDER_MAX + 1];
			struct bp_rdma_peer_desc desc;
		} welcome;
		struct {
			struct bp_rdma_peer_desc desc;
			uint64_t len;
			uint32_t page;
			uint64_t seed;
		} fill;
		struct {
			uint64_t done;
		} progress;
		struct {
			int32_t status;
			uint64_t bytes;
			uint64_t ns;
		} done;
		struct {
			uint64_t offset;
			uint64_t len;
		} query;
		struct {
			int32_t status;
			uint64_t digest;
			uint64_t imm_count;
			uint64_t imm_sum;
		} reply;
		struct {
			int32_t code;
			char text[BPI_TEXT_MAX + 1];
		} error;
	} u;
};

/*
 * Parse one message from the start of buf. A pure function of its input.
 * Returns the bytes it consumed (> 0) and *out; 0 when buf holds a valid
 * beginning of a message but not all of it (read more and call again); or
 * a negative errno, as soon as the bytes present prove the message bad:
 *   -EPROTO    wrong magic (checked byte by byte, before the header is
 *              complete), a version other than 1, or an unknown type
 *   -EMSGSIZE  a header announcing more than BPI_MSG_MAX bytes (known
 *              from the header alone: the body is never waited for)
 *   -EBADMSG   a body whose fields do not add up to its length, a string
 *              over its bound or with a NUL, a count or length out of
 *              range, a non-negative error code
 * *out is written only on success.
 */
ssize_t bpi_proto_parse(const void *buf, size_t len, struct bpi_msg *out);

/*
 * Encode *m into buf. Returns the message length, -EINVAL for a field the
 * parser would reject (so what goes out always parses), or -ENOSPC when
 * size is too small (BPI_MSG_MAX always suffices).
 */
ssize_t bpi_proto_encode(const struct bpi_msg *m, void *buf, size_t size);

/* "HELLO", ... for log lines; "unknown" for anything else. */
const char *bpi_proto_type_name(unsigned type);

#endif /* BP_RDMA_PROTO_H */
