"""Why a harness attempt failed: named categories in one table, read top to bottom, first match wins.

`categorize` turns a failed `Attempt` into the `category: detail` of harness.jsonl's `reason` and
`final` (no adjustment of the spec can help, the search stops). Each entry of CATEGORIES says what it
matches (every given condition must hold) and how its detail is written. Order matters: the sandbox's
own verdicts (violation, timeout, crash) come before the rank error is read, the harness's markers
(a missing import, a skipped test) before the message's wording, and `search_exhausted`, the only
category that is not final, matches everything left. Adding a category: one entry here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from mgbench.scrapers.harness.run.sandbox import Attempt

_CLASS_OBJECT = re.compile(r"'[\w.]+' object")  # "'NCCLAllGatherDispatcher' object ...": not the class


@dataclass(frozen=True)
class Category:
    """One row of the table. `detail` is a format string over `reason` (the attempt's), `msg` (the rank
    error's message), `text` ("type: msg") and `group` (group 1 of `search` or `match`); a precision
    cuts a string (`{msg:.80}`); empty: the category alone."""

    name: str
    final: bool
    detail: str = ""
    status: str = ""  # the attempt's status is this (the rank error is not read)
    search: re.Pattern[str] | None = None  # found in `text`
    match: re.Pattern[str] | None = None  # matches the start of `msg`
    types: frozenset[str] = frozenset()  # the error's type is one of these
    msg_has: tuple[str, ...] = ()  # `msg` contains one of these
    words: tuple[str, ...] = ()  # `msg` without class names, lower-cased, contains one of these
    outside_candidate: bool = False  # the error was not raised in the candidate's own code


CATEGORIES: tuple[Category, ...] = (
    Category("sandbox_violation", True, "{reason}", status="violation"),
    Category("timeout", True, status="timeout"),
    Category("crashed", True, "{reason}", status="crashed"),
    Category("needs_import", True, "{group}", search=re.compile(r"mgbench-missing-import: ([\w.]+)")),
    Category("skipped_by_test", True, "{group:.80}", search=re.compile(r"mgbench-skipped-by-test: (.*)")),
    Category("memory_limit", True, types=frozenset({"MemoryError"})),
    Category("memory_limit", True, msg_has=("can't allocate memory",)),
    # the last: Triton-distributed's ModuleProxy picks the CUDA or HIP backend module; on CPU neither
    Category("needs_gpu", True, "{msg:.80}", words=("cuda", "nccl", "triton", "only one module can be active")),
    # a package the task contract excludes (torch's own test utilities need expecttest)
    Category(
        "needs_import",
        True,
        "{group}",
        types=frozenset({"ModuleNotFoundError"}),
        match=re.compile(r"No module named '([\w.]+)'"),
    ),
    Category(
        "load_error",
        True,
        "{text:.100}",
        outside_candidate=True,
        types=frozenset({"NameError", "ImportError", "ModuleNotFoundError"}),
    ),
    Category("search_exhausted", False, "{text:.120}"),
)


class _Failed:
    """What the table's conditions read of an attempt; the rank error only once a condition needs it."""

    def __init__(self, at: Attempt):
        self.at = at

    @cached_property
    def error(self) -> dict[str, Any]:
        return self.at.error()

    @cached_property
    def text(self) -> str:
        return f"{self.error['type']}: {self.error['msg']}"

    @cached_property
    def bare(self) -> str:
        return _CLASS_OBJECT.sub("object", self.error["msg"]).lower()


def _group(cat: Category, seen: _Failed) -> str | None:
    """'' when `cat` matches without a regex, group 1 when its regex matches, None when it does not match."""
    if cat.status:
        return "" if seen.at.status == cat.status else None
    if cat.types and seen.error["type"] not in cat.types:
        return None
    if cat.msg_has and not any(s in seen.error["msg"] for s in cat.msg_has):
        return None
    if cat.words and not any(w in seen.bare for w in cat.words):
        return None
    if cat.outside_candidate and seen.error.get("in_candidate"):
        return None
    if cat.search or cat.match:
        found = cat.search.search(seen.text) if cat.search else cat.match.match(seen.error["msg"])
        return found.group(1) if found else None
    return ""


def classify(at: Attempt) -> tuple[Category, str]:
    """The first category of CATEGORIES matching the failed attempt `at`, and its detail."""
    seen = _Failed(at)
    for cat in CATEGORIES:
        group = _group(cat, seen)
        if group is None:
            continue
        fields = {"reason": at.reason, "group": group}
        if not cat.status:
            fields |= {"msg": seen.error["msg"], "text": seen.text}
        return cat, cat.detail.format(**fields)
    raise AssertionError("the last category matches every attempt")


def categorize(at: Attempt) -> tuple[str, bool]:
    """(category: detail, final) of a failed attempt; final means no adjustment can help."""
    cat, detail = classify(at)
    return (f"{cat.name}: {detail}" if cat.detail else cat.name), cat.final
