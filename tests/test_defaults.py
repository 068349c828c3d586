"""Each run default is declared once (``gristmill.core.defaults``) and reaches every place that uses it."""
from __future__ import annotations

from gristmill.core import defaults as D
from gristmill.engine.config import RunConfig
from gristmill.engine.shard_task import Task
from gristmill.io.base import ReadOptions
from gristmill.recipe import Recipe, parse_recipe, run_config


def test_recipe_run_config_and_reader_defaults_agree():
    recipe, _, _ = parse_recipe({"dataset_path": "in.jsonl", "export_path": "out.jsonl"})
    cfg = run_config(recipe)
    plain = RunConfig(dataset_path="in.jsonl", work_dir="w")
    for c in (cfg, plain):
        assert (c.text_key, c.batch_size, c.shard_bytes, c.seed, c.removed_sample) == \
            ("text", 1000, 16 << 20, 42, 100)
        assert c.removed_limit == 100
    assert Recipe.model_fields["max_reject_ratio"].default == D.MAX_REJECT_RATIO == 0.05
    assert (ReadOptions().text_key, ReadOptions().batch_size, ReadOptions().shard_bytes) == ("text", 1000, 16 << 20)
    t = Task(stage=0, shard=0, stage_dir="s", ops=[], read_opts=ReadOptions())
    assert (t.removed_limit, t.seed) == (D.REMOVED_SAMPLE, D.SEED)


def test_the_recipe_values_flow_into_the_run_config():
    recipe, _, _ = parse_recipe({"dataset_path": "in.jsonl", "batch_size": 7, "shard_size_mb": 3, "seed": 5,
                                 "removed_sample": 2, "keep_removed": True, "text_keys": ["body", "x"]})
    cfg = run_config(recipe, np=2)
    assert (cfg.batch_size, cfg.shard_bytes, cfg.seed, cfg.removed_sample, cfg.removed_limit, cfg.text_key,
            cfg.np) == (7, 3 << 20, 5, 2, None, "body", 2)
