/* The /v1 HTTP surface of the native rendezvous: parses requests, calls the state machine
 * (rdzv.c), and turns its answers into JSON replies. Long polls (join, watch, barrier, KV wait)
 * are deferred requests whose rdzv wait is withdrawn when the client goes away.
 *
 * One prefix route ("/v1/") dispatches on the path itself: the endpoints nest a run id, and a
 * barrier name or KV key after it, which a flat route table cannot express.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "muster/errno.h"

#include "alloc.h"
#include "decimal.h"
#include "buf.h"
#include "http.h"
#include "opts.h"
#include "rdzv.h"
#include "v1.h"

#define MSG_MAX 768
#define DEFAULT_WATCH_MS 30000
#define DEFAULT_BARRIER_MS 30000
#define MAX_REQ_TIMEOUT_MS 86400000L /* one day */

struct v1 {
  struct rv_server *srv;
  struct mu_rdzv *rv;
  uint64_t anon; /* ids for barrier arrivals that name none */
};

/* A deferred long poll. */
struct pend {
  struct mu_rdzv_wait w;
  struct rv_req *req;
  struct v1 *v;
  int deferred; /* rv_req_defer() was called */
  int answered; /* the answer came while the handler still ran */
  char *name;   /* barrier name (for the reply) */
};

/* ---------------------------------------------------------------------------------------- */
/* Replies.                                                                                   */
/* ---------------------------------------------------------------------------------------- */

static int err_status(int err)
{
  switch (err) {
  case MU_RDZV_EBAD_REQUEST:
    return 400;
  case MU_RDZV_ENO_SUCH_RUN:
  case MU_RDZV_ENOT_MEMBER:
  case MU_RDZV_ENO_SUCH_KEY:
    return 404;
  case MU_RDZV_EJOIN_TIMEOUT:
  case MU_RDZV_EBARRIER_TIMEOUT:
  case MU_RDZV_EKV_TIMEOUT:
    return 408;
  case MU_RDZV_ECONFIG_MISMATCH:
  case MU_RDZV_ECOUNT_MISMATCH:
  case MU_RDZV_ENOT_A_COUNTER:
  case MU_RDZV_EREPLACED:
    return 409;
  case MU_RDZV_ERUN_CLOSED:
  case MU_RDZV_ERUN_SHUT:
    return 410;
  case MU_RDZV_ETOO_LARGE:
    return 413;
  case MU_RDZV_ETOO_MANY:
    return 429;
  case MU_RDZV_ESHUTTING_DOWN:
    return 503;
  }
  return 500;
}

/* Appends `s` as a JSON string (with quotes). */
static void json_str(struct mu_buf *b, const char *s)
{
  mu_buf_putc(b, '"');
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') {
      mu_buf_putc(b, '\\');
      mu_buf_putc(b, (char)*p);
    } else if (*p < 0x20) {
      mu_buf_printf(b, "\\u%04x", *p);
    } else {
      mu_buf_putc(b, (char)*p);
    }
  }
  mu_buf_putc(b, '"');
}

static void reply_buf(struct rv_req *req, int status, struct mu_buf *b)
{
  mu_buf_putc(b, '\n');
  rv_reply_take(req, status, "application/json", NULL, b);
  mu_buf_release(b);
}

/* {"error": code, "message": msg[, "reason": why the run ended]}. */
static void reply_err_code(struct v1 *v, struct rv_req *req, int status, const char *code,
                           const char *msg, const char *run_id, const char *extra_headers)
{
  struct mu_buf b = MU_BUF_INIT(1 << 16);
  mu_buf_puts(&b, "{\"error\":");
  json_str(&b, code);
  mu_buf_puts(&b, ",\"message\":");
  json_str(&b, msg && *msg ? msg : code);
  if (status == 410 && run_id && v && v->rv) {
    struct mu_rdzv_run *run = mu_rdzv_find(v->rv, run_id);
    if (run) {
      struct mu_rdzv_run_info info;
      mu_rdzv_run_info(run, &info);
      mu_buf_puts(&b, ",\"reason\":");
      json_str(&b, info.reason);
    }
  }
  mu_buf_puts(&b, "}\n");
  rv_reply_take(req, status, "application/json", extra_headers, &b);
  mu_buf_release(&b);
}

static void reply_err(struct v1 *v, struct rv_req *req, int err, const char *msg,
                      const char *run_id)
{
  reply_err_code(v, req, err_status(err), mu_rdzv_err_code(err), msg, run_id, NULL);
}

static void bad_request(struct rv_req *req, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void bad_request(struct rv_req *req, const char *fmt, ...)
{
  char msg[MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  reply_err_code(NULL, req, 400, "bad_request", msg, NULL, NULL);
}

/* A generic message for a state-machine error without one. */
static const char *err_text(int err, const char *run_id, const char *what, char *msg, size_t size)
{
  switch (err) {
  case MU_RDZV_ENO_SUCH_RUN:
    snprintf(msg, size, "no run '%s' (never joined, or finished and forgotten)", run_id);
    break;
  case MU_RDZV_ENOT_MEMBER:
    snprintf(msg, size,
             "node '%s' is not a member of run '%s' (its lease expired or it left); join again",
             what, run_id);
    break;
  case MU_RDZV_ENO_SUCH_KEY:
    snprintf(msg, size, "no key '%s' in run '%s'", what, run_id);
    break;
  case MU_RDZV_ERUN_CLOSED:
    snprintf(msg, size, "run '%s' is closed; start a new run id to run again", run_id);
    break;
  case MU_RDZV_ERUN_SHUT:
    snprintf(msg, size, "run '%s' was shut down; start a new run id to run again", run_id);
    break;
  case MU_RDZV_ENOT_A_COUNTER:
    snprintf(msg, size, "key '%s' holds a value that is not a decimal integer; ?add=N needs one",
             what);
    break;
  case MU_RDZV_ETOO_LARGE:
    snprintf(msg, size, "value too large: one value may hold %d bytes and a run %u bytes in all",
             MU_RDZV_VALUE_MAX, MU_RDZV_KV_BYTES_MAX);
    break;
  case MU_RDZV_ETOO_MANY:
    snprintf(msg, size, "run '%s' holds %d keys, its limit; delete keys it no longer needs", run_id,
             MU_RDZV_KV_KEYS_MAX);
    break;
  case MU_RDZV_EBAD_REQUEST:
    snprintf(msg, size, "bad request for '%s' (key of 1-%d bytes; counter overflow?)", what,
             MU_RDZV_KEY_MAX);
    break;
  default:
    snprintf(msg, size, "%s", mu_rdzv_err_code(err));
  }
  return msg;
}

/* ---------------------------------------------------------------------------------------- */
/* Request parsing.                                                                           */
/* ---------------------------------------------------------------------------------------- */

/* Parses the body as a JSON object; an empty body is `{}` when `empty_ok`.
 * Returns: the object, or NULL after answering 400. */
static cJSON *body_json_or_reply(struct rv_req *req, int empty_ok)
{
  if (req->body_len == 0 && empty_ok)
    return cJSON_CreateObject();
  if (req->body_len == 0) {
    bad_request(req, "the request needs a JSON object body (see docs/rendezvous.md)");
    return NULL;
  }
  cJSON *j = cJSON_ParseWithLength(req->body, req->body_len);
  if (j == NULL || !cJSON_IsObject(j)) {
    cJSON_Delete(j);
    bad_request(req, "the body is not a JSON object; send e.g. {\"node_id\": \"n1\", ...}");
    return NULL;
  }
  return j;
}

/* Looks up field `name`, which must be `what` ("a string", "an integer"); null counts as
 * absent. Returns: 1 with *f, 0 when absent and optional, or -1 after answering 400 when absent
 * and required. */
static int field_get_or_reply(struct rv_req *req, const cJSON *j, const char *name, int required,
                              const char *what, const cJSON **f)
{
  *f = cJSON_GetObjectItemCaseSensitive(j, name);
  if (*f != NULL && !cJSON_IsNull(*f))
    return 1;
  if (!required)
    return 0;
  bad_request(req, "field '%s' is missing; it must be %s", name, what);
  return -1;
}

/* Reads string field `name`. Returns: 0 (with *out, or NULL when absent and optional), or -1
 * after answering 400. */
static int field_str_or_reply(struct rv_req *req, const cJSON *j, const char *name, int required,
                              const char **out)
{
  const cJSON *f = NULL;
  *out = NULL;
  int rc = field_get_or_reply(req, j, name, required, "a string", &f);
  if (rc <= 0)
    return rc;
  if (!cJSON_IsString(f)) {
    bad_request(req, "field '%s' must be a string", name);
    return -1;
  }
  *out = f->valuestring;
  return 0;
}

/* Reads integer field `name` within [min, max]; absent -> `def` unless required. */
static int field_int_or_reply(struct rv_req *req, const cJSON *j, const char *name, int required,
                              int64_t min, int64_t max, int64_t def, int64_t *out)
{
  const cJSON *f = NULL;
  *out = def;
  int rc = field_get_or_reply(req, j, name, required, "an integer", &f);
  if (rc <= 0)
    return rc;
  if (!cJSON_IsNumber(f)) {
    bad_request(req, "field '%s' must be an integer", name);
    return -1;
  }
  /* Range first: casting an out-of-range double to an integer is undefined. */
  double d = f->valuedouble;
  if (!(d >= (double)min && d <= (double)max)) {
    bad_request(req, "field '%s' must be an integer between %" PRId64 " and %" PRId64 ", got %g",
                name, min, max, d);
    return -1;
  }
  if (d != (double)(int64_t)d) {
    bad_request(req, "field '%s' must be an integer, got %g", name, d);
    return -1;
  }
  *out = (int64_t)d;
  return 0;
}

/* Reads query parameter `name` as an integer in [min, max]; absent -> def. */
static int param_int_or_reply(struct rv_req *req, const char *name, int required, long min,
                              long max, long def, long *out)
{
  const char *s = rv_req_param(req, name);
  *out = def;
  if (s == NULL) {
    if (!required)
      return 0;
    bad_request(req, "query parameter '%s' is missing; it must be an integer", name);
    return -1;
  }
  if (mu_parse_long(s, min, max, out) != 0) {
    bad_request(req, "query parameter '%s' must be an integer between %ld and %ld, got '%s'", name,
                min, max, s);
    return -1;
  }
  return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Long polls.                                                                                */
/* ---------------------------------------------------------------------------------------- */

static struct pend *pend_new(struct v1 *v, struct rv_req *req, mu_rdzv_wait_cb *cb)
{
  struct pend *p = mu_calloc(1, sizeof(*p));
  p->w.cb = cb;
  p->w.data = p;
  p->req = req;
  p->v = v;
  return p;
}

static void pend_free(struct pend *p)
{
  mu_free(p->name);
  mu_free(p);
}

/* The request of `p` was answered: free it now if deferred, else let the handler do it. */
static void pend_answered(struct pend *p)
{
  p->req = NULL;
  if (p->deferred)
    pend_free(p);
  else
    p->answered = 1;
}

static void on_gone(struct rv_req *req, void *data)
{
  (void)req;
  struct pend *p = data;
  mu_rdzv_wait_cancel(&p->w);
  pend_free(p);
}

/* After starting a wait in a handler: defer the request, or free `p` if it was answered. */
static void pend_settle(struct pend *p, struct rv_req *req)
{
  if (p->answered) {
    pend_free(p);
    return;
  }
  p->deferred = 1;
  rv_req_defer(req, on_gone, p);
}

static void on_join(struct mu_rdzv_wait *w, const struct mu_rdzv_answer *a)
{
  struct pend *p = w->data;
  if (a->err != 0) {
    reply_err(p->v, p->req, a->err, a->message, a->run_id);
    pend_answered(p);
    return;
  }
  struct mu_buf b = MU_BUF_INIT((size_t)1 << 30);
  mu_buf_printf(&b,
                "{\"run_id\":\"%s\",\"round\":%" PRIu64 ",\"node_rank\":%" PRIu32
                ",\"nnodes\":%" PRIu32 ",\"rank_offset\":%" PRIu64 ",\"world_size\":%" PRIu64
                ",\"local_world_size\":%" PRIu32 ",\"master_addr\":\"%s\",\"master_port\":%" PRIu32
                ",\"lease_ttl_ms\":%" PRIu32,
                a->run_id, a->round->number, a->self.node_rank, a->round->nnodes,
                a->self.rank_offset, a->round->world_size, a->self.local_world_size, a->master.addr,
                a->master.master_port, a->lease_ttl_ms);
  if (a->with_members) {
    size_t len = 0;
    const char *m = mu_rdzv_round_members_json(a->round, &len);
    mu_buf_puts(&b, ",\"members\":");
    mu_buf_append(&b, m, len);
  }
  mu_buf_putc(&b, '}');
  reply_buf(p->req, 200, &b);
  pend_answered(p);
}

static void on_watch(struct mu_rdzv_wait *w, const struct mu_rdzv_answer *a)
{
  struct pend *p = w->data;
  if (a->err != 0) {
    reply_err(p->v, p->req, a->err, a->message, a->run_id);
  } else {
    struct mu_buf b = MU_BUF_INIT(4096);
    mu_buf_printf(&b, "{\"round\":%" PRIu64 ",\"event\":\"%s\",\"waiting\":%" PRIu32 "}",
                  a->round_number, a->event, a->waiting);
    reply_buf(p->req, 200, &b);
  }
  pend_answered(p);
}

static void on_barrier(struct mu_rdzv_wait *w, const struct mu_rdzv_answer *a)
{
  struct pend *p = w->data;
  if (a->err != 0) {
    reply_err(p->v, p->req, a->err, a->message, a->run_id);
  } else {
    struct mu_buf b = MU_BUF_INIT(4096);
    mu_buf_puts(&b, "{\"name\":");
    json_str(&b, p->name);
    mu_buf_printf(&b, ",\"count\":%" PRIu32 ",\"generation\":%" PRIu64 "}", a->count,
                  a->generation);
    reply_buf(p->req, 200, &b);
  }
  pend_answered(p);
}

static void reply_value(struct rv_req *req, const char *value, size_t len, uint64_t version)
{
  char hdr[64];
  snprintf(hdr, sizeof(hdr), "X-Muster-Kv-Version: %" PRIu64 "\r\n", version);
  rv_reply(req, 200, "application/octet-stream", hdr, value, len);
}

static void on_kv(struct mu_rdzv_wait *w, const struct mu_rdzv_answer *a)
{
  struct pend *p = w->data;
  if (a->err != 0)
    reply_err(p->v, p->req, a->err, a->message, a->run_id);
  else
    reply_value(p->req, a->value, a->value_len, a->version);
  pend_answered(p);
}

/* ---------------------------------------------------------------------------------------- */
/* Handlers.                                                                                  */
/* ---------------------------------------------------------------------------------------- */

static void h_join(struct v1 *v, struct rv_req *req, const char *run_id)
{
  cJSON *j = body_json_or_reply(req, 0);
  if (j == NULL)
    return;
  struct mu_rdzv_join_req q;
  int64_t lws = 0, port = 0, min = 0, max = 0, lc = -1, jt = -1, ttl = -1;
  memset(&q, 0, sizeof(q));
  if (field_str_or_reply(req, j, "node_id", 1, &q.node_id) != 0 ||
      field_str_or_reply(req, j, "addr", 1, &q.addr) != 0 ||
      field_int_or_reply(req, j, "local_world_size", 0, 1, 65536, 1, &lws) != 0 ||
      field_int_or_reply(req, j, "master_port", 0, 0, 65535, 0, &port) != 0 ||
      field_int_or_reply(req, j, "min_nodes", 1, 1, MU_RDZV_NODES_MAX, 0, &min) != 0 ||
      field_int_or_reply(req, j, "max_nodes", 0, 0, MU_RDZV_NODES_MAX, 0, &max) != 0 ||
      field_int_or_reply(req, j, "last_call_ms", 0, 0, MAX_REQ_TIMEOUT_MS, -1, &lc) != 0 ||
      field_int_or_reply(req, j, "join_timeout_ms", 0, 1, MAX_REQ_TIMEOUT_MS, -1, &jt) != 0 ||
      field_int_or_reply(req, j, "lease_ttl_ms", 0, 1, MAX_REQ_TIMEOUT_MS, -1, &ttl) != 0)
    goto out;
  const cJSON *mem = cJSON_GetObjectItemCaseSensitive(j, "members");
  if (mem != NULL && !cJSON_IsBool(mem)) {
    bad_request(req, "field 'members' must be true or false");
    goto out;
  }
  q.with_members = mem == NULL || cJSON_IsTrue(mem);
  q.local_world_size = (uint32_t)lws;
  q.master_port = (uint32_t)port;
  q.config.min_nodes = (uint32_t)min;
  q.config.max_nodes = (uint32_t)max;
  q.config.last_call_ms = lc;
  q.config.join_timeout_ms = jt;
  q.config.lease_ttl_ms = ttl;
  char msg[MSG_MAX];
  struct pend *p = pend_new(v, req, on_join);
  int rc = mu_rdzv_join(v->rv, run_id, &q, &p->w, msg, sizeof(msg));
  if (rc != 0) {
    pend_free(p);
    reply_err(v, req, rc, msg, run_id);
    goto out;
  }
  pend_settle(p, req);
out:
  cJSON_Delete(j);
}

/* The common heartbeat body, {"node_id":"ID"} (blanks allowed around the tokens) with a plain ID
 * (no escapes, no control bytes), read without building a cJSON tree. Copies the ID into `id`.
 * Returns: 1 when the body has exactly that shape, else 0 (the caller parses it as JSON). */
static int heartbeat_fast_id(const struct rv_req *req, char *id, size_t cap)
{
  const char *p = req->body, *end = req->body + req->body_len;
#define SKIP_WS()                                                                                  \
  while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))                         \
  p++
  SKIP_WS();
  if (p == end || *p++ != '{')
    return 0;
  SKIP_WS();
  if ((size_t)(end - p) < 9 || memcmp(p, "\"node_id\"", 9) != 0)
    return 0;
  p += 9;
  SKIP_WS();
  if (p == end || *p++ != ':')
    return 0;
  SKIP_WS();
  if (p == end || *p++ != '"')
    return 0;
  const char *start = p;
  while (p < end && *p != '"' && *p != '\\' && (unsigned char)*p >= 0x20)
    p++;
  if (p == end || *p != '"' || (size_t)(p - start) >= cap)
    return 0;
  size_t n = (size_t)(p - start);
  p++;
  SKIP_WS();
  if (p == end || *p++ != '}')
    return 0;
  SKIP_WS();
#undef SKIP_WS
  if (p != end)
    return 0;
  memcpy(id, start, n);
  id[n] = '\0';
  return 1;
}

/* Appends the decimal `v` at `p`. Returns: the end. */
static char *put_dec(char *p, uint64_t v)
{
  return p + rv_dec(p, v);
}

static void h_heartbeat(struct v1 *v, struct rv_req *req, const char *run_id)
{
  const char *node_id = NULL;
  cJSON *j = NULL;
  char fast[256];
  if (heartbeat_fast_id(req, fast, sizeof(fast))) {
    node_id = fast; /* the hot path: one heartbeat per node per lease_ttl_ms / 3 */
  } else {
    j = body_json_or_reply(req, 1);
    if (j == NULL)
      return;
    if (field_str_or_reply(req, j, "node_id", 0, &node_id) != 0)
      goto out;
  }
  if (node_id == NULL)
    node_id = rv_req_param(req, "node_id");
  if (node_id == NULL) {
    bad_request(req, "field 'node_id' is missing; send {\"node_id\": \"...\"}");
    goto out;
  }
  struct mu_rdzv_answer a;
  int rc = mu_rdzv_heartbeat(v->rv, run_id, node_id, &a);
  if (rc != 0) {
    char msg[MSG_MAX];
    reply_err(v, req, rc, err_text(rc, run_id, node_id, msg, sizeof(msg)), run_id);
    goto out;
  }
  /* {"round":N,"state":"S","waiting":W}\n, without printf: the state names are short and
   * static, so 128 bytes always fit */
  char body[128], *p = body;
  size_t sl = strlen(a.state);
  if (sl > 40)
    sl = 40;
  memcpy(p, "{\"round\":", 9);
  p = put_dec(p + 9, a.round_number);
  memcpy(p, ",\"state\":\"", 10);
  p += 10;
  memcpy(p, a.state, sl);
  p += sl;
  memcpy(p, "\",\"waiting\":", 12);
  p = put_dec(p + 12, a.waiting);
  memcpy(p, "}\n", 2);
  p += 2;
  rv_reply(req, 200, "application/json", NULL, body, (size_t)(p - body));
out:
  cJSON_Delete(j);
}

static void h_watch(struct v1 *v, struct rv_req *req, const char *run_id)
{
  const char *node_id = rv_req_param(req, "node_id");
  long round = 0, timeout = 0;
  if (node_id == NULL || *node_id == '\0') {
    bad_request(req, "query parameter 'node_id' is missing: GET .../watch?node_id=ID&round=N");
    return;
  }
  if (param_int_or_reply(req, "round", 1, 0, (long)INT64_MAX, 0, &round) != 0 ||
      param_int_or_reply(req, "timeout_ms", 0, 0, MAX_REQ_TIMEOUT_MS, DEFAULT_WATCH_MS, &timeout) !=
          0)
    return;
  struct pend *p = pend_new(v, req, on_watch);
  int rc = mu_rdzv_watch(v->rv, run_id, node_id, (uint64_t)round, (uint64_t)timeout, &p->w);
  if (rc != 0) {
    char msg[MSG_MAX];
    pend_free(p);
    reply_err(v, req, rc, err_text(rc, run_id, node_id, msg, sizeof(msg)), run_id);
    return;
  }
  pend_settle(p, req);
}

static void reply_state(struct v1 *v, struct rv_req *req, const char *run_id)
{
  struct mu_rdzv_run *run = mu_rdzv_find(v->rv, run_id);
  const char *state = "gone";
  if (run) {
    struct mu_rdzv_run_info i;
    mu_rdzv_run_info(run, &i);
    state = mu_rdzv_run_state_name(i.state);
  }
  struct mu_buf b = MU_BUF_INIT(4096);
  mu_buf_printf(&b, "{\"run_id\":\"%s\",\"state\":\"%s\"}", run_id, state);
  reply_buf(req, 200, &b);
}

static void h_leave(struct v1 *v, struct rv_req *req, const char *run_id)
{
  const char *node_id = NULL, *status = NULL, *reason = NULL;
  cJSON *j = body_json_or_reply(req, 0);
  if (j == NULL)
    return;
  if (field_str_or_reply(req, j, "node_id", 1, &node_id) != 0 ||
      field_str_or_reply(req, j, "status", 1, &status) != 0 ||
      field_str_or_reply(req, j, "reason", 0, &reason) != 0)
    goto out;
  int failed;
  if (strcmp(status, "succeeded") == 0) {
    failed = 0;
  } else if (strcmp(status, "failed") == 0) {
    failed = 1;
  } else {
    bad_request(req, "field 'status' must be \"succeeded\" or \"failed\", got \"%.64s\"", status);
    goto out;
  }
  int rc = mu_rdzv_leave(v->rv, run_id, node_id, failed, reason);
  if (rc != 0) {
    char msg[MSG_MAX];
    reply_err(v, req, rc, err_text(rc, run_id, node_id, msg, sizeof(msg)), run_id);
    goto out;
  }
  reply_state(v, req, run_id);
out:
  cJSON_Delete(j);
}

static void h_end(struct v1 *v, struct rv_req *req, const char *run_id, int shut)
{
  const char *reason = NULL;
  cJSON *j = body_json_or_reply(req, 1);
  if (j == NULL)
    return;
  if (field_str_or_reply(req, j, "reason", 0, &reason) != 0)
    goto out;
  int rc = mu_rdzv_end(v->rv, run_id, shut, reason);
  if (rc != 0) {
    char msg[MSG_MAX];
    if (rc == MU_RDZV_ERUN_CLOSED || rc == MU_RDZV_ERUN_SHUT)
      snprintf(msg, sizeof(msg), "run '%s' already ended as %s; it cannot be %s", run_id,
               rc == MU_RDZV_ERUN_CLOSED ? "closed" : "shut", shut ? "shut down" : "closed");
    else
      err_text(rc, run_id, "", msg, sizeof(msg));
    reply_err(v, req, rc, msg, run_id);
    goto out;
  }
  reply_state(v, req, run_id);
out:
  cJSON_Delete(j);
}

static void member_json(struct mu_buf *b, const struct mu_rdzv_member *m)
{
  mu_buf_printf(b,
                "{\"node_id\":\"%s\",\"addr\":\"%s\",\"local_world_size\":%" PRIu32
                ",\"node_rank\":%" PRIu32 ",\"rank_offset\":%" PRIu64 "}",
                m->node_id, m->addr, m->local_world_size, m->node_rank, m->rank_offset);
}

static void h_run(struct v1 *v, struct rv_req *req, const char *run_id)
{
  struct mu_rdzv_run *run = mu_rdzv_find(v->rv, run_id);
  if (run == NULL) {
    char msg[MSG_MAX];
    reply_err(v, req, MU_RDZV_ENO_SUCH_RUN,
              err_text(MU_RDZV_ENO_SUCH_RUN, run_id, "", msg, sizeof(msg)), run_id);
    return;
  }
  struct mu_rdzv_run_info i;
  mu_rdzv_run_info(run, &i);
  struct mu_buf b = MU_BUF_INIT((size_t)1 << 30);
  mu_buf_printf(&b, "{\"run_id\":\"%s\",\"state\":\"%s\",\"reason\":", i.run_id,
                mu_rdzv_run_state_name(i.state));
  json_str(&b, i.reason);
  mu_buf_printf(&b,
                ",\"round\":%" PRIu64 ",\"round_state\":\"%s\",\"min_nodes\":%" PRIu32
                ",\"max_nodes\":%" PRIu32 ",\"nnodes\":%" PRIu32 ",\"waiting\":%" PRIu32
                ",\"nodes\":%" PRIu32,
                i.round, mu_rdzv_round_state_name(i.round_state), i.min_nodes, i.max_nodes,
                i.nnodes, i.waiting, i.nodes);
  if (i.last_round && i.nnodes <= 10000) {
    size_t len = 0;
    const char *m = mu_rdzv_round_members_json(i.last_round, &len);
    mu_buf_puts(&b, ",\"members\":");
    mu_buf_append(&b, m, len);
  } else if (i.last_round) {
    /* Only the master: a 100k-member list would not fit one reply. */
    struct mu_rdzv_member m;
    mu_rdzv_round_member(i.last_round, 0, &m);
    mu_buf_puts(&b, ",\"members_omitted\":true,\"members\":[");
    member_json(&b, &m);
    mu_buf_putc(&b, ']');
  } else {
    mu_buf_puts(&b, ",\"members\":[]");
  }
  mu_buf_printf(&b,
                ",\"config\":{\"min_nodes\":%" PRIu32 ",\"max_nodes\":%" PRIu32
                ",\"last_call_ms\":%" PRIu32 ",\"join_timeout_ms\":%" PRIu32
                ",\"lease_ttl_ms\":%" PRIu32 "}}",
                i.min_nodes, i.max_nodes, i.last_call_ms, i.join_timeout_ms, i.lease_ttl_ms);
  reply_buf(req, 200, &b);
}

static void h_runs(struct v1 *v, struct rv_req *req)
{
  struct mu_buf b = MU_BUF_INIT((size_t)64 << 20);
  mu_buf_puts(&b, "{\"runs\":[");
  int first = 1;
  for (struct mu_rdzv_run *r = mu_rdzv_next_run(v->rv, NULL); r; r = mu_rdzv_next_run(v->rv, r)) {
    struct mu_rdzv_run_info i;
    mu_rdzv_run_info(r, &i);
    mu_buf_printf(&b,
                  "%s{\"run_id\":\"%s\",\"state\":\"%s\",\"round\":%" PRIu64
                  ",\"round_state\":\"%s\",\"nnodes\":%" PRIu32 ",\"waiting\":%" PRIu32 "}",
                  first ? "" : ",", i.run_id, mu_rdzv_run_state_name(i.state), i.round,
                  mu_rdzv_round_state_name(i.round_state), i.nnodes, i.waiting);
    first = 0;
  }
  mu_buf_puts(&b, "]}");
  reply_buf(req, 200, &b);
}

static void h_barrier(struct v1 *v, struct rv_req *req, const char *run_id, const char *name)
{
  const char *id = NULL;
  int64_t count = 0, timeout = 0;
  char anon[64];
  cJSON *j = body_json_or_reply(req, 0);
  if (j == NULL)
    return;
  if (field_int_or_reply(req, j, "count", 1, 1, (int64_t)MU_RDZV_NODES_MAX * 64, 0, &count) != 0 ||
      field_int_or_reply(req, j, "timeout_ms", 0, 0, MAX_REQ_TIMEOUT_MS, DEFAULT_BARRIER_MS,
                         &timeout) != 0 ||
      field_str_or_reply(req, j, "id", 0, &id) != 0)
    goto out;
  if (id == NULL) {
    snprintf(anon, sizeof(anon), "anonymous-%" PRIu64, ++v->anon);
    id = anon;
  }
  char msg[MSG_MAX];
  struct pend *p = pend_new(v, req, on_barrier);
  p->name = mu_strdup(name);
  int rc = mu_rdzv_barrier(v->rv, run_id, name, (uint32_t)count, (uint64_t)timeout, id, &p->w, msg,
                           sizeof(msg));
  if (rc != 0) {
    pend_free(p);
    reply_err(v, req, rc, msg, run_id);
    goto out;
  }
  pend_settle(p, req);
out:
  cJSON_Delete(j);
}

static void h_kv(struct v1 *v, struct rv_req *req, const char *run_id, const char *key)
{
  char msg[MSG_MAX];
  int rc;
  if (req->method == RV_PUT) {
    uint64_t version = 0;
    rc = mu_rdzv_kv_set(v->rv, run_id, key, req->body, req->body_len, &version);
    if (rc != 0) {
      reply_err(v, req, rc, err_text(rc, run_id, key, msg, sizeof(msg)), run_id);
      return;
    }
    struct mu_buf b = MU_BUF_INIT(256);
    mu_buf_printf(&b, "{\"version\":%" PRIu64 "}", version);
    reply_buf(req, 200, &b);
  } else if (req->method == RV_GET || req->method == RV_HEAD) {
    long wait = -1;
    if (param_int_or_reply(req, "wait_ms", 0, 0, MAX_REQ_TIMEOUT_MS, -1, &wait) != 0)
      return;
    struct mu_rdzv_answer a;
    struct pend *p = wait >= 0 ? pend_new(v, req, on_kv) : NULL;
    rc = mu_rdzv_kv_get(v->rv, run_id, key, &a, wait >= 0 ? (uint64_t)wait : 0, p ? &p->w : NULL);
    if (rc == 1) {
      pend_settle(p, req);
      return;
    }
    if (p)
      pend_free(p);
    if (rc != 0) {
      reply_err(v, req, rc, err_text(rc, run_id, key, msg, sizeof(msg)), run_id);
      return;
    }
    reply_value(req, a.value, a.value_len, a.version);
  } else if (req->method == RV_DELETE) {
    rc = mu_rdzv_kv_del(v->rv, run_id, key);
    if (rc != 0) {
      reply_err(v, req, rc, err_text(rc, run_id, key, msg, sizeof(msg)), run_id);
      return;
    }
    struct mu_buf b = MU_BUF_INIT(256);
    mu_buf_puts(&b, "{\"deleted\":true}");
    reply_buf(req, 200, &b);
  } else {
    const char *add = rv_req_param(req, "add");
    long delta = 0;
    if (add == NULL) {
      bad_request(req, "POST on a key needs ?add=N (an integer counter); use PUT to set a value");
      return;
    }
    if (mu_parse_long(add, -(long)INT64_MAX, (long)INT64_MAX, &delta) != 0) {
      bad_request(req, "query parameter 'add' must be an integer, got '%.64s'", add);
      return;
    }
    int64_t result = 0;
    rc = mu_rdzv_kv_add(v->rv, run_id, key, delta, &result);
    if (rc != 0) {
      reply_err(v, req, rc, err_text(rc, run_id, key, msg, sizeof(msg)), run_id);
      return;
    }
    struct mu_buf b = MU_BUF_INIT(256);
    mu_buf_printf(&b, "{\"value\":%" PRId64 "}", result);
    reply_buf(req, 200, &b);
  }
}

/* Answers 405 unless the request's method is in `allowed`. Returns: 0 if allowed, else -1. */
static int method_or_reply(struct rv_req *req, unsigned allowed, const char *allow_text,
                           const char *what)
{
  if (req->method & allowed)
    return 0;
  char msg[MSG_MAX], hdr[128];
  snprintf(msg, sizeof(msg), "%s %s is not supported; use %s", req->method_name, what, allow_text);
  snprintf(hdr, sizeof(hdr), "Allow: %s\r\n", allow_text);
  reply_err_code(NULL, req, 405, "method_not_allowed", msg, NULL, hdr);
  return -1;
}

static void v1_dispatch(struct rv_req *req)
{
  struct v1 *v = rv_server_module_data(req->srv, "rdzv");
  if (v == NULL || v->rv == NULL || rv_server_closing(req->srv)) {
    reply_err_code(NULL, req, 503, "shutting_down", "musterd is shutting down", NULL, NULL);
    return;
  }
  const char *path = req->path;
  if (strcmp(path, "/v1/runs") == 0 || strcmp(path, "/v1/runs/") == 0) {
    if (method_or_reply(req, RV_GET | RV_HEAD, "GET", "/v1/runs") == 0)
      h_runs(v, req);
    return;
  }
  if (strncmp(path, "/v1/runs/", 9) != 0) {
    reply_err_code(NULL, req, 404, "not_found",
                   "no such /v1 endpoint; the API lives under /v1/runs (see docs/rendezvous.md)",
                   NULL, NULL);
    return;
  }
  const char *id = path + 9;
  const char *slash = strchr(id, '/');
  size_t idlen = slash ? (size_t)(slash - id) : strlen(id);
  char run_id[MU_RDZV_ID_MAX + 1];
  if (idlen == 0 || idlen > MU_RDZV_ID_MAX) {
    bad_request(req, "run id must be 1-%d characters of A-Z a-z 0-9 . _ -", MU_RDZV_ID_MAX);
    return;
  }
  memcpy(run_id, id, idlen);
  run_id[idlen] = '\0';
  for (size_t i = 0; i < idlen; i++) {
    char c = run_id[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
          c == '_' || c == '-')) {
      bad_request(req, "run id '%.128s' has a character outside A-Z a-z 0-9 . _ -", run_id);
      return;
    }
  }
  const char *rest = slash ? slash + 1 : "";
  if (*rest == '\0') {
    if (method_or_reply(req, RV_GET | RV_HEAD, "GET", "/v1/runs/{run_id}") == 0)
      h_run(v, req, run_id);
    return;
  }
  if (strcmp(rest, "join") == 0) {
    if (method_or_reply(req, RV_POST, "POST", "/v1/runs/{run_id}/join") == 0)
      h_join(v, req, run_id);
  } else if (strcmp(rest, "heartbeat") == 0) {
    if (method_or_reply(req, RV_POST, "POST", "/v1/runs/{run_id}/heartbeat") == 0)
      h_heartbeat(v, req, run_id);
  } else if (strcmp(rest, "watch") == 0) {
    if (method_or_reply(req, RV_GET, "GET", "/v1/runs/{run_id}/watch") == 0)
      h_watch(v, req, run_id);
  } else if (strcmp(rest, "leave") == 0) {
    if (method_or_reply(req, RV_POST, "POST", "/v1/runs/{run_id}/leave") == 0)
      h_leave(v, req, run_id);
  } else if (strcmp(rest, "close") == 0 || strcmp(rest, "shutdown") == 0) {
    if (method_or_reply(req, RV_POST, "POST", "/v1/runs/{run_id}/close and /shutdown") == 0)
      h_end(v, req, run_id, rest[0] == 's');
  } else if (strncmp(rest, "barrier/", 8) == 0 && rest[8] != '\0') {
    if (method_or_reply(req, RV_POST, "POST", "/v1/runs/{run_id}/barrier/{name}") == 0)
      h_barrier(v, req, run_id, rest + 8);
  } else if (strncmp(rest, "kv/", 3) == 0 && rest[3] != '\0') {
    if (strlen(rest + 3) > MU_RDZV_KEY_MAX) {
      bad_request(req, "KV keys are at most %d bytes", MU_RDZV_KEY_MAX);
      return;
    }
    if (method_or_reply(req, RV_GET | RV_HEAD | RV_PUT | RV_DELETE | RV_POST,
                        "GET, PUT, DELETE, POST", "/v1/runs/{run_id}/kv/{key}") == 0)
      h_kv(v, req, run_id, rest + 3);
  } else {
    char msg[MSG_MAX];
    snprintf(msg, sizeof(msg),
             "no endpoint '%.200s' under /v1/runs/%s/; use join, heartbeat, watch, leave, close, "
             "shutdown, barrier/{name} or kv/{key}",
             rest, run_id);
    reply_err_code(NULL, req, 404, "not_found", msg, NULL, NULL);
  }
}

/* ---------------------------------------------------------------------------------------- */
/* Registration.                                                                              */
/* ---------------------------------------------------------------------------------------- */

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
  struct mu_rdzv *rv = v->rv;
  v->rv = NULL;
  rv_server_ref(srv);
  mu_rdzv_free(rv, v1_freed, v);
}

static void v1_metrics(struct rv_server *srv, void *data, struct mu_buf *out)
{
  (void)srv;
  struct v1 *v = data;
  if (v->rv == NULL)
    return;
  struct mu_rdzv_stats s;
  mu_rdzv_stats(v->rv, &s);
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
                "muster_rdzv_heartbeats_total %" PRIu64 "\n",
                s.runs, s.nodes, s.pending_joins, s.pending_watches, s.rounds_closed,
                s.leases_expired, s.heartbeats);
}

static const struct rv_route v1_routes[] = {
    {RV_GET | RV_HEAD | RV_PUT | RV_POST | RV_DELETE | RV_PATCH | RV_OPTIONS | RV_OTHER, "/v1/",
     RV_ROUTE_PREFIX, v1_dispatch, "v1"},
    {0, NULL, 0, NULL, NULL},
};

int rv_v1_register(struct rv_server *srv)
{
  struct v1 *v = mu_calloc(1, sizeof(*v));
  v->srv = srv;
  v->rv = mu_rdzv_new(rv_server_loop(srv), 0);
  struct rv_module mod = {"rdzv", v, v1_close, v1_metrics};
  rv_server_add_module(srv, &mod);
  rv_server_add_routes(srv, v1_routes);
  return 0;
}

void rv_v1_set_run_gc_ms(struct rv_server *srv, uint64_t gc_ms)
{
  struct v1 *v = rv_server_module_data(srv, "rdzv");
  if (v && v->rv)
    mu_rdzv_set_gc_ms(v->rv, gc_ms);
}

struct mu_rdzv *rv_v1_rdzv(struct rv_server *srv)
{
  struct v1 *v = rv_server_module_data(srv, "rdzv");
  return v ? v->rv : NULL;
}
