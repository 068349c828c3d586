"""Row values under the trust policy (core/trust.py), below the service: media items, archives, downloads,
produced files, export_media and reader extract dirs are checked where they are opened or written (a path
outside the roots is a row's reject naming the reason, never a read), URLs by address at the connect and at
every redirect hop, and the policy reaches local worker processes. The open (CLI) policy keeps working."""
from __future__ import annotations

import http.server
import io
import json
import os
import socket
import tarfile
import threading

import pytest

from gristmill.core import columns as C
from gristmill.core import trust
from gristmill.core.fused import FusedOp
from gristmill.registry import create_op

OUTSIDE_MSG = "outside the server's data roots"


def _png(path, size=(7, 5)):
    from PIL import Image
    Image.new("RGB", size, (200, 10, 10)).save(path)
    return str(path)


@pytest.fixture()
def world(tmp_path):
    """``root`` (the data root, holding an image, a LaTeX tar and a link pointing out) and ``out`` (outside it,
    holding a secret, an image and a tar)."""
    root, out = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    out.mkdir()
    (out / "secret.txt").write_text("TOP-SECRET-BYTES")
    _png(out / "far.png", (13, 11))
    _png(root / "near.png")
    for d in (root, out):
        tex = b"\\section{x} " + (b"SECRET-TEX" if d is out else b"fine-tex")
        with tarfile.open(d / "paper.tar", "w") as tf:
            info = tarfile.TarInfo("main.tex")
            info.size = len(tex)
            tf.addfile(info, io.BytesIO(tex))
    os.symlink(out / "far.png", root / "link.png")
    return {"root": root, "out": out, "policy": trust.service_policy([root])}


def _run(op_name: str, params: dict, rows: list[dict]):
    op = create_op(op_name, params).bind("text", 0)
    return FusedOp([op]).run_batch(C.from_records(rows))


# -- media items ----------------------------------------------------------------------------------------
def test_open_media_and_size_refuse_outside_paths_before_looking(world):
    from gristmill.media import media_size, open_media
    from gristmill.media.image import image_size, load_image
    far, near, link = str(world["out"] / "far.png"), str(world["root"] / "near.png"), str(world["root"] / "link.png")
    missing = str(world["out"] / "no-such.png")
    with trust.active(world["policy"]):
        for fn in (open_media, media_size, image_size, load_image):
            for p in (far, link, missing, "near.png"):  # outside, a link out, existence not revealed, relative
                with pytest.raises(trust.Refused) as e:
                    fn(p)
                assert ("relative" if p == "near.png" else OUTSIDE_MSG) in str(e.value)
        assert image_size(near) == (7, 5) and media_size(b"abc") == 3 and open_media(b"x").read() == b"x"
    # the CLI's open policy opens anything, as before
    assert image_size(far) == (13, 11) and media_size(far) == os.path.getsize(far)


def test_a_cached_decode_does_not_leak_to_a_restricted_policy(world):
    from gristmill.media.image import clear_cache, image_size, load_image, load_rgb
    far = str(world["out"] / "far.png")
    clear_cache()
    load_rgb(far)  # cached under the open policy (a CLI run in this process)
    assert image_size(far) == (13, 11)
    with trust.active(world["policy"]):
        for fn in (load_image, image_size, load_rgb):
            with pytest.raises(trust.Refused):
                fn(far)


@pytest.mark.parametrize("op,params,key", [
    ("image_size_filter", {"min_size": "1b"}, "images"),
    ("image_shape_filter", {"min_width": 1}, "images"),
    ("audio_size_filter", {"min_size": "1b"}, "audios"),
    ("audio_duration_filter", {"min_duration": 0}, "audios"),
    ("video_duration_filter", {"min_duration": 0}, "videos"),
])
def test_media_filters_reject_rows_naming_outside_files(world, op, params, key):
    far, near = str(world["out"] / "far.png"), str(world["root"] / "near.png")
    rows = [{"text": "a", key: [far]}, {"text": "b", key: [str(world["root"] / "link.png")]}, {"text": "c", key: []}]
    if key == "images":
        rows.append({"text": "d", key: [near]})
    with trust.active(world["policy"]):
        res = _run(op, params, rows)
    assert sorted(r.row["text"] for r in res.rejects) == ["a", "b"]
    assert all(OUTSIDE_MSG in r.message and r.error_type == "Refused" for r in res.rejects)
    assert res.counts[0].rows_in == len(rows)


# -- archives and downloads -----------------------------------------------------------------------------
def test_latex_merge_reads_only_archives_inside_the_roots(world):
    rows = [{"text": "", "compressed_file": str(world["out"] / "paper.tar")},
            {"text": "", "compressed_file": str(world["root"] / "paper.tar")}]
    with trust.active(world["policy"]):
        res = _run("latex_merge_tex_mapper", {}, rows)
    assert [r.row["compressed_file"] for r in res.rejects] == [rows[0]["compressed_file"]]
    assert OUTSIDE_MSG in res.rejects[0].message
    assert res.batch.column("text").to_pylist() == ["\\section{x} fine-tex"]
    assert "SECRET-TEX" in _run("latex_merge_tex_mapper", {}, rows[:1]).batch.column("text")[0].as_py()  # CLI


def test_download_file_local_paths(world):
    secret = str(world["out"] / "secret.txt")
    rows = [{"text": "a", "f": secret}, {"text": "b", "f": [str(world["root"] / "near.png"), secret]},
            {"text": "c", "f": str(world["root"] / "near.png")}]
    with trust.active(world["policy"]):
        res = _run("download_file_mapper", {"download_field": "f", "save_field": "b"}, rows)
    assert sorted(r.row["text"] for r in res.rejects) == ["a", "b"]
    assert all(OUTSIDE_MSG in r.message for r in res.rejects)
    assert res.batch.column("b").to_pylist() == [(world["root"] / "near.png").read_bytes()]
    assert b"TOP-SECRET" not in json.dumps([r.row for r in res.rejects]).encode()
    cli = _run("download_file_mapper", {"download_field": "f", "save_field": "b"}, rows[:1])
    assert cli.batch.column("b").to_pylist() == [b"TOP-SECRET-BYTES"]


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        if self.path.startswith("/to-ftp"):
            self.send_response(302)
            self.send_header("Location", f"ftp://127.0.0.1:{self.server.server_port}/x")
            self.end_headers()
            return
        if self.path.startswith("/hop"):
            self.send_response(302)
            self.send_header("Location", "/data.bin")
            self.end_headers()
            return
        body = b"INTERNAL-ONLY"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


@pytest.fixture()
def http_server():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    yield f"http://127.0.0.1:{srv.server_port}"
    srv.shutdown()
    srv.server_close()


def test_download_file_urls_follow_the_policy(world, http_server):
    urls = [f"{http_server}/data.bin", f"http://localhost:{http_server.rsplit(':', 1)[1]}/hop"]
    rows = [{"text": str(i), "f": u} for i, u in enumerate(urls)]
    params = {"download_field": "f", "save_field": "b"}
    with trust.active(world["policy"]):
        res = _run("download_file_mapper", params, rows)
    assert len(res.rejects) == 2 and res.batch.num_rows == 0
    assert all("loopback, private or reserved" in r.message for r in res.rejects)
    # --allow-private-urls: fetched (redirect followed), as under the CLI
    with trust.active(trust.service_policy([world["root"]], allow_private_urls=True)):
        res = _run("download_file_mapper", params, rows)
    assert not res.rejects and res.batch.column("b").to_pylist() == [b"INTERNAL-ONLY"] * 2
    assert _run("download_file_mapper", params, rows).batch.column("b").to_pylist() == [b"INTERNAL-ONLY"] * 2


def test_each_redirect_hop_is_checked(world, http_server):
    from gristmill.web.download import open_url
    pol = trust.service_policy([world["root"]], allow_private_urls=True)
    with open_url(f"{http_server}/hop", 10, pol) as r:
        assert r.read() == b"INTERNAL-ONLY"
    with pytest.raises(trust.Refused, match="redirect from .*only http"):
        open_url(f"{http_server}/to-ftp", 10, pol)
    with pytest.raises(trust.Refused):
        open_url("file:///etc/passwd", 10, pol)


def test_the_connect_uses_the_checked_address(world, http_server, monkeypatch):
    """DNS rebinding: the name resolves to a public address when first checked and to loopback afterwards;
    the connection checks the address it connects to, so it is refused (and the server never asked)."""
    from gristmill.web.download import open_url
    real = socket.getaddrinfo
    calls = []

    def flaky(host, port, *a, **kw):
        if host == "rebind.test":
            calls.append(port)
            ip = "93.184.216.34" if len(calls) == 1 else "127.0.0.1"
            return real(ip, port, *a, **kw)
        return real(host, port, *a, **kw)
    monkeypatch.setattr(socket, "getaddrinfo", flaky)
    port = http_server.rsplit(":", 1)[1]
    with pytest.raises(trust.Refused, match="127.0.0.1"):
        open_url(f"http://rebind.test:{port}/data.bin", 10, world["policy"])
    assert len(calls) == 2


# -- writes ---------------------------------------------------------------------------------------------
def test_produced_paths_stay_inside_the_roots(world, monkeypatch, tmp_path):
    from gristmill.media import paths, video
    monkeypatch.delenv("DJ_PRODUCED_DATA_DIR", raising=False)
    monkeypatch.chdir(tmp_path)  # outside the root: a relative save_dir would land here
    near, far = str(world["root"] / "near.png"), str(world["out"] / "far.png")
    with trust.active(world["policy"]):
        assert paths.produced_path(near, "op", None, {}).startswith(str(world["root"]))
        for src, save in ((far, None), (near, "rel-out"), (near, str(world["out"]))):
            with pytest.raises(trust.Refused):
                paths.produced_path(src, "op", save, {})
        for save in (None, "rel-out", str(world["out"])):  # video default: the working directory
            with pytest.raises(trust.Refused):
                video.produced_path(near, "op", {}, save)
        with pytest.raises(trust.Refused):
            paths.write_atomic(str(world["out"] / "x.png"), lambda tmp: open(tmp, "wb").close())
    assert not (world["out"] / "x.png").exists() and not (tmp_path / "rel-out").exists()
    assert paths.produced_path(far, "op", None, {}).startswith(str(world["out"]))  # CLI: as before


def test_image_mapper_with_an_outside_source_writes_nothing(world):
    rows = [{"text": "a", "images": [str(world["out"] / "far.png")]},
            {"text": "b", "images": [str(world["root"] / "near.png")]}]
    with trust.active(world["policy"]):
        res = _run("image_blur_mapper", {"p": 1.0}, rows)
    assert [r.row["text"] for r in res.rejects] == ["a"] and OUTSIDE_MSG in res.rejects[0].message
    assert not any("__dj__produced" in p for p in os.listdir(world["out"]))
    assert res.batch.column("images").to_pylist()[0][0].startswith(str(world["root"]))


def test_export_media_copies_only_from_inside_the_roots(world, tmp_path):
    from gristmill.io.media_export import media_batch, place, read_media
    export = world["root"] / "export"
    with trust.active(world["policy"]):
        with pytest.raises(trust.Refused):
            place(str(world["out"] / "secret.txt"), str(export), "copy")
        with pytest.raises(trust.Refused):
            place(str(world["root"] / "link.png"), str(export), "link")
        with pytest.raises(trust.Refused):
            read_media(str(world["out"] / "secret.txt"))
        b = C.from_records([{"images": [str(world["root"] / "near.png")]}])
        assert media_batch(b, str(export), mode="copy").column("images").to_pylist()[0][0].startswith("media/")
    found = [f for _, _, fs in os.walk(export) for f in fs]
    assert len(found) == 1 and found[0].endswith("near.png")


def test_webdataset_extract_media_dir_is_checked(world):
    from gristmill.dataset import Dataset
    (world["root"] / "shards").mkdir()
    tar = world["root"] / "shards" / "shard.tar"
    with tarfile.open(tar, "w") as tf:
        for name, data in (("0001.png", (world["root"] / "near.png").read_bytes()), ("0001.txt", b"cap")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    with trust.active(world["policy"]):
        for where in (str(world["out"] / "x"), "relative-x"):
            with pytest.raises(trust.Refused):
                Dataset.load(str(tar), extract_media=where).head(1)
        rows = Dataset.load(str(tar), extract_media=str(world["root"] / "x")).head(1)
    assert rows[0]["images"][0].startswith(str(world["root"] / "x"))
    assert not (world["out"] / "x").exists()


# -- worker processes -----------------------------------------------------------------------------------
def test_worker_processes_get_the_callers_policy(world):
    from gristmill.engine.pool import WorkerPool
    pol = trust.service_policy([world["root"]])
    with trust.active(pol):
        pool = WorkerPool(2)
    try:
        got = list(pool.map_unordered(os.getenv, [trust.ENV, trust.ENV], lambda r, b: None))
    finally:
        pool.close()
    assert got == [trust.to_env(pol)] * 2
    pool = WorkerPool(2)  # the open policy: nothing set, workers inherit the environment as before
    try:
        assert list(pool.map_unordered(os.getenv, [trust.ENV], lambda r, b: None)) == [os.environ.get(trust.ENV)]
    finally:
        pool.close()


def test_an_in_process_run_with_workers_rejects_outside_rows(world, tmp_path):
    from gristmill.dataset import Dataset
    data = world["root"] / "data"
    data.mkdir()
    for i in range(2):
        rows = [{"text": f"{i}-{j}", "images": [str(world["out"] / "far.png")]} for j in range(3)]
        rows.append({"text": f"{i}-ok", "images": [str(world["root"] / "near.png")]})
        (data / f"p{i}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with trust.active(world["policy"]):
        report = Dataset.load(str(data)).process([create_op("image_shape_filter", {"min_width": 1})]).export(
            str(world["root"] / "out.jsonl"), np=2, work_dir=str(world["root"] / "work"))
    assert report["rows_out"] == 2 and report["rejects"] == 6, report
    out = [json.loads(x)["text"] for x in (world["root"] / "out.jsonl").read_text().splitlines()]
    assert sorted(out) == ["0-ok", "1-ok"]
