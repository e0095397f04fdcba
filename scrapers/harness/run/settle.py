"""Settle an accepted harness: decide once, at synthesis, what the timed call of its task needs.

The search runs the runtime's auto path (`_mg_call_auto`), which finds a task's output anew on every
call: it clones every input, draws the module globals and attributes, and compares every argument
with its original afterwards (`torch.equal`, a host sync on a GPU). Settling runs the rendered task on
2 sandboxed gloo ranks with the runtime's `_MG_REPORT` set, merges what each rank's auto call did, and
stores it in the spec:

- "output": how the output is formed ({"mode": "return" | "numbers" | "args" | "state" | "attrs"}, with
  "index" / "attrs" for the arguments and attributes it is made of); the settled call
  (`_mg_call_settled`) forms it the same way with no comparison;
- "mutates" / "returns": the inputs the entry changes in place or whose memory its output shares (only
  those are cloned per call); "scratch": the changed inputs that are no part of the output, with the
  positions of the tensors the entry changes (a copy kept between calls, those tensors refilled before
  each call); "mutates_attrs": the drawn globals and attributes it changes or returns (cloned per call
  from a draw made once per process);
- "n_full": the full size by bytes per rank: the largest power of two n whose per-rank inputs (every
  tensor the spec draws, fields and state included) stay within FULL_BYTES and no tensor exceeds
  FULL_MAX_ELEMS, verified by running the task at that n on 2 ranks within SIZE_TIMEOUT_S (on failure
  halved, at most SIZE_TRIES runs, then the old rule `render.full_n`); "n_lat": the LAT_BYTES point.

A spec is settled for its output only when both ranks agree and the settled call gives the auto path's
output (twice, for two seeds) without changing its inputs; otherwise the auto path stays ("output" is
absent) and "settle" says why. Mined code runs only in the rank child processes."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FULL_BYTES = 64 << 20  # per rank: the templated families' bandwidth point (32 Mi bf16 elements)
LAT_BYTES = 1 << 20  # per rank: their latency point (512 Ki bf16 elements)
SIZE_WS = 2  # the world size bytes are counted at (the gate's trace, the 2-GPU records)
MAX_N = 1 << 26
SIZE_TIMEOUT_S = 30.0
SIZE_TRIES = 4
SIZE_MEM_MB = 6144
# the decide run's calls draw a curated entry's fixed-size inputs anew (verl's 128k-vocab shard: ~50 s on 2 CPUs)
DECIDE_TIMEOUT_S = 90.0
SETTLE_KEYS = ("output", "mutates", "returns", "mutates_attrs", "scratch", "n_full", "n_lat", "settle", "settle_size")


def _itemsize(dtype: str) -> int:
    import torch

    return getattr(torch, dtype, torch.float32).itemsize


def input_bytes(spec: dict[str, Any], n: int, ws: int = SIZE_WS) -> tuple[int, int]:
    """(bytes, largest tensor's elements) of one rank's inputs at size n: the arguments and state attributes
    at n, the other attributes and module globals at the spec's n_attr (they are drawn too)."""
    from mgbench.scrapers.harness.make.render import _tensor_sizes
    from mgbench.scrapers.harness.make.runtime import _mg_state_attrs

    state = {i for i, _ in _mg_state_attrs(spec)}
    at_n = spec.get("args", []) + [a for i, a in enumerate(spec.get("attrs", [])) if i in state]
    at_attr = [a for i, a in enumerate(spec.get("attrs", [])) if i not in state] + spec.get("globals", [])
    total, largest = 0, 0
    for group, size in ((at_n, n), (at_attr, int(spec.get("n_attr", 8)))):
        for a in group:
            if not isinstance(a, dict):
                continue
            numels = _tensor_sizes([{**a, "fields": []}], size, ws)
            total += sum(numels) * _itemsize(a.get("dtype", "float32"))
            largest = max([largest, *numels])
            for f in a.get("fields", []):  # a tensor's fields (`param.main_grad`), drawn like arguments
                b, m = input_bytes({"args": [f], "n_attr": size}, size, ws)
                total, largest = total + b, max(largest, m)
    return total, largest


def bytes_n(spec: dict[str, Any], target: int, ws: int = SIZE_WS) -> int | None:
    """The largest power of two n whose inputs fit `target` bytes per rank (and FULL_MAX_ELEMS per tensor at
    world size 8, as `render.full_n`); None when the inputs do not grow with n (n sizes no tensor)."""
    from mgbench.scrapers.harness.make.render import FULL_MAX_ELEMS

    def fits(n: int) -> bool:
        return input_bytes(spec, n, ws)[0] <= target and input_bytes(spec, n, 8)[1] <= FULL_MAX_ELEMS

    if input_bytes(spec, 2, ws)[0] == input_bytes(spec, 1 << 12, ws)[0]:
        return None
    n = 1
    while n < MAX_N and fits(2 * n):
        n *= 2
    return n


@dataclass
class Settled:
    """What settling decided for one spec (the keys it adds) and how long it took."""

    keys: dict[str, Any]
    seconds: float


# ---- rank side (child processes) ----


def _merge(reports: list[dict[str, Any]], spec: dict[str, Any]) -> dict[str, Any] | str:
    """The settled keys from every rank's report, or why there are none (ranks disagree on the output)."""
    if any("output" not in r for r in reports):
        return "the auto path formed no output on some rank"
    outputs = [json.dumps(r["output"], sort_keys=True) for r in reports]
    if len(set(outputs)) != 1:
        return f"ranks form their outputs differently: {sorted(set(outputs))[:2]}"
    union = {k: sorted({v for r in reports for v in r.get(k, [])}) for k in ("mutates", "returns")}
    attrs = sorted({v for r in reports for k in ("mutates_attrs", "returns_attrs") for v in r.get(k, [])})
    # a changed input that is no part of the output: a copy kept between calls, its changed tensors refilled
    output, scratch = reports[0]["output"], {}
    for i in union["mutates"]:
        parts = [r.get("parts", {}).get(str(i), []) for r in reports]
        if i not in union["returns"] and i not in output.get("index", []) and all(p is not None for p in parts):
            scratch[str(i)] = sorted({j for p in parts for j in p})
    return {"output": output, **union, "mutates_attrs": attrs, "scratch": scratch}


def _decide(mod: Any, rank: int, ws: int, n: int) -> dict[str, Any]:
    """The auto path with a report on every rank, merged over the ranks, then checked: the settled call
    gives the auto path's output for two seeds, twice each, and leaves its inputs as they were."""
    import torch.distributed as dist

    spec = mod._MG_SPEC
    mod._MG_REPORT = {}
    mod.solution(*mod._mg_inputs(spec, rank, ws, 0, "cpu", n))
    report, mod._MG_REPORT = {k: v for k, v in mod._MG_REPORT.items() if not k.startswith("_")}, None
    gathered: list[Any] = [None] * ws
    dist.all_gather_object(gathered, report)
    merged = _merge(gathered, spec)
    if isinstance(merged, str):
        return {"ok": True, "settled": None, "why": merged, "report": report}
    # with reused copies first, else with a clone per call (the same on every rank: the verdicts are gathered)
    for keys in [merged, {**merged, "scratch": {}}] if merged["scratch"] else [merged]:
        why = _check(mod, {**spec, **keys}, rank, ws, n)
        verdicts: list[Any] = [None] * ws
        dist.all_gather_object(verdicts, why)
        why = next((v for v in verdicts if v), "")
        if not why:
            return {"ok": True, "settled": keys, "why": "", "report": report}
    return {"ok": True, "settled": None, "why": why, "report": report}


def _check(mod: Any, settled: dict[str, Any], rank: int, ws: int, n: int) -> str:
    """'' when the settled call gives the auto path's output for two seeds, twice each (a reused draw or copy
    that the call changed would change the second), and leaves its inputs as they were; else why not."""
    from mgbench.scrapers.harness.run import probe

    spec = mod._MG_SPEC
    for seed in (0, 1):
        inputs = mod._mg_inputs(spec, rank, ws, seed, "cpu", n)
        before = probe.fingerprint(inputs)["hash"]
        want = probe.fingerprint(mod._mg_call(vars(mod), spec, inputs))["hash"]
        got = [probe.fingerprint(mod._mg_call(vars(mod), settled, inputs))["hash"] for _ in range(2)]
        if probe.fingerprint(inputs)["hash"] != before:
            return f"the settled call changed its inputs (seed {seed})"
        if any(g != want for g in got):
            return f"the settled call's output differs from the auto path's (seed {seed})"
    return ""


def _size(mod: Any, rank: int, ws: int, n: int, limit_s: float = SIZE_TIMEOUT_S) -> dict[str, Any]:
    """One call at size n (the task's own spec: settled when it is); a call longer than `limit_s` fails."""
    inputs = mod._mg_inputs(mod._MG_SPEC, rank, ws, 0, "cpu", n)
    t0 = time.perf_counter()
    mod.solution(*inputs)
    took = time.perf_counter() - t0
    if took > limit_s:
        return {"ok": False, "error": {"type": "too_slow", "msg": f"the call took {took:.1f} s > {limit_s:.0f} s"}}
    return {"ok": True, "call_s": round(took, 3)}


def _share(mod: Any, rank: int, ws: int, n: int, **kw: Any) -> dict[str, Any]:
    """The harness share of the timed call (scrapers/level4/share.py; benchmarks/level4_harness_share.py)."""
    from mgbench.scrapers.level4.share import measure

    return measure(mod, rank, ws, n, **kw)


JOBS = {"decide": _decide, "size": _size, "share": _share}


def settle_rank(
    rank: int, ws: int, port: int, source: str, job: dict[str, Any], conn: Any, tmp: str, timeout_s: float, mem_mb: int
) -> None:
    """Entry of one sandboxed rank (confined as scrapers/harness/run/child.py's ranks): load, run the job, reply."""
    from mgbench.scrapers.harness.run import probe
    from mgbench.scrapers.harness.run.child import confine_rank, send_reply
    from mgbench.validation.contract import load_module

    path = os.path.join(tmp, f"candidate_r{rank}.py")
    try:
        confine_rank(rank, ws, port, source, tmp, timeout_s, mem_mb)
        extra = {**({"limit_s": job["limit_s"]} if "limit_s" in job else {}), **job.get("args", {})}
        reply = JOBS[job["what"]](load_module(path), rank, ws, int(job["n"]), **extra)
    except BaseException as e:  # noqa: BLE001 - everything the candidate does wrong is data
        reply = {"ok": False, "error": probe.describe(e, path)}
    send_reply(conn, reply)


# ---- host side ----


def run_job(source: str, job: dict[str, Any], timeout_s: float, mem_mb: int = 1024, ws: int = 2) -> tuple[str, list]:
    """Run `job` on `ws` fresh sandboxed rank processes: (status, replies); status ok | error | timeout | ...
    Killed `timeout_s` + 5 s after the start (process start, module load and input draws come first)."""
    from mgbench.scrapers.harness.run.sandbox import spawn_ranks

    replies, status, _ = spawn_ranks(settle_rank, ws, source, job, timeout_s, mem_mb, prefix="mgbench-settle-")
    if status == "ok" and any(x is None or not x.get("ok") or x.get("violations") for x in replies):
        status = "error"
    return status, replies


def _why(status: str, replies: list) -> str:
    errs = [r["error"] for r in replies if r and not r.get("ok")]
    viol = [v for r in replies if r for v in r.get("violations", [])]
    if viol:
        return f"violation: {viol[0]}"[:200]
    return (f"{errs[0]['type']}: {errs[0]['msg']}" if errs else status)[:200]


def settle_spec(render: Any, spec: dict[str, Any], log: Any = None) -> Settled:
    """Settle `spec`; `render(spec)` gives the task module source of a spec. Returns the keys to add."""
    from mgbench.scrapers.harness.make.render import SMOKE_N

    t0 = time.monotonic()
    base = {k: v for k, v in spec.items() if k not in SETTLE_KEYS}
    keys: dict[str, Any] = {}
    # the size runs' memory: a curated entry's fixed dimensions (a 128k vocabulary shard) outgrow 1 GiB at smoke n
    status, replies = run_job(render(base), {"what": "decide", "n": SMOKE_N}, DECIDE_TIMEOUT_S, SIZE_MEM_MB)
    merged = replies[0].get("settled") if status == "ok" and replies[0] else None
    if merged:
        keys.update(merged)
    else:
        keys["settle"] = (replies[0] or {}).get("why") if status == "ok" else f"decide run {_why(status, replies)}"
    sized = {**base, **keys}
    keys.update(
        choose_n(
            sized,
            lambda n: run_job(
                render(sized), {"what": "size", "n": n, "limit_s": SIZE_TIMEOUT_S}, SIZE_TIMEOUT_S, SIZE_MEM_MB
            ),
            log,
        )
    )
    return Settled(keys, round(time.monotonic() - t0, 2))


def choose_n(spec: dict[str, Any], run: Any, log: Any = None) -> dict[str, Any]:
    """n_full (verified by `run(n)` -> (status, replies), halving on failure) and n_lat, by bytes per rank."""
    from mgbench.scrapers.harness.make.render import FULL_N, SMOKE_N, full_n

    out: dict[str, Any] = {}
    # a curated entry's full size (scrapers/harness/curated: n at a production configuration) is verified
    # in place of the bytes-per-rank rule; halved on failure like it
    top = int(spec["curated_n"]) if spec.get("curated_n") else bytes_n(spec, FULL_BYTES)
    old = full_n(spec)
    floor = min(top, SMOKE_N if spec.get("curated_n") else FULL_N) if top is not None else 0
    tries = [] if top is None else [top >> i for i in range(SIZE_TRIES) if (top >> i) >= floor]
    for n in tries:
        status, replies = run(n)
        if log:
            log(f"    n={n}: {status}" + ("" if status == "ok" else f" ({_why(status, replies)[:100]})"))
        if status == "ok":
            out["n_full"] = n
            break
    else:
        out["n_full"] = old
        if tries:
            out["settle_size"] = f"no run at n in {tries} passed: today's rule (n = {old})"
    lat = bytes_n(spec, LAT_BYTES)
    if lat is not None and 2 * SMOKE_N <= lat < out["n_full"]:
        out["n_lat"] = lat
    return out


def settled(spec: dict[str, Any] | None) -> bool:
    """Whether a spec has been through settling (it has its full size by bytes)."""
    return bool(spec) and "n_full" in spec


def nbytes_note(spec: dict[str, Any]) -> str:
    """One line: the per-rank input bytes at n_full (for progress lines)."""
    b, _ = input_bytes(spec, int(spec.get("n_full", 0) or 1))
    return f"n_full={spec.get('n_full')} ({b / 2**20:.1f} MiB/rank)" + (
        f" output={spec['output']['mode']}" if "output" in spec else f" auto ({spec.get('settle', '')[:60]})"
    )


def renderer(cand: dict[str, Any], res: dict[str, Any], scrape_dir: Any, task_id: str = "") -> Any:
    """spec -> the task module source of harness record `res` of `cand`: the candidate's module with its inlined
    helpers, prepared once (generator/mined.py renders shipped tasks with it, `task_id` in the header)."""

    from mgbench.scrapers.harness.make.render import prepare, task_source
    from mgbench.scrapers.harness.make.splice import apply

    inl = res.get("inline") or {}
    text = apply((Path(scrape_dir) / cand["module_path"]).read_text(), inl)
    prep = prepare(text, bool((res.get("spec") or {}).get("numpy")))
    return lambda spec: task_source(cand, prep, spec, task_id, inl.get("spans"))


def settle_record(cand: dict[str, Any], res: dict[str, Any], scrape_dir: Path, log: Any = None) -> dict[str, Any]:
    """Add the settled keys to an accepted result's spec (in place; returned). A failure of settling itself
    (not of the task: those are recorded in the keys) leaves the spec unsettled and says why in "settle_error"."""
    try:
        done = settle_spec(renderer(cand, res, scrape_dir), res["spec"], log)
    except Exception as e:  # noqa: BLE001 - the result stays, unsettled, with the reason
        res["settle_error"] = f"{type(e).__name__}: {e}"[:300]
        return res
    res["spec"] = {**res["spec"], **done.keys}
    res["settle_seconds"] = done.seconds
    res.pop("settle_error", None)
    return res
