"""io.parquet_footer: the Thrift compact codec of Parquet footers and the composition of Parquet files by
their row groups (what a Parquet export composed in a bucket is made of)."""
from __future__ import annotations

import io

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gristmill.io import parquet_footer as F
from gristmill.io.writers import plan_parquet_files, write_parquet_part

SCHEMA = pa.schema([("id", pa.int64()), ("text", pa.string()), ("score", pa.float64()),
                    ("tags", pa.list_(pa.string())),
                    ("meta", pa.struct([("a", pa.int32()), ("b", pa.bool_()), ("c", pa.list_(pa.int16()))])),
                    ("kind", pa.dictionary(pa.int32(), pa.string())), ("blob", pa.binary())])


def _batch(k: int, n: int) -> pa.RecordBatch:
    return pa.record_batch([
        pa.array(range(k, k + n)), pa.array([f"t{i % 7}" if i % 5 else None for i in range(n)]),
        pa.array([i * 0.5 - 3 for i in range(n)]), pa.array([[str(i)] * (i % 3) for i in range(n)]),
        pa.array([{"a": -i, "b": i % 2 == 0, "c": [i % 100] * (i % 2)} for i in range(n)], SCHEMA.field("meta").type),
        pa.DictionaryArray.from_arrays(pa.array([(i * 7) % 3 for i in range(n)], pa.int32()), ["x", "y", "z"]), pa.array([bytes([i % 256]) * 3 for i in range(n)]),
    ], schema=SCHEMA)


def _write(batches, **kw) -> bytes:
    buf = io.BytesIO()
    w = pq.ParquetWriter(buf, SCHEMA, compression=kw.pop("compression", "zstd"), **kw)
    for b in batches:
        w.write_batch(b, row_group_size=max(b.num_rows, 1))
    w.close()
    return buf.getvalue()


BATCHES = [_batch(0, 100), _batch(100, 2000), _batch(2100, 0), _batch(2100, 37)]


@pytest.mark.parametrize("kw", [{}, {"compression": "snappy", "use_dictionary": False},
                                {"write_statistics": False}, {"version": "1.0", "data_page_version": "2.0"}])
def test_footer_round_trip_is_byte_exact(kw):
    data = _write(BATCHES, **kw)
    start, md = F.read_footer(data)
    assert F.encode(md) == data[start:-8]
    assert F.decode(F.encode(md)) == md


def test_compose_of_three_files_is_the_file_written_whole():
    whole = _write(BATCHES)
    parts = [_write(BATCHES[:1]), _write(BATCHES[1:3]), _write(BATCHES[3:])]
    ranges, footer = F.compose_plan([F.read_footer(p) for p in parts])
    out = b"PAR1" + b"".join(parts[i][a:b] for i, a, b in ranges) + footer
    assert out == whole
    t = pq.read_table(io.BytesIO(out))
    assert t.equals(pa.Table.from_batches(BATCHES).cast(t.schema))
    md = pq.ParquetFile(io.BytesIO(out)).metadata
    assert md.num_rows == 2137 and md.num_row_groups == 4
    st = md.row_group(1).column(0).statistics
    assert (st.min, st.max) == (100, 2099)
    assert pl.read_parquet(io.BytesIO(out))["id"].to_list() == list(range(2137))
    # a selection of row groups: the file written from those batches alone
    ranges, footer = F.compose_plan([F.read_footer(p) for p in parts], [(1, 1, 2), (2, 0, 1)])
    sub = b"PAR1" + b"".join(parts[i][a:b] for i, a, b in ranges) + footer
    assert sub == _write(BATCHES[2:])


def test_compose_refuses_other_schemas_and_page_indexes_and_non_parquet():
    a = _write(BATCHES[:1])
    other = io.BytesIO()
    pq.write_table(pa.table({"x": [1]}), other)
    with pytest.raises(F.FooterError, match="schemas"):
        F.compose_plan([F.read_footer(a), F.read_footer(other.getvalue())])
    indexed = _write(BATCHES[:1], write_page_index=True)
    with pytest.raises(F.FooterError, match="page index"):
        F.compose_plan([F.read_footer(indexed)])
    with pytest.raises(F.FooterError, match="PAR1"):
        F.read_footer(b"not parquet at all")


def test_parts_written_per_shard_compose_into_the_local_export_bytes(tmp_path):
    """write_parquet_part + plan_parquet_files + compose_files give assemble()'s files, one or sharded."""
    from gristmill.io.writers import FragmentWriter, assemble
    frags = []
    for k, bs in enumerate([BATCHES[:2], [], BATCHES[2:]]):
        w = FragmentWriter.open(str(tmp_path / f"f{k}"), "parquet")
        for b in bs:
            w.write(b)
        frags.append(w.close())
    for shard_size in (0, 30_000):
        out = tmp_path / f"o{shard_size}"
        out.mkdir()
        files = assemble(frags, str(out / "x.parquet"), shard_size)
        parts = [p for p in frags if p]
        got = [write_parquet_part(p, SCHEMA, str(tmp_path / f"p{i}.parquet")) for i, p in enumerate(parts)]
        plan = plan_parquet_files(got, shard_size)
        assert len(plan) == len(files) and (len(files) > 1) == bool(shard_size)
        footers = [F.read_footer(str(tmp_path / f"p{i}.parquet")) for i in range(len(parts))]
        for sel, f in zip(plan, files):
            ranges, footer = F.compose_plan(footers, sel)
            data = b"PAR1" + b"".join(open(tmp_path / f"p{i}.parquet", "rb").read()[a:b] for i, a, b in ranges)
            assert data + footer == open(f, "rb").read()
    dest = tmp_path / "all.parquet"
    F.compose_files([str(tmp_path / f"p{i}.parquet") for i in range(2)], str(dest))
    assert dest.read_bytes() == open(tmp_path / "o0" / "x.parquet", "rb").read()


def test_arrow_stream_parts_compose_into_the_hf_data_files(tmp_path):
    """HF export data files: the schema message + byte ranges of per-shard Arrow stream parts + the end
    marker are the files _assemble_hf writes, one or sharded."""
    from gristmill.io.writers import EOS, FragmentWriter, assemble, plan_arrow_files, write_arrow_part
    schema = pa.schema([f for f in SCHEMA if f.name != "kind"])
    batches = [b.select(schema.names) for b in BATCHES]
    frags = []
    for k, bs in enumerate([batches[:2], [], batches[2:]]):
        w = FragmentWriter.open(str(tmp_path / f"f{k}"), "arrow")
        for b in bs:
            w.write(b)
        frags.append(w.close())
    parts = [p for p in frags if p]
    got = [write_arrow_part(p, schema, str(tmp_path / f"p{i}.arrow")) for i, p in enumerate(parts)]
    data = [open(tmp_path / f"p{i}.arrow", "rb").read() for i in range(len(parts))]
    head = len(schema.serialize())
    for shard_size in (0, 30_000):
        files = assemble(frags, str(tmp_path / f"hf{shard_size}"), shard_size)
        plan = plan_arrow_files(got, shard_size, head)
        assert len(plan) == len(files) and (len(files) > 1) == bool(shard_size)
        for sel, f in zip(plan, files):
            body = data[0][:head] + b"".join(data[i][a:b] for i, a, b in sel) + EOS
            assert body == open(f, "rb").read()
