/* mu_c10d_probe(): one blocking TCPStore GET with a deadline (see c10d_probe.h). */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "muster/errno.h"

#include "c10d_probe.h"

static long long now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for `events` on fd until `deadline`. Returns: 1 ready, 0 timed out, -1 error. */
static int wait_fd(int fd, short events, long long deadline)
{
  for (;;) {
    long long left = deadline - now_ms();
    if (left <= 0)
      return 0;
    struct pollfd p = {fd, events, 0};
    int n = poll(&p, 1, (int)left);
    if (n > 0)
      return 1;
    if (n < 0 && errno != EINTR)
      return -1;
  }
}

/* Connects to host:port before `deadline`. Returns: the socket, or -1 with `err` filled. */
static int dial(const char *host, int port, long long deadline, struct mu_buf *err)
{
  char ps[16];
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof(hints));
  hints.ai_socktype = SOCK_STREAM;
  snprintf(ps, sizeof(ps), "%d", port);
  int rc = getaddrinfo(host, ps, &hints, &res);
  if (rc != 0) {
    mu_buf_printf(err, "cannot resolve '%s': %s", host, gai_strerror(rc));
    return -1;
  }
  int fd = -1;
  const char *why = "no address";
  for (struct addrinfo *ai = res; ai != NULL && fd < 0; ai = ai->ai_next) {
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
      continue;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    int soerr = 0;
    socklen_t sl = sizeof(soerr);
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 &&
        (errno != EINPROGRESS || wait_fd(fd, POLLOUT, deadline) != 1 ||
         getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 || soerr != 0)) {
      why = strerror(soerr != 0 ? soerr : errno != EINPROGRESS ? errno : ETIMEDOUT);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  if (fd < 0)
    mu_buf_printf(err, "cannot connect to %s:%d: %s", host, port, why);
  return fd;
}

int mu_tcp_reachable(const char *host, int port, int timeout_ms, struct mu_buf *err)
{
  int fd = dial(host, port, now_ms() + timeout_ms, err);
  if (fd < 0)
    return MU_ECONN;
  close(fd);
  return 0;
}

/* Reads n bytes before `deadline`. Returns: 0, 1 the peer closed, 2 timed out, -1 error. */
static int read_all(int fd, unsigned char *p, size_t n, long long deadline)
{
  size_t off = 0;
  while (off < n) {
    int w = wait_fd(fd, POLLIN, deadline);
    if (w != 1)
      return w == 0 ? 2 : -1;
    ssize_t k = read(fd, p + off, n - off);
    if (k == 0)
      return 1;
    if (k < 0 && errno != EAGAIN && errno != EINTR)
      return -1;
    if (k > 0)
      off += (size_t)k;
  }
  return 0;
}

int mu_c10d_probe(const char *host, int port, int timeout_ms, struct mu_buf *url,
                  struct mu_buf *err)
{
  long long deadline = now_ms() + timeout_ms;
  int fd = dial(host, port, deadline, err), rc = MU_ENOENT;
  if (fd < 0)
    return MU_ECONN;
  /* GET (torch 1.13's id 2) of the reserved key: u64 length, then the key */
  unsigned char q[1 + 8 + sizeof(MU_C10D_HTTP_URL_KEY)], len[8];
  size_t kl = sizeof(MU_C10D_HTTP_URL_KEY) - 1;
  q[0] = 2;
  for (int i = 0; i < 8; i++)
    q[1 + i] = (unsigned char)((uint64_t)kl >> (8 * i));
  memcpy(q + 9, MU_C10D_HTTP_URL_KEY, kl);
  if (send(fd, q, 9 + kl, MSG_NOSIGNAL) != (ssize_t)(9 + kl)) {
    mu_buf_printf(err, "%s:%d closed the connection at once", host, port);
    goto out;
  }
  int r = read_all(fd, len, 8, deadline);
  uint64_t n = 0;
  for (int i = 7; i >= 0 && r == 0; i--)
    n = n << 8 | len[i];
  char buf[512];
  if (r == 0 && n > 0 && n < sizeof(buf))
    r = read_all(fd, (unsigned char *)buf, (size_t)n, deadline);
  if (r == 0 && n > 0 && n < sizeof(buf)) {
    buf[n] = '\0';
    if (strncmp(buf, "http://", 7) == 0 || strncmp(buf, "https://", 8) == 0) {
      mu_buf_puts(url, buf);
      rc = 0;
      goto out;
    }
  }
  mu_buf_printf(err, "%s:%d is a TCPStore that is not a musterd (%s)", host, port,
                r == 1   ? "it closed the connection on musterd's key, as PyTorch's does"
                : r == 2 ? "no answer: PyTorch's 2.x store waits for its own handshake"
                : r < 0  ? "the connection failed"
                         : "it has no musterd key");
out:
  close(fd);
  return rc;
}
