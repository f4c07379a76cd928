/* The NBD wire format (doc/proto.md of the NBD project, with the
 * EXTENDED_HEADERS extension).  Every field on the wire is big-endian;
 * the structs are packed images of the messages, converted with
 * htobe / be*toh at the edges. */
#ifndef NBD_PROTO_H
#define NBD_PROTO_H

#include <stdint.h>

#define NBD_DEFAULT_PORT 10809

/* Handshake. */
#define NBD_MAGIC UINT64_C(0x4e42444d41474943) /* "NBDMAGIC" */
#define NBD_IHAVEOPT UINT64_C(0x49484156454F5054) /* "IHAVEOPT" */
#define NBD_OPT_REPLY_MAGIC UINT64_C(0x3e889045565a9)

/* Handshake flags (server) and client flags. */
#define NBD_FLAG_FIXED_NEWSTYLE (1u << 0)
#define NBD_FLAG_NO_ZEROES (1u << 1)
#define NBD_FLAG_C_FIXED_NEWSTYLE (1u << 0)
#define NBD_FLAG_C_NO_ZEROES (1u << 1)

/* Options. */
#define NBD_OPT_EXPORT_NAME 1
#define NBD_OPT_ABORT 2
#define NBD_OPT_LIST 3
#define NBD_OPT_PEEK_EXPORT 4
#define NBD_OPT_STARTTLS 5
#define NBD_OPT_INFO 6
#define NBD_OPT_GO 7
#define NBD_OPT_STRUCTURED_REPLY 8
#define NBD_OPT_LIST_META_CONTEXT 9
#define NBD_OPT_SET_META_CONTEXT 10
#define NBD_OPT_EXTENDED_HEADERS 11

/* Option replies. */
#define NBD_REP_ACK 1u
#define NBD_REP_SERVER 2u
#define NBD_REP_INFO 3u
#define NBD_REP_META_CONTEXT 4u
#define NBD_REP_ERR(n) ((1u << 31) + (n))
#define NBD_REP_ERR_UNSUP NBD_REP_ERR(1)
#define NBD_REP_ERR_POLICY NBD_REP_ERR(2)
#define NBD_REP_ERR_INVALID NBD_REP_ERR(3)
#define NBD_REP_ERR_PLATFORM NBD_REP_ERR(4)
#define NBD_REP_ERR_TLS_REQD NBD_REP_ERR(5)
#define NBD_REP_ERR_UNKNOWN NBD_REP_ERR(6)
#define NBD_REP_ERR_SHUTDOWN NBD_REP_ERR(7)
#define NBD_REP_ERR_BLOCK_SIZE_REQD NBD_REP_ERR(8)
#define NBD_REP_ERR_TOO_BIG NBD_REP_ERR(9)
#define NBD_REP_ERR_EXT_HEADER_REQD NBD_REP_ERR(10)

/* NBD_REP_INFO types. */
#define NBD_INFO_EXPORT 0
#define NBD_INFO_NAME 1
#define NBD_INFO_DESCRIPTION 2
#define NBD_INFO_BLOCK_SIZE 3

/* Transmission flags. */
#define NBD_FLAG_HAS_FLAGS (1u << 0)
#define NBD_FLAG_READ_ONLY (1u << 1)
#define NBD_FLAG_SEND_FLUSH (1u << 2)
#define NBD_FLAG_SEND_FUA (1u << 3)
#define NBD_FLAG_ROTATIONAL (1u << 4)
#define NBD_FLAG_SEND_TRIM (1u << 5)
#define NBD_FLAG_SEND_WRITE_ZEROES (1u << 6)
#define NBD_FLAG_SEND_DF (1u << 7)
#define NBD_FLAG_CAN_MULTI_CONN (1u << 8)
#define NBD_FLAG_SEND_RESIZE (1u << 9)
#define NBD_FLAG_SEND_CACHE (1u << 10)
#define NBD_FLAG_SEND_FAST_ZERO (1u << 11)

/* Transmission. */
#define NBD_REQUEST_MAGIC 0x25609513u
#define NBD_EXTENDED_REQUEST_MAGIC 0x21e41c71u
#define NBD_SIMPLE_REPLY_MAGIC 0x67446698u
#define NBD_STRUCTURED_REPLY_MAGIC 0x668e33efu
#define NBD_EXTENDED_REPLY_MAGIC 0x6e8a278cu

#define NBD_CMD_READ 0
#define NBD_CMD_WRITE 1
#define NBD_CMD_DISC 2
#define NBD_CMD_FLUSH 3
#define NBD_CMD_TRIM 4
#define NBD_CMD_CACHE 5
#define NBD_CMD_WRITE_ZEROES 6
#define NBD_CMD_BLOCK_STATUS 7

#define NBD_CMD_FLAG_FUA (1u << 0)
#define NBD_CMD_FLAG_NO_HOLE (1u << 1)
#define NBD_CMD_FLAG_DF (1u << 2)
#define NBD_CMD_FLAG_REQ_ONE (1u << 3)
#define NBD_CMD_FLAG_FAST_ZERO (1u << 4)
#define NBD_CMD_FLAG_PAYLOAD_LEN (1u << 5)

#define NBD_REPLY_FLAG_DONE (1u << 0)

#define NBD_REPLY_TYPE_NONE 0
#define NBD_REPLY_TYPE_OFFSET_DATA 1
#define NBD_REPLY_TYPE_OFFSET_HOLE 2
#define NBD_REPLY_TYPE_BLOCK_STATUS 5
#define NBD_REPLY_TYPE_ERROR ((1u << 15) + 1)
#define NBD_REPLY_TYPE_ERROR_OFFSET ((1u << 15) + 2)

/* Error values: the protocol's own numbers, not the host's errno. */
#define NBD_EPERM 1
#define NBD_EIO 5
#define NBD_ENOMEM 12
#define NBD_EINVAL 22
#define NBD_ENOSPC 28
#define NBD_EOVERFLOW 75
#define NBD_ENOTSUP 95
#define NBD_ESHUTDOWN 108

/* Server greeting: NBDMAGIC, IHAVEOPT, handshake flags. */
struct nbd_greeting {
	uint64_t magic;
	uint64_t ihaveopt;
	uint16_t flags;
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_greeting) == 18, "greeting");

/* Client option header; the data follows. */
struct nbd_opt_hdr {
	uint64_t magic;
	uint32_t option;
	uint32_t length;
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_opt_hdr) == 16, "option header");

struct nbd_opt_reply {
	uint64_t magic;
	uint32_t option;
	uint32_t type;
	uint32_t length;
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_opt_reply) == 20, "option reply");

/* The reply to NBD_OPT_EXPORT_NAME (+124 zero bytes without NO_ZEROES). */
struct nbd_export_name_reply {
	uint64_t size;
	uint16_t flags;
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_export_name_reply) == 10, "export name reply");

struct nbd_info_export {
	uint16_t type;
	uint64_t size;
	uint16_t flags;
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_info_export) == 12, "info export");

struct nbd_info_block_size {
	uint16_t type;
	uint32_t min, pref, max;
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_info_block_size) == 14, "info block size");

struct nbd_request {
	uint32_t magic;
	uint16_t flags;
	uint16_t type;
	uint64_t cookie;
	uint64_t offset;
	uint32_t length;
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_request) == 28, "request");

struct nbd_request_ext {
	uint32_t magic;
	uint16_t flags;
	uint16_t type;
	uint64_t cookie;
	uint64_t offset;
	uint64_t length;
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_request_ext) == 32, "extended request");

struct nbd_simple_reply {
	uint32_t magic;
	uint32_t error;
	uint64_t cookie;
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_simple_reply) == 16, "simple reply");

struct nbd_structured_reply {
	uint32_t magic;
	uint16_t flags;
	uint16_t type;
	uint64_t cookie;
	uint32_t length;
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_structured_reply) == 20, "structured reply");

struct nbd_extended_reply {
	uint32_t magic;
	uint16_t flags;
	uint16_t type;
	uint64_t cookie;
	uint64_t offset;
	uint64_t length;
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_extended_reply) == 32, "extended reply");

/* Payload heads of the reply chunks we send. */
struct nbd_chunk_offset_data {
	uint64_t offset;
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_chunk_offset_data) == 8, "offset data");

struct nbd_chunk_error {
	uint32_t error;
	uint16_t msg_len;
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_chunk_error) == 6, "error chunk");

#endif
