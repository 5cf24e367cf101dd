/* PyTorch's TCPStore wire protocol: the frames a client sends, parsed apart from any socket
 * (the libFuzzer target fuzz/fuzz_c10d_frame.c drives this file alone). docs/c10d.md is the
 * contract: query ids per torch version, framing, answers.
 *
 * A frame is a query id (one byte) and the query's fields, all in the client's byte order
 * (little-endian on every platform torch ships for): a key or a value is a u64 length and that
 * many bytes, a count is a u64, ADD's amount an i64, VALIDATE's magic and PING's nonce a u32.
 * Two numberings exist: torch up to 2.0 sends no handshake (legacy: SET is 0, WATCH_KEY 7);
 * torch 2.1 and later open with VALIDATE (0) and the magic 0x3C85F7CE, and number the rest
 * from SET = 1 (c10d_proto_detect() tells them apart on a connection's first bytes).
 *
 * The parser is resumable: it keeps its place in `struct c10d_frame`, so bytes that trickle in
 * are read once, whatever the frame's size. Every length is checked against the limits as soon
 * as it is read, before any byte it announces has arrived.
 */
#ifndef MUSTERD_C10D_FRAME_H
#define MUSTERD_C10D_FRAME_H

#include <stddef.h>
#include <stdint.h>

/* VALIDATE's magic number (torch/csrc/distributed/c10d/TCPStoreBackend.hpp). */
#define C10D_MAGIC 0x3C85F7CEu

/* torch's own bounds (TCPStoreLibUvBackend.cpp): a key's bytes, keys in one query. */
#define C10D_MAX_KEY_BYTES 8192
#define C10D_MAX_QUERY_KEYS (128 * 1024)

enum c10d_proto {
  C10D_PROTO_UNKNOWN = 0, /* nothing parsed yet */
  C10D_PROTO_LEGACY,      /* torch 1.13 / 2.0: no handshake */
  C10D_PROTO_V2,          /* torch >= 2.1: VALIDATE first */
};

/* The torch releases whose client sends a query (the tiers the tests run: Debian's 1.13, 2.6 and
 * 2.14; docs/c10d.md names the pull request of each). */
#define C10D_T1_13 0x1u
#define C10D_T2_6 0x2u
#define C10D_T2_14 0x4u
#define C10D_T2X (C10D_T2_6 | C10D_T2_14)

/* A query's flags. */
#define C10D_QF_WRITE 0x1u /* writes the store: waits while it takes no writes, wakes waiters */

/* Every TCPStore query, one row each: adding a query is one row here and one handler in ops.c.
 *   XX(OP, name, legacy id, v2 id, fields, handler, flags, torch)
 * OP names enum c10d_op (C10D_OP_<OP>) and /metrics' label `name`. The ids are the query's byte
 * in each numbering (-1: that numbering lacks it; legacy = torch 1.13/2.0, v2 = torch >= 2.1).
 * `fields` is the frame's program for the parser (frame.c): S a key, B a value, I an i64, U a
 * u32, N a count repeating the rest. `handler` is the function in ops.c that answers it;
 * `torch` the C10D_T* releases whose client sends it. The rows are in enum order. */
#define C10D_QUERY_MAP(XX)                                                                         \
  XX(VALIDATE, "validate", -1, 0, "U", q_validate, 0, C10D_T2X)                                    \
  XX(SET, "set", 0, 1, "SB", q_set, C10D_QF_WRITE, C10D_T1_13 | C10D_T2X)                          \
  XX(COMPARE_SET, "compare_set", 1, 2, "SBB", q_compare_set, C10D_QF_WRITE, C10D_T1_13 | C10D_T2X) \
  XX(GET, "get", 2, 3, "S", q_get, 0, C10D_T1_13 | C10D_T2X)                                       \
  XX(ADD, "add", 3, 4, "SI", q_add, C10D_QF_WRITE, C10D_T1_13 | C10D_T2X)                          \
  XX(CHECK, "check", 4, 5, "NS", q_check, 0, C10D_T1_13 | C10D_T2X)                                \
  XX(WAIT, "wait", 5, 6, "NS", q_wait, 0, C10D_T1_13 | C10D_T2X)                                   \
  XX(GETNUMKEYS, "num_keys", 6, 7, "", q_num_keys, 0, C10D_T1_13 | C10D_T2X)                       \
  XX(WATCH_KEY, "watch_key", 7, -1, "S", q_watch_key, 0, C10D_T1_13)                               \
  XX(DELETE_KEY, "delete_key", 8, 8, "S", q_delete, C10D_QF_WRITE, C10D_T1_13 | C10D_T2X)          \
  XX(APPEND, "append", 9, 9, "SB", q_append, C10D_QF_WRITE, C10D_T2X)                              \
  XX(MULTI_GET, "multi_get", 10, 10, "NS", q_multi_get, 0, C10D_T2X)                               \
  XX(MULTI_SET, "multi_set", 11, 11, "NSB", q_multi_set, C10D_QF_WRITE, C10D_T2X)                  \
  XX(CANCEL_WAIT, "cancel_wait", 12, 12, "", q_cancel_wait, 0, C10D_T2X)                           \
  XX(PING, "ping", -1, 13, "U", q_ping, 0, C10D_T2X)                                               \
  XX(QUEUE_PUSH, "queue_push", -1, 14, "SB", q_queue_push, C10D_QF_WRITE, C10D_T2_14)              \
  XX(QUEUE_POP, "queue_pop", -1, 15, "S", q_queue_pop, C10D_QF_WRITE, C10D_T2_14)                  \
  XX(QUEUE_LEN, "queue_len", -1, 16, "S", q_queue_len, 0, C10D_T2_14)                              \
  XX(LIST, "list", -1, 17, "", q_list, 0, C10D_T2_14)                                              \
  XX(BARRIER, "barrier", -1, 18, "SI", q_barrier, C10D_QF_WRITE, C10D_T2_14)

/* What a query asks, whatever its id on the wire. Also the index of /metrics' counters. */
enum c10d_op {
#define XX(op, name, legacy, v2, fields, handler, flags, torch) C10D_OP_##op,
  C10D_QUERY_MAP(XX)
#undef XX
      C10D_OP_COUNT
};

/* One row of C10D_QUERY_MAP, as data. */
struct c10d_query {
  const char *name;
  int8_t legacy_id, v2_id;
  const char *fields;
  unsigned flags, torch;
};

/* Returns: the row of `op`, or NULL for an op out of range. Ownership: static. */
const struct c10d_query *c10d_query(enum c10d_op op);

/* Why a connection is closed (a frame's fault, or the server's bounds): /metrics' labels. */
enum c10d_reason {
  C10D_R_EOF = 0,         /* the client closed its end */
  C10D_R_READ_ERROR,      /* a read or write failed (reset) */
  C10D_R_UNKNOWN_QUERY,   /* a query id this numbering does not have */
  C10D_R_BAD_MAGIC,       /* VALIDATE with another number, or VALIDATE after the first frame */
  C10D_R_KEY_TOO_LONG,    /* a key over C10D_MAX_KEY_BYTES */
  C10D_R_VALUE_TOO_LARGE, /* a value over --c10d-max-value-bytes */
  C10D_R_TOO_MANY_KEYS,   /* a count over C10D_MAX_QUERY_KEYS */
  C10D_R_FRAME_TOO_LARGE, /* a frame over the value bound + 1 MiB */
  C10D_R_FRAME_TIMEOUT,   /* a frame not finished within --body-timeout-ms */
  C10D_R_MEMORY,          /* the bytes held for unfinished frames are at their bound */
  C10D_R_OUTPUT,          /* unsent answers over --max-output-bytes (client not reading) */
  C10D_R_WRITE_TIMEOUT,   /* a write made no progress for --write-timeout-ms */
  C10D_R_NOT_INTEGER,     /* ADD on a value that is not a decimal integer */
  C10D_R_MISSING_KEY,     /* a legacy GET or MULTI_GET of a key that does not exist */
  C10D_R_WAIT_BOUND,      /* waited keys at their bound (per address or in all) */
  C10D_R_STORE_FULL,      /* c10d keys at --c10d-max-keys */
  C10D_R_STORE_ERROR,     /* the store refused a write (a v2 client made /_c10d a file) */
  C10D_R_ADDRESS_LIMIT,   /* the client address's connections at their bound */
  C10D_R_CONN_LIMIT,      /* c10d connections at --max-connections */
  C10D_R_SHUTDOWN,        /* musterd is stopping */
  C10D_R_BUDGET,          /* buffers over --max-buffer-bytes(-per-client), HTTP's with them */
  C10D_R_NOT_ALLOWED,     /* a peer outside --c10d-allow */
  C10D_R_COUNT
};

/* Returns: the /metrics label of `op` / `r` ("set", "unknown_query"). Ownership: static. */
const char *c10d_op_name(enum c10d_op op);
const char *c10d_reason_name(enum c10d_reason r);

/* The bounds a frame is checked against as it is read. */
struct c10d_limits {
  uint64_t max_key;   /* bytes of one key */
  uint64_t max_value; /* bytes of one value */
  uint64_t max_keys;  /* a count (CHECK, WAIT, MULTI_GET, MULTI_SET) */
  uint64_t max_frame; /* bytes of the whole frame */
};

/* Fills `lim` with torch's bounds and `max_value` (the frame: max_value + 1 MiB). */
void c10d_limits_init(struct c10d_limits *lim, uint64_t max_value);

/* A key or a value: `len` bytes at `off` from the frame's first byte. */
struct c10d_span {
  size_t off;
  size_t len;
};

/* One frame, and the parser's place in it. Zero it (or c10d_frame_reset()) before the first
 * byte of each frame; release its memory with c10d_frame_release(). */
/* The spans a frame keeps between queries (a bigger array, 16 bytes a key, is freed after its
 * query: a connection does not keep 2 MiB for one WAIT of 131,072 keys). */
#define C10D_SPANS_KEPT 1024

struct c10d_frame {
  enum c10d_op op;
  uint8_t id;              /* the query id as sent */
  uint64_t count;          /* CHECK, WAIT, MULTI_GET, MULTI_SET: the number of keys */
  int64_t amount;          /* ADD */
  uint32_t u32;            /* VALIDATE's magic, PING's nonce */
  struct c10d_span *spans; /* keys and values in the order sent (MULTI_SET: key, value, ...) */
  size_t nspans;
  size_t len; /* bytes of the whole frame, once complete */
  /* the parser's place */
  size_t spans_cap;
  size_t off;       /* bytes read so far */
  const char *prog; /* the query's fields (frame.c) */
  unsigned pc;      /* next field */
  unsigned group;   /* where a counted group starts */
  uint64_t rep;     /* repetitions of the group left */
  int started;
};

/* Returns: C10D_PROTO_LEGACY or C10D_PROTO_V2 from a connection's first `n` bytes, or
 * C10D_PROTO_UNKNOWN when more are needed to tell (a first byte 0 with fewer than 5). */
enum c10d_proto c10d_proto_detect(const uint8_t *p, size_t n);

/* Reads the frame at the start of p[0..n), going on from where `f` stopped.
 * Returns: 1 when the frame is complete (f->len bytes; its fields set), 0 when more bytes are
 * needed, or -(enum c10d_reason) when the frame breaks the protocol or a bound.
 * Ownership: `p` is borrowed for the call; the spans are offsets, valid for the same bytes. */
int c10d_frame_parse(struct c10d_frame *f, enum c10d_proto proto, const struct c10d_limits *lim,
                     const uint8_t *p, size_t n);

/* Forgets the frame (keeps the span array for the next one). */
void c10d_frame_reset(struct c10d_frame *f);

/* Frees the span array. Accepts a zeroed frame. */
void c10d_frame_release(struct c10d_frame *f);

/* Returns: the wire id of `op` in `proto`, or -1 when that numbering lacks it (test clients). */
int c10d_op_id(enum c10d_proto proto, enum c10d_op op);

#endif
