"""pyarrow without its pandas import (core/lazy_pandas.py, issue 25): a run never imports pandas, and pandas
objects convert as before once something does import it. Each case runs in a fresh interpreter (this one
has pandas imported already, where defer() does nothing)."""
import json
import subprocess
import sys

import yaml

from gm_testutil import REPO


def _python(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_arrow_work_without_pandas_then_pandas_as_before():
    got = _python("""
import json, sys
from gristmill.core import lazy_pandas
lazy_pandas.defer()
import numpy as np, pyarrow as pa
t = pa.table({"text": ["a", None], "n": [1, 2]})
a = pa.array(np.asarray([1.0, float("nan"), None], dtype=object), from_pandas=True)
before = "pandas" in sys.modules
import pandas as pd
s = pa.array(pd.Series([1.0, None]))  # pandas' semantics: NaN is null
df = t.to_pandas()
print(json.dumps({"before": before, "nulls": a.null_count, "series_nulls": s.null_count,
                  "frame": [len(df), list(df.columns)], "back": pa.Table.from_pandas(df).num_rows}))
""")
    assert got == {"before": False, "nulls": 2, "series_nulls": 1, "frame": [2, ["text", "n"]], "back": 2}


def test_pandas_imported_first_is_left_alone():
    got = _python("""
import json
import pandas as pd, pyarrow as pa
from gristmill.core import lazy_pandas
lazy_pandas.defer()
print(json.dumps({"series_nulls": pa.array(pd.Series([1.0, None])).null_count,
                  "have": pa.lib._pandas_api.have_pandas}))
""")
    assert got == {"series_nulls": 1, "have": True}


def test_a_run_never_imports_pandas(tmp_path):
    """A filter and a dedup (whose resolve in the main process builds Arrow arrays from lists) at np 1 and 2:
    the main process imports no pandas (the workers': tests/test_pool_forkserver.py)."""
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"text": f"row {i % 7} of a small sample with several words"}) + "\n"
                            for i in range(60)))
    for np_ in (1, 2):
        recipe = tmp_path / f"r{np_}.yaml"
        recipe.write_text(yaml.safe_dump({
            "dataset_path": str(data), "export_path": str(tmp_path / f"o{np_}" / "o.jsonl"),
            "work_dir": str(tmp_path / f"w{np_}"), "np": np_,
            "process": [{"words_num_filter": {"min_num": 3}}, {"document_deduplicator": {}}]}))
        got = _python(f"""
import json, sys
from gristmill.cli import main
rc = main(["run", {str(recipe)!r}, "--no-progress"])
print(json.dumps({{"rc": rc, "main": "pandas" in sys.modules}}))
""")
        assert got == {"rc": 0, "main": False}, np_
        rows = (tmp_path / f"o{np_}" / "o.jsonl").read_text().splitlines()
        assert len(rows) == 7


def test_after_import_runs_each_callback_once_after_the_module_loads():
    """core/import_hooks.py, which the deferral and numba's cache locator use: every callback registered for
    a module runs once, after the module is executed; a module already imported runs it at once."""
    got = _python("""
import json, sys
from gristmill.core.import_hooks import after_import
calls = []
after_import("colorsys", lambda: calls.append(("a", hasattr(sys.modules["colorsys"], "rgb_to_hsv"))))
after_import("colorsys", lambda: calls.append(("b", True)))
before = list(calls)
import colorsys
import colorsys
after_import("colorsys", lambda: calls.append(("c", True)))
print(json.dumps({"before": before, "calls": calls}))
""")
    assert got == {"before": [], "calls": [["a", True], ["b", True], ["c", True]]}
