"""Runs Data-Juicer 1.6 video/audio ops on a JSONL file in Data-Juicer's own venv (started by
``bench/multimodal_video.py``): ``python _dj_video_runner.py IN.jsonl OPS.json OUT.json``. Writes the
kept rows (ids, stats, text, videos) and the seconds spent, every op with ``num_proc: 1``."""
import json
import sys
import time


def main(src, ops_path, out, keep=""):
    process = json.load(open(ops_path))
    from data_juicer.core.data import NestedDataset
    from data_juicer.ops import load_ops
    rows = [json.loads(x) for x in open(src, encoding="utf-8")]
    for spec in process:
        for params in spec.values():
            params.setdefault("num_proc", 1)
    t0 = time.perf_counter()
    ds = NestedDataset.from_list(rows)
    for op in load_ops(process):
        ds = op.run(ds)
        if isinstance(ds, tuple):
            ds = ds[0]
    kept = ds.to_list()
    secs = time.perf_counter() - t0
    json.dump({"seconds": secs, "rows": [{"id": r.get("id"), "text": r.get("text"), "videos": r.get("videos"),
                                          "stats": r.get("__dj__stats__", {}),
                                          **{k: r.get(k) for k in keep.split(",") if k}} for r in kept]},
              open(out, "w"), default=str)


if __name__ == "__main__":
    main(*sys.argv[1:5])
