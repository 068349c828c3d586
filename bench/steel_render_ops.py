"""The Steel-LLM mix's rendering ops, column-wise fast path against the per-row path, on the same rows.

    python bench/steel_render_ops.py [--mb 150] [--repeat 3]

Rows are bench/steel_mix.py's generated rows for the BELLE, MOSS, Firefly and Baike sources (sized as in that
bench's --mb mix), written as JSONL and read back in batches by gristmill's reader, and rendered by the
recipe's op (examples/steel/recipe.yaml) twice: with the fast path, and with it switched off (the per-row
path). Prints CPU seconds of each (best of --repeat; the machine may be shared) and checks the texts are
byte-identical.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time

import pyarrow as pa

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import steel_mix as S  # noqa: E402
from gristmill.core import columns as C  # noqa: E402
from gristmill.io.base import ReadOptions, read_shard  # noqa: E402
from gristmill.io.planner import plan_dataset  # noqa: E402
from gristmill.ops import chat as CH, fields_to_text as F  # noqa: E402
from gristmill.registry import create_op  # noqa: E402

OPS = {
    "belle": ("chat_template_mapper", {"input_format": "alpaca", "drop_last_end": True}),
    "moss": ("chat_template_mapper", {"input_format": "firefly", "drop_last_end": True}),
    "firefly": ("chat_template_mapper", {"input_format": "qa", "question_key": "input", "answer_key": "target",
                                         "drop_last_end": True}),
    "baike": ("fields_to_text_mapper", {"parts": ["title", "summary", {"each": "sections", "parts": [
        "title", "content"], "sep": "\n", "item_sep": "\n"}], "sep": "\n"}),
}


def batches(name, mb, tmp):
    rows = S._rows(name)
    pool = S._sentences(s for r in rows for s in S._strings(r) if len(s) > 8 and not s.startswith("{"))
    rng = random.Random(f"0-{name}")
    target, size, out, i = mb * S.SHARE[name] * 1e6, 0, [], 0
    while size < target:
        r = S.make_row(name, rng, pool, i)
        out.append(r)
        size += len(C.dumps(r))
        i += 1
    path = os.path.join(tmp, f"{name}.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in out)
    opts = ReadOptions(text_optional=True)
    bs = [b for sh in plan_dataset(path, opts) for b in read_shard(sh, opts) if isinstance(b, pa.RecordBatch)]
    return bs, len(out), size


def timed(op, bs, repeat):
    best, texts = None, None
    for _ in range(repeat):
        t = time.process_time()
        res = [op.process_batch(b).column(op.text_key) for b in bs]
        dt = time.process_time() - t
        best = dt if best is None else min(best, dt)
        texts = res
    return best, [x for a in texts for x in a.to_pylist()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=150)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="gm-render-")
    print(f"{'source':8} {'op':22} {'rows':>7} {'MB':>6} {'per-row s':>10} {'fast s':>8} {'speedup':>8}  identical")
    for name, (op_name, params) in OPS.items():
        bs, n, size = batches(name, a.mb, tmp)
        fast_t, fast = timed(create_op(op_name, params), bs, a.repeat)
        saved = CH.ChatTemplateMapper._fast_render, F._each_fast
        CH.ChatTemplateMapper._fast_render = lambda self, batch: None
        F._each_fast = lambda batch, part: None
        try:
            slow_t, slow = timed(create_op(op_name, params), bs, a.repeat)
        finally:
            CH.ChatTemplateMapper._fast_render, F._each_fast = saved
        print(f"{name:8} {op_name:22} {n:7d} {size / 1e6:6.1f} {slow_t:10.3f} {fast_t:8.3f} "
              f"{slow_t / max(fast_t, 1e-9):7.1f}x  {fast == slow}")
        if fast != slow:
            sys.exit(f"{name}: fast path output differs from the per-row path")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
