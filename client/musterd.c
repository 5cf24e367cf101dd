/* The musterd backend: musterd's native /v1 rendezvous API (docs/rendezvous.md), JSON over
 * the blocking HTTP client (common/http_client.c). Its row in backends.c is the default: a
 * bare HOST:PORT (or http(s)://HOST:PORT) endpoint. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "muster/client.h"

#include "alloc.h"
#include "buf.h"
#include "client_int.h"
#include "http_client.h"
#include "json.h"

#define MAX_ANSWER (4u << 20) /* 1 MiB values plus JSON framing, with room */
#define MAX_RUNS (64u << 20)  /* muster rdzv: every run of a busy server */
#define LONG_POLL_SLACK_MS 5000
#define VERSION_PROBE_MS 2000

struct musterd {
  struct mu_http_client *http;
  char session[65]; /* the session its header lines carry ("": none) */
};

static struct mu_http_client *http_of(const struct mu_client *c)
{
  return ((const struct musterd *)c->impl)->http;
}

static int musterd_open(struct mu_client *c, const char *endpoint)
{
  char host[256];
  int https = 0, port = 0;
  if (mu_http_endpoint_parse(endpoint, strlen(endpoint), host, sizeof(host), &port, &https) != 0) {
    mu__client_say(c, "'%s' is not HOST:PORT (or http(s)://HOST:PORT) of a musterd", endpoint);
    return MU_EINVAL;
  }
  struct musterd *m = mu_calloc(1, sizeof(*m));
  m->http = mu_http_client_new(host, port);
  c->impl = m;
  mu_http_client_set_cancel_fd(m->http, c->cancel_fd);
  /* security (docs/security.md): TLS from the scheme or the env, the token from the env; a bad
   * file is said by the first request too */
  if (mu_http_client_tls_from_env(m->http, https) != 0)
    mu__client_say(c, "%s", mu_http_client_errmsg(m->http));
  mu_http_client_bearer_from_env(m->http);
  return 0;
}

static void musterd_close(struct mu_client *c)
{
  struct musterd *m = c->impl;
  if (m == NULL)
    return;
  mu_http_client_free(m->http);
  mu_free(m);
  c->impl = NULL;
}

static void musterd_set_cancel_fd(struct mu_client *c, int fd)
{
  mu_http_client_set_cancel_fd(http_of(c), fd);
}

static void musterd_set_token(struct mu_client *c, const char *token)
{
  mu_http_client_set_bearer(http_of(c), token);
}

static int musterd_local_addr(const struct mu_client *c, char *out, size_t n)
{
  return mu_http_client_local_addr(http_of(c), out, n);
}

/* ---------------------------------------------------------------------------------------------
 * Plumbing
 */

/* ---------------------------------------------------------------------------------------------
 * Plumbing
 */

/* Appends s percent-encoded; '/' is kept when keep_slash. */
static int put_escaped(struct mu_buf *b, const char *s, int keep_slash)
{
  static const char hex[] = "0123456789ABCDEF";
  int rc = 0;
  for (const unsigned char *p = (const unsigned char *)s; *p && rc == 0; p++) {
    unsigned char ch = *p;
    if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
        ch == '-' || ch == '.' || ch == '_' || ch == '~' || (keep_slash && ch == '/'))
      rc = mu_buf_putc(b, (char)ch);
    else
      rc = mu_buf_printf(b, "%%%c%c", hex[ch >> 4], hex[ch & 15]);
  }
  return rc;
}

/* Builds "/v1/runs/<run>/<rest><escaped tail><query>" into b. */
static int run_path(struct mu_buf *b, const char *run_id, const char *rest, const char *tail,
                    const char *query)
{
  if (run_id == NULL || *run_id == '\0')
    return MU_EINVAL;
  int rc = mu_buf_puts(b, "/v1/runs/");
  if (rc == 0)
    rc = put_escaped(b, run_id, 0);
  if (rc == 0 && rest != NULL)
    rc = mu_buf_printf(b, "/%s", rest);
  if (rc == 0 && tail != NULL)
    rc = put_escaped(b, tail, 1);
  if (rc == 0 && query != NULL)
    rc = mu_buf_puts(b, query);
  return rc;
}

/* Whether the server is etcd (its /version names "etcdserver" and not "musterd", as musterd's
 * own does): the usual mix-up of --rdzv-backend etcd (a musterd) with an etcd v3 cluster.
 * Returns: 1 with etcd's version in ver, or 0. */
static int etcd_version(struct mu_client *c, char *ver, size_t n)
{
  struct mu_http_response r;
  mu_http_response_init(&r, 64 * 1024);
  long t = c->timeout_ms < VERSION_PROBE_MS ? c->timeout_ms : VERSION_PROBE_MS;
  int rc = mu_http_request(http_of(c), "GET", "/version", NULL, NULL, 0, (int)t, &r);
  cJSON *j = rc == 0 && r.status == 200 ? cJSON_ParseWithLength(r.body.data, r.body.len) : NULL;
  const char *etcd = mu_json_get_str(j, "etcdserver");
  int is = etcd != NULL && cJSON_GetObjectItemCaseSensitive(j, "musterd") == NULL;
  if (is)
    snprintf(ver, n, "%s", etcd);
  cJSON_Delete(j);
  mu_http_response_release(&r);
  return is;
}

/* An answer that is not musterd's /v1 JSON: says what answered; a refused credential (401, 403,
 * which musterd answers in plain text on some routes) says where the token goes, with the
 * server's words. Returns: MU_EHTTP. */
static int not_musterd(struct mu_client *c, const char *path, const struct mu_http_response *r)
{
  char ver[32];
  int status = r->status;
  if (status == 401 || status == 403) {
    int n = r->body.len < 200 ? (int)r->body.len : 200;
    while (n > 0 && (r->body.data[n - 1] == '\n' || r->body.data[n - 1] == '\r'))
      n--;
    mu__client_say(c,
                   "the endpoint refused the request (HTTP %d for %s%s%.*s): it needs a valid "
                   "token; give it with MUSTER_RDZV_TOKEN or MUSTER_RDZV_TOKEN_FILE (muster rdzv: "
                   "--token T)",
                   status, path, n > 0 ? ": " : "", n, n > 0 ? r->body.data : "");
  } else if (etcd_version(c, ver, sizeof(ver)))
    mu__client_say(c,
                   "the endpoint is etcd %s (its /version says so), not a musterd: it answered "
                   "HTTP %d for %s; for an etcd v3 cluster use the etcd-v3 backend "
                   "(--rdzv-backend etcd-v3, or the endpoint etcd-v3://HOST:PORT)",
                   ver, status, path);
  else
    mu__client_say(c,
                   "the endpoint answered HTTP %d for %s, not a musterd /v1 answer (is the "
                   "endpoint a musterd?)",
                   status, path);
  return MU_EHTTP;
}

/* Maps an error answer to a code and keeps the server's words. */
static int map_error(struct mu_client *c, const char *path, struct mu_http_response *r)
{
  cJSON *j = cJSON_ParseWithLength(r->body.data ? r->body.data : "", r->body.len);
  const cJSON *code = cJSON_GetObjectItemCaseSensitive(j, "error");
  const cJSON *msg = cJSON_GetObjectItemCaseSensitive(j, "message");
  const cJSON *reason = cJSON_GetObjectItemCaseSensitive(j, "reason");
  int rc = MU_EHTTP;
  if (!cJSON_IsString(code)) {
    cJSON_Delete(j);
    return not_musterd(c, path, r);
  }
  const char *s = code->valuestring;
  if (strcmp(s, "bad_request") == 0 || strcmp(s, "not_a_counter") == 0)
    rc = MU_EINVAL;
  else if (strstr(s, "timeout") != NULL)
    rc = MU_ETIMEDOUT;
  else if (strstr(s, "mismatch") != NULL)
    rc = MU_ESTATE;
  else if (strcmp(s, "run_closed") == 0)
    rc = MU_ECLOSED;
  else if (strcmp(s, "run_shut") == 0)
    rc = MU_ESHUT;
  else if (strncmp(s, "no_such", 7) == 0 || strcmp(s, "not_member") == 0)
    rc = MU_ENOENT;
  else if (strcmp(s, "unauthorized") == 0 || strcmp(s, "forbidden") == 0)
    rc = MU_EAUTH; /* a musterd that refuses this credential: not "not a musterd" */
  else if (strcmp(s, "wrong_session") == 0)
    rc = MU_ESESSION; /* the run holds this node id under another session */
  mu__client_say(c, "%s: %s%s%s%s", s, cJSON_IsString(msg) ? msg->valuestring : "(no message)",
                 cJSON_IsString(reason) ? " (reason: " : "",
                 cJSON_IsString(reason) ? reason->valuestring : "",
                 cJSON_IsString(reason) ? ")" : "");
  cJSON_Delete(j);
  return rc;
}

/* One request: what to send, how long it may wait, what to do with a 200's body. */
struct exchange {
  const char *method, *path, *ctype;
  const void *body;
  size_t len;
  long extra_ms;      /* a long poll's own wait, on top of the client's timeout */
  size_t cap;         /* the longest answer taken (MAX_ANSWER) */
  cJSON **jout;       /* the parsed JSON object (the caller's: cJSON_Delete) */
  struct mu_buf *raw; /* or the body itself, moved here */
};

/* Every call carries the node's session once it has one (docs/rendezvous.md, "Sessions"). */
static void session_header(struct mu_client *c)
{
  struct musterd *m = c->impl;
  if (strcmp(m->session, c->session) == 0)
    return;
  memcpy(m->session, c->session, sizeof(m->session));
  char line[128];
  snprintf(line, sizeof(line), "X-Muster-Session: %s\r\n", c->session);
  mu_http_client_set_headers(m->http, c->session[0] != '\0' ? line : NULL);
}

static int exchange(struct mu_client *c, const struct exchange *x)
{
  session_header(c);
  struct mu_http_response r;
  mu_http_response_init(&r, x->cap != 0 ? x->cap : MAX_ANSWER);
  long t = c->timeout_ms + (x->extra_ms > 0 ? x->extra_ms + LONG_POLL_SLACK_MS : 0);
  int rc = mu_http_request(http_of(c), x->method, x->path, x->ctype, x->body, x->len,
                           t > INT_MAX ? INT_MAX : (int)t, &r);
  if (rc != 0) {
    mu__client_say(c, "%s", mu_http_client_errmsg(http_of(c)));
    goto out;
  }
  c->last_status = r.status;
  if (r.status != 200) {
    rc = map_error(c, x->path, &r);
    goto out;
  }
  if (x->jout != NULL) {
    *x->jout = cJSON_ParseWithLength(r.body.data ? r.body.data : "", r.body.len);
    if (*x->jout == NULL || !cJSON_IsObject(*x->jout)) {
      cJSON_Delete(*x->jout);
      *x->jout = NULL;
      mu__client_say(c, "answer to %s %s is not a JSON object", x->method, x->path);
      rc = MU_EPROTO;
    }
  }
  if (x->raw != NULL) {
    *x->raw = r.body;
    mu_buf_init(&r.body, 0);
  }
out:
  mu_http_response_release(&r);
  return rc;
}

/* A JSON request (req may be NULL: no body) and its JSON answer. */
static int call_json(struct mu_client *c, const char *method, const char *path, cJSON *req,
                     long extra_ms, cJSON **jout)
{
  char *body = req != NULL ? cJSON_PrintUnformatted(req) : NULL;
  struct exchange x = {
      method, path, body ? "application/json" : NULL, body, body ? strlen(body) : 0, extra_ms, 0,
      jout,   NULL};
  int rc = exchange(c, &x);
  if (body != NULL)
    cJSON_free(body);
  return rc;
}

/* Returns: a copy of the string member k, "" when absent. Caller frees with mu_free(). */
static char *jdup(const cJSON *o, const char *k)
{
  const char *v = mu_json_get_str(o, k);
  return mu_strdup(v != NULL ? v : "");
}

/* ---------------------------------------------------------------------------------------------
 * Join: the request, the answer read field by field (each in its range)
 */

static cJSON *join_request(const struct mu_join_opts *o)
{
  cJSON *req = cJSON_CreateObject();
  cJSON_AddStringToObject(req, "node_id", o->node_id);
  cJSON_AddStringToObject(req, "addr", o->addr);
  cJSON_AddNumberToObject(req, "local_world_size", o->local_world_size);
  cJSON_AddNumberToObject(req, "master_port", o->master_port);
  cJSON_AddNumberToObject(req, "min_nodes", o->min_nodes);
  cJSON_AddNumberToObject(req, "max_nodes", o->max_nodes);
  if (o->last_call_ms >= 0)
    cJSON_AddNumberToObject(req, "last_call_ms", (double)o->last_call_ms);
  if (o->join_timeout_ms > 0)
    cJSON_AddNumberToObject(req, "join_timeout_ms", (double)o->join_timeout_ms);
  if (o->lease_ttl_ms > 0)
    cJSON_AddNumberToObject(req, "lease_ttl_ms", (double)o->lease_ttl_ms);
  if (o->budget)
    cJSON_AddNumberToObject(req, "max_restarts", (double)o->max_restarts);
  return req;
}

/* An int field of a join answer. Returns: 0, or MU_EPROTO naming it in c->errmsg. */
static int int_field(struct mu_client *c, const cJSON *o, const char *what, const char *name,
                     int required, long dflt, long lo, int *out)
{
  long v = 0;
  int rc =
      mu__answer_long(o, what, name, required, dflt, lo, INT_MAX, &v, c->errmsg, sizeof(c->errmsg));
  *out = (int)v;
  return rc;
}

static int read_members(struct mu_client *c, const cJSON *ans, struct mu_round *out)
{
  const cJSON *mem = cJSON_GetObjectItemCaseSensitive(ans, "members"), *m;
  if (mem == NULL)
    return 0;
  if (!cJSON_IsArray(mem)) {
    mu__client_say(c, "invalid join answer: members is not a list");
    return MU_EPROTO;
  }
  int n = cJSON_GetArraySize(mem), rc = 0;
  out->members = mu_calloc(n > 0 ? (size_t)n : 1, sizeof(*out->members));
  cJSON_ArrayForEach(m, mem)
  {
    struct mu_member *d = &out->members[out->nmembers++];
    d->node_id = jdup(m, "node_id");
    d->addr = jdup(m, "addr");
    if (rc == 0)
      rc = int_field(c, m, "invalid join answer: a member", "local_world_size", 1, 0, 1,
                     &d->local_world_size);
    if (rc == 0)
      rc = int_field(c, m, "invalid join answer: a member", "node_rank", 1, 0, 0, &d->node_rank);
    if (rc == 0)
      rc =
          int_field(c, m, "invalid join answer: a member", "rank_offset", 1, 0, 0, &d->rank_offset);
  }
  return rc;
}

/* The answer's fields, each in its range (mu__round_check() then checks them together). */
/* The answer's session: absent (a musterd before sessions), or 1-64 lowercase hex digits.
 * Returns: 0, or MU_EPROTO naming it. */
static int read_session(struct mu_client *c, const cJSON *ans, struct mu_round *out)
{
  const cJSON *s = cJSON_GetObjectItemCaseSensitive(ans, "session");
  if (s == NULL)
    return 0;
  size_t n = cJSON_IsString(s) ? strlen(s->valuestring) : 0;
  if (n == 0 || n >= sizeof(out->session) || strspn(s->valuestring, "0123456789abcdef") != n) {
    mu__client_say(c, "invalid join answer: session is not 1-64 lowercase hex digits");
    return MU_EPROTO;
  }
  memcpy(out->session, s->valuestring, n + 1);
  return 0;
}

static int read_round(struct mu_client *c, const cJSON *ans, const struct mu_join_opts *o,
                      struct mu_round *out)
{
  static const char what[] = "invalid join answer";
  char *e = c->errmsg;
  size_t en = sizeof(c->errmsg);
  out->run_id = jdup(ans, "run_id");
  out->master_addr = jdup(ans, "master_addr");
  int rc = mu__answer_long(ans, what, "round", 1, 0, 1, LONG_MAX, &out->round, e, en);
  if (rc == 0)
    rc = int_field(c, ans, what, "node_rank", 1, 0, 0, &out->node_rank);
  if (rc == 0)
    rc = int_field(c, ans, what, "nnodes", 1, 0, 1, &out->nnodes);
  if (rc == 0)
    rc = int_field(c, ans, what, "rank_offset", 1, 0, 0, &out->rank_offset);
  if (rc == 0)
    rc = int_field(c, ans, what, "world_size", 1, 0, 1, &out->world_size);
  if (rc == 0)
    rc = int_field(c, ans, what, "local_world_size", 0, o->local_world_size, 1,
                   &out->local_world_size);
  long port = 0;
  if (rc == 0)
    rc = mu__answer_long(ans, what, "master_port", 0, 0, 0, 65535, &port, e, en);
  out->master_port = (int)port;
  if (rc == 0)
    rc = mu__answer_long(ans, what, "lease_ttl_ms", 0, 10000, 1, LONG_MAX, &out->lease_ttl_ms, e,
                         en);
  if (rc == 0)
    rc = int_field(c, ans, what, "restart_count", 0, 0, 0, &out->restart_count);
  if (rc == 0)
    rc = mu__answer_long(ans, what, "max_restarts", 0, -1, 0, LONG_MAX, &out->max_restarts, e, en);
  if (rc == 0)
    rc = read_session(c, ans, out);
  if (rc == 0)
    rc = read_members(c, ans, out);
  return rc;
}

static int musterd_join(struct mu_client *c, const char *run_id, const struct mu_join_opts *o,
                        struct mu_round *out)
{
  struct mu_buf path = MU_BUF_INIT(1024);
  cJSON *req = NULL, *ans = NULL;
  int rc = run_path(&path, run_id, "join", NULL, NULL);
  if (rc != 0 || o->node_id == NULL || o->addr == NULL) {
    rc = MU_EINVAL;
    goto out;
  }
  req = join_request(o);
  rc = call_json(c, "POST", path.data, req, o->join_timeout_ms > 0 ? o->join_timeout_ms : 600000,
                 &ans);
  if (rc == 0)
    rc = read_round(c, ans, o, out);
  if (rc != 0)
    mu_round_release(out);
out:
  cJSON_Delete(req);
  cJSON_Delete(ans);
  mu_buf_release(&path);
  return rc;
}

/* ---------------------------------------------------------------------------------------------
 * Membership
 */

static int musterd_heartbeat(struct mu_client *c, const char *run_id, const char *node_id,
                             long *round, int *waiting)
{
  struct mu_buf path = MU_BUF_INIT(1024);
  cJSON *req = NULL, *ans = NULL;
  int rc = run_path(&path, run_id, "heartbeat", NULL, NULL);
  if (rc != 0 || node_id == NULL) {
    rc = MU_EINVAL;
    goto out;
  }
  req = cJSON_CreateObject();
  cJSON_AddStringToObject(req, "node_id", node_id);
  rc = call_json(c, "POST", path.data, req, 0, &ans);
  if (rc != 0)
    goto out;
  if (round != NULL)
    *round = mu_json_get_long(ans, "round", -1);
  if (waiting != NULL)
    *waiting = (int)mu_json_get_long(ans, "waiting", 0);
out:
  cJSON_Delete(req);
  cJSON_Delete(ans);
  mu_buf_release(&path);
  return rc;
}

/* The event a watch answered. Returns: 0, or MU_EPROTO for a name that is none. */
static int watch_event(struct mu_client *c, const cJSON *ans, enum mu_watch_event *ev)
{
  static const enum mu_watch_event all[] = {MU_WATCH_NONE,       MU_WATCH_BROKEN, MU_WATCH_WAITING,
                                            MU_WATCH_SUPERSEDED, MU_WATCH_CLOSED, MU_WATCH_SHUT};
  const char *s = mu_json_get_str(ans, "event");
  for (size_t i = 0; s != NULL && i < sizeof(all) / sizeof(all[0]); i++) {
    if (strcmp(mu_watch_event_name(all[i]), s) == 0) {
      *ev = all[i];
      return 0;
    }
  }
  mu__client_say(c, "watch answered an unknown event '%s'", s != NULL ? s : "");
  return MU_EPROTO;
}

static int musterd_watch(struct mu_client *c, const char *run_id, const char *node_id, long round,
                         long timeout_ms, enum mu_watch_event *ev, int *waiting)
{
  struct mu_buf path = MU_BUF_INIT(1024);
  struct mu_buf q = MU_BUF_INIT(512);
  cJSON *ans = NULL;
  int rc = node_id == NULL ? MU_EINVAL : mu_buf_puts(&q, "?node_id=");
  if (rc == 0)
    rc = put_escaped(&q, node_id, 0);
  if (rc == 0)
    rc = mu_buf_printf(&q, "&round=%ld&timeout_ms=%ld%s", round, timeout_ms,
                       c->hold ? "&lost_on_close=1" : "");
  if (rc == 0)
    rc = run_path(&path, run_id, "watch", NULL, q.data);
  if (rc != 0) {
    rc = MU_EINVAL;
    goto out;
  }
  rc = call_json(c, "GET", path.data, NULL, timeout_ms, &ans);
  if (rc == 0)
    rc = watch_event(c, ans, ev);
  if (rc == 0 && waiting != NULL)
    *waiting = (int)mu_json_get_long(ans, "waiting", 0);
out:
  cJSON_Delete(ans);
  mu_buf_release(&path);
  mu_buf_release(&q);
  return rc;
}

/* The goodput of GET /v1/runs/{id} into `out`: standbys, unhealthy nodes (the first with its
 * output's first line), the restart count and budget. */
static void run_info_goodput(const cJSON *ans, struct mu_run_info *out)
{
  const cJSON *u = cJSON_GetObjectItemCaseSensitive(ans, "unhealthy");
  const cJSON *mr = cJSON_GetObjectItemCaseSensitive(ans, "max_restarts");
  out->standbys = (int)mu_json_get_long(ans, "standbys", 0);
  out->restart_count = (int)mu_json_get_long(ans, "restart_count", 0);
  out->max_restarts = cJSON_IsNumber(mr) ? (long)mr->valuedouble : -1;
  out->unhealthy = cJSON_IsArray(u) ? cJSON_GetArraySize(u) : 0;
  const cJSON *first = cJSON_IsArray(u) ? cJSON_GetArrayItem(u, 0) : NULL;
  const char *id = mu_json_get_str(first, "node_id"), *o = mu_json_get_str(first, "output");
  snprintf(out->unhealthy_node, sizeof(out->unhealthy_node), "%s", id ? id : "");
  snprintf(out->unhealthy_why, sizeof(out->unhealthy_why), "%.*s", o ? (int)strcspn(o, "\n") : 0,
           o ? o : "");
}

static int musterd_run_info(struct mu_client *c, const char *run_id, struct mu_run_info *out)
{
  struct mu_buf path = MU_BUF_INIT(1024);
  cJSON *ans = NULL;
  int rc = run_path(&path, run_id, NULL, NULL, NULL);
  if (rc != 0) {
    rc = MU_EINVAL;
    goto out;
  }
  rc = call_json(c, "GET", path.data, NULL, 0, &ans);
  if (rc != 0)
    goto out;
  out->round = mu_json_get_long(ans, "round", 0);
  out->nnodes = (int)mu_json_get_long(ans, "nnodes", 0);
  out->waiting = (int)mu_json_get_long(ans, "waiting", 0);
  out->min_nodes = (int)mu_json_get_long(ans, "min_nodes", 0);
  out->max_nodes = (int)mu_json_get_long(ans, "max_nodes", 0);
  const char *st = mu_json_get_str(ans, "state"), *rs = mu_json_get_str(ans, "round_state");
  snprintf(out->state, sizeof(out->state), "%s", st ? st : "");
  snprintf(out->round_state, sizeof(out->round_state), "%s", rs ? rs : "");
  run_info_goodput(ans, out);
out:
  cJSON_Delete(ans);
  mu_buf_release(&path);
  return rc;
}

static int simple_post(struct mu_client *c, const char *run_id, const char *what, cJSON *req)
{
  struct mu_buf path = MU_BUF_INIT(1024);
  cJSON *ans = NULL;
  int rc = run_path(&path, run_id, what, NULL, NULL);
  if (rc != 0) {
    rc = MU_EINVAL;
    goto out;
  }
  rc = call_json(c, "POST", path.data, req, 0, &ans);
out:
  cJSON_Delete(ans);
  cJSON_Delete(req);
  mu_buf_release(&path);
  return rc;
}

static int musterd_leave(struct mu_client *c, const char *run_id, const char *node_id,
                         int succeeded, const char *reason)
{
  if (node_id == NULL)
    return MU_EINVAL;
  cJSON *req = cJSON_CreateObject();
  cJSON_AddStringToObject(req, "node_id", node_id);
  cJSON_AddStringToObject(req, "status", succeeded ? "succeeded" : "failed");
  if (reason != NULL)
    cJSON_AddStringToObject(req, "reason", reason);
  return simple_post(c, run_id, "leave", req);
}

static int musterd_end(struct mu_client *c, const char *run_id, int succeeded, const char *reason)
{
  if (succeeded)
    return simple_post(c, run_id, "close", cJSON_CreateObject());
  cJSON *req = cJSON_CreateObject();
  cJSON_AddStringToObject(req, "reason", reason != NULL ? reason : "shut down");
  return simple_post(c, run_id, "shutdown", req);
}

static int musterd_barrier(struct mu_client *c, const char *run_id, const char *name, int count,
                           const char *id, long timeout_ms, long *generation)
{
  struct mu_buf path = MU_BUF_INIT(1024);
  cJSON *req = NULL, *ans = NULL;
  int rc = name == NULL || id == NULL || count < 1 ? MU_EINVAL : 0;
  if (rc == 0)
    rc = run_path(&path, run_id, "barrier/", name, NULL);
  if (rc != 0) {
    rc = MU_EINVAL;
    goto out;
  }
  req = cJSON_CreateObject();
  cJSON_AddNumberToObject(req, "count", count);
  cJSON_AddNumberToObject(req, "timeout_ms", (double)timeout_ms);
  cJSON_AddStringToObject(req, "id", id);
  rc = call_json(c, "POST", path.data, req, timeout_ms, &ans);
  if (rc == 0 && generation != NULL)
    *generation = mu_json_get_long(ans, "generation", 0);
out:
  cJSON_Delete(req);
  cJSON_Delete(ans);
  mu_buf_release(&path);
  return rc;
}

/* ---------------------------------------------------------------------------------------------
 * KV
 */

static int kv_path(struct mu_buf *path, const char *run_id, const char *key, const char *query)
{
  if (key == NULL || *key == '\0')
    return MU_EINVAL;
  return run_path(path, run_id, "kv/", key, query) != 0 ? MU_EINVAL : 0;
}

static int musterd_kv_put(struct mu_client *c, const char *run_id, const char *key, const void *val,
                          size_t len, long *version)
{
  struct mu_buf path = MU_BUF_INIT(1024);
  cJSON *ans = NULL;
  int rc = kv_path(&path, run_id, key, NULL);
  if (rc != 0 || (val == NULL && len > 0)) {
    rc = MU_EINVAL;
    goto out;
  }
  struct exchange x = {"PUT", path.data, "application/octet-stream", val, len, 0, 0, &ans, NULL};
  rc = exchange(c, &x);
  if (rc == 0 && version != NULL)
    *version = mu_json_get_long(ans, "version", 0);
out:
  cJSON_Delete(ans);
  mu_buf_release(&path);
  return rc;
}

static int musterd_kv_get(struct mu_client *c, const char *run_id, const char *key, long wait_ms,
                          char **val, size_t *len)
{
  struct mu_buf path = MU_BUF_INIT(1024);
  struct mu_buf raw = MU_BUF_INIT(0);
  char q[48] = "";
  if (wait_ms > 0)
    snprintf(q, sizeof(q), "?wait_ms=%ld", wait_ms);
  int rc = kv_path(&path, run_id, key, q[0] ? q : NULL);
  if (rc != 0)
    goto out;
  struct exchange x = {"GET", path.data, NULL, NULL, 0, wait_ms, 0, NULL, &raw};
  rc = exchange(c, &x);
  if (rc != 0)
    goto out;
  if (len != NULL)
    *len = raw.len;
  *val = raw.data != NULL ? mu_buf_detach(&raw) : mu_strdup("");
out:
  mu_buf_release(&raw);
  mu_buf_release(&path);
  return rc;
}

static int musterd_kv_add(struct mu_client *c, const char *run_id, const char *key, long delta,
                          long *value)
{
  struct mu_buf path = MU_BUF_INIT(1024);
  cJSON *ans = NULL;
  char q[48];
  snprintf(q, sizeof(q), "?add=%ld", delta);
  int rc = kv_path(&path, run_id, key, q);
  if (rc != 0)
    goto out;
  struct exchange x = {"POST", path.data, NULL, NULL, 0, 0, 0, &ans, NULL};
  rc = exchange(c, &x);
  if (rc == 0 && value != NULL)
    *value = mu_json_get_long(ans, "value", 0);
out:
  cJSON_Delete(ans);
  mu_buf_release(&path);
  return rc;
}

static int musterd_kv_delete(struct mu_client *c, const char *run_id, const char *key)
{
  struct mu_buf path = MU_BUF_INIT(1024);
  int rc = kv_path(&path, run_id, key, NULL);
  struct exchange x = {"DELETE", path.data, NULL, NULL, 0, 0, 0, NULL, NULL};
  if (rc == 0)
    rc = exchange(c, &x);
  mu_buf_release(&path);
  return rc;
}

/* ---------------------------------------------------------------------------------------------
 * Reading runs (muster rdzv): GET /v1/runs[/{id}], and the run events' long poll
 */

static int musterd_runs_json(struct mu_client *c, const char *run_id, cJSON **out)
{
  struct mu_buf path = MU_BUF_INIT(1024);
  int rc =
      run_id != NULL ? run_path(&path, run_id, NULL, NULL, NULL) : mu_buf_puts(&path, "/v1/runs");
  if (rc != 0) {
    mu_buf_release(&path);
    return MU_EINVAL;
  }
  struct exchange x = {"GET", path.data, NULL, NULL, 0, 0, MAX_RUNS, out, NULL};
  rc = exchange(c, &x);
  mu_buf_release(&path);
  return rc;
}

static int musterd_c10d_json(struct mu_client *c, const char *run_id, cJSON **out)
{
  struct mu_buf path = MU_BUF_INIT(1024);
  int rc = mu_buf_puts(&path, run_id != NULL ? "/v1/c10d/" : "/v1/c10d");
  if (rc == 0 && run_id != NULL)
    rc = put_escaped(&path, run_id, 0);
  if (rc != 0) {
    mu_buf_release(&path);
    return MU_EINVAL;
  }
  struct exchange x = {"GET", path.data, NULL, NULL, 0, 0, MAX_RUNS, out, NULL};
  rc = exchange(c, &x);
  mu_buf_release(&path);
  return rc;
}

static int musterd_changes(struct mu_client *c, const char *run_id, long long *cursor,
                           long timeout_ms, cJSON **events)
{
  (void)run_id; /* musterd's events are every run's; the caller filters */
  long wait = *cursor >= 0 ? timeout_ms : 0; /* the first call: the recent events, at once */
  char path[96];
  snprintf(path, sizeof(path), "/v1/events?after=%lld&timeout_ms=%ld", *cursor > 0 ? *cursor : 0,
           wait);
  struct exchange x = {"GET", path, NULL, NULL, 0, wait, 0, events, NULL};
  int rc = exchange(c, &x);
  if (rc != 0)
    return rc;
  *cursor = mu_json_get_long(*events, "seq", 0);
  if (wait > 0 && cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(*events, "events")) == 0) {
    cJSON_Delete(*events);
    *events = NULL;
    return MU_ETIMEDOUT;
  }
  return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Goodput: reports and health checks (docs/rendezvous.md, "Goodput")
 */

static int musterd_report(struct mu_client *c, const char *run_id, const char *node_id, long round,
                          enum mu_report_event ev, const char *reason, struct mu_report_answer *out)
{
  struct mu_buf path = MU_BUF_INIT(1024);
  cJSON *req = NULL, *ans = NULL;
  int rc = run_path(&path, run_id, "report", NULL, NULL);
  if (rc != 0 || node_id == NULL || round < 1) {
    rc = MU_EINVAL;
    goto out;
  }
  if (ev == MU_REPORT_FAILING) /* musterd sees a lost member's closed watch at once */
    goto out;
  req = cJSON_CreateObject();
  cJSON_AddStringToObject(req, "node_id", node_id);
  cJSON_AddNumberToObject(req, "round", (double)round);
  cJSON_AddStringToObject(req, "event", mu_report_event_name(ev));
  if (reason != NULL)
    cJSON_AddStringToObject(req, "reason", reason);
  rc = call_json(c, "POST", path.data, req, 0, &ans);
  if (rc != 0)
    goto out;
  const char *st = mu_json_get_str(ans, "state"), *why = mu_json_get_str(ans, "reason");
  const cJSON *mr = cJSON_GetObjectItemCaseSensitive(ans, "max_restarts");
  snprintf(out->state, sizeof(out->state), "%s", st ? st : "");
  snprintf(out->reason, sizeof(out->reason), "%s", why ? why : "");
  out->counted = mu_json_get_bool(ans, "counted", 0);
  out->restart_count = (int)mu_json_get_long(ans, "restart_count", 0);
  out->max_restarts = cJSON_IsNumber(mr) ? (long)mr->valuedouble : -1;
out:
  cJSON_Delete(req);
  cJSON_Delete(ans);
  mu_buf_release(&path);
  return rc;
}

static int musterd_health(struct mu_client *c, const char *run_id, const struct mu_join_opts *o,
                          int healthy, const char *output, long ttl_ms, int *unhealthy)
{
  struct mu_buf path = MU_BUF_INIT(1024);
  cJSON *req = NULL, *ans = NULL;
  int rc = run_path(&path, run_id, "health", NULL, NULL);
  if (rc != 0 || o == NULL || o->node_id == NULL || o->addr == NULL) {
    rc = MU_EINVAL;
    goto out;
  }
  req = join_request(o);
  cJSON_AddBoolToObject(req, "healthy", healthy != 0);
  if (output != NULL)
    cJSON_AddStringToObject(req, "output", output);
  if (ttl_ms > 0)
    cJSON_AddNumberToObject(req, "ttl_ms", (double)ttl_ms);
  rc = call_json(c, "POST", path.data, req, 0, &ans);
  if (rc == 0 && unhealthy != NULL)
    *unhealthy = (int)mu_json_get_long(ans, "unhealthy", 0);
out:
  cJSON_Delete(req);
  cJSON_Delete(ans);
  mu_buf_release(&path);
  return rc;
}

const struct mu_client_ops mu__client_musterd_ops = {
    .open = musterd_open,
    .close = musterd_close,
    .set_cancel_fd = musterd_set_cancel_fd,
    .set_token = musterd_set_token,
    .local_addr = musterd_local_addr,
    .join = musterd_join,
    .heartbeat = musterd_heartbeat,
    .watch = musterd_watch,
    .run_info = musterd_run_info,
    .leave = musterd_leave,
    .end = musterd_end,
    .barrier = musterd_barrier,
    .kv_put = musterd_kv_put,
    .kv_get = musterd_kv_get,
    .kv_add = musterd_kv_add,
    .kv_delete = musterd_kv_delete,
    .runs_json = musterd_runs_json,
    .changes = musterd_changes,
    .c10d_json = musterd_c10d_json,
    .report = musterd_report,
    .health = musterd_health,
};
