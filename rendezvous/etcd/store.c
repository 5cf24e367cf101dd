/* The etcd v2 key tree. Mirrors v2store/store.go and node.go operation by operation; the
 * comments name the etcd function each part follows, and note where we differ on purpose.
 *
 * Nodes live in a tree (parent + children array) and in one hash table by full key, so a
 * lookup is one probe and walking "/a/b/c" is three. A replaced file keeps its struct (etcd
 * frees and recreates it; nothing outside can tell).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "muster/errno.h"

#include "alloc.h"
#include "path.h"
#include "store.h"
#include "store_int.h"

/* etcd: expire times before 2000-01-01 are treated as permanent (minExpireTime). */
#define MIN_EXPIRE_NS ((int64_t)946684800 * 1000000000)

/* ---------------------------------------------------------------------------------------------
 * Errors
 */

void v2_err_release(struct v2_err *e)
{
  if (e == NULL)
    return;
  mu_free(e->cause);
  e->cause = NULL;
}

static void set_err(struct v2_err *e, int code, const char *cause, uint64_t index)
{
  mu_free(e->cause);
  e->code = code;
  e->cause = cause ? mu_strdup(cause) : NULL;
  e->index = index;
}

static void set_errn(struct v2_err *e, int code, const char *cause, size_t n, uint64_t index)
{
  mu_free(e->cause);
  e->code = code;
  e->cause = mu_strndup(cause, n);
  e->index = index;
}

/* ---------------------------------------------------------------------------------------------
 * Keys and the node table
 */

char *v2_store_clean_key(const char *p, size_t n)
{
  char *out = mu_malloc(n + 2);
  mu_path_clean(out, p, n, 0);
  return out;
}

/* Is `x` in a deleted subtree that is still being freed? O(depth), and only while one is. */
static int is_dead(const struct v2_store *s, const struct v2_node *x)
{
  if (s->dead == 0)
    return 0;
  for (; x != NULL; x = x->parent)
    if (x->dead)
      return 1;
  return 0;
}

static struct v2_node *lookup_n(const struct v2_store *s, const char *key, size_t n)
{
  struct mu_hnode *h = mu_htab_find(&s->nodes, key, n);
  struct v2_node *x = h != NULL ? MU_CONTAINER_OF(h, struct v2_node, hn) : NULL;
  return x != NULL && !is_dead(s, x) ? x : NULL;
}

/* Takes a dead node out of the table. nodes.n stopped counting it when its subtree was
 * deleted (so that nodes.n is the live count for every reader: quotas, metrics, snapshots);
 * mu_htab_del() counts it off again. */
static void table_del_dead(struct v2_store *s, struct v2_node *x)
{
  if (!x->in_table)
    return;
  x->in_table = 0;
  s->nodes.n++;
  mu_htab_del(&s->nodes, &x->hn);
  s->dead--;
}

static void size_add(struct v2_node *p, uint32_t add, uint32_t sub)
{
  for (; p != NULL; p = p->parent)
    p->size = p->size + add - sub;
}

static void bytes_add(struct v2_node *p, uint64_t add, uint64_t sub)
{
  for (; p != NULL; p = p->parent)
    p->bytes = p->bytes + add - sub;
}

static uint64_t value_cost(const struct v2_node *n)
{
  return n->value != NULL ? mu_alloc_size((size_t)n->value_len + 1) : 0;
}

struct v2_node *v2_store_lookup(const struct v2_store *s, const char *key)
{
  return lookup_n(s, key, strlen(key));
}

/* Replaces `n`'s value with a NUL-terminated copy of `value` (`vlen` bytes; the copy is made
 * before the old value is freed). */
static void node_set_value(struct v2_node *n, const char *value, size_t vlen)
{
  char *nv = mu_malloc(vlen + 1);
  uint64_t old = value_cost(n);
  memcpy(nv, value, vlen);
  nv[vlen] = '\0';
  mu_free(n->value);
  n->value = nv;
  n->value_len = (uint32_t)vlen;
  bytes_add(n, value_cost(n), old);
}

static struct v2_node *node_new(struct v2_store *s, const char *key, size_t klen,
                                struct v2_node *parent, int dir, const char *value, size_t vlen,
                                uint64_t index, int64_t expire_ns)
{
  if (s->dead > 0) {
    /* a dead node with this key (lookups skip it) leaves the table to the new one */
    struct mu_hnode *h = mu_htab_find(&s->nodes, key, klen);
    if (h != NULL)
      table_del_dead(s, MU_CONTAINER_OF(h, struct v2_node, hn));
  }
  struct v2_node *n = mu_calloc(1, sizeof(*n));
  char *nkey = mu_strndup(key, klen);
  n->is_dir = dir != 0;
  n->size = 1;
  n->bytes = mu_alloc_size(sizeof(*n)) + mu_alloc_size(klen + 1);
  n->in_table = 1;
  if (!dir)
    node_set_value(n, value, vlen);
  n->created_index = n->modified_index = index;
  n->expire_ns = expire_ns;
  n->parent = parent;
  if (parent != NULL) {
    if (parent->nchildren == parent->children_cap) {
      parent->children_cap = parent->children_cap ? parent->children_cap * 2 : 4;
      parent->children =
          mu_realloc(parent->children, parent->children_cap * sizeof(*parent->children));
    }
    n->idx_in_parent = parent->nchildren;
    parent->children[parent->nchildren++] = n;
    size_add(parent, 1, 0);
    bytes_add(parent, n->bytes, 0);
  }
  mu_htab_add(&s->nodes, &n->hn, nkey, klen);
  if (expire_ns != 0)
    v2_ttl_push(&s->ttl, n);
  return n;
}

static void detach_from_parent(struct v2_node *n)
{
  struct v2_node *p = n->parent;
  if (p == NULL)
    return;
  uint32_t i = n->idx_in_parent;
  size_add(p, 0, n->size);
  bytes_add(p, 0, n->bytes);
  p->nchildren--;
  if (i != p->nchildren) {
    p->children[i] = p->children[p->nchildren];
    p->children[i]->idx_in_parent = i;
  }
  n->parent = NULL;
}

/* Removes a subtree from the table, the heap and its parent, calling the deleted-watchers
 * callback for every node (children first, as etcd's node.Remove does), then frees it. */
static void free_subtree(struct v2_store *s, struct v2_node *n, const struct v2_event *e)
{
  while (n->nchildren > 0)
    free_subtree(s, n->children[n->nchildren - 1], e);
  detach_from_parent(n);
  mu_htab_del(&s->nodes, &n->hn);
  v2_ttl_remove(&s->ttl, n);
  if (e != NULL)
    v2_watch_hub_notify_deleted(&s->hub, e, n->hn.key);
  mu_free(n->children);
  mu_free(n->hn.key);
  mu_free(n->value);
  mu_free(n);
}

/* ---------------------------------------------------------------------------------------------
 * Lifecycle
 */

static void on_ttl_due(void *data)
{
  struct v2_store *s = data;
  if (s->walks > 0) {
    /* an expiration is a write: not while a GET in slices reads the tree */
    s->ttl_deferred = 1;
    return;
  }
  v2_store_expire(s, v2_now_ns());
  v2_ttl_arm(&s->ttl);
}

struct v2_store *v2_store_new(uv_loop_t *loop)
{
  struct v2_store *s = mu_calloc(1, sizeof(*s));
  mu_htab_init(&s->nodes, 1024);
  v2_event_history_init(&s->history, V2_EVENT_HISTORY_SIZE);
  v2_watch_hub_init(&s->hub);
  v2_ttl_init(&s->ttl, loop, on_ttl_due, s);
  if (loop != NULL) {
    s->reaper = mu_malloc(sizeof(*s->reaper));
    uv_idle_init(loop, s->reaper);
    s->reaper->data = s;
  }
  s->root = node_new(s, "/", 1, NULL, 1, NULL, 0, 0, 0);
  return s;
}

struct store_closing {
  struct v2_store *s;
  void (*done)(void *);
  void *data;
};

static void store_free_mem(void *data)
{
  struct store_closing *c = data;
  void (*done)(void *) = c->done;
  void *d = c->data;
  mu_free(c->s);
  mu_free(c);
  if (done != NULL)
    done(d);
}

static int reap(struct v2_store *s, uint64_t until_ns);

static void reaper_closed(uv_handle_t *h)
{
  struct store_closing *c = h->data;
  mu_free(h);
  v2_ttl_release(&c->s->ttl, store_free_mem, c);
}

void v2_store_free(struct v2_store *s)
{
  v2_store_close(s, NULL, NULL);
}

void v2_store_close(struct v2_store *s, void (*done)(void *), void *data)
{
  if (s == NULL) {
    if (done != NULL)
      done(data);
    return;
  }
  /* no watcher or heap work while tearing down */
  v2_watch_hub_release(&s->hub);
  s->hub.count = 0;
  mu_heap_release(&s->ttl.heap); /* the nodes go below: removing them from it is a no-op */
  reap(s, UINT64_MAX);
  mu_free(s->graves);
  s->graves = NULL;
  if (s->root != NULL) {
    struct v2_node *root = s->root;
    s->root = NULL;
    free_subtree(s, root, NULL);
  }
  v2_event_history_release(&s->history);
  mu_htab_release(&s->nodes);
  struct store_closing *c = mu_malloc(sizeof(*c));
  c->s = s;
  c->done = done;
  c->data = data;
  if (s->reaper != NULL) {
    s->reaper->data = c;
    uv_close((uv_handle_t *)s->reaper, reaper_closed);
    s->reaper = NULL;
    return;
  }
  v2_ttl_release(&s->ttl, store_free_mem, c);
}

/* ---------------------------------------------------------------------------------------------
 * Walks
 */

/* internalGet: the node at `key`, or 100 (cause: first missing component) / 104 (cause: the
 * file in the way). */
struct v2_node *v2_store_internal_get(struct v2_store *s, const char *key, struct v2_err *err)
{
  size_t n = strlen(key);
  struct v2_node *x = lookup_n(s, key, n);
  if (x != NULL)
    return x;
  /* find out why, component by component */
  struct v2_node *parent = s->root;
  for (size_t i = 1; i <= n; i++) {
    if (i != n && key[i] != '/')
      continue;
    if (!parent->is_dir) {
      set_err(err, 104, parent->hn.key, s->index);
      return NULL;
    }
    x = lookup_n(s, key, i);
    if (x == NULL) {
      set_errn(err, 100, key, i, s->index);
      return NULL;
    }
    parent = x;
  }
  set_err(err, 100, key, s->index);
  return NULL;
}

/* walk(dirName, checkDir): the parent dir of `key`, creating missing dirs with createdIndex
 * `index`. A file in the way is 104 (measured against etcd 3.4.23). */
static struct v2_node *walk_create(struct v2_store *s, const char *key, size_t dlen, uint64_t index,
                                   struct v2_err *err)
{
  struct v2_node *parent = s->root;
  if (dlen > 1) {
    /* usually the dir exists: one lookup instead of one per path segment */
    struct v2_node *d = lookup_n(s, key, dlen);
    if (d != NULL && d->is_dir)
      return d;
  }
  for (size_t i = 1; i <= dlen; i++) {
    if (i != dlen && key[i] != '/')
      continue;
    if (i == 1 && dlen <= 1)
      break;
    struct v2_node *x = lookup_n(s, key, i);
    if (x == NULL) {
      x = node_new(s, key, i, parent, 1, NULL, 0, index, 0);
    } else if (!x->is_dir) {
      set_err(err, 104, x->hn.key, s->index);
      return NULL;
    }
    parent = x;
  }
  return parent;
}

/* ---------------------------------------------------------------------------------------------
 * Writes
 */

static void commit(struct v2_store *s, struct v2_event *e, int refresh)
{
  s->index = e->index;
  if (refresh)
    e->refresh = 1;
  v2_event_history_add(&s->history, e);
  if (s->on_commit != NULL)
    s->on_commit(s->on_commit_data, e); /* logged before any watcher or reply sees it */
  if (!refresh)
    v2_watch_hub_notify(&s->hub, e);
}

static int64_t fix_expire(int64_t expire_ns)
{
  if (expire_ns != 0 && expire_ns < MIN_EXPIRE_NS)
    return 0;
  return expire_ns;
}

static void set_ttl(struct v2_store *s, struct v2_node *n, int64_t expire_ns)
{
  n->expire_ns = expire_ns;
  if (expire_ns == 0)
    v2_ttl_remove(&s->ttl, n);
  else
    v2_ttl_push(&s->ttl, n);
}

const char *v2_store_event_json(struct v2_store *s, const struct v2_event *ce, size_t *len)
{
  /* the text is a cache of the event (event.h): filling it in does not change what it says */
  struct v2_event *e = (struct v2_event *)ce;
  if (e->json == NULL) {
    size_t before = v2_event_bytes(e);
    v2_json_event_render(e);
    v2_event_history_resized(&s->history, e, before);
  }
  *len = e->json_len;
  return e->json;
}

/* Makes `n` (about to be rewritten or removed) `e`'s prevNode, handing its value over to the event
 * instead of copying it: a 4 MiB value was copied, then freed. `n` is left without a value (the
 * write gives it its new one). */
static void event_prev(struct v2_event *e, struct v2_node *n)
{
  char *v = n->value;
  uint64_t cost = value_cost(n);
  bytes_add(n, 0, cost);
  n->value = NULL;
  v2_json_event_prev(e, n, v);
  n->value_len = 0;
}

/* internalCreate */
static const struct v2_event *internal_create(struct v2_store *s, const char *key_in, int dir,
                                              const char *value, size_t vlen, int unique,
                                              int replace, int64_t expire_ns,
                                              enum v2_event_action action, int refresh,
                                              struct v2_err *err)
{
  uint64_t cur = s->index, next = cur + 1;
  char *ukey = NULL;
  const char *key = key_in;
  if (unique) {
    char *tmp = mu_asprintf("%s/%020llu", key_in, (unsigned long long)next);
    ukey = v2_store_clean_key(tmp, strlen(tmp));
    mu_free(tmp);
    key = ukey;
  }
  const struct v2_event *out = NULL;
  size_t klen = strlen(key);
  if (klen == 1) {
    set_err(err, 107, "/", cur);
    goto out;
  }
  expire_ns = fix_expire(expire_ns);
  const char *slash = strrchr(key, '/');
  size_t dlen = (size_t)(slash - key);
  struct v2_node *d = walk_create(s, key, dlen == 0 ? 1 : dlen, next, err);
  if (d == NULL) {
    s->stats.set_fail++;
    goto out;
  }
  struct v2_node *n = lookup_n(s, key, klen);
  int64_t now = v2_now_ns();
  if (n != NULL) {
    if (!replace) {
      set_err(err, 105, key, cur);
      goto out;
    }
    if (n->is_dir) {
      set_err(err, 102, key, cur);
      goto out;
    }
  }
  struct v2_event *e = v2_json_event_new(action, key, klen, next, now);
  v2_json_event_node(e, dir ? NULL : value, vlen, dir, expire_ns, next, next);
  if (n != NULL) {
    /* the replaced node becomes prevNode; then the node is rewritten in place */
    event_prev(e, n); /* which leaves `n` without a value */
    if (dir) {
      n->is_dir = 1;
    } else {
      node_set_value(n, value, vlen);
    }
    n->created_index = n->modified_index = next;
    set_ttl(s, n, expire_ns);
  } else {
    n = node_new(s, key, klen, d, dir, value, vlen, next, expire_ns);
    e->created = 1;
  }
  e->node_dir = dir != 0;
  if (action == V2_EV_CREATE)
    e->created = 1;
  commit(s, e, refresh);
  out = e;
out:
  mu_free(ukey);
  return out;
}

const struct v2_event *v2_store_set(struct v2_store *s, const struct v2_write *w,
                                    struct v2_err *err)
{
  struct v2_err gerr = {0, NULL, 0};
  struct v2_node *n = v2_store_internal_get(s, w->key, &gerr);
  const char *value = w->value ? w->value : "";
  size_t vlen = w->value ? w->value_len : 0;
  const struct v2_event *e = NULL;
  if (n == NULL && gerr.code != 100) {
    set_err(err, gerr.code, gerr.cause, gerr.index);
    s->stats.set_fail++;
    goto out;
  }
  if (w->refresh) {
    if (n == NULL) {
      set_err(err, gerr.code, gerr.cause, gerr.index);
      s->stats.set_fail++;
      goto out;
    }
    /* a dir has no value; etcd's node.Value is "" there */
    value = n->value ? n->value : "";
    vlen = n->value ? n->value_len : 0;
  }
  /* a refresh's value is n->value, which is rewritten in place: a copy of every byte (a c10d
   * value holds NULs); any other value is the caller's (a 4 MiB TCPStore SET is not copied) */
  char *vcopy = NULL;
  if (w->refresh) {
    vcopy = mu_malloc(vlen + 1);
    memcpy(vcopy, value, vlen);
    vcopy[vlen] = '\0';
    value = vcopy;
  }
  e = internal_create(s, w->key, w->dir, value, vlen, 0, 1, w->expire_ns, V2_EV_SET, w->refresh,
                      err);
  mu_free(vcopy);
  if (e != NULL)
    s->stats.set_success++;
  else
    s->stats.set_fail++;
out:
  v2_err_release(&gerr);
  return e;
}

const struct v2_event *v2_store_create(struct v2_store *s, const struct v2_write *w, int unique,
                                       struct v2_err *err)
{
  const struct v2_event *e =
      internal_create(s, w->key, w->dir, w->value ? w->value : "", w->value ? w->value_len : 0,
                      unique, 0, w->expire_ns, V2_EV_CREATE, 0, err);
  if (e != NULL)
    s->stats.create_success++;
  else
    s->stats.create_fail++;
  return e;
}

const struct v2_event *v2_store_update(struct v2_store *s, const struct v2_write *w,
                                       struct v2_err *err)
{
  uint64_t cur = s->index, next = cur + 1;
  if (strcmp(w->key, "/") == 0) {
    set_err(err, 107, "/", cur);
    s->stats.update_fail++;
    return NULL;
  }
  struct v2_node *n = v2_store_internal_get(s, w->key, err);
  if (n == NULL) {
    s->stats.update_fail++;
    return NULL;
  }
  const char *value = w->value ? w->value : "";
  size_t vlen = w->value ? w->value_len : 0;
  if (n->is_dir && vlen != 0) {
    set_err(err, 102, w->key, cur);
    s->stats.update_fail++;
    return NULL;
  }
  if (w->refresh) {
    value = n->value ? n->value : "";
    vlen = n->value ? n->value_len : 0;
  }
  int64_t now = v2_now_ns();
  int64_t expire_ns = fix_expire(w->expire_ns);
  size_t klen = strlen(w->key);
  struct v2_event *e = v2_json_event_new(V2_EV_UPDATE, w->key, klen, next, now);
  v2_json_event_node(e, n->is_dir ? NULL : value, vlen, n->is_dir, expire_ns, next,
                     n->created_index);
  event_prev(e, n);
  if (!n->is_dir) {
    /* node.Write: a dir's modifiedIndex is not touched (etcd ignores Write's error there) */
    node_set_value(n, value, vlen);
    n->modified_index = next;
  }
  set_ttl(s, n, expire_ns);
  e->node_dir = n->is_dir;
  commit(s, e, w->refresh);
  s->stats.update_success++;
  return e;
}

static int compare(const struct v2_node *n, const char *prev_value, uint64_t prev_index,
                   struct v2_err *err, uint64_t index)
{
  int index_match = prev_index == 0 || n->modified_index == prev_index;
  int value_match = prev_value == NULL || prev_value[0] == '\0' ||
                    (strlen(prev_value) == n->value_len && strcmp(n->value, prev_value) == 0);
  if (index_match && value_match)
    return 1;
  char *cause = NULL;
  if (index_match)
    cause = mu_asprintf("[%s != %s]", prev_value, n->value);
  else if (value_match)
    cause = mu_asprintf("[%llu != %llu]", (unsigned long long)prev_index,
                        (unsigned long long)n->modified_index);
  else
    cause = mu_asprintf("[%s != %s] [%llu != %llu]", prev_value ? prev_value : "", n->value,
                        (unsigned long long)prev_index, (unsigned long long)n->modified_index);
  mu_free(err->cause);
  err->code = 101;
  err->cause = cause;
  err->index = index;
  return 0;
}

const struct v2_event *v2_store_cas(struct v2_store *s, const struct v2_write *w,
                                    struct v2_err *err)
{
  if (strcmp(w->key, "/") == 0) {
    set_err(err, 107, "/", s->index);
    s->stats.cas_fail++;
    return NULL;
  }
  struct v2_node *n = v2_store_internal_get(s, w->key, err);
  if (n == NULL) {
    s->stats.cas_fail++;
    return NULL;
  }
  if (n->is_dir) {
    set_err(err, 102, w->key, s->index);
    s->stats.cas_fail++;
    return NULL;
  }
  if (!compare(n, w->prev_value, w->prev_index, err, s->index)) {
    s->stats.cas_fail++;
    return NULL;
  }
  const char *value = w->value ? w->value : "";
  size_t vlen = w->value ? w->value_len : 0;
  if (w->refresh) {
    value = n->value;
    vlen = n->value_len;
  }
  uint64_t next = s->index + 1;
  int64_t now = v2_now_ns();
  int64_t expire_ns = fix_expire(w->expire_ns);
  size_t klen = strlen(w->key);
  struct v2_event *e = v2_json_event_new(V2_EV_CAS, w->key, klen, next, now);
  v2_json_event_node(e, value, vlen, 0, expire_ns, next, n->created_index);
  event_prev(e, n);
  node_set_value(n, value, vlen);
  n->modified_index = next;
  set_ttl(s, n, expire_ns);
  commit(s, e, w->refresh);
  s->stats.cas_success++;
  return e;
}

/* The delete-like events (delete, compareAndDelete, expire): node without value, prevNode. */
static struct v2_event *removal_event(struct v2_store *s, enum v2_event_action a, struct v2_node *n,
                                      uint64_t index)
{
  struct v2_event *e = v2_json_event_new(a, n->hn.key, n->hn.len, index, v2_now_ns());
  v2_json_event_node(e, NULL, 0, n->is_dir, 0, index, n->created_index);
  event_prev(e, n);
  e->node_dir = n->is_dir;
  if (n->is_dir)
    e->prev_key = mu_strndup(n->hn.key, n->hn.len);
  (void)s;
  return e;
}

/* A deleted subtree larger than this is freed in slices after the write (see free_later()). */
#define FREE_AT_ONCE 1024
#define REAP_NS 1000000ULL /* 1 ms of freeing per loop iteration */

/* The watchers of every node of a deleted subtree get the event (etcd's node.Remove calls
 * notifyWatchers(e, path, true) for each, children first): by walking the subtree... */
static void notify_deleted_tree(struct v2_store *s, struct v2_node *n, const struct v2_event *e)
{
  for (uint32_t i = n->nchildren; i-- > 0;)
    notify_deleted_tree(s, n->children[i], e);
  v2_watch_hub_notify_deleted(&s->hub, e, n->hn.key);
}

static int cmp_longer_first(const void *a, const void *b)
{
  size_t x = strlen(*(char *const *)a), y = strlen(*(char *const *)b);
  return x < y ? 1 : x > y ? -1 : 0;
}

/* ...or, when fewer paths are watched than the subtree holds, by looking at each watched path
 * (deepest first: a node's children before it). */
static void notify_deleted_watched(struct v2_store *s, struct v2_node *n, const struct v2_event *e)
{
  struct mu_htab *lists = &s->hub.lists;
  char **paths = mu_malloc((lists->n + 1) * sizeof(*paths));
  size_t k = 0;
  for (struct mu_hnode *h = mu_htab_next(lists, NULL); h != NULL; h = mu_htab_next(lists, h)) {
    if (h->len < n->hn.len || memcmp(h->key, n->hn.key, n->hn.len) != 0 ||
        (h->len > n->hn.len && h->key[n->hn.len] != '/') || lookup_n(s, h->key, h->len) == NULL)
      continue;
    paths[k++] = mu_strndup(h->key, h->len); /* a callback may drop the list: copy first */
  }
  qsort(paths, k, sizeof(*paths), cmp_longer_first);
  for (size_t i = 0; i < k; i++) {
    v2_watch_hub_notify_deleted(&s->hub, e, paths[i]);
    mu_free(paths[i]);
  }
  mu_free(paths);
}

/* Frees one node of a deleted subtree (its children are gone). */
static void free_dead_node(struct v2_store *s, struct v2_node *x)
{
  table_del_dead(s, x);
  v2_ttl_remove(&s->ttl, x);
  mu_free(x->children);
  mu_free(x->hn.key);
  mu_free(x->value);
  mu_free(x);
}

/* Frees the deleted subtrees, deepest last child first, until uv_hrtime() passes `until_ns`
 * (checked every 256 nodes). Returns: 1 when none is left. */
static int reap(struct v2_store *s, uint64_t until_ns)
{
  unsigned k = 0;
  while (s->ngraves > 0) {
    struct v2_node *x = s->graves[s->ngraves - 1];
    while (x->nchildren > 0)
      x = x->children[x->nchildren - 1];
    if (x->parent != NULL)
      x->parent->nchildren--;
    else
      s->ngraves--; /* the subtree's root: the last of it */
    free_dead_node(s, x);
    if ((++k & 255) == 0 && uv_hrtime() >= until_ns)
      return 0;
  }
  return 1;
}

static void on_reap(uv_idle_t *h)
{
  struct v2_store *s = h->data;
  if (reap(s, uv_hrtime() + REAP_NS))
    uv_idle_stop(h);
}

/* A deleted subtree leaves the tree now (detached; lookups skip its nodes; nodes.n no longer
 * counts them) and is freed ~1 ms per loop iteration from the reaper, so that deleting a
 * million keys is one write that does not hold the loop. */
static void free_later(struct v2_store *s, struct v2_node *n)
{
  detach_from_parent(n);
  n->dead = 1;
  s->dead += n->size;
  s->nodes.n -= n->size;
  if (s->ngraves == s->graves_cap) {
    s->graves_cap = s->graves_cap ? s->graves_cap * 2 : 4;
    s->graves = mu_realloc(s->graves, s->graves_cap * sizeof(*s->graves));
  }
  s->graves[s->ngraves++] = n;
  uv_idle_start(s->reaper, on_reap);
}

/* Removes `n` and its subtree as the delete-like event `a` at the next index and commits it:
 * one event, whatever the size; a big subtree is freed later (free_later()).
 * Returns: the event. */
static struct v2_event *remove_node(struct v2_store *s, enum v2_event_action a, struct v2_node *n)
{
  struct v2_event *e = removal_event(s, a, n, s->index + 1);
  if (n->size <= FREE_AT_ONCE || s->reaper == NULL) {
    free_subtree(s, n, e);
  } else {
    if (s->hub.count > 0 && s->hub.lists.n < n->size)
      notify_deleted_watched(s, n, e);
    else if (s->hub.count > 0)
      notify_deleted_tree(s, n, e);
    free_later(s, n);
  }
  commit(s, e, 0);
  return e;
}

const struct v2_event *v2_store_delete(struct v2_store *s, const char *key, int dir, int recursive,
                                       struct v2_err *err)
{
  if (strcmp(key, "/") == 0) {
    set_err(err, 107, "/", s->index);
    s->stats.delete_fail++;
    return NULL;
  }
  if (recursive)
    dir = 1;
  struct v2_node *n = v2_store_internal_get(s, key, err);
  if (n == NULL) {
    s->stats.delete_fail++;
    return NULL;
  }
  if (n->is_dir && !dir) {
    set_err(err, 102, n->hn.key, s->index);
    s->stats.delete_fail++;
    return NULL;
  }
  if (n->is_dir && n->nchildren > 0 && !recursive) {
    set_err(err, 108, n->hn.key, s->index);
    s->stats.delete_fail++;
    return NULL;
  }
  struct v2_event *e = remove_node(s, V2_EV_DELETE, n);
  s->stats.delete_success++;
  return e;
}

const struct v2_event *v2_store_cad(struct v2_store *s, const char *key, const char *prev_value,
                                    uint64_t prev_index, struct v2_err *err)
{
  struct v2_node *n = v2_store_internal_get(s, key, err);
  if (n == NULL) {
    s->stats.cad_fail++;
    return NULL;
  }
  if (n->is_dir) {
    /* etcd's cause is the store path with its "/1" prefix trimmed: "" for the root */
    set_err(err, 102, strcmp(key, "/") == 0 ? NULL : key, s->index);
    s->stats.cad_fail++;
    return NULL;
  }
  if (!compare(n, prev_value, prev_index, err, s->index)) {
    s->stats.cad_fail++;
    return NULL;
  }
  struct v2_event *e = remove_node(s, V2_EV_CAD, n);
  s->stats.cad_success++;
  return e;
}

size_t v2_store_expire(struct v2_store *s, int64_t now_ns)
{
  size_t count = 0;
  for (;;) {
    struct v2_node *n = v2_ttl_top(&s->ttl);
    if (n == NULL || n->expire_ns > now_ns)
      break;
    if (is_dead(s, n)) {
      v2_ttl_remove(&s->ttl, n); /* deleted already: the reaper frees it */
      continue;
    }
    remove_node(s, V2_EV_EXPIRE, n);
    s->stats.expire_count++;
    count++;
  }
  return count;
}

int v2_store_restore_node(struct v2_store *s, const char *key, int dir, const char *value,
                          size_t vlen, uint64_t created_index, uint64_t modified_index,
                          int64_t expire_ns)
{
  size_t klen = strlen(key);
  if (klen < 2 || key[0] != '/' || lookup_n(s, key, klen) != NULL)
    return MU_EEXIST;
  const char *slash = strrchr(key, '/');
  size_t dlen = (size_t)(slash - key);
  struct v2_node *parent = dlen == 0 ? s->root : lookup_n(s, key, dlen);
  if (parent == NULL || !parent->is_dir)
    return MU_ENOENT;
  struct v2_node *n = node_new(s, key, klen, parent, dir, value ? value : "", dir ? 0 : vlen,
                               created_index, fix_expire(expire_ns));
  n->modified_index = modified_index;
  return 0;
}

const struct v2_event *v2_store_expire_key(struct v2_store *s, const char *key)
{
  struct v2_node *n = lookup_n(s, key, strlen(key));
  if (n == NULL || n == s->root)
    return NULL;
  struct v2_event *e = remove_node(s, V2_EV_EXPIRE, n);
  s->stats.expire_count++;
  return e;
}

/* ---------------------------------------------------------------------------------------------
 * Reads and watches
 */

int v2_store_get(struct v2_store *s, const char *key, int recursive, int sorted, struct mu_buf *out,
                 struct v2_err *err)
{
  struct v2_walk *w = v2_store_walk_new(s, key, recursive, sorted, err);
  if (w == NULL)
    return MU_ENOENT;
  v2_store_walk_step(w, out, UINT64_MAX, SIZE_MAX);
  v2_store_walk_free(w, 1);
  return 0;
}

int v2_store_watch(struct v2_store *s, const char *key, int recursive, int stream, uint64_t since,
                   v2_watch_cb *cb, void *data, const struct v2_event **found,
                   struct v2_watcher **w, struct v2_err *err)
{
  return v2_store_watch_accept(s, key, recursive, stream, since, NULL, NULL, cb, data, found, w,
                               err);
}

int v2_store_watch_accept(struct v2_store *s, const char *key, int recursive, int stream,
                          uint64_t since, v2_event_accept_fn *accept, void *accept_data,
                          v2_watch_cb *cb, void *data, const struct v2_event **found,
                          struct v2_watcher **w, struct v2_err *err)
{
  *found = NULL;
  *w = NULL;
  if (since == 0)
    since = s->index + 1;
  uint64_t start = 0;
  if (v2_event_history_scan_accept(&s->history, key, recursive, since, accept, accept_data, found,
                                   &start) != 0) {
    char *cause = mu_asprintf("the requested history has been cleared [%llu/%llu]",
                              (unsigned long long)start, (unsigned long long)since);
    mu_free(err->cause);
    err->code = 401;
    err->cause = cause;
    err->index = s->index;
    return MU_ENOENT;
  }
  if (*found == NULL || stream) {
    *w = v2_watch_hub_add(&s->hub, key, recursive, stream, since, cb, data);
    if (accept != NULL)
      v2_watcher_accept(*w, accept, accept_data);
    s->stats.watchers_total++;
  }
  return 0;
}
