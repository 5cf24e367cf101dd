"""torchx.specs.builders as muster's shim has it: parse_mounts (the --mounts list form) and
make_app_handle. materialize_appdef and the argument parser are muster's own (the runner and
spec/component_args.c), not Python functions here.
"""
import os
from typing import List, Union

from torchx import _muster
from torchx.specs.api import BindMount, DeviceMount, MountType, VolumeMount

__getattr__ = _muster.missing_attr("torchx.specs.builders")

# Option names and their aliases, as TorchX spells them.
_KEYS = {
    "type": "type",
    "src": "src",
    "source": "src",
    "dst": "dst",
    "destination": "dst",
    "target": "dst",
    "readonly": "readonly",
    "read_only": "readonly",
    "perm": "perm",
}


def _group(opts: List[str]) -> List[dict]:
    """The options cut into one dict per mount: each starts at type=."""
    mounts: List[dict] = []
    for opt in opts:
        key, _, val = opt.partition("=")
        if key not in _KEYS:
            raise KeyError("unknown mount option %s, must be one of %s" % (key, list(_KEYS)))
        key = _KEYS[key]
        if key == "type":
            mounts.append({})
        elif not mounts:
            raise KeyError("type must be specified first")
        mounts[-1][key] = val
    return mounts


def _need(m: dict, key: str, typ: str) -> str:
    if key not in m:
        raise KeyError("a %s mount needs %s=" % (typ, key))
    return m[key]


def parse_mounts(opts: List[str]) -> List[Union[BindMount, VolumeMount, DeviceMount]]:
    """Mounts from TorchX's list form, each starting with type=:
    type=bind,src=HOST,dst=PATH[,readonly]; type=volume,src=NAME,dst=PATH[,readonly];
    type=device,src=/dev/X[,dst=PATH][,perm=rwm]. A bind src starting with ~ is expanded."""
    out: List[Union[BindMount, VolumeMount, DeviceMount]] = []
    for m in _group(opts):
        typ = m.get("type")
        if typ == MountType.BIND:
            src = _need(m, "src", typ)
            if src.startswith("~"):
                src = os.path.expanduser(src)
            out.append(BindMount(src, _need(m, "dst", typ), "readonly" in m))
        elif typ == MountType.VOLUME:
            out.append(VolumeMount(_need(m, "src", typ), _need(m, "dst", typ), "readonly" in m))
        elif typ == MountType.DEVICE:
            src = _need(m, "src", typ)
            perm = m.get("perm", "rwm")
            bad = [c for c in perm if c not in "rwm"]
            if bad:
                raise ValueError("%s is not a valid permission flag: use r, w and m" % bad[0])
            out.append(DeviceMount(src, m.get("dst", src), perm))
        else:
            raise ValueError(
                "invalid mount type %r, must be one of %s" % (typ, [t.value for t in MountType])
            )
    return out


def make_app_handle(scheduler_backend: str, session_name: str, app_id: str) -> str:
    """SCHEDULER://SESSION/APP_ID."""
    return "%s://%s/%s" % (scheduler_backend, session_name, app_id)
