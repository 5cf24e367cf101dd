/* The etcd v3 rendezvous under load (bench_rdzv_backends.sh): N nodes join one run on an etcd
 * v3 cluster (min = max = N), each a thread with its own client (mu_client on the etcd-v3
 * backend, client/etcd3*.c) as a muster
 * agent has. N - 1 nodes join at once; when etcd holds their N - 1 joins (read as muster rdzv
 * reads a run), the last node joins, and the round-close latency is the time from the start of
 * that last join to the last of the N answers: what rdzv_load join measures for musterd (from
 * the last join written to the last answer read).
 *
 *   etcd3_load join --endpoints etcd-v3://H:P,H:P --nodes N [--max M] [--run ID] [--ttl-ms T]
 *                   [--goal-ms G]
 *
 * --max M (>= N) joins with --nnodes N:M instead of N:N (the round still closes when the N-th
 * node is in: no last call), so that a few nodes exercise a big run's protocol (M > 256).
 *
 * Prints one line: nodes, close_ms (the latency), goal_ms (default 1000), first_ms (how long
 * the N - 1 first joins took to be in), the failed joins, whether the rounds the nodes got agree
 * (node ranks 0..N-1 once each, offsets, world size, one master, and a watch by node 0 that
 * sees the round healthy), PASS or FAIL. Exits 1 on FAIL. tests/integration/etcd3_bigrun.sh
 * runs it as a check of the big-run protocol.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <uv.h>

#include "muster/client.h"
#include "muster/errno.h"

#include "alloc.h"
#include "client/backends.h"
#include "opts.h"

struct node {
  uv_thread_t th;
  int idx;
  int rc;
  long long t_start, t_done;
  struct mu_client *e;
  struct mu_round r; /* what the join answered */
};

static const char *g_ep, *g_run;
static long g_nodes, g_ttl, g_goal = 1000, g_max;
static uv_barrier_t g_go; /* the N - 1 first nodes and main */
static uv_sem_t g_last;   /* posted when the last node may join */

static long long now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void node_main(void *arg)
{
  struct node *n = arg;
  char id[64];
  snprintf(id, sizeof(id), "load-%d", n->idx);
  n->rc = mu_client_open(mu_client_backend_find("etcd-v3"), g_ep, &n->e, NULL);
  if (n->idx == g_nodes - 1)
    uv_sem_wait(&g_last);
  else
    uv_barrier_wait(&g_go);
  if (n->rc != 0)
    return;
  struct mu_join_opts o;
  memset(&o, 0, sizeof(o));
  o.node_id = id;
  o.addr = "127.0.0.1";
  o.local_world_size = 1;
  o.master_port = 29500;
  o.min_nodes = (int)g_nodes;
  o.max_nodes = (int)(g_max > g_nodes ? g_max : g_nodes);
  o.last_call_ms = 0;
  o.join_timeout_ms = 120000;
  o.lease_ttl_ms = g_ttl;
  mu_client_set_timeout(n->e, 30000);
  n->t_start = now_ns();
  n->rc = mu_client_join(n->e, g_run, &o, &n->r);
  n->t_done = now_ns();
  if (n->rc != 0)
    fprintf(stderr, "etcd3_load: node %d: %s\n", n->idx, mu_client_errmsg(n->e));
}

/* Whether the N rounds agree: "yes", or what is wrong. */
static const char *check_rounds(const struct node *nodes)
{
  char *seen = mu_calloc((size_t)g_nodes, 1);
  const char *bad = "yes";
  const struct mu_round *r0 = &nodes[0].r;
  for (long i = 0; i < g_nodes && bad[0] == 'y'; i++) {
    const struct mu_round *r = &nodes[i].r;
    if (r->round != r0->round || r->nnodes != g_nodes || r->world_size != g_nodes)
      bad = "round/nnodes/world_size";
    else if (r->node_rank < 0 || r->node_rank >= g_nodes || seen[r->node_rank]++)
      bad = "node ranks";
    else if (r->rank_offset != r->node_rank || r->local_world_size != 1)
      bad = "rank offsets";
    else if (strcmp(r->master_addr, r0->master_addr) != 0 || r->master_port != r0->master_port)
      bad = "master";
  }
  mu_free(seen);
  if (bad[0] != 'y')
    return bad;
  enum mu_watch_event ev = MU_WATCH_NONE;
  char id[64];
  snprintf(id, sizeof(id), "load-0");
  if (mu_client_watch(nodes[0].e, g_run, id, r0->round, 300, &ev, NULL) != 0) {
    fprintf(stderr, "etcd3_load: watch: %s\n", mu_client_errmsg(nodes[0].e));
    return "watch failed";
  }
  return ev == MU_WATCH_NONE ? "yes" : mu_watch_event_name(ev);
}

/* The command line into the g_ globals. Returns: 0, or 2 after saying what is wrong. */
static int parse_args(int argc, char **argv)
{
  for (int i = 2; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--endpoints") == 0)
      g_ep = argv[i + 1];
    else if (strcmp(argv[i], "--nodes") == 0 && mu_parse_long(argv[i + 1], 1, 20000, &g_nodes) == 0)
      ;
    else if (strcmp(argv[i], "--max") == 0 && mu_parse_long(argv[i + 1], 1, 100000, &g_max) == 0)
      ;
    else if (strcmp(argv[i], "--goal-ms") == 0 &&
             mu_parse_long(argv[i + 1], 1, 3600000, &g_goal) == 0)
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
  if (argc < 2 || strcmp(argv[1], "join") != 0 || g_ep == NULL || g_nodes < 2) {
    fprintf(stderr, "usage: etcd3_load join --endpoints etcd-v3://H:P[,H:P...] --nodes N "
                    "[--max M] [--run ID] [--ttl-ms T] [--goal-ms G] (N >= 2)\n");
    return 2;
  }
  return 0;
}

int main(int argc, char **argv)
{
  char run[64];
  snprintf(run, sizeof(run), "load-%ld", (long)time(NULL));
  g_run = run;
  g_nodes = 1000;
  g_ttl = 60000; /* as rdzv_load join: no lease runs out while 1,000 threads share 2 cores */
  int rc = parse_args(argc, argv);
  if (rc != 0)
    return rc;
  struct node *nodes = mu_calloc((size_t)g_nodes, sizeof(*nodes));
  uv_barrier_init(&g_go, (unsigned)g_nodes); /* the N - 1 first nodes and main */
  uv_sem_init(&g_last, 0);
  for (long i = 0; i < g_nodes; i++) {
    nodes[i].idx = (int)i;
    uv_thread_options_t to = {UV_THREAD_HAS_STACK_SIZE, 256 * 1024};
    if (uv_thread_create_ex(&nodes[i].th, &to, node_main, &nodes[i]) != 0) {
      fprintf(stderr, "etcd3_load: cannot start thread %ld\n", i);
      return 1;
    }
  }
  long long t0 = now_ns(), t_in = 0;
  uv_barrier_wait(&g_go);
  /* wait until the N - 1 first joins are in etcd (or one failed: then go on, it shows) */
  struct mu_client *watcher = NULL;
  struct mu_buf err = MU_BUF_INIT(SIZE_MAX);
  if (mu_client_open(mu_client_backend_find("etcd-v3"), g_ep, &watcher, &err) != 0) {
    fprintf(stderr, "etcd3_load: %s\n", mu_buf_str(&err));
    return 2;
  }
  for (;;) {
    struct mu_run_info ri;
    rc = mu_client_run_info(watcher, g_run, &ri);
    if (rc == 0 && ri.waiting >= g_nodes - 1)
      break;
    if (rc != 0 && rc != MU_ENOENT) {
      fprintf(stderr, "etcd3_load: reading the run: %s\n", mu_client_errmsg(watcher));
      break;
    }
    int failed_early = 0;
    for (long i = 0; i + 1 < g_nodes; i++)
      failed_early |= nodes[i].t_done != 0 && nodes[i].rc != 0;
    if (failed_early)
      break;
    uv_sleep(20);
  }
  mu_client_free(watcher);
  mu_buf_release(&err);
  t_in = now_ns();
  uv_sem_post(&g_last);
  long long last_done = 0;
  long failed = 0;
  for (long i = 0; i < g_nodes; i++) {
    uv_thread_join(&nodes[i].th);
    if (nodes[i].rc != 0)
      failed++;
    if (nodes[i].t_done > last_done)
      last_done = nodes[i].t_done;
  }
  double close_ms = (last_done - nodes[g_nodes - 1].t_start) / 1e6;
  const char *agree = failed ? "no" : check_rounds(nodes);
  int ok = failed == 0 && close_ms < (double)g_goal && strcmp(agree, "yes") == 0;
  printf("etcd3_load join nodes=%ld close_ms=%.1f goal_ms=%ld first_ms=%.1f failed=%ld "
         "rounds_agree=%s %s\n",
         g_nodes, close_ms, g_goal, (t_in - t0) / 1e6, failed, agree, ok ? "PASS" : "FAIL");
  for (long i = 0; i < g_nodes; i++) {
    mu_round_release(&nodes[i].r);
    mu_client_free(nodes[i].e);
  }
  mu_free(nodes);
  uv_barrier_destroy(&g_go);
  uv_sem_destroy(&g_last);
  return ok ? 0 : 1;
}
