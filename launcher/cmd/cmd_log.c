/* muster log HANDLE[/ROLE[/REPLICA]] [-t] [--regex R] [--streams S] [--lines N]: print or
 * follow logs, TorchX's options with TorchX's meanings (-t/--tail follows; every line by
 * default). The lines of a job or a role carry a "role/replica " prefix, one replica's are as
 * it wrote them; --regex sees each line as written (no prefix, no newline). */
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

/* The --regex filter of a line (its prefix and newline not included): keeps a match. */
static int regex_keep(void *data, const char *line, size_t n)
{
  char *text = mu_strndup(line, n);
  int keep = regexec((const regex_t *)data, text, 0, NULL, 0) == 0;
  mu_free(text);
  return keep;
}

int cmd_log(int argc, char **argv)
{
  int follow = 0;
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
      MU_OPT_STRING(0, "since", &since, "TIME", "accepted and ignored, as TorchX's local logs"),
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
                      "muster log [-t] [--regex RE] [--streams S] [--lines N] "
                      "HANDLE[/ROLE[/REPLICA]]");
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
  /* As TorchX's local scheduler: a time window is accepted, said to be ignored, and every line
   * is printed (the logs muster reads carry no timestamps to filter on). */
  if (since != NULL || until != NULL)
    mu_warn("%s%s%s: ignored, all lines are printed: the logs muster reads (local files, kubectl "
            "logs, Slurm output files) carry no timestamps; use --regex or --lines to narrow them",
            since != NULL ? "--since" : "", since != NULL && until != NULL ? " and " : "",
            until != NULL ? "--until" : "");
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
    mu_error("the %s scheduler cannot show logs in this build", j.s->name);
    rc = MU_EXIT_FAILED;
    goto out;
  }
  fflush(stdout);
  /* With --regex, each replica's lines are filtered as it wrote them, then prefixed (as TorchX
   * filters each replica's log_iter) and written as they come. */
  struct mu_log_query q = {j.app_id, role, replica, stream, follow, lines, &j.cfg, NULL, NULL};
  if (have_re) {
    q.keep = regex_keep;
    q.keep_data = &re;
  }
  if ((have_re ? mu_sched_log(j.s, &q, STDOUT_FILENO, &err)
               : j.s->log_open(j.app_id, role, replica, stream, follow, lines, STDOUT_FILENO,
                               &j.cfg, &err)) != 0) {
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
