/* Routes every musterd answers whatever the modules: /version, /healthz (and etcd's
 * /health), /v2/machines, /v2/members, /v2/stats/self, /metrics.
 */
#include <stdio.h>
#include <string.h>

#include "muster/mu.h"

#include "alloc.h"
#include "event.h"
#include "server.h"
#include "v2_error.h"

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

static void machines_handler(struct rv_req *req)
{
  const char *url = rv_server_url(req->srv);
  rv_reply(req, 200, "text/plain; charset=utf-8", NULL, url, strlen(url));
}

/* The one member: {"id","name","peerURLs","clientURLs"}. */
static void put_member(struct mu_buf *b, struct rv_server *srv)
{
  const char *url = rv_server_url(srv);
  mu_buf_printf(b, "{\"id\":\"%s\",\"name\":", srv->member_id);
  mu_json_str(b, srv->name, strlen(srv->name));
  mu_buf_puts(b, ",\"peerURLs\":[");
  mu_json_str(b, url, strlen(url));
  mu_buf_puts(b, "],\"clientURLs\":[");
  mu_json_str(b, url, strlen(url));
  mu_buf_puts(b, "]}");
}

static void members_handler(struct rv_req *req)
{
  struct mu_buf b = MU_BUF_INIT(4096);
  mu_buf_puts(&b, "{\"members\":[");
  put_member(&b, req->srv);
  mu_buf_puts(&b, "]}\n");
  rv_reply(req, 200, "application/json", "X-Etcd-Cluster-Id: " V2_CLUSTER_ID "\r\n", b.data, b.len);
  mu_buf_release(&b);
}

static void leader_handler(struct rv_req *req)
{
  struct mu_buf b = MU_BUF_INIT(4096);
  put_member(&b, req->srv);
  mu_buf_puts(&b, "\n");
  rv_reply(req, 200, "application/json", NULL, b.data, b.len);
  mu_buf_release(&b);
}

static void stats_self_handler(struct rv_req *req)
{
  struct rv_server *srv = req->srv;
  struct mu_buf b = MU_BUF_INIT(4096);
  double up = (double)(uv_now(srv->loop) - srv->start_time_ms) / 1000.0;
  mu_buf_puts(&b, "{\"name\":");
  mu_json_str(&b, srv->name, strlen(srv->name));
  mu_buf_printf(&b,
                ",\"id\":\"%s\",\"state\":\"StateLeader\",\"startTime\":\"%s\","
                "\"leaderInfo\":{\"leader\":\"%s\",\"uptime\":\"%.3fs\",\"startTime\":\"%s\"},"
                "\"recvAppendRequestCnt\":0,\"sendAppendRequestCnt\":0}\n",
                srv->member_id, srv->start_time_str, srv->member_id, up, srv->start_time_str);
  rv_reply(req, 200, "application/json", NULL, b.data, b.len);
  mu_buf_release(&b);
}

static void stats_leader_handler(struct rv_req *req)
{
  struct mu_buf b = MU_BUF_INIT(256);
  mu_buf_printf(&b, "{\"leader\":\"%s\",\"followers\":{}}\n", req->srv->member_id);
  rv_reply(req, 200, "application/json", NULL, b.data, b.len);
  mu_buf_release(&b);
}

/* Anything else under /v2/members/ (etcd's members handler). */
static void members_other_handler(struct rv_req *req)
{
  static const char body[] = "{\"message\":\"Not found\"}\n";
  rv_reply(req, 404, "application/json", NULL, body, sizeof(body) - 1);
}

static void put_route_stats(struct mu_buf *b, const char *name, const struct rv_route_stats *st)
{
  static const char *cls[] = {"", "1xx", "2xx", "3xx", "4xx", "5xx"};
  for (int k = 1; k <= 5; k++)
    if (st->by_status[k] > 0)
      mu_buf_printf(b, "musterd_http_requests_total{route=\"%s\",code=\"%s\"} %llu\n", name, cls[k],
                    (unsigned long long)st->by_status[k]);
}

static void metrics_handler(struct rv_req *req)
{
  struct rv_server *srv = req->srv;
  struct mu_buf b = MU_BUF_INIT((size_t)1 << 24);
  mu_buf_puts(&b, "# HELP musterd_http_requests_total HTTP requests answered, by route and "
                  "status class.\n# TYPE musterd_http_requests_total counter\n");
  put_route_stats(&b, "none", &srv->unrouted);
  /* routes sharing a name (v2_keys twice) are summed */
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
    put_route_stats(&b, name, &sum);
  }
  mu_buf_printf(&b,
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
                "# TYPE musterd_limit_hits_total counter\nmusterd_limit_hits_total %llu\n",
                srv->nconns, (unsigned long long)srv->conns_accepted,
                (unsigned long long)srv->conns_rejected, (unsigned long long)srv->conns_idle_closed,
                (unsigned long long)srv->conns_output_overflow,
                (unsigned long long)srv->limit_hits);
  for (size_t i = 0; i < srv->nmodules; i++)
    if (srv->modules[i].metrics != NULL)
      srv->modules[i].metrics(srv, srv->modules[i].data, &b);
  rv_reply(req, 200, "text/plain; version=0.0.4; charset=utf-8", NULL, b.data, b.len);
  mu_buf_release(&b);
}

static const struct rv_route builtin_routes[] = {
    {RV_GET, "/version", RV_ROUTE_CORS, version_handler, "version"},
    {RV_GET, "/healthz", RV_ROUTE_CORS, health_handler, "health"},
    {RV_GET, "/health", RV_ROUTE_CORS, health_handler, "health"},
    {RV_GET, "/v2/machines", RV_ROUTE_CORS, machines_handler, "v2_machines"},
    {RV_GET, "/v2/members", RV_ROUTE_CORS, members_handler, "v2_members"},
    {RV_GET, "/v2/members/leader", RV_ROUTE_CORS, leader_handler, "v2_members"},
    {RV_GET, "/v2/stats/self", RV_ROUTE_CORS, stats_self_handler, "v2_stats_self"},
    {RV_GET, "/v2/stats/leader", RV_ROUTE_CORS, stats_leader_handler, "v2_stats_leader"},
    {RV_GET, "/v2/members/", RV_ROUTE_PREFIX | RV_ROUTE_CORS, members_other_handler, "v2_members"},
    {RV_GET, "/metrics", 0, metrics_handler, "metrics"},
    {0, NULL, 0, NULL, NULL},
};

void rv_status_register(struct rv_server *srv)
{
  rv_server_add_routes(srv, builtin_routes);
}
