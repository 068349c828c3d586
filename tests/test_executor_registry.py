"""Executors come from a registry (issue 24 §2): names → "module:Class", imported on demand, so the executor
module never imports Ray's (no import circle), an unknown name is refused with the valid ones, and a new
executor is one ``register_executor`` away; the stage loop (``create_engine``) asks the registry."""
import subprocess
import sys

import pytest

from gristmill.engine import executor as ex
from gristmill.engine.base import ENGINES, create_engine
from gristmill.engine.config import RunConfig


def test_importing_the_executors_imports_neither_ray_nor_its_executor():
    code = ("import sys, gristmill.engine.base, gristmill.engine.executor, gristmill.tokenize.run; "
            "print(sorted(m for m in sys.modules if m == 'ray' or m.startswith('gristmill.engine.ray')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_registry_names_the_executors_and_refuses_others(tmp_path):
    assert list(ENGINES) == ["local", "ray"] and ENGINES is ex.EXECUTORS
    assert ex.executor_class("local") is ex.LocalExecutor
    with pytest.raises(ValueError, match=r"unknown engine 'lokal'; did you mean 'local'\? \(engines: local, ray\)"):
        ex.check_executor("lokal")
    with pytest.raises(ValueError, match="unknown engine 'lokal'"):
        create_engine(RunConfig(dataset_path="x.jsonl", work_dir=str(tmp_path), engine="lokal"))


class InlineExecutor(ex.LocalExecutor):
    """A registered executor of a test's own: everything in this process."""
    made = []

    @classmethod
    def create(cls, np, address=None, log=lambda m: None):
        cls.made.append(np)
        return cls(1, log)


def test_a_registered_executor_runs_the_stage_loop(tmp_path, monkeypatch):
    monkeypatch.setitem(ex.EXECUTORS, "inline", f"{__name__}:InlineExecutor")
    src = tmp_path / "in.jsonl"
    src.write_text('{"text": "one two three four"}\n{"text": "five"}\n')
    cfg = RunConfig(dataset_path=str(src), export_path=str(tmp_path / "out.jsonl"), work_dir=str(tmp_path / "w"),
                    engine="inline", np=3, progress=False)
    from gristmill.recipe import build_ops
    rep = create_engine(cfg).run(build_ops([{"words_num_filter": {"min_num": 3}}]))
    assert InlineExecutor.made == [3] and rep["rows_out"] == 1
    assert (tmp_path / "out.jsonl").read_text().count("\n") == 1
