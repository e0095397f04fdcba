"""Fixtures' work and assertions shared by the family suites (tests/test_families_*.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

import pytest


class FamilySet(NamedTuple):
    """Families generated into `out`, and the validation results of the chosen records."""

    out: Path
    records: list[Any]
    skips: list[Any]
    results: list[Any]

    def module(self, task_id: str) -> ModuleType:
        """The generated task module of `task_id`, imported afresh."""
        from mgbench.validation.contract import load_module

        return load_module(self.out / "tasks" / f"{task_id}.py")


def validate_records(out: Path, records: list[Any], world_size: int = 2) -> list[Any]:
    """Validate `records` of the tasks in `out` on one gloo rank pool of `world_size` ranks."""
    from mgbench.validation.run import validate

    ids = [r.task_id for r in records]
    return validate(out, out / "results.jsonl", world_sizes=[world_size], quiet=True, task_ids=ids)


def suite_generated(folder: str, families: list[str], dtypes: list[str], suite: str = "pkb") -> Any:
    """A module-scoped fixture `generated`: (out, manifest records) of `families` of a peer suite rendered in
    `dtypes` into a fresh folder named `folder`. Bind it to the name: `generated = suite_generated(...)`."""

    @pytest.fixture(scope="module")
    def generated(tmp_path_factory: Any) -> tuple[Path, list[dict]]:
        from mgbench.generator import generate
        from mgbench.store import load_manifest

        out = tmp_path_factory.mktemp(folder)
        generate(out, families=families, dtypes=dtypes, suites=(suite,))
        return out, load_manifest(out)

    return generated


def validate_generated(generated: tuple[Path, list[dict]], world_size: int = 2, family: str | None = None) -> list:
    """Validation results of the generated tasks (of `family` only, if given) on one gloo pool of `world_size`."""
    from mgbench.validation.run import validate

    out, recs = generated
    ids = [r["task_id"] for r in recs if family is None or r["family"] == family]
    return validate(out, out / f"r{world_size}.jsonl", world_sizes=[world_size], task_ids=ids, quiet=True)


def family_set(
    out: Path,
    families: list[str],
    *,
    dtypes: list[str] | None = None,
    world_size: int = 2,
    choose: Callable[[list[Any]], list[Any]] | None = None,
) -> FamilySet:
    """Generate `families` into `out` (every dtype unless `dtypes`), then validate the records `choose`
    keeps (all of them by default) at `world_size`; the set's records are the chosen ones."""
    from mgbench.generator import generate

    records, skips = generate(out, families=families, **({"dtypes": dtypes} if dtypes else {}))
    chosen = records if choose is None else choose(records)
    return FamilySet(out, chosen, skips, validate_records(out, chosen, world_size))


def family_suite(folder: str, families: list[str], **options: Any) -> Any:
    """A module-scoped fixture of a family suite: the FamilySet of `families` generated into a fresh folder
    named `folder` and validated (family_set's `options`). Bind it to the fixture's name in the suite:
    `apps = family_suite("app_patterns", FAMILIES)`."""

    @pytest.fixture(scope="module")
    def suite(tmp_path_factory: Any) -> FamilySet:
        return family_set(tmp_path_factory.mktemp(folder), families, **options)

    return suite


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
    from mgbench.validation.eval.runner import EvalOptions, evaluate
    from mgbench.validation.eval.tasks import load_tasks_folder

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
