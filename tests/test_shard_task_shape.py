"""Issue 24 §3: the shard task reads like datatrove's (read → engine steps → chain → write → marker), the
engine's own steps stay out of the funnels unless asked, profiling is an attached observer, writers come
from a registry and ``export_media`` is a writer option."""
import json
import os

import pyarrow as pa

from gristmill.engine.base import create_engine
from gristmill.engine.config import RunConfig
from gristmill.engine.multisource import UnifyTextKey
from gristmill.engine.report import is_internal
from gristmill.io.base import open_writer, writer_options, writers
from gristmill.recipe import Recipe, build_ops, run_config

from gm_testutil import read_jsonl, write_jsonl


def _rows(n=40):
    return [{"id": f"r{i}", "content": " ".join(["word"] * (i % 9 + 1))} for i in range(n)]


def _run(tmp_path, name, **kw):
    data = write_jsonl(tmp_path / "in.jsonl", _rows())
    cfg = RunConfig(dataset_path=data, work_dir=str(tmp_path / f"work-{name}"),
                    export_path=str(tmp_path / f"out-{name}.jsonl"), text_key="content", progress=False, **kw)
    ops = build_ops([{"words_num_filter": {"min_num": 3}}], False, "process", "content")
    ops.append(UnifyTextKey(from_key="content", to_key="text").bind("content", 1))
    return cfg, create_engine(cfg).run(ops)


def test_internal_steps_are_counted_but_out_of_the_funnel(tmp_path):
    cfg, rep = _run(tmp_path, "hidden")
    assert [r["op"] for r in rep["ops"]] == ["read", "words_num_filter"]
    (row,) = rep["internal_ops"]
    assert row["op"] == "unify_text_key" and row["rows_in"] == row["rows_out"] == rep["rows_out"]
    saved = json.load(open(os.path.join(cfg.work_dir, "report.json")))
    assert [r["op"] for r in saved["ops"]] == ["read", "words_num_filter"]
    model = json.load(open(os.path.join(cfg.work_dir, "report_model.json")))  # report.html's funnel
    assert [f["op"] for f in model["funnel"]] == ["read", "words_num_filter"]
    # asked for: the row is back in the table, and the output bytes are the same
    _, shown = _run(tmp_path, "shown", show_internal=True)
    assert [r["op"] for r in shown["ops"]] == ["read", "words_num_filter", "unify_text_key"]
    assert "internal_ops" not in shown
    a, b = (open(tmp_path / f"out-{n}.jsonl", "rb").read() for n in ("hidden", "shown"))
    assert a == b and all("text" in r and "content" not in r for r in read_jsonl(tmp_path / "out-hidden.jsonl"))


def test_user_ops_are_not_internal():
    assert is_internal(UnifyTextKey(from_key="a", to_key="b"))
    assert not any(is_internal(o) for o in build_ops([{"words_num_filter": {}}, {"clean_html_mapper": {}}],
                                                      False, "process"))


def test_profile_is_an_observer_the_engine_attaches(tmp_path):
    from gristmill.engine.shard_task import Task, observers_for, run_task
    from gristmill.io.base import ReadOptions, Shard
    data = write_jsonl(tmp_path / "in.jsonl", _rows(10))
    seen = []

    class Counter:
        def __init__(self, task):
            self.rows = 0

        def __call__(self, i, op, before, out, gone):
            self.rows += before.num_rows

        def finish(self, task):
            seen.append(self.rows)
            return {}

    ops = build_ops([{"words_num_filter": {"min_num": 3}}], False, "process", "content")
    for profile in (True, False):
        t = Task(stage=0, shard=0, stage_dir=str(tmp_path / f"st-{profile}"), ops=ops,
                 read_opts=ReadOptions(text_key="content"), source=Shard(source=data, reader="jsonl"),
                 profile=profile, observers=(Counter,))
        kinds = [type(o).__name__ for o in observers_for(t)]
        assert kinds == (["ShardProfile", "Counter"] if profile else ["Counter"])
        res = run_task(t)
        assert (res["profile"] is not None) == profile
        assert list(res) == ["stage", "shard", "parts", "rows_out", "counts", "rejects", "removed", "profile"]
    assert seen == [10, 10]


def test_writers_come_from_a_registry(tmp_path):
    assert {"ipc", "jsonl", "parquet", "arrow"} <= set(writers())
    assert "export_media" in writer_options()
    batch = pa.RecordBatch.from_pylist([{"id": "a", "text": "x"}])
    w = open_writer("jsonl", str(tmp_path / "frag"), ".gz")
    w.write(batch)
    assert w.close() == [str(tmp_path / "frag.jsonl.gz")] and w.rows == 1
    s = open_writer("ipc", str(tmp_path / "shard"))
    s.write(batch)
    assert s.close() == [str(tmp_path / "shard.part0.arrow")]


def test_export_media_is_a_writer_option(tmp_path):
    r = Recipe.model_validate({"dataset_path": str(tmp_path / "in.jsonl"), "export_path": str(tmp_path / "o.jsonl"),
                               "export_media": "copy"})
    cfg = run_config(r)
    assert cfg.writer_options == {"export_media": "copy"} and "export_media" not in cfg.reader_params
    from gristmill.engine.media_op import export_media_mode
    assert export_media_mode(cfg) == "copy"
