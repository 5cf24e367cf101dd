/*
 * stream.h - the write path that musterd's two listeners share (HTTP in conn.c, the TCPStore
 * in c10d/conn.c): what can leave at once leaves with uv_try_write, the rest goes to one
 * uv_write from a second buffer, so that the first can keep filling meanwhile.
 */
#ifndef MU_RV_STREAM_H
#define MU_RV_STREAM_H

#include <uv.h>

#include "buf.h"

/* rv_stream_try_send()'s outcomes */
#define RV_SENT_ALL 1  /* all of `out` went; `out` is empty */
#define RV_SENT_REST 0 /* a rest is left: it is in `wbuf`, *rest points at it for uv_write */

/* Sends `out` on `s` with uv_try_write. What the kernel did not take moves to `wbuf` (which must
 * be empty: no write in flight), swapped in, so `out` is empty and can keep filling while the
 * caller's uv_write of *rest goes on. Returns: RV_SENT_ALL, RV_SENT_REST, or a libuv error (the
 * connection is broken: close it). */
int rv_stream_try_send(uv_stream_t *s, struct mu_buf *out, struct mu_buf *wbuf, uv_buf_t *rest);

#endif
