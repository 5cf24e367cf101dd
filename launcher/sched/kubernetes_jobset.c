/* The JobSet renderer (-cfg api=jobset): the same pods as the Volcano Job (kubernetes_render.c
 * builds them) in a jobset.x-k8s.io/v1alpha2 JobSet, for clusters without Volcano (Kueue for
 * queues and quotas, the default scheduler, cluster autoscalers).
 *
 * The shape (docs/kubernetes.md, "JobSet"):
 * - one replicated job per role, its replicas the role's nodes, each Job one pod (Indexed,
 *   completions 1): pod hostnames are <jobset>-<role>-<replica>-0 through the JobSet's headless
 *   service (network.enableDNSHostnames, publishNotReadyAddresses);
 * - the job's own musterd as the first replicated job, which the roles depend on (dependsOn
 *   Ready: JobSet creates them once its readiness probe passes);
 * - failurePolicy.maxRestarts from the roles' retries (APPLICATION, ROLE: the JobSet restarts
 *   every Job), a REPLICA role's retries as its Jobs' backoffLimit (the Job replaces the pod);
 *   a role with a replica to spare has its Jobs' backoffLimit from mu_k8s_role_cover: a lost
 *   pod is replaced alone, the rendezvous covering the loss, and the JobSet restarts nothing;
 * - successPolicy: the JobSet succeeds when every Job of the roles has (musterd never ends);
 * - with kueue_queue, Kueue's queue label and spec.suspend, as Kueue admits a JobSet.
 * What a JobSet cannot say: an elastic role's minimum (min_replicas); every replica is created
 * and the agents' --nnodes MIN:MAX keeps the rendezvous elastic.
 */
#include <string.h>

#include "alloc.h"
#include "kubernetes_impl.h"

/* A batch/v1 Job template of one pod per Job (completions and parallelism 1, Indexed). */
static cJSON *job_template(cJSON *pod, long backoff)
{
  cJSON *t = cJSON_CreateObject(), *spec = cJSON_AddObjectToObject(t, "spec");
  cJSON_AddNumberToObject(spec, "backoffLimit", (double)backoff);
  cJSON_AddStringToObject(spec, "completionMode", "Indexed");
  cJSON_AddNumberToObject(spec, "completions", 1);
  cJSON_AddNumberToObject(spec, "parallelism", 1);
  cJSON_AddItemToObject(spec, "template", pod);
  return t;
}

/* One replicated job: replicas Jobs of template, created once after (when not NULL) is Ready. */
static cJSON *replicated_job(const char *name, long replicas, cJSON *tmpl, const char *after)
{
  cJSON *rj = cJSON_CreateObject();
  if (after != NULL) {
    cJSON *d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "name", after);
    cJSON_AddStringToObject(d, "status", "Ready");
    cJSON_AddItemToArray(cJSON_AddArrayToObject(rj, "dependsOn"), d);
  }
  cJSON_AddStringToObject(rj, "name", name);
  cJSON_AddNumberToObject(rj, "replicas", (double)replicas);
  cJSON_AddItemToObject(rj, "template", tmpl);
  return rj;
}

/* The replicated job of role ri: its pods restart only through the JobSet, or through the Job
 * (backoffLimit) for a REPLICA retry policy. A role with a replica to spare: each Job replaces
 * its lost pod (up to mu_k8s_role_cover times) and no Job fails for one loss, so the JobSet
 * restarts nothing while the rendezvous covers it. */
static cJSON *role_job(const struct mu_k8s_ctx *x, long ri)
{
  const struct mu_role *r = &x->app->roles[ri];
  long backoff = r->retry_policy == MU_RETRY_REPLICA && r->max_retries > 0 ? r->max_retries : 0;
  if (mu_k8s_role_cover(r) > 0)
    backoff = mu_k8s_role_cover(r);
  char *name = mu_k8s_rjob_name(r->name, r->num_replicas);
  cJSON *rj =
      replicated_job(name, r->num_replicas, job_template(mu_k8s_pod_template(x, ri, -1), backoff),
                     x->own_rdzv ? "musterd" : NULL);
  mu_free(name);
  return rj;
}

cJSON *mu_k8s_jobset(const struct mu_k8s_ctx *x)
{
  const char *kq = mu_cfg_get(x->cfg, "kueue_queue");
  cJSON *js = cJSON_CreateObject(), *spec, *net, *rjobs, *sp, *targets;

  cJSON_AddStringToObject(js, "apiVersion", "jobset.x-k8s.io/v1alpha2");
  cJSON_AddStringToObject(js, "kind", "JobSet");
  cJSON_AddItemToObject(js, "metadata", mu_k8s_object_meta(x));
  spec = cJSON_AddObjectToObject(js, "spec");
  cJSON_AddNumberToObject(cJSON_AddObjectToObject(spec, "failurePolicy"), "maxRestarts",
                          (double)mu_k8s_job_retries(x->app));
  net = cJSON_AddObjectToObject(spec, "network");
  cJSON_AddTrueToObject(net, "enableDNSHostnames");
  cJSON_AddTrueToObject(net, "publishNotReadyAddresses");
  rjobs = cJSON_AddArrayToObject(spec, "replicatedJobs");
  if (x->own_rdzv) /* restartPolicy OnFailure: the kubelet restarts it, the Job never fails */
    cJSON_AddItemToArray(
        rjobs, replicated_job("musterd", 1, job_template(mu_k8s_rdzv_pod_template(x), 0), NULL));
  for (long ri = 0; ri < (long)x->app->nroles; ri++)
    cJSON_AddItemToArray(rjobs, role_job(x, ri));
  mu_k8s_jobset_topology(x, rjobs);
  if (x->own_rdzv) {
    sp = cJSON_AddObjectToObject(spec, "successPolicy");
    cJSON_AddStringToObject(sp, "operator", "All");
    targets = cJSON_AddArrayToObject(sp, "targetReplicatedJobs");
    for (size_t ri = 0; ri < x->app->nroles; ri++) {
      char *name = mu_k8s_rjob_name(x->app->roles[ri].name, x->app->roles[ri].num_replicas);
      cJSON_AddItemToArray(targets, cJSON_CreateString(name));
      mu_free(name);
    }
  }
  if (kq != NULL && *kq != '\0')
    cJSON_AddTrueToObject(spec, "suspend");
  return js;
}
