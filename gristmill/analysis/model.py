"""The report model: a run's report.json and merged profile turned into the plain dict that
``analysis.html`` draws (and that the service will serve as JSON). Pure data in, data out."""
from __future__ import annotations

import itertools
import json
import math
import os

from ..core import columns as C
from .profile import TEXT_LEN, Profile, StatsOnly, filter_of
from .sketch import CategorySketch, StatSketch, edges_for
from .thresholds import open_bound, suggestions

PERCENTILES = (0.25, 0.5, 0.75)
SAMPLE_ROWS = 20  # removed rows per op shown in the report (the files hold more)
TEXT_CHARS = 2000


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
            stats.append({"name": col, "op": op.name, "position": pos, "summary": summary(both), "hist": hist,
                          "box": box, "thresholds": thresholds,
                          "suggestion": ({"k": k, **{("min" if x["param"] == lo_p else "max"): x["suggested"]
                                                     for x in sug}} if sug else None)})
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


def removed_section(report: dict, text_key: str) -> list:
    out = []
    for row in report.get("ops", []):
        path = row.get("removed_samples")
        if not path or not os.path.exists(path):
            continue
        rows = []
        with open(path, "rb") as f:
            for line in itertools.islice(f, SAMPLE_ROWS):
                rec = json.loads(line)
                r = rec.get("row") or {}
                text = r.get(text_key)
                rows.append({"id": r.get(C.ID), "reason": rec.get("reason"),
                             "text": text[:TEXT_CHARS] if isinstance(text, str) else json.dumps(text)[:TEXT_CHARS],
                             "stats": r.get(C.STATS) or {}})
        out.append({"op": row["op"], "position": row["position"], "total_removed": row.get("removed", 0),
                    "rows": rows})
    return out


def trace_section(ops, prof: Profile) -> list:
    names = {op.position: op.name for op in ops}
    out = []
    for pos in sorted(set(prof.traces) | set(prof.changed)):
        rows = [{"id": t["id"], "before": (t["before"] or "")[:TEXT_CHARS], "after": (t["after"] or "")[:TEXT_CHARS]}
                for t in prof.traces.get(pos, [])]
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
             "removed_samples": removed_section(report, text_key) if kind == "run" else [],
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
