/* The etcd v3 backend's membership: heartbeat, watch, leave, end (etcd3_int.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "muster/errno.h"

#include "alloc.h"
#include "buf.h"
#include "etcd3_int.h"
#include "json.h"
#include "rules.h"

/* ---------------------------------------------------------------------------------------------
 * Membership: heartbeat, watch, leave, end
 */

/* Finds node id's key among the keys of the run's levels (*key: the caller's; NULL if none)
 * and reads the end and the latest round. */
static int find_member(struct mu_etcd3 *e, const char *run, const char *id, char **key, char *lease,
                       size_t lease_n, cJSON **round, long long *rev)
{
  *key = NULL;
  char *endk = mu__etcd3_key_of(run, "c/end"), *roundk = mu__etcd3_key_of(run, "c/round"),
       *nk = mu__etcd3_key_of(run, "n/");
  struct mu__etcd3_txn t;
  mu__etcd3_txn_init(&t);
  cJSON_AddItemToArray(t.success, mu__etcd3_op_range(endk, NULL, E3_ALL));
  cJSON_AddItemToArray(t.success, mu__etcd3_op_range(roundk, NULL, E3_ALL));
  cJSON_AddItemToArray(t.success, mu__etcd3_op_prefix(nk, E3_KEYS));
  cJSON *ans = NULL;
  int rc = mu__etcd3_txn_run(e, &t, &ans);
  if (rc == 0)
    rc = mu__etcd3_end_of(e, run, mu__etcd3_txn_range(ans, 0));
  if (rc == 0) {
    if (round != NULL)
      *round = mu__etcd3_kv_json(mu__etcd3_range_first(mu__etcd3_txn_range(ans, 1)));
    if (rev != NULL)
      *rev = mu__etcd3_header_rev(ans);
    const cJSON *kv;
    long best = -1;
    cJSON_ArrayForEach(kv, cJSON_GetObjectItemCaseSensitive(mu__etcd3_txn_range(ans, 2), "kvs"))
    {
      char *k = mu__etcd3_unb64(mu_json_get_str(kv, "key"), NULL);
      const char *lv = k + strlen(nk);
      if (strcmp(mu__etcd3_id_of_key(k), id) == 0 && strtol(lv, NULL, 10) >= best) {
        best = strtol(lv, NULL, 10);
        mu_free(*key);
        *key = k;
        k = NULL;
        snprintf(lease, lease_n, "%s",
                 mu_json_get_str(kv, "lease") ? mu_json_get_str(kv, "lease") : "");
      }
      mu_free(k);
    }
  }
  cJSON_Delete(ans);
  mu_free(endk);
  mu_free(roundk);
  mu_free(nk);
  return rc;
}

int mu_etcd3_heartbeat(struct mu_etcd3 *e, const char *run_id, const char *node_id, long *round,
                       int *waiting)
{
  e->errmsg[0] = '\0';
  if (!mu__etcd3_valid_id(run_id) || !mu__etcd3_valid_id(node_id)) {
    mu__etcd3_say(e, "bad run or node id");
    return MU_EINVAL;
  }
  char *key = NULL, lease[32] = "";
  cJSON *r = NULL;
  int rc = find_member(e, run_id, node_id, &key, lease, sizeof(lease), &r, NULL);
  if (round != NULL)
    *round = mu__etcd3_round_no(r);
  if (waiting != NULL)
    *waiting = 0;
  if (rc == 0 && key == NULL) {
    mu__etcd3_say(e, "node '%s' is not a member of run '%s' (not_member)", node_id, run_id);
    rc = MU_ENOENT;
  } else if (rc == 0 && lease[0] != '\0') {
    long ttl = 0;
    rc = mu__etcd3_keepalive(e, lease, &ttl);
    if (rc == 0 && ttl <= 0) {
      mu__etcd3_say(e, "the lease of node '%s' expired (not_member)", node_id);
      rc = MU_ENOENT;
    }
  }
  mu_free(key);
  cJSON_Delete(r);
  return rc;
}

struct watchst {
  const char *run;
  const char *id;
  long n;
  cJSON *round;
  long nnodes, max;
  char *endk, *roundk, *level, *old, *done, *lf; /* lf: l/<n>/ (members that left failed) */
  int spoiled;            /* a member left failed: the round cannot end succeeded */
  char *gk, *qp, *mine_r; /* g/<n> (the round ended), q/<n>/ (probes), r/<n>/<id> (answered) */
  int probe;              /* a probe of round n came: answer it, then watch on */
  char **gone;            /* ids of members that left successfully */
  size_t ngone;
  char **lost; /* members whose key vanished: lost unless back within ETCD3_LOST_GRACE_MS */
  size_t nlost;
  long long lost_until;
  int lost_new;
  enum mu_watch_event ev;
  struct mu_etcd3 *e;
};

static int is_gone(const struct watchst *w, const char *id)
{
  for (size_t i = 0; i < w->ngone; i++)
    if (strcmp(w->gone[i], id) == 0)
      return 1;
  return 0;
}

static void add_gone(struct watchst *w, const char *id)
{
  w->gone = mu_realloc(w->gone, (w->ngone + 1) * sizeof(*w->gone));
  w->gone[w->ngone++] = mu_strdup(id);
}

static void add_lost(struct watchst *w, const char *id)
{
  for (size_t i = 0; i < w->nlost; i++)
    if (strcmp(w->lost[i], id) == 0)
      return;
  if (w->nlost == 0) {
    w->lost_until = mu__etcd3_now_ms() +
                    ETCD3_LOST_GRACE_MS(mu_json_get_long(w->round, "ttl", ETCD3_TTL_MS_DEFAULT));
    w->lost_new = 1;
  }
  w->lost = mu_realloc(w->lost, (w->nlost + 1) * sizeof(*w->lost));
  w->lost[w->nlost++] = mu_strdup(id);
}

static void back_lost(struct watchst *w, const char *id)
{
  for (size_t i = 0; i < w->nlost; i++)
    if (strcmp(w->lost[i], id) == 0) {
      mu_free(w->lost[i]);
      w->lost[i] = w->lost[--w->nlost];
      return;
    }
}

static void watch_key(struct watchst *w, const char *k, int del, const cJSON *kv)
{
  if (strcmp(k, w->gk) == 0 && !del) { /* a member's report or a loss ended the round */
    if (w->ev == MU_WATCH_NONE || w->ev == MU_WATCH_WAITING)
      w->ev = MU_WATCH_BROKEN;
  } else if (strncmp(k, w->qp, strlen(w->qp)) == 0 && !del) {
    if (strcmp(mu__etcd3_id_of_key(k), w->id) != 0)
      w->probe = 1; /* another member asks who is alive */
  } else if (strcmp(k, w->endk) == 0 && !del) {
    cJSON *j = mu__etcd3_kv_json(kv);
    const char *st = mu_json_get_str(j, "state");
    w->ev = st != NULL && strcmp(st, "shut") == 0 ? MU_WATCH_SHUT : MU_WATCH_CLOSED;
    cJSON_Delete(j);
  } else if (strcmp(k, w->roundk) == 0 && !del) {
    cJSON *j = mu__etcd3_kv_json(kv);
    if (mu__etcd3_round_no(j) > w->n && w->ev != MU_WATCH_SHUT && w->ev != MU_WATCH_CLOSED)
      w->ev = MU_WATCH_SUPERSEDED;
    cJSON_Delete(j);
  } else if (strncmp(k, w->done, strlen(w->done)) == 0 && !del) {
    add_gone(w, mu__etcd3_id_of_key(k));
  } else if (strncmp(k, w->lf, strlen(w->lf)) == 0 && !del) {
    w->spoiled = 1;
  } else if (strncmp(k, w->old, strlen(w->old)) == 0) {
    const char *id = mu__etcd3_id_of_key(k);
    if (!del)
      back_lost(w, id); /* put again under a new lease (see keeper_revive) */
    else if (mu__etcd3_member_index(w->round, id) >= 0 && !is_gone(w, id))
      add_lost(w, id);
  } else if (strncmp(k, w->level, strlen(w->level)) == 0 && !del) {
    if (mu__etcd3_member_index(w->round, mu__etcd3_id_of_key(k)) >= 0 && w->ev == MU_WATCH_NONE)
      w->ev = MU_WATCH_BROKEN; /* a member re-joined: it restarted */
    else if (w->nnodes < w->max && w->ev == MU_WATCH_NONE)
      w->ev = MU_WATCH_WAITING;
  }
}

static int watch_events(void *arg, const cJSON *events)
{
  struct watchst *w = arg;
  const cJSON *ev;
  enum mu_watch_event before = w->ev;
  cJSON_ArrayForEach(ev, events)
  {
    const cJSON *kv = cJSON_GetObjectItemCaseSensitive(ev, "kv");
    char *k = mu__etcd3_unb64(mu_json_get_str(kv, "key"), NULL);
    const char *type = mu_json_get_str(ev, "type");
    watch_key(w, k, type != NULL && strcmp(type, "DELETE") == 0, kv);
    mu_free(k);
  }
  /* a broken round wins over waiting nodes seen in the same answer */
  int again = w->lost_new || w->probe;
  w->lost_new = 0;
  return w->ev != before || w->ev != MU_WATCH_NONE || again;
}

static void watch_init(struct watchst *w, struct mu_etcd3 *e, const char *run_id,
                       const char *node_id, long round)
{
  memset(w, 0, sizeof(*w));
  w->run = run_id;
  w->id = node_id;
  w->n = round;
  w->e = e;
  w->endk = mu__etcd3_key_of(run_id, "c/end");
  w->roundk = mu__etcd3_key_of(run_id, "c/round");
  w->level = mu__etcd3_key_of(run_id, "n/" ETCD3_LEVEL "/", round);
  w->old = mu__etcd3_key_of(run_id, "n/" ETCD3_LEVEL "/", round - 1);
  w->done = mu__etcd3_key_of(run_id, "d/" ETCD3_LEVEL "/", round);
  w->lf = mu__etcd3_key_of(run_id, "l/" ETCD3_LEVEL "/", round);
  w->gk = mu__etcd3_key_of(run_id, "g/%ld", round);
  w->qp = mu__etcd3_key_of(run_id, "q/%ld/", round);
  w->mine_r = mu__etcd3_key_of(run_id, "r/%ld/%s", round, node_id);
}

static void watch_release(struct watchst *w)
{
  cJSON_Delete(w->round);
  for (size_t i = 0; i < w->ngone; i++)
    mu_free(w->gone[i]);
  mu_free(w->gone);
  for (size_t i = 0; i < w->nlost; i++)
    mu_free(w->lost[i]);
  mu_free(w->lost);
  mu_free(w->endk);
  mu_free(w->roundk);
  mu_free(w->level);
  mu_free(w->old);
  mu_free(w->done);
  mu_free(w->lf);
  mu_free(w->gk);
  mu_free(w->qp);
  mu_free(w->mine_r);
}

/* One read of what the watch starts from: c/end, c/round, the keys of the round's members
 * (level n - 1), of the nodes waiting for the next round (level n), of those done (d/n). */
static int watch_read(struct watchst *w, cJSON **ans)
{
  struct mu__etcd3_txn t;
  mu__etcd3_txn_init(&t);
  cJSON_AddItemToArray(t.success, mu__etcd3_op_range(w->endk, NULL, E3_ALL));
  cJSON_AddItemToArray(t.success, mu__etcd3_op_range(w->roundk, NULL, E3_ALL));
  cJSON_AddItemToArray(t.success, mu__etcd3_op_prefix(w->old, E3_KEYS));
  cJSON_AddItemToArray(t.success, mu__etcd3_op_prefix(w->level, E3_KEYS));
  cJSON_AddItemToArray(t.success, mu__etcd3_op_prefix(w->done, E3_KEYS));
  cJSON_AddItemToArray(t.success, mu__etcd3_op_range(w->gk, NULL, E3_KEYS));
  cJSON_AddItemToArray(t.success, mu__etcd3_op_prefix(w->qp, E3_KEYS));
  cJSON_AddItemToArray(t.success, mu__etcd3_op_range(w->mine_r, NULL, E3_KEYS));
  cJSON_AddItemToArray(t.success, mu__etcd3_op_prefix(w->lf, E3_COUNT));
  return mu__etcd3_txn_run(w->e, &t, ans);
}

/* The ids of the keys of responses[i] of a read, each to fn. */
static void each_id(struct watchst *w, const cJSON *ans, int i,
                    void (*fn)(struct watchst *w, const char *id))
{
  const cJSON *kv;
  cJSON_ArrayForEach(kv, cJSON_GetObjectItemCaseSensitive(mu__etcd3_txn_range(ans, i), "kvs"))
  {
    char *k = mu__etcd3_unb64(mu_json_get_str(kv, "key"), NULL);
    fn(w, mu__etcd3_id_of_key(k));
    mu_free(k);
  }
}

static size_t count_present(const struct watchst *w, const cJSON *ans)
{
  size_t present = 0;
  const cJSON *kv;
  cJSON_ArrayForEach(kv, cJSON_GetObjectItemCaseSensitive(mu__etcd3_txn_range(ans, 2), "kvs"))
  {
    char *k = mu__etcd3_unb64(mu_json_get_str(kv, "key"), NULL);
    const char *id = mu__etcd3_id_of_key(k);
    present += mu__etcd3_member_index(w->round, id) >= 0 && !is_gone(w, id);
    mu_free(k);
  }
  return present;
}

/* Every member that did not leave successfully still holds its key below this round; one whose
 * key is missing is lost, unless it is put back within ETCD3_LOST_GRACE_MS. */
static void find_lost(struct watchst *w, const cJSON *ans)
{
  each_id(w, ans, 4, add_gone);
  size_t gone_members = 0;
  for (size_t i = 0; i < w->ngone; i++)
    gone_members += mu__etcd3_member_index(w->round, w->gone[i]) >= 0;
  if (count_present(w, ans) + gone_members >= (size_t)w->nnodes)
    return;
  const cJSON *m;
  cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(w->round, "members"))
  {
    const char *id = mu_json_get_str(m, "id");
    if (id != NULL && !is_gone(w, id))
      add_lost(w, id);
  }
  each_id(w, ans, 2, back_lost);
}

/* The watch's start: the event the read already shows (MU_WATCH_NONE: none yet).
 * Returns: 0, or an error. */
static int watch_start(struct watchst *w, const cJSON *ans)
{
  int end = mu__etcd3_end_of(w->e, w->run, mu__etcd3_txn_range(ans, 0));
  if (end != 0) {
    w->ev = end == MU_ESHUT ? MU_WATCH_SHUT : MU_WATCH_CLOSED;
    return 0;
  }
  w->round = mu__etcd3_kv_json(mu__etcd3_range_first(mu__etcd3_txn_range(ans, 1)));
  int rc = mu__etcd3_attach_members(w->e, w->run, w->round);
  if (rc != 0)
    return rc;
  w->nnodes = (long)cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(w->round, "members"));
  w->max = mu_json_get_long(w->round, "max", w->nnodes);
  long r = mu__etcd3_round_no(w->round);
  if (r > w->n)
    w->ev = MU_WATCH_SUPERSEDED;
  else if (r < w->n || mu__etcd3_member_index(w->round, w->id) < 0 ||
           mu__etcd3_range_first(mu__etcd3_txn_range(ans, 5)) != NULL)
    w->ev = MU_WATCH_BROKEN; /* not a member, or g/<n>: the round ended */
  if (w->ev != MU_WATCH_NONE)
    return 0;
  /* a probe this node has not answered (it came while no watch was open) */
  const cJSON *q;
  cJSON_ArrayForEach(q, cJSON_GetObjectItemCaseSensitive(mu__etcd3_txn_range(ans, 6), "kvs"))
  {
    char *k = mu__etcd3_unb64(mu_json_get_str(q, "key"), NULL);
    if (strcmp(mu__etcd3_id_of_key(k), w->id) != 0 &&
        mu__etcd3_range_first(mu__etcd3_txn_range(ans, 7)) == NULL)
      w->probe = 1;
    mu_free(k);
  }
  w->spoiled = mu__etcd3_int(mu__etcd3_txn_range(ans, 8), "count") > 0;
  find_lost(w, ans);
  const cJSON *kv;
  cJSON_ArrayForEach(kv, cJSON_GetObjectItemCaseSensitive(mu__etcd3_txn_range(ans, 3), "kvs"))
  {
    char *k = mu__etcd3_unb64(mu_json_get_str(kv, "key"), NULL);
    watch_key(w, k, 0, kv);
    mu_free(k);
  }
  return 0;
}

/* The lost members (their grace passed) after another member left with success, in a round that
 * nothing spoiled, count as done and the round goes on (rules/rules.h, mu_rule_lost:
 * MU_RULE_LOST_AFTER_SUCCESS): its last member to leave with success closes the run. Returns: 1
 * (the lost are forgotten), 0 (the round is broken). */
static int lost_after_success(struct watchst *w)
{
  struct mu_rules_view v;
  memset(&v, 0, sizeof(v));
  for (size_t i = 0; i < w->ngone; i++)
    v.round_ok += mu__etcd3_member_index(w->round, w->gone[i]) >= 0;
  v.has_round = 1;
  v.round_nodes = (uint32_t)w->nnodes;
  v.round_spoiled = w->spoiled;
  if (mu_rule_lost(&v, 1, 0, 0) != MU_RULE_LOST_AFTER_SUCCESS)
    return 0;
  for (size_t i = 0; i < w->nlost; i++)
    mu_free(w->lost[i]);
  w->nlost = 0;
  return 1;
}

/* Watches the run's c/ keys and levels from revision `from` until an event, a lost member's
 * grace passed, or the deadline. Returns: 0 (w->ev says what), or an error. */
static int watch_stream(struct watchst *w, long long from, long long deadline)
{
  /* [c/, q/<n>/\xff): the run's c/ keys, g/<n>, the levels up to n, the probes of round n */
  char *cprefix = mu__etcd3_key_of(w->run, "c/"), *wend = mu__etcd3_prefix_end(w->qp);
  struct mu__etcd3_range rs[1] = {{cprefix, wend, 0}};
  int rc = 0;
  for (;;) {
    if (w->probe) { /* alive: answered at once, and the watch goes on */
      w->probe = 0;
      rc = mu__etcd3_probe_answer(w->e, w->run, w->n, w->id);
      if (rc != 0)
        break;
    }
    long long until = w->nlost > 0 && w->lost_until < deadline ? w->lost_until : deadline;
    w->lost_new = 0;
    rc = mu__etcd3_watch_ranges(w->e, rs, 1, from, until, watch_events, w, &from);
    if (rc == MU_ESTATE) {
      rc = 0; /* compacted: the next watch call reads afresh */
      break;
    }
    if (rc == MU_ETIMEDOUT)
      rc = 0;
    if (rc != 0 || w->ev != MU_WATCH_NONE)
      break;
    if (w->probe)
      continue;
    if (w->nlost > 0 && mu__etcd3_now_ms() >= w->lost_until) {
      if (lost_after_success(w))
        continue; /* done as far as the round goes: it goes on */
      w->ev = MU_WATCH_BROKEN;
      break;
    }
    if (mu__etcd3_now_ms() >= deadline)
      break;
  }
  mu_free(cprefix);
  mu_free(wend);
  return rc;
}

int mu_etcd3_watch(struct mu_etcd3 *e, const char *run_id, const char *node_id, long round,
                   long timeout_ms, enum mu_watch_event *ev, int *waiting)
{
  *ev = MU_WATCH_NONE;
  if (waiting != NULL)
    *waiting = 0;
  e->errmsg[0] = '\0';
  if (!mu__etcd3_valid_id(run_id) || !mu__etcd3_valid_id(node_id)) {
    mu__etcd3_say(e, "bad run or node id");
    return MU_EINVAL;
  }
  long long deadline = mu__etcd3_now_ms() + (timeout_ms > 0 ? timeout_ms : 30000);
  struct watchst w;
  cJSON *ans = NULL;
  watch_init(&w, e, run_id, node_id, round);
  int rc = watch_read(&w, &ans);
  if (rc == 0)
    rc = watch_start(&w, ans);
  if (rc == 0 && w.ev == MU_WATCH_NONE) {
    e->watch_econn = 1; /* cut off from every member: MU_ECONN, not a quiet watch */
    rc = watch_stream(&w, mu__etcd3_header_rev(ans) + 1, deadline);
    e->watch_econn = 0;
  }
  *ev = w.ev;
  if (rc == 0 && waiting != NULL)
    *waiting = w.ev == MU_WATCH_WAITING;
  cJSON_Delete(ans);
  watch_release(&w);
  return rc;
}

int mu_etcd3_end(struct mu_etcd3 *e, const char *run_id, int succeeded, const char *reason)
{
  e->errmsg[0] = '\0';
  if (!mu__etcd3_valid_id(run_id)) {
    mu__etcd3_say(e, "bad run id");
    return MU_EINVAL;
  }
  char *endk = mu__etcd3_key_of(run_id, "c/end");
  cJSON *v = cJSON_CreateObject();
  cJSON_AddStringToObject(v, "state", succeeded ? "closed" : "shut");
  if (reason != NULL)
    cJSON_AddStringToObject(v, "reason", reason);
  cJSON_AddNumberToObject(v, "time_ms", (double)mu__etcd3_wall_ms());
  char *txt = cJSON_PrintUnformatted(v);
  cJSON_Delete(v);
  struct mu__etcd3_txn t;
  mu__etcd3_txn_init(&t);
  cJSON_AddItemToArray(t.compare, mu__etcd3_cmp(endk, NULL, "CREATE", "EQUAL", 0));
  cJSON_AddItemToArray(t.success, mu__etcd3_op_put(endk, txt, strlen(txt), NULL));
  cJSON_AddItemToArray(t.failure, mu__etcd3_op_range(endk, NULL, E3_ALL));
  cJSON_free(txt);
  cJSON *ans = NULL;
  int rc = mu__etcd3_txn_run(e, &t, &ans);
  if (rc == 0 && !mu__etcd3_txn_ok(ans)) {
    int was = mu__etcd3_end_of(e, run_id, mu__etcd3_txn_range(ans, 0));
    rc = was == (succeeded ? MU_ECLOSED : MU_ESHUT) ? 0 : was;
  }
  cJSON_Delete(ans);
  mu_free(endk);
  return rc;
}

int mu_etcd3_leave(struct mu_etcd3 *e, const char *run_id, const char *node_id, int succeeded,
                   const char *reason)
{
  (void)reason;
  e->errmsg[0] = '\0';
  if (!mu__etcd3_valid_id(run_id) || !mu__etcd3_valid_id(node_id)) {
    mu__etcd3_say(e, "bad run or node id");
    return MU_EINVAL;
  }
  char *key = NULL, lease[32] = "";
  cJSON *round = NULL;
  int rc = find_member(e, run_id, node_id, &key, lease, sizeof(lease), &round, NULL);
  if (rc == 0 && key == NULL) {
    mu__etcd3_say(e, "node '%s' is not a member of run '%s' (not_member)", node_id, run_id);
    rc = MU_ENOENT;
  }
  if (rc != 0)
    goto out;
  rc = mu__etcd3_attach_members(e, run_id, round);
  if (rc != 0)
    goto out;
  long n = mu__etcd3_round_no(round);
  int in_round = mu__etcd3_member_index(round, node_id) >= 0;
  struct mu__etcd3_txn t;
  mu__etcd3_txn_init(&t);
  char *mine = mu__etcd3_key_of(run_id, "d/" ETCD3_LEVEL "/%s", n, node_id);
  char *failed = mu__etcd3_key_of(run_id, "l/" ETCD3_LEVEL "/%s", n, node_id);
  if (in_round) /* d/<n>/<id> a success, l/<n>/<id> a failure (it spoils the round) */
    cJSON_AddItemToArray(t.success, mu__etcd3_op_put(succeeded ? mine : failed, "", 0, NULL));
  cJSON_AddItemToArray(t.success, mu__etcd3_op_del(key, NULL));
  mu__etcd3_add_finish_reads(t.success, run_id, n); /* after the writes: they see them */
  cJSON *ans = NULL;
  rc = mu__etcd3_txn_run(e, &t, &ans);
  struct mu_rules_view v;
  /* the last member done closes the run, and so does one whose peers that did not leave were
   * lost after a success (MU_RULE_SUCCEEDED_LOST) */
  int finished = rc == 0 && succeeded && in_round &&
                 mu_rule_succeeded(&v, mu__etcd3_finish_view(round, ans, in_round ? 2 : 1, &v));
  cJSON_Delete(ans);
  mu_free(mine);
  mu_free(failed);
  if (finished)
    rc = mu_etcd3_end(e, run_id, 1, NULL);
  if (e->my_key != NULL && strcmp(e->my_key, key) == 0)
    mu__etcd3_lease_revoke(e);
out:
  mu_free(key);
  cJSON_Delete(round);
  return rc;
}
