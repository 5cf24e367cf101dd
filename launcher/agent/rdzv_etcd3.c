/* The agent's rendezvous on an etcd v3 cluster (common/etcd3.c, through etcd's JSON gateway):
 * the same rounds, ranks, leases and events as musterd's /v1 (docs/rendezvous.md, "The etcd v3
 * backend"). The endpoint is "etcd-v3://M[,M...]" or the members alone, each HOST:PORT or
 * http(s)://HOST:PORT. */
#include <stddef.h>

#include "muster/client.h"

#include "alloc.h"
#include "etcd3.h"
#include "rdzv_backend.h"

struct etcd3_rdzv {
  struct mu_rdzv base; /* first: a struct mu_rdzv * is a struct etcd3_rdzv * */
  struct mu_etcd3 *e;
};

static struct mu_etcd3 *etcd_of(const struct mu_rdzv *r)
{
  return ((const struct etcd3_rdzv *)r)->e;
}

static int said(const struct mu_rdzv *r, int rc, struct mu_buf *err)
{
  if (rc != 0)
    mu_buf_puts(err, mu_etcd3_errmsg(etcd_of(r)));
  return rc;
}

static int etcd3_open(const char *endpoint, struct mu_rdzv **out, struct mu_buf *err)
{
  struct mu_etcd3 *e = NULL;
  char msg[512];
  *out = NULL;
  int rc = mu_etcd3_new(endpoint, &e, msg, sizeof(msg));
  if (rc != 0) {
    mu_buf_puts(err, msg);
    return rc;
  }
  struct etcd3_rdzv *m = mu_calloc(1, sizeof(*m));
  m->base.ops = &mu_rdzv_etcd3;
  m->e = e;
  *out = &m->base;
  return 0;
}

static void etcd3_close(struct mu_rdzv *r)
{
  if (r == NULL)
    return;
  mu_etcd3_free(etcd_of(r));
  mu_free(r);
}

static void etcd3_set_timeout(struct mu_rdzv *r, long ms)
{
  mu_etcd3_set_timeout(etcd_of(r), ms);
}

static void etcd3_set_cancel_fd(struct mu_rdzv *r, int fd)
{
  mu_etcd3_set_cancel_fd(etcd_of(r), fd);
}

static int etcd3_local_addr(const struct mu_rdzv *r, char *out, size_t n)
{
  return mu_etcd3_local_addr(etcd_of(r), out, n);
}

static int etcd3_join(struct mu_rdzv *r, const char *run_id, const struct mu_join_opts *o,
                      struct mu_round *out, struct mu_buf *err)
{
  return said(r, mu_etcd3_join(etcd_of(r), run_id, o, out), err);
}

static int etcd3_heartbeat(struct mu_rdzv *r, const char *run_id, const char *node_id,
                           struct mu_buf *err)
{
  return said(r, mu_etcd3_heartbeat(etcd_of(r), run_id, node_id, NULL, NULL), err);
}

static int etcd3_watch(struct mu_rdzv *r, const char *run_id, const char *node_id, long round,
                       long timeout_ms, enum mu_watch_event *ev, struct mu_buf *err)
{
  return said(r, mu_etcd3_watch(etcd_of(r), run_id, node_id, round, timeout_ms, ev, NULL), err);
}

static int etcd3_leave(struct mu_rdzv *r, const char *run_id, const char *node_id, int succeeded,
                       const char *reason, struct mu_buf *err)
{
  return said(r, mu_etcd3_leave(etcd_of(r), run_id, node_id, succeeded, reason), err);
}

static int etcd3_shutdown(struct mu_rdzv *r, const char *run_id, const char *reason,
                          struct mu_buf *err)
{
  return said(r, mu_etcd3_end(etcd_of(r), run_id, 0, reason), err);
}

static int etcd3_run_info(struct mu_rdzv *r, const char *run_id, struct mu_run_info *out,
                          struct mu_buf *err)
{
  return said(r, mu_etcd3_run_info(etcd_of(r), run_id, out), err);
}

static int etcd3_barrier(struct mu_rdzv *r, const char *run_id, const char *name, int count,
                         const char *id, long timeout_ms, long *generation, struct mu_buf *err)
{
  return said(r, mu_etcd3_barrier(etcd_of(r), run_id, name, count, id, timeout_ms, generation),
              err);
}

static int etcd3_kv_put(struct mu_rdzv *r, const char *run_id, const char *key, const void *val,
                        size_t len, struct mu_buf *err)
{
  return said(r, mu_etcd3_kv_put(etcd_of(r), run_id, key, val, len, NULL), err);
}

static int etcd3_kv_get(struct mu_rdzv *r, const char *run_id, const char *key, long wait_ms,
                        char **val, size_t *len, struct mu_buf *err)
{
  return said(r, mu_etcd3_kv_get(etcd_of(r), run_id, key, wait_ms, val, len), err);
}

const struct mu_rdzv_ops mu_rdzv_etcd3 = {
    .name = "etcd-v3",
    .open = etcd3_open,
    .close = etcd3_close,
    .set_timeout = etcd3_set_timeout,
    .set_cancel_fd = etcd3_set_cancel_fd,
    .local_addr = etcd3_local_addr,
    .join = etcd3_join,
    .heartbeat = etcd3_heartbeat,
    .watch = etcd3_watch,
    .leave = etcd3_leave,
    .shutdown = etcd3_shutdown,
    .run_info = etcd3_run_info,
    .barrier = etcd3_barrier,
    .kv_put = etcd3_kv_put,
    .kv_get = etcd3_kv_get,
};
