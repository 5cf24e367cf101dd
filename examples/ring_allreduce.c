/* A C worker for muster agent: a ring all-reduce over TCP between all ranks, verified.
 *
 * It reads the torchrun environment (RANK, WORLD_SIZE, ...) and MUSTER_RDZV_ENDPOINT /
 * MUSTER_RUN_ID / MUSTER_ROUND, listens on a free port, publishes "ADDR:PORT" in the run's KV
 * (key ring.ROUND.RANK), reads its right neighbour's address from the KV (waiting for it),
 * and runs a reduce-scatter + all-gather ring on int64 vectors. Exit 0 when every element
 * equals the expected sum, 1 otherwise.
 *
 *   ring_allreduce [--count N] [--iters K] [--sleep-ms MS] [--fail-rank R [--fail-restart C]]
 *                  [--timeout-ms MS]
 *
 * With MUSTER_HEARTBEAT_FILE set (muster agent sets it), each iteration writes "step N" to it:
 * the agent's hang watch sees the ring move, and sees it stop when a peer's host goes silent.
 *
 * --fail-rank makes rank R exit 1 (after writing TORCHELASTIC_ERROR_FILE as torch's error
 * handler does) while TORCHELASTIC_RESTART_COUNT == C (default 0): a worker that fails once.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "muster/client.h"

#include "alloc.h"
#include "opts.h"

static int g_rank = -1;
static pid_t g_parent;
static long long g_deadline;

static long long now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void die(const char *what)
{
  fprintf(stderr, "ring_allreduce rank %d: %s\n", g_rank, what);
  exit(1);
}

static long env_long(const char *name, long dflt)
{
  const char *s = getenv(name);
  long v = 0;
  if (s == NULL)
    return dflt;
  if (mu_parse_long(s, 0, 1L << 30, &v) != 0) {
    fprintf(stderr, "ring_allreduce: %s='%s' is not a number\n", name, s);
    exit(1);
  }
  return v;
}

/* The agent that started us is gone (SIGKILL): do not linger as an orphan. */
static void check_parent(void)
{
  if (getppid() != g_parent)
    die("parent agent exited; stopping");
  if (now_ms() > g_deadline)
    die("timed out");
}

/* One step done: "step N" to the agent's heartbeat file (its mtime is the progress). */
static void beat(long step)
{
  const char *path = getenv("MUSTER_HEARTBEAT_FILE");
  if (path == NULL || path[0] == '\0')
    return;
  FILE *f = fopen(path, "w");
  if (f == NULL)
    return;
  fprintf(f, "step %ld\n", step);
  fclose(f);
}

static void write_error_file(const char *msg)
{
  const char *path = getenv("TORCHELASTIC_ERROR_FILE");
  if (path == NULL)
    return;
  FILE *f = fopen(path, "w");
  if (f == NULL)
    return;
  fprintf(f, "{\"message\": {\"message\": \"%s\", \"extraInfo\": {\"timestamp\": \"%ld\"}}}\n", msg,
          (long)time(NULL));
  fclose(f);
}

/* Sends slen bytes on sfd while receiving rlen bytes on rfd (full duplex, so large chunks do
 * not deadlock the ring). */
static void exchange(int sfd, const char *sbuf, size_t slen, int rfd, char *rbuf, size_t rlen)
{
  size_t sent = 0, got = 0;
  while (sent < slen || got < rlen) {
    struct pollfd p[2];
    int n = 0, si = -1, ri = -1;
    if (sent < slen) {
      p[n] = (struct pollfd){sfd, POLLOUT, 0};
      si = n++;
    }
    if (got < rlen) {
      p[n] = (struct pollfd){rfd, POLLIN, 0};
      ri = n++;
    }
    int r = poll(p, (nfds_t)n, 200);
    check_parent();
    if (r < 0 && errno != EINTR)
      die("poll failed");
    if (r <= 0)
      continue;
    if (si >= 0 && p[si].revents) {
      ssize_t w = send(sfd, sbuf + sent, slen - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w < 0 && errno != EAGAIN && errno != EINTR)
        die("send to the right neighbour failed (peer gone?)");
      if (w > 0)
        sent += (size_t)w;
    }
    if (ri >= 0 && p[ri].revents) {
      ssize_t w = recv(rfd, rbuf + got, rlen - got, MSG_DONTWAIT);
      if (w == 0)
        die("the left neighbour closed the connection (peer gone?)");
      if (w < 0 && errno != EAGAIN && errno != EINTR)
        die("receive from the left neighbour failed");
      if (w > 0)
        got += (size_t)w;
    }
  }
}

/* Listens on addr (the address that reaches musterd, which peers will use), any port. */
static int listen_on(const char *addr, int *port)
{
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  if (inet_pton(AF_INET, addr, &a.sin_addr) != 1)
    a.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t sl = sizeof(a);
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(fd, 4) != 0 ||
      getsockname(fd, (struct sockaddr *)&a, &sl) != 0)
    die("cannot listen");
  *port = ntohs(a.sin_port);
  return fd;
}

static int connect_to(const char *hostport)
{
  char host[128];
  const char *colon = strrchr(hostport, ':');
  long port = 0;
  if (colon == NULL || (size_t)(colon - hostport) >= sizeof(host) ||
      mu_parse_long(colon + 1, 1, 65535, &port) != 0)
    die("bad neighbour address in the KV");
  memcpy(host, hostport, (size_t)(colon - hostport));
  host[colon - hostport] = '\0';
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  if (inet_pton(AF_INET, host, &a.sin_addr) != 1)
    die("neighbour address is not IPv4");
  for (;;) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      return fd;
    }
    close(fd);
    check_parent();
    usleep(50 * 1000);
  }
}

static int accept_one(int lfd)
{
  for (;;) {
    struct pollfd p = {lfd, POLLIN, 0};
    if (poll(&p, 1, 200) > 0) {
      int fd = accept(lfd, NULL, NULL);
      if (fd >= 0) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        return fd;
      }
    }
    check_parent();
  }
}

int main(int argc, char **argv)
{
  long count = 1024, iters = 1, sleep_ms = 0, fail_rank = -1, fail_restart = 0;
  long timeout_ms = 60000;
  struct mu_opt opts[] = {
      MU_OPT_INT(0, "count", &count, "N", "int64 elements per rank and chunk (1024)"),
      MU_OPT_INT(0, "iters", &iters, "K", "all-reduces to run (1)"),
      MU_OPT_INT(0, "sleep-ms", &sleep_ms, "MS", "pause between iterations (0)"),
      MU_OPT_INT(0, "fail-rank", &fail_rank, "R", "this rank exits 1 (-1: none)"),
      MU_OPT_INT(0, "fail-restart", &fail_restart, "C", "...while the restart count is C (0)"),
      MU_OPT_INT(0, "timeout-ms", &timeout_ms, "MS", "give up after MS (60000)"),
      MU_OPT_END(),
  };
  int first = mu_opts_parse(opts, argc, argv, 0, "ring_allreduce [OPTIONS]");
  if (first == MU_OPTS_HELP)
    return 0;
  if (first < 0)
    return 2;
  if (count < 1 || count > (1 << 20) || iters < 1) {
    fprintf(stderr, "ring_allreduce: --count must be 1..1048576 and --iters >= 1\n");
    return 2;
  }
  g_parent = getppid();
  g_deadline = now_ms() + timeout_ms;
  const char *ep = getenv("MUSTER_RDZV_ENDPOINT");
  const char *run_id = getenv("MUSTER_RUN_ID");
  if (ep == NULL || run_id == NULL || getenv("RANK") == NULL || getenv("WORLD_SIZE") == NULL) {
    fprintf(stderr, "ring_allreduce: run me under 'muster agent' (RANK, WORLD_SIZE, "
                    "MUSTER_RDZV_ENDPOINT and MUSTER_RUN_ID must be set)\n");
    return 2;
  }
  g_rank = (int)env_long("RANK", 0);
  int world = (int)env_long("WORLD_SIZE", 1);
  long round = env_long("MUSTER_ROUND", 0);
  long restart = env_long("TORCHELASTIC_RESTART_COUNT", 0);
  printf("rank %d local_rank %ld world %d group %ld/%ld role %s restart %ld master %s:%s "
         "round %ld local_world %ld\n",
         g_rank, env_long("LOCAL_RANK", -1), world, env_long("GROUP_RANK", -1),
         env_long("GROUP_WORLD_SIZE", -1), getenv("ROLE_NAME") ? getenv("ROLE_NAME") : "?", restart,
         getenv("MASTER_ADDR") ? getenv("MASTER_ADDR") : "?",
         getenv("MASTER_PORT") ? getenv("MASTER_PORT") : "?", round,
         env_long("LOCAL_WORLD_SIZE", -1));
  fflush(stdout);
  if (g_rank == fail_rank && restart == fail_restart) {
    char msg[128];
    snprintf(msg, sizeof(msg), "ring_allreduce: injected failure on rank %d (restart %ld)", g_rank,
             restart);
    write_error_file(msg);
    fprintf(stderr, "%s\n", msg);
    return 1;
  }
  if (g_rank < 0 || g_rank >= world)
    die("RANK out of range");

  struct mu_client *cl = NULL;
  if (mu_client_new(ep, &cl) != 0)
    die("bad MUSTER_RDZV_ENDPOINT");
  int lfd = -1, port = 0, right = -1, left = -1;
  if (world > 1) {
    char key[96], val[160], addr[64] = "127.0.0.1";
    /* One call first, so that the client knows the address that reaches the server. */
    snprintf(key, sizeof(key), "ring.%ld.%d", round, g_rank);
    if (mu_client_kv_put(cl, run_id, key, "", 0, NULL) != 0)
      die(mu_client_errmsg(cl));
    mu_client_local_addr(cl, addr, sizeof(addr));
    lfd = listen_on(addr, &port);
    snprintf(val, sizeof(val), "%s:%d", addr, port);
    if (mu_client_kv_put(cl, run_id, key, val, strlen(val), NULL) != 0)
      die(mu_client_errmsg(cl));
    snprintf(key, sizeof(key), "ring.%ld.%d", round, (g_rank + 1) % world);
    char *peer = NULL;
    for (;;) {
      int rc = mu_client_kv_get(cl, run_id, key, 1000, &peer, NULL);
      check_parent();
      if (rc == 0 && peer[0] != '\0')
        break;
      mu_free(peer);
      peer = NULL;
      if (rc != 0 && rc != MU_ETIMEDOUT && rc != MU_ENOENT)
        die(mu_client_errmsg(cl));
      if (rc == 0)
        usleep(20 * 1000);
    }
    /* Even ranks connect first, odd ranks accept first: no ordering deadlock either way
     * because connect() completes against the listen backlog. */
    right = connect_to(peer);
    left = accept_one(lfd);
    mu_free(peer);
  }

  size_t len = (size_t)count * (size_t)world;
  int64_t *data = mu_malloc(len * sizeof(int64_t));
  int64_t *tmp = mu_malloc((size_t)count * sizeof(int64_t));
  size_t cb = (size_t)count * sizeof(int64_t);
  int ok = 1;
  for (long it = 0; it < iters && ok; it++) {
    for (size_t i = 0; i < len; i++)
      data[i] = (int64_t)(g_rank + 1) * (int64_t)(i + 1) + it;
    for (int s = 0; s < world - 1; s++) { /* reduce-scatter */
      int sc = ((g_rank - s) % world + world) % world;
      int rcv = ((g_rank - s - 1) % world + world) % world;
      exchange(right, (char *)(data + (size_t)sc * count), cb, left, (char *)tmp, cb);
      for (long i = 0; i < count; i++)
        data[(size_t)rcv * count + i] += tmp[i];
    }
    for (int s = 0; s < world - 1; s++) { /* all-gather */
      int sc = ((g_rank + 1 - s) % world + world) % world;
      int rcv = ((g_rank - s) % world + world) % world;
      exchange(right, (char *)(data + (size_t)sc * count), cb, left,
               (char *)(data + (size_t)rcv * count), cb);
    }
    int64_t tri = (int64_t)world * (world + 1) / 2;
    for (size_t i = 0; i < len; i++) {
      int64_t want = tri * (int64_t)(i + 1) + (int64_t)world * it;
      if (data[i] != want) {
        fprintf(stderr, "rank %d: element %zu is %lld, want %lld\n", g_rank, i, (long long)data[i],
                (long long)want);
        ok = 0;
        break;
      }
    }
    if (ok)
      beat(it + 1);
    if (ok && sleep_ms > 0) {
      for (long t = 0; t < sleep_ms; t += 50) {
        usleep(50 * 1000);
        check_parent();
      }
    }
  }
  if (ok && world > 1) {
    char name[64], id[32];
    snprintf(name, sizeof(name), "ring.%ld.done", round);
    snprintf(id, sizeof(id), "rank-%d", g_rank);
    if (mu_client_barrier(cl, run_id, name, world, id, timeout_ms, NULL) != 0) {
      fprintf(stderr, "rank %d: barrier failed: %s\n", g_rank, mu_client_errmsg(cl));
      ok = 0;
    }
  }
  if (ok)
    printf("rank %d: allreduce ok, world %d, %ld iteration(s), sum[0]=%lld\n", g_rank, world, iters,
           (long long)data[0]);
  fflush(stdout);
  mu_free(data);
  mu_free(tmp);
  if (right >= 0)
    close(right);
  if (left >= 0)
    close(left);
  if (lfd >= 0)
    close(lfd);
  mu_client_free(cl);
  return ok ? 0 : 1;
}
