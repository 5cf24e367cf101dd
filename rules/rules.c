/* rules/rules.c: the rendezvous rules and their model (rules.h). Pure: no I/O, no clock, no
 * allocation. */
#include "rules.h"

#include <string.h>

static const char *const rule_names[MU_RULE_COUNT] = {
    [MU_RULE_CLOSE_FULL] = "close-full",
    [MU_RULE_CLOSE_KNOWN] = "close-known",
    [MU_RULE_CLOSE_LAST_CALL] = "close-last-call",
    [MU_RULE_BELOW_MIN] = "below-min",
    [MU_RULE_LAST_CALL] = "last-call",
    [MU_RULE_REJOIN] = "rejoin",
    [MU_RULE_SCALE_UP] = "scale-up",
    [MU_RULE_LOST] = "lost",
    [MU_RULE_LEFT] = "left",
    [MU_RULE_UNHEALTHY] = "unhealthy",
    [MU_RULE_FAILURE] = "failure",
    [MU_RULE_FAILURE_LATE] = "failure-late",
    [MU_RULE_FAILURE_SCALE_UP] = "failure-scale-up",
    [MU_RULE_BUDGET_SPENT] = "budget-spent",
    [MU_RULE_SUCCEEDED] = "succeeded",
    [MU_RULE_STANDBY] = "standby",
    [MU_RULE_ORDER] = "order",
    [MU_RULE_LOST_AFTER_SUCCESS] = "lost-after-success",
    [MU_RULE_SUCCEEDED_LOST] = "succeeded-lost",
    [MU_RULE_FAILURE_PARTITION] = "failure-partition",
    [MU_RULE_UNREACHABLE] = "unreachable",
    [MU_RULE_SHUT_WAITS] = "shut-waits",
};

const char *mu_rule_name(enum mu_rule r)
{
  return (unsigned)r < MU_RULE_COUNT ? rule_names[r] : "none";
}

/* Survivors of the last round that are healthy and have not re-joined yet. */
static int64_t healthy_due(const struct mu_rules_view *v)
{
  if (!v->has_round)
    return 0;
  int64_t survivors = (int64_t)v->round_nodes - v->round_gone;
  return (survivors - v->round_failed) - ((int64_t)v->joins_prev - v->joins_failed);
}

enum mu_rule mu_rule_close(const struct mu_rules_view *v, int last_call_over)
{
  if (v->joins < v->min_nodes || v->joins == 0)
    return MU_RULE_BELOW_MIN;
  int64_t due = healthy_due(v);
  enum mu_rule r = MU_RULE_LAST_CALL;
  if (v->joins >= v->max_nodes && due <= 0)
    r = MU_RULE_CLOSE_FULL;
  else if (v->has_round && v->joins_prev > 0 &&
           (int64_t)v->joins_prev >= (int64_t)v->round_nodes - v->round_gone)
    r = MU_RULE_CLOSE_KNOWN;
  else if (last_call_over || (v->last_call_ms == 0 && due <= 0))
    r = MU_RULE_CLOSE_LAST_CALL;
  /* a failure that found no restart left: the next round waits for the failed round's healthy
   * survivors; once they re-joined and it could close, the shut stands (a loss of one of them
   * would have called it off: MU_RULE_FAILURE_PARTITION) */
  if (v->shut_pending)
    return due > 0 ? MU_RULE_SHUT_WAITS : r != MU_RULE_LAST_CALL ? MU_RULE_BUDGET_SPENT : r;
  return r;
}

uint32_t mu_rule_round_size(const struct mu_rules_view *v)
{
  return v->joins < v->max_nodes ? v->joins : v->max_nodes;
}

int mu_rule_newcomers_wait(const struct mu_rules_view *v)
{
  return v->has_round && v->joins > v->joins_prev && v->round_nodes < v->max_nodes;
}

uint32_t mu_rule_standbys(const struct mu_rules_view *v)
{
  if (!v->has_round || !v->round_active || v->round_nodes < v->max_nodes)
    return 0;
  return v->joins - v->joins_prev;
}

enum mu_rule mu_rule_rejoin(const struct mu_rules_view *v)
{
  return mu_rule_newcomers_wait(v) ? MU_RULE_SCALE_UP : MU_RULE_REJOIN;
}

enum mu_rule mu_rule_failure(const struct mu_rules_view *v, uint64_t cur_round,
                             uint64_t report_round, uint64_t node_round)
{
  if (!v->has_round || !v->round_active || report_round != cur_round || node_round != cur_round)
    return MU_RULE_FAILURE_LATE;
  if (mu_rule_newcomers_wait(v))
    return MU_RULE_FAILURE_SCALE_UP;
  if (v->max_restarts >= 0 && (int64_t)v->restarts >= v->max_restarts)
    return MU_RULE_BUDGET_SPENT;
  return MU_RULE_FAILURE;
}

int mu_rule_succeeded(const struct mu_rules_view *v, uint32_t left_ok)
{
  return v->has_round && !v->round_spoiled && left_ok > 0 &&
         (uint64_t)left_ok + v->round_lost >= v->round_nodes;
}

enum mu_rule mu_rule_lost(const struct mu_rules_view *v, int member, int failed, int suspect)
{
  if (!member)
    return suspect && v->prev_counted ? MU_RULE_FAILURE_PARTITION : MU_RULE_LOST;
  if (v->round_ok > 0 && !v->round_spoiled)
    return MU_RULE_LOST_AFTER_SUCCESS;
  if (!v->round_active && (v->round_counted || v->shut_pending) && !failed)
    return MU_RULE_FAILURE_PARTITION;
  return MU_RULE_LOST;
}

int mu_rule_unreachable(const struct mu_rules_view *v)
{
  if (!v->has_round || v->round_active || v->round_ok == 0)
    return 0;
  if (!v->round_spoiled && healthy_due(v) > 0)
    return 0; /* a member still runs toward its success */
  return v->present < v->min_nodes;
}

int mu_rule_order(const struct mu_rules_view *v, int member, int failed)
{
  if (!member || !v->has_round || v->joins_prev == 0)
    return 1;
  int demote = v->joins > mu_rule_round_size(v);
  return demote && failed ? 2 : 0;
}

/* ---------------------------------------------------------------------------------------------
 * The model
 */

void mu_rules_init(struct mu_rules_state *s, uint32_t min_nodes, uint32_t max_nodes,
                   uint32_t last_call_ms, int64_t max_restarts, uint8_t nnodes)
{
  memset(s, 0, sizeof(*s));
  s->min_nodes = min_nodes;
  s->max_nodes = max_nodes;
  s->last_call_ms = last_call_ms;
  s->max_restarts = max_restarts;
  s->nnodes = nnodes > MU_RULES_NODES_MAX ? MU_RULES_NODES_MAX : nnodes;
  s->run = MU_RUN_OPEN;
}

void mu_rules_view_of(const struct mu_rules_state *s, struct mu_rules_view *v)
{
  memset(v, 0, sizeof(*v));
  v->min_nodes = s->min_nodes;
  v->max_nodes = s->max_nodes;
  v->last_call_ms = s->last_call_ms;
  v->max_restarts = s->max_restarts;
  v->restarts = s->restarts;
  v->has_round = s->round > 0;
  v->round_active = s->active;
  v->round_nodes = s->round_nodes;
  v->round_gone = s->round_gone;
  v->round_ok = s->left_ok;
  v->round_lost = s->round_lost;
  v->round_spoiled = s->spoiled;
  v->round_counted = s->counted;
  v->shut_pending = s->shut_pending;
  v->prev_counted = s->prev_counted;
  for (uint8_t i = 0; i < s->nnodes; i++) {
    const struct mu_rules_node *n = &s->node[i];
    v->present += n->present;
    v->round_failed += n->member && n->failed;
    v->joins += n->joining;
    v->joins_prev += n->joining && n->member;
    v->joins_failed += n->joining && n->member && n->failed;
  }
}

static void fx_add(struct mu_rules_effects *fx, enum mu_rules_effect_kind k, enum mu_rule r,
                   uint64_t at)
{
  if (fx->n < MU_RULES_EFFECTS_MAX)
    fx->fx[fx->n++] = (struct mu_rules_effect){.kind = k, .rule = r, .at = at};
}

/* The sort key of a pending join in the next round (MU_RULE_ORDER). */
static uint64_t order_key(const struct mu_rules_view *v, const struct mu_rules_node *n)
{
  int cls = mu_rule_order(v, n->member, n->failed);
  return ((uint64_t)cls << 40) | (cls == 1 ? n->seq : n->rank);
}

/* Closes a round with the pending joins, in MU_RULE_ORDER, up to max_nodes. */
static void close_round(struct mu_rules_state *s, const struct mu_rules_view *v, enum mu_rule r,
                        struct mu_rules_effects *fx)
{
  uint8_t idx[MU_RULES_NODES_MAX];
  uint64_t key[MU_RULES_NODES_MAX];
  uint32_t n = 0;
  for (uint8_t i = 0; i < s->nnodes; i++) {
    if (!s->node[i].joining)
      continue;
    uint64_t k = order_key(v, &s->node[i]);
    uint32_t j = n++;
    for (; j > 0 && key[j - 1] > k; j--) {
      key[j] = key[j - 1];
      idx[j] = idx[j - 1];
    }
    key[j] = k;
    idx[j] = i;
  }
  uint32_t k = mu_rule_round_size(v);
  s->prev_counted = s->counted;
  for (uint8_t i = 0; i < s->nnodes; i++) {
    struct mu_rules_node *m = &s->node[i];
    m->suspect = m->member && !m->failed && !m->joining; /* due, and left out */
    s->node[i].member = 0;
    s->node[i].failed = 0;
    s->node[i].lost = 0;
  }
  for (uint32_t i = 0; i < k; i++) {
    struct mu_rules_node *m = &s->node[idx[i]];
    m->joining = 0;
    m->member = 1;
    m->rank = (uint8_t)i;
  }
  s->round++;
  s->active = 1;
  s->round_nodes = k;
  s->round_gone = 0;
  s->left_ok = 0;
  s->round_lost = 0;
  s->spoiled = 0;
  s->counted = 0;
  s->shut_pending = 0;
  s->last_call_at = 0;
  fx_add(fx, MU_FX_ROUND_CLOSED, r, 0);
}

static void end_run(struct mu_rules_state *s, uint8_t how, enum mu_rule r,
                    struct mu_rules_effects *fx)
{
  s->run = how;
  s->last_call_at = 0;
  fx_add(fx, MU_FX_RUN_ENDED, r, 0);
}

/* Closes the round if the pending joins allow it, or starts or clears the last call. */
static void maybe_close(struct mu_rules_state *s, int last_call_over, uint64_t now,
                        struct mu_rules_effects *fx)
{
  if (s->run != MU_RUN_OPEN || s->active)
    return;
  struct mu_rules_view v;
  mu_rules_view_of(s, &v);
  enum mu_rule r = mu_rule_close(&v, last_call_over);
  if (fx->rule == MU_RULE_COUNT)
    fx->rule = r;
  if (r == MU_RULE_SHUT_WAITS)
    fx->rule = r;
  if (r == MU_RULE_BELOW_MIN || r == MU_RULE_SHUT_WAITS) {
    if (s->last_call_at != 0)
      fx_add(fx, MU_FX_CLEAR_LAST_CALL, r, 0);
    s->last_call_at = 0;
  } else if (r == MU_RULE_LAST_CALL) {
    if (s->last_call_at == 0) {
      s->last_call_at = now + s->last_call_ms + 1; /* +1: 0 means "not armed" */
      fx_add(fx, MU_FX_ARM_LAST_CALL, r, s->last_call_at);
    }
  } else if (r == MU_RULE_BUDGET_SPENT) {
    fx->rule = r;
    end_run(s, MU_RUN_SHUT, r, fx);
  } else {
    close_round(s, &v, r, fx);
  }
}

static void break_round(struct mu_rules_state *s, enum mu_rule r, struct mu_rules_effects *fx)
{
  if (!s->active)
    return;
  s->active = 0;
  fx_add(fx, MU_FX_ROUND_ENDED, r, 0);
}

static void remove_node(struct mu_rules_state *s, uint8_t i, int breaks, enum mu_rule r,
                        uint64_t now, struct mu_rules_effects *fx)
{
  struct mu_rules_node *n = &s->node[i];
  if (n->member) {
    s->round_gone++;
    if (breaks)
      break_round(s, r, fx);
  }
  memset(n, 0, sizeof(*n));
  fx->rule = r;
  maybe_close(s, 0, now, fx);
}

/* MU_RULE_SUCCEEDED(_LOST): the run closes when the round's members all succeeded (or were lost
 * after a success). */
static void maybe_succeeded(struct mu_rules_state *s, struct mu_rules_effects *fx)
{
  struct mu_rules_view v;
  mu_rules_view_of(s, &v);
  if (s->run != MU_RUN_OPEN || !mu_rule_succeeded(&v, s->left_ok))
    return;
  fx->rule = s->round_lost > 0 ? MU_RULE_SUCCEEDED_LOST : MU_RULE_SUCCEEDED;
  end_run(s, MU_RUN_CLOSED, fx->rule, fx);
}

static int on_join(struct mu_rules_state *s, uint8_t i, uint64_t now, struct mu_rules_effects *fx)
{
  struct mu_rules_node *n = &s->node[i];
  if (n->joining)
    return -1;
  n->present = 1;
  n->joining = 1;
  n->suspect = 0; /* alive: it was not lost */
  n->seq = ++s->seq;
  struct mu_rules_view v;
  mu_rules_view_of(s, &v);
  if (n->member) {
    s->spoiled = 1; /* its workers were stopped: it restarted */
    fx->rule = mu_rule_rejoin(&v);
    break_round(s, fx->rule, fx);
  } else if (s->active && mu_rule_newcomers_wait(&v)) {
    fx->rule = MU_RULE_SCALE_UP;
    fx_add(fx, MU_FX_ROUND_ENDED, MU_RULE_SCALE_UP, 0); /* members told "waiting" */
  } else if (s->active) {
    fx->rule = MU_RULE_STANDBY;
  }
  maybe_close(s, 0, now, fx);
  return 0;
}

/* A success: of a member still running (the round active or ended without it yet), or late,
 * of a member lost before its report came. */
static int on_leave_ok(struct mu_rules_state *s, uint8_t i, uint64_t now,
                       struct mu_rules_effects *fx)
{
  struct mu_rules_node *n = &s->node[i];
  if (!n->present) { /* n->lost: its success came after its loss */
    n->lost = 0;
    s->round_lost--;
    s->left_ok++;
    fx->rule = MU_RULE_LEFT;
    maybe_succeeded(s, fx);
    return 0;
  }
  if (!(n->member && !n->joining && !n->failed)) {
    s->spoiled |= n->member;
    remove_node(s, i, 1, MU_RULE_LEFT, now, fx);
    return 0;
  }
  s->left_ok++;
  remove_node(s, i, 0, MU_RULE_LEFT, now, fx);
  maybe_succeeded(s, fx);
  return 0;
}

/* A lease expired or a connection closed (mu_rule_lost()). */
static void on_lost(struct mu_rules_state *s, uint8_t i, uint64_t now, struct mu_rules_effects *fx)
{
  struct mu_rules_node *n = &s->node[i];
  struct mu_rules_view v;
  mu_rules_view_of(s, &v);
  enum mu_rule r = mu_rule_lost(&v, n->member, n->failed, n->suspect);
  if (!n->member) {
    if (r == MU_RULE_FAILURE_PARTITION) {
      s->restarts--;
      s->prev_counted = 0;
    }
    remove_node(s, i, 1, r, now, fx);
    return;
  }
  if (r == MU_RULE_FAILURE_PARTITION) {
    s->restarts -= s->counted;
    s->counted = 0;
    s->shut_pending = 0;
  }
  uint64_t round = s->round;
  s->round_lost++;
  remove_node(s, i, r != MU_RULE_LOST_AFTER_SUCCESS, r, now, fx);
  n->lost = s->round == round; /* (unless the loss let a new round close) */
  if (r == MU_RULE_LOST_AFTER_SUCCESS)
    maybe_succeeded(s, fx);
}

static int on_failure(struct mu_rules_state *s, const struct mu_rules_event *ev,
                      struct mu_rules_effects *fx)
{
  struct mu_rules_node *n = &s->node[ev->node];
  uint64_t node_round = n->member ? s->round : 0;
  uint64_t round = ev->round ? ev->round : node_round;
  struct mu_rules_view v;
  mu_rules_view_of(s, &v);
  fx->rule = mu_rule_failure(&v, s->round, round, node_round);
  if (fx->rule == MU_RULE_FAILURE_LATE || fx->rule == MU_RULE_FAILURE_SCALE_UP)
    return 0;
  n->failed = 1;
  s->spoiled = 1;
  fx->counted = 1;
  if (fx->rule == MU_RULE_BUDGET_SPENT)
    s->shut_pending = 1; /* shut when the next round could close, unless a loss calls it off */
  else
    s->restarts++;
  s->counted = fx->rule == MU_RULE_FAILURE;
  break_round(s, fx->rule, fx);
  return 0;
}

static int step(struct mu_rules_state *s, const struct mu_rules_event *ev,
                struct mu_rules_effects *fx)
{
  struct mu_rules_node *n = &s->node[ev->node < s->nnodes ? ev->node : 0];
  if (s->run != MU_RUN_OPEN) {
    if ((ev->kind != MU_EV_LEAVE_OK && ev->kind != MU_EV_LEAVE_FAIL) || !n->present)
      return -1;
    memset(n, 0, sizeof(*n)); /* a node leaving an ended run */
    return 0;
  }
  switch (ev->kind) {
  case MU_EV_JOIN:
    return on_join(s, ev->node, ev->now, fx);
  case MU_EV_LEAVE_OK:
    if (!n->present && !n->lost)
      return -1;
    return on_leave_ok(s, ev->node, ev->now, fx);
  case MU_EV_LEAVE_FAIL:
    if (!n->present)
      return -1;
    s->spoiled |= n->member;
    remove_node(s, ev->node, 1, MU_RULE_LEFT, ev->now, fx);
    return 0;
  case MU_EV_LEASE_EXPIRED:
  case MU_EV_CONN_LOST: /* a pending join holds no lease; its connection's end cancels it */
    if (!n->present || n->joining)
      return -1;
    on_lost(s, ev->node, ev->now, fx);
    return 0;
  case MU_EV_UNHEALTHY:
    if (n->present) {
      s->spoiled |= n->member;
      remove_node(s, ev->node, 1, MU_RULE_UNHEALTHY, ev->now, fx);
    }
    return 0;
  case MU_EV_FAILED:
  case MU_EV_HUNG:
    if (!n->present)
      return -1;
    return on_failure(s, ev, fx);
  case MU_EV_HEARTBEAT:
  case MU_EV_PROGRESS:
    return n->present && !n->joining ? 0 : -1;
  case MU_EV_TIMER:
    if (s->last_call_at == 0)
      return -1;
    maybe_close(s, 1, ev->now, fx);
    return 0;
  case MU_EV_COUNT:
    break;
  }
  return -1;
}

int mu_rules_step(struct mu_rules_state *s, const struct mu_rules_event *ev,
                  struct mu_rules_effects *fx)
{
  memset(fx, 0, sizeof(*fx));
  fx->rule = MU_RULE_COUNT;
  if (ev->node >= s->nnodes && ev->kind != MU_EV_TIMER)
    return -1;
  int open = s->run == MU_RUN_OPEN;
  if (step(s, ev, fx) != 0)
    return -1;
  struct mu_rules_view v;
  mu_rules_view_of(s, &v);
  if (open && s->run == MU_RUN_OPEN && mu_rule_unreachable(&v)) {
    fx->rule = MU_RULE_UNREACHABLE;
    end_run(s, MU_RUN_SHUT, MU_RULE_UNREACHABLE, fx);
  }
  return 0;
}
