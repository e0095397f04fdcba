"""Assertions shared by the per-dimension family suites (tests/test_families_dims_*.py)."""
from __future__ import annotations

from typing import Any


def assert_dims_covered(records: list[Any], skips: list[Any], families_by_dim: dict[str, list[str]]) -> None:
    """No skipped combination; every task runs at 2, 4, 8; each dim has exactly its >= 3 families."""
    assert not skips
    by_dim: dict[str, set[str]] = {}
    for r in records:
        assert r.spec["world_sizes"] == [2, 4, 8], r.task_id
        by_dim.setdefault(r.spec["dims"][0], set()).add(r.spec["family"])
    for dim, fams in families_by_dim.items():
        assert by_dim[dim] == set(fams) and len(fams) >= 3, dim


def assert_all_pass(records: list[Any], results: list[Any], min_tasks: int) -> None:
    assert len(results) == len(records) >= min_tasks
    failed = [(r.task_id, r.reason) for r in results if r.status != "passed"]
    assert not failed, failed[:5]
    assert all(r.tolerance["atol_rel"] <= 0.1 for r in results)


def assert_degenerate_rejected(results: list[Any]) -> None:
    for r in results:
        for kind in ("zeros", "other_seed", "echo_inputs", "input_insensitive"):
            assert r.checks[f"rejects_{kind}"], (r.task_id, kind)
