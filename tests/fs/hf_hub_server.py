"""A small Hugging Face Hub HTTP server for the hf:// tests: read-only dataset repos served from a local
directory (``ROOT/org/name/...`` is the dataset ``org/name`` at revision ``main``), speaking the part of the
Hub's HTTP API that ``huggingface_hub``'s ``HfFileSystem`` uses to list and read a dataset (no mock of the
client: it talks HTTP to this server through ``HF_ENDPOINT``):

- ``GET /api/datasets/{repo}`` and ``GET /api/datasets/{repo}/revision/{rev}``: the repo's info (id, sha,
  siblings), 404 with ``X-Error-Code: RepoNotFound`` for an unknown repo, ``RevisionNotFound`` for another
  revision;
- ``GET /api/datasets/{repo}/tree/{rev}[/{path}]`` (``recursive``): a folder's entries, paginated with a
  ``Link: <…>; rel="next"`` header every ``page`` entries, as the Hub does;
- ``POST /api/datasets/{repo}/paths-info/{rev}`` (form field ``paths``, repeated): those paths' entries;
- ``GET|HEAD /datasets/{repo}/resolve/{rev}/{path}``: the file's bytes, honouring ``Range`` (206), with the
  ``ETag`` / ``X-Repo-Commit`` headers the client reads.

Entries carry a git blob id (sha1 of ``blob <size>\\0`` + bytes, as git computes it) as ``oid``. Requests are
counted per route (``server.hits``)."""
from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlparse

SHA = "0123456789abcdef0123456789abcdef01234567"  # the one commit of every repo


def blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class HubServer:
    def __init__(self, root: str, page: int = 50):
        self.root, self.page = root, page
        self.hits: Counter = Counter()
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):  # quiet
                pass

            def do_GET(self):
                server.route(self, "GET")

            def do_HEAD(self):
                server.route(self, "HEAD")

            def do_POST(self):
                server.route(self, "POST")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    # -- the repository -------------------------------------------------------------------------------
    def _repo_dir(self, repo: str) -> str | None:
        d = os.path.join(self.root, *repo.split("/"))
        return d if repo.count("/") == 1 and os.path.isdir(d) else None

    def _entry(self, repo_dir: str, rel: str) -> dict | None:
        p = os.path.join(repo_dir, *rel.split("/"))
        if os.path.isfile(p):
            with open(p, "rb") as f:
                data = f.read()
            return {"type": "file", "oid": blob_id(data), "size": len(data), "path": rel}
        if os.path.isdir(p):
            return {"type": "directory", "oid": hashlib.sha1(rel.encode()).hexdigest(), "path": rel}
        return None

    def _tree(self, repo_dir: str, rel: str, recursive: bool) -> list[dict] | None:
        base = os.path.join(repo_dir, *rel.split("/")) if rel else repo_dir
        if not os.path.isdir(base):
            return None
        out = []
        for name in sorted(os.listdir(base)):
            sub = f"{rel}/{name}" if rel else name
            out.append(self._entry(repo_dir, sub))
            if recursive and os.path.isdir(os.path.join(base, name)):
                out.extend(self._tree(repo_dir, sub, True))
        return out

    # -- HTTP -----------------------------------------------------------------------------------------
    def route(self, h: BaseHTTPRequestHandler, method: str) -> None:
        u = urlparse(h.path)
        path, query = unquote(u.path), parse_qs(u.query)
        body = h.rfile.read(int(h.headers.get("Content-Length") or 0)) if method == "POST" else b""
        m = re.fullmatch(r"/api/datasets/([^/]+/[^/]+)(?:/revision/([^/]+))?", path)
        if m and method == "GET":
            return self._info(h, m.group(1), m.group(2))
        m = re.fullmatch(r"/api/datasets/([^/]+/[^/]+)/tree/([^/]+)(?:/(.*))?", path)
        if m and method == "GET":
            return self._list(h, m.group(1), m.group(2), (m.group(3) or "").strip("/"), query)
        m = re.fullmatch(r"/api/datasets/([^/]+/[^/]+)/paths-info/([^/]+)", path)
        if m and method == "POST":
            return self._paths_info(h, m.group(1), m.group(2), parse_qs(body.decode()))
        m = re.fullmatch(r"/datasets/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
        if m and method in ("GET", "HEAD"):
            return self._resolve(h, m.group(1), m.group(2), m.group(3), method)
        self._send(h, 404, {"error": f"no route {method} {path}"}, "EntryNotFound")

    def _count(self, what: str) -> None:
        with self.lock:
            self.hits[what] += 1

    def _send(self, h, code: int, payload, error: str | None = None, headers: dict | None = None,
              method: str = "GET") -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        h.send_response(code)
        h.send_header("Content-Type", "application/octet-stream" if isinstance(payload, bytes) else "application/json")
        h.send_header("Content-Length", str(len(data)))
        if error:
            h.send_header("X-Error-Code", error)
            h.send_header("X-Error-Message", error)
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        if method != "HEAD":
            h.wfile.write(data)

    def _check(self, h, repo: str, rev: str | None) -> str | None:
        d = self._repo_dir(repo)
        if d is None:
            self._send(h, 404, {"error": "Repository not found"}, "RepoNotFound")
            return None
        if rev not in (None, "main", SHA):
            self._send(h, 404, {"error": f"Invalid rev id: {rev}"}, "RevisionNotFound")
            return None
        return d

    def _info(self, h, repo: str, rev: str | None) -> None:
        self._count("info")
        d = self._check(h, repo, rev)
        if d is not None:
            files = [e["path"] for e in self._tree(d, "", True) if e["type"] == "file"]
            self._send(h, 200, {"_id": repo, "id": repo, "author": repo.split("/")[0], "sha": SHA, "private": False,
                                "disabled": False, "gated": False, "downloads": 0, "likes": 0, "tags": [],
                                "siblings": [{"rfilename": f} for f in files],
                                "lastModified": "2026-01-01T00:00:00.000Z"})

    def _list(self, h, repo: str, rev: str, rel: str, query: dict) -> None:
        self._count("tree")
        d = self._check(h, repo, rev)
        if d is None:
            return
        entries = self._tree(d, rel, query.get("recursive", ["false"])[0].lower() == "true")
        if entries is None:
            return self._send(h, 404, {"error": f"{rel} does not exist"}, "EntryNotFound")
        start = int(query.get("cursor", ["0"])[0])
        headers = {}
        if start + self.page < len(entries):
            nxt = dict(query, cursor=[str(start + self.page)])
            qs = "&".join(f"{k}={v[0]}" for k, v in sorted(nxt.items()))
            headers["Link"] = f'<{self.url}{urlparse(h.path).path}?{qs}>; rel="next"'
        self._send(h, 200, entries[start:start + self.page], headers=headers)

    def _paths_info(self, h, repo: str, rev: str, form: dict) -> None:
        self._count("paths-info")
        d = self._check(h, repo, rev)
        if d is not None:
            found = [self._entry(d, p.strip("/")) for p in form.get("paths", [])]
            self._send(h, 200, [e for e in found if e is not None])

    def _resolve(self, h, repo: str, rev: str, rel: str, method: str) -> None:
        self._count("resolve")
        d = self._check(h, repo, rev)
        if d is None:
            return
        p = os.path.join(d, *rel.split("/"))
        if not os.path.isfile(p):
            return self._send(h, 404, {"error": "Entry not found"}, "EntryNotFound", method=method)
        with open(p, "rb") as f:
            data = f.read()
        headers = {"ETag": f'"{blob_id(data)}"', "X-Repo-Commit": SHA, "Accept-Ranges": "bytes"}
        rng = re.fullmatch(r"bytes=(\d+)-(\d*)", h.headers.get("Range") or "")
        if rng:
            a = int(rng.group(1))
            b = min(int(rng.group(2)) if rng.group(2) else len(data) - 1, len(data) - 1)
            headers["Content-Range"] = f"bytes {a}-{b}/{len(data)}"
            return self._send(h, 206, data[a:b + 1], headers=headers, method=method)
        self._send(h, 200, data, headers=headers, method=method)
