"""Proposals after a run that raised nothing but is no task yet (search.judge: communicated nothing,
insensitive to its inputs, degenerate; or does not scale). Not failure rules: they read no error."""

from __future__ import annotations

from typing import Any

from mgbench.scrapers.harness.inputs.candidate import Candidate
from mgbench.scrapers.harness.inputs.containerfix import grad_fix, scalar_draws
from mgbench.scrapers.harness.inputs.discovery.name_guess import call_params, guess_arg
from mgbench.scrapers.harness.inputs.rules.base import Spec
from mgbench.scrapers.harness.inputs.rules.sizes import GLOBAL_SHAPES
from mgbench.scrapers.harness.make.specedit import _all_args, _shape_all, _with
from mgbench.scrapers.harness.make.specs import OPTIM_PARAM_KINDS


def unscaled_state(spec: Spec) -> list[Spec]:
    """A method's tensor state as inputs (drawn per rank at the harness's size like the arguments, not at
    the fixed attribute size): for a harness that does not scale or communicates nothing."""
    return (
        [{**spec, "state": True}]
        if not spec.get("state")
        and any(a["kind"] in ("tensor", "tensors", "module", *OPTIM_PARAM_KINDS) for a in spec.get("attrs", []))
        else []
    )


def _fwd_bwd(spec: Spec) -> list[Spec]:
    """An autograd Function's collectives may run in its backward: all arguments positional, as `apply`
    takes them."""
    return (
        [
            {
                **s,
                "kind": "function",
                "entry": "_mg_fwd_bwd",
                "backward_of": spec["entry"],
                "args": [{k: v for k, v in a.items() if k != "keyword"} for a in s["args"]],
            }
            # a curated spec's shapes are the reviewer's: only they are tried
            for s in ((spec,) if spec.get("curated_n") else (_shape_all(spec, ["n", "n"]), spec))
        ]
        if spec["kind"] == "autograd_function"
        else []
    )


def _defaults(spec: Spec, cand: Candidate) -> list[Spec]:
    """Parameters that had defaults passed (a flag as True)."""
    have, out = {a["name"] for a in spec["args"]}, []
    for p in call_params(cand.record):
        if p["name"] not in have and p["kind"] in ("positional", "kwonly") and p.get("default") is not None:
            a = guess_arg(p["name"], p.get("annotation"), cand.docstring)
            if a["kind"] == "bool":
                a["value"] = True
            a["keyword"] = True
            out.append(_with(spec, lambda s, a=a: s["args"].append(a)))
    return out


def _flags(spec: Spec) -> list[Spec]:
    """Every flag guessed False set (`if self.enabled:` gates): all at once, then each alone."""
    flags = [a["name"] for a in _all_args(spec) if a["kind"] == "bool" and a.get("value") is False]
    out = []
    for group in [flags] + ([[f] for f in flags] if len(flags) > 1 else []):

        def flip(s: dict[str, Any], group: list[str] = group) -> None:
            for a in _all_args(s):
                if a["name"] in group and a["kind"] == "bool":
                    a["value"] = True

        out.append(_with(spec, flip))
    return out


def no_collective_named(spec: Spec, cand: Candidate) -> list[tuple[str, Spec]]:
    """(proposal name, spec) after a run that communicated nothing (or was degenerate), in the order tried:
    an autograd Function runs forward and backward; tensors read as parameters get gradients, floats are
    drawn per seed; a method works on its object's tensor attributes (make them inputs), then parameters
    that had defaults are passed; last, every flag guessed False is set (`if self.enabled:` gates)."""
    parts = [
        ("fwd_bwd", _fwd_bwd(spec)),
        ("grad_params", grad_fix(spec, cand)),
        ("scalar_draws", scalar_draws(spec)),
        ("unscaled_state", unscaled_state(spec)),
        ("defaults", _defaults(spec, cand)),
        ("global_shapes", [_shape_all(spec, shp) for shp in GLOBAL_SHAPES[1:4]]),
        ("flags", _flags(spec)),
    ]
    return [(f"degenerate.{name}", s) for name, specs in parts for s in specs]
