"""fix_unicode_mapper's tables are built once and loaded from the gristmill cache by later processes
(engine workers): the loaded tables are the built ones, and the fixes made with them equal ftfy's."""
import numpy as np
import pyarrow as pa

from gristmill.ops.text import unicode_fix as U


def _same(a, b):
    cls_a, trig_a, map_a, bad_a, re2_a = a
    cls_b, trig_b, map_b, bad_b, re2_b = b
    assert np.array_equal(cls_a, cls_b) and cls_a.dtype == cls_b.dtype
    assert np.array_equal(trig_a, trig_b)
    for k in ("idx", "starts", "data"):
        assert np.array_equal(getattr(map_a, k), getattr(map_b, k))
    assert (bad_a.pattern, bad_a.flags) == (bad_b.pattern, bad_b.flags)
    assert re2_a == re2_b


def test_tables_loaded_from_disk_equal_the_built_ones(tmp_path, monkeypatch):
    import ftfy
    monkeypatch.setenv("GRISTMILL_CACHE", str(tmp_path))
    U.tables.cache_clear()
    try:
        built = U.tables("NFKC")  # an empty cache: built, then stored
        assert len(list((tmp_path / "fix-unicode").glob("*.npz"))) == 1
        U.tables.cache_clear()
        loaded = U.tables("NFKC")  # a later process: loaded
        _same(built, loaded)
        assert built[0].sum() > 0 and len(built[2].starts) > 10 and built[4]
        texts = ["ﬁne “quoted” text\r\n", "Ã©tÃ© mojibake", "&amp; entity", "Ｆｕｌｌ width", "e\u0301 mark"]
        fixed, _ = U.fix_unicode(pa.array(texts), "NFKC")
        assert fixed.to_pylist() == [ftfy.fix_text(t, normalization="NFKC") for t in texts]
    finally:
        U.tables.cache_clear()
