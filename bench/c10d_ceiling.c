/* c10d_ceiling: the throughput ceiling for bench_c10d.sh. A minimal single-threaded epoll
 * server of torch 1.13's TCPStore framing that stores nothing: SET is swallowed, GET answers a
 * fixed 64-byte value, ADD answers 1, CHECK answers READY. Whatever a TCPStore server reaches
 * against it under the same c10d_load is the share of the machine that TCP over loopback
 * leaves for real work.
 *
 *   c10d_ceiling      prints "listening on 127.0.0.1:PORT", serves until killed
 */
#define _GNU_SOURCE 1 /* accept4 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "alloc.h"

#define IN_CAP (256 * 1024)
#define MAX_EVENTS 256

struct conn {
  int fd;
  size_t len;
  unsigned char in[IN_CAP];
};

static uint64_t u64(const unsigned char *p)
{
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

/* The length of the complete frame at p[0..n), or 0 when it is not complete. */
static size_t frame_len(const unsigned char *p, size_t n)
{
  size_t off = 1;
  int fields = p[0] == 0 ? 2 : p[0] == 2 ? 1 : p[0] == 3 ? 1 : 0;
  if (p[0] == 4 || p[0] == 5) { /* count + keys */
    if (n < 9)
      return 0;
    uint64_t k = u64(p + 1);
    off = 9;
    for (uint64_t i = 0; i < k; i++) {
      if (n < off + 8 || n < off + 8 + u64(p + off))
        return 0;
      off += 8 + (size_t)u64(p + off);
    }
    return off;
  }
  for (int f = 0; f < fields; f++) {
    if (n < off + 8 || n < off + 8 + u64(p + off))
      return 0;
    off += 8 + (size_t)u64(p + off);
  }
  if (p[0] == 3) /* the amount */
    off += 8;
  return n >= off ? off : 0;
}

static void serve(struct conn *c)
{
  static unsigned char out[IN_CAP * 2];
  size_t o = 0, pos = 0;
  ssize_t r = read(c->fd, c->in + c->len, IN_CAP - c->len);
  if (r <= 0) {
    if (r == 0 || errno != EAGAIN) {
      close(c->fd);
      c->fd = -1;
    }
    return;
  }
  c->len += (size_t)r;
  for (;;) {
    size_t f = c->len > pos ? frame_len(c->in + pos, c->len - pos) : 0;
    if (f == 0)
      break;
    unsigned char q = c->in[pos];
    pos += f;
    if (q == 2) {
      out[o] = 64;
      memset(out + o + 1, 0, 7);
      memset(out + o + 8, 'v', 64);
      o += 72;
    } else if (q == 3) {
      out[o] = 1;
      memset(out + o + 1, 0, 7);
      o += 8;
    } else if (q == 4 || q == 5) {
      out[o++] = 0;
    }
  }
  memmove(c->in, c->in + pos, c->len - pos);
  c->len -= pos;
  if (o > 0 && write(c->fd, out, o) < 0 && errno != EAGAIN) {
    close(c->fd);
    c->fd = -1;
  }
}

int main(void)
{
  int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(ls, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(ls, 4096) != 0)
    return 1;
  socklen_t sl = sizeof(sa);
  getsockname(ls, (struct sockaddr *)&sa, &sl);
  printf("listening on 127.0.0.1:%d\n", ntohs(sa.sin_port));
  fflush(stdout);
  int ep = epoll_create1(0);
  struct epoll_event ev = {EPOLLIN, {.ptr = NULL}}, evs[MAX_EVENTS];
  epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
  for (;;) {
    int n = epoll_wait(ep, evs, MAX_EVENTS, -1);
    for (int i = 0; i < n; i++) {
      struct conn *c = evs[i].data.ptr;
      if (c == NULL) {
        int fd;
        while ((fd = accept4(ls, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
          setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
          struct conn *nc = mu_calloc(1, sizeof(*nc));
          nc->fd = fd;
          struct epoll_event e = {EPOLLIN, {.ptr = nc}};
          epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
        }
        continue;
      }
      serve(c);
      if (c->fd < 0)
        mu_free(c);
    }
  }
}
