/* The kubernetes scheduler's pure parts, exposed for the unit tests and `muster deploy`: the
 * renderer (kubernetes_render.c: job spec + cfg -> Volcano Job tree, the musterd container) and
 * the parsers (kubernetes_parse.c: `kubectl get -o json` output -> statuses and lists).
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

/* TorchX's normalize_str: lowercase, keep [a-z0-9-], drop a leading '-' (underscores
 * vanish). Returns: a new string; caller frees with mu_free(). */
char *mu_k8s_normalize(const char *s);

/* Renders the Volcano Job for app. job_name is the metadata.name (see mu_k8s_job_name).
 * Returns: 0, or MU_EINVAL with a message naming the runopt or field in err.
 * Ownership: *out is the caller's (cJSON_Delete). */
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

/* Volcano job phase and task phase -> app state (TorchX case 07). NULL -> UNKNOWN. */
enum mu_job_state mu_k8s_job_state(const char *phase);
enum mu_job_state mu_k8s_task_state(const char *phase);

/* Parses `kubectl get jobs.batch.volcano.sh NAME -o json` into out (app_id copied).
 * Returns: 0, or MU_EPARSE. Ownership: out's fields are the caller's
 * (mu_app_status_release). */
int mu_k8s_parse_status(const char *json, const char *app_id, struct mu_app_status *out,
                        struct mu_buf *err);

/* Parses `kubectl get jobs.batch.volcano.sh -o json` (a List) into entries with app ids
 * "<namespace>:<name>". Returns: 0, or MU_EPARSE. Ownership: *out is the caller's
 * (mu_app_list_free). */
int mu_k8s_parse_list(const char *json, const char *ns, struct mu_app_list_entry **out, size_t *n,
                      struct mu_buf *err);

#endif
