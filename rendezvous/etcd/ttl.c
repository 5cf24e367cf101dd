/* The TTL heap and its timer (see ttl.h). */
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "store.h"
#include "ttl.h"

int64_t v2_now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void on_timer(uv_timer_t *h)
{
  struct v2_ttl *t = h->data;
  if (t->on_due != NULL)
    t->on_due(t->data);
}

void v2_ttl_init(struct v2_ttl *t, uv_loop_t *loop, void (*on_due)(void *), void *data)
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

void v2_ttl_release(struct v2_ttl *t, void (*on_closed)(void *), void *data)
{
  mu_heap_release(&t->heap);
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

static struct v2_node *node_at(struct mu_heap_node *h)
{
  return MU_CONTAINER_OF(h, struct v2_node, ttl);
}

void v2_ttl_push(struct v2_ttl *t, struct v2_node *n)
{
  n->ttl.key = n->expire_ns;
  mu_heap_push(&t->heap, &n->ttl);
  v2_ttl_arm(t);
}

void v2_ttl_remove(struct v2_ttl *t, struct v2_node *n)
{
  int was_top = mu_heap_top(&t->heap) == &n->ttl;
  mu_heap_remove(&t->heap, &n->ttl);
  if (was_top)
    v2_ttl_arm(t);
}

struct v2_node *v2_ttl_top(const struct v2_ttl *t)
{
  struct mu_heap_node *h = mu_heap_top(&t->heap);
  return h != NULL ? node_at(h) : NULL;
}

void v2_ttl_arm(struct v2_ttl *t)
{
  if (t->timer == NULL)
    return;
  struct v2_node *top = v2_ttl_top(t);
  if (top == NULL) {
    uv_timer_stop(t->timer);
    return;
  }
  int64_t d = top->expire_ns - v2_now_ns();
  uint64_t ms = d <= 0 ? 0 : (uint64_t)((d + 999999) / 1000000);
  uv_timer_start(t->timer, on_timer, ms, 0);
}
