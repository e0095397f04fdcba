"""`mgbench publish --push` with the real huggingface_hub client against a local fake Hub."""

from __future__ import annotations

import re

import pytest
from dataset_helpers import child_env, mgbench, small_out
from hub_server import FakeHub

REPO_ID = "org/mgbench"


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    return small_out(tmp_path_factory.mktemp("push"))


def folder_files(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def expected_tag(out) -> str:
    from mgbench.dataset.version import DatasetVersion, mgbench_version, task_set_hash
    from mgbench.store import load_manifest

    return DatasetVersion(mgbench_version(), task_set_hash(t["content_hash"] for t in load_manifest(out))).tag


def test_push_then_unchanged_then_reshard(out):
    args = ["publish", "--out", str(out), "--results-root", str(out / "results"), "--push", REPO_ID]
    with FakeHub() as hub:
        env = child_env(HF_ENDPOINT=hub.url, HF_TOKEN=hub.token, HF_HUB_DISABLE_XET="1", HF_HUB_OFFLINE="0")
        first = mgbench(*args, "--max-shard-rows", "3", env=env)
        assert first.returncode == 0, first.stderr[-3000:]
        repo = hub.repos[REPO_ID]
        local = folder_files(out / "dataset")
        assert {p: repo.files[p] for p in local} == local and ".gitattributes" in repo.files
        assert len(hub.calls("POST", "/commit/")) == 1
        lfs = {p for p in local if p.endswith((".parquet", ".png"))}
        assert repo.lfs == lfs and len(hub.calls("PUT", "^/_lfs/")) == len(lfs)
        tag = expected_tag(out)
        assert repo.tags == {tag: repo.commits[-1]} and tag in local["README.md"].decode()

        n_requests, commits = len(hub.log), list(repo.commits)
        second = mgbench(*args, "--max-shard-rows", "3", env=env)
        assert second.returncode == 0, second.stderr[-3000:]
        assert "no change, no commit" in second.stdout and f"tag {tag} already there" in second.stdout
        new = hub.log[n_requests:]
        assert not [c for c in new if "/commit/" in c[1] or "/preupload/" in c[1] or c[0] == "PUT"]
        assert repo.commits == commits and folder_files(out / "dataset") == local

        third = mgbench(*args, env=env)  # default shard size: one shard per split
        assert third.returncode == 0, third.stderr[-3000:]
        assert len(hub.calls("POST", "/commit/")) == 2
        now = folder_files(out / "dataset")
        assert sorted(p for p in repo.files if p.startswith("data/")) == sorted(p for p in now if p.startswith("data/"))
        assert {p: repo.files[p] for p in now} == now
        assert re.search(r"\d+ deleted", third.stdout) and "deleted  data/level1-00000-of-" in third.stdout
        assert repo.tags == {tag: commits[-1]}  # same task set: the release tag stays


def test_dry_run_and_missing_token(out, tmp_path, monkeypatch, capsys):
    from mgbench.cli import main
    from mgbench.dataset.hub import hub_api

    with FakeHub() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        assert (
            main(
                [
                    "publish",
                    "--out",
                    str(out),
                    "--folder",
                    str(tmp_path / "ds"),
                    "--results-root",
                    str(out / "results"),
                    "--push",
                    REPO_ID,
                    "--dry-run",
                ]
            )
            == 0
        )
        assert hub.log == [] and (tmp_path / "ds" / "README.md").is_file()
        said = capsys.readouterr().out  # the dry run lists what it would push: files and tag
        assert "would push" in said and REPO_ID in said and re.search(r"tag v\S+", said), said
        listed = {x.strip() for x in said.splitlines() if x.startswith("  ")}
        assert "README.md" in listed and any(x.startswith("data/") and x.endswith(".parquet") for x in listed)
        assert f"datasets/{REPO_ID}" in (tmp_path / "ds" / "README.md").read_text()
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with pytest.raises(RuntimeError, match="HF_TOKEN"):
        hub_api()
