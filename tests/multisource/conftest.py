"""Fixtures of the multi-source tests (helpers in ms_util.py, a name no other test folder uses)."""
import pytest


@pytest.fixture(scope="session", autouse=True)
def _tokenizer_cache(tmp_path_factory):
    """Keep the tokenizer conversion cache of these tests out of the user's ~/.cache."""
    mp = pytest.MonkeyPatch()
    mp.setenv("GRISTMILL_CACHE", str(tmp_path_factory.mktemp("gm-cache")))
    yield
    mp.undo()
