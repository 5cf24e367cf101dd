/* The agent's rendezvous on musterd's native /v1 API: each operation of rdzv_backend.h is one
 * call of the blocking client in include/muster/client.h, whose message goes to err. */
#include <stddef.h>

#include "muster/client.h"

#include "alloc.h"
#include "rdzv_backend.h"

struct musterd_rdzv {
  struct mu_rdzv base; /* first: a struct mu_rdzv * is a struct musterd_rdzv * */
  struct mu_client *client;
};

static struct mu_client *client_of(const struct mu_rdzv *r)
{
  return ((const struct musterd_rdzv *)r)->client;
}

/* The call's result, with the client's message in err when it failed. */
static int said(const struct mu_rdzv *r, int rc, struct mu_buf *err)
{
  if (rc != 0)
    mu_buf_puts(err, mu_client_errmsg(client_of(r)));
  return rc;
}

static int musterd_open(const char *endpoint, struct mu_rdzv **out, struct mu_buf *err)
{
  struct mu_client *c = NULL;
  *out = NULL;
  int rc = mu_client_new(endpoint, &c);
  if (rc != 0) {
    mu_buf_printf(err, "'%s' is not HOST:PORT", endpoint ? endpoint : "");
    return rc;
  }
  struct musterd_rdzv *m = mu_calloc(1, sizeof(*m));
  m->base.ops = &mu_rdzv_musterd;
  m->client = c;
  *out = &m->base;
  return 0;
}

static void musterd_close(struct mu_rdzv *r)
{
  if (r == NULL)
    return;
  mu_client_free(client_of(r));
  mu_free(r);
}

static void musterd_set_timeout(struct mu_rdzv *r, long ms)
{
  mu_client_set_timeout(client_of(r), ms);
}

static void musterd_set_cancel_fd(struct mu_rdzv *r, int fd)
{
  mu_client_set_cancel_fd(client_of(r), fd);
}

static int musterd_local_addr(const struct mu_rdzv *r, char *out, size_t n)
{
  return mu_client_local_addr(client_of(r), out, n);
}

static int musterd_join(struct mu_rdzv *r, const char *run_id, const struct mu_join_opts *o,
                        struct mu_round *out, struct mu_buf *err)
{
  return said(r, mu_client_join(client_of(r), run_id, o, out), err);
}

static int musterd_heartbeat(struct mu_rdzv *r, const char *run_id, const char *node_id,
                             struct mu_buf *err)
{
  return said(r, mu_client_heartbeat(client_of(r), run_id, node_id, NULL, NULL), err);
}

static int musterd_watch(struct mu_rdzv *r, const char *run_id, const char *node_id, long round,
                         long timeout_ms, enum mu_watch_event *ev, struct mu_buf *err)
{
  return said(r, mu_client_watch(client_of(r), run_id, node_id, round, timeout_ms, ev, NULL), err);
}

static int musterd_leave(struct mu_rdzv *r, const char *run_id, const char *node_id, int succeeded,
                         const char *reason, struct mu_buf *err)
{
  return said(r, mu_client_leave(client_of(r), run_id, node_id, succeeded, reason), err);
}

static int musterd_shutdown(struct mu_rdzv *r, const char *run_id, const char *reason,
                            struct mu_buf *err)
{
  return said(r, mu_client_shutdown(client_of(r), run_id, reason), err);
}

static int musterd_run_info(struct mu_rdzv *r, const char *run_id, struct mu_run_info *out,
                            struct mu_buf *err)
{
  return said(r, mu_client_run_info(client_of(r), run_id, out), err);
}

static int musterd_barrier(struct mu_rdzv *r, const char *run_id, const char *name, int count,
                           const char *id, long timeout_ms, long *generation, struct mu_buf *err)
{
  return said(r, mu_client_barrier(client_of(r), run_id, name, count, id, timeout_ms, generation),
              err);
}

static int musterd_kv_put(struct mu_rdzv *r, const char *run_id, const char *key, const void *val,
                          size_t len, struct mu_buf *err)
{
  return said(r, mu_client_kv_put(client_of(r), run_id, key, val, len, NULL), err);
}

static int musterd_kv_get(struct mu_rdzv *r, const char *run_id, const char *key, long wait_ms,
                          char **val, size_t *len, struct mu_buf *err)
{
  return said(r, mu_client_kv_get(client_of(r), run_id, key, wait_ms, val, len), err);
}

const struct mu_rdzv_ops mu_rdzv_musterd = {
    .name = "musterd",
    .open = musterd_open,
    .close = musterd_close,
    .set_timeout = musterd_set_timeout,
    .set_cancel_fd = musterd_set_cancel_fd,
    .local_addr = musterd_local_addr,
    .join = musterd_join,
    .heartbeat = musterd_heartbeat,
    .watch = musterd_watch,
    .leave = musterd_leave,
    .shutdown = musterd_shutdown,
    .run_info = musterd_run_info,
    .barrier = musterd_barrier,
    .kv_put = musterd_kv_put,
    .kv_get = musterd_kv_get,
};
