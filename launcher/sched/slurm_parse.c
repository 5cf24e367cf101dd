/* The slurm scheduler's parsers: sinfo's version and memory, Slurm job states, and squeue and
 * sacct output (text and JSON) into statuses and lists. Pure: the unit tests feed them recorded
 * output.
 */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "muster/errno.h"

#include "alloc.h"
#include "opts.h"
#include "slurm.h"

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

void mu_slurm_parse_list(const char *text, struct mu_app_list_entry **out, size_t *n)
{
  char *copy = mu_strdup(text ? text : ""), *save = NULL, *line, *f[4];
  size_t cap = 0;
  *out = NULL;
  *n = 0;
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
    memset(&(*out)[*n], 0, sizeof **out);
    (*out)[*n].app_id = mu_strdup(f[0]);
    (*out)[*n].name = mu_strdup(f[1]);
    (*out)[*n].state = mu_slurm_state(f[2]);
    (*n)++;
  }
  mu_free(copy);
}

int mu_slurm_parse_app(const char *script, const char *app_id, struct mu_app **out,
                       struct mu_buf *err)
{
  const char *line = strstr(script, "\n" MU_SLURM_APP_LINE);
  struct mu_buf applied = MU_BUF_INIT(SIZE_MAX);
  char *json;
  int rc;
  *out = NULL;
  if (line == NULL) {
    mu_buf_printf(err,
                  "the batch script of job %s carries no job spec (another tool or an older "
                  "muster submitted it); 'muster status' shows its replicas",
                  app_id);
    return MU_ENOENT;
  }
  line += 1 + strlen(MU_SLURM_APP_LINE);
  json = mu_strndup(line, strcspn(line, "\n"));
  mu_buf_put_replaced(&applied, json, "${app_id}", app_id); /* known now, not at sbatch */
  rc = mu_app_from_json(mu_buf_str(&applied), out) == 0 ? 0 : MU_EPARSE;
  if (rc != 0)
    mu_buf_printf(err, "the job spec in the batch script of job %s does not parse", app_id);
  mu_free(json);
  mu_buf_release(&applied);
  return rc;
}
