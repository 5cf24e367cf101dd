/* The native rendezvous as a pure state machine: runs, rounds, members, leases, waiting nodes,
 * barriers and a small KV per run. No HTTP here: the /v1 API (v1.h) drives it with function
 * calls and answers requests from the callbacks it fires. docs/rendezvous.md is the contract.
 *
 * Files: rdzv.c (lifetime, the deadline heap and its timer, waits), runs.c (runs, rounds,
 * members and leases), barrier_kv.c (barriers and the per-run KV), codec.c (the durable state
 * as one blob); rdzv_int.h holds what they share.
 *
 * Time. Every deadline (join timeouts, watch timeouts, barrier and KV waits, last call, lease
 * expiry, GC) lives in one min-heap served by one uv_timer_t, so a pending wait costs no
 * libuv handle and can be dropped without uv_close().
 *
 * Waits. A long poll (join, watch, barrier, KV get with wait) is a caller-owned
 * `struct rdzv_wait`: the caller sets `cb` and `data`, passes it in, and gets exactly one
 * call of `cb`, unless it withdraws the wait first with rdzv_wait_cancel(). The callback
 * may fire before the call that started the wait returns (a join that closes the round answers
 * itself at once). After `cb` returns the wait is detached and the caller may free it.
 *
 * Cost. Heartbeats are O(1) (each run keeps its members in lease order, and the TTL is one per
 * run); a round that closes builds its member list once (rdzv_round_members_json()), not
 * once per node.
 */
#ifndef MUSTERD_RDZV_RDZV_H
#define MUSTERD_RDZV_RDZV_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "buf.h"
#include "heap.h"
#include "list.h"

/* Limits: every input is capped. */
#define RDZV_ID_MAX 128      /* run ids: [A-Za-z0-9._-]{1,128} */
#define RDZV_NODE_ID_MAX 256 /* node ids, barrier ids, barrier names */
#define RDZV_ADDR_MAX 255    /* a node's address */
#define RDZV_SESSION_HEX 32  /* a member's session: 128 random bits as hex digits */
#define RDZV_SESSION_HEADER "X-Muster-Session" /* where a /v1 client sends its session */
#define RDZV_KEY_MAX 512                       /* a KV key */
#define RDZV_VALUE_MAX (1 << 20)               /* one KV value */
#define RDZV_KV_BYTES_MAX (64u << 20)          /* all KV values of one run */
#define RDZV_KV_KEYS_MAX 100000                /* keys of one run */
/* The memory of all /v1 state of the server (runs, nodes, barriers, KV keys and values, each
 * counted as the allocator holds it): the server-wide bound (musterd --v1-max-bytes) that keeps
 * the memory bounded whatever the number of runs. Apart from it, the state's encoding is kept
 * under 192 MiB so that it fits one snapshot record (at most 256 MiB). */
#define RDZV_BYTES_DEFAULT ((uint64_t)128 << 20)
#define RDZV_BYTES_MAX ((uint64_t)4 << 30)
#define RDZV_BARRIERS_MAX 10000   /* barrier names of one run */
#define RDZV_RUNS_MAX 10000       /* runs held at once (musterd --v1-max-runs, at most this) */
#define RDZV_NODES_MAX 1000000    /* max_nodes of one run */
#define RDZV_MEMBERS_IN_REPLY 256 /* join answers list members up to this many nodes */
#define RDZV_RESTARTS_MAX 1000000 /* max_restarts of one run */

/* The /v1 error map: every error the API answers with. Each row: the enum suffix, the code
 * string the API puts in `"error"`, and the HTTP status it answers with. The state machine
 * returns the rows above the line; the rows below it are the API's own (v1_error.c). Rows are
 * never renumbered: a new one goes at the end. */
#define RDZV_ERR_MAP(XX)                                                                           \
  XX(BAD_REQUEST, "bad_request", 400)                                                              \
  XX(NO_SUCH_RUN, "no_such_run", 404)                                                              \
  XX(CONFIG_MISMATCH, "config_mismatch", 409)                                                      \
  XX(RUN_CLOSED, "run_closed", 410)                                                                \
  XX(RUN_SHUT, "run_shut", 410)                                                                    \
  XX(JOIN_TIMEOUT, "join_timeout", 408)                                                            \
  XX(NOT_MEMBER, "not_member", 404)                                                                \
  XX(BARRIER_TIMEOUT, "barrier_timeout", 408)                                                      \
  XX(COUNT_MISMATCH, "count_mismatch", 409)                                                        \
  XX(NO_SUCH_KEY, "no_such_key", 404)                                                              \
  XX(KV_TIMEOUT, "kv_timeout", 408)                                                                \
  XX(NOT_A_COUNTER, "not_a_counter", 409)                                                          \
  XX(TOO_LARGE, "too_large", 413)                                                                  \
  XX(TOO_MANY, "too_many", 429)                                                                    \
  XX(REPLACED, "replaced", 409)                                                                    \
  XX(SHUTTING_DOWN, "shutting_down", 503)                                                          \
  /* ---- answered by the /v1 API itself, never by the state machine ---- */                       \
  XX(NOT_FOUND, "not_found", 404)                                                                  \
  XX(METHOD_NOT_ALLOWED, "method_not_allowed", 405)                                                \
  XX(UNAUTHORIZED, "unauthorized", 401)                                                            \
  XX(FORBIDDEN, "forbidden", 403)                                                                  \
  XX(UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type", 415)                                        \
  /* a node spoke for another: its session is missing or not the node's (rdzv_session_check) */    \
  XX(WRONG_SESSION, "wrong_session", 403)

enum rdzv_err {
  RDZV_OK = 0,
#define RDZV__XX(name, code, status) RDZV_E##name,
  RDZV_ERR_MAP(RDZV__XX)
#undef RDZV__XX
      RDZV_E__COUNT
};

/* Returns: the API code string of `err` ("join_timeout"), "ok" for 0, "internal" for a value
 * off the map. Ownership: static. */
const char *rdzv_err_code(int err);

/* Returns: the HTTP status the /v1 API answers `err` with (500 for a value off the map). */
int rdzv_err_status(int err);

/* Run and round states, with names as the API shows them. */
enum rdzv_run_state { RDZV_RUN_OPEN = 0, RDZV_RUN_CLOSED, RDZV_RUN_SHUT };
enum rdzv_round_state {
  RDZV_ROUND_JOINING = 0, /* collecting nodes (no round closed yet, or the last one ended) */
  RDZV_ROUND_ACTIVE,      /* closed with its members; work runs */
  RDZV_ROUND_BROKEN,      /* a member was lost, failed or re-joined */
};
const char *rdzv_run_state_name(enum rdzv_run_state s);
const char *rdzv_round_state_name(enum rdzv_round_state s);

struct rdzv;
struct rdzv_run;
struct rdzv_node;

/* A closed round: read-only for callers, valid during the callback that hands it out. */
struct rdzv_round {
  uint64_t number;
  uint32_t nnodes;
  uint64_t world_size;
  struct rdzv_node **members; /* rank order */
  /* private */
  char *members_json; /* built on first use by rdzv_round_members_json() */
  size_t members_json_len;
  uint32_t refs; /* the run's current round, plus callbacks in flight */
};

/* What a member sees of itself and of the others (a view into the node). */
struct rdzv_member {
  const char *node_id;
  const char *addr;
  uint32_t local_world_size;
  uint32_t master_port;
  uint32_t node_rank;
  uint64_t rank_offset;
};

/* The answer handed to a wait's callback. Pointers are borrowed for the call only. */
struct rdzv_answer {
  int err;             /* RDZV_OK or RDZV_E* */
  const char *message; /* a sentence for a human when err != 0 (what went wrong, what to do) */
  const char *run_id;
  /* join */
  const struct rdzv_round *round;
  struct rdzv_member self;
  struct rdzv_member master;
  uint32_t lease_ttl_ms;
  uint32_t restart_count; /* the run's restarts so far: TORCHELASTIC_RESTART_COUNT */
  int64_t max_restarts;   /* the run's restart budget; -1 when the run keeps none */
  int with_members;       /* the join asked for the member list and the round is small enough */
  const char *session;    /* the member's session: only its own join answer carries it */
  /* heartbeat: the round state for this node ("active", "broken", "joining") */
  const char *state;
  /* watch */
  const char *event; /* "none" "broken" "waiting" "superseded" "closed" "shut" */
  uint64_t round_number;
  uint32_t waiting;
  /* barrier */
  uint64_t generation;
  uint32_t count;
  /* kv */
  const char *value;
  size_t value_len;
  uint64_t version;
};

struct rdzv_wait;
typedef void rdzv_wait_cb(struct rdzv_wait *w, const struct rdzv_answer *a);

enum rdzv_wait_kind { RDZV_W_NONE = 0, RDZV_W_JOIN, RDZV_W_WATCH, RDZV_W_BARRIER, RDZV_W_KV };

/* A deadline (private): hn.key is the time it fires, in ms of the uv_now() clock. It is queued
 * on the heap (hn.slot != 0) or on the FIFO of its duration (fifo != 0, linked by `link`). */
struct rdzv_deadline {
  struct mu_heap_node hn;
  struct mu_list_node link;
  uint8_t fifo; /* the FIFO's index + 1, or 0 */
  int kind;
};

/* What a caller may ask of a wait (set in `flags` before starting it). */
enum rdzv_wait_flags {
  /* A watch whose client goes away (rdzv_wait_gone()) while it holds a member of the active
   * round it watches: the member is lost at once, as if its lease had expired. */
  RDZV_WAIT_LOST_ON_CLOSE = 1 << 0,
};

/* A pending long poll. Caller-owned: set cb, data and flags, zero the rest (RDZV_WAIT_INIT). */
struct rdzv_wait {
  rdzv_wait_cb *cb;
  void *data;
  unsigned flags; /* enum rdzv_wait_flags */
  /* private */
  enum rdzv_wait_kind kind;
  struct rdzv_run *run;
  void *obj;            /* the node, barrier or kv entry it waits on */
  void *node;           /* watch: the member whose lease it holds (a reference), or NULL */
  struct mu_list *list; /* the list it is queued on, or NULL */
  struct mu_list_node link;
  struct rdzv_deadline dl;
  uint64_t round;   /* watch: the round watched */
  char *barrier_id; /* barrier: the arrival's id */
  int with_members; /* join: include the member list */
};

#define RDZV_WAIT_INIT(cb_, data_)                                                                 \
  {                                                                                                \
    .cb = (cb_), .data = (data_)                                                                   \
  }

/* A run's configuration as carried by a join. */
struct rdzv_config {
  uint32_t min_nodes;
  uint32_t max_nodes;      /* 0: same as min_nodes */
  int64_t last_call_ms;    /* -1: default (1000, or 0 when min == max) */
  int64_t join_timeout_ms; /* -1: default 600000 */
  int64_t lease_ttl_ms;    /* -1: default 10000 */
  int64_t max_restarts;    /* -1: the run keeps no restart budget (its agents count); else
                            * the restarts the whole run may make after failures */
};

/* A join's request. Strings are borrowed for the call; the state machine copies them. */
struct rdzv_join_req {
  const char *node_id;
  const char *addr;
  uint32_t local_world_size;
  uint32_t master_port;
  int with_members; /* 1: the answer lists the members (when nnodes <= RDZV_MEMBERS_IN_REPLY) */
  struct rdzv_config config;
  const char *client; /* who asks (a peer address), for the per-client run bound; NULL or "":
                       * not counted per client */
};

/* A run's summary for listings and GET /v1/runs/{id}. Strings borrowed until the next call. */
struct rdzv_run_info {
  const char *run_id;
  enum rdzv_run_state state;
  const char *reason; /* closed/shut reason, "" when none */
  uint64_t round;
  enum rdzv_round_state round_state;
  uint32_t nnodes;  /* members of the last closed round */
  uint32_t waiting; /* pending joins */
  uint32_t min_nodes, max_nodes;
  uint32_t last_call_ms, join_timeout_ms, lease_ttl_ms;
  uint32_t nodes;                      /* nodes known (members with a lease + pending joins) */
  const struct rdzv_round *last_round; /* NULL before the first round closes */
  uint32_t standbys;  /* pending joins beyond a full active round (or left over at its close) */
  uint32_t unhealthy; /* nodes whose last health check failed (rdzv_health()) */
  uint32_t restarts;  /* restarts of the run so far */
  int64_t max_restarts;
};

/* ---------------------------------------------------------------------------------------------
 * Lifetime
 */

/* Creates the rendezvous on `loop`. `gc_ms` is how long a closed/shut run, or one with no node,
 * is kept (0: default 600000). Returns: the object. Ownership: free with rdzv_free(). */
struct rdzv *rdzv_new(uv_loop_t *loop, uint64_t gc_ms);

/* Sets the GC delay for runs that end or go idle from now on (0: the default). */
void rdzv_set_gc_ms(struct rdzv *rv, uint64_t gc_ms);

/* The server-wide limits of the /v1 state (musterd's --v1-* options); 0 in a field keeps the
 * default. Every refusal names its option. */
struct rdzv_limits {
  uint64_t max_bytes; /* the memory of all /v1 state (RDZV_BYTES_DEFAULT, at most RDZV_BYTES_MAX) */
  uint32_t max_runs;  /* runs held at once (RDZV_RUNS_MAX, at most that) */
  uint32_t max_runs_per_client; /* runs created by one client and still held (default 1000) */
  uint32_t max_lease_ms;        /* the longest lease_ttl_ms a join may ask for (default 600000) */
};
#define RDZV_RUNS_PER_CLIENT_DEFAULT 1000
#define RDZV_MAX_LEASE_DEFAULT 600000
void rdzv_set_limits(struct rdzv *rv, const struct rdzv_limits *l);

/* Bytes of /v1 state held now and the bound (--v1-max-bytes). */
void rdzv_bytes(const struct rdzv *rv, uint64_t *used, uint64_t *max);

/* Answers every pending wait with RDZV_ESHUTTING_DOWN, frees all runs and starts closing
 * the timer handle; `done` (may be NULL) runs once the handle is closed and the memory is
 * freed, so the loop can then be closed. Accepts NULL. */
void rdzv_free(struct rdzv *rv, void (*done)(void *), void *done_data);

/* ---------------------------------------------------------------------------------------------
 * Runs and rounds
 */

/* Joins node `req->node_id` to run `run_id`, creating the run with `req->config` if needed.
 * `w` fires once: with the node's place in the round that closes, or an error
 * (config_mismatch, run_closed, run_shut, join_timeout, replaced, bad_request). A node that
 * already has a pending join replaces it (the old wait gets `replaced`).
 * Returns: 0 (the answer comes through `w`, maybe already), or RDZV_EBAD_REQUEST /
 * RDZV_ETOO_MANY when the request itself is unusable (then `w` never fires; a sentence
 * saying why is appended to `err`).
 * Ownership: `w` is borrowed until it fires or is cancelled. */
int rdzv_join(struct rdzv *rv, const char *run_id, const struct rdzv_join_req *req,
              struct rdzv_wait *w, struct mu_buf *err);

/* Renews `node_id`'s lease. Fills `out` (round, state, waiting) on success.
 * Returns: 0, RDZV_ENO_SUCH_RUN, RDZV_ENOT_MEMBER, RDZV_ERUN_CLOSED/ERUN_SHUT. */
int rdzv_heartbeat(struct rdzv *rv, const char *run_id, const char *node_id,
                   struct rdzv_answer *out);

/* Watches round `round` of `run_id` for `node_id`: fires with an event as soon as that round is
 * not a healthy active round for this node, or with "none" after `timeout_ms`.
 * Returns: 0, or RDZV_ENO_SUCH_RUN (then `w` never fires). */
int rdzv_watch(struct rdzv *rv, const char *run_id, const char *node_id, uint64_t round,
               uint64_t timeout_ms, struct rdzv_wait *w);

/* A node leaves: `failed` != 0 breaks the active round; when every member of the active round
 * has left with success, the run becomes closed.
 * Returns: 0, RDZV_ENO_SUCH_RUN, RDZV_ENOT_MEMBER. */
int rdzv_leave(struct rdzv *rv, const char *run_id, const char *node_id, int failed,
               const char *reason);

/* A node speaks only for itself (docs/rendezvous.md, "Sessions"): every member gets a random
 * session when a round first takes it in (its join answer carries it; it is kept across a
 * restart of musterd and never logged), and a join, heartbeat, watch, leave, report or health
 * check that names node `node_id` of run `run_id` must carry it in `session` (NULL: none sent).
 * A node the run does not hold, or one without a session yet (its first join still pending),
 * passes: the call itself then answers for it. With `lost_too`, a member of the latest round
 * that was lost (no longer held: a leave's late success still counts) is checked too.
 * Returns: 0, or RDZV_EWRONG_SESSION with a sentence (the problem and the fix) in `err`; then
 * nothing changed. */
int rdzv_session_check(struct rdzv *rv, const char *run_id, const char *node_id,
                       const char *session, int lost_too, struct mu_buf *err);

/* Ends a run: successfully (`shut` == 0, "closed") or as failed ("shut"). Answers every
 * pending join, watch, barrier and KV wait. Idempotent on a run already ended the same way.
 * Returns: 0, RDZV_ENO_SUCH_RUN, or RUN_CLOSED/RUN_SHUT when it already ended the other way. */
int rdzv_end(struct rdzv *rv, const char *run_id, int shut, const char *reason);

/* ---------------------------------------------------------------------------------------------
 * Goodput (goodput.c): what the agents report of their workers, the run's restart budget,
 * unhealthy nodes and where the time went (docs/rendezvous.md, "Goodput")
 */

/* What a member reports of round `round`'s workers on its node. */
enum rdzv_report_kind {
  RDZV_REPORT_STARTED = 1, /* its workers started */
  RDZV_REPORT_PROGRESS,    /* their first progress (a heartbeat file touched, an output line) */
  RDZV_REPORT_FAILED,      /* a worker failed: the round restarts, counted against the budget */
  RDZV_REPORT_HUNG,        /* a worker made no progress for the hang timeout: the same */
};
/* Returns: "started", "progress", "failed", "hung"; NULL for another value. Ownership: static. */
const char *rdzv_report_name(enum rdzv_report_kind k);
/* Returns: the kind named `s`, or 0. */
enum rdzv_report_kind rdzv_report_kind(const char *s);

/* The answer to a report. Strings borrowed until the next call. */
struct rdzv_report_answer {
  const char *state;  /* the run's state after the report: "open", "closed", "shut" */
  const char *reason; /* why it ended ("" when open) */
  uint64_t round;     /* the latest round */
  const char *round_state;
  int counted;            /* failed/hung: this report counted a restart (or, with none left,
                           * shut the run); 0 when the round had already ended another way */
  uint32_t restart_count; /* restarts of the run so far */
  int64_t max_restarts;   /* -1: the run keeps no budget */
};

/* Member `node_id` reports `kind` about round `round` (`reason`: one line, may be NULL; for
 * failed/hung what failed). started/progress fill the round's timings. failed/hung end the
 * round if it is still the active one: with a restart left the run counts it (the next round's
 * restart count is one more) and breaks the round so that every node re-joins; with none left
 * the run is shut with `reason`. A member whose workers failed or hung goes after the standbys
 * when the next round has more candidates than places.
 * Returns: 0 with `out` filled, or NO_SUCH_RUN, NOT_MEMBER (a node the run does not know),
 * RUN_CLOSED / RUN_SHUT (the run had ended before the report; `err` says why), BAD_REQUEST. */
int rdzv_report(struct rdzv *rv, const char *run_id, const char *node_id, uint64_t round,
                enum rdzv_report_kind kind, const char *reason, struct rdzv_report_answer *out,
                struct mu_buf *err);

/* A node's health check: `healthy` 0 records it as unhealthy with the check's `output` (up to
 * 4 KiB kept) for `ttl_ms` (0: three lease TTLs), creating the run with `req->config` when it
 * does not exist yet (`req` as for a join; its node_id and addr name the node). An unhealthy
 * member of the run is lost at once (its round breaks) and a pending join of it is withdrawn.
 * `healthy` 1 forgets the record. `*unhealthy` (may be NULL) gets the run's unhealthy nodes.
 * Returns: 0, or RDZV_EBAD_REQUEST / RDZV_ETOO_MANY / RDZV_ECONFIG_MISMATCH / RUN_CLOSED /
 * RUN_SHUT with `err` saying why. */
int rdzv_health(struct rdzv *rv, const char *run_id, const struct rdzv_join_req *req, int healthy,
                const char *output, uint64_t ttl_ms, uint32_t *unhealthy, struct mu_buf *err);

/* Appends `,"restart_count":..,"max_restarts":..,"standbys":..,"unhealthy":[...],"timings":{...}`
 * for GET /v1/runs/{id}: the budget, the unhealthy nodes with their checks' output, and each
 * kept round's timings (closed, workers started, first progress, ended and why) with the run's
 * time to first step and every restart's downtime. */
void rdzv_run_goodput_json(const struct rdzv_run *run, struct mu_buf *b);
/* The run's goodput over [created, its end or now] (common/goodput.h; goodput_account.c) as the
 * run JSON's "goodput" member (`,"goodput":{...}`) with its timeline. It reads the clock: not
 * part of the durable state that rdzv_run_goodput_json() writes. */
void rdzv_run_goodput_account_json(struct rdzv_run *run, struct mu_buf *b);
/* The Prometheus lines of every run's goodput (muster_goodput_*{run=...}; docs/rendezvous.md,
 * "Metrics"), for /metrics. */
void rdzv_goodput_metrics(struct rdzv *rv, struct mu_buf *out);

/* Returns: the run, or NULL. Ownership: borrowed until the next call that may change state. */
struct rdzv_run *rdzv_find(struct rdzv *rv, const char *run_id);
/* Fills `out` about `run`. */
void rdzv_run_info(const struct rdzv_run *run, struct rdzv_run_info *out);
/* KV usage of `run` for quotas (the /v1 API's usage hook): keys and value bytes held, and
 * whether `key` (may be NULL) exists with how many bytes. Ownership: borrows everything. */
void rdzv_run_kv_usage(const struct rdzv_run *run, const char *key, size_t *nkeys, size_t *nbytes,
                       size_t *old_len, int *exists);
/* Iterates the runs: pass NULL first. Returns: the next run, or NULL at the end. */
struct rdzv_run *rdzv_next_run(struct rdzv *rv, struct rdzv_run *prev);
/* Fills `out` with the view of member `i` (rank order) of `round`. */
void rdzv_round_member(const struct rdzv_round *round, uint32_t i, struct rdzv_member *out);
/* Returns: the JSON array of the round's members (built once per round), its length in
 * `*len`. Ownership: borrowed; lives as long as the round. */
const char *rdzv_round_members_json(const struct rdzv_round *round, size_t *len);

/* ---------------------------------------------------------------------------------------------
 * Barriers
 */

/* Arrives at barrier `name` of `run_id` as `id`, expecting `count` arrivals. `w` fires with the
 * generation once `count` distinct ids arrived, or barrier_timeout after `timeout_ms`, or
 * run_closed/run_shut, or `replaced` when the same id arrives again.
 * Returns: 0, or NO_SUCH_RUN / RUN_CLOSED / RUN_SHUT / COUNT_MISMATCH / TOO_MANY /
 * BAD_REQUEST (then `w` never fires; a sentence saying why is appended to `err`). */
int rdzv_barrier(struct rdzv *rv, const char *run_id, const char *name, uint32_t count,
                 uint64_t timeout_ms, const char *id, struct rdzv_wait *w, struct mu_buf *err);

/* ---------------------------------------------------------------------------------------------
 * KV
 */

/* Sets `key` to `len` bytes at `value`. Wakes every waiter on the key.
 * Returns: 0 with `*version` set, or NO_SUCH_RUN / RUN_CLOSED / RUN_SHUT / TOO_LARGE /
 * TOO_MANY. Ownership: the value is copied. */
int rdzv_kv_set(struct rdzv *rv, const char *run_id, const char *key, const void *value, size_t len,
                uint64_t *version);

/* Reads `key`. With `w` == NULL answers at once; otherwise, when the key is absent, waits up to
 * `timeout_ms` for it (then `w` fires with the value or kv_timeout / run_closed / run_shut).
 * Returns: 0 with `*out` filled (value borrowed until the next KV call), 1 when `w` is now
 * pending, or NO_SUCH_RUN / NO_SUCH_KEY (without `w`). */
int rdzv_kv_get(struct rdzv *rv, const char *run_id, const char *key, struct rdzv_answer *out,
                uint64_t timeout_ms, struct rdzv_wait *w);

/* Deletes `key`. Returns: 0, NO_SUCH_RUN, NO_SUCH_KEY. */
int rdzv_kv_del(struct rdzv *rv, const char *run_id, const char *key);

/* Adds `delta` to the integer at `key` (absent counts as 0) and stores the result as decimal
 * text. Returns: 0 with `*result`, or NO_SUCH_RUN / RUN_CLOSED / RUN_SHUT / NOT_A_COUNTER /
 * TOO_MANY / BAD_REQUEST (overflow). */
int rdzv_kv_add(struct rdzv *rv, const char *run_id, const char *key, int64_t delta,
                int64_t *result);

/* ---------------------------------------------------------------------------------------------
 * Waits
 */

/* Withdraws a pending wait (the client went away): its callback never fires. A pending join
 * withdrawn leaves the node out of the next round. Accepts a wait that is not pending. */
void rdzv_wait_cancel(struct rdzv_wait *w);
/* The same, because the client's connection closed: a watch started with
 * RDZV_WAIT_LOST_ON_CLOSE that holds a member of the active round it watches loses that member
 * at once (its round breaks); any other wait is withdrawn as by rdzv_wait_cancel(). */
void rdzv_wait_gone(struct rdzv_wait *w);

/* ---------------------------------------------------------------------------------------------
 * Run events (what musterd logs at info level and its status page lists)
 */

/* Calls `fn(data, run_id, kind, text)` on every run event: kind is "run" (created), "join",
 * "round" (closed with N nodes), "lost" (a lease expired), "leave", "broken" (and why), "end"
 * (closed or shut, with the reason). Strings are borrowed for the call. The hook must not call
 * back into the rendezvous. */
/* Appends `,"leases":[...],"barriers":[...]` for GET /v1/runs/{id} (detail.c): every node of
 * the run with what holds it ("joining": a pending join, "watching": an open watch, "lease":
 * its lease with lease_left_ms and last_seen_ms_ago), every barrier with the ids arrived. */
void rdzv_run_detail_json(const struct rdzv_run *run, struct mu_buf *b);

typedef void rdzv_event_fn(void *data, const char *run_id, const char *kind, const char *text);
void rdzv_set_event_hook(struct rdzv *rv, rdzv_event_fn *fn, void *data);

/* ---------------------------------------------------------------------------------------------
 * Durability (codec.c; the persist layer calls these)
 */

/* One change of the durable state, as the change hook sees it: what changed, not the whole
 * state. `run` (and `node`, `key`) are borrowed for the call; rdzv_encode_change() reads the
 * state they name as it is now. */
enum rdzv_change_kind {
  RDZV_CH_RUN = 1, /* a run was created, or its state, reason or round state changed */
  RDZV_CH_ROUND,   /* a round closed: its number and every member */
  RDZV_CH_MEMBER,  /* one member of the latest round: left, lost, or joined again */
  RDZV_CH_KV,      /* a KV key was set (or deleted: it holds no value now) */
  RDZV_CH_DROP,    /* the run is forgotten (GC) */
  RDZV_CH_SICK,    /* a node's health record was set (or forgotten: it holds none now) */
};
struct rdzv_change {
  enum rdzv_change_kind kind;
  const struct rdzv_run *run;
  const struct rdzv_node *node; /* RDZV_CH_MEMBER */
  const char *key;              /* RDZV_CH_KV: the key; RDZV_CH_SICK: the node id */
};
typedef void rdzv_change_fn(void *data, const struct rdzv_change *c);

/* Calls `fn(data, change)` (NULL: nothing) after every change of what rdzv_encode() writes,
 * in the order they happen: replaying them with rdzv_apply_change() over the state encoded
 * before them gives the state after them. The hook must not call back into the rendezvous. */
void rdzv_set_change_hook(struct rdzv *rv, rdzv_change_fn *fn, void *data);

/* Appends change `c` as a self-contained record body to `out`, every append checked.
 * Returns: 0, or MU_E2BIG when it would pass `out`'s cap (then `out` is left as it was). */
int rdzv_encode_change(const struct rdzv_change *c, struct mu_buf *out);

/* Applies one record body of rdzv_encode_change() to the state rdzv_restore() rebuilt (and
 * the changes applied since). Returns: 0, or -1 for a malformed body or one that does not
 * apply to this state. */
int rdzv_apply_change(struct rdzv *rv, const void *data, size_t len);

/* Forgets every run (recovery, before a newer whole state is restored). */
void rdzv_clear(struct rdzv *rv);

/* Appends the durable state (runs, their latest rounds with members, KV) to `out`, every
 * append checked. Returns: 0, or MU_E2BIG when it would pass `out`'s cap (then `out` is left
 * as it was). */
int rdzv_encode(const struct rdzv *rv, struct mu_buf *out);

/* Rebuilds the state of rdzv_encode() in an `rv` that has no run yet. Every restored member
 * gets a fresh lease (one TTL from now) to heartbeat again; a run ended or idle starts its GC
 * clock. Returns: 0, or -1 for a malformed blob (`rv` then holds whatever was read). */
int rdzv_restore(struct rdzv *rv, const void *data, size_t len);

/* ---------------------------------------------------------------------------------------------
 * Tests and metrics
 */

struct rdzv_stats {
  uint64_t runs, nodes, pending_joins, pending_watches, pending_other, rounds_closed,
      leases_expired, heartbeats;
  uint64_t wrong_sessions; /* calls refused: a node spoke for another (rdzv_session_check) */
};
void rdzv_stats(const struct rdzv *rv, struct rdzv_stats *out);

/* Runs the GC pass now (tests). */
void rdzv_gc(struct rdzv *rv);

#endif
