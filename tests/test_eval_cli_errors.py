"""Bad input to `mgbench eval` is one line with exit code 2 (the docs' "error"), never a traceback with
exit code 1 ("incorrect"); a syntax error in a solution is reported at its own line."""

from __future__ import annotations

import textwrap

import pytest
from dataset_helpers import child_env, mgbench

from mgbench.validation.eval.static import check_source

SOLUTION = "import torch\n"


def test_a_folder_that_is_not_an_mgbench_dataset_is_one_line_exit_2(tmp_path, capsys):
    from mgbench.cli import main

    pytest.importorskip("datasets")
    folder = tmp_path / "other"
    folder.mkdir()
    (folder / "data.csv").write_text("name,value\na,1\nb,2\n")
    sol = tmp_path / "t.py"
    sol.write_text(SOLUTION)
    assert main(["eval", "--dataset", str(folder), "--solution", str(sol)]) == 2
    err = capsys.readouterr().err
    ours = [x for x in err.splitlines() if x.startswith("mgbench eval: error:")]  # besides progress bars
    assert len(ours) == 1 and "not an mgbench dataset" in ours[0] and "'task_id'" in ours[0], err
    assert "Traceback" not in err


def test_an_unreachable_hub_id_is_one_line_exit_2(tmp_path):
    pytest.importorskip("datasets")
    sol = tmp_path / "t.py"
    sol.write_text(SOLUTION)
    env = child_env(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", HF_HOME=str(tmp_path / "hf"))
    r = mgbench("eval", "--dataset", "someone/not-here", "--solution", str(sol), env=env, timeout=300)
    assert r.returncode == 2, r.stderr[-2000:]
    ours = [x for x in r.stderr.splitlines() if x.startswith("mgbench eval: error:")]
    assert len(ours) == 1 and "someone/not-here: cannot load it" in ours[0], r.stderr[-2000:]
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize(
    "body, line",
    [
        ("def solution(x):\n    y = x.clone(\n    return y\n", 4),  # libcst: "@ 7:1", lines later
        ("def solution(x):\n    return x +\n", 4),
        ("def solution(x)\n    return x\n", 3),
    ],
)
def test_a_syntax_error_is_reported_at_its_line(body, line):
    src = "import torch\nimport torch.distributed as dist\n" + textwrap.dedent(body) + "\n\n"
    rep = check_source(src)
    (f,) = rep.rejects()
    assert f.rule == "syntax" and f.line == line and f"line {line}" in f.message, f.message
