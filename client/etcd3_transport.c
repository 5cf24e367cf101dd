/* The etcd v3 backend's transport (etcd3_int.h): the members, a call that moves to the next
 * member when one fails, logging in, and what etcd's refusals mean. */
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <openssl/crypto.h>

#include "muster/errno.h"

#include "alloc.h"
#include "buf.h"
#include "etcd3_int.h"
#include "http_client.h"
#include "json.h"

#define LEADER_HEADER "Grpc-Metadata-hasleader: true\r\n" /* no answer from a member w/o leader */

long long mu__etcd3_now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

long long mu__etcd3_wall_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void mu__etcd3_say(struct mu_etcd3 *e, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->errmsg, sizeof(e->errmsg), fmt, ap);
  va_end(ap);
}

/* Sleeps ms or until the cancel fd is readable. Returns: 1 when canceled. */
int mu__etcd3_nap(const struct mu_etcd3 *e, long ms)
{
  if (e->cancel_fd < 0) {
    poll(NULL, 0, (int)ms);
    return 0;
  }
  struct pollfd p = {e->cancel_fd, POLLIN, 0};
  return poll(&p, 1, (int)ms) > 0;
}

/* ---------------------------------------------------------------------------------------------
 * Calls: one member at a time, the next one when it fails
 */

static int parse_member(const char *s, size_t n, struct mu_etcd3_member *m, int *https)
{
  char host[256];
  int port = 0;
  if (mu_http_endpoint_parse(s, n, host, sizeof(host), &port, https) != 0)
    return MU_EINVAL;
  m->host = mu_strdup(host);
  m->port = port;
  return 0;
}

int mu_etcd3_new(const char *endpoints, struct mu_etcd3 **out, char *err, size_t n)
{
  *out = NULL;
  const char *p = endpoints != NULL ? endpoints : "";
  if (strncmp(p, MU_ETCD3_SCHEME, strlen(MU_ETCD3_SCHEME)) == 0)
    p += strlen(MU_ETCD3_SCHEME);
  struct mu_etcd3 *e = mu_calloc(1, sizeof(*e));
  e->cancel_fd = -1;
  e->timeout_ms = 10000;
  e->attempt_ms = ETCD3_ATTEMPT_MS;
  e->level = -1;
  while (*p != '\0') {
    const char *comma = strchr(p, ',');
    size_t len = comma != NULL ? (size_t)(comma - p) : strlen(p);
    if (e->nm == ETCD3_MAX_MEMBERS) {
      snprintf(err, n, "more than %d etcd endpoints in '%s'", ETCD3_MAX_MEMBERS, endpoints);
      goto fail;
    }
    if (parse_member(p, len, &e->m[e->nm], &e->https) != 0) {
      snprintf(err, n, "'%.*s' in '%s' is not HOST:PORT or http(s)://HOST:PORT", (int)len, p,
               endpoints);
      goto fail;
    }
    e->nm++;
    p += len;
    if (*p == ',')
      p++;
  }
  if (e->nm == 0) {
    snprintf(err, n, "no etcd endpoint in '%s'; use etcd-v3://HOST:PORT[,HOST:PORT...]",
             endpoints ? endpoints : "");
    goto fail;
  }
  e->spec = mu_strdup(endpoints);
  /* spread the clients over the members: by process, and by client within one (threads) */
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  unsigned long long h = (unsigned long long)getpid() * 0x9e3779b97f4a7c15ULL;
  h ^= (unsigned long long)(uintptr_t)e * 0xff51afd7ed558ccdULL ^ (unsigned long long)ts.tv_nsec;
  e->cur = (size_t)((h ^ (h >> 29)) % e->nm);
  *out = e;
  return 0;
fail:
  mu_etcd3_free(e);
  return MU_EINVAL;
}

int mu_etcd3_display(const char *endpoints, char **out, char *err, size_t n)
{
  struct mu_etcd3 *e = NULL;
  *out = NULL;
  int rc = mu_etcd3_new(endpoints, &e, err, n);
  if (rc != 0)
    return rc;
  struct mu_buf b = MU_BUF_INIT(ETCD3_MAX_MEMBERS * 300); /* a member: at most 255 + 24 bytes */
  mu_buf_puts(&b, MU_ETCD3_SCHEME);
  for (size_t i = 0; i < e->nm; i++) {
    const struct mu_etcd3_member *m = &e->m[i];
    int v6 = strchr(m->host, ':') != NULL;
    mu_buf_printf(&b, "%s%s%s%s%s:%d", i > 0 ? "," : "", e->https ? "https://" : "", v6 ? "[" : "",
                  m->host, v6 ? "]" : "", m->port);
  }
  mu_etcd3_free(e);
  *out = mu_strdup(mu_buf_str(&b));
  mu_buf_release(&b);
  return 0;
}

void mu_etcd3_free(struct mu_etcd3 *e)
{
  if (e == NULL)
    return;
  mu__etcd3_keeper_stop(e);
  for (size_t i = 0; i < e->nm; i++) {
    mu_http_client_free(e->m[i].http);
    mu_free(e->m[i].host);
  }
  mu_free(e->my_key);
  mu_free(e->spec);
  mu_free(e);
}

void mu_etcd3_set_timeout(struct mu_etcd3 *e, long ms)
{
  e->timeout_ms = ms > 0 ? ms : 1;
}

void mu_etcd3_set_cancel_fd(struct mu_etcd3 *e, int fd)
{
  e->cancel_fd = fd;
  for (size_t i = 0; i < e->nm; i++)
    if (e->m[i].http != NULL)
      mu_http_client_set_cancel_fd(e->m[i].http, fd);
}

const char *mu_etcd3_errmsg(const struct mu_etcd3 *e)
{
  return e->errmsg;
}

int mu_etcd3_local_addr(const struct mu_etcd3 *e, char *out, size_t n)
{
  if (e->addr[0] == '\0')
    return MU_ENOENT;
  snprintf(out, n, "%s", e->addr);
  return 0;
}

/* etcd's refusals that no other member will lift, with what to change: MU_EAUTH with the
 * words in errmsg, or 0 when msg is none of them. */
static int refusal(struct mu_etcd3 *e, const struct mu_etcd3_member *m, const char *msg)
{
  const char *user = getenv("MUSTER_RDZV_USER");
  if (strstr(msg, "CommonName of client") != NULL)
    mu__etcd3_say(
        e,
        "etcd at %s:%d refuses a client certificate with a CommonName on its JSON gateway (etcd "
        "3.4 --client-cert-auth); give MUSTER_RDZV_CERT a certificate without CN (e.g. subject "
        "/O=muster) and log in with MUSTER_RDZV_USER and MUSTER_RDZV_PASSWORD",
        m->host, m->port);
  else if (strstr(msg, "user name is empty") != NULL)
    mu__etcd3_say(e,
                  "etcd at %s:%d has auth enabled: set MUSTER_RDZV_USER and MUSTER_RDZV_PASSWORD",
                  m->host, m->port);
  else if (strstr(msg, "permission denied") != NULL)
    mu__etcd3_say(e,
                  "etcd at %s:%d: user '%s' may not use /muster/: %s; grant it (etcdctl role "
                  "grant-permission ROLE --prefix=true readwrite /muster/)",
                  m->host, m->port, user != NULL ? user : "", msg);
  else if (strstr(msg, "authentication failed") != NULL || strstr(msg, "auth: ") != NULL ||
           strstr(msg, "authentication is not enabled") != NULL)
    mu__etcd3_say(e, "etcd at %s:%d: %s; check MUSTER_RDZV_USER and MUSTER_RDZV_PASSWORD", m->host,
                  m->port, msg);
  else
    return 0;
  return MU_EAUTH;
}

/* A failed exchange with m that is TLS refusing trust (either side): MU_EAUTH with what to
 * change, or 0 when it is something else (then another member may answer). */
int mu__etcd3_tls_refusal(struct mu_etcd3 *e, const struct mu_etcd3_member *m)
{
  const char *why = mu_http_client_errmsg(m->http);
  if (strstr(why, "alert") != NULL &&
      (strstr(why, "certificate") != NULL || strstr(why, "unknown ca") != NULL))
    mu__etcd3_say(e,
                  "etcd at %s:%d refused this client's certificate (%s); set MUSTER_RDZV_CERT and "
                  "MUSTER_RDZV_KEY to a client certificate signed by etcd's --trusted-ca-file",
                  m->host, m->port, why);
  else if (strstr(why, "TLS handshake") != NULL &&
           (strstr(why, "certificate") != NULL || strstr(why, "issuer") != NULL ||
            strstr(why, "verify") != NULL || strstr(why, "mismatch") != NULL))
    mu__etcd3_say(
        e,
        "cannot trust etcd at %s:%d (%s); set MUSTER_RDZV_CACERT to the CA that signed etcd's "
        "--cert-file",
        m->host, m->port, why);
  else
    return 0;
  return MU_EAUTH;
}

static int post_raw(struct mu_etcd3 *e, struct mu_etcd3_member *m, const char *path,
                    const char *body, long timeout, struct mu_http_response *resp);

/* The member's client, logged in when MUSTER_RDZV_USER is set. */
int mu__etcd3_member_client(struct mu_etcd3 *e, struct mu_etcd3_member *m)
{
  if (m->http != NULL)
    return 0;
  m->http = mu_http_client_new(m->host, m->port);
  mu_http_client_set_cancel_fd(m->http, e->cancel_fd);
  mu_http_client_set_connect_timeout(m->http, 1000);
  mu_http_client_set_headers(m->http, LEADER_HEADER);
  if (mu_http_client_tls_from_env(m->http, e->https) != 0) { /* names the file */
    mu__etcd3_say(e, "%s", mu_http_client_errmsg(m->http));
    mu_http_client_free(m->http);
    m->http = NULL;
    return MU_EINVAL;
  }
  const char *user = getenv("MUSTER_RDZV_USER"), *pass = getenv("MUSTER_RDZV_PASSWORD");
  if (user == NULL || user[0] == '\0')
    return 0;
  cJSON *req = cJSON_CreateObject();
  cJSON_AddStringToObject(req, "name", user);
  cJSON_AddStringToObject(req, "password", pass != NULL ? pass : "");
  char *txt = cJSON_PrintUnformatted(req);
  cJSON_Delete(req);
  struct mu_http_response r;
  mu_http_response_init(&r, 64 * 1024);
  int rc = post_raw(e, m, "/v3/auth/authenticate", txt, ETCD3_ATTEMPT_MS, &r);
  OPENSSL_cleanse(txt, strlen(txt));
  cJSON_free(txt);
  cJSON *j = rc == 0 ? cJSON_ParseWithLength(r.body.data ? r.body.data : "", r.body.len) : NULL;
  const char *token = mu_json_get_str(j, "token");
  if (rc == 0 && r.status == 200 && token != NULL) {
    mu_http_client_set_authorization(m->http, token);
  } else if (rc == 0) {
    const char *msg = mu_json_get_str(j, "message"), *body = mu_buf_str(&r.body);
    if (strstr(body, "CommonName of client") != NULL)
      refusal(e, m, body);
    else
      mu__etcd3_say(e,
                    "etcd at %s:%d refused the login of user '%s': %s; check MUSTER_RDZV_USER and "
                    "MUSTER_RDZV_PASSWORD",
                    m->host, m->port, user, msg != NULL ? msg : body);
    rc = MU_EAUTH;
  } else if (rc != MU_ECANCELED && mu__etcd3_tls_refusal(e, m) != 0) {
    rc = MU_EAUTH;
  }
  cJSON_Delete(j);
  mu_http_response_release(&r);
  if (rc != 0) {
    mu_http_client_free(m->http);
    m->http = NULL;
  }
  return rc;
}

static int post_raw(struct mu_etcd3 *e, struct mu_etcd3_member *m, const char *path,
                    const char *body, long timeout, struct mu_http_response *resp)
{
  int rc = mu_http_request(m->http, "POST", path, "application/json", body, strlen(body),
                           (int)timeout, resp);
  if (rc == 0)
    mu_http_client_local_addr(m->http, e->addr, sizeof(e->addr));
  else if (rc != MU_ECANCELED)
    mu__etcd3_say(e, "etcd at %s:%d: %s", m->host, m->port, mu_http_client_errmsg(m->http));
  return rc;
}

/* An answer other than 200: is it worth asking another member (*retry), or logging in again
 * (*relogin: the token expired)? Keeps the words in errmsg. Returns: MU_EHTTP or MU_EAUTH. */
int mu__etcd3_error_answer(struct mu_etcd3 *e, const struct mu_etcd3_member *m, const char *path,
                           const struct mu_http_response *r, int *retry, int *relogin)
{
  cJSON *j = cJSON_ParseWithLength(r->body.data ? r->body.data : "", r->body.len);
  const cJSON *inner = cJSON_GetObjectItemCaseSensitive(j, "error");
  const cJSON *o = cJSON_IsObject(inner) ? inner : j;
  const char *msg = mu_json_get_str(o, "message");
  if (msg == NULL)
    msg = mu_json_get_str(o, "error");
  if (msg == NULL && j == NULL && r->body.len > 0)
    msg = mu_buf_str(&r->body); /* the gateway's own refusals are plain text */
  long code = mu_json_get_long(o, "code", -1);
  *relogin = msg != NULL && strstr(msg, "invalid auth token") != NULL;
  *retry = r->status >= 500 || code == 14 || code == 4 || *relogin ||
           (msg != NULL && (strstr(msg, "leader") != NULL || strstr(msg, "timed out") != NULL));
  int rc = MU_EHTTP;
  if (msg == NULL)
    mu__etcd3_say(
        e, "%s:%d answered HTTP %d for %s, not an etcd v3 answer (is the endpoint etcd >= 3.4?)",
        m->host, m->port, r->status, path);
  else if (*relogin || (rc = refusal(e, m, msg)) == 0) {
    rc = MU_EHTTP;
    mu__etcd3_say(e, "etcd at %s:%d: %s", m->host, m->port, msg);
  }
  cJSON_Delete(j);
  return rc;
}

/* Moves to the next member; after a full turn, naps a little. Returns: 1 when canceled. */
int mu__etcd3_next_member(struct mu_etcd3 *e, size_t *tried)
{
  e->cur = (e->cur + 1) % e->nm;
  if (++*tried % e->nm == 0)
    return mu__etcd3_nap(e, 100);
  return 0;
}

int mu__etcd3_relogin(struct mu_etcd3 *e, struct mu_etcd3_member *m, int *relogins, long left)
{
  int n = (*relogins)++;
  long wait = n == 0 ? 0 : 100L << (n - 1 < 4 ? n - 1 : 4);
  mu_http_client_free(m->http); /* the next request logs in again */
  m->http = NULL;
  if (wait > left)
    wait = left > 0 ? left : 0;
  return wait > 0 && mu__etcd3_nap(e, wait);
}

/* POSTs body to path on the current member, then the others, until timeout_ms passed.
 * Returns: 0 with *out the parsed answer (the caller's), or an MU_E* code. */
int mu__etcd3_call(struct mu_etcd3 *e, const char *path, const cJSON *body, long timeout_ms,
                   cJSON **out)
{
  *out = NULL;
  char *txt = cJSON_PrintUnformatted(body);
  long long deadline = mu__etcd3_now_ms() + timeout_ms;
  size_t tried = 0;
  int rc = MU_ETIMEDOUT, relogins = 0;
  struct mu_http_response r;
  mu_http_response_init(&r, ETCD3_MAX_ANSWER);
  for (;;) {
    long left = (long)(deadline - mu__etcd3_now_ms());
    if (left <= 0)
      break;
    struct mu_etcd3_member *m = &e->m[e->cur];
    rc = mu__etcd3_member_client(e, m);
    if (rc == 0) {
      /* each full turn over the members doubles a member's share: an overloaded cluster is
       * given time instead of the same request again elsewhere */
      long per = e->attempt_ms << (tried / e->nm < 4 ? tried / e->nm : 4);
      rc = post_raw(e, m, path, txt, left < per ? left : per, &r);
    }
    if (rc == MU_ECANCELED)
      break;
    if (rc == 0 && r.status == 200) {
      *out = cJSON_ParseWithLength(r.body.data ? r.body.data : "", r.body.len);
      if (*out == NULL) {
        mu__etcd3_say(e, "etcd at %s:%d sent an answer that is not JSON for %s", m->host, m->port,
                      path);
        rc = MU_EPROTO;
      }
      break;
    }
    if (rc == 0) {
      int retry = 0, relogin = 0;
      rc = mu__etcd3_error_answer(e, m, path, &r, &retry, &relogin);
      if (relogin) { /* the token expired: log in again, on this member */
        if (mu__etcd3_relogin(e, m, &relogins, (long)(deadline - mu__etcd3_now_ms()))) {
          rc = MU_ECANCELED;
          break;
        }
        continue;
      }
      if (!retry)
        break;
      rc = MU_ECONN;
    } else if (rc != MU_ECANCELED && m->http != NULL && mu__etcd3_tls_refusal(e, m) != 0) {
      rc = MU_EAUTH;
    }
    if (rc == MU_EAUTH || rc == MU_EINVAL)
      break; /* no other member will think otherwise */
    if (mu__etcd3_next_member(e, &tried)) {
      rc = MU_ECANCELED;
      break;
    }
  }
  mu_http_response_release(&r);
  cJSON_free(txt);
  if (rc == MU_ETIMEDOUT && e->errmsg[0] == '\0')
    mu__etcd3_say(e, "no etcd member answered within %ld ms", timeout_ms);
  return rc;
}

int mu__etcd3_txn_run(struct mu_etcd3 *e, struct mu__etcd3_txn *t, cJSON **ans)
{
  int rc = mu__etcd3_call(e, "/v3/kv/txn", t->root, e->timeout_ms, ans);
  cJSON_Delete(t->root);
  t->root = NULL;
  return rc;
}

int mu__etcd3_txn_ok(const cJSON *ans)
{
  return mu_json_get_bool(ans, "succeeded", 0);
}

/* ---------------------------------------------------------------------------------------------
 * For tests/unit/test_etcd3.c
 */

const char *mu__etcd3_member(const struct mu_etcd3 *e, size_t i, int *port)
{
  if (i >= e->nm)
    return NULL;
  *port = e->m[i].port;
  return e->m[i].host;
}

size_t mu__etcd3_current(const struct mu_etcd3 *e)
{
  return e->cur;
}

void mu__etcd3_next(struct mu_etcd3 *e)
{
  size_t tried = 1; /* not a full turn: no nap */
  mu__etcd3_next_member(e, &tried);
}

int mu__etcd3_answer(struct mu_etcd3 *e, int status, const char *body, int *retry, int *relogin)
{
  struct mu_http_response r;
  mu_http_response_init(&r, ETCD3_MAX_ANSWER);
  r.status = status;
  mu_buf_puts(&r.body, body);
  int rc = mu__etcd3_error_answer(e, &e->m[e->cur], "/v3/kv/txn", &r, retry, relogin);
  mu_http_response_release(&r);
  return rc;
}
