/* TLS for musterd's listener: OpenSSL driven by the libuv stream, through a BIO that holds nothing.
 *
 * libuv and llhttp have no TLS, and etcd's clients (torchrun's rdzv_conf protocol=https with
 * cacert/cert/key, etcdctl --ca-file/--cert-file/--key-file, python-etcd) speak it. Nothing
 * here blocks or touches a socket: conn.c hands the ciphertext it read to rv_tls_conn_read()
 * (which calls back with the plaintext), and before each write turns the plaintext it queued
 * into ciphertext with rv_tls_conn_encrypt().
 *
 *   struct rv_tls *t;                     one per server: the SSL_CTX (certificate, key, CA)
 *   rv_tls_new(&cfg, &t, &err);                         (the security layer, from the options)
 *   rv_server_set_tls(srv, t);                          (the server owns it from then on)
 *   struct rv_tls_conn *tc = rv_tls_conn_new(t);       one per accepted connection
 *   rc = rv_tls_conn_read(tc, cipher, n, on_plain, c); from the read callback
 *   rc = rv_tls_conn_encrypt(tc, &c->out);             before writing c->out
 *   rv_tls_conn_free(tc); rv_tls_free(t);
 */
#ifndef MUSTERD_SERVER_TLS_H
#define MUSTERD_SERVER_TLS_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

struct rv_tls;
struct rv_tls_conn;

struct rv_tls_config {
  const char *cert_file;      /* PEM certificate chain of the server (required) */
  const char *key_file;       /* PEM private key of that certificate (required) */
  const char *client_ca_file; /* PEM CA bundle: when set, clients must present a certificate
                                 signed by it (else the handshake fails); NULL = no client certs */
};

/* Counters for /metrics (never anything secret). */
struct rv_tls_stats {
  uint64_t handshakes;         /* completed */
  uint64_t handshake_failures; /* bad certificate, no certificate, not TLS at all, ... */
};

/* Loads the certificate, key and optional client CA. On failure appends a message naming the
 * file and the fix to `err`.
 * Returns: 0 with *out set, or MU_EINVAL (bad/missing file, key not matching the certificate).
 * Ownership: the strings are read at once, not kept; free *out with rv_tls_free(). */
int rv_tls_new(const struct rv_tls_config *cfg, struct rv_tls **out, struct mu_buf *err);

/* Returns: 1 when clients must present a certificate (--tls-client-ca), else 0. */
int rv_tls_verifies_clients(const struct rv_tls *t);

/* Frees the context. Accepts NULL. Connections made from it must be freed first. */
void rv_tls_free(struct rv_tls *t);

/* Returns: the counters (borrowed, live as long as `t`). */
const struct rv_tls_stats *rv_tls_stats(const struct rv_tls *t);

/* A server-side TLS session for one connection. OpenSSL's part of it (~14 KiB) is made when the
 * first whole record arrives; until then it holds the start of that record at most.
 * Returns: the session (never NULL; aborts on OOM). Ownership: free with rv_tls_conn_free();
 * `t` must outlive it. */
struct rv_tls_conn *rv_tls_conn_new(struct rv_tls *t);

/* Frees the session. Accepts NULL. */
void rv_tls_conn_free(struct rv_tls_conn *tc);

/* Gives back the buffer kept for the next answer (as the connection gives back its own: when it
 * is anonymous, parked, or the buffer grew large). Accepts NULL. */
void rv_tls_conn_trim(struct rv_tls_conn *tc);

/* Returns: the bytes the session's buffers hold (a record not yet whole, records owed, plaintext
 * held back, the kept buffer), for the memory budget; 0 for NULL. OpenSSL's own state is not
 * counted. */
size_t rv_tls_conn_buffered(const struct rv_tls_conn *tc);

/* Called with each piece of decrypted application data, in order. Return nonzero to stop
 * (the connection was closed); remaining ciphertext is dropped. */
typedef int rv_tls_plain_cb(void *data, const char *plain, size_t len);

enum {
  RV_TLS_EOF = 1, /* the peer sent close_notify: treat as end of input */
};

/* Feeds `len` bytes of ciphertext read from the socket: advances the handshake and calls `cb`
 * for every piece of plaintext. OpenSSL gets whole records only: the start of one whose end has
 * not come is kept here (what came of it, at most a record: 16 KiB + 2 KiB). Handshake records
 * to send back are kept until the next rv_tls_conn_encrypt().
 * Returns: 0, RV_TLS_EOF, or MU_EPROTO for a failed handshake or a broken record (close the
 * connection; the reason is logged at INFO level and counted in the stats). */
int rv_tls_conn_read(struct rv_tls_conn *tc, const char *cipher, size_t len, rv_tls_plain_cb *cb,
                     void *data);

/* Turns the plaintext in `io` into what must go on the wire: `io` is replaced by every
 * pending TLS record (handshake messages first, then the encrypted data); the plaintext's buffer
 * is kept for the next answer, so `io` may come back with another buffer (same max). Before the
 * handshake completes, plaintext is held back (at most io->max bytes) and sent once it does.
 * Returns: 0, MU_E2BIG when `io` cannot hold the records (close the connection), or
 * MU_EPROTO. */
int rv_tls_conn_encrypt(struct rv_tls_conn *tc, struct mu_buf *io);

/* Returns: 1 once the handshake has completed, else 0. */
int rv_tls_conn_ready(const struct rv_tls_conn *tc);

#endif
