/* The kubernetes scheduler: the Volcano Job or JobSet of kubernetes_render.c submitted (with the
 * job's rendezvous token as a Secret the job owns), watched through the job and its pods (and
 * their events, when a pod's own status does not say why it waits), read and deleted through
 * kubectl (sched_exec.c runs it), with kubectl's own errors turned into advice.
 *
 * App ids: "NAMESPACE:NAME" for a Volcano Job, "NAMESPACE:jobset:NAME" for a JobSet.
 */
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "muster/errno.h"
#include "muster/mu.h"

#include "alloc.h"
#include "config.h"
#include "kubernetes.h"
#include "random.h"
#include "sched_exec.h"
#include "yaml_tree.h"

#define K8S_OUT_MAX (16u << 20) /* what kubectl get may print: read from a process, capped */
#define K8S_JOBSET_WORD "jobset"

static const struct mu_runopt k8s_runopts[] = {
    {"namespace", MU_RUNOPT_STR, "default", 0, "Kubernetes namespace to submit the job to"},
    {"api", MU_RUNOPT_STR, "volcano", 0,
     "what the job is: volcano (a Volcano Job) or jobset (a JobSet, jobset.x-k8s.io/v1alpha2, "
     "for clusters without Volcano; with Kueue through kueue_queue)"},
    {"queue", MU_RUNOPT_STR, NULL, 0,
     "Volcano queue (spec.queue); required with scheduler_name=volcano"},
    {"scheduler_name", MU_RUNOPT_STR, NULL, 0,
     "pod scheduler (schedulerName): volcano (the default with api=volcano), "
     "default-scheduler, or another name (api=jobset: the cluster's default when unset)"},
    {"kueue_queue", MU_RUNOPT_STR, NULL, 0,
     "Kueue LocalQueue: sets the kueue.x-k8s.io/queue-name label on the job (a JobSet also "
     "starts suspended, for Kueue to admit)"},
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
    {"rdzv_token_secret", MU_RUNOPT_STR, NULL, 0,
     "a Secret of yours whose key 'token' the agents send (and the job's own musterd requires); "
     "by default muster makes a random token per job, as a Secret the job owns"},
    {"rdzv_tls", MU_RUNOPT_STR, NULL, 0,
     "a Secret (tls.crt, tls.key, ca.crt) whose certificate names <job>-musterd.<namespace>.svc "
     "(*.<namespace>.svc covers every job): the job's musterd serves HTTPS with it, the agents "
     "check it with ca.crt"},
    {"rdzv_tls_client", MU_RUNOPT_STR, NULL, 0,
     "with rdzv_tls, a Secret (tls.crt, tls.key) of the agents' client certificate, signed by "
     "rdzv_tls's ca.crt: the job's musterd then requires client certificates"},
    {"muster_image", MU_RUNOPT_STR, NULL, 0,
     "the muster image (scripts/build-image.sh): the init container that puts the agent in "
     "every pod, and the job's musterd; required when the job uses either"},
    {"neuron_resource", MU_RUNOPT_STR, "aws.amazon.com/neuron", 0,
     "the extended resource a pod asks for Neuron devices by: the device plugin's name since "
     "Neuron 2.20; set aws.amazon.com/neurondevice only on a cluster whose plugin is older"},
    {"neuron_devices", MU_RUNOPT_STR, "plugin", 0,
     "how pods get Neuron devices and EFA interfaces: plugin (device plugin limits) or dra "
     "(a ResourceClaimTemplate per role for classes neuron.aws.com and efa.networking.k8s.aws, "
     "created with the job; Kubernetes 1.34+ with the Neuron DRA driver)"},
    {"topology", MU_RUNOPT_STR, NULL, 0,
     "LABEL[:required|preferred] (default preferred): keep the job within one domain of the "
     "node label, e.g. topology.k8s.aws/network-node-layer-3; JobSet: Kueue's podset topology "
     "annotations, Volcano: the job's networkTopology (soft or hard)"},
    {"topology_tier", MU_RUNOPT_STR, NULL, 0,
     "Volcano: the HyperNode tier for -cfg topology, a number or a tier name (default: EKS's "
     "network-node-layer-3, -2, -1 are tiers 1, 2, 3)"},
    {"kubectl", MU_RUNOPT_STR, "kubectl", 0, "kubectl program (name on PATH or a path)"},
    {"context", MU_RUNOPT_STR, NULL, 0, "kubeconfig context (kubectl --context)"},
    MU_RUNOPT_HEALTH_CHECK,
    {NULL, 0, NULL, 0, NULL},
};

/* ---------------------------------------------------------------------------------------------
 * kubectl
 */

/* A submitted job: where it is and what it is. */
struct k8s_job {
  char *ns;
  char *name;
  enum mu_k8s_api api;
};

static void k8s_job_release(struct k8s_job *j)
{
  mu_free(j->ns);
  mu_free(j->name);
  memset(j, 0, sizeof(*j));
}

/* The argv prefix: kubectl [--context C] -n NS. */
static void kubectl_argv(struct mu_strvec *av, const struct mu_cfg *cfg, const char *ns)
{
  const char *kubectl = mu_cfg_get(cfg, "kubectl"), *context = mu_cfg_get(cfg, "context");
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
    {{"no matches for kind \"JobSet\"", "resource type \"jobsets"},
     "the JobSet CRDs are not installed in this cluster; install JobSet "
     "(https://jobset.sigs.k8s.io/docs/installation/), or use -cfg api=volcano"},
    {{"no matches for kind", "the server doesn't have a resource"},
     "the Volcano CRDs are not installed in this cluster; install Volcano "
     "(https://volcano.sh/en/docs/installation/), or use -cfg api=jobset"},
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
  /* kubectl create with no API server to fetch the schema from advises --validate=false, which
   * would not help (and muster passes no such flag): the hint that follows says what does. */
  static const char no_validate[] =
      "; if you choose to ignore these errors, turn validation off with --validate=false";
  if (rc != 0 && strstr(mu_buf_str(err), "failed to download openapi") != NULL &&
      strstr(mu_buf_str(err), no_validate) != NULL) {
    char *text = mu_strdup(mu_buf_str(err));
    mu_buf_clear(err);
    mu_buf_put_replaced(err, text, no_validate, "");
    mu_free(text);
  }
  return rc;
}

/* Reads an app id: "NAMESPACE:NAME", "NAMESPACE:jobset:NAME", or NAME (-cfg namespace and api).
 * Returns: 0, or MU_EINVAL with the message in err. Ownership: j is the caller's
 * (k8s_job_release, also on error). */
static int k8s_job_parse(const char *app_id, const struct mu_cfg *cfg, struct k8s_job *j,
                         struct mu_buf *err)
{
  const char *colon = strchr(app_id, ':'), *rest = colon ? colon + 1 : app_id;
  const char *ns = mu_cfg_get(cfg, "namespace");
  memset(j, 0, sizeof(*j));
  if (mu_k8s_api_parse(mu_cfg_get(cfg, "api"), &j->api, err) != 0)
    return MU_EINVAL;
  j->ns = colon ? mu_strndup(app_id, (size_t)(colon - app_id)) : mu_strdup(ns ? ns : "default");
  if (strncmp(rest, K8S_JOBSET_WORD ":", strlen(K8S_JOBSET_WORD) + 1) == 0) {
    j->api = MU_K8S_JOBSET;
    rest += strlen(K8S_JOBSET_WORD) + 1;
  } else if (colon != NULL) {
    j->api = MU_K8S_VOLCANO;
  }
  j->name = mu_strdup(rest);
  if (*j->name != '\0' && *j->ns != '\0' && strchr(j->name, ':') == NULL)
    return 0;
  mu_buf_printf(err,
                "'%s' is not a kubernetes app id (NAMESPACE:NAME, or NAMESPACE:jobset:NAME for "
                "a JobSet)",
                app_id);
  return MU_EINVAL;
}

/* Runs `kubectl [--context C] -n NS ARGS...` (args NULL-terminated). Returns: as kubectl_run. */
static int kubectl_call(const struct k8s_job *j, const struct mu_cfg *cfg, const char *const *args,
                        const char *input, struct mu_buf *out, struct mu_buf *err)
{
  struct mu_strvec av = MU_STRVEC_INIT;
  kubectl_argv(&av, cfg, j->ns);
  for (size_t i = 0; args[i] != NULL; i++)
    mu_strvec_push(&av, args[i]);
  int rc = kubectl_run(&av, input, out, err);
  mu_strvec_release(&av);
  return rc;
}

/* `kubectl VERB RESOURCE NAME [-o json]` on the job's own object. */
static int kubectl_on_job(const struct k8s_job *j, const struct mu_cfg *cfg, const char *verb,
                          int json, struct mu_buf *out, struct mu_buf *err)
{
  const char *args[] = {verb, mu_k8s_resource(j->api), j->name, json ? "-o" : NULL, "json", NULL};
  return kubectl_call(j, cfg, args, NULL, out, err);
}

/* ---------------------------------------------------------------------------------------------
 * Dryrun and schedule
 */

struct k8s_priv {
  char *kubectl, *context; /* the kubectl runopts (schedule gets no cfg) */
  char *yaml;
  char *manifest_json; /* the same object as JSON, for kubectl create -o json */
  struct k8s_job job;
  char *token_secret; /* the Secret of the job's token, created after the job; NULL: none */
  cJSON *service;     /* the Service of the job's musterd (rdzv_tls), created after the job */
  cJSON *owned;       /* the claim templates and NetworkPolicy, created after the job */
  char *placeholder;  /* why the plan cannot be submitted (muster_image unset), or NULL */
};

/* The dryrun's text: the manifest as YAML, every value quoted by the one YAML quoting
 * (yaml_tree.h); a value that is not UTF-8 cannot be carried and is named. */
static int manifest_yaml(const cJSON *m, struct mu_buf *y, struct mu_buf *err)
{
  const char *bad = mu_yaml_invalid(m);
  if (bad != NULL) {
    struct mu_buf shown = MU_BUF_INIT(SIZE_MAX);
    for (const unsigned char *p = (const unsigned char *)bad; *p && shown.len < 200; p++)
      mu_buf_printf(&shown, *p >= 0x20 && *p < 0x7f ? "%c" : "\\x%02x", *p);
    mu_buf_printf(err,
                  "'%s' is not valid UTF-8, which no Kubernetes manifest can carry; give the "
                  "value in UTF-8",
                  mu_buf_str(&shown));
    mu_buf_release(&shown);
    return MU_EINVAL;
  }
  return mu_yaml_emit(m, y);
}

/* The objects created with the job as YAML documents (---), for --dryrun. Returns: mu_free. */
static char *owned_yaml(const cJSON *owned)
{
  struct mu_buf y = MU_BUF_INIT(SIZE_MAX);
  const cJSON *o;
  cJSON_ArrayForEach(o, owned)
  {
    mu_buf_puts(&y, "---\n");
    if (mu_yaml_emit(o, &y) != 0)
      mu_buf_puts(&y, "# (cannot be shown as YAML)\n");
  }
  return mu_buf_detach(&y);
}

static int k8s_dryrun(const struct mu_app *app, const struct mu_cfg *cfg, struct mu_dryrun *out,
                      struct mu_buf *err)
{
  struct mu_buf y = MU_BUF_INIT(SIZE_MAX);
  struct mu_k8s_plan plan = {0};
  struct k8s_priv *p = mu_calloc(1, sizeof(*p));
  char *name = NULL;
  int rc = mu_k8s_job_name(app, cfg, &name, err);
  if (rc == 0)
    rc = mu_k8s_plan(app, cfg, name, &plan, err);
  if (rc == 0)
    rc = manifest_yaml(plan.manifest, &y, err);
  if (rc == 0)
    rc = k8s_job_parse(name, cfg, &p->job, err);
  if (rc != 0)
    goto out;
  p->job.api = plan.api;
  p->kubectl = mu_strdup(mu_cfg_get(cfg, "kubectl") ? mu_cfg_get(cfg, "kubectl") : "kubectl");
  p->context = mu_cfg_get(cfg, "context") ? mu_strdup(mu_cfg_get(cfg, "context")) : NULL;
  p->yaml = mu_strdup(mu_buf_str(&y));
  p->manifest_json = cJSON_PrintUnformatted(plan.manifest);
  p->token_secret = plan.token_secret;
  plan.token_secret = NULL;
  p->service = plan.service;
  plan.service = NULL;
  p->owned = plan.owned;
  plan.owned = NULL;
  if (cJSON_GetArraySize(p->owned) > 0)
    out->objects = owned_yaml(p->owned);
  if (plan.placeholder) {
    struct mu_buf why = MU_BUF_INIT(SIZE_MAX);
    mu_k8s_explain_muster_image(app, &why);
    p->placeholder = mu_buf_detach(&why);
    out->warning = mu_asprintf("the plan shows '%s' where the muster image goes; submitting it "
                               "needs %s",
                               MU_K8S_IMAGE_PLACEHOLDER, p->placeholder);
  }
  out->text = mu_buf_detach(&y);
  out->app_id = p->job.api == MU_K8S_JOBSET
                    ? mu_asprintf("%s:" K8S_JOBSET_WORD ":%s", p->job.ns, p->job.name)
                    : mu_asprintf("%s:%s", p->job.ns, p->job.name);
  out->priv = p;
  p = NULL;
  out->sched = &mu_sched_kubernetes;
out:
  if (p != NULL) {
    k8s_job_release(&p->job);
    mu_free(p);
  }
  mu_k8s_plan_release(&plan);
  mu_free(name);
  mu_buf_release(&y);
  return rc;
}

static void k8s_dryrun_free(struct mu_dryrun *req)
{
  struct k8s_priv *p = req ? req->priv : NULL;
  if (p == NULL)
    return;
  mu_free(p->kubectl);
  mu_free(p->context);
  mu_free(p->yaml);
  cJSON_free(p->manifest_json);
  k8s_job_release(&p->job);
  mu_free(p->token_secret);
  cJSON_Delete(p->service);
  cJSON_Delete(p->owned);
  mu_free(p->placeholder);
  mu_free(p);
  req->priv = NULL;
}

/* kubectl create of obj (a Secret, a Service), owned by the job that `kubectl create -o json`
 * answered with (owner): Kubernetes deletes it with the job. The text handed to kubectl on
 * stdin is wiped after (a Secret's holds the token). Returns: 0, or kubectl's error. */
static int create_owned(const struct k8s_priv *p, const struct mu_cfg *cfg, cJSON *obj,
                        const cJSON *owner, struct mu_buf *err)
{
  static const char *const args[] = {"create", "-f", "-", NULL};
  const cJSON *meta = cJSON_GetObjectItemCaseSensitive(owner, "metadata");
  mu_k8s_set_owner(obj, p->job.name,
                   cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(owner, "apiVersion")),
                   cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(owner, "kind")),
                   cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(meta, "uid")));
  char *text = cJSON_PrintUnformatted(obj);
  int rc = kubectl_call(&p->job, cfg, args, text, NULL, err);
  memset(text, 0, strlen(text));
  cJSON_free(text);
  return rc;
}

/* The job's token Secret: a random token that exists nowhere else, handed to kubectl on stdin,
 * never in an argument, a manifest printed or a log. Returns: 0, or the error in err. */
static int create_token_secret(const struct k8s_priv *p, const struct mu_cfg *cfg,
                               const cJSON *owner, struct mu_buf *err)
{
  char token[65];
  int rc = mu_random_hex(token, 32);
  if (rc != 0) {
    mu_buf_printf(err, "cannot make the job's rendezvous token: %s", mu_strerror(rc));
    return rc;
  }
  cJSON *secret = mu_k8s_token_secret(p->token_secret, p->job.name, token, NULL, NULL, NULL);
  rc = create_owned(p, cfg, secret, owner, err);
  memset(token, 0, sizeof(token));
  cJSON_Delete(secret); /* (its copy of the token goes with the heap) */
  return rc;
}

/* The claim templates and the NetworkPolicy, each owned by the job (owner); *what names the
 * one that failed. Returns: 0, or the error in err. */
static int create_owned_all(const struct k8s_priv *p, const struct mu_cfg *cfg, const cJSON *owner,
                            const char **what, struct mu_buf *err)
{
  const cJSON *o;
  int rc = 0;
  cJSON_ArrayForEach(o, p->owned)
  {
    const char *kind = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "kind"));
    cJSON *dup = cJSON_Duplicate(o, 1);
    *what = kind != NULL && strcmp(kind, "NetworkPolicy") == 0
                ? "musterd's NetworkPolicy could not be created"
                : "device claim template could not be created";
    rc = create_owned(p, cfg, dup, owner, err);
    cJSON_Delete(dup);
    if (rc != 0)
      break;
  }
  return rc;
}

/* What muster creates after the job, owned by it (created: the job's `kubectl create -o json`
 * answer): its token Secret, and its musterd's Service (-cfg rdzv_tls). *what names the one
 * that failed. Returns: 0, or the error in err. */
static int create_after(const struct k8s_priv *p, const struct mu_cfg *cfg, const char *created,
                        const char **what, struct mu_buf *err)
{
  cJSON *owner = cJSON_Parse(created);
  const cJSON *meta = cJSON_GetObjectItemCaseSensitive(owner, "metadata");
  int rc = 0;
  *what = "rendezvous token could not be stored";
  if (cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(meta, "uid")) == NULL) {
    mu_buf_printf(err, "kubectl create printed no uid for %s", p->job.name);
    rc = MU_EPARSE;
  }
  if (rc == 0 && p->token_secret != NULL)
    rc = create_token_secret(p, cfg, owner, err);
  if (rc == 0 && p->service != NULL) {
    cJSON *svc = cJSON_Duplicate(p->service, 1);
    *what = "musterd's Service could not be created";
    rc = create_owned(p, cfg, svc, owner, err);
    cJSON_Delete(svc);
  }
  if (rc == 0)
    rc = create_owned_all(p, cfg, owner, what, err);
  cJSON_Delete(owner);
  return rc;
}

/* kubectl create of the job (-o json when what comes after it needs the job's uid), then its
 * token Secret and its musterd's Service; when one fails the job is deleted again. */
static int k8s_schedule_with(struct k8s_priv *p, const struct mu_cfg *cfg, struct mu_buf *err)
{
  static const char *const plain[] = {"create", "-f", "-", NULL};
  static const char *const as_json[] = {"create", "-f", "-", "-o", "json", NULL};
  struct mu_buf created = MU_BUF_INIT(K8S_OUT_MAX), ignore = MU_BUF_INIT(SIZE_MAX);
  const char *what = NULL;
  int rc;
  if (p->placeholder != NULL) {
    mu_buf_printf(err, "%s", p->placeholder);
    return MU_EINVAL;
  }
  if (p->token_secret == NULL && p->service == NULL && cJSON_GetArraySize(p->owned) == 0)
    return kubectl_call(&p->job, cfg, plain, p->yaml, NULL, err);
  rc = kubectl_call(&p->job, cfg, as_json, p->manifest_json, &created, err);
  if (rc == 0)
    rc = create_after(p, cfg, mu_buf_str(&created), &what, err);
  if (rc != 0 && created.len > 0) {
    mu_buf_printf(err, "\nthe job's %s, so %s was deleted", what, p->job.name);
    kubectl_on_job(&p->job, cfg, "delete", 0, NULL, &ignore);
  }
  mu_buf_release(&created);
  mu_buf_release(&ignore);
  return rc;
}

static int k8s_schedule(struct mu_dryrun *req, struct mu_buf *err)
{
  struct k8s_priv *p = req->priv;
  struct mu_cfg cfg = {MU_KVLIST_INIT};
  int rc;
  /* The kubectl runopts travel in the plan (schedule has no cfg of its own). */
  mu_kvlist_set(&cfg.values, "kubectl", p->kubectl);
  if (p->context != NULL)
    mu_kvlist_set(&cfg.values, "context", p->context);
  rc = k8s_schedule_with(p, &cfg, err);
  mu_cfg_release(&cfg);
  return rc;
}

/* ---------------------------------------------------------------------------------------------
 * Status: the job, its pods and their events
 */

/* `kubectl get pods -l app.kubernetes.io/instance=NAME -o json`: every pod of the job (its
 * roles' and its musterd's carry the label). */
static int get_pods(const struct k8s_job *j, const struct mu_cfg *cfg, struct mu_buf *out,
                    struct mu_buf *err)
{
  char *sel = mu_asprintf("app.kubernetes.io/instance=%s", j->name);
  const char *args[] = {"get", "pods", "-l", sel, "-o", "json", NULL};
  int rc = kubectl_call(j, cfg, args, NULL, out, err);
  mu_free(sel);
  return rc;
}

/* The namespace's Warning events about pods: why a pod waits when its status does not say
 * (FailedMount of a missing Secret, FailedScheduling, a sandbox that cannot start). */
static int get_events(const struct k8s_job *j, const struct mu_cfg *cfg, struct mu_buf *out,
                      struct mu_buf *err)
{
  static const char *const args[] = {
      "get",  "events", "--field-selector", "involvedObject.kind=Pod,type=Warning", "-o",
      "json", NULL};
  return kubectl_call(j, cfg, args, NULL, out, err);
}

/* The root cause of a failed job: the failure record (failrec.h) that the agent of a failed
 * replica printed in the last lines of its pod's log. A pod whose log cannot be read (deleted,
 * evicted) adds nothing. */
static void add_failures(const struct k8s_job *j, const struct mu_cfg *cfg, const char *pods,
                         struct mu_app_status *st)
{
  for (size_t i = 0; i < st->nreplicas; i++) {
    const struct mu_replica_status *r = &st->replicas[i];
    if (r->state != MU_STATE_FAILED || r->role == NULL)
      continue;
    struct mu_buf log = MU_BUF_INIT(K8S_OUT_MAX), ignore = MU_BUF_INIT(SIZE_MAX);
    char *pod = mu_k8s_pod_name(pods, j->name, r->role, r->replica_id);
    if (pod == NULL && j->api == MU_K8S_VOLCANO)
      pod = mu_strdup(r->hostname);
    const char *args[] = {"logs", pod, "--tail=200", NULL};
    if (pod != NULL && kubectl_call(j, cfg, args, NULL, &log, &ignore) == 0)
      mu_app_status_scan_failure(st, i, log.data ? log.data : "", log.len);
    mu_free(pod);
    mu_buf_release(&log);
    mu_buf_release(&ignore);
  }
}

/* What the pods say: replica states (JobSet), messages, exit codes, why the job waits, and the
 * earliest failed pod as the root cause when no agent left a failure record. A cluster whose
 * pods cannot be listed leaves the job's own status as it is. */
static void read_pods(const struct k8s_job *j, const struct mu_cfg *cfg, struct mu_app_status *st)
{
  struct mu_buf pods = MU_BUF_INIT(K8S_OUT_MAX), events = MU_BUF_INIT(K8S_OUT_MAX);
  struct mu_buf ignore = MU_BUF_INIT(SIZE_MAX);
  char *failed = NULL;
  int want_events = 0, set_states = j->api == MU_K8S_JOBSET;
  if (get_pods(j, cfg, &pods, &ignore) != 0 ||
      mu_k8s_apply_pods(mu_buf_str(&pods), NULL, set_states, st, &failed, &want_events, &ignore) !=
          0)
    goto out;
  if (want_events && get_events(j, cfg, &events, &ignore) == 0) {
    mu_free(failed);
    mu_k8s_apply_pods(mu_buf_str(&pods), mu_buf_str(&events), set_states, st, &failed, &want_events,
                      &ignore);
  }
  if (st->state == MU_STATE_FAILED)
    add_failures(j, cfg, mu_buf_str(&pods), st);
  if (st->state == MU_STATE_FAILED && st->root_cause == NULL && failed != NULL) {
    st->root_cause = failed;
    failed = NULL;
  }
out:
  mu_free(failed);
  mu_buf_release(&pods);
  mu_buf_release(&events);
  mu_buf_release(&ignore);
}

static int k8s_describe(const char *app_id, const struct mu_cfg *cfg, struct mu_app_status *out,
                        struct mu_buf *err)
{
  struct mu_buf json = MU_BUF_INIT(K8S_OUT_MAX);
  struct k8s_job j;
  int rc = k8s_job_parse(app_id, cfg, &j, err);
  if (rc == 0)
    rc = kubectl_on_job(&j, cfg, "get", 1, &json, err);
  if (rc == 0 && j.api == MU_K8S_JOBSET)
    rc = mu_k8s_parse_jobset_status(mu_buf_str(&json), app_id, out, err);
  else if (rc == 0)
    rc = mu_k8s_parse_status(mu_buf_str(&json), app_id, out, err);
  if (rc == 0)
    read_pods(&j, cfg, out);
  k8s_job_release(&j);
  mu_buf_release(&json);
  return rc;
}

static int k8s_app_spec(const char *app_id, const struct mu_cfg *cfg, struct mu_app **out,
                        struct mu_buf *err)
{
  struct mu_buf json = MU_BUF_INIT(K8S_OUT_MAX);
  struct k8s_job j;
  int rc = k8s_job_parse(app_id, cfg, &j, err);
  if (rc == 0)
    rc = kubectl_on_job(&j, cfg, "get", 1, &json, err);
  if (rc == 0)
    rc = mu_k8s_parse_app(mu_buf_str(&json), out, err);
  k8s_job_release(&j);
  mu_buf_release(&json);
  return rc;
}

/* Why each listed job that has not ended is held up, in the words `muster status` uses: one
 * read of every muster pod of the namespace and, when a waiting pod's own status says nothing,
 * one read of the namespace's Warning events (get_events), whatever the number of jobs. A
 * cluster that cannot list them leaves the reasons out. */
static void list_reasons(const struct k8s_job *j, const struct mu_cfg *cfg,
                         struct mu_app_list_entry *l, size_t n)
{
  static const char *const args[] = {"get", "pods", "-l", "app.kubernetes.io/managed-by=muster",
                                     "-o",  "json", NULL};
  struct mu_buf pods = MU_BUF_INIT(K8S_OUT_MAX), events = MU_BUF_INIT(K8S_OUT_MAX);
  struct mu_buf ignore = MU_BUF_INIT(SIZE_MAX);
  size_t live = 0;
  int want_events = 0;
  for (size_t i = 0; i < n; i++)
    live += !mu_job_state_is_terminal(l[i].state);
  if (live > 0 && kubectl_call(j, cfg, args, NULL, &pods, &ignore) == 0 &&
      mu_k8s_list_reasons(mu_buf_str(&pods), NULL, l, n, &want_events, &ignore) == 0 &&
      want_events && get_events(j, cfg, &events, &ignore) == 0)
    mu_k8s_list_reasons(mu_buf_str(&pods), mu_buf_str(&events), l, n, &want_events, &ignore);
  mu_buf_release(&pods);
  mu_buf_release(&events);
  mu_buf_release(&ignore);
}

static int k8s_list(const struct mu_cfg *cfg, struct mu_app_list_entry **out, size_t *n,
                    struct mu_buf *err)
{
  struct mu_buf json = MU_BUF_INIT(K8S_OUT_MAX);
  struct k8s_job j;
  int rc = k8s_job_parse("-", cfg, &j, err);
  if (rc == 0) {
    const char *args[] = {
        "get", mu_k8s_resource(j.api), "-l", "app.kubernetes.io/managed-by=muster", "-o", "json",
        NULL};
    rc = kubectl_call(&j, cfg, args, NULL, &json, err);
  }
  if (rc == 0)
    rc = mu_k8s_parse_list(mu_buf_str(&json), j.ns, out, n, err);
  if (rc == 0)
    list_reasons(&j, cfg, *out, *n);
  k8s_job_release(&j);
  mu_buf_release(&json);
  return rc;
}

static int k8s_cancel(const char *app_id, const struct mu_cfg *cfg, struct mu_buf *err)
{
  struct k8s_job j;
  int rc = k8s_job_parse(app_id, cfg, &j, err);
  if (rc == 0)
    rc = kubectl_on_job(&j, cfg, "delete", 0, NULL, err);
  k8s_job_release(&j);
  return rc;
}

/* ---------------------------------------------------------------------------------------------
 * Logs
 */

/* The pod of one replica: a Volcano pod's name is known (<job>-<task>-0); a JobSet's Job names
 * its pod with a random suffix, so it is looked up among the job's pods.
 * Returns: 0, or MU_ENOENT / kubectl's error in err. Ownership: *pod is the caller's. */
static int replica_pod(const struct k8s_job *j, const struct mu_cfg *cfg, const char *role,
                       long replica, char **pod, struct mu_buf *err)
{
  struct mu_buf pods = MU_BUF_INIT(K8S_OUT_MAX);
  int rc = 0;
  *pod = NULL;
  if (j->api == MU_K8S_VOLCANO) {
    char *task = mu_k8s_task_name(role, replica);
    *pod = mu_asprintf("%s-%s-0", j->name, task);
    mu_free(task);
    return 0;
  }
  rc = get_pods(j, cfg, &pods, err);
  if (rc == 0)
    *pod = mu_k8s_pod_name(mu_buf_str(&pods), j->name, role, replica);
  if (rc == 0 && *pod == NULL) {
    mu_buf_printf(err, "%s/%ld of %s has no pod (yet); 'muster status' says why", role, replica,
                  j->name);
    rc = MU_ENOENT;
  }
  mu_buf_release(&pods);
  return rc;
}

/* kubectl [--context C] -n NS logs POD [-f] [--tail=N] [--previous] [--since=D|--since-time=T] */
static void logs_argv(struct mu_strvec *av, const struct k8s_job *j, const struct mu_cfg *cfg,
                      const char *pod, const struct mu_log_opts *o)
{
  kubectl_argv(av, cfg, j->ns);
  mu_strvec_push(av, "logs");
  mu_strvec_push(av, pod);
  if (o->follow)
    mu_strvec_push(av, "-f");
  if (o->tail > 0) /* 0 means the whole log, as for the other schedulers (kubectl: every line) */
    mu_strvec_pushf(av, "--tail=%ld", o->tail);
  if (o->previous)
    mu_strvec_push(av, "--previous");
  if (o->since != NULL && strchr(o->since, 'T') != NULL)
    mu_strvec_pushf(av, "--since-time=%s", o->since);
  else if (o->since != NULL)
    mu_strvec_pushf(av, "--since=%s", o->since);
}

/* Whether kubectl's words say the pod has not started its container yet (or has none yet). */
static int not_started(const char *why)
{
  return strstr(why, "is waiting to start") != NULL || strstr(why, "has no pod (yet)") != NULL ||
         strstr(why, "PodInitializing") != NULL || strstr(why, "ContainerCreating") != NULL;
}

/* Whether the job has ended (or cannot be read any more): following stops waiting then. */
static int job_over(const struct k8s_job *j, const struct mu_cfg *cfg)
{
  struct mu_buf json = MU_BUF_INIT(K8S_OUT_MAX), ignore = MU_BUF_INIT(SIZE_MAX);
  struct mu_app_status st;
  int over = 1;
  memset(&st, 0, sizeof(st));
  if (kubectl_on_job(j, cfg, "get", 1, &json, &ignore) == 0 &&
      (j->api == MU_K8S_JOBSET ? mu_k8s_parse_jobset_status(mu_buf_str(&json), "", &st, &ignore)
                               : mu_k8s_parse_status(mu_buf_str(&json), "", &st, &ignore)) == 0)
    over = mu_job_state_is_terminal(st.state);
  mu_app_status_release(&st);
  mu_buf_release(&json);
  mu_buf_release(&ignore);
  return over;
}

/* One replica's log through `kubectl logs`. Following a pod that has not started yet waits for
 * it (kubectl would fail at once), while the job lasts. Returns: 0, MU_ENOENT (no such pod),
 * MU_EIO with kubectl's words in err. */
static int replica_log(const struct k8s_job *j, const struct mu_cfg *cfg, const char *role,
                       long replica, const struct mu_log_opts *o, int out_fd, struct mu_buf *err)
{
  for (;;) {
    struct mu_strvec av = MU_STRVEC_INIT;
    struct mu_buf eb = MU_BUF_INIT(MU_EXEC_STDERR_MAX), why = MU_BUF_INIT(SIZE_MAX);
    char *pod = NULL;
    int status = -1, rc = replica_pod(j, cfg, role, replica, &pod, &why);
    if (rc == 0) {
      logs_argv(&av, j, cfg, pod, o);
      rc = mu_exec_to_fd(av.v, out_fd, &eb, &status);
      if (rc == MU_ENOENT) {
        char *missing = kubectl_missing(av.v[0]);
        mu_buf_puts(&why, missing);
        mu_free(missing);
      } else if (rc == 0 && status != 0) {
        char *what = mu_asprintf("kubectl logs %s", pod);
        rc = mu_exec_failure(what, status, mu_exec_chomp(eb.data ? eb.data : (char *)""),
                             kubectl_hints, &why);
        mu_free(what);
      }
    }
    int wait = rc != 0 && o->follow && not_started(mu_buf_str(&why)) && !job_over(j, cfg);
    if (rc != 0 && !wait)
      mu_buf_puts(err, mu_buf_str(&why));
    mu_strvec_release(&av);
    mu_buf_release(&eb);
    mu_buf_release(&why);
    mu_free(pod);
    if (!wait)
      return rc;
    struct timespec ts = {1, 0};
    nanosleep(&ts, NULL);
  }
}

static int k8s_log(const char *app_id, const char *role, long replica, const struct mu_log_opts *o,
                   int out_fd, const struct mu_cfg *cfg, struct mu_buf *err)
{
  struct k8s_job j;
  int rc = k8s_job_parse(app_id, cfg, &j, err);
  if (rc == 0 && (role == NULL || replica < 0)) /* one `kubectl logs` per replica, prefixed */
    rc = mu_sched_log_fanout(&mu_sched_kubernetes, app_id, role, replica, o, out_fd, cfg, err);
  else if (rc == 0)
    rc = replica_log(&j, cfg, role, replica, o, out_fd, err);
  k8s_job_release(&j);
  return rc;
}

const struct mu_sched_ops mu_sched_kubernetes = {
    .name = "kubernetes",
    .help = "Volcano Jobs or JobSets on Kubernetes through kubectl (-cfg api=volcano|jobset)",
    .caps = MU_SCHED_IMAGES,
    .rdzv_macro = "JOB-musterd-0.JOB:29400 (a JobSet's JOB-musterd-0-0.JOB; -cfg rdzv_port; with "
                  "-cfg rdzv_tls https://JOB-musterd.NAMESPACE.svc:29400), the job's own "
                  "musterd task, or the -cfg rdzv=HOST:PORT given: the manifest has the value",
    .runopts = k8s_runopts,
    .dryrun = k8s_dryrun,
    .schedule = k8s_schedule,
    .describe = k8s_describe,
    .list = k8s_list,
    .cancel_existing = k8s_cancel,
    .log_open = k8s_log,
    .log_caps = MU_SCHED_LOG_SINCE | MU_SCHED_LOG_PREVIOUS,
    .dryrun_free = k8s_dryrun_free,
    .app_spec = k8s_app_spec,
};
