/* An intrusive binary min-heap of deadlines: the element embeds a `struct mu_heap_node` whose
 * `key` orders it (smallest first) and whose `slot` the heap keeps up to date, so removing or
 * re-keying an element is O(log n) without a search. The heap holds pointers; it never
 * allocates or frees elements, only its own array.
 *
 *   struct timer { struct mu_heap_node hn; ... };
 *   t->hn.key = deadline;
 *   mu_heap_push(&h, &t->hn);                  (or, already queued, re-keyed: the same call)
 *   struct mu_heap_node *top = mu_heap_top(&h); (the smallest key, or NULL)
 *   mu_heap_remove(&h, &t->hn);                 (a node not queued is fine)
 *
 * Equal keys come out in no promised order.
 */
#ifndef MU_HEAP_H
#define MU_HEAP_H

#include <stddef.h>
#include <stdint.h>

struct mu_heap_node {
  int64_t key;   /* set by the owner before push/update */
  uint32_t slot; /* position + 1 while queued, 0 when not: owned by the heap */
};

struct mu_heap {
  struct mu_heap_node **v;
  size_t n, cap;
};

#define MU_HEAP_INIT                                                                               \
  {                                                                                                \
    NULL, 0, 0                                                                                     \
  }

/* Frees the array (the elements are the owner's; their slots are left as they were).
 * Afterwards the heap is empty and usable again, and mu_heap_remove() of a node that was queued
 * is a no-op. Accepts NULL. */
void mu_heap_release(struct mu_heap *h);

/* Queues `x` by x->key, or, when it is queued already, moves it to its new key.
 * Ownership: borrows `x` until it is removed (or the heap released). */
void mu_heap_push(struct mu_heap *h, struct mu_heap_node *x);

/* Unqueues `x`. A node that is not queued in `h` is left alone. */
void mu_heap_remove(struct mu_heap *h, struct mu_heap_node *x);

/* Returns: the node with the smallest key, or NULL when the heap is empty. */
static inline struct mu_heap_node *mu_heap_top(const struct mu_heap *h)
{
  return h->n > 0 ? h->v[0] : NULL;
}

/* Returns: 1 while `x` is queued (in some heap), else 0. */
static inline int mu_heap_queued(const struct mu_heap_node *x)
{
  return x->slot != 0;
}

#endif
