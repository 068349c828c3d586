"""The model store at a URL (``GRISTMILL_MODELS=s3://…``; memory:// here): a model is downloaded into the local
cache the first time it is resolved (from that URL only), ``models add`` uploads, the listing is the URL's, and
a model the URL lacks is a one-line ModelMissing naming the URL."""
from __future__ import annotations

import uuid

import fsspec
import pytest

from gristmill import models


@pytest.fixture
def store(tmp_path, monkeypatch):
    root = f"gmmod{uuid.uuid4().hex[:10]}"
    monkeypatch.setenv("GRISTMILL_MODELS", f"memory://{root}/models")
    monkeypatch.setenv("GRISTMILL_STAGING", str(tmp_path / "staging"))
    m = fsspec.filesystem("memory")
    yield m, f"/{root}/models"
    if m.exists(f"/{root}"):
        m.rm(f"/{root}", recursive=True)


def test_a_model_is_downloaded_to_the_local_cache_on_first_use(store, tmp_path):
    m, root = store
    m.pipe(f"{root}/lid.176.bin", b"fasttext bytes")
    m.pipe(f"{root}/en.arpa", b"\\data\\\n")
    p = models.resolve("lid.176.bin")
    assert p.startswith(str(tmp_path / "staging")) and open(p, "rb").read() == b"fasttext bytes"
    m.rm(f"{root}/lid.176.bin")  # cached: no second download
    assert models.resolve("lid.176.bin") == p
    assert open(models.resolve("en.arpa.bin"), "rb").read() == b"\\data\\\n"  # .arpa.bin falls back to .arpa
    with pytest.raises(models.ModelMissing) as e:
        models.resolve("de.sp.model")
    assert f"memory:/{root}" in str(e.value) and "\n" not in str(e.value)


def test_add_uploads_and_listing_is_the_urls(store, tmp_path):
    m, root = store
    src = tmp_path / "m.bin"
    src.write_bytes(b"kenlm")
    models.add("zh.arpa.bin", str(src))
    assert m.cat_file(f"{root}/zh.arpa.bin") == b"kenlm"
    d = tmp_path / "clip"
    d.mkdir()
    (d / "config.json").write_text("{}")
    (d / "model.safetensors").write_bytes(b"w" * 10)
    models.add("openai/clip-mini", str(d))
    assert m.cat_file(f"{root}/openai/clip-mini/model.safetensors") == b"w" * 10
    assert dict(models.listing()) == {"zh.arpa.bin": 5, "openai/clip-mini": 12}
    # another machine (an empty cache) gets the directory from the URL
    import shutil
    shutil.rmtree(tmp_path / "staging")
    got = models.find("openai/clip-mini")
    assert got is not None and (got / "model.safetensors").read_bytes() == b"w" * 10
