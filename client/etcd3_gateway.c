/* The etcd v3 backend: base64 and the JSON of etcd's gateway (etcd3_int.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <openssl/evp.h>

#include "muster/errno.h"

#include "alloc.h"
#include "buf.h"
#include "etcd3_int.h"
#include "json.h"

/* ---------------------------------------------------------------------------------------------
 * Base64 and JSON pieces of etcd's gateway
 */

char *mu__etcd3_b64(const void *p, size_t n)
{
  char *out = mu_malloc(4 * ((n + 2) / 3) + 1);
  EVP_EncodeBlock((unsigned char *)out, p, (int)n);
  return out;
}

/* Ownership: the result is NUL-terminated, the caller's. */
char *mu__etcd3_unb64(const char *s, size_t *len)
{
  size_t n = s != NULL ? strlen(s) : 0;
  char *out = mu_malloc(n / 4 * 3 + 4);
  int got = n > 0 ? EVP_DecodeBlock((unsigned char *)out, (const unsigned char *)s, (int)n) : 0;
  if (got < 0)
    got = 0;
  while (n > 0 && s[n - 1] == '=' && got > 0) {
    got--;
    n--;
  }
  out[got] = '\0';
  if (len != NULL)
    *len = (size_t)got;
  return out;
}

/* etcd's int64 fields are strings, absent when 0. */
long long mu__etcd3_int(const cJSON *o, const char *name)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
  if (cJSON_IsString(v))
    return strtoll(v->valuestring, NULL, 10);
  if (cJSON_IsNumber(v))
    return (long long)v->valuedouble;
  return 0;
}

void mu__etcd3_add_b64(cJSON *o, const char *name, const void *p, size_t n)
{
  char *s = mu__etcd3_b64(p, n);
  cJSON_AddStringToObject(o, name, s);
  mu_free(s);
}

void mu__etcd3_add_ll(cJSON *o, const char *name, long long v)
{
  char s[32];
  snprintf(s, sizeof(s), "%lld", v);
  cJSON_AddStringToObject(o, name, s);
}

/* The end of the range of every key that starts with prefix. Ownership: caller's. */
char *mu__etcd3_prefix_end(const char *prefix)
{
  char *end = mu_strdup(prefix);
  size_t n = strlen(end);
  end[n - 1]++;
  return end;
}

cJSON *mu__etcd3_op_range(const char *key, const char *end, int how)
{
  cJSON *op = cJSON_CreateObject(), *r = cJSON_AddObjectToObject(op, "request_range");
  mu__etcd3_add_b64(r, "key", key, strlen(key));
  if (end != NULL)
    mu__etcd3_add_b64(r, "range_end", end, strlen(end));
  if (how == E3_COUNT)
    cJSON_AddTrueToObject(r, "count_only");
  if (how == E3_KEYS)
    cJSON_AddTrueToObject(r, "keys_only");
  return op;
}

cJSON *mu__etcd3_op_prefix(const char *prefix, int how)
{
  char *end = mu__etcd3_prefix_end(prefix);
  cJSON *op = mu__etcd3_op_range(prefix, end, how);
  mu_free(end);
  return op;
}

cJSON *mu__etcd3_op_put(const char *key, const void *val, size_t n, const char *lease)
{
  cJSON *op = cJSON_CreateObject(), *r = cJSON_AddObjectToObject(op, "request_put");
  mu__etcd3_add_b64(r, "key", key, strlen(key));
  mu__etcd3_add_b64(r, "value", val, n);
  if (lease != NULL && lease[0] != '\0')
    cJSON_AddStringToObject(r, "lease", lease);
  return op;
}

cJSON *mu__etcd3_op_del(const char *key, const char *end)
{
  cJSON *op = cJSON_CreateObject(), *r = cJSON_AddObjectToObject(op, "request_delete_range");
  mu__etcd3_add_b64(r, "key", key, strlen(key));
  if (end != NULL)
    mu__etcd3_add_b64(r, "range_end", end, strlen(end));
  return op;
}

/* target "MOD" or "CREATE" compared with rev; end != NULL compares every key of the range. */
cJSON *mu__etcd3_cmp(const char *key, const char *end, const char *target, const char *result,
                     long long rev)
{
  cJSON *c = cJSON_CreateObject();
  mu__etcd3_add_b64(c, "key", key, strlen(key));
  if (end != NULL)
    mu__etcd3_add_b64(c, "range_end", end, strlen(end));
  cJSON_AddStringToObject(c, "target", target);
  cJSON_AddStringToObject(c, "result", result);
  mu__etcd3_add_ll(c, strcmp(target, "MOD") == 0 ? "mod_revision" : "create_revision", rev);
  return c;
}

void mu__etcd3_txn_init(struct mu__etcd3_txn *t)
{
  t->root = cJSON_CreateObject();
  t->compare = cJSON_AddArrayToObject(t->root, "compare");
  t->success = cJSON_AddArrayToObject(t->root, "success");
  t->failure = cJSON_AddArrayToObject(t->root, "failure");
}

/* The range answer of responses[i] of a txn answer (NULL if not one). */
const cJSON *mu__etcd3_txn_range(const cJSON *ans, int i)
{
  const cJSON *rs = cJSON_GetObjectItemCaseSensitive(ans, "responses");
  return cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(rs, i), "response_range");
}

const cJSON *mu__etcd3_range_first(const cJSON *range)
{
  return cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(range, "kvs"), 0);
}

long long mu__etcd3_header_rev(const cJSON *ans)
{
  return mu__etcd3_int(cJSON_GetObjectItemCaseSensitive(ans, "header"), "revision");
}

/* The value of kv as a parsed JSON object (NULL if none). Ownership: caller's. */
cJSON *mu__etcd3_kv_json(const cJSON *kv)
{
  if (kv == NULL)
    return NULL;
  size_t n = 0;
  char *v = mu__etcd3_unb64(mu_json_get_str(kv, "value"), &n);
  cJSON *j = cJSON_ParseWithLength(v, n);
  mu_free(v);
  return j;
}

cJSON *mu__etcd3_range_value(const cJSON *txn_answer, int i)
{
  return mu__etcd3_kv_json(mu__etcd3_range_first(mu__etcd3_txn_range(txn_answer, i)));
}
