"""Fixtures of the Delta output's tests."""

from __future__ import annotations

import pytest

from tests.harness.s3 import S3Server


@pytest.fixture
def s3_env(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Server:
    """``s3_server`` with the environment an ``--out s3://`` run reads (credentials and
    endpoint)."""
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.endpoint)
    return s3_server
