"""A new landing zone started at a saved GTID, on a server with binlog_row_metadata=FULL, lands
the tables that DDL changed between that GTID and the moment the history was read from the
server: their columns at the start are learned from their first TABLE_MAP, and every later
ADD/DROP/RENAME/CHANGE COLUMN applies to what was learned. Materialized by Spark in the
newest schema, every table equals ``SELECT *`` on the source value for value.

Three tables take three paths: ``items`` has rows after the start before each ALTER;
``quiet`` is altered before any row of it after the start (the ALTER cannot be applied to
columns not known yet: they are learned after it); ``moved`` is renamed, then altered,
before its first row. A MariaDB UUID column is learned as UUID (the binlog logs BINARY(16);
the server's catalog says UUID) and lands as text.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pymysql
import pytest

from replicator.sink.committed_history import load_committed_history
from replicator.spark.materialize import materialize
from tests.harness.mariadb import MariaDBServer

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.live, pytest.mark.spark]
ROOT = Path(__file__).resolve().parents[2]

BEFORE_START = [
    "CREATE DATABASE late",
    "CREATE TABLE late.items (id INT PRIMARY KEY, v INT, name VARCHAR(20), "
    "u UUID, price DECIMAL(8,2), st ENUM('a','b') NOT NULL DEFAULT 'a')",
    "INSERT INTO late.items VALUES (1, 10, 'one', '123e4567-e89b-12d3-a456-426614174000', "
    "1.50, 'a'), (2, 20, 'two', NULL, 2.00, 'b'), (3, 30, 'three', NULL, NULL, 'a')",
    "CREATE TABLE late.quiet (id INT PRIMARY KEY, a VARCHAR(10) CHARACTER SET latin1, "
    "b BIGINT UNSIGNED)",
    "INSERT INTO late.quiet VALUES (1, 'x', 18446744073709551615), (2, 'y', 0)",
    "CREATE TABLE late.moved (id INT PRIMARY KEY, x INT)",
    "INSERT INTO late.moved VALUES (1, 1)",
]
AFTER_START = [
    "INSERT INTO late.items VALUES (4, 40, 'four', '00000000-0000-0000-0000-000000000001', "
    "4.25, 'b')",
    "ALTER TABLE late.items ADD COLUMN w VARCHAR(10) NOT NULL DEFAULT 'x'",
    "INSERT INTO late.items VALUES (5, 50, 'five', NULL, 5.00, 'a', 'w5')",
    "ALTER TABLE late.items DROP COLUMN v",
    "INSERT INTO late.items VALUES (6, 'six', NULL, 6.00, 'b', 'w6')",
    "ALTER TABLE late.items RENAME COLUMN name TO label",
    "ALTER TABLE late.items CHANGE price cost DECIMAL(10,2)",
    "INSERT INTO late.items VALUES (7, 'seven', NULL, 12345678.90, 'a', 'w7')",
    "UPDATE late.items SET label = CONCAT(label, '!'), st = 'b' WHERE id IN (1, 3, 4, 5, 6, 7)",
    "UPDATE late.items SET w = 'changed' WHERE id = 1",
    "DELETE FROM late.items WHERE id = 2",
    # altered before any rows event of it after the start
    "ALTER TABLE late.quiet ADD COLUMN c DATE, MODIFY a VARCHAR(20) CHARACTER SET latin1",
    "UPDATE late.quiet SET c = '2024-01-01', a = 'ä' WHERE id = 1",
    "INSERT INTO late.quiet VALUES (3, 'é', 5, '2024-02-29')",
    "DELETE FROM late.quiet WHERE id = 2",
    # renamed, then altered, before any rows event of it
    "RENAME TABLE late.moved TO late.moved2",
    "ALTER TABLE late.moved2 ADD COLUMN y INT",
    "INSERT INTO late.moved2 VALUES (2, 2, 22)",
    "UPDATE late.moved2 SET y = 11 WHERE id = 1",
]
TABLES = ["items", "quiet", "moved2"]


def _plain(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, decimal.Decimal):
        return value.normalize()
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None)
    return value


def _source(conn: pymysql.Connection, table: str) -> list[dict[str, Any]]:
    with conn.cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute(f"SELECT * FROM late.`{table}`")
        rows = cur.fetchall()
    return sorted(({k: _plain(v) for k, v in r.items()} for r in rows), key=repr)


def _materialized(spark: SparkSession, out: Path, table: str) -> list[dict[str, Any]]:
    rows = spark.read.parquet(str(out / "late" / table)).collect()
    return sorted(({k: _plain(v) for k, v in r.asDict().items()} for r in rows), key=repr)


def _run(config: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "replicator.cli", *args, "--config", str(config)],
        cwd=ROOT, capture_output=True, timeout=300, check=False, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout


def test_a_new_landing_zone_at_an_old_gtid_follows_ddl_on_tables_changed_since(
    spark: SparkSession, tmp_path: Path
) -> None:
    with MariaDBServer(["--binlog-row-metadata=FULL"]) as server:
        conn = pymysql.connect(
            host=server.host, port=server.port, user="root", password="", charset="utf8mb4",
            autocommit=True,
        )  # fmt: skip
        with conn.cursor() as cur:
            for statement in BEFORE_START:
                cur.execute(statement)
            start = server.binlog_status().gtid_binlog_pos
            cur.execute("SET SESSION sql_mode = 'STRICT_ALL_TABLES'")
            for statement in AFTER_START:
                cur.execute(statement)
        root = tmp_path / "landing"
        config = tmp_path / "replicator.yaml"
        config.write_text(
            f"source:\n  host: {server.host}\n  port: {server.port}\n  user: repl\n"
            "  password: replpass\n  server_id: 7072\n"
            f"start:\n  gtid: '{start}'\n"
            f"filters:\n  include: ['late.*']\n"
            f"sink:\n  root: {root}\n  batch_max_rows: 3\n"
            "service:\n  http_enabled: false\n"
        )
        _run(config, "run", "--stop-at-end")
        out = tmp_path / "current"
        materialize(spark, root, out)
        expected = {t: _source(conn, t) for t in TABLES}
        for table in TABLES:
            assert _materialized(spark, out, table) == expected[table], table

        # the whole range again over the landing zone: the history rewinds to its seed (the
        # tables unknown again) and learns them again from what it kept, without the server's
        # catalog: the UUID column is learned as UUID again, and the state does not change
        _run(config, "checkpoint", "set", "--gtid", start)
        _run(config, "run", "--stop-at-end")
        materialize(spark, root, out)
        conn.close()
    for table in TABLES:
        assert _materialized(spark, out, table) == expected[table], table
    assert [r["id"] for r in expected["items"]] == [1, 3, 4, 5, 6, 7]  # id 2 deleted
    assert expected["items"][0]["u"] == "123e4567-e89b-12d3-a456-426614174000"
    assert expected["quiet"][0]["a"] == "ä"

    # the history learned each table (no lifecycle record) and followed the DDL after it
    history = load_committed_history(root)
    learned = [
        (c.statement, [e.table.name for e in c.effects])  # type: ignore[union-attr]
        for c in history.changes
        if c.statement.startswith("-- ")
    ]
    assert [names for _, names in learned] == [["items"], ["quiet"], ["moved2"]]
    assert set(history.seen_later) >= {("late", "items"), ("late", "quiet")}
    items = history.catalog.table("late", "items")
    assert items is not None
    assert [(c.name, c.data_type) for c in items.columns] == [
        ("id", "int"), ("label", "varchar"), ("u", "uuid"),
        ("cost", "decimal"), ("st", "enum"), ("w", "varchar"),
    ]  # fmt: skip
    assert not history.catalog.unknown
    records = [
        json.loads(line)
        for path in sorted((root / "_manifests").glob("*.json"))
        for line in [path.read_text()]
    ]
    lifecycle = [(c["op"], c["table"]) for m in records for c in m.get("schema_changes", ())]
    assert ("create", "late.items") not in lifecycle  # learned, not created
    assert ("alter", "late.items") in lifecycle  # the ALTERs after it
