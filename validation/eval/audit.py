"""Runtime guard against reflection from candidate code: a CPython audit hook (PEP 578) installed in
the rank process just before the candidate file is imported. Audit hooks cannot be removed or
listed from Python, so the hook and the log it writes are reachable only through the harness's own
state, which the hook keeps frame and gc walks from reaching.

- Always refused once installed (the harness never needs them after setup): gc walks
  (gc.get_objects/get_referrers/get_referents), sys._current_frames, trace and profile hooks.
- Refused while candidate code is on the call stack: getting a frame (sys._getframe, a traceback's
  tb_frame, a generator's or coroutine's frame); a few standard-library functions that read a frame
  and never hand it out (FRAME_CONSUMERS) are let through.
- Code objects that candidate code executes (exec, eval, namedtuple's generated methods) count as
  candidate code from then on; building a code object (code.replace, types.CodeType) from candidate
  code is refused.
Every refusal raises RuntimeError at the call and is logged; the harness reports the log as an
`introspection` rejection even if the candidate caught the exception.
"""

from __future__ import annotations

import sys
import threading
import types
from dataclasses import dataclass, field
from typing import Any

ALWAYS_REFUSED = {
    "gc.get_objects": "walks the garbage collector (gc.get_objects)",
    "gc.get_referrers": "walks the garbage collector (gc.get_referrers)",
    "gc.get_referents": "walks the garbage collector (gc.get_referents)",
    "sys._current_frames": "reads every thread's frame (sys._current_frames)",
    "sys.settrace": "installs a trace hook (sys.settrace)",
    "sys.setprofile": "installs a profile hook (sys.setprofile)",
    "sys._settraceallthreads": "installs a trace hook in every thread",
    "sys._setprofileallthreads": "installs a profile hook in every thread",
}
FRAME_ATTRS = {"tb_frame", "gi_frame", "cr_frame", "ag_frame"}
TAINTING = {"exec", "code.__new__"}
WATCHED = set(ALWAYS_REFUSED) | TAINTING | {"sys._getframe", "object.__getattr__"}
# (root, file under it, function) of library callers of sys._getframe that only read the frame
# (a module name, a registration's source line) and never hand it out.
FRAME_CONSUMERS = {
    ("stdlib", "collections/__init__.py", "namedtuple"),
    ("stdlib", "typing.py", "_caller"),
    ("stdlib", "enum.py", "_create_"),
    ("stdlib", "logging/__init__.py", "findCaller"),
    # returns file/line/name strings only (torch 2.11's torch.library.Library records its caller so)
    ("stdlib", "traceback.py", "extract_stack"),
    ("torch", "library.py", "__init__"),
    ("torch", "library.py", "_register_fake"),
    ("torch", "_library/utils.py", "get_source"),
    ("site", "typing_extensions.py", "_has_generic_or_protocol_as_origin"),  # used by torch.library
}
ROOTS = {"stdlib": types.__file__.rsplit("/", 1)[0] + "/"}
if "torch" in sys.modules and getattr(sys.modules["torch"], "__file__", None):
    ROOTS["torch"] = sys.modules["torch"].__file__.rsplit("/", 1)[0] + "/"
    ROOTS["site"] = ROOTS["torch"].rstrip("/").rsplit("/", 1)[0] + "/"


@dataclass
class AuditLog:
    """What the hook refused, and what counts as candidate code."""

    files: set[str]
    codes: set[int] = field(default_factory=set)
    keep: list[Any] = field(default_factory=list)  # tainted code objects (their ids stay unique)
    refused: list[str] = field(default_factory=list)

    def taint_code(self, code: types.CodeType) -> None:
        todo = [code]
        while todo:
            c = todo.pop()
            if id(c) not in self.codes:
                self.codes.add(id(c))
                self.keep.append(c)
                todo += [k for k in c.co_consts if isinstance(k, types.CodeType)]

    def tainted(self, frame: Any) -> bool:
        while frame is not None:
            code = frame.f_code
            if code.co_filename in self.files or id(code) in self.codes:
                return True
            frame = frame.f_back
        return False

    def reason(self) -> str:
        if not self.refused:
            return ""
        more = f" (+{len(self.refused) - 1} more)" if len(self.refused) > 1 else ""
        return f"candidate code {self.refused[0]}{more}: the harness's frames and objects are off limits"


def _consumer(caller: Any) -> bool:
    """Whether sys._getframe was called by a FRAME_CONSUMERS function (logging goes through a lambda)."""
    for f in (caller, caller.f_back if caller is not None else None):
        if f is None:
            return False
        name = f.f_code.co_filename
        if any(
            (root, name[len(d) :], f.f_code.co_name) in FRAME_CONSUMERS
            for root, d in ROOTS.items()
            if name.startswith(d)
        ):
            return True
        if f.f_code.co_name != "<lambda>":
            return False
    return False


def _trusted(frame: Any) -> bool:
    return any(frame.f_code.co_filename.startswith(d) for d in ROOTS.values())


def _library_import(here: Any, log: AuditLog) -> bool:
    """Whether `here` runs inside the import of an installed library module (its top-level code,
    e.g. sympy's decorators reading a frame), below the candidate code that triggered the import."""
    f = here
    while f is not None and not (f.f_code.co_filename in log.files or id(f.f_code) in log.codes):
        if f.f_code.co_filename.startswith("<frozen importlib"):
            return True
        if not _trusted(f):
            return False
        f = f.f_back
    return False


def _where(frame: Any) -> str:
    name = frame.f_code.co_filename
    for root, d in ROOTS.items():
        if name.startswith(d):
            name = f"{root}:{name[len(d) :]}"
    return f"{name.rsplit('/', 1)[-1] if name.startswith('/') else name} {frame.f_code.co_name}()"


def _check(log: AuditLog, event: str, args: tuple) -> str:
    """'' to allow, else what was refused. Taints code made by candidate code."""
    if event in ALWAYS_REFUSED:
        return ALWAYS_REFUSED[event]
    here = sys._getframe(2)  # the frame that raised the event (0 _check, 1 hook)
    if not log.tainted(here):
        return ""
    if event in ("sys._getframe", "object.__getattr__") and _library_import(here, log):
        return ""
    if event == "sys._getframe":
        if _consumer(here):
            return ""
        up = f" <- {_where(here.f_back)}" if here.f_back is not None else ""
        return f"walks the call stack (sys._getframe, called from {_where(here)}{up})"
    if event == "object.__getattr__":
        return f"reads a frame ({type(args[0]).__name__}.{args[1]}, in {_where(here)})"
    if event == "exec" and isinstance(args[0], types.CodeType):
        # an import runs a module's own file: an installed library's is not candidate code, a file
        # elsewhere (one the candidate wrote?) is
        if not (
            here.f_code.co_filename.startswith("<frozen importlib")
            and any(args[0].co_filename.startswith(d) for d in ROOTS.values())
        ):
            log.taint_code(args[0])
    elif event == "code.__new__":
        return f"builds a code object (code.replace or types.CodeType, in {_where(here)})"
    return ""


def install(filename: str) -> AuditLog:
    """Install the hook (once per process: the rank processes are single use); code from `filename`
    is candidate code."""
    log = AuditLog({filename})
    busy: set[int] = set()
    ident = threading.get_ident

    def hook(event: str, args: tuple) -> None:
        if event not in WATCHED or (event == "object.__getattr__" and args[1] not in FRAME_ATTRS):
            return
        me = ident()
        if me in busy:  # the hook's own sys._getframe
            return
        busy.add(me)
        try:
            why = _check(log, event, args)
        finally:
            busy.discard(me)
        if why:
            log.refused.append(why)
            raise RuntimeError(f"refused by the eval guard: {why} (rule introspection)")

    sys.addaudithook(hook)
    return log
