/* The queries over the store: what each TCPStore query does and answers, as PyTorch's own
 * servers do (docs/c10d.md): torch 1.13's for a legacy connection, the libuv backend's (the
 * default since 2.4) for one that sent VALIDATE. A write is one v2 store write (logged, synced
 * with the group commit, snapshotted); its answer waits for the barrier like any reply.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "c10d_int.h"
#include "log.h"

/* ---------------------------------------------------------------------------------------------
 * Keys in the store
 */

static int safe_byte(uint8_t ch)
{
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
         ch == '.' || ch == '_' || ch == '-' || ch == '~';
}

const char *c10d_key_path(struct mu_buf *b, const char *dir, const void *k, size_t n)
{
  static const char hex[] = "0123456789ABCDEF";
  const uint8_t *p = k;
  mu_buf_clear(b);
  mu_buf_puts(b, dir);
  mu_buf_putc(b, '/');
  if (n == 0) {
    mu_buf_putc(b, '%'); /* the empty key: a lone '%' is never an escape */
    return mu_buf_str(b);
  }
  int dots = 1; /* "." and ".." are path syntax: escaped whole */
  for (size_t i = 0; i < n && dots; i++)
    dots = p[i] == '.';
  mu_buf_reserve(b, n);
  for (size_t i = 0; i < n; i++) {
    if (safe_byte(p[i]) && !dots) {
      mu_buf_putc(b, (char)p[i]);
    } else {
      char e[3] = {'%', hex[p[i] >> 4], hex[p[i] & 15]};
      mu_buf_append(b, e, sizeof(e));
    }
  }
  return mu_buf_str(b);
}

static int unhex(char ch)
{
  if (ch >= '0' && ch <= '9')
    return ch - '0';
  if (ch >= 'A' && ch <= 'F')
    return ch - 'A' + 10;
  return -1;
}

int c10d_key_decode(const char *name, size_t n, struct mu_buf *out)
{
  mu_buf_clear(out);
  if (n == 1 && name[0] == '%')
    return 0;
  for (size_t i = 0; i < n; i++) {
    if (name[i] != '%') {
      if (!safe_byte((uint8_t)name[i]))
        return -1;
      mu_buf_putc(out, name[i]);
      continue;
    }
    if (i + 2 >= n)
      return -1;
    int hi = unhex(name[i + 1]), lo = unhex(name[i + 2]);
    if (hi < 0 || lo < 0)
      return -1;
    mu_buf_putc(out, (char)(hi << 4 | lo));
    i += 2;
  }
  return 0;
}

struct v2_node *c10d_lookup_key(struct c10d *m, const char *path)
{
  struct v2_node *n = v2_store_lookup(m->store, path);
  return n != NULL && !n->is_dir ? n : NULL;
}

/* Returns: the children of dir `path`, or 0 when it is not a dir. */
static size_t dir_size(struct c10d *m, const char *path, struct v2_node **out)
{
  struct v2_node *n = v2_store_lookup(m->store, path);
  *out = n != NULL && n->is_dir ? n : NULL;
  return *out != NULL ? (*out)->nchildren : 0;
}

size_t c10d_queue_len(struct c10d *m, const char *qpath)
{
  struct v2_node *d = NULL;
  return dir_size(m, qpath, &d);
}

/* Returns: keys and queued items held now (what --c10d-max-keys bounds). */
static uint64_t keys_used(struct c10d *m)
{
  struct v2_node *d = v2_store_lookup(m->store, C10D_DIR);
  struct v2_node *q = v2_store_lookup(m->store, C10D_QUEUE_DIR);
  return (d != NULL && d->is_dir ? d->size - 1 : 0) + (q != NULL && q->is_dir ? q->size - 1 : 0);
}

/* Returns: what the keys, values and queued items hold now (what --c10d-max-store-bytes
 * bounds): the store keeps each subtree's bytes, so this is O(1). */
static uint64_t bytes_used(struct c10d *m)
{
  struct v2_node *d = v2_store_lookup(m->store, C10D_DIR);
  struct v2_node *q = v2_store_lookup(m->store, C10D_QUEUE_DIR);
  return (d != NULL ? d->bytes : 0) + (q != NULL ? q->bytes : 0);
}

/* Whether writing a value of `vn` bytes at a key path of `klen` bytes (replacing node `old`, or
 * a new node when NULL) would take what the store holds past --c10d-max-store-bytes: then
 * `c` is closed (store_full) with a log line naming the bound. A write that adds no bytes
 * passes, so the store still serves at its bound. Returns: 1 closed, 0 it fits. */
static int store_bytes_full(struct c10d_conn *c, const struct v2_node *old, size_t klen, size_t vn)
{
  struct c10d *m = c->m;
  uint64_t add = mu_alloc_size(vn + 1), sub = 0;
  if (old != NULL)
    sub = mu_alloc_size((size_t)old->value_len + 1);
  else
    add += mu_alloc_size(sizeof(struct v2_node)) + mu_alloc_size(klen + 1);
  if (add <= sub) /* a rewrite as large or smaller (ADD's counters): no lookup */
    return 0;
  uint64_t used = bytes_used(m);
  if (used + (add - sub) <= m->cfg.max_store_bytes)
    return 0;
  mu_log(MU_LOG_WARN,
         "c10d: a %s of %s (%zu value bytes) would take the store past --c10d-max-store-bytes "
         "(%llu, %llu held): closing it",
         c10d_op_name(c->frame.op), c->peer[0] ? c->peer : "?", vn,
         (unsigned long long)m->cfg.max_store_bytes, (unsigned long long)used);
  c10d_conn_close(c, C10D_R_STORE_FULL);
  return 1;
}

/* ---------------------------------------------------------------------------------------------
 * Writes
 */

/* Refuses a write that the store cannot take (the store errs only when a v2 client made the
 * c10d dir a file). Returns: -1 after closing `c`. */
static int refused(struct c10d_conn *c, const char *path, struct v2_err *err)
{
  mu_log(MU_LOG_WARN, "c10d: the store refused a write of '%s': etcd error %d (%s)", path,
         err->code, err->cause ? err->cause : "");
  v2_err_release(err);
  c10d_conn_close(c, C10D_R_STORE_ERROR);
  return -1;
}

static const uint8_t *frame_at(const struct c10d_conn *c, size_t i);
static size_t frame_len(const struct c10d_conn *c, size_t i);

/* Sets key path `path` (of the frame's key span ki) to v[0..vn).
 * Returns: 0, or -1 when `c` was closed (a bound). */
static int put(struct c10d_conn *c, size_t ki, const char *path, const void *v, size_t vn)
{
  struct c10d *m = c->m;
  struct v2_node *old = c10d_lookup_key(m, path);
  if (old == NULL && keys_used(m) >= m->cfg.max_keys) {
    c10d_conn_close(c, C10D_R_STORE_FULL);
    return -1;
  }
  if (store_bytes_full(c, old, strlen(path), vn))
    return -1;
  if (m->watch_keys > 0)
    c10d_watch_stash(m, path);
  struct v2_write w;
  struct v2_err err = {0, NULL, 0};
  memset(&w, 0, sizeof(w));
  w.key = path;
  w.value = v;
  w.value_len = vn;
  if (v2_store_set(m->store, &w, &err) == NULL)
    return refused(c, path, &err);
  c10d_gc_touch(m, frame_at(c, ki), frame_len(c, ki));
  return 0;
}

/* Deletes key path `path`. Returns: 1 deleted, 0 there was none. */
static int del(struct c10d *m, const char *path)
{
  if (c10d_lookup_key(m, path) == NULL)
    return 0;
  if (m->watch_keys > 0)
    c10d_watch_stash(m, path);
  struct v2_err err = {0, NULL, 0};
  const struct v2_event *e = v2_store_delete(m->store, path, 0, 0, &err);
  v2_err_release(&err);
  return e != NULL;
}

/* ---------------------------------------------------------------------------------------------
 * The queries
 */

/* Span i of the frame: its bytes and length. Checked before use: a span the frame does not have
 * (the parser gives each query the spans of its program, so none should be asked for) reads as
 * empty, never past the array. */
static const uint8_t *frame_at(const struct c10d_conn *c, size_t i)
{
  if (i >= c->frame.nspans)
    return (const uint8_t *)"";
  return (const uint8_t *)c->in.data + c->pos + c->frame.spans[i].off;
}

static size_t frame_len(const struct c10d_conn *c, size_t i)
{
  return i < c->frame.nspans ? c->frame.spans[i].len : 0;
}

/* The store path of the frame's span i (m->path). */
static const char *span_path(struct c10d_conn *c, size_t i)
{
  return c10d_key_path(&c->m->path, C10D_DIR, frame_at(c, i), frame_len(c, i));
}

static int q_set(struct c10d_conn *c)
{
  return put(c, 0, span_path(c, 0), frame_at(c, 1), frame_len(c, 1));
}

static int q_compare_set(struct c10d_conn *c)
{
  const char *path = span_path(c, 0);
  struct v2_node *n = c10d_lookup_key(c->m, path);
  const uint8_t *want = frame_at(c, 1), *nv = frame_at(c, 2);
  size_t wn = frame_len(c, 1), nn = frame_len(c, 2);
  if (n == NULL && wn != 0) /* torch answers the expected value (its code says: a lie) */
    return c10d_out_bytes(c, want, wn);
  if (n != NULL && (n->value_len != wn || memcmp(n->value, want, wn) != 0))
    return c10d_out_bytes(c, n->value, n->value_len);
  if (put(c, 0, path, nv, nn) != 0)
    return -1;
  return c10d_out_bytes(c, nv, nn);
}

static int q_get(struct c10d_conn *c)
{
  static const char reserved[] = C10D_KEY_HTTP_URL;
  if (frame_len(c, 0) == sizeof(reserved) - 1 &&
      memcmp(frame_at(c, 0), reserved, sizeof(reserved) - 1) == 0) {
    const char *url = rv_server_url(c->m->srv);
    return c10d_out_bytes(c, url, strlen(url));
  }
  struct v2_node *n = c10d_lookup_key(c->m, span_path(c, 0));
  if (n != NULL)
    return c10d_out_bytes(c, n->value, n->value_len);
  if (c->proto == C10D_PROTO_LEGACY) { /* torch 1.13's server: std::out_of_range, closed */
    c10d_conn_close(c, C10D_R_MISSING_KEY);
    return -1;
  }
  return c10d_out_bytes(c, NULL, 0);
}

/* std::stoll: blanks, a sign, digits (at least one), anything after. Returns: 0 or -1. */
int c10d_parse_ll(const char *s, size_t n, int64_t *out)
{
  size_t i = 0;
  while (i < n && isspace((unsigned char)s[i]))
    i++;
  int neg = i < n && s[i] == '-';
  if (i < n && (s[i] == '-' || s[i] == '+'))
    i++;
  uint64_t v = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
  size_t digits = 0;
  for (; i < n && s[i] >= '0' && s[i] <= '9'; i++, digits++) {
    uint64_t d = (uint64_t)(s[i] - '0');
    if (v > (lim - d) / 10)
      return -1;
    v = v * 10 + d;
  }
  if (digits == 0)
    return -1;
  *out = neg ? (int64_t)(0 - v) : (int64_t)v;
  return 0;
}

/* Adds `amount` to the counter at key span 0, as ADD does. Returns: 0 with the new value in
 * `*sum`, or -1 when `c` was closed. */
static int add_by(struct c10d_conn *c, int64_t amount, int64_t *sum)
{
  const char *path = span_path(c, 0);
  struct v2_node *n = c10d_lookup_key(c->m, path);
  uint64_t v = (uint64_t)amount;
  if (n != NULL) {
    int64_t old = 0;
    if (c10d_parse_ll(n->value, n->value_len, &old) != 0) {
      c10d_conn_close(c, C10D_R_NOT_INTEGER);
      return -1;
    }
    v += (uint64_t)old; /* wraps as torch's int64 does on x86 */
  }
  char num[24];
  int len = snprintf(num, sizeof(num), "%lld", (long long)(int64_t)v);
  if (put(c, 0, path, num, (size_t)len) != 0)
    return -1;
  *sum = (int64_t)v;
  return 0;
}

static int q_add(struct c10d_conn *c)
{
  int64_t sum = 0;
  if (add_by(c, c->frame.amount, &sum) != 0)
    return -1;
  return c10d_out_u64(c, (uint64_t)sum);
}

/* BARRIER (torch 2.14's store.barrier): counts one more arrival at the key (its value, a
 * decimal counter as ADD keeps it) and answers STOP_WAITING once it reaches the world size sent:
 * at once for the last arrival, and to every earlier one when that arrival writes the count. */
static int q_barrier(struct c10d_conn *c)
{
  int64_t count = 0, world = c->frame.amount;
  if (add_by(c, 1, &count) != 0)
    return -1;
  if (count >= world)
    return c10d_out_u8(c, 0); /* STOP_WAITING */
  return c10d_barrier_wait(c, span_path(c, 0), world);
}

/* Returns: 1 when key span i exists (or, after VALIDATE, a queue of that name holds items). */
static int key_ready(struct c10d_conn *c, size_t i)
{
  if (c10d_lookup_key(c->m, span_path(c, i)) != NULL)
    return 1;
  if (c->proto != C10D_PROTO_V2)
    return 0;
  return c10d_queue_len(
             c->m, c10d_key_path(&c->m->path, C10D_QUEUE_DIR, frame_at(c, i), frame_len(c, i))) > 0;
}

static int q_check(struct c10d_conn *c)
{
  int ready = 1;
  for (size_t i = 0; i < c->frame.nspans && ready; i++)
    ready = key_ready(c, i);
  return c10d_out_u8(c, ready ? 0 : 1); /* READY, NOT_READY */
}

static int q_num_keys(struct c10d_conn *c)
{
  struct v2_node *d = NULL;
  return c10d_out_u64(c, dir_size(c->m, C10D_DIR, &d));
}

static int q_delete(struct c10d_conn *c)
{
  int gone = del(c->m, span_path(c, 0));
  if (gone)
    c10d_gc_touch(c->m, frame_at(c, 0), frame_len(c, 0));
  return c10d_out_u64(c, (uint64_t)gone);
}

static int q_append(struct c10d_conn *c)
{
  const char *path = span_path(c, 0);
  struct v2_node *n = c10d_lookup_key(c->m, path);
  if (n == NULL)
    return put(c, 0, path, frame_at(c, 1), frame_len(c, 1));
  struct mu_buf *v = &c->m->path2;
  mu_buf_clear(v);
  if ((uint64_t)n->value_len + frame_len(c, 1) > c->m->cfg.max_value_bytes ||
      mu_buf_append(v, n->value, n->value_len) != 0 ||
      mu_buf_append(v, frame_at(c, 1), frame_len(c, 1)) != 0) {
    c10d_conn_close(c, C10D_R_VALUE_TOO_LARGE);
    return -1;
  }
  int rc = put(c, 0, path, v->data, v->len);
  mu_buf_release(v);
  return rc;
}

static int q_multi_get(struct c10d_conn *c)
{
  for (size_t i = 0; i < c->frame.nspans; i++) {
    struct v2_node *n = c10d_lookup_key(c->m, span_path(c, i));
    if (n == NULL && c->proto == C10D_PROTO_LEGACY) {
      c10d_conn_close(c, C10D_R_MISSING_KEY);
      return -1;
    }
    if (c10d_out_bytes(c, n ? n->value : NULL, n ? n->value_len : 0) != 0)
      return -1;
  }
  return 0;
}

static int q_multi_set(struct c10d_conn *c)
{
  for (size_t i = 0; i + 1 < c->frame.nspans; i += 2)
    if (put(c, i, span_path(c, i), frame_at(c, i + 1), frame_len(c, i + 1)) != 0)
      return -1;
  return 0;
}

/* The store path of the queue named by span 0 (m->path). */
static const char *queue_path(struct c10d_conn *c)
{
  return c10d_key_path(&c->m->path, C10D_QUEUE_DIR, frame_at(c, 0), frame_len(c, 0));
}

static int q_queue_push(struct c10d_conn *c)
{
  struct c10d *m = c->m;
  if (keys_used(m) >= m->cfg.max_keys) {
    c10d_conn_close(c, C10D_R_STORE_FULL);
    return -1;
  }
  const char *qpath = queue_path(c);
  if (store_bytes_full(c, NULL, strlen(qpath) + 21, frame_len(c, 1)))
    return -1; /* a new item: <qpath>/<index, 20 digits> */
  struct v2_write w;
  struct v2_err err = {0, NULL, 0};
  memset(&w, 0, sizeof(w));
  w.key = qpath;
  w.value = (const char *)frame_at(c, 1);
  w.value_len = frame_len(c, 1);
  const struct v2_event *e = v2_store_create(m->store, &w, 1, &err);
  if (e == NULL) /* in order: <dir>/<index, 20 digits> */
    return refused(c, qpath, &err);
  c10d_queue_pushed(m, qpath, e->key);
  return 0;
}

static int q_queue_pop(struct c10d_conn *c)
{
  struct v2_node *d = NULL;
  const char *qpath = queue_path(c);
  size_t len = dir_size(c->m, qpath, &d);
  if (c10d_out_u64(c, len) != 0)
    return -1;
  if (len == 0)
    return 0;
  struct v2_node *first = c10d_queue_oldest(c->m, qpath, d); /* the smallest index, O(1) */
  if (first == NULL)
    return c10d_out_bytes(c, NULL, 0);
  if (c10d_out_bytes(c, first->value, first->value_len) != 0)
    return -1;
  struct v2_err err = {0, NULL, 0};
  char *key = mu_strdup(first->hn.key);
  v2_store_delete(c->m->store, key, 0, 0, &err);
  v2_err_release(&err);
  mu_free(key);
  c10d_queue_forget(c->m, qpath);
  return 0;
}

static int q_list(struct c10d_conn *c)
{
  struct v2_node *d = NULL;
  dir_size(c->m, C10D_DIR, &d);
  struct mu_buf all = MU_BUF_INIT(MU_BUF_UNBOUNDED), *key = &c->m->path2;
  uint64_t n = 0;
  for (uint32_t i = 0; d != NULL && i < d->nchildren; i++) {
    const char *name = strrchr(d->children[i]->hn.key, '/') + 1;
    if (d->children[i]->is_dir || c10d_key_decode(name, strlen(name), key) != 0)
      continue; /* not a c10d key (a v2 client's) */
    uint8_t len[8];
    for (int b = 0; b < 8; b++)
      len[b] = (uint8_t)((uint64_t)key->len >> (8 * b));
    mu_buf_append(&all, len, sizeof(len));
    mu_buf_append(&all, key->data, key->len);
    n++;
  }
  int rc = c10d_out_u64(c, n);
  if (rc == 0 && all.len > 0)
    rc = c10d_out(c, all.data, all.len);
  mu_buf_release(&all);
  return rc;
}

/* ---------------------------------------------------------------------------------------------
 * Dispatch
 */

static int q_validate(struct c10d_conn *c)
{
  if ((c->flags & C10D_CONN_VALIDATED) || c->frame.u32 != C10D_MAGIC) {
    c10d_conn_close(c, C10D_R_BAD_MAGIC);
    return -1;
  }
  c->flags |= C10D_CONN_VALIDATED;
  return 0;
}

static int q_wait(struct c10d_conn *c)
{
  return c10d_wait_start(c);
}

static int q_watch_key(struct c10d_conn *c)
{
  return c10d_watch_add(c, frame_at(c, 0), frame_len(c, 0));
}

static int q_cancel_wait(struct c10d_conn *c)
{
  c10d_wait_cancel(c);
  return c10d_out_u8(c, 1); /* WAIT_CANCELED */
}

static int q_ping(struct c10d_conn *c)
{
  return c10d_out_u32(c, c->frame.u32);
}

static int q_queue_len(struct c10d_conn *c)
{
  return c10d_out_u64(c, c10d_queue_len(c->m, queue_path(c)));
}

/* The handler column of C10D_QUERY_MAP (frame.h). */
static int (*const handlers[C10D_OP_COUNT])(struct c10d_conn *c) = {
#define XX(op, name, legacy, v2, fields, handler, flags, torch) handler,
    C10D_QUERY_MAP(XX)
#undef XX
};

static int is_write(enum c10d_op op)
{
  return (c10d_query(op)->flags & C10D_QF_WRITE) != 0;
}

static int run(struct c10d_conn *c)
{
  if ((unsigned)c->frame.op < C10D_OP_COUNT)
    return handlers[c->frame.op](c);
  c10d_conn_close(c, C10D_R_UNKNOWN_QUERY);
  return -1;
}

int c10d_dispatch(struct c10d_conn *c)
{
  struct c10d *m = c->m;
  enum c10d_op op = c->frame.op;
  if (c->proto == C10D_PROTO_V2 && op != C10D_OP_VALIDATE && !(c->flags & C10D_CONN_VALIDATED)) {
    c10d_conn_close(c, C10D_R_BAD_MAGIC);
    return -1;
  }
  if (!is_write(op)) {
    m->queries[op]++;
    return run(c) == 0 ? 1 : -1;
  }
  /* a write waits while the store takes none: a GET in slices reads it, or a disk error */
  if (m->store->walks > 0 || rv_server_read_only(m->srv) != NULL) {
    c10d_park(c);
    return 0;
  }
  m->queries[op]++;
  /* the writer's answer is queued before the waiters it wakes are told */
  v2_watch_hub_hold(&m->store->hub);
  int rc = run(c);
  v2_watch_hub_unhold(&m->store->hub);
  c10d_watch_unstash(m);
  return rc == 0 ? 1 : -1;
}
