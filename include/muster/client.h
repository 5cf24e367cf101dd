/* The muster rendezvous client (libmuster): blocking calls on a rendezvous, for `muster agent`
 * and for workers that synchronise through MUSTER_RDZV_ENDPOINT without PyTorch. The same calls
 * and results on every backend: musterd's native /v1 API (docs/rendezvous.md; a HOST:PORT
 * endpoint) and an etcd v3 cluster (an etcd-v3://H1:P,H2:P endpoint).
 *
 *   struct mu_client *cl = NULL;
 *   if (mu_client_new(getenv("MUSTER_RDZV_ENDPOINT"), &cl) != 0) ...
 *   mu_client_kv_put(cl, run_id, "addr/3", "10.0.0.3:4000", 13, NULL);
 *   mu_client_kv_get(cl, run_id, "addr/4", 30000, &val, &len);   (waits up to 30 s)
 *   mu_client_free(cl);
 *
 * Every call blocks until the answer, the call's own timeout, or the client's cancel fd.
 * Errors are negative MU_E* codes; mu_client_errmsg() then describes the failure in words
 * (the server's message when it sent one). A client is not thread-safe: use one per thread.
 */
#ifndef MUSTER_CLIENT_H
#define MUSTER_CLIENT_H

#include <stddef.h>

#include "muster/errno.h"
#include "muster/export.h"

struct mu_client;

/* Frees what the calls below hand over (kv_get's value). */
MU_EXTERN void mu_free(void *p);

/* Creates a client for ENDPOINT: a musterd's "HOST:PORT", "http://HOST:PORT",
 * "https://HOST:PORT" or "[V6ADDR]:PORT" (a trailing '/' is fine), or an etcd v3 cluster's
 * "etcd-v3://H1:P,H2:P" (docs/rendezvous.md, "The etcd v3 backend"). Nothing connects until
 * the first call.
 * Security (docs/security.md), from the environment: MUSTER_RDZV_TOKEN (or the first line of
 * the file MUSTER_RDZV_TOKEN_FILE names) is sent as
 * "Authorization: Bearer"; https://, or any of MUSTER_RDZV_CACERT (CA bundle to verify the
 * server; default the system's), MUSTER_RDZV_CERT + MUSTER_RDZV_KEY (client certificate),
 * turns on TLS. A bad TLS file makes the first call fail with a message naming it.
 * Returns: 0, or MU_EINVAL for a malformed endpoint. Ownership: *out is the caller's; free it
 * with mu_client_free(). */
MU_EXTERN int mu_client_new(const char *endpoint, struct mu_client **out);
/* Accepts NULL. */
MU_EXTERN void mu_client_free(struct mu_client *c);

/* The timeout of calls that do not long-poll (default 10000 ms). Long polls add their own
 * wait to it. */
MU_EXTERN void mu_client_set_timeout(struct mu_client *c, long ms);
/* A readable fd interrupts the current and later calls with MU_ECANCELED (-1: none).
 * Ownership: borrowed. */
MU_EXTERN void mu_client_set_cancel_fd(struct mu_client *c, int fd);
/* The text of the last failure. Ownership: borrowed until the next call on c. */
MU_EXTERN const char *mu_client_errmsg(const struct mu_client *c);
/* The HTTP status of the last answer (0 when none arrived). */
MU_EXTERN int mu_client_last_status(const struct mu_client *c);
/* The local address used to reach the server ("127.0.0.1"): the address peers can use.
 * Returns: 0, or MU_ENOENT before the first successful connection. */
MU_EXTERN int mu_client_local_addr(const struct mu_client *c, char *out, size_t n);

/* ---------------------------------------------------------------------------------------------
 * Rendezvous
 */

struct mu_join_opts {
  const char *node_id;  /* unique per agent (required) */
  const char *addr;     /* address other nodes reach this node at (required) */
  int local_world_size; /* workers on this node (>= 1) */
  int master_port;      /* the port this node offers as MASTER_PORT if it becomes rank 0 */
  int min_nodes;        /* >= 1 */
  int max_nodes;        /* >= min_nodes */
  long last_call_ms;    /* < 0: the server's default */
  long join_timeout_ms; /* also bounds the call */
  long lease_ttl_ms;    /* < 0: the server's default */
  int budget;           /* 1: max_restarts is the run's restart budget (the first node that
                         * gives one sets it; another value is MU_ESTATE); 0: none given */
  long max_restarts;    /* with budget: the restarts the whole run may make after failures */
};

struct mu_member {
  char *node_id;
  char *addr;
  int local_world_size;
  int node_rank;
  int rank_offset;
};

struct mu_round {
  char *run_id;
  long round;
  int node_rank; /* GROUP_RANK */
  int nnodes;    /* GROUP_WORLD_SIZE */
  int rank_offset;
  int world_size;
  int local_world_size;
  char *master_addr;
  int master_port;
  long lease_ttl_ms;
  struct mu_member *members; /* nmembers entries, by node rank */
  size_t nmembers;
  int restart_count; /* the run's restarts when the round closed: TORCHELASTIC_RESTART_COUNT, the
                      * same on every node of the round */
  long max_restarts; /* the run's restart budget; -1 when it keeps none */
  char session[65];  /* this node's session ("" when the backend gives none): what tells musterd
                      * that a later call for the node comes from the node itself (docs/
                      * rendezvous.md, "Sessions"); mu_client_join keeps it for the client's
                      * later calls, mu_client_set_session hands it to another client */
};

/* Joins run_id and waits (one long poll) until the round closes. Every field of the round is
 * checked before it is returned (node_rank below nnodes, rank_offset + local_world_size within
 * world_size, master_port a port, printable addresses, the members adding up).
 * Returns: 0 with *out filled; MU_ETIMEDOUT (join_timeout), MU_EINVAL (the server rejected a
 * field), MU_ESTATE (config_mismatch), MU_ECLOSED / MU_ESHUT (run finished), MU_ECONN,
 * MU_EHTTP (not a musterd: an etcd is named as one), MU_EPROTO (an answer no sound server
 * gives: the field is named), MU_ECANCELED.
 * Ownership: *out is the caller's; release it with mu_round_release(). */
MU_EXTERN int mu_client_join(struct mu_client *c, const char *run_id, const struct mu_join_opts *o,
                             struct mu_round *out);
/* Frees the strings and members; the struct can be reused. Accepts NULL. */
MU_EXTERN void mu_round_release(struct mu_round *r);
/* The session `c` sends with every later call (a join answer's `session`, for a client of
 * another thread; NULL or "" = none). mu_client_join sets it from its answer. Copied. */
MU_EXTERN void mu_client_set_session(struct mu_client *c, const char *session);

/* Renews this node's lease. round / waiting may be NULL.
 * Returns: 0; MU_ENOENT when no longer a member (re-join); MU_ECLOSED / MU_ESHUT; MU_ECONN. */
MU_EXTERN int mu_client_heartbeat(struct mu_client *c, const char *run_id, const char *node_id,
                                  long *round, int *waiting);

enum mu_watch_event {
  MU_WATCH_NONE = 0,   /* nothing happened within the timeout */
  MU_WATCH_BROKEN,     /* a member was lost or failed: re-join */
  MU_WATCH_WAITING,    /* nodes wait to join: re-join to scale up */
  MU_WATCH_SUPERSEDED, /* a newer round exists: re-join */
  MU_WATCH_CLOSED,     /* the run finished successfully */
  MU_WATCH_SHUT,       /* the run was shut down (a fatal failure) */
};
/* Returns the event's name ("broken"). Ownership: static. */
MU_EXTERN const char *mu_watch_event_name(enum mu_watch_event ev);

/* Waits up to timeout_ms until round `round` stops being healthy for this node.
 * waiting may be NULL. Returns: 0 with *ev set, or an error as for heartbeat. */
MU_EXTERN int mu_client_watch(struct mu_client *c, const char *run_id, const char *node_id,
                              long round, long timeout_ms, enum mu_watch_event *ev, int *waiting);

/* What GET /v1/runs/{id} says of a run: enough for "waiting for 1 more node (1 of 2 joined)". */
struct mu_run_info {
  long round;  /* the latest round, 0 before the first closed */
  int nnodes;  /* members of the latest round */
  int waiting; /* pending joins */
  int min_nodes, max_nodes;
  char state[16]; /* "open", "closed", "shut" */
  char round_state[16];
  int standbys;             /* pending joins beyond a full active round */
  int unhealthy;            /* nodes whose health check failed */
  int restart_count;        /* the run's restarts so far */
  long max_restarts;        /* its budget; -1 when it keeps none */
  char unhealthy_node[128]; /* one of the unhealthy nodes, "" when none */
  char unhealthy_why[256];  /* the first line of its check's output */
};
/* Reads the run's state. Returns: 0; MU_ENOENT when the run does not exist (yet); MU_ECONN. */
MU_EXTERN int mu_client_run_info(struct mu_client *c, const char *run_id, struct mu_run_info *out);

/* Leaves the run; succeeded = 0 breaks the active round. reason may be NULL. */
MU_EXTERN int mu_client_leave(struct mu_client *c, const char *run_id, const char *node_id,
                              int succeeded, const char *reason);
/* Ends the run successfully / as failed; pending joins and watches are answered at once. */
MU_EXTERN int mu_client_close(struct mu_client *c, const char *run_id);
MU_EXTERN int mu_client_shutdown(struct mu_client *c, const char *run_id, const char *reason);

/* Waits until `count` distinct ids reached barrier `name`. generation may be NULL.
 * Returns: 0; MU_ETIMEDOUT; MU_ESTATE (count_mismatch); others as above. */
MU_EXTERN int mu_client_barrier(struct mu_client *c, const char *run_id, const char *name,
                                int count, const char *id, long timeout_ms, long *generation);

/* ---------------------------------------------------------------------------------------------
 * KV scoped to the run
 */

/* Stores len bytes under key (at most 1 MiB). version may be NULL. */
MU_EXTERN int mu_client_kv_put(struct mu_client *c, const char *run_id, const char *key,
                               const void *val, size_t len, long *version);
/* Reads key; wait_ms > 0 waits that long for it to appear.
 * Returns: 0; MU_ENOENT (absent, wait_ms <= 0); MU_ETIMEDOUT.
 * Ownership: *val is NUL-terminated (len excludes the NUL); caller frees with mu_free(). */
MU_EXTERN int mu_client_kv_get(struct mu_client *c, const char *run_id, const char *key,
                               long wait_ms, char **val, size_t *len);
/* Adds delta to the integer counter at key (created at 0). value may be NULL.
 * Returns: 0; MU_EINVAL (not_a_counter). */
MU_EXTERN int mu_client_kv_add(struct mu_client *c, const char *run_id, const char *key, long delta,
                               long *value);
/* Returns: 0, or MU_ENOENT when absent. */
MU_EXTERN int mu_client_kv_delete(struct mu_client *c, const char *run_id, const char *key);

#endif
