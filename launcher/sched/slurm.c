/* The slurm scheduler: one sbatch script per app in TorchX's heterogeneous-job layout (every
 * replica of every role is one het group; one srun with ':'-separated groups), submitted with
 * `sbatch --parsable`, watched with squeue and sacct, stopped with scancel.
 *
 * When a role uses ${rdzv_endpoint} (or -cfg rdzv=job) the script starts the job's own musterd
 * on the batch host before srun and hands its endpoint to every node, so no rendezvous service
 * needs installing. -cfg rdzv=HOST:PORT points at an existing musterd or etcd instead.
 *
 * Divergences from TorchX (docs/slurm.md): the banner names muster; --comment/--mail-* come in
 * a fixed order; --account exists; `log` without a stream prints stdout then stderr.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "fsutil.h"
#include "alloc.h"
#include "muster/errno.h"
#include "muster/mu.h"
#include "opts.h"
#include "sched_exec.h"
#include "slurm.h"

#define SLURM_OUT_MAX (8u << 20)
#define SLURM_JOBDIRS ".musterslurmjobdirs"
#define SLURM_SCRIPT "muster-sbatch.sh"
#define SLURM_RANK0_ENV "SLURM_JOB_NODELIST_HET_GROUP_0"

static const struct mu_runopt slurm_runopts[] = {
    {"partition", MU_RUNOPT_STR, NULL, 0, "partition of every het group (#SBATCH --partition)"},
    {"time", MU_RUNOPT_STR, NULL, 0, "time limit, e.g. 1:00:00 (#SBATCH --time)"},
    {"account", MU_RUNOPT_STR, NULL, 0, "account to charge (#SBATCH --account)"},
    {"constraint", MU_RUNOPT_STR, NULL, 0, "node features (#SBATCH --constraint)"},
    {"qos", MU_RUNOPT_STR, NULL, 0, "quality of service (#SBATCH --qos)"},
    {"comment", MU_RUNOPT_STR, NULL, 0, "job comment (sbatch --comment)"},
    {"mail-user", MU_RUNOPT_STR, NULL, 0, "where Slurm mails job events (sbatch --mail-user)"},
    {"mail-type", MU_RUNOPT_STR, NULL, 0, "which events, e.g. END,FAIL (sbatch --mail-type)"},
    {"job_dir", MU_RUNOPT_STR, NULL, 0,
     "directory the job runs in (must not exist; created); logs go there and it is recorded "
     "in ./" SLURM_JOBDIRS},
    {"slurm_version", MU_RUNOPT_STR, NULL, 0,
     "Slurm version for the GPU flag (default: from sinfo --version, else 24.05)"},
    {"rdzv", MU_RUNOPT_STR, "auto", 0,
     "rendezvous for ${rdzv_endpoint}: auto (the script starts its own musterd when a role "
     "uses it), job (always), or HOST:PORT of an existing musterd or etcd"},
    {"rdzv_host", MU_RUNOPT_STR, NULL, 0,
     "address the nodes reach the job's musterd at (default: the batch host's hostname)"},
    {"rdzv_port", MU_RUNOPT_INT, NULL, 0,
     "port of the job's musterd (default: 29400 + job id modulo 2000)"},
    {"musterd", MU_RUNOPT_STR, "musterd", 0, "musterd program on the batch host"},
    {"user", MU_RUNOPT_STR, NULL, 0,
     "muster list: whose jobs (squeue --user; ALL for every user; default: yours); "
     "partition= narrows the list to a partition"},
    {NULL, 0, NULL, 0, NULL},
};

/* ================================================================================ render */

/* TorchX's srun token quoting: split on the macros that become shell variables, quote each
 * piece, join with the variable in double quotes. */
static int quote_token(const char *s, struct mu_buf *out)
{
  static const struct {
    const char *macro;
    const char *var;
  } vars[] = {{"${app_id}", "\"$SLURM_JOB_ID\""},
              {"${rdzv_endpoint}", "\"$MUSTER_RDZV_ENDPOINT\""}};
  const char *p = s;
  int rc = 0;

  for (;;) {
    const char *best = NULL;
    size_t bi = 0, i;
    for (i = 0; i < sizeof vars / sizeof vars[0]; i++) {
      const char *h = strstr(p, vars[i].macro);
      if (h && (best == NULL || h < best)) {
        best = h;
        bi = i;
      }
    }
    {
      char *piece = mu_strndup(p, best ? (size_t)(best - p) : strlen(p));
      rc = mu_shell_quote(piece, out);
      mu_free(piece);
    }
    if (rc || best == NULL)
      return rc;
    rc = mu_buf_puts(out, vars[bi].var);
    if (rc)
      return rc;
    p = best + strlen(vars[bi].macro);
  }
}

static int valid_host_port(const char *s)
{
  const char *colon = strrchr(s, ':');
  long p;
  return colon && colon != s && mu_parse_long(colon + 1, 1, 65535, &p) == 0;
}

int mu_slurm_render(const struct mu_app *app, const struct mu_cfg *cfg,
                    const struct mu_slurm_env *env, struct mu_buf *script, struct mu_strvec *opts,
                    struct mu_buf *err)
{
  static const char *const group_opts[] = {"partition",  "time", "account",
                                           "constraint", "qos",  NULL};
  static const char *const job_opts[] = {"comment", "mail-user", "mail-type", NULL};
  const char *rdzv = mu_cfg_get(cfg, "rdzv"), *v;
  struct mu_buf srun = MU_BUF_INIT(SLURM_OUT_MAX);
  long min_retries = -1, port = 0;
  int own_rdzv = 0, rc = 0, first = 1;
  size_t ri, i;
  long k;

  if (app->nroles == 0) {
    mu_buf_puts(err, "app has no roles; a component must define at least one");
    return MU_EINVAL;
  }
  if (rdzv == NULL || strcmp(rdzv, "auto") == 0)
    own_rdzv = mu_app_mentions(app, "${rdzv_endpoint}");
  else if (strcmp(rdzv, "job") == 0)
    own_rdzv = 1;
  else if (!valid_host_port(rdzv)) {
    mu_buf_printf(err, "-cfg rdzv: '%s' is not auto, job or HOST:PORT (e.g. login1:29400)", rdzv);
    return MU_EINVAL;
  }
  v = mu_cfg_get(cfg, "rdzv_port");
  if (v && mu_parse_long(v, 1, 65535, &port) != 0) {
    mu_buf_printf(err, "-cfg rdzv_port: '%s' is not a port number (1-65535)", v);
    return MU_EINVAL;
  }
  for (ri = 0; ri < app->nroles; ri++)
    if (min_retries < 0 || app->roles[ri].max_retries < min_retries)
      min_retries = app->roles[ri].max_retries;

  mu_buf_printf(script, "#!/bin/bash\n#\n# Generated by muster %s\n# Run with: sbatch --parsable",
                MU_VERSION);
  v = mu_cfg_get(cfg, "job_dir");
  if (v) {
    mu_strvec_pushf(opts, "--chdir=%s", v);
  }
  for (i = 0; job_opts[i]; i++) {
    v = mu_cfg_get(cfg, job_opts[i]);
    if (v)
      mu_strvec_pushf(opts, "--%s=%s", job_opts[i], v);
  }
  for (i = 0; i < opts->n; i++)
    mu_buf_printf(script, " %s", opts->v[i]);
  mu_buf_puts(script, "\n#\n");

  for (ri = 0; ri < app->nroles; ri++) {
    const struct mu_role *r = &app->roles[ri];
    const struct mu_resource *res = &r->resource;
    for (k = 0; k < r->num_replicas; k++) {
      char rid[24], nrep[24], *name = mu_asprintf("%s-%ld", r->name, k), *s;
      struct mu_macros m = {0};
      struct mu_buf envtok = MU_BUF_INIT(1 << 20);

      if (!first)
        mu_buf_puts(script, "#SBATCH hetjob\n");
      mu_buf_printf(script, "#SBATCH --job-name=%s --requeue", name);
      for (i = 0; group_opts[i]; i++) {
        v = mu_cfg_get(cfg, group_opts[i]);
        if (v)
          mu_buf_printf(script, " --%s=%s", group_opts[i], v);
      }
      mu_buf_puts(script, " --ntasks-per-node=1");
      if (res->cpu > 0)
        mu_buf_printf(script, " --cpus-per-task=%ld", res->cpu);
      if (res->memMB > 0 && !env->nomem)
        mu_buf_printf(script, " --mem=%ld", res->memMB);
      if (res->gpu > 0) {
        if (env->major > 24 || (env->major == 24 && env->minor >= 11))
          mu_buf_printf(script, " --gpus-per-node=%ld", res->gpu);
        else
          mu_buf_printf(script, " --gpus-per-task=%ld --ntasks=1", res->gpu);
      }
      mu_buf_putc(script, '\n');

      /* The srun group. */
      snprintf(rid, sizeof rid, "%ld", k);
      snprintf(nrep, sizeof nrep, "%ld", r->num_replicas);
      m.app_id = "${app_id}";
      m.replica_id = rid;
      m.img_root = r->image ? r->image : "";
      m.rank0_env = SLURM_RANK0_ENV;
      m.rdzv_endpoint =
          rdzv && strcmp(rdzv, "auto") && strcmp(rdzv, "job") ? rdzv : "${rdzv_endpoint}";
      m.num_replicas = nrep;
      if (!first)
        mu_buf_puts(&srun, " :\\\n     ");
      else
        mu_buf_puts(&srun, "srun ");
      s = mu_asprintf("--output=slurm-${app_id}-%s.out", name);
      quote_token(s, &srun);
      mu_free(s);
      s = mu_asprintf(" --error=slurm-${app_id}-%s.err", name);
      mu_buf_putc(&srun, ' ');
      quote_token(s + 1, &srun);
      mu_free(s);
      mu_buf_puts(&srun, " --wait=60 --kill-on-bad-exit=1");
      if (r->env.n > 0) {
        mu_buf_puts(&envtok, "--export=ALL");
        for (i = 0; i < r->env.n; i++) {
          s = mu_macros_apply(&m, r->env.v[i].value);
          mu_buf_printf(&envtok, ",%s=%s", r->env.v[i].key, s);
          mu_free(s);
        }
        mu_buf_putc(&srun, ' ');
        quote_token(mu_buf_str(&envtok), &srun);
      }
      mu_buf_release(&envtok);
      s = mu_macros_apply(&m, r->entrypoint ? r->entrypoint : "");
      mu_buf_putc(&srun, ' ');
      quote_token(s, &srun);
      mu_free(s);
      for (i = 0; i < r->args.n; i++) {
        s = mu_macros_apply(&m, r->args.v[i]);
        mu_buf_putc(&srun, ' ');
        quote_token(s, &srun);
        mu_free(s);
      }
      mu_free(name);
      first = 0;
    }
  }
  mu_buf_puts(script, "\nset -evx\n\nexport PYTHONUNBUFFERED=1\nexport SLURM_UNBUFFEREDIO=1\n");
  mu_buf_printf(script, "export TORCHX_MAX_RETRIES=%ld\n", min_retries < 0 ? 0 : min_retries);
  if (own_rdzv) {
    const char *host = mu_cfg_get(cfg, "rdzv_host"), *bin = mu_cfg_get(cfg, "musterd");
    mu_buf_puts(script, "\n# The job's own rendezvous: musterd on the batch host, for every "
                        "node's muster agent.\n");
    if (host) {
      mu_buf_puts(script, "MUSTER_RDZV_HOST=");
      mu_shell_quote(host, script);
      mu_buf_putc(script, '\n');
    } else {
      mu_buf_puts(script, "MUSTER_RDZV_HOST=$(hostname)\n");
    }
    if (port > 0)
      mu_buf_printf(script, "MUSTER_RDZV_PORT=%ld\n", port);
    else
      mu_buf_puts(script, "MUSTER_RDZV_PORT=$((29400 + SLURM_JOB_ID % 2000))\n");
    mu_buf_puts(script, "export MUSTER_RDZV_ENDPOINT=\"$MUSTER_RDZV_HOST:$MUSTER_RDZV_PORT\"\n");
    mu_shell_quote(bin ? bin : "musterd", script);
    /* With an explicit rdzv_host musterd listens on that address only; else on all. */
    mu_buf_printf(script, " --listen \"%s:$MUSTER_RDZV_PORT\"",
                  host ? "$MUSTER_RDZV_HOST" : "0.0.0.0");
    mu_buf_puts(script,
                " > "
                "slurm-\"$SLURM_JOB_ID\"-musterd.log 2>&1 &\n"
                "MUSTERD_PID=$!\n"
                "trap 'kill \"$MUSTERD_PID\" 2>/dev/null || true' EXIT\n"
                "for _ in $(seq 100); do\n"
                "    if (exec 3<>\"/dev/tcp/$MUSTER_RDZV_HOST/$MUSTER_RDZV_PORT\") 2>/dev/null; "
                "then break; fi\n"
                "    kill -0 \"$MUSTERD_PID\" || { echo \"musterd did not start\" >&2; exit 1; }\n"
                "    sleep 0.1\n"
                "done\n");
  }
  mu_buf_puts(script, "\nset +e\n");
  mu_buf_puts(script, mu_buf_str(&srun));
  rc = mu_buf_puts(script,
                   "\nexitcode=$?\nset -e\n\necho \"job exited with code $exitcode\"\n"
                   "if [ $exitcode -ne 0 ]; then\n"
                   "    if [ \"$TORCHX_MAX_RETRIES\" -gt \"${SLURM_RESTART_COUNT:-0}\" ]; then\n"
                   "        scontrol requeue \"$SLURM_JOB_ID\"\n"
                   "    fi\n"
                   "    exit $exitcode\n"
                   "fi\n");
  mu_buf_release(&srun);
  if (rc != 0) {
    mu_buf_puts(err, "the sbatch script is over its size limit");
    return MU_E2BIG;
  }
  return 0;
}

/* ======================================================================= cluster queries */

int mu_slurm_parse_version(const char *out, int *major, int *minor)
{
  const char *p = out ? strchr(out, ' ') : NULL;
  char *end;
  long a, b;

  if (p == NULL)
    return MU_EPARSE;
  p++;
  a = strtol(p, &end, 10);
  if (end == p || *end != '.')
    return MU_EPARSE;
  p = end + 1;
  b = strtol(p, &end, 10);
  if (end == p)
    return MU_EPARSE;
  *major = (int)a;
  *minor = (int)b;
  return 0;
}

int mu_slurm_parse_nomem(const char *out, const char *partition)
{
  const char *line = out;
  while (line && *line) {
    const char *nl = strchr(line, '\n'), *comma = strchr(line, ',');
    size_t len = nl ? (size_t)(nl - line) : strlen(line);
    if (comma && comma < line + len) {
      size_t plen = (size_t)(comma - line);
      int is_default = plen > 0 && line[plen - 1] == '*';
      size_t nlen = is_default ? plen - 1 : plen;
      int match = partition ? (strlen(partition) == nlen && strncmp(line, partition, nlen) == 0)
                            : is_default;
      if (match) {
        char *end;
        long mb = strtol(comma + 1, &end, 10);
        if (end != comma + 1)
          return mb <= 1000;
      }
    }
    line = nl ? nl + 1 : NULL;
  }
  return 0;
}

static const struct {
  const char *name;
  enum mu_job_state state;
} slurm_states[] = {
    {"BOOT_FAIL", MU_STATE_FAILED},     {"CANCELLED", MU_STATE_CANCELLED},
    {"COMPLETED", MU_STATE_SUCCEEDED},  {"DEADLINE", MU_STATE_FAILED},
    {"FAILED", MU_STATE_FAILED},        {"NODE_FAIL", MU_STATE_FAILED},
    {"OUT_OF_MEMORY", MU_STATE_FAILED}, {"PENDING", MU_STATE_PENDING},
    {"PREEMPTED", MU_STATE_FAILED},     {"RUNNING", MU_STATE_RUNNING},
    {"REQUEUED", MU_STATE_PENDING},     {"RESIZING", MU_STATE_PENDING},
    {"REVOKED", MU_STATE_FAILED},       {"SUSPENDED", MU_STATE_PENDING},
    {"TIMEOUT", MU_STATE_FAILED},       {"COMPLETING", MU_STATE_RUNNING},
    {"CONFIGURING", MU_STATE_PENDING},  {"REQUEUE_HOLD", MU_STATE_PENDING},
    {"REQUEUE_FED", MU_STATE_PENDING},
};

enum mu_job_state mu_slurm_state(const char *s)
{
  size_t i, n;
  if (s == NULL)
    return MU_STATE_UNKNOWN;
  n = strcspn(s, " +");
  for (i = 0; i < sizeof slurm_states / sizeof slurm_states[0]; i++)
    if (strlen(slurm_states[i].name) == n && strncmp(slurm_states[i].name, s, n) == 0)
      return slurm_states[i].state;
  return MU_STATE_UNKNOWN;
}

/* The app state from the replicas: the worst one wins, success only when all succeeded. */
static enum mu_job_state aggregate(const struct mu_app_status *st)
{
  static const enum mu_job_state order[] = {MU_STATE_FAILED,  MU_STATE_CANCELLED,
                                            MU_STATE_RUNNING, MU_STATE_PENDING,
                                            MU_STATE_UNKNOWN, MU_STATE_SUCCEEDED};
  size_t i, j;
  for (j = 0; j < sizeof order / sizeof order[0]; j++)
    for (i = 0; i < st->nreplicas; i++)
      if (st->replicas[i].state == order[j])
        return order[j];
  return MU_STATE_UNKNOWN;
}

/* The end of every status parser: the app id and the overall state once replicas were found.
 * Returns: 0, or MU_ENOENT when the output had no row of the job. */
static int status_finish(struct mu_app_status *out, const char *app_id)
{
  if (out->nreplicas == 0)
    return MU_ENOENT;
  out->app_id = mu_strdup(app_id);
  out->state = aggregate(out);
  return 0;
}

static void add_replica(struct mu_app_status *st, size_t *cap, const char *jobname,
                        const char *state, const char *host)
{
  struct mu_replica_status *r;
  const char *dash = strrchr(jobname, '-');
  long idx = 0;

  if (st->nreplicas == *cap) {
    *cap = *cap ? *cap * 2 : 8;
    st->replicas = mu_realloc(st->replicas, *cap * sizeof *st->replicas);
  }
  r = &st->replicas[st->nreplicas++];
  memset(r, 0, sizeof *r);
  if (dash && dash != jobname && mu_parse_long(dash + 1, 0, 1L << 30, &idx) == 0)
    r->role = mu_strndup(jobname, (size_t)(dash - jobname));
  else
    r->role = mu_strdup(jobname);
  r->replica_id = idx;
  r->state = mu_slurm_state(state);
  r->hostname = mu_strdup(host ? host : "");
  r->exit_code = -1;
  /* The raw state is the message of replicas that ended badly ("CANCELLED by 2166"). */
  r->msg = mu_strdup(r->state == MU_STATE_FAILED || r->state == MU_STATE_CANCELLED ||
                             r->state == MU_STATE_UNKNOWN
                         ? state
                         : "");
}

/* Splits one '|' line into at most max fields (in place). Returns the count. */
static size_t split_bar(char *line, char **f, size_t max)
{
  size_t n = 0;
  char *p = line;
  while (n < max) {
    f[n++] = p;
    p = strchr(p, '|');
    if (p == NULL)
      break;
    *p++ = '\0';
  }
  return n;
}

int mu_slurm_parse_sacct(const char *text, const char *app_id, struct mu_app_status *out,
                         struct mu_buf *err)
{
  char *copy = mu_strdup(text ? text : ""), *save = NULL, *line, *f[16];
  int col_id = -1, col_name = -1, col_state = -1, rc = 0, header = 1;
  size_t cap = 0, n, i;

  memset(out, 0, sizeof *out);
  out->num_restarts = -1;
  for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    n = split_bar(line, f, 16);
    if (header) {
      for (i = 0; i < n; i++) {
        if (strcmp(f[i], "JobID") == 0)
          col_id = (int)i;
        else if (strcmp(f[i], "JobName") == 0)
          col_name = (int)i;
        else if (strcmp(f[i], "State") == 0)
          col_state = (int)i;
      }
      if (col_id < 0 || col_name < 0 || col_state < 0) {
        mu_buf_puts(err, "sacct: no JobID/JobName/State header in its output");
        rc = MU_EPARSE;
        goto out;
      }
      header = 0;
      continue;
    }
    if ((size_t)col_state >= n || (size_t)col_name >= n || (size_t)col_id >= n)
      continue;
    if (strchr(f[col_id], '.'))
      continue; /* a step */
    add_replica(out, &cap, f[col_name], f[col_state], NULL);
    if (out->msg == NULL)
      out->msg = mu_strdup(f[col_state]);
  }
  rc = status_finish(out, app_id);
out:
  mu_free(copy);
  return rc;
}

int mu_slurm_parse_squeue(const char *text, const char *app_id, struct mu_app_status *out,
                          struct mu_buf *err)
{
  char *copy = mu_strdup(text ? text : ""), *save = NULL, *line, *f[8];
  size_t cap = 0;

  (void)err;
  memset(out, 0, sizeof *out);
  out->num_restarts = -1;
  for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    if (split_bar(line, f, 8) < 4)
      continue;
    add_replica(out, &cap, f[1], f[2], f[3]);
    if (out->msg == NULL)
      out->msg = mu_strdup(f[2]);
  }
  mu_free(copy);
  return status_finish(out, app_id);
}

static long het_number(const cJSON *job, const char *key)
{
  const cJSON *h = cJSON_GetObjectItemCaseSensitive(job, key);
  const cJSON *num = cJSON_GetObjectItemCaseSensitive(h, "number");
  if (cJSON_IsNumber(h))
    return (long)h->valuedouble;
  if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(h, "set")) && cJSON_IsNumber(num))
    return (long)num->valuedouble;
  return 0;
}

int mu_slurm_parse_squeue_json(const char *json, const char *app_id, struct mu_app_status *out,
                               struct mu_buf *err)
{
  cJSON *root = cJSON_Parse(json);
  const cJSON *jobs = cJSON_GetObjectItemCaseSensitive(root, "jobs"), *j;
  long want = 0;
  size_t cap = 0;

  memset(out, 0, sizeof *out);
  out->num_restarts = -1;
  if (!cJSON_IsArray(jobs) || mu_parse_long(app_id, 0, 1L << 40, &want) != 0) {
    mu_buf_puts(err, "squeue --json: no jobs array in its output");
    cJSON_Delete(root);
    return MU_EPARSE;
  }
  cJSON_ArrayForEach(j, jobs)
  {
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "job_id");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(j, "name");
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(j, "job_state");
    const cJSON *jr = cJSON_GetObjectItemCaseSensitive(j, "job_resources");
    const char *state = NULL, *host = NULL;
    long het = het_number(j, "het_job_id");
    if (!cJSON_IsNumber(id) || !cJSON_IsString(name))
      continue;
    if ((long)id->valuedouble != want && het != want)
      continue;
    if (cJSON_IsArray(st) && cJSON_IsString(st->child))
      state = st->child->valuestring;
    else if (cJSON_IsString(st))
      state = st->valuestring;
    if (cJSON_IsObject(jr)) {
      const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(jr, "nodes");
      if (cJSON_IsString(nodes))
        host = nodes->valuestring;
    }
    if (host == NULL) {
      const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(j, "nodes");
      if (cJSON_IsString(nodes) && nodes->valuestring[0] != '\0')
        host = nodes->valuestring;
    }
    add_replica(out, &cap, name->valuestring, state ? state : "UNKNOWN", host);
    if (out->msg == NULL)
      out->msg = mu_strdup(state ? state : "");
  }
  cJSON_Delete(root);
  return status_finish(out, app_id);
}

/* =============================================================================== running */

struct slurm_priv {
  char *script;
  struct mu_strvec opts; /* --chdir, --comment, ... */
  char *job_dir;
};

/* What a Slurm tool's stderr means, in the order it is checked (see mu_exec_tool). */
static const struct mu_exec_hint slurm_hints[] = {
    {{"invalid partition", "Invalid partition"},
     "`sinfo` lists the partitions; pick one with -cfg partition=NAME"},
    {{"Invalid job id", "Invalid job ID"}, NULL},
    {{"Unable to contact slurm controller", "configuration"},
     "the Slurm controller is not reachable; check SLURM_CONF and that slurmctld runs"},
    {{NULL}, NULL},
};

/* Runs a Slurm command; on failure writes Slurm's own message plus what to do into err. */
static int slurm_run(struct mu_strvec *av, struct mu_buf *out, struct mu_buf *err)
{
  char *missing = mu_asprintf("%s not found: install the Slurm client tools (Debian: "
                              "slurm-client) or run on a Slurm login node",
                              av->v[0]);
  int rc = mu_exec_tool(av->v, NULL, av->v[0], missing, slurm_hints, out, err);
  mu_free(missing);
  return rc;
}

static void cluster_env(const struct mu_app *app, const struct mu_cfg *cfg,
                        struct mu_slurm_env *env)
{
  const char *ver = mu_cfg_get(cfg, "slurm_version");
  int need_gpu = 0, need_mem = 0;
  size_t i;

  env->major = 24;
  env->minor = 5;
  env->nomem = 0;
  for (i = 0; i < app->nroles; i++) {
    need_gpu |= app->roles[i].resource.gpu > 0;
    need_mem |= app->roles[i].resource.memMB > 0;
  }
  if (ver) {
    char *s = mu_asprintf("slurm %s", ver);
    mu_slurm_parse_version(s, &env->major, &env->minor);
    mu_free(s);
  } else if (need_gpu) {
    struct mu_strvec av = MU_STRVEC_INIT;
    struct mu_buf out = MU_BUF_INIT(4096);
    int status;
    mu_strvec_push(&av, "sinfo");
    mu_strvec_push(&av, "--version");
    if (mu_exec_capture(av.v, NULL, &out, NULL, &status) == 0 && status == 0)
      mu_slurm_parse_version(mu_buf_str(&out), &env->major, &env->minor);
    mu_buf_release(&out);
    mu_strvec_release(&av);
  }
  if (need_mem) {
    struct mu_strvec av = MU_STRVEC_INIT;
    struct mu_buf out = MU_BUF_INIT(1 << 20);
    int status;
    mu_strvec_push(&av, "sinfo");
    mu_strvec_push(&av, "--format");
    mu_strvec_push(&av, "%P,%m");
    mu_strvec_push(&av, "--noconvert");
    if (mu_exec_capture(av.v, NULL, &out, NULL, &status) == 0 && status == 0)
      env->nomem = mu_slurm_parse_nomem(mu_buf_str(&out), mu_cfg_get(cfg, "partition"));
    mu_buf_release(&out);
    mu_strvec_release(&av);
  }
}

static int slurm_dryrun(const struct mu_app *app, const struct mu_cfg *cfg, struct mu_dryrun *out,
                        struct mu_buf *err)
{
  struct mu_buf script = MU_BUF_INIT(SLURM_OUT_MAX);
  struct mu_slurm_env env;
  struct slurm_priv *p = mu_calloc(1, sizeof *p);
  const char *jd = mu_cfg_get(cfg, "job_dir");
  int rc;

  cluster_env(app, cfg, &env);
  rc = mu_slurm_render(app, cfg, &env, &script, &p->opts, err);
  if (rc != 0) {
    mu_strvec_release(&p->opts);
    mu_free(p);
    mu_buf_release(&script);
    return rc;
  }
  p->script = mu_strdup(mu_buf_str(&script));
  p->job_dir = jd ? mu_strdup(jd) : NULL;
  out->text = mu_buf_detach(&script);
  out->app_id = mu_strdup("<assigned by sbatch>");
  out->priv = p;
  out->sched = &mu_sched_slurm;
  return 0;
}

static void slurm_dryrun_free(struct mu_dryrun *req)
{
  struct slurm_priv *p = req ? req->priv : NULL;
  if (p == NULL)
    return;
  mu_free(p->script);
  mu_strvec_release(&p->opts);
  mu_free(p->job_dir);
  mu_free(p);
  req->priv = NULL;
}

static int slurm_schedule(struct mu_dryrun *req, struct mu_buf *err)
{
  struct slurm_priv *p = req->priv;
  struct mu_strvec av = MU_STRVEC_INIT;
  struct mu_buf out = MU_BUF_INIT(4096);
  char tmpl[] = "/tmp/muster-sbatch-XXXXXX", *dir = NULL, *path = NULL, *id;
  size_t i;
  int rc = 0;

  if (p->job_dir) {
    if (mkdir(p->job_dir, 0777) != 0) {
      mu_buf_printf(err, "-cfg job_dir: cannot create '%s': %s (it must not exist yet)", p->job_dir,
                    strerror(errno));
      rc = MU_EINVAL;
      goto out;
    }
    dir = mu_strdup(p->job_dir);
  } else {
    if (mkdtemp(tmpl) == NULL) {
      mu_buf_printf(err, "cannot create a temporary directory: %s", strerror(errno));
      rc = MU_EIO;
      goto out;
    }
    dir = mu_strdup(tmpl);
  }
  path = mu_asprintf("%s/%s", dir, SLURM_SCRIPT);
  rc = mu_write_file_atomic(path, p->script, strlen(p->script), 0644, 0);
  if (rc != 0) {
    mu_buf_printf(err, "cannot write '%s': %s", path, mu_strerror(rc));
    goto out;
  }
  mu_strvec_push(&av, "sbatch");
  mu_strvec_push(&av, "--parsable");
  for (i = 0; i < p->opts.n; i++)
    mu_strvec_push(&av, p->opts.v[i]);
  mu_strvec_push(&av, path);
  rc = slurm_run(&av, &out, err);
  if (rc != 0)
    goto out;
  id = mu_exec_chomp(out.data ? out.data : (char *)"");
  id[strcspn(id, ";")] = '\0'; /* "123;cluster" on federations */
  if (*id == '\0') {
    mu_buf_puts(err, "sbatch printed no job id");
    rc = MU_EPROTO;
    goto out;
  }
  mu_free(req->app_id);
  req->app_id = mu_strdup(id);
  if (p->job_dir) {
    FILE *fp = fopen(SLURM_JOBDIRS, "a");
    char *abs = realpath(p->job_dir, NULL);
    if (fp) {
      fprintf(fp, "%s = %s\n", id, abs ? abs : p->job_dir);
      fclose(fp);
    }
    free(abs); /* realpath's buffer comes from libc */
  }
out:
  if (path && !p->job_dir)
    unlink(path);
  if (dir && !p->job_dir)
    rmdir(dir);
  mu_free(path);
  mu_free(dir);
  mu_strvec_release(&av);
  mu_buf_release(&out);
  return rc;
}

static int slurm_describe(const char *app_id, const struct mu_cfg *cfg, struct mu_app_status *out,
                          struct mu_buf *err)
{
  struct mu_strvec av = MU_STRVEC_INIT;
  struct mu_buf o = MU_BUF_INIT(SLURM_OUT_MAX), e1 = MU_BUF_INIT(4096);
  int rc;

  (void)cfg;
  memset(out, 0, sizeof *out);
  mu_strvec_push(&av, "squeue");
  mu_strvec_push(&av, "--noheader");
  mu_strvec_pushf(&av, "--jobs=%s", app_id);
  mu_strvec_push(&av, "--states=all");
  mu_strvec_push(&av, "--format=%i|%j|%T|%N");
  rc = slurm_run(&av, &o, &e1);
  if (rc == 0)
    rc = mu_slurm_parse_squeue(mu_buf_str(&o), app_id, out, err);
  if (rc == MU_ENOENT && strstr(mu_buf_str(&e1), "not found")) {
    mu_buf_puts(err, mu_buf_str(&e1));
    goto out;
  }
  if (rc != 0) {
    /* Gone from squeue (purged after MinJobAge): ask accounting. */
    mu_app_status_release(out);
    memset(out, 0, sizeof *out);
    mu_strvec_release(&av);
    mu_buf_clear(&o);
    mu_strvec_push(&av, "sacct");
    mu_strvec_push(&av, "--parsable2");
    mu_strvec_push(&av, "-j");
    mu_strvec_push(&av, app_id);
    rc = slurm_run(&av, &o, err);
    if (rc == 0)
      rc = mu_slurm_parse_sacct(mu_buf_str(&o), app_id, out, err);
    if (rc == MU_ENOENT || (rc != 0 && strstr(mu_buf_str(err), "accounting storage is "
                                                               "disabled"))) {
      mu_buf_clear(err);
      mu_buf_printf(err, "slurm job '%s' not found in squeue%s", app_id,
                    rc == MU_ENOENT ? " or sacct" : " (and accounting is disabled)");
      rc = MU_ENOENT;
    }
  }
out:
  mu_strvec_release(&av);
  mu_buf_release(&o);
  mu_buf_release(&e1);
  return rc;
}

static int slurm_cancel(const char *app_id, const struct mu_cfg *cfg, struct mu_buf *err)
{
  struct mu_strvec av = MU_STRVEC_INIT;
  int rc;
  (void)cfg;
  mu_strvec_push(&av, "scancel");
  mu_strvec_push(&av, app_id);
  rc = slurm_run(&av, NULL, err);
  mu_strvec_release(&av);
  return rc;
}

static int slurm_list(const struct mu_cfg *cfg, struct mu_app_list_entry **out, size_t *n,
                      struct mu_buf *err)
{
  struct mu_strvec av = MU_STRVEC_INIT;
  struct mu_buf o = MU_BUF_INIT(SLURM_OUT_MAX);
  char *copy = NULL, *save = NULL, *line, *f[4];
  size_t cap = 0;
  int rc;

  const char *user = mu_cfg_get(cfg, "user");
  const char *partition = mu_cfg_get(cfg, "partition");
  *out = NULL;
  *n = 0;
  mu_strvec_push(&av, "squeue");
  if (user == NULL)
    mu_strvec_push(&av, "--me"); /* the user's jobs, as sacct's default */
  else if (strcmp(user, "ALL") != 0)
    mu_strvec_pushf(&av, "--user=%s", user);
  if (partition != NULL)
    mu_strvec_pushf(&av, "--partition=%s", partition);
  mu_strvec_push(&av, "--noheader");
  mu_strvec_push(&av, "--states=all");
  mu_strvec_push(&av, "--format=%i|%j|%T");
  rc = slurm_run(&av, &o, err);
  if (rc != 0)
    goto out;
  copy = mu_strdup(mu_buf_str(&o));
  for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    char *plus;
    if (split_bar(line, f, 4) < 3)
      continue;
    plus = strchr(f[0], '+');
    if (plus && strcmp(plus, "+0") != 0)
      continue; /* a non-leader het component */
    if (plus)
      *plus = '\0';
    if (*n == cap) {
      cap = cap ? cap * 2 : 16;
      *out = mu_realloc(*out, cap * sizeof **out);
    }
    (*out)[*n].app_id = mu_strdup(f[0]);
    (*out)[*n].name = mu_strdup(f[1]);
    (*out)[*n].state = mu_slurm_state(f[2]);
    (*n)++;
  }
out:
  mu_free(copy);
  mu_strvec_release(&av);
  mu_buf_release(&o);
  return rc;
}

/* The directory the job's output files are in: ./.musterslurmjobdirs, else ".". */
static char *job_dir_of(const char *app_id)
{
  FILE *fp = fopen(SLURM_JOBDIRS, "r");
  char line[4096], *found = NULL;
  size_t n = strlen(app_id);
  while (fp && fgets(line, sizeof line, fp)) {
    if (strncmp(line, app_id, n) == 0 && strncmp(line + n, " = ", 3) == 0) {
      mu_free(found);
      found = mu_strdup(mu_exec_chomp(line + n + 3));
    }
  }
  if (fp)
    fclose(fp);
  return found ? found : mu_strdup(".");
}

static int copy_new(int fd, int out_fd, off_t *off)
{
  char b[8192];
  ssize_t r;
  int any = 0;
  while ((r = pread(fd, b, sizeof b, *off)) > 0) {
    if (write(out_fd, b, (size_t)r) != r)
      return -1;
    *off += r;
    any = 1;
  }
  return any;
}

/* Offset where the last `tail` lines of fd start. */
static off_t tail_offset(int fd, long tail)
{
  struct stat st;
  char c;
  off_t pos;
  long lines = 0;
  if (tail < 0 || fstat(fd, &st) != 0)
    return 0;
  for (pos = st.st_size - 1; pos >= 0; pos--) {
    if (pread(fd, &c, 1, pos) != 1)
      break;
    if (c == '\n' && pos != st.st_size - 1 && ++lines == tail)
      return pos + 1;
  }
  return 0;
}

static int slurm_log(const char *app_id, const char *role, long replica, enum mu_log_stream s,
                     int follow, long tail, int out_fd, const struct mu_cfg *cfg,
                     struct mu_buf *err)
{
  char *dir = NULL, *paths[2] = {NULL, NULL};
  int fds[2] = {-1, -1}, rc = 0, i, nf = 0;
  off_t offs[2] = {0, 0};

  /* Every replica (of the role): each one's files, lines prefixed role/replica. */
  if (role == NULL || replica < 0)
    return mu_sched_log_fanout(&mu_sched_slurm, app_id, role, replica, s, follow, tail, out_fd, cfg,
                               err);
  dir = job_dir_of(app_id);

  if (s == MU_STREAM_COMBINED || s == MU_STREAM_STDOUT)
    paths[nf++] = mu_asprintf("%s/slurm-%s-%s-%ld.out", dir, app_id, role, replica);
  if (s == MU_STREAM_COMBINED || s == MU_STREAM_STDERR)
    paths[nf++] = mu_asprintf("%s/slurm-%s-%s-%ld.err", dir, app_id, role, replica);
  for (i = 0; i < nf; i++) {
    fds[i] = open(paths[i], O_RDONLY | O_CLOEXEC);
    if (fds[i] < 0 && !follow) {
      mu_buf_printf(err,
                    "no log file '%s' (%s): the job has not started, the role/replica is "
                    "wrong, or it ran in another directory (run muster log from the submit "
                    "directory)",
                    paths[i], strerror(errno));
      rc = MU_ENOENT;
      goto out;
    }
    if (fds[i] >= 0)
      offs[i] = tail_offset(fds[i], tail);
  }
  for (;;) {
    struct mu_app_status st;
    struct mu_buf ignore = MU_BUF_INIT(4096);
    int terminal = 1;
    for (i = 0; i < nf; i++) {
      if (fds[i] < 0)
        fds[i] = open(paths[i], O_RDONLY | O_CLOEXEC);
      if (fds[i] >= 0 && copy_new(fds[i], out_fd, &offs[i]) < 0) {
        rc = MU_EIO;
        goto out;
      }
    }
    if (!follow)
      break;
    if (slurm_describe(app_id, cfg, &st, &ignore) == 0)
      terminal = mu_job_state_is_terminal(st.state);
    mu_app_status_release(&st);
    mu_buf_release(&ignore);
    if (terminal) {
      for (i = 0; i < nf; i++)
        if (fds[i] >= 0 && copy_new(fds[i], out_fd, &offs[i]) < 0)
          rc = MU_EIO;
      break;
    }
    {
      struct timespec ts = {0, 300 * 1000 * 1000};
      nanosleep(&ts, NULL);
    }
  }
out:
  for (i = 0; i < 2; i++) {
    if (fds[i] >= 0)
      close(fds[i]);
    mu_free(paths[i]);
  }
  mu_free(dir);
  return rc;
}

const struct mu_sched_ops mu_sched_slurm = {
    .name = "slurm",
    .help = "Slurm through sbatch/squeue/sacct/scancel (heterogeneous job per app)",
    .runopts = slurm_runopts,
    .dryrun = slurm_dryrun,
    .schedule = slurm_schedule,
    .describe = slurm_describe,
    .list = slurm_list,
    .cancel_existing = slurm_cancel,
    .log_open = slurm_log,
    .dryrun_free = slurm_dryrun_free,
};
