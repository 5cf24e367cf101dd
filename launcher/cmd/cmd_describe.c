/* muster describe HANDLE: the job spec of a submitted job (JSON, the --dryrun form), read back
 * from where the scheduler keeps it: the local job's files, the Kubernetes job's object (an
 * annotation), the Slurm job's batch script (scontrol). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "muster/mu.h"

#include "alloc.h"
#include "cmd_util.h"
#include "cmds.h"
#include "log.h"
#include "opts.h"

/* stderr (stdout is the spec's JSON): what ${rdzv_endpoint} in the spec is for this job. */
static void rdzv_note(const struct mu_cli_job *j)
{
  struct mu_app_status st;
  struct mu_buf err = MU_BUF_INIT(SIZE_MAX);
  memset(&st, 0, sizeof(st));
  if (mu_sched_describe(j->s, j->app_id, &j->cfg, &st, &err) == 0 && st.rdzv_endpoint != NULL)
    fprintf(stderr, "muster: ${rdzv_endpoint} is %s%s%s%s\n", st.rdzv_endpoint,
            st.ui_url ? ", the job's musterd (status page " : "",
            st.ui_url ? st.ui_url : (mu_job_state_is_terminal(st.state) ? " (the job ended)" : ""),
            st.ui_url ? ")" : "");
  else if (j->s->rdzv_macro != NULL)
    fprintf(stderr, "muster: ${rdzv_endpoint} is the rendezvous: %s\n", j->s->rdzv_macro);
  mu_app_status_release(&st);
  mu_buf_release(&err);
}

int cmd_describe(int argc, char **argv)
{
  struct mu_cli_job j = MU_CLI_JOB_INIT;
  struct mu_buf err = MU_BUF_INIT(SIZE_MAX);
  struct mu_app *app = NULL;
  int rc = mu_cli_job_args(&j, argc, argv, "muster describe HANDLE", "local://muster/echo-x1");
  if (rc != 0)
    goto out;
  if (j.s->app_spec == NULL) {
    mu_error("the %s scheduler cannot describe jobs; 'muster status %s' shows the job's state",
             j.s->name, argc > 1 ? argv[argc - 1] : "HANDLE");
    rc = MU_EXIT_FAILED;
    goto out;
  }
  if (j.s->app_spec(j.app_id, &j.cfg, &app, &err) != 0) {
    mu_error("%s", mu_buf_str(&err));
    rc = MU_EXIT_FAILED;
    goto out;
  }
  struct mu_buf js = MU_BUF_INIT(SIZE_MAX);
  mu_app_to_json(app, &js);
  printf("%s\n", mu_buf_str(&js));
  mu_buf_release(&js);
  if (mu_app_mentions(app, "${rdzv_endpoint}"))
    rdzv_note(&j);
out:
  mu_app_free(app);
  mu_cli_job_release(&j);
  mu_buf_release(&err);
  return rc == MU_CLI_HELP ? MU_EXIT_OK : rc;
}
