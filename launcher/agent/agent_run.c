/* `muster agent`, the run: join a round (blocking, one long poll), run one attempt of the
 * workers (agent_attempt.c), and decide from how it ended: done, restart the workers (a worker
 * failed and restarts are left), re-join (the round changed), or give up. The rendezvous is
 * reached through a client of the client library (mu_agent_client()). Nothing here prints: progress
 * goes to the config's report callback, the final error to the caller's err.
 */
#define _XOPEN_SOURCE 700 /* nftw */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <ftw.h>
#include <poll.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "muster/errno.h"

#include "agent_impl.h"
#include "alloc.h"
#include "client/backends.h"
#include "buf.h"
#include "fsutil.h"
#include "opts.h"
#include "proc.h"
#include "random.h"

void mu_agent_say(const struct mu_agent *ag, enum mu_agent_report kind, const char *fmt, ...)
{
  if (ag->cfg->report == NULL)
    return;
  struct mu_buf line = MU_BUF_INIT(SIZE_MAX);
  va_list ap;
  va_start(ap, fmt);
  mu_buf_vprintf(&line, fmt, ap);
  va_end(ap);
  ag->cfg->report(ag->cfg->report_data, kind, mu_buf_str(&line));
  mu_buf_release(&line);
}

int mu_agent_client(const struct mu_agent *ag, struct mu_client **out, struct mu_buf *err)
{
  const struct mu_client_backend *b = ag->cfg->backend;
  return mu_client_open(b != NULL ? b : mu_client_backend_of(ag->endpoint), ag->endpoint, out, err);
}

int mu_agent_said(const struct mu_client *c, int rc, struct mu_buf *err)
{
  if (rc != 0)
    mu_buf_puts(err, mu_client_errmsg(c));
  return rc;
}

static long long now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  (void)st;
  (void)flag;
  (void)ftw;
  remove(path);
  return 0;
}

/* The low end of the ports the kernel hands out to binds of port 0 and to outgoing connections
 * (ip_local_port_range), or 32768, Linux's default, when it cannot be read. */
static int ephemeral_low(void)
{
  int lo = 32768;
  FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "re");
  if (f != NULL) {
    if (fscanf(f, "%d", &lo) != 1 || lo < 2048 || lo > 65535)
      lo = 32768;
    fclose(f);
  }
  return lo;
}

/* Binds `port` (0: any) on every address. Returns: the port bound then released, or 0. */
static int try_port(int port)
{
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return 0;
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = htons((uint16_t)port);
  socklen_t sl = sizeof(a);
  int got = 0;
  if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &sl) == 0)
    got = ntohs(a.sin_port);
  close(fd);
  return got;
}

/* A port that is free right now, offered as MASTER_PORT (the master's workers bind it). It is
 * drawn below the kernel's ephemeral range: a port from that range (what a bind of port 0
 * answers, torchrun's way) can be taken by any outgoing connection of the host before rank 0's
 * store binds it (EADDRINUSE on a busy host), while below it only an explicit bind takes one.
 * Port 0's answer is the fallback. */
static int pick_free_port(void)
{
  int hi = ephemeral_low(), lo = hi - 12000 > 1024 ? hi - 12000 : 1024;
  for (int i = 0; i < 64 && hi - lo >= 256; i++) {
    uint32_t r = 0;
    if (mu_random_bytes(&r, sizeof(r)) != 0)
      break;
    int port = try_port(lo + (int)(r % (uint32_t)(hi - lo)));
    if (port != 0)
      return port;
  }
  return try_port(0);
}

const char *mu_agent_ranks(char *buf, size_t n, int first, int count)
{
  if (count == 1)
    snprintf(buf, n, "rank %d", first);
  else
    snprintf(buf, n, "ranks %d-%d", first, first + count - 1);
  return buf;
}

/* SIGINT/SIGTERM outside an attempt (joining, between attempts): the handler writes the signal
 * to a pipe that is the main connection's cancel fd, so that a blocking join returns at once and
 * the agent still cleans up (its temporary directory) and exits 128 + the signal. An attempt
 * installs libuv's own handlers, which put the default back when it ends: arm() again. */
static int sig_pipe[2] = {-1, -1};
static volatile sig_atomic_t sig_seen;

static void on_join_signal(int sig)
{
  unsigned char c = (unsigned char)sig;
  sig_seen = sig;
  if (write(sig_pipe[1], &c, 1) < 0) {
    /* the pipe is full: a signal is already pending */
  }
}

static void arm_join_signals(void)
{
  static const int sigs[] = {SIGINT, SIGTERM, 0};
  mu_proc_catch(on_join_signal, sigs);
}

/* ---------------------------------------------------------------------------------------------
 * Join
 */

/* Before the long poll: learns this node's address (the one that reaches the service) and
 * checks that the endpoint answers as a rendezvous service.
 * Returns: 0; -1 to retry (not reachable yet); or an exit code with the message in err. */
/* The run was shut after this node's failure found no restart left (the shut waited for the
 * others to re-join): the same words as a shut at once. Returns: the exit code. */
static int failed_for_good(const struct mu_agent *ag, struct mu_buf *err)
{
  struct mu_buf why = MU_BUF_INIT(SIZE_MAX);
  mu_failrec_summary(&ag->last_failure, &why);
  mu_buf_clear(err);
  mu_buf_printf(err, "run '%s' failed: %s, no restart left (--max-restarts %ld, the run's)",
                ag->cfg->run_id, mu_buf_str(&why), ag->answer.max_restarts);
  mu_buf_release(&why);
  return MU_AGENT_EXIT_FAILED;
}

/* join()'s answer when the run finished successfully while this node waited to join (a
 * standby that was not needed), or while this node, a member before, was cut off from it: the
 * agent ends with success. */
#define JOIN_RUN_DONE (-2)

static int probe_endpoint(struct mu_agent *ag, long long retry_until, int *warned,
                          struct mu_buf *err)
{
  const struct mu_agent_config *cfg = ag->cfg;
  struct mu_buf e = MU_BUF_INIT(SIZE_MAX);
  int code = 0;
  int rc = mu_agent_said(ag->rdzv,
                         mu_client_heartbeat(ag->rdzv, cfg->run_id, ag->node_id, NULL, NULL), &e);
  if (rc == MU_ECONN || rc == MU_ETIMEDOUT) {
    if (now_ms() >= retry_until) {
      mu_buf_printf(err,
                    "cannot reach the rendezvous endpoint '%s': %s; check --rdzv-endpoint "
                    "(HOST:PORT of a running musterd, or the etcd members with --rdzv-backend "
                    "etcd-v3)",
                    ag->endpoint, mu_buf_str(&e));
      code = MU_AGENT_EXIT_RENDEZVOUS;
    } else {
      if (!(*warned)++)
        mu_agent_say(ag, MU_AGENT_PROGRESS,
                     "rendezvous endpoint '%s' not reachable yet (%s); retrying", ag->endpoint,
                     mu_buf_str(&e));
      code = -1;
    }
  } else if (rc == MU_EAUTH) {
    mu_buf_printf(err,
                  "the rendezvous endpoint '%s' refused this agent: %s; give the run's token in "
                  "MUSTER_RDZV_TOKEN or MUSTER_RDZV_TOKEN_FILE (a job started by muster run "
                  "hands its agents their own)",
                  ag->endpoint, mu_buf_str(&e));
    code = MU_AGENT_EXIT_RENDEZVOUS;
  } else if (rc == MU_EHTTP || rc == MU_EPROTO || rc == MU_E2BIG) {
    mu_buf_printf(err, "'%s' is not a musterd rendezvous endpoint: %s", ag->endpoint,
                  mu_buf_str(&e));
    code = MU_AGENT_EXIT_RENDEZVOUS;
  } else if (rc == MU_ECLOSED && ag->attempt > 0) { /* issue 30 item 3 */
    mu_agent_say(ag, MU_AGENT_PROGRESS,
                 "run '%s' ended succeeded while this node was cut off from it (%s); nothing to "
                 "do",
                 cfg->run_id, mu_buf_str(&e));
    code = JOIN_RUN_DONE;
  } else if (rc == MU_ESHUT && ag->shut_pending) {
    code = failed_for_good(ag, err);
  } else if (rc == MU_ECLOSED || rc == MU_ESHUT) {
    mu_buf_printf(err, "cannot join run '%s': %s; use a new --rdzv-id", cfg->run_id,
                  mu_buf_str(&e));
    code = rc == MU_ESHUT ? mu_agent_shut_exit(mu_buf_str(&e)) : MU_AGENT_EXIT_RENDEZVOUS;
  } else if (cfg->local_addr == NULL &&
             mu_client_local_addr(ag->rdzv, ag->addr, sizeof(ag->addr)) != 0) {
    snprintf(ag->addr, sizeof(ag->addr), "127.0.0.1");
  }
  mu_buf_release(&e);
  return code;
}

/* The exit code and message of a join that failed for good with rc (e: the backend's words). */
static int join_failed(const struct mu_agent *ag, int rc, const char *e, struct mu_buf *err)
{
  const struct mu_agent_config *cfg = ag->cfg;
  switch (rc) {
  case MU_ETIMEDOUT:
    mu_buf_printf(err, "join of run '%s' timed out after %.0f s (--join-timeout): %s", cfg->run_id,
                  cfg->join_timeout_s, e);
    break;
  case MU_ESTATE:
    mu_buf_printf(err, "cannot join run '%s': %s; every agent of a run needs the same --nnodes",
                  cfg->run_id, e);
    break;
  case MU_ECLOSED:
  case MU_ESHUT:
    if (rc == MU_ESHUT && ag->shut_pending)
      return failed_for_good(ag, err);
    mu_buf_printf(err, "cannot join run '%s': %s", cfg->run_id, e);
    return rc == MU_ESHUT ? mu_agent_shut_exit(e) : MU_AGENT_EXIT_RENDEZVOUS;
  default:
    mu_buf_printf(err, "cannot join run '%s' at '%s': %s", cfg->run_id, ag->endpoint, e);
    break;
  }
  return MU_AGENT_EXIT_RENDEZVOUS;
}

/* The waiting line: while a join waits, a thread says every few seconds what it waits for,
 * from the run's state on its own connection (the join itself is one long poll). */
struct waiter {
  struct mu_agent *ag;
  int cancel[2];
  long long start_ms;
  uv_thread_t thread;
  int started;
};

static void say_waiting(struct mu_agent *ag, struct mu_client *r, long long secs)
{
  const struct mu_agent_config *cfg = ag->cfg;
  struct mu_run_info in;
  struct mu_buf e = MU_BUF_INIT(SIZE_MAX);
  int rc = r != NULL ? mu_agent_said(r, mu_client_run_info(r, cfg->run_id, &in), &e) : MU_ENOTSUP;
  int need = rc == 0 ? cfg->min_nodes - in.waiting : 0;
  char sick[512] = ""; /* why the run cannot reach its minimum: nodes whose check failed */
  if (rc == 0 && in.unhealthy > 0)
    snprintf(sick, sizeof(sick), "; %d unhealthy: node %s: %s", in.unhealthy, in.unhealthy_node,
             in.unhealthy_why);
  if (rc == 0 && strcmp(in.round_state, "active") == 0 && in.nnodes >= in.max_nodes)
    mu_agent_say(ag, MU_AGENT_PROGRESS,
                 "standby: round %ld of run '%s' at %s is active and full (%d of %d nodes); this "
                 "node takes the place of one that is lost or fails, %lld s",
                 in.round, cfg->run_id, ag->endpoint, in.nnodes, in.max_nodes, secs);
  else if (rc == 0 && strcmp(in.round_state, "active") == 0 && in.waiting > 0)
    mu_agent_say(ag, MU_AGENT_PROGRESS,
                 "waiting to be admitted: round %ld of run '%s' at %s is active with %d of at most "
                 "%d nodes (%d waiting), %lld s",
                 in.round, cfg->run_id, ag->endpoint, in.nnodes, in.max_nodes, in.waiting, secs);
  else if (rc == 0 && need > 0)
    mu_agent_say(ag, MU_AGENT_PROGRESS,
                 "waiting for %d more node%s (%d of %d joined%s) in run '%s' at %s, %lld s", need,
                 need == 1 ? "" : "s", in.waiting, cfg->min_nodes, sick, cfg->run_id, ag->endpoint,
                 secs);
  else if (rc == 0)
    mu_agent_say(ag, MU_AGENT_PROGRESS,
                 "waiting for the round to close (%d joined, %d to %d wanted; last call) in run "
                 "'%s' at %s, %lld s",
                 in.waiting, cfg->min_nodes, cfg->max_nodes, cfg->run_id, ag->endpoint, secs);
  else if (rc != MU_ENOENT && rc != MU_ENOTSUP && e.len > 0) /* e.g. the endpoint is down */
    mu_agent_say(ag, MU_AGENT_PROGRESS,
                 "cannot read run '%s' at '%s' yet (%s); the join retries, %lld s", cfg->run_id,
                 ag->endpoint, mu_buf_str(&e), secs);
  else
    mu_agent_say(ag, MU_AGENT_PROGRESS, "waiting for %d node%s to join run '%s' at %s, %lld s",
                 cfg->min_nodes, cfg->min_nodes == 1 ? "" : "s", cfg->run_id, ag->endpoint, secs);
  mu_buf_release(&e);
}

static void waiter_main(void *arg)
{
  struct waiter *w = arg;
  struct mu_client *r = NULL;
  struct mu_buf e = MU_BUF_INIT(SIZE_MAX);
  if (mu_agent_client(w->ag, &r, &e) == 0) {
    mu_client_set_cancel_fd(r, w->cancel[0]);
    mu_client_set_timeout(r, 2000);
  }
  /* The first line after 3 s, then every 5 s for a minute, then every 30 s. */
  for (long long next = 3000;; next += next < 60000 ? 5000 : 30000) {
    long long left = w->start_ms + next - now_ms();
    struct pollfd p = {w->cancel[0], POLLIN, 0};
    if (left > 0 && poll(&p, 1, (int)left) != 0)
      break;
    say_waiting(w->ag, r, (now_ms() - w->start_ms) / 1000);
  }
  mu_client_free(r);
  mu_buf_release(&e);
}

static void waiter_start(struct waiter *w, struct mu_agent *ag)
{
  memset(w, 0, sizeof(*w));
  w->ag = ag;
  w->start_ms = now_ms();
  if (pipe(w->cancel) != 0) {
    w->cancel[0] = w->cancel[1] = -1;
    return;
  }
  fcntl(w->cancel[0], F_SETFD, FD_CLOEXEC);
  fcntl(w->cancel[1], F_SETFD, FD_CLOEXEC);
  w->started = uv_thread_create(&w->thread, waiter_main, w) == 0;
}

static void waiter_stop(struct waiter *w)
{
  if (w->started) {
    ssize_t wr = write(w->cancel[1], "x", 1);
    (void)wr;
    uv_thread_join(&w->thread);
  }
  if (w->cancel[0] >= 0) {
    close(w->cancel[0]);
    close(w->cancel[1]);
  }
}

/* The node rank a static node id carries ("node<R>-..."), or -1. */
static int static_rank_of(const char *node_id)
{
  long r = 0;
  char digits[16];
  size_t n = 0;
  if (strncmp(node_id, "node", 4) != 0)
    return -1;
  node_id += 4;
  while (n + 1 < sizeof(digits) && node_id[n] >= '0' && node_id[n] <= '9') {
    digits[n] = node_id[n];
    n++;
  }
  digits[n] = '\0';
  if (n == 0 || node_id[n] != '-' || mu_parse_long(digits, 0, 1000000, &r) != 0)
    return -1;
  return (int)r;
}

/* torchrun's static rendezvous (--node_rank): the round joined by every node is renumbered so
 * that each node has the node rank it was given, whatever the order they joined in; MASTER_ADDR
 * is --master_addr, and node rank 0 publishes the MASTER_PORT it found free in the run's KV
 * (the others read it), since it is node rank 0's workers that bind it.
 * Returns: 0, or an exit code with the message in err. */
static int static_ranks(struct mu_agent *ag, int offered_port, struct mu_buf *err)
{
  const struct mu_agent_config *cfg = ag->cfg;
  struct mu_round *r = &ag->round;
  int n = (int)r->nmembers, code = 0;
  int *seen = mu_calloc((size_t)(n ? n : 1), sizeof(*seen));
  struct mu_buf e = MU_BUF_INIT(SIZE_MAX);
  char *val = NULL;
  for (int i = 0; i < n; i++) {
    int k = static_rank_of(r->members[i].node_id);
    if (k < 0 || k >= n || seen[k]) {
      mu_buf_printf(err,
                    "static rendezvous of run '%s': node '%s' has no node rank of its own in "
                    "0..%d; give each node a different --node_rank below --nnodes",
                    cfg->run_id, r->members[i].node_id, n - 1);
      code = MU_AGENT_EXIT_USAGE;
      goto out;
    }
    seen[k] = 1;
  }
  for (int i = 0; i < n; i++) {
    struct mu_member *m = &r->members[i];
    int k = static_rank_of(m->node_id), off = 0;
    for (int j = 0; j < n; j++)
      if (static_rank_of(r->members[j].node_id) < k)
        off += r->members[j].local_world_size;
    m->node_rank = k;
    m->rank_offset = off;
    if (strcmp(m->node_id, ag->node_id) == 0) {
      r->node_rank = k;
      r->rank_offset = off;
    }
  }
  char key[64];
  snprintf(key, sizeof(key), "static.master_port.%ld", r->round);
  if (cfg->static_rank == 0) {
    char port[16];
    int len = snprintf(port, sizeof(port), "%d", offered_port);
    r->master_port = offered_port;
    if (mu_agent_said(ag->rdzv,
                      mu_client_kv_put(ag->rdzv, cfg->run_id, key, port, (size_t)len, NULL),
                      &e) != 0) {
      mu_buf_printf(err, "static rendezvous of run '%s': cannot publish MASTER_PORT: %s",
                    cfg->run_id, mu_buf_str(&e));
      code = MU_AGENT_EXIT_RENDEZVOUS;
      goto out;
    }
  } else {
    size_t len = 0;
    long port = 0;
    if (mu_agent_said(ag->rdzv, mu_client_kv_get(ag->rdzv, cfg->run_id, key, 60000, &val, &len),
                      &e) != 0 ||
        mu_parse_long(val, 1, 65535, &port) != 0) {
      mu_buf_printf(err, "static rendezvous of run '%s': no MASTER_PORT from node rank 0: %s",
                    cfg->run_id, mu_buf_str(&e));
      code = MU_AGENT_EXIT_RENDEZVOUS;
      goto out;
    }
    r->master_port = (int)port;
  }
  if (cfg->master_addr != NULL) {
    mu_free(r->master_addr);
    r->master_addr = mu_strdup(cfg->master_addr);
  }
out:
  mu_free(val);
  mu_free(seen);
  mu_buf_release(&e);
  return code;
}

/* What this node asks of the run when it joins (and when it reports its health): its id,
 * address and workers, the run's size, timings and restart budget. */
static void join_opts(const struct mu_agent *ag, struct mu_join_opts *o)
{
  const struct mu_agent_config *cfg = ag->cfg;
  memset(o, 0, sizeof(*o));
  o->node_id = ag->node_id;
  o->addr = ag->addr[0] != '\0' ? ag->addr : "0.0.0.0"; /* not known before the first call */
  o->local_world_size = cfg->nproc_per_node;
  o->min_nodes = cfg->min_nodes;
  o->max_nodes = cfg->max_nodes;
  o->last_call_ms = cfg->last_call_s >= 0 ? (long)(cfg->last_call_s * 1000) : -1;
  o->join_timeout_ms = (long)(cfg->join_timeout_s * 1000);
  o->lease_ttl_ms = cfg->lease_ttl_s > 0 ? (long)(cfg->lease_ttl_s * 1000) : -1;
  o->budget = 1; /* --max-restarts is the run's budget, kept by the rendezvous */
  o->max_restarts = cfg->max_restarts;
}

/* How long join() retries an endpoint it cannot reach: an agent that never reached it (a wrong
 * --rdzv-endpoint, a musterd not up yet) tries for 30 s at most; one that was in the run (a
 * network partition, musterd's host cut) tries for as long as the run can use it, the run's
 * join timeout, so that it comes back after the heal. */
static long long retry_window_ms(const struct mu_agent *ag)
{
  long long join_ms = (long long)(ag->cfg->join_timeout_s * 1000);
  return ag->reached || join_ms < 30000 ? join_ms : 30000;
}

/* The pause before retry n (0, 1, ...): 250 ms doubling to 2 s. */
static long long backoff_ms(int n)
{
  return n >= 3 ? 2000 : 250LL << n;
}

/* Joins, retrying an unreachable endpoint with backoff (retry_window_ms()).
 * Returns: 0, JOIN_RUN_DONE, or an exit code with the message in err. */
static int join(struct mu_agent *ag, struct mu_buf *err)
{
  const struct mu_agent_config *cfg = ag->cfg;
  long long deadline = now_ms() + (long long)(cfg->join_timeout_s * 1000);
  long long retry_until = now_ms() + retry_window_ms(ag);
  struct mu_buf e = MU_BUF_INIT(SIZE_MAX);
  int warned = 0, code = 0, offered_port = 0, probed = 0, tries = 0;
  char ranks[48];
  struct waiter waiter;
  waiter_start(&waiter, ag);
  for (;;) {
    mu_round_release(&ag->round);
    mu_buf_clear(&e);
    /* the probe also tells a run that ended already (an error) from one that ends while this
     * join waits (a standby not needed: JOIN_RUN_DONE) */
    if (!probed || ag->addr[0] == '\0' || cfg->local_addr == NULL) {
      code = probe_endpoint(ag, retry_until, &warned, err);
      probed = code == 0;
      if (code < 0 && code != JOIN_RUN_DONE) {
        code = 0;
        usleep((useconds_t)(backoff_ms(tries++) * 1000));
        continue;
      }
      ag->reached = 1;
      if (code != 0)
        break;
    }
    long long left = deadline - now_ms();
    if (left <= 0) {
      mu_buf_printf(err,
                    "join of run '%s' timed out after %.0f s (--join-timeout); fewer than %d "
                    "nodes joined",
                    cfg->run_id, cfg->join_timeout_s, cfg->min_nodes);
      code = MU_AGENT_EXIT_RENDEZVOUS;
      break;
    }
    struct mu_join_opts o;
    join_opts(ag, &o);
    o.master_port = offered_port = pick_free_port();
    o.join_timeout_ms = (long)left;
    int rc = mu_agent_said(ag->rdzv, mu_client_join(ag->rdzv, cfg->run_id, &o, &ag->round), &e);
    if (rc == 0)
      break;
    if (rc == MU_ECLOSED) { /* the run was open when this join began (the probe said so) */
      mu_agent_say(ag, MU_AGENT_PROGRESS,
                   "run '%s' finished while this node waited to join (%s); nothing to do",
                   cfg->run_id, mu_buf_str(&e));
      code = JOIN_RUN_DONE;
      break;
    }
    /* a connection dropped mid-join (the network, musterd's host cut): not the run's answer;
     * ESESSION: the run holds this node id (a lost answer, a restart under a fixed id) until its
     * lease ends (docs/rendezvous.md, "Sessions") */
    int dropped = rc == MU_ECONN || rc == MU_EPROTO || (rc == MU_ETIMEDOUT && now_ms() < deadline);
    if ((dropped && now_ms() < retry_until) || (rc == MU_ESESSION && now_ms() < deadline)) {
      if (!warned++)
        mu_agent_say(ag, MU_AGENT_PROGRESS, "join failed (%s); retrying", mu_buf_str(&e));
      usleep((useconds_t)(backoff_ms(tries++) * 1000));
      continue;
    }
    code = join_failed(ag, rc, mu_buf_str(&e), err);
    break;
  }
  waiter_stop(&waiter);
  mu_buf_release(&e);
  if (code == JOIN_RUN_DONE)
    return code;
  if (code == 0 && cfg->static_rank >= 0)
    code = static_ranks(ag, offered_port, err);
  if (code != 0)
    return code;
  ag->restart_count = ag->round.restart_count; /* the run's: TORCHELASTIC_RESTART_COUNT */
  mu_agent_say(
      ag, MU_AGENT_PROGRESS, "run '%s' round %ld: node rank %d of %d, %s of world %d, master %s:%d",
      cfg->run_id, ag->round.round, ag->round.node_rank, ag->round.nnodes,
      mu_agent_ranks(ranks, sizeof(ranks), ag->round.rank_offset, ag->round.local_world_size),
      ag->round.world_size, ag->round.master_addr, ag->round.master_port);
  return 0;
}

/* ---------------------------------------------------------------------------------------------
 * The health check: before every join
 */

/* Sleeps `ms` or until a signal arrives (the join's signal pipe). Returns: 1 on a signal. */
static int nap_or_signal(long long ms)
{
  struct pollfd p = {sig_pipe[0], POLLIN, 0};
  if (sig_pipe[0] < 0)
    return usleep((useconds_t)(ms * 1000)) != 0 && sig_seen != 0;
  return poll(&p, 1, (int)ms) > 0 || sig_seen != 0;
}

/* Tells the rendezvous this node's check failed (output: what it said) or passed again.
 * Returns: 0 to go on checking (a call that failed is a debug line); JOIN_RUN_DONE when the run
 * finished meanwhile; or an exit code with the message in err (the run shut down, another
 * configuration). */
static int health_tell(struct mu_agent *ag, int healthy, const char *output, struct mu_buf *err)
{
  const struct mu_agent_config *cfg = ag->cfg;
  struct mu_join_opts o;
  join_opts(ag, &o);
  long ttl = (long)((cfg->health_check_interval_s + cfg->health_check_timeout_s) * 1000) + 10000;
  int rc = mu_client_health(ag->rdzv, cfg->run_id, &o, healthy, output, ttl, NULL);
  if (rc == MU_ECLOSED) {
    mu_agent_say(ag, MU_AGENT_PROGRESS,
                 "run '%s' finished while this node was unhealthy; nothing to do", cfg->run_id);
    return JOIN_RUN_DONE;
  }
  if (rc == MU_ESHUT || rc == MU_ESTATE) {
    mu_buf_printf(err, "cannot join run '%s': %s", cfg->run_id, mu_client_errmsg(ag->rdzv));
    return rc == MU_ESHUT ? mu_agent_shut_exit(mu_client_errmsg(ag->rdzv))
                          : MU_AGENT_EXIT_RENDEZVOUS;
  }
  if (rc != 0)
    mu_agent_say(ag, MU_AGENT_DEBUG, "health report failed: %s", mu_client_errmsg(ag->rdzv));
  return 0;
}

/* Runs --health-check until it passes: a node whose check fails does not join; it says why
 * with the check's output, tells the rendezvous (which shows the node unhealthy with that
 * output), and runs the check again every --health-check-interval.
 * Returns: 0 once it passed (or with no check), JOIN_RUN_DONE when the run finished meanwhile,
 * or an exit code (a signal, the run shut down) with err set. */
static int health_gate(struct mu_agent *ag, struct mu_buf *err)
{
  const struct mu_agent_config *cfg = ag->cfg;
  if (cfg->health_check == NULL)
    return 0;
  struct mu_buf out = MU_BUF_INIT(SIZE_MAX), why = MU_BUF_INIT(SIZE_MAX);
  int code = 0;
  for (int n = 1;; n++) {
    mu_buf_clear(&out);
    mu_buf_clear(&why);
    if (mu_agent_health_check(cfg, &out, &why) == 0) {
      if (why.len > 0) /* a builtin's note: what it checked, or why it skipped */
        mu_agent_say(ag, MU_AGENT_PROGRESS, "health check: %s", mu_buf_str(&why));
      if (n > 1) {
        mu_agent_say(ag, MU_AGENT_PROGRESS, "health check passed (check %d); joining", n);
        code = health_tell(ag, 1, NULL, err);
      }
      break;
    }
    struct mu_buf shown = MU_BUF_INIT(SIZE_MAX); /* each line of the output as "    | ..." */
    for (const char *p = mu_buf_str(&out); *p != '\0';) {
      size_t len = strcspn(p, "\n");
      mu_buf_printf(&shown, "\n    | %.*s", (int)len, p);
      p += len + (p[len] == '\n');
    }
    mu_agent_say(ag, MU_AGENT_PROGRESS,
                 "health check failed (%s): this node does not join run '%s'; checking again in "
                 "%g s. Its output:%s",
                 mu_buf_str(&why), cfg->run_id, cfg->health_check_interval_s,
                 shown.len > 0 ? mu_buf_str(&shown) : " none");
    mu_buf_release(&shown);
    code = health_tell(ag, 0, out.len > 0 ? mu_buf_str(&out) : mu_buf_str(&why), err);
    if (code != 0)
      break;
    if (nap_or_signal((long long)(cfg->health_check_interval_s * 1000))) {
      code = MU_AGENT_EXIT_SIGNAL_BASE + sig_seen;
      mu_buf_clear(err);
      break;
    }
  }
  mu_buf_release(&out);
  mu_buf_release(&why);
  return code;
}

/* ---------------------------------------------------------------------------------------------
 * The run
 */

/* Names this node (--node-id, else host-pid-random) and finds this binary for the
 * --exec-worker shim. */
static void identify(struct mu_agent *ag)
{
  const struct mu_agent_config *cfg = ag->cfg;
  if (cfg->static_rank >= 0) {
    /* static: the id carries the node rank (static_ranks() reads it back) */
    char host[200] = "host";
    gethostname(host, sizeof(host) - 1);
    snprintf(ag->node_id, sizeof(ag->node_id), "node%d-%s", cfg->static_rank,
             cfg->node_id != NULL ? cfg->node_id : host);
  } else if (cfg->node_id != NULL) {
    snprintf(ag->node_id, sizeof(ag->node_id), "%s", cfg->node_id);
  } else {
    char host[200] = "node";
    gethostname(host, sizeof(host) - 1);
    unsigned seed = (unsigned)now_ms() ^ (unsigned)getpid();
    snprintf(ag->node_id, sizeof(ag->node_id), "%s-%d-%04x", host, (int)getpid(),
             (unsigned)rand_r(&seed) & 0xffff);
  }
  if (cfg->local_addr != NULL)
    snprintf(ag->addr, sizeof(ag->addr), "%s", cfg->local_addr);
#ifdef __linux__
  size_t exe_len = sizeof(ag->exe);
  if (getenv("MUSTER_AGENT_NO_SHIM") != NULL || uv_exepath(ag->exe, &exe_len) != 0)
    ag->exe[0] = '\0';
#endif
}

/* The directory the attempts' files go to: <log dir>/<run id>, else a temporary one.
 * Returns: 0, or an exit code with the message in err. */
static int make_base_dir(struct mu_agent *ag, struct mu_buf *err)
{
  const struct mu_agent_config *cfg = ag->cfg;
  if (cfg->log_dir != NULL) {
    if (snprintf(ag->base_dir, sizeof(ag->base_dir), "%s/%s", cfg->log_dir, cfg->run_id) >=
            (int)sizeof(ag->base_dir) ||
        mu_mkdir_p(cfg->log_dir) != 0) {
      mu_buf_printf(err, "cannot create the log directory '%s/%s': %s; check --log-dir",
                    cfg->log_dir, cfg->run_id, strerror(errno));
      return MU_AGENT_EXIT_USAGE;
    }
    return mu_agent_own_log_dir(cfg->log_dir, ag->base_dir, err);
  }
  const char *tmp = getenv("TMPDIR");
  snprintf(ag->base_dir, sizeof(ag->base_dir), "%s/muster-agent-XXXXXX",
           tmp && *tmp ? tmp : "/tmp");
  if (mkdtemp(ag->base_dir) == NULL) {
    mu_buf_printf(err, "cannot create a temporary directory in '%s': %s",
                  tmp && *tmp ? tmp : "/tmp", strerror(errno));
    return MU_AGENT_EXIT_FAILED;
  }
  ag->own_base_dir = 1;
  return 0;
}

/* The run's client, the signal pipe that cancels its calls, the attempts' directory.
 * Returns: 0, or an exit code with the message in err. */
static int start(struct mu_agent *ag, struct mu_buf *err)
{
  struct mu_buf e = MU_BUF_INIT(SIZE_MAX);
  int rc = mu_agent_client(ag, &ag->rdzv, &e);
  mu_buf_release(&e);
  if (rc != 0) {
    mu_buf_printf(err, "bad --rdzv-endpoint '%s'; use HOST:PORT", ag->endpoint);
    return MU_AGENT_EXIT_USAGE;
  }
  mu_client_set_timeout(ag->rdzv, 10000);
  if (sig_pipe[0] < 0 && pipe(sig_pipe) == 0) {
    for (int i = 0; i < 2; i++) {
      fcntl(sig_pipe[i], F_SETFD, FD_CLOEXEC);
      fcntl(sig_pipe[i], F_SETFL, O_NONBLOCK);
    }
  }
  if (sig_pipe[0] >= 0)
    mu_client_set_cancel_fd(ag->rdzv, sig_pipe[0]);
  return make_base_dir(ag, err);
}

/* After a worker failed or hung, as the rendezvous answered the attempt's report: the run shut
 * down (no restart left: exit 1), a restart counted, or the round had already ended another
 * way (another node's failure, a loss, a change: no restart counted). Returns: -1 to join
 * again, or the exit code with the message in err. */
static int after_failure(struct mu_agent *ag, struct mu_buf *err)
{
  const struct mu_agent_config *cfg = ag->cfg;
  const struct mu_report_answer *a = &ag->answer;
  mu_agent_failure_report(ag);
  if (ag->reported == MU_ESHUT || ag->reported == MU_ECLOSED) { /* ended by another node */
    mu_buf_printf(err, "run '%s' failed: %s", cfg->run_id, ag->report_err);
    return mu_agent_shut_exit(ag->report_err);
  }
  if (mu_agent_stop_retrying(ag, err))
    return MU_AGENT_EXIT_NO_PROGRESS;
  if (ag->reported != 1) {
    mu_agent_say(ag, MU_AGENT_PROGRESS,
                 "cannot report the failure to the rendezvous (%s); re-joining run '%s'",
                 ag->report_err, cfg->run_id);
  } else if ((strcmp(a->state, "shut") == 0 || strcmp(a->state, "closed") == 0) && a->counted) {
    struct mu_buf why = MU_BUF_INIT(SIZE_MAX); /* this node's failure spent the budget */
    mu_failrec_summary(&ag->last_failure, &why);
    mu_buf_printf(err, "run '%s' failed: %s, no restart left (--max-restarts %ld, the run's)",
                  cfg->run_id, mu_buf_str(&why), a->max_restarts);
    mu_buf_release(&why);
    return MU_AGENT_EXIT_FAILED;
  } else if (strcmp(a->state, "shut") == 0 || strcmp(a->state, "closed") == 0) {
    mu_buf_printf(err, "run '%s' failed: %s", cfg->run_id, a->reason);
    return mu_agent_shut_exit(a->reason);
  } else if (!a->counted) {
    mu_agent_say(ag, MU_AGENT_PROGRESS,
                 "round %ld of run '%s' had already ended (another node's failure, a lost node "
                 "or a change): re-joining without counting a restart",
                 ag->round.round, cfg->run_id);
  } else if (strcmp(a->state, "open") == 0 && a->reason[0] != '\0') { /* the shut waits */
    ag->shut_pending = 1;
    mu_agent_say(ag, MU_AGENT_PROGRESS,
                 "no restart left (--max-restarts %ld, the run's): the run is shut once the "
                 "others re-join, unless a node of the round is found lost first (then the "
                 "loss caused this failure and it counts nothing); re-joining",
                 a->max_restarts);
  } else if (a->max_restarts >= 0) {
    mu_agent_say(ag, MU_AGENT_PROGRESS, "restarting workers (restart %d of %ld, the run's)",
                 a->restart_count, a->max_restarts);
  } else {
    mu_agent_say(ag, MU_AGENT_PROGRESS, "restarting workers (restart %d of the run)",
                 a->restart_count);
  }
  return -1;
}

/* What an attempt's end means. Returns: -1 to join again, or the exit code (with the message
 * in err). */
static int after_attempt(struct mu_agent *ag, enum mu_agent_outcome oc, struct mu_buf *err)
{
  const struct mu_agent_config *cfg = ag->cfg;
  struct mu_buf e = MU_BUF_INIT(SIZE_MAX);
  int code = MU_AGENT_EXIT_FAILED;
  mu_agent_progress_end(ag); /* whatever ended the attempt: did its job make progress? */
  switch (oc) {
  case MU_AGENT_SUCCEEDED:
    if (ag->nworkers == 1)
      mu_agent_say(ag, MU_AGENT_PROGRESS, "the worker succeeded");
    else
      mu_agent_say(ag, MU_AGENT_PROGRESS, "all %d workers succeeded", ag->nworkers);
    if (ag->left < 0) /* the attempt left the run before its watch closed */
      mu_agent_say(ag, MU_AGENT_PROGRESS, "leave failed: %s", ag->report_err);
    code = MU_AGENT_EXIT_OK;
    break;
  case MU_AGENT_WORKER_FAILED:
    code = after_failure(ag, err);
    break;
  case MU_AGENT_REJOIN:
    code = -1;
    break;
  case MU_AGENT_RUN_CLOSED:
    mu_buf_printf(err, "run '%s' was closed while this node's workers ran", cfg->run_id);
    code = MU_AGENT_EXIT_RENDEZVOUS;
    break;
  case MU_AGENT_RUN_SHUT:
    mu_buf_printf(err, "run '%s' was shut down by another node; workers stopped", cfg->run_id);
    code = mu_agent_shut_exit(ag->posted_msg);
    break;
  case MU_AGENT_SIGNALED:
    mu_client_leave(ag->rdzv, cfg->run_id, ag->node_id, 0, "agent stopped by a signal");
    code = MU_AGENT_EXIT_SIGNAL_BASE + ag->signal_seen;
    break;
  case MU_AGENT_RUNNING:
    break;
  }
  mu_buf_release(&e);
  return code;
}

int mu_agent_run(const struct mu_agent_config *cfg, struct mu_buf *err)
{
  struct mu_agent ag;
  memset(&ag, 0, sizeof(ag));
  ag.cfg = cfg;
  ag.endpoint = cfg->endpoint;
  uv_mutex_init(&ag.mu);
  uv_cond_init(&ag.rep_cond);
  uv_cond_init(&ag.share_cond);
  identify(&ag);
  int code = mu_agent_progress_init(&ag, err);
  if (code == 0)
    code = start(&ag, err);
  while (code == 0) {
    if (sig_pipe[0] >= 0)
      arm_join_signals();
    code = health_gate(&ag, err);
    if (code == 0)
      code = join(&ag, err);
    if (sig_seen != 0) { /* during the join, or between it and the attempt's own handlers */
      mu_buf_clear(err);
      code = MU_AGENT_EXIT_SIGNAL_BASE + sig_seen;
    }
    if (code == JOIN_RUN_DONE) {
      code = MU_AGENT_EXIT_OK;
      break;
    }
    if (code != 0)
      break;
    enum mu_agent_outcome oc = mu_agent_attempt(&ag);
    code = after_attempt(&ag, ag.signal_seen != 0 ? MU_AGENT_SIGNALED : oc, err);
    if (code < 0) {
      mu_agent_workers_free(&ag);
      code = 0;
    } else if (code == 0) {
      break; /* succeeded */
    }
  }
  mu_agent_workers_free(&ag);
  mu_failrec_release(&ag.last_failure);
  mu_round_release(&ag.round);
  mu_client_free(ag.rdzv);
  if (ag.own_base_dir)
    nftw(ag.base_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  mu_agent_progress_release(&ag);
  uv_cond_destroy(&ag.share_cond);
  uv_cond_destroy(&ag.rep_cond);
  uv_mutex_destroy(&ag.mu);
  return code;
}
