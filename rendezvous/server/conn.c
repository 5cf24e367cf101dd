/* Connection lifecycle, llhttp callbacks and the output path (the replies are made in reply.c).
 *
 * Why the parser pauses at the end of every message: a handler may defer its answer (a long
 * poll), and pipelined requests behind it must be answered in order. So on_message_complete
 * returns HPE_PAUSED, the request is dispatched, and the bytes after it are parsed only once
 * the answer is complete; meanwhile they wait in `c->in` (capped; past the cap the
 * connection stops reading).
 *
 * Output is appended to `c->out` and flushed once per read (so a pipelined batch leaves in
 * one write) or at once for a reply made outside a read (a deferred answer). uv_try_write
 * first, uv_write for the rest; `out` + `wbuf` together never pass max_output_bytes, else
 * the connection is closed (a client that never reads must not grow our memory).
 *
 * Lifecycle (libuv's rule): rv_conn_close() calls uv_close(), and only on_close frees; inside
 * its own callbacks a connection only sets CONN_CLOSE_AFTER_REPLY or CONN_CLOSING.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "muster/errno.h"

#include "alloc.h"
#include "conn_int.h"
#include "decimal.h"
#include "json.h"
#include "log.h"
#include "server.h"
#include "stream.h"
#include "tls.h"

static void conn_feed(struct rv_conn *c, const char *data, size_t len);

/* ---------------------------------------------------------------------------------------------
 * Parser callbacks
 */

static struct rv_conn *conn_of(llhttp_t *p)
{
  return p->data;
}

static int head_over(struct rv_conn *c)
{
  struct rv_server *srv = c->srv;
  if (c->in_url && c->head.len > srv->cfg.max_url_bytes) {
    c->req_error = 414;
    return 1;
  }
  if (c->head.len > srv->cfg.max_header_bytes) {
    c->req_error = c->in_url ? 414 : 431;
    return 1;
  }
  return 0;
}

/* The request's body is no longer held against the server-wide and per-address bounds. */
void rv_conn_body_uncount(struct rv_conn *c)
{
  c->srv->body_total -= c->body_counted;
  if (c->addr != NULL)
    c->addr->body -= c->body_counted;
  c->body_counted = 0;
}

/* Finds or adds the share of address `peer` (n bytes), without counting anything. */
static struct rv_addr *addr_find(struct rv_server *srv, const char *peer, size_t n)
{
  struct mu_hnode *h = mu_htab_find(&srv->addrs, peer, n);
  struct rv_addr *a = h != NULL ? MU_CONTAINER_OF(h, struct rv_addr, h) : NULL;
  if (a == NULL) {
    a = mu_calloc(1, sizeof(*a) + n + 1);
    a->h.key = (char *)(a + 1);
    memcpy(a->h.key, peer, n);
    mu_htab_add(&srv->addrs, &a->h, a->h.key, n);
  }
  return a;
}

/* Drops the share of an address no connection holds any more. */
static void addr_drop_unused(struct rv_server *srv, struct rv_addr *a)
{
  if (a->conns > 0 || a->streams > 0)
    return;
  mu_htab_del(&srv->addrs, &a->h);
  mu_free(a);
}

void rv_server_addr_put(struct rv_server *srv, struct rv_addr *a)
{
  if (a == NULL)
    return;
  a->streams--;
  addr_drop_unused(srv, a);
}

int rv_server_addr_take(struct rv_server *srv, const char *peer, struct rv_addr **out)
{
  size_t n = strlen(peer);
  *out = NULL;
  if (n == 0)
    return 0;
  struct rv_addr *a = addr_find(srv, peer, n);
  a->streams++;
  if (a->streams > srv->cfg.max_connections_per_address) {
    srv->addr_conns_rejected++;
    rv_server_addr_put(srv, a);
    return MU_E2BIG;
  }
  *out = a;
  return 0;
}

int rv_server_bytes_take(struct rv_server *srv, struct rv_addr *a, size_t n)
{
  if (srv->body_total + n > RV_BODY_TOTAL_FACTOR * srv->cfg.max_body_bytes) {
    srv->body_refused++;
    return MU_E2BIG;
  }
  if (a != NULL && a->body + n > srv->cfg.max_body_bytes_per_address) {
    srv->addr_body_refused++;
    return MU_E2BIG;
  }
  srv->body_total += n;
  if (a != NULL)
    a->body += n;
  return 0;
}

void rv_server_bytes_put(struct rv_server *srv, struct rv_addr *a, size_t n)
{
  srv->body_total -= n;
  if (a != NULL)
    a->body -= n;
}

/* Takes one connection's share of the client address `c->peer` (counted even over the limit:
 * the connection is answered 503 and closed, and gives it back then). */
static void addr_take(struct rv_conn *c)
{
  size_t n = strlen(c->peer);
  if (n == 0)
    return;
  c->addr = addr_find(c->srv, c->peer, n);
  c->addr->conns++;
}

/* Gives back the connection's share of its address (and the body it holds). */
static void addr_put(struct rv_conn *c)
{
  rv_conn_body_uncount(c);
  struct rv_addr *a = c->addr;
  c->addr = NULL;
  if (a != NULL) {
    a->conns--;
    addr_drop_unused(c->srv, a);
  }
}

static int on_message_begin(llhttp_t *p)
{
  struct rv_conn *c = conn_of(p);
  rv_conn_body_uncount(c);
  mu_buf_clear(&c->head);
  mu_buf_clear(&c->body);
  c->url_len = 0;
  c->in_url = 1;
  c->last_was_value = 1;
  c->nhdr = 0;
  c->req_error = 0;
  c->req_why = NULL;
  c->origin = NULL;
  c->cors_off = 0;
  uint64_t t = c->srv->cfg.header_timeout_ms;
  c->deadline = t > 0 ? uv_now(c->srv->loop) + t : 0;
  return 0;
}

static int on_url(llhttp_t *p, const char *at, size_t len)
{
  struct rv_conn *c = conn_of(p);
  if (mu_buf_append(&c->head, at, len) != 0 || head_over(c)) {
    if (c->req_error == 0)
      c->req_error = 414;
    return -1;
  }
  c->url_len += len;
  return 0;
}

static int start_piece(struct rv_conn *c, int value)
{
  if (c->in_url) {
    c->in_url = 0;
    if (mu_buf_putc(&c->head, '\0') != 0)
      return -1;
  }
  if (value == c->last_was_value)
    return 0;
  if (!value && c->nhdr >= RV_MAX_HEADERS) {
    c->req_error = 431;
    return -1;
  }
  if (c->nhdr > 0 || value) {
    /* terminate the previous piece */
    if (c->head.len > 0 && c->head.data[c->head.len - 1] != '\0' && mu_buf_putc(&c->head, '\0'))
      return -1;
  }
  if (!value)
    c->hdr_name[c->nhdr] = (uint16_t)c->head.len;
  else
    c->nhdr++; /* its value starts right after the name's '\0' */
  c->last_was_value = value;
  return 0;
}

static int on_piece(llhttp_t *p, const char *at, size_t len, int value)
{
  struct rv_conn *c = conn_of(p);
  if (start_piece(c, value) != 0 || mu_buf_append(&c->head, at, len) != 0 || head_over(c)) {
    if (c->req_error == 0)
      c->req_error = 431;
    return -1;
  }
  return 0;
}

static int on_header_field(llhttp_t *p, const char *at, size_t len)
{
  return on_piece(p, at, len, 0);
}

static int on_header_value(llhttp_t *p, const char *at, size_t len)
{
  return on_piece(p, at, len, 1);
}

static int on_headers_complete(llhttp_t *p)
{
  struct rv_conn *c = conn_of(p);
  if (c->in_url) {
    c->in_url = 0;
    if (mu_buf_putc(&c->head, '\0') != 0)
      goto big;
  } else if (!c->last_was_value) {
    /* a field without a value: give it an empty one */
    if (start_piece(c, 1) != 0)
      goto big;
  }
  if (mu_buf_putc(&c->head, '\0') != 0)
    goto big;
  if (c->head.len > c->srv->cfg.max_header_bytes + 2)
    goto big;
  if ((p->flags & F_CONTENT_LENGTH) && p->content_length > c->srv->cfg.max_body_bytes) {
    c->req_error = 413;
    return -1;
  }
  uint64_t t = c->srv->cfg.body_timeout_ms;
  int body = (p->flags & F_CHUNKED) || ((p->flags & F_CONTENT_LENGTH) && p->content_length > 0);
  c->deadline = body && t > 0 ? uv_now(c->srv->loop) + t : 0;
  /* curl sends "Expect: 100-continue" before bodies over 1 KiB: say go (as Go's server does
   * when the handler reads the body), or it waits a second */
  if (p->http_major == 1 && p->http_minor >= 1 && (p->flags & (F_CONTENT_LENGTH | F_CHUNKED))) {
    for (unsigned i = 0; i < c->nhdr; i++) {
      if (strcasecmp(rv_conn_hdr_name(c, i), "Expect") == 0 &&
          strcasecmp(rv_conn_hdr_value(c, i), "100-continue") == 0) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        if (mu_buf_append(&c->out, cont, sizeof(cont) - 1) != 0)
          return -1;
        break;
      }
    }
  }
  return 0;
big:
  c->req_error = 431;
  return -1;
}

static int on_body(llhttp_t *p, const char *at, size_t len)
{
  struct rv_conn *c = conn_of(p);
  struct rv_server *srv = c->srv;
  if (c->body.len + len > srv->cfg.max_body_bytes || mu_buf_append(&c->body, at, len) != 0) {
    c->req_error = 413;
    return -1;
  }
  if (srv->body_total + len > RV_BODY_TOTAL_FACTOR * srv->cfg.max_body_bytes) {
    /* memory held for clients nobody has authenticated yet is bounded in total */
    srv->body_refused++;
    c->req_error = 503;
    c->req_why = "the request bodies in progress on all connections are at their bound (64 x "
                 "--max-body-bytes); retry";
    return -1;
  }
  if (c->addr != NULL && c->addr->body + len > srv->cfg.max_body_bytes_per_address) {
    /* ... and per client address: one address cannot take the whole of it */
    srv->addr_body_refused++;
    c->req_error = 503;
    c->req_why = "the request bodies in progress from this client address are at their bound "
                 "(--max-body-bytes-per-address); finish them, then retry";
    return -1;
  }
  srv->body_total += len;
  if (c->addr != NULL)
    c->addr->body += len;
  c->body_counted += len;
  return 0;
}

static int on_message_complete(llhttp_t *p)
{
  struct rv_conn *c = conn_of(p);
  c->keep_alive = llhttp_should_keep_alive(p);
  c->deadline = 0;
  return HPE_PAUSED;
}

static const llhttp_settings_t *parser_settings(void)
{
  static llhttp_settings_t s;
  static int done;
  if (!done) {
    llhttp_settings_init(&s);
    s.on_message_begin = on_message_begin;
    s.on_url = on_url;
    s.on_header_field = on_header_field;
    s.on_header_value = on_header_value;
    s.on_headers_complete = on_headers_complete;
    s.on_body = on_body;
    s.on_message_complete = on_message_complete;
    done = 1;
  }
  return &s;
}

/* ---------------------------------------------------------------------------------------------
 * Lifecycle
 */

static void conn_init(struct rv_conn *c, struct rv_server *srv)
{
  memset(c, 0, sizeof(*c));
  c->srv = srv;
  llhttp_init(&c->parser, HTTP_REQUEST, parser_settings());
  c->parser.data = c;
  mu_buf_init(&c->in, srv->cfg.max_header_bytes + srv->cfg.max_body_bytes + 65536);
  mu_buf_init(&c->out, srv->cfg.max_output_bytes);
  mu_buf_init(&c->wbuf, srv->cfg.max_output_bytes);
  mu_buf_init(&c->head, srv->cfg.max_header_bytes + 64);
  mu_buf_init(&c->body, srv->cfg.max_body_bytes + 1);
  c->last_active = uv_now(srv->loop);
}

/* A request ended (answered or abandoned): give back what the gate took for it. */
static void conn_release_ticket(struct rv_conn *c)
{
  if (c->ticket.counted && c->srv->gate.release != NULL)
    c->srv->gate.release(c->srv->gate.data, &c->ticket);
  memset(&c->ticket, 0, sizeof(c->ticket));
}

static void conn_release(struct rv_conn *c)
{
  rv_conn_body_uncount(c);
  conn_release_ticket(c);
  rv_tls_conn_free(c->tls);
  c->tls = NULL;
  mu_buf_release(&c->in);
  mu_buf_release(&c->out);
  mu_buf_release(&c->wbuf);
  mu_buf_release(&c->head);
  mu_buf_release(&c->body);
  mu_free(c->scratch);
  mu_free(c->params);
}

static void on_close(uv_handle_t *h)
{
  struct rv_conn *c = h->data;
  struct rv_server *srv = c->srv;
  rv_budget_forget(c);
  if (c->flags & CONN_RESUME_QUEUED)
    rv_server_unqueue_resume(srv, c);
  conn_release_ticket(c); /* before the server may be freed by the unref below */
  addr_put(c);
  rv_server_conn_closed(srv, c);
  conn_release(c);
  mu_free(c);
}

/* The request in progress is dead for its owner: tell it (once). */
static void conn_abort_request(struct rv_conn *c)
{
  if (c->state == REQ_IDLE)
    return;
  rv_gone_cb *gone = c->gone;
  void *data = c->gone_data;
  c->gone = NULL;
  c->state = REQ_IDLE;
  conn_release_ticket(c);
  if (gone != NULL)
    gone(&c->req, data);
}

static void conn_unhold(struct rv_conn *c)
{
  if (c->flags & CONN_HELD) {
    c->flags &= ~CONN_HELD;
    mu_list_remove(&c->srv->held, &c->held_link);
  }
}

void rv_conn_close(struct rv_conn *c)
{
  if (c->flags & CONN_CLOSING)
    return;
  c->flags |= CONN_CLOSING;
  conn_unhold(c);
  if (!(c->flags & CONN_IN_DISPATCH))
    conn_abort_request(c);
  if (c->flags & CONN_FAKE)
    return;
  uv_close((uv_handle_t *)&c->tcp, on_close);
}

void rv_conn_shutdown(struct rv_conn *c)
{
  if (c->flags & CONN_CLOSING)
    return;
  conn_abort_request(c);
  c->flags |= CONN_CLOSE_AFTER_REPLY;
  if (!c->writing && c->out.len == 0)
    rv_conn_close(c);
  else
    rv_conn_flush(c);
}

/* ---------------------------------------------------------------------------------------------
 * Output
 */

/* The output that paused reading went out: parse what was stashed, and read again. */
static void maybe_unpause(struct rv_conn *c)
{
  if (!(c->flags & CONN_OUT_PAUSED) || c->out.len + c->wbuf.len > rv_budget_out_pause(c) / 2)
    return;
  c->flags &= ~CONN_OUT_PAUSED;
  if (c->state == REQ_IDLE && !(c->flags & (CONN_CLOSING | CONN_CLOSE_AFTER_REPLY)))
    rv_server_queue_resume(c->srv, c);
}

static void on_write(uv_write_t *w, int status)
{
  struct rv_conn *c = w->data;
  mu_free(w);
  c->writing = 0;
  mu_buf_clear(&c->wbuf);
  if (c->wbuf.cap > 65536 || rv_conn_anonymous(c)) {
    mu_buf_release(&c->wbuf);
    rv_tls_conn_trim(c->tls);
  }
  if (status < 0) {
    rv_conn_close(c);
    return;
  }
  if (!(c->flags & CONN_CLOSING))
    rv_conn_flush(c);
  if (!(c->flags & CONN_CLOSING))
    maybe_unpause(c);
  rv_budget_account(c);
}

void rv_conn_flush(struct rv_conn *c)
{
  if (c->flags & CONN_CLOSING)
    return;
  if (c->flags & CONN_FAKE) {
    if (c->out.len > 0 && c->fake_out != NULL) {
      if (mu_buf_append(c->fake_out, c->out.data, c->out.len) != 0)
        c->fake_out = NULL;
    }
    mu_buf_clear(&c->out);
    if ((c->flags & CONN_CLOSE_AFTER_REPLY) && c->state == REQ_IDLE)
      rv_conn_close(c);
    return;
  }
  if (c->writing)
    return;
  if (c->out_need > c->srv->durable && c->srv->barrier.need != NULL) {
    /* group commit: what `out` says may not be durable yet; rv_server_durable() sends it */
    if (!(c->flags & CONN_HELD)) {
      c->flags |= CONN_HELD;
      c->srv->output_held++;
      mu_list_push_back(&c->srv->held, &c->held_link);
    }
    return;
  }
  c->out_need = 0;
  /* TLS: the plaintext in `out` becomes records (plus any handshake messages owed) */
  if (c->tls != NULL && rv_tls_conn_encrypt(c->tls, &c->out) != 0) {
    rv_conn_close(c);
    return;
  }
  if (c->out.len == 0) {
    if ((c->flags & CONN_CLOSE_AFTER_REPLY) && c->state == REQ_IDLE)
      rv_conn_close(c);
    return;
  }
  uv_buf_t b;
  int n = rv_stream_try_send((uv_stream_t *)&c->tcp, &c->out, &c->wbuf, &b);
  if (n == RV_SENT_ALL) {
    /* a parked long poll keeps no output buffer (10,000 watchers at <= 2 KB each), nor does a
     * stranger (a TLS handshake's flight left 1 KiB in every anonymous connection) */
    if (c->out.cap > 65536 || c->state != REQ_IDLE || rv_conn_anonymous(c)) {
      mu_buf_release(&c->out);
      rv_tls_conn_trim(c->tls);
    }
    if ((c->flags & CONN_CLOSE_AFTER_REPLY) && c->state == REQ_IDLE)
      rv_conn_close(c);
    else
      maybe_unpause(c);
    return;
  }
  if (n < 0) {
    rv_conn_close(c);
    return;
  }
  /* made for the write (most answers leave with uv_try_write): 192 bytes less per connection */
  uv_write_t *w = mu_malloc(sizeof(*w));
  w->data = c;
  if (uv_write(w, (uv_stream_t *)&c->tcp, &b, 1, on_write) != 0) {
    mu_free(w);
    rv_conn_close(c);
    return;
  }
  c->writing = 1;
  c->write_since = uv_now(c->srv->loop);
}

void rv_conn_release_held(struct rv_conn *c)
{
  conn_unhold(c);
  rv_conn_flush(c);
}

/* The barrier's sequence number for output queued now (0 without a barrier). */
uint64_t rv_conn_out_need_now(const struct rv_conn *c)
{
  const struct rv_barrier *b = &c->srv->barrier;
  return b->need != NULL && !c->srv->barrier_off ? b->need(b->data) : 0;
}

/* Appends to the output, or closes the connection when the cap is passed. */
int rv_conn_out_append(struct rv_conn *c, const void *p, size_t n)
{
  if (c->flags & CONN_CLOSING)
    return -1;
  uint64_t need = rv_conn_out_need_now(c);
  if (need > c->out_need)
    c->out_need = need;
  if (c->wbuf.len + c->out.len + n > c->srv->cfg.max_output_bytes ||
      mu_buf_append(&c->out, p, n) != 0) {
    c->srv->conns_output_overflow++;
    mu_log(MU_LOG_WARN, "closing a connection: unsent output over %zu bytes (client not reading)",
           c->srv->cfg.max_output_bytes);
    rv_conn_close(c);
    return -1;
  }
  return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Request flow
 */

const char *rv_req_header(const struct rv_req *req, const char *name)
{
  const struct rv_conn *c =
      (const struct rv_conn *)((const char *)req - offsetof(struct rv_conn, req));
  for (unsigned i = 0; i < c->nhdr; i++) {
    if (strcasecmp(rv_conn_hdr_name(c, i), name) == 0)
      return rv_conn_hdr_value(c, i);
  }
  return NULL;
}

const char *rv_req_peer(const struct rv_req *req)
{
  const struct rv_conn *c =
      (const struct rv_conn *)((const char *)req - offsetof(struct rv_conn, req));
  return c->peer;
}

const char *rv_req_param(const struct rv_req *req, const char *name)
{
  for (size_t i = 0; i < req->nparams; i++)
    if (strcmp(req->params[i].name, name) == 0)
      return req->params[i].value;
  return NULL;
}

/* The answer is complete: go on with stashed input. Inside the read loop it goes on by
 * itself; otherwise (a deferred answer made from another callback) the server resumes the
 * connection from a 0 ms timer, so no handler runs inside the caller (e.g. the store's
 * watcher notification). */
void rv_conn_request_finished(struct rv_conn *c)
{
  rv_conn_body_uncount(c);
  if (!c->srv->auth_required && c->slot != NULL)
    c->flags |= CONN_TRUSTED; /* no credentials to show: a routed request answered is enough */
  c->state = REQ_IDLE;
  conn_release_ticket(c);
  c->gone = NULL;
  c->gone_data = NULL;
  c->last_active = uv_now(c->srv->loop);
  if (c->flags & (CONN_IN_READ | CONN_IN_DISPATCH))
    return;
  if ((c->in.len > 0 || (c->flags & CONN_READ_STOPPED)) &&
      !(c->flags & (CONN_CLOSING | CONN_CLOSE_AFTER_REPLY | CONN_FAKE)))
    rv_server_queue_resume(c->srv, c);
  rv_conn_flush(c);
}

void rv_conn_resume(struct rv_conn *c)
{
  if (c->flags & CONN_CLOSING || c->state != REQ_IDLE)
    return;
  if (c->in.len > 0 && !(c->flags & CONN_CLOSE_AFTER_REPLY)) {
    struct mu_buf pending = c->in;
    mu_buf_init(&c->in, pending.max);
    c->flags |= CONN_IN_READ;
    conn_feed(c, pending.data, pending.len);
    c->flags &= ~CONN_IN_READ;
    mu_buf_release(&pending);
  }
  if ((c->flags & CONN_READ_STOPPED) && c->in.len == 0 && !(c->flags & CONN_CLOSING)) {
    c->flags &= ~CONN_READ_STOPPED;
    rv_conn_start_reading(c);
  }
  rv_conn_flush(c);
  rv_budget_account(c);
}

static void error_reply(struct rv_conn *c, int status)
{
  c->state = REQ_HANDLING;
  c->slot = NULL;
  c->cors = 0; /* Go's server answers bad HTTP itself, without etcd's headers */
  c->keep_alive = 0;
  c->srv->limit_hits += (status == 413 || status == 414 || status == 431);
  if (status == 413 || status == 414 || status == 431)
    mu_log(MU_LOG_WARN, "request refused with %d %s", status, rv_status_reason(status));
  char body[320];
  int n = snprintf(body, sizeof(body), "%d %s%s%s\n", status, rv_status_reason(status),
                   c->req_why ? ": " : "", c->req_why ? c->req_why : "");
  c->req_why = NULL;
  memset(&c->req, 0, sizeof(c->req));
  c->req.srv = c->srv;
  rv_reply(&c->req, status, "text/plain; charset=utf-8", NULL, body, (size_t)n);
}

static void dispatch(struct rv_conn *c)
{
  c->state = REQ_HANDLING;
  c->is_head = c->parser.method == HTTP_HEAD;
  c->flags |= CONN_IN_DISPATCH;
  rv_router_dispatch(c);
  c->flags &= ~CONN_IN_DISPATCH;
  if (c->flags & CONN_CLOSING) {
    /* closed (output cap) during the handler: the request dies with the connection */
    conn_abort_request(c);
    return;
  }
  if (c->state == REQ_HANDLING && c->gone == NULL) {
    mu_log(MU_LOG_ERROR, "handler for %s left the request unanswered", c->req.path);
    rv_reply(&c->req, 500, "text/plain", NULL, "internal error\n", 15);
  }
}

/* Parses and dispatches as much of `data` as the request flow allows; the rest is stashed. */
static void conn_feed(struct rv_conn *c, const char *data, size_t len)
{
  while (len > 0) {
    if (c->flags & (CONN_CLOSING | CONN_CLOSE_AFTER_REPLY))
      return;
    if (c->state == REQ_IDLE && c->out.len + c->wbuf.len > rv_budget_out_pause(c) &&
        !(c->flags & CONN_FAKE)) {
      /* the client is not reading its answers: stop reading its requests until it does */
      if (mu_buf_append(&c->in, data, len) != 0) {
        rv_conn_close(c);
        return;
      }
      if (!(c->flags & CONN_OUT_PAUSED)) {
        c->flags |= CONN_OUT_PAUSED;
        c->srv->reads_paused++;
      }
      if (!(c->flags & CONN_READ_STOPPED)) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->flags |= CONN_READ_STOPPED;
      }
      return;
    }
    if (c->state != REQ_IDLE) {
      if (mu_buf_append(&c->in, data, len) != 0) {
        /* too much pipelined input behind a long poll: drop it and this client */
        rv_conn_close(c);
      } else if (c->in.len > 65536 && !(c->flags & (CONN_FAKE | CONN_READ_STOPPED))) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->flags |= CONN_READ_STOPPED;
      }
      return;
    }
    llhttp_errno_t err = llhttp_execute(&c->parser, data, len);
    if (err == HPE_OK)
      return;
    if (err == HPE_PAUSED) {
      const char *pos = llhttp_get_error_pos(&c->parser);
      size_t used = (pos != NULL && pos >= data && pos <= data + len) ? (size_t)(pos - data) : len;
      data += used;
      len -= used;
      llhttp_resume(&c->parser);
      dispatch(c);
      continue;
    }
    error_reply(c, c->req_error ? c->req_error : 400);
    return;
  }
}

static void conn_eof(struct rv_conn *c)
{
  c->flags |= CONN_EOF;
  if (c->state != REQ_IDLE) {
    /* the client went away (or half-closed) during a long poll: etcd drops the watch too */
    rv_conn_close(c);
    return;
  }
  if (llhttp_finish(&c->parser) != HPE_OK && c->head.len > 0 && !(c->flags & CONN_FAKE)) {
    /* truncated request: nobody is left to read an answer */
  }
  if (c->out.len > 0 || c->writing) {
    c->flags |= CONN_CLOSE_AFTER_REPLY;
    rv_conn_flush(c);
    return;
  }
  rv_conn_close(c);
}

/* ---------------------------------------------------------------------------------------------
 * Socket side
 */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
  struct rv_conn *c = h->data;
  (void)suggested;
  /* one loop thread, and on_read consumes the bytes before returning: one buffer serves all */
  buf->base = c->srv->read_buf;
  buf->len = rv_budget_read_size(c); /* an anonymous connection reads 4 KiB at a time */
}

/* Decrypted bytes from rv_tls_conn_read(): parsed as if read from the socket. */
static int tls_plain(void *data, const char *plain, size_t len)
{
  struct rv_conn *c = data;
  conn_feed(c, plain, len);
  return (c->flags & CONN_CLOSING) != 0;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
  struct rv_conn *c = s->data;
  (void)buf;
  if (nread == 0)
    return;
  if (nread < 0) {
    if (nread == UV_EOF)
      conn_eof(c);
    else
      rv_conn_close(c);
    return;
  }
  c->last_active = uv_now(c->srv->loop);
  c->flags |= CONN_IN_READ;
  if (c->srv->tls != NULL && c->tls == NULL)
    c->tls = rv_tls_conn_new(c->srv->tls); /* at its first bytes: a silent socket costs ~1.6 KiB,
                                            * not OpenSSL's ~10 KiB */
  if (c->tls != NULL) {
    int rc = rv_tls_conn_read(c->tls, buf->base, (size_t)nread, tls_plain, c);
    c->flags &= ~CONN_IN_READ;
    if (rc == RV_TLS_EOF) {
      conn_eof(c);
      return;
    }
    if (rc != 0) {
      /* a failed handshake: send the alert if it fits, then close */
      c->flags |= CONN_CLOSE_AFTER_REPLY;
      rv_conn_flush(c);
      rv_conn_close(c);
      return;
    }
    rv_conn_flush(c);
    rv_budget_account(c);
    return;
  }
  conn_feed(c, buf->base, (size_t)nread);
  c->flags &= ~CONN_IN_READ;
  rv_conn_flush(c);
  rv_budget_account(c);
}

void rv_conn_start_reading(struct rv_conn *c)
{
  if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0)
    rv_conn_close(c);
}

/* A connection that was never linked (uv_accept failed): only its memory is left. */
static void on_close_unlinked(uv_handle_t *h)
{
  mu_free(h->data);
}

/* Closes anonymous connection `v` (may be NULL) for a newcomer, its client's share of
 * connections given back at once, so that the newcomer's client does not count it. Returns: 1
 * when one went, 0 none to close. */
static int evict_for_newcomer(struct rv_conn *v)
{
  if (v == NULL)
    return 0;
  v->srv->budget_evicted++;
  rv_budget_forget(v);
  addr_put(v);
  rv_conn_close(v);
  return 1;
}

void rv_conn_accept(struct rv_server *srv)
{
  struct rv_conn *c = mu_malloc(sizeof(*c));
  conn_init(c, srv);
  uv_tcp_init(srv->loop, &c->tcp);
  c->tcp.data = c;
  /* the client (an address, or its prefix): its bounds and share, the gate's per-client
   * quotas, /v1's per-client runs */
  struct sockaddr_storage sa;
  if (rv_stream_accept(srv, (uv_stream_t *)&srv->listener, &c->tcp, &sa, c->peer,
                       sizeof(c->peer)) != 0) {
    conn_release(c);
    uv_close((uv_handle_t *)&c->tcp, on_close_unlinked);
    return;
  }
  /* link before anything can close it */
  mu_list_push_front(&srv->conns, &c->link);
  srv->refs++;
  srv->conns_accepted++;
  /* full: an anonymous connection makes room (the oldest), else the newcomer gets 503 */
  if (srv->conns.n > srv->cfg.max_connections &&
      !evict_for_newcomer(rv_budget_room_victim(srv, c))) {
    static const char msg[] = "503 too many connections\n";
    srv->conns_rejected++;
    if (srv->conns_rejected == 1 || srv->conns_rejected % 1000 == 0)
      mu_log(MU_LOG_WARN, "connection limit %u reached: refusing with 503 (%llu so far)",
             srv->cfg.max_connections, (unsigned long long)srv->conns_rejected);
    c->keep_alive = 0;
    c->state = REQ_HANDLING;
    rv_reply(&c->req, 503, "text/plain; charset=utf-8", NULL, msg, sizeof(msg) - 1);
    return;
  }
  addr_take(c);
  if (c->addr != NULL && c->addr->conns > srv->cfg.max_connections_per_address &&
      !evict_for_newcomer(rv_budget_share_victim(srv, c))) {
    static const char msg[] = "503 too many connections from this client address "
                              "(--max-connections-per-address)\n";
    if (srv->addr_conns_rejected++ % 1000 == 0)
      mu_log(MU_LOG_WARN,
             "client %s has %u connections, the per-address limit: refusing with 503 (%llu so "
             "far)",
             c->peer, srv->cfg.max_connections_per_address,
             (unsigned long long)srv->addr_conns_rejected);
    c->keep_alive = 0;
    c->state = REQ_HANDLING;
    rv_reply(&c->req, 503, "text/plain; charset=utf-8", NULL, msg, sizeof(msg) - 1);
    return;
  }
  if (srv->tls != NULL && srv->cfg.header_timeout_ms > 0) /* its session: at its first bytes */
    c->deadline = uv_now(srv->loop) + srv->cfg.header_timeout_ms; /* the handshake and the first
                                                                   * request's headers share it */
  rv_conn_start_reading(c);
}

/* ---------------------------------------------------------------------------------------------
 * Without sockets
 */

struct rv_conn *rv_conn_new_fake(struct rv_server *srv, struct mu_buf *out)
{
  struct rv_conn *c = mu_malloc(sizeof(*c));
  conn_init(c, srv);
  c->flags |= CONN_FAKE;
  c->fake_out = out;
  return c;
}

void rv_conn_feed_fake(struct rv_conn *c, const char *data, size_t len, int eof)
{
  c->flags |= CONN_IN_READ;
  conn_feed(c, data, len);
  c->flags &= ~CONN_IN_READ;
  rv_conn_flush(c);
  if (eof && !(c->flags & CONN_CLOSING))
    conn_eof(c);
}

void rv_conn_free_fake(struct rv_conn *c)
{
  c->flags |= CONN_CLOSING;
  conn_abort_request(c);
  conn_release(c);
  mu_free(c);
}
