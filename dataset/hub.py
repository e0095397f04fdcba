"""Push a dataset folder to the Hugging Face Hub: one commit (adds + stale deletions) and a tag.

The token comes from HF_TOKEN and the endpoint from HF_ENDPOINT (read when pushing, so a test
can point the real client at a local server). Files whose bytes already sit on the Hub (same
git blob id, or same LFS sha256) are not uploaded again; files under the managed folders (data/,
plots/) that the release no longer has are deleted in the same commit. An unchanged release
makes no commit at all.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi
from huggingface_hub.hf_api import RepoFile
from huggingface_hub.utils import sha

MANAGED = ("data/", "plots/")


@dataclass
class PushReport:
    repo_id: str
    tag: str
    commit: str | None  # None when nothing changed
    uploaded: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    tag_created: bool = False


def _same(local: Path, remote: RepoFile) -> bool:
    """Whether a file on the Hub holds exactly the bytes of `local`."""
    if remote.lfs is not None:
        with local.open("rb") as f:
            return sha.sha_fileobj(f).hex() == remote.lfs.sha256
    return sha.git_hash(local.read_bytes()) == remote.blob_id


def hub_api(token: str | None = None, endpoint: str | None = None) -> HfApi:
    """An HfApi on HF_ENDPOINT (default huggingface.co) with HF_TOKEN."""
    token = token or os.environ.get("HF_TOKEN")
    if not token:
        raise RuntimeError("no Hugging Face token: set HF_TOKEN")
    return HfApi(endpoint=endpoint or os.environ.get("HF_ENDPOINT") or None, token=token)


def push_folder(
    folder: Path | str,
    files: list[str],
    repo_id: str,
    tag: str,
    message: str,
    api: HfApi | None = None,
    private: bool = False,
) -> PushReport:
    """Create the dataset repo if missing, commit `files` (relative to folder) and tag the release."""
    folder = Path(folder)
    api = api or hub_api()
    api.create_repo(repo_id, repo_type="dataset", exist_ok=True, private=private)
    remote = {
        f.path: f for f in api.list_repo_tree(repo_id, repo_type="dataset", recursive=True) if isinstance(f, RepoFile)
    }
    rep = PushReport(repo_id, tag, None)
    ops: list[CommitOperationAdd | CommitOperationDelete] = []
    for rel in files:
        if rel in remote and _same(folder / rel, remote[rel]):
            rep.unchanged.append(rel)
        else:
            ops.append(CommitOperationAdd(path_in_repo=rel, path_or_fileobj=str(folder / rel)))
            rep.uploaded.append(rel)
    for path in sorted(remote):
        if path.startswith(MANAGED) and path not in files:
            ops.append(CommitOperationDelete(path_in_repo=path))
            rep.deleted.append(path)
    if ops:
        info = api.create_commit(repo_id, ops, commit_message=message, repo_type="dataset")
        rep.commit = info.oid
    refs = api.list_repo_refs(repo_id, repo_type="dataset")
    if tag not in {t.name for t in refs.tags}:
        api.create_tag(repo_id, tag=tag, tag_message=message, revision=rep.commit, repo_type="dataset")
        rep.tag_created = True
    return rep
