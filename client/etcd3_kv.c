/* The etcd v3 backend: barriers and the run's KV (etcd3_int.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "muster/errno.h"

#include "alloc.h"
#include "buf.h"
#include "etcd3_int.h"
#include "json.h"

/* ---------------------------------------------------------------------------------------------
 * Barriers and the run's KV
 */

struct keywait {
  const char *key;
  cJSON *kv; /* the PUT seen */
};

static int key_events(void *arg, const cJSON *events)
{
  struct keywait *kw = arg;
  const cJSON *ev;
  cJSON_ArrayForEach(ev, events)
  {
    if (mu_json_get_str(ev, "type") != NULL)
      continue; /* DELETE */
    cJSON_Delete(kw->kv);
    kw->kv = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(ev, "kv"), 1);
    return 1;
  }
  return 0;
}

/* A barrier on etcd: generation g is the version of b/<name>/g; arrivals of generation g are
 * b/<name>/a/<g>/<id> holding the count; the last arrival opens it (puts g again, deletes the
 * arrivals); the others watch g. */
struct barrier {
  struct mu_etcd3 *e;
  const char *name, *id;
  int count;
  char *gk;                   /* b/<name>/g */
  char *arr, *arr_end, *mine; /* this generation's arrivals, and this id's */
  long g;                     /* the generation */
  long long gmod;             /* g's mod revision, 0 before the first opening */
};

static void barrier_release(struct barrier *b)
{
  mu_free(b->gk);
  mu_free(b->arr);
  mu_free(b->arr_end);
  mu_free(b->mine);
}

/* Reads the generation and names its keys. Returns: 0 or a call's error. */
static int barrier_generation(struct barrier *b, const char *run_id)
{
  struct mu__etcd3_txn t;
  mu__etcd3_txn_init(&t);
  cJSON_AddItemToArray(t.success, mu__etcd3_op_range(b->gk, NULL, E3_ALL));
  cJSON *ans = NULL;
  int rc = mu__etcd3_txn_run(b->e, &t, &ans);
  if (rc == 0) {
    const cJSON *gkv = mu__etcd3_range_first(mu__etcd3_txn_range(ans, 0));
    b->gmod = gkv != NULL ? mu__etcd3_int(gkv, "mod_revision") : 0;
    b->g = gkv != NULL ? (long)mu__etcd3_int(gkv, "version") : 0;
    mu_free(b->arr);
    mu_free(b->arr_end);
    mu_free(b->mine);
    b->arr = mu__etcd3_key_of(run_id, "b/%s/a/%ld/", b->name, b->g);
    b->arr_end = mu__etcd3_prefix_end(b->arr);
    b->mine = mu__etcd3_key_of(run_id, "b/%s/a/%ld/%s", b->name, b->g, b->id);
  }
  cJSON_Delete(ans);
  return rc;
}

/* The compare that holds while the generation is the one read. */
static cJSON *same_generation(const struct barrier *b)
{
  return b->gmod > 0 ? mu__etcd3_cmp(b->gk, NULL, "MOD", "EQUAL", b->gmod)
                     : mu__etcd3_cmp(b->gk, NULL, "CREATE", "EQUAL", 0);
}

/* Deletes this id's arrival (a barrier it gives up on). */
static void barrier_withdraw(struct barrier *b)
{
  struct mu__etcd3_txn t;
  cJSON *ans = NULL;
  mu__etcd3_txn_init(&t);
  cJSON_AddItemToArray(t.success, mu__etcd3_op_del(b->mine, NULL));
  mu__etcd3_txn_run(b->e, &t, &ans);
  cJSON_Delete(ans);
}

/* Arrives at the generation read, unless it opened meanwhile (*again). *arrived: the arrivals
 * so far, at revision *rev. Returns: 0; MU_ESTATE (count_mismatch); a call's error. */
static int barrier_arrive(struct barrier *b, int *again, int *arrived, long long *rev)
{
  struct mu__etcd3_txn t;
  char cnt[16];
  cJSON *ans = NULL;
  snprintf(cnt, sizeof(cnt), "%d", b->count);
  mu__etcd3_txn_init(&t);
  cJSON_AddItemToArray(t.compare, same_generation(b));
  cJSON_AddItemToArray(t.success, mu__etcd3_op_put(b->mine, cnt, strlen(cnt), NULL));
  cJSON_AddItemToArray(t.success, mu__etcd3_op_range(b->arr, b->arr_end, E3_ALL));
  int rc = mu__etcd3_txn_run(b->e, &t, &ans), mismatch = 0;
  *again = rc == 0 && !mu__etcd3_txn_ok(ans);
  *arrived = 0;
  const cJSON *kv;
  cJSON_ArrayForEach(kv, cJSON_GetObjectItemCaseSensitive(mu__etcd3_txn_range(ans, 1), "kvs"))
  {
    char *v = mu__etcd3_unb64(mu_json_get_str(kv, "value"), NULL);
    mismatch |= strtol(v, NULL, 10) != b->count;
    mu_free(v);
    ++*arrived;
  }
  *rev = mu__etcd3_header_rev(ans);
  cJSON_Delete(ans);
  if (rc != 0 || *again || !mismatch)
    return rc;
  mu__etcd3_say(b->e, "barrier '%s' is waited for with another count than %d (count_mismatch)",
                b->name, b->count);
  barrier_withdraw(b);
  return MU_ESTATE;
}

/* The last one opens it for everybody. */
static int barrier_open(struct barrier *b)
{
  struct mu__etcd3_txn t;
  cJSON *ans = NULL;
  mu__etcd3_txn_init(&t);
  cJSON_AddItemToArray(t.compare, same_generation(b));
  cJSON_AddItemToArray(t.success, mu__etcd3_op_put(b->gk, "", 0, NULL));
  cJSON_AddItemToArray(t.success, mu__etcd3_op_del(b->arr, b->arr_end));
  int rc = mu__etcd3_txn_run(b->e, &t, &ans);
  cJSON_Delete(ans);
  return rc;
}

/* Waits until the generation moves (someone opened it) or the deadline. */
static int barrier_wait(struct barrier *b, long long rev, long long deadline, int arrived)
{
  struct keywait kw = {b->gk, NULL};
  struct mu__etcd3_range rs[1] = {{b->gk, NULL, 0}};
  int rc = mu__etcd3_watch_ranges(b->e, rs, 1, rev + 1, deadline, key_events, &kw, NULL);
  cJSON_Delete(kw.kv);
  if (rc == MU_ETIMEDOUT) {
    mu__etcd3_say(b->e, "barrier '%s' timed out with %d of %d arrived (barrier_timeout)", b->name,
                  arrived, b->count);
    barrier_withdraw(b);
  }
  return rc;
}

int mu_etcd3_barrier(struct mu_etcd3 *e, const char *run_id, const char *name, int count,
                     const char *id, long timeout_ms, long *generation)
{
  e->errmsg[0] = '\0';
  if (!mu__etcd3_valid_id(run_id) || !mu__etcd3_valid_id(name) || count < 1 ||
      (id != NULL && !mu__etcd3_valid_id(id))) {
    mu__etcd3_say(e, "bad barrier: run id and name are 1-256 printable characters, count >= 1");
    return MU_EINVAL;
  }
  long long deadline = mu__etcd3_now_ms() + (timeout_ms > 0 ? timeout_ms : 30000);
  char anon[64];
  if (id == NULL) {
    snprintf(anon, sizeof(anon), "anon-%d-%lld", (int)getpid(), mu__etcd3_now_ms());
    id = anon;
  }
  struct barrier b = {e,    name, id,   count, mu__etcd3_key_of(run_id, "b/%s/g", name),
                      NULL, NULL, NULL, 0,     0};
  int rc = 0, again = 1, arrived = 0;
  long long rev = 0;
  while (rc == 0 && again) { /* the barrier opened meanwhile: arrive at the next generation */
    rc = barrier_generation(&b, run_id);
    if (rc == 0)
      rc = barrier_arrive(&b, &again, &arrived, &rev);
  }
  if (rc == 0)
    rc = arrived >= count ? barrier_open(&b) : barrier_wait(&b, rev, deadline, arrived);
  if (rc == 0 && generation != NULL)
    *generation = b.g + 1;
  barrier_release(&b);
  return rc;
}

int mu_etcd3_kv_put(struct mu_etcd3 *e, const char *run_id, const char *key, const void *val,
                    size_t len, long *version)
{
  e->errmsg[0] = '\0';
  if (!mu__etcd3_valid_id(run_id) || key == NULL || key[0] == '\0' || strlen(key) > 512 ||
      len > (1u << 20)) {
    mu__etcd3_say(e, "bad KV put: keys are 1-512 bytes, values at most 1 MiB");
    return MU_EINVAL;
  }
  char *k = mu__etcd3_key_of(run_id, "kv/%s", key);
  struct mu__etcd3_txn t;
  mu__etcd3_txn_init(&t);
  cJSON_AddItemToArray(t.success, mu__etcd3_op_put(k, len ? val : "", len, NULL));
  cJSON_AddItemToArray(t.success, mu__etcd3_op_range(k, NULL, E3_KEYS));
  cJSON *ans = NULL;
  int rc = mu__etcd3_txn_run(e, &t, &ans);
  if (rc == 0 && version != NULL)
    *version = (long)mu__etcd3_int(mu__etcd3_range_first(mu__etcd3_txn_range(ans, 1)), "version");
  cJSON_Delete(ans);
  mu_free(k);
  return rc;
}

int mu_etcd3_kv_get(struct mu_etcd3 *e, const char *run_id, const char *key, long wait_ms,
                    char **val, size_t *len)
{
  *val = NULL;
  if (len != NULL)
    *len = 0;
  e->errmsg[0] = '\0';
  if (!mu__etcd3_valid_id(run_id) || key == NULL || key[0] == '\0' || strlen(key) > 512) {
    mu__etcd3_say(e, "bad KV get: keys are 1-512 bytes");
    return MU_EINVAL;
  }
  long long deadline = mu__etcd3_now_ms() + wait_ms;
  char *k = mu__etcd3_key_of(run_id, "kv/%s", key);
  struct mu__etcd3_txn t;
  mu__etcd3_txn_init(&t);
  cJSON_AddItemToArray(t.success, mu__etcd3_op_range(k, NULL, E3_ALL));
  cJSON *ans = NULL;
  int rc = mu__etcd3_txn_run(e, &t, &ans);
  struct keywait kw = {k, NULL};
  if (rc == 0) {
    const cJSON *kv = mu__etcd3_range_first(mu__etcd3_txn_range(ans, 0));
    if (kv != NULL) {
      kw.kv = cJSON_Duplicate(kv, 1);
    } else if (wait_ms > 0) {
      struct mu__etcd3_range rs[1] = {{k, NULL, 0}};
      rc = mu__etcd3_watch_ranges(e, rs, 1, mu__etcd3_header_rev(ans) + 1, deadline, key_events,
                                  &kw, NULL);
      if (rc == MU_ETIMEDOUT)
        mu__etcd3_say(e, "key '%s' did not appear within %ld ms (kv_timeout)", key, wait_ms);
    } else {
      mu__etcd3_say(e, "no key '%s' in run '%s' (no_such_key)", key, run_id);
      rc = MU_ENOENT;
    }
  }
  if (rc == 0 && kw.kv != NULL)
    *val = mu__etcd3_unb64(mu_json_get_str(kw.kv, "value"), len);
  cJSON_Delete(kw.kv);
  cJSON_Delete(ans);
  mu_free(k);
  return rc;
}

int mu_etcd3_kv_add(struct mu_etcd3 *e, const char *run_id, const char *key, long delta,
                    long *value)
{
  e->errmsg[0] = '\0';
  if (!mu__etcd3_valid_id(run_id) || key == NULL || key[0] == '\0' || strlen(key) > 512) {
    mu__etcd3_say(e, "bad KV add: keys are 1-512 bytes");
    return MU_EINVAL;
  }
  char *k = mu__etcd3_key_of(run_id, "kv/%s", key);
  int rc = 0;
  for (;;) { /* read, add, write if nobody wrote meanwhile */
    struct mu__etcd3_txn t;
    mu__etcd3_txn_init(&t);
    cJSON_AddItemToArray(t.success, mu__etcd3_op_range(k, NULL, E3_ALL));
    cJSON *ans = NULL;
    rc = mu__etcd3_txn_run(e, &t, &ans);
    if (rc != 0)
      break;
    const cJSON *kv = mu__etcd3_range_first(mu__etcd3_txn_range(ans, 0));
    long long mod = kv != NULL ? mu__etcd3_int(kv, "mod_revision") : 0;
    char *v = mu__etcd3_unb64(kv != NULL ? mu_json_get_str(kv, "value") : "", NULL);
    cJSON_Delete(ans);
    char *endp = NULL;
    long long cur = strtoll(v, &endp, 10);
    int bad = v[0] != '\0' && (endp == NULL || *endp != '\0');
    mu_free(v);
    if (bad) {
      mu__etcd3_say(e, "key '%s' does not hold an integer (not_a_counter)", key);
      rc = MU_EINVAL;
      break;
    }
    char nv[32];
    snprintf(nv, sizeof(nv), "%lld", cur + delta);
    mu__etcd3_txn_init(&t);
    cJSON_AddItemToArray(t.compare, mod > 0 ? mu__etcd3_cmp(k, NULL, "MOD", "EQUAL", mod)
                                            : mu__etcd3_cmp(k, NULL, "CREATE", "EQUAL", 0));
    cJSON_AddItemToArray(t.success, mu__etcd3_op_put(k, nv, strlen(nv), NULL));
    rc = mu__etcd3_txn_run(e, &t, &ans);
    int ok = rc == 0 && mu__etcd3_txn_ok(ans);
    cJSON_Delete(ans);
    if (rc != 0)
      break;
    if (ok) {
      if (value != NULL)
        *value = (long)(cur + delta);
      break;
    }
  }
  mu_free(k);
  return rc;
}

int mu_etcd3_kv_delete(struct mu_etcd3 *e, const char *run_id, const char *key)
{
  e->errmsg[0] = '\0';
  if (!mu__etcd3_valid_id(run_id) || key == NULL || key[0] == '\0' || strlen(key) > 512) {
    mu__etcd3_say(e, "bad KV delete: keys are 1-512 bytes");
    return MU_EINVAL;
  }
  char *k = mu__etcd3_key_of(run_id, "kv/%s", key);
  struct mu__etcd3_txn t;
  mu__etcd3_txn_init(&t);
  cJSON_AddItemToArray(t.success, mu__etcd3_op_del(k, NULL));
  cJSON *ans = NULL;
  int rc = mu__etcd3_txn_run(e, &t, &ans);
  const cJSON *d = cJSON_GetObjectItemCaseSensitive(
      cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(ans, "responses"), 0),
      "response_delete_range");
  if (rc == 0 && mu__etcd3_int(d, "deleted") == 0) {
    mu__etcd3_say(e, "no key '%s' in run '%s' (no_such_key)", key, run_id);
    rc = MU_ENOENT;
  }
  cJSON_Delete(ans);
  mu_free(k);
  return rc;
}
