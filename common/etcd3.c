/* The rendezvous on etcd v3 through its JSON gateway (etcd3.h; the protocol in
 * docs/rendezvous.md, "The etcd v3 backend"). Every decision is a transaction that compares
 * revisions, waiting is a watch from the revision last read, liveness is a lease kept alive by
 * a thread. Keys under /muster/<run>/:
 *   c/cfg    the run's configuration (created by the first join)
 *   c/end    {"state": "closed"|"shut", "reason"} once the run ended
 *   c/round  the latest round: {"round", "max", "ttl", "nnodes", "world", "master_addr",
 *            "master_port"} and, up to MEMBERS_INLINE nodes, "members": [{id, addr, lws, port}];
 *            above, "buckets": B and the members in m/<R> (all) and a/<R>/<b> (by node id)
 *   m/<R>    the members of round R when it has more than MEMBERS_INLINE nodes
 *   a/<R>/<b>    {"round": R, "m": [[id, rank, offset, lws]...]}: the members of round R whose
 *                id hashes to bucket b (what a joining node watches to learn its rank)
 *   d/<N>/<id>   node id left round N successfully
 *   n/<L>/<id>   node id waits for (L = N - 1: is in) round L + 1; leased
 *   b/<name>/g, b/<name>/a/<G>/<id>   barrier generation and arrivals
 *   kv/<key>     the run's KV
 */
#include <errno.h>
#include <fcntl.h>
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
#include <openssl/evp.h>
#include <uv.h>

#include "muster/errno.h"

#include "alloc.h"
#include "buf.h"
#include "etcd3.h"
#include "http_client.h"
#include "json.h"
#include "opts.h"

#define MAX_ANSWER (8u << 20)
#define ATTEMPT_MS 2000 /* one member's share of a call before the next one is tried */
#define MAX_MEMBERS 16
#define LEVEL_FMT "%010ld"
#define LEADER_HEADER "Grpc-Metadata-hasleader: true\r\n" /* no answer from a member w/o leader */
/* A round of more nodes than this keeps its member list out of c/round, which every waiting
 * node watches: N watchers x an N-member value is O(N^2) bytes through the gateway (a 1,000-node
 * round took 5 s to reach its last node that way). As musterd's join answer, the list is then
 * left out of the round a join returns; each node finds its rank in its bucket a/<R>/<b>. */
#define MEMBERS_INLINE 256
#define BUCKETS 64 /* one put each in the close txn, under etcd's default --max-txn-ops 128 */

struct member {
  char *host;
  int port;
  struct mu_http_client *http; /* created at first use */
};

struct keeper;

struct mu_etcd3 {
  struct member m[MAX_MEMBERS];
  size_t nm, cur;
  char *spec; /* the endpoints as given: the keeper opens its own client from it */
  int https;
  long timeout_ms;
  long attempt_ms; /* one member's share of a call */
  int cancel_fd;
  char errmsg[512];
  int unreached; /* the last watch() reached no member: every attempt failed to connect */
  char addr[64];
  /* this node's membership (a join made it) */
  char lease[32];
  long ttl_ms;
  char *my_key; /* n/<L>/<id> of this node, full key */
  long level;
  struct keeper *keeper;
};

static long long now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void say(struct mu_etcd3 *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(struct mu_etcd3 *e, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->errmsg, sizeof(e->errmsg), fmt, ap);
  va_end(ap);
}

/* Sleeps ms or until the cancel fd is readable. Returns: 1 when canceled. */
static int nap(const struct mu_etcd3 *e, long ms)
{
  if (e->cancel_fd < 0) {
    poll(NULL, 0, (int)ms);
    return 0;
  }
  struct pollfd p = {e->cancel_fd, POLLIN, 0};
  return poll(&p, 1, (int)ms) > 0;
}

/* ---------------------------------------------------------------------------------------------
 * Base64 and JSON pieces of etcd's gateway
 */

static char *b64(const void *p, size_t n)
{
  char *out = mu_malloc(4 * ((n + 2) / 3) + 1);
  EVP_EncodeBlock((unsigned char *)out, p, (int)n);
  return out;
}

/* Ownership: the result is NUL-terminated, the caller's. */
static char *unb64(const char *s, size_t *len)
{
  size_t n = s != NULL ? strlen(s) : 0;
  char *out = mu_malloc(n / 4 * 3 + 4);
  int got = n > 0 ? EVP_DecodeBlock((unsigned char *)out, (const unsigned char *)s, (int)n) : 0;
  if (got < 0)
    got = 0;
  while (n > 0 && s[n - 1] == '=' && got > 0) {
    got--;
    n--;
  }
  out[got] = '\0';
  if (len != NULL)
    *len = (size_t)got;
  return out;
}

/* etcd's int64 fields are strings, absent when 0. */
static long long jll(const cJSON *o, const char *name)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
  if (cJSON_IsString(v))
    return strtoll(v->valuestring, NULL, 10);
  if (cJSON_IsNumber(v))
    return (long long)v->valuedouble;
  return 0;
}

static void add_b64(cJSON *o, const char *name, const void *p, size_t n)
{
  char *s = b64(p, n);
  cJSON_AddStringToObject(o, name, s);
  mu_free(s);
}

static void add_ll(cJSON *o, const char *name, long long v)
{
  char s[32];
  snprintf(s, sizeof(s), "%lld", v);
  cJSON_AddStringToObject(o, name, s);
}

/* The end of the range of every key that starts with prefix. Ownership: caller's. */
static char *prefix_end(const char *prefix)
{
  char *end = mu_strdup(prefix);
  size_t n = strlen(end);
  end[n - 1]++;
  return end;
}

enum { R_ALL = 0, R_COUNT = 1, R_KEYS = 2 };

static cJSON *op_range(const char *key, const char *end, int how)
{
  cJSON *op = cJSON_CreateObject(), *r = cJSON_AddObjectToObject(op, "request_range");
  add_b64(r, "key", key, strlen(key));
  if (end != NULL)
    add_b64(r, "range_end", end, strlen(end));
  if (how == R_COUNT)
    cJSON_AddTrueToObject(r, "count_only");
  if (how == R_KEYS)
    cJSON_AddTrueToObject(r, "keys_only");
  return op;
}

static cJSON *op_prefix(const char *prefix, int how)
{
  char *end = prefix_end(prefix);
  cJSON *op = op_range(prefix, end, how);
  mu_free(end);
  return op;
}

static cJSON *op_put(const char *key, const void *val, size_t n, const char *lease)
{
  cJSON *op = cJSON_CreateObject(), *r = cJSON_AddObjectToObject(op, "request_put");
  add_b64(r, "key", key, strlen(key));
  add_b64(r, "value", val, n);
  if (lease != NULL && lease[0] != '\0')
    cJSON_AddStringToObject(r, "lease", lease);
  return op;
}

static cJSON *op_del(const char *key, const char *end)
{
  cJSON *op = cJSON_CreateObject(), *r = cJSON_AddObjectToObject(op, "request_delete_range");
  add_b64(r, "key", key, strlen(key));
  if (end != NULL)
    add_b64(r, "range_end", end, strlen(end));
  return op;
}

/* target "MOD" or "CREATE" compared with rev; end != NULL compares every key of the range. */
static cJSON *cmp(const char *key, const char *end, const char *target, const char *result,
                  long long rev)
{
  cJSON *c = cJSON_CreateObject();
  add_b64(c, "key", key, strlen(key));
  if (end != NULL)
    add_b64(c, "range_end", end, strlen(end));
  cJSON_AddStringToObject(c, "target", target);
  cJSON_AddStringToObject(c, "result", result);
  add_ll(c, strcmp(target, "MOD") == 0 ? "mod_revision" : "create_revision", rev);
  return c;
}

struct txn {
  cJSON *root, *compare, *success, *failure;
};

static void txn_init(struct txn *t)
{
  t->root = cJSON_CreateObject();
  t->compare = cJSON_AddArrayToObject(t->root, "compare");
  t->success = cJSON_AddArrayToObject(t->root, "success");
  t->failure = cJSON_AddArrayToObject(t->root, "failure");
}

/* The range answer of responses[i] of a txn answer (NULL if not one). */
static const cJSON *txn_range(const cJSON *ans, int i)
{
  const cJSON *rs = cJSON_GetObjectItemCaseSensitive(ans, "responses");
  return cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(rs, i), "response_range");
}

static const cJSON *range_first(const cJSON *range)
{
  return cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(range, "kvs"), 0);
}

static long long header_rev(const cJSON *ans)
{
  return jll(cJSON_GetObjectItemCaseSensitive(ans, "header"), "revision");
}

/* The value of kv as a parsed JSON object (NULL if none). Ownership: caller's. */
static cJSON *kv_json(const cJSON *kv)
{
  if (kv == NULL)
    return NULL;
  size_t n = 0;
  char *v = unb64(mu_json_get_str(kv, "value"), &n);
  cJSON *j = cJSON_ParseWithLength(v, n);
  mu_free(v);
  return j;
}

/* ---------------------------------------------------------------------------------------------
 * Calls: one member at a time, the next one when it fails
 */

static int parse_member(const char *s, size_t n, struct member *m, int *https)
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
  e->attempt_ms = ATTEMPT_MS;
  e->level = -1;
  while (*p != '\0') {
    const char *comma = strchr(p, ',');
    size_t len = comma != NULL ? (size_t)(comma - p) : strlen(p);
    if (e->nm == MAX_MEMBERS) {
      snprintf(err, n, "more than %d etcd endpoints in '%s'", MAX_MEMBERS, endpoints);
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
  struct mu_buf b = MU_BUF_INIT(MAX_MEMBERS * 300); /* a member: at most 255 + 24 bytes */
  mu_buf_puts(&b, MU_ETCD3_SCHEME);
  for (size_t i = 0; i < e->nm; i++) {
    const struct member *m = &e->m[i];
    int v6 = strchr(m->host, ':') != NULL;
    mu_buf_printf(&b, "%s%s%s%s%s:%d", i > 0 ? "," : "", e->https ? "https://" : "", v6 ? "[" : "",
                  m->host, v6 ? "]" : "", m->port);
  }
  mu_etcd3_free(e);
  *out = mu_strdup(mu_buf_str(&b));
  mu_buf_release(&b);
  return 0;
}

static void keeper_stop(struct mu_etcd3 *e);

void mu_etcd3_free(struct mu_etcd3 *e)
{
  if (e == NULL)
    return;
  keeper_stop(e);
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
static int refusal(struct mu_etcd3 *e, const struct member *m, const char *msg)
{
  const char *user = getenv("MUSTER_RDZV_USER");
  if (strstr(msg, "CommonName of client") != NULL)
    say(e,
        "etcd at %s:%d refuses a client certificate with a CommonName on its JSON gateway (etcd "
        "3.4 --client-cert-auth); give MUSTER_RDZV_CERT a certificate without CN (e.g. subject "
        "/O=muster) and log in with MUSTER_RDZV_USER and MUSTER_RDZV_PASSWORD",
        m->host, m->port);
  else if (strstr(msg, "user name is empty") != NULL)
    say(e, "etcd at %s:%d has auth enabled: set MUSTER_RDZV_USER and MUSTER_RDZV_PASSWORD", m->host,
        m->port);
  else if (strstr(msg, "permission denied") != NULL)
    say(e,
        "etcd at %s:%d: user '%s' may not use /muster/: %s; grant it (etcdctl role "
        "grant-permission ROLE --prefix=true readwrite /muster/)",
        m->host, m->port, user != NULL ? user : "", msg);
  else if (strstr(msg, "authentication failed") != NULL || strstr(msg, "auth: ") != NULL ||
           strstr(msg, "authentication is not enabled") != NULL)
    say(e, "etcd at %s:%d: %s; check MUSTER_RDZV_USER and MUSTER_RDZV_PASSWORD", m->host, m->port,
        msg);
  else
    return 0;
  return MU_EAUTH;
}

/* A failed exchange with m that is TLS refusing trust (either side): MU_EAUTH with what to
 * change, or 0 when it is something else (then another member may answer). */
static int tls_refusal(struct mu_etcd3 *e, const struct member *m)
{
  const char *why = mu_http_client_errmsg(m->http);
  if (strstr(why, "alert") != NULL &&
      (strstr(why, "certificate") != NULL || strstr(why, "unknown ca") != NULL))
    say(e,
        "etcd at %s:%d refused this client's certificate (%s); set MUSTER_RDZV_CERT and "
        "MUSTER_RDZV_KEY to a client certificate signed by etcd's --trusted-ca-file",
        m->host, m->port, why);
  else if (strstr(why, "TLS handshake") != NULL &&
           (strstr(why, "certificate") != NULL || strstr(why, "issuer") != NULL ||
            strstr(why, "verify") != NULL || strstr(why, "mismatch") != NULL))
    say(e,
        "cannot trust etcd at %s:%d (%s); set MUSTER_RDZV_CACERT to the CA that signed etcd's "
        "--cert-file",
        m->host, m->port, why);
  else
    return 0;
  return MU_EAUTH;
}

static int post_raw(struct mu_etcd3 *e, struct member *m, const char *path, const char *body,
                    long timeout, struct mu_http_response *resp);

/* The member's client, logged in when MUSTER_RDZV_USER is set. */
static int member_client(struct mu_etcd3 *e, struct member *m)
{
  if (m->http != NULL)
    return 0;
  m->http = mu_http_client_new(m->host, m->port);
  mu_http_client_set_cancel_fd(m->http, e->cancel_fd);
  mu_http_client_set_connect_timeout(m->http, 1000);
  mu_http_client_set_headers(m->http, LEADER_HEADER);
  if (mu_http_client_tls_from_env(m->http, e->https) != 0) { /* names the file */
    say(e, "%s", mu_http_client_errmsg(m->http));
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
  int rc = post_raw(e, m, "/v3/auth/authenticate", txt, ATTEMPT_MS, &r);
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
      say(e,
          "etcd at %s:%d refused the login of user '%s': %s; check MUSTER_RDZV_USER and "
          "MUSTER_RDZV_PASSWORD",
          m->host, m->port, user, msg != NULL ? msg : body);
    rc = MU_EAUTH;
  } else if (rc != MU_ECANCELED && tls_refusal(e, m) != 0) {
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

static int post_raw(struct mu_etcd3 *e, struct member *m, const char *path, const char *body,
                    long timeout, struct mu_http_response *resp)
{
  int rc = mu_http_request(m->http, "POST", path, "application/json", body, strlen(body),
                           (int)timeout, resp);
  if (rc == 0)
    mu_http_client_local_addr(m->http, e->addr, sizeof(e->addr));
  else if (rc != MU_ECANCELED)
    say(e, "etcd at %s:%d: %s", m->host, m->port, mu_http_client_errmsg(m->http));
  return rc;
}

/* An answer other than 200: is it worth asking another member (*retry), or logging in again
 * (*relogin: the token expired)? Keeps the words in errmsg. Returns: MU_EHTTP or MU_EAUTH. */
static int error_answer(struct mu_etcd3 *e, const struct member *m, const char *path,
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
    say(e, "%s:%d answered HTTP %d for %s, not an etcd v3 answer (is the endpoint etcd >= 3.4?)",
        m->host, m->port, r->status, path);
  else if (*relogin || (rc = refusal(e, m, msg)) == 0) {
    rc = MU_EHTTP;
    say(e, "etcd at %s:%d: %s", m->host, m->port, msg);
  }
  cJSON_Delete(j);
  return rc;
}

/* Moves to the next member; after a full turn, naps a little. Returns: 1 when canceled. */
static int next_member(struct mu_etcd3 *e, size_t *tried)
{
  e->cur = (e->cur + 1) % e->nm;
  if (++*tried % e->nm == 0)
    return nap(e, 100);
  return 0;
}

/* POSTs body to path on the current member, then the others, until timeout_ms passed.
 * Returns: 0 with *out the parsed answer (the caller's), or an MU_E* code. */
static int call(struct mu_etcd3 *e, const char *path, const cJSON *body, long timeout_ms,
                cJSON **out)
{
  *out = NULL;
  char *txt = cJSON_PrintUnformatted(body);
  long long deadline = now_ms() + timeout_ms;
  size_t tried = 0;
  int rc = MU_ETIMEDOUT;
  struct mu_http_response r;
  mu_http_response_init(&r, MAX_ANSWER);
  for (;;) {
    long left = (long)(deadline - now_ms());
    if (left <= 0)
      break;
    struct member *m = &e->m[e->cur];
    rc = member_client(e, m);
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
        say(e, "etcd at %s:%d sent an answer that is not JSON for %s", m->host, m->port, path);
        rc = MU_EPROTO;
      }
      break;
    }
    if (rc == 0) {
      int retry = 0, relogin = 0;
      rc = error_answer(e, m, path, &r, &retry, &relogin);
      if (relogin) { /* the token expired: log in again, on this member */
        mu_http_client_free(m->http);
        m->http = NULL;
        continue;
      }
      if (!retry)
        break;
      rc = MU_ECONN;
    } else if (rc != MU_ECANCELED && m->http != NULL && tls_refusal(e, m) != 0) {
      rc = MU_EAUTH;
    }
    if (rc == MU_EAUTH || rc == MU_EINVAL)
      break; /* no other member will think otherwise */
    if (next_member(e, &tried)) {
      rc = MU_ECANCELED;
      break;
    }
  }
  mu_http_response_release(&r);
  cJSON_free(txt);
  if (rc == MU_ETIMEDOUT && e->errmsg[0] == '\0')
    say(e, "no etcd member answered within %ld ms", timeout_ms);
  return rc;
}

static int txn_run(struct mu_etcd3 *e, struct txn *t, cJSON **ans)
{
  int rc = call(e, "/v3/kv/txn", t->root, e->timeout_ms, ans);
  cJSON_Delete(t->root);
  t->root = NULL;
  return rc;
}

static int txn_ok(const cJSON *ans)
{
  return mu_json_get_bool(ans, "succeeded", 0);
}

/* ---------------------------------------------------------------------------------------------
 * Watches: a stream of JSON lines, resumed on the next member from the last revision seen
 */

struct wrange {
  const char *key, *end;
  int noput; /* deletes only */
};

/* Gets the events of one answer; returns nonzero to end the watch. */
typedef int (*mu_etcd3_events_fn)(void *arg, const cJSON *events);

struct wstream {
  struct mu_buf line;
  mu_etcd3_events_fn fn;
  void *arg;
  long long next_rev; /* where a resumed watch starts */
  int stop;           /* fn said so */
  int broken;         /* the stream ended or said something else than events */
  int compacted;      /* the history from next_rev is gone: read afresh */
};

static int on_stream(void *arg, const char *p, size_t n)
{
  struct wstream *w = arg;
  if (mu_buf_append(&w->line, p, n) != 0) {
    w->broken = 1;
    return 1;
  }
  for (;;) {
    char *nl = memchr(w->line.data, '\n', w->line.len);
    if (nl == NULL)
      return 0;
    cJSON *j = cJSON_ParseWithLength(w->line.data, (size_t)(nl - w->line.data));
    size_t used = (size_t)(nl - w->line.data) + 1;
    mu_buf_consume(&w->line, used);
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(j, "result");
    if (res == NULL || mu_json_get_bool(res, "canceled", 0)) {
      w->compacted = jll(res, "compact_revision") > 0;
      cJSON_Delete(j);
      w->broken = 1;
      return 1;
    }
    const cJSON *evs = cJSON_GetObjectItemCaseSensitive(res, "events");
    const cJSON *ev;
    cJSON_ArrayForEach(ev, evs)
    {
      long long mod = jll(cJSON_GetObjectItemCaseSensitive(ev, "kv"), "mod_revision");
      if (mod + 1 > w->next_rev)
        w->next_rev = mod + 1;
    }
    if (cJSON_GetArraySize(evs) > 0 && w->fn(w->arg, evs) != 0)
      w->stop = 1;
    cJSON_Delete(j);
    if (w->stop)
      return 1;
  }
}

/* Watches the ranges from revision `from` until fn says stop (0), until deadline
 * (MU_ETIMEDOUT) or the cancel fd (MU_ECANCELED). A broken stream moves to the next member
 * and resumes after the last event seen: none lost, none twice. */
static int watch(struct mu_etcd3 *e, const struct wrange *rs, int nr, long long from,
                 long long deadline, mu_etcd3_events_fn fn, void *arg, long long *next)
{
  struct wstream w;
  memset(&w, 0, sizeof(w));
  mu_buf_init(&w.line, MAX_ANSWER);
  w.fn = fn;
  w.arg = arg;
  w.next_rev = from;
  size_t tried = 0;
  int rc = MU_ETIMEDOUT;
  e->unreached = 1;
  struct mu_http_response r;
  mu_http_response_init(&r, 64 * 1024);
  for (;;) {
    long left = (long)(deadline - now_ms());
    if (left <= 0) {
      rc = MU_ETIMEDOUT;
      break;
    }
    struct mu_buf body = MU_BUF_INIT(SIZE_MAX);
    for (int i = 0; i < nr; i++) {
      cJSON *c = cJSON_CreateObject(), *cr = cJSON_AddObjectToObject(c, "create_request");
      add_b64(cr, "key", rs[i].key, strlen(rs[i].key));
      if (rs[i].end != NULL)
        add_b64(cr, "range_end", rs[i].end, strlen(rs[i].end));
      add_ll(cr, "start_revision", w.next_rev);
      if (rs[i].noput)
        cJSON_AddItemToObject(cr, "filters", cJSON_CreateStringArray((const char *[]){"NOPUT"}, 1));
      char *t = cJSON_PrintUnformatted(c);
      mu_buf_printf(&body, "%s\n", t);
      cJSON_free(t);
      cJSON_Delete(c);
    }
    struct member *m = &e->m[e->cur];
    rc = member_client(e, m);
    mu_buf_clear(&w.line);
    w.broken = 0;
    r.on_data = on_stream;
    r.on_data_arg = &w;
    if (rc == 0)
      rc = mu_http_request(m->http, "POST", "/v3/watch", "application/json", body.data, body.len,
                           (int)left, &r);
    mu_buf_release(&body);
    if (rc == MU_ECANCELED)
      break;
    if (rc != MU_ECONN)
      e->unreached = 0; /* a member answered (or a stream ran until the deadline) */
    if (w.stop) {
      rc = 0;
      break;
    }
    if (w.compacted) {
      say(e, "etcd compacted the history a watch needed");
      rc = MU_ESTATE;
      break;
    }
    if (rc == MU_ETIMEDOUT && now_ms() >= deadline)
      break;
    if (rc == 0 && r.status != 200) {
      int retry = 0, relogin = 0;
      rc = error_answer(e, m, "/v3/watch", &r, &retry, &relogin);
      if (relogin) {
        mu_http_client_free(m->http);
        m->http = NULL;
        continue;
      }
      if (!retry)
        break;
    } else if (rc == MU_EAUTH || rc == MU_EINVAL) {
      break; /* refused login, or a TLS file */
    } else if (rc != 0) {
      if (m->http != NULL && tls_refusal(e, m) != 0) {
        rc = MU_EAUTH;
        break;
      }
      say(e, "etcd at %s:%d: %s", m->host, m->port, mu_http_client_errmsg(m->http));
    } else {
      say(e, "etcd at %s:%d ended the watch", m->host, m->port);
    }
    if (next_member(e, &tried)) {
      rc = MU_ECANCELED;
      break;
    }
  }
  mu_http_response_release(&r);
  mu_buf_release(&w.line);
  if (next != NULL)
    *next = w.next_rev;
  return rc;
}

/* ---------------------------------------------------------------------------------------------
 * Leases: granted by join, kept alive by a thread with its own connections
 */

struct keeper {
  uv_thread_t thread;
  int pipe[2];
  struct mu_etcd3 *client;
  long period_ms, ttl_ms;
  uv_mutex_t mu; /* guards what follows: the main thread reads and sets it */
  char lease[32];
  char *key, *val; /* this node's key and value, put again under a new lease if revoked */
};

static int grant(struct mu_etcd3 *e, long ttl_ms, char *id_out, size_t n, long *granted_ms);

/* Renews lease once. Returns: 0 with *ttl the TTL left (0: the lease is gone), or an error. */
static int keepalive_once(struct mu_etcd3 *e, const char *lease, long *ttl)
{
  cJSON *req = cJSON_CreateObject();
  cJSON_AddStringToObject(req, "ID", lease);
  cJSON *ans = NULL;
  int rc = call(e, "/v3/lease/keepalive", req, e->timeout_ms, &ans);
  cJSON_Delete(req);
  if (rc == 0) {
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(ans, "result");
    *ttl = (long)jll(res, "TTL");
    if (res == NULL) {
      rc = MU_EPROTO;
      say(e, "etcd's keep-alive answer has no result");
    }
  }
  cJSON_Delete(ans);
  return rc;
}

/* Renews lease. A lease is gone only when a majority of the members says so: a leader that
 * was stopped and resumes believes, until it hears of its successor, that every lease ran out
 * while it slept. Returns: 0 with *ttl the TTL left (0: gone), or an error. */
static int keepalive(struct mu_etcd3 *e, const char *lease, long *ttl)
{
  size_t gone = 0;
  for (size_t i = 0; i < e->nm; i++) {
    int rc = keepalive_once(e, lease, ttl);
    if (rc != 0 || *ttl > 0)
      return rc;
    if (++gone > e->nm / 2)
      return 0;
    e->cur = (e->cur + 1) % e->nm;
  }
  return 0;
}

/* The lease was revoked although it was renewed in time (etcd 3.4: a leader that was stopped
 * revokes, when it resumes, the leases it thinks expired while it slept, and its proposal is
 * forwarded to the new leader). Grants a new one and puts this node's key again if it is gone,
 * so that the others, which wait one TTL before they call a vanished member lost, see it back.
 * Returns: 0 or an error (tried again at the next renewal). */
static int keeper_revive(struct keeper *k)
{
  char id[32];
  long ms = 0;
  int rc = grant(k->client, k->ttl_ms, id, sizeof(id), &ms);
  if (rc != 0)
    return rc;
  uv_mutex_lock(&k->mu);
  snprintf(k->lease, sizeof(k->lease), "%s", id);
  char *key = k->key ? mu_strdup(k->key) : NULL, *val = k->val ? mu_strdup(k->val) : NULL;
  uv_mutex_unlock(&k->mu);
  if (key != NULL) {
    cJSON *t = cJSON_CreateObject(), *ans = NULL;
    cJSON_AddItemToArray(cJSON_AddArrayToObject(t, "compare"),
                         cmp(key, NULL, "CREATE", "EQUAL", 0));
    cJSON_AddItemToArray(cJSON_AddArrayToObject(t, "success"), op_put(key, val, strlen(val), id));
    rc = call(k->client, "/v3/kv/txn", t, k->client->timeout_ms, &ans);
    cJSON_Delete(t);
    cJSON_Delete(ans);
  }
  mu_free(key);
  mu_free(val);
  return rc;
}

static void keeper_main(void *arg)
{
  struct keeper *k = arg;
  struct pollfd p = {k->pipe[0], POLLIN, 0};
  long wait = k->period_ms;
  while (poll(&p, 1, (int)wait) == 0) {
    long ttl = 0;
    char lease[32];
    uv_mutex_lock(&k->mu);
    snprintf(lease, sizeof(lease), "%s", k->lease);
    uv_mutex_unlock(&k->mu);
    int rc = keepalive(k->client, lease, &ttl);
    if (rc == 0 && ttl <= 0)
      rc = keeper_revive(k);
    wait = rc == 0 ? k->period_ms : 20; /* a failed renewal is tried again at once */
  }
}

/* This node's lease now (the keeper may have replaced it). */
static void lease_now(struct mu_etcd3 *e, char *out, size_t n)
{
  out[0] = '\0';
  if (e->keeper == NULL)
    return;
  uv_mutex_lock(&e->keeper->mu);
  snprintf(out, n, "%s", e->keeper->lease);
  uv_mutex_unlock(&e->keeper->mu);
}

/* Tells the keeper this node's key and value (to put again if its lease is revoked). */
static void keeper_set_key(struct mu_etcd3 *e, const char *key, const char *val)
{
  if (e->keeper == NULL)
    return;
  uv_mutex_lock(&e->keeper->mu);
  mu_free(e->keeper->key);
  mu_free(e->keeper->val);
  e->keeper->key = key ? mu_strdup(key) : NULL;
  e->keeper->val = val ? mu_strdup(val) : NULL;
  uv_mutex_unlock(&e->keeper->mu);
}

static void keeper_stop(struct mu_etcd3 *e)
{
  struct keeper *k = e->keeper;
  if (k == NULL)
    return;
  ssize_t w = write(k->pipe[1], "x", 1);
  (void)w;
  uv_thread_join(&k->thread);
  close(k->pipe[0]);
  close(k->pipe[1]);
  mu_etcd3_free(k->client);
  uv_mutex_destroy(&k->mu);
  mu_free(k->key);
  mu_free(k->val);
  mu_free(k);
  e->keeper = NULL;
}

static int keeper_start(struct mu_etcd3 *e)
{
  struct keeper *k = mu_calloc(1, sizeof(*k));
  char err[256];
  if (pipe(k->pipe) != 0) {
    mu_free(k);
    say(e, "cannot create a pipe: %s", strerror(errno));
    return MU_EINVAL;
  }
  fcntl(k->pipe[0], F_SETFD, FD_CLOEXEC);
  fcntl(k->pipe[1], F_SETFD, FD_CLOEXEC);
  mu_etcd3_new(e->spec, &k->client, err, sizeof(err));
  k->client->cur = (e->cur + 1) % e->nm; /* renewals on another member than the calls */
  snprintf(k->lease, sizeof(k->lease), "%s", e->lease);
  uv_mutex_init(&k->mu);
  k->ttl_ms = e->ttl_ms;
  k->period_ms = e->ttl_ms / 3 > 100 ? e->ttl_ms / 3 : 100;
  /* a member that does not answer (stopped, or forwarding to a leader that is gone) gets a
   * sixth of the TTL, so that all three of a cluster are tried before the lease runs out */
  mu_etcd3_set_timeout(k->client, k->period_ms);
  k->client->attempt_ms = k->period_ms / 2 > 50 ? k->period_ms / 2 : 50;
  mu_etcd3_set_cancel_fd(k->client, k->pipe[0]);
  if (uv_thread_create(&k->thread, keeper_main, k) != 0) {
    close(k->pipe[0]);
    close(k->pipe[1]);
    mu_etcd3_free(k->client);
    uv_mutex_destroy(&k->mu);
    mu_free(k);
    say(e, "cannot start the lease keeper thread");
    return MU_EINVAL;
  }
  e->keeper = k;
  return 0;
}

/* Grants a lease of ttl_ms (whole seconds, at least 1). */
static int grant(struct mu_etcd3 *e, long ttl_ms, char *id_out, size_t n, long *granted_ms)
{
  cJSON *req = cJSON_CreateObject();
  add_ll(req, "TTL", ttl_ms > 1000 ? (ttl_ms + 999) / 1000 : 1);
  cJSON *ans = NULL;
  int rc = call(e, "/v3/lease/grant", req, e->timeout_ms, &ans);
  cJSON_Delete(req);
  const char *id = mu_json_get_str(ans, "ID");
  if (rc == 0 && id == NULL) {
    say(e, "etcd granted no lease: %s", mu_json_get_str(ans, "error"));
    rc = MU_EPROTO;
  }
  if (rc == 0) {
    snprintf(id_out, n, "%s", id);
    *granted_ms = (long)jll(ans, "TTL") * 1000;
    if (*granted_ms <= 0)
      *granted_ms = ttl_ms;
  }
  cJSON_Delete(ans);
  return rc;
}

/* Grants this node's lease and starts keeping it alive; keeps the one it has. */
static int ensure_lease(struct mu_etcd3 *e, long ttl_ms)
{
  if (e->keeper != NULL)
    return 0;
  int rc = grant(e, ttl_ms, e->lease, sizeof(e->lease), &e->ttl_ms);
  if (rc == 0)
    rc = keeper_start(e);
  return rc;
}

static void lease_revoke(struct mu_etcd3 *e)
{
  lease_now(e, e->lease, sizeof(e->lease));
  keeper_stop(e);
  if (e->lease[0] == '\0')
    return;
  cJSON *req = cJSON_CreateObject(), *ans = NULL;
  cJSON_AddStringToObject(req, "ID", e->lease);
  call(e, "/v3/lease/revoke", req, e->timeout_ms, &ans);
  cJSON_Delete(req);
  cJSON_Delete(ans);
  e->lease[0] = '\0';
  mu_free(e->my_key);
  e->my_key = NULL;
  e->level = -1;
}

/* ---------------------------------------------------------------------------------------------
 * Keys of a run
 */

static int valid_id(const char *s)
{
  if (s == NULL || *s == '\0' || strlen(s) > 256)
    return 0;
  for (; *s; s++)
    if (*s <= ' ' || *s > '~' || *s == '"' || *s == '\\' || *s == '/')
      return 0;
  return 1;
}

static char *key_of(const char *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *key_of(const char *run, const char *fmt, ...)
{
  struct mu_buf b = MU_BUF_INIT(SIZE_MAX);
  mu_buf_printf(&b, "/muster/%s/", run);
  va_list ap;
  va_start(ap, fmt);
  mu_buf_vprintf(&b, fmt, ap);
  va_end(ap);
  return mu_buf_detach(&b);
}

/* The end of a run: MU_ECLOSED / MU_ESHUT with the reason in errmsg, 0 while open. */
static int end_of(struct mu_etcd3 *e, const char *run, const cJSON *end_range)
{
  cJSON *j = kv_json(range_first(end_range));
  if (j == NULL)
    return 0;
  const char *state = mu_json_get_str(j, "state"), *reason = mu_json_get_str(j, "reason");
  int shut = state != NULL && strcmp(state, "shut") == 0;
  say(e, "run '%s' was %s%s%s", run, shut ? "shut down" : "closed", reason ? ": " : "",
      reason ? reason : "");
  cJSON_Delete(j);
  return shut ? MU_ESHUT : MU_ECLOSED;
}

static long round_no(const cJSON *round)
{
  return round != NULL ? mu_json_get_long(round, "round", 0) : 0;
}

/* The index of node id in a round's members, -1 when absent. */
static int member_index(const cJSON *round, const char *id)
{
  const cJSON *ms = cJSON_GetObjectItemCaseSensitive(round, "members"), *m;
  int i = 0;
  cJSON_ArrayForEach(m, ms)
  {
    const char *mid = mu_json_get_str(m, "id");
    if (mid != NULL && strcmp(mid, id) == 0)
      return i;
    i++;
  }
  return -1;
}

/* The node id at the end of a key n/<L>/<id>. */
static const char *id_of_key(const char *key)
{
  const char *s = strrchr(key, '/');
  return s != NULL ? s + 1 : key;
}

/* The bucket of a node id: FNV-1a, the same on every node. */
static unsigned bucket_of(const char *id)
{
  uint32_t h = 2166136261u;
  for (; *id; id++)
    h = (h ^ (unsigned char)*id) * 16777619u;
  return h % BUCKETS;
}

/* Adds the members of round (from m/<R>) to it when c/round left them out.
 * Returns: 0, or an MU_E* code (errmsg says). */
static int attach_members(struct mu_etcd3 *e, const char *run, cJSON *round)
{
  if (round == NULL || cJSON_GetObjectItemCaseSensitive(round, "members") != NULL)
    return 0;
  char *mk = key_of(run, "m/" LEVEL_FMT, round_no(round));
  struct txn t;
  txn_init(&t);
  cJSON_AddItemToArray(t.success, op_range(mk, NULL, R_ALL));
  cJSON *ans = NULL;
  int rc = txn_run(e, &t, &ans);
  cJSON *j = rc == 0 ? kv_json(range_first(txn_range(ans, 0))) : NULL;
  cJSON *ms = cJSON_DetachItemFromObjectCaseSensitive(j, "members");
  if (rc == 0 && !cJSON_IsArray(ms)) {
    say(e, "run '%s': round %ld has no member list (m/%ld missing)", run, round_no(round),
        round_no(round));
    rc = MU_EPROTO;
  }
  if (rc == 0) {
    cJSON_AddItemToObject(round, "members", ms);
    ms = NULL;
  }
  cJSON_Delete(ms);
  cJSON_Delete(j);
  cJSON_Delete(ans);
  mu_free(mk);
  return rc;
}

/* Finds node id in a bucket value of round r: 1 with its rank, offset, lws; 0 when absent. */
static int bucket_find(const cJSON *bucket, long r, const char *id, int *rank, int *off, int *lws)
{
  if (bucket == NULL || mu_json_get_long(bucket, "round", -1) != r)
    return 0;
  const cJSON *m;
  cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(bucket, "m"))
  {
    const cJSON *mid = cJSON_GetArrayItem(m, 0);
    if (cJSON_IsString(mid) && strcmp(mid->valuestring, id) == 0) {
      *rank = (int)cJSON_GetNumberValue(cJSON_GetArrayItem(m, 1));
      *off = (int)cJSON_GetNumberValue(cJSON_GetArrayItem(m, 2));
      *lws = (int)cJSON_GetNumberValue(cJSON_GetArrayItem(m, 3));
      return 1;
    }
  }
  return 0;
}

/* A round of more than MEMBERS_INLINE nodes as a join returns it: this node's place, the
 * master, the sizes; the member list left out (as musterd does). */
static void fill_round_bucket(const char *run, const cJSON *round, int rank, int off, int lws,
                              struct mu_round *out)
{
  memset(out, 0, sizeof(*out));
  const char *ma = mu_json_get_str(round, "master_addr");
  out->run_id = mu_strdup(run);
  out->round = round_no(round);
  out->lease_ttl_ms = mu_json_get_long(round, "ttl", 10000);
  out->nnodes = (int)mu_json_get_long(round, "nnodes", 0);
  out->world_size = (int)mu_json_get_long(round, "world", 0);
  out->master_addr = mu_strdup(ma != NULL ? ma : "");
  out->master_port = (int)mu_json_get_long(round, "master_port", 0);
  out->node_rank = rank;
  out->rank_offset = off;
  out->local_world_size = lws;
}

static void fill_round(const char *run, const cJSON *round, int me, struct mu_round *out)
{
  memset(out, 0, sizeof(*out));
  const cJSON *ms = cJSON_GetObjectItemCaseSensitive(round, "members"), *m;
  out->run_id = mu_strdup(run);
  out->round = mu_json_get_long(round, "round", 0);
  out->lease_ttl_ms = mu_json_get_long(round, "ttl", 10000);
  out->nmembers = (size_t)cJSON_GetArraySize(ms);
  out->nnodes = (int)out->nmembers;
  out->members = mu_calloc(out->nmembers ? out->nmembers : 1, sizeof(*out->members));
  int i = 0, offset = 0;
  cJSON_ArrayForEach(m, ms)
  {
    struct mu_member *mm = &out->members[i];
    mm->node_id = mu_strdup(mu_json_get_str(m, "id") ? mu_json_get_str(m, "id") : "");
    mm->addr = mu_strdup(mu_json_get_str(m, "addr") ? mu_json_get_str(m, "addr") : "");
    mm->local_world_size = (int)mu_json_get_long(m, "lws", 1);
    mm->node_rank = i;
    mm->rank_offset = offset;
    if (i == me) {
      out->node_rank = i;
      out->rank_offset = offset;
      out->local_world_size = mm->local_world_size;
    }
    if (i == 0) {
      out->master_addr = mu_strdup(mm->addr);
      out->master_port = (int)mu_json_get_long(m, "port", 0);
    }
    offset += mm->local_world_size;
    i++;
  }
  out->world_size = offset;
  if (out->master_addr == NULL)
    out->master_addr = mu_strdup("");
}

/* ---------------------------------------------------------------------------------------------
 * Join
 */

struct joinst {
  struct mu_etcd3 *e;
  const char *run;
  const char *id;
  const struct mu_join_opts *o;
  char *endk, *roundk; /* c/end, c/round of the run */
  long min, max, last_call;
  cJSON *round;          /* the latest round's value, NULL before round 1 */
  long long round_mod;   /* its mod revision, 0 when absent */
  long long rev;         /* the revision everything above was read at */
  int ended;             /* MU_ECLOSED / MU_ESHUT */
  long long count_level; /* nodes at this node's level */
  long long count_old;   /* nodes one level below */
  char *bkey;            /* this node's bucket key of the round it waits for (big rounds) */
  cJSON *bucket;         /* the last value seen of it */
};

static void set_round(struct joinst *s, const cJSON *kv)
{
  cJSON_Delete(s->round);
  s->round = kv_json(kv);
  s->round_mod = kv != NULL ? jll(kv, "mod_revision") : 0;
}

/* A run whose rounds may pass MEMBERS_INLINE nodes: its rounds keep their member list in m/<R>
 * and a/<R>/<b>, and its waiting nodes watch their bucket (which says the round too). Decided
 * by the run's max, so that every node of the run knows it before any round closes. */
static int big_run(const struct joinst *s)
{
  return s->max > MEMBERS_INLINE;
}

/* Creates the run's configuration or checks ours against it; reads the end and the round. */
static int join_begin(struct joinst *s)
{
  struct mu_etcd3 *e = s->e;
  char *cfgk = key_of(s->run, "c/cfg");
  char cfg[256];
  snprintf(cfg, sizeof(cfg), "{\"min_nodes\":%ld,\"max_nodes\":%ld,\"last_call_ms\":%ld}", s->min,
           s->max, s->last_call);
  /* A read first (no write when the run exists: a read-only txn costs no raft entry), then
   * the create-if-absent txn when it does not. Either answer holds cfg, end, round at 0-2. */
  cJSON *ans = NULL;
  int rc = 0, fresh = 0;
  for (int create = 0; create < 2 && !fresh; create++) {
    struct txn t;
    txn_init(&t);
    cJSON *have = create ? t.failure : t.success; /* the branch taken when cfg exists */
    cJSON *none = create ? t.success : t.failure;
    cJSON_AddItemToArray(t.compare, cmp(cfgk, NULL, "CREATE", create ? "EQUAL" : "GREATER", 0));
    cJSON_AddItemToArray(have, op_range(cfgk, NULL, R_ALL));
    cJSON_AddItemToArray(none, create ? op_put(cfgk, cfg, strlen(cfg), NULL)
                                      : op_range(cfgk, NULL, R_ALL));
    for (int i = 0; i < 2; i++) {
      cJSON_AddItemToArray(have, op_range(i ? s->roundk : s->endk, NULL, R_ALL));
      cJSON_AddItemToArray(none, op_range(i ? s->roundk : s->endk, NULL, R_ALL));
    }
    cJSON_Delete(ans);
    ans = NULL;
    rc = txn_run(e, &t, &ans);
    if (rc != 0)
      goto out;
    int exists = create ? !txn_ok(ans) : txn_ok(ans);
    if (exists) {
      cJSON *cur = kv_json(range_first(txn_range(ans, 0)));
      long hmin = mu_json_get_long(cur, "min_nodes", -1);
      long hmax = mu_json_get_long(cur, "max_nodes", -1);
      cJSON_Delete(cur);
      if (hmin != s->min || hmax != s->max) {
        say(e, "run '%s' has --nnodes %ld:%ld, this node asks for %ld:%ld (config_mismatch)",
            s->run, hmin, hmax, s->min, s->max);
        rc = MU_ESTATE;
        goto out;
      }
      break;
    }
    fresh = create; /* created it */
  }
  rc = end_of(e, s->run, txn_range(ans, 1));
  if (rc != 0)
    goto out;
  set_round(s, range_first(txn_range(ans, 2)));
  s->rev = header_rev(ans);
out:
  cJSON_Delete(ans);
  mu_free(cfgk);
  return rc;
}

/* The reads of the run's state: c/end, c/round (two responses). */
static void add_state_reads(cJSON *ops, const struct joinst *s)
{
  cJSON_AddItemToArray(ops, op_range(s->endk, NULL, R_ALL));
  cJSON_AddItemToArray(ops, op_range(s->roundk, NULL, R_ALL));
}

static void take_state(struct joinst *s, const cJSON *ans, int at)
{
  s->ended = end_of(s->e, s->run, txn_range(ans, at));
  set_round(s, range_first(txn_range(ans, at + 1)));
}

/* The counts that decide a close of round n + 1: nodes at level n, and at level n - 1 (two
 * responses). */
static void add_count_reads(cJSON *ops, const struct joinst *s, long n)
{
  char *lvl = key_of(s->run, "n/" LEVEL_FMT "/", n);
  char *old = key_of(s->run, "n/" LEVEL_FMT "/", n - 1);
  cJSON_AddItemToArray(ops, op_prefix(lvl, R_COUNT));
  cJSON_AddItemToArray(ops, op_prefix(old, R_COUNT));
  mu_free(lvl);
  mu_free(old);
}

static void take_counts(struct joinst *s, const cJSON *ans, int at, long n)
{
  s->count_level = jll(txn_range(ans, at), "count");
  s->count_old = n > 0 ? jll(txn_range(ans, at + 1), "count") : 0;
}

/* The compares of a write that holds only while the run has not ended and its round is the
 * one this join read. */
static void add_round_same(cJSON *compare, const struct joinst *s)
{
  if (s->round_mod > 0)
    cJSON_AddItemToArray(compare, cmp(s->roundk, NULL, "MOD", "EQUAL", s->round_mod));
  else
    cJSON_AddItemToArray(compare, cmp(s->roundk, NULL, "CREATE", "EQUAL", 0));
  cJSON_AddItemToArray(compare, cmp(s->endk, NULL, "CREATE", "EQUAL", 0));
}

/* Puts this node at level N (the latest round) unless it is there, in one transaction that
 * holds only if the round did not move, and reads the counts that decide a close. */
static int join_put(struct joinst *s, long n)
{
  struct mu_etcd3 *e = s->e;
  char *mine = key_of(s->run, "n/" LEVEL_FMT "/%s", n, s->id);
  char val[700];
  snprintf(val, sizeof(val), "{\"addr\":\"%s\",\"lws\":%d,\"port\":%d}", s->o->addr,
           s->o->local_world_size, s->o->master_port);
  struct txn t;
  txn_init(&t);
  add_round_same(t.compare, s);
  int moved = e->my_key != NULL && strcmp(e->my_key, mine) != 0; /* from an older level */
  if (moved)
    cJSON_AddItemToArray(t.success, op_del(e->my_key, NULL));
  char lease[32];
  lease_now(e, lease, sizeof(lease));
  cJSON_AddItemToArray(t.success, op_put(mine, val, strlen(val), lease));
  add_count_reads(t.success, s, n);
  add_state_reads(t.failure, s);
  cJSON *ans = NULL;
  int rc = txn_run(e, &t, &ans);
  if (rc != 0)
    goto out;
  s->rev = header_rev(ans);
  if (txn_ok(ans)) {
    keeper_set_key(e, mine, val);
    mu_free(e->my_key);
    e->my_key = mine;
    mine = NULL;
    e->level = n;
    take_counts(s, ans, moved + 1, n);
  } else {
    take_state(s, ans, 0);
  }
out:
  cJSON_Delete(ans);
  mu_free(mine);
  return rc;
}

/* Re-reads the round, the end and the counts of level n. */
static int join_eval(struct joinst *s, long n)
{
  struct txn t;
  txn_init(&t);
  add_state_reads(t.success, s);
  add_count_reads(t.success, s, n);
  cJSON *ans = NULL;
  int rc = txn_run(s->e, &t, &ans);
  if (rc == 0) {
    s->rev = header_rev(ans);
    take_state(s, ans, 0);
    take_counts(s, ans, 2, n);
  }
  cJSON_Delete(ans);
  return rc;
}

struct cand {
  const cJSON *kv;
  const char *id; /* points into idbuf */
  char idbuf[260];
  long long created;
  int prev; /* rank in the previous round, or INT_MAX-ish */
};

static int cand_cmp(const void *a, const void *b)
{
  const struct cand *x = a, *y = b;
  if (x->prev != y->prev)
    return x->prev < y->prev ? -1 : 1;
  return x->created < y->created ? -1 : x->created > y->created;
}

/* Closes round n + 1 with the nodes of level n: the previous round's members first in their
 * order, then newcomers in join order, at most max. Holds only if neither the round nor the
 * level changed since they were read. */
static int join_close(struct joinst *s, long n)
{
  struct mu_etcd3 *e = s->e;
  char *lvl = key_of(s->run, "n/" LEVEL_FMT "/", n);
  char *lvl_end = prefix_end(lvl);
  struct txn t;
  txn_init(&t);
  cJSON_AddItemToArray(t.success, op_range(lvl, lvl_end, R_ALL));
  cJSON *ans = NULL, *ans2 = NULL;
  struct cand *c = NULL;
  cJSON *prev = cJSON_Duplicate(s->round, 1); /* the previous round with its members */
  int rc = attach_members(e, s->run, prev);
  if (rc == 0)
    rc = txn_run(e, &t, &ans);
  else
    cJSON_Delete(t.root);
  if (rc != 0)
    goto out;
  long long rev = header_rev(ans);
  const cJSON *kvs = cJSON_GetObjectItemCaseSensitive(txn_range(ans, 0), "kvs"), *kv;
  size_t nc = (size_t)cJSON_GetArraySize(kvs), i = 0;
  c = mu_calloc(nc ? nc : 1, sizeof(*c));
  cJSON_ArrayForEach(kv, kvs)
  {
    char *k = unb64(mu_json_get_str(kv, "key"), NULL);
    snprintf(c[i].idbuf, sizeof(c[i].idbuf), "%s", id_of_key(k));
    mu_free(k);
    c[i].id = c[i].idbuf;
    c[i].kv = kv;
    c[i].created = jll(kv, "create_revision");
    int p = prev != NULL ? member_index(prev, c[i].id) : -1;
    c[i].prev = p >= 0 ? p : 1 << 30;
    i++;
  }
  qsort(c, nc, sizeof(*c), cand_cmp);
  size_t take = nc < (size_t)s->max ? nc : (size_t)s->max;
  int inline_members = !big_run(s);
  struct mu_buf list = MU_BUF_INIT(SIZE_MAX), v = MU_BUF_INIT(SIZE_MAX);
  struct mu_buf bucket[BUCKETS];
  for (int b = 0; b < BUCKETS; b++)
    mu_buf_init(&bucket[b], SIZE_MAX);
  long world = 0, port0 = 0;
  char addr0[260] = "";
  mu_buf_putc(&list, '[');
  for (i = 0; i < take; i++) {
    cJSON *nv = kv_json(c[i].kv);
    const char *addr = mu_json_get_str(nv, "addr") ? mu_json_get_str(nv, "addr") : "";
    long lws = mu_json_get_long(nv, "lws", 1), port = mu_json_get_long(nv, "port", 0);
    mu_buf_printf(&list, "%s{\"id\":\"%s\",\"addr\":\"%s\",\"lws\":%ld,\"port\":%ld}", i ? "," : "",
                  c[i].id, addr, lws, port);
    if (!inline_members) {
      struct mu_buf *bb = &bucket[bucket_of(c[i].id)];
      mu_buf_printf(bb, "%s[\"%s\",%zu,%ld,%ld]", bb->len ? "," : "", c[i].id, i, world, lws);
    }
    if (i == 0) {
      snprintf(addr0, sizeof(addr0), "%s", addr);
      port0 = port;
    }
    world += lws;
    cJSON_Delete(nv);
  }
  mu_buf_putc(&list, ']');
  struct mu_buf head = MU_BUF_INIT(SIZE_MAX); /* what c/round and every bucket start with */
  mu_buf_printf(&head,
                "{\"round\":%ld,\"max\":%ld,\"ttl\":%ld,\"nnodes\":%zu,\"world\":%ld,"
                "\"master_addr\":\"%s\",\"master_port\":%ld,",
                n + 1, s->max, e->ttl_ms, take, world, addr0, port0);
  if (inline_members)
    mu_buf_printf(&v, "%s\"members\":%s}", mu_buf_str(&head), mu_buf_str(&list));
  else
    mu_buf_printf(&v, "%s\"buckets\":%d}", mu_buf_str(&head), BUCKETS);
  cJSON *mine = inline_members ? cJSON_ParseWithLength(v.data, v.len) : NULL;
  txn_init(&t);
  add_round_same(t.compare, s);
  cJSON_AddItemToArray(t.compare, cmp(lvl, lvl_end, "MOD", "LESS", rev + 1));
  cJSON_AddItemToArray(t.success, op_put(s->roundk, v.data, v.len, NULL));
  if (!inline_members) {
    char *mk = key_of(s->run, "m/" LEVEL_FMT, n + 1);
    mu_buf_clear(&v);
    mu_buf_printf(&v, "{\"members\":%s}", mu_buf_str(&list));
    cJSON_AddItemToArray(t.success, op_put(mk, v.data, v.len, NULL));
    mu_free(mk);
    for (int b = 0; b < BUCKETS; b++) {
      char *bk = key_of(s->run, "a/" LEVEL_FMT "/%02d", n + 1, b);
      mu_buf_clear(&v);
      mu_buf_printf(&v, "%s\"m\":[%s]}", mu_buf_str(&head), mu_buf_str(&bucket[b]));
      cJSON_AddItemToArray(t.success, op_put(bk, v.data, v.len, NULL));
      if ((unsigned)b == bucket_of(s->id))
        mine = cJSON_ParseWithLength(v.data, v.len);
      mu_free(bk);
    }
  }
  mu_buf_release(&v);
  mu_buf_release(&head);
  mu_buf_release(&list);
  for (int b = 0; b < BUCKETS; b++)
    mu_buf_release(&bucket[b]);
  rc = txn_run(e, &t, &ans2); /* lost the race or the level moved: the caller reads again */
  if (rc == 0 && txn_ok(ans2) && mine != NULL) { /* the closer knows the round it wrote */
    cJSON_Delete(s->round);
    s->round = mine;
    mine = NULL;
    s->round_mod = s->rev = header_rev(ans2);
    if (!inline_members) {
      cJSON_Delete(s->bucket);
      s->bucket = cJSON_Duplicate(s->round, 1);
    }
  }
  cJSON_Delete(mine);
out:
  mu_free(c);
  cJSON_Delete(prev);
  cJSON_Delete(ans);
  cJSON_Delete(ans2);
  mu_free(lvl);
  mu_free(lvl_end);
  return rc;
}

/* Watch events while waiting in a join: a new round or the end ends the wait. */
/* Whether a join holds round r without this node's bucket of it (a big round read from
 * c/round rather than seen in the bucket). */
static int needs_bucket(const struct joinst *s, long r)
{
  return s->round != NULL && round_no(s->round) == r &&
         cJSON_GetObjectItemCaseSensitive(s->round, "members") == NULL &&
         mu_json_get_long(s->bucket, "round", -1) != r;
}

/* Watch events while waiting in a join: a new round (c/round, or this node's bucket of it in a
 * big run: the close txn writes both at one revision, so the bucket's mod revision is the
 * round's), the end, or a node leaving the level below end the wait. */
static int join_events(void *arg, const cJSON *events)
{
  struct joinst *s = arg;
  const cJSON *ev;
  int stop = 0;
  cJSON_ArrayForEach(ev, events)
  {
    const cJSON *kv = cJSON_GetObjectItemCaseSensitive(ev, "kv");
    char *k = unb64(mu_json_get_str(kv, "key"), NULL);
    const char *type = mu_json_get_str(ev, "type");
    int put = type == NULL;
    if (put && (strcmp(k, s->roundk) == 0 || (s->bkey != NULL && strcmp(k, s->bkey) == 0))) {
      set_round(s, kv);
      s->rev = jll(kv, "mod_revision");
      if (s->bkey != NULL && strcmp(k, s->bkey) == 0) {
        cJSON_Delete(s->bucket);
        s->bucket = cJSON_Duplicate(s->round, 1);
      }
    }
    stop = 1; /* any end, round, or a node leaving the level below: look again */
    mu_free(k);
  }
  return stop;
}

/* Reads this node's bucket of round r (a round that came without it, from a read). */
static int read_bucket(struct joinst *s, long r)
{
  char *bk = key_of(s->run, "a/" LEVEL_FMT "/%02u", r, bucket_of(s->id));
  struct txn t;
  txn_init(&t);
  cJSON_AddItemToArray(t.success, op_range(bk, NULL, R_ALL));
  cJSON *ans = NULL;
  int rc = txn_run(s->e, &t, &ans);
  if (rc == 0) {
    cJSON_Delete(s->bucket);
    s->bucket = kv_json(range_first(txn_range(ans, 0)));
  }
  cJSON_Delete(ans);
  mu_free(bk);
  return rc;
}

int mu_etcd3_join(struct mu_etcd3 *e, const char *run_id, const struct mu_join_opts *o,
                  struct mu_round *out)
{
  memset(out, 0, sizeof(*out));
  e->errmsg[0] = '\0';
  if (!valid_id(run_id) || o == NULL || !valid_id(o->node_id) || !valid_id(o->addr) ||
      o->min_nodes < 1 || o->max_nodes < o->min_nodes || o->local_world_size < 1) {
    say(e, "bad join: run id, node id and address are 1-256 printable characters without "
           "'/', and 1 <= min_nodes <= max_nodes, local_world_size >= 1");
    return MU_EINVAL;
  }
  struct joinst s;
  memset(&s, 0, sizeof(s));
  s.e = e;
  s.run = run_id;
  s.id = o->node_id;
  s.o = o;
  s.min = o->min_nodes;
  s.max = o->max_nodes;
  s.last_call = o->last_call_ms >= 0 ? o->last_call_ms : (s.min == s.max ? 0 : 1000);
  long long deadline = now_ms() + (o->join_timeout_ms > 0 ? o->join_timeout_ms : 600000);
  long long last_call_at = 0;
  char *cprefix = key_of(run_id, "c/"), *cend = prefix_end(cprefix);
  s.endk = key_of(run_id, "c/end");
  s.roundk = key_of(run_id, "c/round");
  int rc = join_begin(&s);
  if (rc == 0)
    rc = ensure_lease(e, o->lease_ttl_ms > 0 ? o->lease_ttl_ms : 10000);
  long at = -1;   /* the level whose counts s holds */
  long mine = -1; /* the level this call put this node at: a join always re-joins */
  while (rc == 0) {
    if (s.ended) {
      rc = s.ended;
      break;
    }
    long n = round_no(s.round);
    if (mine >= 0 && n == mine + 1) { /* the round this node waited for: is it in? */
      if (cJSON_GetObjectItemCaseSensitive(s.round, "members") != NULL) {
        int me = member_index(s.round, s.id);
        if (me >= 0) {
          fill_round(run_id, s.round, me, out);
          break;
        }
      } else {
        int rank = 0, off = 0, lws = 0;
        if (needs_bucket(&s, n))
          rc = read_bucket(&s, n);
        if (rc != 0)
          break;
        if (bucket_find(s.bucket, n, s.id, &rank, &off, &lws)) {
          fill_round_bucket(run_id, s.round, rank, off, lws, out);
          break;
        }
      }
    }
    if (now_ms() >= deadline) {
      say(e, "join of run '%s' timed out: %lld of %ld nodes joined", run_id, s.count_level, s.min);
      rc = MU_ETIMEDOUT;
      break;
    }
    if (mine != n || at != n) {
      if (mine != n)
        rc = join_put(&s, n);
      else
        rc = join_eval(&s, n);
      if (rc == MU_EHTTP && strstr(e->errmsg, "lease not found") != NULL) {
        keeper_stop(e); /* revoked under us: a new one, and try again */
        rc = ensure_lease(e, o->lease_ttl_ms > 0 ? o->lease_ttl_ms : 10000);
        continue;
      }
      if (rc == 0 && e->level == n)
        at = mine = n;
      continue;
    }
    /* at level n with fresh counts: close now, later (last call), or wait */
    int closable = s.count_level >= s.min && (n == 0 || s.count_old == 0);
    if (!closable)
      last_call_at = 0;
    else if (last_call_at == 0)
      last_call_at = now_ms() + s.last_call;
    if (closable && (s.count_level >= s.max || n > 0 || now_ms() >= last_call_at)) {
      rc = join_close(&s, n);
      at = -1;
      continue;
    }
    /* a small run's round comes whole in c/round; a big run's nodes each watch their bucket
     * (O(1) bytes each) and the end, not c/round */
    char *old = key_of(run_id, "n/" LEVEL_FMT "/", n - 1), *old_end = prefix_end(old);
    mu_free(s.bkey);
    s.bkey = big_run(&s) ? key_of(run_id, "a/" LEVEL_FMT "/%02u", n + 1, bucket_of(s.id)) : NULL;
    struct wrange rs[3] = {{old, old_end, 1}};
    int nr = n > 0 ? 1 : 0;
    if (s.bkey != NULL) {
      rs[nr++] = (struct wrange){s.endk, NULL, 0};
      rs[nr++] = (struct wrange){s.bkey, NULL, 0};
    } else {
      rs[nr++] = (struct wrange){cprefix, cend, 0};
    }
    long long until = deadline;
    if (closable && last_call_at < until)
      until = last_call_at;
    rc = watch(e, rs, nr, s.rev + 1, until, join_events, &s, NULL);
    mu_free(old);
    mu_free(old_end);
    if (rc == MU_ETIMEDOUT || rc == MU_ESTATE)
      rc = 0; /* time to decide again, or read afresh */
    if (round_no(s.round) == n)
      at = -1; /* counts are stale: read them again */
  }
  cJSON_Delete(s.round);
  cJSON_Delete(s.bucket);
  mu_free(s.bkey);
  mu_free(s.endk);
  mu_free(s.roundk);
  mu_free(cprefix);
  mu_free(cend);
  return rc;
}

/* ---------------------------------------------------------------------------------------------
 * Membership: heartbeat, watch, leave, end
 */

/* Finds node id's key among the keys of the run's levels (*key: the caller's; NULL if none)
 * and reads the end and the latest round. */
static int find_member(struct mu_etcd3 *e, const char *run, const char *id, char **key, char *lease,
                       size_t lease_n, cJSON **round, long long *rev)
{
  *key = NULL;
  char *endk = key_of(run, "c/end"), *roundk = key_of(run, "c/round"), *nk = key_of(run, "n/");
  struct txn t;
  txn_init(&t);
  cJSON_AddItemToArray(t.success, op_range(endk, NULL, R_ALL));
  cJSON_AddItemToArray(t.success, op_range(roundk, NULL, R_ALL));
  cJSON_AddItemToArray(t.success, op_prefix(nk, R_KEYS));
  cJSON *ans = NULL;
  int rc = txn_run(e, &t, &ans);
  if (rc == 0)
    rc = end_of(e, run, txn_range(ans, 0));
  if (rc == 0) {
    if (round != NULL)
      *round = kv_json(range_first(txn_range(ans, 1)));
    if (rev != NULL)
      *rev = header_rev(ans);
    const cJSON *kv;
    long best = -1;
    cJSON_ArrayForEach(kv, cJSON_GetObjectItemCaseSensitive(txn_range(ans, 2), "kvs"))
    {
      char *k = unb64(mu_json_get_str(kv, "key"), NULL);
      const char *lv = k + strlen(nk);
      if (strcmp(id_of_key(k), id) == 0 && strtol(lv, NULL, 10) >= best) {
        best = strtol(lv, NULL, 10);
        mu_free(*key);
        *key = k;
        k = NULL;
        snprintf(lease, lease_n, "%s",
                 mu_json_get_str(kv, "lease") ? mu_json_get_str(kv, "lease") : "");
      }
      mu_free(k);
    }
  }
  cJSON_Delete(ans);
  mu_free(endk);
  mu_free(roundk);
  mu_free(nk);
  return rc;
}

int mu_etcd3_heartbeat(struct mu_etcd3 *e, const char *run_id, const char *node_id, long *round,
                       int *waiting)
{
  e->errmsg[0] = '\0';
  if (!valid_id(run_id) || !valid_id(node_id)) {
    say(e, "bad run or node id");
    return MU_EINVAL;
  }
  char *key = NULL, lease[32] = "";
  cJSON *r = NULL;
  int rc = find_member(e, run_id, node_id, &key, lease, sizeof(lease), &r, NULL);
  if (round != NULL)
    *round = round_no(r);
  if (waiting != NULL)
    *waiting = 0;
  if (rc == 0 && key == NULL) {
    say(e, "node '%s' is not a member of run '%s' (not_member)", node_id, run_id);
    rc = MU_ENOENT;
  } else if (rc == 0 && lease[0] != '\0') {
    long ttl = 0;
    rc = keepalive(e, lease, &ttl);
    if (rc == 0 && ttl <= 0) {
      say(e, "the lease of node '%s' expired (not_member)", node_id);
      rc = MU_ENOENT;
    }
  }
  mu_free(key);
  cJSON_Delete(r);
  return rc;
}

struct watchst {
  const char *run;
  const char *id;
  long n;
  cJSON *round;
  long nnodes, max;
  char *endk, *roundk, *level, *old, *done;
  char **gone; /* ids of members that left successfully */
  size_t ngone;
  char **lost; /* members whose key vanished: lost unless it is back within one TTL */
  size_t nlost;
  long long lost_until;
  int lost_new;
  enum mu_watch_event ev;
  struct mu_etcd3 *e;
};

static int is_gone(const struct watchst *w, const char *id)
{
  for (size_t i = 0; i < w->ngone; i++)
    if (strcmp(w->gone[i], id) == 0)
      return 1;
  return 0;
}

static void add_gone(struct watchst *w, const char *id)
{
  w->gone = mu_realloc(w->gone, (w->ngone + 1) * sizeof(*w->gone));
  w->gone[w->ngone++] = mu_strdup(id);
}

static void add_lost(struct watchst *w, const char *id)
{
  for (size_t i = 0; i < w->nlost; i++)
    if (strcmp(w->lost[i], id) == 0)
      return;
  if (w->nlost == 0) {
    w->lost_until = now_ms() + mu_json_get_long(w->round, "ttl", 10000);
    w->lost_new = 1;
  }
  w->lost = mu_realloc(w->lost, (w->nlost + 1) * sizeof(*w->lost));
  w->lost[w->nlost++] = mu_strdup(id);
}

static void back_lost(struct watchst *w, const char *id)
{
  for (size_t i = 0; i < w->nlost; i++)
    if (strcmp(w->lost[i], id) == 0) {
      mu_free(w->lost[i]);
      w->lost[i] = w->lost[--w->nlost];
      return;
    }
}

static void watch_key(struct watchst *w, const char *k, int del, const cJSON *kv)
{
  if (strcmp(k, w->endk) == 0 && !del) {
    cJSON *j = kv_json(kv);
    const char *st = mu_json_get_str(j, "state");
    w->ev = st != NULL && strcmp(st, "shut") == 0 ? MU_WATCH_SHUT : MU_WATCH_CLOSED;
    cJSON_Delete(j);
  } else if (strcmp(k, w->roundk) == 0 && !del) {
    cJSON *j = kv_json(kv);
    if (round_no(j) > w->n && w->ev != MU_WATCH_SHUT && w->ev != MU_WATCH_CLOSED)
      w->ev = MU_WATCH_SUPERSEDED;
    cJSON_Delete(j);
  } else if (strncmp(k, w->done, strlen(w->done)) == 0 && !del) {
    add_gone(w, id_of_key(k));
  } else if (strncmp(k, w->old, strlen(w->old)) == 0) {
    const char *id = id_of_key(k);
    if (!del)
      back_lost(w, id); /* put again under a new lease (see keeper_revive) */
    else if (member_index(w->round, id) >= 0 && !is_gone(w, id))
      add_lost(w, id);
  } else if (strncmp(k, w->level, strlen(w->level)) == 0 && !del) {
    if (member_index(w->round, id_of_key(k)) >= 0 && w->ev == MU_WATCH_NONE)
      w->ev = MU_WATCH_BROKEN; /* a member re-joined: it restarted */
    else if (w->nnodes < w->max && w->ev == MU_WATCH_NONE)
      w->ev = MU_WATCH_WAITING;
  }
}

static int watch_events(void *arg, const cJSON *events)
{
  struct watchst *w = arg;
  const cJSON *ev;
  enum mu_watch_event before = w->ev;
  cJSON_ArrayForEach(ev, events)
  {
    const cJSON *kv = cJSON_GetObjectItemCaseSensitive(ev, "kv");
    char *k = unb64(mu_json_get_str(kv, "key"), NULL);
    const char *type = mu_json_get_str(ev, "type");
    watch_key(w, k, type != NULL && strcmp(type, "DELETE") == 0, kv);
    mu_free(k);
  }
  /* a broken round wins over waiting nodes seen in the same answer */
  int again = w->lost_new;
  w->lost_new = 0;
  return w->ev != before || w->ev != MU_WATCH_NONE || again;
}

int mu_etcd3_watch(struct mu_etcd3 *e, const char *run_id, const char *node_id, long round,
                   long timeout_ms, enum mu_watch_event *ev, int *waiting)
{
  *ev = MU_WATCH_NONE;
  if (waiting != NULL)
    *waiting = 0;
  e->errmsg[0] = '\0';
  if (!valid_id(run_id) || !valid_id(node_id)) {
    say(e, "bad run or node id");
    return MU_EINVAL;
  }
  long long deadline = now_ms() + (timeout_ms > 0 ? timeout_ms : 30000);
  struct watchst w;
  memset(&w, 0, sizeof(w));
  w.run = run_id;
  w.id = node_id;
  w.n = round;
  w.e = e;
  w.endk = key_of(run_id, "c/end");
  w.roundk = key_of(run_id, "c/round");
  w.level = key_of(run_id, "n/" LEVEL_FMT "/", round);
  w.old = key_of(run_id, "n/" LEVEL_FMT "/", round - 1);
  w.done = key_of(run_id, "d/" LEVEL_FMT "/", round);
  char *cprefix = key_of(run_id, "c/");
  char *wend = prefix_end(w.level);
  struct txn t;
  txn_init(&t);
  cJSON_AddItemToArray(t.success, op_range(w.endk, NULL, R_ALL));
  cJSON_AddItemToArray(t.success, op_range(w.roundk, NULL, R_ALL));
  cJSON_AddItemToArray(t.success, op_prefix(w.old, R_KEYS));
  cJSON_AddItemToArray(t.success, op_prefix(w.level, R_KEYS));
  cJSON_AddItemToArray(t.success, op_prefix(w.done, R_KEYS));
  cJSON *ans = NULL;
  int rc = txn_run(e, &t, &ans);
  if (rc != 0)
    goto out;
  long long rev = header_rev(ans);
  int end = end_of(e, run_id, txn_range(ans, 0));
  if (end != 0) {
    *ev = end == MU_ESHUT ? MU_WATCH_SHUT : MU_WATCH_CLOSED;
    goto out;
  }
  w.round = kv_json(range_first(txn_range(ans, 1)));
  rc = attach_members(e, run_id, w.round);
  if (rc != 0)
    goto out;
  w.nnodes = (long)cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(w.round, "members"));
  w.max = mu_json_get_long(w.round, "max", w.nnodes);
  if (round_no(w.round) > round) {
    *ev = MU_WATCH_SUPERSEDED;
    goto out;
  }
  if (round_no(w.round) < round || member_index(w.round, node_id) < 0) {
    *ev = MU_WATCH_BROKEN;
    goto out;
  }
  const cJSON *kv;
  cJSON_ArrayForEach(kv, cJSON_GetObjectItemCaseSensitive(txn_range(ans, 4), "kvs"))
  {
    char *k = unb64(mu_json_get_str(kv, "key"), NULL);
    add_gone(&w, id_of_key(k));
    mu_free(k);
  }
  /* every member that did not leave successfully still holds its key below this round */
  size_t present = 0;
  cJSON_ArrayForEach(kv, cJSON_GetObjectItemCaseSensitive(txn_range(ans, 2), "kvs"))
  {
    char *k = unb64(mu_json_get_str(kv, "key"), NULL);
    if (member_index(w.round, id_of_key(k)) >= 0 && !is_gone(&w, id_of_key(k)))
      present++;
    mu_free(k);
  }
  size_t gone_members = 0;
  for (size_t i = 0; i < w.ngone; i++)
    gone_members += member_index(w.round, w.gone[i]) >= 0;
  if (present + gone_members < (size_t)w.nnodes) {
    /* a member's key is missing: lost, unless it is put back within one TTL */
    const cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(w.round, "members"))
    {
      const char *id = mu_json_get_str(m, "id");
      if (id != NULL && !is_gone(&w, id))
        add_lost(&w, id);
    }
    cJSON_ArrayForEach(kv, cJSON_GetObjectItemCaseSensitive(txn_range(ans, 2), "kvs"))
    {
      char *k = unb64(mu_json_get_str(kv, "key"), NULL);
      back_lost(&w, id_of_key(k));
      mu_free(k);
    }
  }
  cJSON_ArrayForEach(kv, cJSON_GetObjectItemCaseSensitive(txn_range(ans, 3), "kvs"))
  {
    char *k = unb64(mu_json_get_str(kv, "key"), NULL);
    watch_key(&w, k, 0, kv);
    mu_free(k);
  }
  if (w.ev != MU_WATCH_NONE) {
    *ev = w.ev;
    goto out;
  }
  struct wrange rs[1] = {{cprefix, wend, 0}};
  long long from = rev + 1;
  for (;;) {
    long long until = w.nlost > 0 && w.lost_until < deadline ? w.lost_until : deadline;
    w.lost_new = 0;
    rc = watch(e, rs, 1, from, until, watch_events, &w, &from);
    if (rc == MU_ESTATE) {
      rc = 0; /* compacted: the next watch call reads afresh */
      break;
    }
    if (rc == MU_ETIMEDOUT)
      rc = 0;
    if (rc != 0 || w.ev != MU_WATCH_NONE)
      break;
    if (w.nlost > 0 && now_ms() >= w.lost_until) {
      w.ev = MU_WATCH_BROKEN;
      break;
    }
    if (now_ms() >= deadline)
      break;
  }
  *ev = w.ev;
  if (waiting != NULL)
    *waiting = w.ev == MU_WATCH_WAITING;
out:
  cJSON_Delete(ans);
  cJSON_Delete(w.round);
  for (size_t i = 0; i < w.ngone; i++)
    mu_free(w.gone[i]);
  mu_free(w.gone);
  for (size_t i = 0; i < w.nlost; i++)
    mu_free(w.lost[i]);
  mu_free(w.lost);
  mu_free(w.endk);
  mu_free(w.roundk);
  mu_free(w.level);
  mu_free(w.old);
  mu_free(w.done);
  mu_free(cprefix);
  mu_free(wend);
  return rc;
}

int mu_etcd3_end(struct mu_etcd3 *e, const char *run_id, int succeeded, const char *reason)
{
  e->errmsg[0] = '\0';
  if (!valid_id(run_id)) {
    say(e, "bad run id");
    return MU_EINVAL;
  }
  char *endk = key_of(run_id, "c/end");
  cJSON *v = cJSON_CreateObject();
  cJSON_AddStringToObject(v, "state", succeeded ? "closed" : "shut");
  if (reason != NULL)
    cJSON_AddStringToObject(v, "reason", reason);
  char *txt = cJSON_PrintUnformatted(v);
  cJSON_Delete(v);
  struct txn t;
  txn_init(&t);
  cJSON_AddItemToArray(t.compare, cmp(endk, NULL, "CREATE", "EQUAL", 0));
  cJSON_AddItemToArray(t.success, op_put(endk, txt, strlen(txt), NULL));
  cJSON_AddItemToArray(t.failure, op_range(endk, NULL, R_ALL));
  cJSON_free(txt);
  cJSON *ans = NULL;
  int rc = txn_run(e, &t, &ans);
  if (rc == 0 && !txn_ok(ans)) {
    int was = end_of(e, run_id, txn_range(ans, 0));
    rc = was == (succeeded ? MU_ECLOSED : MU_ESHUT) ? 0 : was;
  }
  cJSON_Delete(ans);
  mu_free(endk);
  return rc;
}

int mu_etcd3_leave(struct mu_etcd3 *e, const char *run_id, const char *node_id, int succeeded,
                   const char *reason)
{
  (void)reason;
  e->errmsg[0] = '\0';
  if (!valid_id(run_id) || !valid_id(node_id)) {
    say(e, "bad run or node id");
    return MU_EINVAL;
  }
  char *key = NULL, lease[32] = "";
  cJSON *round = NULL;
  int rc = find_member(e, run_id, node_id, &key, lease, sizeof(lease), &round, NULL);
  if (rc == 0 && key == NULL) {
    say(e, "node '%s' is not a member of run '%s' (not_member)", node_id, run_id);
    rc = MU_ENOENT;
  }
  if (rc != 0)
    goto out;
  rc = attach_members(e, run_id, round);
  if (rc != 0)
    goto out;
  long n = round_no(round);
  int in_round = member_index(round, node_id) >= 0;
  struct txn t;
  txn_init(&t);
  char *done = key_of(run_id, "d/" LEVEL_FMT "/", n);
  char *mine = key_of(run_id, "d/" LEVEL_FMT "/%s", n, node_id);
  if (succeeded && in_round)
    cJSON_AddItemToArray(t.success, op_put(mine, "", 0, NULL));
  cJSON_AddItemToArray(t.success, op_del(key, NULL));
  cJSON_AddItemToArray(t.success, op_prefix(done, R_COUNT));
  cJSON *ans = NULL;
  rc = txn_run(e, &t, &ans);
  long long left = rc == 0 ? jll(txn_range(ans, succeeded && in_round ? 2 : 1), "count") : 0;
  cJSON_Delete(ans);
  mu_free(done);
  mu_free(mine);
  if (rc == 0 && succeeded && in_round &&
      left >= cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(round, "members")))
    rc = mu_etcd3_end(e, run_id, 1, NULL); /* the last member done closes the run */
  if (e->my_key != NULL && strcmp(e->my_key, key) == 0)
    lease_revoke(e);
out:
  mu_free(key);
  cJSON_Delete(round);
  return rc;
}

/* ---------------------------------------------------------------------------------------------
 * Barriers and the run's KV
 */

struct keywait {
  const char *key;
  cJSON *kv; /* the PUT seen */
};

static int key_events(void *arg, const cJSON *events)
{
  struct keywait *kw = arg;
  const cJSON *ev;
  cJSON_ArrayForEach(ev, events)
  {
    if (mu_json_get_str(ev, "type") != NULL)
      continue; /* DELETE */
    cJSON_Delete(kw->kv);
    kw->kv = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(ev, "kv"), 1);
    return 1;
  }
  return 0;
}

int mu_etcd3_barrier(struct mu_etcd3 *e, const char *run_id, const char *name, int count,
                     const char *id, long timeout_ms, long *generation)
{
  e->errmsg[0] = '\0';
  if (!valid_id(run_id) || !valid_id(name) || count < 1 || (id != NULL && !valid_id(id))) {
    say(e, "bad barrier: run id and name are 1-256 printable characters, count >= 1");
    return MU_EINVAL;
  }
  long long deadline = now_ms() + (timeout_ms > 0 ? timeout_ms : 30000);
  char anon[64];
  if (id == NULL) {
    snprintf(anon, sizeof(anon), "anon-%d-%lld", (int)getpid(), now_ms());
    id = anon;
  }
  char *gk = key_of(run_id, "b/%s/g", name);
  char *mine = NULL, *arr = NULL;
  int rc = 0;
  for (;;) {
    struct txn t;
    txn_init(&t);
    cJSON_AddItemToArray(t.success, op_range(gk, NULL, R_ALL));
    cJSON *ans = NULL;
    rc = txn_run(e, &t, &ans);
    if (rc != 0)
      break;
    const cJSON *gkv = range_first(txn_range(ans, 0));
    long long gmod = gkv != NULL ? jll(gkv, "mod_revision") : 0;
    long g = gkv != NULL ? (long)jll(gkv, "version") : 0;
    cJSON_Delete(ans);
    mu_free(mine);
    mu_free(arr);
    arr = key_of(run_id, "b/%s/a/%ld/", name, g);
    mine = key_of(run_id, "b/%s/a/%ld/%s", name, g, id);
    char *arr_end = prefix_end(arr);
    char cnt[16];
    snprintf(cnt, sizeof(cnt), "%d", count);
    txn_init(&t);
    cJSON_AddItemToArray(t.compare, gmod > 0 ? cmp(gk, NULL, "MOD", "EQUAL", gmod)
                                             : cmp(gk, NULL, "CREATE", "EQUAL", 0));
    cJSON_AddItemToArray(t.success, op_put(mine, cnt, strlen(cnt), NULL));
    cJSON_AddItemToArray(t.success, op_range(arr, arr_end, R_ALL));
    rc = txn_run(e, &t, &ans);
    if (rc != 0) {
      mu_free(arr_end);
      break;
    }
    if (!txn_ok(ans)) { /* the barrier opened meanwhile: arrive at the next generation */
      cJSON_Delete(ans);
      mu_free(arr_end);
      continue;
    }
    long long rev = header_rev(ans);
    const cJSON *kvs = cJSON_GetObjectItemCaseSensitive(txn_range(ans, 1), "kvs"), *kv;
    int arrived = 0, mismatch = 0;
    cJSON_ArrayForEach(kv, kvs)
    {
      char *v = unb64(mu_json_get_str(kv, "value"), NULL);
      mismatch |= strtol(v, NULL, 10) != count;
      mu_free(v);
      arrived++;
    }
    cJSON_Delete(ans);
    if (mismatch) {
      say(e, "barrier '%s' is waited for with another count than %d (count_mismatch)", name, count);
      txn_init(&t);
      cJSON_AddItemToArray(t.success, op_del(mine, NULL));
      txn_run(e, &t, &ans);
      cJSON_Delete(ans);
      mu_free(arr_end);
      rc = MU_ESTATE;
      break;
    }
    if (arrived >= count) { /* the last one opens it for everybody */
      txn_init(&t);
      cJSON_AddItemToArray(t.compare, gmod > 0 ? cmp(gk, NULL, "MOD", "EQUAL", gmod)
                                               : cmp(gk, NULL, "CREATE", "EQUAL", 0));
      cJSON_AddItemToArray(t.success, op_put(gk, "", 0, NULL));
      cJSON_AddItemToArray(t.success, op_del(arr, arr_end));
      rc = txn_run(e, &t, &ans);
      cJSON_Delete(ans);
      mu_free(arr_end);
      if (rc == 0 && generation != NULL)
        *generation = g + 1;
      break;
    }
    mu_free(arr_end);
    struct keywait kw = {gk, NULL};
    struct wrange rs[1] = {{gk, NULL, 0}};
    rc = watch(e, rs, 1, rev + 1, deadline, key_events, &kw, NULL);
    cJSON_Delete(kw.kv);
    if (rc == MU_ETIMEDOUT) {
      say(e, "barrier '%s' timed out with %d of %d arrived (barrier_timeout)", name, arrived,
          count);
      txn_init(&t);
      cJSON_AddItemToArray(t.success, op_del(mine, NULL));
      txn_run(e, &t, &ans);
      cJSON_Delete(ans);
      rc = MU_ETIMEDOUT;
    }
    if (rc == 0 && generation != NULL)
      *generation = g + 1;
    break;
  }
  mu_free(gk);
  mu_free(mine);
  mu_free(arr);
  return rc;
}

int mu_etcd3_kv_put(struct mu_etcd3 *e, const char *run_id, const char *key, const void *val,
                    size_t len, long *version)
{
  e->errmsg[0] = '\0';
  if (!valid_id(run_id) || key == NULL || key[0] == '\0' || strlen(key) > 512 || len > (1u << 20)) {
    say(e, "bad KV put: keys are 1-512 bytes, values at most 1 MiB");
    return MU_EINVAL;
  }
  char *k = key_of(run_id, "kv/%s", key);
  struct txn t;
  txn_init(&t);
  cJSON_AddItemToArray(t.success, op_put(k, len ? val : "", len, NULL));
  cJSON_AddItemToArray(t.success, op_range(k, NULL, R_KEYS));
  cJSON *ans = NULL;
  int rc = txn_run(e, &t, &ans);
  if (rc == 0 && version != NULL)
    *version = (long)jll(range_first(txn_range(ans, 1)), "version");
  cJSON_Delete(ans);
  mu_free(k);
  return rc;
}

int mu_etcd3_kv_get(struct mu_etcd3 *e, const char *run_id, const char *key, long wait_ms,
                    char **val, size_t *len)
{
  *val = NULL;
  if (len != NULL)
    *len = 0;
  e->errmsg[0] = '\0';
  if (!valid_id(run_id) || key == NULL || key[0] == '\0' || strlen(key) > 512) {
    say(e, "bad KV get: keys are 1-512 bytes");
    return MU_EINVAL;
  }
  long long deadline = now_ms() + wait_ms;
  char *k = key_of(run_id, "kv/%s", key);
  struct txn t;
  txn_init(&t);
  cJSON_AddItemToArray(t.success, op_range(k, NULL, R_ALL));
  cJSON *ans = NULL;
  int rc = txn_run(e, &t, &ans);
  struct keywait kw = {k, NULL};
  if (rc == 0) {
    const cJSON *kv = range_first(txn_range(ans, 0));
    if (kv != NULL) {
      kw.kv = cJSON_Duplicate(kv, 1);
    } else if (wait_ms > 0) {
      struct wrange rs[1] = {{k, NULL, 0}};
      rc = watch(e, rs, 1, header_rev(ans) + 1, deadline, key_events, &kw, NULL);
      if (rc == MU_ETIMEDOUT)
        say(e, "key '%s' did not appear within %ld ms (kv_timeout)", key, wait_ms);
    } else {
      say(e, "no key '%s' in run '%s' (no_such_key)", key, run_id);
      rc = MU_ENOENT;
    }
  }
  if (rc == 0 && kw.kv != NULL)
    *val = unb64(mu_json_get_str(kw.kv, "value"), len);
  cJSON_Delete(kw.kv);
  cJSON_Delete(ans);
  mu_free(k);
  return rc;
}

int mu_etcd3_kv_add(struct mu_etcd3 *e, const char *run_id, const char *key, long delta,
                    long *value)
{
  e->errmsg[0] = '\0';
  if (!valid_id(run_id) || key == NULL || key[0] == '\0' || strlen(key) > 512) {
    say(e, "bad KV add: keys are 1-512 bytes");
    return MU_EINVAL;
  }
  char *k = key_of(run_id, "kv/%s", key);
  int rc = 0;
  for (;;) { /* read, add, write if nobody wrote meanwhile */
    struct txn t;
    txn_init(&t);
    cJSON_AddItemToArray(t.success, op_range(k, NULL, R_ALL));
    cJSON *ans = NULL;
    rc = txn_run(e, &t, &ans);
    if (rc != 0)
      break;
    const cJSON *kv = range_first(txn_range(ans, 0));
    long long mod = kv != NULL ? jll(kv, "mod_revision") : 0;
    char *v = unb64(kv != NULL ? mu_json_get_str(kv, "value") : "", NULL);
    cJSON_Delete(ans);
    char *endp = NULL;
    long long cur = strtoll(v, &endp, 10);
    int bad = v[0] != '\0' && (endp == NULL || *endp != '\0');
    mu_free(v);
    if (bad) {
      say(e, "key '%s' does not hold an integer (not_a_counter)", key);
      rc = MU_EINVAL;
      break;
    }
    char nv[32];
    snprintf(nv, sizeof(nv), "%lld", cur + delta);
    txn_init(&t);
    cJSON_AddItemToArray(t.compare, mod > 0 ? cmp(k, NULL, "MOD", "EQUAL", mod)
                                            : cmp(k, NULL, "CREATE", "EQUAL", 0));
    cJSON_AddItemToArray(t.success, op_put(k, nv, strlen(nv), NULL));
    rc = txn_run(e, &t, &ans);
    int ok = rc == 0 && txn_ok(ans);
    cJSON_Delete(ans);
    if (rc != 0)
      break;
    if (ok) {
      if (value != NULL)
        *value = (long)(cur + delta);
      break;
    }
  }
  mu_free(k);
  return rc;
}

int mu_etcd3_kv_delete(struct mu_etcd3 *e, const char *run_id, const char *key)
{
  e->errmsg[0] = '\0';
  if (!valid_id(run_id) || key == NULL || key[0] == '\0' || strlen(key) > 512) {
    say(e, "bad KV delete: keys are 1-512 bytes");
    return MU_EINVAL;
  }
  char *k = key_of(run_id, "kv/%s", key);
  struct txn t;
  txn_init(&t);
  cJSON_AddItemToArray(t.success, op_del(k, NULL));
  cJSON *ans = NULL;
  int rc = txn_run(e, &t, &ans);
  const cJSON *d = cJSON_GetObjectItemCaseSensitive(
      cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(ans, "responses"), 0),
      "response_delete_range");
  if (rc == 0 && jll(d, "deleted") == 0) {
    say(e, "no key '%s' in run '%s' (no_such_key)", key, run_id);
    rc = MU_ENOENT;
  }
  cJSON_Delete(ans);
  mu_free(k);
  return rc;
}

/* ---------------------------------------------------------------------------------------------
 * Reading runs (muster rdzv, status): the shape of musterd's GET /v1/runs/{id} and /v1/runs
 */

/* The run's state from its c/ keys and the keys of its levels, in the JSON musterd answers. */
int mu_etcd3_run_json(struct mu_etcd3 *e, const char *run_id, cJSON **out)
{
  *out = NULL;
  e->errmsg[0] = '\0';
  if (!valid_id(run_id)) {
    say(e, "bad run id '%s': 1-256 printable characters without '/'", run_id ? run_id : "");
    return MU_EINVAL;
  }
  char *cfgk = key_of(run_id, "c/cfg"), *endk = key_of(run_id, "c/end");
  char *roundk = key_of(run_id, "c/round"), *nk = key_of(run_id, "n/");
  char *dk = key_of(run_id, "d/");
  struct txn t;
  txn_init(&t);
  cJSON_AddItemToArray(t.success, op_range(cfgk, NULL, R_ALL));
  cJSON_AddItemToArray(t.success, op_range(endk, NULL, R_ALL));
  cJSON_AddItemToArray(t.success, op_range(roundk, NULL, R_ALL));
  cJSON_AddItemToArray(t.success, op_prefix(nk, R_KEYS));
  cJSON_AddItemToArray(t.success, op_prefix(dk, R_KEYS));
  cJSON *ans = NULL, *cfg = NULL, *end = NULL, *round = NULL, *o = NULL;
  int rc = txn_run(e, &t, &ans);
  if (rc != 0)
    goto out;
  cfg = kv_json(range_first(txn_range(ans, 0)));
  if (cfg == NULL) {
    say(e, "no run '%s' in etcd", run_id);
    rc = MU_ENOENT;
    goto out;
  }
  end = kv_json(range_first(txn_range(ans, 1)));
  round = kv_json(range_first(txn_range(ans, 2)));
  rc = attach_members(e, run_id, round);
  if (rc != 0)
    goto out;
  long r = round_no(round);
  /* nodes at level r wait for round r + 1; members of round r hold their key at level r - 1
   * until they leave, and a member that left successfully has d/<r>/<id> */
  long waiting = 0, present = 0;
  const cJSON *kv;
  for (int i = 3; i <= 4; i++) {
    const char *pre = i == 3 ? nk : dk;
    cJSON_ArrayForEach(kv, cJSON_GetObjectItemCaseSensitive(txn_range(ans, i), "kvs"))
    {
      char *k = unb64(mu_json_get_str(kv, "key"), NULL);
      long lv = strtol(k + strlen(pre), NULL, 10);
      if (i == 3 && lv == r)
        waiting++;
      else if (r > 0 && lv == (i == 3 ? r - 1 : r) && member_index(round, id_of_key(k)) >= 0)
        present++;
      mu_free(k);
    }
  }
  const char *st = mu_json_get_str(end, "state"), *reason = mu_json_get_str(end, "reason");
  const cJSON *ms = cJSON_GetObjectItemCaseSensitive(round, "members"), *m;
  long nnodes = cJSON_GetArraySize(ms);
  o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "run_id", run_id);
  cJSON_AddStringToObject(o, "backend", "etcd-v3");
  cJSON_AddStringToObject(o, "state", st != NULL ? st : "open");
  if (reason != NULL)
    cJSON_AddStringToObject(o, "reason", reason);
  cJSON_AddNumberToObject(o, "round", (double)r);
  cJSON_AddStringToObject(o, "round_state",
                          r == 0             ? "joining"
                          : present < nnodes ? "broken"
                                             : "active");
  cJSON_AddNumberToObject(o, "min_nodes", (double)mu_json_get_long(cfg, "min_nodes", 0));
  cJSON_AddNumberToObject(o, "max_nodes", (double)mu_json_get_long(cfg, "max_nodes", 0));
  cJSON_AddNumberToObject(o, "nnodes", (double)nnodes);
  cJSON_AddNumberToObject(o, "waiting", (double)waiting);
  cJSON *list = cJSON_AddArrayToObject(o, "members");
  long rank = 0, off = 0;
  cJSON_ArrayForEach(m, ms)
  {
    cJSON *d = cJSON_CreateObject();
    long lws = mu_json_get_long(m, "lws", 1);
    cJSON_AddStringToObject(d, "node_id", mu_json_get_str(m, "id") ? mu_json_get_str(m, "id") : "");
    cJSON_AddStringToObject(d, "addr",
                            mu_json_get_str(m, "addr") ? mu_json_get_str(m, "addr") : "");
    cJSON_AddNumberToObject(d, "local_world_size", (double)lws);
    cJSON_AddNumberToObject(d, "node_rank", (double)rank++);
    cJSON_AddNumberToObject(d, "rank_offset", (double)off);
    off += lws;
    cJSON_AddItemToArray(list, d);
  }
  cJSON *c = cJSON_AddObjectToObject(o, "config");
  cJSON_AddNumberToObject(c, "last_call_ms", (double)mu_json_get_long(cfg, "last_call_ms", 0));
  if (round != NULL)
    cJSON_AddNumberToObject(c, "lease_ttl_ms", (double)mu_json_get_long(round, "ttl", 0));
  *out = o;
  o = NULL;
out:
  cJSON_Delete(o);
  cJSON_Delete(cfg);
  cJSON_Delete(end);
  cJSON_Delete(round);
  cJSON_Delete(ans);
  mu_free(cfgk);
  mu_free(endk);
  mu_free(roundk);
  mu_free(nk);
  mu_free(dk);
  return rc;
}

/* One range over every run's keys (how: R_KEYS, R_COUNT). */
static int read_runs(struct mu_etcd3 *e, int how, cJSON **ans)
{
  e->errmsg[0] = '\0';
  struct txn t;
  txn_init(&t);
  cJSON_AddItemToArray(t.success, op_prefix("/muster/", how));
  return txn_run(e, &t, ans);
}

int mu_etcd3_runs_json(struct mu_etcd3 *e, cJSON **out)
{
  *out = NULL;
  /* the runs are the keys /muster/<run>/c/cfg: one keys-only range over c/ would need a range
   * per run, so the whole /muster/ prefix is read keys-only and filtered here */
  cJSON *ans = NULL;
  int rc = read_runs(e, R_KEYS, &ans);
  if (rc != 0) {
    cJSON_Delete(ans);
    return rc;
  }
  cJSON *o = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(o, "runs");
  const cJSON *kv;
  cJSON_ArrayForEach(kv, cJSON_GetObjectItemCaseSensitive(txn_range(ans, 0), "kvs"))
  {
    char *k = unb64(mu_json_get_str(kv, "key"), NULL);
    size_t n = strlen(k), tail = strlen("/c/cfg");
    if (n > strlen("/muster/") + tail && strcmp(k + n - tail, "/c/cfg") == 0) {
      k[n - tail] = '\0';
      cJSON *r = NULL;
      int g = mu_etcd3_run_json(e, k + strlen("/muster/"), &r);
      if (g == 0) {
        cJSON *s = cJSON_CreateObject();
        static const char *const keep[] = {"run_id",      "state",  "round",
                                           "round_state", "nnodes", "waiting"};
        for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
          cJSON_AddItemToObject(s, keep[i],
                                cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(r, keep[i]), 1));
        cJSON_AddItemToArray(list, s);
      } else if (g != MU_ENOENT) {
        rc = g;
      }
      cJSON_Delete(r);
    }
    mu_free(k);
    if (rc != 0)
      break;
  }
  cJSON_Delete(ans);
  if (rc == 0)
    *out = o;
  else
    cJSON_Delete(o);
  return rc;
}

int mu_etcd3_run_info(struct mu_etcd3 *e, const char *run_id, struct mu_run_info *out)
{
  memset(out, 0, sizeof(*out));
  cJSON *r = NULL;
  int rc = mu_etcd3_run_json(e, run_id, &r);
  if (rc == 0) {
    out->round = mu_json_get_long(r, "round", 0);
    out->nnodes = (int)mu_json_get_long(r, "nnodes", 0);
    out->waiting = (int)mu_json_get_long(r, "waiting", 0);
    out->min_nodes = (int)mu_json_get_long(r, "min_nodes", 0);
    out->max_nodes = (int)mu_json_get_long(r, "max_nodes", 0);
    snprintf(out->state, sizeof(out->state), "%s", mu_json_get_str(r, "state"));
    snprintf(out->round_state, sizeof(out->round_state), "%s", mu_json_get_str(r, "round_state"));
  }
  cJSON_Delete(r);
  return rc;
}

int mu_etcd3_revision(struct mu_etcd3 *e, long long *rev)
{
  cJSON *ans = NULL;
  int rc = read_runs(e, R_COUNT, &ans);
  *rev = rc == 0 ? header_rev(ans) : 0;
  cJSON_Delete(ans);
  return rc;
}

static int any_event(void *arg, const cJSON *events)
{
  (void)arg;
  (void)events;
  return 1;
}

int mu_etcd3_wait_change(struct mu_etcd3 *e, const char *run_id, long long after, long timeout_ms)
{
  e->errmsg[0] = '\0';
  if (run_id != NULL && !valid_id(run_id)) {
    say(e, "bad run id '%s'", run_id);
    return MU_EINVAL;
  }
  char *prefix = run_id != NULL ? key_of(run_id, "%s", "") : mu_strdup("/muster/");
  char *end = prefix_end(prefix);
  struct wrange rs[1] = {{prefix, end, 0}};
  int rc = watch(e, rs, 1, after + 1, now_ms() + timeout_ms, any_event, NULL, NULL);
  if (rc == MU_ESTATE)
    rc = 0; /* compacted past `after`: something changed */
  if (rc == MU_ETIMEDOUT && e->unreached)
    rc = MU_ECONN; /* not a quiet cluster but none at all: errmsg has the last member's words */
  mu_free(prefix);
  mu_free(end);
  return rc;
}

/* ---------------------------------------------------------------------------------------------
 * The pure pieces, for tests/unit/test_etcd3.c
 */

char *mu__etcd3_b64(const void *p, size_t n)
{
  return b64(p, n);
}

char *mu__etcd3_unb64(const char *s, size_t *len)
{
  return unb64(s, len);
}

char *mu__etcd3_prefix_end(const char *prefix)
{
  return prefix_end(prefix);
}

long long mu__etcd3_int(const cJSON *o, const char *name)
{
  return jll(o, name);
}

unsigned mu__etcd3_bucket(const char *id)
{
  return bucket_of(id);
}

cJSON *mu__etcd3_range_value(const cJSON *txn_answer, int i)
{
  return kv_json(range_first(txn_range(txn_answer, i)));
}

long long mu__etcd3_header_rev(const cJSON *answer)
{
  return header_rev(answer);
}

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
  next_member(e, &tried);
}

int mu__etcd3_answer(struct mu_etcd3 *e, int status, const char *body, int *retry, int *relogin)
{
  struct mu_http_response r;
  mu_http_response_init(&r, MAX_ANSWER);
  r.status = status;
  mu_buf_puts(&r.body, body);
  int rc = error_answer(e, &e->m[e->cur], "/v3/kv/txn", &r, retry, relogin);
  mu_http_response_release(&r);
  return rc;
}
