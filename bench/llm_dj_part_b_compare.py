"""Data-Juicer 1.6.1's own ops vs gristmill's against one OpenAI-compatible server (tests/llm/llm_server.py):
llm_condition_filter, llm_extract_mapper, pii_llm_suspect_mapper, relation_identity_mapper,
text_tagging_by_prompt_mapper (Data-Juicer's local path swapped for its API client: same message) and
image_tagging_vlm_mapper (is_api_model) run on the same rows; the request bodies each sends and the
stats / meta each writes are compared. Data-Juicer runs in its own venv (a subprocess) and talks HTTP to
the same server.

    python bench/llm_dj_part_b_compare.py [--dj-python /tmp/peers/dj/bin/python]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "llm"))

ROWS = [
    {"text": "Call Mr Smith at 13812345678 tomorrow about the Nile flood budget.", "query": "Who to call?",
     "response": "Mr Smith.", "bg": "Rivers flood in spring."},
    {"text": "李莲花笑着说：“方小宝，过来。” 方多病跑了过去。", "query": "谁在说话？", "response": "李莲花。"},
    {"text": "My email is ada@example.com and my token is abcdefghijklmnopqrstuvwxyz0123.", "query": None},
    {"text": "A quiet afternoon; nothing to report.", "response": "ok"},
    {"text": "找出方程 x2 - 3x = 0 的根。", "query": "", "bg": None},
]
OPS = {  # name: params (the same for both)
    "llm_condition_filter": {"condition": "mentions a river or a person", "knowledge_grounding_key": "bg",
                             "api_or_hf_model": "m"},
    "llm_extract_mapper": {"input_keys": ["text", "query"], "output_schema": {"person": "a person named",
                                                                              "topic": "the topic"},
                           "api_or_hf_model": "m"},
    "pii_llm_suspect_mapper": {"api_model": "m", "redaction_mode": "evidence", "max_chars_per_field": 50},
    "relation_identity_mapper": {"api_model": "m", "source_entity": "李莲花", "target_entity": "方多病"},
    "text_tagging_by_prompt_mapper": {"hf_model": "m"},
}


def answer(body, n):
    msgs = body["messages"]
    last = msgs[-1]["content"]
    text = last if isinstance(last, str) else json.dumps(last)
    h = hashlib.blake2b(text.encode(), digest_size=4).digest()[0]
    sys_ = msgs[0]["content"] if msgs[0]["role"] == "system" else ""
    if "binary classifier" in str(sys_):
        return "Yes." if h % 2 else "no"
    if "extraction assistant" in str(sys_):
        return json.dumps({"person": "Smith" if h % 2 else None, "topic": f"t{h % 5}"})
    if "合规" in str(sys_) or "compliance" in str(sys_):
        ev = "13812345678" if "1381" in text else ("ada@example.com" if "ada@" in text else "")
        return json.dumps({"suspected": [{"field": "text", "category": "contact", "evidence": ev}] if ev else [],
                           "likely_clean": not ev}, ensure_ascii=False)
    if "判断" in str(sys_):
        return "分析推理：两人是朋友。\n所以方多病是李莲花的：挚友"
    if "image" in str(sys_).lower():
        return '{"tags": ["Red Square", "plain-colour"]}'
    return "数学" if h % 2 else "其他"


DJ_SCRIPT = r"""
import json, os, sys
os.environ.setdefault("OPENAI_API_KEY", "x")
cfg = json.loads(sys.stdin.read())
url, rows, ops, image = cfg["url"], cfg["rows"], cfg["ops"], cfg["image"]
from data_juicer.ops.filter.llm_condition_filter import LLMConditionFilter
from data_juicer.ops.mapper.llm_extract_mapper import LLMExtractMapper
from data_juicer.ops.mapper.pii_llm_suspect_mapper import PiiLlmSuspectMapper
from data_juicer.ops.mapper.relation_identity_mapper import RelationIdentityMapper
from data_juicer.ops.mapper.image_tagging_vlm_mapper import ImageTaggingVLMMapper
from data_juicer.ops.mapper import text_tagging_by_prompt_mapper as T
from data_juicer.utils.model_utils import prepare_api_model
mp = {"base_url": url}
out = {}
def run(name, op, fn):
    res = []
    for r in rows:
        s = json.loads(json.dumps(r)); s["__dj__stats__"] = {}; s["__dj__meta__"] = {}
        res.append(fn(op, s))
    out[name] = res
run("llm_condition_filter", LLMConditionFilter(model_params=mp, **ops["llm_condition_filter"]),
    lambda op, s: op.compute_stats_single(s)["__dj__stats__"])
run("llm_extract_mapper", LLMExtractMapper(model_params=mp, **ops["llm_extract_mapper"]),
    lambda op, s: op.process_single(s)["__dj__meta__"])
run("pii_llm_suspect_mapper", PiiLlmSuspectMapper(model_params=mp, **ops["pii_llm_suspect_mapper"]),
    lambda op, s: [op.process_single(s)["__dj__meta__"], s["text"]])
run("relation_identity_mapper", RelationIdentityMapper(model_params=mp, **ops["relation_identity_mapper"]),
    lambda op, s: op.process_single(s)["__dj__meta__"])
# text_tagging_by_prompt_mapper loads hf_model locally; its message, asked of the API model instead
api = prepare_api_model("m", **mp)
def tag(op, s):
    prompt = T.DEFAULT_CLASSIFICATION_PROMPT.format(text=s["text"], tag_list=T.DEFAULT_CLASSIFICATION_LIST)
    return {"__dj__text_tags__": [api([{"role": "user", "content": prompt}]).strip()]}
run("text_tagging_by_prompt_mapper", None, tag)
img = ImageTaggingVLMMapper(api_or_hf_model="Qwen/Qwen2.5-VL-7B-Instruct", is_api_model=True, model_params=mp)
s = {"text": "a red square", "images": [image], "__dj__meta__": {}}
out["image_tagging_vlm_mapper"] = [sorted(t) for t in img.process_single(s)["__dj__meta__"]["image_tags"]]
# a recipe's strategy is a string; Data-Juicer 1.6.1 looks it up among enum keys, so it falls back to direct
from data_juicer.utils.llm_semantic_ops import get_condition_prompt
out["strategy_string_ignored"] = get_condition_prompt("t", "c", strategy="cot") == get_condition_prompt("t", "c")
print(json.dumps(out, ensure_ascii=False))
"""


def ours(url: str, image: str) -> dict:
    from gristmill.registry import create_op
    out = {}
    for name, params in OPS.items():
        op = create_op(name, {"api_endpoint": url + "/chat/completions", **params})
        rows = [dict(r) for r in ROWS]
        if name == "llm_condition_filter":
            from gristmill.core import columns as C
            b = op.compute_stats(C.from_records(rows))
            stats = [r["__stats__"] for r in C.to_pylist(b)]
            out[name] = [{k: v for k, v in s.items()} for s in stats]
            continue
        res = op.apply(rows)
        if name == "pii_llm_suspect_mapper":
            out[name] = [[r.get("__meta__", {}), r["text"]] for r in res]
        elif name == "text_tagging_by_prompt_mapper":
            out[name] = [{"__dj__text_tags__": r["__dj__text_tags__"]} for r in res]
        else:
            out[name] = [r.get("__meta__", {}) for r in res]
    img = create_op("image_tagging_vlm_mapper", {"api_endpoint": url + "/chat/completions"})
    res = img.apply([{"text": "a red square", "images": [image]}])
    out["image_tagging_vlm_mapper"] = [sorted(t) for t in res[0]["__meta__"]["image_tags"]]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dj-python", default="/tmp/peers/dj/bin/python")
    a = ap.parse_args()
    if not os.path.exists(a.dj_python):
        sys.exit(f"no Data-Juicer venv at {a.dj_python}")
    from llm_server import LLMServer
    from PIL import Image
    d = tempfile.mkdtemp()
    image = os.path.join(d, "red.png")
    Image.new("RGB", (8, 8), "red").save(image)
    with LLMServer(answer) as srv:
        proc = subprocess.run([a.dj_python, "-c", DJ_SCRIPT], input=json.dumps(
            {"url": srv.url, "rows": ROWS, "ops": OPS, "image": image}), capture_output=True, text=True, timeout=600)
        if proc.returncode:
            sys.exit(proc.stderr[-3000:])
        theirs = json.loads(proc.stdout.strip().splitlines()[-1])
        dj_bodies = list(srv.bodies)
        mine = ours(srv.url, image)
        our_bodies = srv.bodies[len(dj_bodies):]
    key = lambda b: json.dumps(b, sort_keys=True, ensure_ascii=False)  # noqa: E731
    same_bodies = sorted(map(key, dj_bodies)) == sorted(map(key, our_bodies))
    print(f"request bodies: Data-Juicer {len(dj_bodies)}, gristmill {len(our_bodies)}: "
          f"{'identical (as a multiset)' if same_bodies else 'DIFFER'}")
    if not same_bodies:
        only_dj = set(map(key, dj_bodies)) - set(map(key, our_bodies))
        only_us = set(map(key, our_bodies)) - set(map(key, dj_bodies))
        for b in list(only_dj)[:3]:
            print("  only Data-Juicer:", b[:400])
        for b in list(only_us)[:3]:
            print("  only gristmill:  ", b[:400])
    differ = not same_bodies
    if theirs.pop("strategy_string_ignored"):
        print("note: Data-Juicer 1.6.1 ignores a recipe's strategy (a string: its prompt lookup is keyed by the "
              "enum, so 'cot' sends the direct prompt); gristmill sends the strategy's prompt")
    for name in theirs:
        ok = theirs[name] == mine[name]
        differ |= not ok
        print(f"{'same' if ok else 'DIFFERS':8} {name}: outputs of {len(theirs[name])} row(s)")
        if not ok:
            for t, m in zip(theirs[name], mine[name]):
                if t != m:
                    print("   Data-Juicer:", json.dumps(t, ensure_ascii=False)[:300])
                    print("   gristmill:  ", json.dumps(m, ensure_ascii=False)[:300])
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
