/* musterd's security settings in one object: TLS on the listener (tls.h), credentials
 * (auth.h) and quotas (quota.h). main.c builds it from the options and attaches it to the
 * server; conn.c asks it for a TLS session per connection, and the router asks
 * rv_security_gate() before every handler. See docs/security.md.
 */
#ifndef RV_SECURITY_H
#define RV_SECURITY_H

#include <stddef.h>

#include "auth.h"
#include "http.h"
#include "quota.h"
#include "tls.h"

struct rv_security_config {
  struct rv_tls_config tls; /* cert_file NULL = plain HTTP */
  const char *token_file;   /* --token-file */
  const char *users_file;   /* --auth-users */
  const char **auth_users;  /* --auth-user USER:PASSFILE, repeatable */
  size_t nauth_users;
  struct rv_quota_config quota;
};

struct rv_security {
  struct rv_tls *tls;     /* NULL = plain HTTP */
  struct rv_auth *auth;   /* never NULL; may hold no credential (then nothing is required) */
  struct rv_quota *quota; /* never NULL; may set no limit */
};

/* Loads certificates, tokens and users. On failure writes a message naming the file and the
 * fix into `err`. Returns: 0 with *out set, or MU_EINVAL.
 * Ownership: nothing in cfg is kept; free *out with rv_security_free() (or let the server do
 * it: see rv_security_attach()). */
int rv_security_new(const struct rv_security_config *cfg, struct rv_security **out, char *err,
                    size_t errlen);

/* Frees. Accepts NULL. */
void rv_security_free(struct rv_security *sec);

/* Hands `sec` to the server (before rv_server_listen()): new connections get TLS, requests go
 * through the gate, /metrics gains the security counters, and the server frees `sec` when it
 * closes. Returns: 0, or MU_EEXIST when already attached. Ownership: takes `sec`. */
int rv_security_attach(struct rv_server *srv, struct rv_security *sec);

/* Returns: the attached settings, or NULL. */
struct rv_security *rv_security_of(const struct rv_server *srv);

/* Writes a one-line summary for the start-up log into `out` ("TLS with client certificates;
 * 2 tokens, 1 user; quotas: keys 1000") -- counts only, never a secret. */
void rv_security_describe(const struct rv_security *sec, char *out, size_t n);

/* Returns: "https" when `sec` (may be NULL) serves TLS, else "http". Static string. */
const char *rv_security_scheme(const struct rv_security *sec);

/* The router's first check, as soon as the route is known (before 405 and parameters): the
 * credentials. Returns: 0 when the request may go on, 1 when it has been answered (401). */
int rv_security_auth_gate(struct rv_security *sec, struct rv_req *req);

/* The router's last check, right before the handler: quotas. `peer` is the client address
 * ("" when not recorded). Returns: 0 when the handler may run (with `t` filled when a long
 * poll was counted: the connection releases it when the request ends), 1 when the request has
 * been answered (413, 429). */
int rv_security_quota_gate(struct rv_security *sec, struct rv_req *req, const char *peer,
                           struct rv_quota_ticket *t);

#endif
