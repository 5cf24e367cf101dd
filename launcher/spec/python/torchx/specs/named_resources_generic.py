"""torchx.specs.named_resources_generic: gpu.small ... cpu.xlarge, from muster's table."""
from torchx import _muster

GiB = 1024

NAMED_RESOURCES = _muster.NamedTable(aws=False)

__getattr__ = _muster.missing_attr("torchx.specs.named_resources_generic")
