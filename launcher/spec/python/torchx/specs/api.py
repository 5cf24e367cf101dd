"""torchx.specs.api as muster's shim has it: the app model TorchX components build (AppDef, Role,
Resource, the mounts, RetryPolicy, macros) and the state enum, written from TorchX's documented
API (https://pytorch.org/torchx/latest/specs.html). muster reads the AppDef back as its job
spec; the scheduler-side classes of TorchX (runopts, AppDryRunInfo, ...) are not here.
"""
import copy
import string
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any, Dict, List, Optional, Union

from torchx import _muster

__getattr__ = _muster.missing_attr("torchx.specs.api")

# Sentinels, as TorchX: a resource that does not matter, an unset string field, "no value".
ALL = "all"
MISSING = "<MISSING>"
NONE = "<NONE>"

AppHandle = str


@dataclass
class Resource:
    """What one replica of a role needs: logical CPUs, GPUs, memory in MB, scheduler-interpreted
    capabilities (node.kubernetes.io/instance-type picks the node type) and named devices with
    their counts (vpc.amazonaws.com/efa, aws.amazon.com/neuron). Tags are not interpreted."""

    cpu: int
    gpu: int
    memMB: int
    capabilities: Dict[str, Any] = field(default_factory=dict)
    devices: Dict[str, int] = field(default_factory=dict)
    tags: Dict[str, object] = field(default_factory=dict)

    @staticmethod
    def copy(original: "Resource", **capabilities: Any) -> "Resource":
        """A copy of original with capabilities added (the given ones win)."""
        caps = dict(original.capabilities)
        caps.update(capabilities)
        return Resource(
            cpu=original.cpu,
            gpu=original.gpu,
            memMB=original.memMB,
            capabilities=caps,
            devices=dict(original.devices),
        )


# The resource of a role that does not say (cpu, gpu and memMB unset).
NULL_RESOURCE = Resource(cpu=-1, gpu=-1, memMB=-1)


def _null_resource() -> Resource:
    return NULL_RESOURCE


class macros:
    """Placeholders substituted per replica in Role.args, the values of Role.env and metadata
    strings: img_root, app_id, replica_id, rank0_env (the NAME of the variable holding the rank-0
    host), base_img_root (deprecated). muster adds rdzv_endpoint (HOST:PORT of the job's
    rendezvous: its own musterd, or -cfg rdzv=HOST:PORT), c10d_endpoint (HOST:PORT of that
    musterd's TCPStore listener: torchrun --rdzv_backend c10d) and num_replicas."""

    img_root = "${img_root}"
    base_img_root = "${base_img_root}"
    app_id = "${app_id}"
    replica_id = "${replica_id}"
    rank0_env = "${rank0_env}"
    rdzv_endpoint = "${rdzv_endpoint}"
    c10d_endpoint = "${c10d_endpoint}"
    num_replicas = "${num_replicas}"

    @dataclass
    class Values:
        img_root: str
        app_id: str
        replica_id: str
        rank0_env: str
        base_img_root: str = "DEPRECATED"

        def to_dict(self) -> Dict[str, Any]:
            return asdict(self)

        def substitute(self, arg: str) -> str:
            """arg with the macros replaced ($$ gives $; unknown ones stay)."""
            return string.Template(arg).safe_substitute(**self.to_dict())

        def apply(self, role: "Role") -> "Role":
            """A copy of role with the macros of its args, env values and metadata replaced."""
            role = copy.deepcopy(role)
            role.args = [self.substitute(a) for a in role.args]
            role.env = {k: self.substitute(v) for k, v in role.env.items()}
            role.metadata = self._nested(role.metadata)
            return role

        def _nested(self, v: Any) -> Any:
            if isinstance(v, str):
                return self.substitute(v)
            if isinstance(v, dict):
                return {k: self._nested(x) for k, x in v.items()}
            if isinstance(v, list):
                return [self._nested(x) for x in v]
            return v


class RetryPolicy(str, Enum):
    """What a failure restarts: REPLICA (the failed replica), APPLICATION (the whole app; every
    scheduler supports it) or ROLE (the role)."""

    REPLICA = "REPLICA"
    APPLICATION = "APPLICATION"
    ROLE = "ROLE"


class MountType(str, Enum):
    BIND = "bind"
    VOLUME = "volume"
    DEVICE = "device"


@dataclass
class BindMount:
    """A host path bind-mounted at dst_path."""

    src_path: str
    dst_path: str
    read_only: bool = False


@dataclass
class VolumeMount:
    """A named volume (a PersistentVolumeClaim on Kubernetes) mounted at dst_path."""

    src: str
    dst_path: str
    read_only: bool = False


@dataclass
class DeviceMount:
    """A host device mapped into the container with permissions (a subset of "rwm")."""

    src_path: str
    dst_path: str
    permissions: str = "rwm"


@dataclass
class ShmMount:
    """muster's own: shared memory at dst_path of size_mb MB (0: the scheduler's default).
    Builtins that ask for it (--mounts type=shm) come back with one; TorchX has no such type."""

    dst_path: str = "/dev/shm"
    size_mb: int = 0


@dataclass
class Role:
    """One kind of replica of an app: its image, the command (entrypoint and args), env, how
    many replicas (num_replicas; min_replicas for an elastic floor), retries and their policy,
    the resource of each replica, named ports, mounts and metadata ("<scheduler>.<key>").
    overrides (TorchX's lazy scheduler-request edits) cannot be honoured by muster: a role
    with any is refused when the app is read back."""

    name: str
    image: str
    min_replicas: Optional[int] = None
    base_image: Optional[str] = None
    entrypoint: str = MISSING
    args: List[str] = field(default_factory=list)
    env: Dict[str, str] = field(default_factory=dict)
    num_replicas: int = 1
    max_retries: int = 0
    retry_policy: RetryPolicy = RetryPolicy.APPLICATION
    resource: Resource = field(default_factory=_null_resource)
    port_map: Dict[str, int] = field(default_factory=dict)
    metadata: Dict[str, Any] = field(default_factory=dict)
    mounts: List[Union[BindMount, VolumeMount, DeviceMount]] = field(default_factory=list)
    overrides: Dict[str, Any] = field(default_factory=dict)

    def pre_proc(self, scheduler: str, dryrun_info: Any) -> Any:
        """TorchX's per-scheduler hook on the request: muster's schedulers do not call it."""
        return dryrun_info


@dataclass
class AppDef:
    """An application: a name and its roles, plus metadata."""

    name: str
    roles: List[Role] = field(default_factory=list)
    metadata: Dict[str, str] = field(default_factory=dict)


class AppState(int, Enum):
    """The states of an app (and of a replica), in TorchX's order."""

    UNSUBMITTED = 0
    SUBMITTED = 1
    PENDING = 2
    RUNNING = 3
    SUCCEEDED = 4
    FAILED = 5
    CANCELLED = 6
    UNKNOWN = 7

    def __str__(self) -> str:
        return self.name


ReplicaState = AppState

_TERMINAL = {AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED}


def is_terminal(state: AppState) -> bool:
    """Whether the app will not change again (SUCCEEDED, FAILED, CANCELLED)."""
    return state in _TERMINAL


def is_started(state: AppState) -> bool:
    """Whether the app has started: RUNNING, or already terminal."""
    return state == AppState.RUNNING or is_terminal(state)
