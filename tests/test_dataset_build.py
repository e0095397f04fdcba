"""Dataset stage: offline round trip, shards and card metadata, card numbers, determinism, refusals."""

from __future__ import annotations

import json
import shutil
import statistics
import sys
from pathlib import Path

import pytest
import yaml
from dataset_helpers import COMPILE_FAILS, child_env, small_out

LOAD_SCRIPT = """
import json, sys, datasets
folder, dest = sys.argv[1], sys.argv[2]
default = datasets.load_dataset(folder)
every = datasets.load_dataset(folder, "all", split="test")
json.dump({"splits": {s: default[s].to_list() for s in default}, "all": every.to_list()}, open(dest, "w"))
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    from mgbench.dataset.build import write_dataset

    out = small_out(tmp_path_factory.mktemp("ds"))
    rep = write_dataset(out, out / "dataset", [], results_roots=[out / "results"], max_shard_rows=3)
    return out, rep


def norm(rows):
    return json.loads(json.dumps(rows, sort_keys=True))


def card_yaml(folder: Path) -> dict:
    return yaml.safe_load((folder / "README.md").read_text().split("---\n")[1])


def test_offline_load_dataset_round_trip(built, tmp_path):
    import subprocess

    out, rep = built
    dest = tmp_path / "rows.json"
    env = child_env(HF_HUB_OFFLINE="1", HF_DATASETS_CACHE=str(tmp_path / "cache"))
    proc = subprocess.run(
        [sys.executable, "-c", LOAD_SCRIPT, str(rep.folder), str(dest)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "warning" not in proc.stderr.lower(), proc.stderr[-2000:]
    loaded = json.loads(dest.read_text())
    assert sorted(loaded["splits"]) == ["level1", "level2"]
    by_split = {s: [r for r in rep.rows if f"level{r['level']}" == s] for s in loaded["splits"]}
    for split, rows in loaded["splits"].items():
        assert norm(rows) == norm(by_split[split])
    assert norm(sorted(loaded["all"], key=lambda r: r["task_id"])) == norm(sorted(rep.rows, key=lambda r: r["task_id"]))
    for row in loaded["all"]:
        assert row["source"] == (out / "tasks" / f"{row['task_id']}.py").read_text()
        assert isinstance(row["baselines"], list) and isinstance(row["baselines"][0], dict)


def test_shards_and_card_metadata(built):
    out, rep = built
    files = sorted(p.relative_to(rep.folder).as_posix() for p in (rep.folder / "data").glob("*.parquet"))
    n1 = sum(r["level"] == 1 for r in rep.rows)
    k = -(-n1 // 3)
    assert [f for f in files if "level1" in f] == [f"data/level1-{i:05d}-of-{k:05d}.parquet" for i in range(k)]
    meta = card_yaml(rep.folder)
    default, every = meta["configs"]
    assert default["default"] is True and every["config_name"] == "all"
    assert [d["split"] for d in default["data_files"]] == ["level1", "level2"]
    info = {c["config_name"]: c for c in meta["dataset_info"]}
    assert {s["name"]: s["num_examples"] for s in info["default"]["splits"]} == {
        "level1": n1,
        "level2": len(rep.rows) - n1,
    }
    assert info["all"]["splits"] == [
        {"name": "test", "num_bytes": sum(s.num_bytes for s in rep.splits.values()), "num_examples": len(rep.rows)}
    ]
    assert info["default"]["download_size"] == sum((rep.folder / f).stat().st_size for f in files)


def test_card_numbers_come_from_the_data(built):
    _, rep = built
    text = (rep.folder / "README.md").read_text()
    rows = rep.rows
    assert f"**{len(rows)} tasks**" in text and str(rep.version) in text
    eager = [b["median_ms"] for r in rows for b in r["baselines"] if b["baseline"] == "eager"]
    frac = [b["fraction_of_roofline"] for r in rows for b in r["baselines"] if b["baseline"] == "eager"]
    line = next(ln for ln in text.splitlines() if ln.startswith("| `fake-h200x2` | 2 | eager |"))
    assert line.split(" | ")[3:9] == [
        str(len(rows)),
        "0",
        f"{statistics.median(eager):.4g}",
        "-",
        "-",
        f"{statistics.median(frac):.4g}",
    ]
    comp = next(ln for ln in text.splitlines() if ln.startswith("| `fake-h200x2` | 2 | compile |"))
    assert comp.split(" | ")[3:5] == [str(len(rows) - 1), "1"]
    assert f"| **tasks** | {sum(r['workload'] == 'collective' for r in rows)} |" in text
    for name in ("fraction_of_roofline", "time_vs_bytes"):
        png = rep.folder / "plots" / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
        assert f"(plots/{name}.png)" in text


def test_card_shows_the_tradeoff_coverage(built):
    """Rows carry their family's trade-off tags; the card lists every tag of the vocabulary with the
    families and tasks carrying it (a task counts once per tag)."""
    from mgbench.taxonomy import load_taxonomy
    from mgbench.taxonomy.loader import tradeoff_vocabulary

    _, rep = built
    tax = load_taxonomy()
    assert all(r["tradeoffs"] == tax.families[r["family"]].tradeoffs for r in rep.rows)
    text = (rep.folder / "README.md").read_text()
    assert "## Coverage: trade-offs" in text
    for tag, t in tradeoff_vocabulary().items():
        here = [r for r in rep.rows if tag in r["tradeoffs"]]
        line = next(ln for ln in text.splitlines() if ln.startswith(f"| `{tag}` |"))
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        assert cells[1] == t.meaning and cells[2:4] == [str(len({r["family"] for r in here})), str(len(here))]
        assert cells[5] == str(sum(bool(r["baselines"]) for r in here))
    assert "| `overlap` |" in text and "(none)" not in text


def test_rows_carry_prompts_baselines_and_validation(built):
    _, rep = built
    for row in rep.rows:
        assert set(row["prompt"]) == {"cuda", "triton"}
        for prompt in row["prompt"].values():
            assert row["source"].strip() in prompt and "NVLink x18" in prompt
            assert f"rtol = {row['tolerance']['rtol']:g}" in prompt
            # held-out shapes are announced (never printed) where the eval draws them
            assert ("shapes it does not print" in prompt) == (row["level"] != 4)
        eager = next(b for b in row["baselines"] if b["baseline"] == "eager")
        assert f"| eager | {eager['median_ms']:.4g} |" in row["prompt"]["cuda"]
        assert eager["noise_speedup_p95"] is not None and eager["roofline"]["bound_ms"] > 0
        assert row["validation"][0]["backend"] == "nccl" and row["validation"][0]["status"] == "passed"
    failed = next(r for r in rep.rows if r["task_id"] == COMPILE_FAILS)
    comp = next(b for b in failed["baselines"] if b["baseline"] == "compile")
    assert comp["status"] == "failed" and comp["median_ms"] is None and "compile" in comp["reason"]


def test_rebuild_is_byte_identical_and_untouched(built, tmp_path):
    from mgbench.dataset.build import write_dataset

    out, rep = built
    before = {f: ((rep.folder / f).read_bytes(), (rep.folder / f).stat().st_mtime_ns) for f in rep.files}
    again = write_dataset(out, rep.folder, [], results_roots=[out / "results"], max_shard_rows=3)
    assert again.version == rep.version and again.files == rep.files
    assert {f: ((rep.folder / f).read_bytes(), (rep.folder / f).stat().st_mtime_ns) for f in rep.files} == before
    other = write_dataset(out, tmp_path / "copy", [], results_roots=[out / "results"], max_shard_rows=3)
    assert {f: (other.folder / f).read_bytes() for f in other.files} == {f: b for f, (b, _) in before.items()}


def test_refuses_failed_tasks_and_names_them(built, tmp_path, capsys):
    from mgbench.cli import main
    from mgbench.dataset.build import PublishRefused, write_dataset
    from mgbench.dataset.fixtures import write_fake_results

    out, _ = built
    bad = ["l1-all_reduce-sum-bw-bf16", "l2-ag_gemm-bf16"]
    write_fake_results(tmp_path / "res", out, fail=bad)
    with pytest.raises(PublishRefused) as e:
        write_dataset(out, tmp_path / "ds", [], results_roots=[tmp_path / "res"])
    assert all(t in str(e.value) for t in bad) and "2 task(s) failed validation" in str(e.value)
    assert not (tmp_path / "ds").exists()
    assert (
        main(["publish", "--out", str(out), "--folder", str(tmp_path / "ds"), "--results-root", str(tmp_path / "res")])
        == 2
    )
    err = capsys.readouterr().err
    assert "refusing to publish" in err and all(t in err for t in bad)


def test_not_validated_and_stale_baselines_are_reported(built, tmp_path):
    from mgbench.dataset.rows import build_rows

    out, rep = built
    res = tmp_path / "res"
    shutil.copytree(out / "results", res)
    tag = res / "fake-h200x2"
    gone = "l1-all_reduce-max-lat-bf16"
    vals = [ln for ln in (tag / "validation-nccl.jsonl").read_text().splitlines() if gone not in ln]
    (tag / "validation-nccl.jsonl").write_text("\n".join(vals) + "\n")
    line = json.loads((tag / "baselines.jsonl").read_text().splitlines()[0])
    line["content_hash"] = "0" * 64
    other = {**line, "task_id": "l1-a_task_of_another_set-bf16"}  # not an older version of anything here
    with (tag / "baselines.jsonl").open("a") as f:
        f.write(json.dumps(line) + "\n" + json.dumps(other) + "\n")
    rs = build_rows(out, [], [res])
    assert rs.not_validated == [gone] and rs.stale_baselines == 1 and not rs.failed
    assert len(rs.rows) == len(rep.rows) - 1


def test_docs_schema_table_in_sync():
    from mgbench.dataset.schema import FEATURES, FIELDS, baseline_table, schema_table

    doc = (Path(__file__).resolve().parents[1] / "docs" / "dataset.md").read_text()
    block = doc.split("<!-- schema:begin -->\n")[1].split("<!-- schema:end -->")[0]
    assert block == f"{schema_table()}\n\nFields of one `baselines` entry:\n\n{baseline_table()}\n"
    assert list(FEATURES) == [name for name, _, _ in FIELDS]


def test_a_module_edited_after_generation_is_refused(built, tmp_path):
    from mgbench.dataset.rows import build_rows

    out, _ = built
    copy = tmp_path / "out"
    shutil.copytree(out, copy, ignore=shutil.ignore_patterns("dataset"))
    module = copy / "tasks" / "l2-gemm_rs-bf16.py"
    module.write_text(module.read_text() + "# edited\n")
    rs = build_rows(copy, [], [copy / "results"])
    assert [tid for tid, _ in rs.failed] == ["l2-gemm_rs-bf16"] and "changed since generation" in rs.failed[0][1]
