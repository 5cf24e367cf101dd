"""Runs a TorchX component file for muster (spec/component_py.c starts it with the system's
python3; this directory, with muster's torchx package, is first on sys.path).

One JSON request on stdin: {"op": "list" | "describe" | "call", "file", "function", "values",
"named_resources", "muster"}. One JSON answer on stdout: {"ok": true, ...} or
{"ok": false, "error": MESSAGE}. The component's own prints go to stderr, never into the answer.

- list: the functions the file defines, those annotated `-> AppDef` first.
- describe: the function's parameters as TorchX reads them (signature and Google-style
  docstring): name, type (str, int, float, bool, list, map), default, required, help, and
  the *args parameter as the remainder (script arguments).
- call: the function called with the given values (the others keep their defaults), its AppDef
  as muster's component tree (spec/component_app.c reads it into the job spec).
"""
import dataclasses
import inspect
import json
import os
import re
import sys
import traceback
import types
import typing

from torchx import _muster, specs

MODULE = "__torchx_component__"
PRIMITIVES = {str: "str", int: "int", float: "float", bool: "bool"}
ARTICLES = {str: "a str", int: "an int", float: "a float", bool: "a bool (True or False)"}
SECTIONS = ("Args", "Arguments", "Parameters", "Returns", "Return", "Raises", "Yields",
            "Example", "Examples", "Note", "Notes", "Warning", "Warnings", "See Also")


class ComponentError(Exception):
    """What is wrong with the component or its arguments, worded for the user."""


# ------------------------------------------------------------------------------------------------
# Loading the file


def where_in(path, tb):
    """PATH:LINE of the innermost frame of the traceback in the component's file, else PATH."""
    line = None
    for frame in traceback.extract_tb(tb):
        if os.path.abspath(frame.filename) == os.path.abspath(path):
            line = frame.lineno
    return "%s:%d" % (path, line) if line else path


def import_error(path, e):
    """An ImportError as the name that is missing and where to get it."""
    name = e.name or ""
    m = re.search(r"cannot import name '([^']+)'", str(e))
    if m and name:
        name = "%s.%s" % (name, m.group(1))
    where = where_in(path, e.__traceback__)
    if name.split(".")[0] == "torchx":
        return "%s: %s is not provided by %s (docs/components.md, 'Python components', lists " \
               "what is)" % (where, name, _muster.SHIM)
    return "%s: %s: the component imports %s, which %s cannot import; install it for that " \
           "Python, or set MUSTER_PYTHON to one that has it" % (where, e, name or "a module",
                                                                 sys.executable)


def raised(path, what, e):
    return "%s: %s raised %s: %s" % (where_in(path, e.__traceback__), what, type(e).__name__, e)


def load_file(path):
    """Runs the component file as TorchX does (its source executed with __file__ set) in a
    module of its own; its folder joins sys.path after the shim, for its own helpers."""
    try:
        with open(path) as f:
            source = f.read()
    except OSError as e:
        raise ComponentError("cannot read the component '%s': %s" % (path, e.strerror))
    sys.path.insert(1, os.path.dirname(os.path.abspath(path)))
    mod = types.ModuleType(MODULE)
    mod.__file__ = os.path.abspath(path)
    sys.modules[MODULE] = mod
    try:
        exec(compile(source, path, "exec"), mod.__dict__)
    except SyntaxError as e:
        raise ComponentError("%s:%s: %s" % (path, e.lineno, e.msg))
    except ImportError as e:
        raise ComponentError(import_error(path, e))
    except Exception as e:
        raise ComponentError(raised(path, "loading it", e))
    return mod


def functions(mod):
    """The file's own functions, those annotated -> AppDef first."""
    own = [(n, f) for n, f in vars(mod).items()
           if inspect.isfunction(f) and f.__module__ == MODULE and not n.startswith("_")]
    comp = [n for n, f in own if getattr(f, "__annotations__", {}).get("return") is not None]
    return comp + [n for n, _ in own if n not in comp]


def find_function(mod, path, name):
    fn = vars(mod).get(name)
    if not inspect.isfunction(fn):
        found = functions(mod)
        raise ComponentError(
            "%s has no function '%s'%s" % (path, name, "; it defines: " + ", ".join(found)
                                           if found else " (it defines no function)"))
    return fn


# ------------------------------------------------------------------------------------------------
# Parameters: signature, types and docstring


def parse_docstring(doc):
    """(description, {arg: help}) of a Google-style docstring."""
    doc = inspect.cleandoc(doc or "")
    desc, args, section, cur = [], {}, None, None
    for line in doc.splitlines():
        head = line.strip().rstrip(":")
        if line.strip().endswith(":") and head in SECTIONS and not line.startswith(" "):
            section, cur = head, None
            continue
        if section is None:
            desc.append(line)
        elif section in ("Args", "Arguments", "Parameters") and line.strip():
            m = re.match(r"^\s{0,8}(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$", line)
            if m and (cur is None or len(line) - len(line.lstrip()) <= args[cur][1]):
                cur = m.group(1).lstrip("*")
                args[cur] = [m.group(3).strip(), len(line) - len(line.lstrip())]
            elif cur is not None:
                args[cur][0] = (args[cur][0] + " " + line.strip()).strip()
    return "\n".join(desc).strip(), {k: v[0] for k, v in args.items()}


def unwrap_optional(t):
    """Optional[T], Union[T, None] and T | None as T."""
    origin = typing.get_origin(t)
    union_types = (typing.Union, getattr(types, "UnionType", typing.Union))
    if origin in union_types:
        rest = [a for a in typing.get_args(t) if a is not type(None)]
        if len(rest) == 1:
            return rest[0]
    return t


def classify(fname, name, ann):
    """(muster type, element types) of an annotation: str/int/float/bool, list (List[T]) or map
    (Dict[K, V]); anything else is refused as TorchX refuses it."""
    t = unwrap_optional(ann)
    if t in PRIMITIVES:
        return PRIMITIVES[t], ()
    origin, args = typing.get_origin(t), typing.get_args(t)
    if t is list or origin in (list, typing.List):
        elem = args[0] if args else str
        if elem in PRIMITIVES:
            return "list", (elem,)
    if t is dict or origin in (dict, typing.Dict):
        kv = args if args else (str, str)
        if all(a in PRIMITIVES for a in kv):
            return "map", kv
    raise ComponentError(
        "%s: argument '%s' has type %s, which a component cannot take: use str, int, float, "
        "bool, List[...] or Dict[..., ...] of those (Optional allowed), as TorchX"
        % (fname, name, getattr(t, "__name__", t)))


def default_text(v):
    if v is None or v is inspect.Parameter.empty:
        return None
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, (list, tuple)):
        return ",".join(str(x) for x in v)
    if isinstance(v, dict):
        return ",".join("%s=%s" % kv for kv in v.items())
    return str(v)


def dataclass_arg(sig, hints):
    """The dataclass of a component taking one dataclass (and maybe *args), else None."""
    ps = list(sig.parameters.values())
    if len(ps) not in (1, 2) or (len(ps) == 2 and ps[1].kind != ps[1].VAR_POSITIONAL):
        return None
    t = hints.get(ps[0].name)
    return t if isinstance(t, type) and dataclasses.is_dataclass(t) else None


def flat_params(fn, fname):
    """[(inspect.Parameter, annotation)] of fn, a one-dataclass signature flattened into its
    fields (keyword-only), plus that dataclass (or None)."""
    sig = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn)
    except Exception as e:
        raise ComponentError("%s: cannot read its annotations: %s" % (fname, e))
    if hints.get("return") is not specs.AppDef:
        raise ComponentError("%s: a component must be annotated '-> AppDef' (torchx.specs.AppDef), "
                             "as TorchX requires" % fname)
    dc = dataclass_arg(sig, hints)
    out = []
    for p in sig.parameters.values():
        if dc is not None and p.kind != p.VAR_POSITIONAL:
            fhints = typing.get_type_hints(dc)
            for f in dataclasses.fields(dc):
                d = f.default if f.default is not dataclasses.MISSING else p.empty
                out.append((inspect.Parameter(f.name, p.KEYWORD_ONLY, default=d), fhints[f.name]))
            continue
        if p.kind == p.VAR_KEYWORD:
            raise ComponentError("%s: **%s: a component cannot take **kwargs (TorchX neither)"
                                 % (fname, p.name))
        if p.name not in hints:
            raise ComponentError("%s: argument '%s' has no type annotation: TorchX components "
                                 "annotate every argument" % (fname, p.name))
        out.append((p, hints[p.name]))
    return out, dc


def describe(fn, fname):
    desc, helps = parse_docstring(fn.__doc__)
    params = []
    for p, ann in flat_params(fn, fname)[0]:
        kind, _ = classify(fname, p.name, ann)
        rem = p.kind == p.VAR_POSITIONAL
        params.append({
            "name": p.name, "type": "list" if rem else kind, "remainder": rem,
            "default": default_text(p.default), "help": helps.get(p.name, ""),
            "required": p.default is p.empty and not rem,
            "short": p.name if len(p.name) == 1 else None,
        })
    return {"description": desc or "%s (no docstring)" % fn.__name__, "params": params}


# ------------------------------------------------------------------------------------------------
# Calling it


def decode_one(fname, name, t, v):
    try:
        if t is bool and isinstance(v, str):
            return v.lower() in ("true", "yes", "1", "on")
        return t(v)
    except (TypeError, ValueError):
        raise ComponentError("%s: argument '--%s': '%s' is not %s" % (fname, name, v,
                                                                     ARTICLES[t]))


def decode(fname, name, ann, v):
    kind, elems = classify(fname, name, ann)
    if kind == "list":
        return [decode_one(fname, name, elems[0], x) for x in v]
    if kind == "map":
        return {decode_one(fname, name, elems[0], k): decode_one(fname, name, elems[1], x)
                for k, x in v.items()}
    return decode_one(fname, name, unwrap_optional(ann), v)


def call(fn, fname, path, values):
    params, dc = flat_params(fn, fname)
    pos, kw, var = [], {}, []
    for p, ann in params:
        given = p.name in values
        if p.kind == p.VAR_POSITIONAL:
            var = [decode(fname, p.name, ann, x) for x in values[p.name]] if given else []
            continue
        v = decode(fname, p.name, ann, values[p.name]) if given else p.default
        if p.kind == p.KEYWORD_ONLY:
            if given:
                kw[p.name] = v
        elif v is p.empty:
            raise ComponentError("%s: missing required argument --%s" % (fname, p.name))
        else:
            pos.append(v)
    try:
        app = fn(dc(**kw), *var) if dc is not None else fn(*pos, *var, **kw)
    except ComponentError:
        raise
    except Exception as e:
        raise ComponentError(raised(path, fn.__name__, e))
    if not isinstance(app, specs.AppDef):
        raise ComponentError("%s returned %s, not a torchx.specs.AppDef"
                             % (fname, type(app).__name__))
    return app


# ------------------------------------------------------------------------------------------------
# The AppDef as muster's component tree


def text(v):
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    return json.dumps(v)


def str_map(d):
    return {str(k): text(v) for k, v in (d or {}).items()}


def mount_tree(where, m):
    api = specs.api
    if isinstance(m, api.BindMount):
        return {"type": "bind", "src": m.src_path, "dst": m.dst_path, "readonly": m.read_only}
    if isinstance(m, api.VolumeMount):
        return {"type": "volume", "src": m.src, "dst": m.dst_path, "readonly": m.read_only}
    if isinstance(m, api.DeviceMount):
        return {"type": "device", "src": m.src_path, "dst": m.dst_path, "perm": m.permissions}
    if isinstance(m, api.ShmMount):
        return {"type": "shm", "dst": m.dst_path, "size": str(m.size_mb) if m.size_mb else None}
    raise ComponentError("%s.mounts: %r is no BindMount, VolumeMount or DeviceMount" % (where, m))


def resource_tree(r):
    """cpu, gpu and memMB as given; a negative one (NULL_RESOURCE's -1) is unset, and so is a
    memMB of 0 (TorchX asks for no memory then; muster's unset means the same)."""
    if r is None:
        return {}
    t = {k: int(getattr(r, k)) for k in ("cpu", "gpu", "memMB")
         if getattr(r, k) is not None and getattr(r, k) >= (1 if k == "memMB" else 0)}
    t["devices"] = {str(k): int(v) for k, v in (r.devices or {}).items()}
    t["capabilities"] = str_map(r.capabilities)
    return t


def role_tree(label, i, r):
    where = "%s: roles[%d] (%s)" % (label, i, r.name)
    if r.overrides:
        raise ComponentError("%s.overrides: %s are TorchX scheduler-request edits, which muster "
                             "cannot apply; set what you need in the role instead"
                             % (where, sorted(r.overrides)))
    if r.base_image:
        raise ComponentError("%s.base_image: deprecated in TorchX and not supported; use image"
                             % where)
    if not r.entrypoint or r.entrypoint == specs.MISSING:
        raise ComponentError("%s.entrypoint: not set (the program the role runs)" % where)
    policy = r.retry_policy
    t = {
        "name": str(r.name),
        "image": "" if r.image in (None, specs.MISSING) else str(r.image),
        "entrypoint": str(r.entrypoint),
        "args": [text(a) for a in r.args],
        "env": str_map(r.env),
        "num_replicas": int(r.num_replicas),
        "max_retries": int(r.max_retries),
        "retry_policy": policy.value if isinstance(policy, specs.RetryPolicy) else str(policy),
        "resource": resource_tree(r.resource),
        "port_map": {str(k): int(v) for k, v in (r.port_map or {}).items()},
        "metadata": str_map(r.metadata),
        "mounts": [mount_tree(where, m) for m in r.mounts],
    }
    if r.min_replicas is not None:
        t["min_replicas"] = int(r.min_replicas)
    return t


def app_tree(label, app):
    return {"name": str(app.name),
            "roles": [role_tree(label, i, r) for i, r in enumerate(app.roles)],
            "metadata": str_map(app.metadata)}


# ------------------------------------------------------------------------------------------------
# The request


def handle(req):
    _muster.NAMED = req.get("named_resources") or {}
    _muster.MUSTER = req.get("muster") or "muster"
    path = req["file"]
    mod = load_file(path)
    if req["op"] == "list":
        return {"ok": True, "functions": functions(mod)}
    fn = find_function(mod, path, req["function"])
    label = req.get("label") or "%s:%s" % (path, req["function"])
    if req["op"] == "describe":
        return dict(ok=True, **describe(fn, label))
    app = call(fn, label, path, req.get("values") or {})
    return {"ok": True, "app": app_tree(label, app)}


def main():
    answer_fd = os.dup(1)
    os.dup2(2, 1)  # the component's prints go to stderr: stdout carries the answer only
    try:
        answer = handle(json.load(sys.stdin))
    except ComponentError as e:
        answer = {"ok": False, "error": str(e)}
    except Exception:
        answer = {"ok": False, "error": "muster's TorchX runner failed (a bug; please report it): "
                                        + traceback.format_exc()}
    sys.stdout.flush()
    with os.fdopen(answer_fd, "w") as out:
        json.dump(answer, out)


if __name__ == "__main__":
    main()
