"""``snapshot.mode: when_needed``: the source purged the binlog after the checkpoint while the
daemon was away (updates, deletes, a dropped table, an altered table, a new table, changes in
a keyless table went by). ``never`` stops with a hint; ``when_needed`` goes on from the
source's binlog end with every table read again, and Spark's materialized state equals
``SELECT *`` (the dropped table has no output, the deleted rows are gone).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
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

BEFORE = [
    "CREATE DATABASE app",
    "CREATE TABLE app.keep (id INT PRIMARY KEY, v VARCHAR(20))",
    "INSERT INTO app.keep VALUES (1, 'one'), (2, 'two'), (3, 'three'), (4, 'four')",
    "CREATE TABLE app.gone (id INT PRIMARY KEY)",
    "INSERT INTO app.gone VALUES (1), (2)",
    "CREATE TABLE app.shape (id INT PRIMARY KEY, a INT)",
    "INSERT INTO app.shape VALUES (1, 10), (2, 20)",
    "CREATE TABLE app.bag (n INT, s VARCHAR(5))",
    "INSERT INTO app.bag VALUES (1, 'x'), (1, 'x'), (2, 'y')",
]
# while the daemon is away; then the binlog holding all of it is purged
AWAY = [
    "UPDATE app.keep SET v = 'TWO' WHERE id = 2",
    "DELETE FROM app.keep WHERE id = 3",
    "INSERT INTO app.keep VALUES (5, 'five')",
    "DROP TABLE app.gone",
    "ALTER TABLE app.shape CHANGE a b BIGINT, ADD COLUMN c VARCHAR(3) DEFAULT 'c'",
    "INSERT INTO app.shape VALUES (3, 30, 'new')",
    "CREATE TABLE app.fresh (k VARCHAR(10) PRIMARY KEY, q DECIMAL(8,2))",
    "INSERT INTO app.fresh VALUES ('a', 1.25), ('b', -2.50)",
    "DELETE FROM app.bag WHERE n = 2",
    "INSERT INTO app.bag VALUES (3, 'z')",
]
AFTER = [  # once the resync runs: streamed as usual
    "UPDATE app.keep SET v = 'ONE' WHERE id = 1",
    "INSERT INTO app.shape VALUES (4, 40, 'aft')",
]
TABLES = ("keep", "shape", "bag", "fresh")


def _run(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "replicator.cli", *args, "--config", str(config)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def _source(conn: pymysql.Connection, table: str) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(f"SELECT * FROM app.{table}")
        return sorted(cur.fetchall(), key=repr)


def _materialized(spark: SparkSession, out: Path, table: str) -> list[tuple[Any, ...]]:
    return sorted(
        (tuple(r) for r in spark.read.parquet(str(out / "app" / table)).collect()), key=repr
    )


def test_when_needed_snapshots_again_after_a_purge(spark: SparkSession, tmp_path: Path) -> None:
    with MariaDBServer() as server:
        for statement in BEFORE:
            server.execute(statement)
        root = tmp_path / "landing"
        body = (
            f"source:\n  host: {server.host}\n  port: {server.port}\n  user: repl\n"
            "  password: replpass\n  server_id: 7075\n  heartbeat_seconds: 1\n"
            f"sink:\n  root: {root}\n  batch_max_seconds: 0.2\n"
            "filters:\n  include: ['app.*']\n"
            "service:\n  http_enabled: false\n"
        )
        never, needed = tmp_path / "never.yaml", tmp_path / "needed.yaml"
        never.write_text(body)  # no mode: initial, which never snapshots again
        needed.write_text(body + "snapshot:\n  mode: when_needed\n")
        first = _run(never, "run", "--stop-at-end")
        assert first.returncode == 0, first.stderr[-3000:]
        checkpoint = json.loads((root / "_state" / "checkpoint.json").read_text())
        for statement in AWAY:
            server.execute(statement)
        server.execute("FLUSH BINARY LOGS")
        current = server.query("SHOW MASTER STATUS")[0][0]
        deadline = time.monotonic() + 30
        while server.binlog_files()[0] != current:  # a dump thread ending holds its file
            assert time.monotonic() < deadline, server.binlog_files()
            server.execute(f"PURGE BINARY LOGS TO '{current}'")
            time.sleep(0.1)

        refused = _run(never, "run", "--stop-at-end")
        assert refused.returncode == 3, refused.stderr[-3000:]
        assert "snapshot.mode: when_needed" in refused.stderr
        assert json.loads((root / "_state" / "checkpoint.json").read_text()) == checkpoint

        resynced = _run(needed, "run", "--stop-at-end")
        assert resynced.returncode == 0, resynced.stderr[-3000:]
        assert "snapshotting every table again" in resynced.stderr
        state = json.loads((root / "_state" / "checkpoint.json").read_text())
        assert state["snapshot"]["tables"] == []
        assert state["position"]["file"] == current
        newest = max((root / "_schema").glob("history-*.json"))
        history = json.loads(newest.read_text())
        resync = history["changes"][-1]
        assert resync["statement"].startswith("-- snapshot.mode when_needed")
        kinds = sorted((e["kind"], e.get("table", {}).get("name")) for e in resync["effects"])
        assert ("TableDropped", "gone") in kinds and ("TableCreated", "fresh") in kinds
        assert ("TableTruncated", "keep") in kinds and ("TableCreated", "shape") in kinds

        for statement in AFTER:
            server.execute(statement)
        again = _run(needed, "run", "--stop-at-end")  # streams on: no second resync
        assert again.returncode == 0, again.stderr[-3000:]
        assert "snapshotting every table again" not in again.stderr

        out = tmp_path / "current"
        materialize(spark, root, out)
        assert not (out / "app" / "gone").exists()
        conn = server.connect("app")
        try:
            for table in TABLES:
                expected = _source(conn, table)
                assert expected, table
                assert _materialized(spark, out, table) == expected, table
        finally:
            conn.close()
