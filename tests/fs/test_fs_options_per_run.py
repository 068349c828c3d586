"""A recipe's ``storage_options`` belong to its run: carried in its RunConfig and made the options of that
run's fs calls (``fs.active``), not installed in the process. Planning (validating) another recipe in the
same process, or running two plans at once on threads, leaves each run with its own options. The options
reach the fs layer through a real fsspec filesystem whose objects answer only with the right option."""
import json
import threading

import fsspec
import pytest
from fsspec.implementations.memory import MemoryFileSystem

from gristmill import fs
from gristmill.pipeline.plan import plan_recipe
from gristmill.pipeline.run import run


class TaggedFS(MemoryFileSystem):
    """Memory storage in which ``tagged://T/...`` answers only a filesystem made with ``tag=T`` (as a
    bucket answers only its own credentials); anything else is PermissionError."""

    protocol = "tagged"
    store: dict = {}
    pseudo_dirs = [""]

    @classmethod
    def _strip_protocol(cls, path):
        return super()._strip_protocol(str(path).replace("tagged://", "memory://", 1))

    def __init__(self, *args, tag=None, **kw):
        super().__init__(*args, **kw)
        self.tag = tag

    def _check(self, path):
        owner = self._strip_protocol(path).lstrip("/").split("/")[0]
        if owner != self.tag:
            raise PermissionError(f"{path}: access denied (options tag={self.tag!r})")

    def ls(self, path, detail=True, **kw):
        self._check(path)
        return super().ls(path, detail=detail, **kw)

    def info(self, path, **kw):
        self._check(path)
        return super().info(path, **kw)

    def _open(self, path, mode="rb", **kw):
        self._check(path)
        return super()._open(path, mode, **kw)


@pytest.fixture
def tagged():
    fsspec.register_implementation("tagged", TaggedFS, clobber=True)
    TaggedFS.store.clear()
    yield
    TaggedFS.store.clear()
    TaggedFS.clear_instance_cache()


def _recipe(tmp_path, tag, options=True):
    rows = [{"id": f"{tag}{i}", "text": f"row {i} of {tag} " + "word " * (i % 30)} for i in range(60)]
    with TaggedFS(tag=tag).open(f"/{tag}/in/a.jsonl", "wb") as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows).encode())
    raw = {"dataset_path": f"tagged://{tag}/in/", "export_path": str(tmp_path / f"{tag}.jsonl"),
           "work_dir": str(tmp_path / f"w-{tag}"), "np": 1, "process": [{"words_num_filter": {"min_num": 10}}]}
    if options:
        raw["storage_options"] = {"tagged://": {"tag": tag}}
    return raw


def test_planning_another_recipe_does_not_change_a_planned_runs_options(tagged, tmp_path):
    a = plan_recipe(_recipe(tmp_path, "A"), progress=False)
    b = plan_recipe(_recipe(tmp_path, "B", options=False), progress=False)  # a validation in between
    assert fs.current_options() == {} and fs.OPTIONS_ENV not in __import__("os").environ
    assert a.cfg.storage_options == {"tagged://": {"tag": "A"}} and "'tag'" not in repr(a.cfg)
    res = run(a)
    assert res.status == 0, res.error
    assert (tmp_path / "A.jsonl").read_text().count("\n") == res.report["rows_out"] > 0
    res_b = run(b)  # no options: its bucket refuses it (A's options are not reused); nothing written
    assert res_b.status == 2 and "tagged://B/in/" in res_b.error.message and not (tmp_path / "B.jsonl").exists()


def test_two_runs_at_once_on_threads_each_with_its_own_options(tagged, tmp_path):
    plans = [plan_recipe(_recipe(tmp_path, t), progress=False) for t in ("A", "B", "C")]
    results = {}

    def go(p, t):
        results[t] = run(p)

    threads = [threading.Thread(target=go, args=(p, t)) for p, t in zip(plans, "ABC")]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for t in "ABC":
        assert results[t].status == 0, results[t].error
        out = (tmp_path / f"{t}.jsonl").read_text().splitlines()
        assert out and all(json.loads(x)["id"].startswith(t) for x in out)


def test_the_python_api_takes_a_runs_storage_options(tagged, tmp_path):
    from gristmill.dataset import Dataset

    _recipe(tmp_path, "A")  # writes the data under tagged://A/in/
    ds = Dataset.load("tagged://A/in/")
    rep = ds.export(str(tmp_path / "api.jsonl"), work_dir=str(tmp_path / "w-api"),
                    storage_options={"tagged://": {"tag": "A"}})
    assert rep["rows_read"] == 60 and (tmp_path / "api.jsonl").read_text().count("\n") == 60
    with pytest.raises(Exception, match="tagged://A/in"):  # another run without them: refused
        ds.export(str(tmp_path / "api2.jsonl"), work_dir=str(tmp_path / "w-api2"))
