"""The first spec the search tries for a candidate: a curated entry's reviewed inputs first, over what the
discovery aid made of the parameters the entry does not name.

A candidate the driver matched to a reviewed `ship` entry of the curated registry (scrapers/harness/curated)
carries the entry's inputs as `cand["curated"]`; they replace, argument by argument, the spec that
discovery/guess.py builds from the repository's evidence, captured test arguments and name guesses, and
the entry's object state and full size come with them. A candidate without an entry keeps the guessed
spec: the search runs it, but the level-4 gate ships no task whose curated inputs were not accepted
unchanged (scrapers/level4/gate.py, its `reviewed` row)."""

from __future__ import annotations

from typing import Any

from mgbench.scrapers.harness.inputs.discovery.guess import evidence_spec
from mgbench.scrapers.harness.inputs.discovery.name_guess import call_params


def initial_spec(cand: dict[str, Any], module_text: str | None = None) -> dict[str, Any]:
    """The spec the search starts from (see first_spec)."""
    return first_spec(cand, module_text)[0]


def first_spec(cand: dict[str, Any], module_text: str | None = None) -> tuple[dict[str, Any], dict[str, str]]:
    """The discovery aid's spec (discovery/guess.py `evidence_spec`: required parameters from the repository's
    evidence, captured arguments, a parametrized test's first case, name guesses) with the curated entry's
    inputs laid over it when the candidate has one; with what changed per argument name."""
    spec, changed = evidence_spec(cand, module_text)
    if cand.get("curated"):
        pin_curated(cand, spec, changed)
    return spec, changed


def pin_curated(cand: dict[str, Any], spec: dict[str, Any], changed: dict[str, str]) -> None:
    """The registry's reviewed inputs (`cand["curated"]`: scrapers/harness/curated, `Entry.pinned()`) replace
    what the evidence, the capture and the guesses made of the arguments they name, in place; a named parameter
    with a default is passed by keyword; an autograd.Function's record has no parameters, so its
    arguments come in the entry's order. The entry's object state goes in `attrs`, and its `full_n` in
    `curated_n` (the full size settling verifies instead of the bytes-per-rank rule)."""
    pin = cand["curated"]
    args, have = spec["args"], {a["name"]: i for i, a in enumerate(spec["args"])}
    defaulted = {p["name"] for p in call_params(cand) if p.get("default") is not None or p["kind"] == "kwonly"}
    for name, got in pin.get("args", {}).items():
        why = f"curated {pin['id']}"
        if name in have:
            old = args[have[name]]
            args[have[name]] = {**got, **({"keyword": True} if old.get("keyword") else {})}
            changed[name] = f"{old['kind']}->{got['kind']} by {why}"
        else:
            args.append({**got, **({"keyword": True} if name in defaulted or have else {})})
            changed[name] = why
    spec["attrs"] = [dict(a) for a in pin.get("attrs", {}).values()]
    if pin.get("full_n"):
        spec["curated_n"] = int(pin["full_n"])
