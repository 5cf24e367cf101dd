/* The file-based watchdog of torch.distributed.elastic.timer (torchrun's FileTimerServer, which
 * TORCHELASTIC_ENABLE_FILE_TIMER=1 turns on): per attempt, a named pipe whose path the workers get
 * as TORCHELASTIC_TIMER_FILE; torch's FileTimerClient opens it, writes one JSON request per line
 * (agent_timer.h) and closes it. The agent reads it on the attempt's loop (a uv_poll_t on the
 * read end; the agent holds a write end too, so the pipe never reads as ended between clients)
 * and checks the timers every TICK_MS: a worker whose timer expired is killed with the signal
 * its request names (SIGKILL by torch's default), and its failure record says which timer.
 * Unlike torchrun, the agent does not kill itself afterwards: the killed worker is a worker
 * failure like any other (the rendezvous hears it, a restart follows when the budget allows).
 * A request for a process that is not one of this attempt's workers (nor in one's process
 * group) is refused: the pipe must not let anyone kill any process of the user.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "muster/errno.h"

#include "agent_impl.h"
#include "agent_timer.h"
#include "alloc.h"
#include "fsutil.h"

#define TICK_MS 100    /* how often expired timers are looked for (torchrun: 0.1 s) */
#define SAY_BAD_MAX 10 /* bad requests said per attempt; more are only counted */
#define READ_CHUNK 65536

struct timer {
  long pid;
  char *scope;
  double expiration;
  int signal;
  int widx; /* the worker whose process (group) holds it */
};

struct mu_agent_timer {
  struct mu_agent *ag;
  char path[PATH_MAX];
  int made; /* the pipe was made */
  int rfd, wfd;
  uv_poll_t poll;
  uv_timer_t tick;
  int handles; /* open handles of the two above */
  char line[MU_TIMER_LINE_MAX + 1];
  size_t len;
  int skipping; /* inside a line over the limit: dropped up to its newline */
  struct timer *t;
  size_t n, cap;
  long bad;
};

/* ---------------------------------------------------------------------------------------------
 * The request parser
 */

void mu_timer_req_release(struct mu_timer_req *r)
{
  if (r == NULL)
    return;
  mu_free(r->scope);
  memset(r, 0, sizeof(*r));
}

/* A JSON number that is an integer in [lo, hi]. Returns: 1 with *out set. */
static int int_field(const cJSON *j, double lo, double hi, long *out)
{
  if (!cJSON_IsNumber(j) || j->valuedouble != floor(j->valuedouble) || j->valuedouble < lo ||
      j->valuedouble > hi)
    return 0;
  *out = (long)j->valuedouble;
  return 1;
}

static int bad(struct mu_buf *err, const char *what)
{
  mu_buf_printf(err,
                "%s; a request is one JSON object per line: {\"version\": 1, \"pid\": PID, "
                "\"scope_id\": \"NAME\", \"expiration_time\": UNIX_SECONDS (-1: release), "
                "\"signal\": N} (torch's FileTimerClient writes these)",
                what);
  return MU_EINVAL;
}

int mu_timer_parse(const char *line, size_t n, struct mu_timer_req *out, struct mu_buf *err)
{
  memset(out, 0, sizeof(*out));
  if (n > MU_TIMER_LINE_MAX) {
    mu_buf_printf(err,
                  "a timer request longer than %d bytes (PIPE_BUF: a pipe's atomic write) was "
                  "dropped; torch's FileTimerClient never sends one (a shorter scope name fixes "
                  "it)",
                  MU_TIMER_LINE_MAX);
    return MU_E2BIG;
  }
  cJSON *j = cJSON_ParseWithLength(line, n);
  if (!cJSON_IsObject(j)) {
    cJSON_Delete(j);
    return bad(err, "not a JSON object");
  }
  const cJSON *pid = cJSON_GetObjectItemCaseSensitive(j, "pid");
  const cJSON *scope = cJSON_GetObjectItemCaseSensitive(j, "scope_id");
  const cJSON *exp = cJSON_GetObjectItemCaseSensitive(j, "expiration_time");
  const cJSON *sig = cJSON_GetObjectItemCaseSensitive(j, "signal");
  long s = 0;
  int rc = 0;
  if (!int_field(pid, 1, (double)INT32_MAX, &out->pid))
    rc = bad(err, pid == NULL ? "the field 'pid' is missing" : "'pid' is not a process id");
  else if (!cJSON_IsString(scope))
    rc = bad(err, scope == NULL ? "the field 'scope_id' is missing" : "'scope_id' is not a string");
  else if (!cJSON_IsNumber(exp) || !isfinite(exp->valuedouble))
    rc = bad(err, exp == NULL ? "the field 'expiration_time' is missing"
                              : "'expiration_time' is not a number");
  else if (!int_field(sig, -(double)INT32_MAX, (double)INT32_MAX, &s))
    rc = bad(err, sig == NULL ? "the field 'signal' is missing" : "'signal' is not an integer");
  else if (s >= NSIG)
    rc = bad(err, "'signal' is not a signal number");
  if (rc == 0) {
    out->scope = mu_strdup(scope->valuestring);
    out->expiration = exp->valuedouble;
    out->signal = (int)s;
  }
  cJSON_Delete(j);
  return rc;
}

/* ---------------------------------------------------------------------------------------------
 * The server: the timers of the attempt's workers
 */

static double now_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void say_bad(struct mu_agent_timer *s, const char *fmt, const char *what)
{
  if (++s->bad <= SAY_BAD_MAX)
    mu_agent_say(s->ag, MU_AGENT_PROGRESS, fmt, what);
  if (s->bad == SAY_BAD_MAX)
    mu_agent_say(s->ag, MU_AGENT_PROGRESS,
                 "file timer: %d bad requests this attempt; more are not said", SAY_BAD_MAX);
}

/* The worker whose process is pid, or whose process group pid is in. Returns: its index, -1. */
static int worker_of(const struct mu_agent *ag, long pid)
{
  pid_t g = getpgid((pid_t)pid);
  for (int i = 0; i < ag->nworkers; i++) {
    const struct mu_agent_worker *w = &ag->w[i];
    if (w->spawned && !w->exited && (w->child.proc.pid == pid || w->child.proc.pid == g))
      return i;
  }
  return -1;
}

static void drop(struct mu_agent_timer *s, size_t i)
{
  mu_free(s->t[i].scope);
  s->t[i] = s->t[--s->n];
}

static struct timer *find(struct mu_agent_timer *s, long pid, const char *scope)
{
  for (size_t i = 0; i < s->n; i++)
    if (s->t[i].pid == pid && strcmp(s->t[i].scope, scope) == 0)
      return &s->t[i];
  return NULL;
}

/* An acquire (sets or moves the timer) or a release (expiration < 0: removes it). */
static void apply(struct mu_agent_timer *s, struct mu_timer_req *r)
{
  struct timer *t = find(s, r->pid, r->scope);
  if (r->expiration < 0) {
    if (t != NULL)
      drop(s, (size_t)(t - s->t));
    return;
  }
  int widx = worker_of(s->ag, r->pid);
  if (widx < 0) {
    char what[64];
    snprintf(what, sizeof(what), "%ld", r->pid);
    say_bad(s,
            "file timer: refused a timer of pid %s: not a worker of this agent (nor in a "
            "worker's process group)",
            what);
    return;
  }
  if (t == NULL) {
    if (s->n == s->cap) {
      s->cap = s->cap ? s->cap * 2 : 8;
      s->t = mu_realloc(s->t, s->cap * sizeof(*s->t));
    }
    t = &s->t[s->n++];
    t->pid = r->pid;
    t->scope = r->scope;
    r->scope = NULL;
  }
  t->expiration = r->expiration;
  t->signal = r->signal;
  t->widx = widx;
}

static void take_line(struct mu_agent_timer *s, const char *line, size_t n)
{
  struct mu_timer_req r;
  struct mu_buf err = MU_BUF_INIT(SIZE_MAX);
  if (mu_timer_parse(line, n, &r, &err) != 0)
    say_bad(s, "file timer: %s", mu_buf_str(&err));
  else
    apply(s, &r);
  mu_timer_req_release(&r);
  mu_buf_release(&err);
}

/* Bytes read from the pipe: whole lines are requests; a line over the limit is dropped. */
static void take_bytes(struct mu_agent_timer *s, const char *p, size_t n)
{
  while (n > 0) {
    const char *nl = memchr(p, '\n', n);
    size_t k = nl ? (size_t)(nl - p) : n;
    if (!s->skipping && s->len + k > MU_TIMER_LINE_MAX) {
      take_line(s, s->line, sizeof(s->line)); /* over the limit: says so, reads nothing */
      s->skipping = 1;
    }
    if (!s->skipping) {
      memcpy(s->line + s->len, p, k);
      s->len += k;
    }
    if (nl != NULL) {
      if (!s->skipping && s->len > 0)
        take_line(s, s->line, s->len);
      s->len = 0;
      s->skipping = 0;
      k++;
    }
    p += k;
    n -= k;
  }
}

static void on_readable(uv_poll_t *h, int status, int events)
{
  struct mu_agent_timer *s = h->data;
  (void)events;
  if (status < 0)
    return;
  static char buf[READ_CHUNK];
  for (;;) {
    ssize_t r = read(s->rfd, buf, sizeof(buf));
    if (r > 0) {
      take_bytes(s, buf, (size_t)r);
      continue;
    }
    if (r < 0 && errno == EINTR)
      continue;
    break; /* EAGAIN: all read (the agent's own write end keeps the pipe from ending) */
  }
}

/* Reaps worker w for its expired timer t: the signal t names, and the record says why. */
static void reap(struct mu_agent_timer *s, const struct timer *t, double now)
{
  struct mu_agent_worker *w = &s->ag->w[t->widx];
  if (w->exited || w->timer_scope != NULL)
    return; /* ended, or reaped already: its end is on its way */
  const char *name = mu_failrec_signame(t->signal);
  mu_agent_say(s->ag, MU_AGENT_PROGRESS,
               "file timer: the timer '%s' of rank %d (pid %ld) expired %.1f s ago; killing it "
               "with signal %d%s%s%s",
               t->scope, w->rank, t->pid, now - t->expiration, t->signal, name ? " (" : "",
               name ? name : "", name ? ")" : "");
  if (kill((pid_t)t->pid, t->signal) != 0) {
    mu_agent_say(s->ag, MU_AGENT_PROGRESS, "file timer: cannot kill pid %ld: %s", t->pid,
                 strerror(errno));
    return;
  }
  w->timer_scope = mu_strdup(t->scope);
  w->timer_signal = t->signal;
  w->timer_late_ms = (long long)((now - t->expiration) * 1000);
}

/* Every tick: the expired timers, the earliest first; a process's first timer with a signal
 * reaps it and clears its timers, as torch's server does. Timers of ended processes go. */
static void on_tick(uv_timer_t *h)
{
  struct mu_agent_timer *s = h->data;
  if (s->ag->stopping || s->ag->asking_stacks)
    return;
  double now = now_s();
  for (;;) {
    struct timer *first = NULL;
    for (size_t i = 0; i < s->n; i++)
      if (s->t[i].expiration <= now && (first == NULL || s->t[i].expiration < first->expiration))
        first = &s->t[i];
    if (first == NULL)
      break;
    long pid = first->pid;
    size_t fi = (size_t)(first - s->t);
    if (first->signal <= 0) { /* torch's server: expired, but not to be reaped */
      mu_agent_say(s->ag, MU_AGENT_PROGRESS,
                   "file timer: the timer '%s' of pid %ld expired; its signal is %d: not killed",
                   first->scope, pid, first->signal);
      drop(s, fi);
      continue;
    }
    reap(s, first, now);
    for (size_t i = s->n; i-- > 0;)
      if (s->t[i].pid == pid)
        drop(s, i);
  }
  for (size_t i = s->n; i-- > 0;)
    if (kill((pid_t)s->t[i].pid, 0) != 0 && errno == ESRCH)
      drop(s, i);
}

/* ---------------------------------------------------------------------------------------------
 * Its life: one per attempt
 */

static void on_closed(uv_handle_t *h)
{
  struct mu_agent_timer *s = h->data;
  s->handles--;
}

/* The pipe's path: TORCHELASTIC_TIMER_FILE when the agent has it (as torchrun), else one in the
 * attempt's directory (private to the run's user). Returns: 0, or -1 when too long. */
static int pick_path(struct mu_agent_timer *s)
{
  const char *p = getenv("TORCHELASTIC_TIMER_FILE");
  int n;
  if (p != NULL && p[0] != '\0') {
    n = snprintf(s->path, sizeof(s->path), "%s", p);
  } else {
    n = snprintf(s->path, sizeof(s->path), "%s/attempt_%d", s->ag->base_dir, s->ag->attempt);
    if (n > 0 && n < (int)sizeof(s->path))
      (void)mu_mkdir_p(s->path);
    n = snprintf(s->path, sizeof(s->path), "%s/attempt_%d/watchdog_timer", s->ag->base_dir,
                 s->ag->attempt);
  }
  return n > 0 && n < (int)sizeof(s->path) ? 0 : -1;
}

static int open_pipe(struct mu_agent_timer *s)
{
  if (pick_path(s) != 0) {
    errno = ENAMETOOLONG;
    return -1;
  }
  /* as torch's server: a file already there is replaced */
  if ((unlink(s->path) != 0 && errno != ENOENT) || mkfifo(s->path, 0600) != 0)
    return -1;
  s->made = 1;
  s->rfd = open(s->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
  if (s->rfd < 0)
    return -1;
  s->wfd = open(s->path, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
  return s->wfd < 0 ? -1 : 0;
}

void mu_agent_timer_start(struct mu_agent *ag)
{
  const char *on = getenv("TORCHELASTIC_ENABLE_FILE_TIMER");
  ag->timer = NULL;
  if (on == NULL || strcmp(on, "1") != 0)
    return;
  struct mu_agent_timer *s = mu_calloc(1, sizeof(*s));
  s->ag = ag;
  s->rfd = s->wfd = -1;
  if (open_pipe(s) != 0) {
    mu_agent_say(ag, MU_AGENT_PROGRESS,
                 "file timer: cannot make the pipe '%s': %s; the workers' timers are not "
                 "served (check TORCHELASTIC_TIMER_FILE)",
                 s->path, strerror(errno));
    if (s->rfd >= 0)
      close(s->rfd);
    if (s->made)
      unlink(s->path);
    mu_free(s);
    return;
  }
  uv_poll_init(&ag->loop, &s->poll, s->rfd);
  uv_timer_init(&ag->loop, &s->tick);
  s->poll.data = s->tick.data = s;
  s->handles = 2;
  uv_poll_start(&s->poll, UV_READABLE, on_readable);
  uv_timer_start(&s->tick, on_tick, TICK_MS, TICK_MS);
  ag->timer = s;
  mu_agent_say(ag, MU_AGENT_DEBUG, "file timer: serving %s (TORCHELASTIC_TIMER_FILE)", s->path);
}

const char *mu_agent_timer_path(const struct mu_agent *ag)
{
  return ag->timer != NULL ? ag->timer->path : NULL;
}

void mu_agent_timer_close(struct mu_agent *ag)
{
  struct mu_agent_timer *s = ag->timer;
  if (s == NULL)
    return;
  if (!uv_is_closing((uv_handle_t *)&s->poll))
    uv_close((uv_handle_t *)&s->poll, on_closed);
  if (!uv_is_closing((uv_handle_t *)&s->tick))
    uv_close((uv_handle_t *)&s->tick, on_closed);
}

void mu_agent_timer_free(struct mu_agent *ag)
{
  struct mu_agent_timer *s = ag->timer;
  if (s == NULL)
    return;
  close(s->rfd);
  close(s->wfd);
  unlink(s->path);
  for (size_t i = 0; i < s->n; i++)
    mu_free(s->t[i].scope);
  mu_free(s->t);
  mu_free(s);
  ag->timer = NULL;
}

void mu_agent_timer_describe(const struct mu_agent_worker *w, struct mu_buf *out)
{
  const char *name = mu_failrec_signame(w->timer_signal);
  (void)mu_buf_printf(out,
                      "its file timer '%s' expired (torch.distributed.elastic.timer, "
                      "TORCHELASTIC_ENABLE_FILE_TIMER): the agent killed it %lld.%lld s later "
                      "with signal %d%s%s%s",
                      w->timer_scope, w->timer_late_ms / 1000, w->timer_late_ms % 1000 / 100,
                      w->timer_signal, name ? " (" : "", name ? name : "", name ? ")" : "");
}
