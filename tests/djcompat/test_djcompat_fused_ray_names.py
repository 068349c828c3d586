"""Data-Juicer's fused op names (general_fused_op, fused_sequential_batch_op: their inner ops run in place,
in order) and the Ray names ray_bts_minhash_cpp_deduplicator, ray_image_deduplicator, ray_video_deduplicator
and ray_repartition_pipeline, through a recipe run."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gristmill.recipe import RecipeError, build_ops
from gristmill.registry import create_op

MEDIA = Path(__file__).resolve().parent.parent / "data" / "media"
TEXTS = ["short", "a text that is long enough to pass", "another text long enough to pass the filter",
         "a text that is long enough to pass", "tiny"]


def _run(tmp_path, rows, process):
    tmp_path.mkdir(parents=True, exist_ok=True)
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    recipe = {"dataset_path": str(src), "export_path": str(tmp_path / "out.jsonl"),
              "work_dir": str(tmp_path / "w"), "np": 1, "process": process}
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe))
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(tmp_path / "r.yaml"), "--no-progress"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    out = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    return out, json.loads((tmp_path / "w" / "report.json").read_text())


def test_fused_ops_expand_in_order():
    ops = build_ops([
        {"general_fused_op": {"batch_size": 4, "fused_op_list": [
            {"whitespace_normalization_mapper": {}}, {"text_length_filter": {"min_len": 10}}]}},
        {"fused_sequential_batch_op": {"group_name": "g", "op_specs": [
            {"class_name": "words_num_filter", "kwargs": {"min_num": 2, "num_proc": 4}},
            {"name": "document_deduplicator", "kwargs": {}}]}},
        "clean_email_mapper"])
    assert [o.name for o in ops] == ["whitespace_normalization_mapper", "text_length_filter", "words_num_filter",
                                     "document_deduplicator", "clean_email_mapper"]
    assert [o.position for o in ops] == [0, 1, 2, 3, 4]
    assert ops[1].params.min_len == 10 and ops[2].params.min_num == 2
    assert build_ops([{"general_fused_op": {}}]) == []  # an empty fused op is nothing


def test_fused_op_errors_name_the_inner_entry():
    with pytest.raises(RecipeError, match=r"process\[0\]\.general_fused_op: process\[1\]\.text_length_filter\.min_lenn: "
                                          r"unknown param 'min_lenn'"):
        build_ops([{"general_fused_op": {"fused_op_list": [{"clean_email_mapper": {}},
                                                            {"text_length_filter": {"min_lenn": 3}}]}}])
    with pytest.raises(RecipeError, match=r"process\[0\]\.fused_sequential_batch_op: op_specs\[0\]: spec has no"):
        build_ops([{"fused_sequential_batch_op": {"op_specs": [{"kwargs": {}}]}}])
    with pytest.raises(RuntimeError, match="runs as its inner ops"):
        create_op("general_fused_op", {}).apply([{"text": "x"}])


def test_fused_recipe_same_output_as_the_flat_recipe(tmp_path):
    rows = [{"id": i, "text": t, "tmp": i} for i, t in enumerate(TEXTS)]
    inner = [{"text_length_filter": {"min_len": 10}}, {"document_deduplicator": {}}]
    flat, rep_flat = _run(tmp_path / "flat", rows, inner)
    fused, rep = _run(tmp_path / "fused", rows, [
        {"general_fused_op": {"fused_op_list": inner[:1]}},
        {"fused_sequential_batch_op": {"op_specs": [{"class_name": "document_deduplicator"}],
                                       "cleanup_columns": ["tmp", "absent"]}},
        {"ray_repartition_pipeline": {"num_blocks": 4, "shuffle": True}}])
    assert [r["id"] for r in flat] == [1, 2]
    assert fused == [{k: v for k, v in r.items() if k != "tmp"} for r in flat]
    assert [(o["op"], o["removed"]) for o in rep["ops"]][:len(rep_flat["ops"])] == [(o["op"], o["removed"]) for o in rep_flat["ops"]]


def test_ray_repartition_pipeline_checks_num_blocks():
    with pytest.raises(ValueError, match="num_blocks"):
        create_op("ray_repartition_pipeline", {"num_blocks": 0})


def _dedup_kept(tmp_path, rows, op):
    from gristmill.dataset import Dataset
    out = tmp_path / "out.jsonl"
    Dataset.from_list(rows).process(op).export(str(out), np=1, work_dir=str(tmp_path / "w"))
    return [json.loads(x) for x in out.read_text().splitlines()]


def test_ray_bts_minhash_cpp_is_the_minhash_dedup(tmp_path):
    base = "the quick brown fox jumps over the lazy dog while the cat sleeps on the warm mat by the door"
    rows = [{"k": 0, "text": base}, {"k": 1, "text": base + " today"},
            {"k": 2, "text": "an entirely different sentence about rivers and the hills beyond them"}]
    cpp = _dedup_kept(tmp_path / "cpp", rows, create_op("ray_bts_minhash_cpp_deduplicator",
                                                        {"union_find_parallel_num": 2, "jaccard_threshold": 0.7}))
    plain = _dedup_kept(tmp_path / "plain", rows, create_op("document_minhash_deduplicator", {"jaccard_threshold": 0.7}))
    assert [r["k"] for r in cpp] == [r["k"] for r in plain] == [0, 2]


def test_ray_image_and_video_names_run_in_a_recipe(tmp_path):
    pytest.importorskip("PIL")
    imgs = [str(MEDIA / "chelsea.png"), str(MEDIA / "garden.jpg")]
    copy = tmp_path / "copy.png"
    shutil.copy(imgs[0], copy)
    rows = [{"id": 0, "text": "a", "images": [imgs[0]]}, {"id": 1, "text": "b", "images": [imgs[1]]},
            {"id": 2, "text": "c", "images": [str(copy)]}, {"id": 3, "text": "d", "images": []}]
    out, rep = _run(tmp_path / "img", rows, [{"ray_image_deduplicator": {"backend": "redis", "method": "phash"}}])
    assert [r["id"] for r in out] == [0, 1, 3]
    assert rep["ops"][-1]["reasons"] == {"duplicate images": 1}


def test_ray_video_deduplicator_name(tmp_path):
    pytest.importorskip("av")
    av = Path(__file__).resolve().parent.parent / "data" / "av"
    a, b = str(av / "bars_320x240_2s.mp4"), str(av / "testsrc_160x90_3s.mp4")
    rows = [{"k": 0, "text": "x", "videos": [a]}, {"k": 1, "text": "y", "videos": [b]},
            {"k": 2, "text": "z", "videos": [a]}]
    kept = _dedup_kept(tmp_path, rows, create_op("ray_video_deduplicator", {"backend": "ray_actor"}))
    assert [r["k"] for r in kept] == [0, 1]
