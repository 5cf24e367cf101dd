/* Tests for common/goodput.c: the wall time as productive time plus badput by category (rows:
 * a clean run, one restart with checkpoints, a hang, an unhealthy node, no rendezvous, a
 * scheduler wait), the sum that always holds (on garbage too), steps per second and the ETA,
 * the agents' progress lines and the run JSON. */
#include <string.h>

#include <cjson/cJSON.h>

#include "alloc.h"
#include "buf.h"
#include "goodput.h"
#include "task.h"

#define T0 1700000000000LL
#define NO_STEPS MU_GOODPUT_STEPS_INIT

struct gp_row {
  const char *name;
  int64_t running, created, end; /* relative to T0; 0: not known */
  struct mu_goodput_round rounds[3];
  size_t nrounds;
  int64_t want[MU_GP__COUNT]; /* by category */
  int64_t productive, lost_steps;
};

/* Round times relative to T0 (0 stays 0). */
static struct mu_goodput_round at(struct mu_goodput_round r)
{
  int64_t *t[] = {&r.closed_ms, &r.started_ms,    &r.progress_ms,
                  &r.ended_ms,  &r.steps.step_ms, &r.steps.first_ms};
  for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
    *t[i] = *t[i] > 0 ? *t[i] + T0 : 0;
  return r;
}

static void account_row(const struct gp_row *row, struct mu_goodput *g)
{
  struct mu_goodput_round rs[3];
  for (size_t i = 0; i < row->nrounds; i++)
    rs[i] = at(row->rounds[i]);
  struct mu_goodput_in in = {T0,
                             row->running ? T0 + row->running : 0,
                             row->created ? T0 + row->created : 0,
                             T0 + row->end,
                             rs,
                             row->nrounds,
                             NULL,
                             0,
                             NULL};
  mu_goodput_account(&in, g);
}

TEST(goodput__wall_is_productive_plus_badput_by_category)
{
  enum { SW = MU_GP_SCHEDULER_WAIT, SU = MU_GP_STARTUP, RV = MU_GP_RENDEZVOUS };
  enum { PS = MU_GP_PROGRAM_STARTUP, HD = MU_GP_HANG_DETECTION, RD = MU_GP_RESTART_DOWNTIME };
  enum { WP = MU_GP_WASTED_PROGRESS, UW = MU_GP_UNHEALTHY_WAIT, OT = MU_GP_OTHER };
  static const struct gp_row rows[] = {
      {"clean",
       0,
       2000,
       21000,
       {{3000, 3500, 8000, 20000, MU_GP_END_CLOSED, 0, NO_STEPS}},
       1,
       {[SU] = 2000, [RV] = 1000, [PS] = 5000, [OT] = 1000},
       12000,
       -1},
      /* one restart: checkpoint 100, failed at step 120 (100 ms a step): 20 steps and the
       * 100 ms after the last step are lost; the restart's downtime is its end to the next
       * round's first progress */
      {"one restart",
       0,
       1000,
       30500,
       {{2000, 2500, 4000, 16000, MU_GP_END_FAILED, 0, {120, 15900, 1, 4000, 100, -1}},
        {17000, 17500, 19000, 30000, MU_GP_END_CLOSED, 0, {250, 29900, 101, 19000, 250, -1}}},
       2,
       {[SU] = 1000, [RV] = 1000, [PS] = 2000, [WP] = 2100, [RD] = 3000, [OT] = 500},
       9900 + 11000,
       20},
      /* hung: the 4 s without progress before it was declared are hang detection; the second
       * round has not progressed yet (now = 15 s) */
      {"hang",
       0,
       500,
       15000,
       {{1000, 1200, 2000, 10000, MU_GP_END_HUNG, 4000, NO_STEPS},
        {11000, 11200, 0, 0, MU_GP_END_NONE, 0, NO_STEPS}},
       2,
       {[SU] = 500, [RV] = 500, [PS] = 1000, [HD] = 4000, [RD] = 5000},
       4000,
       -1},
      /* hung before the first step (the initial timeout): start-up, then the idle time */
      {"hang before the first step",
       0,
       500,
       12000,
       {{1000, 1200, 0, 10000, MU_GP_END_HUNG, 6000, NO_STEPS},
        {10500, 10600, 11000, 0, MU_GP_END_NONE, 0, NO_STEPS}},
       2,
       {[SU] = 500, [RV] = 500, [PS] = 3000, [HD] = 6000, [RD] = 1000},
       1000,
       -1},
      /* an unhealthy node: the wait for its replacement, then the restart */
      {"unhealthy",
       0,
       500,
       12000,
       {{1000, 1200, 2000, 5000, MU_GP_END_UNHEALTHY, 0, NO_STEPS},
        {9000, 9200, 10000, 0, MU_GP_END_NONE, 0, NO_STEPS}},
       2,
       {[SU] = 500, [RV] = 500, [PS] = 1000, [UW] = 4000, [RD] = 1000},
       3000 + 2000,
       -1},
      /* a scale-up is no disruption: its gap is rendezvous, its start program start-up */
      {"scale-up",
       0,
       500,
       9000,
       {{1000, 1200, 2000, 5000, MU_GP_END_SCALE_UP, 0, NO_STEPS},
        {6000, 6200, 7000, 0, MU_GP_END_NONE, 0, NO_STEPS}},
       2,
       {[SU] = 500, [RV] = 500 + 1000, [PS] = 1000 + 1000},
       3000 + 2000,
       -1},
      /* the scheduler's wait, when it says when the job ran; no round yet: the rendezvous */
      {"scheduler wait, waiting for nodes",
       3000,
       4000,
       10000,
       {{0}},
       0,
       {[SW] = 3000, [SU] = 1000, [RV] = 6000},
       0,
       -1},
      {"no rendezvous", 0, 0, 7000, {{0}}, 0, {[SU] = 7000}, 0, -1},
      /* a checkpoint older than the round's first step: all its progress is lost */
      {"checkpoint before the round",
       0,
       1000,
       12000,
       {{2000, 2500, 3000, 8000, MU_GP_END_LOST, 0, {60, 7900, 10, 3000, 5, -1}},
        {9000, 9100, 10000, 0, MU_GP_END_NONE, 0, NO_STEPS}},
       2,
       {[SU] = 1000, [RV] = 1000, [PS] = 1000, [WP] = 5000, [RD] = 2000},
       2000,
       55},
      /* a restart resumes from checkpoint 100 and fails at step 130 before saving another:
       * its 30 steps since checkpoint 100 are lost too */
      {"checkpoint of the round before",
       0,
       1000,
       25000,
       {{2000, 2500, 3000, 15000, MU_GP_END_FAILED, 0, {119, 14800, 1, 3000, 100, -1}},
        {16000, 16500, 17000, 20000, MU_GP_END_FAILED, 0, {130, 19900, 101, 17000, -1, -1}},
        {21000, 21500, 22000, 0, MU_GP_END_NONE, 0, {135, 24500, 101, 22000, -1, -1}}},
       3,
       {[SU] = 1000, [RV] = 1000, [PS] = 1000, [WP] = 2100 + 3000, [RD] = 2000 + 2000},
       9900 + 3000,
       19 + 30},
  };
  for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
    struct mu_goodput g;
    account_row(&rows[i], &g);
    if (g.wall_ms != rows[i].end || g.productive_ms + mu_goodput_badput_ms(&g) != g.wall_ms)
      MU__FAIL("%s: wall %lld, productive %lld + badput %lld", rows[i].name, (long long)g.wall_ms,
               (long long)g.productive_ms, (long long)mu_goodput_badput_ms(&g));
    for (int c = 0; c < MU_GP__COUNT; c++)
      if (g.badput_ms[c] != rows[i].want[c])
        MU__FAIL("%s: %s is %lld ms, want %lld", rows[i].name,
                 mu_goodput_cat_name((enum mu_gp_cat)c), (long long)g.badput_ms[c],
                 (long long)rows[i].want[c]);
    if (g.productive_ms != rows[i].productive || g.lost_steps != rows[i].lost_steps)
      MU__FAIL("%s: productive %lld lost steps %lld, want %lld and %lld", rows[i].name,
               (long long)g.productive_ms, (long long)g.lost_steps, (long long)rows[i].productive,
               (long long)rows[i].lost_steps);
  }
}

/* Whatever the records say (out of order, before the start, after the end, negative), every
 * millisecond of the wall time is in exactly one place. */
TEST(goodput__the_sum_holds_on_garbage)
{
  uint64_t x = 88172645463325252ULL;
  for (int k = 0; k < 20000; k++) {
    struct mu_goodput_round rs[3];
    struct mu_goodput_seg segs[12];
    size_t nsegs = 99;
    int64_t *f[3][8];
    for (int i = 0; i < 3; i++) {
      memset(&rs[i], 0, sizeof(rs[i]));
      rs[i].steps = (struct mu_goodput_steps)NO_STEPS;
      int64_t *p[8] = {&rs[i].closed_ms,      &rs[i].started_ms,      &rs[i].progress_ms,
                       &rs[i].ended_ms,       &rs[i].hang_idle_ms,    &rs[i].steps.step_ms,
                       &rs[i].steps.first_ms, &rs[i].steps.checkpoint};
      memcpy(f[i], p, sizeof(p));
      for (int j = 0; j < 8; j++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        *f[i][j] = (x % 3 == 0) ? 0 : T0 + (int64_t)(x % 40000) - 5000;
      }
      rs[i].steps.checkpoint = (int64_t)(x % 50) - 10;
      rs[i].steps.step = (int64_t)(x % 70) - 5;
      rs[i].steps.first = (int64_t)(x % 30) - 5;
      rs[i].end = (enum mu_gp_end)(x % 10);
    }
    struct mu_goodput_in in = {T0,
                               (x & 1) ? T0 + 700 : 0,
                               (x & 2) ? T0 + 1500 : 0,
                               T0 + (int64_t)(x % 35000),
                               rs,
                               (size_t)(x % 4),
                               segs,
                               (size_t)(x % 12),
                               &nsegs};
    struct mu_goodput g;
    mu_goodput_account(&in, &g);
    ASSERT_EQ(g.wall_ms, (int64_t)(x % 35000));
    ASSERT_EQ(g.productive_ms + mu_goodput_badput_ms(&g), g.wall_ms);
    ASSERT(g.productive_ms >= 0);
    for (int c = 0; c < MU_GP__COUNT; c++)
      ASSERT(g.badput_ms[c] >= 0);
    /* the timeline covers the wall time in order, within its capacity */
    ASSERT(nsegs <= in.cap_segs);
    int64_t t = T0;
    for (size_t i = 0; i < nsegs; i++) {
      ASSERT_EQ(segs[i].from_ms, t);
      ASSERT(segs[i].to_ms > segs[i].from_ms);
      t = segs[i].to_ms;
    }
    ASSERT(nsegs == 0 ? in.cap_segs == 0 || g.wall_ms == 0 : t == T0 + g.wall_ms);
  }
}

TEST(goodput__steps_per_second_and_eta)
{
  struct mu_goodput_round r = at((struct mu_goodput_round){
      1000, 1100, 1500, 0, MU_GP_END_NONE, 0, {60, 6000, 10, 1000, 50, 1000}});
  struct mu_goodput_in in = {T0, 0, T0 + 500, T0 + 6500, &r, 1, NULL, 0, NULL};
  struct mu_goodput g;
  mu_goodput_account(&in, &g);
  ASSERT_EQ(g.step, 60);
  ASSERT_EQ(g.total, 1000);
  ASSERT(g.steps_per_s > 9.99 && g.steps_per_s < 10.01);
  ASSERT_EQ(g.eta_ms, 940 * 100);
  r.end = MU_GP_END_CLOSED; /* ended: no ETA */
  mu_goodput_account(&in, &g);
  ASSERT_EQ(g.eta_ms, -1);
  r.end = MU_GP_END_NONE;
  r.steps.total = -1; /* no total: a rate, no ETA */
  mu_goodput_account(&in, &g);
  ASSERT_EQ(g.eta_ms, -1);
  ASSERT(g.steps_per_s > 9.99);
  r.steps.first = 60; /* one step seen: no rate */
  mu_goodput_account(&in, &g);
  ASSERT(g.steps_per_s == 0);
}

TEST(goodput__progress_lines_fold_and_hang_idle)
{
  struct mu_goodput_steps s = NO_STEPS;
  static const char *const bad[] = {"", "step 3", "0 step 1 checkpoint 0", "12 step x",
                                    "garbage line here"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    ASSERT_EQ(mu_goodput_steps_fold(&s, bad[i], strlen(bad[i])), 0);
  ASSERT_EQ(s.step, -1);
  const char *a = "5000 step 40 checkpoint -1 first 1 1000 total -1";
  const char *b = "5200 step 42 checkpoint 25 first 3 1100 total 500";
  const char *c = "4000 step -1 checkpoint 30"; /* an old agent's line; a checkpoint is a step */
  ASSERT_EQ(mu_goodput_steps_fold(&s, a, strlen(a)), 1);
  ASSERT_EQ(mu_goodput_steps_fold(&s, b, strlen(b)), 1);
  ASSERT_EQ(mu_goodput_steps_fold(&s, c, strlen(c)), 1);
  ASSERT_EQ(s.step, 42);
  ASSERT_EQ(s.step_ms, 5200);
  ASSERT_EQ(s.first, 1);
  ASSERT_EQ(s.first_ms, 1000);
  ASSERT_EQ(s.checkpoint, 30);
  ASSERT_EQ(s.total, 500);
  struct mu_buf buf = MU_BUF_INIT(4096);
  mu_goodput_steps_json(&s, &buf);
  ASSERT_STR_EQ(mu_buf_str(&buf), "{\"step\":42,\"step_ms\":5200,\"first_step\":1,"
                                  "\"first_step_ms\":1000,\"checkpoint\":30,\"total\":500}");
  mu_buf_release(&buf);
  ASSERT_EQ(mu_goodput_hang_idle_ms("node 'a': rank 3 hung: no progress for 4 s: x.py:9"), 4000);
  ASSERT_EQ(mu_goodput_hang_idle_ms("no progress for 2.5 s"), 2500);
  ASSERT_EQ(mu_goodput_hang_idle_ms("no progress for s"), 0);
  ASSERT_EQ(mu_goodput_hang_idle_ms("a worker failed"), 0);
}

/* The run JSON (both backends' shape) to the goodput JSON: the sum holds there too. */
TEST(goodput__of_a_run_json)
{
  char txt[1024];
  snprintf(txt, sizeof(txt),
           "{\"timings\":{\"created_ms\":%lld,\"rounds\":["
           "{\"round\":1,\"closed_ms\":%lld,\"first_progress_ms\":%lld,\"ended_ms\":%lld,"
           "\"end\":\"hung\",\"why\":\"node 'n': rank 1 hung: no progress for 3 s: a.py:4\","
           "\"steps\":{\"step\":30,\"step_ms\":%lld,\"first_step\":1,\"first_step_ms\":%lld,"
           "\"checkpoint\":20,\"total\":null}},"
           "{\"round\":2,\"closed_ms\":%lld,\"first_progress_ms\":%lld,\"ended_ms\":null,"
           "\"end\":\"\",\"steps\":null}]}}",
           T0 + 1000, T0 + 2000, T0 + 3000, T0 + 10000, T0 + 6900, T0 + 4000, T0 + 11000,
           T0 + 12000);
  cJSON *run = cJSON_Parse(txt);
  ASSERT_NOT_NULL(run);
  struct mu_goodput g;
  mu_goodput_of_run(run, T0, T0 + 14000, &g);
  ASSERT_EQ(g.wall_ms, 14000);
  ASSERT_EQ(g.badput_ms[MU_GP_HANG_DETECTION], 3000);
  ASSERT_EQ(g.lost_steps, 10);
  /* 100 ms a step: step 20 was at 5900, the hang declared at 7000 */
  ASSERT_EQ(g.badput_ms[MU_GP_WASTED_PROGRESS], 7000 - 5900);
  ASSERT_EQ(g.badput_ms[MU_GP_RESTART_DOWNTIME], 2000);
  ASSERT_EQ(g.productive_ms + mu_goodput_badput_ms(&g), g.wall_ms);
  cJSON *j = mu_goodput_to_json(&g);
  const cJSON *b = cJSON_GetObjectItemCaseSensitive(j, "badput_s");
  ASSERT(cJSON_GetObjectItemCaseSensitive(b, "hang_detection")->valuedouble == 3.0);
  ASSERT(cJSON_GetObjectItemCaseSensitive(b, "infrastructure_recovery")->valuedouble == 2.0);
  ASSERT(cJSON_GetObjectItemCaseSensitive(j, "wall_s")->valuedouble == 14.0);
  double sum = cJSON_GetObjectItemCaseSensitive(j, "productive_s")->valuedouble;
  const cJSON *it;
  cJSON_ArrayForEach(it, b) sum += it->valuedouble;
  ASSERT(sum > 13.999 && sum < 14.001);
  cJSON_Delete(j);
  cJSON_Delete(run);
}
