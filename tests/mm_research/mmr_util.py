"""Helpers of the research-model op tests: tiny exports saved by the tests, frames written as PNG files."""
from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import torch


def script(module: torch.nn.Module, path: Path) -> str:
    torch.jit.script(module).save(str(path))
    return str(path)


def png_frames(d: Path, colours_bgr: list, w: int = 40, h: int = 30, name: str = "f") -> list[str]:
    """Uniform frames (one BGR colour each) as lossless PNG files."""
    d.mkdir(parents=True, exist_ok=True)
    out = []
    for i, c in enumerate(colours_bgr):
        p = d / f"{name}{i}.png"
        cv2.imwrite(str(p), np.full((h, w, 3), c, np.uint8))
        out.append(str(p))
    return out


def close(a, b, rel: float = 1e-5) -> None:
    """Nested lists equal within ``rel``."""
    np.testing.assert_allclose(np.array(a, np.float64), np.array(b, np.float64), rtol=rel, atol=1e-9)
