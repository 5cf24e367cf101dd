"""torchx.version: the TorchX release whose API the shim follows, and its default image."""
from torchx import _muster

__version__ = "0.7.0"
TORCHX_IMAGE = "ghcr.io/pytorch/torchx:0.7.0"

__getattr__ = _muster.missing_attr("torchx.version")
