/* The etcd layer (rendezvous/etcd/): etcd 3.4's v2 keys API, as unmodified torchrun, etcdctl
 * and python-etcd use it.
 *
 * Owns: the key tree with its global index (store.c), TTLs (ttl.c), events and their history
 * (event.c, event_history.c), watchers by path (watch_hub.c), etcd's error table (v2_error.c),
 * and the HTTP surface: /v2/keys and /v2/stats/store (v2_keys.c), /v2/machines, /v2/members
 * and /v2/stats/self|leader (v2_cluster.c).
 * May call: the server layer (http.h) and common/. It knows nothing of /v1, quotas or disks:
 * the security layer learns what a request would use through the API's usage hook, and
 * persistence hooks into the store's commit and the write replies (below).
 */
#ifndef MUSTERD_ETCD_V2_H
#define MUSTERD_ETCD_V2_H

/* Levels a key may have ("/a/b" has 2): every level is a dir that holds its whole key, so
 * depth costs memory quadratically (an 8 KiB path of 4,000 levels took 19 MB). */
#define V2_MAX_DEPTH 64

#include <stddef.h>

#include "http.h"

struct v2_store;

/* Registers the etcd v2 API on `srv`: the module "v2" (the store, its metrics, closing it) and
 * its routes. Called once, by rv_server_new() unless cfg.no_v2. */
void v2_register(struct rv_server *srv);

/* Returns: the etcd v2 store of `srv`, or NULL when /v2 is not registered (or after close).
 * Ownership: borrowed, lives until rv_server_close(). */
struct v2_store *v2_store_of(struct rv_server *srv);

/* The v2 API's hooks for the server's gate (refusals in etcd's shape, usage for quotas);
 * v2_cluster.c's rows share them with v2_keys.c's. */
extern const struct rv_api v2_api;

/* v2_cluster.c: /v2/machines, /v2/members, /v2/stats/self|leader, registered by v2_register(). */
void v2_cluster_register(struct rv_server *srv);

#endif
