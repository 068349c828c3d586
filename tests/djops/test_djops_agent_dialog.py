"""agent_dialog_normalize_mapper against Data-Juicer 1.6.1. ``data/agent_dialog_dj161.json`` holds agent
traces (tool calls in OpenAI and Anthropic shapes, thinking blocks, a long traceback, orphan tool results,
unicode, no messages) and, per param set, what DJ's op produced on each (its ``process_single`` called
directly: HF datasets cannot hold the mixed content shapes in one column)."""
import json
from pathlib import Path

import pytest

from djops_util import run
from gristmill.ops.agent_dialog import head_tail

CASES = json.loads((Path(__file__).parent / "data" / "agent_dialog_dj161.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("params", list(CASES["dj"]))
def test_same_fields_and_tags_as_data_juicer(params):
    kept, removed = run("agent_dialog_normalize_mapper", CASES["rows"], **json.loads(params))
    assert not removed and len(kept) == len(CASES["rows"])
    for got, want in zip(kept, CASES["dj"][params]):
        for k in ("text", "dialog_history", "query", "response"):
            assert got[k] == want[k], k
        assert {k: v for k, v in got["__meta__"].items() if v is not None} == want["meta"]


def test_caps_fire_and_keep_head_and_tail():
    text = "".join(f"line {i}\n" for i in range(500))
    capped = head_tail(text, 1000)
    assert len(capped) <= 1000 and capped.startswith("line 0\n") and capped.endswith("line 499\n")
    assert "chars omitted from middle" in capped
    assert head_tail("short", 3) != "short" and head_tail("short", 0) == "short"


def test_gristmill_run_on_agent_traces(tmp_path):
    """End to end: gristmill run normalises the traces, then a text filter works on the flattened dialog."""
    import subprocess
    import sys
    import yaml
    src = tmp_path / "agent.jsonl"
    src.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in CASES["rows"]), encoding="utf-8")
    recipe = {"dataset_path": str(src), "export_path": str(tmp_path / "out.jsonl"), "work_dir": str(tmp_path / "w"),
              "keep_stats_in_res_ds": True,
              "process": [{"agent_dialog_normalize_mapper": {}}, {"text_length_filter": {"min_len": 1}}]}
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe))
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(tmp_path / "r.yaml"), "--no-progress"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    out = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    want = [w for w in CASES["dj"]["{}"] if w["text"]]
    assert [o["text"] for o in out] == [w["text"] for w in want]
    assert out[0]["__meta__"]["agent_tool_types"] == ["read_file", "write_file", "send_mail"]
    removed = (tmp_path / "w" / "removed" / "01-text_length_filter.jsonl").read_text().splitlines()
    assert len(removed) == 1  # the trace with no dialog: removed with a reason, not lost
