import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from mm_models_util import build_clip, draw_images  # noqa: E402

pytest.importorskip("transformers")
pytest.importorskip("torch")


@pytest.fixture(scope="session")
def clip_dir(tmp_path_factory):
    return build_clip(tmp_path_factory.mktemp("models") / "tiny-clip")


@pytest.fixture(scope="session")
def images(tmp_path_factory):
    return draw_images(tmp_path_factory.mktemp("images"), 8)


@pytest.fixture(autouse=True)
def _empty_store(tmp_path, monkeypatch):
    """Every test starts with an empty model store of its own."""
    monkeypatch.setenv("GRISTMILL_MODELS", str(tmp_path / "store"))
