"""The report model: a run's report.json and merged profile turned into the plain dict that
``analysis.html`` draws (and that the service will serve as JSON). Pure data in, data out."""
from __future__ import annotations

import itertools
import json
import math
import os

import numpy as np

from ..core import columns as C
from .profile import TEXT_LEN, Profile, StatsOnly, filter_of
from .sketch import CategorySketch, StatSketch, edges_for
from .thresholds import open_bound, suggestions

PERCENTILES = (0.25, 0.5, 0.75)
SAMPLE_ROWS = 20  # removed rows per op shown in the report (the files hold more)
TEXT_CHARS = 2000
TEXT_LEN_STATS = ("text_len",)  # stats that measure what TEXT_LEN does (characters of the text)


def _num(x):
    """JSON-safe float (NaN/inf → None)."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def union(*sketches):
    """A new sketch holding every value of the given ones (they are left as they are)."""
    parts = [s for s in sketches if s is not None]
    if not parts:
        return None
    out = type(parts[0]).from_bytes(parts[0].to_bytes())
    for s in parts[1:]:
        out.merge(s)
    return out


def summary(sk: StatSketch) -> dict:
    qs = sk.quantiles(list(PERCENTILES))
    d = {"count": int(sk.count), "nulls": int(sk.nulls), "mean": _num(sk.mean), "std": _num(sk.std),
         "min": _num(sk.min)}
    for q, v in zip(PERCENTILES, qs):
        d[f"p{int(q * 100)}"] = _num(v)
    d["max"] = _num(sk.max)
    return d


def item_unit(op_name: str, stat: str) -> str:
    """What one value of a list stat is counted per, for the chart's axis: images, videos, audio files."""
    s = f"{op_name} {stat}"
    for word, unit in (("image", "images"), ("video", "videos"), ("audio", "audio files")):
        if word in s:
            return unit
    return "items"


def below_first(sk: StatSketch, edges) -> dict | None:
    """The values under the first bin edge (zeros on a log axis, low outliers), which the histogram counts
    in its first bar: ``{"edge", "rows", "zeros"}``, or None when there are none."""
    e0 = float(edges[0])
    n = sk.below(e0) if sk.count else 0
    if not n:
        return None
    zeros = sk.below(float(np.nextafter(0.0, 1.0))) - sk.below(0.0) if e0 > 0 else 0
    return {"edge": e0, "rows": int(n), "zeros": int(zeros)}


def stat_sections(ops, prof: Profile, k: float) -> tuple[list, list, list, dict]:
    """(stats, categories, suggestions, {column name: union sketch}) for every filter's stats, in recipe order."""
    stats, cats, sugg, columns = [], [], [], {}
    for op in ops:
        flt = filter_of(op)
        if flt is None:
            continue
        pos, th = op.position, flt.thresholds()
        for s in flt.stats_keys:
            kept, rem = prof.kept.get((pos, s)), prof.removed.get((pos, s))
            if kept is None and rem is None:
                continue
            col = s if s not in columns else f"{s} ({op.name}@{pos})"
            both = union(kept, rem)
            columns[col] = both
            if isinstance(both, CategorySketch):
                cats.append({"name": col, "op": op.name, "position": pos, "count": int(both.count),
                             "unique": int(both.unique), "top": [[v, int(n)] for v, n in both.top(20)]})
                continue
            edges = edges_for(*[x for x in (kept, rem) if x is not None])
            hist = {"edges": [float(e) for e in edges],
                    "kept": [int(c) for c in kept.histogram(edges)] if kept is not None else [0] * (len(edges) - 1)}
            if rem is not None or not isinstance(op, StatsOnly):
                hist["removed"] = [int(c) for c in rem.histogram(edges)] if rem is not None else [0] * (len(edges) - 1)
            unit = item_unit(op.name, s) if (pos, s) in prof.items else None
            low = below_first(both, edges)
            if low:
                hist["below"] = {**low, **({"unit": unit} if unit else {})}
            lo_p, hi_p = th.get(s, (None, None))
            thresholds = None
            if lo_p or hi_p:
                thresholds = {"min": open_bound(getattr(flt.params, lo_p)) if lo_p else None,
                              "max": open_bound(getattr(flt.params, hi_p)) if hi_p else None,
                              "min_param": lo_p, "max_param": hi_p}
            sug = suggestions(flt, s, both, k) if (lo_p or hi_p) else []
            for x in sug:
                x.update({"op": op.name, "position": pos})
            sugg.extend(sug)
            box = {key: _num(v) for key, v in both.box().items()} if both.count else None
            entry = {"name": col, "op": op.name, "position": pos, "summary": summary(both), "hist": hist,
                     "box": box, "thresholds": thresholds,
                     "suggestion": ({"k": k, **{("min" if x["param"] == lo_p else "max"): x["suggested"]
                                                for x in sug}} if sug else None)}
            if unit:  # a list stat: one value per image / video / audio, counted per item
                entry["unit"] = unit
            stats.append(entry)
    return stats, cats, sugg, columns


def shift_section(ops, prof: Profile, stats: list) -> list:
    """For each op: how it moved each stat (count and mean before and after), text length first."""
    own = {(s["position"], s["name"]): s["summary"] for s in stats}
    out = []
    for op in ops:
        pos = op.position
        before, after = prof.before.get(pos, {}), prof.after.get(pos, {})
        changes = []
        names = list(dict.fromkeys([TEXT_LEN, *before, *after]))
        if TEXT_LEN in after:  # text_length_filter's stat is the same measure: one row for it
            names = [n for n in names if n not in TEXT_LEN_STATS]
        for name in names:
            b, a = before.get(name), after.get(name)
            if a is None:
                continue
            if b is None:
                s = own.get((pos, name))
                if s is None:
                    continue  # a stat the op computed but no filter tracked
                bd = {"count": s["count"], "mean": s["mean"], "min": s["min"], "max": s["max"]}
            else:
                bd = b.to_dict()
            changes.append({"stat": name, "before": bd, "after": a.to_dict()})
        if changes:
            out.append({"op": op.name, "position": pos, "kind": op.kind, "changes": changes})
    return out


THUMB_BUDGET = 600_000  # characters of thumbnail data: URIs in one report, all removed samples together


def _base_dir(report: dict) -> str | None:
    """Where a row's relative media paths are resolved from: the dataset's directory."""
    p = report.get("dataset_path")
    if not isinstance(p, str) or "://" in p:
        return None
    p = os.path.abspath(p)
    return p if os.path.isdir(p) else os.path.dirname(p)


def removed_section(report: dict, text_key: str, ops=()) -> list:
    """Up to SAMPLE_ROWS removed rows per op from its removed-samples file: id, reason, text, stats and,
    for rows with images, videos or audio, small thumbnails (``data:`` URIs; see ``thumbs.py``)."""
    from .thumbs import media_keys, thumbnails
    by_pos = {op.position: filter_of(op) or op for op in ops}
    base, budget = _base_dir(report), THUMB_BUDGET
    out = []
    for row in report.get("ops", []):
        path = row.get("removed_samples")
        if not path or not os.path.exists(path):
            continue
        rows = []
        keys = media_keys(by_pos.get(row.get("position")))
        with open(path, "rb") as f:
            for line in itertools.islice(f, SAMPLE_ROWS):
                rec = json.loads(line)
                r = rec.get("row") or {}
                text = r.get(text_key)
                item = {"id": r.get(C.ID), "reason": rec.get("reason"),
                        "text": text[:TEXT_CHARS] if isinstance(text, str) else json.dumps(text)[:TEXT_CHARS],
                        "stats": r.get(C.STATS) or {}}
                if budget > 0 and any(r.get(k) for k, _ in keys):
                    thumbs = thumbnails(r, keys, base, budget)
                    if thumbs:
                        item["thumbs"] = thumbs
                        budget -= sum(len(t["src"]) for t in thumbs)
                rows.append(item)
        out.append({"op": row["op"], "position": row["position"], "total_removed": row.get("removed", 0),
                    "rows": rows})
    return out


CHANGE_CONTEXT = 200  # unchanged characters kept before the first difference of a trace


def first_difference(a: str, b: str) -> int:
    """The index of the first character where ``a`` and ``b`` differ (the shorter's length if one is the
    other's prefix); compares blocks first, so a long common head costs little."""
    n, i, step = min(len(a), len(b)), 0, 4096
    while i < n and a[i:i + step] == b[i:i + step]:
        i += step
    while i < n and a[i] == b[i]:
        i += 1
    return min(i, n)


def change_window(before: str, after: str, limit: int = TEXT_CHARS, context: int = CHANGE_CONTEXT) -> tuple:
    """(offset, before window, after window): at most ``limit`` characters of each text around the region
    where they differ (from about ``context`` characters before the first difference to ``context`` after
    the last), so that a change far into a long text is what the report shows, not an unchanged head.
    Texts that fit are returned whole (offset 0)."""
    if len(before) <= limit and len(after) <= limit:
        return 0, before, after
    first = first_difference(before, after)
    tail = first_difference(before[first:][::-1], after[first:][::-1])  # common suffix after the head
    off = 0
    if first + context >= limit:
        off = max(0, first - context)
        space = next((j for j in range(off, min(first, off + context // 2)) if before[j].isspace()), None)
        if space is not None:  # start on a word
            off = space + 1
    # the same stretch of the common tail after each change, so the two windows end alike
    region = max(len(before), len(after)) - tail - off
    x = min(tail, max(context, limit - region))
    return off, before[off:min(len(before) - tail + x, off + limit)], after[off:min(len(after) - tail + x, off + limit)]


def trace_section(ops, prof: Profile) -> list:
    names = {op.position: op.name for op in ops}
    out = []
    for pos in sorted(set(prof.traces) | set(prof.changed)):
        rows = []
        for t in prof.traces.get(pos, []):
            b, a = t["before"] or "", t["after"] or ""
            off, bw, aw = change_window(b, a)
            row = {"id": t["id"], "before": bw, "after": aw}
            if off:
                row["offset"] = off
            if len(b) > off + len(bw) or len(a) > off + len(aw):
                row["before_len"], row["after_len"] = len(b), len(a)
            rows.append(row)
        out.append({"op": names.get(pos, str(pos)), "position": pos, "changed": int(prof.changed.get(pos, 0)),
                    "rows": rows})
    return out


def correlation(prof: Profile) -> dict | None:
    if prof.corr is None or len(prof.corr.names) < 2:
        return None
    m = prof.corr.corr()
    return {"names": list(prof.corr.names), "matrix": [[_num(v) for v in row] for row in m]}


def build(report: dict, ops: list, prof: Profile, *, kind: str, text_key: str, k: float = 3.0,
          title: str | None = None, engine: str | None = None, missing: int = 0,
          percentiles=PERCENTILES) -> dict:
    """The model of a run (``kind="run"``) or an analysis (``"analyze"``: adds the overall table and the
    correlations; nothing was removed, so histograms split rows by what each filter would do)."""
    stats, cats, sugg, columns = stat_sections(ops, prof, k)
    summary_ = {"dataset_path": str(report.get("dataset_path")), "export_path": report.get("export_path"),
                "rows_read": report.get("rows_read"), "rows_out": report.get("rows_out"),
                "rejects": report.get("rejects"), "seconds": report.get("seconds"), "np": report.get("np"),
                "shards": report.get("shards"), "engine": engine}
    if missing:
        summary_["profile"] = f"{missing} shard(s) finished by an older version have no profile: charts omit them"
    model = {"title": title or f"{report.get('project_name', 'gristmill')}: {kind} report", "kind": kind,
             "summary": summary_,
             "funnel": [{k_: row.get(k_) for k_ in ("op", "position", "kind", "rows_in", "rows_out", "removed",
                                                     "rejected", "added", "seconds", "reasons")}
                        for row in report.get("ops", [])],
             "stats": stats, "categories": cats, "suggestions": sugg,
             "shifts": shift_section(ops, prof, stats) if kind == "run" else [],
             "removed_samples": removed_section(report, text_key, ops) if kind == "run" else [],
             "traces": trace_section(ops, prof) if kind == "run" else [],
             "rejects": report.get("reject_reasons") or [],
             "correlation": correlation(prof)}
    if kind == "analyze":
        from .overall import overall_table
        labels, table = overall_table(columns, percentiles)
        model["overall"] = {"labels": labels, "columns": {c: {lab: _jsonable(v) for lab, v in t.items()}
                                                          for c, t in table.items()}}
    return model


def _jsonable(v):
    if isinstance(v, float):
        return _num(v)
    if hasattr(v, "item"):
        return _jsonable(v.item())
    return v
