"""ngram_decontamination_filter: remove documents that share a word n-gram with a benchmark item
(datatrove's n-gram decontamination, over local benchmark files)."""
from __future__ import annotations

from typing import Literal

import numpy as np
import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, field_validator

from ...core import columns as C
from ...core import trust
from ...registry import register
from ..base import Filter, Params
from . import _decontam as D

# the prompt's fields, then the gold answer's (their overlap n-grams are datatrove's), then the choices
DEFAULT_FIELDS = ["context", "passage", "question", "query", "prompt", "input", "goal", "text", "answer", "answers",
                  "output", "target", "label_text", "choices", "options"]


class NormConfig(BaseModel):
    """datatrove's ``TextNormConfig``: the same switches and defaults."""
    model_config = ConfigDict(extra="forbid")
    lowercase: bool = True
    norm_whitespace: bool = True
    remove_punctuation: bool = True
    norm_unicode_diacritics: bool = True
    norm_numbers: bool = True
    norm_weekdays: bool = False
    norm_monthnames: bool = False


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
    reason and ``decontam_benchmark`` per benchmark. datatrove's other settings map over: ``label_fields`` /
    ``query_fields`` (its gold / query split, with ``find_query_ngrams`` and ``find_overlap_ngrams``),
    ``norm_config`` (its ``TextNormConfig``) and ``word_tokenizer: spacy`` (its spaCy word tokenizer for
    ``language``; the default splits on whitespace only)."""

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
        label_fields: list[str] | None = Field(
            None, description="datatrove's gold / query split: the fields holding an item's gold answers (each "
                              "string one gold); with it, fields / overlap are not used.")
        query_fields: list[str] | None = Field(
            None, description="datatrove's query (prompt): these fields' texts joined, in order.")
        choices_field: str | None = Field(
            None, description="Where a gold is an index or letter (MMLU's answer: 2, ARC's answerKey: B): the "
                              "field of the choices it points into.")
        find_query_ngrams: bool = Field(False, description="Split mode: also the query's own n-grams "
                                                           "(datatrove's find_query_ngrams).")
        find_overlap_ngrams: bool = Field(True, description="Split mode: the n-grams spanning the query's end and "
                                                            "a gold's start (datatrove's find_overlap_ngrams).")
        norm_config: NormConfig = Field(default_factory=NormConfig,
                                        description="datatrove's TextNormConfig switches.")
        word_tokenizer: Literal["whitespace", "spacy"] = Field(
            "whitespace", description="Words: whitespace-separated tokens of the normalised text, or spaCy's "
                                      "rule-based tokens of them (datatrove's tokenizer; needs spaCy).")
        language: str = Field("en", description="spaCy language of word_tokenizer: spacy.")

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
        if self.params.word_tokenizer == "spacy" and checking():
            self._splitter()  # spaCy or the language missing fails the recipe at load

    def missing_libraries(self) -> list[str]:
        """``word_tokenizer: spacy`` needs spaCy; the default splits on whitespace."""
        from ...core import extras
        return extras.missing((*self.requires, *(("spacy",) if self.params.word_tokenizer == "spacy" else ())))

    def _norm(self) -> D.Norm:
        return D.Norm(**self.params.norm_config.model_dump())

    def _splitter(self) -> D.SpacySplitter | None:
        p = self.params
        if p.word_tokenizer != "spacy":
            return None
        return self.resource("decontam_spacy", lambda: D.SpacySplitter(p.language))

    def _index(self) -> D.Index:
        p = self.params
        spec = D.ItemSpec(fields=tuple(p.fields), overlap=p.overlap,
                          query_fields=None if p.query_fields is None else tuple(p.query_fields),
                          label_fields=None if p.label_fields is None else tuple(p.label_fields),
                          choices_field=p.choices_field, find_query=p.find_query_ngrams,
                          find_overlap=p.find_overlap_ngrams, id_fields=tuple(p.id_fields))
        return self.resource("decontam_index", lambda: D.build_index(p.benchmarks, spec, p.n, self._norm(),
                                                                     self._splitter()))

    def compute_stats(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        self.check_inputs(batch)
        index = self._index()
        flat, off = D.words(self.text(batch), self._norm(), self._splitter())
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
