/* etcd v2 events (v2store/event.go): what a write did, as watchers and the history see it.
 *
 * An event is rendered to JSON once, when it happens ({"action":..,"node":..,"prevNode":..}
 * plus the trailing newline etcd's encoder writes), and that text is shared by the write's own
 * reply, every watcher it wakes, and later waitIndex scans of the history.
 */
#ifndef MUSTERD_ETCD_EVENT_H
#define MUSTERD_ETCD_EVENT_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "json.h"

enum v2_event_action {
  V2_EV_GET = 0,
  V2_EV_CREATE,
  V2_EV_SET,
  V2_EV_UPDATE,
  V2_EV_DELETE,
  V2_EV_CAS,
  V2_EV_CAD,
  V2_EV_EXPIRE,
};

struct v2_event {
  enum v2_event_action action;
  uint64_t index; /* node.modifiedIndex: the index the write took */
  char *key;      /* node.key, e.g. "/a/b" */
  size_t key_len;
  char *prev_key;       /* prevNode.key when prevNode is a dir (delete/expire scans), else NULL */
  unsigned refresh : 1; /* a TTL refresh: kept in history, skipped by scans, wakes nobody */
  unsigned created : 1; /* answered with 201 (create, or set without prevNode) */
  unsigned node_dir : 1;
  char *json; /* the full event, NUL-terminated, ends with "\n" */
  size_t json_len;
  size_t json_head; /* length of the {"action":"..." prefix (noValueOnSuccess) */
};

/* Returns: the etcd name of the action ("compareAndSwap"). Ownership: static. */
const char *v2_event_action_name(enum v2_event_action a);

/* Frees the event. Accepts NULL. */
void v2_event_free(struct v2_event *e);

#endif
