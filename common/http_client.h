/* A small blocking HTTP/1.1 client on llhttp, for the rendezvous client and the tests.
 *
 * One struct mu_http_client talks to one host:port over one TCP connection that it keeps
 * alive between requests (and re-opens when the server closed it). Every request has a
 * deadline that covers connecting, sending and reading the whole response; the response body
 * is capped. A "cancel fd" (the read end of a pipe, say) makes a blocked request return
 * MU_ECANCELED as soon as it becomes readable, so another thread can interrupt a long poll.
 *
 * Not thread-safe: use one client per thread.
 */
#ifndef MU_HTTP_CLIENT_H
#define MU_HTTP_CLIENT_H

#include <stddef.h>

#include "buf.h"

struct mu_http_client;

struct mu_http_response {
  int status;             /* the HTTP status, 0 before a response arrived */
  struct mu_buf body;     /* the body, capped by the max given to mu_http_response_init() */
  char content_type[128]; /* the Content-Type header, "" when absent (truncated if longer) */
  /* Optional (NULL after init): receives the body as it arrives instead of `body`, for a
   * response that streams (etcd's watch). Returning nonzero ends the request at once:
   * mu_http_request() returns 0 and closes the connection. */
  int (*on_data)(void *arg, const char *p, size_t n);
  void *on_data_arg;
};

/* Parses the n bytes of an endpoint "[http://|https://]HOST:PORT[/]" (HOST a name, an IPv4
 * address or a bracketed IPv6 one) into host (NUL-terminated, at most hostcap - 1 bytes), *port
 * (1-65535) and *https (set to 1 for https://, left alone otherwise).
 * Returns: 0, or MU_EINVAL for anything else. */
int mu_http_endpoint_parse(const char *s, size_t n, char *host, size_t hostcap, int *port,
                           int *https);

/* Creates a client for host:port (a name or a numeric address). Nothing connects yet.
 * Returns: the client. Ownership: caller frees with mu_http_client_free(). */
struct mu_http_client *mu_http_client_new(const char *host, int port);
/* Closes the connection and frees. Accepts NULL. */
void mu_http_client_free(struct mu_http_client *c);

/* The longest a connect may take within a request's deadline (default 3000 ms). */
void mu_http_client_set_connect_timeout(struct mu_http_client *c, int ms);
/* A file descriptor that, once readable, interrupts any request (MU_ECANCELED); -1 for none.
 * Ownership: borrowed; the caller keeps it open while the client uses it. */
void mu_http_client_set_cancel_fd(struct mu_http_client *c, int fd);

/* Speaks TLS (https) from the next connection on: verifies the server against `ca_file`
 * (NULL: the system's CA store) and the host name or IP it was created with, and presents
 * `cert_file` + `key_file` when given (client certificates; both or neither). Files are read
 * at once. Returns: 0, or MU_EINVAL with the reason (naming the file) in
 * mu_http_client_errmsg(); requests then fail with MU_ECONN and that message.
 * Ownership: the paths are not kept. */
int mu_http_client_set_tls(struct mu_http_client *c, const char *ca_file, const char *cert_file,
                           const char *key_file);

/* The rendezvous clients' TLS (docs/security.md), for musterd and etcd alike: speaks TLS when
 * `https` is nonzero or any of MUSTER_RDZV_CACERT, MUSTER_RDZV_CERT, MUSTER_RDZV_KEY is set
 * (empty = unset), with those files, as mu_http_client_set_tls().
 * Returns: 0 (also when TLS is not asked for), or what mu_http_client_set_tls() returns. */
int mu_http_client_tls_from_env(struct mu_http_client *c, int https);

/* Sends `Authorization: Bearer <token>` with every request (NULL or "" = none). The token is
 * copied, never logged, and wiped on free. */
void mu_http_client_set_bearer(struct mu_http_client *c, const char *token);

/* The rendezvous clients' token (docs/security.md): MUSTER_RDZV_TOKEN, else the first line of
 * the file named by MUSTER_RDZV_TOKEN_FILE (a 0600 file or a mounted Secret: the token never
 * appears in a command line or an environment listing), sent as a bearer token. Neither set:
 * no token. A file that cannot be read or is empty makes every request fail with a message
 * naming it. Returns: 0, or the error reading the file (also kept for the first request). */
int mu_http_client_bearer_from_env(struct mu_http_client *c);

/* Sends `Authorization: VALUE` as it is (etcd's v3 token, no "Bearer"); NULL or "" = none.
 * Replaces a bearer token. Copied, never logged, wiped on free. */
void mu_http_client_set_authorization(struct mu_http_client *c, const char *value);
/* Extra header lines sent with every request ("Name: value\r\n" each; NULL = none). Copied. */
void mu_http_client_set_headers(struct mu_http_client *c, const char *lines);

/* The local address of the current (or last) connection as text ("127.0.0.1"), which is the
 * address through which the server is reached. Returns: 0, or MU_ENOENT when never connected. */
int mu_http_client_local_addr(const struct mu_http_client *c, char *out, size_t n);

/* A human-readable description of the last failure ("connect to 127.0.0.1:1: Connection
 * refused"). Ownership: borrowed until the next request. */
const char *mu_http_client_errmsg(const struct mu_http_client *c);

void mu_http_response_init(struct mu_http_response *r, size_t max_body);
void mu_http_response_release(struct mu_http_response *r);

/* Sends `method path` with an optional body (content_type may be NULL when body is NULL) and
 * reads the response into `resp` (cleared first). timeout_ms bounds the whole exchange.
 * A reused keep-alive connection that turns out closed is re-opened once.
 * Returns: 0 when a complete response arrived (any status), MU_ECONN (cannot connect, or the
 * connection broke), MU_ETIMEDOUT, MU_ECANCELED, MU_E2BIG (body over the cap), MU_EPROTO (not
 * HTTP), MU_EINVAL (bad arguments). Ownership: borrows everything. */
int mu_http_request(struct mu_http_client *c, const char *method, const char *path,
                    const char *content_type, const void *body, size_t len, int timeout_ms,
                    struct mu_http_response *resp);

#endif
