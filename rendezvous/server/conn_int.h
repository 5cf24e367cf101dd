/* What conn.c (a connection: its bytes, limits and lifecycle) and reply.c (the HTTP replies
 * written on it) share; private to rendezvous/server/.
 */
#ifndef MUSTERD_SERVER_CONN_INT_H
#define MUSTERD_SERVER_CONN_INT_H

#include <stddef.h>
#include <stdint.h>

#include "server.h"

/* Sends what the output holds: uv_try_write, then uv_write for the rest. */
void rv_conn_flush(struct rv_conn *c);
/* The request in progress is answered: the next pipelined one may be parsed. */
void rv_conn_request_finished(struct rv_conn *c);
/* Gives back the body bytes the request counted against the budget. */
void rv_conn_body_uncount(struct rv_conn *c);
/* The barrier's sequence number for output queued now (0 without a barrier). */
uint64_t rv_conn_out_need_now(const struct rv_conn *c);
/* Appends to the output, or closes the connection when the cap is passed. Returns: 0 or -1. */
int rv_conn_out_append(struct rv_conn *c, const void *p, size_t n);

#endif
