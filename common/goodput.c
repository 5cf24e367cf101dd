/* Goodput accounting (goodput.h; docs/cli.md, "Goodput"). */
#include "goodput.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "alloc.h"
#include "json.h"

const char *mu_goodput_cat_name(enum mu_gp_cat c)
{
  static const char *const names[] = {
      "scheduler_wait",  "startup",        "rendezvous",
      "program_startup", "hang_detection", "infrastructure_recovery",
      "wasted_progress", "unhealthy_wait", "other"};
  return (unsigned)c < MU_GP__COUNT ? names[c] : NULL;
}

const char *mu_goodput_cat_title(enum mu_gp_cat c)
{
  static const char *const titles[] = {"waiting for the scheduler",
                                       "start-up and image pull",
                                       "rendezvous",
                                       "program start-up to the first step",
                                       "hang detection",
                                       "restart downtime",
                                       "steps lost since the last checkpoint",
                                       "unhealthy-node waits",
                                       "other (after the last round)"};
  return (unsigned)c < MU_GP__COUNT ? titles[c] : NULL;
}

enum mu_gp_end mu_goodput_end(const char *s)
{
  static const char *const names[] = {"",         "failed",   "hung",      "lost",   "left",
                                      "rejoined", "scale-up", "unhealthy", "closed", "shut"};
  for (size_t i = 1; s != NULL && i < sizeof(names) / sizeof(names[0]); i++)
    if (strcmp(s, names[i]) == 0)
      return (enum mu_gp_end)i;
  return MU_GP_END_NONE;
}

/* ---------------------------------------------------------------------------------------------
 * Steps
 */

int mu_goodput_steps_fold(struct mu_goodput_steps *s, const char *val, size_t len)
{
  char line[256];
  if (val == NULL || len == 0 || len >= sizeof(line))
    return 0;
  memcpy(line, val, len);
  line[len] = '\0';
  long long at = 0, step = -1, ckpt = -1, first = -1, first_ms = 0, total = -1;
  int n = sscanf(line, "%lld step %lld checkpoint %lld first %lld %lld total %lld", &at, &step,
                 &ckpt, &first, &first_ms, &total);
  if (n < 3 || at <= 0)
    return 0;
  if (ckpt > step) /* a `checkpoint N` line is step N too */
    step = ckpt;
  if (step > s->step || (step == s->step && at > s->step_ms)) {
    s->step = step;
    s->step_ms = at;
  }
  if (n >= 5 && first >= 0 && first_ms > 0 && (s->first < 0 || first < s->first)) {
    s->first = first;
    s->first_ms = first_ms;
  }
  s->checkpoint = ckpt > s->checkpoint ? ckpt : s->checkpoint;
  s->total = n >= 6 && total > s->total ? total : s->total;
  return 1;
}

static void put_num(struct mu_buf *b, const char *sep, const char *name, int64_t v, int64_t none)
{
  if (v == none)
    mu_buf_printf(b, "%s\"%s\":null", sep, name);
  else
    mu_buf_printf(b, "%s\"%s\":%" PRId64, sep, name, v);
}

void mu_goodput_steps_json(const struct mu_goodput_steps *s, struct mu_buf *b)
{
  if (s->step < 0) {
    mu_buf_puts(b, "null");
    return;
  }
  put_num(b, "{", "step", s->step, -1);
  put_num(b, ",", "step_ms", s->step_ms, 0);
  put_num(b, ",", "first_step", s->first, -1);
  put_num(b, ",", "first_step_ms", s->first_ms, 0);
  put_num(b, ",", "checkpoint", s->checkpoint, -1);
  put_num(b, ",", "total", s->total, -1);
  mu_buf_putc(b, '}');
}

/* ms per step in s's round, 0 when not known. */
static double step_ms_of(const struct mu_goodput_steps *s)
{
  if (s->step < 0 || s->first < 0 || s->step <= s->first || s->step_ms <= s->first_ms)
    return 0;
  return (double)(s->step_ms - s->first_ms) / (double)(s->step - s->first);
}

/* ---------------------------------------------------------------------------------------------
 * The walk: a cursor over [start, end]; each take() gives [cursor, until) to one category.
 */

#define PRODUCTIVE MU_GP__COUNT /* the slot after the categories */

struct walk {
  int64_t cur, end;
  int64_t acc[MU_GP__COUNT + 1];
  struct mu_goodput_seg *segs; /* the timeline (NULL: not wanted) */
  size_t cap, n;
};

static void seg_add(struct walk *w, int cat, int64_t until)
{
  struct mu_goodput_seg *last = w->n > 0 ? &w->segs[w->n - 1] : NULL;
  if (last != NULL && (last->cat == cat || w->n == w->cap)) { /* merged: the same, or full */
    last->to_ms = until;
    return;
  }
  w->segs[w->n++] = (struct mu_goodput_seg){cat, w->cur, until};
}

static void take(struct walk *w, int cat, int64_t until)
{
  if (until > w->end)
    until = w->end;
  if (until <= w->cur)
    return;
  if (w->segs != NULL && w->cap > 0)
    seg_add(w, cat, until);
  w->acc[cat] += until - w->cur;
  w->cur = until;
}

static int disrupted(enum mu_gp_end e)
{
  return e == MU_GP_END_FAILED || e == MU_GP_END_HUNG || e == MU_GP_END_LOST ||
         e == MU_GP_END_LEFT || e == MU_GP_END_REJOINED || e == MU_GP_END_UNHEALTHY;
}

/* The round's productive part [cursor, rend): the steps lost since the checkpoint and the hang
 * detection come off its end. Returns: the steps lost (0 when not known). */
static int64_t walk_productive(struct walk *w, const struct mu_goodput_round *r, int64_t rend)
{
  int64_t from = w->cur, hang = 0, lost_steps = 0;
  if (rend < from)
    rend = from;
  int64_t lost_from = rend;
  if (r->end == MU_GP_END_HUNG && r->hang_idle_ms > 0)
    hang = r->hang_idle_ms < rend - from ? r->hang_idle_ms : rend - from;
  const struct mu_goodput_steps *s = &r->steps;
  if (disrupted(r->end) && s->checkpoint >= 0 && s->step >= s->checkpoint) {
    double per = step_ms_of(s);
    lost_steps = s->step - s->checkpoint;
    /* when the checkpoint's step was done (at the round's rate; before the round's first
     * step when the checkpoint is older: then all its progress is lost) */
    if (per > 0)
      lost_from = s->step_ms - (int64_t)(per * (double)lost_steps);
    else
      lost_from = lost_steps == 0 && s->step_ms > 0 ? s->step_ms : from;
    if (lost_from < from)
      lost_from = from;
  }
  if (lost_from > rend - hang)
    lost_from = rend - hang;
  take(w, PRODUCTIVE, lost_from);
  take(w, MU_GP_WASTED_PROGRESS, rend - hang);
  take(w, MU_GP_HANG_DETECTION, rend);
  return lost_steps;
}

/* Round i: the gap before it closed, its start-up, its progress. ckpt: the latest checkpoint
 * of the rounds before (a restart resumes from it: a round that saved none yet loses what it
 * did since that one). */
static int64_t walk_round(struct walk *w, const struct mu_goodput_in *in, size_t i, int64_t ckpt)
{
  struct mu_goodput_round cur = in->rounds[i];
  const struct mu_goodput_round *r = &cur;
  if (cur.steps.step >= 0 && cur.steps.checkpoint < ckpt)
    cur.steps.checkpoint = ckpt;
  enum mu_gp_end prev = i > 0 ? in->rounds[i - 1].end : MU_GP_END_NONE;
  int gap = MU_GP_RENDEZVOUS, start = MU_GP_PROGRAM_STARTUP;
  if (prev == MU_GP_END_UNHEALTHY) {
    gap = MU_GP_UNHEALTHY_WAIT;
    start = MU_GP_RESTART_DOWNTIME;
  } else if (disrupted(prev)) {
    gap = start = MU_GP_RESTART_DOWNTIME;
  }
  take(w, gap, r->closed_ms);
  int64_t rend = r->ended_ms;
  if (rend <= 0)
    rend = i + 1 < in->nrounds && in->rounds[i + 1].closed_ms > 0 ? in->rounds[i + 1].closed_ms
                                                                  : w->end;
  if (r->progress_ms > 0 && r->progress_ms < rend) {
    take(w, start, r->progress_ms);
    return walk_productive(w, r, rend);
  }
  int64_t hang = r->end == MU_GP_END_HUNG ? r->hang_idle_ms : 0; /* before the first step */
  take(w, start, rend - hang);
  take(w, MU_GP_HANG_DETECTION, rend);
  return 0;
}

/* Steps per second and the ETA, from the latest round that has steps. */
static void rate(const struct mu_goodput_in *in, struct mu_goodput *out)
{
  for (size_t i = in->nrounds; i > 0; i--) {
    const struct mu_goodput_round *r = &in->rounds[i - 1];
    if (r->steps.step < 0)
      continue;
    double per = step_ms_of(&r->steps);
    out->step = r->steps.step;
    out->total = r->steps.total;
    out->steps_per_s = per > 0 ? 1000.0 / per : 0;
    int running = i == in->nrounds && r->end == MU_GP_END_NONE;
    if (running && per > 0 && out->total >= out->step)
      out->eta_ms = (int64_t)(per * (double)(out->total - out->step));
    return;
  }
}

int mu_goodput_account(const struct mu_goodput_in *in, struct mu_goodput *out)
{
  memset(out, 0, sizeof(*out));
  out->lost_steps = -1;
  out->step = out->total = out->eta_ms = -1;
  struct walk w;
  memset(&w, 0, sizeof(w));
  w.cur = in->start_ms;
  w.end = in->end_ms > in->start_ms ? in->end_ms : in->start_ms;
  w.segs = in->segs;
  w.cap = in->cap_segs;
  if (in->running_ms > 0)
    take(&w, MU_GP_SCHEDULER_WAIT, in->running_ms);
  if (in->created_ms <= 0 || in->nrounds == 0) { /* no round yet: all start-up, or waiting */
    take(&w, MU_GP_STARTUP, in->created_ms > 0 ? in->created_ms : w.end);
    take(&w, MU_GP_RENDEZVOUS, w.end);
  } else {
    take(&w, MU_GP_STARTUP, in->created_ms);
    int64_t ckpt = -1;
    for (size_t i = 0; i < in->nrounds; i++) {
      const struct mu_goodput_round *r = &in->rounds[i];
      int64_t lost = walk_round(&w, in, i, ckpt);
      if (lost > 0 || (disrupted(r->end) && (r->steps.checkpoint >= 0 || ckpt >= 0)))
        out->lost_steps = (out->lost_steps < 0 ? 0 : out->lost_steps) + lost;
      ckpt = r->steps.checkpoint > ckpt ? r->steps.checkpoint : ckpt;
    }
    const struct mu_goodput_round *last = &in->rounds[in->nrounds - 1];
    take(&w, last->end == MU_GP_END_NONE ? PRODUCTIVE : MU_GP_OTHER, w.end);
  }
  out->wall_ms = w.end - in->start_ms;
  out->productive_ms = w.acc[PRODUCTIVE];
  memcpy(out->badput_ms, w.acc, sizeof(out->badput_ms));
  rate(in, out);
  if (in->nsegs != NULL)
    *in->nsegs = w.n;
  return 0;
}

int64_t mu_goodput_badput_ms(const struct mu_goodput *g)
{
  int64_t sum = 0;
  for (int c = 0; c < MU_GP__COUNT; c++)
    sum += g->badput_ms[c];
  return sum;
}

int64_t mu_goodput_hang_idle_ms(const char *why)
{
  const char *p = why != NULL ? strstr(why, "no progress for ") : NULL;
  if (p == NULL)
    return 0;
  char *end = NULL;
  double s = strtod(p + strlen("no progress for "), &end);
  if (end == p + strlen("no progress for ") || strncmp(end, " s", 2) != 0 || s < 0 || s > 1e9)
    return 0;
  return (int64_t)(s * 1000 + 0.5);
}

/* ---------------------------------------------------------------------------------------------
 * From and to JSON
 */

static int64_t ms_of(const cJSON *o, const char *k)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsNumber(v) && v->valuedouble > 0 ? (int64_t)v->valuedouble : 0;
}

static int64_t num_of(const cJSON *o, const char *k)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsNumber(v) && v->valuedouble >= 0 ? (int64_t)v->valuedouble : -1;
}

static void round_of(const cJSON *x, struct mu_goodput_round *r)
{
  memset(r, 0, sizeof(*r));
  r->closed_ms = ms_of(x, "closed_ms");
  r->started_ms = ms_of(x, "started_ms");
  r->progress_ms = ms_of(x, "first_progress_ms");
  r->ended_ms = ms_of(x, "ended_ms");
  r->end = mu_goodput_end(mu_json_get_str(x, "end"));
  if (r->end == MU_GP_END_HUNG)
    r->hang_idle_ms = mu_goodput_hang_idle_ms(mu_json_get_str(x, "why"));
  const cJSON *s = cJSON_GetObjectItemCaseSensitive(x, "steps");
  r->steps = (struct mu_goodput_steps)MU_GOODPUT_STEPS_INIT;
  if (cJSON_IsObject(s)) {
    r->steps.step = num_of(s, "step");
    r->steps.step_ms = ms_of(s, "step_ms");
    r->steps.first = num_of(s, "first_step");
    r->steps.first_ms = ms_of(s, "first_step_ms");
    r->steps.checkpoint = num_of(s, "checkpoint");
    r->steps.total = num_of(s, "total");
  }
}

int mu_goodput_of_run(const struct cJSON *run, int64_t start_ms, int64_t end_ms,
                      struct mu_goodput *out)
{
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(run, "timings");
  const cJSON *rounds = cJSON_GetObjectItemCaseSensitive(t, "rounds");
  int n = cJSON_IsArray(rounds) ? cJSON_GetArraySize(rounds) : 0;
  struct mu_goodput_round *rs = n > 0 ? mu_calloc((size_t)n, sizeof(*rs)) : NULL;
  size_t k = 0;
  const cJSON *x;
  cJSON_ArrayForEach(x, rounds)
  {
    if (k < (size_t)n)
      round_of(x, &rs[k++]);
  }
  struct mu_goodput_in in = {start_ms, 0, ms_of(t, "created_ms"), end_ms, rs, k, NULL, 0, NULL};
  if (in.start_ms <= 0) /* the scheduler does not know: from the run's creation */
    in.start_ms = in.created_ms;
  mu_goodput_account(&in, out);
  mu_free(rs);
  return 0;
}

static double secs(int64_t ms)
{
  return (double)ms / 1000.0;
}

cJSON *mu_goodput_to_json(const struct mu_goodput *g)
{
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "wall_s", secs(g->wall_ms));
  cJSON_AddNumberToObject(o, "productive_s", secs(g->productive_ms));
  cJSON *b = cJSON_AddObjectToObject(o, "badput_s");
  for (int c = 0; c < MU_GP__COUNT; c++)
    cJSON_AddNumberToObject(b, mu_goodput_cat_name((enum mu_gp_cat)c), secs(g->badput_ms[c]));
  if (g->lost_steps >= 0)
    cJSON_AddNumberToObject(o, "lost_steps", (double)g->lost_steps);
  else
    cJSON_AddNullToObject(o, "lost_steps");
  if (g->step >= 0)
    cJSON_AddNumberToObject(o, "step", (double)g->step);
  else
    cJSON_AddNullToObject(o, "step");
  if (g->total >= 0)
    cJSON_AddNumberToObject(o, "total_steps", (double)g->total);
  else
    cJSON_AddNullToObject(o, "total_steps");
  if (g->steps_per_s > 0)
    cJSON_AddNumberToObject(o, "steps_per_s", g->steps_per_s);
  else
    cJSON_AddNullToObject(o, "steps_per_s");
  if (g->eta_ms >= 0)
    cJSON_AddNumberToObject(o, "eta_s", secs(g->eta_ms));
  else
    cJSON_AddNullToObject(o, "eta_s");
  return o;
}
