/* watch_fanout: a libuv load generator for etcd v2 servers (musterd or etcd), used by
 * bench_memory.sh. Two modes:
 *
 *   watch_fanout --endpoint 127.0.0.1:P --watchers 10000 [--key /bench/watch] [--pid PID]
 *     opens N connections, each `GET /v2/keys/KEY?wait=true`; once every watcher has its
 *     response headers (the server registered it) it reads the server's RSS, then PUTs the key
 *     from one more connection and measures, from the moment that PUT is written, when each
 *     watcher gets its event. Prints one line: answered, latency p50/p99/max, RSS per watcher,
 *     and with --pid the server's CPU time from the PUT to the last event (server_cpu_ms: the
 *     sum over its threads of /proc/PID/task/TID/schedstat, which a busy machine's scheduling
 *     does not inflate as it does the wall-clock figures).
 *
 *   watch_fanout --endpoint 127.0.0.1:P --load-keys 100000 [--value-size 64] [--pid PID]
 *     PUTs N distinct keys /bench/mem/k<i> over --conns connections and prints the rate and
 *     the server's RSS before and after (bytes per key).
 *
 * --pid is the server's process id, for VmRSS/VmHWM from /proc/PID/status. Exit status: 0
 * when every request succeeded (and every watcher was answered), 1 otherwise, 2 on usage.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <uv.h>
#include <llhttp.h>

#include "alloc.h"
#include "log.h"
#include "opts.h"

#define BODY_CAP 512 /* bytes of a watch event kept to check its action */

enum client_kind {
  CLIENT_WATCH, /* a blocked GET ?wait=true */
  CLIENT_PUT,   /* the write that wakes the watchers */
  CLIENT_LOAD,  /* a key loader (one request in flight) */
};

struct fanout;

struct client {
  uv_tcp_t tcp;
  uv_connect_t connect;
  uv_write_t write;
  llhttp_t parser;
  enum client_kind kind;
  struct fanout *f;
  char *req;  /* the request being written; owned, freed when the write completes */
  char *body; /* first BODY_CAP bytes of a watch event (NULL until one arrives); owned */
  size_t body_len;
  int armed;  /* watch: response headers received */
  int done;   /* watch: event received; the connection is closed at the end, off the clock */
  int closed; /* uv_close() was called */
};

struct fanout {
  uv_loop_t *loop;
  struct sockaddr_in addr;
  const char *endpoint;
  const char *key;
  long pid;
  long watchers;
  long load_keys;
  long value_size;
  long conns;
  long inflight_max;
  long timeout_s;
  char *value;
  /* progress */
  long started, connecting, armed, ended, answered, failed, bad_events;
  long next_key, stored;
  uint64_t t0, t_first_armed, t_all_armed;
  uint64_t *lat; /* per answered watcher, ns after t0 */
  uint64_t put_ns;
  uint64_t cpu_t0, cpu_t1;     /* our own CPU time at the waking write and at the last event */
  uint64_t srv_cpu0, srv_cpu1; /* the server's (--pid), the same two moments */
  long rss_base_kb, rss_loaded_kb, hwm_kb;
  struct client **clients;
  long n_clients;
  uv_timer_t deadline;
  uv_timer_t settle;
  int finished;
  int first_error_shown;
};

static llhttp_settings_t parser_settings;

static uint64_t now_ns(void)
{
  return uv_hrtime();
}

/* This process's CPU time (user + system), ns. */
static uint64_t cpu_ns(void)
{
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000u +
         (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000u;
}

/* VmRSS and VmHWM of a process in kB. Returns: 0, or -1 (no --pid, or unreadable). */
static int read_rss(long pid, long *rss_kb, long *hwm_kb)
{
  char path[64], line[256];
  FILE *fp;
  int found = 0;
  if (pid <= 0)
    return -1;
  snprintf(path, sizeof(path), "/proc/%ld/status", pid);
  fp = fopen(path, "r");
  if (fp == NULL)
    return -1;
  while (fgets(line, sizeof(line), fp) != NULL) {
    if (strncmp(line, "VmRSS:", 6) == 0 && sscanf(line + 6, "%ld", rss_kb) == 1)
      found |= 1;
    if (strncmp(line, "VmHWM:", 6) == 0 && sscanf(line + 6, "%ld", hwm_kb) == 1)
      found |= 2;
  }
  fclose(fp);
  return found == 3 ? 0 : -1;
}

/* CPU time of every thread of a process, ns (schedstat's first field). Returns: 0 without
 * --pid or when unreadable. */
static uint64_t proc_cpu_ns(long pid)
{
  char path[96];
  uint64_t sum = 0;
  if (pid <= 0)
    return 0;
  snprintf(path, sizeof(path), "/proc/%ld/task", pid);
  DIR *d = opendir(path);
  if (d == NULL)
    return 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.')
      continue;
    snprintf(path, sizeof(path), "/proc/%ld/task/%.20s/schedstat", pid, e->d_name);
    FILE *fp = fopen(path, "r");
    unsigned long long ns = 0;
    if (fp != NULL && fscanf(fp, "%llu", &ns) == 1)
      sum += ns;
    if (fp != NULL)
      fclose(fp);
  }
  closedir(d);
  return sum;
}

static void report_error(struct fanout *f, const char *what, const char *detail)
{
  f->failed++;
  if (!f->first_error_shown) {
    f->first_error_shown = 1;
    mu_warn("%s: %s (further errors are only counted)", what, detail);
  }
}

static void on_close(uv_handle_t *h)
{
  struct client *c = h->data;
  mu_free(c->req);
  mu_free(c->body);
  mu_free(c);
}

static void client_close(struct client *c)
{
  if (c->closed)
    return;
  c->closed = 1;
  uv_close((uv_handle_t *)&c->tcp, on_close);
}

static void finish(struct fanout *f);
static void start_watchers(struct fanout *f);
static void send_next_key(struct client *c);

/* Closes a client after an error; a watcher's slot is accounted for (connecting or ended). */
static void client_fail(struct client *c)
{
  struct fanout *f = c->f;
  int was_closed = c->closed;
  client_close(c);
  if (c->kind == CLIENT_WATCH && !was_closed) {
    if (c->armed)
      f->ended++;
    else
      f->connecting--;
    start_watchers(f);
  }
  finish(f);
}

static void on_write(uv_write_t *w, int status)
{
  struct client *c = w->data;
  mu_free(c->req);
  c->req = NULL;
  if (status < 0 && !c->closed) {
    report_error(c->f, "write", uv_strerror(status));
    client_fail(c);
  }
}

static int client_send(struct client *c, char *req)
{
  uv_buf_t buf = uv_buf_init(req, (unsigned)strlen(req));
  int rc;
  c->req = req;
  c->write.data = c;
  rc = uv_write(&c->write, (uv_stream_t *)&c->tcp, &buf, 1, on_write);
  if (rc < 0) {
    mu_free(c->req);
    c->req = NULL;
  }
  return rc;
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
  /* One shared buffer: each read is parsed before the next one is made. */
  static char shared[64 * 1024];
  (void)h;
  (void)suggested;
  *buf = uv_buf_init(shared, sizeof(shared));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
  struct client *c = s->data;
  struct fanout *f = c->f;
  if (n == 0 || c->closed || c->done)
    return;
  if (n < 0) {
    /* A watcher whose connection ends before its event is a failure. */
    report_error(f, "connection closed early", n == UV_EOF ? "EOF" : uv_strerror((int)n));
    client_fail(c);
    return;
  }
  if (llhttp_execute(&c->parser, buf->base, (size_t)n) != HPE_OK && !c->closed && !c->done) {
    if (llhttp_get_errno(&c->parser) != HPE_PAUSED)
      report_error(f, "bad HTTP response", llhttp_get_error_reason(&c->parser));
    client_fail(c);
  }
}

static int on_headers_complete(llhttp_t *p)
{
  struct client *c = p->data;
  struct fanout *f = c->f;
  if (c->kind != CLIENT_WATCH)
    return 0;
  if (p->status_code != 200) {
    char detail[64];
    snprintf(detail, sizeof(detail), "HTTP %d", p->status_code);
    report_error(f, "watch request refused", detail);
    client_fail(c);
    return HPE_PAUSED;
  }
  c->armed = 1;
  f->armed++;
  f->connecting--;
  if (f->armed == 1)
    f->t_first_armed = now_ns();
  start_watchers(f);
  return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t len)
{
  struct client *c = p->data;
  if (c->kind != CLIENT_WATCH)
    return 0;
  if (c->body == NULL)
    c->body = mu_malloc(BODY_CAP + 1);
  if (len > BODY_CAP - c->body_len)
    len = BODY_CAP - c->body_len;
  memcpy(c->body + c->body_len, at, len);
  c->body_len += len;
  c->body[c->body_len] = '\0';
  return 0;
}

static int on_message_complete(llhttp_t *p)
{
  struct client *c = p->data;
  struct fanout *f = c->f;
  uint64_t t = now_ns();
  int status = p->status_code;

  switch (c->kind) {
  case CLIENT_WATCH:
    if (f->t0 == 0 || c->body == NULL || strstr(c->body, "\"action\":\"set\"") == NULL) {
      f->bad_events++;
      report_error(f, "watcher got an unexpected answer", c->body ? c->body : "(no body)");
    } else {
      f->lat[f->answered++] = t - f->t0;
    }
    f->ended++;
    c->done = 1;
    uv_read_stop((uv_stream_t *)&c->tcp);
    break;
  case CLIENT_PUT:
    f->put_ns = t - f->t0;
    if (status != 200 && status != 201) {
      char detail[64];
      snprintf(detail, sizeof(detail), "HTTP %d", status);
      report_error(f, "the waking PUT failed", detail);
    }
    client_close(c);
    break;
  case CLIENT_LOAD:
    if (status != 200 && status != 201) {
      char detail[64];
      snprintf(detail, sizeof(detail), "HTTP %d", status);
      report_error(f, "PUT of a key failed", detail);
    } else {
      f->stored++;
    }
    send_next_key(c);
    break;
  }
  finish(f);
  return c->closed || c->done ? HPE_PAUSED : 0;
}

static char *put_request(struct fanout *f, const char *key)
{
  return mu_asprintf("PUT /v2/keys%s HTTP/1.1\r\nHost: %s\r\n"
                     "Content-Type: application/x-www-form-urlencoded\r\n"
                     "Content-Length: %zu\r\n\r\nvalue=%s",
                     key, f->endpoint, strlen(f->value) + 6, f->value);
}

static void send_next_key(struct client *c)
{
  struct fanout *f = c->f;
  char key[64];
  int rc;
  if (f->next_key >= f->load_keys) {
    client_close(c);
    return;
  }
  snprintf(key, sizeof(key), "/bench/mem/k%07ld", f->next_key++);
  rc = client_send(c, put_request(f, key));
  if (rc < 0) {
    report_error(f, "write", uv_strerror(rc));
    client_close(c);
  }
}

static void on_connect(uv_connect_t *req, int status)
{
  struct client *c = req->data;
  struct fanout *f = c->f;
  char *msg = NULL;
  int rc;
  if (status < 0) {
    report_error(f, "connect", uv_strerror(status));
    client_fail(c);
    return;
  }
  uv_tcp_nodelay(&c->tcp, 1);
  rc = uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, on_read);
  if (rc < 0) {
    report_error(f, "read", uv_strerror(rc));
    client_fail(c);
    return;
  }
  switch (c->kind) {
  case CLIENT_WATCH:
    msg = mu_asprintf("GET /v2/keys%s?wait=true HTTP/1.1\r\nHost: %s\r\n\r\n", f->key, f->endpoint);
    break;
  case CLIENT_PUT:
    f->srv_cpu0 = proc_cpu_ns(f->pid);
    f->cpu_t0 = cpu_ns();
    f->t0 = now_ns();
    msg = put_request(f, f->key);
    break;
  case CLIENT_LOAD:
    send_next_key(c);
    return;
  }
  rc = client_send(c, msg);
  if (rc < 0) {
    report_error(f, "write", uv_strerror(rc));
    client_fail(c);
  }
}

static struct client *client_start(struct fanout *f, enum client_kind kind)
{
  struct client *c = mu_calloc(1, sizeof(*c));
  int rc;
  c->f = f;
  c->kind = kind;
  llhttp_init(&c->parser, HTTP_RESPONSE, &parser_settings);
  c->parser.data = c;
  uv_tcp_init(f->loop, &c->tcp);
  c->tcp.data = c;
  c->connect.data = c;
  rc = uv_tcp_connect(&c->connect, &c->tcp, (const struct sockaddr *)&f->addr, on_connect);
  if (rc < 0) {
    report_error(f, "connect", uv_strerror(rc));
    client_close(c);
    return NULL;
  }
  return c;
}

static void on_settled(uv_timer_t *t)
{
  struct fanout *f = t->data;
  long hwm;
  if (read_rss(f->pid, &f->rss_loaded_kb, &hwm) == 0)
    f->hwm_kb = hwm;
  client_start(f, CLIENT_PUT);
}

/* Opens watch connections up to the in-flight cap; once all are armed, triggers the write. */
static void start_watchers(struct fanout *f)
{
  while (f->started < f->watchers && f->connecting < f->inflight_max) {
    struct client *c;
    f->started++;
    f->connecting++;
    c = client_start(f, CLIENT_WATCH);
    if (c == NULL)
      f->connecting--;
  }
  if (f->t_all_armed == 0 && f->started == f->watchers && f->connecting == 0) {
    f->t_all_armed = now_ns();
    /* Let the server settle (and its allocator return scratch memory) before reading RSS. */
    uv_timer_start(&f->settle, on_settled, 300, 0);
  }
}

static void on_deadline(uv_timer_t *t)
{
  struct fanout *f = t->data;
  mu_warn("gave up after %ld s (--timeout)", f->timeout_s);
  f->finished = 2;
  uv_stop(f->loop);
}

static void finish(struct fanout *f)
{
  int done;
  if (f->watchers > 0)
    done = f->t_all_armed != 0 && (f->put_ns > 0 || f->armed == 0) && f->ended >= f->armed;
  else
    done = f->stored + f->failed >= f->load_keys;
  if (done && !f->finished) {
    f->finished = 1;
    f->cpu_t1 = cpu_ns();
    f->srv_cpu1 = proc_cpu_ns(f->pid);
    uv_stop(f->loop);
  }
}

static int cmp_u64(const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static double ms(uint64_t ns)
{
  return (double)ns / 1e6;
}

static void close_walk(uv_handle_t *h, void *arg)
{
  (void)arg;
  if (uv_is_closing(h))
    return;
  if (h->type == UV_TCP) {
    client_close(h->data);
    return;
  }
  uv_close(h, NULL);
}

static int parse_endpoint(const char *s, struct sockaddr_in *sa)
{
  char host[64];
  const char *colon = strrchr(s, ':');
  long port;
  if (colon == NULL || (size_t)(colon - s) >= sizeof(host))
    return -1;
  memcpy(host, s, (size_t)(colon - s));
  host[colon - s] = '\0';
  if (mu_parse_long(colon + 1, 1, 65535, &port) < 0)
    return -1;
  return uv_ip4_addr(host, (int)port, sa) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
  struct fanout f;
  const char *usage = "watch_fanout --endpoint HOST:PORT (--watchers N | --load-keys N) [options]";
  struct mu_opt opts[] = {
      MU_OPT_STRING(0, "endpoint", &f.endpoint, "HOST:PORT", "server (IPv4), e.g. 127.0.0.1:2379"),
      MU_OPT_INT(0, "watchers", &f.watchers, "N", "watch mode: N blocked watchers on --key"),
      MU_OPT_STRING(0, "key", &f.key, "KEY", "key the watchers wait on (/bench/watch)"),
      MU_OPT_INT(0, "load-keys", &f.load_keys, "N", "load mode: PUT N keys /bench/mem/k<i>"),
      MU_OPT_INT(0, "value-size", &f.value_size, "BYTES", "value size for PUTs (64)"),
      MU_OPT_INT(0, "conns", &f.conns, "N", "load mode: connections (16)"),
      MU_OPT_INT(0, "inflight", &f.inflight_max, "N", "watch mode: connects in flight (256)"),
      MU_OPT_INT(0, "pid", &f.pid, "PID", "server pid, to read its RSS"),
      MU_OPT_INT(0, "timeout", &f.timeout_s, "S", "give up after S seconds (120)"),
      MU_OPT_END(),
  };
  long i, rss_now = 0, hwm = 0;
  int n, rc = 0;

  memset(&f, 0, sizeof(f));
  f.key = "/bench/watch";
  f.value_size = 64;
  f.conns = 16;
  f.inflight_max = 256;
  f.timeout_s = 120;
  mu_log_setup("watch_fanout", MU_LOG_INFO);
  n = mu_opts_parse(opts, argc, argv, 0, usage);
  if (n == MU_OPTS_HELP)
    return 0;
  if (n < 0)
    return 2;
  if (n < argc) {
    mu_error("unexpected argument '%s'; usage: %s", argv[n], usage);
    return 2;
  }
  if (f.endpoint == NULL || parse_endpoint(f.endpoint, &f.addr) < 0) {
    mu_error("--endpoint '%s' is not an IPv4 HOST:PORT; pass e.g. --endpoint 127.0.0.1:2379",
             f.endpoint ? f.endpoint : "");
    return 2;
  }
  if ((f.watchers > 0) == (f.load_keys > 0)) {
    mu_error("give exactly one of --watchers N or --load-keys N (N > 0)");
    return 2;
  }
  if (f.value_size < 0 || f.value_size > 1024 * 1024 || f.conns < 1 || f.inflight_max < 1 ||
      f.timeout_s < 1 || f.key[0] != '/') {
    mu_error("bad option: --value-size 0..1048576, --conns/--inflight/--timeout >= 1, --key "
             "starting with '/'");
    return 2;
  }
  mu_alloc_install_hooks();
  llhttp_settings_init(&parser_settings);
  parser_settings.on_headers_complete = on_headers_complete;
  parser_settings.on_body = on_body;
  parser_settings.on_message_complete = on_message_complete;

  f.value = mu_malloc((size_t)f.value_size + 1);
  memset(f.value, 'v', (size_t)f.value_size);
  f.value[f.value_size] = '\0';
  f.loop = uv_default_loop();
  uv_timer_init(f.loop, &f.deadline);
  uv_timer_init(f.loop, &f.settle);
  f.deadline.data = f.settle.data = &f;
  uv_timer_start(&f.deadline, on_deadline, (uint64_t)f.timeout_s * 1000, 0);
  read_rss(f.pid, &f.rss_base_kb, &hwm);

  if (f.watchers > 0) {
    f.lat = mu_calloc((size_t)f.watchers, sizeof(*f.lat));
    start_watchers(&f);
  } else {
    f.t0 = now_ns();
    for (i = 0; i < f.conns && i < f.load_keys; i++)
      client_start(&f, CLIENT_LOAD);
  }
  uv_run(f.loop, UV_RUN_DEFAULT);
  uint64_t t_end = now_ns();

  if (f.watchers > 0) {
    uint64_t p50 = 0, p99 = 0, max = 0;
    long per = 0;
    if (f.answered > 0) {
      qsort(f.lat, (size_t)f.answered, sizeof(*f.lat), cmp_u64);
      p50 = f.lat[(f.answered - 1) / 2];
      p99 = f.lat[(f.answered * 99 + 99) / 100 - 1];
      max = f.lat[f.answered - 1];
    }
    if (f.armed > 0 && f.rss_loaded_kb > 0)
      per = (f.rss_loaded_kb - f.rss_base_kb) * 1024 / f.armed;
    printf("watch_fanout watchers=%ld armed=%ld answered=%ld errors=%ld arm_s=%.2f "
           "put_ms=%.2f first_ms=%.2f p50_ms=%.2f p99_ms=%.2f last_ms=%.2f "
           "client_cpu_ms=%.2f server_cpu_ms=%.2f rss_base_kb=%ld rss_watchers_kb=%ld "
           "bytes_per_watcher=%ld\n",
           f.watchers, f.armed, f.answered, f.failed,
           f.armed > 0 ? (double)(f.t_all_armed - f.t_first_armed) / 1e9 : 0.0, ms(f.put_ns),
           f.answered ? ms(f.lat[0]) : 0.0, ms(p50), ms(p99), ms(max),
           f.cpu_t1 > f.cpu_t0 && f.cpu_t0 > 0 ? ms(f.cpu_t1 - f.cpu_t0) : 0.0,
           f.srv_cpu1 > f.srv_cpu0 && f.srv_cpu0 > 0 ? ms(f.srv_cpu1 - f.srv_cpu0) : 0.0,
           f.rss_base_kb, f.rss_loaded_kb, per);
    rc = f.finished == 1 && f.answered == f.watchers && f.failed == 0 ? 0 : 1;
  } else {
    double secs = (double)(t_end - f.t0) / 1e9;
    long per = 0;
    if (read_rss(f.pid, &rss_now, &hwm) == 0 && f.stored > 0)
      per = (rss_now - f.rss_base_kb) * 1024 / f.stored;
    printf("load_keys keys=%ld stored=%ld errors=%ld seconds=%.2f rate=%.0f rss_base_kb=%ld "
           "rss_loaded_kb=%ld hwm_kb=%ld bytes_per_key=%ld\n",
           f.load_keys, f.stored, f.failed, secs, secs > 0 ? (double)f.stored / secs : 0.0,
           f.rss_base_kb, rss_now, hwm, per);
    rc = f.finished == 1 && f.stored == f.load_keys && f.failed == 0 ? 0 : 1;
  }
  fflush(stdout);
  uv_walk(f.loop, close_walk, NULL);
  uv_run(f.loop, UV_RUN_DEFAULT);
  uv_loop_close(f.loop);
  mu_free(f.lat);
  mu_free(f.value);
  return rc;
}
