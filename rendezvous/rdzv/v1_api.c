/* The /v1 HTTP surface of the native rendezvous: one route row per endpoint, the checks every
 * /v1 request passes first, the API's hooks for the gate (refusals in the /v1 shape, usage for
 * quotas), and the module. The handlers live in v1_runs.c (runs and rounds) and v1_kv.c
 * (barriers and KV); replies and long polls in v1_reply.c.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "alloc.h"
#include "v1.h"
#include "v1_int.h"

/* The rows' paths, named where a check needs to know which row matched. */
#define V1_RUN "/v1/runs/{run_id}"
#define V1_KV V1_RUN "/kv/{key}"

/* ---------------------------------------------------------------------------------------------
 * Checks every /v1 request passes first
 */

/* The module, unless the server is shutting down; the run id ({run_id}) and a KV key checked.
 * Returns: the module, or NULL after answering (503, 400). */
/* A POST to /v1 carries JSON or nothing: a body in a form's or a text's type is what a page of
 * another site can send without asking (a "simple" request), so it is refused before anything
 * reads it (415), as is a body with no type at all. */
static int media_type_or_reply(struct rv_req *req)
{
  const char *ct = rv_req_header(req, "Content-Type");
  if (req->method != RV_POST || (ct == NULL && req->body_len == 0))
    return 0;
  if (ct != NULL && strncasecmp(ct, "application/json", 16) == 0 &&
      (ct[16] == '\0' || ct[16] == ';' || ct[16] == ' '))
    return 0;
  char msg[256];
  snprintf(msg, sizeof(msg),
           "POST bodies under /v1 are JSON: send 'Content-Type: application/json'%s%.64s%s",
           ct != NULL ? " (got '" : " (none was sent)", ct != NULL ? ct : "",
           ct != NULL ? "')" : "");
  v1_error_reply(req, RDZV_EUNSUPPORTED_MEDIA_TYPE, msg, NULL, NULL);
  return -1;
}

struct v1 *v1_begin_or_reply(struct rv_req *req)
{
  struct v1 *v = rv_server_module_data(req->srv, "rdzv");
  if (v == NULL || v->rv == NULL || rv_server_closing(req->srv)) {
    v1_error_reply(req, RDZV_ESHUTTING_DOWN, "musterd is shutting down", NULL, NULL);
    return NULL;
  }
  if (media_type_or_reply(req) != 0)
    return NULL;
  if (req->nvars == 0)
    return v;
  const char *run_id = req->vars[0];
  size_t idlen = strlen(run_id);
  if (idlen > RDZV_ID_MAX) {
    v1_bad_request(req, "run id must be 1-%d characters of A-Z a-z 0-9 . _ -", RDZV_ID_MAX);
    return NULL;
  }
  for (size_t i = 0; i < idlen; i++) {
    char c = run_id[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
          c == '_' || c == '-')) {
      v1_bad_request(req, "run id '%.128s' has a character outside A-Z a-z 0-9 . _ -", run_id);
      return NULL;
    }
  }
  if (strcmp(req->route->path, V1_KV) == 0 && strlen(req->vars[1]) > RDZV_KEY_MAX) {
    v1_bad_request(req, "KV keys are at most %d bytes", RDZV_KEY_MAX);
    return NULL;
  }
  return v;
}

/* ---------------------------------------------------------------------------------------------
 * Paths with no endpoint
 */

/* /v1/runs/{run_id}/<anything else>. */
static void h_no_endpoint(struct rv_req *req)
{
  if (v1_begin_or_reply(req) == NULL)
    return;
  char msg[512];
  snprintf(msg, sizeof(msg),
           "no endpoint '%.200s' under /v1/runs/%s/; use join, heartbeat, watch, leave, close, "
           "shutdown, report, health, barrier/{name} or kv/{key}",
           req->vars[1], req->vars[0]);
  v1_error_reply(req, RDZV_ENOT_FOUND, msg, NULL, NULL);
}

/* /v1/<anything but runs>. */
static void h_no_api(struct rv_req *req)
{
  if (v1_begin_or_reply(req) == NULL)
    return;
  v1_error_reply(req, RDZV_ENOT_FOUND,
                 "no such /v1 endpoint; the API lives under /v1/runs (see docs/rendezvous.md)",
                 NULL, NULL);
}

/* ---------------------------------------------------------------------------------------------
 * The API's hooks for the gate
 */

/* "GET, PUT, DELETE, POST": the /v1 way of naming the methods a path takes. */
static void allow_text(char *out, size_t size, unsigned methods)
{
  static const unsigned order[] = {RV_GET, RV_PUT, RV_DELETE, RV_POST, RV_PATCH, RV_OPTIONS};
  static const char *names[] = {"GET", "PUT", "DELETE", "POST", "PATCH", "OPTIONS"};
  size_t o = 0;
  out[0] = '\0';
  for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++)
    if ((methods & order[i]) && o < size)
      o += (size_t)snprintf(out + o, size - o, "%s%s", o > 0 ? ", " : "", names[i]);
}

static int v1_refuse(struct rv_req *req, const struct rv_refusal *r)
{
  switch (r->kind) {
  case RV_REFUSE_METHOD: {
    /* the checks every /v1 request passes come first, as in the handlers */
    if (v1_begin_or_reply(req) == NULL)
      return 1;
    char allow[64], msg[512], hdr[128];
    allow_text(allow, sizeof(allow), r->allow);
    snprintf(msg, sizeof(msg), "%s %s is not supported; use %s", req->method_name, req->route->path,
             allow);
    snprintf(hdr, sizeof(hdr), "Allow: %s\r\n", allow);
    v1_error_reply(req, RDZV_EMETHOD_NOT_ALLOWED, msg, NULL, hdr);
    return 1;
  }
  case RV_REFUSE_NO_CREDENTIALS:
  case RV_REFUSE_BAD_CREDENTIALS:
    v1_error_reply(req, RDZV_EUNAUTHORIZED, r->message, NULL,
                   r->challenge != NULL ? r->challenge
                                        : "WWW-Authenticate: Bearer realm=\"musterd\"\r\n");
    return 1;
  case RV_REFUSE_TOO_LARGE:
    v1_error_reply(req, RDZV_ETOO_LARGE, r->message, NULL, NULL);
    return 1;
  case RV_REFUSE_TOO_MANY:
    v1_error_reply(req, RDZV_ETOO_MANY, r->message, NULL, NULL);
    return 1;
  case RV_REFUSE_READ_ONLY:
    rv_reply_error(req, 503, "Retry-After: 1\r\n", "read_only", r->message, NULL);
    return 1;
  case RV_REFUSE_FORBIDDEN:
    v1_error_reply(req, RDZV_EFORBIDDEN, r->message, NULL, NULL);
    return 1;
  }
  return 0;
}

/* The run a request is about is the scope of the per-run quotas; a KV write says what it would
 * add to it. */
static void v1_usage(struct rv_req *req, struct rv_usage *u)
{
  unsigned flags = req->route->flags;
  if (req->nvars > 0) {
    u->scope = req->vars[0];
    u->scope_len = strlen(req->vars[0]);
  }
  if (flags & RV_ROUTE_MAY_POLL)
    u->poll = rv_req_param(req, "wait_ms") != NULL;
  if (!(flags & RV_ROUTE_WRITE))
    return;
  if (req->method == RV_PUT) {
    u->has_value = 1;
    u->value_len = req->body_len;
  }
  struct v1 *v = rv_server_module_data(req->srv, "rdzv");
  struct rdzv_run *run = v != NULL && v->rv != NULL ? rdzv_find(v->rv, req->vars[0]) : NULL;
  if (run == NULL)
    return;
  size_t nkeys, nbytes, old;
  int exists;
  rdzv_run_kv_usage(run, req->vars[1], &nkeys, &nbytes, &old, &exists);
  u->scope_known = 1;
  u->scope_keys = nkeys;
  u->scope_bytes = nbytes;
  u->scope_adds_key = !exists;
  u->scope_old_bytes = old;
  /* an ?add=N counter stores at most 20 digits and a sign: count it as 24 bytes */
  u->scope_new_bytes = req->method == RV_PUT ? req->body_len : 24;
}

/* The run a /v1 request is about (rows with {run_id}). */
static int v1_target(struct rv_req *req, struct rv_target *t)
{
  if (req->nvars == 0)
    return 0; /* /v1/runs, /v1/events: listings the handlers filter */
  t->kind = RV_SCOPE_RUN;
  t->name = req->vars[0];
  t->len = strlen(req->vars[0]);
  t->access = req->method == RV_GET ? RV_READ : RV_WRITE;
  return 1;
}

static const struct rv_api v1_api = {"v1", v1_refuse, v1_usage, v1_target};

#define ALL_METHODS                                                                                \
  (RV_GET | RV_HEAD | RV_PUT | RV_POST | RV_DELETE | RV_PATCH | RV_OPTIONS | RV_OTHER)

/* Every /v1 endpoint, one row per method (docs/rendezvous.md). All rows count as "v1" in
 * /metrics. */
static const struct rv_route v1_routes[] = {
    {RV_GET, "/v1/runs", RV_ROUTE_SLASH, v1_runs, "v1", &v1_api},
    {RV_GET, V1_RUN, RV_ROUTE_SLASH, v1_run, "v1", &v1_api},
    {RV_POST, V1_RUN "/join", RV_ROUTE_LONG_POLL, v1_join, "v1", &v1_api},
    {RV_POST, V1_RUN "/heartbeat", 0, v1_heartbeat, "v1", &v1_api},
    {RV_GET, V1_RUN "/watch", RV_ROUTE_LONG_POLL, v1_watch, "v1", &v1_api},
    {RV_POST, V1_RUN "/leave", 0, v1_leave, "v1", &v1_api},
    {RV_POST, V1_RUN "/close", 0, v1_close_run, "v1", &v1_api},
    {RV_POST, V1_RUN "/shutdown", 0, v1_shutdown_run, "v1", &v1_api},
    {RV_POST, V1_RUN "/report", 0, v1_report, "v1", &v1_api},
    {RV_POST, V1_RUN "/health", 0, v1_health, "v1", &v1_api},
    {RV_POST, V1_RUN "/barrier/{name}", RV_ROUTE_REST | RV_ROUTE_LONG_POLL, v1_barrier, "v1",
     &v1_api},
    {RV_GET, V1_KV, RV_ROUTE_REST | RV_ROUTE_MAY_POLL, v1_kv_get, "v1", &v1_api},
    {RV_PUT, V1_KV, RV_ROUTE_REST | RV_ROUTE_WRITE, v1_kv_put, "v1", &v1_api},
    {RV_DELETE, V1_KV, RV_ROUTE_REST, v1_kv_delete, "v1", &v1_api},
    {RV_POST, V1_KV, RV_ROUTE_REST | RV_ROUTE_WRITE, v1_kv_add, "v1", &v1_api},
    {ALL_METHODS, V1_RUN "/{endpoint}", RV_ROUTE_REST, h_no_endpoint, "v1", &v1_api},
    {ALL_METHODS, "/v1/", RV_ROUTE_PREFIX, h_no_api, "v1", &v1_api},
    {0, NULL, 0, NULL, NULL, NULL},
};

/* ---------------------------------------------------------------------------------------------
 * The module
 */

static void v1_freed(void *data)
{
  struct v1 *v = data;
  struct rv_server *srv = v->srv;
  mu_free(v);
  rv_server_unref(srv);
}

static void v1_close(struct rv_server *srv, void *data)
{
  struct v1 *v = data;
  struct rdzv *rv = v->rv;
  v->rv = NULL;
  rv_server_ref(srv);
  rdzv_free(rv, v1_freed, v);
}

static void v1_metrics(struct rv_server *srv, void *data, struct mu_buf *out)
{
  (void)srv;
  struct v1 *v = data;
  if (v->rv == NULL)
    return;
  struct rdzv_stats s;
  uint64_t used = 0, max = 0;
  rdzv_stats(v->rv, &s);
  rdzv_bytes(v->rv, &used, &max);
  mu_buf_printf(out,
                "# HELP muster_rdzv_state_bytes All /v1 state as counted against its bound.\n"
                "# TYPE muster_rdzv_state_bytes gauge\nmuster_rdzv_state_bytes %" PRIu64 "\n"
                "# TYPE muster_rdzv_state_bytes_max gauge\nmuster_rdzv_state_bytes_max %" PRIu64
                "\n",
                used, max);
  mu_buf_printf(out,
                "# TYPE muster_rdzv_runs gauge\nmuster_rdzv_runs %" PRIu64 "\n"
                "# TYPE muster_rdzv_nodes gauge\nmuster_rdzv_nodes %" PRIu64 "\n"
                "# TYPE muster_rdzv_pending_joins gauge\nmuster_rdzv_pending_joins %" PRIu64 "\n"
                "# TYPE muster_rdzv_pending_watches gauge\nmuster_rdzv_pending_watches %" PRIu64
                "\n"
                "# TYPE muster_rdzv_rounds_closed_total counter\n"
                "muster_rdzv_rounds_closed_total %" PRIu64 "\n"
                "# TYPE muster_rdzv_leases_expired_total counter\n"
                "muster_rdzv_leases_expired_total %" PRIu64 "\n"
                "# TYPE muster_rdzv_heartbeats_total counter\n"
                "muster_rdzv_heartbeats_total %" PRIu64 "\n"
                "# TYPE muster_rdzv_wrong_sessions_total counter\n"
                "muster_rdzv_wrong_sessions_total %" PRIu64 "\n",
                s.runs, s.nodes, s.pending_joins, s.pending_watches, s.rounds_closed,
                s.leases_expired, s.heartbeats, s.wrong_sessions);
  rdzv_goodput_metrics(v->rv, out);
}

int v1_register(struct rv_server *srv)
{
  struct v1 *v = mu_calloc(1, sizeof(*v));
  v->srv = srv;
  v->rv = rdzv_new(rv_server_loop(srv), 0);
  struct rv_module mod = {"rdzv", v, v1_close, v1_metrics};
  rv_server_add_module(srv, &mod);
  rv_server_add_routes(srv, v1_routes);
  v1_events_register(srv, v->rv);
  return 0;
}

void v1_set_run_gc_ms(struct rv_server *srv, uint64_t gc_ms)
{
  struct v1 *v = rv_server_module_data(srv, "rdzv");
  if (v && v->rv)
    rdzv_set_gc_ms(v->rv, gc_ms);
}

void v1_set_limits(struct rv_server *srv, const struct rdzv_limits *l)
{
  struct v1 *v = rv_server_module_data(srv, "rdzv");
  if (v && v->rv)
    rdzv_set_limits(v->rv, l);
}

struct rdzv *v1_rdzv(struct rv_server *srv)
{
  struct v1 *v = rv_server_module_data(srv, "rdzv");
  return v ? v->rv : NULL;
}
