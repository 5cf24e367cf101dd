/* Runs, rounds, members and leases: join, heartbeat, watch, leave and end (see rdzv.h). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "rdzv_int.h"

/* ---------------------------------------------------------------------------------------------
 * Nodes and leases
 */

static struct rdzv_node *lease_node(struct mu_list_node *x)
{
  return MU_CONTAINER_OF(x, struct rdzv_node, lease);
}

void rdzv_node_unref(struct rdzv_node *n)
{
  if (--n->refs > 0)
    return;
  size_t alen = n->addr != NULL ? strlen(n->addr) : 0;
  n->rv->bytes -= rdzv_node_cost(n->h.len) + (n->addr != NULL ? rdzv_addr_cost(alen) : 0);
  n->rv->enc -= NODE_ENC + n->h.len + alen;
  mu_free(n->addr); /* the id is part of the node's allocation */
  mu_free(n);
}

void rdzv_node_set_addr(struct rdzv_node *n, char *addr)
{
  if (n->addr != NULL) {
    n->rv->bytes -= rdzv_addr_cost(strlen(n->addr));
    n->rv->enc -= strlen(n->addr);
  }
  mu_free(n->addr);
  n->addr = addr;
  if (addr != NULL) {
    n->rv->bytes += rdzv_addr_cost(strlen(addr));
    n->rv->enc += strlen(addr);
  }
}

struct rdzv_node *rdzv_node_new(struct rdzv *rv, const char *node_id, size_t idlen)
{
  struct rdzv_node *n = mu_calloc(1, sizeof(*n) + idlen + 1);
  n->rv = rv;
  rv->bytes += rdzv_node_cost(idlen);
  rv->enc += NODE_ENC + idlen;
  n->h.key = (char *)(n + 1);
  n->h.len = (uint32_t)idlen;
  memcpy(n->h.key, node_id, idlen);
  return n;
}

static void lease_unlink(struct rdzv_run *run, struct rdzv_node *n)
{
  if (!n->in_lease)
    return;
  mu_list_remove(&run->leases, &n->lease);
  n->in_lease = 0;
}

/* (Re)starts `n`'s lease: it now expires last. A node with an open watch has no running
 * lease: the watch holds it, and its end starts the lease afresh (watch_release). */
void rdzv_lease_renew(struct rdzv_run *run, struct rdzv_node *n)
{
  lease_unlink(run, n);
  if (n->nwatch > 0)
    return;
  n->expires = rdzv_now(run->rv) + run->lease_ttl_ms;
  mu_list_push_back(&run->leases, &n->lease);
  n->in_lease = 1;
  if (!rdzv_deadline_queued(&run->lease_dl) && run->state == RDZV_RUN_OPEN)
    rdzv_deadline_set(run->rv, &run->lease_dl, lease_node(run->leases.head)->expires);
}

/* A watch parked by member `n` holds its lease: the lease stops until the watch ends. */
static void watch_hold(struct rdzv_run *run, struct rdzv_wait *w, struct rdzv_node *n)
{
  n->refs++;
  n->nwatch++;
  lease_unlink(run, n);
  w->node = n;
}

/* Ends a watch: frees its node id and, if it held a lease, restarts that lease from now (a
 * node whose watch ended has one lease TTL to heartbeat or watch again). */
static void watch_release(struct rdzv_run *run, struct rdzv_wait *w)
{
  struct rdzv_node *n = w->node;
  mu_free(w->obj);
  w->obj = NULL;
  w->node = NULL;
  if (n == NULL)
    return;
  if (--n->nwatch == 0 && !n->gone && n->join == NULL && run->state == RDZV_RUN_OPEN)
    rdzv_lease_renew(run, n);
  rdzv_node_unref(n);
}

/* ---------------------------------------------------------------------------------------------
 * Rounds
 */

void rdzv_round_unref(struct rdzv_round *r)
{
  if (--r->refs > 0)
    return;
  for (uint32_t i = 0; i < r->nnodes; i++) {
    struct rdzv_node *n = r->members[i];
    if (n->round == r)
      n->round = NULL;
    rdzv_node_unref(n);
  }
  mu_free(r->members);
  mu_free(r->members_json);
  mu_free(r);
}

/* Is `n` a member of the run's latest round? */
static int in_round(const struct rdzv_run *run, const struct rdzv_node *n)
{
  return run->round != NULL && n->round == run->round && !n->gone;
}

static uint32_t waiting_count(const struct rdzv_run *run)
{
  return (uint32_t)run->joins.n;
}

void rdzv_rules_view(const struct rdzv_run *run, struct mu_rules_view *v)
{
  memset(v, 0, sizeof(*v));
  v->min_nodes = run->min_nodes;
  v->max_nodes = run->max_nodes;
  v->last_call_ms = run->last_call_ms;
  v->max_restarts = run->max_restarts;
  v->restarts = run->restarts;
  v->has_round = run->round != NULL;
  v->round_active = run->round != NULL && run->rstate == RDZV_ROUND_ACTIVE;
  v->round_nodes = run->round ? run->round->nnodes : 0;
  v->round_gone = run->round_gone;
  v->round_failed = run->round_failed;
  v->joins = (uint32_t)run->joins.n;
  v->joins_prev = run->joins_prev;
  v->joins_failed = run->joins_failed;
  v->round_ok = run->left_ok;
  v->round_lost = run->round_lost;
  v->round_spoiled = run->round_spoiled;
  v->round_counted = run->round_counted;
  v->shut_pending = run->shut_why != NULL;
  v->prev_counted = run->prev_counted;
  v->present = (uint32_t)run->nodes.n;
}

/* The event a watch of round `round` by `node_id` should get now, or NULL (healthy). */
static const char *watch_event(struct rdzv_run *run, const char *node_id, uint64_t round)
{
  if (run->state == RDZV_RUN_CLOSED)
    return "closed";
  if (run->state == RDZV_RUN_SHUT)
    return "shut";
  uint64_t cur = run->round ? run->round->number : 0;
  if (round < cur)
    return "superseded";
  if (round > cur)
    return "broken"; /* a round that never closed: the node must join */
  if (run->rstate != RDZV_ROUND_ACTIVE)
    return "broken";
  struct rdzv_node *n = rdzv_find_node(run, node_id);
  if (n == NULL || !in_round(run, n))
    return "broken";
  struct mu_rules_view v;
  rdzv_rules_view(run, &v);
  if (mu_rule_newcomers_wait(&v)) /* MU_RULE_SCALE_UP */
    return "waiting";
  return NULL;
}

/* Answers watch `w` with `a` (its event set), releasing what it holds. */
static void watch_answer(struct rdzv_run *run, struct rdzv_wait *w, struct rdzv_answer *a)
{
  a->run_id = run->h.key;
  a->round_number = w->round;
  watch_release(run, w);
  rdzv_wait_detach(run->rv, w);
  run->rv->st.pending_watches--;
  rdzv_fire(w, a);
}

/* Fires every watch that now has an event. */
static void kick_watches(struct rdzv_run *run)
{
  struct mu_list todo;
  rdzv_wait_take(&todo, &run->watches);
  while (todo.head != NULL) {
    struct rdzv_wait *w = wait_of(todo.head);
    const char *ev = watch_event(run, w->obj, w->round);
    rdzv_wait_unqueue(w);
    if (ev == NULL) {
      rdzv_wait_queue(&run->watches, w);
      continue;
    }
    struct rdzv_answer a;
    memset(&a, 0, sizeof(a));
    a.event = ev;
    a.waiting = waiting_count(run);
    watch_answer(run, w, &a);
  }
}

void rdzv_break_round(struct rdzv_run *run, enum rdzv_end end, int counted, const char *why)
{
  /* a member re-joined: its workers were stopped, the round cannot end succeeded */
  run->round_spoiled |= end == RDZV_END_REJOINED || end == RDZV_END_SCALE_UP;
  if (run->rstate != RDZV_ROUND_ACTIVE)
    return;
  rdzv_note(run, "broken", "round %" PRIu64 " broken: %s", run->round ? run->round->number : 0,
            why);
  run->rstate = RDZV_ROUND_BROKEN;
  rdzv_hist_end(run, end, counted, why);
  rdzv_changed(run, RDZV_CH_RUN, NULL, NULL);
  kick_watches(run);
}

/* Withdraws node `n`'s pending join (no callback); the node keeps a lease. */
static void join_withdraw(struct rdzv_run *run, struct rdzv_node *n)
{
  struct rdzv_wait *w = n->join;
  if (w == NULL)
    return;
  n->join = NULL;
  if (in_round(run, n)) {
    run->joins_prev--;
    run->joins_failed -= n->failed != 0;
  }
  rdzv_wait_detach(run->rv, w);
  run->rv->st.pending_joins--;
  if (run->state == RDZV_RUN_OPEN)
    rdzv_lease_renew(run, n);
}

void rdzv_node_remove(struct rdzv_run *run, struct rdzv_node *n, int breaks, enum rdzv_end end,
                      const char *why)
{
  if (n->join) {
    struct rdzv_wait *w = n->join;
    join_withdraw(run, n);
    rdzv_fire_error(w, run->h.key, RDZV_ENOT_MEMBER,
                    "the node was removed from the run while its join was pending; join again");
  }
  lease_unlink(run, n);
  mu_htab_del(&run->nodes, &n->h);
  int member = in_round(run, n);
  n->gone = 1;
  if (member) {
    run->round_gone++;
    run->round_failed -= n->failed != 0;
    run->round_spoiled |= breaks && end != RDZV_END_LOST; /* left failed, unhealthy */
    if (breaks) {
      char b[300];
      snprintf(b, sizeof(b), "node '%s' %s", n->h.key, why);
      rdzv_break_round(run, end, 0, b);
    }
  }
  if (member) /* what the round records of it changed: it left (or was lost) */
    rdzv_changed(run, RDZV_CH_MEMBER, n, NULL);
  rdzv_node_unref(n);
  run->rv->st.nodes--;
  rdzv_maybe_close(run, 0);
  rdzv_gc_check(run);
  rdzv_check_end(run); /* partition.c: succeeded, or the minimum out of reach */
}

void rdzv_leases_expire(struct rdzv_run *run, uint64_t now)
{
  struct rdzv *rv = run->rv;
  while (run->leases.head != NULL && lease_node(run->leases.head)->expires <= now &&
         run->state == RDZV_RUN_OPEN) {
    rv->st.leases_expired++;
    rdzv_note(run, "lost", "node '%s' lost: its lease expired (no heartbeat for %" PRIu32 " ms)",
              lease_node(run->leases.head)->h.key, run->lease_ttl_ms);
    rdzv_node_lost(run, lease_node(run->leases.head), "was lost (lease expired)");
  }
  if (run->leases.head != NULL && !rdzv_deadline_queued(&run->lease_dl) &&
      run->state == RDZV_RUN_OPEN)
    rdzv_deadline_set(rv, &run->lease_dl, lease_node(run->leases.head)->expires);
}

static void fill_member(const struct rdzv_node *n, struct rdzv_member *m)
{
  m->node_id = n->h.key;
  m->addr = n->addr;
  m->local_world_size = n->lws;
  m->master_port = n->master_port;
  m->node_rank = n->rank;
  m->rank_offset = n->rank_offset;
}

void rdzv_round_member(const struct rdzv_round *round, uint32_t i, struct rdzv_member *out)
{
  const struct rdzv_node *n = round->members[i];
  fill_member(n, out);
  /* n->rank may belong to a later round: the round's own order is authoritative. */
  out->node_rank = i;
}

const char *rdzv_round_members_json(const struct rdzv_round *round, size_t *len)
{
  struct rdzv_round *r = (struct rdzv_round *)round; /* a cache: logically const */
  if (r->members_json == NULL) {
    struct mu_buf b = MU_BUF_INIT(MU_BUF_UNBOUNDED);
    uint64_t off = 0;
    mu_buf_putc(&b, '[');
    for (uint32_t i = 0; i < r->nnodes; i++) {
      const struct rdzv_node *n = r->members[i];
      /* Ids and addresses are checked at join to need no JSON escaping. */
      mu_buf_printf(&b,
                    "%s{\"node_id\":\"%s\",\"addr\":\"%s\",\"local_world_size\":%" PRIu32
                    ",\"node_rank\":%" PRIu32 ",\"rank_offset\":%" PRIu64 "}",
                    i ? "," : "", n->h.key, n->addr, n->lws, i, off);
      off += n->lws;
    }
    mu_buf_putc(&b, ']');
    r->members_json_len = b.len;
    r->members_json = mu_buf_detach(&b);
  }
  if (len)
    *len = r->members_json_len;
  return r->members_json;
}

/* The pending joins that make the next round, in rank order: members of the previous round
 * first, in their old order (bucketed by old rank, O(n)), then newcomers in join order, up to
 * `k`. When there are more candidates than places, members whose workers failed or hung go
 * last, after the standbys: a standby takes a failed node's place. Returns: how many were
 * written to `chosen`. */
static uint32_t choose_members(struct rdzv_run *run, struct rdzv_wait **chosen, uint32_t k)
{
  struct rdzv_round *old = run->round;
  struct mu_rules_view v;
  rdzv_rules_view(run, &v);
  int reorder = old != NULL && run->joins_prev > 0;
  uint32_t nchosen = 0;
  struct rdzv_wait **bucket = NULL;
  if (reorder) {
    bucket = mu_calloc(old->nnodes, sizeof(*bucket));
    for (struct mu_list_node *x = run->joins.head; x != NULL; x = x->next) {
      struct rdzv_node *n = wait_of(x)->obj;
      if (in_round(run, n))
        bucket[n->rank] = wait_of(x);
    }
    for (uint32_t i = 0; i < old->nnodes && nchosen < k; i++) {
      struct rdzv_node *n = bucket[i] != NULL ? bucket[i]->obj : NULL;
      if (n != NULL && mu_rule_order(&v, 1, n->failed) == 0)
        chosen[nchosen++] = bucket[i];
    }
  }
  for (struct mu_list_node *x = run->joins.head; x != NULL && nchosen < k; x = x->next) {
    struct rdzv_node *n = wait_of(x)->obj;
    if (!(reorder && in_round(run, n)))
      chosen[nchosen++] = wait_of(x);
  }
  for (uint32_t i = 0; reorder && i < old->nnodes && nchosen < k; i++)
    if (bucket[i] != NULL &&
        mu_rule_order(&v, 1, ((struct rdzv_node *)bucket[i]->obj)->failed) == 2)
      chosen[nchosen++] = bucket[i];
  mu_free(bucket);
  return nchosen;
}

void rdzv_mark_failed(struct rdzv_run *run, struct rdzv_node *n)
{
  if (n->failed || !in_round(run, n))
    return;
  n->failed = 1;
  run->round_failed++;
  run->joins_failed += n->join != NULL;
  rdzv_changed(run, RDZV_CH_MEMBER, n, NULL);
}

uint32_t rdzv_standbys(const struct rdzv_run *run)
{
  if (run->state != RDZV_RUN_OPEN)
    return 0;
  struct mu_rules_view v;
  rdzv_rules_view(run, &v);
  return mu_rule_standbys(&v); /* MU_RULE_STANDBY */
}

/* Healthy members of the old round left out of the new one (a standby took their place):
 * suspects, whose loss later gives back the restart the old round counted (partition.c). */
static void mark_suspects(struct rdzv_run *run, struct rdzv_round *old)
{
  run->prev_counted = run->round_counted;
  for (uint32_t i = 0; old != NULL && i < old->nnodes; i++) {
    struct rdzv_node *o = old->members[i];
    o->suspect = !o->gone && !o->failed && o->join == NULL && o->round == old;
  }
}

/* A new round: nothing of it counted yet. */
static void reset_counts(struct rdzv_run *run)
{
  run->round_gone = 0;
  run->left_ok = 0;
  run->round_lost = 0;
  run->round_spoiled = 0;
  run->round_counted = 0;
  run->joins_prev = 0;
  run->round_failed = 0;
  run->joins_failed = 0;
}

/* Closes a round with the pending joins (see choose_members()), up to max_nodes. */
static void close_round(struct rdzv_run *run)
{
  struct rdzv *rv = run->rv;
  struct rdzv_round *old = run->round;
  struct mu_rules_view v;
  rdzv_rules_view(run, &v);
  uint32_t k = mu_rule_round_size(&v);
  struct rdzv_round *r = mu_calloc(1, sizeof(*r));
  r->number = (old ? old->number : 0) + 1;
  r->members = mu_calloc(k ? k : 1, sizeof(*r->members));
  r->refs = 1;
  struct rdzv_wait **chosen = mu_calloc(k ? k : 1, sizeof(*chosen));
  uint32_t nchosen = choose_members(run, chosen, k);
  mark_suspects(run, old);
  /* Leave the old round: its members' places are cleared. */
  run->round = r;
  if (old)
    rdzv_round_unref(old);
  uint64_t off = 0;
  for (uint32_t i = 0; i < nchosen; i++) {
    struct rdzv_node *n = chosen[i]->obj;
    r->members[i] = n;
    n->refs++;
    n->round = r;
    n->rank = i;
    n->rank_offset = off;
    n->left_ok = 0;
    n->failed = 0;
    n->lost = 0;
    n->suspect = 0;
    rdzv_session_issue(n); /* before the ROUND record below: kept with the member */
    off += n->lws;
  }
  r->nnodes = nchosen;
  r->world_size = off;
  run->rstate = RDZV_ROUND_ACTIVE;
  reset_counts(run);
  rdzv_deadline_clear(rv, &run->last_call_dl);
  rv->st.rounds_closed++;
  rdzv_note(run, "round",
            "round %" PRIu64 " closed with %" PRIu32 " node%s (world size %" PRIu64 ")", r->number,
            nchosen, nchosen == 1 ? "" : "s", off);
  rdzv_hist_open(run, r);
  rdzv_changed(run, RDZV_CH_ROUND, NULL, NULL); /* logged before any answer reveals it */
  rdzv_changed(run, RDZV_CH_RUN, NULL, NULL);   /* its record in the history */

  /* Detach the chosen waits and start their leases, then answer. */
  for (uint32_t i = 0; i < nchosen; i++) {
    struct rdzv_node *n = chosen[i]->obj;
    n->join = NULL;
    rdzv_wait_detach(rv, chosen[i]);
    rv->st.pending_joins--;
    rdzv_lease_renew(run, n);
  }
  r->refs++; /* held while the callbacks run */
  struct rdzv_answer a;
  memset(&a, 0, sizeof(a));
  a.run_id = run->h.key;
  a.round = r;
  a.round_number = r->number;
  a.lease_ttl_ms = run->lease_ttl_ms;
  a.restart_count = run->restarts;
  a.max_restarts = run->max_restarts;
  if (nchosen > 0)
    rdzv_round_member(r, 0, &a.master);
  for (uint32_t i = 0; i < nchosen; i++) {
    rdzv_round_member(r, i, &a.self);
    a.session = r->members[i]->session;
    a.with_members = chosen[i]->with_members && nchosen <= RDZV_MEMBERS_IN_REPLY;
    rdzv_fire(chosen[i], &a);
  }
  mu_free(chosen);
  /* Members of older rounds watching them learn they are superseded. */
  if (run->round == r)
    kick_watches(run);
  rdzv_round_unref(r);
}

/* Closes the round if the pending joins allow it, or starts the last call (rules/rules.h,
 * MU_RULE_CLOSE_* and MU_RULE_LAST_CALL). */
void rdzv_maybe_close(struct rdzv_run *run, int last_call_over)
{
  if (run->state != RDZV_RUN_OPEN || run->rstate == RDZV_ROUND_ACTIVE)
    return;
  struct mu_rules_view v;
  rdzv_rules_view(run, &v);
  switch (mu_rule_close(&v, last_call_over)) {
  case MU_RULE_BELOW_MIN:
  case MU_RULE_SHUT_WAITS: /* the failed round's healthy survivors: a re-join or a loss */
    rdzv_deadline_clear(run->rv, &run->last_call_dl);
    return;
  case MU_RULE_LAST_CALL:
    if (!rdzv_deadline_queued(&run->last_call_dl))
      rdzv_deadline_set(run->rv, &run->last_call_dl, rdzv_now(run->rv) + run->last_call_ms);
    return;
  case MU_RULE_BUDGET_SPENT: /* the next round could close: the failure's shut stands */
    rdzv_end(run->rv, run->h.key, 1, run->shut_why);
    return;
  default:
    close_round(run);
    return;
  }
}

/* ---------------------------------------------------------------------------------------------
 * Runs
 */

int rdzv_run_idle(const struct rdzv_run *run)
{
  return run->nodes.n == 0 && run->pending_other == 0 && run->watches.n == 0;
}

void rdzv_gc_check(struct rdzv_run *run)
{
  if (run->state != RDZV_RUN_OPEN || rdzv_run_idle(run)) {
    if (!rdzv_deadline_queued(&run->gc_dl))
      rdzv_deadline_set(run->rv, &run->gc_dl, rdzv_now(run->rv) + run->rv->gc_ms);
  } else {
    rdzv_deadline_clear(run->rv, &run->gc_dl);
  }
}

/* Answers every wait of an ended run (or of a server shutting down with `err`). */
static void answer_all(struct rdzv_run *run, int err, const char *msg)
{
  struct rdzv *rv = run->rv;
  while (run->joins.head != NULL) {
    struct rdzv_wait *w = wait_of(run->joins.head);
    struct rdzv_node *n = w->obj;
    n->join = NULL;
    rdzv_wait_detach(rv, w);
    rv->st.pending_joins--;
    rdzv_fire_error(w, run->h.key, err, msg);
  }
  run->joins_prev = 0;
  run->joins_failed = 0;
  while (run->watches.head != NULL) {
    struct rdzv_wait *w = wait_of(run->watches.head);
    struct rdzv_answer a;
    memset(&a, 0, sizeof(a));
    if (err == RDZV_ESHUTTING_DOWN) {
      a.err = err;
      a.message = msg;
    }
    a.event = run->state == RDZV_RUN_SHUT ? "shut" : "closed";
    watch_answer(run, w, &a);
  }
  rdzv_barriers_kv_answer(run, err, msg);
}

static void node_drop(struct mu_hnode *h, void *data)
{
  struct rdzv_node *n = node_of(h);
  struct rdzv *rv = data;
  n->gone = 1;
  rv->st.nodes--;
  rdzv_node_unref(n);
}

void rdzv_node_drop(struct rdzv_run *run, struct rdzv_node *n)
{
  lease_unlink(run, n);
  mu_htab_del(&run->nodes, &n->h);
  n->gone = 1;
  run->rv->st.nodes--;
  rdzv_node_unref(n);
}

void rdzv_run_drop_nodes(struct rdzv_run *run)
{
  while (run->leases.head != NULL)
    lease_unlink(run, lease_node(run->leases.head));
  rdzv_deadline_clear(run->rv, &run->lease_dl);
  mu_htab_clear(&run->nodes, node_drop, run->rv);
}

/* Gives back the run's place in its client's count. */
static void owner_put(struct rdzv_run *run)
{
  struct rdzv_client *cl = run->owner;
  run->owner = NULL;
  if (cl == NULL || --cl->runs > 0)
    return;
  mu_htab_del(&run->rv->clients, &cl->h);
  mu_free(cl);
}

void rdzv_run_free(struct rdzv_run *run)
{
  struct rdzv *rv = run->rv;
  owner_put(run);
  rv->bytes -= rdzv_run_cost(run->h.len);
  rv->enc -= RUN_ENC + run->h.len;
  answer_all(run, RDZV_ESHUTTING_DOWN, "musterd is shutting down; retry against a running server");
  rdzv_deadline_clear(rv, &run->lease_dl);
  rdzv_deadline_clear(rv, &run->last_call_dl);
  rdzv_deadline_clear(rv, &run->gc_dl);
  mu_htab_clear(&run->nodes, node_drop, rv);
  mu_htab_release(&run->nodes);
  if (run->round)
    rdzv_round_unref(run->round);
  rdzv_barriers_kv_free(run);
  rdzv_goodput_free(run);
  mu_htab_del(&rv->runs, &run->h);
  mu_list_remove(&rv->runs_list, &run->link);
  rv->st.runs--;
  mu_free(run->h.key);
  mu_free(run->reason);
  mu_free(run->shut_why);
  mu_free(run);
}

static int valid_id(const char *s, size_t max)
{
  size_t n = strlen(s);
  if (n == 0 || n > max)
    return 0;
  for (; *s; s++) {
    char c = *s;
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
          c == '_' || c == '-'))
      return 0;
  }
  return 1;
}

struct rdzv_run *rdzv_find(struct rdzv *rv, const char *run_id)
{
  struct mu_hnode *e = mu_htab_find(&rv->runs, run_id, strlen(run_id));
  return e ? MU_CONTAINER_OF(e, struct rdzv_run, h) : NULL;
}

struct rdzv_node *rdzv_find_node(struct rdzv_run *run, const char *node_id)
{
  struct mu_hnode *e = mu_htab_find(&run->nodes, node_id, strlen(node_id));
  return e ? node_of(e) : NULL;
}

struct rdzv_run *rdzv_next_run(struct rdzv *rv, struct rdzv_run *prev)
{
  struct mu_list_node *x = prev ? prev->link.next : rv->runs_list.head;
  return x != NULL ? MU_CONTAINER_OF(x, struct rdzv_run, link) : NULL;
}

void rdzv_run_info(const struct rdzv_run *run, struct rdzv_run_info *out)
{
  memset(out, 0, sizeof(*out));
  out->run_id = run->h.key;
  out->state = run->state;
  out->reason = run->reason ? run->reason : "";
  out->round = run->round ? run->round->number : 0;
  out->round_state = run->rstate;
  out->nnodes = run->round ? run->round->nnodes : 0;
  out->waiting = waiting_count(run);
  out->min_nodes = run->min_nodes;
  out->max_nodes = run->max_nodes;
  out->last_call_ms = run->last_call_ms;
  out->join_timeout_ms = run->join_timeout_ms;
  out->lease_ttl_ms = run->lease_ttl_ms;
  out->nodes = (uint32_t)run->nodes.n;
  out->last_round = run->round;
  out->standbys = rdzv_standbys(run);
  out->unhealthy = rdzv_sick_count((struct rdzv_run *)run); /* forgets what timed out: a cache */
  out->restarts = run->restarts;
  out->max_restarts = run->max_restarts;
}

/* Checks a join's configuration and fills in the defaults. */
static int config_check(const struct rdzv *rv, const struct rdzv_config *in,
                        struct rdzv_config *out, struct mu_buf *err)
{
  *out = *in;
  if (out->min_nodes < 1 || out->min_nodes > RDZV_NODES_MAX) {
    mu_buf_printf(err, "min_nodes must be between 1 and %d, got %" PRIu32, RDZV_NODES_MAX,
                  out->min_nodes);
    return RDZV_EBAD_REQUEST;
  }
  if (out->max_nodes == 0)
    out->max_nodes = out->min_nodes;
  if (out->max_nodes < out->min_nodes || out->max_nodes > RDZV_NODES_MAX) {
    mu_buf_printf(err, "max_nodes must be between min_nodes (%" PRIu32 ") and %d, got %" PRIu32,
                  out->min_nodes, RDZV_NODES_MAX, out->max_nodes);
    return RDZV_EBAD_REQUEST;
  }
  if (out->last_call_ms < 0)
    out->last_call_ms = out->min_nodes == out->max_nodes ? 0 : DEFAULT_LAST_CALL_MS;
  if (out->join_timeout_ms < 0)
    out->join_timeout_ms = DEFAULT_JOIN_TIMEOUT_MS;
  if (out->max_restarts < -1 || out->max_restarts > RDZV_RESTARTS_MAX) {
    mu_buf_printf(err, "max_restarts must be between 0 and %d, got %lld", RDZV_RESTARTS_MAX,
                  (long long)out->max_restarts);
    return RDZV_EBAD_REQUEST;
  }
  if (out->lease_ttl_ms < 0)
    out->lease_ttl_ms = DEFAULT_LEASE_TTL_MS;
  if (out->last_call_ms > MAX_TIMEOUT_MS || out->join_timeout_ms > MAX_TIMEOUT_MS ||
      out->lease_ttl_ms > MAX_TIMEOUT_MS) {
    mu_buf_printf(err,
                  "last_call_ms, join_timeout_ms and lease_ttl_ms must be at most %lld (one week)",
                  MAX_TIMEOUT_MS);
    return RDZV_EBAD_REQUEST;
  }
  if (out->join_timeout_ms == 0 || out->lease_ttl_ms == 0) {
    mu_buf_puts(err, "join_timeout_ms and lease_ttl_ms must be positive");
    return RDZV_EBAD_REQUEST;
  }
  if (out->lease_ttl_ms > (int64_t)rv->lim.max_lease_ms) {
    mu_buf_printf(err,
                  "lease_ttl_ms %lld is over this server's cap of %" PRIu32
                  " ms (--v1-max-lease-ms): a lost node would hold its run that long; ask for a "
                  "shorter lease and heartbeat",
                  (long long)out->lease_ttl_ms, rv->lim.max_lease_ms);
    return RDZV_EBAD_REQUEST;
  }
  return 0;
}

struct rdzv_run *rdzv_run_new(struct rdzv *rv, const char *run_id, const struct rdzv_config *c)
{
  struct rdzv_run *run = mu_calloc(1, sizeof(*run));
  char *id = mu_strdup(run_id);
  run->rv = rv;
  run->min_nodes = c->min_nodes;
  run->max_nodes = c->max_nodes;
  run->last_call_ms = (uint32_t)c->last_call_ms;
  run->join_timeout_ms = (uint32_t)c->join_timeout_ms;
  run->lease_ttl_ms = (uint32_t)c->lease_ttl_ms;
  run->max_restarts = c->max_restarts;
  run->created_ms = rdzv_wall_ms();
  mu_htab_init(&run->sick, 0);
  run->lease_dl.kind = DL_LEASE;
  run->last_call_dl.kind = DL_LAST_CALL;
  run->gc_dl.kind = DL_GC;
  mu_htab_init(&run->nodes, 0);
  mu_htab_init(&run->barriers, 0);
  mu_htab_init(&run->kv, 0);
  mu_htab_add(&rv->runs, &run->h, id, strlen(id));
  rv->bytes += rdzv_run_cost(run->h.len);
  rv->enc += RUN_ENC + run->h.len;
  mu_list_push_back(&rv->runs_list, &run->link);
  rv->st.runs++;
  rdzv_note(run, "run",
            "run created (nodes %" PRIu32 ":%" PRIu32 ", last call %" PRIu32 " ms, lease %" PRIu32
            " ms)",
            run->min_nodes, run->max_nodes, run->last_call_ms, run->lease_ttl_ms);
  return run;
}

int rdzv_ended_err(const struct rdzv_run *run, struct mu_buf *err)
{
  const char *sep = run->reason && *run->reason ? ": " : "";
  const char *reason = run->reason ? run->reason : "";
  if (run->state == RDZV_RUN_CLOSED) {
    mu_buf_printf(err, "run '%s' is closed%s%s; start a new run id to run again", run->h.key, sep,
                  reason);
    return RDZV_ERUN_CLOSED;
  }
  mu_buf_printf(err, "run '%s' was shut down%s%s; start a new run id to run again", run->h.key, sep,
                reason);
  return RDZV_ERUN_SHUT;
}

/* ---------------------------------------------------------------------------------------------
 * Joins
 */

/* Checks a join's own fields. Returns: 0, or RDZV_EBAD_REQUEST with `err` saying why. */
static int join_check(const char *run_id, const struct rdzv_join_req *req, struct mu_buf *err)
{
  if (!valid_id(run_id, RDZV_ID_MAX)) {
    mu_buf_printf(err, "run_id must be 1-%d characters of A-Z a-z 0-9 . _ -", RDZV_ID_MAX);
    return RDZV_EBAD_REQUEST;
  }
  if (req->node_id == NULL || !rdzv_valid_text(req->node_id, RDZV_NODE_ID_MAX)) {
    mu_buf_printf(err,
                  "node_id must be 1-%d printable characters without spaces, quotes or "
                  "backslashes",
                  RDZV_NODE_ID_MAX);
    return RDZV_EBAD_REQUEST;
  }
  if (req->addr == NULL || !rdzv_valid_text(req->addr, RDZV_ADDR_MAX)) {
    mu_buf_printf(err,
                  "addr must be 1-%d printable characters without spaces, quotes or backslashes "
                  "(a host name or IP address)",
                  RDZV_ADDR_MAX);
    return RDZV_EBAD_REQUEST;
  }
  if (req->local_world_size < 1 || req->local_world_size > 65536) {
    mu_buf_printf(err, "local_world_size must be between 1 and 65536, got %" PRIu32,
                  req->local_world_size);
    return RDZV_EBAD_REQUEST;
  }
  if (req->master_port > 65535) {
    mu_buf_printf(err, "master_port must be between 0 and 65535, got %" PRIu32, req->master_port);
    return RDZV_EBAD_REQUEST;
  }
  return 0;
}

/* Does `cfg` ask for another run than `run` (nnodes, restart budget)? Says how in `m`. */
static int config_differs(const struct rdzv_run *run, const char *run_id,
                          const struct rdzv_config *cfg, struct mu_buf *m)
{
  if (cfg->min_nodes != run->min_nodes || cfg->max_nodes != run->max_nodes) {
    mu_buf_printf(m,
                  "run '%s' has nnodes %" PRIu32 ":%" PRIu32 " but this join asks for %" PRIu32
                  ":%" PRIu32 "; use the same --nnodes on every node, or a new run id",
                  run_id, run->min_nodes, run->max_nodes, cfg->min_nodes, cfg->max_nodes);
    return 1;
  }
  if (cfg->max_restarts >= 0 && run->max_restarts >= 0 && cfg->max_restarts != run->max_restarts) {
    mu_buf_printf(m,
                  "run '%s' has max_restarts %lld but this node asks for %lld; the restart "
                  "budget is the run's: use the same --max-restarts on every node, or a new run id",
                  run_id, (long long)run->max_restarts, (long long)cfg->max_restarts);
    return 1;
  }
  return 0;
}

/* A run created by a node that gave no budget takes the first one a node gives. */
static void adopt_budget(struct rdzv_run *run, const struct rdzv_config *cfg)
{
  if (run->max_restarts < 0 && cfg->max_restarts >= 0) {
    run->max_restarts = cfg->max_restarts;
    rdzv_changed(run, RDZV_CH_RUN, NULL, NULL);
  }
}

/* A join the run cannot take (ended, other nnodes): answered at once through `w`. */
static int join_refuse(struct rdzv_run *run, const char *run_id, const struct rdzv_config *cfg,
                       struct rdzv_wait *w)
{
  struct mu_buf m = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  int err;
  if (run->state != RDZV_RUN_OPEN) {
    err = rdzv_ended_err(run, &m);
  } else if (config_differs(run, run_id, cfg, &m)) {
    err = RDZV_ECONFIG_MISMATCH;
  } else {
    adopt_budget(run, cfg);
    return 0;
  }
  w->kind = RDZV_W_NONE;
  rdzv_fire_error(w, run_id, err, mu_buf_str(&m));
  mu_buf_release(&m);
  return 1;
}

/* The bounds a join that creates a run passes: runs in all, runs of its client, bytes.
 * Returns: 0 with *owner (NULL: not counted per client), or RDZV_ETOO_MANY with `err` set. */
static int new_run_check(struct rdzv *rv, const char *run_id, const struct rdzv_join_req *req,
                         struct rdzv_client **owner, struct mu_buf *err)
{
  *owner = NULL;
  if (rv->runs.n >= rv->lim.max_runs) {
    mu_buf_printf(err,
                  "musterd holds %" PRIu32 " runs, its bound (--v1-max-runs); close finished "
                  "runs (POST /v1/runs/ID/close) or wait for their GC",
                  rv->lim.max_runs);
    return RDZV_ETOO_MANY;
  }
  size_t clen = req->client != NULL ? strlen(req->client) : 0;
  struct mu_hnode *h = clen > 0 ? mu_htab_find(&rv->clients, req->client, clen) : NULL;
  struct rdzv_client *cl = h != NULL ? MU_CONTAINER_OF(h, struct rdzv_client, h) : NULL;
  if (cl != NULL && cl->runs >= rv->lim.max_runs_per_client) {
    mu_buf_printf(err,
                  "client %.128s created %" PRIu32 " runs that musterd still holds, the "
                  "per-client bound (--v1-max-runs-per-client); close finished runs (POST "
                  "/v1/runs/ID/close) or wait for their GC",
                  req->client, cl->runs);
    return RDZV_ETOO_MANY;
  }
  size_t il = strlen(req->node_id), al = strlen(req->addr);
  uint64_t cost = rdzv_run_cost(strlen(run_id)) + rdzv_node_cost(il) + rdzv_addr_cost(al);
  if (rdzv_over_bytes(rv, cost, RUN_ENC + strlen(run_id) + NODE_ENC + il + al, err))
    return RDZV_ETOO_MANY;
  if (clen > 0 && cl == NULL) {
    cl = mu_calloc(1, sizeof(*cl) + clen + 1);
    cl->h.key = (char *)(cl + 1);
    memcpy(cl->h.key, req->client, clen);
    mu_htab_add(&rv->clients, &cl->h, cl->h.key, clen);
  }
  if (cl != NULL)
    cl->runs++;
  *owner = cl;
  return 0;
}

int rdzv_join_checks(const struct rdzv *rv, const char *run_id, const struct rdzv_join_req *req,
                     struct rdzv_config *out, struct mu_buf *err)
{
  int rc = join_check(run_id, req, err);
  return rc != 0 ? rc : config_check(rv, &req->config, out, err);
}

int rdzv_run_for(struct rdzv *rv, const char *run_id, const struct rdzv_join_req *req,
                 const struct rdzv_config *cfg, struct rdzv_run **out, struct mu_buf *err)
{
  struct rdzv_run *run = rdzv_find(rv, run_id);
  *out = NULL;
  if (run == NULL) {
    struct rdzv_client *owner = NULL;
    int rc = new_run_check(rv, run_id, req, &owner, err);
    if (rc != 0)
      return rc;
    run = rdzv_run_new(rv, run_id, cfg);
    run->owner = owner;
    rdzv_changed(run, RDZV_CH_RUN, NULL, NULL);
    rdzv_gc_check(run);
  } else if (run->state != RDZV_RUN_OPEN) {
    return rdzv_ended_err(run, err);
  } else if (config_differs(run, run_id, cfg, err)) {
    return RDZV_ECONFIG_MISMATCH;
  } else {
    adopt_budget(run, cfg);
  }
  *out = run;
  return 0;
}

/* Would node `req->node_id` with its address pass the bounds? (says so in `err`) */
static int over_node(struct rdzv *rv, const struct rdzv_join_req *req, struct mu_buf *err)
{
  size_t il = strlen(req->node_id), al = strlen(req->addr);
  return rdzv_over_bytes(rv, rdzv_node_cost(il) + rdzv_addr_cost(al), NODE_ENC + il + al, err);
}

int rdzv_join(struct rdzv *rv, const char *run_id, const struct rdzv_join_req *req,
              struct rdzv_wait *w, struct mu_buf *err)
{
  struct rdzv_config cfg;
  int rc = join_check(run_id, req, err);
  if (rc == 0)
    rc = config_check(rv, &req->config, &cfg, err);
  if (rc != 0)
    return rc;
  struct rdzv_run *run = rdzv_find(rv, run_id);
  if (run == NULL) {
    struct rdzv_client *owner = NULL;
    rc = new_run_check(rv, run_id, req, &owner, err);
    if (rc != 0)
      return rc;
    run = rdzv_run_new(rv, run_id, &cfg);
    run->owner = owner;
    rdzv_changed(run, RDZV_CH_RUN, NULL, NULL);
  } else if (run->state == RDZV_RUN_OPEN && rdzv_find_node(run, req->node_id) == NULL &&
             over_node(rv, req, err)) {
    return RDZV_ETOO_MANY; /* (an ended run answers run_closed/run_shut below instead) */
  }
  rdzv_wait_start(w, RDZV_W_JOIN, run, NULL);
  w->with_members = req->with_members;
  if (join_refuse(run, run_id, &cfg, w))
    return 0;

  struct rdzv_node *n = rdzv_find_node(run, req->node_id);
  if (n != NULL) {
    if (n->join) {
      struct rdzv_wait *old = n->join;
      join_withdraw(run, n);
      rdzv_fire_error(old, run_id, RDZV_EREPLACED,
                      "a newer join from the same node_id replaced this one");
    }
  } else {
    size_t idlen = strlen(req->node_id);
    n = rdzv_node_new(rv, req->node_id, idlen);
    n->refs = 1;
    mu_htab_add(&run->nodes, &n->h, n->h.key, idlen);
    rv->st.nodes++;
  }
  rdzv_sick_forget(run, req->node_id); /* its check passed: it joins */
  if (n->addr == NULL || strcmp(n->addr, req->addr) != 0)
    rdzv_node_set_addr(n, mu_strdup(req->addr));
  n->lws = req->local_world_size;
  n->master_port = req->master_port;
  lease_unlink(run, n);
  n->join = w;
  w->obj = n;
  rdzv_wait_queue(&run->joins, w);
  rv->st.pending_joins++;
  rdzv_deadline_after(rv, &w->dl, run->join_timeout_ms);
  rdzv_gc_check(run);
  rdzv_note(run, "join", "node '%s' (%s, %" PRIu32 " workers) joined; %zu waiting", req->node_id,
            req->addr, req->local_world_size, (size_t)run->joins.n);
  if (in_round(run, n)) {
    rdzv_changed(run, RDZV_CH_MEMBER, n, NULL); /* its address or workers may be new */
    run->joins_prev++;
    run->joins_failed += n->failed != 0;
    /* A member that joins again has restarted: its round is over. With nodes waiting and room
     * in the round, the members re-join to take them in (they were told "waiting"). */
    char b[300];
    struct mu_rules_view v;
    rdzv_rules_view(run, &v);
    int grow = mu_rule_rejoin(&v) == MU_RULE_SCALE_UP;
    snprintf(b, sizeof(b), "member '%s' joined again (%s)", req->node_id,
             grow ? "to take in waiting nodes" : "restarted");
    rdzv_break_round(run, grow ? RDZV_END_SCALE_UP : RDZV_END_REJOINED, 0, b);
  } else if (run->rstate == RDZV_ROUND_ACTIVE && run->round->nnodes < run->max_nodes) {
    /* A newcomer: members learn of it if their round has room. A full round's watches are
     * left alone (O(1) per join): a newcomer changes only the pending joins, which a watch's
     * answer counts only while the round has room (watch_event()); a watch of the newcomer's
     * id by a non-member is answered "broken" when it is made, so none is pending. */
    kick_watches(run);
  }
  rdzv_maybe_close(run, 0);
  rdzv_check_end(run); /* a re-join may leave the minimum out of reach */
  return 0;
}

void rdzv_join_timed_out(struct rdzv_wait *w)
{
  struct rdzv_run *run = w->run;
  struct mu_buf m = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  mu_buf_printf(&m,
                "no round of run '%s' closed within join_timeout_ms (%" PRIu32
                " ms): fewer than min_nodes (%" PRIu32 ") nodes joined, or the run is full; "
                "start more nodes or raise the timeout",
                run->h.key, run->join_timeout_ms, run->min_nodes);
  join_withdraw(run, w->obj);
  rdzv_maybe_close(run, 0);
  rdzv_fire_error(w, run->h.key, RDZV_EJOIN_TIMEOUT, mu_buf_str(&m));
  mu_buf_release(&m);
}

void rdzv_join_cancel(struct rdzv_wait *w)
{
  struct rdzv_run *run = w->run;
  join_withdraw(run, w->obj);
  rdzv_maybe_close(run, 0);
}

/* ---------------------------------------------------------------------------------------------
 * Heartbeats, watches, leaving, ending
 */

int rdzv_heartbeat(struct rdzv *rv, const char *run_id, const char *node_id,
                   struct rdzv_answer *out)
{
  struct rdzv_run *run = rdzv_find(rv, run_id);
  memset(out, 0, sizeof(*out));
  if (run == NULL)
    return RDZV_ENO_SUCH_RUN;
  out->run_id = run->h.key;
  if (run->state == RDZV_RUN_CLOSED)
    return RDZV_ERUN_CLOSED;
  if (run->state == RDZV_RUN_SHUT)
    return RDZV_ERUN_SHUT;
  struct rdzv_node *n = rdzv_find_node(run, node_id);
  if (n == NULL)
    return RDZV_ENOT_MEMBER;
  rv->st.heartbeats++;
  if (n->in_lease)
    rdzv_lease_renew(run, n);
  out->round_number = run->round ? run->round->number : 0;
  if (in_round(run, n) && n->join == NULL)
    out->state = rdzv_round_state_name(run->rstate);
  else
    out->state = rdzv_round_state_name(RDZV_ROUND_JOINING);
  out->waiting = waiting_count(run);
  return 0;
}

int rdzv_watch(struct rdzv *rv, const char *run_id, const char *node_id, uint64_t round,
               uint64_t timeout_ms, struct rdzv_wait *w)
{
  struct rdzv_run *run = rdzv_find(rv, run_id);
  if (run == NULL)
    return RDZV_ENO_SUCH_RUN;
  if (timeout_ms > (uint64_t)MAX_TIMEOUT_MS)
    timeout_ms = (uint64_t)MAX_TIMEOUT_MS;
  const char *ev = watch_event(run, node_id, round);
  if (ev != NULL || timeout_ms == 0) {
    struct rdzv_answer a;
    memset(&a, 0, sizeof(a));
    a.run_id = run->h.key;
    a.event = ev ? ev : "none";
    a.round_number = round;
    a.waiting = waiting_count(run);
    rdzv_wait_start(w, RDZV_W_NONE, NULL, NULL);
    rdzv_fire(w, &a);
    return 0;
  }
  rdzv_wait_start(w, RDZV_W_WATCH, run, mu_strdup(node_id));
  w->round = round;
  struct rdzv_node *n = rdzv_find_node(run, node_id);
  if (n != NULL && !n->gone)
    watch_hold(run, w, n);
  rdzv_wait_queue(&run->watches, w);
  rv->st.pending_watches++;
  rdzv_deadline_after(rv, &w->dl, timeout_ms);
  rdzv_gc_check(run);
  return 0;
}

void rdzv_watch_timed_out(struct rdzv_wait *w)
{
  struct rdzv_run *run = w->run;
  struct rdzv_answer a;
  memset(&a, 0, sizeof(a));
  a.event = "none";
  a.waiting = waiting_count(run);
  a.run_id = run->h.key;
  a.round_number = w->round;
  watch_release(run, w);
  rdzv_wait_detach(run->rv, w);
  run->rv->st.pending_watches--;
  rdzv_gc_check(run);
  rdzv_fire(w, &a);
}

void rdzv_watch_cancel(struct rdzv_wait *w)
{
  struct rdzv_run *run = w->run;
  watch_release(run, w);
  rdzv_wait_detach(run->rv, w);
  run->rv->st.pending_watches--;
}

void rdzv_watch_gone(struct rdzv_wait *w)
{
  struct rdzv_run *run = w->run;
  struct rdzv_node *n = w->node;
  int lost = (w->flags & RDZV_WAIT_LOST_ON_CLOSE) && n != NULL && n->nwatch == 1 &&
             in_round(run, n) && n->join == NULL && run->rstate == RDZV_ROUND_ACTIVE &&
             w->round == run->round->number && run->state == RDZV_RUN_OPEN;
  if (lost)
    n->refs++; /* kept through the cancel, which drops the watch's reference */
  rdzv_watch_cancel(w);
  if (!lost)
    return;
  if (!n->gone) {
    rdzv_note(run, "lost", "node '%s' lost: its watch's connection closed", n->h.key);
    rdzv_node_lost(run, n, "was lost (its connection closed)");
  }
  rdzv_node_unref(n);
}

int rdzv_end(struct rdzv *rv, const char *run_id, int shut, const char *reason)
{
  struct rdzv_run *run = rdzv_find(rv, run_id);
  if (run == NULL)
    return RDZV_ENO_SUCH_RUN;
  enum rdzv_run_state want = shut ? RDZV_RUN_SHUT : RDZV_RUN_CLOSED;
  if (run->state == want)
    return 0;
  if (run->state != RDZV_RUN_OPEN)
    return run->state == RDZV_RUN_CLOSED ? RDZV_ERUN_CLOSED : RDZV_ERUN_SHUT;
  run->state = want;
  mu_free(run->reason);
  reason = reason ? reason : "";
  run->reason = mu_strndup(reason, strnlen(reason, 512));
  rdzv_note(run, "end", "run %s%s%s", shut ? "shut down" : "closed", run->reason[0] ? ": " : "",
            run->reason);
  rdzv_deadline_clear(rv, &run->last_call_dl);
  rdzv_deadline_clear(rv, &run->lease_dl);
  rdzv_hist_end(run, shut ? RDZV_END_SHUT : RDZV_END_CLOSED, 0, run->reason);
  struct mu_buf msg = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  int err = rdzv_ended_err(run, &msg);
  rdzv_changed(run, RDZV_CH_RUN, NULL, NULL);
  answer_all(run, err, mu_buf_str(&msg));
  mu_buf_release(&msg);
  rdzv_gc_check(run);
  return 0;
}
