"""ngram_decontamination_filter: remove documents that share a word n-gram with a benchmark item
(datatrove's n-gram decontamination, over local benchmark files)."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
from pydantic import Field, field_validator

from ...core import columns as C
from ...core import trust
from ...registry import register
from ..base import Filter, Params
from . import _decontam as D

# the prompt's fields, then the gold answer's (their overlap n-grams are datatrove's), then the choices
DEFAULT_FIELDS = ["context", "passage", "question", "query", "prompt", "input", "goal", "text", "answer", "answers",
                  "output", "target", "label_text", "choices", "options"]


@register("ngram_decontamination_filter")
class NgramDecontaminationFilter(Filter):
    """Remove documents that share an n-gram of ``n`` words with an item of a benchmark, as datatrove's
    ``NGramsDecontFilter`` does: text normalised as datatrove's ``simplify_text`` (lowercase, numbers → 0,
    punctuation → space, whitespace collapsed, diacritics dropped), words split on spaces. The benchmarks
    are local JSONL (.jsonl / .jsonl.gz) or Parquet files; an item's texts are its ``fields`` (a string, a
    list of strings such as choices, or a dict's ``text``); with ``overlap`` its n-grams run over the fields
    one after the other (datatrove's query + gold overlap n-grams), else inside each field. An item shorter
    than ``n`` words contributes nothing (datatrove's rule). The index of every file is built once per
    worker, on first use; every hit is verified word by word. A removed row's reason names the benchmark
    file and the item (its id field, else its record number from 0); the stats ``decontam_benchmark`` (""
    when clean), ``decontam_item`` and ``decontam_ngram`` say which, and the report counts removals per
    reason and ``decontam_benchmark`` per benchmark."""

    stats_keys = ("decontam_benchmark", "decontam_item", "decontam_ngram")
    inputs = ("{text_key}",)

    class Params(Params):
        benchmarks: list[str] = trust.path_param(
            "read", ..., min_length=1,
            description="Benchmark files: JSONL (.jsonl, .jsonl.gz) or Parquet, one item per record.")
        n: int = Field(13, ge=1, le=256, description="Words per n-gram.")
        fields: list[str] = Field(DEFAULT_FIELDS, min_length=1,
                                  description="Item fields whose texts are indexed, in order (absent ones skipped).")
        id_fields: list[str] = Field(["id", "question_id", "task_id", "idx"],
                                     description="Item fields naming the item in reasons (first present); else "
                                                 "the record number.")
        overlap: bool = Field(True, description="Also the n-grams that span consecutive fields of an item.")

        @field_validator("benchmarks", mode="before")
        @classmethod
        def _one(cls, v):
            return [v] if isinstance(v, str) else v

    def __init__(self, **params):
        super().__init__(**params)
        import os

        from ...models import checking
        for path in self.params.benchmarks if checking() else ():  # a missing file fails the recipe, not every row
            if not os.path.isfile(path):
                raise ValueError(f"{self.name}: benchmark file not found: {path}")

    def _index(self) -> D.Index:
        p = self.params
        return self.resource("decontam_index", lambda: D.build_index(p.benchmarks, p.fields, p.id_fields, p.n,
                                                                     p.overlap))

    def compute_stats(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        self.check_inputs(batch)
        index = self._index()
        flat, off = D.words(self.text(batch))
        tok = D.word_hashes(flat)
        m = batch.num_rows
        bench = np.full(m, "", object)
        item = np.full(m, "", object)
        gram = np.full(m, "", object)
        for row, pos, it in index.lookup(tok, off):
            bench[row] = index.benches[index.item_bench[it]]
            item[row] = index.item_label[it]
            gram[row] = " ".join(flat.slice(pos, index.n).to_pylist())
        return C.with_stats(batch, {"decontam_benchmark": pa.array(bench.tolist(), pa.string()),
                                    "decontam_item": pa.array(item.tolist(), pa.string()),
                                    "decontam_ngram": pa.array(gram.tolist(), pa.string())})

    def keep(self, batch: pa.RecordBatch):
        b = C.get_stat(batch, "decontam_benchmark").to_numpy(zero_copy_only=False)
        return np.array([not x for x in b], bool)

    def reason(self, removed: pa.RecordBatch):
        b = C.get_stat(removed, "decontam_benchmark").to_pylist()
        it = C.get_stat(removed, "decontam_item").to_pylist()
        return [f"benchmark {x} item {y}" for x, y in zip(b, it)]
