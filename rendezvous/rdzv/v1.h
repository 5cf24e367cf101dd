/* musterd's native rendezvous API (/v1): HTTP handlers over the state machine in rdzv.h.
 * docs/rendezvous.md is the contract.
 */
#ifndef RV_V1_H
#define RV_V1_H

#include <stdint.h>

struct rv_server;
struct mu_rdzv;

/* Creates the rendezvous state on the server's loop, registers the /v1 routes and a module
 * "rdzv" (shutdown hook, /metrics lines). Called once by rv_server_new().
 * Returns: 0. Ownership: the state belongs to the server; rv_server_close() frees it. */
int rv_v1_register(struct rv_server *srv);

/* Sets how long finished (closed/shut) or idle runs are kept before they are forgotten
 * (musterd --run-gc-seconds). 0 restores the default (600 s). Applies to runs that end from
 * now on. */
void rv_v1_set_run_gc_ms(struct rv_server *srv, uint64_t gc_ms);

/* Returns: the server's rendezvous state, or NULL if /v1 is not registered.
 * Ownership: borrowed, lives as long as the server. */
struct mu_rdzv *rv_v1_rdzv(struct rv_server *srv);

#endif
