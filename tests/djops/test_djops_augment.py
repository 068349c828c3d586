"""nlpaug_en_mapper and nlpcda_zh_mapper: Data-Juicer's fan-out (methods, aug_num, sequential,
keep_original_sample) with per-row seeded draws, so the output does not depend on row order, batches or
workers. Data-Juicer itself cannot be compared text for text (it does not seed per row; its venv lacks
both libraries); the texts frozen below are those of the pinned nlpaug 1.1.11 / nlpcda 2.5.8 with seed 42."""
import json
import subprocess
import sys

import pytest
import yaml

pytest.importorskip("nlpaug")
pytest.importorskip("nlpcda")

from djops_util import run  # noqa: E402

EN = [{"id": "a", "text": "The quick brown fox jumps over the lazy dog near the old mill."},
      {"id": "b", "text": ""}, {"id": "c", "text": "Millers grind grain."}]
ZH = [{"id": "z1", "text": "这里一共有5种不同的数据增强方法，我们在磨坊里工作了3年。"}, {"id": "z2", "text": "你好"}]


def _pairs(rows):
    return [(r["id"], r["text"]) for r in rows]


def test_nlpaug_independent_methods_and_seeded_draws():
    kept, removed = run("nlpaug_en_mapper", EN, delete_random_word=True, keyboard_error_char=True, aug_num=2)
    assert not removed
    ids = [r["id"] for r in kept]
    assert ids == ["a", "a#aug0", "a#aug1", "a#aug2", "a#aug3", "b", "c", "c#aug0", "c#aug1", "c#aug2", "c#aug3"]
    assert kept[1]["text"] == "The quick brown over lazy near the mill."  # nlpaug 1.1.11, seed 42
    assert all(len(r["text"].split()) < len(EN[0]["text"].split()) for r in kept[1:3])  # word deletions
    assert all(len(r["text"]) == len(EN[0]["text"]) and r["text"] != EN[0]["text"] for r in kept[3:5])  # key errors
    again, _ = run("nlpaug_en_mapper", EN[::-1], delete_random_word=True, keyboard_error_char=True, aug_num=2)
    assert sorted(_pairs(again)) == sorted(_pairs(kept))  # same draws whatever the row order
    other, _ = run("nlpaug_en_mapper", EN, delete_random_word=True, keyboard_error_char=True, aug_num=2, seed=7)
    assert _pairs(other) != _pairs(kept)


def test_nlpaug_sequential_without_originals_reports_them_removed():
    kept, removed = run("nlpaug_en_mapper", EN, swap_random_char=True, ocr_error_char=True, sequential=True,
                        aug_num=2, keep_original_sample=False)
    assert [r["id"] for r in kept] == ["a#aug0", "a#aug1", "c#aug0", "c#aug1"]
    assert [(r["id"], r["__reason__"]) for r in removed] == [(i, "original not kept (keep_original_sample: false)")
                                                            for i in "abc"]
    kept, removed = run("nlpaug_en_mapper", EN)  # no method: unchanged
    assert _pairs(kept) == _pairs(EN) and not removed


def test_nlpcda_methods_sequential_and_short_texts():
    kept, _ = run("nlpcda_zh_mapper", ZH, replace_similar_word=True, replace_equivalent_num=True,
                  delete_random_char=True, aug_num=2)
    z1 = [r["text"] for r in kept if r["id"].startswith("z1")]
    assert len(z1) == 7 and z1[0] == ZH[0]["text"]  # original + 2 per method
    assert "这里一共有五种不同的数据增强方法，我们在磨坊里工作了3年。" in z1  # equivalent numeral (seed 42)
    assert [r["id"] for r in kept if r["id"].startswith("z2")] == ["z2"]  # too short for these methods
    seq, _ = run("nlpcda_zh_mapper", ZH, replace_homophone_char=True, swap_random_char=True, sequential=True, aug_num=2)
    assert [r["id"] for r in seq] == ["z1", "z1#aug0", "z1#aug1", "z2", "z2#aug0", "z2#aug1"]
    again, _ = run("nlpcda_zh_mapper", ZH[::-1], replace_homophone_char=True, swap_random_char=True,
                   sequential=True, aug_num=2)
    assert sorted(_pairs(again)) == sorted(_pairs(seq))


def test_np1_np2_same_bytes(tmp_path):
    """gristmill run with both augmenters: np=1 and np=2 export the same bytes."""
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in (EN + ZH) * 3), encoding="utf-8")
    outs = []
    for np_ in (1, 2):
        recipe = {"dataset_path": str(src), "export_path": str(tmp_path / f"o{np_}.jsonl"),
                  "work_dir": str(tmp_path / f"w{np_}"), "np": np_,
                  "process": [{"nlpaug_en_mapper": {"delete_random_char": True}},
                              {"nlpcda_zh_mapper": {"swap_random_char": True, "aug_num": 2}}]}
        (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe))
        res = subprocess.run([sys.executable, "-m", "gristmill.cli", "run", str(tmp_path / "r.yaml"), "--no-progress"],
                             capture_output=True, text=True, timeout=400)
        assert res.returncode == 0, res.stderr
        outs.append((tmp_path / f"o{np_}.jsonl").read_bytes())
    assert outs[0] == outs[1] and len(outs[0].splitlines()) > len(EN + ZH) * 3
