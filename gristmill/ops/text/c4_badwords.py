"""C4's bad-words filter with datatrove's name, params and defaults (``C4BadWordsFilter``).

A document is flagged when its lower-cased text contains a bad word of its language; for languages
written without spaces (ja, th, zh) any occurrence counts, for the others the word must be flanked by a
non-word character or the text's start/end. Flagged documents are removed, except a ``keep_fraction``
of them. Columnar: one RE2 alternation per language over ``utf8_lower`` of the column.

Lists: datatrove downloads LDNOOBW at run time; we ship the LDNOOBW-derived lists of
``gristmill/resources/words/flagged_words.json.gz`` (24 languages, see resources/README.md) or read the
user's LDNOOBW checkout (``badwords_dir``: one file per language code, one word per line).
Variants (see docs/ops-text.md): the ``keep_fraction`` draw is a hash of (seed, row id) instead of a
sequential random stream, so the result does not depend on sharding; Python's ``\\W`` becomes RE2's
``[^\\p{L}\\p{N}_]`` (identical except for the few numeric-valued ideographs that are not in \\p{N}).
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...registry import register
from ..base import Filter, Params
from .word_lists import load_words

# C4's allowlist: common sub-words of languages without spaces (applied to every language, as datatrove).
ALLOWLIST = {"ja": {"sm", "グロ", "女の子"}, "zh": {"性"}}
NO_SPACE_LANGS = ("ja", "th", "zh")
_NONWORD = r"[^\p{L}\p{N}_]"


def badword_pattern(words, lang: str) -> str | None:
    """The RE2 pattern datatrove builds for ``lang`` (None for an empty list)."""
    allowed = set().union(*ALLOWLIST.values())
    words = sorted({w.strip() for w in words if w.strip()} - allowed)
    if not words:
        return None
    alt = "|".join(re.escape(w) for w in words)
    if lang in NO_SPACE_LANGS:
        return f"(?:{alt})"
    return f"(?:{_NONWORD}|^)(?:{alt})(?:{_NONWORD}|$)"


def _read_dir(path: str) -> dict[str, list[str]]:
    out = {}
    for p in sorted(Path(path).iterdir()):
        if p.is_file() and not p.name.startswith("."):
            out[p.stem] = [ln.strip() for ln in p.read_text("utf-8").splitlines() if ln.strip()]
    return out


def language_column(batch: pa.RecordBatch, key: str | None, default: str) -> np.ndarray:
    """Per-row language: ``key`` (dotted) if given, else stats ``lang`` (language_id_score_filter), then a
    ``language`` field, then ``metadata.language``; ``default`` where missing."""
    keys = [key] if key else ["__stats__.lang", "language", "metadata.language"]
    out = None
    for k in keys:
        col = C.get_field(batch, k)
        if col is not None:
            out = col if out is None else pc.coalesce(out, col)
    if out is None:
        return np.full(batch.num_rows, default, dtype=object)
    return np.asarray(pc.fill_null(pc.cast(out, pa.string()), default).to_numpy(zero_copy_only=False), dtype=object)


def uniform_from_ids(ids: pa.Array, seed: int | None) -> np.ndarray:
    """A deterministic U[0,1) value per row from (seed, row id)."""
    import xxhash
    s = 0 if seed is None else int(seed)
    vals = [xxhash.xxh64_intdigest(str(i).encode(), seed=s) for i in ids.to_pylist()]
    return (np.asarray(vals, dtype=np.uint64) >> np.uint64(11)).astype(np.float64) / float(1 << 53)


@register("c4_badwords_filter")
class C4BadWordsFilter(Filter):
    """Remove documents containing a bad word of their language (C4 / datatrove). Stats:
    ``c4_badwords`` (1 found, 0 none, -1 no list for the language)."""

    class Params(Params):
        keep_fraction: float = Field(0.0, ge=0.0, le=1.0, description="Fraction of flagged documents to keep.")
        fail_on_missing_language: bool = Field(True, description="Error when a document's language has no list "
                                                                 "(else keep it).")
        seed: int | None = Field(None, description="Seed of the keep_fraction draw (hashed with the row id).")
        default_language: str = Field("en", description="Language of documents without one.")
        language_key: str | None = Field(None, description="Field holding the language (default: stats.lang, "
                                                           "language, metadata.language).")
        badwords_dir: str | None = trust.path_param(
            "read", None, description="Directory of per-language lists (LDNOOBW layout: a "
                                      "file per language code); default: shipped lists.")

    stats_keys = ("c4_badwords",)

    def _patterns(self) -> dict[str, str | None]:
        def load():
            lists = _read_dir(self.params.badwords_dir) if self.params.badwords_dir else load_words("flagged_words")
            return {lang: badword_pattern(ws, lang) for lang, ws in lists.items() if lang != "all"}
        return self.resource("patterns", load)

    def compute_stats(self, batch):
        pats = self._patterns()
        langs = language_column(batch, self.params.language_key, self.params.default_language)
        found = np.zeros(batch.num_rows, np.int8)
        text = self.text(batch)
        lowered = None
        for lang in np.unique(langs.astype(str)):
            rows = np.flatnonzero(langs == lang)
            if lang not in pats:
                if self.params.fail_on_missing_language:
                    raise ValueError(f'There is no badwords list for "{lang}" (have: {sorted(pats)}); set '
                                     "fail_on_missing_language=False to keep such documents")
                found[rows] = -1
                continue
            if pats[lang] is None:
                continue
            if lowered is None:
                lowered = pc.utf8_lower(pc.fill_null(text, ""))
            sub = lowered if len(rows) == batch.num_rows else lowered.take(pa.array(rows))
            hit = pc.match_substring_regex(sub, pats[lang]).to_numpy(zero_copy_only=False)
            found[rows] = hit.astype(np.int8)
        return C.with_stats(batch, {"c4_badwords": found})

    def _flagged_kept(self, batch) -> tuple[np.ndarray, np.ndarray]:
        found = C.get_stat(batch, "c4_badwords").to_numpy(zero_copy_only=False)
        flagged = found == 1
        spared = np.zeros(len(found), bool)
        if self.params.keep_fraction > 0 and flagged.any():
            ids = C.get_field(batch, C.ID)
            if ids is None:
                raise KeyError("c4_badwords_filter: keep_fraction needs an 'id' column")
            spared = flagged & (uniform_from_ids(ids, self.params.seed) < self.params.keep_fraction)
        return flagged, spared

    def keep(self, batch):
        flagged, spared = self._flagged_kept(batch)
        return ~flagged | spared

    def reason(self, removed):
        return "document_removed_with_badwords"
