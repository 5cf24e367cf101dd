/* A run's goodput as musterd sees it (common/goodput.h; docs/rendezvous.md, "Goodput"): its wall
 * time from its creation (the first join) to its end, or now while it is open, as productive
 * time plus badput by category, from the round history and the steps the agents shared. The
 * run JSON's "goodput" object (with the timeline the status page draws) and /metrics'
 * muster_goodput_* series. `muster status` accounts the same records from the job's own start.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "goodput.h"
#include "json.h"
#include "rdzv_int.h"

#define SEGS_MAX (3 + 5 * RDZV_HISTORY_MAX) /* what a kept history can cut the time into */
#define METRICS_RUNS_MAX 1000               /* runs /metrics shows the goodput of */

/* Accounts `run`; segs (SEGS_MAX) may be NULL. */
static void account(struct rdzv_run *run, struct mu_goodput *g, struct mu_goodput_seg *segs,
                    size_t *nsegs)
{
  struct mu_goodput_round *rs = NULL;
  struct mu_goodput_steps *steps = rdzv_hist_steps(run);
  if (run->nhist > 0)
    rs = mu_calloc(run->nhist, sizeof(*rs));
  for (uint32_t i = 0; i < run->nhist; i++) {
    const struct rdzv_hist *h = &run->hist[i];
    rs[i].closed_ms = h->closed_ms;
    rs[i].started_ms = h->started_ms;
    rs[i].progress_ms = h->progress_ms;
    rs[i].ended_ms = h->ended_ms;
    rs[i].end = mu_goodput_end(rdzv_end_name((enum rdzv_end)h->end));
    rs[i].hang_idle_ms = h->end == RDZV_END_HUNG ? mu_goodput_hang_idle_ms(h->why) : 0;
    rs[i].steps = steps[i];
  }
  int64_t end = rdzv_wall_ms();
  if (run->state != RDZV_RUN_OPEN && run->nhist > 0 && run->hist[run->nhist - 1].ended_ms > 0)
    end = run->hist[run->nhist - 1].ended_ms; /* ended: its wall time stops there */
  struct mu_goodput_in in = {run->created_ms,
                             0,
                             run->created_ms,
                             end,
                             rs,
                             run->nhist,
                             segs,
                             segs != NULL ? SEGS_MAX : 0,
                             nsegs};
  mu_goodput_account(&in, g);
  mu_free(rs);
  mu_free(steps);
}

static void put_num(struct mu_buf *b, const char *name, int64_t v)
{
  if (v >= 0)
    mu_buf_printf(b, ",\"%s\":%" PRId64, name, v);
  else
    mu_buf_printf(b, ",\"%s\":null", name);
}

void rdzv_run_goodput_account_json(struct rdzv_run *run, struct mu_buf *b)
{
  struct mu_goodput g;
  struct mu_goodput_seg *segs = mu_malloc(SEGS_MAX * sizeof(*segs));
  size_t n = 0;
  account(run, &g, segs, &n);
  mu_buf_printf(
      b, ",\"goodput\":{\"wall_ms\":%" PRId64 ",\"productive_ms\":%" PRId64 ",\"badput_ms\":{",
      g.wall_ms, g.productive_ms);
  for (int c = 0; c < MU_GP__COUNT; c++)
    mu_buf_printf(b, "%s\"%s\":%" PRId64, c ? "," : "", mu_goodput_cat_name((enum mu_gp_cat)c),
                  g.badput_ms[c]);
  mu_buf_putc(b, '}');
  put_num(b, "lost_steps", g.lost_steps);
  put_num(b, "step", g.step);
  put_num(b, "total_steps", g.total);
  if (g.steps_per_s > 0)
    mu_buf_printf(b, ",\"steps_per_s\":%.3f", g.steps_per_s);
  else
    mu_buf_puts(b, ",\"steps_per_s\":null");
  put_num(b, "eta_ms", g.eta_ms);
  mu_buf_puts(b, ",\"timeline\":[");
  for (size_t i = 0; i < n; i++) {
    const char *c = segs[i].cat == MU_GP__COUNT ? "productive"
                                                : mu_goodput_cat_name((enum mu_gp_cat)segs[i].cat);
    mu_buf_printf(b, "%s{\"category\":\"%s\",\"from_ms\":%" PRId64 ",\"to_ms\":%" PRId64 "}",
                  i ? "," : "", c, segs[i].from_ms, segs[i].to_ms);
  }
  mu_buf_puts(b, "]}");
  mu_free(segs);
}

/* ---------------------------------------------------------------------------------------------
 * /metrics
 */

/* A label value as Prometheus's text format escapes it: \\, \" and \n. */
static void label(struct mu_buf *b, const char *s, size_t len)
{
  for (size_t i = 0; i < len; i++) {
    char c = s[i];
    if (c == '\\' || c == '"')
      mu_buf_printf(b, "\\%c", c);
    else if (c == '\n')
      mu_buf_puts(b, "\\n");
    else
      mu_buf_putc(b, c);
  }
}

static void help(struct mu_buf *out)
{
  mu_buf_puts(out,
              "# HELP muster_goodput_wall_seconds A run's wall time: from its first join to its "
              "end, or now.\n# TYPE muster_goodput_wall_seconds gauge\n"
              "# HELP muster_goodput_productive_seconds A run's time with its workers making "
              "progress that was kept.\n# TYPE muster_goodput_productive_seconds gauge\n"
              "# HELP muster_goodput_badput_seconds A run's lost time by category (productive "
              "plus every category is the wall time).\n# TYPE muster_goodput_badput_seconds gauge\n"
              "# HELP muster_goodput_lost_steps Steps done since the last checkpoint by rounds a "
              "disruption ended.\n# TYPE muster_goodput_lost_steps gauge\n"
              "# HELP muster_goodput_steps_per_second The latest round's steps per second.\n"
              "# TYPE muster_goodput_steps_per_second gauge\n"
              "# HELP muster_goodput_eta_seconds Time to the job's total steps at that rate.\n"
              "# TYPE muster_goodput_eta_seconds gauge\n");
}

static void run_metrics(struct rdzv_run *run, struct mu_buf *out)
{
  struct mu_goodput g;
  account(run, &g, NULL, NULL);
  struct mu_buf id = MU_BUF_INIT(SIZE_MAX);
  label(&id, run->h.key, run->h.len);
  const char *r = mu_buf_str(&id);
  mu_buf_printf(out, "muster_goodput_wall_seconds{run=\"%s\"} %.3f\n", r, (double)g.wall_ms / 1000);
  mu_buf_printf(out, "muster_goodput_productive_seconds{run=\"%s\"} %.3f\n", r,
                (double)g.productive_ms / 1000);
  for (int c = 0; c < MU_GP__COUNT; c++)
    mu_buf_printf(out, "muster_goodput_badput_seconds{run=\"%s\",category=\"%s\"} %.3f\n", r,
                  mu_goodput_cat_name((enum mu_gp_cat)c), (double)g.badput_ms[c] / 1000);
  if (g.lost_steps >= 0)
    mu_buf_printf(out, "muster_goodput_lost_steps{run=\"%s\"} %" PRId64 "\n", r, g.lost_steps);
  if (g.steps_per_s > 0)
    mu_buf_printf(out, "muster_goodput_steps_per_second{run=\"%s\"} %.3f\n", r, g.steps_per_s);
  if (g.eta_ms >= 0)
    mu_buf_printf(out, "muster_goodput_eta_seconds{run=\"%s\"} %.3f\n", r, (double)g.eta_ms / 1000);
  mu_buf_release(&id);
}

void rdzv_goodput_metrics(struct rdzv *rv, struct mu_buf *out)
{
  help(out);
  int n = 0;
  for (struct rdzv_run *run = rdzv_next_run(rv, NULL); run != NULL; run = rdzv_next_run(rv, run))
    if (n++ < METRICS_RUNS_MAX)
      run_metrics(run, out);
  mu_buf_printf(out,
                "# HELP muster_goodput_runs_omitted Runs past the first %d whose goodput "
                "/metrics leaves out.\n# TYPE muster_goodput_runs_omitted gauge\n"
                "muster_goodput_runs_omitted %d\n",
                METRICS_RUNS_MAX, n > METRICS_RUNS_MAX ? n - METRICS_RUNS_MAX : 0);
}
