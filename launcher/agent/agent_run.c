/* muster agent: the run. Join (blocking, one long poll), then one libuv loop per attempt:
 * the workers (uv_spawn, own process groups, piped output), their exit callbacks, SIGINT/SIGTERM,
 * the stop timer, and an async handle that a watcher thread fires when the round changes. The
 * watcher thread heart-beats once and then long-polls `watch` (which holds the lease) with its
 * own blocking client; a pipe (the cancel fd) interrupts it when the attempt ends.
 *
 * Why a thread and not an async HTTP client on the loop: the blocking client already exists
 * and is tested, and the thread only ever talks to the loop through one uv_async_t and one
 * mutex-protected word. */
#define _XOPEN_SOURCE 700 /* nftw */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>

#include "muster/client.h"
#include "muster/errno.h"

#include "agent.h"
#include "alloc.h"
#include "buf.h"
#include "child.h"
#include "fsutil.h"
#include "log.h"
#include "strvec.h"

extern char **environ;

#define OUT_CAP (1u << 20)
#define ERROR_LINES 12

enum outcome {
  OUT_RUNNING = 0,
  OUT_SUCCEEDED,
  OUT_WORKER_FAILED,
  OUT_REJOIN, /* the round broke or nodes wait: re-join without counting a restart */
  OUT_RUN_CLOSED,
  OUT_RUN_SHUT,
  OUT_SIGNALED,
};

struct agent;

struct worker {
  struct agent *ag;
  int local_rank, rank;
  struct mu_child child; /* the process and its stdout/stderr pipes */
  int spawned, exited, out_open, err_open;
  int64_t exit_status;
  int term_signal;
  int spawn_error;      /* a uv error from uv_spawn */
  int stopped;          /* exited after the agent began stopping the workers */
  int log_out, log_err; /* per-worker files, -1 without --log-dir */
  struct mu_line_prefixer pout, perr;
  char *error_file;
  long long exit_order;
};

struct agent {
  const struct mu_agent_config *cfg;
  const char *endpoint;
  char node_id[256];
  char addr[128];
  char base_dir[PATH_MAX]; /* attempt dirs live here */
  char exe[PATH_MAX];      /* this muster binary, for the --exec-worker shim ("" = none) */
  int own_base_dir;        /* a temp dir we remove at the end */
  struct mu_client *client;
  struct mu_round round;
  int restart_count;
  int attempt;

  /* Per attempt. */
  uv_loop_t loop;
  struct worker *w;
  int nworkers;
  int nexited;
  int open_handles; /* worker processes and pipes not yet closed */
  enum outcome outcome;
  int stopping;
  int failed_idx; /* the first worker that failed on its own, -1 */
  long long exit_seq;
  int signal_seen;
  uv_timer_t kill_timer;
  uv_timer_t drain_timer;
  uv_signal_t sig_int, sig_term;
  uv_async_t async;
  int loop_handles_closed;

  /* Watcher thread. */
  uv_thread_t watcher;
  int watcher_started;
  int cancel_pipe[2];
  uv_mutex_t mu;
  int posted; /* enum mu_watch_event + 1, or 0; read under mu */
  char posted_msg[256];
};

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
  char line[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  fprintf(stderr, "[muster agent] %s\n", line);
  fflush(stderr);
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

/* A port that is free right now, offered as MASTER_PORT (the master's workers bind it). */
static int pick_free_port(void)
{
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int port = 0;
  if (fd < 0)
    return 0;
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t sl = sizeof(a);
  if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &sl) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

/* --- the watcher thread ---------------------------------------------------------------- */

static void post_event(struct agent *ag, enum mu_watch_event ev, const char *msg)
{
  uv_mutex_lock(&ag->mu);
  if (ag->posted == 0) {
    ag->posted = (int)ev + 1;
    snprintf(ag->posted_msg, sizeof(ag->posted_msg), "%s", msg ? msg : "");
  }
  uv_mutex_unlock(&ag->mu);
  uv_async_send(&ag->async);
}

/* Sleeps ms or until canceled. Returns: 1 when canceled. */
static int nap(struct agent *ag, int ms)
{
  struct pollfd p = {ag->cancel_pipe[0], POLLIN, 0};
  return poll(&p, 1, ms) > 0;
}

/* Heart-beats once; returns 1 when the watcher must stop (the event was posted). */
static int watcher_heartbeat(struct agent *ag, struct mu_client *c)
{
  int rc = mu_client_heartbeat(c, ag->cfg->run_id, ag->node_id, NULL, NULL);
  if (rc == MU_ECANCELED)
    return 1;
  if (rc == MU_ENOENT) {
    post_event(ag, MU_WATCH_BROKEN, "this node's lease expired");
    return 1;
  }
  if (rc == MU_ECLOSED || rc == MU_ESHUT) {
    post_event(ag, rc == MU_ECLOSED ? MU_WATCH_CLOSED : MU_WATCH_SHUT, mu_client_errmsg(c));
    return 1;
  }
  if (rc != 0)
    mu_debug("heartbeat failed: %s", mu_client_errmsg(c));
  return 0;
}

/* The watch timeout for a lease of `ttl_ms`: about 3 TTLs, at most 30 s, at least 100 ms. An
 * open watch by a member holds its lease on the server and its end restarts the lease with a
 * full TTL, so the watch length does not race the lease; a long watch only saves requests. */
static long watch_timeout_ms(long ttl_ms)
{
  long t = ttl_ms > 0 ? ttl_ms : 10000;
  t = t > 10000 ? 30000 : t * 3;
  return t < 100 ? 100 : t;
}

/* Heart-beats once, then long-polls `watch` back to back: each open watch holds this member's
 * lease, so a healthy member needs no further heartbeats. After a failed watch (the server was
 * unreachable for a moment, the reply was lost) it heart-beats again, which also tells it when
 * its lease expired meanwhile. A node that is no longer a member gets `broken` at once. */
static void watcher_main(void *arg)
{
  struct agent *ag = arg;
  struct mu_client *c = NULL;
  if (mu_client_new(ag->endpoint, &c) != 0)
    return;
  mu_client_set_cancel_fd(c, ag->cancel_pipe[0]);
  mu_client_set_timeout(c, 5000);
  long wait = watch_timeout_ms(ag->round.lease_ttl_ms);
  int beat = 1;
  for (;;) {
    if (beat && watcher_heartbeat(ag, c))
      break;
    beat = 0;
    enum mu_watch_event ev = MU_WATCH_NONE;
    int rc = mu_client_watch(c, ag->cfg->run_id, ag->node_id, ag->round.round, wait, &ev, NULL);
    if (rc == MU_ECANCELED)
      break;
    if (rc == MU_ECLOSED || rc == MU_ESHUT) {
      post_event(ag, rc == MU_ECLOSED ? MU_WATCH_CLOSED : MU_WATCH_SHUT, mu_client_errmsg(c));
      break;
    }
    if (rc == 0 && ev != MU_WATCH_NONE) {
      post_event(ag, ev, NULL);
      break;
    }
    if (rc != 0) {
      mu_debug("watch failed: %s", mu_client_errmsg(c));
      beat = 1;
      if (nap(ag, 200))
        break;
    }
  }
  mu_client_free(c);
}

/* --- workers ------------------------------------------------------------------------------ */

static void maybe_finish(struct agent *ag);

static void on_handle_closed(uv_handle_t *h)
{
  struct worker *w = h->data;
  struct agent *ag = w->ag;
  ag->open_handles--;
  maybe_finish(ag);
}

static void kill_groups(struct agent *ag, int sig)
{
  for (int i = 0; i < ag->nworkers; i++) {
    struct worker *w = &ag->w[i];
    if (!w->spawned)
      continue;
    /* Each worker leads its own group (UV_PROCESS_DETACHED = setsid). Signal the group even
     * after the leader exited: children it forked may linger. */
    if (kill(-w->child.proc.pid, sig) != 0 && !w->exited)
      kill(w->child.proc.pid, sig);
  }
}

static void on_kill_timer(uv_timer_t *t)
{
  struct agent *ag = t->data;
  if (ag->nexited < ag->nworkers)
    say("workers did not stop within %.1f s of SIGTERM; sending SIGKILL", ag->cfg->stop_grace_s);
  kill_groups(ag, SIGKILL);
}

static void begin_stop(struct agent *ag, int sig)
{
  if (ag->stopping)
    return;
  ag->stopping = 1;
  kill_groups(ag, sig);
  uv_timer_start(&ag->kill_timer, on_kill_timer, (uint64_t)(ag->cfg->stop_grace_s * 1000), 0);
}

static void set_outcome(struct agent *ag, enum outcome o)
{
  if (ag->outcome == OUT_RUNNING)
    ag->outcome = o;
}

static void on_drain_timer(uv_timer_t *t);

static void on_exit_cb(uv_process_t *p, int64_t status, int term_signal)
{
  struct worker *w = p->data;
  struct agent *ag = w->ag;
  w->exited = 1;
  w->exit_status = status;
  w->term_signal = term_signal;
  w->exit_order = ++ag->exit_seq;
  w->stopped = ag->stopping;
  ag->nexited++;
  uv_close((uv_handle_t *)p, on_handle_closed);
  if ((status != 0 || term_signal != 0) && !ag->stopping) {
    ag->failed_idx = (int)(w - ag->w);
    set_outcome(ag, OUT_WORKER_FAILED);
    begin_stop(ag, SIGTERM);
  }
  if (ag->nexited == ag->nworkers) {
    set_outcome(ag, OUT_SUCCEEDED);
    /* Grandchildren may hold the pipes open: give them a moment, then stop reading. */
    uv_timer_start(&ag->drain_timer, on_drain_timer, 1000, 0);
  }
  maybe_finish(ag);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
  (void)h;
  (void)suggested;
  static _Thread_local char slab[65536];
  buf->base = slab;
  buf->len = sizeof(slab);
}

static void close_pipe(uv_pipe_t *pipe, int *open_flag)
{
  if (!*open_flag)
    return;
  *open_flag = 0;
  uv_read_stop((uv_stream_t *)pipe);
  uv_close((uv_handle_t *)pipe, on_handle_closed);
}

static void deliver(struct worker *w, int is_err, const char *data, size_t n, int eof)
{
  struct agent *ag = w->ag;
  int console = ag->cfg->log_dir == NULL || ag->cfg->tee;
  int log_fd = is_err ? w->log_err : w->log_out;
  if (log_fd >= 0 && n > 0)
    mu_write_all(log_fd, data, n);
  if (!console)
    return;
  struct mu_buf out = MU_BUF_INIT(OUT_CAP);
  struct mu_line_prefixer *lp = is_err ? &w->perr : &w->pout;
  if (n > 0)
    mu_line_prefixer_feed(lp, data, n, &out);
  if (eof)
    mu_line_prefixer_flush(lp, &out);
  if (out.len > 0)
    mu_write_all(is_err ? 2 : 1, out.data, out.len);
  mu_buf_release(&out);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
  struct worker *w = s->data;
  int is_err = s == (uv_stream_t *)&w->child.err;
  if (nread > 0) {
    deliver(w, is_err, buf->base, (size_t)nread, 0);
    return;
  }
  if (nread < 0) {
    deliver(w, is_err, NULL, 0, 1);
    close_pipe(is_err ? &w->child.err : &w->child.out, is_err ? &w->err_open : &w->out_open);
  }
}

static void on_drain_timer(uv_timer_t *t)
{
  struct agent *ag = t->data;
  for (int i = 0; i < ag->nworkers; i++) {
    struct worker *w = &ag->w[i];
    if (w->out_open)
      deliver(w, 0, NULL, 0, 1);
    if (w->err_open)
      deliver(w, 1, NULL, 0, 1);
    close_pipe(&w->child.out, &w->out_open);
    close_pipe(&w->child.err, &w->err_open);
  }
}

static void on_async(uv_async_t *a)
{
  struct agent *ag = a->data;
  uv_mutex_lock(&ag->mu);
  int posted = ag->posted;
  char msg[256];
  snprintf(msg, sizeof(msg), "%s", ag->posted_msg);
  uv_mutex_unlock(&ag->mu);
  if (posted == 0 || ag->stopping)
    return;
  enum mu_watch_event ev = (enum mu_watch_event)(posted - 1);
  switch (ev) {
  case MU_WATCH_CLOSED:
    say("run '%s' was closed while workers ran; stopping them", ag->cfg->run_id);
    set_outcome(ag, OUT_RUN_CLOSED);
    break;
  case MU_WATCH_SHUT:
    say("run '%s' was shut down by another node%s%s; stopping workers", ag->cfg->run_id,
        msg[0] ? ": " : "", msg);
    set_outcome(ag, OUT_RUN_SHUT);
    break;
  default:
    say("round %ld is %s%s%s; stopping workers to re-join", ag->round.round,
        mu_watch_event_name(ev), msg[0] ? ": " : "", msg);
    set_outcome(ag, OUT_REJOIN);
    break;
  }
  begin_stop(ag, SIGTERM);
}

static void on_signal(uv_signal_t *s, int signum)
{
  struct agent *ag = s->data;
  if (ag->signal_seen == 0) {
    ag->signal_seen = signum;
    say("got %s; forwarding it to the workers", signum == SIGINT ? "SIGINT" : "SIGTERM");
  }
  ag->outcome = OUT_SIGNALED;
  if (ag->stopping) {
    kill_groups(ag, signum);
    return;
  }
  begin_stop(ag, signum);
}

static void close_loop_handle(uv_handle_t *h)
{
  if (!uv_is_closing(h))
    uv_close(h, NULL);
}

static void maybe_finish(struct agent *ag)
{
  if (ag->open_handles > 0 || ag->nexited < ag->nworkers || ag->loop_handles_closed)
    return;
  ag->loop_handles_closed = 1;
  /* Wake the watcher thread; it is joined after uv_run() returns. */
  ssize_t wr = write(ag->cancel_pipe[1], "x", 1);
  (void)wr;
  close_loop_handle((uv_handle_t *)&ag->kill_timer);
  close_loop_handle((uv_handle_t *)&ag->drain_timer);
  close_loop_handle((uv_handle_t *)&ag->sig_int);
  close_loop_handle((uv_handle_t *)&ag->sig_term);
  close_loop_handle((uv_handle_t *)&ag->async);
}

static int open_log(const char *dir, const char *name)
{
  char path[PATH_MAX];
  if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
    return -1;
  return open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
}

static void spawn_worker(struct agent *ag, struct worker *w)
{
  const struct mu_agent_config *cfg = ag->cfg;
  char dir[PATH_MAX];
  struct mu_strvec env = MU_STRVEC_INIT;
  struct mu_strvec args = MU_STRVEC_INIT;
  int dn = snprintf(dir, sizeof(dir), "%s/attempt_%d/%d", ag->base_dir, ag->attempt, w->local_rank);
  if (dn < 0 || dn >= (int)sizeof(dir) || mu_mkdir_p(dir) != 0)
    say("cannot create '%s': %s", dir, strerror(errno));
  w->error_file = mu_asprintf("%s/error.json", dir);
  unlink(w->error_file);
  w->log_out = w->log_err = -1;
  if (cfg->log_dir != NULL) {
    w->log_out = open_log(dir, "stdout.log");
    w->log_err = open_log(dir, "stderr.log");
  }
  char prefix[32];
  snprintf(prefix, sizeof(prefix), "[%d]:", w->rank);
  mu_line_prefixer_init(&w->pout, prefix);
  mu_line_prefixer_init(&w->perr, prefix);
  mu_agent_worker_env(cfg, ag->endpoint, &ag->round, w->local_rank, ag->restart_count,
                      w->error_file, environ, &env);

  struct mu_child_opts o = {cfg->cmd[0], cfg->cmd,         env.v, on_exit_cb, on_alloc,
                            on_read,     on_handle_closed, w};
  /* Through `muster agent --exec-worker PPID -- CMD...` when possible: the shim asks the
   * kernel to kill the worker if this agent dies (PR_SET_PDEATHSIG), then execs CMD. */
  if (ag->exe[0] != '\0') {
    mu_strvec_push(&args, ag->exe);
    mu_strvec_push(&args, "agent");
    mu_strvec_push(&args, "--exec-worker");
    mu_strvec_pushf(&args, "%d", (int)getpid());
    mu_strvec_push(&args, "--");
    for (char **c = cfg->cmd; *c != NULL; c++)
      mu_strvec_push(&args, *c);
    o.file = ag->exe;
    o.args = args.v;
  }
  ag->open_handles += 3; /* the process and its two pipes, until their close callbacks */
  int rc = mu_child_spawn(&ag->loop, &w->child, &o);
  if (rc != 0) {
    w->spawn_error = rc;
    w->exited = 1;
    w->exit_status = 127;
    w->exit_order = ++ag->exit_seq;
    ag->nexited++;
    if (!ag->stopping) {
      ag->failed_idx = (int)(w - ag->w);
      set_outcome(ag, OUT_WORKER_FAILED);
      begin_stop(ag, SIGTERM);
    }
  } else {
    w->spawned = 1;
    w->out_open = w->err_open = 1;
  }
  mu_strvec_release(&env);
  mu_strvec_release(&args);
}

static void describe_exit(const struct worker *w, char *out, size_t n)
{
  if (w->spawn_error != 0)
    snprintf(out, n, "could not start: %s", uv_strerror(w->spawn_error));
  else if (w->term_signal != 0)
    snprintf(out, n, "killed by signal %d (%s)", w->term_signal, strsignal(w->term_signal));
  else if (w->exit_status == 127)
    snprintf(out, n, "exit code 127 (command not found or not executable?)");
  else
    snprintf(out, n, "exit code %lld", (long long)w->exit_status);
}

static void failure_summary(struct agent *ag, int restarts_left)
{
  struct worker *w = &ag->w[ag->failed_idx];
  char host[256] = "?";
  gethostname(host, sizeof(host) - 1);
  char how[160];
  describe_exit(w, how, sizeof(how));
  struct mu_buf s = MU_BUF_INIT(1 << 16);
  (void)mu_buf_printf(&s,
                      "[muster agent] worker failure in run '%s', round %ld, attempt %d "
                      "(restarts left: %d):\n"
                      "  rank %d (local rank %d, node rank %d) on host %s (%s), pid %d: %s\n",
                      ag->cfg->run_id, ag->round.round, ag->attempt, restarts_left, w->rank,
                      w->local_rank, ag->round.node_rank, host, ag->addr, w->child.proc.pid, how);
  struct mu_buf ef = MU_BUF_INIT(1 << 15);
  if (mu_agent_error_file_summary(w->error_file, ERROR_LINES, "    | ", &ef) == 0)
    (void)mu_buf_printf(&s, "  error file %s:\n%s", w->error_file, ef.data);
  else
    (void)mu_buf_printf(&s, "  (no error file written: decorate the entry point with torch's "
                            "@record to get one)\n");
  for (int i = 0; i < ag->nworkers; i++) {
    struct worker *o = &ag->w[i];
    if (o == w || !o->exited || o->stopped || (o->exit_status == 0 && o->term_signal == 0))
      continue;
    char h2[160];
    describe_exit(o, h2, sizeof(h2));
    (void)mu_buf_printf(&s, "  also: rank %d (local rank %d): %s\n", o->rank, o->local_rank, h2);
  }
  fputs(s.data, stderr);
  fflush(stderr);
  mu_buf_release(&ef);
  mu_buf_release(&s);
}

/* Runs the workers of one round to their end. Returns: the outcome. */
static enum outcome run_attempt(struct agent *ag)
{
  const struct mu_agent_config *cfg = ag->cfg;
  ag->attempt++;
  ag->nworkers = cfg->nproc_per_node;
  ag->w = mu_calloc((size_t)ag->nworkers, sizeof(*ag->w));
  ag->nexited = 0;
  ag->open_handles = 0;
  ag->outcome = OUT_RUNNING;
  ag->stopping = 0;
  ag->failed_idx = -1;
  ag->loop_handles_closed = 0;
  ag->posted = 0;
  uv_loop_init(&ag->loop);
  if (pipe(ag->cancel_pipe) != 0 || fcntl(ag->cancel_pipe[0], F_SETFD, FD_CLOEXEC) != 0 ||
      fcntl(ag->cancel_pipe[1], F_SETFD, FD_CLOEXEC) != 0) {
    say("cannot create a pipe: %s", strerror(errno));
    abort();
  }
  uv_timer_init(&ag->loop, &ag->kill_timer);
  uv_timer_init(&ag->loop, &ag->drain_timer);
  ag->kill_timer.data = ag->drain_timer.data = ag;
  uv_signal_init(&ag->loop, &ag->sig_int);
  uv_signal_init(&ag->loop, &ag->sig_term);
  ag->sig_int.data = ag->sig_term.data = ag;
  uv_signal_start(&ag->sig_int, on_signal, SIGINT);
  uv_signal_start(&ag->sig_term, on_signal, SIGTERM);
  uv_async_init(&ag->loop, &ag->async, on_async);
  ag->async.data = ag;

  for (int i = 0; i < ag->nworkers; i++) {
    struct worker *w = &ag->w[i];
    w->ag = ag;
    w->local_rank = i;
    w->rank = ag->round.rank_offset + i;
    w->log_out = w->log_err = -1;
  }
  for (int i = 0; i < ag->nworkers; i++)
    spawn_worker(ag, &ag->w[i]);
  say("round %ld: started %d workers (ranks %d-%d of %d)", ag->round.round, ag->nworkers,
      ag->round.rank_offset, ag->round.rank_offset + ag->nworkers - 1, ag->round.world_size);
  ag->watcher_started = uv_thread_create(&ag->watcher, watcher_main, ag) == 0;
  maybe_finish(ag); /* every spawn may have failed */
  uv_run(&ag->loop, UV_RUN_DEFAULT);
  if (ag->watcher_started)
    uv_thread_join(&ag->watcher);
  int lc = uv_loop_close(&ag->loop);
  if (lc != 0)
    mu_debug("agent loop did not close cleanly: %s", uv_strerror(lc));
  close(ag->cancel_pipe[0]);
  close(ag->cancel_pipe[1]);
  return ag->outcome;
}

static void free_workers(struct agent *ag)
{
  for (int i = 0; ag->w != NULL && i < ag->nworkers; i++) {
    struct worker *w = &ag->w[i];
    if (w->log_out >= 0)
      close(w->log_out);
    if (w->log_err >= 0)
      close(w->log_err);
    mu_line_prefixer_release(&w->pout);
    mu_line_prefixer_release(&w->perr);
    mu_free(w->error_file);
  }
  mu_free(ag->w);
  ag->w = NULL;
  ag->nworkers = 0;
}

/* --- join ----------------------------------------------------------------------------------- */

/* Joins, retrying an unreachable endpoint until the join deadline (at most 30 s of retries).
 * Returns: 0, or an exit code after printing the error. */
static int do_join(struct agent *ag)
{
  const struct mu_agent_config *cfg = ag->cfg;
  long long deadline = now_ms() + (long long)(cfg->join_timeout_s * 1000);
  long long retry_until =
      now_ms() + (cfg->join_timeout_s < 30 ? (long long)(cfg->join_timeout_s * 1000) : 30000);
  int warned = 0;
  for (;;) {
    mu_round_release(&ag->round);
    /* Learn our address (the one that reaches the server) and check the endpoint is a musterd
     * before the long poll. */
    if (ag->addr[0] == '\0' || cfg->local_addr == NULL) {
      int rc = mu_client_heartbeat(ag->client, cfg->run_id, ag->node_id, NULL, NULL);
      if (rc == MU_ECONN || rc == MU_ETIMEDOUT) {
        if (now_ms() >= retry_until) {
          mu_error("cannot reach the rendezvous endpoint '%s': %s; check --rdzv-endpoint "
                   "(HOST:PORT of a running musterd)",
                   ag->endpoint, mu_client_errmsg(ag->client));
          return MU_AGENT_EXIT_RENDEZVOUS;
        }
        if (!warned++)
          say("rendezvous endpoint '%s' not reachable yet (%s); retrying", ag->endpoint,
              mu_client_errmsg(ag->client));
        usleep(250 * 1000);
        continue;
      }
      if (rc == MU_EHTTP || rc == MU_EPROTO || rc == MU_E2BIG) {
        mu_error("'%s' is not a musterd rendezvous endpoint: %s", ag->endpoint,
                 mu_client_errmsg(ag->client));
        return MU_AGENT_EXIT_RENDEZVOUS;
      }
      if (rc == MU_ECLOSED || rc == MU_ESHUT) {
        mu_error("cannot join run '%s': %s; use a new --rdzv-id", cfg->run_id,
                 mu_client_errmsg(ag->client));
        return rc == MU_ESHUT ? MU_AGENT_EXIT_FAILED : MU_AGENT_EXIT_RENDEZVOUS;
      }
      if (cfg->local_addr == NULL &&
          mu_client_local_addr(ag->client, ag->addr, sizeof(ag->addr)) != 0)
        snprintf(ag->addr, sizeof(ag->addr), "127.0.0.1");
    }
    long long left = deadline - now_ms();
    if (left <= 0) {
      mu_error("join of run '%s' timed out after %.0f s (--join-timeout); fewer than %d nodes "
               "joined",
               cfg->run_id, cfg->join_timeout_s, cfg->min_nodes);
      return MU_AGENT_EXIT_RENDEZVOUS;
    }
    struct mu_join_opts o;
    memset(&o, 0, sizeof(o));
    o.node_id = ag->node_id;
    o.addr = ag->addr;
    o.local_world_size = cfg->nproc_per_node;
    o.master_port = pick_free_port();
    o.min_nodes = cfg->min_nodes;
    o.max_nodes = cfg->max_nodes;
    o.last_call_ms = cfg->last_call_s >= 0 ? (long)(cfg->last_call_s * 1000) : -1;
    o.join_timeout_ms = (long)left;
    o.lease_ttl_ms = cfg->lease_ttl_s > 0 ? (long)(cfg->lease_ttl_s * 1000) : -1;
    int rc = mu_client_join(ag->client, cfg->run_id, &o, &ag->round);
    if (rc == 0)
      break;
    if ((rc == MU_ECONN || rc == MU_EPROTO) && now_ms() < retry_until) {
      if (!warned++)
        say("join failed (%s); retrying", mu_client_errmsg(ag->client));
      usleep(250 * 1000);
      continue;
    }
    switch (rc) {
    case MU_ETIMEDOUT:
      mu_error("join of run '%s' timed out after %.0f s (--join-timeout): %s", cfg->run_id,
               cfg->join_timeout_s, mu_client_errmsg(ag->client));
      break;
    case MU_ESTATE:
      mu_error("cannot join run '%s': %s; every agent of a run needs the same --nnodes",
               cfg->run_id, mu_client_errmsg(ag->client));
      break;
    case MU_ECLOSED:
    case MU_ESHUT:
      mu_error("cannot join run '%s': %s", cfg->run_id, mu_client_errmsg(ag->client));
      return rc == MU_ESHUT ? MU_AGENT_EXIT_FAILED : MU_AGENT_EXIT_RENDEZVOUS;
    default:
      mu_error("cannot join run '%s' at '%s': %s", cfg->run_id, ag->endpoint,
               mu_client_errmsg(ag->client));
      break;
    }
    return MU_AGENT_EXIT_RENDEZVOUS;
  }
  say("run '%s' round %ld: node rank %d of %d, ranks %d-%d of world %d, master %s:%d", cfg->run_id,
      ag->round.round, ag->round.node_rank, ag->round.nnodes, ag->round.rank_offset,
      ag->round.rank_offset + ag->round.local_world_size - 1, ag->round.world_size,
      ag->round.master_addr, ag->round.master_port);
  return 0;
}

int mu_agent_run(const struct mu_agent_config *cfg)
{
  struct agent ag;
  memset(&ag, 0, sizeof(ag));
  ag.cfg = cfg;
  ag.endpoint = cfg->endpoint;
  uv_mutex_init(&ag.mu);
  int code = MU_AGENT_EXIT_FAILED;
  if (cfg->node_id != NULL) {
    snprintf(ag.node_id, sizeof(ag.node_id), "%s", cfg->node_id);
  } else {
    char host[200] = "node";
    gethostname(host, sizeof(host) - 1);
    unsigned seed = (unsigned)now_ms() ^ (unsigned)getpid();
    snprintf(ag.node_id, sizeof(ag.node_id), "%s-%d-%04x", host, (int)getpid(),
             (unsigned)rand_r(&seed) & 0xffff);
  }
  if (cfg->local_addr != NULL)
    snprintf(ag.addr, sizeof(ag.addr), "%s", cfg->local_addr);
#ifdef __linux__
  size_t exe_len = sizeof(ag.exe);
  if (getenv("MUSTER_AGENT_NO_SHIM") != NULL || uv_exepath(ag.exe, &exe_len) != 0)
    ag.exe[0] = '\0';
#endif
  if (mu_client_new(cfg->endpoint, &ag.client) != 0) {
    mu_error("bad --rdzv-endpoint '%s'; use HOST:PORT", cfg->endpoint);
    code = MU_AGENT_EXIT_USAGE;
    goto out;
  }
  mu_client_set_timeout(ag.client, 10000);
  if (cfg->log_dir != NULL) {
    if (snprintf(ag.base_dir, sizeof(ag.base_dir), "%s/%s", cfg->log_dir, cfg->run_id) >=
            (int)sizeof(ag.base_dir) ||
        mu_mkdir_p(ag.base_dir) != 0) {
      mu_error("cannot create the log directory '%s/%s': %s; check --log-dir", cfg->log_dir,
               cfg->run_id, strerror(errno));
      code = MU_AGENT_EXIT_USAGE;
      goto out;
    }
  } else {
    const char *tmp = getenv("TMPDIR");
    snprintf(ag.base_dir, sizeof(ag.base_dir), "%s/muster-agent-XXXXXX",
             tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(ag.base_dir) == NULL) {
      mu_error("cannot create a temporary directory in '%s': %s", tmp && *tmp ? tmp : "/tmp",
               strerror(errno));
      goto out;
    }
    ag.own_base_dir = 1;
  }

  for (;;) {
    int jrc = do_join(&ag);
    if (jrc != 0) {
      code = jrc;
      goto out;
    }
    enum outcome oc = run_attempt(&ag);
    if (ag.signal_seen != 0)
      oc = OUT_SIGNALED;
    switch (oc) {
    case OUT_SUCCEEDED:
      say("all %d workers succeeded", ag.nworkers);
      if (mu_client_leave(ag.client, cfg->run_id, ag.node_id, 1, NULL) != 0)
        say("leave failed: %s", mu_client_errmsg(ag.client));
      code = MU_AGENT_EXIT_OK;
      goto out;
    case OUT_WORKER_FAILED: {
      int left = (int)(cfg->max_restarts - ag.restart_count);
      failure_summary(&ag, left);
      if (left > 0) {
        ag.restart_count++;
        say("restarting workers (restart %d of %ld)", ag.restart_count, cfg->max_restarts);
        free_workers(&ag);
        continue;
      }
      char reason[512];
      struct worker *w = &ag.w[ag.failed_idx];
      char how[160];
      describe_exit(w, how, sizeof(how));
      snprintf(reason, sizeof(reason), "rank %d on node %s failed (%s), no restart left", w->rank,
               ag.node_id, how);
      mu_client_leave(ag.client, cfg->run_id, ag.node_id, 0, reason);
      mu_client_shutdown(ag.client, cfg->run_id, reason);
      mu_error("run '%s' failed: %s", cfg->run_id, reason);
      code = MU_AGENT_EXIT_FAILED;
      goto out;
    }
    case OUT_REJOIN:
      free_workers(&ag);
      continue;
    case OUT_RUN_CLOSED:
      mu_error("run '%s' was closed while this node's workers ran", cfg->run_id);
      code = MU_AGENT_EXIT_RENDEZVOUS;
      goto out;
    case OUT_RUN_SHUT:
      mu_error("run '%s' was shut down by another node; workers stopped", cfg->run_id);
      code = MU_AGENT_EXIT_FAILED;
      goto out;
    case OUT_SIGNALED:
      mu_client_leave(ag.client, cfg->run_id, ag.node_id, 0, "agent stopped by a signal");
      code = MU_AGENT_EXIT_SIGNAL_BASE + ag.signal_seen;
      goto out;
    case OUT_RUNNING:
      break;
    }
    code = MU_AGENT_EXIT_FAILED;
    goto out;
  }
out:
  free_workers(&ag);
  mu_round_release(&ag.round);
  mu_client_free(ag.client);
  if (ag.own_base_dir)
    nftw(ag.base_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  uv_mutex_destroy(&ag.mu);
  return code;
}
