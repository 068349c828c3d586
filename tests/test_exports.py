"""Exports other tools read back as written: HF `save_to_disk` directories load with the real `datasets`
package whatever the column types, and compressed exports are byte-identical from run to run."""
import datetime
import json
import os
import subprocess
import sys

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gristmill import Dataset
from gm_testutil import write_jsonl

NESTED_ROWS = [
    {"text": "first document " * 3, "tags": ["a", "b"], "nums": [1.5],
     "meta": {"x": 1, "y": "s", "inner": {"z": [1, 2]}}, "spans": [{"s": 0, "e": 3, "label": "x"}]},
    {"text": "second document", "tags": [], "nums": [2.0, 3.0],
     "meta": {"x": 2, "y": "t", "inner": {"z": []}}, "spans": []},
    {"text": "ünïcödé third " + "long " * 200, "tags": ["c"], "nums": [],
     "meta": {"x": 3, "y": "u", "inner": {"z": [7]}}, "spans": [{"s": 1, "e": 2, "label": "y"}, {"s": 5, "e": 9, "label": "z"}]},
]

ARROW_TABLE = pa.table({  # the 32-bit / fixed-size / non-JSON types a Parquet input can bring
    "text": pa.array(["a b c", "d e f"], pa.string()),
    "l32": pa.array([[1, 2], []], pa.list_(pa.int32())),
    "structs": pa.array([[{"a": 1, "b": "x"}], [{"a": 2, "b": None}]],
                        pa.list_(pa.struct([("a", pa.int64()), ("b", pa.string())]))),
    "nested": pa.array([[[{"a": 1}]], [[], None]], pa.list_(pa.list_(pa.struct([("a", pa.int8())])))),
    "fixed": pa.array([[1.0, 2.0], [3.0, 4.0]], pa.list_(pa.float32(), 2)),
    "big": pa.array([["x"], ["y", "z"]], pa.large_list(pa.large_string())),
    "when": pa.array([datetime.datetime(2024, 1, 1), None], pa.timestamp("us", "UTC")),
    "day": pa.array([datetime.date(2024, 1, 1), None], pa.date32()),
    "half": pa.array([1.5, None], pa.float16()),
})


def _without_id(rows):
    return [{k: v for k, v in r.items() if k != "id"} for r in rows]


def test_hf_export_of_nested_jsonl_loads_with_datasets(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", NESTED_ROWS)
    out = str(tmp_path / "hf")
    Dataset.load(src).export(out + "/", work_dir=str(tmp_path / "w"))
    loaded = datasets.load_from_disk(out)
    assert loaded.num_rows == 3
    assert _without_id(loaded.to_list()) == NESTED_ROWS
    assert isinstance(loaded.features["spans"], (datasets.LargeList, datasets.List))


def test_hf_export_of_arrow_types_loads_with_datasets(tmp_path):
    pq.write_table(ARROW_TABLE, tmp_path / "in.parquet")
    out = str(tmp_path / "hf")
    Dataset.load(str(tmp_path / "in.parquet")).export(out + "/", work_dir=str(tmp_path / "w"))
    loaded = datasets.load_from_disk(out)
    assert _without_id(loaded.to_list()) == ARROW_TABLE.to_pylist()
    f = loaded.features
    assert f["fixed"].length == 2 and f["big"] == datasets.LargeList(datasets.Value("large_string"))
    assert f["half"] == datasets.Value("float16") and f["day"] == datasets.Value("date32")
    with open(os.path.join(out, "dataset_info.json")) as fh:  # the version-portable spelling of a 32-bit list
        assert json.load(fh)["features"]["structs"] == [{"a": {"_type": "Value", "dtype": "int64"},
                                                         "b": {"_type": "Value", "dtype": "string"}}]


@pytest.mark.parametrize("name", ["out.jsonl.gz", "out.jsonl.zst", "out.parquet"])
def test_exports_are_byte_identical_across_runs(tmp_path, name):
    """Two runs in different work dirs, each in its own process (so different pid-named temp files)."""
    rows = [{"text": f"document number {i} " + "word " * (i % 17)} for i in range(300)]
    write_jsonl(tmp_path / "in-0.jsonl", rows[:150])
    write_jsonl(tmp_path / "in-1.jsonl", rows[150:])
    outs = []
    for run in ("a", "b"):
        out = tmp_path / run / name
        code = (f"from gristmill import Dataset\nif __name__ == '__main__':\n"
                f"    Dataset.load({str(tmp_path / 'in-*.jsonl')!r}).export({str(out)!r}, np=2, "
                f"work_dir={str(tmp_path / run / 'work')!r})\n")
        subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path)
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    if name.endswith(".gz"):
        assert outs[0][3] == 0  # gzip FLG: no FNAME (the temp file's name) and no other optional field
