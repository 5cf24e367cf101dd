/* client/etcd3*.c: the pure pieces of the etcd v3 backend (base64, key ranges, etcd's JSON
 * answers, how an error answer is taken, the endpoint list and its rotation). The protocol
 * itself runs against real etcd clusters in tests/integration/rdzv_backends.sh,
 * etcd3_secure.sh and etcd3_bigrun.sh. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "muster/errno.h"

#include "alloc.h"
#include "buf.h"
#include "client_int.h"
#include "etcd3_int.h"
#include "rules.h"
#include "task.h"

TEST(etcd3__base64_round_trips)
{
  static const char *const in[] = {"", "a", "ab", "abc", "abcd", "/muster/run/n/0000000000/x"};
  static const char *const want[] = {
      "", "YQ==", "YWI=", "YWJj", "YWJjZA==", "L211c3Rlci9ydW4vbi8wMDAwMDAwMDAwL3g="};
  for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
    char *b = mu__etcd3_b64(in[i], strlen(in[i]));
    ASSERT_STR_EQ(b, want[i]);
    size_t n = 99;
    char *back = mu__etcd3_unb64(b, &n);
    ASSERT_EQ(n, strlen(in[i]));
    ASSERT_STR_EQ(back, in[i]);
    mu_free(b);
    mu_free(back);
  }
  /* bytes that are not text, a NUL among them */
  const unsigned char bin[] = {0, 255, 10, 0, 128};
  char *b = mu__etcd3_b64(bin, sizeof(bin));
  size_t n = 0;
  char *back = mu__etcd3_unb64(b, &n);
  ASSERT_EQ(n, sizeof(bin));
  ASSERT_EQ(memcmp(back, bin, n), 0);
  mu_free(b);
  mu_free(back);
}

TEST(etcd3__base64_bad_input_is_empty)
{
  size_t n = 99;
  char *v = mu__etcd3_unb64("!!!", &n);
  ASSERT_EQ(n, 0);
  ASSERT_STR_EQ(v, "");
  mu_free(v);
  v = mu__etcd3_unb64(NULL, &n);
  ASSERT_EQ(n, 0);
  mu_free(v);
}

TEST(etcd3__prefix_end_bounds_the_prefix)
{
  char *e = mu__etcd3_prefix_end("/muster/job/n/0000000001/");
  ASSERT_STR_EQ(e, "/muster/job/n/00000000010");
  /* every key of the level sorts inside [prefix, end), the next level does not */
  ASSERT(strcmp("/muster/job/n/0000000001/zzz", e) < 0);
  ASSERT(strcmp("/muster/job/n/0000000002/a", e) > 0);
  mu_free(e);
  e = mu__etcd3_prefix_end("/muster/");
  ASSERT_STR_EQ(e, "/muster0");
  mu_free(e);
}

TEST(etcd3__int64_fields_as_etcd_writes_them)
{
  cJSON *o = cJSON_Parse("{\"revision\":\"9007199254740993\",\"count\":12,\"raft_term\":\"x\"}");
  ASSERT_EQ(mu__etcd3_int(o, "revision"), 9007199254740993LL); /* past a double's 2^53 */
  ASSERT_EQ(mu__etcd3_int(o, "count"), 12);
  ASSERT_EQ(mu__etcd3_int(o, "version"), 0); /* etcd leaves zero out */
  ASSERT_EQ(mu__etcd3_int(o, "raft_term"), 0);
  cJSON_Delete(o);
}

TEST(etcd3__txn_answer_parsing)
{
  /* a txn answer as the gateway sends it: a range with one kv whose value is base64 JSON, an
   * empty range (no "kvs"), a count */
  char *val = mu__etcd3_b64("{\"round\":3,\"max\":4}", strlen("{\"round\":3,\"max\":4}"));
  char ans_text[1024];
  snprintf(ans_text, sizeof(ans_text),
           "{\"header\":{\"cluster_id\":\"1\",\"revision\":\"77\"},\"succeeded\":true,"
           "\"responses\":[{\"response_range\":{\"header\":{},\"kvs\":[{\"key\":\"eA==\","
           "\"create_revision\":\"5\",\"mod_revision\":\"70\",\"version\":\"2\",\"value\":\"%s\"}],"
           "\"count\":\"1\"}},{\"response_range\":{\"header\":{}}},"
           "{\"response_range\":{\"header\":{},\"count\":\"300\"}}]}",
           val);
  cJSON *ans = cJSON_Parse(ans_text);
  ASSERT_NOT_NULL(ans);
  ASSERT_EQ(mu__etcd3_header_rev(ans), 77);
  cJSON *v = mu__etcd3_range_value(ans, 0);
  ASSERT_NOT_NULL(v);
  ASSERT_EQ(cJSON_GetObjectItem(v, "round")->valueint, 3);
  cJSON_Delete(v);
  ASSERT_NULL(mu__etcd3_range_value(ans, 1)); /* no key */
  ASSERT_NULL(mu__etcd3_range_value(ans, 7)); /* no such response */
  cJSON_Delete(ans);
  mu_free(val);
}

TEST(etcd3__buckets_spread_and_agree)
{
  int hits[64] = {0};
  char id[32];
  for (int i = 0; i < 6400; i++) {
    snprintf(id, sizeof(id), "host-%d-ab12", i);
    unsigned b = mu__etcd3_bucket_of(id);
    ASSERT(b < 64);
    ASSERT_EQ(b, mu__etcd3_bucket_of(id)); /* every node computes the same */
    hits[b]++;
  }
  for (int b = 0; b < 64; b++)
    ASSERT(hits[b] > 50 && hits[b] < 150); /* 100 each on average */
}

TEST(etcd3__endpoints_parse_and_rotate)
{
  struct mu_etcd3 *e = NULL;
  char err[256];
  ASSERT_EQ(mu_etcd3_new("etcd-v3://h1:2379,http://127.0.0.1:2380,https://[::1]:2381", &e, err,
                         sizeof(err)),
            0);
  int port = 0;
  ASSERT_STR_EQ(mu__etcd3_member(e, 0, &port), "h1");
  ASSERT_EQ(port, 2379);
  ASSERT_STR_EQ(mu__etcd3_member(e, 1, &port), "127.0.0.1");
  ASSERT_EQ(port, 2380);
  ASSERT_STR_EQ(mu__etcd3_member(e, 2, &port), "::1");
  ASSERT_EQ(port, 2381);
  ASSERT_NULL(mu__etcd3_member(e, 3, &port));
  /* the next member, then the one after, then back: every member is used in turn */
  size_t first = mu__etcd3_current(e), seen = 0;
  for (int i = 0; i < 3; i++) {
    seen |= (size_t)1 << mu__etcd3_current(e);
    mu__etcd3_next(e);
  }
  ASSERT_EQ(seen, 7);
  ASSERT_EQ(mu__etcd3_current(e), first);
  mu_etcd3_free(e);
  /* the members alone, without the scheme */
  ASSERT_EQ(mu_etcd3_new("127.0.0.1:1", &e, err, sizeof(err)), 0);
  mu_etcd3_free(e);
}

TEST(etcd3__bad_endpoints_are_named)
{
  struct mu_etcd3 *e = NULL;
  char err[256];
  ASSERT_EQ(mu_etcd3_new("etcd-v3://h1:2379,nope", &e, err, sizeof(err)), MU_EINVAL);
  ASSERT_NULL(e);
  ASSERT_NOT_NULL(strstr(err, "'nope'"));
  ASSERT_NOT_NULL(strstr(err, "HOST:PORT"));
  ASSERT_EQ(mu_etcd3_new("etcd-v3://", &e, err, sizeof(err)), MU_EINVAL);
  ASSERT_NOT_NULL(strstr(err, "no etcd endpoint"));
  struct mu_buf many = MU_BUF_INIT(SIZE_MAX);
  mu_buf_puts(&many, "etcd-v3://");
  for (int i = 0; i < 17; i++)
    mu_buf_printf(&many, "%sh%d:1", i ? "," : "", i);
  ASSERT_EQ(mu_etcd3_new(many.data, &e, err, sizeof(err)), MU_EINVAL);
  ASSERT_NOT_NULL(strstr(err, "more than 16"));
  mu_buf_release(&many);
}

TEST(etcd3__error_answers_retry_refuse_or_relogin)
{
  struct mu_etcd3 *e = NULL;
  char err[256];
  ASSERT_EQ(mu_etcd3_new("127.0.0.1:1,127.0.0.1:2", &e, err, sizeof(err)), 0);
  int retry = -1, relogin = -1;
  /* no leader: the next member may have one */
  ASSERT_EQ(mu__etcd3_answer(e, 503,
                             "{\"error\":\"etcdserver: no leader\",\"code\":14,"
                             "\"message\":\"etcdserver: no leader\"}",
                             &retry, &relogin),
            MU_EHTTP);
  ASSERT_EQ(retry, 1);
  ASSERT_EQ(relogin, 0);
  /* the gateway wraps some errors: {"error": {...}} */
  ASSERT_EQ(mu__etcd3_answer(e, 500,
                             "{\"error\":{\"message\":\"context deadline exceeded\","
                             "\"code\":4}}",
                             &retry, &relogin),
            MU_EHTTP);
  ASSERT_EQ(retry, 1);
  /* a compare that etcd refuses: no other member thinks otherwise */
  ASSERT_EQ(mu__etcd3_answer(e, 400,
                             "{\"error\":\"etcdserver: duplicate key given in txn "
                             "request\",\"code\":3,\"message\":\"etcdserver: duplicate key "
                             "given in txn request\"}",
                             &retry, &relogin),
            MU_EHTTP);
  ASSERT_EQ(retry, 0);
  ASSERT_NOT_NULL(strstr(mu_etcd3_errmsg(e), "duplicate key"));
  /* auth: refusals with what to change */
  ASSERT_EQ(mu__etcd3_answer(e, 400, "{\"message\":\"etcdserver: user name is empty\",\"code\":3}",
                             &retry, &relogin),
            MU_EAUTH);
  ASSERT_EQ(retry, 0);
  ASSERT_NOT_NULL(strstr(mu_etcd3_errmsg(e), "MUSTER_RDZV_USER"));
  ASSERT_EQ(mu__etcd3_answer(e, 403, "{\"message\":\"etcdserver: permission denied\",\"code\":7}",
                             &retry, &relogin),
            MU_EAUTH);
  ASSERT_NOT_NULL(strstr(mu_etcd3_errmsg(e), "readwrite /muster/"));
  ASSERT_EQ(mu__etcd3_answer(e, 400,
                             "CommonName of client sending a request against gateway will be "
                             "ignored and not used as expected\n",
                             &retry, &relogin),
            MU_EAUTH);
  ASSERT_NOT_NULL(strstr(mu_etcd3_errmsg(e), "without CN"));
  /* an expired token: log in again */
  ASSERT_EQ(mu__etcd3_answer(e, 401, "{\"message\":\"etcdserver: invalid auth token\",\"code\":16}",
                             &retry, &relogin),
            MU_EHTTP);
  ASSERT_EQ(relogin, 1);
  ASSERT_EQ(retry, 1);
  /* not etcd at all */
  ASSERT_EQ(mu__etcd3_answer(e, 404, "", &retry, &relogin), MU_EHTTP);
  ASSERT_NOT_NULL(strstr(mu_etcd3_errmsg(e), "not an etcd v3 answer"));
  mu_etcd3_free(e);
}

/* The form messages show and a user can paste back: no http:// inside etcd-v3://, TLS on every
 * member when one asked for it, IPv6 in brackets */
TEST(etcd3__endpoints_display_as_typed_back)
{
  static const char *const in[] = {"http://h:2379", "etcd-v3://http://h:2379/", "h1:1,http://h2:2",
                                   "etcd-v3://https://h:2379", "h1:1,https://[::1]:2"};
  static const char *const want[] = {"etcd-v3://h:2379", "etcd-v3://h:2379", "etcd-v3://h1:1,h2:2",
                                     "etcd-v3://https://h:2379",
                                     "etcd-v3://https://h1:1,https://[::1]:2"};
  char err[256];
  for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
    char *shown = NULL;
    ASSERT_EQ(mu_etcd3_display(in[i], &shown, err, sizeof(err)), 0);
    ASSERT_STR_EQ(shown, want[i]);
    /* and it reads back as the same members */
    char *again = NULL;
    ASSERT_EQ(mu_etcd3_display(shown, &again, err, sizeof(err)), 0);
    ASSERT_STR_EQ(again, shown);
    mu_free(again);
    mu_free(shown);
  }
  char *shown = (char *)"x";
  ASSERT_EQ(mu_etcd3_display("etcd-v3://h1", &shown, err, sizeof(err)), MU_EINVAL);
  ASSERT_NULL(shown);
  ASSERT_NOT_NULL(strstr(err, "'h1'"));
}

/* etcd down (every member refuses the connection): every call says so with the member's words,
 * not only the first (nothing left from a failed call, no cancel from a cancel fd that was never
 * written); two members, so the rotation and its naps between turns are crossed too */
TEST(etcd3__a_refused_member_is_econn_every_time)
{
  struct mu_etcd3 *e = NULL;
  char err[256];
  ASSERT_EQ(mu_etcd3_new("etcd-v3://127.0.0.1:1,http://127.0.0.1:1", &e, err, sizeof(err)), 0);
  mu_etcd3_set_timeout(e, 150);
  int pfd[2];
  ASSERT_EQ(pipe(pfd), 0);
  mu_etcd3_set_cancel_fd(e, pfd[0]);
  for (int i = 0; i < 2; i++) {
    cJSON *j = NULL;
    ASSERT_EQ(mu_etcd3_run_json(e, "r", &j), MU_ECONN);
    ASSERT_NULL(j);
    ASSERT_NOT_NULL(strstr(mu_etcd3_errmsg(e), "Connection refused"));
    struct mu_run_info in;
    ASSERT_EQ(mu_etcd3_run_info(e, "r", &in), MU_ECONN);
    ASSERT_NOT_NULL(strstr(mu_etcd3_errmsg(e), "Connection refused"));
    ASSERT_EQ(mu_etcd3_heartbeat(e, "r", "n", NULL, NULL), MU_ECONN);
    ASSERT_NOT_NULL(strstr(mu_etcd3_errmsg(e), "Connection refused"));
    /* a watch that reached no member is not a quiet cluster (muster rdzv --watch waited on) */
    ASSERT_EQ(mu_etcd3_wait_change(e, NULL, 0, 150), MU_ECONN);
    ASSERT_NOT_NULL(strstr(mu_etcd3_errmsg(e), "Connection refused"));
  }
  mu_etcd3_free(e);
  close(pfd[0]);
  close(pfd[1]);
}

/* A round value in etcd is anybody's who may write /muster/: every number is checked for its
 * range before it becomes an int, and the round as a whole as every backend's (client.c). */
TEST(etcd3__hostile_rounds_are_refused)
{
  static const struct {
    const char *round, *field;
  } cases[] = {
      {"{\"round\":2,\"ttl\":5000,\"members\":[{\"id\":\"a\",\"addr\":\"h\",\"lws\":2147483647,"
       "\"port\":1},{\"id\":\"b\",\"addr\":\"h\",\"lws\":2147483647}]}",
       "add up past"},
      {"{\"round\":2,\"members\":[{\"id\":\"a\",\"addr\":\"h\",\"lws\":1,\"port\":-7},"
       "{\"id\":\"b\",\"addr\":\"h\",\"lws\":1}]}",
       "port=-7"},
      {"{\"round\":2,\"members\":[{\"id\":\"a\",\"addr\":\"h\",\"lws\":0,\"port\":1},"
       "{\"id\":\"b\",\"addr\":\"h\",\"lws\":1}]}",
       "lws=0"},
      {"{\"round\":-1,\"members\":[{\"id\":\"a\",\"addr\":\"h\",\"lws\":1,\"port\":1},"
       "{\"id\":\"b\",\"addr\":\"h\",\"lws\":1}]}",
       "round=-1"},
      {"{\"round\":1e300,\"members\":[{\"id\":\"a\",\"addr\":\"h\",\"lws\":1,\"port\":1},"
       "{\"id\":\"b\",\"addr\":\"h\",\"lws\":1}]}",
       "round=1e+300"},
  };
  struct mu_etcd3 *e = NULL;
  char err[256];
  ASSERT_EQ(mu_etcd3_new("127.0.0.1:1", &e, err, sizeof(err)), 0);
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    cJSON *r = cJSON_Parse(cases[i].round);
    struct mu_round out;
    ASSERT_NOT_NULL(r);
    ASSERT_EQ(mu__etcd3_fill_round(e, "run", r, 1, &out), MU_EPROTO);
    if (strstr(mu_etcd3_errmsg(e), cases[i].field) == NULL)
      fprintf(stderr, "case %zu: '%s', expected '%s'\n", i, mu_etcd3_errmsg(e), cases[i].field);
    ASSERT_NOT_NULL(strstr(mu_etcd3_errmsg(e), cases[i].field));
    ASSERT_NULL(out.members);
    cJSON_Delete(r);
  }
  /* in range, but not a sound round for the node that joined: the common check says so */
  cJSON *r = cJSON_Parse("{\"round\":2,\"ttl\":5000,\"members\":[{\"id\":\"a\",\"addr\":\"h\","
                         "\"lws\":2,\"port\":0},{\"id\":\"b\",\"addr\":\"h\",\"lws\":2}]}");
  struct mu_round out;
  ASSERT_EQ(mu__etcd3_fill_round(e, "run", r, 1, &out), 0);
  struct mu_join_opts o = {"b", "h", 2, 0, 2, 2, 0, 1000, -1, 0, 0};
  ASSERT_EQ(mu__round_check(&out, "run", &o, err, sizeof(err)), MU_EPROTO);
  ASSERT_NOT_NULL(strstr(err, "master_port=0"));
  mu_round_release(&out);
  cJSON_Delete(r);
  mu_etcd3_free(e);
}

/* A scripted etcd gateway that logs in every user and then refuses every token: it counts the
 * requests it gets. */
struct refuser {
  int lfd, port;
  int requests, logins;
  pthread_t th;
};

static void *refuser_main(void *arg)
{
  struct refuser *s = arg;
  static const char login[] = "{\"header\":{},\"token\":\"tok\"}";
  static const char refusal[] = "{\"error\":\"etcdserver: invalid auth token\",\"message\":"
                                "\"etcdserver: invalid auth token\",\"code\":16}";
  for (;;) {
    int fd = accept(s->lfd, NULL, NULL);
    if (fd < 0)
      return NULL;
    char req[8192];
    size_t len = 0;
    for (;;) { /* one request per connection is enough: the client reconnects to log in */
      ssize_t r = recv(fd, req + len, sizeof(req) - 1 - len, 0);
      if (r <= 0)
        break;
      len += (size_t)r;
      req[len] = '\0';
      char *end = strstr(req, "\r\n\r\n");
      const char *cl = strstr(req, "Content-Length: ");
      if (end == NULL || len < (size_t)(end + 4 - req) + (cl ? strtoul(cl + 16, NULL, 10) : 0))
        continue;
      int is_login = strstr(req, "POST /v3/auth/authenticate") != NULL;
      const char *body = is_login ? login : refusal;
      char out[512];
      int n = snprintf(out, sizeof(out),
                       "HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: "
                       "%zu\r\n\r\n%s",
                       is_login ? "200 OK" : "401 Unauthorized", strlen(body), body);
      s->requests++;
      s->logins += is_login;
      ssize_t w = send(fd, out, (size_t)n, MSG_NOSIGNAL);
      (void)w;
      len = 0;
    }
    close(fd);
  }
}

/* etcd refusing fresh tokens again and again (issue 24: 1-2k requests/s per client): the
 * client logs in again once at once, then waits longer each time, and gives up at its
 * timeout, saying so. */
TEST(etcd3__refused_tokens_back_off)
{
  struct refuser s = {0};
  s.lfd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(s.lfd, (struct sockaddr *)&a, sizeof(a)), 0);
  socklen_t sl = sizeof(a);
  getsockname(s.lfd, (struct sockaddr *)&a, &sl);
  ASSERT_EQ(listen(s.lfd, 16), 0);
  pthread_create(&s.th, NULL, refuser_main, &s);
  setenv("MUSTER_RDZV_USER", "trainer", 1);
  setenv("MUSTER_RDZV_PASSWORD", "s3cret", 1);
  char ep[64], err[256];
  snprintf(ep, sizeof(ep), "127.0.0.1:%d", ntohs(a.sin_port));
  struct mu_etcd3 *e = NULL;
  ASSERT_EQ(mu_etcd3_new(ep, &e, err, sizeof(err)), 0);
  mu_etcd3_set_timeout(e, 2000);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int rc = mu_etcd3_kv_put(e, "r", "k", "v", 1, NULL);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
  shutdown(s.lfd, SHUT_RDWR);
  close(s.lfd);
  pthread_join(s.th, NULL);
  fprintf(stderr, "# %d requests (%d logins) in %ld ms: %s\n", s.requests, s.logins, ms,
          mu_etcd3_errmsg(e));
  ASSERT(rc != 0);
  ASSERT_NOT_NULL(strstr(mu_etcd3_errmsg(e), "invalid auth token"));
  ASSERT(ms >= 1000); /* it kept trying for its timeout, not gave up at once */
  /* 100 + 200 + 400 + 800 ms of waits in 2 s: a few logins and refusals, not thousands */
  ASSERT(s.requests <= 20);
  ASSERT(s.logins >= 3);
  mu_etcd3_free(e);
}

/* The five finish reads of round 3 (mu__etcd3_add_finish_reads) as the gateway answers them:
 * counts of the members' keys, d/3/, l/3/, the keys at level 3 (ids), the count of g/3. */
static cJSON *finish_answer(int present, int done, int left_failed, const char *rejoined, int ended)
{
  char key[96] = "", kvs[256] = "", text[1024];
  if (rejoined != NULL) {
    snprintf(key, sizeof(key), "/muster/r/n/0000000003/%s", rejoined);
    char *b = mu__etcd3_b64(key, strlen(key));
    snprintf(kvs, sizeof(kvs), "\"kvs\":[{\"key\":\"%s\"}],", b);
    mu_free(b);
  }
  snprintf(text, sizeof(text),
           "{\"responses\":[{\"response_range\":{\"count\":\"%d\"}},"
           "{\"response_range\":{\"count\":\"%d\"}},{\"response_range\":{\"count\":\"%d\"}},"
           "{\"response_range\":{%s\"count\":\"%d\"}},{\"response_range\":{\"count\":\"%d\"}}]}",
           present, done, left_failed, kvs, rejoined != NULL, ended);
  return cJSON_Parse(text);
}

/* Does round 3 of members a, b, c end succeeded by the rules (issue 30 item 3)? */
static int finished(int present, int done, int left_failed, const char *rejoined, int ended,
                    struct mu_rules_view *v)
{
  cJSON *round = cJSON_Parse("{\"round\":3,\"members\":[{\"id\":\"a\"},{\"id\":\"b\"},"
                             "{\"id\":\"c\"}]}");
  cJSON *ans = finish_answer(present, done, left_failed, rejoined, ended);
  int r = mu_rule_succeeded(v, mu__etcd3_finish_view(round, ans, 0, v));
  cJSON_Delete(ans);
  cJSON_Delete(round);
  return r;
}

TEST(etcd3__a_round_finished_by_success_and_loss)
{
  struct mu_rules_view v;
  /* two succeeded, the third still holds its key: it runs on toward its own success */
  ASSERT_EQ(finished(1, 2, 0, NULL, 0, &v), 0);
  ASSERT_EQ(v.round_ok, 2);
  ASSERT_EQ(v.round_lost, 0);
  /* two succeeded, the third's key is gone without a success: lost after a success, closed */
  ASSERT_EQ(finished(0, 2, 0, NULL, 0, &v), 1);
  ASSERT_EQ(v.round_lost, 1);
  ASSERT_EQ(finished(0, 3, 0, NULL, 0, &v), 1); /* all three succeeded */
  ASSERT_EQ(v.round_lost, 0);
  /* nobody succeeded: every key gone is a lost round, not a finished one */
  ASSERT_EQ(finished(0, 0, 0, NULL, 0, &v), 0);
  ASSERT_EQ(v.round_lost, 3);
  /* a report ended the round (g/3), one left failed (l/3/), or a member re-joined: spoiled */
  ASSERT_EQ(finished(0, 2, 0, NULL, 1, &v), 0);
  ASSERT_EQ(finished(0, 2, 1, NULL, 0, &v), 0);
  ASSERT_EQ(finished(0, 2, 0, "c", 0, &v), 0);
  /* a standby at level 3 is no member: it spoils nothing */
  ASSERT_EQ(finished(0, 2, 0, "s", 0, &v), 1);
  /* joins a full round left out may sit at the members' level a moment: more keys than
   * members only hide a loss, never make one up */
  ASSERT_EQ(finished(3, 2, 0, NULL, 0, &v), 0);
  ASSERT_EQ(v.round_lost, 0);
  ASSERT_EQ(v.round_nodes, 3);
}
