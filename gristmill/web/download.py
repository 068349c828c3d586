"""Parallel, resumable downloads of URL lists and Common Crawl path lists.

A file is only ever complete under its final name: bytes go to ``<name>.part`` (with ``<name>.part.json``
holding the server's validators), and the rename happens after the size (Content-Length / Content-Range)
and any checksum (a checksum file, an RFC 9530/3230 digest header, or an MD5 ETag when asked) matched.
A rerun therefore skips finished files, resumes a ``.part`` with a ``Range`` request guarded by
``If-Range`` (so a changed remote file restarts instead of splicing two versions), and restarts when the
server ignores ranges. Connection drops, timeouts, short bodies, 408/425/429 and 5xx are retried with
exponential backoff (``Retry-After`` honoured); other HTTP errors fail the file at once with a clear message.
Standard library only (urllib), one thread per concurrent download.

Under the service's trust policy (``core/trust.py``) every fetch goes through :func:`open_url`: http(s)
only (``file://`` refused), and unless ``--allow-private-urls`` no connection to a loopback, link-local,
private or reserved address. The address is checked where the socket connects (the one the connection
uses, so a DNS answer that changes between a check and the connect, DNS rebinding, gains nothing), every
redirect hop is checked again, and environment proxies are not used (a proxy would fetch what the check
refused). The CLI's open policy fetches as before.
"""
from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import http.client
import ipaddress
import json
import os
import random
import re
import socket
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from email.utils import parsedate_to_datetime
from typing import Callable, Iterable
from urllib.parse import unquote, urlsplit


from ..core import trust

from .download_cli import CC_BASE_URL  # noqa: E402
RETRY_STATUS = {408, 425, 429, 500, 502, 503, 504}
CHUNK = 1 << 20
USER_AGENT = "gristmill-download/0.1 (+https://pypi.org/project/gristmill)"


class DownloadError(Exception):
    """A download failed for good (after retries, or an error not worth retrying)."""


class _Retry(Exception):
    def __init__(self, msg: str, wait: float | None = None):
        super().__init__(msg)
        self.wait = wait


@dataclass
class FileResult:
    url: str
    path: str
    status: str  # downloaded | skipped | failed
    bytes: int = 0  # bytes received in this run
    size: int | None = None  # final file size
    attempts: int = 0
    resumed: bool = False
    seconds: float = 0.0
    error: str | None = None


@dataclass
class DownloadReport:
    files: list[FileResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def failed(self) -> list[FileResult]:
        return [f for f in self.files if f.status == "failed"]

    def counts(self) -> dict[str, int]:
        out = {"downloaded": 0, "skipped": 0, "failed": 0}
        for f in self.files:
            out[f.status] += 1
        return out

    def to_dict(self) -> dict:
        return {"counts": self.counts(), "bytes": sum(f.bytes for f in self.files),
                "seconds": round(self.seconds, 3), "files": [asdict(f) for f in self.files]}


# -- inputs ---------------------------------------------------------------------------------------

def read_list(path: str, what: str = "list") -> list[str]:
    """Non-empty, non-comment lines of a (possibly gzipped) list file; DownloadError when it is unreadable."""
    opener = gzip.open if path.endswith(".gz") else open
    try:
        trust.check_read(path, f"{what} file")
        with opener(path, "rt", encoding="utf-8") as f:
            return [ln.strip() for ln in f if ln.strip() and not ln.lstrip().startswith("#")]
    except trust.Refused as e:
        raise DownloadError(str(e)) from None
    except FileNotFoundError:
        raise DownloadError(f"{what} file {path!r} not found") from None
    except (OSError, EOFError, UnicodeDecodeError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else f"{type(e).__name__}: {e}"
        raise DownloadError(f"cannot read {what} file {path!r}: {why}") from None


SCHEMES = ("http", "https")
_LABEL = re.compile(r"^(?!-)[A-Za-z0-9_-]{1,63}(?<!-)$")


def url_problem(url: str, allow_file_urls: bool = False) -> str | None:
    """Why ``url`` cannot be downloaded (bad scheme, host or port), or None. ``file://`` URLs copy local
    files, so they need ``allow_file_urls``."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as e:
        return f"invalid URL ({e}): fix or remove it in the list"
    scheme = parts.scheme.lower()
    if scheme == "file":
        if trust.current().roots is not None:
            return "file:// URLs copy local files: not allowed on this server"
        if not allow_file_urls:
            return "file:// URLs copy local files: allow them with --allow-file-urls (recipe: " \
                   "download.allow_file_urls: true)"
        return None
    if scheme not in SCHEMES:
        return f"unsupported scheme {scheme!r}: only http and https URLs are downloaded"
    host = parts.hostname or ""
    if not host or port == 0:
        return "invalid URL (no host, or port 0): fix or remove it in the list"
    why = _private_literal(url, host)
    if why:
        return why
    if ":" in host:  # an IPv6 literal
        return None
    try:
        ascii_host = host.encode("idna").decode("ascii")
    except UnicodeError:
        ascii_host = ""
    if not ascii_host or not all(_LABEL.match(lb) for lb in ascii_host.rstrip(".").split(".")):
        return f"invalid host name {host!r}: fix or remove it in the list"
    return None


def _private_literal(url: str, host: str) -> str | None:
    """Under a policy without private URLs, why a URL whose host is an address literal or ``localhost``
    is refused (known before any fetch, so a recipe is refused when it is validated; names are checked
    when they are fetched, see ``open_url``)."""
    pol = trust.current()
    if pol.allow_private_urls:
        return None
    try:
        ipaddress.ip_address(host.strip("[]").split("%")[0])
    except ValueError:
        if host.lower().rstrip(".") != "localhost" and not host.lower().endswith(".localhost"):
            return None
    try:
        trust.check_url(url, "url", pol)
    except trust.Refused as e:
        return str(e).removeprefix("url: ")
    return None


def _relative_name(e: str, base_url: str | None) -> tuple[str, str]:
    """(url, path under out_dir) for one list entry."""
    if re.match(r"^[a-z][a-z0-9+.-]*://", e, re.I):
        parts = urlsplit(e)
        rel = parts.netloc + "/" + unquote(parts.path).lstrip("/")
        if rel.endswith("/"):
            rel += "index.html"
        if parts.query:
            rel += "_" + hashlib.sha1(parts.query.encode()).hexdigest()[:10]
        return e, rel
    if not base_url:
        raise DownloadError(f"{e!r} is a relative path: give --base-url (for Common Crawl paths, "
                            f"{CC_BASE_URL})")
    return base_url.rstrip("/") + "/" + e.lstrip("/"), e.lstrip("/")


def _file_not_dir(rels: list[tuple[str, ...]]) -> set[tuple[str, ...]]:
    """The names that are also a directory of another name (``a`` beside ``a/b``): a file cannot be both."""
    dirs = {r[:i] for r in rels for i in range(1, len(r))}
    return {r for r in rels if r in dirs}


def plan(entries: Iterable[str], out_dir: str, base_url: str | None = None,
         allow_file_urls: bool = False) -> list[tuple[str, str]]:
    """(url, destination) pairs. Relative entries (Common Crawl paths) are joined to ``base_url`` and keep
    their path under ``out_dir``; absolute URLs are stored as ``out_dir/<host>/<path>``, and a URL whose
    name is also another URL's directory (``/a`` beside ``/a/b``) as ``<path>/index.html``. Bad URLs and
    two URLs with one name are refused (DownloadError naming the first, before anything is fetched)."""
    urls, rels, bad = [], [], []
    for e in entries:
        url, rel = _relative_name(e, base_url)
        why = url_problem(url, allow_file_urls)
        if why:
            bad.append(f"{url!r}: {why}")
            continue
        urls.append(url)
        rels.append(tuple(p for p in rel.split("/") if p not in ("", ".", "..")))
    if bad:
        more = f" (and {len(bad) - 1} more bad entries)" if len(bad) > 1 else ""
        raise DownloadError(f"cannot download {bad[0]}{more}")
    clash = _file_not_dir(rels)
    pairs, seen = [], {}
    for url, rel in zip(urls, rels):
        dest = os.path.join(out_dir, *rel, *(["index.html"] if rel in clash else []))
        if dest in seen:
            if seen[dest] != url:
                raise DownloadError(f"{url} and {seen[dest]} would both be saved as {dest}")
            continue
        seen[dest] = url
        pairs.append((url, dest))
    return pairs


def load_checksums(path: str) -> dict[str, str]:
    """``sha256sum``/``md5sum`` style lines (``<hex>  <name>``) → {name or basename: hex}."""
    out = {}
    for ln in read_list(path, "checksums"):
        parts = ln.split()
        if len(parts) >= 2 and re.fullmatch(r"[0-9a-fA-F]{32}|[0-9a-fA-F]{40}|[0-9a-fA-F]{64}|[0-9a-fA-F]{128}",
                                            parts[0]):
            name = parts[-1].lstrip("*")
            out[name] = parts[0].lower()
            out.setdefault(os.path.basename(name), parts[0].lower())
    return out


_ALGOS = {32: "md5", 40: "sha1", 64: "sha256", 128: "sha512"}


def file_digest(path: str, algo: str) -> str:
    h = hashlib.new(algo)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def _header_digests(headers) -> dict[str, str]:
    """Digests the server announced for the whole representation: {hashlib name: hex}."""
    out = {}
    for name in ("Repr-Digest", "Digest"):
        for part in (headers.get(name) or "").split(","):
            m = re.match(r"\s*([A-Za-z0-9-]+)\s*=\s*:?([A-Za-z0-9+/=]+):?\s*$", part)
            if not m:
                continue
            algo = {"sha-256": "sha256", "sha-512": "sha512", "md5": "md5", "sha": "sha1"}.get(m.group(1).lower())
            if algo:
                try:
                    out[algo] = base64.b64decode(m.group(2)).hex()
                except ValueError:
                    pass
    return out


# -- the trust policy's URL guard -----------------------------------------------------------------------

def _ip_url(ip: str, port) -> str:
    return f"http://[{ip}]:{port}/" if ":" in ip else f"http://{ip}:{port}/"


def _guarded_create_connection(policy: trust.Policy):
    """``socket.create_connection`` that resolves the host once, checks every address against ``policy``
    (``trust.Refused`` naming the host and address) and connects to a checked address itself: nothing is
    resolved again between the check and the connect."""
    def create(address, timeout=socket._GLOBAL_DEFAULT_TIMEOUT, source_address=None, *args, **kw):
        host, port = address[0], address[1]
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as e:
            raise OSError(f"cannot resolve {host!r}: {e}") from None
        addrs = []
        for info in infos:
            ip = info[4][0].split("%")[0]
            trust.check_url(_ip_url(ip, port), f"connection to {host}:{port}", policy)
            if ip not in addrs:
                addrs.append(ip)
        err: OSError | None = None
        for ip in addrs:
            try:
                return socket.create_connection((ip, port), timeout, source_address)
            except OSError as e:
                err = e
        raise err or OSError(f"cannot connect to {host!r}: no address")
    return create


class _GuardedHTTPConnection(http.client.HTTPConnection):
    def __init__(self, *args, policy: trust.Policy, **kw):
        super().__init__(*args, **kw)
        self._create_connection = _guarded_create_connection(policy)


class _GuardedHTTPSConnection(http.client.HTTPSConnection):  # TLS still verifies the host name
    def __init__(self, *args, policy: trust.Policy, **kw):
        super().__init__(*args, **kw)
        self._create_connection = _guarded_create_connection(policy)


class _GuardedHTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, policy: trust.Policy):
        super().__init__()
        self.policy = policy

    def http_open(self, req):
        return self.do_open(functools.partial(_GuardedHTTPConnection, policy=self.policy), req)


class _GuardedHTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, policy: trust.Policy):
        super().__init__()
        self.policy = policy

    def https_open(self, req):
        return self.do_open(functools.partial(_GuardedHTTPSConnection, policy=self.policy), req,
                            context=self._context)


class _GuardedRedirectHandler(urllib.request.HTTPRedirectHandler):
    """Each redirect hop is checked like the first URL (scheme and host) before it is followed."""

    def __init__(self, policy: trust.Policy):
        self.policy = policy

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        try:
            trust.check_url(newurl, f"redirect from {req.full_url[:200]}", self.policy)
        except trust.Refused:
            fp.close()
            raise
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _guarded_opener(policy: trust.Policy) -> urllib.request.OpenerDirector:
    """http(s) only (no file, ftp or data handlers), no proxies, connections and redirects checked."""
    op = urllib.request.OpenerDirector()
    for h in (urllib.request.UnknownHandler(), urllib.request.HTTPDefaultErrorHandler(),
              urllib.request.HTTPErrorProcessor(), _GuardedRedirectHandler(policy),
              _GuardedHTTPHandler(policy), _GuardedHTTPSHandler(policy)):
        op.add_handler(h)
    return op


def open_url(req, timeout: float, policy: trust.Policy | None = None):
    """``urllib.request.urlopen(req, timeout=timeout)`` under the trust policy (``policy``, else the one
    in force): the open policy opens anything as urllib does; a restricted one allows http(s) to the
    addresses it allows, checked at the connect and at every redirect. ``trust.Refused`` (a
    PermissionError, never wrapped in a URLError) when it does not; urllib's errors otherwise."""
    pol = policy or trust.current()
    if pol.roots is None and pol.allow_private_urls:
        return urllib.request.urlopen(req, timeout=timeout)
    url = req.full_url if isinstance(req, urllib.request.Request) else str(req)
    trust.check_url(url, "url", pol)
    try:
        return _guarded_opener(pol).open(req, timeout=timeout)
    except urllib.error.URLError as e:
        if isinstance(getattr(e, "reason", None), trust.Refused):
            raise e.reason from None
        raise


# -- one file -------------------------------------------------------------------------------------

class _Downloader:
    def __init__(self, retries: int, backoff: float, timeout: float, checksums: dict[str, str],
                 etag_md5: bool, headers: dict[str, str] | None, progress: Callable | None,
                 policy: trust.Policy | None = None):
        self.policy = policy or trust.current()  # read here: the fetches run in threads
        self.retries, self.backoff, self.timeout = retries, backoff, timeout
        self.checksums, self.etag_md5 = checksums, etag_md5
        self.headers = {"User-Agent": USER_AGENT, **(headers or {})}
        self.progress = progress

    def settings(self) -> dict:
        """The constructor's arguments but ``progress`` (what a :class:`DownloadTask` carries to a worker)."""
        return {"retries": self.retries, "backoff": self.backoff, "timeout": self.timeout,
                "checksums": self.checksums, "etag_md5": self.etag_md5, "headers": self.headers,
                "policy": self.policy}

    def expected_checksum(self, url: str, dest: str) -> str | None:
        path = urlsplit(url).path.lstrip("/")
        for key in (path, unquote(path), os.path.basename(dest)):
            if key in self.checksums:
                return self.checksums[key]
        for name, hexd in self.checksums.items():
            if path.endswith("/" + name):
                return hexd
        return None

    def fetch(self, url: str, dest: str) -> FileResult:
        t0 = time.monotonic()
        res = FileResult(url=url, path=dest, status="downloaded")
        try:
            trust.check_write(dest, "download destination", self.policy)  # a link in out_dir pointing out
        except trust.Refused as e:
            res.status, res.error = "failed", str(e)
            return res
        if os.path.isfile(dest):
            res.status, res.size = "skipped", os.path.getsize(dest)
            return res
        try:
            last_err = self._attempts(url, dest, res)
        except Exception as e:  # noqa: BLE001 - one file's surprise must not stop the others
            last_err = f"{type(e).__name__}: {e}"
        if last_err is None:
            res.seconds = time.monotonic() - t0
            return res
        res.status, res.error, res.seconds = "failed", last_err, time.monotonic() - t0
        return res

    def _attempts(self, url: str, dest: str, res: FileResult) -> str | None:
        """Try until the file is complete (None) or retries run out (the last error)."""
        _make_dirs(os.path.dirname(dest) or ".")
        part, meta_path = dest + ".part", dest + ".part.json"
        last_err = None
        for attempt in range(self.retries + 1):
            res.attempts = attempt + 1
            try:
                self._attempt(url, dest, part, meta_path, res)
                res.size = os.path.getsize(dest)
                return None
            except _Retry as e:
                last_err = str(e)
                if attempt < self.retries:
                    wait = e.wait if e.wait is not None else self.backoff * (2 ** attempt)
                    time.sleep(min(wait * (0.5 + random.random() / 2) if e.wait is None else wait, 300))
            except DownloadError as e:
                return str(e)
        return last_err

    def _attempt(self, url, dest, part, meta_path, res: FileResult):
        have = os.path.getsize(part) if os.path.exists(part) else 0
        meta = {}
        if have and os.path.exists(meta_path):
            try:
                with open(meta_path) as f:
                    meta = json.load(f)
            except (OSError, ValueError):
                meta = {}
        validator = meta.get("etag") if meta.get("etag") and not meta["etag"].startswith("W/") \
            else meta.get("last_modified")
        if have and not validator:  # cannot prove the remote file is unchanged: start again
            have = 0
        hdrs = dict(self.headers)
        if have:
            hdrs["Range"] = f"bytes={have}-"
            hdrs["If-Range"] = validator
        req = urllib.request.Request(url, headers=hdrs)
        try:
            resp = open_url(req, self.timeout, self.policy)
        except trust.Refused as e:  # the policy's answer: not worth a retry
            raise DownloadError(str(e)) from None
        except urllib.error.HTTPError as e:
            e.close()
            if e.code == 416 and have and meta.get("total") == have:
                self._finish(url, dest, part, meta_path, meta, res)
                return
            if e.code == 416:
                _remove(part, meta_path)
                raise _Retry(f"HTTP 416 for a resume at byte {have}; restarting") from None
            if e.code in RETRY_STATUS:
                raise _Retry(f"HTTP {e.code} {e.reason}", _retry_after(e.headers)) from None
            raise DownloadError(f"HTTP {e.code} {e.reason} for {url}") from None
        except (urllib.error.URLError, socket.timeout, ConnectionError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise _Retry(f"connection failed: {reason}") from None
        with resp:
            status = resp.status
            length = resp.headers.get("Content-Length")
            length = int(length) if length and length.isdigit() else None
            if status == 206:
                m = re.match(r"bytes (\d+)-(\d+)/(\d+|\*)", resp.headers.get("Content-Range") or "")
                if not m or int(m.group(1)) != have:
                    _remove(part, meta_path)
                    raise _Retry(f"server answered a resume at {have} with Content-Range "
                                 f"{resp.headers.get('Content-Range')!r}; restarting")
                total = int(m.group(3)) if m.group(3) != "*" else None
                mode = "ab"
                res.resumed = True
            else:  # 200: the whole file (server ignored the range, or the file changed)
                have, total, mode = 0, length, "wb"
            meta = {"url": url, "etag": resp.headers.get("ETag"), "last_modified": resp.headers.get("Last-Modified"),
                    "total": total, "digests": _header_digests(resp.headers)}
            with _local(meta_path), open(meta_path, "w") as f:
                json.dump(meta, f)
            got = 0
            with _local(part), open(part, mode) as out:
                while True:
                    try:
                        chunk = resp.read(CHUNK)
                    except (socket.timeout, ConnectionError, OSError, _http_incomplete()) as e:
                        raise _Retry(f"connection lost after {have + got} bytes: {type(e).__name__}: {e}") from None
                    if not chunk:
                        break
                    out.write(chunk)
                    got += len(chunk)
                    res.bytes += len(chunk)
                    if self.progress:
                        self.progress(url, len(chunk))
            if total is not None and have + got < total:
                raise _Retry(f"connection closed after {have + got} of {total} bytes")
            if total is not None and have + got > total:
                _remove(part, meta_path)
                raise _Retry(f"received {have + got} bytes, more than the announced {total}; restarting")
        self._finish(url, dest, part, meta_path, meta, res)

    def _finish(self, url, dest, part, meta_path, meta, res):
        size = os.path.getsize(part)
        if meta.get("total") is not None and size != meta["total"]:
            _remove(part, meta_path)
            raise _Retry(f"size {size} != expected {meta['total']}; restarting")
        checks = dict(meta.get("digests") or {})
        want = self.expected_checksum(url, dest)
        if want:
            checks[_ALGOS.get(len(want), "sha256")] = want
        etag = (meta.get("etag") or "").strip('"')
        if self.etag_md5 and re.fullmatch(r"[0-9a-f]{32}", etag or ""):
            checks.setdefault("md5", etag)
        for algo, hexd in checks.items():
            got = file_digest(part, algo)
            if got != hexd.lower():
                _remove(part, meta_path)
                raise _Retry(f"{algo} checksum mismatch (got {got}, expected {hexd}); downloading again")
        os.replace(part, dest)
        try:
            os.remove(meta_path)
        except FileNotFoundError:
            pass


class _local:
    """Turn an OSError on a local file (disk full, no permission) into a DownloadError naming it: not
    worth retrying, and not a connection problem."""

    def __init__(self, path: str):
        self.path = path

    def __enter__(self):
        return self

    def __exit__(self, typ, e, tb):
        if isinstance(e, OSError) and not isinstance(e, (socket.timeout, ConnectionError)):
            raise DownloadError(f"cannot write {self.path}: {e.strerror or e}") from None
        return False


def _make_dirs(path: str) -> None:
    """``os.makedirs``, with a DownloadError naming a file that is in the way of a directory."""
    try:
        os.makedirs(path, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise DownloadError(f"cannot create directory {path}: a file of that name is in the way (from an "
                            f"earlier download of a URL list with other names?)") from None
    except OSError as e:
        raise DownloadError(f"cannot create directory {path}: {e.strerror or e}") from None


def _http_incomplete():
    import http.client
    return http.client.HTTPException


def _retry_after(headers) -> float | None:
    v = (headers or {}).get("Retry-After") if headers is not None else None
    if not v:
        return None
    if v.strip().isdigit():
        return float(v.strip())
    try:
        return max(0.0, parsedate_to_datetime(v).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _remove(*paths):
    for p in paths:
        try:
            os.remove(p)
        except FileNotFoundError:
            pass


# -- API -----------------------------------------------------------------------------------------

def planned(urls_or_paths_file: str | list[str], out_dir: str, base_url: str | None = None,
            limit: int | None = None, allow_file_urls: bool = False) -> list[tuple[str, str]]:
    """The (url, destination) pairs of a list file or list of URLs (see ``plan``); for a ``*paths.gz`` file
    of relative paths the base URL defaults to Common Crawl's."""
    if isinstance(urls_or_paths_file, str):
        entries = read_list(urls_or_paths_file)
        if base_url is None and os.path.basename(urls_or_paths_file).endswith("paths.gz") and entries \
                and not re.match(r"^[a-z]+://", entries[0]):
            base_url = CC_BASE_URL
    else:
        entries = list(urls_or_paths_file)
    if limit is not None:
        entries = entries[:limit]
    return plan(entries, out_dir, base_url, allow_file_urls)


def download(urls_or_paths_file: str | list[str], out_dir: str, base_url: str | None = None, workers: int = 8,
             retries: int = 5, backoff: float = 1.0, timeout: float = 60.0, checksums: str | dict | None = None,
             etag_md5: bool = False, limit: int | None = None, headers: dict[str, str] | None = None,
             progress: Callable[[str, int], None] | None = None, report_path: str | None = None,
             allow_file_urls: bool = False, executor=None) -> DownloadReport:
    """Download every URL (or ``base_url`` + path) listed in a file (``.gz`` allowed, e.g. Common Crawl's
    ``warc.paths.gz``) or given as a list into ``out_dir``. Returns a report; failed files are listed in it
    (never raised) so one bad URL does not stop the rest. ``limit`` takes the first N entries only.
    The report is also written to ``report_path`` (default ``out_dir/download-report.json``).
    Before anything is fetched, a missing list, a malformed URL, a scheme other than http(s) (``file://``
    only with ``allow_file_urls``) or two URLs with one local name raise DownloadError.
    ``executor`` (``engine.executor.make_executor``): each file is a :class:`DownloadTask` on its workers
    (on Ray, ``out_dir`` must be storage every node sees) instead of one of ``workers`` threads here; the
    files, the report and its order are the same."""
    t0 = time.monotonic()
    pairs = planned(urls_or_paths_file, out_dir, base_url, limit, allow_file_urls)
    sums = checksums if isinstance(checksums, dict) else (load_checksums(checksums) if checksums else {})
    try:
        trust.check_write(out_dir, "download.out_dir")
    except trust.Refused as e:
        raise DownloadError(str(e)) from None
    d = _Downloader(retries, backoff, timeout, sums, etag_md5, headers, progress, trust.current())
    _make_dirs(out_dir)
    if executor is not None:
        tasks = [DownloadTask(i, url, dest, d.settings()) for i, (url, dest) in enumerate(pairs)]
        got = {rec["index"]: FileResult(**rec["result"]) for rec in executor.run(tasks, lambda rows, nb: None)}
        results = [got[i] for i in range(len(pairs))]
    else:
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            results = list(pool.map(lambda p: d.fetch(*p), pairs))
    report = DownloadReport(files=results, seconds=time.monotonic() - t0)
    path = report_path or os.path.join(out_dir, "download-report.json")
    try:
        trust.check_write(path, "download report")
    except trust.Refused as e:
        raise DownloadError(str(e)) from None
    tmp = path + ".tmp"
    with _local(path):
        with open(tmp, "w") as f:
            json.dump(report.to_dict(), f, indent=1)
        os.replace(tmp, path)
    return report


@dataclass
class DownloadTask:
    """One file of a download as a task on an executor (the task kind ``download``, beside shard, resolve and
    tokenize tasks): ``run`` fetches ``url`` to ``dest`` with the downloader's settings (retries, checksums,
    headers, the trust policy) and returns its :class:`FileResult` as a dict. Resumable and idempotent like
    every task: a complete file is skipped, a partial one resumed."""
    index: int
    url: str
    dest: str
    settings: dict

    @property
    def stage_dir(self) -> str:
        return os.path.dirname(self.dest) or "."

    def run(self, progress=None) -> dict:
        d = _Downloader(**self.settings, progress=None)
        return {"index": self.index, "result": asdict(d.fetch(self.url, self.dest))}


# -- recipe stage ----------------------------------------------------------------------------------

from .download_stage import DownloadStage  # noqa: E402 - the recipe's section, apart (light to import)


def run_download_stage(stage: DownloadStage, log: Callable[[str], None], executor=None) -> bool:
    """Run a recipe's download section (each file a :class:`DownloadTask` on ``executor`` when given, else on
    threads here); False when files failed and the run must stop."""
    params = stage.model_dump(exclude={"on_failure"})
    try:
        report = download(params.pop("urls"), params.pop("out_dir"), executor=executor, **params)
    except DownloadError as e:
        log(f"download: error: {e}")
        return False
    c = report.counts()
    log(f"download: {c['downloaded']} downloaded, {c['skipped']} already complete, {c['failed']} failed "
        f"({report.seconds:.1f}s)")
    for r in report.failed:
        log(f"download failed: {r.url}: {r.error}")
    return not (c["failed"] and stage.on_failure == "stop")


# -- CLI -----------------------------------------------------------------------------------------

from .download_cli import add_download_command  # noqa: E402 - `gristmill download`'s parser


def run_download_command(args) -> int:
    def say(r: FileResult):
        if not args.quiet:
            extra = f" ({r.error})" if r.error else (" (resumed)" if r.resumed else "")
            print(f"{r.status:10s} {r.path}{extra}", file=sys.stderr)
    try:
        report = download(args.list, args.out_dir, base_url=args.base_url, workers=args.workers,
                          retries=args.retries, backoff=args.backoff, timeout=args.timeout,
                          checksums=args.checksums, etag_md5=args.etag_md5, limit=args.limit,
                          report_path=args.report, allow_file_urls=args.allow_file_urls)
    except DownloadError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for r in report.files:
        say(r)
    c = report.counts()
    mb = sum(f.bytes for f in report.files) / 1e6
    print(f"{c['downloaded']} downloaded, {c['skipped']} already complete, {c['failed']} failed; "
          f"{mb:.1f} MB in {report.seconds:.1f}s", file=sys.stderr)
    return 1 if c["failed"] else 0


def main(argv=None) -> int:
    import argparse
    ap = argparse.ArgumentParser(prog="gristmill-download")
    sub = ap.add_subparsers(dest="cmd", required=True)
    add_download_command(sub)
    args = ap.parse_args(["download", *(argv if argv is not None else sys.argv[1:])])
    return args.fn(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
