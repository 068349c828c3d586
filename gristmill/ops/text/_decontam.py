"""The n-gram index behind ngram_decontamination_filter: datatrove's text normalisation (columnar), word
n-gram hashes, the index over benchmark files and the lookup of a batch of documents in it.

Normalisation follows datatrove's ``simplify_text`` with its default ``TextNormConfig`` (lowercase; digit
runs, with one decimal part, become ``0``; datatrove's punctuation characters become spaces; whitespace runs
collapse; NFD with the combining marks dropped), written as Arrow kernels. Words are the space-separated
tokens of the normalised text (datatrove's English NLTK tokenizer splits the same once punctuation is gone,
save a few contractions such as ``cannot``).

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
_SPACE = r"[\t\n\x0b\x0c\r\x1c-\x1f\x{85}\p{Z}]+"


def normalize(arr) -> pa.Array:
    """datatrove's ``simplify_text`` (default config) of every string; null → ""."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        arr = pc.cast(arr, pa.large_string())
    t = pc.fill_null(arr, "")
    t = pc.utf8_lower(t)
    t = pc.replace_substring_regex(t, _NUMBERS, "0")
    t = pc.replace_substring_regex(t, _PUNCT, " ")
    t = pc.replace_substring_regex(t, _SPACE, " ")
    t = pc.utf8_trim(t, " ")
    t = pc.utf8_normalize(t, "NFD")
    t = pc.replace_substring_regex(t, r"\p{Mn}+", "")
    return pc.utf8_trim(t, " ")


def words(arr) -> tuple[pa.Array, np.ndarray]:
    """(flat word array, row offsets into it) of the normalised strings."""
    parts = pc.split_pattern(normalize(arr), " ")
    lens = pc.list_value_length(parts).to_numpy(zero_copy_only=False).astype(np.int64)
    flat = pc.list_flatten(parts)
    empty = pc.equal(pc.utf8_length(flat), 0).to_numpy(zero_copy_only=False)
    if empty.any():  # "" (an empty text) splits into one empty word
        row = np.repeat(np.arange(lens.size), lens)
        lens = lens - np.bincount(row[empty], minlength=lens.size)
        flat = flat.filter(pa.array(~empty))
    off = np.zeros(lens.size + 1, np.int64)
    np.cumsum(lens, out=off[1:])
    return flat, off


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


def build_index(paths: list[str], fields, id_fields, n: int, overlap: bool) -> Index:
    """The index of every n-gram of every item of every file, in one pass over the files."""
    benches = bench_names(list(paths))
    texts: list[str] = []
    seg_item: list[int] = []  # the item of each text segment (a whole item, or one value without overlap)
    item_bench: list[int] = []
    item_label: list[str] = []
    for b, path in enumerate(paths):
        for k, item in enumerate(read_items(path)):
            vals = item_values(item, fields)
            label = next((str(item[f]) for f in id_fields if isinstance(item, dict) and item.get(f) not in (None, "")),
                         str(k))
            it = len(item_label)
            item_bench.append(b)
            item_label.append(label)
            segs = [" ".join(vals)] if overlap else vals
            texts.extend(segs)
            seg_item.extend([it] * len(segs))
    flat, off = words(pa.array(texts, pa.large_string()))
    tok = word_hashes(flat)
    h, start = ngram_hashes(tok, off, n)
    seg = np.searchsorted(off, start, side="right") - 1
    item = np.asarray(seg_item, np.int64)[seg] if seg.size else np.empty(0, np.int64)
    order = np.lexsort((start, item, h))  # by hash, then first item, first position
    return Index(n=n, hashes=h[order], entry_item=item[order].astype(np.int64), entry_pos=start[order],
                 item_tok=tok, item_bench=np.asarray(item_bench, np.int64), item_label=item_label, benches=benches)
