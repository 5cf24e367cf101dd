/* Unit tests of rendezvous/server/tls.c and rendezvous/security/ (auth.c, quota.c, the gate): a TLS
 * handshake pumped between an OpenSSL client and rv_tls_conn over memory (certificates made here
 * with the OpenSSL API), client-certificate refusal, token and basic-auth verdicts, quota
 * bookkeeping. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "muster/errno.h"

#include "alloc.h"
#include "auth.h"
#include "http.h"
#include "quota.h"
#include "security.h"
#include "task.h"
#include "tls.h"

/* ---------------------------------------------------------------------------------------------
 * Certificates
 */

struct pki {
  char dir[64];
  char ca_cert[128], ca_key[128];
  char srv_cert[128], srv_key[128];
  char cli_cert[128], cli_key[128];
  char other_key[128];
};

/* The error text of the next call: the buffer emptied first. */
static struct mu_buf *msgbuf(struct mu_buf *b)
{
  mu_buf_clear(b);
  return b;
}
static EVP_PKEY *new_key(void)
{
  return EVP_EC_gen("P-256");
}

static X509 *new_cert(EVP_PKEY *key, const char *cn, X509 *issuer, EVP_PKEY *issuer_key, int ca)
{
  X509 *x = X509_new();
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), (long)(rand() & 0x7fffffff));
  X509_gmtime_adj(X509_getm_notBefore(x), -60);
  X509_gmtime_adj(X509_getm_notAfter(x), 3600);
  X509_set_pubkey(x, key);
  X509_NAME *name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
  X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : name);
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer ? issuer : x, x, NULL, NULL, 0);
  X509_EXTENSION *ext =
      X509V3_EXT_conf_nid(NULL, &ctx, NID_basic_constraints, ca ? "critical,CA:TRUE" : "CA:FALSE");
  X509_add_ext(x, ext, -1);
  X509_EXTENSION_free(ext);
  if (!ca) {
    ext = X509V3_EXT_conf_nid(NULL, &ctx, NID_subject_alt_name, "IP:127.0.0.1");
    X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
  }
  X509_sign(x, issuer_key ? issuer_key : key, EVP_sha256());
  return x;
}

static void write_pem(const char *path, X509 *x, EVP_PKEY *k)
{
  FILE *f = fopen(path, "w");
  if (x)
    PEM_write_X509(f, x);
  if (k)
    PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL);
  fclose(f);
}

static void pki_make(struct pki *p)
{
  snprintf(p->dir, sizeof(p->dir), "/tmp/mu-unit-tls.XXXXXX");
  if (mkdtemp(p->dir) == NULL)
    abort();
  snprintf(p->ca_cert, sizeof(p->ca_cert), "%s/ca.pem", p->dir);
  snprintf(p->ca_key, sizeof(p->ca_key), "%s/ca.key", p->dir);
  snprintf(p->srv_cert, sizeof(p->srv_cert), "%s/server.pem", p->dir);
  snprintf(p->srv_key, sizeof(p->srv_key), "%s/server.key", p->dir);
  snprintf(p->cli_cert, sizeof(p->cli_cert), "%s/client.pem", p->dir);
  snprintf(p->cli_key, sizeof(p->cli_key), "%s/client.key", p->dir);
  snprintf(p->other_key, sizeof(p->other_key), "%s/other.key", p->dir);
  EVP_PKEY *cak = new_key(), *sk = new_key(), *ck = new_key(), *ok = new_key();
  X509 *ca = new_cert(cak, "mu test CA", NULL, NULL, 1);
  X509 *sc = new_cert(sk, "127.0.0.1", ca, cak, 0);
  X509 *cc = new_cert(ck, "client", ca, cak, 0);
  write_pem(p->ca_cert, ca, NULL);
  write_pem(p->ca_key, NULL, cak);
  write_pem(p->srv_cert, sc, NULL);
  write_pem(p->srv_key, NULL, sk);
  write_pem(p->cli_cert, cc, NULL);
  write_pem(p->cli_key, NULL, ck);
  write_pem(p->other_key, NULL, ok);
  X509_free(ca);
  X509_free(sc);
  X509_free(cc);
  EVP_PKEY_free(cak);
  EVP_PKEY_free(sk);
  EVP_PKEY_free(ck);
  EVP_PKEY_free(ok);
}

static void pki_remove(struct pki *p)
{
  const char *files[] = {p->ca_cert,  p->ca_key,  p->srv_cert, p->srv_key,
                         p->cli_cert, p->cli_key, p->other_key};
  for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
    unlink(files[i]);
  rmdir(p->dir);
}

/* ---------------------------------------------------------------------------------------------
 * A client over memory BIOs, pumped against an rv_tls_conn
 */

struct client {
  SSL_CTX *ctx;
  SSL *ssl;
  BIO *rbio, *wbio;
};

static void client_new(struct client *c, const struct pki *p, int with_cert)
{
  c->ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_load_verify_locations(c->ctx, p->ca_cert, NULL);
  SSL_CTX_set_verify(c->ctx, SSL_VERIFY_PEER, NULL);
  if (with_cert) {
    SSL_CTX_use_certificate_file(c->ctx, p->cli_cert, SSL_FILETYPE_PEM);
    SSL_CTX_use_PrivateKey_file(c->ctx, p->cli_key, SSL_FILETYPE_PEM);
  }
  c->ssl = SSL_new(c->ctx);
  c->rbio = BIO_new(BIO_s_mem());
  c->wbio = BIO_new(BIO_s_mem());
  BIO_set_mem_eof_return(c->rbio, -1);
  SSL_set_bio(c->ssl, c->rbio, c->wbio);
  SSL_set_connect_state(c->ssl);
  X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), "127.0.0.1");
}

static void client_free(struct client *c)
{
  SSL_free(c->ssl);
  SSL_CTX_free(c->ctx);
}

static int collect(void *data, const char *plain, size_t len)
{
  return mu_buf_append(data, plain, len) != 0;
}

/* Moves bytes both ways until neither side has anything to say, the client's `step` bytes at
 * a time (0: as they come). Returns: the last rv_tls_conn_read() result. */
static int pump_by(struct client *c, struct rv_tls_conn *tc, struct mu_buf *plain, int step)
{
  char tmp[16384];
  int rc = 0;
  for (int round = 0; round < 20; round++) {
    if (!SSL_is_init_finished(c->ssl))
      SSL_do_handshake(c->ssl);
    int moved = 0;
    while (BIO_ctrl_pending(c->wbio) > 0) {
      int n = BIO_read(c->wbio, tmp, step > 0 ? step : (int)sizeof(tmp));
      if (n <= 0)
        break;
      moved = 1;
      rc = rv_tls_conn_read(tc, tmp, (size_t)n, collect, plain);
      if (rc < 0)
        break;
    }
    struct mu_buf io = MU_BUF_INIT(1 << 20);
    int erc = rv_tls_conn_encrypt(tc, &io);
    if (erc != 0 && rc == 0)
      rc = erc;
    if (io.len > 0) {
      moved = 1;
      BIO_write(c->rbio, io.data, (int)io.len);
    }
    mu_buf_release(&io);
    if (!moved || rc < 0)
      break;
  }
  return rc;
}

static int pump(struct client *c, struct rv_tls_conn *tc, struct mu_buf *plain)
{
  return pump_by(c, tc, plain, 0);
}

TEST(tls__handshake_and_data_both_ways)
{
  struct pki p;
  struct rv_tls *t = NULL;
  struct mu_buf err = MU_BUF_INIT(4096);
  pki_make(&p);
  struct rv_tls_config cfg = {p.srv_cert, p.srv_key, NULL};
  ASSERT_EQ(rv_tls_new(&cfg, &t, msgbuf(&err)), 0);
  struct rv_tls_conn *tc = rv_tls_conn_new(t);
  struct client c;
  client_new(&c, &p, 0);
  struct mu_buf plain = MU_BUF_INIT(1 << 20);

  /* a reply queued before the handshake is held back, then sent */
  struct mu_buf early = MU_BUF_INIT(1 << 20);
  mu_buf_puts(&early, "HELLO ");
  ASSERT_EQ(rv_tls_conn_encrypt(tc, &early), 0);
  ASSERT(!rv_tls_conn_ready(tc));
  mu_buf_release(&early);

  ASSERT_EQ(pump(&c, tc, &plain), 0);
  ASSERT(SSL_is_init_finished(c.ssl));
  ASSERT(rv_tls_conn_ready(tc));
  ASSERT_EQ(SSL_get_verify_result(c.ssl), X509_V_OK);

  const char req[] = "GET /v2/keys/a HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(SSL_write(c.ssl, req, (int)sizeof(req) - 1), (int)sizeof(req) - 1);
  ASSERT_EQ(pump(&c, tc, &plain), 0);
  ASSERT_STR_EQ(mu_buf_str(&plain), req);

  /* a reply bigger than one TLS record */
  struct mu_buf out = MU_BUF_INIT(1 << 20);
  for (int i = 0; i < 5000; i++)
    mu_buf_puts(&out, "0123456789");
  ASSERT_EQ(rv_tls_conn_encrypt(tc, &out), 0);
  ASSERT(out.len > 50000);
  BIO_write(c.rbio, out.data, (int)out.len);
  char got[60000];
  size_t total = 0;
  int n;
  while ((n = SSL_read(c.ssl, got + total, (int)(sizeof(got) - total))) > 0)
    total += (size_t)n;
  ASSERT_EQ(total, 6 + 50000u);
  ASSERT(memcmp(got, "HELLO 0123456789", 16) == 0);

  /* close_notify from the client is the end of input */
  SSL_shutdown(c.ssl);
  mu_buf_clear(&plain);
  ASSERT_EQ(pump(&c, tc, &plain), RV_TLS_EOF);
  ASSERT_EQ(rv_tls_stats(t)->handshakes, 1u);
  ASSERT_EQ(rv_tls_stats(t)->handshake_failures, 0u);

  mu_buf_release(&out);
  mu_buf_release(&plain);
  client_free(&c);
  rv_tls_conn_free(tc);
  rv_tls_free(t);
  pki_remove(&p);
  mu_buf_release(&err);
}

/* OpenSSL gets whole records only: records cut anywhere (a byte at a time, 7 at a time) make
 * the same plaintext, and the start of a record waits in the session, counted, until its end. */
TEST(tls__records_cut_anywhere)
{
  struct pki p;
  struct rv_tls *t = NULL;
  struct mu_buf err = MU_BUF_INIT(4096);
  pki_make(&p);
  struct rv_tls_config cfg = {p.srv_cert, p.srv_key, NULL};
  ASSERT_EQ(rv_tls_new(&cfg, &t, msgbuf(&err)), 0);
  struct rv_tls_conn *tc = rv_tls_conn_new(t);
  struct client c;
  client_new(&c, &p, 0);
  struct mu_buf plain = MU_BUF_INIT(1 << 20);
  ASSERT_EQ(pump_by(&c, tc, &plain, 1), 0);
  ASSERT(SSL_is_init_finished(c.ssl));
  ASSERT(rv_tls_conn_ready(tc));

  static char big[40000]; /* three records */
  for (size_t i = 0; i < sizeof(big); i++)
    big[i] = (char)('a' + i % 26);
  ASSERT_EQ(SSL_write(c.ssl, big, (int)sizeof(big)), (int)sizeof(big));
  ASSERT_EQ(pump_by(&c, tc, &plain, 7), 0);
  ASSERT_EQ(plain.len, sizeof(big));
  ASSERT(memcmp(plain.data, big, sizeof(big)) == 0);

  /* one record, all but its last byte: nothing yet, and the session holds those bytes */
  mu_buf_clear(&plain);
  rv_tls_conn_trim(tc);
  ASSERT_EQ(rv_tls_conn_buffered(tc), 0u);
  ASSERT_EQ(SSL_write(c.ssl, "abc", 3), 3);
  char rec[256];
  int n = BIO_read(c.wbio, rec, sizeof(rec));
  ASSERT(n > 5 && n < (int)sizeof(rec));
  ASSERT_EQ(rv_tls_conn_read(tc, rec, (size_t)n - 1, collect, &plain), 0);
  ASSERT_EQ(plain.len, 0u);
  ASSERT_EQ(rv_tls_conn_buffered(tc), (size_t)n - 1);
  ASSERT_EQ(rv_tls_conn_read(tc, rec + n - 1, 1, collect, &plain), 0);
  ASSERT_STR_EQ(mu_buf_str(&plain), "abc");
  ASSERT_EQ(rv_tls_conn_buffered(tc), 0u);

  mu_buf_release(&plain);
  client_free(&c);
  rv_tls_conn_free(tc);
  rv_tls_free(t);
  pki_remove(&p);
  mu_buf_release(&err);
}

/* musterd keeps no session and hands out no ticket (TLS 1.2, 1.3): a client gets nothing to
 * resume with, and one that offers its last session anyway gets a full handshake. */
TEST(tls__no_resumption)
{
  struct pki p;
  struct rv_tls *t = NULL;
  struct mu_buf err = MU_BUF_INIT(4096);
  pki_make(&p);
  struct rv_tls_config cfg = {p.srv_cert, p.srv_key, NULL};
  ASSERT_EQ(rv_tls_new(&cfg, &t, msgbuf(&err)), 0);
  const int versions[] = {TLS1_2_VERSION, TLS1_3_VERSION};
  for (int v = 0; v < 2; v++) {
    SSL_SESSION *sess = NULL;
    for (int round = 0; round < 2; round++) {
      struct rv_tls_conn *tc = rv_tls_conn_new(t);
      struct client c;
      client_new(&c, &p, 0);
      SSL_set_max_proto_version(c.ssl, versions[v]);
      if (sess != NULL)
        ASSERT_EQ(SSL_set_session(c.ssl, sess), 1);
      struct mu_buf plain = MU_BUF_INIT(1 << 20);
      ASSERT_EQ(pump(&c, tc, &plain), 0);
      ASSERT(SSL_is_init_finished(c.ssl));
      char b[16];
      ASSERT(SSL_read(c.ssl, b, sizeof(b)) <= 0); /* would take TLS 1.3 tickets */
      ASSERT_EQ(SSL_version(c.ssl), versions[v]);
      ASSERT_EQ(SSL_session_reused(c.ssl), 0);
      if (sess == NULL) {
        sess = SSL_get1_session(c.ssl);
        ASSERT(!SSL_SESSION_has_ticket(sess));
        ASSERT(!SSL_SESSION_is_resumable(sess));
      }
      SSL_shutdown(c.ssl); /* freed without it, the client would drop the session */
      mu_buf_release(&plain);
      client_free(&c);
      rv_tls_conn_free(tc);
    }
    SSL_SESSION_free(sess);
  }
  rv_tls_free(t);
  pki_remove(&p);
  mu_buf_release(&err);
}

TEST(tls__client_certificate_required)
{
  struct pki p;
  struct rv_tls *t = NULL;
  struct mu_buf err = MU_BUF_INIT(4096);
  pki_make(&p);
  struct rv_tls_config cfg = {p.srv_cert, p.srv_key, p.ca_cert};
  ASSERT_EQ(rv_tls_new(&cfg, &t, msgbuf(&err)), 0);

  /* with a certificate from the CA: accepted */
  struct rv_tls_conn *tc = rv_tls_conn_new(t);
  struct client c;
  client_new(&c, &p, 1);
  struct mu_buf plain = MU_BUF_INIT(1 << 20);
  ASSERT_EQ(pump(&c, tc, &plain), 0);
  ASSERT(rv_tls_conn_ready(tc));
  client_free(&c);
  rv_tls_conn_free(tc);

  /* without one: the handshake fails on the server side */
  tc = rv_tls_conn_new(t);
  client_new(&c, &p, 0);
  ASSERT_EQ(pump(&c, tc, &plain), MU_EPROTO);
  ASSERT(!rv_tls_conn_ready(tc));
  ASSERT_EQ(rv_tls_stats(t)->handshake_failures, 1u);
  ASSERT_EQ(plain.len, 0u);
  client_free(&c);
  rv_tls_conn_free(tc);

  /* not TLS at all */
  tc = rv_tls_conn_new(t);
  const char junk[] = "GET / HTTP/1.1\r\n\r\n";
  ASSERT_EQ(rv_tls_conn_read(tc, junk, sizeof(junk) - 1, collect, &plain), MU_EPROTO);
  rv_tls_conn_free(tc);

  mu_buf_release(&plain);
  rv_tls_free(t);
  pki_remove(&p);
  mu_buf_release(&err);
}

TEST(tls__bad_files_are_named)
{
  struct pki p;
  struct rv_tls *t = NULL;
  struct mu_buf err = MU_BUF_INIT(4096);
  pki_make(&p);
  struct rv_tls_config missing = {"/nonexistent/cert.pem", p.srv_key, NULL};
  ASSERT_EQ(rv_tls_new(&missing, &t, msgbuf(&err)), MU_EINVAL);
  ASSERT_NULL(t);
  ASSERT_NOT_NULL(strstr(mu_buf_str(&err), "/nonexistent/cert.pem"));
  ASSERT_NOT_NULL(strstr(mu_buf_str(&err), "--tls-cert"));

  struct rv_tls_config mismatch = {p.srv_cert, p.other_key, NULL};
  ASSERT_EQ(rv_tls_new(&mismatch, &t, msgbuf(&err)), MU_EINVAL);
  ASSERT_NOT_NULL(strstr(mu_buf_str(&err), "does not belong"));

  struct rv_tls_config badca = {p.srv_cert, p.srv_key, p.srv_key};
  ASSERT_EQ(rv_tls_new(&badca, &t, msgbuf(&err)), MU_EINVAL);
  ASSERT_NOT_NULL(strstr(mu_buf_str(&err), "--tls-client-ca"));

  struct rv_tls_config nokey = {p.srv_cert, NULL, NULL};
  ASSERT_EQ(rv_tls_new(&nokey, &t, msgbuf(&err)), MU_EINVAL);
  ASSERT_NOT_NULL(strstr(mu_buf_str(&err), "--tls-key"));
  pki_remove(&p);
  mu_buf_release(&err);
}

/* ---------------------------------------------------------------------------------------------
 * Auth
 */

static void write_file(const char *path, const char *text)
{
  FILE *f = fopen(path, "w");
  fputs(text, f);
  fclose(f);
}

TEST(auth__tokens_and_basic)
{
  char dir[] = "/tmp/mu-unit-auth.XXXXXX";
  char tokens[64], users[64], pass[64];
  struct mu_buf err = MU_BUF_INIT(4096);
  ASSERT_NOT_NULL(mkdtemp(dir));
  snprintf(tokens, sizeof(tokens), "%s/tokens", dir);
  snprintf(users, sizeof(users), "%s/users", dir);
  snprintf(pass, sizeof(pass), "%s/pass", dir);
  write_file(tokens, "# tokens\n\n  s3cret-token-one  \nsecond-token-2222\r\n");
  write_file(users, "root:rootpw\n# comment\nalice:pa ss:word\n");
  write_file(pass, "bobpass\nignored\n");

  struct sec_auth *a = sec_auth_new();
  ASSERT(!sec_auth_enabled(a));
  ASSERT_EQ(sec_auth_load_tokens(a, tokens, msgbuf(&err)), 0);
  ASSERT_EQ(sec_auth_load_users(a, users, msgbuf(&err)), 0);
  ASSERT_EQ(sec_auth_add_user_spec(a, "bob:" /* + path */ "", msgbuf(&err)), MU_EINVAL);
  char spec[96];
  snprintf(spec, sizeof(spec), "bob:%s", pass);
  ASSERT_EQ(sec_auth_add_user_spec(a, spec, msgbuf(&err)), 0);
  ASSERT(sec_auth_enabled(a));

  ASSERT_EQ(sec_auth_check(a, "Bearer s3cret-token-one"), SEC_AUTH_GRANTED);
  ASSERT_EQ(sec_auth_check(a, "bearer second-token-2222"), SEC_AUTH_GRANTED);
  ASSERT_EQ(sec_auth_check(a, "Bearer s3cret-token-on"), SEC_AUTH_DENIED);
  ASSERT_EQ(sec_auth_check(a, "Bearer s3cret-token-one2"), SEC_AUTH_DENIED);
  ASSERT_EQ(sec_auth_check(a, NULL), SEC_AUTH_MISSING);
  ASSERT_EQ(sec_auth_check(a, "Digest x"), SEC_AUTH_MISSING);
  /* root:rootpw, alice:pa ss:word, bob:bobpass */
  ASSERT_EQ(sec_auth_check(a, "Basic cm9vdDpyb290cHc="), SEC_AUTH_GRANTED);
  ASSERT_EQ(sec_auth_check(a, "Basic YWxpY2U6cGEgc3M6d29yZA=="), SEC_AUTH_GRANTED);
  ASSERT_EQ(sec_auth_check(a, "Basic Ym9iOmJvYnBhc3M="), SEC_AUTH_GRANTED);
  ASSERT_EQ(sec_auth_check(a, "Basic cm9vdDpyb290cHg="), SEC_AUTH_DENIED);
  ASSERT_EQ(sec_auth_check(a, "Basic !!!"), SEC_AUTH_DENIED);
  /* The right password under the wrong user: alice:rootpw, bob:rootpw, root:bobpass (each
   * password is someone's), an unknown user (mallory:rootpw), another case (Root:rootpw) and a
   * prefix of the name (roo:rootpw) */
  ASSERT_EQ(sec_auth_check(a, "Basic YWxpY2U6cm9vdHB3"), SEC_AUTH_DENIED);
  ASSERT_EQ(sec_auth_check(a, "Basic Ym9iOnJvb3Rwdw=="), SEC_AUTH_DENIED);
  ASSERT_EQ(sec_auth_check(a, "Basic cm9vdDpib2JwYXNz"), SEC_AUTH_DENIED);
  ASSERT_EQ(sec_auth_check(a, "Basic bWFsbG9yeTpyb290cHc="), SEC_AUTH_DENIED);
  ASSERT_EQ(sec_auth_check(a, "Basic Um9vdDpyb290cHc="), SEC_AUTH_DENIED);
  ASSERT_EQ(sec_auth_check(a, "Basic cm9vOnJvb3Rwdw=="), SEC_AUTH_DENIED);
  ASSERT_EQ(sec_auth_check(a, "Bearer second-token-2222"), SEC_AUTH_GRANTED);

  struct mu_buf m = MU_BUF_INIT(1 << 16);
  sec_auth_metrics(a, &m);
  ASSERT_NOT_NULL(strstr(mu_buf_str(&m), "verdict=\"granted\"} 6"));
  ASSERT_NULL(strstr(mu_buf_str(&m), "s3cret"));
  mu_buf_release(&m);
  sec_auth_free(a);

  /* bad files name the file and line */
  a = sec_auth_new();
  write_file(tokens, "good-token-123\nbad token\n");
  ASSERT_EQ(sec_auth_load_tokens(a, tokens, msgbuf(&err)), MU_EINVAL);
  ASSERT_NOT_NULL(strstr(mu_buf_str(&err), "line 2"));
  ASSERT_NOT_NULL(strstr(mu_buf_str(&err), tokens));
  write_file(tokens, "# nothing\n\n");
  ASSERT_EQ(sec_auth_load_tokens(a, tokens, msgbuf(&err)), MU_EINVAL);
  ASSERT_NOT_NULL(strstr(mu_buf_str(&err), "holds no token"));
  write_file(users, "nocolon\n");
  ASSERT_EQ(sec_auth_load_users(a, users, msgbuf(&err)), MU_EINVAL);
  ASSERT_NOT_NULL(strstr(mu_buf_str(&err), "USER:PASSWORD"));
  ASSERT_EQ(sec_auth_load_tokens(a, "/nonexistent/t", msgbuf(&err)), MU_EINVAL);
  ASSERT_NOT_NULL(strstr(mu_buf_str(&err), "/nonexistent/t"));
  sec_auth_free(a);
  unlink(tokens);
  unlink(users);
  unlink(pass);
  rmdir(dir);
  mu_buf_release(&err);
}

/* ---------------------------------------------------------------------------------------------
 * Quota bookkeeping (refusals are answered through the server: see the integration tests)
 */

/* Rows as an API would declare them: the quota reads their flags and the usage hook. */
static void test_usage(struct rv_req *req, struct rv_usage *u)
{
  if (req->nvars > 0) {
    u->scope = req->vars[0];
    u->scope_len = strlen(req->vars[0]);
  }
  u->poll = rv_req_param(req, "wait") != NULL;
}

static const struct rv_api test_api = {"test", NULL, test_usage, NULL};
static const struct rv_route poll_row = {RV_POST, "/t/{run}/join", RV_ROUTE_LONG_POLL, NULL,
                                         "t",     &test_api};
static const struct rv_route maybe_row = {RV_GET, "/t/{run}/kv", RV_ROUTE_MAY_POLL,
                                          NULL,   "t",           &test_api};
static const struct rv_route plain_row = {RV_GET, "/t/{run}/info", 0, NULL, "t", &test_api};

static struct rv_req mkreq(const struct rv_route *route, const char *run, struct rv_param *params,
                           size_t np)
{
  struct rv_req r;
  memset(&r, 0, sizeof(r));
  r.method = route->methods;
  r.path = route->path;
  r.path_len = strlen(route->path);
  r.vars[0] = run;
  r.nvars = 1;
  r.route = route;
  r.params = params;
  r.nparams = np;
  r.query = "";
  r.body = "";
  return r;
}

TEST(quota__long_polls_classified_by_row_and_counted)
{
  struct rv_param wait = {"wait", "1"};
  struct sec_quota_config cfg = {0, 0, 10, 2, 3, 0, 0};
  struct sec_quota *q = sec_quota_new(&cfg);
  ASSERT(sec_quota_enabled(q));
  struct rv_ticket t[6];
  /* a long-poll row always counts, in its scope (the run) and for its client */
  struct rv_req r = mkreq(&poll_row, "job-1", NULL, 0);
  ASSERT_EQ(sec_quota_gate(q, &r, "10.0.0.1", &t[0]), 0);
  ASSERT_EQ(sec_quota_gate(q, &r, "10.0.0.1", &t[1]), 0);
  ASSERT_EQ(sec_quota_gate(q, &r, "10.0.0.2", &t[2]), 0);
  ASSERT(t[0].counted && t[0].held[0] != NULL && t[0].held[1] != NULL);
  ASSERT(t[0].held[0] == t[1].held[0]);
  ASSERT(t[0].held[0] != t[2].held[0]);
  ASSERT(t[0].held[1] == t[2].held[1]);
  /* a may-poll row counts when its API says this request polls */
  r = mkreq(&maybe_row, "job-2", NULL, 0);
  ASSERT_EQ(sec_quota_gate(q, &r, "10.0.0.3", &t[3]), 0);
  ASSERT(!t[3].counted && t[3].held[0] == NULL);
  r = mkreq(&maybe_row, "job-2", &wait, 1);
  ASSERT_EQ(sec_quota_gate(q, &r, "10.0.0.3", &t[4]), 0);
  ASSERT(t[4].counted && t[4].held[1] != NULL && t[4].held[1] != t[0].held[1]);
  /* a plain row takes nothing */
  r = mkreq(&plain_row, "job-1", &wait, 1);
  ASSERT_EQ(sec_quota_gate(q, &r, "10.0.0.1", &t[5]), 0);
  ASSERT(!t[5].counted && t[5].held[0] == NULL);
  struct mu_buf m = MU_BUF_INIT(1 << 16);
  sec_quota_metrics(q, &m);
  ASSERT_NOT_NULL(strstr(mu_buf_str(&m), "musterd_quota_long_polls_open 4"));
  mu_buf_clear(&m);
  for (int i = 0; i < 6; i++)
    sec_quota_release(q, &t[i]);
  sec_quota_release(q, &t[0]); /* twice: no-op */
  sec_quota_metrics(q, &m);
  ASSERT_NOT_NULL(strstr(mu_buf_str(&m), "musterd_quota_long_polls_open 0"));
  mu_buf_release(&m);
  sec_quota_free(q);
}

/* ---------------------------------------------------------------------------------------------
 * The gates through the HTTP core (router.c), without sockets
 */

static char *feed(struct rv_server *srv, const char *in)
{
  struct mu_buf out = MU_BUF_INIT(1 << 20);
  rv_server_feed(srv, in, strlen(in), &out);
  return mu_buf_detach(&out);
}

TEST(security__gates_in_the_router)
{
  uv_loop_t loop;
  struct rv_server_config cfg;
  uv_loop_init(&loop);
  rv_server_config_init(&cfg);
  struct rv_server *srv = rv_server_new(&loop, &cfg);
  struct sec *sec = mu_calloc(1, sizeof(*sec));
  struct sec_quota_config qc = {0, 10, 0, 0, 0, 0, 0};
  sec->auth = sec_auth_new();
  ASSERT_EQ(sec_auth_add_token(sec->auth, "unit-token-1"), 0);
  sec->quota = sec_quota_new(&qc);
  ASSERT_EQ(sec_attach(srv, sec), 0);

  char *o = feed(srv, "GET /v2/keys/a HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_NOT_NULL(strstr(o, "HTTP/1.1 401 Unauthorized\r\n"));
  ASSERT_NOT_NULL(strstr(o, "\r\n\r\n{\"message\":\"Insufficient credentials\"}"));
  mu_free(o);
  o = feed(srv, "POST /v1/runs/x/join HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                "Content-Length: 2\r\n\r\n{}");
  ASSERT_NOT_NULL(strstr(o, "HTTP/1.1 401 "));
  ASSERT_NOT_NULL(strstr(o, "WWW-Authenticate: Bearer realm=\"musterd\"\r\n"));
  ASSERT_NOT_NULL(strstr(o, "\"error\":\"unauthorized\""));
  mu_free(o);
  o = feed(srv, "GET /v2/keys/a HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer unit-token-1\r\n\r\n");
  ASSERT_NOT_NULL(strstr(o, "HTTP/1.1 404 "));
  ASSERT_NOT_NULL(strstr(o, "\"errorCode\":100"));
  mu_free(o);
  o = feed(srv, "PUT /v2/keys/a?value=01234567890 HTTP/1.1\r\nHost: x\r\n"
                "Authorization: Bearer unit-token-1\r\n\r\n");
  ASSERT_NOT_NULL(strstr(o, "HTTP/1.1 413 "));
  ASSERT_NOT_NULL(strstr(o, "\"errorCode\":600,\"message\":\"Value over quota\""));
  ASSERT_NOT_NULL(strstr(o, "--quota-value-bytes"));
  mu_free(o);
  o = feed(srv, "PUT /v2/keys/a?value=0123456789 HTTP/1.1\r\nHost: x\r\n"
                "Authorization: Bearer unit-token-1\r\n\r\n");
  ASSERT_NOT_NULL(strstr(o, "HTTP/1.1 201 "));
  mu_free(o);
  /* the public rows need no credentials; a path with no row is 404 before any check */
  static const char *open_paths[] = {"/version", "/healthz", "/health"};
  for (size_t i = 0; i < sizeof(open_paths) / sizeof(open_paths[0]); i++) {
    char in[128];
    snprintf(in, sizeof(in), "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", open_paths[i]);
    o = feed(srv, in);
    ASSERT_NOT_NULL(strstr(o, "HTTP/1.1 200 "));
    mu_free(o);
  }
  o = feed(srv, "GET /v2x HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_NOT_NULL(strstr(o, "HTTP/1.1 404 "));
  mu_free(o);
  /* /v1 words its refusals itself: a wrong token is "not valid", 401 with the Bearer realm */
  o = feed(srv, "GET /v1/runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer nope-nope\r\n\r\n");
  ASSERT_NOT_NULL(strstr(o, "HTTP/1.1 401 "));
  ASSERT_NOT_NULL(strstr(o, "is not valid for this musterd"));
  mu_free(o);
  o = feed(srv, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_NOT_NULL(strstr(o, "musterd_auth_requests_total{verdict=\"missing\"} 2"));
  ASSERT_NOT_NULL(strstr(o, "musterd_quota_refused_total{quota=\"value_bytes\"} 1"));
  ASSERT_NULL(strstr(o, "unit-token-1"));
  mu_free(o);

  rv_server_close(srv, NULL, NULL); /* frees sec */
  uv_run(&loop, UV_RUN_DEFAULT);
  ASSERT_EQ(uv_loop_close(&loop), 0);
}

/* Issue 24: scopes on token and user lines, and the checks every API calls. */
TEST(auth__scoped_credentials)
{
  char dir[] = "/tmp/mu-unit-scopes.XXXXXX";
  char tokens[64], users[64], bad[64];
  struct mu_buf err = MU_BUF_INIT(4096);
  ASSERT_NOT_NULL(mkdtemp(dir));
  snprintf(tokens, sizeof(tokens), "%s/tokens", dir);
  snprintf(users, sizeof(users), "%s/users", dir);
  snprintf(bad, sizeof(bad), "%s/bad", dir);
  write_file(tokens, "tok-team-a  runs=a-*\tkeys=/a/ keys=/shared/x quota-watchers=3\n"
                     "tok-reader read-only\ntok-all-of-it\n");
  write_file(users, "ann:pass with spaces runs=a-* read-only\nbob:p runs=x\n");
  struct sec_auth *a = sec_auth_new();
  ASSERT_EQ(sec_auth_load_tokens(a, tokens, msgbuf(&err)), 0);
  ASSERT_EQ(sec_auth_load_users(a, users, msgbuf(&err)), 0);
  const struct rv_cred *c = NULL;
  ASSERT_EQ(sec_auth_verify(a, "Bearer tok-team-a", &c), SEC_AUTH_GRANTED);
  ASSERT_NOT_NULL(c);
  ASSERT(strncmp(c->id, "credential#", 11) == 0 && strlen(c->id) == 19);
  ASSERT_EQ(c->quota_watchers, 3);
  ASSERT(rv_cred_allows(c, RV_SCOPE_KEY, "/a", 2, RV_WRITE));
  ASSERT(rv_cred_allows(c, RV_SCOPE_KEY, "/a/b/c", 6, RV_READ));
  ASSERT(!rv_cred_allows(c, RV_SCOPE_KEY, "/ab", 3, RV_READ)); /* a path, not a string prefix */
  ASSERT(!rv_cred_allows(c, RV_SCOPE_KEY, "/shared", 7, RV_READ));
  ASSERT(rv_cred_allows(c, RV_SCOPE_KEY, "/shared/x/y", 11, RV_READ));
  ASSERT(rv_cred_above(c, "/shared", 7) && rv_cred_above(c, "/", 1) &&
         rv_cred_above(c, "/shared/", 8));
  ASSERT(!rv_cred_above(c, "/sh", 3) && !rv_cred_above(c, "/a", 2));
  ASSERT(rv_cred_allows(c, RV_SCOPE_RUN, "a-1", 3, RV_WRITE));
  ASSERT(!rv_cred_allows(c, RV_SCOPE_RUN, "b-1", 3, RV_READ));
  char msg[640];
  rv_cred_refusal(c, RV_SCOPE_RUN, "b-1", RV_WRITE, msg, sizeof(msg));
  ASSERT_NOT_NULL(strstr(msg, "lacks the scope runs=b-1"));
  ASSERT_NOT_NULL(strstr(msg, "runs=a-*, keys=/a, keys=/shared/x"));
  ASSERT(strstr(msg, "tok-team-a") == NULL);
  ASSERT_EQ(sec_auth_verify(a, "Bearer tok-reader", &c), SEC_AUTH_GRANTED);
  ASSERT(rv_cred_allows(c, RV_SCOPE_KEY, "/anything", 9, RV_READ));
  ASSERT(!rv_cred_allows(c, RV_SCOPE_RUN, "r", 1, RV_WRITE));
  ASSERT_EQ(sec_auth_verify(a, "Bearer tok-all-of-it", &c), SEC_AUTH_GRANTED);
  ASSERT(rv_cred_allows(c, RV_SCOPE_RUN, "r", 1, RV_WRITE) && !c->scoped && !c->read_only);
  /* a password with spaces keeps them; the trailing scope words are the scopes */
  ASSERT_EQ(sec_auth_verify(a, "Basic YW5uOnBhc3Mgd2l0aCBzcGFjZXM=", &c), SEC_AUTH_GRANTED);
  ASSERT(c->read_only && c->nruns == 1);
  ASSERT_EQ(sec_auth_verify(a, "Bearer tok-team-a runs=a-*", &c), SEC_AUTH_DENIED);
  ASSERT_NULL(c);
  ASSERT(rv_cred_allows(NULL, RV_SCOPE_KEY, "/x", 2, RV_WRITE)); /* no credentials: all */
  sec_auth_free(a);
  /* a bad scope names the line and the fix */
  write_file(bad, "tok-good-one runs=a-*\ntok-bad-one keys=relative\n");
  a = sec_auth_new();
  mu_buf_clear(&err);
  ASSERT_EQ(sec_auth_load_tokens(a, bad, msgbuf(&err)), MU_EINVAL);
  ASSERT_NOT_NULL(strstr(mu_buf_str(&err), "line 2 of the token file"));
  ASSERT_NOT_NULL(strstr(mu_buf_str(&err), "keys=/PREFIX"));
  sec_auth_free(a);
  write_file(bad, "carl:pw runs=\n");
  a = sec_auth_new();
  mu_buf_clear(&err);
  ASSERT_EQ(sec_auth_load_users(a, bad, msgbuf(&err)), MU_EINVAL);
  ASSERT_NOT_NULL(strstr(mu_buf_str(&err), "bad scope 'runs='"));
  sec_auth_free(a);
  mu_buf_release(&err);
  unlink(tokens);
  unlink(users);
  unlink(bad);
  rmdir(dir);
}

/* Issue 35: a read-only credential is refused every verb that may write (PUT, POST, DELETE,
 * PATCH), on the v2 keys and on /v1, with a 403 saying it is read-only; its reads still work and
 * the keys it tried to change are unchanged. */
TEST(security__read_only_refuses_every_write_verb)
{
  char dir[] = "/tmp/mu-unit-ro.XXXXXX", tokens[64];
  struct mu_buf err = MU_BUF_INIT(4096);
  ASSERT_NOT_NULL(mkdtemp(dir));
  snprintf(tokens, sizeof(tokens), "%s/tokens", dir);
  write_file(tokens, "tok-reader-1 read-only\ntok-writer-1\n");
  uv_loop_t loop;
  struct rv_server_config cfg;
  uv_loop_init(&loop);
  rv_server_config_init(&cfg);
  struct rv_server *srv = rv_server_new(&loop, &cfg);
  struct sec *sec = mu_calloc(1, sizeof(*sec));
  struct sec_quota_config qc = {0, 0, 0, 0, 0, 0, 0};
  sec->auth = sec_auth_new();
  ASSERT_EQ(sec_auth_load_tokens(sec->auth, tokens, msgbuf(&err)), 0);
  sec->quota = sec_quota_new(&qc);
  ASSERT_EQ(sec_attach(srv, sec), 0);
  char *o = feed(srv, "PUT /v2/keys/team/k?value=orig HTTP/1.1\r\nHost: x\r\n"
                      "Authorization: Bearer tok-writer-1\r\n\r\n");
  ASSERT_NOT_NULL(strstr(o, "HTTP/1.1 201 "));
  mu_free(o);
  static const char *const writes[] = {
      "PUT /v2/keys/team/k?value=ro",   "POST /v2/keys/team?value=ro",
      "DELETE /v2/keys/team/k",         "DELETE /v2/keys/team?recursive=true",
      "PATCH /v2/keys/team/k?value=ro", "PUT /v1/runs/r1/kv/k",
      "POST /v1/runs/r1/kv/k",          "DELETE /v1/runs/r1/kv/k",
      "PATCH /v1/runs/r1/kv/k",         "POST /v1/runs/r1/join",
  };
  for (size_t i = 0; i < sizeof(writes) / sizeof(writes[0]); i++) {
    char in[256];
    snprintf(in, sizeof(in),
             "%s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok-reader-1\r\n"
             "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
             writes[i]);
    o = feed(srv, in);
    if (strstr(o, "HTTP/1.1 403 ") == NULL || strstr(o, "is read-only") == NULL)
      fprintf(stderr, "# %s answered: %.300s\n", writes[i], o);
    ASSERT_NOT_NULL(strstr(o, "HTTP/1.1 403 "));
    ASSERT_NOT_NULL(strstr(o, "is read-only"));
    mu_free(o);
  }
  o = feed(srv, "GET /v2/keys/team/k HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok-reader-1"
                "\r\n\r\n");
  ASSERT_NOT_NULL(strstr(o, "HTTP/1.1 200 "));
  ASSERT_NOT_NULL(strstr(o, "\"value\":\"orig\""));
  mu_free(o);
  rv_server_close(srv, NULL, NULL); /* frees sec */
  uv_run(&loop, UV_RUN_DEFAULT);
  ASSERT_EQ(uv_loop_close(&loop), 0);
  mu_buf_release(&err);
  unlink(tokens);
  rmdir(dir);
}
