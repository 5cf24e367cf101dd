/* What the /v1 API's files share (v1_api.c, v1_runs.c, v1_kv.c, v1_reply.c, v1_request.c,
 * v1_error.c). Private to rendezvous/rdzv/. */
#ifndef MUSTERD_RDZV_V1_INT_H
#define MUSTERD_RDZV_V1_INT_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "http.h"
#include "rdzv.h"

#define V1_MAX_REQ_TIMEOUT_MS 86400000L /* one day */

/* The module "rdzv": the state machine on this server. */
struct v1 {
  struct rv_server *srv;
  struct rdzv *rv; /* NULL once the server closes */
  uint64_t anon;   /* ids for barrier arrivals that name none */
};

/* A deferred long poll: the request and the rdzv wait that answers it. */
struct v1_pend {
  struct rdzv_wait w;
  struct rv_req *req;
  struct v1 *v;
  int deferred; /* rv_req_defer() was called */
  int answered; /* the answer came while the handler still ran */
  char *name;   /* barrier name (for the reply) */
};

/* v1_api.c */

/* The checks every /v1 request passes first: the server is not shutting down, the run id
 * ({run_id}) and a KV key are well formed. Returns: the module, or NULL after answering (503,
 * 400). */
struct v1 *v1_begin_or_reply(struct rv_req *req);

/* v1_events.c: GET /v1/events and the info log line of every run event. */
void v1_events_register(struct rv_server *srv, struct rdzv *rv);

/* v1_runs.c and v1_kv.c: the handlers (the rows in v1_api.c) */
void v1_join(struct rv_req *req);
void v1_heartbeat(struct rv_req *req);
void v1_watch(struct rv_req *req);
void v1_leave(struct rv_req *req);
void v1_close_run(struct rv_req *req);
void v1_shutdown_run(struct rv_req *req);
void v1_run(struct rv_req *req);
void v1_runs(struct rv_req *req);
void v1_report(struct rv_req *req);
void v1_health(struct rv_req *req);
void v1_barrier(struct rv_req *req);
void v1_kv_get(struct rv_req *req);
void v1_kv_put(struct rv_req *req);
void v1_kv_delete(struct rv_req *req);
void v1_kv_add(struct rv_req *req);

/* v1_reply.c */

/* Answers `status` with the JSON in `b` and a newline; releases `b`. */
void v1_reply_buf(struct rv_req *req, int status, struct mu_buf *b);
/* Answers 200 with the JSON object `fmt` formats. */
void v1_reply_json(struct rv_req *req, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Answers 200 with a KV value (application/octet-stream, X-Muster-Kv-Version). */
void v1_reply_value(struct rv_req *req, const char *value, size_t len, uint64_t version);
/* A long poll of `req` whose wait calls `cb`. Ownership: free with v1_pend_free(), or let
 * v1_pend_settle()/v1_pend_answered() do it. */
struct v1_pend *v1_pend_new(struct v1 *v, struct rv_req *req, rdzv_wait_cb *cb);
void v1_pend_free(struct v1_pend *p);
/* After starting the wait in a handler: defers the request, or frees `p` if it was answered. */
void v1_pend_settle(struct v1_pend *p, struct rv_req *req);
/* The request of `p` was answered: frees `p` now if deferred, else lets the handler do it. */
void v1_pend_answered(struct v1_pend *p);
/* Answers a wait that ended in error. Returns: 1 when it did (a->err set), else 0. */
int v1_pend_failed(struct v1_pend *p, const struct rdzv_answer *a);

/* v1_error.c */

/* Answers `err` (a row of RDZV_ERR_MAP) with `message` (NULL or "": the code) and the HTTP
 * status of its row; a 410 about run `run_id` (may be NULL) also says why the run ended.
 * `extra_headers` may be NULL. Finishes the request. */
void v1_error_reply(struct rv_req *req, int err, const char *message, const char *run_id,
                    const char *extra_headers);
/* v1_error_reply() of RDZV_EBAD_REQUEST with a printf-style message. */
void v1_bad_request(struct rv_req *req, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Answers a state-machine error `err` about run `run_id` and `what` (a node id or a key) with
 * the API's sentence for it. */
void v1_fail(struct rv_req *req, int err, const char *run_id, const char *what);

/* v1_request.c: request parsing; each *_or_reply answers 400 itself and returns -1 */

/* The body as a JSON object; an empty body is `{}` when `empty_ok`. Returns: NULL after 400. */
cJSON *v1_body_or_reply(struct rv_req *req, int empty_ok);
/* String field `name` (NULL when absent and optional). Returns: 0, or -1. */
int v1_field_str_or_reply(struct rv_req *req, const cJSON *j, const char *name, int required,
                          const char **out);
/* Integer field `name` within [min, max]; absent -> `def` unless required. Returns: 0, or -1. */
int v1_field_int_or_reply(struct rv_req *req, const cJSON *j, const char *name, int required,
                          int64_t min, int64_t max, int64_t def, int64_t *out);
/* Boolean field `name`; absent -> `def` (null is not a boolean). Returns: 0, or -1. */
int v1_field_bool_or_reply(struct rv_req *req, const cJSON *j, const char *name, int def, int *out);
/* Query parameter `name` as an integer in [min, max]; absent -> def. Returns: 0, or -1. */
int v1_param_int_or_reply(struct rv_req *req, const char *name, int required, long min, long max,
                          long def, long *out);
/* The common heartbeat body {"node_id":"ID"} read without a JSON tree (see v1_request.c).
 * Returns: 1 with the id copied into `id`, or 0 when the body has another shape. */
int v1_heartbeat_fast_id(const struct rv_req *req, char *id, size_t cap);

#endif
