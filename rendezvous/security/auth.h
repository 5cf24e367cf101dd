/* Who may talk to musterd: bearer tokens (--token-file, the native /v1 API and `muster agent`
 * with MUSTER_RDZV_TOKEN) and etcd v2 basic auth (--auth-user USER:PASSFILE, --auth-users FILE,
 * python-etcd's username/password).
 *
 * Once any credential is configured, every routed request must carry one of them
 * (`Authorization: Bearer TOKEN` or `Authorization: Basic base64(USER:PASSWORD)`; either API
 * accepts either kind), except on the rows marked RV_ROUTE_PUBLIC: /version, /health, /healthz
 * and /metrics stay open (they reveal no key, value or credential), as etcd leaves /version and
 * /health open. A refused request gets 401 and nothing else, worded by the route's API (see
 * rv_refuse()): etcd's {"message":"Insufficient credentials"} under /v2 (python-etcd raises
 * EtcdInsufficientPermissions), {"error":"unauthorized",...} under /v1.
 *
 * Secrets are compared in constant time and never logged: the log and /metrics only say how
 * many requests were refused.
 */
#ifndef MUSTERD_SECURITY_AUTH_H
#define MUSTERD_SECURITY_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "http.h"

struct sec_auth;

/* Returns: an empty credential set (nothing required until something is added).
 * Ownership: free with sec_auth_free(). */
struct sec_auth *sec_auth_new(void);

/* Frees the set, wiping the secrets. Accepts NULL. */
void sec_auth_free(struct sec_auth *a);

/* Adds the tokens of `path`: one per line, blank lines and lines starting with '#' skipped,
 * surrounding spaces trimmed; a token is 8-4096 printable characters without spaces, followed
 * by its scopes if it has any, separated by spaces: runs=GLOB, keys=/PREFIX (repeatable),
 * read-only, quota-watchers=N, quota-value-bytes=N (see http.h's struct rv_cred). A line
 * without scopes may do everything.
 * Returns: 0, or MU_EINVAL with a message naming the file, the line and the fix appended to
 * `err`. */
int sec_auth_load_tokens(struct sec_auth *a, const char *path, struct mu_buf *err);

/* Adds one basic-auth user from "USER:PASSFILE" (the password is the first line of PASSFILE,
 * so it never shows in `ps`). USER is 1-256 characters without ':'.
 * Returns: 0, or MU_EINVAL with a message appended to `err`. */
int sec_auth_add_user_spec(struct sec_auth *a, const char *spec, struct mu_buf *err);

/* Adds the users of `path`: lines "USER:PASSWORD [SCOPE...]" (blank and '#' lines skipped); the
 * trailing words that start like a scope (runs=, keys=, quota-, read-only) are its scopes, the
 * rest the password (which may hold spaces).
 * Returns: 0, or MU_EINVAL with a message naming the file and line appended to `err`. */
int sec_auth_load_users(struct sec_auth *a, const char *path, struct mu_buf *err);

/* Adds one user or token directly (tests, embedding). Returns: 0 or MU_EINVAL.
 * Ownership: copied. */
int sec_auth_add_user(struct sec_auth *a, const char *user, const char *password);
int sec_auth_add_token(struct sec_auth *a, const char *token);

/* How many tokens and users are configured (for the start-up report; never the secrets). */
void sec_auth_counts(const struct sec_auth *a, size_t *ntokens, size_t *nusers);

/* Returns: 1 when at least one token or user is configured (requests need credentials). */
int sec_auth_enabled(const struct sec_auth *a);

enum sec_auth_verdict {
  SEC_AUTH_GRANTED = 1, /* valid credentials */
  SEC_AUTH_MISSING = 2, /* no (usable) Authorization header */
  SEC_AUTH_DENIED = 3,  /* wrong token, user or password */
};

/* Decides on the value of a request's Authorization header (NULL when absent) and counts the
 * verdict. Call only when credentials are required (sec_auth_enabled()).
 * Returns: an enum sec_auth_verdict; with SEC_AUTH_GRANTED *cred is the credential (its id and
 * scopes), else NULL. Ownership: *cred lives as long as `a`. */
int sec_auth_verify(struct sec_auth *a, const char *authorization, const struct rv_cred **cred);
/* sec_auth_verify() without the credential. */
int sec_auth_check(struct sec_auth *a, const char *authorization);

/* Appends one line per credential to `out`: its id, where it was configured (a line of a file,
 * a user name) and its scopes; never a secret. For the start-up log. */
void sec_auth_describe(const struct sec_auth *a, struct mu_buf *out);

/* Returns: the sentence a refused client reads for `verdict` (what is missing or wrong and
 * what to send); never a secret. Ownership: static. */
const char *sec_auth_refusal(int verdict);

/* Returns: the WWW-Authenticate header lines of a 401 (Basic when users are configured, so that
 * a browser asks for them; Bearer when tokens are), "" when no credential is configured.
 * Ownership: static. */
const char *sec_auth_challenge(const struct sec_auth *a);

/* Appends Prometheus lines (counters only) to `out`. */
void sec_auth_metrics(const struct sec_auth *a, struct mu_buf *out);

#endif
