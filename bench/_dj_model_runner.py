"""Runs Data-Juicer 1.6's image_text_similarity_filter on a JSONL file, in Data-Juicer's own venv (started
by ``bench/mm_models.py``): ``python _dj_model_runner.py MODEL_DIR IN.jsonl THREADS OUT.json``. Writes each
row's stat and the seconds spent after the model is loaded (Data-Juicer's per-sample path:
``compute_stats_single``, one model call per sample and chunk).

The venv's torchvision needs a CUDA torch, which this machine lacks, and transformers imports it for its
default image processors; it is hidden here so transformers uses its Pillow processors, as gristmill's
environment (no torchvision) does."""
import importlib.metadata as md
import importlib.util
import json
import sys
import time

_find, _version = importlib.util.find_spec, md.version


def _no_tv_find(name, *a, **k):
    return None if name.split(".")[0] == "torchvision" else _find(name, *a, **k)


def _no_tv_version(name):
    if name == "torchvision":
        raise md.PackageNotFoundError(name)
    return _version(name)


def main(model, src, threads, out):
    importlib.util.find_spec, md.version = _no_tv_find, _no_tv_version
    import torch
    torch.set_num_threads(int(threads))
    from data_juicer.ops.filter.image_text_similarity_filter import ImageTextSimilarityFilter
    op = ImageTextSimilarityFilter(hf_clip=model, min_score=-1.0, num_proc=1)
    rows = [json.loads(x) for x in open(src, encoding="utf-8")]
    warm = dict(rows[0], __dj__stats__={})
    op.compute_stats_single(warm)  # loads the model
    t0 = time.perf_counter()
    stats = []
    for r in rows:
        r = op.compute_stats_single(dict(r, __dj__stats__={}))
        stats.append([float(x) for x in r["__dj__stats__"]["image_text_similarity"]])
    json.dump({"seconds": time.perf_counter() - t0, "stats": stats}, open(out, "w"))


if __name__ == "__main__":
    main(*sys.argv[1:])
