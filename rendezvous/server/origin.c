/* Who may reach musterd from a browser: its own page, and the pages of --allowed-origin.
 *
 * A browser lets any page send requests to any address it can reach: a form POST or a
 * fetch(..., {mode: "no-cors"}) is sent without asking the server first, and DNS rebinding
 * makes musterd's address the page's own (evil.example resolving to 127.0.0.1). So a request
 * that comes from a browser is checked before its route's handler runs:
 *   - its Origin (sent with every cross-origin request and every POST, PUT, DELETE) must be
 *     musterd's own page (scheme://Host of the request itself) or an --allowed-origin; else 403;
 *   - without an Origin, a request the browser says is cross-site (Sec-Fetch-Site: cross-site
 *     or same-site) is refused the same way, unless it is a GET or HEAD navigation (a link to
 *     the status page: the browser shows the answer to its user, no page reads it);
 *   - on plain HTTP its Host must name musterd: an IP address, localhost, this machine's name,
 *     the host of --advertise-url or --listen, or the host of an --allowed-origin; else 421, as
 *     etcd's --host-whitelist answers (a rebound name is none of these). Over TLS the name is
 *     the certificate's: no check, as etcd.
 * A request is a browser's when it carries Origin, a Sec-Fetch-* header, Accept-Language or a
 * User-Agent that starts "Mozilla/" (every browser's). The last two matter: a browser sends
 * Sec-Fetch-* only to https:// and loopback URLs, and no Origin with a GET of its own origin,
 * so a rebound page's reads (fetch("/v2/keys/?recursive=true") from http://evil.example:PORT)
 * carry neither. curl, etcdctl, python-etcd, torchrun and muster send none of these, and keep
 * etcd 3.4's behaviour (any Host, and etcd's CORS headers with Access-Control-Allow-Origin: * on
 * /v2, which no browser can use without an Origin). A page's script may replace User-Agent and
 * Accept-Language in some browsers (Firefox): a rebound page that does both is taken for a
 * client that is no browser; a token is the defence there. A browser gets no wildcard: an
 * allowed cross-origin request gets its
 * Origin echoed (with Vary: Origin), on /v2 and /v1 alike, and its preflight (OPTIONS) an
 * answer; musterd's own page needs no CORS header and gets none.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "alloc.h"
#include "server.h"

/* Copies the host of `hostport` ("h:1", "[::1]:1", "h") in lowercase into out (size bytes).
 * Returns: its length, or 0 when it does not fit or is empty. */
static size_t host_of(const char *hostport, size_t n, char *out, size_t size)
{
  const char *h = hostport, *end = hostport + n;
  if (n > 0 && h[0] == '[') {
    const char *close = memchr(h, ']', n);
    if (close == NULL)
      return 0;
    h++;
    end = close;
  } else {
    const char *colon = memchr(h, ':', n);
    if (colon != NULL)
      end = colon;
  }
  size_t len = (size_t)(end - h);
  if (len == 0 || len >= size)
    return 0;
  for (size_t i = 0; i < len; i++)
    out[i] = (char)((h[i] >= 'A' && h[i] <= 'Z') ? h[i] + 32 : h[i]);
  out[len] = '\0';
  if (len > 1 && out[len - 1] == '.') /* "host." is "host" */
    out[--len] = '\0';
  return len;
}

/* The host of URL "scheme://host[:port][/...]", lowercase, into out. Returns: its length or 0. */
static size_t url_host(const char *url, char *out, size_t size)
{
  const char *p = strstr(url, "://");
  if (p == NULL)
    return 0;
  p += 3;
  return host_of(p, strcspn(p, "/"), out, size);
}

static void add_name(struct rv_server *srv, const char *name)
{
  if (name == NULL || name[0] == '\0' || srv->nown_hosts == RV_MAX_OWN_HOSTS)
    return;
  char h[256];
  if (host_of(name, strlen(name), h, sizeof(h)) == 0)
    return;
  for (size_t i = 0; i < srv->nown_hosts; i++)
    if (strcmp(srv->own_hosts[i], h) == 0)
      return;
  srv->own_hosts[srv->nown_hosts++] = mu_strdup(h);
}

void rv_origin_setup(struct rv_server *srv)
{
  char h[256];
  add_name(srv, "localhost");
  if (gethostname(h, sizeof(h) - 1) == 0) {
    h[sizeof(h) - 1] = '\0';
    add_name(srv, h);
    char *dot = strchr(h, '.');
    if (dot != NULL) { /* the short name too */
      *dot = '\0';
      add_name(srv, h);
    }
  }
  add_name(srv, srv->host);
  if (srv->advertise_url != NULL && url_host(srv->advertise_url, h, sizeof(h)) > 0)
    add_name(srv, h);
  for (size_t i = 0; i < srv->cfg.nallowed_origins; i++)
    if (url_host(srv->cfg.allowed_origins[i], h, sizeof(h)) > 0)
      add_name(srv, h);
}

void rv_origin_release(struct rv_server *srv)
{
  for (size_t i = 0; i < srv->nown_hosts; i++)
    mu_free(srv->own_hosts[i]);
  srv->nown_hosts = 0;
}

/* Does `host` (lowercase, no port) name musterd? */
static int own_host(const struct rv_server *srv, const char *host)
{
  unsigned char a[16];
  if (uv_inet_pton(AF_INET, host, a) == 0 || uv_inet_pton(AF_INET6, host, a) == 0)
    return 1; /* an address: nobody rebinds a name to it */
  if (strlen(host) > 10 && strcmp(host + strlen(host) - 10, ".localhost") == 0)
    return 1; /* RFC 6761: always loopback */
  for (size_t i = 0; i < srv->nown_hosts; i++)
    if (strcmp(srv->own_hosts[i], host) == 0)
      return 1;
  return 0;
}

/* Is `origin` one of --allowed-origin (scheme, host and port, case-insensitive)? */
static int allowed_origin(const struct rv_server *srv, const char *origin)
{
  for (size_t i = 0; i < srv->cfg.nallowed_origins; i++) {
    const char *a = srv->cfg.allowed_origins[i];
    size_t n = strlen(a);
    while (n > 0 && a[n - 1] == '/')
      n--;
    if (strlen(origin) == n && strncasecmp(origin, a, n) == 0)
      return 1;
  }
  return 0;
}

/* Is `origin` the page the request came to: scheme://Host? */
static int own_origin(const struct rv_server *srv, const char *origin, const char *host)
{
  const char *scheme = srv->tls != NULL ? "https://" : "http://";
  size_t sl = strlen(scheme);
  return host != NULL && strncasecmp(origin, scheme, sl) == 0 && strcasecmp(origin + sl, host) == 0;
}

static void refuse(struct rv_conn *c, int status, const char *fmt, const char *what)
{
  struct rv_req *req = &c->req;
  char body[640];
  c->cors_off = 1; /* the page that sent it may not even read why */
  snprintf(body, sizeof(body), fmt, what);
  rv_reply(req, status, "text/plain; charset=utf-8", "X-Content-Type-Options: nosniff\r\n", body,
           strlen(body));
}

/* Does the request carry a header a browser sends (Origin, Sec-Fetch-*, Accept-Language, a
 * User-Agent of "Mozilla/...")? One pass over the names, looking at their first letter first:
 * every request of every client comes here. */
static int from_browser(const struct rv_conn *c)
{
  for (unsigned i = 0; i < c->nhdr; i++) {
    const char *f = rv_conn_hdr_name(c, i);
    switch (f[0] | 0x20) {
    case 'o':
      if (strcasecmp(f, "Origin") == 0)
        return 1;
      break;
    case 's':
      if (strncasecmp(f, "Sec-Fetch-", 10) == 0)
        return 1;
      break;
    case 'a':
      if (strcasecmp(f, "Accept-Language") == 0)
        return 1;
      break;
    case 'u':
      if (strcasecmp(f, "User-Agent") == 0 && strncmp(rv_conn_hdr_value(c, i), "Mozilla/", 8) == 0)
        return 1;
      break;
    default:
      break;
    }
  }
  return 0;
}

int rv_origin_check(struct rv_conn *c)
{
  struct rv_req *req = &c->req;
  struct rv_server *srv = c->srv;
  c->origin = NULL;
  if (!from_browser(c))
    return 0; /* not a browser: etcd's behaviour */
  const char *origin = rv_req_header(req, "Origin");
  const char *site = rv_req_header(req, "Sec-Fetch-Site");
  srv->browser_requests++;
  const char *host = rv_req_header(req, "Host");
  char h[256];
  if (srv->tls == NULL &&
      (host == NULL || host_of(host, strlen(host), h, sizeof(h)) == 0 || !own_host(srv, h))) {
    srv->origin_refused++;
    refuse(c, 421,
           "421 Misdirected Request: musterd does not answer a browser that calls it '%.200s' "
           "(a page whose name was rebound to musterd's address, or a name musterd does not "
           "know: start it with --allowed-origin http://NAME:PORT to serve pages under it)\n",
           host != NULL ? host : "");
    return 1;
  }
  c->cors_off = 1; /* musterd's own page needs no CORS header; a wildcard no browser gets */
  if (origin != NULL) {
    if (allowed_origin(srv, origin)) {
      c->origin = origin; /* echoed in Access-Control-Allow-Origin */
      c->cors_off = 0;
      return 0;
    }
    if (own_origin(srv, origin, host))
      return 0;
  } else {
    const char *mode = rv_req_header(req, "Sec-Fetch-Mode");
    int nav = mode != NULL && strcasecmp(mode, "navigate") == 0 && req->method & (RV_GET | RV_HEAD);
    if (site == NULL || strcasecmp(site, "same-origin") == 0 || strcasecmp(site, "none") == 0 ||
        nav)
      return 0;
  }
  srv->origin_refused++;
  refuse(c, 403,
         "403 Forbidden: a page of origin '%.200s' may not use musterd; only musterd's own page "
         "and the origins of --allowed-origin may (start musterd with --allowed-origin ORIGIN to "
         "allow one)\n",
         origin != NULL ? origin : site);
  return 1;
}

int rv_origin_preflight(struct rv_conn *c)
{
  struct rv_req *req = &c->req;
  if (c->origin == NULL || req->method != RV_OPTIONS ||
      rv_req_header(req, "Access-Control-Request-Method") == NULL)
    return 0;
  rv_reply(req, 200, NULL, "Access-Control-Max-Age: 600\r\n", "", 0);
  return 1;
}
