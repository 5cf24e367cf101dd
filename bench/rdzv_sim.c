/* rdzv_sim: musterd's rendezvous past this machine's socket limit, by simulation.
 *
 *   rdzv_sim [--lease-ms L] [--lws K] [--mem-share P] [NODES...]   (default 10000 100000 1000000)
 *
 * For each size N, one musterd core (rv_server_new() + the security layer, as musterd builds
 * it, without a listener) on its own loop, and N simulated agents, each with the two
 * connections `muster agent` holds: its main client (join) and its watcher thread's client
 * (heartbeat, watch). The connections are socket-less (rv_server_fake_open()): the request
 * bytes the agent's client writes (common/client.c, common/http_client.c) go through llhttp,
 * the router, the gate and the /v1 handlers exactly as from a socket; the answers come back
 * as the bytes musterd would write. Only the kernel is missing (accept, read, write).
 *
 * The script of one size, as the agent runs it (docs/rendezvous.md, "How muster agent uses it"):
 *   1. join: N nodes join run "sim" (min N-1, max N, lease L); the N-th join closes round 1.
 *   2. keep-alive: each node's watcher opens its connection, heart-beats once and parks a watch
 *      (timeout 3 L); the watches time out ("none") and are re-armed: one keep-alive cycle.
 *   3. failure: one node's process dies (both connections close); its lease expires L later,
 *      round 1 breaks, the N-1 watches answer "broken"; each watcher closes, each node re-joins,
 *      and the last re-join closes round 2 (every surviving member is back: no last call).
 * Measured: server time per node for join, heartbeat and one keep-alive cycle; memory per node
 * (RSS above the empty server, and jemalloc's allocated bytes when built with it); the time from
 * the last join to the round closed (every answer written); the re-rendezvous time from the
 * lease expiry to round 2 closed; the bytes of each request and answer. Times are the CPU time
 * of the server's work (requests are formatted before, and answers checked after, the timed
 * part): musterd is one thread, so on a core of its own that is its latency, while wall clock on
 * this shared machine measures the neighbours too (it is printed beside the two latencies).
 * Prints one summary line per size, a wire line, and a verdict line per goal: per-node time
 * and memory flat across the sizes (max/min <= 2), a 100,000-node round closed < 1 s after the
 * last join, a re-rendezvous at 100,000 nodes < 2 s. Exits 1 when a goal is missed or an answer
 * was wrong, 2 on a usage error. Not a test.
 */
#define _GNU_SOURCE /* memmem */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>

#ifdef MU_USE_JEMALLOC
#include <jemalloc/jemalloc.h>
#endif

#include "alloc.h"
#include "buf.h"
#include "http.h"
#include "log.h"
#include "opts.h"
#include "rdzv.h"
#include "security.h"
#include "v1.h"

#define RUN "sim"
#define HOST_HDR "Host: musterd-0:29400\r\nUser-Agent: muster/" MU_VERSION "\r\nAccept: */*\r\n"
#define BATCH 4096 /* requests between two checks of the answers */
#define MAX_SIZES 8

struct node {
  struct rv_conn *main;  /* the agent's client: join */
  struct rv_conn *watch; /* the watcher thread's client: heartbeat, watch */
};

/* What one size measured. */
struct result {
  long n;
  int ran;
  double join_us, hb_us, arm_us, ka_us; /* server time per node */
  double bytes_rss, bytes_heap;         /* per node; heap < 0 without jemalloc */
  double close_ms, close_cpu_ms;        /* last join -> every answer of round 1 written */
  double rerdzv_ms, rerdzv_srv_ms;
  double broken_ms, rejoin_ms;
  /* its parts: the lease expiry and the broken answers; re-joins */ /* lease expiry -> every
                                                                        answer of round 2
                                                                        written */
  /* wire: average bytes per request and per answer */
  double join_req, join_ans, hb_req, hb_ans, watch_req, watch_ans, broken_ans;
};

struct sim {
  uv_loop_t loop;
  struct rv_server *srv;
  struct node *nodes;
  long n;
  long lease_ms, lws;
  struct mu_buf out;     /* every answer of every connection, in the order written */
  struct mu_buf req;     /* a batch of requests, formatted before they are timed */
  size_t off[BATCH + 1]; /* request k of the batch: req.data[off[k] .. off[k + 1]) */
  long noff;
  long next_none;   /* the next node whose watch will time out */
  double req_bytes; /* every request sent */
  unsigned char *seen_rank;
  int bad; /* answers that were not what the agent expects */
};

/* -- clocks and memory -------------------------------------------------------------------- */

static double wall_ms(void)
{
  return (double)uv_hrtime() / 1e6;
}

static double cpu_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* A field of /proc/self/status or /proc/meminfo, in kB; -1 if absent. */
static long proc_kb(const char *file, const char *field)
{
  FILE *f = fopen(file, "r");
  char line[256];
  long v = -1;
  size_t n = strlen(field);
  while (f != NULL && fgets(line, sizeof(line), f) != NULL)
    if (strncmp(line, field, n) == 0 && line[n] == ':')
      v = strtol(line + n + 1, NULL, 10);
  if (f != NULL)
    fclose(f);
  return v;
}

/* Resident bytes, after handing freed pages back (so that the simulated clients' answers,
 * read and freed, do not count as the server's). */
static double rss_bytes(void)
{
#ifdef MU_USE_JEMALLOC
  char name[64];
  snprintf(name, sizeof(name), "arena.%u.purge", (unsigned)MALLCTL_ARENAS_ALL);
  mallctl(name, NULL, NULL, NULL, 0);
#endif
  return (double)proc_kb("/proc/self/status", "VmRSS") * 1024.0;
}

/* jemalloc's bytes allocated by the program; -1 without jemalloc. */
static double heap_bytes(void)
{
#ifdef MU_USE_JEMALLOC
  uint64_t epoch = 1;
  size_t sz = sizeof(epoch);
  mallctl("epoch", &epoch, &sz, &epoch, sz);
  size_t allocated = 0;
  sz = sizeof(allocated);
  if (mallctl("stats.allocated", &allocated, &sz, NULL, 0) == 0)
    return (double)allocated;
#endif
  return -1;
}

/* Makes room for `n` answers in s->out and touches it, so that a burst of answers (a round
 * closing, a round breaking) is not charged the client's buffer growth and page faults. */
static void out_ready(struct sim *s, long n)
{
  mu_buf_clear(&s->out);
  if (mu_buf_reserve(&s->out, (size_t)n * 400) == 0)
    memset(s->out.data, 0, s->out.cap);
}

/* -- the agent's requests (common/client.c through common/http_client.c) ------------------ */

static void node_id(char *buf, size_t n, long i)
{
  /* as the agent makes them: host name, pid, random suffix */
  snprintf(buf, n, "node%06ld-%05ld-%04lx", i, 1000 + i % 30000, (i * 2654435761u) & 0xffff);
}

static void batch_begin(struct sim *s)
{
  uv_update_time(&s->loop); /* the loop's clock moves between batches, as a server's does */
  mu_buf_clear(&s->req);
  s->noff = 0;
  s->off[0] = 0;
}

static void batch_mark(struct sim *s)
{
  s->off[++s->noff] = s->req.len;
}

static void post(struct sim *s, const char *what, const char *body)
{
  mu_buf_printf(&s->req,
                "POST /v1/runs/" RUN "/%s HTTP/1.1\r\n" HOST_HDR
                "Content-Length: %zu\r\nContent-Type: application/json\r\n\r\n%s",
                what, strlen(body), body);
  batch_mark(s);
}

static void req_join(struct sim *s, long i)
{
  char id[64], body[512];
  node_id(id, sizeof(id), i);
  snprintf(body, sizeof(body),
           "{\"node_id\":\"%s\",\"addr\":\"10.%ld.%ld.%ld\",\"local_world_size\":%ld,"
           "\"master_port\":%ld,\"min_nodes\":%ld,\"max_nodes\":%ld,\"join_timeout_ms\":600000,"
           "\"lease_ttl_ms\":%ld}",
           id, (i >> 16) & 255, (i >> 8) & 255, i & 255, s->lws, 20000 + i % 40000, s->n - 1, s->n,
           s->lease_ms);
  post(s, "join", body);
}

static void req_heartbeat(struct sim *s, long i)
{
  char id[64], body[128];
  node_id(id, sizeof(id), i);
  snprintf(body, sizeof(body), "{\"node_id\":\"%s\"}", id);
  post(s, "heartbeat", body);
}

static void req_watch(struct sim *s, long i, long round)
{
  char id[64];
  node_id(id, sizeof(id), i);
  long t = s->lease_ms > 10000 ? 30000 : s->lease_ms * 3; /* agent_attempt.c watch_timeout_ms */
  mu_buf_printf(&s->req,
                "GET /v1/runs/" RUN
                "/watch?node_id=%s&round=%ld&timeout_ms=%ld HTTP/1.1\r\n" HOST_HDR
                "Content-Length: 0\r\n\r\n",
                id, round, t < 100 ? 100 : t);
  batch_mark(s);
}

/* Sends request k of the batch on connection c. */
static void send_req(struct sim *s, struct rv_conn *c, long k)
{
  size_t len = s->off[k + 1] - s->off[k];
  s->req_bytes += (double)len;
  if (rv_server_fake_send(c, s->req.data + s->off[k], len) != 0) {
    mu_log(MU_LOG_ERROR, "the answer buffer filled up");
    exit(1);
  }
}

/* -- the answers ---------------------------------------------------------------------------- */

/* Checks every answer in s->out: each is a 200 containing `needle` (and for join answers, a
 * node_rank not seen before). With `nones`, a watch answered "none" is counted there instead.
 * Returns: the number of answers (but those in *nones); empties s->out. */
static long check_answers(struct sim *s, const char *needle, int ranks, long *nones)
{
  long count = 0;
  const char *p = s->out.data, *end = s->out.data + s->out.len;
  while (p != NULL && p < end) {
    const char *next = memmem(p + 1, (size_t)(end - p - 1), "HTTP/1.1 ", 9);
    size_t len = (size_t)((next != NULL ? next : end) - p);
    char one[1024];
    snprintf(one, sizeof(one), "%.*s", (int)(len < sizeof(one) ? len : sizeof(one) - 1), p);
    if (nones != NULL && strncmp(one, "HTTP/1.1 200", 12) == 0 &&
        strstr(one, "\"event\":\"none\"") != NULL) {
      (*nones)++;
      p = next;
      continue;
    }
    count++;
    if (strncmp(one, "HTTP/1.1 200", 12) != 0 || strstr(one, needle) == NULL) {
      if (s->bad++ < 3)
        mu_log(MU_LOG_ERROR, "want a 200 with '%s', got:\n%s", needle, one);
    } else if (ranks) {
      const char *r = strstr(one, "\"node_rank\":");
      long rank = r != NULL ? strtol(r + 12, NULL, 10) : -1;
      if (rank < 0 || rank >= s->n || s->seen_rank[rank]) {
        if (s->bad++ < 3)
          mu_log(MU_LOG_ERROR, "node_rank %ld given twice or out of range", rank);
      } else {
        s->seen_rank[rank] = 1;
      }
    }
    p = next;
  }
  mu_buf_clear(&s->out);
  return count;
}

static void expect_count(struct sim *s, const char *what, long got, long want)
{
  if (got != want) {
    s->bad++;
    mu_log(MU_LOG_ERROR, "%s: %ld answers, want %ld", what, got, want);
  }
}

/* Requests that park (joins before the last, watches) must not be answered yet. */
static void expect_parked(struct sim *s, const char *what)
{
  if (s->out.len > 0) {
    s->bad++;
    mu_log(MU_LOG_ERROR, "%s: answered at once (%zu bytes), the first answer:\n%.*s", what,
           s->out.len, (int)(s->out.len < 400 ? s->out.len : 400), s->out.data);
    mu_buf_clear(&s->out);
  }
}

/* Re-arms the watches of the next `count` nodes from s->next_none on (they were answered
 * "none"; a node without a watch connection is skipped); adds the server's CPU time to *cpu. */
static void rearm(struct sim *s, long count, double *cpu)
{
  while (count > 0 && s->next_none < s->n) {
    long ids[BATCH], k = 0;
    batch_begin(s);
    for (; k < BATCH && k < count && s->next_none < s->n; s->next_none++) {
      if (s->nodes[s->next_none].watch == NULL)
        continue;
      ids[k++] = s->next_none;
      req_watch(s, s->next_none, 1);
    }
    double c = cpu_ms();
    for (long i = 0; i < k; i++)
      send_req(s, s->nodes[ids[i]].watch, i);
    *cpu += cpu_ms() - c;
    count -= k;
  }
}

/* Runs the loop until `want` answers containing `needle` came (or 60 s passed); adds the CPU
 * time spent in the loop to *cpu (waiting for a timer costs none). Watches answered "none" are
 * re-armed at once, as the agent's watcher does (their server time goes to *rearm_cpu): the
 * watches were armed in node order a batch at a time (one deadline per batch), so they time out
 * in that order, and the k-th "none" is that of the k-th node from s->next_none on. With
 * `count_none`, the "none" answers are the ones wanted.
 * Returns: the answers counted. */
static long run_until(struct sim *s, const char *needle, long want, long *bytes, double *cpu,
                      double *rearm_cpu, int count_none)
{
  long got = 0;
  double give_up = wall_ms() + 60000;
  while (got < want && wall_ms() < give_up) {
    /* NOWAIT, not ONCE: ONCE would go on to sleep until the next deadline and run it (the
     * leases that the answered watches just restarted), before the agents could re-arm */
    double c = cpu_ms();
    uv_run(&s->loop, UV_RUN_NOWAIT);
    if (s->out.len == 0) {
      /* nothing was due: a server would have slept in epoll_wait, not polled (not counted) */
      usleep(1000);
      continue;
    }
    *cpu += cpu_ms() - c;
    *bytes += (long)s->out.len;
    long nones = 0;
    got += check_answers(s, needle, 0, &nones);
    rearm(s, nones, rearm_cpu);
    if (count_none)
      got += nones;
  }
  return got;
}

/* -- one size ------------------------------------------------------------------------------- */

static void on_closed(void *data)
{
  *(int *)data = 1;
}

static void simulate(struct sim *s, struct result *r)
{
  long n = s->n, bytes = 0;
  char needle[64];
  r->n = n;
  uv_loop_init(&s->loop);
  struct rv_server_config cfg;
  rv_server_config_init(&cfg);
  s->srv = rv_server_new(&s->loop, &cfg);
  /* a million members hold ~350 MB of /v1 state: over the default --v1-max-bytes (128 MiB) */
  struct rdzv_limits lim = {RDZV_BYTES_MAX, 0, 0, 0};
  v1_set_limits(s->srv, &lim);
  struct sec_config sc;
  memset(&sc, 0, sizeof(sc));
  struct sec *sec = NULL;
  struct mu_buf err = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  if (sec_new(&sc, &sec, &err) != 0) {
    mu_log(MU_LOG_ERROR, "%s", mu_buf_str(&err));
    exit(1);
  }
  mu_buf_release(&err);
  sec_attach(s->srv, sec);
  s->nodes = mu_calloc((size_t)n, sizeof(*s->nodes));
  s->seen_rank = mu_calloc((size_t)n, 1);
  memset(s->nodes, 0, (size_t)n * sizeof(*s->nodes)); /* resident before the baseline */
  memset(s->seen_rank, 0, (size_t)n);
  mu_buf_init(&s->out, MU_BUF_UNBOUNDED);
  mu_buf_init(&s->req, (size_t)BATCH * 1024);
  double rss0 = rss_bytes(), heap0 = heap_bytes();

  /* 1. join: the first n-1 park, the n-th closes the round */
  uv_update_time(&s->loop);
  double join_ms = 0;
  s->req_bytes = 0;
  for (long b = 0; b < n - 1; b += BATCH) {
    long e = b + BATCH < n - 1 ? b + BATCH : n - 1;
    batch_begin(s);
    for (long i = b; i < e; i++)
      req_join(s, i);
    double c = cpu_ms();
    for (long i = b; i < e; i++) {
      s->nodes[i].main = rv_server_fake_open(s->srv, &s->out);
      send_req(s, s->nodes[i].main, i - b);
    }
    join_ms += cpu_ms() - c;
    expect_parked(s, "joins before the last");
  }
  batch_begin(s);
  req_join(s, n - 1);
  out_ready(s, n);
  double c2 = cpu_ms(), t2 = wall_ms();
  s->nodes[n - 1].main = rv_server_fake_open(s->srv, &s->out);
  send_req(s, s->nodes[n - 1].main, 0);
  double c3 = cpu_ms(), t3 = wall_ms();
  r->join_us = join_ms * 1e3 / (double)(n - 1);
  r->close_cpu_ms = c3 - c2;
  r->close_ms = t3 - t2;
  r->join_req = s->req_bytes / (double)n;
  r->join_ans = (double)s->out.len / (double)n;
  snprintf(needle, sizeof(needle), "\"round\":1,");
  expect_count(s, "round 1", check_answers(s, needle, 1, NULL), n);
  mu_buf_release(&s->out); /* not the server's memory */

  /* 2. keep-alive: each watcher heart-beats once and parks a watch */
  double hb_ms = 0, arm_ms = 0, hb_bytes = 0, ans_bytes = 0, watch_bytes = 0;
  for (long b = 0; b < n; b += BATCH) {
    long e = b + BATCH < n ? b + BATCH : n;
    batch_begin(s);
    for (long i = b; i < e; i++)
      req_heartbeat(s, i);
    s->req_bytes = 0;
    double c = cpu_ms();
    for (long i = b; i < e; i++) {
      s->nodes[i].watch = rv_server_fake_open(s->srv, &s->out);
      send_req(s, s->nodes[i].watch, i - b);
    }
    hb_ms += cpu_ms() - c;
    hb_bytes += s->req_bytes;
    ans_bytes += (double)s->out.len;
    expect_count(s, "heartbeats", check_answers(s, "\"state\":\"active\"", 0, NULL), e - b);
    batch_begin(s);
    for (long i = b; i < e; i++)
      req_watch(s, i, 1);
    s->req_bytes = 0;
    c = cpu_ms();
    for (long i = b; i < e; i++)
      send_req(s, s->nodes[i].watch, i - b);
    arm_ms += cpu_ms() - c;
    watch_bytes += s->req_bytes;
    expect_parked(s, "watches");
  }
  r->hb_us = hb_ms * 1e3 / (double)n;
  r->arm_us = arm_ms * 1e3 / (double)n;
  r->hb_req = hb_bytes / (double)n;
  r->hb_ans = ans_bytes / (double)n;
  r->watch_req = watch_bytes / (double)n;
  double client = (double)s->out.cap + (double)s->req.cap; /* the simulated agents' buffers */
  r->bytes_rss = (rss_bytes() - rss0 - client) / (double)n;
  r->bytes_heap = heap0 < 0 ? -1 : (heap_bytes() - heap0 - client) / (double)n;
  /* one keep-alive cycle: every watch times out ("none") and is re-armed */
  out_ready(s, n);
  uv_update_time(&s->loop);
  s->next_none = 0;
  double ka_ms = 0;
  bytes = 0;
  expect_count(s, "watches timed out",
               run_until(s, "\"event\":\"none\"", n, &bytes, &ka_ms, &ka_ms, 1), n);
  r->watch_ans = (double)bytes / (double)n;
  r->ka_us = ka_ms * 1e3 / (double)n;
  expect_parked(s, "re-armed watches");

  if (s->bad > 0)
    goto out; /* the failure would be measured on a wrong state */

  /* 3. one node's process dies: its lease runs out, the round breaks, all re-join */
  long victim = n / 2;
  uv_update_time(&s->loop);
  double dead = wall_ms();
  rv_server_fake_close(s->nodes[victim].watch);
  rv_server_fake_close(s->nodes[victim].main);
  s->nodes[victim].watch = s->nodes[victim].main = NULL;
  out_ready(s, n);
  s->next_none = 0; /* re-armed in node order too: the next to time out is node 0's */
  double broken_cpu = 0, rejoin_ms = 0, rearm_cpu = 0;
  bytes = 0;
  expect_count(s, "broken watches",
               run_until(s, "\"event\":\"broken\"", n - 1, &bytes, &broken_cpu, &rearm_cpu, 0),
               n - 1);
  r->broken_ans = (double)bytes / (double)(n - 1);
  memset(s->seen_rank, 0, (size_t)n);
  for (long b = 0; b < n; b += BATCH) {
    long e = b + BATCH < n ? b + BATCH : n;
    batch_begin(s);
    for (long i = b; i < e; i++)
      req_join(s, i); /* the victim's goes unsent */
    double c = cpu_ms();
    for (long i = b; i < e; i++) {
      if (i == victim)
        continue;
      rv_server_fake_close(s->nodes[i].watch); /* the watcher posts the event and ends */
      s->nodes[i].watch = NULL;
      send_req(s, s->nodes[i].main, i - b);
    }
    rejoin_ms += cpu_ms() - c;
  }
  double t7 = wall_ms();
  /* wall: from the lease's expiry (dead + L at the earliest) to the last answer, the client's
   * work included; server: the server's CPU alone (the loop's, then the re-joins') */
  r->rerdzv_ms = t7 - (dead + (double)s->lease_ms);
  r->rerdzv_srv_ms = broken_cpu + rejoin_ms;
  r->broken_ms = broken_cpu;
  r->rejoin_ms = rejoin_ms;
  snprintf(needle, sizeof(needle), "\"round\":2,\"node_rank\"");
  expect_count(s, "round 2", check_answers(s, needle, 1, NULL), n - 1);
  r->ran = s->bad == 0;

out:
  /* the end: every agent goes away, the server closes */
  for (long i = 0; i < n; i++) {
    rv_server_fake_close(s->nodes[i].watch);
    rv_server_fake_close(s->nodes[i].main);
  }
  int closed = 0;
  rv_server_close(s->srv, on_closed, &closed);
  while (!closed)
    uv_run(&s->loop, UV_RUN_ONCE);
  uv_run(&s->loop, UV_RUN_DEFAULT);
  uv_loop_close(&s->loop);
  mu_free(s->nodes);
  mu_free(s->seen_rank);
  mu_buf_release(&s->out);
  mu_buf_release(&s->req);
}

/* -- verdicts ------------------------------------------------------------------------------- */

static int flat(const struct result *rs, int nr, size_t off, const char *what, const char *unit)
{
  double lo = 0, hi = 0;
  int k = 0;
  for (int i = 0; i < nr; i++) {
    if (!rs[i].ran)
      continue;
    double v = *(const double *)((const char *)&rs[i] + off);
    if (v < 0)
      return 1; /* not measured in this build */
    lo = k == 0 || v < lo ? v : lo;
    hi = k == 0 || v > hi ? v : hi;
    k++;
  }
  if (k < 2) {
    printf("verdict: %s per node flat: not judged (one size ran)\n", what);
    return 1;
  }
  int ok = lo > 0 && hi / lo <= 2.0;
  printf("verdict: %s per node flat across %d sizes (max/min <= 2): %.2f %s .. %.2f %s = "
         "%.2fx: %s\n",
         what, k, lo, unit, hi, unit, lo > 0 ? hi / lo : 0, ok ? "PASS" : "FAIL");
  return ok;
}

static const struct result *at(const struct result *rs, int nr, long n)
{
  for (int i = 0; i < nr; i++)
    if (rs[i].ran && rs[i].n == n)
      return &rs[i];
  return NULL;
}

int main(int argc, char **argv)
{
  struct sim s;
  memset(&s, 0, sizeof(s));
  long lease_ms = 10000, lws = 8, mem_share = 50;
  struct mu_opt opts[] = {
      MU_OPT_INT(0, "lease-ms", &lease_ms, "L",
                 "lease_ttl_ms the nodes join with (10000, the agent's default; the watch "
                 "timeout is 3 L, at most 30000)"),
      MU_OPT_INT(0, "lws", &lws, "K", "local_world_size of each node (8)"),
      MU_OPT_INT(0, "mem-share", &mem_share, "P",
                 "skip a size projected to need more than P% of MemAvailable (50)"),
      MU_OPT_END(),
  };
  const char *usage = "rdzv_sim [--lease-ms L] [--lws K] [--mem-share P] [NODES...]";
  mu_log_setup("rdzv_sim", MU_LOG_WARN);
  mu_alloc_install_hooks();
  int first = mu_opts_parse(opts, argc, argv, MU_OPTS_STOP_AT_NONOPT, usage);
  if (first == MU_OPTS_HELP)
    return 0;
  if (first < 0)
    return 2;
  long sizes[MAX_SIZES] = {10000, 100000, 1000000};
  int nr = 3;
  if (first < argc) {
    nr = 0;
    for (int i = first; i < argc && nr < MAX_SIZES; i++) {
      char *end = NULL;
      long v = strtol(argv[i], &end, 10);
      if (end == argv[i] || *end != '\0' || v < 2 || v > 1000000) {
        mu_log(MU_LOG_ERROR, "'%s' is not a node count from 2 to 1000000 (musterd's max_nodes)",
               argv[i]);
        return 2;
      }
      sizes[nr++] = v;
    }
  }
  if (lease_ms < 100 || lws < 1 || mem_share < 1 || mem_share > 100) {
    mu_log(MU_LOG_ERROR, "--lease-ms must be >= 100, --lws >= 1, --mem-share 1..100");
    return 2;
  }
  s.lease_ms = lease_ms;
  s.lws = lws;
  struct result rs[MAX_SIZES];
  memset(rs, 0, sizeof(rs));
  double per_node = 4096; /* a guess until a size has run */
  for (int i = 0; i < nr; i++) {
    double avail = (double)proc_kb("/proc/meminfo", "MemAvailable") * 1024.0;
    /* the server's state, plus every answer of a round held at once (~400 B each) */
    double need = (double)sizes[i] * (per_node + 400);
    rs[i].n = sizes[i];
    if (avail > 0 && need > avail * (double)mem_share / 100.0) {
      printf("rdzv_sim: nodes=%ld skipped: needs ~%.0f MB, %ld%% of MemAvailable is %.0f MB\n",
             sizes[i], need / 1e6, mem_share, avail * (double)mem_share / 1e8);
      continue;
    }
    s.n = sizes[i];
    simulate(&s, &rs[i]);
    struct result *r = &rs[i];
    if (r->bytes_rss > per_node)
      per_node = r->bytes_rss;
    printf("rdzv_sim: nodes=%ld join=%.2fus/node heartbeat=%.2fus/node watch-arm=%.2fus/node "
           "keepalive=%.2fus/node mem=%.0fB/node",
           r->n, r->join_us, r->hb_us, r->arm_us, r->ka_us, r->bytes_rss);
    if (r->bytes_heap >= 0)
      printf(" (heap %.0fB/node)", r->bytes_heap);
    printf(" close=%.1fms (wall %.1f) rerdzv=%.1fms (broken %.1f + re-joins %.1f; wall %.1f) "
           "maxrss=%ldMB\n",
           r->close_cpu_ms, r->close_ms, r->rerdzv_srv_ms, r->broken_ms, r->rejoin_ms, r->rerdzv_ms,
           proc_kb("/proc/self/status", "VmHWM") / 1024);
    printf("rdzv_sim: wire nodes=%ld join %.0fB -> %.0fB, heartbeat %.0fB -> %.0fB, watch %.0fB "
           "-> %.0fB (none) / %.0fB (broken)\n",
           r->n, r->join_req, r->join_ans, r->hb_req, r->hb_ans, r->watch_req, r->watch_ans,
           r->broken_ans);
    fflush(stdout);
  }
  int ok = s.bad == 0;
  if (s.bad > 0)
    printf("verdict: %d answers were not what the agent expects: FAIL\n", s.bad);
  ok &= flat(rs, nr, offsetof(struct result, join_us), "join time", "us");
  ok &= flat(rs, nr, offsetof(struct result, hb_us), "heartbeat time", "us");
  ok &= flat(rs, nr, offsetof(struct result, ka_us), "keep-alive time", "us");
  ok &= flat(rs, nr, offsetof(struct result, bytes_rss), "memory (RSS)", "B");
  if (heap_bytes() >= 0)
    ok &= flat(rs, nr, offsetof(struct result, bytes_heap), "memory (heap)", "B");
  const struct result *h = at(rs, nr, 100000);
  if (h != NULL) {
    printf("verdict: 100000-node round closed %.1f ms (server CPU; wall %.1f) after the last "
           "join (< 1000): %s\n",
           h->close_cpu_ms, h->close_ms, h->close_cpu_ms < 1000 ? "PASS" : "FAIL");
    printf("verdict: re-rendezvous after one failure at 100000 nodes %.1f ms (server CPU; wall "
           "%.1f) (< 2000): %s\n",
           h->rerdzv_srv_ms, h->rerdzv_ms, h->rerdzv_srv_ms < 2000 ? "PASS" : "FAIL");
    ok &= h->close_cpu_ms < 1000 && h->rerdzv_srv_ms < 2000;
  } else {
    printf("verdict: no 100000-node size ran: the latency goals were not measured\n");
  }
  return ok ? 0 : 1;
}
