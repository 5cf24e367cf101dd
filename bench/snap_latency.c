/* Latency probe for bench/bench_snapshot_latency.sh: one client GETs keys of a loaded store one
 * after the other (a steady reader: each request waits for the previous answer) while a second
 * process PUTs new keys, one every PAUSE_US, so that --snapshot-every triggers a snapshot during
 * the run. Every GET's latency is kept; the summary says what a snapshot does to a reader.
 *
 *   snap_latency HOST PORT SECONDS KEYS PREFIX [PAUSE_US]
 *
 * GETs /v2/keys/load/PREFIX/<1..KEYS> (bench/durable_load's keys) in a pseudo-random order;
 * PUTs /v2/keys/snapw/<n>. Prints one line per client:
 *   get: n=N p50_ms=... p99_ms=... p999_ms=... max_ms=... max_at_s=...
 *   put: n=N p50_ms=... p99_ms=... p999_ms=... max_ms=... max_at_s=...
 * and exits 1 on a non-2xx answer or a socket error.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "opts.h"

static double mono_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int dial(const char *host, long port)
{
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0 || inet_pton(AF_INET, host, &sa.sin_addr) != 1 ||
      connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
    fprintf(stderr, "snap_latency: cannot connect to %s:%ld\n", host, port);
    exit(1);
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

/* Sends `req` and reads its whole answer (headers + Content-Length bytes).
 * Returns: 0 for a 2xx answer, -1 otherwise. */
static int round_trip(int fd, const char *req, size_t len)
{
  static char buf[1 << 16];
  if (send(fd, req, len, MSG_NOSIGNAL) != (ssize_t)len)
    return -1;
  size_t have = 0, need = 0;
  for (;;) {
    ssize_t r = recv(fd, buf + have, sizeof(buf) - 1 - have, 0);
    if (r <= 0)
      return -1;
    have += (size_t)r;
    buf[have] = '\0';
    char *eoh = strstr(buf, "\r\n\r\n");
    if (eoh == NULL)
      continue;
    if (need == 0) {
      const char *cl = strstr(buf, "Content-Length: ");
      need = (size_t)(eoh + 4 - buf) + (cl != NULL ? strtoul(cl + 16, NULL, 10) : 0);
      if (need >= sizeof(buf))
        return -1;
    }
    if (have >= need)
      return buf[9] == '2' ? 0 : -1;
  }
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Prints the latency summary of `lat` (n samples, in s; at[i] = when sample i began). */
static void summary(const char *name, double *lat, const double *at, size_t n)
{
  double max = 0, max_at = 0;
  for (size_t i = 0; i < n; i++)
    if (lat[i] > max) {
      max = lat[i];
      max_at = at[i];
    }
  qsort(lat, n, sizeof(*lat), cmp_double);
#define PCT(q) (n > 0 ? lat[(size_t)((double)(n - 1) * (q))] * 1e3 : 0.0)
  printf("%s: n=%zu p50_ms=%.3f p99_ms=%.3f p999_ms=%.3f max_ms=%.3f max_at_s=%.2f\n", name, n,
         PCT(0.5), PCT(0.99), PCT(0.999), max * 1e3, max_at);
#undef PCT
  fflush(stdout);
}

/* One client: GETs (put == 0) or PUTs for `secs` seconds. Returns: the exit status. */
static int client(const char *host, long port, double secs, long keys, const char *prefix, int put,
                  long pause_us)
{
  int fd = dial(host, port);
  size_t cap = 1 << 20, n = 0;
  double *lat = mu_malloc(cap * sizeof(*lat)), *at = mu_malloc(cap * sizeof(*at));
  char req[512];
  unsigned long x = 88172645463325252UL; /* xorshift: the same order every run */
  double t0 = mono_s();
  int rc = 0;
  for (long i = 1; mono_s() - t0 < secs; i++) {
    int len;
    if (put) {
      len = snprintf(req, sizeof(req),
                     "PUT /v2/keys/snapw/%ld HTTP/1.1\r\nHost: x\r\nContent-Type: "
                     "application/x-www-form-urlencoded\r\nContent-Length: 7\r\n\r\nvalue=w",
                     i);
    } else {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      len = snprintf(req, sizeof(req), "GET /v2/keys/load/%s/%lu HTTP/1.1\r\nHost: x\r\n\r\n",
                     prefix, x % (unsigned long)keys + 1);
    }
    double s = mono_s();
    if (round_trip(fd, req, (size_t)len) != 0) {
      fprintf(stderr, "snap_latency: %s %ld failed (non-2xx or connection lost)\n",
              put ? "PUT" : "GET", i);
      rc = 1;
      break;
    }
    double e = mono_s();
    if (n == cap) {
      cap *= 2;
      lat = mu_realloc(lat, cap * sizeof(*lat));
      at = mu_realloc(at, cap * sizeof(*at));
    }
    lat[n] = e - s;
    at[n++] = s - t0;
    if (put && pause_us > 0)
      usleep((useconds_t)pause_us);
  }
  summary(put ? "put" : "get", lat, at, n);
  mu_free(lat);
  mu_free(at);
  close(fd);
  return rc;
}

int main(int argc, char **argv)
{
  long port = 0, secs = 0, keys = 0, pause_us = 1000;
  if (argc < 6 || mu_parse_long(argv[2], 1, 65535, &port) != 0 ||
      mu_parse_long(argv[3], 1, 3600, &secs) != 0 ||
      mu_parse_long(argv[4], 1, 100000000, &keys) != 0 ||
      (argc > 6 && mu_parse_long(argv[6], 0, 10000000, &pause_us) != 0)) {
    fprintf(stderr, "usage: snap_latency HOST PORT SECONDS KEYS PREFIX [PAUSE_US]\n");
    return 2;
  }
  pid_t w = fork();
  if (w < 0) {
    perror("snap_latency: fork");
    return 1;
  }
  if (w == 0)
    _exit(client(argv[1], port, (double)secs, keys, argv[5], 1, pause_us));
  int rc = client(argv[1], port, (double)secs, keys, argv[5], 0, 0);
  int st = 0;
  if (waitpid(w, &st, 0) != w || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
    rc = 1;
  return rc;
}
