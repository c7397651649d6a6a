"""For the live tests that start servers of their own, beside the session's shared ones
(tests/conftest.py): ``own_server`` starts one, ``server_a`` is one for a test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import REQUIRE_LIVE_ENV, _unavailable
from tests.harness.mariadb import MariaDBServer, mariadb_available


def own_server(*extra: str) -> MariaDBServer:
    """A throwaway MariaDB of this test's own (row metadata FULL), started; ``extra``: more
    server options. Skipped (or, with REPLICATOR_REQUIRE_LIVE=1, failed) without MariaDB."""
    ok, reason = mariadb_available()
    if not ok:
        _unavailable(reason, REQUIRE_LIVE_ENV)
    return MariaDBServer(("--binlog-row-metadata=FULL", *extra)).start()


@pytest.fixture
def server_a() -> Iterator[MariaDBServer]:
    server = own_server()
    try:
        yield server
    finally:
        server.stop()
