"""Schemathesis against the live server's /openapi.json: requests generated from the schema (a few examples per
operation) never get a 5xx. The data root is an empty directory, so no generated request can start real work.
(Driven through schemathesis' Python API with hypothesis directly: its pytest plugin breaks with new pytest.)"""
from __future__ import annotations

import pytest

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from svcutil import LiveServer  # noqa: E402

from gristmill.service.jobs import JobManager  # noqa: E402


def test_no_server_errors(tmp_path):
    from schemathesis.checks import not_a_server_error
    root = tmp_path / "st-root"
    root.mkdir()
    m = JobManager(str(tmp_path / "st-state"), [str(root)])
    try:
        with LiveServer(m) as s:
            schema = schemathesis.openapi.from_url(f"{s.url}/openapi.json")
            ops = [r.ok() for r in schema.get_all_operations()]
            assert len(ops) > 15
            for op in ops:
                @given(op.as_strategy())
                @settings(max_examples=6, deadline=None, derandomize=True, database=None,
                          suppress_health_check=list(HealthCheck))
                def check(case):
                    case.call_and_validate(checks=[not_a_server_error], timeout=60)
                check()
    finally:
        m.close()
