/* muster status HANDLE [--json]: the job's state and its replicas (TorchX's text form). The
 * exit code tells the state (docs/exit-codes.md): 0 PENDING/SUBMITTED/RUNNING/SUCCEEDED,
 * 1 FAILED/CANCELLED/UNKNOWN, 2 bad command line, 3 the job could not be looked up. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "muster/mu.h"

#include "alloc.h"
#include "cmd_util.h"
#include "cmds.h"
#include "log.h"
#include "opts.h"

static int state_exit_code(enum mu_job_state s)
{
  switch (s) {
  case MU_STATE_UNSUBMITTED:
  case MU_STATE_SUBMITTED:
  case MU_STATE_PENDING:
  case MU_STATE_RUNNING:
  case MU_STATE_SUCCEEDED:
    return MU_EXIT_OK;
  case MU_STATE_FAILED:
  case MU_STATE_CANCELLED:
  case MU_STATE_UNKNOWN:
    break;
  }
  return MU_EXIT_FAILED;
}

int cmd_status(int argc, char **argv)
{
  int json = 0;
  const char *roles = NULL;
  const char *cfgstr = NULL;
  struct mu_opt opts[] = {
      MU_OPT_BOOL(0, "json", &json,
                  "print JSON (state name at the top, replica states as numbers)"),
      MU_OPT_STRING(0, "roles", &roles, "A,B", "only these roles"),
      MU_CLI_OPT_CFG(&cfgstr),
      MU_OPT_END(),
  };
  struct mu_cli_job j = MU_CLI_JOB_INIT;
  struct mu_app_status st;
  memset(&st, 0, sizeof(st));
  struct mu_buf err = MU_BUF_INIT(SIZE_MAX);
  int rc = mu_cli_job_parse(&j, opts, argc, argv,
                            "muster status [--json] [--roles A,B] [-cfg K=V,...] HANDLE\n"
                            "exit code: 0 PENDING, RUNNING or SUCCEEDED; 1 FAILED, CANCELLED or "
                            "UNKNOWN;\n2 bad command line; 3 the job could not be looked up",
                            "local://muster/echo-x1", &cfgstr);
  if (rc != 0)
    goto out;
  if (mu_sched_describe(j.s, j.app_id, &j.cfg, &st, &err) != 0) {
    mu_error("%s", mu_buf_str(&err));
    rc = MU_EXIT_LOOKUP;
    goto out;
  }
  rc = state_exit_code(st.state);
  if (roles != NULL) {
    size_t k = 0;
    for (size_t i = 0; i < st.nreplicas; i++) {
      char want[256];
      snprintf(want, sizeof(want), ",%s,", st.replicas[i].role);
      char have[1024];
      snprintf(have, sizeof(have), ",%s,", roles);
      if (strstr(have, want) != NULL) {
        struct mu_replica_status tmp = st.replicas[k];
        st.replicas[k++] = st.replicas[i];
        st.replicas[i] = tmp;
      }
    }
    for (size_t i = k; i < st.nreplicas; i++) {
      mu_free(st.replicas[i].role);
      mu_free(st.replicas[i].hostname);
      mu_free(st.replicas[i].msg);
    }
    st.nreplicas = k;
  }
  char *handle = mu_asprintf("%s://%s/%s", j.s->name, MU_SESSION, j.app_id);
  mu_cli_status_print(&st, handle, json);
  mu_free(handle);
out:
  mu_app_status_release(&st);
  mu_cli_job_release(&j);
  mu_buf_release(&err);
  return rc == MU_CLI_HELP ? MU_EXIT_OK : rc;
}
