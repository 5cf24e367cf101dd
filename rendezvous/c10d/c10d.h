/* The c10d layer (rendezvous/c10d/): PyTorch's TCPStore wire protocol on its own listener
 * (musterd --c10d-listen HOST:PORT), over the etcd layer's store, so that torchrun's default
 * rendezvous backend (--rdzv_backend c10d) and any TCPStore client use musterd unchanged.
 * docs/c10d.md is the contract; docs/architecture.md places the layer.
 *
 * Owns: the frame parser (frame.c), the listener and its connections (conn.c), the queries over
 * the store (ops.c), waits and watch_key on the store's watchers (wait.c), and the HTTP view of
 * the keys by run (http.c: GET /v1/c10d, /v1/c10d/{run_id}) with /metrics' c10d lines.
 * May call: the etcd layer (the store, its watch hub), the server layer (the loop, the
 * durability barrier, the per-address shares, routes, modules) and common/. It is a sibling of
 * rdzv/ and security/: the gate's credentials and quotas are HTTP's; TCPStore has none.
 *
 * The keys live in the v2 store under /_c10d/ (one node per key, its name the key with every
 * byte outside [A-Za-z0-9._~-] written %XX; queues under /_c10dq/<name>/), so the write-ahead
 * log, its group commit and the snapshots keep them, and an answer that reveals a write is
 * sent only once the write is durable, as for /v2.
 */
#ifndef MUSTERD_C10D_C10D_H
#define MUSTERD_C10D_C10D_H

#include <stddef.h>
#include <stdint.h>

#include "c10d_probe.h"
#include "http.h"

/* The default of --c10d-max-value-bytes: torch's own bound on a value (8 MiB). */
#define C10D_MAX_VALUE_DEFAULT ((uint64_t)8 << 20)
/* The default of --c10d-max-keys: keys and queued items held at once. */
#define C10D_MAX_KEYS_DEFAULT 1000000
/* The default of --c10d-max-store-bytes: what the keys, values and queued items hold at once
 * (nodes, keys and values as the allocator sizes them): sixteen values of torch's largest. */
#define C10D_MAX_STORE_DEFAULT ((uint64_t)128 << 20)
/* Keys one client address may wait on at once (WAIT keys, watch_key keys). */
#define C10D_MAX_WAIT_KEYS_PER_ADDRESS (128 * 1024)

/* The store key c10d key bytes live under. */
#define C10D_DIR "/_c10d"
#define C10D_QUEUE_DIR "/_c10dq"

/* A key no TCPStore client can write (torch prefixes every key with '/'): GET answers musterd's
 * client URL, so a program that was given a TCPStore endpoint can tell it is a musterd. */
#define C10D_KEY_HTTP_URL MU_C10D_HTTP_URL_KEY

/* The default of --c10d-run-gc-seconds: a torchrun run's keys are deleted this long after its
 * last write (its agents write its state every 5 s while it lives). */
#define C10D_RUN_GC_DEFAULT_MS 600000

struct c10d_config {
  uint64_t max_value_bytes; /* default C10D_MAX_VALUE_DEFAULT */
  uint64_t max_keys;        /* default C10D_MAX_KEYS_DEFAULT */
  uint64_t max_store_bytes; /* default C10D_MAX_STORE_DEFAULT */
  uint64_t run_gc_ms;       /* default C10D_RUN_GC_DEFAULT_MS; 0: never */
};

/* Fills `cfg` with the defaults. */
void c10d_config_init(struct c10d_config *cfg);

/* Registers the c10d module on `srv` (its routes, /metrics lines, shutdown) with the limits of
 * `cfg` (copied). The etcd v2 API must be registered first (its store holds the keys).
 * Returns: 0, or MU_ENOENT without the v2 store, MU_EEXIST when registered already. */
int c10d_register(struct rv_server *srv, const struct c10d_config *cfg);

/* Listens for TCPStore clients on host:port (exactly that address; port 0: any free port).
 * Returns: 0, or a negative libuv code (UV_EADDRINUSE, UV_EINVAL for an unparsable host), or
 * MU_ENOENT when the module is not registered, MU_EEXIST when listening already. */
int c10d_listen(struct rv_server *srv, const char *host, int port);

/* Returns: the bound port, or 0 when not listening. */
int c10d_port(const struct rv_server *srv);

/* Sets how long after its last write a torchrun run's keys are deleted (0: never). Call before
 * the loop runs. Returns: 0, or MU_ENOENT when the module is not registered. */
int c10d_set_run_gc_ms(struct rv_server *srv, uint64_t gc_ms);

/* Admits only peers in LIST (--c10d-allow: addresses and prefixes, allow.h) to the TCPStore
 * listener. Call before the loop runs. Returns: 0, MU_ENOENT when the module is not
 * registered, or MU_EINVAL with the reason in err. */
int c10d_set_allow(struct rv_server *srv, const char *list, char *err, size_t errlen);

#endif
