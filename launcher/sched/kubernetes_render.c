/* The kubernetes scheduler's pure renderer, from the context kubernetes_ctx.c resolves: the pods,
 * the job's own musterd, its Service and token Secret, and the Volcano Job (kubernetes_jobset.c
 * renders the JobSet). No process, file or network here: the unit tests call it directly.
 */
#include <ctype.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "muster/errno.h"
#include "muster/mu.h"

#include "alloc.h"
#include "config.h"
#include "kubernetes_impl.h"
#include "opts.h"
#include "random.h"

#define K8S_TASK_MAX 20
#define K8S_NAME_MAX 63
#define K8S_RANK0_ENV "TORCHX_RANK0_HOST"

/* ---------------------------------------------------------------------------------------------
 * Values, labels, annotations
 */

static void add_fmt(cJSON *o, const char *key, const char *fmt, long v)
{
  char b[48];
  snprintf(b, sizeof b, fmt, v);
  cJSON_AddStringToObject(o, key, b);
}

static void merge_strings(cJSON *dst, const cJSON *src)
{
  const cJSON *c;
  cJSON_ArrayForEach(c, src)
  {
    cJSON_DeleteItemFromObjectCaseSensitive(dst, c->string);
    cJSON_AddStringToObject(dst, c->string, c->valuestring);
  }
}

/* Kubernetes expands $(VAR) in a container's command, args and env values and turns $$ into $;
 * muster's values are literal, so every '$' before '(' or '$' is doubled: the process gets
 * exactly the string the user gave. Returns: a new string (mu_free). */
static char *k8s_literal(const char *s)
{
  struct mu_buf b = MU_BUF_INIT(SIZE_MAX);
  for (const char *p = s; *p; p++) {
    if (*p == '$' && (p[1] == '(' || p[1] == '$'))
      mu_buf_putc(&b, '$');
    mu_buf_putc(&b, *p);
  }
  return mu_buf_detach(&b);
}

/* A JobSet replica's index, as the $(VAR) reference Kubernetes expands in place. */
#define K8S_REPLICA_VAR "MUSTER_REPLICA_ID"
#define K8S_REPLICA_MARK "\001muster-replica-id\001"

/* s with the macros of replica k of role ri applied, as a literal for a container (k8s_literal).
 * k < 0 (a JobSet's shared template): ${replica_id} becomes $(MUSTER_REPLICA_ID).
 * Returns: a new string (mu_free). */
static char *subst(const struct mu_k8s_ctx *x, const char *s, long ri, long k)
{
  char rid[24], nrep[24], *applied, *lit;
  const char *p, *mark;
  struct mu_macros m = {0};
  struct mu_buf b = MU_BUF_INIT(SIZE_MAX);

  snprintf(rid, sizeof rid, "%ld", k);
  snprintf(nrep, sizeof nrep, "%ld", x->app->roles[ri].num_replicas);
  m.app_id = x->job;
  m.replica_id = k >= 0 ? rid : K8S_REPLICA_MARK;
  m.img_root = "";
  m.rank0_env = (x->api == MU_K8S_VOLCANO && ri == 0 && k == 0) ? K8S_RANK0_ENV : x->rank0_env;
  m.rdzv_endpoint = x->rdzv;
  m.c10d_endpoint = x->c10d;
  m.num_replicas = nrep;
  applied = mu_macros_apply(&m, s);
  lit = k8s_literal(applied);
  mu_free(applied);
  for (p = lit; (mark = strstr(p, K8S_REPLICA_MARK)) != NULL; p = mark + strlen(K8S_REPLICA_MARK)) {
    mu_buf_append(&b, p, (size_t)(mark - p));
    mu_buf_puts(&b, "$(" K8S_REPLICA_VAR ")");
  }
  mu_buf_puts(&b, p);
  mu_free(lit);
  return mu_buf_detach(&b);
}

/* TorchX's labels of a replica's pod (JobSet: the replica id is JobSet's job-index label). */
static cJSON *pod_labels(const struct mu_k8s_ctx *x, const char *role, long ri, long k)
{
  cJSON *l = cJSON_CreateObject();
  char *v;

  v = mu_k8s_label_value(x->app->name ? x->app->name : "");
  cJSON_AddStringToObject(l, "app.kubernetes.io/instance", x->job);
  cJSON_AddStringToObject(l, "app.kubernetes.io/managed-by", "muster");
  cJSON_AddStringToObject(l, "app.kubernetes.io/name", v);
  cJSON_AddStringToObject(l, "torchx.pytorch.org/app-name", v);
  mu_free(v);
  if (k >= 0)
    add_fmt(l, "torchx.pytorch.org/replica-id", "%ld", k);
  add_fmt(l, "torchx.pytorch.org/role-index", "%ld", ri);
  v = mu_k8s_label_value(role);
  cJSON_AddStringToObject(l, "torchx.pytorch.org/role-name", v);
  mu_free(v);
  cJSON_AddStringToObject(l, "torchx.pytorch.org/version", MU_VERSION);
  merge_strings(l, x->labels);
  return l;
}

static cJSON *pod_annotations(const struct mu_k8s_ctx *x)
{
  cJSON *a = cJSON_CreateObject();
  cJSON_AddStringToObject(a, "sidecar.istio.io/inject", "false");
  merge_strings(a, x->annotations);
  return a;
}

/* The app as submitted, for `muster describe`: its JSON (job.h) on one line, with the job's name
 * and its rendezvous endpoint in place of ${app_id} and ${rdzv_endpoint}; NULL when it would
 * pass MU_K8S_APP_MAX (annotations share 256 KiB). Returns: a new string (mu_free), or NULL. */
static char *app_annotation(const struct mu_k8s_ctx *x)
{
  struct mu_buf js = MU_BUF_INIT(SIZE_MAX), a = MU_BUF_INIT(SIZE_MAX), b = MU_BUF_INIT(SIZE_MAX);
  char *line, *out = NULL;
  mu_app_to_json(x->app, &js);
  cJSON *tree = cJSON_Parse(mu_buf_str(&js));
  line = cJSON_PrintUnformatted(tree);
  mu_buf_put_replaced(&a, line ? line : "{}", "${app_id}", x->job);
  mu_buf_put_replaced(&b, mu_buf_str(&a), "${rdzv_endpoint}",
                      x->rdzv ? x->rdzv : "${rdzv_endpoint}");
  mu_buf_clear(&a);
  mu_buf_put_replaced(&a, mu_buf_str(&b), "${c10d_endpoint}",
                      x->c10d ? x->c10d : "${c10d_endpoint}");
  if (a.len <= MU_K8S_APP_MAX)
    out = mu_buf_detach(&a);
  cJSON_free(line);
  cJSON_Delete(tree);
  mu_buf_release(&js);
  mu_buf_release(&a);
  mu_buf_release(&b);
  return out;
}

cJSON *mu_k8s_object_meta(const struct mu_k8s_ctx *x)
{
  cJSON *meta = cJSON_CreateObject(), *l;
  const char *kq = mu_cfg_get(x->cfg, "kueue_queue");
  char *v = mu_k8s_label_value(x->app->name ? x->app->name : "");
  cJSON_AddStringToObject(meta, "name", x->job);
  l = cJSON_AddObjectToObject(meta, "labels");
  cJSON_AddStringToObject(l, "app.kubernetes.io/managed-by", "muster");
  cJSON_AddStringToObject(l, "app.kubernetes.io/name", v);
  mu_free(v);
  if (kq)
    cJSON_AddStringToObject(l, "kueue.x-k8s.io/queue-name", kq);
  merge_strings(l, x->labels);
  cJSON *a = cJSON_AddObjectToObject(meta, "annotations");
  char *app = app_annotation(x);
  if (app != NULL)
    cJSON_AddStringToObject(a, MU_K8S_APP_ANNOTATION, app);
  mu_free(app);
  merge_strings(a, x->annotations);
  if (a->child == NULL)
    cJSON_DeleteItemFromObjectCaseSensitive(meta, "annotations");
  return meta;
}

long mu_k8s_job_retries(const struct mu_app *app)
{
  long min_retry = -1, min_all = -1;
  for (size_t i = 0; i < app->nroles; i++) {
    const struct mu_role *r = &app->roles[i];
    if (min_all < 0 || r->max_retries < min_all)
      min_all = r->max_retries;
    if (r->retry_policy != MU_RETRY_REPLICA && (min_retry < 0 || r->max_retries < min_retry))
      min_retry = r->max_retries;
  }
  min_retry = min_retry < 0 ? min_all : min_retry;
  return min_retry > 0 ? min_retry : 0;
}

long mu_k8s_role_cover(const struct mu_role *r)
{
  if (r->min_replicas < 0 || r->min_replicas >= r->num_replicas)
    return 0;
  return (r->max_retries > 0 ? r->max_retries : 0) + (r->num_replicas - r->min_replicas);
}

/* The Volcano Job's maxRetry: TorchX's (mu_k8s_job_retries), or, when a role has a replica to
 * spare, one more than the lost pods of those roles it replaces: Volcano counts every
 * RestartTask in the job's one retryCount and fails the job when the count reaches maxRetry. */
static long volcano_max_retry(const struct mu_app *app)
{
  long cover = 0, torchx = mu_k8s_job_retries(app);
  for (size_t i = 0; i < app->nroles; i++)
    cover += mu_k8s_role_cover(&app->roles[i]);
  return cover > 0 && cover + 1 > torchx ? cover + 1 : torchx;
}

/* ---------------------------------------------------------------------------------------------
 * Pods
 */

/* Fills the pod spec fields shared by worker and musterd pods. */
static void pod_common(const struct mu_k8s_ctx *x, cJSON *spec)
{
  const char *sa = mu_cfg_get(x->cfg, "service_account");
  const char *pc = mu_cfg_get(x->cfg, "priority_class");
  if (x->api == MU_K8S_JOBSET && pc != NULL && *pc != '\0')
    cJSON_AddStringToObject(spec, "priorityClassName", pc);
  if (x->api == MU_K8S_JOBSET && x->sched != NULL)
    cJSON_AddStringToObject(spec, "schedulerName", x->sched);
  if (sa)
    cJSON_AddStringToObject(spec, "serviceAccountName", sa);
  if (x->tolerations)
    cJSON_AddItemToObject(spec, "tolerations", cJSON_Duplicate(x->tolerations, 1));
  if (x->pull_secrets)
    cJSON_AddItemToObject(spec, "imagePullSecrets", cJSON_Duplicate(x->pull_secrets, 1));
}

static char *role_image(const struct mu_k8s_ctx *x, const struct mu_role *r)
{
  const char *repo = mu_cfg_get(x->cfg, "image_repo");
  const char *img = r->image ? r->image : "";
  if (repo && strncmp(img, "sha256:", 7) == 0)
    return mu_asprintf("%s:%s", repo, img + 7);
  return mu_strdup(img);
}

/* Appends {name, mountPath, readOnly} to mnts. */
static void add_mount(cJSON *mnts, const char *name, const char *path, int ro)
{
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "mountPath", path);
  cJSON_AddStringToObject(o, "name", name);
  if (ro >= 0)
    cJSON_AddBoolToObject(o, "readOnly", ro);
  cJSON_AddItemToArray(mnts, o);
}

/* Appends an env variable: value (a literal), or a valueFrom of kind ("fieldRef",
 * "secretKeyRef", "configMapKeyRef") with its two fields. */
static void add_env(cJSON *arr, const char *name, const char *value)
{
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "name", name);
  cJSON_AddStringToObject(o, "value", value);
  cJSON_AddItemToArray(arr, o);
}

static void add_env_from(cJSON *arr, const char *name, const char *kind, const char *k1,
                         const char *v1, const char *k2, const char *v2)
{
  cJSON *o = cJSON_CreateObject(), *ref;
  cJSON_AddStringToObject(o, "name", name);
  ref = cJSON_AddObjectToObject(cJSON_AddObjectToObject(o, "valueFrom"), kind);
  if (k1)
    cJSON_AddStringToObject(ref, k1, v1);
  cJSON_AddStringToObject(ref, k2, v2);
  cJSON_AddItemToArray(arr, o);
}

/* The rendezvous token's Secret as a read-only volume at MU_K8S_TOKEN_DIR (its key "token"). */
static void token_volume(const struct mu_k8s_ctx *x, cJSON *spec, cJSON *mnts)
{
  cJSON *v = cJSON_CreateObject(), *src = cJSON_AddObjectToObject(v, "secret");
  cJSON_AddStringToObject(v, "name", "rdzv-token");
  cJSON_AddStringToObject(src, "secretName", x->token_secret);
  cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(spec, "volumes"), v);
  add_mount(mnts, "rdzv-token", MU_K8S_TOKEN_DIR, 1);
}

/* obj's array `key`, added when obj has none. */
static cJSON *array_of(cJSON *obj, const char *key)
{
  cJSON *a = cJSON_GetObjectItemCaseSensitive(obj, key);
  return a != NULL ? a : cJSON_AddArrayToObject(obj, key);
}

/* Secret `secret` as the read-only volume vname at dir in container ctr, with only the keys
 * listed (NULL-terminated): the Secret's other keys never reach the pod, and a key it lacks
 * keeps the pod from starting (FailedMount, which `muster status` shows). */
static void secret_volume(cJSON *spec, cJSON *ctr, const char *vname, const char *secret,
                          const char *dir, const char *const *keys)
{
  cJSON *v = cJSON_CreateObject(), *src, *items;
  cJSON_AddStringToObject(v, "name", vname);
  src = cJSON_AddObjectToObject(v, "secret");
  items = cJSON_AddArrayToObject(src, "items");
  for (size_t i = 0; keys[i] != NULL; i++) {
    cJSON *it = cJSON_CreateObject();
    cJSON_AddStringToObject(it, "key", keys[i]);
    cJSON_AddStringToObject(it, "path", keys[i]);
    cJSON_AddItemToArray(items, it);
  }
  cJSON_AddStringToObject(src, "secretName", secret);
  cJSON_AddItemToArray(array_of(spec, "volumes"), v);
  add_mount(array_of(ctr, "volumeMounts"), vname, dir, 1);
}

/* With -cfg rdzv_tls, an agent's pod: the CA alone of the musterd's Secret (never its key), and
 * the client certificate of rdzv_tls_client. */
static void agent_tls(const struct mu_k8s_ctx *x, cJSON *spec, cJSON *ctr)
{
  static const char *const ca[] = {"ca.crt", NULL}, *const pair[] = {"tls.crt", "tls.key", NULL};
  secret_volume(spec, ctr, "rdzv-tls", x->tls_secret, MU_K8S_TLS_DIR, ca);
  if (x->tls_client != NULL)
    secret_volume(spec, ctr, "rdzv-tls-client", x->tls_client, MU_K8S_TLS_CLIENT_DIR, pair);
}

/* The init container (muster_image: `muster deploy agent` into the emptyDir), the emptyDir, and
 * its read-only mount at MU_K8S_AGENT_DIR in the training container. */
static void agent_init(const struct mu_k8s_ctx *x, cJSON *spec, cJSON *mnts)
{
  cJSON *ic = cJSON_CreateObject(), *arr, *o;
  cJSON_AddItemToArray(cJSON_AddArrayToObject(spec, "initContainers"), ic);
  arr = cJSON_AddArrayToObject(ic, "command");
  cJSON_AddItemToArray(arr, cJSON_CreateString(MU_K8S_AGENT_DIR "/bin/muster"));
  cJSON_AddItemToArray(arr, cJSON_CreateString("deploy"));
  cJSON_AddItemToArray(arr, cJSON_CreateString("agent"));
  cJSON_AddItemToArray(arr, cJSON_CreateString(MU_K8S_AGENT_COPY));
  cJSON_AddStringToObject(ic, "image", x->muster_image);
  cJSON_AddStringToObject(ic, "name", MU_K8S_AGENT_VOLUME);
  add_mount(cJSON_AddArrayToObject(ic, "volumeMounts"), MU_K8S_AGENT_VOLUME, MU_K8S_AGENT_COPY, -1);
  o = cJSON_CreateObject();
  cJSON_AddObjectToObject(o, "emptyDir");
  cJSON_AddStringToObject(o, "name", MU_K8S_AGENT_VOLUME);
  cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(spec, "volumes"), o);
  add_mount(mnts, MU_K8S_AGENT_VOLUME, MU_K8S_AGENT_DIR, 1);
}

/* command: the entrypoint and args, macros applied for replica k of role ri. */
static void container_command(const struct mu_k8s_ctx *x, cJSON *ctr, long ri, long k)
{
  const struct mu_role *r = &x->app->roles[ri];
  cJSON *arr = cJSON_AddArrayToObject(ctr, "command");
  for (long i = -1; i < (long)r->args.n; i++) {
    const char *a = i < 0 ? (r->entrypoint ? r->entrypoint : "") : r->args.v[i];
    char *s = mu_k8s_is_agent_token(r, i) ? mu_strdup(MU_K8S_AGENT_DIR "/bin/muster")
                                          : subst(x, a, ri, k);
    cJSON_AddItemToArray(arr, cJSON_CreateString(s));
    mu_free(s);
  }
}

/* One variable of the role: "[FIELD_PATH]path" becomes a fieldRef, "[SECRET]name:key" a
 * secretKeyRef and "[CONFIGMAP]name:key" a configMapKeyRef; anything else a literal. */
static void role_env_var(const struct mu_k8s_ctx *x, cJSON *arr, const struct mu_kv *kv, long ri,
                         long k)
{
  static const struct {
    const char *prefix, *kind;
  } refs[] = {{"[SECRET]", "secretKeyRef"}, {"[CONFIGMAP]", "configMapKeyRef"}};
  const char *v = kv->value;
  if (strncmp(v, "[FIELD_PATH]", 12) == 0) {
    add_env_from(arr, kv->key, "fieldRef", NULL, NULL, "fieldPath", v + 12);
    return;
  }
  for (size_t i = 0; i < sizeof(refs) / sizeof(refs[0]); i++) {
    size_t n = strlen(refs[i].prefix);
    const char *colon = strncmp(v, refs[i].prefix, n) == 0 ? strchr(v + n, ':') : NULL;
    if (colon != NULL) {
      char *name = mu_strndup(v + n, (size_t)(colon - v - n));
      add_env_from(arr, kv->key, refs[i].kind, "name", name, "key", colon + 1);
      mu_free(name);
      return;
    }
  }
  char *s = subst(x, v, ri, k);
  add_env(arr, kv->key, s);
  mu_free(s);
}

/* env: a JobSet replica's index first (the others may refer to it), the role's variables, the
 * rank-0 host variable, and the rendezvous token's file for an agent. */
static void container_env(const struct mu_k8s_ctx *x, cJSON *ctr, long ri, long k)
{
  const struct mu_role *r = &x->app->roles[ri];
  cJSON *arr = cJSON_AddArrayToObject(ctr, "env");
  if (k < 0)
    add_env_from(arr, K8S_REPLICA_VAR, "fieldRef", NULL, NULL, "fieldPath",
                 "metadata.annotations['jobset.sigs.k8s.io/job-index']");
  for (size_t i = 0; i < r->env.n; i++)
    role_env_var(x, arr, &r->env.v[i], ri, k);
  if (x->api == MU_K8S_JOBSET)
    add_env(arr, K8S_RANK0_ENV, x->rank0_host);
  else if (ri == 0 && k == 0)
    add_env(arr, K8S_RANK0_ENV, "localhost");
  if (x->token_secret != NULL && mu_k8s_runs_agent(r))
    add_env(arr, "MUSTER_RDZV_TOKEN_FILE", MU_K8S_TOKEN_FILE);
  if (x->tls_secret != NULL && mu_k8s_runs_agent(r)) /* agent_tls mounts them */
    add_env(arr, "MUSTER_RDZV_CACERT", MU_K8S_TLS_DIR "/ca.crt");
  if (x->tls_client != NULL && mu_k8s_runs_agent(r)) {
    add_env(arr, "MUSTER_RDZV_CERT", MU_K8S_TLS_CLIENT_DIR "/tls.crt");
    add_env(arr, "MUSTER_RDZV_KEY", MU_K8S_TLS_CLIENT_DIR "/tls.key");
  }
}

/* ports: the role's port_map, names normalised and cut to Kubernetes' 15 characters. */
static void container_ports(cJSON *ctr, const struct mu_role *r)
{
  if (r->nports == 0)
    return;
  cJSON *arr = cJSON_AddArrayToObject(ctr, "ports");
  for (size_t i = 0; i < r->nports; i++) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "containerPort", (double)r->ports[i].port);
    char *s = mu_k8s_normalize(r->ports[i].name);
    mu_k8s_cut(s, 15);
    cJSON_AddStringToObject(o, "name", s);
    mu_free(s);
    cJSON_AddItemToArray(arr, o);
  }
}

/* resources: TorchX's limits and requests (requests leave 100m CPU and 1 GB of memory to the
 * node's daemons), GPUs and the other devices. */
static void container_resources(const struct mu_k8s_ctx *x, cJSON *ctr,
                                const struct mu_resource *res)
{
  cJSON *o = cJSON_AddObjectToObject(ctr, "resources");
  cJSON *lim = cJSON_AddObjectToObject(o, "limits");
  cJSON *req = cJSON_AddObjectToObject(o, "requests");
  if (res->cpu > 0) {
    add_fmt(lim, "cpu", "%ldm", res->cpu * 1000);
    add_fmt(req, "cpu", "%ldm", res->cpu * 1000 - 100 > 0 ? res->cpu * 1000 - 100 : 0);
  }
  if (res->memMB > 0) {
    add_fmt(lim, "memory", "%ldM", res->memMB);
    add_fmt(req, "memory", "%ldM", res->memMB - 1024 > 0 ? res->memMB - 1024 : 0);
  }
  if (res->gpu > 0) {
    add_fmt(lim, "nvidia.com/gpu", "%ld", res->gpu);
    add_fmt(req, "nvidia.com/gpu", "%ld", res->gpu);
  }
  for (size_t i = 0; i < res->ndevices; i++) {
    const char *name = res->devices[i].name;
    if (mu_k8s_claimed(x, name))
      continue; /* -cfg neuron_devices=dra: through the pod's resourceClaims */
    if (x->neuron_res != NULL && strcmp(name, "aws.amazon.com/neuron") == 0)
      name = x->neuron_res; /* -cfg neuron_resource: a device plugin older than Neuron 2.20 */
    add_fmt(lim, name, "%ld", res->devices[i].count);
  }
}

/* The volume of one mount: a PVC, a Secret, a ConfigMap, or a hostPath (bind, device). */
static cJSON *mount_volume(const struct mu_mount *m, const char *vname)
{
  static const char *const kinds[] = {
      [MU_MOUNT_BIND] = "hostPath",   [MU_MOUNT_VOLUME] = "persistentVolumeClaim",
      [MU_MOUNT_DEVICE] = "hostPath", [MU_MOUNT_SHM] = "emptyDir",
      [MU_MOUNT_SECRET] = "secret",   [MU_MOUNT_CONFIGMAP] = "configMap",
  };
  static const char *const fields[] = {
      [MU_MOUNT_BIND] = "path", [MU_MOUNT_VOLUME] = "claimName",  [MU_MOUNT_DEVICE] = "path",
      [MU_MOUNT_SHM] = NULL,    [MU_MOUNT_SECRET] = "secretName", [MU_MOUNT_CONFIGMAP] = "name",
  };
  cJSON *v = cJSON_CreateObject(), *src = cJSON_AddObjectToObject(v, kinds[m->type]);
  if (fields[m->type] != NULL)
    cJSON_AddStringToObject(src, fields[m->type], m->src ? m->src : "");
  cJSON_AddStringToObject(v, "name", vname);
  return v;
}

/* volumes and their mounts: /dev/shm in memory (sized by a shm mount), then each bind (hostPath),
 * volume (persistentVolumeClaim), secret, configmap and device mount. Returns: 1 when a device
 * mount needs a privileged container, else 0. */
static int pod_volumes(const struct mu_role *r, cJSON *spec, cJSON *mnts)
{
  cJSON *vols = cJSON_AddArrayToObject(spec, "volumes");
  cJSON *dshm = cJSON_CreateObject(), *ed = cJSON_AddObjectToObject(dshm, "emptyDir");
  long shm_mb = 0;
  int privileged = 0;
  cJSON_AddStringToObject(ed, "medium", "Memory");
  for (size_t i = 0; i < r->nmounts; i++)
    if (r->mounts[i].type == MU_MOUNT_SHM && r->mounts[i].size_mb > 0)
      shm_mb = r->mounts[i].size_mb;
  if (shm_mb > 0)
    add_fmt(ed, "sizeLimit", "%ldMi", shm_mb);
  cJSON_AddStringToObject(dshm, "name", "dshm");
  cJSON_AddItemToArray(vols, dshm);
  add_mount(mnts, "dshm", "/dev/shm", -1);
  for (size_t i = 0; i < r->nmounts; i++) {
    const struct mu_mount *m = &r->mounts[i];
    char vname[32];
    int ro = m->read_only;
    if (m->type == MU_MOUNT_SHM)
      continue;
    snprintf(vname, sizeof vname, "mount-%zu", i);
    if (m->type == MU_MOUNT_DEVICE) {
      const char *p = m->perm ? m->perm : "rwm";
      privileged = 1;
      ro = strchr(p, 'w') == NULL && strchr(p, 'm') == NULL;
    }
    cJSON_AddItemToArray(vols, mount_volume(m, vname));
    add_mount(mnts, vname, m->dst ? m->dst : "", ro);
  }
  return privileged;
}

/* The node selector of a role's pods: its instance type, then -cfg node_selector. */
static cJSON *node_selector(const struct mu_k8s_ctx *x, const struct mu_role *r)
{
  cJSON *ns = cJSON_CreateObject();
  const char *it = mu_kvlist_get(&r->resource.capabilities, "node.kubernetes.io/instance-type");
  if (it)
    cJSON_AddStringToObject(ns, "node.kubernetes.io/instance-type", it);
  merge_strings(ns, x->node_sel);
  return ns;
}

/* The training container of replica k of role ri (k < 0: every replica's, JobSet). */
static cJSON *role_container(const struct mu_k8s_ctx *x, long ri, long k)
{
  const struct mu_role *r = &x->app->roles[ri];
  cJSON *ctr = cJSON_CreateObject();
  char *name = k >= 0 ? mu_k8s_task_name(r->name, k) : mu_k8s_rjob_name(r->name, r->num_replicas);
  char *img;
  container_command(x, ctr, ri, k);
  container_env(x, ctr, ri, k);
  img = role_image(x, r);
  cJSON_AddStringToObject(ctr, "image", img);
  mu_free(img);
  cJSON_AddStringToObject(ctr, "name", *name ? name : "main");
  mu_free(name);
  container_ports(ctr, r);
  container_resources(x, ctr, &r->resource);
  cJSON_AddObjectToObject(ctr, "securityContext");
  cJSON_AddArrayToObject(ctr, "volumeMounts");
  return ctr;
}

cJSON *mu_k8s_pod_template(const struct mu_k8s_ctx *x, long ri, long k)
{
  const struct mu_role *r = &x->app->roles[ri];
  cJSON *tmpl = cJSON_CreateObject(), *meta, *spec, *ctr, *mnts;

  meta = cJSON_AddObjectToObject(tmpl, "metadata");
  cJSON_AddItemToObject(meta, "annotations", pod_annotations(x));
  cJSON_AddItemToObject(meta, "labels", pod_labels(x, r->name, ri, k));
  spec = cJSON_AddObjectToObject(tmpl, "spec");
  ctr = role_container(x, ri, k);
  cJSON_AddItemToArray(cJSON_AddArrayToObject(spec, "containers"), ctr);
  mu_k8s_pod_claims(x, ri, spec, ctr);
  mnts = cJSON_GetObjectItemCaseSensitive(ctr, "volumeMounts");
  cJSON_AddItemToObject(spec, "nodeSelector", node_selector(x, r));
  cJSON_AddStringToObject(spec, "restartPolicy", "Never");
  pod_common(x, spec);
  if (pod_volumes(r, spec, mnts))
    cJSON_AddTrueToObject(cJSON_GetObjectItemCaseSensitive(ctr, "securityContext"), "privileged");
  if (mu_k8s_runs_agent(r))
    agent_init(x, spec, mnts);
  if (mu_k8s_runs_agent(r) && x->token_secret != NULL)
    token_volume(x, spec, mnts);
  if (mu_k8s_runs_agent(r) && x->tls_secret != NULL)
    agent_tls(x, spec, ctr);
  return tmpl;
}

/* ---------------------------------------------------------------------------------------------
 * The job's own musterd
 */

cJSON *mu_k8s_healthz_probe(long port, int period_s, int failures)
{
  cJSON *pr = cJSON_CreateObject(), *hg = cJSON_AddObjectToObject(pr, "httpGet");
  cJSON_AddStringToObject(hg, "path", "/healthz");
  cJSON_AddNumberToObject(hg, "port", (double)port);
  cJSON_AddNumberToObject(pr, "periodSeconds", period_s);
  if (failures > 0)
    cJSON_AddNumberToObject(pr, "failureThreshold", failures);
  return pr;
}

cJSON *mu_k8s_musterd_container(const char *image, long port)
{
  cJSON *ctr = cJSON_CreateObject(), *arr, *o, *l;
  char listen[64];

  arr = cJSON_AddArrayToObject(ctr, "command");
  snprintf(listen, sizeof listen, "0.0.0.0:%ld", port);
  cJSON_AddItemToArray(arr, cJSON_CreateString("musterd"));
  cJSON_AddItemToArray(arr, cJSON_CreateString("--listen"));
  cJSON_AddItemToArray(arr, cJSON_CreateString(listen));
  cJSON_AddStringToObject(ctr, "image", image);
  cJSON_AddStringToObject(ctr, "name", "musterd");
  arr = cJSON_AddArrayToObject(ctr, "ports");
  o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "containerPort", (double)port);
  cJSON_AddStringToObject(o, "name", "rdzv");
  cJSON_AddItemToArray(arr, o);
  cJSON_AddItemToObject(ctr, "readinessProbe", mu_k8s_healthz_probe(port, 2, 0));
  o = cJSON_AddObjectToObject(ctr, "resources");
  l = cJSON_AddObjectToObject(o, "limits");
  cJSON_AddStringToObject(l, "cpu", "1000m");
  cJSON_AddStringToObject(l, "memory", "512M");
  l = cJSON_AddObjectToObject(o, "requests");
  cJSON_AddStringToObject(l, "cpu", "100m");
  cJSON_AddStringToObject(l, "memory", "64M");
  return ctr;
}

/* torchrun --rdzv_backend c10d: the musterd container also serves PyTorch's TCPStore, which has
 * no credentials, on the pod's own address only (docs/security.md), port `port` named c10d. */
static void add_c10d(cJSON *ctr, long port)
{
  cJSON *env = cJSON_AddArrayToObject(ctr, "env"), *e, *vf, *fr, *o;
  char listen[64];
  e = cJSON_CreateObject();
  cJSON_AddStringToObject(e, "name", "MUSTER_POD_IP");
  vf = cJSON_AddObjectToObject(e, "valueFrom");
  fr = cJSON_AddObjectToObject(vf, "fieldRef");
  cJSON_AddStringToObject(fr, "fieldPath", "status.podIP");
  cJSON_AddItemToArray(env, e);
  snprintf(listen, sizeof listen, "$(MUSTER_POD_IP):%ld", port);
  cJSON *cmd = cJSON_GetObjectItemCaseSensitive(ctr, "command");
  cJSON_AddItemToArray(cmd, cJSON_CreateString("--c10d-listen"));
  cJSON_AddItemToArray(cmd, cJSON_CreateString(listen));
  o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "containerPort", (double)port);
  cJSON_AddStringToObject(o, "name", "c10d");
  cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(ctr, "ports"), o);
}

/* With -cfg rdzv_tls, the job's musterd serves HTTPS with the Secret's tls.crt and tls.key
 * (with rdzv_tls_client, it requires client certificates signed by the Secret's ca.crt), and
 * the kubelet probes it over HTTPS; with client certificates required, which the kubelet cannot
 * present, a TCP probe says that it listens. */
static void musterd_tls(const struct mu_k8s_ctx *x, cJSON *spec, cJSON *ctr)
{
  static const char *const keys[] = {"tls.crt", "tls.key", "ca.crt", NULL};
  static const char *const flags[] = {"--tls-cert", "--tls-key", "--tls-client-ca"};
  cJSON *cmd = cJSON_GetObjectItemCaseSensitive(ctr, "command"), *pr;
  for (size_t i = 0; i < (x->tls_client != NULL ? 3u : 2u); i++) {
    char *f = mu_asprintf("%s/%s", MU_K8S_TLS_DIR, keys[i]);
    cJSON_AddItemToArray(cmd, cJSON_CreateString(flags[i]));
    cJSON_AddItemToArray(cmd, cJSON_CreateString(f));
    mu_free(f);
  }
  if (x->tls_client != NULL) {
    secret_volume(spec, ctr, "rdzv-tls", x->tls_secret, MU_K8S_TLS_DIR, keys);
    pr = cJSON_CreateObject();
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(pr, "tcpSocket"), "port", (double)x->port);
    cJSON_AddNumberToObject(pr, "periodSeconds", 2);
  } else {
    static const char *const pair[] = {"tls.crt", "tls.key", NULL};
    secret_volume(spec, ctr, "rdzv-tls", x->tls_secret, MU_K8S_TLS_DIR, pair);
    pr = mu_k8s_healthz_probe(x->port, 2, 0);
    cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(pr, "httpGet"), "scheme", "HTTPS");
  }
  cJSON_ReplaceItemInObjectCaseSensitive(ctr, "readinessProbe", pr);
}

/* The job's own musterd: one container of muster_image with a /healthz readiness probe, the
 * token Secret mounted and passed as --token-file when the job has one, and its TLS. */
cJSON *mu_k8s_rdzv_pod_template(const struct mu_k8s_ctx *x)
{
  cJSON *tmpl = cJSON_CreateObject(), *meta, *spec, *l, *ctr;

  meta = cJSON_AddObjectToObject(tmpl, "metadata");
  cJSON_AddItemToObject(meta, "annotations", pod_annotations(x));
  l = cJSON_AddObjectToObject(meta, "labels");
  cJSON_AddStringToObject(l, "app.kubernetes.io/component", "rendezvous");
  cJSON_AddStringToObject(l, "app.kubernetes.io/instance", x->job);
  cJSON_AddStringToObject(l, "app.kubernetes.io/managed-by", "muster");
  cJSON_AddStringToObject(l, "torchx.pytorch.org/version", MU_VERSION);
  merge_strings(l, x->labels);
  spec = cJSON_AddObjectToObject(tmpl, "spec");
  ctr = mu_k8s_musterd_container(x->muster_image, x->port);
  cJSON_AddItemToArray(cJSON_AddArrayToObject(spec, "containers"), ctr);
  if (x->c10d != NULL)
    add_c10d(ctr, x->c10d_port);
  cJSON_AddItemToObject(spec, "nodeSelector", cJSON_Duplicate(x->node_sel, 1));
  cJSON_AddStringToObject(spec, "restartPolicy", "OnFailure");
  pod_common(x, spec);
  if (x->token_secret != NULL) {
    cJSON *cmd = cJSON_GetObjectItemCaseSensitive(ctr, "command");
    cJSON_AddItemToArray(cmd, cJSON_CreateString("--token-file"));
    cJSON_AddItemToArray(cmd, cJSON_CreateString(MU_K8S_TOKEN_FILE));
    array_of(spec, "volumes");
    token_volume(x, spec, array_of(ctr, "volumeMounts"));
  }
  if (x->tls_secret != NULL)
    musterd_tls(x, spec, ctr);
  return tmpl;
}

void mu_k8s_set_owner(cJSON *obj, const char *job, const char *owner_api, const char *owner_kind,
                      const char *owner_uid)
{
  cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata"), *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "apiVersion", owner_api);
  cJSON_AddStringToObject(o, "kind", owner_kind);
  cJSON_AddStringToObject(o, "name", job);
  cJSON_AddStringToObject(o, "uid", owner_uid);
  cJSON_DeleteItemFromObjectCaseSensitive(meta, "ownerReferences");
  cJSON_AddItemToArray(cJSON_AddArrayToObject(meta, "ownerReferences"), o);
}

/* The metadata of an object muster makes for the job (its token Secret, its musterd's
 * Service): name, and the labels that say whose it is and what for. */
static void owned_meta(cJSON *obj, const char *name, const char *job, const char *component)
{
  cJSON *meta = cJSON_AddObjectToObject(obj, "metadata"), *l;
  cJSON_AddStringToObject(meta, "name", name);
  l = cJSON_AddObjectToObject(meta, "labels");
  cJSON_AddStringToObject(l, "app.kubernetes.io/component", component);
  cJSON_AddStringToObject(l, "app.kubernetes.io/instance", job);
  cJSON_AddStringToObject(l, "app.kubernetes.io/managed-by", "muster");
}

cJSON *mu_k8s_token_secret(const char *name, const char *job, const char *token,
                           const char *owner_api, const char *owner_kind, const char *owner_uid)
{
  cJSON *s = cJSON_CreateObject();
  cJSON_AddStringToObject(s, "apiVersion", "v1");
  cJSON_AddStringToObject(s, "kind", "Secret");
  owned_meta(s, name, job, "rendezvous-token");
  if (owner_uid != NULL)
    mu_k8s_set_owner(s, job, owner_api, owner_kind, owner_uid);
  cJSON_AddStringToObject(cJSON_AddObjectToObject(s, "stringData"), "token", token);
  cJSON_AddStringToObject(s, "type", "Opaque");
  return s;
}

/* With -cfg rdzv_tls: the headless Service <job>-musterd that names the job's musterd pod
 * (selected by the labels of mu_k8s_rdzv_pod_template), its address published before the pod
 * is ready, as the svc plugin and JobSet publish theirs: the agents retry until it answers. */
static cJSON *rdzv_service(const struct mu_k8s_ctx *x)
{
  cJSON *s = cJSON_CreateObject(), *spec, *port, *sel;
  cJSON_AddStringToObject(s, "apiVersion", "v1");
  cJSON_AddStringToObject(s, "kind", "Service");
  owned_meta(s, x->rdzv_service, x->job, "rendezvous");
  spec = cJSON_AddObjectToObject(s, "spec");
  cJSON_AddStringToObject(spec, "clusterIP", "None");
  port = cJSON_CreateObject();
  cJSON_AddStringToObject(port, "name", "rdzv");
  cJSON_AddNumberToObject(port, "port", (double)x->port);
  cJSON_AddStringToObject(port, "protocol", "TCP");
  cJSON_AddNumberToObject(port, "targetPort", (double)x->port);
  cJSON_AddItemToArray(cJSON_AddArrayToObject(spec, "ports"), port);
  cJSON_AddTrueToObject(spec, "publishNotReadyAddresses");
  sel = cJSON_AddObjectToObject(spec, "selector");
  cJSON_AddStringToObject(sel, "app.kubernetes.io/component", "rendezvous");
  cJSON_AddStringToObject(sel, "app.kubernetes.io/instance", x->job);
  return s;
}

/* ---------------------------------------------------------------------------------------------
 * The Volcano Job
 */

/* Volcano's retry policy of one replica's task. A role with a replica to spare: its lost pod
 * alone is replaced (RestartTask on PodEvicted and PodFailed) while the others run on, the
 * rendezvous covering the loss (a standby takes its place; the new pod joins as one), up to
 * mu_k8s_role_cover losses. Otherwise TorchX's mapping of the role's retry_policy. */
static void task_retries(cJSON *task, const struct mu_role *r)
{
  static const char *const app_events[] = {"PodEvicted", "PodFailed", NULL};
  static const char *const role_events[] = {"PodFailed", NULL};
  const char *const *events = NULL;
  const char *action = NULL;
  long cover = mu_k8s_role_cover(r);
  if (r->max_retries <= 0 && cover == 0)
    return;
  cJSON_AddNumberToObject(task, "maxRetry", (double)(cover > 0 ? cover : r->max_retries));
  cJSON *arr = cJSON_AddArrayToObject(task, "policies");
  if (cover > 0) {
    events = app_events;
    action = "RestartTask";
  } else if (r->retry_policy == MU_RETRY_APPLICATION) {
    events = app_events;
    action = "RestartJob";
  } else if (r->retry_policy == MU_RETRY_ROLE) {
    /* TorchX has no mapping (KeyError); restarting this replica's task is the closest. */
    events = role_events;
    action = "RestartTask";
  }
  for (size_t i = 0; events != NULL && events[i] != NULL; i++) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "action", action);
    cJSON_AddStringToObject(o, "event", events[i]);
    cJSON_AddItemToArray(arr, o);
  }
}

/* One replica's Volcano task: one pod of one container. */
static cJSON *render_task(const struct mu_k8s_ctx *x, long ri, long k)
{
  const struct mu_role *r = &x->app->roles[ri];
  cJSON *task = cJSON_CreateObject();
  char *tname = mu_k8s_task_name(r->name, k);

  cJSON_AddStringToObject(task, "name", tname);
  cJSON_AddNumberToObject(task, "replicas", 1);
  task_retries(task, r);
  if (r->min_replicas >= 0)
    cJSON_AddNumberToObject(task, "minAvailable", k < r->min_replicas ? 1 : 0);
  cJSON_AddItemToObject(task, "template", mu_k8s_pod_template(x, ri, k));
  mu_free(tname);
  return task;
}

/* The job's own musterd: one replica, reachable through the svc plugin as <job>-musterd-0.<job>. */
static cJSON *render_rdzv_task(const struct mu_k8s_ctx *x)
{
  cJSON *task = cJSON_CreateObject();
  cJSON_AddStringToObject(task, "name", "musterd");
  cJSON_AddNumberToObject(task, "replicas", 1);
  cJSON_AddNumberToObject(task, "minAvailable", 1);
  cJSON_AddItemToObject(task, "template", mu_k8s_rdzv_pod_template(x));
  return task;
}

/* The Volcano Job: TorchX's spec (maxRetry, the svc and env plugins, queue, scheduler), the
 * musterd task first, then one task per replica. */
static cJSON *volcano_job(const struct mu_k8s_ctx *x)
{
  const char *pc = mu_cfg_get(x->cfg, "priority_class"), *queue = mu_cfg_get(x->cfg, "queue");
  cJSON *job = cJSON_CreateObject(), *spec, *plugins, *tasks;
  long total = 0;

  cJSON_AddStringToObject(job, "apiVersion", "batch.volcano.sh/v1alpha1");
  cJSON_AddStringToObject(job, "kind", "Job");
  cJSON_AddItemToObject(job, "metadata", mu_k8s_object_meta(x));
  spec = cJSON_AddObjectToObject(job, "spec");
  for (size_t ri = 0; ri < x->app->nroles; ri++)
    total += x->app->roles[ri].num_replicas;
  cJSON_AddNumberToObject(spec, "maxRetry", (double)volcano_max_retry(x->app));
  if (x->own_rdzv)
    cJSON_AddNumberToObject(spec, "minSuccess", (double)total);
  plugins = cJSON_AddObjectToObject(spec, "plugins");
  cJSON_AddArrayToObject(plugins, "env");
  cJSON_AddItemToArray(cJSON_AddArrayToObject(plugins, "svc"),
                       cJSON_CreateString("--publish-not-ready-addresses"));
  if (pc)
    cJSON_AddStringToObject(spec, "priorityClassName", pc);
  if (queue && *queue)
    cJSON_AddStringToObject(spec, "queue", queue);
  cJSON_AddStringToObject(spec, "schedulerName", x->sched ? x->sched : "volcano");
  mu_k8s_volcano_topology(x, spec);
  tasks = cJSON_AddArrayToObject(spec, "tasks");
  if (x->own_rdzv)
    cJSON_AddItemToArray(tasks, render_rdzv_task(x));
  for (long ri = 0; ri < (long)x->app->nroles; ri++)
    for (long k = 0; k < x->app->roles[ri].num_replicas; k++)
      cJSON_AddItemToArray(tasks, render_task(x, ri, k));
  return job;
}

int mu_k8s_plan(const struct mu_app *app, const struct mu_cfg *cfg, const char *job_name,
                struct mu_k8s_plan *out, struct mu_buf *err)
{
  struct mu_k8s_ctx x;
  int rc = mu_k8s_ctx_init(&x, app, cfg, job_name, err);
  memset(out, 0, sizeof(*out));
  if (rc == 0) {
    out->api = x.api;
    out->manifest = x.api == MU_K8S_JOBSET ? mu_k8s_jobset(&x) : volcano_job(&x);
    out->placeholder = x.placeholder && (x.own_rdzv || mu_k8s_app_runs_agent(app));
    if (x.token_is_ours)
      out->token_secret = mu_strdup(x.token_secret);
    if (x.rdzv_service != NULL)
      out->service = rdzv_service(&x);
    out->owned = mu_k8s_owned_objects(&x);
  }
  mu_k8s_ctx_release(&x);
  return rc;
}

void mu_k8s_plan_release(struct mu_k8s_plan *p)
{
  cJSON_Delete(p->manifest);
  cJSON_Delete(p->service);
  cJSON_Delete(p->owned);
  mu_free(p->token_secret);
  memset(p, 0, sizeof(*p));
}

int mu_k8s_render(const struct mu_app *app, const struct mu_cfg *cfg, const char *job_name,
                  cJSON **out, struct mu_buf *err)
{
  struct mu_k8s_plan p;
  int rc = mu_k8s_plan(app, cfg, job_name, &p, err);
  *out = p.manifest;
  p.manifest = NULL;
  mu_k8s_plan_release(&p);
  return rc;
}
