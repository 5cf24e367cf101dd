/* /v1 replies and long polls. A long poll (join, watch, barrier, KV wait) is a deferred
 * request holding a rdzv wait (struct v1_pend): answered from the wait's callback, or withdrawn
 * when the client goes away. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "v1_int.h"

void v1_reply_buf(struct rv_req *req, int status, struct mu_buf *b)
{
  mu_buf_putc(b, '\n');
  rv_reply_take(req, status, "application/json", NULL, b);
  mu_buf_release(b);
}

void v1_reply_json(struct rv_req *req, const char *fmt, ...)
{
  struct mu_buf b = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  va_list ap;
  va_start(ap, fmt);
  mu_buf_vprintf(&b, fmt, ap);
  va_end(ap);
  v1_reply_buf(req, 200, &b);
}

void v1_reply_value(struct rv_req *req, const char *value, size_t len, uint64_t version)
{
  char hdr[64];
  snprintf(hdr, sizeof(hdr), "X-Muster-Kv-Version: %" PRIu64 "\r\n", version);
  rv_reply(req, 200, "application/octet-stream", hdr, value, len);
}

struct v1_pend *v1_pend_new(struct v1 *v, struct rv_req *req, rdzv_wait_cb *cb)
{
  struct v1_pend *p = mu_calloc(1, sizeof(*p));
  p->w.cb = cb;
  p->w.data = p;
  p->req = req;
  p->v = v;
  return p;
}

void v1_pend_free(struct v1_pend *p)
{
  mu_free(p->name);
  mu_free(p);
}

/* The request of `p` was answered: free it now if deferred, else let the handler do it. */
void v1_pend_answered(struct v1_pend *p)
{
  p->req = NULL;
  if (p->deferred)
    v1_pend_free(p);
  else
    p->answered = 1;
}

static void on_gone(struct rv_req *req, void *data)
{
  (void)req;
  struct v1_pend *p = data;
  rdzv_wait_gone(&p->w);
  v1_pend_free(p);
}

/* After starting a wait in a handler: defer the request, or free `p` if it was answered. */
void v1_pend_settle(struct v1_pend *p, struct rv_req *req)
{
  if (p->answered) {
    v1_pend_free(p);
    return;
  }
  p->deferred = 1;
  rv_req_defer(req, on_gone, p);
}

/* Answers a wait that ended in error. Returns: 1 when it did (a->err set), else 0. */
int v1_pend_failed(struct v1_pend *p, const struct rdzv_answer *a)
{
  if (a->err == 0)
    return 0;
  v1_error_reply(p->req, a->err, a->message, a->run_id, NULL);
  v1_pend_answered(p);
  return 1;
}
