"""A tiny in-memory Hugging Face Hub on 127.0.0.1 for tests of the real huggingface_hub client.

It speaks the endpoints `HfApi` uses to create a dataset repo, list its tree and refs, validate
a README's YAML, pre-upload (regular files inline, *.parquet / *.png through the LFS batch API
with basic PUT transfers to pre-signed, token-free URLs; set HF_HUB_DISABLE_XET=1 in the client),
commit (ndjson: file, lfsFile, deletedFile, deletedFolder) and tag. Requests are logged in `log`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlparse

import yaml

LFS_SUFFIXES = (".parquet", ".png")
REPO = r"(?P<repo>[\w.-]+/[\w-]+(?:\.(?!git/)[\w-]+)*)"


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Repo:
    files: dict[str, bytes] = field(default_factory=lambda: {".gitattributes": b"*.parquet filter=lfs\n"})
    lfs: set[str] = field(default_factory=set)
    commits: list[str] = field(default_factory=lambda: ["0" * 40])
    tags: dict[str, str] = field(default_factory=dict)

    def tree(self) -> list[dict[str, Any]]:
        out, dirs = [], set()
        for path in sorted(self.files):
            data = self.files[path]
            parts = path.split("/")[:-1]
            dirs.update("/".join(parts[: i + 1]) for i in range(len(parts)))
            entry = {"type": "file", "path": path, "size": len(data), "oid": git_blob_id(data)}
            if path in self.lfs:
                entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 132}
            out.append(entry)
        return [{"type": "directory", "path": d, "oid": "f" * 40} for d in sorted(dirs)] + out


class FakeHub:
    """The server state plus a running ThreadingHTTPServer; use as a context manager."""

    def __init__(self, token: str = "hf_test_token"):
        self.token = token
        self.repos: dict[str, Repo] = {}
        self.lfs_store: dict[str, bytes] = {}
        self.log: list[tuple[str, str]] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeHub:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def calls(self, method: str, pattern: str) -> list[str]:
        return [p for m, p in self.log if m == method and re.search(pattern, p)]

    # --- endpoint logic: each returns (status, json body) ---------------------------------------
    def create_repo(self, body: dict[str, Any]) -> tuple[int, Any]:
        repo_id = f"{body['organization']}/{body['name']}" if body.get("organization") else body["name"]
        url = f"{self.url}/datasets/{repo_id}"
        if repo_id in self.repos:
            return 409, {"error": "You already created this dataset repo", "url": url}
        self.repos[repo_id] = Repo()
        return 200, {"url": url, "name": repo_id}

    def preupload(self, repo: Repo, body: dict[str, Any]) -> tuple[int, Any]:
        files = []
        for f in body["files"]:
            lfs = f["path"].endswith(LFS_SUFFIXES)
            old = repo.files.get(f["path"])
            oid = None if old is None else hashlib.sha256(old).hexdigest() if lfs else git_blob_id(old)
            files.append(
                {"path": f["path"], "uploadMode": "lfs" if lfs else "regular", "shouldIgnore": False, "oid": oid}
            )
        return 200, {"files": files, "commitOid": repo.commits[-1]}

    def lfs_batch(self, body: dict[str, Any]) -> tuple[int, Any]:
        objs = []
        for o in body["objects"]:
            obj = {"oid": o["oid"], "size": o["size"], "authenticated": True}
            if o["oid"] not in self.lfs_store:
                obj["actions"] = {"upload": {"href": f"{self.url}/_lfs/{o['oid']}"}}
            objs.append(obj)
        return 200, {"transfer": "basic", "objects": objs}

    def commit(self, repo_id: str, repo: Repo, raw: bytes) -> tuple[int, Any]:
        lines = [json.loads(x) for x in raw.splitlines() if x.strip()]
        for item in lines[1:]:
            v, key = item["value"], item["key"]
            if key == "file":
                repo.files[v["path"]] = base64.b64decode(v["content"])
                repo.lfs.discard(v["path"])
            elif key == "lfsFile":
                if v["oid"] not in self.lfs_store:
                    return 422, {"error": f"LFS object {v['oid']} was never uploaded"}
                repo.files[v["path"]] = self.lfs_store[v["oid"]]
                repo.lfs.add(v["path"])
            elif key in ("deletedFile", "deletedFolder"):
                gone = [p for p in repo.files if p == v["path"] or p.startswith(v["path"].rstrip("/") + "/")]
                if not gone:
                    return 404, {"error": f"A file with this name doesn't exist: {v['path']}"}
                for p in gone:
                    repo.files.pop(p)
                    repo.lfs.discard(p)
        digest = hashlib.sha1(
            repo.commits[-1].encode() + json.dumps({p: git_blob_id(d) for p, d in sorted(repo.files.items())}).encode()
        ).hexdigest()
        repo.commits.append(digest)
        return 200, {
            "commitUrl": f"{self.url}/datasets/{repo_id}/commit/{digest}",
            "commitOid": digest,
            "pullRequestUrl": None,
        }

    def refs(self, repo: Repo) -> tuple[int, Any]:
        return 200, {
            "branches": [{"name": "main", "ref": "refs/heads/main", "targetCommit": repo.commits[-1]}],
            "converts": [],
            "tags": [{"name": t, "ref": f"refs/tags/{t}", "targetCommit": c} for t, c in sorted(repo.tags.items())],
        }

    def tag(self, repo: Repo, rev: str, body: dict[str, Any]) -> tuple[int, Any]:
        if body["tag"] in repo.tags:
            return 409, {"error": "Tag already exists"}
        repo.tags[body["tag"]] = repo.commits[-1] if rev == "main" else rev
        return 200, {}


def _read_body(h: BaseHTTPRequestHandler) -> bytes:
    if h.headers.get("Transfer-Encoding", "").lower() == "chunked":
        out = b""
        while True:
            size = int(h.rfile.readline().strip().split(b";")[0], 16)
            if size == 0:
                h.rfile.readline()
                return out
            out += h.rfile.read(size)
            h.rfile.readline()
    return h.rfile.read(int(h.headers.get("Content-Length") or 0))


def _handler(hub: FakeHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def _route(self, method: str) -> None:
            path = urlparse(self.path).path
            hub.log.append((method, path))
            raw = _read_body(self) if method in ("POST", "PUT") else b""
            if not path.startswith("/_lfs/") and self.headers.get("authorization") != f"Bearer {hub.token}":
                return self._send(401, {"error": "Invalid credentials"})
            m = re.fullmatch(rf"/datasets/{REPO}(?P<rest>\.git/info/lfs/objects/batch)", path) or re.fullmatch(
                rf"/api/datasets/{REPO}(?P<rest>/.*)", path
            )
            repo = hub.repos.get(m["repo"]) if m else None
            if m and repo is None:
                return self._send(404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"})
            rest = m["rest"] if m else ""
            if method == "POST" and path == "/api/repos/create":
                return self._send(*hub.create_repo(json.loads(raw)))
            if method == "POST" and path == "/api/validate-yaml":
                text = json.loads(raw)["content"]
                try:
                    yaml.safe_load(text.split("---")[1]) if text.startswith("---") else None
                except yaml.YAMLError as e:
                    return self._send(400, {"errors": [{"message": str(e)}]})
                return self._send(200, {"errors": [], "warnings": []})
            if method == "PUT" and path.startswith("/_lfs/"):
                oid = path.rsplit("/", 1)[1]
                if hashlib.sha256(raw).hexdigest() != oid:
                    return self._send(400, {"error": "sha256 mismatch"})
                hub.lfs_store[oid] = raw
                return self._send(200, {})
            if method == "GET" and re.fullmatch(r"/tree/[^/]+(/.*)?", rest):
                return self._send(200, repo.tree())
            if method == "GET" and rest == "/refs":
                return self._send(*hub.refs(repo))
            if method == "POST" and rest.startswith("/preupload/"):
                return self._send(*hub.preupload(repo, json.loads(raw)))
            if method == "POST" and rest == ".git/info/lfs/objects/batch":
                return self._send(*hub.lfs_batch(json.loads(raw)))
            if method == "POST" and rest.startswith("/commit/"):
                return self._send(*hub.commit(m["repo"], repo, raw))
            if method == "POST" and rest.startswith("/tag/"):
                return self._send(*hub.tag(repo, rest.split("/", 2)[2], json.loads(raw)))
            return self._send(404, {"error": f"fake hub: no route for {method} {path}"})

        def do_GET(self) -> None:
            self._route("GET")

        def do_POST(self) -> None:
            self._route("POST")

        def do_PUT(self) -> None:
            self._route("PUT")

    return Handler
