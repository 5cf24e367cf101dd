/* The local scheduler: every replica a process tree on this machine.
 *
 * schedule() forks a supervisor (its own session, so a terminal's Ctrl-C reaches only
 * `muster run`). The supervisor runs one libuv loop: it starts an embedded musterd on a free
 * loopback port when the job uses ${rdzv_endpoint}, spawns every replica in its own process
 * group with its stdout/stderr teed into stdout.log, stderr.log and combined.log, and rewrites
 * <app dir>/state.json (atomically) on every change, so that status, log -f, cancel and list
 * work from any terminal. SIGTERM/SIGINT to the supervisor cancel the job: SIGTERM to every
 * replica's process group, SIGKILL after the grace period.
 *
 * Layout: <log
 * dir>/<app_id>/{app.json,state.json,supervisor.log,<role>/<replica>/{stdout,stderr,combined}.log}.
 * The log dir is runopt log_dir, else $MUSTER_LOG_DIR, else /tmp/muster/<user>; a job whose log dir
 * is not the default one gets a symlink <default>/<app_id> so handles still find it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "muster/errno.h"

#include "json.h"
#include "alloc.h"
#include "child.h"
#include "fsutil.h"
#include "http.h"
#include "job.h"
#include "opts.h"
#include "sched.h"

extern char **environ;

#define STATE_MAX_BYTES (4 << 20)
#define LOG_CHUNK 65536

static const struct mu_runopt local_runopts[] = {
    {"log_dir", MU_RUNOPT_STR, NULL, 0,
     "where logs and job state go (default $MUSTER_LOG_DIR, else /tmp/muster/$USER)"},
    {"prepend_cwd", MU_RUNOPT_BOOL, "false", 0,
     "put the working directory first on PATH instead of last"},
    {"devices_per_replica", MU_RUNOPT_INT, "0", 0,
     "give each replica its own N devices: a slice of 0..N*replicas-1 in device_env"},
    {"device_env", MU_RUNOPT_STR, "CUDA_VISIBLE_DEVICES", 0,
     "the variable that carries the slice (CUDA_VISIBLE_DEVICES, NEURON_RT_VISIBLE_CORES)"},
    {"grace_period", MU_RUNOPT_INT, "10", 0,
     "seconds between SIGTERM and SIGKILL when the job is cancelled"},
    {"fail_fast", MU_RUNOPT_BOOL, "true", 0,
     "stop the other replicas as soon as one fails (false: wait for all, as TorchX)"},
    {"rdzv", MU_RUNOPT_STR, "auto", 0,
     "embedded musterd: auto (when the job uses ${rdzv_endpoint}), always, never, or the "
     "HOST:PORT of a running musterd"},
    {NULL, MU_RUNOPT_STR, NULL, 0, NULL},
};

/* ================================================================================ paths */

static char *state_root(void)
{
  const char *env = getenv("MUSTER_LOG_DIR");
  if (env != NULL && env[0] != '\0')
    return mu_strdup(env);
  const char *user = getenv("USER");
  struct passwd *pw = NULL;
  if (user == NULL || user[0] == '\0') {
    pw = getpwuid(getuid());
    user = pw != NULL ? pw->pw_name : "nobody";
  }
  return mu_asprintf("/tmp/muster/%s", user);
}

static char *log_root(const struct mu_cfg *cfg)
{
  const char *d = mu_cfg_get(cfg, "log_dir");
  if (d != NULL && d[0] != '\0')
    return mu_strdup(d);
  return state_root();
}

/* The app dir of an existing job: <root>/<app_id> (a dir or a symlink to one). */
static char *app_dir_find(const char *app_id, const struct mu_cfg *cfg)
{
  char *root = log_root(cfg);
  char *d = mu_asprintf("%s/%s", root, app_id);
  mu_free(root);
  struct stat st;
  if (stat(d, &st) == 0 && S_ISDIR(st.st_mode))
    return d;
  mu_free(d);
  root = state_root();
  d = mu_asprintf("%s/%s", root, app_id);
  mu_free(root);
  if (stat(d, &st) == 0 && S_ISDIR(st.st_mode))
    return d;
  mu_free(d);
  return NULL;
}

/* Reads a state file whole. Returns: its text (caller frees with mu_free()), or NULL. */
static char *read_state(const char *path)
{
  struct mu_buf b = MU_BUF_INIT(STATE_MAX_BYTES);
  if (mu_read_file(path, STATE_MAX_BYTES, &b) != 0) {
    mu_buf_release(&b);
    return NULL;
  }
  return mu_buf_detach(&b);
}

/* Replaces a state file; readers see the old or the new one. Returns: 0 or -errno. */
static int write_text(const char *path, const char *text)
{
  return mu_write_file_atomic(path, text, strlen(text), 0644, 0);
}

/* ================================================================================ the plan */

struct replica_plan {
  char *role;
  long id;
  struct mu_strvec argv;
  struct mu_kvlist env; /* what we add on top of the inherited environment */
  char *dir;            /* <app dir>/<role>/<id> */
};

struct plan {
  struct mu_app *app; /* a copy, macros not yet applied */
  char *app_id;
  char *root;          /* the log root for this job */
  char *app_dir;       /* <root>/<app_id> */
  int rdzv;            /* 1 = start an embedded musterd */
  char *rdzv_external; /* HOST:PORT of an existing musterd, or NULL */
  long grace;
  int fail_fast;
  int prepend_cwd;
  long devices_per_replica;
  char *device_env;
  struct replica_plan *replicas;
  size_t nreplicas;
};

/* Frees the plan's replicas and leaves it with none. */
static void plan_replicas_clear(struct plan *p)
{
  for (size_t i = 0; i < p->nreplicas; i++) {
    mu_free(p->replicas[i].role);
    mu_strvec_release(&p->replicas[i].argv);
    mu_kvlist_release(&p->replicas[i].env);
    mu_free(p->replicas[i].dir);
  }
  mu_free(p->replicas);
  p->replicas = NULL;
  p->nreplicas = 0;
}

static void plan_free(struct plan *p)
{
  if (p == NULL)
    return;
  mu_app_free(p->app);
  mu_free(p->app_id);
  mu_free(p->root);
  mu_free(p->app_dir);
  mu_free(p->rdzv_external);
  mu_free(p->device_env);
  plan_replicas_clear(p);
  mu_free(p);
}

/* Fills each replica's argv/env with the macros applied; endpoint may be a placeholder. */
static void plan_replicas(struct plan *p, const char *endpoint)
{
  plan_replicas_clear(p);
  size_t total = 0;
  for (size_t i = 0; i < p->app->nroles; i++)
    total += (size_t)p->app->roles[i].num_replicas;
  p->replicas = mu_calloc(total ? total : 1, sizeof(*p->replicas));
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof(cwd)) == NULL)
    snprintf(cwd, sizeof(cwd), ".");
  size_t k = 0;
  for (size_t i = 0; i < p->app->nroles; i++) {
    const struct mu_role *r = &p->app->roles[i];
    char nrep[32];
    snprintf(nrep, sizeof(nrep), "%ld", r->num_replicas);
    for (long id = 0; id < r->num_replicas; id++, k++) {
      struct replica_plan *rp = &p->replicas[k];
      char rid[32];
      snprintf(rid, sizeof(rid), "%ld", id);
      struct mu_macros m = {p->app_id, rid, cwd, "MUSTER_RANK0_HOST", endpoint, nrep};
      rp->role = mu_strdup(r->name);
      rp->id = id;
      rp->dir = mu_asprintf("%s/%s/%ld", p->app_dir, r->name, id);
      mu_strvec_push_owned(&rp->argv, mu_macros_apply(&m, r->entrypoint));
      for (size_t a = 0; a < r->args.n; a++)
        mu_strvec_push_owned(&rp->argv, mu_macros_apply(&m, r->args.v[a]));
      for (size_t e = 0; e < r->env.n; e++) {
        char *v = mu_macros_apply(&m, r->env.v[e].value);
        mu_kvlist_set(&rp->env, r->env.v[e].key, v);
        mu_free(v);
      }
      char *job = mu_asprintf("local://%s/%s", MU_SESSION, p->app_id);
      mu_kvlist_set(&rp->env, "MUSTER_JOB_ID", job);
      mu_free(job);
      mu_kvlist_set(&rp->env, "MUSTER_APP_ID", p->app_id);
      mu_kvlist_set(&rp->env, "MUSTER_ROLE_NAME", r->name);
      mu_kvlist_set(&rp->env, "MUSTER_REPLICA_ID", rid);
      mu_kvlist_set(&rp->env, "MUSTER_RANK0_HOST", "localhost");
      if (p->rdzv || p->rdzv_external)
        mu_kvlist_set(&rp->env, "MUSTER_RDZV_ENDPOINT", endpoint);
      if (mu_kvlist_get(&rp->env, "TORCHELASTIC_ERROR_FILE") == NULL) {
        char *ef = mu_asprintf("%s/error.json", rp->dir);
        mu_kvlist_set(&rp->env, "TORCHELASTIC_ERROR_FILE", ef);
        mu_free(ef);
      }
      if (p->devices_per_replica > 0) {
        struct mu_buf b = MU_BUF_INIT(4096);
        for (long d = 0; d < p->devices_per_replica; d++)
          mu_buf_printf(&b, "%s%ld", d ? "," : "", (long)k * p->devices_per_replica + d);
        mu_kvlist_set(&rp->env, p->device_env, mu_buf_str(&b));
        mu_buf_release(&b);
      }
    }
  }
  p->nreplicas = k;
}

static int local_dryrun(const struct mu_app *app, const struct mu_cfg *cfg, struct mu_dryrun *out,
                        struct mu_buf *err)
{
  struct mu_buf js = MU_BUF_INIT(STATE_MAX_BYTES);
  struct plan *p = mu_calloc(1, sizeof(*p));
  int rc = mu_app_to_json(app, &js);
  if (rc == 0)
    rc = mu_app_from_json(mu_buf_str(&js), &p->app);
  if (rc != 0) {
    mu_buf_printf(err, "cannot copy the job spec");
    goto out;
  }
  p->app_id = mu_app_id_make(app->name);
  p->root = log_root(cfg);
  p->app_dir = mu_asprintf("%s/%s", p->root, p->app_id);
  const char *rdzv = mu_cfg_get(cfg, "rdzv");
  if (rdzv == NULL || strcmp(rdzv, "auto") == 0)
    p->rdzv = mu_app_mentions(app, "${rdzv_endpoint}");
  else if (strcmp(rdzv, "always") == 0)
    p->rdzv = 1;
  else if (strcmp(rdzv, "never") == 0)
    p->rdzv = 0;
  else if (strchr(rdzv, ':') != NULL)
    p->rdzv_external = mu_strdup(rdzv);
  else {
    mu_buf_printf(err, "-cfg rdzv='%s': use auto, always, never or HOST:PORT", rdzv);
    rc = MU_EINVAL;
    goto out;
  }
  const char *g = mu_cfg_get(cfg, "grace_period");
  p->grace = 10;
  if (g != NULL && (mu_parse_long(g, 0, 3600, &p->grace) != 0)) {
    mu_buf_printf(err, "-cfg grace_period='%s': must be 0-3600 seconds", g);
    rc = MU_EINVAL;
    goto out;
  }
  p->fail_fast = mu_cfg_get(cfg, "fail_fast") == NULL || mu_cfg_get_bool(cfg, "fail_fast");
  p->prepend_cwd = mu_cfg_get_bool(cfg, "prepend_cwd");
  const char *d = mu_cfg_get(cfg, "devices_per_replica");
  if (d != NULL && mu_parse_long(d, 0, 4096, &p->devices_per_replica) != 0) {
    mu_buf_printf(err, "-cfg devices_per_replica='%s': must be 0-4096", d);
    rc = MU_EINVAL;
    goto out;
  }
  d = mu_cfg_get(cfg, "device_env");
  p->device_env = mu_strdup(d && *d ? d : "CUDA_VISIBLE_DEVICES");
  plan_replicas(p, p->rdzv_external ? p->rdzv_external : "127.0.0.1:<port>");

  struct mu_buf t = MU_BUF_INIT(STATE_MAX_BYTES);
  mu_buf_printf(&t, "app_id: %s\nhandle: local://%s/%s\nlog_dir: %s\n", p->app_id, MU_SESSION,
                p->app_id, p->app_dir);
  if (p->rdzv)
    mu_buf_printf(&t, "rendezvous: embedded musterd on 127.0.0.1:<a free port>\n");
  else if (p->rdzv_external)
    mu_buf_printf(&t, "rendezvous: musterd at %s\n", p->rdzv_external);
  mu_buf_printf(&t, "replicas:\n");
  for (size_t i = 0; i < p->nreplicas; i++) {
    struct replica_plan *rp = &p->replicas[i];
    mu_buf_printf(&t, "  %s/%ld:", rp->role, rp->id);
    for (size_t a = 0; a < rp->argv.n; a++) {
      mu_buf_putc(&t, ' ');
      mu_shell_quote(rp->argv.v[a], &t);
    }
    mu_buf_printf(&t, "\n    env:");
    for (size_t e = 0; e < rp->env.n; e++) {
      mu_buf_printf(&t, " %s=", rp->env.v[e].key);
      mu_shell_quote(rp->env.v[e].value, &t);
    }
    mu_buf_printf(&t, "\n    logs: %s/{stdout,stderr,combined}.log\n", rp->dir);
  }
  out->text = mu_buf_detach(&t);
  out->app_id = mu_strdup(p->app_id);
  out->priv = p;
  p = NULL;
out:
  plan_free(p);
  mu_buf_release(&js);
  return rc;
}

static void local_dryrun_free(struct mu_dryrun *req)
{
  plan_free(req->priv);
  req->priv = NULL;
}

/* ================================================================================ supervisor */

enum { R_PENDING = 0, R_RUNNING, R_DONE };

struct sup;

struct replica {
  struct sup *sup;
  struct replica_plan *plan;
  struct mu_child child; /* the process and its stdout/stderr pipes */
  int fd_out, fd_err, fd_comb;
  int open_handles; /* proc + pipes not yet closed */
  int phase;
  long pid;
  int exit_code; /* -1 until exited; 128+sig for signals */
  int started;
};

struct sup {
  uv_loop_t loop;
  struct plan *p;
  struct replica *reps;
  struct rv_server *srv;
  char endpoint[128];
  uv_signal_t sig_term, sig_int, sig_hup;
  uv_timer_t kill_timer;
  int cancelled;
  int stopping; /* SIGTERM sent to the replicas */
  int failed_fast;
  char msg[512];
  double started_at; /* seconds since the epoch, with fractions (orders `list`) */
  enum mu_job_state state;
};

static void write_state(struct sup *s)
{
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "app_id", s->p->app_id);
  cJSON_AddStringToObject(o, "name", s->p->app->name);
  cJSON_AddStringToObject(o, "state", mu_job_state_name(s->state));
  cJSON_AddNumberToObject(o, "supervisor_pid", (double)getpid());
  cJSON_AddNumberToObject(o, "started_at", s->started_at);
  cJSON_AddNumberToObject(o, "updated_at", (double)time(NULL));
  cJSON_AddStringToObject(o, "rdzv_endpoint", s->endpoint);
  cJSON_AddStringToObject(o, "log_dir", s->p->app_dir);
  cJSON_AddStringToObject(o, "msg", s->msg);
  cJSON *reps = cJSON_AddArrayToObject(o, "replicas");
  for (size_t i = 0; i < s->p->nreplicas; i++) {
    struct replica *r = &s->reps[i];
    cJSON *jr = cJSON_CreateObject();
    cJSON_AddItemToArray(reps, jr);
    cJSON_AddStringToObject(jr, "role", r->plan->role);
    cJSON_AddNumberToObject(jr, "id", (double)r->plan->id);
    cJSON_AddNumberToObject(jr, "pid", (double)r->pid);
    enum mu_job_state st = MU_STATE_PENDING;
    if (r->phase == R_RUNNING)
      st = MU_STATE_RUNNING;
    else if (r->phase == R_DONE)
      st = r->exit_code == 0
               ? MU_STATE_SUCCEEDED
               : (s->cancelled || (s->failed_fast && r->exit_code >= 128) ? MU_STATE_CANCELLED
                                                                          : MU_STATE_FAILED);
    cJSON_AddStringToObject(jr, "state", mu_job_state_name(st));
    cJSON_AddNumberToObject(jr, "exit_code", (double)r->exit_code);
    cJSON_AddStringToObject(jr, "log_dir", r->plan->dir);
  }
  char *txt = cJSON_Print(o);
  cJSON_Delete(o);
  char path[PATH_MAX];
  snprintf(path, sizeof(path), "%s/state.json", s->p->app_dir);
  write_text(path, txt);
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

static void on_srv_closed(void *data)
{
  struct sup *s = data;
  s->srv = NULL;
}

/* Called when a replica has exited and its pipes are drained. */
static void check_done(struct sup *s)
{
  size_t done = 0, failed = 0;
  for (size_t i = 0; i < s->p->nreplicas; i++) {
    if (s->reps[i].phase == R_DONE && s->reps[i].open_handles == 0) {
      done++;
      if (s->reps[i].exit_code != 0)
        failed++;
    }
  }
  if (failed > 0 && s->p->fail_fast && !s->stopping && done < s->p->nreplicas) {
    s->failed_fast = 1;
    for (size_t i = 0; i < s->p->nreplicas; i++) {
      struct replica *r = &s->reps[i];
      if (r->phase == R_DONE && r->exit_code != 0) {
        snprintf(s->msg, sizeof(s->msg), "%s/%ld exited with %d; stopping the others",
                 r->plan->role, r->plan->id, r->exit_code);
        break;
      }
    }
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
  if (s->state == MU_STATE_FAILED && !s->failed_fast) {
    for (size_t i = 0; i < s->p->nreplicas; i++) {
      struct replica *r = &s->reps[i];
      if (r->exit_code != 0) {
        snprintf(s->msg, sizeof(s->msg), "%s/%ld exited with %d", r->plan->role, r->plan->id,
                 r->exit_code);
        break;
      }
    }
  }
  write_state(s);
  close_loop_handles(s);
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
    check_done(r->sup);
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
  r->phase = R_DONE;
  uv_close((uv_handle_t *)proc, on_handle_closed);
}

static int open_log(const char *dir, const char *name)
{
  char path[PATH_MAX];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  return open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
}

/* Builds "K=V" strings: the inherited environment, PATH adjusted, then the replica's. */
static char **build_env(struct sup *s, struct replica_plan *rp)
{
  struct mu_kvlist env = MU_KVLIST_INIT;
  for (char **e = environ; e && *e; e++) {
    const char *eq = strchr(*e, '=');
    if (eq == NULL)
      continue;
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
  struct replica_plan *rp = r->plan;
  int rc = mu_mkdir_p(rp->dir);
  if (rc != 0) {
    snprintf(s->msg, sizeof(s->msg), "cannot create %s: %s", rp->dir, mu_strerror(rc));
    return rc;
  }
  r->fd_out = open_log(rp->dir, "stdout.log");
  r->fd_err = open_log(rp->dir, "stderr.log");
  r->fd_comb = open_log(rp->dir, "combined.log");
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
  if (s->srv != NULL)
    rv_server_close(s->srv, on_srv_closed, s);
}

/* The supervisor's body (in the forked child). Returns the exit status. */
static int supervise(struct plan *p)
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
  if (p->rdzv) {
    struct rv_server_config cfg;
    rv_server_config_init(&cfg);
    cfg.listen_host = "127.0.0.1";
    cfg.listen_port = 0;
    cfg.name = "muster-local";
    s.srv = rv_server_new(&s.loop, &cfg);
    int rc = s.srv ? rv_server_listen(s.srv) : UV_ENOMEM;
    if (rc != 0) {
      snprintf(s.msg, sizeof(s.msg), "cannot start the embedded musterd: %s", uv_strerror(rc));
      s.state = MU_STATE_FAILED;
      write_state(&s);
      close_loop_handles(&s);
      uv_run(&s.loop, UV_RUN_DEFAULT);
      return 1;
    }
    snprintf(s.endpoint, sizeof(s.endpoint), "127.0.0.1:%d", rv_server_port(s.srv));
  } else if (p->rdzv_external) {
    snprintf(s.endpoint, sizeof(s.endpoint), "%s", p->rdzv_external);
  }
  plan_replicas(p, s.endpoint[0] ? s.endpoint : "");
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
  int ok = s.state == MU_STATE_SUCCEEDED;
  mu_free(s.reps);
  return ok ? 0 : 1;
}

static int local_schedule(struct mu_dryrun *req, struct mu_buf *err)
{
  struct plan *p = req->priv;
  int rc = mu_mkdir_p(p->app_dir);
  if (rc != 0) {
    mu_buf_printf(err, "cannot create the log directory '%s': %s", p->app_dir, mu_strerror(rc));
    return rc;
  }
  char *root = state_root();
  if (strcmp(root, p->root) != 0) {
    mu_mkdir_p(root);
    char *link = mu_asprintf("%s/%s", root, p->app_id);
    if (symlink(p->app_dir, link) != 0 && errno != EEXIST) {
      mu_buf_printf(err, "cannot link '%s' to '%s': %s", link, p->app_dir, strerror(errno));
      mu_free(link);
      mu_free(root);
      return -errno;
    }
    mu_free(link);
  }
  mu_free(root);
  struct mu_buf js = MU_BUF_INIT(STATE_MAX_BYTES);
  mu_app_to_json(p->app, &js);
  char path[PATH_MAX];
  snprintf(path, sizeof(path), "%s/app.json", p->app_dir);
  rc = write_text(path, mu_buf_str(&js));
  mu_buf_release(&js);
  if (rc != 0) {
    mu_buf_printf(err, "cannot write '%s': %s", path, mu_strerror(rc));
    return rc;
  }
  /* The initial state, so that status works before the supervisor has run. */
  char *st = mu_asprintf("{\"app_id\":\"%s\",\"name\":\"\",\"state\":\"PENDING\","
                         "\"supervisor_pid\":0,\"replicas\":[]}",
                         p->app_id);
  snprintf(path, sizeof(path), "%s/state.json", p->app_dir);
  write_text(path, st);
  mu_free(st);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    mu_buf_printf(err, "cannot fork the supervisor: %s", strerror(errno));
    return -errno;
  }
  if (pid == 0) {
    setsid();
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    int nul = open("/dev/null", O_RDWR);
    snprintf(path, sizeof(path), "%s/supervisor.log", p->app_dir);
    int lg = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (nul >= 0)
      dup2(nul, 0);
    if (lg >= 0) {
      dup2(lg, 1);
      dup2(lg, 2);
    }
    /* A second fork so that the supervisor is not our child: nobody has to reap it. */
    pid_t g = fork();
    if (g != 0)
      _exit(g < 0 ? 1 : 0);
    _exit(supervise(p));
  }
  int status;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  return 0;
}

/* ================================================================================ reading */

static int load_state(const char *app_id, const struct mu_cfg *cfg, cJSON **out, char **dir,
                      struct mu_buf *err)
{
  char *d = app_dir_find(app_id, cfg);
  if (d == NULL) {
    mu_buf_printf(err, "no local job '%s' (see 'muster list')", app_id);
    return MU_ENOENT;
  }
  char path[PATH_MAX];
  snprintf(path, sizeof(path), "%s/state.json", d);
  char *txt = read_state(path);
  cJSON *o = txt ? cJSON_Parse(txt) : NULL;
  mu_free(txt);
  if (o == NULL) {
    mu_buf_printf(err, "cannot read the state of '%s' (%s)", app_id, path);
    mu_free(d);
    return MU_EIO;
  }
  *out = o;
  if (dir)
    *dir = d;
  else
    mu_free(d);
  return 0;
}

/* The string member k of the job's state, "" when absent. */
static const char *js(const cJSON *o, const char *k)
{
  const char *v = mu_json_get_str(o, k);
  return v != NULL ? v : "";
}

static int pid_alive(long pid)
{
  return pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
}

static int local_describe(const char *app_id, const struct mu_cfg *cfg, struct mu_app_status *out,
                          struct mu_buf *err)
{
  cJSON *o = NULL;
  memset(out, 0, sizeof(*out));
  int rc = load_state(app_id, cfg, &o, NULL, err);
  if (rc != 0)
    return rc;
  out->app_id = mu_strdup(app_id);
  if (mu_job_state_parse(js(o, "state"), &out->state) != 0)
    out->state = MU_STATE_UNKNOWN;
  out->msg = mu_strdup(js(o, "msg"));
  if (js(o, "rdzv_endpoint")[0] != '\0')
    out->rdzv_endpoint = mu_strdup(js(o, "rdzv_endpoint"));
  long sup = mu_json_get_long(o, "supervisor_pid", 0);
  if (!mu_job_state_is_terminal(out->state) && sup > 0 && !pid_alive(sup)) {
    out->state = MU_STATE_UNKNOWN;
    mu_free(out->msg);
    out->msg = mu_strdup("the supervisor process is gone (killed?) before the job ended");
  }
  const cJSON *reps = cJSON_GetObjectItemCaseSensitive(o, "replicas");
  size_t n = (size_t)cJSON_GetArraySize(reps);
  out->replicas = mu_calloc(n ? n : 1, sizeof(*out->replicas));
  const cJSON *r;
  cJSON_ArrayForEach(r, reps)
  {
    struct mu_replica_status *rs = &out->replicas[out->nreplicas++];
    rs->role = mu_strdup(js(r, "role"));
    rs->replica_id = mu_json_get_long(r, "id", 0);
    if (mu_job_state_parse(js(r, "state"), &rs->state) != 0)
      rs->state = MU_STATE_UNKNOWN;
    rs->hostname = mu_strdup("localhost");
    rs->exit_code = (int)mu_json_get_long(r, "exit_code", 0);
    rs->msg = mu_strdup("");
  }
  cJSON_Delete(o);
  return 0;
}

static int local_cancel(const char *app_id, const struct mu_cfg *cfg, struct mu_buf *err)
{
  cJSON *o = NULL;
  int rc = load_state(app_id, cfg, &o, NULL, err);
  if (rc != 0)
    return rc;
  long sup = mu_json_get_long(o, "supervisor_pid", 0);
  if (pid_alive(sup)) {
    kill((pid_t)sup, SIGTERM);
  } else {
    /* No supervisor: stop what is left by hand. */
    const cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(o, "replicas"))
    {
      long pid = mu_json_get_long(r, "pid", 0);
      if (pid > 0 && strcmp(js(r, "state"), "RUNNING") == 0)
        kill(-(pid_t)pid, SIGKILL);
    }
  }
  cJSON_Delete(o);
  /* Wait (bounded) until the supervisor has recorded the end. */
  for (int i = 0; i < 3000; i++) {
    struct mu_app_status st;
    memset(&st, 0, sizeof(st));
    struct mu_buf e = MU_BUF_INIT(1024);
    rc = local_describe(app_id, cfg, &st, &e);
    mu_buf_release(&e);
    int done = rc != 0 || mu_job_state_is_terminal(st.state) || st.state == MU_STATE_UNKNOWN;
    mu_app_status_release(&st);
    if (done)
      return 0;
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  mu_buf_printf(err, "'%s' did not stop within 30 s", app_id);
  return MU_ETIMEDOUT;
}

/* list entries sorted by start time (oldest first, so the newest job is the last line). */
struct dated_entry {
  double started;
  struct mu_app_list_entry e;
};

static int cmp_entry(const void *a, const void *b)
{
  const struct dated_entry *x = a, *y = b;
  if (x->started != y->started)
    return x->started < y->started ? -1 : 1;
  return strcmp(x->e.app_id, y->e.app_id);
}

static int local_list(const struct mu_cfg *cfg, struct mu_app_list_entry **out, size_t *n,
                      struct mu_buf *err)
{
  char *root = state_root();
  (void)cfg;
  (void)err;
  *out = NULL;
  *n = 0;
  DIR *d = opendir(root);
  if (d == NULL) {
    mu_free(root);
    return 0;
  }
  struct dated_entry *v = NULL;
  size_t nv = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.')
      continue;
    struct mu_buf ignore = MU_BUF_INIT(1024);
    struct mu_app_status st;
    int rc = local_describe(e->d_name, NULL, &st, &ignore);
    cJSON *o = NULL;
    if (rc == 0)
      rc = load_state(e->d_name, NULL, &o, NULL, &ignore);
    mu_buf_release(&ignore);
    if (rc != 0) {
      mu_app_status_release(&st);
      continue;
    }
    if (nv == cap) {
      cap = cap ? cap * 2 : 16;
      v = mu_realloc(v, cap * sizeof(*v));
    }
    struct dated_entry *de = &v[nv++];
    const cJSON *sa = cJSON_GetObjectItemCaseSensitive(o, "started_at");
    de->started = cJSON_IsNumber(sa) ? sa->valuedouble : 0;
    de->e.app_id = mu_strdup(e->d_name);
    de->e.name = mu_strdup(js(o, "name"));
    de->e.state = st.state;
    cJSON_Delete(o);
    mu_app_status_release(&st);
  }
  closedir(d);
  mu_free(root);
  if (nv > 1)
    qsort(v, nv, sizeof(*v), cmp_entry);
  if (nv > 0) {
    *out = mu_calloc(nv, sizeof(**out));
    for (size_t i = 0; i < nv; i++)
      (*out)[i] = v[i].e;
  }
  *n = nv;
  mu_free(v);
  return 0;
}

/* ================================================================================ logs */

struct tail_src {
  int fd;
  char *path;
  char *prefix;
  struct mu_buf partial; /* an unfinished line (prefixed output only) */
};

static void emit(int out, struct tail_src *t, const char *p, size_t n, int flush)
{
  if (t->prefix == NULL) {
    mu_write_all(out, p, n);
    return;
  }
  mu_buf_append(&t->partial, p, n);
  for (;;) {
    const char *s = mu_buf_str(&t->partial);
    const char *nl = memchr(s, '\n', t->partial.len);
    if (nl == NULL)
      break;
    size_t len = (size_t)(nl - s) + 1;
    mu_write_all(out, t->prefix, strlen(t->prefix));
    mu_write_all(out, s, len);
    mu_buf_consume(&t->partial, len);
  }
  if (flush && t->partial.len > 0) {
    mu_write_all(out, t->prefix, strlen(t->prefix));
    mu_write_all(out, mu_buf_str(&t->partial), t->partial.len);
    mu_write_all(out, "\n", 1);
    mu_buf_clear(&t->partial);
  }
}

/* Positions fd so that the last `tail` lines remain. */
static void seek_tail(int fd, long tail)
{
  off_t size = lseek(fd, 0, SEEK_END);
  if (size <= 0) {
    lseek(fd, 0, SEEK_SET);
    return;
  }
  long lines = 0;
  off_t pos = size;
  char buf[4096];
  while (pos > 0) {
    off_t chunk = pos > (off_t)sizeof(buf) ? (off_t)sizeof(buf) : pos;
    pos -= chunk;
    lseek(fd, pos, SEEK_SET);
    ssize_t n = read(fd, buf, (size_t)chunk);
    if (n <= 0)
      break;
    for (ssize_t i = n - 1; i >= 0; i--) {
      if (buf[i] == '\n' && !(pos + i == size - 1)) {
        if (++lines == tail) {
          lseek(fd, pos + i + 1, SEEK_SET);
          return;
        }
      }
    }
  }
  lseek(fd, 0, SEEK_SET);
}

static int local_log(const char *app_id, const char *role, long replica, enum mu_log_stream s,
                     int follow, long tail, int out, const struct mu_cfg *cfg, struct mu_buf *err)
{
  static const char *const files[] = {"combined.log", "stdout.log", "stderr.log"};
  struct mu_app_status st;
  memset(&st, 0, sizeof(st));
  int rc = local_describe(app_id, cfg, &st, err);
  if (rc != 0)
    return rc;
  /* Following a job that has not started its replicas yet: wait for them. */
  while (follow && st.nreplicas == 0 && !mu_job_state_is_terminal(st.state) &&
         st.state != MU_STATE_UNKNOWN) {
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    mu_app_status_release(&st);
    rc = local_describe(app_id, cfg, &st, err);
    if (rc != 0)
      return rc;
  }
  char *dir = app_dir_find(app_id, cfg);
  struct tail_src *srcs = mu_calloc(st.nreplicas ? st.nreplicas : 1, sizeof(*srcs));
  size_t nsrc = 0;
  int role_found = role == NULL;
  for (size_t i = 0; i < st.nreplicas; i++) {
    if (role != NULL && strcmp(role, st.replicas[i].role) != 0)
      continue;
    role_found = 1;
    if (replica >= 0 && st.replicas[i].replica_id != replica)
      continue;
    struct tail_src *t = &srcs[nsrc];
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s/%ld/%s", dir, st.replicas[i].role,
             st.replicas[i].replica_id, files[s]);
    t->fd = open(path, O_RDONLY | O_CLOEXEC);
    t->path = mu_strdup(path);
    mu_buf_init(&t->partial, 1 << 20);
    if (t->fd < 0 && !follow) {
      mu_free(t->path);
      continue;
    }
    if (tail > 0 && t->fd >= 0)
      seek_tail(t->fd, tail);
    t->prefix = mu_asprintf("%s/%ld ", st.replicas[i].role, st.replicas[i].replica_id);
    nsrc++;
  }
  if (!role_found) {
    mu_buf_printf(err, "'%s' has no role '%s'", app_id, role);
    rc = MU_ENOENT;
    goto out;
  }
  if (nsrc == 0 && replica >= 0) {
    mu_buf_printf(err, "'%s' has no replica %s/%ld (or it has not started yet)", app_id,
                  role ? role : "*", replica);
    rc = MU_ENOENT;
    goto out;
  }
  if (nsrc == 1) {
    mu_free(srcs[0].prefix);
    srcs[0].prefix = NULL;
  }
  char *buf = mu_malloc(LOG_CHUNK);
  for (;;) {
    int got = 0;
    for (size_t i = 0; i < nsrc; i++) {
      ssize_t n;
      if (srcs[i].fd < 0)
        srcs[i].fd = open(srcs[i].path, O_RDONLY | O_CLOEXEC); /* not started before */
      while (srcs[i].fd >= 0 && (n = read(srcs[i].fd, buf, LOG_CHUNK)) > 0) {
        emit(out, &srcs[i], buf, (size_t)n, 0);
        got = 1;
      }
    }
    if (!follow)
      break;
    if (!got) {
      struct mu_app_status now;
      memset(&now, 0, sizeof(now));
      struct mu_buf e = MU_BUF_INIT(1024);
      int r2 = local_describe(app_id, cfg, &now, &e);
      mu_buf_release(&e);
      int done = r2 != 0 || mu_job_state_is_terminal(now.state) || now.state == MU_STATE_UNKNOWN;
      mu_app_status_release(&now);
      if (done) {
        /* One last read: the supervisor writes the logs before the final state. */
        for (size_t i = 0; i < nsrc; i++) {
          ssize_t n;
          while (srcs[i].fd >= 0 && (n = read(srcs[i].fd, buf, LOG_CHUNK)) > 0)
            emit(out, &srcs[i], buf, (size_t)n, 0);
        }
        break;
      }
      struct timespec ts = {0, 100 * 1000 * 1000};
      nanosleep(&ts, NULL);
    }
  }
  for (size_t i = 0; i < nsrc; i++)
    emit(out, &srcs[i], "", 0, 1);
  mu_free(buf);
out:
  for (size_t i = 0; i < nsrc; i++) {
    if (srcs[i].fd >= 0)
      close(srcs[i].fd);
    mu_free(srcs[i].prefix);
    mu_free(srcs[i].path);
    mu_buf_release(&srcs[i].partial);
  }
  mu_free(srcs);
  mu_free(dir);
  mu_app_status_release(&st);
  return rc;
}

static int local_app_spec(const char *app_id, const struct mu_cfg *cfg, struct mu_app **out,
                          struct mu_buf *err)
{
  char *dir = app_dir_find(app_id, cfg);
  if (dir == NULL) {
    mu_buf_printf(err, "no local job '%s' (see 'muster list')", app_id);
    return MU_ENOENT;
  }
  char *path = mu_asprintf("%s/app.json", dir);
  char *txt = read_state(path);
  int rc = txt ? mu_app_from_json(txt, out) : MU_EIO;
  if (rc != 0)
    mu_buf_printf(err, "cannot read the job spec '%s'", path);
  mu_free(txt);
  mu_free(path);
  mu_free(dir);
  return rc;
}

const struct mu_sched_ops mu_sched_local = {
    .name = "local",
    .help = "processes on this machine, one process group per replica, with an embedded musterd",
    .runopts = local_runopts,
    .dryrun = local_dryrun,
    .schedule = local_schedule,
    .describe = local_describe,
    .list = local_list,
    .cancel_existing = local_cancel,
    .log_open = local_log,
    .dryrun_free = local_dryrun_free,
    .app_spec = local_app_spec,
};
