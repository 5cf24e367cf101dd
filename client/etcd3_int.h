/* The etcd v3 backend (client/etcd3*.c), private to client/: the muster rendezvous on an etcd v3
 * cluster through etcd's JSON gateway (/v3/kv/range, txn, put, deleterange, /v3/lease/grant,
 * keepalive, revoke, /v3/watch), with the blocking HTTP client: no gRPC. The same operations
 * and results as musterd's /v1 (include/muster/client.h; the ops in etcd3.c), so the agent
 * and the workers see the same semantics on either service. The protocol (keys, transactions,
 * round trips) is in docs/rendezvous.md, "The etcd v3 backend".
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
 *
 * Keys under /muster/<run>/:
 *   c/cfg    the run's configuration (created by the first join)
 *   c/end    {"state": "closed"|"shut", "reason"} once the run ended
 *   c/round  the latest round: {"round", "max", "ttl", "nnodes", "world", "master_addr",
 *            "master_port"} and, up to ETCD3_MEMBERS_INLINE nodes, "members": [{id, addr, lws,
 *            port}]; above, "buckets": B and the members in m/<R> (all) and a/<R>/<b> (by id)
 *   m/<R>    the members of round R when it has more than ETCD3_MEMBERS_INLINE nodes
 *   a/<R>/<b>    {"round": R, "m": [[id, rank, offset, lws]...]}: the members of round R whose
 *                id hashes to bucket b (what a joining node watches to learn its rank)
 *   d/<N>/<id>   node id left round N successfully
 *   l/<N>/<id>   node id left round N failed (the round cannot end succeeded)
 *   n/<L>/<id>   node id waits for (L = N - 1: is in) round L + 1; leased
 *   b/<name>/g, b/<name>/a/<G>/<id>   barrier generation and arrivals
 *   kv/<key>     the run's KV
 * and the run's goodput (etcd3_goodput.c; docs/rendezvous.md "Goodput"):
 *   c/restarts   {"count": N}: the run's restarts (its budget is c/cfg's max_restarts)
 *   g/<R>        how round R ended, by the first report or loss: {"end", "counted", "why",
 *                "node", "time_ms"}
 *   t/<R>        round R's timings: {"closed_ms", "nnodes", "world", "restart_count"}
 *   s/<R>/<id>   node id's workers of round R started: {"t"}
 *   p/<R>        round R's first progress: {"t", "node"}
 *   q/<R>/<id>   node id asks who of round R is alive (before counting its failure)
 *   r/<R>/<id>   node id answered: alive
 *   u/<id>       node id's health check failed: {"output", "since_ms", "last_ms", "checks"};
 *                leased (the agent's lease)
 *
 * The files, one per section: etcd3_gateway.c (base64 and the JSON of etcd's gateway),
 * etcd3_transport.c (members, failover, login, calls), etcd3_watch.c (watch streams),
 * etcd3_lease.c (the lease keeper), etcd3_keys.c (keys of a run), etcd3_join.c,
 * etcd3_member.c (heartbeat, watch, leave, end), etcd3_kv.c (barriers and KV),
 * etcd3_runs.c (reading runs), etcd3.c (the backend's ops). Functions shared between them
 * are mu__etcd3_*.
 */
#ifndef MU_ETCD3_INT_H
#define MU_ETCD3_INT_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "muster/client.h"

#include "client/goodput.h"

#define MU_ETCD3_SCHEME "etcd-v3://"

#define ETCD3_MAX_ANSWER (8u << 20)
#define ETCD3_ATTEMPT_MS 2000 /* one member's share of a call before the next one is tried */
#define ETCD3_MAX_MEMBERS 16
/* A member's lease without --rdzv-conf lease_ttl: 2 s, etcd's shortest at its default election
 * timeout (1.5 times 1,000 ms, in whole seconds). A host cut off without a word is seen lost when
 * its key expires with it, plus ETCD3_LOST_GRACE_MS (docs/agent.md "A silent host"). */
#define ETCD3_TTL_MS_DEFAULT 2000
/* How long a watcher waits for a member whose key vanished to put it back before it calls the
 * member lost: its keeper renews every TTL/3 and, when a resumed leader revoked the lease, puts
 * the key again under a new one at that renewal (keeper_revive); half a TTL plus 500 ms covers
 * the renewal and the two calls. */
#define ETCD3_LOST_GRACE_MS(ttl_ms) ((ttl_ms) / 2 + 500)
#define ETCD3_LEVEL "%010ld"
/* A round of more nodes than this keeps its member list out of c/round, which every waiting
 * node watches: N watchers x an N-member value is O(N^2) bytes through the gateway (a 1,000-node
 * round took 5 s to reach its last node that way). As musterd's join answer, the list is then
 * left out of the round a join returns; each node finds its rank in its bucket a/<R>/<b>. */
#define ETCD3_MEMBERS_INLINE 256
#define ETCD3_BUCKETS                                                                              \
  64 /* one put each in the close txn, under etcd's default --max-txn-ops 128                      \
      */

struct mu_http_client;
struct mu_http_response;
struct mu_etcd3_keeper;

struct mu_etcd3_member {
  char *host;
  int port;
  struct mu_http_client *http; /* created at first use */
};

struct mu_etcd3 {
  struct mu_etcd3_member m[ETCD3_MAX_MEMBERS];
  size_t nm, cur;
  char *spec; /* the endpoints as given: the keeper opens its own client from it */
  int https;
  long timeout_ms;
  long attempt_ms; /* one member's share of a call */
  int cancel_fd;
  char errmsg[512];
  int unreached;   /* the last watch reached no member: every attempt failed to connect */
  int watch_econn; /* a watch ends with MU_ECONN once a full turn of members could not be
                    * reached (the membership watch: a node cut off learns it in seconds) */
  char addr[64];
  /* this node's membership (a join made it) */
  char lease[32];
  long ttl_ms;
  char *my_key; /* n/<L>/<id> of this node, full key */
  long level;
  struct mu_etcd3_keeper *keeper;
};

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

/* etcd3_goodput.c: client/goodput.h's calls on etcd, same arguments and results */
int mu_etcd3_report(struct mu_etcd3 *e, const char *run_id, const char *node_id, long round,
                    enum mu_report_event ev, const char *reason, struct mu_report_answer *out);
int mu_etcd3_health(struct mu_etcd3 *e, const char *run_id, const struct mu_join_opts *o,
                    int healthy, const char *output, int *unhealthy);
/* Appends to run object o (mu_etcd3_run_json()) what musterd's GET /v1/runs/{id} says of the
 * run's goodput: restart_count, max_restarts, standbys, unhealthy, timings. `cfg` is c/cfg,
 * `round` c/round, `waiting` the nodes at the latest round's level. Returns: 0 or a call's
 * error. */
int mu__etcd3_goodput_json(struct mu_etcd3 *e, const char *run, const cJSON *cfg,
                           const cJSON *round, long waiting, cJSON *o);
/* Answers a probe of round r (q/<r>/<asker>): this node is alive (r/<r>/<id>). */
int mu__etcd3_probe_answer(struct mu_etcd3 *e, const char *run, long r, const char *id);
/* Creates the run's configuration as a join would, or checks this node's against it (join's
 * begin; etcd3_join.c). Returns: 0, MU_ESTATE, MU_ECLOSED / MU_ESHUT, or a call's error. */
int mu__etcd3_run_begin(struct mu_etcd3 *e, const char *run_id, const struct mu_join_opts *o);

/* etcd3_finish.c: a finished round (issue 30 item 3; the rules' MU_RULE_SUCCEEDED_LOST) */
struct mu_rules_view;
/* Appends the five reads mu__etcd3_finish_view() takes about round n to a txn's ops: the
 * members' keys (level n - 1), d/<n>/, l/<n>/ (left failed), level n (re-joins), g/<n>. */
void mu__etcd3_add_finish_reads(cJSON *ops, const char *run, long n);
/* The rules' view of round `round` (members attached) from those reads at responses[at..]:
 * has_round, round_nodes, round_ok (left with success), round_lost (keys gone without a
 * success), round_spoiled. Returns: round_ok. */
uint32_t mu__etcd3_finish_view(const cJSON *round, const cJSON *ans, int at,
                               struct mu_rules_view *v);
/* Ends the run succeeded when round `round` (c/round's value) is finished by the rules
 * (mu_rule_succeeded: every member left with success or was lost after one did, nothing spoiled
 * it). `self` (may be NULL): the node that asks, about to re-join: a member of the round that
 * did not succeed counts as lost even while its key is there. Returns: 0 (open), MU_ECLOSED
 * (closed now or before; errmsg says why), or an error. */
int mu__etcd3_close_if_finished(struct mu_etcd3 *e, const char *run, const cJSON *round,
                                const char *self);
/* Shuts the run when round `round` ended with a member's success (that member never joins
 * again) and the nodes the run still has (members not yet re-joined, and joins) are fewer than
 * `min` (the rules' mu_rule_unreachable()): the reason names the missing members ("'a'
 * finished, 'b' lost"), as musterd's does. Costs one count when no member succeeded.
 * Returns: 0 (it can still be reached), MU_ESHUT (shut now or before; errmsg says why), or an
 * error. */
int mu__etcd3_shut_if_unreachable(struct mu_etcd3 *e, const char *run, const cJSON *round,
                                  long min);

/* ---------------------------------------------------------------------------------------------
 * Shared by the backend's files (etcd3_transport.c unless said)
 */

long long mu__etcd3_now_ms(void);
/* The wall clock in Unix ms (the timings a run keeps). */
long long mu__etcd3_wall_ms(void);
/* Writes the words of a failure into e->errmsg. */
void mu__etcd3_say(struct mu_etcd3 *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Sleeps ms or until the cancel fd is readable. Returns: 1 when canceled. */
int mu__etcd3_nap(const struct mu_etcd3 *e, long ms);

/* The member's HTTP client, logged in when MUSTER_RDZV_USER is set. Returns: 0 or an error. */
int mu__etcd3_member_client(struct mu_etcd3 *e, struct mu_etcd3_member *m);
/* An answer other than 200 from m: is it worth asking another member (*retry), or logging in
 * again (*relogin: the token expired)? Keeps the words in errmsg. Returns: MU_EHTTP or
 * MU_EAUTH. */
int mu__etcd3_error_answer(struct mu_etcd3 *e, const struct mu_etcd3_member *m, const char *path,
                           const struct mu_http_response *r, int *retry, int *relogin);
/* A failed exchange with m that is TLS refusing trust: MU_EAUTH with what to change, or 0. */
int mu__etcd3_tls_refusal(struct mu_etcd3 *e, const struct mu_etcd3_member *m);
/* Moves to the next member; after a full turn, naps a little. Returns: 1 when canceled. */
int mu__etcd3_next_member(struct mu_etcd3 *e, size_t *tried);
/* After a member said "invalid auth token": the first time in a call (*relogins 0) logs in
 * again at once; later ones wait first, doubling from 100 ms to 1.6 s, so that a member that
 * keeps refusing fresh tokens gets a few requests a second, not thousands (at most `left` ms).
 * Returns: 1 when canceled while waiting. */
int mu__etcd3_relogin(struct mu_etcd3 *e, struct mu_etcd3_member *m, int *relogins, long left);
/* POSTs body to path on the current member, then the others, until timeout_ms passed.
 * Returns: 0 with *out the parsed answer (the caller's), or an MU_E* code. */
int mu__etcd3_call(struct mu_etcd3 *e, const char *path, const cJSON *body, long timeout_ms,
                   cJSON **out);

/* etcd3_gateway.c: base64 and the JSON of etcd's gateway */

/* Base64 of n bytes; the decoding of s (NUL-terminated, *len its length; "" for bad input).
 * Ownership: the results are the caller's (mu_free). */
char *mu__etcd3_b64(const void *p, size_t n);
char *mu__etcd3_unb64(const char *s, size_t *len);
/* etcd's int64 field: a string, a number, or 0 when absent. */
long long mu__etcd3_int(const cJSON *o, const char *name);
void mu__etcd3_add_b64(cJSON *o, const char *name, const void *p, size_t n);
void mu__etcd3_add_ll(cJSON *o, const char *name, long long v);
/* The end of the key range of every key that starts with prefix. Ownership: the caller's. */
char *mu__etcd3_prefix_end(const char *prefix);

enum { E3_ALL = 0, E3_COUNT = 1, E3_KEYS = 2 }; /* what a range reads */
/* The operations of a txn. Ownership: the caller's (added to a txn's arrays). */
cJSON *mu__etcd3_op_range(const char *key, const char *end, int how);
cJSON *mu__etcd3_op_prefix(const char *prefix, int how);
cJSON *mu__etcd3_op_put(const char *key, const void *val, size_t n, const char *lease);
cJSON *mu__etcd3_op_del(const char *key, const char *end);
/* target "MOD" or "CREATE" compared with rev; end != NULL compares every key of the range. */
cJSON *mu__etcd3_cmp(const char *key, const char *end, const char *target, const char *result,
                     long long rev);

struct mu__etcd3_txn {
  cJSON *root, *compare, *success, *failure;
};
void mu__etcd3_txn_init(struct mu__etcd3_txn *t);
/* Runs t (and frees its JSON). Returns: 0 with *ans (the caller's), or a call's error. */
int mu__etcd3_txn_run(struct mu_etcd3 *e, struct mu__etcd3_txn *t, cJSON **ans);
int mu__etcd3_txn_ok(const cJSON *ans);
/* The range answer of responses[i] of a txn answer (NULL if not one); its first kv. */
const cJSON *mu__etcd3_txn_range(const cJSON *ans, int i);
const cJSON *mu__etcd3_range_first(const cJSON *range);
/* The header's revision of an answer (0 when absent). */
long long mu__etcd3_header_rev(const cJSON *ans);
/* The value of kv as a parsed JSON object (NULL if none). Ownership: caller's. */
cJSON *mu__etcd3_kv_json(const cJSON *kv);

/* etcd3_watch.c: watch streams */

struct mu__etcd3_range {
  const char *key, *end;
  int noput; /* deletes only */
};
/* Gets the events of one answer; returns nonzero to end the watch. */
typedef int (*mu__etcd3_events_fn)(void *arg, const cJSON *events);
/* Watches the ranges from revision `from` until fn says stop (0), until deadline
 * (MU_ETIMEDOUT) or the cancel fd (MU_ECANCELED); MU_ESTATE when etcd compacted the history
 * from `from`. A broken stream moves to the next member and resumes after the last event
 * seen: none lost, none twice. *next (may be NULL) gets the revision to resume from. */
int mu__etcd3_watch_ranges(struct mu_etcd3 *e, const struct mu__etcd3_range *rs, int nr,
                           long long from, long long deadline, mu__etcd3_events_fn fn, void *arg,
                           long long *next);

/* etcd3_lease.c: this node's lease and its keeper thread */

/* Renews lease; gone only when a majority of the members says so.
 * Returns: 0 with *ttl the TTL left (0: gone), or an error. */
int mu__etcd3_keepalive(struct mu_etcd3 *e, const char *lease, long *ttl);
/* Grants this node's lease and starts keeping it alive; keeps the one it has. */
int mu__etcd3_ensure_lease(struct mu_etcd3 *e, long ttl_ms);
/* This node's lease now (the keeper may have replaced it). */
void mu__etcd3_lease_now(struct mu_etcd3 *e, char *out, size_t n);
/* Tells the keeper this node's key and value (to put again if its lease is revoked). */
void mu__etcd3_keeper_set_key(struct mu_etcd3 *e, const char *key, const char *val);
/* Stops the keeper thread (the lease then runs out one TTL later). */
void mu__etcd3_keeper_stop(struct mu_etcd3 *e);
/* Stops the keeper and revokes the lease: this node's keys go at once. */
void mu__etcd3_lease_revoke(struct mu_etcd3 *e);

/* etcd3_keys.c: the keys of a run */

/* A run or node id: 1-256 printable characters without '/', '"' or '\'. */
int mu__etcd3_valid_id(const char *s);
/* "/muster/<run>/" followed by the format. Ownership: the caller's (mu_free). */
char *mu__etcd3_key_of(const char *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The end of a run: MU_ECLOSED / MU_ESHUT with the reason in errmsg, 0 while open. */
int mu__etcd3_end_of(struct mu_etcd3 *e, const char *run, const cJSON *end_range);
long mu__etcd3_round_no(const cJSON *round);
/* The index of node id in a round's members, -1 when absent. */
int mu__etcd3_member_index(const cJSON *round, const char *id);
/* The node id at the end of a key n/<L>/<id>. */
const char *mu__etcd3_id_of_key(const char *key);
/* The bucket (0..ETCD3_BUCKETS-1) of a node id in a big run: FNV-1a, the same on every node. */
unsigned mu__etcd3_bucket_of(const char *id);
/* Adds the members of round (from m/<R>) to it when c/round left them out.
 * Returns: 0, or an MU_E* code (errmsg says). */
int mu__etcd3_attach_members(struct mu_etcd3 *e, const char *run, cJSON *round);
/* The round a join returns to node index `me` of round value `round` (c/round with its
 * members), every number checked for its range. Returns: 0, or MU_EPROTO naming the field in
 * errmsg (out released). Ownership: out is the caller's (mu_round_release). */
int mu__etcd3_fill_round(struct mu_etcd3 *e, const char *run, const cJSON *round, int me,
                         struct mu_round *out);
/* Node id's entry [id, rank, offset, lws] in a bucket value of round r; NULL when absent. */
const cJSON *mu__etcd3_bucket_find(const cJSON *bucket, long r, const char *id);
/* A round of more than ETCD3_MEMBERS_INLINE nodes as a join returns it: this node's place (its
 * bucket entry), the master, the sizes; the member list left out (as musterd does). Every
 * number checked for its range. Returns: 0, or MU_EPROTO naming the field in errmsg (out
 * released). Ownership: out is the caller's (mu_round_release). */
int mu__etcd3_fill_round_bucket(struct mu_etcd3 *e, const char *run, const cJSON *round,
                                const cJSON *entry, struct mu_round *out);

/* ---------------------------------------------------------------------------------------------
 * For tests/unit/test_etcd3.c only
 */

/* The JSON value of the first key of responses[i] of a txn answer (NULL: none, or not JSON).
 * Ownership: the caller's. */
cJSON *mu__etcd3_range_value(const cJSON *txn_answer, int i);
/* Member i (NULL past the last) and its port; the member calls go to now; the next one. */
const char *mu__etcd3_member(const struct mu_etcd3 *e, size_t i, int *port);
size_t mu__etcd3_current(const struct mu_etcd3 *e);
void mu__etcd3_next(struct mu_etcd3 *e);
/* How a call takes an answer other than 200 from the current member: MU_EAUTH (a refusal, no
 * other member asked) or MU_EHTTP, *retry (ask the next member), *relogin (token expired);
 * the words in mu_etcd3_errmsg(). */
int mu__etcd3_answer(struct mu_etcd3 *e, int status, const char *body, int *retry, int *relogin);

#endif
