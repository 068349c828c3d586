"""Data-Juicer's `overall.csv` from merged sketches, without pandas at run time.

Data-Juicer writes `describe(percentiles=..., include='all')` of every stat column, one column per
stat, rows labelled as pandas labels them.  Tools and people that read that file get the same
layout from `gristmill analyze`: the same row labels in pandas' order, counts written as pandas
writes them (`697.0` for a numeric stat, `697` for a string one), floats as their repr, empty
cells where a row does not apply.  Exact-mode numbers equal pandas' to ~1e-15; digest-mode
percentiles carry `sketch.RANK_ERROR`.
"""
from __future__ import annotations

import csv
import math
import os

import numpy as np

from gristmill.analysis.sketch import CategorySketch, StatSketch

NUMERIC_HEAD, NUMERIC_TAIL = ["count", "mean", "std", "min"], ["max"]
CATEGORY_ROWS = ["count", "unique", "top", "freq"]


def percentile_labels(percentiles) -> list[str]:
    """Row labels as pandas formats them: `25%`, `2.5%`, `99.99%`.

    Whole percents print as integers when all are whole; otherwise each non-whole one gets the
    fewest decimals (at least one) that keep neighbours and the 0/100 ends apart.
    """
    p = 100 * np.asarray(percentiles, dtype=np.float64)
    if not p.size:
        return []
    whole = np.isclose(p.round(_decimals(p)).astype(int), p)
    if whole.all():
        return [f"{int(x)}%" for x in p.round(_decimals(p)).astype(int)]
    decimals = _decimals(np.unique(p))
    return [f"{int(np.round(x))}%" if w else f"{float(np.round(x, decimals))}%"
            for x, w in zip(p, whole)]


def _decimals(p: np.ndarray) -> int:
    """Decimals that tell the closest two of 0, p..., 100 apart (ends only when not in p)."""
    gaps = np.abs(np.ediff1d(p, to_begin=p[0] if p[0] > 0 else None,
                             to_end=100 - p[-1] if p[-1] < 100 else None))
    return max(1, -math.floor(math.log10(gaps.min())))


def overall_table(sketches: dict[str, StatSketch | CategorySketch],
                  percentiles=(0.25, 0.5, 0.75)) -> tuple[list[str], dict[str, dict[str, object]]]:
    """(row labels, {stat: {label: value}}) as pandas' `describe(include='all')`.

    Percentiles are sorted and must be distinct and in [0, 1], as pandas requires (pandas 3
    does not add the median on its own; Data-Juicer always asks for 0.25, 0.5, 0.75).
    A stat with no value has NaN (an empty cell) where pandas has NaN.
    """
    ps = np.unique(np.asarray(percentiles, dtype=np.float64))
    if len(ps) < len(percentiles) or ((ps < 0) | (ps > 1)).any():
        raise ValueError(f"percentiles must be distinct and in [0, 1], got {list(percentiles)}")
    labels = percentile_labels(ps)
    table: dict[str, dict[str, object]] = {}
    for name, sk in sketches.items():
        if isinstance(sk, CategorySketch):
            (top, freq), = sk.top(1) or [(np.nan, np.nan)]
            table[name] = {"count": sk.count, "unique": sk.unique, "top": top, "freq": freq}
        else:
            qs = sk.quantiles(ps).tolist()
            table[name] = {"count": float(sk.count), "mean": sk.mean, "std": sk.std,
                           "min": sk.min, **dict(zip(labels, qs)), "max": sk.max}
    rows: list[str] = []
    for column in sorted(table.values(), key=len):  # pandas: shortest label list first
        rows += [label for label in column if label not in rows]
    return rows, table


def _cell(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return repr(float(value)) if isinstance(value, float) else str(value)


def write_overall_csv(path, labels: list[str], table: dict[str, dict[str, object]]) -> None:
    """Write the table as pandas' `to_csv` would, atomically (temp file, fsync, rename)."""
    path = os.fspath(path)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w", newline="", encoding="utf-8") as f:
            out = csv.writer(f, lineterminator="\n")
            out.writerow(["", *table])
            out.writerows([label, *(_cell(col.get(label)) for col in table.values())]
                          for label in labels)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
