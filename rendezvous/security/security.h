/* The security layer (rendezvous/security/): who may talk to musterd and how much they may ask
 * of it. docs/security.md is the operator's contract.
 *
 * Owns: credentials (auth.h: bearer tokens, basic-auth users), quotas (quota.h), and this
 * object, which main.c builds from the options and attaches to the server: it loads the TLS
 * context (tls.h, the server layer's transport) and installs the server's gate, whose credential
 * check and quota check read the matched route row's flags.
 * May call: the server layer (http.h, tls.h) and common/. It never sees a store or a run: what
 * a request would use comes from the row's API (struct rv_usage), and every refusal is worded
 * by that API (rv_refuse()).
 */
#ifndef MUSTERD_SECURITY_SECURITY_H
#define MUSTERD_SECURITY_SECURITY_H

#include <stddef.h>

#include "auth.h"
#include "buf.h"
#include "http.h"
#include "quota.h"
#include "tls.h"

struct sec_config {
  struct rv_tls_config tls; /* cert_file NULL = plain HTTP */
  const char *token_file;   /* --token-file */
  const char *users_file;   /* --auth-users */
  const char **auth_users;  /* --auth-user USER:PASSFILE, repeatable */
  size_t nauth_users;
  struct sec_quota_config quota;
};

struct sec {
  struct rv_tls *tls;      /* NULL = plain HTTP; the server's once attached (then borrowed) */
  struct sec_auth *auth;   /* never NULL; may hold no credential (then nothing is required) */
  struct sec_quota *quota; /* never NULL; may set no limit */
  int attached;
};

/* Loads certificates, tokens and users. On failure appends a message naming the file and the
 * fix to `err`. Returns: 0 with *out set, or MU_EINVAL.
 * Ownership: nothing in cfg is kept; free *out with sec_free() (or let the server do
 * it: see sec_attach()). */
int sec_new(const struct sec_config *cfg, struct sec **out, struct mu_buf *err);

/* Frees. Accepts NULL. */
void sec_free(struct sec *sec);

/* Hands `sec` to the server (before rv_server_listen()): new connections get TLS, requests go
 * through the gate (credentials, then quotas), /metrics gains the security counters, and the
 * server frees `sec` when it closes. Returns: 0, or MU_EEXIST when the server has a gate (or
 * TLS) already. Ownership: takes `sec`, also on failure. */
int sec_attach(struct rv_server *srv, struct sec *sec);

/* Appends a one-line summary for the start-up log to `out` ("TLS with client certificates;
 * credentials required (2 tokens, 1 user); quotas set") -- counts only, never a secret. */
void sec_describe(const struct sec *sec, struct mu_buf *out);

#endif
