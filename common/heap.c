/* The binary min-heap (see heap.h). Positions are 0-based in `v`; a node's `slot` is its
 * position + 1 so that a zeroed node reads as "not queued". */
#include "heap.h"

#include "alloc.h"

#define HEAP_FIRST_CAP 64

static void place(struct mu_heap *h, size_t i, struct mu_heap_node *x)
{
  h->v[i] = x;
  x->slot = (uint32_t)(i + 1);
}

static void sift_up(struct mu_heap *h, size_t i)
{
  struct mu_heap_node *x = h->v[i];
  while (i > 0) {
    size_t p = (i - 1) / 2;
    if (h->v[p]->key <= x->key)
      break;
    place(h, i, h->v[p]);
    i = p;
  }
  place(h, i, x);
}

static void sift_down(struct mu_heap *h, size_t i)
{
  struct mu_heap_node *x = h->v[i];
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    struct mu_heap_node *best = x;
    if (l < h->n && h->v[l]->key < best->key) {
      m = l;
      best = h->v[l];
    }
    if (r < h->n && h->v[r]->key < best->key) {
      m = r;
      best = h->v[r];
    }
    if (m == i)
      break;
    place(h, i, best);
    i = m;
  }
  place(h, i, x);
}

/* Restores the order around position i after its key changed (only one direction moves). */
static void fix(struct mu_heap *h, size_t i)
{
  sift_down(h, i);
  sift_up(h, h->v[i]->slot - 1);
}

static int holds(const struct mu_heap *h, const struct mu_heap_node *x)
{
  return x->slot != 0 && x->slot <= h->n && h->v[x->slot - 1] == x;
}

void mu_heap_release(struct mu_heap *h)
{
  if (h == NULL)
    return;
  mu_free(h->v);
  h->v = NULL;
  h->n = h->cap = 0;
}

void mu_heap_push(struct mu_heap *h, struct mu_heap_node *x)
{
  if (holds(h, x)) {
    fix(h, x->slot - 1);
    return;
  }
  if (h->n == h->cap) {
    h->cap = h->cap ? h->cap * 2 : HEAP_FIRST_CAP;
    h->v = mu_realloc(h->v, h->cap * sizeof(*h->v));
  }
  place(h, h->n++, x);
  sift_up(h, h->n - 1);
}

void mu_heap_remove(struct mu_heap *h, struct mu_heap_node *x)
{
  if (!holds(h, x))
    return;
  size_t i = x->slot - 1;
  x->slot = 0;
  h->n--;
  if (i != h->n) {
    place(h, i, h->v[h->n]);
    fix(h, i);
  }
}
