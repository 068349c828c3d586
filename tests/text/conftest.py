import pytest
from gm_textops import run


@pytest.fixture
def op_run():
    return run
