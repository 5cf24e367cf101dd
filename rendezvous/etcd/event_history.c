/* The event ring. Mirrors etcd's scan() including its quirks: the recursive match is a
 * string prefix on key + "/", and a deleted/expired dir matches every watched key that
 * starts with the dir's key. */
#include <string.h>

#include "muster/errno.h"

#include "alloc.h"
#include "event_history.h"

void v2_event_history_init(struct v2_event_history *h, unsigned cap)
{
  memset(h, 0, sizeof(*h));
  h->cap = cap;
  h->max_bytes = V2_EVENT_HISTORY_MAX_BYTES;
  h->ring = mu_calloc(cap, sizeof(*h->ring));
}

void v2_event_history_release(struct v2_event_history *h)
{
  if (h == NULL || h->ring == NULL)
    return;
  for (unsigned i = 0; i < h->count; i++)
    v2_event_free(h->ring[(h->front + i) % h->cap]);
  mu_free(h->ring);
  h->ring = NULL;
  h->count = 0;
}

static void drop_oldest(struct v2_event_history *h)
{
  struct v2_event *old = h->ring[h->front];
  h->bytes -= v2_event_bytes(old);
  v2_event_free(old);
  h->ring[h->front] = NULL;
  h->front = (h->front + 1) % h->cap;
  h->count--;
}

void v2_event_history_add(struct v2_event_history *h, struct v2_event *e)
{
  if (h->count == h->cap)
    drop_oldest(h);
  size_t add = v2_event_bytes(e);
  while (h->max_bytes > 0 && h->count > 0 && h->bytes + add > h->max_bytes)
    drop_oldest(h);
  h->ring[(h->front + h->count) % h->cap] = e;
  h->count++;
  h->bytes += add;
  h->last_index = e->index;
  h->start_index = h->ring[h->front]->index;
}

void v2_event_history_resized(struct v2_event_history *h, const struct v2_event *e, size_t before)
{
  h->bytes = h->bytes - before + v2_event_bytes(e);
  while (h->max_bytes > 0 && h->bytes > h->max_bytes && h->count > 1 && h->ring[h->front] != e)
    drop_oldest(h);
  if (h->count > 0)
    h->start_index = h->ring[h->front]->index;
}

int v2_event_history_scan(const struct v2_event_history *h, const char *key, int recursive,
                          uint64_t index, const struct v2_event **out, uint64_t *start)
{
  return v2_event_history_scan_accept(h, key, recursive, index, NULL, NULL, out, start);
}

int v2_event_history_scan_accept(const struct v2_event_history *h, const char *key, int recursive,
                                 uint64_t index, v2_event_accept_fn *accept, void *data,
                                 const struct v2_event **out, uint64_t *start)
{
  *out = NULL;
  *start = h->start_index;
  if (index < h->start_index)
    return MU_ENOENT;
  if (index > h->last_index || h->count == 0)
    return 0;
  size_t klen = strlen(key);
  /* events are in index order: skip to the first with index >= `index` */
  unsigned lo = 0, hi = h->count;
  while (lo < hi) {
    unsigned mid = (lo + hi) / 2;
    if (h->ring[(h->front + mid) % h->cap]->index < index)
      lo = mid + 1;
    else
      hi = mid;
  }
  for (unsigned i = lo; i < h->count; i++) {
    const struct v2_event *e = h->ring[(h->front + i) % h->cap];
    if (e->refresh)
      continue;
    int ok = e->key_len == klen && memcmp(e->key, key, klen) == 0;
    if (!ok && recursive) {
      /* prefix = key with a trailing slash ("/" stays "/") */
      size_t plen = klen;
      if (plen > 0 && key[plen - 1] == '/')
        ok = e->key_len >= plen && memcmp(e->key, key, plen) == 0;
      else
        ok = e->key_len > plen && memcmp(e->key, key, plen) == 0 && e->key[plen] == '/';
    }
    if (!ok && (e->action == V2_EV_DELETE || e->action == V2_EV_EXPIRE) && e->prev_key != NULL)
      ok = strncmp(key, e->prev_key, strlen(e->prev_key)) == 0;
    if (ok && (accept == NULL || accept(data, e))) {
      *out = e;
      return 0;
    }
  }
  return 0;
}
