"""Tables unknown at a stream's start (``Catalog.unknown``), learned from a TABLE_MAP with full
metadata: through the real parser and the schema tracker, the history as it persists them,
DDL that keeps them unknown until then, and the column definitions a TABLE_MAP gives."""

from __future__ import annotations

import dataclasses
import datetime as dt
import struct

import pytest

from replicator.binlog import events as ev
from replicator.binlog.constants import CHECKSUM_OFF, EVENT_HEADER_SIZE
from replicator.binlog.constants import ColumnType as T
from replicator.binlog.errors import SchemaMismatchError
from replicator.binlog.parser import EventParser
from replicator.binlog.schema import ColumnDef
from replicator.errors import IntegrityError
from replicator.pipeline.lifecycle import schema_records
from replicator.schema import ddl
from replicator.schema.history import Learned, Point, SchemaHistory, apply_effect, resync_change
from replicator.schema.learned import learned_table
from replicator.schema.model import Catalog, Column, Database, Table
from replicator.schema.tracker import SchemaTracker, TableLearnedEvent
from replicator.snapshot.columns import column_def

TABLE_MAP = 19
KEY = ("db", "t")
LATER = Table(  # the table as the catalog read at the seed shows it
    "db",
    "t",
    (
        Column("id", "int", "int(11)", nullable=False, id=1),
        Column("name", "varchar", "varchar(20)", length=20, charset="utf8mb4", id=2),
        Column("u", "uuid", "uuid", charset="binary", id=3),
    ),
    primary_key=("id",),
)


def _lenenc(data: bytes) -> bytes:
    return bytes([len(data)]) + data


def _field(kind: int, value: bytes) -> bytes:
    return bytes([kind]) + _lenenc(value)


def _table_map(*, names: bool = True, drop_last: bool = False, key: bool = True) -> bytes:
    """TABLE_MAP of ``db.t (id INT NOT NULL PRIMARY KEY, name VARCHAR(20) utf8mb4,
    u BINARY(16), price DECIMAL(8,2), st ENUM('a','b'))`` (a MariaDB UUID is logged as
    BINARY(16)); ``names``: binlog_row_metadata=FULL, else MINIMAL; without ``key`` it logs
    no primary key (as FULL logs a table without one)."""
    types = [T.LONG, T.VARCHAR, T.STRING, T.NEWDECIMAL, T.STRING]
    meta = [b"", (80).to_bytes(2, "little"), bytes([T.STRING, 16]), bytes([8, 2]), b"\xf7\x01"]
    column_names = [b"id", b"name", b"u", b"price", b"st"]
    if drop_last:
        types, meta, column_names = types[:-1], meta[:-1], column_names[:-1]
    body = (
        (7).to_bytes(6, "little") + b"\x01\x00" + b"\x02db\x00" + b"\x01t\x00"
        + bytes([len(types)]) + bytes(types) + _lenenc(b"".join(meta))
        + bytes([0b11110 & ((1 << len(types)) - 1)])
        + _field(1, b"\x00")  # signedness: id, price signed
        + _field(2, bytes([45, 1, 63]))  # utf8mb4; the 2nd character column is binary
    )  # fmt: skip
    if names:
        body += _field(4, b"".join(_lenenc(n) for n in column_names))
        if not drop_last:
            body += _field(6, b"\x02" + _lenenc(b"a") + _lenenc(b"b"))
            body += _field(10, bytes([45]))
        if key:
            body += _field(8, b"\x00")
    return body


def _event(body: bytes, position: int) -> bytes:
    size = EVENT_HEADER_SIZE + len(body)
    header = struct.pack("<IBIIIH", 1_700_000_000, TABLE_MAP, 1, size, position + size, 0)
    return header + body


def _history(*, seen_later: bool = True, unknown: bool = True) -> SchemaHistory:
    other = Table("db", "other", (Column("a", "int", "int(11)", id=1),))
    seed = Catalog(
        databases={"db": Database("db", "utf8mb4")},
        tables={("db", "other"): other},
        next_column_id=2,
        unknown=frozenset({KEY}) if unknown else frozenset(),
    )
    return SchemaHistory(seed, Point("b.1", 9000), seen_later={KEY: LATER} if seen_later else {})


def _tracker(history: SchemaHistory) -> tuple[SchemaTracker, EventParser]:
    tracker = SchemaTracker(history, lambda db, t: True)
    parser = EventParser(file="b.1", position=4, checksum_alg=CHECKSUM_OFF, schema_lookup=tracker)
    return tracker, parser


def test_a_full_table_map_teaches_a_table_unknown_at_the_start() -> None:
    history = _history()
    tracker, parser = _tracker(history)
    event = parser.parse(_event(_table_map(), 100), position=100)
    assert isinstance(event, ev.TableMapEvent)
    # decoded again with the learned table: column ids, and the UUID's text form
    assert [c.column_id for c in event.columns] == [2, 3, 4, 5, 6]
    assert [c.text_form for c in event.columns] == [None, None, "uuid", None, None]

    table = history.catalog.table(*KEY)
    assert table is not None and not history.catalog.unknown
    assert [(c.name, c.column_type) for c in table.columns] == [
        ("id", "int"),
        ("name", "varchar(20)"),
        ("u", "uuid"),
        ("price", "decimal(8,2)"),
        ("st", "enum('a','b')"),
    ]
    assert table.primary_key == ("id",)
    assert [c.nullable for c in table.columns] == [False, True, True, True, True]
    assert table.columns[1].charset == "utf8mb4"

    out = tracker.on_event(event)
    assert isinstance(out, TableLearnedEvent)
    change = out.change
    assert change.effects == (Learned(table),)
    assert change.point == Point("b.1", 100, None)
    when = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    assert schema_records(change, when, 1, lambda db, t: True) == []  # not a CREATE
    assert tracker.on_event(event) is event  # carried once

    # persisted: a restart has it from the landing zone, without the server
    again = SchemaHistory.from_json(history.to_json())
    assert again.catalog == history.catalog
    assert again.seen_later == {KEY: LATER}
    assert again.rewind(lambda p: p.position < 100) == 1
    assert again.catalog.unknown == frozenset({KEY})  # before it: unknown again


def test_binary16_without_a_catalog_hint_is_learned_as_binary() -> None:
    history = _history(seen_later=False)
    _, parser = _tracker(history)
    event = parser.parse(_event(_table_map(), 100), position=100)
    assert isinstance(event, ev.TableMapEvent)
    table = history.catalog.table(*KEY)
    assert table is not None
    assert (table.columns[2].data_type, table.columns[2].column_type) == ("binary", "binary(16)")
    assert event.columns[2].text_form is None  # its bytes land as they are


def test_a_later_table_map_that_disagrees_with_what_was_learned_stops() -> None:
    history = _history()
    _, parser = _tracker(history)
    parser.parse(_event(_table_map(), 100), position=100)
    with pytest.raises(SchemaMismatchError) as caught:
        parser.parse(_event(_table_map(drop_last=True), 600), position=600)
    text = str(caught.value)
    assert "TABLE_MAP for db.t has 4 columns but the schema history has 5" in text
    assert "b.1:600" in text


def test_a_later_table_map_without_the_learned_key_stops() -> None:
    """A learned table keeps the key its TABLE_MAP logged, which for a table without a
    PRIMARY KEY is a UNIQUE index on NOT NULL columns; the DDL that drops that index is not
    followed, and a FULL TABLE_MAP logging no key then means rows would merge under a key
    the table no longer has."""
    history = _history()
    _, parser = _tracker(history)
    first = parser.parse(_event(_table_map(), 100), position=100)
    assert isinstance(first, ev.TableMapEvent) and first.primary_key == (0,)
    with pytest.raises(SchemaMismatchError) as caught:
        parser.parse(_event(_table_map(key=False), 600), position=600)
    assert "TABLE_MAP for db.t logs no primary key but the schema history has (id)" in str(
        caught.value
    )
    # without FULL metadata, no logged key says nothing: the history's stands
    minimal = parser.parse(_event(_table_map(names=False, key=False), 900), position=900)
    assert isinstance(minimal, ev.TableMapEvent) and minimal.primary_key == (0,)


def test_a_table_map_without_names_stops_naming_the_ways_out() -> None:
    history = _history()
    _, parser = _tracker(history)
    with pytest.raises(IntegrityError) as caught:
        parser.parse(_event(_table_map(names=False), 100), position=100)
    text = f"{caught.value} {caught.value.hint}"
    assert "rows of db.t at b.1:100, whose columns at this position are not known" in text
    assert "binlog_row_metadata is not FULL" in text
    assert "start.gtid" in text and "snapshot.mode: initial" in text
    assert history.catalog.unknown == frozenset({KEY}) and not history.changes


def test_a_table_the_history_does_not_hold_as_unknown_is_not_learned() -> None:
    history = _history(unknown=False)
    tracker, parser = _tracker(history)
    event = parser.parse(_event(_table_map(), 100), position=100)
    assert isinstance(event, ev.TableMapEvent)
    assert [c.column_id for c in event.columns] == [None] * 5
    assert not history.changes
    assert tracker.on_event(event) is event


def test_a_rewind_forgets_what_was_learned_after_the_mark() -> None:
    history = _history()
    tracker, parser = _tracker(history)
    tracker.mark()
    parser.parse(_event(_table_map(), 100), position=100)
    tracker.rewind()
    assert history.catalog.unknown == frozenset({KEY}) and not history.changes
    event = parser.parse(_event(_table_map(), 100), position=100)  # sent again after the reconnect
    assert isinstance(tracker.on_event(event), TableLearnedEvent)
    assert len(history.changes) == 1


# -- DDL on a table still unknown ------------------------------------------------------------

CONTEXT = ddl.Context(default_db="db")


def _apply(statement: str) -> tuple[Catalog, list[ddl.Effect]]:
    return ddl.apply_ddl(_history().catalog, statement, CONTEXT)


@pytest.mark.parametrize(
    "statement",
    [
        "ALTER TABLE t ADD COLUMN w INT",
        "ALTER TABLE t DROP COLUMN name, CHANGE u v INT",
        "ALTER TABLE t RENAME COLUMN name TO label, RENAME INDEX a TO b",
        "CREATE TABLE IF NOT EXISTS t (z INT)",
    ],
)
def test_ddl_on_an_unknown_table_keeps_it_unknown(statement: str) -> None:
    catalog, effects = _apply(statement)
    assert effects == []
    assert catalog.unknown == frozenset({KEY}) and catalog.table(*KEY) is None


@pytest.mark.parametrize(
    "statement",
    [
        "RENAME TABLE t TO t2",
        "ALTER TABLE t ADD COLUMN w INT, RENAME TO t2",
        "ALTER TABLE t RENAME t2",
    ],
)
def test_a_rename_moves_an_unknown_table(statement: str) -> None:
    catalog, effects = _apply(statement)
    assert effects == [ddl.UnknownRenamed("db", "t", "db", "t2")]
    assert catalog.unknown == frozenset({("db", "t2")})


@pytest.mark.parametrize("statement", ["DROP TABLE t", "DROP DATABASE db"])
def test_a_drop_forgets_an_unknown_table(statement: str) -> None:
    catalog, _ = _apply(statement)
    assert catalog.unknown == frozenset()


def test_create_like_an_unknown_table_still_stops() -> None:
    with pytest.raises(ddl.UnknownTableError):
        _apply("CREATE TABLE copy LIKE t")


# -- column definitions ----------------------------------------------------------------------


def _col(code: int, meta: int = 0, **fields: object) -> ColumnDef:
    return dataclasses.replace(ColumnDef(0, code, meta, name="c"), **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("logged", "column_type"),
    [
        (_col(T.TINY, unsigned=True), "tinyint unsigned"),
        (_col(T.LONGLONG), "bigint"),
        (_col(T.YEAR), "year(4)"),
        (_col(T.FLOAT, 4), "float"),
        (_col(T.DOUBLE, 8), "double"),
        (_col(T.NEWDECIMAL, 65 << 8 | 30), "decimal(65,30)"),
        (_col(T.DATE), "date"),
        (_col(T.DATETIME2, 6), "datetime(6)"),
        (_col(T.TIMESTAMP2, 0), "timestamp"),
        (_col(T.TIME2, 3), "time(3)"),
        (_col(T.BIT, 1 << 8 | 3), "bit(11)"),
        (_col(T.VARCHAR, 400, collation_id=45), "varchar(100)"),
        (_col(T.VARCHAR, 300, collation_id=8), "varchar(300)"),
        (_col(T.VARCHAR, 300, collation_id=63), "varbinary(300)"),
        (_col(T.STRING, 0xDE << 8 | 0x58, collation_id=45), "char(150)"),  # 600 bytes
        (_col(T.STRING, T.STRING << 8 | 4, collation_id=63), "binary(4)"),
        (_col(T.BLOB, 2, collation_id=45), "text"),
        (_col(T.BLOB, 4, collation_id=63), "longblob"),
        (
            _col(T.STRING, T.ENUM << 8 | 1, collation_id=8, enum_values=("x", "it's")),
            "enum('x','it''s')",
        ),
        (_col(T.STRING, T.SET << 8 | 1, collation_id=45, set_values=("p", "q")), "set('p','q')"),
        (_col(T.JSON, 4), "json"),
        (_col(T.GEOMETRY, 4, geometry_type=1), "point"),
    ],
)  # fmt: skip
def test_a_learned_column_gives_back_the_type_it_was_logged_with(
    logged: ColumnDef, column_type: str
) -> None:
    table = learned_table("db", "t", [logged], [], first_id=1, seen_later=None, at="b.1:4")
    column = table.columns[0]
    assert column.column_type == column_type
    again = column_def(column, 0)  # how a snapshot (and so the history) describes it
    assert (again.real_type, again.meta, again.unsigned) == (
        logged.real_type,
        logged.meta,
        logged.unsigned,
    )


@pytest.mark.parametrize(
    ("logged", "message"),
    [
        (_col(T.VARCHAR, 401, collation_id=45), "401 bytes are not whole utf8mb4 characters"),
        (_col(140, 2, collation_id=45), "binlog type 140 cannot be learned"),
        (_col(T.VARCHAR, 40), "does not log its character set"),
    ],
)
def test_a_column_not_described_exactly_stops(logged: ColumnDef, message: str) -> None:
    with pytest.raises(IntegrityError) as caught:
        learned_table("db", "t", [logged], [], first_id=1, seen_later=None, at="b.1:4")
    assert "column 'c' of db.t in the TABLE_MAP at b.1:4" in str(caught.value)
    assert message in str(caught.value)


def test_a_resync_leaves_no_unknown_table_behind() -> None:
    """``snapshot.mode: when_needed``: the history becomes the source's catalog, where every
    table is known (or gone)."""
    old = _history().catalog
    other = old.tables[("db", "other")]
    now = Catalog(databases=old.databases, tables={("db", "other"): other}, next_column_id=2)
    change = resync_change(old, now, Point("b.2", 4), "-- resync")
    catalog = old
    for effect in change.effects:
        catalog = apply_effect(catalog, effect)
    assert catalog.unknown == frozenset() and catalog.table(*KEY) is None
