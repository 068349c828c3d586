"""Issue 23, finding 8: decoded-pixel limits. A 500 KB PNG can declare 13000 x 13000 pixels (0.5 GB as RGB,
GBs once ops convert and transform it): every image / video decode checks width x height from the header
against the trust policy's ``max_pixels`` first, and the row becomes a reject naming the size and the limit.

The bomb is a valid PNG of zero pixels written here in a fraction of a second (deflate segments of a zero
block repeated, as ``zlib`` would produce them after a full flush). Memory is measured in a fresh process
(peak RSS of the process, or of its children for the CLI), so nothing of this test process counts."""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import pyarrow as pa
import pytest

from gristmill.core import trust
from gristmill.core.fused import FusedOp
from gristmill.media import image as mi
from gristmill.registry import create_op

REPO = Path(__file__).resolve().parents[2]
SIDE = 13000  # 169 M pixels: under Pillow's bomb error (179 M), over the default cap (40 M)
BOUND_MB = 600  # the capped runs stay far below this; uncapped they reach 4-9 GB


def png_bomb(path, w: int = SIDE, h: int = SIDE) -> Path:
    """A valid 8-bit RGB PNG of ``w`` x ``h`` black pixels, about 500 KB at 13000 x 13000."""
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)

    def seg(data):  # raw deflate of ``data`` ending byte-aligned with no history: concatenable
        c = zlib.compressobj(9, zlib.DEFLATED, -15)
        return c.compress(data) + c.flush(zlib.Z_FULL_FLUSH)
    row = b"\0" * (1 + 3 * w)  # filter byte + pixels
    block = row * 64
    n, rem = divmod(h, 64)
    adler = 1
    for _ in range(n):
        adler = zlib.adler32(block, adler)
    tail = row * rem
    adler = zlib.adler32(tail, adler)
    idat = b"\x78\xda" + seg(block) * n + (seg(tail) if rem else b"") + b"\x03\x00" + struct.pack(">I", adler)
    Path(path).write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                           + chunk(b"IDAT", idat) + chunk(b"IEND", b""))
    return Path(path)


def _png(path, size=(8, 6), color=(10, 20, 30)):
    from PIL import Image
    Image.new("RGB", size, color).save(path)
    return str(path)


@pytest.fixture(autouse=True)
def _fresh_cache():
    mi.clear_cache()
    yield
    mi.clear_cache()


def _run(name, rows, policy=None, **params):
    batch = pa.RecordBatch.from_pylist(rows)
    with trust.active(policy or trust.Policy()):
        res = FusedOp([create_op(name, params)]).run_batch(batch)
    return res.batch.to_pylist(), [dict(r.to_dict(), row=r.row) for r in res.rejects]


def test_bomb_is_valid_png(tmp_path):
    from PIL import Image
    small = png_bomb(tmp_path / "b.png", 300, 301)
    with Image.open(small) as im:
        im.load()
        assert im.size == (300, 301) and im.getextrema() == ((0, 0),) * 3
    big = png_bomb(tmp_path / "big.png")
    assert big.stat().st_size < 600_000
    assert mi.image_size(str(big)) == (SIDE, SIDE)  # header only: no refusal, no decode


def test_decoders_refuse_over_the_cap_before_decoding(tmp_path, monkeypatch):
    small = _png(tmp_path / "s.png", (20, 10))  # 200 pixels
    pol = trust.Policy(max_pixels=100)
    decoded = []
    from PIL import ImageFile
    real = ImageFile.ImageFile.load
    monkeypatch.setattr(ImageFile.ImageFile, "load", lambda self: decoded.append(self.size) or real(self))
    with trust.active(pol):
        for f in (mi.load_image, mi.load_rgb, mi.check_image):
            with pytest.raises(trust.TooLarge, match=r"20x10 = 200 pixels, over the limit of 100"):
                f(small)
        assert mi.image_size(small) == (20, 10)  # the header is still read
    assert decoded == []
    # the refusal is cached per limit: under a laxer policy the same file decodes
    with trust.active(trust.Policy(max_pixels=1000)):
        assert mi.load_rgb(small).size == (20, 10)
    # and an image decoded under the laxer policy is not handed out under the strict one
    with trust.active(pol), pytest.raises(trust.TooLarge):
        mi.load_rgb(small)


def test_refused_image_is_not_decoded_by_a_later_op(tmp_path, monkeypatch):
    small = _png(tmp_path / "s.png", (20, 10))
    calls = []
    real = mi._decode
    monkeypatch.setattr(mi, "_decode", lambda v: calls.append(v) or real(v))
    pol = trust.Policy(max_pixels=100)
    with trust.active(pol):
        for _ in range(3):
            with pytest.raises(trust.TooLarge):
                mi.load_rgb(small)
    assert len(calls) == 1  # the first refusal (header only) is cached like a decode error


@pytest.mark.parametrize("op, params", [("image_face_ratio_filter", {}), ("image_blur_mapper", {}),
                                        ("image_deduplicator", {})])
def test_fused_ops_reject_the_row(tmp_path, op, params):
    big, ok = _png(tmp_path / "big.png", (40, 30)), _png(tmp_path / "ok.png", (8, 6))
    rows = [{"text": "big", "images": [big]}, {"text": "ok", "images": [ok]}]
    if op == "image_deduplicator":  # a global op: its per-row hashing is what decodes
        o = create_op(op, params)
        with trust.active(trust.Policy(max_pixels=1000)), pytest.raises(trust.TooLarge, match="40x30"):
            o.key_array(pa.RecordBatch.from_pylist(rows[:1]))
        return
    if op == "image_blur_mapper":
        params = {"save_dir": str(tmp_path / "out"), "p": 1.0}
    kept, rejects = _run(op, rows, trust.Policy(max_pixels=1000), **params)
    assert [r["text"] for r in kept] == ["ok"]
    (rej,) = rejects
    assert rej["error_type"] == "TooLarge" and rej["row"]["text"] == "big"
    assert "40x30 = 1,200 pixels, over the limit of 1,000" in rej["message"] and big in rej["message"]
    kept, rejects = _run(op, rows, trust.Policy(max_pixels=10_000), **params)  # the cap is the policy's
    assert len(kept) == 2 and not rejects


def test_env_sets_the_cap(monkeypatch):
    monkeypatch.setenv(trust.PIXELS_ENV, "1234")
    assert trust.Policy().max_pixels == 1234
    monkeypatch.setenv(trust.PIXELS_ENV, "1e12")
    assert trust.Policy().max_pixels == 10**12
    monkeypatch.delenv(trust.PIXELS_ENV)
    assert trust.Policy().max_pixels == trust.DEFAULT_MAX_PIXELS < 89_478_485  # under Pillow's warning


_APPLY = textwrap.dedent("""
    import json, sys
    from gristmill.core import trust
    from gristmill.service import core
    def hwm():
        return next(int(ln.split()[1]) // 1024 for ln in open("/proc/self/status") if ln.startswith("VmHWM"))
    root, op = sys.argv[1], sys.argv[2]
    small = root + "/small.png"
    core.apply_ops([{"text": "warm", "images": [small]}], [{op: {}}])  # imports, the model, allocators
    before = hwm()
    rows = [{"text": "bomb", "images": [root + "/bomb.png"]}, {"text": "fine", "images": [small]}]
    with trust.active(trust.service_policy([root])):
        res = core.apply_ops(rows, [{op: {}}])
    print(json.dumps({"before": before, "after": hwm(), "ops": res["ops"]}))
""")


def test_apply_bomb_is_a_reject_and_memory_stays_small(tmp_path):
    """/api/apply's body (service.core.apply_ops under the service's policy) on the 13000 x 13000 bomb, in a
    fresh process. Measured without the cap (GRISTMILL_MAX_IMAGE_PIXELS=1e12): 161 MB -> 9.1 GB peak and
    125 s for image_face_ratio_filter; with it, no growth."""
    png_bomb(tmp_path / "bomb.png")
    _png(tmp_path / "small.png", (64, 48))
    env = {k: v for k, v in os.environ.items() if k not in (trust.PIXELS_ENV, trust.ENV)}
    r = subprocess.run([sys.executable, "-c", _APPLY, str(tmp_path), "image_face_ratio_filter"], cwd=REPO,
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    (op,) = out["ops"]
    assert (op["rows_in"], op["rows_out"]) == (2, 1)
    (rej,) = op["rejected"]
    assert rej["error_type"] == "TooLarge" and rej["row"]["text"] == "bomb"
    assert "13000x13000 = 169,000,000 pixels, over the limit of 40,000,000" in rej["message"]
    assert out["after"] - out["before"] < BOUND_MB, out


_CLI_RSS = textwrap.dedent("""
    import resource, subprocess, sys
    r = subprocess.run(sys.argv[1:], capture_output=True, text=True)
    sys.stderr.write(r.stdout + r.stderr)
    print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)
""")


def test_cli_image_deduplicator_bomb(tmp_path):
    """`gristmill run` with image_deduplicator (a global op: hashing decodes every image). Without the cap:
    4.2 GB peak, 61 s; with it the bomb's row is a reject and the run stays small."""
    png_bomb(tmp_path / "bomb.png")
    small = _png(tmp_path / "small.png", (64, 48))
    rows = [{"text": "a", "images": [str(tmp_path / "bomb.png")]}, {"text": "b", "images": [small]},
            {"text": "c", "images": [small]}]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "r.yaml").write_text(
        f"dataset_path: {tmp_path}/rows.jsonl\nexport_path: {tmp_path}/out/export.jsonl\n"
        f"work_dir: {tmp_path}/work\nnp: 1\nmax_reject_ratio: 1\nprocess:\n  - image_deduplicator: {{}}\n")
    env = {k: v for k, v in os.environ.items() if k not in (trust.PIXELS_ENV, trust.ENV)}
    cmd = [sys.executable, "-c", _CLI_RSS, sys.executable, "-m", "gristmill.cli", "run", str(tmp_path / "r.yaml"),
           "--no-progress"]
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    rc, peak = map(int, r.stdout.split())
    assert rc == 0, r.stderr[-3000:]
    assert peak < BOUND_MB, (peak, r.stderr[-2000:])
    assert [json.loads(x)["text"] for x in (tmp_path / "out" / "export.jsonl").read_text().splitlines()] == ["b"]
    rej = [json.loads(x) for x in (tmp_path / "work" / "rejects.jsonl").read_text().splitlines()]
    assert len(rej) == 1 and "13000x13000" in json.dumps(rej) and "TooLarge" in json.dumps(rej)
    # the env sets the CLI's cap: a tiny one refuses the small images too
    env[trust.PIXELS_ENV] = "100"
    (tmp_path / "r2.yaml").write_text((tmp_path / "r.yaml").read_text().replace("/out/", "/out2/")
                                      .replace("/work\n", "/work2\n"))
    r = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(tmp_path / "r2.yaml"), "--no-progress"],
                       cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 1 and "every row was rejected" in r.stderr, r.stderr[-3000:]
    rej = [json.loads(x) for x in (tmp_path / "work2" / "rejects.jsonl").read_text().splitlines()]
    assert len(rej) == 3 and all("over the limit of 100 " in x["message"] for x in rej)
    assert sum("small.png: 64x48 = 3,072 pixels" in x["message"] for x in rej) == 2


# -- video: the frame size from the stream header, before any frame is decoded -----------------------------
_AV = REPO / "tests" / "data" / "av"
BARS = str(_AV / "bars_320x240_2s.mp4")  # 320 x 240 = 76,800 pixels a frame


@pytest.mark.parametrize("op, params", [
    ("video_extract_frames_mapper", {"frame_sampling_method": "uniform", "output_format": "bytes",
                                     "legacy_split_by_text_token": False}),
    ("video_motion_score_filter", {}),
    ("video_ffmpeg_wrapped_mapper", {"filter_name": "hflip"}),
])
def test_video_decoders_refuse_over_the_cap(tmp_path, op, params):
    pytest.importorskip("av")
    if op == "video_motion_score_filter":
        pytest.importorskip("cv2")
    if op == "video_ffmpeg_wrapped_mapper":
        import shutil
        if shutil.which("ffmpeg") is None:
            pytest.skip("no ffmpeg")
        params = {**params, "save_dir": str(tmp_path / "out")}
    rows = [{"text": "v", "videos": [BARS]}]
    kept, rejects = _run(op, rows, trust.Policy(max_pixels=50_000), **params)
    assert kept == []
    (rej,) = rejects
    assert rej["error_type"] in ("TooLarge", "ValueError")
    assert "320x240 = 76,800 pixels, over the limit of 50,000" in rej["message"], rej["message"]
    kept, rejects = _run(op, rows, trust.Policy(max_pixels=100_000), **params)
    assert not rejects  # kept or filtered on its merits


def test_video_probe_filters_read_headers_only():
    pytest.importorskip("av")
    from gristmill.media.video import probe
    with trust.active(trust.Policy(max_pixels=10)):
        info = probe(BARS)  # header only: never refused
    assert (info.width, info.height) == (320, 240)


def test_another_pixel_cap_is_another_run(tmp_path, monkeypatch):
    """The decode cap decides which rows are rejects: a rerun in the same work dir under another cap
    recomputes instead of reusing the first run's stages."""
    from PIL import Image

    from gristmill.dataset import Dataset
    from gristmill.recipe import build_ops
    img = tmp_path / "a.png"
    Image.new("RGB", (100, 100), "red").save(img)
    ds = Dataset.from_list([{"text": "x", "images": [str(img)]}]).process(build_ops([{"image_deduplicator": {}}]))
    work = tmp_path / "work"
    first = ds.export(str(tmp_path / "a.jsonl"), work_dir=str(work))
    assert first["rows_out"] == 1 and not first["rejects"]
    monkeypatch.setenv("GRISTMILL_MAX_IMAGE_PIXELS", "100")
    again = ds.export(str(tmp_path / "a.jsonl"), work_dir=str(work))
    assert again["rejects"] == 1 and again["rows_out"] == 0


def test_bomb_through_rest_and_mcp_is_a_row_reject(tmp_path):
    """Through the faces: REST /api/apply and MCP apply_ops answer the bomb row as a reject naming the size and
    the server's cap (--max-image-pixels), the other row as kept."""
    import anyio
    sys.path.insert(0, str(REPO / "tests" / "service"))
    from svcutil import LiveServer

    from gristmill.service.jobs import JobManager
    from gristmill.service.mcp_server import build_server
    root = tmp_path / "root"
    root.mkdir()
    bomb = png_bomb(root / "bomb.png")
    ok = _png(root / "ok.png")
    rows = [{"text": "a", "images": [str(bomb)]}, {"text": "b", "images": [ok]}]
    process = [{"image_face_ratio_filter": {"min_ratio": 0.0, "max_ratio": 1.0}}]
    m = JobManager(str(tmp_path / "state"), [str(root)], max_image_pixels=20_000_000)
    try:
        with LiveServer(m) as srv, srv.client() as c:
            r = c.post("/api/apply", json={"rows": rows, "process": process})
        assert r.status_code == 200, r.text
        body = r.json()
        rej = body["ops"][0]["rejected"]
        assert [x["row"]["text"] for x in rej] == ["a"] and rej[0]["error_type"] == "TooLarge"
        assert "13000x13000" in rej[0]["message"] and "20,000,000" in rej[0]["message"]
        assert [x["text"] for x in body["rows"]] == ["b"]

        server = build_server([str(root)], m.state_dir, jobs=m)

        async def call():
            return await server.call_tool("apply_ops", {"rows": rows, "process": process})
        res = anyio.run(call)
        res = res[1] if isinstance(res, tuple) else res
        data = getattr(res, "structured_content", None) or getattr(res, "structuredContent", None) or res
        text = json.dumps(data, default=str)
        assert "TooLarge" in text and "13000x13000" in text
    finally:
        m.close()
