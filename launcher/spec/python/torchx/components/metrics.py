"""torchx.components.metrics as muster's shim has it: tensorboard, built by muster from its
metrics.tensorboard component (keyword parameters as `muster run metrics.tensorboard --help`
lists them; TorchX's timeout, start_on_file and exit_on_file are not among them)."""
from typing import Any

from torchx import _muster, specs

__getattr__ = _muster.missing_attr("torchx.components.metrics")


def tensorboard(logdir: str, **kwargs: Any) -> specs.AppDef:
    """TensorBoard serving logdir (muster's metrics.tensorboard)."""
    return _muster.build("metrics.tensorboard", (), dict(logdir=logdir, **kwargs))
