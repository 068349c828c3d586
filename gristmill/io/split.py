"""`gristmill split`: re-shard a dataset into N JSON-lines files of about equal size.

A few huge files starve a big cluster (or ``np`` workers on one machine): a shard is at most one file for
formats that cannot be read from the middle (compressed files, JSON arrays, CSV, text documents). This
reads any dataset gristmill reads, in order, and writes ``OUTDIR/part-00000-of-0000N.jsonl[.gz|.zst]``:

- rows in input order, cut into N files of about equal (uncompressed) size, only between rows;
- every row read is in exactly one file, its fields as read (JSON fields value for value, raw JSON
  fields as written in the input; Parquet/Arrow bytes as base64, as every JSONL export writes them);
- every row keeps the ``id`` it had when read, including the ones gristmill makes (``file:offset``): a
  recipe run on the split files gives the same ids, so removals and rejects still name the original;
- records the readers reject (bad JSON, a text that is not a string, a truncated file) are counted and
  written to ``OUTDIR/.gristmill-split-rejects.jsonl`` (a hidden name: not read back as data);
- OUTDIR holds files of other programs untouched; of the ``part-*`` names only files an earlier
  ``gristmill split`` wrote (listed in ``OUTDIR/.gristmill-split.json``) are replaced, and a rerun with a
  smaller N removes the earlier run's extra parts. Any other file in the way is refused.
"""
from __future__ import annotations
from .. import fs as _fs

import json
import os
from typing import Callable

from .base import ReadOptions
from .streams import copy_range

# (the readers and writers are imported when used: io/ modules load as reader plugins, and the writers
# bring in Polars, which `gristmill head` need not pay for)

RECORD = ".gristmill-split.json"
REJECTS = ".gristmill-split-rejects.jsonl"
ROWS = ".gristmill-split-rows.jsonl"  # all rows, before they are cut into parts (removed at the end)
COMPRESSIONS = {"": "", "none": "", "gz": ".gz", ".gz": ".gz", "zst": ".zst", ".zst": ".zst"}


class SplitRefused(ValueError):
    """The split would replace a file it did not write, or the arguments make no sense: exit 2."""


def part_names(out_dir: str, n: int, compression: str = "", prefix: str = "part") -> list[str]:
    width = max(5, len(str(n)))
    return [os.path.join(out_dir, f"{prefix}-{i:0{width}d}-of-{n:0{width}d}.jsonl{compression}") for i in range(n)]


def compression_of(name: str) -> str:
    if name not in COMPRESSIONS:
        raise SplitRefused(f"compression {name!r}: use none, gz or zst")
    return COMPRESSIONS[name]


def _record(out_dir: str) -> list[str]:
    try:
        with open(os.path.join(out_dir, RECORD)) as f:
            return [os.path.join(out_dir, n) for n in json.load(f).get("files", [])]
    except (OSError, ValueError):
        return []


def check_targets(out_dir: str, names: list[str]) -> list[str]:
    """Refuse when a name we would write is taken by a file an earlier split did not write; returns the
    earlier split's files (replaced, or removed once this split is done)."""
    ours = _record(out_dir)
    for p in names:
        if os.path.lexists(p) and p not in ours:
            raise SplitRefused(f"{p} exists and was not written by gristmill split: refusing to replace it "
                               f"(remove it, or choose another output directory)")
    return ours


def split_dataset(paths, out_dir: str, n: int, opts: ReadOptions, fmt: str | None = None, compression: str = "",
                  prefix: str = "part", log: Callable[[str], None] = lambda m: None) -> dict:
    """Re-shard ``paths`` into ``n`` files (see the module doc). Returns {"files": [{"path", "rows",
    "bytes"}], "rows", "rejects", "file_errors", "rejects_file"}."""
    from dataclasses import replace
    from ..core import columns as C
    from ..core.accounting import Reject
    from .formats import read_shard
    from .planner import common_root, plan_dataset
    from .writers import FragmentWriter, atomic_rename, tmp_path, write_jsonl_records
    if n < 1:
        raise SplitRefused(f"-n must be at least 1, not {n}")
    if _fs.is_url(out_dir):
        return _split_to_url(paths, _fs.normalise(out_dir), n, opts, fmt, compression, prefix, log)
    shards = plan_dataset(paths, opts, fmt)
    opts = replace(opts, root=common_root(shards), text_optional=True)
    names = part_names(out_dir, n, compression, prefix)
    earlier = check_targets(out_dir, names)
    os.makedirs(out_dir, exist_ok=True)
    rows_path = os.path.join(out_dir, ROWS)
    rejects: list[dict] = []
    n_rejects = file_errors = 0
    writer = FragmentWriter(rows_path, "jsonl", "")
    try:
        for shard in shards:
            for item in read_shard(shard, opts):
                if isinstance(item, Reject):
                    if item.counts_as_row:
                        n_rejects += 1
                    else:
                        file_errors += 1
                    rejects.append(item.to_dict())
                    continue
                writer.write(C.drop_private(item, keep_stats=True))
        writer.close()
        files = _cut(rows_path, names, compression)
    finally:
        for p in (rows_path, tmp_path(rows_path)):
            if os.path.exists(p):
                os.unlink(p)
    rejects_path = os.path.join(out_dir, REJECTS)
    if rejects:
        write_jsonl_records(rejects_path, rejects)
    elif os.path.exists(rejects_path):
        os.unlink(rejects_path)
    for p in earlier:  # an earlier split's parts that this one does not have (a bigger -n, another prefix)
        if p not in names and os.path.exists(p):
            os.unlink(p)
            log(f"removed {p}: written by an earlier gristmill split, not part of this one")
    rec = os.path.join(out_dir, RECORD)
    tmp = tmp_path(rec)
    with open(tmp, "w") as f:
        json.dump({"files": [os.path.basename(p) for p in names], "inputs": sorted({s.source for s in shards}),
                   "rows": sum(x["rows"] for x in files)}, f)
    atomic_rename(tmp, rec)
    return {"files": files, "rows": sum(x["rows"] for x in files), "rejects": n_rejects, "file_errors": file_errors,
            "rejects_file": rejects_path if rejects else None}


def _split_to_url(paths, url: str, n: int, opts: ReadOptions, fmt, compression: str, prefix: str, log) -> dict:
    """``split_dataset`` into object storage: the parts are cut in a local staging directory, uploaded, and
    committed by a manifest written last (objects no manifest claims are refused before any work)."""
    import shutil
    from ..fs import staging
    _fs.check_access(url, "output", write=True)
    foreign = staging.foreign_files(url, True, [])
    if foreign:
        raise SplitRefused(f"{_fs.redact(foreign[0])} exists and was not written by gristmill split: refusing to "
                           "replace it (remove it, or choose another output directory)")
    local = staging.staging_dir(url, "split")
    shutil.rmtree(local, ignore_errors=True)
    try:
        res = split_dataset(paths, local, n, opts, fmt, compression, prefix, log)
        files = sorted(os.path.join(local, x) for x in os.listdir(local) if not x.startswith(".") or x == REJECTS)
        staging.commit_export(files, local, url, True, log)
    finally:
        shutil.rmtree(local, ignore_errors=True)
    for f in res["files"]:
        f["path"] = _fs.join(url, os.path.basename(f["path"]))
    if res["rejects_file"]:
        res["rejects_file"] = _fs.join(url, os.path.basename(res["rejects_file"]))
    return res


def _boundaries(path: str, n: int) -> list[int]:
    """n + 1 offsets cutting the file into n ranges of about equal size, each at the start of a line."""
    import mmap
    size = os.path.getsize(path)
    if not size:
        return [0] * (n + 1)
    cuts = [0]
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        for k in range(1, n):
            want = k * size // n
            after = m.find(b"\n", max(want - 1, 0))
            after = size if after < 0 else after + 1
            before = m.rfind(b"\n", 0, want) + 1  # the start of the line holding `want` (0: the first line)
            pos = before if want - before < after - want else after  # the nearer line start
            cuts.append(min(max(pos, cuts[-1]), size))
    cuts.append(size)
    return cuts


def _cut(rows_path: str, names: list[str], compression: str) -> list[dict]:
    """Copy the ranges of the rows file into the parts (in the kernel when uncompressed); every part
    appears only once all are written."""
    from .writers import _close_compressed, _open_compressed, atomic_rename, tmp_path
    cuts = _boundaries(rows_path, len(names))
    out, tmps = [], []
    try:
        with open(rows_path, "rb") as src:
            for name, a, b in zip(names, cuts, cuts[1:]):
                tmp = tmp_path(name)
                tmps.append(tmp)
                rows = 0
                if compression:
                    f, raw = _open_compressed(tmp, compression)
                    src.seek(a)
                    left = b - a
                    while left:
                        data = src.read(min(left, 8 << 20))
                        rows += data.count(b"\n")
                        f.write(data)
                        left -= len(data)
                    _close_compressed(f, raw)
                else:
                    with open(tmp, "wb") as f:
                        copy_range(src.fileno(), a, f.fileno(), 0, b - a)
                    src.seek(a)
                    left = b - a
                    while left:
                        data = src.read(min(left, 8 << 20))
                        rows += data.count(b"\n")
                        left -= len(data)
                out.append({"path": name, "rows": rows, "bytes": b - a})
        for tmp, name in zip(tmps, names):
            atomic_rename(tmp, name)
    except BaseException:
        for tmp in tmps:
            if os.path.exists(tmp):
                os.unlink(tmp)
        raise
    return out
