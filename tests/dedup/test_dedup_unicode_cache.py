"""The dedup kernels' Unicode tables are built once, kept on disk, and loaded equal by later processes."""
from gristmill.ops.dedup import _kernels as K


def test_unicode_tables_disk_cache_matches_a_fresh_build(tmp_path, monkeypatch):
    monkeypatch.setenv("GRISTMILL_CACHE", str(tmp_path))
    K.unicode_tables.cache_clear()
    try:
        built = K.unicode_tables()  # builds and stores
        assert list(tmp_path.glob("dedup-unicode/*.npz"))
        K.unicode_tables.cache_clear()
        loaded = K.unicode_tables()  # loads
        fresh = K._build_unicode_tables()
        for a, b in zip(loaded, fresh):
            assert a.dtype == b.dtype and (a == b).all()
        assert [x.dtype for x in built] == [x.dtype for x in fresh]
        flags, base = loaded
        assert flags[ord(" ")] & K.F_WS and flags[ord(",")] & K.F_P and base[ord("é")] == ord("e")
    finally:
        K.unicode_tables.cache_clear()
