"""MediaWiki XML dumps (``*-pages-articles*.xml.bz2`` from dumps.wikimedia.org) → one row of plain text per
article.

The XML is streamed (memory stays flat whatever the dump size; multistream ``.bz2`` works as is) and each
page's wikitext is turned into plain text with mwparserfromhell: templates, references, tables, comments,
file/image/category links and empty sections go; link texts, headings, lists and paragraphs stay. This is
per-page Python by nature (wikitext has to be parsed one page at a time).

Rows: ``text``, ``title``, ``page_id``, ``revision_id``, ``timestamp``, ``namespace``, ``url``; the id is
``<file>:<page_id>``. Redirects and pages outside the wanted namespaces (reader option ``wiki_namespaces``,
default ``0``, the articles) are not documents and are skipped. A truncated or damaged dump keeps every page
read before the damage and reports the rest as a reject.
"""
from __future__ import annotations
from .. import fs as _fs

import bz2
import re
import xml.etree.ElementTree as ET
from typing import Iterator
from urllib.parse import quote

import pyarrow as pa

from ..core.accounting import Reject
from .base import ReadOptions, Reader, Shard, register_reader, strip_compression, with_ids

READ = "read"
DROP_TAGS = {"ref", "references", "table", "gallery", "timeline", "imagemap", "math", "chem", "score",
             "graph", "mapframe", "maplink", "templatedata", "noinclude", "syntaxhighlight", "source"}
# canonical names of the namespaces whose links are not prose: Media (-2), File (6), Category (14)
LINK_NAMESPACES = {"-2": ("media",), "6": ("file", "image"), "14": ("category",)}


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _open(path: str):
    _, comp = strip_compression(path)
    if comp == ".bz2":
        return bz2.open(_fs.open_input(path), "rb")
    if comp == ".gz":
        import gzip
        return gzip.open(_fs.open_input(path), "rb")
    if comp in (".zst", ".zstd"):
        import zstandard
        return zstandard.ZstdDecompressor().stream_reader(_fs.open_input(path))
    if comp == ".xz":
        import lzma
        return lzma.open(_fs.open_input(path), "rb")
    return _fs.open_input(path)


_BLANKS = re.compile(r"\n{3,}")
_LANG = re.compile(r"^[a-z]{2,3}(?:-[a-z]+)?$")
HEAD = "\ue000"  # marks heading lines between strip_code and _tidy (private-use code point)


def wikitext_to_text(wikitext: str, drop_link_prefixes: frozenset[str] = frozenset(
        p for v in LINK_NAMESPACES.values() for p in v)) -> str:
    """Plain text of one page's wikitext (see the module doc for what is kept)."""
    import mwparserfromhell as mw
    from mwparserfromhell.nodes import Comment, Tag, Wikilink
    code = mw.parse(wikitext)
    drop = []
    for node in code.ifilter(recursive=True):
        if isinstance(node, Tag) and str(node.tag).strip().lower() in DROP_TAGS:
            drop.append(node)
        elif isinstance(node, Comment):
            drop.append(node)
        elif isinstance(node, Wikilink):
            raw = str(node.title).strip()
            prefix = raw.lstrip(":").split(":", 1)[0].strip().lower() if ":" in raw else ""
            if prefix in drop_link_prefixes or (not raw.startswith(":") and node.text is None
                                                and _LANG.match(prefix)):  # [[de:Foo]]: interlanguage
                drop.append(node)
    for node in drop:
        try:
            code.remove(node)
        except ValueError:  # already removed with an enclosing node
            pass
    for h in code.filter_headings(recursive=False):
        code.replace(h, f"\n{HEAD}{min(h.level, 9)}{h.title.strip_code().strip()}\n", recursive=False)
    text = code.strip_code(normalize=True, collapse=True)
    return _tidy(text)


def _tidy(text: str) -> str:
    """Strip lines; keep a heading (as a plain line) only if its section has text."""
    lines = [ln.strip() for ln in text.replace("\xa0", " ").split("\n")]
    heads = {i: int(ln[1]) for i, ln in enumerate(lines) if ln.startswith(HEAD) and len(ln) > 2}
    out: list[str] = []
    after_head = False
    for i, ln in enumerate(lines):
        if i in heads:
            keep = False
            for j in range(i + 1, len(lines)):
                if j in heads:
                    if heads[j] <= heads[i]:
                        break
                elif lines[j]:
                    keep = True
                    break
            if keep:
                out.extend(["", ln[2:].strip()])
                after_head = True
            continue
        if after_head and not ln:
            continue  # the heading's text starts on the next line
        after_head = False
        out.append(ln)
    return _BLANKS.sub("\n\n", "\n".join(out)).strip()


SCHEMA_FIELDS = [("title", pa.string()), ("page_id", pa.int64()), ("revision_id", pa.int64()),
                 ("timestamp", pa.string()), ("namespace", pa.int32()), ("url", pa.string())]


@register_reader
class WikipediaReader(Reader):
    """MediaWiki XML dumps (``pages-articles`` / ``pages-meta-current``, optionally multistream)."""

    name = "wikipedia"
    options = {"wiki_namespaces": "namespaces to read, e.g. '0' (articles, default) or '0,14'"}
    extensions = ("pages-articles.xml", "pages-articles-multistream.xml", "pages-meta-current.xml",
                  "pages-meta-history.xml", ".mediawiki.xml")

    def read(self, shard: Shard, opts: ReadOptions) -> Iterator[pa.RecordBatch | Reject]:
        ns_opt = opts.param("wiki_namespaces", "0")
        namespaces = {int(x) for x in (ns_opt.split(",") if isinstance(ns_opt, str) else ns_opt)}
        cols: dict[str, list] = {}
        positions: list[int] = []
        key = opts.text_key

        def reset():
            cols.clear()
            cols.update({k: [] for k in [key] + [f for f, _ in SCHEMA_FIELDS]})
            positions.clear()

        def flush() -> pa.RecordBatch:
            schema = pa.schema([(key, pa.string())] + SCHEMA_FIELDS)
            b = with_ids(pa.RecordBatch.from_pydict(cols, schema=schema), shard, positions, opts)
            reset()
            return b

        reset()
        base_url = ""
        prefixes = {p for v in LINK_NAMESPACES.values() for p in v}
        ordinal, last_id = 0, None
        stream = _open(shard.source)
        try:
            root = None
            context = ET.iterparse(stream, events=("start", "end"))
            root_checked = False
            for event, elem in context:
                tag = _local(elem.tag)
                if event == "start":
                    if not root_checked:
                        root_checked, root = True, elem
                        if tag != "mediawiki":
                            yield Reject(READ, "NotAWikiDump", f"root element is <{tag}>, not <mediawiki>",
                                         source=shard.source)
                            return
                    continue
                if tag == "siteinfo":
                    base = elem.find("./{*}base")
                    if base is not None and base.text and "/wiki/" in base.text:
                        base_url = base.text.split("/wiki/", 1)[0] + "/wiki/"
                    for ns in elem.iterfind("./{*}namespaces/{*}namespace"):
                        if ns.get("key") in LINK_NAMESPACES and ns.text:
                            prefixes.add(ns.text.strip().lower())
                    root.clear()
                    continue
                if tag != "page":
                    continue
                ordinal += 1
                item = self._page(elem, namespaces)
                root.clear()
                if item is None:
                    continue
                title, pid, rid, ts, ns, wikitext = item
                last_id = pid
                try:
                    text = wikitext_to_text(wikitext, frozenset(prefixes))
                except Exception as e:  # noqa: BLE001 - one bad page must not stop the dump
                    yield Reject(READ, "BadWikitext", f"page {pid} ({title}): {type(e).__name__}: {e}",
                                 row={"title": title, "raw": wikitext[:2000]}, source=shard.source)
                    continue
                cols[key].append(text)
                cols["title"].append(title)
                cols["page_id"].append(pid)
                cols["revision_id"].append(rid)
                cols["timestamp"].append(ts)
                cols["namespace"].append(ns)
                cols["url"].append(base_url + quote(title.replace(" ", "_"), safe="/:()_,'-.!~*") if base_url else None)
                positions.append(pid if pid is not None else ordinal)
                if len(positions) >= opts.batch_size:
                    yield flush()
        except (ET.ParseError, EOFError, OSError, ValueError) as e:
            if positions:
                yield flush()
            after = f" after page {last_id}" if last_id is not None else ""
            yield Reject(READ, "TruncatedInput", f"dump unreadable{after}: {type(e).__name__}: {e}",
                         source=shard.source)
            return
        finally:
            stream.close()
        if positions:
            yield flush()

    @staticmethod
    def _page(elem, namespaces):
        ns_el = elem.find("./{*}ns")
        ns = int(ns_el.text) if ns_el is not None and ns_el.text else 0
        if ns not in namespaces or elem.find("./{*}redirect") is not None:
            return None
        title = elem.findtext("./{*}title") or ""
        pid = elem.findtext("./{*}id")
        rev = elem.find("./{*}revision")
        if rev is None:
            return None
        text = rev.findtext("./{*}text") or ""
        if text.lstrip().lower().startswith("#redirect"):
            return None
        rid = rev.findtext("./{*}id")
        return (title, int(pid) if pid else None, int(rid) if rid else None, rev.findtext("./{*}timestamp"),
                ns, text)
