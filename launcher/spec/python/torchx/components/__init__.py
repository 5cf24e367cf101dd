"""torchx.components as muster's shim has it: dist (ddp, spmd), utils (echo, sh, python, booth),
metrics (tensorboard) and structured_arg. Each builtin is built by muster from its YAML
component of the same name, so it makes the app `muster run NAME` makes.
"""
from torchx import _muster

__getattr__ = _muster.missing_attr("torchx.components")
