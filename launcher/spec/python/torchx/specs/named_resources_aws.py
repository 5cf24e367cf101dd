"""torchx.specs.named_resources_aws: aws_<instance type> named resources, from muster's table
(TorchX's list plus aws_trn1n.32xlarge, aws_trn2.48xlarge and aws_trn2u.48xlarge): each sets
the node.kubernetes.io/instance-type capability and the EFA and Neuron device counts, with TorchX's 4% memory tax. The functions
(aws_p4d_24xlarge() for "aws_p4d.24xlarge") are made from the table.
"""
from typing import Optional

from torchx import _muster
from torchx.specs.api import Resource

EFA_DEVICE = "vpc.amazonaws.com/efa"
NEURON_DEVICE = "aws.amazon.com/neuron"  # the device plugin's name since Neuron 2.20
K8S_ITYPE = "node.kubernetes.io/instance-type"
MEM_TAX = 0.96
GiB = int(1024 * MEM_TAX)

NAMED_RESOURCES = _muster.NamedTable(aws=True)


def instance_type_from_resource(resource: Resource) -> Optional[str]:
    """The instance type a resource asks for (its node.kubernetes.io/instance-type), or None."""
    return resource.capabilities.get(K8S_ITYPE)


def __getattr__(name: str):
    for key in NAMED_RESOURCES:
        if key.replace(".", "_") == name:
            return NAMED_RESOURCES[key]
    raise _muster.not_provided("torchx.specs.named_resources_aws", name)
