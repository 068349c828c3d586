"""copy_range copies at the given offsets, in the kernel or (where that is refused) by reads and writes."""
import os

import pytest

from gristmill.io.streams import copy_range


@pytest.mark.parametrize("kernel", [True, False])
def test_copy_range_at_offsets(tmp_path, monkeypatch, kernel):
    if not kernel:
        def refuse(*a):
            raise OSError("EXDEV")
        monkeypatch.setattr(os, "copy_file_range", refuse, raising=False)
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.write_bytes(bytes(range(256)) * 1000)
    dst.write_bytes(b"x" * 10)
    with open(src, "rb") as s, open(dst, "r+b") as d:
        copy_range(s.fileno(), 100, d.fileno(), 5, 3000)
        with pytest.raises(OSError, match="ended"):
            copy_range(s.fileno(), 255_990, d.fileno(), 4000, 100)
    assert dst.read_bytes()[5:3005] == (bytes(range(256)) * 1000)[100:3100]
