"""Dataset paths → ordered shard list.

Accepts what Data-Juicer's ``dataset_path`` accepts: a file, a directory (walked recursively), a glob,
or a weighted list ``"w1 p1 w2 p2"``. The order is deterministic (sorted paths) and shard boundaries depend
only on the files and read options, never on the number of workers.
"""
from __future__ import annotations

import glob as globmod
import os
import re
from dataclasses import replace

from .base import ReadOptions, Shard, reader_for, readers, strip_compression

SKIP_NAMES = ("_SUCCESS", ".DS_Store")
URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")  # s3://, gs://, hf://, https://, file://...


def check_not_uri(path, what: str, output: bool = False) -> None:
    """A ValueError (one line) for an object-store URI or URL where a path on a mounted file system is
    needed: read as a local path it would name nothing (an input) or a directory called ``s3:`` (an output)."""
    if isinstance(path, str) and URI.match(path):
        if output:
            raise ValueError(f"{what} {path!r}: object storage is not supported for outputs (they need atomic "
                             "renames and file locks); write to a POSIX file system (local disk, NFS, a shared "
                             "volume) and copy the result to the bucket afterwards (aws s3 sync, gcloud storage rsync)")
        raise ValueError(f"{what} {path!r}: object storage and URLs are not read directly; mount the bucket "
                         "with a FUSE client (mountpoint-s3, s3fs, gcsfuse) and give the mounted path, or "
                         "download the files first")


def parse_weighted(spec) -> list[tuple[float, str]]:
    """``"0.5 a.jsonl 1 b/"`` → [(0.5, 'a.jsonl'), (1.0, 'b/')]; a plain path or list gets weight 1."""
    if isinstance(spec, (list, tuple)):
        out = []
        for item in spec:
            out.extend(parse_weighted(item) if isinstance(item, str) else
                       [(float(item.get("weight", 1.0)), str(item["path"]))])
        return out
    parts = str(spec).split()
    if len(parts) == 1:
        return [(1.0, parts[0])]
    try:
        float(parts[0])
    except ValueError:
        return [(1.0, p) for p in parts]
    if len(parts) % 2:
        raise ValueError(f"weighted dataset_path must alternate weight and path: {spec!r}")
    out = []
    for w, p in zip(parts[::2], parts[1::2]):
        try:
            wf = float(w)
        except ValueError:
            raise ValueError(f"weighted dataset_path: {w!r} is not a weight (in {spec!r})") from None
        if wf < 0:
            raise ValueError(f"weighted dataset_path: negative weight {wf}")
        out.append((wf, p))
    return out


def _known_ext(path: str) -> bool:
    base, _ = strip_compression(path)
    low = base.lower()
    return any(low.endswith(e) for r in readers().values() for e in r.extensions)


def expand(path: str) -> list[str]:
    """Files (or reader-claimed directories) that ``path`` names, sorted."""
    check_not_uri(path, "dataset_path")
    if any(ch in path for ch in "*?["):
        hits = sorted(globmod.glob(path, recursive=True))
        if not hits:
            raise FileNotFoundError(f"no files match {path!r}")
        return [f for h in hits for f in expand(h)]
    if os.path.isdir(path):
        for r in readers().values():
            if getattr(r, "claims_dir", None) and r.claims_dir(path):
                return [path]
        out = []
        for d, subdirs, files in os.walk(path):
            subdirs.sort()
            claimed = [s for s in subdirs if any(getattr(r, "claims_dir", None) and
                                                 r.claims_dir(os.path.join(d, s)) for r in readers().values())]
            out.extend(os.path.join(d, s) for s in claimed)
            subdirs[:] = [s for s in subdirs if s not in claimed and not s.startswith(".")]
            out.extend(os.path.join(d, f) for f in sorted(files)
                       if not f.startswith(".") and f not in SKIP_NAMES and _known_ext(f))
        if not out:
            raise FileNotFoundError(f"no readable data files under {path!r}")
        return sorted(out)
    if not os.path.exists(path):
        raise FileNotFoundError(f"dataset path {path!r} does not exist")
    return [path]


def plan_dataset(paths, opts: ReadOptions, fmt: str | None = None) -> list[Shard]:
    """Ordered shards for a dataset spec (str, weighted str, or list)."""
    shards: list[Shard] = []
    for weight, p in parse_weighted(paths):
        for f in expand(p):
            r = reader_for(f, fmt)
            for s in r.plan(f, opts):
                shards.append(replace(s, weight=weight))
    return [replace(s, index=i) for i, s in enumerate(shards)]


def common_root(shards: list[Shard]) -> str:
    dirs = [os.path.dirname(os.path.abspath(s.source)) for s in shards]
    return os.path.commonpath(dirs) if dirs else ""
