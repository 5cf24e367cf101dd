/* The agent's rendezvous, behind one small interface, so that the agent's logic (join, run the
 * workers, re-join when the round changes) does not know which service runs the rounds.
 *
 * Two implementations: musterd's native /v1 API (rdzv_musterd.c, on the client of
 * include/muster/client.h) and an etcd v3 cluster through its JSON gateway (rdzv_etcd3.c).
 * Both fill the same data: the round joined (struct mu_round) and the events that end it
 * (enum mu_watch_event), both from include/muster/client.h.
 *
 * A backend owns a connection per struct mu_rdzv; every call blocks until its answer, its
 * timeout or the connection's cancel fd, and a connection is used by one thread at a time (the
 * agent opens one for its main thread and one for its watcher thread). Every call returns 0 or
 * a negative MU_E* code with what went wrong written to err:
 *   MU_ECONN / MU_ETIMEDOUT  the service cannot be reached (yet)
 *   MU_EHTTP / MU_EPROTO / MU_E2BIG  what answered is not this backend's service
 *   MU_ENOENT   this node is not a member (any more), or the key is absent
 *   MU_ESTATE   the run was started with another configuration (nnodes)
 *   MU_ECLOSED  the run finished successfully; MU_ESHUT  it was shut down as failed
 *   MU_ECANCELED  the cancel fd became readable
 */
#ifndef MU_RDZV_BACKEND_H
#define MU_RDZV_BACKEND_H

#include <stddef.h>

#include "muster/client.h"

#include "buf.h"

struct mu_rdzv;

struct mu_rdzv_ops {
  const char *name; /* "musterd", "etcd-v3" */
  /* Opens a connection to endpoint (HOST:PORT, or what the backend documents). Nothing
   * connects before the first call. Ownership: *out is the caller's; free it with close. */
  int (*open)(const char *endpoint, struct mu_rdzv **out, struct mu_buf *err);
  /* Accepts NULL. */
  void (*close)(struct mu_rdzv *r);
  /* The timeout of calls that do not wait on purpose (a long poll adds its own wait). */
  void (*set_timeout)(struct mu_rdzv *r, long ms);
  /* A readable fd makes the current and later calls return MU_ECANCELED. Borrowed. */
  void (*set_cancel_fd)(struct mu_rdzv *r, int fd);
  /* The local address used to reach the service: the address peers can reach this node at.
   * Returns: 0, or MU_ENOENT before the first successful call. */
  int (*local_addr)(const struct mu_rdzv *r, char *out, size_t n);

  /* Joins run_id and waits (at most o->join_timeout_ms) until the round closes.
   * Ownership: *out is the caller's (mu_round_release). */
  int (*join)(struct mu_rdzv *r, const char *run_id, const struct mu_join_opts *o,
              struct mu_round *out, struct mu_buf *err);
  /* Renews node_id's membership (its lease). */
  int (*heartbeat)(struct mu_rdzv *r, const char *run_id, const char *node_id, struct mu_buf *err);
  /* Waits up to timeout_ms until round `round` stops being healthy for node_id; *ev says how
   * (MU_WATCH_NONE: nothing happened in time). An open watch also holds the membership. */
  int (*watch)(struct mu_rdzv *r, const char *run_id, const char *node_id, long round,
               long timeout_ms, enum mu_watch_event *ev, struct mu_buf *err);
  /* Leaves the run; succeeded = 0 breaks the round for the others. reason may be NULL. */
  int (*leave)(struct mu_rdzv *r, const char *run_id, const char *node_id, int succeeded,
               const char *reason, struct mu_buf *err);
  /* Ends the run as failed: pending and later joins and watches hear MU_ESHUT. */
  int (*shutdown)(struct mu_rdzv *r, const char *run_id, const char *reason, struct mu_buf *err);

  /* What the run looks like now (for the agent's waiting line). Optional: NULL when the
   * backend cannot tell. */
  int (*run_info)(struct mu_rdzv *r, const char *run_id, struct mu_run_info *out,
                  struct mu_buf *err);
  /* Waits until `count` distinct ids reached barrier `name` (generation may be NULL). */
  int (*barrier)(struct mu_rdzv *r, const char *run_id, const char *name, int count, const char *id,
                 long timeout_ms, long *generation, struct mu_buf *err);
  /* Stores len bytes under key, in the run's own key space. */
  int (*kv_put)(struct mu_rdzv *r, const char *run_id, const char *key, const void *val, size_t len,
                struct mu_buf *err);
  /* Reads key, waiting up to wait_ms for it to appear (0: not at all).
   * Ownership: *val is NUL-terminated (len excludes the NUL); the caller frees it (mu_free). */
  int (*kv_get)(struct mu_rdzv *r, const char *run_id, const char *key, long wait_ms, char **val,
                size_t *len, struct mu_buf *err);
};

/* A connection: every backend's own struct begins with this one. */
struct mu_rdzv {
  const struct mu_rdzv_ops *ops;
};

/* musterd's native /v1 API (rdzv_musterd.c). */
extern const struct mu_rdzv_ops mu_rdzv_musterd;
/* An etcd v3 cluster through its JSON gateway (rdzv_etcd3.c on common/etcd3.c). */
extern const struct mu_rdzv_ops mu_rdzv_etcd3;

#endif
