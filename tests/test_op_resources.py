"""Ops declare resources (cpus, gpus, memory, procs) the way NeMo Curator's stages do; Data-Juicer's per-op
``num_proc``, ``num_gpus``/``accelerator``, ``mem_required`` map onto them (no "no effect" warning any more);
the local executor runs fewer of a stage's tasks at once when its resources say so, and the bytes stay the
same (issue 24 §2)."""
import gzip
import json
from pathlib import Path

import pytest
from gm_testutil import SAMPLE

from gristmill.core.resources import (Resources, from_dj_params, local_workers, parse_memory,
                                      stage_resources)
from gristmill.dataset import Dataset
from gristmill.engine.executor import LocalExecutor
from gristmill.engine.pool import WorkerPool
from gristmill.ops.base import Op
from gristmill.recipe import RecipeError, build_ops, parse_recipe
from gristmill.registry import create_op


def test_default_is_one_cpu_and_not_part_of_the_config():
    op = create_op("words_num_filter", {"min_num": 3})
    assert Op.resources == Resources() and op.resources == Resources(cpus=1, gpus=0, memory=0, procs=None)
    big = create_op("words_num_filter", {"min_num": 3, "num_proc": 2, "mem_required": "2GB", "num_cpus": 2})
    assert big.resources == Resources(cpus=2, gpus=0, memory=2 * 10**9, procs=2)
    assert type(big).resources == Resources()  # the class keeps its default
    assert big.config() == op.config()  # scheduling, not output: resume fingerprints do not move


def test_a_recipe_s_runtime_params_show_on_the_built_ops_with_no_ignored_warning():
    recipe = {"dataset_path": "in.jsonl", "export_path": "out.jsonl", "process": [
        {"words_num_filter": {"min_num": 3, "num_proc": 4, "mem_required": "512MiB"}},
        {"document_deduplicator": {"num_gpus": 0.5, "cpu_required": 2}},
        {"ray_bts_minhash_deduplicator": {"accelerator": "cuda"}},
        {"text_length_filter": {"min_len": 1, "memory": 1000, "gpu_required": 2}}]}
    _, ops, warnings = parse_recipe(recipe)
    assert [op.resources for op in ops] == [
        Resources(cpus=1, gpus=0, memory=512 * 2**20, procs=4),
        Resources(cpus=2, gpus=0.5, memory=0, procs=None),
        Resources(cpus=1, gpus=1, memory=0, procs=None),  # accelerator: cuda is one GPU
        Resources(cpus=1, gpus=2, memory=1000, procs=None)]
    assert [op.ignored_params for op in ops] == [(), (), (), ()]
    assert not any("no effect" in w for w in warnings), warnings


def test_a_gpu_model_op_asks_for_a_gpu():
    from gristmill.models import unchecked
    with unchecked():
        cuda = create_op("image_nsfw_filter", {"device": "cuda"})
        auto = create_op("image_nsfw_filter", {})  # device: auto, a GPU where there is one
        cpu = create_op("image_nsfw_filter", {"device": "cpu"})
        acc_cpu = create_op("image_nsfw_filter", {"accelerator": "cpu"})
        two = create_op("image_nsfw_filter", {"device": "cuda", "num_gpus": 2})
    assert [o.resources.gpus for o in (cuda, auto, cpu, acc_cpu, two)] == [1, 1, 0, 0, 2]
    assert type(auto).resources.gpus == 0  # the class default stays one CPU


@pytest.mark.parametrize("params, msg", [
    ({"num_proc": 0}, "num_proc: 0 is not a positive integer"),
    ({"mem_required": "lots"}, "mem_required: not a memory size: 'lots'"),
    ({"num_gpus": -1}, "num_gpus: -1 is not a non-negative number"),
    ({"accelerator": "tpu"}, "accelerator: 'tpu' is not cpu or cuda")])
def test_bad_resource_params_are_refused_with_their_yaml_path(params, msg):
    with pytest.raises(RecipeError) as e:
        parse_recipe({"dataset_path": "in.jsonl", "process": [{"words_num_filter": params}]})
    assert f"process[0].words_num_filter.{msg}" in str(e.value)


def test_parse_memory_units():
    assert [parse_memory(v) for v in ("2GB", "512 MiB", "1.5g", "100", 7, "3kb", "1TiB")] == [
        2 * 10**9, 512 * 2**20, 1_500_000_000, 100, 7, 3000, 2**40]
    for bad in ("", "2XB", True, -1):
        with pytest.raises(ValueError):
            parse_memory(bad)


def test_from_dj_params_leaves_others_alone():
    base = Resources(cpus=4)
    assert from_dj_params(base, {"turbo": True}) is base
    assert from_dj_params(base, {"accelerator": "cpu"}) is base
    assert from_dj_params(base, {"accelerator": "cuda", "num_gpus": 0}).gpus == 0


def test_stage_resources_combine_a_fused_chain():
    class A:
        resources = Resources(cpus=2, memory=10, procs=8)

    class B:
        resources = Resources(gpus=1, memory=5, procs=3)

    class C:  # not an op of ours: the default
        pass

    assert stage_resources([A(), B(), C()]) == Resources(cpus=2, gpus=1, memory=15, procs=3)
    assert stage_resources([]) == Resources()


def test_local_workers_caps():
    r = Resources
    assert local_workers(r(), 8, cpus=4, memory=100) == 8  # one CPU each: np decides (as before)
    assert local_workers(r(procs=3), 8, cpus=4, memory=100) == 3
    assert local_workers(r(cpus=2), 8, cpus=4, memory=100) == 2
    assert local_workers(r(memory=30), 8, cpus=64, memory=100) == 3
    assert local_workers(r(memory=300, cpus=128), 8, cpus=4, memory=100) == 1  # still runs, one at a time
    assert local_workers(r(procs=16), 2, cpus=64, memory=100) == 2  # never more than np


class _Task:
    def __init__(self, ops, stage=1):
        self.ops, self.stage = ops, stage


def test_local_executor_runs_fewer_tasks_at_once_and_says_why():
    said = []
    ex = LocalExecutor(4, said.append)
    op = create_op("words_num_filter", {"min_num": 3, "num_proc": 2})
    assert ex.at_once([_Task([op])] * 6) == 2
    assert said == ["stage 1: 2 of np=4 workers at once (the ops ask for cpus=1, procs=2 each)"]
    said.clear()
    assert ex.at_once([_Task([create_op("words_num_filter", {"min_num": 3})])] * 6) == 4 and said == []


def _slow_square(x):
    import time
    time.sleep(0.05)
    return x * x


def test_worker_pool_limit_runs_every_item():
    pool = WorkerPool(3)
    try:
        got = sorted(pool.map_unordered(_slow_square, range(10), lambda r, b: None, limit=1))
        assert got == [x * x for x in range(10)]
        assert sorted(pool.map_unordered(_slow_square, range(7), lambda r, b: None, limit=2)) == \
            [x * x for x in range(7)]
    finally:
        pool.close()


def _input(root: Path) -> Path:
    with gzip.open(SAMPLE, "rt", encoding="utf-8") as f:
        docs = [json.loads(line) for line in f]
    src = root / "in"
    src.mkdir()
    for k in range(4):
        with open(src / f"part-{k}.jsonl", "w", encoding="utf-8") as f:
            for d in docs[k::4] + [{"id": f"dup{k}", "text": docs[k]["text"]}]:
                f.write(json.dumps(d, ensure_ascii=False) + "\n")
    return src


PROCESS = [{"replace_content_mapper": {"pattern": r"https?://\S+", "repl": ""}},
           {"words_num_filter": {"min_num": 50}},
           {"document_deduplicator": {"lowercase": True}},
           {"text_length_filter": {"min_len": 200}}]


def _run(src, process, out: Path, np: int) -> dict:
    rep = Dataset.load(str(src)).process(build_ops(process)).export(str(out / "out.jsonl"),
                                                                   work_dir=str(out / "work"), np=np)
    files = sorted(rep["exported_files"])
    return {"export": [Path(p).read_bytes() for p in files], "names": [Path(p).name for p in files],
            "rows": (rep["rows_read"], rep["rows_out"], rep["rejects"]),
            "ops": [(o["op"], o["rows_in"], o["rows_out"], o["removed"]) for o in rep["ops"]]}


def test_local_runs_with_resources_give_the_same_bytes(tmp_path):
    src = _input(tmp_path)
    plain = _run(src, PROCESS, tmp_path / "plain", np=2)
    capped = [dict(p) for p in PROCESS]
    capped[1] = {"words_num_filter": {"min_num": 50, "num_proc": 1, "mem_required": "1024TiB"}}
    capped[3] = {"text_length_filter": {"min_len": 200, "num_proc": 1}}
    got = _run(src, capped, tmp_path / "capped", np=2)
    assert got == plain and plain["rows"][0] == 183 and plain["export"][0]
