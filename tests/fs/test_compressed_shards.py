"""Compressed sharded JSONL exports (``export_shard_size`` with ``.gz``/``.zst``) written by workers from the
fragments' line indexes (engine/remote_parts.export_jsonl_compressed), without Ray: the tasks run in this
process through RemoteTask against a memory:// and an s3:// (moto) work dir, and must give the bytes of
io.writers.assemble over the same fragments."""
from __future__ import annotations

import json
import os
import random

import pytest

from gristmill import fs
from gristmill.engine import remote_parts as rp
from gristmill.io import streams
from gristmill.io import writers as W

COMPS = [".gz", ".zst"]


def _rows(seed: int, n: int) -> bytes:
    r = random.Random(seed)
    return b"".join(b'{"id": %d, "t": "%s"}\n' % (seed * 100 + j, bytes(r.choice(b"abcxyz ") for _ in
                                                                          range(r.randint(0, 40)))) for j in range(n))


COUNTS = (7, 1, 0, 12, 3)


def _fragments(tmp_path, comp: str, counts=COUNTS) -> tuple[list[str], bytes]:
    """Compressed fragments as FragmentWriter writes them (one member/frame each; an empty one included)."""
    paths, whole = [], b""
    d = tmp_path / "frags"
    d.mkdir(exist_ok=True)
    for i, n in enumerate(counts):
        body = _rows(i, n)
        p = str(d / f"shard-{i:05d}.jsonl{comp}")
        f, raw = W._open_compressed(p, comp)
        if body:
            f.write(body)
        W._close_compressed(f, raw)
        paths.append(p)
        whole += body
    return paths, whole


@pytest.mark.parametrize("comp", COMPS)
def test_the_local_writers_compressed_bytes_do_not_depend_on_write_sizes(tmp_path, comp):
    """gzip (mtime 0, no file name) and zstd (level 3, one frame) give the same bytes however the writes are
    cut: what lets a worker compress a file without replaying the local writer's read chunks (it replays
    them anyway: write_jsonl_parts writes the local writer's pieces)."""
    data = _rows(1, 3000)
    got = set()
    r = random.Random(3)
    for trial in range(4):
        p = str(tmp_path / f"c{trial}{comp}")
        f, raw = W._open_compressed(p, comp)
        pos = 0
        while pos < len(data):
            n = len(data) if trial == 0 else r.choice([1, 13, 4096, 70_000])
            f.write(data[pos:pos + n])
            pos += n
        W._close_compressed(f, raw)
        got.add(open(p, "rb").read())
    assert len(got) == 1
    assert b"".join(streams.iter_decompressed(p, comp)) == data


@pytest.mark.parametrize("comp", ["", *COMPS])
def test_local_cuts_do_not_depend_on_the_read_chunks(tmp_path, monkeypatch, comp):
    """A file that starts at byte s ends after the first newline at or after s + limit - 1, also when that
    newline is the last byte of a read chunk (before, a chunk ending exactly at the limit moved the cut)."""
    frags, whole = _fragments(tmp_path, comp)
    line_ends = [i + 1 for i, c in enumerate(whole) if c == 10]
    for limit in (1, 57, line_ends[3], len(whole) + 5):
        outs = []
        for read in (7, 50, line_ends[3], 1 << 20):  # uncompressed: a read chunk that ends on the 4th line
            monkeypatch.setattr(streams, "READ_SIZE", read)
            out = tmp_path / f"L{limit}-{read}" / f"c.jsonl{comp}"
            out.parent.mkdir()
            outs.append([open(f, "rb").read() for f in W.assemble([frags], str(out), limit)])
        assert all(o == outs[0] for o in outs), limit
    # the first file of limit line_ends[3] holds exactly the first 4 lines
    out = tmp_path / "edge" / f"c.jsonl{comp}"
    out.parent.mkdir()
    first = W.assemble([frags], str(out), line_ends[3])[0]
    assert b"".join(streams.iter_decompressed(first, comp)) == whole[:line_ends[3]]


def _run_here(work, tasks):
    """run_on_workers without Ray: every task through RemoteTask (private dir, downloads, uploads)."""
    return [work.landed(work.wrap(t).run()) for t in tasks]


def _export_both(tmp_path, monkeypatch, comp, url_root, limits, every=3):
    """The fragments in a work dir at ``url_root``; for each limit, the export composed by
    export_jsonl_compressed and the one io.writers.assemble writes: (limit, remote URLs, local files)."""
    monkeypatch.setattr(rp, "run_on_workers", _run_here)
    monkeypatch.setattr(W, "LINE_INDEX_EVERY", every)  # windows of 3 newlines: many ranged reads
    monkeypatch.setattr(streams, "READ_SIZE", 50)  # many read chunks per fragment
    frags, whole = _fragments(tmp_path, comp)
    staging = tmp_path / "staging"
    work = rp.RemoteWork(str(staging), f"{url_root}/w")
    local_frags = []
    for p in frags:
        rel = f"stages/01-ab/out/{os.path.basename(p)}"
        fs.write_bytes(f"{url_root}/w/{rel}", open(p, "rb").read())
        local_frags.append(str(staging / rel))
    out = []
    for limit in limits:
        dest = f"{url_root}/o{limit}/c.jsonl{comp}"
        names = rp.export_jsonl_compressed(work, [[f] for f in local_frags], dest, limit, comp)
        loc = tmp_path / f"L{limit}" / f"c.jsonl{comp}"
        loc.parent.mkdir()
        out.append((limit, names, W.assemble([frags], str(loc), limit)))
    return out, whole, work


@pytest.mark.parametrize("comp", COMPS)
def test_compressed_shards_composed_from_worker_parts_have_the_local_bytes(tmp_path, monkeypatch, comp):
    whole = b"".join(_rows(i, n) for i, n in enumerate(COUNTS))
    ends = [i + 1 for i, c in enumerate(whole) if c == 10]
    first = len(_rows(0, 7))  # the first fragment's end
    limits = (1, 45, ends[5] - ends[2], first, first + 1, len(whole) + 1)
    got, _, work = _export_both(tmp_path, monkeypatch, comp, "memory://h26", limits)
    for limit, names, want in got:
        assert [os.path.basename(n) for n in names] == [os.path.basename(w) for w in want], limit
        for n, w in zip(names, want):
            assert fs.read_bytes(n) == open(w, "rb").read(), (limit, n)
        man = json.loads(fs.read_bytes(f"memory://h26/o{limit}/.c.jsonl{comp}.gristmill-manifest.json"))
        assert [e["name"] for e in man["files"]] == [os.path.basename(n) for n in names]
    assert len(got[0][1]) == len(ends)  # 1 byte: a file per line
    # the parts and line indexes are gone; the driver's staging copy never got a row
    assert not [k for k in fs.find("memory://h26/w") if "/export-parquet/" in k]
    assert not [p for p in (tmp_path / "staging").rglob("*") if p.is_file()]


@pytest.mark.parametrize("comp", [".gz"])
def test_an_empty_compressed_sharded_export_is_one_empty_file(tmp_path, monkeypatch, comp):
    monkeypatch.setattr(rp, "run_on_workers", _run_here)
    work = rp.RemoteWork(str(tmp_path / "st"), "memory://h26e/w")
    p = tmp_path / f"e.jsonl{comp}"
    W._close_compressed(*W._open_compressed(str(p), comp))
    fs.write_bytes(f"memory://h26e/w/stages/01/out/e.jsonl{comp}", p.read_bytes())
    names = rp.export_jsonl_compressed(work, [[str(tmp_path / "st/stages/01/out" / p.name)], []],
                                       f"memory://h26e/o/c.jsonl{comp}", 10, comp)
    want = W.assemble([[str(p)]], str(tmp_path / f"c.jsonl{comp}"), 10)
    assert len(names) == len(want) == 1 and fs.read_bytes(names[0]) == open(want[0], "rb").read()


def test_a_killed_runs_parts_and_indexes_are_deleted_at_the_next_start_and_never_committed(tmp_path):
    url = "memory://h26k/w"
    for rel in ("stages/export-parquet/out/lines-00000.bin", "stages/export-parquet/out/jsonl-part-00000.jsonl.gz",
                "stages/01-ab/out/shard-00000.jsonl.gz"):
        fs.write_bytes(f"{url}/{rel}", b"x")
    work = rp.RemoteWork(str(tmp_path / "st"), url)
    assert work.cleanup_scratch() == 2
    assert [k.split("/w/", 1)[1] for k in fs.find(url)] == ["stages/01-ab/out/shard-00000.jsonl.gz"]


def test_plan_jsonl_cuts_is_the_local_rule():
    """Against a direct reading of the rule on one stream, over fragment edges and long lines."""
    r = random.Random(5)
    frags = [b"".join(b"x" * r.randint(0, 9) + b"\n" for _ in range(r.randint(0, 6))) for _ in range(8)]
    whole = b"".join(frags)

    def newline(i, x):
        return frags[i].find(b"\n", x)
    for limit in range(1, 40):
        files = rp.plan_jsonl_cuts([len(f) for f in frags], limit, newline)
        got = [b"".join(frags[i][a:b] for i, a, b in f) for f in files]
        want, s = [], 0
        while s < len(whole):
            e = whole.find(b"\n", s + limit - 1)
            e = len(whole) if e < 0 else e + 1
            want.append(whole[s:e])
            s = e
        assert got == (want or [b""]), limit


@pytest.mark.parametrize("comp", [".zst"])
def test_compressed_shards_on_s3_are_copied_into_place(s3, tmp_path, monkeypatch, comp):
    """On an S3 server: the parts are copied server-side (CopyObject) to the export's names; the bytes are
    the local writer's; the manifest lists every file."""
    got, _, _ = _export_both(tmp_path, monkeypatch, comp, f"s3://{s3.bucket}", (60, 10 ** 6))
    for limit, names, want in got:
        assert [fs.read_bytes(n) for n in names] == [open(w, "rb").read() for w in want], limit
        man = json.loads(s3.cat_file(f"{s3.bucket}/o{limit}/.c.jsonl{comp}.gristmill-manifest.json"))
        assert [e["name"] for e in man["files"]] == [os.path.basename(n) for n in names]
    assert len(got[0][1]) > 2 and len(got[1][1]) == 1


# -- HF arrow exports with dictionary columns, composed from the workers' stream parts ------------------------

def _dict_fragments(tmp_path, url_root, dicts, floats=False):
    """One Arrow IPC fragment per shard (ShardWriter: one dictionary per column per file), two batches each;
    ``dicts``: per shard the values of the two dictionary columns' dictionaries."""
    import pyarrow as pa
    staging = tmp_path / "staging"
    frags = []
    for k, (d1, d2) in enumerate(dicts):
        w = W.ShardWriter(str(tmp_path / f"shard-{k:05d}"))
        for b in range(2):
            idx = pa.array([(k + b + i) % len(d1) for i in range(5)], pa.int32())
            col2 = pa.array([float(x) for x in d2]) if floats else pa.array(d2)
            batch = pa.record_batch({
                "id": pa.array([f"{k}-{b}-{i}" for i in range(5)]),
                "lang": pa.DictionaryArray.from_arrays(idx, pa.array(d1)),
                "tag": pa.DictionaryArray.from_arrays(pa.array([i % len(d2) for i in range(5)], pa.int8()), col2)})
            w.write(batch)
        parts = w.close()
        frags.append([])
        for p in parts:
            rel = f"stages/01-ab/out/{os.path.basename(p)}"
            fs.write_bytes(f"{url_root}/w/{rel}", open(p, "rb").read())
            frags[-1].append(str(staging / rel))
    return frags, [[str(tmp_path / os.path.basename(p)) for p in f] for f in frags], staging


@pytest.mark.parametrize("shard_size", [0, 1, 700])
def test_hf_arrow_with_dictionary_columns_composed_from_worker_parts_has_the_local_bytes(tmp_path, monkeypatch,
                                                                                        shard_size):
    """The same dictionaries across a shard boundary (no message again), a changed one (a replacement before
    that batch), a file starting inside a part (every current dictionary first): the bytes of the one stream
    writer io.writers._assemble_hf runs."""
    monkeypatch.setattr(rp, "run_on_workers", _run_here)
    root = f"memory://h26d{shard_size}"
    dicts = [(["en", "fr"], ["a", "b", "c"]), (["en", "fr"], ["a", "b"]), (["de", "fr", "en"], ["a", "b"]),
             (["de", "fr", "en"], ["a", "b"])]
    frags, local, staging = _dict_fragments(tmp_path, root, dicts)
    work = rp.RemoteWork(str(staging), f"{root}/w")
    got = rp.export_arrow(work, frags, f"{root}/hf", shard_size, str(tmp_path / "meta"))
    assert got is not None
    want = W.assemble(local, str(tmp_path / "hf"), shard_size)
    names = [os.path.basename(w) for w in want]
    assert len(names) == (1 if shard_size == 0 else 8 if shard_size == 1 else len(names)) and len(names) >= 1
    for n, w in zip(names, want):
        assert fs.read_bytes(f"{root}/hf/{n}") == open(w, "rb").read(), n
    for n in ("dataset_info.json", "state.json"):
        assert fs.read_bytes(f"{root}/hf/{n}") == (tmp_path / "hf" / n).read_bytes()
    assert not [k for k in fs.find(f"{root}/w") if "/export-parquet/" in k]


def test_hf_arrow_with_float_dictionaries_is_left_to_the_driver(tmp_path, monkeypatch):
    """A float dictionary that differs across a shard boundary: pyarrow's equals does not count NaNs equal
    as the stream writer does, so the workers cannot tell the writer's choice; the export is rewritten (None)
    and the parts are deleted."""
    monkeypatch.setattr(rp, "run_on_workers", _run_here)
    root = "memory://h26f"
    frags, _, staging = _dict_fragments(tmp_path, root, [(["en"], [1, 2]), (["en"], [1, 3])], floats=True)
    work = rp.RemoteWork(str(staging), f"{root}/w")
    assert rp.export_arrow(work, frags, f"{root}/hf", 0, str(tmp_path / "meta")) is None
    assert not [k for k in fs.find(f"{root}/w") if "/export-parquet/" in k]
