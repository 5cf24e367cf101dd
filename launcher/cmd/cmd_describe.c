/* muster describe HANDLE: the job spec of a submitted job (JSON, the --dryrun form). */
#include <stdio.h>

#include "muster/mu.h"

#include "alloc.h"
#include "cmd_util.h"
#include "cmds.h"
#include "log.h"
#include "opts.h"

int cmd_describe(int argc, char **argv)
{
  const char *cfgstr = NULL;
  struct mu_opt opts[] = {
      MU_CLI_OPT_CFG(&cfgstr),
      MU_OPT_END(),
  };
  int n = mu_opts_parse(opts, argc, argv, MU_OPTS_STOP_AT_NONOPT, "muster describe HANDLE");
  if (n == MU_OPTS_HELP)
    return 0;
  if (n < 0)
    return MU_EXIT_USAGE;
  struct mu_cli_job j = MU_CLI_JOB_INIT;
  struct mu_buf err = MU_BUF_INIT(8192);
  struct mu_app *app = NULL;
  int rc = mu_cli_job_open(&j, argc, argv, n, "describe", "local://muster/echo-x1", cfgstr);
  if (rc != 0)
    goto out;
  if (j.s->app_spec == NULL) {
    mu_error("the %s scheduler cannot describe jobs in this build", j.s->name);
    rc = MU_EXIT_FAILED;
    goto out;
  }
  if (j.s->app_spec(j.app_id, &j.cfg, &app, &err) != 0) {
    mu_error("%s", mu_buf_str(&err));
    rc = MU_EXIT_FAILED;
    goto out;
  }
  struct mu_buf js = MU_BUF_INIT(1 << 24);
  mu_app_to_json(app, &js);
  printf("%s\n", mu_buf_str(&js));
  mu_buf_release(&js);
out:
  mu_app_free(app);
  mu_cli_job_release(&j);
  mu_buf_release(&err);
  return rc;
}
