/* The c10d listener and its connections: accept (with the server's per-address shares), read,
 * frames out of the input, answers out (held by the durability barrier as HTTP replies are),
 * back-pressure, parking while the store takes no writes, deadlines, closing with a counted
 * reason, a bounded share of frames per loop turn. A TCPStore connection lives as long as its job
 * and may be idle for hours: once it has sent a frame there is no idle timeout, only deadlines on
 * a frame in progress and on a write that makes no progress; before its first frame it has the
 * deadline of a request's headers and is the first evicted at --max-connections.
 */
#include <stdio.h>
#include <string.h>

#include "muster/errno.h"

#include "alloc.h"
#include "c10d_int.h"
#include "log.h"
#include "stream.h"

static void conn_process(struct c10d_conn *c);
static void read_update(struct c10d_conn *c);

int c10d_budget_take(struct c10d_conn *c, size_t n, const char *what)
{
  struct rv_server *srv = c->m->srv;
  if (rv_server_budget_take(srv, c->addr, n) == 0)
    return 0;
  size_t value = 0;
  const char *limit = rv_server_budget_limit(srv, c->addr, n, &value);
  mu_log(MU_LOG_WARN, "c10d: %s of %s (%zu more bytes) would pass %s (%zu): closing it", what,
         c->peer[0] ? c->peer : "?", n, limit ? limit : "--max-buffer-bytes", value);
  c10d_conn_close(c, C10D_R_BUDGET);
  return -1;
}

void c10d_budget_put(struct c10d_conn *c, size_t n)
{
  rv_server_budget_put(c->m->srv, c->addr, n);
}

/* Counts what `c` buffers now (its buffers' capacity) in the server's one memory budget, with
 * HTTP's connections and the client's. Returns: 0, or -1 when `c` was closed for it. */
static int account(struct c10d_conn *c)
{
  size_t now = c->in.cap + c->out.cap + c->wbuf.cap + c->frame.spans_cap * sizeof(struct c10d_span);
  if (now < c->held)
    c10d_budget_put(c, c->held - now);
  else if (now > c->held && c10d_budget_take(c, now - c->held, "the buffers") != 0)
    return -1;
  c->held = now;
  return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Closing
 */

static void on_conn_closed(uv_handle_t *h)
{
  struct c10d_conn *c = h->data;
  struct c10d *m = c->m;
  struct rv_server *srv = m->srv;
  if (c->counted > 0)
    rv_server_bytes_put(srv, c->addr, c->counted);
  rv_server_budget_put(srv, c->addr, c->held);
  rv_server_addr_put(srv, c->addr);
  c10d_addr_put(m, c->waddr);
  mu_list_remove(&m->conns, &c->link);
  m->conns_closing--;
  c10d_frame_release(&c->frame);
  mu_buf_release(&c->in);
  mu_buf_release(&c->out);
  mu_buf_release(&c->wbuf);
  mu_free(c);
  c10d_unref(m);
}

void c10d_conn_close(struct c10d_conn *c, enum c10d_reason why)
{
  if (c->flags & C10D_CONN_CLOSING)
    return;
  struct c10d *m = c->m;
  c->flags |= C10D_CONN_CLOSING;
  m->conns_closing++;
  m->closed[why]++;
  if (why != C10D_R_EOF && why != C10D_R_SHUTDOWN && why != C10D_R_READ_ERROR)
    mu_log(MU_LOG_INFO, "c10d: closing the connection of %s: %s", c->peer[0] ? c->peer : "?",
           c10d_reason_name(why));
  c10d_wait_cancel(c);
  c10d_watch_clear(c);
  if (c->flags & C10D_CONN_PARKED) {
    c->flags &= ~C10D_CONN_PARKED;
    mu_list_remove(&m->parked, &c->park_link);
  }
  if (c->flags & C10D_CONN_YIELDED) {
    c->flags &= ~C10D_CONN_YIELDED;
    mu_list_remove(&m->ready, &c->ready_link);
  }
  rv_server_unhold(m->srv, &c->hold);
  uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

void c10d_close_all(struct c10d *m)
{
  struct mu_list_node *next = NULL;
  for (struct mu_list_node *x = m->conns.head; x != NULL; x = next) {
    next = x->next;
    c10d_conn_close(MU_CONTAINER_OF(x, struct c10d_conn, link), C10D_R_SHUTDOWN);
  }
}

/* ---------------------------------------------------------------------------------------------
 * Output
 */

int c10d_out(struct c10d_conn *c, const void *p, size_t n)
{
  if (c->flags & C10D_CONN_CLOSING)
    return -1;
  struct rv_server *srv = c->m->srv;
  uint64_t need = rv_server_barrier_need(srv);
  if (need > c->out_need)
    c->out_need = need;
  if (c->out.len + c->wbuf.len + n > rv_server_config(srv)->max_output_bytes ||
      mu_buf_append(&c->out, p, n) != 0) {
    c10d_conn_close(c, C10D_R_OUTPUT);
    return -1;
  }
  return account(c);
}

int c10d_out_u8(struct c10d_conn *c, uint8_t v)
{
  return c10d_out(c, &v, 1);
}

int c10d_out_u32(struct c10d_conn *c, uint32_t v)
{
  uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
  return c10d_out(c, b, sizeof(b));
}

int c10d_out_u64(struct c10d_conn *c, uint64_t v)
{
  uint8_t b[8];
  for (int i = 0; i < 8; i++)
    b[i] = (uint8_t)(v >> (8 * i));
  return c10d_out(c, b, sizeof(b));
}

int c10d_out_bytes(struct c10d_conn *c, const void *p, size_t n)
{
  if (c10d_out_u64(c, n) != 0)
    return -1;
  return n > 0 ? c10d_out(c, p, n) : 0;
}

static void on_write(uv_write_t *w, int status)
{
  struct c10d_conn *c = w->data;
  c->writing = 0;
  mu_buf_clear(&c->wbuf);
  if (c->wbuf.cap > 65536)
    mu_buf_release(&c->wbuf);
  if (c->flags & C10D_CONN_CLOSING)
    return;
  account(c);
  if (status < 0) {
    c10d_conn_close(c, C10D_R_READ_ERROR);
    return;
  }
  c10d_flush(c);
  read_update(c);
}

static void on_held_released(struct rv_hold *h)
{
  struct c10d_conn *c = MU_CONTAINER_OF(h, struct c10d_conn, hold);
  c10d_flush(c);
}

/* Hands `out` to the kernel: uv_try_write, then uv_write for the rest. */
static void send_out(struct c10d_conn *c)
{
  uv_buf_t b;
  int n = rv_stream_try_send((uv_stream_t *)&c->tcp, &c->out, &c->wbuf, &b);
  if (n == RV_SENT_ALL) {
    if (c->out.cap > 65536) {
      mu_buf_release(&c->out);
      account(c);
    }
    return;
  }
  c->wreq.data = c;
  if (n < 0 || uv_write(&c->wreq, (uv_stream_t *)&c->tcp, &b, 1, on_write) != 0) {
    c10d_conn_close(c, C10D_R_READ_ERROR);
    return;
  }
  c->writing = 1;
  c->write_since = uv_now(rv_server_loop(c->m->srv));
}

void c10d_flush(struct c10d_conn *c)
{
  if (c->flags & (C10D_CONN_CLOSING | C10D_CONN_IN_READ) || c->writing || c->out.len == 0)
    return;
  struct rv_server *srv = c->m->srv;
  if (!rv_server_is_durable(srv, c->out_need)) {
    /* group commit: the answers reveal writes not durable yet */
    c->hold.need = c->out_need;
    c->hold.release = on_held_released;
    rv_server_hold(srv, &c->hold);
    return;
  }
  c->out_need = 0;
  send_out(c);
}

/* ---------------------------------------------------------------------------------------------
 * Input
 */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
  (void)suggested;
  struct c10d_conn *c = h->data;
  buf->base = c->m->read_buf;
  buf->len = sizeof(c->m->read_buf);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
  struct c10d_conn *c = s->data;
  (void)buf;
  if (c->flags & C10D_CONN_CLOSING)
    return;
  if (n < 0) {
    c10d_conn_close(c, n == UV_EOF ? C10D_R_EOF : C10D_R_READ_ERROR);
    return;
  }
  if (n == 0)
    return;
  if (mu_buf_append(&c->in, c->m->read_buf, (size_t)n) != 0) {
    c10d_conn_close(c, C10D_R_MEMORY);
    return;
  }
  if (account(c) != 0)
    return;
  if (c->frame_since == 0)
    c->frame_since = uv_now(rv_server_loop(c->m->srv));
  conn_process(c);
}

/* Reads while nothing holds the connection back (answers piling up, a parked write). */
static void read_update(struct c10d_conn *c)
{
  if (c->flags & C10D_CONN_CLOSING)
    return;
  if ((c->flags & C10D_CONN_PAUSED) && c->out.len + c->wbuf.len <= C10D_OUT_PAUSE / 2) {
    conn_process(c); /* what came before the pause (it reads again when it is done) */
    return;
  }
  int want = !(c->flags & (C10D_CONN_PAUSED | C10D_CONN_PARKED | C10D_CONN_YIELDED));
  if (want && !(c->flags & C10D_CONN_READING)) {
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0) {
      c10d_conn_close(c, C10D_R_READ_ERROR);
      return;
    }
    c->flags |= C10D_CONN_READING;
  } else if (!want && (c->flags & C10D_CONN_READING)) {
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->flags &= ~C10D_CONN_READING;
  }
}

/* The input left after the complete frames: moved to the front, counted against the server's
 * bounds on bytes held for unfinished messages. Returns: 0, or -1 when `c` was closed. */
static int keep_rest(struct c10d_conn *c)
{
  struct c10d *m = c->m;
  if (c->pos > 0) {
    mu_buf_consume(&c->in, c->pos);
    c->pos = 0;
  }
  if (c->in.len == 0) {
    c->frame_since = 0;
    if (c->in.cap > 65536)
      mu_buf_release(&c->in);
  }
  if (account(c) != 0)
    return -1;
  if (c->in.len > c->counted) {
    if (rv_server_bytes_take(m->srv, c->addr, c->in.len - c->counted) != 0) {
      c10d_conn_close(c, C10D_R_MEMORY);
      return -1;
    }
  } else if (c->in.len < c->counted) {
    rv_server_bytes_put(m->srv, c->addr, c->counted - c->in.len);
  }
  c->counted = c->in.len;
  return 0;
}

static void on_turn(uv_idle_t *h)
{
  struct c10d *m = h->data;
  /* take the list: a connection with frames left again queues for the next turn */
  struct mu_list todo = m->ready;
  mu_list_init(&m->ready);
  while (todo.head != NULL) {
    struct c10d_conn *c = MU_CONTAINER_OF(todo.head, struct c10d_conn, ready_link);
    mu_list_remove(&todo, &c->ready_link);
    c->flags &= ~C10D_CONN_YIELDED;
    conn_process(c);
  }
  if (m->ready.head == NULL)
    uv_idle_stop(&m->turn);
}

/* Ends `c`'s share of this loop turn: its other frames run in the next turn, after the I/O of
 * every other client, and it is not read meanwhile. */
static void yield_turn(struct c10d_conn *c)
{
  struct c10d *m = c->m;
  c->flags |= C10D_CONN_YIELDED;
  m->yielded_total++;
  mu_list_push_back(&m->ready, &c->ready_link);
  if (!uv_is_active((uv_handle_t *)&m->turn))
    uv_idle_start(&m->turn, on_turn);
}

/* Runs the complete frames in the input, in order, at most C10D_FRAMES_PER_TURN of them. */
static void run_frames(struct c10d_conn *c)
{
  struct c10d *m = c->m;
  unsigned share = C10D_FRAMES_PER_TURN;
  while (
      !(c->flags & (C10D_CONN_CLOSING | C10D_CONN_PAUSED | C10D_CONN_PARKED | C10D_CONN_YIELDED))) {
    if (share-- == 0) {
      if (c->pos < c->in.len)
        yield_turn(c);
      return;
    }
    const uint8_t *p = (const uint8_t *)c->in.data + c->pos;
    size_t n = c->in.len - c->pos;
    if (c->proto == C10D_PROTO_UNKNOWN) {
      c->proto = c10d_proto_detect(p, n);
      if (c->proto == C10D_PROTO_UNKNOWN)
        return;
      m->by_proto[c->proto]++;
    }
    int rc = c10d_frame_parse(&c->frame, c->proto, &m->lim, p, n);
    if (rc < 0) {
      c10d_conn_close(c, (enum c10d_reason) - rc);
      return;
    }
    if (rc == 0)
      return;
    c->flags |= C10D_CONN_SPOKE;
    rc = c10d_dispatch(c);
    if (rc <= 0)
      return; /* parked (the frame runs again later) or closed */
    c->pos += c->frame.len;
    c10d_frame_reset(&c->frame);
    c->frame_since = c->pos < c->in.len ? uv_now(rv_server_loop(m->srv)) : 0;
    if (c->out.len + c->wbuf.len > C10D_OUT_PAUSE)
      c->flags |= C10D_CONN_PAUSED;
  }
}

/* Runs what the input holds, in batches while the kernel takes the answers at once (a loop, not
 * a recursion through read_update()), then reads again unless held back. */
static void conn_process(struct c10d_conn *c)
{
  do {
    c->flags &= ~C10D_CONN_PAUSED;
    c->flags |= C10D_CONN_IN_READ;
    run_frames(c);
    c->flags &= ~C10D_CONN_IN_READ;
    if (c->flags & C10D_CONN_CLOSING)
      return;
    if (keep_rest(c) != 0)
      return;
    c10d_flush(c);
    if (c->flags & C10D_CONN_CLOSING)
      return;
  } while ((c->flags & C10D_CONN_PAUSED) && c->out.len + c->wbuf.len <= C10D_OUT_PAUSE / 2);
  read_update(c);
}

/* ---------------------------------------------------------------------------------------------
 * Parking: a write frame waits while the store takes none
 */

static void on_retry(uv_timer_t *t)
{
  struct c10d *m = t->data;
  /* take the list: a connection parks again (at the tail) when the store is still busy */
  struct mu_list todo = m->parked;
  mu_list_init(&m->parked);
  while (todo.head != NULL) {
    struct c10d_conn *c = MU_CONTAINER_OF(todo.head, struct c10d_conn, park_link);
    mu_list_remove(&todo, &c->park_link);
    c->flags &= ~C10D_CONN_PARKED;
    conn_process(c);
  }
  if (m->parked.head == NULL)
    uv_timer_stop(&m->retry);
}

void c10d_park(struct c10d_conn *c)
{
  struct c10d *m = c->m;
  if (c->flags & C10D_CONN_PARKED)
    return;
  c->flags |= C10D_CONN_PARKED;
  m->parked_total++;
  mu_list_push_back(&m->parked, &c->park_link);
  if (!uv_is_active((uv_handle_t *)&m->retry))
    uv_timer_start(&m->retry, on_retry, C10D_PARK_RETRY_MS, C10D_PARK_RETRY_MS);
}

/* ---------------------------------------------------------------------------------------------
 * Listener and deadlines
 */

static void on_sweep(uv_timer_t *t)
{
  struct c10d *m = t->data;
  const struct rv_server_config *cfg = rv_server_config(m->srv);
  uint64_t now = uv_now(rv_server_loop(m->srv));
  struct mu_list_node *next = NULL;
  for (struct mu_list_node *x = m->conns.head; x != NULL; x = next) {
    next = x->next;
    struct c10d_conn *c = MU_CONTAINER_OF(x, struct c10d_conn, link);
    if (c->flags & C10D_CONN_CLOSING)
      continue;
    /* a parked frame waits for the store, not for its client */
    if (c->frame_since != 0 && !(c->flags & C10D_CONN_PARKED) && cfg->body_timeout_ms > 0 &&
        now - c->frame_since >= cfg->body_timeout_ms)
      c10d_conn_close(c, C10D_R_FRAME_TIMEOUT);
    /* its first frame has the deadline of a request's headers: a torch client sends it at once */
    else if (!(c->flags & C10D_CONN_SPOKE) && cfg->header_timeout_ms > 0 &&
             now - c->accepted_at >= cfg->header_timeout_ms)
      c10d_conn_close(c, C10D_R_FRAME_TIMEOUT);
    else if (c->writing && cfg->write_timeout_ms > 0 &&
             now - c->write_since >= cfg->write_timeout_ms)
      c10d_conn_close(c, C10D_R_WRITE_TIMEOUT);
  }
}

/* Closes the oldest connection, other than `keep`, that has sent no whole frame yet. */
static void evict_silent(struct c10d *m, struct c10d_conn *keep)
{
  for (struct mu_list_node *x = m->conns.head; x != NULL; x = x->next) {
    struct c10d_conn *c = MU_CONTAINER_OF(x, struct c10d_conn, link);
    if (c != keep && !(c->flags & (C10D_CONN_SPOKE | C10D_CONN_CLOSING))) {
      m->evicted++;
      c10d_conn_close(c, C10D_R_CONN_LIMIT);
      return;
    }
  }
}

static void conn_accept(struct c10d *m)
{
  struct c10d_conn *c = mu_calloc(1, sizeof(*c));
  struct rv_server *srv = m->srv;
  c->m = m;
  mu_buf_init(&c->in, m->lim.max_frame + C10D_READ_BUF);
  mu_buf_init(&c->out, MU_BUF_UNBOUNDED);
  mu_buf_init(&c->wbuf, MU_BUF_UNBOUNDED);
  mu_list_init(&c->watches);
  uv_tcp_init(rv_server_loop(srv), &c->tcp);
  c->tcp.data = c;
  mu_list_push_back(&m->conns, &c->link);
  c10d_ref(m);
  /* the client as HTTP counts it: its address, or its prefix (--client-prefix-v4/-v6) */
  struct sockaddr_storage sa;
  if (rv_stream_accept(srv, (uv_stream_t *)&m->listener, &c->tcp, &sa, c->peer, sizeof(c->peer)) !=
      0) {
    c10d_conn_close(c, C10D_R_READ_ERROR);
    return;
  }
  m->accepted++;
  c->accepted_at = uv_now(rv_server_loop(srv));
  /* a stranger (outside --c10d-allow) goes before it is read or holds any share */
  if (!c10d_allow_match(&m->allow, (struct sockaddr *)&sa)) {
    m->refused++;
    c10d_conn_close(c, C10D_R_NOT_ALLOWED);
    return;
  }
  /* full: a connection that has not sent a frame yet goes before a new one is refused */
  if (m->conns.n - m->conns_closing > rv_server_config(srv)->max_connections)
    evict_silent(m, c);
  /* TCPStore has no error answer: a connection over a bound is closed at once */
  if (m->conns.n - m->conns_closing > rv_server_config(srv)->max_connections) {
    m->refused++;
    c10d_conn_close(c, C10D_R_CONN_LIMIT);
    return;
  }
  if (rv_server_addr_take(srv, c->peer, &c->addr) != 0) {
    m->refused++;
    c10d_conn_close(c, C10D_R_ADDRESS_LIMIT);
    return;
  }
  c->waddr = c10d_addr_take(m, c->peer);
  read_update(c);
}

static void on_connection(uv_stream_t *s, int status)
{
  struct c10d *m = s->data;
  if (status < 0) {
    mu_log(MU_LOG_WARN, "c10d: accept failed: %s", uv_strerror(status));
    return;
  }
  if (m->closing)
    return;
  conn_accept(m);
}

void c10d_ref(struct c10d *m)
{
  m->handles++;
  rv_server_ref(m->srv);
}

void c10d_unref(struct c10d *m)
{
  struct rv_server *srv = m->srv;
  if (--m->handles == 0 && m->closing)
    c10d_free(m);
  rv_server_unref(srv);
}

static void on_timer_closed(uv_handle_t *h)
{
  c10d_unref(h->data);
}

int c10d_listen_on(struct c10d *m, const char *host, int port)
{
  struct sockaddr_storage ss;
  int rc = 0;
  if (m->listening)
    return MU_EEXIST;
  memset(&ss, 0, sizeof(ss));
  if (strchr(host, ':') != NULL)
    rc = uv_ip6_addr(host, port, (struct sockaddr_in6 *)&ss);
  else
    rc = uv_ip4_addr(host, port, (struct sockaddr_in *)&ss);
  if (rc != 0 || strlen(host) >= sizeof(m->host))
    return UV_EINVAL;
  snprintf(m->host, sizeof(m->host), "%s", host);
  uv_loop_t *loop = rv_server_loop(m->srv);
  rc = uv_tcp_init(loop, &m->listener);
  if (rc != 0)
    return rc;
  m->listener.data = m;
  m->listening = 1;
  c10d_ref(m); /* the listener's handle, given back in on_timer_closed */
  rc = uv_tcp_bind(&m->listener, (const struct sockaddr *)&ss, 0);
  if (rc == 0)
    rc = uv_listen((uv_stream_t *)&m->listener, 1024, on_connection);
  if (rc != 0)
    return rc;
  struct sockaddr_storage bound;
  int len = sizeof(bound);
  rc = uv_tcp_getsockname(&m->listener, (struct sockaddr *)&bound, &len);
  if (rc != 0)
    return rc;
  m->port = bound.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&bound)->sin6_port)
                                        : ntohs(((struct sockaddr_in *)&bound)->sin_port);
  uv_timer_start(&m->sweep, on_sweep, 1000, 1000);
  return 0;
}

/* The module's shutdown: the listener, the timers, every connection. */
void c10d_shutdown(struct c10d *m)
{
  m->closing = 1;
  if (m->listening)
    uv_close((uv_handle_t *)&m->listener, on_timer_closed);
  c10d_close_all(m);
  if (!m->timers_closed) {
    m->timers_closed = 1;
    uv_close((uv_handle_t *)&m->sweep, on_timer_closed);
    uv_close((uv_handle_t *)&m->retry, on_timer_closed);
    uv_close((uv_handle_t *)&m->gc, on_timer_closed);
    uv_close((uv_handle_t *)&m->turn, on_timer_closed);
  }
}
