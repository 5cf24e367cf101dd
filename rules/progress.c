/* rules/progress.c: the job's progress rules (progress.h). Pure: no clock, no I/O. */
#include "progress.h"

#include <stddef.h>

const char *mu_progress_rule_name(enum mu_progress_rule r)
{
  static const char *const names[MU_PROGRESS_RULE_COUNT] = {
      [MU_PROGRESS_OFF] = "progress-off",
      [MU_PROGRESS_MOVING] = "progress-moving",
      [MU_PROGRESS_STARTING] = "progress-starting",
      [MU_PROGRESS_HUNG_START] = "hung-before-first-progress",
      [MU_PROGRESS_HUNG] = "hung-job",
      [MU_SUSPECT_OWN_CODE] = "suspect-own-code",
      [MU_SUSPECT_OLDEST] = "suspect-oldest",
      [MU_SUSPECT_NONE] = "suspect-none",
      [MU_AUTO_LEARNING] = "auto-learning",
      [MU_AUTO_LEARNED] = "auto-learned",
      [MU_RETRY_GO_ON] = "retry",
      [MU_RETRY_STOP] = "stop-retrying",
  };
  return r >= 0 && r < MU_PROGRESS_RULE_COUNT ? names[r] : "?";
}

enum mu_progress_rule mu_rule_progress(const struct mu_progress_view *v, int64_t now_ms,
                                       int64_t *idle_ms)
{
  int first = v->last_ms <= 0;
  int64_t since = first ? v->start_ms : v->last_ms;
  int64_t idle = now_ms > since ? now_ms - since : 0;
  if (idle_ms != NULL)
    *idle_ms = idle;
  if (v->timeout_ms <= 0)
    return MU_PROGRESS_OFF;
  if (first)
    return idle >= v->initial_ms ? MU_PROGRESS_HUNG_START : MU_PROGRESS_STARTING;
  return idle >= v->timeout_ms ? MU_PROGRESS_HUNG : MU_PROGRESS_MOVING;
}

int mu_rule_suspects(int n, const int64_t *last_ms, const enum mu_stack_kind *stack,
                     enum mu_progress_rule *verdict)
{
  int own = 0, count = 0;
  int64_t oldest = 0;
  for (int i = 0; i < n; i++) {
    own += stack[i] == MU_STACK_OWN_CODE;
    if (last_ms[i] > 0 && (oldest == 0 || last_ms[i] < oldest))
      oldest = last_ms[i];
  }
  for (int i = 0; i < n; i++) {
    if (own > 0)
      verdict[i] = stack[i] == MU_STACK_OWN_CODE ? MU_SUSPECT_OWN_CODE : MU_SUSPECT_NONE;
    else
      verdict[i] = last_ms[i] == oldest ? MU_SUSPECT_OLDEST : MU_SUSPECT_NONE;
    count += verdict[i] != MU_SUSPECT_NONE;
  }
  return count;
}

enum mu_progress_rule mu_rule_auto_timeout(int64_t slowest_ms, uint32_t intervals, int64_t kept_ms,
                                           int64_t *timeout_ms)
{
  *timeout_ms = 0;
  if (intervals < MU_AUTO_MIN_INTERVALS && kept_ms <= 0)
    return MU_AUTO_LEARNING;
  int64_t t = intervals >= MU_AUTO_MIN_INTERVALS ? slowest_ms * MU_AUTO_MULTIPLE : 0;
  if (t < MU_AUTO_FLOOR_MS)
    t = MU_AUTO_FLOOR_MS;
  if (t < kept_ms)
    t = kept_ms;
  *timeout_ms = t;
  return MU_AUTO_LEARNED;
}

enum mu_progress_rule mu_rule_retry(uint32_t without, uint32_t n)
{
  return n > 0 && without >= n ? MU_RETRY_STOP : MU_RETRY_GO_ON;
}
