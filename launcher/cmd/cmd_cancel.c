/* muster cancel HANDLE: stop a job (idempotent: a finished job is left as it is). */
#include <stdint.h>
#include <stdio.h>

#include "muster/mu.h"

#include "alloc.h"
#include "cmd_util.h"
#include "cmds.h"
#include "log.h"
#include "opts.h"

int cmd_cancel(int argc, char **argv)
{
  struct mu_cli_job j = MU_CLI_JOB_INIT;
  struct mu_buf err = MU_BUF_INIT(SIZE_MAX);
  int rc = mu_cli_job_args(&j, argc, argv, "muster cancel HANDLE", "local://muster/echo-x1");
  if (rc == 0 && mu_sched_cancel(j.s, j.app_id, &j.cfg, &err) != 0) {
    mu_error("%s", mu_buf_str(&err));
    rc = MU_EXIT_FAILED;
  }
  mu_cli_job_release(&j);
  mu_buf_release(&err);
  return rc == MU_CLI_HELP ? MU_EXIT_OK : rc;
}
