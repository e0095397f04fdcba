"""Render the dataset card (README.md): YAML front matter (configs, dataset_info) + a jinja2 body."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
import yaml

from mgbench.dataset import card_stats as stats
from mgbench.dataset.baselines import Hardware
from mgbench.dataset.schema import FEATURES, baseline_table, schema_table
from mgbench.dataset.shards import SplitInfo
from mgbench.dataset.version import DatasetVersion
from mgbench.taxonomy.loader import tradeoff_vocabulary

ALL_CONFIG, ALL_SPLIT = "all", "test"


def size_category(n: int) -> str:
    for limit, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K")):
        if n < limit:
            return name
    return "100K<n<1M"


def _info(name: str, splits: list[SplitInfo]) -> dict[str, Any]:
    return {
        "config_name": name,
        "features": FEATURES._to_yaml_list(),
        "splits": [{"name": s.name, "num_bytes": s.num_bytes, "num_examples": s.num_examples} for s in splits],
        "download_size": sum(s.download_size for s in splits),
        "dataset_size": sum(s.num_bytes for s in splits),
    }


def front_matter(splits: dict[str, SplitInfo], licenses: list[str], n_rows: int) -> str:
    """The card's YAML header: per-level `default` config plus the `all` view over every shard."""
    total = SplitInfo(
        ALL_SPLIT,
        sum(s.num_examples for s in splits.values()),
        sum(s.num_bytes for s in splits.values()),
        download_size=sum(s.download_size for s in splits.values()),
    )
    meta = {
        "license": licenses[0] if len(licenses) == 1 else "other",
        "pretty_name": "mgbench",
        "tags": ["multi-gpu", "nccl", "torch-distributed", "cuda", "triton", "code", "benchmark"],
        "size_categories": [size_category(n_rows)],
        "configs": [
            {
                "config_name": "default",
                "default": True,
                "data_files": [{"split": s, "path": f"data/{s}-*.parquet"} for s in splits],
            },
            {"config_name": ALL_CONFIG, "data_files": [{"split": ALL_SPLIT, "path": "data/*.parquet"}]},
        ],
        "dataset_info": [_info("default", list(splits.values())), _info(ALL_CONFIG, [total])],
    }
    return "---\n" + yaml.safe_dump(meta, sort_keys=False, width=1000) + "---\n"


def render_card(
    rows: list[dict[str, Any]],
    splits: dict[str, SplitInfo],
    hardware: dict[str, Hardware],
    version: DatasetVersion,
    plots: dict[str, str],
    repo_id: str | None = None,
) -> str:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(Path(__file__).parent)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    prov_table, licenses = stats.provenance(rows)
    timed = [r for r in rows if r["baselines"]]
    body = env.get_template("card.md.j2").render(
        version=version,
        repo_id=repo_id or "<org>/mgbench",
        total=len(rows),
        splits=splits,
        all_config=ALL_CONFIG,
        all_split=ALL_SPLIT,
        example=rows[0],
        families=len({r["family"] for r in rows}),
        workloads=len({r["workload"] for r in rows}),
        n_timed=len(timed),
        hardware=hardware,
        plots=plots,
        levels_table=stats.per_level(rows),
        coverage_table=stats.coverage(rows),
        tradeoff_table=stats.tradeoff_coverage(rows, tradeoff_vocabulary()),
        schema_table=schema_table(),
        baseline_fields=baseline_table(),
        hardware_table=stats.hardware_table(hardware, rows),
        baseline_table=stats.baseline_summary(rows),
        validation_table=stats.validation_summary(rows),
        provenance_table=prov_table,
        licenses=licenses,
    )
    return front_matter(splits, licenses, len(rows)) + "\n" + body
