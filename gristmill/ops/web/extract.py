"""HTML → main text, with a choice of extractor and a per-document time limit.

Extraction is per-row Python by necessity: each extractor parses one document's DOM and walks it (no
extractor has a batch API), so the loop over rows is the job itself. The wrapper around it (title, meta,
timeouts, Arrow columns) is kept to a few microseconds per page; ``bench/extract.py`` measures it against
calling the libraries directly.
"""
from __future__ import annotations

import html as htmllib
import inspect
import re
from collections import Counter
from functools import partial
from typing import Any, Literal

import pyarrow as pa
from pydantic import Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from ...core import columns as C
from ...core.names import closest
from ...registry import register
from ..base import Mapper, Params
from .timeout import CallFailed, CallTimeout, ChildDied, TimeLimit, alarm_handler

DEFAULT_OPTIONS: dict[str, dict[str, Any]] = {
    # the options the rest of the field (datatrove, NeMo Curator) uses for pre-training text
    "trafilatura": {"include_comments": False, "include_tables": True, "include_images": False,
                    "include_links": False, "deduplicate": False},
    "resiliparse": {"main_content": True, "alt_texts": False, "links": False, "form_fields": False,
                    "noscript": False},
    "justext": {"stoplist": "all"},  # every language jusText knows: web pages are multilingual
}
DEFAULT_OPTIONS["ensemble"] = DEFAULT_OPTIONS["trafilatura"]  # the ensemble's options are trafilatura's


# Elements whose text keeps its line breaks when a browser renders it; everywhere else a run of whitespace,
# newlines included, is one space. trafilatura's own extraction collapses it too, but its fallback
# extractors (readability, jusText: taken for many real pages) keep the source's newlines, so a paragraph
# wrapped at 80 columns in the HTML came out as many short lines, which line rules (C4's terminal
# punctuation, Gopher's and FineWeb's line ratios) then cut or count one by one.
_PRE = frozenset({"pre", "textarea", "code", "listing", "plaintext", "xmp", "script", "style"})
_SPACE = re.compile(r"[ \t\n\r\f]+")


def render_whitespace(tree):
    """Collapse source line breaks in an lxml HTML tree as a browser renders them (outside ``_PRE``
    elements): text and tails with a newline get each whitespace run turned into one space. In place;
    an explicit stack, so a deeply nested page does not hit the recursion limit."""
    stack = [(tree, False)]
    while stack:
        el, pre = stack.pop()
        pre = pre or (isinstance(el.tag, str) and el.tag in _PRE)
        if not pre and el.text and "\n" in el.text:
            el.text = _SPACE.sub(" ", el.text)
        for child in el:
            if not pre and child.tail and "\n" in child.tail:
                child.tail = _SPACE.sub(" ", child.tail)
            stack.append((child, pre))
    return tree


def _trafilatura(html: str, options: dict) -> str:
    """trafilatura on the page parsed as trafilatura parses it, with its source line breaks rendered as
    spaces first (``render_whitespace``): a wrapped paragraph stays one line, <br> and block elements
    still break lines."""
    import trafilatura
    from trafilatura.utils import load_html
    tree = load_html(html)
    if tree is None:  # what trafilatura.extract does with a page it cannot parse
        return ""
    return trafilatura.extract(render_whitespace(tree), **options) or ""


_HTMLTree = _extract_plain_text = None  # imported on first use


def _resiliparse(html: str | bytes, options: dict) -> tuple[str, str | None]:
    """(text, title): the DOM is parsed once for both (what extract_plain_text(str) would do anyway).
    Takes UTF-8 bytes too: the Arrow column's bytes go to the parser without a round trip through str."""
    global _HTMLTree, _extract_plain_text
    if _HTMLTree is None:
        from resiliparse.extract.html2text import extract_plain_text as _extract_plain_text
        from resiliparse.parse.html import HTMLTree as _HTMLTree
    tree = _HTMLTree.parse_from_bytes(html, "utf-8") if isinstance(html, bytes) else _HTMLTree.parse(html)
    return _extract_plain_text(tree, **options), _clean_title(tree.title)


UTF8_EXTRACTORS = {"resiliparse"}  # accept the UTF-8 bytes of an Arrow string column as they are


_STOPLISTS: dict[str, frozenset] = {}


def justext_stoplist(name: str) -> frozenset:
    """A jusText stoplist by language name, or ``all`` for the union of every bundled language."""
    if name not in _STOPLISTS:
        import justext
        if name == "all":
            _STOPLISTS[name] = frozenset().union(*(justext.get_stoplist(n) for n in justext.get_stoplists()))
        else:
            _STOPLISTS[name] = justext.get_stoplist(name)
    return _STOPLISTS[name]


def _justext(html: str, options: dict) -> str:
    import justext
    opts = dict(options)
    stop = justext_stoplist(opts.pop("stoplist", "all"))
    paragraphs = justext.justext(html, stop, **opts)
    # jusText keeps a newline where a whitespace run in the source had one (a <br> is a space to it): a
    # paragraph wrapped in the HTML source stays one line, as a browser shows it (a <pre> block's lines are
    # joined too: jusText has no notion of preformatted text)
    return "\n\n".join(p.text.replace("\n", " ") for p in paragraphs if not p.is_boilerplate)


def _readability(html: str) -> str:
    """The text of the article readability (trafilatura's bundled port of readability-lxml) finds."""
    from lxml import html as lxml_html
    from trafilatura.readability_lxml import Document
    from trafilatura.utils import load_html
    tree = load_html(html)
    if tree is None:
        return ""
    summary = Document(render_whitespace(tree)).summary()
    if not summary:
        return ""
    article = lxml_html.fromstring(summary)
    for el in article.iter(*_BLOCKS):  # a block ends a line: "Title</h1><p>Text" is not one word
        el.tail = "\n" + (el.tail or "")
    return article.text_content()


_BLOCKS = ("p", "div", "h1", "h2", "h3", "h4", "h5", "h6", "li", "tr", "td", "th", "br", "blockquote", "pre",
           "section", "article", "table", "ul", "ol", "dd", "dt", "figcaption")


# The ensemble (``extractor: ensemble``). trafilatura in precision mode is the better extractor on news
# articles (scrapinghub's benchmark) but drops wanted paragraphs on other pages (trafilatura's own
# evaluation set), where its default mode is better; neither text length nor a paragraph's position tells
# the two cases apart, an independent opinion does. So: both modes run; when they differ, precision mode
# is taken unless it kept less than ENSEMBLE_SHORT of the default's words (it missed the article), or the
# default mode's text agrees better (by ENSEMBLE_MARGIN) with two unrelated extractors, readability and
# jusText, which run only then. Agreement is the F1 of the two texts' word 4-grams (bench/extract_ensemble.py).
ENSEMBLE_SHORT = 0.5
ENSEMBLE_MARGIN = 0.03
_WORD = re.compile(r"\w+")


def _four_grams(text: str) -> Counter:
    w = _WORD.findall(text)
    return Counter(zip(w, w[1:], w[2:], w[3:])) if len(w) >= 4 else Counter([tuple(w)] if w else [])


def _agreement(a: Counter, b: Counter) -> float:
    """F1 of ``a`` against ``b`` over 4-gram multisets (0 when they share none)."""
    common = sum((a & b).values())
    return 2 * common / (sum(a.values()) + sum(b.values())) if common else 0.0


def _references(html: str) -> list[str]:
    """The texts of the ensemble's referees; one that fails on the page counts as empty (no opinion)."""
    refs = []
    for fn in (_readability, partial(_justext, options=DEFAULT_OPTIONS["justext"])):
        try:
            refs.append(fn(html) or "")
        except Exception:  # noqa: BLE001 - a referee's failure must not fail a page trafilatura handled
            refs.append("")
    return refs


def _ensemble(html: str, options: dict) -> str:
    precise = _trafilatura(html, {**options, "favor_precision": True})
    default = _trafilatura(html, options)
    if precise == default:
        return precise
    p, d = _four_grams(precise), _four_grams(default)
    if len(_WORD.findall(precise)) < ENSEMBLE_SHORT * len(_WORD.findall(default)):
        return default
    refs = [_four_grams(r) for r in _references(html)]
    if sum(_agreement(d, r) for r in refs) > sum(_agreement(p, r) for r in refs) + ENSEMBLE_MARGIN:
        return default
    return precise


EXTRACTORS = {"trafilatura": _trafilatura, "resiliparse": _resiliparse, "justext": _justext,
              "ensemble": _ensemble}


def _library_function(name: str):
    """The library function an extractor passes its options to (imported on demand)."""
    if name in ("trafilatura", "ensemble"):
        import trafilatura
        return trafilatura.extract
    if name == "resiliparse":
        from resiliparse.extract.html2text import extract_plain_text
        return extract_plain_text
    import justext
    return justext.justext


def option_names(name: str) -> list[str]:
    """The keyword options the installed extractor accepts: its function's parameters after the document
    (for jusText, ``stoplist`` is one of them and takes a language name or ``all``; the ensemble takes
    trafilatura's, less the two modes it sets itself)."""
    names = list(inspect.signature(_library_function(name)).parameters)[1:]
    return [n for n in names if n not in _ENSEMBLE_SETS] if name == "ensemble" else names


_ENSEMBLE_SETS = ("favor_precision", "favor_recall")


def check_options(name: str, options: dict) -> None:
    """Refuse option names the extractor does not take (a typo would otherwise fail every page at run
    time, or be ignored) and unknown jusText stoplists, suggesting the closest valid name."""
    if not options:
        return
    valid = option_names(name)
    for key in options:
        if name == "ensemble" and key in _ENSEMBLE_SETS:
            raise PydanticCustomError("unknown_option", f"the ensemble sets {key} itself (it runs trafilatura "
                                      "with and without favor_precision); use extractor: trafilatura to set it")
        if key not in valid:
            hint = closest(key, valid) or f" (options: {', '.join(valid)})"
            raise PydanticCustomError("unknown_option", f"unknown {name} option {key!r}{hint}")
    if name == "justext" and "stoplist" in options:
        import justext
        lang, langs = options["stoplist"], sorted(justext.get_stoplists())
        if lang != "all" and lang not in langs:
            hint = closest(str(lang), langs) or " (a language name such as English, or all)"
            raise PydanticCustomError("unknown_stoplist", f"unknown jusText stoplist {lang!r}{hint}")


_WARMUP_PAGE = "<html><head><title>warm-up</title></head><body><p>gristmill warm-up page.</p></body></html>"


def warm_up(name: str, options: dict) -> None:
    """Extract a tiny page once so that the library's imports and lazy set-up (jusText's stoplist union)
    happen before the per-page timer runs."""
    EXTRACTORS[name](_WARMUP_PAGE, options)
    if name == "ensemble":  # its referees run only on some pages: set them up too
        _references(_WARMUP_PAGE)


_TITLE = re.compile(r"<title\b[^>]*>(.*?)</title\s*>", re.I | re.S)
_WS = re.compile(r"\s+")


def _clean_title(t: str | None) -> str | None:
    t = _WS.sub(" ", t).strip() if t else ""
    return t or None


def html_title(html: str) -> str | None:
    """The document's <title>, unescaped and whitespace-collapsed (None when absent or empty)."""
    m = _TITLE.search(html, 0, 1 << 20)
    return _clean_title(htmllib.unescape(m.group(1))) if m else None


class ExtractionError(Exception):
    """A document the extractor failed on or ran out of time for."""


def _run(name: str, options: dict, html: str) -> str:
    return EXTRACTORS[name](html, options)


@register("html_extract_mapper")
class HtmlExtractMapper(Mapper):
    """Replace HTML with its main text (boilerplate removed) using trafilatura, resiliparse, jusText or
    ``ensemble`` (trafilatura's precision and default modes, refereed by readability and jusText); the
    page title and URL go to ``__meta__.title`` / ``__meta__.url``. Each document gets ``timeout`` seconds;
    a document that times out or makes the extractor fail is rejected (``on_error: reject``) or kept with
    empty text and ``__meta__.extract_error`` (``on_error: empty``). Per-row Python: extractors parse one
    DOM at a time."""

    class Params(Params):
        extractor: Literal["trafilatura", "resiliparse", "justext", "ensemble"] = Field(
            "trafilatura", description="Main-text extractor. ensemble: trafilatura with favor_precision, "
            "its default mode taken instead when the precise text is under half as long or agrees less "
            "with readability's and jusText's (docs/web.md; slower: up to four extractions a page).")
        extractor_options: dict[str, Any] = Field(
            default_factory=dict, description="Keyword options passed to the extractor, over our defaults "
            "(trafilatura.extract / resiliparse extract_plain_text / justext; for justext `stoplist` is a "
            "language name or `all`; for ensemble trafilatura's, except favor_precision/favor_recall).")
        html_key: str | None = Field(None, description="Field holding the HTML (string, or bytes decoded by "
                                     "charset); default: the text key. The text goes to the text key, so rows "
                                     "need no text field; a row without HTML fails like a bad page.")
        url_key: str = Field("url", description="Field holding the page URL, copied to __meta__.url when present.")
        timeout: float = Field(10.0, description="Seconds allowed per document (0: no limit).")
        timeout_mode: Literal["auto", "signal", "process"] = Field(
            "auto", description="signal: SIGALRM in the worker's main thread (no extra thread or process); "
            "process: a helper process killed on timeout (any thread, stops runaway C code); auto: signal "
            "when possible.")
        on_error: Literal["reject", "empty"] = Field(
            "reject", description="reject: failing documents go to rejects; empty: they stay with empty "
            "text and __meta__.extract_error.")

        @field_validator("extractor_options")
        @classmethod
        def _known_options(cls, v: dict, info: ValidationInfo) -> dict:
            if "extractor" in info.data:  # else the extractor itself was invalid and is reported
                check_options(info.data["extractor"], v)
            return v

    def __init__(self, **params):
        super().__init__(**params)
        p = self.params
        self.options = {**DEFAULT_OPTIONS[p.extractor], **p.extractor_options}

    @property
    def creates_text(self) -> bool:
        """With ``html_key`` the text field is made from another one: rows may arrive without it."""
        return self.params.html_key is not None

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("_retry", None)  # per-worker scratch, like the lazy resources
        return state

    def _limit(self) -> TimeLimit:
        p = self.params
        return self.resource("limit", lambda: TimeLimit(partial(_run, p.extractor, self.options), p.timeout,
                                                         p.timeout_mode, partial(warm_up, p.extractor, self.options)))

    def close(self) -> None:
        """Stop the extraction child process, if one runs (it also stops when the op is collected)."""
        lim = self.__dict__.get("_lazy", {}).get("limit")
        if lim is not None:
            lim.close()

    def extract_one(self, html: str) -> str:
        """The main text of one document; ExtractionError on failure or timeout."""
        return self._extract(html)[0]

    def _extract(self, html: str) -> tuple[str, str | None]:
        """(text, title); the title comes from the extractor's DOM when it has one, else from <title>."""
        try:
            res = self._limit().call(html)
        except CallTimeout:
            raise ExtractionError(f"{self.params.extractor} took longer than {self.params.timeout}s") from None
        except ChildDied as e:
            raise ExtractionError(str(e)) from None
        except CallFailed as e:
            raise ExtractionError(f"{self.params.extractor} failed: {e}") from None
        except RecursionError:
            raise ExtractionError(f"{self.params.extractor}: document nested too deeply") from None
        except Exception as e:  # noqa: BLE001
            raise ExtractionError(f"{self.params.extractor} failed: {type(e).__name__}: {e}") from None
        if isinstance(res, tuple):
            return res
        return res, html_title(html if isinstance(html, str) else html.decode())

    def _html_values(self, batch: pa.RecordBatch) -> list:
        """The HTML of each row: str, or UTF-8 bytes for extractors that parse bytes; binary columns are
        decoded with the page's charset (as WARC bodies are); None where the row has none."""
        key = self.params.html_key or self.text_key
        col = C.get_field(batch, key)
        if col is None:
            if not self.creates_text:
                raise KeyError(f"{self.name}: HTML field {key!r} not in batch (fields: {batch.schema.names})")
            return [None] * batch.num_rows
        if pa.types.is_binary(col.type) or pa.types.is_large_binary(col.type):  # raw bytes: find the charset
            from ...core.charset import decode_html
            return [None if h is None else decode_html(h, None)[0] for h in col.to_pylist()]
        if self.params.extractor in UTF8_EXTRACTORS and (pa.types.is_string(col.type)
                                                         or pa.types.is_large_string(col.type)):
            return col.view(pa.binary() if pa.types.is_string(col.type) else pa.large_binary()).to_pylist()
        return col.to_pylist()

    def _extract_all(self, htmls: list, single: bool) -> tuple[list, list, list]:
        """(texts, titles, errors) per row. A row without HTML passes through as null, unless the text is made
        from ``html_key``: then it is an error like a failed page (no HTML, no text)."""
        retry = self.__dict__.setdefault("_retry", {})
        if not single:
            retry.clear()
        texts, titles, errors = [], [], []
        missing = f"HTML field {self.params.html_key!r} is missing or null" if self.creates_text else None
        with alarm_handler():
            for h in htmls:
                if h is None:
                    text, title, err = ("" if missing else None), None, missing
                elif single and retry and h in retry:
                    text, title, err = retry.pop(h)
                else:
                    try:
                        (text, title), err = self._extract(h), None
                    except ExtractionError as e:
                        text, title, err = "", html_title(h if isinstance(h, str) else h.decode()), str(e)
                texts.append(text)
                titles.append(title)
                errors.append(err)
        return texts, titles, errors

    def process_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        htmls = self._html_values(batch)
        single = len(htmls) == 1
        texts, titles, errors = self._extract_all(htmls, single)
        failed = [e for e in errors if e is not None]
        if failed and self.params.on_error == "reject":
            if not single:  # the engine retries the batch row by row: keep the results, do not recompute
                self._retry.update((h, r) for h, *r in zip(htmls, texts, titles, errors) if h is not None)
            raise ExtractionError(failed[0] if single else f"{len(failed)} documents failed")
        out = C.set_column(batch, self.text_key, pa.array(texts, pa.string()))
        meta: dict[str, Any] = {"title": pa.array(titles, pa.string())}
        url = C.get_field(batch, self.params.url_key)
        if url is not None:
            meta["url"] = url.cast(pa.string())
        if self.params.on_error == "empty":
            meta["extract_error"] = pa.array(errors, pa.string())
        return C.with_meta(out, meta)
