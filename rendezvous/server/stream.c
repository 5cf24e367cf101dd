/*
 * stream.c - what musterd's two listeners share of a connection's life (stream.h).
 */
#include "stream.h"

#include <sys/socket.h>

#include "http.h"
#include "keepalive.h"

int rv_stream_accept(struct rv_server *srv, uv_stream_t *listener, uv_tcp_t *tcp,
                     struct sockaddr_storage *sa, char *peer, size_t peer_n)
{
  int rc = uv_accept(listener, (uv_stream_t *)tcp);
  if (rc != 0)
    return rc;
  uv_tcp_nodelay(tcp, 1);
  uv_os_fd_t fd;
  if (uv_fileno((const uv_handle_t *)tcp, &fd) == 0)
    mu_net_keepalive(fd);
  int salen = sizeof(*sa);
  peer[0] = '\0';
  if (uv_tcp_getpeername(tcp, (struct sockaddr *)sa, &salen) != 0)
    sa->ss_family = AF_UNSPEC;
  else
    rv_server_client_key(srv, (const struct sockaddr *)sa, peer, peer_n);
  return 0;
}

int rv_stream_try_send(uv_stream_t *s, struct mu_buf *out, struct mu_buf *wbuf, uv_buf_t *rest)
{
  uv_buf_t b = uv_buf_init(out->data, (unsigned)out->len);
  int n = uv_try_write(s, &b, 1);
  if (n == (int)out->len) {
    mu_buf_clear(out);
    return RV_SENT_ALL;
  }
  if (n < 0 && n != UV_EAGAIN)
    return n;
  if (n > 0)
    mu_buf_consume(out, (size_t)n);
  struct mu_buf tmp = *wbuf;
  *wbuf = *out;
  *out = tmp;
  mu_buf_clear(out);
  *rest = uv_buf_init(wbuf->data, (unsigned)wbuf->len);
  return RV_SENT_REST;
}
