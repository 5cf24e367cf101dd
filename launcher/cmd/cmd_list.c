/* muster list [-s SCHED] [-cfg K=V,...]: the jobs a scheduler knows, as TorchX's table; -cfg
 * picks where to look (kubernetes: namespace=, context=; slurm: partition=, user=). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "muster/mu.h"

#include "alloc.h"
#include "cmd_util.h"
#include "cmds.h"
#include "log.h"
#include "opts.h"

int cmd_list(int argc, char **argv)
{
  const char *sched_name = NULL;
  const char *cfgstr = NULL;
  int json = 0;
  struct mu_opt opts[] = {
      MU_OPT_STRING('s', "scheduler", &sched_name, "SCHED", "the scheduler (default: local)"),
      MU_OPT_STRING_F(0, "cfg", &cfgstr, "K=V,...",
                      "scheduler options, also as -cfg: kubernetes namespace=, context=; slurm "
                      "partition=, user= (ALL: everyone's); local log_dir=",
                      MU_OPT_SINGLE_DASH),
      MU_OPT_BOOL(0, "json", &json, "print JSON"),
      MU_OPT_END(),
  };
  int n = mu_opts_parse(opts, argc, argv, 0, "muster list [-s SCHED] [-cfg K=V,...] [--json]");
  if (n == MU_OPTS_HELP)
    return 0;
  if (n < 0)
    return MU_EXIT_USAGE;
  const struct mu_sched_ops *s = sched_name ? mu_cli_sched(sched_name) : mu_sched_at(0);
  if (s == NULL)
    return MU_EXIT_USAGE;
  if (s->list == NULL) {
    mu_error("the %s scheduler cannot list jobs in this build", s->name);
    return MU_EXIT_FAILED;
  }
  struct mu_cfg cfg = {MU_KVLIST_INIT};
  struct mu_buf err = MU_BUF_INIT(SIZE_MAX);
  struct mu_app_list_entry *l = NULL;
  size_t nl = 0;
  int rc = mu_cli_cfg(s, cfgstr, NULL, &cfg);
  if (rc != 0)
    goto out;
  if (s->list(&cfg, &l, &nl, &err) != 0) {
    mu_error("%s", mu_buf_str(&err));
    rc = MU_EXIT_FAILED;
    goto out;
  }
  if (json) {
    printf("[");
    for (size_t i = 0; i < nl; i++)
      printf("%s{\"app_handle\":\"%s://%s/%s\",\"app_name\":\"%s\",\"state\":\"%s\"}", i ? "," : "",
             s->name, MU_SESSION, l[i].app_id, l[i].name ? l[i].name : "",
             mu_job_state_name(l[i].state));
    printf("]\n");
  } else {
    size_t w = strlen("APP HANDLE");
    for (size_t i = 0; i < nl; i++) {
      size_t k = strlen(s->name) + strlen(MU_SESSION) + strlen(l[i].app_id) + 4;
      if (k > w)
        w = k;
    }
    printf("%-*s  %-20s  %s\n", (int)w, "APP HANDLE", "APP NAME", "APP STATUS");
    for (size_t i = 0; i < nl; i++) {
      char h[512];
      snprintf(h, sizeof(h), "%s://%s/%s", s->name, MU_SESSION, l[i].app_id);
      printf("%-*s  %-20s  %s\n", (int)w, h, l[i].name ? l[i].name : "",
             mu_job_state_name(l[i].state));
    }
  }
out:
  mu_app_list_free(l, nl);
  mu_cfg_release(&cfg);
  mu_buf_release(&err);
  return rc;
}
