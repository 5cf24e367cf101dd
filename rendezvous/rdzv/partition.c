/* Lost nodes and finished runs (issue 30 items 3 and 4; docs/rendezvous.md, "The rules"):
 * a member lost after another member's success counts as done, a lost member's late success
 * counts, a run that can no longer reach its minimum ends at once, and a failure or hang that
 * a member's loss caused counts nothing. The decisions are the rules' (rules/rules.h:
 * mu_rule_lost(), mu_rule_succeeded(), mu_rule_unreachable(), mu_rule_close()); this file
 * carries them out. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "rdzv_int.h"

static int in_round(const struct rdzv_run *run, const struct rdzv_node *n)
{
  return run->round != NULL && n->round == run->round && !n->gone;
}

/* MU_RULE_FAILURE_PARTITION: the restart the round's failure counted is given back, or the shut
 * it waited to carry out (no restart left) is called off. */
static void give_back(struct rdzv_run *run, const struct rdzv_node *n)
{
  int shut = run->shut_why != NULL;
  if (run->round_counted && run->restarts > 0) {
    run->restarts--;
    if (run->nhist > 0 && run->hist[run->nhist - 1].number == run->round->number)
      run->hist[run->nhist - 1].counted = 0;
  }
  run->round_counted = 0;
  mu_free(run->shut_why);
  run->shut_why = NULL;
  rdzv_note(run, "partition",
            "node '%s' was lost after round %" PRIu64 " ended on a failure: the loss caused it, "
            "so it counts nothing (restart count %" PRIu32 ")%s",
            n->h.key, run->round->number, run->restarts,
            shut ? "; the shut for want of a restart is called off" : "");
  rdzv_changed(run, RDZV_CH_RUN, NULL, NULL);
}

/* MU_RULE_FAILURE_PARTITION for a suspect: the round before counted a restart for a failure,
 * the next closed without this healthy member of it, and now it is found lost. */
static void give_back_prev(struct rdzv_run *run, const struct rdzv_node *n)
{
  uint64_t prev = run->round->number - 1;
  run->restarts -= run->restarts > 0;
  run->prev_counted = 0;
  for (uint32_t i = run->nhist; i-- > 0;)
    if (run->hist[i].number == prev)
      run->hist[i].counted = 0;
  rdzv_note(run, "partition",
            "node '%s' of round %" PRIu64 " was lost: the loss caused that round's failure, so it "
            "counts nothing (restart count %" PRIu32 ")",
            n->h.key, prev, run->restarts);
  rdzv_changed(run, RDZV_CH_RUN, NULL, NULL);
}

void rdzv_node_lost(struct rdzv_run *run, struct rdzv_node *n, const char *why)
{
  struct mu_rules_view v;
  rdzv_rules_view(run, &v);
  int member = in_round(run, n);
  enum mu_rule r = mu_rule_lost(&v, member, n->failed, n->suspect);
  if (!member || run->state != RDZV_RUN_OPEN) {
    if (r == MU_RULE_FAILURE_PARTITION && run->state == RDZV_RUN_OPEN && run->round != NULL)
      give_back_prev(run, n);
    rdzv_node_remove(run, n, 1, RDZV_END_LOST, why);
    return;
  }
  if (r == MU_RULE_FAILURE_PARTITION)
    give_back(run, n);
  else if (r == MU_RULE_LOST_AFTER_SUCCESS)
    rdzv_note(run, "lost",
              "node '%s' was lost after %" PRIu32 " of the round's members succeeded: it counts "
              "as done (its answer may never have reached it); the round goes on",
              n->h.key, run->left_ok);
  run->round_lost++;
  n->lost = 1;
  rdzv_node_remove(run, n, r != MU_RULE_LOST_AFTER_SUCCESS, RDZV_END_LOST, why);
}

/* The members of the latest round that are gone, each with how ("'a' finished, 'b' lost"), as
 * many as fit in about 400 bytes. */
static void missing(const struct rdzv_run *run, struct mu_buf *b)
{
  const struct rdzv_round *r = run->round;
  uint32_t shown = 0, more = 0;
  for (uint32_t i = 0; i < r->nnodes; i++) {
    const struct rdzv_node *n = r->members[i];
    if (!n->gone)
      continue;
    if (b->len > 400) {
      more++;
      continue;
    }
    mu_buf_printf(b, "%s'%.64s' %s", shown++ ? ", " : "", n->h.key,
                  n->left_ok ? "finished"
                  : n->lost  ? "lost"
                             : "left");
  }
  if (more > 0)
    mu_buf_printf(b, " and %" PRIu32 " more", more);
}

void rdzv_check_end(struct rdzv_run *run)
{
  if (run->state != RDZV_RUN_OPEN || run->round == NULL)
    return;
  struct mu_rules_view v;
  rdzv_rules_view(run, &v);
  struct mu_buf b = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  if (mu_rule_succeeded(&v, run->left_ok)) { /* MU_RULE_SUCCEEDED(_LOST) */
    mu_buf_puts(&b, "every member left with success");
    if (run->round_lost > 0) {
      mu_buf_puts(&b, " or was lost after the others' success (its end not heard): ");
      missing(run, &b);
    }
    rdzv_end(run->rv, run->h.key, 0, mu_buf_str(&b));
  } else if (mu_rule_unreachable(&v)) { /* MU_RULE_UNREACHABLE */
    mu_buf_printf(&b,
                  "round %" PRIu64 " ended and the run can no longer reach its minimum of %" PRIu32
                  " nodes (%zu left): ",
                  run->round->number, run->min_nodes, (size_t)run->nodes.n);
    missing(run, &b);
    rdzv_end(run->rv, run->h.key, 1, mu_buf_str(&b));
  }
  mu_buf_release(&b);
}

void rdzv_failure_counted(struct rdzv_run *run, enum rdzv_end end, const char *why,
                          const char *shut_why)
{
  run->round_spoiled = 1;
  if (shut_why != NULL) {
    mu_free(run->shut_why);
    run->shut_why = mu_strdup(shut_why);
    rdzv_note(run, "broken",
              "no restart left: the run is shut when the next round could close, unless a "
              "member of round %" PRIu64 " is lost first (then the loss caused the failure)",
              run->round->number);
    rdzv_break_round(run, end, 0, why);
    rdzv_maybe_close(run, 0);
  } else {
    run->round_counted = 1;
    run->restarts++;
    rdzv_break_round(run, end, 1, why);
  }
  rdzv_check_end(run);
}

/* A success leave from a member of the latest round lost before it came: it counts. Returns 1
 * when `node_id` is such a member. */
static int late_success(struct rdzv_run *run, const char *node_id)
{
  struct rdzv_round *r = run->round;
  for (uint32_t i = 0; r != NULL && i < r->nnodes; i++) {
    struct rdzv_node *n = r->members[i];
    if (!n->lost || n->left_ok || n->round != r || strcmp(n->h.key, node_id) != 0)
      continue;
    n->lost = 0;
    n->left_ok = 1;
    run->round_lost--;
    run->left_ok++;
    rdzv_note(run, "leave", "node '%s' left with success after it was lost: its success counts",
              node_id);
    rdzv_changed(run, RDZV_CH_RUN, NULL, NULL);
    rdzv_check_end(run);
    return 1;
  }
  return 0;
}

int rdzv_leave(struct rdzv *rv, const char *run_id, const char *node_id, int failed,
               const char *reason)
{
  struct rdzv_run *run = rdzv_find(rv, run_id);
  if (run == NULL)
    return RDZV_ENO_SUCH_RUN;
  struct rdzv_node *n = rdzv_find_node(run, node_id);
  if (n == NULL) {
    if (run->state == RDZV_RUN_OPEN && !failed && late_success(run, node_id))
      return 0;
    return run->state == RDZV_RUN_OPEN ? RDZV_ENOT_MEMBER : 0;
  }
  char why[600];
  snprintf(why, sizeof(why), "left %s%s%.512s", failed ? "failed" : "with success",
           reason && reason[0] ? ": " : "", reason ? reason : "");
  rdzv_note(run, "leave", "node '%s' %s", node_id, why);
  rdzv_sick_forget(run, node_id);
  if (run->state != RDZV_RUN_OPEN) {
    rdzv_node_remove(run, n, 0, RDZV_END_LEFT, why);
    return 0;
  }
  /* a success counts from a member still running toward it, the round active or ended
   * (a loss, not a failure, may have ended it: the run may still end succeeded) */
  if (failed || !in_round(run, n) || n->join != NULL || n->failed) {
    rdzv_node_remove(run, n, 1, RDZV_END_LEFT, why);
    return 0;
  }
  n->left_ok = 1;
  run->left_ok++;
  rdzv_node_remove(run, n, 0, RDZV_END_LEFT, why); /* MU_RULE_SUCCEEDED there */
  return 0;
}
