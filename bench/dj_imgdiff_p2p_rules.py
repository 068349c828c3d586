"""The rule parts of Img-Diff and Prompt-to-Prompt against Data-Juicer 1.6.1's own functions, on random cases:
the area generator's overlap filter (``iou_filter``), Prompt-to-Prompt's token alignment (``get_refinement_mapper``)
and its word weights over the steps (``get_time_words_attention_alpha``, Data-Juicer's ``confetti`` edit).
The models around them are not compared (Data-Juicer downloads them); tests/mm_models_img2 runs the ops.

    python bench/dj_imgdiff_p2p_rules.py [--dj-python /tmp/peers/dj/bin/python] [--cases 300]

Prints, per function, the cases compared and how many agree exactly."""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gristmill.ops.image.model_imgdiff import overlap_filter  # noqa: E402
from gristmill.ops.image.model_p2p import cross_alpha, refinement_mapper  # noqa: E402

WORDS = "a the cat dog red blue confetti on mat box party with and of".split()
TOKENIZER = '''
class Tok:
    """word-level: start 0, end 1, a word's id its index + 2 in WORDS"""
    def encode(self, text):
        return [0] + [WORDS.index(w) + 2 for w in text.split(" ")] + [1]
    def decode(self, ids):
        return " ".join("<s>" if i == 0 else "</s>" if i == 1 else WORDS[i - 2] for i in ids)
'''
DJ = '''
import json, sys
import numpy as np
WORDS = %r
%s
from data_juicer.ops.mapper.imgdiff_difference_area_generator_mapper import iou_filter
from data_juicer.ops.common.prompt2prompt_pipeline import get_refinement_mapper, get_time_words_attention_alpha
cases = json.load(open(sys.argv[1]))
out = {"iou": [iou_filter(np.array(b, np.float32), 0.5).tolist() for b in cases["boxes"]],
       "mapper": [], "alpha": []}
for a, b in cases["prompts"]:
    m, al = get_refinement_mapper([a, b], Tok(), 77)
    out["mapper"].append([m[0].tolist(), al[0].tolist()])
    t = get_time_words_attention_alpha([a, b], cases["steps"], {"default_": 1.0, "confetti": 0.8}, Tok())
    out["alpha"].append(t.reshape(cases["steps"] + 1, 77).tolist())
json.dump(out, sys.stdout)
''' % (WORDS, TOKENIZER)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dj-python", default="/tmp/peers/dj/bin/python")
    ap.add_argument("--cases", type=int, default=300)
    args = ap.parse_args()
    rs = np.random.RandomState(0)
    boxes = []
    for _ in range(args.cases):
        n = rs.randint(1, 12)
        xy = rs.uniform(10, 90, (n, 2))
        wh = rs.uniform(2, 40, (n, 2))
        boxes.append(np.round(np.concatenate([xy, wh], 1), 1).tolist())
    prompts = [(" ".join(rs.choice(WORDS, rs.randint(1, 9))), " ".join(rs.choice(WORDS, rs.randint(1, 9))))
               for _ in range(args.cases)]
    cases = {"boxes": boxes, "prompts": prompts, "steps": 10}
    tmp = Path("/tmp/dj_imgdiff_p2p_cases.json")
    tmp.write_text(json.dumps(cases))
    res = subprocess.run([args.dj_python, "-c", DJ, str(tmp)], capture_output=True, text=True, check=True)
    dj = json.loads(res.stdout)
    ns: dict = {"WORDS": WORDS}
    exec(TOKENIZER, ns)
    tok = ns["Tok"]()
    same_iou = sum(np.allclose(overlap_filter(np.array(b, np.float32)), np.array(d, np.float32).reshape(-1, 4))
                   for b, d in zip(boxes, dj["iou"]))
    same_map = same_alpha = 0
    for (a, b), (m, al), t in zip(prompts, dj["mapper"], dj["alpha"]):
        mm, aa = refinement_mapper(tok.encode(a), tok.encode(b), 77)
        same_map += mm.tolist() == m and aa.tolist() == al
        same_alpha += cross_alpha(b, 10, {"default_": 1.0, "confetti": 0.8}, tok, 77).tolist() == t
    print(f"iou_filter (area generator's overlap filter): {same_iou}/{len(boxes)} box sets identical")
    print(f"get_refinement_mapper (token alignment): {same_map}/{len(prompts)} prompt pairs identical")
    print(f"get_time_words_attention_alpha (word weights): {same_alpha}/{len(prompts)} prompt pairs identical")


if __name__ == "__main__":
    main()
