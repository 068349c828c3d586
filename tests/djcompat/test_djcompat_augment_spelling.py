"""nlpaug_en_mapper with spelling_error_word draws the same misspellings in every process. nlpaug's spelling
model dedups each word's candidates through a set, so their order followed PYTHONHASHSEED and a seeded row
got different texts from run to run (and worker to worker). gristmill sorts the candidates. DJ below:
Data-Juicer 1.6.1's NlpaugEnMapper on the same rows, with the same per-row seeds and its spelling
candidates sorted the same way (bench/dj_nlp_compare.py), under PYTHONHASHSEED 5 and 6 (the same texts)."""
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("nlpaug")

ROWS = [{"id": "doc-1", "text": "Please install the package and restart the service before continuing."},
        {"id": "doc-2", "text": "The committee received their recommendations on Wednesday afternoon."}]
DJ = ["Please install the package and restart the service before continuing.",
      "FLEASE install teh package ens restart tho service before continuing.",
      "Please install thi pacakge and restart the severice before continueing.",
      "The committee received their recommendations on Wednesday afternoon.",
      "The comitee resive theres recommendations on Wednesday afternoon.",
      "The committee received their recommendations or Wednesnay afrernoon."]

SCRIPT = """
import json, sys
from gristmill.registry import create_op
op = create_op("nlpaug_en_mapper", {"spelling_error_word": True, "aug_num": 2})
print(json.dumps([[r["id"], r["text"]] for r in op.apply(json.loads(sys.argv[1]))]))
"""


def _run(hashseed: str) -> list:
    env = dict(os.environ, PYTHONHASHSEED=hashseed)
    res = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(ROWS)], env=env, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_same_misspellings_whatever_the_hash_seed_and_as_data_juicer():
    a, b = _run("1"), _run("2")
    assert a == b
    assert [t for _, t in a] == DJ
    assert [i for i, _ in a] == ["doc-1", "doc-1#aug0", "doc-1#aug1", "doc-2", "doc-2#aug0", "doc-2#aug1"]
