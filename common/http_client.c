/* Blocking HTTP/1.1 client: non-blocking socket + poll() for the deadlines, llhttp for the
 * response. Kept small on purpose: one connection, one request at a time. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <llhttp.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "muster/errno.h"

#include "alloc.h"
#include "buf.h"
#include "fsutil.h"
#include "http_client.h"
#include "keepalive.h"
#include "opts.h"

struct mu_http_client {
  char *host;
  int port;
  int fd;              /* -1 when not connected */
  int reusable;        /* the last response allowed keep-alive */
  int connect_timeout; /* ms */
  int cancel_fd;
  char local_addr[INET6_ADDRSTRLEN];
  char errmsg[512];
  SSL_CTX *tls;   /* https: set by mu_http_client_set_tls() */
  SSL *ssl;       /* the TLS session of the current connection */
  int tls_failed; /* set_tls or the token file failed: every request fails with tls_err */
  char tls_err[512];
  char *auth_header; /* "Authorization: Bearer ...\r\n" or NULL */
  char *headers;     /* extra header lines or NULL */
};

/* The parser's view of one response. */
struct parse_state {
  struct mu_http_response *resp;
  char field[64];
  size_t field_len;
  int in_ctype; /* 0 reading a field name, 1 another header's value, 2 Content-Type's value */
  int is_head;  /* the request was HEAD: no body follows */
  size_t ctype_len;
  int done;
  int too_big;
  int stopped; /* on_data asked to end the request */
};

static long long now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int mu_http_endpoint_parse(const char *s, size_t n, char *host, size_t hostcap, int *port,
                           int *https)
{
  char buf[300];
  if (n == 0 || n >= sizeof(buf))
    return MU_EINVAL;
  memcpy(buf, s, n);
  buf[n] = '\0';
  char *p = buf;
  if (strncmp(p, "http://", 7) == 0) {
    p += 7;
  } else if (strncmp(p, "https://", 8) == 0) {
    p += 8;
    *https = 1;
  }
  size_t len = strlen(p);
  if (len > 0 && p[len - 1] == '/')
    p[--len] = '\0';
  char *colon = NULL;
  if (*p == '[') {
    char *close = strchr(p, ']');
    if (close == NULL || close[1] != ':')
      return MU_EINVAL;
    *close = '\0';
    p++;
    colon = close + 1;
  } else {
    colon = strrchr(p, ':');
    if (colon == NULL)
      return MU_EINVAL;
    *colon = '\0';
  }
  long v = 0;
  if (*p == '\0' || strchr(p, '/') != NULL || strlen(p) >= hostcap ||
      mu_parse_long(colon + 1, 1, 65535, &v) != 0)
    return MU_EINVAL;
  memcpy(host, p, strlen(p) + 1);
  *port = (int)v;
  return 0;
}

struct mu_http_client *mu_http_client_new(const char *host, int port)
{
  struct mu_http_client *c = mu_calloc(1, sizeof(*c));
  c->host = mu_strdup(host);
  c->port = port;
  c->fd = -1;
  c->connect_timeout = 3000;
  c->cancel_fd = -1;
  return c;
}

static void drop_conn(struct mu_http_client *c)
{
  if (c->ssl != NULL) {
    SSL_free(c->ssl);
    c->ssl = NULL;
  }
  if (c->fd >= 0)
    close(c->fd);
  c->fd = -1;
  c->reusable = 0;
}

void mu_http_client_free(struct mu_http_client *c)
{
  if (c == NULL)
    return;
  drop_conn(c);
  SSL_CTX_free(c->tls);
  if (c->auth_header != NULL) {
    OPENSSL_cleanse(c->auth_header, strlen(c->auth_header));
    mu_free(c->auth_header);
  }
  mu_free(c->headers);
  mu_free(c->host);
  mu_free(c);
}

static const char *ssl_reason(const char *fallback)
{
  unsigned long e = ERR_peek_last_error();
  const char *r = e != 0 ? ERR_reason_error_string(e) : NULL;
  return r != NULL ? r : fallback;
}

int mu_http_client_set_tls(struct mu_http_client *c, const char *ca_file, const char *cert_file,
                           const char *key_file)
{
  SSL_CTX *ctx = NULL;
  int rc = MU_EINVAL;
  drop_conn(c);
  SSL_CTX_free(c->tls);
  c->tls = NULL;
  c->tls_failed = 1;
  ERR_clear_error();
  if ((cert_file == NULL) != (key_file == NULL)) {
    snprintf(c->tls_err, sizeof(c->tls_err),
             "a TLS client certificate needs both its certificate and its key file");
    goto out;
  }
  ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == NULL) {
    snprintf(c->tls_err, sizeof(c->tls_err), "cannot create a TLS context");
    goto out;
  }
  const char *files[3] = {ca_file, cert_file, key_file};
  const char *what[3] = {"CA file", "client certificate", "client key"};
  for (int i = 0; i < 3; i++) {
    if (files[i] != NULL && access(files[i], R_OK) != 0) {
      snprintf(c->tls_err, sizeof(c->tls_err), "cannot read the TLS %s '%s': %s", what[i], files[i],
               strerror(errno));
      goto out;
    }
  }
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
  if (ca_file != NULL ? SSL_CTX_load_verify_locations(ctx, ca_file, NULL) != 1
                      : SSL_CTX_set_default_verify_paths(ctx) != 1) {
    snprintf(c->tls_err, sizeof(c->tls_err), "cannot load the CA file '%s': %s",
             ca_file ? ca_file : "(system default)", ssl_reason("unreadable"));
    goto out;
  }
  if (cert_file != NULL) {
    if (SSL_CTX_use_certificate_chain_file(ctx, cert_file) != 1) {
      snprintf(c->tls_err, sizeof(c->tls_err), "cannot load the client certificate '%s': %s",
               cert_file, ssl_reason("unreadable"));
      goto out;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, key_file, SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(ctx) != 1) {
      snprintf(c->tls_err, sizeof(c->tls_err), "cannot use the client key '%s' with '%s': %s",
               key_file, cert_file, ssl_reason("unreadable or not matching"));
      goto out;
    }
  }
  c->tls = ctx;
  ctx = NULL;
  c->tls_failed = 0;
  c->tls_err[0] = '\0';
  rc = 0;
out:
  ERR_clear_error();
  SSL_CTX_free(ctx);
  if (rc != 0)
    snprintf(c->errmsg, sizeof(c->errmsg), "%s", c->tls_err);
  return rc;
}

static const char *env_file(const char *name)
{
  const char *v = getenv(name);
  return v != NULL && v[0] != '\0' ? v : NULL;
}

int mu_http_client_tls_from_env(struct mu_http_client *c, int https)
{
  const char *ca = env_file("MUSTER_RDZV_CACERT"), *cert = env_file("MUSTER_RDZV_CERT");
  const char *key = env_file("MUSTER_RDZV_KEY");
  if (!https && ca == NULL && cert == NULL && key == NULL)
    return 0;
  return mu_http_client_set_tls(c, ca, cert, key);
}

void mu_http_client_set_bearer(struct mu_http_client *c, const char *token)
{
  if (c->auth_header != NULL) {
    OPENSSL_cleanse(c->auth_header, strlen(c->auth_header));
    mu_free(c->auth_header);
    c->auth_header = NULL;
  }
  if (token != NULL && token[0] != '\0')
    c->auth_header = mu_asprintf("Authorization: Bearer %s\r\n", token);
}

int mu_http_client_bearer_from_env(struct mu_http_client *c)
{
  const char *tok = env_file("MUSTER_RDZV_TOKEN"), *path = env_file("MUSTER_RDZV_TOKEN_FILE");
  struct mu_buf b;
  int rc;
  if (tok != NULL || path == NULL) {
    mu_http_client_set_bearer(c, tok);
    return 0;
  }
  mu_buf_init(&b, 4096);
  rc = mu_read_file(path, 4096, &b);
  if (rc == 0 && b.data == NULL)
    rc = MU_EINVAL;
  if (rc == 0) {
    size_t n = 0;
    while (n < b.len && b.data[n] != '\n' && b.data[n] != '\r')
      n++;
    b.data[n] = '\0';
    if (n == 0)
      rc = MU_EINVAL;
  }
  if (rc == 0) {
    mu_http_client_set_bearer(c, b.data);
  } else {
    c->tls_failed = 1;
    snprintf(c->tls_err, sizeof(c->tls_err),
             "cannot read the rendezvous token from MUSTER_RDZV_TOKEN_FILE '%s': %s", path,
             rc == MU_EINVAL ? "the file is empty" : mu_strerror(rc));
    snprintf(c->errmsg, sizeof(c->errmsg), "%s", c->tls_err);
  }
  if (b.data != NULL)
    OPENSSL_cleanse(b.data, b.cap);
  mu_buf_release(&b);
  return rc;
}

void mu_http_client_set_authorization(struct mu_http_client *c, const char *value)
{
  mu_http_client_set_bearer(c, NULL);
  if (value != NULL && value[0] != '\0')
    c->auth_header = mu_asprintf("Authorization: %s\r\n", value);
}

void mu_http_client_set_headers(struct mu_http_client *c, const char *lines)
{
  mu_free(c->headers);
  c->headers = lines != NULL ? mu_strdup(lines) : NULL;
}

void mu_http_client_set_connect_timeout(struct mu_http_client *c, int ms)
{
  c->connect_timeout = ms > 0 ? ms : 1;
}

void mu_http_client_set_cancel_fd(struct mu_http_client *c, int fd)
{
  c->cancel_fd = fd;
}

int mu_http_client_local_addr(const struct mu_http_client *c, char *out, size_t n)
{
  if (c->local_addr[0] == '\0')
    return MU_ENOENT;
  snprintf(out, n, "%s", c->local_addr);
  return 0;
}

const char *mu_http_client_errmsg(const struct mu_http_client *c)
{
  return c->errmsg;
}

void mu_http_response_init(struct mu_http_response *r, size_t max_body)
{
  r->status = 0;
  mu_buf_init(&r->body, max_body);
  r->content_type[0] = '\0';
  r->on_data = NULL;
  r->on_data_arg = NULL;
}

void mu_http_response_release(struct mu_http_response *r)
{
  if (r == NULL)
    return;
  mu_buf_release(&r->body);
  r->status = 0;
  r->content_type[0] = '\0';
}

/* Waits until fd is ready for `events` or the deadline passes.
 * Returns: 0 ready, MU_ETIMEDOUT, MU_ECANCELED, or -errno. */
static int wait_fd(struct mu_http_client *c, int fd, short events, long long deadline)
{
  for (;;) {
    long long left = deadline - now_ms();
    if (left <= 0)
      return MU_ETIMEDOUT;
    struct pollfd p[2] = {{fd, events, 0}, {c->cancel_fd, POLLIN, 0}};
    int np = c->cancel_fd >= 0 ? 2 : 1;
    int n = poll(p, (nfds_t)np, left > 1000000 ? 1000000 : (int)left);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    if (np == 2 && (p[1].revents & (POLLIN | POLLHUP | POLLERR)))
      return MU_ECANCELED;
    if (n > 0 && p[0].revents != 0)
      return 0;
  }
}

/* Waits for the answer to become readable (or, under TLS, for what OpenSSL asked for).
 * Returns: 0, or MU_ETIMEDOUT / MU_ECANCELED / -errno with errmsg set. */
static int wait_answer(struct mu_http_client *c, short events, long long deadline)
{
  int rc = wait_fd(c, c->fd, events, deadline);
  if (rc != 0)
    snprintf(c->errmsg, sizeof(c->errmsg), "%s from %s:%d",
             rc == MU_ETIMEDOUT ? "timed out waiting for an answer" : "canceled", c->host, c->port);
  return rc;
}

/* Waits for what OpenSSL asked for after a call that returned `r`. Returns: 0 to retry, or
 * an error (MU_ECONN with errmsg, MU_ETIMEDOUT, MU_ECANCELED). */
static int ssl_wait(struct mu_http_client *c, int r, const char *what, long long deadline)
{
  int e = SSL_get_error(c->ssl, r);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
    int w = wait_fd(c, c->fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline);
    if (w != 0)
      snprintf(c->errmsg, sizeof(c->errmsg), "%s %s:%d: %s", what, c->host, c->port,
               w == MU_ETIMEDOUT ? "timed out" : "canceled");
    return w;
  }
  if (e == SSL_ERROR_ZERO_RETURN) {
    snprintf(c->errmsg, sizeof(c->errmsg), "%s %s:%d: the TLS session was closed", what, c->host,
             c->port);
    return MU_ECONN;
  }
  const char *why = ssl_reason(e == SSL_ERROR_SYSCALL ? "connection reset" : "TLS error");
  long v = SSL_get_verify_result(c->ssl);
  if (v != X509_V_OK)
    why = X509_verify_cert_error_string(v);
  snprintf(c->errmsg, sizeof(c->errmsg), "%s %s:%d: %s", what, c->host, c->port, why);
  ERR_clear_error();
  return MU_ECONN;
}

static int tls_handshake(struct mu_http_client *c, long long deadline)
{
  c->ssl = SSL_new(c->tls);
  if (c->ssl == NULL || SSL_set_fd(c->ssl, c->fd) != 1) {
    snprintf(c->errmsg, sizeof(c->errmsg), "cannot start TLS with %s:%d", c->host, c->port);
    return MU_ECONN;
  }
  /* check the server's name or IP address against its certificate */
  X509_VERIFY_PARAM *vp = SSL_get0_param(c->ssl);
  if (X509_VERIFY_PARAM_set1_ip_asc(vp, c->host) != 1) {
    X509_VERIFY_PARAM_set1_host(vp, c->host, 0);
    SSL_set_tlsext_host_name(c->ssl, c->host);
  }
  for (;;) {
    int r = SSL_connect(c->ssl);
    if (r == 1)
      return 0;
    int w = ssl_wait(c, r, "TLS handshake with", deadline);
    if (w != 0)
      return w;
  }
}

/* The addresses of c's host. Returns: 0, or MU_ECONN with the message in c->errmsg. */
static int resolve(struct mu_http_client *c, struct addrinfo **res)
{
  struct addrinfo hints;
  char port[16];
  memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  snprintf(port, sizeof(port), "%d", c->port);
  int g = getaddrinfo(c->host, port, &hints, res);
  if (g == 0)
    return 0;
  /* A bare root filesystem (a chroot, an image FROM scratch run by hand) has neither file that
   * glibc resolves names from: say so, it is the whole story. */
  int bare = access("/etc/hosts", F_OK) != 0 && access("/etc/resolv.conf", F_OK) != 0;
  snprintf(c->errmsg, sizeof(c->errmsg), "cannot resolve '%s': %s%s", c->host, gai_strerror(g),
           bare ? " (this root filesystem has no /etc/hosts and no /etc/resolv.conf: a "
                  "container runtime provides both; in a bare chroot bind-mount them, or give an "
                  "IP address)"
                : "");
  return MU_ECONN;
}

/* Connects fd (non-blocking) to ai by the deadline. Returns: 0, an errno value, or
 * MU_ECANCELED (the cancel fd). */
static int connect_fd(struct mu_http_client *c, int fd, const struct addrinfo *ai,
                      long long deadline)
{
  int err = 0;
  if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
    return 0;
  if (errno != EINPROGRESS)
    return errno;
  int w = wait_fd(c, fd, POLLOUT, deadline);
  if (w == MU_ECANCELED)
    return w;
  if (w != 0)
    return ETIMEDOUT;
  socklen_t sl = sizeof(err);
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &sl) != 0)
    err = errno;
  return err;
}

/* fd is connected: it becomes c's connection (no Nagle, its local address noted), over TLS when
 * c has it. Returns: 0, or the handshake's error (the connection dropped). */
static int connected(struct mu_http_client *c, int fd, long long deadline)
{
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  mu_net_keepalive(fd); /* a peer cut off without a word is lost in seconds */
  struct sockaddr_storage ss;
  socklen_t sl = sizeof(ss);
  if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
    if (ss.ss_family == AF_INET)
      inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, c->local_addr,
                sizeof(c->local_addr));
    else if (ss.ss_family == AF_INET6)
      inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, c->local_addr,
                sizeof(c->local_addr));
  }
  c->fd = fd;
  int rc = c->tls != NULL ? tls_handshake(c, deadline) : 0;
  if (rc != 0)
    drop_conn(c);
  return rc;
}

static int connect_to(struct mu_http_client *c, long long deadline)
{
  struct addrinfo *res = NULL;
  int rc = MU_ECONN;
  if (c->tls_failed) {
    snprintf(c->errmsg, sizeof(c->errmsg), "%s", c->tls_err);
    return MU_ECONN;
  }
  if (resolve(c, &res) != 0)
    return MU_ECONN;
  long long cdeadline = now_ms() + c->connect_timeout;
  if (cdeadline > deadline)
    cdeadline = deadline;
  for (struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0)
      continue;
    int err = connect_fd(c, fd, ai, cdeadline);
    if (err == 0) {
      rc = connected(c, fd, deadline);
      break;
    }
    close(fd);
    if (err == MU_ECANCELED) {
      snprintf(c->errmsg, sizeof(c->errmsg), "canceled");
      rc = MU_ECANCELED;
      break;
    }
    snprintf(c->errmsg, sizeof(c->errmsg), "cannot connect to %s:%d: %s", c->host, c->port,
             strerror(err));
    rc = err == ETIMEDOUT ? MU_ETIMEDOUT : MU_ECONN;
  }
  freeaddrinfo(res);
  return rc;
}

static int send_all(struct mu_http_client *c, const char *p, size_t n, long long deadline)
{
  while (c->ssl != NULL && n > 0) {
    int w = SSL_write(c->ssl, p, n > (1u << 30) ? 1 << 30 : (int)n);
    if (w <= 0) {
      int rc = ssl_wait(c, w, "send to", deadline);
      if (rc != 0)
        return rc;
      continue;
    }
    p += w;
    n -= (size_t)w;
  }
  while (n > 0) {
    ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        int rc = wait_fd(c, c->fd, POLLOUT, deadline);
        if (rc != 0)
          return rc;
        continue;
      }
      snprintf(c->errmsg, sizeof(c->errmsg), "send to %s:%d: %s", c->host, c->port,
               strerror(errno));
      return MU_ECONN;
    }
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Llhttp callbacks
 */

static int on_header_field(llhttp_t *p, const char *at, size_t n)
{
  struct parse_state *st = p->data;
  if (st->in_ctype != 0) { /* a value ended: a new field starts */
    st->field_len = 0;
    st->in_ctype = 0;
  }
  size_t room = sizeof(st->field) - 1 - st->field_len;
  if (n > room)
    n = room;
  memcpy(st->field + st->field_len, at, n);
  st->field_len += n;
  st->field[st->field_len] = '\0';
  return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t n)
{
  struct parse_state *st = p->data;
  if (st->in_ctype == 0) {
    st->in_ctype = strcasecmp(st->field, "content-type") == 0 ? 2 : 1;
    if (st->in_ctype == 2)
      st->ctype_len = 0;
  }
  if (st->in_ctype == 2) {
    char *ct = st->resp->content_type;
    size_t room = sizeof(st->resp->content_type) - 1 - st->ctype_len;
    if (n > room)
      n = room;
    memcpy(ct + st->ctype_len, at, n);
    st->ctype_len += n;
    ct[st->ctype_len] = '\0';
  }
  return 0;
}

static int on_headers_complete(llhttp_t *p)
{
  struct parse_state *st = p->data;
  st->resp->status = llhttp_get_status_code(p);
  return st->is_head ? 1 : 0;
}

static int on_body(llhttp_t *p, const char *at, size_t n)
{
  struct parse_state *st = p->data;
  if (st->resp->on_data != NULL) {
    if (st->resp->on_data(st->resp->on_data_arg, at, n) != 0) {
      st->stopped = 1;
      return -1;
    }
    return 0;
  }
  if (mu_buf_append(&st->resp->body, at, n) != 0) {
    st->too_big = 1;
    return -1;
  }
  return 0;
}

static int on_message_complete(llhttp_t *p)
{
  struct parse_state *st = p->data;
  st->done = 1;
  return HPE_PAUSED;
}

/* Reads what the connection has (waiting for it by the deadline) into buf. Returns: 0 with *r
 * the bytes read (0: the peer closed), or an error with the message in c->errmsg; *no_reply is
 * set when it is a connection that failed before the first byte of the answer (got == 0). */
static int recv_some(struct mu_http_client *c, char *buf, size_t n, long long deadline, size_t got,
                     int *no_reply, ssize_t *r)
{
  for (;;) {
    int e = 0, rc;
    if (c->ssl != NULL) {
      ERR_clear_error();
      int k = SSL_read(c->ssl, buf, (int)n);
      *r = k > 0 ? k : 0;
      e = k > 0 ? SSL_ERROR_NONE : SSL_get_error(c->ssl, k);
      if (e == SSL_ERROR_NONE || e == SSL_ERROR_ZERO_RETURN ||
          (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0))
        return 0; /* data; or close_notify, or the peer just closed */
      if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
        *no_reply = got == 0;
        ssl_wait(c, k, "receive from", deadline);
        return MU_ECONN;
      }
      rc = wait_answer(c, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline);
    } else {
      *r = recv(c->fd, buf, n, 0);
      if (*r >= 0)
        return 0;
      if (errno == EINTR)
        continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        *no_reply = got == 0;
        snprintf(c->errmsg, sizeof(c->errmsg), "receive from %s:%d: %s", c->host, c->port,
                 strerror(errno));
        return MU_ECONN;
      }
      rc = wait_answer(c, POLLIN, deadline);
    }
    if (rc != 0)
      return rc;
  }
}

/* The parser of one answer, its callbacks writing into st (which points at resp). */
static void parser_init(llhttp_t *parser, llhttp_settings_t *settings, struct parse_state *st,
                        struct mu_http_response *resp, const char *method)
{
  llhttp_settings_init(settings);
  settings->on_header_field = on_header_field;
  settings->on_header_value = on_header_value;
  settings->on_headers_complete = on_headers_complete;
  settings->on_body = on_body;
  settings->on_message_complete = on_message_complete;
  llhttp_init(parser, HTTP_RESPONSE, settings);
  memset(st, 0, sizeof(*st));
  st->resp = resp;
  st->is_head = strcmp(method, "HEAD") == 0;
  parser->data = st;
}

/* The peer closed: the answer is whole (no length: it ended with the connection), or it was cut.
 * Returns: 0, or MU_ECONN with the message in c->errmsg. */
static int closed_by_peer(struct mu_http_client *c, llhttp_t *parser, struct parse_state *st,
                          size_t got, int *no_reply)
{
  if (got == 0) {
    *no_reply = 1;
    snprintf(c->errmsg, sizeof(c->errmsg), "%s:%d closed the connection without an answer", c->host,
             c->port);
    return MU_ECONN;
  }
  if (llhttp_finish(parser) == HPE_OK && st->done)
    return 0;
  snprintf(c->errmsg, sizeof(c->errmsg), "%s:%d closed the connection mid-answer", c->host,
           c->port);
  return MU_ECONN;
}

/* One attempt on the current (or a new) connection. *no_reply is set when the connection
 * closed before any response byte, which makes a retry safe on a reused socket. */
static int attempt(struct mu_http_client *c, const char *req, size_t req_len, long long deadline,
                   struct mu_http_response *resp, const char *method, int *no_reply)
{
  int rc = 0;
  *no_reply = 0;
  if (c->fd < 0) {
    rc = connect_to(c, deadline);
    if (rc != 0)
      return rc;
  }
  rc = send_all(c, req, req_len, deadline);
  if (rc != 0) {
    *no_reply = 1;
    return rc;
  }
  llhttp_settings_t settings;
  llhttp_t parser;
  struct parse_state st;
  parser_init(&parser, &settings, &st, resp, method);
  size_t got = 0;
  char buf[16384];
  while (!st.done) {
    ssize_t r = 0;
    rc = recv_some(c, buf, sizeof(buf), deadline, got, no_reply, &r);
    if (rc != 0)
      return rc;
    if (r == 0) {
      rc = closed_by_peer(c, &parser, &st, got, no_reply);
      if (rc != 0)
        return rc;
      break;
    }
    got += (size_t)r;
    llhttp_errno_t e = llhttp_execute(&parser, buf, (size_t)r);
    if (e == HPE_PAUSED && st.done)
      break;
    if (st.stopped) {
      c->reusable = 0;
      return 0;
    }
    if (e != HPE_OK && st.too_big) {
      snprintf(c->errmsg, sizeof(c->errmsg), "answer from %s:%d is over %zu bytes", c->host,
               c->port, resp->body.max);
      return MU_E2BIG;
    }
    if (e != HPE_OK) {
      snprintf(c->errmsg, sizeof(c->errmsg), "%s:%d did not answer HTTP: %s", c->host, c->port,
               llhttp_errno_name(e));
      return MU_EPROTO;
    }
  }
  c->reusable = llhttp_should_keep_alive(&parser);
  return 0;
}

int mu_http_request(struct mu_http_client *c, const char *method, const char *path,
                    const char *content_type, const void *body, size_t len, int timeout_ms,
                    struct mu_http_response *resp)
{
  if (c == NULL || method == NULL || path == NULL || path[0] != '/' || resp == NULL ||
      (body == NULL && len > 0))
    return MU_EINVAL;
  struct mu_buf req = MU_BUF_INIT(64 * 1024 + len);
  int v6 = strchr(c->host, ':') != NULL; /* an IPv6 literal goes in brackets */
  int rc =
      mu_buf_printf(&req,
                    "%s %s HTTP/1.1\r\nHost: %s%s%s:%d\r\nUser-Agent: muster/%s\r\n"
                    "Accept: */*\r\nContent-Length: %zu\r\n",
                    method, path, v6 ? "[" : "", c->host, v6 ? "]" : "", c->port, MU_VERSION, len);
  if (rc == 0 && content_type != NULL)
    rc = mu_buf_printf(&req, "Content-Type: %s\r\n", content_type);
  if (rc == 0 && c->auth_header != NULL)
    rc = mu_buf_puts(&req, c->auth_header);
  if (rc == 0 && c->headers != NULL)
    rc = mu_buf_puts(&req, c->headers);
  if (rc == 0)
    rc = mu_buf_puts(&req, "\r\n");
  if (rc == 0 && len > 0)
    rc = mu_buf_append(&req, body, len);
  if (rc != 0) {
    snprintf(c->errmsg, sizeof(c->errmsg), "request for '%s' is too large", path);
    goto out;
  }
  long long deadline = now_ms() + (timeout_ms > 0 ? timeout_ms : 1);
  c->errmsg[0] = '\0';
  for (int tries = 0; tries < 2; tries++) {
    int reused = c->fd >= 0;
    int no_reply = 0;
    mu_buf_clear(&resp->body);
    resp->status = 0;
    resp->content_type[0] = '\0';
    rc = attempt(c, req.data, req.len, deadline, resp, method, &no_reply);
    if (rc == 0) {
      if (!c->reusable)
        drop_conn(c);
      goto out;
    }
    drop_conn(c);
    /* A kept-alive socket the server had closed: the request never got there. */
    if (!(reused && no_reply && rc == MU_ECONN))
      break;
  }
out:
  if (req.data != NULL)
    OPENSSL_cleanse(req.data, req.len); /* it may hold the token */
  mu_buf_release(&req);
  return rc;
}
