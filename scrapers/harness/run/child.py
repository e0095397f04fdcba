"""Entry of one sandboxed rank: join gloo, confine, load the rendered candidate, run the harness."""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from mgbench.scrapers.harness.run import probe
from mgbench.validation.contract import load_module


def _copy_of(t: torch.Tensor, ins: list[torch.Tensor]) -> bool:
    """`t` equals one of the input tensors `ins` (shape, dtype and values)."""
    return any(t.shape == i.shape and t.dtype == i.dtype and torch.equal(t, i) for i in ins)


def _echo(out: Any, inputs: tuple) -> bool:
    """Every output tensor equals some input tensor (a copy of the inputs is no result)."""
    outs, ins = _tensors(out), _tensors(inputs)
    return bool(outs) and all(_copy_of(o, ins) for o in outs)


def _fresh(out: Any, inputs: tuple) -> Any:
    """The output with every tensor that is a copy of an input blanked: what the call computed (tensors and
    the plain values it returns, such as gathered lengths as Python numbers)."""
    ins = _tensors(inputs)

    def keep(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            return None if _copy_of(x, ins) else x
        if isinstance(x, (torch.nn.Module, torch.optim.Optimizer)):
            return [keep(t) for t in _tensors(x)]
        if isinstance(x, (list, tuple)):
            return [keep(v) for v in x]
        if isinstance(x, dict):
            return {k: keep(x[k]) for k in x}
        return x

    return keep(out)


def _tensors(x: Any) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, torch.optim.Optimizer):  # an optimizer argument: its parameters and gradients
        return [t.detach() for g in x.param_groups for p in g["params"] for t in (p, p.grad) if t is not None]
    if isinstance(x, torch.nn.Module):  # a synthesized model argument: its weights and gradients
        return [t.detach() for p in x.parameters() for t in (p, p.grad) if t is not None]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _tensors(v)]
    if isinstance(x, dict):
        return [t for k in sorted(x) for t in _tensors(x[k])]
    return []


class _LoadFailed(Exception):
    """The rendered module raised while it was being loaded (its cause is the error reported)."""


def run_harness(path: str, rank: int, ws: int, n: int) -> dict[str, Any]:
    """Call the harness at seed 0 (twice), seed 1 and at twice the size; fingerprints of each."""
    try:
        mod = load_module(path)
    except BaseException as e:  # noqa: BLE001 - tagged: a module that cannot load is not the harness's fault
        raise _LoadFailed() from e
    spec = mod._MG_SPEC
    inputs = mod._mg_inputs(spec, rank, ws, 0, "cpu", n)
    probe.COUNTS["calls"] = 0
    out = mod.solution(*inputs)
    calls = probe.COUNTS["calls"]
    res: dict[str, Any] = {
        "ok": True,
        "calls": calls,
        "out": probe.fingerprint(out),
        "has_tensor": bool(_tensors(out)),
        "echo": _echo(out, inputs),
    }
    res["again"] = probe.fingerprint(mod.solution(*mod._mg_inputs(spec, rank, ws, 0, "cpu", n)))
    other_in = mod._mg_inputs(spec, rank, ws, 1, "cpu", n)
    other = mod.solution(*other_in)
    res["other"] = probe.fingerprint(other)
    # what the call computed (outputs that are not copies of inputs) changes with the inputs
    res["fresh_varies"] = (
        probe.fingerprint(_fresh(out, inputs))["hash"] != probe.fingerprint(_fresh(other, other_in))["hash"]
    )
    res["aliased"] = probe.fingerprint(out)["hash"] != res["out"]["hash"]  # later calls overwrote it (a cache)
    try:
        res["scaled"] = probe.fingerprint(mod.solution(*mod._mg_inputs(spec, rank, ws, 0, "cpu", 2 * n)))
    except Exception as e:  # noqa: BLE001 - reported, the search decides
        res["scaled_error"] = probe.describe(e, path)
    return res


def confine_rank(
    rank: int, ws: int, port: int, source: str, tmp: str, timeout_s: float, mem_mb: int, tracer: bool = False
) -> str:
    """Confine this rank process before any mined code runs: work in `tmp` with a scrubbed environment and
    one thread, join the gloo group, write the candidate file, then (`tracer`: the probe's op tracer) the
    address-space limit and the audit hook. Returns the candidate file's path."""
    path = os.path.join(tmp, f"candidate_r{rank}.py")
    os.chdir(tmp)
    probe.scrub_env(tmp)
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=ws,
        timeout=timedelta(seconds=timeout_s),
    )
    with open(path, "w") as f:
        f.write(source)
    if tracer:
        probe.install_tracer()
    probe.limit_memory(mem_mb)
    probe.install_audit_hook(os.path.realpath(tmp))
    return path


def send_reply(conn: Any, reply: dict[str, Any]) -> None:
    """Send this rank's reply (with the audit hook's violations) and end the process at once."""
    reply["violations"] = list(probe.VIOLATIONS)
    try:
        conn.send(reply)
    finally:
        os._exit(0)


def rank_main(
    rank: int, ws: int, port: int, source: str, n: int, conn: Any, tmp: str, timeout_s: float, mem_mb: int
) -> None:
    path = os.path.join(tmp, f"candidate_r{rank}.py")
    try:
        confine_rank(rank, ws, port, source, tmp, timeout_s, mem_mb, tracer=True)
        reply = run_harness(path, rank, ws, n)
    except _LoadFailed as e:
        reply = {"ok": False, "error": {**probe.describe(e.__cause__, path), "at_load": True}}
    except BaseException as e:  # noqa: BLE001 - everything the candidate does wrong is data
        reply = {"ok": False, "error": probe.describe(e, path)}
    send_reply(conn, reply)
