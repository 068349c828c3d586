import gzip
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from gm_testutil import SAMPLE  # noqa: E402


@pytest.fixture(scope="session")
def sample_rows():
    with gzip.open(SAMPLE, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]
