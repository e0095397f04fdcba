"""The failure of one harness attempt, parsed once: what every search rule reads (rules/order.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

NO_ATTR_RE = re.compile(r"'(\w+)' object has no attribute '(\w+)'")
KEY_ERROR_RE = re.compile(r"'(\w+)'")


@dataclass(frozen=True)
class Failure:
    """An error raised by a rank (sandbox.Attempt.error, or a probe's `scaled_error`), with the matches
    several rules share computed once."""

    type: str = ""
    msg: str = ""
    line: str = ""  # the failing source line ('' when unknown)
    ws: int = 2  # the world size of the run that failed
    in_candidate: bool = False  # raised in the candidate's own code (not in torch or the harness)
    at_load: bool = False  # raised while loading the module (not the call)

    @classmethod
    def of(cls, err: Failure | dict[str, Any]) -> Failure:
        """From an error record as the rank reports it (keys type, msg, line, in_candidate, at_load, ws)."""
        if isinstance(err, Failure):
            return err
        return cls(
            type=err.get("type", ""),
            msg=err.get("msg", ""),
            line=err.get("line", ""),
            ws=err.get("ws", 2),
            in_candidate=bool(err.get("in_candidate")),
            at_load=bool(err.get("at_load")),
        )

    def at_world_size(self, ws: int) -> Failure:
        """The same failure as raised at world size `ws` (the confirmation run's)."""
        return replace(self, ws=ws)

    @cached_property
    def low(self) -> str:
        return self.msg.lower()

    @cached_property
    def no_attr(self) -> re.Match[str] | None:
        """`'Tensor' object has no attribute 'foo'`: groups (owner type, attribute)."""
        return NO_ATTR_RE.search(self.msg)

    @cached_property
    def missing_key(self) -> str | None:
        """The key of a `KeyError: 'x'`."""
        k = KEY_ERROR_RE.fullmatch(self.msg.strip()) if self.type == "KeyError" else None
        return k.group(1) if k else None
