/* The TCPStore frame parser (see frame.h). Each query is a little program of fields:
 *   S a key (u64 length + bytes), B a value (the same, bounded by max_value), I an i64,
 *   U a u32, N a count (u64): the rest of the program is repeated that many times.
 */
#include <string.h>

#include "alloc.h"
#include "frame.h"

/* The rows of C10D_QUERY_MAP (frame.h); the handler column is ops.c's. */
static const struct c10d_query queries[C10D_OP_COUNT] = {
#define XX(op, name, legacy, v2, fields, handler, flags, torch)                                    \
  {name, legacy, v2, fields, flags, torch},
    C10D_QUERY_MAP(XX)
#undef XX
};

static const char *const reason_names[C10D_R_COUNT] = {
    "eof",           "read_error",      "unknown_query",    "bad_magic",
    "key_too_long",  "value_too_large", "too_many_keys",    "frame_too_large",
    "frame_timeout", "memory",          "output_overflow",  "write_timeout",
    "not_integer",   "missing_key",     "wait_bound",       "store_full",
    "store_error",   "address_limit",   "connection_limit", "shutdown",
    "budget",        "not_allowed",
};

const struct c10d_query *c10d_query(enum c10d_op op)
{
  return (unsigned)op < C10D_OP_COUNT ? &queries[op] : NULL;
}

const char *c10d_op_name(enum c10d_op op)
{
  return (unsigned)op < C10D_OP_COUNT ? queries[op].name : "?";
}

const char *c10d_reason_name(enum c10d_reason r)
{
  return (unsigned)r < C10D_R_COUNT ? reason_names[r] : "?";
}

int c10d_op_id(enum c10d_proto proto, enum c10d_op op)
{
  if ((unsigned)op >= C10D_OP_COUNT)
    return -1;
  return proto == C10D_PROTO_V2 ? queries[op].v2_id : queries[op].legacy_id;
}

/* Returns: the op with wire id `id` in `proto`, or -1 (a scan of the rows: twenty compares). */
static int op_of(enum c10d_proto proto, uint8_t id)
{
  for (int op = 0; op < C10D_OP_COUNT; op++)
    if ((proto == C10D_PROTO_V2 ? queries[op].v2_id : queries[op].legacy_id) == (int)id)
      return op;
  return -1;
}

void c10d_limits_init(struct c10d_limits *lim, uint64_t max_value)
{
  lim->max_key = C10D_MAX_KEY_BYTES;
  lim->max_value = max_value;
  lim->max_keys = C10D_MAX_QUERY_KEYS;
  lim->max_frame = max_value + ((uint64_t)1 << 20);
}

static uint64_t get_u64(const uint8_t *p)
{
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = (v << 8) | p[i];
  return v;
}

enum c10d_proto c10d_proto_detect(const uint8_t *p, size_t n)
{
  if (n == 0)
    return C10D_PROTO_UNKNOWN;
  if (p[0] != 0)
    return C10D_PROTO_LEGACY;
  if (n < 5)
    return C10D_PROTO_UNKNOWN;
  uint32_t m = (uint32_t)p[1] | (uint32_t)p[2] << 8 | (uint32_t)p[3] << 16 | (uint32_t)p[4] << 24;
  /* a legacy SET (0) starts with its key's length: never this large */
  return m == C10D_MAGIC ? C10D_PROTO_V2 : C10D_PROTO_LEGACY;
}

void c10d_frame_reset(struct c10d_frame *f)
{
  struct c10d_span *spans = f->spans;
  size_t cap = f->spans_cap;
  if (cap > C10D_SPANS_KEPT) { /* a query of many keys: its array is not kept for the next */
    mu_free(spans);
    spans = NULL;
    cap = 0;
  }
  memset(f, 0, sizeof(*f));
  f->spans = spans;
  f->spans_cap = cap;
}

void c10d_frame_release(struct c10d_frame *f)
{
  mu_free(f->spans);
  memset(f, 0, sizeof(*f));
}

static void add_span(struct c10d_frame *f, size_t off, size_t len)
{
  if (f->nspans == f->spans_cap) {
    f->spans_cap = f->spans_cap ? f->spans_cap * 2 : 8;
    f->spans = mu_realloc(f->spans, f->spans_cap * sizeof(*f->spans));
  }
  f->spans[f->nspans].off = off;
  f->spans[f->nspans].len = len;
  f->nspans++;
}

/* Starts the frame at p[0]. Returns: 1, or -(reason) for an id the numbering lacks. */
static int start(struct c10d_frame *f, enum c10d_proto proto, uint8_t id)
{
  int op = op_of(proto, id);
  if (op < 0)
    return -C10D_R_UNKNOWN_QUERY;
  f->id = id;
  f->op = (enum c10d_op)op;
  f->prog = queries[op].fields;
  f->off = 1;
  f->started = 1;
  return 1;
}

/* Reads one field at f->off. Returns: 1 read, 0 more bytes needed, -(reason). */
static int field(struct c10d_frame *f, char kind, const struct c10d_limits *lim, const uint8_t *p,
                 size_t n)
{
  size_t avail = n - f->off;
  const uint8_t *q = p + f->off;
  if (kind == 'U') {
    if (avail < 4)
      return 0;
    f->u32 = (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24;
    f->off += 4;
    return 1;
  }
  if (avail < 8)
    return 0;
  uint64_t v = get_u64(q);
  if (kind == 'I') {
    f->amount = (int64_t)v;
    f->off += 8;
    return 1;
  }
  if (kind == 'N') {
    if (v > lim->max_keys)
      return -C10D_R_TOO_MANY_KEYS;
    f->count = f->rep = v;
    f->off += 8;
    return 1;
  }
  if (kind == 'S' && v > lim->max_key)
    return -C10D_R_KEY_TOO_LONG;
  if (kind == 'B' && v > lim->max_value)
    return -C10D_R_VALUE_TOO_LARGE;
  if (v > lim->max_frame || f->off + 8 + v > lim->max_frame)
    return -C10D_R_FRAME_TOO_LARGE;
  if (avail - 8 < v)
    return 0;
  add_span(f, f->off + 8, (size_t)v);
  f->off += 8 + (size_t)v;
  return 1;
}

int c10d_frame_parse(struct c10d_frame *f, enum c10d_proto proto, const struct c10d_limits *lim,
                     const uint8_t *p, size_t n)
{
  if (!f->started) {
    if (n == 0)
      return 0;
    int rc = start(f, proto, p[0]);
    if (rc < 0)
      return rc;
  }
  for (;;) {
    char kind = f->prog[f->pc];
    if (kind == '\0') {
      /* the end of the program: the counted group again, or the end of the frame */
      if (f->group == 0 || f->rep == 0 || --f->rep == 0)
        break;
      f->pc = f->group;
      continue;
    }
    int rc = field(f, kind, lim, p, n);
    if (rc <= 0)
      return rc;
    f->pc++;
    if (kind == 'N') {
      f->group = f->pc;
      if (f->count == 0)
        break;
    }
  }
  f->len = f->off;
  return 1;
}
