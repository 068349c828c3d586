"""generate_qa_from_examples_mapper against the local server: Data-Juicer's messages built from the seed
file's examples, its fields, the ROUGE-L similarity drop, a deterministic draw."""
from __future__ import annotations

import json

import pytest
from llm_server import LLMServer

from gristmill.ops.llm.generate_qa_examples import SYSTEM_PROMPT, rouge_l_f
from gristmill.registry import create_op

pytestmark = pytest.mark.slow  # an HTTP server

SEEDS = [[("What is 2+2?", "4.")], [("Name a colour.", "Blue."), ("Another?", "Red.")],
         [("Capital of France?", "Paris.")]]


def _seed_file(tmp_path):
    p = tmp_path / "seeds.jsonl"
    with open(p, "w") as f:
        for pairs in SEEDS:
            msgs = [{"role": "system", "content": "be brief"}]
            for q, a in pairs:
                msgs += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
            f.write(json.dumps({"messages": msgs}) + "\n")
        f.write(json.dumps({"messages": [{"role": "user", "content": "no answer"}]}) + "\n")  # no pair: skipped
    return str(p)


def test_generate_qa_from_examples_mapper(tmp_path):
    def answer(body, n):
        user = body["messages"][1]["content"]
        if user.startswith("\n如下是一条示例数据：\n【问题】\nWhat is 2+2?"):  # copies the first example shown
            return "【问题】\nWhat is 2+2?\n【回答】\n4."
        return "【问题】Why is the sky blue? 【回答】Rayleigh scattering. 【问题】And sunsets? 【回答】Longer paths."

    with LLMServer(answer) as srv:
        op = create_op("generate_qa_from_examples_mapper", {
            "api_endpoint": srv.url + "/chat/completions", "seed_file": _seed_file(tmp_path), "example_num": 2})
        rows = [{"text": ""} for _ in range(12)]
        out = op.apply(rows)
        asked = len(srv.bodies)
        again = op.apply(rows)
        assert len(srv.bodies) == asked  # the rerun draws the same examples: every answer from the cache
        draws = op.draw(rows)
        users = {op.build_input(ex) for ex in draws}
        assert 1 < len(users) == asked  # identical rows, different draws; one request per distinct message
        for body in srv.bodies:
            system, user = body["messages"]
            assert system == {"role": "system", "content": SYSTEM_PROMPT} and body["model"] == "Qwen/Qwen2.5-7B-Instruct"
            assert user["role"] == "user" and user["content"] in users
        assert op.build_input([SEEDS[1], SEEDS[0]]) == (
            "\n如下是一条示例数据：\n【问题】\nName a colour.\n【回答】\nBlue.\n【问题】\nAnother?\n【回答】\nRed.\n"
            "\n如下是一条示例数据：\n【问题】\nWhat is 2+2?\n【回答】\n4.\n")
    assert out == again
    for row, ex in zip(out, draws):
        if ex[0] == SEEDS[0]:  # the answer copies an example shown: too similar, dropped to empty fields
            assert row == {"text": "", "query": "", "response": "", "history": []}
        else:
            assert row["query"] == "And sunsets?" and row["response"] == "Longer paths."
            assert row["history"] == [["Why is the sky blue?", "Rayleigh scattering."]]
    assert any(ex[0] == SEEDS[0] for ex in draws) and any(ex[0] != SEEDS[0] for ex in draws)


def test_generate_qa_from_examples_needs_seed_file(tmp_path):
    with pytest.raises(ValueError, match="seed_file is required"):
        create_op("generate_qa_from_examples_mapper", {})


def test_rouge_l_f_values():
    # the rouge package's numbers (rouge==1.0.1, Rouge().get_scores(h, r)[0]["rouge-l"]["f"])
    assert rouge_l_f("a b c d\n", "a b c d\n") == pytest.approx(1.0, abs=1e-7)
    assert rouge_l_f("the cat sat. on the mat\n", "the cat ran. off the mat\n") == pytest.approx(0.5999999950000001)
    assert rouge_l_f("x y\n", "z w\n") == 0.0
