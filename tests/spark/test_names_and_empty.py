"""materialize with database and table names Spark would read as globs (``[``, ``]``, ``*``,
``?``, ``{``, ``}``: MySQL allows them in quoted names), one table failing among
others, and tables without rows: created empty, dropped and created again with other columns.

Landing zones are written by the real commit protocol (``tests.spark.zone``); outputs are read
back with ``spark.read.parquet`` and no options (a path with glob characters escaped, as
docs/spark.md tells readers to).
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pymysql
import pytest
from click.testing import CliRunner
from pyspark.sql import SparkSession

from replicator.binlog.constants import ColumnType as CT
from replicator.binlog.values import ABSENT
from replicator.errors import IntegrityError
from replicator.landed.committed import spark_uri
from replicator.landed.contract import table_rel
from replicator.spark.cli import materialize as command
from replicator.spark.materialize import MaterializeOptions, TableResult, materialize
from replicator.spark.merge import META
from replicator.spark.streaming import start_current_state_stream, stream_schema
from tests.harness.mariadb import MariaDBServer
from tests.spark.zone import Ddl, Zone, col, int_col, table, text_col

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[2]

Rows = list[dict[str, Any]]


def read(spark: SparkSession, out: Path, name: str) -> tuple[list[tuple[str, str]], Rows]:
    """The output of table ``name``: (column, Spark type) pairs and its rows, sorted."""
    frame = spark.read.parquet(spark_uri(out / table_rel(name)))
    rows = sorted((r.asDict() for r in frame.collect()), key=repr)
    return [(f.name, f.dataType.simpleString()) for f in frame.schema.fields], rows


def actions(results: list[TableResult]) -> dict[str, str]:
    return {r.table: r.action for r in results}


# each glob name next to a decoy its pattern would match: read as a glob, the decoy's rows
# (or nothing at all) would come back
GLOB = table("sh[op].it[e]ms", int_col(0, "id"), text_col(1, "name"), key=[0])
GLOB_DECOY = table("sho.items", int_col(0, "id"), text_col(1, "name"), key=[0])
STAR = table("a*b.c?d", int_col(0, "id"), text_col(1, "name"), key=[0])
STAR_DECOY = table("axb.cxd", int_col(0, "id"), text_col(1, "name"), key=[0])
BRACES = table("x{1,2}.{t}", int_col(0, "a"), text_col(1, "b"))  # no key
LAST = table("zz.last", int_col(0, "id"), key=[0])  # after them all in name order


def test_glob_characters_in_names_are_taken_literally(spark: SparkSession, tmp_path: Path) -> None:
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"
    zone.commit(
        [
            (GLOB, "c", (1, "glob-1")),
            (GLOB, "c", (2, "glob-2")),
            (GLOB_DECOY, "c", (1, "decoy")),
            (STAR, "c", (1, "star-1")),
            (STAR_DECOY, "c", (1, "decoy")),
            (BRACES, "c", (1, "x")),
            (BRACES, "c", (1, "x")),
            (LAST, "c", (7,)),
        ]
    )
    results = materialize(spark, zone.root, out)
    assert actions(results) == {
        "a*b.c?d": "built",
        "axb.cxd": "built",
        "sh[op].it[e]ms": "built",
        "sho.items": "built",
        "x{1,2}.{t}": "built",
        "zz.last": "built",
    }
    assert (out / "sh[op]" / "it[e]ms").is_symlink()
    assert read(spark, out, "sh[op].it[e]ms") == (
        [("id", "int"), ("name", "string")],
        [{"id": 1, "name": "glob-1"}, {"id": 2, "name": "glob-2"}],
    )
    assert read(spark, out, "a*b.c?d")[1] == [{"id": 1, "name": "star-1"}]
    assert read(spark, out, "x{1,2}.{t}")[1] == [{"a": 1, "b": "x"}, {"a": 1, "b": "x"}]
    assert read(spark, out, "sho.items")[1] == [{"id": 1, "name": "decoy"}]

    # incremental: the earlier state is read back (its directory has the table's name)
    zone.commit(
        [
            (GLOB, "u", (2, "glob-2b"), (2, "glob-2")),
            (GLOB, "c", (3, "glob-3")),
            (STAR, "d", (1, "star-1")),
            (STAR, "c", (2, "star-2")),
            (BRACES, "d", (1, "x")),
            (GLOB_DECOY, "c", (9, "decoy-9")),
        ]
    )
    results = materialize(spark, zone.root, out)
    assert actions(results)["sh[op].it[e]ms"] == "merged"
    assert actions(results)["a*b.c?d"] == "merged"
    assert read(spark, out, "sh[op].it[e]ms")[1] == [
        {"id": 1, "name": "glob-1"},
        {"id": 2, "name": "glob-2b"},
        {"id": 3, "name": "glob-3"},
    ]
    assert read(spark, out, "a*b.c?d")[1] == [{"id": 2, "name": "star-2"}]
    assert read(spark, out, "x{1,2}.{t}")[1] == [{"a": 1, "b": "x"}]

    # a table chosen by its name is that table, not the glob its name spells
    only = tmp_path / "only"
    results = materialize(spark, zone.root, only, tables=["sh[op].it[e]ms"])
    assert actions(results) == {"sh[op].it[e]ms": "built"}
    assert sorted(os.listdir(only)) == [".replicator.lock", "sh[op]"]


def test_one_failing_table_leaves_the_others_done(spark: SparkSession, tmp_path: Path) -> None:
    bad = table("a.bad", int_col(0, "a"), text_col(1, "b"))  # keyless: a partial image stops
    good = table("b.good", int_col(0, "id"), key=[0])
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"
    zone.commit([(bad, "c", (1, ABSENT)), (good, "c", (1,)), (LAST, "c", (2,))])
    with pytest.raises(IntegrityError, match="partial row image") as failed:
        materialize(spark, zone.root, out)
    # the note, the run's last line, says why too (the message's first line, its hint left)
    (note,) = failed.value.__notes__
    assert note.startswith("materialize failed for table a.bad: a partial row image of a table")
    assert note.endswith("; 2 other tables are up to date")
    assert not os.path.lexists(out / "a" / "bad")
    assert read(spark, out, "b.good")[1] == [{"id": 1}]
    assert read(spark, out, "zz.last")[1] == [{"id": 2}]

    # the command: exit 4, the error and then the table it is of
    cli = tmp_path / "cli"
    result = CliRunner().invoke(command, ["--landing", str(zone.root), "--out", str(cli)])
    assert result.exit_code == 4
    lines = result.stderr.splitlines()
    assert lines[0].startswith("error: table a.bad: a partial row image of a table without")
    assert lines[1:] == [f"error: {note}"]
    assert read(spark, cli, "zz.last")[1] == [{"id": 2}]


def test_a_table_created_without_rows_has_its_columns(spark: SparkSession, tmp_path: Path) -> None:
    columns = (
        int_col(0, "id", column_id=1),
        text_col(1, "name", column_id=2),
        col(2, CT.LONGLONG, "big", unsigned=True, column_id=3),
        col(3, CT.NEWDECIMAL, "price", (10 << 8) | 2, column_id=4),
        col(4, CT.DATETIME2, "at", 6, column_id=5),
    )
    empty = table("shop.new", *columns, key=[0])
    twin = table("shop.twin", *columns, key=[0])  # the same columns, with a row
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"
    row = (1, "a", 2**64 - 1, Decimal("12.34"), dt.datetime(2026, 1, 2, 3, 4, 5, 6))
    zone.commit([Ddl("create", "shop.new", version=empty), (twin, "c", row)])
    results = materialize(spark, zone.root, out)
    assert actions(results) == {"shop.new": "built", "shop.twin": "built"}
    got = read(spark, out, "shop.new")
    assert got == (
        [
            ("id", "int"),
            ("name", "string"),
            ("big", "decimal(20,0)"),
            ("price", "decimal(10,2)"),
            ("at", "timestamp_ntz"),
        ],
        [],
    )
    assert got[0] == read(spark, out, "shop.twin")[0]  # as Spark reads the landed file
    # the metadata columns too, as a table with rows has them
    meta = tmp_path / "meta"
    materialize(
        spark, zone.root, meta, options=MaterializeOptions(keep_metadata=True, allow_unknown=True)
    )
    new, other = read(spark, meta, "shop.new"), read(spark, meta, "shop.twin")
    assert new[0] == other[0]
    assert [name for name, _ in new[0]][5:] == [*META, "_absent"]
    assert new[1] == []

    # rows come: merged into the empty state
    zone.commit([(empty, "c", row), (empty, "c", (2, None, 0, None, None))])
    results = materialize(spark, zone.root, out)
    assert actions(results)["shop.new"] == "merged"
    assert read(spark, out, "shop.new")[1] == [
        {"id": 1, "name": "a", "big": Decimal(2**64 - 1), "price": Decimal("12.34"),
         "at": dt.datetime(2026, 1, 2, 3, 4, 5, 6)},
        {"id": 2, "name": None, "big": Decimal(0), "price": None, "at": None},
    ]  # fmt: skip


def _read_if_any(spark: SparkSession, root: Path, name: str) -> object:
    """``read`` of table ``name`` under ``root``; None where there is no such table."""
    return read(spark, root, name) if os.path.lexists(root / table_rel(name)) else None


def test_drop_and_create_again_without_rows(spark: SparkSession, tmp_path: Path) -> None:
    v1 = table("shop.t", int_col(0, "id", column_id=1), text_col(1, "name", column_id=2), key=[0])
    v2 = table(
        "shop.t",
        int_col(0, "id", column_id=3),
        int_col(1, "qty", column_id=4),
        text_col(2, "note", column_id=5),
        key=[0],
    )
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"

    def run() -> dict[str, TableResult]:
        """Incremental into ``out``, and from scratch: both the same."""
        results = {r.table: r for r in materialize(spark, zone.root, out)}
        full = tmp_path / f"full-{zone.checkpoint.batch}"
        materialize(spark, zone.root, full, options=MaterializeOptions(full_refresh=True))
        # both the same table, or both without one
        assert _read_if_any(spark, full, "shop.t") == _read_if_any(spark, out, "shop.t")
        return results

    zone.commit([Ddl("create", "shop.t", version=v1), (v1, "c", (1, "a")), (v1, "c", (2, "b"))])
    assert run()["shop.t"].action == "built"
    assert read(spark, out, "shop.t")[1] == [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]

    # dropped and created again with other columns, no rows: empty, with the new columns
    zone.commit(
        [
            (v1, "u", (1, "A"), (1, "a")),
            Ddl("drop", "shop.t"),
            Ddl("create", "shop.t", statement="CREATE TABLE t (id INT, qty INT, note TEXT)",
                version=v2),
        ]
    )  # fmt: skip
    result = run()["shop.t"]
    assert (result.action, result.rows) == ("built", 0)
    assert result.detail is not None
    assert result.detail.startswith("rebuilt for the drop of shop.t at _seq 5")
    assert read(spark, out, "shop.t") == (
        [("id", "int"), ("qty", "int"), ("note", "string")],
        [],
    )

    # its first rows
    zone.commit([(v2, "c", (1, 10, "x"))])
    assert run()["shop.t"].action == "merged"
    assert read(spark, out, "shop.t")[1] == [{"id": 1, "qty": 10, "note": "x"}]

    # dropped alone: the output goes
    zone.commit([Ddl("drop", "shop.t")])
    assert run()["shop.t"].action == "removed"
    assert not os.path.lexists(out / "shop" / "t")

    # created again after the drop: back, empty, with its columns
    zone.commit([Ddl("create", "shop.t", version=v1)])
    assert run()["shop.t"].action == "built"
    assert read(spark, out, "shop.t") == ([("id", "int"), ("name", "string")], [])

    # dropped, created again and rows in one batch
    zone.commit(
        [
            (v1, "c", (5, "e")),
            Ddl("drop", "shop.t"),
            Ddl("create", "shop.t", version=v2),
            (v2, "c", (6, 60, "f")),
        ]
    )
    assert run()["shop.t"].action == "built"
    assert read(spark, out, "shop.t") == (
        [("id", "int"), ("qty", "int"), ("note", "string")],
        [{"id": 6, "qty": 60, "note": "f"}],
    )


LIVE_WORKLOAD = [
    "CREATE DATABASE lab",
    "CREATE DATABASE `w[1]`",
    "CREATE TABLE lab.empty (id INT PRIMARY KEY, name VARCHAR(20), big BIGINT UNSIGNED, "
    "price DECIMAL(10,2), wide DECIMAL(50,5), at DATETIME(6), ts TIMESTAMP(3) NULL, t TIME, "
    "e ENUM('a','b'), s SET('x','y'), j JSON, b BLOB, bits BIT(5), y YEAR, f FLOAT, "
    "d DOUBLE, day DATE, u UUID, secret VARCHAR(10))",
    "CREATE TABLE lab.twin LIKE lab.empty",
    "INSERT INTO lab.twin VALUES (1, 'n', 18446744073709551615, 1.5, 2.5, '2026-01-02 03:04:05', "
    "'2026-01-02 03:04:05.123', '-838:59:59', 'b', 'x,y', '{\"k\": 1}', x'00ff', b'101', "
    "2026, 1.5, 2.5, '2026-01-02', '123e4567-e89b-12d3-a456-426614174000', 's')",
    "CREATE TABLE lab.re (id INT PRIMARY KEY, v VARCHAR(10))",
    "INSERT INTO lab.re VALUES (1, 'old')",
    "DROP TABLE lab.re",
    "CREATE TABLE lab.re (k BIGINT PRIMARY KEY, w DATE)",
    "CREATE TABLE lab.gone (id INT PRIMARY KEY)",
    "INSERT INTO lab.gone VALUES (1)",
    "DROP TABLE lab.gone",
    "CREATE TABLE lab.altered (id INT PRIMARY KEY)",
    "ALTER TABLE lab.altered ADD COLUMN v VARCHAR(5)",
    "CREATE TABLE `w[1]`.`t*?` (id INT PRIMARY KEY, v VARCHAR(5))",
    "INSERT INTO `w[1]`.`t*?` VALUES (1, 'a')",
]


@pytest.mark.live
def test_empty_tables_and_glob_names_from_the_daemon(spark: SparkSession, tmp_path: Path) -> None:
    """The daemon's create and alter records give a table without rows the columns its
    files get (the same as a twin's with a row: types, excluded columns left out)."""
    with MariaDBServer() as server:
        start = server.binlog_status().gtid_binlog_pos
        conn = pymysql.connect(
            host=server.host, port=server.port, user="root", password="", autocommit=True
        )
        with conn.cursor() as cur:
            for statement in LIVE_WORKLOAD:
                cur.execute(statement)
        conn.close()
        root = tmp_path / "landing"
        config = tmp_path / "replicator.yaml"
        config.write_text(
            f"source:\n  host: {server.host}\n  port: {server.port}\n  user: repl\n"
            "  password: replpass\n  server_id: 7072\n"
            f"start:\n  gtid: '{start}'\n"
            f"sink:\n  root: {root}\n"
            "filters:\n  exclude_columns: ['lab.*.secret']\n"
            "service:\n  http_enabled: false\n"
        )
        done = subprocess.run(
            [sys.executable, "-m", "replicator.cli", "run", "--stop-at-end", "--config",
             str(config)],
            cwd=ROOT, capture_output=True, timeout=300, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr.decode()[-4000:]
    out = tmp_path / "out"
    results = materialize(spark, root, out)
    assert actions(results) == {
        "lab.altered": "built",
        "lab.empty": "built",
        "lab.gone": "removed",
        "lab.re": "built",
        "lab.twin": "built",
        "w[1].t*?": "built",
    }
    empty, twin = read(spark, out, "lab.empty"), read(spark, out, "lab.twin")
    assert empty == (twin[0], [])
    assert [name for name, _ in empty[0]] == [
        "id", "name", "big", "price", "wide", "at", "ts", "t", "e", "s", "j", "b", "bits", "y",
        "f", "d", "day", "u",
    ]  # fmt: skip
    assert len(twin[1]) == 1
    assert read(spark, out, "lab.re") == ([("k", "bigint"), ("w", "date")], [])
    assert read(spark, out, "lab.altered") == ([("id", "int"), ("v", "string")], [])
    assert read(spark, out, "w[1].t*?")[1] == [{"id": 1, "v": "a"}]
    assert not os.path.lexists(out / "lab" / "gone")


def test_stream_of_a_table_with_glob_characters(spark: SparkSession, tmp_path: Path) -> None:
    """The streaming helper: the landing zone's path and the table's name both with glob
    characters; merged micro-batch by micro-batch, the earlier state read back each time."""
    zone = Zone(tmp_path / "land[ing]*")
    decoy = Zone(tmp_path / "landing-decoy")  # what the landing path read as a glob would match
    decoy.commit([(GLOB, "c", (9, "decoy"))])
    zone.commit([(GLOB, "c", (1, "a")), (GLOB_DECOY, "c", (1, "decoy"))])
    out, checkpoint = tmp_path / "out{1}", tmp_path / "check[point]"
    query = start_current_state_stream(
        spark, zone.root, "sh[op].it[e]ms", out, checkpoint, trigger_seconds=0.2
    )
    try:
        query.processAllAvailable()
        zone.commit([(GLOB, "u", (1, "b"), (1, "a")), (GLOB, "c", (2, "c"))])
        query.processAllAvailable()
    finally:
        query.stop()
    assert query.exception() is None
    assert read(spark, out, "sh[op].it[e]ms") == (
        [("id", "int"), ("name", "string")],
        [{"id": 1, "name": "b"}, {"id": 2, "name": "c"}],
    )
    assert stream_schema(spark, zone.root, "sh[op].it[e]ms").names[:2] == ["id", "name"]
