"""Runs datatrove's n-gram decontamination inside datatrove's venv (called by bench/decontamination.py and
used to produce the expected ids of tests/text/test_decontamination_datatrove.py).

usage: PYTHON_OF_DATATROVE bench/_dt_decont_runner.py SPEC.json OUT.json

SPEC: {"items": JSONL path of {"task", "query", "golds": [...]}, "docs": JSONL path of {"id", "text"},
       "config": NGramsDecontConfig kwargs (norm_config as a dict), "language": "en", "index_dir": DIR}
OUT: {"removed": {id: [task, ngram]}, "index_s": cpu s, "filter_s": cpu s, "docs": n, "bytes": n}

datatrove's NGramsDecontIndexer.run() fetches lighteval tasks (lighteval is not installed and nothing may be
downloaded), so its documented per-item method compute_hashes(label, query) builds the hashes and they are
written as run() writes them (one TASK.index.hashes file of unique hashes per task); NGramsDecontFilter then
loads that folder itself.
"""
import json
import sys
import time
from collections import defaultdict

import numpy as np

import datatrove.pipeline.base as base

base.check_required_dependencies = lambda *a, **k: None  # lighteval: only run() needs it, not compute_hashes

from datatrove.data import Document  # noqa: E402
from datatrove.pipeline.decont.n_grams import NGramsDecontConfig, NGramsDecontFilter, NGramsDecontIndexer  # noqa: E402
from datatrove.utils.logging import logger  # noqa: E402
from datatrove.utils.text import TextNormConfig  # noqa: E402

logger.remove()  # its per-file INFO lines


def main(spec_path, out_path):
    spec = json.load(open(spec_path))
    cfg = dict(spec.get("config", {}))
    if "norm_config" in cfg:
        cfg["norm_config"] = TextNormConfig(**cfg["norm_config"])
    config = NGramsDecontConfig(**cfg)
    lang = spec.get("language", "en")
    items = [json.loads(x) for x in open(spec["items"], encoding="utf-8") if x.strip()]
    docs = [json.loads(x) for x in open(spec["docs"], encoding="utf-8") if x.strip()]
    t0 = time.process_time()
    ix = NGramsDecontIndexer(spec["index_dir"], config=config, language=lang)
    hashes = defaultdict(set)
    for it in items:
        for gold in it["golds"]:
            hashes[it["task"]].update(ix.compute_hashes(gold, it.get("query")))
    for task, hs in hashes.items():
        arr = np.array(list(hs), dtype=config.hash_config.np_descr)
        with ix.output_folder.open(f"{task.replace(' ', '_')}.index.hashes", mode="wb") as f:
            arr.tofile(f)
    index_s = time.process_time() - t0
    flt = NGramsDecontFilter(spec["index_dir"], config=config, language=lang)
    flt.load_index_hashes()  # loading the index is not filtering
    flt.filter(Document(text="warm up the tokenizer", id="w"))
    removed = {}
    t0 = time.process_time()
    for d in docs:
        doc = Document(text=d["text"], id=str(d["id"]))
        r = flt.filter(doc)
        if r is not True:
            removed[doc.id] = [doc.metadata["contaminated_task"], doc.metadata["contaminated_ngram"]]
    filter_s = time.process_time() - t0
    json.dump({"removed": removed, "index_s": index_s, "filter_s": filter_s, "docs": len(docs),
               "bytes": sum(len(d["text"].encode()) for d in docs)}, open(out_path, "w"))


if __name__ == "__main__":
    main(*sys.argv[1:3])
