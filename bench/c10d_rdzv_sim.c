/* c10d_rdzv_sim: N simulated torchrun agents (torch 1.13's dynamic rendezvous over the c10d
 * backend) close one round on a TCPStore server (musterd --c10d-listen, or PyTorch's own), with
 * the queries that backend sends (docs/c10d.md, "torchrun's c10d backend"):
 *   - each agent first sets the state key with compare_set(key, "", sentinel);
 *   - to join it compare_sets the state it last saw plus itself; a conflict answers the current
 *     state, which it retries from at once (torch's _DistributedRendezvousOpExecutor does, which
 *     is why every agent races one key: pytorch/pytorch#117066);
 *   - the agent that makes the list full compare_sets it closed;
 *   - an agent that joined and waits polls the state (WAIT then GET, as TCPStore.get does)
 *     every --poll-ms until it sees the round closed.
 * The state is "<0|1>|<id>,<id>,..." (torch's is a base64 pickle that grows the same way).
 *
 *   c10d_rdzv_sim --port P [--agents N] [--poll-ms MS] [--run ID]
 *
 * Prints one line: agents, ms from the start to the closing compare_set's answer, ms until the
 * last agent saw the round closed, compare_sets sent and how many lost the race.
 * Exits 1 when an agent's connection failed or the round did not close within 10 minutes.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "alloc.h"
#include "buf.h"
#include "list.h"
#include "opts.h"

static char KEY[96] = "/torch.rendezvous.sim"; /* + the run id (--run) */
#define SENTINEL "0|"

enum { Q_CAS = 1, Q_GET = 2, Q_WAIT = 5 };
enum { S_INIT, S_JOIN, S_CLOSE, S_POLL, S_DONE };

struct agent {
  uv_tcp_t tcp;
  uv_connect_t creq;
  uv_timer_t timer;
  struct sim *s;
  int id, state;
  char name[16];
  struct mu_buf cur;  /* the state it last saw */
  struct mu_buf want; /* the state its compare_set proposes */
  struct mu_buf rbuf; /* answer bytes */
  size_t skip;        /* a poll's STOP_WAITING byte before the value */
};

struct sim {
  uv_loop_t *loop;
  int n, connected, done, poll_ms;
  struct agent *a;
  uint64_t t0, t_closed, t_last;
  uint64_t cas, conflicts, errors;
};

struct wreq {
  uv_write_t w;
  char data[];
};

static void on_write(uv_write_t *w, int status)
{
  struct agent *a = w->data;
  if (status < 0)
    a->s->errors++;
  mu_free(MU_CONTAINER_OF(w, struct wreq, w));
}

static void put_u64(struct mu_buf *b, uint64_t v)
{
  char p[8];
  for (int i = 0; i < 8; i++)
    p[i] = (char)(v >> (8 * i));
  mu_buf_append(b, p, 8);
}

static void put_str(struct mu_buf *b, const char *s, size_t n)
{
  put_u64(b, n);
  mu_buf_append(b, s, n);
}

static void send_buf(struct agent *a, struct mu_buf *q)
{
  struct wreq *r = mu_malloc(sizeof(*r) + q->len);
  memcpy(r->data, q->data, q->len);
  r->w.data = a;
  uv_buf_t b = uv_buf_init(r->data, (unsigned)q->len);
  if (uv_write(&r->w, (uv_stream_t *)&a->tcp, &b, 1, on_write) != 0) {
    a->s->errors++;
    mu_free(r);
  }
  mu_buf_release(q);
}

static void cas(struct agent *a, const char *expect, size_t en)
{
  struct mu_buf q = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  mu_buf_putc(&q, Q_CAS);
  put_str(&q, KEY, strlen(KEY));
  put_str(&q, expect, en);
  put_str(&q, a->want.data ? a->want.data : "", a->want.len);
  a->s->cas++;
  send_buf(a, &q);
}

static void poll_state(struct agent *a)
{
  struct mu_buf q = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  mu_buf_putc(&q, Q_WAIT);
  put_u64(&q, 1);
  put_str(&q, KEY, strlen(KEY));
  mu_buf_putc(&q, Q_GET);
  put_str(&q, KEY, strlen(KEY));
  a->skip = 1;
  send_buf(a, &q);
}

/* Whether `name` is in the state's list. */
static int listed(const struct mu_buf *st, const char *name)
{
  size_t nl = strlen(name);
  const char *p = st->data ? st->data + 2 : "";
  while (*p) {
    const char *e = strchr(p, ',');
    size_t l = e ? (size_t)(e - p) : strlen(p);
    if (l == nl && memcmp(p, name, nl) == 0)
      return 1;
    p += l + (e ? 1 : 0);
  }
  return 0;
}

static int count(const struct mu_buf *st)
{
  int k = 0;
  for (size_t i = 2; i < st->len; i++)
    k += st->data[i] == ',';
  return st->len > 2 ? k + 1 : 0;
}

static void on_poll_timer(uv_timer_t *t)
{
  poll_state(t->data);
}

static void agent_done(struct agent *a)
{
  struct sim *s = a->s;
  a->state = S_DONE;
  s->t_last = uv_hrtime();
  if (++s->done == s->n) {
    for (int i = 0; i < s->n; i++) {
      uv_close((uv_handle_t *)&s->a[i].tcp, NULL);
      uv_close((uv_handle_t *)&s->a[i].timer, NULL);
    }
  }
}

/* What the agent does with the state it now knows (a->cur). */
static void step(struct agent *a)
{
  struct sim *s = a->s;
  if (a->cur.len >= 2 && a->cur.data[0] == '1') {
    agent_done(a);
    return;
  }
  if (!listed(&a->cur, a->name)) {
    mu_buf_clear(&a->want);
    mu_buf_append(&a->want, a->cur.data, a->cur.len);
    if (a->cur.len > 2)
      mu_buf_putc(&a->want, ',');
    mu_buf_puts(&a->want, a->name);
    a->state = S_JOIN;
    cas(a, a->cur.data, a->cur.len);
    return;
  }
  if (count(&a->cur) == s->n) { /* full: close it */
    mu_buf_clear(&a->want);
    mu_buf_append(&a->want, a->cur.data, a->cur.len);
    a->want.data[0] = '1';
    a->state = S_CLOSE;
    cas(a, a->cur.data, a->cur.len);
    return;
  }
  a->state = S_POLL;
  uv_timer_start(&a->timer, on_poll_timer, (uint64_t)s->poll_ms, 0);
}

/* A value answer (a compare_set's, a poll's GET) of `n` bytes at p. */
static void on_value(struct agent *a, const char *p, size_t n)
{
  struct sim *s = a->s;
  int was = a->state;
  if ((was == S_JOIN || was == S_CLOSE) && (n != a->want.len || memcmp(p, a->want.data, n) != 0))
    s->conflicts++;
  if (was == S_CLOSE && n == a->want.len && memcmp(p, a->want.data, n) == 0)
    s->t_closed = uv_hrtime();
  mu_buf_clear(&a->cur);
  mu_buf_append(&a->cur, p, n);
  step(a);
}

static void on_alloc(uv_handle_t *h, size_t sz, uv_buf_t *buf)
{
  (void)sz;
  struct agent *a = h->data;
  mu_buf_reserve(&a->rbuf, 65536);
  buf->base = a->rbuf.data + a->rbuf.len;
  buf->len = a->rbuf.cap - a->rbuf.len - 1;
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
  (void)buf;
  struct agent *a = st->data;
  if (n < 0) {
    if (a->state != S_DONE)
      a->s->errors++;
    uv_read_stop(st);
    return;
  }
  a->rbuf.len += (size_t)n;
  for (;;) {
    const unsigned char *p = (const unsigned char *)a->rbuf.data;
    size_t have = a->rbuf.len, off = a->skip;
    if (have < off + 8)
      return;
    uint64_t vl = 0;
    for (int i = 7; i >= 0; i--)
      vl = vl << 8 | p[off + i];
    if (have < off + 8 + vl)
      return;
    a->skip = 0;
    char *v = mu_malloc((size_t)vl + 1);
    memcpy(v, p + off + 8, (size_t)vl);
    mu_buf_consume(&a->rbuf, off + 8 + (size_t)vl);
    on_value(a, v, (size_t)vl);
    mu_free(v);
  }
}

static void start_all(struct sim *s)
{
  s->t0 = uv_hrtime();
  for (int i = 0; i < s->n; i++) {
    struct agent *a = &s->a[i];
    mu_buf_clear(&a->want);
    mu_buf_puts(&a->want, SENTINEL);
    a->state = S_INIT;
    cas(a, "", 0);
  }
}

static void on_connect(uv_connect_t *r, int status)
{
  struct agent *a = r->data;
  struct sim *s = a->s;
  if (status < 0) {
    fprintf(stderr, "c10d_rdzv_sim: connect: %s\n", uv_strerror(status));
    s->errors++;
    uv_stop(s->loop);
    return;
  }
  uv_tcp_nodelay(&a->tcp, 1);
  uv_read_start((uv_stream_t *)&a->tcp, on_alloc, on_read);
  if (++s->connected == s->n)
    start_all(s);
}

static void on_deadline(uv_timer_t *t)
{
  struct sim *s = t->data;
  if (s->done < s->n) {
    fprintf(stderr, "c10d_rdzv_sim: %d of %d agents saw the round closed in 10 min\n", s->done,
            s->n);
    s->errors++;
    uv_stop(s->loop);
  }
  uv_close((uv_handle_t *)t, NULL);
}

int main(int argc, char **argv)
{
  unsigned long port = 0, agents = 1000, poll_ms = 100;
  const char *run = NULL;
  struct sim s;
  memset(&s, 0, sizeof(s));
  struct mu_opt opts[] = {
      MU_OPT_UINT(0, "port", &port, "P", "the TCPStore server's port on 127.0.0.1", 1, 65535),
      MU_OPT_UINT(0, "agents", &agents, "N", "agents (default 1000)", 2, 100000),
      MU_OPT_UINT(0, "poll-ms", &poll_ms, "MS", "a waiting agent's poll interval (100)", 1, 60000),
      MU_OPT_STRING(0, "run", &run, "ID", "the run id (default: one of its own per process)"),
      MU_OPT_END(),
  };
  int n = mu_opts_parse(opts, argc, argv, 0, "c10d_rdzv_sim --port P [--agents N]");
  if (n != argc || port == 0)
    return 2;
  if (run != NULL)
    snprintf(KEY, sizeof(KEY), "/torch.rendezvous.%s", run);
  else
    snprintf(KEY, sizeof(KEY), "/torch.rendezvous.sim%ld-%llu", (long)getpid(),
             (unsigned long long)uv_hrtime());
  s.loop = uv_default_loop();
  s.n = (int)agents;
  s.poll_ms = (int)poll_ms;
  s.a = mu_calloc((size_t)s.n, sizeof(*s.a));
  struct sockaddr_in sa;
  uv_ip4_addr("127.0.0.1", (int)port, &sa);
  for (int i = 0; i < s.n; i++) {
    struct agent *a = &s.a[i];
    a->s = &s;
    a->id = i;
    snprintf(a->name, sizeof(a->name), "n%d", i);
    mu_buf_init(&a->cur, MU_BUF_UNBOUNDED);
    mu_buf_init(&a->want, MU_BUF_UNBOUNDED);
    mu_buf_init(&a->rbuf, MU_BUF_UNBOUNDED);
    uv_tcp_init(s.loop, &a->tcp);
    uv_timer_init(s.loop, &a->timer);
    a->tcp.data = a->timer.data = a;
    a->creq.data = a;
    uv_tcp_connect(&a->creq, &a->tcp, (const struct sockaddr *)&sa, on_connect);
  }
  uv_timer_t deadline;
  uv_timer_init(s.loop, &deadline);
  deadline.data = &s;
  uv_timer_start(&deadline, on_deadline, 600000, 0);
  uv_unref((uv_handle_t *)&deadline);
  uv_run(s.loop, UV_RUN_DEFAULT);
  printf("agents=%d closed_ms=%.1f all_saw_ms=%.1f compare_sets=%llu conflicts=%llu errors=%llu\n",
         s.n, s.t_closed ? (double)(s.t_closed - s.t0) / 1e6 : 0,
         s.t_last ? (double)(s.t_last - s.t0) / 1e6 : 0, (unsigned long long)s.cas,
         (unsigned long long)s.conflicts, (unsigned long long)s.errors);
  for (int i = 0; i < s.n; i++) {
    mu_buf_release(&s.a[i].cur);
    mu_buf_release(&s.a[i].want);
    mu_buf_release(&s.a[i].rbuf);
  }
  mu_free(s.a);
  return s.errors > 0 || s.done < s.n ? 1 : 0;
}
