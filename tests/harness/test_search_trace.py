"""The search's queue keeps which rules proposed each spec, and `--trace` (synthesize's trace) names them
for every attempt. Ranks are replaced by recorded replies (what sandbox.run_ranks returns), so the search
loop runs without processes."""

from __future__ import annotations

import json

from mgbench.scrapers.harness.inputs import search
from mgbench.scrapers.harness.inputs.search import Budget, Queue, synthesize
from mgbench.scrapers.harness.run.sandbox import Attempt


def test_the_queue_pops_front_first_and_accumulates_proposers_per_spec():
    a, b = {"x": 1}, {"x": 2}
    q = Queue([("initial", a)])
    q.push([("rule_one", b), ("rule_two", a)])
    assert [q.pop(), q.pop(), q.pop()] == [b, a, a]
    assert not q
    assert q.by(json.dumps(a, sort_keys=True)) == "initial,rule_two"
    assert q.by(json.dumps(b, sort_keys=True)) == "rule_one"
    assert q.by("{}") == "?"


MODULE = "import torch.distributed as dist\n\n\ndef f(x):\n    dist.all_reduce(x)\n    return x\n"
CAND = {
    "id": "traced",
    "entry": "f",
    "kind": "function",
    "qualname": "f",
    "docstring": None,
    "params": [{"name": "x", "kind": "positional", "annotation": None, "default": None}],
    "provenance": {
        "repo": "example/traced",
        "commit": "0" * 40,
        "path": "m.py",
        "line_start": 1,
        "line_end": 6,
        "license": "MIT",
        "url": "https://example.invalid/m.py",
    },
}


def _error(msg: str, line: str) -> Attempt:
    e = {"type": "TypeError", "msg": msg, "line": line, "in_candidate": True}
    return Attempt("error", [{"ok": False, "error": e}, {"ok": False, "error": e}])


def test_trace_names_the_rule_that_proposed_each_attempt(monkeypatch):
    """First attempt: the initial guess, failing with a missing argument; the second attempt is the
    missing-argument rule's proposal, failing with an error no rule answers: the search ends there."""
    replies = iter(
        [
            _error("f() missing 1 required positional argument: 'y'", "return f(x)"),
            _error("mgbench-missing-import: apex", "import apex"),
        ]
    )
    monkeypatch.setattr(search, "run_ranks", lambda *a, **k: next(replies))
    lines: list[str] = []
    res = synthesize(CAND, MODULE, Budget(seconds=60, attempts=5), lines.append)
    assert not res.accepted and res.attempts == 2
    assert "(by initial)" in lines[0] and "x:tensor" in lines[0]
    assert "(by missing_argument)" in lines[1] and "y:" in lines[1]
