/* Inside the kubernetes scheduler (kubernetes*.c only): the render context that both APIs'
 * renderers share, and the pieces of a pod they both use. kubernetes_ctx.c builds the context
 * from the app and its cfg, kubernetes_render.c the pods and the Volcano Job; kubernetes_jobset.c
 * the JobSet.
 */
#ifndef MU_KUBERNETES_IMPL_H
#define MU_KUBERNETES_IMPL_H

#include <cjson/cJSON.h>

#include "buf.h"
#include "config.h"
#include "job.h"
#include "kubernetes.h"

/* A role whose entrypoint is `muster` (dist.ddp's --launcher muster) runs the portable agent
 * that the pod's init container copied into the emptyDir at MU_K8S_AGENT_DIR: the user's image
 * needs nothing from muster. */
#define MU_K8S_AGENT_DIR "/muster"
#define MU_K8S_AGENT_VOLUME "muster-agent"
#define MU_K8S_AGENT_COPY "/mnt/muster"

/* Cuts s to at most max characters, then drops trailing '-'. */
void mu_k8s_cut(char *s, size_t max);

/* Label values: at most 63 of [A-Za-z0-9-_.], alphanumeric at both ends. Returns: a new
 * string (mu_free). */
char *mu_k8s_label_value(const char *s);

/* Whether argument i of the role's command line (-1: the entrypoint) is the `muster` of
 * `muster agent`. */
int mu_k8s_is_agent_token(const struct mu_role *r, long i);

/* Whether the role runs `muster agent`; whether any role of app does. */
int mu_k8s_runs_agent(const struct mu_role *r);
int mu_k8s_app_runs_agent(const struct mu_app *app);

/* What every part of a manifest needs, resolved once from the app and its cfg. */
struct mu_k8s_ctx {
  const struct mu_app *app;
  const struct mu_cfg *cfg;
  const char *job;          /* metadata.name */
  enum mu_k8s_api api;      /* Volcano Job or JobSet */
  long port;                /* the job's own musterd's port */
  int own_rdzv;             /* the job runs its own musterd */
  char *token_secret;       /* the Secret (key "token") of the rendezvous token, or NULL */
  int token_is_ours;        /* muster creates token_secret at schedule time */
  char *rdzv;               /* ${rdzv_endpoint}, NULL when none */
  char *c10d;               /* ${c10d_endpoint}: the musterd's TCPStore listener, or NULL */
  long c10d_port;           /* ... its port */
  const char *tls_secret;   /* -cfg rdzv_tls: the job's musterd serves HTTPS, else NULL */
  const char *tls_client;   /* -cfg rdzv_tls_client: the agents' client certificate, else NULL */
  char *rdzv_service;       /* with TLS: the Service <job>-musterd that names the musterd */
  char *rank0_env;          /* ${rank0_env} away from rank 0 (Volcano) or everywhere (JobSet) */
  char *rank0_host;         /* JobSet: role 0 replica 0's DNS name; NULL on Volcano */
  const char *muster_image; /* -cfg muster_image, or MU_K8S_IMAGE_PLACEHOLDER */
  int placeholder;          /* muster_image is the placeholder */
  const char *sched;        /* schedulerName, NULL for the cluster's default */
  const char *neuron_res;   /* -cfg neuron_resource: what aws.amazon.com/neuron is asked as */
  cJSON *node_sel, *labels, *annotations; /* from cfg; never NULL */
  cJSON *tolerations, *pull_secrets;      /* from cfg; NULL when none */
  int dra;                    /* -cfg neuron_devices=dra: Neuron and EFA through claim templates */
  char *topo_label;           /* -cfg topology's node label, or NULL */
  int topo_required;          /* ... :required (else preferred) */
  long topo_tier;             /* Volcano: highestTierAllowed (when topo_tier_name is NULL) */
  const char *topo_tier_name; /* Volcano: -cfg topology_tier as a tier name, or NULL */
};

/* Fills x for app and cfg: every required value checked (all the missing ones named at once),
 * every runopt parsed. Returns: 0, or MU_EINVAL with the message in err.
 * Ownership: x holds borrowed app, cfg and job; release with mu_k8s_ctx_release (also after an
 * error). */
int mu_k8s_ctx_init(struct mu_k8s_ctx *x, const struct mu_app *app, const struct mu_cfg *cfg,
                    const char *job, struct mu_buf *err);
void mu_k8s_ctx_release(struct mu_k8s_ctx *x);

/* The pod template ({metadata, spec}) of replica k of role ri; k < 0 gives the template every
 * replica of the role shares (JobSet), the replica's index read from JobSet's job-index
 * annotation. Returns: a new object (cJSON_Delete). */
cJSON *mu_k8s_pod_template(const struct mu_k8s_ctx *x, long ri, long k);

/* The pod template of the job's own musterd. Returns: a new object (cJSON_Delete). */
cJSON *mu_k8s_rdzv_pod_template(const struct mu_k8s_ctx *x);

/* The object's metadata (name, muster's labels, Kueue's queue label, -cfg labels and
 * annotations). Returns: a new object (cJSON_Delete). */
cJSON *mu_k8s_object_meta(const struct mu_k8s_ctx *x);

/* The smallest max_retries of the roles whose retry policy restarts more than one replica
 * (APPLICATION, ROLE), or of every role when none does. Returns: >= 0. */
long mu_k8s_job_retries(const struct mu_app *app);

/* The lost pods a role with a replica to spare (min_replicas < num_replicas: --spares K, an
 * elastic -j MIN:MAX) has replaced alone, the others running on while the rendezvous covers the
 * loss: its max_retries plus its spares (num_replicas - min_replicas), as many losses as the
 * local scheduler restarts and covers. Returns: 0 for a role with none to spare, else >= 1. */
long mu_k8s_role_cover(const struct mu_role *r);

/* kubernetes_dra.c. Parses -cfg neuron_devices, topology and topology_tier into x (called by
 * mu_k8s_ctx_init). Returns: 0, or MU_EINVAL with the choices (and the closest) in err. */
int mu_k8s_ctx_trn(struct mu_k8s_ctx *x, struct mu_buf *err);

/* Whether the device (an extended resource name) comes through a claim, not a limit. */
int mu_k8s_claimed(const struct mu_k8s_ctx *x, const char *device);

/* With neuron_devices=dra: role ri's pod spec's resourceClaims and its container's
 * resources.claims, one per claim template of the role. */
void mu_k8s_pod_claims(const struct mu_k8s_ctx *x, long ri, cJSON *spec, cJSON *ctr);

/* What muster creates after the job, owned by it: the roles' claim templates (dra) and the
 * musterd's NetworkPolicy (when the job runs its own). Returns: a new array (cJSON_Delete). */
cJSON *mu_k8s_owned_objects(const struct mu_k8s_ctx *x);

/* -cfg topology on a Volcano Job's spec; on every replicated job of a JobSet. */
void mu_k8s_volcano_topology(const struct mu_k8s_ctx *x, cJSON *spec);
void mu_k8s_jobset_topology(const struct mu_k8s_ctx *x, cJSON *rjobs);

/* The JobSet (kubernetes_jobset.c). Returns: a new object (cJSON_Delete). */
cJSON *mu_k8s_jobset(const struct mu_k8s_ctx *x);

#endif
