"""Data-Juicer's object-storage file ops on gristmill's filesystem layer (``gristmill.fs``: the recipe's
``storage_options``, ``AWS_ENDPOINT_URL`` and the usual AWS credentials, through s3fs):

- ``s3_download_file_mapper``: the ``s3://`` URLs of ``download_field`` (a URL or a list per row) into
  ``save_dir`` (field rewritten to the local paths; a file already there is reused with ``resume_download``)
  and/or their bytes into ``save_field`` (``image_bytes`` when neither is set). Local paths are read (for
  ``save_field``) and left as they are; an http(s) URL is not this op's (Data-Juicer's refusal): it and a
  failed download keep the URL and get null bytes, and are logged; the row is kept.
- ``s3_upload_file_mapper``: the local files of ``upload_field`` to ``s3://s3_bucket/s3_prefix<base name>``,
  the field rewritten to those URLs; an object already there is not uploaded again (``skip_existing``);
  ``remove_local`` deletes the local file once it is in the bucket; an ``s3://`` value is left as it is; a
  missing local file or a failed upload keeps the path, logged.

Credentials: the ``AWS_*`` environment variables win, as in Data-Juicer; the op's ``aws_*`` params fill
in what they leave unset; ``endpoint_url`` (MinIO and other S3-compatible stores) wins over
``AWS_ENDPOINT_URL``. Transfers run ``max_concurrent`` at a time in threads; the output does not depend on
their order. Downloads go to a temporary name and are renamed. Under the service's restricted trust policy
the ops are refused: they would reach a bucket with the server's credentials."""
from __future__ import annotations

import logging
import os
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
from pydantic import Field

from ... import fs as gfs
from ...core import columns as C
from ...core import trust
from ...registry import register
from .._fields import _json_column, _set_field
from ..base import Mapper, Params

log = logging.getLogger(__name__)


class S3Params(Params):
    aws_access_key_id: str | None = Field(None, description="Access key (AWS_ACCESS_KEY_ID wins when set).")
    aws_secret_access_key: str | None = Field(None, description="Secret key (AWS_SECRET_ACCESS_KEY wins when set).")
    aws_session_token: str | None = Field(None, description="Session token (AWS_SESSION_TOKEN wins when set).")
    aws_region: str | None = Field(None, description="Region (AWS_REGION / AWS_DEFAULT_REGION win when set).")
    endpoint_url: str | None = Field(None, description="S3-compatible endpoint, e.g. MinIO's http://host:9000.")
    max_concurrent: int = Field(10, ge=1, description="Transfers at a time.")


def split_s3(url: str) -> tuple[str, str]:
    """``s3://bucket/a/b.mp4`` → ``("bucket", "a/b.mp4")``."""
    bucket, _, key = url[len("s3://"):].partition("/")
    return bucket, key


class _S3Op(Mapper):
    requires = ("s3fs",)
    SECRETS = ("aws_access_key_id", "aws_secret_access_key", "aws_session_token")

    def __init__(self, **params):
        super().__init__(**params)
        if trust.current().restricted:
            raise trust.Refused(f"{self.name}: object storage with the server's credentials is not allowed under "
                                f"this server's trust policy")

    def config(self) -> dict:  # the resume fingerprint and the report: never a credential
        cfg = super().config()
        cfg["params"] = {k: v for k, v in cfg["params"].items() if k not in self.SECRETS}
        return cfg

    def filesystem(self, url: str = "s3://"):
        def make():
            import s3fs
            p = self.params
            opts = dict(gfs.storage_options_for(url))
            env = os.environ.get
            fill = {"key": None if env("AWS_ACCESS_KEY_ID") else p.aws_access_key_id,
                    "secret": None if env("AWS_SECRET_ACCESS_KEY") else p.aws_secret_access_key,
                    "token": None if env("AWS_SESSION_TOKEN") else p.aws_session_token}
            for k, v in fill.items():
                if v and k not in opts:
                    opts[k] = v
            region = env("AWS_REGION") or env("AWS_DEFAULT_REGION") or p.aws_region
            if region:
                opts.setdefault("client_kwargs", {}).setdefault("region_name", region)
            if p.endpoint_url:
                opts["endpoint_url"] = p.endpoint_url
            return s3fs.S3FileSystem(**opts)
        return self.resource(f"s3fs:{split_s3(url)[0]}", make)  # storage_options may differ per bucket

    @staticmethod
    def set_field(batch, name: str, values: list, item: pa.DataType):
        """A column of one value or a list per row: typed when every row has the same shape, else held as
        JSON (as the readers hold a field of mixed shapes); bytes of mixed shapes are all lists (JSON holds
        no bytes: a single value becomes a one-item list)."""
        shapes = {isinstance(v, list) for v in values if v is not None}
        if len(shapes) > 1 and item == pa.binary():
            values, shapes = [v if v is None or isinstance(v, list) else [v] for v in values], {True}
        if len(shapes) > 1:
            return _set_field(batch, *_json_column(name, values))
        return C.set_column(batch, name, pa.array(values, pa.list_(item) if shapes == {True} else item))

    @staticmethod
    def _map(items_per_row: list, fn, workers: int) -> list:
        """``fn`` over every entry of a field holding a value or a list per row, the row shapes kept."""
        flat = [(i, j, v) for i, u in enumerate(items_per_row)
                for j, v in (enumerate(u) if isinstance(u, list) else [(-1, u)])]
        with ThreadPoolExecutor(workers) as ex:
            results = list(ex.map(lambda t: fn(t[0], t[1], t[2]), flat))
        out = [[None] * len(u) if isinstance(u, list) else None for u in items_per_row]
        for (i, j, _), r in zip(flat, results):
            if j < 0:
                out[i] = r
            else:
                out[i][j] = r
        return out


@register("s3_download_file_mapper")
class S3DownloadFileMapper(_S3Op):
    """Download the ``s3://`` URLs of ``download_field`` into ``save_dir`` (field rewritten to the local paths)
    and/or their bytes into ``save_field`` (default ``image_bytes``); local paths are read, not copied."""

    creates_text = True  # works on the URL field; the text may be absent

    class Params(S3Params):
        download_field: str | None = Field(None, description="Field with an s3:// URL or local path, or a list.")
        save_dir: str | None = trust.path_param("write", None, description="Directory receiving the files (field "
                                                "rewritten to their paths).")
        save_field: str | None = Field(None, description="Field receiving the bytes (default image_bytes when "
                                       "save_dir is not set either).")
        resume_download: bool = Field(False, description="Reuse files already in save_dir and keep bytes already in "
                                      "save_field (else save_field must be absent).")
        timeout: int = Field(30, description="Data-Juicer's deprecated param: not used.")

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        self.save_field = p.save_field or (None if p.save_dir else "image_bytes")

    def _one(self, url, want_bytes: bool):
        """(path: the local file, or the value as it was; bytes or None)."""
        p = self.params
        try:
            if not isinstance(url, str):
                raise ValueError(f"not a URL or path: {url!r}")
            if url.startswith("s3://"):
                path = os.path.join(p.save_dir, os.path.basename(split_s3(url)[1])) if p.save_dir else None
                if path and p.resume_download and os.path.exists(path):
                    return path, gfs.read_bytes(path) if want_bytes else None
                s3, key = self.filesystem(url), url[len("s3://"):]
                if path:
                    os.makedirs(p.save_dir, exist_ok=True)
                    tmp = os.path.join(p.save_dir, f".gm-part-{os.getpid()}-{os.path.basename(path)}")
                    s3.get_file(key, tmp)
                    os.replace(tmp, path)
                    return path, gfs.read_bytes(path) if want_bytes else None
                return url, s3.cat_file(key) if want_bytes else None
            if url.lower().startswith(("http://", "https://")):
                raise ValueError(f"HTTP/HTTPS URLs are not supported: only s3:// URLs and local files ({url})")
            return url, gfs.read_bytes(url) if want_bytes else None
        except Exception as e:  # noqa: BLE001 - Data-Juicer keeps the row with the URL and no bytes
            log.warning("s3_download_file_mapper: %s failed: %s", gfs.redact(str(url)), e)
            return url, None

    def process_batch(self, batch):
        p = self.params
        if not p.download_field or p.download_field not in batch.schema.names or not batch.num_rows:
            return batch
        urls = [r.get(p.download_field) for r in C.to_pylist(batch.select([p.download_field]))]
        sf = self.save_field
        old = None
        if sf and sf in batch.schema.names:
            if not p.resume_download:
                raise ValueError(f"{self.name}: {sf} is already in the samples; set resume_download: true to resume")
            old = batch.column(sf).to_pylist()

        def have(i, j):
            if old is None or old[i] is None:
                return None
            if j < 0:
                return None if isinstance(old[i], list) else old[i]
            ok = isinstance(old[i], list) and len(old[i]) == len(urls[i])
            return old[i][j] if ok else None

        def one(i, j, url):
            kept = have(i, j) if sf else None
            path, data = self._one(url, bool(sf) and not kept)
            return path, (kept if kept else data)

        res = self._map(urls, one, p.max_concurrent)
        pick = lambda k: [[x[k] for x in r] if isinstance(r, list) else (None if r is None else r[k])  # noqa: E731
                          for r in res]
        if p.save_dir:
            batch = self.set_field(batch, p.download_field, pick(0), pa.string())
        if sf:
            batch = self.set_field(batch, sf, pick(1), pa.binary())
        return batch


@register("s3_upload_file_mapper")
class S3UploadFileMapper(_S3Op):
    """Upload the local files of ``upload_field`` to ``s3://s3_bucket/s3_prefix`` and rewrite the field to
    their URLs."""

    creates_text = True

    class Params(S3Params):
        upload_field: str | None = Field(None, description="Field with a local path or a list of them.")
        s3_bucket: str = Field(..., description="Bucket receiving the files.")
        s3_prefix: str = Field("", description="Key prefix (folder) in the bucket, e.g. videos/.")
        remove_local: bool = Field(False, description="Delete each local file once it is in the bucket.")
        skip_existing: bool = Field(True, description="Do not upload a file whose key is already in the bucket.")

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        if not p.s3_bucket:
            raise ValueError(f"{self.name}: s3_bucket must be specified")
        self.prefix = p.s3_prefix if not p.s3_prefix or p.s3_prefix.endswith("/") else p.s3_prefix + "/"

    def _one(self, path):
        p = self.params
        if isinstance(path, str) and path.startswith("s3://"):
            return path
        try:
            if not isinstance(path, str) or not os.path.exists(path):
                raise FileNotFoundError(f"local file not found: {path!r}")
            trust.check_read(path, f"{self.name}: {p.upload_field}")
            key = f"{p.s3_bucket}/{self.prefix}{os.path.basename(path)}"
            s3 = self.filesystem(f"s3://{key}")
            if not (p.skip_existing and s3.exists(key)):
                s3.put_file(path, key)
            if p.remove_local:
                try:
                    os.remove(path)
                except OSError as e:
                    log.warning("s3_upload_file_mapper: could not remove %s: %s", path, e)
            return f"s3://{key}"
        except Exception as e:  # noqa: BLE001 - Data-Juicer keeps the local path and logs
            log.warning("s3_upload_file_mapper: %s failed: %s", path, e)
            return path

    def process_batch(self, batch):
        p = self.params
        if not p.upload_field or p.upload_field not in batch.schema.names or not batch.num_rows:
            return batch
        paths = [r.get(p.upload_field) for r in C.to_pylist(batch.select([p.upload_field]))]
        out = self._map(paths, lambda i, j, v: self._one(v), p.max_concurrent)
        return self.set_field(batch, p.upload_field, out, pa.string())
