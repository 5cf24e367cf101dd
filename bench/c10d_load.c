/* c10d_load: a libuv load generator for TCPStore servers (musterd's --c10d-listen, or PyTorch's
 * own TCPStore(is_master=True)), speaking torch 1.13's numbering (what both servers of Debian's
 * torch take; docs/c10d.md).
 *
 *   c10d_load OP --port P --clients N [--seconds S] [--value-bytes B] [--v2]
 *
 * --v2: torch >= 2.1's numbering, each connection opening with VALIDATE (what torch 2.x's own
 * servers take: the classic one closes a connection whose first query is not VALIDATE).
 *
 * N connections, each a closed loop (the next query once the last is answered), for S seconds:
 *   set   SET of the client's key, with a CHECK of it in the same write (SET has no answer: the
 *         CHECK's READY acknowledges it); one op per round trip
 *   get   GET of the client's key (set once before the clock starts)
 *   add   ADD 1 to the client's counter
 *   wait  clients in pairs: the waiter sends WAIT(k) + CHECK(k) (the CHECK's NOT_READY says the
 *         WAIT is parked), then its partner SETs k (+ CHECK); the op is the waiter's STOP_WAITING,
 *         its latency from the SET's write; a fresh key every round
 * Prints one line: op, clients, ops, ops/s, p50 and p99 latency (ms), errors.
 * Exits 1 when a connection failed or an answer was not the expected one.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "alloc.h"
#include "list.h"
#include "opts.h"

enum { Q_SET = 0, Q_GET = 2, Q_ADD = 3, Q_CHECK = 4, Q_WAIT = 5 };
enum { OP_SET, OP_GET, OP_ADD, OP_WAIT };

struct client {
  uv_tcp_t tcp;
  uv_connect_t creq;
  struct bench *b;
  int idx;
  int connected;
  uint64_t seq;
  uint64_t t0; /* when the op in progress started */
  size_t want; /* answer bytes still expected */
  int phase;   /* wait: 0 idle, 1 waiter parked (CHECK pending), 2 woken pending */
  char key[64];
  struct client *peer; /* wait: the setter of a waiter, the waiter of a setter */
  char rbuf[65536];
  size_t rlen;
};

struct bench {
  uv_loop_t *loop;
  int op, nclients, connected, seconds, value_bytes;
  int port;
  int v2; /* torch >= 2.1's numbering: VALIDATE first, every id here one higher */
  struct client *c;
  int running, stopping;
  uint64_t start_ns, stop_ns;
  uint64_t ops, errors;
  uint64_t nonce; /* in wait's keys: a fresh key per round, whatever ran on the server before */
  double *lat;    /* ms */
  size_t nlat, lat_cap;
  char *value;
  uv_timer_t timer;
};

struct wreq {
  uv_write_t w;
  char data[];
};

static void on_write(uv_write_t *w, int status)
{
  struct client *c = w->data;
  if (status < 0)
    c->b->errors++;
  mu_free(MU_CONTAINER_OF(w, struct wreq, w));
}

static void send_bytes(struct client *c, const char *p, size_t n)
{
  /* the kernel takes it at once nearly always: no request, no copy (the generator's own CPU is
   * the machine's, shared with the server measured) */
  uv_buf_t t = uv_buf_init((char *)p, (unsigned)n);
  int k = uv_try_write((uv_stream_t *)&c->tcp, &t, 1);
  if (k == (int)n)
    return;
  if (k > 0) {
    p += k;
    n -= (size_t)k;
  }
  struct wreq *r = mu_malloc(sizeof(*r) + n);
  memcpy(r->data, p, n);
  r->w.data = c;
  uv_buf_t b = uv_buf_init(r->data, (unsigned)n);
  if (uv_write(&r->w, (uv_stream_t *)&c->tcp, &b, 1, on_write) != 0) {
    c->b->errors++;
    mu_free(r);
  }
}

static size_t put_u64(char *p, uint64_t v)
{
  for (int i = 0; i < 8; i++)
    p[i] = (char)(v >> (8 * i));
  return 8;
}

static size_t put_str(char *p, const char *s, size_t n)
{
  put_u64(p, n);
  memcpy(p + 8, s, n);
  return 8 + n;
}

/* A query into buf: id, then the key, then (SET) the value / (ADD) 1 / (CHECK, WAIT) as a list
 * of one key. Returns: its length. */
static size_t query(struct bench *b, char *buf, int id, const char *key)
{
  size_t n = 0, kl = strlen(key);
  buf[n++] = (char)(b->v2 ? id + 1 : id); /* SET GET ADD CHECK WAIT: each id + 1 in 2.x */
  if (id == Q_CHECK || id == Q_WAIT)
    n += put_u64(buf + n, 1);
  n += put_str(buf + n, key, kl);
  if (id == Q_SET)
    n += put_str(buf + n, b->value, (size_t)b->value_bytes);
  if (id == Q_ADD)
    n += put_u64(buf + n, 1);
  return n;
}

static void record(struct bench *b, uint64_t t0)
{
  if (!b->running)
    return;
  b->ops++;
  if (b->nlat == b->lat_cap) {
    b->lat_cap = b->lat_cap ? b->lat_cap * 2 : 1 << 16;
    b->lat = mu_realloc(b->lat, b->lat_cap * sizeof(*b->lat));
  }
  b->lat[b->nlat++] = (double)(uv_hrtime() - t0) / 1e6;
}

/* Starts the client's next op (the setter of a wait pair starts nothing by itself). */
static void next_op(struct client *c)
{
  struct bench *b = c->b;
  char buf[1 << 16];
  size_t n = 0;
  if (b->stopping)
    return;
  c->t0 = uv_hrtime();
  switch (b->op) {
  case OP_SET:
    n = query(b, buf, Q_SET, c->key);
    n += query(b, buf + n, Q_CHECK, c->key);
    c->want = 1;
    break;
  case OP_GET:
    n = query(b, buf, Q_GET, c->key);
    c->want = 8 + (size_t)b->value_bytes;
    break;
  case OP_ADD:
    n = query(b, buf, Q_ADD, c->key);
    c->want = 8;
    break;
  case OP_WAIT:
    if (c->idx % 2 == 1)
      return; /* a setter: its waiter tells it when */
    snprintf(c->key, sizeof(c->key), "/w/%llx/%d/%llu", (unsigned long long)b->nonce, c->idx,
             (unsigned long long)c->seq++);
    n = query(b, buf, Q_WAIT, c->key);
    n += query(b, buf + n, Q_CHECK, c->key);
    c->want = 1; /* the CHECK's NOT_READY, then STOP_WAITING */
    c->phase = 1;
    break;
  }
  send_bytes(c, buf, n);
}

/* The waiter's WAIT is parked: its partner sets the key. */
static void setter_go(struct client *s, const char *key)
{
  char buf[1 << 16];
  size_t n = query(s->b, buf, Q_SET, key);
  n += query(s->b, buf + n, Q_CHECK, key);
  s->want = 1;
  s->peer->t0 = uv_hrtime(); /* the waiter's latency runs from the SET */
  send_bytes(s, buf, n);
}

/* An answer of c->want bytes is in c->rbuf. */
static void answered(struct client *c)
{
  struct bench *b = c->b;
  if (b->op != OP_WAIT) {
    if (b->op == OP_SET && c->rbuf[0] != 0)
      b->errors++;
    record(b, c->t0);
    next_op(c);
    return;
  }
  if (c->idx % 2 == 1) { /* the setter's READY */
    if (c->rbuf[0] != 0)
      b->errors++;
    return;
  }
  if (c->phase == 1) {
    if (c->rbuf[0] != 1) /* NOT_READY */
      b->errors++;
    c->phase = 2;
    c->want = 1;
    setter_go(c->peer, c->key);
    return;
  }
  if (c->rbuf[0] != 0) /* STOP_WAITING */
    b->errors++;
  c->phase = 0;
  record(b, c->t0);
  next_op(c);
}

static void on_alloc(uv_handle_t *h, size_t s, uv_buf_t *buf)
{
  (void)s;
  struct client *c = h->data;
  buf->base = c->rbuf + c->rlen;
  buf->len = sizeof(c->rbuf) - c->rlen;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
  (void)buf;
  struct client *c = s->data;
  if (n < 0) {
    if (!c->b->stopping)
      c->b->errors++;
    uv_read_stop(s);
    return;
  }
  c->rlen += (size_t)n;
  while (c->want > 0 && c->rlen >= c->want) {
    size_t w = c->want;
    c->want = 0;
    answered(c);
    memmove(c->rbuf, c->rbuf + w, c->rlen - w);
    c->rlen -= w;
  }
}

static void on_timer(uv_timer_t *t)
{
  struct bench *b = t->data;
  if (!b->running) { /* warm-up over */
    b->running = 1;
    b->ops = 0;
    b->nlat = 0;
    b->start_ns = uv_hrtime();
    uv_timer_start(t, on_timer, (uint64_t)b->seconds * 1000, 0);
    return;
  }
  b->stop_ns = uv_hrtime();
  b->running = 0;
  b->stopping = 1;
  for (int i = 0; i < b->nclients; i++)
    uv_close((uv_handle_t *)&b->c[i].tcp, NULL);
  uv_close((uv_handle_t *)t, NULL);
}

/* Every client is connected: GET needs its key, then the clock starts (after 1 s of load). */
static void all_connected(struct bench *b)
{
  if (b->op == OP_GET) {
    char buf[1 << 16];
    for (int i = 0; i < b->nclients; i++) {
      size_t n = query(b, buf, Q_SET, b->c[i].key);
      send_bytes(&b->c[i], buf, n);
    }
  }
  for (int i = 0; i < b->nclients; i++)
    next_op(&b->c[i]);
  uv_timer_init(b->loop, &b->timer);
  b->timer.data = b;
  uv_timer_start(&b->timer, on_timer, 1000, 0);
}

static void on_connect(uv_connect_t *r, int status)
{
  struct client *c = r->data;
  struct bench *b = c->b;
  if (status < 0) {
    fprintf(stderr, "c10d_load: connect: %s\n", uv_strerror(status));
    b->errors++;
    uv_stop(b->loop);
    return;
  }
  uv_tcp_nodelay(&c->tcp, 1);
  uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
  if (b->v2) { /* VALIDATE: id 0, the magic 0x3C85F7CE little-endian; no answer */
    static const char validate[] = {0, (char)0xce, (char)0xf7, (char)0x85, 0x3c};
    send_bytes(c, validate, sizeof(validate));
  }
  if (++b->connected == b->nclients)
    all_connected(b);
}

static int cmp_d(const void *x, const void *y)
{
  double a = *(const double *)x, c = *(const double *)y;
  return a < c ? -1 : a > c;
}

int main(int argc, char **argv)
{
  static const char *const ops[] = {"set", "get", "add", "wait"};
  struct bench b;
  unsigned long port = 0, clients = 64, seconds = 3, vbytes = 64;
  int v2 = 0;
  memset(&b, 0, sizeof(b));
  struct mu_opt opts[] = {
      MU_OPT_UINT(0, "port", &port, "P", "the TCPStore server's port on 127.0.0.1", 1, 65535),
      MU_OPT_UINT(0, "clients", &clients, "N", "connections (default 64)", 2, 100000),
      MU_OPT_UINT(0, "seconds", &seconds, "S", "measured seconds, after 1 s of warm-up (3)", 1,
                  3600),
      MU_OPT_UINT(0, "value-bytes", &vbytes, "B", "value size for set and get (64)", 1, 65000),
      MU_OPT_BOOL(0, "v2", &v2, "torch >= 2.1's numbering, VALIDATE first"),
      MU_OPT_END(),
  };
  if (argc < 2)
    return 2;
  /* the op first, then the options (argv[1] stands for the program's name) */
  int n =
      mu_opts_parse(opts, argc - 1, argv + 1, 0, "c10d_load set|get|add|wait --port P [options]");
  if (n < 0 || n != argc - 1 || port == 0)
    return 2;
  b.op = -1;
  for (int i = 0; i < 4; i++)
    if (strcmp(argv[1], ops[i]) == 0)
      b.op = i;
  if (b.op < 0)
    return 2;
  b.loop = uv_default_loop();
  b.nonce = uv_hrtime() ^ ((uint64_t)getpid() << 40);
  b.nclients = (int)(clients & ~1L);
  b.seconds = (int)seconds;
  b.value_bytes = (int)vbytes;
  b.value = mu_malloc((size_t)vbytes);
  memset(b.value, 'v', (size_t)vbytes);
  b.port = (int)port;
  b.v2 = v2;
  b.c = mu_calloc((size_t)b.nclients, sizeof(*b.c));
  struct sockaddr_in sa;
  uv_ip4_addr("127.0.0.1", b.port, &sa);
  for (int i = 0; i < b.nclients; i++) {
    struct client *c = &b.c[i];
    c->b = &b;
    c->idx = i;
    c->peer = &b.c[i ^ 1];
    snprintf(c->key, sizeof(c->key), b.op == OP_ADD ? "/bench/n/%d" : "/bench/%d", i);
    uv_tcp_init(b.loop, &c->tcp);
    c->tcp.data = c;
    c->creq.data = c;
    uv_tcp_connect(&c->creq, &c->tcp, (const struct sockaddr *)&sa, on_connect);
  }
  uv_run(b.loop, UV_RUN_DEFAULT);
  double secs = (double)(b.stop_ns - b.start_ns) / 1e9;
  qsort(b.lat, b.nlat, sizeof(*b.lat), cmp_d);
  double p50 = b.nlat ? b.lat[b.nlat / 2] : 0, p99 = b.nlat ? b.lat[(size_t)(b.nlat * 0.99)] : 0;
  printf("op=%s clients=%d ops=%llu rate=%.0f p50_ms=%.3f p99_ms=%.3f errors=%llu\n", ops[b.op],
         b.nclients, (unsigned long long)b.ops, secs > 0 ? (double)b.ops / secs : 0, p50, p99,
         (unsigned long long)b.errors);
  mu_free(b.lat);
  mu_free(b.c);
  mu_free(b.value);
  return b.errors > 0 || b.ops == 0 ? 1 : 0;
}
