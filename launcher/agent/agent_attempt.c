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
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>

#include "muster/errno.h"

#include "agent_impl.h"
#include "alloc.h"
#include "buf.h"
#include "fsutil.h"
#include "progress.h"
#include "strvec.h"

extern char **environ;

#define ERROR_LINES 12               /* lines of a worker's error file in a failure report */
#define MAX_LINE 65536               /* a longer line of a worker's output is written in pieces */
#define STACKS_MAX (256u << 10)      /* a worker's stacks kept for its failure record */
#define WAITING_REPORT_DELAY_MS 1000 /* see tell_rendezvous() */

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

static long long mono_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Heart-beats once; returns 1 when the watcher must stop (the event was posted). *down_since:
 * when the rendezvous stopped answering (0: it answers). Unreachable for longer than the lease,
 * this node is lost there already: it stops its workers and re-joins (join() keeps trying). */
static int watcher_heartbeat(struct mu_agent *ag, struct mu_client *r, long long *down_since)
{
  struct mu_buf e = MU_BUF_INIT(SIZE_MAX);
  int stop = 1;
  int rc = mu_agent_said(r, mu_client_heartbeat(r, ag->cfg->run_id, ag->node_id, NULL, NULL), &e);
  long ttl = ag->round.lease_ttl_ms > 0 ? ag->round.lease_ttl_ms : 10000;
  if (rc == MU_ECONN || rc == MU_ETIMEDOUT) {
    if (*down_since == 0)
      *down_since = mono_ms();
  } else {
    *down_since = 0;
  }
  if (rc == MU_ENOENT)
    post_event(ag, MU_WATCH_BROKEN, "this node's lease expired");
  else if (rc == MU_ESESSION) /* the run knows this node id by another session: re-join */
    post_event(ag, MU_WATCH_BROKEN, mu_buf_str(&e));
  else if (*down_since != 0 && mono_ms() - *down_since > ttl)
    post_event(ag, MU_WATCH_BROKEN, "the rendezvous did not answer for longer than the lease");
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

/* A rendezvous client of its own for a thread beside the loop (the watcher, the reporter), each
 * call bounded by 5 s. Returns NULL, with a debug line, when none can be made. */
static struct mu_client *thread_client(struct mu_agent *ag)
{
  struct mu_client *r = NULL;
  struct mu_buf e = MU_BUF_INIT(SIZE_MAX);
  if (mu_agent_client(ag, &r, &e) != 0)
    mu_agent_say(ag, MU_AGENT_DEBUG, "no rendezvous client for a thread: %s", mu_buf_str(&e));
  else
    mu_client_set_timeout(r, 5000);
  if (r != NULL) /* it speaks for this node: with the node's session */
    mu_client_set_session(r, ag->round.session);
  mu_buf_release(&e);
  return r;
}

/* Heart-beats once, then long-polls `watch` back to back: each open watch holds this member's
 * lease, so a healthy member needs no further heartbeats. After a failed watch (the server was
 * unreachable for a moment, the reply was lost) it heart-beats again, which also tells it when
 * its lease expired meanwhile. A node that is no longer a member gets `broken` at once. */
static void watcher_main(void *arg)
{
  struct mu_agent *ag = arg;
  struct mu_client *r = thread_client(ag);
  struct mu_buf e = MU_BUF_INIT(SIZE_MAX);
  if (r == NULL)
    return;
  mu_client_set_cancel_fd(r, ag->cancel_pipe[0]);
  mu_client_set_hold(r, 1); /* its watch stands for this node: the agent gone, the node lost */
  long wait = watch_timeout_ms(ag->round.lease_ttl_ms);
  int beat = 1;
  long long down_since = 0;
  for (;;) {
    if (beat && watcher_heartbeat(ag, r, &down_since))
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
      if (down_since == 0 && (rc == MU_ECONN || rc == MU_ETIMEDOUT))
        down_since = mono_ms();
      beat = 1;
      if (nap(ag, 200))
        break;
    }
  }
  mu_client_free(r);
  mu_buf_release(&e);
}

/* ---------------------------------------------------------------------------------------------
 * The reporter thread: the reports the loop's callbacks make, sent off the loop in the order
 * they happen (started, progress, failing; each at most once an attempt)
 */

/* A report of the workers' start, their first progress (the round's timings) or the 'failing'
 * hint: queued for the reporter thread, so that the loop never waits for the rendezvous. */
static void report_event(struct mu_agent *ag, enum mu_report_event ev)
{
  uv_mutex_lock(&ag->mu);
  ag->rep_pending |= 1u << ev;
  uv_cond_signal(&ag->rep_cond);
  uv_mutex_unlock(&ag->mu);
}

/* The next report to send (the lowest event pending), or -1 to end. Waits for one. */
static int reporter_next(struct mu_agent *ag)
{
  int ev = -1;
  uv_mutex_lock(&ag->mu);
  while (ag->rep_pending == 0 && !ag->rep_stop)
    uv_cond_wait(&ag->rep_cond, &ag->mu);
  if (ag->rep_pending != 0) {
    ev = __builtin_ctz(ag->rep_pending);
    ag->rep_pending &= ~(1u << ev);
  }
  uv_mutex_unlock(&ag->mu);
  return ev;
}

/* Sends each queued report on its own connection. A failed call is a debug line: the workers
 * go on. */
static void reporter_main(void *arg)
{
  struct mu_agent *ag = arg;
  struct mu_client *r = thread_client(ag);
  if (r == NULL)
    return;
  int ev;
  while ((ev = reporter_next(ag)) >= 0) {
    struct mu_report_answer a;
    if (mu_client_report(r, ag->cfg->run_id, ag->node_id, ag->round.round, (enum mu_report_event)ev,
                         NULL, &a) != 0)
      mu_agent_say(ag, MU_AGENT_DEBUG, "report '%s' failed: %s",
                   mu_report_event_name((enum mu_report_event)ev), mu_client_errmsg(r));
  }
  mu_client_free(r);
}

/* Sends what is queued, then ends the reporter thread (after the loop). */
static void reporter_stop(struct mu_agent *ag)
{
  if (!ag->reporter_started)
    return;
  uv_mutex_lock(&ag->mu);
  ag->rep_stop = 1;
  uv_cond_signal(&ag->rep_cond);
  uv_mutex_unlock(&ag->mu);
  uv_thread_join(&ag->reporter);
  ag->reporter_started = 0;
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

/* A worker failed, hung or printed a Python traceback (a PyTorch process whose peer died prints
 * one at once, then may take a second to end): the rendezvous hears at once that a failure may
 * follow. A backend that must ask the other members whether they are alive (etcd v3) asks now,
 * so that a node lost with its agent ends the round without waiting for this node's workers;
 * musterd has seen that loss already (no request). Once per attempt; counts nothing. */
static void hint_failing(struct mu_agent *ag)
{
  if (ag->hinted || ag->signal_seen != 0)
    return;
  ag->hinted = 1;
  report_event(ag, MU_REPORT_FAILING);
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
  w->stopped = ag->stopping || ag->asking_stacks;
  ag->nexited++;
  uv_close((uv_handle_t *)p, on_handle_closed);
  if ((status != 0 || term_signal != 0) && !w->stopped) {
    ag->failed_idx = (int)(w - ag->w);
    set_outcome(ag, MU_AGENT_WORKER_FAILED);
    begin_stop(ag, SIGTERM);
    hint_failing(ag);
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

static void progress(struct mu_agent_worker *w, long long at_ms);
static void hint_failing(struct mu_agent *ag);

static void write_out(struct mu_agent_worker *w, int is_err, const char *data, size_t n, int eof)
{
  struct mu_agent *ag = w->ag;
  /* a line of output is progress while the worker never touched its heartbeat file */
  if (n > 0 && !w->hb_touched && !ag->asking_stacks && mu_agent_output_progress(w, is_err, data, n))
    progress(w, wall_ms());
  if (is_err && n > 0 && ag->asking_stacks) /* what it prints now is its stacks */
    (void)mu_buf_append(&w->stacks, data, n);
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

#define TRACEBACK_LINE "Traceback (most recent call last):"

/* Does data[0..n) hold a line that starts with TRACEBACK_LINE? (a line cut between two reads is
 * missed: the worker's end is the hint then) */
static int has_traceback(const char *data, size_t n)
{
  const size_t tl = sizeof(TRACEBACK_LINE) - 1;
  for (const char *p = data, *end = data + n; p != NULL && (size_t)(end - p) >= tl;) {
    if (memcmp(p, TRACEBACK_LINE, tl) == 0)
      return 1;
    p = memchr(p, '\n', (size_t)(end - p));
    p = p != NULL ? p + 1 : NULL;
  }
  return 0;
}

/* What a worker printed: to its log and the console, and a Python traceback on its stderr while
 * the workers run is the first sign of a failure (hint_failing()). */
static void deliver(struct mu_agent_worker *w, int is_err, const char *data, size_t n, int eof)
{
  struct mu_agent *ag = w->ag;
  write_out(w, is_err, data, n, eof);
  if (is_err && !ag->stopping && !ag->asking_stacks && ag->outcome == MU_AGENT_RUNNING &&
      has_traceback(data, n))
    hint_failing(ag);
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

/* The attempt ends: the rendezvous hears what happened before the watcher's watch closes (a
 * watch that closes otherwise loses this node at once): a failure or a hang is reported (the
 * round ends for every node; a restart of the run's budget counts, or with none left the run
 * is shut), a success is this node's leave. A signal, a changed round, an ended run: nothing. */
static void tell_rendezvous(struct mu_agent *ag)
{
  const struct mu_agent_config *cfg = ag->cfg;
  if (ag->signal_seen != 0)
    return;
  if (ag->outcome == MU_AGENT_SUCCEEDED) {
    int rc = mu_client_leave(ag->rdzv, cfg->run_id, ag->node_id, 1, NULL);
    ag->left = rc == 0 ? 1 : rc;
    if (rc != 0)
      snprintf(ag->report_err, sizeof(ag->report_err), "%s", mu_client_errmsg(ag->rdzv));
    return;
  }
  if (ag->outcome != MU_AGENT_WORKER_FAILED || ag->failed_idx < 0)
    return;
  mu_agent_failure_record(ag);
  /* Every node sees a hang; the one whose rank hung in its own code reports first, so that the
   * round's reason names that rank: a node whose ranks only wait inside a library for it waits
   * a moment (its report then finds the round ended, and counts nothing). */
  if (ag->last_failure.hung != NULL && ag->last_failure.waiting)
    nap(ag, WAITING_REPORT_DELAY_MS);
  struct mu_buf why = MU_BUF_INIT(SIZE_MAX);
  mu_failrec_summary(&ag->last_failure, &why);
  int rc = mu_client_report(ag->rdzv, cfg->run_id, ag->node_id, ag->round.round,
                            ag->hung_idx >= 0 ? MU_REPORT_HUNG : MU_REPORT_FAILED, mu_buf_str(&why),
                            &ag->answer);
  ag->reported = rc == 0 ? 1 : rc;
  if (rc != 0)
    snprintf(ag->report_err, sizeof(ag->report_err), "%s", mu_client_errmsg(ag->rdzv));
  mu_buf_release(&why);
}

static void maybe_finish(struct mu_agent *ag)
{
  if (ag->open_handles > 0 || ag->nexited < ag->nworkers || ag->loop_handles_closed)
    return;
  ag->loop_handles_closed = 1;
  /* The rendezvous hears the attempt's end after uv_run() returns, off the loop. */
  close_loop_handle((uv_handle_t *)&ag->kill_timer);
  close_loop_handle((uv_handle_t *)&ag->drain_timer);
  close_loop_handle((uv_handle_t *)&ag->watch_timer);
  close_loop_handle((uv_handle_t *)&ag->stacks_timer);
  close_loop_handle((uv_handle_t *)&ag->sig_int);
  close_loop_handle((uv_handle_t *)&ag->sig_term);
  close_loop_handle((uv_handle_t *)&ag->async);
  mu_agent_timer_close(ag);
}

/* ---------------------------------------------------------------------------------------------
 * Progress and hangs: each worker's heartbeat file (its mtime) is read every tick; a line of
 * output counts while the worker never touched the file. With --hang-timeout, a worker without
 * progress for that long (--hang-initial-timeout before its first) is hung: every worker is
 * asked for its stacks (SIGABRT: a Python worker with PYTHONFAULTHANDLER prints every thread's
 * stack and ends), the others get the stop grace, then the workers are stopped and the attempt
 * ends as a failure.
 */

static long long mtime_ns(const char *path)
{
  struct stat st;
  if (stat(path, &st) != 0)
    return -1;
  return (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
}

/* The worker's heartbeat file, empty, created before it starts: touching it (utime(), or
 * Python's Path.touch()) changes its mtime. */
static void heartbeat_create(struct mu_agent *ag, struct mu_agent_worker *w)
{
  int fd = open(w->heartbeat_file, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0)
    mu_agent_say(ag, MU_AGENT_PROGRESS, "cannot create the heartbeat file '%s': %s",
                 w->heartbeat_file, strerror(errno));
  else
    close(fd);
  w->hb_mtime_ns = mtime_ns(w->heartbeat_file);
}

static void progress(struct mu_agent_worker *w, long long at_ms)
{
  struct mu_agent *ag = w->ag;
  if (at_ms <= w->progress_ms)
    return;
  w->progress_ms = at_ms;
  mu_agent_job_progress(ag, at_ms);
  if (ag->first_progress_ms != 0)
    return;
  ag->first_progress_ms = at_ms;
  long long after = at_ms - ag->start_ms;
  mu_agent_say(ag, MU_AGENT_PROGRESS,
               "round %ld: first progress (rank %d), %lld.%03lld s after the workers started",
               ag->round.round, w->rank, (after > 0 ? after : 0) / 1000,
               (after > 0 ? after : 0) % 1000);
  report_event(ag, MU_REPORT_PROGRESS);
}

static void on_stacks_timer(uv_timer_t *t)
{
  begin_stop(t->data, SIGTERM);
}

/* The job made no progress for `idle_ms` (rule `rule`): ask every worker for its stacks. `w` is
 * this node's worker whose last progress is oldest (the suspect until the stacks say more). */
static void ask_stacks(struct mu_agent *ag, struct mu_agent_worker *w, long long idle_ms,
                       enum mu_progress_rule rule)
{
  const struct mu_agent_config *cfg = ag->cfg;
  long long now = wall_ms();
  long long own = now - (w->progress_ms ? w->progress_ms : ag->start_ms);
  ag->hung_idx = (int)(w - ag->w);
  ag->hung_at_ms = now;
  ag->hung_idle_ms = idle_ms;
  ag->hung_first = rule == MU_PROGRESS_HUNG_START;
  ag->failed_idx = ag->hung_idx;
  set_outcome(ag, MU_AGENT_WORKER_FAILED);
  long long limit =
      ag->hung_first ? mu_agent_initial_timeout_ms(cfg) : mu_agent_step_timeout_ms(ag);
  char step[48] = "";
  if (ag->step >= 0)
    snprintf(step, sizeof(step), "; the last step reported: %lld", ag->step);
  mu_agent_say(ag, MU_AGENT_PROGRESS,
               "no progress from rank %d for %lld.%lld s, nor from any rank of the job for "
               "%lld.%lld s (%s %lld.%lld s%s%s): hung (rule %s); asking every worker for its "
               "stacks (SIGABRT), then stopping them",
               w->rank, own / 1000, own % 1000 / 100, idle_ms / 1000, idle_ms % 1000 / 100,
               ag->hung_first ? "--hang-initial-timeout" : "--hang-timeout", limit / 1000,
               limit % 1000 / 100,
               ag->hung_first   ? ", the timeout before the job's first progress since the workers "
                                  "started"
               : cfg->hang_auto ? ", learned by --hang-timeout auto"
                                : "",
               step, mu_progress_rule_name(rule));
  ag->asking_stacks = 1;
  for (int i = 0; i < ag->nworkers; i++) {
    struct mu_agent_worker *o = &ag->w[i];
    if (o->spawned && !o->exited)
      kill(o->child.proc.pid, SIGABRT);
  }
  uv_timer_start(&ag->stacks_timer, on_stacks_timer, (uint64_t)(cfg->stop_grace_s * 1000), 0);
  hint_failing(ag);
}

/* A tick: heartbeat files that changed are progress (their last line may say the step); then,
 * with a hang timeout, the job's rule (rules/progress.h): hung when no rank of the job, on any
 * node, progressed for the timeout. */
static void on_watch_timer(uv_timer_t *t)
{
  struct mu_agent *ag = t->data;
  const struct mu_agent_config *cfg = ag->cfg;
  if (ag->stopping || ag->asking_stacks)
    return;
  struct mu_agent_worker *oldest = NULL;
  for (int i = 0; i < ag->nworkers; i++) {
    struct mu_agent_worker *w = &ag->w[i];
    if (!w->spawned || w->exited)
      continue;
    long long m = mtime_ns(w->heartbeat_file);
    if (m >= 0 && m != w->hb_mtime_ns) {
      w->hb_mtime_ns = m;
      w->hb_touched = 1;
      mu_agent_heartbeat_line(ag, w);
      progress(w, m / 1000000);
    }
    /* the suspect by progress: the oldest among those that progressed (else the first) */
    if (oldest == NULL ||
        (w->progress_ms != 0 && (oldest->progress_ms == 0 || w->progress_ms < oldest->progress_ms)))
      oldest = w;
  }
  if (cfg->hang_timeout_s <= 0) {
    if (ag->first_progress_ms != 0)
      uv_timer_stop(&ag->watch_timer); /* only the first progress was wanted */
    return;
  }
  struct mu_progress_view v = {ag->start_ms, mu_agent_job_last(ag), mu_agent_step_timeout_ms(ag),
                               mu_agent_initial_timeout_ms(cfg)};
  int64_t idle = 0;
  enum mu_progress_rule rule = mu_rule_progress(&v, wall_ms(), &idle);
  if (oldest != NULL && (rule == MU_PROGRESS_HUNG || rule == MU_PROGRESS_HUNG_START))
    ask_stacks(ag, oldest, idle, rule);
}

/* The watch's tick: an eighth of the hang timeout (so a hang is seen within it plus 1/8), at
 * most 500 ms, at least 50 ms; 500 ms with no hang timeout (only the first progress). */
static uint64_t watch_tick_ms(const struct mu_agent_config *cfg)
{
  double t = cfg->hang_timeout_s > 0 ? cfg->hang_timeout_s * 1000 / 8 : 500;
  double i = cfg->hang_timeout_s > 0 ? (double)mu_agent_initial_timeout_ms(cfg) / 8 : 500;
  t = i < t ? i : t;
  return t > 500 ? 500 : t < 50 ? 50 : (uint64_t)t;
}

int mu_agent_own_log_dir(const char *log_dir, const char *base_dir, struct mu_buf *err)
{
  struct stat st;
  if (stat(log_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    mu_buf_printf(err, "--log-dir '%s' is not a directory; check --log-dir", log_dir);
    return MU_AGENT_EXIT_USAGE;
  }
  /* Someone who may rename the entries of --log-dir could swap the run's directory after the
   * check below: its owner (when not us or root), or anyone, when it is writable by all and
   * not sticky (as /tmp is). */
  if ((st.st_uid != geteuid() && st.st_uid != 0) ||
      ((st.st_mode & S_IWOTH) != 0 && (st.st_mode & S_ISVTX) == 0)) {
    mu_buf_printf(err,
                  "--log-dir '%s' belongs to uid %ld or is writable by anyone without the "
                  "sticky bit: someone else could replace the logs in it; use a directory of "
                  "yours",
                  log_dir, (long)st.st_uid);
    return MU_AGENT_EXIT_USAGE;
  }
  struct mu_buf e = MU_BUF_INIT(SIZE_MAX);
  int rc = mu_own_dir(base_dir, 0700, 077, &e);
  if (rc != 0)
    mu_buf_printf(err, "the run's log directory: %s; check --log-dir and --run-id", mu_buf_str(&e));
  mu_buf_release(&e);
  return rc != 0 ? MU_AGENT_EXIT_USAGE : 0;
}

/* A worker's log: never through a symbolic link (the directory is the run's own, made private
 * by mu_agent_own_log_dir(); this is the second guard). */
static int open_log(const char *dir, const char *name)
{
  char path[PATH_MAX];
  if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
    return -1;
  return open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
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
  w->heartbeat_file = mu_asprintf("%s/heartbeat", dir);
  heartbeat_create(ag, w);
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
  mu_agent_progress_env(cfg, w->heartbeat_file, environ, &env);
  if (mu_agent_timer_path(ag) != NULL && getenv("TORCHELASTIC_TIMER_FILE") == NULL)
    mu_strvec_pushf(&env, "TORCHELASTIC_TIMER_FILE=%s", mu_agent_timer_path(ag));

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

/* How long worker `w` had made no progress when the agent saw the hang, in ms. */
static long long hung_for_ms(const struct mu_agent *ag, const struct mu_agent_worker *w)
{
  (void)w; /* the job's time without progress: a hang is the job's */
  return ag->hung_idle_ms;
}

void mu_agent_describe_exit(const struct mu_agent_worker *w, char *out, size_t n)
{
  const struct mu_agent *ag = w->ag;
  if (ag != NULL && ag->hung_idx >= 0 && ag->failed_idx == (int)(w - ag->w))
    snprintf(out, n, "hung: no progress for %lld s, stopped for its stacks",
             (hung_for_ms(ag, w) + 500) / 1000);
  else if (w->spawn_error != 0)
    snprintf(out, n, "could not start: %s", uv_strerror(w->spawn_error));
  else if (w->term_signal != 0 && w->timer_scope != NULL) {
    struct mu_buf b = MU_BUF_INIT(SIZE_MAX);
    mu_agent_timer_describe(w, &b);
    snprintf(out, n, "killed by signal %d (%s): %s", w->term_signal, strsignal(w->term_signal),
             mu_buf_str(&b));
    mu_buf_release(&b);
  } else if (w->term_signal != 0)
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

/* After a hang: the suspects (rules/progress.h, mu_rule_suspects()): the ranks whose stacks end
 * in their own code (not inside a library, where a rank waits in a collective), else those whose
 * last progress is oldest. Says them; returns the first (the one seen first, on a tie), with its
 * innermost frame (caller frees) and whether that is library code. */
static int pick_hung(const struct mu_agent *ag, char **frame, int *library)
{
  int n = ag->nworkers;
  int64_t *last = mu_calloc((size_t)n, sizeof(*last));
  enum mu_stack_kind *kind = mu_calloc((size_t)n, sizeof(*kind));
  enum mu_progress_rule *verdict = mu_calloc((size_t)n, sizeof(*verdict));
  char **frames = mu_calloc((size_t)n, sizeof(*frames));
  int *lib = mu_calloc((size_t)n, sizeof(*lib));
  for (int i = 0; i < n; i++) {
    last[i] = ag->w[i].progress_ms;
    frames[i] = mu_failrec_innermost_frame(mu_buf_str((struct mu_buf *)&ag->w[i].stacks), &lib[i]);
    kind[i] = frames[i] == NULL ? MU_STACK_UNKNOWN
              : lib[i]          ? MU_STACK_COLLECTIVE
                                : MU_STACK_OWN_CODE;
  }
  mu_rule_suspects(n, last, kind, verdict);
  int best = verdict[ag->hung_idx] != MU_SUSPECT_NONE ? ag->hung_idx : -1;
  struct mu_buf say = MU_BUF_INIT(SIZE_MAX);
  for (int i = 0; i < n; i++) {
    if (verdict[i] == MU_SUSPECT_NONE)
      continue;
    best = best < 0 ? i : best;
    (void)mu_buf_printf(&say, "%srank %d (%s%s%s)", say.len ? ", " : "", ag->w[i].rank,
                        mu_progress_rule_name(verdict[i]), frames[i] ? ": " : "",
                        frames[i] ? frames[i] : "");
  }
  mu_agent_say((struct mu_agent *)ag, MU_AGENT_PROGRESS,
               "round %ld: suspects of the hang on this node: %s", ag->round.round,
               mu_buf_str(&say));
  best = best < 0 ? ag->hung_idx : best;
  *frame = frames[best];
  *library = lib[best];
  frames[best] = NULL;
  for (int i = 0; i < n; i++)
    mu_free(frames[i]);
  mu_buf_release(&say);
  mu_free(frames);
  mu_free(lib);
  mu_free(verdict);
  mu_free(kind);
  mu_free(last);
  return best;
}

/* The record of a hang: the hung worker's innermost frame as the exception, its stacks as the
 * details. Takes `frame`. */
static void hang_record(const struct mu_agent *ag, const struct mu_agent_worker *w, char *frame,
                        int library, struct mu_failrec *r)
{
  long long idle = hung_for_ms(ag, w);
  r->hung = mu_asprintf("no progress for %lld s", (idle + 500) / 1000);
  r->waiting = frame != NULL && library;
  r->source = mu_strdup(frame != NULL ? "stacks" : "stderr");
  if (frame != NULL) {
    r->exception = frame;
    r->details = mu_strdup(mu_buf_str((struct mu_buf *)&w->stacks));
  } else { /* not a Python worker, or it printed nothing: its last stderr lines */
    r->details = tail_lines(w, 20);
    r->exception = mu_failrec_exception_line(r->details);
  }
}

/* Fills the failure record of worker w: its error file when it wrote one, else the last lines
 * of its stderr; after a hang, its stacks. */
static void make_record(const struct mu_agent *ag, const struct mu_agent_worker *w, int restarts,
                        char *hang_frame, int hang_library, struct mu_failrec *r)
{
  struct mu_buf text = MU_BUF_INIT(1u << 20);
  char host[256] = "?";
  gethostname(host, sizeof(host) - 1);
  memset(r, 0, sizeof(*r));
  if (ag->hung_idx >= 0) {
    hang_record(ag, w, hang_frame, hang_library, r);
  } else if (w->timer_scope != NULL && w->term_signal != 0) { /* reaped by the file timer */
    struct mu_buf b = MU_BUF_INIT(SIZE_MAX);
    mu_agent_timer_describe(w, &b);
    r->exception = mu_strdup(mu_buf_str(&b));
    r->details = tail_lines(w, 20);
    r->source = mu_strdup("timer");
    mu_buf_release(&b);
  } else if (w->error_file != NULL && mu_read_file(w->error_file, 1u << 20, &text) == 0 &&
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
  r->time_ms = ag->hung_idx >= 0 ? ag->hung_at_ms : w->end_ms;
  mu_buf_release(&text);
}

void mu_agent_failure_record(struct mu_agent *ag)
{
  char *frame = NULL;
  int library = 0;
  if (ag->hung_idx >= 0)
    ag->failed_idx = pick_hung(ag, &frame, &library);
  mu_failrec_release(&ag->last_failure);
  make_record(ag, &ag->w[ag->failed_idx], ag->restart_count, frame, library, &ag->last_failure);
}

/* "restarts left: 2", "none left: the run is shut down", from the rendezvous's answer. */
static void restarts_left(const struct mu_agent *ag, char *out, size_t n)
{
  const struct mu_report_answer *a = &ag->answer;
  if (ag->reported != 1)
    snprintf(out, n, "restarts left: unknown, the rendezvous did not answer");
  else if (strcmp(a->state, "shut") == 0)
    snprintf(out, n, "restarts left: 0, the run is shut down");
  else if (a->max_restarts >= 0)
    snprintf(out, n, "restarts left: %ld", a->max_restarts - a->restart_count);
  else
    snprintf(out, n, "restarts: %d", a->restart_count);
}

void mu_agent_failure_report(struct mu_agent *ag)
{
  const struct mu_agent_worker *w = &ag->w[ag->failed_idx];
  char how[640], left[96];
  mu_agent_describe_exit(w, how, sizeof(how));
  restarts_left(ag, left, sizeof(left));
  struct mu_failrec *r = &ag->last_failure;
  if (ag->reported == 1) /* restarts of the run done after this failure */
    r->restarts = ag->answer.restart_count;
  struct mu_buf s = MU_BUF_INIT(SIZE_MAX);
  (void)mu_buf_printf(&s,
                      "worker failure in run '%s', round %ld, attempt %d (%s):\n"
                      "  rank %d (local rank %d, node rank %d) on host %s (%s), pid %d: %s%s\n",
                      ag->cfg->run_id, ag->round.round, ag->attempt, left, w->rank, w->local_rank,
                      ag->round.node_rank, r->host, ag->addr, (int)r->pid, how,
                      r->oom ? " (likely killed for memory: the cgroup counted an OOM kill)" : "");
  struct mu_buf ef = MU_BUF_INIT(SIZE_MAX);
  if (r->hung != NULL && strcmp(r->source, "stacks") == 0)
    (void)mu_buf_printf(&s, "  its stacks (above, [%d]:) end in %s%s\n", w->rank, r->exception,
                        r->waiting ? ", inside a library: it waited for another rank" : "");
  else if (r->hung != NULL)
    (void)mu_buf_printf(&s,
                        "  (no Python stack in its output: not a Python worker? its last stderr "
                        "line: %s)\n",
                        r->exception[0] ? r->exception : "none");
  else if (strcmp(r->source, "timer") == 0)
    (void)mu_buf_printf(&s, "  (reaped by its file timer: a timeout of its own code, not a "
                            "crash; no error file is written when a worker is killed)\n");
  else if (mu_agent_error_file_summary(w->error_file, ERROR_LINES, "    | ", &ef) == 0)
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

/* After the loop: every worker ended and the loop's handles are closed. What is queued goes
 * out, then the attempt's end, then the watcher's watch closes (woken by the cancel pipe). The
 * loop is closed only after the threads end (the watcher may still post to its async handle). */
static void attempt_end(struct mu_agent *ag)
{
  reporter_stop(ag);
  tell_rendezvous(ag);
  ssize_t wr = write(ag->cancel_pipe[1], "x", 1);
  (void)wr;
  mu_agent_sharer_stop(ag);
  if (ag->watcher_started)
    uv_thread_join(&ag->watcher);
  int lc = uv_loop_close(&ag->loop);
  if (lc != 0)
    mu_agent_say(ag, MU_AGENT_DEBUG, "agent loop did not close cleanly: %s", uv_strerror(lc));
  mu_agent_timer_free(ag);
  close(ag->cancel_pipe[0]);
  close(ag->cancel_pipe[1]);
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
  ag->rep_pending = 0;
  ag->rep_stop = 0;
  uv_loop_init(&ag->loop);
  if (pipe(ag->cancel_pipe) != 0 || fcntl(ag->cancel_pipe[0], F_SETFD, FD_CLOEXEC) != 0 ||
      fcntl(ag->cancel_pipe[1], F_SETFD, FD_CLOEXEC) != 0) {
    mu_agent_say(ag, MU_AGENT_PROGRESS, "cannot create a pipe: %s", strerror(errno));
    abort();
  }
  uv_timer_init(&ag->loop, &ag->kill_timer);
  uv_timer_init(&ag->loop, &ag->drain_timer);
  uv_timer_init(&ag->loop, &ag->watch_timer);
  uv_timer_init(&ag->loop, &ag->stacks_timer);
  ag->kill_timer.data = ag->drain_timer.data = ag;
  ag->watch_timer.data = ag->stacks_timer.data = ag;
  ag->first_progress_ms = 0;
  ag->hung_idx = -1;
  ag->hung_at_ms = 0;
  ag->asking_stacks = 0;
  mu_agent_progress_begin(ag);
  ag->reported = 0;
  ag->hinted = 0;
  ag->left = 0;
  memset(&ag->answer, 0, sizeof(ag->answer));
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
    w->step = -1;
    w->stacks = (struct mu_buf)MU_BUF_INIT(STACKS_MAX);
  }
  mu_agent_timer_start(ag); /* before the workers: they get its path */
  ag->start_ms = wall_ms();
  for (int i = 0; i < ag->nworkers; i++)
    spawn_worker(ag, &ag->w[i]);
  uint64_t tick = watch_tick_ms(cfg);
  uv_timer_start(&ag->watch_timer, on_watch_timer, tick, tick);
  report_event(ag, MU_REPORT_STARTED);
  char ranks[48];
  mu_agent_say(ag, MU_AGENT_PROGRESS, "round %ld: started %d worker%s (%s of %d)", ag->round.round,
               ag->nworkers, ag->nworkers == 1 ? "" : "s",
               mu_agent_ranks(ranks, sizeof(ranks), ag->round.rank_offset, ag->nworkers),
               ag->round.world_size);
  ag->watcher_started = uv_thread_create(&ag->watcher, watcher_main, ag) == 0;
  ag->reporter_started = uv_thread_create(&ag->reporter, reporter_main, ag) == 0;
  mu_agent_sharer_start(ag);
  maybe_finish(ag); /* every spawn may have failed */
  uv_run(&ag->loop, UV_RUN_DEFAULT);
  attempt_end(ag);
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
    mu_free(w->heartbeat_file);
    mu_free(w->timer_scope);
    mu_buf_release(&w->stacks);
  }
  mu_free(ag->w);
  ag->w = NULL;
  ag->nworkers = 0;
}
