/* The security object (see security.h): construction from the options, the server's gate
 * (credentials, quotas), and the module that adds its counters to /metrics. */
#include <stdio.h>
#include <string.h>

#include "muster/errno.h"

#include "alloc.h"
#include "security.h"

int sec_new(const struct sec_config *cfg, struct sec **out, struct mu_buf *err)
{
  struct sec *sec = mu_calloc(1, sizeof(*sec));
  int rc = 0;
  *out = NULL;
  sec->auth = sec_auth_new();
  sec->quota = sec_quota_new(&cfg->quota);
  if (cfg->tls.cert_file != NULL || cfg->tls.key_file != NULL || cfg->tls.client_ca_file != NULL) {
    if (cfg->tls.cert_file == NULL || cfg->tls.key_file == NULL) {
      mu_buf_puts(err, "TLS needs both --tls-cert FILE and --tls-key FILE (--tls-client-ca only "
                       "adds client-certificate checks)");
      rc = MU_EINVAL;
      goto out;
    }
    rc = rv_tls_new(&cfg->tls, &sec->tls, err);
    if (rc != 0)
      goto out;
  }
  if (cfg->token_file != NULL) {
    rc = sec_auth_load_tokens(sec->auth, cfg->token_file, err);
    if (rc != 0)
      goto out;
  }
  if (cfg->users_file != NULL) {
    rc = sec_auth_load_users(sec->auth, cfg->users_file, err);
    if (rc != 0)
      goto out;
  }
  for (size_t i = 0; i < cfg->nauth_users; i++) {
    rc = sec_auth_add_user_spec(sec->auth, cfg->auth_users[i], err);
    if (rc != 0)
      goto out;
  }
  *out = sec;
  sec = NULL;
out:
  sec_free(sec);
  return rc;
}

void sec_free(struct sec *sec)
{
  if (sec == NULL)
    return;
  if (!sec->attached)
    rv_tls_free(sec->tls);
  sec_auth_free(sec->auth);
  sec_quota_free(sec->quota);
  mu_free(sec);
}

/* ---------------------------------------------------------------------------------------------
 * The gate
 */

/* Credentials, as soon as the route is known: required on every row but the public ones. */
static int gate_auth(void *data, struct rv_req *req)
{
  struct sec *sec = data;
  if (!sec_auth_enabled(sec->auth) || (req->route->flags & RV_ROUTE_PUBLIC))
    return 0;
  const struct rv_cred *cred = NULL;
  int v = sec_auth_verify(sec->auth, rv_req_header(req, "Authorization"), &cred);
  if (v == SEC_AUTH_GRANTED) {
    req->cred = cred;
    if (cred->read_only && (req->method & (RV_PUT | RV_POST | RV_DELETE | RV_PATCH))) {
      char msg[256];
      snprintf(msg, sizeof(msg),
               "%s is read-only: it may not %s %.100s; use a credential that may write", cred->id,
               req->method_name, req->path);
      struct rv_refusal r = {RV_REFUSE_FORBIDDEN, msg, 0, NULL};
      rv_refuse(req, &r);
      return 1;
    }
    return 0;
  }
  struct rv_refusal r = {v == SEC_AUTH_DENIED ? RV_REFUSE_BAD_CREDENTIALS
                                              : RV_REFUSE_NO_CREDENTIALS,
                         sec_auth_refusal(v), 0, sec_auth_challenge(sec->auth)};
  rv_refuse(req, &r);
  return 1;
}

static int gate_admit(void *data, struct rv_req *req, const char *peer, struct rv_ticket *t)
{
  struct sec *sec = data;
  return sec_quota_gate(sec->quota, req, peer, t);
}

static void gate_release(void *data, struct rv_ticket *t)
{
  struct sec *sec = data;
  sec_quota_release(sec->quota, t);
}

static void gate_free(void *data)
{
  sec_free(data);
}

static int gate_lookup(void *data, const char *authorization, const struct rv_cred **cred)
{
  struct sec *sec = data;
  *cred = NULL;
  if (!sec_auth_enabled(sec->auth))
    return 1;
  if (authorization == NULL)
    return 0; /* nothing to count: the server asks whether credentials are required */
  return sec_auth_verify(sec->auth, authorization, cred) == SEC_AUTH_GRANTED;
}

static void sec_metrics(struct rv_server *srv, void *data, struct mu_buf *out)
{
  struct sec *sec = data;
  (void)srv;
  if (sec->tls != NULL) {
    const struct rv_tls_stats *st = rv_tls_stats(sec->tls);
    mu_buf_printf(out,
                  "# HELP musterd_tls_handshakes_total TLS handshakes, by result.\n"
                  "# TYPE musterd_tls_handshakes_total counter\n"
                  "musterd_tls_handshakes_total{result=\"ok\"} %llu\n"
                  "musterd_tls_handshakes_total{result=\"failed\"} %llu\n",
                  (unsigned long long)st->handshakes, (unsigned long long)st->handshake_failures);
  }
  if (sec_auth_enabled(sec->auth))
    sec_auth_metrics(sec->auth, out);
  if (sec_quota_enabled(sec->quota))
    sec_quota_metrics(sec->quota, out);
}

int sec_attach(struct rv_server *srv, struct sec *sec)
{
  struct rv_gate g = {sec, gate_auth, gate_admit, gate_release, gate_free, gate_lookup};
  if (rv_server_set_gate(srv, &g) != 0) {
    sec_free(sec);
    return MU_EEXIST;
  }
  /* from here the server frees sec (after its last connection: their TLS sessions and tickets
   * use it), and the TLS context with it */
  sec->attached = 1;
  if (sec->tls != NULL)
    rv_server_set_tls(srv, sec->tls);
  struct rv_module m = {"security", sec, NULL, sec_metrics};
  rv_server_add_module(srv, &m); /* without a module slot only the metrics are missing */
  return 0;
}

void sec_describe(const struct sec *sec, struct mu_buf *out)
{
  size_t ntok = 0, nusers = 0;
  if (sec == NULL) {
    mu_buf_puts(out, "plain HTTP, no credentials, no quotas");
    return;
  }
  sec_auth_counts(sec->auth, &ntok, &nusers);
  mu_buf_puts(out, sec->tls == NULL                    ? "plain HTTP; "
                   : rv_tls_verifies_clients(sec->tls) ? "TLS with client certificates; "
                                                       : "TLS; ");
  if (ntok + nusers == 0)
    mu_buf_puts(out, "no credentials required");
  else
    mu_buf_printf(out, "credentials required (%zu token%s, %zu user%s)", ntok, ntok == 1 ? "" : "s",
                  nusers, nusers == 1 ? "" : "s");
  mu_buf_printf(out, "; %s", sec_quota_enabled(sec->quota) ? "quotas set" : "no quotas");
}
