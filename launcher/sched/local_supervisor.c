/* The local scheduler's supervisor: the process that runs one job (forked by local.c, in its
 * own session, so a terminal's Ctrl-C reaches only `muster run`). One libuv loop: an embedded
 * musterd on a free loopback port when the job uses ${rdzv_endpoint}, every replica in its own
 * process group with its stdout/stderr teed into stdout.log, stderr.log and combined.log, and
 * <app dir>/state.json rewritten (atomically) on every change, so that status, log -f, cancel
 * and list work from any terminal. SIGTERM/SIGINT/SIGHUP cancel the job: SIGTERM to every
 * replica's process group, SIGKILL after the grace period.
 *
 * This is the one file of the scheduler layer that embeds musterd.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "muster/errno.h"

#include "alloc.h"
#include "child.h"
#include "failrec.h"
#include "fsutil.h"
#include "proc.h"
#include "musterd/embed.h"
#include "local.h"
#include "sched.h"

extern char **environ;

#define LOG_CHUNK 65536 /* one read of a replica's output */

/* Replaces a state file; readers see the old or the new one. Returns: 0 or -errno. */
static int write_file(const char *path, const char *text)
{
  return mu_write_file_atomic(path, text, strlen(text), 0644, 0);
}

enum { R_PENDING = 0, R_RUNNING, R_DONE };

struct sup;

struct replica {
  struct sup *sup;
  struct mu_local_replica *plan;
  struct mu_child child; /* the process and its stdout/stderr pipes */
  int fd_out, fd_err, fd_comb;
  int open_handles; /* proc + pipes not yet closed */
  int phase;
  long pid;
  unsigned long long start; /* the process's start time (proc.h): cancel proves it by it */
  int exit_code;            /* -1 until exited; 128+sig for signals */
  int started;
  int has_record;     /* its agent wrote a failure record (failrec.h): a worker of its own failed */
  long long rec_time; /* that record's time (Unix ms; 0 unknown) */
  int term_signal;    /* the signal that killed its last process, 0 when it exited */
  long retries;       /* how often the scheduler restarted it (its role's max_retries) */
  int covered;        /* its last loss was covered: 1 by a standby, 2 by a restart */
};

struct sup {
  uv_loop_t loop;
  struct mu_local_plan *p;
  struct replica *reps;
  struct rv_server *srv;
  char endpoint[128];
  char c10d[128];   /* the TCPStore listener (torchrun --rdzv_backend c10d) */
  char ui_url[160]; /* http://ENDPOINT/ui of the embedded musterd */
  uv_signal_t sig_term, sig_int, sig_hup;
  uv_timer_t kill_timer;
  int cancelled;
  int stopping; /* SIGTERM sent to the replicas */
  int failed_fast;
  struct replica *culprit; /* set with failed_fast: the replica whose failure stopped the others */
  char msg[512];
  char root_cause[512]; /* a lost process no retry or standby covered (state.json) */
  long long root_cause_ms;
  struct replica *lost; /* that process's replica */
  double started_at;    /* seconds since the epoch, with fractions (orders `list`) */
  enum mu_job_state state;
  uv_timer_t rdzv_timer; /* a run event happened: read the run's goodput a moment later */
  cJSON *rdzv_run;       /* the job's run as state.json keeps it (NULL before any event) */
  char rdzv_run_id[129]; /* the run the last event was about */
};

/* ---------------------------------------------------------------------------------------------
 * Who failed: a replica's own failure is its agent's failure record; exit order is a race
 */

/* Reads the failure record of every replica that has none yet (an agent writes it before it
 * shuts the run down, so the replica whose worker failed has it before the others can end). */
static void read_records(struct sup *s)
{
  for (size_t i = 0; i < s->p->nreplicas; i++) {
    struct replica *r = &s->reps[i];
    const char *path = mu_kvlist_get(&r->plan->env, "TORCHELASTIC_ERROR_FILE");
    struct mu_buf text = MU_BUF_INIT(1u << 20);
    struct mu_failrec rec;
    if (!r->has_record && path != NULL && mu_read_file(path, 1u << 20, &text) == 0 &&
        mu_failrec_parse(text.data, text.len, &rec) == 0) {
      r->has_record = 1;
      r->rec_time = rec.time_ms;
      mu_failrec_release(&rec);
    }
    mu_buf_release(&text);
  }
}

/* The replica whose failure comes first: the earliest failure record, else (no agent wrote
 * one: a plain program) the first replica that ended badly. Returns: it, or NULL. */
static struct replica *first_failure(struct sup *s)
{
  struct replica *best = NULL, *ended = NULL;
  read_records(s);
  for (size_t i = 0; i < s->p->nreplicas; i++) {
    struct replica *r = &s->reps[i];
    struct mu_failrec a = {.time_ms = r->rec_time}, b = {.time_ms = best ? best->rec_time : 0};
    if (r->has_record && (best == NULL || mu_failrec_earlier(&a, &b)))
      best = r;
    if (ended == NULL && r->phase == R_DONE && r->open_handles == 0 && r->exit_code != 0 &&
        !r->covered)
      ended = r;
  }
  return best != NULL ? best : ended;
}

/* A replica that ended: SUCCEEDED, FAILED, or CANCELLED (stopped by a cancel, or by the fail-fast
 * for another replica's failure: it has no failure of its own). */
static enum mu_job_state ended_state(const struct sup *s, const struct replica *r)
{
  if (r->exit_code == 0)
    return MU_STATE_SUCCEEDED;
  if (s->cancelled)
    return MU_STATE_CANCELLED;
  if (!s->failed_fast || r == s->culprit || r->has_record)
    return MU_STATE_FAILED;
  if (s->culprit != NULL && s->culprit->has_record)
    return MU_STATE_CANCELLED; /* its run was shut down by the culprit's agent */
  return r->exit_code >= 128 ? MU_STATE_CANCELLED : MU_STATE_FAILED;
}

static void write_state(struct sup *s)
{
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "app_id", s->p->app_id);
  cJSON_AddStringToObject(o, "name", s->p->app->name);
  cJSON_AddStringToObject(o, "state", mu_job_state_name(s->state));
  cJSON_AddNumberToObject(o, "supervisor_pid", (double)getpid());
  cJSON_AddNumberToObject(o, "supervisor_start", (double)mu_proc_start_time(getpid()));
  cJSON_AddNumberToObject(o, "started_at", s->started_at);
  cJSON_AddNumberToObject(o, "updated_at", (double)time(NULL));
  cJSON_AddStringToObject(o, "rdzv_endpoint", s->endpoint);
  if (s->c10d[0] != '\0')
    cJSON_AddStringToObject(o, "c10d_endpoint", s->c10d);
  if (s->srv != NULL) /* the embedded musterd's status page (not an external server's) */
    cJSON_AddItemToObject(o, "ui_url", cJSON_CreateStringReference(s->ui_url));
  cJSON_AddStringToObject(o, "log_dir", s->p->app_dir);
  cJSON_AddStringToObject(o, "msg", s->msg);
  if (s->root_cause[0] != '\0')
    cJSON_AddStringToObject(o, "root_cause", s->root_cause);
  if (s->root_cause[0] != '\0')
    cJSON_AddNumberToObject(o, "root_cause_ms", (double)s->root_cause_ms);
  if (s->rdzv_run != NULL)
    cJSON_AddItemToObject(o, "rdzv_run", cJSON_Duplicate(s->rdzv_run, 1));
  cJSON *reps = cJSON_AddArrayToObject(o, "replicas");
  for (size_t i = 0; i < s->p->nreplicas; i++) {
    struct replica *r = &s->reps[i];
    cJSON *jr = cJSON_CreateObject();
    cJSON_AddItemToArray(reps, jr);
    cJSON_AddStringToObject(jr, "role", r->plan->role);
    cJSON_AddNumberToObject(jr, "id", (double)r->plan->id);
    cJSON_AddNumberToObject(jr, "pid", (double)r->pid);
    cJSON_AddNumberToObject(jr, "start", (double)r->start);
    enum mu_job_state st = MU_STATE_PENDING;
    if (r->phase == R_RUNNING)
      st = MU_STATE_RUNNING;
    else if (r->phase == R_DONE)
      st = ended_state(s, r);
    cJSON_AddStringToObject(jr, "state", mu_job_state_name(st));
    cJSON_AddNumberToObject(jr, "exit_code", (double)r->exit_code);
    cJSON_AddNumberToObject(jr, "retries", (double)r->retries);
    cJSON_AddStringToObject(jr, "log_dir", r->plan->dir);
  }
  char *txt = cJSON_Print(o);
  cJSON_Delete(o);
  char path[PATH_MAX];
  snprintf(path, sizeof(path), "%s/state.json", s->p->app_dir);
  write_file(path, txt);
  cJSON_free(txt);
}

static void kill_all(struct sup *s, int sig)
{
  for (size_t i = 0; i < s->p->nreplicas; i++)
    if (s->reps[i].phase == R_RUNNING && s->reps[i].pid > 0)
      kill(-(pid_t)s->reps[i].pid, sig);
}

static void on_kill_timer(uv_timer_t *t)
{
  struct sup *s = t->data;
  kill_all(s, SIGKILL);
}

static void stop_all(struct sup *s)
{
  if (s->stopping)
    return;
  s->stopping = 1;
  kill_all(s, SIGTERM);
  uv_timer_start(&s->kill_timer, on_kill_timer, (uint64_t)s->p->grace * 1000, 0);
}

static void on_signal(uv_signal_t *h, int signum)
{
  struct sup *s = h->data;
  (void)signum;
  if (!s->cancelled) {
    s->cancelled = 1;
    snprintf(s->msg, sizeof(s->msg), "cancelled");
    write_state(s);
  }
  stop_all(s);
}

static void close_loop_handles(struct sup *s);

/* ---------------------------------------------------------------------------------------------
 * The job's run on the embedded musterd: after each run event, its restart count, unhealthy
 * nodes and timings go into state.json ("rdzv_run"), for `muster status` during and after the
 * job (docs/cli.md). The run is the job's app id (dist.ddp's --rdzv-id), else the one the
 * event was about.
 */

static void read_run(struct sup *s)
{
  if (s->srv == NULL)
    return;
  char *txt = rv_server_run_json(s->srv, s->p->app_id);
  if (txt == NULL && s->rdzv_run_id[0] != '\0')
    txt = rv_server_run_json(s->srv, s->rdzv_run_id);
  cJSON *run = txt != NULL ? cJSON_Parse(txt) : NULL;
  mu_free(txt);
  if (run == NULL)
    return;
  static const char *const keep[] = {"run_id",       "state",    "reason",    "round",
                                     "round_state",  "nnodes",   "waiting",   "restart_count",
                                     "max_restarts", "standbys", "unhealthy", "timings"};
  cJSON *o = cJSON_CreateObject();
  for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++) {
    cJSON *v = cJSON_DetachItemFromObjectCaseSensitive(run, keep[i]);
    if (v != NULL)
      cJSON_AddItemToObject(o, keep[i], v);
  }
  cJSON_Delete(run);
  cJSON_Delete(s->rdzv_run);
  s->rdzv_run = o;
}

static void on_rdzv_timer(uv_timer_t *t)
{
  struct sup *s = t->data;
  read_run(s);
  write_state(s);
}

/* A run event (a round closed, broke, started, progressed; a node unhealthy; the run ended):
 * read the run once the rendezvous is done with it, in 50 ms (events come in bursts). */
static void on_run_event(void *data, const char *run_id)
{
  struct sup *s = data;
  snprintf(s->rdzv_run_id, sizeof(s->rdzv_run_id), "%s", run_id);
  if (!uv_is_active((uv_handle_t *)&s->rdzv_timer) && !uv_is_closing((uv_handle_t *)&s->rdzv_timer))
    uv_timer_start(&s->rdzv_timer, on_rdzv_timer, 50, 0);
}

static void on_srv_closed(void *data)
{
  struct sup *s = data;
  s->srv = NULL;
}

static void loss_line(const struct replica *r, char *out, size_t n);

/* Called when a replica has exited and its pipes are drained. */
static void check_done(struct sup *s)
{
  size_t done = 0, failed = 0;
  for (size_t i = 0; i < s->p->nreplicas; i++) {
    if (s->reps[i].phase == R_DONE && s->reps[i].open_handles == 0) {
      done++;
      if (s->reps[i].exit_code != 0 && !s->reps[i].covered)
        failed++;
    }
  }
  if (failed > 0 && s->p->fail_fast && !s->stopping && done < s->p->nreplicas) {
    s->failed_fast = 1;
    struct replica *r = s->culprit = s->lost != NULL ? s->lost : first_failure(s);
    char what[256];
    if (r == s->lost) {
      loss_line(r, what, sizeof(what));
      snprintf(s->msg, sizeof(s->msg), "%s; stopping the others", what);
    } else if (r->exit_code >= 0)
      snprintf(s->msg, sizeof(s->msg), "%s/%ld exited with %d; stopping the others", r->plan->role,
               r->plan->id, r->exit_code);
    else
      snprintf(s->msg, sizeof(s->msg), "%s/%ld failed; stopping the others", r->plan->role,
               r->plan->id);
    stop_all(s);
  }
  if (done < s->p->nreplicas) {
    write_state(s);
    return;
  }
  if (s->cancelled)
    s->state = MU_STATE_CANCELLED;
  else if (failed > 0)
    s->state = MU_STATE_FAILED;
  else
    s->state = MU_STATE_SUCCEEDED;
  read_run(s); /* the run as it ended */
  if (s->state == MU_STATE_FAILED && !s->failed_fast) {
    struct replica *r = s->lost != NULL ? s->lost : first_failure(s);
    snprintf(s->msg, sizeof(s->msg), "%s/%ld exited with %d", r->plan->role, r->plan->id,
             r->exit_code);
  }
  if (s->failed_fast)
    read_records(s); /* a replica that failed on its own after the first is FAILED too */
  write_state(s);
  close_loop_handles(s);
}

/* ---------------------------------------------------------------------------------------------
 * A lost process (docs/cli.md, "Lost processes"): a replica killed by a signal (kill -9, the OOM
 * killer) while the job runs, with no failure record of its own. The scheduler restarts it while
 * its role's max_retries lasts (one budget for the role's replicas, as a pod or a Slurm step is
 * retried); the restarted agent joins the rendezvous again. With no retry left, the role's
 * other running replicas cover it when there are at least min_replicas of them (a standby takes
 * its place, or an elastic run goes on smaller). A covered loss does not fail the job.
 */

static const struct mu_role *role_of(const struct sup *s, const struct replica *r)
{
  for (size_t i = 0; i < s->p->app->nroles; i++)
    if (strcmp(s->p->app->roles[i].name, r->plan->role) == 0)
      return &s->p->app->roles[i];
  return NULL;
}

/* The role's replicas: the restarts spent (retries) and those running. */
static void role_counts(const struct sup *s, const struct replica *r, long *retries, long *running)
{
  *retries = *running = 0;
  for (size_t i = 0; i < s->p->nreplicas; i++) {
    const struct replica *o = &s->reps[i];
    if (strcmp(o->plan->role, r->plan->role) != 0)
      continue;
    *retries += o->retries;
    if (o != r && o->phase == R_RUNNING)
      (*running)++;
  }
}

/* "node ROLE/ID's agent was killed by SIGKILL" (process, for a program that is no agent). */
static void loss_line(const struct replica *r, char *out, size_t n)
{
  const struct mu_strvec *av = &r->plan->argv;
  const char *base = av->n > 0 ? strrchr(av->v[0], '/') : NULL;
  base = base != NULL ? base + 1 : (av->n > 0 ? av->v[0] : "");
  int agent = av->n > 1 && strcmp(base, "muster") == 0 && strcmp(av->v[1], "agent") == 0;
  const char *sig = mu_failrec_signame(r->term_signal);
  char num[32];
  snprintf(num, sizeof(num), "signal %d", r->term_signal);
  snprintf(out, n, "node %s/%ld's %s was killed by %s", r->plan->role, r->plan->id,
           agent ? "agent" : "process", sig != NULL ? sig : num);
}

static int start_replica(struct sup *s, struct replica *r);

/* r's process was killed by a signal while the job runs. Returns: 1 when a restart or a standby
 * covers the loss (s->msg says which), else 0 with s->root_cause set. */
static int cover_loss(struct sup *s, struct replica *r)
{
  const struct mu_role *role = role_of(s, r);
  long max = role != NULL ? role->max_retries : 0, used, running;
  long need = role == NULL ? 1 : role->min_replicas >= 0 ? role->min_replicas : role->num_replicas;
  char what[256];
  role_counts(s, r, &used, &running);
  loss_line(r, what, sizeof(what));
  if (used < max) {
    r->retries++;
    snprintf(s->msg, sizeof(s->msg), "%s; restarted (retry %ld of %ld)", what, used + 1, max);
    r->exit_code = -1;
    r->term_signal = 0;
    r->phase = R_PENDING;
    if (start_replica(s, r) != 0 || r->phase != R_RUNNING) {
      r->exit_code = 127;
      r->phase = R_DONE;
      r->open_handles = 0;
      return 0;
    }
    char *line = mu_asprintf("muster: %s\n", s->msg);
    mu_write_all(r->fd_err, line, strlen(line));
    mu_write_all(r->fd_comb, line, strlen(line));
    mu_free(line);
    return 1;
  }
  if (running > 0 && running >= need) {
    r->covered = 1;
    snprintf(s->msg, sizeof(s->msg),
             "%s; a standby took its place (%ld nodes of '%s' run, %ld needed; no retry left)",
             what, running, r->plan->role, need);
    return 1;
  }
  snprintf(s->root_cause, sizeof(s->root_cause),
           "%s; no retry left (max_retries %ld) and no standby to take its place", what, max);
  s->root_cause_ms = (long long)time(NULL) * 1000;
  s->lost = r;
  return 0;
}

/* A replica's process ended and its pipes are closed: a loss is covered or not, then the job
 * goes on or ends. */
static void replica_ended(struct sup *s, struct replica *r)
{
  int others = 0;
  for (size_t i = 0; i < s->p->nreplicas; i++)
    others |= &s->reps[i] != r && s->reps[i].phase == R_RUNNING;
  read_records(s);
  if (r->term_signal != 0 && !r->has_record && !s->stopping && !s->cancelled && others &&
      s->lost == NULL && cover_loss(s, r) && r->phase == R_RUNNING) {
    write_state(s);
    return; /* restarted */
  }
  check_done(s);
}

static void on_handle_closed(uv_handle_t *h)
{
  struct replica *r = h->data;
  r->open_handles--;
  if (r->open_handles == 0) {
    if (r->fd_out >= 0)
      close(r->fd_out);
    if (r->fd_err >= 0)
      close(r->fd_err);
    if (r->fd_comb >= 0)
      close(r->fd_comb);
    r->fd_out = r->fd_err = r->fd_comb = -1;
    replica_ended(r->sup, r);
  }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
  (void)h;
  (void)suggested;
  buf->base = mu_malloc(LOG_CHUNK);
  buf->len = LOG_CHUNK;
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
  struct replica *r = st->data;
  if (n > 0) {
    mu_write_all(st == (uv_stream_t *)&r->child.out ? r->fd_out : r->fd_err, buf->base, (size_t)n);
    mu_write_all(r->fd_comb, buf->base, (size_t)n);
  }
  mu_free(buf->base);
  if (n < 0)
    uv_close((uv_handle_t *)st, on_handle_closed);
}

static void on_exit_cb(uv_process_t *proc, int64_t status, int term_signal)
{
  struct replica *r = proc->data;
  r->exit_code = term_signal ? 128 + term_signal : (int)status;
  r->term_signal = term_signal;
  r->covered = 0;
  r->phase = R_DONE;
  /* its workers go with it (a restart must not meet them), unless the job is stopping anyway */
  if (term_signal != 0 && r->sup->stopping == 0 && r->pid > 0)
    kill(-(pid_t)r->pid, SIGKILL);
  uv_close((uv_handle_t *)proc, on_handle_closed);
}

/* A replica's log: a restart appends to its first process's. */
static int open_log(const char *dir, const char *name, int restart)
{
  char path[PATH_MAX];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  return open(path, O_WRONLY | O_CREAT | (restart ? 0 : O_TRUNC) | O_APPEND | O_CLOEXEC, 0644);
}

/* Builds "K=V" strings: the inherited environment, PATH adjusted, then the replica's. */
static char **build_env(struct sup *s, struct mu_local_replica *rp)
{
  struct mu_kvlist env = MU_KVLIST_INIT;
  for (char **e = environ; e && *e; e++) {
    const char *eq = strchr(*e, '=');
    if (eq == NULL)
      continue;
    if (s->p->token_file != NULL && strncmp(*e, "MUSTER_RDZV_TOKEN=", 18) == 0)
      continue; /* the job's token file, not a token of the user's: the client prefers this */
    char *k = mu_strndup(*e, (size_t)(eq - *e));
    mu_kvlist_set(&env, k, eq + 1);
    mu_free(k);
  }
  for (size_t i = 0; i < rp->env.n; i++)
    mu_kvlist_set(&env, rp->env.v[i].key, rp->env.v[i].value);
  if (mu_kvlist_get(&env, "PYTHONUNBUFFERED") == NULL)
    mu_kvlist_set(&env, "PYTHONUNBUFFERED", "x");
  /* PATH: the directory of this muster binary first (so a role's `muster agent` is this
   * build), then the role's PATH, with the working directory last (first with prepend_cwd). */
  char exe[PATH_MAX] = "";
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) {
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash)
      *slash = '\0';
  }
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof(cwd)) == NULL)
    snprintf(cwd, sizeof(cwd), ".");
  const char *path = mu_kvlist_get(&env, "PATH");
  char *np = s->p->prepend_cwd ? mu_asprintf("%s:%s:%s", cwd, exe, path ? path : "/usr/bin:/bin")
                               : mu_asprintf("%s:%s:%s", exe, path ? path : "/usr/bin:/bin", cwd);
  mu_kvlist_set(&env, "PATH", np);
  mu_free(np);
  char **out = mu_calloc(env.n + 1, sizeof(char *));
  for (size_t i = 0; i < env.n; i++)
    out[i] = mu_asprintf("%s=%s", env.v[i].key, env.v[i].value);
  mu_kvlist_release(&env);
  return out;
}

static void free_env(char **env)
{
  for (char **e = env; e && *e; e++)
    mu_free(*e);
  mu_free(env);
}

static int start_replica(struct sup *s, struct replica *r)
{
  struct mu_local_replica *rp = r->plan;
  int rc = mu_mkdir_p(rp->dir);
  if (rc != 0) {
    snprintf(s->msg, sizeof(s->msg), "cannot create %s: %s", rp->dir, mu_strerror(rc));
    return rc;
  }
  r->fd_out = open_log(rp->dir, "stdout.log", r->retries > 0);
  r->fd_err = open_log(rp->dir, "stderr.log", r->retries > 0);
  r->fd_comb = open_log(rp->dir, "combined.log", r->retries > 0);
  char **env = build_env(s, rp);
  struct mu_child_opts opt = {rp->argv.v[0], rp->argv.v,       env, on_exit_cb, on_alloc,
                              on_read,       on_handle_closed, r};
  r->open_handles = 3; /* the process and its two pipes, until their close callbacks */
  rc = mu_child_spawn(&s->loop, &r->child, &opt);
  free_env(env);
  if (rc != 0) {
    char *line = mu_asprintf("muster: cannot start '%s': %s\n", rp->argv.v[0], uv_strerror(rc));
    mu_write_all(r->fd_err, line, strlen(line));
    mu_write_all(r->fd_comb, line, strlen(line));
    mu_free(line);
    r->exit_code = 127;
    r->phase = R_DONE;
    return 0;
  }
  r->pid = r->child.proc.pid;
  r->start = mu_proc_start_time(r->pid);
  r->phase = R_RUNNING;
  return 0;
}

static void on_closed_noop(uv_handle_t *h)
{
  (void)h;
}

static void close_loop_handles(struct sup *s)
{
  uv_close((uv_handle_t *)&s->sig_term, on_closed_noop);
  uv_close((uv_handle_t *)&s->sig_int, on_closed_noop);
  uv_close((uv_handle_t *)&s->sig_hup, on_closed_noop);
  uv_close((uv_handle_t *)&s->kill_timer, on_closed_noop);
  uv_close((uv_handle_t *)&s->rdzv_timer, on_closed_noop);
  if (s->srv != NULL)
    rv_server_close(s->srv, on_srv_closed, s);
}

/* The job's rendezvous: the embedded musterd on a free loopback port, or the endpoint of an
 * existing one, in s->endpoint. Returns: 0, or -1 with s->msg set. */
static int start_rdzv(struct sup *s)
{
  if (s->p->rdzv) {
    struct rv_server_config cfg;
    rv_server_config_init(&cfg);
    cfg.listen_host = "127.0.0.1";
    cfg.listen_port = 0;
    cfg.name = "muster-local";
    cfg.token_file = s->p->token_file; /* NULL: rdzv_auth=none */
    char *tls[3] = {NULL, NULL, NULL};
    if (s->p->tls_dir != NULL) {
      tls[0] = mu_asprintf("%s/server.pem", s->p->tls_dir);
      tls[1] = mu_asprintf("%s/server.key", s->p->tls_dir);
      tls[2] = s->p->tls_clients ? mu_asprintf("%s/ca.pem", s->p->tls_dir) : NULL;
    }
    cfg.tls_cert_file = tls[0];
    cfg.tls_key_file = tls[1];
    cfg.tls_client_ca_file = tls[2];
    s->srv = rv_server_new(&s->loop, &cfg);
    for (size_t i = 0; i < 3; i++)
      mu_free(tls[i]);
    if (s->srv == NULL) {
      snprintf(s->msg, sizeof(s->msg),
               "cannot start the embedded musterd: cannot load its token file '%s' or the TLS "
               "files of '%s'",
               s->p->token_file ? s->p->token_file : "(none)",
               s->p->tls_dir ? s->p->tls_dir : "(none)");
      return -1;
    }
    int rc = rv_server_listen(s->srv);
    /* the job's musterd speaks TCPStore too, on loopback only (the protocol has no credentials) */
    if (rc == 0)
      rc = rv_server_listen_c10d(s->srv, "127.0.0.1", 0);
    if (rc != 0) {
      snprintf(s->msg, sizeof(s->msg), "cannot start the embedded musterd: %s", uv_strerror(rc));
      return -1;
    }
    snprintf(s->endpoint, sizeof(s->endpoint), "%s127.0.0.1:%d", s->p->tls_dir ? "https://" : "",
             rv_server_port(s->srv));
    snprintf(s->c10d, sizeof(s->c10d), "127.0.0.1:%d", rv_server_c10d_port(s->srv));
    mu_free(s->p->c10d_endpoint);
    s->p->c10d_endpoint = mu_strdup(s->c10d);
    rv_server_on_run_event(s->srv, on_run_event, s);
    /* The status page, when a browser can read it: a private job's needs its token, which a
     * browser cannot send (docs/security.md), so it is not advertised. */
    if (s->p->token_file == NULL)
      snprintf(s->ui_url, sizeof(s->ui_url), "%s%s/ui", s->p->tls_dir ? "" : "http://",
               s->endpoint);
  } else if (s->p->rdzv_external) {
    snprintf(s->endpoint, sizeof(s->endpoint), "%s", s->p->rdzv_external);
  }
  return 0;
}

/* The job ends before any replica started (s->msg says why). Returns: the exit status. */
static int fail_early(struct sup *s)
{
  s->state = MU_STATE_FAILED;
  write_state(s);
  close_loop_handles(s);
  uv_run(&s->loop, UV_RUN_DEFAULT);
  uv_loop_close(&s->loop);
  if (s->p->token_made)
    unlink(s->p->token_file);
  return 1;
}

int mu_local_supervise(struct mu_local_plan *p)
{
  struct sup s;
  memset(&s, 0, sizeof(s));
  s.p = p;
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  s.started_at = (double)now.tv_sec + (double)now.tv_nsec / 1e9;
  s.state = MU_STATE_RUNNING;
  uv_loop_init(&s.loop);
  uv_signal_init(&s.loop, &s.sig_term);
  uv_signal_init(&s.loop, &s.sig_int);
  uv_signal_init(&s.loop, &s.sig_hup);
  s.sig_term.data = s.sig_int.data = s.sig_hup.data = &s;
  uv_signal_start(&s.sig_term, on_signal, SIGTERM);
  uv_signal_start(&s.sig_int, on_signal, SIGINT);
  uv_signal_start(&s.sig_hup, on_signal, SIGHUP);
  uv_timer_init(&s.loop, &s.kill_timer);
  s.kill_timer.data = &s;
  uv_timer_init(&s.loop, &s.rdzv_timer);
  s.rdzv_timer.data = &s;
  if (start_rdzv(&s) != 0)
    return fail_early(&s);
  struct mu_buf perr = MU_BUF_INIT(SIZE_MAX);
  int rc = mu_local_plan_replicas(p, s.endpoint[0] ? s.endpoint : "", &perr);
  snprintf(s.msg, sizeof(s.msg), "%s", mu_buf_str(&perr)); /* as dryrun said */
  mu_buf_release(&perr);
  if (rc != 0)
    return fail_early(&s);
  s.reps = mu_calloc(p->nreplicas ? p->nreplicas : 1, sizeof(*s.reps));
  for (size_t i = 0; i < p->nreplicas; i++) {
    s.reps[i].sup = &s;
    s.reps[i].plan = &p->replicas[i];
    s.reps[i].exit_code = -1;
    s.reps[i].fd_out = s.reps[i].fd_err = s.reps[i].fd_comb = -1;
  }
  write_state(&s);
  for (size_t i = 0; i < p->nreplicas; i++) {
    if (start_replica(&s, &s.reps[i]) != 0) {
      s.reps[i].exit_code = 127;
      s.reps[i].phase = R_DONE;
    }
  }
  write_state(&s);
  /* A replica that could not be started at all is already done. */
  int any_open = 0;
  for (size_t i = 0; i < p->nreplicas; i++)
    if (s.reps[i].open_handles > 0)
      any_open = 1;
  if (!any_open)
    check_done(&s);
  uv_run(&s.loop, UV_RUN_DEFAULT);
  uv_loop_close(&s.loop);
  if (p->token_made)
    unlink(p->token_file); /* the token goes with the job */
  int ok = s.state == MU_STATE_SUCCEEDED;
  cJSON_Delete(s.rdzv_run);
  mu_free(s.reps);
  return ok ? 0 : 1;
}
