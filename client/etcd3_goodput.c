/* The etcd v3 backend's goodput (client/goodput.h; docs/rendezvous.md "Goodput" and "The etcd
 * v3 backend"): reports of a member's workers, the run's restart budget, health checks, and
 * the run's timings in musterd's shape. The keys are in etcd3_int.h.
 *
 * The budget: the first failure report of round R creates g/<R> (how the round ended) in the
 * transaction that counts the restart (c/restarts) or, with none left, ends the run (c/end);
 * later reports of R find g/<R> and count nothing. Every member's watch sees g/<R> and says
 * `broken` at once.
 *
 * Lost at once: etcd cannot see a node's process die (its key lives one lease TTL longer), so
 * before it counts its failure, a reporter asks who of round R is alive: it puts q/<R>/<id> and
 * every member's watch answers r/<R>/<member> (an agent's watcher runs until the agent has
 * reported its own end). A member that answers nothing within PROBE_MS is lost: the reporter
 * deletes its key and ends the round as `lost`, uncounted (the reporter's workers failed because
 * that node went). musterd sees the same loss when the dead agent's watch connection closes.
 *
 * MU_REPORT_FAILING, the agent's hint as soon as a worker fails, hangs or prints a Python
 * traceback (its process may take a second to end), runs the probe alone: a member found lost
 * ends the round then; otherwise nothing is written and the failure report follows.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "muster/errno.h"

#include "alloc.h"
#include "buf.h"
#include "etcd3_int.h"
#include "goodput.h"
#include "json.h"
#include "rules.h"

/* How long a reporter waits for the members' answers: a live member's watcher answers in one
 * watch event and one put (a few ms; tens under load), so 500 ms is a wide margin. A member taken
 * for lost by mistake only re-joins; the cost is the reporter's failure going uncounted. */
#define PROBE_MS 500
#define HISTORY_MAX 64  /* rounds whose timings run JSON shows (the latest) */
#define WHY_MAX 256     /* bytes kept of why a round ended */
#define OUTPUT_MAX 4096 /* bytes kept of a failed health check's output */
#define FAILURE_TRIES 8 /* a count that lost a race to another write is read again */

/* ---------------------------------------------------------------------------------------------
 * Small helpers
 */

static cJSON *op_put_json(const char *key, const cJSON *v, const char *lease)
{
  char *txt = cJSON_PrintUnformatted(v);
  cJSON *op = mu__etcd3_op_put(key, txt, strlen(txt), lease);
  cJSON_free(txt);
  return op;
}

/* The JSON value of the first key of a txn answer's responses[i] (NULL: none). */
static cJSON *value_at(const cJSON *ans, int i)
{
  return mu__etcd3_kv_json(mu__etcd3_range_first(mu__etcd3_txn_range(ans, i)));
}

static int valid_ids(struct mu_etcd3 *e, const char *run, const char *id)
{
  if (mu__etcd3_valid_id(run) && mu__etcd3_valid_id(id))
    return 1;
  mu__etcd3_say(e, "bad run or node id");
  return 0;
}

/* The answer's state from c/end (responses[i]) and the count from c/restarts, c/cfg. */
static void fill_answer(const cJSON *end, const cJSON *restarts, const cJSON *cfg,
                        struct mu_report_answer *out)
{
  const char *st = mu_json_get_str(end, "state"), *why = mu_json_get_str(end, "reason");
  snprintf(out->state, sizeof(out->state), "%s", st != NULL ? st : "open");
  snprintf(out->reason, sizeof(out->reason), "%s", why != NULL ? why : "");
  out->restart_count = (int)mu_json_get_long(restarts, "count", 0);
  out->max_restarts = mu_json_get_long(cfg, "max_restarts", -1);
}

/* ---------------------------------------------------------------------------------------------
 * started, progress
 */

static int report_mark(struct mu_etcd3 *e, const char *run, const char *id, long round,
                       enum mu_report_event ev, struct mu_report_answer *out)
{
  char *key = ev == MU_REPORT_STARTED ? mu__etcd3_key_of(run, "s/%ld/%s", round, id)
                                      : mu__etcd3_key_of(run, "p/%ld", round);
  char *endk = mu__etcd3_key_of(run, "c/end"), *rk = mu__etcd3_key_of(run, "c/restarts"),
       *cfgk = mu__etcd3_key_of(run, "c/cfg");
  cJSON *v = cJSON_CreateObject();
  cJSON_AddNumberToObject(v, "t", (double)mu__etcd3_wall_ms());
  cJSON_AddStringToObject(v, "node", id);
  struct mu__etcd3_txn t;
  mu__etcd3_txn_init(&t);
  /* the first progress is the round's: put only if absent; a start is each node's own */
  if (ev == MU_REPORT_PROGRESS)
    cJSON_AddItemToArray(t.compare, mu__etcd3_cmp(key, NULL, "CREATE", "EQUAL", 0));
  cJSON_AddItemToArray(t.success, op_put_json(key, v, NULL));
  const char *reads[] = {endk, rk, cfgk};
  for (int i = 0; i < 3; i++) {
    cJSON_AddItemToArray(t.success, mu__etcd3_op_range(reads[i], NULL, E3_ALL));
    cJSON_AddItemToArray(t.failure, mu__etcd3_op_range(reads[i], NULL, E3_ALL));
  }
  cJSON *ans = NULL;
  int rc = mu__etcd3_txn_run(e, &t, &ans);
  if (rc == 0) {
    int at = mu__etcd3_txn_ok(ans) ? 1 : 0;
    cJSON *end = value_at(ans, at), *cnt = value_at(ans, at + 1), *cfg = value_at(ans, at + 2);
    fill_answer(end, cnt, cfg, out);
    cJSON_Delete(end);
    cJSON_Delete(cnt);
    cJSON_Delete(cfg);
  }
  cJSON_Delete(ans);
  cJSON_Delete(v);
  mu_free(key);
  mu_free(endk);
  mu_free(rk);
  mu_free(cfgk);
  return rc;
}

/* ---------------------------------------------------------------------------------------------
 * failed, hung: the probe, then the count
 */

/* What a failure report reads: the run's end, round, config, restart count, round R's end,
 * the keys of level R - 1 (the members of round R that did not re-join), the members of R that
 * left with success (d/<R>/) and the joins waiting at level R. */
struct fstate {
  cJSON *end, *round, *cfg, *restarts, *ended;
  long long round_mod, restarts_mod;
  char **present; /* ids with a key at level R - 1 */
  size_t npresent;
  char **done; /* ids of members of R that left with success */
  size_t ndone;
  uint32_t joins, joins_prev; /* keys at level R; of which members of R (re-joined) */
};

static void fstate_release(struct fstate *f)
{
  cJSON_Delete(f->end);
  cJSON_Delete(f->round);
  cJSON_Delete(f->cfg);
  cJSON_Delete(f->restarts);
  cJSON_Delete(f->ended);
  for (size_t i = 0; i < f->npresent; i++)
    mu_free(f->present[i]);
  mu_free(f->present);
  for (size_t i = 0; i < f->ndone; i++)
    mu_free(f->done[i]);
  mu_free(f->done);
  memset(f, 0, sizeof(*f));
}

/* The ids of a range's keys, appended to *ids. */
static void ids_of(const cJSON *range, char ***ids, size_t *n)
{
  const cJSON *kv;
  cJSON_ArrayForEach(kv, cJSON_GetObjectItemCaseSensitive(range, "kvs"))
  {
    char *k = mu__etcd3_unb64(mu_json_get_str(kv, "key"), NULL);
    *ids = mu_realloc(*ids, (*n + 1) * sizeof(**ids));
    (*ids)[(*n)++] = mu_strdup(mu__etcd3_id_of_key(k));
    mu_free(k);
  }
}

/* The joins waiting at level r: how many, and how many are members of r (re-joined). */
static void count_joins(struct fstate *f, const cJSON *next)
{
  const cJSON *kv;
  cJSON_ArrayForEach(kv, cJSON_GetObjectItemCaseSensitive(next, "kvs"))
  {
    char *k = mu__etcd3_unb64(mu_json_get_str(kv, "key"), NULL);
    f->joins++;
    f->joins_prev += mu__etcd3_member_index(f->round, mu__etcd3_id_of_key(k)) >= 0;
    mu_free(k);
  }
}

static int fstate_read(struct mu_etcd3 *e, const char *run, long r, struct fstate *f)
{
  const char *names[] = {"c/end", "c/round", "c/cfg", "c/restarts"};
  char *keys[5], *old = mu__etcd3_key_of(run, "n/" ETCD3_LEVEL "/", r - 1),
                 *next = mu__etcd3_key_of(run, "n/" ETCD3_LEVEL "/", r);
  struct mu__etcd3_txn t;
  mu__etcd3_txn_init(&t);
  for (int i = 0; i < 4; i++)
    keys[i] = mu__etcd3_key_of(run, "%s", names[i]);
  keys[4] = mu__etcd3_key_of(run, "g/%ld", r);
  char *done = mu__etcd3_key_of(run, "d/" ETCD3_LEVEL "/", r);
  for (int i = 0; i < 5; i++)
    cJSON_AddItemToArray(t.success, mu__etcd3_op_range(keys[i], NULL, E3_ALL));
  cJSON_AddItemToArray(t.success, mu__etcd3_op_prefix(old, E3_KEYS));
  cJSON_AddItemToArray(t.success, mu__etcd3_op_prefix(next, E3_KEYS));
  cJSON_AddItemToArray(t.success, mu__etcd3_op_prefix(done, E3_KEYS));
  cJSON *ans = NULL;
  int rc = mu__etcd3_txn_run(e, &t, &ans);
  if (rc == 0) {
    f->end = value_at(ans, 0);
    f->round = value_at(ans, 1);
    f->cfg = value_at(ans, 2);
    f->restarts = value_at(ans, 3);
    f->ended = value_at(ans, 4);
    f->round_mod =
        mu__etcd3_int(mu__etcd3_range_first(mu__etcd3_txn_range(ans, 1)), "mod_revision");
    f->restarts_mod =
        mu__etcd3_int(mu__etcd3_range_first(mu__etcd3_txn_range(ans, 3)), "mod_revision");
    ids_of(mu__etcd3_txn_range(ans, 5), &f->present, &f->npresent);
    ids_of(mu__etcd3_txn_range(ans, 7), &f->done, &f->ndone);
    rc = mu__etcd3_attach_members(e, run, f->round);
    if (rc == 0)
      count_joins(f, mu__etcd3_txn_range(ans, 6));
  }
  cJSON_Delete(ans);
  for (int i = 0; i < 5; i++)
    mu_free(keys[i]);
  mu_free(old);
  mu_free(next);
  mu_free(done);
  return rc;
}

static int in_ids(char *const *ids, size_t n, const char *id)
{
  for (size_t i = 0; i < n; i++)
    if (strcmp(ids[i], id) == 0)
      return 1;
  return 0;
}

static int present(const struct fstate *f, const char *id)
{
  return in_ids(f->present, f->npresent, id);
}

/* The rules' decision on a failure report of round r by `me` (rules/rules.h, mu_rule_failure):
 * round r is active while it is the run's, has no end record and no member re-joined. */
static enum mu_rule failure_rule(const struct fstate *f, long r, const char *me)
{
  struct mu_rules_view v;
  memset(&v, 0, sizeof(v));
  long nnodes = (long)cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(f->round, "members"));
  long cur = mu__etcd3_round_no(f->round);
  v.min_nodes = (uint32_t)mu_json_get_long(f->cfg, "min_nodes", 1);
  v.max_nodes = (uint32_t)mu_json_get_long(f->round, "max", nnodes);
  v.max_restarts = mu_json_get_long(f->cfg, "max_restarts", -1);
  v.restarts = (uint32_t)mu_json_get_long(f->restarts, "count", 0);
  v.has_round = cur > 0;
  v.round_active = cur == r && f->ended == NULL && f->joins_prev == 0;
  v.round_nodes = (uint32_t)nnodes;
  v.joins = f->joins;
  v.joins_prev = f->joins_prev;
  uint64_t mine = present(f, me) ? (uint64_t)cur : 0;
  return mu_rule_failure(&v, (uint64_t)(cur > 0 ? cur : 0), (uint64_t)r, mine);
}

/* The probe's wait: who answered (r/<R>/<id>) or re-joined (n/<R>/<id>: alive too). */
struct probe {
  char **ids; /* the members asked, NULL once answered */
  size_t n, left;
};

static void probe_mark(struct probe *p, const char *id)
{
  for (size_t i = 0; i < p->n; i++)
    if (p->ids[i] != NULL && strcmp(p->ids[i], id) == 0) {
      mu_free(p->ids[i]);
      p->ids[i] = NULL;
      p->left--;
    }
}

static int probe_events(void *arg, const cJSON *events)
{
  struct probe *p = arg;
  const cJSON *ev;
  cJSON_ArrayForEach(ev, events)
  {
    const cJSON *kv = cJSON_GetObjectItemCaseSensitive(ev, "kv");
    char *k = mu__etcd3_unb64(mu_json_get_str(kv, "key"), NULL);
    if (mu_json_get_str(ev, "type") == NULL) /* a put */
      probe_mark(p, mu__etcd3_id_of_key(k));
    mu_free(k);
  }
  return p->left == 0;
}

/* Finds the members of round r other than `me` that are lost: those whose key at level r - 1
 * is gone without a success record (lost already: nobody is asked), else those still there
 * that do not answer whether they are alive.
 * Returns: 0 with *missing (the caller's, NULL-separated list of nmissing ids) the ones that
 * did not answer within PROBE_MS, or a call's error. */
static int probe(struct mu_etcd3 *e, const char *run, long r, const char *me,
                 const struct fstate *f, struct probe *p)
{
  const cJSON *m;
  memset(p, 0, sizeof(*p));
  for (int gone = 1; gone >= 0 && p->left == 0; gone--) {
    /* First the members whose key is gone and that did not leave with success: they are lost
     * already (MU_RULE_LOST), as musterd's lease expired, and nobody need be asked. Then the
     * others, who must answer. */
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(f->round, "members"))
    {
      const char *id = mu_json_get_str(m, "id");
      if (id == NULL || strcmp(id, me) == 0 || in_ids(f->done, f->ndone, id) ||
          present(f, id) == gone)
        continue;
      p->ids = mu_realloc(p->ids, (p->n + 1) * sizeof(*p->ids));
      p->ids[p->n++] = mu_strdup(id);
      p->left++;
    }
    if (gone && p->left > 0)
      return 0;
  }
  if (p->left == 0)
    return 0;
  char *qk = mu__etcd3_key_of(run, "q/%ld/%s", r, me);
  char *ra = mu__etcd3_key_of(run, "r/%ld/", r),
       *na = mu__etcd3_key_of(run, "n/" ETCD3_LEVEL "/", r);
  char *ra_end = mu__etcd3_prefix_end(ra), *na_end = mu__etcd3_prefix_end(na);
  char lease[32];
  mu__etcd3_lease_now(e, lease, sizeof(lease));
  struct mu__etcd3_txn t;
  mu__etcd3_txn_init(&t);
  cJSON_AddItemToArray(t.success, mu__etcd3_op_put(qk, "{}", 2, lease));
  cJSON *ans = NULL;
  int rc = mu__etcd3_txn_run(e, &t, &ans);
  if (rc == 0) {
    struct mu__etcd3_range rs[2] = {{ra, ra_end, 0}, {na, na_end, 0}};
    long long from = mu__etcd3_header_rev(ans) + 1;
    rc = mu__etcd3_watch_ranges(e, rs, 2, from, mu__etcd3_now_ms() + PROBE_MS, probe_events, p,
                                NULL);
    if (rc == MU_ETIMEDOUT || rc == MU_ESTATE)
      rc = 0;
    mu__etcd3_txn_init(&t); /* the question is answered: gone */
    cJSON_AddItemToArray(t.success, mu__etcd3_op_del(qk, NULL));
    cJSON *a2 = NULL;
    (void)mu__etcd3_txn_run(e, &t, &a2);
    cJSON_Delete(a2);
  }
  cJSON_Delete(ans);
  mu_free(qk);
  mu_free(ra);
  mu_free(na);
  mu_free(ra_end);
  mu_free(na_end);
  return rc;
}

static void probe_release(struct probe *p)
{
  for (size_t i = 0; i < p->n; i++)
    mu_free(p->ids[i]);
  mu_free(p->ids);
}

/* The compares that make a write about round r hold only while round r is the latest, has not
 * ended (g/<r>) and the run is open. */
static void add_round_open(cJSON *compare, const char *run, long r, const struct fstate *f)
{
  char *rk = mu__etcd3_key_of(run, "c/round"), *gk = mu__etcd3_key_of(run, "g/%ld", r),
       *ek = mu__etcd3_key_of(run, "c/end");
  cJSON_AddItemToArray(compare, mu__etcd3_cmp(rk, NULL, "MOD", "EQUAL", f->round_mod));
  cJSON_AddItemToArray(compare, mu__etcd3_cmp(gk, NULL, "CREATE", "EQUAL", 0));
  cJSON_AddItemToArray(compare, mu__etcd3_cmp(ek, NULL, "CREATE", "EQUAL", 0));
  mu_free(rk);
  mu_free(gk);
  mu_free(ek);
}

static cJSON *end_record(const char *end, int counted, const char *why, const char *node)
{
  cJSON *g = cJSON_CreateObject();
  cJSON_AddStringToObject(g, "end", end);
  cJSON_AddBoolToObject(g, "counted", counted != 0);
  char w[WHY_MAX + 1];
  snprintf(w, sizeof(w), "%s", why);
  cJSON_AddStringToObject(g, "why", w);
  cJSON_AddStringToObject(g, "node", node);
  cJSON_AddNumberToObject(g, "time_ms", (double)mu__etcd3_wall_ms());
  return g;
}

/* Ends round r as lost: the members that did not answer are gone (their keys deleted). Returns:
 * 1 done, 0 lost a race (read again), or an error. */
static int end_lost(struct mu_etcd3 *e, const char *run, long r, const struct fstate *f,
                    const struct probe *p)
{
  struct mu_buf why = MU_BUF_INIT(SIZE_MAX);
  struct mu__etcd3_txn t;
  mu__etcd3_txn_init(&t);
  add_round_open(t.compare, run, r, f);
  for (size_t i = 0; i < p->n; i++) {
    if (p->ids[i] == NULL)
      continue;
    char *k = mu__etcd3_key_of(run, "n/" ETCD3_LEVEL "/%s", r - 1, p->ids[i]);
    cJSON_AddItemToArray(t.success, mu__etcd3_op_del(k, NULL));
    mu_free(k);
    mu_buf_printf(&why, "%snode '%s'", why.len ? ", " : "", p->ids[i]);
  }
  mu_buf_puts(&why, " was lost (it answered no probe: its agent is gone)");
  char *gk = mu__etcd3_key_of(run, "g/%ld", r);
  cJSON *g = end_record("lost", 0, mu_buf_str(&why), "");
  cJSON_AddItemToArray(t.success, op_put_json(gk, g, NULL));
  cJSON *ans = NULL;
  int rc = mu__etcd3_txn_run(e, &t, &ans);
  if (rc == 0)
    rc = mu__etcd3_txn_ok(ans) ? 1 : 0;
  cJSON_Delete(ans);
  cJSON_Delete(g);
  mu_free(gk);
  mu_buf_release(&why);
  return rc;
}

/* Counts this failure (or, with no restart left, shuts the run). Returns: 1 done (out filled),
 * 0 lost a race, or an error. */
static int count_failure(struct mu_etcd3 *e, const char *run, const char *me, long r,
                         enum mu_report_event ev, const char *reason, int shut,
                         const struct fstate *f, struct mu_report_answer *out)
{
  long k = mu_json_get_long(f->restarts, "count", 0),
       mr = mu_json_get_long(f->cfg, "max_restarts", -1);
  char why[WHY_MAX + 128], shutwhy[WHY_MAX + 256];
  snprintf(why, sizeof(why), "node '%s': %.*s", me, WHY_MAX - 64,
           reason != NULL && reason[0] ? reason
           : ev == MU_REPORT_HUNG      ? "a worker hung"
                                       : "a worker failed");
  snprintf(shutwhy, sizeof(shutwhy), "%s; no restart left (max_restarts %ld, %ld done)", why, mr,
           k);
  char *gk = mu__etcd3_key_of(run, "g/%ld", r), *rk = mu__etcd3_key_of(run, "c/restarts"),
       *ek = mu__etcd3_key_of(run, "c/end");
  cJSON *g = end_record(ev == MU_REPORT_HUNG ? "hung" : "failed", 1, why, me);
  cJSON *v = cJSON_CreateObject();
  struct mu__etcd3_txn t;
  mu__etcd3_txn_init(&t);
  add_round_open(t.compare, run, r, f);
  cJSON_AddItemToArray(t.compare, f->restarts_mod > 0
                                      ? mu__etcd3_cmp(rk, NULL, "MOD", "EQUAL", f->restarts_mod)
                                      : mu__etcd3_cmp(rk, NULL, "CREATE", "EQUAL", 0));
  cJSON_AddItemToArray(t.success, op_put_json(gk, g, NULL));
  if (shut) {
    cJSON_AddStringToObject(v, "state", "shut");
    cJSON_AddStringToObject(v, "reason", shutwhy);
    cJSON_AddItemToArray(t.success, op_put_json(ek, v, NULL));
  } else {
    cJSON_AddNumberToObject(v, "count", (double)(k + 1));
    cJSON_AddItemToArray(t.success, op_put_json(rk, v, NULL));
  }
  cJSON *ans = NULL;
  int rc = mu__etcd3_txn_run(e, &t, &ans);
  if (rc == 0 && mu__etcd3_txn_ok(ans)) {
    rc = 1;
    out->counted = 1;
    snprintf(out->state, sizeof(out->state), "%s", shut ? "shut" : "open");
    snprintf(out->reason, sizeof(out->reason), "%s", shut ? shutwhy : "");
    out->restart_count = (int)(shut ? k : k + 1);
    out->max_restarts = mr;
  }
  cJSON_Delete(ans);
  cJSON_Delete(g);
  cJSON_Delete(v);
  mu_free(gk);
  mu_free(rk);
  mu_free(ek);
  return rc;
}

/* A failure report (ev FAILED or HUNG), or the probe alone (FAILING: a lost member ends the
 * round, else nothing is written). */
static int report_failure(struct mu_etcd3 *e, const char *run, const char *me, long r,
                          enum mu_report_event ev, const char *reason, struct mu_report_answer *out)
{
  int rc = 0;
  for (int tries = 0; tries < FAILURE_TRIES && rc == 0; tries++) {
    struct fstate f;
    memset(&f, 0, sizeof(f));
    rc = fstate_read(e, run, r, &f);
    if (rc == 0 && f.end != NULL) { /* the run had ended before: as musterd's 410 */
      const char *st = mu_json_get_str(f.end, "state"), *why = mu_json_get_str(f.end, "reason");
      rc = st != NULL && strcmp(st, "shut") == 0 ? MU_ESHUT : MU_ECLOSED;
      mu__etcd3_say(e, "run '%s' was %s: %s", run, rc == MU_ESHUT ? "shut down" : "closed",
                    why != NULL ? why : "");
    }
    if (rc != 0) {
      fstate_release(&f);
      break;
    }
    fill_answer(NULL, f.restarts, f.cfg, out);
    enum mu_rule rule = failure_rule(&f, r, me);
    if (rule == MU_RULE_FAILURE_LATE || rule == MU_RULE_FAILURE_SCALE_UP) {
      fstate_release(&f); /* round r had ended another way, or ends to grow: nothing counted */
      return 0;
    }
    struct probe p;
    rc = probe(e, run, r, me, &f, &p);
    if (rc == 0 && p.left > 0)
      rc = end_lost(e, run, r, &f, &p);
    else if (rc == 0 && ev != MU_REPORT_FAILING)
      rc = count_failure(e, run, me, r, ev, reason, rule == MU_RULE_BUDGET_SPENT, &f, out);
    else if (rc == 0)
      rc = 1; /* everyone answered: the report that follows counts */
    probe_release(&p);
    fstate_release(&f);
    if (rc == 1)
      return 0;
  }
  return rc;
}

int mu_etcd3_report(struct mu_etcd3 *e, const char *run_id, const char *node_id, long round,
                    enum mu_report_event ev, const char *reason, struct mu_report_answer *out)
{
  e->errmsg[0] = '\0';
  if (!valid_ids(e, run_id, node_id) || round < 1)
    return MU_EINVAL;
  if (ev == MU_REPORT_STARTED || ev == MU_REPORT_PROGRESS)
    return report_mark(e, run_id, node_id, round, ev, out);
  if (ev == MU_REPORT_FAILED || ev == MU_REPORT_HUNG || ev == MU_REPORT_FAILING)
    return report_failure(e, run_id, node_id, round, ev, reason, out);
  mu__etcd3_say(e, "unknown report event %d", (int)ev);
  return MU_EINVAL;
}

int mu__etcd3_probe_answer(struct mu_etcd3 *e, const char *run, long r, const char *id)
{
  char *k = mu__etcd3_key_of(run, "r/%ld/%s", r, id);
  struct mu__etcd3_txn t;
  mu__etcd3_txn_init(&t);
  cJSON_AddItemToArray(t.success, mu__etcd3_op_put(k, "{}", 2, NULL));
  cJSON *ans = NULL;
  int rc = mu__etcd3_txn_run(e, &t, &ans);
  cJSON_Delete(ans);
  mu_free(k);
  return rc;
}

/* ---------------------------------------------------------------------------------------------
 * Health checks
 */

/* The output as kept: its last OUTPUT_MAX bytes, a byte that is not printable (nor a newline, a
 * tab, or above 0x7f) as '?', as musterd keeps it. Ownership: the caller's (mu_free). */
static char *keep_output(const char *output)
{
  size_t n = output != NULL ? strlen(output) : 0;
  const char *p = n > OUTPUT_MAX ? output + n - OUTPUT_MAX : output;
  size_t len = n > OUTPUT_MAX ? OUTPUT_MAX : n;
  char *s = mu_malloc(len + 1);
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)p[i];
    s[i] = (char)(c == '\n' || c == '\t' || (c >= 0x20 && c < 0x7f) || c >= 0x80 ? c : '?');
  }
  s[len] = '\0';
  return s;
}

/* The new record of node id's failed check from its old one (NULL: the first). */
static cJSON *sick_record(const cJSON *old, const char *output)
{
  long long now = mu__etcd3_wall_ms();
  char *kept = keep_output(output);
  cJSON *v = cJSON_CreateObject();
  cJSON_AddStringToObject(v, "output", kept);
  cJSON_AddNumberToObject(v, "since_ms",
                          old != NULL ? mu_json_get_double(old, "since_ms", 0) : (double)now);
  cJSON_AddNumberToObject(v, "last_ms", (double)now);
  cJSON_AddNumberToObject(v, "checks", (double)(mu_json_get_long(old, "checks", 0) + 1));
  mu_free(kept);
  return v;
}

/* A failed check: u/<id> (under this node's lease: it goes with the agent), and a member of
 * the latest round is lost (its key deleted, the round ended "unhealthy"). */
static int health_failed(struct mu_etcd3 *e, const char *run, const struct mu_join_opts *o,
                         const char *output, const char *uk, const char *up, cJSON **ans)
{
  char *nk = mu__etcd3_key_of(run, "n/"), *rk = mu__etcd3_key_of(run, "c/round");
  struct mu__etcd3_txn t;
  cJSON *rd = NULL;
  int rc = mu__etcd3_ensure_lease(e, o->lease_ttl_ms > 0 ? o->lease_ttl_ms : ETCD3_TTL_MS_DEFAULT);
  if (rc == 0) {
    mu__etcd3_txn_init(&t);
    cJSON_AddItemToArray(t.success, mu__etcd3_op_range(uk, NULL, E3_ALL));
    cJSON_AddItemToArray(t.success, mu__etcd3_op_prefix(nk, E3_KEYS));
    cJSON_AddItemToArray(t.success, mu__etcd3_op_range(rk, NULL, E3_ALL));
    rc = mu__etcd3_txn_run(e, &t, &rd);
  }
  if (rc != 0)
    goto out;
  cJSON *old = value_at(rd, 0), *round = value_at(rd, 2), *v = sick_record(old, output);
  long r = mu__etcd3_round_no(round);
  char *gk = mu__etcd3_key_of(run, "g/%ld", r), lease[32];
  cJSON *g = end_record("unhealthy", 0, "its health check failed", o->node_id);
  mu__etcd3_lease_now(e, lease, sizeof(lease));
  mu__etcd3_txn_init(&t);
  cJSON_AddItemToArray(t.compare, mu__etcd3_cmp(gk, NULL, "CREATE", "EQUAL", 0));
  for (int branch = 0; branch < 2; branch++) {
    cJSON *ops = branch ? t.failure : t.success;
    cJSON_AddItemToArray(ops, op_put_json(uk, v, lease));
    const cJSON *kv;
    int member = 0;
    cJSON_ArrayForEach(kv, cJSON_GetObjectItemCaseSensitive(mu__etcd3_txn_range(rd, 1), "kvs"))
    {
      char *k = mu__etcd3_unb64(mu_json_get_str(kv, "key"), NULL);
      if (strcmp(mu__etcd3_id_of_key(k), o->node_id) == 0) {
        member |= strtol(k + strlen(nk), NULL, 10) == r - 1 && r > 0;
        cJSON_AddItemToArray(ops, mu__etcd3_op_del(k, NULL));
      }
      mu_free(k);
    }
    if (!branch && member) /* its round ends now: the others re-join without it */
      cJSON_AddItemToArray(ops, op_put_json(gk, g, NULL));
    cJSON_AddItemToArray(ops, mu__etcd3_op_prefix(up, E3_COUNT));
  }
  rc = mu__etcd3_txn_run(e, &t, ans);
  cJSON_Delete(old);
  cJSON_Delete(round);
  cJSON_Delete(v);
  cJSON_Delete(g);
  mu_free(gk);
out:
  cJSON_Delete(rd);
  mu_free(nk);
  mu_free(rk);
  return rc;
}

int mu_etcd3_health(struct mu_etcd3 *e, const char *run_id, const struct mu_join_opts *o,
                    int healthy, const char *output, int *unhealthy)
{
  int rc = mu__etcd3_run_begin(e, run_id, o); /* a join's checks; creates the run */
  if (rc != 0)
    return rc;
  char *uk = mu__etcd3_key_of(run_id, "u/%s", o->node_id), *up = mu__etcd3_key_of(run_id, "u/");
  cJSON *ans = NULL;
  if (healthy) {
    struct mu__etcd3_txn t;
    mu__etcd3_txn_init(&t);
    cJSON_AddItemToArray(t.success, mu__etcd3_op_del(uk, NULL));
    cJSON_AddItemToArray(t.success, mu__etcd3_op_prefix(up, E3_COUNT));
    rc = mu__etcd3_txn_run(e, &t, &ans);
  } else {
    rc = health_failed(e, run_id, o, output, uk, up, &ans);
  }
  if (rc == 0 && unhealthy != NULL) { /* the count is the last response of either branch */
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(ans, "responses");
    *unhealthy = (int)mu__etcd3_int(mu__etcd3_txn_range(ans, cJSON_GetArraySize(rs) - 1), "count");
  }
  cJSON_Delete(ans);
  mu_free(uk);
  mu_free(up);
  return rc;
}

/* ---------------------------------------------------------------------------------------------
 * The run's goodput in musterd's shape (GET /v1/runs/{id})
 */

/* What the goodput read holds: c/restarts, and the values of g/, t/, s/, p/, u/ and the KV's
 * muster.* keys (the agents' progress lines and --hang-timeout auto's value). */
struct gread {
  const cJSON *g, *t, *s, *p, *u, *k; /* each a range answer's kvs */
  char *gp, *tp, *sp, *pp, *up, *kp;  /* their prefixes */
};

/* Round r's steps: its nodes' lines `kv/muster.progress.<r>.<node rank>` folded. */
static void round_steps(const struct gread *rd, long r, struct mu_goodput_steps *st)
{
  const cJSON *kv;
  *st = (struct mu_goodput_steps)MU_GOODPUT_STEPS_INIT;
  cJSON_ArrayForEach(kv, rd->k)
  {
    char *k = mu__etcd3_unb64(mu_json_get_str(kv, "key"), NULL), *end = NULL;
    const char *rest = k + strlen(rd->kp);
    long kr = strncmp(rest, "progress.", 9) == 0 ? strtol(rest + 9, &end, 10) : -1;
    if (kr == r && end != rest + 9 && *end == '.') {
      size_t len = 0;
      char *v = mu__etcd3_unb64(mu_json_get_str(kv, "value"), &len);
      if (v != NULL)
        mu_goodput_steps_fold(st, v, len);
      mu_free(v);
    }
    mu_free(k);
  }
}

/* --hang-timeout auto's value in use, ms (0: none kept). */
static double auto_timeout_ms(const struct gread *rd)
{
  const cJSON *kv;
  double t = 0;
  cJSON_ArrayForEach(kv, rd->k)
  {
    char *k = mu__etcd3_unb64(mu_json_get_str(kv, "key"), NULL);
    if (strcmp(k + strlen(rd->kp), "hang_timeout_auto") == 0) {
      char *v = mu__etcd3_unb64(mu_json_get_str(kv, "value"), NULL);
      t = v != NULL ? strtod(v, NULL) : 0;
      mu_free(v);
    }
    mu_free(k);
  }
  return t > 0 ? t : 0;
}

/* The value of the key prefix + "%ld" (+ "/..." for s/) of round r in kvs, or NULL; for s/,
 * *count gets how many keys round r has and *max_t the latest "t". Ownership: the caller's. */
static cJSON *round_value(const cJSON *kvs, const char *prefix, long r, long *count, double *max_t)
{
  const cJSON *kv;
  cJSON *found = NULL;
  if (count != NULL)
    *count = 0;
  cJSON_ArrayForEach(kv, kvs)
  {
    char *k = mu__etcd3_unb64(mu_json_get_str(kv, "key"), NULL);
    char *end = NULL;
    long kr = strtol(k + strlen(prefix), &end, 10);
    if (kr == r && count != NULL && *end == '/') {
      cJSON *v = mu__etcd3_kv_json(kv);
      double t = mu_json_get_double(v, "t", 0);
      ++*count;
      *max_t = t > *max_t ? t : *max_t;
      cJSON_Delete(v);
    } else if (kr == r && count == NULL && *end == '\0' && found == NULL) {
      found = mu__etcd3_kv_json(kv);
    }
    mu_free(k);
  }
  return found;
}

static void put_ms(cJSON *o, const char *name, double ms)
{
  if (ms > 0)
    cJSON_AddNumberToObject(o, name, ms);
  else
    cJSON_AddNullToObject(o, name);
}

/* One round's record (musterd's timings.rounds[i]); *ended gets when it ended (0: not yet). */
static cJSON *round_timing(const struct gread *rd, long r, const cJSON *tv, const cJSON *next_tv,
                           const cJSON *endv, double prev_end, double *ended)
{
  cJSON *x = cJSON_CreateObject();
  long started = 0;
  double started_t = 0;
  cJSON *sv = round_value(rd->s, rd->sp, r, &started, &started_t);
  cJSON *pv = round_value(rd->p, rd->pp, r, NULL, NULL),
        *gv = round_value(rd->g, rd->gp, r, NULL, NULL);
  long nnodes = mu_json_get_long(tv, "nnodes", 0);
  double progress = mu_json_get_double(pv, "t", 0);
  cJSON_AddNumberToObject(x, "round", (double)r);
  cJSON_AddNumberToObject(x, "nnodes", (double)nnodes);
  cJSON_AddNumberToObject(x, "world_size", (double)mu_json_get_long(tv, "world", 0));
  cJSON_AddNumberToObject(x, "restart_count", (double)mu_json_get_long(tv, "restart_count", 0));
  put_ms(x, "closed_ms", mu_json_get_double(tv, "closed_ms", 0));
  put_ms(x, "started_ms", started >= nnodes && nnodes > 0 ? started_t : 0);
  put_ms(x, "first_progress_ms", progress);
  const char *end = mu_json_get_str(gv, "end"), *why = mu_json_get_str(gv, "why");
  *ended = mu_json_get_double(gv, "time_ms", 0);
  int counted = mu_json_get_bool(gv, "counted", 0);
  if (gv == NULL && next_tv != NULL) { /* ended by a newer round, nothing reported */
    end = "rejoined";
    why = "a newer round closed";
    *ended = mu_json_get_double(next_tv, "closed_ms", 0);
  } else if (gv == NULL && endv != NULL) { /* the run's end */
    end = strcmp(mu_json_get_str(endv, "state") ? mu_json_get_str(endv, "state") : "", "shut") == 0
              ? "shut"
              : "closed";
    why = mu_json_get_str(endv, "reason");
    *ended = mu_json_get_double(endv, "time_ms", 0);
  }
  put_ms(x, "ended_ms", *ended);
  put_ms(x, "downtime_ms", prev_end > 0 && progress > 0 ? progress - prev_end : 0);
  cJSON_AddStringToObject(x, "end", end != NULL ? end : "");
  cJSON_AddBoolToObject(x, "counted", counted);
  cJSON_AddStringToObject(x, "why", why != NULL ? why : "");
  struct mu_goodput_steps st;
  round_steps(rd, r, &st);
  struct mu_buf sb = MU_BUF_INIT(SIZE_MAX);
  mu_goodput_steps_json(&st, &sb);
  cJSON_AddItemToObject(x, "steps", cJSON_Parse(mu_buf_str(&sb)));
  mu_buf_release(&sb);
  cJSON_Delete(sv);
  cJSON_Delete(pv);
  cJSON_Delete(gv);
  return x;
}

/* timings: created, first progress, time to first step, the latest rounds. */
static cJSON *timings(const struct gread *rd, const cJSON *cfg, const cJSON *endv)
{
  cJSON *t = cJSON_CreateObject(), *rounds = cJSON_CreateArray();
  double created = mu_json_get_double(cfg, "created_ms", 0), first = 0, prev_end = 0;
  const cJSON *kv;
  cJSON_ArrayForEach(kv, rd->p)
  {
    cJSON *v = mu__etcd3_kv_json(kv);
    double pt = mu_json_get_double(v, "t", 0);
    first = pt > 0 && (first == 0 || pt < first) ? pt : first;
    cJSON_Delete(v);
  }
  int n = cJSON_GetArraySize(rd->t), i = 0;
  cJSON_ArrayForEach(kv, rd->t)
  {
    char *k = mu__etcd3_unb64(mu_json_get_str(kv, "key"), NULL);
    long r = strtol(k + strlen(rd->tp), NULL, 10);
    cJSON *tv = mu__etcd3_kv_json(kv), *next = kv->next ? mu__etcd3_kv_json(kv->next) : NULL;
    double ended = 0;
    cJSON *x = round_timing(rd, r, tv, next, next == NULL ? endv : NULL, prev_end, &ended);
    if (i++ >= n - HISTORY_MAX)
      cJSON_AddItemToArray(rounds, x);
    else
      cJSON_Delete(x);
    prev_end = ended;
    cJSON_Delete(tv);
    cJSON_Delete(next);
    mu_free(k);
  }
  put_ms(t, "created_ms", created);
  put_ms(t, "first_progress_ms", first);
  put_ms(t, "time_to_first_step_ms", first > 0 && created > 0 ? first - created : 0);
  put_ms(t, "hang_timeout_auto_ms", auto_timeout_ms(rd));
  cJSON_AddNumberToObject(t, "rounds_dropped", n > HISTORY_MAX ? n - HISTORY_MAX : 0);
  cJSON_AddItemToObject(t, "rounds", rounds);
  return t;
}

static cJSON *unhealthy_list(const struct gread *rd)
{
  cJSON *list = cJSON_CreateArray();
  const cJSON *kv;
  cJSON_ArrayForEach(kv, rd->u)
  {
    char *k = mu__etcd3_unb64(mu_json_get_str(kv, "key"), NULL);
    cJSON *v = mu__etcd3_kv_json(kv);
    if (v != NULL) {
      cJSON_AddStringToObject(v, "node_id", k + strlen(rd->up));
      cJSON_AddItemToArray(list, v);
    }
    mu_free(k);
  }
  return list;
}

int mu__etcd3_goodput_json(struct mu_etcd3 *e, const char *run, const cJSON *cfg,
                           const cJSON *round, long waiting, cJSON *o)
{
  struct gread rd;
  char *rk = mu__etcd3_key_of(run, "c/restarts"), *ek = mu__etcd3_key_of(run, "c/end");
  rd.gp = mu__etcd3_key_of(run, "g/");
  rd.tp = mu__etcd3_key_of(run, "t/");
  rd.sp = mu__etcd3_key_of(run, "s/");
  rd.pp = mu__etcd3_key_of(run, "p/");
  rd.up = mu__etcd3_key_of(run, "u/");
  rd.kp = mu__etcd3_key_of(run, "kv/muster.");
  struct mu__etcd3_txn t;
  mu__etcd3_txn_init(&t);
  cJSON_AddItemToArray(t.success, mu__etcd3_op_range(rk, NULL, E3_ALL));
  cJSON_AddItemToArray(t.success, mu__etcd3_op_range(ek, NULL, E3_ALL));
  const char *pre[] = {rd.gp, rd.tp, rd.sp, rd.pp, rd.up, rd.kp};
  for (int i = 0; i < 6; i++)
    cJSON_AddItemToArray(t.success, mu__etcd3_op_prefix(pre[i], E3_ALL));
  cJSON *ans = NULL;
  int rc = mu__etcd3_txn_run(e, &t, &ans);
  if (rc == 0) {
    const cJSON **ranges[] = {&rd.g, &rd.t, &rd.s, &rd.p, &rd.u, &rd.k};
    for (int i = 0; i < 6; i++)
      *ranges[i] = cJSON_GetObjectItemCaseSensitive(mu__etcd3_txn_range(ans, i + 2), "kvs");
    cJSON *cnt = value_at(ans, 0), *endv = value_at(ans, 1);
    long mr = mu_json_get_long(cfg, "max_restarts", -1), r = mu__etcd3_round_no(round);
    cJSON *gv = round_value(rd.g, rd.gp, r, NULL, NULL);
    const char *rs = mu_json_get_str(o, "round_state");
    if (gv != NULL && rs != NULL && strcmp(rs, "active") == 0) /* a report ended it */
      cJSON_ReplaceItemInObjectCaseSensitive(o, "round_state", cJSON_CreateString("broken"));
    rs = mu_json_get_str(o, "round_state");
    int full = mu_json_get_long(o, "nnodes", 0) >= mu_json_get_long(cfg, "max_nodes", 1);
    cJSON_AddNumberToObject(o, "restart_count", (double)mu_json_get_long(cnt, "count", 0));
    if (mr >= 0)
      cJSON_AddNumberToObject(o, "max_restarts", (double)mr);
    else
      cJSON_AddNullToObject(o, "max_restarts");
    cJSON_AddNumberToObject(o, "standbys",
                            rs != NULL && strcmp(rs, "active") == 0 && full ? (double)waiting : 0);
    cJSON_AddItemToObject(o, "unhealthy", unhealthy_list(&rd));
    cJSON_AddItemToObject(o, "timings", timings(&rd, cfg, endv));
    cJSON_Delete(gv);
    cJSON_Delete(cnt);
    cJSON_Delete(endv);
  }
  cJSON_Delete(ans);
  mu_free(rk);
  mu_free(ek);
  for (int i = 0; i < 6; i++)
    mu_free((char *)pre[i]);
  return rc;
}
