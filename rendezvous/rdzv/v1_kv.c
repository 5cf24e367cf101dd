/* /v1 barriers and the per-run KV. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "json.h"
#include "opts.h"
#include "v1_int.h"

#define DEFAULT_BARRIER_MS 30000

static void on_barrier(struct rdzv_wait *w, const struct rdzv_answer *a)
{
  struct v1_pend *p = w->data;
  if (v1_pend_failed(p, a))
    return;
  struct mu_buf b = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  mu_buf_puts(&b, "{\"name\":");
  mu_json_str(&b, p->name, strlen(p->name));
  mu_buf_printf(&b, ",\"count\":%" PRIu32 ",\"generation\":%" PRIu64 "}", a->count, a->generation);
  v1_reply_buf(p->req, 200, &b);
  v1_pend_answered(p);
}

static void on_kv(struct rdzv_wait *w, const struct rdzv_answer *a)
{
  struct v1_pend *p = w->data;
  if (v1_pend_failed(p, a))
    return;
  v1_reply_value(p->req, a->value, a->value_len, a->version);
  v1_pend_answered(p);
}

void v1_barrier(struct rv_req *req)
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
  struct v1_pend *p = v1_pend_new(v, req, on_barrier);
  p->name = mu_strdup(name);
  int rc = rdzv_barrier(v->rv, run_id, name, (uint32_t)count, (uint64_t)timeout, id, &p->w, &msg);
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

void v1_kv_put(struct rv_req *req)
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
    v1_reply_json(req, "{\"version\":%" PRIu64 "}", version);
}

void v1_kv_get(struct rv_req *req)
{
  struct v1 *v = v1_begin_or_reply(req);
  if (v == NULL)
    return;
  const char *run_id = req->vars[0], *key = req->vars[1];
  long wait = -1;
  if (v1_param_int_or_reply(req, "wait_ms", 0, 0, V1_MAX_REQ_TIMEOUT_MS, -1, &wait) != 0)
    return;
  struct rdzv_answer a;
  struct v1_pend *p = wait >= 0 ? v1_pend_new(v, req, on_kv) : NULL;
  int rc = rdzv_kv_get(v->rv, run_id, key, &a, wait >= 0 ? (uint64_t)wait : 0, p ? &p->w : NULL);
  if (rc == 1) {
    v1_pend_settle(p, req);
    return;
  }
  if (p)
    v1_pend_free(p);
  if (rc != 0)
    v1_fail(req, rc, run_id, key);
  else
    v1_reply_value(req, a.value, a.value_len, a.version);
}

void v1_kv_delete(struct rv_req *req)
{
  struct v1 *v = v1_begin_or_reply(req);
  if (v == NULL)
    return;
  const char *run_id = req->vars[0], *key = req->vars[1];
  int rc = rdzv_kv_del(v->rv, run_id, key);
  if (rc != 0)
    v1_fail(req, rc, run_id, key);
  else
    v1_reply_json(req, "{\"deleted\":true}");
}

/* POST .../kv/{key}?add=N: an atomic counter. */
void v1_kv_add(struct rv_req *req)
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
    v1_reply_json(req, "{\"value\":%" PRId64 "}", result);
}
