/* muster status's goodput (docs/cli.md, "Goodput"): where the job's wall time went, from its
 * rendezvous run (common/goodput.h), as a short table, as --json's `goodput` object, with the
 * steps per second, the ETA and --hang-timeout auto's value in use. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "cmd_util.h"
#include "goodput.h"
#include "json.h"

/* The job's wall time, Unix ms: from its start (the scheduler's, else the run's creation) to
 * its end, or now while it runs. */
static void wall_of(const struct mu_app_status *st, int64_t *start, int64_t *end)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  *start = st->started_at > 0 ? (int64_t)(st->started_at * 1000) : 0;
  *end = st->ended_at > 0 ? (int64_t)(st->ended_at * 1000)
                          : (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int has_rounds(const cJSON *run)
{
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(run, "timings");
  return cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(t, "rounds")) > 0;
}

int mu_cli_goodput_of(const struct cJSON *run, const struct mu_app_status *st, struct mu_goodput *g)
{
  if (run == NULL || !has_rounds(run))
    return 0;
  int64_t start, end;
  wall_of(st, &start, &end);
  mu_goodput_of_run(run, start, end, g);
  return g->wall_ms > 0;
}

/* "Steps: 250 of 1000, 9.8 steps/s, ETA 76.5s; 20 lost since the last checkpoint" */
static void steps_line(const struct mu_goodput *g)
{
  if (g->step < 0 && g->lost_steps < 0)
    return;
  printf("    Steps:");
  if (g->step >= 0)
    printf(" %lld", (long long)g->step);
  if (g->total > 0)
    printf(" of %lld", (long long)g->total);
  if (g->steps_per_s > 0)
    printf(", %.2f steps/s", g->steps_per_s);
  if (g->eta_ms >= 0)
    printf(", ETA %.1fs", (double)g->eta_ms / 1000);
  if (g->lost_steps >= 0)
    printf("%s%lld lost since the last checkpoint", g->step >= 0 ? "; " : " ",
           (long long)g->lost_steps);
  printf("\n");
}

void mu_cli_goodput_table(const struct cJSON *run, const struct mu_app_status *st)
{
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(run, "timings");
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(t, "hang_timeout_auto_ms");
  if (cJSON_IsNumber(a) && a->valuedouble > 0)
    printf("    Hang Timeout: %.2fs in use (--hang-timeout auto, kept by the rendezvous)\n",
           a->valuedouble / 1000);
  struct mu_goodput g;
  if (!mu_cli_goodput_of(run, st, &g))
    return;
  double wall = (double)g.wall_ms;
  printf("    Goodput: %.1f%% of %.2fs wall (productive + badput by category):\n",
         100.0 * (double)g.productive_ms / wall, wall / 1000);
  printf("      %-24s %9.2fs %5.1f%%\n", "productive", (double)g.productive_ms / 1000,
         100.0 * (double)g.productive_ms / wall);
  for (int c = 0; c < MU_GP__COUNT; c++)
    printf("      %-24s %9.2fs %5.1f%%  %s\n", mu_goodput_cat_name((enum mu_gp_cat)c),
           (double)g.badput_ms[c] / 1000, 100.0 * (double)g.badput_ms[c] / wall,
           mu_goodput_cat_title((enum mu_gp_cat)c));
  steps_line(&g);
}

void mu_cli_goodput_add_json(struct cJSON *o, const struct cJSON *run,
                             const struct mu_app_status *st)
{
  struct mu_goodput g;
  if (!mu_cli_goodput_of(run, st, &g)) {
    cJSON_AddNullToObject(o, "goodput");
    return;
  }
  cJSON *j = mu_goodput_to_json(&g);
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(run, "timings");
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(t, "hang_timeout_auto_ms");
  if (cJSON_IsNumber(a) && a->valuedouble > 0)
    cJSON_AddNumberToObject(j, "hang_timeout_auto_s", a->valuedouble / 1000);
  else
    cJSON_AddNullToObject(j, "hang_timeout_auto_s");
  cJSON_AddItemToObject(o, "goodput", j);
}
