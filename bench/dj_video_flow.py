"""video_motion_score_raft_filter against Data-Juicer 1.6.1's on the same videos and the same flow model, both sides
printed in one run.

Data-Juicer's filter downloads torchvision's RAFT weights; here both sides run one TorchScript "flow model" (a
seeded random convolution over the two frames, traced; nothing is downloaded): gristmill's op loads it as its
``flow_model`` export, Data-Juicer's filter gets it through its ``setup_model`` (the model returns a one-item list,
as RAFT returns its refinements) with its own transforms rebuilt without torchvision (``ToTensor``, ``Normalize(0.5,
0.5)``, the BGR→RGB flip: torchvision is not installed there either). Everything else is Data-Juicer's code: frame
sampling, seeking, resizing, magnitudes, the mean, ``relative``, the optical-flow meta. The videos are pans and
zooms over the repository's test photos (H.264, key frame every 6 frames).

    python bench/dj_video_flow.py [--dj-python PATH]

Prints per param set the stats of both sides and the largest difference of stats and flows."""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
PARAMS = [{}, {"sampling_fps": 5, "relative": True}, {"size": 48, "max_size": 80, "divisible": 4},
          {"sampling_fps": 10, "if_output_optical_flow": True, "size": [40, 56]}]

DJ_SIDE = r"""
import json, sys
import numpy as np, torch
from data_juicer.ops.filter.video_motion_score_raft_filter import VideoMotionScoreRaftFilter

model_path, videos, params, out = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4]

class Listed(torch.nn.Module):
    def __init__(self, m):
        super().__init__(); self.m = m
    def forward(self, a, b):
        return [self.m(a, b)]

def transforms(img):  # torchvision's ToTensor, Normalize(0.5, 0.5), flip(-3).unsqueeze(0)
    x = torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1))).float().div(255)
    return ((x - 0.5) / 0.5).flip(-3).unsqueeze(0)

def setup_model(self, rank=None):
    self.model, self.device, self.transforms = Listed(torch.jit.load(model_path).eval()), "cpu", transforms

VideoMotionScoreRaftFilter.setup_model = setup_model
res = []
for p in params:
    op = VideoMotionScoreRaftFilter(min_score=0, **p)
    rows = []
    for v in videos:
        s = op.compute_stats_single({"videos": [v], "__dj__stats__": {}, "__dj__meta__": {}})
        flows = s["__dj__meta__"].get("video_optical_flow")
        rows.append({"score": [float(x) for x in s["__dj__stats__"]["video_motion_score"]],
                     "flows": flows})
    res.append(rows)
json.dump(res, open(out, "w"))
"""


def make_videos(d: Path) -> list[str]:
    """Pans and zooms over test photos: 16 frames at 10 fps, 96×128, H.264 with a key frame every 6 frames."""
    import av
    from PIL import Image
    out = []
    for k, (name, mode) in enumerate([("astronaut.jpg", "pan"), ("garden.jpg", "zoom"), ("chelsea.png", "pan"),
                                      ("storm.jpg", "still")]):
        img = Image.open(REPO / "tests" / "data" / "media" / name).convert("RGB").resize((320, 240))
        path = str(d / f"{k}_{name.split('.')[0]}.mp4")
        with av.open(path, "w") as c:
            s = c.add_stream("libx264", rate=10)
            s.width, s.height, s.pix_fmt = 128, 96, "yuv420p"
            s.codec_context.gop_size = 6
            s.options = {"crf": "18", "bf": "0"}
            for i in range(16):
                if mode == "pan":
                    box = (6 * i, 4 * i, 6 * i + 192, 4 * i + 144)
                elif mode == "zoom":
                    box = (4 * i, 3 * i, 320 - 4 * i, 240 - 3 * i)
                else:
                    box = (40, 30, 232, 174)
                fr = np.asarray(img.crop(box).resize((128, 96), Image.BILINEAR))
                for p in s.encode(av.VideoFrame.from_ndarray(fr, format="rgb24")):
                    c.mux(p)
            for p in s.encode():
                c.mux(p)
        out.append(path)
    return out


def flow_model(path: Path) -> str:
    import torch

    class Flow(torch.nn.Module):
        def __init__(self):
            super().__init__()
            g = torch.Generator().manual_seed(0)
            self.conv = torch.nn.Conv2d(6, 2, 5, padding=2)
            with torch.no_grad():
                self.conv.weight.copy_(torch.randn(2, 6, 5, 5, generator=g) * 0.3)
                self.conv.bias.zero_()

        def forward(self, a, b):
            return self.conv(torch.cat([a, b - a], 1)) * 4.0

    a = torch.zeros(1, 3, 16, 16)
    torch.jit.trace(Flow().eval(), (a, a)).save(str(path))
    return str(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dj-python", default="/tmp/peers/dj/bin/python")
    args = ap.parse_args()
    from gristmill.registry import create_op
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        videos, model = make_videos(d), flow_model(d / "flow.torchscript.pt")
        out = d / "dj.json"
        res = subprocess.run([args.dj_python, "-c", DJ_SIDE, model, json.dumps(videos), json.dumps(PARAMS), str(out)],
                             capture_output=True, text=True)
        if res.returncode:
            sys.exit(f"Data-Juicer side failed:\n{res.stderr[-3000:]}")
        dj = json.loads(out.read_text())
        worst_s, worst_f = 0.0, 0.0
        for p, dj_rows in zip(PARAMS, dj):
            op = create_op("video_motion_score_raft_filter", {"min_score": 0, "flow_model": model, "device": "cpu",
                                                              **p})
            print(f"\nparams {json.dumps(p)}")
            print(f"{'video':16} {'gristmill':>12} {'Data-Juicer':>12} {'|diff|':>9} {'flows diff':>10}")
            for v, r in zip(videos, dj_rows):
                row = op.apply([{"videos": [v]}])[0]
                ours = row["__stats__"]["video_motion_score"][0]
                theirs = r["score"][0]
                diff = abs(ours - theirs)
                worst_s = max(worst_s, diff)
                fd = ""
                if p.get("if_output_optical_flow"):
                    a = np.asarray(row["__meta__"]["video_optical_flow"][0], np.float32)
                    b = np.asarray(r["flows"][0], np.float32)
                    fd = float(np.abs(a - b).max()) if a.shape == b.shape else float("inf")
                    worst_f = max(worst_f, fd)
                    fd = f"{fd:.1e}"
                print(f"{Path(v).name:16} {ours:12.6f} {theirs:12.6f} {diff:9.1e} {fd:>10}")
        print(f"\nlargest difference: stats {worst_s:.1e}, flows {worst_f:.1e} ({len(videos)} videos x "
              f"{len(PARAMS)} param sets)")


if __name__ == "__main__":
    main()
