"""torchx.components.dist as muster's shim has it: ddp builds the app of muster's dist.ddp
(components/dist.ddp.yaml: each node runs `muster agent` on the job's own musterd, or torchrun
with --launcher torchrun), with TorchX's parameter names; every other parameter of the YAML
component (nnodes, nproc_per_node, launcher, python, bf16, ...) is taken by keyword too, so the
function follows the YAML. spmd is TorchX's: -j N takes the GPU count of the named resource.
"""
import sys
from typing import Any, Dict, List, Optional

from torchx import _muster, specs
from torchx.components.structured_arg import StructuredJArgument

__getattr__ = _muster.missing_attr("torchx.components.dist")


def _note(msg: str) -> None:
    sys.stderr.write("muster: note: %s\n" % msg)


def ddp(
    *script_args: str,
    script: Optional[str] = None,
    m: Optional[str] = None,
    image: Optional[str] = None,
    name: Optional[str] = None,
    h: Optional[str] = None,
    cpu: Optional[int] = None,
    gpu: Optional[int] = None,
    memMB: Optional[int] = None,
    j: Optional[str] = None,
    env: Optional[Dict[str, str]] = None,
    max_retries: Optional[int] = None,
    rdzv_port: Optional[int] = None,
    rdzv_backend: Optional[str] = None,
    rdzv_conf: Optional[str] = None,
    mounts: Optional[List[str]] = None,
    debug: Optional[bool] = None,
    tee: Optional[int] = None,
    **more: Any,
) -> specs.AppDef:
    """Distributed data parallel: -j NNODESxNPROC (MIN:MAXxNPROC elastic) workers running script
    or -m module, as muster's dist.ddp (`muster run dist.ddp --help` lists every parameter; None
    means its default). TorchX's rdzv_port and tee have no effect (the job's musterd serves the
    rendezvous; muster agent always tees): given, they are noted on stderr. rdzv_conf is
    refused."""
    if rdzv_conf is not None:
        raise ValueError(
            "dist.ddp: rdzv_conf is not supported by muster: the job's own musterd runs the "
            "rendezvous (see 'muster run dist.ddp --help')"
        )
    if rdzv_port is not None:
        _note("dist.ddp: rdzv_port=%s has no effect: the job's musterd serves the rendezvous"
              % rdzv_port)
    if tee is not None and tee != 3:
        _note("dist.ddp: tee=%s has no effect: muster agent always tees both streams" % tee)
    kwargs: Dict[str, Any] = dict(
        script=script, m=m, image=image, name=name, h=h, cpu=cpu, gpu=gpu, memMB=memMB, j=j,
        env=env, max_retries=max_retries, rdzv_backend=rdzv_backend, mounts=mounts, debug=debug,
    )
    kwargs.update(more)
    return _muster.build("dist.ddp", script_args, kwargs)


def spmd(
    *args: str,
    script: Optional[str] = None,
    m: Optional[str] = None,
    image: Optional[str] = None,
    name: str = "/",
    h: str = "gpu.small",
    j: str = "1x1",
    env: Optional[Dict[str, str]] = None,
    max_retries: int = 0,
    mounts: Optional[List[str]] = None,
    debug: bool = False,
) -> specs.AppDef:
    """SPMD on named-resource hosts: -j NNODES takes NPROC from h's GPU count (-j NxP as
    given), then ddp with h."""
    jarg = StructuredJArgument.parse_from(h, j)
    return ddp(
        *args, script=script, m=m, image=image, name=name, h=h, j=str(jarg), env=env,
        max_retries=max_retries, mounts=mounts, debug=debug,
    )
