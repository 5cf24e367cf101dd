/* Load generator for bench/bench_durable.sh: PUTs COUNT distinct keys into an etcd v2 API as
 * fast as one connection allows, pipelining WINDOW requests at a time (plain blocking sockets:
 * the point is to fill a data dir quickly, not to measure latency).
 *
 *   durable_load HOST PORT COUNT [PREFIX] [WINDOW]
 *
 * Keys are /v2/keys/load/PREFIX/<n> with a 64-byte value. Prints "loaded COUNT keys in S s
 * (R/s)" and exits 1 on any non-2xx answer or socket error.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "muster/mu.h"

#include "alloc.h"
#include "buf.h"
#include "opts.h"

static double now_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int send_all(int fd, const char *p, size_t n)
{
  while (n > 0) {
    ssize_t w = send(fd, p, n, 0);
    if (w <= 0)
      return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* The value of Content-Length in the header block [p, end), or 0. */
static size_t content_length(const char *p, const char *end)
{
  static const char name[] = "\r\ncontent-length:";
  size_t n = sizeof(name) - 1;
  for (; p + n <= end; p++)
    if (strncasecmp(p, name, n) == 0)
      return (size_t)strtoul(p + n, NULL, 10);
  return 0;
}

/* Consumes whole responses from `in`. Returns: how many, or -1 on a non-2xx status. */
static long eat_responses(struct mu_buf *in)
{
  long n = 0;
  for (;;) {
    const char *end = in->len > 0 ? strstr(in->data, "\r\n\r\n") : NULL;
    if (end == NULL)
      return n;
    size_t hlen = (size_t)(end - in->data) + 4;
    if (in->len < 12 || in->data[9] != '2') {
      fprintf(stderr, "durable_load: unexpected answer: %.80s\n", in->data);
      return -1;
    }
    size_t body = content_length(in->data, end);
    if (in->len < hlen + body)
      return n;
    mu_buf_consume(in, hlen + body);
    n++;
  }
}

int main(int argc, char **argv)
{
  if (argc < 4) {
    fprintf(stderr, "usage: durable_load HOST PORT COUNT [PREFIX] [WINDOW]\n");
    return 2;
  }
  long port = 0, count = 0, window = 256;
  if (mu_parse_long(argv[2], 1, 65535, &port) != 0 ||
      mu_parse_long(argv[3], 1, 100000000, &count) != 0 ||
      (argc > 5 && mu_parse_long(argv[5], 1, 100000, &window) != 0)) {
    fprintf(stderr, "durable_load: PORT, COUNT and WINDOW must be positive integers\n");
    return 2;
  }
  const char *prefix = argc > 4 ? argv[4] : "p";
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  if (inet_pton(AF_INET, argv[1], &sa.sin_addr) != 1 ||
      connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
    fprintf(stderr, "durable_load: cannot connect to %s:%ld\n", argv[1], port);
    return 1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  char value[65];
  memset(value, 'v', 64);
  value[64] = '\0';
  struct mu_buf out = MU_BUF_INIT((size_t)1 << 30), in = MU_BUF_INIT((size_t)1 << 30);
  char rbuf[65536];
  long sent = 0, done = 0;
  double t0 = now_s();
  while (done < count) {
    mu_buf_clear(&out);
    while (sent < count && sent - done < window) {
      sent++;
      mu_buf_printf(&out,
                    "PUT /v2/keys/load/%s/%ld HTTP/1.1\r\nHost: x\r\nContent-Type: "
                    "application/x-www-form-urlencoded\r\nContent-Length: %d\r\n\r\nvalue=%s",
                    prefix, sent, 6 + 64, value);
    }
    if (out.len > 0 && send_all(fd, out.data, out.len) != 0) {
      fprintf(stderr, "durable_load: send failed after %ld answers\n", done);
      return 1;
    }
    ssize_t r = recv(fd, rbuf, sizeof(rbuf), 0);
    if (r <= 0) {
      fprintf(stderr, "durable_load: connection closed after %ld answers\n", done);
      return 1;
    }
    mu_buf_append(&in, rbuf, (size_t)r);
    long n = eat_responses(&in);
    if (n < 0)
      return 1;
    done += n;
  }
  double dt = now_s() - t0;
  printf("loaded %ld keys in %.2f s (%.0f/s)\n", count, dt, (double)count / dt);
  mu_buf_release(&out);
  mu_buf_release(&in);
  close(fd);
  return 0;
}
