"""The embedded server package without a server: its errors, hints and small helpers."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from replicator.embedded import EmbeddedServerError, MariaDBServer, TableCounts, WorkloadStats
from replicator.embedded import demo as demo_module
from replicator.embedded import mariadb as mariadb_module
from replicator.embedded.workload import Workload, _time_text
from replicator.errors import ConfigError, ReplicatorError
from tests.harness import HarnessError


def test_the_harness_error_is_the_package_error() -> None:
    assert HarnessError is EmbeddedServerError
    assert issubclass(EmbeddedServerError, ReplicatorError)
    assert EmbeddedServerError("x").exit_code == 1


def test_missing_binaries_say_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(mariadb_module, "find_executable", lambda name: None)
    monkeypatch.setattr(demo_module, "mariadb_available", mariadb_module.mariadb_available)

    with pytest.raises(EmbeddedServerError) as server_error:
        MariaDBServer().start()
    with pytest.raises(EmbeddedServerError) as demo_error:
        demo_module.start_demo(tmp_path / "landing")

    assert "mariadbd" in str(server_error.value)
    assert "apt-get install mariadb-server-core mariadb-client-core" in server_error.value.hint
    assert "apt-get install mariadb-server-core mariadb-client-core" in demo_error.value.hint
    assert "--config" in demo_error.value.hint
    assert not (tmp_path / ".replicator-demo").exists()


def test_a_datadir_we_did_not_make_is_refused_not_overwritten(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(mariadb_module, "mariadb_available", lambda: (True, ""))
    foreign = tmp_path / "server" / "data"
    foreign.mkdir(parents=True)
    (foreign / "ibdata1").write_bytes(b"precious")
    server = MariaDBServer(base_dir=tmp_path / "server")

    assert not server.has_datadir
    with pytest.raises(EmbeddedServerError, match="not set up by replicator") as refused:
        server.start()

    assert "remove" in refused.value.hint
    assert (foreign / "ibdata1").read_bytes() == b"precious"
    assert not server.is_running


def test_default_demo_server_dir_is_next_to_the_landing_zone(tmp_path: Path) -> None:
    assert demo_module.default_server_dir(tmp_path / "landing") == tmp_path / ".replicator-demo"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (dt.timedelta(0), "00:00:00"),
        (dt.timedelta(hours=-2, minutes=-30), "-02:30:00"),
        (dt.timedelta(hours=199, minutes=59, seconds=1, milliseconds=250), "199:59:01.250000"),
        (-dt.timedelta(hours=838, minutes=59, seconds=59), "-838:59:59"),
    ],
)
def test_time_literals_keep_sign_and_long_hours(value: dt.timedelta, text: str) -> None:
    assert _time_text(value) == text


def test_workload_rejects_a_database_name_it_would_have_to_quote() -> None:
    with pytest.raises(ConfigError):
        Workload(lambda: None, database="shop`; DROP")
    with pytest.raises(ConfigError):
        Workload(lambda: None, rate=0)


def test_stats_arithmetic() -> None:
    counts = TableCounts(initial=10, inserted=5, updated=7, deleted=3)
    stats = WorkloadStats(transactions=4, rolled_back=1, ddl=2, tables={"t": counts})

    assert counts.expected_rows == 12
    assert counts.changed == 15
    assert stats.rows_changed == 15
    assert stats.binlog_transactions == 6
