/* One memory budget for what connections buffer (issue 24, finding 4).
 *
 * Every connection's buffers (the request being parsed, its body, input stashed behind a long
 * poll or a paused output, output not yet taken by the kernel) count, at their capacity, in the
 * server's total and in its client's: a client is a group of addresses, an IPv4 /32 or an IPv6
 * /64 by default (--client-prefix-v4, --client-prefix-v6), so that one host cannot pass as many.
 *   - an answer that would take the total past --max-buffer-bytes, or its client past
 *     --max-buffer-bytes-per-client, is refused (429, in its API's shape) instead of buffered;
 *   - a connection that has not authenticated (anonymous: no credential verified yet when
 *     credentials are required, no request answered yet when not) reads 4 KiB at a time and
 *     stops parsing once 2 KiB of its answers wait, so that it holds a few KiB before anyone
 *     knows who it is;
 *   - when the total passes the budget anyway (partial headers from thousands of connections)
 *     or the connection table is full, anonymous connections are closed, the oldest first and
 *     those of clients over their share before the others: authenticated clients are served
 *     ahead of anonymous ones;
 *   - when a client is at --max-connections-per-address, its oldest anonymous connection goes
 *     for a new one (issue 33/4): anonymous neighbours cannot take an authenticated client's
 *     share (1,100 idle connections that got 401 left the authenticated client of the same
 *     prefix 503 on every try).
 */
#include <string.h>

#include "muster/errno.h"
#include "server.h"
#include "tls.h"

static size_t caps(const struct rv_conn *c)
{
  return c->in.cap + c->out.cap + c->wbuf.cap + c->head.cap + c->body.cap +
         rv_tls_conn_buffered(c->tls);
}

size_t rv_client_key(const struct sockaddr *sa, unsigned v4_bits, unsigned v6_bits, char *out,
                     size_t size)
{
  char name[64];
  out[0] = '\0';
  if (sa->sa_family == AF_INET) {
    struct sockaddr_in in = *(const struct sockaddr_in *)sa;
    unsigned bits = v4_bits > 32 ? 32 : v4_bits;
    uint32_t mask = bits == 0 ? 0 : htonl(0xffffffffu << (32 - bits));
    in.sin_addr.s_addr &= mask;
    if (uv_ip4_name(&in, name, sizeof(name)) != 0)
      return 0;
    return (size_t)snprintf(out, size, bits == 32 ? "%s" : "%s/%u", name, bits);
  }
  if (sa->sa_family == AF_INET6) {
    struct sockaddr_in6 in6 = *(const struct sockaddr_in6 *)sa;
    unsigned bits = v6_bits > 128 ? 128 : v6_bits;
    for (unsigned i = 0; i < 16; i++) {
      unsigned keep = bits >= (i + 1) * 8 ? 8 : bits > i * 8 ? bits - i * 8 : 0;
      in6.sin6_addr.s6_addr[i] &= (unsigned char)(0xff00u >> keep);
    }
    in6.sin6_scope_id = 0;
    if (uv_ip6_name(&in6, name, sizeof(name)) != 0)
      return 0;
    return (size_t)snprintf(out, size, bits == 128 ? "%s" : "%s/%u", name, bits);
  }
  return 0;
}

size_t rv_server_client_key(const struct rv_server *srv, const struct sockaddr *sa, char *out,
                            size_t size)
{
  return rv_client_key(sa, srv->cfg.client_prefix_v4, srv->cfg.client_prefix_v6, out, size);
}

int rv_server_budget_take(struct rv_server *srv, struct rv_addr *a, size_t n)
{
  if (srv->buffered + n > srv->cfg.max_buffer_bytes ||
      (a != NULL && a->held + n > srv->cfg.max_buffer_bytes_per_client)) {
    srv->budget_refused++;
    return MU_E2BIG;
  }
  srv->buffered += n;
  if (a != NULL)
    a->held += n;
  return 0;
}

const char *rv_server_budget_limit(const struct rv_server *srv, const struct rv_addr *a, size_t n,
                                   size_t *value)
{
  *value = srv->cfg.max_buffer_bytes_per_client;
  if (a != NULL && a->held + n > srv->cfg.max_buffer_bytes_per_client)
    return "--max-buffer-bytes-per-client";
  *value = srv->cfg.max_buffer_bytes;
  return srv->buffered + n > srv->cfg.max_buffer_bytes ? "--max-buffer-bytes" : NULL;
}

void rv_server_budget_put(struct rv_server *srv, struct rv_addr *a, size_t n)
{
  srv->buffered -= n;
  if (a != NULL)
    a->held -= n;
}

int rv_conn_anonymous(const struct rv_conn *c)
{
  return !(c->flags & CONN_TRUSTED);
}

size_t rv_budget_read_size(const struct rv_conn *c)
{
  return rv_conn_anonymous(c) ? RV_ANON_READ : RV_READ_BUF_SIZE;
}

size_t rv_budget_out_pause(const struct rv_conn *c)
{
  return rv_conn_anonymous(c) ? RV_ANON_OUT_PAUSE : RV_OUT_PAUSE;
}

/* Closes anonymous connections, the oldest first (those of clients over their share in a first
 * pass), until the total is back under the budget or none is left. */
static void evict(struct rv_server *srv)
{
  for (int pass = 0; pass < 2 && srv->buffered > srv->cfg.max_buffer_bytes; pass++) {
    struct mu_list_node *x = srv->conns.tail, *prev = NULL;
    for (; x != NULL && srv->buffered > srv->cfg.max_buffer_bytes; x = prev) {
      prev = x->prev;
      struct rv_conn *c = MU_CONTAINER_OF(x, struct rv_conn, link);
      if ((c->flags & (CONN_CLOSING | CONN_FAKE)) || !rv_conn_anonymous(c) || c->held == 0)
        continue;
      if (pass == 0 && (c->addr == NULL || c->addr->held <= srv->cfg.max_buffer_bytes_per_client))
        continue;
      srv->budget_evicted++;
      rv_budget_forget(c); /* its bytes go now: closing frees them in the next iteration */
      rv_conn_close(c);
    }
  }
}

void rv_budget_account(struct rv_conn *c)
{
  struct rv_server *srv = c->srv;
  if (c->flags & CONN_CLOSING)
    return;
  size_t now = caps(c);
  srv->buffered = srv->buffered - c->held + now;
  if (c->addr != NULL)
    c->addr->held = c->addr->held - c->held + now;
  c->held = now;
  if (srv->buffered > srv->cfg.max_buffer_bytes && !srv->evicting) {
    srv->evicting = 1;
    evict(srv);
    srv->evicting = 0;
  }
}

void rv_budget_forget(struct rv_conn *c)
{
  c->srv->buffered -= c->held;
  if (c->addr != NULL)
    c->addr->held -= c->held;
  c->held = 0;
}

int rv_budget_output_fits(const struct rv_conn *c, size_t len)
{
  const struct rv_server *srv = c->srv;
  if (srv->buffered + len > srv->cfg.max_buffer_bytes)
    return 0;
  return c->addr == NULL || c->addr->held + len <= srv->cfg.max_buffer_bytes_per_client;
}

struct rv_conn *rv_budget_share_victim(struct rv_server *srv, const struct rv_conn *newcomer)
{
  for (struct mu_list_node *x = srv->conns.tail; x != NULL; x = x->prev) {
    struct rv_conn *c = MU_CONTAINER_OF(x, struct rv_conn, link);
    if (c != newcomer && c->addr == newcomer->addr && !(c->flags & (CONN_CLOSING | CONN_FAKE)) &&
        rv_conn_anonymous(c) && c->state == REQ_IDLE && c->deadline == 0)
      return c; /* between requests: none in progress (a body being sent keeps its share) */
  }
  return NULL;
}

struct rv_conn *rv_budget_room_victim(struct rv_server *srv, const struct rv_conn *newcomer)
{
  for (struct mu_list_node *x = srv->conns.tail; x != NULL; x = x->prev) {
    struct rv_conn *c = MU_CONTAINER_OF(x, struct rv_conn, link);
    if (c == newcomer || (c->flags & (CONN_CLOSING | CONN_FAKE)) || !rv_conn_anonymous(c) ||
        c->state != REQ_IDLE)
      continue;
    return c;
  }
  return NULL;
}
