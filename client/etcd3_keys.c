/* The etcd v3 backend: the keys of a run (etcd3_int.h lists them). */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "muster/errno.h"

#include "alloc.h"
#include "buf.h"
#include "client_int.h"
#include "etcd3_int.h"
#include "json.h"

/* ---------------------------------------------------------------------------------------------
 * Keys of a run
 */

int mu__etcd3_valid_id(const char *s)
{
  if (s == NULL || *s == '\0' || strlen(s) > 256)
    return 0;
  for (; *s; s++)
    if (*s <= ' ' || *s > '~' || *s == '"' || *s == '\\' || *s == '/')
      return 0;
  return 1;
}

char *mu__etcd3_key_of(const char *run, const char *fmt, ...)
{
  struct mu_buf b = MU_BUF_INIT(SIZE_MAX);
  mu_buf_printf(&b, "/muster/%s/", run);
  va_list ap;
  va_start(ap, fmt);
  mu_buf_vprintf(&b, fmt, ap);
  va_end(ap);
  return mu_buf_detach(&b);
}

/* The end of a run: MU_ECLOSED / MU_ESHUT with the reason in errmsg, 0 while open. */
int mu__etcd3_end_of(struct mu_etcd3 *e, const char *run, const cJSON *end_range)
{
  cJSON *j = mu__etcd3_kv_json(mu__etcd3_range_first(end_range));
  if (j == NULL)
    return 0;
  const char *state = mu_json_get_str(j, "state"), *reason = mu_json_get_str(j, "reason");
  int shut = state != NULL && strcmp(state, "shut") == 0;
  mu__etcd3_say(e, "run '%s' was %s%s%s", run, shut ? "shut down" : "closed", reason ? ": " : "",
                reason ? reason : "");
  cJSON_Delete(j);
  return shut ? MU_ESHUT : MU_ECLOSED;
}

long mu__etcd3_round_no(const cJSON *round)
{
  return round != NULL ? mu_json_get_long(round, "round", 0) : 0;
}

/* The index of node id in a round's members, -1 when absent. */
int mu__etcd3_member_index(const cJSON *round, const char *id)
{
  const cJSON *ms = cJSON_GetObjectItemCaseSensitive(round, "members"), *m;
  int i = 0;
  cJSON_ArrayForEach(m, ms)
  {
    const char *mid = mu_json_get_str(m, "id");
    if (mid != NULL && strcmp(mid, id) == 0)
      return i;
    i++;
  }
  return -1;
}

/* The node id at the end of a key n/<L>/<id>. */
const char *mu__etcd3_id_of_key(const char *key)
{
  const char *s = strrchr(key, '/');
  return s != NULL ? s + 1 : key;
}

/* The bucket of a node id: FNV-1a, the same on every node. */
unsigned mu__etcd3_bucket_of(const char *id)
{
  uint32_t h = 2166136261u;
  for (; *id; id++)
    h = (h ^ (unsigned char)*id) * 16777619u;
  return h % ETCD3_BUCKETS;
}

/* Adds the members of round (from m/<R>) to it when c/round left them out.
 * Returns: 0, or an MU_E* code (errmsg says). */
int mu__etcd3_attach_members(struct mu_etcd3 *e, const char *run, cJSON *round)
{
  if (round == NULL || cJSON_GetObjectItemCaseSensitive(round, "members") != NULL)
    return 0;
  char *mk = mu__etcd3_key_of(run, "m/" ETCD3_LEVEL, mu__etcd3_round_no(round));
  struct mu__etcd3_txn t;
  mu__etcd3_txn_init(&t);
  cJSON_AddItemToArray(t.success, mu__etcd3_op_range(mk, NULL, E3_ALL));
  cJSON *ans = NULL;
  int rc = mu__etcd3_txn_run(e, &t, &ans);
  cJSON *j = rc == 0 ? mu__etcd3_kv_json(mu__etcd3_range_first(mu__etcd3_txn_range(ans, 0))) : NULL;
  cJSON *ms = cJSON_DetachItemFromObjectCaseSensitive(j, "members");
  if (rc == 0 && !cJSON_IsArray(ms)) {
    mu__etcd3_say(e, "run '%s': round %ld has no member list (m/%ld missing)", run,
                  mu__etcd3_round_no(round), mu__etcd3_round_no(round));
    rc = MU_EPROTO;
  }
  if (rc == 0) {
    cJSON_AddItemToObject(round, "members", ms);
    ms = NULL;
  }
  cJSON_Delete(ms);
  cJSON_Delete(j);
  cJSON_Delete(ans);
  mu_free(mk);
  return rc;
}

/* ---------------------------------------------------------------------------------------------
 * The round a join returns
 */

/* Every number of a round's value is checked for its range before it becomes an int: a value
 * in etcd is anybody's who may write /muster/ (mu__round_check() then checks them together). */
#define ROUND_WHAT "invalid round in etcd"

static int round_long(struct mu_etcd3 *e, const cJSON *o, const char *name, int required, long dflt,
                      long lo, long hi, long *out)
{
  return mu__answer_long(o, ROUND_WHAT, name, required, dflt, lo, hi, out, e->errmsg,
                         sizeof(e->errmsg));
}

/* Item i of a bucket entry [id, rank, offset, lws] as a whole number in [lo, hi]. */
static int entry_int(struct mu_etcd3 *e, const cJSON *m, int i, const char *name, long lo, int *out)
{
  const cJSON *v = cJSON_GetArrayItem(m, i);
  double d = cJSON_IsNumber(v) ? v->valuedouble : -1.0;
  if (!cJSON_IsNumber(v) || d < (double)lo || d > (double)INT_MAX || d != floor(d)) {
    mu__etcd3_say(e, "%s: a bucket's %s is not a whole number from %ld to %d", ROUND_WHAT, name, lo,
                  INT_MAX);
    return MU_EPROTO;
  }
  *out = (int)d;
  return 0;
}

const cJSON *mu__etcd3_bucket_find(const cJSON *bucket, long r, const char *id)
{
  if (bucket == NULL || mu_json_get_long(bucket, "round", -1) != r)
    return NULL;
  const cJSON *m;
  cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(bucket, "m"))
  {
    const cJSON *mid = cJSON_GetArrayItem(m, 0);
    if (cJSON_IsString(mid) && strcmp(mid->valuestring, id) == 0)
      return m;
  }
  return NULL;
}

/* The fields every round's value has: round, ttl. */
static int round_head(struct mu_etcd3 *e, const char *run, const cJSON *round, struct mu_round *out)
{
  memset(out, 0, sizeof(*out));
  out->run_id = mu_strdup(run);
  long restarts = 0;
  int rc = round_long(e, round, "round", 1, 0, 1, LONG_MAX, &out->round);
  if (rc == 0)
    rc = round_long(e, round, "ttl", 0, ETCD3_TTL_MS_DEFAULT, 1, LONG_MAX, &out->lease_ttl_ms);
  if (rc == 0)
    rc = round_long(e, round, "restart_count", 0, 0, 0, INT_MAX, &restarts);
  if (rc == 0)
    rc = round_long(e, round, "max_restarts", 0, -1, -1, LONG_MAX, &out->max_restarts);
  out->restart_count = (int)restarts;
  return rc;
}

int mu__etcd3_fill_round_bucket(struct mu_etcd3 *e, const char *run, const cJSON *round,
                                const cJSON *entry, struct mu_round *out)
{
  const char *ma = mu_json_get_str(round, "master_addr");
  long nnodes = 0, world = 0, port = 0;
  int rc = round_head(e, run, round, out);
  out->master_addr = mu_strdup(ma != NULL ? ma : "");
  if (rc == 0)
    rc = round_long(e, round, "nnodes", 1, 0, 1, INT_MAX, &nnodes);
  if (rc == 0)
    rc = round_long(e, round, "world", 1, 0, 1, INT_MAX, &world);
  if (rc == 0)
    rc = round_long(e, round, "master_port", 0, 0, 0, 65535, &port);
  if (rc == 0)
    rc = entry_int(e, entry, 1, "node rank", 0, &out->node_rank);
  if (rc == 0)
    rc = entry_int(e, entry, 2, "rank offset", 0, &out->rank_offset);
  if (rc == 0)
    rc = entry_int(e, entry, 3, "local world size", 1, &out->local_world_size);
  out->nnodes = (int)nnodes;
  out->world_size = (int)world;
  out->master_port = (int)port;
  if (rc != 0)
    mu_round_release(out);
  return rc;
}

/* One member of a round's list into mm (at node rank i, rank offset *offset, which moves on). */
static int fill_member(struct mu_etcd3 *e, const cJSON *m, int i, long *offset,
                       struct mu_member *mm)
{
  long lws = 0;
  const char *id = mu_json_get_str(m, "id"), *addr = mu_json_get_str(m, "addr");
  mm->node_id = mu_strdup(id != NULL ? id : "");
  mm->addr = mu_strdup(addr != NULL ? addr : "");
  int rc = round_long(e, m, "lws", 0, 1, 1, INT_MAX, &lws);
  mm->local_world_size = (int)lws;
  mm->node_rank = i;
  mm->rank_offset = (int)*offset;
  *offset += lws;
  if (rc == 0 && *offset > INT_MAX) {
    mu__etcd3_say(e, "%s: the members' lws add up past %d workers", ROUND_WHAT, INT_MAX);
    rc = MU_EPROTO;
  }
  return rc;
}

int mu__etcd3_fill_round(struct mu_etcd3 *e, const char *run, const cJSON *round, int me,
                         struct mu_round *out)
{
  const cJSON *ms = cJSON_GetObjectItemCaseSensitive(round, "members"), *m;
  int rc = round_head(e, run, round, out), i = 0;
  long offset = 0, port = 0;
  out->nmembers = (size_t)cJSON_GetArraySize(ms);
  out->nnodes = (int)out->nmembers;
  out->members = mu_calloc(out->nmembers ? out->nmembers : 1, sizeof(*out->members));
  cJSON_ArrayForEach(m, ms)
  {
    struct mu_member *mm = &out->members[i];
    if (rc == 0)
      rc = fill_member(e, m, i, &offset, mm);
    if (rc == 0 && i == 0)
      rc = round_long(e, m, "port", 0, 0, 0, 65535, &port);
    if (i == me) {
      out->node_rank = i;
      out->rank_offset = mm->rank_offset;
      out->local_world_size = mm->local_world_size;
    }
    i++;
  }
  out->world_size = (int)offset;
  out->master_port = (int)port;
  out->master_addr =
      mu_strdup(out->nmembers > 0 && out->members[0].addr ? out->members[0].addr : "");
  if (rc != 0)
    mu_round_release(out);
  return rc;
}
