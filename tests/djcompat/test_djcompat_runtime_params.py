"""Data-Juicer's per-op scheduling params (num_proc, accelerator, …, read by its base OP from every op) are
accepted: the resource ones become the op's resources, the others have no effect and are reported, e.g. configs/demo/dedup-ray-bts-gpu.yaml's `accelerator: cuda`; a
param the op itself declares keeps its meaning, and a misspelt one still fails."""
import pytest

from gristmill.recipe import RecipeError, parse_recipe
from gristmill.registry import create_op


def test_scheduling_params_are_accepted_and_reported():
    recipe = {"dataset_path": "in.jsonl", "process": [
        {"ray_bts_minhash_deduplicator": {"accelerator": "cuda", "num_proc": 4}},
        {"words_num_filter": {"min_num": 3, "num_proc": 2, "mem_required": "2GB"}}]}
    _, ops, warnings = parse_recipe(recipe)
    # issue 24 §2: the resource params are no longer ignored: they become the op's resources (see
    # tests/test_op_resources.py); what is left to ignore is reported as before
    assert [op.ignored_params for op in ops] == [(), ()]
    assert not any("scheduling params" in w for w in warnings)
    assert ops[0].resources.gpus == 1 and ops[0].resources.procs == 4
    assert ops[1].resources.memory == 2 * 10**9 and ops[1].resources.procs == 2
    _, other, warned = parse_recipe({"dataset_path": "in.jsonl", "process": [
        {"ray_bts_minhash_deduplicator": {"turbo": True, "num_proc": 4}}]})
    assert other[0].ignored_params == ("turbo",)
    assert any("ray_bts_minhash_deduplicator" in w and "turbo" in w for w in warned)
    # no effect: the same op (config, hence resume fingerprint) as without them
    assert ops[1].config() == create_op("words_num_filter", {"min_num": 3}).config()


def test_a_declared_param_keeps_its_meaning_and_typos_still_fail():
    from gristmill.models import unchecked
    with unchecked():  # the CLIP model need not be in the store to build the op
        op = create_op("image_nsfw_filter", {"batch_size": 3, "num_proc": 2})
    assert op.params.batch_size == 3 and op.ignored_params == () and op.resources.procs == 2
    with pytest.raises(RecipeError, match="num_prc"):
        parse_recipe({"dataset_path": "in.jsonl", "process": [{"words_num_filter": {"num_prc": 2}}]})
