"""llm_rephrase_mapper (Nemotron-CC-style synthetic data) against the local server: new rows with lineage,
a field of the row, answers cleaned up, documents without usable output getting none."""
from __future__ import annotations

import pytest
from llm_server import LLMServer

from gristmill.ops.llm.rephrase import PROMPTS, SYSTEM_PROMPT, clean
from gristmill.registry import create_op

pytestmark = pytest.mark.slow  # an HTTP server

DOCS = [{"id": "d1", "text": "the nile is long river. it flood every year. buy cheap pills!!"},
        {"id": "d2", "text": "Water boils at 100 degrees Celsius at sea level."},
        {"id": "d3", "text": ""}]


def answer(body, n):
    user = body["messages"][-1]["content"]
    if "Nile" in user or "nile" in user:
        return "Rewritten text:\nThe Nile is a long river that floods every year."
    return "   "  # an empty answer: nothing usable


def test_new_rows_with_lineage():
    with LLMServer(answer) as srv:
        op = create_op("llm_rephrase_mapper", {"api_endpoint": srv.url + "/chat/completions", "try_num": 2})
        out = op.apply([dict(d) for d in DOCS])
        assert {"role": "system", "content": SYSTEM_PROMPT} == srv.bodies[0]["messages"][0]
        assert srv.bodies[0]["messages"][1]["content"].startswith(PROMPTS["wikipedia"].split("{text}")[0])
        assert len(srv.bodies) == 1 + 2  # d2 unusable twice (try_num), d3 empty: not asked
    assert [(r["id"], r["source_id"], r["synthetic_task"]) for r in out] == [
        ("d1", None, None), ("d1#wikipedia", "d1", "wikipedia"), ("d2", None, None), ("d3", None, None)]
    assert out[1]["text"] == "The Nile is a long river that floods every year."


def test_output_field_and_no_originals():
    with LLMServer(answer) as srv:
        url = srv.url + "/chat/completions"
        out = create_op("llm_rephrase_mapper", {"api_endpoint": url, "output_key": "rephrased"}).apply(
            [dict(d) for d in DOCS[:2]])
        assert [r["rephrased"] for r in out] == ["The Nile is a long river that floods every year.", None]
        only = create_op("llm_rephrase_mapper", {"api_endpoint": url, "keep_original": False}).apply(
            [dict(d) for d in DOCS[:2]])
        assert [r["id"] for r in only] == ["d1#wikipedia"]


def test_clean():
    assert clean("diverse_qa", "Sure! Here they are.\nQuestion: Is it long?\nAnswer: Yes.") == (
        "Question: Is it long?\nAnswer: Yes.")
    assert clean("diverse_qa", "No pairs at all.") == ""
    assert clean("knowledge_list", "Facts:\n- The Nile floods.\n2. Water boils at 100 C.\nnoise") == (
        "- The Nile floods.\n- Water boils at 100 C.")
    assert clean("distill", "Condensed text: Short.") == "Short."
