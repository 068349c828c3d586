"""A recipe of the local-model text ops runs end to end (gristmill run) with tiny models from the model store:
every row accounted for, the same bytes with 1 and 2 workers."""
import json
import os
import subprocess
import sys

import yaml

from gm_testutil import REPO, check_accounting
from mm_models_util import build_clip
from text_models_util import build_bert_classifier, build_causal_lm


def test_recipe_with_store_models(tmp_path):
    from gristmill.models import add_hf_dir  # into the test's own store (conftest sets $GRISTMILL_MODELS)
    add_hf_dir("tiny/clip", str(build_clip(tmp_path / "clip")))
    add_hf_dir("tiny/cls", str(build_bert_classifier(tmp_path / "cls", ["negative", "positive"])))
    add_hf_dir("tiny/lm", str(build_causal_lm(tmp_path / "lm")))
    words = "the cat dog sat ran on mat fast slow red blue good bad book".split()
    rows = [{"id": i, "query": " ".join(words[(i * 3 + k) % len(words)] for k in range(4)),
             "text": " ".join(words[(i * 5 + k) % len(words)] for k in range(6))} for i in range(24)]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    outs = []
    for np_ in (1, 2):
        recipe = {"dataset_path": str(tmp_path / "in.jsonl"), "export_path": str(tmp_path / f"out{np_}.jsonl"),
                  "work_dir": str(tmp_path / f"work{np_}"), "np": np_, "keep_stats_in_res_ds": True,
                  "process": [{"query_sentiment_detection_mapper": {"hf_model": "tiny/cls", "zh_to_en_hf_model": None}},
                              {"text_pair_similarity_filter": {"hf_clip": "tiny/clip", "text_key_second": "query",
                                                               "min_score": 0.5}},
                              {"instruction_following_difficulty_filter": {"hf_model": "tiny/lm",
                                                                           "query_template": "{query}",
                                                                           "min_score": 0.0, "max_score": 1.0}}]}
        p = tmp_path / f"r{np_}.yaml"
        p.write_text(yaml.safe_dump(recipe))
        res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(p), "--no-progress"],
                             capture_output=True, text=True, env=dict(os.environ), timeout=600, cwd=REPO)
        assert res.returncode == 0, res.stderr
        check_accounting(json.loads((tmp_path / f"work{np_}" / "report.json").read_text()))
        outs.append((tmp_path / f"out{np_}.jsonl").read_bytes())
    assert outs[0] == outs[1]
    out = [json.loads(x) for x in outs[0].decode().splitlines()]
    assert 0 < len(out) < len(rows)
    for r in out:
        assert r["__meta__"]["query_sentiment_label"] in ("negative", "positive")
        assert 0.5 <= r["__stats__"]["text_pair_similarity"][0] <= 1.0 and 0.0 <= r["__stats__"]["ifd_score"] <= 1.0
