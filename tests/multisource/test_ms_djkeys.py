"""Data-Juicer recipe-level keys: the `dataset:` block (Data-Juicer 1.6.1's meaning), add_suffix with
suffix_filter, custom_operator_paths (user op modules, only with allow_scripts), the media keys."""
import json

import pytest
from ms_util import cli, read_jsonl, write_jsonl, write_recipe

from gristmill.recipe import RecipeError, parse_recipe, run_config
from gristmill.recipe_dj import sample_numbers


def data(tmp_path):
    a = write_jsonl(tmp_path / "d" / "a.jsonl", [{"text": f"alpha number {i}"} for i in range(10)])
    b = write_jsonl(tmp_path / "d" / "b.jsonl", [{"text": f"beta number {i}"} for i in range(30)])
    c = tmp_path / "d" / "c.csv"
    c.write_text("text,n\n" + "".join(f"gamma number {i},{i}\n" for i in range(5)))
    return a, b, str(c)


def test_dataset_block_without_max_sample_num_concatenates(tmp_path):
    a, b, _ = data(tmp_path)
    r = write_recipe(tmp_path / "r.yaml", {
        "project_name": "dj", "export_path": str(tmp_path / "out.jsonl"), "work_dir": str(tmp_path / "w"),
        "dataset": {"configs": [{"type": "local", "path": a, "weight": 0.2}, {"type": "local", "path": b}]}})
    res = cli("run", r, "--no-progress")
    assert res.returncode == 0, res.stderr
    assert "weights have no effect without max_sample_num" in res.stderr
    out = [x["text"] for x in read_jsonl(tmp_path / "out.jsonl")]
    assert out == [f"alpha number {i}" for i in range(10)] + [f"beta number {i}" for i in range(30)]


def test_dataset_block_max_sample_num_counts(tmp_path):
    a, b, _ = data(tmp_path)
    # Data-Juicer's rule: ceil(max * w / sum(w)), each capped by what is left of max
    assert sample_numbers([1, 3], 10) == [3, 7]
    assert sample_numbers([1, 1, 1], 10) == [4, 4, 2]
    assert sample_numbers([0, 1], 5) == [0, 5]
    r = write_recipe(tmp_path / "r.yaml", {
        "project_name": "dj", "export_path": str(tmp_path / "out.jsonl"), "work_dir": str(tmp_path / "w"),
        "dataset": {"max_sample_num": 12, "configs": [{"type": "local", "path": a, "weight": 1.0},
                                                      {"type": "local", "path": b, "weight": 2.0}]},
        "process": [{"text_length_filter": {"min_len": 1}}]})
    res = cli("run", r, "--no-progress")
    assert res.returncode == 0, res.stderr
    out = [x["text"] for x in read_jsonl(tmp_path / "out.jsonl")]
    assert sum(t.startswith("alpha") for t in out) == 4 and sum(t.startswith("beta") for t in out) == 8
    assert out[:4] == sorted(out[:4], key=lambda t: int(t.split()[-1]))  # input order kept within a dataset
    rep = json.loads((tmp_path / "w" / "report.json").read_text())
    assert [s["name"] for s in rep["sources"]] == ["dataset0", "dataset1"]


def test_dataset_block_errors_and_precedence(tmp_path):
    a, b, _ = data(tmp_path)
    with pytest.raises(RecipeError, match=r"configs\[0\]: type 'huggingface' is not read here"):
        parse_recipe({"dataset": {"configs": [{"type": "huggingface", "path": "org/name"}]}})
    with pytest.raises(RecipeError, match="max_sample_num: a positive integer"):
        parse_recipe({"dataset": {"max_sample_num": 0, "configs": [{"path": a}]}})
    with pytest.raises(RecipeError, match="expected"):
        parse_recipe({"dataset": {"configs": []}})
    recipe, _, warnings = parse_recipe({"dataset_path": b, "dataset": {"configs": [{"path": a}]}})
    assert recipe.dataset_path == b and any("`dataset` ignored" in w for w in warnings)
    with pytest.raises(RecipeError, match="dataset_path: Field required \\(or several inputs as `sources:`"):
        parse_recipe({"process": []})


def test_add_suffix_and_suffix_filter(tmp_path):
    a, _, c = data(tmp_path)
    base = {"project_name": "sf", "work_dir": str(tmp_path / "w"), "np": 2,
            "export_path": str(tmp_path / "out.jsonl"), "dataset_path": [a, c]}
    r = write_recipe(tmp_path / "r.yaml", {**base, "process": [{"suffix_filter": {"suffixes": [".csv"]}}]})
    res = cli("run", r, "--no-progress")  # suffix_filter in the recipe turns add_suffix on (Data-Juicer)
    assert res.returncode == 0, res.stderr
    out = read_jsonl(tmp_path / "out.jsonl")
    assert [x["text"] for x in out] == [f"gamma number {i}" for i in range(5)]
    assert all(x["__dj__suffix__"] == ".csv" for x in out)
    r = write_recipe(tmp_path / "r2.yaml", {**base, "add_suffix": True, "export_path": str(tmp_path / "o2.jsonl"),
                                            "work_dir": str(tmp_path / "w2")})
    assert cli("run", r, "--no-progress").returncode == 0
    assert [x["__dj__suffix__"] for x in read_jsonl(tmp_path / "o2.jsonl")] == [".jsonl"] * 10 + [".csv"] * 5
    recipe, _, _ = parse_recipe({**base, "process": []})
    assert not run_config(recipe).add_suffix


USER_OP = '''
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from gristmill.ops.base import Mapper, Params
from gristmill.registry import register


@register("shout_mapper")
class ShoutMapper(Mapper):
    """Upper-cases the text and adds a suffix (a user op, loaded from custom_operator_paths)."""

    class Params(Params):
        suffix: str = Field("!", description="Appended to every text.")

    def process_batch(self, batch):
        t = pc.binary_join_element_wise(pc.utf8_upper(self.text(batch)), self.params.suffix, "")
        return batch.set_column(batch.schema.get_field_index(self.text_key), self.text_key, t)
'''


def test_custom_operator_paths(tmp_path):
    a, b, _ = data(tmp_path)
    ops_dir = tmp_path / "myops"
    ops_dir.mkdir()
    (ops_dir / "gm_user_shout_ops.py").write_text(USER_OP)
    base = {"project_name": "cu", "work_dir": str(tmp_path / "w"), "np": 2, "dataset_path": [a, b],
            "export_path": str(tmp_path / "out.jsonl"), "custom_operator_paths": ["myops/gm_user_shout_ops.py"],
            "process": [{"shout_mapper": {"suffix": "?!"}}]}
    r = write_recipe(tmp_path / "r.yaml", base)
    res = cli("run", r, "--no-progress")  # refused before any user code is loaded
    assert res.returncode == 2 and "custom_operator_paths loads user Python code" in res.stderr
    assert not (tmp_path / "out.jsonl").exists()
    # in its own process: the user module and the op it registers stay out of this one; two workers import it too
    res = cli("run", r, "--no-progress", "--allow-scripts", own_process=True)
    assert res.returncode == 0, res.stderr
    out = [x["text"] for x in read_jsonl(tmp_path / "out.jsonl")]
    assert out == [f"ALPHA NUMBER {i}?!" for i in range(10)] + [f"BETA NUMBER {i}?!" for i in range(30)]
    r = write_recipe(tmp_path / "r3.yaml", {**base, "allow_scripts": True, "custom_operator_paths": ["nope.py"]})
    res = cli("run", r, "--no-progress")
    assert res.returncode == 2 and "nope.py: no such .py file or package directory" in res.stderr


def test_media_keys_and_export_extra_args_are_reported_not_fatal(tmp_path):
    a, _, _ = data(tmp_path)
    recipe, _, warnings = parse_recipe({"dataset_path": a, "image_key": "imgs", "image_special_token": "<img>",
                                        "export_extra_args": {"keep_keys": ["x"]}, "suffixes": [".jsonl"],
                                        "export_type": "jsonl"})
    assert any("image_key, image_special_token: passed to the readers" in w for w in warnings)
    assert any("export_extra_args has no effect" in w for w in warnings)
    assert any("ignored Data-Juicer settings" in w and "export_type" in w for w in warnings)
    cfg = run_config(recipe)
    assert cfg.reader_params["media_keys"] == (("image_key", "imgs"), ("image_special_token", "<img>"))
    r = write_recipe(tmp_path / "r.yaml", {"project_name": "mk", "dataset_path": a, "video_key": "clips",
                                           "export_path": str(tmp_path / "o.jsonl"), "work_dir": str(tmp_path / "w")})
    res = cli("run", r, "--no-progress")
    assert res.returncode == 0, res.stderr
    assert len(read_jsonl(tmp_path / "o.jsonl")) == 10


def test_server_checks_multi_source_paths_and_analyze_takes_sources(tmp_path):
    """The service runs `sources:` and `dataset:` recipes (issue 24) with every input path checked against its
    roots: one outside them is refused, naming its YAML path; `gristmill analyze` takes a `sources:` recipe
    (per source and over the mix: tests/multisource/test_ms_analyze.py)."""
    from gristmill.service.jobs import JobManager
    a, _, _ = data(tmp_path)
    m = JobManager(str(tmp_path / "state"), [str(tmp_path)])
    try:
        v = m.validate({"sources": [{"name": "a", "path": "/etc/passwd"}]})
        assert not v["ok"] and v["errors"][0]["path"] == "sources[0].path"
        v = m.validate({"dataset": {"configs": [{"path": "/etc/passwd"}]}})
        assert not v["ok"] and v["errors"][0]["path"] == "dataset.configs[0].path"
        assert m.validate({"dataset_path": a})["ok"]
        assert m.validate({"sources": [{"name": "a", "path": a}]})["ok"]
    finally:
        m.close()
    r = write_recipe(tmp_path / "r.yaml", {"sources": [{"name": "a", "path": a}], "work_dir": str(tmp_path / "w")})
    res = cli("analyze", r, "--no-progress")
    assert res.returncode == 0 and "source a" in res.stderr, res.stderr


def test_rows_carrying_their_own_suffix_keep_it(tmp_path):
    """Data-Juicer adds the suffix column only to a dataset that lacks it: code files already converted to
    JSONL with their own `__dj__suffix__` (redpajama-code) keep it, so suffix_filter selects on it."""
    rows = [{"text": f"def f{i}(): pass", "__dj__suffix__": s} for i, s in enumerate([".py", ".c", ".py"])]
    src = tmp_path / "code.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = write_recipe(tmp_path / "r.yaml", {"project_name": "own", "work_dir": str(tmp_path / "w"),
                                           "export_path": str(tmp_path / "out.jsonl"), "dataset_path": str(src),
                                           "process": [{"suffix_filter": {"suffixes": [".py"]}}]})
    res = cli("run", r, "--no-progress")
    assert res.returncode == 0, res.stderr
    assert [x["text"] for x in read_jsonl(tmp_path / "out.jsonl")] == ["def f0(): pass", "def f2(): pass"]
