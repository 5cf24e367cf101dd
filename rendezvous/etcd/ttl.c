/* TTL min-heap + timer. */
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "store.h"
#include "ttl.h"

int64_t mu_now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void on_timer(uv_timer_t *h)
{
  struct mu_ttl *t = h->data;
  if (t->on_due != NULL)
    t->on_due(t->data);
}

void mu_ttl_init(struct mu_ttl *t, uv_loop_t *loop, void (*on_due)(void *), void *data)
{
  memset(t, 0, sizeof(*t));
  t->on_due = on_due;
  t->data = data;
  if (loop != NULL) {
    t->timer = mu_malloc(sizeof(*t->timer));
    uv_timer_init(loop, t->timer);
    t->timer->data = t;
  }
}

struct closing {
  void (*on_closed)(void *);
  void *data;
};

static void on_timer_closed(uv_handle_t *h)
{
  struct closing *c = h->data;
  void (*fn)(void *) = c->on_closed;
  void *data = c->data;
  mu_free(c);
  mu_free(h);
  if (fn != NULL)
    fn(data);
}

void mu_ttl_release(struct mu_ttl *t, void (*on_closed)(void *), void *data)
{
  mu_free(t->heap);
  t->heap = NULL;
  t->n = t->cap = 0;
  if (t->timer == NULL) {
    if (on_closed != NULL)
      on_closed(data);
    return;
  }
  struct closing *c = mu_malloc(sizeof(*c));
  c->on_closed = on_closed;
  c->data = data;
  t->timer->data = c;
  uv_close((uv_handle_t *)t->timer, on_timer_closed);
  t->timer = NULL;
}

static int less(const struct mu_node *a, const struct mu_node *b)
{
  return a->expire_ns < b->expire_ns;
}

static void place(struct mu_ttl *t, size_t i, struct mu_node *n)
{
  t->heap[i] = n;
  n->heap_idx = (uint32_t)i;
}

static void sift_up(struct mu_ttl *t, size_t i)
{
  struct mu_node *n = t->heap[i];
  while (i > 0) {
    size_t p = (i - 1) / 2;
    if (!less(n, t->heap[p]))
      break;
    place(t, i, t->heap[p]);
    i = p;
  }
  place(t, i, n);
}

static void sift_down(struct mu_ttl *t, size_t i)
{
  struct mu_node *n = t->heap[i];
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    struct mu_node *best = n;
    if (l < t->n && less(t->heap[l], best)) {
      m = l;
      best = t->heap[l];
    }
    if (r < t->n && less(t->heap[r], best)) {
      m = r;
      best = t->heap[r];
    }
    if (m == i)
      break;
    place(t, i, best);
    i = m;
  }
  place(t, i, n);
}

void mu_ttl_push(struct mu_ttl *t, struct mu_node *n)
{
  if (n->heap_idx != MU_TTL_NONE) {
    mu_ttl_update(t, n);
    return;
  }
  if (t->n == t->cap) {
    t->cap = t->cap ? t->cap * 2 : 64;
    t->heap = mu_realloc(t->heap, t->cap * sizeof(*t->heap));
  }
  place(t, t->n++, n);
  sift_up(t, t->n - 1);
  mu_ttl_arm(t);
}

void mu_ttl_remove(struct mu_ttl *t, struct mu_node *n)
{
  size_t i = n->heap_idx;
  if (i == MU_TTL_NONE || i >= t->n || t->heap[i] != n)
    return;
  n->heap_idx = MU_TTL_NONE;
  t->n--;
  if (i != t->n) {
    place(t, i, t->heap[t->n]);
    sift_down(t, i);
    sift_up(t, t->heap[i]->heap_idx);
  }
  if (i == 0)
    mu_ttl_arm(t);
}

void mu_ttl_update(struct mu_ttl *t, struct mu_node *n)
{
  size_t i = n->heap_idx;
  if (i == MU_TTL_NONE || i >= t->n)
    return;
  sift_down(t, i);
  sift_up(t, n->heap_idx);
  mu_ttl_arm(t);
}

struct mu_node *mu_ttl_top(const struct mu_ttl *t)
{
  return t->n > 0 ? t->heap[0] : NULL;
}

void mu_ttl_arm(struct mu_ttl *t)
{
  if (t->timer == NULL)
    return;
  if (t->n == 0) {
    uv_timer_stop(t->timer);
    return;
  }
  int64_t d = t->heap[0]->expire_ns - mu_now_ns();
  uint64_t ms = d <= 0 ? 0 : (uint64_t)((d + 999999) / 1000000);
  uv_timer_start(t->timer, on_timer, ms, 0);
}
