/* What the rendezvous state machine's files share (rdzv.c, runs.c, barrier_kv.c, codec.c):
 * the objects and the helpers that move waits and deadlines. Private to rendezvous/rdzv/:
 * everything outside uses rdzv.h.
 *
 * Ownership: the rendezvous owns its runs (a table by id and a list in creation order); a run
 * owns its nodes (a table by id; +1 reference each), barriers and KV entries (tables by name
 * and key). A closed round holds a reference on each member node, so a node removed from its
 * run stays readable while a round lists it.
 */
#ifndef MUSTERD_RDZV_RDZV_INT_H
#define MUSTERD_RDZV_RDZV_INT_H

#include <stdint.h>

#include "alloc.h"
#include "heap.h"
#include "htab.h"
#include "list.h"
#include "rdzv.h"
#include "rules.h"

#define DEFAULT_GC_MS 600000u
#define DEFAULT_LAST_CALL_MS 1000
#define DEFAULT_JOIN_TIMEOUT_MS 600000
#define DEFAULT_LEASE_TTL_MS 10000
#define MAX_TIMEOUT_MS (7LL * 24 * 3600 * 1000) /* one week */

#define RDZV_HISTORY_MAX 64       /* rounds whose timings a run keeps (the latest) */
#define RDZV_WHY_MAX 256          /* bytes kept of why a round ended */
#define RDZV_SICK_MAX 1024        /* unhealthy nodes one run keeps */
#define RDZV_SICK_OUTPUT_MAX 4096 /* bytes kept of a failed health check's output */

/* The runs one client created that are still held (the per-client run bound). */
struct rdzv_client {
  struct mu_hnode h; /* key: the client (part of the allocation) */
  uint32_t runs;
};

struct rdzv_node {
  struct mu_hnode h; /* key: node id (part of the node's allocation) */
  struct rdzv *rv;   /* whose byte count holds it */
  char *addr;
  uint32_t lws, master_port;
  uint32_t refs; /* +1 while in the run's table, +1 per round that lists it */
  int gone;      /* removed from the run */
  int left_ok;   /* left the active round with success */
  int lost;      /* a member of its round lost (lease, connection): its success may still come */
  int suspect;   /* a healthy member of the round before, left out of the latest, silent since */
  int failed;    /* its workers failed or hung in its latest round (goes after the standbys) */
  uint64_t started_round; /* the latest round whose workers it reported started */
  /* lease order (only while it has no pending join) */
  struct mu_list_node lease;
  int in_lease;
  uint32_t nwatch; /* open watches: while > 0 they hold the lease (no expiry, no heartbeat) */
  uint64_t expires;
  struct rdzv_wait *join; /* its pending join, or NULL */
  /* its place in the latest round that lists it (NULL when none) */
  struct rdzv_round *round;
  uint32_t rank;
  uint64_t rank_offset;
  char session[RDZV_SESSION_HEX + 1]; /* "" until a round first takes it in (session.c) */
};

struct barrier {
  struct mu_hnode h; /* key: name (owned) */
  uint32_t count;
  uint64_t generation;
  struct mu_list arrivals;
};

struct kv {
  struct mu_hnode h; /* key (owned) */
  char *val;         /* NULL while absent (only waiters) */
  size_t len;
  uint64_t version;
  struct mu_list waiters;
};

enum dl_kind { DL_WAIT = 1, DL_LEASE, DL_LAST_CALL, DL_GC };

/* How a round ended (its record in the run's history). Stored: never renumbered. */
enum rdzv_end {
  RDZV_END_NONE = 0,  /* still the active round */
  RDZV_END_FAILED,    /* a worker failed (a report) */
  RDZV_END_HUNG,      /* a worker hung (a report) */
  RDZV_END_LOST,      /* a member was lost: its lease expired or its watch's connection closed */
  RDZV_END_LEFT,      /* a member left as failed (its agent stopped) */
  RDZV_END_REJOINED,  /* a member joined again (its agent restarted) */
  RDZV_END_SCALE_UP,  /* members re-joined to take in waiting nodes */
  RDZV_END_UNHEALTHY, /* a member's health check failed */
  RDZV_END_CLOSED,    /* the run finished successfully */
  RDZV_END_SHUT,      /* the run was shut down */
  RDZV_END__COUNT
};
const char *rdzv_end_name(enum rdzv_end e);

/* One round in the run's history: when it closed, when its workers started on every member,
 * when the first progress came, when and why it ended. Wall-clock ms, 0 for not (yet). */
struct rdzv_hist {
  uint64_t number, world_size;
  uint32_t nnodes, restart_count, started_nodes;
  uint8_t end, counted; /* enum rdzv_end; its end counted a restart */
  int64_t closed_ms, started_ms, progress_ms, ended_ms;
  char *why; /* owned; "" when none */
};

/* A node whose health check failed (rdzv_health()). */
struct rdzv_sick {
  struct mu_hnode h;         /* key: node id (part of the allocation) */
  char *output;              /* the check's output, owned */
  int64_t since_ms, last_ms; /* wall clock: the first and the latest failed check */
  uint64_t expires;          /* rdzv_now(): forgotten then unless reported again */
  uint32_t checks;           /* failed checks reported */
};

struct rdzv_run {
  struct mu_hnode h; /* key: run id (owned) */
  struct rdzv *rv;
  struct rdzv_client *owner; /* the client that created it (NULL: restored, or not counted) */
  struct mu_list_node link;  /* on rv->runs_list */
  uint32_t min_nodes, max_nodes, last_call_ms, join_timeout_ms, lease_ttl_ms;
  enum rdzv_run_state state;
  char *reason;
  enum rdzv_round_state rstate;
  struct rdzv_round *round; /* the latest closed round, NULL before the first */
  uint32_t round_gone;      /* members of `round` removed since it closed */
  uint32_t left_ok;         /* members of `round` that left with success */
  uint32_t round_lost;      /* members of `round` lost, not heard of since (partition.c) */
  uint8_t round_spoiled;    /* a member of `round` failed, left failed, re-joined, unhealthy */
  uint8_t round_counted;    /* a failure of `round` counted a restart (given back on a loss) */
  uint8_t prev_counted;     /* the round before `round` counted one, not given back yet */
  char *shut_why;           /* a failure of `round` found no restart left: the shut's reason,
                             * carried out when the next round could close (NULL: none) */
  struct mu_htab nodes;
  struct mu_list joins;   /* pending joins, in join order */
  uint32_t joins_prev;    /* pending joins from members of `round` */
  uint32_t round_failed;  /* members of `round` (not gone) whose workers failed or hung */
  uint32_t joins_failed;  /* pending joins from those */
  struct mu_list watches; /* pending watches */
  struct mu_list leases;  /* members in lease order: the head expires first */
  struct rdzv_deadline lease_dl, last_call_dl, gc_dl;
  struct mu_htab barriers;
  struct mu_htab kv;
  size_t kv_bytes;
  uint32_t pending_other; /* barrier arrivals and KV waiters */
  uint64_t kv_version;
  /* goodput (goodput.c) */
  int64_t max_restarts;      /* -1: no budget kept by the run */
  uint32_t restarts;         /* restarts so far: the next round's restart count */
  int64_t created_ms;        /* wall clock */
  int64_t first_progress_ms; /* the run's first progress: its time to first step */
  struct rdzv_hist *hist;    /* the latest rounds, oldest first */
  uint32_t nhist;
  uint64_t hist_dropped; /* older rounds no longer kept */
  struct mu_htab sick;   /* struct rdzv_sick by node id */
};

/* Deadlines of one duration, in the order they were set: since uv_now() never goes back, that
 * is the order they fire in, so the head is the FIFO's earliest. Empty: free for any duration. */
struct rdzv_fifo {
  uint64_t ms;
  struct mu_list list;
};

#define RDZV_FIFOS 8 /* durations with a FIFO at once; a deadline of another goes to the heap */

struct rdzv {
  uv_loop_t *loop;
  uv_timer_t timer;
  uint64_t armed_at;        /* 0: not armed */
  struct mu_heap deadlines; /* the run deadlines, and the waits of durations without a FIFO */
  struct rdzv_fifo fifos[RDZV_FIFOS];
  uint64_t gc_ms;
  struct mu_htab runs;
  struct mu_list runs_list; /* in creation order */
  uint64_t bytes;           /* the memory of all /v1 state, as counted against lim.max_bytes */
  uint64_t enc;             /* its encoding, at most (against RDZV_ENC_MAX) */
  struct rdzv_limits lim;
  struct mu_htab clients; /* struct rdzv_client by client */
  struct rdzv_stats st;
  void (*done)(void *);
  void *done_data;
  rdzv_change_fn *on_change; /* the durable state changed (rdzv_set_change_hook) */
  void *on_change_data;
  rdzv_event_fn *on_event; /* rdzv_set_event_hook */
  void *on_event_data;
};

/* ---------------------------------------------------------------------------------------------
 * What each object counts against --v1-max-bytes: the memory it holds, each allocation as the
 * allocator sizes it (mu_alloc_size()), plus its share of the hash table that finds it (two
 * bucket pointers: a table holds between half and one element per bucket). So the bound stands
 * for the memory of the /v1 state (adversarial case v1_memory measures RSS against it); each
 * cost is also at least what rdzv_encode() writes for the object, so that the whole state fits
 * one snapshot record. A run's reason (at most 512 bytes) is counted up front, and so are its
 * latest round and, per node, its entry in the round's member list and in the JSON of it that
 * the round keeps once a member has been answered.
 */
#define RDZV_SLOT (2 * sizeof(void *))

/* What rdzv_encode() writes for each object at most besides its strings, counted in rv->enc
 * against RDZV_ENC_MAX, so that the whole state fits one snapshot record whatever memory
 * --v1-max-bytes allows (a run's reason, at most 512 bytes, up front). */
#define RUN_ENC (128 + 512)
#define NODE_ENC (48 + 4 + RDZV_SESSION_HEX) /* and its session */
#define KV_ENC 32
#define BARRIER_ENC 64
#define RDZV_ENC_MAX ((uint64_t)192 << 20) /* below the log's 256 MiB record */
#define RDZV_MEMBER_JSON                                                                           \
  128 /* a member's entry in the round's JSON, besides its id and address                          \
       */

/* A string of `len` bytes (and its NUL). */
static inline uint64_t rdzv_str_cost(size_t len)
{
  return mu_alloc_size(len + 1);
}
static inline uint64_t rdzv_run_cost(size_t idlen)
{
  return mu_alloc_size(sizeof(struct rdzv_run)) + rdzv_str_cost(idlen) + RDZV_SLOT +
         mu_alloc_size(sizeof(struct rdzv_round)) + rdzv_str_cost(512);
}
/* A node without its address: its allocation (the id inside), its place in the run's table and
 * in the round's member list, and its entry in the round's JSON. */
static inline uint64_t rdzv_node_cost(size_t idlen)
{
  return mu_alloc_size(sizeof(struct rdzv_node) + idlen + 1) + RDZV_SLOT +
         sizeof(struct rdzv_node *) + RDZV_MEMBER_JSON + idlen;
}
/* A node's address: the string, and its copy in the round's JSON. */
static inline uint64_t rdzv_addr_cost(size_t len)
{
  return rdzv_str_cost(len) + len;
}
static inline uint64_t rdzv_barrier_cost(size_t namelen)
{
  return mu_alloc_size(sizeof(struct barrier)) + rdzv_str_cost(namelen) + RDZV_SLOT;
}
/* A KV entry without its value. */
static inline uint64_t rdzv_kv_cost(size_t keylen)
{
  return mu_alloc_size(sizeof(struct kv)) + rdzv_str_cost(keylen) + RDZV_SLOT;
}
/* A KV value of `len` bytes; none (val NULL) costs nothing. */
static inline uint64_t rdzv_value_cost(const char *val, size_t len)
{
  return val != NULL ? rdzv_str_cost(len) : 0;
}
/* A run's round history (struct rdzv_hist, RDZV_HISTORY_MAX of them, allocated at its first
 * round), and one round's record of it besides the array: why it ended. */
#define HIST_ENC 64
static inline uint64_t rdzv_hist_array_cost(void)
{
  return mu_alloc_size(RDZV_HISTORY_MAX * sizeof(struct rdzv_hist));
}
static inline uint64_t rdzv_why_cost(size_t len)
{
  return rdzv_str_cost(len);
}
/* An unhealthy node's record (the id inside) and its place in the run's table, without its
 * check's output (a string: rdzv_str_cost()). */
#define SICK_ENC 64
static inline uint64_t rdzv_sick_cost(size_t idlen)
{
  return mu_alloc_size(sizeof(struct rdzv_sick) + idlen + 1) + RDZV_SLOT;
}

static inline struct rdzv_node *node_of(struct mu_hnode *h)
{
  return MU_CONTAINER_OF(h, struct rdzv_node, h);
}

static inline struct rdzv_wait *wait_of(struct mu_list_node *x)
{
  return MU_CONTAINER_OF(x, struct rdzv_wait, link);
}

/* rdzv.c: time, deadlines, waits */
uint64_t rdzv_now(const struct rdzv *rv);
/* The wall clock in Unix ms (the timings the API shows). */
int64_t rdzv_wall_ms(void);
/* Reports a run event to the event hook (printf-style text). */
void rdzv_note(const struct rdzv_run *run, const char *kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Queues (or moves) `d` to fire at `at` on the heap and re-arms the timer. */
void rdzv_deadline_set(struct rdzv *rv, struct rdzv_deadline *d, uint64_t at);
/* Queues (or moves) `d` to fire `ms` from now, on the FIFO of that duration when one is (or can
 * be) kept, else on the heap, and re-arms the timer. O(1) on a FIFO. */
void rdzv_deadline_after(struct rdzv *rv, struct rdzv_deadline *d, uint64_t ms);
void rdzv_deadline_clear(struct rdzv *rv, struct rdzv_deadline *d);
/* Returns: 1 while `d` is queued (heap or FIFO). */
static inline int rdzv_deadline_queued(const struct rdzv_deadline *d)
{
  return d->fifo != 0 || mu_heap_queued(&d->hn);
}
/* Tells the change hook (durability) what of the state rdzv_encode() writes has changed:
 * run `run` itself, its latest round, member `n` of that round, KV `key` of it, or that it is
 * forgotten. */
void rdzv_changed(struct rdzv_run *run, enum rdzv_change_kind kind, const struct rdzv_node *n,
                  const char *key);
/* Returns: 1 when `more` bytes of memory would pass --v1-max-bytes, or `more_enc` bytes of
 * encoding RDZV_ENC_MAX (and says which in `err`, may be NULL). */
int rdzv_over_bytes(struct rdzv *rv, uint64_t more, uint64_t more_enc, struct mu_buf *err);
void rdzv_wait_queue(struct mu_list *l, struct rdzv_wait *w);
void rdzv_wait_unqueue(struct rdzv_wait *w);
/* Moves every wait of `from` onto `to` (emptying `from`), so that a callback fired while `to`
 * drains can still unqueue any of them. */
void rdzv_wait_take(struct mu_list *to, struct mu_list *from);
/* Makes `w` (caller-owned, its cb and data set) a wait of `kind` on `run` about `obj`, not
 * queued yet, with no deadline yet. */
void rdzv_wait_start(struct rdzv_wait *w, enum rdzv_wait_kind kind, struct rdzv_run *run,
                     void *obj);
/* Detaches `w` from its list and deadline; it is no longer pending. */
void rdzv_wait_detach(struct rdzv *rv, struct rdzv_wait *w);
void rdzv_fire(struct rdzv_wait *w, const struct rdzv_answer *a);
void rdzv_fire_error(struct rdzv_wait *w, const char *run_id, int err, const char *msg);
/* Detaches barrier or KV wait `w` of `run` and drops it from the pending counts. */
void rdzv_other_detach(struct rdzv_run *run, struct rdzv_wait *w);
/* Answers `a` to every barrier or KV wait on `list` (taken off it first: a callback may queue
 * new waits there). */
void rdzv_answer_others(struct rdzv_run *run, struct mu_list *list, const struct rdzv_answer *a);
/* Printable ASCII without '"' and '\\': safe to print in JSON as is. */
int rdzv_valid_text(const char *s, size_t max);

/* runs.c: runs, rounds, members, leases */
/* A node whose id lives in the same allocation (one cache line less per lookup); refs 0. */
struct rdzv_node *rdzv_node_new(struct rdzv *rv, const char *node_id, size_t idlen);
/* Gives node `n` the address `addr` (taken; its bytes counted instead of the old one's). */
void rdzv_node_set_addr(struct rdzv_node *n, char *addr);
void rdzv_node_unref(struct rdzv_node *n);
/* Gives `n` its session if it has none yet (a round takes it in: close_round()). */
void rdzv_session_issue(struct rdzv_node *n);
struct rdzv_run *rdzv_run_new(struct rdzv *rv, const char *run_id, const struct rdzv_config *c);
struct rdzv_node *rdzv_find_node(struct rdzv_run *run, const char *node_id);
/* Answers every wait of `run` with `err` and frees it. */
void rdzv_run_free(struct rdzv_run *run);
/* Drops a reference on a round (frees it, and its hold on its members, at zero). */
void rdzv_round_unref(struct rdzv_round *r);
/* Removes `n` from `run`'s node table without telling anyone (recovery: applying a change). */
void rdzv_node_drop(struct rdzv_run *run, struct rdzv_node *n);
/* Removes every node from `run`'s table the same way (recovery: a round replaces the last). */
void rdzv_run_drop_nodes(struct rdzv_run *run);
/* Starts (or stops) the GC clock of a run that ended or has nothing left in it. */
void rdzv_gc_check(struct rdzv_run *run);
int rdzv_run_idle(const struct rdzv_run *run);
/* Appends why `run` (ended) takes no more work to `err`. Returns: RUN_CLOSED or RUN_SHUT. */
int rdzv_ended_err(const struct rdzv_run *run, struct mu_buf *err);
void rdzv_lease_renew(struct rdzv_run *run, struct rdzv_node *n);
/* Expires every lease of `run` due at `now` (its lease deadline fired). */
void rdzv_leases_expire(struct rdzv_run *run, uint64_t now);
void rdzv_maybe_close(struct rdzv_run *run, int last_call_over);
/* The run's counts as the rules read them (rules/rules.h): every decision of the rendezvous is
 * a mu_rule_*() call on this view; the code here keeps the I/O. */
void rdzv_rules_view(const struct rdzv_run *run, struct mu_rules_view *v);
/* Ends the active round of `run` (no-op when it is not active): it becomes broken, its record
 * says how (`end`, `counted`, `why`), and the watches fire. */
void rdzv_break_round(struct rdzv_run *run, enum rdzv_end end, int counted, const char *why);
/* Removes node `n` from the run; a member of the active round breaks it with `end` when
 * `breaks` (lease expired, left as failed, lost, unhealthy). */
void rdzv_node_remove(struct rdzv_run *run, struct rdzv_node *n, int breaks, enum rdzv_end end,
                      const char *why);
/* partition.c (issue 30 items 3, 4): a node lost (its lease expired, its watch's connection
 * closed), through mu_rule_lost(): the round ends, or goes on when another member succeeded, and
 * a restart counted for the round's failure is given back when the lost member had not failed. */
void rdzv_node_lost(struct rdzv_run *run, struct rdzv_node *n, const char *why);
/* Ends an open run that succeeded (mu_rule_succeeded()) or can no longer reach its minimum
 * (mu_rule_unreachable()), with the reason naming the missing nodes. */
void rdzv_check_end(struct rdzv_run *run);
/* Member `n`'s failure or hang counted (`shut_why` NULL) or found no restart left: the round
 * breaks; without a restart left the shut (`shut_why`) waits for the next round to close
 * (MU_RULE_BUDGET_SPENT) unless a loss calls it off. */
void rdzv_failure_counted(struct rdzv_run *run, enum rdzv_end end, const char *why,
                          const char *shut_why);
/* Member `n` of the latest round reported that its workers failed or hung: it goes after the
 * standbys when the next round has more candidates than places. */
void rdzv_mark_failed(struct rdzv_run *run, struct rdzv_node *n);
/* Pending joins beyond a full active round: nodes waiting to take a lost member's place. */
uint32_t rdzv_standbys(const struct rdzv_run *run);
/* The config checks of a join (fills the defaults into `out`). Returns: 0 or BAD_REQUEST. */
int rdzv_join_checks(const struct rdzv *rv, const char *run_id, const struct rdzv_join_req *req,
                     struct rdzv_config *out, struct mu_buf *err);
/* Finds the run, or creates it with `cfg` (the bounds of a new run checked). A run that exists
 * with another config, or that ended, answers as a join would. Returns: 0 with *out, or an
 * RDZV_E* code with `err` saying why. */
int rdzv_run_for(struct rdzv *rv, const char *run_id, const struct rdzv_join_req *req,
                 const struct rdzv_config *cfg, struct rdzv_run **out, struct mu_buf *err);
void rdzv_join_timed_out(struct rdzv_wait *w);
void rdzv_join_cancel(struct rdzv_wait *w);
void rdzv_watch_timed_out(struct rdzv_wait *w);
void rdzv_watch_cancel(struct rdzv_wait *w);
void rdzv_watch_gone(struct rdzv_wait *w);

/* goodput.c: the round history, unhealthy nodes */
/* A round closed: opens its record. */
void rdzv_hist_open(struct rdzv_run *run, const struct rdzv_round *r);
/* The active round's record (NULL when none). */
struct rdzv_hist *rdzv_hist_cur(struct rdzv_run *run);
/* Ends the latest round's record if it is still open. */
void rdzv_hist_end(struct rdzv_run *run, enum rdzv_end end, int counted, const char *why);
/* Appends a record as restored (codec.c); takes `why`. */
void rdzv_hist_push(struct rdzv_run *run, const struct rdzv_hist *h);
/* Forgets the history of `run` (recovery: a change says what it is now). */
void rdzv_hist_clear(struct rdzv_run *run);
/* Frees the history and the unhealthy nodes of `run`. */
void rdzv_goodput_free(struct rdzv_run *run);
/* Forgets unhealthy records past their time; Returns: how many are left. */
uint32_t rdzv_sick_count(struct rdzv_run *run);
/* Forgets node `node_id`'s unhealthy record (it joined, left, or is healthy again), and tells
 * the change hook. */
void rdzv_sick_forget(struct rdzv_run *run, const char *node_id);
/* The same without telling (recovery). Returns: 1 when there was one. */
int rdzv_sick_drop(struct rdzv_run *run, const char *node_id);
/* The kept rounds' steps, as the agents shared them in the run's KV (run->nhist of them).
 * Ownership: the caller's (mu_free); NULL without kept rounds. */
struct mu_goodput_steps *rdzv_hist_steps(struct rdzv_run *run);
/* Sets node `id`'s unhealthy record (recovery, or a report): takes `output`. */
struct rdzv_sick *rdzv_sick_set(struct rdzv_run *run, const char *id, char *output,
                                uint64_t ttl_ms);

/* barrier_kv.c: barriers and KV */
void rdzv_barrier_timed_out(struct rdzv_wait *w);
void rdzv_kv_timed_out(struct rdzv_wait *w);
void rdzv_kv_cancel(struct rdzv_wait *w);
/* Frees every barrier and KV entry of `run` (their waits answered already). */
void rdzv_barriers_kv_free(struct rdzv_run *run);
/* Answers every barrier arrival and KV waiter of `run` with `err`. */
void rdzv_barriers_kv_answer(struct rdzv_run *run, int err, const char *msg);
/* Adds a restored KV entry (codec.c). Returns: 0, or -1 when the key is there already. */
int rdzv_kv_restore(struct rdzv_run *run, char *key, char *val, size_t len, uint64_t version);
/* Sets (val != NULL: takes it) or deletes (val == NULL) KV `key` of `run` as a logged change
 * says, without waking anyone (recovery). */
void rdzv_kv_apply(struct rdzv_run *run, const char *key, char *val, size_t len, uint64_t version);

#endif
