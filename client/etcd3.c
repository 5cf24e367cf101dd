/* The etcd v3 backend's operations (client_int.h): each call of include/muster/client.h is the
 * same call of the etcd v3 rendezvous (etcd3_int.h), whose words become the client's. Its row
 * in backends.c: --rdzv-backend etcd-v3, endpoints etcd-v3://H1:P,H2:P. */
#include <stdio.h>
#include <string.h>

#include "muster/client.h"

#include "client_int.h"
#include "etcd3_int.h"

static struct mu_etcd3 *etcd_of(const struct mu_client *c)
{
  return c->impl;
}

/* The call's result, with the backend's words in the client's message when it failed. */
static int said(struct mu_client *c, int rc)
{
  if (rc != 0)
    mu__client_say(c, "%s", mu_etcd3_errmsg(etcd_of(c)));
  return rc;
}

static int etcd3_open(struct mu_client *c, const char *endpoint)
{
  struct mu_etcd3 *e = NULL;
  int rc = mu_etcd3_new(endpoint, &e, c->errmsg, sizeof(c->errmsg));
  if (rc != 0)
    return rc;
  mu_etcd3_set_timeout(e, c->timeout_ms);
  mu_etcd3_set_cancel_fd(e, c->cancel_fd);
  c->impl = e;
  return 0;
}

static void etcd3_close(struct mu_client *c)
{
  mu_etcd3_free(etcd_of(c));
  c->impl = NULL;
}

static void etcd3_set_timeout(struct mu_client *c, long ms)
{
  mu_etcd3_set_timeout(etcd_of(c), ms);
}

static void etcd3_set_cancel_fd(struct mu_client *c, int fd)
{
  mu_etcd3_set_cancel_fd(etcd_of(c), fd);
}

static int etcd3_local_addr(const struct mu_client *c, char *out, size_t n)
{
  return mu_etcd3_local_addr(etcd_of(c), out, n);
}

static int etcd3_join(struct mu_client *c, const char *run_id, const struct mu_join_opts *o,
                      struct mu_round *out)
{
  return said(c, mu_etcd3_join(etcd_of(c), run_id, o, out));
}

static int etcd3_heartbeat(struct mu_client *c, const char *run_id, const char *node_id,
                           long *round, int *waiting)
{
  return said(c, mu_etcd3_heartbeat(etcd_of(c), run_id, node_id, round, waiting));
}

static int etcd3_watch(struct mu_client *c, const char *run_id, const char *node_id, long round,
                       long timeout_ms, enum mu_watch_event *ev, int *waiting)
{
  return said(c, mu_etcd3_watch(etcd_of(c), run_id, node_id, round, timeout_ms, ev, waiting));
}

static int etcd3_run_info(struct mu_client *c, const char *run_id, struct mu_run_info *out)
{
  return said(c, mu_etcd3_run_info(etcd_of(c), run_id, out));
}

static int etcd3_leave(struct mu_client *c, const char *run_id, const char *node_id, int succeeded,
                       const char *reason)
{
  return said(c, mu_etcd3_leave(etcd_of(c), run_id, node_id, succeeded, reason));
}

static int etcd3_end(struct mu_client *c, const char *run_id, int succeeded, const char *reason)
{
  return said(c, mu_etcd3_end(etcd_of(c), run_id, succeeded, reason));
}

static int etcd3_barrier(struct mu_client *c, const char *run_id, const char *name, int count,
                         const char *id, long timeout_ms, long *generation)
{
  return said(c, mu_etcd3_barrier(etcd_of(c), run_id, name, count, id, timeout_ms, generation));
}

static int etcd3_kv_put(struct mu_client *c, const char *run_id, const char *key, const void *val,
                        size_t len, long *version)
{
  return said(c, mu_etcd3_kv_put(etcd_of(c), run_id, key, val, len, version));
}

static int etcd3_kv_get(struct mu_client *c, const char *run_id, const char *key, long wait_ms,
                        char **val, size_t *len)
{
  return said(c, mu_etcd3_kv_get(etcd_of(c), run_id, key, wait_ms, val, len));
}

static int etcd3_kv_add(struct mu_client *c, const char *run_id, const char *key, long delta,
                        long *value)
{
  return said(c, mu_etcd3_kv_add(etcd_of(c), run_id, key, delta, value));
}

static int etcd3_kv_delete(struct mu_client *c, const char *run_id, const char *key)
{
  return said(c, mu_etcd3_kv_delete(etcd_of(c), run_id, key));
}

static int etcd3_report(struct mu_client *c, const char *run_id, const char *node_id, long round,
                        enum mu_report_event ev, const char *reason, struct mu_report_answer *out)
{
  return said(c, mu_etcd3_report(etcd_of(c), run_id, node_id, round, ev, reason, out));
}

static int etcd3_health(struct mu_client *c, const char *run_id, const struct mu_join_opts *o,
                        int healthy, const char *output, long ttl_ms, int *unhealthy)
{
  (void)ttl_ms; /* the record lives as long as the agent's lease */
  return said(c, mu_etcd3_health(etcd_of(c), run_id, o, healthy, output, unhealthy));
}

static int etcd3_runs_json(struct mu_client *c, const char *run_id, cJSON **out)
{
  struct mu_etcd3 *e = etcd_of(c);
  return said(c, run_id != NULL ? mu_etcd3_run_json(e, run_id, out) : mu_etcd3_runs_json(e, out));
}

/* etcd keeps no run events: a change is a new revision of the runs' keys. */
static int etcd3_changes(struct mu_client *c, const char *run_id, long long *cursor,
                         long timeout_ms, cJSON **events)
{
  struct mu_etcd3 *e = etcd_of(c);
  *events = NULL;
  int rc = *cursor >= 0 ? mu_etcd3_wait_change(e, run_id, *cursor, timeout_ms) : 0;
  if (rc == 0)
    rc = mu_etcd3_revision(e, cursor);
  return said(c, rc);
}

const struct mu_client_ops mu__client_etcd3_ops = {
    .open = etcd3_open,
    .close = etcd3_close,
    .display = mu_etcd3_display,
    .set_timeout = etcd3_set_timeout,
    .set_cancel_fd = etcd3_set_cancel_fd,
    .local_addr = etcd3_local_addr,
    .join = etcd3_join,
    .heartbeat = etcd3_heartbeat,
    .watch = etcd3_watch,
    .run_info = etcd3_run_info,
    .leave = etcd3_leave,
    .end = etcd3_end,
    .barrier = etcd3_barrier,
    .kv_put = etcd3_kv_put,
    .kv_get = etcd3_kv_get,
    .kv_add = etcd3_kv_add,
    .kv_delete = etcd3_kv_delete,
    .runs_json = etcd3_runs_json,
    .changes = etcd3_changes,
    .report = etcd3_report,
    .health = etcd3_health,
};
