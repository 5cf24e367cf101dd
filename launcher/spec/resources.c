/* Named resources (TorchX's named_resources: "gpu.small", "aws_p4d.24xlarge", ...) and what each
 * AWS instance type has, which mu_instance_check holds a role's request to. One table: the
 * Python shim's torchx.specs.named_resources is filled from it too (component_py.c).
 */
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "muster/errno.h"

#include "job.h"
#include "neuron_types.h"
#include "suggest.h"

#define GIB 1024L
#define AWS_GIB 983L /* int(1024 * 0.96): TorchX's 4% memory tax on AWS instance types */

#define K8S_ITYPE "node.kubernetes.io/instance-type"
#define EFA "vpc.amazonaws.com/efa"
#define NEURON "aws.amazon.com/neuron" /* whole devices (Neuron 2.20 renamed neurondevice) */
#define NEURONCORE "aws.amazon.com/neuroncore" /* (logical) NeuronCores */

/* TorchX's named_resources_generic.py and named_resources_aws.py, plus aws_trn1n.32xlarge (the
 * trn1 tutorial's second type, which TorchX lacks) and trn2.48xlarge / trn2u.48xlarge. efa: EFA
 * interfaces; neuron: Neuron (Trainium or Inferentia2) devices, asked for as aws.amazon.com/neuron
 * (the device plugin's name since Neuron 2.20). What a Neuron type's devices hold (NeuronCores,
 * the LNC setting) is common/neuron_types.c's table, which agrees with this one on devices and
 * EFA (job__neuron_tables_agree). Sources: docs/components.md. MUST be sorted by name. */
static const struct named {
  const char *name;
  long cpu, gpu, memMB;
  const char *instance; /* node.kubernetes.io/instance-type, or NULL */
  long efa, neuron;
} named_resources[] = {
    {"aws_c5.18xlarge", 72, 0, 142 * AWS_GIB, "c5.18xlarge", 0, 0},
    {"aws_g4dn.12xlarge", 48, 4, 192 * AWS_GIB, "g4dn.12xlarge", 1, 0},
    {"aws_g4dn.16xlarge", 64, 1, 256 * AWS_GIB, "g4dn.16xlarge", 1, 0},
    {"aws_g4dn.2xlarge", 8, 1, 32 * AWS_GIB, "g4dn.2xlarge", 0, 0},
    {"aws_g4dn.4xlarge", 16, 1, 64 * AWS_GIB, "g4dn.4xlarge", 0, 0},
    {"aws_g4dn.8xlarge", 32, 1, 128 * AWS_GIB, "g4dn.8xlarge", 1, 0},
    {"aws_g4dn.metal", 96, 8, 384 * AWS_GIB, "g4dn.metal", 1, 0},
    {"aws_g4dn.xlarge", 4, 1, 16 * AWS_GIB, "g4dn.xlarge", 0, 0},
    {"aws_g5.12xlarge", 48, 4, 192 * AWS_GIB, "g5.12xlarge", 1, 0},
    {"aws_g5.16xlarge", 64, 1, 256 * AWS_GIB, "g5.16xlarge", 1, 0},
    {"aws_g5.24xlarge", 96, 4, 384 * AWS_GIB, "g5.24xlarge", 1, 0},
    {"aws_g5.2xlarge", 8, 1, 32 * AWS_GIB, "g5.2xlarge", 0, 0},
    {"aws_g5.48xlarge", 192, 8, 768 * AWS_GIB, "g5.48xlarge", 1, 0},
    {"aws_g5.4xlarge", 16, 1, 64 * AWS_GIB, "g5.4xlarge", 0, 0},
    {"aws_g5.8xlarge", 32, 1, 128 * AWS_GIB, "g5.8xlarge", 1, 0},
    {"aws_g5.xlarge", 4, 1, 16 * AWS_GIB, "g5.xlarge", 0, 0},
    {"aws_g6e.12xlarge", 48, 4, 384 * AWS_GIB, "g6e.12xlarge", 0, 0},
    {"aws_g6e.16xlarge", 64, 1, 512 * AWS_GIB, "g6e.16xlarge", 0, 0},
    {"aws_g6e.24xlarge", 96, 4, 768 * AWS_GIB, "g6e.24xlarge", 2, 0},
    {"aws_g6e.2xlarge", 8, 1, 64 * AWS_GIB, "g6e.2xlarge", 0, 0},
    {"aws_g6e.48xlarge", 192, 8, 1536 * AWS_GIB, "g6e.48xlarge", 4, 0},
    {"aws_g6e.4xlarge", 16, 1, 128 * AWS_GIB, "g6e.4xlarge", 0, 0},
    {"aws_g6e.8xlarge", 32, 1, 256 * AWS_GIB, "g6e.8xlarge", 0, 0},
    {"aws_g6e.xlarge", 4, 1, 32 * AWS_GIB, "g6e.xlarge", 0, 0},
    {"aws_inf2.24xlarge", 96, 0, 384 * AWS_GIB, "inf2.24xlarge", 0, 6},
    {"aws_inf2.48xlarge", 192, 0, 768 * AWS_GIB, "inf2.48xlarge", 0, 12},
    {"aws_inf2.8xlarge", 32, 0, 128 * AWS_GIB, "inf2.8xlarge", 0, 1},
    {"aws_inf2.xlarge", 4, 0, 16 * AWS_GIB, "inf2.xlarge", 0, 1},
    {"aws_m5.2xlarge", 8, 0, 32 * AWS_GIB, "m5.2xlarge", 0, 0},
    {"aws_p3.16xlarge", 64, 8, 488 * AWS_GIB, "p3.16xlarge", 0, 0},
    {"aws_p3.2xlarge", 8, 1, 61 * AWS_GIB, "p3.2xlarge", 0, 0},
    {"aws_p3.8xlarge", 32, 4, 244 * AWS_GIB, "p3.8xlarge", 0, 0},
    {"aws_p3dn.24xlarge", 96, 8, 768 * AWS_GIB, "p3dn.24xlarge", 1, 0},
    {"aws_p4d.24xlarge", 96, 8, 1152 * AWS_GIB, "p4d.24xlarge", 4, 0},
    {"aws_p4de.24xlarge", 96, 8, 1152 * AWS_GIB, "p4de.24xlarge", 4, 0},
    {"aws_p5.48xlarge", 192, 8, 2048 * AWS_GIB, "p5.48xlarge", 32, 0},
    {"aws_p5en.48xlarge", 192, 8, 2048 * AWS_GIB, "p5en.48xlarge", 16, 0},
    {"aws_t3.medium", 2, 0, 4 * AWS_GIB, "t3.medium", 0, 0},
    {"aws_trn1.2xlarge", 8, 0, 32 * AWS_GIB, "trn1.2xlarge", 0, 1},
    {"aws_trn1.32xlarge", 128, 0, 512 * AWS_GIB, "trn1.32xlarge", 8, 16},
    {"aws_trn1n.32xlarge", 128, 0, 512 * AWS_GIB, "trn1n.32xlarge", 16, 16},
    {"aws_trn2.48xlarge", 192, 0, 2048 * AWS_GIB, "trn2.48xlarge", 16, 16},
    {"aws_trn2u.48xlarge", 192, 0, 2048 * AWS_GIB, "trn2u.48xlarge", 16, 16},
    {"cpu.large", 2, 0, 8 * GIB, NULL, 0, 0},
    {"cpu.medium", 2, 0, 4 * GIB, NULL, 0, 0},
    {"cpu.micro", 1, 0, 1 * GIB, NULL, 0, 0},
    {"cpu.nano", 1, 0, 512, NULL, 0, 0},
    {"cpu.small", 1, 0, 2 * GIB, NULL, 0, 0},
    {"cpu.xlarge", 8, 0, 32 * GIB, NULL, 0, 0},
    {"gpu.large", 32, 4, 128 * GIB, NULL, 0, 0},
    {"gpu.medium", 16, 2, 64 * GIB, NULL, 0, 0},
    {"gpu.small", 8, 1, 32 * GIB, NULL, 0, 0},
    {"gpu.xlarge", 64, 8, 256 * GIB, NULL, 0, 0},
};

#define NNAMED (sizeof(named_resources) / sizeof(named_resources[0]))

long mu_instance_neuron_cores(const char *type, int lnc)
{
  const struct mu_neuron_type *t = mu_neuron_type_find(type);
  return t != NULL ? t->devices * mu_neuron_type_cores(t, lnc) : 0;
}

const char *mu_named_resource_at(size_t i)
{
  return i < NNAMED ? named_resources[i].name : NULL;
}

long mu_named_resource_gpus(const char *name)
{
  for (size_t i = 0; i < NNAMED; i++)
    if (strcmp(named_resources[i].name, name) == 0)
      return named_resources[i].gpu;
  return -1;
}

int mu_named_resource(const char *name, struct mu_resource *r, struct mu_buf *err)
{
  struct mu_suggest sg;
  mu_suggest_init(&sg, name);
  for (size_t i = 0; i < NNAMED; i++) {
    const struct named *n = &named_resources[i];
    if (strcmp(n->name, name) == 0) {
      r->cpu = n->cpu;
      r->gpu = n->gpu;
      r->memMB = n->memMB;
      if (n->instance != NULL)
        mu_kvlist_set(&r->capabilities, K8S_ITYPE, n->instance);
      if (n->efa > 0)
        mu_resource_add_device(r, EFA, n->efa);
      if (n->neuron > 0)
        mu_resource_add_device(r, NEURON, n->neuron);
      return 0;
    }
    mu_suggest_add(&sg, n->name);
  }
  const char *best = mu_suggest_best(&sg);
  if (best != NULL)
    mu_buf_printf(err, "unknown named resource '%s'; did you mean '%s'?", name, best);
  else
    mu_buf_printf(err,
                  "unknown named resource '%s'; known: gpu.small, cpu.large, aws_p4d.24xlarge, ...",
                  name);
  return MU_ENOENT;
}

/* ---------------------------------------------------------------------------------------------
 * What an instance type has
 */

static const struct named *instance_find(const char *type)
{
  for (size_t i = 0; type != NULL && i < NNAMED; i++)
    if (named_resources[i].instance != NULL && strcasecmp(named_resources[i].instance, type) == 0)
      return &named_resources[i];
  return NULL;
}

static long device_count(const struct mu_resource *r, const char *name)
{
  long n = 0;
  for (size_t i = 0; i < r->ndevices; i++)
    if (strcmp(r->devices[i].name, name) == 0)
      n += r->devices[i].count;
  return n;
}

/* One device kind against what the node has: "roles[i].resource.devices.NAME: ...". */
static int device_fits(size_t i, const struct mu_resource *r, const char *name, long have,
                       const char *what, const struct named *n, struct mu_buf *err)
{
  long want = device_count(r, name);
  if (want <= have)
    return 0;
  mu_buf_printf(err,
                "roles[%zu].resource.devices.%s: %ld asked for, but a %s node has %ld %s; ask for "
                "at most %ld, or pick an instance type that has them",
                i, name, want, n->instance, have, what, have);
  return MU_EINVAL;
}

int mu_instance_check(const struct mu_app *app, struct mu_buf *err)
{
  for (size_t i = 0; i < app->nroles; i++) {
    const struct mu_role *r = &app->roles[i];
    const struct named *n = instance_find(mu_kvlist_get(&r->resource.capabilities, K8S_ITYPE));
    if (n == NULL)
      continue;
    if (r->resource.gpu > n->gpu) {
      mu_buf_printf(err, "roles[%zu].resource.gpu: %ld asked for, but a %s node has %ld", i,
                    r->resource.gpu, n->instance, n->gpu);
      return MU_EINVAL;
    }
    if (device_fits(i, &r->resource, EFA, n->efa, "EFA adapters", n, err) != 0 ||
        device_fits(i, &r->resource, NEURON, n->neuron, "Neuron devices", n, err) != 0 ||
        device_fits(i, &r->resource, "aws.amazon.com/neurondevice", n->neuron, "Neuron devices", n,
                    err) != 0 ||
        device_fits(i, &r->resource, NEURONCORE, mu_instance_neuron_cores(n->instance, 1),
                    "NeuronCores (at LNC=1)", n, err) != 0)
      return MU_EINVAL;
    if (n->neuron > 0 && n->efa == 0 && r->num_replicas > 1) {
      mu_buf_printf(err,
                    "roles[%zu].num_replicas: %ld nodes of %s, which has no EFA adapter: Neuron "
                    "collectives between nodes need EFA, so a %s runs single-node jobs only "
                    "(aws-neuron-sdk#742); use 1 node, or trn1.32xlarge / trn1n.32xlarge nodes",
                    i, r->num_replicas, n->instance, n->instance);
      return MU_EINVAL;
    }
  }
  return 0;
}
