"""Packing: documents (token counts, in output order) → rows of ``seq_len + 1`` tokens.

The result is a *plan*, not tokens: the stream of document pieces in write order (which document, from
which offset, how many tokens) and each row's slice of that stream. Writers and the loader share it, so
document boundaries are always recoverable (a piece that starts a document has offset 0).

Modes:
- ``padded`` (Steel-LLM / TinyLlama): documents back to back, a document that does not fit continues in
  the next row; rows are consecutive slices of ``seq_len + 1``; only the last row is padded.
- ``concat`` (Megatron): documents back to back, sample ``i`` is ``stream[i*seq_len : i*seq_len+seq_len+1]``
  (one token of overlap, as Megatron's GPTDataset reads it), no padding, the tail that fills no sample is
  dropped (counted as truncated).
- ``bfd``: best-fit-decreasing bin packing. A document of at most ``seq_len + 1`` tokens is never split;
  a longer one fills whole rows and its remainder is packed like a short document. Rows are padded.
- ``none``: one piece per document, no rows (for per-document outputs).
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

MODES = ("padded", "concat", "bfd", "none")
ALIASES = {"steel": "padded", "tinyllama": "padded", "litgpt": "padded", "megatron": "concat",
           "best_fit": "bfd", "best-fit": "bfd", "bestfit": "bfd", "docs": "none"}


def canonical_mode(mode: str) -> str:
    m = ALIASES.get(mode, mode)
    if m not in MODES:
        from ..core.names import closest
        raise ValueError(f"unknown pack mode {mode!r}{closest(str(mode), [*MODES, *ALIASES])} "
                         f"(one of {', '.join(MODES)}; aliases {', '.join(sorted(ALIASES))})")
    return m


@dataclass
class PackPlan:
    mode: str
    seq_len: int
    piece_doc: np.ndarray  # int64: index into the ordered document list
    piece_off: np.ndarray  # int64: first token of the piece within its document
    piece_len: np.ndarray  # int64
    row_start: np.ndarray  # int64: offset of each row in the piece stream
    row_len: np.ndarray  # int64: real tokens in the row (rest is pad)

    @property
    def width(self) -> int:
        return self.seq_len + 1

    @property
    def piece_start(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(self.piece_len)[:-1]]).astype(np.int64) if len(self.piece_len) \
            else np.zeros(0, np.int64)

    @property
    def stream_tokens(self) -> int:
        return int(self.piece_len.sum())

    def stats(self) -> dict:
        n_rows = len(self.row_start)
        slots = n_rows * self.width
        real = int(self.row_len.sum())
        # tokens that appear in no row (Megatron's tail); overlapping tokens count once
        if self.mode == "concat":
            covered = n_rows * self.seq_len + 1 if n_rows else 0
            truncated = self.stream_tokens - covered if n_rows else self.stream_tokens
        else:
            truncated = self.stream_tokens - real if self.mode != "none" else 0
        split = docs_split(self)
        return {"rows": n_rows, "row_tokens": slots, "real_tokens": real, "pad_tokens": slots - real,
                "pad_fraction": (slots - real) / slots if slots else 0.0,
                "utilisation": real / slots if slots else 0.0,
                "truncated_tokens": int(truncated), "docs_split_across_rows": split}


def docs_split(plan: PackPlan) -> int:
    """Documents whose tokens land in more than one row."""
    if plan.mode == "none" or not len(plan.row_start):
        return 0
    if plan.mode == "bfd":
        return int(np.count_nonzero(np.bincount(plan.piece_doc) > 1))
    # padded/concat: a document is split when its [start, end) crosses a row boundary
    step = plan.seq_len if plan.mode == "concat" else plan.width
    ps = plan.piece_start
    pe = ps + plan.piece_len
    nonempty = plan.piece_len > 0
    first_row = ps // step
    last_row = (pe - 1) // step
    return int(np.count_nonzero(nonempty & (last_row > first_row)))


def plan_pack(doc_lens: np.ndarray, seq_len: int, mode: str) -> PackPlan:
    mode = canonical_mode(mode)
    doc_lens = np.asarray(doc_lens, dtype=np.int64)
    n = len(doc_lens)
    W = seq_len + 1
    docs = np.arange(n, dtype=np.int64)
    zeros = np.zeros(n, np.int64)
    total = int(doc_lens.sum())
    if mode == "none":
        return PackPlan(mode, seq_len, docs, zeros, doc_lens.copy(), np.zeros(0, np.int64), np.zeros(0, np.int64))
    if mode == "padded":
        n_rows = -(-total // W)
        starts = np.arange(n_rows, dtype=np.int64) * W
        lens = np.minimum(W, total - starts)
        return PackPlan(mode, seq_len, docs, zeros, doc_lens.copy(), starts, lens)
    if mode == "concat":
        n_rows = (total - 1) // seq_len if total > 1 else 0
        starts = np.arange(n_rows, dtype=np.int64) * seq_len
        return PackPlan(mode, seq_len, docs, zeros, doc_lens.copy(), starts, np.full(n_rows, W, np.int64))
    return _plan_bfd(doc_lens, seq_len)


def _plan_bfd(doc_lens: np.ndarray, seq_len: int) -> PackPlan:
    """Best-fit decreasing. Whole rows from long documents come first (in document order), then the bins.

    The bin search keeps a sorted list of distinct remaining capacities (at most ``seq_len + 1`` values)
    with a stack of bins per capacity, so each item costs one bisect; the per-item loop is Python because
    each placement depends on the previous one."""
    W = seq_len + 1
    n = len(doc_lens)
    full = doc_lens // W
    rem = doc_lens - full * W
    # whole rows of long documents
    fdoc = np.repeat(np.arange(n, dtype=np.int64), full)
    fidx = np.arange(len(fdoc), dtype=np.int64) - np.repeat(np.cumsum(full) - full, full)
    foff = fidx * W
    # items for the bins: remainders (and whole short documents), largest first, ties by document order
    items = np.flatnonzero(rem > 0)
    order = items[np.lexsort((items, -rem[items]))]
    caps: list[int] = []  # sorted distinct remaining capacities of open bins
    bucket: dict[int, list[int]] = {}
    bins: list[list[int]] = []
    for d in order.tolist():
        s = int(rem[d])
        i = bisect.bisect_left(caps, s)
        if i < len(caps):
            c = caps[i]
            stack = bucket[c]
            b = stack.pop()
            if not stack:
                del caps[i]
                del bucket[c]
            bins[b].append(d)
            nc = c - s
        else:
            b = len(bins)
            bins.append([d])
            nc = W - s
        if nc > 0:
            if nc not in bucket:
                bisect.insort(caps, nc)
                bucket[nc] = []
            bucket[nc].append(b)
    bin_docs = np.fromiter((d for b in bins for d in b), np.int64, len(order))
    bin_sizes = np.fromiter((len(b) for b in bins), np.int64, len(bins))
    piece_doc = np.concatenate([fdoc, bin_docs])
    piece_off = np.concatenate([foff, full[bin_docs] * W])
    piece_len = np.concatenate([np.full(len(fdoc), W, np.int64), rem[bin_docs]])
    # rows: one per full piece, then one per bin
    bin_tok = np.add.reduceat(rem[bin_docs], np.concatenate([[0], np.cumsum(bin_sizes)[:-1]])) if len(bins) \
        else np.zeros(0, np.int64)
    row_len = np.concatenate([np.full(len(fdoc), W, np.int64), bin_tok]).astype(np.int64)
    row_start = np.concatenate([[0], np.cumsum(row_len)[:-1]]).astype(np.int64) if len(row_len) \
        else np.zeros(0, np.int64)
    return PackPlan("bfd", seq_len, piece_doc, piece_off.astype(np.int64), piece_len.astype(np.int64),
                    row_start, row_len)


def row_segments(plan_piece_start: np.ndarray, piece_len: np.ndarray, piece_off: np.ndarray,
                 start: int, length: int) -> tuple[np.ndarray, np.ndarray]:
    """Segments of the stream slice [start, start+length): (lengths, begins_document) in order."""
    end = start + length
    i0 = int(np.searchsorted(plan_piece_start, start, side="right")) - 1
    i1 = int(np.searchsorted(plan_piece_start, end, side="left"))
    i0 = max(i0, 0)
    ps = plan_piece_start[i0:i1]
    pe = ps + piece_len[i0:i1]
    s = np.maximum(ps, start)
    e = np.minimum(pe, end)
    keep = e > s
    begins = (s == ps) & (piece_off[i0:i1] == 0)
    return (e - s)[keep], begins[keep]
