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
#include <poll.h>
#include <sys/ioctl.h>
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

/* Streams every replica's log through a log reader (its own process group: Ctrl-C is ours, and
 * it stops with the job): wait_job() copies its pipe to stderr between redraws of its progress
 * line. Returns: 0, or -1 when the backend has no logs or no reader could start (r unset). */
static int start_log_stream(const struct mu_sched_ops *s, const char *app_id,
                            const struct mu_cfg *cfg, struct mu_log_reader *r)
{
  struct mu_log_query q = {app_id, NULL, -1,  {.stream = MU_STREAM_COMBINED, .follow = 1},
                           cfg,    NULL, NULL};
  struct mu_buf ignore = MU_BUF_INIT(SIZE_MAX);
  int rc =
      s->log_open != NULL ? mu_log_reader_start(r, s, &q, MU_LOG_READER_OWN_GROUP, &ignore) : -1;
  mu_buf_release(&ignore);
  return rc == 0 ? 0 : -1;
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

/* ---------------------------------------------------------------------------------------------
 * Following a job to its end: a progress line, its logs, a cancel on a signal, the summary
 */

struct follow {
  const struct mu_sched_ops *s;
  const char *app_id, *handle;
  const struct mu_cfg *cfg;
  int tty;                   /* stderr is a terminal: one progress line, redrawn */
  int shown;                 /* that line is on screen */
  int cancelled;             /* a signal came and the job was cancelled */
  int ui_said;               /* the job's status page was printed */
  struct mu_log_reader logs; /* the replicas' logs (pid -1: none) */
  struct mu_buf pending;     /* an unfinished line of them */
  double t0, last_rdzv;      /* when we started following; when the round was last read */
  char last[512], rdzv[256]; /* the last summary printed; the round's line */
  char last_reason[1024];    /* why the job was last said to be held up ("" none) */
  enum mu_job_state last_state;
};

/* The first signal cancels the job (once): a terminal's Ctrl-C, a SIGTERM. */
static void cancel_on_signal(struct follow *f)
{
  if (!got_signal || f->cancelled)
    return;
  f->cancelled = 1;
  if (f->shown)
    fprintf(stderr, "\r\033[K");
  f->shown = 0;
  fprintf(stderr, "muster: %s: cancelling %s\n", got_signal == SIGINT ? "interrupted" : "signalled",
          f->handle);
  struct mu_buf err = MU_BUF_INIT(SIZE_MAX);
  if (mu_sched_cancel(f->s, f->app_id, f->cfg, &err) != 0)
    mu_error("cannot cancel %s: %s", f->handle, mu_buf_str(&err));
  mu_buf_release(&err);
}

/* What changed that deserves a line of its own: the job's status page (once, when its musterd is
 * up) and why it cannot make progress (each time the reason changes). */
static void say_news(struct follow *f, const struct mu_app_status *st)
{
  if (st->ui_url != NULL && !f->ui_said++) {
    fprintf(stderr, "%smuster: %s: status page %s\n", f->shown ? "\r\033[K" : "", f->app_id,
            st->ui_url);
    f->shown = 0;
  }
  if (st->reason != NULL && strcmp(st->reason, f->last_reason) != 0) {
    fprintf(stderr, "%smuster: %s cannot make progress: %s\n", f->shown ? "\r\033[K" : "",
            f->handle, st->reason);
    f->shown = 0;
  }
  snprintf(f->last_reason, sizeof(f->last_reason), "%s", st->reason ? st->reason : "");
}

/* The job's state and replica counts (with its rendezvous round, read at most twice a second):
 * redrawn in place on a terminal, else a line each time it changes. */
static void show_progress(struct follow *f, const struct mu_app_status *st, double el)
{
  char sum[512];
  summarize(st, sum, sizeof(sum));
  if (st->rdzv_endpoint != NULL && st->state == MU_STATE_RUNNING && el - f->last_rdzv >= 0.5) {
    f->last_rdzv = el;
    mu_cli_rdzv_line(st, f->rdzv, sizeof(f->rdzv));
  }
  size_t sl = strlen(sum);
  snprintf(sum + sl, sizeof(sum) - sl, "%s", f->rdzv);
  if (f->tty) {
    char line[1024];
    int cols = term_cols();
    snprintf(line, sizeof(line), "%s %s  [%.1fs] %s", f->app_id, mu_job_state_name(st->state), el,
             sum);
    if (cols - 1 < (int)sizeof(line))
      line[cols - 1] = '\0'; /* one line, or the next \r redraw leaves a copy behind */
    fprintf(stderr, "\r\033[K%s", line);
    fflush(stderr);
    f->shown = 1;
  } else if (strcmp(sum, f->last) != 0 || st->state != f->last_state) {
    fprintf(stderr, "muster: %s %s [%.1fs] %s\n", f->app_id, mu_job_state_name(st->state), el, sum);
  }
  snprintf(f->last, sizeof(f->last), "%s", sum);
  f->last_state = st->state;
}

/* The job ended: the rest of its logs, then how it ended, the failed replicas with the command
 * that shows each one's log, and the root cause. Returns: the exit code (0: SUCCEEDED). */
static int finish(struct follow *f, const struct mu_app_status *st, double el)
{
  if (f->shown)
    fprintf(stderr, "\n");
  f->shown = 0;
  if (f->logs.pid > 0) { /* the stream ends with the job: copy it to its end */
    while (f->logs.fd >= 0)
      pump_logs(&f->logs.fd, &f->pending, 1000, &f->shown);
    mu_log_reader_finish(&f->logs, 0, NULL);
  }
  fprintf(stderr, "muster: %s finished: %s after %.1fs", f->handle, mu_job_state_name(st->state),
          el);
  if (st->msg && st->msg[0])
    fprintf(stderr, " (%s)", st->msg);
  fprintf(stderr, "\n");
  for (size_t i = 0; i < st->nreplicas; i++) {
    const struct mu_replica_status *rp = &st->replicas[i];
    if (rp->state == MU_STATE_FAILED)
      fprintf(stderr, "muster:   %s/%ld FAILED with exit code %d; see 'muster log %s/%s/%ld'\n",
              rp->role, rp->replica_id, rp->exit_code, f->handle, rp->role, rp->replica_id);
  }
  if (st->root_cause != NULL) {
    fprintf(stderr, "muster: root cause: %s\n", st->root_cause);
    if (strstr(st->root_cause, "No module named") != NULL) /* often the wrong python3 */
      fprintf(stderr, "muster: hint: a .py script or -m runs under --python, by default the "
                      "first python3 on PATH; if the module is installed for another "
                      "interpreter, name it (Debian's python3-torch: --python /usr/bin/python3)\n");
  }
  return st->state == MU_STATE_SUCCEEDED ? 0 : 1;
}

/* Follows the job until it is terminal, its logs streamed with stream_logs. Returns: the exit
 * status. */
static int wait_job(const struct mu_sched_ops *s, const char *app_id, const char *handle,
                    const struct mu_cfg *cfg, int stream_logs)
{
  struct follow f = {.s = s,
                     .app_id = app_id,
                     .handle = handle,
                     .cfg = cfg,
                     .tty = isatty(2),
                     .logs = {-1, -1, -1, 0},
                     .pending = MU_BUF_INIT(SIZE_MAX),
                     .t0 = now_s(),
                     .last_rdzv = -1,
                     .last_state = MU_STATE_UNSUBMITTED};
  long delay = 2;
  int rc = 1;
  if (stream_logs)
    start_log_stream(s, app_id, cfg, &f.logs);
  for (;;) {
    cancel_on_signal(&f);
    struct mu_app_status st;
    struct mu_buf err = MU_BUF_INIT(SIZE_MAX);
    int r = mu_sched_describe(s, app_id, cfg, &st, &err);
    if (r != 0)
      mu_error("cannot follow %s: %s", handle, mu_buf_str(&err));
    mu_buf_release(&err);
    if (r != 0)
      break;
    say_news(&f, &st);
    double el = now_s() - f.t0;
    show_progress(&f, &st, el);
    int done = mu_job_state_is_terminal(st.state) || st.state == MU_STATE_UNKNOWN;
    if (done)
      rc = finish(&f, &st, el);
    mu_app_status_release(&st);
    if (done)
      break;
    long nap = f.tty && el > 1.0 ? 100 : delay;
    if (f.logs.fd >= 0)
      pump_logs(&f.logs.fd, &f.pending, (int)nap, &f.shown);
    else
      sleep_ms(nap);
    if (delay < 100)
      delay *= 2;
  }
  mu_log_reader_finish(&f.logs, 1, NULL); /* (a reader already finished is nothing) */
  mu_buf_release(&f.pending);
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

/* text as YAML comments under a heading: "# " before every line. */
static void print_commented(const char *heading, const char *text)
{
  printf("# %s:\n# ", heading);
  for (const char *p = text; *p; p++) {
    putchar(*p);
    if (*p == '\n' && p[1] != '\0')
      printf("# ");
  }
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
    if (req->objects != NULL)
      cJSON_AddStringToObject(o, "objects", req->objects);
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
    if (req->objects != NULL) /* as comments: the request stays one YAML document */
      print_commented("created with the job and owned by it (--json: \"objects\")", req->objects);
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

/* ---------------------------------------------------------------------------------------------
 * The steps of a run: each returns RUN_NEXT to go on, or the exit code
 */

#define RUN_NEXT (-1)

struct run {
  /* the options */
  const char *sched_name, *cfgstr, *workspace;
  int dryrun, wait, json, log, no_log, tee_logs;
  const struct mu_opt *opts;
  /* what the steps make */
  const struct mu_sched_ops *s;
  struct mu_config file;
  struct mu_cfg cfg;
  const char *comp_name;
  int cargc; /* the component's arguments */
  char **cargv;
  struct mu_component *comp;
  struct mu_app *app;
  struct mu_dryrun req;
  struct mu_buf err;
};

/* The config files, and the scheduler from -s or [cli:run] scheduler=. */
static int step_scheduler(struct run *r)
{
  if (mu_config_load(&r->file, &r->err) != 0) {
    mu_error("%s", mu_buf_str(&r->err));
    return MU_EXIT_USAGE;
  }
  if (r->sched_name == NULL) {
    const struct mu_config_entry *e = mu_config_find(&r->file, "cli:run", "scheduler");
    if (e != NULL && e->value != NULL)
      r->sched_name = e->value;
  }
  r->s = r->sched_name ? mu_cli_sched(r->sched_name) : mu_sched_at(0);
  return r->s != NULL ? RUN_NEXT : MU_EXIT_USAGE;
}

/* The component: the first word, or [cli:run] component= (then every word is its argument);
 * with --help among its arguments, its help is printed and the run ends. */
static int step_component(struct run *r)
{
  if (r->cargc > 0 && r->cargv[0][0] != '-') {
    r->comp_name = r->cargv[0];
    r->cargc--;
    r->cargv++;
  } else {
    const struct mu_config_entry *e = mu_config_find(&r->file, "cli:run", "component");
    if (e != NULL && e->value != NULL)
      r->comp_name = e->value;
  }
  if (r->comp_name == NULL && r->cargc > 0) { /* an option run does not know, and no component */
    mu_error("unknown option '%s' for muster run (its options: 'muster run -h'); the component "
             "comes after them: 'muster run [OPTIONS] COMPONENT [ARGS]' (see 'muster builtins')",
             r->cargv[0]);
    return MU_EXIT_USAGE;
  }
  if (r->comp_name == NULL) {
    mu_error("no component given; write 'muster run COMPONENT [ARGS]' (see 'muster builtins') "
             "or set [cli:run] component= in .musterconfig");
    return MU_EXIT_USAGE;
  }
  if (mu_component_load(r->comp_name, &r->comp, &r->err) != 0) {
    mu_error("%s", mu_buf_str(&r->err));
    return MU_EXIT_USAGE;
  }
  if (!wants_help(r->cargc, r->cargv))
    return RUN_NEXT;
  struct mu_buf h = MU_BUF_INIT(SIZE_MAX);
  mu_component_help(r->comp, &h);
  fputs(mu_buf_str(&h), stdout);
  mu_buf_release(&h);
  return 0;
}

/* --workspace: the image built and pushed, or with --dryrun what would be (on stderr). */
static int workspace(struct run *r)
{
  const char *repo = mu_cfg_get(&r->cfg, "image_repo");
  if (!r->dryrun)
    return mu_workspace_build(r->app, r->workspace, repo, &r->err);
  struct mu_buf note = MU_BUF_INIT(SIZE_MAX);
  int rc = mu_workspace_plan(r->app, r->workspace, repo, &note, &r->err);
  if (rc == 0 && note.len)
    fprintf(stderr, "muster: note: %s\n", mu_buf_str(&note));
  mu_buf_release(&note);
  return rc;
}

/* The scheduler's cfg and the job spec: the component built with its arguments, the runner's
 * env, the workspace's image, validated. */
static int step_job(struct run *r)
{
  int rc = mu_cli_cfg(r->s, r->cfgstr, &r->file, &r->cfg);
  if (rc != 0)
    return rc;
  if (mu_component_build(r->comp, r->cargc, r->cargv, &r->file, &r->app, &r->err) != 0) {
    const char *misplaced = misplaced_run_option(r->opts, r->cargc, r->cargv);
    if (misplaced != NULL)
      mu_error("'%s' is an option of muster run, not of %s: put it before the component (muster "
               "run %s %s ...)",
               misplaced, r->comp_name, misplaced, r->comp_name);
    else
      mu_error("%s", mu_buf_str(&r->err));
    return MU_EXIT_USAGE;
  }
  add_runner_env(r->app, r->s->name);
  const struct mu_config_entry *ws = mu_config_find(&r->file, "cli:run", "workspace");
  if (r->workspace == NULL && (r->s->caps & MU_SCHED_IMAGES) && ws != NULL)
    r->workspace = ws->value;
  rc = r->workspace != NULL ? workspace(r) : 0;
  if (rc != 0) {
    mu_error("%s", mu_buf_str(&r->err));
    return rc == MU_EINVAL ? MU_EXIT_USAGE : MU_EXIT_FAILED; /* bad input, or the build failed */
  }
  if (mu_app_validate(r->app, &r->err) != 0) {
    mu_error("invalid job spec from %s: %s", r->comp_name, mu_buf_str(&r->err));
    return MU_EXIT_USAGE;
  }
  return RUN_NEXT;
}

/* The endpoint after --rdzv_endpoint / --rdzv-endpoint (or =VALUE) in one word or in a bash -c
 * line (TorchX's components), into out; "" when there is none. */
static void rdzv_flag_value(const char *arg, char *out, size_t n)
{
  static const char *const flags[] = {"--rdzv_endpoint", "--rdzv-endpoint", NULL};
  out[0] = '\0';
  for (size_t i = 0; flags[i] != NULL && out[0] == '\0'; i++) {
    const char *f = strstr(arg, flags[i]);
    if (f == NULL)
      continue;
    f += strlen(flags[i]);
    if (*f != '=' && *f != ' ' && *f != '\0')
      continue;
    f += *f != '\0';
    size_t len = strcspn(f, " \t\n'\"");
    snprintf(out, n, "%.*s", (int)len, f);
  }
}

/* A role that names a fixed rendezvous server (the trn1 tutorial's etcd-server:2379) needs one
 * running there, which the job does not start: say so once per endpoint, with the command that
 * serves it on Kubernetes. Endpoints the scheduler fills (${...}) and loopback are left alone. */
static void note_fixed_rdzv(const struct mu_app *app)
{
  char said[256] = "";
  for (size_t i = 0; i < app->nroles; i++) {
    const struct mu_role *r = &app->roles[i];
    char ep[256] = "";
    for (size_t a = 0; a < r->args.n && ep[0] == '\0'; a++) {
      const char *w = r->args.v[a];
      if ((strcmp(w, "--rdzv_endpoint") == 0 || strcmp(w, "--rdzv-endpoint") == 0) &&
          a + 1 < r->args.n)
        snprintf(ep, sizeof(ep), "%s", r->args.v[a + 1]);
      else
        rdzv_flag_value(w, ep, sizeof(ep));
    }
    const char *colon = strrchr(ep, ':');
    if (ep[0] == '\0' || colon == NULL || strchr(ep, '$') != NULL || strcmp(ep, said) == 0 ||
        strncmp(ep, "127.", 4) == 0 || strncmp(ep, "localhost:", 10) == 0)
      continue;
    fprintf(stderr,
            "muster: note: role '%s' joins the rendezvous at %s, a server this job does not "
            "start: on Kubernetes, 'muster deploy rendezvous --name %.*s --port %s | kubectl "
            "apply -f -' serves it (etcd's v2 API, docs/kubernetes.md); elsewhere start musterd "
            "or etcd there\n",
            r->name, ep, (int)(colon - ep), ep, colon + 1);
    snprintf(said, sizeof(said), "%s", ep);
  }
}

/* The scheduler's request; with --dryrun it is printed and the run ends. */
static int step_dryrun(struct run *r)
{
  if (mu_sched_dryrun(r->s, r->app, &r->cfg, &r->req, &r->err) != 0) {
    mu_error("%s", mu_buf_str(&r->err));
    return MU_EXIT_USAGE;
  }
  if (r->req.note != NULL)
    fprintf(stderr, "muster: note: %s\n", r->req.note);
  note_fixed_rdzv(r->app);
  if (!r->dryrun)
    return RUN_NEXT;
  if (r->req.warning != NULL)
    mu_warn("%s", r->req.warning);
  print_dryrun(r->s->name, r->app, &r->req, r->json);
  return 0;
}

/* Submits, prints the handle, and follows the job when the scheduler's jobs run here or with
 * --wait. */
static int step_submit(struct run *r)
{
  catch_signals(); /* from here a signal cancels the job instead of killing us */
  if (mu_sched_schedule(&r->req, &r->err) != 0) {
    mu_error("cannot submit to %s: %s", r->s->name, mu_buf_str(&r->err));
    return MU_EXIT_FAILED;
  }
  char *handle = mu_asprintf("%s://%s/%s", r->s->name, MU_SESSION, r->req.app_id);
  if (r->json)
    printf("{\"app_handle\":\"%s\",\"app_id\":\"%s\"}\n", handle, r->req.app_id);
  else
    printf("%s\n", handle);
  fflush(stdout);
  int rc = 0, follow = (r->s->caps & MU_SCHED_FOLLOW) != 0;
  if (follow || r->wait)
    rc = wait_job(r->s, r->req.app_id, handle, &r->cfg, (r->log || follow) && !r->no_log);
  mu_free(handle);
  return rc;
}

typedef int run_step(struct run *r);
static run_step *const steps[] = {step_scheduler, step_component, step_job, step_dryrun,
                                  step_submit};

int cmd_run(int argc, char **argv)
{
  struct run r = {.file = MU_CONFIG_INIT, .cfg = {MU_KVLIST_INIT}, .err = MU_BUF_INIT(SIZE_MAX)};
  char sched_help[256];
  struct mu_opt opts[] = {
      MU_OPT_STRING('s', "scheduler", &r.sched_name, "SCHED",
                    mu_cli_sched_help(sched_help, sizeof(sched_help))),
      MU_OPT_STRING_F(0, "cfg", &r.cfgstr, "K=V,...",
                      "scheduler options, also as -cfg (see 'muster runopts SCHED')",
                      MU_OPT_SINGLE_DASH),
      MU_OPT_BOOL(0, "dryrun", &r.dryrun,
                  "print the job spec and the scheduler request; submit nothing"),
      MU_OPT_BOOL(0, "wait", &r.wait, "wait for the job to finish (always on for local)"),
      MU_OPT_BOOL(0, "log", &r.log,
                  "stream the replicas' logs to stderr while waiting (default for local)"),
      MU_OPT_BOOL(0, "no-log", &r.no_log, "do not stream a local job's logs"),
      MU_OPT_BOOL(0, "json", &r.json, "--dryrun: print JSON; otherwise the handle as JSON"),
      MU_OPT_STRING_F(0, "scheduler-args", &r.cfgstr, "K=V,...", "TorchX's name of -cfg",
                      MU_OPT_HIDDEN),
      MU_OPT_BOOL(0, "tee-logs", &r.tee_logs,
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
      MU_OPT_STRING(0, "workspace", &r.workspace, "DIR",
                    "layer DIR's (or file://DIR's) files on each role's image, push it to -cfg "
                    "image_repo and run it by digest (buildah; DIR/.dockerignore excludes); \"\": "
                    "none"),
      MU_OPT_END(),
  };
  /* The run options end at the first word that is not one of them: the component, or (with
   * [cli:run] component=) the component's first argument, as TorchX; a misspelt run option is
   * still an error. */
  int rc = RUN_NEXT,
      n = mu_opts_parse(opts, argc, argv, MU_OPTS_STOP_AT_NONOPT | MU_OPTS_STOP_AT_UNKNOWN,
                        usage_text);
  if (n == MU_OPTS_HELP)
    rc = 0;
  else if (n < 0)
    rc = MU_EXIT_USAGE;
  r.opts = opts;
  r.cargc = argc - (n > 0 ? n : 0);
  r.cargv = argv + (n > 0 ? n : 0);
  for (size_t i = 0; rc == RUN_NEXT && i < sizeof(steps) / sizeof(steps[0]); i++)
    rc = steps[i](&r);
  mu_dryrun_release(&r.req);
  mu_app_free(r.app);
  mu_component_free(r.comp);
  mu_cfg_release(&r.cfg);
  mu_config_release(&r.file);
  mu_buf_release(&r.err);
  return rc == RUN_NEXT ? 0 : rc;
}
