"""Shared fixtures: throwaway servers for live tests, and where the binlog corpus lives.

Every fixture here is session-scoped and lazy: a server starts only when a test asks for it,
so a run of unit tests starts nothing. When the server binaries are missing the tests skip with
the reason; with REPLICATOR_REQUIRE_LIVE=1 (CI sets it) that skip becomes a failure, so CI can
never go green by skipping the live tests. The Docker fixtures skip without an engine unless
REPLICATOR_REQUIRE_DOCKER=1.

The servers are shared by the whole session: a test that stops or restarts one must leave it
running, and should create its own databases rather than assume an empty server.

Markers: a test that asks for one of these fixtures gets the marker of what it starts (see
``FIXTURE_MARKERS``), and every test with none of the markers of an outside need gets ``unit``:
``pytest -m unit`` needs no program outside Python.

Hypothesis profiles: ``ci`` and ``dev`` (tests/hypothesis_budget.py).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NoReturn

import pytest
from hypothesis import settings

from tests.corpus.util import corpus_root
from tests.harness.containers import DockerServer, docker_available, start_mariadb, start_mysql84
from tests.harness.mariadb import MariaDBServer, mariadb_available, mariadbd_version
from tests.harness.mosquitto import MosquittoBroker, mosquitto_available
from tests.harness.s3 import S3Server, s3_available
from tests.hypothesis_budget import CI_EXAMPLES, DEV_EXAMPLES

REQUIRE_LIVE_ENV = "REPLICATOR_REQUIRE_LIVE"
REQUIRE_DOCKER_ENV = "REPLICATOR_REQUIRE_DOCKER"

# ../shared/binlog-corpus beside the repository, or $REPLICATOR_CORPUS_DIR (tests/corpus/util.py)
CORPUS_DIR = corpus_root()

# ci: Hypothesis's own ci profile (derandomized, no deadline, no example database, the blob
# of a failure printed) with CI_EXAMPLES a test; dev: fewer examples, random, for the inner
# loop. Hypothesis loads its ci profile itself where it sees CI (or another CI's variable).
settings.register_profile("ci", settings.get_profile("ci"), max_examples=CI_EXAMPLES)
settings.register_profile("dev", max_examples=DEV_EXAMPLES)
settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE")
    or ("ci" if settings.get_current_profile_name() == "ci" else "dev")
)

# What a test starts when it asks for one of these fixtures, as a marker.
FIXTURE_MARKERS = {
    "mariadb": "live",
    "mariadb_full_metadata": "live",
    "mosquitto": "mqtt",
    "s3_server": "s3",
    "docker_mysql84": "docker",
    "docker_mariadb": "docker",
    "spark": "spark",
}
# The markers of a need outside Python (pyproject.toml describes each); a test with none of
# them is a unit test.
OUTSIDE = frozenset({"live", "docker", "spark", "mqtt", "delta", "s3", "tools"})


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure(config: pytest.Config) -> None:
    """SIGTERM (CI's timeout, `kill`, a stopped `scripts/test.sh`) stops the run as Ctrl-C
    does: fixtures tear down and the exit hooks run, so no daemon, server or temp datadir is
    left behind (Python's default for SIGTERM is to die without either)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupted)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for fixture in FIXTURE_MARKERS.keys() & set(getattr(item, "fixturenames", ())):
            item.add_marker(FIXTURE_MARKERS[fixture])
        if not OUTSIDE & {mark.name for mark in item.iter_markers()}:
            item.add_marker("unit")


class RequiredButUnavailable(RuntimeError):
    """A program a ``REPLICATOR_REQUIRE_*=1`` run needs is missing: its tests error out (and
    so the run fails) rather than skip."""


def _unavailable(reason: str, require_env: str) -> NoReturn:
    """Skip for ``reason``; with ``require_env`` set to 1, raise RequiredButUnavailable."""
    if os.environ.get(require_env) == "1":
        raise RequiredButUnavailable(f"{reason} ({require_env}=1 forbids skipping)")
    pytest.skip(reason)


def _row_metadata_args(level: str) -> tuple[str, ...]:
    """``--binlog-row-metadata=level``; the option exists from MariaDB 10.5 (default NO_LOG)."""
    if mariadbd_version() < (10, 5):
        pytest.skip(f"--binlog-row-metadata={level} needs MariaDB 10.5+")
    return (f"--binlog-row-metadata={level}",)


def _serve_mariadb(extra_args: Sequence[str]) -> Iterator[MariaDBServer]:
    server = MariaDBServer(extra_args)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def mariadb() -> Iterator[MariaDBServer]:
    """A MariaDB server with binlog_row_metadata=MINIMAL (as MySQL's default)."""
    ok, reason = mariadb_available()
    if not ok:
        _unavailable(reason, REQUIRE_LIVE_ENV)
    yield from _serve_mariadb(_row_metadata_args("MINIMAL"))


@pytest.fixture(scope="session")
def mariadb_full_metadata() -> Iterator[MariaDBServer]:
    """A MariaDB server with binlog_row_metadata=FULL (column names, charsets, ENUM labels)."""
    ok, reason = mariadb_available()
    if not ok:
        _unavailable(reason, REQUIRE_LIVE_ENV)
    yield from _serve_mariadb(_row_metadata_args("FULL"))


@pytest.fixture(scope="session")
def mosquitto() -> Iterator[MosquittoBroker]:
    """A Mosquitto broker on a free port; a test that stop()s it must start() it again."""
    ok, reason = mosquitto_available()
    if not ok:
        _unavailable(reason, REQUIRE_LIVE_ENV)
    broker = MosquittoBroker()
    broker.start()
    try:
        yield broker
    finally:
        broker.close()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """moto's S3 API server on a free port (a real server, not a mock of the client)."""
    ok, reason = s3_available()
    if not ok:
        _unavailable(reason, REQUIRE_LIVE_ENV)
    with S3Server() as server:
        yield server


@pytest.fixture(scope="session")
def docker_mysql84() -> Iterator[DockerServer]:
    """MySQL 8.4 in Docker, GTID mode on; skips when no Docker engine is reachable."""
    ok, reason = docker_available()
    if not ok:
        _unavailable(reason, REQUIRE_DOCKER_ENV)
    server = start_mysql84()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def docker_mariadb() -> Iterator[DockerServer]:
    """MariaDB 11.4 in Docker; skips when no Docker engine is reachable."""
    ok, reason = docker_available()
    if not ok:
        _unavailable(reason, REQUIRE_DOCKER_ENV)
    server = start_mariadb()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    """The corpus of real server-written binlog files: ../shared/binlog-corpus beside the
    repository, or $REPLICATOR_CORPUS_DIR (scripts/fetch-corpus fills one)."""
    if not CORPUS_DIR.is_dir():
        pytest.skip(f"binlog corpus not found at {CORPUS_DIR} (scripts/fetch-corpus DIR)")
    return CORPUS_DIR
