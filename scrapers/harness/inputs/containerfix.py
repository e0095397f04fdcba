"""Proposals for arguments that are containers or scalars rather than tensors: parameters with gradients,
dicts read through a list of keys or tested for membership, and floats that must differ between seeds."""

from __future__ import annotations

import re
from typing import Any

from mgbench.scrapers.harness.inputs.candidate import Candidate
from mgbench.scrapers.harness.inputs.failure import Failure
from mgbench.scrapers.harness.make.specedit import _all_args, _set_arg, _with

HYPER_RE = re.compile(r"eps|lr$|momentum|alpha|beta|^p$|scale|norm|clip|decay|temperature|dropout")  # settings
KEYS = ["w0", "w1"]  # the entries of a synthesized dict (per rank, like the dicts of `.items()`)


def grad_fix(spec: dict[str, Any], cand: Candidate, names: set[str] | None = None) -> list[dict[str, Any]]:
    """Code that reads `p.grad` (a gradient norm, a gradient all-reduce) got tensors without gradients
    (filtered out, or norms of zeros): lists of tensors (or a tensor named like parameters) become
    parameters whose gradients are set."""
    if not re.search(r"\.grad\b", cand.text):
        return []
    return [
        _set_arg(
            spec, a["name"], {**a, "kind": "tensors", "count": a.get("count", "ws"), "grads": True, "dtype": "float32"}
        )
        for a in _all_args(spec)
        if (names is None or a["name"] in names)
        and not a.get("grads")
        and (a["kind"] == "tensors" or a["kind"] == "tensor" and re.search(r"param|grad", a["name"].lower()))
    ]


def _dict_of_tensors(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "kind": "namespace",
        "dict": True,
        "fields": [{"name": k, "kind": "tensor", "shape": ["n"], "dtype": "float32"} for k in KEYS],
    }


def container_fixes(spec: dict[str, Any], f: Failure, cand: Candidate) -> list[dict[str, Any]]:
    """`data[key]` with `key` from a loop over another argument (Megatron `broadcast_data(keys, data, ...)`):
    `data` is a dict of tensors and the iterated argument its keys. `x in self.buckets` on a tensor: the
    tensor is an (empty) dict."""
    line, low, out = f.line, f.low, []
    args = {a["name"]: a for a in _all_args(spec)}
    if "tensors used as indices" in low or "only integer tensors" in low:
        loops = cand.loops
        for user, key in re.findall(r"(\w+)\s*\[\s*(\w+)\s*\]", line):
            src = loops.get(key)
            if user in args and src in args and args[user]["kind"] == "tensor":
                s = _set_arg(spec, user, _dict_of_tensors(user))
                out.append(_set_arg(s, src, {"name": src, "kind": "const", "value": list(KEYS)}))
    if "__contains__ only supports" in low:
        for user in re.findall(r"\bin\s+(?:self\.)?(\w+)", line):
            if user in args and args[user]["kind"] == "tensor":
                out.append(_set_arg(spec, user, {"name": user, "kind": "namespace", "dict": True, "fields": []}))
    return out


def scalar_draws(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """An input-insensitive run whose inputs include floats (`reduce_max_stat(stat: float)`): the floats are
    drawn per rank and seed instead of fixed (not settings such as `eps`, `lr` or `max_norm`)."""

    def drawn(a: dict[str, Any]) -> bool:
        return a["kind"] == "float" and not a.get("draw") and not HYPER_RE.search(a["name"].lower())

    if not any(drawn(a) for a in spec["args"]):
        return []
    return [_with(spec, lambda s: [a.update(draw=True) for a in s["args"] if drawn(a)])]
