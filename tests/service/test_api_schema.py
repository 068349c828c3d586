"""Schemathesis against the live server's /openapi.json: requests generated from the schema (a few examples per
operation) never get a 5xx. The data root is an empty directory, so no generated request can start real work."""
from __future__ import annotations

import pytest

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, settings  # noqa: E402
from svcutil import LiveServer  # noqa: E402

from gristmill.service.jobs import JobManager  # noqa: E402


@pytest.fixture(scope="module")
def st_schema(tmp_path_factory):
    root = tmp_path_factory.mktemp("st-root")
    m = JobManager(str(tmp_path_factory.mktemp("st-state")), [str(root)])
    with LiveServer(m) as s:
        yield schemathesis.openapi.from_url(f"{s.url}/openapi.json")
    m.close()


schema = schemathesis.pytest.from_fixture("st_schema")


@schema.parametrize()
@settings(max_examples=6, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
def test_no_server_errors(case):
    from schemathesis.checks import not_a_server_error
    case.call_and_validate(checks=[not_a_server_error], timeout=60)
