"""The ops' kernels are lazy (``ops/_lazy_jit``): planning a dedup or a filter recipe imports no numba (the
main process of an np ≥ 2 run never runs a kernel, issue 25); the first kernel call, a task or the fork
server's preload makes them real (with the text kernels' ``nbutil.unmanaged`` intrinsic), and they compute
what they did."""
import json
import subprocess
import sys

import pytest

pytest.importorskip("numba")


def _child(code: str) -> dict:
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_dedup_modules_import_no_numba_and_kernels_become_real_on_first_call():
    got = _child(r"""
import json, sys
import numpy as np
for m in ("minhash", "minhash_uid", "exact", "lines", "simhash", "ray_aliases"):
    __import__("gristmill.ops.dedup." + m)
out = {"numba_at_import": "numba" in sys.modules}
from gristmill.ops import _lazy_jit
from gristmill.ops.dedup import _hashing, _kernels
out["pending"] = _lazy_jit.pending()
h = np.array([0, 1, 2, 2**63 + 5], dtype=np.uint64)
got = _hashing.fmix64(h)  # a kernel calling another (fmix, inlined) compiles against real dispatchers
ref = h.copy()
with np.errstate(over="ignore"):
    for m in (np.uint64(0xFF51AFD7ED558CCD), np.uint64(0xC4CEB9FE1A85EC53), None):
        ref ^= ref >> np.uint64(33)
        if m is not None:
            ref *= m
out["same"] = got.tolist() == ref.tolist()
out["left"] = [f"{n}.{k}" for n, mod in list(sys.modules.items()) if n.startswith("gristmill")
               for k, v in vars(mod).items() if type(v) is _lazy_jit.LazyKernel]
out["shared"] = _kernels.fmix is _hashing.fmix and type(_hashing.fmix).__name__ == "CPUDispatcher"
print(json.dumps(out))
""")
    assert got == {"numba_at_import": False, "pending": True, "same": True, "left": [], "shared": True}


def test_planning_a_minhash_recipe_imports_no_numba_and_a_task_announces_compiles(tmp_path):
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"text": f"doc {i} some words here"}) + "\n" for i in range(4)))
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"dataset_path: {data}\nexport_path: {tmp_path}/out.jsonl\nwork_dir: {tmp_path}/work\nnp: 2\n"
                      "process:\n  - document_minhash_deduplicator: {}\n")
    got = _child(rf"""
import json, sys
from gristmill.pipeline import plan_recipe
plan = plan_recipe({str(recipe)!r}, np=None, work_dir=None, progress=False)
out = {{"numba_after_plan": "numba" in sys.modules}}
from gristmill.engine.executor import ResolveTask, run_one
from gristmill.ops import _lazy_jit, _numba_cache
run_one(ResolveTask(0, len, [1, 2]))  # a task of this process: its ops' kernels are made real first
out.update(numba_after_task="numba" in sys.modules, pending=_lazy_jit.pending(),
           announcing=_numba_cache._announcing)
print(json.dumps(out))
""")
    assert got == {"numba_after_plan": False, "numba_after_task": True, "pending": False, "announcing": True}


def test_njit_once_numba_is_imported_is_numbas_own():
    import numba

    from gristmill.ops import _lazy_jit

    @_lazy_jit.njit(cache=False)
    def add(a, b):
        return a + b
    assert isinstance(add, numba.core.registry.CPUDispatcher) and add(2, 3) == 5


FILTERS = ["fix_unicode_mapper", "gopher_repetition_filter", "gopher_quality_filter", "c4_quality_filter",
           "fineweb_quality_filter", "words_num_filter", "character_repetition_filter", "word_repetition_filter"]


def test_planning_a_filter_recipe_imports_no_numba_and_lazy_kernels_give_the_same_bytes(tmp_path):
    """The text ops' kernels (and the ``unmanaged`` intrinsic several of them call) stay lazy through
    planning; a run with them lazy exports the same bytes as a run where numba was imported first (every
    ``njit`` numba's own, at import)."""
    import random
    rng = random.Random(0)
    vocab = [a + b for a in ("ri", "ca", "mon", "tel", "dar", "su", "vel", "or")
             for b in ("ver", "ble", "ton", "ka", "lis")]
    stop = ["the", "and", "of", "to", "that", "with", "have", "be"]
    texts = ["\n".join(" ".join(" ".join(rng.choice(vocab if j % 2 else stop) for j in range(rng.randint(8, 14)))
                                 .capitalize() + "." for _ in range(4)) for _ in range(4)) for _ in range(30)]
    texts[3] = "caf\u00c3\u00a9 " + texts[3]  # mojibake for fix_unicode
    texts[7] = "spam spam spam spam.\n" * 40  # repetition: removed
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    recipes = {}
    for name in ("lazy", "eager"):
        recipes[name] = tmp_path / f"{name}.yaml"
        recipes[name].write_text(json.dumps({
            "dataset_path": str(data), "export_path": str(tmp_path / name / "out.jsonl"),
            "work_dir": str(tmp_path / f"w-{name}"), "np": 1, "process": [{op: {}} for op in FILTERS]}))
    got = _child(rf"""
import json, sys
from gristmill.pipeline import plan_recipe
plan = plan_recipe({str(recipes["lazy"])!r}, np=2, work_dir=None, progress=False)
out = {{"numba_after_plan": "numba" in sys.modules}}
from gristmill.cli import main
assert main(["run", {str(recipes["lazy"])!r}, "--no-progress"]) == 0
from gristmill.ops import _lazy_jit
from gristmill.ops.text import gopher
out["left"] = [f"{{n}}.{{k}}" for n, mod in list(sys.modules.items()) if n.startswith("gristmill")
               for k, v in vars(mod).items() if type(v) in (_lazy_jit.LazyKernel, _lazy_jit.LazyObject)]
out["intrinsic"] = type(gopher.unmanaged).__module__.startswith("numba")
print(json.dumps(out))
""")
    assert got == {"numba_after_plan": False, "left": [], "intrinsic": True}
    _child(rf"""
import numba
from gristmill.cli import main
from gristmill.ops.text import gopher
assert type(gopher.unmanaged).__module__.startswith("numba")  # numba first: nothing lazy
assert main(["run", {str(recipes["eager"])!r}, "--no-progress"]) == 0
print("{{}}")
""")
    out = (tmp_path / "lazy" / "out.jsonl").read_bytes()
    assert out == (tmp_path / "eager" / "out.jsonl").read_bytes()
    kept = [json.loads(x)["text"] for x in out.decode().splitlines()]
    assert 0 < len(kept) < len(texts) and texts[7] not in kept and any(t.startswith("caf\u00e9 ") for t in kept)
