"""Settling an accepted harness (scrapers/harness/run/settle.py, settle_run.py): the full size by bytes per
rank, halved when the task does not finish at it, and `scrape settle` over a harness file (resumable, a
bad record reported in one line); `scrape gate` refuses unsettled harness files."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mgbench.scrapers.harness.make.render import FULL_MAX_ELEMS, SMOKE_N, full_n, prepare, sizes_of, task_source
from mgbench.scrapers.harness.run import settle as S
from mgbench.scrapers.harness.run.settle_run import settle_file, unsettled

SHAPES = [["n"], ["n", "n"], ["n*ws", "n"], ["n", "n", "n"], ["n", "8"], ["2", "n", "4"]]


def _spec(shapes: list[list[str]], dtypes: list[str], state: bool = False) -> dict:
    args = [{"name": f"a{i}", "kind": "tensor", "shape": s, "dtype": d} for i, (s, d) in enumerate(zip(shapes, dtypes))]
    spec = {"entry": "f", "kind": "function", "n_attr": 8, "args": args}
    if state:  # the first tensor as a state attribute of a method instead
        spec.update(kind="method", entry="C.f", state=True, attrs=[args[0]], args=args[1:])
    return spec


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from(SHAPES), min_size=1, max_size=3),
    st.lists(st.sampled_from(["float32", "bfloat16", "int64", "float64"]), min_size=3, max_size=3),
    st.booleans(),
    st.sampled_from([S.FULL_BYTES, S.LAT_BYTES]),
)
def test_full_size_is_the_largest_power_of_two_within_the_bytes(shapes, dtypes, state, target):
    spec = _spec(shapes, dtypes, state and len(shapes) > 1)
    n = S.bytes_n(spec, target)
    assert n is not None and n & (n - 1) == 0
    fixed = S.input_bytes(spec, 1)[0] if n == 1 else 0  # even n = 1 may be over (a constant-sized part)
    assert S.input_bytes(spec, n)[0] <= max(target, fixed)
    over = S.input_bytes(spec, 2 * n)[0] > target or S.input_bytes(spec, 2 * n, 8)[1] > FULL_MAX_ELEMS
    assert over or 2 * n >= S.MAX_N


def test_input_bytes_count_dtypes_state_and_fields():
    spec = _spec([["n", "n"], ["n*ws"]], ["bfloat16", "float32"])
    assert S.input_bytes(spec, 1024) == (1024 * 1024 * 2 + 1024 * 2 * 4, 1024 * 1024)
    spec["args"][1]["fields"] = [{"name": "main_grad", "kind": "tensor", "shape": ["n*ws"], "dtype": "float32"}]
    assert S.input_bytes(spec, 1024)[0] == 1024 * 1024 * 2 + 2 * 1024 * 2 * 4
    assert S.bytes_n(_spec([["n"]], ["float32"]), S.FULL_BYTES) == 1 << 24  # 64 MiB of fp32
    assert S.bytes_n(_spec([["n", "n"]], ["float32"]), S.FULL_BYTES) == 1 << 12
    assert S.bytes_n({"entry": "f", "kind": "function", "args": [{"kind": "int", "expr": "n"}]}, S.FULL_BYTES) is None


def test_sizes_come_from_the_settled_spec():
    spec = _spec([["n"]], ["float32"])
    assert sizes_of(spec) == {"smoke": {"n": SMOKE_N}, "full": {"n": full_n(spec)}}
    assert sizes_of({**spec, "n_full": 1 << 24, "n_lat": 1 << 18})["lat"] == {"n": 1 << 18}


LOOP = textwrap.dedent("""
    import time

    import torch
    import torch.distributed as dist


    def slow_sum(x):
        for _ in range(x.numel() >> 22):
            time.sleep(1.0)
        dist.all_reduce(x)
        return x * 2
""")


def _cand(name: str) -> dict:
    return {
        "id": "c" + name.ljust(15, "0")[:15],
        "qualname": name,
        "provenance": {
            "repo": "example/mined",
            "path": "pkg/mod.py",
            "commit": "0" * 40,
            "line_start": 1,
            "line_end": 9,
            "license": "MIT",
            "url": "https://github.com/example/mined",
        },
    }


@pytest.mark.sandboxed
def test_full_size_is_halved_when_the_task_does_not_finish_in_time():
    """A loop over range(n >> 22) sleeping 1 s: 4 s at n = 2^24 and 2 s at 2^23, past a 1.6 s limit; 1 s at
    2^22, which is the settled size."""
    spec = {
        "entry": "slow_sum",
        "kind": "function",
        "n_attr": 8,
        "output": {"mode": "return"},
        "attrs": [],
        "args": [{"name": "x", "kind": "tensor", "shape": ["n"], "dtype": "float32"}],
    }
    source = task_source(_cand("slow_sum"), prepare(LOOP), spec)
    tried: list[int] = []

    def run(n: int):
        tried.append(n)
        return S.run_job(source, {"what": "size", "n": n, "limit_s": 1.6}, 10.0, S.SIZE_MEM_MB)

    out = S.choose_n(spec, run)
    assert tried == [1 << 24, 1 << 23, 1 << 22] and out["n_full"] == 1 << 22, (tried, out)
    assert out["n_lat"] == 1 << 18


def _scrape(tmp_path: Path) -> tuple[Path, Path]:
    scrape = tmp_path / "scrape"
    (scrape / "modules").mkdir(parents=True)
    cands = [{**_cand(n), "module_path": f"modules/{n}.py"} for n in ("a", "b", "c")]
    for c in cands[:2]:
        (scrape / c["module_path"]).write_text(LOOP)
    (scrape / "candidates.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cands))
    spec = {"entry": "slow_sum", "kind": "function", "n_attr": 8, "args": []}
    recs = [{"id": c["id"], "repo": "example/mined", "accepted": True, "spec": spec} for c in cands]
    recs.append({"id": "cnotaccepted00000", "accepted": False, "spec": None})
    harness = tmp_path / "harness.jsonl"
    harness.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return scrape, harness


def test_scrape_settle_resumes_and_reports_a_bad_record_in_one_line(tmp_path, capsys):
    scrape, harness = _scrape(tmp_path)
    calls: list[str] = []

    def fake(cand, res, scrape_dir):  # the settle step itself is tested above; here the file handling
        calls.append(cand["id"])
        res["spec"] = {**res["spec"], "n_full": 4096, "output": {"mode": "return"}}

    done, bad = settle_file(harness, scrape, limit=1, settle=fake)
    assert done == 1 and len(calls) == 1 and len(unsettled(harness)) == 2
    assert len(bad) == 1 and "record cc00000000000000" in bad[0] and "modules/c.py" in bad[0] and "\n" not in bad[0]
    assert bad[0].startswith(f"{harness}:3: ")
    done, bad = settle_file(harness, scrape, settle=fake)  # resumed: only the one left
    assert done == 1 and len(calls) == 2 and calls[0] != calls[1] and len(bad) == 1
    lines = harness.read_text().splitlines()
    assert len(lines) == 4 and [json.loads(x)["id"] for x in lines][:2] == [calls[0], calls[1]]
    assert settle_file(harness, scrape, settle=fake)[0] == 0 and len(calls) == 2
    assert "[1/1" in capsys.readouterr().out


def test_scrape_gate_refuses_an_unsettled_harness_file(tmp_path):
    from mgbench.scrapers.level4.commands import require_settled

    _, harness = _scrape(tmp_path)
    with pytest.raises(ValueError, match=r"3 accepted result\(s\) are not settled .* scrape settle --harness"):
        require_settled(harness, "scrape")
