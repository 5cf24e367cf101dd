/* rules/rules.h: the rendezvous rules, one pure module (docs/rendezvous.md, "The rules").
 *
 * Every decision of a rendezvous has one home and one name here: who joins a round, who waits
 * as a standby, when a round closes, what a lost member, a scale-up, a failure, a hang or an
 * unhealthy node does to the round, and what counts against the run's restart budget. Nothing
 * here does I/O, reads a clock or allocates: time comes in the event, and the callers
 * (musterd's rendezvous/rdzv/, the client's etcd v3 backend) keep the long polls, the leases,
 * the timers and the storage.
 *
 * Two layers:
 *  - the rules (mu_rule_*): pure decisions over a round's counts (struct mu_rules_view), O(1),
 *    which musterd calls for every decision at any size;
 *  - the model (mu_rules_step()): a whole run of up to MU_RULES_NODES_MAX nodes as a value,
 *    driven by events and deciding through the same rules, giving the effects to carry out.
 *    The unit tests' scenario table and exhaustive checker run it (tests/unit/test_rules.c).
 */
#ifndef MU_RULES_H
#define MU_RULES_H

#include <stdint.h>

/* A round's counts, as the caller keeps them. During an active round `joins_prev` is 0: a
 * member that joins again ends the round (rule MU_RULE_REJOIN). */
struct mu_rules_view {
  uint32_t min_nodes, max_nodes; /* the run's nnodes MIN:MAX */
  uint32_t last_call_ms;         /* 0: close as soon as min_nodes and no survivor is due */
  int64_t max_restarts;          /* -1: not set (no limit) */
  uint32_t restarts;             /* the run's restart count */
  int has_round;                 /* a round has closed */
  int round_active;              /* that round is active (not broken) */
  uint32_t round_nodes;          /* its members */
  uint32_t round_gone;           /* of which lost or left */
  uint32_t round_failed;         /* of which still there and marked failed or hung */
  uint32_t joins;                /* pending joins (members re-joining, newcomers, standbys) */
  uint32_t joins_prev;           /* of which members of the round */
  uint32_t joins_failed;         /* of which members marked failed */
  uint32_t round_ok;             /* members of the round that left with success */
  uint32_t round_lost;           /* members of the round lost (lease, connection), not left */
  int round_spoiled;             /* a member of the round failed, hung, left failed, re-joined or
                                  * was unhealthy: the round cannot end succeeded */
  int round_counted;             /* a failure of the round counted a restart (refundable) */
  int shut_pending;              /* a failure of the round found no restart left */
  int prev_counted;              /* the round before counted a restart for a failure */
  uint32_t present;              /* nodes the run knows now (members, joins, standbys) */
};

/* The rules' names, as the docs and the round history use them. */
enum mu_rule {
  MU_RULE_CLOSE_FULL,         /* max_nodes joined and no healthy survivor is still due: close */
  MU_RULE_CLOSE_KNOWN,        /* every survivor of the last round re-joined: close */
  MU_RULE_CLOSE_LAST_CALL,    /* min_nodes joined and the last call ended (or is 0): close */
  MU_RULE_BELOW_MIN,          /* fewer than min_nodes joined: wait, no last call */
  MU_RULE_LAST_CALL,          /* min_nodes joined, room left: start the last call and wait */
  MU_RULE_REJOIN,             /* a member that joins again ends its round; counts nothing */
  MU_RULE_SCALE_UP,           /* newcomers wait and the round has room: it ends; counts nothing */
  MU_RULE_LOST,               /* a member lost (lease, connection) ends its round; counts nothing */
  MU_RULE_LEFT,               /* a member that left failed ends its round; counts nothing */
  MU_RULE_UNHEALTHY,          /* a member whose health check failed is removed; counts nothing */
  MU_RULE_FAILURE,            /* the first failed/hung report of an active round counts one */
  MU_RULE_FAILURE_LATE,       /* a report of a round already ended counts nothing */
  MU_RULE_FAILURE_SCALE_UP,   /* a report while the round ends for a scale-up counts nothing */
  MU_RULE_BUDGET_SPENT,       /* a counting failure with no restart left shuts the run down */
  MU_RULE_SUCCEEDED,          /* every member of the round left with success: the run closes */
  MU_RULE_STANDBY,            /* a join beyond a full active round waits as a standby */
  MU_RULE_ORDER,              /* ranks: old members by old rank, newcomers, failed members last */
  MU_RULE_LOST_AFTER_SUCCESS, /* a member lost after another succeeded: done, the round goes on */
  MU_RULE_SUCCEEDED_LOST,     /* every member succeeded or was lost after a success: closes */
  MU_RULE_FAILURE_PARTITION,  /* a healthy member of a failed round is lost: the failure was the
                               * partition's; its restart is given back (or the shut called off) */
  MU_RULE_UNREACHABLE,        /* members finished and too few nodes are left: shut at once */
  MU_RULE_SHUT_WAITS,         /* no restart left: the next round waits for the failed round's
                               * healthy survivors (a re-join confirms the shut, a loss calls it
                               * off) */
  MU_RULE_COUNT
};
const char *mu_rule_name(enum mu_rule r);

/* MU_RULE_CLOSE_*: what pending joins do to a run with no active round. Returns
 * MU_RULE_CLOSE_FULL, _KNOWN or _LAST_CALL (close now), MU_RULE_LAST_CALL (arm the last call)
 * or MU_RULE_BELOW_MIN (wait; clear the last call). `last_call_over`: its timer fired. */
enum mu_rule mu_rule_close(const struct mu_rules_view *v, int last_call_over);

/* How many pending joins make the next round (at most max_nodes). */
uint32_t mu_rule_round_size(const struct mu_rules_view *v);

/* Newcomers wait and the active round has room (its members are told "waiting"). */
int mu_rule_newcomers_wait(const struct mu_rules_view *v);

/* MU_RULE_STANDBY: the pending joins that are standbys (0 unless the active round is full). */
uint32_t mu_rule_standbys(const struct mu_rules_view *v);

/* MU_RULE_REJOIN or MU_RULE_SCALE_UP: why a member's re-join ends the active round (call it
 * with the member's join already counted in joins and joins_prev). */
enum mu_rule mu_rule_rejoin(const struct mu_rules_view *v);

/* A failed or hung report for round `report_round` by a node in round `node_round` (0: none)
 * when the run's round is `cur_round`: MU_RULE_FAILURE_LATE, MU_RULE_FAILURE_SCALE_UP (no
 * count), MU_RULE_FAILURE (count one, break the round) or MU_RULE_BUDGET_SPENT (shut). */
enum mu_rule mu_rule_failure(const struct mu_rules_view *v, uint64_t cur_round,
                             uint64_t report_round, uint64_t node_round);

/* MU_RULE_SUCCEEDED: `left_ok` of the round's members left with success, and the others (if
 * any: MU_RULE_SUCCEEDED_LOST) were lost, and nothing spoiled the round: the run closes. */
int mu_rule_succeeded(const struct mu_rules_view *v, uint32_t left_ok);

/* What the loss (lease expired, connection closed) of a node does, read before it is removed
 * (`member`: of the latest round; `failed`: it reported its workers failed or hung; `suspect`:
 * not a member, but a healthy member of the round before that never re-joined):
 *  - MU_RULE_LOST_AFTER_SUCCESS: another member left with success and nothing spoiled the
 *    round: the lost one counts as done and the round goes on (a member's success means the
 *    job's workers reached their end; the lost one may never have heard the answer);
 *  - MU_RULE_FAILURE_PARTITION: the round ended on a failure or hang that counted (or found no
 *    restart left), and the lost member had not failed: the loss caused the others' failure,
 *    so the restart is given back (the shut called off); the same for a suspect lost after the
 *    next round closed without it (a standby took its place) while the restart still stands;
 *  - MU_RULE_LOST: the round ends; counts nothing. */
enum mu_rule mu_rule_lost(const struct mu_rules_view *v, int member, int failed, int suspect);

/* MU_RULE_UNREACHABLE: members of the latest round left with success (they never join again),
 * the round is not active, none of its members still runs toward a success, and the nodes
 * the run knows are fewer than min_nodes: no round can close again, the run ends now. */
int mu_rule_unreachable(const struct mu_rules_view *v);

/* MU_RULE_ORDER: the class that places a pending join in the next round's rank order: 0 a
 * member of the last round (by its old rank), 1 a newcomer (in join order), 2 a failed member
 * placed after the standbys because there are more candidates than places. */
int mu_rule_order(const struct mu_rules_view *v, int member, int failed);

/* ---------------------------------------------------------------------------------------------
 * The model: a run as a value, for the scenario table and the exhaustive checker.
 */
#define MU_RULES_NODES_MAX 8
#define MU_RULES_EFFECTS_MAX 4

enum mu_rules_run_state { MU_RUN_OPEN, MU_RUN_CLOSED, MU_RUN_SHUT };

enum mu_rules_event_kind {
  MU_EV_JOIN,          /* node asks to join (a standby beyond a full round too) */
  MU_EV_LEAVE_OK,      /* node's workers all succeeded */
  MU_EV_LEAVE_FAIL,    /* node left failed (SIGTERM to its agent) */
  MU_EV_HEARTBEAT,     /* node renews its lease */
  MU_EV_LEASE_EXPIRED, /* node's lease ran out */
  MU_EV_CONN_LOST,     /* node's watch connection closed (musterd) / silent to a probe (etcd) */
  MU_EV_FAILED,        /* node reports a worker failure in round `round` */
  MU_EV_HUNG,          /* node reports a hung worker in round `round` */
  MU_EV_UNHEALTHY,     /* node's health check failed */
  MU_EV_TIMER,         /* the last call's timer fired (at `now`) */
  MU_EV_PROGRESS,      /* node's workers made progress (goodput: counts nothing here yet) */
  MU_EV_COUNT
};

struct mu_rules_event {
  enum mu_rules_event_kind kind;
  uint8_t node;   /* index in the model */
  uint64_t round; /* for FAILED/HUNG: the round reported (0: the node's own) */
  uint64_t now;   /* ms, the caller's clock */
};

enum mu_rules_effect_kind {
  MU_FX_ROUND_CLOSED,  /* answer the chosen joins: a new round */
  MU_FX_ROUND_ENDED,   /* tell the members' watches (broken/waiting) */
  MU_FX_ARM_LAST_CALL, /* set the last call's timer to `at` */
  MU_FX_CLEAR_LAST_CALL,
  MU_FX_RUN_ENDED, /* answer every wait: the run closed or was shut down */
};

struct mu_rules_effect {
  enum mu_rules_effect_kind kind;
  enum mu_rule rule; /* the rule that decided it */
  uint64_t at;
};

struct mu_rules_effects {
  uint32_t n;
  int counted;       /* the event counted a restart */
  enum mu_rule rule; /* the rule that decided the event (MU_RULE_COUNT: none) */
  struct mu_rules_effect fx[MU_RULES_EFFECTS_MAX];
};

struct mu_rules_node {
  uint8_t present; /* known to the run (joined once, not removed) */
  uint8_t joining; /* has a pending join */
  uint8_t member;  /* member of the current round */
  uint8_t failed;  /* member marked failed or hung */
  uint8_t rank;    /* node rank in the current round (member only) */
  uint8_t lost;    /* not present: a member of the current round lost (its success may come) */
  uint8_t suspect; /* a healthy member of the round before, not re-joined since */
  uint32_t seq;    /* join order */
};

struct mu_rules_state {
  uint32_t min_nodes, max_nodes, last_call_ms;
  int64_t max_restarts;
  uint8_t nnodes; /* nodes in the model */
  uint8_t run;    /* enum mu_rules_run_state */
  uint8_t active; /* the current round is active */
  uint64_t round; /* its number (0: none yet) */
  uint32_t restarts;
  uint32_t round_nodes, round_gone, left_ok;
  uint32_t round_lost;                    /* members of the round lost, not heard of since */
  uint8_t spoiled, counted, shut_pending; /* struct mu_rules_view's round_* */
  uint8_t prev_counted;                   /* struct mu_rules_view's prev_counted */
  uint64_t last_call_at;                  /* 0: not armed */
  uint32_t seq;
  struct mu_rules_node node[MU_RULES_NODES_MAX];
};

/* A fresh run of `nnodes` model nodes (none joined yet). */
void mu_rules_init(struct mu_rules_state *s, uint32_t min_nodes, uint32_t max_nodes,
                   uint32_t last_call_ms, int64_t max_restarts, uint8_t nnodes);

/* The counts of `s` as the rules read them. */
void mu_rules_view_of(const struct mu_rules_state *s, struct mu_rules_view *v);

/* Applies `ev` to `s`, writing what to do to `fx`. Returns 0, or -1 when the event does not
 * apply (an unknown node, a node not in the run for LEAVE/FAILED...): `s` is unchanged. */
int mu_rules_step(struct mu_rules_state *s, const struct mu_rules_event *ev,
                  struct mu_rules_effects *fx);

#endif
