/* The rendezvous backends, for the launcher: the one table of them (names, aliases, endpoint
 * schemes, help), opening a client on a named one, and reading runs for `muster rdzv`.
 *
 * Everything that names a backend reads this table: the agent's --rdzv-backend and its -h
 * (and so the bash completion), `muster rdzv`, the `-cfg rdzv=` vocabulary. Adding a backend
 * is one file in client/ (its struct mu_client_ops) and one row in client/backends.c.
 * Not part of libmuster's API (include/muster/client.h): the launcher links the client
 * library statically and sees this header; libmuster.so does not export it.
 */
#ifndef MU_CLIENT_BACKENDS_H
#define MU_CLIENT_BACKENDS_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "muster/client.h"

#include "buf.h"

struct mu_client_ops;

struct mu_client_backend {
  const char *name;           /* what --rdzv-backend takes: "muster", "etcd-v3" */
  const char *const *aliases; /* other names it answers to, NULL-terminated (may be NULL) */
  const char *scheme;         /* an endpoint "SCHEME://..." picks this row; NULL: the row of a
                               * bare HOST:PORT (the first such row is the default) */
  const char *service;        /* what answers, in messages: "musterd", "etcd" */
  const char *endpoint_form;  /* what its endpoint looks like, for help and errors */
  const char *help;           /* one line: what it is */
  const struct mu_client_ops *ops;
};

/* The rows, in the order help lists them; the last has name NULL. */
extern const struct mu_client_backend mu_client_backends[];

/* The row named `name` or one of its aliases. Returns: the row, or NULL. Ownership: static. */
const struct mu_client_backend *mu_client_backend_find(const char *name);
/* The row an endpoint picks by its scheme ("etcd-v3://..."); a bare HOST:PORT (or
 * http(s)://HOST:PORT) picks the default row. Returns: never NULL. Ownership: static. */
const struct mu_client_backend *mu_client_backend_of(const char *endpoint);
/* Appends the names as help and errors list them: "muster (musterd, etcd, etcd-v2), etcd-v3
 * (etcd3)". */
void mu_client_backend_names(struct mu_buf *out);

/* Appends every backend's endpoint form, sep between them: "HOST:PORT of a running musterd, or
 * etcd-v3://H1:P,H2:P,... (the members of an etcd v3 cluster)" with sep ", or ". */
void mu_client_backend_forms(struct mu_buf *out, const char *sep);

/* The endpoint of backend b as messages show it and workers get it (MUSTER_RDZV_ENDPOINT): with
 * b's scheme, in the form a user pastes back. Returns: 0, or MU_EINVAL with the reason in err.
 * Ownership: *out is the caller's (mu_free). */
int mu_client_backend_endpoint(const struct mu_client_backend *b, const char *endpoint, char **out,
                               struct mu_buf *err);

/* A client of backend b at endpoint (with or without b's scheme); mu_client_new() is this with
 * the row the endpoint picks. Nothing connects yet.
 * Returns: 0, or MU_EINVAL with the reason in err (may be NULL). Ownership: *out is the
 * caller's (mu_client_free). */
int mu_client_open(const struct mu_client_backend *b, const char *endpoint, struct mu_client **out,
                   struct mu_buf *err);

/* A bearer token instead of the environment's (muster rdzv --token). No effect on a backend
 * that logs in otherwise (etcd: MUSTER_RDZV_USER). Ownership: copied. */
void mu_client_set_token(struct mu_client *c, const char *token);

/* The runs (run_id NULL) or one run, in the JSON musterd's GET /v1/runs[/{run_id}] answers.
 * Returns: 0; MU_ENOENT (no such run); a call's error (words in mu_client_errmsg()).
 * Ownership: *out is the caller's (cJSON_Delete). */
int mu_client_runs_json(struct mu_client *c, const char *run_id, cJSON **out);
/* The torchrun runs kept on the service's TCPStore listener (musterd --c10d-listen), as
 * musterd's GET /v1/c10d (run_id NULL) or /v1/c10d/{run_id} answers (docs/c10d.md).
 * Returns: 0; MU_ENOENT (no such run, or a service that keeps none); MU_ENOTSUP (a backend
 * without them); a call's error. Ownership: *out is the caller's (cJSON_Delete). */
int mu_client_c10d_json(struct mu_client *c, const char *run_id, cJSON **out);
/* Waits up to timeout_ms for the runs (run_id's, NULL: any) to change after *cursor (-1: now,
 * at once); *events gets musterd's run events that came (NULL on a backend without them).
 * Returns: 0; MU_ETIMEDOUT when nothing changed; a call's error.
 * Ownership: *events is the caller's (cJSON_Delete). */
int mu_client_changes(struct mu_client *c, const char *run_id, long long *cursor, long timeout_ms,
                      cJSON **events);

#endif
