/* What the etcd v2 store's files share (private to rendezvous/etcd/): store.c keeps the tree and
 * its operations, store_json.c renders events and GETs as etcd's JSON.
 */
#ifndef MUSTERD_ETCD_STORE_INT_H
#define MUSTERD_ETCD_STORE_INT_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "store.h"

/* The node at `key` (a live one), or NULL with etcd's error in `err` (getNode/internalGet). */
struct v2_node *v2_store_internal_get(struct v2_store *s, const char *key, struct v2_err *err);

/* Starts an event's JSON in `b`: {"action":"x","node": (the node follows). */
struct v2_event *v2_json_event_new(enum v2_event_action a, const char *key, size_t klen,
                                   uint64_t index, struct mu_buf *b);
/* An event's node (newEvent and the fields each operation sets). */
void v2_json_event_node(struct mu_buf *b, const char *key, size_t klen, const char *value,
                        size_t vlen, int dir, int64_t expire_ns, int64_t now, uint64_t mi,
                        uint64_t ci);
/* ,"prevNode":{...} when there is a previous node. */
void v2_json_event_prev(struct mu_buf *b, const struct v2_node *prev, int64_t now);
/* Closes the event's JSON and hands it to the event. */
void v2_json_event_finish(struct v2_event *e, struct mu_buf *b);

#endif
