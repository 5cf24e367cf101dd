/* The etcd v2 keys API on top of store.c: parameter parsing exactly as etcd's
 * parseKeyRequest (v2http/client.go), the PUT/DELETE dispatch of applierV2store, watches,
 * /v2/stats/store, and the v2 API's hooks for the gate (refusals in etcd's shape, usage).
 */
#include <stdio.h>
#include <string.h>

#include "muster/errno.h"

#include "alloc.h"
#include "decimal.h"
#include "list.h"
#include "log.h"
#include "path.h"
#include "store.h"
#include "v2.h"
#include "v2_error.h"

struct v2 {
  struct rv_server *srv;
  struct v2_store *store;
  uint64_t watches_open;
  /* Answers in slices (a GET of a big tree): see "Big answers" below. */
  uv_idle_t *idle;       /* runs the next slice (the loop polls without waiting meanwhile) */
  uv_timer_t *tick;      /* sends more of the answers every 1 ms while clients read them */
  struct mu_list reads;  /* of struct big_read, in arrival order */
  struct mu_list parked; /* of struct parked: writes waiting for the walks to end */
  int draining;          /* the parked requests are being run again */
};

struct v2_watch {
  struct v2 *v2;
  struct rv_req *req;
  struct v2_watcher *w;
  int stream;
};

static struct v2 *v2_of(const struct rv_req *req)
{
  return rv_server_module_data(req->srv, "v2");
}

struct v2_store *v2_store_of(struct rv_server *srv)
{
  struct v2 *v2 = rv_server_module_data(srv, "v2");
  return v2 != NULL ? v2->store : NULL;
}

/* A write's answer (a durability layer holds it through the server's barrier). */
static void write_reply(struct rv_req *req, int status, const char *extra_headers, const char *body,
                        size_t len)
{
  rv_reply(req, status, "application/json", extra_headers, body, len);
}

/* Levels in `key` (a clean absolute key): "/a/b" is 2, "/" is 0. */
static size_t key_depth(const char *key)
{
  size_t d = 0;
  for (const char *p = key; *p != '\0'; p++)
    d += *p == '/' && p[1] != '\0';
  return d;
}

/* Go's strconv.ParseBool. Returns: 0/1, or -1 when not a boolean. */
static int parse_bool(const char *s)
{
  static const char *t[] = {"1", "t", "T", "TRUE", "true", "True"};
  static const char *f[] = {"0", "f", "F", "FALSE", "false", "False"};
  for (int i = 0; i < 6; i++) {
    if (strcmp(s, t[i]) == 0)
      return 1;
    if (strcmp(s, f[i]) == 0)
      return 0;
  }
  return -1;
}

/* Go's strconv.ParseUint(s, 10, 64). Returns: 0, or -1. */
static int parse_u64(const char *s, uint64_t *out)
{
  uint64_t v = 0;
  if (*s == '\0')
    return -1;
  for (; *s; s++) {
    if (*s < '0' || *s > '9')
      return -1;
    uint64_t d = (uint64_t)(*s - '0');
    if (v > (UINT64_MAX - d) / 10)
      return -1;
    v = v * 10 + d;
  }
  *out = v;
  return 0;
}

struct keys_req {
  char *key;
  const char *value;
  size_t value_len;
  int dir, recursive, sorted, wait, quorum, stream, no_value;
  int prev_exist; /* -1 unset */
  int refresh;
  const char *prev_value;
  uint64_t prev_index, wait_index;
  int has_ttl;
  uint64_t ttl;
};

static int bool_param(struct rv_req *req, const char *name, int *out, const char *cause)
{
  const char *v = rv_req_param(req, name);
  *out = 0;
  if (v == NULL)
    return 0;
  int b = parse_bool(v);
  if (b < 0) {
    v2_error_reply(req, V2_INVALID_FIELD, cause, 0);
    return -1;
  }
  *out = b;
  return 0;
}

/* The key of the path (cleaned, at most V2_MAX_DEPTH levels). Returns: 0, or -1 after answering
 * the error. */
static int key_or_reply(struct rv_req *req, struct keys_req *k)
{
  if (memchr(req->path, '\0', req->path_len) != NULL) {
    v2_error_reply(req, V2_INVALID_FORM, "invalid key: contains a NUL byte", 0);
    return -1;
  }
  size_t off = strlen("/v2/keys");
  k->key = v2_store_clean_key(req->path + off, req->path_len - off);
  if (key_depth(k->key) > V2_MAX_DEPTH) {
    /* each level is a dir holding its whole key: depth costs memory quadratically */
    char cause[128];
    snprintf(cause, sizeof(cause), "invalid key: %zu levels deep, over musterd's limit of %d",
             key_depth(k->key), V2_MAX_DEPTH);
    v2_error_reply(req, V2_INVALID_FIELD, cause, 0);
    return -1;
  }
  return 0;
}

/* The indexes, the boolean flags and prevValue. Returns: 0, or -1 after answering the error. */
static int flags_or_reply(struct rv_req *req, struct keys_req *k)
{
  const char *v = NULL;
  if ((v = rv_req_param(req, "prevIndex")) != NULL && parse_u64(v, &k->prev_index) != 0) {
    v2_error_reply(req, V2_INDEX_NAN, "invalid value for \"prevIndex\"", 0);
    return -1;
  }
  if ((v = rv_req_param(req, "waitIndex")) != NULL && parse_u64(v, &k->wait_index) != 0) {
    v2_error_reply(req, V2_INDEX_NAN, "invalid value for \"waitIndex\"", 0);
    return -1;
  }
  if (bool_param(req, "recursive", &k->recursive, "invalid value for \"recursive\"") ||
      bool_param(req, "sorted", &k->sorted, "invalid value for \"sorted\"") ||
      bool_param(req, "wait", &k->wait, "invalid value for \"wait\"") ||
      bool_param(req, "dir", &k->dir, "invalid value for \"dir\"") ||
      bool_param(req, "quorum", &k->quorum, "invalid value for \"quorum\"") ||
      bool_param(req, "stream", &k->stream, "invalid value for \"stream\""))
    return -1;
  if (k->wait && req->method != RV_GET) {
    v2_error_reply(req, V2_INVALID_FIELD, "\"wait\" can only be used with GET requests", 0);
    return -1;
  }
  k->prev_value = rv_req_param(req, "prevValue");
  if (k->prev_value != NULL && k->prev_value[0] == '\0') {
    v2_error_reply(req, V2_PREV_VALUE_REQUIRED, "\"prevValue\" cannot be empty", 0);
    return -1;
  }
  if (bool_param(req, "noValueOnSuccess", &k->no_value, "invalid value for \"noValueOnSuccess\""))
    return -1;
  return 0;
}

/* ttl, prevExist and refresh (which wants a TTL and no value). Returns: 0, or -1 after
 * answering the error. */
static int ttl_or_reply(struct rv_req *req, struct keys_req *k)
{
  const char *v = rv_req_param(req, "ttl");
  if (v != NULL && v[0] != '\0') {
    if (parse_u64(v, &k->ttl) != 0) {
      v2_error_reply(req, V2_TTL_NAN, "invalid value for \"ttl\"", 0);
      return -1;
    }
    k->has_ttl = 1;
  }
  if ((v = rv_req_param(req, "prevExist")) != NULL) {
    int b = parse_bool(v);
    if (b < 0) {
      v2_error_reply(req, V2_INVALID_FIELD, "invalid value for prevExist", 0);
      return -1;
    }
    k->prev_exist = b;
  }
  if ((v = rv_req_param(req, "refresh")) != NULL) {
    int b = parse_bool(v);
    if (b < 0) {
      v2_error_reply(req, V2_INVALID_FIELD, "invalid value for refresh", 0);
      return -1;
    }
    k->refresh = b;
    if (b) {
      const char *val = rv_req_param(req, "value");
      if (val != NULL && val[0] != '\0') {
        v2_error_reply(req, V2_REFRESH_VALUE, "A value was provided on a refresh", 0);
        return -1;
      }
      if (!k->has_ttl) {
        v2_error_reply(req, V2_REFRESH_TTL_REQUIRED, "No TTL value set", 0);
        return -1;
      }
    }
  }
  return 0;
}

/* parseKeyRequest. Returns: 0, or -1 after answering the error (request errors carry index 0,
 * as etcd's NewRequestError does). */
static int parse_or_reply(struct rv_req *req, struct keys_req *k)
{
  memset(k, 0, sizeof(*k));
  k->prev_exist = -1;
  if (key_or_reply(req, k) != 0 || flags_or_reply(req, k) != 0 || ttl_or_reply(req, k) != 0)
    return -1;
  k->value = rv_req_param(req, "value");
  k->value_len = k->value ? strlen(k->value) : 0;
  return 0;
}

/* Appends the decimal `v` at `p`. Returns: the end. */
static char *put_u64(char *p, uint64_t v)
{
  return p + rv_dec(p, v);
}

/* Fills `hdr` (at least 160 bytes) without printf: every v2 reply carries these. */
static void event_headers(char *hdr, size_t n, uint64_t index)
{
  static const char a[] = "X-Etcd-Cluster-Id: " V2_CLUSTER_ID "\r\nX-Etcd-Index: ";
  static const char b[] = "\r\nX-Raft-Index: ";
  static const char c[] = "\r\nX-Raft-Term: 2\r\n";
  char *p = hdr;
  if (n < sizeof(a) + sizeof(b) + sizeof(c) + 40) {
    hdr[0] = '\0';
    return;
  }
  memcpy(p, a, sizeof(a) - 1);
  p = put_u64(p + sizeof(a) - 1, index);
  memcpy(p, b, sizeof(b) - 1);
  p = put_u64(p + sizeof(b) - 1, index);
  memcpy(p, c, sizeof(c)); /* with the NUL */
}

static void reply_error(struct rv_req *req, struct v2_err *err)
{
  /* causes are store paths: etcd trims its "/1" prefix, ours has none */
  v2_error_reply(req, err->code, err->cause, err->index);
  v2_err_release(err);
}

/* writeKeyEvent */
static void reply_event(struct rv_req *req, struct v2_store *s, const struct v2_event *e,
                        uint64_t index, int no_value)
{
  char hdr[256];
  event_headers(hdr, sizeof(hdr), index);
  int status = e->created ? 201 : 200;
  if (no_value && (e->action == V2_EV_SET || e->action == V2_EV_CAS || e->action == V2_EV_CREATE ||
                   e->action == V2_EV_UPDATE)) {
    /* the event's {"action":"..." head alone: no need to render the rest */
    struct mu_buf b = MU_BUF_INIT(MU_BUF_UNBOUNDED);
    mu_buf_puts(&b, "{\"action\":\"");
    mu_buf_puts(&b, v2_event_action_name(e->action));
    mu_buf_puts(&b, "\"}\n");
    write_reply(req, status, hdr, b.data, b.len);
    mu_buf_release(&b);
    return;
  }
  size_t len;
  const char *json = v2_store_event_json(s, e, &len);
  write_reply(req, status, hdr, json, len);
}

static int64_t expire_of(const struct keys_req *k)
{
  if (!k->has_ttl)
    return 0;
  uint64_t ttl = k->ttl;
  /* Go's Duration would overflow; keep the expiry representable */
  if (ttl > (uint64_t)INT64_MAX / 1000000000 - 4000000000ULL)
    ttl = (uint64_t)INT64_MAX / 1000000000 - 4000000000ULL;
  return v2_now_ns() + (int64_t)ttl * 1000000000;
}

/* ---------------------------------------------------------------------------------------------
 * Watches
 */

static void watch_gone(struct rv_req *req, void *data)
{
  struct v2_watch *wc = data;
  (void)req;
  if (wc->w != NULL)
    v2_watcher_remove(wc->w);
  wc->v2->watches_open--;
  mu_free(wc);
}

static void watch_fire(void *data, const struct v2_event *e, struct v2_watcher *w)
{
  struct v2_watch *wc = data;
  struct rv_req *req = wc->req;
  (void)w;
  size_t len;
  const char *json = v2_store_event_json(wc->v2->store, e, &len);
  if (wc->stream) {
    /* may close the connection (output cap): then watch_gone has freed wc */
    rv_reply_chunk(req, json, len);
    return;
  }
  /* one-shot: the hub frees the watcher; the request ends here, so on_gone must not run */
  wc->w = NULL;
  rv_req_defer(req, NULL, NULL);
  wc->v2->watches_open--;
  mu_free(wc);
  rv_reply_finish(req, json, len);
}

/* A watch of a dir above a credential's keys takes the events it may see: of its keys, and of
 * the dirs on the way to them (a file there holds a value it may not read). */
static int cred_accepts(void *data, const struct v2_event *e)
{
  const struct rv_cred *cred = data;
  return rv_cred_allows(cred, RV_SCOPE_KEY, e->key, e->key_len, RV_READ) ||
         (e->node_dir && rv_cred_above(cred, e->key, e->key_len));
}

static void handle_watch(struct rv_req *req, struct v2 *v2, struct keys_req *k)
{
  struct v2_store *s = v2->store;
  struct v2_err err = {0, NULL, 0};
  const struct v2_event *found = NULL;
  struct v2_watcher *w = NULL;
  uint64_t start_index = s->index;
  char hdr[256];
  if (rv_server_closing(req->srv)) {
    rv_reply_error(req, 503, NULL, "shutting_down", "musterd is shutting down", NULL);
    return;
  }
  struct v2_watch *wc = mu_calloc(1, sizeof(*wc));
  wc->v2 = v2;
  wc->req = req;
  wc->stream = k->stream;
  int all = rv_cred_allows(req->cred, RV_SCOPE_KEY, k->key, strlen(k->key), RV_READ);
  if (v2_store_watch_accept(s, k->key, k->recursive, k->stream, k->wait_index,
                            all ? NULL : cred_accepts, (void *)req->cred, watch_fire, wc, &found,
                            &w, &err) != 0) {
    mu_free(wc);
    reply_error(req, &err);
    return;
  }
  /* X-Etcd-Index of a watch is the index when it started (etcd sends headers first) */
  event_headers(hdr, sizeof(hdr), start_index);
  size_t len = 0;
  const char *json = found != NULL ? v2_store_event_json(s, found, &len) : NULL;
  if (found != NULL && w == NULL) {
    mu_free(wc);
    rv_reply(req, 200, "application/json", hdr, json, len);
    return;
  }
  wc->w = w;
  v2->watches_open++;
  rv_req_defer(req, watch_gone, wc);
  rv_reply_start(req, 200, "application/json", hdr);
  if (found != NULL)
    rv_reply_chunk(req, json, len);
}

/* ---------------------------------------------------------------------------------------------
 * The handlers: one per method, around the same parse and the same hub hold
 */

/* A keys request in progress: what parse_or_reply() read, and the write's outcome. */
struct keys_call {
  struct v2 *v2;
  struct keys_req k;
  struct v2_write w;
  struct v2_err err;
  const struct v2_event *e;
};

/* Parses the request and holds the watcher hub: the watchers a write wakes are answered after
 * the writer (see v2_watch_hub_hold). Returns: 0, or -1 after answering the parse error. */
static int keys_begin_or_reply(struct rv_req *req, struct keys_call *c)
{
  memset(c, 0, sizeof(*c));
  c->v2 = v2_of(req);
  if (parse_or_reply(req, &c->k) != 0) {
    mu_free(c->k.key);
    return -1;
  }
  const struct keys_req *k = &c->k;
  struct v2_write w = {k->key,       k->value,   k->value_len,  k->dir,
                       expire_of(k), k->refresh, k->prev_value, k->prev_index};
  c->w = w;
  v2_watch_hub_hold(&c->v2->store->hub);
  return 0;
}

/* A write whose answer (the node and its prevNode, each value JSON-escaped) might not fit the
 * connection's output cap is refused before anything is committed: a write committed but never
 * acknowledged is what the cap must not cause. Returns: 0, or -1 after answering 413 (and releasing
 * the call). */
static size_t json_len_bound(const char *v, size_t n)
{
  size_t len = n;
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)v[i];
    if (ch < 0x20 || ch >= 0x80 || ch == '"' || ch == '\\' || ch == '<' || ch == '>' || ch == '&')
      len += 5; /* at most "\u00XX" or "\ufffd" for one byte */
  }
  return len;
}

static int reply_fits_or_reply(struct rv_req *req, struct keys_call *c)
{
  const struct v2_node *n = v2_store_lookup(c->v2->store, c->k.key);
  size_t old = n != NULL && !n->is_dir ? json_len_bound(n->value, n->value_len) : 0;
  size_t cap = rv_server_config(req->srv)->max_output_bytes;
  size_t val = c->k.value != NULL ? json_len_bound(c->k.value, c->k.value_len) : 0;
  size_t need = val + old + 12 * strlen(c->k.key) + 1024;
  if (need <= cap)
    return 0;
  rv_refuse_output(req, "the answer to this write could take", need,
                   "nothing was written; write a smaller value or raise --max-output-bytes");
  return -1;
}

/* Answers the write (its event or its error), then lets the held watchers go. */
static void keys_end(struct rv_req *req, struct keys_call *c, int answer)
{
  struct v2_store *s = c->v2->store;
  if (answer) {
    if (c->e == NULL)
      reply_error(req, &c->err);
    else
      reply_event(req, s, c->e, s->index, c->k.no_value);
    if (v2_watch_hub_queued(&s->hub) > 0)
      rv_req_flush(req);
  }
  v2_watch_hub_unhold(&s->hub);
  v2_err_release(&c->err);
  mu_free(c->k.key);
}

/* The start of every write (POST, PUT, DELETE): the request parsed, then its answer bounded
 * before anything is committed. Returns: 0, or -1 when the request was answered. */
static int write_begin_or_reply(struct rv_req *req, struct keys_call *c)
{
  if (keys_begin_or_reply(req, c) != 0)
    return -1;
  if (reply_fits_or_reply(req, c) != 0) {
    keys_end(req, c, 0);
    return -1;
  }
  return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Big answers
 *
 * A GET renders its tree for at most SLICE_NS inside its handler; most are done by then and
 * answered at once. One that is not (a huge dir, a recursive GET of a big tree) goes on in
 * slices of SLICE_NS from an idle handle, the loop serving other clients between them, each
 * slice into a piece of its own (their sum bounded by --max-output-bytes, else 413). The
 * answer is the tree as of one index: while a walk renders, the store takes no write
 * (v2_store_walk_new()), so a PUT, POST or DELETE that arrives meanwhile is parked here and
 * run, in arrival order, when the last walk ends; reads go on. A walk's CPU time bounds the
 * wait, not the reader's client: once rendered, the pieces go out chunked, the next ones only
 * while the connection has less than SEND_CHUNK unsent (rv_req_unsent()) and at most ~512 KiB
 * per loop iteration, the tree writable again meanwhile. A big GET that would start while
 * writes are parked waits behind them, so that a stream of big GETs cannot hold writes back.
 */

#define SLICE_NS 1000000ULL /* 1 ms of rendering per slice */
#define SEND_CHUNK (256 * 1024)

struct big_read {
  struct mu_list_node link; /* on v2->reads */
  struct v2 *v2;
  struct rv_req *req;
  struct v2_walk *walk; /* NULL once rendered */
  /* The answer in pieces, one per slice (one big buffer would be copied as it grows, and
   * freed only at the end): segs[next..nsegs) are still to send. */
  struct mu_buf *segs;
  size_t nsegs, segs_cap, next;
  size_t len;        /* bytes rendered */
  int in_send, gone; /* the client went away inside rv_reply_chunk() */
  char hdr[256];
};

struct parked {
  struct mu_list_node link; /* on v2->parked */
  struct rv_req *req;
  void (*handler)(struct rv_req *req);
};

static void tick_run(struct v2 *v2);

static void on_idle(uv_idle_t *h)
{
  tick_run(h->data);
}

static void on_tick(uv_timer_t *t)
{
  tick_run(t->data);
}

/* Runs tick_run() from the next loop iteration. */
static void tick_arm(struct v2 *v2)
{
  if (v2->idle != NULL)
    uv_idle_start(v2->idle, on_idle);
}

static void big_read_free(struct big_read *r)
{
  mu_list_remove(&r->v2->reads, &r->link);
  v2_store_walk_free(r->walk, 1);
  for (size_t i = r->next; i < r->nsegs; i++)
    mu_buf_release(&r->segs[i]);
  mu_free(r->segs);
  mu_free(r);
}

static void big_read_gone(struct rv_req *req, void *data)
{
  struct big_read *r = data;
  (void)req;
  struct v2 *v2 = r->v2;
  if (r->in_send) {
    r->gone = 1; /* big_read_send() frees it */
    return;
  }
  big_read_free(r);
  tick_arm(v2); /* parked writes may go on now */
}

static void parked_gone(struct rv_req *req, void *data)
{
  struct parked *p = data;
  struct v2 *v2 = rv_server_module_data(req->srv, "v2");
  mu_list_remove(&v2->parked, &p->link);
  mu_free(p);
}

/* Parks a request: `handler` runs it again once no walk reads the tree. */
static void park(struct rv_req *req, struct v2 *v2, void (*handler)(struct rv_req *))
{
  struct parked *p = mu_calloc(1, sizeof(*p));
  p->req = req;
  p->handler = handler;
  mu_list_push_back(&v2->parked, &p->link);
  rv_req_defer(req, parked_gone, p);
  tick_arm(v2);
}

/* A write waits while a walk reads the tree (or while others wait: they keep their order).
 * Returns: 1 when the request was parked (the handler returns), 0 to go on. */
static int park_write(struct rv_req *req, struct v2 *v2, void (*handler)(struct rv_req *))
{
  if (v2->draining || (v2->store->walks == 0 && v2->parked.head == NULL))
    return 0;
  park(req, v2, handler);
  return 1;
}

/* Renders one slice into a new piece. Returns: 1 when the walk is complete. */
static int big_read_slice(struct big_read *r, uint64_t ns, size_t cap)
{
  if (r->nsegs == r->segs_cap) {
    r->segs_cap = r->segs_cap ? r->segs_cap * 2 : 16;
    r->segs = mu_realloc(r->segs, r->segs_cap * sizeof(*r->segs));
  }
  struct mu_buf *b = &r->segs[r->nsegs++];
  mu_buf_init(b, MU_BUF_UNBOUNDED);
  int done = v2_store_walk_step(r->walk, b, uv_hrtime() + ns, cap - r->len);
  r->len += b->len;
  return done;
}

/* Sends what the client has room for; answers the end. Returns: 1 when the answer is complete
 * or the client gone (`r` is freed either way). */
static int big_read_send(struct big_read *r)
{
  struct rv_req *req = r->req;
  size_t now = 0; /* per call, about 512 KiB: a client that reads fast gets that much per tick */
  while (r->next < r->nsegs && rv_req_unsent(req) < SEND_CHUNK && now < 2 * SEND_CHUNK) {
    now += r->segs[r->next].len;
    struct mu_buf *b = &r->segs[r->next++];
    r->in_send = 1;
    rv_reply_chunk(req, b->data, b->len); /* may close the connection */
    r->in_send = 0;
    mu_buf_release(b);
    if (r->gone) {
      big_read_free(r);
      return 1;
    }
  }
  if (r->next < r->nsegs)
    return 0;
  rv_req_defer(req, NULL, NULL);
  big_read_free(r);
  rv_reply_end(req);
  return 1;
}

/* The walk is done: the answer starts, in chunks, or is refused when too large. */
static void big_read_rendered(struct big_read *r, int complete)
{
  struct rv_req *req = r->req;
  size_t len = r->len;
  v2_store_walk_free(r->walk, 1);
  r->walk = NULL;
  if (!complete) {
    rv_req_defer(req, NULL, NULL);
    big_read_free(r);
    rv_refuse_output(req, "the answer takes more than", len,
                     "ask for less (a smaller directory, without recursive) or raise "
                     "--max-output-bytes");
    return;
  }
  rv_reply_start(req, 200, "application/json", r->hdr);
  big_read_send(r);
}

/* One slice of every walk in progress (a share of SLICE_NS each), the sends the clients have
 * room for, and the parked writes once no walk reads the tree. */
static void tick_run(struct v2 *v2)
{
  size_t cap = rv_server_config(v2->srv)->max_output_bytes;
  size_t walking = 0;
  for (struct mu_list_node *x = v2->reads.head; x != NULL; x = x->next)
    walking += MU_CONTAINER_OF(x, struct big_read, link)->walk != NULL;
  uint64_t share = walking > 0 ? SLICE_NS / walking : 0;
  struct mu_list_node *x = v2->reads.head, *next = NULL;
  for (; x != NULL; x = next) {
    next = x->next;
    struct big_read *r = MU_CONTAINER_OF(x, struct big_read, link);
    if (r->walk != NULL) {
      int done = big_read_slice(r, share, cap);
      if (done || r->len > cap) {
        next = x->next; /* r may go; nothing else in the list does */
        big_read_rendered(r, r->len <= cap);
      }
      continue;
    }
    big_read_send(r);
  }
  if (v2->store->walks == 0 && v2->parked.head != NULL) {
    v2->draining = 1;
    while (v2->store->walks == 0 && v2->parked.head != NULL) {
      struct parked *p = MU_CONTAINER_OF(v2->parked.head, struct parked, link);
      mu_list_remove(&v2->parked, &p->link);
      struct rv_req *req = p->req;
      void (*handler)(struct rv_req *) = p->handler;
      mu_free(p);
      rv_req_defer(req, NULL, NULL);
      handler(req);
    }
    v2->draining = 0;
  }
  /* rendering goes on at once; waiting for clients to read polls every millisecond */
  int rendering = 0, sending = 0;
  for (x = v2->reads.head; x != NULL; x = x->next) {
    struct big_read *r = MU_CONTAINER_OF(x, struct big_read, link);
    rendering |= r->walk != NULL;
    sending |= r->walk == NULL;
  }
  if (rendering || (v2->store->walks == 0 && v2->parked.head != NULL))
    uv_idle_start(v2->idle, on_idle);
  else
    uv_idle_stop(v2->idle);
  if (sending && !rendering)
    uv_timer_start(v2->tick, on_tick, 1, 0);
}

static void keys_get(struct rv_req *req);

struct unheld_reply {
  struct rv_req *req;
  struct big_read *r;
};

static void reply_unheld(void *data)
{
  struct unheld_reply *u = data;
  rv_reply(u->req, 200, "application/json", u->r->hdr, u->r->segs[0].data, u->r->segs[0].len);
}

/* A listing for a credential that may read only part of the tree: its keys, and the dirs on
 * the way to them (without their other children; a file there is not on the way). */
static int cred_visible(void *data, const char *key, size_t len, int is_dir)
{
  const struct rv_cred *cred = data;
  return rv_cred_allows(cred, RV_SCOPE_KEY, key, len, RV_READ) ||
         (is_dir && rv_cred_above(cred, key, len));
}

/* A GET: rendered at once when it takes less than a slice, else in slices. With `at` > 0 (a
 * disk error holds records, none of which touches this key: rv_server_read_index()), a GET
 * rendered at once is answered at index `at` without waiting for them; one rendered in slices
 * waits for them like any output. */
static void get_in_slices(struct rv_req *req, struct v2 *v2, struct keys_call *c, uint64_t at)
{
  struct v2_store *s = v2->store;
  size_t cap = rv_server_config(req->srv)->max_output_bytes;
  struct v2_walk *w = v2_store_walk_new(s, c->k.key, c->k.recursive, c->k.sorted, &c->err);
  if (w == NULL) {
    reply_error(req, &c->err);
    return;
  }
  if (!rv_cred_allows(req->cred, RV_SCOPE_KEY, c->k.key, strlen(c->k.key), RV_READ))
    v2_store_walk_filter(w, cred_visible, (void *)req->cred); /* a dir above its keys */
  struct big_read *r = mu_calloc(1, sizeof(*r));
  r->v2 = v2;
  r->req = req;
  r->walk = w;
  event_headers(r->hdr, sizeof(r->hdr), v2_store_walk_index(w));
  mu_list_push_back(&v2->reads, &r->link);
  if (big_read_slice(r, SLICE_NS, cap)) {
    struct unheld_reply u = {req, r};
    if (at > 0) {
      event_headers(r->hdr, sizeof(r->hdr), at);
      rv_server_unheld(req->srv, reply_unheld, &u);
    } else {
      reply_unheld(&u);
    }
    big_read_free(r);
    return;
  }
  if (v2->parked.head != NULL && !v2->draining) {
    /* writes wait: this walk starts again behind them */
    big_read_free(r);
    s->stats.get_success--;
    park(req, v2, keys_get);
    return;
  }
  rv_req_defer(req, big_read_gone, r);
  tick_arm(v2);
}

static void keys_get(struct rv_req *req)
{
  struct keys_call c;
  if (keys_begin_or_reply(req, &c) != 0)
    return;
  if (c.k.wait) {
    handle_watch(req, c.v2, &c.k);
    keys_end(req, &c, 0);
    return;
  }
  const struct v2_node *n = v2_store_lookup(c.v2->store, c.k.key);
  if (n != NULL && !n->is_dir &&
      !rv_cred_allows(req->cred, RV_SCOPE_KEY, c.k.key, strlen(c.k.key), RV_READ)) {
    rv_refuse_scope(req, RV_SCOPE_KEY, c.k.key, RV_READ); /* a file is no dir above its keys */
    keys_end(req, &c, 0);
    return;
  }
  /* a file's answer holds its key and value escaped, at least: when that much would be refused
   * (a client that does not read its answers), it is refused before it is rendered */
  if (n != NULL && !n->is_dir &&
      rv_reply_refused(req, mu_json_str_len(n->value, n->value_len) +
                                mu_json_str_len(n->hn.key, n->hn.len) + 64)) {
    keys_end(req, &c, 0);
    return;
  }
  get_in_slices(req, c.v2, &c, rv_server_read_index(req->srv, c.k.key));
  keys_end(req, &c, 0);
}

/* POST: an in-order key under the dir (etcd's CreateInOrder). */
static void keys_post(struct rv_req *req)
{
  struct keys_call c;
  if (park_write(req, v2_of(req), keys_post))
    return;
  if (write_begin_or_reply(req, &c) != 0)
    return;
  c.e = v2_store_create(c.v2->store, &c.w, 1, &c.err);
  keys_end(req, &c, 1);
}

/* PUT: set, create, update or compare-and-swap, as applierV2store.Put chooses. */
static void keys_put(struct rv_req *req)
{
  struct keys_call c;
  if (park_write(req, v2_of(req), keys_put))
    return;
  if (write_begin_or_reply(req, &c) != 0)
    return;
  struct v2_store *s = c.v2->store;
  const struct keys_req *k = &c.k;
  int has_prev_value = k->prev_value != NULL && k->prev_value[0] != '\0';
  if (k->prev_exist == 1) {
    if (k->prev_index == 0 && !has_prev_value)
      c.e = v2_store_update(s, &c.w, &c.err);
    else
      c.e = v2_store_cas(s, &c.w, &c.err);
  } else if (k->prev_exist == 0) {
    c.e = v2_store_create(s, &c.w, 0, &c.err);
  } else if (k->prev_index > 0 || has_prev_value) {
    c.e = v2_store_cas(s, &c.w, &c.err);
  } else {
    c.e = v2_store_set(s, &c.w, &c.err);
  }
  keys_end(req, &c, 1);
}

/* DELETE: compare-and-delete with a condition, else delete. */
static void keys_delete(struct rv_req *req)
{
  struct keys_call c;
  if (park_write(req, v2_of(req), keys_delete))
    return;
  if (write_begin_or_reply(req, &c) != 0)
    return;
  struct v2_store *s = c.v2->store;
  const struct keys_req *k = &c.k;
  if (k->prev_index > 0 || (k->prev_value != NULL && k->prev_value[0] != '\0'))
    c.e = v2_store_cad(s, k->key, k->prev_value, k->prev_index, &c.err);
  else
    c.e = v2_store_delete(s, k->key, k->dir, k->recursive, &c.err);
  keys_end(req, &c, 1);
}

static void stats_store_handler(struct rv_req *req)
{
  struct v2 *v2 = v2_of(req);
  const struct v2_store_stats *st = &v2->store->stats;
  char body[1024];
  int n = snprintf(body, sizeof(body),
                   "{\"getsSuccess\":%llu,\"getsFail\":%llu,\"setsSuccess\":%llu,\"setsFail\":%llu,"
                   "\"deleteSuccess\":%llu,\"deleteFail\":%llu,\"updateSuccess\":%llu,"
                   "\"updateFail\":%llu,\"createSuccess\":%llu,\"createFail\":%llu,"
                   "\"compareAndSwapSuccess\":%llu,\"compareAndSwapFail\":%llu,"
                   "\"compareAndDeleteSuccess\":%llu,\"compareAndDeleteFail\":%llu,"
                   "\"expireCount\":%llu,\"watchers\":%llu}\n",
                   (unsigned long long)st->get_success, (unsigned long long)st->get_fail,
                   (unsigned long long)st->set_success, (unsigned long long)st->set_fail,
                   (unsigned long long)st->delete_success, (unsigned long long)st->delete_fail,
                   (unsigned long long)st->update_success, (unsigned long long)st->update_fail,
                   (unsigned long long)st->create_success, (unsigned long long)st->create_fail,
                   (unsigned long long)st->cas_success, (unsigned long long)st->cas_fail,
                   (unsigned long long)st->cad_success, (unsigned long long)st->cad_fail,
                   (unsigned long long)st->expire_count, (unsigned long long)v2->store->hub.count);
  rv_reply(req, 200, "application/json", NULL, body, (size_t)n);
}

/* ---------------------------------------------------------------------------------------------
 * Module
 */

static void v2_closed(void *data)
{
  struct v2 *v2 = data;
  struct rv_server *srv = v2->srv;
  mu_free(v2);
  rv_server_unref(srv);
}

static void idle_closed(uv_handle_t *h)
{
  mu_free(h);
}

static void tick_closed(uv_handle_t *h)
{
  struct v2 *v2 = h->data;
  mu_free(h);
  struct v2_store *s = v2->store;
  v2->store = NULL;
  v2_store_close(s, v2_closed, v2);
}

static void v2_close(struct rv_server *srv, void *data)
{
  struct v2 *v2 = data;
  rv_server_ref(srv);
  /* the deferred requests have had on_gone: no read is in progress, nothing is parked */
  uv_close((uv_handle_t *)v2->idle, idle_closed); /* closed before the timer's callback */
  v2->idle = NULL;
  uv_timer_t *t = v2->tick;
  v2->tick = NULL;
  uv_close((uv_handle_t *)t, tick_closed);
}

static void v2_metrics(struct rv_server *srv, void *data, struct mu_buf *out)
{
  struct v2 *v2 = data;
  (void)srv;
  if (v2->store == NULL)
    return;
  mu_buf_printf(out,
                "# HELP musterd_v2_nodes Nodes (keys and dirs) in the etcd v2 store.\n"
                "# TYPE musterd_v2_nodes gauge\nmusterd_v2_nodes %zu\n"
                "# HELP musterd_v2_index The etcd v2 store index.\n"
                "# TYPE musterd_v2_index gauge\nmusterd_v2_index %llu\n"
                "# HELP musterd_v2_watchers Blocked etcd v2 watchers.\n"
                "# TYPE musterd_v2_watchers gauge\nmusterd_v2_watchers %zu\n"
                "# HELP musterd_v2_expirations_total Keys and dirs expired by TTL.\n"
                "# TYPE musterd_v2_expirations_total counter\nmusterd_v2_expirations_total %llu\n",
                v2->store->nodes.n - 1, (unsigned long long)v2->store->index, v2->store->hub.count,
                (unsigned long long)v2->store->stats.expire_count);
}

/* ---------------------------------------------------------------------------------------------
 * The API's hooks for the gate
 */

static int v2_refuse(struct rv_req *req, const struct rv_refusal *r)
{
  switch (r->kind) {
  case RV_REFUSE_NO_CREDENTIALS:
  case RV_REFUSE_BAD_CREDENTIALS: {
    /* etcd's v2 answer (httptypes.HTTPError), byte for byte; with the WWW-Authenticate lines
     * that etcd leaves out (RFC 9110 asks for them on a 401) */
    static const char body[] = "{\"message\":\"Insufficient credentials\"}";
    rv_reply(req, 401, "application/json", r->challenge, body, sizeof(body) - 1);
    return 1;
  }
  case RV_REFUSE_TOO_LARGE:
  case RV_REFUSE_TOO_MANY: {
    struct v2_store *s = v2_store_of(req->srv);
    v2_error_reply(req, r->kind == RV_REFUSE_TOO_LARGE ? V2_VALUE_OVER_QUOTA : V2_QUOTA_EXCEEDED,
                   r->message, s != NULL ? s->index : 0);
    return 1;
  }
  case RV_REFUSE_READ_ONLY: { /* etcd answers a store it cannot commit to with a raft error */
    struct v2_store *s = v2_store_of(req->srv);
    v2_error_reply(req, V2_RAFT_INTERNAL, r->message, s != NULL ? s->index : 0);
    return 1;
  }
  case RV_REFUSE_FORBIDDEN: { /* etcd's auth says errorCode 110 (with 401) for a key it denies */
    struct v2_store *s = v2_store_of(req->srv);
    v2_error_reply_status(req, V2_UNAUTHORIZED, 403, r->message, s != NULL ? s->index : 0);
    return 1;
  }
  case RV_REFUSE_METHOD:
    break;
  }
  return 0; /* etcd's mux answers 405 in plain text, as the server does */
}

/* How many nodes would this write add: the key and each missing dir above it (and an
 * in-order key under a POST's dir)? The key is read as the handler reads it
 * (v2_store_clean_key()); a key over the depth limit adds nothing: the handler refuses it. */
static int adds_nodes(const struct v2_store *s, const struct rv_req *req)
{
  size_t off = strlen("/v2/keys");
  char *key = v2_store_clean_key(req->path + off, req->path_len - off);
  int n = req->method == RV_POST;
  if (key_depth(key) <= V2_MAX_DEPTH) {
    for (;;) {
      if (v2_store_lookup(s, key) != NULL)
        break;
      n++;
      char *slash = strrchr(key, '/');
      if (slash == NULL || slash == key)
        break;
      *slash = '\0';
    }
  }
  mu_free(key);
  return n;
}

static void v2_usage(struct rv_req *req, struct rv_usage *u)
{
  struct v2_store *s = v2_store_of(req->srv);
  unsigned flags = req->route->flags;
  if (flags & RV_ROUTE_MAY_POLL) {
    const char *w = rv_req_param(req, "wait");
    u->poll = w != NULL && parse_bool(w) == 1; /* every spelling the handler accepts */
  }
  if (!(flags & RV_ROUTE_WRITE) || s == NULL)
    return;
  const char *v = rv_req_param(req, "value");
  u->has_value = v != NULL;
  u->value_len = v != NULL ? strlen(v) : 0;
  u->counts_keys = 1;
  u->keys = s->nodes.n;
  u->adds_key = adds_nodes(s, req);
}

/* The key a /v2/keys request reads or writes, cleaned as the handler cleans it. */
static int v2_target(struct rv_req *req, struct rv_target *t)
{
  size_t off = strlen("/v2/keys");
  if (strncmp(req->path, "/v2/keys", off) != 0 || memchr(req->path, '\0', req->path_len))
    return 0; /* /v2/stats/store: counts only */
  t->owned = v2_store_clean_key(req->path + off, req->path_len - off);
  t->kind = RV_SCOPE_KEY;
  t->name = t->owned;
  t->len = strlen(t->owned);
  t->access = req->method == RV_GET ? RV_READ : RV_WRITE;
  return 1;
}

const struct rv_api v2_api = {"v2", v2_refuse, v2_usage, v2_target};

/* /v2/keys and everything below it: two resources ("/v2/keys" and the "/v2/keys/" subtree),
 * one row per method, so that each row says what its requests do. */
#define KEYS_FLAGS (RV_ROUTE_FORM | RV_ROUTE_CORS)
static const struct rv_route v2_routes[] = {
    {RV_GET, "/v2/keys", KEYS_FLAGS | RV_ROUTE_MAY_POLL, keys_get, "v2_keys", &v2_api},
    {RV_PUT, "/v2/keys", KEYS_FLAGS | RV_ROUTE_WRITE, keys_put, "v2_keys", &v2_api},
    {RV_POST, "/v2/keys", KEYS_FLAGS | RV_ROUTE_WRITE, keys_post, "v2_keys", &v2_api},
    {RV_DELETE, "/v2/keys", KEYS_FLAGS, keys_delete, "v2_keys", &v2_api},
    {RV_GET, "/v2/keys/", KEYS_FLAGS | RV_ROUTE_PREFIX | RV_ROUTE_MAY_POLL, keys_get, "v2_keys",
     &v2_api},
    {RV_PUT, "/v2/keys/", KEYS_FLAGS | RV_ROUTE_PREFIX | RV_ROUTE_WRITE, keys_put, "v2_keys",
     &v2_api},
    {RV_POST, "/v2/keys/", KEYS_FLAGS | RV_ROUTE_PREFIX | RV_ROUTE_WRITE, keys_post, "v2_keys",
     &v2_api},
    {RV_DELETE, "/v2/keys/", KEYS_FLAGS | RV_ROUTE_PREFIX, keys_delete, "v2_keys", &v2_api},
    {RV_GET, "/v2/stats/store", RV_ROUTE_CORS, stats_store_handler, "v2_stats_store", &v2_api},
    {0, NULL, 0, NULL, NULL, NULL},
};

void v2_register(struct rv_server *srv)
{
  struct v2 *v2 = mu_calloc(1, sizeof(*v2));
  v2->srv = srv;
  v2->store = v2_store_new(rv_server_loop(srv));
  v2->tick = mu_malloc(sizeof(*v2->tick));
  uv_timer_init(rv_server_loop(srv), v2->tick);
  v2->tick->data = v2;
  v2->idle = mu_malloc(sizeof(*v2->idle));
  uv_idle_init(rv_server_loop(srv), v2->idle);
  v2->idle->data = v2;
  struct rv_module m = {"v2", v2, v2_close, v2_metrics};
  rv_server_add_module(srv, &m);
  v2_cluster_register(srv);
  rv_server_add_routes(srv, v2_routes);
}
