"""Every DDL lands right: a backlog of DML interleaved with each kind of DDL, replayed from its
start GTID by the real daemon under FULL, MINIMAL and NO_LOG row metadata, materialized by
Spark, equals ``SELECT *`` on the source value for value; tables that were dropped have no
output. Then the whole range is replayed over the existing landing zone (``checkpoint set``
back to the start) and the output must not change: no row doubled, keyed or keyless.

The DDL: column rename (CHANGE, RENAME COLUMN), ADD COLUMN with a DEFAULT (older rows take it),
ADD ... FIRST / AFTER, DROP COLUMN, MODIFY to a wider type, ENUM labels added, CONVERT TO
CHARACTER SET, TRUNCATE, RENAME TABLE (away, then a new table under the old name; a swap of
two tables in one statement), DROP TABLE, a table dropped and created again with other
columns, CREATE TABLE ... LIKE, DROP DATABASE; and MariaDB's UUID/INET4/INET6 as text.
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

from replicator.spark.materialize import materialize
from tests.harness.mariadb import MariaDBServer

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.live, pytest.mark.spark]
ROOT = Path(__file__).resolve().parents[2]

WORKLOAD = [
    "CREATE DATABASE lab CHARACTER SET latin1",
    "CREATE DATABASE scratch",
    "CREATE TABLE lab.items (id INT PRIMARY KEY, name VARCHAR(20), qty INT, "
    "status ENUM('new','old') NOT NULL DEFAULT 'new')",
    "CREATE TABLE lab.logs (a INT, b VARCHAR(10))",
    "CREATE TABLE lab.trunc (id INT PRIMARY KEY, v VARCHAR(10))",
    "CREATE TABLE lab.gone (id INT PRIMARY KEY)",
    "CREATE TABLE lab.recreated (id INT PRIMARY KEY, v VARCHAR(10))",
    "CREATE TABLE lab.swap_a (id INT PRIMARY KEY, a VARCHAR(5))",
    "CREATE TABLE lab.swap_b (id INT PRIMARY KEY, b INT)",
    "CREATE TABLE lab.kinds (id INT PRIMARY KEY, u UUID, i4 INET4, i6 INET6)",
    "CREATE TABLE scratch.t (id INT PRIMARY KEY)",
    "INSERT INTO lab.items VALUES (1,'one',10,'new'),(2,'two',20,'old'),(3,'three',30,'new')",
    "INSERT INTO lab.logs VALUES (1,'x'),(1,'x'),(2,'y')",
    "INSERT INTO lab.trunc VALUES (1,'a'),(2,'b')",
    "INSERT INTO lab.gone VALUES (1),(2)",
    "INSERT INTO lab.recreated VALUES (1,'old'),(2,'old')",
    "INSERT INTO lab.swap_a VALUES (1,'a1')",
    "INSERT INTO lab.swap_b VALUES (1,100),(2,200)",
    "INSERT INTO lab.kinds VALUES (1,'123e4567-e89b-12d3-a456-426614174000','192.0.2.1',"
    "'2001:db8::1'),(2,NULL,'0.0.0.0','::ffff:192.0.2.7')",
    "INSERT INTO scratch.t VALUES (1)",
    # column rename: rows not updated since keep their value
    "ALTER TABLE lab.items CHANGE name full_name VARCHAR(20)",
    "UPDATE lab.items SET qty = 21 WHERE id = 2",
    # added columns: older rows hold the DDL default
    "ALTER TABLE lab.items ADD COLUMN c VARCHAR(10) NOT NULL DEFAULT 'x', "
    "ADD COLUMN n INT DEFAULT 7 FIRST, ADD COLUMN d DATE DEFAULT '2020-02-29' AFTER id",
    "INSERT INTO lab.items (id, full_name, qty, c) VALUES (4,'four',40,'y')",
    "ALTER TABLE lab.items DROP COLUMN qty, MODIFY status ENUM('new','old','gone') NOT NULL",
    "UPDATE lab.items SET status = 'gone' WHERE id = 3",
    "ALTER TABLE lab.items RENAME COLUMN c TO code, CONVERT TO CHARACTER SET utf8mb4",
    "INSERT INTO lab.items (id, full_name, code) VALUES (5,'fünf €','z')",
    "ALTER TABLE lab.items MODIFY n BIGINT",
    "TRUNCATE TABLE lab.trunc",
    "INSERT INTO lab.trunc VALUES (2,'new b'),(3,'c')",
    "RENAME TABLE lab.logs TO lab.logs_old",
    "CREATE TABLE lab.logs (x INT, y TEXT)",
    "INSERT INTO lab.logs VALUES (9,'new table')",
    "INSERT INTO lab.logs_old VALUES (3,'z')",
    "DROP TABLE lab.gone",
    "DROP TABLE lab.recreated",
    "CREATE TABLE lab.recreated (id INT PRIMARY KEY, w INT, z DATE)",
    "INSERT INTO lab.recreated VALUES (7, 70, '2024-01-02')",
    "RENAME TABLE lab.swap_a TO lab.tmp, lab.swap_b TO lab.swap_a, lab.tmp TO lab.swap_b",
    "UPDATE lab.swap_a SET b = 201 WHERE id = 2",
    "INSERT INTO lab.swap_b VALUES (2,'a2')",
    "CREATE TABLE lab.copy LIKE lab.trunc",
    "INSERT INTO lab.copy VALUES (1,'copied')",
    "DROP DATABASE scratch",
    "UPDATE lab.kinds SET i6 = '::1' WHERE id = 1",
]
TABLES = ["items", "logs", "logs_old", "trunc", "recreated", "swap_a", "swap_b", "copy", "kinds"]
KEYS = {"logs": None, "logs_old": None}  # keyless: compared as multisets


def _plain(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else value
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None)
    return value


def _source(conn: pymysql.Connection, table: str) -> list[dict[str, Any]]:
    with conn.cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute(f"SELECT * FROM lab.`{table}`")
        rows = cur.fetchall()
    return sorted(({k: _plain(v) for k, v in r.items()} for r in rows), key=repr)


def _materialized(spark: SparkSession, out: Path, table: str) -> list[dict[str, Any]]:
    rows = spark.read.parquet(str(out / "lab" / table)).collect()
    return sorted(({k: _plain(v) for k, v in r.asDict().items()} for r in rows), key=repr)


def _run(config: Path, *args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "replicator.cli", *args, "--config", str(config)],
        cwd=ROOT, capture_output=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()[-4000:]


def _outputs(out: Path) -> set[str]:
    return {
        f"{db.name}.{t.name}"
        for db in out.iterdir()
        if db.is_dir() and not db.name.startswith((".", "_"))
        for t in db.iterdir()
        if not t.name.startswith((".", "_"))
    }


def _check_schema_show(config: Path, start: str) -> None:
    """``replicator schema show``: every version of lab.items with the statement that made it,
    column ids carried through renames; and nothing of it as of the start GTID."""

    def show(*args: str) -> dict[str, Any]:
        done = subprocess.run(
            [sys.executable, "-m", "replicator.cli", "schema", "show", "--config", str(config),
             "--json", *args],
            cwd=ROOT, capture_output=True, timeout=120, check=False, text=True,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        data: dict[str, Any] = json.loads(done.stdout)
        return data

    items = show("--table", "lab.items")["tables"]["lab.items"]
    statements = [v["statement"] for v in items["versions"]]
    assert items["exists"] is True
    assert statements[0].startswith("CREATE TABLE lab.items")
    assert [s.split()[3] for s in statements[1:]] == ["CHANGE", "ADD", "DROP", "RENAME", "MODIFY"]
    first, last = items["versions"][0]["columns"], items["versions"][-1]["columns"]
    ids = {c["name"]: c["id"] for c in first}
    assert {c["name"]: c["id"] for c in last}["full_name"] == ids["name"]  # renamed, same id
    assert [c["name"] for c in last] == ["n", "id", "d", "full_name", "status", "code"]
    assert "lab.items" not in show("--at", start)["tables"]  # created after the start


@pytest.mark.parametrize("metadata", ["FULL", "MINIMAL", "NO_LOG"])
def test_a_ddl_backlog_replayed_equals_the_source(
    spark: SparkSession, tmp_path: Path, metadata: str
) -> None:
    with MariaDBServer([f"--binlog-row-metadata={metadata}"]) as server:
        start = server.binlog_status().gtid_binlog_pos
        conn = pymysql.connect(
            host=server.host, port=server.port, user="root", password="", charset="utf8mb4",
            autocommit=True,
        )  # fmt: skip
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = 'STRICT_ALL_TABLES'")
            for statement in WORKLOAD:
                cur.execute(statement)
        root = tmp_path / "landing"
        config = tmp_path / "replicator.yaml"
        config.write_text(
            f"source:\n  host: {server.host}\n  port: {server.port}\n  user: repl\n"
            "  password: replpass\n  server_id: 7071\n"
            f"start:\n  gtid: '{start}'\n"
            f"sink:\n  root: {root}\n  batch_max_rows: 4\n"
            "service:\n  http_enabled: false\n"
        )
        _run(config, "run", "--stop-at-end")
        out = tmp_path / "current"
        materialize(spark, root, out)
        expected = {t: _source(conn, t) for t in TABLES}

        def check() -> None:
            assert _outputs(out) == {f"lab.{t}" for t in TABLES}
            for table in TABLES:
                assert _materialized(spark, out, table) == expected[table], table

        check()
        _check_schema_show(config, start)
        assert expected["items"][0]["d"] == dt.date(2020, 2, 29)  # the fill, not null
        assert expected["kinds"][0]["u"] == "123e4567-e89b-12d3-a456-426614174000"
        assert len(expected["logs_old"]) == 4  # a keyless duplicate survives as two rows

        # the whole range again over the landing zone: the state must not change
        _run(config, "checkpoint", "set", "--gtid", start)
        _run(config, "run", "--stop-at-end")
        materialize(spark, root, out)
        check()
        conn.close()
