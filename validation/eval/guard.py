"""Rank-side isolation of candidate code (runs only inside rank processes).

- Harness modules (validation.*, generator.*, ...) are removed from sys.modules before candidate code
  loads, and a sys.meta_path finder refuses to import them again: candidate code cannot reach the
  harness or the task module by import. The task module is executed from its source text into a
  module object that is never entered in sys.modules.
- An integrity snapshot records the functions the harness relies on (timers, torch.cuda events and
  synchronize, torch.distributed, Tensor methods, builtins, the harness modules themselves); any
  replacement after candidate code ran is reported as monkeypatching.
- `left_behind()` clears, and names, global hooks a candidate call left installed that would run
  inside harness code: torch function/dispatch modes and a TorchDynamo frame-evaluation callback.
- mgbench.validation.eval.audit refuses frame and gc walks from candidate code.
"""

from __future__ import annotations

import builtins
import importlib.abc
import linecache
import math
import secrets
import sys
import threading
import time
import types
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

HARNESS_PREFIXES = (
    "validation",
    "generator",
    "dataset",
    "taxonomy",
    "templates",
    "scrapers",
    "tests",
    "conftest",
    "mgbench",
)


class CandidateError(Exception):
    """Candidate code raised, or the solution file is unusable (reported as an error)."""


class CandidateRejected(CandidateError):
    """Candidate code was stopped by a guard (reported as incorrect, with the guard's rule)."""


def is_harness(name: str) -> bool:
    return name.startswith("mgbench_task") or any(name == p or name.startswith(p + ".") for p in HARNESS_PREFIXES)


class HarnessBlocker(importlib.abc.MetaPathFinder):
    """Refuses harness imports; installed first on sys.meta_path."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if is_harness(fullname):
            raise ImportError(
                f"import of {fullname!r} is blocked: candidate code may not import the "
                f"harness or the reference task module"
            )
        return None


def hide_harness() -> tuple[dict[str, types.ModuleType], HarnessBlocker]:
    """Remove harness modules from sys.modules (kept and returned) and install the import blocker."""
    hidden = {k: sys.modules.pop(k) for k in list(sys.modules) if is_harness(k)}
    blocker = next((f for f in sys.meta_path if isinstance(f, HarnessBlocker)), None)
    if blocker is None:
        blocker = HarnessBlocker()
        sys.meta_path.insert(0, blocker)
    return hidden, blocker


def load_source(source: str, filename: str, register: bool) -> types.ModuleType:
    """Execute `source` as a fresh module under an unguessable name (registered only if asked)."""
    name = f"_m{secrets.token_hex(8)}"
    mod = types.ModuleType(name)
    mod.__file__ = filename
    sys.modules[name] = mod  # while it runs: `@dataclass` looks its module up for string annotations
    # inspect.getsource reads through linecache: without the text there, @torch.jit.script and anything else
    # that needs a function's source fails on code that never was a file here (mtime None: never evicted)
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    try:
        exec(compile(source, filename, "exec"), mod.__dict__)  # noqa: S102 - rank-side, sandboxed by process
    finally:
        if not register:
            sys.modules.pop(name, None)
    return mod


_EVAL_FRAME = getattr(getattr(torch._C, "_dynamo", None), "eval_frame", None)
_GET_CALLBACK = getattr(_EVAL_FRAME, "get_eval_frame_callback", None)  # absent in some versions


def left_behind() -> list[str]:
    """Clear the global hooks that a candidate call left installed; names of those found."""
    found = []
    n = torch._C._len_torch_function_stack()
    for _ in range(n):
        torch._C._pop_torch_function_stack()
    if n:
        found.append(f"{n} torch function mode(s)")
    n = torch._C._len_torch_dispatch_stack()
    for _ in range(n):
        torch._C._pop_torch_dispatch_stack()
    if n:
        found.append(f"{n} torch dispatch mode(s)")
    if _GET_CALLBACK is not None and _GET_CALLBACK() not in (None, False):
        _EVAL_FRAME.set_eval_frame(None)
        found.append("a frame-evaluation callback (torch._C._dynamo.eval_frame.set_eval_frame)")
    return found


def _watched_objects(extra: dict[str, Any]) -> dict[str, Any]:
    objs: dict[str, Any] = {
        "time": time,
        "math": math,
        "builtins": builtins,
        "torch": torch,
        "torch.cuda": torch.cuda,
        "torch.distributed": dist,
        "c10d": c10d,
        "torch.Tensor": torch.Tensor,
        "TensorBase": torch._C.TensorBase,
        "torch.cuda.Event": torch.cuda.Event,
        "torch.cuda.Stream": torch.cuda.Stream,
        "threading": threading,
    }
    objs.update(extra)
    return objs


def _callables(obj: Any) -> dict[str, Any]:
    try:
        items = list(vars(obj).items())
    except TypeError:
        return {}
    return {
        k: v for k, v in items if callable(v) or isinstance(v, (staticmethod, classmethod, property, types.ModuleType))
    }


# Operators the harness's checks run (compare, excess, clone, snapshots, scrubbing): a kernel
# registered over one of them (torch.library on the aten namespace) would rewrite the verdicts.
DISPATCH_WATCHED = (
    "aten::_to_copy",
    "aten::to.dtype",
    "aten::clone",
    "aten::copy_",
    "aten::isfinite",
    "aten::isnan",
    "aten::isclose",
    "aten::all",
    "aten::any",
    "aten::sub.Tensor",
    "aten::abs",
    "aten::mul.Tensor",
    "aten::mul.Scalar",
    "aten::max",
    "aten::pow.Tensor_Scalar",
    "aten::mean",
    "aten::sqrt",
    "aten::sum",
    "aten::equal",
    "aten::eq.Tensor",
    "aten::ne.Tensor",
    "aten::round",
    "aten::fill_.Scalar",
    "aten::_local_scalar_dense",
    "aten::detach",
    "aten::view",
    "aten::bitwise_not",
    "aten::index.Tensor",
)


def _dispatch_tables() -> dict[str, str]:
    out = {}
    for op in DISPATCH_WATCHED:
        try:
            out[op] = torch._C._dispatch_dump(op)
        except RuntimeError:  # an operator this torch version does not have
            continue
    return out


_TORCH_WRAPPER_FILES = tuple(torch.__file__.rsplit("/", 1)[0] + f for f in ("/_dynamo/", "/_compile.py"))


def _torch_own_wrapper(new: Any, old: Any) -> bool:
    """torch wraps some functions of its own on first import of torch._dynamo (torch.manual_seed
    becomes torch._disable_dynamo(torch.manual_seed)): not the candidate's monkeypatching."""
    code = getattr(new, "__code__", None)
    return (
        getattr(new, "__wrapped__", None) is old
        and code is not None
        and code.co_filename.startswith(_TORCH_WRAPPER_FILES)
    )


class Integrity:
    """Identity snapshot of watched callables and of the dispatcher tables of the operators the
    checks use; `violations()` names callables replaced or deleted, `dispatch_violations()` the
    operators whose kernels changed."""

    def __init__(self, extra: dict[str, Any] | None = None, blocker: HarnessBlocker | None = None):
        self.objs = _watched_objects(extra or {})
        self.snap = {label: _callables(o) for label, o in self.objs.items()}
        self.blocker = blocker
        self.tables = _dispatch_tables()

    def dispatch_violations(self) -> list[str]:
        now = _dispatch_tables()
        return [op for op, table in self.tables.items() if now.get(op) != table]

    def violations(self) -> list[str]:
        bad = []
        for label, before in self.snap.items():
            now = _callables(self.objs[label])
            for k, v in before.items():
                if now.get(k) is not v and not _torch_own_wrapper(now.get(k), v):
                    bad.append(f"{label}.{k}")
        if self.blocker is not None and self.blocker not in sys.meta_path:
            bad.append("sys.meta_path (the import guard was removed)")
        return bad


def candidate_threads(before: set[int]) -> list[str]:
    """Names of live threads that did not exist in `before` (thread idents)."""
    return [t.name for t in threading.enumerate() if t.ident not in before and t.is_alive()]


def thread_idents() -> set[int]:
    return {t.ident for t in threading.enumerate() if t.ident is not None}


def where(exc: BaseException, filename: str) -> str:
    """'file:line' of the deepest traceback frame inside the candidate file, else the deepest."""
    tb, best, last = exc.__traceback__, "", ""
    while tb is not None:
        f = tb.tb_frame.f_code.co_filename
        last = f"{f.rsplit('/', 1)[-1]}:{tb.tb_lineno}"
        if f == filename:
            best = last
        tb = tb.tb_next
    return best or last


def candidate_call(fn: Callable, args: tuple, what: str, filename: str, refused: list[str] | None = None) -> Any:
    """Run candidate code; its exceptions become CandidateError, or
    CandidateRejected when a guard refused something during the call (`refused`: the audit log's)."""
    before = len(refused) if refused is not None else 0
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001 - any candidate failure is reported, not raised through
        if refused is not None and len(refused) > before:
            raise CandidateRejected(
                f"{what}: candidate code {refused[before]}: the harness's frames and "
                f"objects are off limits (rule introspection)"
            ) from None
        msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise CandidateError(f"{what} raised {type(e).__name__}: {msg} (at {where(e, filename)})") from None
