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


def eval_mutant(out: Any, task_id: str, old: str, new: str, tmp_path: Any, seed: int | None = None) -> dict:
    """`mgbench eval` (gloo, 2 ranks, one untimed trial) of task `task_id`'s reference with the one
    occurrence of `old` replaced by `new`: a reference missing a step must come back incorrect."""
    from validation.eval.runner import EvalOptions, evaluate
    from validation.eval.tasks import load_tasks_folder

    source = (out / "tasks" / f"{task_id}.py").read_text()
    assert source.count(old) == 1, old
    path = tmp_path / f"{task_id}.py"
    path.write_text(source.replace(old, new))
    opts = EvalOptions(
        world_size=2,
        backend="gloo",
        size="smoke",
        trials=1,
        timeout_s=30.0,
        budget_s=0.2,
        static=False,
        timing=False,
        **({"seed": seed} if seed is not None else {}),
    )
    return evaluate(load_tasks_folder(out)[task_id], path, opts)
