"""``extract_tables_from_html_mapper``: the tables of an HTML document as a meta tag (Data-Juicer's op).

Parsed with BeautifulSoup's ``html.parser`` as Data-Juicer does, so malformed HTML yields the same
tables. With ``retain_html_tags`` each table is its HTML; otherwise a list of rows, each the stripped
text of the row's own ``td``/``th`` cells (rows without cells are skipped, tables without rows too;
``include_header: false`` skips rows that have a ``th`` of their own). A row whose meta already holds the
field keeps it. Per-row Python: the parser works one document at a time."""
from __future__ import annotations

import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...registry import register
from ..base import Mapper, Params


def tables_of(html: str, retain_html_tags: bool, include_header: bool) -> list:
    from bs4 import BeautifulSoup
    tables = BeautifulSoup(html, "html.parser").find_all("table")
    if retain_html_tags:
        return [str(t) for t in tables]
    out = []
    for table in tables:
        rows = []
        for tr in table.find_all("tr"):
            if not include_header and tr.find("th", recursive=False) is not None:
                continue
            cells = [c.get_text(strip=True) for c in tr.find_all(["td", "th"], recursive=False)]
            if cells:
                rows.append(cells)
        if rows:
            out.append(rows)
    return out


@register("extract_tables_from_html_mapper")
class ExtractTablesFromHtmlMapper(Mapper):
    """Put the tables found in the HTML text into ``meta.<tables_field_name>``: lists of rows of cell texts,
    or each table's HTML with ``retain_html_tags`` (needs ``beautifulsoup4``)."""

    class Params(Params):
        tables_field_name: str = Field("html_tables", description="Meta field receiving the tables.")
        retain_html_tags: bool = Field(False, description="Keep each table as its HTML.")
        include_header: bool = Field(True, description="Keep header rows (rows with a th), without retain_html_tags.")

    def process_batch(self, batch):
        p = self.params
        texts = self.text(batch).to_pylist()
        old = C.get_meta(batch, p.tables_field_name)
        old = old.to_pylist() if old is not None else [None] * batch.num_rows
        vals = [o if o is not None else ([] if t is None else tables_of(t, p.retain_html_tags, p.include_header))
                for t, o in zip(texts, old)]
        typ = pa.list_(pa.string()) if p.retain_html_tags else pa.list_(pa.list_(pa.list_(pa.string())))
        try:
            arr = pa.array(vals, typ)
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # a kept older value of another shape
            arr = pa.array(vals)
        return C.with_meta(batch, {p.tables_field_name: arr})
