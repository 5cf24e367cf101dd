/* muster log HANDLE[/ROLE[/REPLICA]] [-t] [--regex R] [--streams S] [--lines N] [--since T]
 * [--previous]: print or follow logs, TorchX's options with TorchX's meanings (-t/--tail
 * follows; every line by default). Every line carries its "role/replica " prefix, as TorchX's
 * (one replica's too); --regex sees each line as written (no prefix, no newline).
 * --since and --previous reach the schedulers that can honour them (kubernetes). */
#include <regex.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "muster/mu.h"

#include "alloc.h"
#include "cmd_util.h"
#include "cmds.h"
#include "log.h"
#include "opts.h"
#include "suggest.h"

/* The --regex filter of a line (its prefix and newline not included): keeps a match. */
static int regex_keep(void *data, const char *line, size_t n)
{
  char *text = mu_strndup(line, n);
  int keep = regexec((const regex_t *)data, text, 0, NULL, 0) == 0;
  mu_free(text);
  return keep;
}

/* A --since value: a duration ("90s", "5m", "1h30m") or an RFC 3339 time
 * ("2026-11-30T02:00:00Z"). Returns: 1 when it is one of them. */
static int since_ok(const char *s)
{
  size_t n = strlen(s), i = 0;
  if (n >= 20 && s[4] == '-' && s[7] == '-' && s[10] == 'T' && s[13] == ':' && s[16] == ':')
    return s[n - 1] == 'Z' || s[n - 6] == '+' || s[n - 6] == '-';
  while (i < n) {
    size_t d = strspn(s + i, "0123456789");
    if (d == 0 || s[i + d] == '\0' || strchr("hms", s[i + d]) == NULL)
      return 0;
    i += d + 1;
  }
  return n > 0;
}

/* --since, --until and --previous for scheduler s, into o. A time window its logs cannot be cut
 * by is accepted, said to be ignored, and every line is printed, as TorchX's local scheduler
 * does (local files and Slurm output files carry no timestamps; kubectl logs has --since but no
 * --until); --previous it cannot honour is refused. Returns: 0, or MU_EXIT_USAGE (printed). */
static int time_window(const struct mu_sched_ops *s, const char *since, const char *until,
                       int previous, struct mu_log_opts *o)
{
  if (previous && !(s->log_caps & MU_SCHED_LOG_PREVIOUS)) {
    mu_error("--previous: the %s scheduler keeps one log per replica, with every run in it",
             s->name);
    return MU_EXIT_USAGE;
  }
  int since_ignored = since != NULL && !(s->log_caps & MU_SCHED_LOG_SINCE);
  if (since_ignored || until != NULL)
    mu_warn("%s%s%s: ignored, all lines are printed: the %s scheduler's logs cannot be cut %s; use "
            "--regex or --lines to narrow them",
            since_ignored ? "--since" : "", since_ignored && until != NULL ? " and " : "",
            until != NULL ? "--until" : "", s->name,
            since_ignored ? "by time (they carry no timestamps)" : "at an end time");
  o->since = since_ignored ? NULL : since;
  o->previous = previous;
  return 0;
}

struct log_args {
  int follow, previous;
  long lines;
  const char *streams, *regex, *since, *until, *cfgstr;
  enum mu_log_stream stream;
  regex_t re;
  int have_re;
  char *words[3]; /* the command's name and what is left: the handle (one is wanted) */
  int nwords;
};

/* Options go before or after the handle (TorchX's argparse takes both): each pass parses up to
 * the next word, which becomes argv[0] of the next pass. Returns: -1 to go on, else the exit
 * code (0 after -h). */
static int parse_words(const struct mu_opt *opts, int argc, char **argv, struct log_args *a)
{
  int curc = argc, n;
  char **curv = argv;
  a->words[0] = argv[0];
  a->nwords = 1;
  for (;;) {
    n = mu_opts_parse(opts, curc, curv, MU_OPTS_STOP_AT_NONOPT,
                      "muster log [-t] [--regex RE] [--streams S] [--lines N] [--since T] "
                      "[--previous] HANDLE[/ROLE[/REPLICA]]");
    if (n == MU_OPTS_HELP)
      return 0;
    if (n < 0)
      return MU_EXIT_USAGE;
    if (n >= curc)
      return -1;
    if (a->nwords < 3)
      a->words[a->nwords++] = curv[n];
    curv += n;
    curc -= n;
  }
}

static const struct {
  const char *name;
  enum mu_log_stream stream;
} stream_names[] = {
    {"combined", MU_STREAM_COMBINED},
    {"stdout", MU_STREAM_STDOUT},
    {"stderr", MU_STREAM_STDERR},
};

/* The options' values: --lines, -t without a number, --since's form, --streams, --regex
 * compiled. Returns: -1 to go on, or the exit code (2) after printing. */
static int check_options(struct log_args *a)
{
  long num = 0;
  if (a->lines < 0) {
    mu_error("--lines must be 0 or more, got %ld", a->lines);
    return MU_EXIT_USAGE;
  }
  if (a->follow && a->nwords > 2 && mu_parse_long(a->words[1], 0, 1L << 30, &num) == 0) {
    mu_error("-t/--tail follows the log (as TorchX) and takes no number; for the last %ld lines "
             "use --lines %ld",
             num, num);
    return MU_EXIT_USAGE;
  }
  if (a->since != NULL && !since_ok(a->since)) {
    mu_error("--since '%s': give a duration (90s, 5m, 1h30m) or an RFC 3339 time "
             "(2026-11-30T02:00:00Z)",
             a->since);
    return MU_EXIT_USAGE;
  }
  size_t i = 0, n = sizeof(stream_names) / sizeof(stream_names[0]);
  while (i < n && strcmp(a->streams ? a->streams : "combined", stream_names[i].name) != 0)
    i++;
  if (i == n) {
    mu_error("--streams '%s': use combined, stdout or stderr", a->streams);
    return MU_EXIT_USAGE;
  }
  a->stream = stream_names[i].stream;
  int rrc = a->regex != NULL ? regcomp(&a->re, a->regex, REG_EXTENDED | REG_NOSUB) : 0;
  if (rrc != 0) {
    char why[256];
    regerror(rrc, &a->re, why, sizeof(why));
    mu_error("--regex '%s': %s", a->regex, why);
    return MU_EXIT_USAGE;
  }
  a->have_re = a->regex != NULL;
  return -1;
}

/* ROLE[/REPLICA] after the app id into *role (NULL: every role) and *replica (-1: every one).
 * Returns: 0, or 2 after printing. */
static int role_replica(const struct mu_cli_job *j, char **role, long *replica)
{
  *role = NULL;
  *replica = -1;
  if (j->rest == NULL || j->rest[0] == '\0')
    return 0;
  char *slash = strchr(j->rest, '/');
  if (slash != NULL) {
    *slash = '\0';
    if (slash[1] != '\0' && mu_parse_long(slash + 1, 0, 1 << 20, replica) != 0) {
      mu_error("'%s' is not a replica number (HANDLE/ROLE/REPLICA)", slash + 1);
      return MU_EXIT_USAGE;
    }
  }
  *role = mu_strdup(j->rest);
  return 0;
}

/* A role the job does not have: appends the roles it has (from describe) and the closest one,
 * so that "muster log HANDLE/train/0" on a job whose role is the script's stem names it. */
static void name_roles(const struct mu_cli_job *j, const char *role, long replica,
                       struct mu_buf *err)
{
  struct mu_app_status st = {0};
  struct mu_buf why = MU_BUF_INIT(SIZE_MAX);
  if (j->s->describe == NULL || j->s->describe(j->app_id, &j->cfg, &st, &why) != 0 ||
      st.nreplicas == 0) {
    mu_app_status_release(&st);
    mu_buf_release(&why);
    return;
  }
  struct mu_suggest sg;
  mu_suggest_init(&sg, role);
  mu_buf_puts(err, " (its roles: ");
  for (size_t i = 0; i < st.nreplicas; i++) {
    const char *r = st.replicas[i].role;
    size_t k = 0;
    while (k < i && strcmp(st.replicas[k].role, r) != 0)
      k++;
    if (k < i) /* named already */
      continue;
    mu_buf_printf(err, "%s%s", i > 0 ? ", " : "", r);
    mu_suggest_add(&sg, r);
  }
  const char *best = mu_suggest_best(&sg);
  if (best == NULL && st.nreplicas > 0)
    best = st.replicas[0].role;
  mu_buf_printf(err, "); did you mean 'muster log %s://muster/%s/%s", j->s->name, j->app_id, best);
  if (replica >= 0)
    mu_buf_printf(err, "/%ld", replica);
  mu_buf_puts(err, "'?");
  mu_app_status_release(&st);
  mu_buf_release(&why);
}

/* Writes the log to stdout, every line prefixed "role/replica ". With --regex, each replica's
 * lines are filtered as it wrote them, then prefixed (as TorchX filters each replica's log_iter)
 * and written as they come. A job or a role goes to the backend's log_open (which prefixes
 * them); one replica, or a filter, to mu_sched_log (the backends write one replica as is).
 * Returns: the exit code. */
static int print_log(const struct mu_cli_job *j, struct log_args *a, const char *role, long replica)
{
  struct mu_buf err = MU_BUF_INIT(SIZE_MAX);
  struct mu_log_query q = {
      j->app_id, role, replica, {.stream = a->stream, .follow = a->follow, .tail = a->lines},
      &j->cfg,   NULL, NULL};
  int rc = time_window(j->s, a->since, a->until, a->previous, &q.opts);
  if (rc != 0)
    return rc;
  fflush(stdout);
  if (a->have_re || replica >= 0) {
    q.keep = a->have_re ? regex_keep : NULL;
    q.keep_data = &a->re;
    rc = mu_sched_log(j->s, &q, STDOUT_FILENO, &err);
  } else {
    rc = j->s->log_open(j->app_id, role, replica, &q.opts, STDOUT_FILENO, &j->cfg, &err);
  }
  if (rc != 0 && role != NULL && strstr(mu_buf_str(&err), "has no role") != NULL)
    name_roles(j, role, replica, &err);
  if (rc != 0)
    mu_error("%s", mu_buf_str(&err));
  mu_buf_release(&err);
  return rc != 0 ? MU_EXIT_FAILED : 0;
}

int cmd_log(int argc, char **argv)
{
  struct log_args a = {.streams = "combined"};
  struct mu_opt opts[] = {
      MU_OPT_BOOL('t', "tail", &a.follow, "follow: keep printing until the job ends (TorchX)"),
      MU_OPT_BOOL('f', "follow", &a.follow, "the same as -t"),
      MU_OPT_STRING(0, "regex", &a.regex, "RE", "only the lines that match RE (extended regex)"),
      MU_OPT_STRING(0, "streams", &a.streams, "S", "combined (default), stdout or stderr"),
      MU_OPT_INT('n', "lines", &a.lines, "N", "only the last N lines of each replica (all: 0)"),
      MU_OPT_STRING(0, "since", &a.since, "TIME",
                    "only lines newer than TIME: a duration (5m, 1h30m) or an RFC 3339 time "
                    "(kubernetes; ignored elsewhere, as TorchX's local logs)"),
      MU_OPT_BOOL(0, "previous", &a.previous,
                  "the previous run of a restarted container (kubernetes, as kubectl logs -p)"),
      MU_OPT_STRING(0, "until", &a.until, "TIME", "accepted and ignored, as TorchX's local logs"),
      MU_CLI_OPT_CFG(&a.cfgstr),
      MU_OPT_END(),
  };
  struct mu_cli_job j = MU_CLI_JOB_INIT;
  char *role = NULL;
  long replica = -1;
  int rc = parse_words(opts, argc, argv, &a);
  if (rc < 0)
    rc = check_options(&a);
  if (rc >= 0)
    return rc;
  rc = mu_cli_job_open(&j, a.nwords, a.words, 1, "log", "local://muster/echo-x1/echo/0", a.cfgstr);
  if (rc == 0)
    rc = role_replica(&j, &role, &replica);
  if (rc == 0 && j.s->log_open == NULL) {
    mu_error("the %s scheduler cannot show logs", j.s->name);
    rc = MU_EXIT_FAILED;
  }
  if (rc == 0)
    rc = print_log(&j, &a, role, replica);
  if (a.have_re)
    regfree(&a.re);
  mu_free(role);
  mu_cli_job_release(&j);
  return rc;
}
