/* TCP keepalive and TCP_USER_TIMEOUT on long-lived connections (keepalive.h). */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "keepalive.h"
#include "opts.h"

long mu_net_timeout_ms(void)
{
  static long cached = -1;
  if (cached < 0) {
    const char *s = getenv("MUSTER_NET_TIMEOUT_MS");
    long v = MU_NET_TIMEOUT_MS_DEFAULT;
    if (s != NULL && mu_parse_long(s, 0, 3600000, &v) != 0)
      v = MU_NET_TIMEOUT_MS_DEFAULT;
    cached = v;
  }
  return cached;
}

void mu_net_keepalive(int fd)
{
  long t = mu_net_timeout_ms();
  if (t <= 0)
    return;
  int on = 1;
  int idle = (int)(t / 2000);
  if (idle < 1)
    idle = 1;
  int count = 3;
  unsigned int user = (unsigned int)t;
  (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &idle, sizeof(idle));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user, sizeof(user));
}
