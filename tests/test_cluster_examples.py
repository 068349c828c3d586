"""The cluster examples: the Slurm sbatch template parses (bash -n) and, where Debian's slurm-wlm is
installed and this runs as root, runs a recipe on a one-node Slurm cluster started here (slurmctld +
slurmd, auth/none, private ports and state dirs) — a Ray head inside the job, `gristmill run --engine ray`
— and exports the same bytes as the local engine; the KubeRay RayJob is a RayJob whose entrypoint is a
`gristmill run --engine ray` line and whose pods mount the same volume."""
import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SBATCH = ROOT / "examples" / "slurm" / "gristmill-ray.sbatch"
RAYJOB = ROOT / "examples" / "kuberay" / "rayjob.yaml"


def test_sbatch_template_parses():
    p = subprocess.run(["bash", "-n", str(SBATCH)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    text = SBATCH.read_text()
    assert "#SBATCH --nodes" in text and 'gristmill run "$RECIPE" --engine ray --address "$ADDRESS"' in text


def test_rayjob_example():
    job = yaml.safe_load(RAYJOB.read_text())
    assert job["apiVersion"] == "ray.io/v1" and job["kind"] == "RayJob"
    spec = job["spec"]
    assert spec["entrypoint"].startswith("gristmill run ") and "--engine ray" in spec["entrypoint"]
    cluster = spec["rayClusterSpec"]
    pods = [cluster["headGroupSpec"]["template"]["spec"]] + [g["template"]["spec"] for g in cluster["workerGroupSpecs"]]
    for pod in pods:  # every pod mounts the data volume at the same path
        (c,) = pod["containers"]
        assert {"name": "data", "mountPath": "/data"} in c["volumeMounts"]
        assert any(v["name"] == "data" for v in pod["volumes"])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _recipe(d: Path) -> Path:
    rows = [{"id": str(i), "text": ("the quick brown fox number %d jumps " % (i % 9)) * 12} for i in range(300)]
    (d / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (d / "recipe.yaml").write_text(
        "project_name: slurm\ndataset_path: in.jsonl\nexport_path: out/clean.jsonl\nwork_dir: work\n"
        "process:\n  - words_num_filter: {min_num: 5}\n  - document_minhash_deduplicator: {}\n")
    return d / "recipe.yaml"


@pytest.mark.slow
@pytest.mark.skipif(not (shutil.which("slurmctld") and shutil.which("slurmd") and shutil.which("sbatch")),
                    reason="Debian's slurm-wlm is not installed (apt-get install slurm-wlm)")
@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="slurmd runs jobs as root here")
def test_sbatch_runs_a_recipe_on_a_one_node_slurm_cluster(tmp_path):
    pytest.importorskip("ray")
    host = socket.gethostname()
    conf = tmp_path / "slurm.conf"
    (tmp_path / "state").mkdir()
    (tmp_path / "spool").mkdir()
    conf.write_text(f"""ClusterName=gm{os.getpid()}
SlurmctldHost={host}
AuthType=auth/none
CredType=cred/none
SlurmUser=root
SlurmdUser=root
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
StateSaveLocation={tmp_path}/state
SlurmdSpoolDir={tmp_path}/spool
SlurmctldPidFile={tmp_path}/slurmctld.pid
SlurmdPidFile={tmp_path}/slurmd.pid
SlurmctldLogFile={tmp_path}/slurmctld.log
SlurmdLogFile={tmp_path}/slurmd.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MpiDefault=none
NodeName={host} CPUs={os.cpu_count()} State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")
    env = {**os.environ, "SLURM_CONF": str(conf), "GRISTMILL_RAY_PORT": str(_free_port()),
           "GRISTMILL_RAY_TMP": f"/tmp/gm-ray-{os.getpid()}"}
    daemons = [subprocess.Popen([d, "-D", "-f", str(conf)], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL) for d in ("slurmctld", "slurmd")]
    try:
        for _ in range(60):
            p = subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True)
            if p.stdout.strip() == "idle":
                break
            time.sleep(1)
        else:
            pytest.fail(f"the one-node Slurm cluster did not come up: {p.stdout} {p.stderr}")
        job = tmp_path / "job"
        job.mkdir()
        recipe = _recipe(job)
        p = subprocess.run(["sbatch", "--wait", "--nodes=1", f"--cpus-per-task={min(2, os.cpu_count())}",
                            "-o", str(job / "job.log"), str(SBATCH), str(recipe)],
                           cwd=job, env=env, capture_output=True, text=True, timeout=400)
        log = (job / "job.log").read_text() if (job / "job.log").exists() else ""
        assert p.returncode == 0, p.stdout + p.stderr + log[-3000:]
        local = tmp_path / "local"
        local.mkdir()
        _recipe(local)
        q = subprocess.run(["gristmill", "run", "recipe.yaml", "--no-progress"], cwd=local, capture_output=True,
                           text=True, timeout=300)
        assert q.returncode == 0, q.stderr
        ray_out, local_out = (job / "out" / "clean.jsonl").read_bytes(), (local / "out" / "clean.jsonl").read_bytes()
        assert ray_out == local_out and 0 < ray_out.count(b"\n") < 300
    finally:
        for d in daemons:
            d.terminate()
        for d in daemons:
            try:
                d.wait(timeout=30)
            except subprocess.TimeoutExpired:
                d.kill()
