/* rules/progress.h: the job's progress rules (docs/agent.md, "Hung ranks"), pure as rules.h.
 *
 * Synchronous training moves together: one rank that progresses proves that the collectives
 * around it complete. So a hang is the job's, not a rank's: the agents share their nodes' last
 * progress through the rendezvous, and the job is hung when no rank of it progressed for the
 * timeout (before the first progress after a (re)start, for the initial timeout). Then every
 * rank's stack is taken and the suspects are named. `--hang-timeout auto` learns the timeout
 * from the job's step intervals; a run whose restarts make no progress stops retrying.
 * Nothing here reads a clock or does I/O: the agent (launcher/agent/agent_progress.c) does.
 */
#ifndef MU_RULES_PROGRESS_H
#define MU_RULES_PROGRESS_H

#include <stdint.h>

enum mu_progress_rule {
  MU_PROGRESS_OFF,        /* no hang timeout: nothing is ever hung */
  MU_PROGRESS_MOVING,     /* a rank of the job progressed within the step timeout */
  MU_PROGRESS_STARTING,   /* no progress yet since the (re)start, within the initial timeout */
  MU_PROGRESS_HUNG_START, /* none since the (re)start for the initial timeout: hung */
  MU_PROGRESS_HUNG,       /* no rank of the job progressed for the step timeout: hung */
  MU_SUSPECT_OWN_CODE,    /* a suspect: its stack ends in its own code, not in a collective */
  MU_SUSPECT_OLDEST,      /* a suspect: no stack says more, and its last progress is oldest */
  MU_SUSPECT_NONE,        /* not a suspect: waits in a collective, or progressed later */
  MU_AUTO_LEARNING,       /* auto: too few step intervals seen, the initial timeout applies */
  MU_AUTO_LEARNED,        /* auto: multiple x the slowest recent interval, at least the floor */
  MU_RETRY_GO_ON,         /* a restart made progress, or fewer than N made none */
  MU_RETRY_STOP,          /* N consecutive restarts made no progress: stop retrying */
  MU_PROGRESS_RULE_COUNT
};
const char *mu_progress_rule_name(enum mu_progress_rule r);

/* The job's progress watch at one instant. Times are ms on the caller's one clock. */
struct mu_progress_view {
  int64_t start_ms;   /* the workers' (re)start */
  int64_t last_ms;    /* the job's last progress, any rank on any node; 0: none since start */
  int64_t timeout_ms; /* the step timeout; <= 0: no hang watch */
  int64_t initial_ms; /* the timeout before the first progress */
};

/* MU_PROGRESS_OFF, _MOVING, _STARTING, _HUNG_START or _HUNG at now_ms. *idle_ms (may be NULL):
 * how long the job has been without progress (since the start when it made none). */
enum mu_progress_rule mu_rule_progress(const struct mu_progress_view *v, int64_t now_ms,
                                       int64_t *idle_ms);

/* A rank's stack after a hang. */
enum mu_stack_kind {
  MU_STACK_UNKNOWN,    /* no stack (not a Python worker, or it printed none) */
  MU_STACK_COLLECTIVE, /* innermost frame in a library: waits in a collective */
  MU_STACK_OWN_CODE,   /* innermost frame in the job's own code */
};

/* The suspects of a hang among n ranks: `last_ms[i]` is rank i's last progress (0: none),
 * `stack[i]` its stack. A rank whose stack ends in its own code is a suspect; when none does,
 * the ranks whose last progress is oldest among those that progressed (all ranks when none
 * did: a rank that never prints is not suspected for its silence while another moved).
 * Fills `verdict[i]` (MU_SUSPECT_*). Returns: the number of suspects. */
int mu_rule_suspects(int n, const int64_t *last_ms, const enum mu_stack_kind *stack,
                     enum mu_progress_rule *verdict);

/* --hang-timeout auto (docs/agent.md): MU_AUTO_MULTIPLE times the slowest of the recent step
 * intervals, at least MU_AUTO_FLOOR_MS, never less than `kept_ms` (the value the rendezvous
 * kept from an earlier attempt: it only grows), once MU_AUTO_MIN_INTERVALS were seen (or a
 * value was kept). Returns MU_AUTO_LEARNING (*timeout_ms = 0) or MU_AUTO_LEARNED. */
#define MU_AUTO_MULTIPLE 10
#define MU_AUTO_FLOOR_MS 5000
#define MU_AUTO_MIN_INTERVALS 5
enum mu_progress_rule mu_rule_auto_timeout(int64_t slowest_ms, uint32_t intervals, int64_t kept_ms,
                                           int64_t *timeout_ms);

/* Item 7, "stop retrying": `without` consecutive restarts of the run that made no progress
 * (the one that just ended included), `n` the limit (0: never stop). Returns MU_RETRY_STOP
 * when the run must end with MU_EXIT_NO_PROGRESS, else MU_RETRY_GO_ON. */
#define MU_NO_PROGRESS_RESTARTS_DEFAULT 3
enum mu_progress_rule mu_rule_retry(uint32_t without, uint32_t n);

#endif
