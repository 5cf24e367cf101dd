/* The etcd v3 backend: reading runs (muster rdzv, status) in the shape of musterd's GET
 * /v1/runs/{id} and /v1/runs. */
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
 * Reading runs (muster rdzv, status): the shape of musterd's GET /v1/runs/{id} and /v1/runs
 */

/* The keys of a run's state: its configuration, end, latest round; its level and done keys. */
struct runkeys {
  char *cfgk, *endk, *roundk, *nk, *dk;
};

static void runkeys_init(struct runkeys *k, const char *run_id)
{
  k->cfgk = mu__etcd3_key_of(run_id, "c/cfg");
  k->endk = mu__etcd3_key_of(run_id, "c/end");
  k->roundk = mu__etcd3_key_of(run_id, "c/round");
  k->nk = mu__etcd3_key_of(run_id, "n/");
  k->dk = mu__etcd3_key_of(run_id, "d/");
}

static void runkeys_release(struct runkeys *k)
{
  mu_free(k->cfgk);
  mu_free(k->endk);
  mu_free(k->roundk);
  mu_free(k->nk);
  mu_free(k->dk);
}

/* Nodes at level r wait for round r + 1; members of round r hold their key at level r - 1 until
 * they leave, and a member that left successfully has d/<r>/<id>. */
static void count_nodes(const struct runkeys *k, const cJSON *ans, const cJSON *round,
                        long *waiting, long *present)
{
  long r = mu__etcd3_round_no(round);
  const cJSON *kv;
  *waiting = *present = 0;
  for (int i = 3; i <= 4; i++) {
    const char *pre = i == 3 ? k->nk : k->dk;
    cJSON_ArrayForEach(kv, cJSON_GetObjectItemCaseSensitive(mu__etcd3_txn_range(ans, i), "kvs"))
    {
      char *key = mu__etcd3_unb64(mu_json_get_str(kv, "key"), NULL);
      long lv = strtol(key + strlen(pre), NULL, 10);
      if (i == 3 && lv == r)
        ++*waiting;
      else if (r > 0 && lv == (i == 3 ? r - 1 : r) &&
               mu__etcd3_member_index(round, mu__etcd3_id_of_key(key)) >= 0)
        ++*present;
      mu_free(key);
    }
  }
}

/* The members of a round in musterd's shape. */
static void add_members(cJSON *o, const cJSON *round)
{
  cJSON *list = cJSON_AddArrayToObject(o, "members");
  long rank = 0, off = 0;
  const cJSON *m;
  cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(round, "members"))
  {
    cJSON *d = cJSON_CreateObject();
    long lws = mu_json_get_long(m, "lws", 1);
    const char *id = mu_json_get_str(m, "id"), *addr = mu_json_get_str(m, "addr");
    cJSON_AddStringToObject(d, "node_id", id ? id : "");
    cJSON_AddStringToObject(d, "addr", addr ? addr : "");
    cJSON_AddNumberToObject(d, "local_world_size", (double)lws);
    cJSON_AddNumberToObject(d, "node_rank", (double)rank++);
    cJSON_AddNumberToObject(d, "rank_offset", (double)off);
    off += lws;
    cJSON_AddItemToArray(list, d);
  }
}

/* musterd's GET /v1/runs/{id} answer from what etcd holds of the run. */
static cJSON *run_object(const char *run_id, const cJSON *cfg, const cJSON *end, const cJSON *round,
                         long waiting, long present)
{
  const char *st = mu_json_get_str(end, "state"), *reason = mu_json_get_str(end, "reason");
  long r = mu__etcd3_round_no(round);
  long nnodes = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(round, "members"));
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "run_id", run_id);
  cJSON_AddStringToObject(o, "backend", "etcd-v3");
  cJSON_AddStringToObject(o, "state", st != NULL ? st : "open");
  if (reason != NULL)
    cJSON_AddStringToObject(o, "reason", reason);
  cJSON_AddNumberToObject(o, "round", (double)r);
  cJSON_AddStringToObject(o, "round_state",
                          r == 0             ? "joining"
                          : present < nnodes ? "broken"
                                             : "active");
  cJSON_AddNumberToObject(o, "min_nodes", (double)mu_json_get_long(cfg, "min_nodes", 0));
  cJSON_AddNumberToObject(o, "max_nodes", (double)mu_json_get_long(cfg, "max_nodes", 0));
  cJSON_AddNumberToObject(o, "nnodes", (double)nnodes);
  cJSON_AddNumberToObject(o, "waiting", (double)waiting);
  add_members(o, round);
  cJSON *c = cJSON_AddObjectToObject(o, "config");
  cJSON_AddNumberToObject(c, "last_call_ms", (double)mu_json_get_long(cfg, "last_call_ms", 0));
  if (round != NULL)
    cJSON_AddNumberToObject(c, "lease_ttl_ms", (double)mu_json_get_long(round, "ttl", 0));
  return o;
}

int mu_etcd3_run_json(struct mu_etcd3 *e, const char *run_id, cJSON **out)
{
  *out = NULL;
  e->errmsg[0] = '\0';
  if (!mu__etcd3_valid_id(run_id)) {
    mu__etcd3_say(e, "bad run id '%s': 1-256 printable characters without '/'",
                  run_id ? run_id : "");
    return MU_EINVAL;
  }
  struct runkeys k;
  struct mu__etcd3_txn t;
  cJSON *ans = NULL, *cfg = NULL, *end = NULL, *round = NULL;
  runkeys_init(&k, run_id);
  mu__etcd3_txn_init(&t);
  cJSON_AddItemToArray(t.success, mu__etcd3_op_range(k.cfgk, NULL, E3_ALL));
  cJSON_AddItemToArray(t.success, mu__etcd3_op_range(k.endk, NULL, E3_ALL));
  cJSON_AddItemToArray(t.success, mu__etcd3_op_range(k.roundk, NULL, E3_ALL));
  cJSON_AddItemToArray(t.success, mu__etcd3_op_prefix(k.nk, E3_KEYS));
  cJSON_AddItemToArray(t.success, mu__etcd3_op_prefix(k.dk, E3_KEYS));
  int rc = mu__etcd3_txn_run(e, &t, &ans);
  if (rc == 0)
    cfg = mu__etcd3_kv_json(mu__etcd3_range_first(mu__etcd3_txn_range(ans, 0)));
  if (rc == 0 && cfg == NULL) {
    mu__etcd3_say(e, "no run '%s' in etcd", run_id);
    rc = MU_ENOENT;
  }
  if (rc == 0) {
    end = mu__etcd3_kv_json(mu__etcd3_range_first(mu__etcd3_txn_range(ans, 1)));
    round = mu__etcd3_kv_json(mu__etcd3_range_first(mu__etcd3_txn_range(ans, 2)));
    rc = mu__etcd3_attach_members(e, run_id, round);
  }
  if (rc == 0) {
    long waiting = 0, present = 0;
    count_nodes(&k, ans, round, &waiting, &present);
    *out = run_object(run_id, cfg, end, round, waiting, present);
    rc = mu__etcd3_goodput_json(e, run_id, cfg, round, waiting, *out);
    if (rc != 0) {
      cJSON_Delete(*out);
      *out = NULL;
    }
  }
  cJSON_Delete(cfg);
  cJSON_Delete(end);
  cJSON_Delete(round);
  cJSON_Delete(ans);
  runkeys_release(&k);
  return rc;
}

/* One range over every run's keys (how: E3_KEYS, E3_COUNT). */
static int read_runs(struct mu_etcd3 *e, int how, cJSON **ans)
{
  e->errmsg[0] = '\0';
  struct mu__etcd3_txn t;
  mu__etcd3_txn_init(&t);
  cJSON_AddItemToArray(t.success, mu__etcd3_op_prefix("/muster/", how));
  return mu__etcd3_txn_run(e, &t, ans);
}

int mu_etcd3_runs_json(struct mu_etcd3 *e, cJSON **out)
{
  *out = NULL;
  /* the runs are the keys /muster/<run>/c/cfg: one keys-only range over c/ would need a range
   * per run, so the whole /muster/ prefix is read keys-only and filtered here */
  cJSON *ans = NULL;
  int rc = read_runs(e, E3_KEYS, &ans);
  if (rc != 0) {
    cJSON_Delete(ans);
    return rc;
  }
  cJSON *o = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(o, "runs");
  const cJSON *kv;
  cJSON_ArrayForEach(kv, cJSON_GetObjectItemCaseSensitive(mu__etcd3_txn_range(ans, 0), "kvs"))
  {
    char *k = mu__etcd3_unb64(mu_json_get_str(kv, "key"), NULL);
    size_t n = strlen(k), tail = strlen("/c/cfg");
    if (n > strlen("/muster/") + tail && strcmp(k + n - tail, "/c/cfg") == 0) {
      k[n - tail] = '\0';
      cJSON *r = NULL;
      int g = mu_etcd3_run_json(e, k + strlen("/muster/"), &r);
      if (g == 0) {
        cJSON *s = cJSON_CreateObject();
        static const char *const keep[] = {"run_id", "state",   "round",    "round_state",
                                           "nnodes", "waiting", "standbys", "restart_count"};
        for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
          cJSON_AddItemToObject(s, keep[i],
                                cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(r, keep[i]), 1));
        cJSON_AddNumberToObject(
            s, "unhealthy", cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r, "unhealthy")));
        cJSON_AddItemToArray(list, s);
      } else if (g != MU_ENOENT) {
        rc = g;
      }
      cJSON_Delete(r);
    }
    mu_free(k);
    if (rc != 0)
      break;
  }
  cJSON_Delete(ans);
  if (rc == 0)
    *out = o;
  else
    cJSON_Delete(o);
  return rc;
}

int mu_etcd3_run_info(struct mu_etcd3 *e, const char *run_id, struct mu_run_info *out)
{
  memset(out, 0, sizeof(*out));
  cJSON *r = NULL;
  int rc = mu_etcd3_run_json(e, run_id, &r);
  if (rc == 0) {
    out->round = mu_json_get_long(r, "round", 0);
    out->nnodes = (int)mu_json_get_long(r, "nnodes", 0);
    out->waiting = (int)mu_json_get_long(r, "waiting", 0);
    out->min_nodes = (int)mu_json_get_long(r, "min_nodes", 0);
    out->max_nodes = (int)mu_json_get_long(r, "max_nodes", 0);
    snprintf(out->state, sizeof(out->state), "%s", mu_json_get_str(r, "state"));
    snprintf(out->round_state, sizeof(out->round_state), "%s", mu_json_get_str(r, "round_state"));
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(r, "unhealthy");
    const cJSON *mr = cJSON_GetObjectItemCaseSensitive(r, "max_restarts");
    const cJSON *u0 = cJSON_GetArrayItem(u, 0);
    const char *id = mu_json_get_str(u0, "node_id"), *o = mu_json_get_str(u0, "output");
    out->standbys = (int)mu_json_get_long(r, "standbys", 0);
    out->restart_count = (int)mu_json_get_long(r, "restart_count", 0);
    out->max_restarts = cJSON_IsNumber(mr) ? (long)mr->valuedouble : -1;
    out->unhealthy = cJSON_GetArraySize(u);
    snprintf(out->unhealthy_node, sizeof(out->unhealthy_node), "%s", id ? id : "");
    snprintf(out->unhealthy_why, sizeof(out->unhealthy_why), "%.*s", o ? (int)strcspn(o, "\n") : 0,
             o ? o : "");
  }
  cJSON_Delete(r);
  return rc;
}

int mu_etcd3_revision(struct mu_etcd3 *e, long long *rev)
{
  cJSON *ans = NULL;
  int rc = read_runs(e, E3_COUNT, &ans);
  *rev = rc == 0 ? mu__etcd3_header_rev(ans) : 0;
  cJSON_Delete(ans);
  return rc;
}

static int any_event(void *arg, const cJSON *events)
{
  (void)arg;
  (void)events;
  return 1;
}

int mu_etcd3_wait_change(struct mu_etcd3 *e, const char *run_id, long long after, long timeout_ms)
{
  e->errmsg[0] = '\0';
  if (run_id != NULL && !mu__etcd3_valid_id(run_id)) {
    mu__etcd3_say(e, "bad run id '%s'", run_id);
    return MU_EINVAL;
  }
  char *prefix = run_id != NULL ? mu__etcd3_key_of(run_id, "%s", "") : mu_strdup("/muster/");
  char *end = mu__etcd3_prefix_end(prefix);
  struct mu__etcd3_range rs[1] = {{prefix, end, 0}};
  int rc = mu__etcd3_watch_ranges(e, rs, 1, after + 1, mu__etcd3_now_ms() + timeout_ms, any_event,
                                  NULL, NULL);
  if (rc == MU_ESTATE)
    rc = 0; /* compacted past `after`: something changed */
  if (rc == MU_ETIMEDOUT && e->unreached)
    rc = MU_ECONN; /* not a quiet cluster but none at all: errmsg has the last member's words */
  mu_free(prefix);
  mu_free(end);
  return rc;
}
