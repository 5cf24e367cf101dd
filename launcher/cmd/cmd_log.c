/* muster log HANDLE[/ROLE[/REPLICA]] [-f] [--tail N] [--streams S]: print or follow logs.
 * Several replicas are printed with a "role/replica " prefix on each line (as TorchX). */
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

int cmd_log(int argc, char **argv)
{
  int follow = 0;
  long tail = 0;
  const char *streams = "combined";
  const char *cfgstr = NULL;
  struct mu_opt opts[] = {
      MU_OPT_BOOL('f', "follow", &follow, "keep printing until the job ends"),
      MU_OPT_INT('t', "tail", &tail, "N", "only the last N lines of each replica"),
      MU_OPT_STRING(0, "streams", &streams, "S", "combined (default), stdout or stderr"),
      MU_CLI_OPT_CFG(&cfgstr),
      MU_OPT_END(),
  };
  int n = mu_opts_parse(opts, argc, argv, MU_OPTS_STOP_AT_NONOPT,
                        "muster log [-f] [--tail N] [--streams S] HANDLE[/ROLE[/REPLICA]]");
  if (n == MU_OPTS_HELP)
    return 0;
  if (n < 0)
    return MU_EXIT_USAGE;
  if (tail < 0) {
    mu_error("--tail must be 0 or more, got %ld", tail);
    return MU_EXIT_USAGE;
  }
  enum mu_log_stream stream;
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
  if (j.s->log_open(j.app_id, role, replica, stream, follow, tail, STDOUT_FILENO, &j.cfg, &err) !=
      0) {
    mu_error("%s", mu_buf_str(&err));
    rc = MU_EXIT_FAILED;
  }
out:
  mu_free(role);
  mu_cli_job_release(&j);
  mu_buf_release(&err);
  return rc;
}
