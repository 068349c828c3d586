"""Which export files gristmill wrote, so an export location holds exactly the current run's files.

A rerun that writes fewer shards than the last one must remove the extra old shards (else readers see both
runs' rows), but must never delete a file gristmill did not write. Beside the export a small hidden record
(``.NAME.gristmill.json``, or ``.gristmill-export.json`` inside an HF directory) lists the files written.
Before any work starts, files in the export's name space that the record does not claim are refused. While
a new export is being assembled the record is marked ``pending``, so that a run killed half-way still claims
the new shards it had renamed into place.

Media placed beside the export (``export_media: link|copy``, under ``<stem>_media/`` or an HF directory's
``media/``) are recorded the same way, by their paths relative to the export: before any work, files
under the media directory that the record does not list are refused; from the start of the run (media are
placed by the workers, long before the export is assembled) the record is marked ``media_pending``; at
the end, our media files that no exported row references are deleted.
"""
from __future__ import annotations

import json
import os
import re

from ..io.base import strip_compression
from ..io.media_export import export_layout
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
        return {"files": [str(x) for x in rec.get("files", [])], "pending": bool(rec.get("pending")),
                "media": [str(x) for x in rec.get("media", [])], "media_pending": bool(rec.get("media_pending"))}
    except (OSError, ValueError, AttributeError):
        return {"files": [], "pending": False, "media": [], "media_pending": False}


def _save(export_path: str, rec: dict) -> None:
    path = _record_path(export_path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = tmp_path(path)
    out = {"files": sorted(os.path.basename(x) for x in rec["files"]), "pending": rec["pending"]}
    if rec.get("media") or rec.get("media_pending"):
        out.update(media=sorted(rec.get("media", [])), media_pending=bool(rec.get("media_pending")))
    with open(tmp, "w") as f:
        json.dump(out, f, indent=1)
    atomic_rename(tmp, path)


def media_layout(export_path: str) -> tuple[str, str]:
    """(the directory the export's media paths are relative to, the media sub-directory's name)."""
    return export_layout(export_path, export_format(export_path)[0] == "arrow")


def _media_files(export_path: str) -> list[str]:
    """Files under the export's media directory, as paths relative to the export directory."""
    base, sub = media_layout(export_path)
    root = os.path.join(base, sub)
    out = []
    for d, _, names in os.walk(root):
        out += [os.path.relpath(os.path.join(d, n), base) for n in names]
    return sorted(out)


def _claimed_media(export_path: str, rec: dict | None = None) -> tuple[list[str], list[str]]:
    rec = rec or _load(export_path)
    known = set(rec["media"])
    ours, foreign = [], []
    for p in _media_files(export_path):
        (ours if rec["media_pending"] or p in known else foreign).append(p)
    return ours, foreign


def _claimed(export_path: str) -> tuple[list[str], list[str]]:
    """(existing candidate files the record claims, those it does not)."""
    rec = _load(export_path)
    ours, foreign = [], []
    for p in _candidates(export_path):
        (ours if rec["pending"] or os.path.basename(p) in rec["files"] else foreign).append(p)
    return ours, foreign


def check_export_target(export_path: str, media: bool = False) -> None:
    """Refuse (before any work) an export that would replace or sit beside files gristmill did not write
    (with ``media``: also files in its media directory)."""
    path = os.path.abspath(export_path)
    if export_format(export_path)[0] == "arrow" and os.path.exists(path) and not os.path.isdir(path):
        raise RunRefused(f"export_path {path} is a file, but the export is a directory (HF datasets layout)")
    _, foreign = _claimed(export_path)
    if media:
        base, sub = media_layout(export_path)
        if os.path.exists(os.path.join(base, sub)) and not os.path.isdir(os.path.join(base, sub)):
            raise RunRefused(f"export_media: {os.path.join(base, sub)} is a file, not gristmill's media directory")
        foreign += [os.path.join(base, p) for p in _claimed_media(export_path)[1]]
    if foreign:
        more = f" (and {len(foreign) - 3} more)" if len(foreign) > 3 else ""
        raise RunRefused(f"export_path {path}: {', '.join(foreign[:3])}{more} already exist(s) and were not "
                           f"written by gristmill; remove them or choose another export_path")


def begin_export(export_path: str) -> None:
    """Mark the export as being rewritten: from now on every file in its name space counts as ours."""
    ours, _ = _claimed(export_path)
    rec = _load(export_path)
    _save(export_path, {**rec, "files": ours, "pending": True})


def begin_media(export_path: str) -> None:
    """Mark the media directory as being written (before the workers place files there): from now on every
    file in it counts as ours, so a run killed half-way still claims what it placed."""
    rec = _load(export_path)
    if not rec["media_pending"]:
        _save(export_path, {**rec, "media_pending": True})


def finish_export(export_path: str, files: list[str], media: set[str] | None = None) -> list[str]:
    """Delete our files from earlier runs that this run did not write, and our media files no exported row
    references (``media``: paths relative to the export directory; None = no media placed); record both.
    Returns the deleted paths."""
    keep = {os.path.abspath(f) for f in files}
    if export_format(export_path)[0] == "arrow":  # the HF layout's metadata files are part of the export
        keep |= {os.path.join(os.path.abspath(export_path), n) for n in ("dataset_info.json", "state.json")}
    rec = _load(export_path)
    ours, _ = _claimed(export_path)
    gone = []
    for p in ours:
        if p not in keep and os.path.isfile(p):
            os.unlink(p)
            gone.append(p)
    media = set(media or ())
    base, sub = media_layout(export_path)
    for rel in _claimed_media(export_path, rec)[0]:
        if rel not in media:
            os.unlink(os.path.join(base, rel))
            gone.append(os.path.join(base, rel))
    _prune_empty(os.path.join(base, sub))
    _save(export_path, {"files": list(keep), "pending": False, "media": sorted(media), "media_pending": False})
    return gone


def _prune_empty(root: str) -> None:
    """Remove the empty directories under (and including) ``root``: a media directory left with nothing."""
    if not os.path.isdir(root):
        return
    for d, _, _ in sorted(os.walk(root), key=lambda x: -len(x[0])):
        try:
            os.rmdir(d)
        except OSError:
            pass
