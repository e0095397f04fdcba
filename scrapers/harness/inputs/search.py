"""Error-driven harness search for one candidate: run, judge, adjust, retry within a budget."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from mgbench.scrapers.harness.inputs.candidate import Candidate
from mgbench.scrapers.harness.inputs.failure import Failure
from mgbench.scrapers.harness.inputs.initial import initial_spec
from mgbench.scrapers.harness.inputs.rules.degenerate import no_collective_named, unscaled_state
from mgbench.scrapers.harness.inputs.rules.order import propose_named
from mgbench.scrapers.harness.make.render import SMOKE_N, Prepared, RenderReject, prepare, task_source
from mgbench.scrapers.harness.make.reserved import rename_reserved, renamed_entry
from mgbench.scrapers.harness.make.specedit import _all_args
from mgbench.scrapers.harness.run.outcomes import categorize
from mgbench.scrapers.harness.run.sandbox import Attempt, run_ranks


@dataclass
class Budget:
    seconds: float = 30.0
    attempts: int = 30
    attempt_timeout_s: float = 8.0
    mem_mb: int = 1024
    ws4_attempts: int = 3


@dataclass
class HarnessResult:
    """The outcome for one candidate (one line of harness.jsonl)."""

    id: str
    repo: str
    accepted: bool
    reason: str = ""  # rejection category: detail
    spec: dict[str, Any] | None = None
    world_sizes: list[int] = field(default_factory=list)
    attempts: int = 0
    seconds: float = 0.0
    fingerprints: dict[str, Any] = field(default_factory=dict)  # "ws2" -> per-rank smoke output stats
    stubbed: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    last_error: str = ""
    at_load: bool = False  # the final failure was raised while loading the module (not the call)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


DEGENERATE = (
    "no_collective",
    "no_tensor_output",
    "input_insensitive",
    "computed_output_insensitive",
    "degenerate_zeros",
    "degenerate_copy_of_inputs",
)  # ran, but no task yet: try other inputs


def judge(at: Attempt) -> str:
    """'' when the run is an acceptable harness, else the rejection category."""
    rs = [r for r in at.replies if r]
    if not all(r["has_tensor"] for r in rs):
        return "no_tensor_output"
    if not any(r["calls"] for r in rs):
        return "no_collective"
    if any(r["out"]["hash"] != r["again"]["hash"] for r in rs):
        return "nondeterministic"
    if any(r.get("aliased") for r in rs):
        return "output_overwritten_by_later_calls"
    if all(r["out"]["hash"] == r["other"]["hash"] for r in rs):
        return "input_insensitive"
    if all(r["out"]["nonzero"] == 0 for r in rs):
        return "degenerate_zeros"
    if all(r["echo"] for r in rs):
        return "degenerate_copy_of_inputs"
    if not any(r.get("fresh_varies", True) for r in rs):  # only copies of the inputs change with them
        return "computed_output_insensitive"
    if any("scaled_error" in r for r in rs):
        return "does_not_scale"
    return ""


ASYNC_RE = re.compile(r"async_ops?\s*=\s*(?!False\b|None\b)\w|\b(?:isend|irecv|batch_isend_irecv)\s*\(")
UNFINISHED = ("nondeterministic", "output_overwritten_by_later_calls", "timeout", "crashed")


def drained(spec: dict[str, Any], cand: Candidate | dict[str, Any], outcome: str) -> list[dict[str, Any]]:
    """The spec with "drain" (make/runtime/standin_drain.py: the call's outstanding `Work` is waited for) when the
    outcome may be communication the call started and left running, in code that starts some."""
    text = cand.text if isinstance(cand, Candidate) else cand["_text"]
    if spec.get("drain") or outcome.split(":")[0] not in UNFINISHED or not ASYNC_RE.search(text):
        return []
    return [{**spec, "drain": True}]


def _fp(at: Attempt) -> list[dict[str, Any]]:
    return [r["out"] for r in at.replies if r]


def describe(spec: dict[str, Any]) -> str:
    """One line per spec for traces: `name:kind[shape]` of every argument, module global and attribute."""

    def one(a: dict[str, Any]) -> str:
        extra = a.get("shape") or a.get("value") or a.get("expr") or [f["name"] for f in a.get("fields", [])]
        return f"{a['name']}:{a['kind']}" + (
            f"[{','.join(map(str, extra))}]" if isinstance(extra, list) else f"={extra}" if extra else ""
        )

    return " ".join(
        [one(a) for k in ("args", "globals", "attrs") for a in spec.get(k, []) if isinstance(a, dict)]
        + (["(drain)"] if spec.get("drain") else [])
    )


MAGNITUDES = ("shape", "expr", "count", "high")  # sizes: an edit of these alone only resizes the inputs


def _strip(x: Any, ndim: bool) -> Any:
    """Sizes dropped; with `ndim`, a shape keeps its number of dimensions."""
    if isinstance(x, dict):
        return {
            k: (len(v) if k == "shape" and isinstance(v, list) else _strip(v, ndim))
            for k, v in x.items()
            if k not in MAGNITUDES or k == "shape" and ndim
        }
    return [_strip(v, ndim) for v in x] if isinstance(x, list) else x


def shapeless(spec: dict[str, Any] | str, ndim: bool = True) -> str:
    """The spec (or its JSON key) without its sizes (tensor dimensions, int expressions, list lengths): two
    specs equal here differ in sizes only. With `ndim` False, tensors' numbers of dimensions go too."""
    return json.dumps(_strip(json.loads(spec) if isinstance(spec, str) else spec, ndim), sort_keys=True)


def resized(spec: str, parent: str) -> frozenset[str]:
    """Names of the arguments (attributes, fields) whose sizes differ between two specs equal but for sizes."""
    a, b = (_all_args(json.loads(x)) for x in (spec, parent))
    return frozenset(x["name"] for x, y in zip(a, b) if any(x.get(k) != y.get(k) for k in MAGNITUDES))


class SizeMemo:
    """What resizing did in this search: when two specs that differ in the sizes of some arguments only gave
    the same outcome, other sizes of those arguments are not tried (the budget goes to other edits). Sizes
    first count with the numbers of dimensions fixed, then with those free too."""

    def __init__(self) -> None:
        self.runs: dict[str, list[tuple[str, str, str]]] = {}  # level key -> (spec key, outcome, sizes-free) run
        self.flat: dict[str, set[str]] = {}  # level key -> size-insensitive arguments

    @staticmethod
    def _levels(key: str) -> tuple[str, str]:
        """The spec without sizes (dimensions kept), and without sizes nor dimensions."""
        return shapeless(key), "ndim:" + shapeless(key, False)

    def ran(self, key: str, what: str, line: str = "") -> None:
        """Record a run: `what` happened (the error or judgement) on the failing `line` ('' when none). An
        argument named on that line counts as size-insensitive only when the message shows numbers (sizes
        would have changed them): `assert x.size(0) % k == 0` may pass at another size."""
        outcome, levels = f"{what} @ {line}", self._levels(key)
        for k in levels:
            for other, was, skel in self.runs.get(k, []):  # (the second level: pairs that differ in dimensions)
                if was == outcome and (k is levels[0] or skel != levels[0]):
                    self.flat.setdefault(k, set()).update(
                        a
                        for a in resized(key, other)
                        if re.search(r"\d", what) or not re.search(rf"\b{re.escape(a)}\b", line)
                    )
            self.runs.setdefault(k, []).append((key, outcome, levels[0]))

    def futile(self, key: str) -> bool:
        return any(
            resized(key, other) <= self.flat.get(k, set())
            for k in self._levels(key)
            for other, _, _ in self.runs.get(k, [])
        )


Named = list[tuple[str, dict[str, Any]]]  # (the rule or step that proposed it, spec)


class Queue:
    """The specs still to try, front first, with the names of the rules that proposed each (a side table
    keyed by the spec's JSON: specs are rendered and hashed, so they carry no bookkeeping)."""

    def __init__(self, first: Named) -> None:
        self.specs: list[dict[str, Any]] = []
        self.origin: dict[str, list[str]] = {}
        self.push(first)

    def push(self, named: Named) -> None:
        """Put `named` in front, in its order."""
        for name, s in named:
            who = self.origin.setdefault(json.dumps(s, sort_keys=True), [])
            if name not in who:
                who.append(name)
        self.specs[:0] = [s for _, s in named]

    def pop(self) -> dict[str, Any]:
        return self.specs.pop(0)

    def by(self, key: str) -> str:
        return ",".join(self.origin.get(key, [])) or "?"

    def __bool__(self) -> bool:
        return bool(self.specs)


def _named(label: str, specs: list[dict[str, Any]]) -> Named:
    return [(label, s) for s in specs]


def _run(cand: Candidate, prep: Prepared, spec: dict[str, Any], ws: int, budget: Budget) -> Attempt:
    source = task_source(cand.record, prep, spec)
    return run_ranks(source, ws, SMOKE_N, budget.attempt_timeout_s, budget.mem_mb)


def search_ws2(
    cand: Candidate,
    prep: Prepared,
    budget: Budget,
    res: HarnessResult,
    t0: float,
    trace: Callable[[str], None] | None = None,
) -> tuple[dict[str, Any], Attempt] | None:
    """Error-driven search at world size 2: run, judge, queue the rules' proposals in front, within the
    budget. Returns the first acceptable (spec, attempt), else None with `res` saying why."""
    queue, seen, sizes = Queue(_named("initial", [initial_spec(cand.record, cand.text)])), set(), SizeMemo()
    while queue and res.attempts < budget.attempts and time.monotonic() - t0 < budget.seconds:
        spec = queue.pop()
        key = json.dumps(spec, sort_keys=True)
        if key in seen or sizes.futile(key):
            continue
        seen.add(key)
        at = _run(cand, prep, spec, 2, budget)
        res.attempts += 1
        why = judge(at) if at.status == "ok" else ""
        e = at.error() if at.status != "ok" else {}
        what = (why or "ok") if at.status == "ok" else f"{e['type']}: {e['msg']}"
        sizes.ran(key, what, e.get("line", ""))
        if trace:
            trace(
                f"#{res.attempts} ws2 {describe(spec)}  (by {queue.by(key)})\n"
                f"    -> {what[:160]}  @ {e.get('line', '')[:80]}"
            )
        if at.status == "ok":
            if not why:
                return spec, at
            res.reason = why
            if why in DEGENERATE:
                nxt = no_collective_named(spec, cand)
            elif why == "does_not_scale":
                scaled = next(r["scaled_error"] for r in at.replies if r and "scaled_error" in r)
                nxt = _named("unscaled_state", unscaled_state(spec)) + propose_named(spec, Failure.of(scaled), cand)
            else:
                nxt = propose_named(spec, Failure.of(at.error()), cand)
            queue.push(_named("drain", drained(spec, cand, why)) + nxt)
            continue
        res.reason, final = categorize(at)
        res.last_error = f"{e['type']}: {e['msg']}"[:300]
        res.at_load = bool(e.get("at_load"))
        drain = drained(spec, cand, res.reason)
        if final and not drain:
            break
        queue.push(_named("drain", drain) + ([] if final else propose_named(spec, Failure.of(e), cand)))
    else:
        if not res.reason:
            res.reason = "budget_exhausted"
    return None


def confirm_ws4(
    cand: Candidate,
    prep: Prepared,
    spec: dict[str, Any],
    budget: Budget,
    res: HarnessResult,
    trace: Callable[[str], None] | None = None,
) -> None:
    """Run the world-size-2 harness `spec` at world size 4; on an error, adopt the first proposal only if
    it works at both 4 and 2. Records the world sizes, fingerprints and attempts in `res`."""
    tries, s4 = 0, spec
    while tries < budget.ws4_attempts:
        at4 = _run(cand, prep, s4, 4, budget)
        tries += 1
        if trace:
            verdict = judge(at4) if at4.status == "ok" else ""
            trace(f"#ws4.{tries} {describe(s4)}\n    -> {at4.status} {verdict}")
        if at4.status == "ok" and not judge(at4):
            if s4 is spec:
                res.world_sizes.append(4)
                res.fingerprints["ws4"] = _fp(at4)
            break
        if at4.status != "error" or s4 is not spec:
            break
        # a spec that also works at 4 must keep working at 2: only adopt it if so
        nxt = propose_named(spec, Failure.of(at4.error()).at_world_size(4), cand)[:1]
        if not nxt:
            break
        name, s4 = nxt[0]
        if trace:
            trace(f"    ws4 adjustment by {name}: {describe(s4)}")
        if _run(cand, prep, s4, 2, budget).status != "ok":
            break
        at4b = _run(cand, prep, s4, 4, budget)
        if at4b.status == "ok" and not judge(at4b):
            res.spec, res.world_sizes = s4, [2, 4]
            res.fingerprints["ws4"] = _fp(at4b)
        break
    res.attempts += tries


def synthesize(
    cand: dict[str, Any], module_text: str, budget: Budget = Budget(), trace: Callable[[str], None] | None = None
) -> HarnessResult:
    """Find a harness at world size 2 (search_ws2), then confirm (or adjust) it at world size 4
    (confirm_ws4). `trace` gets one line per attempt (the spec tried, the rules that proposed it, what
    happened), for debugging a candidate."""
    res = HarnessResult(cand["id"], cand["provenance"]["repo"], False)
    t0 = time.monotonic()
    try:
        prep = prepare(module_text, numpy=bool(cand.get("numpy")))
    except (RenderReject, SyntaxError) as e:
        res.reason = f"unrenderable: {e}"
        return res
    res.stubbed, res.missing = prep.stubbed, prep.missing
    if prep.renames:  # contract names renamed: call the entry by its new name, read the renamed code
        cand = {**cand, "entry": renamed_entry(cand["entry"], prep.renames)}
        module_text = rename_reserved(module_text)[0]
    candidate = Candidate.build(cand, module_text)  # what rules read from the code, read once
    found = search_ws2(candidate, prep, budget, res, t0, trace)
    if found is None:
        res.seconds = round(time.monotonic() - t0, 2)
        if res.attempts >= budget.attempts or time.monotonic() - t0 >= budget.seconds:
            res.reason = (
                res.reason
                if res.reason.split(":")[0] not in ("search_exhausted",)
                else "budget_exhausted: " + res.reason.split(": ", 1)[-1]
            )
        return res
    spec, at = found
    spec = {**spec, "numpy": True} if cand.get("numpy") else spec  # rendered with the numpy stand-in
    res.accepted, res.reason, res.spec, res.world_sizes = True, "", spec, [2]
    res.fingerprints["ws2"] = _fp(at)
    confirm_ws4(candidate, prep, spec, budget, res, trace)
    res.seconds = round(time.monotonic() - t0, 2)
    return res
