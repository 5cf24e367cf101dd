/* Unit tests of the HTTP core (conn.c, router.c) through rv_server_feed(): no sockets. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <uv.h>

#include "alloc.h"
#include "http.h"
#include "task.h"

static struct rv_server *srv_new(uv_loop_t *loop)
{
  struct rv_server_config cfg;
  rv_server_config_init(&cfg);
  cfg.max_header_bytes = 1024;
  cfg.max_url_bytes = 512;
  cfg.max_body_bytes = 256;
  uv_loop_init(loop);
  return rv_server_new(loop, &cfg);
}

static void srv_done(struct rv_server *srv, uv_loop_t *loop)
{
  rv_server_close(srv, NULL, NULL);
  uv_run(loop, UV_RUN_DEFAULT);
  ASSERT_EQ(uv_loop_close(loop), 0);
}

static char *feed(struct rv_server *srv, const char *in)
{
  struct mu_buf out = MU_BUF_INIT(1 << 20);
  rv_server_feed(srv, in, strlen(in), &out);
  return mu_buf_detach(&out);
}

static int count(const char *hay, const char *needle)
{
  int n = 0;
  for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
    n++;
  return n;
}

TEST(http__pipelined_in_order)
{
  uv_loop_t loop;
  struct rv_server *srv = srv_new(&loop);
  char *out = feed(srv, "PUT /v2/keys/a HTTP/1.1\r\nHost: x\r\nContent-Type: "
                        "application/x-www-form-urlencoded\r\nContent-Length: 7\r\n\r\nvalue=1"
                        "GET /v2/keys/a HTTP/1.1\r\nHost: x\r\n\r\n"
                        "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_EQ(count(out, "HTTP/1.1 "), 3);
  char *created = strstr(out, "201 Created");
  char *get = strstr(out, "\"action\":\"get\"");
  char *health = strstr(out, "{\"health\":\"true\"}");
  ASSERT(created && get && health && created < get && get < health);
  ASSERT_NOT_NULL(strstr(out, "X-Etcd-Cluster-Id: "));
  mu_free(out);
  srv_done(srv, &loop);
}

TEST(http__chunked_body_and_query_params)
{
  uv_loop_t loop;
  struct rv_server *srv = srv_new(&loop);
  char *out = feed(srv, "PUT /v2/keys/b?ttl=abc HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked"
                        "\r\nContent-Type: application/x-www-form-urlencoded\r\n\r\n"
                        "5\r\nvalue\r\n7\r\n=a+b%21\r\n0\r\n\r\n");
  /* the query's bad ttl is read (etcd merges query and form) */
  ASSERT_NOT_NULL(strstr(out, "\"errorCode\":202"));
  mu_free(out);
  out = feed(srv, "PUT /v2/keys/b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked"
                  "\r\nContent-Type: application/x-www-form-urlencoded\r\n\r\n"
                  "5\r\nvalue\r\n7\r\n=a+b%21\r\n0\r\n\r\n");
  ASSERT_NOT_NULL(strstr(out, "\"value\":\"a b!\""));
  mu_free(out);
  srv_done(srv, &loop);
}

TEST(http__limits_and_errors)
{
  uv_loop_t loop;
  struct rv_server *srv = srv_new(&loop);
  char big[2048];
  memset(big, 'a', sizeof(big) - 1);
  big[sizeof(big) - 1] = '\0';
  struct mu_buf in = MU_BUF_INIT(1 << 16);
  mu_buf_printf(&in, "GET /v2/keys/%s HTTP/1.1\r\n\r\n", big);
  char *out = feed(srv, in.data);
  ASSERT_NOT_NULL(strstr(out, "HTTP/1.1 414 "));
  mu_free(out);
  mu_buf_clear(&in);
  mu_buf_printf(&in, "GET / HTTP/1.1\r\nX-Big: %s\r\n\r\n", big);
  out = feed(srv, in.data);
  ASSERT_NOT_NULL(strstr(out, "HTTP/1.1 431 "));
  mu_free(out);
  out = feed(srv, "PUT /v2/keys/a HTTP/1.1\r\nContent-Length: 100000\r\n\r\n");
  ASSERT_NOT_NULL(strstr(out, "HTTP/1.1 413 "));
  mu_free(out);
  out = feed(srv, "garbage\r\n\r\n");
  ASSERT_NOT_NULL(strstr(out, "HTTP/1.1 400 "));
  mu_free(out);
  out = feed(srv, "GET /v2//keys/a HTTP/1.1\r\n\r\n");
  ASSERT_NOT_NULL(strstr(out, "HTTP/1.1 301 "));
  ASSERT_NOT_NULL(strstr(out, "Location: /v2/keys/a\r\n"));
  mu_free(out);
  out = feed(srv, "GET /nowhere HTTP/1.1\r\n\r\n");
  ASSERT_NOT_NULL(strstr(out, "HTTP/1.1 404 "));
  mu_free(out);
  out = feed(srv, "PATCH /v2/keys/a HTTP/1.1\r\n\r\n");
  ASSERT_NOT_NULL(strstr(out, "HTTP/1.1 405 "));
  ASSERT_NOT_NULL(strstr(out, "Allow: HEAD,GET,PUT,POST,DELETE\r\n"));
  mu_free(out);
  out = feed(srv, "GET /v2/keys/%zz HTTP/1.1\r\n\r\n");
  ASSERT_NOT_NULL(strstr(out, "HTTP/1.1 400 "));
  mu_free(out);
  mu_buf_release(&in);
  srv_done(srv, &loop);
}

/* --max-body-bytes (256 here) at max and max+1, by Content-Length and chunked: a body of exactly
 * the bound is stored, one byte more is 413 (issue 35: bounds are tested at the edge). */
static char *put_body(struct rv_server *srv, size_t len, int chunked)
{
  struct mu_buf in = MU_BUF_INIT(1 << 16);
  mu_buf_printf(&in, "PUT /v2/keys/edge HTTP/1.1\r\nHost: x\r\nContent-Type: "
                     "application/x-www-form-urlencoded\r\n");
  if (chunked)
    mu_buf_printf(&in, "Transfer-Encoding: chunked\r\n\r\n%zx\r\n", len);
  else
    mu_buf_printf(&in, "Content-Length: %zu\r\n\r\n", len);
  mu_buf_puts(&in, "value=");
  for (size_t i = 6; i < len; i++)
    mu_buf_putc(&in, 'v');
  if (chunked)
    mu_buf_puts(&in, "\r\n0\r\n\r\n");
  char *out = feed(srv, in.data);
  mu_buf_release(&in);
  return out;
}

TEST(http__body_bound_at_max_and_max_plus_one)
{
  for (int chunked = 0; chunked <= 1; chunked++) {
    uv_loop_t loop;
    struct rv_server *srv = srv_new(&loop);
    char *out = put_body(srv, 256, chunked);
    ASSERT_NOT_NULL(strstr(out, "HTTP/1.1 201 "));
    mu_free(out);
    out = put_body(srv, 257, chunked);
    ASSERT_NOT_NULL(strstr(out, "HTTP/1.1 413 "));
    ASSERT_NULL(strstr(out, "HTTP/1.1 20"));
    mu_free(out);
    srv_done(srv, &loop);
  }
}

TEST(http__watch_headers_at_once_then_gone)
{
  uv_loop_t loop;
  struct rv_server *srv = srv_new(&loop);
  /* the watch blocks: headers are sent, then end of input drops the watcher */
  char *out = feed(srv, "GET /v2/keys/w?wait=true HTTP/1.1\r\n\r\n"
                        "GET /healthz HTTP/1.1\r\n\r\n");
  ASSERT_NOT_NULL(strstr(out, "HTTP/1.1 200 OK"));
  ASSERT_NOT_NULL(strstr(out, "Transfer-Encoding: chunked"));
  ASSERT_NULL(strstr(out, "health")); /* the pipelined request waits behind the watch */
  mu_free(out);
  out = feed(srv, "GET /v2/stats/store HTTP/1.1\r\n\r\n");
  ASSERT_NOT_NULL(strstr(out, "\"watchers\":0"));
  mu_free(out);
  srv_done(srv, &loop);
}

/* A small deterministic mutation fuzz over the whole request path (the libFuzzer target in
 * fuzz/ goes further): nothing may crash, leak (ASan) or answer without a status line. */
TEST(http__mutated_requests_survive)
{
  static const char *seeds[] = {
      "PUT /v2/keys/a/b?ttl=5 HTTP/1.1\r\nHost: x\r\nContent-Type: application/"
      "x-www-form-urlencoded\r\nContent-Length: 21\r\n\r\nvalue=1&prevExist=false",
      "GET /v2/keys/a?wait=true&waitIndex=1&recursive=true HTTP/1.1\r\n\r\n",
      "DELETE /v2/keys/a?recursive=true&prevValue=x HTTP/1.1\r\n\r\n",
      "POST /v2/keys/q HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Type: application/"
      "x-www-form-urlencoded\r\n\r\n7\r\nvalue=1\r\n0\r\n\r\n",
      "GET /v2//keys/../a%2F%zz HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /metrics "
      "HTTP/1.1\r\n\r\n",
  };
  uv_loop_t loop;
  struct rv_server *srv = srv_new(&loop);
  uint32_t rnd = 12345;
  char buf[1024];
  for (int iter = 0; iter < 3000; iter++) {
    const char *seed = seeds[iter % 5];
    size_t n = strlen(seed);
    memcpy(buf, seed, n);
    int edits = 1 + (int)((rnd = rnd * 1103515245u + 12345u) >> 16) % 8;
    for (int e = 0; e < edits && n > 0; e++) {
      rnd = rnd * 1103515245u + 12345u;
      size_t pos = (rnd >> 8) % n;
      switch ((rnd >> 4) % 4) {
      case 0:
        buf[pos] = (char)(rnd >> 16);
        break;
      case 1:
        if (n < sizeof(buf) - 1) {
          memmove(buf + pos + 1, buf + pos, n - pos);
          buf[pos] = "\r\n%&=?/ 0:"[(rnd >> 20) % 10];
          n++;
        }
        break;
      case 2:
        memmove(buf + pos, buf + pos + 1, n - pos - 1);
        n--;
        break;
      default:
        n = pos + 1;
        break;
      }
    }
    struct mu_buf out = MU_BUF_INIT(1 << 20);
    rv_server_feed(srv, buf, n, &out);
    if (out.len > 0)
      ASSERT(strncmp(out.data, "HTTP/1.1 ", 9) == 0);
    mu_buf_release(&out);
  }
  srv_done(srv, &loop);
}

/* ---- over real sockets: listen on port 0, a watch answered by another client's write, then
 * rv_server_close() and a clean uv_loop_close() ---- */

struct sock_client {
  uv_tcp_t tcp;
  uv_connect_t conn;
  uv_write_t wr;
  const char *send;
  struct mu_buf got;
  struct sock_test *t;
};

struct sock_test {
  uv_loop_t loop;
  struct rv_server *srv;
  struct sock_client watch, put;
  uv_timer_t timer;
  int closed;
  int done;
};

static void on_client_alloc(uv_handle_t *h, size_t s, uv_buf_t *b)
{
  (void)h;
  b->base = mu_malloc(s);
  b->len = s;
}

static void on_server_closed(void *data)
{
  struct sock_test *t = data;
  t->closed = 1;
}

static void finish(struct sock_test *t)
{
  if (t->done)
    return;
  t->done = 1;
  uv_close((uv_handle_t *)&t->watch.tcp, NULL);
  uv_close((uv_handle_t *)&t->put.tcp, NULL);
  uv_close((uv_handle_t *)&t->timer, NULL);
  rv_server_close(t->srv, on_server_closed, t);
}

static void on_client_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
  struct sock_client *c = s->data;
  if (n > 0)
    mu_buf_append(&c->got, b->base, (size_t)n);
  mu_free(b->base);
  /* the watcher hears of the write before the writer's own reply is flushed: wait for both */
  if (strstr(mu_buf_str(&c->t->watch.got), "\"action\":\"set\"") != NULL &&
      strstr(mu_buf_str(&c->t->put.got), "HTTP/1.1 201 Created") != NULL)
    finish(c->t);
}

static void on_client_connect(uv_connect_t *req, int status)
{
  struct sock_client *c = req->data;
  ASSERT_EQ(status, 0);
  uv_buf_t b = uv_buf_init((char *)c->send, (unsigned)strlen(c->send));
  uv_write(&c->wr, (uv_stream_t *)&c->tcp, &b, 1, NULL);
  uv_read_start((uv_stream_t *)&c->tcp, on_client_alloc, on_client_read);
}

static void client_start(struct sock_test *t, struct sock_client *c, const char *send)
{
  struct sockaddr_in a;
  c->t = t;
  c->send = send;
  mu_buf_init(&c->got, 1 << 16);
  uv_tcp_init(&t->loop, &c->tcp);
  c->tcp.data = c;
  c->conn.data = c;
  uv_ip4_addr("127.0.0.1", rv_server_port(t->srv), &a);
  uv_tcp_connect(&c->conn, &c->tcp, (const struct sockaddr *)&a, on_client_connect);
}

static void on_timer(uv_timer_t *h)
{
  struct sock_test *t = h->data;
  client_start(t, &t->put,
               "PUT /v2/keys/sock HTTP/1.1\r\nContent-Type: application/x-www-form-urlencoded\r\n"
               "Content-Length: 7\r\n\r\nvalue=1");
}

TEST(http__socket_watch_then_close)
{
  struct sock_test t;
  memset(&t, 0, sizeof(t));
  uv_loop_init(&t.loop);
  struct rv_server_config cfg;
  rv_server_config_init(&cfg);
  cfg.listen_port = 0;
  t.srv = rv_server_new(&t.loop, &cfg);
  ASSERT_EQ(rv_server_listen(t.srv), 0);
  ASSERT(rv_server_port(t.srv) > 0);
  client_start(&t, &t.watch, "GET /v2/keys/sock?wait=true HTTP/1.1\r\nHost: x\r\n\r\n");
  uv_timer_init(&t.loop, &t.timer);
  t.timer.data = &t;
  uv_timer_start(&t.timer, on_timer, 100, 0);
  uv_run(&t.loop, UV_RUN_DEFAULT);
  ASSERT(t.done);
  ASSERT(t.closed);
  ASSERT_NOT_NULL(strstr(mu_buf_str(&t.watch.got), "HTTP/1.1 200 OK"));
  ASSERT_NOT_NULL(strstr(mu_buf_str(&t.put.got), "HTTP/1.1 201 Created"));
  mu_buf_release(&t.watch.got);
  mu_buf_release(&t.put.got);
  ASSERT_EQ(uv_loop_close(&t.loop), 0);
}

/* -- a woken watcher whose socket is full gets the rest of its answer later ------------------ */

#define BIG_VALUE ((size_t)3 << 20)

struct slow_test {
  uv_loop_t loop;
  struct rv_server *srv;
  uv_tcp_t watch, put;
  uv_connect_t wconn, pconn;
  uv_write_t wwr, pwr;
  struct mu_buf wgot, pgot;
  char *put_req;
  size_t put_len;
  uv_timer_t timer; /* starts the slow reader, then is the test's deadline */
  int reading, closed, done, timed_out;
};

static int slow_watch_complete(struct slow_test *t)
{
  const char *s = mu_buf_str(&t->wgot);
  return t->wgot.len > 5 && memcmp(s + t->wgot.len - 5, "0\r\n\r\n", 5) == 0;
}

static void on_slow_closed(void *data)
{
  ((struct slow_test *)data)->closed = 1;
}

static void slow_finish(struct slow_test *t)
{
  if (t->done)
    return;
  t->done = 1;
  uv_close((uv_handle_t *)&t->watch, NULL);
  uv_close((uv_handle_t *)&t->put, NULL);
  uv_close((uv_handle_t *)&t->timer, NULL);
  rv_server_close(t->srv, on_slow_closed, t);
}

static void on_slow_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
  struct slow_test *t = s->data;
  if (n > 0)
    mu_buf_append(s == (uv_stream_t *)&t->watch ? &t->wgot : &t->pgot, b->base, (size_t)n);
  mu_free(b->base);
  if (n < 0 || slow_watch_complete(t))
    slow_finish(t);
}

static void on_slow_timer(uv_timer_t *h)
{
  struct slow_test *t = h->data;
  if (t->reading) {
    t->timed_out = 1;
    slow_finish(t);
    return;
  }
  /* the writer was answered long ago; only now does the watcher read its answer */
  t->reading = 1;
  uv_read_start((uv_stream_t *)&t->watch, on_client_alloc, on_slow_read);
  uv_timer_start(&t->timer, on_slow_timer, 10000, 0);
}

static void on_put_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
  struct slow_test *t = s->data;
  if (n > 0)
    mu_buf_append(&t->pgot, b->base, (size_t)n);
  mu_free(b->base);
  if (strstr(mu_buf_str(&t->pgot), "HTTP/1.1 201") != NULL &&
      !uv_is_active((uv_handle_t *)&t->timer))
    uv_timer_start(&t->timer, on_slow_timer, 200, 0);
}

static void on_put_connect(uv_connect_t *req, int status)
{
  struct slow_test *t = req->data;
  ASSERT_EQ(status, 0);
  uv_buf_t b = uv_buf_init(t->put_req, (unsigned)t->put_len);
  uv_write(&t->pwr, (uv_stream_t *)&t->put, &b, 1, NULL);
  uv_read_start((uv_stream_t *)&t->put, on_client_alloc, on_put_read);
}

static void on_watch_connect(uv_connect_t *req, int status)
{
  struct slow_test *t = req->data;
  ASSERT_EQ(status, 0);
  static char get[] = "GET /v2/keys/big?wait=true HTTP/1.1\r\nHost: x\r\n\r\n";
  uv_buf_t b = uv_buf_init(get, sizeof(get) - 1);
  uv_write(&t->wwr, (uv_stream_t *)&t->watch, &b, 1, NULL);
  /* the watch is parked once the server answers its headers; then the big write comes */
  struct sockaddr_in a;
  uv_ip4_addr("127.0.0.1", rv_server_port(t->srv), &a);
  uv_tcp_init(&t->loop, &t->put);
  t->put.data = t;
  t->pconn.data = t;
  uv_tcp_connect(&t->pconn, &t->put, (const struct sockaddr *)&a, on_put_connect);
}

TEST(http__woken_watcher_partial_write_keeps_the_rest)
{
  struct slow_test t;
  memset(&t, 0, sizeof(t));
  ASSERT_EQ(uv_loop_init(&t.loop), 0);
  struct rv_server_config cfg;
  rv_server_config_init(&cfg);
  cfg.listen_port = 0;
  cfg.max_body_bytes = BIG_VALUE + 64;
  t.srv = rv_server_new(&t.loop, &cfg);
  ASSERT_EQ(rv_server_listen(t.srv), 0);
  /* value: a pattern whose every 16-byte block is distinct, so a lost or repeated piece shows */
  char *value = mu_malloc(BIG_VALUE + 1);
  for (size_t i = 0; i < BIG_VALUE; i += 16)
    snprintf(value + i, 17, "%015zx.", i);
  value[BIG_VALUE] = '\0';
  struct mu_buf req = MU_BUF_INIT(BIG_VALUE + 4096);
  mu_buf_printf(&req,
                "PUT /v2/keys/big HTTP/1.1\r\nHost: x\r\nContent-Type: "
                "application/x-www-form-urlencoded\r\nContent-Length: %zu\r\n\r\nvalue=",
                BIG_VALUE + 6);
  mu_buf_append(&req, value, BIG_VALUE);
  t.put_req = req.data;
  t.put_len = req.len;
  mu_buf_init(&t.wgot, BIG_VALUE * 2);
  mu_buf_init(&t.pgot, BIG_VALUE * 2);
  uv_timer_init(&t.loop, &t.timer);
  t.timer.data = &t;
  /* a small receive buffer on the watcher: the server's write of the event cannot go out whole */
  ASSERT_EQ(uv_tcp_init_ex(&t.loop, &t.watch, AF_INET), 0);
  int rcv = 4096;
  ASSERT_EQ(uv_recv_buffer_size((uv_handle_t *)&t.watch, &rcv), 0);
  t.watch.data = &t;
  t.wconn.data = &t;
  struct sockaddr_in a;
  uv_ip4_addr("127.0.0.1", rv_server_port(t.srv), &a);
  uv_tcp_connect(&t.wconn, &t.watch, (const struct sockaddr *)&a, on_watch_connect);
  uv_run(&t.loop, UV_RUN_DEFAULT);
  ASSERT(t.done);
  ASSERT_EQ(t.timed_out, 0);
  ASSERT(t.closed);
  ASSERT_NOT_NULL(strstr(mu_buf_str(&t.pgot), "HTTP/1.1 201 Created"));
  /* headers, then one chunk: size line, the event JSON, CRLF, the last chunk */
  const char *w = mu_buf_str(&t.wgot);
  const char *body = strstr(w, "\r\n\r\n");
  ASSERT_NOT_NULL(body);
  body += 4;
  char *end = NULL;
  unsigned long long size = strtoull(body, &end, 16);
  ASSERT_NOT_NULL(end);
  ASSERT_EQ(memcmp(end, "\r\n", 2), 0);
  const char *json = end + 2;
  ASSERT_EQ((size_t)(t.wgot.len - (size_t)(json - w)), (size_t)size + 7);
  ASSERT_EQ(memcmp(json + size, "\r\n0\r\n\r\n", 7), 0);
  ASSERT_EQ(strncmp(json, "{\"action\":\"set\"", 15), 0);
  const char *v = strstr(json, "\"value\":\"");
  ASSERT_NOT_NULL(v);
  ASSERT_EQ(memcmp(v + 9, value, BIG_VALUE), 0);
  ASSERT_EQ(v[9 + BIG_VALUE], '"');
  mu_free(value);
  mu_buf_release(&req);
  mu_buf_release(&t.wgot);
  mu_buf_release(&t.pgot);
  ASSERT_EQ(uv_loop_close(&t.loop), 0);
}

/* ---------------------------------------------------------------------------------------------
 * The route table: patterns, resources of several rows, refusals worded by an API
 */

/* Answers "<row name> <vars...>" so that a test sees which row matched and what it captured. */
static void echo_handler(struct rv_req *req)
{
  struct mu_buf b = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  mu_buf_puts(&b, req->route->name);
  for (size_t i = 0; i < req->nvars; i++)
    mu_buf_printf(&b, " [%s]", req->vars[i]);
  rv_reply_take(req, 200, "text/plain", NULL, &b);
  mu_buf_release(&b);
}

static int refuse_as_test(struct rv_req *req, const struct rv_refusal *r)
{
  if (r->kind != RV_REFUSE_METHOD)
    return 0;
  char body[64];
  snprintf(body, sizeof(body), "test 405 allow=%u\n", r->allow);
  rv_reply_text(req, 405, "text/plain", body);
  return 1;
}

static const struct rv_api test_api = {"test", refuse_as_test, NULL, NULL};

static const struct rv_route test_routes[] = {
    {RV_GET, "/t/items", RV_ROUTE_SLASH, echo_handler, "list", NULL},
    {RV_GET, "/t/items/{id}", RV_ROUTE_SLASH, echo_handler, "item", NULL},
    {RV_POST, "/t/items/{id}/poke", 0, echo_handler, "poke", NULL},
    {RV_GET, "/t/items/{id}/files/{path}", RV_ROUTE_REST, echo_handler, "file-get", &test_api},
    {RV_PUT, "/t/items/{id}/files/{path}", RV_ROUTE_REST, echo_handler, "file-put", &test_api},
    {RV_GET | RV_POST, "/t/items/{id}/{other}", RV_ROUTE_REST, echo_handler, "other", NULL},
    {RV_GET, "/t/", RV_ROUTE_PREFIX, echo_handler, "prefix", NULL},
    {0, NULL, 0, NULL, NULL, NULL},
};

static void route_is(struct rv_server *srv, const char *method, const char *path, const char *want)
{
  char in[512];
  snprintf(in, sizeof(in), "%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", method, path);
  char *out = feed(srv, in);
  if (strstr(out, want) == NULL)
    MU__FAIL("%s %s: want '%s', got:\n%s", method, path, want, out);
  mu_free(out);
}

TEST(http__routes_patterns_and_resources)
{
  uv_loop_t loop;
  struct rv_server_config cfg;
  rv_server_config_init(&cfg);
  uv_loop_init(&loop);
  struct rv_server *srv = rv_server_create(&loop, &cfg);
  rv_server_add_routes(srv, test_routes);
  /* exact rows, with and without the optional trailing slash */
  route_is(srv, "GET", "/t/items", "\r\n\r\nlist");
  route_is(srv, "GET", "/t/items/", "\r\n\r\nlist");
  route_is(srv, "GET", "/t/items/7", "\r\n\r\nitem [7]");
  route_is(srv, "GET", "/t/items/7/", "\r\n\r\nitem [7]");
  /* the most specific pattern wins; a {var} takes one non-empty segment, a REST var the rest */
  route_is(srv, "POST", "/t/items/7/poke", "\r\n\r\npoke [7]");
  route_is(srv, "GET", "/t/items/7/files/a/b/c", "\r\n\r\nfile-get [7] [a/b/c]");
  route_is(srv, "PUT", "/t/items/7/files/a", "\r\n\r\nfile-put [7] [a]");
  route_is(srv, "GET", "/t/items/7/files/", "\r\n\r\nother [7] [files/]");
  route_is(srv, "GET", "/t/items/7/poke/x", "\r\n\r\nother [7] [poke/x]");
  /* a prefix row catches the rest; nothing matches outside it */
  route_is(srv, "GET", "/t/else", "\r\n\r\nprefix");
  route_is(srv, "GET", "/u", "HTTP/1.1 404 ");
  /* a method no row of the resource takes: 405 naming all of theirs */
  route_is(srv, "DELETE", "/t/items/7/poke", "Allow: POST\r\n");
  route_is(srv, "DELETE", "/t/items/7", "Allow: HEAD,GET\r\n");
  /* ... worded by the resource's API when it has one (GET|PUT = 1|4) */
  route_is(srv, "DELETE", "/t/items/7/files/x", "test 405 allow=5");
  /* HEAD is answered by the GET row */
  route_is(srv, "HEAD", "/t/items/7", "HTTP/1.1 200 ");
  srv_done(srv, &loop);
}

/* A parked long poll's body no longer counts against the bound on unauthenticated bodies (64 x
 * --max-body-bytes): more joins than that bound's worth of bodies wait together, and the round
 * they fill closes (bench/rdzv_sim.c found the cap at ~350,000 pending joins). */
TEST(http__parked_bodies_are_not_held_against_the_total)
{
  uv_loop_t loop;
  struct rv_server *srv = srv_new(&loop); /* 256-byte bodies: 16 KiB in total */
  enum { N = 160 };                       /* 160 x ~150 bytes: over 16 KiB */
  struct mu_buf out = MU_BUF_INIT(1 << 20), in = MU_BUF_INIT(4096);
  struct rv_conn *conns[N];
  size_t parked_bytes = 0;
  for (int i = 0; i < N; i++) {
    char body[256];
    int n = snprintf(body, sizeof(body),
                     "{\"node_id\":\"node-%03d\",\"addr\":\"10.0.0.1\",\"local_world_size\":1,"
                     "\"min_nodes\":%d,\"max_nodes\":%d,\"members\":false}",
                     i, N, N);
    mu_buf_clear(&in);
    mu_buf_printf(&in,
                  "POST /v1/runs/big/join HTTP/1.1\r\nHost: x\r\nContent-Type: "
                  "application/json\r\nContent-Length: %d\r\n\r\n%s",
                  n, body);
    conns[i] = rv_server_fake_open(srv, &out);
    ASSERT_EQ(rv_server_fake_send(conns[i], in.data, in.len), 0);
    if (i < N - 1)
      ASSERT_EQ(out.len, 0); /* parked, not refused with 503 */
    parked_bytes += (size_t)n;
  }
  ASSERT(parked_bytes > 64 * 256);
  ASSERT_EQ(count(out.data, "HTTP/1.1 200"), N);
  ASSERT_EQ(count(out.data, "\"nnodes\":160"), N);
  for (int i = 0; i < N; i++)
    rv_server_fake_close(conns[i]);
  mu_buf_release(&in);
  mu_buf_release(&out);
  srv_done(srv, &loop);
}
