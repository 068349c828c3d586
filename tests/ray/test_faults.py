"""Faults on a real two-node Ray cluster: a driver killed with SIGKILL and rerun resumes from the finished
shards' markers with the same bytes; a worker node removed while its task runs loses and duplicates no
row (Ray reruns the task on the other node); Ctrl-C stops the cluster's work at once."""
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
import yaml
from gm_testutil import REPO, check_accounting
from rayutil import artifacts, make_input, run, wait_for, wait_while

from gristmill.cli import main

pytestmark = pytest.mark.ray

DEDUP = [{"words_num_filter": {"min_num": 30}},
         {"document_deduplicator": {"lowercase": True}},
         {"document_minhash_deduplicator": {"jaccard_threshold": 0.7}}]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_input(tmp_path_factory.mktemp("input"))


def recipe(tmp_path, data, name, process, **kw) -> str:
    r = {"project_name": name, "dataset_path": str(data), "export_path": str(tmp_path / f"{name}.jsonl"),
         "work_dir": str(tmp_path / f"work-{name}"), "np": 2, "allow_scripts": True, "process": process, **kw}
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(r))
    return str(p)


def cli(path, *args) -> list[str]:
    return [sys.executable, "-m", "gristmill.cli", "run", path, "--no-progress", *args]


def test_driver_sigkill_then_rerun_resumes_with_the_same_bytes(cluster, data, tmp_path):
    gate = tmp_path / "gate"
    done = tmp_path / "work-killed" / "stages" / "00-*" / "done" / "*.json"
    # once two shards have finished, every row waits while the gate exists: the kill lands mid-stage
    hold = f"lambda s: (len(__import__('glob').glob({str(done)!r})) >= 2 and {wait_while(gate)}, s)[1]"
    process = [{"python_lambda_mapper": {"lambda_str": hold}}, *DEDUP]
    assert main(["run", recipe(tmp_path, data, "clean", process, np=1), "--no-progress"]) == 0  # local engine
    killed = recipe(tmp_path, data, "killed", process, executor_type="ray", ray_address=cluster.address)
    gate.touch()
    proc = subprocess.Popen(cli(killed), cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    markers = lambda: list(done.parent.parent.parent.glob("00-*/done/shard-*.json"))  # noqa: E731
    wait_for(lambda: len(markers()) >= 2, "two finished shards")
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    finished = len(markers())
    gate.unlink()
    time.sleep(1)  # the killed job's tasks are gone with its driver: none finishes after the kill
    assert len(markers()) == finished < 6
    assert not (tmp_path / "killed.jsonl").exists()
    res = subprocess.run(cli(killed), cwd=REPO, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert f"stage 0: {finished} of 6 shards already done, skipped" in res.stderr
    assert (tmp_path / "killed.jsonl").read_bytes() == (tmp_path / "clean.jsonl").read_bytes()
    for side in ("rejects.jsonl", "report.json"):
        assert (tmp_path / "work-killed" / side).exists()
    check_accounting(__import__("json").loads((tmp_path / "work-killed" / "report.json").read_text()))


def test_ctrl_c_stops_the_clusters_work(cluster, data, tmp_path):
    gate, started = tmp_path / "gate", tmp_path / "started"
    started.mkdir()
    p = recipe(tmp_path, data, "int", [announce_then_hold(started, gate)],
               executor_type="ray", ray_address=cluster.address)
    gate.touch()
    proc = subprocess.Popen(cli(p), cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    wait_for(lambda: len(list(started.iterdir())) == 2, "a task running on each node")
    os.kill(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted (SIGINT): rerun the same command to resume" in err
    workers = [int(f.name) for f in started.iterdir()]
    wait_for(lambda: not any(_alive(pid) for pid in workers), "the cancelled tasks' workers to stop", 30)
    assert cluster_cpus() == 2  # the cluster itself keeps running


def test_node_lost_mid_run_loses_and_duplicates_no_row(cluster, data, tmp_path):
    """Last in this module: it takes the second node away."""
    gate, started = tmp_path / "gate", tmp_path / "started"
    started.mkdir()
    (tmp_path / "ref").mkdir()
    ref = [announce_then_hold(tmp_path / "ref", gate), *DEDUP]  # same rows out; announces elsewhere
    local = artifacts(run(data, ref, tmp_path / "local" / "out.jsonl", tmp_path / "local-work", np=1, keep_removed=True))
    process = [announce_then_hold(started, gate), *DEDUP]
    errors = []

    def remove_second_node():
        try:
            wait_for(lambda: len(list(started.iterdir())) >= 2, "a task running on each node")
            cluster.remove_node(cluster.second)
        except BaseException as e:  # noqa: BLE001 - reported by the test below
            errors.append(e)
        finally:
            gate.unlink()

    gate.touch()
    th = threading.Thread(target=remove_second_node, daemon=True)
    th.start()
    report = run(data, process, tmp_path / "ray" / "out.jsonl", tmp_path / "ray-work", np=2, keep_removed=True,
                 engine="ray", engine_address=cluster.address)
    th.join()
    assert not errors and cluster_cpus() == 1
    # a worker went down with its node mid-task (it exits once it sees its raylet gone: allow it a moment)
    wait_for(lambda: any(not _alive(int(f.name)) for f in started.iterdir()), "the lost node's worker to exit", 30)
    assert artifacts(report) == local
    check_accounting(report)


def announce_then_hold(started, gate) -> dict:
    """A lambda mapper that touches ``started/<worker pid>`` for each row, then waits while ``gate`` exists."""
    return {"python_lambda_mapper": {"lambda_str": (
        f"lambda s: (open({str(started)!r} + '/' + str(__import__('os').getpid()), 'a').close(), "
        f"{wait_while(gate)}, s)[2]")}}


def cluster_cpus() -> int:
    import ray
    return int(ray.cluster_resources().get("CPU", 0))


def _alive(pid: int) -> bool:
    """True while ``pid`` runs; an exited worker nobody has reaped yet (a zombie) counts as gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")
