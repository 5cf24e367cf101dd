/* muster list [-s SCHED] [-cfg K=V,...]: the jobs a scheduler knows, as TorchX's table; -cfg
 * picks where to look (kubernetes: namespace=, context=; slurm: partition=, user=). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "muster/mu.h"

#include "alloc.h"
#include "cmd_util.h"
#include "cmds.h"
#include "log.h"
#include "opts.h"
#include "strvec.h"

/* Parses "90", "90s", "30m", "2h", "7d" into seconds. Returns: 0, or -1. */
static int parse_age(const char *s, double *out)
{
  char *end = NULL;
  double v = strtod(s, &end);
  if (end == s || v < 0)
    return -1;
  double unit = 1;
  if (*end == 'm')
    unit = 60;
  else if (*end == 'h')
    unit = 3600;
  else if (*end == 'd')
    unit = 86400;
  else if (*end != 's' && *end != '\0')
    return -1;
  if (*end != '\0' && end[1] != '\0')
    return -1;
  *out = v * unit;
  return 0;
}

/* "45s", "12m", "3h", "2d": how long ago. */
static void format_age(double secs, char *out, size_t n)
{
  if (secs < 0)
    secs = 0;
  if (secs < 120)
    snprintf(out, n, "%.0fs", secs);
  else if (secs < 7200)
    snprintf(out, n, "%.0fm", secs / 60);
  else if (secs < 172800)
    snprintf(out, n, "%.0fh", secs / 3600);
  else
    snprintf(out, n, "%.0fd", secs / 86400);
}

/* --prune: removes the files of the finished jobs started before `before`, saying which.
 * Returns: 0, or the exit code after printing. */
static int prune(const struct mu_sched_ops *s, double before)
{
  if (s->prune == NULL) {
    mu_error("--prune removes local jobs' files; the %s scheduler keeps its own", s->name);
    return MU_EXIT_USAGE;
  }
  struct mu_strvec gone = MU_STRVEC_INIT;
  struct mu_buf err = MU_BUF_INIT(SIZE_MAX);
  int rc = s->prune(before, &gone, &err);
  for (size_t i = 0; i < gone.n; i++)
    fprintf(stderr, "muster: removed %s://%s/%s\n", s->name, MU_SESSION, gone.v[i]);
  if (rc != 0)
    mu_error("%s", mu_buf_str(&err));
  mu_strvec_release(&gone);
  mu_buf_release(&err);
  return rc != 0 ? MU_EXIT_FAILED : 0;
}

/* Drops the jobs that started before `after` (jobs of unknown start time stay). */
static void keep_since(struct mu_app_list_entry *l, size_t *nl, double after)
{
  size_t k = 0;
  for (size_t i = 0; i < *nl; i++) {
    if (l[i].started_at > 0 && l[i].started_at < after) {
      mu_free(l[i].app_id);
      mu_free(l[i].name);
      mu_free(l[i].reason);
      continue;
    }
    l[k++] = l[i];
  }
  *nl = k;
}

static void print_json(const struct mu_sched_ops *s, const struct mu_app_list_entry *l, size_t nl)
{
  printf("[");
  for (size_t i = 0; i < nl; i++) {
    printf("%s{\"app_handle\":\"%s://%s/%s\",\"app_name\":\"%s\",\"state\":\"%s\"", i ? "," : "",
           s->name, MU_SESSION, l[i].app_id, l[i].name ? l[i].name : "",
           mu_job_state_name(l[i].state));
    if (l[i].started_at > 0)
      printf(",\"started_at\":%.3f", l[i].started_at);
    if (l[i].reason != NULL) {
      cJSON *js = cJSON_CreateString(l[i].reason);
      char *r = cJSON_PrintUnformatted(js);
      printf(",\"reason\":%s", r);
      cJSON_free(r);
      cJSON_Delete(js);
    }
    printf("}");
  }
  printf("]\n");
}

/* TorchX's table: handle, name, state, and the age when any job's start is known. */
static void print_table(const struct mu_sched_ops *s, const struct mu_app_list_entry *l, size_t nl,
                        double now)
{
  int dated = 0;
  size_t w = strlen("APP HANDLE");
  for (size_t i = 0; i < nl; i++) {
    size_t k = strlen(s->name) + strlen(MU_SESSION) + strlen(l[i].app_id) + 4;
    if (k > w)
      w = k;
    dated |= l[i].started_at > 0;
  }
  printf("%-*s  %-20s  %-10s%s\n", (int)w, "APP HANDLE", "APP NAME", "APP STATUS",
         dated ? "  AGE" : "");
  for (size_t i = 0; i < nl; i++) {
    char h[512], age[32] = "-";
    snprintf(h, sizeof(h), "%s://%s/%s", s->name, MU_SESSION, l[i].app_id);
    if (l[i].started_at > 0)
      format_age(now - l[i].started_at, age, sizeof(age));
    if (dated)
      printf("%-*s  %-20s  %-10s  %s", (int)w, h, l[i].name ? l[i].name : "",
             mu_job_state_name(l[i].state), age);
    else
      printf("%-*s  %-20s  %s", (int)w, h, l[i].name ? l[i].name : "",
             mu_job_state_name(l[i].state));
    /* a job held up says why, after its state */
    printf("%s%s\n", l[i].reason ? "  cannot make progress: " : "", l[i].reason ? l[i].reason : "");
  }
}

int cmd_list(int argc, char **argv)
{
  const char *sched_name = NULL;
  const char *cfgstr = NULL, *since_str = NULL;
  int json = 0, do_prune = 0;
  double since = -1;
  char sched_help[256];
  struct mu_opt opts[] = {
      MU_OPT_STRING('s', "scheduler", &sched_name, "SCHED",
                    mu_cli_sched_help(sched_help, sizeof(sched_help))),
      MU_OPT_STRING_F(0, "cfg", &cfgstr, "K=V,...",
                      "scheduler options, also as -cfg: kubernetes namespace=, context=; slurm "
                      "partition=, user= (ALL: everyone's); local log_dir=",
                      MU_OPT_SINGLE_DASH),
      MU_OPT_BOOL(0, "json", &json, "print JSON"),
      MU_OPT_STRING(0, "since", &since_str, "AGE",
                    "only jobs started within AGE (90s, 30m, 2h, 7d)"),
      MU_OPT_BOOL(0, "prune", &do_prune,
                  "local: remove the files of finished jobs started before --since (default 7d)"),
      MU_OPT_END(),
  };
  int n = mu_opts_parse(opts, argc, argv, 0,
                        "muster list [-s SCHED] [-cfg K=V,...] [--json] [--since AGE] [--prune]");
  if (n == MU_OPTS_HELP)
    return 0;
  if (n < 0)
    return MU_EXIT_USAGE;
  if (since_str != NULL && parse_age(since_str, &since) != 0) {
    mu_error("--since '%s': expected an age such as 90s, 30m, 2h or 7d", since_str);
    return MU_EXIT_USAGE;
  }
  double now = (double)time(NULL);
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
  if (rc == 0 && do_prune)
    rc = prune(s, now - (since >= 0 ? since : 7 * 86400.0));
  if (rc == 0 && s->list(&cfg, &l, &nl, &err) != 0) {
    mu_error("%s", mu_buf_str(&err));
    rc = MU_EXIT_FAILED;
  }
  if (rc == 0 && since >= 0)
    keep_since(l, &nl, now - since);
  if (rc == 0 && json)
    print_json(s, l, nl);
  else if (rc == 0)
    print_table(s, l, nl, now);
  mu_app_list_free(l, nl);
  mu_cfg_release(&cfg);
  mu_buf_release(&err);
  return rc;
}
