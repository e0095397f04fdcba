"""Entry point of the generate stage: render every selected task, check it, write modules + manifest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from mgbench.generator.manifest import TaskRecord, record_for
from mgbench.generator.render import RenderError, render_module
from mgbench.generator.selection import Selection, kept_records, kept_skips
from mgbench.generator.spec import Skip, expand
from mgbench.paths import child_pythonpath
from mgbench.store import write_manifest
from mgbench.taxonomy import CORE_SUITE, load_taxonomy
from mgbench.templates import TEMPLATES_DIR


class GenerateError(RuntimeError):
    """Generation failed; the message names the template or task."""


def _import_check(paths: list[Path], templates: dict[str, str]) -> None:
    """Import every module in one child process; raise naming the template of the first failure."""
    env = {**os.environ, "PYTHONPATH": child_pythonpath(os.environ.get("PYTHONPATH"))}
    proc = subprocess.run(
        [sys.executable, "-m", "mgbench.validation.importcheck", "--oracle", *map(str, paths)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    if proc.returncode:
        lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
        if not lines:
            raise GenerateError(f"import check failed: {proc.stderr.strip().splitlines()[-1:]}")
        first = lines[0]
        stem = Path(first["path"]).stem
        raise GenerateError(
            f"template {templates.get(stem, '?')}: rendered module {stem} fails to "
            f"import: {first['error']}" + (f" (+{len(lines) - 1} more)" if len(lines) > 1 else "")
        )


def _write_if_changed(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(path)


def generate(
    out_dir: Path | str,
    levels: Iterable[int] | None = None,
    families: Iterable[str] | None = None,
    dtypes: Iterable[str] | None = None,
    taxonomy_dir: Path | str | None = None,
    templates_dir: Path | str | None = None,
    check_import: bool = True,
    mined: Path | str | None = None,
    mined_harness: Path | str | None = None,
    replace: bool = False,
    templated: bool | None = None,
    mined_ungated: bool = False,
    suites: Iterable[str] = (CORE_SUITE,),
) -> tuple[list[TaskRecord], list[Skip]]:
    """Render the selected tasks into out_dir/tasks/ and merge them into out_dir/manifest.jsonl
    (deterministic byte for byte); returns this run's records and skips.

    Tasks already in the manifest that the filters do not select are kept (mgbench.generator.selection);
    `replace` drops them. `templated` None: render templated tasks unless only `mined` is given.
    `mined` ships the level-4 tasks that passed the gate (generator/mined.py), all with `mined_ungated`.
    `suites`: the task sets to render (taxonomy.model.CORE_SUITE, the published benchmark, and/or peer ids whose
    peer-faithful families to add); a family named in `families` must have a variant in one of them."""
    out = Path(out_dir)
    (out / "tasks").mkdir(parents=True, exist_ok=True)
    root = Path(templates_dir) if templates_dir else TEMPLATES_DIR
    tax = load_taxonomy(taxonomy_dir, root / "families")
    suites = tuple(suites)
    if unknown_suites := set(suites) - {CORE_SUITE, *tax.peers}:
        known = ", ".join([CORE_SUITE, *sorted(tax.peers)])
        raise GenerateError(f"unknown suite {sorted(unknown_suites)[0]!r} (known: {known})")
    sel = Selection.of(levels, families, dtypes, bool(mined), templated, suites)
    specs, skips = expand(tax, levels, families, dtypes, suites) if sel.templated else ([], [])
    if families:
        unknown = set(families) - set(tax.families)
        if unknown:
            raise GenerateError(f"unknown family {sorted(unknown)[0]!r} (see `mgbench taxonomy`)")
        for fid in sorted(families):
            fam = tax.families[fid]
            if not {fam.suite_of(v) for v in fam.variants} & set(suites):
                raise GenerateError(
                    f"family {fid!r} is in suite {fam.suite!r}, not selected (selected: {', '.join(suites)}); "
                    f"add --suite {fam.suite}"
                )
    records, paths, templates = [], [], {}
    for spec in specs:
        try:
            source = render_module(spec, root)
        except RenderError as e:
            raise GenerateError(str(e)) from None
        rel = f"tasks/{spec.task_id}.py"
        _write_if_changed(out / rel, source)
        records.append(record_for(spec, rel, source))
        paths.append(out / rel)
        templates[spec.task_id] = spec.template
    if check_import and paths:
        _import_check(paths, templates)
    if mined:  # level 4: accepted harnesses of mined candidates (already run in the sandbox)
        from mgbench.generator.mined import mined_tasks

        more, more_paths = mined_tasks(out, mined, mined_harness, ungated=mined_ungated, tax=tax)
        records += more
        paths += more_paths
    made = {r.task_id for r in records}
    kept = [r for r in kept_records(out / "manifest.jsonl", sel, replace) if r.task_id not in made]
    keep = {p.name for p in paths} | {Path(r.module).name for r in kept}
    for stale in (out / "tasks").glob("*.py"):
        if stale.name not in keep:
            stale.unlink()
    write_manifest(out / "manifest.jsonl", [r.entry() for r in records + kept])
    considered = made | {s.task_id for s in skips}
    lines = kept_skips(out / "skipped.jsonl", considered, replace or not sel.filtered) + [
        {"task_id": s.task_id, "reason": s.reason} for s in skips
    ]
    _write_if_changed(
        out / "skipped.jsonl", "".join(json.dumps(d) + "\n" for d in sorted(lines, key=lambda d: str(d.get("task_id"))))
    )
    return records, skips
