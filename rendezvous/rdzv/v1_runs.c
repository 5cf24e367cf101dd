/* /v1 runs and rounds: join, heartbeat, watch, leave, close, shutdown, and the run listings. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "decimal.h"
#include "htab.h"
#include "json.h"
#include "v1.h"
#include "v1_int.h"

#define DEFAULT_WATCH_MS 30000

/* A call that names node `node_id` carries that node's session (rdzv_session_check(); the
 * header RDZV_SESSION_HEADER); `lost_too` for a leave. Returns: 0, or -1 after answering 403
 * `wrong_session`. */
static int session_or_reply(struct v1 *v, struct rv_req *req, const char *run_id,
                            const char *node_id, int lost_too)
{
  struct mu_buf msg = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  int rc = rdzv_session_check(v->rv, run_id, node_id, rv_req_header(req, RDZV_SESSION_HEADER),
                              lost_too, &msg);
  if (rc != 0)
    v1_error_reply(req, rc, mu_buf_str(&msg), run_id, NULL);
  mu_buf_release(&msg);
  return rc != 0 ? -1 : 0;
}

static void on_join(struct rdzv_wait *w, const struct rdzv_answer *a)
{
  struct v1_pend *p = w->data;
  if (v1_pend_failed(p, a))
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
  mu_buf_printf(&b, ",\"restart_count\":%" PRIu32, a->restart_count);
  if (a->max_restarts >= 0)
    mu_buf_printf(&b, ",\"max_restarts\":%lld", (long long)a->max_restarts);
  if (a->session != NULL && a->session[0] != '\0') /* hex digits: nothing to escape */
    mu_buf_printf(&b, ",\"session\":\"%s\"", a->session);
  if (a->with_members) {
    size_t len = 0;
    const char *m = rdzv_round_members_json(a->round, &len);
    mu_buf_puts(&b, ",\"members\":");
    mu_buf_append(&b, m, len);
  }
  mu_buf_putc(&b, '}');
  v1_reply_buf(p->req, 200, &b);
  v1_pend_answered(p);
}

static void on_watch(struct rdzv_wait *w, const struct rdzv_answer *a)
{
  struct v1_pend *p = w->data;
  if (v1_pend_failed(p, a))
    return;
  struct mu_buf b = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  mu_buf_printf(&b, "{\"round\":%" PRIu64 ",\"event\":\"%s\",\"waiting\":%" PRIu32 "}",
                a->round_number, a->event, a->waiting);
  v1_reply_buf(p->req, 200, &b);
  v1_pend_answered(p);
}

/* The fields of a join (also those of a health report) into `q`.
 * Returns: 0, or -1 after answering 400. */
static int join_fields_or_reply(struct rv_req *req, const cJSON *j, struct rdzv_join_req *q)
{
  int64_t lws = 0, port = 0, min = 0, max = 0, lc = -1, jt = -1, ttl = -1, mr = -1;
  int with_members = 1;
  memset(q, 0, sizeof(*q));
  /* who creates runs: the verified credential when auth is on (by its id, a hash: never a
   * secret), else the client address */
  q->client = req->cred != NULL ? req->cred->id : rv_req_peer(req);
  if (v1_field_str_or_reply(req, j, "node_id", 1, &q->node_id) != 0 ||
      v1_field_str_or_reply(req, j, "addr", 1, &q->addr) != 0 ||
      v1_field_int_or_reply(req, j, "local_world_size", 0, 1, 65536, 1, &lws) != 0 ||
      v1_field_int_or_reply(req, j, "master_port", 0, 0, 65535, 0, &port) != 0 ||
      v1_field_int_or_reply(req, j, "min_nodes", 1, 1, RDZV_NODES_MAX, 0, &min) != 0 ||
      v1_field_int_or_reply(req, j, "max_nodes", 0, 0, RDZV_NODES_MAX, 0, &max) != 0 ||
      v1_field_int_or_reply(req, j, "last_call_ms", 0, 0, V1_MAX_REQ_TIMEOUT_MS, -1, &lc) != 0 ||
      v1_field_int_or_reply(req, j, "join_timeout_ms", 0, 1, V1_MAX_REQ_TIMEOUT_MS, -1, &jt) != 0 ||
      v1_field_int_or_reply(req, j, "lease_ttl_ms", 0, 1, V1_MAX_REQ_TIMEOUT_MS, -1, &ttl) != 0 ||
      v1_field_int_or_reply(req, j, "max_restarts", 0, 0, RDZV_RESTARTS_MAX, -1, &mr) != 0 ||
      v1_field_bool_or_reply(req, j, "members", 1, &with_members) != 0)
    return -1;
  q->with_members = with_members;
  q->local_world_size = (uint32_t)lws;
  q->master_port = (uint32_t)port;
  q->config.min_nodes = (uint32_t)min;
  q->config.max_nodes = (uint32_t)max;
  q->config.last_call_ms = lc;
  q->config.join_timeout_ms = jt;
  q->config.lease_ttl_ms = ttl;
  q->config.max_restarts = mr;
  return 0;
}

void v1_join(struct rv_req *req)
{
  struct v1 *v = v1_begin_or_reply(req);
  if (v == NULL)
    return;
  const char *run_id = req->vars[0];
  cJSON *j = v1_body_or_reply(req, 0);
  if (j == NULL)
    return;
  struct rdzv_join_req q;
  if (join_fields_or_reply(req, j, &q) != 0 || session_or_reply(v, req, run_id, q.node_id, 0) != 0)
    goto out;
  struct mu_buf msg = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  struct v1_pend *p = v1_pend_new(v, req, on_join);
  int rc = rdzv_join(v->rv, run_id, &q, &p->w, &msg);
  if (rc != 0) {
    v1_pend_free(p);
    v1_error_reply(req, rc, mu_buf_str(&msg), run_id, NULL);
  } else {
    v1_pend_settle(p, req);
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

void v1_heartbeat(struct rv_req *req)
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
  if (session_or_reply(v, req, run_id, node_id, 0) != 0)
    goto out;
  struct rdzv_answer a;
  int rc = rdzv_heartbeat(v->rv, run_id, node_id, &a);
  if (rc != 0)
    v1_fail(req, rc, run_id, node_id);
  else
    reply_heartbeat(req, &a);
out:
  cJSON_Delete(j);
}

void v1_watch(struct rv_req *req)
{
  struct v1 *v = v1_begin_or_reply(req);
  if (v == NULL)
    return;
  const char *run_id = req->vars[0];
  const char *node_id = rv_req_param(req, "node_id");
  long round = 0, timeout = 0, lost_on_close = 0;
  if (node_id == NULL || *node_id == '\0') {
    v1_bad_request(req, "query parameter 'node_id' is missing: GET .../watch?node_id=ID&round=N");
    return;
  }
  if (v1_param_int_or_reply(req, "round", 1, 0, (long)INT64_MAX, 0, &round) != 0 ||
      v1_param_int_or_reply(req, "timeout_ms", 0, 0, V1_MAX_REQ_TIMEOUT_MS, DEFAULT_WATCH_MS,
                            &timeout) != 0 ||
      v1_param_int_or_reply(req, "lost_on_close", 0, 0, 1, 0, &lost_on_close) != 0 ||
      session_or_reply(v, req, run_id, node_id, 0) != 0)
    return;
  struct v1_pend *p = v1_pend_new(v, req, on_watch);
  if (lost_on_close)
    p->w.flags |= RDZV_WAIT_LOST_ON_CLOSE;
  int rc = rdzv_watch(v->rv, run_id, node_id, (uint64_t)round, (uint64_t)timeout, &p->w);
  if (rc != 0) {
    v1_pend_free(p);
    v1_fail(req, rc, run_id, node_id);
    return;
  }
  v1_pend_settle(p, req);
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
  v1_reply_buf(req, 200, &b);
}

void v1_leave(struct rv_req *req)
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
      v1_field_str_or_reply(req, j, "reason", 0, &reason) != 0 ||
      session_or_reply(v, req, run_id, node_id, 1) != 0)
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

void v1_close_run(struct rv_req *req)
{
  end_run(req, 0);
}

void v1_shutdown_run(struct rv_req *req)
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

/* GET /v1/runs/{id}'s object for `run`, appended to `out`. */
static void run_json(struct rdzv_run *run, struct mu_buf *out)
{
  struct rdzv_run_info i;
  rdzv_run_info(run, &i);
  mu_buf_printf(out, "{\"run_id\":\"%s\",\"state\":\"%s\",\"reason\":", i.run_id,
                rdzv_run_state_name(i.state));
  mu_json_str(out, i.reason, strlen(i.reason));
  mu_buf_printf(out,
                ",\"round\":%" PRIu64 ",\"round_state\":\"%s\",\"min_nodes\":%" PRIu32
                ",\"max_nodes\":%" PRIu32 ",\"nnodes\":%" PRIu32 ",\"waiting\":%" PRIu32
                ",\"nodes\":%" PRIu32,
                i.round, rdzv_round_state_name(i.round_state), i.min_nodes, i.max_nodes, i.nnodes,
                i.waiting, i.nodes);
  put_members(out, &i);
  rdzv_run_detail_json(run, out);
  rdzv_run_goodput_json(run, out);
  rdzv_run_goodput_account_json(run, out); /* of now: not part of the durable state */
  mu_buf_printf(out,
                ",\"config\":{\"min_nodes\":%" PRIu32 ",\"max_nodes\":%" PRIu32
                ",\"last_call_ms\":%" PRIu32 ",\"join_timeout_ms\":%" PRIu32
                ",\"lease_ttl_ms\":%" PRIu32 "}}",
                i.min_nodes, i.max_nodes, i.last_call_ms, i.join_timeout_ms, i.lease_ttl_ms);
}

int v1_run_json(struct rv_server *srv, const char *run_id, struct mu_buf *out)
{
  struct v1 *v = rv_server_module_data(srv, "rdzv");
  struct rdzv_run *run = v != NULL && v->rv != NULL ? rdzv_find(v->rv, run_id) : NULL;
  if (run == NULL)
    return -1;
  run_json(run, out);
  return 0;
}

void v1_run(struct rv_req *req)
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
  struct mu_buf b = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  run_json(run, &b);
  v1_reply_buf(req, 200, &b);
}

void v1_runs(struct rv_req *req)
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
    if (!rv_cred_allows(req->cred, RV_SCOPE_RUN, i.run_id, strlen(i.run_id), RV_READ))
      continue; /* runs outside the credential's scopes are not listed */
    mu_buf_printf(&b,
                  "%s{\"run_id\":\"%s\",\"state\":\"%s\",\"round\":%" PRIu64
                  ",\"round_state\":\"%s\",\"nnodes\":%" PRIu32 ",\"waiting\":%" PRIu32
                  ",\"standbys\":%" PRIu32 ",\"unhealthy\":%" PRIu32 ",\"restart_count\":%" PRIu32
                  "}",
                  first ? "" : ",", i.run_id, rdzv_run_state_name(i.state), i.round,
                  rdzv_round_state_name(i.round_state), i.nnodes, i.waiting, i.standbys,
                  i.unhealthy, i.restarts);
    first = 0;
  }
  mu_buf_puts(&b, "]}");
  v1_reply_buf(req, 200, &b);
}

/* POST .../report {"node_id", "round", "event", "reason"}: a member's workers started, made
 * their first progress, failed or hung (docs/rendezvous.md, "Goodput"). */
void v1_report(struct rv_req *req)
{
  struct v1 *v = v1_begin_or_reply(req);
  if (v == NULL)
    return;
  const char *run_id = req->vars[0];
  const char *node_id = NULL, *event = NULL, *reason = NULL;
  int64_t round = 0;
  cJSON *j = v1_body_or_reply(req, 0);
  if (j == NULL)
    return;
  if (v1_field_str_or_reply(req, j, "node_id", 1, &node_id) != 0 ||
      v1_field_str_or_reply(req, j, "event", 1, &event) != 0 ||
      v1_field_str_or_reply(req, j, "reason", 0, &reason) != 0 ||
      v1_field_int_or_reply(req, j, "round", 1, 1, INT64_MAX, 0, &round) != 0 ||
      session_or_reply(v, req, run_id, node_id, 0) != 0)
    goto out;
  enum rdzv_report_kind kind = rdzv_report_kind(event);
  if (kind == 0) {
    v1_bad_request(req,
                   "field 'event' must be \"started\", \"progress\", \"failed\" or \"hung\", "
                   "got \"%.64s\"",
                   event);
    goto out;
  }
  struct rdzv_report_answer a;
  struct mu_buf msg = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  int rc = rdzv_report(v->rv, run_id, node_id, (uint64_t)round, kind, reason, &a, &msg);
  if (rc == RDZV_ENO_SUCH_RUN) {
    v1_fail(req, rc, run_id, node_id);
  } else if (rc != 0) {
    v1_error_reply(req, rc, mu_buf_str(&msg), run_id, NULL);
  } else {
    struct mu_buf b = MU_BUF_INIT(MU_BUF_UNBOUNDED);
    mu_buf_printf(&b, "{\"run_id\":\"%s\",\"state\":\"%s\",\"reason\":", run_id, a.state);
    mu_json_str(&b, a.reason, strlen(a.reason));
    mu_buf_printf(&b,
                  ",\"round\":%" PRIu64 ",\"round_state\":\"%s\",\"counted\":%s"
                  ",\"restart_count\":%" PRIu32,
                  a.round, a.round_state, a.counted ? "true" : "false", a.restart_count);
    if (a.max_restarts >= 0)
      mu_buf_printf(&b, ",\"max_restarts\":%lld}", (long long)a.max_restarts);
    else
      mu_buf_puts(&b, ",\"max_restarts\":null}");
    v1_reply_buf(req, 200, &b);
  }
  mu_buf_release(&msg);
out:
  cJSON_Delete(j);
}

/* POST .../health {join's fields, "healthy", "output", "ttl_ms"}: a node's health check before
 * it joins; a failed one is kept with its output (and may create the run). */
void v1_health(struct rv_req *req)
{
  struct v1 *v = v1_begin_or_reply(req);
  if (v == NULL)
    return;
  const char *run_id = req->vars[0];
  cJSON *j = v1_body_or_reply(req, 0);
  if (j == NULL)
    return;
  struct rdzv_join_req q;
  const char *output = NULL;
  int healthy = 0;
  int64_t ttl = 0;
  const cJSON *h = cJSON_GetObjectItemCaseSensitive(j, "healthy");
  if (join_fields_or_reply(req, j, &q) != 0 ||
      v1_field_bool_or_reply(req, j, "healthy", 0, &healthy) != 0 ||
      v1_field_str_or_reply(req, j, "output", 0, &output) != 0 ||
      v1_field_int_or_reply(req, j, "ttl_ms", 0, 1, V1_MAX_REQ_TIMEOUT_MS, 0, &ttl) != 0 ||
      session_or_reply(v, req, run_id, q.node_id, 0) != 0)
    goto out;
  if (h == NULL) {
    v1_bad_request(req, "field 'healthy' is missing: true when the node's check passed, false "
                        "when it failed (with its 'output')");
    goto out;
  }
  uint32_t unhealthy = 0;
  struct mu_buf msg = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  int rc = rdzv_health(v->rv, run_id, &q, healthy, output, (uint64_t)ttl, &unhealthy, &msg);
  if (rc != 0) {
    v1_error_reply(req, rc, mu_buf_str(&msg), run_id, NULL);
  } else {
    struct rdzv_run *run = rdzv_find(v->rv, run_id);
    struct rdzv_run_info i;
    if (run != NULL)
      rdzv_run_info(run, &i);
    v1_reply_json(req, "{\"run_id\":\"%s\",\"state\":\"%s\",\"unhealthy\":%" PRIu32 "}", run_id,
                  run != NULL ? rdzv_run_state_name(i.state) : "gone", unhealthy);
  }
  mu_buf_release(&msg);
out:
  cJSON_Delete(j);
}
