"""Op registry: name → op class. Param schemas, validation and docs all derive from each op's ``Params``."""
from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
import threading
from typing import Any

from pydantic import ValidationError

from .core import trust
from .core.names import closest
from .core.resources import DJ_RESOURCE_PARAMS, from_dj_params

_OPS: dict[str, type] = {}
_LOADED = False

# every module under these packages is imported (lazily, on first lookup) so that its @register runs
OP_PACKAGES = ["gristmill.ops"]


class OpError(ValueError):
    """A bad op name or param, with the YAML path of the problem and the closest valid name."""


def register(name: str):
    """Class decorator: make the op available by ``name`` in recipes and the CLI."""
    def deco(cls):
        if name in _OPS and _OPS[name] is not cls:
            raise ValueError(f"op {name!r} registered twice ({_OPS[name].__module__} and {cls.__module__})")
        cls.name = name
        _OPS[name] = cls
        return cls
    return deco


def _op_modules():
    """Every public (not ``_``-prefixed) module and subpackage under OP_PACKAGES, as pkgutil infos."""
    import pkgutil
    for pkg_name in OP_PACKAGES:
        pkg = importlib.import_module(pkg_name)
        for info in pkgutil.walk_packages(pkg.__path__, pkg_name + "."):
            if not info.name.rsplit(".", 1)[-1].startswith("_"):
                yield info


_LOAD_LOCK = threading.RLock()


def _load_all() -> None:
    """Import every op module once. Locked and marked done only at the end: a server warming the
    registry in a background thread while a request lists the ops must not see half of them."""
    global _LOADED
    if _LOADED:
        return
    with _LOAD_LOCK:
        if _LOADED:
            return
        for info in _op_modules():
            importlib.import_module(info.name)
        _LOADED = True


_REGISTER = re.compile(r'^@register\("([A-Za-z0-9_]+)"\)', re.M)


def _index() -> dict[str, str]:
    """op name → module, found by reading the op packages' sources for ``@register("name")`` lines, so a
    recipe imports only the modules of the ops it uses (importing all of them, with numba and the web
    extractors, costs ~0.5 s per process)."""
    global _INDEX
    if _INDEX is None:
        index = {}  # built whole, then published: another thread never sees a partial index
        for info in _op_modules():
            if info.ispkg:
                continue
            try:
                src = importlib.util.find_spec(info.name).loader.get_source(info.name) or ""
            except (ImportError, AttributeError, OSError):
                src = ""
            for name in _REGISTER.findall(src):
                index.setdefault(name, info.name)
        _INDEX = index
    return _INDEX


_INDEX: dict[str, str] | None = None


def all_ops() -> dict[str, type]:
    _load_all()
    return dict(sorted(_OPS.items()))


def _lookup(name: str) -> type | None:
    if name not in _OPS and name in _index():
        importlib.import_module(_index()[name])
    return _OPS.get(name)


def get_op_class(name: str, where: str = "") -> type:
    cls = _lookup(name)
    if cls is None:
        ops = all_ops()
        if name in ops:  # registered in a way the source index cannot see
            return ops[name]
        at = f"{where}: " if where else ""
        raise OpError(f"{at}unknown op {name!r}{closest(name, ops)} (`gristmill ops` lists them)")
    return cls


# Data-Juicer's per-op scheduling and resource settings (its base OP reads them from every op's kwargs):
# the resource ones (core.resources.DJ_RESOURCE_PARAMS: num_proc, num_gpus, accelerator, mem_required…)
# become the op's ``resources``; the rest an op that does not declare them accepts with no effect
# (op.ignored_params)
DJ_RUNTIME_PARAMS = frozenset({
    "accelerator", "num_proc", "cpu_required", "gpu_required", "mem_required", "num_cpus", "num_gpus", "memory",
    "runtime_env", "ray_execution_mode", "turbo", "skip_op_error", "auto_op_parallelism", "adaptive_batching",
    "batch_mode", "batch_size", "work_dir", "index_key"})


def create_op(name: str, params: dict | None, where: str = "", allow_scripts: bool = False):
    """Build an op from a recipe entry, turning pydantic errors into messages with YAML paths."""
    cls = get_op_class(name, where)
    params = dict(params or {})
    runtime = {k: params.pop(k) for k in list(params)
               if k in DJ_RUNTIME_PARAMS and k not in cls.Params.model_fields}
    ignored = tuple(sorted(k for k in runtime if k not in DJ_RESOURCE_PARAMS))
    if getattr(cls, "is_script", False) and not allow_scripts:
        raise OpError(f"{where}: op {name!r} runs user code; enable it with `allow_scripts: true` in the "
                      f"recipe (or --allow-scripts)")
    try:
        op = cls(**params)
    except trust.Refused as e:  # Op.__init__ checks the params against the trust policy: say where
        raise trust.Refused(f"{where}.{e}" if where else str(e)) from None
    except ValidationError as e:
        fields = cls.Params.model_fields
        msgs = []
        for err in e.errors():
            loc = ".".join(str(x) for x in err["loc"])
            path = f"{where}.{loc}" if loc else where
            if err["type"] == "extra_forbidden":
                key = str(err["loc"][0])
                msgs.append(f"{path}: unknown param {key!r} for {name}{closest(key, fields)}")
            else:
                msgs.append(f"{path}: {err['msg']} (got {err.get('input')!r})")
        raise OpError("; ".join(msgs)) from None
    except (TypeError, ValueError) as e:
        raise OpError(f"{where}: {e}") from None
    op.ignored_params = ignored
    try:
        res = from_dj_params(cls.resources, runtime, getattr(op.params, "device", None))
    except ValueError as e:
        raise OpError(f"{where}.{e}" if where else str(e)) from None
    if res is not cls.resources:
        op.resources = res
    return op


def describe(cls) -> dict[str, Any]:
    """Machine-readable description of an op: kind, doc and params (type, default, description)."""
    params = []
    for pname, f in cls.Params.model_fields.items():
        ann = f.annotation
        tname = getattr(ann, "__name__", None) or str(ann).replace("typing.", "")
        default = f.get_default(call_default_factory=True) if not f.is_required() else None
        params.append({"name": pname, "type": tname, "default": default, "required": f.is_required(),
                       "description": f.description or ""})
    return {"name": cls.name, "kind": cls.kind, "doc": inspect.cleandoc(cls.__doc__ or ""),
            "params": params, "schema": cls.Params.model_json_schema()}
