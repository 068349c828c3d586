"""The rule-based agent-trace ops of issue 29 side by side with Data-Juicer 1.6.1 on the same traces:
``tool_success_tagger_mapper`` → ``agent_tool_type_mapper`` → ``agent_bad_case_signal_mapper`` (three param
sets), each row's meta compared field by field, and the seconds of both over the traces repeated to --rows.

Data-Juicer runs in its venv (``PEERS_DIR``, default /tmp/peers) through each op's ``process_single`` on plain
dicts (its datasets cannot hold the traces' mixed content shapes in one column); gristmill through
``op.apply`` on an Arrow batch.

    python bench/dj_agent_ops.py [--rows 20000] [--write-fixture]

``--write-fixture`` rewrites tests/djops/data/agent_trace_tags_dj161.json (the traces and Data-Juicer's meta
per param set), which tests/djops/test_djops_agent_trace_tags.py checks gristmill against."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DJ_PY = Path(os.environ.get("PEERS_DIR", "/tmp/peers")) / "dj" / "bin" / "python"
FIXTURE = REPO / "tests" / "djops" / "data" / "agent_trace_tags_dj161.json"
CHAIN = ("tool_success_tagger_mapper", "agent_tool_type_mapper", "agent_bad_case_signal_mapper")
LONG_Q = "Please read the quarterly report in /data/q3.pdf, extract the revenue table and email it to finance. " * 2


def traces() -> list[dict]:
    tool = lambda c: {"role": "tool", "content": c}  # noqa: E731
    return [
        {"query": LONG_Q, "response": "",
         "messages": [{"role": "user", "content": LONG_Q}, tool("Error: file not found"), tool("Wrote 120 bytes"),
                      tool("")],
         "meta": {"agent_tool_types": ["read_file", "write_file", "read_file"], "agent_request_model": "qwen-max",
                  "total_tokens": 5200, "agent_total_cost_time_ms": 1830}},
        {"query": "Run the tests", "response": "Both runs failed; I could not fix it.",
         "messages": [tool("FAILED tests/test_a.py::test_x"), tool({"status": "exception", "code": 2}),
                      {"role": "tool_use", "content": [{"type": "text", "text": "ok"}]}],
         "meta": {"agent_tool_types": ["run_tests", "run_tests", "edit"], "agent_request_model": "gpt-4o",
                  "total_tokens": 900, "agent_total_cost_time_ms": 4000}},
        {"query": "帮我查一下天气", "response": "北京今天晴，25 度。",
         "messages": [tool("接口调用失败，错误码 502"), tool("未失败：返回 25 度"), tool([{"type": "text", "text": "晴"}])],
         "meta": {"agent_tool_types": ["weather"], "dialog_sentiment_labels": ["沮丧", "期待"]}},
        {"query": "Summarise this", "response": "A short summary of the article.",
         "messages": [{"role": "user", "content": "Summarise this"}, {"role": "assistant", "content": "Sure"}],
         "meta": {"agent_tool_types": [""], "agent_trace_coherence": {"score": 1.5, "reason": "drifts"},
                  "dialog_topic_shift": {"skipped": True, "reason": "empty_input"},
                  "agent_tool_relevance": {"score": 2.0, "reason": "wrong tool", "eval_kind": "agent_tool"}},
         "stats": {"perplexity": 950.5, "llm_difficulty_score": 0.8, "llm_quality_score": 0.3,
                   "llm_quality_record": json.dumps({"recommendation": "keep"})}},
        {"query": "Translate to French", "response": "Traduire en français",
         "messages": [tool("success")],
         "meta": {"agent_tool_types": ["translate", "lookup", "lookup", "translate", "spell"],
                  "agent_request_model": "qwen-max", "total_tokens": 20000},
         "stats": {"llm_analysis_score": 0.2, "llm_analysis_record": json.dumps({"recommendation": ["Discard"]}),
                   "llm_quality_score": 0.25, "llm_quality_record": json.dumps({"recommendation": "discard"})}},
        {"query": "", "response": "", "messages": [], "meta": {}},
    ]


PARAMS = [
    {},
    {"max_total_tokens": 1000, "max_latency_ms": 2000, "signal_on_negative_sentiment_hint": True,
     "signal_on_high_perplexity": True, "signal_hard_query_poor_reply": True,
     "llm_text_quality_discard_must_be_strict": False, "min_medium_signals_for_watchlist": 3,
     "high_precision_on_tool_fail_alone": False, "min_tool_fail_count_for_signal": 2,
     "dialog_quality_low_score_threshold": 1.5},
    {"auto_calibrate_thresholds": True, "calibration_json_path": "CALIBRATION",
     "signal_on_llm_analysis_low": False, "min_tool_rounds_for_ratio_signal": 1},
]
CALIBRATION = {"percentile": 90, "default": {"max_total_tokens": 4000, "max_latency_ms": 3000},
               "by_request_model": {"qwen-max": {"max_total_tokens": 10000, "perplexity_high_threshold": 900}}}

DJ_RUNNER = r"""
import json, sys, time
from loguru import logger
logger.remove()
from data_juicer.ops.load import load_ops
rows, chain, sets, reps = json.load(open(sys.argv[1]))
out = {}
for params in sets:
    ops = load_ops([{chain[0]: {}}, {chain[1]: {}}, {chain[2]: json.loads(params)}])
    res = []
    t = time.perf_counter()
    for _ in range(reps):
        res = []
        for r in rows:
            s = json.loads(json.dumps(r))
            s["__dj__meta__"] = s.pop("meta")
            s["__dj__stats__"] = s.pop("stats", {})
            for op in ops:
                s = op.process_single(s)
            res.append(s["__dj__meta__"])
    out[params] = {"meta": res, "seconds": time.perf_counter() - t}
json.dump(out, open(sys.argv[2], "w"), ensure_ascii=False)
"""


def param_sets(tmp: Path) -> list[str]:
    cal = tmp / "calibration.json"
    cal.write_text(json.dumps(CALIBRATION))
    return [json.dumps(p).replace("CALIBRATION", str(cal)) for p in PARAMS]


def dj(rows: list[dict], sets: list[str], reps: int, tmp: Path) -> dict:
    (tmp / "in.json").write_text(json.dumps([rows, CHAIN, sets, reps], ensure_ascii=False))
    subprocess.run([str(DJ_PY), "-c", DJ_RUNNER, str(tmp / "in.json"), str(tmp / "out.json")], check=True)
    return json.loads((tmp / "out.json").read_text())


def ours(rows: list[dict], params: dict, reps: int) -> tuple[list[dict], float]:
    sys.path.insert(0, str(REPO))
    from gristmill.core import columns as C
    from gristmill.registry import create_op
    ops = [create_op(CHAIN[0], {}), create_op(CHAIN[1], {}), create_op(CHAIN[2], params)]
    recs = [dict({k: v for k, v in r.items() if k not in ("meta", "stats")}, __meta__=r["meta"],
                 __stats__=r.get("stats", {})) for r in rows] * reps
    t = time.perf_counter()
    batch = C.normalise_input(C.from_records(recs))
    for op in ops:
        batch = op.apply(batch)
    dt = time.perf_counter() - t
    return [r[C.META] for r in C.to_pylist(batch)[:len(rows)]], dt


def same(got: dict, want: dict) -> bool:
    return {k: v for k, v in got.items() if v is not None or k in want} == want


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=6000, help="traces in the timed run")
    ap.add_argument("--write-fixture", action="store_true")
    args = ap.parse_args()
    rows = traces()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        sets = param_sets(tmp)
        want = dj(rows, sets, 1, tmp)
        if args.write_fixture:
            fixture = {"rows": rows, "calibration": CALIBRATION, "params": PARAMS,
                       "dj": {json.dumps(p): want[s]["meta"] for p, s in zip(PARAMS, sets)}}
            FIXTURE.write_text(json.dumps(fixture, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
            print(f"wrote {FIXTURE}")
        reps = max(1, args.rows // len(rows))
        timed = dj(rows, sets[:1], reps, tmp)[sets[0]]["seconds"]
        for s in sets:
            got, _ = ours(rows, json.loads(s), 1)
            eq = sum(same(g, w) for g, w in zip(got, want[s]["meta"]))
            print(f"params {s[:70]:72s} rows equal to Data-Juicer: {eq}/{len(rows)}")
            for g, w in zip(got, want[s]["meta"]):
                if not same(g, w):
                    print("  gristmill:", g, "\n  dj:       ", w)
        _, ours_s = ours(rows, json.loads(sets[0]), reps)
        print(f"{reps * len(rows)} traces, the 3-op chain: gristmill {ours_s:.2f} s, Data-Juicer (process_single) "
              f"{timed:.2f} s")


if __name__ == "__main__":
    main()
