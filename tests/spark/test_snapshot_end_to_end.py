"""A snapshot of tables whose binlog history is gone, taken while a writer keeps changing them,
with the daemon SIGKILLed twice during it: Spark's materialized state equals ``SELECT *``.

The tables: a 200k-row table, a composite key, a keyless table (one consistent read) and a
table of many column types. Their binlogs are purged before the daemon first starts, so only
the snapshot can land the rows that exist. A writer thread inserts, updates and deletes in all
of them until after the second restart; the last run is ``run --stop-at-end``.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import random
import signal
import subprocess
import sys
import threading
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
BIG_ROWS = 200_000
TABLES = ("big", "pair", "nokey", "kinds")

SETUP = [
    "CREATE DATABASE shop CHARACTER SET utf8mb4",
    "CREATE TABLE shop.big (id INT PRIMARY KEY, name VARCHAR(40), qty INT, price DECIMAL(12,2), "
    "at DATETIME(6))",
    f"INSERT INTO shop.big SELECT seq, CONCAT('item ', seq), seq % 97, seq / 100, "
    f"'2024-01-01' + INTERVAL seq SECOND FROM seq_1_to_{BIG_ROWS}",
    "CREATE TABLE shop.pair (region CHAR(2), code VARCHAR(10), n INT, PRIMARY KEY (region, code))",
    "INSERT INTO shop.pair SELECT CHAR(65 + seq % 5, 65 + seq % 7), CONCAT('c', seq), seq "
    "FROM seq_1_to_3000",
    "CREATE TABLE shop.nokey (a INT, b VARCHAR(10))",
    "INSERT INTO shop.nokey SELECT seq % 50, CONCAT('b', seq % 3) FROM seq_1_to_2000",
    "CREATE TABLE shop.kinds (id INT PRIMARY KEY, u BIGINT UNSIGNED, f FLOAT, d DOUBLE, "
    "m DECIMAL(30,10), t TIME(3), dd DATE, ts TIMESTAMP(6) NULL, y YEAR, e ENUM('a','b','c'), "
    "s SET('x','y','z'), j JSON, bl BLOB, bi BIT(12), tx TEXT CHARACTER SET latin1, "
    "uu UUID, sm SMALLINT)",
    "INSERT INTO shop.kinds VALUES "
    "(1, 18446744073709551615, 1.5, 0.1, -12345678901234567890.0123456789, '-838:59:59.000', "
    "'1000-01-01', '1970-01-01 00:00:01', 1901, 'c', 'x,z', '{\"a\": [1, 2.5]}', x'00ff', "
    "b'101010101010', 'caf\\xe9', '123e4567-e89b-12d3-a456-426614174000', -32768),"
    "(2, 0, -3.25, 1e300, 0, '838:59:59.999', '9999-12-31', '2038-01-19 03:14:07.999999', "
    "2155, 'a', '', NULL, '', b'0', '', NULL, 32767),"
    "(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
    "NULL, NULL)",
]


def _writer(server: MariaDBServer, stop: threading.Event, counts: dict[str, int]) -> None:
    rng = random.Random(7)
    conn = pymysql.connect(
        host=server.host, port=server.port, user="root", password="", autocommit=True
    )
    next_id = BIG_ROWS + 1
    with conn.cursor() as cur:
        while not stop.is_set():
            pick = rng.random()
            key = rng.randint(1, next_id)
            if pick < 0.4:
                cur.execute("UPDATE shop.big SET qty = qty + 1, name = %s WHERE id = %s",
                            (f"upd {rng.random():.6f}", key))  # fmt: skip
            elif pick < 0.55:
                cur.execute("DELETE FROM shop.big WHERE id = %s", (key,))
            elif pick < 0.7:
                cur.execute("INSERT INTO shop.big VALUES (%s, 'new', 1, 2.50, NOW(6))", (next_id,))
                next_id += 1
            elif pick < 0.8:
                cur.execute("UPDATE shop.pair SET n = n + 1 WHERE code = %s",
                            (f"c{rng.randint(1, 3000)}",))  # fmt: skip
            elif pick < 0.85:
                cur.execute("DELETE FROM shop.pair WHERE code = %s", (f"c{rng.randint(1, 3000)}",))
            elif pick < 0.92:
                cur.execute("INSERT INTO shop.nokey VALUES (%s, 'w')", (rng.randint(0, 60),))
            elif pick < 0.97:
                cur.execute("DELETE FROM shop.nokey WHERE a = %s LIMIT 1", (rng.randint(0, 60),))
            else:
                cur.execute("UPDATE shop.kinds SET sm = %s, ts = NOW(6) WHERE id = 2",
                            (rng.randint(-100, 100),))  # fmt: skip
            counts["statements"] = counts.get("statements", 0) + 1
            time.sleep(0.0005)
    conn.close()


def _checkpoint(root: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads((root / "_state" / "checkpoint.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
    return data


def _snapshot_rows(root: Path) -> int:
    snap = _checkpoint(root).get("snapshot") or {}
    return int(snap.get("rows", 0)) + int(snap.get("done_rows", 0))


def _start(config: Path, log: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "replicator.cli", "run", "--config", str(config), *args],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log.open("ab"),
    )  # fmt: skip


def _kill_after(proc: subprocess.Popen[bytes], root: Path, rows: int, log: Path) -> None:
    deadline = time.monotonic() + 180
    while _snapshot_rows(root) < rows:
        assert proc.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, f"no snapshot progress to {rows} rows"
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)


def _plain(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, decimal.Decimal):
        return value.normalize() if value else decimal.Decimal(0)
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None)
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, dt.timedelta):
        return round(value.total_seconds() * 1_000_000)  # TIME lands as microseconds
    return value


def _source(conn: pymysql.Connection, table: str) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
        if table == "kinds":
            cur.execute(
                "SELECT id, u, f, d, m, t, dd, ts, y, e, s, j, bl, bi + 0, tx, uu, sm "
                "FROM shop.kinds"
            )
        else:
            cur.execute(f"SELECT * FROM shop.{table}")
        rows = cur.fetchall()
    return sorted((tuple(_plain(v) for v in r) for r in rows), key=repr)


def _materialized(spark: SparkSession, out: Path, table: str) -> list[tuple[Any, ...]]:
    rows = spark.read.parquet(str(out / "shop" / table)).collect()
    return sorted((tuple(_plain(v) for v in r) for r in rows), key=repr)


def test_snapshot_under_writes_and_kills_equals_the_source(
    spark: SparkSession, tmp_path: Path
) -> None:
    with MariaDBServer(["--plugin-load-add=ha_sequence"]) as server:
        server.execute(SETUP[0])
        for statement in SETUP[1:]:
            server.execute(statement, database="shop")  # seq_1_to_N lives in the current db
        server.execute("FLUSH BINARY LOGS")
        current = server.query("SHOW MASTER STATUS")[0][0]
        server.execute(f"PURGE BINARY LOGS TO '{current}'")  # the rows' history is gone
        root = tmp_path / "landing"
        config = tmp_path / "replicator.yaml"
        config.write_text(
            f"source:\n  host: {server.host}\n  port: {server.port}\n  user: repl\n"
            "  password: replpass\n  server_id: 7073\n  heartbeat_seconds: 1\n"
            f"sink:\n  root: {root}\n  batch_max_rows: 20000\n  batch_max_seconds: 0.5\n"
            "snapshot:\n  chunk_rows: 4000\n"
            "filters:\n  include: ['shop.*']\n"
            "service:\n  http_enabled: false\n"
        )
        log = tmp_path / "daemon.log"
        stop, counts = threading.Event(), dict[str, int]()
        writer = threading.Thread(target=_writer, args=(server, stop, counts), daemon=True)
        writer.start()
        try:
            _kill_after(_start(config, log), root, 40_000, log)
            first = _checkpoint(root)
            _kill_after(_start(config, log), root, 120_000, log)
            second = _checkpoint(root)
            time.sleep(1.0)
        finally:
            stop.set()
            writer.join(30)
        assert counts["statements"] > 100
        # each kill stopped the snapshot part way; each start went on from its checkpoint
        assert first["snapshot"]["tables"] and second["snapshot"]["tables"]
        assert first["batch"] < second["batch"]
        done = subprocess.run(
            [sys.executable, "-m", "replicator.cli", "run", "--stop-at-end", "--config",
             str(config)],
            cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-4000:]
        final = _checkpoint(root)
        assert final["snapshot"]["tables"] == []
        out = tmp_path / "current"
        materialize(spark, root, out)
        conn = pymysql.connect(
            host=server.host, port=server.port, user="root", password="", autocommit=True
        )
        for table in TABLES:
            expected = _source(conn, table)
            assert expected, table
            assert _materialized(spark, out, table) == expected, table
        conn.close()
