/* ceiling: the throughput ceiling for bench_http.sh. A minimal single-threaded epoll HTTP/1.1
 * server that answers every request (keep-alive, pipelined, with or without a Content-Length
 * body) with one fixed small JSON body shaped like an etcd v2 GET answer. It parses nothing
 * but the header terminator and Content-Length, so whatever musterd reaches against it under
 * the same wrk load is the share of the machine that HTTP over loopback leaves for real work.
 *
 *   ceiling [--listen 127.0.0.1:0]    prints "listening on 127.0.0.1:PORT", serves until killed
 */
#define _GNU_SOURCE 1 /* memmem */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <fcntl.h>

#include "alloc.h"
#include "log.h"
#include "opts.h"

#define IN_CAP (64 * 1024)   /* bytes of unparsed request per connection */
#define OUT_CAP (256 * 1024) /* bytes of pending responses per connection */
#define MAX_EVENTS 256

static const char body[] = "{\"action\":\"get\",\"node\":{\"key\":\"/bench/get\",\"value\":"
                           "\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\","
                           "\"modifiedIndex\":4,\"createdIndex\":4}}\n";

struct conn {
  int fd;
  size_t in_len;
  size_t body_left; /* body bytes of the current request still to skip */
  size_t out_len;
  size_t out_off;
  char in[IN_CAP];
  char out[OUT_CAP];
};

static char response[512];
static size_t response_len;

static int set_nonblock(int fd)
{
  int fl = fcntl(fd, F_GETFL, 0);
  if (fl < 0)
    return -1;
  return fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* Content-Length of a header block (0 when absent). Returns: 0, or -1 when malformed. */
static int content_length(const char *hdr, size_t len, size_t *out)
{
  static const char name[] = "\r\ncontent-length:";
  size_t n = sizeof(name) - 1, i;
  *out = 0;
  for (i = 0; i + n <= len; i++) {
    if (strncasecmp(hdr + i, name, n) == 0) {
      size_t j = i + n, v = 0;
      while (j < len && hdr[j] == ' ')
        j++;
      if (j >= len || hdr[j] < '0' || hdr[j] > '9')
        return -1;
      while (j < len && hdr[j] >= '0' && hdr[j] <= '9' && v < (1u << 30))
        v = v * 10 + (size_t)(hdr[j++] - '0');
      *out = v;
      return 0;
    }
  }
  return 0;
}

/* Consumes complete requests from c->in, queueing one response each. Returns: 0, or -1 to
 * close the connection (bad request, or the client does not read its responses). */
static int parse(struct conn *c)
{
  size_t off = 0;
  for (;;) {
    if (c->body_left > 0) {
      size_t take = c->in_len - off < c->body_left ? c->in_len - off : c->body_left;
      off += take;
      c->body_left -= take;
      if (c->body_left > 0)
        break;
    }
    char *end = memmem(c->in + off, c->in_len - off, "\r\n\r\n", 4);
    if (end == NULL)
      break;
    size_t hlen = (size_t)(end - (c->in + off)) + 4;
    size_t clen;
    if (content_length(c->in + off, hlen, &clen) < 0)
      return -1;
    if (c->out_len + response_len > OUT_CAP)
      return -1;
    memcpy(c->out + c->out_len, response, response_len);
    c->out_len += response_len;
    off += hlen;
    c->body_left = clen;
  }
  if (off > 0) {
    memmove(c->in, c->in + off, c->in_len - off);
    c->in_len -= off;
  }
  return c->in_len == IN_CAP ? -1 : 0;
}

/* Writes what is pending. Returns: 1 when all was written, 0 when the socket is full, -1 on
 * error. */
static int flush_out(struct conn *c)
{
  while (c->out_off < c->out_len) {
    ssize_t n = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return 0;
    if (n <= 0)
      return -1;
    c->out_off += (size_t)n;
  }
  c->out_off = c->out_len = 0;
  return 1;
}

static void conn_close(int ep, struct conn *c)
{
  epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
  close(c->fd);
  mu_free(c);
}

/* Handles readiness on a connection. Returns: 0, or -1 when it was closed. */
static int conn_event(int ep, struct conn *c, uint32_t ev)
{
  struct epoll_event e;
  int rc;
  if (ev & (EPOLLERR | EPOLLHUP))
    goto fail;
  if (c->out_len > 0) {
    rc = flush_out(c);
    if (rc < 0)
      goto fail;
    if (rc == 0)
      return 0;
  }
  for (;;) {
    ssize_t n = read(c->fd, c->in + c->in_len, IN_CAP - c->in_len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      break;
    if (n <= 0)
      goto fail;
    c->in_len += (size_t)n;
    if (parse(c) < 0)
      goto fail;
    if (c->out_len > OUT_CAP / 2)
      break;
  }
  rc = flush_out(c);
  if (rc < 0)
    goto fail;
  e.events = rc == 0 ? EPOLLIN | EPOLLOUT : EPOLLIN;
  e.data.ptr = c;
  epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &e);
  return 0;
fail:
  conn_close(ep, c);
  return -1;
}

static int parse_addr(const char *s, struct sockaddr_in *sa)
{
  char host[64];
  const char *colon = strrchr(s, ':');
  long port;
  if (colon == NULL || (size_t)(colon - s) >= sizeof(host))
    return -1;
  memcpy(host, s, (size_t)(colon - s));
  host[colon - s] = '\0';
  if (mu_parse_long(colon + 1, 0, 65535, &port) < 0)
    return -1;
  memset(sa, 0, sizeof(*sa));
  sa->sin_family = AF_INET;
  sa->sin_port = htons((uint16_t)port);
  return inet_pton(AF_INET, host, &sa->sin_addr) == 1 ? 0 : -1;
}

int main(int argc, char **argv)
{
  const char *listen_addr = "127.0.0.1:0";
  struct mu_opt opts[] = {
      MU_OPT_STRING(0, "listen", &listen_addr, "ADDR", "IPv4 address:port to listen on"),
      MU_OPT_END(),
  };
  struct sockaddr_in sa;
  socklen_t salen = sizeof(sa);
  struct epoll_event e, events[MAX_EVENTS];
  int lfd = -1, ep = -1, one = 1, n;

  mu_log_setup("ceiling", MU_LOG_INFO);
  n = mu_opts_parse(opts, argc, argv, 0, "ceiling [--listen 127.0.0.1:0]");
  if (n == MU_OPTS_HELP)
    return 0;
  if (n < 0)
    return 2;
  if (n < argc) {
    mu_error("unexpected argument '%s' (ceiling takes only --listen)", argv[n]);
    return 2;
  }
  if (parse_addr(listen_addr, &sa) < 0) {
    mu_error("bad --listen '%s': expected an IPv4 address and port, e.g. 127.0.0.1:0", listen_addr);
    return 2;
  }
  response_len = (size_t)snprintf(response, sizeof(response),
                                  "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                  "Content-Length: %zu\r\n\r\n%s",
                                  sizeof(body) - 1, body);
  lfd = socket(AF_INET, SOCK_STREAM, 0);
  if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
      bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 4096) < 0 ||
      set_nonblock(lfd) < 0 || getsockname(lfd, (struct sockaddr *)&sa, &salen) < 0) {
    mu_error("cannot listen on '%s': %s", listen_addr, strerror(errno));
    return 1;
  }
  printf("listening on 127.0.0.1:%u\n", (unsigned)ntohs(sa.sin_port));
  fflush(stdout);
  ep = epoll_create1(0);
  if (ep < 0) {
    mu_error("epoll_create1: %s", strerror(errno));
    return 1;
  }
  e.events = EPOLLIN;
  e.data.ptr = NULL;
  epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &e);
  for (;;) {
    int i, k = epoll_wait(ep, events, MAX_EVENTS, -1);
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0) {
      mu_error("epoll_wait: %s", strerror(errno));
      return 1;
    }
    for (i = 0; i < k; i++) {
      if (events[i].data.ptr != NULL) {
        conn_event(ep, events[i].data.ptr, events[i].events);
        continue;
      }
      for (;;) {
        int fd = accept(lfd, NULL, NULL);
        struct conn *c;
        if (fd < 0)
          break;
        set_nonblock(fd);
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        c = mu_malloc(sizeof(*c));
        c->fd = fd;
        c->in_len = c->body_left = c->out_len = c->out_off = 0;
        e.events = EPOLLIN;
        e.data.ptr = c;
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
      }
    }
  }
}
