/* Quotas: limits an operator sets so that one job (or one stranger) cannot fill musterd.
 *
 *   --quota-keys N                 keys and dirs in the etcd v2 store, server-wide
 *   --quota-value-bytes N          one etcd v2 value or one /v1 KV value
 *   --quota-watchers N             long polls open at once, server-wide (v2 watches, /v1 joins,
 *                                  round watches, barriers, KV waits)
 *   --quota-watchers-per-client N  long polls open at once from one client address
 *   --quota-run-watchers N         long polls open at once on one /v1 run (per-run)
 *   --quota-run-keys N             /v1 KV keys of one run (per-run)
 *   --quota-run-bytes N            /v1 KV value bytes of one run (per-run)
 *
 * 0 (the default) means no limit. HTTP/1.1 carries one long poll per connection at a time
 * (pipelined requests wait behind it), so "watchers per connection" is always 1: the
 * per-client-address count is what bounds one client opening many connections.
 *
 * Each refusal is answered in the shape of its API: etcd's error JSON under /v2 (errorCode 600
 * "Value over quota" with 413, 601 "Quota exceeded" with 429, a cause naming the quota and its
 * option), {"error":"too_large"|"too_many","message":...} under /v1 (docs/rendezvous.md), and
 * counted in /metrics as musterd_quota_refused_total{quota="..."}.
 *
 * The gate calls sec_quota_gate() right before the handler. It reads what the matched route row
 * says its requests do (RV_ROUTE_LONG_POLL, RV_ROUTE_MAY_POLL, RV_ROUTE_WRITE) and asks the
 * row's API for the numbers (struct rv_usage): it never parses a URL or looks into a store. A
 * long poll it admits holds a ticket that the connection hands back to sec_quota_release() when
 * the request ends, however it ends.
 */
#ifndef MUSTERD_SECURITY_QUOTA_H
#define MUSTERD_SECURITY_QUOTA_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "http.h"

struct sec_quota;

struct sec_quota_config {
  uint64_t max_keys;
  uint64_t max_value_bytes;
  uint64_t max_watchers;
  uint64_t max_watchers_per_client;
  uint64_t max_run_watchers;
  uint64_t max_run_keys;  /* /v1 KV keys of one run (below the built-in 100,000) */
  uint64_t max_run_bytes; /* /v1 KV value bytes of one run (below the built-in 64 MiB) */
};

enum sec_quota_kind {
  SEC_QUOTA_KEYS = 0,
  SEC_QUOTA_VALUE,
  SEC_QUOTA_WATCHERS,
  SEC_QUOTA_CLIENT_WATCHERS,
  SEC_QUOTA_RUN_WATCHERS,
  SEC_QUOTA_RUN_KEYS,
  SEC_QUOTA_RUN_BYTES,
  SEC_QUOTA_CRED_WATCHERS, /* quota-watchers= of a credential */
  SEC_QUOTA_CRED_VALUE,    /* quota-value-bytes= of a credential */
  SEC_QUOTA_NKINDS
};

/* Returns: the quotas (copied from cfg). Ownership: free with sec_quota_free(). */
struct sec_quota *sec_quota_new(const struct sec_quota_config *cfg);

/* Frees. Accepts NULL. Every ticket must have been released. */
void sec_quota_free(struct sec_quota *q);

/* Returns: 1 when any quota is set. */
int sec_quota_enabled(const struct sec_quota *q);

/* The gate's last check, right before the handler: value size, key counts and long-poll counts
 * for the routed `req` from client address `peer` ("" when unknown). When refused, answers the
 * request in its API's shape (rv_refuse()). When admitted as a long poll, fills `t` (give it
 * back with sec_quota_release()).
 * Returns: 0 when the handler may run, 1 when the request has been answered. */
int sec_quota_gate(struct sec_quota *q, struct rv_req *req, const char *peer, struct rv_ticket *t);

/* Gives back what `t` holds and zeroes it. Safe on a zeroed ticket and with q == NULL. */
void sec_quota_release(struct sec_quota *q, struct rv_ticket *t);

/* Appends Prometheus lines (refusals by quota, long polls open) to `out`. */
void sec_quota_metrics(const struct sec_quota *q, struct mu_buf *out);

/* Returns: refusals so far of one kind (tests). */
uint64_t sec_quota_refused(const struct sec_quota *q, enum sec_quota_kind kind);

#endif
