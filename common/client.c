/* The /v1 rendezvous client (include/muster/client.h): JSON over the blocking HTTP client. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "muster/client.h"

#include "json.h"
#include "alloc.h"
#include "buf.h"
#include "etcd3.h"
#include "http_client.h"
#include "opts.h"

#define MAX_ANSWER (4u << 20) /* 1 MiB values plus JSON framing, with room */
#define LONG_POLL_SLACK_MS 5000

struct mu_client {
  struct mu_http_client *http;
  struct mu_etcd3 *etcd; /* an etcd-v3:// endpoint: every call goes there (etcd3.h) */
  long timeout_ms;
  int last_status;
  char errmsg[512];
};

int mu_client_new(const char *endpoint, struct mu_client **out)
{
  char host[256];
  const char *p = endpoint;
  *out = NULL;
  if (p == NULL || *p == '\0')
    return MU_EINVAL;
  if (strncmp(p, MU_ETCD3_SCHEME, strlen(MU_ETCD3_SCHEME)) == 0) {
    struct mu_etcd3 *e = NULL;
    char err[256];
    if (mu_etcd3_new(p, &e, err, sizeof(err)) != 0)
      return MU_EINVAL;
    struct mu_client *c = mu_calloc(1, sizeof(*c));
    c->etcd = e;
    *out = c;
    return 0;
  }
  int https = 0, port = 0;
  if (mu_http_endpoint_parse(p, strlen(p), host, sizeof(host), &port, &https) != 0)
    return MU_EINVAL;
  struct mu_client *c = mu_calloc(1, sizeof(*c));
  c->http = mu_http_client_new(host, port);
  c->timeout_ms = 10000;
  /* security (docs/security.md): TLS from the scheme or the env, the token from the env */
  if (mu_http_client_tls_from_env(c->http, https) != 0) /* the first request says it too */
    snprintf(c->errmsg, sizeof(c->errmsg), "%s", mu_http_client_errmsg(c->http));
  mu_http_client_bearer_from_env(c->http); /* a bad token file: the first request says it */
  *out = c;
  return 0;
}

void mu_client_free(struct mu_client *c)
{
  if (c == NULL)
    return;
  mu_etcd3_free(c->etcd);
  mu_http_client_free(c->http);
  mu_free(c);
}

void mu_client_set_timeout(struct mu_client *c, long ms)
{
  if (c->etcd != NULL)
    mu_etcd3_set_timeout(c->etcd, ms);
  c->timeout_ms = ms > 0 ? ms : 1;
}

void mu_client_set_cancel_fd(struct mu_client *c, int fd)
{
  if (c->etcd != NULL) {
    mu_etcd3_set_cancel_fd(c->etcd, fd);
    return;
  }
  mu_http_client_set_cancel_fd(c->http, fd);
}

const char *mu_client_errmsg(const struct mu_client *c)
{
  if (c->etcd != NULL)
    return mu_etcd3_errmsg(c->etcd);
  return c->errmsg;
}

int mu_client_last_status(const struct mu_client *c)
{
  return c->last_status;
}

int mu_client_local_addr(const struct mu_client *c, char *out, size_t n)
{
  if (c->etcd != NULL)
    return mu_etcd3_local_addr(c->etcd, out, n);
  return mu_http_client_local_addr(c->http, out, n);
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

/* Maps an error answer to a code and keeps the server's words. */
static int map_error(struct mu_client *c, const char *path, struct mu_http_response *r)
{
  cJSON *j = cJSON_ParseWithLength(r->body.data ? r->body.data : "", r->body.len);
  const cJSON *code = cJSON_GetObjectItemCaseSensitive(j, "error");
  const cJSON *msg = cJSON_GetObjectItemCaseSensitive(j, "message");
  int rc = MU_EHTTP;
  if (!cJSON_IsString(code)) {
    snprintf(c->errmsg, sizeof(c->errmsg),
             "%s answered HTTP %d for %s, not a musterd /v1 answer (is the endpoint a musterd?)",
             "the endpoint", r->status, path);
    goto out;
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
    rc = MU_EAUTH; /* a credential missing, wrong, or outside its scopes: no retry helps */
  const cJSON *reason = cJSON_GetObjectItemCaseSensitive(j, "reason");
  snprintf(c->errmsg, sizeof(c->errmsg), "%s: %s%s%s", s,
           cJSON_IsString(msg) ? msg->valuestring : "(no message)",
           cJSON_IsString(reason) ? " (reason: " : "",
           cJSON_IsString(reason) ? reason->valuestring : "");
  if (cJSON_IsString(reason))
    strncat(c->errmsg, ")", sizeof(c->errmsg) - strlen(c->errmsg) - 1);
out:
  cJSON_Delete(j);
  return rc;
}

/* One exchange. On 200 with a JSON answer and jout != NULL, *jout is the parsed body
 * (caller frees with cJSON_Delete); with raw != NULL the body is moved into *raw. */
static int call(struct mu_client *c, const char *method, const char *path, const char *ctype,
                const void *body, size_t len, long extra_ms, cJSON **jout, struct mu_buf *raw)
{
  struct mu_http_response r;
  mu_http_response_init(&r, MAX_ANSWER);
  long t = c->timeout_ms + (extra_ms > 0 ? extra_ms + LONG_POLL_SLACK_MS : 0);
  if (t > 0x7fffffffL)
    t = 0x7fffffffL;
  c->errmsg[0] = '\0';
  c->last_status = 0;
  int rc = mu_http_request(c->http, method, path, ctype, body, len, (int)t, &r);
  if (rc != 0) {
    snprintf(c->errmsg, sizeof(c->errmsg), "%s", mu_http_client_errmsg(c->http));
    goto out;
  }
  c->last_status = r.status;
  if (r.status != 200) {
    rc = map_error(c, path, &r);
    goto out;
  }
  if (jout != NULL) {
    *jout = cJSON_ParseWithLength(r.body.data ? r.body.data : "", r.body.len);
    if (*jout == NULL || !cJSON_IsObject(*jout)) {
      cJSON_Delete(*jout);
      *jout = NULL;
      snprintf(c->errmsg, sizeof(c->errmsg), "answer to %s %s is not a JSON object", method, path);
      rc = MU_EPROTO;
    }
  }
  if (raw != NULL) {
    *raw = r.body;
    mu_buf_init(&r.body, 0);
  }
out:
  mu_http_response_release(&r);
  return rc;
}

static int call_json(struct mu_client *c, const char *method, const char *path, cJSON *req,
                     long extra_ms, cJSON **jout)
{
  char *body = req != NULL ? cJSON_PrintUnformatted(req) : NULL;
  int rc = call(c, method, path, body ? "application/json" : NULL, body, body ? strlen(body) : 0,
                extra_ms, jout, NULL);
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
 * Rendezvous
 */

void mu_round_release(struct mu_round *r)
{
  if (r == NULL)
    return;
  for (size_t i = 0; i < r->nmembers; i++) {
    mu_free(r->members[i].node_id);
    mu_free(r->members[i].addr);
  }
  mu_free(r->members);
  mu_free(r->run_id);
  mu_free(r->master_addr);
  memset(r, 0, sizeof(*r));
}

int mu_client_join(struct mu_client *c, const char *run_id, const struct mu_join_opts *o,
                   struct mu_round *out)
{
  if (c->etcd != NULL)
    return mu_etcd3_join(c->etcd, run_id, o, out);
  struct mu_buf path = MU_BUF_INIT(1024);
  cJSON *req = NULL, *ans = NULL;
  memset(out, 0, sizeof(*out));
  int rc = run_path(&path, run_id, "join", NULL, NULL);
  if (rc != 0 || o->node_id == NULL || o->addr == NULL) {
    rc = MU_EINVAL;
    goto out;
  }
  req = cJSON_CreateObject();
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
  rc = call_json(c, "POST", path.data, req, o->join_timeout_ms > 0 ? o->join_timeout_ms : 600000,
                 &ans);
  if (rc != 0)
    goto out;
  out->run_id = jdup(ans, "run_id");
  out->round = mu_json_get_long(ans, "round", -1);
  out->node_rank = (int)mu_json_get_long(ans, "node_rank", -1);
  out->nnodes = (int)mu_json_get_long(ans, "nnodes", -1);
  out->rank_offset = (int)mu_json_get_long(ans, "rank_offset", -1);
  out->world_size = (int)mu_json_get_long(ans, "world_size", -1);
  out->local_world_size = (int)mu_json_get_long(ans, "local_world_size", o->local_world_size);
  out->master_addr = jdup(ans, "master_addr");
  out->master_port = (int)mu_json_get_long(ans, "master_port", 0);
  out->lease_ttl_ms = mu_json_get_long(ans, "lease_ttl_ms", 10000);
  const cJSON *mem = cJSON_GetObjectItemCaseSensitive(ans, "members");
  int n = cJSON_IsArray(mem) ? cJSON_GetArraySize(mem) : 0;
  if (n > 0) {
    out->members = mu_calloc((size_t)n, sizeof(*out->members));
    const cJSON *m;
    cJSON_ArrayForEach(m, mem)
    {
      struct mu_member *d = &out->members[out->nmembers++];
      d->node_id = jdup(m, "node_id");
      d->addr = jdup(m, "addr");
      d->local_world_size = (int)mu_json_get_long(m, "local_world_size", 0);
      d->node_rank = (int)mu_json_get_long(m, "node_rank", -1);
      d->rank_offset = (int)mu_json_get_long(m, "rank_offset", -1);
    }
  }
  if (out->round < 0 || out->node_rank < 0 || out->nnodes <= 0 || out->rank_offset < 0 ||
      out->world_size <= 0 || out->node_rank >= out->nnodes) {
    snprintf(c->errmsg, sizeof(c->errmsg),
             "join answer lacks round/node_rank/nnodes/rank_offset/world_size");
    mu_round_release(out);
    rc = MU_EPROTO;
  }
out:
  cJSON_Delete(req);
  cJSON_Delete(ans);
  mu_buf_release(&path);
  return rc;
}

int mu_client_heartbeat(struct mu_client *c, const char *run_id, const char *node_id, long *round,
                        int *waiting)
{
  if (c->etcd != NULL)
    return mu_etcd3_heartbeat(c->etcd, run_id, node_id, round, waiting);
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

int mu_client_watch(struct mu_client *c, const char *run_id, const char *node_id, long round,
                    long timeout_ms, enum mu_watch_event *ev, int *waiting)
{
  if (c->etcd != NULL)
    return mu_etcd3_watch(c->etcd, run_id, node_id, round, timeout_ms, ev, waiting);
  struct mu_buf path = MU_BUF_INIT(1024);
  struct mu_buf q = MU_BUF_INIT(512);
  cJSON *ans = NULL;
  int rc = mu_buf_puts(&q, "?node_id=");
  if (node_id == NULL) {
    rc = MU_EINVAL;
    goto out;
  }
  if (rc == 0)
    rc = put_escaped(&q, node_id, 0);
  if (rc == 0)
    rc = mu_buf_printf(&q, "&round=%ld&timeout_ms=%ld", round, timeout_ms);
  if (rc == 0)
    rc = run_path(&path, run_id, "watch", NULL, q.data);
  if (rc != 0) {
    rc = MU_EINVAL;
    goto out;
  }
  rc = call_json(c, "GET", path.data, NULL, timeout_ms, &ans);
  if (rc != 0)
    goto out;
  const cJSON *e = cJSON_GetObjectItemCaseSensitive(ans, "event");
  const char *s = cJSON_IsString(e) ? e->valuestring : "";
  static const struct {
    const char *name;
    enum mu_watch_event ev;
  } names[] = {{"none", MU_WATCH_NONE},       {"broken", MU_WATCH_BROKEN},
               {"waiting", MU_WATCH_WAITING}, {"superseded", MU_WATCH_SUPERSEDED},
               {"closed", MU_WATCH_CLOSED},   {"shut", MU_WATCH_SHUT}};
  rc = MU_EPROTO;
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    if (strcmp(names[i].name, s) == 0) {
      *ev = names[i].ev;
      rc = 0;
    }
  }
  if (rc != 0)
    snprintf(c->errmsg, sizeof(c->errmsg), "watch answered an unknown event '%s'", s);
  if (waiting != NULL)
    *waiting = (int)mu_json_get_long(ans, "waiting", 0);
out:
  cJSON_Delete(ans);
  mu_buf_release(&path);
  mu_buf_release(&q);
  return rc;
}

int mu_client_run_info(struct mu_client *c, const char *run_id, struct mu_run_info *out)
{
  struct mu_buf path = MU_BUF_INIT(1024);
  cJSON *ans = NULL;
  memset(out, 0, sizeof(*out));
  if (c->etcd != NULL) {
    mu_buf_release(&path);
    return mu_etcd3_run_info(c->etcd, run_id, out);
  }
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

int mu_client_leave(struct mu_client *c, const char *run_id, const char *node_id, int succeeded,
                    const char *reason)
{
  if (c->etcd != NULL)
    return mu_etcd3_leave(c->etcd, run_id, node_id, succeeded, reason);
  if (node_id == NULL)
    return MU_EINVAL;
  cJSON *req = cJSON_CreateObject();
  cJSON_AddStringToObject(req, "node_id", node_id);
  cJSON_AddStringToObject(req, "status", succeeded ? "succeeded" : "failed");
  if (reason != NULL)
    cJSON_AddStringToObject(req, "reason", reason);
  return simple_post(c, run_id, "leave", req);
}

int mu_client_close(struct mu_client *c, const char *run_id)
{
  if (c->etcd != NULL)
    return mu_etcd3_end(c->etcd, run_id, 1, NULL);
  return simple_post(c, run_id, "close", cJSON_CreateObject());
}

int mu_client_shutdown(struct mu_client *c, const char *run_id, const char *reason)
{
  if (c->etcd != NULL)
    return mu_etcd3_end(c->etcd, run_id, 0, reason);
  cJSON *req = cJSON_CreateObject();
  cJSON_AddStringToObject(req, "reason", reason != NULL ? reason : "shut down");
  return simple_post(c, run_id, "shutdown", req);
}

int mu_client_barrier(struct mu_client *c, const char *run_id, const char *name, int count,
                      const char *id, long timeout_ms, long *generation)
{
  if (c->etcd != NULL)
    return mu_etcd3_barrier(c->etcd, run_id, name, count, id, timeout_ms, generation);
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

int mu_client_kv_put(struct mu_client *c, const char *run_id, const char *key, const void *val,
                     size_t len, long *version)
{
  if (c->etcd != NULL)
    return mu_etcd3_kv_put(c->etcd, run_id, key, val, len, version);
  struct mu_buf path = MU_BUF_INIT(1024);
  cJSON *ans = NULL;
  int rc = kv_path(&path, run_id, key, NULL);
  if (rc != 0 || (val == NULL && len > 0)) {
    rc = MU_EINVAL;
    goto out;
  }
  rc = call(c, "PUT", path.data, "application/octet-stream", val, len, 0, &ans, NULL);
  if (rc == 0 && version != NULL)
    *version = mu_json_get_long(ans, "version", 0);
out:
  cJSON_Delete(ans);
  mu_buf_release(&path);
  return rc;
}

int mu_client_kv_get(struct mu_client *c, const char *run_id, const char *key, long wait_ms,
                     char **val, size_t *len)
{
  if (c->etcd != NULL)
    return mu_etcd3_kv_get(c->etcd, run_id, key, wait_ms, val, len);
  struct mu_buf path = MU_BUF_INIT(1024);
  struct mu_buf raw = MU_BUF_INIT(0);
  char q[48] = "";
  *val = NULL;
  if (len != NULL)
    *len = 0;
  if (wait_ms > 0)
    snprintf(q, sizeof(q), "?wait_ms=%ld", wait_ms);
  int rc = kv_path(&path, run_id, key, q[0] ? q : NULL);
  if (rc != 0)
    goto out;
  rc = call(c, "GET", path.data, NULL, NULL, 0, wait_ms, NULL, &raw);
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

int mu_client_kv_add(struct mu_client *c, const char *run_id, const char *key, long delta,
                     long *value)
{
  if (c->etcd != NULL)
    return mu_etcd3_kv_add(c->etcd, run_id, key, delta, value);
  struct mu_buf path = MU_BUF_INIT(1024);
  cJSON *ans = NULL;
  char q[48];
  snprintf(q, sizeof(q), "?add=%ld", delta);
  int rc = kv_path(&path, run_id, key, q);
  if (rc != 0)
    goto out;
  rc = call(c, "POST", path.data, NULL, NULL, 0, 0, &ans, NULL);
  if (rc == 0 && value != NULL)
    *value = mu_json_get_long(ans, "value", 0);
out:
  cJSON_Delete(ans);
  mu_buf_release(&path);
  return rc;
}

int mu_client_kv_delete(struct mu_client *c, const char *run_id, const char *key)
{
  if (c->etcd != NULL)
    return mu_etcd3_kv_delete(c->etcd, run_id, key);
  struct mu_buf path = MU_BUF_INIT(1024);
  int rc = kv_path(&path, run_id, key, NULL);
  if (rc == 0)
    rc = call(c, "DELETE", path.data, NULL, NULL, 0, 0, NULL, NULL);
  mu_buf_release(&path);
  return rc;
}
