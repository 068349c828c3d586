"""Ray workers that read and write S3 themselves (engine/remote_parts.py), on a real S3 endpoint (moto's
server on 127.0.0.1) and a real two-node Ray cluster on this machine:

- a recipe whose inputs, export, work dir and tokenize output are all s3:// URLs gives the local-disk bytes,
  and the driver's staging copy of the work dir holds no shard data (the workers wrote it to the bucket);
- a driver SIGKILLed mid-stage resumes from what the workers committed, to the same bytes;
- a one-file export is composed in the bucket: UploadPartCopy of the parts of 5 MiB or more, small parts
  streamed together (plan_parts and compose, checked byte for byte); Parquet (one file, sharded) and HF
  arrow exports and tokenize's parquet format are composed from parts the workers write, with the local bytes;
  a compressed sharded export's files are compressed by the workers from the fragments' line indexes.
"""
from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from gm_testutil import REPO, SAMPLE

from gristmill.engine.remote_parts import MIN_PART, is_data, plan_parts

OPS = [{"words_num_filter": {"min_num": 20}},
       {"document_deduplicator": {"lowercase": True}},
       {"document_minhash_deduplicator": {"jaccard_threshold": 0.7}}]


# -- the composition plan and the composer (fast) -----------------------------------------------------------

def test_plan_parts_keeps_every_part_but_the_last_at_the_minimum_and_copies_large_ranges():
    sizes = [12, 1, 3, 20, 2, 7, 0, 4]
    parts = plan_parts(sizes, min_part=5, max_copy=8)
    spans = [(i, a, b) for p in parts for _, i, a, b in p]
    # every byte of every source exactly once, in order
    assert spans == sorted(spans) and sum(b - a for _, a, b in spans) == sum(sizes)
    assert all(a == (spans[k - 1][2] if k and spans[k - 1][0] == i else 0) for k, (i, a, b) in enumerate(spans))
    assert all(sum(b - a for _, _, a, b in p) >= 5 for p in parts[:-1])
    copies = [p[0] for p in parts if p[0][0] == "copy"]
    assert copies and all(len(p) == 1 for p in parts if p[0][0] == "copy")
    assert all(b - a <= 8 for _, _, a, b in copies)
    assert plan_parts([]) == [] and plan_parts([0, 0]) == []


def test_is_data_names_the_keys_the_driver_never_downloads():
    assert is_data("stages/01-ab/out/shard-00000.jsonl.gz")
    assert is_data("sources/en/stages/00-ab/out/shard-00001-000.arrow")
    assert is_data("stages/01-ab/resolve/scratch/minhash/src-00000/p_01.bin")
    assert is_data("stages/01-ab/grouped/shard-00000-000.arrow")
    assert is_data("tokenize/tok/s000-000001.ids") and is_data("tokenize/parts/ab12/data.bin.part-00000")
    for meta in ("stages/01-ab/done/shard-00000.json", "stages/01-ab/rejects/shard-00000.jsonl",
                 "stages/01-ab/removed/shard-00000.jsonl", "stages/01-ab/resolve/removals/shard-00000.parquet",
                 "stages/01-ab/resolve/done.json", "stages/01-ab/grouped/done.json", "manifest.json", "report.json",
                 "tokenize/tok/s000-000001.lens.npy", "tokenize/tok/s000-000001.done.json"):
        assert not is_data(meta), meta


@pytest.mark.slow
def test_compose_copies_large_parts_in_the_bucket_and_streams_small_ones(s3):
    from gristmill.engine.remote_parts import commit_composed, compose
    from gristmill.fs import staging
    b = s3.bucket
    sizes = [MIN_PART + 1000, 10, 2 * MIN_PART + 7, 3000, MIN_PART - 1, 5]
    blobs = [os.urandom(n) for n in sizes]
    srcs = []
    for i, blob in enumerate(blobs):
        s3.pipe(f"{b}/w/frag-{i}", blob)
        srcs.append(f"s3://{b}/w/frag-{i}")
    got = compose(srcs, f"s3://{b}/out/one.jsonl")
    assert s3.cat_file(f"{b}/out/one.jsonl") == b"".join(blobs)
    assert got["size"] == sum(sizes) and got["copied"] >= 2 * MIN_PART and got["streamed"] < 3 * MIN_PART
    assert got["copied"] + got["streamed"] == sum(sizes)
    # committed: the manifest is written after the object and names it
    commit_composed(srcs[1:2] + srcs[3:4], f"s3://{b}/out/small.jsonl")
    assert s3.cat_file(f"{b}/out/small.jsonl") == blobs[1] + blobs[3]
    man = staging.read_manifest(f"s3://{b}/out/small.jsonl", False)
    assert man["files"][0]["name"] == "small.jsonl" and man["files"][0]["size"] == 3010
    # no fragment at all: an empty object
    compose([], f"s3://{b}/out/empty.jsonl")
    assert s3.cat_file(f"{b}/out/empty.jsonl") == b""


def test_token_parts_read_ranges_of_the_shards_and_compose_with_the_header(s3, tmp_path):
    """A composed tokenize file: parts written by TokenPartTask from ranges of .ids objects (uint32 → the
    format's dtype, merged neighbouring ranges, pad at the end), composed after a header; committed with the
    directory's other files, the manifest naming both kinds (fast: no Ray)."""
    import numpy as np

    from gristmill.engine.remote_parts import commit_directory, compose
    from gristmill.fs import staging
    from gristmill.tokenize.compose import TokenPartTask, plan_parts, read_ranges
    b = s3.bucket
    rng = np.random.default_rng(0)
    shards = {n: rng.integers(0, 60000, size=k, dtype=np.uint32) for n, k in (("a", 5000), ("b", 300), ("c", 9))}
    for n, arr in shards.items():
        s3.pipe(f"{b}/w/tok/{n}.ids", arr.astype("<u4").tobytes())
    segs = [("a", 0, 10), ("a", 10, 5), ("a", 20, 4000), ("b", 7, 200), ("c", 0, 9), ("a", 4990, 10), ("b", 0, 1)]
    want = np.concatenate([shards[n][f:f + k] for n, f, k in segs])
    parts = plan_parts(segs, lambda n: f"s3://{b}/w/tok/{n}.ids", 1000)
    assert [sum(k for _, _, k in p) for p in parts] == [1000, 1000, 1000, 1000, len(want) - 4000]
    flat = [r for p in parts for r in p]
    assert b"".join(read_ranges(flat)) == want.astype("<u4").tobytes()
    out = []
    for k, p in enumerate(parts):
        rec = TokenPartTask(p, "<u2", 7 if k == len(parts) - 1 else 0, 3, f"s3://{b}/w/parts/p{k}", k).run()
        out.append(rec["dest"])
    s3.pipe(f"{b}/w/parts/head", b"HEADER")
    compose([f"s3://{b}/w/parts/head", *out], f"s3://{b}/out/x.bin")
    assert s3.cat_file(f"{b}/out/x.bin") == b"HEADER" + want.astype("<u2").tobytes() + np.full(7, 3, "<u2").tobytes()
    # the directory commit: uploaded files with their SHA-256, the composed one with its size and ETag
    local = os.path.join(str(tmp_path), "o")
    os.makedirs(local)
    with open(os.path.join(local, "x.idx"), "wb") as f:
        f.write(b"idx")
    s3.pipe(f"{b}/out/stale.bin", b"old")
    s3.pipe(f"{b}/out/gristmill-manifest.json", json.dumps({"files": [{"name": "stale.bin"}]}).encode())
    size = s3.size(f"{b}/out/x.bin")
    urls = commit_directory([os.path.join(local, "x.idx")], local, f"s3://{b}/out",
                            {f"s3://{b}/out/x.bin": {"name": "x.bin", "size": size, "etag": "e"}})
    man = staging.read_manifest(f"s3://{b}/out", True)
    assert [e["name"] for e in man["files"]] == ["x.bin", "x.idx"] and man["composed"] == ["x.bin"]
    assert "sha256" in man["files"][1] and urls == [f"s3://{b}/out/x.bin", f"s3://{b}/out/x.idx"]
    assert not s3.exists(f"{b}/out/stale.bin") and s3.cat_file(f"{b}/out/x.idx") == b"idx"


def test_sharded_jsonl_export_composed_from_ranges_cuts_where_the_local_writer_cuts(s3, tmp_path, monkeypatch):
    """An uncompressed sharded export composed from byte ranges of the fragments has the files (names and
    bytes) of io.writers.assemble over the same fragments, for limits inside a line, at a fragment's end, on
    a read chunk's edge (reads of 50 bytes: many chunks per fragment), below one line and above everything."""
    from gristmill.engine.remote_parts import commit_composed, plan_jsonl_shards
    from gristmill.fs import staging
    from gristmill.io import streams
    from gristmill.io.writers import assemble, shard_names
    monkeypatch.setattr(streams, "READ_SIZE", 50)
    b = s3.bucket
    frags = [b"".join(b'{"id": %d, "t": "%s"}\n' % (i * 10 + j, b"x" * ((i * 7 + j * 3) % 23)) for j in range(n))
             for i, n in enumerate((3, 1, 0, 5, 2))]
    local = []
    for i, body in enumerate(frags):
        local.append(str(tmp_path / f"f{i}.jsonl"))
        open(local[-1], "wb").write(body)
        s3.pipe(f"{b}/w/f{i}.jsonl", body)
    urls = [f"s3://{b}/w/f{i}.jsonl" for i in range(len(frags))]
    total = sum(map(len, frags))
    for limit in (1, 40, len(frags[0]), len(frags[0]) + len(frags[1]), total + 1):
        out = tmp_path / f"L{limit}" / "c.jsonl"
        out.parent.mkdir()
        want = assemble([local], str(out), limit)
        pieces = plan_jsonl_shards(urls, [len(f) for f in frags], limit)
        dest = f"s3://{b}/o{limit}/c.jsonl"
        names = shard_names(dest, len(pieces))
        assert [os.path.basename(n) for n in names] == [os.path.basename(w) for w in want], limit
        commit_composed([], dest, files=list(zip(names, pieces)))
        for n, w in zip(names, want):
            assert s3.cat_file(n[len("s3://"):]) == open(w, "rb").read(), (limit, n)
        man = staging.read_manifest(dest, False)
        assert [e["name"] for e in man["files"]] == [os.path.basename(n) for n in names]


# -- a real two-node Ray cluster against the S3 server (the s3_cluster fixture: tests/fs/conftest.py) ---------

def _inputs(s3, tmp_path, n=6) -> tuple[str, str]:
    lines = gzip.open(SAMPLE, "rb").read().splitlines()
    docs = [json.loads(x) for x in lines]
    rows = docs + [{**d, "id": f"copy-{d['id']}", "text": d["text"].upper()} for d in docs[::9]]
    local = tmp_path / "in"
    local.mkdir()
    for k in range(n):
        body = b"".join(json.dumps({**r, "part": k}).encode() + b"\n" for r in rows[k::n])
        if k == 2:
            body += b'{"id": "broken", "text": "no closing quote}\n'
        (local / f"part-{k}.jsonl").write_bytes(body)
        s3.pipe(f"{s3.bucket}/in/part-{k}.jsonl", body)
    return str(local), f"s3://{s3.bucket}/in/"


def _tokenizer(tmp_path) -> str:
    """A small byte-level BPE tokenizer trained here (nothing downloaded)."""
    tk = pytest.importorskip("tokenizers")
    tok = tk.Tokenizer(tk.models.BPE())
    tok.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tk.decoders.ByteLevel()
    texts = [json.loads(x)["text"] for x in gzip.open(SAMPLE, "rb").read().splitlines()[:40]]
    tok.train_from_iterator(texts, trainer=tk.trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<|endoftext|>"], initial_alphabet=tk.pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    return str(path)


def _recipe(tmp_path, name, process=OPS, **kw) -> str:
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump({"project_name": name, "np": 2, "allow_scripts": True, "process": process, **kw}))
    return str(p)


def _cli(*args, cwd, **kw):
    return subprocess.run([sys.executable, "-m", "gristmill.cli", *args, "--no-progress"], capture_output=True,
                          text=True, cwd=cwd, env=os.environ.copy(), timeout=400, **kw)


def _data_in_staging(root) -> list[str]:
    out = []
    for d, _, names in os.walk(root):
        for n in names:
            rel = os.path.relpath(os.path.join(d, n), root).replace(os.sep, "/")
            if is_data(rel.split("/", 1)[-1]):
                out.append(rel)
    return out




@pytest.mark.ray
@pytest.mark.slow
def test_ray_workers_read_and_write_s3_with_the_local_bytes(s3, s3_cluster, tmp_path):
    """The issue's done-when on a 2-node cluster: inputs, export, work dir and tokenize output on s3://."""
    tok = _tokenizer(tmp_path)
    local_in, url_in = _inputs(s3, tmp_path)
    b = s3.bucket
    extra_l = {"tokenize": {"tokenizer": tok, "output": f"{tmp_path}/tok"}}
    extra_r = {"tokenize": {"tokenizer": tok, "output": f"s3://{b}/tok"}}
    loc = _cli("run", _recipe(tmp_path, "l", dataset_path=local_in, export_path=f"{tmp_path}/out/c.jsonl.gz",
                              work_dir=f"{tmp_path}/w", **extra_l), cwd=tmp_path)
    assert loc.returncode == 0, loc.stderr
    remote = dict(dataset_path=url_in, export_path=f"s3://{b}/out/c.jsonl.gz", work_dir=f"s3://{b}/w",
                  executor_type="ray", ray_address=s3_cluster.address)
    rem = _cli("run", _recipe(tmp_path, "r", **remote), cwd=tmp_path)
    assert rem.returncode == 0, rem.stderr
    assert "ray: 2 CPUs on 2 node(s)" in rem.stderr
    assert "export composed in the bucket" in rem.stderr, rem.stderr
    assert s3.cat_file(f"{b}/out/c.jsonl.gz") == (tmp_path / "out/c.jsonl.gz").read_bytes()
    assert json.loads(s3.cat_file(f"{b}/out/.c.jsonl.gz.gristmill-manifest.json"))["composed_from"] >= 1
    # the workers wrote the shards to the bucket; the driver's staging copy holds none of them
    assert [k for k in s3.find(f"{b}/w/stages") if "/out/" in k]
    assert _data_in_staging(tmp_path / "staging") == []
    for side in ("rejects.jsonl", "report.json"):
        assert s3.exists(f"{b}/w/{side}")
    assert s3.cat_file(f"{b}/w/rejects.jsonl").count(b"\n") == (tmp_path / "w/rejects.jsonl").read_bytes().count(b"\n") == 1
    rep = json.loads(s3.cat_file(f"{b}/w/report.json"))
    local_rep = json.loads((tmp_path / "w/report.json").read_text())
    assert [(o["op"], o["rows_in"], o["rows_out"], o["removed"]) for o in rep["ops"]] == \
        [(o["op"], o["rows_in"], o["rows_out"], o["removed"]) for o in local_rep["ops"]]
    assert not [k for k in s3.find(f"{b}/w") if "/scratch/" in k]  # the resolves' spill files are gone
    # the same recipe with its tokenize step: every shard and resolve is reused, then the tokens are written
    # (the tokenize shards read the final parts from the bucket and write their tokens there)
    tok_run = _cli("run", _recipe(tmp_path, "r", **remote, **extra_r), cwd=tmp_path)
    assert tok_run.returncode == 0, tok_run.stderr
    assert "stage 0: 6 of 6 shards already done, skipped" in tok_run.stderr, tok_run.stderr
    assert s3.cat_file(f"{b}/out/c.jsonl.gz") == (tmp_path / "out/c.jsonl.gz").read_bytes()
    arrays = sorted(p.name for p in (tmp_path / "tok").iterdir() if p.suffix == ".npy")
    assert "data.npy" in arrays
    assert all(s3.cat_file(f"{b}/tok/{n}") == (tmp_path / "tok" / n).read_bytes() for n in arrays)
    # the compressed export, sharded: the shards are reused, each file is compressed by a worker from byte ranges
    # of the fragments (cut where the local writer cuts, found in the fragments' line indexes), copied into place
    cs = {"export_path": f"{tmp_path}/out/cs.jsonl.gz", "export_shard_size": 50_000}
    loc = _cli("run", _recipe(tmp_path, "l", dataset_path=local_in, work_dir=f"{tmp_path}/w", **cs), cwd=tmp_path)
    assert loc.returncode == 0, loc.stderr
    rem = _cli("run", _recipe(tmp_path, "r", **{**remote, **cs, "export_path": f"s3://{b}/out/cs.jsonl.gz"}),
               cwd=tmp_path)
    assert rem.returncode == 0, rem.stderr
    assert "compressed shards written by" in rem.stderr, rem.stderr
    shards = sorted(p.name for p in (tmp_path / "out").glob("cs-*.jsonl.gz"))
    assert len(shards) >= 2, shards
    assert sorted(k.rsplit("/", 1)[1] for k in s3.ls(f"{b}/out") if "/cs-" in k) == shards
    for n in shards:
        assert s3.cat_file(f"{b}/out/{n}") == (tmp_path / "out" / n).read_bytes(), n
    assert not [k for k in s3.find(f"{b}/w") if "/export-parquet/" in k]  # parts and line indexes: deleted
    assert _data_in_staging(tmp_path / "staging") == []


@pytest.mark.ray
@pytest.mark.slow
def test_ray_on_s3_driver_sigkill_resumes_from_what_workers_committed(s3, s3_cluster, tmp_path):
    local_in, url_in = _inputs(s3, tmp_path)
    b = s3.bucket
    gate = tmp_path / "gate"
    # the rows of parts 4 and 5 wait while the gate exists: shards 0-3 finish, the kill lands in stage 0
    hold = (f"lambda s: (s['part'] >= 4 and any(__import__('time').sleep(0.05) for _ in iter(lambda: "
            f"__import__('os').path.exists({str(gate)!r}), False)), s)[1]")
    process = [{"python_lambda_mapper": {"lambda_str": hold}}, *OPS]
    loc = _cli("run", _recipe(tmp_path, "l", process, dataset_path=local_in, export_path=f"{tmp_path}/c.jsonl",
                              work_dir=f"{tmp_path}/w"), cwd=tmp_path)
    assert loc.returncode == 0, loc.stderr
    rec = _recipe(tmp_path, "r", process, dataset_path=url_in, export_path=f"s3://{b}/out/c.jsonl",
                  work_dir=f"s3://{b}/w", executor_type="ray", ray_address=s3_cluster.address)
    gate.touch()
    proc = subprocess.Popen([sys.executable, "-m", "gristmill.cli", "run", rec, "--no-progress"], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                            env=os.environ.copy())

    def markers():
        s3.invalidate_cache()
        try:
            return [k for k in s3.find(f"{b}/w/stages") if "/done/shard-" in k and "/stages/00-" in k]
        except FileNotFoundError:
            return []
    deadline = time.time() + 180
    while len(markers()) < 4:
        assert time.time() < deadline and proc.poll() is None, "four shards never finished"
        time.sleep(0.2)
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    finished = len(markers())
    gate.unlink()
    assert finished == 4
    assert not s3.exists(f"{b}/out/c.jsonl")
    # every committed marker's shard outputs are in the bucket: the marker was written last
    for m in markers():
        rec_m = json.loads(s3.cat_file(m))
        for p in rec_m["parts"]:  # named by the driver's staging path, not the worker's private one
            assert p.startswith(str(tmp_path / "staging")), p
            assert s3.exists(f"{b}/w{p[p.index('/stages/'):]}"), p
    time.sleep(3.5)  # the killed run's lease (GRISTMILL_LOCK_LEASE_S=3) expires
    res = _cli("run", rec, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "stage 0: 4 of 6 shards already done, skipped" in res.stderr, res.stderr
    assert s3.cat_file(f"{b}/out/c.jsonl") == (tmp_path / "c.jsonl").read_bytes()
    assert _data_in_staging(tmp_path / "staging") == []


@pytest.mark.ray
@pytest.mark.slow
def test_ray_on_s3_selectors_and_grouper_give_the_local_bytes(s3, s3_cluster, tmp_path):
    """Resolve pieces that return lists (selectors) and a grouper whose rows stay on the workers; the Parquet
    export, one file and then sharded, composed in the bucket from Parquet parts the workers wrote (their row
    groups copied, one merged footer): the local bytes, and no stage data in the driver's staging copy."""
    local_in, url_in = _inputs(s3, tmp_path)
    b = s3.bucket
    process = [{"random_selector": {"select_ratio": 0.6, "seed": 5}},
               {"topk_specified_field_selector": {"field_key": "part", "top_ratio": 0.7}},
               {"key_value_grouper": {"group_by_keys": ["part"]}}]
    ray_kw = dict(work_dir=f"s3://{b}/w", executor_type="ray", ray_address=s3_cluster.address)
    for name, shard, ops in (("g", 0, process), ("gs", 1, process[:2])):  # 1 byte: a file per batch
        loc = _cli("run", _recipe(tmp_path, "l", ops, dataset_path=local_in, export_shard_size=shard,
                                  export_path=f"{tmp_path}/{name}.parquet", work_dir=f"{tmp_path}/w"), cwd=tmp_path)
        assert loc.returncode == 0, loc.stderr
        rem = _cli("run", _recipe(tmp_path, "r", ops, dataset_path=url_in, export_path=f"s3://{b}/{name}.parquet",
                                  export_shard_size=shard, **ray_kw), cwd=tmp_path)
        assert rem.returncode == 0, rem.stderr
        assert "export composed in the bucket" in rem.stderr, rem.stderr
        files = sorted(p.name for p in tmp_path.glob(f"{name}*.parquet"))
        assert (len(files) > 1) == bool(shard), files
        for n in files:
            assert s3.cat_file(f"{b}/{n}") == (tmp_path / n).read_bytes(), n
        man = json.loads(s3.cat_file(f"{b}/.{name}.parquet.gristmill-manifest.json"))
        assert [e["name"] for e in man["files"]] == files
    import polars as pl
    import pyarrow.parquet as pq
    assert pq.read_table(tmp_path / "g.parquet").num_rows >= 2
    assert pl.concat([pl.read_parquet(tmp_path / n) for n in files]).height == \
        sum(pq.ParquetFile(tmp_path / n).metadata.num_rows for n in files) > 2
    # an HF save_to_disk directory, sharded: data files composed from Arrow stream parts, JSON written here
    loc = _cli("run", _recipe(tmp_path, "l", process[:2], dataset_path=local_in, export_shard_size=1,
                              export_path=f"{tmp_path}/hf", work_dir=f"{tmp_path}/w"), cwd=tmp_path)
    assert loc.returncode == 0, loc.stderr
    rem = _cli("run", _recipe(tmp_path, "r", process[:2], dataset_path=url_in, export_path=f"s3://{b}/hf",
                              export_shard_size=1, **ray_kw), cwd=tmp_path)
    assert rem.returncode == 0, rem.stderr
    hf = sorted(p.name for p in (tmp_path / "hf").iterdir() if not p.name.startswith("."))
    assert len([n for n in hf if n.startswith("data-")]) >= 2 and "dataset_info.json" in hf, hf
    for n in hf:
        assert s3.cat_file(f"{b}/hf/{n}") == (tmp_path / "hf" / n).read_bytes(), n
    man = json.loads(s3.cat_file(f"{b}/hf/gristmill-manifest.json"))
    assert sorted(e["name"] for e in man["files"]) == hf and man["composed"] == [n for n in hf if n.startswith("data-")]
    assert not s3.find(f"{b}/w/stages/export-parquet/out")  # the workers' parts: deleted once composed
    assert _data_in_staging(tmp_path / "staging") == []


@pytest.mark.ray
@pytest.mark.slow
def test_ray_on_s3_sources_recipe_and_its_token_files_composed_in_the_bucket(s3, s3_cluster, tmp_path,
                                                                             monkeypatch):
    """A `sources:` recipe with a `tokenize:` step, every path on s3://: the sources' and the shared chain's
    tasks read and write the bucket, the sharded export is composed there from ranges of the fragments; the tokenize shards are written by the
    workers and the Megatron .bin / datatrove .ds are composed from parts the workers wrote (small parts
    here: several per file), the npy rows composed from parts, the parquet file from Parquet parts' row groups
    and a merged footer, and litgpt's chunk files written whole by the workers, all with the local bytes; the driver's staging copy holds no stage data and no tokens."""
    tok = _tokenizer(tmp_path)
    local_in, url_in = _inputs(s3, tmp_path, n=4)
    b = s3.bucket
    monkeypatch.setenv("GRISTMILL_TOKEN_PART_MB", "0.25")

    def recipe(name, src, out, work, **kw):
        return _recipe(tmp_path, name, [{"document_deduplicator": {}}], work_dir=work, export_path=f"{out}/mix.jsonl",
                       export_shard_size=150_000,
                       sources=[{"name": "web", "path": [f"{src}part-0.jsonl", f"{src}part-1.jsonl"],
                                 "process": [{"words_num_filter": {"min_num": 20}}]},
                                {"name": "wiki", "path": [f"{src}part-2.jsonl", f"{src}part-3.jsonl"], "weight": 0.5}],
                       tokenize={"tokenizer": tok, "output": f"{out}/tok", "seq_len": 64, "pack": "concat",
                                 "formats": ["megatron", "datatrove", "litgpt", "npy", "parquet"]}, **kw)
    loc = _cli("run", recipe("l", local_in + "/", str(tmp_path / "L"), str(tmp_path / "lw")), cwd=tmp_path)
    assert loc.returncode == 0, loc.stderr
    rem = _cli("run", recipe("r", url_in, f"s3://{b}/o", f"s3://{b}/w", executor_type="ray",
                             ray_address=s3_cluster.address), cwd=tmp_path)
    assert rem.returncode == 0, rem.stderr
    # the sharded (uncompressed) export: composed in the bucket from ranges of the fragments, the local files
    shards = sorted(p.name for p in (tmp_path / "L").iterdir() if p.name.startswith("mix-"))
    assert len(shards) >= 2 and "file(s) composed from" in rem.stderr, rem.stderr
    assert sorted(k.rsplit("/", 1)[1] for k in s3.ls(f"{b}/o") if k.rsplit("/", 1)[1].startswith("mix-")) == shards
    for n in shards:
        assert s3.cat_file(f"{b}/o/{n}") == (tmp_path / "L" / n).read_bytes(), n
    for fmt, big in (("megatron", "data.bin"), ("datatrove", "data.ds")):
        assert f"tokenize: {fmt}/{big} composed in the bucket from" in rem.stderr, rem.stderr
    n_parts = [int(x.split(" from ")[1].split()[0]) for x in rem.stderr.splitlines() if "composed in the bucket from" in x
               and "tokenize:" in x and "parquet" not in x]  # (the parquet file: one part at this size)
    assert min(n_parts) >= 2  # the file really is several workers' parts
    local_tok = tmp_path / "L" / "tok"
    files = sorted(str(p.relative_to(local_tok)) for p in local_tok.rglob("*") if p.is_file() and p.name != "report.json")
    assert " litgpt chunk file(s) written by the workers to the bucket" in rem.stderr, rem.stderr
    assert "tokenize: npy/data.npy composed in the bucket from" in rem.stderr  # rows cut out of the stream
    assert "tokenize: parquet/data.parquet composed in the bucket from" in rem.stderr  # Parquet parts' row groups
    assert len([f for f in files if f.startswith("litgpt/data_")]) >= 2
    for f in files:
        assert s3.cat_file(f"{b}/o/tok/{f}") == (local_tok / f).read_bytes(), f
    man = json.loads(s3.cat_file(f"{b}/o/tok/gristmill-manifest.json"))
    assert man["composed"][:2] == ["datatrove/data.ds", "litgpt/data_0000000000.bin"]
    assert "megatron/data.bin" in man["composed"] and "npy/data.npy" in man["composed"]
    assert {e["name"] for e in man["files"]} >= {"megatron/data.bin", "megatron/data.idx", "datatrove/data.ds"}
    assert not [k for k in s3.find(f"{b}/w") if "/tokenize/parts/" in k]  # the parts are gone once composed
    assert [k for k in s3.find(f"{b}/w") if k.endswith(".ids")]  # the workers' token shards, in the bucket
    # the driver's staging copy: no shard data, no export fragment, no token
    assert _data_in_staging(tmp_path / "staging") == []
    assert not [p for p in (tmp_path / "staging").rglob("*") if "/stages/" in str(p) and "/out/" in str(p)
                and p.is_file()]
