"""The n-gram index behind ngram_decontamination_filter: datatrove's text normalisation (columnar), its word
tokenisation, word n-gram hashes, the index over benchmark files and the lookup of a batch of documents in it.

Normalisation follows datatrove's ``simplify_text`` under a ``TextNormConfig`` (``Norm`` here, same fields and
defaults: lowercase; digit runs, with one decimal part, become ``0``; optionally weekday / month names become
``WEEKDAY`` / ``MONTH``; datatrove's punctuation characters become spaces; whitespace runs collapse; NFD with
the combining marks dropped), written as Arrow kernels. Words are the whitespace-separated tokens of the
normalised text (``whitespace``), or those tokens split further the way spaCy's rule-based tokenizer of a
language does (``spacy``: datatrove's English word tokenizer, which splits ``cannot``, ``gonna``, ``dont``,
``0km`` or ``¿que`` apart). spaCy tokenizes every whitespace-separated chunk on its own, so each distinct word
of a batch is tokenized once, all of them in one call.

An n-gram's hash combines the 64-bit hashes of its ``n`` words (a different odd multiplier per position,
wrapping arithmetic), so every n-gram of a batch is hashed in ``n`` numpy passes. A hash hit is verified
word by word (the word hashes of the document against the item's), so a 64-bit collision never removes a
document.
"""
from __future__ import annotations

import gzip
import json
import os
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .charclass import DT_PUNCTUATION

_NUMBERS = r"\p{Nd}+(?:[.,\x{60c}\x{66b}\x{2396}\x{2397}\x{2398}]\p{Nd}+)?"
_PUNCT = "[" + "".join(f"\\x{{{ord(c):x}}}" for c in DT_PUNCTUATION) + "]"
# what Python's str.isspace() calls whitespace (RE2's \s is ASCII only)
_WS = r"[\t\n\x0b\x0c\r\x1c-\x1f\x{85}\p{Z}]"
_SPACE = _WS + "+"
_WEEKDAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_MONTHS = "january|february|march|april|may|june|july|august|september|october|november|december"


@dataclass(frozen=True)
class Norm:
    """datatrove's ``TextNormConfig``: the same switches, the same defaults."""
    lowercase: bool = True
    norm_whitespace: bool = True
    remove_punctuation: bool = True
    norm_unicode_diacritics: bool = True
    norm_numbers: bool = True
    norm_weekdays: bool = False
    norm_monthnames: bool = False


DEFAULT_NORM = Norm()


def normalize(arr, norm: Norm = DEFAULT_NORM) -> pa.Array:
    """datatrove's ``simplify_text`` of every string under ``norm``; null → ""."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        arr = pc.cast(arr, pa.large_string())
    t = pc.fill_null(arr, "")
    if norm.lowercase:  # Python's full lowercase mapping: İ → i + combining dot (Arrow's simple one drops the dot)
        t = pc.utf8_lower(pc.replace_substring(t, "\u0130", "i\u0307"))
    if norm.norm_numbers:
        t = pc.replace_substring_regex(t, _NUMBERS, "0")
    if norm.norm_weekdays:  # datatrove's patterns are lowercase and match inside words too
        t = pc.replace_substring_regex(t, _WEEKDAYS, "WEEKDAY")
    if norm.norm_monthnames:
        t = pc.replace_substring_regex(t, _MONTHS, "MONTH")
    if norm.remove_punctuation:
        t = pc.replace_substring_regex(t, _PUNCT, " ")
    if norm.norm_whitespace:
        t = pc.replace_substring_regex(t, _SPACE, " ")
        t = pc.utf8_trim(t, " ")
    if norm.norm_unicode_diacritics:
        t = pc.utf8_normalize(t, "NFD")
        t = pc.replace_substring_regex(t, r"\p{Mn}+", "")
    if norm.norm_whitespace:  # only single spaces are left
        return pc.utf8_trim(t, " ")
    return pc.replace_substring_regex(t, f"^{_SPACE}|{_SPACE}$", "")  # Python's str.strip()


class SpacySplitter:
    """The words of a spaCy rule-based tokenizer (``spacy.blank(language)``, as datatrove's ``SpaCyTokenizer``)
    for whitespace-free chunks: each distinct chunk is tokenized once (they are joined by spaces into one text:
    spaCy tokenizes every space-separated chunk on its own), remembered for later batches."""

    def __init__(self, language: str):
        try:
            import spacy
            from spacy.tokenizer import Tokenizer
        except ImportError:
            raise ImportError("word_tokenizer: spacy needs spaCy: pip install 'gristmill[nlp]'") from None
        try:
            nlp = spacy.blank(language)
        except Exception as e:  # noqa: BLE001 - an unknown language code
            raise ValueError(f"word_tokenizer: spacy: no spaCy language {language!r} ({e})") from None
        if type(nlp.tokenizer) is not Tokenizer:  # ja / zh / vi / th segment whole texts
            raise ValueError(f"word_tokenizer: spacy: spaCy's {language!r} tokenizer segments whole texts; only "
                             "languages with spaCy's rule-based tokenizer are supported")
        self.tok = nlp.tokenizer
        self.cache: dict[str, tuple[str, ...]] = {}
        # English: a word of ASCII letters only or digits only is split by a special case only (cannot, dont,
        # gonna...): no prefix, suffix or infix rule matches it (checked on every distinct word of the CC sample)
        self.rules = set(nlp.tokenizer.rules) if language == "en" else None

    def split(self, chunks: list[str]) -> list[tuple[str, ...]]:
        new = [c for c in dict.fromkeys(chunks) if c not in self.cache]
        if new and self.rules is not None:
            plain = [c for c in new if c.isascii() and (c.isalpha() or c.isdigit()) and c not in self.rules]
            self.cache.update((c, (c,)) for c in plain)
            new = [c for c in new if c not in self.cache]
        if new:
            text = " ".join(new)
            starts = np.cumsum([0] + [len(c) + 1 for c in new[:-1]])
            out: list[list[str]] = [[] for _ in new]
            doc = self.tok(text)
            idx = np.fromiter((t.idx for t in doc), np.int64, len(doc))
            owner = np.searchsorted(starts, idx, side="right") - 1
            for t, o in zip(doc, owner.tolist()):
                s = t.text.strip()  # datatrove drops blank tokens
                if s:
                    out[o].append(s)
            if len(self.cache) > 2_000_000:
                self.cache.clear()
            self.cache.update(zip(new, map(tuple, out)))
        return [self.cache[c] for c in chunks]


def words(arr, norm: Norm = DEFAULT_NORM, splitter: SpacySplitter | None = None) -> tuple[pa.Array, np.ndarray]:
    """(flat word array, row offsets into it) of the normalised strings."""
    t = normalize(arr, norm)
    parts = pc.split_pattern(t, " ") if norm.norm_whitespace else pc.split_pattern_regex(t, _SPACE)
    lens = pc.list_value_length(parts).to_numpy(zero_copy_only=False).astype(np.int64)
    flat = pc.list_flatten(parts)
    empty = pc.equal(pc.utf8_length(flat), 0).to_numpy(zero_copy_only=False)
    if empty.any():  # "" (an empty text) splits into one empty word
        row = np.repeat(np.arange(lens.size), lens)
        lens = lens - np.bincount(row[empty], minlength=lens.size)
        flat = flat.filter(pa.array(~empty))
    if splitter is not None and len(flat):
        flat, lens = _resplit(flat, lens, splitter)
    off = np.zeros(lens.size + 1, np.int64)
    np.cumsum(lens, out=off[1:])
    return flat, off


def _resplit(flat: pa.Array, lens: np.ndarray, splitter: SpacySplitter) -> tuple[pa.Array, np.ndarray]:
    """Every word replaced by its spaCy tokens (each distinct word tokenized once)."""
    enc = pc.dictionary_encode(flat)
    dist = enc.dictionary.to_pylist()
    toks = splitter.split(dist)
    per = np.fromiter((len(x) for x in toks), np.int64, len(toks))
    if np.array_equal(per, np.ones_like(per)) and all(a == b[0] for a, b in zip(dist, toks)):
        return flat, lens
    tok_flat = pa.array([w for x in toks for w in x], pa.large_string())
    t_off = np.zeros(per.size + 1, np.int64)
    np.cumsum(per, out=t_off[1:])
    ix = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    cnt = per[ix]  # tokens of each word
    starts = np.repeat(t_off[ix], cnt)
    within = np.arange(int(cnt.sum()), dtype=np.int64) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    row = np.repeat(np.arange(lens.size), lens)
    new_lens = np.bincount(row, weights=cnt, minlength=lens.size).astype(np.int64)
    return tok_flat.take(pa.array(starts + within)), new_lens


def word_hashes(flat: pa.Array) -> np.ndarray:
    """64-bit hash of every word (xxh3 of its UTF-8 bytes, each distinct word hashed once)."""
    if not len(flat):
        return np.empty(0, np.uint64)
    from ..dedup.exact import digests
    enc = pc.dictionary_encode(flat)
    d = digests(enc.dictionary)[:, 0]
    return d[enc.indices.to_numpy(zero_copy_only=False)]


_MULT = np.random.default_rng(0x5EED).integers(1, 2 ** 63, size=256, dtype=np.uint64) * np.uint64(2) + np.uint64(1)


def ngram_hashes(tok: np.ndarray, off: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(hash, start position in ``tok``) of every n-gram that lies inside one row."""
    m = tok.size - n + 1
    if m <= 0:
        return np.empty(0, np.uint64), np.empty(0, np.int64)
    h = np.zeros(m, np.uint64)
    with np.errstate(over="ignore"):
        for j in range(n):
            h += tok[j:j + m] * _MULT[j % _MULT.size]
    row = np.repeat(np.arange(off.size - 1), np.diff(off))[:m]
    start = np.arange(m, dtype=np.int64)
    ok = start + n <= off[row + 1]
    return h[ok], start[ok]


# -- benchmark files -------------------------------------------------------------------------------------

def read_items(path: str) -> list[dict]:
    """The items (records) of a JSONL (optionally .gz) or Parquet file."""
    p = str(path)
    if not os.path.isfile(p):
        raise FileNotFoundError(f"benchmark file not found: {p}")
    if p.endswith(".parquet"):
        import pyarrow.parquet as pq
        return pq.read_table(p).to_pylist()
    opener = gzip.open if p.endswith(".gz") else open
    out = []
    with opener(p, "rt", encoding="utf-8") as f:
        for k, line in enumerate(f, 1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise ValueError(f"{p}: line {k} is not JSON ({e.msg})") from None
    return out


def item_values(item: dict, fields) -> list[str]:
    """The item's texts in ``fields`` order: a string, each string of a list, the ``text`` (else every
    string) of a dict such as ARC's ``choices: {text: [...], label: [...]}``."""
    out: list[str] = []

    def add(v):
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            for x in v:
                add(x)
        elif isinstance(v, dict):
            add(v["text"] if "text" in v else list(v.values()))

    for f in fields:
        if isinstance(item, dict) and f in item:
            add(item[f])
    return out


def item_golds(item: dict, label_fields, choices_field: str | None) -> list[str]:
    """The gold answers of an item: every string of its ``label_fields``; with ``choices_field``, an answer
    that points into the choices (an int or a digit string: an index; a letter: ARC's ``label`` of a dict of
    choices, else A = 0, B = 1, ... of a list) stands for that choice's text."""
    choices = item.get(choices_field) if choices_field and isinstance(item, dict) else None
    texts, labels = None, None
    if isinstance(choices, dict):
        texts, labels = choices.get("text"), choices.get("label")
    elif isinstance(choices, (list, tuple)):
        texts = choices
    out: list[str] = []

    def pick(v):
        if isinstance(texts, (list, tuple)):
            if labels is not None and str(v) in [str(x) for x in labels]:
                return texts[[str(x) for x in labels].index(str(v))]
            if isinstance(v, int) and not isinstance(v, bool) or isinstance(v, str) and v.isdigit():
                i = int(v)
                return texts[i] if 0 <= i < len(texts) else None
            if isinstance(v, str) and len(v) == 1 and "A" <= v <= "Z" and ord(v) - 65 < len(texts):
                return texts[ord(v) - 65]
        return v if isinstance(v, str) else None

    def add(v):
        if isinstance(v, (list, tuple)):
            for x in v:
                add(x)
            return
        g = pick(v) if texts is not None else v
        if isinstance(g, str):
            out.append(g)
        elif isinstance(g, (list, tuple, dict)):
            out.extend(item_values({"g": g}, ["g"]))

    for f in label_fields:
        if isinstance(item, dict) and item.get(f) is not None:
            add(item[f])
    return out


@dataclass(frozen=True)
class ItemSpec:
    """What of an item is indexed. ``label_fields`` / ``query_fields`` set: datatrove's query / gold split
    (each gold's n-grams, with ``find_overlap`` those spanning the query's end and the gold's start, with
    ``find_query`` the query's own); else every text of ``fields`` (``overlap``: as one run of words)."""
    fields: tuple = ()
    overlap: bool = True
    query_fields: tuple | None = None
    label_fields: tuple | None = None
    choices_field: str | None = None
    find_query: bool = False
    find_overlap: bool = True
    id_fields: tuple = ("id", "question_id", "task_id", "idx")

    @property
    def split(self) -> bool:
        return self.query_fields is not None or self.label_fields is not None


def bench_names(paths: list[str]) -> list[str]:
    """A short name per file: its base name, or the path as given where base names repeat."""
    base = [os.path.basename(p) for p in paths]
    return [b if base.count(b) == 1 else p for b, p in zip(base, paths)]


@dataclass
class Index:
    n: int
    hashes: np.ndarray        # sorted n-gram hashes
    entry_item: np.ndarray    # item number of each entry
    entry_pos: np.ndarray     # the n-gram's first word in item_tok
    item_tok: np.ndarray      # word hashes of every item, one after the other
    item_bench: np.ndarray    # benchmark number of each item
    item_label: list[str]     # each item's id within its file (its id field, else its record number)
    benches: list[str]        # benchmark names

    def lookup(self, tok: np.ndarray, off: np.ndarray) -> list[tuple[int, int, int]]:
        """(row, first word of the matching n-gram in ``tok``, item) of the first verified n-gram hit of every
        row that has one, in row order."""
        h, start = ngram_hashes(tok, off, self.n)
        if not h.size or not self.hashes.size:
            return []
        i = np.searchsorted(self.hashes, h)
        i[i == self.hashes.size] = 0
        hit = np.flatnonzero(self.hashes[i] == h)
        out, done = [], set()
        rows = np.searchsorted(off, start[hit], side="right") - 1
        n = self.n
        for k, r in zip(hit.tolist(), rows.tolist()):
            if r in done:
                continue
            p = int(start[k])
            j = int(i[k])
            while j < self.hashes.size and self.hashes[j] == h[k]:  # every entry with this hash, first item first
                q = int(self.entry_pos[j])
                if np.array_equal(tok[p:p + n], self.item_tok[q:q + n]):
                    out.append((r, p, int(self.entry_item[j])))
                    done.add(r)
                    break
                j += 1
        return out


def build_index(paths: list[str], spec: ItemSpec, n: int, norm: Norm = DEFAULT_NORM,
                splitter: SpacySplitter | None = None) -> Index:
    """The index of every n-gram of every item of every file, in one pass over the files."""
    benches = bench_names(list(paths))
    texts: list[str] = []
    # segments: lists of (text number, first word, last word) ranges (negative: from the end), one item each
    segs: list[list[tuple[int, int | None, int | None]]] = []
    seg_item: list[int] = []
    item_bench: list[int] = []
    item_label: list[str] = []
    tail = -(n - 1) if n > 1 else None
    for b, path in enumerate(paths):
        for k, item in enumerate(read_items(path)):
            label = next((str(item[f]) for f in spec.id_fields
                          if isinstance(item, dict) and item.get(f) not in (None, "")), str(k))
            it = len(item_label)
            item_bench.append(b)
            item_label.append(label)
            if spec.split:
                q = len(texts)
                texts.append(" ".join(item_values(item, spec.query_fields or ())))
                if spec.find_query:
                    segs.append([(q, None, None)])
                    seg_item.append(it)
                for g in item_golds(item, spec.label_fields or (), spec.choices_field):
                    texts.append(g)
                    segs.append([(len(texts) - 1, None, None)])
                    seg_item.append(it)
                    if spec.find_overlap and n > 1:  # every n-gram across the query's end and the gold's start
                        segs.append([(q, tail, None), (len(texts) - 1, 0, n - 1)])
                        seg_item.append(it)
            else:
                vals = item_values(item, spec.fields)
                for v in ([" ".join(vals)] if spec.overlap else vals):
                    texts.append(v)
                    segs.append([(len(texts) - 1, None, None)])
                    seg_item.append(it)
    flat, off = words(pa.array(texts, pa.large_string()), norm, splitter)
    tok_all = word_hashes(flat)
    take, seg_len = [], np.zeros(len(segs), np.int64)
    for s, ranges in enumerate(segs):
        for t, lo, hi in ranges:
            a, z = int(off[t]), int(off[t + 1])
            r = np.arange(a, z)[lo:hi]
            take.append(r)
            seg_len[s] += r.size
    tok = tok_all[np.concatenate(take)] if take else np.empty(0, np.uint64)
    soff = np.zeros(len(segs) + 1, np.int64)
    np.cumsum(seg_len, out=soff[1:])
    h, start = ngram_hashes(tok, soff, n)
    seg = np.searchsorted(soff, start, side="right") - 1
    item = np.asarray(seg_item, np.int64)[seg] if seg.size else np.empty(0, np.int64)
    order = np.lexsort((start, item, h))  # by hash, then first item, first position
    return Index(n=n, hashes=h[order], entry_item=item[order].astype(np.int64), entry_pos=start[order],
                 item_tok=tok, item_bench=np.asarray(item_bench, np.int64), item_label=item_label, benches=benches)
