/* TLS over memory BIOs (see tls.h). One SSL per connection reads ciphertext from `rbio`
 * (filled by rv_tls_conn_read) and writes records to `wbio` (drained by rv_tls_conn_encrypt).
 * Memory BIOs never block, so SSL_write always takes the whole buffer once the handshake is
 * done, and SSL_read/SSL_do_handshake only ever want more input (SSL_ERROR_WANT_READ).
 */
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "muster/errno.h"

#include "alloc.h"
#include "log.h"
#include "tls.h"

struct rv_tls {
  SSL_CTX *ctx;
  int verify_clients;
  struct rv_tls_stats stats;
};

struct rv_tls_conn {
  struct rv_tls *tls;
  SSL *ssl;
  BIO *rbio; /* ciphertext in: we write, SSL reads */
  BIO *wbio; /* ciphertext out: SSL writes, we read */
  int ready; /* handshake done */
  int failed;
  struct mu_buf held; /* plaintext queued before the handshake finished */
};

/* The first queued OpenSSL error as text ("certificate verify failed"), or `fallback`. */
static const char *ssl_reason(char *buf, size_t n, const char *fallback)
{
  unsigned long e = ERR_get_error();
  if (e == 0) {
    snprintf(buf, n, "%s", fallback);
  } else {
    const char *r = ERR_reason_error_string(e);
    snprintf(buf, n, "%s", r != NULL ? r : fallback);
  }
  ERR_clear_error();
  return buf;
}

/* The server's certificate chain and its key. Returns: 0, or MU_EINVAL with `err` set. */
static int load_identity(SSL_CTX *ctx, const struct rv_tls_config *cfg, struct mu_buf *err)
{
  char why[256];
  if (SSL_CTX_use_certificate_chain_file(ctx, cfg->cert_file) != 1) {
    mu_buf_printf(err,
                  "cannot load the TLS certificate '%s': %s (give a PEM certificate chain with "
                  "--tls-cert)",
                  cfg->cert_file, ssl_reason(why, sizeof(why), "unreadable"));
    return MU_EINVAL;
  }
  int loaded = SSL_CTX_use_PrivateKey_file(ctx, cfg->key_file, SSL_FILETYPE_PEM) == 1;
  if (!loaded && ERR_GET_REASON(ERR_peek_last_error()) != X509_R_KEY_VALUES_MISMATCH) {
    mu_buf_printf(err,
                  "cannot load the TLS key '%s': %s (give the PEM private key of the certificate "
                  "with --tls-key)",
                  cfg->key_file, ssl_reason(why, sizeof(why), "unreadable"));
    return MU_EINVAL;
  }
  if (!loaded || SSL_CTX_check_private_key(ctx) != 1) {
    mu_buf_printf(
        err, "the TLS key '%s' does not belong to the certificate '%s' (pass the matching pair)",
        cfg->key_file, cfg->cert_file);
    ERR_clear_error();
    return MU_EINVAL;
  }
  return 0;
}

/* With --tls-client-ca: clients must present a certificate signed by that CA.
 * Returns: 0, or MU_EINVAL with `err` set. */
static int load_client_ca(SSL_CTX *ctx, const char *ca_file, struct mu_buf *err)
{
  char why[256];
  if (SSL_CTX_load_verify_locations(ctx, ca_file, NULL) != 1) {
    mu_buf_printf(err,
                  "cannot load the client CA '%s': %s (give a PEM CA bundle with --tls-client-ca)",
                  ca_file, ssl_reason(why, sizeof(why), "unreadable"));
    return MU_EINVAL;
  }
  STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(ca_file);
  if (names == NULL) {
    mu_buf_printf(err, "the client CA file '%s' holds no certificate (give a PEM CA bundle)",
                  ca_file);
    ERR_clear_error();
    return MU_EINVAL;
  }
  SSL_CTX_set_client_CA_list(ctx, names); /* takes `names` */
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
  SSL_CTX_set_verify_depth(ctx, 8);
  return 0;
}

int rv_tls_new(const struct rv_tls_config *cfg, struct rv_tls **out, struct mu_buf *err)
{
  SSL_CTX *ctx = NULL;
  char why[256];
  int rc = 0;
  *out = NULL;
  if (cfg->cert_file == NULL || cfg->key_file == NULL) {
    mu_buf_puts(err, "TLS needs both --tls-cert FILE and --tls-key FILE");
    return MU_EINVAL;
  }
  ERR_clear_error();
  ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == NULL) {
    mu_buf_printf(err, "cannot create a TLS context: %s",
                  ssl_reason(why, sizeof(why), "OpenSSL failed"));
    return MU_EINVAL;
  }
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
                               SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
  /* resumed sessions must carry the same verification context (else OpenSSL refuses them) */
  SSL_CTX_set_session_id_context(ctx, (const unsigned char *)"musterd", 7);
  rc = load_identity(ctx, cfg, err);
  if (rc == 0 && cfg->client_ca_file != NULL)
    rc = load_client_ca(ctx, cfg->client_ca_file, err);
  if (rc != 0) {
    SSL_CTX_free(ctx);
    return rc;
  }
  struct rv_tls *t = mu_calloc(1, sizeof(*t));
  t->ctx = ctx;
  t->verify_clients = cfg->client_ca_file != NULL;
  *out = t;
  return 0;
}

void rv_tls_free(struct rv_tls *t)
{
  if (t == NULL)
    return;
  SSL_CTX_free(t->ctx);
  mu_free(t);
}

int rv_tls_verifies_clients(const struct rv_tls *t)
{
  return t != NULL && t->verify_clients;
}

const struct rv_tls_stats *rv_tls_stats(const struct rv_tls *t)
{
  return &t->stats;
}

/* A memory BIO that reports "retry" (not EOF) when empty. */
static BIO *mem_bio(void)
{
  BIO *b = BIO_new(BIO_s_mem());
  if (b == NULL) {
    mu_log(MU_LOG_ERROR, "out of memory creating a TLS session");
    abort();
  }
  BIO_set_mem_eof_return(b, -1);
  return b;
}

/* Is `b` empty with a buffer over BIO_KEEP bytes? A memory BIO keeps the largest buffer it ever
 * needed (a ClientHello, a handshake's flight, a 16 KiB record): an idle connection gives it
 * back (the small buffer of an ordinary request is kept: it would be made again at once). */
#define BIO_KEEP 512
static int bio_slack(BIO *b)
{
  BUF_MEM *m = NULL;
  return BIO_ctrl_pending(b) == 0 && BIO_get_mem_ptr(b, &m) == 1 && m != NULL && m->max > BIO_KEEP;
}

/* Replaces the empty BIOs that hold large buffers with new ones (the SSL frees the old). */
static void trim_bios(struct rv_tls_conn *tc)
{
  if (bio_slack(tc->rbio)) {
    tc->rbio = mem_bio();
    SSL_set0_rbio(tc->ssl, tc->rbio);
  }
  if (bio_slack(tc->wbio)) {
    tc->wbio = mem_bio();
    SSL_set0_wbio(tc->ssl, tc->wbio);
  }
}

struct rv_tls_conn *rv_tls_conn_new(struct rv_tls *t)
{
  struct rv_tls_conn *tc = mu_calloc(1, sizeof(*tc));
  tc->tls = t;
  tc->ssl = SSL_new(t->ctx);
  if (tc->ssl == NULL) {
    mu_log(MU_LOG_ERROR, "out of memory creating a TLS session");
    abort();
  }
  tc->rbio = mem_bio();
  tc->wbio = mem_bio();
  SSL_set_bio(tc->ssl, tc->rbio, tc->wbio); /* the SSL owns both BIOs now */
  SSL_set_accept_state(tc->ssl);
  mu_buf_init(&tc->held, 0); /* capped as the connection's output (io->max) when used */
  return tc;
}

void rv_tls_conn_free(struct rv_tls_conn *tc)
{
  if (tc == NULL)
    return;
  SSL_free(tc->ssl);
  mu_buf_release(&tc->held);
  mu_free(tc);
}

int rv_tls_conn_ready(const struct rv_tls_conn *tc)
{
  return tc->ready;
}

static int fail(struct rv_tls_conn *tc, const char *stage)
{
  char why[256];
  if (!tc->failed) {
    tc->failed = 1;
    uint64_t n = 0;
    if (!tc->ready)
      n = ++tc->tls->stats.handshake_failures;
    /* a scanner must not flood the log: the first ten, then every thousandth */
    if (tc->ready || n <= 10 || n % 1000 == 0)
      mu_log(MU_LOG_INFO, "TLS %s failed: %s (%llu failed handshakes so far)", stage,
             ssl_reason(why, sizeof(why), "not a TLS client or connection reset"),
             (unsigned long long)n);
  }
  ERR_clear_error();
  return MU_EPROTO;
}

int rv_tls_conn_read(struct rv_tls_conn *tc, const char *cipher, size_t len, rv_tls_plain_cb *cb,
                     void *data)
{
  char plain[16384];
  if (tc->failed)
    return MU_EPROTO;
  while (len > 0) {
    int chunk = len > 1u << 30 ? 1 << 30 : (int)len;
    int n = BIO_write(tc->rbio, cipher, chunk);
    if (n <= 0)
      return fail(tc, "input");
    cipher += n;
    len -= (size_t)n;
  }
  if (!tc->ready) {
    int r = SSL_do_handshake(tc->ssl);
    if (r != 1) {
      int e = SSL_get_error(tc->ssl, r);
      if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return 0;
      return fail(tc, "handshake");
    }
    tc->ready = 1;
    tc->tls->stats.handshakes++;
  }
  for (;;) {
    int n = SSL_read(tc->ssl, plain, (int)sizeof(plain));
    if (n > 0) {
      if (cb(data, plain, (size_t)n) != 0)
        return 0;
      continue;
    }
    int e = SSL_get_error(tc->ssl, n);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
      trim_bios(tc);
      return 0;
    }
    if (e == SSL_ERROR_ZERO_RETURN)
      return RV_TLS_EOF;
    return fail(tc, "read");
  }
}

/* Moves every pending record from the write BIO to `io`. */
static int drain(struct rv_tls_conn *tc, struct mu_buf *io)
{
  char tmp[16384];
  while (BIO_ctrl_pending(tc->wbio) > 0) {
    int n = BIO_read(tc->wbio, tmp, (int)sizeof(tmp));
    if (n <= 0)
      break;
    if (mu_buf_append(io, tmp, (size_t)n) != 0)
      return MU_E2BIG;
  }
  return 0;
}

static int write_plain(struct rv_tls_conn *tc, const char *p, size_t len)
{
  while (len > 0) {
    int chunk = len > 1u << 20 ? 1 << 20 : (int)len;
    int n = SSL_write(tc->ssl, p, chunk);
    if (n <= 0)
      return fail(tc, "write");
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

int rv_tls_conn_encrypt(struct rv_tls_conn *tc, struct mu_buf *io)
{
  int rc = 0;
  if (tc->failed) {
    mu_buf_clear(io);
    /* a failed handshake may still owe the client its alert */
    return drain(tc, io) == 0 ? 0 : MU_E2BIG;
  }
  if (!tc->ready) {
    tc->held.max = io->max;
    if (io->len > 0 && mu_buf_append(&tc->held, io->data, io->len) != 0)
      return MU_E2BIG;
    mu_buf_clear(io);
    return drain(tc, io);
  }
  if (tc->held.len > 0) {
    rc = write_plain(tc, tc->held.data, tc->held.len);
    mu_buf_release(&tc->held);
    if (rc != 0)
      return rc;
  }
  if (io->len > 0) {
    rc = write_plain(tc, io->data, io->len);
    mu_buf_clear(io);
    if (rc != 0)
      return rc;
  }
  rc = drain(tc, io);
  trim_bios(tc);
  return rc;
}
