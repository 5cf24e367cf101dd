/* Tests for common/heap.c: the intrusive min-heap, against a sorted reference. */
#include <stdlib.h>

#include "heap.h"
#include "task.h"

#define N 500

static int cmp_i64(const void *a, const void *b)
{
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* Checks the heap property and every slot. */
static void check(const struct mu_heap *h)
{
  for (size_t i = 0; i < h->n; i++) {
    ASSERT_EQ(h->v[i]->slot, i + 1);
    if (i > 0)
      ASSERT(h->v[(i - 1) / 2]->key <= h->v[i]->key);
  }
}

TEST(heap__pops_in_key_order)
{
  static struct mu_heap_node nodes[N];
  int64_t want[N];
  struct mu_heap h = MU_HEAP_INIT;
  srand(7);
  for (int i = 0; i < N; i++) {
    nodes[i].key = rand() % 1000 - 500; /* duplicates and negatives */
    nodes[i].slot = 0;
    want[i] = nodes[i].key;
    mu_heap_push(&h, &nodes[i]);
  }
  check(&h);
  qsort(want, N, sizeof(want[0]), cmp_i64);
  for (int i = 0; i < N; i++) {
    struct mu_heap_node *top = mu_heap_top(&h);
    ASSERT_NOT_NULL(top);
    ASSERT_EQ(top->key, want[i]);
    mu_heap_remove(&h, top);
    ASSERT(!mu_heap_queued(top));
  }
  ASSERT_NULL(mu_heap_top(&h));
  mu_heap_release(&h);
}

TEST(heap__remove_and_rekey_anywhere)
{
  static struct mu_heap_node nodes[N];
  struct mu_heap h = MU_HEAP_INIT;
  for (int i = 0; i < N; i++) {
    nodes[i].key = i;
    nodes[i].slot = 0;
    mu_heap_push(&h, &nodes[i]);
  }
  /* every third one leaves, every fifth one moves to the front or the back */
  for (int i = 0; i < N; i += 3)
    mu_heap_remove(&h, &nodes[i]);
  mu_heap_remove(&h, &nodes[0]); /* not queued any more: a no-op */
  check(&h);
  for (int i = 1; i < N; i += 5) {
    if (i % 3 == 0)
      continue; /* removed above */
    nodes[i].key = (i % 2) ? -i : N + i;
    mu_heap_push(&h, &nodes[i]); /* queued: re-keyed in place */
  }
  check(&h);
  int64_t last = INT64_MIN;
  size_t count = 0;
  while (mu_heap_top(&h) != NULL) {
    struct mu_heap_node *top = mu_heap_top(&h);
    ASSERT(top->key >= last);
    last = top->key;
    mu_heap_remove(&h, top);
    count++;
  }
  ASSERT_EQ(count, N - (N + 2) / 3);
  /* after release a node that was queued is not touched */
  nodes[2].key = 1;
  mu_heap_push(&h, &nodes[2]);
  mu_heap_release(&h);
  mu_heap_remove(&h, &nodes[2]);
  ASSERT_EQ(h.n, 0);
}
