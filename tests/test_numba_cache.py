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
