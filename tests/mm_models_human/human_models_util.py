"""Test inputs of the human-track ops: lossless synthetic videos (a blue 'person' with a red 'face' square,
moving), and TorchScript / ONNX exports at the ops' documented interfaces: colour-box detectors, a
face-attribute model and an active-speaker model whose outputs follow from their inputs."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

RED, BLUE = (255, 0, 0), (0, 0, 255)


def person_frames(n: int = 40, w: int = 96, h: int = 64, people=((20, 1),), step: int = 2) -> list[np.ndarray]:
    """RGB frames: per person (x0, speed) a blue body 30x50 and a red face 14x14 inside it, moving right by
    ``speed`` pixel every ``step`` frames."""
    out = []
    for i in range(n):
        img = np.zeros((h, w, 3), np.uint8)
        for x0, speed in people:
            x = x0 + speed * (i // step)
            img[10:60, x:x + 30] = BLUE
            img[14:28, x + 8:x + 22] = RED
        out.append(img)
    return out


def write_video(path: Path, frames: list[np.ndarray], fps: int = 25, audio: np.ndarray | None = None) -> str:
    """A lossless video (PNG frames in a .mov), with a 16 kHz mono AAC... PCM track when ``audio`` is given."""
    import av
    h, w = frames[0].shape[:2]
    with av.open(str(path), "w") as c:
        s = c.add_stream("png", rate=fps)
        s.width, s.height, s.pix_fmt = w, h, "rgb24"
        a = None
        if audio is not None:
            a = c.add_stream("pcm_s16le", rate=16000, layout="mono")
        for f in frames:
            for p in s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
        if a is not None:
            pcm = (np.clip(audio, -1, 1) * 32767).astype(np.int16)
            for k in range(0, len(pcm), 1600):
                fr = av.AudioFrame.from_ndarray(pcm[None, k:k + 1600], format="s16", layout="mono")
                fr.sample_rate = 16000
                for p in a.encode(fr):
                    c.mux(p)
            for p in a.encode():
                c.mux(p)
    return str(path)


class ColorBoxes(torch.nn.Module):
    """Detector export: one box per connected run of columns where channel ``ch`` is high and ``other`` low
    (a box spans the rows where that happens), score 0.95: ``forward(image (1, 3, H, W) RGB 0..255) -> (N, 5)``."""

    def __init__(self, ch: int, other: int):
        super().__init__()
        self.ch, self.other = ch, other

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        m = (image[0, self.ch] > 200) & (image[0, self.other] < 60)
        cols = m.any(dim=0)
        boxes = []
        start = -1
        w = int(cols.shape[0])
        for x in range(w + 1):
            on = bool(cols[x]) if x < w else False
            if on and start < 0:
                start = x
            if not on and start >= 0:
                rows = torch.nonzero(m[:, start:x].any(dim=1)).flatten()
                boxes.append(torch.tensor([float(start), float(rows.min()), float(x), float(rows.max() + 1), 0.95]))
                start = -1
        if len(boxes) == 0:
            return torch.zeros((0, 5))
        return torch.stack(boxes)


def save_script(module: torch.nn.Module, path: Path) -> str:
    torch.jit.save(torch.jit.script(module), str(path))
    return str(path)


def face_detector(d: Path) -> str:
    return save_script(ColorBoxes(0, 2), d / "faces.ts")


def person_detector(d: Path) -> str:
    return save_script(ColorBoxes(2, 0), d / "people.ts")


class FaceAttributes(torch.nn.Module):
    """Face-attribute export: age = 100 x mean red, gender = [red, blue] means normalised (more red: Woman),
    race one-hot at index 3 (white) when the crop is mostly grey, else 0 (asian)."""

    def forward(self, faces: torch.Tensor):
        red, blue = faces[:, 0].mean(dim=(1, 2)), faces[:, 2].mean(dim=(1, 2))
        g = torch.stack([red, blue], dim=1) + 1e-6
        grey = (faces[:, 1].mean(dim=(1, 2)) > 0.3).float()
        race = torch.zeros((faces.shape[0], 6))
        race[:, 3] = grey
        race[:, 0] = 1 - grey
        return red * 100, g / g.sum(dim=1, keepdim=True), race


class LoudnessASD(torch.nn.Module):
    """Active-speaker export: the score of video frame t is the log energy (c0) of audio frame 4t, minus 10:
    positive where the track's audio is loud. ``forward(audio (1, 4T, 13), video (1, T, 112, 112)) -> (T,)``."""

    def forward(self, audio: torch.Tensor, video: torch.Tensor) -> torch.Tensor:
        t = video.shape[1]
        return audio[0, 0:4 * t:4, 0] - 10.0


class NamedColorBoxes(torch.nn.Module):
    """Open-vocabulary detector export: for each class whose name says 'red' or 'blue', the box of that colour's
    pixels, score 0.9 (0.8 for a second, smaller copy of the same box): ``forward(image (1, 3, H, W) RGB 0..255,
    classes: List[str]) -> (N, 6)``."""

    def forward(self, image: torch.Tensor, classes: list[str]) -> torch.Tensor:
        out = []
        for i, name in enumerate(classes):
            ch = 0 if "red" in name else (2 if "blue" in name else -1)
            if ch < 0:
                continue
            m = (image[0, ch] > 200) & (image[0, 2 - ch] < 60)
            if bool(m.any()):
                yx = torch.nonzero(m)
                y0, x0 = float(yx[:, 0].min()), float(yx[:, 1].min())
                y1, x1 = float(yx[:, 0].max() + 1), float(yx[:, 1].max() + 1)
                out.append(torch.tensor([x0 + 1, y0 + 1, x1 - 1, y1 - 1, 0.8, float(i)]))
                out.append(torch.tensor([x0, y0, x1, y1, 0.9, float(i)]))
        if len(out) == 0:
            return torch.zeros((0, 6))
        return torch.stack(out)


def two_things(path: Path) -> str:
    """A 64x48 PNG: a red square (8..24, 8..24) and a blue bar (x 36..60, y 20..44)."""
    from PIL import Image
    img = np.zeros((48, 64, 3), np.uint8)
    img[8:24, 8:24] = RED
    img[20:44, 36:60] = BLUE
    Image.fromarray(img).save(path)
    return str(path)
