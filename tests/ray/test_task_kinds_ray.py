"""Download as a task kind on a real Ray cluster (issue 24 §2): each file a ``DownloadTask`` on the cluster's
workers gives the files and report of the threaded download (file:// URLs: no network in tests)."""
import os

import pytest

from gristmill.engine.ray.executor import RayExecutor
from gristmill.web.download import download

pytestmark = pytest.mark.ray


def _files(root):
    return {os.path.relpath(os.path.join(d, f), root): open(os.path.join(d, f), "rb").read()
            for d, _, fs in os.walk(root) for f in fs if not f.endswith(".json")}


def test_download_tasks_on_ray_match_the_threads(cluster, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for i in range(4):
        (src / f"f{i}.bin").write_bytes(bytes([i + 1]) * (10_000 + i))
    urls = [(src / f"f{i}.bin").as_uri() for i in range(4)] + [(src / "missing.bin").as_uri()]
    threads = download(urls, str(tmp_path / "t"), allow_file_urls=True, retries=0)
    ex = RayExecutor(2, None)
    try:
        tasks = download(urls, str(tmp_path / "x"), allow_file_urls=True, retries=0, executor=ex)
    finally:
        ex.close()
    view = lambda rep: [(os.path.basename(f.path), f.status, f.bytes, f.size, f.error) for f in rep.files]  # noqa: E731
    assert view(tasks) == view(threads) and tasks.counts() == {"downloaded": 4, "skipped": 0, "failed": 1}
    assert _files(tmp_path / "x") == _files(tmp_path / "t") and len(_files(tmp_path / "t")) == 4


def test_a_recipes_download_stage_runs_as_tasks_on_the_clusters_workers(cluster, tmp_path, monkeypatch):
    """`engine: ray` with a `download:` section: the files are DownloadTasks on the run's Ray executor (the
    driver fetches nothing), then the run reads them."""
    import json

    from gristmill.engine import executor as E
    from gristmill.pipeline import plan_recipe, run
    src = tmp_path / "src"
    src.mkdir()
    for i in range(3):
        (src / f"p{i}.jsonl").write_text("".join(json.dumps({"text": f"doc {i} {j} " * 5}) + "\n" for j in range(4)))
    kinds = []
    real = E.make_executor

    def spy(*a, **kw):
        ex = real(*a, **kw)
        run_ = ex.run

        def run_tasks(tasks, on_progress):
            kinds.extend(type(t).__name__ for t in tasks)
            return run_(tasks, on_progress)
        ex.run = run_tasks
        return ex
    monkeypatch.setattr(E, "make_executor", spy)
    recipe = {"project_name": "dl", "executor_type": "ray", "ray_address": cluster.address, "np": 2,
              "download": {"urls": [(src / f"p{i}.jsonl").as_uri() for i in range(3)], "out_dir": str(tmp_path / "dl"),
                           "allow_file_urls": True, "retries": 0},
              "dataset_path": str(tmp_path / "dl" / "**" / "*.jsonl"), "export_path": str(tmp_path / "out.jsonl"),
              "work_dir": str(tmp_path / "work"), "process": [{"text_length_filter": {"min_len": 1}}]}
    res = run(plan_recipe(recipe, progress=False))
    assert res.status == 0, res.error
    assert kinds.count("DownloadTask") == 3
    got = _files(tmp_path / "dl")
    assert sorted(got.values()) == sorted(_files(src).values()) and res.report["rows_out"] == 12
