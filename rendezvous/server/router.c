/* The route table and the checks that run before any handler (STYLE.md #17): URL decoding,
 * the Go ServeMux 301 for unclean paths, the method check (405), unknown paths (404), and
 * query + form parameters. Handlers see a clean, decoded request.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "muster/errno.h"

#include "alloc.h"
#include "log.h"
#include "security.h"
#include "server.h"

const char *rv_status_reason(int status)
{
  switch (status) {
  case 200:
    return "OK";
  case 201:
    return "Created";
  case 204:
    return "No Content";
  case 301:
    return "Moved Permanently";
  case 307:
    return "Temporary Redirect";
  case 400:
    return "Bad Request";
  case 401:
    return "Unauthorized";
  case 403:
    return "Forbidden";
  case 404:
    return "Not Found";
  case 405:
    return "Method Not Allowed";
  case 408:
    return "Request Timeout";
  case 409:
    return "Conflict";
  case 410:
    return "Gone";
  case 412:
    return "Precondition Failed";
  case 413:
    return "Request Entity Too Large";
  case 414:
    return "Request URI Too Long";
  case 429:
    return "Too Many Requests";
  case 431:
    return "Request Header Fields Too Large";
  case 500:
    return "Internal Server Error";
  case 501:
    return "Not Implemented";
  case 503:
    return "Service Unavailable";
  case 504:
    return "Gateway Timeout";
  default:
    return "Unknown";
  }
}

int rv_server_add_routes(struct rv_server *srv, const struct rv_route *routes)
{
  size_t n = 0;
  while (routes[n].fn != NULL)
    n++;
  srv->routes = mu_realloc(srv->routes, (srv->nroutes + n) * sizeof(*srv->routes));
  for (size_t i = 0; i < n; i++) {
    memset(&srv->routes[srv->nroutes], 0, sizeof(srv->routes[0]));
    srv->routes[srv->nroutes++].route = &routes[i];
  }
  return 0;
}

void rv_router_count(struct rv_server *srv, struct rv_route_slot *slot, int status)
{
  struct rv_route_stats *st = slot != NULL ? &slot->stats : &srv->unrouted;
  int k = status / 100;
  if (k < 1 || k > 5)
    k = 5;
  st->by_status[k]++;
}

static int hexval(int ch)
{
  if (ch >= '0' && ch <= '9')
    return ch - '0';
  if (ch >= 'a' && ch <= 'f')
    return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F')
    return ch - 'A' + 10;
  return -1;
}

/* Decodes %XX (and '+' as space when `plus`) from src[0..n) into dst. Returns: the decoded
 * length, or -1 for a bad escape. dst needs n + 1 bytes. */
static long url_decode(char *dst, const char *src, size_t n, int plus)
{
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    char ch = src[i];
    if (ch == '%') {
      int a = i + 1 < n ? hexval((unsigned char)src[i + 1]) : -1;
      int b = i + 2 < n ? hexval((unsigned char)src[i + 2]) : -1;
      if (a < 0 || b < 0)
        return -1;
      dst[o++] = (char)(a * 16 + b);
      i += 2;
    } else if (plus && ch == '+') {
      dst[o++] = ' ';
    } else {
      dst[o++] = ch;
    }
  }
  dst[o] = '\0';
  return (long)o;
}

/* Go's path.Clean for rooted paths, keeping a trailing slash as ServeMux does. Writes into
 * dst (needs strlen(p) + 2 bytes). */
static void clean_path(char *dst, const char *p)
{
  size_t n = strlen(p), w = 0, r = 0;
  dst[w++] = '/';
  while (r < n) {
    if (p[r] == '/') {
      r++;
    } else if (p[r] == '.' && (r + 1 == n || p[r + 1] == '/')) {
      r++;
    } else if (p[r] == '.' && p[r + 1] == '.' && (r + 2 == n || p[r + 2] == '/')) {
      r += 2;
      if (w > 1) {
        w--;
        while (w > 1 && dst[w - 1] != '/')
          w--;
        if (w > 1)
          w--;
      }
    } else {
      if (w > 1)
        dst[w++] = '/';
      while (r < n && p[r] != '/')
        dst[w++] = p[r++];
    }
  }
  if (n > 1 && p[n - 1] == '/' && w > 1)
    dst[w++] = '/';
  dst[w] = '\0';
}

static unsigned method_bit(int m)
{
  switch (m) {
  case HTTP_GET:
    return RV_GET;
  case HTTP_HEAD:
    return RV_HEAD;
  case HTTP_PUT:
    return RV_PUT;
  case HTTP_POST:
    return RV_POST;
  case HTTP_DELETE:
    return RV_DELETE;
  case HTTP_PATCH:
    return RV_PATCH;
  case HTTP_OPTIONS:
    return RV_OPTIONS;
  default:
    return RV_OTHER;
  }
}

static struct rv_route_slot *find_route(struct rv_server *srv, const char *path)
{
  struct rv_route_slot *best = NULL;
  size_t best_len = 0;
  int best_exact = 0;
  for (size_t i = 0; i < srv->nroutes; i++) {
    const struct rv_route *r = srv->routes[i].route;
    size_t len = strlen(r->path);
    int exact = !(r->flags & RV_ROUTE_PREFIX);
    if (exact ? strcmp(path, r->path) != 0 : strncmp(path, r->path, len) != 0)
      continue;
    if (best == NULL || len > best_len || (len == best_len && exact && !best_exact)) {
      best = &srv->routes[i];
      best_len = len;
      best_exact = exact;
    }
  }
  return best;
}

/* Splits "a=1&b=2" into params, decoding into *store. */
static void parse_params(const char *s, size_t n, struct rv_param *params, size_t *np, char **store)
{
  size_t i = 0;
  while (i < n) {
    size_t j = i;
    while (j < n && s[j] != '&')
      j++;
    if (j > i) {
      size_t eq = i;
      while (eq < j && s[eq] != '=')
        eq++;
      char *name = *store;
      long nl = url_decode(name, s + i, eq - i, 1);
      if (nl >= 0) {
        *store += nl + 1;
        char *value = *store;
        long vl = eq < j ? url_decode(value, s + eq + 1, j - eq - 1, 1) : 0;
        if (eq >= j)
          value[0] = '\0';
        if (vl >= 0) {
          *store += vl + 1;
          params[*np].name = name;
          params[*np].value = value;
          (*np)++;
        } else {
          *store = name;
        }
      }
    }
    i = j + 1;
  }
}

static size_t count_amp(const char *s, size_t n)
{
  size_t k = 1;
  for (size_t i = 0; i < n; i++)
    k += s[i] == '&';
  return k;
}

/* As Go's http.Error: text/plain with X-Content-Type-Options: nosniff. */
static void reply_plain(struct rv_conn *c, int status, const char *extra, const char *body)
{
  char hdr[256];
  snprintf(hdr, sizeof(hdr), "%sX-Content-Type-Options: nosniff\r\n", extra ? extra : "");
  rv_reply(&c->req, status, "text/plain; charset=utf-8", hdr, body, strlen(body));
}

void rv_router_dispatch(struct rv_conn *c)
{
  struct rv_server *srv = c->srv;
  struct rv_req *req = &c->req;
  const char *target = c->head.data ? c->head.data : "";
  size_t tlen = c->url_len;
  memset(req, 0, sizeof(*req));
  req->srv = srv;
  req->method = method_bit(c->parser.method);
  req->method_name = llhttp_method_name((llhttp_method_t)c->parser.method);
  req->target = target;
  req->body = c->body.data ? c->body.data : "";
  req->body_len = c->body.len;
  c->slot = NULL;
  /* etcd wraps its whole mux in CORS: 301 and 404 carry the headers too */
  c->cors = 1;

  const char *q = memchr(target, '?', tlen);
  size_t plen = q ? (size_t)(q - target) : tlen;
  req->query = q ? q + 1 : "";
  size_t qlen = q ? tlen - plen - 1 : 0;
  /* Absolute-form targets ("http://host/path") are allowed by HTTP/1.1. */
  const char *praw = target;
  if (plen > 7 && strncasecmp(target, "http://", 7) == 0) {
    const char *slash = memchr(target + 7, '/', plen - 7);
    praw = slash ? slash : target + plen;
    plen -= (size_t)(praw - target);
  }
  if (plen == 0 || praw[0] != '/') {
    if (plen == 1 && praw[0] == '*' && req->method == RV_OPTIONS) {
      reply_plain(c, 200, NULL, "");
      return;
    }
    reply_plain(c, 400, NULL, "400 Bad Request: the request target must start with '/'\n");
    return;
  }

  /* One scratch block holds the decoded path and all decoded params. */
  int form = 0;
  const char *ct = rv_req_header(req, "Content-Type");
  if (ct != NULL && (req->method & (RV_PUT | RV_POST | RV_PATCH)) &&
      strncasecmp(ct, "application/x-www-form-urlencoded", 33) == 0)
    form = 1;
  size_t blen = form ? c->body.len : 0;
  size_t maxp = count_amp(req->query, qlen) + (form ? count_amp(req->body, blen) : 0);
  size_t need = plen * 2 + 4 + qlen * 3 + 4 + blen * 3 + 4;
  if (need > c->scratch_cap || c->scratch_cap > 65536) {
    mu_free(c->scratch);
    c->scratch_cap = need;
    c->scratch = mu_malloc(c->scratch_cap);
  }
  if (maxp > c->params_cap || c->params_cap > 1024) {
    mu_free(c->params);
    c->params_cap = maxp;
    c->params = mu_malloc(c->params_cap * sizeof(*c->params));
  }
  char *store = c->scratch;
  char *path = store;
  long dl = url_decode(path, praw, plen, 0);
  if (dl < 0) {
    reply_plain(c, 400, NULL, "400 Bad Request: invalid %-escape in the path\n");
    return;
  }
  store += dl + 1;
  req->path = path;
  req->path_len = (size_t)dl;

  /* Go's ServeMux: paths with //, /./ or /../ are redirected to the clean path. */
  char *clean = store;
  clean_path(clean, path);
  if (strcmp(clean, path) != 0 && req->method != RV_OTHER) {
    char *loc = mu_malloc(strlen(clean) + qlen + 32);
    if (qlen > 0)
      snprintf(loc, strlen(clean) + qlen + 32, "Location: %s?%.*s\r\n", clean, (int)qlen,
               req->query);
    else
      snprintf(loc, strlen(clean) + qlen + 32, "Location: %s\r\n", clean);
    /* Go's http.Redirect: an HTML body for GET, a Content-Type for GET and HEAD only */
    char *body = mu_asprintf("<a href=\"%s\">Moved Permanently</a>.\n\n", clean);
    int html = req->method == RV_GET || req->method == RV_HEAD;
    rv_reply(req, 301, html ? "text/html; charset=utf-8" : NULL, loc, body,
             req->method == RV_GET ? strlen(body) : 0);
    mu_free(loc);
    mu_free(body);
    return;
  }
  store += strlen(clean) + 1;

  struct rv_route_slot *slot = find_route(srv, path);
  if (slot == NULL) {
    reply_plain(c, 404, NULL, "404 page not found\n");
    return;
  }
  c->slot = slot;
  c->cors = 0;
  const struct rv_route *r = slot->route;
  if ((r->flags & RV_ROUTE_CORS) && req->method == RV_OPTIONS) {
    rv_reply(req, 200, NULL, NULL, "", 0); /* a CORS preflight, as etcd answers it */
    return;
  }
  if (srv->sec != NULL && rv_security_auth_gate(srv->sec, req) != 0)
    return; /* 401 and nothing else */
  unsigned allowed = r->methods | ((r->methods & RV_GET) ? RV_HEAD : 0);
  if (!(allowed & req->method)) {
    /* etcd's allowMethod(): "HEAD,GET,PUT,POST,DELETE" */
    char allow[128];
    static const unsigned order[] = {RV_HEAD,   RV_GET,   RV_PUT,    RV_POST,
                                     RV_DELETE, RV_PATCH, RV_OPTIONS};
    static const char *names[] = {"HEAD", "GET", "PUT", "POST", "DELETE", "PATCH", "OPTIONS"};
    size_t o = (size_t)snprintf(allow, sizeof(allow), "Allow: ");
    for (int i = 0; i < 7; i++)
      if (allowed & order[i])
        o += (size_t)snprintf(allow + o, sizeof(allow) - o, "%s%s", o > 7 ? "," : "", names[i]);
    snprintf(allow + o, sizeof(allow) - o, "\r\n");
    reply_plain(c, 405, allow, "Method Not Allowed\n");
    return;
  }
  if (req->method == RV_HEAD)
    req->method = RV_GET;

  size_t np = 0;
  if (form && (r->flags & RV_ROUTE_FORM))
    parse_params(req->body, blen, c->params, &np, &store);
  parse_params(req->query, qlen, c->params, &np, &store);
  req->params = c->params;
  req->nparams = np;
  req->route = r;
  if (srv->sec != NULL && rv_security_quota_gate(srv->sec, req, c->peer, &c->qt) != 0)
    return; /* 413 / 429 */
  r->fn(req);
}
