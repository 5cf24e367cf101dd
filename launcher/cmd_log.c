/* muster log HANDLE[/ROLE[/REPLICA]] [-f] [--tail N] [--streams S]: print or follow logs.
 * Several replicas are printed with a "role/replica " prefix on each line (as TorchX). */
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
      MU_OPT_STRING(0, "cfg", &cfgstr, "K=V,...", "scheduler options (e.g. log_dir=...)"),
      MU_OPT_END(),
  };
  int n = mu_opts_parse(opts, argc, argv, MU_OPTS_STOP_AT_NONOPT,
                        "muster log [-f] [--tail N] [--streams S] HANDLE[/ROLE[/REPLICA]]");
  if (n == MU_OPTS_HELP)
    return 0;
  if (n < 0)
    return MU_EXIT_USAGE;
  if (n + 1 != argc) {
    mu_error("log needs one app handle, e.g. 'muster log local://muster/echo-x1/echo/0'");
    return MU_EXIT_USAGE;
  }
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
  const struct mu_sched_ops *s = NULL;
  char *app_id = NULL, *rest = NULL;
  int rc = mu_cli_handle(argv[n], &s, &app_id, &rest);
  if (rc != 0)
    return rc;
  char *role = NULL;
  long replica = -1;
  if (rest != NULL && rest[0] != '\0') {
    char *slash = strchr(rest, '/');
    if (slash != NULL) {
      *slash = '\0';
      if (slash[1] != '\0' && mu_parse_long(slash + 1, 0, 1 << 20, &replica) != 0) {
        mu_error("'%s' is not a replica number (HANDLE/ROLE/REPLICA)", slash + 1);
        rc = MU_EXIT_USAGE;
        goto out;
      }
    }
    role = mu_strdup(rest);
  }
  if (s->log_open == NULL) {
    mu_error("the %s scheduler cannot show logs in this build", s->name);
    rc = MU_EXIT_FAILED;
    goto out;
  }
  struct mu_cfg cfg = {MU_KVLIST_INIT};
  rc = mu_cli_cfg(s, cfgstr, NULL, &cfg);
  if (rc == 0) {
    struct mu_buf err = MU_BUF_INIT(8192);
    fflush(stdout);
    if (s->log_open(app_id, role, replica, stream, follow, tail, STDOUT_FILENO, &cfg, &err) != 0) {
      mu_error("%s", mu_buf_str(&err));
      rc = MU_EXIT_FAILED;
    }
    mu_buf_release(&err);
  }
  mu_cfg_release(&cfg);
out:
  mu_free(role);
  mu_free(app_id);
  mu_free(rest);
  return rc;
}
