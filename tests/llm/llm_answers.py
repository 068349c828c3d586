"""Deterministic answers of the test server for the scoring filters: each dimension's score is a function
of the user message (so a test knows every row's expected score), and some rows first get an answer that
cannot be parsed (then a good one: Data-Juicer's try loop asks again)."""
from __future__ import annotations

import hashlib
import json
import re

_DIMS = re.compile(r'"dimension_scores": \{\s*((?:"\w+":\s*,?\s*)+)\}')


def dims_of(system_prompt: str) -> list[str]:
    m = _DIMS.search(system_prompt)
    return re.findall(r'"(\w+)"', m.group(1)) if m else []


def dim_scores(user: str, dims: list[str]) -> dict:
    h = hashlib.blake2b(user.encode(), digest_size=16).digest()
    return {d: 1 + h[i] % 5 for i, d in enumerate(dims)}


def expected_score(user: str, dims: list[str]) -> float:
    s = dim_scores(user, dims)
    return float(sum(s.values())) / len(dims) / 5


def garbled_first(user: str) -> bool:
    return hashlib.blake2b(user.encode(), digest_size=4).digest()[3] % 7 == 0


def scoring_answer(body: dict, times_asked: int) -> str:
    system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
    if times_asked == 0 and garbled_first(user):
        return "I am not able to rate this sample right now."
    dims = dims_of(system)
    return "```json\n" + json.dumps({"dimension_scores": dim_scores(user, dims), "flags": [],
                                     "tags": {"topic": "test"}, "rationale": "derived from the text",
                                     "recommendation": "keep"}, indent=2) + "\n```"
