/* Inside the client library (client/, docs/architecture.md "The client"): the handle every
 * backend shares, the operations a backend implements, and the helpers the backends' files
 * use. Private to client/: libmuster's users see include/muster/client.h, the launcher sees
 * client/include/client/backends.h as well.
 *
 * A backend is one `struct mu_client_ops` and one row of the table in backends.c. client.c
 * implements the public calls once: each clears the last error, lets a resolving backend
 * resolve (see `resolve`), calls the slot (a NULL slot is MU_ENOTSUP, said in words), and
 * checks what came back where the contract allows it (a join's round: mu__round_check()).
 */
#ifndef MU_CLIENT_INT_H
#define MU_CLIENT_INT_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "muster/client.h"

#include "client/goodput.h"

struct mu_client_ops;

/* A client: one backend's state behind one handle, used by one thread at a time. */
struct mu_client {
  const struct mu_client_ops *ops; /* the backend's; `resolve` may replace them */
  void *impl;                      /* the backend's own state, made by ops->open */
  long timeout_ms;                 /* calls that do not long-poll (default 10000) */
  int cancel_fd;                   /* readable = MU_ECANCELED; -1: none */
  int last_status;                 /* the HTTP status of the last answer; 0: none */
  char *token;                     /* mu_client_set_token's, kept for mu__client_become; NULL */
  int hold;                        /* its watches stand for the node (mu_client_set_hold) */
  char session[65];                /* the node's session, sent by the musterd backend; "" */
  char errmsg[512];                /* the words of the last failure */
};

/* One rendezvous backend. Every slot gets the client; a failing call returns a negative MU_E*
 * code and writes what went wrong, and what to do about it, into c->errmsg (mu__client_say).
 * The meaning of every call and code is include/muster/client.h's, the same on every backend
 * (docs/rendezvous.md: the observable behaviour is one). Optional slots may be NULL.
 * Adding a call: a slot here (NULL-safe in client.c: MU_ENOTSUP for backends without it), its
 * wrapper in client.c, the implementations. */
struct mu_client_ops {
  /* Lifecycle */

  /* Makes c->impl for endpoint (the text the table's row accepts: with or without its scheme).
   * Nothing connects yet. Returns: 0, or MU_EINVAL with the reason in c->errmsg. */
  int (*open)(struct mu_client *c, const char *endpoint);
  /* Frees c->impl (NULL after open failed). */
  void (*close)(struct mu_client *c);
  /* Optional: the endpoint as every message shows it and a worker is given it, with the
   * row's scheme ("etcd-v3://h:2379" for "http://h:2379/"); NULL: the text as given.
   * Returns: 0, or MU_EINVAL with the reason in err (n bytes). Ownership: *out is the
   * caller's (mu_free). */
  int (*display)(const char *endpoint, char **out, char *err, size_t n);
  /* Optional: runs before every call until it succeeds. A backend whose endpoint names
   * another service (c10d: a TCPStore port that knows its musterd) finds it here and moves
   * the client onto that service's backend with mu__client_become(), whose ops have no
   * resolve. Returns: 0, or an error for this call (tried again at the next one). */
  int (*resolve)(struct mu_client *c);
  /* Optional: told when c->timeout_ms / c->cancel_fd change (both are set before). */
  void (*set_timeout)(struct mu_client *c, long ms);
  void (*set_cancel_fd)(struct mu_client *c, int fd);
  /* Optional: a bearer token other than the environment's (muster rdzv --token). */
  void (*set_token)(struct mu_client *c, const char *token);
  /* The local address used to reach the service. Returns: 0, or MU_ENOENT. */
  int (*local_addr)(const struct mu_client *c, char *out, size_t n);

  /* The rendezvous (mu_client_join & co.; out/ev/... are zeroed by the caller) */

  int (*join)(struct mu_client *c, const char *run_id, const struct mu_join_opts *o,
              struct mu_round *out);
  int (*heartbeat)(struct mu_client *c, const char *run_id, const char *node_id, long *round,
                   int *waiting);
  int (*watch)(struct mu_client *c, const char *run_id, const char *node_id, long round,
               long timeout_ms, enum mu_watch_event *ev, int *waiting);
  int (*run_info)(struct mu_client *c, const char *run_id, struct mu_run_info *out);
  int (*leave)(struct mu_client *c, const char *run_id, const char *node_id, int succeeded,
               const char *reason);
  /* Ends the run: closed (succeeded) or shut down with reason (may be NULL). */
  int (*end)(struct mu_client *c, const char *run_id, int succeeded, const char *reason);
  int (*barrier)(struct mu_client *c, const char *run_id, const char *name, int count,
                 const char *id, long timeout_ms, long *generation);

  /* The run's KV */

  int (*kv_put)(struct mu_client *c, const char *run_id, const char *key, const void *val,
                size_t len, long *version);
  int (*kv_get)(struct mu_client *c, const char *run_id, const char *key, long wait_ms, char **val,
                size_t *len);
  int (*kv_add)(struct mu_client *c, const char *run_id, const char *key, long delta, long *value);
  int (*kv_delete)(struct mu_client *c, const char *run_id, const char *key);

  /* Reading runs (muster rdzv; backends.h) */

  /* What musterd's GET /v1/runs (run_id NULL) or GET /v1/runs/{run_id} answers, in that
   * shape. Returns: 0; MU_ENOENT (no such run). Ownership: *out is the caller's. */
  int (*runs_json)(struct mu_client *c, const char *run_id, cJSON **out);
  /* Waits up to timeout_ms for a change of the runs (run_id's; NULL: any) after *cursor; with
   * *cursor -1, returns at once. Moves *cursor past what it reported; *events gets the run
   * events that came, as musterd's /v1/events answers them (NULL: the backend keeps none).
   * Returns: 0; MU_ETIMEDOUT (nothing changed); MU_ECONN (no answer all that time).
   * Ownership: *events is the caller's. */
  int (*changes)(struct mu_client *c, const char *run_id, long long *cursor, long timeout_ms,
                 cJSON **events);
  /* Optional: the torchrun runs on the service's TCPStore listener, as musterd's GET /v1/c10d
   * (run_id NULL) or /v1/c10d/{run_id} answers (docs/c10d.md). Returns: 0; MU_ENOENT (no such
   * run, or none kept). Ownership: *out is the caller's. */
  int (*c10d_json)(struct mu_client *c, const char *run_id, cJSON **out);

  /* Goodput (client/goodput.h): what an agent reports of its workers, its health check */

  int (*report)(struct mu_client *c, const char *run_id, const char *node_id, long round,
                enum mu_report_event ev, const char *reason, struct mu_report_answer *out);
  int (*health)(struct mu_client *c, const char *run_id, const struct mu_join_opts *o, int healthy,
                const char *output, long ttl_ms, int *unhealthy);

  /* New calls go here, each NULL-safe as the ones above. */
};

/* The backends (their files): musterd's native /v1 API, an etcd v3 cluster. */
extern const struct mu_client_ops mu__client_musterd_ops;
extern const struct mu_client_ops mu__client_etcd3_ops;
/* torchrun's c10d: a musterd's TCPStore port, resolved to that musterd (c10d.c). */
extern const struct mu_client_ops mu__client_c10d_ops;

/* Writes the words of a failure into c->errmsg (cut at its size). */
void mu__client_say(struct mu_client *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Moves c onto another backend (ops) at endpoint: closes the current state, opens the new
 * one and hands it the client's timeout and cancel fd. For a `resolve` slot.
 * Returns: 0, or ops->open's error (then c has no state: every call fails until resolved). */
int mu__client_become(struct mu_client *c, const struct mu_client_ops *ops, const char *endpoint);

/* Checks every field of a join's round against the contract of include/muster/client.h and
 * the join that asked for it: round >= 1; 0 <= node_rank < nnodes; local_world_size as asked;
 * 0 <= rank_offset and rank_offset + local_world_size <= world_size (no RANK overflows);
 * master_port 1-65535; master_addr and every member's id and address printable, 1-255
 * bytes; the members (when listed) in node-rank order, their offsets adding up to
 * world_size, this node among them at its rank. Returns: 0, or MU_EPROTO with the field,
 * its value and the rule in err (n bytes). */
int mu__round_check(const struct mu_round *r, const char *run_id, const struct mu_join_opts *o,
                    char *err, size_t n);

/* Reads the integer member `name` of an answer: a JSON number that is whole and within
 * [lo, hi]. Absent: *out = dflt, unless `required`. Returns: 0, or MU_EPROTO with
 * "<what>: <name> ..." in err (n bytes). */
int mu__answer_long(const cJSON *o, const char *what, const char *name, int required, long dflt,
                    long lo, long hi, long *out, char *err, size_t n);

#endif
