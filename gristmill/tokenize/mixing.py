"""Mixing weighted sources into one document order.

Weights are target shares of output *tokens*. The blend follows Megatron's greedy rule (its
``build_blending_indices``), applied per document and measured in tokens: the next document comes from
the source furthest below its share so far (``w_i * max(T, 1) - t_i`` largest, ties to the lower index),
so every prefix of the output follows the weights to within one document. A source asked for more
tokens than it has is repeated in epochs, each reshuffled with its own seed; one asked for fewer is cut
after a (shuffled) prefix. The total is ``total_tokens`` or, by default, the sum of all sources.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Blend:
    src: np.ndarray  # int32: source of each output document
    doc: np.ndarray  # int64: document index within its source
    report: list[dict]


def _epoch_order(n: int, seed: int, source: int, epoch: int, shuffle: bool) -> np.ndarray:
    if not shuffle and epoch == 0:
        return np.arange(n, dtype=np.int64)
    return np.random.default_rng([seed, source, epoch]).permutation(n).astype(np.int64)


def blend(lens: list[np.ndarray], weights: list[float] | None = None, total_tokens: int | None = None,
          seed: int = 0, shuffle: bool = False) -> Blend:
    """Order documents from several sources. ``lens[i]`` holds the token count of each document of source
    ``i`` in input order. Without weights (or with one source and no total) every document is used once,
    in input order (or shuffled by ``seed`` when ``shuffle``)."""
    k = len(lens)
    avail = np.array([int(x.sum()) for x in lens], dtype=np.int64)
    if weights is None or (k == 1 and total_tokens is None):
        orders = [_epoch_order(len(x), seed, i, 0, shuffle) for i, x in enumerate(lens)]
        src = np.concatenate([np.full(len(o), i, np.int32) for i, o in enumerate(orders)]) if k else np.zeros(0, np.int32)
        doc = np.concatenate(orders) if k else np.zeros(0, np.int64)
        if shuffle and k > 1:
            p = np.random.default_rng([seed, 1 << 20]).permutation(len(src))
            src, doc = src[p], doc[p]
        return Blend(src, doc, _report(lens, src, doc, None))
    w = np.asarray(weights, dtype=np.float64)
    if len(w) != k or (w < 0).any() or w.sum() <= 0:
        raise ValueError(f"need one non-negative weight per source with a positive sum, got {weights}")
    w = w / w.sum()
    for i in range(k):
        if w[i] > 0 and avail[i] == 0:
            raise ValueError(f"source {i} has weight {w[i]:.3g} but no tokens")
    total = int(total_tokens) if total_tokens is not None else int(avail.sum())
    # per-source cursors over (reshuffled) epochs
    orders = [_epoch_order(len(lens[i]), seed, i, 0, shuffle) for i in range(k)]
    pos = [0] * k
    epoch = [0] * k
    t = np.zeros(k, dtype=np.float64)
    T = 0
    out_src: list[int] = []
    out_doc: list[int] = []
    active = [i for i in range(k) if w[i] > 0]
    lens_l = [x.tolist() for x in lens]
    while T < total:
        base = max(T, 1)
        best, best_err = -1, -np.inf
        for i in active:
            err = w[i] * base - t[i]
            if err > best_err:
                best, best_err = i, err
        i = best
        if pos[i] >= len(orders[i]):
            epoch[i] += 1
            orders[i] = _epoch_order(len(lens[i]), seed, i, epoch[i], True)
            pos[i] = 0
        d = int(orders[i][pos[i]])
        pos[i] += 1
        n = lens_l[i][d]
        out_src.append(i)
        out_doc.append(d)
        t[i] += n
        T += n
    src = np.asarray(out_src, dtype=np.int32)
    doc = np.asarray(out_doc, dtype=np.int64)
    return Blend(src, doc, _report(lens, src, doc, w))


def _report(lens, src, doc, w) -> list[dict]:
    k = len(lens)
    tok = np.zeros(k, np.int64)
    cnt = np.bincount(src, minlength=k) if len(src) else np.zeros(k, np.int64)
    for i in range(k):
        m = src == i
        if m.any():
            tok[i] = int(lens[i][doc[m]].sum())
    total = int(tok.sum())
    out = []
    for i in range(k):
        avail = int(lens[i].sum())
        out.append({"source": i, "docs_available": int(len(lens[i])), "tokens_available": avail,
                    "docs_used": int(cnt[i]), "tokens_used": int(tok[i]),
                    "epochs": round(tok[i] / avail, 4) if avail else 0.0,
                    "target_share": None if w is None else round(float(w[i]), 6),
                    "achieved_share": round(tok[i] / total, 6) if total else 0.0})
    return out
