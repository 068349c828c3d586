"""usage_counter_mapper against Data-Juicer 1.6.1: DJ_META was produced by DJ's op on ROWS (OpenAI usage
mirrored in a choice, Anthropic-style input/output tokens, usage_metadata, deltas, nothing at all)."""

import pytest

from djops_util import fused, run

ROWS = [
    {"text": "q1", "usage": {"prompt_tokens": 12, "completion_tokens": 30, "total_tokens": 42},
     "choices": [{"message": {"role": "assistant", "content": "Hi"},
                  "usage": {"prompt_tokens": 12, "completion_tokens": 30, "total_tokens": 42}}],
     "response_metadata": None},
    {"text": "q2", "usage": None,
     "choices": [{"message": {"content": "a", "usage": {"input_tokens": 7, "output_tokens": 3}}},
                 {"delta": {"prompt_tokens": 1, "completion_tokens": 2}}],
     "response_metadata": {"usage": {"prompt_tokens": 5, "completion_tokens": 0}}},
    {"text": "q3", "usage": {"prompt_tokens": 0, "input_tokens": 9, "output_tokens": 4}, "choices": [],
     "response_metadata": {"usage_metadata": {"input_tokens": 9, "output_tokens": 4, "total_tokens": 13}}},
    {"text": "", "usage": None, "choices": None, "response_metadata": None},
]
KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")
DJ_META = {  # from Data-Juicer 1.6.1
    True: [(12, 30, 42), (13, 5, 18), (9, 4, 13), (0, 0, None)],
    False: [(24, 60, 42), (13, 5, 18), (18, 8, 13), (0, 0, None)],
}


@pytest.mark.parametrize("dedupe", [True, False])
def test_same_usage_as_data_juicer(dedupe):
    kept, removed = run("usage_counter_mapper", ROWS, dedupe_identical_usage=dedupe)
    assert not removed
    assert [tuple(r["__meta__"][k] for k in KEYS) for r in kept] == DJ_META[dedupe]
    assert [r["choices"] for r in kept] == [r["choices"] for r in ROWS]  # inputs untouched


def test_rows_without_the_fields_and_custom_keys():
    kept, _ = run("usage_counter_mapper", [{"text": "a"}, {"text": "b"}])
    assert [tuple(r["__meta__"][k] for k in KEYS) for r in kept] == [(0, 0, None)] * 2
    kept, _ = run("usage_counter_mapper", [{"text": "x", "u": {"prompt_tokens": 2, "completion_tokens": 1, "total_tokens": 3}}],
                  usage_key="u")
    assert tuple(kept[0]["__meta__"][k] for k in KEYS) == (2, 1, 3)


def test_non_numeric_counts_reject_the_row():
    rows = [{"text": "a", "usage": {"prompt_tokens": "many", "completion_tokens": 1}},
            {"text": "b", "usage": {"prompt_tokens": 4, "completion_tokens": 1}}]
    kept, _, rejects = fused("usage_counter_mapper", rows)
    assert [r["__meta__"]["prompt_tokens"] for r in kept] == [4] and len(rejects) == 1
