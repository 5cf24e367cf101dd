/* The etcd v3 backend's lease (etcd3_int.h): granted by join, kept alive by a thread with its
 * own connections. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "muster/errno.h"

#include "alloc.h"
#include "buf.h"
#include "etcd3_int.h"
#include "json.h"

/* ---------------------------------------------------------------------------------------------
 * Leases: granted by join, kept alive by a thread with its own connections
 */

struct mu_etcd3_keeper {
  uv_thread_t thread;
  int pipe[2];
  struct mu_etcd3 *client;
  long period_ms, ttl_ms;
  uv_mutex_t mu; /* guards what follows: the main thread reads and sets it */
  char lease[32];
  char *key, *val; /* this node's key and value, put again under a new lease if revoked */
};

static int grant(struct mu_etcd3 *e, long ttl_ms, char *id_out, size_t n, long *granted_ms);

/* Renews lease once. Returns: 0 with *ttl the TTL left (0: the lease is gone), or an error. */
static int keepalive_once(struct mu_etcd3 *e, const char *lease, long *ttl)
{
  cJSON *req = cJSON_CreateObject();
  cJSON_AddStringToObject(req, "ID", lease);
  cJSON *ans = NULL;
  int rc = mu__etcd3_call(e, "/v3/lease/keepalive", req, e->timeout_ms, &ans);
  cJSON_Delete(req);
  if (rc == 0) {
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(ans, "result");
    *ttl = (long)mu__etcd3_int(res, "TTL");
    if (res == NULL) {
      rc = MU_EPROTO;
      mu__etcd3_say(e, "etcd's keep-alive answer has no result");
    }
  }
  cJSON_Delete(ans);
  return rc;
}

/* Renews lease. A lease is gone only when a majority of the members says so: a leader that
 * was stopped and resumes believes, until it hears of its successor, that every lease ran out
 * while it slept. Returns: 0 with *ttl the TTL left (0: gone), or an error. */
int mu__etcd3_keepalive(struct mu_etcd3 *e, const char *lease, long *ttl)
{
  size_t gone = 0;
  for (size_t i = 0; i < e->nm; i++) {
    int rc = keepalive_once(e, lease, ttl);
    if (rc != 0 || *ttl > 0)
      return rc;
    if (++gone > e->nm / 2)
      return 0;
    e->cur = (e->cur + 1) % e->nm;
  }
  return 0;
}

/* The lease was revoked although it was renewed in time (etcd 3.4: a leader that was stopped
 * revokes, when it resumes, the leases it thinks expired while it slept, and its proposal is
 * forwarded to the new leader). Grants a new one and puts this node's key again if it is gone,
 * so that the others, which wait ETCD3_LOST_GRACE_MS before they call a vanished member lost,
 * see it back.
 * Returns: 0 or an error (tried again at the next renewal). */
static int keeper_revive(struct mu_etcd3_keeper *k)
{
  char id[32];
  long ms = 0;
  int rc = grant(k->client, k->ttl_ms, id, sizeof(id), &ms);
  if (rc != 0)
    return rc;
  uv_mutex_lock(&k->mu);
  snprintf(k->lease, sizeof(k->lease), "%s", id);
  char *key = k->key ? mu_strdup(k->key) : NULL, *val = k->val ? mu_strdup(k->val) : NULL;
  uv_mutex_unlock(&k->mu);
  if (key != NULL) {
    cJSON *t = cJSON_CreateObject(), *ans = NULL;
    cJSON_AddItemToArray(cJSON_AddArrayToObject(t, "compare"),
                         mu__etcd3_cmp(key, NULL, "CREATE", "EQUAL", 0));
    cJSON_AddItemToArray(cJSON_AddArrayToObject(t, "success"),
                         mu__etcd3_op_put(key, val, strlen(val), id));
    rc = mu__etcd3_call(k->client, "/v3/kv/txn", t, k->client->timeout_ms, &ans);
    cJSON_Delete(t);
    cJSON_Delete(ans);
  }
  mu_free(key);
  mu_free(val);
  return rc;
}

static void keeper_main(void *arg)
{
  struct mu_etcd3_keeper *k = arg;
  struct pollfd p = {k->pipe[0], POLLIN, 0};
  long wait = k->period_ms;
  while (poll(&p, 1, (int)wait) == 0) {
    long ttl = 0;
    char lease[32];
    uv_mutex_lock(&k->mu);
    snprintf(lease, sizeof(lease), "%s", k->lease);
    uv_mutex_unlock(&k->mu);
    int rc = mu__etcd3_keepalive(k->client, lease, &ttl);
    if (rc == 0 && ttl <= 0)
      rc = keeper_revive(k);
    wait = rc == 0 ? k->period_ms : 20; /* a failed renewal is tried again at once */
  }
}

/* This node's lease now (the keeper may have replaced it). */
void mu__etcd3_lease_now(struct mu_etcd3 *e, char *out, size_t n)
{
  out[0] = '\0';
  if (e->keeper == NULL)
    return;
  uv_mutex_lock(&e->keeper->mu);
  snprintf(out, n, "%s", e->keeper->lease);
  uv_mutex_unlock(&e->keeper->mu);
}

/* Tells the keeper this node's key and value (to put again if its lease is revoked). */
void mu__etcd3_keeper_set_key(struct mu_etcd3 *e, const char *key, const char *val)
{
  if (e->keeper == NULL)
    return;
  uv_mutex_lock(&e->keeper->mu);
  mu_free(e->keeper->key);
  mu_free(e->keeper->val);
  e->keeper->key = key ? mu_strdup(key) : NULL;
  e->keeper->val = val ? mu_strdup(val) : NULL;
  uv_mutex_unlock(&e->keeper->mu);
}

void mu__etcd3_keeper_stop(struct mu_etcd3 *e)
{
  struct mu_etcd3_keeper *k = e->keeper;
  if (k == NULL)
    return;
  ssize_t w = write(k->pipe[1], "x", 1);
  (void)w;
  uv_thread_join(&k->thread);
  close(k->pipe[0]);
  close(k->pipe[1]);
  mu_etcd3_free(k->client);
  uv_mutex_destroy(&k->mu);
  mu_free(k->key);
  mu_free(k->val);
  mu_free(k);
  e->keeper = NULL;
}

static int keeper_start(struct mu_etcd3 *e)
{
  struct mu_etcd3_keeper *k = mu_calloc(1, sizeof(*k));
  char err[256];
  if (pipe(k->pipe) != 0) {
    mu_free(k);
    mu__etcd3_say(e, "cannot create a pipe: %s", strerror(errno));
    return MU_EINVAL;
  }
  fcntl(k->pipe[0], F_SETFD, FD_CLOEXEC);
  fcntl(k->pipe[1], F_SETFD, FD_CLOEXEC);
  mu_etcd3_new(e->spec, &k->client, err, sizeof(err));
  k->client->cur = (e->cur + 1) % e->nm; /* renewals on another member than the calls */
  snprintf(k->lease, sizeof(k->lease), "%s", e->lease);
  uv_mutex_init(&k->mu);
  k->ttl_ms = e->ttl_ms;
  k->period_ms = e->ttl_ms / 3 > 100 ? e->ttl_ms / 3 : 100;
  /* a member that does not answer (stopped, or forwarding to a leader that is gone) gets a
   * sixth of the TTL, so that all three of a cluster are tried before the lease runs out */
  mu_etcd3_set_timeout(k->client, k->period_ms);
  k->client->attempt_ms = k->period_ms / 2 > 50 ? k->period_ms / 2 : 50;
  mu_etcd3_set_cancel_fd(k->client, k->pipe[0]);
  if (uv_thread_create(&k->thread, keeper_main, k) != 0) {
    close(k->pipe[0]);
    close(k->pipe[1]);
    mu_etcd3_free(k->client);
    uv_mutex_destroy(&k->mu);
    mu_free(k);
    mu__etcd3_say(e, "cannot start the lease keeper thread");
    return MU_EINVAL;
  }
  e->keeper = k;
  return 0;
}

/* Grants a lease of ttl_ms (whole seconds, at least 1). */
static int grant(struct mu_etcd3 *e, long ttl_ms, char *id_out, size_t n, long *granted_ms)
{
  cJSON *req = cJSON_CreateObject();
  mu__etcd3_add_ll(req, "TTL", ttl_ms > 1000 ? (ttl_ms + 999) / 1000 : 1);
  cJSON *ans = NULL;
  int rc = mu__etcd3_call(e, "/v3/lease/grant", req, e->timeout_ms, &ans);
  cJSON_Delete(req);
  const char *id = mu_json_get_str(ans, "ID");
  if (rc == 0 && id == NULL) {
    mu__etcd3_say(e, "etcd granted no lease: %s", mu_json_get_str(ans, "error"));
    rc = MU_EPROTO;
  }
  if (rc == 0) {
    snprintf(id_out, n, "%s", id);
    *granted_ms = (long)mu__etcd3_int(ans, "TTL") * 1000;
    if (*granted_ms <= 0)
      *granted_ms = ttl_ms;
  }
  cJSON_Delete(ans);
  return rc;
}

/* Grants this node's lease and starts keeping it alive; keeps the one it has. */
int mu__etcd3_ensure_lease(struct mu_etcd3 *e, long ttl_ms)
{
  if (e->keeper != NULL)
    return 0;
  int rc = grant(e, ttl_ms, e->lease, sizeof(e->lease), &e->ttl_ms);
  if (rc == 0)
    rc = keeper_start(e);
  return rc;
}

void mu__etcd3_lease_revoke(struct mu_etcd3 *e)
{
  mu__etcd3_lease_now(e, e->lease, sizeof(e->lease));
  mu__etcd3_keeper_stop(e);
  if (e->lease[0] == '\0')
    return;
  cJSON *req = cJSON_CreateObject(), *ans = NULL;
  cJSON_AddStringToObject(req, "ID", e->lease);
  mu__etcd3_call(e, "/v3/lease/revoke", req, e->timeout_ms, &ans);
  cJSON_Delete(req);
  cJSON_Delete(ans);
  e->lease[0] = '\0';
  mu_free(e->my_key);
  e->my_key = NULL;
  e->level = -1;
}
