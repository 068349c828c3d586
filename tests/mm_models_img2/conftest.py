import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "mm_models"))

pytest.importorskip("transformers")
pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _empty_store(tmp_path, monkeypatch):
    """Every test starts with an empty model store of its own."""
    monkeypatch.setenv("GRISTMILL_MODELS", str(tmp_path / "store"))
