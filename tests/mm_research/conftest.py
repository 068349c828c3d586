import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "mm_models"))

pytest.importorskip("torch")
pytest.importorskip("cv2")


@pytest.fixture(autouse=True)
def _empty_store(tmp_path, monkeypatch):
    """Every test starts with an empty model store of its own."""
    monkeypatch.setenv("GRISTMILL_MODELS", str(tmp_path / "store"))
