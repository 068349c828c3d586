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

from .. import fs
from .base import ReadOptions, Shard, reader_for, readers, strip_compression

SKIP_NAMES = ("_SUCCESS", ".DS_Store")
URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")  # s3://, gs://, hf://, https://, file://...


def check_not_uri(path, what: str, output: bool = False) -> None:
    """A ValueError (one line) for a URL no filesystem driver handles (``http://``: read-only, no listing),
    or an object-store URL as an output where no staging is wired (``engine.remote`` stages a run's work dir
    and export); object-store inputs go through ``gristmill.fs``."""
    if isinstance(path, str) and output and fs.is_url(path):
        raise ValueError(f"{what} {fs.redact(path)!r}: object storage outputs are supported for the work dir and "
                         "export of a run over dataset_path and for tokenize outputs, not here; write to a local "
                         "path and copy the result to the bucket")
    if isinstance(path, str) and URI.match(path) and fs.protocol(path) in ("http", "https"):
        raise ValueError(f"{what} {path!r}: http(s) URLs are not read as datasets; download the files first "
                         "or give an s3:// gs:// hf:// URL")


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
    if fs.is_url(path):
        return _expand_url(path)
    path = fs.local(path)
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


def _expand_url(path: str) -> list[str]:
    """``expand`` for object storage: a glob, a prefix (every known data file under it) or one object."""
    fs.check_access(path, "dataset_path")
    if any(ch in path for ch in "*?["):
        hidden = fs.basename(path).startswith(".")  # like glob.glob: wildcards do not match dot files
        hits = [(h, d) for h, d in fs.glob_entries(path) if hidden or not fs.basename(h).startswith(".")]
        if not hits:
            raise FileNotFoundError(f"no files match {fs.redact(path)!r}")
        out = []
        for h, d in hits:  # a directory matched is read as a directory is (every data file under it)
            if d:
                out += _expand_url(h)
            elif _known_ext(h) or not path.endswith(("/**", "/*")):
                out.append(h)
        return list(dict.fromkeys(out))
    if fs.isdir(path):
        out = [u for u in fs.find(path) if not any(part.startswith(".") for part in
                                                   u[len(path.rstrip("/")):].split("/"))
               and fs.basename(u) not in SKIP_NAMES and _known_ext(fs.basename(u))]
        if not out:
            raise FileNotFoundError(f"no readable data files under {fs.redact(path)!r}")
        return out
    if not fs.exists(path):
        raise FileNotFoundError(f"dataset path {fs.redact(path)!r} does not exist")
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
    urls = [s.source for s in shards if fs.is_url(s.source)]
    if urls:  # ids are relative to the common prefix of the URLs, as they are to a common local directory
        if len(urls) < len(shards) or len({fs.protocol(u) for u in urls}) > 1:
            return ""
        return fs.URL.match(urls[0]).group(0) + os.path.commonpath(
            [fs.dirname(u)[len(fs.URL.match(u).group(0)):] for u in urls])
    dirs = [os.path.dirname(os.path.abspath(s.source)) for s in shards]
    return os.path.commonpath(dirs) if dirs else ""
