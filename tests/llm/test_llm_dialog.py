"""The dialog tagging mappers against the local server: turns asked in order with the earlier turns, their
analyses and labels as context; Data-Juicer's prompts; results in meta."""
from __future__ import annotations

import re

import pytest
from llm_server import LLMServer

from gristmill.ops.llm.dialog import INTENT_PROMPT, INTENSITY_PROMPT
from gristmill.registry import create_op

pytestmark = pytest.mark.slow  # an HTTP server

ROW = {"history": [["Hi, what is machine learning?", "A way for computers to learn from data."]],
       "query": "Any book to start with?", "response": "Try 'Python Machine Learning'."}


def _last_query(body) -> str:
    return re.findall(r"用户：(.*)\n", body["messages"][1]["content"])[-1]


def test_dialog_intent_detection_mapper():
    def answer(body, n):
        q = _last_query(body)
        return f"意图分析：asks about {q[:10]}\n意图类别：{'信息查找' if 'what' in q else '请求建议'}"
    with LLMServer(answer) as srv:
        op = create_op("dialog_intent_detection_mapper", {"api_endpoint": srv.url + "/chat/completions",
                                                          "intent_candidates": ["信息查找", "请求建议"]})
        out = op.apply([dict(ROW), {"query": "What is AI?", "response": "Intelligence by machines."}])
        bodies = sorted(srv.bodies, key=lambda b: len(b["messages"][1]["content"]))
    meta = out[0]["__meta__"]
    assert meta["dialog_intent_labels"] == ["信息查找", "请求建议"]
    assert meta["dialog_intent_labels_analysis"] == ["asks about Hi, what i", "asks about Any book t"]
    assert out[1]["__meta__"]["dialog_intent_labels"] == ["请求建议"]  # one turn ("What": no lower-case what)
    assert bodies[0]["messages"][0]["content"] == INTENT_PROMPT + "\n\n【语言】「意图分析」「意图类别」后的说明请使用简体中文。"
    second = next(b for b in srv.bodies if "Any book" in _last_query(b))
    assert second["messages"][1]["content"] == (
        "备选意图类别：[信息查找,请求建议]用户：Hi, what is machine learning?\n意图分析：asks about Hi, what i\n"
        "意图类别：信息查找\nLLM：A way for computers to learn from data.\n用户：Any book to start with?\n")


def test_dialog_sentiment_intensity_mapper_in_english():
    with LLMServer(lambda body, n: "情绪分析：calm\n情绪值：2") as srv:
        op = create_op("dialog_sentiment_intensity_mapper", {"api_endpoint": srv.url + "/chat/completions",
                                                             "preferred_output_lang": "en", "max_round": 0})
        out = op.apply([dict(ROW)])
        assert srv.bodies[0]["messages"][0]["content"].startswith(INTENSITY_PROMPT + "\n\n【Language】")
        assert all(b["messages"][1]["content"].count("用户：") == 1 for b in srv.bodies)  # max_round 0
    assert out[0]["__meta__"]["dialog_sentiment_intensity"] == [2, 2]
    assert out[0]["__meta__"]["dialog_sentiment_intensity_analysis"] == ["calm", "calm"]


def test_dialog_null_keys_are_the_defaults():
    """Data-Juicer's config_all.yaml gives ``intensities_key: null`` / ``analysis_key: null``: the recipe runs,
    with the default meta fields (Data-Juicer 1.6.1 writes both under a key None, the analyses overwriting)."""
    def answer(body, n):
        return "情绪分析：calm\n情绪值：2"
    with LLMServer(answer) as srv:
        op = create_op("dialog_sentiment_intensity_mapper", {"api_endpoint": srv.url + "/chat/completions",
                                                             "intensities_key": None, "analysis_key": None})
        meta = op.apply([dict(ROW)])[0]["__meta__"]
    assert meta == {"dialog_sentiment_intensity": [2, 2], "dialog_sentiment_intensity_analysis": ["calm", "calm"]}
    op = create_op("dialog_intent_detection_mapper", {"labels_key": None, "analysis_key": None})
    assert (op.params.labels_key, op.params.analysis_key) == ("dialog_intent_labels", "dialog_intent_labels_analysis")
