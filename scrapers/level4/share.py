"""How much of a level-4 task's timed call is harness code (rank side of benchmarks/level4_harness_share.py).

The call `solution(*inputs)` runs under a `sys.setprofile` hook that charges the time between two events
to the owner of the innermost frame: a frame of the task file is the harness's when its code lies outside
the mined code's lines (the runtime above it, the synthesized tail and on-demand parts below), the task's
inside them; a frame elsewhere (torch, the standard library, a C function) belongs to its caller's owner,
except what a FORWARDER of the harness calls for the mined code (the op an `__torch_function__` mode
passes on, the collective a hosting wrapper passes on, the entry `Function.apply` itself), which is the
task's. So clones, draws, comparisons and hosting are the harness's; the mined code's ops are the task's."""

from __future__ import annotations

import statistics
import sys
import time
from collections import Counter
from typing import Any

MINED_MARK = "# ---- mined code"
HARNESS_MARK = "# ---- harness"
# harness functions that only pass a call of the mined code on: what they call is the task's work
FORWARDERS = frozenset(
    {"__torch_function__", "reduce", "init_process_group", "destroy_process_group", "rec", "_mg_fwd_bwd"}
)
TASK_ENTRIES = (("autograd/function.py", "apply"),)  # torch frames that are the entry itself


def mined_lines(path: str) -> tuple[int, int]:
    """First and last line (1-based) of the mined code in a task file."""
    lines = open(path).read().splitlines()
    lo = next(i for i, line in enumerate(lines, 1) if line.startswith(MINED_MARK))
    hi = next((i for i, line in enumerate(lines, 1) if i > lo and line.startswith(HARNESS_MARK)), len(lines) + 1)
    return lo, hi - 1


class Attribution:
    """A profile hook charging time to "harness" or "task" (and per harness function, for the table)."""

    def __init__(self, path: str) -> None:
        self.path, (self.lo, self.hi) = path, mined_lines(path)
        self.time: Counter = Counter()
        self.by_function: Counter = Counter()
        self.stack: list[tuple[str, bool, str]] = [("outside", False, "")]  # (owner, forwards, name)
        self.returned = False
        self.t = time.perf_counter()

    def _owner(self, code: Any) -> tuple[str, bool, str]:
        owner, forwards, _ = self.stack[-1]
        if code.co_filename == self.path:
            mine = not (self.lo <= code.co_firstlineno <= self.hi)
            return ("harness" if mine else "task"), mine and code.co_name in FORWARDERS, code.co_name
        if forwards or any(code.co_filename.endswith(f) and code.co_name == n for f, n in TASK_ENTRIES):
            return "task", False, code.co_name
        return owner, False, self.stack[-1][2]

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        now = time.perf_counter()
        owner, _, name = self.stack[-1]
        self.time[owner] += now - self.t
        if owner == "harness":
            self.by_function[name] += now - self.t
        if self.returned:  # the time after a return event is the returned frame's teardown (its locals freed)
            self.stack.pop()
            self.returned = False
        if event == "call":
            self.stack.append(self._owner(frame.f_code))
        elif event == "c_call":
            top_owner, forwards, top_name = self.stack[-1]
            self.stack.append(("task", False, "") if forwards else (top_owner, False, top_name))
        elif event in ("return", "c_return", "c_exception") and len(self.stack) > 1:
            self.returned = True
        self.t = time.perf_counter()


def measure(mod: Any, rank: int, ws: int, n: int, size: str = "full", calls: int = 3) -> dict[str, Any]:
    """Rank side: inputs at `size`, a warm-up call, `calls` plain timed calls, then `calls` attributed ones."""
    inputs = mod.make_inputs(rank, ws, seed=0, device="cpu", size=size)
    mod.solution(*inputs)
    plain, outs = [], []
    for _ in range(calls):
        t0 = time.perf_counter()
        outs.append(mod.solution(*inputs))
        plain.append(time.perf_counter() - t0)
    del outs
    hook = Attribution(mod.__file__)
    outs = []  # kept until the end: freeing an output is no part of the call
    for _ in range(calls):
        sys.setprofile(hook)
        try:
            outs.append(mod.solution(*inputs))
        finally:
            sys.setprofile(None)
    del outs
    total = hook.time["harness"] + hook.time["task"]
    top = [[k, round(1e3 * v / calls, 3)] for k, v in hook.by_function.most_common(4)]
    return {
        "ok": True,
        "call_ms": round(1e3 * statistics.median(plain), 3),
        "profiled_ms": round(1e3 * total / calls, 3),
        "harness_ms": round(1e3 * hook.time["harness"] / calls, 3),
        "share": hook.time["harness"] / total if total else 0.0,
        "top": top,
    }
