/* The kubernetes scheduler: the Volcano Job of kubernetes_render.c submitted, watched, read and
 * deleted through kubectl (sched_exec.c runs it), with kubectl's own errors turned into advice.
 */
#include <stdint.h>
#include <string.h>

#include "muster/errno.h"
#include "muster/mu.h"

#include "alloc.h"
#include "config.h"
#include "kubernetes.h"
#include "sched_exec.h"
#include "yaml_tree.h"

#define K8S_OUT_MAX (16u << 20) /* what kubectl get may print: read from a process, capped */
#define K8S_RESOURCE "jobs.batch.volcano.sh"

static const struct mu_runopt k8s_runopts[] = {
    {"namespace", MU_RUNOPT_STR, "default", 0, "Kubernetes namespace to submit the job to"},
    {"queue", MU_RUNOPT_STR, NULL, 0,
     "Volcano queue (spec.queue); required with scheduler_name=volcano"},
    {"scheduler_name", MU_RUNOPT_STR, "volcano", 0,
     "pod scheduler (spec.schedulerName): volcano, default-scheduler, or another name"},
    {"kueue_queue", MU_RUNOPT_STR, NULL, 0,
     "Kueue LocalQueue: sets the kueue.x-k8s.io/queue-name label on the job"},
    {"service_account", MU_RUNOPT_STR, NULL, 0, "service account of every pod"},
    {"priority_class", MU_RUNOPT_STR, NULL, 0, "priority class of the job"},
    {"image_repo", MU_RUNOPT_STR, NULL, 0,
     "repository for images given as sha256:HASH (they become REPO:HASH)"},
    {"image_pull_secret", MU_RUNOPT_LIST, NULL, 0,
     "image pull secret names for every pod (comma-separated)"},
    {"node_selector", MU_RUNOPT_MAP, NULL, 0,
     "extra node selector for every pod, k:v,k2:v2 (added to the instance type)"},
    {"tolerations", MU_RUNOPT_LIST, NULL, 0,
     "tolerations, ';'-separated: kubectl's key=value:Effect (quote it in -cfg: "
     "'tolerations=\"k=v:NoSchedule\"'), key:value:Effect, key:Effect, key:value or key"},
    {"labels", MU_RUNOPT_MAP, NULL, 0, "extra labels on the job and its pods, k:v,k2:v2"},
    {"annotations", MU_RUNOPT_MAP, NULL, 0, "extra annotations on the job and its pods, k:v"},
    {"rdzv", MU_RUNOPT_STR, "auto", 0,
     "rendezvous for ${rdzv_endpoint}: auto (the job runs its own musterd task when a role "
     "uses it), job (always), or HOST:PORT of an existing musterd or etcd"},
    {"rdzv_port", MU_RUNOPT_INT, "29400", 0, "port of the job's own musterd"},
    {"muster_image", MU_RUNOPT_STR, NULL, 0,
     "the muster image (scripts/build-image.sh): the init container that puts the agent in "
     "every pod, and the job's musterd; required when the job uses either"},
    {"kubectl", MU_RUNOPT_STR, "kubectl", 0, "kubectl program (name on PATH or a path)"},
    {"context", MU_RUNOPT_STR, NULL, 0, "kubeconfig context (kubectl --context)"},
    MU_RUNOPT_HEALTH_CHECK,
    {NULL, 0, NULL, 0, NULL},
};

struct k8s_priv {
  char *yaml;
  char *ns;
  char *name;
  char *kubectl;
  char *context;
};

/* The argv prefix: kubectl [--context C] -n NS. */
static void kubectl_argv(struct mu_strvec *av, const char *kubectl, const char *context,
                         const char *ns)
{
  mu_strvec_push(av, kubectl ? kubectl : "kubectl");
  if (context && *context) {
    mu_strvec_push(av, "--context");
    mu_strvec_push(av, context);
  }
  mu_strvec_push(av, "-n");
  mu_strvec_push(av, ns ? ns : "default");
}

/* What kubectl's stderr means, in the order it is checked (see mu_exec_tool). */
static const struct mu_exec_hint kubectl_hints[] = {
    {{"AlreadyExists", "already exists"},
     "a job of that name exists; run again (each run picks a new name) or remove the old one "
     "with muster cancel"},
    {{"no matches for kind", "the server doesn't have a resource"},
     "the Volcano CRDs are not installed in this cluster; install Volcano "
     "(https://volcano.sh/en/docs/installation/)"},
    {{"NotFound", "not found"}, NULL},
    {{"Unable to connect", "connection refused", "current-context", "no configuration"},
     "kubectl cannot reach a cluster; check the kubeconfig (-cfg context=NAME picks a context) "
     "and that the API server is up"},
    {{NULL}, NULL},
};

/* The error for a kubectl that cannot be started. Returns: a new string (mu_free). */
static char *kubectl_missing(const char *path)
{
  return mu_asprintf("kubectl not found ('%s'): install kubectl and put it on PATH, or set "
                     "-cfg kubectl=/path/to/kubectl",
                     path);
}

/* Runs kubectl; on failure writes kubectl's own message plus what to do into err. */
static int kubectl_run(struct mu_strvec *av, const char *input, struct mu_buf *out,
                       struct mu_buf *err)
{
  size_t verb;
  for (verb = 1; verb + 1 < av->n && av->v[verb][0] == '-'; verb += 2)
    ;
  char *what = mu_asprintf("kubectl %s", verb < av->n ? av->v[verb] : "");
  char *missing = kubectl_missing(av->v[0]);
  int rc = mu_exec_tool(av->v, input, what, missing, kubectl_hints, out, err);
  mu_free(what);
  mu_free(missing);
  return rc;
}

static int split_app_id(const char *app_id, const struct mu_cfg *cfg, char **ns, char **name)
{
  const char *colon = strchr(app_id, ':');
  if (colon) {
    *ns = mu_strndup(app_id, (size_t)(colon - app_id));
    *name = mu_strdup(colon + 1);
  } else {
    const char *n = mu_cfg_get(cfg, "namespace");
    *ns = mu_strdup(n ? n : "default");
    *name = mu_strdup(app_id);
  }
  return **name ? 0 : MU_EINVAL;
}

/* Starts the kubectl command line for the job app_id ("NAMESPACE:NAME", or NAME in -cfg
 * namespace): kubectl [--context C] -n NS; *name gets the job's name.
 * Returns: 0, or MU_EINVAL with the message in err. Ownership: *name is the caller's
 * (mu_free), also on error; appends to av. */
static int kubectl_for_app(const char *app_id, const struct mu_cfg *cfg, struct mu_strvec *av,
                           char **name, struct mu_buf *err)
{
  char *ns = NULL;
  int rc = split_app_id(app_id, cfg, &ns, name);
  if (rc != 0)
    mu_buf_printf(err, "'%s' is not a kubernetes app id (NAMESPACE:NAME)", app_id);
  else
    kubectl_argv(av, mu_cfg_get(cfg, "kubectl"), mu_cfg_get(cfg, "context"), ns);
  mu_free(ns);
  return rc;
}

static int k8s_dryrun(const struct mu_app *app, const struct mu_cfg *cfg, struct mu_dryrun *out,
                      struct mu_buf *err)
{
  struct mu_buf y = MU_BUF_INIT(SIZE_MAX);
  struct k8s_priv *p = NULL;
  cJSON *job = NULL;
  char *name = NULL;
  const char *ns = mu_cfg_get(cfg, "namespace");
  int rc;

  rc = mu_k8s_job_name(app, cfg, &name, err);
  if (rc == 0)
    rc = mu_k8s_render(app, cfg, name, &job, err);
  if (rc == 0)
    mu_yaml_emit(job, &y); /* our own text: y has no cap, so this cannot fail */
  if (rc != 0)
    goto out;
  p = mu_calloc(1, sizeof *p);
  p->ns = mu_strdup(ns ? ns : "default");
  p->name = name;
  name = NULL;
  p->kubectl = mu_strdup(mu_cfg_get(cfg, "kubectl") ? mu_cfg_get(cfg, "kubectl") : "kubectl");
  p->context = mu_cfg_get(cfg, "context") ? mu_strdup(mu_cfg_get(cfg, "context")) : NULL;
  p->yaml = mu_strdup(mu_buf_str(&y));
  out->text = mu_buf_detach(&y);
  out->app_id = mu_asprintf("%s:%s", p->ns, p->name);
  out->priv = p;
  out->sched = &mu_sched_kubernetes;
out:
  cJSON_Delete(job);
  mu_free(name);
  mu_buf_release(&y);
  return rc;
}

static void k8s_dryrun_free(struct mu_dryrun *req)
{
  struct k8s_priv *p = req ? req->priv : NULL;
  if (p == NULL)
    return;
  mu_free(p->yaml);
  mu_free(p->ns);
  mu_free(p->name);
  mu_free(p->kubectl);
  mu_free(p->context);
  mu_free(p);
  req->priv = NULL;
}

static int k8s_schedule(struct mu_dryrun *req, struct mu_buf *err)
{
  struct k8s_priv *p = req->priv;
  struct mu_strvec av = MU_STRVEC_INIT;
  int rc;

  kubectl_argv(&av, p->kubectl, p->context, p->ns);
  mu_strvec_push(&av, "create");
  mu_strvec_push(&av, "-f");
  mu_strvec_push(&av, "-");
  rc = kubectl_run(&av, p->yaml, NULL, err);
  mu_strvec_release(&av);
  return rc;
}

/* Runs `kubectl [--context C] -n NS VERB jobs.batch.volcano.sh NAME ARGS...` on the job app_id;
 * args is NULL-terminated or NULL. Returns: as kubectl_run(). */
static int kubectl_on_job(const char *app_id, const struct mu_cfg *cfg, const char *verb,
                          const char *const *args, struct mu_buf *out, struct mu_buf *err)
{
  struct mu_strvec av = MU_STRVEC_INIT;
  char *name = NULL;
  int rc = kubectl_for_app(app_id, cfg, &av, &name, err);
  if (rc == 0) {
    mu_strvec_push(&av, verb);
    mu_strvec_push(&av, K8S_RESOURCE);
    mu_strvec_push(&av, name);
    for (size_t i = 0; args != NULL && args[i] != NULL; i++)
      mu_strvec_push(&av, args[i]);
    rc = kubectl_run(&av, NULL, out, err);
  }
  mu_strvec_release(&av);
  mu_free(name);
  return rc;
}

/* The root cause of a failed job: the failure record (failrec.h) that the agent of a failed
 * replica printed in the last lines of its pod's log. A pod whose log cannot be read (deleted,
 * evicted) adds nothing. */
static void add_failures(const char *app_id, const struct mu_cfg *cfg, struct mu_app_status *st)
{
  for (size_t i = 0; i < st->nreplicas; i++) {
    const struct mu_replica_status *r = &st->replicas[i];
    if (r->state != MU_STATE_FAILED || r->role == NULL)
      continue;
    struct mu_strvec av = MU_STRVEC_INIT;
    struct mu_buf log = MU_BUF_INIT(K8S_OUT_MAX), ignore = MU_BUF_INIT(SIZE_MAX);
    char *name = NULL, *task = NULL;
    if (kubectl_for_app(app_id, cfg, &av, &name, &ignore) == 0) {
      task = mu_k8s_task_name(r->role, r->replica_id);
      mu_strvec_push(&av, "logs");
      mu_strvec_pushf(&av, "%s-%s-0", name, task);
      mu_strvec_push(&av, "--tail=200");
      if (kubectl_run(&av, NULL, &log, &ignore) == 0)
        mu_app_status_scan_failure(st, i, log.data ? log.data : "", log.len);
    }
    mu_strvec_release(&av);
    mu_buf_release(&log);
    mu_buf_release(&ignore);
    mu_free(name);
    mu_free(task);
  }
}

static int k8s_describe(const char *app_id, const struct mu_cfg *cfg, struct mu_app_status *out,
                        struct mu_buf *err)
{
  struct mu_buf json = MU_BUF_INIT(K8S_OUT_MAX);
  static const char *const as_json[] = {"-o", "json", NULL};
  int rc = kubectl_on_job(app_id, cfg, "get", as_json, &json, err);
  if (rc == 0)
    rc = mu_k8s_parse_status(mu_buf_str(&json), app_id, out, err);
  if (rc == 0 && out->state == MU_STATE_FAILED)
    add_failures(app_id, cfg, out);
  mu_buf_release(&json);
  return rc;
}

static int k8s_list(const struct mu_cfg *cfg, struct mu_app_list_entry **out, size_t *n,
                    struct mu_buf *err)
{
  struct mu_buf json = MU_BUF_INIT(K8S_OUT_MAX);
  struct mu_strvec av = MU_STRVEC_INIT;
  const char *ns = mu_cfg_get(cfg, "namespace");
  int rc;

  kubectl_argv(&av, mu_cfg_get(cfg, "kubectl"), mu_cfg_get(cfg, "context"), ns);
  mu_strvec_push(&av, "get");
  mu_strvec_push(&av, K8S_RESOURCE);
  mu_strvec_push(&av, "-l");
  mu_strvec_push(&av, "app.kubernetes.io/managed-by=muster");
  mu_strvec_push(&av, "-o");
  mu_strvec_push(&av, "json");
  rc = kubectl_run(&av, NULL, &json, err);
  if (rc == 0)
    rc = mu_k8s_parse_list(mu_buf_str(&json), ns ? ns : "default", out, n, err);
  mu_strvec_release(&av);
  mu_buf_release(&json);
  return rc;
}

static int k8s_cancel(const char *app_id, const struct mu_cfg *cfg, struct mu_buf *err)
{
  return kubectl_on_job(app_id, cfg, "delete", NULL, NULL, err);
}

static int k8s_log(const char *app_id, const char *role, long replica, enum mu_log_stream s,
                   int follow, long tail, int out_fd, const struct mu_cfg *cfg, struct mu_buf *err)
{
  struct mu_strvec av = MU_STRVEC_INIT;
  struct mu_buf eb = MU_BUF_INIT(MU_EXEC_STDERR_MAX);
  char *name = NULL, *task = NULL, *pod = NULL, *missing = NULL;
  int rc = kubectl_for_app(app_id, cfg, &av, &name, err), status = -1;

  (void)s; /* a pod has one combined stream */
  if (rc != 0)
    goto out;
  if (role == NULL || replica < 0) {
    /* Every replica (of the role): one `kubectl logs` each, lines prefixed role/replica. */
    rc = mu_sched_log_fanout(&mu_sched_kubernetes, app_id, role, replica, s, follow, tail, out_fd,
                             cfg, err);
    goto out;
  }
  task = mu_k8s_task_name(role, replica);
  pod = mu_asprintf("%s-%s-0", name, task);
  mu_strvec_push(&av, "logs");
  mu_strvec_push(&av, pod);
  if (follow)
    mu_strvec_push(&av, "-f");
  if (tail > 0) /* 0 means the whole log, as for the other schedulers (kubectl: every line) */
    mu_strvec_pushf(&av, "--tail=%ld", tail);
  rc = mu_exec_to_fd(av.v, out_fd, &eb, &status);
  if (rc == MU_ENOENT) {
    missing = kubectl_missing(av.v[0]);
    mu_buf_puts(err, missing);
  } else if (rc == 0 && status != 0) {
    mu_buf_printf(err, "kubectl logs %s failed (exit %d): %s", pod, status,
                  mu_exec_chomp(eb.data ? eb.data : (char *)""));
    rc = strstr(mu_buf_str(&eb), "NotFound") ? MU_ENOENT : MU_EIO;
  }
out:
  mu_strvec_release(&av);
  mu_buf_release(&eb);
  mu_free(missing);
  mu_free(name);
  mu_free(task);
  mu_free(pod);
  return rc;
}

const struct mu_sched_ops mu_sched_kubernetes = {
    .name = "kubernetes",
    .help = "Volcano Jobs on Kubernetes through kubectl (needs Volcano in the cluster)",
    .rdzv_macro = "JOB-musterd-0.JOB:29400 (-cfg rdzv_port), the job's own musterd task, or the "
                  "-cfg rdzv=HOST:PORT given: the manifest has the value",
    .runopts = k8s_runopts,
    .dryrun = k8s_dryrun,
    .schedule = k8s_schedule,
    .describe = k8s_describe,
    .list = k8s_list,
    .cancel_existing = k8s_cancel,
    .log_open = k8s_log,
    .dryrun_free = k8s_dryrun_free,
};
