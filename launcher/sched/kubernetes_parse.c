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

static enum mu_job_state jobset_state(const cJSON *js, const char **why);

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
    const char *kind = jpath_str(it, "kind", NULL, NULL);
    int jobset = kind != NULL && strcmp(kind, "JobSet") == 0;
    const char *why;
    e = &(*out)[(*n)++];
    e->app_id = mu_asprintf("%s:%s%s", ins ? ins : ns, jobset ? "jobset:" : "", name);
    e->name = mu_strdup(app ? app : name);
    e->state = jobset ? jobset_state(it, &why)
                      : mu_k8s_job_state(jpath_str(it, "status", "state", "phase"));
  }
  cJSON_Delete(root);
  return 0;
}

/* ---------------------------------------------------------------------------------------------
 * JobSets
 */

/* The status condition of type `type` whose status is "True", or NULL. */
static const cJSON *true_condition(const cJSON *obj, const char *type)
{
  const cJSON *c;
  cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(
                            cJSON_GetObjectItemCaseSensitive(obj, "status"), "conditions"))
  {
    const char *t = jpath_str(c, "type", NULL, NULL), *s = jpath_str(c, "status", NULL, NULL);
    if (t != NULL && s != NULL && strcmp(t, type) == 0 && strcmp(s, "True") == 0)
      return c;
  }
  return NULL;
}

/* A JobSet's state: Completed and Failed conditions (or terminalState) are final, Suspended is
 * PENDING (Kueue has not admitted it), a JobSet with ready Jobs is RUNNING, one without is
 * PENDING, and one the controller has not touched yet (no status) UNKNOWN, as a Volcano Job.
 * *why gets the deciding condition's message (borrowed), or NULL. */
static enum mu_job_state jobset_state(const cJSON *js, const char **why)
{
  static const struct {
    const char *cond;
    enum mu_job_state state;
  } conds[] = {{"Completed", MU_STATE_SUCCEEDED},
               {"Failed", MU_STATE_FAILED},
               {"Suspended", MU_STATE_PENDING}};
  const cJSON *st = cJSON_GetObjectItemCaseSensitive(js, "status"), *r;
  const char *terminal = jpath_str(js, "status", "terminalState", NULL);
  long ready = 0;
  *why = NULL;
  for (size_t i = 0; i < sizeof(conds) / sizeof(conds[0]); i++) {
    const cJSON *c = true_condition(js, conds[i].cond);
    if (c != NULL || (terminal != NULL && strcmp(terminal, conds[i].cond) == 0)) {
      *why = c != NULL ? jpath_str(c, "message", NULL, NULL) : NULL;
      return conds[i].state;
    }
  }
  if (!cJSON_IsObject(st) || st->child == NULL)
    return MU_STATE_UNKNOWN;
  cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(st, "replicatedJobsStatus"))
  {
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(r, "ready");
    const char *name = jpath_str(r, "name", NULL, NULL);
    if (cJSON_IsNumber(n) && (name == NULL || strcmp(name, "musterd") != 0))
      ready += (long)n->valuedouble;
  }
  return ready > 0 ? MU_STATE_RUNNING : MU_STATE_PENDING;
}

int mu_k8s_parse_jobset_status(const char *json, const char *app_id, struct mu_app_status *out,
                               struct mu_buf *err)
{
  cJSON *root = cJSON_Parse(json);
  const cJSON *rj, *restarts;
  const char *name, *why = NULL;
  size_t n = 0;

  memset(out, 0, sizeof *out);
  out->num_restarts = -1;
  if (root == NULL || !cJSON_IsObject(root)) {
    mu_buf_puts(err, "kubectl get: output is not a JSON object");
    cJSON_Delete(root);
    return MU_EPARSE;
  }
  out->app_id = mu_strdup(app_id);
  out->state = jobset_state(root, &why);
  out->msg = mu_strdup(why ? why : mu_job_state_name(out->state));
  restarts = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "status"),
                                              "restarts");
  out->num_restarts = cJSON_IsNumber(restarts) ? (long)restarts->valuedouble : 0;
  name = jpath_str(root, "metadata", "name", NULL);
  const cJSON *rjobs = cJSON_GetObjectItemCaseSensitive(
      cJSON_GetObjectItemCaseSensitive(root, "spec"), "replicatedJobs");
  cJSON_ArrayForEach(rj, rjobs)
  {
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(rj, "replicas");
    const char *rn = jpath_str(rj, "name", NULL, NULL);
    if (rn != NULL && strcmp(rn, "musterd") != 0)
      n += cJSON_IsNumber(k) ? (size_t)k->valuedouble : 1;
  }
  out->replicas = n ? mu_calloc(n, sizeof *out->replicas) : NULL;
  cJSON_ArrayForEach(rj, rjobs)
  {
    const cJSON *kn = cJSON_GetObjectItemCaseSensitive(rj, "replicas");
    const char *rn = jpath_str(rj, "name", NULL, NULL);
    long count = cJSON_IsNumber(kn) ? (long)kn->valuedouble : 1;
    for (long k = 0; rn != NULL && strcmp(rn, "musterd") != 0 && k < count && out->nreplicas < n;
         k++) {
      struct mu_replica_status *r = &out->replicas[out->nreplicas++];
      r->role = mu_strdup(rn);
      r->replica_id = k;
      r->state = out->state == MU_STATE_SUCCEEDED ? MU_STATE_SUCCEEDED : MU_STATE_PENDING;
      r->hostname = mu_asprintf("%s-%s-%ld-0", name ? name : "", rn, k);
      r->exit_code = -1;
      r->msg = mu_strdup("");
    }
  }
  cJSON_Delete(root);
  return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Pods and their events: why a replica waits or failed
 */

/* Which replica a pod runs: a JobSet pod by JobSet's labels (replicated job, job index), a
 * Volcano pod by its name <job>-<task>-<index> (task <role>-<replica>). The job's own musterd
 * is role "musterd", replica -1. Returns: 0, or -1 for a pod that is none of the job's. */
static int pod_replica(const cJSON *pod, const char *job, char **role, long *replica)
{
  const char *rj = jpath_str(pod, "metadata", "labels", "jobset.sigs.k8s.io/replicatedjob-name");
  const char *ji = jpath_str(pod, "metadata", "labels", "jobset.sigs.k8s.io/job-index");
  const char *name = jpath_str(pod, "metadata", "name", NULL), *task, *dash;
  size_t jl = strlen(job);
  *replica = -1;
  if (rj != NULL) {
    const char *js = jpath_str(pod, "metadata", "labels", "jobset.sigs.k8s.io/jobset-name");
    if (js == NULL || strcmp(js, job) != 0)
      return -1; /* another JobSet's */
    *role = mu_strdup(rj);
    if (strcmp(rj, "musterd") != 0 &&
        (ji == NULL || mu_parse_long(ji, 0, 1L << 30, replica) != 0)) {
      mu_free(*role);
      return -1;
    }
    return 0;
  }
  if (name == NULL || strncmp(name, job, jl) != 0 || name[jl] != '-')
    return -1;
  task = name + jl + 1;
  dash = strrchr(task, '-'); /* the pod index */
  if (dash == NULL)
    return -1;
  *role = mu_strndup(task, (size_t)(dash - task));
  dash = strrchr(*role, '-');
  if (dash != NULL && mu_parse_long(dash + 1, 0, 1L << 30, replica) == 0)
    (*role)[dash - *role] = '\0';
  else if (strcmp(*role, "musterd") != 0) {
    mu_free(*role);
    return -1;
  }
  return 0;
}

/* What a pod says about itself, read by pod_why(). */
struct pod_why {
  int blocked;          /* it cannot make progress (a waiting reason, unschedulable) */
  int failed;           /* it ended in failure */
  int exit_code;        /* of the failed container, -1 unknown */
  char *text;           /* "REASON: message", or NULL when all is well */
  const char *finished; /* RFC 3339 time the failed container ended, or NULL */
};

/* Waiting reasons that mean the container will not start without someone's help (kubelet's
 * pkg/kubelet/images/types.go and kuberuntime). */
static const char *const stuck_reasons[] = {"ErrImagePull",
                                            "ImagePullBackOff",
                                            "InvalidImageName",
                                            "ErrImageNeverPull",
                                            "CreateContainerConfigError",
                                            "CreateContainerError",
                                            "CrashLoopBackOff",
                                            "RunContainerError",
                                            "PreCreateHookError",
                                            "PostStartHookError",
                                            NULL};

static int is_stuck(const char *reason)
{
  for (size_t i = 0; reason != NULL && stuck_reasons[i] != NULL; i++)
    if (strcmp(reason, stuck_reasons[i]) == 0)
      return 1;
  return 0;
}

/* "REASON: message" (or REASON alone), with the container's name when it is the init
 * container. Returns: a new string. */
static char *why_text(const char *reason, const char *msg, const char *init)
{
  return mu_asprintf("%s%s%s%s%s%s", init ? "init container " : "", init ? init : "",
                     init ? ": " : "", reason, msg && *msg ? ": " : "", msg && *msg ? msg : "");
}

/* The containers' states: a waiting reason that will not clear, or a termination that failed
 * (OOMKilled, an exit code). Init containers first: the agent's copy runs there. */
static void containers_why(const cJSON *pod, struct pod_why *w)
{
  static const char *const lists[] = {"initContainerStatuses", "containerStatuses"};
  const cJSON *st = cJSON_GetObjectItemCaseSensitive(pod, "status"), *c;
  for (size_t l = 0; l < 2 && w->text == NULL; l++) {
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(st, lists[l]))
    {
      const char *name = jpath_str(c, "name", NULL, NULL);
      const char *wr = jpath_str(c, "state", "waiting", "reason");
      const char *tr = jpath_str(c, "state", "terminated", "reason");
      const cJSON *code = cJSON_GetObjectItemCaseSensitive(
          cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c, "state"),
                                           "terminated"),
          "exitCode");
      if (is_stuck(wr)) {
        w->blocked = 1;
        w->text = why_text(wr, jpath_str(c, "state", "waiting", "message"), l == 0 ? name : NULL);
      } else if (cJSON_IsNumber(code) && code->valuedouble != 0) {
        w->failed = 1;
        w->exit_code = (int)code->valuedouble;
        w->finished = jpath_str(c, "state", "terminated", "finishedAt");
        w->text = l == 0 ? mu_asprintf("init container %s: %s (exit code %d)", name ? name : "",
                                       tr ? tr : "Error", w->exit_code)
                         : mu_asprintf("%s (exit code %d)", tr ? tr : "Error", w->exit_code);
      }
      if (w->text != NULL)
        break;
    }
  }
}

/* What pod says about itself: the pod's own failure (Evicted, DeadlineExceeded, a disruption
 * such as preemption), its containers, then its scheduling (Unschedulable). */
static void pod_why(const cJSON *pod, struct pod_why *w)
{
  const char *phase = jpath_str(pod, "status", "phase", NULL);
  const char *reason = jpath_str(pod, "status", "reason", NULL);
  const cJSON *c;
  memset(w, 0, sizeof(*w));
  w->exit_code = -1;
  if (phase != NULL && strcmp(phase, "Failed") == 0 && reason != NULL) {
    w->failed = 1;
    w->text = why_text(reason, jpath_str(pod, "status", "message", NULL), NULL);
  }
  cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(
                            cJSON_GetObjectItemCaseSensitive(pod, "status"), "conditions"))
  {
    const char *t = jpath_str(c, "type", NULL, NULL), *s = jpath_str(c, "status", NULL, NULL);
    const char *r = jpath_str(c, "reason", NULL, NULL), *m = jpath_str(c, "message", NULL, NULL);
    if (w->text != NULL || t == NULL || s == NULL || r == NULL)
      continue;
    if (strcmp(t, "DisruptionTarget") == 0 && strcmp(s, "True") == 0) {
      w->failed = phase != NULL && strcmp(phase, "Failed") == 0;
      w->blocked = !w->failed;
      w->text = why_text(r, m, NULL);
    }
  }
  if (w->text == NULL)
    containers_why(pod, w);
  if (w->failed && w->finished == NULL) /* when the pod ended: its last container's end */
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(
                              cJSON_GetObjectItemCaseSensitive(pod, "status"), "containerStatuses"))
    {
      const char *f = jpath_str(c, "state", "terminated", "finishedAt");
      if (f != NULL && (w->finished == NULL || strcmp(f, w->finished) > 0))
        w->finished = f;
    }
  cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(
                            cJSON_GetObjectItemCaseSensitive(pod, "status"), "conditions"))
  {
    const char *t = jpath_str(c, "type", NULL, NULL), *s = jpath_str(c, "status", NULL, NULL);
    const char *r = jpath_str(c, "reason", NULL, NULL);
    if (w->text == NULL && t && s && r && !strcmp(t, "PodScheduled") && !strcmp(s, "False") &&
        !strcmp(r, "Unschedulable")) {
      w->blocked = 1;
      w->text = why_text(r, jpath_str(c, "message", NULL, NULL), NULL);
    }
  }
}

/* The newest Warning event about pod `name` in a `kubectl get events -o json` list, as
 * "REASON: message". Returns: a new string, or NULL when there is none. */
static char *event_why(const cJSON *events, const char *name)
{
  const cJSON *e, *best = NULL;
  const char *best_t = "";
  cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(events, "items"))
  {
    const char *on = jpath_str(e, "involvedObject", "name", NULL);
    const char *type = jpath_str(e, "type", NULL, NULL);
    const char *t = jpath_str(e, "lastTimestamp", NULL, NULL);
    if (t == NULL)
      t = jpath_str(e, "eventTime", NULL, NULL);
    if (on == NULL || strcmp(on, name) != 0 || type == NULL || strcmp(type, "Warning") != 0)
      continue;
    if (best == NULL || (t != NULL && strcmp(t, best_t) >= 0)) {
      best = e;
      best_t = t ? t : "";
    }
  }
  if (best == NULL || jpath_str(best, "reason", NULL, NULL) == NULL)
    return NULL;
  return why_text(jpath_str(best, "reason", NULL, NULL), jpath_str(best, "message", NULL, NULL),
                  NULL);
}

/* The pod-phase state of a JobSet replica (a Volcano replica's comes from its task). */
static enum mu_job_state pod_state(const char *phase)
{
  static const struct phase_row rows[] = {
      {"Pending", MU_STATE_PENDING},     {"Running", MU_STATE_RUNNING},
      {"Succeeded", MU_STATE_SUCCEEDED}, {"Failed", MU_STATE_FAILED},
      {"Unknown", MU_STATE_UNKNOWN},
  };
  return phase_state(rows, sizeof rows / sizeof rows[0], phase);
}

/* What the pod-level reading keeps while it goes through the pods. */
struct pods_read {
  struct mu_app_status *st;
  const cJSON *events; /* NULL: not read (yet) */
  int set_states;      /* replica states come from the pods (JobSet) */
  int *want_events;
  char *stuck;     /* the first blocked pod's "role/replica: why" */
  size_t nstuck;   /* how many pods are blocked */
  char *failed;    /* the earliest failed pod's "role/replica: why" */
  char *failed_at; /* when it ended (RFC 3339 sorts as text) */
};

/* Applies one pod to the status: its replica's state, message and exit code, and the job's
 * blocked and failed candidates. */
static void read_pod(struct pods_read *pr, const cJSON *pod, const char *job)
{
  struct pod_why w;
  char *role = NULL;
  long id = -1;
  struct mu_replica_status *r = NULL;
  if (pod_replica(pod, job, &role, &id) != 0)
    return;
  for (size_t i = 0; i < pr->st->nreplicas && id >= 0; i++)
    if (pr->st->replicas[i].replica_id == id && strcmp(pr->st->replicas[i].role, role) == 0)
      r = &pr->st->replicas[i];
  pod_why(pod, &w);
  const char *phase = jpath_str(pod, "status", "phase", NULL);
  if (w.text == NULL && phase != NULL && strcmp(phase, "Pending") == 0) {
    const char *pn = jpath_str(pod, "metadata", "name", NULL);
    w.text = pr->events != NULL && pn != NULL ? event_why(pr->events, pn) : NULL;
    w.blocked = w.text != NULL;
    if (pr->events == NULL)
      *pr->want_events = 1;
  }
  if (r != NULL && pr->set_states && phase != NULL)
    r->state = pod_state(phase);
  if (r != NULL && w.text != NULL) {
    mu_free(r->msg);
    r->msg = mu_strdup(w.text);
  }
  if (r != NULL && w.exit_code >= 0)
    r->exit_code = w.exit_code;
  char *line = NULL;
  if (w.text != NULL && id >= 0)
    line = mu_asprintf("%s/%ld: %s", role, id, w.text);
  else if (w.text != NULL) /* the job's musterd: no replica number */
    line = mu_asprintf("%s: %s", role, w.text);
  if (w.blocked && pr->nstuck++ == 0) {
    pr->stuck = line;
    line = NULL;
  } else if (w.failed && (pr->failed == NULL ||
                          (w.finished != NULL && strcmp(w.finished, pr->failed_at) < 0))) {
    mu_free(pr->failed);
    mu_free(pr->failed_at);
    pr->failed = line;
    pr->failed_at = mu_strdup(w.finished ? w.finished : "~");
    line = NULL;
  }
  mu_free(line);
  mu_free(w.text);
  mu_free(role);
}

/* mu_k8s_apply_pods on parsed lists (events NULL: not read). */
static void apply_pods_tree(const cJSON *items, const cJSON *events, int set_states,
                            struct mu_app_status *st, char **failed, int *want_events)
{
  const cJSON *pod;
  const char *colon = strrchr(st->app_id ? st->app_id : "", ':');
  struct pods_read pr = {st, events, set_states, want_events, NULL, 0, NULL, NULL};
  *want_events = 0;
  cJSON_ArrayForEach(pod, items)
      read_pod(&pr, pod, colon ? colon + 1 : (st->app_id ? st->app_id : ""));
  mu_free(st->reason);
  st->reason = NULL;
  if (pr.stuck != NULL && !mu_job_state_is_terminal(st->state))
    st->reason = pr.nstuck > 1 ? mu_asprintf("%s (and %zu more pod%s)", pr.stuck, pr.nstuck - 1,
                                             pr.nstuck > 2 ? "s" : "")
                               : mu_strdup(pr.stuck);
  *failed = pr.failed;
  mu_free(pr.stuck);
  mu_free(pr.failed_at);
}

/* The items of `kubectl get pods -o json` (or events). Returns: the parsed list (cJSON_Delete)
 * and its items in *items, or NULL with the reason in err. */
static cJSON *parse_items(const char *json, const char *what, const cJSON **items,
                          struct mu_buf *err)
{
  cJSON *root = cJSON_Parse(json);
  *items = cJSON_GetObjectItemCaseSensitive(root, "items");
  if (root != NULL && cJSON_IsArray(*items))
    return root;
  mu_buf_printf(err, "kubectl get %s: output is not a JSON list with items", what);
  cJSON_Delete(root);
  *items = NULL;
  return NULL;
}

int mu_k8s_apply_pods(const char *pods, const char *events, int set_states,
                      struct mu_app_status *st, char **failed, int *want_events, struct mu_buf *err)
{
  const cJSON *items;
  cJSON *root = parse_items(pods, "pods", &items, err), *ev = events ? cJSON_Parse(events) : NULL;
  *want_events = 0;
  *failed = NULL;
  if (root != NULL)
    apply_pods_tree(items, ev, set_states, st, failed, want_events);
  cJSON_Delete(root);
  cJSON_Delete(ev);
  return root != NULL ? 0 : MU_EPARSE;
}

int mu_k8s_list_reasons(const char *pods, const char *events, struct mu_app_list_entry *l, size_t n,
                        int *want_events, struct mu_buf *err)
{
  const cJSON *items;
  cJSON *root = parse_items(pods, "pods", &items, err), *ev = events ? cJSON_Parse(events) : NULL;
  *want_events = 0;
  for (size_t i = 0; root != NULL && i < n; i++) {
    struct mu_app_status st = {.app_id = l[i].app_id, .state = l[i].state};
    char *failed = NULL;
    int want = 0;
    if (mu_job_state_is_terminal(l[i].state))
      continue;
    apply_pods_tree(items, ev, 0, &st, &failed, &want);
    *want_events |= want;
    mu_free(l[i].reason);
    l[i].reason = st.reason;
    mu_free(failed);
  }
  cJSON_Delete(root);
  cJSON_Delete(ev);
  return root != NULL ? 0 : MU_EPARSE;
}

char *mu_k8s_pod_name(const char *pods, const char *job, const char *role, long replica)
{
  cJSON *root = cJSON_Parse(pods);
  const cJSON *pod;
  const char *best = NULL, *best_t = "";
  char *out = NULL;
  cJSON_ArrayForEach(pod, cJSON_GetObjectItemCaseSensitive(root, "items"))
  {
    char *r = NULL;
    long id = -1;
    const char *t = jpath_str(pod, "metadata", "creationTimestamp", NULL);
    if (pod_replica(pod, job, &r, &id) == 0 && id == replica && strcmp(r, role) == 0 &&
        (best == NULL || (t != NULL && strcmp(t, best_t) > 0))) {
      best = jpath_str(pod, "metadata", "name", NULL);
      best_t = t ? t : "";
    }
    mu_free(r);
  }
  out = best ? mu_strdup(best) : NULL;
  cJSON_Delete(root);
  return out;
}

/* ---------------------------------------------------------------------------------------------
 * The app as submitted
 */

int mu_k8s_parse_app(const char *json, struct mu_app **out, struct mu_buf *err)
{
  cJSON *root = cJSON_Parse(json);
  const char *app = jpath_str(root, "metadata", "annotations", MU_K8S_APP_ANNOTATION);
  const char *name = jpath_str(root, "metadata", "name", NULL);
  int rc = 0;
  *out = NULL;
  if (root == NULL) {
    mu_buf_puts(err, "kubectl get: output is not JSON");
    rc = MU_EPARSE;
  } else if (app == NULL) {
    mu_buf_printf(err,
                  "'%s' carries no %s annotation (another tool or an older muster submitted it, "
                  "or its job spec was over %d KiB); 'muster status' shows its replicas",
                  name ? name : "?", MU_K8S_APP_ANNOTATION, MU_K8S_APP_MAX / 1024);
    rc = MU_ENOENT;
  } else if (mu_app_from_json(app, out) != 0) {
    mu_buf_printf(err, "the %s annotation of '%s' is not a muster job spec", MU_K8S_APP_ANNOTATION,
                  name ? name : "?");
    rc = MU_EPARSE;
  }
  cJSON_Delete(root);
  return rc;
}
