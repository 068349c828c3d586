import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from svcutil import basic_recipe, cli_export, make_data_root, slow_recipe  # noqa: E402


@pytest.fixture(scope="session")
def svc_root(tmp_path_factory):
    """A data root holding the bundled sample (data/cc-sample.jsonl.gz) and its rows in six files (data/parts)."""
    return make_data_root(tmp_path_factory.mktemp("svc-root"))


@pytest.fixture(scope="session")
def cli_reference(svc_root, tmp_path_factory):
    """``get("basic" | "slow")``: the export bytes of that recipe run by `gristmill run` (made once)."""
    cache = {}

    def get(name):
        if name not in cache:
            recipe = basic_recipe() if name == "basic" else slow_recipe(per_row=0.0)
            cache[name] = cli_export(recipe, svc_root, tmp_path_factory.mktemp(f"cli-{name}"))
        return cache[name]
    return get


@pytest.fixture()
def client(server):
    """An HTTP client of the module's ``server`` fixture (a LiveServer); a module may override it."""
    with server.client() as c:
        yield c
