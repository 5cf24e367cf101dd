/*
 * stream.c - the write path that musterd's two listeners share (stream.h).
 */
#include "stream.h"

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
