"""Values other projects' type tests found differing from SELECT, through ``run`` and Spark's
``materialize``: dates and datetimes of years below 1000 and of year 0 (a real month and day,
which MySQL allows) land exactly, zero dates as null; GEOMETRY keeps its SRID with
``sink.geometry_srid`` (a struct of WKB and SRID).

Spark shows year-0 values (proleptic Gregorian) but Python's ``date`` cannot hold them, so the
materialized values are compared as Spark prints them (``CAST(... AS STRING)``) with what
SELECT prints.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from replicator.spark.materialize import materialize
from tests.harness.mariadb import MariaDBServer
from tests.live.test_dump_live import EARLY_DATES, _dated, _same_instant

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.live, pytest.mark.spark]
ROOT = Path(__file__).resolve().parents[2]
SHAPES = [
    (1, "POINT(1 2)", 4326),
    (2, "LINESTRING(0 0, 1 1, 2 5)", 0),
    (3, "POLYGON((0 0, 4 0, 4 4, 0 0))", 3857),
]


def test_early_dates_year_zero_and_geometry_srid_equal_select(
    spark: SparkSession, tmp_path: Path
) -> None:
    with MariaDBServer(["--binlog-row-metadata=MINIMAL"]) as server:
        start = server.binlog_status().gtid_binlog_pos
        server.execute("CREATE DATABASE lab")
        server.execute("CREATE TABLE lab.d (id INT PRIMARY KEY, d DATE, dt DATETIME(6))")
        server.execute("CREATE TABLE lab.g (id INT PRIMARY KEY, shape GEOMETRY)")
        conn = server.connect("lab")
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = ''")  # zero dates allowed
            cur.executemany("INSERT INTO d VALUES (%s, %s, %s)", EARLY_DATES)
            cur.executemany("INSERT INTO g VALUES (%s, ST_GeomFromText(%s, %s))", SHAPES)
            cur.execute("UPDATE d SET dt = '0000-03-01 00:00:01' WHERE id = 2")
            cur.execute("SELECT id, CAST(d AS CHAR), CAST(dt AS CHAR) FROM d")
            dates = {int(r[0]): (_dated(r[1]), _dated(_same_instant(r[2]))) for r in cur.fetchall()}
            cur.execute("SELECT id, ST_AsBinary(shape), ST_SRID(shape) FROM g")
            shapes = {int(r[0]): (bytes(r[1]), int(r[2])) for r in cur.fetchall()}
        conn.close()
        root = tmp_path / "landing"
        config = tmp_path / "replicator.yaml"
        config.write_text(
            f"source:\n  host: {server.host}\n  port: {server.port}\n  user: repl\n"
            "  password: replpass\n  server_id: 7072\n"
            f"start:\n  gtid: '{start}'\n"
            f"sink:\n  root: {root}\n  geometry_srid: true\n"
            "service:\n  http_enabled: false\n"
        )
        done = subprocess.run(
            [sys.executable, "-m", "replicator.cli", "run", "--stop-at-end", "--config",
             str(config)],
            cwd=ROOT, capture_output=True, timeout=300, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr.decode()[-3000:]
    out = tmp_path / "current"
    materialize(spark, root, out)
    got = spark.read.parquet(str(out / "lab" / "d")).selectExpr(
        "id", "CAST(d AS STRING) AS d", "CAST(dt AS STRING) AS dt"
    )
    landed = {r["id"]: (r["d"], _same_instant(r["dt"])) for r in got.collect()}
    assert landed == dates
    assert landed[4] == ("0000-01-21", "0000-01-21 10:11:12.5")
    assert landed[1] == ("0018-04-01", "0018-04-01 12:34:56")
    assert landed[6] == (None, None)  # '0000-00-00' holds no date: null
    rows = spark.read.parquet(str(out / "lab" / "g")).collect()
    assert {r["id"]: (bytes(r["shape"]["wkb"]), r["shape"]["srid"]) for r in rows} == shapes
    assert {srid for _, srid in shapes.values()} == {0, 3857, 4326}
