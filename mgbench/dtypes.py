"""The dtypes a task may have: one table of their spellings and facts.

The long name is torch's attribute name (`torch.bfloat16`) and the spelling of the taxonomy, the manifest
and every results file; the short name is the task id's (`l2-gemm_rs-bf16`); aliases are the other
spellings a `--dtype` filter accepts (torch's own: `torch.half`, `torch.float`, ...).

Standard library only (torch is imported by `DType.to_torch()` alone): validation imports it on GPU machines.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class DType:
    name: str  # long name = torch attribute name, e.g. "bfloat16"
    short: str  # the task id's spelling, e.g. "bf16"
    is_float: bool
    bits: int
    aliases: tuple[str, ...] = ()  # torch's other attribute names for it

    @property
    def torch_name(self) -> str:
        """The attribute of the torch module: torch.<torch_name>."""
        return self.name

    def to_torch(self) -> Any:
        """The torch dtype (imports torch)."""
        import torch

        return getattr(torch, self.torch_name)


DTYPES: tuple[DType, ...] = (
    DType("bfloat16", "bf16", True, 16),
    DType("float16", "fp16", True, 16, ("half",)),
    DType("float32", "fp32", True, 32, ("float",)),
    DType("float64", "fp64", True, 64, ("double",)),
    DType("int32", "i32", False, 32, ("int",)),
    DType("int64", "i64", False, 64, ("long",)),
)

NAMES: tuple[str, ...] = tuple(d.name for d in DTYPES)  # long names, the taxonomy's spelling
BY_NAME: dict[str, DType] = {d.name: d for d in DTYPES}
SHORT: dict[str, str] = {d.name: d.short for d in DTYPES}  # long name -> short name
# every accepted spelling (long, short, alias) -> its dtype
BY_SPELLING: dict[str, DType] = {s: d for d in DTYPES for s in (d.name, d.short, *d.aliases)}


def lookup(spelling: str) -> DType | None:
    """The dtype a long name, short name or alias spells (None: not a task dtype)."""
    return BY_SPELLING.get(spelling)


def long_name(spelling: str) -> str:
    """The long name of any accepted spelling ("bf16", "half", "float32" ...); other strings unchanged."""
    d = BY_SPELLING.get(spelling)
    return d.name if d else spelling
