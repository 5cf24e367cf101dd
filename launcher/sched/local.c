/* The local scheduler: every replica a process tree on this machine. dryrun plans the replicas
 * (local_plan.c); schedule forks the supervisor that runs them (local_supervisor.c); status,
 * cancel, list and log read what the supervisor keeps on disk, from any terminal.
 *
 * Layout: <log dir>/<app_id>/{app.json, state.json, supervisor.log,
 * <role>/<replica>/{stdout,stderr,combined}.log}. The log dir is runopt log_dir, else
 * $MUSTER_LOG_DIR, else /tmp/muster/<user>; a job whose log dir is not the default one gets a
 * symlink <default>/<app_id> so handles still find it.
 */
#define _XOPEN_SOURCE 700 /* nftw */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "muster/errno.h"

#include "alloc.h"
#include "c10d_probe.h"
#include "fsutil.h"
#include "http_client.h"
#include "json.h"
#include "lines.h"
#include "log.h"
#include "local.h"
#include "opts.h"
#include "proc.h"
#include "random.h"
#include "sched.h"

#define STATE_MAX_BYTES (4 << 20) /* a job's state.json or app.json, as read back: capped */
#define LOG_CHUNK 65536           /* one read of a log file */
#define LOG_LINE_MAX (1 << 20)    /* a longer line of a replica's log is written in pieces */

static const struct mu_runopt local_runopts[] = {
    MU_LOCAL_RUNOPTS,
    {NULL, MU_RUNOPT_STR, NULL, 0, NULL},
};

/* ---------------------------------------------------------------------------------------------
 * Paths
 */

static char *state_root(void)
{
  const char *env = getenv("MUSTER_LOG_DIR");
  if (env != NULL && env[0] != '\0')
    return mu_strdup(env);
  const char *xdg = getenv("XDG_RUNTIME_DIR");
  struct stat st;
  if (xdg != NULL && xdg[0] == '/' && stat(xdg, &st) == 0 && S_ISDIR(st.st_mode))
    return mu_asprintf("%s/muster", xdg);
  const char *user = getenv("USER");
  struct passwd *pw = NULL;
  if (user == NULL || user[0] == '\0' || strchr(user, '/') != NULL || user[0] == '.') {
    pw = getpwuid(getuid());
    user = pw != NULL ? pw->pw_name : "nobody";
  }
  return mu_asprintf("/tmp/muster/%s", user);
}

/* The default state root is checked before it is used, as it is in a place others can write
 * to (/tmp/muster/$USER): it must be a directory of this user's, not a link, with no access
 * for others (made so: 0700; an own one that is not is made private). Someone else's is
 * refused, never used: they could read the job's output and swap its files. With `create`, it
 * is made (and /tmp/muster, shared like /tmp: 01777); without, a missing one is fine (no jobs).
 * $MUSTER_LOG_DIR is the user's own choice and is taken as it is.
 * Returns: 0, or -errno with err set. */
static int state_root_check(const char *root, int create, struct mu_buf *err)
{
  const char *env = getenv("MUSTER_LOG_DIR");
  struct stat st;
  if (env != NULL && env[0] != '\0')
    return 0;
  if (!create && lstat(root, &st) != 0 && errno == ENOENT)
    return 0;
  if (create) {
    char *parent = mu_strdup(root);
    char *slash = strrchr(parent, '/');
    if (slash != NULL && slash != parent) {
      *slash = '\0';
      if (mkdir(parent, 01777) == 0)
        chmod(parent, 01777); /* shared like /tmp: every user makes their own below it */
    }
    mu_free(parent);
  }
  struct mu_buf e = MU_BUF_INIT(SIZE_MAX);
  int rc = mu_own_dir(root, 0700, 077, &e);
  if (rc != 0)
    mu_buf_printf(err, "the local scheduler's state directory: %s (or set MUSTER_LOG_DIR)",
                  mu_buf_str(&e));
  mu_buf_release(&e);
  return rc;
}

static char *log_root(const struct mu_cfg *cfg)
{
  const char *d = mu_cfg_get(cfg, "log_dir");
  if (d != NULL && d[0] != '\0')
    return mu_strdup(d);
  return state_root();
}

/* The app dir of an existing job: <root>/<app_id> (a dir or a symlink to one); NULL also for
 * an app id that is not one path segment ("..", "a/b": a handle names no job outside the
 * root). */
static char *app_dir_find(const char *app_id, const struct mu_cfg *cfg)
{
  char *root = log_root(cfg);
  char *d = mu_local_path(root, app_id, NULL, -1, NULL);
  mu_free(root);
  struct stat st;
  if (d != NULL && stat(d, &st) == 0 && S_ISDIR(st.st_mode))
    return d;
  mu_free(d);
  root = state_root();
  d = mu_local_path(root, app_id, NULL, -1, NULL);
  mu_free(root);
  if (d != NULL && stat(d, &st) == 0 && S_ISDIR(st.st_mode))
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
static int write_file(const char *path, const char *text)
{
  return mu_write_file_atomic(path, text, strlen(text), 0644, 0);
}

/* ---------------------------------------------------------------------------------------------
 * Dryrun and schedule
 */

/* The job's rendezvous: its own musterd or an existing one, and who may use it (a token made
 * for the job at submission, the user's, or none). Returns: 0 or MU_EINVAL. */
static int plan_rdzv(struct mu_local_plan *p, const struct mu_app *app, const struct mu_cfg *cfg,
                     struct mu_buf *err)
{
  struct mu_rdzv_choice rz;
  struct mu_rdzv_auth auth;
  int rc = mu_cfg_rdzv(cfg, app, &rz, err);
  if (rc != 0)
    return rc;
  p->rdzv = rz.own;
  p->rdzv_external = rz.endpoint;
  if (p->rdzv)
    p->c10d_endpoint = mu_strdup("127.0.0.1:<c10d port>");
  else if (p->rdzv_external != NULL && mu_app_mentions(app, "${c10d_endpoint}")) {
    mu_buf_printf(err,
                  "the job uses ${c10d_endpoint} (torchrun --rdzv_backend c10d) and -cfg "
                  "rdzv=%s names a musterd whose TCPStore port muster does not know; use "
                  "-cfg rdzv=auto (the job's own musterd), or --rdzv_backend etcd-v2",
                  p->rdzv_external);
    return MU_EINVAL;
  }
  rc = mu_cfg_rdzv_auth(cfg, app, &rz, &auth, err);
  if (rc != 0)
    return rc;
  p->token_file = auth.token_file;
  p->open_why = auth.why_open;
  p->tls_dir = auth.tls_dir;
  p->tls_clients = auth.tls_clients;
  if (p->rdzv && !auth.open && p->token_file == NULL) {
    p->token_file = mu_local_path(p->root, p->app_id, NULL, -1, "rdzv.token");
    p->token_made = 1;
  }
  return 0;
}

/* The plan's other runopts. Returns: 0 or MU_EINVAL. */
static int plan_opts(struct mu_local_plan *p, const struct mu_cfg *cfg, struct mu_buf *err)
{
  const char *g = mu_cfg_get(cfg, "grace_period");
  p->grace = 10;
  if (g != NULL && (mu_parse_long(g, 0, 3600, &p->grace) != 0)) {
    mu_buf_printf(err, "-cfg grace_period='%s': must be 0-3600 seconds", g);
    return MU_EINVAL;
  }
  p->fail_fast = mu_cfg_get(cfg, "fail_fast") == NULL || mu_cfg_get_bool(cfg, "fail_fast");
  p->prepend_cwd = mu_cfg_get_bool(cfg, "prepend_cwd");
  const char *d = mu_cfg_get(cfg, "devices_per_replica");
  if (d != NULL && mu_parse_long(d, 0, 4096, &p->devices_per_replica) != 0) {
    mu_buf_printf(err, "-cfg devices_per_replica='%s': must be 0-4096", d);
    return MU_EINVAL;
  }
  d = mu_cfg_get(cfg, "device_env");
  p->device_env = mu_strdup(d && *d ? d : "CUDA_VISIBLE_DEVICES");
  return 0;
}

/* What --dryrun prints: the job, its rendezvous, each replica's command line, env and logs.
 * Never a secret: the token does not exist yet, only the name of its file. */
static char *plan_text(const struct mu_local_plan *p)
{
  struct mu_buf t = MU_BUF_INIT(STATE_MAX_BYTES);
  mu_buf_printf(&t, "app_id: %s\nhandle: %s://%s/%s\nlog_dir: %s\n", p->app_id,
                p->container ? "local_container" : "local", MU_SESSION, p->app_id, p->app_dir);
  if (p->container != NULL)
    mu_local_container_text(p, &t);
  if (p->rdzv && p->token_file == NULL)
    mu_buf_printf(&t,
                  "rendezvous: embedded musterd on 127.0.0.1:<a free port>, open to anyone "
                  "on this machine (%s)\n",
                  p->open_why ? p->open_why : "rdzv_auth=none");
  else if (p->rdzv)
    mu_buf_printf(&t,
                  "rendezvous: embedded musterd on 127.0.0.1:<a free port>, private to the "
                  "job: it requires the token in %s (%s)\n",
                  p->token_file,
                  p->token_made ? "0600, made at submission, removed at the end" : "yours");
  else if (p->rdzv_external)
    mu_buf_printf(&t, "rendezvous: musterd at %s\n", p->rdzv_external);
  if (p->rdzv)
    mu_buf_printf(&t, "rendezvous TCPStore (c10d): the same musterd on 127.0.0.1:<another free "
                      "port>, unauthenticated (the protocol has no credentials)\n");
  if (p->tls_dir)
    mu_buf_printf(&t, "rendezvous TLS: %s/server.pem, checked against %s/ca.pem%s\n", p->tls_dir,
                  p->tls_dir, p->tls_clients ? "; client certificates required" : "");
  mu_buf_printf(&t, "replicas:\n");
  for (size_t i = 0; i < p->nreplicas; i++) {
    const struct mu_local_replica *rp = &p->replicas[i];
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
  return mu_buf_detach(&t);
}

int mu_local_dryrun_with(const struct mu_app *app, const struct mu_cfg *cfg,
                         struct mu_local_container *c, struct mu_dryrun *out, struct mu_buf *err)
{
  struct mu_buf js = MU_BUF_INIT(STATE_MAX_BYTES);
  struct mu_local_plan *p = mu_calloc(1, sizeof(*p));
  p->container = c;
  int rc = mu_app_to_json(app, &js);
  if (rc == 0)
    rc = mu_app_from_json(mu_buf_str(&js), &p->app);
  if (rc != 0) {
    mu_buf_printf(err, "cannot copy the job spec");
    goto out;
  }
  p->app_id = mu_app_id_make(app->name);
  if (p->app_id == NULL) {
    mu_buf_printf(err, "cannot draw a random app id: the kernel gave no random bytes");
    rc = MU_EIO;
    goto out;
  }
  p->root = log_root(cfg);
  p->app_dir = mu_local_path(p->root, p->app_id, NULL, -1, NULL); /* the id is ours: [a-z0-9-] */
  rc = plan_rdzv(p, app, cfg, err);
  rc = rc ? rc : plan_opts(p, cfg, err);
  const char *ep = p->rdzv_external ? p->rdzv_external
                   : p->tls_dir     ? "https://127.0.0.1:<port>"
                                    : "127.0.0.1:<port>";
  rc = rc ? rc : mu_local_plan_replicas(p, ep, err);
  if (rc != 0)
    goto out;
  out->text = plan_text(p);
  out->app_id = mu_strdup(p->app_id);
  if (p->open_why != NULL)
    out->note = mu_asprintf("the job's musterd is open to anyone on this machine: %s", p->open_why);
  out->priv = p;
  p = NULL;
out:
  mu_local_plan_free(p);
  mu_buf_release(&js);
  return rc;
}

static int local_dryrun(const struct mu_app *app, const struct mu_cfg *cfg, struct mu_dryrun *out,
                        struct mu_buf *err)
{
  return mu_local_dryrun_with(app, cfg, NULL, out, err);
}

static void local_dryrun_free(struct mu_dryrun *req)
{
  mu_local_plan_free(req->priv);
  req->priv = NULL;
}

/* The job's files before its supervisor runs: the app dir (linked from the default root when
 * the job's is another), app.json and a first state.json, so that status works at once.
 * Returns: 0, or -errno with err set. */
static int job_files(const struct mu_local_plan *p, struct mu_buf *err)
{
  char *root = state_root();
  int rc = state_root_check(root, 1, err);
  if (rc != 0) {
    mu_free(root);
    return rc;
  }
  rc = mu_mkdir_p(p->app_dir);
  if (rc != 0) {
    mu_buf_printf(err, "cannot create the log directory '%s': %s", p->app_dir, mu_strerror(rc));
    mu_free(root);
    return rc;
  }
  if (strcmp(root, p->root) != 0) {
    mu_mkdir_p(root);
    char *link = mu_local_path(root, p->app_id, NULL, -1, NULL);
    if (symlink(p->app_dir, link) != 0 && errno != EEXIST) {
      rc = -errno;
      mu_buf_printf(err, "cannot link '%s' to '%s': %s", link, p->app_dir, strerror(errno));
    }
    mu_free(link);
  }
  mu_free(root);
  if (rc != 0)
    return rc;
  struct mu_buf js = MU_BUF_INIT(STATE_MAX_BYTES);
  mu_app_to_json(p->app, &js);
  char path[PATH_MAX];
  snprintf(path, sizeof(path), "%s/app.json", p->app_dir);
  rc = write_file(path, mu_buf_str(&js));
  mu_buf_release(&js);
  if (rc != 0) {
    mu_buf_printf(err, "cannot write '%s': %s", path, mu_strerror(rc));
    return rc;
  }
  char *st = mu_asprintf("{\"app_id\":\"%s\",\"name\":\"\",\"state\":\"PENDING\","
                         "\"supervisor_pid\":0,\"replicas\":[]}",
                         p->app_id);
  snprintf(path, sizeof(path), "%s/state.json", p->app_dir);
  write_file(path, st);
  mu_free(st);
  return 0;
}

/* -cfg rdzv=HOST:PORT[,HOST:PORT...]: one of them answers a TCP connect within 3 s, else an
 * error naming what the user typed, before any replica starts (the agents would retry for half
 * a minute, then blame their own --rdzv-endpoint). Returns: 0 or MU_ECONN. */
static int rdzv_reachable(const char *eps, struct mu_buf *err)
{
  struct mu_buf why = MU_BUF_INIT(4096);
  const char *s = eps;
  for (;;) {
    size_t n = strcspn(s, ",");
    char host[256];
    int port = 0, https = 0;
    mu_buf_clear(&why);
    if (mu_http_endpoint_parse(s, n, host, sizeof(host), &port, &https) == 0 &&
        mu_tcp_reachable(host, port, 3000, &why) == 0) {
      mu_buf_release(&why);
      return 0;
    }
    if (s[n] == '\0')
      break;
    s += n + 1;
  }
  mu_buf_printf(err,
                "-cfg rdzv=%s: no musterd answers there (%s); start one (musterd --listen "
                "HOST:PORT, or muster deploy rendezvous on a cluster), or drop -cfg rdzv for the "
                "job's own musterd (rdzv=auto)",
                eps, why.len ? mu_buf_str(&why) : "not HOST:PORT");
  mu_buf_release(&why);
  return MU_ECONN;
}

static int local_schedule(struct mu_dryrun *req, struct mu_buf *err)
{
  struct mu_local_plan *p = req->priv;
  if (p->rdzv_external != NULL && rdzv_reachable(p->rdzv_external, err) != 0)
    return MU_ECONN;
  int rc = job_files(p, err);
  if (rc != 0)
    return rc;
  if (p->token_made) {
    rc = mu_random_token_file(p->token_file);
    if (rc != 0) {
      mu_buf_printf(err, "cannot make the job's rendezvous token '%s': %s", p->token_file,
                    mu_strerror(rc));
      return rc;
    }
  }
  char path[PATH_MAX];
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    mu_buf_printf(err, "cannot fork the supervisor: %s", strerror(errno));
    rc = -errno;
    if (p->token_made)
      unlink(p->token_file);
    return rc;
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
    _exit(mu_local_supervise(p));
  }
  int status;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Reading a job: status, cancel, list
 */

static int load_state(const char *app_id, const struct mu_cfg *cfg, cJSON **out, char **dir,
                      struct mu_buf *err)
{
  char *root = state_root();
  int rc = state_root_check(root, 0, err);
  mu_free(root);
  if (rc != 0)
    return rc;
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

/* Whether state.json's process `pid` is one this job started: its start time, recorded at
 * launch (member `start_key`), is the one the process has now. A pid alone proves nothing: it
 * is reused, and state.json is a file (a planted "pid": 1 would be kill(-1, ...)). */
static int proven(const cJSON *o, const char *pid_key, const char *start_key, long *pid)
{
  *pid = mu_json_get_long(o, pid_key, 0);
  double start = mu_json_get_double(o, start_key, 0);
  return start >= 1 && mu_proc_is(*pid, (unsigned long long)start);
}

static int local_describe(const char *app_id, const struct mu_cfg *cfg, struct mu_app_status *out,
                          struct mu_buf *err)
{
  cJSON *o = NULL;
  char *dir = NULL;
  memset(out, 0, sizeof(*out));
  int rc = load_state(app_id, cfg, &o, &dir, err);
  if (rc != 0)
    return rc;
  out->app_id = mu_strdup(app_id);
  if (mu_job_state_parse(js(o, "state"), &out->state) != 0)
    out->state = MU_STATE_UNKNOWN;
  out->msg = mu_strdup(js(o, "msg"));
  if (js(o, "rdzv_endpoint")[0] != '\0')
    out->rdzv_endpoint = mu_strdup(js(o, "rdzv_endpoint"));
  out->rdzv_token_file = mu_local_path(dir, NULL, NULL, -1, "rdzv.token");
  if (access(out->rdzv_token_file, R_OK) != 0) { /* none, or gone with the job */
    mu_free(out->rdzv_token_file);
    out->rdzv_token_file = NULL;
  }
  if (js(o, "ui_url")[0] != '\0' && !mu_job_state_is_terminal(out->state))
    out->ui_url = mu_strdup(js(o, "ui_url")); /* the embedded musterd stops with the job */
  long sup = 0;
  int sup_here = mu_json_get_double(o, "supervisor_start", 0) >= 1
                     ? proven(o, "supervisor_pid", "supervisor_start", &sup)
                     : pid_alive(sup = mu_json_get_long(o, "supervisor_pid", 0));
  if (!mu_job_state_is_terminal(out->state) && sup > 0 && !sup_here) {
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
    /* The agent's failure record, or the worker's own torch error file (local_plan.c points
     * TORCHELASTIC_ERROR_FILE there): in the replica's directory under the app's. */
    char *path = mu_local_path(dir, NULL, rs->role, rs->replica_id, "error.json");
    struct mu_buf ef = MU_BUF_INIT(1u << 20);
    if (path != NULL && mu_read_file(path, 1u << 20, &ef) == 0)
      mu_app_status_add_failure(out, out->nreplicas - 1, ef.data, ef.len);
    mu_buf_release(&ef);
    mu_free(path);
  }
  /* a lost process no retry or standby covered (local_supervisor.c), when it came first */
  const char *lost = js(o, "root_cause");
  long long lost_ms = (long long)mu_json_get_double(o, "root_cause_ms", 0);
  if (lost[0] != '\0' && (out->root_cause == NULL || lost_ms <= out->root_cause_ms)) {
    mu_free(out->root_cause);
    mu_free(out->structured_error_msg);
    out->root_cause = mu_strdup(lost);
    out->structured_error_msg = NULL;
    out->root_cause_ms = lost_ms;
  }
  out->started_at = mu_json_get_double(o, "started_at", 0);
  if (mu_job_state_is_terminal(out->state))
    out->ended_at = mu_json_get_double(o, "updated_at", 0);
  const cJSON *run = cJSON_GetObjectItemCaseSensitive(o, "rdzv_run");
  if (cJSON_IsObject(run)) { /* the run's own count (every node's) is the job's */
    char *t = cJSON_PrintUnformatted(run);
    out->rdzv_run = mu_strdup(t);
    cJSON_free(t);
    long rc_run = mu_json_get_long(run, "restart_count", 0);
    if (rc_run > out->num_restarts)
      out->num_restarts = rc_run;
  }
  cJSON_Delete(o);
  mu_free(dir);
  return 0;
}

static int local_cancel(const char *app_id, const struct mu_cfg *cfg, struct mu_buf *err)
{
  cJSON *o = NULL;
  int rc = load_state(app_id, cfg, &o, NULL, err);
  if (rc != 0)
    return rc;
  long sup = 0;
  if (proven(o, "supervisor_pid", "supervisor_start", &sup)) {
    kill((pid_t)sup, SIGTERM);
  } else {
    /* No supervisor: stop what is left by hand, each process group only when its leader is
     * proven to be the replica this job started. */
    const cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(o, "replicas"))
    {
      long pid = 0;
      if (strcmp(js(r, "state"), "RUNNING") != 0)
        continue;
      if (proven(r, "pid", "start", &pid))
        kill(-(pid_t)pid, SIGKILL);
      else if (pid_alive(pid) && pid != getpid())
        mu_warn("not signalling pid %ld of '%s': it is not the process the job started "
                "(its start time differs from the one state.json recorded)",
                pid, app_id);
    }
  }
  cJSON_Delete(o);
  /* Wait (bounded) until the supervisor has recorded the end. */
  for (int i = 0; i < 3000; i++) {
    struct mu_app_status st;
    memset(&st, 0, sizeof(st));
    struct mu_buf e = MU_BUF_INIT(SIZE_MAX);
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

int mu_local_list(const struct mu_cfg *cfg, struct mu_app_list_entry **out, size_t *n,
                  int container, struct mu_buf *err)
{
  char *root = state_root();
  (void)cfg;
  *out = NULL;
  *n = 0;
  if (state_root_check(root, 0, err) != 0) {
    mu_free(root);
    return -EPERM;
  }
  DIR *d = opendir(root);
  if (d == NULL) {
    mu_free(root);
    return 0;
  }
  struct dated_entry *v = NULL;
  size_t nv = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    char *mark = mu_local_path(root, e->d_name, NULL, -1, MU_LOCAL_CONTAINER_MARK);
    int theirs = mark == NULL || (access(mark, F_OK) == 0) != container;
    mu_free(mark);
    if (e->d_name[0] == '.' || theirs)
      continue; /* the other scheduler's job: local or local_container */
    struct mu_buf ignore = MU_BUF_INIT(SIZE_MAX);
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
    memset(&de->e, 0, sizeof(de->e));
    const cJSON *sa = cJSON_GetObjectItemCaseSensitive(o, "started_at");
    de->started = cJSON_IsNumber(sa) ? sa->valuedouble : 0;
    de->e.app_id = mu_strdup(e->d_name);
    de->e.name = mu_strdup(js(o, "name"));
    de->e.state = st.state;
    de->e.started_at = de->started;
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

/* ---------------------------------------------------------------------------------------------
 * Logs
 */

/* One replica's log file, followed. */
struct tail_src {
  int fd; /* -1 until the file exists */
  char *path;
  int prefixed; /* several replicas: each line gets "role/replica " */
  struct mu_line_prefixer lines;
};

/* Writes n bytes of t's file to out, as they are or as prefixed lines; n == 0 at the end
 * writes the unfinished line. */
static void emit(int out, struct tail_src *t, const char *p, size_t n)
{
  if (!t->prefixed) {
    mu_write_all(out, p, n);
    return;
  }
  struct mu_buf b = MU_BUF_INIT(SIZE_MAX);
  if (n > 0)
    mu_line_prefixer_feed(&t->lines, p, n, &b);
  else
    mu_line_prefixer_flush(&t->lines, &b);
  mu_write_all(out, b.data, b.len);
  mu_buf_release(&b);
}

/* Copies what was appended to every source since the last call, opening the files that appeared
 * meanwhile when open_new. Returns: 1 when anything was copied. */
static int copy_new(int out, struct tail_src *srcs, size_t nsrc, char *buf, int open_new)
{
  int got = 0;
  for (size_t i = 0; i < nsrc; i++) {
    ssize_t n;
    if (srcs[i].fd < 0 && open_new)
      srcs[i].fd = open(srcs[i].path, O_RDONLY | O_CLOEXEC); /* not started before */
    while (srcs[i].fd >= 0 && (n = read(srcs[i].fd, buf, LOG_CHUNK)) > 0) {
      emit(out, &srcs[i], buf, (size_t)n);
      got = 1;
    }
  }
  return got;
}

/* Whether the job ended (or cannot be read any more). */
static int job_over(const char *app_id, const struct mu_cfg *cfg)
{
  struct mu_app_status now;
  struct mu_buf e = MU_BUF_INIT(SIZE_MAX);
  memset(&now, 0, sizeof(now));
  int rc = local_describe(app_id, cfg, &now, &e);
  int done = rc != 0 || mu_job_state_is_terminal(now.state) || now.state == MU_STATE_UNKNOWN;
  mu_app_status_release(&now);
  mu_buf_release(&e);
  return done;
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

/* The job's status, after its replicas started when following. Returns: 0 or describe's error. */
static int describe_started(const char *app_id, const struct mu_cfg *cfg, int follow,
                            struct mu_app_status *st, struct mu_buf *err)
{
  memset(st, 0, sizeof(*st));
  int rc = local_describe(app_id, cfg, st, err);
  /* Following a job that has not started its replicas yet: wait for them. */
  while (rc == 0 && follow && st->nreplicas == 0 && !mu_job_state_is_terminal(st->state) &&
         st->state != MU_STATE_UNKNOWN) {
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    mu_app_status_release(st);
    rc = local_describe(app_id, cfg, st, err);
  }
  return rc;
}

/* The log files to read (role NULL: every role; replica < 0: every replica), opened at their
 * last `tail` lines; one not there yet is kept only when following. The lines of a job or a
 * role carry "role/replica " (one replica or many); one replica asked for by name is its file
 * as it is. Returns: 0, or MU_ENOENT with the message in err. Ownership: srcs (room for every
 * replica) is the caller's, *n of them filled. */
static int open_sources(const char *app_id, const struct mu_app_status *st, const char *dir,
                        const char *role, long replica, const char *file, int follow, long tail,
                        struct tail_src *srcs, size_t *n, struct mu_buf *err)
{
  int role_found = role == NULL;
  for (size_t i = 0; i < st->nreplicas; i++) {
    const struct mu_replica_status *r = &st->replicas[i];
    if (role != NULL && strcmp(role, r->role) != 0)
      continue;
    role_found = 1;
    if (replica >= 0 && r->replica_id != replica)
      continue;
    struct tail_src *t = &srcs[*n];
    t->path = mu_local_path(dir, NULL, r->role, r->replica_id, file);
    if (t->path == NULL)
      continue; /* a role in state.json that is no directory name: nothing of ours */
    t->fd = open(t->path, O_RDONLY | O_CLOEXEC);
    if (t->fd < 0 && !follow) {
      mu_free(t->path);
      t->path = NULL;
      continue;
    }
    if (tail > 0 && t->fd >= 0)
      seek_tail(t->fd, tail);
    char *prefix = mu_asprintf("%s/%ld ", r->role, r->replica_id);
    mu_line_prefixer_init(&t->lines, prefix, LOG_LINE_MAX);
    mu_free(prefix);
    t->prefixed = replica < 0;
    (*n)++;
  }
  if (!role_found) {
    mu_buf_printf(err, "'%s' has no role '%s'", app_id, role);
    return MU_ENOENT;
  }
  if (*n == 0 && replica >= 0) {
    mu_buf_printf(err, "'%s' has no replica %s/%ld (or it has not started yet)", app_id,
                  role ? role : "*", replica);
    return MU_ENOENT;
  }
  return 0;
}

/* Copies the sources to out: what they hold, and with follow what they get until the job is
 * over; then every unfinished line. */
static void copy_sources(int out, struct tail_src *srcs, size_t n, int follow, const char *app_id,
                         const struct mu_cfg *cfg)
{
  char *buf = mu_malloc(LOG_CHUNK);
  for (;;) {
    int got = copy_new(out, srcs, n, buf, 1);
    if (!follow)
      break;
    if (!got && job_over(app_id, cfg)) {
      /* One last read: the supervisor writes the logs before the final state. */
      copy_new(out, srcs, n, buf, 0);
      break;
    }
    if (!got) {
      struct timespec ts = {0, 100 * 1000 * 1000};
      nanosleep(&ts, NULL);
    }
  }
  for (size_t i = 0; i < n; i++)
    emit(out, &srcs[i], "", 0);
  mu_free(buf);
}

static int local_log(const char *app_id, const char *role, long replica,
                     const struct mu_log_opts *o, int out, const struct mu_cfg *cfg,
                     struct mu_buf *err)
{
  static const char *const files[] = {"combined.log", "stdout.log", "stderr.log"};
  int follow = o->follow;
  struct mu_app_status st;
  int rc = describe_started(app_id, cfg, follow, &st, err);
  if (rc != 0) {
    mu_app_status_release(&st);
    return rc;
  }
  char *dir = app_dir_find(app_id, cfg);
  struct tail_src *srcs = mu_calloc(st.nreplicas ? st.nreplicas : 1, sizeof(*srcs));
  size_t nsrc = 0;
  rc = open_sources(app_id, &st, dir, role, replica, files[o->stream], follow, o->tail, srcs, &nsrc,
                    err);
  if (rc == 0)
    copy_sources(out, srcs, nsrc, follow, app_id, cfg);
  for (size_t i = 0; i < nsrc; i++) {
    if (srcs[i].fd >= 0)
      close(srcs[i].fd);
    mu_free(srcs[i].path);
    mu_line_prefixer_release(&srcs[i].lines);
  }
  mu_free(srcs);
  mu_free(dir);
  mu_app_status_release(&st);
  return rc;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path) == 0 || errno == ENOENT ? 0 : -1;
}

static int local_list(const struct mu_cfg *cfg, struct mu_app_list_entry **out, size_t *n,
                      struct mu_buf *err)
{
  return mu_local_list(cfg, out, n, 0, err);
}

static int local_prune(double before, struct mu_strvec *removed, struct mu_buf *err)
{
  char *root = state_root();
  int rc = state_root_check(root, 0, err);
  if (rc != 0) {
    mu_free(root);
    return rc;
  }
  DIR *d = opendir(root);
  if (d == NULL) {
    mu_free(root);
    return 0;
  }
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.')
      continue;
    struct mu_buf ignore = MU_BUF_INIT(SIZE_MAX);
    cJSON *o = NULL;
    char *dir = NULL;
    enum mu_job_state state = MU_STATE_UNKNOWN;
    if (load_state(e->d_name, NULL, &o, &dir, &ignore) == 0 &&
        mu_job_state_parse(js(o, "state"), &state) == 0 && mu_job_state_is_terminal(state) &&
        mu_json_get_double(o, "started_at", 0) < before) {
      if (nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0) {
        mu_buf_printf(err, "cannot remove '%s': %s", dir, strerror(errno));
        rc = MU_EIO;
      } else {
        mu_strvec_push(removed, e->d_name);
      }
    }
    cJSON_Delete(o);
    mu_free(dir);
    mu_buf_release(&ignore);
  }
  closedir(d);
  mu_free(root);
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
    .caps = MU_SCHED_FOLLOW,
    .rdzv_macro = "127.0.0.1:PORT of the job's own musterd, started with the job on a free port "
                  "(muster status shows it), or the -cfg rdzv=HOST:PORT given",
    .runopts = local_runopts,
    .dryrun = local_dryrun,
    .schedule = local_schedule,
    .describe = local_describe,
    .list = local_list,
    .cancel_existing = local_cancel,
    .log_open = local_log,
    .dryrun_free = local_dryrun_free,
    .app_spec = local_app_spec,
    .prune = local_prune,
};
