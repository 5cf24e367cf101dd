/* rdzv_load: a libuv load generator for musterd's native rendezvous (/v1).
 *
 *   rdzv_load join --port P --nodes N [--conns C]
 *     N nodes join one run (min = max = N) over N connections, all at once; prints the time
 *     from the last join written to the last answer read (the round-close latency).
 *   rdzv_load heartbeat --port P --members M [--run-size S] [--conns C] [--duration D]
 *                       [--pid MUSTERD_PID]
 *     M members join runs of S nodes each, then every member heart-beats once a second, spread
 *     evenly over C keep-alive connections; prints heartbeats/s, latency and musterd's CPU use
 *     (from /proc/PID/stat) over D seconds.
 *   rdzv_load node --port P --members M [--run-size S] [--watch-ms W] [--lease-ms L]
 *                  [--duration D] [--pid MUSTERD_PID]
 *     a node as muster agent runs it: M members (one connection each) join runs with
 *     lease_ttl_ms L, then each keeps one watch long poll open (timeout W > L), re-armed as soon
 *     as it is answered. The open watch holds the member's lease, so no heartbeat is sent (a
 *     node heart-beats at L/3 only while it has no watch open): any lease expiry breaks the
 *     round and counts as an error. Prints musterd's CPU use over D seconds, projected to
 *     100,000 members.
 *
 * Client sockets are spread over 127.0.0.x source addresses (--per-addr per address), so the
 * ephemeral port range of one source address never runs out.
 * Prints one summary line; exits 1 when a request failed or the goal was missed.
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

enum { K_NONE = 0, K_JOIN, K_HB, K_WATCH };

struct conn {
  uv_tcp_t tcp;
  uv_connect_t creq;
  llhttp_t parser;
  struct bench *b;
  uint32_t idx;
  int connected, busy, kind;
  int outstanding; /* requests written and not yet answered */
  uint64_t sent_ns;
  uint32_t member; /* member of the outstanding request */
  double due;      /* heartbeats owed (fractional accumulation) */
  uint32_t cursor; /* next of its members to heart-beat */
  uint32_t nmembers;
  uint64_t round;  /* node mode: the round its join got */
  char body[2048]; /* start of the response body */
  size_t blen;
};

/* One write in flight. Each write has its own request: the answer to a request can be read
 * before libuv has run the write callback of that request, so a per-connection uv_write_t
 * could be reused while still queued. */
struct wr {
  uv_write_t req;
  struct conn *c;
  int kind;
  char data[];
};

struct bench {
  uv_loop_t *loop;
  struct sockaddr_in dst;
  const char *mode;
  long nodes, members, run_size, nconns, duration, per_addr, pid, warmup, pipeline;
  char run_prefix[64];
  struct conn *conns;
  char (*sessions)[40]; /* each member's rendezvous session (its join answer's; X-Muster-Session) */
  long nsessions;
  long connecting, connected, next_connect, connect_failed;
  uint64_t t0, t_connected, t_last_join_written, t_done;
  long joins_sent, joins_written, joins_ok, errors, first_error_status;
  char first_error[256];
  /* heartbeat mode */
  long runs, run_cur, run_ok;
  uv_timer_t tick, stop;
  uint64_t ticks;
  int measuring, finished;
  uint64_t hb_ok, hb_sent, hb_late;
  long watch_ms, lease_ms, node_mode;
  uint64_t watches_ok;
  uint64_t lat_hist[1001]; /* ms buckets, last = >= 1000 */
  uint64_t cpu0, cpu1, meas_t0, meas_t1;
};

static uint64_t now_ns(void)
{
  return uv_hrtime();
}

static void die(const char *what, int rc)
{
  fprintf(stderr, "rdzv_load: %s: %s\n", what, rc < 0 ? uv_strerror(rc) : "failed");
  exit(1);
}

static uint64_t proc_cpu_ticks(long pid)
{
  char path[64], buf[1024];
  snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return 0;
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  char *p = strrchr(buf, ')');
  if (p == NULL)
    return 0;
  /* Fields after ')': state(3) ... utime(14) stime(15). */
  unsigned long long ut = 0, st = 0;
  int field = 2;
  for (char *s = p + 1; *s && field < 15; s++) {
    if (*s == ' ') {
      field++;
      if (field == 14)
        ut = strtoull(s + 1, NULL, 10);
      else if (field == 15)
        st = strtoull(s + 1, NULL, 10);
    }
  }
  return ut + st;
}

/* -- requests -------------------------------------------------------------------------------- */

static void send_next(struct conn *c);
static void on_write(uv_write_t *w, int status);

static void send_bytes(struct conn *c, struct wr *w, size_t len, int kind)
{
  w->c = c;
  w->kind = kind;
  c->busy = 1;
  if (c->outstanding == 0)
    c->outstanding = 1;
  c->kind = kind;
  c->sent_ns = now_ns();
  uv_buf_t buf = uv_buf_init(w->data, (unsigned)len);
  int rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, &buf, 1, on_write);
  if (rc != 0)
    die("write", rc);
}

static void send_post(struct conn *c, const char *path, const char *body, int kind)
{
  size_t blen = strlen(body);
  size_t cap = strlen(path) + blen + 160;
  struct wr *w = mu_malloc(sizeof(*w) + cap);
  char *req = w->data;
  int n = snprintf(req, cap,
                   "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                   "Content-Length: %zu\r\n\r\n%s",
                   path, blen, body);
  send_bytes(c, w, (size_t)n, kind);
}

static void send_join(struct conn *c, long run, long node, long nnodes)
{
  struct bench *b = c->b;
  char path[160], body[512];
  snprintf(path, sizeof(path), "/v1/runs/%s-%ld/join", b->run_prefix, run);
  snprintf(body, sizeof(body),
           "{\"node_id\":\"m-%ld\",\"addr\":\"127.0.0.1\",\"local_world_size\":8,"
           "\"master_port\":29500,\"min_nodes\":%ld,\"max_nodes\":%ld,\"members\":false,"
           "\"join_timeout_ms\":120000,\"lease_ttl_ms\":%ld}",
           node, nnodes, nnodes, b->node_mode ? b->lease_ms : 60000L);
  c->member = (uint32_t)node;
  b->joins_sent++;
  send_post(c, path, body, K_JOIN);
  /* uv_write() writes at once when the socket has room (always, for a small request on a
   * fresh connection): this is when the last join left. */
  b->t_last_join_written = now_ns();
}

/* The session member `m`'s join answer gave ("" before it). */
static const char *session_of(const struct bench *b, uint32_t m)
{
  return (long)m < b->nsessions ? b->sessions[m] : "";
}

/* Keeps the session of the join answer in c->body for member c->member. */
static void keep_session(struct bench *b, const struct conn *c)
{
  const char *p = strstr(c->body, "\"session\":\"");
  if (p == NULL || (long)c->member >= b->nsessions)
    return;
  p += 11;
  size_t k = 0;
  while (k + 1 < sizeof(b->sessions[0]) && isxdigit((unsigned char)p[k]))
    k++;
  memcpy(b->sessions[c->member], p, k);
  b->sessions[c->member][k] = '\0';
}

/* Writes `k` heartbeats (for the connection's next k members) in one write: pipelined
 * requests, as a proxy batching its nodes would send them. */
static void send_heartbeats(struct conn *c, int k)
{
  struct bench *b = c->b;
  size_t cap = (size_t)k * 320;
  struct wr *w = mu_malloc(sizeof(*w) + cap);
  char *req = w->data;
  size_t len = 0;
  for (int i = 0; i < k; i++) {
    uint32_t m = c->idx + c->cursor * (uint32_t)b->nconns;
    c->cursor = (c->cursor + 1) % c->nmembers;
    char body[64];
    int blen = snprintf(body, sizeof(body), "{\"node_id\":\"m-%" PRIu32 "\"}", m);
    len += (size_t)snprintf(req + len, cap - len,
                            "POST /v1/runs/%s-%ld/heartbeat HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                            "X-Muster-Session: %s\r\n"
                            "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
                            b->run_prefix, (long)m / b->run_size, session_of(b, m), blen, body);
  }
  if (b->measuring)
    b->hb_sent += (uint64_t)k;
  c->outstanding = k;
  send_bytes(c, w, len, K_HB);
}

/* Node mode: the member's watch long poll on its round (keep-alive, held open W ms). */
static void send_watch(struct conn *c)
{
  struct bench *b = c->b;
  struct wr *w = mu_malloc(sizeof(*w) + 512);
  int n = snprintf(w->data, 512,
                   "GET /v1/runs/%s-%ld/watch?node_id=m-%" PRIu32 "&round=%" PRIu64
                   "&timeout_ms=%ld HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Muster-Session: %s\r\n\r\n",
                   b->run_prefix, (long)c->member / b->run_size, c->member, c->round, b->watch_ms,
                   session_of(b, c->member));
  send_bytes(c, w, (size_t)n, K_WATCH);
}

static void on_write(uv_write_t *w, int status)
{
  struct wr *x = (struct wr *)w;
  struct bench *b = x->c->b;
  int kind = x->kind;
  mu_free(x);
  if (status != 0)
    die("write", status);
  if (kind == K_JOIN) {
    b->joins_written++;
  }
}

static void record_error(struct bench *b, int status, const char *what)
{
  b->errors++;
  if (b->first_error[0] == '\0') {
    b->first_error_status = status;
    snprintf(b->first_error, sizeof(b->first_error), "%s", what);
  }
}

static void start_run(struct bench *b);
static void start_heartbeats(struct bench *b);

/* One response finished on `c`. */
static void on_response(struct conn *c, int status)
{
  struct bench *b = c->b;
  uint64_t t = now_ns();
  if (--c->outstanding > 0 && c->kind == K_HB) {
    /* more pipelined answers to come on this connection */
  } else {
    c->outstanding = 0;
    c->busy = 0;
  }
  if (c->kind == K_JOIN) {
    if (status != 200) {
      record_error(b, status, "join");
    } else {
      b->joins_ok++;
      b->run_ok++;
      keep_session(b, c);
      const char *r = strstr(c->body, "\"round\":");
      c->round = r ? strtoull(r + 8, NULL, 10) : 0;
    }
    if (strcmp(b->mode, "join") == 0) {
      if (b->joins_ok + b->errors == b->nodes) {
        b->t_done = t;
        uv_stop(b->loop);
      }
    } else if (b->run_ok + b->errors >= b->run_size * (b->run_cur + 1) ||
               b->run_ok + b->errors >= b->members) {
      b->run_cur++;
      if (b->run_cur < b->runs)
        start_run(b);
      else
        start_heartbeats(b);
    }
    return;
  }
  if (c->kind == K_WATCH) {
    /* only "none" (the timeout) is expected: any event means a lease expired or a round broke */
    if (status != 200 || strstr(c->body, "\"event\":\"none\"") == NULL) {
      char what[256];
      snprintf(what, sizeof(what), "watch of m-%" PRIu32 ": %d %.180s", c->member, status, c->body);
      record_error(b, status, what);
      return;
    }
    if (b->measuring)
      b->watches_ok++;
    if (!b->finished)
      send_watch(c);
    return;
  }
  if (c->kind == K_HB && b->measuring) {
    if (status != 200) {
      record_error(b, status, "heartbeat");
    } else {
      b->hb_ok++;
      uint64_t ms = (t - c->sent_ns) / 1000000;
      b->lat_hist[ms > 1000 ? 1000 : ms]++;
    }
  }
  if (!b->finished && !c->busy)
    send_next(c);
}

static int on_message_begin(llhttp_t *p)
{
  struct conn *c = p->data;
  c->blen = 0;
  c->body[0] = '\0';
  return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t len)
{
  struct conn *c = p->data;
  size_t room = sizeof(c->body) - 1 - c->blen;
  if (len > room)
    len = room;
  memcpy(c->body + c->blen, at, len);
  c->blen += len;
  c->body[c->blen] = '\0';
  return 0;
}

static int on_message_complete(llhttp_t *p)
{
  struct conn *c = p->data;
  on_response(c, (int)p->status_code);
  return 0;
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
  (void)h;
  (void)hint;
  static char slab[65536]; /* one loop thread: reads never overlap */
  *buf = uv_buf_init(slab, sizeof(slab));
}

static llhttp_settings_t settings;

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
  struct conn *c = (struct conn *)s;
  if (n < 0) {
    if (!c->b->finished) {
      char what[128];
      snprintf(what, sizeof(what), "connection %u: %s (busy=%d kind=%d)", c->idx,
               n == UV_EOF ? "closed by the server" : uv_strerror((int)n), c->busy, c->kind);
      record_error(c->b, 0, what);
      c->nmembers = 0; /* dead: no more heartbeats on it */
      if (strcmp(c->b->mode, "join") == 0)
        uv_stop(c->b->loop);
    }
    uv_read_stop(s);
    return;
  }
  if (n == 0)
    return;
  llhttp_errno_t e = llhttp_execute(&c->parser, buf->base, (size_t)n);
  if (e != HPE_OK) {
    record_error(c->b, 0, llhttp_errno_name(e));
    uv_stop(c->b->loop);
  }
}

/* -- connections ----------------------------------------------------------------------------- */

static void connect_more(struct bench *b);
static void all_connected(struct bench *b);

static void on_connect(uv_connect_t *req, int status)
{
  struct conn *c = req->data;
  struct bench *b = c->b;
  b->connecting--;
  if (status != 0) {
    fprintf(stderr, "rdzv_load: connect %u: %s\n", c->idx, uv_strerror(status));
    exit(1);
  }
  c->connected = 1;
  b->connected++;
  uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
  if (b->connected == b->nconns)
    all_connected(b);
  else
    connect_more(b);
}

static void connect_more(struct bench *b)
{
  while (b->next_connect < b->nconns && b->connecting < 256) {
    struct conn *c = &b->conns[b->next_connect];
    c->idx = (uint32_t)b->next_connect;
    c->b = b;
    int rc = uv_tcp_init_ex(b->loop, &c->tcp, AF_INET);
    if (rc != 0)
      die("socket", rc);
    uv_tcp_nodelay(&c->tcp, 1);
    if (b->nconns > b->per_addr) {
      /* Past one address's ephemeral ports: bind a 127.0.0.x source, with the port chosen at
       * connect time (IP_BIND_ADDRESS_NO_PORT), which keeps bind() O(1). */
      uv_os_fd_t fd;
      int one = 1;
      uv_fileno((uv_handle_t *)&c->tcp, &fd);
      setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
      struct sockaddr_in src;
      char ip[32];
      long a = 1 + b->next_connect / b->per_addr;
      snprintf(ip, sizeof(ip), "127.0.%ld.%ld", a / 254, 1 + a % 254);
      uv_ip4_addr(ip, 0, &src);
      rc = uv_tcp_bind(&c->tcp, (const struct sockaddr *)&src, 0);
      if (rc != 0)
        die("bind source address", rc);
    }
    llhttp_init(&c->parser, HTTP_RESPONSE, &settings);
    c->parser.data = c;
    c->creq.data = c;
    rc = uv_tcp_connect(&c->creq, &c->tcp, (const struct sockaddr *)&b->dst, on_connect);
    if (rc != 0)
      die("connect", rc);
    b->connecting++;
    b->next_connect++;
  }
}

/* -- join mode ------------------------------------------------------------------------------- */

static void all_connected(struct bench *b)
{
  b->t_connected = now_ns();
  if (strcmp(b->mode, "join") == 0) {
    for (long i = 0; i < b->nodes; i++)
      send_join(&b->conns[i], 0, i, b->nodes);
    return;
  }
  start_run(b);
}

/* -- heartbeat mode -------------------------------------------------------------------------- */

static void start_run(struct bench *b)
{
  long first = b->run_cur * b->run_size;
  long n = b->run_size;
  if (first + n > b->members)
    n = b->members - first;
  for (long i = 0; i < n; i++)
    send_join(&b->conns[b->node_mode ? first + i : i], b->run_cur, first + i, n);
}

static void send_next(struct conn *c)
{
  if (c->busy || c->due < 1.0 || c->nmembers == 0)
    return;
  int k = (int)c->due;
  if (k > c->b->pipeline)
    k = (int)c->b->pipeline;
  c->due -= k;
  send_heartbeats(c, k);
}

static void on_tick(uv_timer_t *t)
{
  struct bench *b = t->data;
  b->ticks++;
  for (long i = 0; i < b->nconns; i++) {
    struct conn *c = &b->conns[i];
    c->due += c->nmembers / 100.0; /* a tick is 10 ms: each member once a second */
    if (c->due > c->nmembers + 1.0) {
      if (b->measuring)
        b->hb_late += (uint64_t)(c->due - c->nmembers);
      c->due = c->nmembers;
    }
    send_next(c);
  }
  if (b->ticks == (uint64_t)b->warmup * 100) {
    b->measuring = 1;
    b->meas_t0 = now_ns();
    b->cpu0 = b->pid ? proc_cpu_ticks(b->pid) : 0;
  }
  if (b->ticks == (uint64_t)(b->warmup + b->duration) * 100) {
    b->meas_t1 = now_ns();
    b->cpu1 = b->pid ? proc_cpu_ticks(b->pid) : 0;
    b->measuring = 0;
    b->finished = 1;
    uv_stop(b->loop);
  }
}

static void start_heartbeats(struct bench *b)
{
  b->t_done = now_ns();
  if (b->node_mode) {
    /* every member parks its watch; no heartbeats (the watches hold the leases) */
    for (long i = 0; i < b->nconns; i++)
      send_watch(&b->conns[i]);
    uv_timer_init(b->loop, &b->tick);
    b->tick.data = b;
    uv_timer_start(&b->tick, on_tick, 10, 10);
    return;
  }
  for (long i = 0; i < b->nconns; i++) {
    struct conn *c = &b->conns[i];
    c->nmembers = (uint32_t)(b->members / b->nconns + (i < b->members % b->nconns ? 1 : 0));
    c->due = (double)(i % 100) / 100.0; /* spread the phase */
  }
  uv_timer_init(b->loop, &b->tick);
  b->tick.data = b;
  uv_timer_start(&b->tick, on_tick, 10, 10);
}

static double percentile(const struct bench *b, double q)
{
  uint64_t total = 0, acc = 0;
  for (int i = 0; i <= 1000; i++)
    total += b->lat_hist[i];
  if (total == 0)
    return 0;
  for (int i = 0; i <= 1000; i++) {
    acc += b->lat_hist[i];
    if ((double)acc >= q * (double)total)
      return i;
  }
  return 1000;
}

int main(int argc, char **argv)
{
  struct bench b;
  const char *host = "127.0.0.1";
  long port = 0, goal_ms = -1;
  double goal_cpu = 50.0;
  memset(&b, 0, sizeof(b));
  b.nodes = 1000;
  b.members = 100000;
  b.run_size = 0;
  b.nconns = 0;
  b.duration = 10;
  b.warmup = 2;
  b.per_addr = 20000;
  b.pipeline = 1;
  struct mu_opt opts[] = {
      MU_OPT_STRING(0, "host", &host, "IP", "musterd address (127.0.0.1)"),
      MU_OPT_INT('p', "port", &port, "PORT", "musterd port (required)"),
      MU_OPT_INT('n', "nodes", &b.nodes, "N", "join: nodes joining one run (1000)"),
      MU_OPT_INT('m', "members", &b.members, "M", "heartbeat: members (100000)"),
      MU_OPT_INT(0, "run-size", &b.run_size, "S", "heartbeat: members per run (min(M, conns))"),
      MU_OPT_INT('c', "conns", &b.nconns, "C", "connections (join: N; heartbeat: min(M, 8000))"),
      MU_OPT_INT('d', "duration", &b.duration, "SECONDS", "heartbeat: measured seconds (10)"),
      MU_OPT_INT(0, "warmup", &b.warmup, "SECONDS", "heartbeat: seconds before measuring (2)"),
      MU_OPT_INT(0, "pipeline", &b.pipeline, "K",
                 "heartbeat: up to K heartbeats per write on a connection (1)"),
      MU_OPT_INT(0, "watch-ms", &b.watch_ms, "W", "node: watch long-poll timeout (10000)"),
      MU_OPT_INT(0, "lease-ms", &b.lease_ms, "L", "node: the runs' lease_ttl_ms (3000)"),
      MU_OPT_INT(0, "per-addr", &b.per_addr, "K", "connections per 127.0.0.x source (20000)"),
      MU_OPT_INT(0, "pid", &b.pid, "PID", "musterd's pid, to report its CPU use"),
      MU_OPT_INT(0, "goal-ms", &goal_ms, "MS",
                 "join: the close latency goal (100 for N <= 1000, else 1000)"),
      MU_OPT_DOUBLE(0, "goal-cpu", &goal_cpu, "PCT", "heartbeat: musterd CPU goal (50)"),
      MU_OPT_END(),
  };
  const char *usage = "rdzv_load join|heartbeat|node --port P [options]";
  mu_log_setup("rdzv_load", MU_LOG_WARN);
  b.watch_ms = 10000;
  b.lease_ms = 3000;
  if (argc < 2 || (strcmp(argv[1], "join") != 0 && strcmp(argv[1], "heartbeat") != 0 &&
                   strcmp(argv[1], "node") != 0)) {
    mu_opts_usage(stderr, opts, usage);
    return 2;
  }
  b.mode = argv[1];
  int n = mu_opts_parse(opts, argc - 1, argv + 1, 0, usage);
  if (n == MU_OPTS_HELP)
    return 0;
  if (n < 0)
    return 2;
  if (port <= 0 || port > 65535 || b.nodes < 1 || b.members < 1 || b.duration < 1 ||
      b.per_addr < 1 || b.nconns < 0 || b.run_size < 0 || b.pipeline < 1 || b.pipeline > 1000) {
    mu_error("need --port and positive counts (see --help)");
    return 2;
  }
  int join = strcmp(b.mode, "join") == 0;
  b.node_mode = strcmp(b.mode, "node") == 0;
  if (b.node_mode && (b.watch_ms < 1 || b.lease_ms < 1)) {
    mu_error("--watch-ms and --lease-ms must be positive");
    return 2;
  }
  if (b.node_mode) {
    b.nconns = b.members; /* one connection per member: its watch */
    if (b.run_size == 0 || b.run_size > b.members)
      b.run_size = b.members < 1000 ? b.members : 1000;
    b.runs = (b.members + b.run_size - 1) / b.run_size;
  } else if (join) {
    b.nconns = b.nodes;
  } else {
    if (b.nconns == 0)
      b.nconns = b.members < 8000 ? b.members : 8000;
    if (b.nconns > b.members)
      b.nconns = b.members;
    if (b.run_size == 0 || b.run_size > b.nconns)
      b.run_size = b.nconns;
    b.runs = (b.members + b.run_size - 1) / b.run_size;
  }
  if (goal_ms < 0)
    goal_ms = b.nodes <= 1000 ? 100 : 1000;
  snprintf(b.run_prefix, sizeof(b.run_prefix), "load-%ld-%s", (long)getpid(), b.mode);
  llhttp_settings_init(&settings);
  settings.on_message_complete = on_message_complete;
  settings.on_message_begin = on_message_begin;
  settings.on_body = on_body;
  b.loop = uv_default_loop();
  if (uv_ip4_addr(host, (int)port, &b.dst) != 0) {
    mu_error("bad --host '%s'", host);
    return 2;
  }
  b.conns = mu_calloc((size_t)b.nconns, sizeof(*b.conns));
  b.nsessions = b.members > b.nodes ? b.members : b.nodes;
  b.sessions = mu_calloc((size_t)(b.nsessions > 0 ? b.nsessions : 1), sizeof(*b.sessions));
  b.t0 = now_ns();
  connect_more(&b);
  uv_run(b.loop, UV_RUN_DEFAULT);

  int ok = b.errors == 0;
  if (join) {
    double close_ms =
        b.t_done > b.t_last_join_written ? (double)(b.t_done - b.t_last_join_written) / 1e6 : 0.0;
    double join_ms = (double)(b.t_done - b.t_connected) / 1e6;
    ok = ok && b.joins_ok == b.nodes && close_ms < (double)goal_ms;
    printf("rdzv_load join nodes=%ld close_ms=%.1f goal_ms=%ld joins_to_answers_ms=%.1f "
           "connect_ms=%.1f ok=%ld errors=%ld%s%s %s\n",
           b.nodes, close_ms, goal_ms, join_ms, (double)(b.t_connected - b.t0) / 1e6, b.joins_ok,
           b.errors, b.errors ? " first_error=" : "", b.errors ? b.first_error : "",
           ok ? "PASS" : "FAIL");
  } else if (b.node_mode) {
    double secs = (double)(b.meas_t1 - b.meas_t0) / 1e9;
    double cpu = -1;
    if (b.pid && secs > 0)
      cpu = 100.0 * (double)(b.cpu1 - b.cpu0) / (double)sysconf(_SC_CLK_TCK) / secs;
    double projected = cpu >= 0 ? cpu * 100000.0 / (double)b.members : -1;
    ok = ok && b.joins_ok == b.members && (projected < 0 || projected < goal_cpu);
    printf("rdzv_load node members=%ld runs=%ld lease_ms=%ld watch_ms=%ld seconds=%.1f "
           "watches_per_s=%.0f heartbeats=0 errors=%ld%s%s%s musterd_cpu_pct=%.2f "
           "projected_cpu_pct_at_100000_members=%.1f goal_cpu_pct=%.0f join_all_ms=%.0f %s\n",
           b.members, b.runs, b.lease_ms, b.watch_ms, secs,
           secs > 0 ? (double)b.watches_ok / secs : 0, b.errors, b.errors ? " first_error='" : "",
           b.errors ? b.first_error : "", b.errors ? "'" : "", cpu, projected, goal_cpu,
           (double)(b.t_done - b.t_connected) / 1e6, ok ? "PASS" : "FAIL");
  } else {
    double secs = (double)(b.meas_t1 - b.meas_t0) / 1e9;
    double cpu = -1;
    if (b.pid && secs > 0)
      cpu = 100.0 * (double)(b.cpu1 - b.cpu0) / (double)sysconf(_SC_CLK_TCK) / secs;
    double rate = secs > 0 ? (double)b.hb_ok / secs : 0;
    /* On a shared machine the generator may fall short of M heartbeats/s: then judge by
     * musterd's cost per heartbeat, projected to M per second. */
    double us_per_hb = cpu >= 0 && rate > 0 ? cpu * 1e4 / rate : -1;
    double projected = us_per_hb >= 0 ? us_per_hb * (double)b.members / 1e4 : -1;
    ok = ok && rate > 0 && (projected < 0 || projected < goal_cpu);
    printf("rdzv_load heartbeat members=%ld runs=%ld conns=%ld pipeline=%ld seconds=%.1f "
           "hb_per_s=%.0f "
           "p50_ms=%.0f p99_ms=%.0f late=%" PRIu64 " errors=%ld%s%s%s musterd_cpu_pct=%.1f "
           "musterd_us_per_hb=%.1f projected_cpu_pct_at_%ld_per_s=%.1f goal_cpu_pct=%.0f "
           "join_all_ms=%.0f %s\n",
           b.members, b.runs, b.nconns, b.pipeline, secs, rate, percentile(&b, 0.5),
           percentile(&b, 0.99), b.hb_late, b.errors, b.errors ? " first_error='" : "",
           b.errors ? b.first_error : "", b.errors ? "'" : "", cpu, us_per_hb, b.members, projected,
           goal_cpu, (double)(b.t_done - b.t_connected) / 1e6, ok ? "PASS" : "FAIL");
  }
  fflush(stdout);
  return ok ? 0 : 1;
}
