/* muster cancel HANDLE: stop a job (idempotent: a finished job is left as it is). */
#include <stdio.h>

#include "muster/mu.h"

#include "alloc.h"
#include "cmd_util.h"
#include "cmds.h"
#include "log.h"
#include "opts.h"

int cmd_cancel(int argc, char **argv)
{
  const char *cfgstr = NULL;
  struct mu_opt opts[] = {
      MU_OPT_STRING(0, "cfg", &cfgstr, "K=V,...", "scheduler options (e.g. log_dir=...)"),
      MU_OPT_END(),
  };
  int n = mu_opts_parse(opts, argc, argv, MU_OPTS_STOP_AT_NONOPT, "muster cancel HANDLE");
  if (n == MU_OPTS_HELP)
    return 0;
  if (n < 0)
    return MU_EXIT_USAGE;
  if (n + 1 != argc) {
    mu_error("cancel needs exactly one app handle, e.g. 'muster cancel local://muster/echo-x1'");
    return MU_EXIT_USAGE;
  }
  const struct mu_sched_ops *s = NULL;
  char *app_id = NULL, *rest = NULL;
  int rc = mu_cli_handle(argv[n], &s, &app_id, &rest);
  if (rc != 0)
    return rc;
  struct mu_cfg cfg = {MU_KVLIST_INIT};
  struct mu_buf err = MU_BUF_INIT(8192);
  rc = mu_cli_cfg(s, cfgstr, NULL, &cfg);
  if (rc == 0 && mu_sched_cancel(s, app_id, &cfg, &err) != 0) {
    mu_error("%s", mu_buf_str(&err));
    rc = MU_EXIT_FAILED;
  }
  mu_cfg_release(&cfg);
  mu_buf_release(&err);
  mu_free(app_id);
  mu_free(rest);
  return rc;
}
