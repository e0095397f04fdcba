"""A candidate is judged at every world size its task supports that the machine can run (gloo: at
least 2 and 4), so a pairwise exchange that is right only at 2 ranks is not CORRECT by default; and
the CLI flags do what they say (validate --level, eval --no-timing output, batch re-run exit code)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from mgbench.generator import generate
from mgbench.store import read_jsonl
from mgbench.validation.eval.judge import sandbox
from mgbench.validation.eval.worldsizes import judged_world_sizes

TASK = "l1-all_reduce-sum-lat-fp32"
HEAD = "import torch\nimport torch.distributed as dist\n"
# Right at 2 ranks only: each rank adds its partner's vector (rank ^ 1); at 4 ranks the pairs
# (0, 1) and (2, 3) never see each other's data.
PAIRWISE = HEAD + textwrap.dedent("""
    def solution(x):
        other = torch.empty_like(x)
        peer = dist.get_rank() ^ 1
        ops = [dist.P2POp(dist.isend, x, peer), dist.P2POp(dist.irecv, other, peer)]
        for req in dist.batch_isend_irecv(ops):
            req.wait()
        return x + other
""")
# the README's eval example
CPU_EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "cpu" / f"{TASK}.py"

needs_sandbox = pytest.mark.skipif(not sandbox.available(), reason="no unprivileged user namespaces here")


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ws")
    generate(out, families=["all_reduce", "gemm_ar"], dtypes=["fp32"], check_import=False)
    return out


def eval_cli(out: Path, sol: Path, *extra: str) -> int:
    from mgbench.cli import main

    return main(
        [
            "eval",
            "--tasks",
            str(out),
            "--solution",
            str(sol),
            "--backend",
            "gloo",
            "--trials",
            "1",
            "--no-timing",
            "--seed",
            "3",
            *extra,
        ]
    )


def test_gloo_judges_at_least_two_and_four_ranks():
    assert {2, 4} <= set(judged_world_sizes([2, 4, 8], None, "gloo"))
    assert judged_world_sizes([4, 8], None, "gloo")[0] == 4
    assert judged_world_sizes([2, 4, 8], [2], "gloo") == [2]
    assert judged_world_sizes([], None, "gloo") == [2]


def test_a_solution_right_only_at_two_ranks_is_incorrect_by_default(out, tmp_path, capsys):
    sol = tmp_path / f"{TASK}.py"
    sol.write_text(PAIRWISE)
    results = tmp_path / "r.jsonl"
    assert eval_cli(out, sol, "--results", str(results)) == 1
    recs = {r["world_size"]: r for r in read_jsonl(results)}
    assert recs[2]["status"] == "correct" and recs[4]["status"] == "incorrect", recs
    assert "wrong output" in recs[4]["reason"]
    text = capsys.readouterr().out
    assert "+ 1 after timing" not in text and "not timed" in text  # --no-timing says so
    assert "+ 1 on inputs rewritten in place" in text  # the last trial runs with or without timing
    assert eval_cli(out, sol, "--world-size", "2") == 0  # asked for 2 ranks only


def test_batch_rerun_gives_the_same_exit_code_and_table(out, tmp_path, capsys):
    from mgbench.cli import main

    sols = tmp_path / "sols"
    sols.mkdir()
    (sols / f"{TASK}@1.py").write_text(CPU_EXAMPLE.read_text())
    (sols / f"{TASK}@2.py").write_text(PAIRWISE)
    args = [
        "eval",
        "--tasks",
        str(out),
        "--solutions-dir",
        str(sols),
        "--backend",
        "gloo",
        "--trials",
        "1",
        "--no-timing",
        "--seed",
        "3",
        "--json",
    ]
    assert main(args) == 1
    first = json.loads(capsys.readouterr().out)
    assert main(args) == 1  # nothing run, same answer
    again = json.loads(capsys.readouterr().out)
    assert again == first and len(first) == 4  # @1 at 2 and 4, @2 at 2 and 4
    status = {(r["sample"], r["world_size"]): r["status"] for r in first}
    assert status == {
        (f"{TASK}@1.py", 2): "correct",
        (f"{TASK}@1.py", 4): "correct",
        (f"{TASK}@2.py", 2): "correct",
        (f"{TASK}@2.py", 4): "incorrect",
    }


def test_a_batch_with_nothing_to_judge_is_bad_input(out, tmp_path, capsys):
    """An empty folder, samples naming no task, a world size no task offers, a size class no task has: exit 2
    with one line naming the folder or option and the reason, and no results file written."""
    from mgbench.cli import main

    sols = tmp_path / "sols"
    sols.mkdir()
    results = tmp_path / "r.jsonl"
    base = ["eval", "--tasks", str(out), "--solutions-dir", str(sols), "--results", str(results), "--no-timing"]
    cases = []
    assert main(base) == 2
    cases.append("no *.py sample in it")
    (sols / "l1-no_such_task-fp33.py").write_text(CPU_EXAMPLE.read_text())
    assert main(base) == 2
    cases.append("l1-no_such_task-fp33.py: no task 'l1-no_such_task-fp33'")
    (sols / f"{TASK}@1.py").write_text(CPU_EXAMPLE.read_text())
    assert main([*base, "--world-size", "3"]) == 2
    cases.append(f"no sample's task offers world size(s) 3 (e.g. {TASK}: ")
    assert main([*base, "--size", "huge"]) == 2
    cases.append(f"--size huge: 1 task(s) have no size class 'huge' (e.g. {TASK}; they offer full, smoke)")
    err = capsys.readouterr().err.splitlines()
    errors = [line for line in err if line.startswith("mgbench eval: error:")]
    assert len(errors) == len(cases) and all(c in e for c, e in zip(cases, errors, strict=True)), err
    assert not results.exists()
    assert eval_cli(out, sols / f"{TASK}@1.py", "--size", "huge") == 2  # one file: the same line


def test_validate_level_filter_runs_only_that_level(out, tmp_path, capsys):
    from mgbench.cli import main

    results = tmp_path / "v.jsonl"
    assert main(["validate", "--out", str(out), "--results", str(results), "--level", "2"]) == 0
    assert {r["task_id"] for r in read_jsonl(results)} == {"l2-gemm_ar-fp32"}
    assert main(["validate", "--out", str(out), "--results", str(results), "--level", "3"]) == 2
    assert main(["validate", "--out", str(out), "--results", str(results), "--shard", "0/2"]) == 2
    assert "--timing pass" in capsys.readouterr().err


@pytest.mark.parametrize("mode", ["off", pytest.param("require", marks=needs_sandbox)])
def test_batch_verdict_survives_a_sample_that_rewrites_itself_and_the_results(mode, out, tmp_path, capsys):
    """A wrong sample that, while it runs, appends "correct" records to the batch's results file (for its
    own hash and for the hash of an edited copy of itself) and then rewrites its own file to that copy.
    Without the sandbox it writes both: the batch judges the file as it read it once, and keeps only what
    the judge wrote. In the sandbox it can write neither (every folder is read-only there): an error."""
    import hashlib

    from mgbench.cli import main

    sols, results = tmp_path / "sols", tmp_path / "r.jsonl"
    sols.mkdir()
    path = sols / f"{TASK}@forger.py"
    edited = "# edited\n"
    forger = HEAD + textwrap.dedent(f"""
        import hashlib, json
        _PATH, _RESULTS = {str(path)!r}, {str(results)!r}
        if dist.get_rank() == 0:
            src = open(_PATH).read()
            for text in (src, {edited!r} + src):
                rec = {{"task_id": {TASK!r}, "sample": {path.name!r}, "world_size": 2, "backend": "gloo",
                        "size": "smoke", "status": "correct", "correct": True, "reason": "",
                        "sample_hash": hashlib.sha256(text.encode()).hexdigest()}}
                with open(_RESULTS, "a") as f:
                    f.write(json.dumps(rec) + "\\n")
            open(_PATH, "w").write({edited!r} + src)
        def solution(x):
            return x * dist.get_world_size()          # wrong: no communication
    """)
    path.write_text(forger)
    args = ["eval", "--tasks", str(out), "--solutions-dir", str(sols), "--backend", "gloo", "--world-size", "2"]
    args += ["--trials", "1", "--no-timing", "--results", str(results), "--sandbox", mode]
    if mode == "require":
        assert main(args) == 2
        assert path.read_text() == forger
        recs = list(read_jsonl(results))
        assert [r["status"] for r in recs] == ["error"], recs
        assert "Errno 30" in recs[0]["reason"] or "Errno 13" in recs[0]["reason"], recs  # read-only, refused
        capsys.readouterr()
        return
    assert main(args) == 1
    assert path.read_text().startswith(edited)  # it did rewrite itself
    recs = list(read_jsonl(results))
    assert [r["status"] for r in recs] == ["incorrect"], recs
    assert recs[0]["sample_hash"] == hashlib.sha256(forger.encode()).hexdigest()
    capsys.readouterr()
