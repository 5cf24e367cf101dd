/* Unit tests of the HTTP core (conn.c, router.c) through rv_server_feed(): no sockets. */
#include <string.h>

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
  ASSERT_NOT_NULL(strstr(out, "Allow: GET, HEAD, PUT, POST, DELETE\r\n"));
  mu_free(out);
  out = feed(srv, "GET /v2/keys/%zz HTTP/1.1\r\n\r\n");
  ASSERT_NOT_NULL(strstr(out, "HTTP/1.1 400 "));
  mu_free(out);
  mu_buf_release(&in);
  srv_done(srv, &loop);
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
