/* The etcd v3 backend's join (docs/rendezvous.md, "The etcd v3 backend"): put this node at the
 * latest round's level, close the next round when it may, or watch until someone does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "muster/errno.h"

#include "alloc.h"
#include "buf.h"
#include "etcd3_int.h"
#include "json.h"

/* ---------------------------------------------------------------------------------------------
 * Join
 */

struct joinst {
  struct mu_etcd3 *e;
  const char *run;
  const char *id;
  const struct mu_join_opts *o;
  char *endk, *roundk; /* c/end, c/round of the run */
  long min, max, last_call;
  long max_restarts;      /* the run's restart budget (c/cfg); -1: none kept */
  cJSON *round;           /* the latest round's value, NULL before round 1 */
  long long round_mod;    /* its mod revision, 0 when absent */
  long long rev;          /* the revision everything above was read at */
  int ended;              /* MU_ECLOSED / MU_ESHUT */
  long long count_level;  /* nodes at this node's level */
  long long count_old;    /* nodes one level below */
  char *bkey;             /* this node's bucket key of the round it waits for (big rounds) */
  cJSON *bucket;          /* the last value seen of it */
  char *cprefix, *cend;   /* the range of the run's c/ keys */
  long at;                /* the level whose counts s holds; -1: none */
  long mine;              /* the level this call put this node at: a join always re-joins */
  long long deadline;     /* the join's timeout */
  long long last_call_at; /* when the last call ends (0: not running) */
};

static void set_round(struct joinst *s, const cJSON *kv)
{
  cJSON_Delete(s->round);
  s->round = mu__etcd3_kv_json(kv);
  s->round_mod = kv != NULL ? mu__etcd3_int(kv, "mod_revision") : 0;
}

/* A run whose rounds may pass ETCD3_MEMBERS_INLINE nodes: its rounds keep their member list in
 * m/<R> and a/<R>/<b>, and its waiting nodes watch their bucket (which says the round too). Decided
 * by the run's max, so that every node of the run knows it before any round closes. */
static int big_run(const struct joinst *s)
{
  return s->max > ETCD3_MEMBERS_INLINE;
}

/* Checks the run's configuration `kv` (c/cfg) against this node's; a run that keeps no restart
 * budget takes the first one a node gives (a compare-and-swap of c/cfg). Returns: 0 with
 * s->max_restarts the run's, MU_ESTATE (config_mismatch), or a call's error. */
static int cfg_check(struct joinst *s, const char *cfgk, const cJSON *kv)
{
  struct mu_etcd3 *e = s->e;
  cJSON *cur = mu__etcd3_kv_json(kv);
  long hmin = mu_json_get_long(cur, "min_nodes", -1), hmax = mu_json_get_long(cur, "max_nodes", -1);
  long hmr = mu_json_get_long(cur, "max_restarts", -1);
  int rc = 0;
  if (hmin != s->min || hmax != s->max) {
    mu__etcd3_say(e, "run '%s' has --nnodes %ld:%ld, this node asks for %ld:%ld (config_mismatch)",
                  s->run, hmin, hmax, s->min, s->max);
    rc = MU_ESTATE;
  } else if (s->o->budget && hmr >= 0 && hmr != s->o->max_restarts) {
    mu__etcd3_say(e,
                  "run '%s' has max_restarts %ld but this node asks for %ld; the restart budget "
                  "is the run's: use the same --max-restarts on every node (config_mismatch)",
                  s->run, hmr, s->o->max_restarts);
    rc = MU_ESTATE;
  } else if (s->o->budget && hmr < 0) { /* adopt it: the first budget given */
    cJSON_AddNumberToObject(cur, "max_restarts", (double)s->o->max_restarts);
    char *txt = cJSON_PrintUnformatted(cur);
    struct mu__etcd3_txn t;
    mu__etcd3_txn_init(&t);
    cJSON_AddItemToArray(
        t.compare, mu__etcd3_cmp(cfgk, NULL, "MOD", "EQUAL", mu__etcd3_int(kv, "mod_revision")));
    cJSON_AddItemToArray(t.success, mu__etcd3_op_put(cfgk, txt, strlen(txt), NULL));
    cJSON *ans = NULL;
    rc = mu__etcd3_txn_run(e, &t, &ans); /* lost the race: another node set one; read it later */
    cJSON_Delete(ans);
    cJSON_free(txt);
    hmr = s->o->max_restarts;
  }
  s->max_restarts = hmr;
  cJSON_Delete(cur);
  return rc;
}

/* Creates the run's configuration or checks ours against it; reads the end and the round. */
static int join_begin(struct joinst *s)
{
  struct mu_etcd3 *e = s->e;
  char *cfgk = mu__etcd3_key_of(s->run, "c/cfg");
  char cfg[320];
  snprintf(cfg, sizeof(cfg),
           "{\"min_nodes\":%ld,\"max_nodes\":%ld,\"last_call_ms\":%ld,\"max_restarts\":%ld,"
           "\"created_ms\":%lld}",
           s->min, s->max, s->last_call, s->o->budget ? s->o->max_restarts : -1,
           mu__etcd3_wall_ms());
  s->max_restarts = s->o->budget ? s->o->max_restarts : -1;
  /* A read first (no write when the run exists: a read-only txn costs no raft entry), then
   * the create-if-absent txn when it does not. Either answer holds cfg, end, round at 0-2. */
  cJSON *ans = NULL;
  int rc = 0, fresh = 0;
  for (int create = 0; create < 2 && !fresh; create++) {
    struct mu__etcd3_txn t;
    mu__etcd3_txn_init(&t);
    cJSON *have = create ? t.failure : t.success; /* the branch taken when cfg exists */
    cJSON *none = create ? t.success : t.failure;
    cJSON_AddItemToArray(t.compare,
                         mu__etcd3_cmp(cfgk, NULL, "CREATE", create ? "EQUAL" : "GREATER", 0));
    cJSON_AddItemToArray(have, mu__etcd3_op_range(cfgk, NULL, E3_ALL));
    cJSON_AddItemToArray(none, create ? mu__etcd3_op_put(cfgk, cfg, strlen(cfg), NULL)
                                      : mu__etcd3_op_range(cfgk, NULL, E3_ALL));
    for (int i = 0; i < 2; i++) {
      cJSON_AddItemToArray(have, mu__etcd3_op_range(i ? s->roundk : s->endk, NULL, E3_ALL));
      cJSON_AddItemToArray(none, mu__etcd3_op_range(i ? s->roundk : s->endk, NULL, E3_ALL));
    }
    cJSON_Delete(ans);
    ans = NULL;
    rc = mu__etcd3_txn_run(e, &t, &ans);
    if (rc != 0)
      goto out;
    int exists = create ? !mu__etcd3_txn_ok(ans) : mu__etcd3_txn_ok(ans);
    if (exists) {
      rc = cfg_check(s, cfgk, mu__etcd3_range_first(mu__etcd3_txn_range(ans, 0)));
      if (rc != 0)
        goto out;
      break;
    }
    fresh = create; /* created it */
  }
  rc = mu__etcd3_end_of(e, s->run, mu__etcd3_txn_range(ans, 1));
  if (rc != 0)
    goto out;
  set_round(s, mu__etcd3_range_first(mu__etcd3_txn_range(ans, 2)));
  s->rev = mu__etcd3_header_rev(ans);
  /* a node back from a partition may find the round its peers finished: it ends succeeded */
  if (s->round != NULL)
    rc = mu__etcd3_close_if_finished(e, s->run, s->round, s->id);
out:
  cJSON_Delete(ans);
  mu_free(cfgk);
  return rc;
}

/* The reads of the run's state: c/end, c/round (two responses). */
static void add_state_reads(cJSON *ops, const struct joinst *s)
{
  cJSON_AddItemToArray(ops, mu__etcd3_op_range(s->endk, NULL, E3_ALL));
  cJSON_AddItemToArray(ops, mu__etcd3_op_range(s->roundk, NULL, E3_ALL));
}

static void take_state(struct joinst *s, const cJSON *ans, int at)
{
  s->ended = mu__etcd3_end_of(s->e, s->run, mu__etcd3_txn_range(ans, at));
  set_round(s, mu__etcd3_range_first(mu__etcd3_txn_range(ans, at + 1)));
}

/* The counts that decide a close of round n + 1: nodes at level n, and at level n - 1 (two
 * responses). */
static void add_count_reads(cJSON *ops, const struct joinst *s, long n)
{
  char *lvl = mu__etcd3_key_of(s->run, "n/" ETCD3_LEVEL "/", n);
  char *old = mu__etcd3_key_of(s->run, "n/" ETCD3_LEVEL "/", n - 1);
  cJSON_AddItemToArray(ops, mu__etcd3_op_prefix(lvl, E3_COUNT));
  cJSON_AddItemToArray(ops, mu__etcd3_op_prefix(old, E3_COUNT));
  mu_free(lvl);
  mu_free(old);
}

static void take_counts(struct joinst *s, const cJSON *ans, int at, long n)
{
  s->count_level = mu__etcd3_int(mu__etcd3_txn_range(ans, at), "count");
  s->count_old = n > 0 ? mu__etcd3_int(mu__etcd3_txn_range(ans, at + 1), "count") : 0;
}

/* The compares of a write that holds only while the run has not ended and its round is the
 * one this join read. */
static void add_round_same(cJSON *compare, const struct joinst *s)
{
  if (s->round_mod > 0)
    cJSON_AddItemToArray(compare, mu__etcd3_cmp(s->roundk, NULL, "MOD", "EQUAL", s->round_mod));
  else
    cJSON_AddItemToArray(compare, mu__etcd3_cmp(s->roundk, NULL, "CREATE", "EQUAL", 0));
  cJSON_AddItemToArray(compare, mu__etcd3_cmp(s->endk, NULL, "CREATE", "EQUAL", 0));
}

/* Puts this node at level N (the latest round) unless it is there, in one transaction that
 * holds only if the round did not move, and reads the counts that decide a close. */
static int join_put(struct joinst *s, long n)
{
  struct mu_etcd3 *e = s->e;
  char *mine = mu__etcd3_key_of(s->run, "n/" ETCD3_LEVEL "/%s", n, s->id);
  char val[700];
  snprintf(val, sizeof(val), "{\"addr\":\"%s\",\"lws\":%d,\"port\":%d}", s->o->addr,
           s->o->local_world_size, s->o->master_port);
  struct mu__etcd3_txn t;
  mu__etcd3_txn_init(&t);
  add_round_same(t.compare, s);
  int moved = e->my_key != NULL && strcmp(e->my_key, mine) != 0; /* from an older level */
  if (moved)
    cJSON_AddItemToArray(t.success, mu__etcd3_op_del(e->my_key, NULL));
  char lease[32];
  mu__etcd3_lease_now(e, lease, sizeof(lease));
  cJSON_AddItemToArray(t.success, mu__etcd3_op_put(mine, val, strlen(val), lease));
  char *sick = mu__etcd3_key_of(s->run, "u/%s", s->id); /* joining: its check passed */
  cJSON_AddItemToArray(t.success, mu__etcd3_op_del(sick, NULL));
  mu_free(sick);
  add_count_reads(t.success, s, n);
  add_state_reads(t.failure, s);
  cJSON *ans = NULL;
  int rc = mu__etcd3_txn_run(e, &t, &ans);
  if (rc != 0)
    goto out;
  s->rev = mu__etcd3_header_rev(ans);
  if (mu__etcd3_txn_ok(ans)) {
    mu__etcd3_keeper_set_key(e, mine, val);
    mu_free(e->my_key);
    e->my_key = mine;
    mine = NULL;
    e->level = n;
    take_counts(s, ans, moved + 2, n);
  } else {
    take_state(s, ans, 0);
  }
out:
  cJSON_Delete(ans);
  mu_free(mine);
  return rc;
}

/* Re-reads the round, the end and the counts of level n. */
static int join_eval(struct joinst *s, long n)
{
  struct mu__etcd3_txn t;
  mu__etcd3_txn_init(&t);
  add_state_reads(t.success, s);
  add_count_reads(t.success, s, n);
  cJSON *ans = NULL;
  int rc = mu__etcd3_txn_run(s->e, &t, &ans);
  if (rc == 0) {
    s->rev = mu__etcd3_header_rev(ans);
    take_state(s, ans, 0);
    take_counts(s, ans, 2, n);
  }
  cJSON_Delete(ans);
  return rc;
}

struct cand {
  const cJSON *kv;
  const char *id; /* points into idbuf */
  char idbuf[260];
  long long created;
  int prev; /* rank in the previous round, or INT_MAX-ish */
};

static int cand_cmp(const void *a, const void *b)
{
  const struct cand *x = a, *y = b;
  if (x->prev != y->prev)
    return x->prev < y->prev ? -1 : 1;
  return x->created < y->created ? -1 : x->created > y->created;
}

/* Reads the nodes at level n (their keys at revision *rev), sorted as the round takes them:
 * the previous round's members first in their order, then newcomers in join order; with more
 * candidates than places, the member whose failure ended round n (g/<n>) after the newcomers
 * (a standby takes its place). Also reads the run's restart count into *restarts.
 * Returns: 0 with *c (nc entries, pointing into *ans; both the caller's), or an error. */
static int close_candidates(struct joinst *s, const char *lvl, const char *lvl_end, cJSON **ans,
                            struct cand **c, size_t *nc, long long *rev, long *restarts)
{
  struct mu__etcd3_txn t;
  mu__etcd3_txn_init(&t);
  long n = mu__etcd3_round_no(s->round);
  char *rk = mu__etcd3_key_of(s->run, "c/restarts"), *gk = mu__etcd3_key_of(s->run, "g/%ld", n);
  cJSON_AddItemToArray(t.success, mu__etcd3_op_range(lvl, lvl_end, E3_ALL));
  cJSON_AddItemToArray(t.success, mu__etcd3_op_range(rk, NULL, E3_ALL));
  cJSON_AddItemToArray(t.success, mu__etcd3_op_range(gk, NULL, E3_ALL));
  mu_free(rk);
  mu_free(gk);
  cJSON *prev = cJSON_Duplicate(s->round, 1); /* the previous round with its members */
  int rc = mu__etcd3_attach_members(s->e, s->run, prev);
  if (rc == 0)
    rc = mu__etcd3_txn_run(s->e, &t, ans);
  else
    cJSON_Delete(t.root);
  if (rc != 0) {
    cJSON_Delete(prev);
    return rc;
  }
  *rev = mu__etcd3_header_rev(*ans);
  cJSON *cnt = mu__etcd3_kv_json(mu__etcd3_range_first(mu__etcd3_txn_range(*ans, 1)));
  cJSON *ended = mu__etcd3_kv_json(mu__etcd3_range_first(mu__etcd3_txn_range(*ans, 2)));
  *restarts = mu_json_get_long(cnt, "count", 0);
  const char *failed =
      mu_json_get_bool(ended, "counted", 0) ? mu_json_get_str(ended, "node") : NULL;
  const cJSON *kvs = cJSON_GetObjectItemCaseSensitive(mu__etcd3_txn_range(*ans, 0), "kvs"), *kv;
  size_t i = 0;
  *nc = (size_t)cJSON_GetArraySize(kvs);
  *c = mu_calloc(*nc ? *nc : 1, sizeof(**c));
  cJSON_ArrayForEach(kv, kvs)
  {
    struct cand *ci = &(*c)[i++];
    char *k = mu__etcd3_unb64(mu_json_get_str(kv, "key"), NULL);
    snprintf(ci->idbuf, sizeof(ci->idbuf), "%s", mu__etcd3_id_of_key(k));
    mu_free(k);
    ci->id = ci->idbuf;
    ci->kv = kv;
    ci->created = mu__etcd3_int(kv, "create_revision");
    int p = prev != NULL ? mu__etcd3_member_index(prev, ci->id) : -1;
    ci->prev = p >= 0 ? p : 1 << 30;
  }
  for (i = 0; failed != NULL && *nc > (size_t)s->max && i < *nc; i++)
    if (strcmp((*c)[i].id, failed) == 0)
      (*c)[i].prev = (1 << 30) + 1; /* after the standbys */
  qsort(*c, *nc, sizeof(**c), cand_cmp);
  cJSON_Delete(prev);
  cJSON_Delete(cnt);
  cJSON_Delete(ended);
  return 0;
}

/* The values of a closing round: the member list, the head every value starts with, and in a
 * big run the members by bucket. */
struct closing {
  struct mu_buf list, head, timing;
  struct mu_buf bucket[ETCD3_BUCKETS];
};

static void closing_build(struct joinst *s, long n, const struct cand *c, size_t take,
                          long restarts, struct closing *v)
{
  long world = 0, port0 = 0;
  char addr0[260] = "";
  v->list = v->head = (struct mu_buf)MU_BUF_INIT(SIZE_MAX);
  for (int b = 0; b < ETCD3_BUCKETS; b++)
    mu_buf_init(&v->bucket[b], SIZE_MAX);
  mu_buf_putc(&v->list, '[');
  for (size_t i = 0; i < take; i++) {
    cJSON *nv = mu__etcd3_kv_json(c[i].kv);
    const char *addr = mu_json_get_str(nv, "addr") ? mu_json_get_str(nv, "addr") : "";
    long lws = mu_json_get_long(nv, "lws", 1), port = mu_json_get_long(nv, "port", 0);
    mu_buf_printf(&v->list, "%s{\"id\":\"%s\",\"addr\":\"%s\",\"lws\":%ld,\"port\":%ld}",
                  i ? "," : "", c[i].id, addr, lws, port);
    if (big_run(s)) {
      struct mu_buf *bb = &v->bucket[mu__etcd3_bucket_of(c[i].id)];
      mu_buf_printf(bb, "%s[\"%s\",%zu,%ld,%ld]", bb->len ? "," : "", c[i].id, i, world, lws);
    }
    if (i == 0) {
      snprintf(addr0, sizeof(addr0), "%s", addr);
      port0 = port;
    }
    world += lws;
    cJSON_Delete(nv);
  }
  mu_buf_putc(&v->list, ']');
  mu_buf_printf(&v->head,
                "{\"round\":%ld,\"max\":%ld,\"ttl\":%ld,\"nnodes\":%zu,\"world\":%ld,"
                "\"master_addr\":\"%s\",\"master_port\":%ld,\"restart_count\":%ld,"
                "\"max_restarts\":%ld,",
                n + 1, s->max, s->e->ttl_ms, take, world, addr0, port0, restarts, s->max_restarts);
  mu_buf_init(&v->timing, SIZE_MAX); /* t/<n+1>: where the time went (etcd3_goodput.c) */
  mu_buf_printf(&v->timing,
                "{\"closed_ms\":%lld,\"nnodes\":%zu,\"world\":%ld,\"restart_count\":%ld}",
                mu__etcd3_wall_ms(), take, world, restarts);
}

static void closing_release(struct closing *v)
{
  mu_buf_release(&v->list);
  mu_buf_release(&v->head);
  mu_buf_release(&v->timing);
  for (int b = 0; b < ETCD3_BUCKETS; b++)
    mu_buf_release(&v->bucket[b]);
}

/* The close txn's puts: c/round, and in a big run m/<n+1> and every bucket a/<n+1>/<b>.
 * Returns: the round as this node will see it (its bucket in a big run; the caller's). */
static cJSON *closing_puts(struct joinst *s, long n, const struct closing *v, cJSON *ops)
{
  struct mu_buf val = MU_BUF_INIT(SIZE_MAX);
  cJSON *mine = NULL;
  if (!big_run(s)) {
    mu_buf_printf(&val, "%s\"members\":%s}", mu_buf_str(&v->head), mu_buf_str(&v->list));
    mine = cJSON_ParseWithLength(val.data, val.len);
  } else {
    mu_buf_printf(&val, "%s\"buckets\":%d}", mu_buf_str(&v->head), ETCD3_BUCKETS);
  }
  cJSON_AddItemToArray(ops, mu__etcd3_op_put(s->roundk, val.data, val.len, NULL));
  char *tk = mu__etcd3_key_of(s->run, "t/" ETCD3_LEVEL, n + 1);
  cJSON_AddItemToArray(ops, mu__etcd3_op_put(tk, v->timing.data, v->timing.len, NULL));
  mu_free(tk);
  if (big_run(s)) {
    char *mk = mu__etcd3_key_of(s->run, "m/" ETCD3_LEVEL, n + 1);
    mu_buf_clear(&val);
    mu_buf_printf(&val, "{\"members\":%s}", mu_buf_str(&v->list));
    cJSON_AddItemToArray(ops, mu__etcd3_op_put(mk, val.data, val.len, NULL));
    mu_free(mk);
    for (int b = 0; b < ETCD3_BUCKETS; b++) {
      char *bk = mu__etcd3_key_of(s->run, "a/" ETCD3_LEVEL "/%02d", n + 1, b);
      mu_buf_clear(&val);
      mu_buf_printf(&val, "%s\"m\":[%s]}", mu_buf_str(&v->head), mu_buf_str(&v->bucket[b]));
      cJSON_AddItemToArray(ops, mu__etcd3_op_put(bk, val.data, val.len, NULL));
      if ((unsigned)b == mu__etcd3_bucket_of(s->id))
        mine = cJSON_ParseWithLength(val.data, val.len);
      mu_free(bk);
    }
  }
  mu_buf_release(&val);
  return mine;
}

/* Closes round n + 1 with the nodes of level n (close_candidates()' order), at most max.
 * Holds only if neither the round nor the level changed since they were read; when it lost
 * the race, the caller reads again. */
static int join_close(struct joinst *s, long n)
{
  char *lvl = mu__etcd3_key_of(s->run, "n/" ETCD3_LEVEL "/", n);
  char *lvl_end = mu__etcd3_prefix_end(lvl);
  cJSON *ans = NULL, *ans2 = NULL, *mine = NULL;
  struct cand *c = NULL;
  size_t nc = 0;
  long long rev = 0;
  long restarts = 0;
  int rc = close_candidates(s, lvl, lvl_end, &ans, &c, &nc, &rev, &restarts);
  if (rc != 0)
    goto out;
  struct closing v;
  closing_build(s, n, c, nc < (size_t)s->max ? nc : (size_t)s->max, restarts, &v);
  struct mu__etcd3_txn t;
  mu__etcd3_txn_init(&t);
  add_round_same(t.compare, s);
  cJSON_AddItemToArray(t.compare, mu__etcd3_cmp(lvl, lvl_end, "MOD", "LESS", rev + 1));
  mine = closing_puts(s, n, &v, t.success);
  closing_release(&v);
  rc = mu__etcd3_txn_run(s->e, &t, &ans2);
  if (rc == 0 && mu__etcd3_txn_ok(ans2) && mine != NULL) { /* the closer knows its round */
    cJSON_Delete(s->round);
    s->round = mine;
    mine = NULL;
    s->round_mod = s->rev = mu__etcd3_header_rev(ans2);
    if (big_run(s)) {
      cJSON_Delete(s->bucket);
      s->bucket = cJSON_Duplicate(s->round, 1);
    }
  }
out:
  cJSON_Delete(mine);
  mu_free(c);
  cJSON_Delete(ans);
  cJSON_Delete(ans2);
  mu_free(lvl);
  mu_free(lvl_end);
  return rc;
}

/* Watch events while waiting in a join: a new round or the end ends the wait. */
/* Whether a join holds round r without this node's bucket of it (a big round read from
 * c/round rather than seen in the bucket). */
static int needs_bucket(const struct joinst *s, long r)
{
  return s->round != NULL && mu__etcd3_round_no(s->round) == r &&
         cJSON_GetObjectItemCaseSensitive(s->round, "members") == NULL &&
         mu_json_get_long(s->bucket, "round", -1) != r;
}

/* Watch events while waiting in a join: a new round (c/round, or this node's bucket of it in a
 * big run: the close txn writes both at one revision, so the bucket's mod revision is the
 * round's), the end, or a node leaving the level below end the wait. */
static int join_events(void *arg, const cJSON *events)
{
  struct joinst *s = arg;
  const cJSON *ev;
  int stop = 0;
  cJSON_ArrayForEach(ev, events)
  {
    const cJSON *kv = cJSON_GetObjectItemCaseSensitive(ev, "kv");
    char *k = mu__etcd3_unb64(mu_json_get_str(kv, "key"), NULL);
    const char *type = mu_json_get_str(ev, "type");
    int put = type == NULL;
    if (put && (strcmp(k, s->roundk) == 0 || (s->bkey != NULL && strcmp(k, s->bkey) == 0))) {
      set_round(s, kv);
      s->rev = mu__etcd3_int(kv, "mod_revision");
      if (s->bkey != NULL && strcmp(k, s->bkey) == 0) {
        cJSON_Delete(s->bucket);
        s->bucket = cJSON_Duplicate(s->round, 1);
      }
    }
    stop = 1; /* any end, round, or a node leaving the level below: look again */
    mu_free(k);
  }
  return stop;
}

/* Reads this node's bucket of round r (a round that came without it, from a read). */
static int read_bucket(struct joinst *s, long r)
{
  char *bk = mu__etcd3_key_of(s->run, "a/" ETCD3_LEVEL "/%02u", r, mu__etcd3_bucket_of(s->id));
  struct mu__etcd3_txn t;
  mu__etcd3_txn_init(&t);
  cJSON_AddItemToArray(t.success, mu__etcd3_op_range(bk, NULL, E3_ALL));
  cJSON *ans = NULL;
  int rc = mu__etcd3_txn_run(s->e, &t, &ans);
  if (rc == 0) {
    cJSON_Delete(s->bucket);
    s->bucket = mu__etcd3_kv_json(mu__etcd3_range_first(mu__etcd3_txn_range(ans, 0)));
  }
  cJSON_Delete(ans);
  mu_free(bk);
  return rc;
}

static int join_args_ok(struct mu_etcd3 *e, const char *run_id, const struct mu_join_opts *o)
{
  if (mu__etcd3_valid_id(run_id) && o != NULL && mu__etcd3_valid_id(o->node_id) &&
      mu__etcd3_valid_id(o->addr) && o->min_nodes >= 1 && o->max_nodes >= o->min_nodes &&
      o->local_world_size >= 1)
    return 1;
  mu__etcd3_say(e, "bad join: run id, node id and address are 1-256 printable characters "
                   "without '/', and 1 <= min_nodes <= max_nodes, local_world_size >= 1");
  return 0;
}

static void join_init(struct joinst *s, struct mu_etcd3 *e, const char *run_id,
                      const struct mu_join_opts *o)
{
  memset(s, 0, sizeof(*s));
  s->e = e;
  s->run = run_id;
  s->id = o->node_id;
  s->o = o;
  s->min = o->min_nodes;
  s->max = o->max_nodes;
  s->last_call = o->last_call_ms >= 0 ? o->last_call_ms : (s->min == s->max ? 0 : 1000);
  s->deadline = mu__etcd3_now_ms() + (o->join_timeout_ms > 0 ? o->join_timeout_ms : 600000);
  s->cprefix = mu__etcd3_key_of(run_id, "c/");
  s->cend = mu__etcd3_prefix_end(s->cprefix);
  s->endk = mu__etcd3_key_of(run_id, "c/end");
  s->roundk = mu__etcd3_key_of(run_id, "c/round");
  s->at = s->mine = -1;
}

static void join_release(struct joinst *s)
{
  cJSON_Delete(s->round);
  cJSON_Delete(s->bucket);
  mu_free(s->bkey);
  mu_free(s->endk);
  mu_free(s->roundk);
  mu_free(s->cprefix);
  mu_free(s->cend);
}

/* Round n is the one this node waited for: is it in? Returns: 0 with *in set (and out filled
 * when it is), or an error. */
static int join_in(struct joinst *s, long n, struct mu_round *out, int *in)
{
  *in = 0;
  if (cJSON_GetObjectItemCaseSensitive(s->round, "members") != NULL) {
    int me = mu__etcd3_member_index(s->round, s->id);
    *in = me >= 0;
    return *in ? mu__etcd3_fill_round(s->e, s->run, s->round, me, out) : 0;
  }
  int rc = needs_bucket(s, n) ? read_bucket(s, n) : 0;
  const cJSON *entry = rc == 0 ? mu__etcd3_bucket_find(s->bucket, n, s->id) : NULL;
  *in = entry != NULL;
  return entry != NULL ? mu__etcd3_fill_round_bucket(s->e, s->run, s->round, entry, out) : rc;
}

/* Puts this node at level n (or reads the counts again), taking a new lease when etcd revoked
 * this node's under it. Returns: 0 or an error. */
static int join_refresh(struct joinst *s, long n)
{
  struct mu_etcd3 *e = s->e;
  int rc = s->mine != n ? join_put(s, n) : join_eval(s, n);
  if (rc == MU_EHTTP && strstr(e->errmsg, "lease not found") != NULL) {
    mu__etcd3_keeper_stop(e); /* revoked under us: a new one, and try again */
    return mu__etcd3_ensure_lease(e, s->o->lease_ttl_ms > 0 ? s->o->lease_ttl_ms
                                                            : ETCD3_TTL_MS_DEFAULT);
  }
  if (rc == 0 && e->level == n)
    s->at = s->mine = n;
  return rc;
}

/* Waits for what may change the decision at level n: a new round (c/round, or this node's
 * bucket of it in a big run), the end, a node leaving the level below, the last call's end.
 * A small run's round comes whole in c/round; a big run's nodes each watch their bucket (O(1)
 * bytes each) and the end, not c/round. Returns: 0 or an error. */
static int join_wait(struct joinst *s, long n, int closable)
{
  char *old = mu__etcd3_key_of(s->run, "n/" ETCD3_LEVEL "/", n - 1);
  char *old_end = mu__etcd3_prefix_end(old);
  mu_free(s->bkey);
  s->bkey = big_run(s) ? mu__etcd3_key_of(s->run, "a/" ETCD3_LEVEL "/%02u", n + 1,
                                          mu__etcd3_bucket_of(s->id))
                       : NULL;
  struct mu__etcd3_range rs[3] = {{old, old_end, 1}};
  int nr = n > 0 ? 1 : 0;
  if (s->bkey != NULL) {
    rs[nr++] = (struct mu__etcd3_range){s->endk, NULL, 0};
    rs[nr++] = (struct mu__etcd3_range){s->bkey, NULL, 0};
  } else {
    rs[nr++] = (struct mu__etcd3_range){s->cprefix, s->cend, 0};
  }
  long long until = closable && s->last_call_at < s->deadline ? s->last_call_at : s->deadline;
  int rc = mu__etcd3_watch_ranges(s->e, rs, nr, s->rev + 1, until, join_events, s, NULL);
  mu_free(old);
  mu_free(old_end);
  if (rc == MU_ETIMEDOUT || rc == MU_ESTATE)
    rc = 0; /* time to decide again, or read afresh */
  if (mu__etcd3_round_no(s->round) == n)
    s->at = -1; /* counts are stale: read them again */
  return rc;
}

/* At level n with fresh counts: close round n + 1 now, later (the last call), or wait. */
static int join_decide(struct joinst *s, long n)
{
  int closable = s->count_level >= s->min && (n == 0 || s->count_old == 0);
  if (n > 0 && s->count_level + s->count_old < s->min) { /* nodes are missing: for good? */
    int rc = mu__etcd3_shut_if_unreachable(s->e, s->run, s->round, s->min);
    if (rc != 0)
      return rc;
  }
  if (!closable)
    s->last_call_at = 0;
  else if (s->last_call_at == 0)
    s->last_call_at = mu__etcd3_now_ms() + s->last_call;
  if (closable && (s->count_level >= s->max || n > 0 || mu__etcd3_now_ms() >= s->last_call_at)) {
    s->at = -1;
    return join_close(s, n);
  }
  return join_wait(s, n, closable);
}

int mu_etcd3_join(struct mu_etcd3 *e, const char *run_id, const struct mu_join_opts *o,
                  struct mu_round *out)
{
  memset(out, 0, sizeof(*out));
  e->errmsg[0] = '\0';
  if (!join_args_ok(e, run_id, o))
    return MU_EINVAL;
  struct joinst s;
  join_init(&s, e, run_id, o);
  int rc = join_begin(&s), in = 0;
  if (rc == 0)
    rc = mu__etcd3_ensure_lease(e, o->lease_ttl_ms > 0 ? o->lease_ttl_ms : ETCD3_TTL_MS_DEFAULT);
  while (rc == 0 && !in) {
    long n = mu__etcd3_round_no(s.round);
    if (s.ended) {
      rc = s.ended;
      break;
    }
    if (s.mine >= 0 && n == s.mine + 1) { /* the round this node waited for: is it in? */
      rc = join_in(&s, n, out, &in);
      if (rc != 0 || in)
        break;
    }
    if (mu__etcd3_now_ms() >= s.deadline) {
      mu__etcd3_say(e, "join of run '%s' timed out: %lld of %ld nodes joined", run_id,
                    s.count_level, s.min);
      rc = MU_ETIMEDOUT;
    } else if (s.mine != n || s.at != n) {
      rc = join_refresh(&s, n);
    } else {
      rc = join_decide(&s, n);
    }
  }
  join_release(&s);
  return rc;
}

int mu__etcd3_run_begin(struct mu_etcd3 *e, const char *run_id, const struct mu_join_opts *o)
{
  e->errmsg[0] = '\0';
  if (!join_args_ok(e, run_id, o))
    return MU_EINVAL;
  struct joinst s;
  join_init(&s, e, run_id, o);
  int rc = join_begin(&s);
  if (rc == 0)
    rc = s.ended;
  join_release(&s);
  return rc;
}
