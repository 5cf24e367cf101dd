/* musterd inside another program: the one rendezvous header a program outside rendezvous/ may
 * include (CMake exports only this folder). `muster run`'s local scheduler and
 * `muster agent --standalone` serve the etcd v2 keys API and the native /v1 rendezvous from
 * their own libuv loop this way:
 *
 *   struct rv_server_config cfg;
 *   rv_server_config_init(&cfg);
 *   cfg.listen_host = "127.0.0.1"; cfg.listen_port = 0;
 *   struct rv_server *srv = rv_server_new(loop, &cfg);   (the /v2 and /v1 routes registered)
 *   rc = rv_server_listen(srv);                          (binds; then rv_server_port(srv))
 *   ... uv_run(loop) ...
 *   rv_server_close(srv, on_closed, data);               (on_closed fires once srv is freed)
 *
 * rv_server_listen_c10d() adds PyTorch's TCPStore protocol (torchrun --rdzv_backend c10d) on a
 * second address, over the same store.
 *
 * One struct rv_server per loop; it uses no globals, so several can run in one process on
 * different loops (threads). Everything runs on the loop's thread. The names keep the server
 * core's `rv_` prefix: this is the core's own lifecycle, seen from outside.
 */
#ifndef MUSTERD_EMBED_H
#define MUSTERD_EMBED_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

struct rv_server;

struct rv_server_config {
  const char *listen_host;    /* default "127.0.0.1"; borrowed until rv_server_listen() returns */
  int listen_port;            /* default 2379; 0 = any free port (see rv_server_port()) */
  const char *advertise_url;  /* /v2/machines answer; NULL = http://<bound host>:<bound port> */
  const char *name;           /* member name in /v2/members and /v2/stats/self; default "musterd" */
  unsigned max_connections;   /* default 10000; the excess connection gets 503 and is closed */
  size_t max_body_bytes;      /* default 1 MiB -> 413 */
  size_t max_header_bytes;    /* request line + headers, default 16 KiB, at most 60000 -> 431 */
  size_t max_url_bytes;       /* default 8 KiB -> 414 */
  size_t max_output_bytes;    /* unsent output per connection, default 8 MiB -> close */
  uint64_t idle_timeout_ms;   /* default 300000; 0 = never. Deferred requests are exempt */
  uint64_t header_timeout_ms; /* default 10000: a request's line and headers (and a TLS
                               * handshake) must arrive within it, else close; 0 = never */
  uint64_t body_timeout_ms;   /* default 60000: its body, after the headers; 0 = never */
  uint64_t write_timeout_ms;  /* default 60000: a write that makes no progress; 0 = never */
  unsigned max_connections_per_address; /* default 1000; one client address's excess
                                         * connection gets 503 and is closed */
  size_t max_body_bytes_per_address;    /* default 8 MiB: bodies in progress from one client
                                         * address; past it 503 and close */
  size_t max_buffer_bytes;              /* default 256 MiB: what all connections buffer (requests,
                                         * stashed input, unsent answers) */
  size_t max_buffer_bytes_per_client;   /* default 32 MiB: the same for one client */
  unsigned client_prefix_v4;    /* default 32: IPv4 addresses in one prefix are one client */
  unsigned client_prefix_v6;    /* default 64: the same for IPv6 */
  int log_requests;             /* one log line per request (mu_log at INFO) */
  const char **allowed_origins; /* pages other than musterd's own that browsers may use it from
                                 * ("https://dash.example:8443"); copied */
  size_t nallowed_origins;
  int no_v2; /* do not register the etcd v2 API (tests) */

  /* the TCPStore listener (rv_server_listen_c10d) */
  uint64_t c10d_max_value_bytes; /* one value's bytes (0: 8 MiB, torch's) */
  uint64_t c10d_max_keys;        /* keys and queued items (0: 1,000,000) */
  uint64_t c10d_max_store_bytes; /* what keys, values and items hold (0: 128 MiB) */

  const char *token_file; /* require `Authorization: Bearer TOKEN` on /v1 and /v2, the tokens
                           * read from this file as musterd's --token-file reads it
                           * (docs/security.md); NULL = anyone who reaches the port may */
  const char *tls_cert_file, *tls_key_file; /* serve HTTPS (musterd's --tls-cert, --tls-key);
                                             * NULL = plain HTTP */
  const char *tls_client_ca_file;           /* clients must present a certificate signed by
                                             * this CA (--tls-client-ca); NULL = none asked */
};

/* Fills `cfg` with the defaults above. */
void rv_server_config_init(struct rv_server_config *cfg);

/* Creates a server on `loop` with every API musterd serves: /version, /health, /healthz,
 * /metrics, the etcd v2 API (/v2/keys, /v2/members, ...; unless cfg->no_v2) and the native
 * rendezvous (/v1/runs/...), behind the credentials of cfg->token_file and the TLS of
 * cfg->tls_*. Does not listen yet.
 * Returns: the server; NULL only when a file of cfg->token_file or cfg->tls_* cannot be loaded
 * (musterd with the same options says why). Aborts on OOM.
 * Ownership: the config is copied (strings duplicated); the loop is borrowed and must outlive
 * the server. Free with rv_server_close(). */
struct rv_server *rv_server_new(uv_loop_t *loop, const struct rv_server_config *cfg);

/* Binds and listens on cfg.listen_host:cfg.listen_port.
 * Returns: 0, or a negative libuv code (UV_EADDRINUSE, UV_EADDRNOTAVAIL, UV_EINVAL for an
 * unparsable host). */
int rv_server_listen(struct rv_server *srv);

/* Returns: the bound port (useful after listening on port 0), or 0 before rv_server_listen(). */
int rv_server_port(const struct rv_server *srv);

/* Returns: the advertised client URL ("http://127.0.0.1:2379"). Ownership: borrowed, lives as
 * long as the server. */
const char *rv_server_url(const struct rv_server *srv);

/* Serves PyTorch's TCPStore protocol (docs/c10d.md) on host:port, exactly that address (port 0:
 * any free port), over the server's store: its keys are kept, logged and synced as /v2's. The
 * protocol has no credentials: bind it to an address only the job reaches (docs/security.md).
 * Returns: 0, or a negative libuv code (UV_EADDRINUSE, UV_EINVAL for an unparsable host), or
 * MU_ENOENT when the server has no v2 store (cfg.no_v2), MU_EEXIST when listening already. */
int rv_server_listen_c10d(struct rv_server *srv, const char *host, int port);

/* Returns: the TCPStore listener's bound port, or 0 when it does not listen. */
int rv_server_c10d_port(const struct rv_server *srv);
/* Calls `cb(data, run_id)` on the server's loop after every event of a /v1 run but a join (a
 * round closed or broke, its workers started or made their first progress, a node became
 * unhealthy, the run ended): what the status page follows. One listener; NULL removes it. */
typedef void rv_run_event_cb(void *data, const char *run_id);
void rv_server_on_run_event(struct rv_server *srv, rv_run_event_cb *cb, void *data);

/* The run as GET /v1/runs/{run_id} answers it (its round, members, restart budget, unhealthy
 * nodes and timings: docs/rendezvous.md).
 * Returns: the JSON text, or NULL when there is no such run. Ownership: caller frees with
 * free() of the allocator (mu_free()). */
char *rv_server_run_json(struct rv_server *srv, const char *run_id);

typedef void rv_server_closed_cb(void *data);

/* Graceful shutdown: stops accepting, tells every deferred request's owner, lets already-queued
 * replies drain (bounded), closes every connection and every API's state, and once every
 * handle the server owns is closed, frees the server and calls `cb(data)` (cb may be NULL).
 * After the callback the loop holds no handle of the server, so uv_loop_close() can succeed.
 * Calling it twice is a no-op. Ownership: the server is freed before cb runs. */
void rv_server_close(struct rv_server *srv, rv_server_closed_cb *cb, void *data);

#endif
