"""Data-Juicer's text filters with its names, params, defaults and stats keys, as compiled kernels over
the column (characters via the shared code-point tables, words via Data-Juicer's split-and-strip rule).

Keep rule everywhere: ``min <= stat <= max`` (Data-Juicer's get_keep_boolean). Per-row Python is used
only where a library does the work per text: SentencePiece pieces (``tokenization``, one batch call), HF
tokenizers (batch call), KenLM scoring.
"""
from __future__ import annotations

import gzip
import json
import sys
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numba as nb
import numpy as np
import pyarrow as pa
from pydantic import Field

from ...core import columns as C
from ...core import trust
from ...registry import register
from ..base import Filter, Params, RangeFilter
from . import charclass as cc
from . import words as W


def _decode(op, batch):
    return cc.decode(op.text(batch))


@nb.njit(cache=True)
def _count_flag(cps, cpo, tab, flag):
    n = len(cpo) - 1
    out = np.zeros(n, np.int64)
    for d in range(n):
        c = 0
        for i in range(cpo[d], cpo[d + 1]):
            if tab[cps[i]] & flag:
                c += 1
        out[d] = c
    return out


def _ratio(a, b):
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    return np.where(b > 0, a / np.where(b > 0, b, 1), 0.0)


# Data-Juicer's default tokenizer for alphanumeric_filter's tokenization (a Hugging Face model name)
DJ_TOKENIZER = "EleutherAI/pythia-6.9b-deduped"


@register("alphanumeric_filter")
class AlphanumericFilter(RangeFilter):
    """Keep samples whose share of alphanumeric characters (``alnum_ratio``) is within range; with
    ``tokenization``, letters per tokenizer token (``alpha_token_ratio``) using ``hf_tokenizer``."""

    stat = "alnum_ratio"
    inputs = ("{text_key}",)
    outputs = ("stats.alnum_ratio", "stats.alpha_token_ratio")

    class Params(Params):
        tokenization: bool = Field(False, description="Count letters per token instead of per character.")
        min_ratio: float = Field(0.25, description="Minimum ratio.")
        max_ratio: float = Field(sys.maxsize, description="Maximum ratio.")
        hf_tokenizer: str = trust.path_param(
            "model", DJ_TOKENIZER,
            description="With tokenization: a tokenizer.json path (or a directory holding one), or a Hugging Face "
                        "name found in the model store (Data-Juicer's default name; never downloaded).")

    def __init__(self, **params):
        super().__init__(**params)
        self.stat = "alpha_token_ratio" if self.params.tokenization else "alnum_ratio"
        from ...models import require
        require(self.models())

    def models(self) -> list[str]:
        return [self.params.hf_tokenizer] if self.params.tokenization and _store_name(self.params.hf_tokenizer) else []

    def compute_stats(self, batch):
        cps, cpo = _decode(self, batch)
        n = np.diff(cpo)
        if self.params.tokenization:
            alpha = _count_flag(cps, cpo, cc.table(), cc.ALPHA)
            counts = token_counts(self, batch)
            return C.with_stats(batch, {self.stat: _ratio(alpha, counts)})
        alnum = _count_flag(cps, cpo, cc.table(), cc.ALNUM)
        return C.with_stats(batch, {self.stat: _ratio(alnum, n)})


@nb.njit(cache=True)
def _line_stats(cps, cpo, tab):
    """(number of lines as str.splitlines, longest line length)."""
    n = len(cpo) - 1
    lines = np.zeros(n, np.int64)
    longest = np.zeros(n, np.int64)
    for d in range(n):
        a, b = cpo[d], cpo[d + 1]
        s = a
        i = a
        while i <= b:
            if i == b or (tab[cps[i]] & cc.LINEBREAK):
                if i == b and s == b:
                    break
                lines[d] += 1
                if i - s > longest[d]:
                    longest[d] = i - s
                if i < b and cps[i] == 13 and i + 1 < b and cps[i + 1] == 10:
                    i += 1
                s = i + 1
            i += 1
    return lines, longest


class _LineLengthFilter(RangeFilter):
    """Shared by the two line-length filters: one kernel pass gives line count and longest line."""

    lo_param, hi_param = "min_len", "max_len"
    inputs = ("{text_key}",)

    def compute_stats(self, batch):
        cps, cpo = _decode(self, batch)
        lines, longest = _line_stats(cps, cpo, cc.table())
        return C.with_stats(batch, {self.stat: self.measure(np.diff(cpo), lines, longest)})


@register("average_line_length_filter")
class AverageLineLengthFilter(_LineLengthFilter):
    """Keep samples whose average line length (text length / number of lines) is within range."""

    stat = "avg_line_length"

    class Params(Params):
        min_len: int = Field(10, description="Minimum average line length.")
        max_len: int = Field(sys.maxsize, description="Maximum average line length.")

    @staticmethod
    def measure(lengths, lines, longest):
        return _ratio(lengths, lines)


@register("maximum_line_length_filter")
class MaximumLineLengthFilter(_LineLengthFilter):
    """Keep samples whose longest line length is within range."""

    stat = "max_line_length"

    class Params(Params):
        min_len: int = Field(10, description="Minimum length of the longest line.")
        max_len: int = Field(sys.maxsize, description="Maximum length of the longest line.")

    @staticmethod
    def measure(lengths, lines, longest):
        return longest


@nb.njit(cache=True)
def _char_rep(cps, cpo, n_):
    n = len(cpo) - 1
    out = np.zeros(n, np.float64)
    B = np.uint64(W.HMUL)
    for d in range(n):
        a, b = cpo[d], cpo[d + 1]
        if b - a < n_:
            continue
        pw = np.uint64(1)
        for _ in range(n_ - 1):
            pw *= B
        cnt = dict()
        h = np.uint64(0)
        for i in range(a, a + n_):
            h = h * B + np.uint64(cps[i] + 1)
        cnt[np.int64(h)] = 1
        for i in range(a + n_, b):
            h = (h - np.uint64(cps[i - n_] + 1) * pw) * B + np.uint64(cps[i] + 1)
            k = np.int64(h)
            if k in cnt:
                cnt[k] += 1
            else:
                cnt[k] = 1
        freqs = np.empty(len(cnt), np.int64)
        j = 0
        ones = 0
        for v in cnt.values():
            freqs[j] = v
            if v == 1:
                ones += 1
            j += 1
        total = freqs.sum()
        num_rep = min(int(np.sqrt(len(freqs))), len(freqs) - ones)
        freqs = np.sort(freqs)[::-1]
        out[d] = freqs[:num_rep].sum() / total if total else 0.0
    return out


@register("character_repetition_filter")
class CharacterRepetitionFilter(RangeFilter):
    """Keep samples whose character n-gram repetition ratio (share of n-gram occurrences taken by the
    sqrt(#distinct) most frequent repeated n-grams) is within range."""

    stat = "char_rep_ratio"
    inputs = ("{text_key}",)

    class Params(Params):
        rep_len: int = Field(10, gt=0, description="Character n-gram length.")
        min_ratio: float = Field(0.0, description="Minimum ratio.")
        max_ratio: float = Field(0.5, description="Maximum ratio.")

    def compute_stats(self, batch):
        cps, cpo = _decode(self, batch)
        return C.with_stats(batch, {self.stat: _char_rep(cps, cpo, self.params.rep_len)})


@nb.njit(cache=True, inline="always")
def _mix(x):
    """splitmix64's finaliser. An n-gram's hash combines its words' hashes; combined as they are, the
    polynomial string hashes are linear, so ("m", "en") and ("c", "on") collide (only m + e = c + o
    matters): mixed first, they do not."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@nb.njit(cache=True)
def _word_rep(cps, ws, we, off, low, n_):
    n = len(off) - 1
    out = np.zeros(n, np.float64)
    B = np.uint64(W.HMUL)
    for d in range(n):
        w0, w1 = off[d], off[d + 1]
        m = w1 - w0 - n_ + 1
        if m <= 0:
            continue
        hs = np.empty(w1 - w0, np.uint64)
        for k in range(w0, w1):
            hs[k - w0] = _mix(np.uint64(W.lower_hash(cps, ws[k], we[k], low)))
        cnt = dict()
        for i in range(m):
            h = np.uint64(0)
            for j in range(n_):
                h = h * B + hs[i + j]
            k = np.int64(h)
            if k in cnt:
                cnt[k] += 1
            else:
                cnt[k] = 1
        rep = 0
        for v in cnt.values():
            if v > 1:
                rep += v
        out[d] = rep / m
    return out


class _WordParams(Params):
    lang: str = Field("en", description="Language of the samples (picks {lang}.sp.model with tokenization).")
    tokenization: bool = Field(False, description="Words are the pieces of the lang's SentencePiece model "
                                                  "({lang}.sp.model from the model store), as in Data-Juicer, "
                                                  "instead of a split on whitespace.")


class _WordFilter(RangeFilter):
    """A filter on Data-Juicer words: whitespace-split, or with ``tokenization`` the pieces of the
    ``{lang}.sp.model`` SentencePiece model from the store (required at load, like Data-Juicer's
    ``prepare_model``)."""

    inputs = ("{text_key}",)

    def __init__(self, **params):
        super().__init__(**params)
        from ...models import require
        require(self.models())

    def models(self) -> list[str]:
        return [f"{self.params.lang}.sp.model"] if self.params.tokenization else []

    def _sp(self):
        import sentencepiece
        from ... import models as store
        return sentencepiece.SentencePieceProcessor(model_file=store.resolve(f"{self.params.lang}.sp.model"))

    def word_spans(self, batch):
        """(code points, word starts, word ends, per-row word offsets) of the text column."""
        if self.params.tokenization:
            return W.sp_word_spans(self.text(batch), self.resource("sp", self._sp))
        cps, cpo = cc.decode(self.text(batch))
        ws, we, off = W.dj_words(cps, cpo, strip=True)
        return cps, ws, we, off


@register("words_num_filter")
class WordsNumFilter(_WordFilter):
    """Keep samples whose number of words is within [min_num, max_num] (Data-Juicer's words: split on
    space, newline and tab with special characters stripped from their edges; with ``tokenization``, the
    pieces of the lang's SentencePiece model, as Data-Juicer counts them)."""

    stat = "num_words"

    class Params(_WordParams):
        min_num: int = Field(10, description="Minimum number of words.")
        max_num: int = Field(sys.maxsize, description="Maximum number of words.")

    def compute_stats(self, batch):
        _, _, _, off = self.word_spans(batch)
        return C.with_stats(batch, {self.stat: pa.array(np.diff(off).astype(np.int64))})


@register("word_repetition_filter")
class WordRepetitionFilter(_WordFilter):
    """Keep samples whose word n-gram repetition ratio (occurrences of n-grams seen more than once / all
    n-grams; words lower-cased and stripped of special characters) is within range."""

    stat = "word_rep_ratio"

    class Params(_WordParams):
        rep_len: int = Field(10, gt=0, description="Word n-gram length.")
        min_ratio: float = Field(0.0, description="Minimum ratio.")
        max_ratio: float = Field(0.5, description="Maximum ratio.")

    def compute_stats(self, batch):
        cps, ws, we, off = self.word_spans(batch)
        return C.with_stats(batch, {self.stat: _word_rep(cps, ws, we, off, W.lower_table(), self.params.rep_len)})


@register("special_characters_filter")
class SpecialCharactersFilter(RangeFilter):
    """Keep samples whose share of special characters (Data-Juicer's SPECIAL_CHARACTERS: punctuation,
    digits, whitespace, common symbols and emoji) is within range."""

    stat = "special_char_ratio"
    inputs = ("{text_key}",)

    class Params(Params):
        min_ratio: float = Field(0.0, description="Minimum ratio.")
        max_ratio: float = Field(0.25, description="Maximum ratio.")

    def compute_stats(self, batch):
        cps, cpo = _decode(self, batch)
        return C.with_stats(batch, {self.stat: _ratio(_count_flag(cps, cpo, cc.table(), cc.DJ_SPECIAL),
                                                      np.diff(cpo))})


# -- word lists -------------------------------------------------------------------------------------

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


@nb.njit(cache=True)
def _in_set_ratio(cps, ws, we, off, low, wset, aug_sizes):
    n = len(off) - 1
    out = np.zeros(n, np.float64)
    B = np.uint64(W.HMUL)
    for d in range(n):
        w0, w1 = off[d], off[d + 1]
        total = w1 - w0
        hit = 0
        for k in range(w0, w1):
            if W.lower_hash(cps, ws[k], we[k], low) in wset:
                hit += 1
        for g in aug_sizes:  # word augmentation: joined groups of g consecutive words
            for k in range(w0, w1 - g + 1):
                h = np.uint64(0xCBF29CE484222325)
                for j in range(k, k + g):
                    for i in range(ws[j], we[j]):
                        h = h * B + np.uint64(low[cps[i]] + 1)
                total += 1
                if np.int64(h) in wset:
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


# -- tokenizer / model based ------------------------------------------------------------------------

def load_tokenizer(path: str):
    from tokenizers import Tokenizer
    p = Path(path)
    if p.is_dir():
        p = p / "tokenizer.json"
    if p.suffix == ".gz":
        with gzip.open(p, "rt", encoding="utf-8") as f:
            return Tokenizer.from_str(f.read())
    return Tokenizer.from_file(str(p))


def _store_name(ref: str) -> bool:
    """A Hugging Face name to look up in the model store, not a local path."""
    from ... import models as store
    return not Path(ref).exists() and store.is_hf_dir_name(ref)


def _tokenizer_path(ref: str) -> str:
    from ... import models as store
    return str(store.find(ref) or ref) if _store_name(ref) else ref


def token_counts(op, batch) -> np.ndarray:
    tok = op.resource("tokenizer", lambda: load_tokenizer(_tokenizer_path(op.params.hf_tokenizer)))
    texts = [t or "" for t in op.text(batch).to_pylist()]
    enc = tok.encode_batch(texts, add_special_tokens=False)
    return np.array([len(e.ids) for e in enc], np.int64)


@register("token_num_filter")
class TokenNumFilter(RangeFilter):
    """Keep samples whose number of tokens (a Hugging Face tokenizer.json the user points to; never
    downloaded) is within range."""

    stat = "num_token"
    inputs = ("{text_key}",)
    lo_param, hi_param = "min_num", "max_num"

    class Params(Params):
        hf_tokenizer: str = trust.path_param(
            "model", ..., description="Path to a tokenizer.json (or .json.gz, or a directory).")
        min_num: int = Field(10, description="Minimum number of tokens.")
        max_num: int = Field(sys.maxsize, description="Maximum number of tokens.")

    def compute_stats(self, batch):
        return C.with_stats(batch, {self.stat: token_counts(self, batch)})


@register("perplexity_filter")
class PerplexityFilter(RangeFilter):
    """Keep samples whose KenLM perplexity is within range. The model is ``model_path``, or else
    Data-Juicer's ``{lang}.arpa.bin`` (or ``{lang}.arpa``) from the model store (``gristmill models``; a
    missing one fails the recipe before any work starts, naming the command that adds it). Words: the
    ``sp_model_path`` SentencePiece pieces; without one, a store model uses ``{lang}.sp.model`` when the
    store has it (Data-Juicer's tokenization) and otherwise, like an explicit ``model_path``, splits words
    on spaces (perplexities then differ from Data-Juicer's). Perplexity is Data-Juicer's:
    10 ** (-sum(line log10 scores) / (words + one end-of-line per line)), rounded to 0.1."""

    stat = "perplexity"
    inputs = ("{text_key}",)
    lo_param, hi_param = "min_ppl", "max_ppl"

    class Params(Params):
        lang: str = Field("en", description="Language: picks {lang}.arpa.bin / {lang}.sp.model in the model store "
                                            "when model_path is not given.")
        min_ppl: float = Field(0, description="Minimum perplexity.")
        max_ppl: float = Field(1500, description="Maximum perplexity.")
        model_path: str | None = trust.path_param(
            "model", None, description="KenLM model (.arpa or .binary); default: {lang}.arpa.bin "
                                       "from the model store.")
        sp_model_path: str | None = trust.path_param(
            "model", None, description="sentencepiece model used to split words (default: "
                                       "{lang}.sp.model from the store, with a store model).")

    def __init__(self, **params):
        super().__init__(**params)
        import importlib.util
        if importlib.util.find_spec("kenlm") is None:  # an extra: kenlm builds from source (a C++ compiler)
            raise ValueError("perplexity_filter needs KenLM, which is not installed: pip install "
                             "'gristmill[perplexity]' (kenlm builds from source: it needs a C++ compiler)")
        from ...models import require
        require(self.models())

    def models(self) -> list[str]:
        return [] if self.params.model_path else [f"{self.params.lang}.arpa.bin"]

    def optional_models(self) -> list[str]:
        return [] if self.params.model_path or self.params.sp_model_path else [f"{self.params.lang}.sp.model"]

    def _models(self):
        import kenlm
        from ... import models as store
        lm = kenlm.Model(self.params.model_path or store.resolve(f"{self.params.lang}.arpa.bin"))
        sp_path = self.params.sp_model_path
        if sp_path is None and not self.params.model_path:
            found = store.find(f"{self.params.lang}.sp.model")
            sp_path = str(found) if found else None
        sp = None
        if sp_path:
            import sentencepiece
            sp = sentencepiece.SentencePieceProcessor(model_file=sp_path)
        return lm, sp

    def compute_stats(self, batch):
        lm, sp = self.resource("models", self._models)
        out = np.zeros(batch.num_rows)
        for i, t in enumerate(self.text(batch).to_pylist()):
            t = t or ""
            words = sp.encode_as_pieces(t) if sp is not None else t.split(" ")
            text = " ".join(w for w in words if w) if sp is None else " ".join(words)
            logits, length = 0.0, 0
            for line in text.splitlines():
                logits += lm.score(line)
                length += len(line.split()) + 1
            out[i] = round(10.0 ** (-logits / length), 1) if length else 0.0
        return C.with_stats(batch, {self.stat: out})


@register("suffix_filter")
class SuffixFilter(Filter):
    """Keep samples whose file suffix (field ``suffix_key``, Data-Juicer's ``__dj__suffix__``) is in
    ``suffixes``; keeps everything when ``suffixes`` is empty."""

    inputs = ("{suffix_key}",)
    outputs = ()

    class Params(Params):
        suffixes: str | list[str] = Field([], description="Suffixes to keep, e.g. ['.txt', '.pdf'].")
        suffix_key: str = Field("__dj__suffix__", description="Field holding each sample's suffix.")

    def _suffixes(self):
        s = self.params.suffixes
        return [s] if isinstance(s, str) else list(s or [])

    def compute_stats(self, batch):
        return batch

    def keep(self, batch):
        suf = self._suffixes()
        if not suf:
            return np.ones(batch.num_rows, bool)
        col = C.get_field(batch, self.params.suffix_key)
        if col is None:
            raise KeyError(f"suffix_filter: field {self.params.suffix_key!r} not in batch")
        vals = np.asarray(col.to_pylist(), dtype=object)
        return np.isin(vals, suf)

    def reason(self, removed):
        return "suffix not in list"
