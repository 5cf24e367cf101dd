/* The server layer (rendezvous/server/): musterd's HTTP core, and the contract every API above
 * it is written against.
 *
 * Owns: the listener and connections (server.c, conn.c), parsing with llhttp, limits,
 * keep-alive and pipelining, TLS on the wire (tls.h), the route table and the checks made
 * before any handler (router.c), the reply writer, and the routes every server answers:
 * /version, /health, /healthz, /metrics (status.c).
 * May call: common/ only. The APIs above (etcd/, rdzv/), the security layer and persistence
 * plug in through this header: routes with flags, modules, the gate, the refusal and usage
 * hooks of an API. Nothing here knows what a key, a run or a quota is.
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
 */
#ifndef MUSTERD_SERVER_HTTP_H
#define MUSTERD_SERVER_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "buf.h"
#include "list.h"
#include "musterd/embed.h"

struct rv_req;
struct rv_tls;
struct rv_conn;

/* ---------------------------------------------------------------------------------------------
 * The server core
 */

/* Creates the server core alone on `loop`: the status routes (/version, /health, /healthz,
 * /metrics) and no API; the APIs register their routes and modules on it (rv_server_new() in
 * embed.h does it for every API musterd has). Same contract as rv_server_new(). */
struct rv_server *rv_server_create(uv_loop_t *loop, const struct rv_server_config *cfg);

/* Returns: the configuration in use (limits clamped, strings owned by the server). */
const struct rv_server_config *rv_server_config(const struct rv_server *srv);

/* Returns: the loop the server runs on (for module timers). */
uv_loop_t *rv_server_loop(const struct rv_server *srv);

/* Keeps the server from finishing rv_server_close() until a matching rv_server_unref(): a
 * module that closes its own uv handles in its `close` hook refs once per handle and unrefs
 * in each handle's close callback. */
void rv_server_ref(struct rv_server *srv);
void rv_server_unref(struct rv_server *srv);

/* Returns: 1 once rv_server_close() has started, else 0. Modules use it to refuse new long
 * polls during shutdown. */
int rv_server_closing(const struct rv_server *srv);

/* Serves HTTPS with `tls` (see tls.h) on the connections accepted from now on; call before
 * rv_server_listen(). Returns: 0, or MU_EEXIST when TLS is set already.
 * Ownership: takes `tls`; the server frees it after its last connection. */
int rv_server_set_tls(struct rv_server *srv, struct rv_tls *tls);

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

/* Registers a module (copied). Modules close and report metrics in registration order.
 * Returns: 0, or MU_EEXIST if the name is taken (or every slot is). */
int rv_server_add_module(struct rv_server *srv, const struct rv_module *mod);

/* Returns: the `data` of the module called `name`, or NULL. */
void *rv_server_module_data(const struct rv_server *srv, const char *name);

/* ---------------------------------------------------------------------------------------------
 * The durability barrier (group commit)
 */

/* A module whose writes become durable after they are applied (persistence in --fsync batch)
 * installs a barrier: every byte of output a connection queues while `need(data)` names a
 * record not yet durable is held, with everything queued after it on that connection, until
 * rv_server_durable() says that record is durable. So no reply, error, header or watch event
 * can reveal a write a crash would lose (linearizable across kill -9), while the loop keeps
 * serving and writes are synced in batches. */
struct rv_barrier {
  /* The sequence number of the newest record a reply made now may reveal, or 0 when every
   * such record is durable already (as later reported by rv_server_durable()). */
  uint64_t (*need)(void *data);
  /* NULL when writes are taken; else why they are not (a disk error): every request that may
   * write (PUT, POST, DELETE, PATCH) is then refused with RV_REFUSE_READ_ONLY before its handler
   * runs. Ownership: the text is borrowed until the next call. May be NULL (always writable). */
  const char *(*read_only)(void *data);
  /* While records are held by a disk error (read_only set): the store index at which a read of
   * store path `key` (the key, or a dir's listing) may be answered at once, because no record
   * still held touches it or a path above or under it; 0 when it must wait for them like any
   * output (also whenever no disk error holds records). May be NULL. */
  uint64_t (*read_index)(void *data, const char *key);
  void *data;
};

/* Installs the barrier (copied; NULL removes it and releases every held output).
 * Ownership: `b->data` is borrowed until the barrier is removed or the server freed. */
void rv_server_set_barrier(struct rv_server *srv, const struct rv_barrier *b);

/* Every record up to sequence number `done` is durable: sends the output held for them. */
void rv_server_durable(struct rv_server *srv, uint64_t done);

/* The barrier's read_index for a read of `key` (0: none, or the read must wait). */
uint64_t rv_server_read_index(struct rv_server *srv, const char *key);

/* Calls fn(data) with the output it queues not held by the barrier: for a reply that reveals no
 * record still held (see read_index). */
void rv_server_unheld(struct rv_server *srv, void (*fn)(void *data), void *data);

/* ---------------------------------------------------------------------------------------------
 * Other listeners: what a protocol outside HTTP (rendezvous/c10d/, PyTorch's TCPStore) shares
 * with the HTTP connections: the durability barrier, the read-only state, the per-address
 * shares
 */

/* Output that does not go through rv_reply() waits for the barrier on one of these: a listener
 * stamps what it queues with rv_server_barrier_need(), and while rv_server_is_durable() says
 * no, holds it with rv_server_hold(). */
struct rv_hold {
  struct mu_list_node link; /* on the server's list while held */
  uint64_t need;            /* the sequence number the output waits for */
  int held;                 /* on the list */
  /* Called once rv_server_durable() passes `need` (or the barrier is removed), after `h` is off
   * the list: send the output now. */
  void (*release)(struct rv_hold *h);
};

/* Returns: the barrier's sequence number for output queued now (0: nothing to wait for). */
uint64_t rv_server_barrier_need(struct rv_server *srv);

/* Returns: 1 when output stamped `need` may be sent now, else 0. */
int rv_server_is_durable(const struct rv_server *srv, uint64_t need);

/* Holds `h` (h->need set) until rv_server_durable() passes h->need; a held `h` only moves its
 * need up. Ownership: `h` is borrowed until released or rv_server_unhold(). */
void rv_server_hold(struct rv_server *srv, struct rv_hold *h);

/* Takes `h` off the list without calling release (its owner goes away). Accepts one not held. */
void rv_server_unhold(struct rv_server *srv, struct rv_hold *h);

/* Returns: why writes are refused now (the barrier's read_only: a disk error), or NULL.
 * Ownership: borrowed until the next call. */
const char *rv_server_read_only(struct rv_server *srv);

struct rv_addr;

/* Takes a share of client address `peer` ("" takes nothing: *out NULL) for a connection of
 * another listener (the TCPStore's): it counts in the client's memory and body budgets with
 * its HTTP connections, but has a --max-connections-per-address of its own, so that those
 * connections, which never authenticate, cannot take the share of the client's HTTP ones.
 * Returns: 0 with *out set, or MU_E2BIG (counted, nothing taken) when the address has that many
 * such connections. Ownership: give it back with rv_server_addr_put(). */
int rv_server_addr_take(struct rv_server *srv, const char *peer, struct rv_addr **out);

/* Gives back a share from rv_server_addr_take() (NULL is a no-op). */
void rv_server_addr_put(struct rv_server *srv, struct rv_addr *a);

/* Counts `n` bytes of a message in progress (a frame not complete yet) against the bounds of
 * request bodies: all connections together (64 x --max-body-bytes) and the address `a` (may
 * be NULL) (--max-body-bytes-per-address). Returns: 0, or MU_E2BIG (counted, nothing taken). */
int rv_server_bytes_take(struct rv_server *srv, struct rv_addr *a, size_t n);

/* Gives back `n` bytes counted by rv_server_bytes_take(). */
void rv_server_bytes_put(struct rv_server *srv, struct rv_addr *a, size_t n);

/* The client of peer address `sa` as HTTP connections count it (budget.c): the address, or its
 * prefix under --client-prefix-v4/-v6 ("10.0.0.0/24"), written into out (size >= 64).
 * Returns: its length, 0 when `sa` is neither IPv4 nor IPv6 (out ""). */
size_t rv_server_client_key(const struct rv_server *srv, const struct sockaddr *sa, char *out,
                            size_t size);

/* Counts `n` more bytes buffered by a connection that is not HTTP in the one memory budget
 * (budget.c): all connections' buffers together (--max-buffer-bytes) and client `a`'s (may be
 * NULL) (--max-buffer-bytes-per-client). Returns: 0, or MU_E2BIG (counted in
 * musterd_budget_refused_total, nothing taken). */
int rv_server_budget_take(struct rv_server *srv, struct rv_addr *a, size_t n);

/* Gives back `n` bytes counted by rv_server_budget_take(). */
void rv_server_budget_put(struct rv_server *srv, struct rv_addr *a, size_t n);

/* Returns: the option `n` more bytes of client `a` would pass ("--max-buffer-bytes-per-client"
 * or "--max-buffer-bytes", for a log line that names the limit) with its value in `*value`, or
 * NULL when they fit. */
const char *rv_server_budget_limit(const struct rv_server *srv, const struct rv_addr *a, size_t n,
                                   size_t *value);

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

/* What a row is and what its requests do, as redis's command flags: the router reads the
 * matching flags, and the gate (quotas, credentials) reads the intent flags of the matched row
 * instead of looking at URLs. */
enum rv_route_flags {
  /* matching */
  RV_ROUTE_PREFIX = 1 << 0, /* `path` is a prefix ("/v2/keys/"): every path below it matches */
  RV_ROUTE_SLASH = 1 << 1,  /* the path with one trailing '/' matches too */
  RV_ROUTE_REST = 1 << 2,   /* the last {var} takes the rest of the path, '/' included */
  /* what the router does */
  RV_ROUTE_FORM = 1 << 3, /* parse an application/x-www-form-urlencoded body into params */
  RV_ROUTE_CORS = 1 << 4, /* etcd's CORS headers on every answer; OPTIONS answered 200 */
  /* intent, for the gate */
  RV_ROUTE_PUBLIC = 1 << 5,    /* no credentials needed, even when the server requires them */
  RV_ROUTE_LONG_POLL = 1 << 6, /* parks until an event or a timeout (join, watch, barrier) */
  RV_ROUTE_MAY_POLL = 1 << 7,  /* a long poll when the API's usage hook says so (?wait=true) */
  RV_ROUTE_WRITE = 1 << 8,     /* stores a value: sized and counted by the API's usage hook */
  RV_ROUTE_UNHELD = 1 << 9,    /* the answer reveals no stored state (health, metrics): sent at
                                * once, even while the durability barrier holds other output */
};

/* Why the server (or its gate) refuses a request before its handler runs. */
enum rv_refusal_kind {
  RV_REFUSE_METHOD = 1,      /* 405: the path does not take this method */
  RV_REFUSE_NO_CREDENTIALS,  /* 401: credentials are required and none came */
  RV_REFUSE_BAD_CREDENTIALS, /* 401: the token or user/password is not valid */
  RV_REFUSE_TOO_LARGE,       /* 413: a value over a quota */
  RV_REFUSE_TOO_MANY,        /* 429: a count (keys, long polls) at its quota */
  RV_REFUSE_READ_ONLY,       /* 503: writes are refused for now (the barrier's read_only) */
  RV_REFUSE_FORBIDDEN,       /* 403: the credential's scopes do not cover the request */
};

struct rv_refusal {
  enum rv_refusal_kind kind;
  const char *message;   /* what was refused and the fix (NULL for RV_REFUSE_METHOD) */
  unsigned allow;        /* RV_REFUSE_METHOD: the methods the path takes (enum rv_method) */
  const char *challenge; /* 401: the "WWW-Authenticate: ...\r\n" lines naming every scheme the
                          * server takes (a browser asks for a user and password only when
                          * Basic is among them); NULL: none */
};

/* What a request would use, as the API that owns its route sees it: the numbers the quotas
 * compare with their limits. Zeroed before the hook runs; it sets what applies. */
struct rv_usage {
  int poll;           /* RV_ROUTE_MAY_POLL rows: this request is a long poll */
  int has_value;      /* RV_ROUTE_WRITE rows: the request carries a value ... */
  uint64_t value_len; /* ... of this many bytes */
  int counts_keys;    /* the API keeps a server-wide key count (the etcd v2 store) ... */
  uint64_t keys;      /* ... holding this many keys and dirs ... */
  int adds_key;       /* ... and this write would add this many (the key, missing dirs) */
  const char *scope;  /* what per-scope quotas count in (a /v1 run id), NULL when none */
  size_t scope_len;
  int scope_known;          /* the scope exists: the numbers below are set (writes only) */
  uint64_t scope_keys;      /* keys the scope holds */
  uint64_t scope_bytes;     /* value bytes the scope holds */
  int scope_adds_key;       /* the write would add a key to the scope */
  uint64_t scope_old_bytes; /* bytes of the value the write replaces */
  uint64_t scope_new_bytes; /* bytes the write stores */
};

/* What a credential may do (see "Credentials and their scopes" below). */
enum rv_access { RV_READ = 1 << 0, RV_WRITE = 1 << 1 };

enum rv_scope_kind {
  RV_SCOPE_KEY = 1, /* a v2 key path ("/team-a/x"): keys=PREFIX */
  RV_SCOPE_RUN,     /* a /v1 run id: runs=GLOB */
};

/* What one request reads or writes, as its API names it for credentials' scopes. */
struct rv_target {
  enum rv_scope_kind kind;
  const char *name; /* the key path or run id */
  size_t len;
  unsigned access; /* RV_READ or RV_WRITE */
  char *owned;     /* freed by the router when the hook allocated `name` */
};

/* An API (a family of rows): how it words what the server refuses on its routes, and what its
 * requests would use. Static; shared by the API's rows. */
struct rv_api {
  const char *name;
  /* Answers `req` refused for `r` in the API's own error shape. Returns: 1 when it answered,
   * 0 to let the server answer in plain text. May be NULL (the server answers). */
  int (*refuse)(struct rv_req *req, const struct rv_refusal *r);
  /* Fills `u` for a request on a row with RV_ROUTE_MAY_POLL, RV_ROUTE_WRITE or
   * RV_ROUTE_LONG_POLL (called only while quotas are set). May be NULL. */
  void (*usage)(struct rv_req *req, struct rv_usage *u);
  /* Names what `req` reads or writes (called when the request carries a credential, before the
   * quotas, so that a request outside its scopes learns nothing from them). Returns: 1 with `t`
   * filled, or 0 when the request names no one object (a listing that the handler filters).
   * The router refuses (403) what the credential may not reach, except a read of a v2 dir on
   * the way to its keys, which the handler lists filtered. May be NULL. */
  int (*target)(struct rv_req *req, struct rv_target *t);
};

struct rv_route {
  unsigned methods; /* OR of enum rv_method; another method is refused (405) */
  /* Decoded path: "/v2/keys" exact, "/v2/keys/" with RV_ROUTE_PREFIX, or a pattern whose
   * "{name}" segments match one non-empty segment each ("/v1/runs/{run_id}/join"; the last one
   * takes the rest with RV_ROUTE_REST). Matched values go to req->vars, in order. */
  const char *path;
  unsigned flags; /* enum rv_route_flags */
  rv_handler_fn *fn;
  const char *name;         /* label for /metrics and logs, e.g. "v2_keys" */
  const struct rv_api *api; /* NULL: the server words its refusals */
};

#define RV_ROUTE_MAX_VARS 4

/* Adds routes, from `routes` up to a row with fn == NULL. The most specific match wins: a row
 * matching the whole path beats a prefix row, the longest prefix wins, an exact row beats a
 * pattern. Rows with the same path and different methods form one resource: a method none of
 * them takes is refused with 405 naming all of theirs.
 * Returns: 0. Ownership: the rows (and their strings) are borrowed: keep them static. */
int rv_server_add_routes(struct rv_server *srv, const struct rv_route *routes);

/* ---------------------------------------------------------------------------------------------
 * Credentials and their scopes
 *
 * The gate (the security layer) verifies a request's credential and hangs it on the request
 * (req->cred); every API decides with rv_cred_allows() whether it may read or write what the
 * request names, and words a refusal with rv_refuse_scope(): 403, naming the scope the
 * credential lacks by its id (a hash), never its secret, and never saying whether the object
 * exists. Listings show a credential only what it may read (rv_cred_above() for the dirs on the
 * way to its keys). Anything that stores keys (the v2 store, PyTorch's TCPStore keys under their
 * prefix) calls rv_cred_allows(cred, RV_SCOPE_KEY, path, len, access) with the key's path in the
 * v2 key space; /v1 calls it with RV_SCOPE_RUN and the run id.
 */

struct rv_cred {
  char id[24];       /* "credential#1a2b3c4d": 32 bits of the SHA-256 of its secret */
  int read_only;     /* read-only: no PUT, POST, DELETE, PATCH anywhere */
  int scoped;        /* runs= or keys= given: only what they name */
  const char **runs; /* runs=GLOB (fnmatch(3), '/' not special) */
  size_t nruns;
  const char **keys; /* keys=PREFIX, as paths without a trailing '/' ("" for keys=/): the key
                      * itself and everything under it */
  size_t nkeys;
  uint64_t quota_watchers;    /* long polls open at once with this credential (0: no limit) */
  uint64_t quota_value_bytes; /* one value it writes (0: no limit) */
};

/* Returns: 1 when `cred` may `access` (RV_READ, RV_WRITE) the object `name` (`len` bytes) of
 * `kind`; NULL (no credentials configured, or a public route) may everything. */
int rv_cred_allows(const struct rv_cred *cred, enum rv_scope_kind kind, const char *name,
                   size_t len, unsigned access);

/* Returns: 1 when v2 key path `key` is a dir on the way to a keys= prefix of `cred` (a listing
 * or watch of it shows only what lies in the prefixes), 0 otherwise (also when `cred` may read
 * the key itself: check rv_cred_allows() first). */
int rv_cred_above(const struct rv_cred *cred, const char *key, size_t len);

/* Writes the sentence of a 403 for `cred` lacking `access` to `name`: its id, what it lacks and
 * the scopes it has (never a secret, never whether `name` exists). */
void rv_cred_refusal(const struct rv_cred *cred, enum rv_scope_kind kind, const char *name,
                     unsigned access, char *out, size_t size);

/* Answers `req` 403 (RV_REFUSE_FORBIDDEN, in its API's shape) for lacking `access` to `name`.
 * Finishes the request. */
void rv_refuse_scope(struct rv_req *req, enum rv_scope_kind kind, const char *name,
                     unsigned access);

/* Looks up the credential of an Authorization value through the gate (for a protocol that
 * authenticates outside HTTP, or tests). Returns: 1 with *cred set (NULL when the server takes
 * anyone), or 0 when the value names no valid credential. */
int rv_server_credential(struct rv_server *srv, const char *authorization,
                         const struct rv_cred **cred);

/* ---------------------------------------------------------------------------------------------
 * The gate: checks around every routed request (the security layer installs it)
 */

/* What the gate's `admit` took for one request (a long poll counted against quotas), kept by
 * the connection and handed back to `release` when the request ends, however it ends. Zeroed
 * = holds nothing. Opaque to the server. */
struct rv_ticket {
  void *held[3];
  int counted;
};

struct rv_gate {
  void *data;
  /* Right after the route is known, before the method check. Returns: 0 to go on, 1 when it
   * answered the request (use rv_refuse()). */
  int (*auth)(void *data, struct rv_req *req);
  /* Right before the handler; `peer` is the client address ("" when not recorded).
   * Returns: 0 to go on (with `t` filled when something was taken), 1 when it answered. */
  int (*admit)(void *data, struct rv_req *req, const char *peer, struct rv_ticket *t);
  /* Gives back what `t` holds (only called for a ticket with `counted` set). */
  void (*release)(void *data, struct rv_ticket *t);
  /* Frees `data` after the server's last connection is gone. May be NULL. */
  void (*destroy)(void *data);
  /* rv_server_credential(). May be NULL (then every value is refused). */
  int (*lookup)(void *data, const char *authorization, const struct rv_cred **cred);
};

/* Installs the gate (copied). Call before rv_server_listen().
 * Returns: 0, or MU_EEXIST when a gate is installed already.
 * Ownership: takes `gate->data`, freed with gate->destroy when the server is freed. */
int rv_server_set_gate(struct rv_server *srv, const struct rv_gate *gate);

/* Answers `req` refused for `r`: in the shape of the matched route's API when it has one,
 * else in plain text (405 with Allow, 401, 413, 429). Finishes the request. */
void rv_refuse(struct rv_req *req, const struct rv_refusal *r);

/* Refuses `req` (RV_REFUSE_TOO_LARGE) because its answer of `need` bytes (`what`: "the answer",
 * "the answer to this write could take") would pass --max-output-bytes; `advice` ends the
 * message (what the client should do). Finishes the request. */
void rv_refuse_output(struct rv_req *req, const char *what, size_t need, const char *advice);

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
  const char *vars[RV_ROUTE_MAX_VARS]; /* the route's {name} values, NUL-terminated, in order */
  size_t nvars;
  const struct rv_route *route; /* the route that matched */
  void *user;                   /* free for the handler (e.g. its watcher) */
  const struct rv_cred *cred;   /* the credential the gate verified, or NULL (auth off, a public
                                 * route): who the client is, and what it may reach */
};

/* Returns: the value of the first param called `name` (form body first, then query, as Go's
 * FormValue does), or NULL if absent. Ownership: borrowed, as the request. */
const char *rv_req_param(const struct rv_req *req, const char *name);

/* Returns: the client's address ("127.0.0.2"; "" when unknown, e.g. rv_server_feed()).
 * Ownership: borrowed, as the request. */
const char *rv_req_peer(const struct rv_req *req);

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

/* When an answer of `len` bytes would not be sent (over --max-output-bytes, or over the budget
 * for answers not yet read), answers the refusal rv_reply() would, and returns 1: the request is
 * finished. Returns 0 otherwise. A handler asks before it renders a large answer, so that a
 * client that never reads costs no rendering (rv_reply() asks again). */
int rv_reply_refused(struct rv_req *req, size_t len);

/* As rv_reply() with a NUL-terminated body. */
void rv_reply_text(struct rv_req *req, int status, const char *content_type, const char *body);

/* As rv_reply(), taking the body from `body` (the buffer is left empty). Saves a copy. */
void rv_reply_take(struct rv_req *req, int status, const char *content_type,
                   const char *extra_headers, struct mu_buf *body);

/* musterd's own JSON error shape (the /v1 API's; the etcd API uses it only where etcd has no
 * error of its own, a watch refused during shutdown):
 * {"error":"<code>","message":"<message>"[,"reason":"<reason>"]}\n with `status` and
 * `extra_headers` (or NULL). `reason` NULL leaves the member out. */
void rv_reply_error(struct rv_req *req, int status, const char *extra_headers, const char *code,
                    const char *message, const char *reason);

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

/* Returns: the bytes of output queued on the request's connection and not yet taken by the
 * kernel. A handler that answers in parts (rv_reply_chunk()) adds the next part only when this
 * is small: the client's reading paces it, and the connection's buffer stays small. */
size_t rv_req_unsent(const struct rv_req *req);

/* ---------------------------------------------------------------------------------------------
 * Without sockets (unit tests, the fuzzer)
 */

/* Feeds `data` as the bytes a client sent on one fresh connection, then end of input, and
 * appends every byte the server would have written to `out`. Deferred requests still open at
 * the end get on_gone. Runs handlers synchronously; timers are not run.
 * Returns: 0, or MU_E2BIG if `out` filled up. */
int rv_server_feed(struct rv_server *srv, const char *data, size_t len, struct mu_buf *out);

/* A connection without a socket that stays open across requests (bench/rdzv_sim.c drives the
 * rendezvous with a million of them): rv_server_fake_send() feeds bytes as one read of the
 * client; every byte the server writes on it, now or later (a long poll answered by another
 * request or a timer), is appended to `out`. rv_server_fake_close() is the client going away: a
 * deferred request gets on_gone, and the connection is freed.
 * Returns (send): 0, or MU_E2BIG once `out` filled up (later output is dropped).
 * Ownership: `out` is borrowed and must outlive the connection; the connection is the
 * caller's until rv_server_fake_close(). */
struct rv_conn *rv_server_fake_open(struct rv_server *srv, struct mu_buf *out);
int rv_server_fake_send(struct rv_conn *c, const char *data, size_t len);
void rv_server_fake_close(struct rv_conn *c);

#endif
