"""Fills of added columns: the history's ``fill_of`` and the landed value ``sink.fill`` makes of
it. A DEFAULT gives a value only when it is written as the server stores it; any other literal
is unknown (the live cases, each checked against MariaDB: tests/live/test_fills_against_server.py).
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from replicator.binlog import events as ev
from replicator.binlog.constants import ColumnType as T
from replicator.binlog.parser import query_status
from replicator.binlog.schema import ColumnDef
from replicator.schema import ddl
from replicator.schema.history import Point, SchemaChange, SchemaHistory, fill_of
from replicator.schema.model import Catalog, Column, ColumnDefault, ServerTraits
from replicator.schema.tracker import SchemaTracker
from replicator.sink.fill import landing_fill

UTF8MB4 = 45  # utf8mb4_general_ci
UTF8MB3 = 33  # utf8mb3_general_ci


def _col(code: int, meta: int = 0, **facts: object) -> ColumnDef:
    return ColumnDef(0, code, meta, name="a", **facts)  # type: ignore[arg-type]


def _fill(col: ColumnDef, text: str, *, hexed: bool = False) -> dict[str, object] | None:
    fill = {"kind": "value", "text": text, **({"hex": True} if hexed else {})}
    return landing_fill(dataclasses.replace(col, fill=json.dumps(fill)))


INT = _col(T.LONG)
TINY_UNSIGNED = _col(T.TINY, unsigned=True)
BIT8 = _col(T.BIT, 1 << 8)
DEC52 = _col(T.NEWDECIMAL, 5 << 8 | 2)
DEC50 = _col(T.NEWDECIMAL, 5 << 8)
YEAR = _col(T.YEAR)
TIME0 = _col(T.TIME2, 0)
TIME2 = _col(T.TIME2, 2)
DATE = _col(T.DATE)
DATETIME0 = _col(T.DATETIME2, 0)
DATETIME2 = _col(T.DATETIME2, 2)
DOUBLE = _col(T.DOUBLE, 8)
ENUM = _col(T.ENUM, 1, enum_values=("a", "b"))
ENUM_ACCENTS = _col(T.ENUM, 1, enum_values=("e", "é"))
ENUM_CASES = _col(T.ENUM, 1, enum_values=("A", "a"))
SET = _col(T.SET, 1, set_values=("a", "b"))
VARCHAR = _col(T.VARCHAR, 20, charset="utf-8", collation_id=UTF8MB4)
VARCHAR_MB3 = _col(T.VARCHAR, 15, charset="utf-8", collation_id=UTF8MB3)
LATIN1 = _col(T.VARCHAR, 5, charset="cp1252", collation_id=8)
UUID = _col(T.STRING, 0xFE10, text_form="uuid")
INET4 = _col(T.STRING, 0xFE04, text_form="inet4")
INET6 = _col(T.STRING, 0xFE10, text_form="inet6")

# (column, DEFAULT as the history keeps it, hex) -> the landed value
VALUES: list[tuple[ColumnDef, str, bool, object]] = [
    (INT, "-5", False, -5),
    (INT, "007", False, 7),
    (INT, "10", True, 16),
    (TINY_UNSIGNED, "255", False, 255),
    (BIT8, "5", False, 5),
    (BIT8, "05", True, 5),
    (DEC52, "1.500", False, "1.50"),
    (DEC52, "1.5", False, "1.50"),
    (DEC52, "-0", False, "0.00"),
    (DEC52, "-999.99", False, "-999.99"),
    (DEC50, "2", False, "2"),
    (DOUBLE, "1e2", False, 100.0),
    (YEAR, "2069", False, 2069),
    (YEAR, "1901", False, 1901),
    (TIME0, "10:00:00", False, 36_000_000_000),
    (TIME0, "-10:00:00", False, -36_000_000_000),
    (TIME0, "838:59:59", False, 3_020_399_000_000),
    (TIME2, "01:02:03.45", False, 3_723_450_000),
    (DATE, "2020-01-01", False, "2020-01-01"),
    (DATE, "0000-00-00", False, None),
    (DATETIME0, "2020-01-01", False, "2020-01-01T00:00:00"),
    (DATETIME0, "2020-01-01 10:00:00", False, "2020-01-01T10:00:00"),
    (DATETIME2, "2020-01-01 10:00:00.5", False, "2020-01-01T10:00:00.500000"),
    (DATETIME0, "0000-00-00 00:00:00", False, None),
    (ENUM, "b", False, "b"),
    (ENUM_ACCENTS, "e", False, "e"),
    (SET, "a,b", False, "a,b"),
    (SET, "b", False, "b"),
    (SET, "", False, ""),
    (VARCHAR, "héllo 😀", False, "héllo 😀"),
    (VARCHAR_MB3, "héllo", False, "héllo"),
    (LATIN1, "café", False, "café"),
    (UUID, "123e4567-e89b-12d3-a456-426614174000", False, "123e4567-e89b-12d3-a456-426614174000"),
    (INET4, "10.0.0.1", False, "10.0.0.1"),
]


@pytest.mark.parametrize(("col", "text", "hexed", "value"), VALUES)
def test_a_default_written_as_stored_fills_its_value(
    col: ColumnDef, text: str, hexed: bool, value: object
) -> None:
    expected = {"kind": "null"} if value is None else {"kind": "value", "value": value}
    assert _fill(col, text, hexed=hexed) == expected


# (column, DEFAULT as the history keeps it, hex): the server stores something else
UNKNOWN: list[tuple[ColumnDef, str, bool]] = [
    (INT, "1.7", False),  # rounded: 2
    (INT, "1e2", False),
    (INT, " 7", False),
    (INT, "4294967296", False),  # out of range
    (TINY_UNSIGNED, "-1", False),
    (BIT8, "256", False),
    (DEC52, "1.005", False),  # rounded half up: 1.01
    (DEC50, "2.5", False),  # 3
    (DEC52, "1000", False),  # out of range
    (DEC52, "1e2", False),
    (DEC52, "10", True),  # 0x10 is 16, not 10
    (DOUBLE, "nan", False),
    (DOUBLE, "-0", False),
    (YEAR, "69", False),  # 2069
    (YEAR, "05", False),  # 2005
    (YEAR, "0", False),  # 2000 as a string, 0000 as a number
    (YEAR, "2000", True),  # x'2000' is 8192
    (TIME0, "10:00", False),  # 10:00:00, not 00:10:00
    (TIME0, "1000", False),  # 00:10:00
    (TIME0, "-1:02:03", False),
    (TIME0, "10:00:00.5", False),  # cut to 0 fraction digits
    (TIME2, "-01:02:03.456", False),
    (TIME0, "10:60:00", False),
    (TIME0, "839:00:00", False),
    (TIME0, "1 10:00:00", False),
    (DATE, "2020-01-01 10:00:00", False),
    (DATE, "20200101", False),
    (DATE, "2020-1-1", False),
    (DATETIME0, "2020-01-01 10:00:00.7", False),  # cut or rounded
    (DATETIME0, "2020-01-01T10:00:00", False),
    (DATETIME0, "2020-01-01 10:00", False),
    (ENUM, "B", False),  # matched without case: b
    (ENUM, "a ", False),
    (ENUM, "62", True),  # x'62' is 'b'
    (ENUM, "c", False),
    (ENUM_ACCENTS, "é", False),  # the collation matches 'e' first
    (ENUM_CASES, "a", False),  # 'A' first under a case-insensitive collation
    (SET, "b,a", False),  # stored in definition order
    (SET, "a,a", False),
    (SET, "a,", False),
    (VARCHAR_MB3, "😀", False),  # not in utf8mb3
    (LATIN1, "я", False),
    (UUID, "123E4567-E89B-12D3-A456-426614174000", False),
    (UUID, "123e4567e89b12d3a456426614174000", False),
    (INET4, "010.0.0.1", False),
    (INET6, "::1", False),
]


@pytest.mark.parametrize(("col", "text", "hexed"), UNKNOWN)
def test_a_default_the_server_converts_is_unknown(col: ColumnDef, text: str, hexed: bool) -> None:
    fill = _fill(col, text, hexed=hexed)
    assert fill is not None
    assert fill["kind"] == "unknown", fill


def _column(data_type: str, column_type: str, **facts: object) -> Column:
    return Column("a", data_type, column_type, **facts)  # type: ignore[arg-type]


TIMESTAMP_FILL_CASES = [
    (_column("timestamp", "timestamp"), None, "expression"),
    (_column("timestamp", "timestamp"), False, "expression"),
    (_column("timestamp", "timestamp", nullable=False), None, "expression"),
    (_column("timestamp", "timestamp"), True, "null"),
    (_column("timestamp", "timestamp", nullable=False), True, "implicit"),
    (_column("timestamp", "timestamp", default=ColumnDefault("null")), None, "null"),
    (_column("datetime", "datetime"), None, "null"),
]


@pytest.mark.parametrize(("column", "explicit", "kind"), TIMESTAMP_FILL_CASES)
def test_a_timestamp_without_null_or_default_fills_unknown_unless_the_setting_is_on(
    column: Column, explicit: bool | None, kind: str
) -> None:
    """explicit_defaults_for_timestamp=OFF gives such a column CURRENT_TIMESTAMP or the zero
    date; only MySQL logs the setting (None: not known)."""
    assert fill_of(column, explicit).kind == kind


@pytest.mark.parametrize(
    ("column_type", "text", "kind"),
    [
        ("float(7,2)", "1.23456", "expression"),  # rounded to 1.23
        ("double(7,2) unsigned", "1.234", "expression"),
        ("float(7,2)", "1e0", "expression"),
        ("float(7,2)", "1.2", "value"),
        ("float(7,2)", "-1.25", "value"),
        ("float", "1.23456", "value"),
        ("double", "1e2", "value"),
    ],
)
def test_a_float_default_with_more_decimals_than_its_scale_is_unknown(
    column_type: str, text: str, kind: str
) -> None:
    data_type = column_type.split("(", maxsplit=1)[0]
    column = _column(data_type, column_type, default=ColumnDefault("value", text))
    assert fill_of(column).kind == kind


@pytest.mark.parametrize(
    ("charset", "text", "kind"),
    [("utf8mb3", "héllo 😀", "expression"), ("utf8", "😀", "expression"),
     ("utf8mb4", "héllo 😀", "value"), ("utf8mb3", "héllo", "value")],
)  # fmt: skip
def test_a_four_byte_default_of_a_utf8mb3_column_is_unknown(
    charset: str, text: str, kind: str
) -> None:
    """The history knows which utf8 a column is (a binlog's row metadata may not)."""
    column = dataclasses.replace(
        _column("varchar", "varchar(20)", default=ColumnDefault("value", text)), charset=charset
    )
    assert fill_of(column).kind == kind


def test_mysql_logs_explicit_defaults_for_timestamp_as_a_status_variable() -> None:
    sql_mode = bytes([1]) + (0).to_bytes(8, "little")
    assert query_status(sql_mode + bytes([16, 0])).explicit_defaults_for_timestamp is False
    assert query_status(sql_mode + bytes([16, 1])).explicit_defaults_for_timestamp is True
    assert query_status(sql_mode).explicit_defaults_for_timestamp is None
    after = query_status(bytes([16, 1, 17]) + (7).to_bytes(8, "little"))
    assert (after.explicit_defaults_for_timestamp, after.ddl_xid) == (True, 7)


@pytest.mark.parametrize(("explicit", "fill"), [(None, "expression"), (True, "null")])
def test_the_history_records_a_timestamp_fill_by_the_setting_it_is_given(
    explicit: bool | None, fill: str
) -> None:
    context = ddl.Context(default_db="d", server_charset="utf8mb4", strict=True)
    catalog = Catalog(ServerTraits("mysql", (8, 0, 40), 0))
    for statement in ("CREATE DATABASE d", "CREATE TABLE t (id INT)"):
        catalog, _ = ddl.apply_ddl(catalog, statement, context)
    history = SchemaHistory(catalog, Point("binlog.000001", 4))
    _, effects = ddl.apply_ddl(catalog, "ALTER TABLE t ADD ts TIMESTAMP", context)
    change = SchemaChange(Point("binlog.000001", 100), "ALTER TABLE t ADD ts", tuple(effects))
    history.record(change, explicit_defaults_for_timestamp=explicit)
    table = history.catalog.table("d", "t")
    assert table is not None
    added = table.columns[1].fill
    assert added is not None
    assert added.kind == fill


@pytest.mark.parametrize(("status", "fill"), [(b"", "expression"), (bytes([16, 1]), "null")])
def test_the_tracker_passes_the_setting_a_query_event_logs(status: bytes, fill: str) -> None:
    """MySQL logs ``explicit_defaults_for_timestamp`` in the QUERY event's status variables:
    ON makes an added TIMESTAMP nullable with a NULL fill; not logged (MariaDB), unknown."""
    context = ddl.Context(default_db="d", server_charset="utf8mb4", strict=True)
    catalog = Catalog(ServerTraits("mysql", (8, 0, 40), 0))
    for statement in ("CREATE DATABASE d", "CREATE TABLE t (id INT)"):
        catalog, _ = ddl.apply_ddl(catalog, statement, context)
    tracker = SchemaTracker(SchemaHistory(catalog, Point("binlog.000001", 4)), lambda db, t: True)
    header = ev.EventHeader(0, 2, 1, 100, 200, 0)
    query = "ALTER TABLE t ADD ts TIMESTAMP"
    tracker.on_event(
        ev.QueryEvent(header, "binlog.000001", 100, 200, 1, 0, 0, "d", query, status, None, None)
    )
    table = tracker.history.catalog.table("d", "t")
    assert table is not None
    added = table.columns[1].fill
    assert added is not None
    assert added.kind == fill
