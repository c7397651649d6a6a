"""Fills against a live MariaDB: a column added by ALTER TABLE ... ADD lands, in rows written
before it, as its ``replicator.fill`` (``sink.fill``) says; that must be what SELECT shows for
such a row, or unknown, never a guess.

Each case runs ``CREATE TABLE t (id INT)``, one row, ``ALTER TABLE t ADD <definition>`` and a
row after it, reads the binlog back through ``SchemaTracker`` as the daemon does, and takes the
fill from the TABLE_MAP of the row after the ALTER (the ``ColumnDef`` the landing zone writes).
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import decimal
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from replicator.binlog import events as ev
from replicator.sink.fill import landing_fill
from replicator.source.binlog_file import read_binlog_file
from tests.harness.mariadb import MariaDBServer
from tests.live.test_ddl_replayed import seeded

DB = "fills"
OFF = "SET SESSION explicit_defaults_for_timestamp = OFF"
UUID = "123e4567-e89b-12d3-a456-426614174000"


@dataclass
class Added:
    fill: dict[str, Any] | None  # landing_fill of the added column
    older: object  # SELECT of the added column in the row written before it (landed form)
    rows: list[tuple[object, ...]]  # the rows of t written after the ALTER, decoded
    selected: list[tuple[object, ...]]  # SELECT id, <added> of those rows


def _added(
    server: MariaDBServer,
    definition: str,
    setup: Sequence[str] = ("SET SESSION sql_mode = ''",),
    shown: str = "a",
) -> Added:
    """Add column ``a`` by ``definition`` to a table with one row; ``shown``: the SELECT
    expression that shows its value as it lands (``a+0`` for a BIT)."""
    with contextlib.closing(server.connect()) as conn:
        tracker, start = seeded(server, conn, DB)
        with conn.cursor() as cur:
            for statement in (
                *setup,
                "CREATE TABLE t (id INT)",
                "INSERT INTO t VALUES (1)",
                f"ALTER TABLE t ADD {definition}",
                "INSERT INTO t (id) VALUES (2)",
            ):
                cur.execute(statement)
            cur.execute(f"SELECT id, {shown} FROM t ORDER BY id")
            selected = [tuple(row) for row in cur.fetchall()]
        server.flush_binlogs()
    maps: list[ev.TableMapEvent] = []
    rows: list[tuple[object, ...]] = []
    for read in read_binlog_file(server.binlog_path(start.file), schema_lookup=tracker):
        event = tracker.on_event(read)
        if isinstance(event, ev.TableMapEvent) and event.table == "t":
            maps.append(event)
        if isinstance(event, ev.RowsEvent) and event.table.table == "t":
            rows.extend(tuple(r) for r in event.rows if len(r) == 2)
    (table_map,) = [m for m in maps if len(m.columns) == 2]
    fill = landing_fill(table_map.columns[1])
    return Added(fill, _landed(selected[0][1]), rows, selected[1:])


def _landed(value: object) -> object:
    """A value as pymysql gives it, in the form a fill's value has (``sink.fill``)."""
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, dt.timedelta):
        return value // dt.timedelta(microseconds=1)
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    if isinstance(value, bytes):
        return {"base64": base64.b64encode(value).decode("ascii")}
    return value


# DEFAULTs the server stores otherwise than written (rounded, read another way, matched loosely
# or by the kind of literal): the fill is unknown or the stored value
CONVERTED = [
    ("a DECIMAL(5,2) DEFAULT 1.005", "a"),  # rounded half up: 1.01
    ("a DECIMAL(5,0) DEFAULT 2.5", "a"),  # 3
    ("a INT DEFAULT 1.7", "a"),  # 2
    ("a YEAR DEFAULT 69", "a"),  # 2069
    ("a YEAR DEFAULT '05'", "a"),  # 2005
    ("a YEAR DEFAULT '0'", "a"),  # 2000 (0 is 0000)
    ("a TIME DEFAULT '10:00'", "a"),  # 10:00:00
    ("a TIME DEFAULT 1000", "a"),  # 00:10:00
    ("a TIME(2) DEFAULT '-1:02:03.456'", "a"),  # -01:02:03.45
    ("a DATETIME DEFAULT '2020-01-01 10:00:00.7'", "a"),  # 10:00:00
    ("a ENUM('a','b') DEFAULT 'B'", "a"),  # b
    ("a SET('a','b') DEFAULT 'b,a'", "a"),  # a,b
    ("a ENUM('a ','b') DEFAULT 'a '", "a"),  # a
    ("a ENUM('e','é') DEFAULT 'é'", "a"),  # e: the collation matches the first label
    ("a ENUM('2','1') DEFAULT 1", "a"),  # '2': a number is an index
    ("a BIT(8) DEFAULT '5'", "a+0"),  # 53: a string's bytes
    ("a VARCHAR(5) DEFAULT 1e2", "a"),  # '100'
    ("a VARCHAR(5) DEFAULT -0", "a"),  # '0'
    ("a FLOAT(7,2) DEFAULT 1.23456", "a"),  # 1.23
    ("a DOUBLE(7,2) DEFAULT 1.23456", "a"),  # 1.23
    ("a UUID DEFAULT '123E4567-E89B-12D3-A456-426614174000'", "a"),  # lower case
]


@pytest.mark.parametrize(("definition", "shown"), CONVERTED)
def test_fill_is_what_select_shows_for_older_rows(
    mariadb: MariaDBServer, definition: str, shown: str
) -> None:
    added = _added(mariadb, definition, shown=shown)
    assert added.fill is not None
    assert added.fill["kind"] == "unknown" or added.fill.get("value") == added.older, (
        added.fill,
        added.older,
    )


# DEFAULTs written as the server stores them: the fill is the value SELECT shows
CANONICAL = [
    ("a INT DEFAULT -5", "a", -5),
    ("a INT DEFAULT '007'", "a", 7),
    ("a INT DEFAULT 0x10", "a", 16),
    ("a INT DEFAULT TRUE", "a", 1),
    ("a BIT(8) DEFAULT b'101'", "a+0", 5),
    ("a BIT(8) DEFAULT 5", "a+0", 5),
    ("a DECIMAL(5,2) DEFAULT 1.500", "a", "1.50"),
    ("a DECIMAL(5,2) DEFAULT '1.5'", "a", "1.50"),
    ("a DECIMAL(5,2) DEFAULT -0", "a", "0.00"),
    ("a DOUBLE DEFAULT 1e2", "a", 100.0),
    ("a FLOAT(7,2) DEFAULT 1.2", "a", 1.2),
    ("a YEAR DEFAULT 2069", "a", 2069),
    ("a YEAR DEFAULT '2069'", "a", 2069),
    ("a TIME DEFAULT '10:00:00'", "a", 36_000_000_000),
    ("a TIME DEFAULT '-10:00:00'", "a", -36_000_000_000),
    ("a TIME DEFAULT '838:59:59'", "a", 3_020_399_000_000),
    ("a TIME(2) DEFAULT '01:02:03.45'", "a", 3_723_450_000),
    ("a DATE DEFAULT '2020-01-01'", "a", "2020-01-01"),
    ("a DATETIME DEFAULT '2020-01-01'", "a", "2020-01-01T00:00:00"),
    ("a DATETIME(2) DEFAULT '2020-01-01 10:00:00.5'", "a", "2020-01-01T10:00:00.500000"),
    ("a ENUM('a','b') DEFAULT 'b'", "a", "b"),
    ("a SET('a','b') DEFAULT 'a,b'", "a", "a,b"),
    ("a SET('a','b') DEFAULT ''", "a", ""),
    ("a VARCHAR(5) DEFAULT 5", "a", "5"),
    ("a VARCHAR(5) DEFAULT -7", "a", "-7"),
    ("a VARCHAR(5) DEFAULT TRUE", "a", "1"),
    ("a CHAR(3) DEFAULT 'a  '", "a", "a"),
    ("a BINARY(3) DEFAULT 5", "a", {"base64": "NQAA"}),
    (f"a UUID DEFAULT '{UUID}'", "a", UUID),
    ("a INET4 DEFAULT '10.0.0.1'", "a", "10.0.0.1"),
]


@pytest.mark.parametrize(("definition", "shown", "value"), CANONICAL)
def test_canonical_defaults_fill_the_value_select_shows(
    mariadb: MariaDBServer, definition: str, shown: str, value: object
) -> None:
    added = _added(mariadb, definition, shown=shown)
    assert added.older == value
    assert added.fill == {"kind": "value", "value": value}


@pytest.mark.parametrize(
    ("definition", "kind"),
    [
        ("ts TIMESTAMP", "unknown"),
        ("ts TIMESTAMP NOT NULL", "unknown"),
        ("ts TIMESTAMP NULL", "null"),
    ],
)
def test_timestamp_added_under_explicit_defaults_off(
    mariadb: MariaDBServer, definition: str, kind: str
) -> None:
    """explicit_defaults_for_timestamp=OFF (MySQL 5.7's and MariaDB's before 10.10 default)
    makes a TIMESTAMP without NULL or DEFAULT NOT NULL DEFAULT CURRENT_TIMESTAMP: older rows
    hold the ALTER's time, which the binlog does not show (and MariaDB does not log the
    setting), so the fill is unknown; TIMESTAMP NULL is NULL either way. The history keeps the
    column nullable; rows decode by the TABLE_MAP's null bitmap, so they are the server's."""
    added = _added(mariadb, definition, setup=(OFF,), shown="UNIX_TIMESTAMP(ts)")
    assert added.fill is not None
    assert (added.fill["kind"], added.older is None) == (kind, kind == "null")
    decoded = [(i, ts.timestamp() if isinstance(ts, dt.datetime) else ts) for i, ts in added.rows]
    shown = [(i, None if ts is None else float(str(ts))) for i, ts in added.selected]
    assert (decoded, len(decoded)) == (shown, 1)
