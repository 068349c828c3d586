"""Data-Juicer writes ints as ``2e5`` / ``5e5`` (YAML reads those as strings, ``2.0e+5`` as a float) and
accepts them; so do we, for int op params and int recipe keys, when the value is integral."""
import json
import subprocess
import sys

import pytest
import yaml

from gm_testutil import REPO, read_jsonl, write_jsonl
from gristmill.recipe import RecipeError, parse_recipe
from gristmill.registry import OpError, create_op


@pytest.mark.parametrize("value", ["2e5", 2e5, 200000.0, "2.0e+5", " 2E5 ", "0.2e6"])
def test_int_param_in_scientific_notation(value):
    op = create_op("words_num_filter", {"max_num": value})
    assert op.params.max_num == 200000 and type(op.params.max_num) is int


def test_yaml_reads_dj_numbers_as_strings_and_floats_we_take_both():
    raw = yaml.safe_load("a: 2e5\nb: 1.5e3\nc: 2.0e+5\n")
    assert raw == {"a": "2e5", "b": "1.5e3", "c": 200000.0}
    assert create_op("words_num_filter", {"max_num": raw["b"]}).params.max_num == 1500
    assert create_op("words_num_filter", {"min_num": raw["c"]}).params.min_num == 200000


def test_optional_int_param():
    op = create_op("gopher_quality_filter", {"max_doc_words": "1e5", "min_doc_words": None})
    assert op.params.max_doc_words == 100000 and op.params.min_doc_words is None


def test_exact_for_big_exponents():
    assert create_op("words_num_filter", {"max_num": "1e30"}).params.max_num == 10 ** 30


@pytest.mark.parametrize("value", [2.5, "2.5e-1", "1.25e1"])
def test_non_integral_value_for_int_is_an_error_naming_the_param(value):
    with pytest.raises(OpError) as e:
        create_op("words_num_filter", {"max_num": value}, "r.yaml: process[0].words_num_filter")
    msg = str(e.value)
    assert "process[0].words_num_filter.max_num" in msg and "valid integer" in msg and repr(value) in msg


def test_float_params_unchanged():
    op = create_op("alphanumeric_filter", {"min_ratio": 2.5e-1, "max_ratio": "7.5e-1"})
    assert op.params.min_ratio == 0.25 and op.params.max_ratio == 0.75
    op = create_op("gopher_quality_filter", {"min_avg_word_length": 3e0})
    assert op.params.min_avg_word_length == 3.0 and type(op.params.min_avg_word_length) is float


def test_strings_and_bools_left_alone():
    # a string param keeps a string that looks like a number; a bool is not an int here
    assert create_op("words_num_filter", {"lang": "1e3"}).params.lang == "1e3"
    with pytest.raises(OpError):
        create_op("words_num_filter", {"max_num": "lots"})


def test_recipe_int_keys():
    recipe, ops, _ = parse_recipe(yaml.safe_load(
        "dataset_path: x.jsonl\nnp: 2e0\nbatch_size: 1e3\nshard_size_mb: 6.4e+1\n"
        "process:\n  - words_num_filter: {max_num: 5e5}\n"))
    assert (recipe.np, recipe.batch_size, recipe.shard_size_mb) == (2, 1000, 64)
    assert all(type(v) is int for v in (recipe.np, recipe.batch_size, recipe.shard_size_mb))
    assert ops[0].params.max_num == 500000
    recipe, _, _ = parse_recipe({"dataset_path": "x", "max_reject_ratio": "5e-1"})
    assert recipe.max_reject_ratio == 0.5
    with pytest.raises(RecipeError, match=r"np: .*valid integer"):
        parse_recipe({"dataset_path": "x", "np": 2.5})


def test_recipe_with_dj_numbers_runs(tmp_path):
    rows = [{"text": " ".join(["word"] * n)} for n in (3, 20, 80, 400)]
    data = write_jsonl(tmp_path / "in.jsonl", rows)
    (tmp_path / "r.yaml").write_text(
        f"project_name: dj\ndataset_path: {data}\nexport_path: {tmp_path / 'out.jsonl'}\n"
        f"work_dir: {tmp_path / 'work'}\nnp: 1e0\nbatch_size: 1e3\n"
        "process:\n"
        "  - words_num_filter: {min_num: 1e1, max_num: 2e2}\n"
        "  - text_length_filter: {min_len: 1e1, max_len: 5e5}\n")
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(tmp_path / "r.yaml"), "--no-progress"],
                         capture_output=True, text=True, cwd=REPO, timeout=300)
    assert res.returncode == 0, res.stderr
    out = read_jsonl(tmp_path / "out.jsonl")
    assert sorted(len(r["text"].split()) for r in out) == [20, 80]
    report = json.loads((tmp_path / "work" / "report.json").read_text())
    assert report["rows_out"] == 2
