/* The kubernetes scheduler's render context (kubernetes_render.c renders from it): names, labels,
 * the runopts that become objects, and every required value, resolved once from a job spec and
 * its cfg. The renderer's overview follows.
 *
 * The kubernetes scheduler's pure renderer: a job spec and its cfg into a Volcano
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
#include "kubernetes_impl.h"
#include "opts.h"
#include "random.h"

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
void mu_k8s_cut(char *s, size_t max)
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
  mu_k8s_cut(base, K8S_TASK_MAX - strlen(idx));
  out = mu_asprintf("%s%s", base, idx);
  mu_free(base);
  return out;
}

char *mu_k8s_rjob_name(const char *role, long num_replicas)
{
  char idx[24];
  char *base = mu_k8s_normalize(role);
  snprintf(idx, sizeof idx, "-%ld", num_replicas > 0 ? num_replicas - 1 : 0);
  mu_k8s_cut(base, K8S_TASK_MAX - strlen(idx));
  return base;
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

int mu_k8s_subdomain_ok(const char *s)
{
  size_t n = strlen(s);
  if (n == 0 || n > 253)
    return 0;
  for (size_t i = 0; i < n; i++) {
    int edge = i == 0 || i + 1 == n || s[i - 1] == '.' || s[i + 1] == '.';
    if (islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]))
      continue;
    if ((s[i] != '-' && s[i] != '.') || edge)
      return 0;
  }
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
  const char *pin = getenv("MUSTER_APP_ID");
  size_t maxtask = strlen("musterd"), i, budget, ntasks;
  enum mu_k8s_api api;
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
  if (mu_app_id_suffix(suffix) != 0) {
    mu_buf_puts(err, "cannot draw a random app id: the kernel gave no random bytes");
    return MU_EIO;
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
  /* A JobSet's pod: <job>-<role>-<replica>-0-<5 random> (<role>-<replica> as a task name). */
  if (mu_k8s_api_parse(mu_cfg_get(cfg, "api"), &api, err) != 0)
    return MU_EINVAL;
  if (api == MU_K8S_JOBSET)
    budget = K8S_NAME_MAX - 1 - (maxtask > 9 ? maxtask : 9) - strlen("-0-abcde");
  base = mu_k8s_normalize(app->name ? app->name : "app");
  mu_k8s_cut(base, budget - 1 - strlen(suffix));
  *out = mu_asprintf("%s%s%s", base, *base ? "-" : "", suffix);
  mu_free(base);
  return 0;
}

/* Label values: at most 63 of [A-Za-z0-9-_.], alphanumeric at both ends. */
char *mu_k8s_label_value(const char *s)
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

/* One toleration: "key:value:Effect", "key:Effect", "key:value", "key", and kubectl's taint form
 * "key=value:Effect". ':' is the separator because -cfg reads '=' as the start of a new runopt;
 * neither label keys nor values can contain ':', so it is unambiguous.
 * Returns: the toleration, or NULL with the reason in err. Ownership: modifies key (an item of a
 * list the caller owns); the result is the caller's. */
static cJSON *parse_toleration(char *key, struct mu_buf *err)
{
  char *value = NULL, *effect = NULL, *c1 = strchr(key, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
  char *item = mu_strdup(key); /* for messages */
  cJSON *t = NULL;
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
    mu_buf_printf(err,
                  "-cfg tolerations: unknown effect '%s' for key '%s'; use NoSchedule, "
                  "PreferNoSchedule or NoExecute",
                  effect, key);
  } else if (*key == '\0' || strchr(key, ':') || (value && strchr(value, ':'))) {
    mu_buf_printf(err,
                  "-cfg tolerations: '%s' has an empty key; write key=value:Effect (kubectl's "
                  "form), key:value:Effect, key:Effect, key:value or key",
                  item);
  } else if (!label_key_ok(key) || (value && *value && !label_name_ok(value, strlen(value)))) {
    int bad_key = !label_key_ok(key);
    mu_buf_printf(err,
                  "-cfg tolerations: '%s': %s '%s' is not a valid taint %s (at most 63 "
                  "letters, digits, '-', '_' or '.', a letter or digit at both ends%s)",
                  item, bad_key ? "key" : "value", bad_key ? key : value, bad_key ? "key" : "value",
                  bad_key ? ", after an optional DNS prefix/" : "");
  } else {
    t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "key", key);
    cJSON_AddStringToObject(t, "operator", value ? "Equal" : "Exists");
    if (value)
      cJSON_AddStringToObject(t, "value", value);
    if (effect)
      cJSON_AddStringToObject(t, "effect", effect);
  }
  mu_free(item);
  return t;
}

/* The tolerations runopt, ';'-separated items (parse_toleration). Returns: 0 (*out NULL when
 * the runopt is unset), or MU_EINVAL with the reason in err. Ownership: *out is the caller's. */
static int parse_tolerations(const struct mu_cfg *cfg, cJSON **out, struct mu_buf *err)
{
  struct mu_strvec items = MU_STRVEC_INIT;
  const char *s = mu_cfg_get(cfg, "tolerations");
  int rc = 0;

  *out = NULL;
  if (s == NULL)
    return 0;
  split_list(s, &items);
  *out = cJSON_CreateArray();
  for (size_t i = 0; i < items.n && rc == 0; i++) {
    cJSON *t = parse_toleration(items.v[i], err);
    if (t == NULL)
      rc = MU_EINVAL;
    else
      cJSON_AddItemToArray(*out, t);
  }
  mu_strvec_release(&items);
  if (rc != 0) {
    cJSON_Delete(*out);
    *out = NULL;
  }
  return rc;
}

/* Whether argument i of the role's command line (-1: the entrypoint) is the `muster` of
 * `muster agent`: the entrypoint muster, or a wrapper's argument (aws.trn1_ddp --precompile
 * runs `neuron_parallel_compile muster agent ...`). */
int mu_k8s_is_agent_token(const struct mu_role *r, long i)
{
  if (i < 0)
    return r->entrypoint != NULL && strcmp(r->entrypoint, "muster") == 0;
  return strcmp(r->args.v[i], "muster") == 0 && (size_t)i + 1 < r->args.n &&
         strcmp(r->args.v[i + 1], "agent") == 0;
}

int mu_k8s_runs_agent(const struct mu_role *r)
{
  for (long i = -1; i < (long)r->args.n; i++)
    if (mu_k8s_is_agent_token(r, i))
      return 1;
  return 0;
}

/* ---------------------------------------------------------------------------------------------
 * The render context: required values, runopts
 */

static const char *const api_names[] = {"volcano", "jobset"};
static const char *const api_resources[] = {"jobs.batch.volcano.sh", "jobsets.jobset.x-k8s.io"};

const char *mu_k8s_api_name(enum mu_k8s_api api)
{
  return api_names[api];
}

const char *mu_k8s_resource(enum mu_k8s_api api)
{
  return api_resources[api];
}

int mu_k8s_api_parse(const char *s, enum mu_k8s_api *out, struct mu_buf *err)
{
  for (size_t i = 0; i < sizeof(api_names) / sizeof(api_names[0]); i++)
    if (s == NULL || *s == '\0' || strcmp(s, api_names[i]) == 0) {
      *out = s == NULL || *s == '\0' ? MU_K8S_VOLCANO : (enum mu_k8s_api)i;
      return 0;
    }
  mu_buf_printf(err,
                "-cfg api='%s' is not known; use volcano (a Volcano Job) or jobset (a JobSet, "
                "jobset.x-k8s.io/v1alpha2)",
                s);
  return MU_EINVAL;
}

/* Whether any role of app runs `muster agent`. */
int mu_k8s_app_runs_agent(const struct mu_app *app)
{
  for (size_t i = 0; i < app->nroles; i++)
    if (mu_k8s_runs_agent(&app->roles[i]))
      return 1;
  return 0;
}

void mu_k8s_explain_muster_image(const struct mu_app *app, struct mu_buf *out)
{
  mu_buf_printf(out,
                "-cfg muster_image: required: the job runs %s from the muster image. Build and "
                "push it once (scripts/build-image.sh --push docker://REGISTRY/muster:%s, "
                "docs/kubernetes.md), then -cfg muster_image=REGISTRY/muster:%s (or set it in "
                ".musterconfig [kubernetes])",
                mu_k8s_app_runs_agent(app)
                    ? "`muster agent` (copied into each pod by an init container)"
                    : "the job's own musterd",
                MU_VERSION, MU_VERSION);
}

/* Every value the manifest cannot do without, checked together so that one run names them all:
 * each role's image, the Volcano queue, and (only alongside another: alone, a dryrun shows the
 * plan with a placeholder) the muster image. Returns: 0, or MU_EINVAL with every missing value
 * and how to give it in err. */
static int check_required(const struct mu_k8s_ctx *x, struct mu_buf *err)
{
  const char *queue = mu_cfg_get(x->cfg, "queue"), *mi = mu_cfg_get(x->cfg, "muster_image");
  struct mu_strvec miss = MU_STRVEC_INIT;
  int volcano = x->api == MU_K8S_VOLCANO && strcmp(x->sched, "volcano") == 0;
  for (size_t i = 0; i < x->app->nroles; i++)
    if (x->app->roles[i].image == NULL || x->app->roles[i].image[0] == '\0')
      mu_strvec_pushf(&miss,
                      "roles[%zu].image: required on kubernetes (the container image to run); "
                      "set it with the component's --image",
                      i);
  if (volcano && (queue == NULL || *queue == '\0'))
    mu_strvec_push(&miss, "-cfg queue: required with the Volcano scheduler; name the Volcano "
                          "queue (e.g. -cfg queue=default), or use -cfg "
                          "scheduler_name=default-scheduler, or -cfg api=jobset");
  if (miss.n > 0 && (mu_k8s_app_runs_agent(x->app) || x->own_rdzv) && (mi == NULL || *mi == '\0')) {
    struct mu_buf b = MU_BUF_INIT(SIZE_MAX);
    mu_k8s_explain_muster_image(x->app, &b);
    mu_strvec_push(&miss, mu_buf_str(&b));
    mu_buf_release(&b);
  }
  if (miss.n == 1)
    mu_buf_puts(err, miss.v[0]);
  else if (miss.n > 1)
    mu_buf_printf(err, "%zu required values are missing:", miss.n);
  for (size_t i = 0; miss.n > 1 && i < miss.n; i++)
    mu_buf_printf(err, "\n  - %s", miss.v[i]);
  int rc = miss.n > 0 ? MU_EINVAL : 0;
  mu_strvec_release(&miss);
  return rc;
}

/* The rendezvous of the job: ${rdzv_endpoint}, the port and the job's own musterd. */
static int ctx_rdzv(struct mu_k8s_ctx *x, struct mu_buf *err)
{
  const char *ps = mu_cfg_get(x->cfg, "rdzv_port");
  struct mu_rdzv_choice rz;
  x->port = MU_K8S_RDZV_PORT;
  if (ps && (mu_parse_long(ps, 1, 65535, &x->port) != 0)) {
    mu_buf_printf(err, "-cfg rdzv_port: '%s' is not a port number (1-65535)", ps);
    return MU_EINVAL;
  }
  if (mu_cfg_rdzv(x->cfg, x->app, &rz, err) != 0)
    return MU_EINVAL;
  x->own_rdzv = rz.own;
  if (rz.endpoint != NULL)
    x->rdzv = rz.endpoint;
  else if (x->own_rdzv && x->api == MU_K8S_JOBSET)
    x->rdzv = mu_asprintf("%s-musterd-0-0.%s:%ld", x->job, x->job, x->port);
  else if (x->own_rdzv)
    x->rdzv = mu_asprintf("%s-musterd-0.%s:%ld", x->job, x->job, x->port);
  if (!mu_app_mentions(x->app, "${c10d_endpoint}"))
    return 0;
  if (!x->own_rdzv) {
    mu_buf_printf(err,
                  "the job uses ${c10d_endpoint} (torchrun --rdzv_backend c10d) and -cfg "
                  "rdzv=%s names a musterd whose TCPStore port muster does not know; use -cfg "
                  "rdzv=auto (the job's own musterd), or --rdzv_backend etcd-v2",
                  x->rdzv ? x->rdzv : "none");
    return MU_EINVAL;
  }
  /* the musterd task's TCPStore listener: the port after its HTTP one, same DNS name */
  x->c10d_port = x->port < 65535 ? x->port + 1 : x->port - 1;
  x->c10d = mu_asprintf("%.*s:%ld", (int)(strrchr(x->rdzv, ':') - x->rdzv), x->rdzv, x->c10d_port);
  return 0;
}

/* The first role that reaches the job's musterd without `muster agent`, which sends the job's
 * token and checks its musterd's certificate (torchrun's etcd and c10d clients do neither), or
 * -1 when every one is an agent: a role that mentions ${rdzv_endpoint} (the musterd's HTTP
 * APIs, which the token guards) or, with c10d_too, ${c10d_endpoint} (its TCPStore listener,
 * which has neither credentials nor TLS). */
static long rdzv_user_not_agent(const struct mu_app *app, int c10d_too)
{
  for (size_t i = 0; i < app->nroles; i++) {
    const struct mu_role *r = &app->roles[i];
    struct mu_app one = {.name = app->name, .roles = (struct mu_role *)r, .nroles = 1};
    int reaches = mu_app_mentions(&one, "${rdzv_endpoint}") ||
                  (c10d_too && mu_app_mentions(&one, "${c10d_endpoint}"));
    if (reaches && !mu_k8s_runs_agent(r))
      return (long)i;
  }
  return -1;
}

/* Whether the value of -cfg opt names a Secret; else says why in err. */
static int secret_name_ok(const char *opt, const char *v, const char *what, struct mu_buf *err)
{
  if (mu_k8s_subdomain_ok(v))
    return 1;
  if (*v == '\0') {
    mu_buf_printf(err, "-cfg %s: the Secret's name is missing; name %s", opt, what);
    return 0;
  }
  mu_buf_printf(err, "-cfg %s='", opt);
  mu_put_shown(err, v);
  mu_buf_printf(err,
                "' is not a Kubernetes Secret name (lowercase letters, digits, '-' and '.', at "
                "most 253); name %s",
                what);
  return 0;
}

/* The rendezvous token: a Secret the user names (rdzv_token_secret), else, when the job runs
 * its own musterd and only agents use it, one muster creates when it submits the job.
 * Returns: 0, or MU_EINVAL for a name that cannot be a Secret's. */
static int ctx_token(struct mu_k8s_ctx *x, struct mu_buf *err)
{
  const char *user = mu_cfg_get(x->cfg, "rdzv_token_secret");
  if (user != NULL && !secret_name_ok("rdzv_token_secret", user,
                                      "a Secret of the job's namespace whose key 'token' is the "
                                      "rendezvous token, or leave it unset (muster makes one)",
                                      err))
    return MU_EINVAL;
  if (user != NULL) {
    x->token_secret = mu_strdup(user);
  } else if (x->own_rdzv && rdzv_user_not_agent(x->app, 0) < 0) {
    x->token_secret = mu_asprintf("%s-rdzv-token", x->job);
    x->token_is_ours = 1;
  }
  return 0;
}

#define K8S_TLS_WHAT                                                                               \
  "a Secret of the job's namespace with tls.crt, tls.key and ca.crt (kubectl create secret "       \
  "generic NAME --type=kubernetes.io/tls --from-file=tls.crt=server.pem "                          \
  "--from-file=tls.key=server.key --from-file=ca.crt=ca.pem, or cert-manager's Certificate), "     \
  "not a directory as on local and Slurm (docs/kubernetes.md)"

/* Whether -cfg rdzv_tls can be served: the job's own musterd, reached by agents alone.
 * Returns: 0, or MU_EINVAL with the reason and the fix in err. */
static int tls_servable(const struct mu_k8s_ctx *x, struct mu_buf *err)
{
  long ri = rdzv_user_not_agent(x->app, 1);
  if (!x->own_rdzv && x->rdzv != NULL) {
    mu_buf_printf(err,
                  "-cfg rdzv_tls: the job's own musterd serves TLS, and this job uses rdzv=%s "
                  "instead: mount the CA of that server's certificate in the pods (--mounts "
                  "type=secret,...) and give the agents MUSTER_RDZV_CACERT, or drop rdzv_tls",
                  x->rdzv);
    return MU_EINVAL;
  }
  if (!x->own_rdzv) {
    mu_buf_puts(err, "-cfg rdzv_tls: the job's own musterd serves TLS, and this job has none "
                     "(no role uses ${rdzv_endpoint}, or -cfg rdzv=none): -cfg rdzv=job starts "
                     "one, or drop rdzv_tls");
    return MU_EINVAL;
  }
  if (ri >= 0) {
    mu_buf_printf(err,
                  "-cfg rdzv_tls: roles[%ld] (%s) reaches the job's musterd without `muster "
                  "agent`, and torchrun's rendezvous clients cannot check its certificate: run "
                  "the role with muster's agent (dist.ddp --launcher muster), or leave "
                  "rdzv_tls unset",
                  ri, x->app->roles[ri].name);
    return MU_EINVAL;
  }
  if (strlen(x->job) + strlen("-musterd") > 63) {
    mu_buf_printf(err,
                  "-cfg rdzv_tls: the job's name '%s' leaves no room for its musterd's Service "
                  "'%s-musterd' (63 characters at most); pick a shorter MUSTER_APP_ID",
                  x->job, x->job);
    return MU_EINVAL;
  }
  return 0;
}

/* -cfg rdzv_tls=SECRET [rdzv_tls_client=SECRET]: the job's musterd serves HTTPS with the
 * Secret's certificate, and ${rdzv_endpoint} becomes https://<job>-musterd.<namespace>.svc:PORT,
 * a headless Service that muster creates with the job. The pods' own names
 * (<job>-musterd-0.<job>) would need a certificate per job, made before the job's random name is
 * known (a wildcard covers one label, and *.<job> is too short for one); the Service is one
 * label under the namespace's service domain, so one certificate for *.<namespace>.svc covers
 * every job of the namespace. Returns: 0, or MU_EINVAL. */
static int ctx_tls(struct mu_k8s_ctx *x, struct mu_buf *err)
{
  const char *tls = mu_cfg_get(x->cfg, "rdzv_tls"), *cl = mu_cfg_get(x->cfg, "rdzv_tls_client");
  const char *ns = mu_cfg_get(x->cfg, "namespace");
  if (tls == NULL && cl == NULL)
    return 0;
  if (tls == NULL) {
    mu_buf_puts(err, "-cfg rdzv_tls_client: the agents present a client certificate to a "
                     "musterd that serves TLS; name that one's Secret with -cfg rdzv_tls too");
    return MU_EINVAL;
  }
  if (!secret_name_ok("rdzv_tls", tls, K8S_TLS_WHAT, err) ||
      (cl != NULL &&
       !secret_name_ok("rdzv_tls_client", cl,
                       "a Secret with the agents' client certificate (tls.crt, tls.key) signed "
                       "by rdzv_tls's ca.crt (kubectl create secret tls NAME --cert=client.pem "
                       "--key=client.key), or leave it unset",
                       err)))
    return MU_EINVAL;
  if (tls_servable(x, err) != 0)
    return MU_EINVAL;
  if (ns != NULL && !mu_k8s_name_ok(ns)) { /* it names the Service the agents reach */
    mu_buf_puts(err, "-cfg namespace='");
    mu_put_shown(err, ns);
    mu_buf_puts(err, "' is not a Kubernetes namespace name (lowercase letters, digits and '-', "
                     "at most 63)");
    return MU_EINVAL;
  }
  x->tls_secret = tls;
  x->tls_client = cl;
  x->rdzv_service = mu_asprintf("%s-musterd", x->job);
  mu_free(x->rdzv);
  x->rdzv = mu_asprintf("https://%s.%s.svc:%ld", x->rdzv_service, ns ? ns : "default", x->port);
  return 0;
}

/* The runopts that become objects (node selector, labels, annotations, tolerations, pull
 * secrets). Returns: 0, or MU_EINVAL naming the runopt. */
static int ctx_objects(struct mu_k8s_ctx *x, struct mu_buf *err)
{
  struct mu_strvec secrets = MU_STRVEC_INIT;
  int rc;
  x->node_sel = cJSON_CreateObject();
  x->labels = cJSON_CreateObject();
  x->annotations = cJSON_CreateObject();
  rc = map_into(x->cfg, "node_selector", x->node_sel, err);
  if (rc == 0)
    rc = map_into(x->cfg, "labels", x->labels, err);
  if (rc == 0)
    rc = map_into(x->cfg, "annotations", x->annotations, err);
  if (rc == 0)
    rc = parse_tolerations(x->cfg, &x->tolerations, err);
  if (rc == 0 && mu_cfg_get(x->cfg, "image_pull_secret")) {
    split_list(mu_cfg_get(x->cfg, "image_pull_secret"), &secrets);
    x->pull_secrets = cJSON_CreateArray();
    for (size_t i = 0; i < secrets.n; i++) {
      cJSON *o = cJSON_CreateObject();
      cJSON_AddStringToObject(o, "name", secrets.v[i]);
      cJSON_AddItemToArray(x->pull_secrets, o);
    }
  }
  mu_strvec_release(&secrets);
  return rc;
}

/* ${rank0_env}: TorchX's name of the variable that holds rank 0's host. Volcano: role 0
 * replica 0 gets TORCHX_RANK0_HOST=localhost, the others read Volcano's env plugin variable
 * VC_<ROLE0>_0_HOSTS. JobSet: every pod gets TORCHX_RANK0_HOST, the DNS name of role 0's first
 * pod through the JobSet's headless service. */
static void ctx_rank0(struct mu_k8s_ctx *x)
{
  char *r0 = mu_k8s_task_name(x->app->roles[0].name, 0);
  if (x->api == MU_K8S_JOBSET) {
    char *role = mu_k8s_rjob_name(x->app->roles[0].name, x->app->roles[0].num_replicas);
    x->rank0_env = mu_strdup(K8S_RANK0_ENV);
    x->rank0_host = mu_asprintf("%s-%s-0-0.%s", x->job, role, x->job);
    mu_free(role);
  } else {
    for (size_t i = 0; r0[i]; i++)
      r0[i] = r0[i] == '-' ? '_' : (char)toupper((unsigned char)r0[i]);
    x->rank0_env = mu_asprintf("VC_%s_HOSTS", r0);
  }
  mu_free(r0);
}

int mu_k8s_ctx_init(struct mu_k8s_ctx *x, const struct mu_app *app, const struct mu_cfg *cfg,
                    const char *job, struct mu_buf *err)
{
  const char *mi = mu_cfg_get(cfg, "muster_image"), *sched = mu_cfg_get(cfg, "scheduler_name");
  const char *queue = mu_cfg_get(cfg, "queue");
  int rc;
  memset(x, 0, sizeof(*x));
  x->app = app;
  x->cfg = cfg;
  x->job = job;
  if (app->nroles == 0) {
    mu_buf_puts(err, "app has no roles; a component must define at least one");
    return MU_EINVAL;
  }
  rc = mu_k8s_api_parse(mu_cfg_get(cfg, "api"), &x->api, err);
  if (rc == 0 && x->api == MU_K8S_JOBSET && queue != NULL && *queue != '\0') {
    mu_buf_printf(err,
                  "-cfg queue=%s: a Volcano queue, which a JobSet has no place for; with "
                  "api=jobset name a Kueue LocalQueue with -cfg kueue_queue=%s (or unset queue "
                  "with -cfg queue=None)",
                  queue, queue);
    rc = MU_EINVAL;
  }
  if (rc != 0)
    return rc;
  x->sched = sched != NULL && *sched != '\0' ? sched : x->api == MU_K8S_VOLCANO ? "volcano" : NULL;
  rc = ctx_rdzv(x, err);
  if (rc == 0)
    rc = check_required(x, err);
  if (rc == 0)
    rc = ctx_tls(x, err);
  if (rc == 0)
    rc = ctx_token(x, err);
  if (rc == 0)
    rc = ctx_objects(x, err);
  if (rc == 0)
    rc = mu_k8s_ctx_trn(x, err);
  if (rc != 0)
    return rc;
  x->neuron_res = mu_cfg_get(cfg, "neuron_resource");
  if (x->neuron_res != NULL &&
      (strchr(x->neuron_res, '/') == NULL || !label_key_ok(x->neuron_res))) {
    mu_buf_printf(err,
                  "-cfg neuron_resource=%s: not an extended resource name (DOMAIN/NAME); use "
                  "aws.amazon.com/neuron (Neuron 2.20 and later) or aws.amazon.com/neurondevice",
                  x->neuron_res);
    return MU_EINVAL;
  }
  x->placeholder = mi == NULL || *mi == '\0';
  x->muster_image = x->placeholder ? MU_K8S_IMAGE_PLACEHOLDER : mi;
  ctx_rank0(x);
  return 0;
}

void mu_k8s_ctx_release(struct mu_k8s_ctx *x)
{
  cJSON_Delete(x->node_sel);
  cJSON_Delete(x->labels);
  cJSON_Delete(x->annotations);
  cJSON_Delete(x->tolerations);
  cJSON_Delete(x->pull_secrets);
  mu_free(x->rdzv);
  mu_free(x->c10d);
  mu_free(x->rank0_env);
  mu_free(x->rank0_host);
  mu_free(x->token_secret);
  mu_free(x->rdzv_service);
  mu_free(x->topo_label);
  memset(x, 0, sizeof(*x));
}
