/* TTL bookkeeping (v2store/ttl_key_heap.go): the expiring nodes in a min-heap (common/heap.h)
 * by expiration time, paired with one uv_timer_t armed for the earliest. The store owns one.
 */
#ifndef MUSTERD_ETCD_TTL_H
#define MUSTERD_ETCD_TTL_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "heap.h"

struct v2_node;

struct v2_ttl {
  struct mu_heap heap; /* of v2_node.ttl, keyed by expire_ns */
  uv_timer_t *timer;   /* NULL without a loop (tests drive v2_store_expire() by hand) */
  void (*on_due)(void *data);
  void *data;
};

/* `loop` may be NULL. on_due(data) is called from the timer when the earliest node is due. */
void v2_ttl_init(struct v2_ttl *t, uv_loop_t *loop, void (*on_due)(void *), void *data);
/* Closes the timer; `on_closed(data)` runs from its close callback (or at once without a
 * loop). The heap is freed here; nodes are not touched. */
void v2_ttl_release(struct v2_ttl *t, void (*on_closed)(void *), void *data);

/* Queues `n` by n->expire_ns, or moves it there when it is queued already (its expire_ns
 * changed). */
void v2_ttl_push(struct v2_ttl *t, struct v2_node *n);
/* Unqueues `n` (a node not queued is fine). */
void v2_ttl_remove(struct v2_ttl *t, struct v2_node *n);
/* Returns: the node expiring first, or NULL. */
struct v2_node *v2_ttl_top(const struct v2_ttl *t);
/* Re-arms the timer for the current top. */
void v2_ttl_arm(struct v2_ttl *t);

/* Wall clock in nanoseconds since the epoch. */
int64_t v2_now_ns(void);

#endif
