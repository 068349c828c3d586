"""Which export files gristmill wrote, so an export location holds exactly the current run's files.

A rerun that writes fewer shards than the last one must remove the extra old shards (else readers see both
runs' rows), but must never delete a file gristmill did not write. Beside the export a small hidden record
(``.NAME.gristmill.json``, or ``.gristmill-export.json`` inside an HF directory) lists the files written.
Before any work starts, files in the export's name space that the record does not claim are refused. While
a new export is being assembled the record is marked ``pending``, so that a run killed half-way still claims
the new shards it had renamed into place.
"""
from __future__ import annotations

import json
import os
import re

from ..io.base import strip_compression
from ..io.writers import atomic_rename, export_format, tmp_path
from .paths import RunRefused


def _record_path(export_path: str) -> str:
    if export_format(export_path)[0] == "arrow":
        return os.path.join(export_path, ".gristmill-export.json")
    d, b = os.path.split(os.path.abspath(export_path))
    return os.path.join(d, f".{b}.gristmill.json")


def _candidates(export_path: str) -> list[str]:
    """Existing files an export to ``export_path`` could have written: the file itself and its numbered
    shards (``stem-00000-of-00004.ext``), or every file in an HF export directory."""
    path = os.path.abspath(export_path)
    if export_format(export_path)[0] == "arrow":
        if not os.path.isdir(path):
            return [path] if os.path.exists(path) else []
        return sorted(os.path.join(path, n) for n in os.listdir(path)
                      if not n.startswith(".") and os.path.isfile(os.path.join(path, n)))
    d, b = os.path.split(path)
    base, comp = strip_compression(b)
    stem, ext = os.path.splitext(base)
    pat = re.compile(re.escape(stem) + r"-\d{5,}-of-\d{5,}" + re.escape(ext + comp) + r"\Z")
    if not os.path.isdir(d):
        return []
    return sorted(os.path.join(d, n) for n in os.listdir(d) if n == b or pat.match(n))


def _load(export_path: str) -> dict:
    try:
        with open(_record_path(export_path)) as f:
            rec = json.load(f)
        return {"files": [str(x) for x in rec.get("files", [])], "pending": bool(rec.get("pending"))}
    except (OSError, ValueError, AttributeError):
        return {"files": [], "pending": False}


def _save(export_path: str, files: list[str], pending: bool) -> None:
    path = _record_path(export_path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = tmp_path(path)
    with open(tmp, "w") as f:
        json.dump({"files": sorted(os.path.basename(x) for x in files), "pending": pending}, f, indent=1)
    atomic_rename(tmp, path)


def _claimed(export_path: str) -> tuple[list[str], list[str]]:
    """(existing candidate files the record claims, those it does not)."""
    rec = _load(export_path)
    ours, foreign = [], []
    for p in _candidates(export_path):
        (ours if rec["pending"] or os.path.basename(p) in rec["files"] else foreign).append(p)
    return ours, foreign


def check_export_target(export_path: str) -> None:
    """Refuse (before any work) an export that would replace or sit beside files gristmill did not write."""
    path = os.path.abspath(export_path)
    if export_format(export_path)[0] == "arrow" and os.path.exists(path) and not os.path.isdir(path):
        raise RunRefused(f"export_path {path} is a file, but the export is a directory (HF datasets layout)")
    _, foreign = _claimed(export_path)
    if foreign:
        more = f" (and {len(foreign) - 3} more)" if len(foreign) > 3 else ""
        raise RunRefused(f"export_path {path}: {', '.join(foreign[:3])}{more} already exist(s) and were not "
                           f"written by gristmill; remove them or choose another export_path")


def begin_export(export_path: str) -> None:
    """Mark the export as being rewritten: from now on every file in its name space counts as ours."""
    ours, _ = _claimed(export_path)
    _save(export_path, ours, pending=True)


def finish_export(export_path: str, files: list[str]) -> list[str]:
    """Delete our files from earlier runs that this run did not write; record ``files``. Returns the
    deleted paths."""
    keep = {os.path.abspath(f) for f in files}
    if export_format(export_path)[0] == "arrow":  # the HF layout's metadata files are part of the export
        keep |= {os.path.join(os.path.abspath(export_path), n) for n in ("dataset_info.json", "state.json")}
    ours, _ = _claimed(export_path)
    gone = []
    for p in ours:
        if p not in keep and os.path.isfile(p):
            os.unlink(p)
            gone.append(p)
    _save(export_path, list(keep), pending=False)
    return gone
