"""`gristmill analyze` on a recipe with `sources:`: each source analysed with its own filters and the shared
ones, over its own rows (its reader options and text key), and the mix — the shared filters over every
source's rows — when the sources read alike (one reader setup, one text key), as Data-Juicer's analyzer
would over the concatenated dataset. Each analysis is `analysis.analyze.analyze` in its own work dir:
``WORK/sources/NAME/analysis`` and ``WORK/analysis`` for the mix. Like every analysis, nothing is removed."""
from __future__ import annotations

import copy
import os
from dataclasses import replace

from ..ops.base import Filter
from .analyze import analyze


def mixable(runs) -> bool:
    """The sources read alike, so the mix is one dataset: same reader options, format and text key."""
    first = runs[0].cfg
    return all(r.cfg.reader_params == first.reader_params and r.cfg.input_format == first.input_format
               and r.cfg.text_key == first.text_key for r in runs)


def analyze_sources(cfg, runs, shared: list, *, what_if=(), k: float = 3.0, percentiles=(), log=None) -> dict:
    """``{"sources": {name: analysis}, "mix": analysis | None, "mix_skipped": why | None}``; ``runs`` are the
    recipe's ``SourceRun``s, ``shared`` its shared chain. What-if changes apply to the mix (the shared
    filters), or to each source when there is no mix."""
    shared_filters = [o for o in shared if isinstance(o, Filter)]
    out: dict = {"sources": {}, "mix": None, "mix_skipped": None}
    mix = bool(shared_filters) and mixable(runs)
    for r in runs:
        filters = [o for o in r.ops if isinstance(o, Filter)] + [copy.deepcopy(f) for f in shared_filters]
        if not filters:
            continue
        scfg = replace(r.cfg, work_dir=os.path.join(cfg.work_dir, "sources", r.name))
        out["sources"][r.name] = analyze(scfg, filters, what_if=() if mix else what_if, k=k,
                                         percentiles=percentiles, log=log)
    if not shared_filters:
        out["mix_skipped"] = "no shared filters"
    elif not mix:
        out["mix_skipped"] = "the sources read with different options or text keys"
    else:
        paths = []
        for r in runs:
            paths += r.path if isinstance(r.path, list) else [r.path]
        mcfg = replace(runs[0].cfg, dataset_path=paths, work_dir=cfg.work_dir, id_prefix=None,
                       project_name=cfg.project_name)
        out["mix"] = analyze(mcfg, [copy.deepcopy(f) for f in shared_filters], what_if=what_if, k=k,
                             percentiles=percentiles, log=log)
    if not out["sources"] and out["mix"] is None:
        raise ValueError("nothing to analyze: no filter ops in the sources or the shared process")
    return out
