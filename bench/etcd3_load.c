/* The etcd v3 rendezvous under load (bench_rdzv_backends.sh): N nodes join one run on an etcd
 * v3 cluster at once (min = max = N), each a thread with its own client (common/etcd3.c) as a
 * muster agent has, and the round-close latency is measured as rdzv_load join does for musterd.
 *
 *   etcd3_load join --endpoints etcd-v3://H:P,H:P --nodes N [--run ID] [--ttl-ms T]
 *
 * Prints one line: nodes, the time from the last join's start to the last answer (the
 * round-close latency), the whole join wall time, and the nodes whose join failed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <uv.h>

#include "muster/client.h"

#include "alloc.h"
#include "etcd3.h"
#include "opts.h"

struct node {
  uv_thread_t th;
  int idx;
  int rc;
  long long t_start, t_done;
  struct mu_etcd3 *e;
};

static const char *g_ep, *g_run;
static long g_nodes, g_ttl;
static uv_barrier_t g_go;

static long long now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void node_main(void *arg)
{
  struct node *n = arg;
  char id[64], err[256];
  snprintf(id, sizeof(id), "load-%d", n->idx);
  n->rc = mu_etcd3_new(g_ep, &n->e, err, sizeof(err));
  uv_barrier_wait(&g_go);
  if (n->rc != 0)
    return;
  struct mu_join_opts o;
  memset(&o, 0, sizeof(o));
  o.node_id = id;
  o.addr = "127.0.0.1";
  o.local_world_size = 1;
  o.master_port = 29500;
  o.min_nodes = o.max_nodes = (int)g_nodes;
  o.last_call_ms = 0;
  o.join_timeout_ms = 120000;
  o.lease_ttl_ms = g_ttl;
  mu_etcd3_set_timeout(n->e, 30000);
  struct mu_round r;
  n->t_start = now_ns();
  n->rc = mu_etcd3_join(n->e, g_run, &o, &r);
  n->t_done = now_ns();
  if (n->rc == 0)
    mu_round_release(&r);
  else
    fprintf(stderr, "etcd3_load: node %d: %s\n", n->idx, mu_etcd3_errmsg(n->e));
}

int main(int argc, char **argv)
{
  char run[64];
  snprintf(run, sizeof(run), "load-%ld", (long)time(NULL));
  g_run = run;
  g_nodes = 1000;
  g_ttl = 10000;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--endpoints") == 0)
      g_ep = argv[i + 1];
    else if (strcmp(argv[i], "--nodes") == 0 && mu_parse_long(argv[i + 1], 1, 20000, &g_nodes) == 0)
      ;
    else if (strcmp(argv[i], "--run") == 0)
      g_run = argv[i + 1];
    else if (strcmp(argv[i], "--ttl-ms") == 0 &&
             mu_parse_long(argv[i + 1], 1000, 600000, &g_ttl) == 0)
      ;
    else {
      fprintf(stderr, "etcd3_load: bad argument '%s'\n", argv[i]);
      return 2;
    }
  }
  if (argc < 2 || strcmp(argv[1], "join") != 0 || g_ep == NULL) {
    fprintf(stderr, "usage: etcd3_load join --endpoints etcd-v3://H:P[,H:P...] --nodes N "
                    "[--run ID] [--ttl-ms T]\n");
    return 2;
  }
  struct node *nodes = mu_calloc((size_t)g_nodes, sizeof(*nodes));
  uv_barrier_init(&g_go, (unsigned)g_nodes + 1);
  for (long i = 0; i < g_nodes; i++) {
    nodes[i].idx = (int)i;
    uv_thread_options_t to = {UV_THREAD_HAS_STACK_SIZE, 256 * 1024};
    if (uv_thread_create_ex(&nodes[i].th, &to, node_main, &nodes[i]) != 0) {
      fprintf(stderr, "etcd3_load: cannot start thread %ld\n", i);
      return 1;
    }
  }
  long long t0 = now_ns();
  uv_barrier_wait(&g_go);
  long long last_start = 0, last_done = 0;
  long failed = 0;
  for (long i = 0; i < g_nodes; i++) {
    uv_thread_join(&nodes[i].th);
    if (nodes[i].rc != 0)
      failed++;
    if (nodes[i].t_start > last_start)
      last_start = nodes[i].t_start;
    if (nodes[i].t_done > last_done)
      last_done = nodes[i].t_done;
  }
  printf("etcd3_load join: %ld nodes, round closed %.1f ms after the last join started, "
         "all joined in %.1f ms, %ld failed\n",
         g_nodes, (last_done - last_start) / 1e6, (last_done - t0) / 1e6, failed);
  for (long i = 0; i < g_nodes; i++)
    mu_etcd3_free(nodes[i].e);
  mu_free(nodes);
  uv_barrier_destroy(&g_go);
  return failed ? 1 : 0;
}
