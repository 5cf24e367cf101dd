/* muster deploy TARGET: preparing a cluster (docs/kubernetes.md, docs/install.md).
 *   rendezvous  a Deployment + Service for one cluster-wide musterd, the replacement for the
 *               trn1 tutorial's etcd.yaml step (kubectl apply -f - takes the output). musterd
 *               keeps its state in memory, so the Deployment runs exactly one replica with the
 *               Recreate strategy (never two servers at once); jobs re-join a restarted server.
 *   queue       the Volcano Queue jobs are submitted to (-cfg queue=NAME).
 *   kueue       Kueue's ResourceFlavor, ClusterQueue and LocalQueue for JobSets
 *               (-cfg api=jobset,kueue_queue=NAME).
 *   storage     the FSx for Lustre StorageClass and its claim (the tutorial's storageclass.yaml
 *               and claim.yaml), for aws.trn1_ddp's --claim CLAIM, or the other builtins'
 *               --mounts type=volume,src=CLAIM,dst=/data.
 *   agent DIR   copies this portable muster (its bin/, lib/ and share/) into DIR: the init
 *               container of every pod runs it to fill the emptyDir the training container
 *               runs /muster/bin/muster agent from (sched/kubernetes_render.c).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "alloc.h"
#include "buf.h"
#include "cmds.h"
#include "config.h"
#include "fsutil.h"
#include "kubernetes.h"
#include "log.h"
#include "muster/mu.h"
#include "opts.h"
#include "yaml_tree.h"

#define DEPLOY_USAGE                                                                               \
  "muster deploy TARGET [OPTIONS]\n\n"                                                             \
  "Prepares a Kubernetes cluster for muster's jobs; each target prints manifests for\n"            \
  "kubectl apply -f - (agent copies files instead):\n"                                             \
  "    rendezvous    a Deployment, Service and data volume for one cluster-wide musterd\n"         \
  "    queue         the Volcano Queue jobs are submitted to (-cfg queue=NAME)\n"                  \
  "    kueue         Kueue's ResourceFlavor, ClusterQueue and LocalQueue for JobSets\n"            \
  "    storage       the FSx for Lustre StorageClass and claim (the trn1 tutorial's)\n"            \
  "    agent DIR     this portable muster copied into DIR (the pods' init container)\n"            \
  "'muster deploy TARGET -h' shows one target's options; all of them follow."

#define RDZV_USAGE                                                                                 \
  "muster deploy rendezvous [--namespace NS] [--image IMG] [--name NAME] [--port N]\n"             \
  "                         [--data-size SIZE] [--storage-class CLASS] [--no-data]\n\n"            \
  "Prints a Service, a PersistentVolumeClaim and a Deployment for one cluster-wide musterd\n"      \
  "that keeps its state on the claim (--data-dir); apply them with\n"                              \
  "  muster deploy rendezvous --image REGISTRY/muster:TAG | kubectl apply -f -\n"                  \
  "The image defaults to [kubernetes] muster_image in .musterconfig, else muster:VERSION,\n"       \
  "which you build (scripts/build-image.sh) and push: no public registry has it. Jobs then\n"      \
  "use -cfg rdzv=NAME:PORT (torchrun: --rdzv_backend etcd --rdzv_endpoint NAME:PORT);\n"           \
  "--name etcd-server serves the address the trn1 tutorial hard-codes."

/* Where the Deployment's musterd keeps its state (the claim's mount). */
#define RDZV_DATA_DIR "/var/lib/musterd"
#define RDZV_UID 65532

struct rdzv_opts {
  const char *ns, *image, *name, *size, *storage_class;
  long port;
  int no_data;
  char *image_owned; /* the image read from .musterconfig, freed at the end */
};

static cJSON *labels(const char *name)
{
  cJSON *l = cJSON_CreateObject();
  cJSON_AddStringToObject(l, "app.kubernetes.io/component", "rendezvous");
  cJSON_AddStringToObject(l, "app.kubernetes.io/managed-by", "muster");
  cJSON_AddStringToObject(l, "app.kubernetes.io/name", name);
  return l;
}

static cJSON *metadata(const char *name, const char *ns)
{
  cJSON *m = cJSON_CreateObject();
  cJSON_AddStringToObject(m, "name", name);
  cJSON_AddStringToObject(m, "namespace", ns);
  cJSON_AddItemToObject(m, "labels", labels(name));
  return m;
}

static cJSON *service(const char *name, const char *ns, long port)
{
  cJSON *svc = cJSON_CreateObject(), *spec, *ports, *p, *sel;
  cJSON_AddStringToObject(svc, "apiVersion", "v1");
  cJSON_AddStringToObject(svc, "kind", "Service");
  cJSON_AddItemToObject(svc, "metadata", metadata(name, ns));
  spec = cJSON_AddObjectToObject(svc, "spec");
  sel = cJSON_AddObjectToObject(spec, "selector");
  cJSON_AddStringToObject(sel, "app.kubernetes.io/name", name);
  ports = cJSON_AddArrayToObject(spec, "ports");
  p = cJSON_CreateObject();
  cJSON_AddStringToObject(p, "name", "rdzv");
  cJSON_AddNumberToObject(p, "port", (double)port);
  cJSON_AddStringToObject(p, "protocol", "TCP");
  cJSON_AddNumberToObject(p, "targetPort", (double)port);
  cJSON_AddItemToArray(ports, p);
  return svc;
}

/* The claim the Deployment's musterd keeps its data dir on. */
static cJSON *data_claim(const struct rdzv_opts *o)
{
  char *claim = mu_asprintf("%s-data", o->name);
  cJSON *pvc = cJSON_CreateObject(), *spec, *req;
  cJSON_AddStringToObject(pvc, "apiVersion", "v1");
  cJSON_AddStringToObject(pvc, "kind", "PersistentVolumeClaim");
  cJSON_AddItemToObject(pvc, "metadata", metadata(claim, o->ns));
  spec = cJSON_AddObjectToObject(pvc, "spec");
  cJSON_AddItemToArray(cJSON_AddArrayToObject(spec, "accessModes"),
                       cJSON_CreateString("ReadWriteOnce"));
  if (o->storage_class != NULL)
    cJSON_AddStringToObject(spec, "storageClassName", o->storage_class);
  req = cJSON_AddObjectToObject(cJSON_AddObjectToObject(spec, "resources"), "requests");
  cJSON_AddStringToObject(req, "storage", o->size);
  mu_free(claim);
  return pvc;
}

/* The pod's data volume: the claim mounted at RDZV_DATA_DIR, musterd told to use it, the
 * volume group-owned by musterd's user (fsGroup). */
static void add_data_dir(const struct rdzv_opts *o, cJSON *pspec, cJSON *c, cJSON *psec)
{
  char *claim = mu_asprintf("%s-data", o->name);
  cJSON *cmd = cJSON_GetObjectItemCaseSensitive(c, "command"), *v, *m;
  cJSON_AddItemToArray(cmd, cJSON_CreateString("--data-dir"));
  cJSON_AddItemToArray(cmd, cJSON_CreateString(RDZV_DATA_DIR));
  cJSON_AddNumberToObject(psec, "fsGroup", RDZV_UID);
  v = cJSON_CreateObject();
  cJSON_AddStringToObject(v, "name", "data");
  cJSON_AddStringToObject(cJSON_AddObjectToObject(v, "persistentVolumeClaim"), "claimName", claim);
  cJSON_AddItemToArray(cJSON_AddArrayToObject(pspec, "volumes"), v);
  m = cJSON_CreateObject();
  cJSON_AddStringToObject(m, "name", "data");
  cJSON_AddStringToObject(m, "mountPath", RDZV_DATA_DIR);
  cJSON_AddItemToArray(cJSON_AddArrayToObject(c, "volumeMounts"), m);
  mu_free(claim);
}

/* The Deployment: one replica with the Recreate strategy (never two servers at once), running
 * the musterd container that jobs run too, plus what a long-lived service needs: a liveness
 * probe, a non-root, read-only container, and (unless --no-data) its state on a claim. */
static cJSON *deployment(const struct rdzv_opts *o)
{
  cJSON *d = cJSON_CreateObject(), *spec, *sel, *tmpl, *tmeta, *pspec, *c, *sec, *psec;

  cJSON_AddStringToObject(d, "apiVersion", "apps/v1");
  cJSON_AddStringToObject(d, "kind", "Deployment");
  cJSON_AddItemToObject(d, "metadata", metadata(o->name, o->ns));
  spec = cJSON_AddObjectToObject(d, "spec");
  cJSON_AddNumberToObject(spec, "replicas", 1);
  cJSON_AddStringToObject(cJSON_AddObjectToObject(spec, "strategy"), "type", "Recreate");
  sel = cJSON_AddObjectToObject(cJSON_AddObjectToObject(spec, "selector"), "matchLabels");
  cJSON_AddStringToObject(sel, "app.kubernetes.io/name", o->name);
  tmpl = cJSON_AddObjectToObject(spec, "template");
  tmeta = cJSON_AddObjectToObject(tmpl, "metadata");
  cJSON_AddItemToObject(tmeta, "labels", labels(o->name));
  pspec = cJSON_AddObjectToObject(tmpl, "spec");
  psec = cJSON_AddObjectToObject(pspec, "securityContext");
  cJSON_AddTrueToObject(psec, "runAsNonRoot");
  cJSON_AddNumberToObject(psec, "runAsUser", RDZV_UID);
  c = mu_k8s_musterd_container(o->image, o->port);
  cJSON_AddItemToArray(cJSON_AddArrayToObject(pspec, "containers"), c);
  cJSON_AddItemToObject(c, "livenessProbe", mu_k8s_healthz_probe(o->port, 10, 6));
  sec = cJSON_AddObjectToObject(c, "securityContext");
  cJSON_AddFalseToObject(sec, "allowPrivilegeEscalation");
  cJSON_AddTrueToObject(sec, "readOnlyRootFilesystem");
  if (!o->no_data)
    add_data_dir(o, pspec, c, psec);
  return d;
}

/* Checks the options; without --image (image_given 0) the image is [kubernetes] muster_image
 * of .musterconfig, else the default with a warning that says what it is.
 * Returns: 0, or MU_EXIT_USAGE after the error was printed. */
static int rdzv_check(struct rdzv_opts *o, int image_given)
{
  if (!mu_k8s_name_ok(o->ns) || !mu_k8s_name_ok(o->name)) {
    mu_error("--%s '%s' is not a Kubernetes name: lowercase letters, digits and '-', at most 63",
             mu_k8s_name_ok(o->ns) ? "name" : "namespace", mu_k8s_name_ok(o->ns) ? o->name : o->ns);
    return MU_EXIT_USAGE;
  }
  if (o->port < 1 || o->port > 65535) {
    mu_error("--port %ld is not a port number (1-65535)", o->port);
    return MU_EXIT_USAGE;
  }
  if (*o->image == '\0') {
    mu_error("--image is empty; name the image with musterd (see deploy/Containerfile)");
    return MU_EXIT_USAGE;
  }
  if (o->storage_class != NULL && !mu_k8s_name_ok(o->storage_class)) {
    mu_error("--storage-class '%s' is not a Kubernetes name", o->storage_class);
    return MU_EXIT_USAGE;
  }
  if (!image_given) {
    struct mu_config file = MU_CONFIG_INIT;
    struct mu_buf err = MU_BUF_INIT(SIZE_MAX);
    const struct mu_config_entry *e = NULL;
    if (mu_config_load(&file, &err) == 0)
      e = mu_config_find(&file, "kubernetes", "muster_image");
    if (e != NULL && e->value != NULL && e->value[0] != '\0')
      o->image = o->image_owned = mu_strdup(e->value);
    else
      mu_warn("--image not given: the manifest names '%s', an image you build "
              "(scripts/build-image.sh) and push to a registry your nodes pull from; no public "
              "registry has it. Give --image REGISTRY/muster:TAG, or set [kubernetes] "
              "muster_image in .musterconfig",
              o->image);
    mu_config_release(&file);
    mu_buf_release(&err);
  }
  return 0;
}

/* Parses `deploy [OPTIONS] rendezvous [OPTIONS]` (the options may come first).
 * Returns: 0, MU_OPTS_HELP or MU_EXIT_USAGE (the error printed). */
static int rdzv_parse(int argc, char **argv, struct mu_opt *opts)
{
  const char *target = NULL;
  int first, extra = -1;
  if (argc >= 2 && argv[1][0] != '-') {
    target = argv[1];
    first = mu_opts_parse(opts, argc - 1, argv + 1, 0, RDZV_USAGE);
    if (first >= 0 && first < argc - 1)
      extra = first + 1;
  } else {
    first = mu_opts_parse(opts, argc, argv, MU_OPTS_STOP_AT_NONOPT, RDZV_USAGE);
    if (first >= 0 && first < argc)
      target = argv[first];
    if (first >= 0 && first + 1 < argc)
      extra = first + 1;
  }
  if (first == MU_OPTS_HELP)
    return MU_OPTS_HELP;
  if (first < 0)
    return MU_EXIT_USAGE;
  if (extra >= 0) {
    mu_error("unexpected argument '%s'; see 'muster deploy -h'", argv[extra]);
    return MU_EXIT_USAGE;
  }
  if (target == NULL) {
    mu_error("what to deploy is missing; write 'muster deploy rendezvous' (or queue, storage, "
             "agent DIR; see 'muster deploy -h')");
    return MU_EXIT_USAGE;
  }
  if (strcmp(target, "rendezvous") != 0) {
    mu_error("unknown deploy target '%s'; use rendezvous, queue, storage or agent (see 'muster "
             "deploy -h')",
             target);
    return MU_EXIT_USAGE;
  }
  return 0;
}

static int deploy_rendezvous(int argc, char **argv)
{
  struct rdzv_opts o = {"default", NULL, "musterd", "1Gi", NULL, 2379, 0, NULL};
  struct mu_opt opts[] = {
      MU_OPT_STRING('n', "namespace", &o.ns, "NS", "namespace of the objects"),
      MU_OPT_STRING(0, "image", &o.image, "IMG",
                    "image with musterd (deploy/Containerfile; default [kubernetes] muster_image, "
                    "else muster:" MU_VERSION ")"),
      MU_OPT_STRING(0, "name", &o.name, "NAME", "name of the objects and the Service's DNS name"),
      MU_OPT_INT(0, "port", &o.port, "N", "the port musterd serves on (2379, as etcd)"),
      MU_OPT_STRING(0, "data-size", &o.size, "SIZE", "the data claim's size (1Gi)"),
      MU_OPT_STRING(0, "storage-class", &o.storage_class, "CLASS",
                    "the data claim's storage class (default: the cluster's)"),
      MU_OPT_BOOL(0, "no-data", &o.no_data,
                  "no claim: state in memory only, lost when the pod goes (jobs re-join)"),
      MU_OPT_END(),
  };
  int rc = rdzv_parse(argc, argv, opts);
  if (rc == MU_OPTS_HELP)
    return MU_EXIT_OK;
  if (rc != 0)
    return rc;
  int image_given = o.image != NULL;
  if (o.image == NULL)
    o.image = "muster:" MU_VERSION;
  rc = rdzv_check(&o, image_given);
  if (rc != 0) {
    mu_free(o.image_owned);
    return rc;
  }
  cJSON *objs[3];
  size_t n = 0;
  objs[n++] = service(o.name, o.ns, o.port);
  if (!o.no_data)
    objs[n++] = data_claim(&o);
  objs[n++] = deployment(&o);
  struct mu_buf out = MU_BUF_INIT(SIZE_MAX);
  mu_buf_printf(&out, "# musterd for the whole cluster: rendezvous at %s.%s:%ld%s\n", o.name, o.ns,
                o.port, o.no_data ? " (state in memory)" : ", state on the claim");
  for (size_t i = 0; i < n; i++) {
    mu_buf_puts(&out, "---\n");
    mu_yaml_emit(objs[i], &out);
    cJSON_Delete(objs[i]);
  }
  fputs(mu_buf_str(&out), stdout);
  mu_buf_release(&out);
  mu_free(o.image_owned);
  return MU_EXIT_OK;
}

/* ---------------------------------------------------------------------------------------------
 * queue, storage: the cluster preparation of the trn1 tutorial
 */

static cJSON *object(const char *api, const char *kind, const char *name, const char *ns)
{
  cJSON *o = cJSON_CreateObject(), *m;
  cJSON_AddStringToObject(o, "apiVersion", api);
  cJSON_AddStringToObject(o, "kind", kind);
  m = cJSON_AddObjectToObject(o, "metadata");
  cJSON_AddStringToObject(m, "name", name);
  if (ns != NULL)
    cJSON_AddStringToObject(m, "namespace", ns);
  cJSON_AddStringToObject(cJSON_AddObjectToObject(m, "labels"), "app.kubernetes.io/managed-by",
                          "muster");
  return o;
}

/* Prints the objects as one YAML stream after a comment line, and frees them. */
static int print_objects(const char *comment, cJSON **objs, size_t n)
{
  struct mu_buf out = MU_BUF_INIT(SIZE_MAX);
  mu_buf_printf(&out, "# %s\n", comment);
  for (size_t i = 0; i < n; i++) {
    mu_buf_puts(&out, "---\n");
    mu_yaml_emit(objs[i], &out);
    cJSON_Delete(objs[i]);
  }
  fputs(mu_buf_str(&out), stdout);
  mu_buf_release(&out);
  return MU_EXIT_OK;
}

static int name_arg(const char *opt, const char *v)
{
  if (mu_k8s_name_ok(v))
    return 0;
  mu_error("--%s '%s' is not a Kubernetes name: lowercase letters, digits and '-', at most 63", opt,
           v);
  return -1;
}

#define QUEUE_USAGE                                                                                \
  "muster deploy queue [--name NAME] [--weight N] [--reclaimable] [--cpu N] [--memory SIZE]\n\n"   \
  "Prints the Volcano Queue that jobs are submitted to: kubectl apply -f -, then run with\n"       \
  "-cfg queue=NAME. --cpu/--memory cap what the queue's jobs may use at once."

static int deploy_queue(int argc, char **argv)
{
  const char *name = "muster", *cpu = NULL, *memory = NULL;
  long weight = 1;
  int reclaimable = 0;
  struct mu_opt opts[] = {
      MU_OPT_STRING(0, "name", &name, "NAME", "the queue's name (-cfg queue=NAME)"),
      MU_OPT_INT(0, "weight", &weight, "N", "its share of the cluster against other queues (1)"),
      MU_OPT_BOOL(0, "reclaimable", &reclaimable, "let other queues reclaim its idle share"),
      MU_OPT_STRING(0, "cpu", &cpu, "N", "capability: CPUs its jobs may hold at once"),
      MU_OPT_STRING(0, "memory", &memory, "SIZE", "capability: memory (e.g. 512Gi)"),
      MU_OPT_END(),
  };
  int first = mu_opts_parse(opts, argc, argv, 0, QUEUE_USAGE);
  cJSON *q, *spec;
  if (first == MU_OPTS_HELP)
    return MU_EXIT_OK;
  if (first < 0)
    return MU_EXIT_USAGE;
  if (first < argc) {
    mu_error("unexpected argument '%s'; see 'muster deploy queue -h'", argv[first]);
    return MU_EXIT_USAGE;
  }
  if (name_arg("name", name) != 0)
    return MU_EXIT_USAGE;
  if (weight < 1 || weight > 65535) {
    mu_error("--weight %ld: give a whole number from 1 to 65535", weight);
    return MU_EXIT_USAGE;
  }
  q = object("scheduling.volcano.sh/v1beta1", "Queue", name, NULL);
  spec = cJSON_AddObjectToObject(q, "spec");
  cJSON_AddNumberToObject(spec, "weight", (double)weight);
  cJSON_AddBoolToObject(spec, "reclaimable", reclaimable);
  if (cpu != NULL || memory != NULL) {
    cJSON *cap = cJSON_AddObjectToObject(spec, "capability");
    if (cpu != NULL)
      cJSON_AddStringToObject(cap, "cpu", cpu);
    if (memory != NULL)
      cJSON_AddStringToObject(cap, "memory", memory);
  }
  {
    char *c = mu_asprintf("the Volcano Queue '%s': muster run -s kubernetes -cfg queue=%s ...",
                          name, name);
    print_objects(c, &q, 1);
    mu_free(c);
  }
  return MU_EXIT_OK;
}

#define KUEUE_USAGE                                                                                \
  "muster deploy kueue [--name NAME] [--namespace NS] [--cluster-queue CQ] [--flavor F]\n"         \
  "                    [--cpu N] [--memory SIZE] [--gpu N] [--neuron N] [--efa N]\n\n"             \
  "Prints Kueue's ResourceFlavor, a ClusterQueue with those quotas and a LocalQueue in NS\n"       \
  "(kueue.x-k8s.io/v1beta1; the cluster needs Kueue and JobSet installed): kubectl apply -f -,\n"  \
  "then run JobSets with -cfg api=jobset,kueue_queue=NAME. Kueue admits a job only when the\n"     \
  "quotas hold all of it at once."

/* Whether s is a Kubernetes quantity as written by hand: digits, an optional fraction, an
 * optional suffix (Ki..Ei, k..E, m). Returns: 1 or 0. */
static int quantity_ok(const char *s)
{
  static const char *const suffixes[] = {"",  "m",  "k",  "M",  "G",  "T",  "P",
                                         "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
  size_t n = strspn(s, "0123456789");
  if (n == 0)
    return 0;
  if (s[n] == '.') {
    size_t f = strspn(s + n + 1, "0123456789");
    if (f == 0)
      return 0;
    n += 1 + f;
  }
  for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++)
    if (strcmp(s + n, suffixes[i]) == 0)
      return 1;
  return 0;
}

/* The quotas of the ClusterQueue, one resource group of the flavor. */
static cJSON *kueue_quotas(const char *flavor, const char *const names[], const char *const qty[],
                           size_t n)
{
  cJSON *rg = cJSON_CreateObject(), *cov = cJSON_AddArrayToObject(rg, "coveredResources");
  cJSON *fl = cJSON_CreateObject(), *res;
  cJSON_AddStringToObject(fl, "name", flavor);
  res = cJSON_AddArrayToObject(fl, "resources");
  for (size_t i = 0; i < n; i++) {
    if (qty[i] == NULL)
      continue;
    cJSON *r = cJSON_CreateObject();
    cJSON_AddItemToArray(cov, cJSON_CreateString(names[i]));
    cJSON_AddStringToObject(r, "name", names[i]);
    cJSON_AddStringToObject(r, "nominalQuota", qty[i]);
    cJSON_AddItemToArray(res, r);
  }
  cJSON_AddItemToArray(cJSON_AddArrayToObject(rg, "flavors"), fl);
  return rg;
}

static int deploy_kueue(int argc, char **argv)
{
  static const char *const names[] = {"cpu", "memory", "nvidia.com/gpu", "aws.amazon.com/neuron",
                                      "vpc.amazonaws.com/efa"};
  const char *name = "muster", *ns = "default", *cq = NULL, *flavor = "default-flavor";
  const char *qty[] = {"1000", "4Ti", NULL, NULL, NULL};
  struct mu_opt opts[] = {
      MU_OPT_STRING(0, "name", &name, "NAME", "the LocalQueue (-cfg kueue_queue=NAME)"),
      MU_OPT_STRING(0, "namespace", &ns, "NS", "its namespace, the jobs' (default)"),
      MU_OPT_STRING(0, "cluster-queue", &cq, "CQ", "the ClusterQueue (default: NAME)"),
      MU_OPT_STRING(0, "flavor", &flavor, "F", "the ResourceFlavor (default-flavor)"),
      MU_OPT_STRING(0, "cpu", &qty[0], "N", "CPUs the queue's jobs may hold at once (1000)"),
      MU_OPT_STRING(0, "memory", &qty[1], "SIZE", "memory they may hold (4Ti)"),
      MU_OPT_STRING(0, "gpu", &qty[2], "N", "nvidia.com/gpu they may hold (none: not covered)"),
      MU_OPT_STRING(0, "neuron", &qty[3], "N", "aws.amazon.com/neuron devices (not covered)"),
      MU_OPT_STRING(0, "efa", &qty[4], "N", "vpc.amazonaws.com/efa interfaces (not covered)"),
      MU_OPT_END(),
  };
  int first = mu_opts_parse(opts, argc, argv, 0, KUEUE_USAGE);
  cJSON *objs[3], *spec;
  if (first == MU_OPTS_HELP)
    return MU_EXIT_OK;
  if (first < 0)
    return MU_EXIT_USAGE;
  if (first < argc) {
    mu_error("unexpected argument '%s'; see 'muster deploy kueue -h'", argv[first]);
    return MU_EXIT_USAGE;
  }
  cq = cq ? cq : name;
  if (name_arg("name", name) != 0 || name_arg("namespace", ns) != 0 ||
      name_arg("cluster-queue", cq) != 0 || name_arg("flavor", flavor) != 0)
    return MU_EXIT_USAGE;
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    if (qty[i] != NULL && !quantity_ok(qty[i])) {
      mu_error("--%s '%s' is not a Kubernetes quantity (e.g. 256, 2Ti, 500m)",
               opts[4 + i].long_name, qty[i]);
      return MU_EXIT_USAGE;
    }
  objs[0] = object("kueue.x-k8s.io/v1beta1", "ResourceFlavor", flavor, NULL);
  objs[1] = object("kueue.x-k8s.io/v1beta1", "ClusterQueue", cq, NULL);
  spec = cJSON_AddObjectToObject(objs[1], "spec");
  cJSON_AddObjectToObject(spec, "namespaceSelector"); /* every namespace may use it */
  cJSON_AddItemToArray(cJSON_AddArrayToObject(spec, "resourceGroups"),
                       kueue_quotas(flavor, names, qty, sizeof(names) / sizeof(names[0])));
  objs[2] = object("kueue.x-k8s.io/v1beta1", "LocalQueue", name, ns);
  cJSON_AddStringToObject(cJSON_AddObjectToObject(objs[2], "spec"), "clusterQueue", cq);
  char *c = mu_asprintf("Kueue's queues: muster run -s kubernetes -cfg api=jobset,kueue_queue=%s"
                        "%s%s ...",
                        name, strcmp(ns, "default") != 0 ? ",namespace=" : "",
                        strcmp(ns, "default") != 0 ? ns : "");
  print_objects(c, objs, 3);
  mu_free(c);
  return MU_EXIT_OK;
}

#define STORAGE_USAGE                                                                              \
  "muster deploy storage --subnet-id SUBNET --security-group SG [--name CLAIM] [--size SIZE]\n"    \
  "                      [--namespace NS] [--class NAME] [--throughput N]\n\n"                     \
  "Prints the FSx for Lustre StorageClass (fsx.csi.aws.com) and a ReadWriteMany claim on it,\n"    \
  "as the trn1 tutorial's storageclass.yaml and claim.yaml. Jobs mount the claim at /data:\n"      \
  "aws.trn1_ddp with --claim CLAIM (fsx-claim is its default), dist.ddp, dist.spmd and\n"          \
  "the others with --mounts type=volume,src=CLAIM,dst=/data."

static int deploy_storage(int argc, char **argv)
{
  const char *subnet = NULL, *sg = NULL, *claim = "fsx-claim", *cls = "fsx-sc", *size = "1200Gi";
  const char *ns = "default";
  long throughput = 200;
  struct mu_opt opts[] = {
      MU_OPT_STRING(0, "subnet-id", &subnet, "SUBNET", "the subnet of the file system (required)"),
      MU_OPT_STRING(0, "security-group", &sg, "SG", "its security group ids (required)"),
      MU_OPT_STRING(0, "name", &claim, "CLAIM", "the claim's name (fsx-claim)"),
      MU_OPT_STRING(0, "class", &cls, "NAME", "the StorageClass's name (fsx-sc)"),
      MU_OPT_STRING(0, "size", &size, "SIZE", "the claim's size, a multiple of 1200Gi (1200Gi)"),
      MU_OPT_STRING('n', "namespace", &ns, "NS", "the claim's namespace (default)"),
      MU_OPT_INT(0, "throughput", &throughput, "N",
                 "MB/s per TiB: 50, 100 or 200 (PERSISTENT_1; default 200)"),
      MU_OPT_END(),
  };
  int first = mu_opts_parse(opts, argc, argv, 0, STORAGE_USAGE);
  cJSON *objs[2], *p, *spec, *req;
  if (first == MU_OPTS_HELP)
    return MU_EXIT_OK;
  if (first < 0)
    return MU_EXIT_USAGE;
  if (first < argc) {
    mu_error("unexpected argument '%s'; see 'muster deploy storage -h'", argv[first]);
    return MU_EXIT_USAGE;
  }
  if (subnet == NULL || sg == NULL) {
    mu_error("--%s is required: the FSx file system is created in your VPC (eksctl's subnet and "
             "the security group that allows Lustre traffic, port 988)",
             subnet == NULL ? "subnet-id" : "security-group");
    return MU_EXIT_USAGE;
  }
  if (name_arg("name", claim) != 0 || name_arg("class", cls) != 0 || name_arg("namespace", ns) != 0)
    return MU_EXIT_USAGE;
  if (throughput != 50 && throughput != 100 && throughput != 200) {
    mu_error("--throughput %ld: PERSISTENT_1 offers 50, 100 or 200 MB/s per TiB", throughput);
    return MU_EXIT_USAGE;
  }
  objs[0] = object("storage.k8s.io/v1", "StorageClass", cls, NULL);
  cJSON_AddStringToObject(objs[0], "provisioner", "fsx.csi.aws.com");
  p = cJSON_AddObjectToObject(objs[0], "parameters");
  cJSON_AddStringToObject(p, "subnetId", subnet);
  cJSON_AddStringToObject(p, "securityGroupIds", sg);
  cJSON_AddStringToObject(p, "deploymentType", "PERSISTENT_1");
  cJSON_AddStringToObject(p, "automaticBackupRetentionDays", "1");
  cJSON_AddStringToObject(p, "dailyAutomaticBackupStartTime", "00:00");
  cJSON_AddStringToObject(p, "copyTagsToBackups", "true");
  {
    char t[24];
    snprintf(t, sizeof t, "%ld", throughput);
    cJSON_AddStringToObject(p, "perUnitStorageThroughput", t);
  }
  cJSON_AddStringToObject(p, "dataCompressionType", "NONE");
  cJSON_AddStringToObject(p, "weeklyMaintenanceStartTime", "7:09:00");
  cJSON_AddStringToObject(p, "fileSystemTypeVersion", "2.12");
  cJSON_AddItemToArray(cJSON_AddArrayToObject(objs[0], "mountOptions"),
                       cJSON_CreateString("flock"));
  objs[1] = object("v1", "PersistentVolumeClaim", claim, ns);
  spec = cJSON_AddObjectToObject(objs[1], "spec");
  cJSON_AddItemToArray(cJSON_AddArrayToObject(spec, "accessModes"),
                       cJSON_CreateString("ReadWriteMany"));
  cJSON_AddStringToObject(spec, "storageClassName", cls);
  req = cJSON_AddObjectToObject(cJSON_AddObjectToObject(spec, "resources"), "requests");
  cJSON_AddStringToObject(req, "storage", size);
  {
    char *c =
        mu_asprintf("FSx for Lustre: StorageClass %s and claim %s/%s. Jobs mount the "
                    "claim at /data:\n"
                    "#   aws.trn1_ddp: --claim %s%s\n"
                    "#   dist.ddp, dist.spmd and the others: "
                    "--mounts type=volume,src=%s,dst=/data",
                    cls, ns, claim, claim,
                    strcmp(claim, "fsx-claim") == 0 ? " (its default: nothing to add)" : "", claim);
    print_objects(c, objs, 2);
    mu_free(c);
  }
  return MU_EXIT_OK;
}

/* ---------------------------------------------------------------------------------------------
 * agent: the init container's copy
 */

#define AGENT_USAGE                                                                                \
  "muster deploy agent DIR\n\n"                                                                    \
  "Copies this portable muster (the bin/, lib/ and share/ beside its bin/) into DIR. The\n"        \
  "init container of every Kubernetes pod runs it into the pod's emptyDir; the training\n"         \
  "container then runs DIR/bin/muster agent in the user's image."

static int deploy_agent(int argc, char **argv)
{
  struct mu_opt opts[] = {MU_OPT_END()};
  int first = mu_opts_parse(opts, argc, argv, MU_OPTS_STOP_AT_NONOPT, AGENT_USAGE), rc = MU_EXIT_OK;
  struct mu_buf err = MU_BUF_INIT(SIZE_MAX);
  char *exe, *prefix, *p;
  static const char *const parts[] = {"bin", "lib", "share"};
  if (first == MU_OPTS_HELP)
    return MU_EXIT_OK;
  if (first < 0)
    return MU_EXIT_USAGE;
  if (first != argc - 1) {
    mu_error("give one directory to copy the agent into: muster deploy agent DIR");
    return MU_EXIT_USAGE;
  }
  exe = mu_self_exe();
  if (exe == NULL) {
    mu_error("cannot find this program's path (/proc/self/exe): is /proc mounted?");
    return MU_EXIT_FAILED;
  }
  /* <prefix>/bin/muster -> <prefix> */
  prefix = exe;
  for (int up = 0; up < 2 && (p = strrchr(prefix, '/')) != NULL; up++)
    *p = '\0';
  for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]) && rc == MU_EXIT_OK; i++) {
    char *src = mu_asprintf("%s/%s", prefix[0] ? prefix : "", parts[i]);
    char *dst = mu_asprintf("%s/%s", argv[first], parts[i]);
    struct stat st;
    if (stat(src, &st) == 0 && mu_copy_tree(src, dst, &err) != 0) {
      mu_error("deploy agent: %s", mu_buf_str(&err));
      rc = MU_EXIT_FAILED;
    }
    mu_free(src);
    mu_free(dst);
  }
  if (rc == MU_EXIT_OK)
    printf("muster agent copied from %s to %s (run %s/bin/muster agent)\n",
           prefix[0] ? prefix : "/", argv[first], argv[first]);
  mu_free(exe);
  mu_buf_release(&err);
  return rc;
}

int cmd_deploy(int argc, char **argv)
{
  static const struct {
    const char *name;
    int (*fn)(int argc, char **argv);
  } targets[] = {{"rendezvous", deploy_rendezvous},
                 {"queue", deploy_queue},
                 {"kueue", deploy_kueue},
                 {"storage", deploy_storage},
                 {"agent", deploy_agent}};
  if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
    /* The overview, then every target's own -h: `muster deploy -h` (and the man page made
     * from it) documents them all. */
    printf("usage: %s\n", DEPLOY_USAGE);
    for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++) {
      char h[] = "-h";
      char *av[] = {argv[0], h, NULL};
      char name[32];
      snprintf(name, sizeof name, "%s", targets[i].name);
      av[0] = name;
      printf("\n");
      fflush(stdout);
      targets[i].fn(2, av);
    }
    return MU_EXIT_OK;
  }
  const char *target = argc >= 2 && argv[1][0] != '-' ? argv[1] : "rendezvous";
  for (int i = 1; i < argc && strcmp(target, "agent") != 0; i++)
    if (strcmp(argv[i], "--dryrun") == 0 || strcmp(argv[i], "--dry-run") == 0) {
      /* run's habit: deploy applies nothing, it prints */
      mu_error("muster deploy %s has no %s: it applies nothing, it prints the manifests; read "
               "them, or apply them with 'muster deploy %s ... | kubectl apply -f -'",
               target, argv[i], target);
      return MU_EXIT_USAGE;
    }
  if (argc >= 2)
    for (size_t i = 1; i < sizeof(targets) / sizeof(targets[0]); i++)
      if (strcmp(argv[1], targets[i].name) == 0)
        return targets[i].fn(argc - 1, argv + 1);
  return deploy_rendezvous(argc, argv);
}
