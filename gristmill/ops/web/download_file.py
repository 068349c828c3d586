"""``download_file_mapper``: fetch the files named by a field (a URL or path, or a list of them per row)
into ``save_dir`` and/or their bytes into ``save_field`` (Data-Juicer's op, params and rules).

- ``save_dir``: each URL's file is written there under its URL's base name (written to a temp name, then
  renamed) and the field is rewritten to the local paths; a file already there is reused, not fetched.
- ``save_field``: each file's bytes (a list per row when the field is a list). Without ``resume_download``
  a batch that already has that field is refused; with it, bytes already present are kept.
- Neither set: the bytes go to ``image_bytes``.
- Local paths are read (for ``save_field``) and left as they are. A download that fails (HTTP error,
  timeout, unsupported scheme such as s3://) leaves the URL in place and null bytes, as in Data-Juicer,
  and is logged; the row is kept.
Downloads of a batch run ``max_concurrent`` at a time in threads (standard library HTTP); the output does
not depend on their order. Nothing is downloaded unless a recipe uses this op.

Under the service's trust policy (``core/trust.py``) a local path outside the data roots, a ``save_dir``
file outside them (a link pointing out) or a URL the policy refuses (not http(s); a loopback, private or
link-local address, redirects included, unless ``--allow-private-urls``) makes the row a reject naming
the reason: nothing is read or fetched for it (not the kept-row-with-null-bytes of a failed download)."""
from __future__ import annotations

import logging
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlparse

import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...registry import register
from ...web.download import open_url
from ..base import Mapper, Params

log = logging.getLogger(__name__)
REMOTE = ("http://", "https://", "s3://", "gs://", "hdfs://")


def _fetch(url: str, timeout: float, policy: trust.Policy | None = None) -> bytes:
    if not url.lower().startswith(("http://", "https://")):
        raise ValueError(f"unsupported scheme: {url}")
    with open_url(url, timeout, policy) as r:  # HTTPError for 4xx/5xx; trust.Refused for a refused address
        return r.read()


def _save(path: str, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".part-")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


@register("download_file_mapper")
class DownloadFileMapper(Mapper):
    """Download the URLs (or read the paths) of ``download_field`` into ``save_dir`` (field rewritten to the
    local paths) and/or their bytes into ``save_field`` (default ``image_bytes``)."""

    creates_text = True  # works on the URL field; the text may be absent

    class Params(Params):
        download_field: str | None = Field(None, description="Field with a URL/path or a list of them.")
        save_dir: str | None = Field(None, description="Directory receiving the files (field rewritten to their paths).")
        save_field: str | None = Field(None, description="Field receiving the bytes (default image_bytes when "
                                                         "save_dir is not set either).")
        resume_download: bool = Field(False, description="Keep bytes already in save_field (else it must be absent).")
        timeout: int = Field(30, description="Seconds per download.")
        max_concurrent: int = Field(10, ge=1, description="Downloads at a time.")

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        self.save_field = p.save_field or (None if p.save_dir else "image_bytes")

    def _one(self, url, want_bytes: bool, policy: trust.Policy):
        """(local path or the URL, bytes or None) of one entry; trust.Refused when ``policy`` does not let
        it be read or fetched (this runs in a thread: the policy is passed, not looked up)."""
        p = self.params
        try:
            if not isinstance(url, str):
                raise ValueError(f"not a URL or path: {url!r}")
            if not url.lower().startswith(REMOTE):
                trust.check_read(url, f"{self.name}: {p.download_field}", policy)
                if want_bytes:
                    with open(url, "rb") as f:
                        return url, f.read()
                return url, None
            if not p.save_dir and not want_bytes:
                return url, None
            trust.check_url(url, f"{self.name}: {p.download_field}", policy)
            path = os.path.join(p.save_dir, os.path.basename(urlparse(url).path)) if p.save_dir else None
            if path:
                trust.check_write(path, f"{self.name}: save_dir file", policy)
            if path and os.path.exists(path):
                if want_bytes:
                    with open(path, "rb") as f:
                        return path, f.read()
                return path, None
            data = _fetch(url, p.timeout, policy)
            if path:
                _save(path, data)
            return path or url, data if want_bytes else None
        except trust.Refused:
            raise  # the policy's refusal: this row's reject, not a kept row
        except Exception as e:  # noqa: BLE001 - Data-Juicer keeps the row with the URL and no bytes
            log.warning("download_file_mapper: %s failed: %s", url, e)
            return url, None

    def process_batch(self, batch):
        p = self.params
        if not p.download_field or p.download_field not in batch.schema.names:
            return batch
        field = C.to_pylist(batch.select([p.download_field]))
        urls = [r.get(p.download_field) for r in field]
        sf = self.save_field
        old = None
        if sf and sf in batch.schema.names:
            if not p.resume_download:
                raise ValueError(f"{self.name}: {sf} is already in the samples; set resume_download: true to resume")
            old = batch.column(sf).to_pylist()
        jobs = []  # (row, index in list or -1, url, want bytes)
        for i, u in enumerate(urls):
            items = u if isinstance(u, list) else [u]
            for j, url in enumerate(items):
                have = None
                if old is not None and old[i] is not None:
                    have = old[i][j] if isinstance(u, list) and isinstance(old[i], list) and len(old[i]) == len(u) \
                        else (old[i] if not isinstance(u, list) else None)
                jobs.append((i, j if isinstance(u, list) else -1, url, bool(sf) and not have, have))
        policy = trust.current()
        if p.save_dir:
            trust.check_write(p.save_dir, f"{self.name}.save_dir", policy)
            os.makedirs(p.save_dir, exist_ok=True)
        with ThreadPoolExecutor(p.max_concurrent) as ex:
            results = list(ex.map(lambda job: self._one(job[2], job[3], policy), jobs))
        paths = [list(u) if isinstance(u, list) else u for u in urls]
        data = [[None] * len(u) if isinstance(u, list) else None for u in urls]
        for (i, j, _, want, have), (path, content) in zip(jobs, results):
            if j < 0:
                paths[i], data[i] = path, content if want else have
            else:
                paths[i][j], data[i][j] = path, content if want else have
        if p.save_dir:
            typ = pa.list_(pa.string()) if any(isinstance(u, list) for u in urls) else pa.string()
            batch = C.set_column(batch, p.download_field, pa.array(paths, typ))
        if sf:
            typ = pa.list_(pa.binary()) if any(isinstance(u, list) for u in urls) else pa.binary()
            batch = C.set_column(batch, sf, pa.array(data, typ))
        return batch
