/*
 * stream.h - what musterd's two listeners (HTTP in conn.c, the TCPStore in c10d/conn.c) share
 * of a connection's life:
 * - the accept: every accepted socket gets TCP_NODELAY, keepalive and TCP_USER_TIMEOUT (a client
 *   host cut off without a word is dropped in seconds on both listeners, docs/agent.md "A silent
 *   host"), and the client key its shares are counted under;
 * - the write path: what can leave at once leaves with uv_try_write, the rest goes to one
 *   uv_write from a second buffer, so that the first can keep filling meanwhile.
 */
#ifndef MU_RV_STREAM_H
#define MU_RV_STREAM_H

#include <uv.h>

#include "buf.h"

struct rv_server;
struct sockaddr_storage;

/* Accepts the next connection of `listener` into `tcp` (uv_tcp_init'ed by the caller), sets
 * TCP_NODELAY, keepalive and TCP_USER_TIMEOUT on it, and fills *sa with the client's address and
 * `peer` with its client key (the address, or its prefix: --client-prefix-v4/-v6). When the
 * address is unknown, sa->ss_family is AF_UNSPEC and `peer` is "". Returns 0, or the libuv error
 * of the accept (nothing else is done then). */
int rv_stream_accept(struct rv_server *srv, uv_stream_t *listener, uv_tcp_t *tcp,
                     struct sockaddr_storage *sa, char *peer, size_t peer_n);

/* rv_stream_try_send()'s outcomes */
#define RV_SENT_ALL 1  /* all of `out` went; `out` is empty */
#define RV_SENT_REST 0 /* a rest is left: it is in `wbuf`, *rest points at it for uv_write */

/* Sends `out` on `s` with uv_try_write. What the kernel did not take moves to `wbuf` (which must
 * be empty: no write in flight), swapped in, so `out` is empty and can keep filling while the
 * caller's uv_write of *rest goes on. Returns: RV_SENT_ALL, RV_SENT_REST, or a libuv error (the
 * connection is broken: close it). */
int rv_stream_try_send(uv_stream_t *s, struct mu_buf *out, struct mu_buf *wbuf, uv_buf_t *rest);

#endif
