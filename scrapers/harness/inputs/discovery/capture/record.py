"""Child side of a capture run: a recorder put in place of the entry, and the JSON record of each argument
it is called with. Runs only in the sandboxed rank processes (scrapers/harness/inputs/discovery/capture/run.py)."""

from __future__ import annotations

import hashlib
import types
from typing import Any

import torch
import torch.distributed as dist

from mgbench.scrapers.harness.make.render import _root_ok

MAX_ITEMS = 64  # elements of a list argument recorded
KEPT_IMPORTS = ("numpy",)  # third-party imports a capture module keeps (tests build inputs with numpy)
MAX_DIGESTED = 1 << 16  # elements of a tensor hashed to tell whether every rank got the same values


class Captured(BaseException):
    """Raised by the recorder once the entry's arguments are recorded: the caller stops there. A
    BaseException, so that the test's own `except Exception` does not swallow it."""


def _tensor(v: torch.Tensor) -> dict[str, Any]:
    rec: dict[str, Any] = {"kind": "tensor", "shape": list(v.shape), "dtype": str(v.dtype).removeprefix("torch.")}
    if not (v.dtype.is_floating_point or v.dtype.is_complex) and v.numel():
        rec["min"], rec["max"] = int(v.min()), int(v.max())  # the range integer values are drawn from
    rec["digest"] = _digest(v)  # equal on every rank: the caller passes one replicated tensor (shared labels)
    return rec


def _digest(v: torch.Tensor) -> str:
    """A short hash of the values (of at most MAX_DIGESTED elements, evenly strided)."""
    flat = v.detach().reshape(-1)
    flat = flat[:: max(1, flat.numel() // MAX_DIGESTED)].contiguous().cpu()
    raw = flat.view(torch.uint8) if flat.dtype != torch.bool and flat.numel() else flat.to(torch.uint8)
    return hashlib.sha1(raw.numpy().tobytes()).hexdigest()[:16]


def describe(v: Any, depth: int = 0) -> dict[str, Any]:
    """What an argument is, as JSON: a tensor's shape and dtype (integer tensors: their range), a number,
    a flag, a dtype, a list of integers (split sizes) or tensors, else only its kind."""
    if isinstance(v, torch.Tensor):
        return _tensor(v)
    if isinstance(v, bool):
        return {"kind": "bool", "value": v}
    if isinstance(v, int):
        return {"kind": "int", "value": v}
    if isinstance(v, float):
        return {"kind": "float", "value": v}
    if v is None:
        return {"kind": "none"}
    if isinstance(v, str):
        return {"kind": "str", "value": v[:200]}
    if isinstance(v, torch.dtype):
        return {"kind": "dtype", "value": str(v).removeprefix("torch.")}
    if isinstance(v, (list, tuple)) and depth == 0:
        items = [describe(x, 1) for x in list(v)[:MAX_ITEMS]]
        if items and all(i["kind"] == "int" for i in items) and len(v) <= MAX_ITEMS:
            return {"kind": "ints", "value": [i["value"] for i in items]}
        return {"kind": "seq", "items": items, "len": len(v)}
    if isinstance(v, dist.ProcessGroup):
        return {"kind": "group"}
    if isinstance(v, torch.nn.Module):
        return {"kind": "module", "type": type(v).__name__}
    if callable(v):
        return {"kind": "callable", "name": getattr(v, "__name__", type(v).__name__)}
    return {"kind": "object", "type": type(v).__name__}


def _bind(params: list[str], args: tuple, kwargs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    got = {name: describe(v) for name, v in zip(params, args)}
    got.update({k: describe(v) for k, v in kwargs.items() if k in params})
    return got


def install(
    namespace: dict[str, Any], entry: str, kind: str, params: list[str], got: dict[str, Any], module: str = ""
) -> int:
    """Put a recorder in place of the entry (`f`, `Cls.method`, an autograd.Function `Cls`) wherever the
    caller's module binds it: a global, a class attribute, an attribute of a module object it imported
    (the entry's `module`, dotted, when the import of that module is a placeholder).
    The recorder stores the bound arguments in `got["args"]` and raises Captured. Returns the places."""
    name = entry.rpartition(".")[2]

    def record(*args: Any, **kwargs: Any) -> None:
        got["args"] = _bind(params, args, kwargs)
        raise Captured()

    def record_method(self: Any, *args: Any, **kwargs: Any) -> None:
        record(*args, **kwargs)

    places = 0
    if kind == "autograd_function" or kind == "method":
        cls_name = entry.split(".")[0]
        if _placeholder(namespace.get(cls_name)):
            # the class could not be inlined (an import the harness stands in for): a recording stand-in
            # the test can still build (`Linear1D_Row(8, 4)`) and call
            namespace[cls_name] = type(cls_name, (_Recordable,), {})
        for cls in [namespace.get(cls_name)] + [_attr(m, cls_name) for m in _modules(namespace, module)]:
            if isinstance(cls, type) and _repository_code(cls):
                if kind == "autograd_function":
                    cls.apply = staticmethod(record)  # type: ignore[attr-defined]
                else:
                    setattr(cls, name, record_method)
                places += 1
        return places
    here = namespace.get(name)
    if callable(here) and (_placeholder(here) or _repository_code(here)):
        namespace[name] = record
        places += 1
    for key, v in list(namespace.items()):
        if _placeholder(v) and _same_module(getattr(v, "_mg_name", ""), module):
            namespace[key] = _ModuleProxy(v, name, record)  # `mappings.reduce_scatter(...)`: a module import
            places += 1
    for m in _modules(namespace, module):
        if callable(_attr(m, name)):
            setattr(m, name, record)
            places += 1
    return places


def _same_module(imported: str, module: str) -> bool:
    """An import's dotted target names the entry's module (`pkg.mod` or a longer form of one another)."""
    return bool(imported and module) and (
        imported == module or module.endswith("." + imported) or imported.endswith("." + module)
    )


class _ModuleProxy:
    """A module import the harness could not have, whose attribute `name` is the recorder; any other use
    fails as the placeholder it replaces would."""

    def __init__(self, missing: Any, name: str, record: Any) -> None:
        self._mg_missing, self._mg_entry, self._mg_record = missing, name, record

    def __getattr__(self, attr: str) -> Any:
        return self._mg_record if attr == self._mg_entry else getattr(self._mg_missing, attr)


class _Recordable(torch.nn.Module):
    """Stand-in of a class the caller's module could not have: built with any arguments; its entry method
    is replaced by the recorder."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()


def _attr(obj: Any, name: str) -> Any:
    try:
        return getattr(obj, name, None)
    except Exception:  # noqa: BLE001 - a stand-in that refuses attributes binds nothing
        return None


def _modules(namespace: dict[str, Any], module: str) -> list[Any]:
    """The entry's own module where the caller's module binds it as a module object, and the namespaces
    (inlined `import pkg.mod as m` stand-ins) it binds; placeholders of missing imports bind nothing."""
    out = []
    for v in list(namespace.values()):
        if isinstance(v, types.ModuleType) and _same_module(getattr(v, "__name__", "") or "", module):
            out.append(v)
        elif isinstance(v, types.SimpleNamespace):
            out.append(v)
    return out


def _placeholder(obj: Any) -> bool:
    """The task runtime's `_MgMissing`: an import the harness could not have (any use fails)."""
    return type(obj).__name__ == "_MgMissing"


def _repository_code(obj: Any) -> bool:
    """Defined in the caller's module or inlined into it, not in a package the render keeps as imported
    (torch, the standard library, KEPT_IMPORTS): a test's `from functools import reduce` is no entry."""
    return not _root_ok(getattr(obj, "__module__", "") or "", KEPT_IMPORTS)
