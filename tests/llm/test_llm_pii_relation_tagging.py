"""pii_llm_suspect_mapper, relation_identity_mapper and text_tagging_by_prompt_mapper against the local
server: Data-Juicer 1.6.1's messages (expected strings rendered by Data-Juicer's own op code for the same
rows), parsing, the heuristic gate, redaction, failures to rejects, nothing lost."""
from __future__ import annotations

import json

import pytest
from llm_server import LLMServer

from gristmill.llm.client import RequestFailed
from gristmill.ops.llm.pii_suspect import SYSTEM_PROMPT, SYSTEM_PROMPT_EN
from gristmill.registry import create_op

pytestmark = pytest.mark.slow  # an HTTP server


def _op(name, srv, **params):
    return create_op(name, {"api_endpoint": srv.url + "/chat/completions", "retry_base_delay": 0.01, **params})


ROW = {"text": "Call Mr Smith at 13812345678 tomorrow, the meeting is about the budget review.", "query": "  ",
       "response": "ok", "messages": [
           {"role": "system", "content": "sys"},
           {"role": "user", "content": [{"type": "text", "text": "my key is sk-abcdefghijklmnopqrstuvwxyz"}, "plain"]},
           {"role": "assistant", "content": "noted"}]}
# Data-Juicer's PiiLlmSuspectMapper(max_chars_per_field=40, max_messages_for_prompt=2)._assemble_user_block(ROW)
ROW_BLOCK = ("### field:text\nCall Mr Smith at 1381\n…[text truncated]…\n\n### field:response\nok\n\n"
             "### field:messages_excerpt\n[user]my key is sk-abcdefghijklmnopqrstuvwxyz\nplain\n[assistant]noted")
FOUND = {"suspected": [{"field": "text", "category": "phone", "evidence": "1381"},
                       {"field": "messages_excerpt", "category": "secret", "evidence": "sk-abcdefghijklmnopqrstuvwxyz"},
                       {"field": "nowhere", "category": "x" * 200, "evidence": "e"}, "not a dict"],
         "likely_clean": False}


def _pii_answer(body, n):
    user = body["messages"][1]["content"]
    if "EMPTY" in user:
        return ""
    if "GARBLED" in user:
        return "no json, sorry"
    if "POISON" in user:
        return (400, "rejected")
    return "```json\n" + json.dumps(FOUND) + "\n```"


def test_pii_llm_suspect_mapper_messages_gate_and_result():
    rows = [dict(ROW), {"text": "hello world how are you"}, {"text": "  ", "query": None},
            {"text": "EMPTY 1234567"}, {"text": "GARBLED user@example.com"},
            {"text": "done 1234567", "__meta__": {"pii_llm_suspect": {"skipped": True}}}]
    with LLMServer(_pii_answer) as srv:
        op = _op("pii_llm_suspect_mapper", srv, max_chars_per_field=40, max_messages_for_prompt=2)
        out = op.apply(rows)
        first = next(b for b in srv.bodies if "Mr Smith" in b["messages"][1]["content"])  # concurrent: any order
        assert first == {"model": "qwen-turbo", "max_tokens": 512, "temperature": 0.1, "messages": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": "以下文本可能已部分正则脱敏。请按系统说明只输出 JSON。\n\n" + ROW_BLOCK}]}
        assert len(srv.bodies) == 1 + 2 + 1  # the empty answer asked try_num (2) times; the gated rows never
    m = [r.get("__meta__", {}) for r in out]
    assert m[0]["pii_llm_suspect"] == {
        "suspected": [{"field": "text", "category": "phone", "evidence": "1381"},
                      {"field": "messages_excerpt", "category": "secret", "evidence": "sk-abcdefghijklmnopqrstuvwxyz"},
                      {"field": "nowhere", "category": "x" * 120, "evidence": "e"}],
        "likely_clean": False, "fields_inspected": ["text", "response", "messages_excerpt"],
        "redaction_mode": "none", "redaction_applied": False}
    assert out[0]["text"] == ROW["text"]  # no redaction by default
    assert m[1]["pii_llm_suspect"] == {"skipped": True, "reason": "heuristic_gate", "fields_inspected": ["text"],
                                       "likely_clean": True}
    assert m[2]["pii_llm_suspect"] == {"skipped": True, "reason": "no_inspectable_text", "fields_inspected": []}
    assert m[3]["pii_llm_suspect"] == {"error": "empty_llm_response", "fields_inspected": ["text"]}
    assert m[4]["pii_llm_suspect"] == {"error": "json_parse_failed", "fields_inspected": ["text"]}
    assert m[4]["pii_llm_suspect_raw"] == "no json, sorry"
    assert m[5]["pii_llm_suspect"] == {"skipped": True}  # set already, not overwritten
    assert len(out) == len(rows)


def test_pii_llm_suspect_mapper_redaction_and_english():
    with LLMServer(_pii_answer) as srv:
        ev = _op("pii_llm_suspect_mapper", srv, redaction_mode="evidence", gate_mode="always",
                 preferred_output_lang="en_US").apply([json.loads(json.dumps(ROW))])
        assert srv.bodies[0]["messages"][0]["content"] == SYSTEM_PROMPT_EN
        whole = _op("pii_llm_suspect_mapper", srv, redaction_mode="whole_field", redaction_placeholder="[X]",
                    sampling_params={"temperature": 0.7}).apply([json.loads(json.dumps(ROW))])
        assert srv.bodies[-1]["temperature"] == 0.7 and srv.bodies[-1]["max_tokens"] == 512
        with pytest.raises(RequestFailed, match="HTTP 400"):
            _op("pii_llm_suspect_mapper", srv).apply([{"text": "POISON 1234567"}])
    r = ev[0]
    assert r["text"] == "Call Mr Smith at [LLM_PII_SUSPECT_REDACTED]2345678 tomorrow, the meeting is about the budget review."
    assert r["messages"][1]["content"][0]["text"] == "my key is [LLM_PII_SUSPECT_REDACTED]"
    assert r["__meta__"]["pii_llm_suspect"]["redaction_applied"] is True
    w = whole[0]
    assert w["text"] == "[X]" and w["messages"] == [{"role": "user", "content": "[X]"}] and w["response"] == "ok"


def test_pii_llm_suspect_mapper_spacy_gate(tmp_path):
    spacy = pytest.importorskip("spacy")
    nlp = spacy.blank("en")
    nlp.add_pipe("entity_ruler").add_patterns([{"label": "PERSON", "pattern": "Ada Lovelace"}])
    nlp.to_disk(tmp_path / "ner")
    with LLMServer(_pii_answer) as srv:
        op = _op("pii_llm_suspect_mapper", srv, spacy_ner_models=[str(tmp_path / "ner")])
        out = op.apply([{"text": "a note about Ada Lovelace"}, {"text": "a note about nobody at all"}])
        assert len(srv.bodies) == 1
    assert "suspected" in out[0]["__meta__"]["pii_llm_suspect"]
    assert out[1]["__meta__"]["pii_llm_suspect"]["reason"] == "heuristic_gate"
    with pytest.raises(Exception, match="python -m spacy download xx_no_such_pipeline"):
        create_op("pii_llm_suspect_mapper", {"spacy_ner_model": "xx_no_such_pipeline"})


# Data-Juicer's RelationIdentityMapper(source_entity="李莲花", target_entity="方多病"): system prompt and input
REL_SYSTEM = ("给定关于李莲花和方多病的文本信息。判断李莲花和方多病之间的关系。\n要求：\n- 关系用一个或多个词语表示，必要时可以加一个形容词来"
              "描述这段关系\n- 输出关系时不要参杂任何标点符号\n- 需要你进行合理的推理才能得出结论\n- 如果两个人物身份是同一个人，输出关系为：另一个身份\n"
              "- 输出格式为：\n分析推理：...\n所以方多病是李莲花的：...\n- 注意输出的是方多病是李莲花的什么关系，而不是李莲花是方多病的什么关系")
REL_USER = "关于李莲花和方多病的文本信息：\n```\n李莲花笑着说：“方小宝，过来。”\n```\n"


def _rel_answer(body, n):
    user = body["messages"][1]["content"]
    if "方小宝" in user:
        return "分析推理：李莲花叫他方小宝，两人一起查案。\n所以方多病是李莲花的：挚友"
    if "fallback" in user:
        return "两人关系很近。\n因此，方多病是李莲花的: 徒弟。"
    return "我不知道"


def test_relation_identity_mapper():
    rows = [{"text": "李莲花笑着说：“方小宝，过来。”"}, {"text": "fallback"}, {"text": "nothing"},
            {"text": "set", "__meta__": {"role_relation": "师父"}}]
    with LLMServer(_rel_answer) as srv:
        op = _op("relation_identity_mapper", srv, source_entity="李莲花", target_entity="方多病", try_num=2,
                 drop_text=True)
        out = op.apply(rows)
        assert next(b for b in srv.bodies if "方小宝" in b["messages"][1]["content"])["messages"] == [
            {"role": "system", "content": REL_SYSTEM},
                                             {"role": "user", "content": REL_USER}]
        assert len(srv.bodies) == 1 + 1 + 2  # the unparsable one asked try_num times; the set one not at all
        none = _op("relation_identity_mapper", srv).apply([{"text": "t"}])
        assert len(srv.bodies) == 4  # no entities: nothing asked
    assert [r["__meta__"]["role_relation"] for r in out] == ["挚友", "徒弟", "", "师父"]
    assert all("text" not in r for r in out)
    assert none[0]["__meta__"]["role_relation"] == ""


def test_text_tagging_by_prompt_mapper():
    # Data-Juicer's DEFAULT_CLASSIFICATION_PROMPT.format(text=..., tag_list=DEFAULT_CLASSIFICATION_LIST)
    want = ("\n请对下面的example文本回复的任务类别进行检测,并进行分类。\n备选的分类包括：['数学', '代码', '翻译', '角色扮演', '开放领域问答', "
            "'特定领域问答', '提取', '生成', '头脑风暴', '分类', '总结', '改写', '其他']。\n只回复对应的分类,不回复其他内容。\n"
            "example文本:\n找出方程 x2 - 3x = 0 的根。\n")
    with LLMServer(lambda body, n: "  数学\n" if "方程" in body["messages"][0]["content"] else "") as srv:
        op = _op("text_tagging_by_prompt_mapper", srv)
        out = op.apply([{"text": "找出方程 x2 - 3x = 0 的根。"}, {"text": "other"}])
        assert {"model": "Qwen/Qwen2.5-7B-Instruct", "messages": [{"role": "user", "content": want}]} in srv.bodies
        assert len(srv.bodies) == 2  # asked once each (Data-Juicer parses nothing)
        binary = _op("text_tagging_by_prompt_mapper", srv, hf_model="m", tag_list=["是", "否"],
                     prompt="{tag_list}|{text}", tag_field="ai").apply([{"text": "我是AI"}])
        assert srv.bodies[-1]["messages"][0]["content"] == "['是', '否']|我是AI"
    assert out[0]["__dj__text_tags__"] == ["数学"] and out[1]["__dj__text_tags__"] == [""]
    assert binary[0]["ai"] == [""]
