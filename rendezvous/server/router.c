/* The route table and the checks that run before any handler (redis's processCommand), in
 * this order (rv_router_dispatch()):
 *   1. the request line: path and query split, absolute form, "OPTIONS *";        400
 *   2. one scratch block for everything decoded below;
 *   3. the %-decoded path, and Go ServeMux's redirect of an unclean one;          400, 301
 *   4. the resource: the most specific row, its {vars}; a browser's Origin and Host
 *      (origin.c), a CORS preflight;                                            404, 403, 421
 *   5. the gate's credentials check (the row says whether it is public);          401
 *   6. the row of the resource that takes the method (HEAD as GET);               405
 *   7. query and form parameters;
 *   8. writes while the disk refuses them;                                        503
 *   9. the credential's scopes (the API's target hook);                           403
 *  10. the gate's quota check (reading the row's intent flags);                   413, 429
 * then the handler. Refusals go through rv_refuse(), in the shape of the row's API.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "muster/errno.h"

#include "alloc.h"
#include "log.h"
#include "path.h"
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
  case 415:
    return "Unsupported Media Type";
  case 421:
    return "Misdirected Request";
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

/* Is `b` the same resource as `a` (same path, same way of matching it)? */
static int same_resource(const struct rv_route *a, const struct rv_route *b)
{
  unsigned how = RV_ROUTE_PREFIX | RV_ROUTE_SLASH | RV_ROUTE_REST;
  return strcmp(a->path, b->path) == 0 && (a->flags & how) == (b->flags & how);
}

/* How a row matches: 0 exact, 1 pattern, 2 prefix (the order rows are tried in). */
static int row_class(const struct rv_route_slot *s)
{
  return s->nvars > 0 ? 1 : (s->route->flags & RV_ROUTE_PREFIX) ? 2 : 0;
}

/* Does `a` come before `b` when matching? Exact rows, then patterns with more fixed bytes, then
 * longer prefixes; rows registered earlier first among equals. */
static int tried_before(const struct rv_route_slot *a, const struct rv_route_slot *b)
{
  int ca = row_class(a), cb = row_class(b);
  if (ca != cb)
    return ca < cb;
  size_t ka = ca == 2 ? a->literal : a->fixed, kb = cb == 2 ? b->literal : b->fixed;
  if (ka != kb)
    return ka > kb;
  return a < b;
}

/* srv->order: every resource's first row, most specific first (an insertion sort: a few dozen
 * rows, registered once). */
static void build_order(struct rv_server *srv)
{
  srv->order = mu_realloc(srv->order, srv->nroutes * sizeof(*srv->order));
  srv->norder = 0;
  for (size_t i = 0; i < srv->nroutes; i++) {
    struct rv_route_slot *s = &srv->routes[i];
    if (!s->first)
      continue;
    size_t j = srv->norder++;
    while (j > 0 && tried_before(s, srv->order[j - 1])) {
      srv->order[j] = srv->order[j - 1];
      j--;
    }
    srv->order[j] = s;
  }
}

int rv_server_add_routes(struct rv_server *srv, const struct rv_route *routes)
{
  size_t n = 0;
  while (routes[n].fn != NULL)
    n++;
  srv->routes = mu_realloc(srv->routes, (srv->nroutes + n) * sizeof(*srv->routes));
  /* the array moved: relink every resource's rows */
  for (size_t i = 0; i < srv->nroutes + n; i++) {
    struct rv_route_slot *s = &srv->routes[i];
    if (i >= srv->nroutes) {
      memset(s, 0, sizeof(*s));
      s->route = &routes[i - srv->nroutes];
    }
    const char *brace = strchr(s->route->path, '{');
    s->literal = brace != NULL ? (size_t)(brace - s->route->path) : strlen(s->route->path);
    s->nvars = 0;
    s->fixed = 0;
    int in_var = 0;
    for (const char *p = s->route->path; *p != '\0'; p++) {
      s->nvars += *p == '{';
      in_var = *p == '{' ? 1 : *p == '}' ? 0 : in_var;
      s->fixed += !in_var && *p != '}';
    }
    s->alt = NULL;
    s->first = 1;
    s->methods = s->route->methods;
    for (size_t j = 0; j < i; j++) {
      struct rv_route_slot *f = &srv->routes[j];
      if (!f->first || !same_resource(f->route, s->route))
        continue;
      struct rv_route_slot **tail = &f->alt;
      while (*tail != NULL)
        tail = &(*tail)->alt;
      *tail = s;
      f->methods |= s->route->methods;
      s->first = 0;
      break;
    }
  }
  srv->nroutes += n;
  build_order(srv);
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

/* Splits "a=1&b=2" into params, decoding into *store. A param whose name or value decodes to
 * a NUL byte sets *nul to its name (the first one): C strings cannot carry it. */
static void parse_params(const char *s, size_t n, struct rv_param *params, size_t *np, char **store,
                         const char **nul)
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
          if (*nul == NULL && ((size_t)nl != strlen(name) || (size_t)vl != strlen(value)))
            *nul = name;
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

/* ---------------------------------------------------------------------------------------------
 * Matching
 */

/* The byte ranges of a row's {vars} in the path. */
struct match {
  size_t nvar;
  size_t var_at[RV_ROUTE_MAX_VARS], var_len[RV_ROUTE_MAX_VARS];
};

/* Does the pattern of `s` match the whole of path[0..n)? Fills m's vars. */
static int match_pattern(const struct rv_route_slot *s, const char *path, size_t n, struct match *m)
{
  const struct rv_route *r = s->route;
  const char *p = r->path;
  size_t i = 0;
  m->nvar = 0;
  while (*p != '\0') {
    if (*p != '{') {
      if (i >= n || path[i] != *p)
        return 0;
      i++;
      p++;
      continue;
    }
    const char *close = strchr(p, '}');
    if (close == NULL || m->nvar == RV_ROUTE_MAX_VARS)
      return 0;
    size_t start = i;
    if (close[1] == '\0' && (r->flags & RV_ROUTE_REST))
      i = n;
    else
      while (i < n && path[i] != '/')
        i++;
    if (i == start)
      return 0; /* a var matches a non-empty segment */
    m->var_at[m->nvar] = start;
    m->var_len[m->nvar++] = i - start;
    p = close + 1;
  }
  return i == n || ((r->flags & RV_ROUTE_SLASH) && i + 1 == n && path[i] == '/');
}

/* Does row `s` match path[0..n)? Fills m's vars. */
static int match_row(const struct rv_route_slot *s, const char *path, size_t n, struct match *m)
{
  const struct rv_route *r = s->route;
  m->nvar = 0;
  switch (row_class(s)) {
  case 0: /* exact: the length first, it rules out most rows */
    if (n != s->literal &&
        !((r->flags & RV_ROUTE_SLASH) && n == s->literal + 1 && path[n - 1] == '/'))
      return 0;
    return memcmp(path, r->path, s->literal) == 0;
  case 1:
    return n >= s->literal && memcmp(path, r->path, s->literal) == 0 &&
           match_pattern(s, path, n, m);
  default:
    return n >= s->literal && memcmp(path, r->path, s->literal) == 0;
  }
}

/* The most specific resource matching `path` (its first row), with its vars in `m`: the first
 * of srv->order that matches. */
static struct rv_route_slot *find_resource(struct rv_server *srv, const char *path, size_t n,
                                           struct match *m)
{
  for (size_t i = 0; i < srv->norder; i++)
    if (match_row(srv->order[i], path, n, m))
      return srv->order[i];
  return NULL;
}

/* The row of resource `first` that takes `method` (GET rows take HEAD), or NULL. */
static struct rv_route_slot *row_for_method(struct rv_route_slot *first, unsigned method)
{
  for (struct rv_route_slot *s = first; s != NULL; s = s->alt) {
    unsigned allowed = s->route->methods | ((s->route->methods & RV_GET) ? RV_HEAD : 0);
    if (allowed & method)
      return s;
  }
  return NULL;
}

/* ---------------------------------------------------------------------------------------------
 * Refusals and plain answers
 */

/* As Go's http.Error: text/plain with X-Content-Type-Options: nosniff. */
static void reply_plain(struct rv_req *req, int status, const char *extra, const char *body)
{
  char hdr[256];
  snprintf(hdr, sizeof(hdr), "%sX-Content-Type-Options: nosniff\r\n", extra ? extra : "");
  rv_reply(req, status, "text/plain; charset=utf-8", hdr, body, strlen(body));
}

/* etcd's allowMethod(): "Allow: HEAD,GET,PUT,POST,DELETE" for `methods` (GET implies HEAD). */
static void allow_header(char *out, size_t size, unsigned methods)
{
  static const unsigned order[] = {RV_HEAD,   RV_GET,   RV_PUT,    RV_POST,
                                   RV_DELETE, RV_PATCH, RV_OPTIONS};
  static const char *names[] = {"HEAD", "GET", "PUT", "POST", "DELETE", "PATCH", "OPTIONS"};
  unsigned allowed = methods | ((methods & RV_GET) ? RV_HEAD : 0);
  size_t o = (size_t)snprintf(out, size, "Allow: ");
  for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++)
    if (allowed & order[i])
      o += (size_t)snprintf(out + o, size - o, "%s%s", o > 7 ? "," : "", names[i]);
  snprintf(out + o, size - o, "\r\n");
}

void rv_refuse(struct rv_req *req, const struct rv_refusal *r)
{
  const struct rv_api *api = req->route != NULL ? req->route->api : NULL;
  if (r->kind == RV_REFUSE_FORBIDDEN)
    req->srv->scope_refused++;
  if (api != NULL && api->refuse != NULL && api->refuse(req, r))
    return;
  switch (r->kind) {
  case RV_REFUSE_METHOD: {
    char allow[128];
    allow_header(allow, sizeof(allow), r->allow);
    reply_plain(req, 405, allow, "Method Not Allowed\n");
    return;
  }
  case RV_REFUSE_NO_CREDENTIALS:
  case RV_REFUSE_BAD_CREDENTIALS:
    reply_plain(req, 401, r->challenge, r->message != NULL ? r->message : "Unauthorized\n");
    return;
  case RV_REFUSE_TOO_LARGE:
    reply_plain(req, 413, NULL, r->message != NULL ? r->message : "Request Entity Too Large\n");
    return;
  case RV_REFUSE_TOO_MANY:
    reply_plain(req, 429, NULL, r->message != NULL ? r->message : "Too Many Requests\n");
    return;
  case RV_REFUSE_READ_ONLY:
    reply_plain(req, 503, NULL, r->message);
    return;
  case RV_REFUSE_FORBIDDEN:
    reply_plain(req, 403, NULL, r->message != NULL ? r->message : "Forbidden\n");
    return;
  }
}

void rv_refuse_output(struct rv_req *req, const char *what, size_t need, const char *advice)
{
  char msg[320];
  size_t cap = req->srv->cfg.max_output_bytes;
  snprintf(msg, sizeof(msg), "%s %zu bytes, over --max-output-bytes (%zu): %s", what, need, cap,
           advice);
  struct rv_refusal r = {RV_REFUSE_TOO_LARGE, msg, 0, NULL};
  req->srv->limit_hits++;
  rv_refuse(req, &r);
}

/* ---------------------------------------------------------------------------------------------
 * The request, step by step
 */

/* The request target split up: the raw path (absolute form stripped) and the raw query. */
struct target {
  const char *path;
  size_t path_len;
  size_t query_len;
  int form; /* the body is a form to parse */
  size_t body_len;
};

/* Step 1: the request line. Fills `t` and the raw fields of c->req.
 * Returns: 0, or -1 after answering (400, or 200 for "OPTIONS *"). */
static int start_or_reply(struct rv_conn *c, struct target *t)
{
  struct rv_req *req = &c->req;
  const char *target = c->head.data ? c->head.data : "";
  size_t tlen = c->url_len;
  memset(req, 0, sizeof(*req));
  req->srv = c->srv;
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
  t->query_len = q ? tlen - plen - 1 : 0;
  /* Absolute-form targets ("http://host/path") are allowed by HTTP/1.1. */
  const char *praw = target;
  if (plen > 7 && strncasecmp(target, "http://", 7) == 0) {
    const char *slash = memchr(target + 7, '/', plen - 7);
    praw = slash ? slash : target + plen;
    plen -= (size_t)(praw - target);
  }
  t->path = praw;
  t->path_len = plen;
  if (plen == 0 || praw[0] != '/') {
    if (plen == 1 && praw[0] == '*' && req->method == RV_OPTIONS)
      reply_plain(req, 200, NULL, "");
    else
      reply_plain(req, 400, NULL, "400 Bad Request: the request target must start with '/'\n");
    return -1;
  }
  const char *ct = rv_req_header(req, "Content-Type");
  t->form = ct != NULL && (req->method & (RV_PUT | RV_POST | RV_PATCH)) &&
            strncasecmp(ct, "application/x-www-form-urlencoded", 33) == 0;
  t->body_len = t->form ? c->body.len : 0;
  return 0;
}

/* Step 2: one scratch block for the decoded path, its clean form, the vars and the params.
 * Returns: where the decoded strings go. */
static char *scratch_for(struct rv_conn *c, const struct target *t)
{
  const struct rv_req *req = &c->req;
  size_t maxp =
      count_amp(req->query, t->query_len) + (t->form ? count_amp(req->body, t->body_len) : 0);
  size_t need =
      t->path_len * 3 + 4 + RV_ROUTE_MAX_VARS + t->query_len * 3 + 4 + t->body_len * 3 + 4;
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
  return c->scratch;
}

/* Appends s[0..n) %-escaping every byte outside the ones a path may carry as they are
 * (unreserved, sub-delims, ':', '@', '/'; and '?', '%' when `query`: the client's raw query). */
static void escape_path(struct mu_buf *b, const char *s, size_t n, int query)
{
  static const char hex[] = "0123456789ABCDEF";
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
        (ch != '\0' && strchr("-._~!$&()*+,;=:@/", ch) != NULL) ||
        (query && (ch == '?' || ch == '%'))) {
      mu_buf_putc(b, (char)ch);
      continue;
    }
    char e[3] = {'%', hex[ch >> 4], hex[ch & 15]};
    mu_buf_append(b, e, 3);
  }
}

/* Appends s[0..n) with &, <, >, " and ' as HTML entities (Go's html.EscapeString). */
static void escape_html(struct mu_buf *b, const char *s, size_t n)
{
  static const char *const ent[][2] = {
      {"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&#34;"}, {"'", "&#39;"}};
  for (size_t i = 0; i < n; i++) {
    const char *rep = NULL;
    for (size_t k = 0; k < sizeof(ent) / sizeof(ent[0]) && rep == NULL; k++)
      if (s[i] == ent[k][0][0])
        rep = ent[k][1];
    if (rep != NULL)
      mu_buf_puts(b, rep);
    else
      mu_buf_putc(b, s[i]);
  }
}

/* Step 3: the decoded path, and Go's ServeMux redirect of an unclean one (//, /./, /../).
 * Returns: 0 with req->path set and *store past what was used, or -1 after answering. */
static int path_or_reply(struct rv_conn *c, const struct target *t, char **store)
{
  struct rv_req *req = &c->req;
  char *path = *store;
  long dl = url_decode(path, t->path, t->path_len, 0);
  if (dl < 0) {
    reply_plain(req, 400, NULL, "400 Bad Request: invalid %-escape in the path\n");
    return -1;
  }
  req->path = path;
  req->path_len = (size_t)dl;
  char *clean = path + dl + 1;
  size_t clen = mu_path_clean(clean, path, strlen(path), MU_PATH_KEEP_SLASH);
  if (strcmp(clean, path) != 0 && req->method != RV_OTHER) {
    /* The decoded path goes back on the wire: escaped as Go's URL.EscapedPath() does (no CR,
     * LF, quote or '<' can reach the header or the HTML), the raw query as it came. */
    struct mu_buf loc = MU_BUF_INIT(MU_BUF_UNBOUNDED);
    struct mu_buf body = MU_BUF_INIT(MU_BUF_UNBOUNDED);
    mu_buf_puts(&loc, "Location: ");
    size_t at = loc.len;
    escape_path(&loc, clean, clen, 0);
    if (t->query_len > 0) {
      mu_buf_putc(&loc, '?');
      escape_path(&loc, req->query, t->query_len, 1);
    }
    /* Go's http.Redirect: an HTML body for GET, a Content-Type for GET and HEAD only */
    mu_buf_puts(&body, "<a href=\"");
    escape_html(&body, loc.data + at, loc.len - at);
    mu_buf_puts(&body, "\">Moved Permanently</a>.\n\n");
    mu_buf_puts(&loc, "\r\n");
    int html = req->method == RV_GET || req->method == RV_HEAD;
    rv_reply(req, 301, html ? "text/html; charset=utf-8" : NULL, mu_buf_str(&loc), body.data,
             req->method == RV_GET ? body.len : 0);
    mu_buf_release(&loc);
    mu_buf_release(&body);
    return -1;
  }
  *store = clean + clen + 1;
  return 0;
}

/* Step 4: the resource, its vars, and the CORS preflight.
 * Returns: the resource's first row, or NULL after answering (404, or 200 to a preflight). */
static struct rv_route_slot *resource_or_reply(struct rv_conn *c, char **store)
{
  struct rv_req *req = &c->req;
  struct match m;
  struct rv_route_slot *first = find_resource(c->srv, req->path, req->path_len, &m);
  if (first == NULL) {
    reply_plain(req, 404, NULL, "404 page not found\n");
    return NULL;
  }
  for (size_t i = 0; i < m.nvar; i++) {
    char *v = *store;
    memcpy(v, req->path + m.var_at[i], m.var_len[i]);
    v[m.var_len[i]] = '\0';
    req->vars[i] = v;
    *store += m.var_len[i] + 1;
  }
  req->nvars = m.nvar;
  req->route = first->route;
  c->slot = first;
  c->cors = 0;
  if (rv_origin_check(c) != 0 || rv_origin_preflight(c) != 0)
    return NULL;
  if ((first->route->flags & RV_ROUTE_CORS) && req->method == RV_OPTIONS) {
    rv_reply(req, 200, NULL, NULL, "", 0); /* a CORS preflight, as etcd answers it */
    return NULL;
  }
  return first;
}

/* Step 6: the row of the resource that takes the method.
 * Returns: the row, or NULL after answering 405. */
static struct rv_route_slot *row_or_reply(struct rv_conn *c, struct rv_route_slot *first)
{
  struct rv_req *req = &c->req;
  struct rv_route_slot *row = row_for_method(first, req->method);
  if (row == NULL) {
    struct rv_refusal r = {RV_REFUSE_METHOD, NULL, first->methods, NULL};
    rv_refuse(req, &r);
    return NULL;
  }
  c->slot = row;
  req->route = row->route;
  if (req->method == RV_HEAD)
    req->method = RV_GET;
  return row;
}

/* Step 9: what the request names, against its credential's scopes. Returns: 0, or -1 after
 * refusing (403). */
static int scope_or_reply(struct rv_req *req)
{
  const struct rv_api *api = req->route->api;
  struct rv_target t;
  if (req->cred == NULL || !req->cred->scoped || api == NULL || api->target == NULL)
    return 0; /* a credential without runs= or keys= reaches everything (read-only: the gate) */
  memset(&t, 0, sizeof(t));
  if (!api->target(req, &t))
    return 0;
  int ok =
      rv_cred_allows(req->cred, t.kind, t.name, t.len, t.access) ||
      (t.kind == RV_SCOPE_KEY && t.access == RV_READ && rv_cred_above(req->cred, t.name, t.len));
  if (!ok)
    rv_refuse_scope(req, t.kind, t.name, t.access);
  mu_free(t.owned);
  return ok ? 0 : -1;
}

void rv_router_dispatch(struct rv_conn *c)
{
  struct rv_server *srv = c->srv;
  struct rv_req *req = &c->req;
  const struct rv_gate *g = &srv->gate;
  struct target t;
  if (start_or_reply(c, &t) != 0)
    return;
  char *store = scratch_for(c, &t);
  if (path_or_reply(c, &t, &store) != 0)
    return;
  struct rv_route_slot *row = resource_or_reply(c, &store);
  if (row == NULL)
    return;
  /* Step 5: credentials, as soon as the route is known (before 405 and parameters) */
  if (g->auth != NULL && g->auth(g->data, req) != 0)
    return;
  if (req->cred != NULL)
    c->flags |= CONN_TRUSTED; /* served ahead of anonymous connections from now on */
  row = row_or_reply(c, row);
  if (row == NULL)
    return;
  /* Step 7: parameters: the form body first, then the query (Go's FormValue order) */
  size_t np = 0;
  const char *nul = NULL;
  if (t.form && (row->route->flags & RV_ROUTE_FORM))
    parse_params(req->body, t.body_len, c->params, &np, &store, &nul);
  parse_params(req->query, t.query_len, c->params, &np, &store, &nul);
  req->params = c->params;
  req->nparams = np;
  if (nul != NULL) {
    /* refused where it enters, for every parameter: nothing is stored cut at the NUL */
    char msg[160];
    snprintf(msg, sizeof(msg),
             "400 Bad Request: parameter '%.60s' holds a NUL byte (%%00), "
             "which musterd refuses in names and values\n",
             nul);
    reply_plain(req, 400, NULL, msg);
    return;
  }
  /* Step 8: a request that may write, while writes are refused (a disk error) */
  const struct rv_barrier *b = &srv->barrier;
  const char *ro = NULL;
  if (b->read_only != NULL && (req->method & (RV_PUT | RV_POST | RV_DELETE | RV_PATCH)) &&
      (ro = b->read_only(b->data)) != NULL) {
    struct rv_refusal r = {RV_REFUSE_READ_ONLY, ro, 0, NULL};
    srv->barrier_off = 1; /* the refusal reveals no record: it is not held behind them */
    rv_refuse(req, &r);
    srv->barrier_off = 0;
    return;
  }
  /* Step 9: the credential's scopes, before the quotas (their messages name counts) */
  if (scope_or_reply(req) != 0)
    return;
  /* Step 10: quotas, right before the handler */
  if (g->admit != NULL && g->admit(g->data, req, c->peer, &c->ticket) != 0)
    return;
  srv->barrier_off = (row->route->flags & RV_ROUTE_UNHELD) != 0;
  row->route->fn(req);
  srv->barrier_off = 0;
}
