/* The etcd v3 backend's finished rounds (issue 30 item 3; docs/rendezvous.md, "The etcd v3
 * backend"): a run whose members all succeeded ends succeeded, even when one of them never
 * heard the answer. musterd decides it on a member's loss (rules/rules.h: MU_RULE_LOST_AFTER_
 * SUCCESS, MU_RULE_SUCCEEDED_LOST); on etcd there is no server, so the nodes that read the
 * round decide it through the same rules: a member that leaves with success, and a node that
 * joins (or asks whether the run is still open) after it was cut off. And a run that can no
 * longer reach its minimum (MU_RULE_UNREACHABLE) is shut by the join that finds too few nodes
 * left, not at the join timeout. */
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "muster/errno.h"

#include "alloc.h"
#include "etcd3_int.h"
#include "json.h"
#include "rules.h"

void mu__etcd3_add_finish_reads(cJSON *ops, const char *run, long n)
{
  const char *fmts[] = {"n/" ETCD3_LEVEL "/", "d/" ETCD3_LEVEL "/", "l/" ETCD3_LEVEL "/",
                        "n/" ETCD3_LEVEL "/"};
  long lv[] = {n - 1, n, n, n};
  for (int i = 0; i < 4; i++) { /* counts only, but the re-joins: O(1) bytes for a big round */
    char *k = mu__etcd3_key_of(run, fmts[i], lv[i]);
    cJSON_AddItemToArray(ops, mu__etcd3_op_prefix(k, i == 3 ? E3_KEYS : E3_COUNT));
    mu_free(k);
  }
  char *gk = mu__etcd3_key_of(run, "g/%ld", n);
  cJSON_AddItemToArray(ops, mu__etcd3_op_range(gk, NULL, E3_COUNT));
  mu_free(gk);
}

/* A member of the round holds a key at level n: it re-joined (it restarted). */
static int member_rejoined(const cJSON *round, const cJSON *range)
{
  const cJSON *kv;
  int found = 0;
  cJSON_ArrayForEach(kv, cJSON_GetObjectItemCaseSensitive(range, "kvs"))
  {
    char *k = mu__etcd3_unb64(mu_json_get_str(kv, "key"), NULL);
    found |= mu__etcd3_member_index(round, mu__etcd3_id_of_key(k)) >= 0;
    mu_free(k);
  }
  return found;
}

uint32_t mu__etcd3_finish_view(const cJSON *round, const cJSON *ans, int at,
                               struct mu_rules_view *v)
{
  long long count[5];
  for (int i = 0; i < 5; i++)
    count[i] = mu__etcd3_int(mu__etcd3_txn_range(ans, at + i), "count");
  long long nodes = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(round, "members"));
  memset(v, 0, sizeof(*v));
  v->has_round = mu__etcd3_round_no(round) > 0;
  v->round_nodes = (uint32_t)nodes;
  v->round_ok = (uint32_t)(count[1] < nodes ? count[1] : nodes);
  /* Level n - 1 holds the members of round n that neither left nor were lost (and, for a
   * moment, joins a full round left out: they only make the loss look smaller). */
  long long lost = nodes - count[1] - count[0];
  v->round_lost = (uint32_t)(lost > 0 ? lost : 0);
  v->round_spoiled = count[2] > 0 || count[4] > 0 || /* left failed, or a report ended it */
                     member_rejoined(round, mu__etcd3_txn_range(ans, at + 3));
  return v->round_ok;
}

/* The node that asks (self, a member of round n that did not leave with success) is cut off or
 * restarting: it comes back to re-join, so its workers do not run toward a success. Its key may
 * still be there (its lease keeper puts it back under a new lease after a partition), but it is
 * lost as far as the round goes, as musterd found it lost when its connection died. */
static void self_lost(const cJSON *round, const cJSON *ans, const char *self,
                      struct mu_rules_view *v)
{
  if (self == NULL || mu__etcd3_member_index(round, self) < 0)
    return;
  if (mu__etcd3_int(mu__etcd3_txn_range(ans, 5), "count") > 0 &&  /* its key is there */
      mu__etcd3_int(mu__etcd3_txn_range(ans, 6), "count") == 0 && /* no success of its own */
      v->round_ok + v->round_lost < v->round_nodes)
    v->round_lost++;
}

/* Whether a member left round n with success (*any). The usual join finds none: one count, and
 * a big run's member list (m/<n>) is not read. Returns: 0 or a call's error. */
static int any_success(struct mu_etcd3 *e, const char *run, long n, int *any)
{
  char *p = mu__etcd3_key_of(run, "d/" ETCD3_LEVEL "/", n);
  struct mu__etcd3_txn t;
  mu__etcd3_txn_init(&t);
  cJSON_AddItemToArray(t.success, mu__etcd3_op_prefix(p, E3_COUNT));
  cJSON *ans = NULL;
  int rc = mu__etcd3_txn_run(e, &t, &ans);
  *any = rc == 0 && mu__etcd3_int(mu__etcd3_txn_range(ans, 0), "count") > 0;
  cJSON_Delete(ans);
  mu_free(p);
  return rc;
}

/* The start of both judgements of round n below: when a member of it succeeded, *r is the round
 * with its members attached and *t holds the finish reads (the caller adds its own and runs it
 * with judge_reads()); when none did, *r stays NULL. Returns: 0, or an error (with *r set, the
 * caller still frees it and t). */
static int judge_begin(struct mu_etcd3 *e, const char *run, const cJSON *round, long n, cJSON **r,
                       struct mu__etcd3_txn *t)
{
  int any = 0;
  int rc = any_success(e, run, n, &any);
  if (rc != 0 || !any)
    return rc;
  *r = cJSON_Duplicate(round, 1);
  rc = mu__etcd3_attach_members(e, run, *r);
  mu__etcd3_txn_init(t);
  mu__etcd3_add_finish_reads(t->success, run, n);
  return rc;
}

/* Runs the reads judge_begin() queued, unless rc (its error) says not to: then drops them.
 * Returns: 0 with *ans, or an error. */
static int judge_reads(struct mu_etcd3 *e, struct mu__etcd3_txn *t, int rc, cJSON **ans)
{
  if (rc != 0) {
    cJSON_Delete(t->root);
    return rc;
  }
  return mu__etcd3_txn_run(e, t, ans);
}

int mu__etcd3_close_if_finished(struct mu_etcd3 *e, const char *run, const cJSON *round,
                                const char *self)
{
  long n = mu__etcd3_round_no(round);
  cJSON *r = NULL;
  struct mu__etcd3_txn t;
  if (n <= 0)
    return 0;
  int rc = judge_begin(e, run, round, n, &r, &t);
  if (r == NULL)
    return rc;
  char *mine = mu__etcd3_key_of(run, "n/" ETCD3_LEVEL "/%s", n - 1, self ? self : "");
  char *done = mu__etcd3_key_of(run, "d/" ETCD3_LEVEL "/%s", n, self ? self : "");
  cJSON_AddItemToArray(t.success, mu__etcd3_op_range(mine, NULL, E3_COUNT));
  cJSON_AddItemToArray(t.success, mu__etcd3_op_range(done, NULL, E3_COUNT));
  cJSON *ans = NULL;
  rc = judge_reads(e, &t, rc, &ans);
  struct mu_rules_view v;
  if (rc == 0) {
    mu__etcd3_finish_view(r, ans, 0, &v);
    self_lost(r, ans, self, &v);
  }
  if (rc == 0 && mu_rule_succeeded(&v, v.round_ok)) {
    char reason[160];
    snprintf(reason, sizeof(reason),
             "round %ld: %u member(s) succeeded, %u lost after a success (succeeded-lost)", n,
             v.round_ok, v.round_lost);
    rc = mu_etcd3_end(e, run, 1, reason);
    if (rc == 0) {
      mu__etcd3_say(e, "run '%s' closed: %s", run, reason);
      rc = MU_ECLOSED;
    }
  }
  cJSON_Delete(ans);
  cJSON_Delete(r);
  mu_free(mine);
  mu_free(done);
  return rc;
}

/* Whether range (keys of one level or record prefix) holds node id's key. */
static int holds(const cJSON *range, const char *id)
{
  const cJSON *kv;
  int found = 0;
  cJSON_ArrayForEach(kv, cJSON_GetObjectItemCaseSensitive(range, "kvs"))
  {
    char *k = mu__etcd3_unb64(mu_json_get_str(kv, "key"), NULL);
    found |= strcmp(mu__etcd3_id_of_key(k), id) == 0;
    mu_free(k);
  }
  return found;
}

/* The members of round `round` that are gone, each with how ("'a' finished, 'b' lost"), as
 * many as fit in about 400 bytes, as musterd names them (rendezvous/rdzv/partition.c). The
 * reads at ans: 3 keys of level n, 5 d/<n>/, 6 l/<n>/, 7 level n - 1. */
static void missing(const cJSON *round, const cJSON *ans, char *out, size_t cap)
{
  const cJSON *m;
  size_t len = strlen(out);
  unsigned shown = 0, more = 0;
  cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(round, "members"))
  {
    const char *id = mu_json_get_str(m, "id");
    if (id == NULL || holds(mu__etcd3_txn_range(ans, 3), id) ||
        holds(mu__etcd3_txn_range(ans, 7), id))
      continue; /* still there: re-joined, or not yet */
    if (len > 400 || len >= cap) {
      more++;
      continue;
    }
    const char *how = holds(mu__etcd3_txn_range(ans, 5), id)   ? "finished"
                      : holds(mu__etcd3_txn_range(ans, 6), id) ? "left"
                                                               : "lost";
    snprintf(out + len, cap - len, "%s'%.64s' %s", shown++ ? ", " : "", id, how);
    len = strlen(out);
  }
  if (more > 0 && len < cap)
    snprintf(out + len, cap - len, " and %u more", more);
}

int mu__etcd3_shut_if_unreachable(struct mu_etcd3 *e, const char *run, const cJSON *round, long min)
{
  long n = mu__etcd3_round_no(round);
  cJSON *r = NULL;
  struct mu__etcd3_txn t;
  if (n <= 0)
    return 0;
  int rc = judge_begin(e, run, round, n, &r, &t);
  if (r == NULL)
    return rc; /* no member finished: every one of them may come back */
  const char *fmts[] = {"d/" ETCD3_LEVEL "/", "l/" ETCD3_LEVEL "/", "n/" ETCD3_LEVEL "/"};
  for (int i = 0; i < 3; i++) { /* 5-7: who finished, who left failed, who still runs */
    char *p = mu__etcd3_key_of(run, fmts[i], i == 2 ? n - 1 : n);
    cJSON_AddItemToArray(t.success, mu__etcd3_op_prefix(p, E3_KEYS));
    mu_free(p);
  }
  cJSON *ans = NULL;
  rc = judge_reads(e, &t, rc, &ans);
  struct mu_rules_view v;
  if (rc == 0) {
    mu__etcd3_finish_view(r, ans, 0, &v);
    long long due = mu__etcd3_int(mu__etcd3_txn_range(ans, 0), "count"); /* at level n - 1 */
    due = due < v.round_nodes ? due : v.round_nodes;
    v.min_nodes = (uint32_t)min;
    v.round_active = 0; /* spoiled (ended), or judged by who still runs toward a success */
    v.round_gone = v.round_nodes - (uint32_t)due;
    v.present = (uint32_t)(due + mu__etcd3_int(mu__etcd3_txn_range(ans, 3), "count"));
  }
  /* a run that succeeded is closed by its members' leave or the next join's begin, not here */
  if (rc == 0 && !mu_rule_succeeded(&v, v.round_ok) && mu_rule_unreachable(&v)) {
    char reason[600];
    snprintf(reason, sizeof(reason),
             "round %ld ended and the run can no longer reach its minimum of %ld nodes (%u "
             "left): ",
             n, min, v.present);
    missing(r, ans, reason, sizeof(reason));
    rc = mu_etcd3_end(e, run, 0, reason);
    if (rc == 0) {
      mu__etcd3_say(e, "run '%s' was shut down: %s", run, reason);
      rc = MU_ESHUT;
    }
  }
  cJSON_Delete(ans);
  cJSON_Delete(r);
  return rc;
}
