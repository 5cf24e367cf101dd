/* The security object (see security.h): construction from the options, the server module
 * (metrics, freeing at close), and the per-request gate. */
#include <stdio.h>
#include <string.h>

#include "muster/errno.h"

#include "alloc.h"
#include "security.h"
#include "server.h"
#include "v1.h"

/* v2_keys.c: the etcd v2 store of the server (NULL before registration or after close). */
struct mu_store *v2_keys_store(struct rv_server *srv);

int rv_security_new(const struct rv_security_config *cfg, struct rv_security **out, char *err,
                    size_t errlen)
{
  struct rv_security *sec = mu_calloc(1, sizeof(*sec));
  int rc = 0;
  *out = NULL;
  err[0] = '\0';
  sec->auth = rv_auth_new();
  sec->quota = rv_quota_new(&cfg->quota);
  if (cfg->tls.cert_file != NULL || cfg->tls.key_file != NULL || cfg->tls.client_ca_file != NULL) {
    if (cfg->tls.cert_file == NULL || cfg->tls.key_file == NULL) {
      snprintf(err, errlen,
               "TLS needs both --tls-cert FILE and --tls-key FILE (--tls-client-ca only adds "
               "client-certificate checks)");
      rc = MU_EINVAL;
      goto out;
    }
    rc = rv_tls_new(&cfg->tls, &sec->tls, err, errlen);
    if (rc != 0)
      goto out;
  }
  if (cfg->token_file != NULL) {
    rc = rv_auth_load_tokens(sec->auth, cfg->token_file, err, errlen);
    if (rc != 0)
      goto out;
  }
  if (cfg->users_file != NULL) {
    rc = rv_auth_load_users(sec->auth, cfg->users_file, err, errlen);
    if (rc != 0)
      goto out;
  }
  for (size_t i = 0; i < cfg->nauth_users; i++) {
    rc = rv_auth_add_user_spec(sec->auth, cfg->auth_users[i], err, errlen);
    if (rc != 0)
      goto out;
  }
  *out = sec;
  sec = NULL;
out:
  rv_security_free(sec);
  return rc;
}

void rv_security_free(struct rv_security *sec)
{
  if (sec == NULL)
    return;
  rv_tls_free(sec->tls);
  rv_auth_free(sec->auth);
  rv_quota_free(sec->quota);
  mu_free(sec);
}

static void sec_metrics(struct rv_server *srv, void *data, struct mu_buf *out)
{
  struct rv_security *sec = data;
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
  if (rv_auth_enabled(sec->auth))
    rv_auth_metrics(sec->auth, out);
  if (rv_quota_enabled(sec->quota))
    rv_quota_metrics(sec->quota, out);
}

int rv_security_attach(struct rv_server *srv, struct rv_security *sec)
{
  if (srv->sec != NULL)
    return MU_EEXIST;
  struct rv_module m = {"security", sec, NULL, sec_metrics};
  /* freed by the server itself, after its last connection (their TLS sessions use it);
   * without a module slot only the metrics are missing */
  srv->sec = sec;
  rv_server_add_module(srv, &m);
  return 0;
}

struct rv_security *rv_security_of(const struct rv_server *srv)
{
  return srv->sec;
}

const char *rv_security_scheme(const struct rv_security *sec)
{
  return sec != NULL && sec->tls != NULL ? "https" : "http";
}

int rv_security_auth_gate(struct rv_security *sec, struct rv_req *req)
{
  if (sec == NULL)
    return 0;
  return rv_auth_gate(sec->auth, req);
}

int rv_security_quota_gate(struct rv_security *sec, struct rv_req *req, const char *peer,
                           struct rv_quota_ticket *t)
{
  memset(t, 0, sizeof(*t));
  if (sec == NULL || !rv_quota_enabled(sec->quota))
    return 0;
  rv_quota_set_store(sec->quota, v2_keys_store(req->srv));
  rv_quota_set_rdzv(sec->quota, rv_v1_rdzv(req->srv));
  return rv_quota_gate(sec->quota, req, peer, t);
}

void rv_security_describe(const struct rv_security *sec, char *out, size_t n)
{
  size_t ntok = 0, nusers = 0, o = 0;
  if (n == 0)
    return;
  out[0] = '\0';
  if (sec == NULL) {
    snprintf(out, n, "plain HTTP, no credentials, no quotas");
    return;
  }
  rv_auth_counts(sec->auth, &ntok, &nusers);
  o += (size_t)snprintf(out + o, n - o, "%s; ",
                        sec->tls == NULL                    ? "plain HTTP"
                        : rv_tls_verifies_clients(sec->tls) ? "TLS with client certificates"
                                                            : "TLS");
  if (o < n) {
    if (ntok + nusers == 0)
      o += (size_t)snprintf(out + o, n - o, "no credentials required");
    else
      o += (size_t)snprintf(out + o, n - o, "credentials required (%zu token%s, %zu user%s)", ntok,
                            ntok == 1 ? "" : "s", nusers, nusers == 1 ? "" : "s");
  }
  if (o < n)
    snprintf(out + o, n - o, "; %s", rv_quota_enabled(sec->quota) ? "quotas set" : "no quotas");
}
