/* What each AWS Neuron instance type has (neuron_types.h). Sources (docs/components.md,
 * "Instance types"): aws-neuron-sdk trn1-arch.rst, trn2-arch.rst, inf2-arch.rst,
 * logical-neuroncore-config.rst, setup-trn1-multi-node-execution.rst ("trn1.32xlarge has 8 EFA
 * devices, trn1n.32xlarge has 16"), neuron-runtime/about/collectives.rst (a 200 Gbps EFA per
 * Trainium2 chip); inf2's EFA count is TorchX's named_resources_aws.py (none). */
#include <strings.h>

#include "neuron_types.h"

static const struct mu_neuron_type types[] = {
    {"inf2.xlarge", 1, 2, 0, 0},      {"inf2.8xlarge", 1, 2, 0, 0},
    {"inf2.24xlarge", 6, 2, 0, 0},    {"inf2.48xlarge", 12, 2, 0, 0},
    {"trn1.2xlarge", 1, 2, 0, 0},     {"trn1.32xlarge", 16, 2, 0, 8},
    {"trn1n.32xlarge", 16, 2, 0, 16}, {"trn2.48xlarge", 16, 8, 1, 16},
    {"trn2u.48xlarge", 16, 8, 1, 16},
};

#define NTYPES (sizeof(types) / sizeof(types[0]))

const struct mu_neuron_type *mu_neuron_type_find(const char *name)
{
  for (size_t i = 0; name != NULL && i < NTYPES; i++)
    if (strcasecmp(types[i].name, name) == 0)
      return &types[i];
  return NULL;
}

const struct mu_neuron_type *mu_neuron_type_at(size_t i)
{
  return i < NTYPES ? &types[i] : NULL;
}

long mu_neuron_type_cores(const struct mu_neuron_type *t, int lnc)
{
  return t->has_lnc && lnc != 1 ? t->phys_cores / 2 : t->phys_cores;
}
