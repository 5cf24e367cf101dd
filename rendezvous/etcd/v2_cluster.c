/* etcd's cluster endpoints for a one-member cluster: /v2/machines, /v2/members (and
 * /members/leader), /v2/stats/self and /v2/stats/leader, answered as etcd 3.4 answers them so
 * that python-etcd and etcdctl find "the cluster". The member id is derived from the server's
 * name, so it is stable across restarts.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "json.h"
#include "v2.h"
#include "v2_error.h"

/* The member, fixed at registration. */
struct v2_member {
  char id[17];
  uint64_t start_ms; /* uv_now() at registration */
  char start_time[40];
};

static const struct v2_member *member_of(const struct rv_req *req)
{
  return rv_server_module_data(req->srv, "v2_member");
}

static void machines_handler(struct rv_req *req)
{
  const char *url = rv_server_url(req->srv);
  rv_reply(req, 200, "text/plain; charset=utf-8", NULL, url, strlen(url));
}

/* The one member: {"id","name","peerURLs","clientURLs"}. */
static void put_member(struct mu_buf *b, struct rv_server *srv, const struct v2_member *m)
{
  const char *url = rv_server_url(srv);
  const char *name = rv_server_config(srv)->name;
  mu_buf_printf(b, "{\"id\":\"%s\",\"name\":", m->id);
  mu_json_str(b, name, strlen(name));
  mu_buf_puts(b, ",\"peerURLs\":[");
  mu_json_str(b, url, strlen(url));
  mu_buf_puts(b, "],\"clientURLs\":[");
  mu_json_str(b, url, strlen(url));
  mu_buf_puts(b, "]}");
}

static void members_handler(struct rv_req *req)
{
  struct mu_buf b = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  mu_buf_puts(&b, "{\"members\":[");
  put_member(&b, req->srv, member_of(req));
  mu_buf_puts(&b, "]}\n");
  rv_reply(req, 200, "application/json", "X-Etcd-Cluster-Id: " V2_CLUSTER_ID "\r\n", b.data, b.len);
  mu_buf_release(&b);
}

static void leader_handler(struct rv_req *req)
{
  struct mu_buf b = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  put_member(&b, req->srv, member_of(req));
  mu_buf_puts(&b, "\n");
  rv_reply(req, 200, "application/json", NULL, b.data, b.len);
  mu_buf_release(&b);
}

static void stats_self_handler(struct rv_req *req)
{
  const struct v2_member *m = member_of(req);
  const char *name = rv_server_config(req->srv)->name;
  struct mu_buf b = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  double up = (double)(uv_now(rv_server_loop(req->srv)) - m->start_ms) / 1000.0;
  mu_buf_puts(&b, "{\"name\":");
  mu_json_str(&b, name, strlen(name));
  mu_buf_printf(&b,
                ",\"id\":\"%s\",\"state\":\"StateLeader\",\"startTime\":\"%s\","
                "\"leaderInfo\":{\"leader\":\"%s\",\"uptime\":\"%.3fs\",\"startTime\":\"%s\"},"
                "\"recvAppendRequestCnt\":0,\"sendAppendRequestCnt\":0}\n",
                m->id, m->start_time, m->id, up, m->start_time);
  rv_reply(req, 200, "application/json", NULL, b.data, b.len);
  mu_buf_release(&b);
}

static void stats_leader_handler(struct rv_req *req)
{
  struct mu_buf b = MU_BUF_INIT(MU_BUF_UNBOUNDED);
  mu_buf_printf(&b, "{\"leader\":\"%s\",\"followers\":{}}\n", member_of(req)->id);
  rv_reply(req, 200, "application/json", NULL, b.data, b.len);
  mu_buf_release(&b);
}

/* Anything else under /v2/members/ (etcd's members handler). */
static void members_other_handler(struct rv_req *req)
{
  static const char body[] = "{\"message\":\"Not found\"}\n";
  rv_reply(req, 404, "application/json", NULL, body, sizeof(body) - 1);
}

static void member_close(struct rv_server *srv, void *data)
{
  (void)srv;
  mu_free(data);
}

static const struct rv_route cluster_routes[] = {
    {RV_GET, "/v2/machines", RV_ROUTE_CORS, machines_handler, "v2_machines", &v2_api},
    {RV_GET, "/v2/members", RV_ROUTE_CORS, members_handler, "v2_members", &v2_api},
    {RV_GET, "/v2/members/leader", RV_ROUTE_CORS, leader_handler, "v2_members", &v2_api},
    {RV_GET, "/v2/stats/self", RV_ROUTE_CORS, stats_self_handler, "v2_stats_self", &v2_api},
    {RV_GET, "/v2/stats/leader", RV_ROUTE_CORS, stats_leader_handler, "v2_stats_leader", &v2_api},
    {RV_GET, "/v2/members/", RV_ROUTE_PREFIX | RV_ROUTE_CORS, members_other_handler, "v2_members",
     &v2_api},
    {0, NULL, 0, NULL, NULL, NULL},
};

void v2_cluster_register(struct rv_server *srv)
{
  struct v2_member *m = mu_calloc(1, sizeof(*m));
  const char *name = rv_server_config(srv)->name;
  /* etcd's member ids are 64-bit hex; ours is an FNV-1a-style hash of the name (with the
   * offset basis this id has always been made with, so that ids do not change) */
  uint64_t h = 1469598103934665603ULL;
  for (const char *p = name; *p; p++)
    h = (h ^ (unsigned char)*p) * 1099511628211ULL;
  snprintf(m->id, sizeof(m->id), "%016llx", (unsigned long long)h);
  m->start_ms = uv_now(rv_server_loop(srv));
  struct timespec ts;
  struct tm tm;
  char base[32];
  clock_gettime(CLOCK_REALTIME, &ts);
  gmtime_r(&ts.tv_sec, &tm);
  strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(m->start_time, sizeof(m->start_time), "%.20s.%09dZ", base,
           (int)(ts.tv_nsec % 1000000000));
  struct rv_module mod = {"v2_member", m, member_close, NULL};
  rv_server_add_module(srv, &mod);
  rv_server_add_routes(srv, cluster_routes);
}
