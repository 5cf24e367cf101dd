"""torchx.components.utils as muster's shim has it: echo, sh, python and booth, each built by
muster from its YAML component of the same name (utils.echo, ...), keyword parameters as
`muster run utils.NAME --help` lists them (None means its default). TorchX's touch, binary and
copy are not provided.
"""
from typing import Any, Optional

from torchx import _muster, specs

__getattr__ = _muster.missing_attr("torchx.components.utils")


def echo(
    msg: Optional[str] = None, image: Optional[str] = None, num_replicas: Optional[int] = None
) -> specs.AppDef:
    """Echoes msg (muster's utils.echo)."""
    return _muster.build(
        "utils.echo", (), dict(msg=msg, image=image, num_replicas=num_replicas)
    )


def sh(*args: str, **kwargs: Any) -> specs.AppDef:
    """Runs args as a shell command line (muster's utils.sh)."""
    return _muster.build("utils.sh", args, kwargs)


def python(*args: str, **kwargs: Any) -> specs.AppDef:
    """Runs a Python script, -m module or -c command (muster's utils.python)."""
    return _muster.build("utils.python", args, kwargs)


def booth(x1: Any, x2: Any, **kwargs: Any) -> specs.AppDef:
    """The Booth function at (x1, x2), for HPO examples (muster's utils.booth)."""
    return _muster.build("utils.booth", (), dict(x1=x1, x2=x2, **kwargs))
