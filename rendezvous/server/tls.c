/* TLS for the listener (see tls.h). One SSL per connection, made at its first whole record,
 * over one BIO of the server's that holds nothing: during rv_tls_conn_read() it hands OpenSSL
 * the whole records just read (the start of a record whose end has not come waits in the
 * session, so OpenSSL never holds a record buffer for it), and what OpenSSL writes goes into a
 * buffer of the connection. The BIO never blocks, so SSL_write always takes the whole buffer
 * once the handshake is done, and SSL_read/SSL_do_handshake only ever want more input
 * (SSL_ERROR_WANT_READ). Measured on loopback (issue 24): a connection after its TLS 1.3
 * handshake with a partial header holds 15.0-15.2 KiB of RSS, ~14 of them OpenSSL's (the SSL
 * object 7.6 KB, the session, the AES-GCM contexts, the key shares and handshake hash it keeps).
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
  BIO_METHOD *bio_method; /* conn_bio_* */
  BIO *bio;               /* one for every session: the loop runs one SSL call at a time, and
                           * points it at its session first (point_bio) */
  int verify_clients;
  struct rv_tls_stats stats;
};

/* What a session holds beside OpenSSL's own state: no memory BIOs (two per session, 0.6 KiB, and
 * each kept the largest buffer it ever needed and copied every byte twice). The server's BIO
 * hands OpenSSL the ciphertext of the call in progress (`in`) and appends what OpenSSL writes to
 * `sink` (`out` while reading). */
struct rv_tls_conn {
  struct rv_tls *tls;
  SSL *ssl;            /* made at the first whole record (a silent or slow client costs none) */
  const char *in;      /* whole records OpenSSL may read now (only during a call) */
  size_t in_len;       /* bytes of them left */
  struct mu_buf *sink; /* where OpenSSL's records go during a call (`out` or the caller's) */
  char *part;          /* the start of a record whose end has not arrived: OpenSSL never holds
                        * one (its record buffer takes 20 KiB); this holds what came of it */
  uint32_t part_len;
  uint32_t part_cap;
  struct mu_buf out;     /* records owed to the peer (the handshake's, alerts, key updates),
                          * then the plaintext's buffer kept for the next answer */
  struct mu_buf held;    /* plaintext queued before the handshake finished */
  unsigned ready : 1;    /* handshake done */
  unsigned failed : 1;   /* a failure was counted and logged */
  unsigned raw : 1;      /* the bytes are no TLS records: OpenSSL gets them as they come */
  unsigned overflow : 1; /* a record did not fit its buffer's cap */
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

/* ---------------------------------------------------------------------------------------------
 * The server's BIO, under every session: it holds nothing. OpenSSL reads the whole records of
 * the call in progress straight from the socket's buffer and writes its records into a buffer
 * of the connection.
 */

static int conn_bio_create(BIO *b)
{
  BIO_set_init(b, 1);
  return 1;
}

static int conn_bio_read(BIO *b, char *p, int n)
{
  struct rv_tls_conn *tc = BIO_get_data(b);
  BIO_clear_retry_flags(b);
  if (tc->in_len == 0 || n <= 0) {
    BIO_set_retry_read(b); /* more when the socket has it */
    return -1;
  }
  size_t k = (size_t)n < tc->in_len ? (size_t)n : tc->in_len;
  memcpy(p, tc->in, k);
  tc->in += k;
  tc->in_len -= k;
  return (int)k;
}

static int conn_bio_write(BIO *b, const char *p, int n)
{
  struct rv_tls_conn *tc = BIO_get_data(b);
  BIO_clear_retry_flags(b);
  if (n < 0 || tc->sink == NULL || mu_buf_append(tc->sink, p, (size_t)n) != 0) {
    tc->overflow = 1; /* the SSL call fails: the connection closes */
    return -1;
  }
  return n;
}

static long conn_bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
  (void)b;
  (void)num;
  (void)ptr;
  return cmd == BIO_CTRL_FLUSH ? 1 : 0; /* nothing waits here; nothing else applies */
}

/* Returns: the method, or NULL without memory. Ownership: free with BIO_meth_free(). */
static BIO_METHOD *conn_bio_method(void)
{
  BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "musterd connection");
  if (m == NULL)
    return NULL;
  BIO_meth_set_create(m, conn_bio_create);
  BIO_meth_set_read(m, conn_bio_read);
  BIO_meth_set_write(m, conn_bio_write);
  BIO_meth_set_ctrl(m, conn_bio_ctrl);
  return m;
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
  /* no resumption: the session cache kept every TLS 1.2 session for 5 minutes (up to 20,480 of
   * them, ~1 KiB each, for anyone who can connect), and every TLS 1.3 handshake made and sent
   * two tickets while musterd's clients (muster's, python-etcd's urllib3, etcdctl) never
   * resume: every connection makes a full handshake */
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
                               SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_TICKET);
  SSL_CTX_set_num_tickets(ctx, 0);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  /* OpenSSL's record buffers (17 KiB each way) are given back whenever they are empty */
  SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
  /* TLS 1.3: AES-128-GCM first, as etcd's Go server prefers it with AES in hardware: its
   * contexts a session keeps are 0.2 KiB smaller than AES-256-GCM's (and it is faster) */
  SSL_CTX_set_ciphersuites(
      ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256");
  /* the context a session offered by a client is checked against (OpenSSL wants one with
   * client certificates, even though none is ever resumed) */
  SSL_CTX_set_session_id_context(ctx, (const unsigned char *)"musterd", 7);
  rc = load_identity(ctx, cfg, err);
  if (rc == 0 && cfg->client_ca_file != NULL)
    rc = load_client_ca(ctx, cfg->client_ca_file, err);
  BIO_METHOD *m = rc == 0 ? conn_bio_method() : NULL;
  BIO *bio = m != NULL ? BIO_new(m) : NULL;
  if (rc == 0 && bio == NULL) {
    mu_buf_puts(err, "cannot create a TLS context: out of memory");
    BIO_meth_free(m);
    rc = MU_EINVAL;
  }
  if (rc != 0) {
    SSL_CTX_free(ctx);
    return rc;
  }
  struct rv_tls *t = mu_calloc(1, sizeof(*t));
  t->ctx = ctx;
  t->bio_method = m;
  t->bio = bio;
  t->verify_clients = cfg->client_ca_file != NULL;
  *out = t;
  return 0;
}

void rv_tls_free(struct rv_tls *t)
{
  if (t == NULL)
    return;
  SSL_CTX_free(t->ctx);
  BIO_free(t->bio);
  BIO_meth_free(t->bio_method);
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

/* ---------------------------------------------------------------------------------------------
 * Sessions
 */

#define REC_HDR 5                 /* a record's header: type, version, length */
#define REC_MAX (16384 + 2048)    /* the largest fragment a record may carry (RFC 5246 6.2.3) */
#define OUT_MAX ((size_t)1 << 20) /* records owed while reading: a flight, alerts */

/* Returns: the size (header and fragment) of the record at `p`, 0 while its header is not all
 * there, or SIZE_MAX when the bytes are no TLS record (OpenSSL gets them as they are and says
 * what they are: an HTTP request, an SSLv2 hello). */
static size_t record_size(const unsigned char *p, size_t n)
{
  if (n >= 1 && (p[0] < 20 || p[0] > 24)) /* change_cipher_spec .. heartbeat */
    return SIZE_MAX;
  if (n >= 2 && p[1] != 3)
    return SIZE_MAX;
  if (n < REC_HDR)
    return 0;
  size_t len = (size_t)p[3] << 8 | p[4];
  return len > REC_MAX ? SIZE_MAX : REC_HDR + len;
}

struct rv_tls_conn *rv_tls_conn_new(struct rv_tls *t)
{
  struct rv_tls_conn *tc = mu_calloc(1, sizeof(*tc));
  tc->tls = t;
  mu_buf_init(&tc->out, OUT_MAX);
  mu_buf_init(&tc->held, 0); /* capped as the connection's output (io->max) when used */
  return tc;
}

/* The SSL, at the first record, on the server's BIO. */
static void session_start(struct rv_tls_conn *tc)
{
  tc->ssl = SSL_new(tc->tls->ctx);
  if (tc->ssl == NULL || BIO_up_ref(tc->tls->bio) != 1) {
    mu_log(MU_LOG_ERROR, "out of memory creating a TLS session");
    abort();
  }
  SSL_set_bio(tc->ssl, tc->tls->bio, tc->tls->bio); /* takes the reference just made */
  SSL_set_accept_state(tc->ssl);
}

static void part_release(struct rv_tls_conn *tc)
{
  mu_free(tc->part);
  tc->part = NULL;
  tc->part_len = tc->part_cap = 0;
}

void rv_tls_conn_free(struct rv_tls_conn *tc)
{
  if (tc == NULL)
    return;
  SSL_free(tc->ssl);
  part_release(tc);
  mu_buf_release(&tc->out);
  mu_buf_release(&tc->held);
  mu_free(tc);
}

void rv_tls_conn_trim(struct rv_tls_conn *tc)
{
  if (tc == NULL)
    return;
  if (tc->out.len == 0)
    mu_buf_release(&tc->out);
  if (tc->held.len == 0)
    mu_buf_release(&tc->held);
}

size_t rv_tls_conn_buffered(const struct rv_tls_conn *tc)
{
  return tc == NULL ? 0 : tc->part_cap + tc->out.cap + tc->held.cap;
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

enum { FEED_STOP = 2 }; /* `cb` closed the connection */

/* Points the server's BIO at `tc` and its writes at `sink`, before each SSL call: calls nest
 * (`cb` may flush this connection's answer, or let a write release another's held answer),
 * and each call leaves the BIO pointing where it last used it. */
static void point_bio(struct rv_tls_conn *tc, struct mu_buf *sink)
{
  BIO_set_data(tc->tls->bio, tc);
  tc->sink = sink;
}

/* Hands OpenSSL whole records (or, once `raw`, any bytes): the handshake, then the plaintext to
 * `cb`. What OpenSSL answers meanwhile waits in `out`. Returns: as rv_tls_conn_read(), or
 * FEED_STOP. */
static int feed(struct rv_tls_conn *tc, const char *p, size_t n, rv_tls_plain_cb *cb, void *data)
{
  char plain[16384];
  int rc = 0;
  if (tc->ssl == NULL)
    session_start(tc);
  tc->in = p;
  tc->in_len = n;
  if (!tc->ready) {
    point_bio(tc, &tc->out);
    int r = SSL_do_handshake(tc->ssl);
    if (r != 1) {
      int e = SSL_get_error(tc->ssl, r);
      rc = e == SSL_ERROR_WANT_READ ? 0 : fail(tc, "handshake");
      goto out;
    }
    tc->ready = 1;
    tc->tls->stats.handshakes++;
  }
  for (;;) {
    point_bio(tc, &tc->out);
    int k = SSL_read(tc->ssl, plain, (int)sizeof(plain));
    if (k > 0) {
      if (cb(data, plain, (size_t)k) != 0) {
        rc = FEED_STOP; /* the connection closed: the rest is dropped */
        goto out;
      }
      continue;
    }
    int e = SSL_get_error(tc->ssl, k);
    if (e == SSL_ERROR_WANT_READ)
      break;
    rc = e == SSL_ERROR_ZERO_RETURN ? RV_TLS_EOF : fail(tc, "read");
    break;
  }
out:
  tc->in = NULL;
  tc->in_len = 0;
  tc->sink = NULL;
  return rc;
}

/* Returns: how many bytes at `p` are whole records; sets *raw when the first is no record. */
static size_t whole_records(const char *p, size_t n, int *raw)
{
  size_t off = 0;
  for (;;) {
    size_t r = record_size((const unsigned char *)p + off, n - off);
    if (r == SIZE_MAX && off == 0)
      *raw = 1;
    if (r == 0 || r == SIZE_MAX || r > n - off)
      return off;
    off += r;
  }
}

/* Moves to `part` what `p` has of the record `part` holds the start of (the header's 5 bytes
 * first, then the fragment). Returns: the bytes taken; sets *whole once the record is all there,
 * *raw when the bytes turn out to be no record. */
static size_t part_fill(struct rv_tls_conn *tc, const char *p, size_t n, int *whole, int *raw)
{
  size_t size = record_size((const unsigned char *)tc->part, tc->part_len);
  if (size == SIZE_MAX) {
    *raw = 1;
    return 0;
  }
  size_t want = (size == 0 ? REC_HDR : size) - tc->part_len;
  size_t k = n < want ? n : want;
  if (tc->part_cap < tc->part_len + k) { /* what came, not what the header announces */
    tc->part_cap = tc->part_len + (uint32_t)k;
    tc->part = mu_realloc(tc->part, tc->part_cap);
  }
  memcpy(tc->part + tc->part_len, p, k);
  tc->part_len += (uint32_t)k;
  size = record_size((const unsigned char *)tc->part, tc->part_len);
  *raw = size == SIZE_MAX;
  *whole = size != 0 && size == tc->part_len;
  return k;
}

int rv_tls_conn_read(struct rv_tls_conn *tc, const char *cipher, size_t len, rv_tls_plain_cb *cb,
                     void *data)
{
  int rc = 0;
  if (tc->failed)
    return MU_EPROTO;
  while (len > 0 && rc == 0) {
    int raw = tc->raw, whole = 0;
    if (!raw && tc->part_len > 0) { /* the end of a record an earlier read began */
      size_t k = part_fill(tc, cipher, len, &whole, &raw);
      cipher += k;
      len -= k;
    }
    if (raw || whole) { /* what `part` holds goes first */
      tc->raw = raw;
      if (tc->part_len > 0)
        rc = feed(tc, tc->part, tc->part_len, cb, data);
      part_release(tc);
      if (raw && rc == 0 && len > 0)
        rc = feed(tc, cipher, len, cb, data);
      if (raw)
        break;
      continue;
    }
    if (tc->part_len > 0)
      continue; /* the record's header was all `part` lacked: now its fragment */
    size_t n = whole_records(cipher, len, &raw);
    if (raw) {
      tc->raw = 1;
      n = len;
    }
    if (n > 0) {
      rc = feed(tc, cipher, n, cb, data);
      cipher += n;
      len -= n;
      continue;
    }
    size_t k = part_fill(tc, cipher, len, &whole, &raw); /* the start of a record */
    cipher += k;
    len -= k;
  }
  return rc == FEED_STOP ? 0 : rc;
}

/* Moves the records owed to the peer into `io`, after what it holds. Returns: 0 or MU_E2BIG. */
static int take_owed(struct rv_tls_conn *tc, struct mu_buf *io)
{
  if (tc->out.len == 0)
    return 0;
  if (io->len == 0) { /* no copy: the buffers change places */
    struct mu_buf b = *io;
    *io = tc->out;
    io->max = b.max;
    tc->out = b;
    tc->out.max = OUT_MAX;
    return 0;
  }
  int rc = mu_buf_append(io, tc->out.data, tc->out.len) != 0 ? MU_E2BIG : 0;
  mu_buf_clear(&tc->out);
  return rc;
}

static int write_plain(struct rv_tls_conn *tc, struct mu_buf *io, const char *p, size_t len)
{
  while (len > 0) {
    int chunk = len > 1u << 20 ? 1 << 20 : (int)len;
    point_bio(tc, io);
    int n = SSL_write(tc->ssl, p, chunk);
    if (n <= 0)
      return tc->overflow ? MU_E2BIG : fail(tc, "write");
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

int rv_tls_conn_encrypt(struct rv_tls_conn *tc, struct mu_buf *io)
{
  int rc = 0;
  if (tc->failed) {
    mu_buf_clear(io); /* a failed handshake may still owe the client its alert */
    return take_owed(tc, io);
  }
  if (!tc->ready) {
    tc->held.max = io->max;
    if (io->len > 0 && mu_buf_append(&tc->held, io->data, io->len) != 0)
      return MU_E2BIG;
    mu_buf_clear(io);
    return take_owed(tc, io);
  }
  if (io->len == 0 && tc->held.len == 0)
    return take_owed(tc, io);
  /* the plaintext moves aside; the records take its place, after those owed */
  struct mu_buf plain = *io;
  *io = tc->out;
  io->max = plain.max;
  tc->out = plain;
  if (tc->held.len > 0) {
    rc = write_plain(tc, io, tc->held.data, tc->held.len);
    mu_buf_release(&tc->held);
  }
  if (rc == 0)
    rc = write_plain(tc, io, tc->out.data, tc->out.len);
  tc->sink = NULL;
  mu_buf_clear(&tc->out); /* kept for the next answer (rv_tls_conn_trim gives it back) */
  tc->out.max = OUT_MAX;
  return rc;
}
