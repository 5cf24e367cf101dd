/* The kubernetes scheduler's parsers: Volcano job and task phases into job states, and the JSON
 * of `kubectl get` into statuses and lists. Pure, as the renderer: the unit tests feed them
 * recorded kubectl output.
 */
#include <string.h>

#include <cjson/cJSON.h>

#include "muster/errno.h"

#include "alloc.h"
#include "kubernetes.h"
#include "opts.h"

/* Volcano's job and task phases as job states (TorchX's mapping). */
static const struct phase_row {
  const char *phase;
  enum mu_job_state state;
} job_states[] =
    {
        {"Pending", MU_STATE_PENDING},     {"Aborting", MU_STATE_RUNNING},
        {"Aborted", MU_STATE_CANCELLED},   {"Running", MU_STATE_RUNNING},
        {"Restarting", MU_STATE_RUNNING},  {"Completing", MU_STATE_RUNNING},
        {"Completed", MU_STATE_SUCCEEDED}, {"Terminating", MU_STATE_RUNNING},
        {"Terminated", MU_STATE_FAILED},   {"Failed", MU_STATE_FAILED},
},
  task_states[] = {
      {"Pending", MU_STATE_PENDING},   {"Allocated", MU_STATE_PENDING},
      {"Pipelined", MU_STATE_PENDING}, {"Binding", MU_STATE_PENDING},
      {"Bound", MU_STATE_PENDING},     {"Running", MU_STATE_RUNNING},
      {"Releasing", MU_STATE_RUNNING}, {"Succeeded", MU_STATE_SUCCEEDED},
      {"Failed", MU_STATE_FAILED},     {"Unknown", MU_STATE_UNKNOWN},
};

/* The state of phase in a table of n rows; UNKNOWN for NULL or a phase not listed. */
static enum mu_job_state phase_state(const struct phase_row *rows, size_t n, const char *phase)
{
  for (size_t i = 0; phase && i < n; i++)
    if (strcmp(rows[i].phase, phase) == 0)
      return rows[i].state;
  return MU_STATE_UNKNOWN;
}

enum mu_job_state mu_k8s_job_state(const char *phase)
{
  return phase_state(job_states, sizeof job_states / sizeof job_states[0], phase);
}

enum mu_job_state mu_k8s_task_state(const char *phase)
{
  return phase_state(task_states, sizeof task_states / sizeof task_states[0], phase);
}

static const char *jpath_str(const cJSON *o, const char *a, const char *b, const char *c)
{
  const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, a);
  if (b)
    n = cJSON_GetObjectItemCaseSensitive(n, b);
  if (c)
    n = cJSON_GetObjectItemCaseSensitive(n, c);
  return cJSON_IsString(n) ? n->valuestring : NULL;
}

int mu_k8s_parse_status(const char *json, const char *app_id, struct mu_app_status *out,
                        struct mu_buf *err)
{
  cJSON *root = cJSON_Parse(json);
  const cJSON *tsc, *t;
  const char *phase, *name, *msg;
  size_t n = 0;

  memset(out, 0, sizeof *out);
  out->num_restarts = -1;
  if (root == NULL || !cJSON_IsObject(root)) {
    mu_buf_puts(err, "kubectl get: output is not a JSON object");
    cJSON_Delete(root);
    return MU_EPARSE;
  }
  out->app_id = mu_strdup(app_id);
  phase = jpath_str(root, "status", "state", "phase");
  out->state = mu_k8s_job_state(phase);
  msg = jpath_str(root, "status", "state", "message");
  if (msg == NULL)
    msg = jpath_str(root, "status", "state", "reason");
  out->msg = mu_strdup(msg ? msg : (phase ? phase : ""));
  {
    const cJSON *rc = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(root, "status"), "retryCount");
    if (cJSON_IsNumber(rc))
      out->num_restarts = (long)rc->valuedouble;
  }
  name = jpath_str(root, "metadata", "name", NULL);
  tsc = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "status"),
                                         "taskStatusCount");
  cJSON_ArrayForEach(t, tsc) n++;
  out->replicas = n ? mu_calloc(n, sizeof *out->replicas) : NULL;
  cJSON_ArrayForEach(t, tsc)
  {
    const char *dash = strrchr(t->string, '-');
    const cJSON *ph = cJSON_GetObjectItemCaseSensitive(t, "phase");
    struct mu_replica_status *r;
    long idx;
    if (dash == NULL || dash == t->string || mu_parse_long(dash + 1, 0, 1L << 30, &idx) != 0)
      continue; /* the job's own musterd task */
    r = &out->replicas[out->nreplicas++];
    r->role = mu_strndup(t->string, (size_t)(dash - t->string));
    r->replica_id = idx;
    /* TorchX takes the first phase listed. */
    r->state = mu_k8s_task_state(ph && ph->child ? ph->child->string : NULL);
    r->hostname = name ? mu_asprintf("%s-%s-0", name, t->string) : mu_strdup("");
    r->exit_code = -1;
    r->msg = mu_strdup("");
  }
  cJSON_Delete(root);
  return 0;
}

int mu_k8s_parse_list(const char *json, const char *ns, struct mu_app_list_entry **out, size_t *n,
                      struct mu_buf *err)
{
  cJSON *root = cJSON_Parse(json);
  const cJSON *items, *it;
  size_t cap = 0;

  *out = NULL;
  *n = 0;
  items = cJSON_GetObjectItemCaseSensitive(root, "items");
  if (root == NULL || !cJSON_IsArray(items)) {
    mu_buf_puts(err, "kubectl get: output is not a JSON list with items");
    cJSON_Delete(root);
    return MU_EPARSE;
  }
  cJSON_ArrayForEach(it, items) cap++;
  *out = cap ? mu_calloc(cap, sizeof **out) : NULL;
  cJSON_ArrayForEach(it, items)
  {
    const char *name = jpath_str(it, "metadata", "name", NULL);
    const char *ins = jpath_str(it, "metadata", "namespace", NULL);
    const char *app = jpath_str(it, "metadata", "labels", "app.kubernetes.io/name");
    struct mu_app_list_entry *e;
    if (name == NULL)
      continue;
    e = &(*out)[(*n)++];
    e->app_id = mu_asprintf("%s:%s", ins ? ins : ns, name);
    e->name = mu_strdup(app ? app : name);
    e->state = mu_k8s_job_state(jpath_str(it, "status", "state", "phase"));
  }
  cJSON_Delete(root);
  return 0;
}
