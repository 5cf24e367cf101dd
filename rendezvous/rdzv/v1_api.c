/* The /v1 HTTP surface of the native rendezvous: one route row per endpoint, the handlers that
 * call the state machine (rdzv.h) and turn its answers into JSON, and the API's hooks for the
 * gate. Long polls (join, watch, barrier, KV wait) are deferred requests whose rdzv wait is
 * withdrawn when the client goes away.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "muster/errno.h"

#include "alloc.h"
#include "buf.h"
#include "decimal.h"
#include "json.h"
#include "opts.h"
#include "v1.h"
#include "v1_int.h"

#define DEFAULT_WATCH_MS 30000
#define DEFAULT_BARRIER_MS 30000

/* The rows' paths, named where a check needs to know which row matched. */
#define V1_RUN "/v1/runs/{run_id}"
#define V1_KV V1_RUN "/kv/{key}"

/* A deferred long poll. */
struct pend {
  struct rdzv_wait w;
  struct rv_req *req;
  struct v1 *v;
  int deferred; /* rv_req_defer() was called */
  int answered; /* the answer came while the handler still ran */
  char *name;   /* barrier name (for the reply) */
};

/* ---------------------------------------------------------------------------------------------
 * Checks every /v1 request passes first
 */

/* The module, unless the server is shutting down; the run id ({run_id}) and a KV key checked.
 * Returns: the module, or NULL after answering (503, 400). */
static struct v1 *v1_begin_or_reply(struct rv_req *req)
{
  struct v1 *v = rv_server_module_data(req->srv, "rdzv");
  if (v == NULL || v->rv == NULL || rv_server_closing(req->srv)) {
    v1_error_reply(req, RDZV_ESHUTTING_DOWN, "musterd is shutting down", NULL, NULL);
    return NULL;
  }
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
 * Replies and long polls
 */

static void reply_buf(struct rv_req *req, int status, struct mu_buf *b)
{
  mu_buf_putc(b, '\n');
  rv_reply_take(req, status, "application/json", NULL, b);
  mu_buf_release(b);
}

/* A 200 with the JSON object `fmt` formats. */
static void reply_json(struct rv_req *req, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void reply_json(struct rv_req *req, const char *fmt, ...)
{
  struct mu_buf b = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  va_list ap;
  va_start(ap, fmt);
  mu_buf_vprintf(&b, fmt, ap);
  va_end(ap);
  reply_buf(req, 200, &b);
}

static void reply_value(struct rv_req *req, const char *value, size_t len, uint64_t version)
{
  char hdr[64];
  snprintf(hdr, sizeof(hdr), "X-Muster-Kv-Version: %" PRIu64 "\r\n", version);
  rv_reply(req, 200, "application/octet-stream", hdr, value, len);
}

static struct pend *pend_new(struct v1 *v, struct rv_req *req, rdzv_wait_cb *cb)
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
  rdzv_wait_cancel(&p->w);
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

/* Answers a wait that ended in error. Returns: 1 when it did (a->err set), else 0. */
static int pend_failed(struct pend *p, const struct rdzv_answer *a)
{
  if (a->err == 0)
    return 0;
  v1_error_reply(p->req, a->err, a->message, a->run_id, NULL);
  pend_answered(p);
  return 1;
}

static void on_join(struct rdzv_wait *w, const struct rdzv_answer *a)
{
  struct pend *p = w->data;
  if (pend_failed(p, a))
    return;
  struct mu_buf b = MU_BUF_INIT(MU_BUF_UNBOUNDED);
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
    const char *m = rdzv_round_members_json(a->round, &len);
    mu_buf_puts(&b, ",\"members\":");
    mu_buf_append(&b, m, len);
  }
  mu_buf_putc(&b, '}');
  reply_buf(p->req, 200, &b);
  pend_answered(p);
}

static void on_watch(struct rdzv_wait *w, const struct rdzv_answer *a)
{
  struct pend *p = w->data;
  if (pend_failed(p, a))
    return;
  struct mu_buf b = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  mu_buf_printf(&b, "{\"round\":%" PRIu64 ",\"event\":\"%s\",\"waiting\":%" PRIu32 "}",
                a->round_number, a->event, a->waiting);
  reply_buf(p->req, 200, &b);
  pend_answered(p);
}

static void on_barrier(struct rdzv_wait *w, const struct rdzv_answer *a)
{
  struct pend *p = w->data;
  if (pend_failed(p, a))
    return;
  struct mu_buf b = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  mu_buf_puts(&b, "{\"name\":");
  mu_json_str(&b, p->name, strlen(p->name));
  mu_buf_printf(&b, ",\"count\":%" PRIu32 ",\"generation\":%" PRIu64 "}", a->count, a->generation);
  reply_buf(p->req, 200, &b);
  pend_answered(p);
}

static void on_kv(struct rdzv_wait *w, const struct rdzv_answer *a)
{
  struct pend *p = w->data;
  if (pend_failed(p, a))
    return;
  reply_value(p->req, a->value, a->value_len, a->version);
  pend_answered(p);
}

/* ---------------------------------------------------------------------------------------------
 * Runs and rounds
 */

static void h_join(struct rv_req *req)
{
  struct v1 *v = v1_begin_or_reply(req);
  if (v == NULL)
    return;
  const char *run_id = req->vars[0];
  cJSON *j = v1_body_or_reply(req, 0);
  if (j == NULL)
    return;
  struct rdzv_join_req q;
  int64_t lws = 0, port = 0, min = 0, max = 0, lc = -1, jt = -1, ttl = -1;
  int with_members = 1;
  memset(&q, 0, sizeof(q));
  if (v1_field_str_or_reply(req, j, "node_id", 1, &q.node_id) != 0 ||
      v1_field_str_or_reply(req, j, "addr", 1, &q.addr) != 0 ||
      v1_field_int_or_reply(req, j, "local_world_size", 0, 1, 65536, 1, &lws) != 0 ||
      v1_field_int_or_reply(req, j, "master_port", 0, 0, 65535, 0, &port) != 0 ||
      v1_field_int_or_reply(req, j, "min_nodes", 1, 1, RDZV_NODES_MAX, 0, &min) != 0 ||
      v1_field_int_or_reply(req, j, "max_nodes", 0, 0, RDZV_NODES_MAX, 0, &max) != 0 ||
      v1_field_int_or_reply(req, j, "last_call_ms", 0, 0, V1_MAX_REQ_TIMEOUT_MS, -1, &lc) != 0 ||
      v1_field_int_or_reply(req, j, "join_timeout_ms", 0, 1, V1_MAX_REQ_TIMEOUT_MS, -1, &jt) != 0 ||
      v1_field_int_or_reply(req, j, "lease_ttl_ms", 0, 1, V1_MAX_REQ_TIMEOUT_MS, -1, &ttl) != 0 ||
      v1_field_bool_or_reply(req, j, "members", 1, &with_members) != 0)
    goto out;
  q.with_members = with_members;
  q.local_world_size = (uint32_t)lws;
  q.master_port = (uint32_t)port;
  q.config.min_nodes = (uint32_t)min;
  q.config.max_nodes = (uint32_t)max;
  q.config.last_call_ms = lc;
  q.config.join_timeout_ms = jt;
  q.config.lease_ttl_ms = ttl;
  struct mu_buf msg = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  struct pend *p = pend_new(v, req, on_join);
  int rc = rdzv_join(v->rv, run_id, &q, &p->w, &msg);
  if (rc != 0) {
    pend_free(p);
    v1_error_reply(req, rc, mu_buf_str(&msg), run_id, NULL);
  } else {
    pend_settle(p, req);
  }
  mu_buf_release(&msg);
out:
  cJSON_Delete(j);
}

/* {"round":N,"state":"S","waiting":W}\n without printf (the hot path: one heartbeat per node
 * per lease_ttl_ms / 3): the state names are short and static, so 128 bytes always fit. */
static void reply_heartbeat(struct rv_req *req, const struct rdzv_answer *a)
{
  char body[128], *p = body;
  size_t sl = strlen(a->state);
  if (sl > 40)
    sl = 40;
  memcpy(p, "{\"round\":", 9);
  p += 9;
  p += rv_dec(p, a->round_number);
  memcpy(p, ",\"state\":\"", 10);
  p += 10;
  memcpy(p, a->state, sl);
  p += sl;
  memcpy(p, "\",\"waiting\":", 12);
  p += 12;
  p += rv_dec(p, a->waiting);
  memcpy(p, "}\n", 2);
  p += 2;
  rv_reply(req, 200, "application/json", NULL, body, (size_t)(p - body));
}

static void h_heartbeat(struct rv_req *req)
{
  struct v1 *v = v1_begin_or_reply(req);
  if (v == NULL)
    return;
  const char *run_id = req->vars[0];
  const char *node_id = NULL;
  cJSON *j = NULL;
  char fast[256];
  if (v1_heartbeat_fast_id(req, fast, sizeof(fast))) {
    node_id = fast;
  } else {
    j = v1_body_or_reply(req, 1);
    if (j == NULL)
      return;
    if (v1_field_str_or_reply(req, j, "node_id", 0, &node_id) != 0)
      goto out;
  }
  if (node_id == NULL)
    node_id = rv_req_param(req, "node_id");
  if (node_id == NULL) {
    v1_bad_request(req, "field 'node_id' is missing; send {\"node_id\": \"...\"}");
    goto out;
  }
  struct rdzv_answer a;
  int rc = rdzv_heartbeat(v->rv, run_id, node_id, &a);
  if (rc != 0)
    v1_fail(req, rc, run_id, node_id);
  else
    reply_heartbeat(req, &a);
out:
  cJSON_Delete(j);
}

static void h_watch(struct rv_req *req)
{
  struct v1 *v = v1_begin_or_reply(req);
  if (v == NULL)
    return;
  const char *run_id = req->vars[0];
  const char *node_id = rv_req_param(req, "node_id");
  long round = 0, timeout = 0;
  if (node_id == NULL || *node_id == '\0') {
    v1_bad_request(req, "query parameter 'node_id' is missing: GET .../watch?node_id=ID&round=N");
    return;
  }
  if (v1_param_int_or_reply(req, "round", 1, 0, (long)INT64_MAX, 0, &round) != 0 ||
      v1_param_int_or_reply(req, "timeout_ms", 0, 0, V1_MAX_REQ_TIMEOUT_MS, DEFAULT_WATCH_MS,
                            &timeout) != 0)
    return;
  struct pend *p = pend_new(v, req, on_watch);
  int rc = rdzv_watch(v->rv, run_id, node_id, (uint64_t)round, (uint64_t)timeout, &p->w);
  if (rc != 0) {
    pend_free(p);
    v1_fail(req, rc, run_id, node_id);
    return;
  }
  pend_settle(p, req);
}

static void reply_state(struct v1 *v, struct rv_req *req, const char *run_id)
{
  struct rdzv_run *run = rdzv_find(v->rv, run_id);
  const char *state = "gone";
  if (run) {
    struct rdzv_run_info i;
    rdzv_run_info(run, &i);
    state = rdzv_run_state_name(i.state);
  }
  struct mu_buf b = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  mu_buf_printf(&b, "{\"run_id\":\"%s\",\"state\":\"%s\"}", run_id, state);
  reply_buf(req, 200, &b);
}

static void h_leave(struct rv_req *req)
{
  struct v1 *v = v1_begin_or_reply(req);
  if (v == NULL)
    return;
  const char *run_id = req->vars[0];
  const char *node_id = NULL, *status = NULL, *reason = NULL;
  cJSON *j = v1_body_or_reply(req, 0);
  if (j == NULL)
    return;
  if (v1_field_str_or_reply(req, j, "node_id", 1, &node_id) != 0 ||
      v1_field_str_or_reply(req, j, "status", 1, &status) != 0 ||
      v1_field_str_or_reply(req, j, "reason", 0, &reason) != 0)
    goto out;
  int failed;
  if (strcmp(status, "succeeded") == 0) {
    failed = 0;
  } else if (strcmp(status, "failed") == 0) {
    failed = 1;
  } else {
    v1_bad_request(req, "field 'status' must be \"succeeded\" or \"failed\", got \"%.64s\"",
                   status);
    goto out;
  }
  int rc = rdzv_leave(v->rv, run_id, node_id, failed, reason);
  if (rc != 0)
    v1_fail(req, rc, run_id, node_id);
  else
    reply_state(v, req, run_id);
out:
  cJSON_Delete(j);
}

/* POST .../close (shut = 0) and .../shutdown (shut = 1). */
static void end_run(struct rv_req *req, int shut)
{
  struct v1 *v = v1_begin_or_reply(req);
  if (v == NULL)
    return;
  const char *run_id = req->vars[0];
  const char *reason = NULL;
  cJSON *j = v1_body_or_reply(req, 1);
  if (j == NULL)
    return;
  if (v1_field_str_or_reply(req, j, "reason", 0, &reason) != 0)
    goto out;
  int rc = rdzv_end(v->rv, run_id, shut, reason);
  if (rc == RDZV_ERUN_CLOSED || rc == RDZV_ERUN_SHUT) {
    char msg[512];
    snprintf(msg, sizeof(msg), "run '%s' already ended as %s; it cannot be %s", run_id,
             rc == RDZV_ERUN_CLOSED ? "closed" : "shut", shut ? "shut down" : "closed");
    v1_error_reply(req, rc, msg, run_id, NULL);
  } else if (rc != 0) {
    v1_fail(req, rc, run_id, "");
  } else {
    reply_state(v, req, run_id);
  }
out:
  cJSON_Delete(j);
}

static void h_close(struct rv_req *req)
{
  end_run(req, 0);
}

static void h_shutdown(struct rv_req *req)
{
  end_run(req, 1);
}

static void member_json(struct mu_buf *b, const struct rdzv_member *m)
{
  mu_buf_printf(b,
                "{\"node_id\":\"%s\",\"addr\":\"%s\",\"local_world_size\":%" PRIu32
                ",\"node_rank\":%" PRIu32 ",\"rank_offset\":%" PRIu64 "}",
                m->node_id, m->addr, m->local_world_size, m->node_rank, m->rank_offset);
}

/* The members of the run's last round: all of them up to 10,000, else only the master (a
 * 100k-member list would not fit one reply). */
static void put_members(struct mu_buf *b, const struct rdzv_run_info *i)
{
  if (i->last_round && i->nnodes <= 10000) {
    size_t len = 0;
    const char *m = rdzv_round_members_json(i->last_round, &len);
    mu_buf_puts(b, ",\"members\":");
    mu_buf_append(b, m, len);
  } else if (i->last_round) {
    struct rdzv_member m;
    rdzv_round_member(i->last_round, 0, &m);
    mu_buf_puts(b, ",\"members_omitted\":true,\"members\":[");
    member_json(b, &m);
    mu_buf_putc(b, ']');
  } else {
    mu_buf_puts(b, ",\"members\":[]");
  }
}

static void h_run(struct rv_req *req)
{
  struct v1 *v = v1_begin_or_reply(req);
  if (v == NULL)
    return;
  const char *run_id = req->vars[0];
  struct rdzv_run *run = rdzv_find(v->rv, run_id);
  if (run == NULL) {
    v1_fail(req, RDZV_ENO_SUCH_RUN, run_id, "");
    return;
  }
  struct rdzv_run_info i;
  rdzv_run_info(run, &i);
  struct mu_buf b = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  mu_buf_printf(&b, "{\"run_id\":\"%s\",\"state\":\"%s\",\"reason\":", i.run_id,
                rdzv_run_state_name(i.state));
  mu_json_str(&b, i.reason, strlen(i.reason));
  mu_buf_printf(&b,
                ",\"round\":%" PRIu64 ",\"round_state\":\"%s\",\"min_nodes\":%" PRIu32
                ",\"max_nodes\":%" PRIu32 ",\"nnodes\":%" PRIu32 ",\"waiting\":%" PRIu32
                ",\"nodes\":%" PRIu32,
                i.round, rdzv_round_state_name(i.round_state), i.min_nodes, i.max_nodes, i.nnodes,
                i.waiting, i.nodes);
  put_members(&b, &i);
  mu_buf_printf(&b,
                ",\"config\":{\"min_nodes\":%" PRIu32 ",\"max_nodes\":%" PRIu32
                ",\"last_call_ms\":%" PRIu32 ",\"join_timeout_ms\":%" PRIu32
                ",\"lease_ttl_ms\":%" PRIu32 "}}",
                i.min_nodes, i.max_nodes, i.last_call_ms, i.join_timeout_ms, i.lease_ttl_ms);
  reply_buf(req, 200, &b);
}

static void h_runs(struct rv_req *req)
{
  struct v1 *v = v1_begin_or_reply(req);
  if (v == NULL)
    return;
  struct mu_buf b = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  mu_buf_puts(&b, "{\"runs\":[");
  int first = 1;
  for (struct rdzv_run *r = rdzv_next_run(v->rv, NULL); r; r = rdzv_next_run(v->rv, r)) {
    struct rdzv_run_info i;
    rdzv_run_info(r, &i);
    mu_buf_printf(&b,
                  "%s{\"run_id\":\"%s\",\"state\":\"%s\",\"round\":%" PRIu64
                  ",\"round_state\":\"%s\",\"nnodes\":%" PRIu32 ",\"waiting\":%" PRIu32 "}",
                  first ? "" : ",", i.run_id, rdzv_run_state_name(i.state), i.round,
                  rdzv_round_state_name(i.round_state), i.nnodes, i.waiting);
    first = 0;
  }
  mu_buf_puts(&b, "]}");
  reply_buf(req, 200, &b);
}

/* ---------------------------------------------------------------------------------------------
 * Barriers and KV
 */

static void h_barrier(struct rv_req *req)
{
  struct v1 *v = v1_begin_or_reply(req);
  if (v == NULL)
    return;
  const char *run_id = req->vars[0], *name = req->vars[1];
  const char *id = NULL;
  int64_t count = 0, timeout = 0;
  char anon[64];
  cJSON *j = v1_body_or_reply(req, 0);
  if (j == NULL)
    return;
  if (v1_field_int_or_reply(req, j, "count", 1, 1, (int64_t)RDZV_NODES_MAX * 64, 0, &count) != 0 ||
      v1_field_int_or_reply(req, j, "timeout_ms", 0, 0, V1_MAX_REQ_TIMEOUT_MS, DEFAULT_BARRIER_MS,
                            &timeout) != 0 ||
      v1_field_str_or_reply(req, j, "id", 0, &id) != 0)
    goto out;
  if (id == NULL) {
    snprintf(anon, sizeof(anon), "anonymous-%" PRIu64, ++v->anon);
    id = anon;
  }
  struct mu_buf msg = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  struct pend *p = pend_new(v, req, on_barrier);
  p->name = mu_strdup(name);
  int rc = rdzv_barrier(v->rv, run_id, name, (uint32_t)count, (uint64_t)timeout, id, &p->w, &msg);
  if (rc != 0) {
    pend_free(p);
    v1_error_reply(req, rc, mu_buf_str(&msg), run_id, NULL);
  } else {
    pend_settle(p, req);
  }
  mu_buf_release(&msg);
out:
  cJSON_Delete(j);
}

static void h_kv_put(struct rv_req *req)
{
  struct v1 *v = v1_begin_or_reply(req);
  if (v == NULL)
    return;
  const char *run_id = req->vars[0], *key = req->vars[1];
  uint64_t version = 0;
  int rc = rdzv_kv_set(v->rv, run_id, key, req->body, req->body_len, &version);
  if (rc != 0)
    v1_fail(req, rc, run_id, key);
  else
    reply_json(req, "{\"version\":%" PRIu64 "}", version);
}

static void h_kv_get(struct rv_req *req)
{
  struct v1 *v = v1_begin_or_reply(req);
  if (v == NULL)
    return;
  const char *run_id = req->vars[0], *key = req->vars[1];
  long wait = -1;
  if (v1_param_int_or_reply(req, "wait_ms", 0, 0, V1_MAX_REQ_TIMEOUT_MS, -1, &wait) != 0)
    return;
  struct rdzv_answer a;
  struct pend *p = wait >= 0 ? pend_new(v, req, on_kv) : NULL;
  int rc = rdzv_kv_get(v->rv, run_id, key, &a, wait >= 0 ? (uint64_t)wait : 0, p ? &p->w : NULL);
  if (rc == 1) {
    pend_settle(p, req);
    return;
  }
  if (p)
    pend_free(p);
  if (rc != 0)
    v1_fail(req, rc, run_id, key);
  else
    reply_value(req, a.value, a.value_len, a.version);
}

static void h_kv_delete(struct rv_req *req)
{
  struct v1 *v = v1_begin_or_reply(req);
  if (v == NULL)
    return;
  const char *run_id = req->vars[0], *key = req->vars[1];
  int rc = rdzv_kv_del(v->rv, run_id, key);
  if (rc != 0)
    v1_fail(req, rc, run_id, key);
  else
    reply_json(req, "{\"deleted\":true}");
}

/* POST .../kv/{key}?add=N: an atomic counter. */
static void h_kv_add(struct rv_req *req)
{
  struct v1 *v = v1_begin_or_reply(req);
  if (v == NULL)
    return;
  const char *run_id = req->vars[0], *key = req->vars[1];
  const char *add = rv_req_param(req, "add");
  long delta = 0;
  if (add == NULL) {
    v1_bad_request(req, "POST on a key needs ?add=N (an integer counter); use PUT to set a value");
    return;
  }
  if (mu_parse_long(add, -(long)INT64_MAX, (long)INT64_MAX, &delta) != 0) {
    v1_bad_request(req, "query parameter 'add' must be an integer, got '%.64s'", add);
    return;
  }
  int64_t result = 0;
  int rc = rdzv_kv_add(v->rv, run_id, key, delta, &result);
  if (rc != 0)
    v1_fail(req, rc, run_id, key);
  else
    reply_json(req, "{\"value\":%" PRId64 "}", result);
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
           "shutdown, barrier/{name} or kv/{key}",
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
                   "WWW-Authenticate: Bearer realm=\"musterd\"\r\n");
    return 1;
  case RV_REFUSE_TOO_LARGE:
    v1_error_reply(req, RDZV_ETOO_LARGE, r->message, NULL, NULL);
    return 1;
  case RV_REFUSE_TOO_MANY:
    v1_error_reply(req, RDZV_ETOO_MANY, r->message, NULL, NULL);
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

static const struct rv_api v1_api = {"v1", v1_refuse, v1_usage};

#define ALL_METHODS                                                                                \
  (RV_GET | RV_HEAD | RV_PUT | RV_POST | RV_DELETE | RV_PATCH | RV_OPTIONS | RV_OTHER)

/* Every /v1 endpoint, one row per method (docs/rendezvous.md). All rows count as "v1" in
 * /metrics. */
static const struct rv_route v1_routes[] = {
    {RV_GET, "/v1/runs", RV_ROUTE_SLASH, h_runs, "v1", &v1_api},
    {RV_GET, V1_RUN, RV_ROUTE_SLASH, h_run, "v1", &v1_api},
    {RV_POST, V1_RUN "/join", RV_ROUTE_LONG_POLL, h_join, "v1", &v1_api},
    {RV_POST, V1_RUN "/heartbeat", 0, h_heartbeat, "v1", &v1_api},
    {RV_GET, V1_RUN "/watch", RV_ROUTE_LONG_POLL, h_watch, "v1", &v1_api},
    {RV_POST, V1_RUN "/leave", 0, h_leave, "v1", &v1_api},
    {RV_POST, V1_RUN "/close", 0, h_close, "v1", &v1_api},
    {RV_POST, V1_RUN "/shutdown", 0, h_shutdown, "v1", &v1_api},
    {RV_POST, V1_RUN "/barrier/{name}", RV_ROUTE_REST | RV_ROUTE_LONG_POLL, h_barrier, "v1",
     &v1_api},
    {RV_GET, V1_KV, RV_ROUTE_REST | RV_ROUTE_MAY_POLL, h_kv_get, "v1", &v1_api},
    {RV_PUT, V1_KV, RV_ROUTE_REST | RV_ROUTE_WRITE, h_kv_put, "v1", &v1_api},
    {RV_DELETE, V1_KV, RV_ROUTE_REST, h_kv_delete, "v1", &v1_api},
    {RV_POST, V1_KV, RV_ROUTE_REST | RV_ROUTE_WRITE, h_kv_add, "v1", &v1_api},
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
  rdzv_stats(v->rv, &s);
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

int v1_register(struct rv_server *srv)
{
  struct v1 *v = mu_calloc(1, sizeof(*v));
  v->srv = srv;
  v->rv = rdzv_new(rv_server_loop(srv), 0);
  struct rv_module mod = {"rdzv", v, v1_close, v1_metrics};
  rv_server_add_module(srv, &mod);
  rv_server_add_routes(srv, v1_routes);
  return 0;
}

void v1_set_run_gc_ms(struct rv_server *srv, uint64_t gc_ms)
{
  struct v1 *v = rv_server_module_data(srv, "rdzv");
  if (v && v->rv)
    rdzv_set_gc_ms(v->rv, gc_ms);
}

struct rdzv *v1_rdzv(struct rv_server *srv)
{
  struct v1 *v = rv_server_module_data(srv, "rdzv");
  return v ? v->rv : NULL;
}
