/* The watcher hub: a hash table of path -> list of watchers (see watch_hub.h). */
#include <string.h>

#include "alloc.h"
#include "list.h"
#include "watch_hub.h"

struct v2_watcher {
  struct v2_watch_hub *hub;
  struct v2_watch_list *list;
  struct mu_list_node link; /* on list->watchers */
  struct v2_watcher *pending_next;
  uint64_t since;
  unsigned recursive : 1;
  unsigned stream : 1;
  unsigned removed : 1;
  v2_watch_cb *cb;
  void *data;
  v2_event_accept_fn *accept; /* NULL: every event of its path */
  void *accept_data;
};

/* The watchers of one path. */
struct v2_watch_list {
  struct mu_hnode hn; /* key: path */
  struct mu_list watchers;
  char path[]; /* NUL-terminated */
};

static struct v2_watcher *watcher_at(struct mu_list_node *x)
{
  return MU_CONTAINER_OF(x, struct v2_watcher, link);
}

void v2_watch_hub_init(struct v2_watch_hub *h)
{
  memset(h, 0, sizeof(*h));
  mu_htab_init(&h->lists, 64);
}

static void list_free(struct mu_hnode *e, void *data)
{
  (void)data;
  struct v2_watch_list *l = MU_CONTAINER_OF(e, struct v2_watch_list, hn);
  while (l->watchers.head != NULL) {
    struct v2_watcher *w = watcher_at(l->watchers.head);
    mu_list_remove(&l->watchers, &w->link);
    mu_free(w);
  }
  mu_free(l);
}

void v2_watch_hub_release(struct v2_watch_hub *h)
{
  if (h == NULL || h->lists.b == NULL)
    return;
  mu_htab_clear(&h->lists, list_free, NULL);
  mu_htab_release(&h->lists);
  for (size_t i = 0; i < h->nqueued; i++)
    mu_free(h->queue[i].path);
  mu_free(h->queue);
  h->queue = NULL;
  h->nqueued = h->queue_cap = 0;
}

static struct v2_watch_list *find_list(struct v2_watch_hub *h, const char *path, size_t n)
{
  struct mu_hnode *e = mu_htab_find(&h->lists, path, n);
  return e != NULL ? MU_CONTAINER_OF(e, struct v2_watch_list, hn) : NULL;
}

struct v2_watcher *v2_watch_hub_add(struct v2_watch_hub *h, const char *path, int recursive,
                                    int stream, uint64_t since, v2_watch_cb *cb, void *data)
{
  size_t n = strlen(path);
  struct v2_watch_list *l = find_list(h, path, n);
  if (l == NULL) {
    l = mu_calloc(1, sizeof(*l) + n + 1);
    memcpy(l->path, path, n);
    mu_htab_add(&h->lists, &l->hn, l->path, n);
  }
  struct v2_watcher *w = mu_calloc(1, sizeof(*w));
  w->hub = h;
  w->list = l;
  w->since = since;
  w->recursive = recursive != 0;
  w->stream = stream != 0;
  w->cb = cb;
  w->data = data;
  mu_list_push_back(&l->watchers, &w->link);
  h->count++;
  return w;
}

static void unlink_free(struct v2_watcher *w)
{
  struct v2_watch_hub *h = w->hub;
  struct v2_watch_list *l = w->list;
  mu_list_remove(&l->watchers, &w->link);
  mu_free(w);
  if (l->watchers.head == NULL) {
    mu_htab_del(&h->lists, &l->hn);
    mu_free(l);
  }
}

void v2_watcher_accept(struct v2_watcher *w, v2_event_accept_fn *accept, void *data)
{
  w->accept = accept;
  w->accept_data = data;
}

void v2_watcher_remove(struct v2_watcher *w)
{
  if (w == NULL || w->removed)
    return;
  struct v2_watch_hub *h = w->hub;
  w->removed = 1;
  h->count--;
  if (h->depth > 0) {
    w->pending_next = h->pending;
    h->pending = w;
    return;
  }
  unlink_free(w);
}

static void enter(struct v2_watch_hub *h)
{
  h->depth++;
}

static void leave(struct v2_watch_hub *h)
{
  if (--h->depth > 0)
    return;
  while (h->pending != NULL) {
    struct v2_watcher *w = h->pending;
    h->pending = w->pending_next;
    unlink_free(w);
  }
}

/* etcd's isHidden(watchPath, keyPath) */
static int is_hidden(const char *watch, size_t wlen, const char *key, size_t klen)
{
  if (wlen > klen)
    return 0;
  /* "/" + key[wlen:], then look for "/_" (path.Clean cannot create one) */
  (void)watch;
  const char *rest = key + wlen;
  size_t rlen = klen - wlen;
  if (rlen > 0 && rest[0] == '_')
    return 1;
  for (size_t i = 0; i + 1 < rlen; i++)
    if (rest[i] == '/' && rest[i + 1] == '_')
      return 1;
  return 0;
}

static void notify_path(struct v2_watch_hub *h, const struct v2_event *e, const char *path,
                        size_t n, int deleted)
{
  struct v2_watch_list *l = find_list(h, path, n);
  if (l == NULL)
    return;
  int original = e->key_len == n && memcmp(e->key, path, n) == 0;
  if (!original && is_hidden(path, n, e->key, e->key_len))
    return;
  enter(h);
  struct mu_list_node *x = l->watchers.head, *next = NULL;
  for (; x != NULL; x = next) {
    next = x->next;
    struct v2_watcher *w = watcher_at(x);
    if (w->removed)
      continue;
    if (!(w->recursive || original || deleted) || e->index < w->since)
      continue;
    if (w->accept != NULL && !w->accept(w->accept_data, e))
      continue;
    if (!w->stream)
      v2_watcher_remove(w); /* deferred free: still valid during the callback */
    w->cb(w->data, e, w);
  }
  leave(h);
}

static void enqueue(struct v2_watch_hub *h, const struct v2_event *e, const char *path)
{
  if (h->nqueued == h->queue_cap) {
    h->queue_cap = h->queue_cap ? h->queue_cap * 2 : 8;
    h->queue = mu_realloc(h->queue, h->queue_cap * sizeof(*h->queue));
  }
  h->queue[h->nqueued].e = e;
  h->queue[h->nqueued].path = path != NULL ? mu_strdup(path) : NULL;
  h->nqueued++;
}

static void deliver(struct v2_watch_hub *h, const struct v2_event *e)
{
  /* "/", then "/a", "/a/b", ... */
  notify_path(h, e, "/", 1, 0);
  for (size_t i = 1; i <= e->key_len; i++)
    if (i == e->key_len || e->key[i] == '/')
      notify_path(h, e, e->key, i, 0);
}

void v2_watch_hub_hold(struct v2_watch_hub *h)
{
  h->hold++;
}

size_t v2_watch_hub_queued(const struct v2_watch_hub *h)
{
  return h->nqueued;
}

void v2_watch_hub_unhold(struct v2_watch_hub *h)
{
  if (h->hold <= 0 || --h->hold > 0)
    return;
  /* a callback may write again (and queue more): take entries one at a time, in order */
  h->hold++;
  for (size_t i = 0; i < h->nqueued; i++) {
    struct v2_watch_queued q = h->queue[i];
    if (h->count > 0) {
      if (q.path != NULL)
        notify_path(h, q.e, q.path, strlen(q.path), 1);
      else
        deliver(h, q.e);
    }
    mu_free(q.path);
  }
  h->nqueued = 0;
  h->hold--;
}

void v2_watch_hub_notify(struct v2_watch_hub *h, const struct v2_event *e)
{
  if (h->count == 0)
    return;
  if (h->hold > 0) {
    enqueue(h, e, NULL);
    return;
  }
  deliver(h, e);
}

void v2_watch_hub_notify_deleted(struct v2_watch_hub *h, const struct v2_event *e, const char *path)
{
  if (h->count == 0)
    return;
  if (h->hold > 0) {
    enqueue(h, e, path);
    return;
  }
  notify_path(h, e, path, strlen(path), 1);
}
