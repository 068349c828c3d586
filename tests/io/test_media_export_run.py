"""`export_media` in `gristmill run`: media placed beside every export format (link, copy) or embedded
(bytes), paths relative to the export, the same bytes at np 1 and np 2, reruns that remove stale media,
a missing file rejected with its error, foreign files and writing among the inputs refused."""
import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from gm_testutil import check_accounting

MEDIA = Path(__file__).resolve().parents[1] / "data" / "media"
REPO = Path(__file__).resolve().parents[2]

# (id, images) per input file; b/x.jpg has the same name as a/x.jpg but other bytes
FILES = {
    "part-0.jsonl": [(1, ["../img/a/x.jpg", "../img/b/x.jpg"]), (2, ["../img/a/chelsea.png"]),
                     (3, ["../img/a/missing.jpg"])],
    "part-1.jsonl": [(4, []), (5, ["../img/a/x.jpg"]), (6, ["../img/garden.jpg"])],
}
SOURCES = {"img/a/x.jpg": "aqua.jpg", "img/b/x.jpg": "storm.jpg", "img/a/chelsea.png": "chelsea.png",
           "img/garden.jpg": "garden.jpg"}


@pytest.fixture
def data(tmp_path):
    for rel, name in SOURCES.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(MEDIA / name, tmp_path / rel)
    (tmp_path / "data").mkdir()
    for f, rows in FILES.items():
        (tmp_path / "data" / f).write_text("".join(json.dumps({"id": i, "text": f"row {i}", "images": imgs}) + "\n"
                                                   for i, imgs in rows))
    return tmp_path


def run(tmp_path, export, mode, np=1, work="work", expect=0, **extra):
    recipe = {"dataset_path": str(tmp_path / "data"), "export_path": str(tmp_path / export),
              "work_dir": str(tmp_path / work), "np": np, "export_media": mode, "max_reject_ratio": 0.5,
              "process": [{"text_length_filter": {"min_len": 1}}], **extra}
    p = tmp_path / f"r-{work}.yaml"
    p.write_text(yaml.safe_dump(recipe))
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(p), "--no-progress"],
                         capture_output=True, text=True, cwd=REPO, timeout=300)
    assert res.returncode == expect, res.stderr
    report = json.loads((tmp_path / work / "report.json").read_text()) if expect == 0 else None
    return res, report


def rows_of(path: Path) -> list[dict]:
    if path.is_dir():
        import pyarrow as pa
        import pyarrow.ipc as ipc
        files = sorted(path.glob("data-*.arrow"))
        return [r for f in files for r in pa.Table.from_batches(list(ipc.open_stream(f.read_bytes()))).to_pylist()]
    if path.name.endswith(".parquet"):
        return pq.read_table(path).to_pylist()
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as f:
        return [json.loads(x) for x in f]


def expected_bytes(tmp_path, i):
    return [(tmp_path / p.replace("../", "")).read_bytes() for p in dict(FILES["part-0.jsonl"] + FILES["part-1.jsonl"])[i]]


def tree(d: Path) -> dict:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("mode,export,media_dir", [
    ("link", "out/o.jsonl", "out/o_media"),
    ("copy", "out/o.jsonl.gz", "out/o_media"),
    ("copy", "out/ds", "out/ds/media"),
    ("bytes", "out/o.parquet", None),
    ("bytes", "out/ds", None),
])
def test_each_mode_and_format(data, mode, export, media_dir):
    tmp_path = data
    _, report = run(tmp_path, export, mode)
    check_accounting(report)
    assert report["rows_read"] == 6 and report["rows_out"] == 5 and report["rejects"] == 1
    assert report["ops"][-1]["op"] == "export_media" and report["ops"][-1]["rejected"] == 1
    rej = [json.loads(x) for x in open(tmp_path / "work" / "rejects.jsonl")]
    assert [(r["op"], r["message"]) for r in rej] == [
        ("export_media", f"media file not found: {tmp_path / 'img' / 'a' / 'missing.jpg'}")]
    out = {r["id"]: r for r in rows_of(tmp_path / export)}
    assert sorted(out) == [1, 2, 4, 5, 6]
    base = (tmp_path / export) if (tmp_path / export).is_dir() else (tmp_path / export).parent
    for i, r in out.items():
        want = expected_bytes(tmp_path, i)
        if mode == "bytes":
            assert r["images"] == want
            continue
        assert all(not os.path.isabs(p) and p.startswith(Path(media_dir).name + "/") for p in r["images"])
        assert [(base / p).read_bytes() for p in r["images"]] == want
        for p in r["images"]:  # link: the source's inode; copy: a file of its own
            src = next(tmp_path / s for s in SOURCES if (tmp_path / s).read_bytes() == (base / p).read_bytes())
            assert (os.stat(base / p).st_ino == os.stat(src).st_ino) == (mode == "link")
    assert out[5]["images"] == [out[1]["images"][0]]  # one file per source, shared by the rows
    if media_dir:
        placed = sorted(str(p.relative_to(base)) for p in (tmp_path / media_dir).rglob("*") if p.is_file())
        assert placed == sorted({p for r in out.values() for p in r["images"]}) and len(placed) == 4
        rec = json.loads(next(base.glob(".*gristmill*.json")).read_text())
        assert rec["media"] == placed and rec["media_pending"] is False
    else:
        assert not list(base.rglob("*media*"))
    # the inputs are untouched
    assert all((tmp_path / s).read_bytes() == (MEDIA / n).read_bytes() for s, n in SOURCES.items())


def test_sharded_parquet_np1_np2_same_bytes(data):
    tmp_path = data
    run(tmp_path, "o1/o.parquet", "link", np=1, work="w1", export_shard_size=1)
    run(tmp_path, "o2/o.parquet", "link", np=2, work="w2", export_shard_size=1)
    t1, t2 = tree(tmp_path / "o1"), tree(tmp_path / "o2")
    assert len([k for k in t1 if k.endswith(".parquet")]) > 1  # really sharded
    assert t1 == t2
    ids = [r["id"] for f in sorted((tmp_path / "o1").glob("o-*.parquet")) for r in pq.read_table(f).to_pylist()]
    assert ids == [1, 2, 4, 5, 6]


def test_bytes_np1_np2_same_bytes(data):
    tmp_path = data
    run(tmp_path, "o1/o.parquet", "bytes", np=1, work="w1")
    run(tmp_path, "o2/o.parquet", "bytes", np=2, work="w2")
    assert tree(tmp_path / "o1") == tree(tmp_path / "o2")


def test_rerun_keeps_bytes_and_removes_stale_media(data):
    tmp_path = data
    run(tmp_path, "out/o.jsonl", "copy", np=2)
    first = tree(tmp_path / "out")
    run(tmp_path, "out/o.jsonl", "copy", work="work-again")  # another work dir: all redone, same bytes
    assert tree(tmp_path / "out") == first
    garden = [p for p in first if p.endswith("-garden.jpg")]
    assert len(garden) == 1
    # the row with the garden goes: its media file goes too, the others stay, the record follows
    (tmp_path / "data" / "part-1.jsonl").write_text("".join(
        json.dumps({"id": i, "text": f"row {i}", "images": imgs}) + "\n" for i, imgs in FILES["part-1.jsonl"][:2]))
    res, _ = run(tmp_path, "out/o.jsonl", "copy")
    now = tree(tmp_path / "out")
    assert set(now) == set(first) - set(garden) - {".o.jsonl.gristmill.json"} | {".o.jsonl.gristmill.json"}
    assert "-garden.jpg: written by an earlier run" in res.stderr
    rec = json.loads(now[".o.jsonl.gristmill.json"])
    assert rec["media"] == sorted(k for k in now if k.startswith("o_media/"))
    # and back to none: our media go, the paths are the inputs' again
    run(tmp_path, "out/o.jsonl", "none")
    assert not (tmp_path / "out" / "o_media").exists()
    assert rows_of(tmp_path / "out" / "o.jsonl")[0]["images"] == [str(tmp_path / "img" / "a" / "x.jpg"),
                                                                  str(tmp_path / "img" / "b" / "x.jpg")]


def test_changed_source_renamed_on_rerun(data):
    """Names follow the bytes: a source rewritten in place gets a new name, the old file goes."""
    tmp_path = data
    run(tmp_path, "out/o.jsonl", "copy")
    rel = rows_of(tmp_path / "out" / "o.jsonl")[-1]["images"][0]
    shutil.copy(MEDIA / "ladybird.jpg", tmp_path / "img" / "garden.jpg")  # same path, new content
    run(tmp_path, "out/o.jsonl", "copy", work="w2")
    (now,) = rows_of(tmp_path / "out" / "o.jsonl")[-1]["images"]
    assert now != rel and now.endswith("-garden.jpg") and not (tmp_path / "out" / rel).exists()
    assert (tmp_path / "out" / now).read_bytes() == (MEDIA / "ladybird.jpg").read_bytes()


def test_names_do_not_depend_on_where_inputs_are(data, tmp_path_factory):
    """The same data moved elsewhere exports to the same bytes (names hash the content)."""
    tmp_path = data
    run(tmp_path, "out/o.jsonl", "link")
    moved = tmp_path_factory.mktemp("moved")
    shutil.copytree(tmp_path / "img", moved / "img")
    shutil.copytree(tmp_path / "data", moved / "data")
    run(moved, "out/o.jsonl", "link")
    assert tree(tmp_path / "out") == tree(moved / "out")


def test_foreign_file_in_media_dir_refused(data):
    tmp_path = data
    foreign = tmp_path / "out" / "o_media" / "zz" / "mine.jpg"
    foreign.parent.mkdir(parents=True)
    foreign.write_bytes(b"not gristmill's")
    res, _ = run(tmp_path, "out/o.jsonl", "link", expect=2)
    assert "mine.jpg already exist(s) and were not written by gristmill" in res.stderr
    assert foreign.read_bytes() == b"not gristmill's" and not (tmp_path / "out" / "o.jsonl").exists()
    # with media off the directory is not ours to check: the run goes ahead and leaves it alone
    run(tmp_path, "out/o.jsonl", "none")
    assert foreign.read_bytes() == b"not gristmill's"


def test_never_writes_beside_or_among_input_media(data):
    """An export in a directory holding media: the rows with media there are rejected with the reason, and
    nothing is written beside them; media from elsewhere go to the export's own media directory."""
    tmp_path = data
    before = tree(tmp_path / "img")
    res, _ = run(tmp_path, "img/a/o.jsonl", "copy", expect=1)  # 4 of 6 rows rejected: over max_reject_ratio
    rej = [json.loads(x) for x in open(tmp_path / "work" / "rejects.jsonl")]
    assert sorted(r["record"]["id"] for r in rej) == [1, 2, 3, 5]
    assert all("refusing to write media beside or among their sources" in r["message"] for r in rej
               if r["record"]["id"] != 3)
    after = tree(tmp_path / "img")
    assert {k: after[k] for k in before} == before  # inputs untouched
    new = sorted(k for k in after if k not in before)
    assert [k for k in new if not k.startswith("a/o_media/")] == ["a/.o.jsonl.gristmill.json", "a/o.jsonl"]
    assert [Path(k).name.split("-", 1)[1] for k in new if k.startswith("a/o_media/")] == ["garden.jpg"]
    assert [r["id"] for r in rows_of(tmp_path / "img" / "a" / "o.jsonl")] == [4, 6]


def test_bytes_into_jsonl_refused_before_work(data):
    tmp_path = data
    res, _ = run(tmp_path, "out/o.jsonl", "bytes", expect=2)
    assert "export_media: bytes embeds media as binary, which JSONL cannot hold" in res.stderr
    res, _ = run(tmp_path, "out/o.jsonl", "links", expect=2)
    assert "export_media must be one of none, link, copy, bytes" in res.stderr
    assert not (tmp_path / "out").exists()


def test_dataset_api_export_media(data):
    from gristmill import Dataset
    from gristmill.engine.paths import RunRefused
    tmp_path = data
    rep = Dataset.load(str(tmp_path / "data" / "part-1.jsonl")).export(str(tmp_path / "api" / "o.parquet"),
                                                                     export_media="bytes")
    assert rep["rows_out"] == 3
    out = pq.read_table(tmp_path / "api" / "o.parquet").to_pylist()
    assert [r["images"] for r in out] == [[], expected_bytes(tmp_path, 5), expected_bytes(tmp_path, 6)]
    with pytest.raises(RunRefused, match="JSONL cannot hold"):
        Dataset.load(str(tmp_path / "data" / "part-1.jsonl")).export(str(tmp_path / "api" / "o.jsonl"),
                                                                     export_media="bytes")


def test_multi_source_recipe_exports_media(data):
    """`sources:` runs export through the shared tail: media placed the same way."""
    tmp_path = data
    recipe = {"sources": [{"name": "one", "path": str(tmp_path / "data" / "part-0.jsonl")},
                          {"name": "two", "path": str(tmp_path / "data" / "part-1.jsonl")}],
              "export_path": str(tmp_path / "out" / "o.parquet"), "work_dir": str(tmp_path / "work"),
              "export_media": "copy", "max_reject_ratio": 0.5}
    (tmp_path / "ms.yaml").write_text(yaml.safe_dump(recipe))
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(tmp_path / "ms.yaml"), "--no-progress"],
                         capture_output=True, text=True, cwd=REPO, timeout=300)
    assert res.returncode == 0, res.stderr
    out = {r["id"]: r for r in rows_of(tmp_path / "out" / "o.parquet")}
    assert sorted(out) == [1, 2, 4, 5, 6]
    assert [(tmp_path / "out" / p).read_bytes() for p in out[1]["images"]] == expected_bytes(tmp_path, 1)
    assert all(p.startswith("o_media/") for r in out.values() for p in r["images"])
