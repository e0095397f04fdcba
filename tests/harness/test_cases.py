"""Parametrized tests start from their first case (scrapers/harness/inputs/discovery/cases.py)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    "decorators,expected",
    [
        (["pytest.mark.parametrize('tp,pp', [(2, 1), (1, 1)])"], {"tp": 2, "pp": 1}),
        (["pytest.mark.parametrize(('a', 'b'), [pytest.param(3, None, id='x')])"], {"a": 3, "b": None}),
        (['parameterize("async_op", [True, False])'], {"async_op": True}),
        (
            [
                "pytest.mark.parametrize('n', [8 * 7])",
                "pytest.mark.parametrize('m', CASES)",
                "pytest.mark.parametrize('k', [])",
                "functools.lru_cache(None)",
                "pytest.mark.parametrize(NAMES, [(1, 2)])",
                "pytest.mark.parametrize('f', [torch.randn])",
                "pytest.mark.parametrize('e', [...])",
                "pytest.mark.parametrize('i', [1e999])",
                "pytest.mark.parametrize('d', [{1: 2}])",
                "pytest.mark.parametrize('fixture', ['a'], indirect=True)",
            ],
            {},
        ),
        (["pytest.mark.parametrize('d', [{'a': (1, 2)}])"], {"d": {"a": [1, 2]}}),
    ],
)
def test_parametrize_cases(decorators, expected):
    """Only values that survive the spec's JSON round trip unchanged; names given as a variable, non-dtype
    `torch.` attributes, Ellipsis, infinities, int-keyed dicts and fixtures (`indirect=`) are skipped."""
    from mgbench.scrapers.harness.inputs.discovery.cases import parametrized

    assert parametrized({"decorators": decorators}) == expected


def test_parametrized_world_sizes_ranks_and_groups_stay_the_harnesss():
    from mgbench.scrapers.harness.inputs.initial import initial_spec

    cand = {
        "entry": "t",
        "kind": "function",
        "params": [{"name": n, "kind": "positional"} for n in ("world_size", "src_rank", "group", "tp")],
        "decorators": ["pytest.mark.parametrize('world_size,src_rank,group,tp', [(1, 3, 'x', 2)])"],
    }
    assert [a.get("expr", a.get("value")) for a in initial_spec(cand)["args"]] == ["ws", "0", "world", "2"]
