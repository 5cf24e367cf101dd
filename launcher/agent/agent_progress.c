/* The job's progress (docs/agent.md, "Progress" and "Hung ranks"): a hang is the job's, not a
 * rank's. Synchronous training moves together, so one rank that progresses proves that the
 * collectives around it complete; a rank that never prints is never hung while another moves.
 *
 * Each agent shares its node's progress through the rendezvous, on every backend through the
 * run's KV (musterd's /v1 KV, etcd v3 keys under the run): a counter per round,
 * `muster.progress.<round>`, that a node adds one to when its workers progressed (at once, at
 * most every SHARE_GAP_MS), and that every node reads every share period; a change another node
 * made is the job's progress, seen now on this node's clock (no clocks are compared across
 * nodes). Beside it `muster.progress.<round>.<node rank>` says the node's last progress (Unix
 * ms), step and checkpoint when the workers write them. The hang decision (rules/progress.h)
 * runs on the loop (agent_attempt.c); this file feeds it off the loop, on the sharer thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "muster/errno.h"

#include "agent_impl.h"
#include "alloc.h"
#include "buf.h"
#include "progress.h"

#define SHARE_GAP_MS 100 /* at most one add a node every this long */
#define AUTO_KEY "muster.hang_timeout_auto"
#define HB_TAIL 4096 /* the heartbeat file's last bytes read for its last line */

static long long now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int mu_agent_progress_init(struct mu_agent *ag, struct mu_buf *err)
{
  const char *re = ag->cfg->progress_regex;
  if (re == NULL)
    return 0;
  int rc = regcomp(&ag->progress_re, re, REG_EXTENDED | REG_NOSUB);
  if (rc != 0) {
    char why[256];
    regerror(rc, &ag->progress_re, why, sizeof(why));
    mu_buf_printf(err,
                  "--progress-regex '%s': %s; give a POSIX extended regular expression "
                  "(e.g. '^step [0-9]+')",
                  re, why);
    return MU_AGENT_EXIT_USAGE;
  }
  ag->has_progress_re = 1;
  return 0;
}

void mu_agent_progress_release(struct mu_agent *ag)
{
  if (ag->has_progress_re)
    regfree(&ag->progress_re);
  ag->has_progress_re = 0;
}

void mu_agent_progress_begin(struct mu_agent *ag)
{
  if (!ag->progress_base_set) { /* this node's first attempt is no restart, whatever the run's */
    ag->progress_base = ag->round.restart_count;
    ag->progress_base_set = 1;
  }
  ag->job_local_ms = 0;
  ag->job_seen_ms = 0;
  ag->prog_seq = 0;
  ag->step = -1;
  ag->checkpoint = -1;
  ag->first_step = -1;
  ag->first_step_ms = 0;
  ag->total_steps = -1;
  ag->auto_ms = ag->auto_kept_ms;
  ag->auto_slowest_ms = 0;
  ag->auto_intervals = 0;
  ag->auto_prev_ms = 0;
  ag->share_stop = 0;
  ag->hung_idle_ms = 0;
  ag->hung_first = 0;
}

long long mu_agent_initial_timeout_ms(const struct mu_agent_config *cfg)
{
  double s = cfg->hang_initial_timeout_s;
  if (s <= 0)
    s = cfg->hang_timeout_s > MU_AGENT_HANG_INITIAL_DEFAULT_S ? cfg->hang_timeout_s
                                                              : MU_AGENT_HANG_INITIAL_DEFAULT_S;
  return (long long)(s * 1000);
}

long long mu_agent_step_timeout_ms(struct mu_agent *ag)
{
  if (!ag->cfg->hang_auto)
    return (long long)(ag->cfg->hang_timeout_s * 1000);
  uv_mutex_lock(&ag->mu);
  long long t = ag->auto_ms;
  uv_mutex_unlock(&ag->mu);
  return t > 0 ? t : mu_agent_initial_timeout_ms(ag->cfg); /* learning: the initial one */
}

long long mu_agent_job_last(struct mu_agent *ag)
{
  uv_mutex_lock(&ag->mu);
  long long seen = ag->job_seen_ms;
  uv_mutex_unlock(&ag->mu);
  return seen > ag->job_local_ms ? seen : ag->job_local_ms;
}

/* --hang-timeout auto: the interval since the job's progress before is one more step interval
 * (the loop's view: this node's progress and the other nodes' as the sharer saw it). */
static void auto_learn(struct mu_agent *ag, long long at_ms)
{
  if (!ag->cfg->hang_auto)
    return;
  if (ag->auto_prev_ms > 0 && at_ms > ag->auto_prev_ms) {
    long long gap = at_ms - ag->auto_prev_ms;
    ag->auto_slowest_ms = gap > ag->auto_slowest_ms ? gap : ag->auto_slowest_ms;
    ag->auto_intervals++;
  }
  ag->auto_prev_ms = at_ms > ag->auto_prev_ms ? at_ms : ag->auto_prev_ms;
  int64_t t = 0;
  uv_mutex_lock(&ag->mu);
  long long before = ag->auto_ms;
  int64_t floor_ms = (int64_t)(ag->cfg->hang_timeout_s * 1000);
  if (mu_rule_auto_timeout(ag->auto_slowest_ms, ag->auto_intervals, before, &t) ==
          MU_AUTO_LEARNED &&
      t < floor_ms)
    t = floor_ms;
  if (t > before)
    ag->auto_ms = t;
  uv_mutex_unlock(&ag->mu);
  if (t > before && (before == 0 || t >= before + before / 10)) /* said when it grows 10% */
    mu_agent_say(ag, MU_AGENT_PROGRESS,
                 "hang timeout (--hang-timeout auto): %lld.%03lld s in use: %d x the slowest of "
                 "%u step intervals (%lld.%03lld s), at least %lld s",
                 (long long)t / 1000, (long long)t % 1000, MU_AUTO_MULTIPLE, ag->auto_intervals,
                 ag->auto_slowest_ms / 1000, ag->auto_slowest_ms % 1000,
                 (long long)floor_ms / 1000);
}

void mu_agent_job_progress(struct mu_agent *ag, long long at_ms)
{
  if (at_ms > ag->job_local_ms)
    ag->job_local_ms = at_ms;
  auto_learn(ag, at_ms);
  uv_mutex_lock(&ag->mu);
  ag->prog_seq++;
  uv_cond_signal(&ag->share_cond);
  uv_mutex_unlock(&ag->mu);
}

/* N: 1 to 18 decimal digits at p (before end). Returns: the digits read (0 or 19: not a
 * number); *v the value. */
static int digits_at(const char **pp, const char *end, long long *v)
{
  const char *q = *pp;
  int digits = 0;
  *v = 0;
  for (; q < end && *q >= '0' && *q <= '9' && digits < 19; q++, digits++)
    *v = *v * 10 + (*q - '0');
  *pp = q;
  return digits;
}

/* The heartbeat file's line protocol (docs/agent.md, "Progress"): its last line, when it is
 * exactly `step N`, `step N/T` or `checkpoint N` (N, T decimal digits, at most 18; spaces or
 * tabs between and around; a line ends at '\n'), tells the step (and the job's total) or the
 * last checkpoint. Anything else is plain progress. Returns: 1 step, 2 checkpoint, 0 neither;
 * *n the number, *total T or -1. */
int mu_agent_parse_progress_line(const char *line, size_t len, long long *n, long long *total)
{
  static const char *const words[] = {"step", "checkpoint"};
  const char *p = line, *end = line + len;
  while (p < end && (*p == ' ' || *p == '\t'))
    p++;
  for (int k = 0; k < 2; k++) {
    size_t wl = strlen(words[k]);
    if ((size_t)(end - p) <= wl || memcmp(p, words[k], wl) != 0 || (p[wl] != ' ' && p[wl] != '\t'))
      continue;
    const char *q = p + wl;
    while (q < end && (*q == ' ' || *q == '\t'))
      q++;
    long long v = 0, t = -1;
    int digits = digits_at(&q, end, &v);
    if (k == 0 && q < end && *q == '/') { /* step N/T */
      q++;
      int td = digits_at(&q, end, &t);
      if (td == 0 || td > 18)
        return 0;
    }
    while (q < end && (*q == ' ' || *q == '\t' || *q == '\r'))
      q++;
    if (digits == 0 || digits > 18 || q != end)
      return 0;
    *n = v;
    if (total != NULL)
      *total = t;
    return k + 1;
  }
  return 0;
}

void mu_agent_heartbeat_line(struct mu_agent *ag, struct mu_agent_worker *w)
{
  char buf[HB_TAIL + 1];
  int fd = open(w->heartbeat_file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return;
  off_t size = lseek(fd, 0, SEEK_END);
  off_t from = size > HB_TAIL ? size - HB_TAIL : 0;
  ssize_t n = size > 0 ? pread(fd, buf, (size_t)(size - from), from) : 0;
  close(fd);
  if (n <= 0)
    return;
  const char *e = buf + n;
  while (e > buf && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' '))
    e--;
  const char *b = e;
  while (b > buf && b[-1] != '\n')
    b--;
  long long v = 0, total = -1;
  int kind = mu_agent_parse_progress_line(b, (size_t)(e - b), &v, &total);
  if (kind == 0)
    return;
  uv_mutex_lock(&ag->mu);
  if (kind == 1) {
    w->step = v;
    ag->step = v > ag->step ? v : ag->step;
    if (ag->first_step < 0) { /* the attempt's first step: where its steps per second start */
      ag->first_step = v;
      ag->first_step_ms = now_ms();
    }
    ag->total_steps = total > 0 ? total : ag->total_steps;
  }
  long long was = ag->checkpoint;
  if (kind == 2)
    ag->checkpoint = v;
  uv_mutex_unlock(&ag->mu);
  if (kind == 2 && v != was)
    mu_agent_say(ag, MU_AGENT_PROGRESS, "round %ld: rank %d: checkpoint %lld", ag->round.round,
                 w->rank, v);
}

int mu_agent_output_progress(struct mu_agent_worker *w, int is_err, const char *data, size_t n)
{
  struct mu_agent *ag = w->ag;
  if (!ag->has_progress_re)
    return memchr(data, '\n', n) != NULL;
  int counted = 0;
  char *line = w->re_line[is_err ? 1 : 0];
  size_t *len = &w->re_len[is_err ? 1 : 0];
  const size_t cap = sizeof(w->re_line[0]) - 1;
  for (size_t i = 0; i < n; i++) {
    if (data[i] != '\n') {
      if (*len < cap)
        line[(*len)++] = data[i];
      continue;
    }
    if (*len > 0 && line[*len - 1] == '\r')
      (*len)--;
    line[*len] = '\0';
    counted |= regexec(&ag->progress_re, line, 0, NULL, 0) == 0;
    *len = 0;
  }
  return counted;
}

/* ---------------------------------------------------------------------------------------------
 * The sharer thread
 */

/* The share period: a sixteenth of the step timeout, from 100 ms to 1 s. */
static long share_period_ms(struct mu_agent *ag)
{
  long long t = mu_agent_step_timeout_ms(ag) / 16;
  return t < 100 ? 100 : t > 1000 ? 1000 : (long)t;
}

/* What a node shares of its steps (-1: not known). */
struct steps {
  long long step, ckpt, first, first_ms, total;
};

/* Waits until this node progressed since `put_seq` (and SHARE_GAP_MS passed), the period ended
 * or the attempt ends. Returns: 1 to end. Takes a snapshot of what to share. */
static int share_wait(struct mu_agent *ag, unsigned long put_seq, long period, unsigned long *seq,
                      struct steps *step, long long *auto_ms)
{
  uv_mutex_lock(&ag->mu);
  if (!ag->share_stop && ag->prog_seq == put_seq)
    (void)uv_cond_timedwait(&ag->share_cond, &ag->mu, (uint64_t)period * 1000000);
  int stop = ag->share_stop;
  *seq = ag->prog_seq;
  step->step = ag->step;
  step->ckpt = ag->checkpoint;
  step->first = ag->first_step;
  step->first_ms = ag->first_step_ms;
  step->total = ag->total_steps;
  *auto_ms = ag->auto_ms;
  uv_mutex_unlock(&ag->mu);
  return stop;
}

/* This node's line: `<last progress, Unix ms> step N checkpoint C first S <ms> total T` (-1:
 * not known; S the attempt's first step and when it was seen): the rendezvous's run JSON folds
 * the nodes' lines into each round's steps (common/goodput.h). */
static void share_node(struct mu_agent *ag, struct mu_client *r, const struct steps *st)
{
  char key[96], val[192];
  snprintf(key, sizeof(key), "muster.progress.%ld.%d", ag->round.round, ag->round.node_rank);
  int n = snprintf(val, sizeof(val), "%lld step %lld checkpoint %lld first %lld %lld total %lld",
                   now_ms(), st->step, st->ckpt, st->first, st->first_ms, st->total);
  (void)mu_client_kv_put(r, ag->cfg->run_id, key, val, (size_t)n, NULL);
}

/* The value kept by an earlier attempt of --hang-timeout auto (0: none). */
static long long auto_kept(struct mu_agent *ag, struct mu_client *r)
{
  char *v = NULL;
  size_t len = 0;
  long long t = 0;
  if (mu_client_kv_get(r, ag->cfg->run_id, AUTO_KEY, 0, &v, &len) == 0 && v != NULL)
    t = strtoll(v, NULL, 10);
  mu_free(v);
  return t > 0 && t < 86400000LL * 30 ? t : 0;
}

struct share {
  char key[64];
  unsigned long put_seq; /* this node's progress events already added */
  long mine;             /* this node's adds to the round's counter */
  long remote;           /* the other nodes' adds seen */
  long long put_auto;    /* the auto value stored */
  long long last_add;    /* monotonic-ish: when this node last added */
};

/* One share: add this node's progress, or read the counter; a change by another node is the
 * job's progress, now. */
static void share_once(struct mu_agent *ag, struct mu_client *r, struct share *s, unsigned long seq,
                       const struct steps *st)
{
  long v = 0;
  int rc;
  int multi = ag->round.nnodes > 1;
  if (seq != s->put_seq && now_ms() - s->last_add >= SHARE_GAP_MS) {
    rc = mu_client_kv_add(r, ag->cfg->run_id, s->key, 1, &v);
    if (rc == 0) {
      s->put_seq = seq;
      s->mine++;
      s->last_add = now_ms();
      if (multi || st->step >= 0 || st->ckpt >= 0)
        share_node(ag, r, st);
    }
  } else if (multi) {
    char *val = NULL;
    size_t len = 0;
    rc = mu_client_kv_get(r, ag->cfg->run_id, s->key, 0, &val, &len);
    if (rc == 0 && val != NULL)
      v = strtol(val, NULL, 10);
    mu_free(val);
  } else {
    return;
  }
  if (rc == 0 && v - s->mine > s->remote) {
    s->remote = v - s->mine;
    long long t = now_ms();
    uv_mutex_lock(&ag->mu);
    ag->job_seen_ms = t;
    uv_mutex_unlock(&ag->mu);
  }
}

static void sharer_main(void *arg)
{
  struct mu_agent *ag = arg;
  struct mu_client *r = NULL;
  struct mu_buf e = MU_BUF_INIT(SIZE_MAX);
  if (mu_agent_client(ag, &r, &e) != 0) {
    mu_agent_say(ag, MU_AGENT_DEBUG, "no rendezvous client for the progress: %s", mu_buf_str(&e));
    mu_buf_release(&e);
    return;
  }
  mu_buf_release(&e);
  mu_client_set_timeout(r, 5000);
  mu_client_set_cancel_fd(r, ag->cancel_pipe[0]);
  struct share s;
  memset(&s, 0, sizeof(s));
  snprintf(s.key, sizeof(s.key), "muster.progress.%ld", ag->round.round);
  if (ag->cfg->hang_auto) {
    s.put_auto = auto_kept(ag, r);
    uv_mutex_lock(&ag->mu);
    if (s.put_auto > ag->auto_ms)
      ag->auto_ms = s.put_auto;
    long long in_use = ag->auto_ms;
    uv_mutex_unlock(&ag->mu);
    if (s.put_auto > 0)
      mu_agent_say(ag, MU_AGENT_PROGRESS,
                   "hang timeout (--hang-timeout auto): %lld.%03lld s in use, kept by the "
                   "rendezvous from an earlier attempt (%lld.%03lld s)",
                   in_use / 1000, in_use % 1000, s.put_auto / 1000, s.put_auto % 1000);
  }
  for (;;) {
    unsigned long seq;
    struct steps st;
    long long auto_ms;
    if (share_wait(ag, s.put_seq, share_period_ms(ag), &seq, &st, &auto_ms))
      break;
    share_once(ag, r, &s, seq, &st);
    if (ag->cfg->hang_auto && auto_ms > s.put_auto) {
      char val[32];
      int n = snprintf(val, sizeof(val), "%lld", auto_ms);
      if (mu_client_kv_put(r, ag->cfg->run_id, AUTO_KEY, val, (size_t)n, NULL) == 0)
        s.put_auto = auto_ms;
    }
  }
  mu_client_free(r);
}

void mu_agent_sharer_start(struct mu_agent *ag)
{
  if (ag->cfg->hang_timeout_s <= 0)
    return;
  ag->sharer_started = uv_thread_create(&ag->sharer, sharer_main, ag) == 0;
}

void mu_agent_sharer_stop(struct mu_agent *ag)
{
  if (!ag->sharer_started)
    return;
  uv_mutex_lock(&ag->mu);
  ag->share_stop = 1;
  uv_cond_signal(&ag->share_cond);
  uv_mutex_unlock(&ag->mu);
  uv_thread_join(&ag->sharer);
  ag->sharer_started = 0;
  /* what auto learned stays for the next attempt (and in the rendezvous for a new agent) */
  ag->auto_kept_ms = ag->auto_ms > ag->auto_kept_ms ? ag->auto_ms : ag->auto_kept_ms;
}

/* ---------------------------------------------------------------------------------------------
 * Stop retrying (item 7)
 */

int mu_agent_shut_exit(const char *why)
{
  return why != NULL && strstr(why, MU_AGENT_STOP_RETRYING) != NULL ? MU_AGENT_EXIT_NO_PROGRESS
                                                                    : MU_AGENT_EXIT_FAILED;
}

void mu_agent_progress_end(struct mu_agent *ag)
{
  if (mu_agent_job_last(ag) != 0)
    ag->progress_base = ag->round.restart_count;
}

int mu_agent_stop_retrying(struct mu_agent *ag, struct mu_buf *err)
{
  const struct mu_agent_config *cfg = ag->cfg;
  /* The run's restarts since this node's last attempt whose job made progress, whoever
   * reported them: a node whose peer's report broke the round before its own hang watch fired
   * made no report that round, and counting only its own reports let two nodes that took turns
   * run one round more than --max-no-progress-restarts (the CI run of stop 44). */
  int none = ag->round.restart_count - ag->progress_base;
  if (mu_rule_retry((uint32_t)none, (uint32_t)cfg->max_no_progress_restarts) != MU_RETRY_STOP)
    return 0;
  char reason[256];
  snprintf(reason, sizeof(reason),
           MU_AGENT_STOP_RETRYING " no progress over %d consecutive restarts "
                                  "(--max-no-progress-restarts %d; rule %s); exit code %d",
           none, cfg->max_no_progress_restarts, mu_progress_rule_name(MU_RETRY_STOP),
           MU_AGENT_EXIT_NO_PROGRESS);
  int rc = mu_client_shutdown(ag->rdzv, cfg->run_id, reason);
  if (rc != 0 && rc != MU_ESHUT && rc != MU_ECLOSED)
    mu_agent_say(ag, MU_AGENT_PROGRESS, "cannot shut the run down: %s", mu_client_errmsg(ag->rdzv));
  mu_buf_printf(err, "run '%s' failed: %s", cfg->run_id, reason);
  return 1;
}
