"""Work dirs and exports in object storage, with the guarantees of a local disk.

Object stores have no rename, no append and no locks. The engine's own work dir protocol (files appear
whole, a shard's completion marker is written after its outputs, a stage's manifest after its markers) is
kept by running the engine on a local staging copy and *committing* it to the bucket in the same order:

- every sweep of :class:`Mirror` lists the markers first, then uploads every other new or changed file, and
  only then the markers it listed: a marker in the bucket always has its outputs there (write-once keys per
  shard, a marker written last);
- a killed run resumes from what the bucket holds: :meth:`Mirror.restore` makes the staging copy equal to
  the bucket (files the bucket lacks are dropped, changed ones downloaded), so a run on another machine, or
  after the staging disk was wiped, reuses every committed shard and recomputes the rest;
- one run per work dir: :class:`RemoteLock` is an object created with a conditional write (S3
  ``If-None-Match: *``) holding a lease that the run renews; a lease left by a killed run expires and is
  taken over;
- an export is committed by a manifest written last (:func:`commit_export`): an intent record listing the
  keys about to be written (and the previous export's) is written first (:func:`open_commit`), the old
  manifest removed, the files uploaded, stale files of the previous export deleted, then the manifest written
  and the intent removed (:func:`close_commit`); a reader that trusts only manifested exports never sees a
  half-written one, and a run killed inside that window finds its keys claimed by the intent, so its rerun
  overwrites them (files nobody recorded are still refused).
"""
from __future__ import annotations

import contextvars
import hashlib
import json
import os
import re
import socket
import threading
import time
import uuid

from . import (StorageError, basename, download, exists, filesystem, find, is_url, join, read_bytes, redact,
               remove, upload, write_bytes)

TMP = ".gm-tmp-"
LOCK_NAME = ".lock"
LEASE_S = 60.0  # the work dir lock's lease (GRISTMILL_LOCK_LEASE_S): a killed run's lock is taken over after it
SYNC_S = 2.0  # seconds between commit sweeps of a work dir (GRISTMILL_SYNC_S)


def _setting(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default
MANIFEST_SUFFIX = ".gristmill-manifest.json"
INTENT_SUFFIX = ".gristmill-intent.json"  # an export commit under way (open_commit .. close_commit)
FAULT_ENV = "GRISTMILL_FAULT"  # tests: the commit point at which this process SIGKILLs itself


def staging_root() -> str:
    return os.environ.get("GRISTMILL_STAGING") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "gristmill", "staging")


def staging_dir(url: str, kind: str) -> str:
    """The local staging directory of a work dir or export URL (stable: the same URL resumes in the same
    place on this machine)."""
    h = hashlib.sha256(url.rstrip("/").encode()).hexdigest()[:16]
    return os.path.join(staging_root(), f"{kind}-{h}")


def is_marker(rel: str) -> bool:
    """Files that commit others: shard markers (``done/…json``), resolve/group/export ``done.json``, the
    stage manifest and the report. They are uploaded after everything else of a sweep."""
    parts = rel.split("/")
    name = parts[-1]
    return ("done" in parts[:-1] or name.endswith("done.json") or name in ("manifest.json", "report.json"))


def _skip(rel: str) -> bool:
    name = rel.rsplit("/", 1)[-1]
    return name.startswith(TMP) or name == LOCK_NAME or name.startswith(".gm-mirror")


class Mirror:
    """A local directory committed to a URL prefix in marker-last order (see the module doc)."""

    def __init__(self, url: str, local: str, log=lambda m: None):
        self.url, self.local, self.log = url.rstrip("/"), local, log
        self.index_path = local.rstrip("/") + ".gm-mirror.json"
        self.sent: dict[str, list] = {}  # rel -> [size, mtime_ns] as uploaded
        self._stop = threading.Event()
        self._thread = None
        self._lock = threading.Lock()
        self.error: BaseException | None = None

    def _rel(self, url: str) -> str:
        return url[len(self.url):].lstrip("/")

    def _local_files(self) -> dict[str, os.stat_result]:
        out = {}
        for d, subdirs, names in os.walk(self.local):
            subdirs.sort()
            for n in names:
                p = os.path.join(d, n)
                rel = os.path.relpath(p, self.local).replace(os.sep, "/")
                if _skip(rel):
                    continue
                try:
                    out[rel] = os.stat(p)
                except OSError:
                    pass
        return out

    def restore(self) -> int:
        """Make the staging copy what the bucket holds; returns how many files were downloaded."""
        os.makedirs(self.local, exist_ok=True)
        fs, p = filesystem(self.url)
        remote = {}
        try:
            for path, info in fs.find(p, detail=True).items():
                rel = path[len(p.rstrip("/")):].lstrip("/")
                if rel and not _skip(rel):
                    remote[rel] = info
        except FileNotFoundError:
            pass
        try:
            with open(self.index_path) as f:
                index = json.load(f)
        except (OSError, ValueError):
            index = {}
        here = self._local_files()
        for rel in sorted(set(here) - set(remote)):  # not committed: the run that wrote it did not finish it
            os.unlink(os.path.join(self.local, rel))
        got = 0
        self.sent = {}
        for rel, info in sorted(remote.items()):
            tag = str(info.get("ETag") or info.get("etag") or info.get("size"))
            st = here.get(rel)
            rec = index.get(rel)
            if not (st and rec and rec[0] == st.st_size and rec[1] == st.st_mtime_ns and rec[2] == tag):
                download(join(self.url, rel), os.path.join(self.local, rel))
                got += 1
                if is_marker(rel) and rel.endswith(".json") and self._relocate(os.path.join(self.local, rel)):
                    tag = "relocated"  # rewritten here: committed again by the next sweep
            st = os.stat(os.path.join(self.local, rel))
            self.sent[rel] = [st.st_size, st.st_mtime_ns, tag]
        self._save_index()
        return got

    def _relocate(self, path: str) -> bool:
        """Markers name their outputs by absolute path: one written on another machine (another staging
        root) names them under its root. Rewrite them to this staging copy, so its shards are reused."""
        name = os.path.basename(self.local.rstrip(os.sep))
        with open(path, encoding="utf-8") as f:
            text = f.read()
        new = re.sub(r'(?<=")/[^"]*?/' + re.escape(name) + r'(?=[/"])', lambda m: self.local.rstrip(os.sep), text)
        if new == text:
            return False
        with open(path, "w", encoding="utf-8") as f:
            f.write(new)
        return True

    def _save_index(self) -> None:
        tmp = f"{self.index_path}.{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(self.sent, f)
        os.replace(tmp, self.index_path)

    def sync(self) -> int:
        """One sweep: outputs first, markers (listed before the outputs) last, then deletions (markers
        first). Returns how many objects were written or deleted."""
        with self._lock:
            fs, _ = filesystem(self.url)
            markers = {r: st for r, st in self._local_files().items() if is_marker(r)}
            files = self._local_files()
            n = 0

            def todo(names, stats):
                return [r for r in names if not (self.sent.get(r) and self.sent[r][0] == stats[r].st_size
                                                 and self.sent[r][1] == stats[r].st_mtime_ns)]

            def put(rel, st):
                src = os.path.join(self.local, rel)
                try:
                    upload(src, join(self.url, rel))
                except FileNotFoundError:
                    if os.path.exists(src):
                        raise
                    return 0  # deleted locally while we swept
                try:
                    tag = fs.info(filesystem(join(self.url, rel))[1]).get("ETag") or str(st.st_size)
                except Exception:  # noqa: BLE001
                    tag = str(st.st_size)
                self.sent[rel] = [st.st_size, st.st_mtime_ns, str(tag)]
                return 1

            # outputs in parallel (each a multipart upload when big); only then, the markers
            outputs = todo(sorted(r for r in files if not is_marker(r)), files)
            n += sum(_parallel([lambda r=r: put(r, files[r]) for r in outputs]))
            n += sum(_parallel([lambda r=r: put(r, markers[r]) for r in todo(sorted(markers), markers)]))
            gone = [r for r in self.sent if r not in files and r not in markers]
            for rel in sorted(gone, key=lambda r: (not is_marker(r), r)):
                remove(join(self.url, rel))
                del self.sent[rel]
                n += 1
            if n:
                self._save_index()
            return n

    def start(self) -> None:
        def loop():
            while not self._stop.wait(_setting("GRISTMILL_SYNC_S", SYNC_S)):
                try:
                    self.sync()
                except BaseException as e:  # noqa: BLE001 - surfaced by stop()
                    self.error = e
                    return
        # in a copy of this context: the run's storage options (fs.active) go with it
        self._thread = threading.Thread(target=contextvars.copy_context().run, args=(loop,), name="gristmill-mirror",
                                        daemon=True)
        self._thread.start()

    def stop(self, final: bool = True) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if final:
            self.sync()
        if self.error is not None:
            raise StorageError(f"work dir {redact(self.url)}: upload failed: {self.error}")


def _parallel(calls: list, threads: int = 8) -> list:
    """Run the calls on a few threads (object-store requests wait on the network, not the CPU); the first
    error is raised after every call ended."""
    if len(calls) <= 1:
        return [c() for c in calls]
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(min(threads, len(calls))) as pool:
        futures = [pool.submit(contextvars.copy_context().run, c) for c in calls]  # the run's storage options
    return [f.result() for f in futures]


class RemoteLockBusy(RuntimeError):
    pass


class RemoteLock:
    """One run per work dir URL: ``URL/.lock`` created only if absent (a conditional write), holding an
    owner id and a lease renewed every third of ``LEASE_S``; a lease not renewed in time (a killed run) is
    taken over."""

    def __init__(self, url: str, lease_s: float | None = None):
        self.url = join(url.rstrip("/"), LOCK_NAME)
        self.lease_s = lease_s or _setting("GRISTMILL_LOCK_LEASE_S", LEASE_S)
        self.owner = uuid.uuid4().hex
        self.lost = False  # another run took the lock over: this one stops renewing it
        self._stop = threading.Event()
        self._thread = None

    def _body(self) -> bytes:
        return json.dumps({"owner": self.owner, "pid": os.getpid(), "host": socket.gethostname(),
                           "expires": time.time() + self.lease_s}).encode()

    def acquire(self) -> None:
        for _ in range(3):
            try:
                write_bytes(self.url, self._body(), exclusive=True)
                break
            except FileExistsError:
                try:
                    held = json.loads(read_bytes(self.url) or b"{}")
                except FileNotFoundError:
                    continue  # released meanwhile
                except ValueError:
                    held = {}
                if held.get("expires", 0) > time.time():
                    raise RemoteLockBusy(f"work dir {redact(self.url[:-len(LOCK_NAME) - 1])} is in use by another run "
                                      f"(pid {held.get('pid')} on {held.get('host')}, lease renewed until "
                                      f"{time.strftime('%H:%M:%S', time.localtime(held['expires']))}); wait for "
                                      "it, stop it, or use another --work-dir") from None
                remove(self.url)  # an expired lease: its run was killed
        else:
            raise StorageError(f"work dir lock {redact(self.url)}: could not be taken")

        def renew():
            while not self._stop.wait(self.lease_s / 3):
                try:
                    held = json.loads(read_bytes(self.url) or b"{}")
                    if held.get("owner") != self.owner:  # taken over (this run stalled past its lease)
                        self.lost = True
                        return
                    write_bytes(self.url, self._body())
                except Exception:  # noqa: BLE001 - retried at the next tick
                    pass
        self._thread = threading.Thread(target=contextvars.copy_context().run, args=(renew,), name="gristmill-lease",
                                        daemon=True)
        self._thread.start()

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        try:
            held = json.loads(read_bytes(self.url) or b"{}")
            if held.get("owner") == self.owner:
                remove(self.url)
        except (FileNotFoundError, ValueError):
            pass

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc):
        self.release()


# -- exports ------------------------------------------------------------------------------------------------

def manifest_url(export_url: str, directory: bool) -> str:
    """The commit manifest of an export: inside a directory export, beside a file export."""
    u = export_url.rstrip("/")
    if directory:
        return join(u, MANIFEST_SUFFIX.lstrip("."))
    return join(u.rsplit("/", 1)[0], f".{basename(u)}{MANIFEST_SUFFIX}")


def read_manifest(export_url: str, directory: bool) -> dict | None:
    try:
        return json.loads(read_bytes(manifest_url(export_url, directory)))
    except (FileNotFoundError, ValueError):
        return None


def intent_url(export_url: str, directory: bool) -> str:
    """The intent record of an export commit under way: hidden, inside a directory export, beside a file one."""
    u = export_url.rstrip("/")
    if directory:
        return join(u, INTENT_SUFFIX)
    return join(u.rsplit("/", 1)[0], f".{basename(u)}{INTENT_SUFFIX}")


def read_intent(export_url: str, directory: bool) -> dict | None:
    try:
        got = json.loads(read_bytes(intent_url(export_url, directory)))
        return got if isinstance(got, dict) else None
    except (FileNotFoundError, ValueError):
        return None


def fault(point: str) -> None:
    """Tests: SIGKILL this process at ``point`` when ``GRISTMILL_FAULT`` names it (a kill inside a commit)."""
    if os.environ.get(FAULT_ENV) == point:
        import signal
        os.kill(os.getpid(), signal.SIGKILL)


def _present(export_url: str) -> list[str]:
    """Names (relative to the directory) of the files in a directory export, hidden ones aside."""
    u = export_url.rstrip("/")
    try:
        return [x[len(u):].lstrip("/") for x in find(u) if not basename(x).startswith(".")
                and x != manifest_url(u, True)]
    except FileNotFoundError:
        return []


def open_commit(export_url: str, directory: bool, names, run: str | None = None, whole: bool = False) -> list[str]:
    """Before the first final key of an export is written: record the intent (the names about to be written,
    the previous export's names, the run) and remove the old manifest. Until :func:`close_commit`, every name
    in the intent counts as this export's (``whole``, a directory output whose names are not known yet: every
    file in it), so the rerun of a run killed in between overwrites or deletes them instead of refusing them.
    Returns the previous exports' names (the old manifest's, a killed commit's intent's) that this one lacks:
    delete them before the manifest is written."""
    old = read_manifest(export_url, directory) or {}
    prev = read_intent(export_url, directory) or {}
    before = {e["name"] for e in old.get("files", [])} | {str(n) for n in prev.get("names", [])}
    if prev.get("whole") and directory:
        before |= set(_present(export_url))
    names = set(names)
    body = {"export": redact(export_url), "names": sorted(before | names), "whole": bool(whole or prev.get("whole")),
            "run": {"work_dir": redact(run) if run else None, "host": socket.gethostname(), "pid": os.getpid()},
            "started": time.time()}
    write_bytes(intent_url(export_url, directory), json.dumps(body, indent=1).encode())
    remove(manifest_url(export_url, directory))  # uncommitted from here until close_commit
    return sorted(before - names)


def close_commit(export_url: str, directory: bool, body: dict) -> None:
    """The export's files are in place: its manifest written, then the intent removed."""
    fault("export-commit")
    write_bytes(manifest_url(export_url, directory), json.dumps(body, indent=1).encode())
    remove(intent_url(export_url, directory))


def commit_export(files: list[str], local_base: str, export_url: str, directory: bool, log=lambda m: None,
                  extra: dict | None = None, run: str | None = None) -> list[str]:
    """Upload an export written under ``local_base`` (a directory holding it) to ``export_url``'s
    directory and commit it: the intent recorded and the old manifest removed (:func:`open_commit`), files uploaded, stale files of the previous export
    deleted, the manifest (names, sizes, SHA-256) written last. Returns the URLs written."""
    base_url = export_url.rstrip("/") if directory else export_url.rsplit("/", 1)[0]
    old = read_manifest(export_url, directory)
    rels = sorted(os.path.relpath(f, local_base).replace(os.sep, "/") for f in files)
    urls = [join(base_url, rel) for rel in rels]

    def digest(rel):
        h = hashlib.sha256()
        with open(os.path.join(local_base, rel), "rb") as f:
            while b := f.read(8 << 20):
                h.update(b)
        return {"name": rel, "size": os.path.getsize(os.path.join(local_base, rel)), "sha256": h.hexdigest()}
    entries = _parallel([lambda r=r: digest(r) for r in rels])  # in order of rels
    if old and old.get("files") == entries and all(exists(u) for u in urls):
        log(f"export {redact(export_url)} unchanged (its manifest lists these bytes): nothing uploaded")
        remove(intent_url(export_url, directory))  # a commit killed after its manifest
        return urls
    stale = open_commit(export_url, directory, rels, run)
    _parallel([lambda r=r: upload(os.path.join(local_base, r), join(base_url, r)) for r in rels])
    _parallel([lambda n=n: remove(join(base_url, n)) for n in stale])
    body = {"export": redact(export_url), "files": entries, "committed": time.time(), **(extra or {})}
    close_commit(export_url, directory, body)
    log(f"committed the export to {redact(export_url)} ({len(entries)} file(s), manifest written last)")
    return urls


def foreign_files(export_url: str, directory: bool, names: list[str]) -> list[str]:
    """Objects in the export's name space that neither a gristmill manifest nor the intent of a commit under
    way (a run killed before its manifest: :func:`open_commit`) claims (refused before any work, as foreign
    files beside a local export are)."""
    fs, p = filesystem(export_url)
    base_url = export_url.rstrip("/") if directory else export_url.rsplit("/", 1)[0]
    if directory:
        present = [join(base_url, n) for n in _present(export_url)]
    else:
        present = [u for u in (join(base_url, basename(n)) for n in names) if fs.exists(filesystem(u)[1])]
    intent = read_intent(export_url, directory) or {}
    if directory and intent.get("whole"):
        return []
    claimed = {e["name"] for e in (read_manifest(export_url, directory) or {}).get("files", [])}
    claimed |= {str(n) for n in intent.get("names", [])}
    return [u for u in present if u[len(base_url):].lstrip("/") not in claimed]


__all__ = ["Mirror", "RemoteLock", "RemoteLockBusy", "close_commit", "commit_export", "foreign_files", "intent_url",
           "is_url", "manifest_url", "open_commit", "read_intent", "read_manifest", "staging_dir"]
