/* The rdzv layer (rendezvous/rdzv/): musterd's native rendezvous, the /v1 API that `muster
 * agent` speaks (docs/rendezvous.md is the contract).
 *
 * Owns: the state machine of runs, rounds, members, leases, barriers and the per-run KV
 * (rdzv.h: rdzv.c, runs.c, barrier_kv.c, codec.c) and its HTTP surface: one route row per
 * /v1 endpoint with the checks and gate hooks (v1_api.c), the handlers (v1_runs.c, v1_kv.c),
 * replies and long polls (v1_reply.c), request parsing (v1_request.c), and the /v1 error map's
 * writer (v1_error.c).
 * May call: the server layer (http.h) and common/. It knows nothing of etcd, quotas or disks:
 * the security layer learns what a request would use through the API's usage hook, and
 * persistence uses the state machine's change hook and codec (rdzv.h).
 */
#ifndef MUSTERD_RDZV_V1_H
#define MUSTERD_RDZV_V1_H

#include <stdint.h>

struct rv_server;
struct rdzv;

/* Creates the rendezvous state on the server's loop, registers the /v1 routes and a module
 * "rdzv" (shutdown hook, /metrics lines). Called once, by rv_server_new().
 * Returns: 0. Ownership: the state belongs to the server; rv_server_close() frees it. */
int v1_register(struct rv_server *srv);

/* Sets how long finished (closed/shut) or idle runs are kept before they are forgotten
 * (musterd --run-gc-seconds). 0 restores the default (600 s). Applies to runs that end from
 * now on. */
void v1_set_run_gc_ms(struct rv_server *srv, uint64_t gc_ms);

/* Sets the server-wide bounds of the /v1 state (musterd --v1-max-bytes, --v1-max-runs,
 * --v1-max-runs-per-client, --v1-max-lease-ms; struct rdzv_limits in rdzv.h, 0 = default). */
struct rdzv_limits;
void v1_set_limits(struct rv_server *srv, const struct rdzv_limits *l);

/* Calls fn(data, run_id) after every run event but a join (the events of GET /v1/events); one
 * listener, NULL removes it. The listener must not call back into the rendezvous but to read
 * (v1_run_json()). */
typedef void v1_run_event_fn(void *data, const char *run_id);
void v1_events_listen(struct rv_server *srv, v1_run_event_fn *fn, void *data);

/* The JSON object that GET /v1/runs/{run_id} answers, appended to `out`.
 * Returns: 0, or -1 when there is no such run (nothing appended). */
struct mu_buf;
int v1_run_json(struct rv_server *srv, const char *run_id, struct mu_buf *out);

/* Returns: the server's rendezvous state, or NULL if /v1 is not registered.
 * Ownership: borrowed, lives as long as the server. */
struct rdzv *v1_rdzv(struct rv_server *srv);

#endif
