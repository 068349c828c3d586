"""Runs Data-Juicer 1.6 image ops on a JSONL file, in Data-Juicer's own venv (started by
``bench/multimodal.py`` and by hand for the test expectations): ``python _dj_image_runner.py IN.jsonl
OPS.json OUT.json``. Writes the kept rows' ids, their stats and the seconds spent.

torchvision's compiled ops need a CUDA torch, which this machine lacks; imagededup (Data-Juicer's hash
library for image_deduplicator) imports torchvision only for its CNN method, which the hash methods never
use, so stand-in modules take its place (the hashes are imagededup's own code either way)."""
import importlib.machinery
import json
import sys
import time
import types


class _Any:
    def __getattr__(self, a):
        if a.startswith("__"):
            raise AttributeError(a)
        return _Any()

    def __call__(self, *a, **k):
        return _Any()


def _stub_torchvision():
    try:
        import torchvision  # noqa: F401
        return
    except Exception:  # noqa: BLE001 - any import failure: stand in
        pass
    for name in ("torchvision", "torchvision.models", "torchvision.transforms",
                 "torchvision.models.vision_transformer"):
        m = types.ModuleType(name)
        m.__spec__ = importlib.machinery.ModuleSpec(name, None)
        m.__getattr__ = lambda attr: (_ for _ in ()).throw(AttributeError(attr)) if attr.startswith("__") else _Any()
        sys.modules[name] = m


def main(src, ops_path, out):
    process = json.load(open(ops_path))
    if any("image_deduplicator" in op for op in process):
        _stub_torchvision()
    from data_juicer.core.data import NestedDataset
    from data_juicer.ops import load_ops
    rows = [json.loads(x) for x in open(src, encoding="utf-8")]
    t0 = time.perf_counter()
    ds = NestedDataset.from_list(rows)
    for spec in process:  # one process per op (per-core figures)
        for params in spec.values():
            params.setdefault("num_proc", 1)
    for op in load_ops(process):
        ds = op.run(ds)
        if isinstance(ds, tuple):
            ds = ds[0]
    kept = ds.to_list()
    secs = time.perf_counter() - t0
    json.dump({"seconds": secs, "ids": [r["id"] for r in kept],
               "stats": [r.get("__dj__stats__", {}) for r in kept]}, open(out, "w"), default=str)


if __name__ == "__main__":
    main(*sys.argv[1:4])
