"""Resume state of a work dir: the manifest of the last run's stage fingerprints, and why a stage is
recomputed when its fingerprint changed."""
from __future__ import annotations

import json
import os

from .. import fs
from ..io.base import ReadOptions, Shard
from ..io.writers import atomic_rename, tmp_path
from .config import RunConfig
from .plan import Stage, fingerprint


def input_fingerprint(shards: list[Shard], opts: ReadOptions, cfg: RunConfig) -> str:
    """Covers every input file's identity (path, size, mtime; an object's URL, size, ETag) and everything that shapes the read."""
    files = sorted({s.source for s in shards} | {f for s in shards for f in s.files})
    stat = [fs.identity(f) for f in files]  # (path, size, mtime) here; (URL, size, ETag) in object storage
    return fingerprint(stat, [(s.source, s.reader, s.start, s.end, s.weight) for s in shards],
                       opts.text_key, opts.batch_size, opts.shard_bytes, opts.params, cfg.seed, cfg.input_format)


def load_manifest(work: str) -> dict | None:
    try:
        with open(os.path.join(work, "manifest.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def save_manifest(work: str, manifest: dict) -> None:
    path = os.path.join(work, "manifest.json")
    tmp = tmp_path(path)
    with open(tmp, "w") as f:
        json.dump(manifest, f, indent=1, default=str)
    atomic_rename(tmp, path)


def invalidation(previous: dict | None, stage: Stage, fp: str) -> str | None:
    """Why ``stage`` is recomputed (None when the last run had it with the same fingerprint, or there was
    no last run)."""
    if not previous:
        return None
    old = next((s for s in previous.get("stages", []) if s["index"] == stage.index), None)
    if old is None or old["fingerprint"] == fp:
        return None
    new_ops = [o.config() for o in stage.ops]
    why = []
    for a, b in zip(old.get("ops", []), new_ops):
        if a != b:
            why.append(f"{b['op']} changed ({_diff(a, b)})")
    if len(old.get("ops", [])) != len(new_ops):
        why.append(f"op list changed ({len(old.get('ops', []))} → {len(new_ops)} ops)")
    return f"stage {stage.index} recomputed: " + ("; ".join(why) if why else
                                                   "its input, an earlier stage or the output format changed")


def _diff(a: dict, b: dict) -> str:
    pa_, pb = a.get("params", {}), b.get("params", {})
    changes = [f"{k}: {pa_.get(k)!r} → {pb.get(k)!r}" for k in sorted(set(pa_) | set(pb)) if pa_.get(k) != pb.get(k)]
    if a.get("op") != b.get("op"):
        changes.insert(0, f"{a.get('op')} → {b.get('op')}")
    return ", ".join(changes) or "code version"
