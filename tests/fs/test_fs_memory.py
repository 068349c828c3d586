"""The filesystem layer on fsspec's memory:// (no server): listing, reading as the local readers do, the
staging mirror's commit order and restore, the lease lock, manifest-committed exports, storage options."""
from __future__ import annotations

import gzip
import json
import os
import time
import uuid

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gristmill import fs
from gristmill.fs import staging
from gristmill.io.base import ReadOptions, read_shard
from gristmill.io.planner import common_root, plan_dataset


@pytest.fixture
def mem():
    root = f"/t{uuid.uuid4().hex[:10]}"
    m = fsspec.filesystem("memory")
    yield m, f"memory://{root.lstrip('/')}", root
    m.rm(root, recursive=True) if m.exists(root) else None


def _rows(shards, opts):
    out = []
    for s in shards:
        for b in read_shard(s, opts):
            if isinstance(b, pa.RecordBatch):
                out += b.to_pylist()
            else:  # a reject (the cut-off line of the .gz file): the same whatever the file system
                out.append((b.error_type, b.offset, b.line, fs.basename(b.source)))
    return out


def _write_inputs(m, root, local_dir):
    lines = b"".join(json.dumps({"text": f"row {i} " + "x" * (i % 17)}).encode() + b"\n" for i in range(300))
    files = {"a/one.jsonl": lines, "a/two.jsonl.gz": gzip.compress(lines[:999]),
             "b/three.jsonl": lines[500:] if lines[500:].startswith(b"{") else lines, "b/_SUCCESS": b"",
             "b/.hidden.jsonl": b'{"text": "no"}\n', "b/notes.md": b"# not data\n"}
    for rel, data in files.items():
        m.pipe(f"{root}/{rel}", data)
        os.makedirs(os.path.dirname(os.path.join(local_dir, rel)), exist_ok=True)
        with open(os.path.join(local_dir, rel), "wb") as f:
            f.write(data)
    table = pa.table({"text": [f"p{i}" for i in range(50)], "n": list(range(50))})
    pq.write_table(table, os.path.join(local_dir, "b/four.parquet"), row_group_size=10)
    with open(os.path.join(local_dir, "b/four.parquet"), "rb") as f:
        m.pipe(f"{root}/b/four.parquet", f.read())


def test_prefix_lists_and_reads_like_the_local_directory(mem, tmp_path):
    m, url, root = mem
    _write_inputs(m, root, str(tmp_path / "d"))
    opts = ReadOptions(shard_bytes=2000)
    remote = plan_dataset(url, opts)
    local = plan_dataset(str(tmp_path / "d"), opts)
    assert [s.source[len(url):] for s in remote] == [s.source[len(str(tmp_path / "d")):] for s in local]
    assert [(s.start, s.end, s.reader) for s in remote] == [(s.start, s.end, s.reader) for s in local]
    assert len(remote) > 4  # byte ranges of the plain file, row groups of the Parquet file
    got = _rows(remote, ReadOptions(root=common_root(remote)))
    want = _rows(local, ReadOptions(root=common_root(local)))
    assert got == want and len(got) > 300  # same rows, same ids (relative to the prefix), same rejects
    assert any(isinstance(r, tuple) for r in got)


def test_glob_and_weighted_list(mem, tmp_path):
    m, url, root = mem
    _write_inputs(m, root, str(tmp_path / "d"))
    hits = plan_dataset(f"{url}/**/*.jsonl*", ReadOptions())
    assert sorted({fs.basename(s.source) for s in hits}) == ["one.jsonl", "three.jsonl", "two.jsonl.gz"]
    weighted = plan_dataset(f"0.5 {url}/a/one.jsonl 2 {url}/b/three.jsonl", ReadOptions())
    assert [s.weight for s in weighted] == [0.5, 2.0]
    with pytest.raises(FileNotFoundError, match="does not exist"):
        plan_dataset(f"{url}/nope.jsonl", ReadOptions())
    with pytest.raises(FileNotFoundError, match="no files match"):
        plan_dataset(f"{url}/*.csv", ReadOptions())


def test_identity_changes_when_an_object_is_rewritten(mem):
    m, url, root = mem
    m.pipe(f"{root}/x.jsonl", b'{"text": "a"}\n')
    a = fs.identity(f"{url}/x.jsonl")
    time.sleep(0.01)
    m.pipe(f"{root}/x.jsonl", b'{"text": "b"}\n')
    assert fs.identity(f"{url}/x.jsonl") != a and a[1] == 14


def test_mirror_commits_outputs_before_their_markers_and_restores_only_what_is_committed(mem, tmp_path,
                                                                                         monkeypatch):
    m, url, root = mem
    local = tmp_path / "work"
    (local / "stages/00/out").mkdir(parents=True)
    (local / "stages/00/done").mkdir(parents=True)
    (local / "stages/00/out/shard-00000.arrow").write_bytes(b"rows")
    (local / "stages/00/done/shard-00000.json").write_text('{"parts": 1}')
    (local / "manifest.json").write_text("{}")
    (local / ".gm-tmp-123-x").write_bytes(b"partial")
    order = []
    real = staging.upload
    monkeypatch.setattr(staging, "upload", lambda src, dst: (order.append(dst[len(url) + 1:]), real(src, dst)))
    mirror = staging.Mirror(f"{url}/work", str(local))
    assert mirror.sync() == 3
    assert order.index("work/stages/00/out/shard-00000.arrow") < order.index("work/stages/00/done/shard-00000.json")
    assert sorted(order[-2:]) == ["work/manifest.json", "work/stages/00/done/shard-00000.json"]  # markers last
    assert not m.exists(f"{root}/work/.gm-tmp-123-x")
    assert mirror.sync() == 0  # nothing changed: nothing sent
    # a file written after the last sweep (the run was killed before it was committed) is not restored
    (local / "stages/00/out/shard-00001.arrow").write_bytes(b"late")
    fresh = tmp_path / "elsewhere"
    got = staging.Mirror(f"{url}/work", str(fresh)).restore()
    assert got == 3 and (fresh / "stages/00/out/shard-00000.arrow").read_bytes() == b"rows"
    assert staging.Mirror(f"{url}/work", str(local)).restore() == 0  # same machine: nothing downloaded
    assert not (local / "stages/00/out/shard-00001.arrow").exists()
    # a file deleted locally is deleted remotely, its marker first
    (local / "stages/00/done/shard-00000.json").unlink()
    (local / "stages/00/out/shard-00000.arrow").unlink()
    mirror = staging.Mirror(f"{url}/work", str(local))
    mirror.restore()
    (local / "stages/00/done/shard-00000.json").unlink()
    (local / "stages/00/out/shard-00000.arrow").unlink()
    assert mirror.sync() == 2 and not m.exists(f"{root}/work/stages/00/done/shard-00000.json")


def test_lock_is_exclusive_until_its_lease_expires(mem):
    _, url, _ = mem
    a = staging.RemoteLock(f"{url}/work", lease_s=30)
    a.acquire()
    with pytest.raises(staging.RemoteLockBusy, match="in use by another run"):
        staging.RemoteLock(f"{url}/work", lease_s=30).acquire()
    a.release()
    b = staging.RemoteLock(f"{url}/work", lease_s=30)
    b.acquire()  # released: free again
    b._stop.set()  # a killed holder: its lease is no longer renewed
    b._thread.join()
    held = json.loads(fs.read_bytes(b.url))
    fs.write_bytes(b.url, json.dumps({**held, "expires": time.time() - 1}).encode())
    c = staging.RemoteLock(f"{url}/work", lease_s=30)
    c.acquire()  # the expired lease is taken over
    assert json.loads(fs.read_bytes(c.url))["owner"] == c.owner
    c.release()
    assert not fs.exists(c.url)


def test_exclusive_write_refuses_an_existing_key(mem):
    _, url, _ = mem
    fs.write_bytes(f"{url}/k", b"1", exclusive=True)
    with pytest.raises(FileExistsError):
        fs.write_bytes(f"{url}/k", b"2", exclusive=True)
    assert fs.read_bytes(f"{url}/k") == b"1"


def test_export_is_committed_by_a_manifest_written_last(mem, tmp_path, monkeypatch):
    m, url, root = mem
    d = tmp_path / "exp"
    d.mkdir()
    for n in ("clean-00000-of-00002.jsonl", "clean-00001-of-00002.jsonl"):
        (d / n).write_text(n)
    written = []
    real = fs.write_bytes
    monkeypatch.setattr(staging, "write_bytes", lambda u, b, exclusive=False: (written.append(u), real(u, b, exclusive)))
    realup = staging.upload
    monkeypatch.setattr(staging, "upload", lambda s, u: (written.append(u), realup(s, u)))
    export = f"{url}/out/clean.jsonl"
    staging.commit_export(sorted(str(p) for p in d.iterdir()), str(d), export, directory=False)
    assert written[0] == staging.intent_url(export, False)  # the keys claimed before the first is written
    assert written[-1] == staging.manifest_url(export, False) and len(written) == 4
    assert not fs.exists(staging.intent_url(export, False))
    man = json.loads(fs.read_bytes(written[-1]))
    assert [e["name"] for e in man["files"]] == ["clean-00000-of-00002.jsonl", "clean-00001-of-00002.jsonl"]
    assert staging.foreign_files(export, False, [f"{url}/out/clean-00000-of-00002.jsonl"]) == []
    written.clear()
    staging.commit_export(sorted(str(p) for p in d.iterdir()), str(d), export, directory=False)
    assert written == []  # the same bytes again: nothing uploaded, the manifest stays
    # a directory export: its manifest is inside, and is not a foreign file for the next run
    staging.commit_export([str(d / "clean-00000-of-00002.jsonl")], str(d), f"{url}/dir", directory=True)
    assert fs.exists(f"{url}/dir/gristmill-manifest.json")
    assert staging.foreign_files(f"{url}/dir", True, []) == []
    m.pipe(f"{root}/out/clean.jsonl", b"someone else's")
    assert staging.foreign_files(export, False, [f"{url}/out/clean.jsonl"]) == [f"{url}/out/clean.jsonl"]
    # a second export with one file: the old shards go, the manifest lists the new file only
    (d / "clean-00000-of-00002.jsonl").unlink()
    (d / "clean-00001-of-00002.jsonl").unlink()
    (d / "clean.jsonl").write_text("one")
    staging.commit_export([str(d / "clean.jsonl")], str(d), export, directory=False)
    assert sorted(fs.basename(u) for u in fs.find(f"{url}/out")) == [".clean.jsonl.gristmill-manifest.json",
                                                                      "clean.jsonl"]


def test_storage_options_by_longest_prefix_and_never_in_messages(monkeypatch):
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    with fs.active({"s3://": {"anon": True}, "s3://team-a/": {"anon": False, "key": "K", "secret": "S"}}):
        assert fs.storage_options_for("s3://team-a/x")["secret"] == "S"
        assert fs.storage_options_for("s3://other/x")["anon"] is True
        assert "secret" not in fs.storage_options_for("s3://other/x")
        assert fs.storage_options_for("s3://b/x")["default_block_size"] == fs.WRITE_BLOCK
        with fs.active({"anon": True}):  # one dict: every URL
            assert fs.storage_options_for("gs://b/x")["anon"] is True
        assert "anon" not in fs.storage_options_for("gs://b/x")
    assert fs.current_options() == {}
    assert fs.redact("s3://AKIA:secret@bucket/x") == "s3://bucket/x"
    assert fs.is_url("s3://b/x") and fs.is_url("memory://x") and not fs.is_url("file:///tmp/x")
    assert fs.local("file:///tmp/x") == "/tmp/x" and not fs.is_url("/tmp/s3:/x")


def test_a_local_path_reads_through_the_operating_system(tmp_path):
    p = tmp_path / "a.txt"
    p.write_bytes(b"abc")
    with fs.open_input(str(p)) as f:
        assert type(f).__module__ == "_io" and f.read() == b"abc"
    assert fs.size(f"file://{p}") == 3
