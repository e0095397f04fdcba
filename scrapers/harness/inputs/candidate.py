"""A mined candidate as the harness search sees it: its record plus what rules read from its code (once)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mgbench.scrapers.harness.inputs.discovery.initattrs import class_names, init_attrs, used_attrs
from mgbench.scrapers.harness.make.specedit import loop_aliases


@dataclass(frozen=True)
class Candidate:
    """`record` is the candidates.jsonl line (id, entry, kind, params, docstring, ...); `text` the module
    source the harness renders; `loops` its loop aliases (`for chunk in model` -> chunk: model); for a
    method, `init` the attributes its class's `__init__` sets that can be drawn and `defined` the names the
    class defines."""

    record: dict[str, Any]
    text: str = ""
    loops: dict[str, str] = field(default_factory=dict)
    init: dict[str, dict[str, Any]] = field(default_factory=dict)
    defined: frozenset[str] = frozenset()

    @classmethod
    def build(cls, record: dict[str, Any], module_text: str) -> Candidate:
        """Read the candidate's code once (search.synthesize)."""
        owner = record["entry"].split(".")[0] if record["kind"] == "method" else ""
        return cls(
            record,
            module_text,
            loop_aliases(module_text),
            init_attrs(module_text, owner, used_attrs(module_text, record["entry"])) if owner else {},
            frozenset(class_names(module_text, owner)) if owner else frozenset(),
        )

    @classmethod
    def of(cls, cand: Candidate | dict[str, Any]) -> Candidate:
        """A Candidate as is, or from a record dict that may carry the code-derived parts under the
        private keys `_text`, `_loops`, `_init`, `_defined` (what tests and older callers pass)."""
        if isinstance(cand, Candidate):
            return cand
        text = cand.get("_text", "")
        record = {k: v for k, v in cand.items() if k not in ("_text", "_loops", "_init", "_defined")}
        return cls(
            record,
            text,
            cand["_loops"] if "_loops" in cand else loop_aliases(text),
            cand.get("_init") or {},
            frozenset(cand.get("_defined", ())),
        )

    @property
    def kind(self) -> str:
        return self.record.get("kind", "")

    @property
    def entry(self) -> str:
        return self.record.get("entry", "")

    @property
    def owner(self) -> str:
        """The class of a method ('' otherwise)."""
        return self.entry.split(".")[0] if self.kind == "method" else ""

    @property
    def docstring(self) -> str | None:
        return self.record.get("docstring")
