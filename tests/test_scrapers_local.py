"""`mgbench scrape local` over git repositories made by the test: provenance, bad input, dedup,
licenses, classification and the report."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from mgbench.cli import main
from mgbench.scrapers.classify import load_ids

MIT = "MIT License\n\nPermission is hereby granted, free of charge, to any person obtaining a copy...\n"
GPL = "GNU GENERAL PUBLIC LICENSE\nVersion 3, 29 June 2007\n"

MAPPINGS = '''\
import torch
import torch.distributed as dist
from torch.distributed import all_reduce as ar


def get_tensor_model_parallel_group():
    return None


def _reduce(input_):
    """All-reduce the input tensor across the tensor-model-parallel group."""
    ar(input_, group=get_tensor_model_parallel_group())
    return input_


def row_parallel_linear(x, weight, tp_group=None):
    partial = torch.matmul(x, weight)
    dist.distributed_c10d.all_reduce(partial, group=tp_group)
    return partial
'''
RING = '''\
import torch
import torch.distributed as dist


def ring_attention_step(q, k, v, rank, world_size):
    """One ring step of ring flash attention: send k/v to the next rank, receive from the previous."""
    next_k, next_v = torch.empty_like(k), torch.empty_like(v)
    ops = [dist.P2POp(dist.isend, k, (rank + 1) % world_size),
           dist.P2POp(dist.irecv, next_k, (rank - 1) % world_size)]
    for req in dist.batch_isend_irecv(ops):
        req.wait()
    scores = torch.softmax(q @ k.transpose(-1, -2), dim=-1)
    return scores @ v, next_k, next_v
'''
MOE = '''\
import torch
import torch.distributed as dist


def dispatch_tokens(tokens, expert_counts, ep_group):
    """MoE token dispatch to experts with uneven all-to-all."""
    out = torch.empty_like(tokens)
    dist.all_to_all_single(out, tokens, output_split_sizes=expert_counts,
                           input_split_sizes=expert_counts, group=ep_group)
    return out
'''
FUNCOL = """\
import torch.distributed._functional_collectives as funcol


def gather_seq(x, group):
    return funcol.all_gather_tensor(x, 0, group)
"""
GROUP_METHOD = """\
import torch.distributed as dist


def world_sum(x):
    group = dist.group.WORLD
    group.allreduce([x]).wait()
    return x
"""


def git_repo(root: Path, files: dict[str, str | bytes], remote: str | None = None) -> str:
    root.mkdir(parents=True)
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content if isinstance(content, bytes) else textwrap.dedent(content).encode())
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "init"]):
        subprocess.run(["git", "-C", str(root), *cmd], check=True, env=env, capture_output=True)
    if remote:
        subprocess.run(["git", "-C", str(root), "remote", "add", "origin", remote], check=True)
    return subprocess.run(
        ["git", "-C", str(root), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture(scope="module")
def scraped(tmp_path_factory):
    base = tmp_path_factory.mktemp("repos")
    near = (
        RING.replace("next_k, next_v", "nk, nv")
        .replace("next_k,", "nk,")
        .replace("    return scores", "    scores = scores * 1.0\n    return scores")
    )
    head = git_repo(
        base / "tp",
        {
            "LICENSE": MIT,
            "tp/__init__.py": "",
            "tp/mappings.py": MAPPINGS,
            "tp/ring.py": RING,
            "tp/moe.py": MOE,
            "tp/funcol.py": FUNCOL,
            "tp/world.py": GROUP_METHOD,
            "tp/vendored/ring_copy.py": "# vendored copy\n" + RING.replace('"""One ring', '"""Copied. One ring'),
            "tests/test_py2.py": "print 'hello'\nimport torch.distributed as dist\ndist.all_reduce(x)\n",
            "tp/broken.py": "import torch.distributed as dist\ndef f(:\n    dist.all_reduce(x)\n",
            "tp/binary.py": b"\x00\x01torch.distributed all_reduce\x00",
            "tp/generated.py": "import torch.distributed as dist\nX = [" + "1, " * 8000 + "]\ndist.all_reduce(x)\n",
            "tp/huge.py": "import torch.distributed as dist\n" + "# padding\n" * 220_000,
            "tp/plain.py": "def add(a, b):\n    return a + b\n",
        },
        remote="https://github.com/acme/tp.git",
    )
    os.symlink("loop_b.py", base / "tp" / "tp" / "loop_a.py")
    os.symlink("loop_a.py", base / "tp" / "tp" / "loop_b.py")
    os.symlink(".", base / "tp" / "tp" / "selfdir")
    os.mkfifo(base / "tp" / "tp" / "pipe.py")
    git_repo(base / "fork", {"COPYING": GPL, "ring.py": near, "moe_copy.py": MOE})
    out = tmp_path_factory.mktemp("out")
    assert main(["scrape", "local", str(base / "tp"), "--out", str(out), "--quiet", "--processes", "2"]) == 0
    assert main(["scrape", "local", str(base / "fork"), "--repo", "someone/fork", "--out", str(out), "--quiet"]) == 0
    cands = [json.loads(x) for x in (out / "candidates.jsonl").read_text().splitlines()]
    funnel = {f["repo"]: f for f in json.loads((out / "funnel.json").read_text())["repos"]}
    return out, head, cands, funnel


def by_name(cands: list[dict], qualname: str, repo: str = "acme/tp") -> dict:
    return next(c for c in cands if c["qualname"] == qualname and c["provenance"]["repo"] == repo)


def test_provenance_from_the_git_checkout(scraped):
    out, head, cands, _ = scraped
    c = by_name(cands, "_reduce")
    p = c["provenance"]
    assert (p["repo"], p["path"], p["commit"], p["license"]) == ("acme/tp", "tp/mappings.py", head, "MIT")
    assert (p["line_start"], p["line_end"]) == (10, 13)
    assert p["url"] == f"https://github.com/acme/tp/blob/{head}/tp/mappings.py#L10-L13"
    mod = (out / c["module_path"]).read_text()
    assert "acme/tp@" in mod and "def get_tensor_model_parallel_group" in mod
    compile(mod, c["module_path"], "exec")


def test_extracted_calls_cover_every_spelling(scraped):
    _, _, cands, _ = scraped
    got = {
        c["qualname"]: sorted({x["qualname"] for x in c["calls"]})
        for c in cands
        if c["provenance"]["repo"] == "acme/tp" and c["provenance"]["path"] != "tp/vendored/ring_copy.py"
    }
    assert got == {
        "_reduce": ["torch.distributed.all_reduce"],
        "row_parallel_linear": ["torch.distributed.distributed_c10d.all_reduce"],
        "ring_attention_step": ["torch.distributed.P2POp", "torch.distributed.batch_isend_irecv"],
        "dispatch_tokens": ["torch.distributed.all_to_all_single"],
        "gather_seq": ["torch.distributed._functional_collectives.all_gather_tensor"],
        "world_sum": ["torch.distributed.ProcessGroup.allreduce"],
    }


def test_bad_input_is_skipped_and_counted_by_reason(scraped):
    _, _, _, funnel = scraped
    f = funnel["acme/tp"]
    assert f["skipped"] == {
        "python2": 1,
        "syntax_error": 1,
        "binary": 1,
        "generated": 1,
        "too_large": 1,
        "symlink_loop": 2,
        "symlink": 1,
        "special_file": 1,
    }
    assert (f["files_scanned"], f["files_prefiltered"], f["files_with_collectives"]) == (13, 8, 6)
    assert (f["call_sites"], f["functions_extracted"]) == (11, 7)


def test_dedup_collapses_vendored_and_forked_copies(scraped):
    _, _, cands, funnel = scraped
    ring = by_name(cands, "ring_attention_step")
    assert ring["unique"] and ring["license_permitted"]
    origins = {(d["repo"], d["path"]) for d in ring["duplicates"]}
    assert origins == {("acme/tp", "tp/vendored/ring_copy.py"), ("someone/fork", "ring.py")}
    copy = by_name(cands, "ring_attention_step", "someone/fork")
    assert not copy["unique"] and copy["cluster"] == ring["id"] and copy["module_path"] is None
    assert funnel["acme/tp"]["unique"] == 6 and funnel["someone/fork"]["unique"] == 0


def test_license_allowlist_keeps_copyleft_out(tmp_path):
    repo = tmp_path / "gpl"
    git_repo(repo, {"COPYING": GPL, "only.py": MOE.replace("dispatch_tokens", "gpl_dispatch")})
    out = tmp_path / "out"
    assert main(["scrape", "local", str(repo), "--repo", "x/gpl", "--out", str(out), "--quiet", "--no-kernels"]) == 0
    (c,) = [json.loads(x) for x in (out / "candidates.jsonl").read_text().splitlines()]
    assert c["provenance"]["license"] == "GPL-3.0" and not c["license_permitted"] and c["module_path"] is None
    f = json.loads((out / "funnel.json").read_text())["repos"][0]
    assert (f["unique"], f["license_permitted"], f["classified"]) == (1, 0, 0)
    assert list((out / "modules").glob("*.py")) == []


def test_classification_labels_are_taxonomy_ids(scraped):
    _, _, cands, _ = scraped
    tax = load_ids()
    for c in cands:
        cl = c["classification"]
        assert cl["workload"]["id"] in tax.workloads
        assert {d["id"] for d in cl["dims"]} <= tax.dims
        assert {r["id"] for r in cl["realizations"]} <= tax.realizations
        assert set(cl["families"]) <= {f["id"] for f in tax.families}
        assert all(lab["evidence"] for lab in cl["dims"] + cl["realizations"] + [cl["workload"]])
    row = by_name(cands, "row_parallel_linear")["classification"]
    assert row["workload"]["id"] == "gemm" and "tensor" in {d["id"] for d in row["dims"]}
    assert "gemm_ar" in row["families"]
    ring = by_name(cands, "ring_attention_step")["classification"]
    assert ring["workload"]["id"] == "attention" and ring["dims"][0]["id"] == "context_ring"
    assert "ring_attention" in ring["families"]
    moe = by_name(cands, "dispatch_tokens")["classification"]
    assert [r["id"] for r in moe["realizations"]] == ["all_to_all_v"]
    assert moe["workload"]["id"] == "moe" and "expert" in {d["id"] for d in moe["dims"]}


def test_report_prints_the_funnel(scraped, capsys):
    out = scraped[0]
    assert main(["scrape", "report", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "files scanned -> parsed -> with collectives" in text
    line = next(x for x in text.splitlines() if x.startswith("acme/tp"))
    assert line.split()[1:8] == ["13", "8", "6", "11", "7", "6", "6"]
    assert "symlink_loop" in text


def test_rescan_reuses_unchanged_files_and_reparses_changed_ones(tmp_path):
    repo = tmp_path / "r"
    git_repo(repo, {"LICENSE": MIT, "a.py": MAPPINGS, "b.py": MOE, "c.py": "x = 1\n"})
    out = tmp_path / "out"
    argv = ["scrape", "local", str(repo), "--repo", "x/r", "--out", str(out), "--quiet", "--no-kernels"]

    def funnel() -> dict:
        return json.loads((out / "funnel.json").read_text())["repos"][0]

    assert main(argv) == 0
    first, cands = funnel(), (out / "candidates.jsonl").read_text()
    assert first["files_cached"] == 0 and first["functions_extracted"] == 3
    assert main(argv) == 0
    again = funnel()
    assert again["files_cached"] == 3 and (out / "candidates.jsonl").read_text() == cands
    assert {k: v for k, v in again.items() if k not in ("files_cached", "seconds")} == {
        k: v for k, v in first.items() if k not in ("files_cached", "seconds")
    }
    (repo / "c.py").write_text(FUNCOL)
    assert main(argv) == 0
    assert funnel()["files_cached"] == 2 and funnel()["functions_extracted"] == 4
    assert main(argv + ["--fresh"]) == 0 and funnel()["files_cached"] == 0
