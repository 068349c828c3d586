"""Adaptive execution (issue 25): np / batch_size from the machine and a probe, filters reordered only
where the kept rows cannot change (engine/adaptive.py)."""
import json

import pytest
import yaml

from gm_testutil import SAMPLE
from gristmill.cli import main
from gristmill.engine import adaptive as A
from gristmill.recipe import parse_recipe

FILTERS = [{"whitespace_normalization_mapper": {}},
           {"language_id_score_filter": {"min_score": 0.5}},
           {"words_num_filter": {"min_num": 50}},
           {"alphanumeric_filter": {"min_ratio": 0.7}},
           {"text_length_filter": {"min_len": 2000}},
           {"special_characters_filter": {"max_ratio": 0.25}},
           {"document_deduplicator": {}}]


def _run(tmp_path, name, process=FILTERS, args=(), **extra) -> tuple[bytes, dict]:
    recipe = {"dataset_path": str(SAMPLE), "export_path": str(tmp_path / name / "out.jsonl"),
              "work_dir": str(tmp_path / name / "work"), "process": process, **extra}
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(recipe))
    assert main(["run", str(p), "--no-progress", *args]) == 0
    report = json.loads((tmp_path / name / "work" / "report.json").read_text())
    return (tmp_path / name / "out.jsonl").read_bytes(), report


def test_reorder_keeps_the_exported_rows(tmp_path, monkeypatch):
    monkeypatch.setattr(A, "MIN_SAVING", 0.0)  # reorder whatever the probe's timings say
    plain, rep0 = _run(tmp_path, "plain")
    auto, rep1 = _run(tmp_path, "auto", reorder="auto")
    assert auto == plain and plain  # the same rows, byte for byte
    names0 = [r["op"] for r in rep0["ops"] if r["position"] is not None]
    names1 = [r["op"] for r in rep1["ops"] if r["position"] is not None]
    assert names1 != names0 and sorted(names1) == sorted(names0)
    assert names1[0] == "whitespace_normalization_mapper" and names1[-1] == "document_deduplicator"  # only filters move
    for r0, r1 in ((rep0["ops"][-1], rep1["ops"][-1]),):
        assert r0["rows_out"] == r1["rows_out"]
    saved = json.loads((tmp_path / "auto" / "work" / "adaptive.json").read_text())
    assert sorted(saved["order"]) == list(range(len(FILTERS))) and saved["order"] != list(range(len(FILTERS)))
    # a rerun keeps the first run's order (resume finds its stages) even if the probe would say otherwise
    monkeypatch.setattr(A, "reorder", lambda ops, p, keep: (ops, []))
    again, rep2 = _run(tmp_path, "auto", reorder="auto")
    assert again == plain and [r["op"] for r in rep2["ops"] if r["position"] is not None] == names1


def _bound(process):
    _, ops, _ = parse_recipe({"dataset_path": "x.jsonl", "process": process})
    return ops


def test_pure_filter_rule():
    ops = _bound([{"text_length_filter": {"min_len": 5}}, {"words_num_filter": {"min_num": 2}},
                  {"specified_numeric_field_filter": {"field_key": "__dj__stats__.text_len", "min_value": 3}},
                  {"text_length_filter": {"max_len": 500}}])
    # text_length_filter's stats are read by a later op and its key is shared: neither moves
    assert [A.pure_filter(op, ops) for op in ops] == [False, True, False, False]
    mapper = _bound([{"whitespace_normalization_mapper": {}}, {"words_num_filter": {"min_num": 2}}])
    assert not A.pure_filter(mapper[0], mapper) and A.pure_filter(mapper[1], mapper)


def _probe(ops, costs, keeps, rows=1000, bpr=1000.0, shards=1):
    p = A.Probe(rows=256, bytes_per_row=bpr, input_bytes=int(rows * bpr), est_rows=rows, shards=shards,
                ops=[A.OpProbe(o.position, o.name, c, k, 0.0) for o, c, k in zip(ops, costs, keeps)])
    p.inputs = {}
    return p


def test_reorder_puts_cheap_selective_filters_first_and_only_pure_ones():
    ops = _bound([{"words_num_filter": {"min_num": 2}}, {"alphanumeric_filter": {"min_ratio": 0.5}},
                  {"text_length_filter": {"min_len": 5}}])
    p = _probe(ops, [1e-3, 1e-4, 1e-6], [0.9, 0.995, 0.5])
    new, notes = A.reorder(ops, p, keep_stats=False)
    assert [o.name for o in new] == ["text_length_filter", "words_num_filter", "alphanumeric_filter"] and notes
    assert A.reorder(ops, p, keep_stats=True)[0] == ops  # stats in the export: their order would change
    assert A.reorder(ops, None, keep_stats=False)[0] == ops
    # already in the best order: nothing to do
    assert A.reorder(new, _probe(new, [1e-6, 1e-3, 1e-4], [0.5, 0.9, 0.995]), keep_stats=False)[0] == new


def test_choose_np():
    ops = _bound([{"words_num_filter": {"min_num": 2}}])
    tiny = _probe(ops, [1e-5], [1.0], rows=1000)
    assert A.choose_np(A.Machine(16, 64 << 30), tiny, 16 << 20)[0] == 1  # 10 ms of work: no workers
    big = _probe(ops, [1e-4], [1.0], rows=4_000_000, bpr=4000.0, shards=16)  # 400 s of work, 16 GB
    assert A.choose_np(A.Machine(16, 64 << 30), big, 16 << 20)[0] == 16
    assert A.choose_np(A.Machine(2, 64 << 30), big, 16 << 20)[0] == 2
    assert A.choose_np(A.Machine(16, 2 << 30), big, 16 << 20)[0] < 16  # memory for fewer workers
    one_piece = _probe(ops, [1e-4], [1.0], rows=40_000, bpr=100.0, shards=1)  # 4 s of work, 4 MB: one piece
    assert A.choose_np(A.Machine(16, 64 << 30), one_piece, 16 << 20)[0] == 1
    assert A.choose_np(A.Machine(16, 64 << 30), None, 16 << 20)[0] == 1
    assert 1 <= A.usable_cores() and A.available_memory() > 0


def test_choose_batch_size():
    assert A.choose_batch_size(None, 1000)[0] == 1000
    long_docs = A.Probe(rows=10, bytes_per_row=200_000.0, input_bytes=0, est_rows=10, shards=1)
    lines = A.Probe(rows=10, bytes_per_row=40.0, input_bytes=0, est_rows=10, shards=1)
    assert A.choose_batch_size(long_docs, 1000)[0] == A.MIN_BATCH
    assert A.choose_batch_size(lines, 1000)[0] == A.MAX_BATCH


def test_recipe_keys(tmp_path):
    r, _, _ = parse_recipe({"dataset_path": "x", "np": "auto", "batch_size": "auto", "reorder": "auto"})
    assert (r.np, r.batch_size, r.reorder) == ("auto", "auto", "auto")
    from gristmill.recipe import RecipeError
    with pytest.raises(RecipeError, match=r"np: .*valid integer.* or 'auto'"):
        parse_recipe({"dataset_path": "x", "np": 2.5})


def test_np_auto_run(tmp_path):
    """The probe of the bundled sample (179 rows) says one process: np=1, and the run says why."""
    out, rep = _run(tmp_path, "npauto", process=FILTERS[:3], np="auto", batch_size="auto")
    saved = json.loads((tmp_path / "npauto" / "work" / "adaptive.json").read_text())
    assert rep["np"] == saved["np"] == 1 and "np=1" in saved["np_why"]
    assert saved["probe"]["rows"] == 179 and saved["batch_size"] >= A.MIN_BATCH


def test_np_auto_from_the_command_line(tmp_path, capsys):
    """`--np auto` overrides a recipe's np like a number does; the header says auto until the probe decides."""
    _, rep = _run(tmp_path, "cli-auto", process=FILTERS[:3], np=2, args=("--np", "auto"))
    assert "np=auto" in capsys.readouterr().err
    saved = json.loads((tmp_path / "cli-auto" / "work" / "adaptive.json").read_text())
    assert rep["np"] == saved["np"] == 1
    with pytest.raises(SystemExit):
        main(["run", str(tmp_path / "cli-auto.yaml"), "--np", "some"])


def test_input_bytes_count_every_piece_of_a_split_file(tmp_path):
    from gristmill.io.base import ReadOptions
    from gristmill.io.planner import plan_dataset
    data = tmp_path / "big.jsonl"
    data.write_text("".join(json.dumps({"text": "x" * 200}) + "\n" for _ in range(500)))
    shards = plan_dataset(str(data), ReadOptions(shard_bytes=20_000), None)
    assert len(shards) > 1
    assert A._input_bytes(shards) == (data.stat().st_size, float(data.stat().st_size))
