/* CLI helpers shared by the subcommands. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "muster/client.h"
#include "muster/mu.h"

#include "client/backends.h"

#include "alloc.h"
#include "cmd_util.h"
#include "json.h"
#include "log.h"
#include "opts.h"
#include "suggest.h"

const struct mu_sched_ops *mu_cli_sched(const char *name)
{
  const struct mu_sched_ops *s = mu_sched_find(name);
  if (s != NULL)
    return s;
  struct mu_suggest sg;
  mu_suggest_init(&sg, name);
  for (size_t i = 0; mu_sched_at(i) != NULL; i++)
    mu_suggest_add(&sg, mu_sched_at(i)->name);
  const char *best = mu_suggest_best(&sg);
  struct mu_buf names = MU_BUF_INIT(SIZE_MAX);
  mu_sched_names(&names, ", ", " or ", 0);
  if (best != NULL)
    mu_error("unknown scheduler '%s'; did you mean '%s'?", name, best);
  else
    mu_error("unknown scheduler '%s'; use %s", name, mu_buf_str(&names));
  mu_buf_release(&names);
  return NULL;
}

const char *mu_cli_sched_help(char *buf, size_t n)
{
  struct mu_buf names = MU_BUF_INIT(SIZE_MAX);
  mu_sched_names(&names, ", ", ", ", 1);
  snprintf(buf, n, "the scheduler: %s", mu_buf_str(&names));
  mu_buf_release(&names);
  return buf;
}

int mu_cli_handle(const char *arg, const struct mu_sched_ops **s, char **app_id, char **rest)
{
  char *sched = NULL, *session = NULL, *id = NULL;
  *rest = NULL;
  *app_id = NULL;
  if (strstr(arg, "://") == NULL) {
    *s = mu_sched_at(0);
    id = mu_strdup(arg);
  } else if (mu_handle_parse(arg, &sched, &session, &id) != 0) {
    mu_error("'%s' is not an app handle; write SCHEDULER://SESSION/APP_ID (as 'muster run' "
             "printed it)",
             arg);
    return MU_EXIT_USAGE;
  } else {
    *s = mu_cli_sched(sched);
    mu_free(sched);
    mu_free(session);
    if (*s == NULL) {
      mu_free(id);
      return MU_EXIT_USAGE;
    }
  }
  char *slash = strchr(id, '/');
  if (slash != NULL) {
    *rest = mu_strdup(slash + 1);
    *slash = '\0';
  }
  if (id[0] == '\0') {
    mu_error("'%s' has an empty app id", arg);
    mu_free(id);
    mu_free(*rest);
    *rest = NULL;
    return MU_EXIT_USAGE;
  }
  *app_id = id;
  return 0;
}

/* The [cli:run] keys muster reads (the rest of TorchX's run flags go on the command line). */
static const char *const cli_run_keys[] = {"scheduler", "component", "workspace", NULL};

/* "[section] key" of the entry that is no word of `words` (NULL-terminated): named with the
 * closest word. */
static void config_unknown(const struct mu_config_entry *e, const char *what, const char *word,
                           const char *const *words, const char *hint)
{
  struct mu_suggest sg;
  mu_suggest_init(&sg, word);
  for (size_t i = 0; words[i] != NULL; i++)
    mu_suggest_add(&sg, words[i]);
  const char *best = mu_suggest_best(&sg);
  if (best != NULL)
    mu_error("%s: unknown %s '%s'; did you mean '%s'? (%s)", e->where, what, word, best, hint);
  else
    mu_error("%s: unknown %s '%s' (%s)", e->where, what, word, hint);
}

int mu_cli_config_check(const struct mu_config *file)
{
  const char *sections[16];
  size_t ns = 0;
  int tracker_said = 0;
  sections[ns++] = "cli:run";
  for (size_t i = 0; mu_sched_at(i) != NULL && ns + 2 < sizeof(sections) / sizeof(sections[0]); i++)
    sections[ns++] = mu_sched_at(i)->name;
  sections[ns++] = "component:NAME";
  sections[ns] = NULL;
  if (file->torchx != NULL)
    fprintf(stderr, "muster: note: read TorchX's config '%s' (no .musterconfig found)\n",
            file->torchx);
  for (size_t i = 0; i < file->n; i++) {
    const struct mu_config_entry *e = &file->v[i];
    const struct mu_sched_ops *s = NULL;
    const char *sec = e->section;
    if (strcmp(sec, "cli:run") == 0) {
      size_t k = 0;
      while (cli_run_keys[k] != NULL && strcmp(cli_run_keys[k], e->key) != 0)
        k++;
      if (cli_run_keys[k] == NULL) {
        config_unknown(e, "[cli:run] key", e->key, cli_run_keys,
                       "muster reads scheduler, component and workspace there; other run "
                       "options go on the command line");
        return MU_EXIT_USAGE;
      }
      continue;
    }
    if (strncmp(sec, "component:", 10) == 0)
      continue; /* its keys are checked against the component when it is built */
    if (strcmp(sec, "torchx:tracker") == 0 || strncmp(sec, "tracker:", 8) == 0) {
      if (!tracker_said++)
        fprintf(stderr, "muster: note: %s: [%s] ignored: muster has no experiment trackers\n",
                e->where, sec);
      continue;
    }
    s = mu_sched_find(sec);
    if (s == NULL) {
      config_unknown(e, "section", e->section, sections,
                     "sections: [cli:run], [SCHEDULER], [component:NAME]");
      return MU_EXIT_USAGE;
    }
    const struct mu_runopt *o = s->runopts;
    while (o != NULL && o->name != NULL && strcmp(o->name, e->key) != 0)
      o++;
    if (o == NULL || o->name == NULL) {
      const char *names[64];
      size_t nn = 0;
      for (o = s->runopts; o != NULL && o->name != NULL && nn + 1 < 64; o++)
        names[nn++] = o->name;
      names[nn] = NULL;
      char hint[96];
      snprintf(hint, sizeof(hint), "see 'muster runopts %s'", s->name);
      config_unknown(e, "-cfg key", e->key, names, hint);
      return MU_EXIT_USAGE;
    }
  }
  return 0;
}

int mu_cli_cfg(const struct mu_sched_ops *s, const char *cfgstr, const struct mu_config *file,
               struct mu_cfg *out)
{
  struct mu_config own = MU_CONFIG_INIT;
  struct mu_kvlist cli = MU_KVLIST_INIT;
  struct mu_buf err = MU_BUF_INIT(SIZE_MAX);
  int rc = 0;
  if (file == NULL) {
    if (mu_config_load(&own, &err) != 0) {
      mu_error("%s", mu_buf_str(&err));
      rc = MU_EXIT_USAGE;
      goto out;
    }
    file = &own;
  }
  rc = mu_cli_config_check(file);
  if (rc != 0)
    goto out;
  if (mu_cfg_split(cfgstr, &cli, &err) != 0) {
    mu_error("-cfg: %s", mu_buf_str(&err));
    rc = MU_EXIT_USAGE;
    goto out;
  }
  if (mu_cfg_resolve(s->name, s->runopts, &cli, file, out, &err) != 0) {
    mu_error("%s", mu_buf_str(&err));
    rc = MU_EXIT_USAGE;
  }
out:
  mu_buf_release(&err);
  mu_kvlist_release(&cli);
  mu_config_release(&own);
  return rc;
}

int mu_cli_job_open(struct mu_cli_job *j, int argc, char **argv, int n, const char *cmd,
                    const char *example, const char *cfgstr)
{
  if (n + 1 != argc) {
    mu_error("%s needs exactly one app handle, e.g. 'muster %s %s'", cmd, cmd, example);
    return MU_EXIT_USAGE;
  }
  int rc = mu_cli_handle(argv[n], &j->s, &j->app_id, &j->rest);
  if (rc != 0)
    return rc;
  return mu_cli_cfg(j->s, cfgstr, NULL, &j->cfg);
}

int mu_cli_job_parse(struct mu_cli_job *j, const struct mu_opt *opts, int argc, char **argv,
                     const char *usage, const char *example, const char *const *cfgstr)
{
  int n = mu_opts_parse(opts, argc, argv, MU_OPTS_STOP_AT_NONOPT, usage);
  if (n == MU_OPTS_HELP)
    return MU_CLI_HELP;
  if (n < 0)
    return MU_EXIT_USAGE;
  return mu_cli_job_open(j, argc, argv, n, argv[0], example, *cfgstr);
}

int mu_cli_job_args(struct mu_cli_job *j, int argc, char **argv, const char *usage,
                    const char *example)
{
  const char *cfgstr = NULL;
  struct mu_opt opts[] = {
      MU_CLI_OPT_CFG(&cfgstr),
      MU_OPT_END(),
  };
  return mu_cli_job_parse(j, opts, argc, argv, usage, example, &cfgstr);
}

void mu_cli_job_release(struct mu_cli_job *j)
{
  if (j == NULL)
    return;
  mu_cfg_release(&j->cfg);
  mu_free(j->app_id);
  mu_free(j->rest);
  *j = (struct mu_cli_job)MU_CLI_JOB_INIT;
}

/* The rendezvous round of run `app_id` on the job's rendezvous (musterd, or an etcd-v3://
 * cluster), as " | rdzv round R: N nodes (of MIN:MAX), W waiting", or "" when there is none
 * (yet). Bounded to about 200 ms. */
void mu_cli_rdzv_line(const struct mu_app_status *st, char *out, size_t n)
{
  out[0] = '\0';
  struct mu_client *c = NULL;
  struct mu_run_info ri;
  if (st->rdzv_token_file != NULL) {
    /* The client reads its token from the environment: this process's, the job's file. */
    setenv("MUSTER_RDZV_TOKEN_FILE", st->rdzv_token_file, 1);
    unsetenv("MUSTER_RDZV_TOKEN");
  }
  if (st->rdzv_endpoint == NULL || mu_client_new(st->rdzv_endpoint, &c) != 0)
    return;
  mu_client_set_timeout(c, 200);
  if (mu_client_run_info(c, st->app_id, &ri) == 0)
    snprintf(out, n, " | rdzv round %ld: %d nodes (of %d:%d), %d waiting", ri.round, ri.nnodes,
             ri.min_nodes, ri.max_nodes, ri.waiting);
  mu_client_free(c);
}

/* The job's run read from its rendezvous now (a job on an external one: etcd v3 or a musterd
 * that outlives it), or NULL when it cannot be read within 2 s. Ownership: the caller's. */
static cJSON *live_run(const char *endpoint, const char *app_id)
{
  struct mu_client *c = NULL;
  cJSON *run = NULL;
  if (endpoint == NULL || endpoint[0] == '\0' || mu_client_new(endpoint, &c) != 0)
    return NULL;
  mu_client_set_timeout(c, 2000);
  if (mu_client_runs_json(c, app_id, &run) != 0) {
    cJSON_Delete(run);
    run = NULL;
  }
  mu_client_free(c);
  return run;
}

/* The run whose goodput status shows: the one the scheduler kept, else the live one. */
static cJSON *status_run(const struct mu_app_status *st)
{
  if (st->rdzv_run != NULL)
    return cJSON_Parse(st->rdzv_run);
  return st->rdzv_endpoint != NULL ? live_run(st->rdzv_endpoint, st->app_id) : NULL;
}

/* "1.23s" of ms, or "-" when the field is null. */
static const char *secs(const cJSON *o, const char *k, char *buf, size_t n)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  if (!cJSON_IsNumber(v))
    return "-";
  snprintf(buf, n, "%.2fs", v->valuedouble / 1000);
  return buf;
}

void mu_cli_goodput_print(const struct cJSON *run, const char *indent, int title)
{
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(run, "timings");
  char b1[32], b2[32];
  if (t != NULL)
    printf("%s%s %s\n", indent, title ? "Time To First Step:" : "time to first step",
           secs(t, "time_to_first_step_ms", b1, sizeof(b1)));
  const cJSON *mr = cJSON_GetObjectItemCaseSensitive(run, "max_restarts");
  long rc = mu_json_get_long(run, "restart_count", 0);
  if (cJSON_IsNumber(mr))
    printf("%s%s %ld of %ld (the run's budget)\n", indent, title ? "Restarts:" : "restarts", rc,
           (long)mr->valuedouble);
  const cJSON *r, *prev = NULL;
  cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(t, "rounds"))
  {
    if (prev != NULL && mu_json_get_str(prev, "end") != NULL && mu_json_get_str(prev, "end")[0])
      printf("%s%s round %ld after round %ld %s: downtime %s (%s)\n", indent,
             title ? "Restart Downtime:" : "downtime:", mu_json_get_long(r, "round", 0),
             mu_json_get_long(prev, "round", 0), mu_json_get_str(prev, "end"),
             secs(r, "downtime_ms", b2, sizeof(b2)),
             mu_json_get_str(prev, "why") ? mu_json_get_str(prev, "why") : "");
    prev = r;
  }
  long standbys = mu_json_get_long(run, "standbys", 0);
  if (standbys > 0)
    printf("%s%s %ld\n", indent, title ? "Standbys:" : "standbys", standbys);
  const cJSON *u;
  cJSON_ArrayForEach(u, cJSON_GetObjectItemCaseSensitive(run, "unhealthy"))
  {
    const char *out = mu_json_get_str(u, "output");
    int n = out != NULL ? (int)strcspn(out, "\n") : 0;
    printf("%s%s node %s: %.*s (%ld failed checks)\n", indent, title ? "Unhealthy:" : "unhealthy",
           mu_json_get_str(u, "node_id") ? mu_json_get_str(u, "node_id") : "?", n,
           out != NULL ? out : "", mu_json_get_long(u, "checks", 0));
  }
}

/* Seconds the job ran (to its end, or to now while it runs). */
static double status_duration(const struct mu_app_status *st)
{
  double end = st->ended_at;
  if (end <= 0) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    end = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
  }
  return end > st->started_at ? end - st->started_at : 0;
}

/* The status's UI URL line: the job's musterd status page, or why there is none and what shows
 * the same (a private job's page needs its token, which a browser cannot send). */
static void ui_url_line(const struct mu_app_status *st)
{
  if (st->ui_url != NULL)
    printf("    UI URL: %s\n", st->ui_url);
  else if (st->rdzv_token_file != NULL && !mu_job_state_is_terminal(st->state))
    printf("    UI URL: None (the job's musterd is private: its page needs the token in %s, "
           "which a browser cannot send; watch the rendezvous with "
           "'MUSTER_RDZV_TOKEN_FILE=%s muster rdzv --watch %s', or run the job with "
           "-cfg rdzv_auth=none for an open page)\n",
           st->rdzv_token_file, st->rdzv_token_file,
           st->rdzv_endpoint ? st->rdzv_endpoint : "ENDPOINT");
  else if (mu_job_state_is_terminal(st->state))
    printf("    UI URL: None (the job ended)\n");
  else
    printf("    UI URL: None\n");
}

/* --json: TorchX's AppStatus.to_json, plus muster's fields. */
static void status_json(const struct mu_app_status *st, const char *handle)
{
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "app_handle", handle);
  cJSON_AddStringToObject(o, "state", mu_job_state_name(st->state));
  cJSON_AddNumberToObject(o, "num_restarts", (double)st->num_restarts);
  cJSON *roles = cJSON_AddArrayToObject(o, "roles");
  for (size_t i = 0; i < st->nreplicas; i++) {
    const struct mu_replica_status *r = &st->replicas[i];
    cJSON *jr = NULL, *it;
    cJSON_ArrayForEach(it, roles)
    {
      if (strcmp(cJSON_GetObjectItem(it, "role")->valuestring, r->role) == 0)
        jr = it;
    }
    if (jr == NULL) {
      jr = cJSON_CreateObject();
      cJSON_AddStringToObject(jr, "role", r->role);
      cJSON_AddArrayToObject(jr, "replicas");
      cJSON_AddItemToArray(roles, jr);
    }
    cJSON *rep = cJSON_CreateObject();
    cJSON_AddNumberToObject(rep, "id", (double)r->replica_id);
    cJSON_AddNumberToObject(rep, "state", (double)r->state);
    cJSON_AddStringToObject(rep, "role", r->role);
    cJSON_AddStringToObject(rep, "hostname", r->hostname ? r->hostname : "");
    cJSON_AddNumberToObject(rep, "exit_code", (double)r->exit_code);
    cJSON_AddStringToObject(rep, "structured_error_msg", r->msg && r->msg[0] ? r->msg : "<NONE>");
    cJSON_AddItemToArray(cJSON_GetObjectItem(jr, "replicas"), rep);
  }
  cJSON_AddStringToObject(o, "msg", st->msg ? st->msg : "");
  cJSON_AddStringToObject(o, "structured_error_msg",
                          st->structured_error_msg ? st->structured_error_msg : "<NONE>");
  if (st->root_cause != NULL)
    cJSON_AddStringToObject(o, "root_cause", st->root_cause);
  if (st->reason != NULL)
    cJSON_AddStringToObject(o, "reason", st->reason);
  if (st->started_at > 0) {
    cJSON_AddNumberToObject(o, "started_at", st->started_at);
    cJSON_AddNumberToObject(o, "duration_s", status_duration(st));
  }
  cJSON *run = status_run(st);
  mu_cli_goodput_add_json(o, run, st);
  if (run != NULL)
    cJSON_AddItemToObject(o, "rdzv_run", run);
  if (st->ui_url != NULL)
    cJSON_AddStringToObject(o, "url", st->ui_url);
  else
    cJSON_AddNullToObject(o, "url");
  char *s = cJSON_PrintUnformatted(o);
  printf("%s\n", s);
  cJSON_free(s);
  cJSON_Delete(o);
}

void mu_cli_status_print(const struct mu_app_status *st, const char *handle, int json)
{
  if (json) {
    status_json(st, handle);
    return;
  }
  /* A job held up says so and why on the first line; a failed one its root cause. */
  if (st->reason != NULL)
    printf("AppStatus: cannot make progress: %s\n", st->reason);
  else if (st->state == MU_STATE_FAILED && st->root_cause != NULL)
    printf("AppStatus: failed: %s\n", st->root_cause);
  else
    printf("AppStatus:\n");
  printf("    State: %s\n    Num Restarts: %ld\n", mu_job_state_name(st->state), st->num_restarts);
  if (st->started_at > 0) {
    char when[64];
    time_t t = (time_t)st->started_at;
    struct tm tm;
    strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S %Z", localtime_r(&t, &tm));
    printf("    Started: %s (%s %.1fs)\n", when, st->ended_at > 0 ? "ran" : "running for",
           status_duration(st));
  }
  char rdzv[256] = "";
  if (st->rdzv_endpoint != NULL && st->state == MU_STATE_RUNNING)
    mu_cli_rdzv_line(st, rdzv, sizeof(rdzv));
  if (rdzv[0] != '\0')
    printf("    Rendezvous: %s\n", rdzv + 8); /* past " | rdzv " */
  cJSON *run = status_run(st);
  if (run != NULL) {
    mu_cli_goodput_print(run, "    ", 1);
    mu_cli_goodput_table(run, st);
  }
  cJSON_Delete(run);
  printf("    Roles:\n");
  for (size_t i = 0; i < st->nreplicas; i++) {
    const struct mu_replica_status *r = &st->replicas[i];
    printf(" %c%s[%ld]:%s", r->replica_id == 0 ? '*' : ' ', r->role, r->replica_id,
           mu_job_state_name(r->state));
    if (r->state == MU_STATE_FAILED)
      printf(" (exitcode: %d)", r->exit_code);
    printf("\n");
    if (r->state == MU_STATE_FAILED || r->state == MU_STATE_SUCCEEDED)
      printf("        hostname: %s\n", r->hostname ? r->hostname : "");
    if (r->msg && r->msg[0])
      printf("        error_msg: %s\n", r->msg);
  }
  printf("    Msg: %s\n", st->msg ? st->msg : "");
  if (st->root_cause != NULL)
    printf("    Root Cause: %s\n", st->root_cause);
  printf("    Structured Error Msg: %s\n",
         st->structured_error_msg ? st->structured_error_msg : "<NONE>");
  ui_url_line(st);
}
