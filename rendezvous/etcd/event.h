/* etcd v2 events (v2store/event.go): what a write did, as watchers and the history see it.
 *
 * An event is rendered to JSON once, when it happens ({"action":..,"node":..,"prevNode":..}
 * plus the trailing newline etcd's encoder writes), and that text is shared by the write's own
 * reply, every watcher it wakes, and later waitIndex scans of the history.
 */
#ifndef RV_EVENT_H
#define RV_EVENT_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "json.h"

enum mu_event_action {
  MU_EV_GET = 0,
  MU_EV_CREATE,
  MU_EV_SET,
  MU_EV_UPDATE,
  MU_EV_DELETE,
  MU_EV_CAS,
  MU_EV_CAD,
  MU_EV_EXPIRE,
};

struct mu_event {
  enum mu_event_action action;
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
const char *mu_event_action_name(enum mu_event_action a);

/* Frees the event. Accepts NULL. */
void mu_event_free(struct mu_event *e);

#endif
