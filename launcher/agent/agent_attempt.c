/* One attempt of `muster agent`: the workers of the joined round on one libuv loop, until they
 * all ended or the agent stopped them. The loop has the workers (their own process groups, piped
 * output), their exit callbacks, SIGINT/SIGTERM, the stop timer, and an async handle that the
 * watcher thread fires when the round changes. The watcher thread heart-beats once and then
 * long-polls `watch` (which holds the lease) on its own rendezvous connection; a pipe (the
 * cancel fd) interrupts it when the attempt ends.
 *
 * Why a thread and not an asynchronous client on the loop: the blocking client exists and is
 * tested, and the thread talks to the loop only through one uv_async_t and one mutex-protected
 * word.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>

#include "muster/errno.h"

#include "agent_impl.h"
#include "alloc.h"
#include "buf.h"
#include "fsutil.h"
#include "strvec.h"

extern char **environ;

#define ERROR_LINES 12 /* lines of a worker's error file in a failure report */
#define MAX_LINE 65536 /* a longer line of a worker's output is written in pieces */

/* ---------------------------------------------------------------------------------------------
 * The watcher thread: heartbeat once, then long-poll the round's watch
 */

static void post_event(struct mu_agent *ag, enum mu_watch_event ev, const char *msg)
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
static int nap(struct mu_agent *ag, int ms)
{
  struct pollfd p = {ag->cancel_pipe[0], POLLIN, 0};
  return poll(&p, 1, ms) > 0;
}

/* Heart-beats once; returns 1 when the watcher must stop (the event was posted). */
static int watcher_heartbeat(struct mu_agent *ag, struct mu_client *r)
{
  struct mu_buf e = MU_BUF_INIT(SIZE_MAX);
  int stop = 1;
  int rc = mu_agent_said(r, mu_client_heartbeat(r, ag->cfg->run_id, ag->node_id, NULL, NULL), &e);
  if (rc == MU_ENOENT)
    post_event(ag, MU_WATCH_BROKEN, "this node's lease expired");
  else if (rc == MU_ECLOSED || rc == MU_ESHUT)
    post_event(ag, rc == MU_ECLOSED ? MU_WATCH_CLOSED : MU_WATCH_SHUT, mu_buf_str(&e));
  else if (rc != MU_ECANCELED)
    stop = 0;
  if (rc != 0 && !stop)
    mu_agent_say(ag, MU_AGENT_DEBUG, "heartbeat failed: %s", mu_buf_str(&e));
  mu_buf_release(&e);
  return stop;
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
  struct mu_agent *ag = arg;
  struct mu_client *r = NULL;
  struct mu_buf e = MU_BUF_INIT(SIZE_MAX);
  if (mu_agent_client(ag, &r, &e) != 0) {
    mu_buf_release(&e);
    return;
  }
  mu_client_set_cancel_fd(r, ag->cancel_pipe[0]);
  mu_client_set_timeout(r, 5000);
  long wait = watch_timeout_ms(ag->round.lease_ttl_ms);
  int beat = 1;
  for (;;) {
    if (beat && watcher_heartbeat(ag, r))
      break;
    beat = 0;
    enum mu_watch_event ev = MU_WATCH_NONE;
    mu_buf_clear(&e);
    int rc = mu_agent_said(
        r, mu_client_watch(r, ag->cfg->run_id, ag->node_id, ag->round.round, wait, &ev, NULL), &e);
    if (rc == MU_ECANCELED)
      break;
    if (rc == MU_ECLOSED || rc == MU_ESHUT) {
      post_event(ag, rc == MU_ECLOSED ? MU_WATCH_CLOSED : MU_WATCH_SHUT, mu_buf_str(&e));
      break;
    }
    if (rc == 0 && ev != MU_WATCH_NONE) {
      post_event(ag, ev, NULL);
      break;
    }
    if (rc != 0) {
      mu_agent_say(ag, MU_AGENT_DEBUG, "watch failed: %s", mu_buf_str(&e));
      beat = 1;
      if (nap(ag, 200))
        break;
    }
  }
  mu_client_free(r);
  mu_buf_release(&e);
}

/* ---------------------------------------------------------------------------------------------
 * The workers: spawn, read their output, stop them, notice their ends
 */

static void maybe_finish(struct mu_agent *ag);

static void on_handle_closed(uv_handle_t *h)
{
  struct mu_agent_worker *w = h->data;
  struct mu_agent *ag = w->ag;
  ag->open_handles--;
  maybe_finish(ag);
}

static void kill_groups(struct mu_agent *ag, int sig)
{
  for (int i = 0; i < ag->nworkers; i++) {
    struct mu_agent_worker *w = &ag->w[i];
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
  struct mu_agent *ag = t->data;
  if (ag->nexited < ag->nworkers)
    mu_agent_say(ag, MU_AGENT_PROGRESS,
                 "workers did not stop within %.1f s of SIGTERM; sending SIGKILL",
                 ag->cfg->stop_grace_s);
  kill_groups(ag, SIGKILL);
}

static void begin_stop(struct mu_agent *ag, int sig)
{
  if (ag->stopping)
    return;
  ag->stopping = 1;
  kill_groups(ag, sig);
  uv_timer_start(&ag->kill_timer, on_kill_timer, (uint64_t)(ag->cfg->stop_grace_s * 1000), 0);
}

static void set_outcome(struct mu_agent *ag, enum mu_agent_outcome o)
{
  if (ag->outcome == MU_AGENT_RUNNING)
    ag->outcome = o;
}

static void on_drain_timer(uv_timer_t *t);

static long long wall_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void on_exit_cb(uv_process_t *p, int64_t status, int term_signal)
{
  struct mu_agent_worker *w = p->data;
  struct mu_agent *ag = w->ag;
  w->exited = 1;
  w->exit_status = status;
  w->term_signal = term_signal;
  w->exit_order = ++ag->exit_seq;
  w->end_ms = wall_ms();
  w->stopped = ag->stopping;
  ag->nexited++;
  uv_close((uv_handle_t *)p, on_handle_closed);
  if ((status != 0 || term_signal != 0) && !ag->stopping) {
    ag->failed_idx = (int)(w - ag->w);
    set_outcome(ag, MU_AGENT_WORKER_FAILED);
    begin_stop(ag, SIGTERM);
  }
  if (ag->nexited == ag->nworkers) {
    set_outcome(ag, MU_AGENT_SUCCEEDED);
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

static void deliver(struct mu_agent_worker *w, int is_err, const char *data, size_t n, int eof)
{
  struct mu_agent *ag = w->ag;
  int console = mu_agent_console(ag->cfg, w->local_rank, is_err ? 2 : 1);
  int log_fd = is_err ? w->log_err : w->log_out;
  if (is_err && n > 0) { /* keep the last bytes for a failure without error file */
    size_t cap = sizeof(w->err_tail);
    if (n >= cap) {
      memcpy(w->err_tail, data + n - cap, cap);
      w->err_tail_len = cap;
    } else {
      size_t keep = w->err_tail_len + n > cap ? cap - n : w->err_tail_len;
      memmove(w->err_tail, w->err_tail + w->err_tail_len - keep, keep);
      memcpy(w->err_tail + keep, data, n);
      w->err_tail_len = keep + n;
    }
  }
  if (log_fd >= 0 && n > 0)
    mu_write_all(log_fd, data, n);
  if (!console)
    return;
  struct mu_buf out = MU_BUF_INIT(SIZE_MAX); /* this read's lines, prefixed: our own output */
  struct mu_line_prefixer *lp = is_err ? &w->perr : &w->pout;
  if (n > 0)
    mu_line_prefixer_feed(lp, data, n, &out);
  if (eof)
    mu_line_prefixer_flush(lp, &out);
  if (out.len > 0)
    mu_write_all(is_err ? ag->cfg->err_fd : ag->cfg->out_fd, out.data, out.len);
  mu_buf_release(&out);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
  struct mu_agent_worker *w = s->data;
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
  struct mu_agent *ag = t->data;
  for (int i = 0; i < ag->nworkers; i++) {
    struct mu_agent_worker *w = &ag->w[i];
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
  struct mu_agent *ag = a->data;
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
    mu_agent_say(ag, MU_AGENT_PROGRESS, "run '%s' was closed while workers ran; stopping them",
                 ag->cfg->run_id);
    set_outcome(ag, MU_AGENT_RUN_CLOSED);
    break;
  case MU_WATCH_SHUT:
    mu_agent_say(ag, MU_AGENT_PROGRESS,
                 "run '%s' was shut down by another node%s%s; stopping workers", ag->cfg->run_id,
                 msg[0] ? ": " : "", msg);
    set_outcome(ag, MU_AGENT_RUN_SHUT);
    break;
  default:
    mu_agent_say(ag, MU_AGENT_PROGRESS, "round %ld is %s%s%s; stopping workers to re-join",
                 ag->round.round, mu_watch_event_name(ev), msg[0] ? ": " : "", msg);
    set_outcome(ag, MU_AGENT_REJOIN);
    break;
  }
  begin_stop(ag, SIGTERM);
}

static void on_signal(uv_signal_t *s, int signum)
{
  struct mu_agent *ag = s->data;
  if (ag->signal_seen == 0) {
    ag->signal_seen = signum;
    mu_agent_say(ag, MU_AGENT_PROGRESS, "got %s; forwarding it to the workers",
                 signum == SIGINT ? "SIGINT" : "SIGTERM");
  }
  ag->outcome = MU_AGENT_SIGNALED;
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

static void maybe_finish(struct mu_agent *ag)
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

static void spawn_worker(struct mu_agent *ag, struct mu_agent_worker *w)
{
  const struct mu_agent_config *cfg = ag->cfg;
  char dir[PATH_MAX];
  struct mu_strvec env = MU_STRVEC_INIT;
  struct mu_strvec args = MU_STRVEC_INIT;
  int dn = snprintf(dir, sizeof(dir), "%s/attempt_%d/%d", ag->base_dir, ag->attempt, w->local_rank);
  if (dn < 0 || dn >= (int)sizeof(dir) || mu_mkdir_p(dir) != 0)
    mu_agent_say(ag, MU_AGENT_PROGRESS, "cannot create '%s': %s", dir, strerror(errno));
  w->error_file = mu_asprintf("%s/error.json", dir);
  unlink(w->error_file);
  w->log_out = w->log_err = -1;
  if (cfg->log_dir != NULL) {
    w->log_out = open_log(dir, "stdout.log");
    w->log_err = open_log(dir, "stderr.log");
  }
  char prefix[32];
  snprintf(prefix, sizeof(prefix), "[%d]:", w->rank);
  mu_line_prefixer_init(&w->pout, prefix, MAX_LINE);
  mu_line_prefixer_init(&w->perr, prefix, MAX_LINE);
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
      set_outcome(ag, MU_AGENT_WORKER_FAILED);
      begin_stop(ag, SIGTERM);
    }
  } else {
    w->spawned = 1;
    w->out_open = w->err_open = 1;
  }
  mu_strvec_release(&env);
  mu_strvec_release(&args);
}

/* ---------------------------------------------------------------------------------------------
 * Reports and one attempt
 */

void mu_agent_describe_exit(const struct mu_agent_worker *w, char *out, size_t n)
{
  if (w->spawn_error != 0)
    snprintf(out, n, "could not start: %s", uv_strerror(w->spawn_error));
  else if (w->term_signal != 0)
    snprintf(out, n, "killed by signal %d (%s)", w->term_signal, strsignal(w->term_signal));
  else if (w->exit_status == 127)
    snprintf(out, n, "exit code 127 (command not found or not executable?)");
  else if (w->exit_status == 137)
    snprintf(out, n, "exit code 137 (128 + 9: killed by SIGKILL, often the out-of-memory killer)");
  else
    snprintf(out, n, "exit code %lld", (long long)w->exit_status);
}

/* The last `max` lines of a worker's stderr tail (the first, cut line dropped when the tail
 * is full). Ownership: caller frees with mu_free(). */
static char *tail_lines(const struct mu_agent_worker *w, int max)
{
  const char *b = w->err_tail, *e = w->err_tail + w->err_tail_len;
  if (w->err_tail_len == sizeof(w->err_tail)) {
    const char *nl = memchr(b, '\n', (size_t)(e - b));
    b = nl ? nl + 1 : b;
  }
  while (e > b && (e[-1] == '\n' || e[-1] == '\r'))
    e--;
  const char *p = e;
  for (int n = 0; p > b; p--)
    if (p[-1] == '\n' && ++n == max)
      break;
  size_t len = (size_t)(e - p);
  char *out = mu_malloc(len + 1);
  memcpy(out, p, len);
  out[len] = '\0';
  return out;
}

/* Fills the failure record of worker w: its error file when it wrote one, else the last lines
 * of its stderr. */
static void make_record(const struct mu_agent *ag, const struct mu_agent_worker *w, int restarts,
                        struct mu_failrec *r)
{
  struct mu_buf text = MU_BUF_INIT(1u << 20);
  char host[256] = "?";
  gethostname(host, sizeof(host) - 1);
  memset(r, 0, sizeof(*r));
  if (w->error_file != NULL && mu_read_file(w->error_file, 1u << 20, &text) == 0 &&
      mu_failrec_parse(text.data, text.len, r) == 0) {
    mu_free(r->source);
    r->source = mu_strdup("error_file");
  } else {
    mu_failrec_release(r);
    r->details = tail_lines(w, 20);
    r->exception = mu_failrec_exception_line(r->details);
    r->source = mu_strdup(r->details[0] ? "stderr" : "exit");
  }
  r->muster = 1;
  r->run_id = mu_strdup(ag->cfg->run_id);
  r->round = ag->round.round;
  r->attempt = ag->attempt;
  r->restarts = restarts;
  r->rank = w->rank;
  r->local_rank = w->local_rank;
  r->node_rank = ag->round.node_rank;
  r->role = mu_strdup(ag->cfg->role);
  r->node = mu_strdup(ag->node_id);
  r->host = mu_strdup(host);
  r->addr = mu_strdup(ag->addr);
  r->pid = w->spawned ? (long)w->child.proc.pid : 0;
  r->exit_code = w->term_signal != 0 ? -1 : (int)w->exit_status;
  r->signal = w->term_signal;
  long oom = w->term_signal == SIGKILL ? mu_agent_oom_kills() : -1;
  r->oom = oom > 0 && oom > ag->oom_kills_start;
  r->time_ms = w->end_ms;
  mu_buf_release(&text);
}

void mu_agent_failure_report(struct mu_agent *ag, int restarts_left)
{
  const struct mu_agent_worker *w = &ag->w[ag->failed_idx];
  char how[160];
  mu_agent_describe_exit(w, how, sizeof(how));
  mu_failrec_release(&ag->last_failure);
  make_record(ag, w, restarts_left > 0 ? ag->restart_count + 1 : ag->restart_count,
              &ag->last_failure);
  const struct mu_failrec *r = &ag->last_failure;
  struct mu_buf s = MU_BUF_INIT(SIZE_MAX);
  (void)mu_buf_printf(&s,
                      "worker failure in run '%s', round %ld, attempt %d "
                      "(restarts left: %d):\n"
                      "  rank %d (local rank %d, node rank %d) on host %s (%s), pid %d: %s%s\n",
                      ag->cfg->run_id, ag->round.round, ag->attempt, restarts_left, w->rank,
                      w->local_rank, ag->round.node_rank, r->host, ag->addr, (int)r->pid, how,
                      r->oom ? " (likely killed for memory: the cgroup counted an OOM kill)" : "");
  struct mu_buf ef = MU_BUF_INIT(SIZE_MAX);
  if (mu_agent_error_file_summary(w->error_file, ERROR_LINES, "    | ", &ef) == 0)
    (void)mu_buf_printf(&s, "  error file %s:\n%s", w->error_file, ef.data);
  else
    (void)mu_buf_printf(&s,
                        "  (no error file written: decorate the entry point with torch's "
                        "@record to get one; its last stderr line: %s)\n",
                        r->exception[0] ? r->exception : "none");
  for (int i = 0; i < ag->nworkers; i++) {
    const struct mu_agent_worker *o = &ag->w[i];
    if (o == w || !o->exited || o->stopped || (o->exit_status == 0 && o->term_signal == 0))
      continue;
    char h2[160];
    mu_agent_describe_exit(o, h2, sizeof(h2));
    (void)mu_buf_printf(&s, "  also: rank %d (local rank %d): %s\n", o->rank, o->local_rank, h2);
  }
  if (ag->cfg->report != NULL)
    ag->cfg->report(ag->cfg->report_data, MU_AGENT_FAILURE, mu_buf_str(&s));
  /* The record: one line for the logs that Slurm and Kubernetes keep, and the agent's own
   * error file for the local scheduler (written where torchrun writes its root cause). */
  char *json = mu_failrec_to_json(r);
  mu_agent_say(ag, MU_AGENT_PROGRESS, MU_FAILREC_TAG "%s", json);
  int wr = ag->cfg->error_file != NULL
               ? mu_write_file_atomic(ag->cfg->error_file, json, strlen(json), 0644, 0)
               : 0;
  if (wr != 0)
    mu_agent_say(ag, MU_AGENT_PROGRESS, "cannot write the failure record to '%s': %s",
                 ag->cfg->error_file, strerror(-wr));
  mu_free(json);
  mu_buf_release(&ef);
  mu_buf_release(&s);
}

enum mu_agent_outcome mu_agent_attempt(struct mu_agent *ag)
{
  const struct mu_agent_config *cfg = ag->cfg;
  ag->attempt++;
  ag->nworkers = cfg->nproc_per_node;
  ag->w = mu_calloc((size_t)ag->nworkers, sizeof(*ag->w));
  ag->nexited = 0;
  ag->open_handles = 0;
  ag->outcome = MU_AGENT_RUNNING;
  ag->stopping = 0;
  ag->failed_idx = -1;
  ag->oom_kills_start = mu_agent_oom_kills();
  ag->loop_handles_closed = 0;
  ag->posted = 0;
  uv_loop_init(&ag->loop);
  if (pipe(ag->cancel_pipe) != 0 || fcntl(ag->cancel_pipe[0], F_SETFD, FD_CLOEXEC) != 0 ||
      fcntl(ag->cancel_pipe[1], F_SETFD, FD_CLOEXEC) != 0) {
    mu_agent_say(ag, MU_AGENT_PROGRESS, "cannot create a pipe: %s", strerror(errno));
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
    struct mu_agent_worker *w = &ag->w[i];
    w->ag = ag;
    w->local_rank = i;
    w->rank = ag->round.rank_offset + i;
    w->log_out = w->log_err = -1;
  }
  for (int i = 0; i < ag->nworkers; i++)
    spawn_worker(ag, &ag->w[i]);
  char ranks[48];
  mu_agent_say(ag, MU_AGENT_PROGRESS, "round %ld: started %d worker%s (%s of %d)", ag->round.round,
               ag->nworkers, ag->nworkers == 1 ? "" : "s",
               mu_agent_ranks(ranks, sizeof(ranks), ag->round.rank_offset, ag->nworkers),
               ag->round.world_size);
  ag->watcher_started = uv_thread_create(&ag->watcher, watcher_main, ag) == 0;
  maybe_finish(ag); /* every spawn may have failed */
  uv_run(&ag->loop, UV_RUN_DEFAULT);
  if (ag->watcher_started)
    uv_thread_join(&ag->watcher);
  int lc = uv_loop_close(&ag->loop);
  if (lc != 0)
    mu_agent_say(ag, MU_AGENT_DEBUG, "agent loop did not close cleanly: %s", uv_strerror(lc));
  close(ag->cancel_pipe[0]);
  close(ag->cancel_pipe[1]);
  return ag->outcome;
}

void mu_agent_workers_free(struct mu_agent *ag)
{
  for (int i = 0; ag->w != NULL && i < ag->nworkers; i++) {
    struct mu_agent_worker *w = &ag->w[i];
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
