/* Watchers by path (v2store/watcher_hub.go). A write's event is offered to the watchers of
 * every path from "/" down to the event's key (recursive watchers take events below them,
 * unless the rest of the path is hidden by a "_" segment); a deleted or expired subtree
 * also reaches the watchers of every node inside it.
 *
 * Watchers are one-shot unless `stream`: the hub removes and frees a watcher right after
 * calling its callback.
 */
#ifndef MUSTERD_ETCD_WATCH_HUB_H
#define MUSTERD_ETCD_WATCH_HUB_H

#include <stddef.h>
#include <stdint.h>

#include "event.h"
#include "event_history.h"
#include "htab.h"

struct v2_watcher;
struct v2_watch_list;

/* Called with the event that wakes `w`. For a one-shot watcher, `w` is freed when this
 * returns: do not keep it. The event is borrowed for the duration of the call. */
typedef void v2_watch_cb(void *data, const struct v2_event *e, struct v2_watcher *w);

/* A notification made while the hub is held (see v2_watch_hub_hold()). */
struct v2_watch_queued {
  const struct v2_event *e;
  char *path; /* notify_deleted's path (owned), or NULL for v2_watch_hub_notify() */
};

struct v2_watch_hub {
  struct mu_htab lists;       /* path -> struct v2_watch_list */
  size_t count;               /* live watchers */
  int depth;                  /* > 0 while notifying: removals are deferred */
  struct v2_watcher *pending; /* removed during a notification, freed after it */
  int hold;                   /* > 0: notifications are queued, delivered by the last unhold */
  struct v2_watch_queued *queue;
  size_t nqueued, queue_cap;
};

void v2_watch_hub_init(struct v2_watch_hub *h);
/* Frees every watcher without calling them. */
void v2_watch_hub_release(struct v2_watch_hub *h);

/* Adds a watcher for `path` waking on events with index >= since.
 * Returns: the watcher. Ownership: the hub owns it; remove it with v2_watcher_remove() if
 * the client goes away first. */
struct v2_watcher *v2_watch_hub_add(struct v2_watch_hub *h, const char *path, int recursive,
                                    int stream, uint64_t since, v2_watch_cb *cb, void *data);

/* Makes `w` take only the events `accept` takes (a credential's scopes: a watch of a dir above
 * them); the others pass it by, and a one-shot watcher keeps waiting. */
void v2_watcher_accept(struct v2_watcher *w, v2_event_accept_fn *accept, void *data);

/* Removes and frees a watcher that has not fired (or a stream watcher). Safe inside a
 * callback. */
void v2_watcher_remove(struct v2_watcher *w);

/* Offers `e` to watchers of every path from "/" to e->key. */
void v2_watch_hub_notify(struct v2_watch_hub *h, const struct v2_event *e);

/* Offers `e` to the watchers of exactly `path` as a deletion of a node inside the event's
 * subtree (etcd's notifyWatchers(e, path, true)). */
void v2_watch_hub_notify_deleted(struct v2_watch_hub *h, const struct v2_event *e,
                                 const char *path);

/* Holds notifications back: until the matching v2_watch_hub_unhold(), notify calls are
 * queued in order instead of waking watchers. A write handler holds the hub around the write
 * and its reply, so the writer is answered (and its bytes handed to the kernel) before the
 * fan-out to thousands of watchers starts. Holds nest.
 * Ownership: the queued events are borrowed: they must outlive the hold (an event stays in the
 * store's history for at least V2_EVENT_HISTORY_SIZE more writes, so one write's events do). */
void v2_watch_hub_hold(struct v2_watch_hub *h);
/* Returns: the number of notifications queued by the current hold (0: nobody to wake). */
size_t v2_watch_hub_queued(const struct v2_watch_hub *h);
/* Ends one hold; the last one delivers the queued notifications in order. */
void v2_watch_hub_unhold(struct v2_watch_hub *h);

#endif
