"""Declared op resources on a real Ray cluster (issue 24 §2): the executor turns a stage's resources into
the Ray options of its shard tasks (``num_cpus``, ``num_gpus``, ``memory``), caps the tasks in flight at
``num_proc``, falls back to CPUs on a cluster without GPUs, and the bytes are the local engine's."""
import pytest
from rayutil import artifacts, make_input, run

from gristmill.engine.ray.executor import RayExecutor
from gristmill.recipe import build_ops

pytestmark = pytest.mark.ray

PLAIN = [{"replace_content_mapper": {"pattern": r"https?://\S+", "repl": ""}},
         {"words_num_filter": {"min_num": 50}},
         {"document_deduplicator": {"lowercase": True}}]
GPU = [PLAIN[0], {"words_num_filter": {"min_num": 50, "num_gpus": 1, "mem_required": "1MB", "num_proc": 1}},
       {"document_deduplicator": {"lowercase": True, "cpu_required": 2}}]


@pytest.fixture(scope="module")
def gpu_cluster():
    """Two nodes; the second declares one GPU (Ray schedules on declared resources: no real GPU needed)."""
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    c.add_node(num_cpus=1, num_gpus=1)
    c.wait_for_nodes()
    ray.init(address=c.address, logging_level="WARNING")
    try:
        yield c
    finally:
        ray.shutdown()
        c.shutdown()


class _Task:
    def __init__(self, ops):
        self.ops, self.stage = ops, 1


class _Spy:
    """Stands in for the remote function: records the options a stage's tasks are submitted with."""

    def __init__(self, real, seen):
        self.real, self.seen = real, seen

    def options(self, **kw):
        self.seen.append(kw)
        return self.real.options(**kw)

    def remote(self, *a):
        self.seen.append({})
        return self.real.remote(*a)


def test_the_options_a_stage_s_tasks_get(gpu_cluster):
    said = []
    ex = RayExecutor(2, None, said.append)
    try:
        ops = build_ops(GPU)
        opts, limit = ex.task_options([_Task(ops[:2])])
        assert opts == {"num_cpus": 1, "num_gpus": 1, "memory": 10**6} and limit == 1
        # a fused stage: the most CPUs/GPUs, the sum of memory; more CPUs than any node has → the biggest node
        opts, limit = ex.task_options([_Task(ops[1:])])
        assert opts == {"num_cpus": 1, "num_gpus": 1, "memory": 10**6} and limit == 1
        assert ex.task_options([_Task(build_ops(PLAIN))]) == ({"num_cpus": 1}, None)
        assert ex.task_options([_Task(build_ops([{"words_num_filter": {"num_gpus": 0.5}}]))])[0] == \
            {"num_cpus": 1, "num_gpus": 0.5}
    finally:
        ex.close()


def test_a_gpu_stage_runs_on_the_gpu_node_with_the_local_bytes(gpu_cluster, tmp_path, monkeypatch):
    seen = []
    real_init = RayExecutor.__init__

    def spying_init(self, *a, **kw):
        real_init(self, *a, **kw)
        self._shard = _Spy(self._shard, seen)

    monkeypatch.setattr(RayExecutor, "__init__", spying_init)
    data = make_input(tmp_path)
    local = artifacts(run(data, PLAIN, tmp_path / "local" / "out.jsonl", tmp_path / "wl", np=1))
    got = artifacts(run(data, GPU, tmp_path / "ray" / "out.jsonl", tmp_path / "wr", np=2, engine="ray"))
    assert got == local and local["rows"] == (210, 132, 9)
    assert {"num_cpus": 1.0, "num_gpus": 1.0, "memory": 10**6} in seen  # the stage with the GPU filter


def test_no_gpu_in_the_cluster_runs_on_cpus(gpu_cluster, monkeypatch):
    import ray
    said = []
    ex = RayExecutor(2, None, said.append)
    try:
        monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 2.0})  # as a cluster without GPUs
        opts, _ = ex.task_options([_Task(build_ops([{"words_num_filter": {"accelerator": "cuda"}}]))])
        assert opts == {"num_cpus": 1}
        assert said[-1] == "ray: the ops ask for 1 GPU(s) per task and the cluster has none: they run on CPUs"
    finally:
        ex.close()
