/* What each AWS Neuron instance type has: its Neuron devices, NeuronCores and EFA interfaces.
 * One table for the launcher's named resources and instance checks (launcher/spec/resources.c)
 * and the agent's Neuron health check (launcher/agent/agent_neuron.c); its sources are in
 * docs/components.md, "Instance types". Library code: never prints.
 */
#ifndef MU_NEURON_TYPES_H
#define MU_NEURON_TYPES_H

#include <stddef.h>

struct mu_neuron_type {
  const char *name; /* the EC2 instance type: "trn2.48xlarge" */
  long devices;     /* Neuron devices (Kubernetes: aws.amazon.com/neuron) */
  long phys_cores;  /* physical NeuronCores per device */
  int has_lnc;      /* the logical NeuronCore setting applies (Trainium2): at LNC=2, two
                     * physical cores make one logical core */
  long efa;         /* EFA interfaces (vpc.amazonaws.com/efa); 0: single-node jobs only */
};

/* Returns: the row of instance type `name` (case-blind), or NULL when it is not a Neuron type
 * (or NULL). Ownership: a static row. */
const struct mu_neuron_type *mu_neuron_type_find(const char *name);

/* Returns: the i-th row, or NULL past the last (for listing the known types). */
const struct mu_neuron_type *mu_neuron_type_at(size_t i);

/* Returns: the NeuronCores one device shows at logical NeuronCore setting `lnc` (1 or 2; any
 * other value counts as the default, 2): the physical cores, halved at LNC=2 on a type with
 * the setting (a Trainium2 shows 4 at LNC=2, 8 at LNC=1). */
long mu_neuron_type_cores(const struct mu_neuron_type *t, int lnc);

#endif
