/* muster deploy rendezvous: prints a Deployment + Service for one cluster-wide musterd, the
 * replacement for the trn1 tutorial's etcd.yaml step (kubectl apply -f - takes the output).
 *
 * musterd keeps its state in memory, so the Deployment runs exactly one replica with the
 * Recreate strategy (never two servers at once); jobs re-join a restarted server.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "buf.h"
#include "cmds.h"
#include "kubernetes.h"
#include "log.h"
#include "muster/mu.h"
#include "opts.h"
#include "yaml_tree.h"

#define DEPLOY_USAGE                                                                               \
  "muster deploy rendezvous [--namespace NS] [--image IMG] [--name NAME] [--port N]\n\n"           \
  "Prints a Deployment and a Service for a cluster-wide musterd; apply them with\n"                \
  "  muster deploy rendezvous | kubectl apply -f -\n"                                              \
  "Jobs then use -cfg rdzv=NAME:PORT (torchrun: --rdzv_backend etcd --rdzv_endpoint\n"             \
  "NAME:PORT). --name etcd-server serves the address the trn1 tutorial hard-codes."

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

/* The Deployment: one replica with the Recreate strategy (never two servers at once), running
 * the musterd container that jobs run too, plus what a long-lived service needs: a liveness
 * probe and a non-root, read-only container. */
static cJSON *deployment(const char *name, const char *ns, const char *image, long port)
{
  cJSON *d = cJSON_CreateObject(), *spec, *sel, *tmpl, *tmeta, *pspec, *c, *sec, *psec;

  cJSON_AddStringToObject(d, "apiVersion", "apps/v1");
  cJSON_AddStringToObject(d, "kind", "Deployment");
  cJSON_AddItemToObject(d, "metadata", metadata(name, ns));
  spec = cJSON_AddObjectToObject(d, "spec");
  cJSON_AddNumberToObject(spec, "replicas", 1);
  cJSON_AddStringToObject(cJSON_AddObjectToObject(spec, "strategy"), "type", "Recreate");
  sel = cJSON_AddObjectToObject(cJSON_AddObjectToObject(spec, "selector"), "matchLabels");
  cJSON_AddStringToObject(sel, "app.kubernetes.io/name", name);
  tmpl = cJSON_AddObjectToObject(spec, "template");
  tmeta = cJSON_AddObjectToObject(tmpl, "metadata");
  cJSON_AddItemToObject(tmeta, "labels", labels(name));
  pspec = cJSON_AddObjectToObject(tmpl, "spec");
  psec = cJSON_AddObjectToObject(pspec, "securityContext");
  cJSON_AddTrueToObject(psec, "runAsNonRoot");
  cJSON_AddNumberToObject(psec, "runAsUser", 65532);
  c = mu_k8s_musterd_container(image, port);
  cJSON_AddItemToArray(cJSON_AddArrayToObject(pspec, "containers"), c);
  cJSON_AddItemToObject(c, "livenessProbe", mu_k8s_healthz_probe(port, 10, 6));
  sec = cJSON_AddObjectToObject(c, "securityContext");
  cJSON_AddFalseToObject(sec, "allowPrivilegeEscalation");
  cJSON_AddTrueToObject(sec, "readOnlyRootFilesystem");
  return d;
}

int cmd_deploy(int argc, char **argv)
{
  const char *ns = "default", *image = "muster:" MU_VERSION, *name = "musterd", *target = NULL;
  long port = 2379;
  struct mu_opt opts[] = {
      MU_OPT_STRING('n', "namespace", &ns, "NS", "namespace of the Deployment and Service"),
      MU_OPT_STRING(0, "image", &image, "IMG", "image with musterd (deploy/Containerfile)"),
      MU_OPT_STRING(0, "name", &name, "NAME", "name of both objects and the Service's DNS name"),
      MU_OPT_INT(0, "port", &port, "N", "the port musterd serves on (2379, as etcd)"),
      MU_OPT_END(),
  };
  struct mu_buf out = MU_BUF_INIT(SIZE_MAX);
  cJSON *svc = NULL, *dep = NULL;
  int first, rc = MU_EXIT_OK;

  /* The target comes first ("deploy rendezvous --namespace x"), options may also precede it. */
  if (argc >= 2 && argv[1][0] != '-') {
    target = argv[1];
    first = mu_opts_parse(opts, argc - 1, argv + 1, 0, DEPLOY_USAGE);
    if (first >= 0 && first < argc - 1) {
      mu_error("unexpected argument '%s'; see 'muster deploy -h'", argv[first + 1]);
      return MU_EXIT_USAGE;
    }
  } else {
    first = mu_opts_parse(opts, argc, argv, MU_OPTS_STOP_AT_NONOPT, DEPLOY_USAGE);
    if (first >= 0 && first < argc)
      target = argv[first];
    if (first >= 0 && first + 1 < argc) {
      mu_error("unexpected argument '%s'; see 'muster deploy -h'", argv[first + 1]);
      return MU_EXIT_USAGE;
    }
  }
  if (first == MU_OPTS_HELP)
    return MU_EXIT_OK;
  if (first < 0)
    return MU_EXIT_USAGE;
  if (target == NULL) {
    mu_error("what to deploy is missing; write 'muster deploy rendezvous'");
    return MU_EXIT_USAGE;
  }
  if (strcmp(target, "rendezvous") != 0) {
    mu_error("unknown deploy target '%s'; the only one is 'rendezvous'", target);
    return MU_EXIT_USAGE;
  }
  if (!mu_k8s_name_ok(ns) || !mu_k8s_name_ok(name)) {
    mu_error("--%s '%s' is not a Kubernetes name: lowercase letters, digits and '-', at most 63",
             mu_k8s_name_ok(ns) ? "name" : "namespace", mu_k8s_name_ok(ns) ? name : ns);
    return MU_EXIT_USAGE;
  }
  if (port < 1 || port > 65535) {
    mu_error("--port %ld is not a port number (1-65535)", port);
    return MU_EXIT_USAGE;
  }
  if (*image == '\0') {
    mu_error("--image is empty; name the image with musterd (see deploy/Containerfile)");
    return MU_EXIT_USAGE;
  }
  svc = service(name, ns, port);
  dep = deployment(name, ns, image, port);
  mu_buf_printf(&out, "# musterd for the whole cluster: rendezvous at %s.%s:%ld\n---\n", name, ns,
                port);
  mu_yaml_emit(svc, &out);
  mu_buf_puts(&out, "---\n");
  mu_yaml_emit(dep, &out);
  fputs(mu_buf_str(&out), stdout);
  cJSON_Delete(svc);
  cJSON_Delete(dep);
  mu_buf_release(&out);
  return rc;
}
