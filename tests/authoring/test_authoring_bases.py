"""The public op bases a contributor writes against: RangeFilter, RowFilter, RowMapper, op.apply and the
declared class attributes, on real text with exact values."""
import json
import subprocess
import sys
import zlib

import numpy as np
import pyarrow as pa
import pytest
import yaml
from pydantic import Field

from gm_testutil import REPO, SAMPLE, check_accounting, read_jsonl
from gristmill.core import columns as C
from gristmill.core.fused import FusedOp
from gristmill.ops.base import Filter, Grouper, Mapper, Op, Params, RowMapper
from gristmill.ops.base import Filter as RangeFilter, Filter as RowFilter  # the one Filter base
from gristmill.registry import create_op


class Vowels(RowFilter):
    """Share of vowels among letters (an example filter)."""

    stat = "vowel_ratio"
    inputs = ("{text_key}",)

    class Params(Params):
        min_ratio: float = Field(0.2)
        max_ratio: float = Field(0.6)

    def score(self, text):
        letters = [c for c in text.lower() if c.isalpha()]
        return sum(c in "aeiou" for c in letters) / len(letters) if letters else 0.0


class TitleWords(RowFilter):
    """Words in the ``title`` field (reads another field than the text: ``score_row``)."""

    stat = "title_words"
    stat_type = int
    inputs = ("{title_key}",)

    class Params(Params):
        title_key: str = Field("title")
        min_words: int = Field(2)

    def score_row(self, row):
        return len(row[self.params.title_key].split())


def test_row_filter_scores_keeps_and_gives_the_broken_bound():
    op = Vowels()
    kept, removed = op.apply([{"text": "banana"}, {"text": "rhythm"}, {"text": "aeiou"}, {"text": None}],
                             removed=True)
    assert kept == [{"text": "banana", "__stats__": {"vowel_ratio": 0.5}}]
    assert [(r["text"], r["__stats__"]["vowel_ratio"], r["__reason__"]) for r in removed] == [
        ("rhythm", 0.0, "vowel_ratio < 0.2"), ("aeiou", 1.0, "vowel_ratio > 0.6"), (None, 0.0, "vowel_ratio < 0.2")]
    assert (op.lo_param, op.hi_param) == ("min_ratio", "max_ratio")
    assert op.thresholds() == {"vowel_ratio": ("min_ratio", "max_ratio")}
    assert op.output_fields() == ["stats.vowel_ratio"] and op.input_fields() == ["text"]


def test_row_filter_on_another_field_with_int_stats():
    op = TitleWords()
    assert (op.lo_param, op.hi_param) == ("min_words", None)  # an open upper side
    batch = pa.RecordBatch.from_pylist([{"text": "x", "title": "A Tale of Two Cities"}, {"text": "y", "title": "Ulysses"}])
    kept, removed = op.apply(batch, removed=True)
    assert isinstance(kept, pa.RecordBatch) and kept.column("title").to_pylist() == ["A Tale of Two Cities"]
    assert C.get_stat(kept, "title_words").type == pa.int64() and C.get_stat(kept, "title_words").to_pylist() == [5]
    assert removed.column("__reason__").to_pylist() == ["title_words < 2"]
    with pytest.raises(KeyError, match=r"field\(s\) \['title'\] not in batch"):
        op.apply([{"text": "no title here"}])


def test_a_raising_score_rejects_only_its_row():
    class Strict(Vowels):
        def score(self, text):
            if "\ufffd" in text:
                raise ValueError("replacement character: the text was decoded badly")
            return super().score(text)

    batch = pa.RecordBatch.from_pylist([{"text": "banana"}, {"text": "bad \ufffd bytes"}, {"text": "papaya"}])
    res = FusedOp([Strict()]).run_batch(batch)
    assert res.batch.column("text").to_pylist() == ["banana", "papaya"]
    assert [(r.error_type, r.message, r.row["text"]) for r in res.rejects] == [
        ("ValueError", "replacement character: the text was decoded badly", "bad \ufffd bytes")]


def test_range_filter_needs_unambiguous_bounds():
    with pytest.raises(TypeError, match=r"several min_\* params \['min_a', 'min_b'\]; set lo_param"):
        class Two(RangeFilter):  # noqa: F841
            stat = "s"

            class Params(Params):
                min_a: float = 0
                min_b: float = 0

    class Chosen(RangeFilter):
        stat = "len"
        lo_param, hi_param = "min_b", None

        class Params(Params):
            min_a: float = 0
            min_b: float = 3

        def compute_stats(self, batch):
            return C.with_stats(batch, {"len": np.array([np.nan, 2.0, 4.0])})

    kept, removed = Chosen().apply([{"text": t} for t in "abc"], removed=True)
    assert [r["__stats__"]["len"] for r in kept] == [4.0]
    # NaN is out of range, whatever the bounds
    assert [r["__reason__"] for r in removed] == ["len out of range", "len < 3"]


class Shout(RowMapper):
    outputs = ("{text_key}", "old_len")

    def map(self, row):
        row["old_len"] = len(row["text"])
        row["text"] = row["text"].upper()
        row.pop("drop_me", None)
        return row


def test_row_mapper_changes_adds_and_drops_fields_and_leaves_the_rest_untouched():
    rows = [{"text": "hi", "meta": {"a": 1}, "drop_me": 1, "n": 5}, {"text": "yo", "meta": {"a": 1.5}, "n": 6}]
    batch = C.from_records(rows, strings=("text",))
    assert C.json_tag(batch.schema.field("meta")) == C.RAW  # 1 and 1.5: kept as raw JSON text
    out = Shout().apply(batch)
    assert out.schema.names == ["text", "meta", "n", "old_len"]
    assert out.schema.field("meta").equals(batch.schema.field("meta"), check_metadata=True)
    assert out.column("meta") is batch.column(1) or out.column("meta").equals(batch.column(1))
    assert C.to_pylist(out) == [{"text": "HI", "meta": {"a": 1}, "n": 5, "old_len": 2},
                                {"text": "YO", "meta": {"a": 1.5}, "n": 6, "old_len": 2}]

    class Bad(RowMapper):
        def map(self, row):
            return [row]

    with pytest.raises(TypeError, match="Bad.map returned list, expected a dict"):
        Bad().apply([{"text": "x"}])


def test_apply_refuses_global_ops_and_keeps_row_forms():
    dedup = create_op("document_deduplicator", {})
    with pytest.raises(TypeError, match="needs the whole dataset, so op.apply cannot run it"):
        dedup.apply([{"text": "a"}])
    op = create_op("words_num_filter", {"min_num": 3})
    table = pa.table({"text": ["one two three", "one"]})
    kept, removed = op.apply(table, removed=True)
    assert kept.column("text").to_pylist() == ["one two three"] and removed.column("__reason__").to_pylist() == [
        "num_words < 3"]
    kept, removed = op.apply([{"text": "one two three"}], removed=True)
    assert removed == [] and kept == [{"text": "one two three", "__stats__": {"num_words": 3}}]
    assert op.apply([]) == []


def test_declared_attributes_are_on_the_bases():
    for attr, value in [("version", 1), ("creates_text", False), ("expands", False), ("is_script", False),
                        ("row_local", True), ("inputs", None), ("outputs", None)]:
        assert getattr(Op, attr) == value and attr in Op.__dict__, attr
    assert Op.__dict__["optional_models"](Vowels()) == [] and Grouper.group_files is None
    assert Mapper.expands is False and create_op("text_chunk_mapper", {"max_len": 10}).expands is True
    assert create_op("python_lambda_mapper", {"lambda_str": "lambda s: s"}, allow_scripts=True).is_script

    class V2(Vowels):
        version = 2
    assert V2().config()["version"] == 2 and Vowels().config()["version"] == 1
    assert issubclass(RowFilter, Filter) and create_op("suffix_filter", {}).input_fields() == ["__dj__suffix__"]


def test_compression_ratio_filter_end_to_end(tmp_path, sample_rows):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump({
        "dataset_path": str(SAMPLE), "export_path": str(tmp_path / "out.jsonl"), "work_dir": str(tmp_path / "w"),
        "np": 2, "keep_stats_in_res_ds": True, "process": [{"compression_ratio_filter": {"min_ratio": 0.36}}]}))
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(recipe), "--no-progress"], cwd=REPO,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    report = json.loads((tmp_path / "w" / "report.json").read_text())
    check_accounting(report)
    want = {}
    for r in sample_rows:
        raw = r["text"].encode()
        want[r["id"]] = len(zlib.compress(raw, 6)) / len(raw) if raw else 0.0
    out = read_jsonl(tmp_path / "out.jsonl")
    assert [r["id"] for r in out] == [r["id"] for r in sample_rows if want[r["id"]] >= 0.36]
    assert all(r["__stats__"]["compression_ratio"] == want[r["id"]] for r in out)
    assert 0 < len(out) < len(sample_rows)
