"""``latex_merge_tex_mapper``: the text of a LaTeX project archive (``.tar``, ``.tar.gz``/``.tgz``,
``.zip``) whose path is in ``compressed_file_key``: every ``.tex`` member in archive order, decoded as
UTF-8 (invalid bytes replaced), joined with ``separator`` (Data-Juicer's op, params and size limits).

Members over ``max_file_size`` are skipped; once the next member would take the total over
``max_total_size`` the rest is skipped (0 disables either limit). Where Data-Juicer logs and writes an
empty text (unreadable archive, unsupported extension), gristmill raises so that the row goes to rejects
with the error: nothing is silently emptied. One archive read per row (I/O bound). Under the service's
trust policy an archive outside its data roots is refused (that row's reject) before it is opened."""
from __future__ import annotations

import tarfile
import zipfile

import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...registry import register
from ..base import Mapper, Params


def _members_tar(path: str):
    with tarfile.open(path, "r:*") as tf:
        for m in tf:
            if m.isfile() and m.name.endswith(".tex"):
                yield m.name, m.size, (lambda m=m: tf.extractfile(m).read())


def _members_zip(path: str):
    with zipfile.ZipFile(path) as zf:
        for name in zf.namelist():
            if name.endswith(".tex"):
                yield name, zf.getinfo(name).file_size, (lambda name=name: zf.read(name))


def tex_contents(path: str, max_file: int, max_total: int) -> list[str]:
    low = path.lower()
    if low.endswith(".zip"):
        members = _members_zip(path)
    elif low.endswith((".tar.gz", ".tgz", ".tar")):
        members = _members_tar(path)
    else:
        raise ValueError(f"unsupported archive {path!r} (.tar, .tar.gz, .tgz or .zip)")
    out, total = [], 0
    for _, size, read in members:
        if max_file and size > max_file:
            continue
        if max_total and total + size > max_total:
            break
        data = read()
        if max_file and len(data) > max_file:
            continue
        total += len(data)
        if max_total and total > max_total:
            break
        out.append(data.decode("utf-8", errors="replace"))
    return out


@register("latex_merge_tex_mapper")
class LatexMergeTexMapper(Mapper):
    """Set the text to the ``.tex`` files of the archive at ``compressed_file_key``, joined by ``separator``."""

    creates_text = True

    class Params(Params):
        compressed_file_key: str = Field("compressed_file", description="Field holding the archive's path.")
        separator: str = Field("\n\n", description="Inserted between the .tex files.")
        max_file_size: int | None = Field(50 * 1024 * 1024, description="Skip .tex members larger (bytes; 0/null: no limit).")
        max_total_size: int | None = Field(100 * 1024 * 1024, description="Stop before the total exceeds (bytes; 0/null: no limit).")

    def process_batch(self, batch):
        p = self.params
        paths = C.get_field(batch, p.compressed_file_key)
        if paths is None:
            raise KeyError(f"{self.name}: field {p.compressed_file_key!r} not in sample (fields: {batch.schema.names})")
        out = []
        for path in paths.to_pylist():
            if not isinstance(path, str):
                raise ValueError(f"{self.name}: {p.compressed_file_key} is {path!r}, not an archive path")
            # the archive must lie in the service's data roots (trust.Refused: this row's reject, no read)
            trust.check_read(path, f"{self.name}: {p.compressed_file_key}")
            out.append(p.separator.join(tex_contents(path, p.max_file_size or 0, p.max_total_size or 0)))
        return C.set_column(batch, self.text_key, pa.array(out, pa.string()))
