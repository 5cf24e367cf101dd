"""torchx.specs as muster's shim has it: the app model (AppDef, Role, Resource, macros,
RetryPolicy, the mounts and parse_mounts), named resources (named_resources["gpu.small"],
get_named_resources, resource()) and the state enum. Written from TorchX's documented API; what
it lacks fails with an error naming it (docs/components.md, "Python components").
"""
import difflib
from typing import Callable, Dict, Optional

from torchx import _muster
from torchx.specs.api import (
    ALL,
    MISSING,
    NONE,
    NULL_RESOURCE,
    AppDef,
    AppHandle,
    AppState,
    BindMount,
    DeviceMount,
    MountType,
    ReplicaState,
    Resource,
    RetryPolicy,
    Role,
    VolumeMount,
    is_started,
    is_terminal,
    macros,
)
from torchx.specs.builders import make_app_handle, parse_mounts
from torchx.specs.named_resources_aws import NAMED_RESOURCES as AWS_NAMED_RESOURCES
from torchx.specs.named_resources_generic import NAMED_RESOURCES as GENERIC_NAMED_RESOURCES

__getattr__ = _muster.missing_attr("torchx.specs")

GiB = 1024

ResourceFactory = Callable[[], Resource]


class _NamedResources:
    """named_resources[NAME]: a new Resource of a named resource ("gpu.small",
    "aws_p4d.24xlarge"; "NULL" and "MISSING" are NULL_RESOURCE). An unknown name is a KeyError
    that names the closest one."""

    def _factories(self) -> Dict[str, ResourceFactory]:
        table: Dict[str, ResourceFactory] = {}
        table.update(GENERIC_NAMED_RESOURCES)
        table.update(AWS_NAMED_RESOURCES)
        table["NULL"] = lambda: NULL_RESOURCE
        table["MISSING"] = lambda: NULL_RESOURCE
        return table

    def __getitem__(self, key: str) -> Resource:
        table = self._factories()
        if key in table:
            return table[key]()
        close = difflib.get_close_matches(key, list(table), n=1)
        hint = "Did you mean `%s`?" % close[0] if close else "Known: %s" % sorted(table)
        raise KeyError("No named resource found for `%s`. %s" % (key, hint))

    def __contains__(self, key: str) -> bool:
        return key in self._factories()

    def __iter__(self):
        raise NotImplementedError("named resources cannot be iterated")


named_resources = _NamedResources()


def get_named_resources(res: str) -> Resource:
    """The Resource of the named resource `res` (KeyError naming the closest when unknown)."""
    return named_resources[res]


def resource(
    cpu: Optional[int] = None,
    gpu: Optional[int] = None,
    memMB: Optional[int] = None,
    h: Optional[str] = None,
) -> Resource:
    """A Resource: the named resource h when given (it wins), else cpu, gpu and memMB, each
    falling back (when None or 0) to 2 CPUs, 0 GPUs and 1024 MB."""
    if h:
        return get_named_resources(h)
    return Resource(cpu=cpu or 2, gpu=gpu or 0, memMB=memMB or 1024)


__all__ = [
    "ALL",
    "AWS_NAMED_RESOURCES",
    "AppDef",
    "AppHandle",
    "AppState",
    "BindMount",
    "DeviceMount",
    "GENERIC_NAMED_RESOURCES",
    "GiB",
    "MISSING",
    "MountType",
    "NONE",
    "NULL_RESOURCE",
    "ReplicaState",
    "Resource",
    "ResourceFactory",
    "RetryPolicy",
    "Role",
    "VolumeMount",
    "get_named_resources",
    "is_started",
    "is_terminal",
    "macros",
    "make_app_handle",
    "named_resources",
    "parse_mounts",
    "resource",
]
