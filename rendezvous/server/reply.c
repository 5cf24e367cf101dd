/* The HTTP replies: a response head assembled without printf, whole answers, answers in chunks
 * or in slices, deferred answers (long polls). Each ends in conn.c's output path
 * (conn_int.h), which owns the connection's bytes and its limits.
 */
#include <string.h>

#include "alloc.h"
#include "conn_int.h"
#include "decimal.h"
#include "json.h"
#include "log.h"
#include "server.h"

/* A response head assembled on the stack and handed to rv_conn_out_append() in as few pieces as
 * fit: every reply passes here, so no printf. */
struct head_buf {
  struct rv_conn *c;
  size_t len;
  int failed;
  char data[1024];
};

static void head_flush(struct head_buf *h)
{
  if (h->len > 0 && !h->failed && rv_conn_out_append(h->c, h->data, h->len) != 0)
    h->failed = 1;
  h->len = 0;
}

static void head_put(struct head_buf *h, const char *s, size_t n)
{
  if (h->failed)
    return;
  if (h->len + n > sizeof(h->data)) {
    head_flush(h);
    if (n > sizeof(h->data)) {
      if (!h->failed && rv_conn_out_append(h->c, s, n) != 0)
        h->failed = 1;
      return;
    }
  }
  memcpy(h->data + h->len, s, n);
  h->len += n;
}

static void head_puts(struct head_buf *h, const char *s)
{
  head_put(h, s, strlen(s));
}

static void head_num(struct head_buf *h, unsigned long long v)
{
  char d[RV_DEC_MAX];
  head_put(h, d, rv_dec(d, v));
}

static void write_head(struct rv_conn *c, int status, const char *ctype, const char *extra,
                       long long content_length)
{
  struct rv_server *srv = c->srv;
  struct head_buf h;
  h.c = c;
  h.len = 0;
  h.failed = 0;
  if (c->keep_alive == 0)
    c->flags |= CONN_CLOSE_AFTER_REPLY;
  head_put(&h, "HTTP/1.1 ", 9);
  head_num(&h, (unsigned long long)(status < 0 ? 0 : status));
  head_put(&h, " ", 1);
  head_puts(&h, rv_status_reason(status));
  head_put(&h, "\r\n", 2);
  if (ctype != NULL) {
    head_put(&h, "Content-Type: ", 14);
    head_puts(&h, ctype);
    head_put(&h, "\r\n", 2);
  }
  if (extra != NULL)
    head_puts(&h, extra);
  if (c->origin != NULL) { /* an --allowed-origin: itself, never the wildcard */
    static const char cors[] = "Access-Control-Allow-Headers: accept, content-type, "
                               "authorization\r\nAccess-Control-Allow-Methods: POST, GET, "
                               "OPTIONS, PUT, DELETE\r\nAccess-Control-Allow-Origin: ";
    head_put(&h, cors, sizeof(cors) - 1);
    static const char vary[] = "\r\nVary: Origin\r\n";
    head_put(&h, c->origin, strcspn(c->origin, "\r\n"));
    head_put(&h, vary, sizeof(vary) - 1);
  } else if (!c->cors_off &&
             (c->cors || (c->slot != NULL && (c->slot->route->flags & RV_ROUTE_CORS)))) {
    /* etcd's, for clients that send no Origin (no browser can use them without one) */
    static const char cors[] = "Access-Control-Allow-Headers: accept, content-type, "
                               "authorization\r\nAccess-Control-Allow-Methods: POST, GET, "
                               "OPTIONS, PUT, DELETE\r\nAccess-Control-Allow-Origin: *\r\n";
    head_put(&h, cors, sizeof(cors) - 1);
  }
  if (c->flags & CONN_CLOSE_AFTER_REPLY)
    head_put(&h, "Connection: close\r\n", 19);
  head_put(&h, "Date: ", 6);
  head_puts(&h, rv_server_date(srv));
  if (content_length >= 0) {
    head_put(&h, "\r\nContent-Length: ", 18);
    head_num(&h, (unsigned long long)content_length);
    head_put(&h, "\r\n\r\n", 4);
  } else if (c->parser.http_minor == 0 && c->parser.http_major == 1) {
    /* HTTP/1.0 has no chunked encoding: the body runs until the connection closes */
    head_put(&h, "\r\n\r\n", 4);
  } else {
    head_put(&h, "\r\nTransfer-Encoding: chunked\r\n\r\n", 32);
  }
  head_flush(&h);
}

static struct rv_conn *req_conn(struct rv_req *req)
{
  return (struct rv_conn *)((char *)req - offsetof(struct rv_conn, req));
}

static void count_status(struct rv_conn *c, int status)
{
  rv_router_count(c->srv, c->slot, status);
  if (c->srv->cfg.log_requests)
    mu_log(MU_LOG_INFO, "%s %s %d", c->req.method_name ? c->req.method_name : "-",
           c->req.target ? c->req.target : "-", status);
}

int rv_reply_refused(struct rv_req *req, size_t len)
{
  struct rv_conn *c = req_conn(req);
  size_t cap = c->srv->cfg.max_output_bytes;
  if (len > 4096 && !c->is_head && len + 4096 + c->out.len + c->wbuf.len > cap) {
    /* too large to send: a status that says so (in the API's shape), not a dropped connection */
    rv_refuse_output(req, "the answer takes", len,
                     "ask for less (a smaller directory, without recursive) or raise "
                     "--max-output-bytes");
    return 1;
  }
  if (len > 4096 && !c->is_head && !(c->flags & CONN_FAKE) &&
      !(c->slot != NULL && (c->slot->route->flags & RV_ROUTE_UNHELD)) &&
      !rv_budget_output_fits(c, len)) {
    /* the answers waiting to be read would pass the budget: refused, not buffered (health and
     * metrics, small and what an operator needs then, are always answered) */
    char msg[320];
    snprintf(msg, sizeof(msg),
             "musterd's buffers for answers not yet read are full (%zu bytes; --max-buffer-bytes, "
             "--max-buffer-bytes-per-client): read the answers already asked for, then retry",
             c->srv->buffered);
    struct rv_refusal r = {RV_REFUSE_TOO_MANY, msg, 0, NULL};
    c->srv->budget_refused++;
    rv_refuse(req, &r);
    return 1;
  }
  return 0;
}

void rv_reply(struct rv_req *req, int status, const char *content_type, const char *extra_headers,
              const void *body, size_t len)
{
  struct rv_conn *c = req_conn(req);
  if (c->state != REQ_HANDLING || rv_reply_refused(req, len))
    return;
  count_status(c, status);
  write_head(c, status, content_type, extra_headers, (long long)len);
  if (!c->is_head && len > 0)
    rv_conn_out_append(c, body, len);
  rv_conn_request_finished(c);
}

void rv_reply_text(struct rv_req *req, int status, const char *content_type, const char *body)
{
  rv_reply(req, status, content_type, NULL, body, strlen(body));
}

void rv_reply_take(struct rv_req *req, int status, const char *content_type,
                   const char *extra_headers, struct mu_buf *body)
{
  rv_reply(req, status, content_type, extra_headers, body->data ? body->data : "", body->len);
  mu_buf_clear(body);
}

void rv_reply_error(struct rv_req *req, int status, const char *extra_headers, const char *code,
                    const char *message, const char *reason)
{
  struct mu_buf b = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  mu_buf_puts(&b, "{\"error\":");
  mu_json_str(&b, code, strlen(code));
  mu_buf_puts(&b, ",\"message\":");
  mu_json_str(&b, message, strlen(message));
  if (reason != NULL) {
    mu_buf_puts(&b, ",\"reason\":");
    mu_json_str(&b, reason, strlen(reason));
  }
  mu_buf_puts(&b, "}\n");
  rv_reply(req, status, "application/json", extra_headers, b.data, b.len);
  mu_buf_release(&b);
}

void rv_req_defer(struct rv_req *req, rv_gone_cb *on_gone, void *data)
{
  struct rv_conn *c = req_conn(req);
  /* The handler has read the body and the gate has admitted the request: its body no longer
   * counts against the bound on bodies before authentication, or that bound (64 MiB) would cap
   * the parked long polls (a million pending joins hold ~200 MB of bodies; the quotas bound
   * those per client and per run) */
  rv_conn_body_uncount(c);
  c->gone = on_gone;
  c->gone_data = data;
}

void rv_reply_start(struct rv_req *req, int status, const char *content_type,
                    const char *extra_headers)
{
  struct rv_conn *c = req_conn(req);
  if (c->state != REQ_HANDLING)
    return;
  count_status(c, status);
  c->state = REQ_STREAMING;
  write_head(c, status, content_type, extra_headers, -1);
  if (!(c->flags & (CONN_IN_READ | CONN_IN_DISPATCH)))
    rv_conn_flush(c);
}

/* Appends one body piece of a streamed reply: chunk-framed, or raw for HTTP/1.0. */
static int append_piece(struct rv_conn *c, const void *data, size_t len)
{
  char line[32];
  if (len == 0)
    return 0;
  if (c->parser.http_major == 1 && c->parser.http_minor == 0)
    return rv_conn_out_append(c, data, len);
  int n = snprintf(line, sizeof(line), "%zx\r\n", len);
  if (rv_conn_out_append(c, line, (size_t)n) != 0 || rv_conn_out_append(c, data, len) != 0 ||
      rv_conn_out_append(c, "\r\n", 2) != 0)
    return -1;
  return 0;
}

static int append_last(struct rv_conn *c)
{
  if (c->parser.http_major == 1 && c->parser.http_minor == 0) {
    c->flags |= CONN_CLOSE_AFTER_REPLY;
    return 0;
  }
  return rv_conn_out_append(c, "0\r\n\r\n", 5);
}

void rv_reply_chunk(struct rv_req *req, const void *data, size_t len)
{
  struct rv_conn *c = req_conn(req);
  if (c->state != REQ_STREAMING || len == 0 || c->is_head)
    return;
  if (append_piece(c, data, len) != 0)
    return;
  if (!(c->flags & (CONN_IN_READ | CONN_IN_DISPATCH)))
    rv_conn_flush(c);
}

void rv_reply_end(struct rv_req *req)
{
  struct rv_conn *c = req_conn(req);
  if (c->state != REQ_STREAMING)
    return;
  if (!c->is_head && append_last(c) != 0)
    return;
  rv_conn_request_finished(c);
}

/* Appends what uv_try_write() left of `b` (`done` bytes went out). Returns: 0, or -1. */
static int append_rest(struct rv_conn *c, const uv_buf_t *b, size_t nb, size_t done)
{
  for (size_t i = 0; i < nb; i++) {
    if (done >= b[i].len) {
      done -= b[i].len;
      continue;
    }
    if (rv_conn_out_append(c, b[i].base + done, b[i].len - done) != 0)
      return -1;
    done = 0;
  }
  return 0;
}

void rv_reply_finish(struct rv_req *req, const void *data, size_t len)
{
  struct rv_conn *c = req_conn(req);
  if (c->state != REQ_STREAMING)
    return;
  /* The watch fan-out path (thousands of parked watches answered by one write): nothing
   * queued, plain TCP, HTTP/1.1, outside this connection's read loop. One writev of the chunk
   * size line, the caller's (shared) bytes and the terminator: no copy, no allocation. */
  if (c->is_head) {
    /* a HEAD answer has no body, not even a chunked one */
    rv_conn_request_finished(c);
    return;
  }
  if (len > 0 && len < INT_MAX / 2 && c->out.len == 0 && !c->writing && c->tls == NULL &&
      rv_conn_out_need_now(c) <= c->srv->durable &&
      !(c->flags & (CONN_FAKE | CONN_CLOSING | CONN_IN_READ | CONN_IN_DISPATCH)) &&
      !(c->parser.http_major == 1 && c->parser.http_minor == 0)) {
    static char tail[] = "\r\n0\r\n\r\n";
    char size[24];
    int n = snprintf(size, sizeof(size), "%zx\r\n", len);
    uv_buf_t b[3] = {uv_buf_init(size, (unsigned)n), uv_buf_init((char *)data, (unsigned)len),
                     uv_buf_init(tail, sizeof(tail) - 1)};
    int w = uv_try_write((uv_stream_t *)&c->tcp, b, 3);
    if (w < 0 && w != UV_EAGAIN) {
      rv_conn_close(c);
      return;
    }
    if (w != (int)((size_t)n + len + sizeof(tail) - 1) &&
        append_rest(c, b, 3, w > 0 ? (size_t)w : 0) != 0)
      return;
    rv_conn_request_finished(c);
    return;
  }
  if (append_piece(c, data, len) != 0 || append_last(c) != 0)
    return;
  rv_conn_request_finished(c);
}

void rv_req_flush(struct rv_req *req)
{
  struct rv_conn *c = req_conn(req);
  if (!(c->flags & CONN_CLOSING))
    rv_conn_flush(c);
}

size_t rv_req_unsent(const struct rv_req *req)
{
  const struct rv_conn *c =
      (const struct rv_conn *)((const char *)req - offsetof(struct rv_conn, req));
  return c->out.len + c->wbuf.len;
}
