"""download_file_mapper against a local HTTP server on 127.0.0.1 (no network). The outputs were checked
against Data-Juicer 1.6.1's op on the same server during development: same paths, bytes, and a failed URL
left in place with null bytes."""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from djops_util import fused, run

FILES = {"/img/cat.png": b"\x89PNG\r\n\x1a\nfake-cat", "/img/dog.jpg": b"\xff\xd8\xff dog",
         "/docs/r%C3%A9sum%C3%A9.txt": "résumé ✓".encode()}


@pytest.fixture(scope="module")
def server():
    hits = []

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            hits.append(self.path)
            body = FILES.get(self.path)
            if body is None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", hits
    srv.shutdown()


def test_bytes_into_the_default_field(server):
    base, _ = server
    rows = [{"text": "a", "url": f"{base}/img/cat.png"}, {"text": "b", "url": f"{base}/missing.png"},
            {"text": "c", "url": f"{base}/docs/r%C3%A9sum%C3%A9.txt"}]
    kept, removed = run("download_file_mapper", rows, download_field="url")
    assert not removed
    assert [r["image_bytes"] for r in kept] == [FILES["/img/cat.png"], None, FILES["/docs/r%C3%A9sum%C3%A9.txt"]]
    assert [r["url"] for r in kept] == [r["url"] for r in rows]


def test_save_dir_rewrites_paths_and_reuses_files(server, tmp_path):
    base, hits = server
    local = tmp_path / "local.bin"
    local.write_bytes(b"local bytes")
    rows = [{"text": "a", "images": [f"{base}/img/cat.png", f"{base}/img/dog.jpg"]},
            {"text": "b", "images": [f"{base}/nope.jpg", str(local)]}, {"text": "c", "images": []}]
    d = tmp_path / "dl"
    kept, _ = run("download_file_mapper", rows, download_field="images", save_dir=str(d), save_field="bytes",
                  max_concurrent=3)
    assert kept[0]["images"] == [str(d / "cat.png"), str(d / "dog.jpg")]
    assert kept[1]["images"] == [f"{base}/nope.jpg", str(local)]  # failed URL kept; a local path left as is
    assert kept[0]["bytes"] == [FILES["/img/cat.png"], FILES["/img/dog.jpg"]]
    assert kept[1]["bytes"] == [None, b"local bytes"] and kept[2]["bytes"] == []
    assert (d / "cat.png").read_bytes() == FILES["/img/cat.png"]
    assert not [p for p in d.iterdir() if p.name.startswith(".part-")]
    n = len(hits)
    again, _ = run("download_file_mapper", rows[:1], download_field="images", save_dir=str(d))
    assert again[0]["images"] == kept[0]["images"] and len(hits) == n  # already there: not fetched again


def test_save_field_present_needs_resume(server):
    base, hits = server
    rows = [{"text": "a", "url": [f"{base}/img/cat.png", f"{base}/img/dog.jpg"], "bytes": [b"kept", None]}]
    _, _, rejects = fused("download_file_mapper", rows, download_field="url", save_field="bytes")
    assert rejects and "resume_download" in str(rejects[0])
    n = len(hits)
    kept, _ = run("download_file_mapper", rows, download_field="url", save_field="bytes", resume_download=True)
    assert kept[0]["bytes"] == [b"kept", FILES["/img/dog.jpg"]] and hits[n:] == ["/img/dog.jpg"]


def test_recipe_downloads_then_filters(server, tmp_path):
    """End to end: gristmill run with download_file_mapper (save_dir) then a field filter."""
    import subprocess
    import sys
    import yaml
    base, _ = server
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"text": t, "u": f"{base}{p}"}) + "\n"
                           for t, p in [("cat", "/img/cat.png"), ("gone", "/x.png"), ("dog", "/img/dog.jpg")]))
    recipe = {"dataset_path": str(src), "export_path": str(tmp_path / "out.jsonl"), "work_dir": str(tmp_path / "w"),
              "np": 2, "process": [{"download_file_mapper": {"download_field": "u", "save_dir": str(tmp_path / "files")}},
                                   {"general_field_filter": {"filter_condition": f"u != '{base}/x.png'"}}]}
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe))
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(tmp_path / "r.yaml"), "--no-progress"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    out = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [(o["text"], o["u"]) for o in out] == [("cat", str(tmp_path / "files" / "cat.png")),
                                                  ("dog", str(tmp_path / "files" / "dog.jpg"))]
