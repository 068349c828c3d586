"""Download as a task kind on the executor (issue 24 §2): each file a ``DownloadTask`` on the local worker
processes gives the files and the report (order included) of the threaded download; a rerun skips them."""
import os

from fakehttp import FakeServer

from gristmill.engine.executor import LocalExecutor, run_one
from gristmill.web.download import DownloadTask, download

FAST = {"backoff": 0.01, "timeout": 10}


def _files(root):
    return {os.path.relpath(os.path.join(d, f), root): open(os.path.join(d, f), "rb").read()
            for d, _, fs in os.walk(root) for f in fs if not f.endswith(".json")}


def _view(rep):
    return [(os.path.basename(f.path), f.status, f.bytes, f.size, f.error) for f in rep.files]


def test_download_tasks_on_worker_processes_match_the_threads(tmp_path):
    with FakeServer() as s:
        for i in range(5):
            s.files[f"/d/f{i}.bin"] = bytes([i]) * (50_000 + 997 * i)
        s.faults["/d/f2.bin"] = [("drop", 20_000)]
        urls = [f"{s.url}/d/f{i}.bin" for i in range(5)] + [f"{s.url}/d/missing.bin"]
        threads = download(urls, str(tmp_path / "t"), workers=3, retries=1, **FAST)
        s.faults["/d/f2.bin"] = [("drop", 20_000)]
        ex = LocalExecutor(2)
        try:
            tasks = download(urls, str(tmp_path / "x"), retries=1, executor=ex, **FAST)
            again = download(urls, str(tmp_path / "x"), retries=1, executor=ex, **FAST)
        finally:
            ex.close()
    assert _view(tasks) == _view(threads)
    assert tasks.counts() == {"downloaded": 5, "skipped": 0, "failed": 1}
    assert _files(tmp_path / "x") == _files(tmp_path / "t") and len(_files(tmp_path / "x")) == 5
    assert again.counts() == {"downloaded": 0, "skipped": 5, "failed": 1}


def test_a_download_task_runs_like_any_task(tmp_path):
    with FakeServer() as s:
        s.files["/a.bin"] = b"x" * 1000
        dest = str(tmp_path / "a.bin")
        from gristmill.web.download import _Downloader
        task = DownloadTask(7, f"{s.url}/a.bin", dest, _Downloader(0, 0.0, 10, {}, False, None, None).settings())
        rec = run_one(task)
    assert task.stage_dir == str(tmp_path)
    assert rec["index"] == 7 and rec["result"]["status"] == "downloaded" and open(dest, "rb").read() == b"x" * 1000
