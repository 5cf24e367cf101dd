/* WAIT and watch_key on the store's watchers (etcd/watch_hub.c), the machinery of v2 watches: a
 * WAIT parks one one-shot watcher per missing key (after VALIDATE, one more on the queue of that
 * name: torch's check counts a queue with items as its key being there), and is answered
 * STOP_WAITING once every key exists; watch_key (torch 1.13) keeps one stream watcher per key.
 * Waited keys are bounded per client address (C10D_MAX_WAIT_KEYS_PER_ADDRESS), and what they
 * hold (the paths, their watchers, the hub's lists) counts in the server's one memory budget
 * with the client's buffers and HTTP's (--max-buffer-bytes, --max-buffer-bytes-per-client):
 * taken before anything is made, once per WAIT, so that a WAIT past it is refused, not grown.
 */
#include <string.h>

#include "alloc.h"
#include "c10d_int.h"

/* One awaited key. */
struct c10d_wkey {
  struct c10d_wait *wait;
  struct v2_watcher *w;  /* on the key's node */
  struct v2_watcher *wq; /* on the queue of that name (after VALIDATE), or NULL */
  char *path;
  char *qpath;
  int done;
};

struct c10d_wait {
  struct c10d_conn *c;
  int64_t need; /* BARRIER: the count its key must reach (0 for a WAIT) */
  size_t n, missing;
  size_t held; /* bytes counted in the memory budget */
  struct c10d_wkey keys[];
};

/* A watch_key subscription. */
struct c10d_watch {
  struct mu_list_node link; /* on c->watches */
  struct c10d_conn *c;
  struct v2_watcher *w;
  char *path;
  size_t held; /* bytes counted in the memory budget */
  size_t klen;
  char key[];
};

/* A watcher and its slots (the hub's table, its list), beside the path's copies. */
#define WATCHER_BYTES 128

/* What watching a store path of `len` bytes holds, as the allocator sizes it: our copy of the
 * path, the hub's list of that path (its own copy; counted even when the list was there), the
 * watcher. */
static size_t path_cost(size_t len)
{
  return mu_alloc_size(len + 1) + mu_alloc_size(len + 1 + 48) + WATCHER_BYTES;
}

/* Counts `n` bytes more for the waits of `c`. Returns: 0, or -1 after closing `c`. */
static int wait_bytes_take(struct c10d_conn *c, size_t n, const char *what)
{
  if (c10d_budget_take(c, n, what) != 0)
    return -1;
  c->m->wait_bytes += n;
  return 0;
}

static void wait_bytes_put(struct c10d_conn *c, size_t n)
{
  c10d_budget_put(c, n);
  c->m->wait_bytes -= n;
}

/* ---------------------------------------------------------------------------------------------
 * Per-address counts
 */

struct c10d_addr *c10d_addr_take(struct c10d *m, const char *peer)
{
  size_t n = strlen(peer);
  struct mu_hnode *h = mu_htab_find(&m->addrs, peer, n);
  struct c10d_addr *a = h != NULL ? MU_CONTAINER_OF(h, struct c10d_addr, h) : NULL;
  if (a == NULL) {
    a = mu_calloc(1, sizeof(*a) + n + 1);
    a->h.key = (char *)(a + 1);
    memcpy(a->h.key, peer, n);
    mu_htab_add(&m->addrs, &a->h, a->h.key, n);
  }
  a->conns++;
  return a;
}

void c10d_addr_put(struct c10d *m, struct c10d_addr *a)
{
  if (a == NULL || --a->conns > 0)
    return;
  mu_htab_del(&m->addrs, &a->h);
  mu_free(a);
}

/* Counts `n` more waited keys for `c`. Returns: 0, or -1 after closing `c` (over the bound). */
static int wait_keys_take(struct c10d_conn *c, uint64_t n)
{
  if (c->waddr->wait_keys + n > C10D_MAX_WAIT_KEYS_PER_ADDRESS) {
    c10d_conn_close(c, C10D_R_WAIT_BOUND);
    return -1;
  }
  c->waddr->wait_keys += n;
  c->m->wait_keys += n;
  return 0;
}

static void wait_keys_put(struct c10d_conn *c, uint64_t n)
{
  c->waddr->wait_keys -= n;
  c->m->wait_keys -= n;
}

/* ---------------------------------------------------------------------------------------------
 * WAIT
 */

static int wkey_ready(struct c10d *m, const struct c10d_wkey *k)
{
  if (k->wait->need > 0) {
    struct v2_node *n = c10d_lookup_key(m, k->path);
    int64_t count = 0;
    return n != NULL && c10d_parse_ll(n->value, n->value_len, &count) == 0 &&
           count >= k->wait->need;
  }
  return c10d_lookup_key(m, k->path) != NULL || (k->qpath && c10d_queue_len(m, k->qpath) > 0);
}

static void wait_free(struct c10d_wait *wt)
{
  struct c10d_conn *c = wt->c;
  for (size_t i = 0; i < wt->n; i++) {
    v2_watcher_remove(wt->keys[i].w);
    v2_watcher_remove(wt->keys[i].wq);
    mu_free(wt->keys[i].path);
    mu_free(wt->keys[i].qpath);
  }
  wait_keys_put(c, wt->n);
  wait_bytes_put(c, wt->held);
  c->wait = NULL;
  mu_free(wt);
}

void c10d_wait_cancel(struct c10d_conn *c)
{
  if (c->wait != NULL)
    wait_free(c->wait);
}

static void on_key_event(void *data, const struct v2_event *e, struct v2_watcher *w);

static struct v2_watcher *watch(struct c10d *m, const char *path, int recursive, void *data)
{
  /* from the next index on: a watcher added while the hub notifies is not offered that event */
  return v2_watch_hub_add(&m->store->hub, path, recursive, 0, m->store->index + 1, on_key_event,
                          data);
}

static void on_key_event(void *data, const struct v2_event *e, struct v2_watcher *w)
{
  (void)e;
  struct c10d_wkey *k = data;
  struct c10d_wait *wt = k->wait;
  struct c10d *m = wt->c->m;
  if (w == k->w)
    k->w = NULL; /* one-shot: the hub frees it after this call */
  else
    k->wq = NULL;
  if (!wkey_ready(m, k)) {
    /* deleted, or a queue emptied: wait for the next event of the same node */
    if (k->w == NULL)
      k->w = watch(m, k->path, 0, k);
    else
      k->wq = watch(m, k->qpath, 1, k);
    return;
  }
  v2_watcher_remove(k->w);
  v2_watcher_remove(k->wq);
  k->w = k->wq = NULL;
  k->done = 1;
  if (--wt->missing > 0)
    return;
  struct c10d_conn *c = wt->c;
  wait_free(wt);
  m->waits_woken++;
  if (c10d_out_u8(c, 0) == 0) /* STOP_WAITING */
    c10d_flush(c);
}

/* Whether span `s` of the frame names a key that is not there yet (a V2 queue with items counts
 * as there). Leaves the key's store path in m->path and, for V2, its queue's in m->path2. */
static int span_missing(struct c10d_conn *c, const uint8_t *base, const struct c10d_span *s)
{
  struct c10d *m = c->m;
  const char *path = c10d_key_path(&m->path, C10D_DIR, base + s->off, s->len);
  if (c->proto == C10D_PROTO_V2)
    c10d_key_path(&m->path2, C10D_QUEUE_DIR, base + s->off, s->len);
  if (c10d_lookup_key(m, path) != NULL)
    return 0;
  return c->proto != C10D_PROTO_V2 || c10d_queue_len(m, mu_buf_str(&m->path2)) == 0;
}

/* Counts the frame's keys that do not exist yet, and in `*bytes` what waiting on them holds. */
static size_t count_missing(struct c10d_conn *c, const uint8_t *base, size_t *bytes)
{
  struct c10d *m = c->m;
  size_t missing = 0;
  *bytes = 0;
  for (size_t i = 0; i < c->frame.nspans; i++) {
    if (!span_missing(c, base, &c->frame.spans[i]))
      continue;
    missing++;
    *bytes += path_cost(m->path.len);
    if (c->proto == C10D_PROTO_V2)
      *bytes += path_cost(m->path2.len);
  }
  *bytes += mu_alloc_size(sizeof(struct c10d_wait) + missing * sizeof(struct c10d_wkey));
  return missing;
}

int c10d_wait_start(struct c10d_conn *c)
{
  struct c10d *m = c->m;
  const uint8_t *base = (const uint8_t *)c->in.data + c->pos;
  c10d_wait_cancel(c); /* a WAIT replaces the one in progress (torch overwrites its count) */
  size_t bytes = 0;
  size_t missing = count_missing(c, base, &bytes);
  if (missing == 0)
    return c10d_out_u8(c, 0); /* STOP_WAITING */
  if (wait_keys_take(c, missing) != 0)
    return -1;
  if (wait_bytes_take(c, bytes, "a WAIT") != 0) { /* closed */
    wait_keys_put(c, missing);
    return -1;
  }
  struct c10d_wait *wt = mu_calloc(1, sizeof(*wt) + missing * sizeof(wt->keys[0]));
  wt->c = c;
  wt->held = bytes;
  /* A slot is taken only for a key found missing, and only while one is left: the array has
   * `missing` slots, however many keys the frame names, repeats or has ready. */
  for (size_t i = 0; i < c->frame.nspans && wt->n < missing; i++) {
    if (!span_missing(c, base, &c->frame.spans[i]))
      continue;
    struct c10d_wkey *k = &wt->keys[wt->n++];
    k->wait = wt;
    k->path = mu_strdup(mu_buf_str(&m->path));
    if (c->proto == C10D_PROTO_V2)
      k->qpath = mu_strdup(mu_buf_str(&m->path2));
    k->w = watch(m, k->path, 0, k);
    if (k->qpath != NULL)
      k->wq = watch(m, k->qpath, 1, k);
  }
  /* the same test twice, nothing changed between: every slot is filled */
  wt->missing = wt->n;
  wait_keys_put(c, missing - wt->n);
  c->wait = wt;
  if (wt->n > 0)
    return 0;
  wait_free(wt);
  return c10d_out_u8(c, 0); /* STOP_WAITING */
}

int c10d_barrier_wait(struct c10d_conn *c, const char *path, int64_t need)
{
  c10d_wait_cancel(c); /* like a WAIT, it replaces the one in progress */
  size_t bytes =
      mu_alloc_size(sizeof(struct c10d_wait) + sizeof(struct c10d_wkey)) + path_cost(strlen(path));
  if (wait_keys_take(c, 1) != 0)
    return -1;
  if (wait_bytes_take(c, bytes, "a BARRIER") != 0) { /* closed */
    wait_keys_put(c, 1);
    return -1;
  }
  struct c10d_wait *wt = mu_calloc(1, sizeof(*wt) + sizeof(wt->keys[0]));
  wt->c = c;
  wt->held = bytes;
  wt->need = need;
  wt->n = wt->missing = 1;
  wt->keys[0].wait = wt;
  wt->keys[0].path = mu_strdup(path);
  wt->keys[0].w = watch(c->m, path, 0, &wt->keys[0]);
  c->wait = wt;
  return 0;
}

/* ---------------------------------------------------------------------------------------------
 * watch_key (torch 1.13): KEY_UPDATED 0, KEY_CREATED 1, KEY_DELETED 2, KEY_CALLBACK_REGISTERED 3
 */

void c10d_watch_stash(struct c10d *m, const char *path)
{
  struct v2_node *n = c10d_lookup_key(m, path);
  mu_buf_clear(&m->stash_key);
  mu_buf_clear(&m->stash_val);
  mu_buf_puts(&m->stash_key, path);
  if (n != NULL)
    mu_buf_append(&m->stash_val, n->value, n->value_len);
  m->stash_set = 1;
}

void c10d_watch_unstash(struct c10d *m)
{
  if (!m->stash_set)
    return;
  m->stash_set = 0;
  mu_buf_release(&m->stash_key);
  mu_buf_release(&m->stash_val);
}

static void on_watch_event(void *data, const struct v2_event *e, struct v2_watcher *w)
{
  (void)w;
  struct c10d_watch *x = data;
  struct c10d *m = x->c->m;
  int deleted = e->action == V2_EV_DELETE || e->action == V2_EV_CAD || e->action == V2_EV_EXPIRE;
  uint8_t type = deleted ? 2 : e->created ? 1 : 0;
  int stashed = m->stash_set && strcmp(mu_buf_str(&m->stash_key), x->path) == 0;
  struct v2_node *n = deleted ? NULL : c10d_lookup_key(m, x->path);
  if (c10d_out_u8(x->c, type) != 0 || c10d_out_bytes(x->c, x->key, x->klen) != 0 ||
      c10d_out_bytes(x->c, stashed ? m->stash_val.data : NULL, stashed ? m->stash_val.len : 0) ||
      c10d_out_bytes(x->c, n ? n->value : NULL, n ? n->value_len : 0) != 0)
    return;
  c10d_flush(x->c);
}

int c10d_watch_add(struct c10d_conn *c, const void *k, size_t n)
{
  struct c10d *m = c->m;
  const char *path = c10d_key_path(&m->path, C10D_DIR, k, n);
  size_t bytes = mu_alloc_size(sizeof(struct c10d_watch) + n + 1) + path_cost(m->path.len);
  if (wait_keys_take(c, 1) != 0)
    return -1;
  if (wait_bytes_take(c, bytes, "a WATCH_KEY") != 0) { /* closed */
    wait_keys_put(c, 1);
    return -1;
  }
  struct c10d_watch *x = mu_calloc(1, sizeof(*x) + n + 1);
  x->c = c;
  x->held = bytes;
  x->klen = n;
  memcpy(x->key, k, n);
  x->path = mu_strdup(path);
  x->w = v2_watch_hub_add(&m->store->hub, x->path, 0, 1, m->store->index + 1, on_watch_event, x);
  mu_list_push_back(&c->watches, &x->link);
  m->watch_keys++;
  return c10d_out_u8(c, 3); /* KEY_CALLBACK_REGISTERED */
}

void c10d_watch_clear(struct c10d_conn *c)
{
  while (c->watches.head != NULL) {
    struct c10d_watch *x = MU_CONTAINER_OF(c->watches.head, struct c10d_watch, link);
    mu_list_remove(&c->watches, &x->link);
    v2_watcher_remove(x->w);
    wait_keys_put(c, 1);
    wait_bytes_put(c, x->held);
    c->m->watch_keys--;
    mu_free(x->path);
    mu_free(x);
  }
}
