/* The etcd v3 backend's watches (etcd3_int.h): a stream of JSON lines, resumed on the next
 * member from the last revision seen. */
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "muster/errno.h"

#include "alloc.h"
#include "buf.h"
#include "etcd3_int.h"
#include "http_client.h"
#include "json.h"

struct wstream {
  struct mu_buf line;
  mu__etcd3_events_fn fn;
  void *arg;
  long long next_rev; /* where a resumed watch starts */
  int stop;           /* fn said so */
  int broken;         /* the stream ended or said something else than events */
  int compacted;      /* the history from next_rev is gone: read afresh */
};

static int on_stream(void *arg, const char *p, size_t n)
{
  struct wstream *w = arg;
  if (mu_buf_append(&w->line, p, n) != 0) {
    w->broken = 1;
    return 1;
  }
  for (;;) {
    char *nl = memchr(w->line.data, '\n', w->line.len);
    if (nl == NULL)
      return 0;
    cJSON *j = cJSON_ParseWithLength(w->line.data, (size_t)(nl - w->line.data));
    size_t used = (size_t)(nl - w->line.data) + 1;
    mu_buf_consume(&w->line, used);
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(j, "result");
    if (res == NULL || mu_json_get_bool(res, "canceled", 0)) {
      w->compacted = mu__etcd3_int(res, "compact_revision") > 0;
      cJSON_Delete(j);
      w->broken = 1;
      return 1;
    }
    const cJSON *evs = cJSON_GetObjectItemCaseSensitive(res, "events");
    const cJSON *ev;
    cJSON_ArrayForEach(ev, evs)
    {
      long long mod = mu__etcd3_int(cJSON_GetObjectItemCaseSensitive(ev, "kv"), "mod_revision");
      if (mod + 1 > w->next_rev)
        w->next_rev = mod + 1;
    }
    if (cJSON_GetArraySize(evs) > 0 && w->fn(w->arg, evs) != 0)
      w->stop = 1;
    cJSON_Delete(j);
    if (w->stop)
      return 1;
  }
}

/* The body of a watch request: one create_request line per range, from revision `from`. */
static void watch_body(const struct mu__etcd3_range *rs, int nr, long long from,
                       struct mu_buf *body)
{
  for (int i = 0; i < nr; i++) {
    cJSON *c = cJSON_CreateObject(), *cr = cJSON_AddObjectToObject(c, "create_request");
    mu__etcd3_add_b64(cr, "key", rs[i].key, strlen(rs[i].key));
    if (rs[i].end != NULL)
      mu__etcd3_add_b64(cr, "range_end", rs[i].end, strlen(rs[i].end));
    mu__etcd3_add_ll(cr, "start_revision", from);
    if (rs[i].noput)
      cJSON_AddItemToObject(cr, "filters", cJSON_CreateStringArray((const char *[]){"NOPUT"}, 1));
    char *t = cJSON_PrintUnformatted(c);
    mu_buf_printf(body, "%s\n", t);
    cJSON_free(t);
    cJSON_Delete(c);
  }
}

/* One stream on member m, from w->next_rev, for at most left ms. Returns: the request's code. */
static int stream_once(struct mu_etcd3 *e, struct mu_etcd3_member *m, struct wstream *w,
                       const struct mu__etcd3_range *rs, int nr, long left,
                       struct mu_http_response *r)
{
  struct mu_buf body = MU_BUF_INIT(SIZE_MAX);
  watch_body(rs, nr, w->next_rev, &body);
  int rc = mu__etcd3_member_client(e, m);
  mu_buf_clear(&w->line);
  w->broken = 0;
  r->on_data = on_stream;
  r->on_data_arg = w;
  if (rc == 0)
    rc = mu_http_request(m->http, "POST", "/v3/watch", "application/json", body.data, body.len,
                         (int)left, r);
  mu_buf_release(&body);
  if (rc != MU_ECONN && rc != MU_ECANCELED)
    e->unreached = 0; /* a member answered (or a stream ran until the deadline) */
  return rc;
}

enum next_step { STEP_DONE, STEP_SAME, STEP_NEXT };

/* What to do after a stream on m ended with rc: done (with *rc final), the same member again
 * (logged in anew), or the next member (with what went wrong in errmsg). */
static enum next_step after_stream(struct mu_etcd3 *e, struct mu_etcd3_member *m,
                                   const struct wstream *w, const struct mu_http_response *r,
                                   long long deadline, int *relogins, int *rc)
{
  if (*rc == MU_ECANCELED)
    return STEP_DONE;
  if (w->stop) {
    *rc = 0;
    return STEP_DONE;
  }
  if (w->compacted) {
    mu__etcd3_say(e, "etcd compacted the history a watch needed");
    *rc = MU_ESTATE;
    return STEP_DONE;
  }
  if (*rc == MU_ETIMEDOUT && mu__etcd3_now_ms() >= deadline)
    return STEP_DONE;
  if (*rc == 0 && r->status != 200) {
    int retry = 0, relogin = 0;
    *rc = mu__etcd3_error_answer(e, m, "/v3/watch", r, &retry, &relogin);
    if (relogin) {
      if (mu__etcd3_relogin(e, m, relogins, (long)(deadline - mu__etcd3_now_ms())))
        *rc = MU_ECANCELED;
      return *rc == MU_ECANCELED ? STEP_DONE : STEP_SAME;
    }
    return retry ? STEP_NEXT : STEP_DONE;
  }
  if (*rc == MU_EAUTH || *rc == MU_EINVAL)
    return STEP_DONE; /* refused login, or a TLS file */
  if (*rc != 0 && m->http != NULL && mu__etcd3_tls_refusal(e, m) != 0) {
    *rc = MU_EAUTH;
    return STEP_DONE;
  }
  if (*rc != 0)
    mu__etcd3_say(e, "etcd at %s:%d: %s", m->host, m->port, mu_http_client_errmsg(m->http));
  else
    mu__etcd3_say(e, "etcd at %s:%d ended the watch", m->host, m->port);
  return STEP_NEXT;
}

int mu__etcd3_watch_ranges(struct mu_etcd3 *e, const struct mu__etcd3_range *rs, int nr,
                           long long from, long long deadline, mu__etcd3_events_fn fn, void *arg,
                           long long *next)
{
  struct wstream w;
  memset(&w, 0, sizeof(w));
  mu_buf_init(&w.line, ETCD3_MAX_ANSWER);
  w.fn = fn;
  w.arg = arg;
  w.next_rev = from;
  size_t tried = 0, unanswered = 0;
  int rc = MU_ETIMEDOUT, relogins = 0;
  e->unreached = 1;
  struct mu_http_response r;
  mu_http_response_init(&r, 64 * 1024);
  for (;;) {
    long left = (long)(deadline - mu__etcd3_now_ms());
    if (left <= 0) {
      rc = MU_ETIMEDOUT;
      break;
    }
    struct mu_etcd3_member *m = &e->m[e->cur];
    rc = stream_once(e, m, &w, rs, nr, left, &r);
    unanswered = rc == MU_ECONN ? unanswered + 1 : 0;
    enum next_step step = after_stream(e, m, &w, &r, deadline, &relogins, &rc);
    if (step == STEP_DONE)
      break;
    if (e->watch_econn && unanswered >= e->nm) {
      rc = MU_ECONN; /* errmsg has the last member's words; the caller heart-beats, re-joins */
      break;
    }
    if (step == STEP_NEXT && mu__etcd3_next_member(e, &tried)) {
      rc = MU_ECANCELED;
      break;
    }
  }
  mu_http_response_release(&r);
  mu_buf_release(&w.line);
  if (next != NULL)
    *next = w.next_rev;
  return rc;
}
