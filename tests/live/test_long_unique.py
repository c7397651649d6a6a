"""MariaDB long UNIQUE keys (on BLOB/TEXT without a prefix, or ``USING HASH``) add hidden
``DB_ROW_HASH_<n>`` fields after the table's columns, which TABLE_MAP and row images include
and no catalog shows (``binlog.tablemap``).

With binlog_row_metadata=FULL they are recognized by name: the rows decode aligned and land
without them, for a table the seed knows (``kept``), tables altered between the start and the
seed (learned from their TABLE_MAP) and one created after the start, through ADD COLUMNs (the
server puts the hash fields last again), in runs and one event at a time alike. Without names
they cannot be told from a column the history missed: the stream stops (exit 4) naming the
case."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from replicator.sink.committed_history import load_committed_history
from tests.harness.mariadb import MariaDBServer
from tests.live.daemon import Daemon, daemon_config, new_http_port, run_to_end

pytestmark = pytest.mark.live

_DB = "long_unique"
_TABLES = ("kept", "seeded", "learned", "later")


def _before_start(server: MariaDBServer) -> str:
    server.execute(f"DROP DATABASE IF EXISTS {_DB}")
    server.execute(f"CREATE DATABASE {_DB}")
    server.execute(
        "CREATE TABLE seeded (id INT PRIMARY KEY, b BLOB, t TEXT, UNIQUE (b), "
        "UNIQUE (id, t) USING HASH)",
        database=_DB,
    )
    server.execute("CREATE TABLE learned (id INT PRIMARY KEY, c TEXT, UNIQUE (c))", database=_DB)
    server.execute("CREATE TABLE kept (id INT PRIMARY KEY, t TEXT, UNIQUE (t))", database=_DB)
    server.execute("INSERT INTO seeded VALUES (1, 'one', 'x')", database=_DB)
    return server.binlog_status().gtid_binlog_pos


def _after_start(server: MariaDBServer) -> None:
    conn = server.connect(_DB)
    conn.autocommit(True)
    with conn.cursor() as cur:
        cur.execute("INSERT INTO learned VALUES (1, 'a')")
        cur.execute("UPDATE seeded SET t = 'x1' WHERE id = 1")
        cur.execute("ALTER TABLE learned ADD COLUMN n INT")  # unknown at the seed: learned
        cur.execute(
            "CREATE TABLE later (id INT PRIMARY KEY, c TEXT, v VARCHAR(10), UNIQUE (c), "
            "UNIQUE (v, c))"
        )
        for n in range(2, 122):  # one-row transactions: taken in runs
            cur.execute("INSERT INTO seeded VALUES (%s, %s, %s)", (n, f"b{n}".encode(), f"t{n}"))
            cur.execute("INSERT INTO later VALUES (%s, %s, %s)", (n, f"c{n}", f"v{n % 7}"))
            cur.execute("INSERT INTO kept VALUES (%s, %s)", (n, f"k{n}"))
        cur.execute("INSERT INTO learned VALUES (2, 'b', 2)")
        cur.execute("UPDATE seeded SET b = CONCAT(b, '!') WHERE id % 3 = 0")
        cur.execute("DELETE FROM later WHERE id % 5 = 0")
        cur.execute("ALTER TABLE later ADD COLUMN w INT")
        cur.execute("ALTER TABLE seeded ADD COLUMN m INT DEFAULT 4")
        cur.execute("INSERT INTO later VALUES (500, 'c500', 'v', 5)")
        cur.execute("UPDATE later SET w = id, c = CONCAT(c, '+') WHERE id % 4 = 0")
        cur.execute("UPDATE seeded SET m = id WHERE id % 2 = 0")
        cur.execute("DELETE FROM seeded WHERE id % 7 = 0")
        cur.execute("UPDATE learned SET c = 'bb', n = 3 WHERE id = 2")
        cur.execute("DELETE FROM learned WHERE id = 1")
        cur.execute("UPDATE kept SET t = CONCAT(t, '?') WHERE id % 6 = 0")
        cur.execute("DELETE FROM kept WHERE id % 11 = 0")
    conn.close()


def _run(tmp_path: Path, server: MariaDBServer, start: str, name: str) -> tuple[int, Daemon]:
    port = new_http_port()
    config = daemon_config(
        tmp_path / f"{name}.yaml",
        server,
        tmp_path / name,
        start_gtid=start,
        http_port=port,
        batch_max_rows=1000,
        batch_max_seconds=3600,
        extra=f"filters:\n  include: ['{_DB}.*']\n",
    )
    daemon = Daemon(config, tmp_path / f"{name}.log", port, args=("--stop-at-end",)).start()
    try:
        code = daemon.wait(120)
    finally:
        daemon.kill()
    return code, daemon


def _files(root: Path, table: str) -> list[Path]:
    return [
        root / entry["path"]
        for path in sorted((root / "_manifests").glob("*.json"))
        for entry in json.loads(path.read_text())["files"]
        if entry["table"] == f"{_DB}.{table}"
    ]


def _final(root: Path, table: str) -> dict[int, dict[str, Any]]:
    """The table's rows as its landed changes leave them, by id."""
    rows: dict[int, dict[str, Any]] = {}
    changes = [row for path in _files(root, table) for row in pq.read_table(path).to_pylist()]
    for change in sorted(changes, key=lambda r: r["_seq"]):
        data = {k: v for k, v in change.items() if not k.startswith("_")}
        if change["_op"] == "d":
            del rows[data["id"]]
        else:
            rows[data["id"]] = data
    return rows


def _selected(server: MariaDBServer, table: str) -> dict[int, dict[str, Any]]:
    conn = server.connect(_DB)
    with conn.cursor() as cur:
        cur.execute(f"SELECT * FROM {table}")
        names = [d[0] for d in cur.description]
        out = {row[0]: dict(zip(names, row, strict=True)) for row in cur.fetchall()}
    conn.close()
    return out


def test_full_row_metadata_lands_tables_with_long_unique_keys_without_their_hashes(
    tmp_path: Path, mariadb_full_metadata: MariaDBServer
) -> None:
    server = mariadb_full_metadata
    start = _before_start(server)
    try:
        _after_start(server)
        # the server logs the hidden fields: this is the case at hand
        logged = server.query(
            "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s "
            "AND COLUMN_NAME LIKE 'DB\\_ROW\\_HASH%%'",
            (_DB,),
        )
        assert logged == [(0,)]
        code, daemon = _run(tmp_path, server, start, "runs")
        assert code == 0, daemon.log_tail()
        (stopped,) = [line for line in daemon.log_lines() if line["event"] == "stopped"]
        assert stopped["in_runs"] > 0
        port = new_http_port()
        config = daemon_config(
            tmp_path / "reference.yaml",
            server,
            tmp_path / "reference",
            start_gtid=start,
            http_port=port,
            batch_max_rows=1000,
            batch_max_seconds=3600,
            extra=f"filters:\n  include: ['{_DB}.*']\n",
        )
        reference = run_to_end(config, tmp_path / "reference.log", port, {"REPLICATOR_NATIVE": "0"})
        assert "learned a table" in reference.log.read_text()
        for table in _TABLES:
            expected = _selected(server, table)
            landed = _final(tmp_path / "runs", table)
            assert landed.keys() == expected.keys() and expected
            # a row last changed before an ADD COLUMN lacks it; its other values are the table's
            assert landed == {i: {k: expected[i][k] for k in row} for i, row in landed.items()}
            assert _final(tmp_path / "reference", table) == landed
            for path in _files(tmp_path / "runs", table) + _files(tmp_path / "reference", table):
                assert not any(n.startswith("DB_ROW_HASH") for n in pq.read_schema(path).names)
        # rows written after each ADD COLUMN carry it
        assert _final(tmp_path / "runs", "later")[500] == _selected(server, "later")[500]
        history = load_committed_history(tmp_path / "runs")
        learned = [c.statement.split()[1] for c in history.changes if c.statement.startswith("--")]
        assert learned == [f"{_DB}.learned", f"{_DB}.seeded"]  # altered after the start
        for table in _TABLES:
            known = history.catalog.table(_DB, table)
            assert known is not None
            assert [c.name for c in known.columns] == list(_selected(server, table)[2].keys())
    finally:
        server.execute(f"DROP DATABASE IF EXISTS {_DB}")


def test_minimal_row_metadata_stops_at_a_long_unique_table_naming_the_case(
    tmp_path: Path, mariadb: MariaDBServer
) -> None:
    assert mariadb.query("SELECT @@binlog_row_metadata") == [("MINIMAL",)]
    start = _before_start(mariadb)
    try:
        mariadb.execute("INSERT INTO seeded VALUES (2, 'two', 'y')", database=_DB)
        code, daemon = _run(tmp_path, mariadb, start, "minimal")
        assert code == 4, daemon.log_tail()
        text = (tmp_path / "minimal.log").read_text()
        assert f"TABLE_MAP for {_DB}.seeded has 5 columns but the schema history has 3" in text
        assert "a MariaDB long UNIQUE key (on BLOB/TEXT) adds hidden hash columns" in text
        assert "set binlog_row_metadata=FULL so they can be recognized by name" in text
        assert _files(tmp_path / "minimal", "seeded") == []
    finally:
        mariadb.execute(f"DROP DATABASE IF EXISTS {_DB}")
