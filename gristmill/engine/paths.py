"""Checks on where a run reads and writes, made before any work starts.

A data tool must never overwrite or re-read its own output as input: an export written over an input file
destroys it, and an export (or work dir) inside an input directory is read back by the next run. Both are
refused with one line naming the paths. Directories that cannot be written are reported the same way, and
temp files left by a killed run are removed before it resumes.
"""
from __future__ import annotations

import fnmatch
import os
import threading
import shutil

from .. import fs
from ..io.planner import parse_weighted
from ..core.defaults import TMP  # not io.writers: that imports polars and pyarrow (~0.1 s) for a constant


class RunRefused(ValueError):
    """The run cannot start safely (it would overwrite or re-read its own data, a directory is not writable,
    the text field is absent): exit 2, nothing touched."""


def _real(p: str) -> str:
    return fs.normalise(p)  # a URL stays a URL (compared by prefix like a path)


def _inside(child: str, parent: str) -> bool:
    return child == parent or child.startswith(parent.rstrip(os.sep) + os.sep)


def input_roots(dataset_path) -> tuple[list[str], list[str]]:
    """(directories and files the dataset spec names, glob patterns it uses), absolute."""
    roots, globs = [], []
    for _, p in parse_weighted(dataset_path):
        if any(ch in p for ch in "*?["):
            globs.append(p if fs.is_url(p) else os.path.abspath(p))
        else:
            roots.append(_real(p))
    return roots, globs


def check_outputs(dataset_path, input_files: list[str], export_path: str | None, work_dir: str,
                  export_names: list[str]) -> None:
    """Refuse an export or work dir that is an input, contains one, sits inside an input directory, or
    matches an input glob. ``export_names`` are the file names an export may take (e.g. its shards)."""
    roots, globs = input_roots(dataset_path)
    files = sorted({_real(f) for f in input_files})
    targets = [("work dir", _real(work_dir), [])]
    if export_path:
        targets.insert(0, ("export_path", _real(export_path), [os.path.abspath(n) for n in export_names]))
    for what, target, names in targets:
        for f in files:
            if f == target:
                raise RunRefused(f"{what} {target} is an input file: refusing to overwrite it")
            if _inside(f, target):
                raise RunRefused(f"{what} {target} contains the input {f}: refusing to write over the input")
        for r in roots:
            if not fs.is_url(r) and os.path.isdir(r) and _inside(target, r):
                raise RunRefused(f"{what} {target} is inside the input directory {r}: the next run would read "
                                   f"it back as input; write it elsewhere")
        for g in globs:
            for cand in [target, *names]:
                if fnmatch.fnmatch(cand, g):
                    raise RunRefused(f"{what} {cand} matches the input pattern {g}: the next run would read it "
                                       f"back as input; write it elsewhere")
    if export_path and _inside(_real(work_dir), _real(export_path)):
        raise RunRefused(f"work dir {_real(work_dir)} is inside the export {_real(export_path)}")


def check_writable(directory: str, what: str) -> None:
    """Create ``directory`` and write a probe file in it; one-line error naming it if that fails."""
    try:
        os.makedirs(directory, exist_ok=True)
        # pid and thread: runs on threads of one process may probe the same directory at once
        probe = os.path.join(directory, f"{TMP}{os.getpid()}-{threading.get_ident()}-probe")
        with open(probe, "wb") as f:
            f.write(b"ok")
        os.unlink(probe)
    except OSError as e:
        raise RunRefused(f"{what} {directory} is not writable: {e.strerror}") from None


def free_space_warning(directory: str, need_bytes: int) -> str | None:
    """A warning when the file system of ``directory`` has less free space than ``need_bytes``."""
    try:
        free = shutil.disk_usage(directory).free
    except OSError:
        return None
    if free < need_bytes:
        return (f"only {free / 1e6:,.0f} MB free under {directory}, the input alone is {need_bytes / 1e6:,.0f} MB: "
                f"the run may stop with 'no space left' (it resumes once space is freed)")
    return None


def remove_stale_tmp(directory: str, recursive: bool, any_pid: bool = False) -> int:
    """Delete temp files (``.gm-tmp-<pid>-…``) whose writing process is gone (every one with ``any_pid``:
    under the work dir lock no other run can be writing); returns how many."""
    n = 0
    if not os.path.isdir(directory):
        return 0
    walker = os.walk(directory) if recursive else [(directory, [], os.listdir(directory))]
    for d, _, names in walker:
        for name in names:
            if name.startswith(TMP) and (any_pid or not _alive(name[len(TMP):].split("-", 1)[0])):
                try:
                    os.unlink(os.path.join(d, name))
                    n += 1
                except OSError:
                    pass
    return n


def remove_own_tmp(directory: str) -> None:
    """Delete this process's temp files in ``directory`` (after a failed write: a full disk stays full)."""
    prefix = f"{TMP}{os.getpid()}-"
    for name in os.listdir(directory) if os.path.isdir(directory) else []:
        if name.startswith(prefix):
            try:
                os.unlink(os.path.join(directory, name))
            except OSError:
                pass


def _alive(pid: str) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


def naming(path: str):
    """Context manager: an OSError raised without a file name (a failed write, fsync or close) gets
    ``path``, so the one-line error says where the disk was full or unwritable."""
    import contextlib

    @contextlib.contextmanager
    def cm():
        try:
            yield
        except OSError as e:
            if e.filename or e.errno is None:
                raise
            raise OSError(e.errno, e.strerror, path) from e
    return cm()
