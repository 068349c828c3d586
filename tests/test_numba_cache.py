"""A module's cached numba kernels are dropped when it or a module it imports changes, and only then; a
process that compiles says so."""
import io
import os

from gristmill.ops._numba_cache import STAMP, announce_compiles, module_digests, refresh


def test_cache_follows_the_modules_a_kernel_module_imports(tmp_path, monkeypatch):
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    (tmp_path / "a.py").write_text("from .b import y\nx = 1\n")
    (tmp_path / "b.py").write_text("from . import (\n    c,\n)\ny = 2\n")
    (tmp_path / "c.py").write_text("z = 3\n")
    (tmp_path / "d.py").write_text("w = 4\n")
    (tmp_path / "e.py").write_text("from .d import w\n")
    cache = tmp_path / "__pycache__"
    assert refresh(str(tmp_path)) is False and (cache / STAMP).exists()  # first sight: nothing to drop
    kernels = {"a": ["a.kernel-2.py311.nbi", "a.kernel-2.py311.1.nbc"], "e": ["e.k-1.py311.nbi"]}
    for names in kernels.values():
        for n in names:
            (cache / n).write_bytes(b"k")
    assert refresh(str(tmp_path)) is False and len(os.listdir(cache)) == 4  # unchanged sources: kept
    (tmp_path / "d.py").write_text("w = 5\n")  # e imports d: e's kernels go, a's stay
    assert refresh(str(tmp_path)) is True
    assert sorted(os.listdir(cache)) == sorted([STAMP, *kernels["a"]])
    (tmp_path / "c.py").write_text("z = 4\n")  # a imports b imports c: a's kernels go
    assert refresh(str(tmp_path)) is True and os.listdir(cache) == [STAMP]
    for n in kernels["a"]:
        (cache / n).write_bytes(b"k")
    (tmp_path / "f.py").write_text("v = 1\n")  # a new module nothing imports: nothing dropped
    assert refresh(str(tmp_path)) is False and len(os.listdir(cache)) == 3
    digests = module_digests(str(tmp_path))
    assert digests["a"] != module_digests(str(tmp_path), {"a"}).get("b") and set(digests) == set("abcdef")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "elsewhere"))
    (tmp_path / "a.py").write_text("x = 5\n")
    assert refresh(str(tmp_path)) is False  # a user-chosen cache dir is theirs


def test_a_compiling_process_says_so_once_then_per_kernel():
    import numba

    from gristmill.ops import _numba_cache as nc
    out = io.StringIO()
    from numba.core import event
    was, nc._announcing = nc._announcing, False
    listener = announce_compiles(out)
    assert listener is not None and announce_compiles(out) is None  # once per process

    @numba.njit
    def inner(x):
        return x + 1

    @numba.njit
    def outer(x):
        return inner(x) * 2

    assert outer(3) == 8 and outer(4) == 10  # compiled once
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and "compiling kernels (first run" in lines[0]
    assert "compiled test_numba_cache.outer in" in lines[1]  # the nested compile counts in its caller
    event.unregister("numba:compile", listener)
    nc._announcing = was


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
    monkeypatch.setattr(cc, "_kernel_ready", lambda kernel, n: False)  # as on a fresh install: nothing cached yet
    arr = pa.array(["one two", "three"])  # 12 bytes, 12 code points: the first call interprets
    cps, cpo = cc.decode(arr)
    assert cpo.tolist() == [0, 7, 12] and W.dj_words(cps, cpo)[2].tolist() == [0, 2, 3]  # the second compiles
    assert cc._interpreted == 21


def test_a_kernel_ready_to_run_is_used_from_the_first_byte(monkeypatch):
    """A kernel compiled in this process (or cached, after `gristmill warm-up`) needs no twin: a forked worker
    would otherwise pay the twins' slower first megabytes on every first shard."""
    monkeypatch.setattr(cc, "_interpreted", 0)
    arr = pa.array(["one two", "three"])
    offs, data = cc.buffers(arr)
    cc._decode(offs, data)  # compiled or loaded here
    assert cc._kernel_ready(cc._decode, 1)
    assert not cc.interpret(12, cc._decode) and cc._interpreted == 0  # budget left, not spent
    assert not cc.interpret(cc.LOAD_AT, W._dj_words)  # cached: loaded for a big call
    assert cc.interpret(12)  # no kernel named: the budget rule


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


_RACER = r"""
import glob, os, sys, time
sys.path.insert(0, sys.argv[1])
from gristmill.ops import _numba_cache as nc
import numba.core.event as event
import kern
compiled = []
class L(event.Listener):
    def on_start(self, e): compiled.extend([1] if e.data["dispatcher"].py_func.__name__ == "total" else [])
    def on_end(self, e): pass
event.register("numba:compile", L())
assert nc.lock_compiles()
open(os.path.join(sys.argv[1], f"ready-{os.getpid()}"), "w").close()
while len(glob.glob(os.path.join(sys.argv[1], "ready-*"))) < 2:  # both start compiling together
    time.sleep(0.005)
print(kern.total(50), len(compiled))
"""


def test_workers_missing_the_same_kernel_compile_it_once(tmp_path):
    """Two processes that miss the same cached kernel at the same moment: one compiles, the other waits
    for it and loads the kernel from the cache."""
    (tmp_path / "kern.py").write_text(
        "import numba, numpy as np\n"
        "@numba.njit(cache=True)\n"
        "def total(n):\n"
        "    a = np.arange(n)\n"
        "    s = 0\n"
        "    for i in range(n):\n"
        "        s += a[i] * (i % 7) + len(str(i))\n"
        "    return s\n")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    procs = [subprocess.Popen([sys.executable, "-c", _RACER, str(tmp_path)], env=env, cwd=REPO,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    results = [o[0].split() for o in outs]
    assert len({r[0] for r in results}) == 1
    assert sorted(int(r[1]) for r in results) == [0, 1]  # one compile between them
    assert list((tmp_path / "numba").rglob("*.lock"))


# -- the digest-keyed cache locator and `gristmill warm-up` (issue 25, cold start) -----------------------

import shutil  # noqa: E402

_LOCATED = r"""
import os, sys
sys.path.insert(0, sys.argv[1])
from gristmill.ops import _numba_cache as nc
from gristmill.core.import_hooks import after_import
after_import("numba.core.caching", lambda: nc.install_locator([os.path.join(sys.argv[1], "pkgx")]))
import numba.core.event as event
compiled = []
class L(event.Listener):
    def on_start(self, e): compiled.append(e.data["dispatcher"].py_func.__name__)
    def on_end(self, e): pass
event.register("numba:compile", L())
from pkgx import a
print(a.f(3), compiled.count("f"), type(a.f._cache._impl.locator).__name__, a.f._cache._cache_path)
"""


def _pkg(root):
    (root / "pkgx").mkdir(parents=True)
    (root / "pkgx" / "__init__.py").write_text("")
    (root / "pkgx" / "a.py").write_text("import numba\nfrom .b import g\n\n@numba.njit(cache=True)\n"
                                        "def f(x):\n    return g(x) * 10\n")
    (root / "pkgx" / "b.py").write_text("import numba\n\n@numba.njit(cache=True)\ndef g(x):\n    return x + 1\n")


def _located(root):
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    proc = subprocess.run([sys.executable, "-c", _LOCATED, str(root)], env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    value, compiles, locator, path = proc.stdout.split()
    return int(value), int(compiles), locator, path


def test_kernels_are_cached_by_content_digest_not_by_path_or_mtime(tmp_path):
    """A copy of identical sources elsewhere, cache included (a reinstall, a wheel shipping its cache), loads
    the kernels cached before; a change to a module a kernel calls into compiles it again (numba alone keys a
    kernel by its own file and would run the old callee)."""
    one, two = tmp_path / "one", tmp_path / "two"
    _pkg(one)
    assert _located(one) == (40, 1, "DigestLocator", str(one / "pkgx" / "__pycache__"))
    shutil.copytree(one, two, copy_function=shutil.copyfile)  # new path, new mtimes, same bytes
    assert _located(two)[:2] == (40, 0)
    (two / "pkgx" / "b.py").write_text("import numba\n\n@numba.njit(cache=True)\ndef g(x):\n    return x + 2\n")
    assert _located(two)[:2] == (50, 1)  # a.py unchanged, b.py changed: a's kernel recompiled


def test_under_numba_cache_dir_the_install_path_is_not_in_the_cache_path(tmp_path, monkeypatch):
    from numba.core import config

    from gristmill.ops import _numba_cache as nc
    assert nc.install_locator()
    from gristmill.ops.text import fineweb
    cls = type(fineweb._fineweb_kernel._cache._impl.locator)
    assert cls.__name__ == "DigestLocator"
    monkeypatch.setattr(config, "CACHE_DIR", str(tmp_path / "numba"))
    loc = cls.from_function(nc.digest_of, fineweb.__file__)
    assert loc.get_cache_path() == str(tmp_path / "numba" / "gristmill" / "ops" / "text")
    assert loc.get_source_stamp() == ("gristmill-digest", nc.module_digests(os.path.dirname(fineweb.__file__))["fineweb"])
    assert cls.from_function(nc.digest_of, shutil.__file__) is None  # not gristmill's: numba's locators


def test_warm_up_selects_the_kernel_ops_and_a_recipes_own(tmp_path):
    from gristmill.pipeline import warmup
    ops = warmup.kernel_ops()
    assert ops[0] == "c4_quality_filter" and {"fix_unicode_mapper", "gopher_repetition_filter",
                                              "document_minhash_deduplicator", "words_num_filter"} <= set(ops)
    assert not {"text_length_filter", "language_id_score_filter", "lowercase_mapper"} & set(ops)
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump({"process": [{"text_length_filter": {}}, "fix_unicode_mapper",
                                                  {"c4_quality_filter": {"filter_no_terminal_punct": False}}]}))
    assert warmup.recipe_jobs(str(recipe)) == [("fix_unicode_mapper", {}),
                                               ("c4_quality_filter", {"filter_no_terminal_punct": False})]
    recipe.write_text(yaml.safe_dump({"process": [{"text_length_filter": {}}]}))
    proc = subprocess.run([sys.executable, "-m", "gristmill.cli", "warm-up", str(recipe)], cwd=REPO,
                          capture_output=True, text=True)
    assert proc.returncode == 0 and "nothing to compile" in proc.stderr


_TINY = ("import numba, numpy as np\n@numba.njit(cache=True)\ndef tiny(n):\n    a = np.arange(n)\n    s = 0\n"
         "    for i in range(n):\n        s += a[i] * (i % 5)\n    return s\n")


def _tiny_job_a():
    import tinykern
    assert tinykern.tiny(10) == 110


def _tiny_job_b():
    import tinykern
    assert tinykern.tiny(20) == 420


def _failing_job():
    raise ValueError("needs a model file\nsecond line")


def test_warm_up_compiles_in_parallel_once_then_loads(tmp_path, monkeypatch):
    """Two worker processes that need the same kernel: one compiles it, the other loads it; a second
    warm-up compiles nothing; each job gets a progress line, a failing one says why and the rest go on."""
    from gristmill.pipeline import warmup
    (tmp_path / "tinykern.py").write_text(_TINY)
    monkeypatch.syspath_prepend(str(tmp_path))
    out = io.StringIO()
    res = warmup.warm_up([_tiny_job_a, _tiny_job_b, _failing_job], processes=2, out=out)
    lines = out.getvalue().splitlines()
    assert "compiling the numba kernels of 3 ops in 2 processes" in lines[0] and len(lines) == 5
    assert res["compiled"] == 1 and res["pids"] == 2  # one compile between the two processes
    assert any("_tiny_job_" in x and "1 kernels compiled, " in x for x in lines)
    assert any("_failing_job: skipped (ValueError: needs a model file)" in x for x in lines)
    assert "1 kernels compiled in" in lines[-1] and "1 ops skipped" in lines[-1] and len(res["errors"]) == 1
    out = io.StringIO()
    res = warmup.warm_up([_tiny_job_a, _tiny_job_b], processes=2, out=out)
    assert res["compiled"] == 0 and out.getvalue().count("nothing to compile (cached)") == 2


def test_warm_up_caches_bytecode_where_imports_may_not_write_it(tmp_path, monkeypatch):
    """`gristmill warm-up` writes the package's bytecode even under PYTHONDONTWRITEBYTECODE (an editable
    install in a container would otherwise compile every module from source in every process), and leaves
    bytecode that is up to date alone."""
    import importlib.util
    from gristmill.pipeline import warmup
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text("X = 1\n")
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert warmup.compile_bytecode(str(pkg), processes=1) == 2
    pyc = importlib.util.cache_from_source(str(pkg / "mod.py"))
    stamp = os.stat(pyc).st_mtime_ns
    assert warmup.compile_bytecode(str(pkg), processes=1) == 2 and os.stat(pyc).st_mtime_ns == stamp
    (pkg / "mod.py").write_text("X = 2  # changed\n")
    os.utime(pkg / "mod.py", ns=(stamp + 10**9, stamp + 10**9))
    assert warmup.compile_bytecode(str(pkg), processes=1) == 2 and os.stat(pyc).st_mtime_ns != stamp


def test_every_kernel_op_loads_from_the_cache_on_a_second_warm_up():
    """No op compiles something in every process that runs it: after a warm-up (CI runs `gristmill warm-up`
    before the tests), another compiles nothing. (Filling a numba typed Dict from Python compiled numba's
    dict helpers in every process, uncached: the stop-word and flagged-word filters paid ~0.35 s each.)
    `gristmill warm-up` as a user runs it, in processes of its own."""
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-m", "gristmill.cli", "warm-up", "-j", "2"], cwd=REPO,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
    compiled = [line for line in proc.stderr.splitlines() if "kernels compiled," in line]
    assert compiled == [] and "warm-up: 0 kernels compiled" in proc.stderr, proc.stderr[-3000:]
