"""The end of every run: merge the shards' profiles, keep the result (``WORK/profile.pickle.zst``), and
write the run's HTML report (``WORK/report.html``, with its model as ``WORK/report_model.json``)."""
from __future__ import annotations

import json
import os

from .model import build
from .profile import Profile, merge_files, save

PROFILE = "profile.pickle.zst"
MODEL = "report_model.json"
HTML = "report.html"

def finish_run(cfg, work: str, report: dict, ops: list, profile_paths: list) -> Profile:
    """Merge and keep the profile; for a run's own report, build the model and write report.html."""
    prof, missing = merge_files(profile_paths, cfg.keep_traces)
    save(prof, os.path.join(work, PROFILE))
    if cfg.report_kind == "run":
        model = build(report, ops, prof, kind="run", text_key=cfg.text_key, engine=cfg.engine, missing=missing)
        write_model(work, model)
    return prof


def write_model(work: str, model: dict, html_name: str = HTML) -> str:
    """Save the model and render it; returns the HTML path."""
    from ..io.writers import atomic_rename, tmp_path
    from .html import write_report_html
    path = os.path.join(work, MODEL)
    tmp = tmp_path(path)
    with open(tmp, "w") as f:
        json.dump(model, f, indent=1, default=str)
    atomic_rename(tmp, path)
    out = os.path.join(work, html_name)
    write_report_html(model, out)
    return out


def add_tokens(work: str, stats: dict) -> str | None:
    """After tokenizing a run's export: add the token stats to its report and render it again."""
    try:
        with open(os.path.join(work, MODEL)) as f:
            model = json.load(f)
    except (OSError, ValueError):
        return None
    model["tokens"] = stats
    return write_model(work, model)
