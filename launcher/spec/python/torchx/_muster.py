"""muster's side of the TorchX shim (not a TorchX module).

The runner (../_muster_torchx.py) fills NAMED (the named resources, from muster's own table) and
MUSTER (the muster program) before it runs a component. Builtin components
(torchx.components.*) are built by muster itself from its YAML components: build() runs
`muster builtins --build NAME ARGS` and turns the job spec JSON it prints into an AppDef, so the
Python names build exactly the app that `muster run NAME` builds.
"""
import collections.abc
import json
import subprocess

# name -> {"cpu", "gpu", "memMB", "capabilities", "devices"}: muster's named resources.
NAMED = {}
# The muster program that runs this component (its builtins build torchx.components.*).
MUSTER = "muster"

SHIM = "muster's TorchX shim"


def not_provided(module, name):
    """The error for a name this shim does not have (an AttributeError, as Python's)."""
    return AttributeError(
        "%s.%s is not provided by %s (docs/components.md, 'Python components', lists what is)"
        % (module, name, SHIM)
    )


def missing_attr(module):
    """A module-level __getattr__ that names what is missing."""

    def __getattr__(name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        raise not_provided(module, name)

    return __getattr__


def named_resource(name):
    """A new Resource of muster's named resource `name` (KeyError when unknown)."""
    from torchx.specs.api import Resource

    r = NAMED[name]
    return Resource(
        cpu=r["cpu"],
        gpu=r["gpu"],
        memMB=r["memMB"],
        capabilities=dict(r.get("capabilities", {})),
        devices=dict(r.get("devices", {})),
    )


class NamedTable(collections.abc.Mapping):
    """The aws_* (aws=True) or the generic named resources: name -> a factory of Resources,
    as TorchX's NAMED_RESOURCES. Read from NAMED when used, so the runner may fill it late."""

    def __init__(self, aws):
        self._aws = aws

    def _names(self):
        return sorted(n for n in NAMED if n.startswith("aws_") == self._aws)

    def __getitem__(self, name):
        if name not in NAMED or name.startswith("aws_") != self._aws:
            raise KeyError(name)
        return lambda: named_resource(name)

    def __iter__(self):
        return iter(self._names())

    def __len__(self):
        return len(self._names())


def _arg_text(value):
    """A Python value as muster's command line spells it (TorchX's spellings)."""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, (list, tuple)):
        return ",".join(_arg_text(v) for v in value)
    if isinstance(value, dict):
        return ",".join("%s=%s" % (k, _quote(_arg_text(v))) for k, v in value.items())
    return str(value)


def _quote(text):
    """Quotes a map value that holds a separator (muster's -cfg quoting)."""
    if not any(c in text for c in ",;=") or ('"' in text and "'" in text):
        return text
    q = "'" if '"' in text else '"'
    return q + text + q


def build(component, script_args, kwargs):
    """Builds muster's builtin `component` with TorchX-style keyword arguments (None = not
    given) and positional script arguments. Returns: an AppDef. Raises: ValueError with
    muster's message when muster refuses the arguments."""
    argv = [MUSTER, "builtins", "--build", component]
    for key, value in kwargs.items():
        if value is not None:
            argv.append("--%s=%s" % (key, _arg_text(value)))
    if script_args:
        argv.append("--")
        argv.extend(str(a) for a in script_args)
    try:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except OSError as e:
        raise RuntimeError("cannot run muster (%s) to build %s: %s" % (MUSTER, component, e))
    if p.returncode != 0:
        msg = p.stderr.strip().replace("muster: error: ", "")
        raise ValueError(msg or "muster could not build %s (exit %d)" % (component, p.returncode))
    return app_from_spec(json.loads(p.stdout))


def app_from_spec(js):
    """muster's job spec JSON (mu_app_to_json) as an AppDef."""
    from torchx import specs

    roles = [_role_from_spec(r) for r in js.get("roles", [])]
    meta = dict(js.get("metadata", {}))
    return specs.AppDef(name=js.get("name", ""), roles=roles, metadata=meta)


def _mount_from_spec(m):
    from torchx import specs

    t = m.get("type")
    dst = m.get("dst_path", "")
    if t == "bind":
        return specs.BindMount(m.get("src_path", ""), dst, m.get("read_only", False))
    if t == "volume":
        return specs.VolumeMount(m.get("src", ""), dst, m.get("read_only", False))
    if t == "device":
        return specs.DeviceMount(m.get("src_path", ""), dst, m.get("permissions", "rwm"))
    return specs.api.ShmMount(m.get("dst_path", "/dev/shm"), int(m.get("size_mb", 0)))


def _role_from_spec(r):
    from torchx import specs

    res = r.get("resource", {})
    resource = specs.Resource(
        cpu=res.get("cpu", -1),
        gpu=res.get("gpu", -1),
        memMB=res.get("memMB", -1),
        capabilities=dict(res.get("capabilities", {})),
        devices=dict(res.get("devices", {})),
    )
    return specs.Role(
        name=r.get("name", ""),
        image=r.get("image", ""),
        min_replicas=r.get("min_replicas"),
        entrypoint=r.get("entrypoint", ""),
        args=list(r.get("args", [])),
        env=dict(r.get("env", {})),
        num_replicas=r.get("num_replicas", 1),
        max_retries=r.get("max_retries", 0),
        retry_policy=specs.RetryPolicy(r.get("retry_policy", "APPLICATION")),
        resource=resource,
        port_map=dict(r.get("port_map", {})),
        metadata=dict(r.get("metadata", {})),
        mounts=[_mount_from_spec(m) for m in r.get("mounts", [])],
    )
