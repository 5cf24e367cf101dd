/* The kubernetes scheduler's pure parts, exposed for the unit tests and `muster deploy`: the
 * renderers (kubernetes_render.c: job spec + cfg -> a Volcano Job, the pods both APIs share, the
 * musterd container, the token Secret; kubernetes_jobset.c: the JobSet) and the parsers
 * (kubernetes_parse.c: `kubectl get -o json` output -> statuses and lists).
 * kubernetes.c defines `mu_sched_kubernetes` on top of these, running kubectl.
 */
#ifndef MU_KUBERNETES_H
#define MU_KUBERNETES_H

#include <cjson/cJSON.h>

#include "buf.h"
#include "job.h"
#include "sched.h"

/* The port the job's own musterd listens on inside its pod (default of the rdzv_port
 * runopt). */
#define MU_K8S_RDZV_PORT 29400

/* Where the rendezvous token's Secret is mounted in the job's musterd and agent pods, and the
 * file (its key "token") that musterd --token-file and MUSTER_RDZV_TOKEN_FILE name. */
#define MU_K8S_TOKEN_DIR "/var/run/muster/rdzv"
#define MU_K8S_TOKEN_FILE MU_K8S_TOKEN_DIR "/token"

/* With -cfg rdzv_tls=SECRET (a kubernetes.io/tls Secret: tls.crt, tls.key, ca.crt): where it is
 * mounted read-only, in the job's musterd (tls.crt and tls.key, and ca.crt when it checks client
 * certificates) and in the agents (ca.crt alone: MUSTER_RDZV_CACERT); and where the agents'
 * client certificate of -cfg rdzv_tls_client=SECRET (tls.crt, tls.key) is mounted. */
#define MU_K8S_TLS_DIR "/var/run/muster/rdzv-tls"
#define MU_K8S_TLS_CLIENT_DIR "/var/run/muster/rdzv-tls-client"

/* The annotation of a job's own object that holds the app as submitted (its JSON, job.h), which
 * `muster describe` reads back; left out when the JSON would pass MU_K8S_APP_MAX bytes. */
#define MU_K8S_APP_ANNOTATION "muster.dev/app"
#define MU_K8S_APP_MAX (64 * 1024)

/* The muster image's stand-in in a plan made without -cfg muster_image (a dryrun shows it and
 * warns; a submission refuses it). */
#define MU_K8S_IMAGE_PLACEHOLDER "<-cfg muster_image is not set>"

/* The two shapes a job takes (-cfg api). */
enum mu_k8s_api {
  MU_K8S_VOLCANO = 0, /* batch.volcano.sh/v1alpha1 Job (the default) */
  MU_K8S_JOBSET,      /* jobset.x-k8s.io/v1alpha2 JobSet */
};

/* "volcano" or "jobset"; the kubectl resource of the API's object ("jobs.batch.volcano.sh",
 * "jobsets.jobset.x-k8s.io"). Ownership: static. */
const char *mu_k8s_api_name(enum mu_k8s_api api);
const char *mu_k8s_resource(enum mu_k8s_api api);

/* Parses -cfg api (NULL or "" is volcano). Returns: 0, or MU_EINVAL with the choices in err. */
int mu_k8s_api_parse(const char *s, enum mu_k8s_api *out, struct mu_buf *err);

/* What muster submits for one job. */
struct mu_k8s_plan {
  cJSON *manifest; /* the Volcano Job or the JobSet */
  enum mu_k8s_api api;
  char *token_secret; /* the Secret of the job's rendezvous token, which muster creates when it
                       * submits the job (never in the manifest); NULL when none */
  int placeholder;    /* the manifest holds MU_K8S_IMAGE_PLACEHOLDER (muster_image unset) */
  cJSON *service;     /* with -cfg rdzv_tls: the headless Service that names the job's musterd
                       * (<job>-musterd.<namespace>.svc, the name its certificate covers), which
                       * muster creates after the job, owned by it (mu_k8s_set_owner); else NULL */
  cJSON *owned;       /* what else muster creates after the job, owned by it: the roles'
                       * ResourceClaimTemplates (-cfg neuron_devices=dra) and the NetworkPolicy
                       * of the job's musterd; an array, maybe empty */
};

/* Renders the job for app: a Volcano Job or a JobSet (-cfg api). job_name is the metadata.name
 * (see mu_k8s_job_name). Every missing required value is named at once; a missing muster image
 * alone is not an error but MU_K8S_IMAGE_PLACEHOLDER with out->placeholder set.
 * Returns: 0, or MU_EINVAL with a message naming the runopts or fields in err.
 * Ownership: out is the caller's (mu_k8s_plan_release, also after an error). */
int mu_k8s_plan(const struct mu_app *app, const struct mu_cfg *cfg, const char *job_name,
                struct mu_k8s_plan *out, struct mu_buf *err);
void mu_k8s_plan_release(struct mu_k8s_plan *p);

/* Appends why the muster image is needed and how to make one (-cfg muster_image). */
void mu_k8s_explain_muster_image(const struct mu_app *app, struct mu_buf *out);

/* The Secret that carries a job's rendezvous token (stringData.token), labelled for the job;
 * with owner_uid it is owned by the job's object (owner_api, owner_kind, named job) and deleted
 * with it. Returns: a new object (cJSON_Delete). */
cJSON *mu_k8s_token_secret(const char *name, const char *job, const char *token,
                           const char *owner_api, const char *owner_kind, const char *owner_uid);

/* Makes obj (a Secret, a Service) owned by the job just created: an ownerReference to it
 * (owner_api, owner_kind, named job, owner_uid), so that Kubernetes deletes obj with the job. */
void mu_k8s_set_owner(cJSON *obj, const char *job, const char *owner_api, const char *owner_kind,
                      const char *owner_uid);

/* A readiness or liveness probe: GET /healthz on port every period_s seconds; failures > 0
 * sets failureThreshold (else Kubernetes' default, 3). Returns: a new object (cJSON_Delete). */
cJSON *mu_k8s_healthz_probe(long port, int period_s, int failures);

/* The musterd container, the one spec for both places musterd runs on Kubernetes: the job's
 * own rendezvous task and `muster deploy rendezvous`. `musterd --listen 0.0.0.0:PORT` from
 * image, the port named "rdzv", a /healthz readiness probe every 2 s, and resources (limits
 * 1000m CPU and 512M memory, requests 100m and 64M: musterd keeps rounds and KV in memory).
 * Returns: a new object; the caller adds what its pod needs and frees it (cJSON_Delete). */
cJSON *mu_k8s_musterd_container(const char *image, long port);

/* Whether s is a valid Kubernetes object name (an RFC 1123 DNS label: 1-63 characters of
 * lowercase letters, digits and '-', starting and ending with a letter or digit).
 * Returns: 1 or 0. */
int mu_k8s_name_ok(const char *s);

/* Whether s is a valid name of a Secret or another namespaced object (an RFC 1123 DNS
 * subdomain: 1-253 characters, dot-separated labels of lowercase letters, digits and '-', each
 * starting and ending with a letter or digit). Returns: 1 or 0. */
int mu_k8s_subdomain_ok(const char *s);

/* TorchX's normalize_str: lowercase, keep [a-z0-9-], drop a leading '-' (underscores
 * vanish). Returns: a new string; caller frees with mu_free(). */
char *mu_k8s_normalize(const char *s);

/* mu_k8s_plan's manifest alone. Returns: as mu_k8s_plan. Ownership: *out is the caller's
 * (cJSON_Delete). */
int mu_k8s_render(const struct mu_app *app, const struct mu_cfg *cfg, const char *job_name,
                  cJSON **out, struct mu_buf *err);

/* Picks the job name: $MUSTER_APP_ID when set (checked to be a DNS label), else
 * normalize(app.name)-<suffix>, the name part cut so that every pod hostname
 * (<job>-<task>-0) stays within 63 characters.
 * Returns: 0 or MU_EINVAL. Ownership: *out is the caller's (mu_free). */
int mu_k8s_job_name(const struct mu_app *app, const struct mu_cfg *cfg, char **out,
                    struct mu_buf *err);

/* The Volcano task name of one replica: normalize(role)-replica, the role part cut to keep the
 * task name within 20 characters. Returns: caller frees with mu_free(). */
char *mu_k8s_task_name(const char *role, long replica);

/* A JobSet replicated job's name for a role of num_replicas: normalize(role), cut so that
 * "<name>-<num_replicas - 1>" fits in 20 characters, as a Volcano task's name.
 * Returns: caller frees with mu_free(). */
char *mu_k8s_rjob_name(const char *role, long num_replicas);

/* Volcano job phase and task phase -> app state (TorchX case 07). NULL -> UNKNOWN. */
enum mu_job_state mu_k8s_job_state(const char *phase);
enum mu_job_state mu_k8s_task_state(const char *phase);

/* Parses `kubectl get jobs.batch.volcano.sh NAME -o json` into out (app_id copied).
 * Returns: 0, or MU_EPARSE. Ownership: out's fields are the caller's
 * (mu_app_status_release). */
int mu_k8s_parse_status(const char *json, const char *app_id, struct mu_app_status *out,
                        struct mu_buf *err);

/* Parses `kubectl get jobsets.jobset.x-k8s.io NAME -o json` into out (app_id copied): the
 * JobSet's state (its Completed, Failed and Suspended conditions; RUNNING once a Job of a role is
 * ready), restarts, and one PENDING replica per Job of each role (hostname
 * <jobset>-<role>-<replica>-0), which mu_k8s_apply_pods() then reads from the pods.
 * Returns: 0, or MU_EPARSE. Ownership: out's fields are the caller's (mu_app_status_release). */
int mu_k8s_parse_jobset_status(const char *json, const char *app_id, struct mu_app_status *out,
                               struct mu_buf *err);

/* Reads the job's pods (`kubectl get pods -l app.kubernetes.io/instance=JOB -o json`) and, when
 * not NULL, the namespace's Warning events about pods (`kubectl get events -o json`) into st:
 * each replica's message (why it waits or how it failed: ImagePullBackOff, Unschedulable with
 * the scheduler's words, OOMKilled, Evicted, preemption, exit codes; an event's reason and
 * message when the pod's own status says nothing) and exit code, with set_states its state from
 * the pod's phase (JobSet); st->reason, for a job that is not terminal, the first pod that
 * cannot make progress ("role/replica: REASON: message", "musterd: ..." for the job's own
 * musterd) and how many more cannot. st->app_id names the job (the part after its last ':').
 * *failed gets the earliest failed pod's line (the root cause when no failure record is found),
 * or NULL; *want_events is 1 when a waiting pod's reason is only in its events (read them and
 * call again).
 * Returns: 0, or MU_EPARSE. Ownership: *failed is the caller's (mu_free). */
int mu_k8s_apply_pods(const char *pods, const char *events, int set_states,
                      struct mu_app_status *st, char **failed, int *want_events,
                      struct mu_buf *err);

/* Why each entry of a list (mu_k8s_parse_list) that has not ended is held up, its reason as
 * mu_k8s_apply_pods gives `muster status` one (the same words): from one `kubectl get pods -o
 * json` of every muster pod of the namespace and, when not NULL, one `kubectl get events -o json`
 * of its Warning events about pods. *want_events is 1 when a job's waiting pod says why only in
 * its events (read them once for the namespace and call again).
 * Returns: 0, or MU_EPARSE. Ownership: each l[i].reason is replaced (mu_app_list_free). */
int mu_k8s_list_reasons(const char *pods, const char *events, struct mu_app_list_entry *l, size_t n,
                        int *want_events, struct mu_buf *err);

/* The name of replica (role, replica) of job's pod in pods (kubectl get pods -o json), the
 * newest when there were several (replica -1: the job's musterd). Returns: a new string
 * (mu_free), or NULL when there is no such pod. */
char *mu_k8s_pod_name(const char *pods, const char *job, const char *role, long replica);

/* The app as submitted, from the MU_K8S_APP_ANNOTATION of `kubectl get RESOURCE NAME -o json`.
 * Returns: 0; MU_ENOENT when the job has none (another tool's, or too big), MU_EPARSE, with the
 * reason in err. Ownership: *out is the caller's (mu_app_free). */
int mu_k8s_parse_app(const char *json, struct mu_app **out, struct mu_buf *err);

/* Parses `kubectl get jobs.batch.volcano.sh -o json` or `kubectl get jobsets.jobset.x-k8s.io
 * -o json` (a List) into entries with app ids "<namespace>:<name>" (a JobSet's
 * "<namespace>:jobset:<name>"). Returns: 0, or MU_EPARSE. Ownership: *out is the caller's
 * (mu_app_list_free). */
int mu_k8s_parse_list(const char *json, const char *ns, struct mu_app_list_entry **out, size_t *n,
                      struct mu_buf *err);

#endif
