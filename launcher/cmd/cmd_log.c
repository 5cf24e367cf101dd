/* muster log HANDLE[/ROLE[/REPLICA]] [-t] [--regex R] [--streams S] [--lines N] [--since T]
 * [--previous]: print or follow logs, TorchX's options with TorchX's meanings (-t/--tail
 * follows; every line by default). Several replicas are printed with a "role/replica " prefix
 * on each line. --since and --previous reach the schedulers that can honour them (kubernetes). */
#include <errno.h>
#include <regex.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "muster/mu.h"

#include "alloc.h"
#include "cmd_util.h"
#include "cmds.h"
#include "log.h"
#include "opts.h"

/* Runs log_open in a child writing to a pipe and prints the lines that match re.
 * Returns: 0, or 1 when the child's log_open failed (it printed why). */
static int log_filtered(const struct mu_cli_job *j, const char *role, long replica,
                        const struct mu_log_opts *o, const regex_t *re)
{
  int fds[2];
  if (pipe(fds) != 0) {
    mu_error("cannot create a pipe: %s", strerror(errno));
    return MU_EXIT_FAILED;
  }
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) {
    mu_error("cannot fork: %s", strerror(errno));
    close(fds[0]);
    close(fds[1]);
    return MU_EXIT_FAILED;
  }
  if (pid == 0) {
    struct mu_buf err = MU_BUF_INIT(SIZE_MAX);
    close(fds[0]);
    int rc = j->s->log_open(j->app_id, role, replica, o, fds[1], &j->cfg, &err);
    if (rc != 0)
      mu_error("%s", mu_buf_str(&err));
    _exit(rc == 0 ? 0 : 1);
  }
  close(fds[1]);
  FILE *in = fdopen(fds[0], "r");
  char line[65536];
  int keep = 0, at_start = 1;
  while (in != NULL && fgets(line, sizeof(line), in) != NULL) {
    /* A line longer than the buffer goes by its first part's verdict. */
    if (at_start)
      keep = regexec(re, line, 0, NULL, 0) == 0;
    if (keep)
      fputs(line, stdout);
    at_start = strchr(line, '\n') != NULL;
  }
  if (in != NULL)
    fclose(in);
  else
    close(fds[0]);
  int ws = 0;
  while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
    ;
  return WIFEXITED(ws) && WEXITSTATUS(ws) == 0 ? 0 : MU_EXIT_FAILED;
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

int cmd_log(int argc, char **argv)
{
  int follow = 0, previous = 0;
  long lines = 0;
  const char *streams = "combined", *regex = NULL, *since = NULL, *until = NULL;
  const char *cfgstr = NULL;
  regex_t re;
  int have_re = 0;
  struct mu_opt opts[] = {
      MU_OPT_BOOL('t', "tail", &follow, "follow: keep printing until the job ends (TorchX)"),
      MU_OPT_BOOL('f', "follow", &follow, "the same as -t"),
      MU_OPT_STRING(0, "regex", &regex, "RE", "only the lines that match RE (extended regex)"),
      MU_OPT_STRING(0, "streams", &streams, "S", "combined (default), stdout or stderr"),
      MU_OPT_INT('n', "lines", &lines, "N", "only the last N lines of each replica (all: 0)"),
      MU_OPT_STRING(0, "since", &since, "TIME",
                    "only lines newer than TIME: a duration (5m, 1h30m) or an RFC 3339 time "
                    "(kubernetes; ignored elsewhere, as TorchX's local logs)"),
      MU_OPT_BOOL(0, "previous", &previous,
                  "the previous run of a restarted container (kubernetes, as kubectl logs -p)"),
      MU_OPT_STRING(0, "until", &until, "TIME", "accepted and ignored, as TorchX's local logs"),
      MU_CLI_OPT_CFG(&cfgstr),
      MU_OPT_END(),
  };
  /* Options go before or after the handle (TorchX's argparse takes both): each pass parses up
   * to the next word, which becomes argv[0] of the next pass. */
  char *pos[4] = {argv[0], NULL, NULL, NULL};
  int npos = 1, curc = argc, n = 0;
  char **curv = argv;
  for (;;) {
    n = mu_opts_parse(opts, curc, curv, MU_OPTS_STOP_AT_NONOPT,
                      "muster log [-t] [--regex RE] [--streams S] [--lines N] [--since T] "
                      "[--previous] HANDLE[/ROLE[/REPLICA]]");
    if (n == MU_OPTS_HELP)
      return 0;
    if (n < 0)
      return MU_EXIT_USAGE;
    if (n >= curc)
      break;
    if (npos < 3)
      pos[npos] = curv[n];
    npos++;
    curv += n;
    curc -= n;
  }
  if (npos > 3)
    npos = 3;
  argc = npos;
  argv = pos;
  n = 1;
  if (lines < 0) {
    mu_error("--lines must be 0 or more, got %ld", lines);
    return MU_EXIT_USAGE;
  }
  long num = 0;
  if (follow && n + 1 < argc && mu_parse_long(argv[n], 0, 1L << 30, &num) == 0) {
    mu_error("-t/--tail follows the log (as TorchX) and takes no number; for the last %ld lines "
             "use --lines %ld",
             num, num);
    return MU_EXIT_USAGE;
  }
  if (since != NULL && !since_ok(since)) {
    mu_error("--since '%s': give a duration (90s, 5m, 1h30m) or an RFC 3339 time "
             "(2026-11-30T02:00:00Z)",
             since);
    return MU_EXIT_USAGE;
  }
  enum mu_log_stream stream;
  if (streams == NULL)
    streams = "combined";
  if (strcmp(streams, "combined") == 0)
    stream = MU_STREAM_COMBINED;
  else if (strcmp(streams, "stdout") == 0)
    stream = MU_STREAM_STDOUT;
  else if (strcmp(streams, "stderr") == 0)
    stream = MU_STREAM_STDERR;
  else {
    mu_error("--streams '%s': use combined, stdout or stderr", streams);
    return MU_EXIT_USAGE;
  }
  if (regex != NULL) {
    int rrc = regcomp(&re, regex, REG_EXTENDED | REG_NOSUB);
    if (rrc != 0) {
      char why[256];
      regerror(rrc, &re, why, sizeof(why));
      mu_error("--regex '%s': %s", regex, why);
      return MU_EXIT_USAGE;
    }
    have_re = 1;
  }
  struct mu_cli_job j = MU_CLI_JOB_INIT;
  struct mu_buf err = MU_BUF_INIT(SIZE_MAX);
  char *role = NULL;
  long replica = -1;
  int rc = mu_cli_job_open(&j, argc, argv, n, "log", "local://muster/echo-x1/echo/0", cfgstr);
  if (rc != 0)
    goto out;
  if (j.rest != NULL && j.rest[0] != '\0') {
    char *slash = strchr(j.rest, '/');
    if (slash != NULL) {
      *slash = '\0';
      if (slash[1] != '\0' && mu_parse_long(slash + 1, 0, 1 << 20, &replica) != 0) {
        mu_error("'%s' is not a replica number (HANDLE/ROLE/REPLICA)", slash + 1);
        rc = MU_EXIT_USAGE;
        goto out;
      }
    }
    role = mu_strdup(j.rest);
  }
  if (j.s->log_open == NULL) {
    mu_error("the %s scheduler cannot show logs", j.s->name);
    rc = MU_EXIT_FAILED;
    goto out;
  }
  struct mu_log_opts o = {.stream = stream, .follow = follow, .tail = lines};
  rc = time_window(j.s, since, until, previous, &o);
  if (rc != 0)
    goto out;
  if (have_re) {
    rc = log_filtered(&j, role, replica, &o, &re);
    goto out;
  }
  fflush(stdout);
  if (j.s->log_open(j.app_id, role, replica, &o, STDOUT_FILENO, &j.cfg, &err) != 0) {
    mu_error("%s", mu_buf_str(&err));
    rc = MU_EXIT_FAILED;
  }
out:
  if (have_re)
    regfree(&re);
  mu_free(role);
  mu_cli_job_release(&j);
  mu_buf_release(&err);
  return rc;
}
