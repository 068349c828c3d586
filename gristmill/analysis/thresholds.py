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
    if not rhs.strip():
        raise ValueError(f"--what-if {spec!r}: no value after '=' (e.g. {name}.{param}=100)")
    try:
        value = yaml.safe_load(rhs)
    except yaml.YAMLError as e:
        raise ValueError(f"--what-if {spec!r}: cannot read the value {rhs.strip()!r} "
                         f"({str(e).splitlines()[0]})") from None
    return i, param, value


def _changed_op(f, params: dict):
    """``f`` rebuilt with ``params`` changed (pydantic checks the values: OpError, a ValueError, names the
    param and the value)."""
    from ..registry import create_op
    op = create_op(f.name, {**f.params.model_dump(exclude_unset=True), **params}, f"--what-if {f.name}")
    return op.bind(f.text_key, f.position)


def check_what_if(filters: list, specs: list[str]) -> list[tuple[int, str, object, object, object]]:
    """Every ``OP.PARAM=VALUE`` parsed and its filter rebuilt, alone and with the other changes to the same
    filter, before anything is computed: a bad spec (no such op or param, a value the param does not take)
    raises ValueError with one line naming it. Returns (filter index, param, value, the filter with this
    change alone, the filter with all its changes) per spec."""
    changes = [parse_change(s, filters) for s in specs]
    together: dict[int, dict] = {}
    for i, param, value in changes:
        together.setdefault(i, {})[param] = value
    out, built = [], {}
    for spec, (i, param, value) in zip(specs, changes):
        try:
            alone = _changed_op(filters[i], {param: value})
            if i not in built:
                built[i] = alone if len(together[i]) == 1 else _changed_op(filters[i], together[i])
        except ValueError as e:
            msg = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise ValueError(f"--what-if {spec!r}: {msg.removeprefix(f'--what-if {filters[i].name}.')}") from None
        out.append((i, param, value, alone, built[i]))
    return out


def what_if(filters: list, specs: list[str], batches) -> list[dict]:
    """For each ``OP.PARAM=VALUE``: rows that filter removes on its own before and after the change (this
    change alone), rows the whole chain of filters keeps before and after all the changes together
    (``kept_after``) and, with several changes, with this change alone (``kept_alone``); then, with several
    changes, one more row (``"combined": true``) for all of them together: rows the chain removes and
    keeps before and after. Evaluated over the stats batches of an analysis, by the filters' own ``keep``
    on the cached stats only: nothing is recomputed."""
    checked = check_what_if(filters, specs)
    from .profile import keep_mask
    several = len(checked) > 1
    together = {i: op for i, _, _, _, op in checked}
    alone_before = np.zeros(len(filters), np.int64)
    alone_after = np.zeros(len(checked), np.int64)
    chain_alone = np.zeros(len(checked), np.int64)
    kept_before = kept_after = rows = 0
    for b in batches:
        n = b.num_rows
        rows += n
        try:
            m0 = [keep_mask(f, b) for f in filters]
            m_all = {i: keep_mask(op, b) for i, op in together.items()}
            m_one = [keep_mask(alone, b) if alone is not together[i] else m_all[i]
                     for i, _, _, alone, _ in checked]
        except (KeyError, TypeError, AttributeError) as e:
            raise ValueError(f"--what-if: a filter cannot be re-evaluated from cached stats ({e})") from None
        all_before = np.logical_and.reduce(m0) if m0 else np.ones(n, bool)
        all_after = np.logical_and.reduce([m_all.get(i, m) for i, m in enumerate(m0)]) if m0 else np.ones(n, bool)
        for i, m in enumerate(m0):
            alone_before[i] += n - int(m.sum())
        for c, (i, *_rest) in enumerate(checked):
            alone_after[c] += n - int(m_one[c].sum())
            if several:
                chain_alone[c] += int(np.logical_and.reduce([m_one[c] if j == i else m
                                                             for j, m in enumerate(m0)]).sum())
        kept_before += int(all_before.sum())
        kept_after += int(all_after.sum())
    out = []
    for c, (i, param, value, _, _) in enumerate(checked):
        f = filters[i]
        cur = getattr(f.params, param)
        row = {"param": f"{f.name}.{param}", "position": f.position,
               "from": open_bound(cur) if isinstance(cur, (int, float)) else cur, "to": value,
               "removed_before": int(alone_before[i]), "removed_after": int(alone_after[c]),
               "kept_before": kept_before, "kept_after": kept_after, "rows": rows}
        if several:
            row["kept_alone"] = int(chain_alone[c])
        out.append(row)
    if several:
        out.append({"param": "all changes together", "combined": True, "position": None,
                    "changes": [f"{filters[i].name}.{p}={_show(v)}" for i, p, v, _, _ in checked],
                    "from": None, "to": None,
                    "removed_before": rows - kept_before, "removed_after": rows - kept_after,
                    "kept_before": kept_before, "kept_after": kept_after, "rows": rows})
    return out


def _show(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return "null" if v is None else str(v)
