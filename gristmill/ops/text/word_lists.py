"""stopwords_filter and flagged_words_filter: the share of a sample's words found in a word list (shipped
lists, or Data-Juicer's asset dirs), and ``load_words``, which other ops read lists with.
Keep rule: ``min <= stat <= max`` (Data-Juicer's get_keep_boolean), declared on the ``Filter`` base."""
from __future__ import annotations

import gzip
import json
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...registry import register
from .._lazy_jit import njit  # numba imported on a kernel's first use (issue 25)
from . import words as W
from ._dj_common import _WordFilter, _WordParams


@lru_cache(maxsize=8)
def load_words(kind: str, words_dir: str | None = None) -> dict[str, list[str]]:
    """{lang: words} from the shipped lists (or *.json files containing ``kind`` in ``words_dir``, as
    Data-Juicer's asset dirs), plus "all" as the union."""
    if words_dir:
        out: dict[str, list[str]] = {}
        for p in sorted(Path(words_dir).glob("*.json")):
            if kind in p.name:
                for k, v in json.loads(p.read_text("utf-8")).items():
                    out.setdefault(k, []).extend(v)
    else:
        f = resources.files("gristmill.resources.words") / f"{kind}.json.gz"
        with gzip.open(f.open("rb"), "rt", encoding="utf-8") as fh:
            out = json.load(fh)
    if "all" not in out:
        out["all"] = sorted({w for v in out.values() for w in v})
    return out


@njit(cache=True)
def _in_set_ratio(cps, ws, we, off, low, wset, aug_sizes):
    n = len(off) - 1
    out = np.zeros(n, np.float64)
    B = np.uint64(W.HMUL)
    for d in range(n):
        w0, w1 = off[d], off[d + 1]
        total = w1 - w0
        hit = 0
        for k in range(w0, w1):
            if W.hm_find(wset, W.lower_hash(cps, ws[k], we[k], low)) >= 0:
                hit += 1
        for g in aug_sizes:  # word augmentation: joined groups of g consecutive words
            for k in range(w0, w1 - g + 1):
                h = np.uint64(0xCBF29CE484222325)
                for j in range(k, k + g):
                    for i in range(ws[j], we[j]):
                        h = h * B + np.uint64(low[cps[i]] + 1)
                total += 1
                if W.hm_find(wset, np.int64(h)) >= 0:
                    hit += 1
        out[d] = min(1.0, hit / total) if total else 0.0
    return out


class _ListParams(_WordParams):
    use_words_aug: bool = Field(False, description="Also count joined groups of consecutive words (for zh/vi).")
    words_aug_group_sizes: list[int] = Field([2], description="Group sizes for word augmentation.")
    words_aug_join_char: str = Field("", description="Join character for word augmentation (only '' supported).")


class _ListFilter(_WordFilter):
    word_list = ""  # the shipped list's name (not ``kind``: that is the op kind engines and `gristmill ops` use)
    dir_param = ""

    def __init__(self, **params):
        super().__init__(**params)
        if self.params.use_words_aug and self.params.words_aug_join_char:
            raise ValueError("words_aug_join_char: only '' is supported")
        lists = load_words(self.word_list, getattr(self.params, self.dir_param))
        if self.params.lang not in lists:
            raise ValueError(f"no {self.word_list} list for lang {self.params.lang!r} (have: {sorted(lists)})")
        self.wset = W.word_set(lists[self.params.lang])

    def compute_stats(self, batch):
        cps, ws, we, off = self.word_spans(batch)
        aug = np.array(self.params.words_aug_group_sizes if self.params.use_words_aug else [], np.int64)
        return C.with_stats(batch, {self.stat: _in_set_ratio(cps, ws, we, off, W.lower_table(), self.wset, aug)})


@register("stopwords_filter")
class StopWordsFilter(_ListFilter):
    """Keep samples whose stop-word ratio is within range (shipped stopwords-iso lists, 58 languages)."""

    stat = "stopwords_ratio"
    word_list = "stopwords"
    dir_param = "stopwords_dir"

    class Params(_ListParams):
        min_ratio: float = Field(0.3, description="Minimum stop-word ratio.")
        max_ratio: float = Field(1.0, description="Maximum stop-word ratio.")
        stopwords_dir: str | None = trust.path_param(
            "read", None, description="Directory of *stopwords*.json lists (default: shipped).")


@register("flagged_words_filter")
class FlaggedWordsFilter(_ListFilter):
    """Keep samples whose flagged-word ratio is within range (shipped LDNOOBW-derived lists)."""

    stat = "flagged_words_ratio"
    word_list = "flagged_words"
    dir_param = "flagged_words_dir"

    class Params(_ListParams):
        min_ratio: float = Field(0.0, description="Minimum flagged-word ratio.")
        max_ratio: float = Field(0.045, description="Maximum flagged-word ratio.")
        flagged_words_dir: str | None = trust.path_param(
            "read", None, description="Directory of *flagged_words*.json lists.")
