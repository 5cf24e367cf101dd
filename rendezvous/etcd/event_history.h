/* The v2 event history (v2store/event_history.go): a ring of the last N events, scanned by
 * watches with a waitIndex. An index older than the oldest kept event is error 401.
 */
#ifndef MUSTERD_ETCD_EVENT_HISTORY_H
#define MUSTERD_ETCD_EVENT_HISTORY_H

#include <stdint.h>

#include "event.h"

#define V2_EVENT_HISTORY_SIZE 1000
/* Also a cap on the bytes the kept events hold (1000 events of 1 MiB values would be 2 GiB):
 * past it the oldest events go early, which only makes old waitIndex values answer 401. */
#define V2_EVENT_HISTORY_MAX_BYTES ((size_t)64 << 20)

struct v2_event_history {
  struct v2_event **ring;
  unsigned cap;
  unsigned front; /* oldest */
  unsigned count;
  uint64_t start_index; /* index of the oldest event kept (0 when empty) */
  uint64_t last_index;
  size_t bytes;     /* what the kept events hold (v2_event_bytes()) */
  size_t max_bytes; /* 0 = no byte cap */
};

/* Keeps at most `cap` events and V2_EVENT_HISTORY_MAX_BYTES bytes of them (see max_bytes). */
void v2_event_history_init(struct v2_event_history *h, unsigned cap);
/* Frees every event. */
void v2_event_history_release(struct v2_event_history *h);

/* Appends `e`, evicting (and freeing) the oldest when full.
 * Ownership: takes `e`; it stays valid until V2_EVENT_HISTORY_SIZE more events were added. */
void v2_event_history_add(struct v2_event_history *h, struct v2_event *e);

/* Counts the kept event `e` anew after it grew or shrank (rendered: v2_store_event_json()) from
 * `before` bytes, dropping the oldest events (never `e`) when past the byte cap. */
void v2_event_history_resized(struct v2_event_history *h, const struct v2_event *e, size_t before);

/* Finds the first non-refresh event with index >= `index` for `key` (or below it when
 * `recursive`, or a delete/expire of a dir whose key is a prefix of `key`).
 * Returns: 0 with *out set (NULL: none yet, the watch must wait), or MU_ENOENT when `index` is
 * older than the history (etcd's 401); then *start holds the oldest index kept.
 * Ownership: *out is borrowed from the history. */
int v2_event_history_scan(const struct v2_event_history *h, const char *key, int recursive,
                          uint64_t index, const struct v2_event **out, uint64_t *start);

/* Which events a watch takes besides its key (a credential's scopes): 0 passes `e` by. */
typedef int v2_event_accept_fn(void *data, const struct v2_event *e);

/* v2_event_history_scan() that also passes by the events `accept` (may be NULL) refuses. */
int v2_event_history_scan_accept(const struct v2_event_history *h, const char *key, int recursive,
                                 uint64_t index, v2_event_accept_fn *accept, void *data,
                                 const struct v2_event **out, uint64_t *start);

#endif
