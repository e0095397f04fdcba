"""CLI subcommands of the generator stage: `generate` and the end-to-end `build`."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

DEFAULT_OUT = "mgbench-out"


def add_filters(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--suite",
        action="append",
        dest="suites",
        help="task sets to render (repeatable; default: core, the published benchmark). A peer id, e.g. pkb, "
        "renders the families that reproduce that peer's problems in its own form (docs/taxonomy.md); "
        "`--suite core --suite pkb` renders both",
    )
    p.add_argument("--level", type=int, action="append", help="only these levels (repeatable)")
    p.add_argument("--family", action="append", help="only these families (repeatable)")
    p.add_argument("--dtype", action="append", help="only these dtypes, e.g. bf16 or bfloat16 (repeatable)")
    p.add_argument(
        "--mined",
        help="scrape folder (candidates.jsonl + harness.jsonl): add its accepted "
        "harnesses as level-4 tasks (generate: only those, unless a filter "
        "selects templated tasks too)",
    )
    p.add_argument("--mined-harness", help="harness.jsonl to use (default: MINED/harness.jsonl)")
    p.add_argument(
        "--mined-ungated",
        action="store_true",
        help="ship every accepted harness, without the level-4 gate (default: only the tasks that "
        "passed it, gate.jsonl next to the harness file, written by `mgbench scrape gate`)",
    )


def register(sub: argparse._SubParsersAction) -> None:
    g = sub.add_parser(
        "generate",
        help="render task modules and the JSONL manifest",
        description="Render taxonomy x templates x variants into OUT/tasks/*.py and "
        "OUT/manifest.jsonl (deterministic, byte-identical on re-run).",
    )
    g.add_argument("--out", default=DEFAULT_OUT, help="output folder (default: %(default)s)")
    add_filters(g)
    g.add_argument(
        "--replace",
        action="store_true",
        help="drop every task of OUT that the filters do not select (default: a filtered run "
        "adds or updates the selected tasks and keeps the others)",
    )
    g.set_defaults(func=cmd_generate)
    b = sub.add_parser(
        "build",
        help="generate -> validate -> dataset in one go (CPU/gloo defaults)",
        description="Run the whole pipeline: generate tasks, validate them on gloo "
        "at smoke size, and write a Hugging Face dataset folder of the "
        "tasks that passed.",
    )
    b.add_argument("--out", default=DEFAULT_OUT, help="output folder (default: %(default)s)")
    b.add_argument(
        "--world-size",
        type=int,
        action="append",
        dest="world_sizes",
        help="world sizes to validate at (repeatable; default: 2; a task needing more ranks runs at its "
        "smallest world size)",
    )
    b.add_argument("--backend", default="gloo", choices=["gloo", "nccl"])
    b.add_argument("--size", default="smoke", help="size class to validate at (default: %(default)s)")
    b.add_argument("--timeout", type=float, default=60.0, help="per-task timeout in seconds")
    add_filters(b)
    b.set_defaults(func=cmd_build)


def cmd_generate(args: argparse.Namespace) -> int:
    from mgbench.generator.generate import generate
    from mgbench.generator.skips import format_skips, skip_summary
    from mgbench.report import table
    from mgbench.taxonomy import CORE_SUITE

    t0 = time.monotonic()
    from mgbench.store import load_manifest

    before = _manifest_ids(Path(args.out))
    records, skips = generate(
        args.out,
        args.level,
        args.family,
        args.dtype,
        mined=args.mined,
        mined_harness=args.mined_harness,
        replace=args.replace,
        mined_ungated=args.mined_ungated,
        suites=args.suites or [CORE_SUITE],
    )
    after = {r["task_id"] for r in load_manifest(Path(args.out) / "manifest.jsonl")}
    by_level: dict[int, int] = {}
    for r in records:
        by_level[r.spec["level"]] = by_level.get(r.spec["level"], 0) + 1
    print(table(sorted(by_level.items()), ["level", "tasks"]))
    rows = skip_summary((r.spec for r in records), skips)
    if rows:
        print(f"skipped world sizes (details in {Path(args.out) / 'skipped.jsonl'} and the manifest):")
        print(format_skips(rows))
    print(
        f"generated {len(records)} tasks ({len(skips)} combinations skipped) into "
        f"{Path(args.out) / 'tasks'} in {time.monotonic() - t0:.1f}s; manifest {Path(args.out) / 'manifest.jsonl'}"
    )
    kept = len(after - {r.task_id for r in records})
    gone = sorted(before - after)
    print(
        f"manifest: {len(after)} tasks ({len(records)} from this run, {kept} kept from earlier runs"
        + (f", {len(gone)} removed: {', '.join(gone[:5])}{' ...' if len(gone) > 5 else ''}" if gone else "")
        + ")"
    )
    return 0


def _manifest_ids(out: Path) -> set[str]:
    from mgbench.store import load_manifest

    path = out / "manifest.jsonl"
    return {r["task_id"] for r in load_manifest(path)} if path.is_file() else set()


def cmd_build(args: argparse.Namespace) -> int:
    from mgbench.dataset.build import build_dataset
    from mgbench.generator.generate import generate
    from mgbench.taxonomy import CORE_SUITE
    from mgbench.validation.run import summary_table, validate

    out = Path(args.out)
    t0 = time.monotonic()
    records, skips = generate(
        out,
        args.level,
        args.family,
        args.dtype,
        mined=args.mined,
        mined_harness=args.mined_harness,
        templated=True,
        mined_ungated=args.mined_ungated,
        suites=args.suites or [CORE_SUITE],
    )
    print(f"[1/3] generated {len(records)} tasks into {out / 'tasks'}", flush=True)
    results_path = out / "results" / f"validation-{args.backend}.jsonl"
    results = validate(
        out,
        results_path,
        world_sizes=args.world_sizes or [2],
        backend=args.backend,
        lift=True,
        size=args.size,
        timeout_s=args.timeout,
    )
    print(f"[2/3] validated; results in {results_path}")
    if results:
        print(summary_table(results))
    folder, n_rows, excluded = build_dataset(out, out / "dataset", results_paths=[results_path])
    print(f"[3/3] dataset: {n_rows} validated tasks ({len(excluded)} excluded) in {time.monotonic() - t0:.0f}s")
    for tid, why in excluded[:20]:
        print(f"  excluded {tid}: {why}")
    print(f"\ndataset folder: {folder.resolve()}")
    print(f"load it with:   python -c \"import datasets; print(datasets.load_dataset('{folder.resolve()}'))\"")
    return 0
