/* What the kubernetes scheduler adds for Trainium clusters and for the job's own musterd:
 *  - -cfg neuron_devices=dra: per role, a resource.k8s.io/v1 ResourceClaimTemplate for its
 *    Neuron devices (device class neuron.aws.com) and one for its EFA interfaces (device class
 *    efa.networking.k8s.aws), referred to by the role's pods instead of device limits;
 *  - -cfg topology=LABEL[:required|preferred]: Kueue's topology-aware scheduling annotations on
 *    every JobSet pod template, or a Volcano Job's networkTopology;
 *  - the NetworkPolicy that admits only the job's own pods to its musterd's ports.
 * The claim templates and the NetworkPolicy are created after the job and owned by it, as the
 * token Secret is (kubernetes.c). Sources of the Neuron facts: docs/kubernetes.md.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "muster/errno.h"
#include "muster/mu.h"

#include "alloc.h"
#include "config.h"
#include "kubernetes_impl.h"
#include "suggest.h"

#define NEURON_RES "aws.amazon.com/neuron"
#define NEURONCORE_RES "aws.amazon.com/neuroncore"
#define EFA_RES "vpc.amazonaws.com/efa"
#define NEURON_CLASS "neuron.aws.com"
#define EFA_CLASS "efa.networking.k8s.aws"
#define EKS_LAYER "topology.k8s.aws/network-node-layer-"
#define KUEUE_TAS "kueue.x-k8s.io/podset-"

/* The whole node's Neuron devices and EFA interfaces of the instance types whose claims can ask
 * for `All` (AWS's instance pages; trn2u is trn2's node in an UltraServer). */
static const struct {
  const char *type;
  long neuron, efa;
} node_devices[] = {
    {"trn1.2xlarge", 1, 0},    {"trn1.32xlarge", 16, 8},   {"trn1n.32xlarge", 16, 16},
    {"trn2.48xlarge", 16, 16}, {"trn2u.48xlarge", 16, 16},
};

/* ---------------------------------------------------------------------------------------------
 * The runopts
 */

/* Picks s from the NULL-ended choices; else the error names them and the closest. */
static int pick(const char *opt, const char *s, const char *const *choices, int *out,
                struct mu_buf *err)
{
  struct mu_suggest sg;
  mu_suggest_init(&sg, s);
  for (int i = 0; choices[i] != NULL; i++) {
    if (strcmp(s, choices[i]) == 0) {
      *out = i;
      return 0;
    }
    mu_suggest_add(&sg, choices[i]);
  }
  mu_buf_printf(err, "-cfg %s=%s: not one of", opt, s);
  for (int i = 0; choices[i] != NULL; i++)
    mu_buf_printf(err, "%s %s", i ? "," : "", choices[i]);
  if (mu_suggest_best(&sg) != NULL)
    mu_buf_printf(err, "; did you mean '%s'?", mu_suggest_best(&sg));
  return MU_EINVAL;
}

/* A label key as Kubernetes takes it: [prefix/]name, the name at most 63 of [A-Za-z0-9-_.]
 * with alphanumeric ends, the prefix a DNS subdomain. */
static int label_key_ok(const char *k)
{
  const char *slash = strrchr(k, '/'), *name = slash ? slash + 1 : k;
  size_t n = strlen(name);
  if (n == 0 || n > 63 || (slash != NULL && (slash == k || slash - k > 253)))
    return 0;
  for (const char *p = k; *p; p++)
    if (!(isalnum((unsigned char)*p) || *p == '-' || *p == '_' || *p == '.' || *p == '/'))
      return 0;
  return isalnum((unsigned char)name[0]) && isalnum((unsigned char)name[n - 1]);
}

/* -cfg topology_tier: the Volcano HyperNode tier, a number (highestTierAllowed) or a tier name
 * (highestTierName); unset: the tier of an EKS layer label (docs/kubernetes.md). */
static int parse_tier(struct mu_k8s_ctx *x, struct mu_buf *err)
{
  const char *t = mu_cfg_get(x->cfg, "topology_tier");
  char *end = NULL;
  if (t != NULL && *t != '\0') {
    long v = strtol(t, &end, 10);
    if (*end == '\0' && v >= 1 && v <= 99) {
      x->topo_tier = v;
      return 0;
    }
    if (*end == '\0' || !mu_k8s_subdomain_ok(t)) {
      mu_buf_printf(err,
                    "-cfg topology_tier=%s: neither a tier number (1, the lowest, to 99) nor a "
                    "HyperNode tier name (a DNS subdomain, e.g. rack)",
                    t);
      return MU_EINVAL;
    }
    x->topo_tier_name = t;
    return 0;
  }
  if (strncmp(x->topo_label, EKS_LAYER, strlen(EKS_LAYER)) == 0) {
    const char *n = x->topo_label + strlen(EKS_LAYER);
    if (n[0] >= '1' && n[0] <= '3' && n[1] == '\0') {
      x->topo_tier = 4 - (n[0] - '0'); /* layer-3, the one nearest the nodes, is tier 1 */
      return 0;
    }
  }
  if (x->api == MU_K8S_VOLCANO) {
    mu_buf_printf(err,
                  "-cfg topology=%s: Volcano places jobs by HyperNode tier, and muster knows the "
                  "tier only of EKS's %s1..3 labels; give the tier with -cfg topology_tier=N "
                  "(or a tier name)",
                  x->topo_label, EKS_LAYER);
    return MU_EINVAL;
  }
  return 0;
}

/* -cfg topology=LABEL[:required|preferred]. The default is preferred: Kueue and Volcano then
 * place the job in one domain when it fits and still start it when it does not. */
static int parse_topology(struct mu_k8s_ctx *x, struct mu_buf *err)
{
  static const char *const modes[] = {"preferred", "required", NULL};
  const char *t = mu_cfg_get(x->cfg, "topology"), *colon;
  int mode = 0, rc = 0;
  if (t == NULL || *t == '\0')
    return 0;
  colon = strrchr(t, ':');
  x->topo_label = colon ? mu_strndup(t, (size_t)(colon - t)) : mu_strdup(t);
  if (colon != NULL)
    rc = pick("topology mode", colon + 1, modes, &mode, err);
  if (rc == 0 && !label_key_ok(x->topo_label)) {
    mu_buf_printf(err,
                  "-cfg topology=%s: '%s' is not a node label key; use the label of the level "
                  "to keep the job in, e.g. %s3",
                  t, x->topo_label, EKS_LAYER);
    rc = MU_EINVAL;
  }
  x->topo_required = mode == 1;
  return rc == 0 ? parse_tier(x, err) : rc;
}

int mu_k8s_ctx_trn(struct mu_k8s_ctx *x, struct mu_buf *err)
{
  static const char *const paths[] = {"plugin", "dra", NULL};
  const char *nd = mu_cfg_get(x->cfg, "neuron_devices");
  int which = 0, rc = 0;
  if (nd != NULL && *nd != '\0')
    rc = pick("neuron_devices", nd, paths, &which, err);
  x->dra = which == 1;
  for (size_t ri = 0; rc == 0 && x->dra && ri < x->app->nroles; ri++) {
    const struct mu_resource *res = &x->app->roles[ri].resource;
    for (size_t i = 0; i < res->ndevices; i++)
      if (strcmp(res->devices[i].name, NEURONCORE_RES) == 0) {
        mu_buf_printf(err,
                      "-cfg neuron_devices=dra: role '%s' asks for %s, but the Neuron DRA "
                      "driver allocates whole devices; ask for %s (or use neuron_devices=plugin)",
                      x->app->roles[ri].name, NEURONCORE_RES, NEURON_RES);
        rc = MU_EINVAL;
      }
  }
  return rc == 0 ? parse_topology(x, err) : rc;
}

/* ---------------------------------------------------------------------------------------------
 * DRA claims
 */

static long device_count(const struct mu_role *r, const char *name)
{
  for (size_t i = 0; i < r->resource.ndevices; i++)
    if (strcmp(r->resource.devices[i].name, name) == 0)
      return r->resource.devices[i].count;
  return 0;
}

int mu_k8s_claimed(const struct mu_k8s_ctx *x, const char *device)
{
  return x->dra && (strcmp(device, NEURON_RES) == 0 || strcmp(device, EFA_RES) == 0);
}

static const char *instance_type(const struct mu_role *r)
{
  return mu_kvlist_get(&r->resource.capabilities, "node.kubernetes.io/instance-type");
}

/* The name of role ri's claim template of kind ("neuron", "efa"). Returns: mu_free. */
static char *claim_template_name(const struct mu_k8s_ctx *x, long ri, const char *kind)
{
  char *role = mu_k8s_normalize(x->app->roles[ri].name);
  char *s = mu_asprintf("%s-%s-%s", x->job, *role ? role : "main", kind);
  mu_free(role);
  return s;
}

void mu_k8s_pod_claims(const struct mu_k8s_ctx *x, long ri, cJSON *spec, cJSON *ctr)
{
  static const char *const kinds[] = {"neuron", "efa"};
  static const char *const res[] = {NEURON_RES, EFA_RES};
  const struct mu_role *r = &x->app->roles[ri];
  cJSON *rc = NULL, *cc = NULL;
  if (!x->dra)
    return;
  for (int i = 0; i < 2; i++) {
    if (device_count(r, res[i]) <= 0)
      continue;
    if (rc == NULL) {
      rc = cJSON_AddArrayToObject(spec, "resourceClaims");
      cc = cJSON_AddArrayToObject(cJSON_GetObjectItemCaseSensitive(ctr, "resources"), "claims");
    }
    cJSON *o = cJSON_CreateObject();
    char *tn = claim_template_name(x, ri, kinds[i]);
    cJSON_AddStringToObject(o, "name", kinds[i]);
    cJSON_AddStringToObject(o, "resourceClaimTemplateName", tn);
    cJSON_AddItemToArray(rc, o);
    o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", kinds[i]);
    cJSON_AddItemToArray(cc, o);
    mu_free(tn);
  }
}

/* The whole node's count of a device on instance type it; 0 when unknown. */
static long node_count(const char *it, int efa)
{
  for (size_t i = 0; it != NULL && i < sizeof(node_devices) / sizeof(node_devices[0]); i++)
    if (strcmp(it, node_devices[i].type) == 0)
      return efa ? node_devices[i].efa : node_devices[i].neuron;
  return 0;
}

/* The request "exactly": the class, All (the whole node's) or ExactCount, and for Neuron the
 * CEL selector on the instance type the Neuron DRA driver publishes. */
static cJSON *exact_request(const struct mu_role *r, int efa)
{
  const char *it = instance_type(r);
  long n = device_count(r, efa ? EFA_RES : NEURON_RES);
  cJSON *ex = cJSON_CreateObject();
  cJSON_AddStringToObject(ex, "deviceClassName", efa ? EFA_CLASS : NEURON_CLASS);
  if (n == node_count(it, efa)) {
    cJSON_AddStringToObject(ex, "allocationMode", "All");
  } else {
    cJSON_AddStringToObject(ex, "allocationMode", "ExactCount");
    cJSON_AddNumberToObject(ex, "count", (double)n);
  }
  if (!efa && it != NULL) {
    cJSON *sel = cJSON_CreateObject();
    char *cel = mu_asprintf("device.attributes['" NEURON_CLASS "'].instanceType == '%s'", it);
    cJSON_AddStringToObject(cJSON_AddObjectToObject(sel, "cel"), "expression", cel);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(ex, "selectors"), sel);
    mu_free(cel);
  }
  return ex;
}

/* Neuron extras: connected devices for a part of a node (sets of 4 or 8 share a device group),
 * and the role's NEURON_LOGICAL_NC_CONFIG as the driver's per-claim LNC setting on trn2. */
static void neuron_extras(const struct mu_role *r, cJSON *devices)
{
  long n = device_count(r, NEURON_RES);
  const char *lnc = mu_kvlist_get(&r->env, "NEURON_LOGICAL_NC_CONFIG"), *it = instance_type(r);
  if ((n == 4 || n == 8) && n != node_count(it, 0)) {
    cJSON *c = cJSON_CreateObject();
    char *attr = mu_asprintf("resource.aws.com/devicegroup%ld_id", n);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(c, "requests"), cJSON_CreateString("neuron"));
    cJSON_AddStringToObject(c, "matchAttribute", attr);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(devices, "constraints"), c);
    mu_free(attr);
  }
  if (lnc != NULL && (lnc[0] == '1' || lnc[0] == '2') && lnc[1] == '\0' &&
      (it == NULL || strncmp(it, "trn2", 4) == 0)) {
    cJSON *c = cJSON_CreateObject(), *op, *p;
    cJSON_AddItemToArray(cJSON_AddArrayToObject(c, "requests"), cJSON_CreateString("neuron"));
    op = cJSON_AddObjectToObject(c, "opaque");
    cJSON_AddStringToObject(op, "driver", NEURON_CLASS);
    p = cJSON_AddObjectToObject(op, "parameters");
    cJSON_AddStringToObject(p, "apiVersion", "neuron.aws.com/v1");
    cJSON_AddStringToObject(p, "kind", "NeuronConfig");
    cJSON_AddNumberToObject(p, "logicalNeuronCore", lnc[0] - '0');
    cJSON_AddItemToArray(cJSON_AddArrayToObject(devices, "config"), c);
  }
}

/* The metadata of an object muster creates with the job: name and whose it is. */
static cJSON *owned_meta(const struct mu_k8s_ctx *x, const char *name, const char *component)
{
  cJSON *meta = cJSON_CreateObject(), *l;
  cJSON_AddStringToObject(meta, "name", name);
  l = cJSON_AddObjectToObject(meta, "labels");
  cJSON_AddStringToObject(l, "app.kubernetes.io/component", component);
  cJSON_AddStringToObject(l, "app.kubernetes.io/instance", x->job);
  cJSON_AddStringToObject(l, "app.kubernetes.io/managed-by", "muster");
  return meta;
}

static cJSON *claim_template(const struct mu_k8s_ctx *x, long ri, int efa)
{
  const struct mu_role *r = &x->app->roles[ri];
  cJSON *t = cJSON_CreateObject(), *devices, *req;
  char *name = claim_template_name(x, ri, efa ? "efa" : "neuron");
  cJSON_AddStringToObject(t, "apiVersion", "resource.k8s.io/v1");
  cJSON_AddStringToObject(t, "kind", "ResourceClaimTemplate");
  cJSON_AddItemToObject(t, "metadata", owned_meta(x, name, efa ? "efa-claim" : "neuron-claim"));
  devices = cJSON_AddObjectToObject(
      cJSON_AddObjectToObject(cJSON_AddObjectToObject(t, "spec"), "spec"), "devices");
  req = cJSON_CreateObject();
  cJSON_AddStringToObject(req, "name", efa ? "efa" : "neuron");
  cJSON_AddItemToObject(req, "exactly", exact_request(r, efa));
  cJSON_AddItemToArray(cJSON_AddArrayToObject(devices, "requests"), req);
  if (!efa)
    neuron_extras(r, devices);
  mu_free(name);
  return t;
}

/* ---------------------------------------------------------------------------------------------
 * The musterd's NetworkPolicy and the owned objects
 */

/* Ingress to the job's musterd pod (its labels from mu_k8s_rdzv_pod_template) on its HTTP and
 * TCPStore ports only from pods labelled as the job's (every role's pod and the musterd). */
static cJSON *network_policy(const struct mu_k8s_ctx *x)
{
  cJSON *np = cJSON_CreateObject(), *spec, *sel, *rule, *from, *ports;
  char *name = mu_asprintf("%s-musterd", x->job);
  cJSON_AddStringToObject(np, "apiVersion", "networking.k8s.io/v1");
  cJSON_AddStringToObject(np, "kind", "NetworkPolicy");
  cJSON_AddItemToObject(np, "metadata", owned_meta(x, name, "rendezvous-policy"));
  spec = cJSON_AddObjectToObject(np, "spec");
  sel = cJSON_AddObjectToObject(cJSON_AddObjectToObject(spec, "podSelector"), "matchLabels");
  cJSON_AddStringToObject(sel, "app.kubernetes.io/component", "rendezvous");
  cJSON_AddStringToObject(sel, "app.kubernetes.io/instance", x->job);
  cJSON_AddItemToArray(cJSON_AddArrayToObject(spec, "policyTypes"), cJSON_CreateString("Ingress"));
  rule = cJSON_CreateObject();
  from = cJSON_CreateObject();
  sel = cJSON_AddObjectToObject(cJSON_AddObjectToObject(from, "podSelector"), "matchLabels");
  cJSON_AddStringToObject(sel, "app.kubernetes.io/instance", x->job);
  cJSON_AddStringToObject(sel, "app.kubernetes.io/managed-by", "muster");
  cJSON_AddItemToArray(cJSON_AddArrayToObject(rule, "from"), from);
  ports = cJSON_AddArrayToObject(rule, "ports");
  for (int i = 0; i < (x->c10d != NULL ? 2 : 1); i++) {
    cJSON *p = cJSON_CreateObject();
    cJSON_AddNumberToObject(p, "port", (double)(i == 0 ? x->port : x->c10d_port));
    cJSON_AddStringToObject(p, "protocol", "TCP");
    cJSON_AddItemToArray(ports, p);
  }
  cJSON_AddItemToArray(cJSON_AddArrayToObject(spec, "ingress"), rule);
  mu_free(name);
  return np;
}

cJSON *mu_k8s_owned_objects(const struct mu_k8s_ctx *x)
{
  cJSON *arr = cJSON_CreateArray();
  for (long ri = 0; x->dra && ri < (long)x->app->nroles; ri++) {
    if (device_count(&x->app->roles[ri], NEURON_RES) > 0)
      cJSON_AddItemToArray(arr, claim_template(x, ri, 0));
    if (device_count(&x->app->roles[ri], EFA_RES) > 0)
      cJSON_AddItemToArray(arr, claim_template(x, ri, 1));
  }
  if (x->own_rdzv)
    cJSON_AddItemToArray(arr, network_policy(x));
  return arr;
}

/* ---------------------------------------------------------------------------------------------
 * Topology
 */

void mu_k8s_volcano_topology(const struct mu_k8s_ctx *x, cJSON *spec)
{
  cJSON *nt;
  if (x->topo_label == NULL)
    return;
  nt = cJSON_AddObjectToObject(spec, "networkTopology");
  if (x->topo_tier_name != NULL)
    cJSON_AddStringToObject(nt, "highestTierName", x->topo_tier_name);
  else
    cJSON_AddNumberToObject(nt, "highestTierAllowed", (double)x->topo_tier);
  cJSON_AddStringToObject(nt, "mode", x->topo_required ? "hard" : "soft");
}

void mu_k8s_jobset_topology(const struct mu_k8s_ctx *x, cJSON *rjobs)
{
  const char *key =
      x->topo_required ? KUEUE_TAS "required-topology" : KUEUE_TAS "preferred-topology";
  cJSON *rj;
  if (x->topo_label == NULL)
    return;
  cJSON_ArrayForEach(rj, rjobs)
  {
    cJSON *pod = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(rj, "template"), "spec"),
        "template");
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
    cJSON *ann = cJSON_GetObjectItemCaseSensitive(meta, "annotations");
    if (ann == NULL)
      ann = cJSON_AddObjectToObject(meta, "annotations");
    cJSON_AddStringToObject(ann, key, x->topo_label);
  }
}
