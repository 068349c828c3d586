"""HTML files (.html / .htm / .xhtml, optionally compressed): one row per file, the decoded HTML in the text
field and the encoding it was decoded with in ``charset``, ready for ``html_extract_mapper``.

The encoding is found as for WARC records (:func:`gristmill.core.charset.decode_html`): UTF-8 when the bytes are
valid UTF-8, else the page's ``<meta>`` charset or a detected one. The row id is the file's path relative
to the dataset root, so a removed or rejected page names its file.
"""
from __future__ import annotations

import pyarrow as pa

from ..core.accounting import Reject
from ..core.charset import decode_html
from .base import Reader, register_reader, relative_source, strip_compression
from .streams import TruncatedInput, read_all

READ = "read"


@register_reader
class HtmlReader(Reader):
    """A folder (or glob) of HTML files, one document per file."""

    name = "html"
    extensions = (".html", ".htm", ".xhtml")

    def read(self, shard, opts):
        path = shard.source
        try:
            body = read_all(path, strip_compression(path)[1])
        except TruncatedInput as e:  # the page is cut short: a reject for this row, as in txt file mode
            yield Reject(READ, "TruncatedInput", str(e), source=path)
            return
        text, charset = decode_html(body, None)
        yield pa.RecordBatch.from_pydict({
            opts.text_key: pa.array([text], pa.string()), "charset": pa.array([charset], pa.string()),
            "id": pa.array([relative_source(path, opts)], pa.string())})
