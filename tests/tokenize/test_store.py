"""The token store's kernel copy into an output file, with its flush behind the copy."""
import os

import numpy as np

from gristmill.tokenize import store
from gristmill.tokenize.store import FlushBehind, TokenStore


def _shards(d, sizes, seed=0):
    rng = np.random.default_rng(seed)
    names = []
    for i, n in enumerate(sizes):
        lens = rng.integers(1, 9, n)
        (rng.integers(0, 1 << 31, int(lens.sum()), dtype=np.uint32)).astype("<u4").tofile(d / f"s{i}.ids")
        np.save(d / f"s{i}.lens.npy", lens.astype(np.int64))
        names.append(f"s{i}")
    return names


def test_copy_to_with_flushes_equals_gather(tmp_path, monkeypatch):
    """Flushing every few bytes (a flush thread kicked many times) leaves the copied bytes as the
    buffered gather writes them."""
    names = _shards(tmp_path, [30, 1, 17, 40])
    st = TokenStore(str(tmp_path), [names])
    total = int(st.shard_start[0][-1])
    src = np.zeros(3, np.int64)
    vstart, length = np.array([0, 5, total - 60]), np.array([total // 2, 40, 60])
    want = np.empty(int(length.sum()), np.uint32)
    st.gather(src, vstart, length, want)
    monkeypatch.setattr(store, "FLUSH_EVERY", 8)
    out = tmp_path / "out.bin"
    with open(out, "wb") as f:
        f.write(b"HEAD")
        f.flush()
        assert st.copy_to(src, vstart, length, f.fileno(), 4) == 4 * len(want)
    st.close()
    raw = out.read_bytes()
    assert raw[:4] == b"HEAD" and np.array_equal(np.frombuffer(raw[4:], "<u4"), want)


def test_flush_behind_stops_quietly_on_a_bad_descriptor(tmp_path):
    fd = os.open(tmp_path / "x", os.O_WRONLY | os.O_CREAT)
    os.close(fd)
    fb = FlushBehind(fd)  # closed: fdatasync fails, the thread ends, close() returns
    fb.kick()
    fb.kick()
    fb.close()
    FlushBehind(fd).close()  # never kicked: no thread
