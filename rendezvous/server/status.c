/* The routes every musterd answers whatever APIs it serves: /version, /healthz (and etcd's
 * /health) and /metrics (the server's own counters, then each module's lines). All public:
 * they reveal no key, value or credential.
 */
#include <stdio.h>
#include <string.h>

#include "muster/mu.h"

#include "alloc.h"
#include "server.h"

static void version_handler(struct rv_req *req)
{
  static const char body[] =
      "{\"etcdserver\":\"3.4.23\",\"etcdcluster\":\"3.4.0\",\"musterd\":\"" MU_VERSION "\"}";
  rv_reply(req, 200, "application/json", NULL, body, sizeof(body) - 1);
}

static void health_handler(struct rv_req *req)
{
  /* etcd writes this JSON without a Content-Type, so Go sniffs text/plain */
  static const char body[] = "{\"health\":\"true\"}";
  rv_reply(req, 200, "text/plain; charset=utf-8", NULL, body, sizeof(body) - 1);
}

static void put_route_stats(struct mu_buf *b, const char *name, const struct rv_route_stats *st)
{
  static const char *cls[] = {"", "1xx", "2xx", "3xx", "4xx", "5xx"};
  for (int k = 1; k <= 5; k++)
    if (st->by_status[k] > 0)
      mu_buf_printf(b, "musterd_http_requests_total{route=\"%s\",code=\"%s\"} %llu\n", name, cls[k],
                    (unsigned long long)st->by_status[k]);
}

/* Browsers refused (origin.c), scopes refused (scope.c) and the memory budget (budget.c). */
static void browser_budget_metrics(const struct rv_server *srv, struct mu_buf *out)
{
  mu_buf_printf(out,
                "# HELP musterd_browser_requests_total Requests from a browser (Origin or "
                "Sec-Fetch-* headers).\n"
                "# TYPE musterd_browser_requests_total counter\n"
                "musterd_browser_requests_total %llu\n"
                "# HELP musterd_origin_refused_total Browser requests refused: another page's "
                "Origin (403) or a Host that is not musterd's (421).\n"
                "# TYPE musterd_origin_refused_total counter\nmusterd_origin_refused_total %llu\n"
                "# HELP musterd_scope_refused_total Requests refused (403) because the "
                "credential's scopes do not cover them.\n"
                "# TYPE musterd_scope_refused_total counter\nmusterd_scope_refused_total %llu\n"
                "# HELP musterd_buffer_bytes What all connections buffer (requests, stashed "
                "input, unsent answers), against --max-buffer-bytes.\n"
                "# TYPE musterd_buffer_bytes gauge\nmusterd_buffer_bytes %llu\n"
                "# HELP musterd_buffer_refused_total Answers refused (429), and TCPStore "
                "connections closed (reason budget), because they would pass the buffer "
                "budget.\n"
                "# TYPE musterd_buffer_refused_total counter\nmusterd_buffer_refused_total %llu\n"
                "# HELP musterd_buffer_evicted_total Anonymous connections closed to keep the "
                "budget or to make room in a full connection table.\n"
                "# TYPE musterd_buffer_evicted_total counter\nmusterd_buffer_evicted_total %llu\n",
                (unsigned long long)srv->browser_requests, (unsigned long long)srv->origin_refused,
                (unsigned long long)srv->scope_refused, (unsigned long long)srv->buffered,
                (unsigned long long)srv->budget_refused, (unsigned long long)srv->budget_evicted);
}

/* musterd_http_requests_total of every route: routes sharing a name (v2_keys twice) summed. */
static void put_routes(struct mu_buf *b, const struct rv_server *srv)
{
  mu_buf_puts(b, "# HELP musterd_http_requests_total HTTP requests answered, by route and "
                 "status class.\n# TYPE musterd_http_requests_total counter\n");
  put_route_stats(b, "none", &srv->unrouted);
  for (size_t i = 0; i < srv->nroutes; i++) {
    const char *name = srv->routes[i].route->name ? srv->routes[i].route->name : "unnamed";
    int seen = 0;
    for (size_t j = 0; j < i && !seen; j++)
      seen = srv->routes[j].route->name && strcmp(srv->routes[j].route->name, name) == 0;
    if (seen)
      continue;
    struct rv_route_stats sum;
    memset(&sum, 0, sizeof(sum));
    for (size_t j = i; j < srv->nroutes; j++) {
      const char *nj = srv->routes[j].route->name ? srv->routes[j].route->name : "unnamed";
      if (strcmp(nj, name) == 0)
        for (int k = 0; k < 6; k++)
          sum.by_status[k] += srv->routes[j].stats.by_status[k];
    }
    put_route_stats(b, name, &sum);
  }
}

/* The connections' gauges and counters. */
static void put_connections(struct mu_buf *b, const struct rv_server *srv)
{
  mu_buf_printf(b,
                "# HELP musterd_connections Open client connections.\n"
                "# TYPE musterd_connections gauge\nmusterd_connections %u\n"
                "# HELP musterd_connections_accepted_total Connections accepted.\n"
                "# TYPE musterd_connections_accepted_total counter\n"
                "musterd_connections_accepted_total %llu\n"
                "# HELP musterd_connections_rejected_total Connections refused with 503 "
                "(--max-connections).\n"
                "# TYPE musterd_connections_rejected_total counter\n"
                "musterd_connections_rejected_total %llu\n"
                "# HELP musterd_connections_idle_closed_total Connections closed by the idle "
                "timeout.\n"
                "# TYPE musterd_connections_idle_closed_total counter\n"
                "musterd_connections_idle_closed_total %llu\n"
                "# HELP musterd_connections_output_overflow_total Connections closed because "
                "the client did not read its responses.\n"
                "# TYPE musterd_connections_output_overflow_total counter\n"
                "musterd_connections_output_overflow_total %llu\n"
                "# HELP musterd_limit_hits_total Requests refused by a size limit (413, 414, "
                "431).\n"
                "# TYPE musterd_limit_hits_total counter\nmusterd_limit_hits_total %llu\n"
                "# HELP musterd_connections_timed_out_total Connections closed at a deadline "
                "(headers, body, a write making no progress).\n"
                "# TYPE musterd_connections_timed_out_total counter\n"
                "musterd_connections_timed_out_total %llu\n"
                "# HELP musterd_reads_paused_total Times a connection stopped being read "
                "because its unsent output was over 64 KiB.\n"
                "# TYPE musterd_reads_paused_total counter\nmusterd_reads_paused_total %llu\n"
                "# HELP musterd_output_held_total Times a connection's output waited for the "
                "log to be synced (--fsync batch).\n"
                "# TYPE musterd_output_held_total counter\nmusterd_output_held_total %llu\n"
                "# HELP musterd_body_bytes Request body bytes held by all connections.\n"
                "# TYPE musterd_body_bytes gauge\nmusterd_body_bytes %llu\n"
                "# HELP musterd_body_refused_total Requests refused (503) because the bodies "
                "held by all connections reached their bound.\n"
                "# TYPE musterd_body_refused_total counter\nmusterd_body_refused_total %llu\n",
                (unsigned)srv->conns.n, (unsigned long long)srv->conns_accepted,
                (unsigned long long)srv->conns_rejected, (unsigned long long)srv->conns_idle_closed,
                (unsigned long long)srv->conns_output_overflow, (unsigned long long)srv->limit_hits,
                (unsigned long long)srv->conns_timed_out, (unsigned long long)srv->reads_paused,
                (unsigned long long)srv->output_held, (unsigned long long)srv->body_total,
                (unsigned long long)srv->body_refused);
  mu_buf_printf(b,
                "# HELP musterd_address_refused_total Refused because one client address "
                "reached its share (--max-connections-per-address, "
                "--max-body-bytes-per-address).\n"
                "# TYPE musterd_address_refused_total counter\n"
                "musterd_address_refused_total{limit=\"connections\"} %llu\n"
                "musterd_address_refused_total{limit=\"body_bytes\"} %llu\n"
                "# HELP musterd_client_addresses Client addresses with a connection open.\n"
                "# TYPE musterd_client_addresses gauge\nmusterd_client_addresses %zu\n",
                (unsigned long long)srv->addr_conns_rejected,
                (unsigned long long)srv->addr_body_refused, (size_t)srv->addrs.n);
}

static void metrics_handler(struct rv_req *req)
{
  struct rv_server *srv = req->srv;
  struct mu_buf b = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  put_routes(&b, srv);
  put_connections(&b, srv);
  browser_budget_metrics(srv, &b);
  for (size_t i = 0; i < srv->nmodules; i++)
    if (srv->modules[i].metrics != NULL)
      srv->modules[i].metrics(srv, srv->modules[i].data, &b);
  rv_reply(req, 200, "text/plain; version=0.0.4; charset=utf-8", NULL, b.data, b.len);
  mu_buf_release(&b);
}

static const struct rv_route status_routes[] = {
    {RV_GET, "/version", RV_ROUTE_CORS | RV_ROUTE_PUBLIC | RV_ROUTE_UNHELD, version_handler,
     "version", NULL},
    {RV_GET, "/healthz", RV_ROUTE_CORS | RV_ROUTE_PUBLIC | RV_ROUTE_UNHELD, health_handler,
     "health", NULL},
    {RV_GET, "/health", RV_ROUTE_CORS | RV_ROUTE_PUBLIC | RV_ROUTE_UNHELD, health_handler, "health",
     NULL},
    {RV_GET, "/metrics", RV_ROUTE_PUBLIC | RV_ROUTE_UNHELD, metrics_handler, "metrics", NULL},
    {0, NULL, 0, NULL, NULL, NULL},
};

void rv_status_register(struct rv_server *srv)
{
  rv_server_add_routes(srv, status_routes);
}
