"""A recorded subset of the GitHub REST API on 127.0.0.1, for tests of the real PyGithub client.

Serves: GET /search/code (paginated with Link headers), /repos/{o}/{r}, /repos/{o}/{r}/license,
/repos/{o}/{r}/commits/{ref}, /repos/{o}/{r}/tarball/{ref} (302 to /_codeload/...) and the
tar.gz body. `faults` injects responses before the real one: {path prefix: [(status, headers,
body), ...]} consumed in order (a secondary-rate-limit 403 with Retry-After, a 502...). Every
request is logged in `log` as (method, path with query).
"""

from __future__ import annotations

import io
import json
import tarfile
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlparse

SECONDARY = {
    "message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
    "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
}


@dataclass
class FakeRepo:
    full_name: str
    files: dict[str, bytes]  # path -> content (the tarball)
    license: str | None = "MIT"  # SPDX id answered by /license (None: 404)
    default_branch: str = "main"
    head: str = "a" * 40
    fork: bool = False
    raw_tarball: bytes | None = None  # served instead of a built tarball (corrupt archives)
    links: dict[str, str] = field(default_factory=dict)  # symlink members: path -> target
    unsafe: list[str] = field(default_factory=list)  # member names escaping the root

    def tarball(self, ref: str) -> bytes:
        if self.raw_tarball is not None:
            return self.raw_tarball
        top = f"{self.full_name.replace('/', '-')}-{ref[:7]}"
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tf:
            for path, data in sorted(self.files.items()):
                info = tarfile.TarInfo(f"{top}/{path}")
                info.size, info.mtime = len(data), 1_700_000_000
                tf.addfile(info, io.BytesIO(data))
            for path, target in self.links.items():
                info = tarfile.TarInfo(f"{top}/{path}")
                info.type, info.linkname = tarfile.SYMTYPE, target
                tf.addfile(info)
            for name in self.unsafe:
                info = tarfile.TarInfo(f"{top}/{name}")
                data = b"import os\n"
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
        return buf.getvalue()


class FakeGithub:
    def __init__(self) -> None:
        self.repos: dict[str, FakeRepo] = {}
        self.search_results: dict[str, list[tuple[str, str]]] = {}  # query -> [(repo, path)]
        self.faults: dict[str, list[tuple[int, dict, dict]]] = {}
        self.log: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeGithub:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def add(self, repo: FakeRepo) -> FakeRepo:
        self.repos[repo.full_name] = repo
        return repo

    def requests(self, prefix: str = "") -> list[str]:
        with self.lock:
            return [p for _, p in self.log if p.startswith(prefix)]

    # ---- payloads --------------------------------------------------------------------------
    def repo_json(self, r: FakeRepo) -> dict:
        owner, name = r.full_name.split("/")
        lic = {"key": r.license.lower(), "name": r.license, "spdx_id": r.license} if r.license else None
        return {
            "id": abs(hash(r.full_name)) % 10**8,
            "name": name,
            "full_name": r.full_name,
            "owner": {"login": owner, "id": 1, "type": "User"},
            "private": False,
            "html_url": f"https://github.com/{r.full_name}",
            "url": f"{self.url}/repos/{r.full_name}",
            "fork": r.fork,
            "default_branch": r.default_branch,
            "license": lic,
            "stargazers_count": 42,
        }

    def search_page(self, query: str, page: int, per_page: int) -> tuple[dict, dict]:
        rows = self.search_results.get(query, [])
        chunk = rows[(page - 1) * per_page : page * per_page]
        items = []
        for repo, path in chunk:
            r = self.repos.get(repo) or FakeRepo(repo, {})
            items.append(
                {
                    "name": path.rsplit("/", 1)[-1],
                    "path": path,
                    "sha": "b" * 40,
                    "url": f"{self.url}/repos/{repo}/contents/{path}",
                    "git_url": f"{self.url}/repos/{repo}/git/blobs/{'b' * 40}",
                    "html_url": f"https://github.com/{repo}/blob/main/{path}",
                    "repository": self.repo_json(r),
                    "score": 1.0,
                }
            )
        headers = {}
        last = max(1, -(-len(rows) // per_page))
        links = []
        if page < last:
            following = urlencode({"q": query, "per_page": per_page, "page": page + 1})
            links.append(f'<{self.url}/search/code?{following}>; rel="next"')
            links.append(
                f'<{self.url}/search/code?{urlencode({"q": query, "per_page": per_page, "page": last})}>; rel="last"'
            )
        if links:
            headers["Link"] = ", ".join(links)
        return {"total_count": len(rows), "incomplete_results": False, "items": items}, headers


def _handler(gh: FakeGithub) -> type[BaseHTTPRequestHandler]:
    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a: object) -> None:
            pass

        def _send(
            self,
            status: int,
            body: bytes | dict | None = None,
            headers: dict | None = None,
            ctype: str = "application/json",
        ) -> None:
            data = json.dumps(body).encode() if isinstance(body, dict) else (body or b"")
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("X-RateLimit-Remaining", "4999")
            self.send_header("X-RateLimit-Reset", str(int(time.time()) + 3600))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802
            with gh.lock:
                gh.log.append(("GET", self.path))
                u = urlparse(self.path)
                fault = None
                for prefix, queue in gh.faults.items():
                    if u.path.startswith(prefix) and queue:
                        fault = queue.pop(0)
                        break
            if fault:
                status, headers, body = fault
                return self._send(status, body, headers)
            parts = [p for p in u.path.split("/") if p]
            qs = parse_qs(u.query)
            if parts == ["search", "code"]:
                body, headers = gh.search_page(
                    qs["q"][0], int(qs.get("page", ["1"])[0]), int(qs.get("per_page", ["30"])[0])
                )
                return self._send(200, body, headers)
            if parts[:1] == ["_codeload"] and len(parts) == 5:
                r = gh.repos.get(f"{parts[1]}/{parts[2]}")
                if r is None:
                    return self._send(404, {"message": "Not Found"})
                return self._send(200, r.tarball(parts[4]), ctype="application/x-gzip")
            if parts[:1] == ["repos"] and len(parts) >= 3:
                r = gh.repos.get(f"{parts[1]}/{parts[2]}")
                if r is None:
                    return self._send(404, {"message": "Not Found"})
                rest = parts[3:]
                if not rest:
                    return self._send(200, gh.repo_json(r))
                if rest == ["license"]:
                    if not r.license:
                        return self._send(404, {"message": "Not Found"})
                    lic = gh.repo_json(r)["license"]
                    return self._send(200, {"name": "LICENSE", "path": "LICENSE", "license": lic})
                if rest[0] == "commits" and len(rest) == 2:
                    return self._send(200, {"sha": r.head, "url": f"{gh.url}/repos/{r.full_name}/commits/{r.head}"})
                if rest[0] == "tarball" and len(rest) == 2:
                    loc = f"{gh.url}/_codeload/{r.full_name}/tar.gz/{rest[1]}"
                    return self._send(302, b"", {"Location": loc})
            return self._send(404, {"message": "Not Found"})

    return H
