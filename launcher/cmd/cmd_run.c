/* muster run: component -> job spec -> dryrun -> schedule, then (local, or --wait) follow the
 * job to its end. Exit: 0 only when the job succeeded (or was submitted without waiting);
 * 1 when it failed or was cancelled; 2 for a usage error.
 */
#include <stdint.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "muster/mu.h"

#include "alloc.h"
#include "cmd_util.h"
#include "cmds.h"
#include "component.h"
#include "config.h"
#include "http_client.h"
#include "log.h"
#include "opts.h"
#include "sched.h"
#include "workspace.h"

static const char usage_text[] =
    "muster run [-s SCHED] [-cfg k=v,...] [--dryrun] [--wait] [--log] [--json] COMPONENT "
    "[ARGS] [-- SCRIPT ARGS]\n\n"
    "COMPONENT is a builtin (see 'muster builtins'), a path to a YAML file (./mine.yaml) or a\n"
    "TorchX component in Python (FILE.py:FUNCTION, run with python3 and muster's TorchX shim);\n"
    "'muster run COMPONENT --help' lists its arguments. Defaults come from .musterconfig\n"
    "([cli:run] scheduler=/component=/workspace=, [<scheduler>] runopts, [component:<name>]\n"
    "arguments)";

static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
  got_signal = sig;
}

static double now_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(long ms)
{
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Counts replicas by state into a short summary ("2 running, 1 succeeded"). */
static void summarize(const struct mu_app_status *st, char *out, size_t n)
{
  size_t pend = 0, run = 0, ok = 0, bad = 0, other = 0;
  for (size_t i = 0; i < st->nreplicas; i++) {
    switch (st->replicas[i].state) {
    case MU_STATE_PENDING:
    case MU_STATE_SUBMITTED:
      pend++;
      break;
    case MU_STATE_RUNNING:
      run++;
      break;
    case MU_STATE_SUCCEEDED:
      ok++;
      break;
    case MU_STATE_FAILED:
      bad++;
      break;
    default:
      other++;
    }
  }
  snprintf(out, n, "%zu replica%s: %zu pending, %zu running, %zu succeeded, %zu failed%s",
           st->nreplicas, st->nreplicas == 1 ? "" : "s", pend, run, ok, bad,
           other ? ", others cancelled/unknown" : "");
}

/* Streams every replica's log in a child (through the backend's log_open) into a pipe whose
 * read end goes to *fd: wait_job() copies it to stderr between redraws of its progress line. */
static pid_t start_log_stream(const struct mu_sched_ops *s, const char *app_id,
                              const struct mu_cfg *cfg, int *fd)
{
  int p[2];
  *fd = -1;
  if (s->log_open == NULL || pipe(p) != 0)
    return -1;
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid > 0)
    setpgid(pid, pid); /* (both sides: no race) */
  if (pid < 0) {
    close(p[0]);
    close(p[1]);
    return -1;
  }
  if (pid > 0) {
    close(p[1]);
    fcntl(p[0], F_SETFD, FD_CLOEXEC);
    *fd = p[0];
    return pid;
  }
  /* Its own process group: the log readers it starts (kubectl logs -f per pod) stop with it. */
  setpgid(0, 0);
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, SIG_DFL);
  close(p[0]);
  struct mu_buf err = MU_BUF_INIT(SIZE_MAX);
  struct mu_log_opts o = {.stream = MU_STREAM_COMBINED, .follow = 1};
  int rc = s->log_open(app_id, NULL, -1, &o, p[1], cfg, &err);
  _exit(rc == 0 ? 0 : 1);
}

/* The terminal's width in columns (80 when unknown). */
static int term_cols(void)
{
  struct winsize ws;
  if (ioctl(2, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
    return ws.ws_col;
  return 80;
}

/* Copies what the log stream has (waiting at most ms for it) to stderr, whole lines only
 * while a progress line is on screen (*shown): that line is cleared first and redrawn by the
 * caller. At EOF the stream is closed (*fd = -1). */
static void pump_logs(int *fd, struct mu_buf *pending, int ms, int *shown)
{
  struct pollfd p = {*fd, POLLIN, 0};
  if (*fd < 0 || poll(&p, 1, ms) <= 0)
    return;
  char b[16384];
  ssize_t n = read(*fd, b, sizeof(b));
  if (n < 0 && errno == EINTR)
    return;
  if (n <= 0) {
    close(*fd);
    *fd = -1;
  } else {
    mu_buf_append(pending, b, (size_t)n);
  }
  size_t upto = pending->len;
  if (*fd >= 0) { /* keep an unfinished line for later */
    while (upto > 0 && pending->data[upto - 1] != '\n')
      upto--;
  }
  if (upto == 0)
    return;
  if (*shown) {
    fputs("\r\033[K", stderr);
    *shown = 0;
  }
  fwrite(pending->data, 1, upto, stderr);
  fflush(stderr);
  memmove(pending->data, pending->data + upto, pending->len - upto);
  pending->len -= upto;
  pending->data[pending->len] = '\0';
}

/* Follows the job until it is terminal; returns the exit status. */
static int wait_job(const struct mu_sched_ops *s, const char *app_id, const char *handle,
                    const struct mu_cfg *cfg, int stream_logs)
{
  int tty = isatty(2);
  int logfd = -1, shown = 0;
  struct mu_buf pending = MU_BUF_INIT(SIZE_MAX);
  double t0 = now_s();
  char last[512] = "", last_reason[1024] = "";
  char rdzv[256] = "";
  double last_rdzv = -1;
  enum mu_job_state last_state = MU_STATE_UNSUBMITTED;
  long delay = 2;
  int cancelled = 0, ui_said = 0;
  int rc = 1;
  pid_t logger = stream_logs ? start_log_stream(s, app_id, cfg, &logfd) : -1;
  for (;;) {
    if (got_signal && !cancelled) {
      cancelled = 1;
      if (shown)
        fprintf(stderr, "\r\033[K");
      shown = 0;
      fprintf(stderr, "muster: %s: cancelling %s\n",
              got_signal == SIGINT ? "interrupted" : "signalled", handle);
      struct mu_buf err = MU_BUF_INIT(SIZE_MAX);
      if (mu_sched_cancel(s, app_id, cfg, &err) != 0)
        mu_error("cannot cancel %s: %s", handle, mu_buf_str(&err));
      mu_buf_release(&err);
    }
    struct mu_app_status st;
    struct mu_buf err = MU_BUF_INIT(SIZE_MAX);
    int r = mu_sched_describe(s, app_id, cfg, &st, &err);
    if (r != 0) {
      mu_error("cannot follow %s: %s", handle, mu_buf_str(&err));
      mu_buf_release(&err);
      rc = 1;
      break;
    }
    mu_buf_release(&err);
    if (st.ui_url != NULL && !ui_said++) { /* once, when the job's musterd is up */
      fprintf(stderr, "%smuster: %s: status page %s\n", shown ? "\r\033[K" : "", app_id, st.ui_url);
      shown = 0;
    }
    char sum[512];
    summarize(&st, sum, sizeof(sum));
    double el = now_s() - t0;
    if (st.rdzv_endpoint != NULL && st.state == MU_STATE_RUNNING && el - last_rdzv >= 0.5) {
      last_rdzv = el;
      mu_cli_rdzv_line(&st, rdzv, sizeof(rdzv));
    }
    size_t sl = strlen(sum);
    snprintf(sum + sl, sizeof(sum) - sl, "%s", rdzv);
    if (tty) {
      char line[1024];
      int cols = term_cols();
      snprintf(line, sizeof(line), "%s %s  [%.1fs] %s", app_id, mu_job_state_name(st.state), el,
               sum);
      if (cols - 1 < (int)sizeof(line))
        line[cols - 1] = '\0'; /* one line, or the next \r redraw leaves a copy behind */
      fprintf(stderr, "\r\033[K%s", line);
      fflush(stderr);
      shown = 1;
    } else if (strcmp(sum, last) != 0 || st.state != last_state) {
      fprintf(stderr, "muster: %s %s [%.1fs] %s\n", app_id, mu_job_state_name(st.state), el, sum);
    }
    snprintf(last, sizeof(last), "%s", sum);
    last_state = st.state;
    if (st.reason != NULL && strcmp(st.reason, last_reason) != 0) { /* why it is held up */
      fprintf(stderr, "%smuster: %s cannot make progress: %s\n", shown ? "\r\033[K" : "", handle,
              st.reason);
      shown = 0;
    }
    snprintf(last_reason, sizeof(last_reason), "%s", st.reason ? st.reason : "");
    int done = mu_job_state_is_terminal(st.state) || st.state == MU_STATE_UNKNOWN;
    if (done) {
      if (shown)
        fprintf(stderr, "\n");
      shown = 0;
      if (logger > 0) { /* the stream ends with the job: copy it to its end */
        while (logfd >= 0)
          pump_logs(&logfd, &pending, 1000, &shown);
        int ws;
        while (waitpid(logger, &ws, 0) < 0 && errno == EINTR)
          ;
        logger = -1;
      }
      fprintf(stderr, "muster: %s finished: %s after %.1fs", handle, mu_job_state_name(st.state),
              el);
      if (st.msg && st.msg[0])
        fprintf(stderr, " (%s)", st.msg);
      fprintf(stderr, "\n");
      for (size_t i = 0; i < st.nreplicas; i++) {
        const struct mu_replica_status *rp = &st.replicas[i];
        if (rp->state == MU_STATE_FAILED)
          fprintf(stderr, "muster:   %s/%ld FAILED with exit code %d; see 'muster log %s/%s/%ld'\n",
                  rp->role, rp->replica_id, rp->exit_code, handle, rp->role, rp->replica_id);
      }
      if (st.root_cause != NULL)
        fprintf(stderr, "muster: root cause: %s\n", st.root_cause);
      rc = st.state == MU_STATE_SUCCEEDED ? 0 : 1;
      mu_app_status_release(&st);
      break;
    }
    mu_app_status_release(&st);
    long nap = tty && el > 1.0 ? 100 : delay;
    if (logfd >= 0)
      pump_logs(&logfd, &pending, (int)nap, &shown);
    else
      sleep_ms(nap);
    if (delay < 100)
      delay *= 2;
  }
  if (logger > 0) {
    kill(-logger, SIGTERM);
    int ws;
    waitpid(logger, &ws, 0);
  }
  if (logfd >= 0)
    close(logfd);
  mu_buf_release(&pending);
  return rc;
}

/* Is `--help` among the component arguments (before any `--`)? */
static int wants_help(int argc, char **argv)
{
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--") == 0)
      return 0;
    if (strcmp(argv[i], "--help") == 0)
      return 1;
  }
  return 0;
}

/* Adds the runner-level env to every role (TorchX's TORCHX_JOB_ID). */
static void add_runner_env(struct mu_app *app, const char *sched)
{
  char *job = mu_asprintf("%s://%s/${app_id}", sched, MU_SESSION);
  for (size_t i = 0; i < app->nroles; i++)
    mu_kvlist_set(&app->roles[i].env, "MUSTER_JOB_ID", job);
  mu_free(job);
}

/* --dryrun: the job spec and the scheduler's request, as text or as one JSON object. */
static void print_dryrun(const char *sched, const struct mu_app *app, const struct mu_dryrun *req,
                         int json)
{
  struct mu_buf js = MU_BUF_INIT(SIZE_MAX);
  mu_app_to_json(app, &js);
  if (json) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "scheduler", sched);
    cJSON_AddStringToObject(o, "app_id", req->app_id ? req->app_id : "");
    cJSON_AddItemToObject(o, "app", cJSON_Parse(mu_buf_str(&js)));
    cJSON_AddStringToObject(o, "request", req->text ? req->text : "");
    char *t = cJSON_Print(o);
    printf("%s\n", t);
    cJSON_free(t);
    cJSON_Delete(o);
  } else {
    printf("=== APPLICATION ===\n%s\n", mu_buf_str(&js));
    if (mu_app_mentions(app, "${rdzv_endpoint}") && req->sched && req->sched->rdzv_macro)
      printf("(${rdzv_endpoint} is the rendezvous: %s)\n", req->sched->rdzv_macro);
    printf("\n=== SCHEDULER REQUEST ===\n%s", req->text ? req->text : "");
    if (req->text && req->text[0] && req->text[strlen(req->text) - 1] != '\n')
      printf("\n");
  }
  mu_buf_release(&js);
}

/* SIGINT, SIGTERM and SIGHUP set got_signal: wait_job() then cancels the job. */
static void catch_signals(void)
{
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
}

/* TorchX's `torchx run` options muster does not take, each refused by name with the reason. */
static int refused_option(const struct mu_opt *opt, const char *value)
{
  (void)value;
  mu_error("--%s: %s", opt->long_name, (const char *)opt->cb_data);
  return MU_EUSAGE;
}

/* The run option among a component's arguments (before any `--`), as the user wrote it, or
 * NULL: the words of opts, and -s/-cfg. */
static const char *misplaced_run_option(const struct mu_opt *opts, int argc, char **argv)
{
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--") == 0)
      return NULL;
    if (strcmp(a, "-s") == 0 || strcmp(a, "-cfg") == 0 || strncmp(a, "-cfg=", 5) == 0)
      return a;
    if (strncmp(a, "--", 2) != 0)
      continue;
    char name[64];
    snprintf(name, sizeof(name), "%.*s", (int)strcspn(a + 2, "="), a + 2);
    for (const struct mu_opt *o = opts; o->type != MU_OPT_T_END; o++)
      if (o->long_name != NULL && mu_opt_name_eq(o->long_name, name))
        return a;
  }
  return NULL;
}

int cmd_run(int argc, char **argv)
{
  const char *sched_name = NULL;
  const char *cfgstr = NULL;
  int dryrun = 0, wait = 0, json = 0, log = 0, no_log = 0, tee_logs = 0;
  const char *workspace = NULL;
  struct mu_opt opts[] = {
      MU_OPT_STRING('s', "scheduler", &sched_name, "SCHED",
                    "the scheduler: local (default), kubernetes, slurm"),
      MU_OPT_STRING_F(0, "cfg", &cfgstr, "K=V,...",
                      "scheduler options, also as -cfg (see 'muster runopts SCHED')",
                      MU_OPT_SINGLE_DASH),
      MU_OPT_BOOL(0, "dryrun", &dryrun,
                  "print the job spec and the scheduler request; submit nothing"),
      MU_OPT_BOOL(0, "wait", &wait, "wait for the job to finish (always on for local)"),
      MU_OPT_BOOL(0, "log", &log,
                  "stream the replicas' logs to stderr while waiting (default for local)"),
      MU_OPT_BOOL(0, "no-log", &no_log, "do not stream a local job's logs"),
      MU_OPT_BOOL(0, "json", &json, "--dryrun: print JSON; otherwise the handle as JSON"),
      MU_OPT_STRING_F(0, "scheduler-args", &cfgstr, "K=V,...", "TorchX's name of -cfg",
                      MU_OPT_HIDDEN),
      MU_OPT_BOOL(0, "tee-logs", &tee_logs,
                  "accepted (TorchX): --log lines always carry their role/replica prefix"),
      MU_OPT_CALLBACK(
          0, "parent-run-id", "ID", "refused: muster has no experiment tracker", refused_option,
          (void *)"muster has no experiment tracker (TorchX's torchx.tracker); drop it", 0),
      MU_OPT_CALLBACK(0, "stdin", NULL, "refused: give the options on the command line",
                      refused_option,
                      (void *)"muster reads no TorchXRunArgs JSON; give the options on the "
                              "command line",
                      MU_OPT_NOARG),
      MU_OPT_CALLBACK(0, "buck-target", "T", "refused: muster does not build with buck",
                      refused_option, (void *)"muster does not build with buck; drop it", 0),
      MU_OPT_STRING(0, "workspace", &workspace, "DIR",
                    "layer DIR's (or file://DIR's) files on each role's image, push it to -cfg "
                    "image_repo and run it by digest (buildah; DIR/.dockerignore excludes); \"\": "
                    "none"),
      MU_OPT_END(),
  };
  struct mu_config file = MU_CONFIG_INIT;
  struct mu_cfg cfg = {MU_KVLIST_INIT};
  struct mu_component *comp = NULL;
  struct mu_app *app = NULL;
  struct mu_dryrun req = {0};
  struct mu_buf err = MU_BUF_INIT(SIZE_MAX);
  int rc = 0;
  /* The run options end at the first word that is not one of them: the component, or (with
   * [cli:run] component=) the component's first argument, as TorchX; a misspelt run option is
   * still an error. */
  int n =
      mu_opts_parse(opts, argc, argv, MU_OPTS_STOP_AT_NONOPT | MU_OPTS_STOP_AT_UNKNOWN, usage_text);
  if (n == MU_OPTS_HELP)
    goto out;
  if (n < 0) {
    rc = MU_EXIT_USAGE;
    goto out;
  }
  if (mu_config_load(&file, &err) != 0) {
    mu_error("%s", mu_buf_str(&err));
    rc = MU_EXIT_USAGE;
    goto out;
  }
  if (sched_name == NULL) {
    const struct mu_config_entry *e = mu_config_find(&file, "cli:run", "scheduler");
    if (e != NULL && e->value != NULL)
      sched_name = e->value;
  }
  const struct mu_sched_ops *s = sched_name ? mu_cli_sched(sched_name) : mu_sched_at(0);
  if (s == NULL) {
    rc = MU_EXIT_USAGE;
    goto out;
  }
  const char *comp_name = NULL;
  int cargc = argc - n;
  char **cargv = argv + n;
  if (cargc > 0 && cargv[0][0] != '-') {
    comp_name = cargv[0];
    cargc--;
    cargv++;
  } else {
    const struct mu_config_entry *e = mu_config_find(&file, "cli:run", "component");
    if (e != NULL && e->value != NULL)
      comp_name = e->value;
  }
  if (comp_name == NULL) {
    mu_error("no component given; write 'muster run COMPONENT [ARGS]' (see 'muster builtins') "
             "or set [cli:run] component= in .musterconfig");
    rc = MU_EXIT_USAGE;
    goto out;
  }
  if (mu_component_load(comp_name, &comp, &err) != 0) {
    mu_error("%s", mu_buf_str(&err));
    rc = MU_EXIT_USAGE;
    goto out;
  }
  if (wants_help(cargc, cargv)) {
    struct mu_buf h = MU_BUF_INIT(SIZE_MAX);
    mu_component_help(comp, &h);
    fputs(mu_buf_str(&h), stdout);
    mu_buf_release(&h);
    goto out;
  }
  rc = mu_cli_cfg(s, cfgstr, &file, &cfg);
  if (rc != 0)
    goto out;
  if (mu_component_build(comp, cargc, cargv, &file, &app, &err) != 0) {
    const char *misplaced = misplaced_run_option(opts, cargc, cargv);
    if (misplaced != NULL)
      mu_error("'%s' is an option of muster run, not of %s: put it before the component (muster "
               "run %s %s ...)",
               misplaced, comp_name, misplaced, comp_name);
    else
      mu_error("%s", mu_buf_str(&err));
    rc = MU_EXIT_USAGE;
    goto out;
  }
  add_runner_env(app, s->name);
  if (workspace == NULL && s == &mu_sched_kubernetes && /* the scheduler that runs images */
      mu_config_find(&file, "cli:run", "workspace") != NULL)
    workspace = mu_config_find(&file, "cli:run", "workspace")->value;
  if (workspace != NULL &&
      (rc = mu_workspace_build(app, workspace, mu_cfg_get(&cfg, "image_repo"), &err)) != 0) {
    mu_error("%s", mu_buf_str(&err));
    rc = rc == MU_EINVAL ? MU_EXIT_USAGE : MU_EXIT_FAILED; /* bad input, or the build failed */
    goto out;
  }
  if (mu_app_validate(app, &err) != 0) {
    mu_error("invalid job spec from %s: %s", comp_name, mu_buf_str(&err));
    rc = MU_EXIT_USAGE;
    goto out;
  }
  if (mu_sched_dryrun(s, app, &cfg, &req, &err) != 0) {
    mu_error("%s", mu_buf_str(&err));
    rc = MU_EXIT_USAGE;
    goto out;
  }
  if (req.note != NULL)
    fprintf(stderr, "muster: note: %s\n", req.note);
  if (dryrun) {
    if (req.warning != NULL)
      mu_warn("%s", req.warning);
    print_dryrun(s->name, app, &req, json);
    goto out;
  }
  catch_signals(); /* from here a signal cancels the job instead of killing us */
  if (mu_sched_schedule(&req, &err) != 0) {
    mu_error("cannot submit to %s: %s", s->name, mu_buf_str(&err));
    rc = MU_EXIT_FAILED;
    goto out;
  }
  char *handle = mu_asprintf("%s://%s/%s", s->name, MU_SESSION, req.app_id);
  if (json)
    printf("{\"app_handle\":\"%s\",\"app_id\":\"%s\"}\n", handle, req.app_id);
  else
    printf("%s\n", handle);
  fflush(stdout);
  if (s == &mu_sched_local || wait)
    rc = wait_job(s, req.app_id, handle, &cfg, (log || s == &mu_sched_local) && !no_log);
  mu_free(handle);
out:
  mu_dryrun_release(&req);
  mu_app_free(app);
  mu_component_free(comp);
  mu_cfg_release(&cfg);
  mu_config_release(&file);
  mu_buf_release(&err);
  return rc;
}
