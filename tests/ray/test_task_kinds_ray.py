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
