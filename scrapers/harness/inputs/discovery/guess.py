"""A candidate's spec as the discovery aid guesses it: the required parameters from the repository's
evidence (call sites and tests, docstring, shape comments, body usage), the arguments a test caller was
seen to pass (capture/), a parametrized test's first case, and name guesses (name_guess.py) for the rest.
The search starts from this spec only where no curated entry names the inputs (inputs/initial.py lays a
curated entry's inputs over it); what ships is decided by the curated entry and the gate."""

from __future__ import annotations

from typing import Any

from mgbench.scrapers.harness.inputs.discovery.cases import case_arg, parametrized
from mgbench.scrapers.harness.inputs.discovery.evidence_args import (
    bf16,
    decide,
    integer_numbers,
    split_buffers,
    with_evidence,
)
from mgbench.scrapers.harness.inputs.discovery.evidence_text import bf16_reason, gather
from mgbench.scrapers.harness.inputs.discovery.name_guess import call_params, guess_arg
from mgbench.scrapers.harness.inputs.discovery.roles import dim_indices, related_ranks, with_role


def evidence_spec(
    cand: dict[str, Any], module_text: str | None = None, use_evidence: bool = True
) -> tuple[dict[str, Any], dict[str, str]]:
    """The required parameters from the repository's evidence first (`cand["evidence"]`: cached call sites
    and tests; the entry's docstring, shape comments and body in `module_text`), then name guesses; a
    parametrized test's first case is taken as given, and a test caller's captured arguments
    (`cand["captured"]`) replace what the evidence and the guesses made of them. Parameters with defaults
    are left to their defaults. Returned with what the evidence changed per argument name (`tensor->bool by
    body`, `bf16 by path`), for reports and benchmarks/harness_input_evidence.py; without `use_evidence`,
    name guesses only (the spec before the evidence, to compare)."""
    args = []
    seen_kw = False
    cases = parametrized(cand)
    required = [p for p in call_params(cand) if p["kind"] not in ("vararg", "varkw") and p.get("default") is None]
    clues = gather(cand, module_text, [p["name"] for p in required]) if use_evidence else {}
    changed: dict[str, str] = {}
    context = f"{cand['entry']} {(cand.get('provenance') or {}).get('path', '')}"
    ranked: set[str] = set(cases)  # names whose rank the evidence (or a test case) gave: relations keep them
    for p in call_params(cand):
        if p["kind"] in ("vararg", "varkw"):
            if p["kind"] == "vararg":
                seen_kw = True
            continue
        if p.get("default") is not None:
            seen_kw = True
            continue
        a = guess_arg(p["name"], p.get("annotation"), cand.get("docstring"))
        if p["name"] in cases and not _harness_owned(a):
            a = case_arg(p["name"], cases[p["name"]])  # world sizes, ranks and groups stay the harness's
        elif use_evidence:
            a, by_role = with_role(a, context)
            verdict = decide(clues.get(p["name"], []), a["kind"])
            a, why = with_evidence(a, verdict)
            if verdict is not None and (verdict.ndim or verdict.least):
                ranked.add(p["name"])
            if why or by_role:
                changed[p["name"]] = "; ".join(w for w in (by_role, why) if w)
        if p["kind"] == "kwonly" or seen_kw:
            a["keyword"] = True
        args.append(a)
    for n, why in ({**related_ranks(args, ranked), **dim_indices(args, ranked)} if use_evidence else {}).items():
        _also(changed, n, why)
    for n in integer_numbers(args) if use_evidence else []:
        changed[n] = changed.get(n, "tensor->float by body") + "; float->int by dtype"
    for n in split_buffers(args) if use_evidence else []:
        _also(changed, n, "sized by uneven splits")
    reason = bf16_reason(cand, module_text) if use_evidence else None
    if reason:
        given = {n for n, cs in clues.items() if any(c.dtype for c in cs)} | set(cases)
        for n in bf16(args, given):
            _also(changed, n, f"bf16 by {reason}")
    if use_evidence:
        _captured(cand, args, changed)
    spec = {"entry": cand["entry"], "kind": cand["kind"], "args": args, "attrs": [], "n_attr": 8}
    return spec, changed


def _captured(cand: dict[str, Any], args: list[dict[str, Any]], changed: dict[str, str]) -> None:
    """Arguments a test caller was seen to pass (`cand["captured"]`: capture/) replace what the evidence and
    the guesses made of them, in place: what a real caller passes comes first."""
    cap = cand.get("captured") or {}
    # process groups, world sizes and ranks stay the harness's (a test's None is no group, its world of 2
    # no world size), as for a parametrized test's cases
    got_args = {k: v for k, v in (cap.get("args") or {}).items() if not _harness_owned(guess_arg(k, None, None))}
    for i, a in enumerate(args):
        got = got_args.get(a["name"])
        if got is not None and a["kind"] != "group":
            args[i] = {**got, **({"keyword": True} if a.get("keyword") else {})}
            changed[a["name"]] = f"{a['kind']}->{got['kind']} by capture {cap.get('caller', '')}"
    if not args and cand["kind"] == "autograd_function":
        # its record has no parameters (the search adds `forward`'s from errors): the captured ones, in
        # call order up to the first that could not be fitted
        for name in cap.get("params") or []:
            if name not in got_args:
                break
            args.append(dict(got_args[name]))
            changed[name] = f"captured by {cap.get('caller', '')}"


def is_captured(why: str, cand: dict[str, Any]) -> bool:
    """Whether `why` (what evidence_spec says changed an argument) is the capture's replacement."""
    caller = (cand.get("captured") or {}).get("caller", "")
    return bool(caller) and (why.endswith(f" by capture {caller}") or why == f"captured by {caller}")


def _harness_owned(a: dict[str, Any]) -> bool:
    return a["kind"] == "group" or a["kind"] == "int" and a["expr"] in ("ws", "0")


def _also(changed: dict[str, str], name: str, why: str) -> None:
    """Add `why` to what the evidence changed of `name`."""
    changed[name] = (changed[name] + "; " if name in changed else "") + why
