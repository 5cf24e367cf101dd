/* The rendezvous client's calls (include/muster/client.h), once for every backend: each one
 * clears the last error, lets a resolving backend resolve, and calls its backend's slot
 * (client_int.h); a join's round is checked field by field before anyone sees it. */
#include <limits.h>
#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "muster/client.h"

#include "alloc.h"
#include "client/backends.h"
#include "client_int.h"

void mu__client_say(struct mu_client *c, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->errmsg, sizeof(c->errmsg), fmt, ap);
  va_end(ap);
}

int mu_client_open(const struct mu_client_backend *b, const char *endpoint, struct mu_client **out,
                   struct mu_buf *err)
{
  *out = NULL;
  if (endpoint == NULL || *endpoint == '\0') {
    if (err != NULL)
      mu_buf_printf(err, "no endpoint; give %s", b->endpoint_form);
    return MU_EINVAL;
  }
  struct mu_client *c = mu_calloc(1, sizeof(*c));
  c->ops = b->ops;
  c->timeout_ms = 10000;
  c->cancel_fd = -1;
  int rc = c->ops->open(c, endpoint);
  if (rc != 0) {
    if (err != NULL)
      mu_buf_puts(err, c->errmsg);
    mu_client_free(c);
    return rc;
  }
  *out = c;
  return 0;
}

int mu_client_new(const char *endpoint, struct mu_client **out)
{
  *out = NULL;
  if (endpoint == NULL)
    return MU_EINVAL;
  return mu_client_open(mu_client_backend_of(endpoint), endpoint, out, NULL);
}

/* The kept token, wiped (as the HTTP client wipes its copy). */
static void forget_token(struct mu_client *c)
{
  OPENSSL_cleanse(c->token, strlen(c->token));
  mu_free(c->token);
  c->token = NULL;
}

void mu_client_free(struct mu_client *c)
{
  if (c == NULL)
    return;
  c->ops->close(c);
  if (c->token != NULL)
    forget_token(c);
  OPENSSL_cleanse(c->session, sizeof(c->session));
  mu_free(c);
}

int mu__client_become(struct mu_client *c, const struct mu_client_ops *ops, const char *endpoint)
{
  c->ops->close(c);
  c->impl = NULL;
  c->ops = ops;
  int rc = ops->open(c, endpoint);
  if (rc != 0)
    return rc;
  if (ops->set_timeout != NULL)
    ops->set_timeout(c, c->timeout_ms);
  if (ops->set_cancel_fd != NULL)
    ops->set_cancel_fd(c, c->cancel_fd);
  if (ops->set_token != NULL && c->token != NULL) /* a token given before the hand-over */
    ops->set_token(c, c->token);
  return 0;
}

void mu_client_set_timeout(struct mu_client *c, long ms)
{
  c->timeout_ms = ms > 0 ? ms : 1;
  if (c->ops->set_timeout != NULL && c->impl != NULL)
    c->ops->set_timeout(c, c->timeout_ms);
}

void mu_client_set_cancel_fd(struct mu_client *c, int fd)
{
  c->cancel_fd = fd;
  if (c->ops->set_cancel_fd != NULL && c->impl != NULL)
    c->ops->set_cancel_fd(c, fd);
}

void mu_client_set_token(struct mu_client *c, const char *token)
{
  if (c->token != NULL)
    forget_token(c);
  c->token = token != NULL ? mu_strdup(token) : NULL;
  if (c->ops->set_token != NULL && c->impl != NULL)
    c->ops->set_token(c, token);
}

const char *mu_client_errmsg(const struct mu_client *c)
{
  return c->errmsg;
}

int mu_client_last_status(const struct mu_client *c)
{
  return c->last_status;
}

int mu_client_local_addr(const struct mu_client *c, char *out, size_t n)
{
  if (c->impl == NULL || c->ops->local_addr == NULL)
    return MU_ENOENT;
  return c->ops->local_addr(c, out, n);
}

const char *mu_watch_event_name(enum mu_watch_event ev)
{
  switch (ev) {
  case MU_WATCH_NONE:
    return "none";
  case MU_WATCH_BROKEN:
    return "broken";
  case MU_WATCH_WAITING:
    return "waiting";
  case MU_WATCH_SUPERSEDED:
    return "superseded";
  case MU_WATCH_CLOSED:
    return "closed";
  case MU_WATCH_SHUT:
    return "shut";
  }
  return "unknown";
}

/* ---------------------------------------------------------------------------------------------
 * The calls
 */

/* The start of every call: clears the last error; a backend that resolves its endpoint first
 * does so now (and may change c->ops). Returns: 0 or the error of this call. */
static int begin(struct mu_client *c)
{
  c->errmsg[0] = '\0';
  c->last_status = 0;
  if (c->ops->resolve != NULL) {
    int rc = c->ops->resolve(c);
    if (rc != 0)
      return rc;
  }
  if (c->impl == NULL) {
    mu__client_say(c, "the rendezvous client has no service to talk to (its endpoint did not "
                      "resolve)");
    return MU_ECONN;
  }
  return 0;
}

/* A slot the backend lacks. Returns: MU_ENOTSUP. */
static int unsupported(struct mu_client *c, const char *what)
{
  mu__client_say(c, "this rendezvous backend does not support %s", what);
  return MU_ENOTSUP;
}

int mu_client_join(struct mu_client *c, const char *run_id, const struct mu_join_opts *o,
                   struct mu_round *out)
{
  memset(out, 0, sizeof(*out));
  int rc = begin(c);
  if (rc == 0)
    rc = c->ops->join != NULL ? c->ops->join(c, run_id, o, out) : unsupported(c, "join");
  if (rc == 0 && mu__round_check(out, run_id, o, c->errmsg, sizeof(c->errmsg)) != 0) {
    mu_round_release(out);
    rc = MU_EPROTO;
  }
  if (rc == 0) /* the node speaks with it from now on */
    mu_client_set_session(c, out->session);
  return rc;
}

void mu_client_set_session(struct mu_client *c, const char *session)
{
  snprintf(c->session, sizeof(c->session), "%s", session != NULL ? session : "");
}

int mu_client_heartbeat(struct mu_client *c, const char *run_id, const char *node_id, long *round,
                        int *waiting)
{
  int rc = begin(c);
  if (rc == 0)
    rc = c->ops->heartbeat != NULL ? c->ops->heartbeat(c, run_id, node_id, round, waiting)
                                   : unsupported(c, "heartbeat");
  return rc;
}

int mu_client_watch(struct mu_client *c, const char *run_id, const char *node_id, long round,
                    long timeout_ms, enum mu_watch_event *ev, int *waiting)
{
  *ev = MU_WATCH_NONE;
  if (waiting != NULL)
    *waiting = 0;
  int rc = begin(c);
  if (rc == 0)
    rc = c->ops->watch != NULL ? c->ops->watch(c, run_id, node_id, round, timeout_ms, ev, waiting)
                               : unsupported(c, "watch");
  return rc;
}

int mu_client_run_info(struct mu_client *c, const char *run_id, struct mu_run_info *out)
{
  memset(out, 0, sizeof(*out));
  out->max_restarts = -1;
  int rc = begin(c);
  if (rc == 0)
    rc = c->ops->run_info != NULL ? c->ops->run_info(c, run_id, out)
                                  : unsupported(c, "reading a run");
  return rc;
}

int mu_client_leave(struct mu_client *c, const char *run_id, const char *node_id, int succeeded,
                    const char *reason)
{
  int rc = begin(c);
  if (rc == 0)
    rc = c->ops->leave != NULL ? c->ops->leave(c, run_id, node_id, succeeded, reason)
                               : unsupported(c, "leave");
  return rc;
}

int mu_client_close(struct mu_client *c, const char *run_id)
{
  int rc = begin(c);
  if (rc == 0)
    rc = c->ops->end != NULL ? c->ops->end(c, run_id, 1, NULL) : unsupported(c, "close");
  return rc;
}

int mu_client_shutdown(struct mu_client *c, const char *run_id, const char *reason)
{
  int rc = begin(c);
  if (rc == 0)
    rc = c->ops->end != NULL ? c->ops->end(c, run_id, 0, reason) : unsupported(c, "shutdown");
  return rc;
}

int mu_client_barrier(struct mu_client *c, const char *run_id, const char *name, int count,
                      const char *id, long timeout_ms, long *generation)
{
  int rc = begin(c);
  if (rc == 0)
    rc = c->ops->barrier != NULL
             ? c->ops->barrier(c, run_id, name, count, id, timeout_ms, generation)
             : unsupported(c, "barriers");
  return rc;
}

/* ---------------------------------------------------------------------------------------------
 * KV
 */

int mu_client_kv_put(struct mu_client *c, const char *run_id, const char *key, const void *val,
                     size_t len, long *version)
{
  int rc = begin(c);
  if (rc == 0)
    rc = c->ops->kv_put != NULL ? c->ops->kv_put(c, run_id, key, val, len, version)
                                : unsupported(c, "KV");
  return rc;
}

int mu_client_kv_get(struct mu_client *c, const char *run_id, const char *key, long wait_ms,
                     char **val, size_t *len)
{
  *val = NULL;
  if (len != NULL)
    *len = 0;
  int rc = begin(c);
  if (rc == 0)
    rc = c->ops->kv_get != NULL ? c->ops->kv_get(c, run_id, key, wait_ms, val, len)
                                : unsupported(c, "KV");
  return rc;
}

int mu_client_kv_add(struct mu_client *c, const char *run_id, const char *key, long delta,
                     long *value)
{
  int rc = begin(c);
  if (rc == 0)
    rc = c->ops->kv_add != NULL ? c->ops->kv_add(c, run_id, key, delta, value)
                                : unsupported(c, "KV counters");
  return rc;
}

int mu_client_kv_delete(struct mu_client *c, const char *run_id, const char *key)
{
  int rc = begin(c);
  if (rc == 0)
    rc = c->ops->kv_delete != NULL ? c->ops->kv_delete(c, run_id, key) : unsupported(c, "KV");
  return rc;
}

/* ---------------------------------------------------------------------------------------------
 * Reading runs (backends.h)
 */

int mu_client_runs_json(struct mu_client *c, const char *run_id, cJSON **out)
{
  *out = NULL;
  int rc = begin(c);
  if (rc == 0)
    rc = c->ops->runs_json != NULL ? c->ops->runs_json(c, run_id, out)
                                   : unsupported(c, "reading runs");
  return rc;
}

int mu_client_c10d_json(struct mu_client *c, const char *run_id, cJSON **out)
{
  *out = NULL;
  int rc = begin(c);
  if (rc == 0)
    rc = c->ops->c10d_json != NULL ? c->ops->c10d_json(c, run_id, out)
                                   : unsupported(c, "reading TCPStore runs");
  return rc;
}

int mu_client_changes(struct mu_client *c, const char *run_id, long long *cursor, long timeout_ms,
                      cJSON **events)
{
  *events = NULL;
  int rc = begin(c);
  if (rc == 0)
    rc = c->ops->changes != NULL ? c->ops->changes(c, run_id, cursor, timeout_ms, events)
                                 : unsupported(c, "watching runs");
  return rc;
}

/* ---------------------------------------------------------------------------------------------
 * Goodput (goodput.h)
 */

const char *mu_report_event_name(enum mu_report_event ev)
{
  switch (ev) {
  case MU_REPORT_STARTED:
    return "started";
  case MU_REPORT_PROGRESS:
    return "progress";
  case MU_REPORT_FAILED:
    return "failed";
  case MU_REPORT_HUNG:
    return "hung";
  case MU_REPORT_FAILING:
    return "failing";
  }
  return "unknown";
}

int mu_client_report(struct mu_client *c, const char *run_id, const char *node_id, long round,
                     enum mu_report_event ev, const char *reason, struct mu_report_answer *out)
{
  memset(out, 0, sizeof(*out));
  out->max_restarts = -1;
  int rc = begin(c);
  if (rc == 0)
    rc = c->ops->report != NULL ? c->ops->report(c, run_id, node_id, round, ev, reason, out)
                                : unsupported(c, "reports of workers");
  return rc;
}

int mu_client_health(struct mu_client *c, const char *run_id, const struct mu_join_opts *o,
                     int healthy, const char *output, long ttl_ms, int *unhealthy)
{
  if (unhealthy != NULL)
    *unhealthy = 0;
  int rc = begin(c);
  if (rc == 0)
    rc = c->ops->health != NULL ? c->ops->health(c, run_id, o, healthy, output, ttl_ms, unhealthy)
                                : unsupported(c, "health reports");
  return rc;
}

void mu_client_set_hold(struct mu_client *c, int on)
{
  c->hold = on != 0;
}
