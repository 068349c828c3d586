import numpy as np
import pytest

from tokhelpers import first_input_ids, make_docs, write_jsonl

from gristmill.tokenize.run import run_tokenize

torch = pytest.importorskip("torch")

from gristmill.tokenize.loader import PackedDataset, PackedRows, ResumableLoader, collate_packed  # noqa: E402

SEQ = 32


@pytest.fixture(scope="module")
def outputs(tok_json, tmp_path_factory):
    d = tmp_path_factory.mktemp("ld")
    write_jsonl(str(d / "a.jsonl"), make_docs(60, 11))
    outs = {}
    for fmt in ("npy", "litgpt", "parquet", "megatron", "datatrove"):
        for pack in ("padded", "bfd"):
            o = d / f"{fmt}-{pack}"
            run_tokenize({"tokenizer": tok_json, "sources": str(d / "a.jsonl"), "output": str(o), "seq_len": SEQ,
                          "format": fmt, "pack": pack, "rows_per_chunk": 8}, np=1, work_dir=str(d / "w"),
                         progress=False)
            outs[fmt, pack] = str(o)
    return outs


def test_all_formats_give_the_same_rows(outputs):
    for pack in ("padded", "bfd"):
        ref = PackedRows(outputs["npy", pack])
        for fmt in ("litgpt", "parquet", "megatron", "datatrove"):
            other = PackedRows(outputs[fmt, pack])
            assert len(other) == len(ref)
            for r in range(len(ref)):
                assert (other.tokens(r) == ref.tokens(r)).all(), (fmt, pack, r)


def test_sample_labels_positions_cu_seqlens():
    rows = PackedRows.__new__(PackedRows)
    # hand-made row: pieces [3 (continuation), 4 (new doc), 2 (new doc)], then pad; W = 12
    rows.width, rows.seq_len, rows.pad_id, rows.fmt = 12, 11, 0, "npy"
    rows.piece_len = np.array([5, 4, 2]); rows.piece_off = np.array([0, 0, 0])
    rows.piece_start = np.array([0, 5, 9]); rows.row_start = np.array([2]); rows.row_len = np.array([9])
    rows.m = {}
    rows._data = np.array([[7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 0, 0]])
    s = rows.sample(0, block_mask=True)
    assert s["input_ids"].tolist() == [7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 0]
    # labels: next token, but -100 where the next token starts a document inside the row or is pad
    assert s["labels"].tolist() == [8, 9, -100, 11, 12, 13, -100, 15, -100, -100, -100]
    assert s["position_ids"].tolist() == [0, 1, 2, 0, 1, 2, 3, 0, 1, 0, 1]
    assert s["cu_seqlens"].tolist() == [0, 3, 7, 9, 11]
    m = s["attention_mask"]
    assert m[4, 3] and not m[4, 2] and not m[3, 4] and m.sum() == 6 + 10 + 3 + 3


def test_rank_sharding_is_a_partition(outputs):
    path = outputs["npy", "bfd"]
    n = len(PackedRows(path))
    seen = []
    for rank in range(3):
        ds = PackedDataset(path, seed=5, rank=rank, world_size=3)
        seen += [ds.global_row(ds._first + i * 3) for i in range(len(ds))]
    assert sorted(seen) == list(range(n))
    a = [PackedDataset(path, seed=5).global_row(k) for k in range(n)]
    b = [PackedDataset(path, seed=6).global_row(k) for k in range(n)]
    assert sorted(a) == list(range(n)) and a != b


def test_resume_with_workers(outputs):
    path = outputs["litgpt", "padded"]
    full = [b["input_ids"] for b in ResumableLoader(PackedDataset(path, seed=1, epochs=2), batch_size=4)]
    ds = PackedDataset(path, seed=1, epochs=2)
    dl = ResumableLoader(ds, batch_size=4, num_workers=2)
    got = first_input_ids(dl, 3)
    state = dl.state_dict()
    assert state == {"consumed_samples": 12}
    ds2 = PackedDataset(path, seed=1, epochs=2)
    ds2.load_state_dict(state)
    rest = [b["input_ids"] for b in ResumableLoader(ds2, batch_size=4, num_workers=2)]
    assert len(got) + len(rest) == len(full)
    for x, y in zip(got + rest, full):
        assert torch.equal(x, y)


def test_collate_flattens_cu_seqlens(outputs):
    ds = PackedDataset(outputs["npy", "padded"], shuffle=False)
    b = collate_packed([ds[0], ds[1]])
    assert b["input_ids"].shape == (2, SEQ)
    assert b["cu_seqlens"][0] == 0 and b["cu_seqlens"][-1] == 2 * SEQ
    assert SEQ in b["cu_seqlens"].tolist() and b["max_seqlen"] <= SEQ
