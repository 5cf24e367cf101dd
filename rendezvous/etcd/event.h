/* etcd v2 events (v2store/event.go): what a write did, as watchers and the history see it.
 *
 * An event is rendered to JSON ({"action":..,"node":..,"prevNode":..} plus the trailing newline
 * etcd's encoder writes) once, when something first reads it (v2_store_event_json(): the write's
 * own HTTP reply, a watcher it wakes, a waitIndex scan of the history, the log), and that text is
 * shared by all of them. Until then the event holds what the text is made from (struct
 * v2_event_src): a write no one reads as JSON (a TCPStore SET, issue 33) pays for copying its
 * value and the previous one, not for escaping them (a binary value grows up to 6 times: one
 * 4 MiB SET was ~0.3 s of the loop, and 2 clients writing them in turn kept every other client
 * waiting seconds).
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

/* What an unrendered event's JSON is made from: its node's fields and its prevNode's (the node the
 * write replaced or removed, at the same key), as they were at the write. */
struct v2_event_src {
  int64_t now; /* the write's time: "ttl" counts from it */
  char *value; /* the node's value (NULL: none, as a dir's or a delete's) */
  size_t vlen;
  int64_t expire_ns;
  uint64_t mi, ci;
  unsigned dir : 1;
  unsigned has_prev : 1;
  unsigned prev_dir : 1;
  char *prev_value; /* NULL when prev_dir */
  size_t prev_vlen;
  int64_t prev_expire_ns;
  uint64_t prev_mi, prev_ci;
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
  char *json; /* the full event, NUL-terminated, ends with "\n"; NULL until rendered */
  size_t json_len;
  size_t json_head;         /* length of the {"action":"..." prefix (noValueOnSuccess) */
  struct v2_event_src *src; /* until rendered (then NULL) */
};

/* Returns: the etcd name of the action ("compareAndSwap"). Ownership: static. */
const char *v2_event_action_name(enum v2_event_action a);

/* Returns: the bytes the event holds for its JSON: the text once rendered, else what it is made
 * from (the history's byte cap counts this). */
size_t v2_event_bytes(const struct v2_event *e);

/* Makes `json` (`len` bytes, NUL-terminated, taken) the event's text, dropping its source. */
void v2_event_set_json(struct v2_event *e, char *json, size_t len, size_t head);

/* Frees the event. Accepts NULL. */
void v2_event_free(struct v2_event *e);

#endif
