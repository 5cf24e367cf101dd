/* fanout_ceiling: the ceiling for the watch fan-out of bench_fanout.sh. A minimal libuv server
 * that speaks just enough of the etcd v2 watch for bench/watch_fanout: every request whose
 * target holds "wait=true" is a long poll (it gets its response head at once, chunked, and
 * waits); any other request (the waking PUT, its form body read by Content-Length) is answered
 * 201 with a small event, and then the same event, formatted once, is written to every waiting
 * connection (uv_try_write, uv_write for what the socket does not take). No store, no parsing
 * beyond the header end and Content-Length: what musterd reaches against it, measured by the
 * same client, is its share of what one loop can do on this machine.
 *
 *   fanout_ceiling [--listen 127.0.0.1:0]  prints "listening on 127.0.0.1:PORT", serves until
 *                                          killed
 */
#define _GNU_SOURCE 1 /* memmem */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <uv.h>

#include "alloc.h"
#include "log.h"
#include "opts.h"

#define IN_CAP 1024 /* bytes of one request (head and body): the client's are ~200 */

struct conn {
  uv_tcp_t tcp;
  uv_write_t wreq;
  char in[IN_CAP];
  size_t in_len;
  int waiting;  /* a parked long poll */
  int answered; /* the request is answered: ignore further input */
  char *rest;   /* what uv_try_write did not take (owned until the write completes) */
};

struct ceiling {
  uv_loop_t *loop;
  uv_tcp_t listener;
  struct conn **waiting;
  size_t nwaiting, cap;
  unsigned long long index;
};

static struct ceiling C;

static const char WATCH_HEAD[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                 "X-Etcd-Index: 1\r\nTransfer-Encoding: chunked\r\n\r\n";

static void on_closed(uv_handle_t *h)
{
  struct conn *c = h->data;
  mu_free(c->rest);
  mu_free(c);
}

static void conn_close(struct conn *c)
{
  if (!uv_is_closing((uv_handle_t *)&c->tcp))
    uv_close((uv_handle_t *)&c->tcp, on_closed);
}

static void on_written(uv_write_t *w, int status)
{
  struct conn *c = w->data;
  mu_free(c->rest);
  c->rest = NULL;
  if (status < 0)
    conn_close(c);
}

/* Writes `p`: the kernel takes it at once, or the rest is copied and handed to uv_write. */
static void conn_send(struct conn *c, const char *p, size_t n)
{
  uv_buf_t b = uv_buf_init((char *)p, (unsigned)n);
  int w = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
  if (w == (int)n)
    return;
  if (w < 0 && w != UV_EAGAIN) {
    conn_close(c);
    return;
  }
  size_t done = w > 0 ? (size_t)w : 0;
  if (c->rest != NULL) { /* a write in flight already: not in this program's flows */
    conn_close(c);
    return;
  }
  c->rest = mu_malloc(n - done);
  memcpy(c->rest, p + done, n - done);
  b = uv_buf_init(c->rest, (unsigned)(n - done));
  c->wreq.data = c;
  if (uv_write(&c->wreq, (uv_stream_t *)&c->tcp, &b, 1, on_written) != 0)
    conn_close(c);
}

/* The waking write: its answer, then the same event to every parked long poll. */
static void wake_all(struct conn *writer)
{
  char json[256], reply[512], event[512];
  unsigned long long index = ++C.index;
  int jn = snprintf(json, sizeof(json),
                    "{\"action\":\"set\",\"node\":{\"key\":\"/bench/watch\",\"value\":\"v\","
                    "\"modifiedIndex\":%llu,\"createdIndex\":%llu}}\n",
                    index, index);
  int rn = snprintf(reply, sizeof(reply),
                    "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nX-Etcd-Index: "
                    "%llu\r\nContent-Length: %d\r\n\r\n%s",
                    index, jn, json);
  int en = snprintf(event, sizeof(event), "%x\r\n%s\r\n0\r\n\r\n", (unsigned)jn, json);
  conn_send(writer, reply, (size_t)rn);
  for (size_t i = 0; i < C.nwaiting; i++) {
    C.waiting[i]->waiting = 0;
    conn_send(C.waiting[i], event, (size_t)en);
  }
  C.nwaiting = 0;
}

static void on_request(struct conn *c, const char *head_end)
{
  const char *line_end = memchr(c->in, '\r', (size_t)(head_end - c->in));
  c->answered = 1;
  if (line_end != NULL && memmem(c->in, (size_t)(line_end - c->in), "wait=true", 9) != NULL) {
    c->waiting = 1;
    if (C.nwaiting == C.cap) {
      C.cap = C.cap ? C.cap * 2 : 1024;
      C.waiting = mu_realloc(C.waiting, C.cap * sizeof(*C.waiting));
    }
    C.waiting[C.nwaiting++] = c;
    conn_send(c, WATCH_HEAD, sizeof(WATCH_HEAD) - 1);
    return;
  }
  wake_all(c);
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
  struct conn *c = h->data;
  (void)suggested;
  *buf = uv_buf_init(c->in + c->in_len, (unsigned)(IN_CAP - c->in_len));
}

/* Drops `c` from the parked long polls (its client went away). */
static void unpark(struct conn *c)
{
  for (size_t i = 0; i < C.nwaiting; i++) {
    if (C.waiting[i] == c) {
      C.waiting[i] = C.waiting[--C.nwaiting];
      return;
    }
  }
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
  struct conn *c = s->data;
  (void)buf;
  if (n < 0) {
    if (c->waiting)
      unpark(c);
    conn_close(c);
    return;
  }
  if (c->answered || n == 0)
    return;
  c->in_len += (size_t)n;
  const char *end = memmem(c->in, c->in_len, "\r\n\r\n", 4);
  if (end == NULL) {
    if (c->in_len == IN_CAP)
      conn_close(c);
    return;
  }
  end += 4;
  size_t body = 0;
  const char *cl = memmem(c->in, (size_t)(end - c->in), "\r\nContent-Length:", 17);
  if (cl != NULL)
    body = strtoul(cl + 17, NULL, 10);
  if ((size_t)(end - c->in) + body > c->in_len)
    return; /* the body is not all in yet */
  on_request(c, end - 4);
}

static void on_connection(uv_stream_t *l, int status)
{
  if (status < 0)
    return;
  struct conn *c = mu_calloc(1, sizeof(*c));
  uv_tcp_init(C.loop, &c->tcp);
  c->tcp.data = c;
  if (uv_accept(l, (uv_stream_t *)&c->tcp) != 0) {
    conn_close(c);
    return;
  }
  uv_tcp_nodelay(&c->tcp, 1);
  uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, on_read);
}

int main(int argc, char **argv)
{
  const char *listen_addr = "127.0.0.1:0";
  struct mu_opt opts[] = {
      MU_OPT_STRING(0, "listen", &listen_addr, "ADDR", "IPv4 address:port to listen on"),
      MU_OPT_END(),
  };
  mu_log_setup("fanout_ceiling", MU_LOG_INFO);
  int n = mu_opts_parse(opts, argc, argv, 0, "fanout_ceiling [--listen 127.0.0.1:0]");
  if (n == MU_OPTS_HELP)
    return 0;
  if (n < 0)
    return 2;
  if (n < argc) {
    mu_error("unexpected argument '%s' (fanout_ceiling takes only --listen)", argv[n]);
    return 2;
  }
  char host[64];
  const char *colon = strrchr(listen_addr, ':');
  struct sockaddr_in addr;
  if (colon == NULL || (size_t)(colon - listen_addr) >= sizeof(host)) {
    mu_error("bad --listen '%s': expected an IPv4 address and port, e.g. 127.0.0.1:0", listen_addr);
    return 2;
  }
  memcpy(host, listen_addr, (size_t)(colon - listen_addr));
  host[colon - listen_addr] = '\0';
  long port;
  if (mu_parse_long(colon + 1, 0, 65535, &port) < 0 || uv_ip4_addr(host, (int)port, &addr) != 0) {
    mu_error("bad --listen '%s': expected an IPv4 address and port, e.g. 127.0.0.1:0", listen_addr);
    return 2;
  }
  C.loop = uv_default_loop();
  uv_tcp_init(C.loop, &C.listener);
  if (uv_tcp_bind(&C.listener, (const struct sockaddr *)&addr, 0) != 0 ||
      uv_listen((uv_stream_t *)&C.listener, 4096, on_connection) != 0) {
    mu_error("cannot listen on '%s'", listen_addr);
    return 1;
  }
  struct sockaddr_in bound;
  int len = sizeof(bound);
  uv_tcp_getsockname(&C.listener, (struct sockaddr *)&bound, &len);
  printf("listening on %s:%d\n", host, ntohs(bound.sin_port));
  fflush(stdout);
  return uv_run(C.loop, UV_RUN_DEFAULT);
}
