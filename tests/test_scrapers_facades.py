"""Facade modules of the sources file: a repository's own re-export of torch.distributed is mined like
torch.distributed itself (nanotron's `from nanotron import distributed as dist`, DeepSpeed's comm)."""

from __future__ import annotations

import textwrap

import pytest

from mgbench.scrapers.extract import ExtractConfig, extract_source
from mgbench.scrapers.sources import load_sources

# how nanotron's tensor-parallel code reaches its collectives (nanotron/distributed.py does
# `from torch.distributed import *` and overrides a few of them)
NANOTRON_STYLE = {
    "from_package": ("from nanotron import distributed as dist", "dist.{op}(x, group=group)"),
    "module_alias": ("import nanotron.distributed as dist", "dist.{op}(x, group=group)"),
}


@pytest.mark.parametrize("style", sorted(NANOTRON_STYLE))
@pytest.mark.parametrize("op", ["all_reduce", "reduce_scatter_tensor", "all_gather_into_tensor"])
def test_nanotron_facade_of_the_sources_file_mines_its_collectives(style, op):
    imp, call = NANOTRON_STYLE[style]
    src = textwrap.dedent(
        f"""
        {imp}

        def reduce_from_tp(x, group):
            {call.format(op=op)}
            return x
        """
    )
    cfg = ExtractConfig(facades=load_sources().facades)
    res = extract_source(src.encode(), "src/nanotron/parallel/tensor_parallel/prims.py", cfg)
    (unit,) = res.units
    assert [(c.op, c.qualname, c.via) for c in unit.calls] == [(op, f"torch.distributed.{op}", "facade")]


def test_a_module_named_like_the_facade_without_it_is_not_mined():
    """Without the facade entry the same code yields nothing: the entry is what makes it minable."""
    src = "from nanotron import distributed as dist\n\ndef f(x, group):\n    dist.all_reduce(x, group=group)\n"
    res = extract_source(src.encode(), "m.py", ExtractConfig(facades={}))
    assert not res.units
