/* soak: a long-running libuv load generator for musterd (issue #7's soak benchmark).
 *
 *   soak --port P --pid MUSTERD_PID [--clients 1000] [--seconds 600] [--think-ms 200]
 *        [--sample-seconds 60] [--warmup-seconds 10] [--max-growth-pct 10] [--token T]
 *
 * Each client is one keep-alive connection that loops over random operations, with a pause
 * of about --think-ms between them:
 *   set    PUT /v2/keys/soak/cI/kJ (J < 32, 16-256 byte values)          -> 200/201
 *   delete DELETE of one of its keys that exists                          -> 200
 *   get    GET of one of its keys (404 expected when absent)              -> 200/404
 *   lease  PUT .../lease?ttl=1, then a watch on it from the next index,
 *          answered by the expiry a second later                          -> 201/200, "expire"
 *   watch  after a third of the sets: GET /v2/keys/soak/cI?wait=true&recursive=true&waitIndex=N
 *          of that write (answered from the event history at once)        -> 200, "set"
 *   join   POST /v1/runs/soak-I/join (min = max = 1), heartbeat, a 100 ms round watch, leave
 *          with status failed (so the run stays open and the id is reused) -> 200 each
 * so the set of keys, runs and members stays bounded: a flat RSS is the expectation.
 *
 * musterd's VmRSS (/proc/PID/status) is sampled after the warm-up ("start") and then every
 * --sample-seconds; the summary line gives start, end, max and the error count. Exits 1 on any
 * error (an unexpected status, a dropped connection) or when end RSS grew more than
 * --max-growth-pct over start.
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <llhttp.h>
#include <uv.h>

#include "alloc.h"
#include "log.h"
#include "opts.h"

enum op {
  OP_SET = 0,
  OP_DEL,
  OP_GET,
  OP_LEASE_PUT,
  OP_LEASE_WATCH,
  OP_WATCH,
  OP_JOIN,
  OP_HEARTBEAT,
  OP_RWATCH,
  OP_LEAVE,
  OP_COUNT
};

static const char *op_names[OP_COUNT] = {"set",         "delete", "get",  "lease_put",
                                         "lease_watch", "watch",  "join", "heartbeat",
                                         "round_watch", "leave"};

#define NKEYS 32

struct client {
  uv_tcp_t tcp;
  uv_connect_t creq;
  uv_timer_t timer;
  llhttp_t parser;
  struct soak *s;
  uint32_t idx;
  int connected;
  int busy;
  enum op op;
  uint32_t key;
  uint32_t exists; /* bitmap of its permanent keys */
  uint64_t last_index;
  uint64_t lease_index;
  uint64_t round;
  char session[72]; /* its node's rendezvous session, from the join answer (X-Muster-Session) */
  uint64_t sent_ns;
  char body[4096];
  size_t body_len;
  char req[1024];
};

struct wr {
  uv_write_t req;
  struct client *c;
};

struct soak {
  uv_loop_t *loop;
  struct sockaddr_in dst;
  struct client *clients;
  long nclients;
  long seconds, think_ms, sample_s, warmup_s, max_growth;
  long pid;
  const char *token;
  uint64_t t0_ns;
  uint64_t requests, errors;
  uint64_t by_op[OP_COUNT];
  uint64_t lat_sum_ns, lat_max_ns;
  long rss_start, rss_end, rss_max, rss_min;
  int started; /* warm-up over: rss_start taken */
  int stopping;
  unsigned nerr_printed;
  uv_timer_t sampler;
  uint64_t next_sample_ns;
  uint64_t rng;
};

static uint64_t now_ns(void)
{
  return uv_hrtime();
}

static uint32_t rnd(struct soak *s, uint32_t n)
{
  /* xorshift64 */
  s->rng ^= s->rng << 13;
  s->rng ^= s->rng >> 7;
  s->rng ^= s->rng << 17;
  return (uint32_t)((s->rng >> 11) % n);
}

static long read_rss_kb(long pid)
{
  char path[64], line[256];
  long kb = -1;
  snprintf(path, sizeof(path), "/proc/%ld/status", pid);
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return -1;
  while (fgets(line, sizeof(line), f) != NULL) {
    if (strncmp(line, "VmRSS:", 6) == 0) {
      kb = strtol(line + 6, NULL, 10);
      break;
    }
  }
  fclose(f);
  return kb;
}

static void error_at(struct client *c, const char *what, int status)
{
  struct soak *s = c->s;
  s->errors++;
  if (s->nerr_printed < 20) {
    s->nerr_printed++;
    fprintf(stderr, "soak: client %u: %s: %s (status %d): %.200s\n", c->idx, op_names[c->op], what,
            status, c->body);
  }
}

static void schedule_next(struct client *c, int immediate);

static void on_write(uv_write_t *w, int status)
{
  struct wr *wr = (struct wr *)w;
  if (status < 0 && !wr->c->s->stopping)
    error_at(wr->c, uv_strerror(status), 0);
  mu_free(wr);
}

static void send_req(struct client *c, const char *method, const char *target, const char *ctype,
                     const char *body)
{
  struct soak *s = c->s;
  char auth[600] = "";
  size_t blen = body != NULL ? strlen(body) : 0;
  if (s->token != NULL)
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s\r\n", s->token);
  if (c->session[0] != '\0') {
    size_t used = strlen(auth);
    snprintf(auth + used, sizeof(auth) - used, "X-Muster-Session: %s\r\n", c->session);
  }
  int n = snprintf(c->req, sizeof(c->req),
                   "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s%s%s%sContent-Length: %zu\r\n\r\n%s",
                   method, target, auth, ctype ? "Content-Type: " : "", ctype ? ctype : "",
                   ctype ? "\r\n" : "", blen, body ? body : "");
  if (n < 0 || (size_t)n >= sizeof(c->req)) {
    fprintf(stderr, "soak: request too long\n");
    exit(2);
  }
  struct wr *wr = mu_malloc(sizeof(*wr));
  wr->c = c;
  uv_buf_t b = uv_buf_init(c->req, (unsigned)n);
  c->busy = 1;
  c->body_len = 0;
  c->body[0] = '\0';
  c->sent_ns = now_ns();
  if (uv_write(&wr->req, (uv_stream_t *)&c->tcp, &b, 1, on_write) != 0) {
    mu_free(wr);
    error_at(c, "write failed", 0);
    c->busy = 0;
  }
}

static void start_op(struct client *c)
{
  struct soak *s = c->s;
  char target[512], body[512];
  uint32_t r = rnd(s, 100);
  if (r < 35) {
    char val[260];
    uint32_t len = 16 + rnd(s, 241);
    for (uint32_t i = 0; i < len; i++)
      val[i] = (char)('a' + rnd(s, 26));
    val[len] = '\0';
    c->op = OP_SET;
    c->key = rnd(s, NKEYS);
    snprintf(target, sizeof(target), "/v2/keys/soak/c%u/k%u", c->idx, c->key);
    snprintf(body, sizeof(body), "value=%s", val);
    send_req(c, "PUT", target, "application/x-www-form-urlencoded", body);
  } else if (r < 50 && c->exists != 0) {
    do
      c->key = rnd(s, NKEYS);
    while (!(c->exists & (1u << c->key)));
    c->op = OP_DEL;
    snprintf(target, sizeof(target), "/v2/keys/soak/c%u/k%u", c->idx, c->key);
    send_req(c, "DELETE", target, NULL, NULL);
  } else if (r < 65) {
    c->op = OP_GET;
    c->key = rnd(s, NKEYS);
    snprintf(target, sizeof(target), "/v2/keys/soak/c%u/k%u", c->idx, c->key);
    send_req(c, "GET", target, NULL, NULL);
  } else if (r < 78) {
    c->op = OP_LEASE_PUT;
    snprintf(target, sizeof(target), "/v2/keys/soak/c%u/lease", c->idx);
    send_req(c, "PUT", target, "application/x-www-form-urlencoded", "value=held&ttl=1");
  } else {
    c->op = OP_JOIN;
    c->session[0] = '\0'; /* a first join: it has none */
    snprintf(target, sizeof(target), "/v1/runs/soak-%u/join", c->idx);
    snprintf(body, sizeof(body),
             "{\"node_id\":\"n%u\",\"addr\":\"127.0.0.1\",\"local_world_size\":1,"
             "\"master_port\":29400,\"min_nodes\":1,\"max_nodes\":1,\"last_call_ms\":0,"
             "\"join_timeout_ms\":30000,\"lease_ttl_ms\":10000,\"members\":false}",
             c->idx);
    send_req(c, "POST", target, "application/json", body);
  }
}

/* The hex string `field` of a flat JSON answer into out ("" when absent). */
static void json_hex(const char *body, const char *field, char *out, size_t n)
{
  const char *p = strstr(body, field);
  size_t k = 0;
  if (p != NULL) {
    p += strlen(field);
    while (*p == ' ' || *p == ':' || *p == '"')
      p++;
    while (k + 1 < n && isxdigit((unsigned char)p[k])) {
      out[k] = p[k];
      k++;
    }
  }
  out[k] = '\0';
}

static uint64_t json_u64(const char *body, const char *field)
{
  const char *p = strstr(body, field);
  if (p == NULL)
    return 0;
  p += strlen(field);
  while (*p == ' ' || *p == ':' || *p == '"')
    p++;
  return strtoull(p, NULL, 10);
}

/* Checks the answer to c->op; returns the follow-up op, or OP_COUNT when the chain ends. */
static enum op check_answer(struct client *c, int status)
{
  char target[512], body[256];
  int ok = 0;
  enum op next = OP_COUNT;
  switch (c->op) {
  case OP_SET:
    ok = status == 200 || status == 201;
    if (ok) {
      c->exists |= 1u << c->key;
      c->last_index = json_u64(c->body, "\"modifiedIndex\"");
      if (rnd(c->s, 3) == 0) {
        /* a recursive watch from that write's index: answered from the event history */
        c->op = OP_WATCH;
        snprintf(target, sizeof(target),
                 "/v2/keys/soak/c%u?wait=true&recursive=true&waitIndex=%" PRIu64, c->idx,
                 c->last_index);
        send_req(c, "GET", target, NULL, NULL);
        return OP_WATCH;
      }
    }
    break;
  case OP_DEL:
    ok = status == 200;
    c->exists &= ~(1u << c->key);
    break;
  case OP_GET:
    ok = (c->exists & (1u << c->key)) ? status == 200 : status == 404;
    break;
  case OP_LEASE_PUT:
    ok = status == 200 || status == 201;
    if (ok) {
      c->lease_index = json_u64(c->body, "\"modifiedIndex\"");
      c->op = OP_LEASE_WATCH;
      snprintf(target, sizeof(target), "/v2/keys/soak/c%u/lease?wait=true&waitIndex=%" PRIu64,
               c->idx, c->lease_index + 1);
      send_req(c, "GET", target, NULL, NULL);
      return OP_LEASE_WATCH;
    }
    break;
  case OP_LEASE_WATCH:
    ok = status == 200 && strstr(c->body, "\"action\":\"expire\"") != NULL;
    break;
  case OP_WATCH:
    ok = status == 200 && strstr(c->body, "\"action\":\"set\"") != NULL;
    break;
  case OP_JOIN:
    ok = status == 200;
    if (ok) {
      c->round = json_u64(c->body, "\"round\"");
      json_hex(c->body, "\"session\"", c->session, sizeof(c->session));
      c->op = OP_HEARTBEAT;
      snprintf(target, sizeof(target), "/v1/runs/soak-%u/heartbeat", c->idx);
      snprintf(body, sizeof(body), "{\"node_id\":\"n%u\"}", c->idx);
      send_req(c, "POST", target, "application/json", body);
      return OP_HEARTBEAT;
    }
    break;
  case OP_HEARTBEAT:
    ok = status == 200;
    if (ok) {
      c->op = OP_RWATCH;
      snprintf(target, sizeof(target),
               "/v1/runs/soak-%u/watch?node_id=n%u&round=%" PRIu64 "&timeout_ms=100", c->idx,
               c->idx, c->round);
      send_req(c, "GET", target, NULL, NULL);
      return OP_RWATCH;
    }
    break;
  case OP_RWATCH:
    ok = status == 200;
    if (ok) {
      c->op = OP_LEAVE;
      snprintf(target, sizeof(target), "/v1/runs/soak-%u/leave", c->idx);
      snprintf(body, sizeof(body),
               "{\"node_id\":\"n%u\",\"status\":\"failed\",\"reason\":\"soak\"}", c->idx);
      send_req(c, "POST", target, "application/json", body);
      return OP_LEAVE;
    }
    break;
  case OP_LEAVE:
    ok = status == 200;
    break;
  default:
    break;
  }
  if (!ok)
    error_at(c, "unexpected answer", status);
  return next;
}

static int on_body(llhttp_t *p, const char *at, size_t len)
{
  struct client *c = p->data;
  size_t room = sizeof(c->body) - 1 - c->body_len;
  if (len > room)
    len = room;
  memcpy(c->body + c->body_len, at, len);
  c->body_len += len;
  c->body[c->body_len] = '\0';
  return 0;
}

static int on_message_complete(llhttp_t *p)
{
  struct client *c = p->data;
  struct soak *s = c->s;
  uint64_t lat = now_ns() - c->sent_ns;
  s->requests++;
  s->by_op[c->op]++;
  s->lat_sum_ns += lat;
  if (lat > s->lat_max_ns)
    s->lat_max_ns = lat;
  c->busy = 0;
  if (check_answer(c, p->status_code) == OP_COUNT)
    schedule_next(c, 0);
  return 0;
}

static llhttp_settings_t settings;

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
  static char rbuf[65536];
  (void)h;
  (void)hint;
  buf->base = rbuf;
  buf->len = sizeof(rbuf);
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
  struct client *c = st->data;
  if (n == 0)
    return;
  if (n < 0) {
    if (!c->s->stopping)
      error_at(c, "connection lost", (int)n);
    c->connected = 0;
    uv_read_stop(st);
    return;
  }
  llhttp_errno_t e = llhttp_execute(&c->parser, buf->base, (size_t)n);
  if (e != HPE_OK) {
    error_at(c, llhttp_errno_name(e), 0);
    llhttp_init(&c->parser, HTTP_RESPONSE, &settings);
    c->parser.data = c;
  }
}

static void on_timer(uv_timer_t *t)
{
  struct client *c = t->data;
  if (c->s->stopping || !c->connected || c->busy)
    return;
  start_op(c);
}

static void schedule_next(struct client *c, int immediate)
{
  struct soak *s = c->s;
  if (s->stopping)
    return;
  uint64_t delay = immediate ? 0 : (uint64_t)(s->think_ms / 2 + rnd(s, (uint32_t)s->think_ms + 1));
  uv_timer_start(&c->timer, on_timer, delay, 0);
}

static void on_connect(uv_connect_t *req, int status)
{
  struct client *c = req->data;
  if (status < 0) {
    error_at(c, "connect failed", status);
    return;
  }
  c->connected = 1;
  uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
  schedule_next(c, 0);
}

static void on_closed(uv_handle_t *h)
{
  (void)h;
}

static void stop_all(struct soak *s)
{
  s->stopping = 1;
  uv_timer_stop(&s->sampler);
  uv_close((uv_handle_t *)&s->sampler, on_closed);
  for (long i = 0; i < s->nclients; i++) {
    struct client *c = &s->clients[i];
    uv_timer_stop(&c->timer);
    uv_close((uv_handle_t *)&c->timer, on_closed);
    uv_close((uv_handle_t *)&c->tcp, on_closed);
  }
}

static void on_sample(uv_timer_t *t)
{
  struct soak *s = t->data;
  uint64_t el = now_ns() - s->t0_ns;
  long rss = read_rss_kb(s->pid);
  if (rss < 0) {
    fprintf(stderr, "soak: musterd (pid %ld) is gone\n", s->pid);
    s->errors++;
    stop_all(s);
    return;
  }
  if (rss > s->rss_max)
    s->rss_max = rss;
  if (!s->started && el >= (uint64_t)s->warmup_s * 1000000000ull) {
    s->started = 1;
    s->rss_start = s->rss_min = rss;
    s->next_sample_ns = el + (uint64_t)s->sample_s * 1000000000ull;
    printf("soak: t=%" PRIu64 "s rss_kb=%ld (start) requests=%" PRIu64 " errors=%" PRIu64 "\n",
           el / UINT64_C(1000000000), rss, s->requests, s->errors);
    fflush(stdout);
  } else if (s->started && el >= s->next_sample_ns) {
    s->next_sample_ns += (uint64_t)s->sample_s * 1000000000ull;
    if (rss < s->rss_min)
      s->rss_min = rss;
    printf("soak: t=%" PRIu64 "s rss_kb=%ld requests=%" PRIu64 " errors=%" PRIu64 "\n",
           el / UINT64_C(1000000000), rss, s->requests, s->errors);
    fflush(stdout);
  }
  if (el >= (uint64_t)s->seconds * 1000000000ull) {
    s->rss_end = rss;
    if (!s->started)
      s->rss_start = rss;
    stop_all(s);
  }
}

int main(int argc, char **argv)
{
  long port = 0, pid = 0, clients = 1000, seconds = 600, think = 200, sample = 60, warmup = 10;
  long growth = 10;
  const char *token = NULL;
  struct mu_opt opts[] = {
      MU_OPT_INT('p', "port", &port, "PORT", "musterd's port on 127.0.0.1 (required)"),
      MU_OPT_INT(0, "pid", &pid, "PID", "musterd's pid, for VmRSS (required)"),
      MU_OPT_INT('c', "clients", &clients, "N", "connections, each one client (default 1000)"),
      MU_OPT_INT('s', "seconds", &seconds, "N", "how long to run (default 600)"),
      MU_OPT_INT(0, "think-ms", &think, "MS", "mean pause between a client's ops (default 200)"),
      MU_OPT_INT(0, "sample-seconds", &sample, "N", "RSS sample period (default 60)"),
      MU_OPT_INT(0, "warmup-seconds", &warmup, "N", "when the start RSS is taken (default 10)"),
      MU_OPT_INT(0, "max-growth-pct", &growth, "PCT",
                 "fail when end RSS exceeds start by more (default 10)"),
      MU_OPT_STRING(0, "token", &token, "TOKEN", "send Authorization: Bearer TOKEN"),
      MU_OPT_END(),
  };
  int n = mu_opts_parse(opts, argc, argv, 0, "soak --port P --pid PID [options]");
  if (n == MU_OPTS_HELP)
    return 0;
  if (n < 0 || n < argc)
    return 2;
  if (port <= 0 || port > 65535 || pid <= 0) {
    fprintf(stderr, "soak: --port and --pid are required (musterd's port and pid)\n");
    return 2;
  }
  if (clients < 1 || clients > 60000 || seconds < 1 || think < 1 || sample < 1 || warmup < 0 ||
      warmup >= seconds) {
    fprintf(stderr, "soak: need 1 <= --clients <= 60000, --seconds >= 1, --think-ms >= 1, "
                    "--sample-seconds >= 1 and 0 <= --warmup-seconds < --seconds\n");
    return 2;
  }
  if (token != NULL && strlen(token) > 500) {
    fprintf(stderr, "soak: --token is over 500 characters\n");
    return 2;
  }
  if (read_rss_kb(pid) < 0) {
    fprintf(stderr, "soak: cannot read /proc/%ld/status: is --pid musterd's pid?\n", pid);
    return 2;
  }

  struct soak s;
  memset(&s, 0, sizeof(s));
  s.loop = uv_default_loop();
  s.nclients = clients;
  s.seconds = seconds;
  s.think_ms = think;
  s.sample_s = sample;
  s.warmup_s = warmup;
  s.max_growth = growth;
  s.pid = pid;
  s.token = token;
  s.rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
  uv_ip4_addr("127.0.0.1", (int)port, &s.dst);
  llhttp_settings_init(&settings);
  settings.on_body = on_body;
  settings.on_message_complete = on_message_complete;
  s.clients = mu_calloc((size_t)clients, sizeof(*s.clients));
  s.t0_ns = now_ns();
  for (long i = 0; i < clients; i++) {
    struct client *c = &s.clients[i];
    c->s = &s;
    c->idx = (uint32_t)i;
    uv_tcp_init(s.loop, &c->tcp);
    c->tcp.data = c;
    uv_timer_init(s.loop, &c->timer);
    c->timer.data = c;
    llhttp_init(&c->parser, HTTP_RESPONSE, &settings);
    c->parser.data = c;
    c->creq.data = c;
    int rc = uv_tcp_connect(&c->creq, &c->tcp, (const struct sockaddr *)&s.dst, on_connect);
    if (rc != 0)
      error_at(c, uv_strerror(rc), 0);
  }
  uv_timer_init(s.loop, &s.sampler);
  s.sampler.data = &s;
  uv_timer_start(&s.sampler, on_sample, 1000, 1000);
  uv_run(s.loop, UV_RUN_DEFAULT);

  double secs = (double)(now_ns() - s.t0_ns) / 1e9;
  double growth_pct =
      s.rss_start > 0 ? 100.0 * (double)(s.rss_end - s.rss_start) / (double)s.rss_start : 0.0;
  printf("soak: seconds=%.0f clients=%ld requests=%" PRIu64 " (%.0f/s) errors=%" PRIu64
         " rss_start_kb=%ld rss_end_kb=%ld rss_max_kb=%ld growth=%.1f%% mean_ms=%.2f max_ms=%.1f"
         " ops:",
         secs, clients, s.requests, (double)s.requests / secs, s.errors, s.rss_start, s.rss_end,
         s.rss_max, growth_pct, s.requests ? (double)s.lat_sum_ns / (double)s.requests / 1e6 : 0.0,
         (double)s.lat_max_ns / 1e6);
  for (int i = 0; i < OP_COUNT; i++)
    printf(" %s=%" PRIu64, op_names[i], s.by_op[i]);
  printf("\n");
  mu_free(s.clients);
  uv_loop_close(s.loop);
  if (s.errors > 0)
    return 1;
  if (growth_pct > (double)growth) {
    fprintf(stderr, "soak: RSS grew %.1f%% (> %ld%%)\n", growth_pct, growth);
    return 1;
  }
  return 0;
}
