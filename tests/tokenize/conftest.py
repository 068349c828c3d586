"""Fixtures for the tokenize tests (helpers live in tokhelpers.py, a name no other test folder uses)."""
from __future__ import annotations

import pytest
from tokhelpers import make_docs, train_tokenizer, write_jsonl


@pytest.fixture(scope="session", autouse=True)
def _tokenizer_cache(tmp_path_factory):
    """Keep the fast-path conversion cache of these tests out of the user's ~/.cache."""
    mp = pytest.MonkeyPatch()
    mp.setenv("GRISTMILL_CACHE", str(tmp_path_factory.mktemp("gm-cache")))
    yield
    mp.undo()


@pytest.fixture(scope="session")
def tok_json(tmp_path_factory) -> str:
    d = tmp_path_factory.mktemp("tok")
    path = str(d / "tokenizer.json")
    train_tokenizer().save(path)
    return path


@pytest.fixture
def corpus(tmp_path) -> str:
    d = tmp_path / "in"
    d.mkdir()
    for k in range(3):
        write_jsonl(str(d / f"part-{k}.jsonl"), make_docs(40 + 10 * k, seed=k))
    return str(d)
