"""A new landing zone started at a saved GTID, before DDL on a table: the history is read from
the server's catalog later on, so that table's columns at the start are not known.

With binlog_row_metadata=FULL they are learned from the table's first TABLE_MAP (also when
an ALTER TABLE comes before it: the table stays unknown until then), and the stream lands
everything. Without it, the stream stops at the table's first rows, saying why and naming
the ways out (not as a parser failure to report)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from replicator.sink.committed_history import load_committed_history
from tests.harness.mariadb import MariaDBServer
from tests.live.daemon import Daemon, daemon_config, new_http_port

pytestmark = pytest.mark.live


def _changes_after_a_start(server: MariaDBServer, db: str) -> tuple[str, str]:
    """Two tables changed after the returned start GTID: ``t`` has a row before its ALTER,
    ``q`` is altered before any row. Returns (start GTID, the GTID of t's ALTER)."""
    server.execute(f"CREATE DATABASE {db}")
    server.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)")
    server.execute(f"CREATE TABLE {db}.q (id INT PRIMARY KEY, a VARCHAR(5))")
    server.execute(f"INSERT INTO {db}.q VALUES (1, 'a')")
    start = server.binlog_status().gtid_binlog_pos
    server.execute(f"INSERT INTO {db}.t VALUES (1, 1)")
    server.execute(f"ALTER TABLE {db}.t ADD COLUMN w INT")
    alter = server.binlog_status().gtid_binlog_pos
    server.execute(f"INSERT INTO {db}.t VALUES (2, 2, 2)")
    server.execute(f"ALTER TABLE {db}.q ADD COLUMN b INT, DROP COLUMN a")
    server.execute(f"UPDATE {db}.q SET b = 7 WHERE id = 1")
    server.execute(f"INSERT INTO {db}.q VALUES (2, 8)")
    return start, alter


def _run(
    tmp_path: Path, server: MariaDBServer, db: str, start: str, log: str = "run.log"
) -> tuple[int, Daemon, Path]:
    port = new_http_port()
    config = daemon_config(
        tmp_path / "c.yaml",
        server,
        tmp_path / "landing",
        start_gtid=start,
        http_port=port,
        extra=f"filters:\n  include: ['{db}.*']\n",
    )
    daemon = Daemon(config, tmp_path / log, port, args=("--stop-at-end",)).start()
    try:
        code = daemon.wait(120)
    finally:
        daemon.kill()
    return code, daemon, tmp_path / "landing"


def _landed(root: Path, table: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for path in sorted((root / "_manifests").glob("*.json")):
        for entry in json.loads(path.read_text())["files"]:
            if entry["table"] == table:
                rows.extend(pq.read_table(root / entry["path"]).to_pylist())
    return rows


def _records(root: Path) -> list[tuple[str, str]]:
    return [
        (record["op"], record["table"])
        for path in sorted((root / "_manifests").glob("*.json"))
        for record in json.loads(path.read_text()).get("schema_changes", ())
    ]


def test_full_row_metadata_learns_a_table_unknown_at_the_start(
    tmp_path: Path, mariadb_full_metadata: MariaDBServer
) -> None:
    db = "learned_at_start"
    start, _ = _changes_after_a_start(mariadb_full_metadata, db)
    code, daemon, root = _run(tmp_path, mariadb_full_metadata, db, start)
    assert code == 0, daemon.log_tail()

    data = [
        {k: v for k, v in row.items() if not k.startswith("_")} for row in _landed(root, f"{db}.t")
    ]
    assert data == [{"id": 1, "v": 1}, {"id": 2, "v": 2, "w": 2}]
    q = _landed(root, f"{db}.q")
    # learned after its ALTER: its rows have the columns as altered
    assert [(r["_op"], r["id"], r["b"]) for r in q] == [("u", 1, 7), ("c", 2, 8)]
    assert all("a" not in r for r in q)

    history = load_committed_history(root)
    learned = [c for c in history.changes if c.statement.startswith("-- ")]
    assert [c.statement.split()[1] for c in learned] == [f"{db}.t", f"{db}.q"]
    t = history.catalog.table(db, "t")
    q_table = history.catalog.table(db, "q")
    assert t is not None and q_table is not None
    assert [c.name for c in t.columns] == ["id", "v", "w"]
    assert [c.name for c in q_table.columns] == ["id", "b"]
    assert t.primary_key == ("id",) and q_table.primary_key == ("id",)
    # no lifecycle record says the learned tables were created; t's ALTER is one
    assert _records(root) == [("alter", f"{db}.t")]
    # the files after the learning carry the column ids (Parquet field ids)
    files = [
        root / entry["path"]
        for path in sorted((root / "_manifests").glob("*.json"))
        for entry in json.loads(path.read_text())["files"]
        if entry["table"] == f"{db}.t"
    ]
    schema = pq.read_schema(files[-1])
    ids = {c.name: c.id for c in t.columns}
    assert schema.field("w").metadata[b"PARQUET:field_id"] == str(ids["w"]).encode()

    # a restart goes on from the landing zone's history (what it learned included)
    mariadb_full_metadata.execute(f"INSERT INTO {db}.t VALUES (3, 3, 3)")
    code, daemon, root = _run(tmp_path, mariadb_full_metadata, db, start, "again.log")
    assert code == 0, daemon.log_tail()
    assert _landed(root, f"{db}.t")[-1]["id"] == 3
    assert load_committed_history(root).catalog.table(db, "t") == t
    assert "learned a table" not in (tmp_path / "again.log").read_text()


def test_minimal_row_metadata_stops_at_the_first_rows_naming_the_ways_out(
    tmp_path: Path, mariadb: MariaDBServer
) -> None:
    assert mariadb.query("SELECT @@binlog_row_metadata") == [("MINIMAL",)]
    db = "unknown_at_start"
    start, _ = _changes_after_a_start(mariadb, db)
    code, daemon, root = _run(tmp_path, mariadb, db, start)
    assert code == 4, daemon.log_tail()
    text = (tmp_path / "run.log").read_text()
    assert f"rows of {db}.t at " in text
    assert "whose columns at this position are not known" in text
    assert "binlog_row_metadata is not FULL" in text
    assert "report the statement" not in text
    assert "start.gtid" in text and "snapshot.mode: initial" in text
    assert _landed(root, f"{db}.t") == []
