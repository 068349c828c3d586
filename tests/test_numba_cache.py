"""The numba kernel cache of a package is dropped when any of its modules changes."""
import os

from gristmill.ops._numba_cache import STAMP, refresh


def test_cache_follows_every_module_of_the_package(tmp_path, monkeypatch):
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "b.py").write_text("y = 2\n")
    cache = tmp_path / "__pycache__"
    assert refresh(str(tmp_path)) is False and (cache / STAMP).exists()  # first sight: nothing to drop
    (cache / "a.kernel-1.py311.nbi").write_bytes(b"i")
    (cache / "a.kernel-1.py311.1.nbc").write_bytes(b"c")
    assert refresh(str(tmp_path)) is False and len(os.listdir(cache)) == 3  # unchanged sources: kept
    (tmp_path / "b.py").write_text("y = 3\n")  # another module of the package changed
    assert refresh(str(tmp_path)) is True
    assert os.listdir(cache) == [STAMP]
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "elsewhere"))
    (tmp_path / "a.py").write_text("x = 5\n")
    assert refresh(str(tmp_path)) is False  # a user-chosen cache dir is theirs


# -- cold start (issue 12, item 18): the README job compiles nothing ------------------------------------

import gzip  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import pyarrow as pa  # noqa: E402
import yaml  # noqa: E402

from gm_testutil import REPO, SAMPLE  # noqa: E402
from gristmill.ops.text import charclass as cc  # noqa: E402
from gristmill.ops.text import _dj_words as W  # noqa: E402

EDGE_TEXTS = ["", "   ", "a", "!!!", "\t\n x \t", "héllo wörld 日本語 😀 ok.", None, "a!b !c! !!", "\ud7ff x", "end "]


def _columns():
    with gzip.open(SAMPLE, "rt", encoding="utf-8") as f:
        real = [json.loads(line)["text"] for line in f]
    for texts in (real, EDGE_TEXTS, real[:3] + EDGE_TEXTS + real[3:6]):
        for typ in (pa.string(), pa.large_string()):
            arr = pa.array(texts, typ)
            yield arr
            yield arr.slice(2, len(arr) - 4)
            yield pa.chunked_array([arr.slice(0, 2), arr.slice(2)])


def test_small_column_paths_equal_the_compiled_kernels():
    """The uncompiled twins of decode and the Data-Juicer word split give the kernels' results exactly."""
    for arr in _columns():
        offs, data = cc.buffers(arr)
        compiled, small = cc._decode(offs, data), cc._decode_small(offs, data)
        assert [a.tolist() for a in compiled] == [a.tolist() for a in small]
        assert compiled[0].dtype == small[0].dtype and compiled[1].dtype == small[1].dtype
        for strip in (True, False):
            ref = W._dj_words(*compiled, cc.table(), strip)
            got = W._dj_words_small(*compiled, cc.table(), strip)
            assert [a.tolist() for a in ref] == [a.tolist() for a in got]
            assert all(a.dtype == b.dtype for a, b in zip(ref, got))


def test_a_process_interprets_its_first_megabytes_then_compiles(monkeypatch):
    monkeypatch.setattr(cc, "INTERPRET_BUDGET", 20)
    monkeypatch.setattr(cc, "_interpreted", 0)
    assert [cc.interpret(n) for n in (8, 8, 8, 1)] == [True, True, False, False]  # spent for good
    monkeypatch.setattr(cc, "_interpreted", 0)
    arr = pa.array(["one two", "three"])  # 12 bytes, 12 code points: the first call interprets
    cps, cpo = cc.decode(arr)
    assert cpo.tolist() == [0, 7, 12] and W.dj_words(cps, cpo)[2].tolist() == [0, 2, 3]  # the second compiles
    assert cc._interpreted == 21


def test_readme_job_compiles_no_kernel(tmp_path):
    """The README's first command on a fresh install: nothing for numba to compile (the cold run then costs
    what the warm one does, plus building the character table once)."""
    with open(REPO / "examples" / "basic.yaml") as f:
        cfg = yaml.safe_load(f)
    cfg.update(dataset_path=str(REPO / cfg["dataset_path"]), export_path=str(tmp_path / "out.jsonl"),
               work_dir=str(tmp_path / "work"))
    recipe = tmp_path / "basic.yaml"
    recipe.write_text(yaml.safe_dump(cfg))
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"), GRISTMILL_CACHE=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(recipe), "--no-progress"],
                          cwd=REPO, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == 116
    compiled = [p.name for p in (tmp_path / "numba").rglob("*") if p.is_file()]
    assert compiled == []
