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

/* A new event of action `a` at `key`, written at `index` and time `now`, to be rendered when read
 * (see event.h): the write fills in its node and prevNode. */
struct v2_event *v2_json_event_new(enum v2_event_action a, const char *key, size_t klen,
                                   uint64_t index, int64_t now);
/* The event's node (newEvent and the fields each operation sets): `value` (copied; NULL: none). */
void v2_json_event_node(struct v2_event *e, const char *value, size_t vlen, int dir,
                        int64_t expire_ns, uint64_t mi, uint64_t ci);
/* The event's prevNode: `prev`, the node before the write, with `value` (taken: prev's own value,
 * which the caller hands over, or NULL for a dir). */
void v2_json_event_prev(struct v2_event *e, const struct v2_node *prev, char *value);

#endif
