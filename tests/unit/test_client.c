/* Tests for common/http_client.c and the client library (client/: client.c, round.c and the
 * musterd backend) against a canned loopback server
 * (a thread that answers each request with the next scripted response), and the client against
 * a real embedded musterd. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "muster/client.h"
#include "muster/errno.h"

#include "client/goodput.h"

#include "agent.h"
#include "alloc.h"
#include "http_client.h"
#include "task.h"

#define MAX_SCRIPT 16

struct canned {
  int lfd;
  int port;
  const char *answers[MAX_SCRIPT]; /* raw responses, in order; NULL = say nothing and wait */
  int close_after[MAX_SCRIPT];     /* close the connection after that answer */
  int n;
  int accepts;
  char last_request[4096];
  pthread_t th;
};

/* Reads one request (headers + Content-Length body). Returns 0, or -1 on EOF. */
static int read_request(int fd, char *out, size_t cap)
{
  size_t len = 0;
  out[0] = '\0';
  for (;;) {
    char *end = strstr(out, "\r\n\r\n");
    if (end != NULL) {
      size_t want = 0;
      const char *cl = strstr(out, "Content-Length: ");
      if (cl != NULL)
        want = (size_t)strtoul(cl + 16, NULL, 10);
      if (len >= (size_t)(end + 4 - out) + want)
        return 0;
    }
    if (len + 1 >= cap)
      return 0;
    ssize_t r = recv(fd, out + len, cap - 1 - len, 0);
    if (r <= 0)
      return -1;
    len += (size_t)r;
    out[len] = '\0';
  }
}

static void *canned_main(void *arg)
{
  struct canned *cs = arg;
  int i = 0;
  while (i < cs->n) {
    int fd = accept(cs->lfd, NULL, NULL);
    if (fd < 0)
      break;
    cs->accepts++;
    while (i < cs->n) {
      char req[sizeof(cs->last_request)];
      if (read_request(fd, req, sizeof(req)) != 0)
        break;
      memcpy(cs->last_request, req, sizeof(req));
      const char *a = cs->answers[i];
      int close_now = cs->close_after[i];
      i++;
      if (a == NULL) {
        struct pollfd p = {fd, POLLIN, 0};
        poll(&p, 1, 3000); /* until the client gives up */
        close_now = 1;
      } else {
        ssize_t w = send(fd, a, strlen(a), MSG_NOSIGNAL);
        (void)w;
      }
      if (close_now)
        break;
    }
    close(fd);
  }
  return NULL;
}

static void canned_start(struct canned *cs)
{
  cs->lfd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(cs->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
  socklen_t sl = sizeof(a);
  getsockname(cs->lfd, (struct sockaddr *)&a, &sl);
  cs->port = ntohs(a.sin_port);
  ASSERT_EQ(listen(cs->lfd, 8), 0);
  pthread_create(&cs->th, NULL, canned_main, cs);
}

static void canned_stop(struct canned *cs)
{
  shutdown(cs->lfd, SHUT_RDWR);
  close(cs->lfd);
  pthread_join(cs->th, NULL);
}

#define OK_JSON(body)                                                                              \
  "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " #body "\r\n\r\n"

TEST(http_client__keepalive_chunked_and_reconnect)
{
  struct canned cs = {0};
  cs.answers[0] = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello";
  cs.answers[1] =
      "HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
  cs.close_after[1] = 1;
  cs.answers[2] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
  cs.n = 3;
  canned_start(&cs);
  struct mu_http_client *c = mu_http_client_new("127.0.0.1", cs.port);
  struct mu_http_response r;
  mu_http_response_init(&r, 1024);
  ASSERT_EQ(mu_http_request(c, "GET", "/a", NULL, NULL, 0, 2000, &r), 0);
  ASSERT_EQ(r.status, 200);
  ASSERT_STR_EQ(r.body.data, "hello");
  ASSERT_STR_EQ(r.content_type, "text/plain");
  ASSERT_EQ(mu_http_request(c, "PUT", "/b", "text/plain", "xyz", 3, 2000, &r), 0);
  ASSERT_EQ(r.status, 404);
  ASSERT_STR_EQ(r.body.data, "abc");
  ASSERT(strstr(cs.last_request, "PUT /b HTTP/1.1") != NULL);
  ASSERT(strstr(cs.last_request, "\r\n\r\nxyz") != NULL);
  /* The server closed after the 2nd answer: the client reconnects by itself. */
  ASSERT_EQ(mu_http_request(c, "GET", "/c", NULL, NULL, 0, 2000, &r), 0);
  ASSERT_STR_EQ(r.body.data, "ok");
  ASSERT_EQ(cs.accepts, 2);
  char addr[64];
  ASSERT_EQ(mu_http_client_local_addr(c, addr, sizeof(addr)), 0);
  ASSERT_STR_EQ(addr, "127.0.0.1");
  mu_http_response_release(&r);
  mu_http_client_free(c);
  canned_stop(&cs);
}

TEST(http_client__cap_timeout_cancel_refused)
{
  struct canned cs = {0};
  cs.answers[0] = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"
                  "0123456789012345678901234567890123456789012345678901234567890123456789"
                  "012345678901234567890123456789";
  cs.close_after[0] = 1;
  cs.answers[1] = NULL; /* silent: the client times out */
  cs.answers[2] = NULL; /* silent: the client is canceled */
  cs.n = 3;
  canned_start(&cs);
  struct mu_http_client *c = mu_http_client_new("127.0.0.1", cs.port);
  struct mu_http_response r;
  mu_http_response_init(&r, 10);
  ASSERT_EQ(mu_http_request(c, "GET", "/big", NULL, NULL, 0, 2000, &r), MU_E2BIG);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  ASSERT_EQ(mu_http_request(c, "GET", "/slow", NULL, NULL, 0, 200, &r), MU_ETIMEDOUT);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
  ASSERT(ms >= 150 && ms < 1500);
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  ASSERT_EQ(write(p[1], "x", 1), 1);
  mu_http_client_set_cancel_fd(c, p[0]);
  ASSERT_EQ(mu_http_request(c, "GET", "/cancel", NULL, NULL, 0, 5000, &r), MU_ECANCELED);
  close(p[0]);
  close(p[1]);
  mu_http_response_release(&r);
  mu_http_client_free(c);
  canned_stop(&cs);
  /* Nobody listens on the port any more. */
  c = mu_http_client_new("127.0.0.1", cs.port);
  mu_http_response_init(&r, 10);
  ASSERT_EQ(mu_http_request(c, "GET", "/", NULL, NULL, 0, 1000, &r), MU_ECONN);
  ASSERT(strstr(mu_http_client_errmsg(c), "refused") != NULL);
  mu_http_response_release(&r);
  mu_http_client_free(c);
}

TEST(client__endpoint_parsing)
{
  struct mu_client *c = NULL;
  ASSERT_EQ(mu_client_new("127.0.0.1:2379", &c), 0);
  mu_client_free(c);
  ASSERT_EQ(mu_client_new("http://localhost:80/", &c), 0);
  mu_client_free(c);
  ASSERT_EQ(mu_client_new("[::1]:1234", &c), 0);
  mu_client_free(c);
  ASSERT_EQ(mu_client_new("localhost", &c), MU_EINVAL);
  ASSERT_EQ(mu_client_new("host:0", &c), MU_EINVAL);
  ASSERT_EQ(mu_client_new("host:99999", &c), MU_EINVAL);
  ASSERT_EQ(mu_client_new(":80", &c), MU_EINVAL);
  ASSERT_EQ(mu_client_new("", &c), MU_EINVAL);
  ASSERT_NULL(c);
}

TEST(client__join_answer_and_errors)
{
  static const char join_body[] =
      "{\"run_id\":\"j\",\"round\":3,\"node_rank\":1,\"nnodes\":2,\"rank_offset\":2,"
      "\"world_size\":4,\"local_world_size\":2,\"master_addr\":\"127.0.0.1\",\"master_port\":"
      "29400,\"lease_ttl_ms\":10000,\"members\":[{\"node_id\":\"a\",\"addr\":\"127.0.0.1\","
      "\"local_world_size\":2,\"node_rank\":0,\"rank_offset\":0},{\"node_id\":\"b\",\"addr\":"
      "\"127.0.0.1\",\"local_world_size\":2,\"node_rank\":1,\"rank_offset\":2}]}";
  char join_answer[1024];
  snprintf(join_answer, sizeof(join_answer),
           "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
           strlen(join_body), join_body);
  static const char err_body[] = "{\"error\":\"join_timeout\",\"message\":\"only 1 of 2 nodes\"}";
  char err_answer[512];
  snprintf(err_answer, sizeof(err_answer),
           "HTTP/1.1 408 Request Timeout\r\nContent-Length: %zu\r\n\r\n%s", strlen(err_body),
           err_body);
  struct canned cs = {0};
  cs.answers[0] = join_answer;
  cs.answers[1] = err_answer;
  cs.answers[2] = "HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found";
  cs.answers[3] = "HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found"; /* /version */
  cs.answers[4] = OK_JSON(41) "{\"round\":3,\"event\":\"waiting\",\"waiting\":1}";
  cs.answers[5] = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nva\nue";
  cs.n = 6;
  canned_start(&cs);
  char ep[64];
  snprintf(ep, sizeof(ep), "127.0.0.1:%d", cs.port);
  struct mu_client *c = NULL;
  ASSERT_EQ(mu_client_new(ep, &c), 0);
  struct mu_join_opts o = {"b", "127.0.0.1", 2, 0, 2, 2, -1, 5000, -1, 0, 0};
  struct mu_round r;
  ASSERT_EQ(mu_client_join(c, "j", &o, &r), 0);
  ASSERT(strstr(cs.last_request, "POST /v1/runs/j/join") != NULL);
  ASSERT(strstr(cs.last_request, "\"min_nodes\":2") != NULL);
  ASSERT_EQ(r.round, 3);
  ASSERT_EQ(r.node_rank, 1);
  ASSERT_EQ(r.rank_offset, 2);
  ASSERT_EQ(r.world_size, 4);
  ASSERT_EQ(r.master_port, 29400);
  ASSERT_EQ(r.nmembers, 2);
  ASSERT_STR_EQ(r.members[1].node_id, "b");
  mu_round_release(&r);
  ASSERT_EQ(mu_client_join(c, "j", &o, &r), MU_ETIMEDOUT);
  ASSERT(strstr(mu_client_errmsg(c), "only 1 of 2 nodes") != NULL);
  /* A server that is not musterd (nor etcd, by its /version): a clear complaint. */
  ASSERT_EQ(mu_client_heartbeat(c, "j", "b", NULL, NULL), MU_EHTTP);
  ASSERT(strstr(cs.last_request, "GET /version") != NULL);
  ASSERT(strstr(mu_client_errmsg(c), "is the endpoint a musterd?") != NULL);
  enum mu_watch_event ev = MU_WATCH_NONE;
  int waiting = 0;
  ASSERT_EQ(mu_client_watch(c, "j", "node 1", 3, 100, &ev, &waiting), 0);
  ASSERT(strstr(cs.last_request, "GET /v1/runs/j/watch?node_id=node%201&round=3") != NULL);
  ASSERT_EQ(ev, MU_WATCH_WAITING);
  ASSERT_EQ(waiting, 1);
  char *val = NULL;
  size_t len = 0;
  ASSERT_EQ(mu_client_kv_get(c, "j", "addr/0", 1000, &val, &len), 0);
  ASSERT(strstr(cs.last_request, "GET /v1/runs/j/kv/addr/0?wait_ms=1000") != NULL);
  ASSERT_EQ(len, 5);
  ASSERT_EQ(val[4], 'e');
  mu_free(val);
  mu_client_free(c);
  canned_stop(&cs);
}

/* A 200 answer with a JSON body, into buf. */
static const char *json_answer(char *buf, size_t n, const char *body)
{
  snprintf(buf, n,
           "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
           strlen(body), body);
  return buf;
}

/* Join answers a musterd never gives, each refused with the field named (issue 24: the agent
 * passed rank_offset=INT_MAX, RANK >= WORLD_SIZE and MASTER_PORT=-7 on to its workers); the
 * same server's sound answer is taken. */
TEST(client__hostile_join_answers_are_refused)
{
#define HEAD "\"run_id\":\"j\",\"round\":3,\"lease_ttl_ms\":10000,\"master_addr\":\"10.0.0.1\","
  static const struct {
    const char *body, *field;
  } cases[] = {
      {"{" HEAD "\"node_rank\":1,\"nnodes\":2,\"rank_offset\":2147483647,\"world_size\":4,"
       "\"master_port\":29400}",
       "rank_offset=2147483647"},
      {"{" HEAD "\"node_rank\":2,\"nnodes\":2,\"rank_offset\":2,\"world_size\":4,"
       "\"master_port\":29400}",
       "node_rank=2"},
      {"{" HEAD "\"node_rank\":1,\"nnodes\":2,\"rank_offset\":2,\"world_size\":4,"
       "\"master_port\":-7}",
       "master_port=-7"},
      {"{" HEAD "\"node_rank\":1,\"nnodes\":2,\"rank_offset\":2,\"world_size\":4294967300,"
       "\"master_port\":1}",
       "world_size=4294967300"},
      {"{" HEAD "\"node_rank\":0.5,\"nnodes\":2,\"rank_offset\":2,\"world_size\":4,"
       "\"master_port\":1}",
       "node_rank=0.5"},
      {"{" HEAD "\"node_rank\":1,\"nnodes\":\"2\",\"rank_offset\":2,\"world_size\":4,"
       "\"master_port\":1}",
       "nnodes=not a number"},
      {"{\"run_id\":\"j\",\"round\":3,\"master_addr\":\"a\\nb\",\"node_rank\":1,\"nnodes\":2,"
       "\"rank_offset\":2,\"world_size\":4,\"master_port\":1}",
       "master_addr"},
      {"{\"run_id\":\"other\",\"round\":3,\"master_addr\":\"h\",\"node_rank\":1,\"nnodes\":2,"
       "\"rank_offset\":2,\"world_size\":4,\"master_port\":1}",
       "run_id='other'"},
      {"{" HEAD "\"node_rank\":1,\"nnodes\":2,\"rank_offset\":2,\"world_size\":4,"
       "\"local_world_size\":3,\"master_port\":1}",
       "local_world_size=3"},
      {"{" HEAD "\"node_rank\":1,\"nnodes\":2,\"rank_offset\":2,\"world_size\":4,\"master_port\":1,"
       "\"members\":[{\"node_id\":\"a\",\"addr\":\"h\",\"local_world_size\":2,\"node_rank\":0,"
       "\"rank_offset\":0},{\"node_id\":\"x\",\"addr\":\"h\",\"local_world_size\":2,"
       "\"node_rank\":1,\"rank_offset\":2}]}",
       "not this node 'b'"},
      {"{" HEAD "\"node_rank\":1,\"nnodes\":2,\"rank_offset\":2,\"world_size\":4,\"master_port\":1,"
       "\"members\":[{\"node_id\":\"a\",\"addr\":\"h\",\"local_world_size\":2,\"node_rank\":0,"
       "\"rank_offset\":0},{\"node_id\":\"b\",\"addr\":\"h\",\"local_world_size\":2,"
       "\"node_rank\":1,\"rank_offset\":3}]}",
       "member 1 ('b')"},
      {"{\"run_id\":\"j\",\"round\":0,\"master_addr\":\"h\",\"node_rank\":1,\"nnodes\":2,"
       "\"rank_offset\":2,\"world_size\":4,\"master_port\":1}",
       "round=0"},
      {"{" HEAD "\"node_rank\":1,\"nnodes\":2,\"rank_offset\":3,\"world_size\":4,"
       "\"master_port\":1}",
       "passes world_size 4"},
      /* the session goes into a header: 64 lowercase hex digits at most, nothing else */
      {"{" HEAD "\"node_rank\":1,\"nnodes\":2,\"rank_offset\":2,\"world_size\":4,"
       "\"master_port\":1,\"session\":"
       "\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0\"}",
       "session is not 1-64 lowercase hex digits"},
      {"{" HEAD "\"node_rank\":1,\"nnodes\":2,\"rank_offset\":2,\"world_size\":4,"
       "\"master_port\":1,\"session\":\"ab\\r\\nX-Evil: 1\"}",
       "session is not 1-64 lowercase hex digits"},
      {"{" HEAD "\"node_rank\":1,\"nnodes\":2,\"rank_offset\":2,\"world_size\":4,"
       "\"master_port\":29400,\"session\":"
       "\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"}",
       NULL},
  };
#undef HEAD
  enum { N = sizeof(cases) / sizeof(cases[0]) };
  static char answers[N][1024];
  struct canned cs = {0};
  for (int i = 0; i < N; i++)
    cs.answers[i] = json_answer(answers[i], sizeof(answers[i]), cases[i].body);
  cs.n = N;
  canned_start(&cs);
  char ep[64];
  snprintf(ep, sizeof(ep), "127.0.0.1:%d", cs.port);
  struct mu_client *c = NULL;
  ASSERT_EQ(mu_client_new(ep, &c), 0);
  struct mu_join_opts o = {"b", "127.0.0.1", 2, 0, 2, 2, -1, 5000, -1, 0, 0};
  for (int i = 0; i < N; i++) {
    struct mu_round r;
    int rc = mu_client_join(c, "j", &o, &r);
    if (cases[i].field == NULL) {
      ASSERT_EQ(rc, 0);
      ASSERT_EQ(r.rank_offset, 2);
      ASSERT_EQ(r.master_port, 29400);
      ASSERT_STR_EQ(r.session, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
      mu_round_release(&r);
      continue;
    }
    if (rc != MU_EPROTO || strstr(mu_client_errmsg(c), cases[i].field) == NULL)
      fprintf(stderr, "case %d: rc %d, '%s'; expected '%s'\n", i, rc, mu_client_errmsg(c),
              cases[i].field);
    ASSERT_EQ(rc, MU_EPROTO);
    ASSERT_NOT_NULL(strstr(mu_client_errmsg(c), cases[i].field));
    ASSERT_NULL(r.members);
    ASSERT_NULL(r.master_addr);
  }
  mu_client_free(c);
  canned_stop(&cs);
}

/* An etcd where a musterd was meant (torchrun's --rdzv_backend=etcd is a musterd here): the
 * client asks /version and names etcd and the backend that speaks to it. */
TEST(client__names_etcd_where_a_musterd_was_meant)
{
  struct canned cs = {0};
  char version[256];
  cs.answers[0] = "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain; charset=utf-8\r\n"
                  "Content-Length: 19\r\n\r\n404 page not found\n";
  cs.answers[1] = json_answer(version, sizeof(version),
                              "{\"etcdserver\":\"3.4.23\",\"etcdcluster\":\"3.4.0\"}");
  cs.n = 2;
  canned_start(&cs);
  char ep[64];
  snprintf(ep, sizeof(ep), "127.0.0.1:%d", cs.port);
  struct mu_client *c = NULL;
  ASSERT_EQ(mu_client_new(ep, &c), 0);
  ASSERT_EQ(mu_client_heartbeat(c, "j", "b", NULL, NULL), MU_EHTTP);
  ASSERT_NOT_NULL(strstr(mu_client_errmsg(c), "is etcd 3.4.23"));
  ASSERT_NOT_NULL(strstr(mu_client_errmsg(c), "--rdzv-backend etcd-v3"));
  mu_client_free(c);
  canned_stop(&cs);
}

/* The client against the real /v1 API of an embedded musterd (the agent's --standalone server,
 * on its own thread): join, heartbeat, watch, KV, counters, barriers, leave, close, shutdown. */

TEST(client__against_embedded_musterd)
{
  struct mu_agent_standalone *srv = NULL;
  char ep[64];
  ASSERT_EQ(mu_agent_standalone_start(&srv, ep, sizeof(ep)), 0);
  struct mu_client *c = NULL;
  ASSERT_EQ(mu_client_new(ep, &c), 0);

  struct mu_join_opts o = {"n1", "127.0.0.1", 2, 29999, 1, 1, 0, 5000, 3000, 0, 0};
  struct mu_round r;
  ASSERT_EQ(mu_client_join(c, "unit", &o, &r), 0);
  ASSERT_EQ(r.round, 1);
  ASSERT_EQ(r.node_rank, 0);
  ASSERT_EQ(r.nnodes, 1);
  ASSERT_EQ(r.world_size, 2);
  ASSERT_EQ(r.master_port, 29999);
  ASSERT_STR_EQ(r.master_addr, "127.0.0.1");
  ASSERT_EQ(r.nmembers, 1);
  /* the node's session (issue 33 item 7): only a client with it speaks for n1 */
  char session[sizeof(r.session)];
  memcpy(session, r.session, sizeof(session));
  ASSERT_EQ(strlen(session), 32);
  ASSERT_EQ(strspn(session, "0123456789abcdef"), 32);
  mu_round_release(&r);
  struct mu_client *other = NULL;
  ASSERT_EQ(mu_client_new(ep, &other), 0);
  ASSERT_EQ(mu_client_heartbeat(other, "unit", "n1", NULL, NULL), MU_ESESSION);
  ASSERT(strstr(mu_client_errmsg(other), "wrong_session: node 'n1' of run 'unit' speaks only for "
                                         "itself: no session was sent") != NULL);
  mu_client_set_session(other, session);
  ASSERT_EQ(mu_client_heartbeat(other, "unit", "n1", NULL, NULL), 0);
  mu_client_set_session(other, NULL);
  ASSERT_EQ(mu_client_heartbeat(other, "unit", "n1", NULL, NULL), MU_ESESSION);
  mu_client_free(other);
  long round = 0;
  ASSERT_EQ(mu_client_heartbeat(c, "unit", "n1", &round, NULL), 0);
  ASSERT_EQ(round, 1);
  ASSERT_EQ(mu_client_heartbeat(c, "unit", "stranger", NULL, NULL), MU_ENOENT);
  enum mu_watch_event ev = MU_WATCH_BROKEN;
  ASSERT_EQ(mu_client_watch(c, "unit", "n1", 1, 100, &ev, NULL), 0);
  ASSERT_EQ(ev, MU_WATCH_NONE);

  char *val = NULL;
  size_t len = 0;
  long n = 0;
  ASSERT_EQ(mu_client_kv_get(c, "unit", "k/1", 0, &val, &len), MU_ENOENT);
  ASSERT_EQ(mu_client_kv_get(c, "unit", "k/1", 100, &val, &len), MU_ETIMEDOUT);
  ASSERT_EQ(mu_client_kv_put(c, "unit", "k/1", "a\0b", 3, &n), 0);
  ASSERT_EQ(mu_client_kv_get(c, "unit", "k/1", 0, &val, &len), 0);
  ASSERT_EQ(len, 3);
  ASSERT_EQ(memcmp(val, "a\0b", 3), 0);
  mu_free(val);
  ASSERT_EQ(mu_client_kv_add(c, "unit", "ctr", 5, &n), 0);
  ASSERT_EQ(mu_client_kv_add(c, "unit", "ctr", -2, &n), 0);
  ASSERT_EQ(n, 3);
  ASSERT_EQ(mu_client_kv_add(c, "unit", "k/1", 1, &n), MU_EINVAL); /* not a counter */
  ASSERT_EQ(mu_client_kv_delete(c, "unit", "k/1"), 0);
  ASSERT_EQ(mu_client_kv_delete(c, "unit", "k/1"), MU_ENOENT);
  long gen = 0;
  ASSERT_EQ(mu_client_barrier(c, "unit", "b", 1, "me", 1000, &gen), 0);
  ASSERT_EQ(gen, 1);
  ASSERT_EQ(mu_client_barrier(c, "unit", "b2", 2, "me", 200, &gen), MU_ETIMEDOUT);

  /* The only member leaves with success: the run is closed; a late join hears so. */
  ASSERT_EQ(mu_client_leave(c, "unit", "n1", 1, NULL), 0);
  struct mu_join_opts late = {"n2", "127.0.0.1", 1, 0, 1, 1, 0, 2000, -1, 0, 0};
  ASSERT_EQ(mu_client_join(c, "unit", &late, &r), MU_ECLOSED);
  /* A config that differs from the run's. */
  ASSERT_EQ(mu_client_join(c, "other", &o, &r), 0);
  mu_round_release(&r);
  struct mu_join_opts bad = {"n3", "127.0.0.1", 1, 0, 2, 2, 0, 2000, -1, 0, 0};
  ASSERT_EQ(mu_client_join(c, "other", &bad, &r), MU_ESTATE);
  ASSERT(strstr(mu_client_errmsg(c), "config_mismatch") != NULL);
  ASSERT_EQ(mu_client_shutdown(c, "other", "unit test"), 0);
  ASSERT_EQ(mu_client_heartbeat(c, "other", "n1", NULL, NULL), MU_ESHUT);
  mu_client_free(c);
  mu_agent_standalone_stop(srv);
}

/* client/goodput.h against an embedded musterd: the budget in the join and its answer, the
 * reports (a failure counts once per round; none left shuts the run), the health record. */
TEST(client__goodput_against_embedded_musterd)
{
  struct mu_agent_standalone *srv = NULL;
  char ep[64];
  ASSERT_EQ(mu_agent_standalone_start(&srv, ep, sizeof(ep)), 0);
  struct mu_client *c = NULL;
  ASSERT_EQ(mu_client_new(ep, &c), 0);
  struct mu_join_opts o = {"n1", "127.0.0.1", 1, 29999, 1, 1, 0, 5000, 3000, 1, 1};
  struct mu_round r;
  ASSERT_EQ(mu_client_join(c, "gp", &o, &r), 0);
  ASSERT_EQ(r.restart_count, 0);
  ASSERT_EQ(r.max_restarts, 1);
  mu_round_release(&r);
  struct mu_report_answer a;
  ASSERT_EQ(mu_client_report(c, "gp", "n1", 1, MU_REPORT_STARTED, NULL, &a), 0);
  ASSERT_STR_EQ(a.state, "open");
  ASSERT_EQ(mu_client_report(c, "gp", "n1", 1, MU_REPORT_PROGRESS, NULL, &a), 0);
  /* the hint: nothing for musterd (it saw any lost member already), nothing counted */
  ASSERT_EQ(mu_client_report(c, "gp", "n1", 1, MU_REPORT_FAILING, NULL, &a), 0);
  ASSERT_EQ(a.counted, 0);
  ASSERT_EQ(a.restart_count, 0);
  ASSERT_STR_EQ(mu_report_event_name(MU_REPORT_FAILING), "failing");
  ASSERT_EQ(mu_client_report(c, "gp", "n1", 1, MU_REPORT_FAILED, "rank 0 exited 1", &a), 0);
  ASSERT_EQ(a.counted, 1);
  ASSERT_EQ(a.restart_count, 1);
  ASSERT_EQ(mu_client_report(c, "gp", "n1", 1, MU_REPORT_HUNG, NULL, &a), 0);
  ASSERT_EQ(a.counted, 0); /* round 1 already ended */
  ASSERT_EQ(mu_client_join(c, "gp", &o, &r), 0);
  ASSERT_EQ(r.round, 2);
  ASSERT_EQ(r.restart_count, 1); /* TORCHELASTIC_RESTART_COUNT */
  mu_round_release(&r);
  /* another budget is a config mismatch */
  struct mu_join_opts other = o;
  other.max_restarts = 5;
  ASSERT_EQ(mu_client_join(c, "gp", &other, &r), MU_ESTATE);
  /* a health check of a node of the run: recorded with its output, counted */
  struct mu_join_opts sick = o;
  sick.node_id = "n9";
  int unhealthy = 0;
  ASSERT_EQ(mu_client_health(c, "gp", &sick, 0, "GPU 1: lost\n", 0, &unhealthy), 0);
  ASSERT_EQ(unhealthy, 1);
  struct mu_run_info in;
  ASSERT_EQ(mu_client_run_info(c, "gp", &in), 0);
  ASSERT_EQ(in.unhealthy, 1);
  ASSERT_STR_EQ(in.unhealthy_node, "n9");
  ASSERT_STR_EQ(in.unhealthy_why, "GPU 1: lost");
  ASSERT_EQ(in.restart_count, 1);
  ASSERT_EQ(in.max_restarts, 1);
  ASSERT_EQ(mu_client_health(c, "gp", &sick, 1, NULL, 0, &unhealthy), 0);
  ASSERT_EQ(unhealthy, 0);
  /* no restart left: the run is shut, with the reason, once the next round could close (here
   * at the node's re-join: no member was lost meanwhile, issue 30 item 4) */
  ASSERT_EQ(mu_client_report(c, "gp", "n1", 2, MU_REPORT_FAILED, "rank 0 exited 1", &a), 0);
  ASSERT_EQ(a.counted, 1);
  ASSERT_STR_EQ(a.state, "open");
  ASSERT_EQ(mu_client_join(c, "gp", &o, &r), MU_ESHUT);
  ASSERT(strstr(mu_client_errmsg(c), "no restart left") != NULL);
  ASSERT_EQ(mu_client_report(c, "gp", "n1", 2, MU_REPORT_FAILED, NULL, &a), MU_ESHUT);
  ASSERT_EQ(mu_client_health(c, "gp", &sick, 0, "x", 0, NULL), MU_ESHUT);
  mu_client_free(c);
  mu_agent_standalone_stop(srv);
}
