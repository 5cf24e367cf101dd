/* The server layer's internals, shared by server.c, conn.c, router.c and status.c: the one
 * server context (`struct rv_server`, as redis keeps one `server`), the connection, and the
 * route slots. Everything above the server layer uses http.h only.
 */
#ifndef MUSTERD_SERVER_SERVER_H
#define MUSTERD_SERVER_SERVER_H

#include <stdint.h>
#include <string.h>

#include <llhttp.h>
#include <uv.h>

#include "buf.h"
#include "htab.h"
#include "http.h"
#include "list.h"

#define RV_MAX_MODULES 8
#define RV_MAX_OWN_HOSTS 8
#define RV_MAX_HEADERS 64
#define RV_READ_BUF_SIZE (64 * 1024)
/* A connection stops being read (and parsing what it sent) while its unsent output is over
 * this: a client that pipelines without reading cannot make the server buffer its answers. */
#define RV_OUT_PAUSE (64 * 1024)
/* A connection that has not authenticated reads this much at a time and stops parsing once
 * this much of its answers wait (budget.c): what it stashes fits a 4 KiB buffer (a mu_buf
 * holds len + 1 in a power of two), its answers another. */
#define RV_ANON_READ 4000
#define RV_ANON_OUT_PAUSE 2048
/* Bodies in progress on all connections together: at most this many times max_body_bytes. */
#define RV_BODY_TOTAL_FACTOR 64

/* Per-route counters for /metrics: requests by status class. */
struct rv_route_stats {
  uint64_t by_status[6]; /* index status/100: 1xx..5xx */
};

/* One registered row, with what the router precomputes to match it. */
struct rv_route_slot {
  const struct rv_route *route;
  struct rv_route_stats stats;
  size_t literal;            /* bytes of `path` before the first '{' (all of it for plain rows) */
  size_t fixed;              /* bytes of `path` outside {vars}: the more, the more specific */
  unsigned nvars;            /* {name} segments */
  struct rv_route_slot *alt; /* the next row with the same path (other methods), or NULL */
  unsigned methods;          /* union of the methods of every row with this path (first row) */
  int first;                 /* the first row with its path: the one the matcher looks at */
};

struct rv_conn;

struct rv_server {
  uv_loop_t *loop;
  struct rv_server_config cfg; /* strings below are owned copies */
  char *host;
  char *advertise_url;
  char *name;
  char *url; /* the advertised URL actually in use */
  uv_tcp_t listener;
  int listening;
  int port;
  uv_timer_t sweep; /* idle timeout + drain deadline */
  int sweep_closed;
  /* Connections whose deferred request was answered from another callback (a watcher woken
   * by a write): their stashed input is parsed from this 0 ms timer, never from inside the
   * store's notification. */
  uv_timer_t resume;
  int resume_closed;
  struct rv_conn *resume_head;
  int closing;
  unsigned refs; /* handles still open (listener, timer, conns, module refs) */
  rv_server_closed_cb *closed_cb;
  void *closed_data;
  uint64_t drain_deadline; /* uv_now() after which remaining conns are force-closed */

  struct mu_list conns;            /* live connections (struct rv_conn.link) */
  char read_buf[RV_READ_BUF_SIZE]; /* shared: reads are processed synchronously */

  struct rv_route_slot *routes;
  size_t nroutes;
  /* The first row of every resource, most specific first (exact rows, then patterns by fixed
   * bytes, then prefixes by length): the first that matches a path wins. */
  struct rv_route_slot **order;
  size_t norder;
  struct rv_route_stats unrouted; /* 301/400/404/413/414/431/503 before any route */

  struct rv_module modules[RV_MAX_MODULES];
  size_t nmodules;

  /* TLS and the gate: freed in server_free(), after the last connection (their TLS sessions
   * and tickets use them). */
  struct rv_tls *tls;  /* NULL = plain HTTP */
  struct rv_gate gate; /* all NULL = no checks */
  int has_gate;

  /* The durability barrier (rv_server_set_barrier()): connections whose output waits for
   * records to be durable (struct rv_conn.held_link). */
  struct rv_barrier barrier;
  uint64_t durable;
  int barrier_off; /* the output queued now reveals no record (RV_ROUTE_UNHELD, a refusal) */
  struct mu_list held;
  struct mu_list holds; /* struct rv_hold of other listeners (rv_server_hold()) */

  /* Cached Date header value, refreshed once per second. */
  char date[40];
  uint64_t date_sec;

  /* Browsers (origin.c): the names that are musterd's own (a browser's Host must be one). */
  char *own_hosts[RV_MAX_OWN_HOSTS];
  size_t nown_hosts;
  uint64_t browser_requests, origin_refused;
  uint64_t scope_refused; /* 403s for a credential's scopes (scope.c) */

  /* Counters for /metrics. */
  uint64_t conns_accepted;
  uint64_t conns_rejected;
  uint64_t conns_idle_closed;
  uint64_t conns_output_overflow;
  uint64_t limit_hits;
  uint64_t output_held;     /* times a connection's output waited for durability */
  uint64_t conns_timed_out; /* closed at a phase deadline (headers, body, write) */
  uint64_t reads_paused;    /* times a connection stopped being read: output pending */
  /* Request bodies held by every connection (before authentication: a handler has not seen
   * them yet), bounded by RV_BODY_TOTAL_FACTOR x max_body_bytes; past it, 503 and close. */
  size_t body_total;
  uint64_t body_refused;
  /* What each client address holds (struct rv_addr by address): connections and bodies in
   * progress, bounded per address so that one address cannot lock out another. */
  struct mu_htab addrs;
  uint64_t addr_conns_rejected, addr_body_refused;
  /* The budget (budget.c): what every connection buffers, at capacity. */
  size_t buffered;
  int evicting;
  int auth_required; /* the gate requires credentials: a connection is trusted once it shows one */
  uint64_t budget_refused, budget_evicted;
};

/* One client's share (a client: the addresses of one prefix, budget.c): its open connections,
 * the bodies they hold, and all they buffer. */
struct rv_addr {
  struct mu_hnode h; /* key: the client, "10.0.0.7" or "2001:db8::/64" (part of the allocation) */
  unsigned conns;    /* its HTTP connections */
  unsigned streams;  /* its connections of the other listeners (rv_server_addr_take) */
  size_t body;
  size_t held;
};

enum conn_flags {
  CONN_CLOSING = 1 << 0,           /* uv_close called; waiting for on_close */
  CONN_CLOSE_AFTER_REPLY = 1 << 1, /* close once the output is flushed */
  CONN_IN_READ = 1 << 2,           /* inside read processing: flush once at the end */
  CONN_IN_DISPATCH = 1 << 3,       /* inside a handler call */
  CONN_FAKE = 1 << 4,              /* rv_server_feed(): no socket */
  CONN_READ_STOPPED = 1 << 5,      /* stashed input over its cap: not reading */
  CONN_EOF = 1 << 6,               /* the client finished sending */
  CONN_RESUME_QUEUED = 1 << 7,     /* on srv->resume_head */
  CONN_HELD = 1 << 8,              /* on srv->held: output waits for durability */
  CONN_OUT_PAUSED = 1 << 9,        /* not reading: its unsent output is over RV_OUT_PAUSE */
  CONN_TRUSTED = 1 << 10, /* authenticated (or, with no credentials required, answered once) */
};

enum conn_req_state {
  REQ_IDLE = 0,  /* between requests (or parsing one) */
  REQ_HANDLING,  /* handler running or request deferred */
  REQ_STREAMING, /* chunked headers sent, body to follow */
};

struct rv_conn {
  uv_tcp_t tcp;
  struct rv_server *srv;
  struct mu_list_node link; /* on srv->conns */
  struct rv_conn *resume_next;
  llhttp_t parser;
  unsigned flags;
  enum conn_req_state state;
  uint64_t last_active;
  uint64_t deadline;    /* uv_now() by which the headers or body in progress must be in; 0 none */
  uint64_t write_since; /* uv_now() when the uv_write in progress started */

  struct mu_buf in;              /* input received while a request is being handled */
  struct mu_buf out;             /* output queued, not yet handed to the kernel */
  struct mu_buf wbuf;            /* output being written by uv_write */
  uint64_t out_need;             /* the barrier's sequence number `out` waits for (0: none) */
  struct mu_list_node held_link; /* on srv->held while CONN_HELD */
  int writing;                   /* a uv_write (its request allocated for it) is in progress */

  /* The request being parsed: the URL, then "name\0value\0" pairs. */
  struct mu_buf head;
  size_t url_len;
  int in_url;
  int last_was_value;
  uint16_t hdr_name[RV_MAX_HEADERS]; /* where each name starts in `head` (its value follows its
                                      * '\0'); max_header_bytes is capped below 64 KiB */
  unsigned nhdr;
  struct mu_buf body;
  size_t body_counted; /* bytes of `body` counted in srv->body_total */
  int req_error;       /* HTTP status to answer instead of dispatching (413, 414, 431, 400) */
  const char *req_why; /* what to add to its answer (static), or NULL */
  int keep_alive;
  int is_head;
  int cors;           /* add etcd's CORS headers to an answer made before routing (301, 404) */
  const char *origin; /* an --allowed-origin the request came from: echoed instead of '*' */
  int cors_off;       /* a browser's request refused: no CORS header at all */

  struct rv_req req;
  struct rv_route_slot *slot;
  char *scratch; /* decoded path, vars and params of req, reused across requests */
  size_t scratch_cap;
  struct rv_param *params;
  size_t params_cap;
  rv_gone_cb *gone;
  void *gone_data;
  struct mu_buf *fake_out;

  struct rv_tls_conn *tls; /* TLS session (tls.h), NULL for plain HTTP */
  struct rv_ticket ticket; /* what the gate took for the request in progress */
  char peer[64];           /* its client: address or prefix ("" for rv_server_feed()) */
  struct rv_addr *addr;    /* its client's share, NULL when the address is unknown */
  size_t held;             /* its buffers' bytes as counted in the budget */
};

/* Header i of the request being parsed: its name, and its value (after the name's '\0').
 * Returns: borrowed from `head` until the next request. */
static inline const char *rv_conn_hdr_name(const struct rv_conn *c, unsigned i)
{
  return c->head.data + c->hdr_name[i];
}
static inline const char *rv_conn_hdr_value(const struct rv_conn *c, unsigned i)
{
  const char *name = rv_conn_hdr_name(c, i);
  return name + strlen(name) + 1;
}

/* conn.c */
/* Sends what the connection holds (its records are durable now). */
void rv_conn_release_held(struct rv_conn *c);
void rv_conn_accept(struct rv_server *srv);
void rv_conn_close(struct rv_conn *c);
void rv_conn_start_reading(struct rv_conn *c);
/* Server shutdown: on_gone for a deferred request, close when idle. */
void rv_conn_shutdown(struct rv_conn *c);
struct rv_conn *rv_conn_new_fake(struct rv_server *srv, struct mu_buf *out);
/* Feeds `data` as one read; `eof`: then the client's end of input. */
void rv_conn_feed_fake(struct rv_conn *c, const char *data, size_t len, int eof);
void rv_conn_free_fake(struct rv_conn *c);
/* Parses what a connection stashed while its request was deferred. */
void rv_conn_resume(struct rv_conn *c);

/* server.c */
void rv_server_queue_resume(struct rv_server *srv, struct rv_conn *c);
void rv_server_unqueue_resume(struct rv_server *srv, struct rv_conn *c);
const char *rv_server_date(struct rv_server *srv);
void rv_server_conn_closed(struct rv_server *srv, struct rv_conn *c);

/* router.c: routes the parsed request in c->req (or answers an error) */
void rv_router_dispatch(struct rv_conn *c);
void rv_router_count(struct rv_server *srv, struct rv_route_slot *slot, int status);
const char *rv_status_reason(int status);

/* status.c */
void rv_status_register(struct rv_server *srv);

/* origin.c: who may reach musterd from a browser */
/* Learns musterd's own names (this machine's, --listen's, --advertise-url's, --allowed-origin's).
 */
void rv_origin_setup(struct rv_server *srv);
void rv_origin_release(struct rv_server *srv);
/* Checks a routed request that comes from a browser (Origin, Sec-Fetch-*, Host); sets c->origin
 * for an allowed foreign origin. Returns: 0 to go on, 1 after refusing (403, 421). */
int rv_origin_check(struct rv_conn *c);
/* Answers the CORS preflight of an allowed origin. Returns: 1 when it answered. */
int rv_origin_preflight(struct rv_conn *c);

/* budget.c: the memory budget */
/* Writes the client key of `sa` (its address, or its prefix when shorter than the address).
 * Returns: its length, 0 when unknown. */
size_t rv_client_key(const struct sockaddr *sa, unsigned v4_bits, unsigned v6_bits, char *out,
                     size_t size);
int rv_conn_anonymous(const struct rv_conn *c);
size_t rv_budget_read_size(const struct rv_conn *c);
size_t rv_budget_out_pause(const struct rv_conn *c);
/* Counts what `c` buffers now; over the budget, closes anonymous connections. */
void rv_budget_account(struct rv_conn *c);
void rv_budget_forget(struct rv_conn *c);
/* Returns: 1 when `len` more bytes of output fit the budget and `c`'s client's share. */
int rv_budget_output_fits(const struct rv_conn *c, size_t len);
/* Returns: the oldest idle anonymous connection other than `newcomer` (it goes when the
 * connection table is full), or NULL when there is none. */
struct rv_conn *rv_budget_room_victim(struct rv_server *srv, const struct rv_conn *newcomer);
/* Returns: the oldest anonymous connection of `newcomer`'s client that is between requests, no
 * request's headers or body in progress (it goes when the client is at
 * --max-connections-per-address), or NULL when it has none. */
struct rv_conn *rv_budget_share_victim(struct rv_server *srv, const struct rv_conn *newcomer);

/* ui.c: GET / and /ui, the status page. */
void rv_ui_register(struct rv_server *srv);

#endif
