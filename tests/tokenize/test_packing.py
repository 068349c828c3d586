import numpy as np
import pytest

from gristmill.tokenize.mixing import blend
from gristmill.tokenize.packing import plan_pack, row_segments


def test_padded_rows_are_consecutive_slices():
    p = plan_pack([5, 3, 8, 2], seq_len=4, mode="steel")
    assert p.mode == "padded"
    assert p.row_start.tolist() == [0, 5, 10, 15] and p.row_len.tolist() == [5, 5, 5, 3]
    s = p.stats()
    assert s["pad_tokens"] == 2 and s["truncated_tokens"] == 0
    # doc 2 spans [8, 16): rows 1..3; doc 1 spans [5, 8): row 1 only
    assert s["docs_split_across_rows"] == 1


def test_concat_is_megatron_sampling():
    p = plan_pack([5, 3, 8, 2], seq_len=4, mode="megatron")
    # samples of 5 tokens with stride 4 over 18 tokens: starts 0, 4, 8, 12 (12+5=17 <= 18)
    assert p.row_start.tolist() == [0, 4, 8, 12] and set(p.row_len.tolist()) == {5}
    s = p.stats()
    assert s["pad_tokens"] == 0 and s["truncated_tokens"] == 18 - 17
    assert s["docs_split_across_rows"] == 2  # doc0 [0,5) crosses 4; doc2 [8,16) crosses 12


def test_bfd_exact_small_case():
    p = plan_pack([5, 3, 8, 2], seq_len=4, mode="bfd")
    pieces = list(zip(p.piece_doc.tolist(), p.piece_off.tolist(), p.piece_len.tolist()))
    assert pieces == [(0, 0, 5), (2, 0, 5), (1, 0, 3), (2, 5, 3), (3, 0, 2)]
    assert p.row_len.tolist() == [5, 5, 3, 5] and p.row_start.tolist() == [0, 5, 10, 13]
    s = p.stats()
    assert s["pad_tokens"] == 2 and s["docs_split_across_rows"] == 1


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bfd_invariants_random(seed):
    rng = np.random.default_rng(seed)
    lens = np.concatenate([rng.integers(1, 300, 400), rng.integers(300, 2000, 20)])
    W = 257
    p = plan_pack(lens, seq_len=W - 1, mode="bfd")
    # every token exactly once: per document, pieces tile [0, len)
    for d in range(len(lens)):
        m = p.piece_doc == d
        offs, ls = p.piece_off[m], p.piece_len[m]
        o = np.argsort(offs)
        assert offs[o][0] == 0 and (np.cumsum(ls[o])[:-1] == offs[o][1:]).all() and ls.sum() == lens[d]
        if lens[d] <= W:
            assert m.sum() == 1  # short documents are never split
    assert (p.row_len <= W).all() and p.row_len.sum() == lens.sum()
    # rows tile the piece stream
    assert (p.row_start == np.concatenate([[0], np.cumsum(p.row_len)[:-1]])).all()
    assert p.stats()["utilisation"] > 0.97
    again = plan_pack(lens, seq_len=W - 1, mode="bfd")
    assert (again.piece_doc == p.piece_doc).all() and (again.row_len == p.row_len).all()


def test_row_segments_marks_continuations():
    p = plan_pack([5, 3, 8, 2], seq_len=4, mode="padded")
    ps = p.piece_start
    segs = [row_segments(ps, p.piece_len, p.piece_off, int(s), int(n)) for s, n in zip(p.row_start, p.row_len)]
    assert [s[0].tolist() for s in segs] == [[5], [3, 2], [5], [1, 2]]
    assert [s[1].tolist() for s in segs] == [[True], [True, True], [False], [False, True]]


def test_blend_prefixes_follow_weights():
    lens = [np.full(300, 10), np.full(300, 10)]
    b = blend(lens, [0.7, 0.3], total_tokens=2000, seed=1)
    toks = np.where(b.src == 0, 10, 10)
    share0 = np.cumsum((b.src == 0) * toks) / np.cumsum(toks)
    n = np.arange(1, len(b.src) + 1)
    # every prefix within one document of the target
    assert (np.abs(share0 * n - 0.7 * n) <= 1.0 + 1e-9).all()
    assert b.report[0]["achieved_share"] == pytest.approx(0.7, abs=0.01)
    assert sum(r["tokens_used"] for r in b.report) == 2000


def test_blend_upsamples_with_reshuffled_epochs():
    lens = [np.arange(1, 11) * 3, np.full(100, 5)]  # source 0 has 165 tokens
    b = blend(lens, [0.5, 0.5], total_tokens=1000, seed=7)
    docs0 = b.doc[b.src == 0]
    assert b.report[0]["epochs"] > 2.5
    e0, e1 = docs0[:10], docs0[10:20]
    assert sorted(e0.tolist()) == list(range(10)) and sorted(e1.tolist()) == list(range(10))
    assert e0.tolist() == list(range(10)) and e1.tolist() != e0.tolist()  # epoch 0 in order, then reshuffled
    b2 = blend(lens, [0.5, 0.5], total_tokens=1000, seed=7)
    assert (b2.src == b.src).all() and (b2.doc == b.doc).all()


def test_blend_without_weights_keeps_order():
    lens = [np.array([3, 4]), np.array([5])]
    b = blend(lens, None)
    assert b.src.tolist() == [0, 0, 1] and b.doc.tolist() == [0, 1, 0]
    with pytest.raises(ValueError):
        blend([np.array([1]), np.zeros(0, np.int64)], [0.5, 0.5])
