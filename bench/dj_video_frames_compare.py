"""Compare video_extract_frames_mapper's ``duration > 0`` frame choice with Data-Juicer 1.6.1's.

Makes the grey-ramp videos of ``tests/video/test_video_extract_segments.py`` (each frame its own luma),
runs Data-Juicer's op in its venv (``DJ_PYTHON``, default ``/tmp/peers/dj/bin/python``) with bytes output,
maps each of its frames (decoded from its lossy re-encode of the segment) to the source frame of the
nearest luma, and prints that next to gristmill's picks. ``python bench/dj_video_frames_compare.py``."""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
DJ_PYTHON = os.environ.get("DJ_PYTHON", "/tmp/peers/dj/bin/python")
VIDEOS = {"v10": (10, 3.5, 8, 6, None), "v25": (25, 2.3, 12, 3.5, 3)}  # rate, seconds, GOP, luma step, B frames
CASES = [("uniform", 3, 1), ("uniform", 1, 0.5), ("uniform", 2, 0.7), ("uniform", 5, 0.33), ("uniform", 4, 0.25),
         ("uniform", 7, 0.9), ("uniform", 3, 5), ("all_keyframes", 3, 1), ("all_keyframes", 3, 0.45)]
DJ_SCRIPT = """
import io, json, sys
import numpy as np
from PIL import Image
from data_juicer.ops.mapper.video_extract_frames_mapper import VideoExtractFramesMapper
video, method, num, dur = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
op = VideoExtractFramesMapper(frame_sampling_method=method, frame_num=num, duration=dur, output_format="bytes",
                              legacy_split_by_text_token=False, video_backend="av")
s = op.process_single({"text": "x", "videos": [video]})
print(json.dumps([float(np.asarray(Image.open(io.BytesIO(b)).convert("L"), float).mean()) for b in s[op.frame_field][0]]))
"""


def make(path, rate, seconds, gop, step, bframes):
    args = ["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i",
            f"color=black:s=64x48:r={rate}:d={seconds},geq=lum='20+N*{step}':cb=128:cr=128",
            "-c:v", "libx264", "-g", str(gop), "-sc_threshold", "0", "-pix_fmt", "yuv420p"]
    subprocess.run([*args, *(["-bf", str(bframes)] if bframes is not None else []), path], check=True)


def main():
    from gristmill.ops.video.frames import sampled_frames
    with tempfile.TemporaryDirectory() as d:
        same = total = 0
        for name, spec in VIDEOS.items():
            path = os.path.join(d, name + ".mp4")
            make(path, *spec)
            step = spec[3]
            for method, num, dur in CASES:
                res = subprocess.run([DJ_PYTHON, "-c", DJ_SCRIPT, path, method, str(num), str(dur)],
                                     capture_output=True, text=True, check=True)
                dj = [round(((v * 219 / 255 + 16) - 20) / step) for v in json.loads(res.stdout.strip().splitlines()[-1])]
                ours = [round(((float(np.asarray(f.to_image().convert("L"), float).mean()) * 219 / 255 + 16) - 20) / step)
                        for f in sampled_frames(path, method, num, dur)]
                total += 1
                same += dj == ours
                print(f"{name} {method:14s} frame_num={num} duration={dur}: {'same' if dj == ours else 'DIFFERENT'}"
                      f"\n  Data-Juicer {dj}\n  gristmill   {ours}")
        print(f"{same}/{total} cases pick the same source frames")


if __name__ == "__main__":
    main()
