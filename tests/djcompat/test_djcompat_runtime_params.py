"""Data-Juicer's per-op scheduling params (num_proc, accelerator, …, read by its base OP from every op) are
accepted with no effect and reported, e.g. configs/demo/dedup-ray-bts-gpu.yaml's `accelerator: cuda`; a
param the op itself declares keeps its meaning, and a misspelt one still fails."""
import pytest

from gristmill.recipe import RecipeError, parse_recipe
from gristmill.registry import create_op


def test_scheduling_params_are_accepted_and_reported():
    recipe = {"dataset_path": "in.jsonl", "process": [
        {"ray_bts_minhash_deduplicator": {"accelerator": "cuda", "num_proc": 4}},
        {"words_num_filter": {"min_num": 3, "num_proc": 2, "mem_required": "2GB"}}]}
    _, ops, warnings = parse_recipe(recipe)
    assert [op.ignored_params for op in ops] == [("accelerator", "num_proc"), ("mem_required", "num_proc")]
    assert any("ray_bts_minhash_deduplicator" in w and "accelerator, num_proc" in w for w in warnings)
    # no effect: the same op (config, hence resume fingerprint) as without them
    assert ops[1].config() == create_op("words_num_filter", {"min_num": 3}).config()


def test_a_declared_param_keeps_its_meaning_and_typos_still_fail():
    from gristmill.models import unchecked
    with unchecked():  # the CLIP model need not be in the store to build the op
        op = create_op("image_nsfw_filter", {"batch_size": 3, "num_proc": 2})
    assert op.params.batch_size == 3 and op.ignored_params == ("num_proc",)
    with pytest.raises(RecipeError, match="num_prc"):
        parse_recipe({"dataset_path": "in.jsonl", "process": [{"words_num_filter": {"num_prc": 2}}]})
