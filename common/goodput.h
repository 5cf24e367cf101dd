/* Goodput accounting (docs/cli.md, "Goodput"): where a job's wall time went, as productive time
 * plus badput in named categories (Google's ml-goodput-measurement names where they apply:
 * program_startup, infrastructure_recovery (restart downtime), wasted_progress, other), from the
 * run's round records (GET /v1/runs/{id}'s timings, the same shape on musterd and etcd v3) and the
 * steps the agents share (the heartbeat file's `step N[/T]` and `checkpoint N` lines).
 *
 * mu_goodput_account() is pure: it walks the wall time once with a cursor and gives each
 * millisecond to exactly one category, so productive_ms + the badput always equals wall_ms,
 * whatever the records say (rounds out of order, times before the start or after the end).
 * Library code: never prints.
 */
#ifndef MU_GOODPUT_H
#define MU_GOODPUT_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

/* The badput categories, in the order a job meets them. Stored names (metrics labels, JSON
 * keys): never renamed. */
enum mu_gp_cat {
  MU_GP_SCHEDULER_WAIT = 0, /* submitted, not yet running (when the scheduler says when) */
  MU_GP_STARTUP,    /* running (image pulled, container and agent starting) to the first join */
  MU_GP_RENDEZVOUS, /* the first join to the first round closing; a scale-up's re-join */
  MU_GP_PROGRAM_STARTUP,  /* the round closed to the first step (imports, compilation) */
  MU_GP_HANG_DETECTION,   /* a hung round's time without progress before it was declared hung */
  MU_GP_RESTART_DOWNTIME, /* a disruption's end of round to the next round's first step */
  MU_GP_WASTED_PROGRESS,  /* the steps since the last checkpoint, redone after a disruption */
  MU_GP_UNHEALTHY_WAIT,   /* a round ended by a failed health check to the next round closing */
  MU_GP_OTHER,            /* after the run's last round (the job's processes ending) */
  MU_GP__COUNT
};

/* The metrics label and JSON key of c ("scheduler_wait", ...), or NULL out of range. */
const char *mu_goodput_cat_name(enum mu_gp_cat c);
/* What c is, in words for a table ("waiting for the scheduler", ...). */
const char *mu_goodput_cat_title(enum mu_gp_cat c);

/* How a round ended, as the run JSON's "end" names it ("" while active). */
enum mu_gp_end {
  MU_GP_END_NONE = 0,
  MU_GP_END_FAILED,
  MU_GP_END_HUNG,
  MU_GP_END_LOST,
  MU_GP_END_LEFT,
  MU_GP_END_REJOINED,
  MU_GP_END_SCALE_UP,
  MU_GP_END_UNHEALTHY,
  MU_GP_END_CLOSED,
  MU_GP_END_SHUT,
};
/* The end named s ("failed", ...); MU_GP_END_NONE for "" or an unknown name. */
enum mu_gp_end mu_goodput_end(const char *s);

/* The steps of one round as the agents shared them (each node's `muster.progress.R.N` key),
 * folded over its nodes with mu_goodput_steps_fold(). -1 (0 for times) when not known. */
struct mu_goodput_steps {
  int64_t step, step_ms;   /* the highest step reported, and when its node last progressed */
  int64_t first, first_ms; /* the lowest first step of the round on a node, and when it was seen */
  int64_t checkpoint;      /* the latest checkpoint */
  int64_t total;           /* the job's total steps (`step N/T`) */
};
#define MU_GOODPUT_STEPS_INIT                                                                      \
  {                                                                                                \
    -1, 0, -1, 0, -1, -1                                                                           \
  }

/* Folds one node's progress line into s. The agent's line is
 * `<ms> step N checkpoint C [first S <ms> [total T]]` (-1: not known). Returns: 1 when the line
 * was read, 0 when it is no such line (s unchanged). */
int mu_goodput_steps_fold(struct mu_goodput_steps *s, const char *val, size_t len);

/* Writes s as a JSON object ({"step":..,"step_ms":..,"first_step":..,"first_step_ms":..,
 * "checkpoint":..,"total":..}, null for not known), or `null` when no step is known. */
void mu_goodput_steps_json(const struct mu_goodput_steps *s, struct mu_buf *b);

/* One round of the run (its record). Times are wall-clock ms, 0 for not (yet). */
struct mu_goodput_round {
  int64_t closed_ms, started_ms, progress_ms, ended_ms;
  enum mu_gp_end end;
  int64_t hang_idle_ms; /* a hung round: the job's time without progress when declared hung */
  struct mu_goodput_steps steps;
};

/* One stretch of the wall time in one category (a timeline's bar). */
struct mu_goodput_seg {
  int cat; /* enum mu_gp_cat, or MU_GP__COUNT for productive */
  int64_t from_ms, to_ms;
};

struct mu_goodput_in {
  int64_t start_ms;   /* the wall time's start: the job's submission */
  int64_t running_ms; /* when the scheduler ran it; 0: not known (no scheduler wait counted) */
  int64_t created_ms; /* the run's first join; 0: the job has no rendezvous run (yet) */
  int64_t end_ms;     /* the job's end, or now while it runs */
  const struct mu_goodput_round *rounds; /* oldest first */
  size_t nrounds;
  /* Optional: the timeline, in order, adjacent stretches of one category merged (at most
   * 3 + 5 per round; more are merged into the last). NULL: not wanted. */
  struct mu_goodput_seg *segs;
  size_t cap_segs, *nsegs;
};

struct mu_goodput {
  int64_t wall_ms, productive_ms;
  int64_t badput_ms[MU_GP__COUNT];
  int64_t lost_steps;  /* steps done since the last checkpoint by disrupted rounds; -1: not known */
  int64_t step, total; /* the latest step and the total (-1: not known) */
  double steps_per_s;  /* in the latest round with steps; 0: not known */
  int64_t eta_ms;      /* to the total at that rate, while the job runs; -1: not known */
};

/* Accounts in's wall time [start_ms, end_ms] (productive plus badput, see the enum) into out.
 * Pure: no clock is read. Returns: 0. */
int mu_goodput_account(const struct mu_goodput_in *in, struct mu_goodput *out);

/* The badput's sum. */
int64_t mu_goodput_badput_ms(const struct mu_goodput *g);

/* The idle time in a hung round's why ("... no progress for 4 s ..."), ms; 0 when none. */
int64_t mu_goodput_hang_idle_ms(const char *why);

struct cJSON;
/* Accounts the job whose run JSON is `run` (GET /v1/runs/{id}, or what the local scheduler
 * keeps) over [start_ms, end_ms]: its timings.rounds with their steps. run may be NULL (no
 * rendezvous). Returns: 0. */
int mu_goodput_of_run(const struct cJSON *run, int64_t start_ms, int64_t end_ms,
                      struct mu_goodput *out);

/* `out` as JSON: {"wall_s":..,"productive_s":..,"badput_s":{category: seconds},"lost_steps":..,
 * "step":..,"total_steps":..,"steps_per_s":..,"eta_s":..} (null for not known).
 * Ownership: the caller's (cJSON_Delete). */
struct cJSON *mu_goodput_to_json(const struct mu_goodput *g);

#endif
