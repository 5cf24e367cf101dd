/* The kubernetes scheduler's pure renderer: a job spec and its cfg into a Volcano
 * batch.volcano.sh/v1alpha1 Job (a cJSON tree; kubernetes.c writes it as YAML and hands it to
 * kubectl). No process, file or network here: the unit tests call it directly.
 *
 * Rendering follows TorchX's kubernetes_scheduler (one Volcano task per replica, gang
 * minAvailable from min_replicas, svc + env plugins, retry policies, TorchX's labels) and adds
 * what its users asked for: node_selector, tolerations, image_pull_secret, labels and
 * annotations runopts, scheduler_name / Kueue, pod names kept within 63 characters, and the
 * job's own musterd as an extra task so that rendezvous needs neither etcd nor rank-0 DNS.
 *
 * Divergences from TorchX (each one chosen, see docs/kubernetes.md): labels say muster's
 * version and `app.kubernetes.io/managed-by: muster`; the Job itself carries the name and
 * managed-by labels so that `list` can select muster's jobs.
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
#include "kubernetes.h"
#include "opts.h"

#define K8S_TASK_MAX 20
#define K8S_NAME_MAX 63
#define K8S_RANK0_ENV "TORCHX_RANK0_HOST"

/* ---------------------------------------------------------------------------------------------
 * Names, labels and the runopts that become objects
 */

char *mu_k8s_normalize(const char *s)
{
  size_t n = strlen(s), j = 0, i;
  char *out = mu_malloc(n + 1);

  for (i = 0; i < n; i++) {
    char c = (char)tolower((unsigned char)s[i]);
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')
      out[j++] = c;
  }
  out[j] = '\0';
  if (out[0] == '-')
    memmove(out, out + 1, j);
  return out;
}

/* Cuts s (normalized) to max chars and drops trailing '-'. */
static void cut(char *s, size_t max)
{
  size_t n = strlen(s);
  if (n > max)
    s[n = max] = '\0';
  while (n > 0 && s[n - 1] == '-')
    s[--n] = '\0';
}

char *mu_k8s_task_name(const char *role, long replica)
{
  char idx[24];
  char *base = mu_k8s_normalize(role), *out;

  snprintf(idx, sizeof idx, "-%ld", replica);
  cut(base, K8S_TASK_MAX - strlen(idx));
  out = mu_asprintf("%s%s", base, idx);
  mu_free(base);
  return out;
}

int mu_k8s_name_ok(const char *s)
{
  size_t n = strlen(s), i;
  if (n == 0 || n > K8S_NAME_MAX || !isalnum((unsigned char)s[0]) ||
      !isalnum((unsigned char)s[n - 1]))
    return 0;
  for (i = 0; i < n; i++)
    if (!(islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) || s[i] == '-'))
      return 0;
  return 1;
}

/* Whether the job carries its own musterd task (a bad -cfg rdzv is reported by the render). */
static int rdzv_in_job(const struct mu_app *app, const struct mu_cfg *cfg)
{
  struct mu_rdzv_choice rz;
  struct mu_buf ignore = MU_BUF_INIT(1024);
  int own = mu_cfg_rdzv(cfg, app, &rz, &ignore) == 0 && rz.own;
  mu_free(rz.endpoint);
  mu_buf_release(&ignore);
  return own;
}

int mu_k8s_job_name(const struct mu_app *app, const struct mu_cfg *cfg, char **out,
                    struct mu_buf *err)
{
  static const char alnum[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  const char *pin = getenv("MUSTER_APP_ID"), *sfx = getenv("MUSTER_APP_ID_SUFFIX");
  size_t maxtask = strlen("musterd"), i, budget, ntasks;
  char suffix[13], digits[24], *base;

  *out = NULL;
  if (pin != NULL && *pin != '\0') {
    if (!mu_k8s_name_ok(pin)) {
      mu_buf_printf(err,
                    "MUSTER_APP_ID: '%s' is not a valid Kubernetes name (lowercase letters, "
                    "digits and '-', at most 63); unset it or fix it",
                    pin);
      return MU_EINVAL;
    }
    *out = mu_strdup(pin);
    return 0;
  }
  if (sfx != NULL && *sfx != '\0') {
    char *n = mu_k8s_normalize(sfx);
    cut(n, 12);
    snprintf(suffix, sizeof suffix, "%s", *n ? n : "0");
    mu_free(n);
  } else {
    unsigned char rnd[12] = {0};
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, rnd, sizeof rnd) != (ssize_t)sizeof rnd) {
      unsigned long x = (unsigned long)getpid() * 2654435761UL;
      for (i = 0; i < sizeof rnd; i++) {
        x = x * 6364136223846793005UL + 1;
        rnd[i] = (unsigned char)(x >> 33);
      }
    }
    if (fd >= 0)
      close(fd);
    suffix[0] = alnum[rnd[0] % 26];
    for (i = 1; i < 12; i++)
      suffix[i] = alnum[rnd[i] % 36];
    suffix[12] = '\0';
  }
  for (i = 0; i < app->nroles; i++) {
    char *t = mu_k8s_task_name(app->roles[i].name, app->roles[i].num_replicas - 1);
    if (strlen(t) > maxtask)
      maxtask = strlen(t);
    mu_free(t);
  }
  /* <job>-<task>-<i> <= 63, where Volcano's admission uses the task's position as i. */
  for (i = 0, ntasks = rdzv_in_job(app, cfg) ? 1 : 0; i < app->nroles; i++)
    ntasks += (size_t)app->roles[i].num_replicas;
  snprintf(digits, sizeof digits, "%zu", ntasks > 0 ? ntasks - 1 : 0);
  budget = K8S_NAME_MAX - 1 - maxtask - 1 - strlen(digits);
  base = mu_k8s_normalize(app->name ? app->name : "app");
  cut(base, budget - 1 - strlen(suffix));
  *out = mu_asprintf("%s%s%s", base, *base ? "-" : "", suffix);
  mu_free(base);
  return 0;
}

/* Label values: at most 63 of [A-Za-z0-9-_.], alphanumeric at both ends. */
static char *label_value(const char *s)
{
  size_t n = strlen(s), j = 0, i;
  char *out = mu_malloc(n + 1);
  for (i = 0; i < n && j < K8S_NAME_MAX; i++)
    if (isalnum((unsigned char)s[i]) || strchr("-_.", s[i]))
      out[j++] = s[i];
  out[j] = '\0';
  while (j > 0 && !isalnum((unsigned char)out[j - 1]))
    out[--j] = '\0';
  i = 0;
  while (out[i] && !isalnum((unsigned char)out[i]))
    i++;
  memmove(out, out + i, j - i + 1);
  return out;
}

/* Splits a LIST runopt into items (mu_cfg_split_list: ',' or ';', quotes stripped). */
static void split_list(const char *s, struct mu_strvec *out)
{
  if (s != NULL)
    mu_cfg_split_list(s, out);
}

/* A Kubernetes label name or value: at most 63 of [A-Za-z0-9-_.], alphanumeric at both ends. */
static int label_name_ok(const char *s, size_t n)
{
  if (n == 0 || n > 63 || !isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1]))
    return 0;
  for (size_t i = 0; i < n; i++)
    if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
      return 0;
  return 1;
}

/* A label key: [DNS-subdomain-prefix/]name (kubectl taint's key). */
static int label_key_ok(const char *k)
{
  const char *slash = strchr(k, '/');
  if (slash == NULL)
    return label_name_ok(k, strlen(k));
  size_t pl = (size_t)(slash - k);
  if (pl == 0 || pl > 253 || strchr(slash + 1, '/') != NULL)
    return 0;
  for (size_t i = 0; i < pl; i++)
    if (!(islower((unsigned char)k[i]) || isdigit((unsigned char)k[i]) || k[i] == '-' ||
          k[i] == '.'))
      return 0;
  return label_name_ok(slash + 1, strlen(slash + 1));
}

/* A MAP runopt "k:v,k2=v2" into obj. Returns: 0 or MU_EINVAL naming the runopt. */
static int map_into(const struct mu_cfg *cfg, const char *opt, cJSON *obj, struct mu_buf *err)
{
  struct mu_strvec items = MU_STRVEC_INIT;
  const char *s = mu_cfg_get(cfg, opt);
  size_t i;
  int rc = 0;

  if (s == NULL)
    return 0;
  split_list(s, &items);
  for (i = 0; i < items.n; i++) {
    char *it = items.v[i];
    size_t k = strcspn(it, ":=");
    if (it[k] == '\0' || k == 0) {
      mu_buf_printf(err, "-cfg %s: '%s' is not KEY:VALUE; write e.g. %s=team:ml,env:prod", opt, it,
                    opt);
      rc = MU_EINVAL;
      break;
    }
    it[k] = '\0';
    cJSON_DeleteItemFromObjectCaseSensitive(obj, it);
    cJSON_AddStringToObject(obj, it, it + k + 1);
  }
  mu_strvec_release(&items);
  return rc;
}

static int is_effect(const char *s)
{
  return strcmp(s, "NoSchedule") == 0 || strcmp(s, "PreferNoSchedule") == 0 ||
         strcmp(s, "NoExecute") == 0;
}

/* Tolerations: "key:value:Effect", "key:Effect", "key:value", "key", and kubectl's taint form
 * "key=value:Effect". ':' is the separator because -cfg reads '=' as the start of a new runopt;
 * neither label keys nor values can contain ':', so it is unambiguous. */
static int parse_tolerations(const struct mu_cfg *cfg, cJSON **out, struct mu_buf *err)
{
  struct mu_strvec items = MU_STRVEC_INIT;
  const char *s = mu_cfg_get(cfg, "tolerations");
  cJSON *arr = NULL;
  size_t i;
  int rc = 0;

  *out = NULL;
  if (s == NULL)
    return 0;
  split_list(s, &items);
  arr = cJSON_CreateArray();
  for (i = 0; i < items.n; i++) {
    char *key = items.v[i], *value = NULL, *effect = NULL, *c1, *c2;
    char *item = mu_strdup(items.v[i]); /* for messages */
    cJSON *t = cJSON_CreateObject();
    cJSON_AddItemToArray(arr, t);
    c1 = strchr(key, ':');
    c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (c1)
      *c1 = '\0';
    if (c2) {
      *c2 = '\0';
      value = c1 + 1;
      effect = c2 + 1;
    } else if (c1 && (is_effect(c1 + 1) || strchr(key, '=') != NULL)) {
      effect = c1 + 1;
    } else if (c1) {
      value = c1 + 1;
    }
    if (value == NULL && strchr(key, '=') != NULL) {
      value = strchr(key, '=') + 1;
      value[-1] = '\0';
    }
    if (effect && !is_effect(effect)) {
      mu_free(item);
      mu_buf_printf(err,
                    "-cfg tolerations: unknown effect '%s' for key '%s'; use NoSchedule, "
                    "PreferNoSchedule or NoExecute",
                    effect, key);
      rc = MU_EINVAL;
      goto out;
    }
    if (*key == '\0' || strchr(key, ':') || (value && strchr(value, ':'))) {
      mu_buf_printf(err,
                    "-cfg tolerations: '%s' has an empty key; write key=value:Effect (kubectl's "
                    "form), key:value:Effect, key:Effect, key:value or key",
                    item);
      mu_free(item);
      rc = MU_EINVAL;
      goto out;
    }
    if (!label_key_ok(key) || (value && *value && !label_name_ok(value, strlen(value)))) {
      int bad_key = !label_key_ok(key);
      mu_buf_printf(err,
                    "-cfg tolerations: '%s': %s '%s' is not a valid taint %s (at most 63 "
                    "letters, digits, '-', '_' or '.', a letter or digit at both ends%s)",
                    item, bad_key ? "key" : "value", bad_key ? key : value,
                    bad_key ? "key" : "value", bad_key ? ", after an optional DNS prefix/" : "");
      mu_free(item);
      rc = MU_EINVAL;
      goto out;
    }
    mu_free(item);
    cJSON_AddStringToObject(t, "key", key);
    cJSON_AddStringToObject(t, "operator", value ? "Equal" : "Exists");
    if (value)
      cJSON_AddStringToObject(t, "value", value);
    if (effect)
      cJSON_AddStringToObject(t, "effect", effect);
  }
out:
  mu_strvec_release(&items);
  if (rc != 0)
    cJSON_Delete(arr);
  else
    *out = arr;
  return rc;
}

/* ---------------------------------------------------------------------------------------------
 * The Volcano Job
 */

struct render_ctx {
  const struct mu_app *app;
  const struct mu_cfg *cfg;
  const char *job;
  char *rdzv; /* ${rdzv_endpoint}, NULL when none */
  char *c10d; /* ${c10d_endpoint} (the musterd task's TCPStore listener), or NULL */
  long c10d_port;
  char *rank0_other;   /* VC_<ROLE0>_0_HOSTS */
  cJSON *node_sel;     /* from cfg */
  cJSON *tolerations;  /* from cfg, NULL when none */
  cJSON *pull_secrets; /* from cfg, NULL when none */
  cJSON *labels;       /* from cfg */
  cJSON *annotations;  /* from cfg */
};

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

static char *subst(const struct render_ctx *x, const char *s, long ri, long k)
{
  char rid[24], nrep[24];
  struct mu_macros m = {0};

  snprintf(rid, sizeof rid, "%ld", k);
  snprintf(nrep, sizeof nrep, "%ld", x->app->roles[ri].num_replicas);
  m.app_id = x->job;
  m.replica_id = rid;
  m.img_root = "";
  m.rank0_env = (ri == 0 && k == 0) ? K8S_RANK0_ENV : x->rank0_other;
  m.rdzv_endpoint = x->rdzv;
  m.c10d_endpoint = x->c10d;
  m.num_replicas = nrep;
  return mu_macros_apply(&m, s);
}

static cJSON *pod_labels(const struct render_ctx *x, const char *role, long ri, long k)
{
  cJSON *l = cJSON_CreateObject();
  char *v;

  v = label_value(x->app->name ? x->app->name : "");
  cJSON_AddStringToObject(l, "app.kubernetes.io/instance", x->job);
  cJSON_AddStringToObject(l, "app.kubernetes.io/managed-by", "muster");
  cJSON_AddStringToObject(l, "app.kubernetes.io/name", v);
  cJSON_AddStringToObject(l, "torchx.pytorch.org/app-name", v);
  mu_free(v);
  add_fmt(l, "torchx.pytorch.org/replica-id", "%ld", k);
  add_fmt(l, "torchx.pytorch.org/role-index", "%ld", ri);
  v = label_value(role);
  cJSON_AddStringToObject(l, "torchx.pytorch.org/role-name", v);
  mu_free(v);
  cJSON_AddStringToObject(l, "torchx.pytorch.org/version", MU_VERSION);
  merge_strings(l, x->labels);
  return l;
}

static cJSON *pod_annotations(const struct render_ctx *x)
{
  cJSON *a = cJSON_CreateObject();
  cJSON_AddStringToObject(a, "sidecar.istio.io/inject", "false");
  merge_strings(a, x->annotations);
  return a;
}

/* Fills the pod spec fields shared by worker and musterd pods. */
static void pod_common(const struct render_ctx *x, cJSON *spec)
{
  const char *sa = mu_cfg_get(x->cfg, "service_account");
  if (sa)
    cJSON_AddStringToObject(spec, "serviceAccountName", sa);
  if (x->tolerations)
    cJSON_AddItemToObject(spec, "tolerations", cJSON_Duplicate(x->tolerations, 1));
  if (x->pull_secrets)
    cJSON_AddItemToObject(spec, "imagePullSecrets", cJSON_Duplicate(x->pull_secrets, 1));
}

static char *role_image(const struct render_ctx *x, const struct mu_role *r)
{
  const char *repo = mu_cfg_get(x->cfg, "image_repo");
  const char *img = r->image ? r->image : "";
  if (repo && strncmp(img, "sha256:", 7) == 0)
    return mu_asprintf("%s:%s", repo, img + 7);
  return mu_strdup(img);
}

/* Volcano's retry policy of one replica's task: TorchX's mapping of the role's retry_policy. */
static void task_retries(cJSON *task, const struct mu_role *r)
{
  static const char *const app_events[] = {"PodEvicted", "PodFailed", NULL};
  static const char *const role_events[] = {"PodFailed", NULL};
  const char *const *events = NULL;
  const char *action = NULL;
  if (r->max_retries <= 0)
    return;
  cJSON_AddNumberToObject(task, "maxRetry", (double)r->max_retries);
  cJSON *arr = cJSON_AddArrayToObject(task, "policies");
  if (r->retry_policy == MU_RETRY_APPLICATION) {
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

/* A role whose entrypoint is `muster` (dist.ddp's --launcher muster) runs the portable agent
 * that the pod's init container copied into the emptyDir at MU_K8S_AGENT_DIR: the user's image
 * needs nothing from muster. */
#define MU_K8S_AGENT_DIR "/muster"
#define MU_K8S_AGENT_VOLUME "muster-agent"
#define MU_K8S_AGENT_COPY "/mnt/muster"

/* Whether argument i of the role's command line (-1: the entrypoint) is the `muster` of
 * `muster agent`: the entrypoint muster, or a wrapper's argument (aws.trn1_ddp --precompile
 * runs `neuron_parallel_compile muster agent ...`). */
static int is_agent_token(const struct mu_role *r, long i)
{
  if (i < 0)
    return r->entrypoint != NULL && strcmp(r->entrypoint, "muster") == 0;
  return strcmp(r->args.v[i], "muster") == 0 && (size_t)i + 1 < r->args.n &&
         strcmp(r->args.v[i + 1], "agent") == 0;
}

static int runs_agent(const struct mu_role *r)
{
  for (long i = -1; i < (long)r->args.n; i++)
    if (is_agent_token(r, i))
      return 1;
  return 0;
}

/* The init container (muster_image: `muster deploy agent` into the emptyDir), the emptyDir, and
 * its read-only mount at MU_K8S_AGENT_DIR in the training container. */
static void agent_init(const struct render_ctx *x, cJSON *spec, cJSON *mnts)
{
  cJSON *ic = cJSON_CreateObject(), *arr, *o;
  cJSON_AddItemToArray(cJSON_AddArrayToObject(spec, "initContainers"), ic);
  arr = cJSON_AddArrayToObject(ic, "command");
  cJSON_AddItemToArray(arr, cJSON_CreateString(MU_K8S_AGENT_DIR "/bin/muster"));
  cJSON_AddItemToArray(arr, cJSON_CreateString("deploy"));
  cJSON_AddItemToArray(arr, cJSON_CreateString("agent"));
  cJSON_AddItemToArray(arr, cJSON_CreateString(MU_K8S_AGENT_COPY));
  cJSON_AddStringToObject(ic, "image", mu_cfg_get(x->cfg, "muster_image"));
  cJSON_AddStringToObject(ic, "name", MU_K8S_AGENT_VOLUME);
  o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "mountPath", MU_K8S_AGENT_COPY);
  cJSON_AddStringToObject(o, "name", MU_K8S_AGENT_VOLUME);
  cJSON_AddItemToArray(cJSON_AddArrayToObject(ic, "volumeMounts"), o);
  o = cJSON_CreateObject();
  cJSON_AddObjectToObject(o, "emptyDir");
  cJSON_AddStringToObject(o, "name", MU_K8S_AGENT_VOLUME);
  cJSON_AddItemToArray(cJSON_GetObjectItem(spec, "volumes"), o);
  o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "mountPath", MU_K8S_AGENT_DIR);
  cJSON_AddStringToObject(o, "name", MU_K8S_AGENT_VOLUME);
  cJSON_AddTrueToObject(o, "readOnly");
  cJSON_AddItemToArray(mnts, o);
}

/* command: the entrypoint and args, macros applied for replica k of role ri. */
static void container_command(const struct render_ctx *x, cJSON *ctr, long ri, long k)
{
  const struct mu_role *r = &x->app->roles[ri];
  cJSON *arr = cJSON_AddArrayToObject(ctr, "command");
  char *s = is_agent_token(r, -1) ? mu_strdup(MU_K8S_AGENT_DIR "/bin/muster")
                                  : subst(x, r->entrypoint ? r->entrypoint : "", ri, k);
  cJSON_AddItemToArray(arr, cJSON_CreateString(s));
  mu_free(s);
  for (size_t i = 0; i < r->args.n; i++) {
    s = is_agent_token(r, (long)i) ? mu_strdup(MU_K8S_AGENT_DIR "/bin/muster")
                                   : subst(x, r->args.v[i], ri, k);
    cJSON_AddItemToArray(arr, cJSON_CreateString(s));
    mu_free(s);
  }
}

/* env: the role's variables ("[FIELD_PATH]path" becomes a fieldRef), and for the first
 * replica of the first role the rank-0 host variable. */
static void container_env(const struct render_ctx *x, cJSON *ctr, long ri, long k)
{
  const struct mu_role *r = &x->app->roles[ri];
  cJSON *arr = cJSON_AddArrayToObject(ctr, "env"), *o;
  for (size_t i = 0; i < r->env.n; i++) {
    o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", r->env.v[i].key);
    char *s = subst(x, r->env.v[i].value, ri, k);
    if (strncmp(s, "[FIELD_PATH]", 12) == 0) {
      cJSON *vf = cJSON_AddObjectToObject(o, "valueFrom");
      cJSON *fr = cJSON_AddObjectToObject(vf, "fieldRef");
      cJSON_AddStringToObject(fr, "fieldPath", s + 12);
    } else {
      cJSON_AddStringToObject(o, "value", s);
    }
    mu_free(s);
    cJSON_AddItemToArray(arr, o);
  }
  if (ri == 0 && k == 0) {
    o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", K8S_RANK0_ENV);
    cJSON_AddStringToObject(o, "value", "localhost");
    cJSON_AddItemToArray(arr, o);
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
    cut(s, 15);
    cJSON_AddStringToObject(o, "name", s);
    mu_free(s);
    cJSON_AddItemToArray(arr, o);
  }
}

/* resources: TorchX's limits and requests (requests leave 100m CPU and 1 GB of memory to the
 * node's daemons), GPUs and the other devices. */
static void container_resources(cJSON *ctr, const struct mu_resource *res)
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
  for (size_t i = 0; i < res->ndevices; i++)
    add_fmt(lim, res->devices[i].name, "%ld", res->devices[i].count);
}

/* volumes and their mounts: /dev/shm in memory (sized by a shm mount), then each bind (hostPath),
 * volume (persistentVolumeClaim) and device mount. Returns: 1 when a device mount needs a
 * privileged container, else 0. */
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
  for (size_t i = 0; i < r->nmounts; i++) {
    const struct mu_mount *m = &r->mounts[i];
    cJSON *v, *vm, *src;
    char vname[32];
    int ro = m->read_only;
    if (m->type == MU_MOUNT_SHM)
      continue;
    snprintf(vname, sizeof vname, "mount-%zu", i);
    v = cJSON_CreateObject();
    if (m->type == MU_MOUNT_VOLUME) {
      src = cJSON_AddObjectToObject(v, "persistentVolumeClaim");
      cJSON_AddStringToObject(src, "claimName", m->src ? m->src : "");
    } else {
      src = cJSON_AddObjectToObject(v, "hostPath");
      cJSON_AddStringToObject(src, "path", m->src ? m->src : "");
    }
    if (m->type == MU_MOUNT_DEVICE) {
      const char *p = m->perm ? m->perm : "rwm";
      privileged = 1;
      ro = strchr(p, 'w') == NULL && strchr(p, 'm') == NULL;
    }
    cJSON_AddStringToObject(v, "name", vname);
    cJSON_AddItemToArray(vols, v);
    vm = cJSON_CreateObject();
    cJSON_AddStringToObject(vm, "mountPath", m->dst ? m->dst : "");
    cJSON_AddStringToObject(vm, "name", vname);
    cJSON_AddBoolToObject(vm, "readOnly", ro);
    cJSON_AddItemToArray(mnts, vm);
  }
  return privileged;
}

/* One replica's Volcano task: one pod of one container, built step by step. */
static cJSON *render_task(const struct render_ctx *x, long ri, long k)
{
  const struct mu_role *r = &x->app->roles[ri];
  cJSON *task = cJSON_CreateObject(), *tmpl, *meta, *spec, *ctr, *sec, *mnts, *o, *ns;
  char *tname = mu_k8s_task_name(r->name, k), *img;

  cJSON_AddStringToObject(task, "name", tname);
  cJSON_AddNumberToObject(task, "replicas", 1);
  task_retries(task, r);
  if (r->min_replicas >= 0)
    cJSON_AddNumberToObject(task, "minAvailable", k < r->min_replicas ? 1 : 0);
  tmpl = cJSON_AddObjectToObject(task, "template");
  meta = cJSON_AddObjectToObject(tmpl, "metadata");
  cJSON_AddItemToObject(meta, "annotations", pod_annotations(x));
  cJSON_AddItemToObject(meta, "labels", pod_labels(x, r->name, ri, k));
  spec = cJSON_AddObjectToObject(tmpl, "spec");
  ctr = cJSON_CreateObject();
  cJSON_AddItemToArray(cJSON_AddArrayToObject(spec, "containers"), ctr);

  container_command(x, ctr, ri, k);
  container_env(x, ctr, ri, k);
  img = role_image(x, r);
  cJSON_AddStringToObject(ctr, "image", img);
  mu_free(img);
  cJSON_AddStringToObject(ctr, "name", tname);
  container_ports(ctr, r);
  container_resources(ctr, &r->resource);
  sec = cJSON_AddObjectToObject(ctr, "securityContext");
  mnts = cJSON_AddArrayToObject(ctr, "volumeMounts");
  o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "mountPath", "/dev/shm");
  cJSON_AddStringToObject(o, "name", "dshm");
  cJSON_AddItemToArray(mnts, o);

  ns = cJSON_AddObjectToObject(spec, "nodeSelector");
  const char *it = mu_kvlist_get(&r->resource.capabilities, "node.kubernetes.io/instance-type");
  if (it)
    cJSON_AddStringToObject(ns, "node.kubernetes.io/instance-type", it);
  merge_strings(ns, x->node_sel);
  cJSON_AddStringToObject(spec, "restartPolicy", "Never");
  pod_common(x, spec);
  if (pod_volumes(r, spec, mnts))
    cJSON_AddTrueToObject(sec, "privileged");
  if (runs_agent(r))
    agent_init(x, spec, mnts);
  mu_free(tname);
  return task;
}

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

/* The job's own musterd: one replica, a /healthz readiness probe, reachable through the svc
 * plugin as <job>-musterd-0.<job>. */
static cJSON *render_rdzv_task(const struct render_ctx *x, long port)
{
  cJSON *task = cJSON_CreateObject(), *tmpl, *meta, *spec, *arr, *l;

  cJSON_AddStringToObject(task, "name", "musterd");
  cJSON_AddNumberToObject(task, "replicas", 1);
  cJSON_AddNumberToObject(task, "minAvailable", 1);
  tmpl = cJSON_AddObjectToObject(task, "template");
  meta = cJSON_AddObjectToObject(tmpl, "metadata");
  cJSON_AddItemToObject(meta, "annotations", pod_annotations(x));
  l = cJSON_AddObjectToObject(meta, "labels");
  cJSON_AddStringToObject(l, "app.kubernetes.io/component", "rendezvous");
  cJSON_AddStringToObject(l, "app.kubernetes.io/instance", x->job);
  cJSON_AddStringToObject(l, "app.kubernetes.io/managed-by", "muster");
  cJSON_AddStringToObject(l, "torchx.pytorch.org/version", MU_VERSION);
  merge_strings(l, x->labels);
  spec = cJSON_AddObjectToObject(tmpl, "spec");
  arr = cJSON_AddArrayToObject(spec, "containers");
  cJSON_AddItemToArray(arr, mu_k8s_musterd_container(mu_cfg_get(x->cfg, "muster_image"), port));
  if (x->c10d != NULL)
    add_c10d(cJSON_GetArrayItem(arr, 0), x->c10d_port);
  cJSON_AddItemToObject(spec, "nodeSelector", cJSON_Duplicate(x->node_sel, 1));
  cJSON_AddStringToObject(spec, "restartPolicy", "OnFailure");
  pod_common(x, spec);
  return task;
}

int mu_k8s_render(const struct mu_app *app, const struct mu_cfg *cfg, const char *job_name,
                  cJSON **out, struct mu_buf *err)
{
  struct render_ctx x = {0};
  struct mu_strvec secrets = MU_STRVEC_INIT;
  const char *sched = mu_cfg_get(cfg, "scheduler_name"), *queue = mu_cfg_get(cfg, "queue");
  const char *kq = mu_cfg_get(cfg, "kueue_queue");
  const char *pc = mu_cfg_get(cfg, "priority_class"), *ps = mu_cfg_get(cfg, "rdzv_port");
  cJSON *job = NULL, *meta, *spec, *plugins, *arr, *tasks, *l;
  long port = MU_K8S_RDZV_PORT, min_retry = -1, total = 0, ri, k;
  int rc = 0, own_rdzv;
  size_t i;
  char *r0;

  *out = NULL;
  if (sched == NULL || *sched == '\0')
    sched = "volcano";
  if (app->nroles == 0) {
    mu_buf_puts(err, "app has no roles; a component must define at least one");
    return MU_EINVAL;
  }
  if (strcmp(sched, "volcano") == 0 && (queue == NULL || *queue == '\0')) {
    mu_buf_puts(err, "-cfg queue: required with the Volcano scheduler; name the Volcano queue "
                     "(e.g. -cfg queue=default), or use -cfg scheduler_name=default-scheduler");
    return MU_EINVAL;
  }
  if (ps && (mu_parse_long(ps, 1, 65535, &port) != 0)) {
    mu_buf_printf(err, "-cfg rdzv_port: '%s' is not a port number (1-65535)", ps);
    return MU_EINVAL;
  }
  struct mu_rdzv_choice rz;
  if (mu_cfg_rdzv(cfg, app, &rz, err) != 0)
    return MU_EINVAL;
  own_rdzv = rz.own;
  if (rz.endpoint != NULL) {
    x.rdzv = rz.endpoint;
  } else if (own_rdzv) {
    x.rdzv = mu_asprintf("%s-musterd-0.%s:%ld", job_name, job_name, port);
  }
  if (mu_app_mentions(app, "${c10d_endpoint}")) {
    if (!own_rdzv) {
      mu_buf_printf(err,
                    "the job uses ${c10d_endpoint} (torchrun --rdzv_backend c10d) and -cfg "
                    "rdzv=%s names a musterd whose TCPStore port muster does not know; use -cfg "
                    "rdzv=auto (the job's own musterd), or --rdzv_backend etcd-v2",
                    x.rdzv ? x.rdzv : "none");
      rc = MU_EINVAL;
      goto out;
    }
    x.c10d_port = port < 65535 ? port + 1 : port - 1;
    x.c10d = mu_asprintf("%s-musterd-0.%s:%ld", job_name, job_name, x.c10d_port);
  }
  for (i = 0; i < app->nroles; i++) {
    if (app->roles[i].image == NULL || app->roles[i].image[0] == '\0') {
      mu_buf_printf(err,
                    "roles[%zu].image: required on kubernetes (the container image to run); "
                    "set it with the component's --image",
                    i);
      rc = MU_EINVAL;
      goto out;
    }
  }
  {
    const char *mi = mu_cfg_get(cfg, "muster_image");
    int agent = 0;
    for (i = 0; i < app->nroles; i++)
      agent |= runs_agent(&app->roles[i]);
    if ((agent || own_rdzv) && (mi == NULL || *mi == '\0')) {
      mu_buf_printf(err,
                    "-cfg muster_image: required: the job runs %s from the muster image. Build "
                    "and push it once (scripts/build-image.sh --push docker://REGISTRY/muster:%s, "
                    "docs/kubernetes.md), then -cfg muster_image=REGISTRY/muster:%s (or set it in "
                    ".musterconfig [kubernetes])",
                    agent ? "`muster agent` (copied into each pod by an init container)"
                          : "the job's own musterd",
                    MU_VERSION, MU_VERSION);
      rc = MU_EINVAL;
      goto out;
    }
  }
  x.app = app;
  x.cfg = cfg;
  x.job = job_name;
  r0 = mu_k8s_task_name(app->roles[0].name, 0);
  for (i = 0; r0[i]; i++)
    r0[i] = r0[i] == '-' ? '_' : (char)toupper((unsigned char)r0[i]);
  x.rank0_other = mu_asprintf("VC_%s_HOSTS", r0);
  mu_free(r0);
  x.node_sel = cJSON_CreateObject();
  x.labels = cJSON_CreateObject();
  x.annotations = cJSON_CreateObject();
  rc = map_into(cfg, "node_selector", x.node_sel, err);
  if (rc == 0)
    rc = map_into(cfg, "labels", x.labels, err);
  if (rc == 0)
    rc = map_into(cfg, "annotations", x.annotations, err);
  if (rc == 0)
    rc = parse_tolerations(cfg, &x.tolerations, err);
  if (rc != 0)
    goto out;
  if (mu_cfg_get(cfg, "image_pull_secret")) {
    split_list(mu_cfg_get(cfg, "image_pull_secret"), &secrets);
    x.pull_secrets = cJSON_CreateArray();
    for (i = 0; i < secrets.n; i++) {
      cJSON *o = cJSON_CreateObject();
      cJSON_AddStringToObject(o, "name", secrets.v[i]);
      cJSON_AddItemToArray(x.pull_secrets, o);
    }
  }

  job = cJSON_CreateObject();
  cJSON_AddStringToObject(job, "apiVersion", "batch.volcano.sh/v1alpha1");
  cJSON_AddStringToObject(job, "kind", "Job");
  meta = cJSON_AddObjectToObject(job, "metadata");
  cJSON_AddStringToObject(meta, "name", job_name);
  l = cJSON_AddObjectToObject(meta, "labels");
  cJSON_AddStringToObject(l, "app.kubernetes.io/managed-by", "muster");
  {
    char *v = label_value(app->name ? app->name : "");
    cJSON_AddStringToObject(l, "app.kubernetes.io/name", v);
    mu_free(v);
  }
  if (kq)
    cJSON_AddStringToObject(l, "kueue.x-k8s.io/queue-name", kq);
  merge_strings(l, x.labels);
  if (x.annotations->child)
    cJSON_AddItemToObject(meta, "annotations", cJSON_Duplicate(x.annotations, 1));

  spec = cJSON_AddObjectToObject(job, "spec");
  for (ri = 0; ri < (long)app->nroles; ri++) {
    if (min_retry < 0 || app->roles[ri].max_retries < min_retry)
      min_retry = app->roles[ri].max_retries;
    total += app->roles[ri].num_replicas;
  }
  cJSON_AddNumberToObject(spec, "maxRetry", (double)(min_retry > 0 ? min_retry : 0));
  if (own_rdzv)
    cJSON_AddNumberToObject(spec, "minSuccess", (double)total);
  plugins = cJSON_AddObjectToObject(spec, "plugins");
  cJSON_AddArrayToObject(plugins, "env");
  arr = cJSON_AddArrayToObject(plugins, "svc");
  cJSON_AddItemToArray(arr, cJSON_CreateString("--publish-not-ready-addresses"));
  if (pc)
    cJSON_AddStringToObject(spec, "priorityClassName", pc);
  if (queue && *queue)
    cJSON_AddStringToObject(spec, "queue", queue);
  cJSON_AddStringToObject(spec, "schedulerName", sched);
  tasks = cJSON_AddArrayToObject(spec, "tasks");
  if (own_rdzv)
    cJSON_AddItemToArray(tasks, render_rdzv_task(&x, port));
  for (ri = 0; ri < (long)app->nroles; ri++)
    for (k = 0; k < app->roles[ri].num_replicas; k++)
      cJSON_AddItemToArray(tasks, render_task(&x, ri, k));
  *out = job;
  job = NULL;
out:
  cJSON_Delete(job);
  cJSON_Delete(x.node_sel);
  cJSON_Delete(x.labels);
  cJSON_Delete(x.annotations);
  cJSON_Delete(x.tolerations);
  cJSON_Delete(x.pull_secrets);
  mu_strvec_release(&secrets);
  mu_free(x.rdzv);
  mu_free(x.c10d);
  mu_free(x.rank0_other);
  return rc;
}
