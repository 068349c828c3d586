"""Threshold help from analysed stats, without recomputing them: k-sigma suggestions (Data-Juicer
sandbox's refinement: mean ± k·std of the stat) and what-if tables (how many rows a changed threshold
removes), evaluated by the filters' own ``keep`` on the cached stats of ``analysis/stats.parquet``."""
from __future__ import annotations

import math

import numpy as np

OPEN = 1e18  # a bound at or beyond this (Data-Juicer's sys.maxsize defaults) is no bound


def open_bound(v):
    """A threshold value for display: None when it bounds nothing."""
    if v is None or isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return None if abs(v) >= OPEN else v


def _is_int_param(flt, name: str) -> bool:
    ann = type(flt.params).model_fields[name].annotation
    return ann is int or (getattr(ann, "__args__", None) and int in ann.__args__ and float not in ann.__args__)


def suggestions(flt, stat: str, sk, k: float) -> list[dict]:
    """Suggested values for the params bounding ``stat``: mean − k·std for a minimum, mean + k·std for a
    maximum (rounded for integer params); a suggestion that would bound nothing (beyond the data) is left
    out."""
    lo_p, hi_p = flt.thresholds().get(stat, (None, None))
    if not sk.count or sk.std is None or not math.isfinite(sk.std):
        return []
    mean, std = float(sk.mean), float(sk.std)
    out = []
    for param, value, beyond in ((lo_p, mean - k * std, lambda v: v <= sk.min),
                                 (hi_p, mean + k * std, lambda v: v >= sk.max)):
        if not param or beyond(value):
            continue
        if _is_int_param(flt, param):
            value = int(math.ceil(value)) if param == lo_p else int(math.floor(value))
        else:
            value = float(f"{value:.6g}")
        out.append({"stat": stat, "param": param, "current": open_bound(getattr(flt.params, param)),
                    "suggested": value, "k": k})
    return out


def parse_change(spec: str, filters: list) -> tuple[int, str, object]:
    """``OP.PARAM=VALUE`` (``OP`` an op name, ``OP#N`` its N-th occurrence from 1, or its recipe position)
    → (index in ``filters``, param, value parsed as YAML)."""
    import yaml
    from ..core.names import closest
    lhs, sep, rhs = spec.partition("=")
    name, dot, param = lhs.strip().rpartition(".")
    if not sep or not dot or not name or not param:
        raise ValueError(f"--what-if {spec!r}: expected OP.PARAM=VALUE, e.g. words_num_filter.min_num=100")
    name, _, nth = name.partition("#")
    cands = [i for i, f in enumerate(filters) if f.name == name or str(f.position) == name]
    if not cands:
        raise ValueError(f"--what-if {spec!r}: no filter {name!r} in the analysis"
                         f"{closest(name, [f.name for f in filters])}")
    n = int(nth) if nth.isdigit() else 1
    if not 1 <= n <= len(cands):
        raise ValueError(f"--what-if {spec!r}: {name} occurs {len(cands)} time(s)")
    i = cands[n - 1]
    fields = type(filters[i].params).model_fields
    if param not in fields:
        raise ValueError(f"--what-if {spec!r}: {name} has no param {param!r}{closest(param, list(fields))}")
    return i, param, yaml.safe_load(rhs)


def what_if(filters: list, specs: list[str], batches) -> list[dict]:
    """For each ``OP.PARAM=VALUE``: rows that filter removes on its own before and after the change, and
    rows the whole chain of filters keeps before and after (all changes applied together), over the stats
    batches of an analysis. Filters are evaluated on the cached stats only: nothing is recomputed."""
    from ..registry import create_op
    changes = [parse_change(s, filters) for s in specs]
    changed = list(filters)
    new_params: dict[int, dict] = {}
    for i, param, value in changes:
        new_params.setdefault(i, {})[param] = value
    for i, ps in new_params.items():
        f = filters[i]
        op = create_op(f.name, {**f.params.model_dump(exclude_unset=True), **ps}, f"--what-if {f.name}")
        op.text_key, op.position = f.text_key, f.position
        changed[i] = op
    from .profile import keep_mask
    alone_before = np.zeros(len(filters), np.int64)
    alone_after = np.zeros(len(filters), np.int64)
    kept_before = kept_after = rows = 0
    for b in batches:
        n = b.num_rows
        rows += n
        all_before, all_after = np.ones(n, bool), np.ones(n, bool)
        for i, f in enumerate(filters):
            try:
                m0 = keep_mask(f, b)
                m1 = keep_mask(changed[i], b) if changed[i] is not f else m0
            except (KeyError, TypeError, AttributeError) as e:
                raise ValueError(f"--what-if: {f.name} cannot be re-evaluated from cached stats ({e})") from None
            alone_before[i] += n - int(m0.sum())
            alone_after[i] += n - int(m1.sum())
            all_before &= m0
            all_after &= m1
        kept_before += int(all_before.sum())
        kept_after += int(all_after.sum())
    out = []
    for i, param, value in changes:
        f = filters[i]
        out.append({"param": f"{f.name}.{param}", "position": f.position,
                    "from": open_bound(getattr(f.params, param)) if isinstance(getattr(f.params, param), (int, float))
                    else getattr(f.params, param), "to": value,
                    "removed_before": int(alone_before[i]), "removed_after": int(alone_after[i]),
                    "kept_before": kept_before, "kept_after": kept_after, "rows": rows})
    return out
