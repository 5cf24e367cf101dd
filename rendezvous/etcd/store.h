/* The etcd v2 key tree (v2store/store.go + node.go): nodes, the global index, and the
 * operations get/set/create/update/compareAndSwap/delete/compareAndDelete, with TTLs, the
 * event history and watchers. Everything is synchronous and in memory; the only loop use is
 * the TTL timer (optional: without a loop, call v2_store_expire()).
 *
 * Keys are clean absolute paths ("/a/b"); callers pass them through v2_store_clean_key().
 * Errors come back as a struct v2_err (etcd error code + cause + index), rendered by
 * v2_error.c.
 */
#ifndef MUSTERD_ETCD_STORE_H
#define MUSTERD_ETCD_STORE_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "buf.h"
#include "event.h"
#include "event_history.h"
#include "htab.h"
#include "ttl.h"
#include "watch_hub.h"

struct v2_walk;

struct v2_node {
  struct mu_hnode hn; /* in the store's table: hn.key is the full path ("/" for the root, owned),
                       * hn.len its length */
  uint32_t value_len;
  uint32_t nchildren, children_cap;
  uint32_t idx_in_parent;
  char *value; /* NULL for a dir */
  uint64_t created_index;
  uint64_t modified_index;
  int64_t expire_ns; /* 0 = permanent */
  struct v2_node *parent;
  struct v2_node **children; /* dirs only, in insertion order (swap-removed) */
  struct mu_heap_node ttl;   /* in the TTL heap while expire_ns != 0 */
  unsigned char is_dir;
  unsigned char dead;     /* the root of a deleted subtree that is being freed in slices */
  unsigned char in_table; /* in the store's table (a dead node leaves it when freed or when a
                           * new node takes its key) */
  uint32_t size;          /* nodes in this subtree, itself included */
  uint64_t bytes;         /* what this subtree's nodes hold (each node, its key, its value), as the
                           * allocator sizes them: a bound on a subtree's memory reads it in O(1) */
};

/* An etcd v2 error: code (100 "Key not found", ...), cause, and the index to report. */
struct v2_err {
  int code;
  char *cause; /* owned; NULL = no cause */
  uint64_t index;
};

void v2_err_release(struct v2_err *e);

struct v2_store_stats {
  uint64_t get_success, get_fail;
  uint64_t set_success, set_fail;
  uint64_t delete_success, delete_fail;
  uint64_t update_success, update_fail;
  uint64_t create_success, create_fail;
  uint64_t cas_success, cas_fail;
  uint64_t cad_success, cad_fail;
  uint64_t expire_count;
  uint64_t watchers_total;
};

struct v2_store {
  struct v2_node *root;
  struct mu_htab nodes;    /* every node by full key; nodes.n counts the live ones, the root
                            * included (a deleted subtree being freed is in the table until then,
                            * but not in nodes.n: see free_later() in store.c) */
  size_t dead;             /* nodes of deleted subtrees still in the table: lookups skip them */
  struct v2_node **graves; /* deleted subtrees (detached) being freed in slices */
  size_t ngraves, graves_cap;
  uv_idle_t *reaper; /* frees them, ~1 ms per loop iteration; NULL without a loop */
  uint64_t index;
  struct v2_event_history history;
  struct v2_watch_hub hub;
  struct v2_ttl ttl;
  struct v2_store_stats stats;
  int walks;        /* GETs in slices reading the tree (struct v2_walk): no write meanwhile */
  int ttl_deferred; /* an expiration came due during a walk: run it when the last one ends */
  /* Called after every successful write (refreshes and expirations included), once the tree,
   * the index and the history hold it: persist.c logs the write there. NULL = none. */
  void (*on_commit)(void *data, const struct v2_event *e);
  void *on_commit_data;
};

/* Options of a write (TTLOptionSet + the request flags the store needs). */
struct v2_write {
  const char *key;
  const char *value;
  size_t value_len;
  int dir;
  int64_t expire_ns; /* 0 = permanent */
  int refresh;
  const char *prev_value; /* NULL or "" = no value condition */
  uint64_t prev_index;    /* 0 = no index condition */
};

/* `loop` may be NULL (no TTL timer). Returns: the store. Free with v2_store_free(). */
struct v2_store *v2_store_new(uv_loop_t *loop);
/* Frees the store; its TTL timer is closed and the memory freed from its close callback when
 * there is a loop, so run the loop once more. Accepts NULL. Watchers are dropped silently. */
void v2_store_free(struct v2_store *s);
/* As v2_store_free(), then `done(data)` once the memory is freed (from the timer's close
 * callback, or at once without a loop). */
void v2_store_close(struct v2_store *s, void (*done)(void *), void *data);

/* Makes a clean absolute key (Go's path.Clean(path.Join("/", p))) from `p` of length n.
 * Returns: a new string; caller frees with mu_free(). */
char *v2_store_clean_key(const char *p, size_t n);

/* GET: renders the whole event JSON ({"action":"get","node":{...}}\n) into `out`.
 * Returns: 0, or MU_ENOENT with `err` filled. */
int v2_store_get(struct v2_store *s, const char *key, int recursive, int sorted, struct mu_buf *out,
                 struct v2_err *err);

/* A GET in slices, so that a huge tree does not hold the loop: v2_store_walk_new() finds the
 * node (or fails as v2_store_get() does), then each v2_store_walk_step() appends the next part
 * of the same JSON to `out`. The answer is the tree as of one index (v2_store_walk_index()):
 * from v2_store_walk_new() until the walk is complete or freed, s->walks > 0 and nothing may
 * write to the store (expirations wait by themselves; the API parks write requests).
 * Returns: a walk, or NULL with `err` filled. Free with v2_store_walk_free(w, 1). */
struct v2_walk *v2_store_walk_new(struct v2_store *s, const char *key, int recursive, int sorted,
                                  struct v2_err *err);
/* Appends to `out` until the JSON is complete, out->len passes `limit` (checked after every
 * node) or uv_hrtime() passes `until_ns` (every 64 nodes, and after each step of a big dir's
 * sort). Returns: 1 when the JSON is complete (the tree is writable again), 0 when there is
 * more (a caller whose `out` passed `limit` stops there: no more comes until it is smaller). */
int v2_store_walk_step(struct v2_walk *w, struct mu_buf *out, uint64_t until_ns, size_t limit);
/* Which nodes a listing shows (a credential's scopes): called with each child's path and
 * whether it is a dir; 0 hides it and everything under it. */
typedef int v2_visible_fn(void *data, const char *key, size_t len, int is_dir);
/* Lists only the children `fn` shows (call before the first step). Ownership: `data` is
 * borrowed for the walk's life. */
void v2_store_walk_filter(struct v2_walk *w, v2_visible_fn *fn, void *data);
/* Returns: the index the walk reads the tree at (X-Etcd-Index of its answer). */
uint64_t v2_store_walk_index(const struct v2_walk *w);
/* Ends the walk (the tree is writable again when it was the last); frees it when `free_it`. */
void v2_store_walk_free(struct v2_walk *w, int free_it);

/* The JSON of `e`, an event of `s` (a write's, a watch's, a history scan's; not yet dropped from
 * the history): {"action":..,"node":..,"prevNode":..}\n, rendered on the first call (the history
 * counts it from then on, and may drop older events for it). Returns: the text, NUL-terminated,
 * borrowed like the event; its length in *len. */
const char *v2_store_event_json(struct v2_store *s, const struct v2_event *e, size_t *len);

/* Renders `e`'s JSON from its source and drops the source (nothing when rendered), not counted in
 * any history: for a store no one serves (a snapshot's, written by its own thread); others call
 * v2_store_event_json(). */
void v2_json_event_render(struct v2_event *e);

/* The writes. Each returns the event (borrowed from the history: valid until the next write)
 * or NULL with `err` filled. They wake watchers before returning. */
const struct v2_event *v2_store_set(struct v2_store *s, const struct v2_write *w,
                                    struct v2_err *err);
const struct v2_event *v2_store_create(struct v2_store *s, const struct v2_write *w, int unique,
                                       struct v2_err *err);
const struct v2_event *v2_store_update(struct v2_store *s, const struct v2_write *w,
                                       struct v2_err *err);
const struct v2_event *v2_store_cas(struct v2_store *s, const struct v2_write *w,
                                    struct v2_err *err);
const struct v2_event *v2_store_delete(struct v2_store *s, const char *key, int dir, int recursive,
                                       struct v2_err *err);
const struct v2_event *v2_store_cad(struct v2_store *s, const char *key, const char *prev_value,
                                    uint64_t prev_index, struct v2_err *err);

/* A watch from `since` (0 = the next event). Returns: 0 with either *found (an event from the
 * history, borrowed) or *w (a new watcher: `cb` fires later) set; a stream watch may set
 * both; or MU_ENOENT with `err` filled (401: index cleared). */
int v2_store_watch(struct v2_store *s, const char *key, int recursive, int stream, uint64_t since,
                   v2_watch_cb *cb, void *data, const struct v2_event **found,
                   struct v2_watcher **w, struct v2_err *err);

/* v2_store_watch() that takes only the events `accept` (may be NULL) takes, from the history and
 * later (a credential's scopes). */
int v2_store_watch_accept(struct v2_store *s, const char *key, int recursive, int stream,
                          uint64_t since, v2_event_accept_fn *accept, void *accept_data,
                          v2_watch_cb *cb, void *data, const struct v2_event **found,
                          struct v2_watcher **w, struct v2_err *err);

/* Expires every node due at `now_ns`, emitting expire events. Returns: how many. */
size_t v2_store_expire(struct v2_store *s, int64_t now_ns);

/* Snapshot loading (persist.c): adds the node at clean key `key` (not "/") without an event or
 * an index change; its parent dir must exist. `value` is ignored for a dir.
 * Returns: 0, MU_EEXIST (the key exists) or MU_ENOENT (no parent dir). */
int v2_store_restore_node(struct v2_store *s, const char *key, int dir, const char *value,
                          size_t vlen, uint64_t created_index, uint64_t modified_index,
                          int64_t expire_ns);

/* Log replay (persist.c): expires the node at `key` now, as v2_store_expire() does when its
 * deadline passes (expire event, index + 1), whatever its deadline.
 * Returns: the event (borrowed, as the writes'), or NULL when there is no such node. */
const struct v2_event *v2_store_expire_key(struct v2_store *s, const char *key);

/* Returns: the node at `key` or NULL. Ownership: borrowed until the next write. */
struct v2_node *v2_store_lookup(const struct v2_store *s, const char *key);

#endif
