/* The TCPStore frame parser (rendezvous/c10d/frame.c) and the store names of c10d keys
 * (rendezvous/c10d/ops.c): the bytes docs/c10d.md describes, parsed whole and in pieces, and
 * every bound refused as soon as its length is read. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include "muster/errno.h"

#include "alloc.h"
#include "allow.h"
#include "buf.h"
#include "c10d_int.h"
#include "c10d_probe.h"
#include "musterd/embed.h"
#include "frame.h"
#include "task.h"

/* Frame bytes: q(&b, "\x01", 1) appends raw bytes; s(&b, "/k") a u64 length and the string. */
static void raw(struct mu_buf *b, const void *p, size_t n)
{
  mu_buf_append(b, p, n);
}

static void u64(struct mu_buf *b, uint64_t v)
{
  unsigned char p[8];
  for (int i = 0; i < 8; i++)
    p[i] = (unsigned char)(v >> (8 * i));
  raw(b, p, 8);
}

static void str(struct mu_buf *b, const char *s)
{
  u64(b, strlen(s));
  raw(b, s, strlen(s));
}

static struct c10d_limits lim(void)
{
  struct c10d_limits l;
  c10d_limits_init(&l, 1024);
  return l;
}

/* Parses the one frame in b; asserts it is complete and uses all of b. */
static void parse_one(const struct mu_buf *b, enum c10d_proto proto, struct c10d_frame *f)
{
  struct c10d_limits l = lim();
  memset(f, 0, sizeof(*f));
  ASSERT_EQ(c10d_frame_parse(f, proto, &l, (const uint8_t *)b->data, b->len), 1);
  ASSERT_EQ(f->len, b->len);
}

static const char *span(const struct mu_buf *b, const struct c10d_frame *f, size_t i, char *out)
{
  memcpy(out, b->data + f->spans[i].off, f->spans[i].len);
  out[f->spans[i].len] = '\0';
  return out;
}

TEST(c10d__detect_numbering)
{
  const uint8_t validate[] = {0, 0xce, 0xf7, 0x85, 0x3c};
  const uint8_t legacy_set[] = {0, 2, 0, 0, 0, 0, 0, 0, 0};
  const uint8_t legacy_get[] = {2};
  ASSERT_EQ(c10d_proto_detect(validate, 5), C10D_PROTO_V2);
  ASSERT_EQ(c10d_proto_detect(validate, 4), C10D_PROTO_UNKNOWN); /* a 0 first: 5 bytes decide */
  ASSERT_EQ(c10d_proto_detect(legacy_set, 9), C10D_PROTO_LEGACY);
  ASSERT_EQ(c10d_proto_detect(legacy_get, 1), C10D_PROTO_LEGACY);
  ASSERT_EQ(c10d_proto_detect(legacy_get, 0), C10D_PROTO_UNKNOWN);
}

TEST(c10d__legacy_queries)
{
  struct mu_buf b = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  struct c10d_frame f;
  char t[64];
  raw(&b, "\x00", 1); /* SET */
  str(&b, "/k");
  str(&b, "val");
  parse_one(&b, C10D_PROTO_LEGACY, &f);
  ASSERT_EQ(f.op, C10D_OP_SET);
  ASSERT_EQ(f.nspans, 2);
  ASSERT_STR_EQ(span(&b, &f, 0, t), "/k");
  ASSERT_STR_EQ(span(&b, &f, 1, t), "val");
  c10d_frame_release(&f);

  mu_buf_clear(&b);
  raw(&b, "\x03", 1); /* ADD */
  str(&b, "/n");
  u64(&b, (uint64_t)-5);
  parse_one(&b, C10D_PROTO_LEGACY, &f);
  ASSERT_EQ(f.op, C10D_OP_ADD);
  ASSERT_EQ(f.amount, -5);
  c10d_frame_release(&f);

  mu_buf_clear(&b);
  raw(&b, "\x05", 1); /* WAIT of two keys */
  u64(&b, 2);
  str(&b, "/a");
  str(&b, "/bb");
  parse_one(&b, C10D_PROTO_LEGACY, &f);
  ASSERT_EQ(f.op, C10D_OP_WAIT);
  ASSERT_EQ(f.count, 2);
  ASSERT_EQ(f.nspans, 2);
  ASSERT_STR_EQ(span(&b, &f, 1, t), "/bb");
  c10d_frame_release(&f);

  mu_buf_clear(&b);
  raw(&b, "\x07", 1); /* WATCH_KEY: 1.13's id 7 */
  str(&b, "/w");
  parse_one(&b, C10D_PROTO_LEGACY, &f);
  ASSERT_EQ(f.op, C10D_OP_WATCH_KEY);
  c10d_frame_release(&f);

  mu_buf_clear(&b);
  raw(&b, "\x06", 1); /* GETNUMKEYS: no field */
  parse_one(&b, C10D_PROTO_LEGACY, &f);
  ASSERT_EQ(f.op, C10D_OP_GETNUMKEYS);
  ASSERT_EQ(f.len, 1);
  c10d_frame_release(&f);
  mu_buf_release(&b);
}

TEST(c10d__v2_queries)
{
  struct mu_buf b = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  struct c10d_frame f;
  char t[64];
  raw(&b, "\x00\xce\xf7\x85\x3c", 5); /* VALIDATE */
  parse_one(&b, C10D_PROTO_V2, &f);
  ASSERT_EQ(f.op, C10D_OP_VALIDATE);
  ASSERT_EQ(f.u32, C10D_MAGIC);
  c10d_frame_release(&f);

  mu_buf_clear(&b);
  raw(&b, "\x0b", 1); /* MULTI_SET: count, then key and value pairs */
  u64(&b, 2);
  str(&b, "/a");
  str(&b, "1");
  str(&b, "/b");
  str(&b, "22");
  parse_one(&b, C10D_PROTO_V2, &f);
  ASSERT_EQ(f.op, C10D_OP_MULTI_SET);
  ASSERT_EQ(f.nspans, 4);
  ASSERT_STR_EQ(span(&b, &f, 3, t), "22");
  c10d_frame_release(&f);

  mu_buf_clear(&b);
  raw(&b, "\x0d\x39\x30\x00\x00", 5); /* PING 12345 */
  parse_one(&b, C10D_PROTO_V2, &f);
  ASSERT_EQ(f.op, C10D_OP_PING);
  ASSERT_EQ(f.u32, 12345);
  c10d_frame_release(&f);

  const struct {
    uint8_t id;
    enum c10d_op op;
  } ids[] = {{1, C10D_OP_SET},         {8, C10D_OP_DELETE_KEY}, {12, C10D_OP_CANCEL_WAIT},
             {14, C10D_OP_QUEUE_PUSH}, {15, C10D_OP_QUEUE_POP}, {16, C10D_OP_QUEUE_LEN},
             {17, C10D_OP_LIST},       {18, C10D_OP_BARRIER}};
  for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
    ASSERT_EQ(c10d_op_id(C10D_PROTO_V2, ids[i].op), ids[i].id);
    ASSERT_EQ(c10d_op_id(C10D_PROTO_LEGACY, C10D_OP_QUEUE_POP), -1);
  }
  mu_buf_release(&b);
}

/* The query table (C10D_QUERY_MAP): no two rows share an id in one numbering; each row parses
 * at its id; the ids just past the last of each numbering are refused; BARRIER is key + i64. */
TEST(c10d__query_table)
{
  int seen_v2[256] = {0}, seen_legacy[256] = {0}, max_v2 = -1, max_legacy = -1;
  for (int op = 0; op < C10D_OP_COUNT; op++) {
    const struct c10d_query *q = c10d_query((enum c10d_op)op);
    ASSERT(q != NULL && q->name != NULL && q->fields != NULL && q->torch != 0);
    if (q->v2_id >= 0) {
      ASSERT_EQ(seen_v2[q->v2_id]++, 0);
      max_v2 = q->v2_id > max_v2 ? q->v2_id : max_v2;
      ASSERT_EQ(c10d_op_id(C10D_PROTO_V2, (enum c10d_op)op), q->v2_id);
    }
    if (q->legacy_id >= 0) {
      ASSERT_EQ(seen_legacy[q->legacy_id]++, 0);
      max_legacy = q->legacy_id > max_legacy ? q->legacy_id : max_legacy;
    }
  }
  ASSERT(c10d_query(C10D_OP_COUNT) == NULL);
  ASSERT_EQ(max_v2, 18);
  ASSERT_EQ(max_legacy, 12);
  ASSERT(c10d_query(C10D_OP_BARRIER)->flags & C10D_QF_WRITE);
  ASSERT(!(c10d_query(C10D_OP_GET)->flags & C10D_QF_WRITE));

  struct c10d_limits l = lim();
  struct mu_buf b = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  struct c10d_frame f;
  memset(&f, 0, sizeof(f));
  raw(&b, "\x12", 1); /* BARRIER */
  str(&b, "/b");
  raw(&b, "\x03\x00\x00\x00\x00\x00\x00\x00", 8);
  parse_one(&b, C10D_PROTO_V2, &f);
  ASSERT_EQ(f.op, C10D_OP_BARRIER);
  ASSERT_EQ(f.amount, 3);
  ASSERT_EQ(f.nspans, 1);
  c10d_frame_reset(&f);
  uint8_t past_v2 = 19, past_legacy = 13;
  ASSERT_EQ(c10d_frame_parse(&f, C10D_PROTO_V2, &l, &past_v2, 1), -C10D_R_UNKNOWN_QUERY);
  c10d_frame_reset(&f);
  ASSERT_EQ(c10d_frame_parse(&f, C10D_PROTO_LEGACY, &l, &past_legacy, 1), -C10D_R_UNKNOWN_QUERY);
  c10d_frame_release(&f);
  mu_buf_release(&b);
}

TEST(c10d__resumes_in_pieces)
{
  struct mu_buf b = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  raw(&b, "\x01", 1); /* COMPARE_SET */
  str(&b, "/key");
  str(&b, "expected");
  str(&b, "desired");
  struct c10d_limits l = lim();
  struct c10d_frame f;
  memset(&f, 0, sizeof(f));
  for (size_t n = 0; n < b.len; n++)
    ASSERT_EQ(c10d_frame_parse(&f, C10D_PROTO_LEGACY, &l, (const uint8_t *)b.data, n), 0);
  ASSERT_EQ(c10d_frame_parse(&f, C10D_PROTO_LEGACY, &l, (const uint8_t *)b.data, b.len), 1);
  ASSERT_EQ(f.nspans, 3);
  ASSERT_EQ(f.len, b.len);
  c10d_frame_release(&f);
  mu_buf_release(&b);
}

TEST(c10d__bounds_refused_at_their_length)
{
  struct c10d_limits l = lim(); /* values of 1 KiB, keys of 8 KiB */
  struct mu_buf b = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  struct c10d_frame f;
  const struct {
    const char *what;
    int rc;
  } cases[] = {{"key", -C10D_R_KEY_TOO_LONG},
               {"value", -C10D_R_VALUE_TOO_LARGE},
               {"count", -C10D_R_TOO_MANY_KEYS},
               {"id", -C10D_R_UNKNOWN_QUERY}};
  for (size_t i = 0; i < 4; i++) {
    mu_buf_clear(&b);
    if (i == 0) {
      raw(&b, "\x00", 1);
      u64(&b, (uint64_t)1 << 62); /* only the length: nothing it announces has come */
    } else if (i == 1) {
      raw(&b, "\x00", 1);
      str(&b, "/k");
      u64(&b, 1025);
    } else if (i == 2) {
      raw(&b, "\x05", 1);
      u64(&b, (uint64_t)C10D_MAX_QUERY_KEYS + 1);
    } else {
      raw(&b, "\x0d", 1); /* PING has no legacy id */
    }
    memset(&f, 0, sizeof(f));
    ASSERT_EQ(c10d_frame_parse(&f, C10D_PROTO_LEGACY, &l, (const uint8_t *)b.data, b.len),
              cases[i].rc);
    c10d_frame_release(&f);
  }
  /* a frame of many values past max_frame, each value under its own bound */
  l.max_frame = 4096;
  mu_buf_clear(&b);
  raw(&b, "\x0b", 1);
  u64(&b, 5);
  memset(&f, 0, sizeof(f));
  for (int i = 0; i < 5; i++) {
    char v[1000];
    memset(v, 'x', sizeof(v) - 1);
    v[sizeof(v) - 1] = '\0';
    str(&b, "/k");
    str(&b, v);
  }
  ASSERT_EQ(c10d_frame_parse(&f, C10D_PROTO_V2, &l, (const uint8_t *)b.data, b.len),
            -C10D_R_FRAME_TOO_LARGE);
  c10d_frame_release(&f);
  mu_buf_release(&b);
}

/* Issue 35: each bound at exactly its limit is taken and at one past it refused (a key of
 * C10D_MAX_KEY_BYTES, a value of max_value, a count of C10D_MAX_QUERY_KEYS). */
TEST(c10d__bounds_at_max_and_max_plus_one)
{
  struct c10d_limits l = lim(); /* values of 1 KiB, keys of 8 KiB */
  struct mu_buf b = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  struct c10d_frame f;
  char *key = mu_calloc(1, C10D_MAX_KEY_BYTES + 2);
  memset(key, 'k', C10D_MAX_KEY_BYTES + 1);
  char val[1026];
  memset(val, 'v', sizeof(val) - 1);
  val[sizeof(val) - 1] = '\0';
  for (int over = 0; over <= 1; over++) {
    /* SET key value: the key at max (taken), then max+1 (refused) */
    key[C10D_MAX_KEY_BYTES + over] = '\0';
    val[1024] = '\0';
    mu_buf_clear(&b);
    raw(&b, "\x00", 1);
    str(&b, key);
    str(&b, "v");
    memset(&f, 0, sizeof(f));
    ASSERT_EQ(c10d_frame_parse(&f, C10D_PROTO_LEGACY, &l, (const uint8_t *)b.data, b.len),
              over ? -C10D_R_KEY_TOO_LONG : 1);
    c10d_frame_release(&f);
    key[C10D_MAX_KEY_BYTES + over] = 'k';
    /* SET /k value: the value at max (taken), then max+1 (refused) */
    val[1024] = over ? 'v' : '\0';
    mu_buf_clear(&b);
    raw(&b, "\x00", 1);
    str(&b, "/k");
    str(&b, val);
    memset(&f, 0, sizeof(f));
    ASSERT_EQ(c10d_frame_parse(&f, C10D_PROTO_LEGACY, &l, (const uint8_t *)b.data, b.len),
              over ? -C10D_R_VALUE_TOO_LARGE : 1);
    c10d_frame_release(&f);
    /* a multi-key query's count: at max it waits for its keys (0), past it refused */
    mu_buf_clear(&b);
    raw(&b, "\x05", 1);
    u64(&b, (uint64_t)C10D_MAX_QUERY_KEYS + (uint64_t)over);
    memset(&f, 0, sizeof(f));
    ASSERT_EQ(c10d_frame_parse(&f, C10D_PROTO_LEGACY, &l, (const uint8_t *)b.data, b.len),
              over ? -C10D_R_TOO_MANY_KEYS : 0);
    c10d_frame_release(&f);
  }
  mu_free(key);
  mu_buf_release(&b);
}

TEST(c10d__key_names)
{
  struct mu_buf p = MU_BUF_INIT(MU_BUF_UNBOUNDED), k = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  const struct {
    const char *key;
    size_t n;
    const char *path;
  } cases[] = {
      {"/torch.rendezvous.job1.0/MASTER_ADDR", 36,
       "/_c10d/%2Ftorch.rendezvous.job1.0%2FMASTER_ADDR"},
      {"", 0, "/_c10d/%"},
      {".", 1, "/_c10d/%2E"},
      {"..", 2, "/_c10d/%2E%2E"},
      {"a%b c", 5, "/_c10d/a%25b%20c"},
      {"\x00\xff", 2, "/_c10d/%00%FF"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    ASSERT_STR_EQ(c10d_key_path(&p, C10D_DIR, cases[i].key, cases[i].n), cases[i].path);
    const char *name = cases[i].path + sizeof(C10D_DIR);
    ASSERT_EQ(c10d_key_decode(name, strlen(name), &k), 0);
    ASSERT_EQ(k.len, cases[i].n);
    ASSERT(memcmp(k.data ? k.data : "", cases[i].key, cases[i].n) == 0);
  }
  ASSERT_EQ(c10d_key_decode("a%2", 3, &k), -1); /* a cut escape */
  ASSERT_EQ(c10d_key_decode("a/b", 3, &k), -1); /* not one of ours (a v2 client's) */
  ASSERT_EQ(c10d_key_decode("%zz", 3, &k), -1);
  mu_buf_release(&p);
  mu_buf_release(&k);
}

/* --c10d-allow (rendezvous/c10d/allow.c): the list's errors name the entry, prefixes are kept
 * at their maximum and refused at maximum + 1, and an IPv4 peer on a dual-stack socket matches
 * its IPv4 network. */
static int admits(const struct c10d_allow *a, const char *ip)
{
  struct sockaddr_storage ss = {0};
  if (strchr(ip, ':') != NULL) {
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
    s6->sin6_family = AF_INET6;
    ASSERT_EQ(inet_pton(AF_INET6, ip, &s6->sin6_addr), 1);
  } else {
    struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
    s4->sin_family = AF_INET;
    ASSERT_EQ(inet_pton(AF_INET, ip, &s4->sin_addr), 1);
  }
  return c10d_allow_match(a, (struct sockaddr *)&ss);
}

TEST(c10d__allow_list)
{
  struct c10d_allow a = {0};
  char err[256];
  ASSERT_EQ(admits(&a, "203.0.113.9"), 1); /* no list: everyone */
  ASSERT_EQ(c10d_allow_parse("127.0.0.0/8,198.18.1.0/25,::1,fd00::/128", &a, err, sizeof(err)),
            0);
  ASSERT_EQ(a.n, 4);
  ASSERT_EQ(admits(&a, "127.9.9.9"), 1);
  ASSERT_EQ(admits(&a, "198.18.1.127"), 1);
  ASSERT_EQ(admits(&a, "198.18.1.128"), 0); /* just outside the /25 */
  ASSERT_EQ(admits(&a, "::ffff:198.18.1.5"), 1);
  ASSERT_EQ(admits(&a, "::1"), 1);
  ASSERT_EQ(admits(&a, "fd00::1"), 0); /* /128: the one address */
  ASSERT_EQ(admits(&a, "fd00::"), 1);
  ASSERT_EQ(admits(&a, "10.0.0.1"), 0);
  ASSERT_EQ(c10d_allow_parse("10.0.0.1/32", &a, err, sizeof(err)), 0);
  ASSERT_EQ(admits(&a, "10.0.0.1"), 1);
  ASSERT_EQ(admits(&a, "10.0.0.0"), 0);
  const struct {
    const char *list, *says;
  } bad[] = {
      {"10.0.0.1/33", "prefix length must be 0-32"},
      {"::1/129", "prefix length must be 0-128"},
      {"10.0.0.1/", "prefix length"},
      {"10.0.0.1/-1", "prefix length"},
      {"node-1", "resolve it first"},
      {"10.0.0.1,,10.0.0.2", "an empty entry"},
      {"", "an empty entry"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    ASSERT_EQ(c10d_allow_parse(bad[i].list, &a, err, sizeof(err)), -1);
    ASSERT(strstr(err, bad[i].says) != NULL);
    ASSERT_EQ(a.n, 0);
  }
  c10d_allow_free(&a);
}

/* ---------------------------------------------------------------------------------------------
 * mu_c10d_probe() (common/c10d_probe.c) against a real musterd on a thread, and against what is
 * not one
 */

struct srv_thread {
  uv_loop_t loop;
  uv_async_t stop;
  struct rv_server *srv;
  int http_port, c10d_port;
  pthread_t th;
  int ready;
  pthread_mutex_t mu;
  pthread_cond_t cv;
};

static void on_stop(uv_async_t *a)
{
  struct srv_thread *t = a->data;
  rv_server_close(t->srv, NULL, NULL);
  uv_close((uv_handle_t *)a, NULL);
}

static void *srv_main(void *arg)
{
  struct srv_thread *t = arg;
  struct rv_server_config cfg;
  rv_server_config_init(&cfg);
  cfg.listen_port = 0;
  t->srv = rv_server_new(&t->loop, &cfg);
  ASSERT_EQ(rv_server_listen(t->srv), 0);
  ASSERT_EQ(rv_server_listen_c10d(t->srv, "127.0.0.1", 0), 0);
  pthread_mutex_lock(&t->mu);
  t->http_port = rv_server_port(t->srv);
  t->c10d_port = rv_server_c10d_port(t->srv);
  t->ready = 1;
  pthread_cond_signal(&t->cv);
  pthread_mutex_unlock(&t->mu);
  uv_run(&t->loop, UV_RUN_DEFAULT);
  ASSERT_EQ(uv_loop_close(&t->loop), 0);
  return NULL;
}

/* A listener that reads one query and closes, as PyTorch 1.13's server does on a missing key. */
static void *closer_main(void *arg)
{
  int ls = *(int *)arg, fd = accept(ls, NULL, NULL);
  char b[64];
  if (fd >= 0 && read(fd, b, sizeof(b)) >= 0)
    close(fd);
  return NULL;
}

/* Starts a musterd (HTTP and TCPStore on loopback, ports chosen by the kernel) on a thread. */
static void srv_start(struct srv_thread *t)
{
  memset(t, 0, sizeof(*t));
  pthread_mutex_init(&t->mu, NULL);
  pthread_cond_init(&t->cv, NULL);
  uv_loop_init(&t->loop);
  uv_async_init(&t->loop, &t->stop, on_stop);
  t->stop.data = t;
  pthread_create(&t->th, NULL, srv_main, t);
  pthread_mutex_lock(&t->mu);
  while (!t->ready)
    pthread_cond_wait(&t->cv, &t->mu);
  pthread_mutex_unlock(&t->mu);
}

TEST(c10d__probe)
{
  struct srv_thread t;
  srv_start(&t);

  struct mu_buf url = MU_BUF_INIT(1024), err = MU_BUF_INIT(1024);
  char want[64];
  snprintf(want, sizeof(want), "http://127.0.0.1:%d", t.http_port);
  ASSERT_EQ(mu_c10d_probe("127.0.0.1", t.c10d_port, 5000, &url, &err), 0);
  ASSERT_STR_EQ(mu_buf_str(&url), want);
  /* musterd's HTTP port is not a TCPStore: it answers the bytes with a 400 and closes */
  mu_buf_clear(&url);
  ASSERT_EQ(mu_c10d_probe("127.0.0.1", t.http_port, 5000, &url, &err), MU_ENOENT);
  uv_async_send(&t.stop);
  pthread_join(t.th, NULL);

  /* nothing listens there now */
  mu_buf_clear(&err);
  ASSERT_EQ(mu_c10d_probe("127.0.0.1", t.c10d_port, 2000, &url, &err), MU_ECONN);
  ASSERT(strstr(mu_buf_str(&err), "cannot connect") != NULL);
  /* a store that closes on the key it lacks (torch 1.13) */
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa;
  socklen_t sl = sizeof(sa);
  memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(ls, (struct sockaddr *)&sa, sizeof(sa)), 0);
  ASSERT_EQ(listen(ls, 4), 0);
  getsockname(ls, (struct sockaddr *)&sa, &sl);
  pthread_t th;
  pthread_create(&th, NULL, closer_main, &ls);
  mu_buf_clear(&err);
  ASSERT_EQ(mu_c10d_probe("127.0.0.1", ntohs(sa.sin_port), 5000, &url, &err), MU_ENOENT);
  ASSERT(strstr(mu_buf_str(&err), "not a musterd") != NULL);
  pthread_join(th, NULL);
  close(ls);
  mu_buf_release(&url);
  mu_buf_release(&err);
}

/* ---------------------------------------------------------------------------------------------
 * WAIT over random key sets (issue 33/1: a WAIT naming keys that were there, or one key twice,
 * wrote past its array): for any keys set and any multiset waited on, STOP_WAITING comes at
 * once when every key is there, else exactly when the last missing one is set, never before.
 */

static int tcp_to(int port)
{
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa.sin_port = htons((uint16_t)port);
  struct timeval tv = {10, 0}; /* a lost answer fails the case, it does not hang it */
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ASSERT_EQ(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  return fd;
}

static void send_buf(int fd, struct mu_buf *b)
{
  ASSERT_EQ(write(fd, b->data, b->len), (ssize_t)b->len);
  mu_buf_clear(b);
}

/* Reads n bytes (or fails the case). */
static void recv_n(int fd, void *p, size_t n)
{
  for (size_t got = 0; got < n;) {
    ssize_t r = read(fd, (char *)p + got, n - got);
    ASSERT(r > 0);
    got += (size_t)r;
  }
}

/* Whether fd has bytes to read now. */
static int readable(int fd)
{
  char c;
  return recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

/* SET key=v on `fd`, then a GET of it: once its answer is read the server has run the SET and
 * every waiter it woke has had its answer written. */
static void set_synced(int fd, const char *key)
{
  struct mu_buf b = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  raw(&b, "\x00", 1); /* legacy SET */
  str(&b, key);
  str(&b, "v");
  raw(&b, "\x02", 1); /* legacy GET */
  str(&b, key);
  send_buf(fd, &b);
  uint8_t ans[9];
  recv_n(fd, ans, sizeof(ans));
  ASSERT_EQ(ans[0], 1); /* u64 length 1 */
  ASSERT_EQ(ans[8], 'v');
  mu_buf_release(&b);
}

TEST(c10d__wait_random_key_sets)
{
  struct srv_thread t;
  srv_start(&t);
  int waiter = tcp_to(t.c10d_port), setter = tcp_to(t.c10d_port);
  unsigned seed = 33;
  for (int round = 0; round < 300; round++) {
    enum { NAMES = 6 };
    char keys[NAMES][32];
    int set[NAMES], want[NAMES];
    size_t nwait = 1 + (size_t)(rand_r(&seed) % 12); /* repeats likely: up to 12 of 6 names */
    for (int i = 0; i < NAMES; i++) {
      snprintf(keys[i], sizeof(keys[i]), "/r%d/k%d", round, i);
      set[i] = rand_r(&seed) % 2;
      want[i] = 0;
      if (set[i])
        set_synced(setter, keys[i]);
    }
    struct mu_buf b = MU_BUF_INIT(MU_BUF_UNBOUNDED);
    raw(&b, "\x05", 1); /* legacy WAIT */
    u64(&b, nwait);
    for (size_t i = 0; i < nwait; i++) {
      int k = rand_r(&seed) % NAMES;
      want[k] = 1;
      str(&b, keys[k]);
    }
    send_buf(waiter, &b);
    mu_buf_release(&b);
    int missing = 0;
    for (int i = 0; i < NAMES; i++)
      missing += want[i] && !set[i];
    for (int i = 0; i < NAMES && missing > 0; i++) {
      if (!want[i] || set[i])
        continue;
      set_synced(setter, keys[i]); /* the WAIT was read before: the setter's GET answers after */
      if (--missing > 0)
        ASSERT(!readable(waiter)); /* a key still missing: no answer yet */
    }
    uint8_t stop = 0xff;
    recv_n(waiter, &stop, 1);
    ASSERT_EQ(stop, 0);        /* STOP_WAITING */
    ASSERT(!readable(waiter)); /* exactly one answer */
  }
  close(waiter);
  close(setter);
  uv_async_send(&t.stop);
  pthread_join(t.th, NULL);
}
