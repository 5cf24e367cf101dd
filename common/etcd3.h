/* The muster rendezvous on an etcd v3 cluster, through etcd's JSON gateway (/v3/kv/range, txn, put,
 * deleterange, /v3/lease/grant, keepalive, revoke, /v3/watch), with the blocking HTTP client: no
 * gRPC. The same operations and results as the /v1 client of include/muster/client.h (which
 * forwards an "etcd-v3://" endpoint here), so the agent and the workers see the same semantics on
 * either service. The protocol (keys, transactions, round trips) is in docs/rendezvous.md.
 *
 * Endpoints: "etcd-v3://M[,M...]" or "M[,M...]" where each member M is HOST:PORT,
 * http://HOST:PORT or https://HOST:PORT. Calls start on one member (spread by pid) and move
 * to the next one when it does not answer, answers 5xx or has no leader; watches resume from
 * the last revision they saw. TLS files and a token come from the environment as for the /v1
 * client (MUSTER_RDZV_CACERT, _CERT, _KEY); MUSTER_RDZV_USER + MUSTER_RDZV_PASSWORD log in with
 * etcd's /v3/auth/authenticate.
 *
 * A join grants this node a lease and keeps it alive from a thread of its own (every TTL/3,
 * on any member) until leave or free. One struct per thread, as the /v1 client.
 */
#ifndef MU_ETCD3_H
#define MU_ETCD3_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "muster/client.h"

#define MU_ETCD3_SCHEME "etcd-v3://"

struct mu_etcd3;

/* Returns: 0, or MU_EINVAL with the reason in err (n bytes). Nothing connects yet.
 * Ownership: *out is the caller's; free it with mu_etcd3_free(). */
int mu_etcd3_new(const char *endpoints, struct mu_etcd3 **out, char *err, size_t n);
/* The endpoints as a user would type them back (the form every message shows): "etcd-v3://"
 * and each member as HOST:PORT ([V6]:PORT), or https://HOST:PORT on every member when any asked
 * for TLS (then every member speaks it). The same cluster, the same TLS as the text given.
 * Returns: 0, or MU_EINVAL with the reason in err (n bytes), as mu_etcd3_new().
 * Ownership: *out is the caller's (mu_free). */
int mu_etcd3_display(const char *endpoints, char **out, char *err, size_t n);
/* Stops the lease keeper (the lease then runs out one TTL later). Accepts NULL. */
void mu_etcd3_free(struct mu_etcd3 *e);
void mu_etcd3_set_timeout(struct mu_etcd3 *e, long ms);
/* Borrowed fd; readable = every call returns MU_ECANCELED. */
void mu_etcd3_set_cancel_fd(struct mu_etcd3 *e, int fd);
/* Ownership: borrowed until the next call. */
const char *mu_etcd3_errmsg(const struct mu_etcd3 *e);
int mu_etcd3_local_addr(const struct mu_etcd3 *e, char *out, size_t n);

/* The calls of include/muster/client.h, same arguments, results and ownership. */
int mu_etcd3_join(struct mu_etcd3 *e, const char *run_id, const struct mu_join_opts *o,
                  struct mu_round *out);
int mu_etcd3_heartbeat(struct mu_etcd3 *e, const char *run_id, const char *node_id, long *round,
                       int *waiting);
int mu_etcd3_watch(struct mu_etcd3 *e, const char *run_id, const char *node_id, long round,
                   long timeout_ms, enum mu_watch_event *ev, int *waiting);
int mu_etcd3_leave(struct mu_etcd3 *e, const char *run_id, const char *node_id, int succeeded,
                   const char *reason);
int mu_etcd3_end(struct mu_etcd3 *e, const char *run_id, int succeeded, const char *reason);
int mu_etcd3_barrier(struct mu_etcd3 *e, const char *run_id, const char *name, int count,
                     const char *id, long timeout_ms, long *generation);
int mu_etcd3_kv_put(struct mu_etcd3 *e, const char *run_id, const char *key, const void *val,
                    size_t len, long *version);
int mu_etcd3_kv_get(struct mu_etcd3 *e, const char *run_id, const char *key, long wait_ms,
                    char **val, size_t *len);

int mu_etcd3_kv_add(struct mu_etcd3 *e, const char *run_id, const char *key, long delta,
                    long *value);
int mu_etcd3_kv_delete(struct mu_etcd3 *e, const char *run_id, const char *key);

/* What musterd's GET /v1/runs/{run_id} answers, read from etcd: run_id, "backend":"etcd-v3",
 * state, reason, round, round_state (joining, active, broken), min_nodes, max_nodes, nnodes,
 * waiting, members [{node_id, addr, local_world_size, node_rank, rank_offset}], config.
 * Returns: 0; MU_ENOENT when etcd has no such run; MU_EINVAL (bad id); a call's error.
 * Ownership: *out is the caller's (cJSON_Delete). */
int mu_etcd3_run_json(struct mu_etcd3 *e, const char *run_id, cJSON **out);
/* What GET /v1/runs answers: {"runs": [{run_id, state, round, round_state, nnodes, waiting}]}
 * for every run under /muster/. Returns and ownership as mu_etcd3_run_json(). */
int mu_etcd3_runs_json(struct mu_etcd3 *e, cJSON **out);
/* The cluster's revision now (what a later mu_etcd3_wait_change() waits after).
 * Returns: 0 or a call's error. */
int mu_etcd3_revision(struct mu_etcd3 *e, long long *rev);
/* Waits until a key of run_id (NULL: of any run) changes after revision `after`, at most
 * timeout_ms. Returns: 0 on a change, MU_ETIMEDOUT (no change), MU_ECONN when no member could
 * be reached all that time, MU_ECANCELED, or a call's error. */
int mu_etcd3_wait_change(struct mu_etcd3 *e, const char *run_id, long long after, long timeout_ms);
/* mu_client_run_info() on etcd. Returns: as mu_etcd3_run_json(). */
int mu_etcd3_run_info(struct mu_etcd3 *e, const char *run_id, struct mu_run_info *out);

/* ---------------------------------------------------------------------------------------------
 * The pure pieces, exported for tests/unit/test_etcd3.c only (mu__: internals)
 */

/* Base64 of n bytes; the decoding of s (NUL-terminated, *len its length; "" for bad input).
 * Ownership: the results are the caller's (mu_free). */
char *mu__etcd3_b64(const void *p, size_t n);
char *mu__etcd3_unb64(const char *s, size_t *len);
/* The end of the key range of every key that starts with prefix. Ownership: the caller's. */
char *mu__etcd3_prefix_end(const char *prefix);
/* etcd's int64 field: a string, a number, or 0 when absent. */
long long mu__etcd3_int(const cJSON *o, const char *name);
/* The bucket (0..63) of a node id in a big run. */
unsigned mu__etcd3_bucket(const char *id);
/* The JSON value of the first key of responses[i] of a txn answer (NULL: none, or not JSON).
 * Ownership: the caller's. */
cJSON *mu__etcd3_range_value(const cJSON *txn_answer, int i);
/* The header's revision of an answer (0 when absent). */
long long mu__etcd3_header_rev(const cJSON *answer);
/* Member i (NULL past the last) and its port; the member calls go to now; the next one. */
const char *mu__etcd3_member(const struct mu_etcd3 *e, size_t i, int *port);
size_t mu__etcd3_current(const struct mu_etcd3 *e);
void mu__etcd3_next(struct mu_etcd3 *e);
/* How a call takes an answer other than 200 from the current member: MU_EAUTH (a refusal, no
 * other member asked) or MU_EHTTP, *retry (ask the next member), *relogin (token expired);
 * the words in mu_etcd3_errmsg(). */
int mu__etcd3_answer(struct mu_etcd3 *e, int status, const char *body, int *retry, int *relogin);

#endif
