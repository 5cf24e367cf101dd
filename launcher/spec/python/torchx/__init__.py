"""muster's TorchX shim: the names TorchX components import, so that a TorchX component file
(`muster run FILE.py:FUNCTION`) runs unchanged under muster. Written from TorchX's documented
API; it is not TorchX. A name it does not have fails with an error naming it. What it provides:
docs/components.md, "Python components".
"""
from torchx import _muster
from torchx.version import TORCHX_IMAGE as IMAGE, __version__

__getattr__ = _muster.missing_attr("torchx")
