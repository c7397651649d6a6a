"""A new landing zone started at a saved GTID, before DDL on a table: the history is read from
the server's catalog later on, so that table's columns at the start are not known. The stream
stops where it needs them, saying so and naming the ways out (not as a parser failure to
report)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness.mariadb import MariaDBServer
from tests.live.daemon import Daemon, daemon_config, new_http_port

pytestmark = pytest.mark.live


def test_a_ddl_on_a_table_unknown_at_the_start_names_the_ways_out(
    tmp_path: Path, mariadb_full_metadata: MariaDBServer
) -> None:
    server = mariadb_full_metadata
    db = "unknown_at_start"
    server.execute(f"CREATE DATABASE {db}")
    server.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)")
    start = server.binlog_status().gtid_binlog_pos
    server.execute(f"INSERT INTO {db}.t VALUES (1, 1)")
    server.execute(f"ALTER TABLE {db}.t ADD COLUMN w INT")
    alter = server.binlog_status().gtid_binlog_pos
    server.execute(f"INSERT INTO {db}.t VALUES (2, 2, 2)")
    port = new_http_port()
    config = daemon_config(
        tmp_path / "c.yaml",
        server,
        tmp_path / "landing",
        start_gtid=start,
        http_port=port,
        extra=f"filters:\n  include: ['{db}.*']\n",
    )
    log = tmp_path / "run.log"
    daemon = Daemon(config, log, port, args=("--stop-at-end",)).start()
    try:
        code = daemon.wait(120)
    finally:
        daemon.kill()
    assert code == 4, daemon.log_tail()
    text = log.read_text()
    assert f"changes {db}.t, whose columns at this position are not known" in text
    assert f"(gtid {alter})" in text  # the statement's position
    assert "report the statement" not in text
    assert "start.gtid" in text and "snapshot.mode: initial" in text
