/* Unit tests of rendezvous/etcd/store.c: the etcd v2 semantics of etcd-v2.md §9, without sockets.
 */
#include <string.h>

#include "muster/errno.h"

#include "alloc.h"
#include "store.h"
#include "task.h"

static struct v2_write wr(const char *key, const char *value)
{
  struct v2_write w;
  memset(&w, 0, sizeof(w));
  w.key = key;
  w.value = value;
  w.value_len = value ? strlen(value) : 0;
  return w;
}

static int has(const char *json, const char *needle)
{
  return strstr(json, needle) != NULL;
}

/* The event's JSON (rendered on first read). */
static const char *ej(struct v2_store *s, const struct v2_event *e)
{
  size_t len;
  return v2_store_event_json(s, e, &len);
}

TEST(store__set_get_and_index)
{
  struct v2_store *s = v2_store_new(NULL);
  struct v2_err err = {0, NULL, 0};
  struct v2_write w = wr("/a", "1");
  const struct v2_event *e = v2_store_set(s, &w, &err);
  ASSERT_NOT_NULL(e);
  ASSERT_EQ(e->index, 1);
  ASSERT(e->created);
  ASSERT(has(ej(s, e), "\"action\":\"set\""));
  w = wr("/a", "2");
  e = v2_store_set(s, &w, &err);
  ASSERT_NOT_NULL(e);
  ASSERT(!e->created);
  /* a plain set replaces the node: createdIndex == modifiedIndex */
  ASSERT(has(ej(s, e), "\"node\":{\"key\":\"/a\",\"value\":\"2\",\"modifiedIndex\":2,"
                       "\"createdIndex\":2}"));
  ASSERT(has(ej(s, e), "\"prevNode\":{\"key\":\"/a\",\"value\":\"1\""));
  ASSERT_EQ(s->index, 2);
  struct mu_buf b = MU_BUF_INIT(4096);
  ASSERT_EQ(v2_store_get(s, "/a", 0, 0, &b, &err), 0);
  ASSERT_STR_EQ(b.data, "{\"action\":\"get\",\"node\":{\"key\":\"/a\",\"value\":\"2\","
                        "\"modifiedIndex\":2,\"createdIndex\":2}}\n");
  mu_buf_release(&b);
  v2_store_free(s);
}

TEST(store__missing_key_cause_is_first_missing_component)
{
  struct v2_store *s = v2_store_new(NULL);
  struct v2_err err = {0, NULL, 0};
  struct v2_write w = wr("/P/x", "1");
  ASSERT_NOT_NULL(v2_store_set(s, &w, &err));
  struct mu_buf b = MU_BUF_INIT(4096);
  ASSERT_EQ(v2_store_get(s, "/P/ed/child", 0, 0, &b, &err), MU_ENOENT);
  ASSERT_EQ(err.code, 100);
  ASSERT_STR_EQ(err.cause, "/P/ed");
  ASSERT_EQ(err.index, 1);
  /* through a file: 104 with the file as cause */
  ASSERT_EQ(v2_store_get(s, "/P/x/y", 0, 0, &b, &err), MU_ENOENT);
  ASSERT_EQ(err.code, 104);
  ASSERT_STR_EQ(err.cause, "/P/x");
  w = wr("/P/x/y", "1");
  ASSERT_NULL(v2_store_set(s, &w, &err));
  ASSERT_EQ(err.code, 104);
  v2_err_release(&err);
  mu_buf_release(&b);
  v2_store_free(s);
}

TEST(store__create_update_cas_errors)
{
  struct v2_store *s = v2_store_new(NULL);
  struct v2_err err = {0, NULL, 0};
  struct v2_write w = wr("/k", "a");
  ASSERT_NOT_NULL(v2_store_create(s, &w, 0, &err));
  ASSERT_NULL(v2_store_create(s, &w, 0, &err));
  ASSERT_EQ(err.code, 105);
  ASSERT_STR_EQ(err.cause, "/k");
  w = wr("/nokey", "a");
  ASSERT_NULL(v2_store_update(s, &w, &err));
  ASSERT_EQ(err.code, 100);
  w = wr("/k", "b");
  w.prev_value = "zzz";
  ASSERT_NULL(v2_store_cas(s, &w, &err));
  ASSERT_EQ(err.code, 101);
  ASSERT_STR_EQ(err.cause, "[zzz != a]");
  w.prev_value = NULL;
  w.prev_index = 7;
  ASSERT_NULL(v2_store_cas(s, &w, &err));
  ASSERT_STR_EQ(err.cause, "[7 != 1]");
  w.prev_index = 1;
  const struct v2_event *e = v2_store_cas(s, &w, &err);
  ASSERT_NOT_NULL(e);
  ASSERT_EQ(e->action, V2_EV_CAS);
  /* CAS keeps createdIndex */
  ASSERT(has(ej(s, e), "\"modifiedIndex\":2,\"createdIndex\":1"));
  w = wr("/", "x");
  ASSERT_NULL(v2_store_set(s, &w, &err));
  ASSERT_EQ(err.code, 107);
  v2_err_release(&err);
  v2_store_free(s);
}

TEST(store__dirs_and_listing)
{
  struct v2_store *s = v2_store_new(NULL);
  struct v2_err err = {0, NULL, 0};
  struct v2_write w = wr("/d/b", "2");
  ASSERT_NOT_NULL(v2_store_set(s, &w, &err));
  w = wr("/d/a", "1");
  ASSERT_NOT_NULL(v2_store_set(s, &w, &err));
  w = wr("/d/_h", "hidden");
  ASSERT_NOT_NULL(v2_store_set(s, &w, &err));
  w = wr("/d/sub/x", "3");
  ASSERT_NOT_NULL(v2_store_set(s, &w, &err));
  struct mu_buf b = MU_BUF_INIT(1 << 16);
  ASSERT_EQ(v2_store_get(s, "/d", 0, 1, &b, &err), 0);
  ASSERT(!has(b.data, "_h"));
  ASSERT(has(b.data, "{\"key\":\"/d/a\",\"value\":\"1\""));
  ASSERT(strstr(b.data, "/d/a") < strstr(b.data, "/d/b"));
  ASSERT(has(b.data, "{\"key\":\"/d/sub\",\"dir\":true,\"modifiedIndex\""));
  ASSERT(!has(b.data, "/d/sub/x"));
  mu_buf_clear(&b);
  ASSERT_EQ(v2_store_get(s, "/d", 1, 1, &b, &err), 0);
  ASSERT(has(b.data, "/d/sub/x"));
  mu_buf_clear(&b);
  ASSERT_EQ(v2_store_get(s, "/d/_h", 0, 0, &b, &err), 0);
  /* set a value on a dir, delete a dir without flags, non-empty dir */
  w = wr("/d", "v");
  ASSERT_NULL(v2_store_set(s, &w, &err));
  ASSERT_EQ(err.code, 102);
  ASSERT_NULL(v2_store_delete(s, "/d", 0, 0, &err));
  ASSERT_EQ(err.code, 102);
  ASSERT_NULL(v2_store_delete(s, "/d", 1, 0, &err));
  ASSERT_EQ(err.code, 108);
  const struct v2_event *e = v2_store_delete(s, "/d", 0, 1, &err);
  ASSERT_NOT_NULL(e);
  ASSERT(has(ej(s, e), "\"node\":{\"key\":\"/d\",\"dir\":true,"));
  ASSERT_NULL(v2_store_lookup(s, "/d/sub/x"));
  ASSERT_EQ(s->nodes.n, 1);
  /* empty dir: no nodes field */
  w = wr("/e", NULL);
  w.dir = 1;
  ASSERT_NOT_NULL(v2_store_set(s, &w, &err));
  mu_buf_clear(&b);
  ASSERT_EQ(v2_store_get(s, "/e", 0, 0, &b, &err), 0);
  ASSERT(!has(b.data, "nodes"));
  v2_err_release(&err);
  mu_buf_release(&b);
  v2_store_free(s);
}

TEST(store__in_order_keys)
{
  struct v2_store *s = v2_store_new(NULL);
  struct v2_err err = {0, NULL, 0};
  struct v2_write w = wr("/q", "job");
  const struct v2_event *e = v2_store_create(s, &w, 1, &err);
  ASSERT_NOT_NULL(e);
  ASSERT_STR_EQ(e->key, "/q/00000000000000000001");
  ASSERT(e->created);
  v2_store_free(s);
}

TEST(store__ttl_refresh_and_expire)
{
  struct v2_store *s = v2_store_new(NULL);
  struct v2_err err = {0, NULL, 0};
  int64_t now = v2_now_ns();
  struct v2_write w = wr("/t", "v");
  w.expire_ns = now + 5000000000LL;
  const struct v2_event *e = v2_store_set(s, &w, &err);
  ASSERT(has(ej(s, e), "\"ttl\":5"));
  ASSERT(has(ej(s, e), "\"expiration\":\""));
  /* refresh: update, value kept, index bumped, marked refresh */
  w = wr("/t", NULL);
  w.refresh = 1;
  w.expire_ns = now + 10000000000LL;
  e = v2_store_update(s, &w, &err);
  ASSERT_NOT_NULL(e);
  ASSERT(e->refresh);
  ASSERT(has(ej(s, e), "\"value\":\"v\""));
  ASSERT_EQ(s->index, 2);
  /* a write without ttl makes it permanent */
  w = wr("/t", "p");
  w.prev_value = "v";
  e = v2_store_cas(s, &w, &err);
  ASSERT_NOT_NULL(e);
  ASSERT(!has(ej(s, e) + e->json_head, "\"node\":{\"key\":\"/t\",\"value\":\"p\",\"expiration"));
  ASSERT_EQ(v2_ttl_top(&s->ttl), NULL);
  /* dir expiry: one expire event for the dir, children vanish */
  w = wr("/ed", NULL);
  w.dir = 1;
  w.expire_ns = now + 1000;
  ASSERT_NOT_NULL(v2_store_set(s, &w, &err));
  w = wr("/ed/child", "c");
  ASSERT_NOT_NULL(v2_store_set(s, &w, &err));
  ASSERT_EQ(v2_store_expire(s, now + 2000), 1);
  ASSERT_NULL(v2_store_lookup(s, "/ed/child"));
  ASSERT_EQ(s->stats.expire_count, 1);
  const struct v2_event *found = NULL;
  struct v2_watcher *wt = NULL;
  /* the expire is in history; a watch on the child from there finds it */
  ASSERT_EQ(v2_store_watch(s, "/ed/child", 0, 0, s->index, NULL, NULL, &found, &wt, &err), 0);
  ASSERT_NOT_NULL(found);
  ASSERT_EQ(found->action, V2_EV_EXPIRE);
  ASSERT(has(ej(s, found), "\"node\":{\"key\":\"/ed\",\"dir\":true,\"modifiedIndex\""));
  v2_store_free(s);
}

struct fired {
  int n;
  enum v2_event_action last;
  uint64_t index;
};

static void on_fire(void *data, const struct v2_event *e, struct v2_watcher *w)
{
  struct fired *f = data;
  (void)w;
  f->n++;
  f->last = e->action;
  f->index = e->index;
}

TEST(store__watchers)
{
  struct v2_store *s = v2_store_new(NULL);
  struct v2_err err = {0, NULL, 0};
  struct fired key = {0, 0, 0}, rec = {0, 0, 0}, dir = {0, 0, 0}, inner = {0, 0, 0};
  const struct v2_event *found = NULL;
  struct v2_watcher *w = NULL;
  ASSERT_EQ(v2_store_watch(s, "/r/k", 0, 0, 0, on_fire, &key, &found, &w, &err), 0);
  ASSERT_NULL(found);
  ASSERT_NOT_NULL(w);
  ASSERT_EQ(v2_store_watch(s, "/r", 1, 0, 0, on_fire, &rec, &found, &w, &err), 0);
  ASSERT_EQ(v2_store_watch(s, "/r", 0, 0, 0, on_fire, &dir, &found, &w, &err), 0);
  struct v2_write wv = wr("/r/k", "1");
  ASSERT_NOT_NULL(v2_store_set(s, &wv, &err));
  ASSERT_EQ(key.n, 1);
  ASSERT_EQ(rec.n, 1);
  ASSERT_EQ(dir.n, 0); /* a non-recursive dir watch ignores children */
  ASSERT_EQ(s->hub.count, 1);
  /* a hidden key does not wake a recursive watcher above it */
  ASSERT_EQ(v2_store_watch(s, "/r", 1, 0, 0, on_fire, &rec, &found, &w, &err), 0);
  wv = wr("/r/_h", "1");
  ASSERT_NOT_NULL(v2_store_set(s, &wv, &err));
  ASSERT_EQ(rec.n, 1);
  /* refresh wakes nobody and a scan skips it */
  ASSERT_EQ(v2_store_watch(s, "/r/k", 0, 0, 0, on_fire, &key, &found, &w, &err), 0);
  wv = wr("/r/k", NULL);
  wv.refresh = 1;
  wv.expire_ns = v2_now_ns() + 100000000000LL;
  ASSERT_NOT_NULL(v2_store_update(s, &wv, &err));
  ASSERT_EQ(key.n, 1);
  uint64_t ri = s->index;
  struct fired late = {0, 0, 0};
  ASSERT_EQ(v2_store_watch(s, "/r/k", 0, 0, ri, on_fire, &late, &found, &w, &err), 0);
  ASSERT_NULL(found);
  v2_watcher_remove(w);
  /* deleting the dir reaches the watcher of the key inside */
  ASSERT_EQ(v2_store_watch(s, "/r/k", 0, 0, 0, on_fire, &inner, &found, &w, &err), 0);
  v2_watcher_remove(w); /* drop the duplicate from above: one is enough */
  ASSERT_NOT_NULL(v2_store_delete(s, "/r", 0, 1, &err));
  ASSERT_EQ(key.n, 2);
  ASSERT_EQ(key.last, V2_EV_DELETE);
  ASSERT_EQ(rec.n, 2);
  ASSERT_EQ(dir.n, 1);
  ASSERT_EQ(s->hub.count, 0);
  v2_store_free(s);
}

TEST(store__history_cleared_after_1000)
{
  struct v2_store *s = v2_store_new(NULL);
  struct v2_err err = {0, NULL, 0};
  for (int i = 0; i < 1100; i++) {
    struct v2_write w = wr("/c", "x");
    ASSERT_NOT_NULL(v2_store_set(s, &w, &err));
  }
  const struct v2_event *found = NULL;
  struct v2_watcher *w = NULL;
  ASSERT_EQ(v2_store_watch(s, "/c", 0, 0, 50, NULL, NULL, &found, &w, &err), MU_ENOENT);
  ASSERT_EQ(err.code, 401);
  ASSERT_STR_EQ(err.cause, "the requested history has been cleared [101/50]");
  ASSERT_EQ(err.index, 1100);
  ASSERT_EQ(v2_store_watch(s, "/c", 0, 0, 200, NULL, NULL, &found, &w, &err), 0);
  ASSERT_EQ(found->index, 200);
  v2_err_release(&err);
  v2_store_free(s);
}

TEST(store__clean_key)
{
  char *k = v2_store_clean_key("/a//b/../c/", 11);
  ASSERT_STR_EQ(k, "/a/c");
  mu_free(k);
  k = v2_store_clean_key("", 0);
  ASSERT_STR_EQ(k, "/");
  mu_free(k);
}

TEST(event_history__byte_cap_evicts_early)
{
  struct v2_event_history h;
  v2_event_history_init(&h, 10);
  h.max_bytes = 100;
  for (int i = 1; i <= 5; i++) {
    struct v2_event *e = mu_calloc(1, sizeof(*e));
    e->index = (uint64_t)i;
    e->key = mu_strdup("/k");
    e->key_len = 2;
    e->json = mu_strdup("x");
    e->json_len = 40;
    v2_event_history_add(&h, e);
  }
  /* 40-byte events under a 100-byte cap: two are kept */
  ASSERT_EQ(h.count, 2);
  ASSERT_EQ(h.start_index, 4);
  const struct v2_event *found = NULL;
  uint64_t start = 0;
  ASSERT_EQ(v2_event_history_scan(&h, "/k", 0, 3, &found, &start), MU_ENOENT);
  ASSERT_EQ(start, 4);
  ASSERT_EQ(v2_event_history_scan(&h, "/k", 0, 4, &found, &start), 0);
  ASSERT_EQ(found->index, 4);
  v2_event_history_release(&h);
}

static size_t history_bytes(const struct v2_event_history *h)
{
  size_t sum = 0;
  for (unsigned i = 0; i < h->count; i++)
    sum += v2_event_bytes(h->ring[(h->front + i) % h->cap]);
  return sum;
}

/* Issue 33: a TCPStore SET of a big binary value is not escaped at the write (escaping 4 MiB and
 * the value it replaced was ~0.3 s of the loop, for an event no one read); the event holds the
 * raw values until read, the history counts what it holds, and rendering it counts it anew
 * (dropping older events past the cap, never the one rendered). */
TEST(store__big_binary_set_is_rendered_only_when_read)
{
  struct v2_store *s = v2_store_new(NULL);
  struct v2_err err = {0, NULL, 0};
  size_t n = (size_t)1 << 20;
  char *v = mu_malloc(n);
  for (size_t i = 0; i < n; i++)
    v[i] = (char)(i & 31); /* control bytes: most escape to \u00XX */
  struct v2_write w = {"/_c10d/r/k", v, n, 0, 0, 0, NULL, 0};
  ASSERT_NOT_NULL(v2_store_set(s, &w, &err));
  v[0] = 'x';
  const struct v2_event *e = v2_store_set(s, &w, &err);
  ASSERT_NOT_NULL(e);
  ASSERT_NULL(e->json);
  ASSERT_EQ(s->history.count, 2);
  /* the first event holds its value, the second its value and the one it replaced: raw */
  ASSERT(s->history.bytes >= 3 * n);
  ASSERT(s->history.bytes < 3 * n + 4096);
  ASSERT_EQ(s->history.bytes, history_bytes(&s->history));
  s->history.max_bytes = s->history.bytes + n; /* the raw events fit, the rendered one does not */
  size_t len = 0, len2 = 0;
  const char *json = v2_store_event_json(s, e, &len);
  ASSERT_NOT_NULL(json);
  ASSERT(len > 2 * 5 * n);
  ASSERT_EQ(strlen(json), len);
  ASSERT(has(json,
             "{\"action\":\"set\",\"node\":{\"key\":\"/_c10d/r/k\",\"value\":\"x\\u0001\\u0002"));
  ASSERT(has(json, "\"prevNode\":{\"key\":\"/_c10d/r/k\",\"value\":\"\\u0000\\u0001\\u0002"));
  ASSERT(has(json, "\"modifiedIndex\":1,\"createdIndex\":1}}\n"));
  ASSERT_NULL(e->src);
  /* past the cap once rendered: the older event went, this one stayed */
  ASSERT_EQ(s->history.count, 1);
  ASSERT_EQ(s->history.start_index, 2);
  ASSERT_EQ(s->history.bytes, len);
  /* read again: the same text */
  ASSERT(v2_store_event_json(s, e, &len2) == json);
  ASSERT_EQ(len2, len);
  mu_free(v);
  v2_store_free(s);
}

/* -- notifications made while the hub is held (a write's reply goes out first) -------------- */

struct order_log {
  struct v2_store *s;
  char seq[256]; /* "<tag>:<index> ..." in the order things happened */
  int rewrite;   /* a callback writes once more (while delivering: queued, then delivered) */
};

static void log_add(struct order_log *l, const char *tag, uint64_t index)
{
  size_t n = strlen(l->seq);
  snprintf(l->seq + n, sizeof(l->seq) - n, "%s%s:%llu", n ? " " : "", tag,
           (unsigned long long)index);
}

static void on_order(void *data, const struct v2_event *e, struct v2_watcher *w)
{
  struct order_log *l = data;
  (void)w;
  log_add(l, e->action == V2_EV_DELETE ? "del" : e->key + 1, e->index);
  if (l->rewrite) {
    l->rewrite = 0;
    struct v2_err err = {0, NULL, 0};
    struct v2_write wv = wr("/q/again", "3");
    ASSERT_NOT_NULL(v2_store_set(l->s, &wv, &err));
    log_add(l, "rewrote", l->s->index);
  }
}

TEST(store__held_hub_queues_notifications_in_order)
{
  struct v2_store *s = v2_store_new(NULL);
  struct v2_err err = {0, NULL, 0};
  struct order_log l;
  memset(&l, 0, sizeof(l));
  l.s = s;
  const struct v2_event *found = NULL;
  struct v2_watcher *w = NULL;
  /* a stream watcher of everything below /q, and a one-shot one on /q/a/k (inside a dir) */
  ASSERT_EQ(v2_store_watch(s, "/q", 1, 1, 0, on_order, &l, &found, &w, &err), 0);
  struct v2_watcher *stream = w;
  ASSERT_EQ(v2_store_watch(s, "/q/a/k", 0, 0, 0, on_order, &l, &found, &w, &err), 0);
  uint64_t base = s->index;

  /* the write handler: hold, write, reply, unhold */
  v2_watch_hub_hold(&s->hub);
  struct v2_write wv = wr("/q/x", "1");
  ASSERT_NOT_NULL(v2_store_set(s, &wv, &err));
  wv = wr("/q/a/k", "2");
  ASSERT_NOT_NULL(v2_store_set(s, &wv, &err));
  ASSERT_NOT_NULL(v2_store_delete(s, "/q/a", 1, 1, &err)); /* reaches /q/a/k's watcher too */
  v2_watch_hub_hold(&s->hub);                              /* holds nest */
  v2_watch_hub_unhold(&s->hub);
  ASSERT_STR_EQ(l.seq, ""); /* nobody woken while held */
  ASSERT(v2_watch_hub_queued(&s->hub) >= 3);
  log_add(&l, "reply", s->index);
  l.rewrite = 1;
  v2_watch_hub_unhold(&s->hub);
  ASSERT_EQ(v2_watch_hub_queued(&s->hub), 0);
  char want[256];
  snprintf(want, sizeof(want),
           "reply:%llu q/x:%llu rewrote:%llu q/a/k:%llu q/a/k:%llu del:%llu "
           "q/again:%llu",
           (unsigned long long)base + 3, (unsigned long long)base + 1, (unsigned long long)base + 4,
           (unsigned long long)base + 2, (unsigned long long)base + 2, (unsigned long long)base + 3,
           (unsigned long long)base + 4);
  /* the one-shot /q/a/k watcher took the set; the stream saw set, delete, and the write made
   * from inside a callback, after everything queued before it */
  ASSERT_STR_EQ(l.seq, want);

  /* not held: a write wakes its watchers at once */
  l.seq[0] = '\0';
  wv = wr("/q/now", "4");
  ASSERT_NOT_NULL(v2_store_set(s, &wv, &err));
  snprintf(want, sizeof(want), "q/now:%llu", (unsigned long long)s->index);
  ASSERT_STR_EQ(l.seq, want);
  v2_watcher_remove(stream);
  ASSERT_EQ(s->hub.count, 0);
  /* with no watcher, a held write queues nothing */
  v2_watch_hub_hold(&s->hub);
  ASSERT_NOT_NULL(v2_store_set(s, &wv, &err));
  ASSERT_EQ(v2_watch_hub_queued(&s->hub), 0);
  v2_watch_hub_unhold(&s->hub);
  v2_store_free(s);
}

/* Renders `key` in the smallest slices there are (a deadline already past: the walk stops at
 * each of its time checks). Returns: the JSON (caller frees), *steps the number of slices. */
static char *walk_all(struct v2_store *s, const char *key, int recursive, int sorted, int *steps)
{
  struct v2_err err = {0, NULL, 0};
  struct mu_buf b = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  struct v2_walk *w = v2_store_walk_new(s, key, recursive, sorted, &err);
  if (w == NULL)
    return NULL;
  *steps = 1;
  while (!v2_store_walk_step(w, &b, 0, SIZE_MAX))
    ++*steps;
  v2_store_walk_free(w, 1);
  return mu_buf_detach(&b);
}

TEST(store__walk_in_slices_renders_as_one_go)
{
  struct v2_store *s = v2_store_new(NULL);
  struct v2_err err = {0, NULL, 0};
  char key[64];
  /* a flat dir over the sort's run (2,048), inserted out of order; nested dirs, a hidden key,
   * a TTL, an empty dir */
  for (int i = 0; i < 5000; i++) {
    snprintf(key, sizeof(key), "/t/flat/k%d", (i * 7919) % 5000);
    struct v2_write w = wr(key, "v");
    ASSERT_NOT_NULL(v2_store_set(s, &w, &err));
  }
  for (int i = 0; i < 300; i++) {
    snprintf(key, sizeof(key), "/t/d%d/e%d/k", i % 7, i);
    struct v2_write w = wr(key, "x\"y");
    if (i == 5)
      w.expire_ns = v2_now_ns() + 60000000000LL;
    ASSERT_NOT_NULL(v2_store_set(s, &w, &err));
  }
  struct v2_write w = wr("/t/_hidden", "h");
  ASSERT_NOT_NULL(v2_store_set(s, &w, &err));
  w = wr("/t/empty", NULL);
  w.dir = 1;
  ASSERT_NOT_NULL(v2_store_set(s, &w, &err));
  uint64_t gets = s->stats.get_success;
  for (int mode = 0; mode < 4; mode++) {
    int recursive = mode & 1, sorted = mode >> 1, steps = 0;
    struct mu_buf one = MU_BUF_INIT(MU_BUF_UNBOUNDED);
    ASSERT_EQ(v2_store_get(s, "/t", recursive, sorted, &one, &err), 0);
    ASSERT_EQ(s->walks, 0);
    char *sliced = walk_all(s, "/t", recursive, sorted, &steps);
    ASSERT_NOT_NULL(sliced);
    ASSERT_STR_EQ(sliced, one.data);
    ASSERT(recursive ? steps > 50 : steps >= 1);
    ASSERT_EQ(s->walks, 0);
    mu_free(sliced);
    mu_buf_release(&one);
  }
  ASSERT_EQ(s->stats.get_success, gets + 8);
  /* sorted: the flat dir's keys in byte order, all of them */
  int steps = 0;
  char *flat = walk_all(s, "/t/flat", 0, 1, &steps);
  ASSERT_NOT_NULL(flat);
  ASSERT(has(flat, "\"key\":\"/t/flat/k0\",\"value\":\"v\""));
  char prev[64] = "", cur[64];
  int count = 0;
  for (const char *p = strstr(flat, "\"/t/flat/k"); p != NULL; p = strstr(p + 1, "\"/t/flat/k")) {
    size_t n = strcspn(p + 1, "\"");
    ASSERT(n < sizeof(cur));
    memcpy(cur, p + 1, n);
    cur[n] = '\0';
    ASSERT(strcmp(prev, cur) < 0);
    memcpy(prev, cur, n + 1);
    count++;
  }
  ASSERT_EQ(count, 5000);
  mu_free(flat);
  /* a walk in progress holds the tree: the TTL expiry waits, the walk counts */
  struct v2_walk *wk = v2_store_walk_new(s, "/t", 1, 0, &err);
  ASSERT_NOT_NULL(wk);
  ASSERT_EQ(s->walks, 1);
  ASSERT_EQ(v2_store_walk_index(wk), s->index);
  v2_store_walk_free(wk, 1); /* abandoned half-way (a client gone) */
  ASSERT_EQ(s->walks, 0);
  ASSERT_NULL(v2_store_walk_new(s, "/nope", 1, 0, &err));
  ASSERT_EQ(err.code, 100);
  v2_err_release(&err);
  v2_store_free(s);
}

static void close_cb_noop(void *data)
{
  *(int *)data = 1;
}

TEST(store__big_delete_is_one_event_and_frees_later)
{
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  struct v2_store *s = v2_store_new(&loop);
  struct v2_err err = {0, NULL, 0};
  char key[64];
  for (int i = 0; i < 3000; i++) {
    snprintf(key, sizeof(key), "/big/d%d/k%d", i % 10, i);
    struct v2_write w = wr(key, "v");
    if (i % 100 == 0)
      w.expire_ns = v2_now_ns() + 3600000000000LL; /* in the TTL heap */
    ASSERT_NOT_NULL(v2_store_set(s, &w, &err));
  }
  struct v2_write w = wr("/keep", "k");
  ASSERT_NOT_NULL(v2_store_set(s, &w, &err));
  size_t before = s->nodes.n;
  struct fired in = {0, 0, 0}, above = {0, 0, 0}, absent = {0, 0, 0};
  const struct v2_event *found = NULL;
  struct v2_watcher *wt = NULL;
  ASSERT_EQ(v2_store_watch(s, "/big/d3/k13", 0, 0, 0, on_fire, &in, &found, &wt, &err), 0);
  ASSERT_EQ(v2_store_watch(s, "/", 1, 0, 0, on_fire, &above, &found, &wt, &err), 0);
  ASSERT_EQ(v2_store_watch(s, "/big/none", 0, 0, 0, on_fire, &absent, &found, &wt, &err), 0);
  uint64_t index = s->index;
  const struct v2_event *e = v2_store_delete(s, "/big", 1, 1, &err);
  ASSERT_NOT_NULL(e);
  ASSERT_EQ(e->index, index + 1);
  ASSERT_EQ(s->index, index + 1);
  ASSERT(in.n == 1 && in.index == index + 1 && in.last == V2_EV_DELETE);
  ASSERT(above.n == 1 && above.index == index + 1);
  ASSERT_EQ(absent.n, 0); /* no node there: etcd wakes nobody at that path */
  ASSERT_EQ(s->hub.count, 1);
  /* gone at once, freed later */
  ASSERT_EQ(s->nodes.n, before - 3000 - 11);
  ASSERT(s->dead > 0 && s->ngraves == 1);
  ASSERT_NULL(v2_store_lookup(s, "/big"));
  ASSERT_NULL(v2_store_lookup(s, "/big/d3/k13"));
  struct mu_buf b = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  ASSERT_EQ(v2_store_get(s, "/big/d3", 0, 0, &b, &err), MU_ENOENT);
  ASSERT_EQ(err.code, 100);
  v2_err_release(&err);
  /* the same key again, while its dead namesake is still in the table */
  w = wr("/big/d3/k13", "again");
  e = v2_store_set(s, &w, &err);
  ASSERT_NOT_NULL(e);
  ASSERT(e->created);
  ASSERT_NOT_NULL(v2_store_lookup(s, "/big/d3/k13"));
  ASSERT_EQ(s->nodes.n, before - 3000 - 11 + 3);
  /* the expiry skips dead nodes in the heap */
  ASSERT_EQ(v2_store_expire(s, v2_now_ns() + 7200000000000LL), 0);
  while (s->ngraves > 0)
    uv_run(&loop, UV_RUN_NOWAIT);
  ASSERT_EQ(s->dead, 0);
  ASSERT_EQ(s->nodes.n, before - 3000 - 11 + 3);
  ASSERT_EQ(v2_store_get(s, "/", 1, 1, &b, &err), 0);
  ASSERT(has(b.data, "\"key\":\"/big/d3/k13\",\"value\":\"again\""));
  ASSERT(!has(b.data, "/big/d3/k23"));
  mu_buf_release(&b);
  /* a second big delete, and the store freed before the reaper is done */
  for (int i = 0; i < 2000; i++) {
    snprintf(key, sizeof(key), "/big2/k%d", i);
    w = wr(key, "v");
    ASSERT_NOT_NULL(v2_store_set(s, &w, &err));
  }
  ASSERT_NOT_NULL(v2_store_delete(s, "/big2", 1, 1, &err));
  ASSERT_EQ(s->ngraves, 1);
  int closed = 0;
  v2_store_close(s, close_cb_noop, &closed);
  uv_run(&loop, UV_RUN_DEFAULT);
  ASSERT(closed);
  ASSERT_EQ(uv_loop_close(&loop), 0);
}

/* What a subtree holds, recounted from its nodes (store.h's v2_node.bytes). */
static uint64_t recount(const struct v2_node *n)
{
  uint64_t b = mu_alloc_size(sizeof(*n)) + mu_alloc_size((size_t)n->hn.len + 1);
  if (n->value != NULL)
    b += mu_alloc_size((size_t)n->value_len + 1);
  for (uint32_t i = 0; i < n->nchildren; i++)
    b += recount(n->children[i]);
  return b;
}

static int bytes_hold(struct v2_store *s, const char *dir)
{
  const struct v2_node *d = v2_store_lookup(s, dir);
  return s->root->bytes == recount(s->root) && (d == NULL || d->bytes == recount(d));
}

/* Each subtree's bytes (what --c10d-max-store-bytes reads in O(1)) follow every write: a new
 * key, a bigger and a smaller value, a file made a dir, a delete, a recursive delete. */
TEST(store__subtree_bytes_follow_every_write)
{
  struct v2_store *s = v2_store_new(NULL);
  struct v2_err err = {0, NULL, 0};
  uint64_t empty = s->root->bytes;
  char big[5000];
  memset(big, 'v', sizeof(big) - 1);
  big[sizeof(big) - 1] = '\0';
  const char *steps[][2] = {{"/d/a", "1"}, {"/d/b", big},   {"/d/a", big},
                            {"/d/b", ""},  {"/d/e/f", big}, {"/x", big}};
  for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
    struct v2_write w = wr(steps[i][0], steps[i][1]);
    ASSERT_NOT_NULL(v2_store_set(s, &w, &err));
    ASSERT(bytes_hold(s, "/d"));
  }
  ASSERT(v2_store_lookup(s, "/d")->bytes > 2 * sizeof(big));
  struct v2_write w = wr("/d/a", NULL);
  w.dir = 1; /* a file made a dir: its value goes */
  ASSERT_NOT_NULL(v2_store_set(s, &w, &err));
  ASSERT(bytes_hold(s, "/d"));
  ASSERT_NOT_NULL(v2_store_delete(s, "/d/b", 0, 0, &err));
  ASSERT(bytes_hold(s, "/d"));
  ASSERT_NOT_NULL(v2_store_delete(s, "/d", 1, 1, &err));
  ASSERT(bytes_hold(s, "/d"));
  ASSERT_NOT_NULL(v2_store_delete(s, "/x", 0, 0, &err));
  ASSERT_EQ(s->root->bytes, empty);
  v2_err_release(&err);
  v2_store_free(s);
}
