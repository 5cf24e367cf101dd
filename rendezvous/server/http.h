/* musterd's HTTP contract: what a request handler sees and how it answers.
 *
 * The server core (server.c, conn.c, router.c) owns sockets, parsing (llhttp), limits and
 * keep-alive. Modules (the etcd v2 keys API in v2_*.c, the native rendezvous in v1_*.c)
 * register routes and answer requests through the functions below; they never touch a socket.
 *
 * A handler is called once per request, on the loop thread, with a `struct rv_req`. Before it
 * returns it must do exactly one of:
 *   - answer at once: rv_reply() (or rv_reply_text(), rv_reply_take());
 *   - defer: rv_req_defer(req, on_gone, data), keep the pointer and answer later from any loop
 *     callback (a timer, another request's handler) with rv_reply(), or stream with
 *     rv_reply_start() + rv_reply_chunk() + rv_reply_end().
 * A handler that does neither gets a 500 from the core.
 *
 * While a request is deferred, the connection parses nothing more (pipelined requests wait
 * and are answered in order afterwards) and is exempt from the idle timeout. If the client
 * goes away (or the server shuts down) before the answer is complete, `on_gone(req, data)` is
 * called once; from then on `req` is dead: never touch it again. on_gone is never called for a
 * request that has been fully answered (rv_reply() or rv_reply_end() returned).
 *
 * Embedding (muster run's local scheduler, muster agent --standalone):
 *
 *   struct rv_server_config cfg;
 *   rv_server_config_init(&cfg);
 *   cfg.listen_host = "127.0.0.1"; cfg.listen_port = 0;
 *   struct rv_server *srv = rv_server_new(loop, &cfg);   (registers /v2 and /v1 routes)
 *   rc = rv_server_listen(srv);                          (binds; then rv_server_port(srv))
 *   ... uv_run(loop) ...
 *   rv_server_close(srv, on_closed, data);               (on_closed fires once srv is freed)
 *
 * One struct rv_server per loop; it uses no globals, so several can run in one process on
 * different loops (threads).
 */
#ifndef RV_HTTP_H
#define RV_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "buf.h"

struct rv_server;
struct rv_req;

/* ---------------------------------------------------------------------------------------------
 * Server configuration and lifecycle
 */

struct rv_server_config {
  const char *listen_host;   /* default "127.0.0.1"; borrowed until rv_server_listen() returns */
  int listen_port;           /* default 2379; 0 = any free port (see rv_server_port()) */
  const char *advertise_url; /* /v2/machines answer; NULL = http://<bound host>:<bound port> */
  const char *name;          /* member name in /v2/members and /v2/stats/self; default "musterd" */
  unsigned max_connections;  /* default 10000; the excess connection gets 503 and is closed */
  size_t max_body_bytes;     /* default 1 MiB -> 413 */
  size_t max_header_bytes;   /* request line + headers, default 16 KiB, at most 60000 -> 431 */
  size_t max_url_bytes;      /* default 8 KiB -> 414 */
  size_t max_output_bytes;   /* unsent output per connection, default 8 MiB -> close */
  uint64_t idle_timeout_ms;  /* default 300000; 0 = never. Deferred requests are exempt */
  int log_requests;          /* one log line per request (mu_log at INFO) */
  int no_v2;                 /* do not register the etcd v2 API (tests) */
};

/* Fills `cfg` with the defaults above. */
void rv_server_config_init(struct rv_server_config *cfg);

/* Creates a server on `loop` and registers the built-in routes (/v2/..., /version, /healthz,
 * /metrics) and, when built with rendezvous/v1.h, the /v1 routes. Does not listen yet.
 * Returns: the server (never NULL; aborts on OOM).
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

/* Returns: the loop the server runs on (for module timers). */
uv_loop_t *rv_server_loop(const struct rv_server *srv);

typedef void rv_server_closed_cb(void *data);

/* Graceful shutdown: stops accepting, tells every deferred request's owner (on_gone), lets
 * already-queued replies drain (bounded), closes every connection, calls each module's
 * `close`, and once every handle the server (and its modules, see rv_server_ref()) owns is
 * closed, frees the server and calls `cb(data)` (cb may be NULL). After the callback, the loop
 * holds no handle of the server, so uv_loop_close() can succeed. Calling it twice is a no-op.
 * Ownership: the server is freed before cb runs; do not touch it afterwards. */
void rv_server_close(struct rv_server *srv, rv_server_closed_cb *cb, void *data);

/* Keeps the server from finishing rv_server_close() until a matching rv_server_unref(): a
 * module that closes its own uv handles in its `close` hook refs once per handle and unrefs
 * in each handle's close callback. */
void rv_server_ref(struct rv_server *srv);
void rv_server_unref(struct rv_server *srv);

/* Returns: 1 once rv_server_close() has started, else 0. Modules use it to refuse new long
 * polls during shutdown. */
int rv_server_closing(const struct rv_server *srv);

/* ---------------------------------------------------------------------------------------------
 * Modules: state hung on the server, shutdown hook, extra metrics
 */

struct rv_module {
  const char *name; /* e.g. "rdzv", "v2"; static string */
  void *data;       /* the module's state */
  /* Called once at the start of rv_server_close(), after deferred requests have had on_gone.
   * Stop timers and uv_close() handles here (with rv_server_ref/unref around each), and free
   * the module's state when the last handle is closed. May be NULL. */
  void (*close)(struct rv_server *srv, void *data);
  /* Appends Prometheus text lines to `out` for GET /metrics. May be NULL. */
  void (*metrics)(struct rv_server *srv, void *data, struct mu_buf *out);
};

/* Registers a module (copied). Returns: 0, or MU_EEXIST if the name is taken. */
int rv_server_add_module(struct rv_server *srv, const struct rv_module *mod);

/* Returns: the `data` of the module called `name`, or NULL. */
void *rv_server_module_data(const struct rv_server *srv, const char *name);

/* ---------------------------------------------------------------------------------------------
 * Routes
 */

enum rv_method {
  RV_GET = 1 << 0,
  RV_HEAD = 1 << 1, /* answered as GET without the body */
  RV_PUT = 1 << 2,
  RV_POST = 1 << 3,
  RV_DELETE = 1 << 4,
  RV_PATCH = 1 << 5,
  RV_OPTIONS = 1 << 6,
  RV_OTHER = 1 << 7, /* any other method llhttp knows */
};

typedef void rv_handler_fn(struct rv_req *req);

enum rv_route_flags {
  RV_ROUTE_PREFIX = 1 << 0, /* `path` is a prefix ("/v1/"); else it must match exactly */
  RV_ROUTE_FORM = 1 << 1,   /* parse an application/x-www-form-urlencoded body into params */
  RV_ROUTE_CORS = 1 << 2,   /* etcd's CORS headers on every answer; OPTIONS answered 200 */
};

struct rv_route {
  unsigned methods; /* OR of enum rv_method; another method gets 405 with Allow */
  const char *path; /* decoded path, e.g. "/v2/keys/" with RV_ROUTE_PREFIX */
  unsigned flags;   /* enum rv_route_flags */
  rv_handler_fn *fn;
  const char *name; /* label for /metrics and logs, e.g. "v2_keys" */
};

/* Adds routes, from `routes` up to a row with fn == NULL. The longest matching path wins;
 * exact rows beat prefix rows of the same length. Checks done before any handler runs: the
 * 301 for `//` and `..` paths, limits (413/414/431), method (405), unknown path (404).
 * Returns: 0. Ownership: the rows (and their strings) are borrowed: keep them static. */
int rv_server_add_routes(struct rv_server *srv, const struct rv_route *routes);

/* ---------------------------------------------------------------------------------------------
 * Requests
 */

struct rv_param {
  const char *name;  /* decoded ('+' -> ' ', %XX), NUL-terminated */
  const char *value; /* decoded; "" for `name` without `=` */
};

/* What a handler reads. Everything is valid until the request is answered or on_gone fires. */
struct rv_req {
  struct rv_server *srv;
  unsigned method;         /* one enum rv_method bit */
  const char *method_name; /* "GET", ... */
  const char *path;        /* decoded (%XX; '+' stays '+'), without the query */
  size_t path_len;
  const char *query;  /* raw query string after '?', "" if none */
  const char *target; /* the raw request target as sent */
  const char *body;   /* raw body, NUL-terminated ("" if none) */
  size_t body_len;
  const struct rv_param *params; /* form body params first, then query params */
  size_t nparams;
  const struct rv_route *route; /* the route that matched */
  void *user;                   /* free for the handler (e.g. its watcher) */
};

/* Returns: the value of the first param called `name` (form body first, then query, as Go's
 * FormValue does), or NULL if absent. Ownership: borrowed, as the request. */
const char *rv_req_param(const struct rv_req *req, const char *name);

/* Returns: the value of header `name` (case-insensitive), or NULL.
 * Ownership: borrowed, as the request. */
const char *rv_req_header(const struct rv_req *req, const char *name);

/* ---------------------------------------------------------------------------------------------
 * Replies
 */

/* Sends a complete response: status line, Content-Type (omitted when NULL), Content-Length,
 * Date, `extra_headers` (preformatted "Name: value\r\n" lines, or NULL), and the body (not for
 * HEAD). Usable at once in the handler or later on a deferred request. After it returns the
 * request is finished: never touch `req` again.
 * Ownership: all arguments are copied. */
void rv_reply(struct rv_req *req, int status, const char *content_type, const char *extra_headers,
              const void *body, size_t len);

/* As rv_reply() with a NUL-terminated body. */
void rv_reply_text(struct rv_req *req, int status, const char *content_type, const char *body);

/* As rv_reply(), taking the body from `body` (the buffer is left empty). Saves a copy. */
void rv_reply_take(struct rv_req *req, int status, const char *content_type,
                   const char *extra_headers, struct mu_buf *body);

/* A JSON error for /v1-style APIs: {"error":"<code>","message":"<message>"} with `status`. */
void rv_reply_error(struct rv_req *req, int status, const char *code, const char *message);

/* Called when the client of a deferred request disconnects or the server shuts down. After
 * it returns, `req` is freed. Never called after the request was fully answered. */
typedef void rv_gone_cb(struct rv_req *req, void *data);

/* Keeps the request open after the handler returns. Call from inside the handler only.
 * Ownership: `data` is borrowed and handed back to on_gone. */
void rv_req_defer(struct rv_req *req, rv_gone_cb *on_gone, void *data);

/* Streaming (etcd watch): sends the status line and headers now with
 * Transfer-Encoding: chunked; the request must be (or become, by this call) deferred so that
 * the body can follow. Then any number of rv_reply_chunk() and one rv_reply_end(), which
 * finishes the request. on_gone may still fire between start and end. */
void rv_reply_start(struct rv_req *req, int status, const char *content_type,
                    const char *extra_headers);
void rv_reply_chunk(struct rv_req *req, const void *data, size_t len);
void rv_reply_end(struct rv_req *req);
/* rv_reply_chunk(data) + rv_reply_end() in one write (a watch answering its one event). */
void rv_reply_finish(struct rv_req *req, const void *data, size_t len);

/* Hands the output queued on the request's connection to the kernel now, even from inside
 * the handler (normally a connection's answers are flushed once its read is processed). Call
 * it right after answering, before work that must not delay the answer: a write that wakes
 * thousands of watchers answers its writer first. `req` may already be answered; the
 * connection lives until the next loop iteration. */
void rv_req_flush(struct rv_req *req);

/* ---------------------------------------------------------------------------------------------
 * Without sockets (unit tests, the fuzzer)
 */

/* Feeds `data` as the bytes a client sent on one fresh connection, then end of input, and
 * appends every byte the server would have written to `out`. Deferred requests still open at
 * the end get on_gone. Runs handlers synchronously; timers are not run.
 * Returns: 0, or MU_E2BIG if `out` filled up. */
int rv_server_feed(struct rv_server *srv, const char *data, size_t len, struct mu_buf *out);

#endif
