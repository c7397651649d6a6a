"""Snapshot pieces without a server: SELECT's temporal text read back as the row decoders read
the stored bytes, key values kept in the checkpoint losslessly, the progress record, the
range condition of a chunk, and the config's snapshot settings."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from replicator.binlog import temporal
from replicator.binlog.values import InvalidTemporal
from replicator.config import load_config
from replicator.errors import ConfigError, IntegrityError
from replicator.pipeline.pipeline import _followed
from replicator.schema import ddl
from replicator.schema.history import Point, SchemaChange, SchemaHistory, resync_change
from replicator.schema.model import Catalog, Column, Database, ServerTraits, Table, no_pad
from replicator.snapshot.reader import _after_clause, _until_clause
from replicator.snapshot.requests import read_requests, write_request
from replicator.snapshot.runner import SnapshotProgress
from replicator.snapshot_progress import SnapshotState, decode_key, encode_key
from tests import encoders as enc

CTX = ddl.Context()
FIELDS = st.tuples(
    st.integers(0, 9999), st.integers(0, 12), st.integers(0, 31), st.integers(0, 23),
    st.integers(0, 59), st.integers(0, 59), st.integers(0, 999_999),
)  # fmt: skip


def _text(fields: tuple[int, ...], fsp: int) -> bytes:
    year, month, day, hour, minute, second, micro = fields
    text = f"{year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:{second:02d}"
    if fsp:
        text += "." + f"{micro:06d}"[:fsp]
    return text.encode()


def _value(fields: tuple[int, ...], fsp: int) -> dt.datetime | InvalidTemporal:
    year, month, day, hour, minute, second, micro = fields
    micro = micro // 10 ** (6 - fsp) * 10 ** (6 - fsp)
    try:
        return dt.datetime(year, month, day, hour, minute, second, micro)
    except ValueError:
        text = _text((year, month, day, hour, minute, second, micro), fsp).decode()
        return InvalidTemporal(text)


@given(FIELDS, st.integers(0, 6))
def test_datetime_text_reads_as_the_stored_bytes_decode(fields: tuple[int, ...], fsp: int) -> None:
    stored = enc.encode_datetime2(_value(fields, fsp), fsp)
    from_bytes = temporal.datetime2_converter(fsp)(stored)
    assert temporal.datetime_from_text(fsp)(_text(fields, fsp)) == from_bytes


@given(FIELDS)
def test_date_text_reads_as_the_stored_bytes_decode(fields: tuple[int, ...]) -> None:
    year, month, day, *_ = fields
    text = f"{year:04d}-{month:02d}-{day:02d}".encode()
    value = temporal.date_from_text(text)
    assert temporal.date_converter()(enc.encode_date(value)) == value


@given(st.integers(-(838 * 3600 + 59 * 60 + 59), 838 * 3600 + 59 * 60 + 59),
       st.integers(0, 999_999), st.integers(0, 6))  # fmt: skip
def test_time_text_reads_as_the_stored_bytes_decode(seconds: int, micro: int, fsp: int) -> None:
    micro = micro // 10 ** (6 - fsp) * 10 ** (6 - fsp)
    sign = "-" if seconds < 0 or (seconds == 0 and micro and fsp) else ""
    whole = abs(seconds)
    text = f"{sign}{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"
    if fsp:
        text += "." + f"{micro:06d}"[:fsp]
    delta = dt.timedelta(seconds=whole, microseconds=micro)
    expected = temporal.time2_converter(fsp)(enc.encode_time2(-delta if sign else delta, fsp))
    assert temporal.time_from_text(text.encode()) == expected


def test_timestamp_text_is_utc_and_zero_is_the_zero_timestamp() -> None:
    read = temporal.timestamp_from_text(3)
    assert read(b"2038-01-19 03:14:07.999") == dt.datetime(
        2038, 1, 19, 3, 14, 7, 999000, tzinfo=dt.UTC
    )
    assert read(b"0000-00-00 00:00:00.000") == InvalidTemporal("0000-00-00 00:00:00.000")
    with pytest.raises(Exception, match="not a date"):
        read(b"yesterday")


KEYS = st.lists(
    st.one_of(
        st.integers(-(2**64), 2**64),
        st.text(),
        st.binary(),
        st.decimals(allow_nan=False, allow_infinity=False),
        st.floats(allow_nan=False),
        st.datetimes(),
        st.datetimes(timezones=st.just(dt.UTC)),
        st.dates(),
        st.timedeltas(),
    ),
    min_size=1,
    max_size=4,
).map(tuple)


@given(KEYS)
def test_key_values_survive_the_checkpoint_exactly(key: tuple[object, ...]) -> None:
    back = decode_key(encode_key(key))
    assert back == key
    assert [type(v) for v in back] == [type(v) for v in key]


def test_progress_record_round_trips_and_moves_on() -> None:
    state = SnapshotState().add(["a.t", "a.u", "a.t"])
    assert state.tables == ("a.t", "a.u")
    state = state.advanced((5, "x", Decimal("1.50")), 100).advanced((9, "y", Decimal("2")), 50)
    assert state.rows == 150
    data = state.to_json()
    assert SnapshotState.from_json(data, "test") == state
    done = state.finished(7)
    assert (done.tables, done.after, done.rows, done.done, done.done_rows) == (
        ("a.u",), None, 0, 1, 157,
    )  # fmt: skip
    assert SnapshotState().to_json() is None
    with pytest.raises(IntegrityError, match="snapshot progress is unreadable"):
        SnapshotState.from_json({"tables": "x", "after": [["?", "1"]]}, "cp.json")


def test_progress_records_its_key_and_the_requests_it_queued() -> None:
    shape = ("7:int(11):None:None", "9:varchar(8):utf8mb4:utf8mb4_bin")
    state = SnapshotState().add(["a.t"], "req-1").advanced((5, "x"), 10, shape)
    assert (state.key, state.asked) == (shape, frozenset({"req-1"}))
    back = SnapshotState.from_json(state.to_json(), "test")
    assert (back.key, back.after, back.asked) == (shape, (5, "x"), frozenset())  # not stored
    assert back.add(["a.u"], "req-2").asked == frozenset({"req-2"})
    again = state.restarted()
    assert (again.after, again.rows, again.key, again.tables) == (None, 0, None, ("a.t",))
    assert state.finished().key is None


def test_queued_entries_follow_their_tables_through_renames_and_drops() -> None:
    """A swap (a TO tmp, b TO a, tmp TO b) and a rotation (b TO c, a TO b) with ``a`` part
    read and ``b`` queued: each entry names its own table after, none is lost or doubled."""
    shape = ("1:int(11):None:None",)
    state = SnapshotState().add(["d.a", "d.b"]).advanced((3,), 3, shape, (10,))
    swapped = state.moved("d.a", "d.tmp").moved("d.b", "d.a").moved("d.tmp", "d.b")
    assert (swapped.tables, swapped.after, swapped.rows) == (("d.b", "d.a"), (3,), 3)
    rotated = state.moved("d.b", "d.c").moved("d.a", "d.b")
    assert (rotated.tables, rotated.after) == (("d.b", "d.c"), (3,))
    assert state.moved("d.x", "d.y") is state  # not queued: nothing to follow
    assert state.renamed("d.b").tables == ("d.b", "d.b")  # progress from before: none lost
    pending = state.dropped("d.b")
    assert (pending.tables, pending.after, pending.done) == (("d.a",), (3,), 1)
    current = state.dropped("d.a")
    assert (current.tables, current.after, current.done, current.done_rows) == (
        ("d.b",), None, 1, 3,
    )  # fmt: skip


def test_the_stream_s_renames_and_drops_move_the_queue_in_statement_order() -> None:
    """The pipeline applies each DDL statement's effects to the queue as it takes it."""
    catalog = Catalog(databases={"d": Database("d", "utf8mb4")})
    for name in ("a", "b", "e"):
        catalog, _ = ddl.apply_ddl(catalog, f"CREATE TABLE d.{name} (id INT PRIMARY KEY)", CTX)
    state = SnapshotState().add(["d.a", "d.b", "d.e"], reset=True).advanced((3,), 3)
    for statement, tables in (
        ("RENAME TABLE d.a TO d.tmp, d.b TO d.a, d.tmp TO d.b", ("d.b", "d.a", "d.e")),
        ("RENAME TABLE d.a TO d.c, d.b TO d.a", ("d.a", "d.c", "d.e")),
        ("DROP TABLE d.c", ("d.a", "d.e")),
    ):
        catalog, effects = ddl.apply_ddl(catalog, statement, CTX)
        state = _followed(state, SchemaChange(Point("f", 4), statement, tuple(effects)))
        assert state.tables == tables, statement
    assert (state.after, state.reset) == ((3,), frozenset({"d.e"}))
    catalog, effects = ddl.apply_ddl(catalog, "DROP DATABASE d", CTX)
    state = _followed(state, SchemaChange(Point("f", 9), "DROP DATABASE d", tuple(effects)))
    assert (state.tables, state.done, state.done_rows) == ((), 3, 3)


def test_a_reset_takes_tables_queued_already_and_restarts_the_one_being_read() -> None:
    """A table taken in again (or asked for again) while it waits in the queue, or is read
    part way, may have landed rows as stale as a new one's: it starts again after a truncate."""
    state = SnapshotState().add(["d.a", "d.x"]).advanced((5,), 5)  # d.a read part way
    state = state.add(["d.x", "d.b", "d.a"], reset=True)
    assert state.tables == ("d.a", "d.x", "d.b")
    assert state.reset == frozenset({"d.a", "d.x", "d.b"})
    assert (state.after, state.rows, state.resets) == (None, 0, True)
    state = state.advanced((3,), 3)  # its first chunk again, after the truncate
    assert (state.reset, state.resets) == (frozenset({"d.x", "d.b"}), False)
    assert state.finished(3).resets  # d.x's turn


def test_a_reset_goes_before_the_first_chunk_of_the_tables_queued_with_it() -> None:
    """Tables queued with ``reset`` (taken in again by the filters, asked for again) start
    with a truncate record: once, before their first chunk, under whatever name they have."""
    state = SnapshotState().add(["d.a"]).add(["d.b", "d.c"], reset=True)
    assert state.reset == frozenset({"d.b", "d.c"})
    assert not state.resets
    state = state.finished(1)
    assert state.resets
    back = SnapshotState.from_json(state.to_json(), "test")
    assert back.reset == frozenset({"d.b", "d.c"})
    moved = state.moved("d.b", "d.x").moved("d.c", "d.b")
    assert (moved.tables, moved.reset) == (("d.x", "d.b"), frozenset({"d.x", "d.b"}))
    chunk = moved.advanced((5,), 5, ("1:int(11):None:None",))
    assert not chunk.resets and chunk.reset == frozenset({"d.b"})
    assert not chunk.restarted().resets  # its truncate landed with the first chunk
    assert chunk.finished().resets  # d.b's turn
    assert moved.dropped("d.b").reset == frozenset({"d.x"})
    assert "reset" not in (SnapshotState().add(["d.a"]).to_json() or {})


def test_no_pad_collations_are_told_by_name_and_the_charset_default() -> None:
    mariadb, mysql8 = ServerTraits(), ServerTraits("mysql", (8, 0, 36))

    def char(charset: str | None, collation: str | None) -> Column:
        return Column("k", "char", "char(4)", charset=charset, collation=collation)

    for collation in (
        "utf8mb4_nopad_bin",
        "utf8mb4_general_nopad_ci",
        "latin1_swedish_nopad_ci",
        "utf8mb4_uca1400_nopad_ai_ci",
        "utf8mb4_0900_ai_ci",
        "utf8mb4_0900_bin",
        "utf8mb4_ja_0900_as_cs",
    ):
        assert no_pad(char("utf8mb4", collation), mariadb), collation
    for collation in ("utf8mb4_bin", "utf8mb4_general_ci", "utf8mb4_uca1400_ai_ci", "latin1_bin"):
        assert not no_pad(char("utf8mb4", collation), mysql8), collation
    assert no_pad(char("utf8mb4", None), mysql8)  # utf8mb4_0900_ai_ci, MySQL 8's default
    assert not no_pad(char("utf8mb4", None), mariadb)
    assert not no_pad(char("latin1", None), mysql8)
    assert not no_pad(Column("k", "binary", "binary(4)", charset="binary"), mysql8)
    assert not no_pad(Column("k", "int", "int(11)"), mysql8)


def test_a_chunk_starts_strictly_after_the_last_key_in_key_order() -> None:
    assert _after_clause(["`a`"], ["5"]) == "(`a` > 5)"
    assert _after_clause(["`a`", "`b`"], ["5", "'x'"]) == ("(`a` > 5) OR (`a` = 5 AND `b` > 'x')")


def test_a_walk_ends_at_the_greatest_key_its_first_chunk_saw() -> None:
    assert _until_clause(["`a`"], ["5"]) == "(`a` <= 5)"
    assert _until_clause(["`a`", "`b`"], ["5", "'x'"]) == "(`a` < 5) OR (`a` = 5 AND `b` <= 'x')"
    state = SnapshotState().add(["a.t"]).advanced((3,), 3, ("1:int(11):None:None",), (9,))
    back = SnapshotState.from_json(state.to_json(), "test")
    assert back.until == (9,)
    assert (back.restarted().until, back.finished().until) == (None, None)


def test_requests_are_read_oldest_first_and_a_bad_one_is_named(tmp_path: Path) -> None:
    first = write_request(tmp_path, ["shop.*"])
    second = write_request(tmp_path, ["crm.users", "crm.orders"])
    assert read_requests(tmp_path) == [
        (first, ["shop.*"]),
        (second, ["crm.users", "crm.orders"]),
    ]
    (tmp_path / first).parent.joinpath("zzz.json").write_text("{")
    with pytest.raises(IntegrityError, match=r"zzz\.json"):
        read_requests(tmp_path)


@pytest.mark.parametrize("tables", ['"shop.*"', '["shop"]', "[1]", '{"shop.t": 1}'])
def test_a_request_that_is_not_a_list_of_patterns_is_refused(tmp_path: Path, tables: str) -> None:
    """An edited request: a string where the list belongs would be read character by
    character (its "*" the glob of every table)."""
    key = write_request(tmp_path, ["shop.t"])
    (tmp_path / key).write_text(f'{{"tables": {tables}}}')
    with pytest.raises(IntegrityError, match=r"is not a list of database\.table patterns"):
        read_requests(tmp_path)


def test_snapshot_settings_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text("snapshot:\n  mode: always\n")
    with pytest.raises(ConfigError, match=r"snapshot\.mode") as caught:
        load_config(path, environ={})
    assert "initial" in (caught.value.hint or "")
    path.write_text("snapshot:\n  chunk_rows: 0\n")
    with pytest.raises(ConfigError, match=r"snapshot\.chunk_rows"):
        load_config(path, environ={})
    path.write_text("snapshot:\n  mode: never\n  chunk_rows: 500\n")
    config = load_config(path, environ={})
    assert (config.snapshot.mode, config.snapshot.chunk_rows) == ("never", 500)
    path.write_text("snapshot:\n  mode: when_needed\n")
    assert load_config(path, environ={}).snapshot.mode == "when_needed"


def _col(name: str, data_type: str = "int", column_id: int = 0) -> Column:
    return Column(name, data_type, data_type, id=column_id)


def test_a_resync_truncates_what_is_unchanged_and_recreates_the_rest() -> None:
    """After a purged gap: the history's catalog becomes the source's. Unchanged tables keep
    their column ids (truncated: read again), changed ones are dropped and created with new
    ids, gone ones dropped, new ones created; applying the change gives the source's tables."""
    old = Catalog(
        databases={"app": Database("app"), "old": Database("old")},
        tables={
            ("app", "keep"): Table("app", "keep", (_col("id", column_id=1),), ("id",)),
            ("app", "shape"): Table(
                "app", "shape", (_col("id", column_id=2), _col("a", column_id=3))
            ),
            ("old", "t"): Table("old", "t", (_col("x", column_id=4),)),
        },
        next_column_id=9,
    )
    new = Catalog(
        databases={"app": Database("app"), "more": Database("more")},
        tables={
            ("app", "keep"): Table("app", "keep", (_col("id", column_id=1),), ("id",)),
            ("app", "shape"): Table(
                "app", "shape", (_col("id", column_id=2), _col("b", "bigint", 3))
            ),
            ("more", "fresh"): Table("more", "fresh", (_col("k", "varchar", 4),)),
        },
    ).numbered()
    change = resync_change(old, new, Point("mysql-bin.000009", 384), "-- resync")
    kinds = [(type(e).__name__, getattr(e, "table", None)) for e in change.effects]
    names = [(k, t.qualified if t is not None else None) for k, t in kinds]
    assert names == [
        ("TableTruncated", "app.keep"),
        ("TableDropped", "app.shape"),
        ("TableDropped", "old.t"),
        ("DatabaseDropped", None),
        ("DatabaseCreated", None),
        ("TableCreated", "app.shape"),
        ("TableCreated", "more.fresh"),
    ]
    history = SchemaHistory(old, Point("mysql-bin.000001", 4))
    history.record(change)
    after = history.catalog
    assert after.tables[("app", "keep")] == old.tables[("app", "keep")]  # ids kept
    created = [
        c.id for key in (("app", "shape"), ("more", "fresh")) for c in after.tables[key].columns
    ]
    assert created == [9, 10, 11]  # new ids, never reused
    assert after.next_column_id == 12
    strip = _strip_ids
    assert {k: strip(t) for k, t in after.tables.items()} == {
        k: strip(t) for k, t in new.tables.items()
    }
    assert set(after.databases) == {"app", "more"}


def _strip_ids(table: Table) -> Table:
    return dataclasses.replace(
        table, columns=tuple(dataclasses.replace(c, id=0) for c in table.columns)
    )


def test_snapshot_progress_says_rows_rate_and_eta() -> None:
    progress = SnapshotProgress("shop.big", 40_000, 200_000, 20_000.0, 3)
    assert progress.eta_seconds == 8.0
    assert progress.describe() == (
        "shop.big: 40,000 rows of about 200,000 (20%), 20,000 rows/s, ETA 0m08s; "
        "2 more table(s) after it"
    )
    unknown = SnapshotProgress("shop.t", 10, None, None, 1)
    assert unknown.eta_seconds is None
    assert unknown.describe() == "shop.t: 10 rows"
    assert SnapshotProgress(None, 0, None, None, 0).describe() == "done"


# ------------------------------------------------------------- text result sets, natively

native = pytest.importorskip("replicator.binlog.native")


def _lenenc(data: bytes | None) -> bytes:
    if data is None:
        return b"\xfb"
    n = len(data)
    if n < 0xFB:
        head = bytes([n])
    elif n < 1 << 16:
        head = b"\xfc" + n.to_bytes(2, "little")
    elif n < 1 << 24:
        head = b"\xfd" + n.to_bytes(3, "little")
    else:
        head = b"\xfe" + n.to_bytes(8, "little")
    return head + data


def _packet(payload: bytes, seq: int = 1) -> bytes:
    return len(payload).to_bytes(3, "little") + bytes([seq & 0xFF]) + payload


EOF_PACKET = _packet(b"\xfe\x00\x00\x02\x00")


def _core() -> object:
    if not native.available():
        pytest.skip(f"native core not built: {native.unavailable()}")
    return native.core()


def _columns() -> tuple[tuple[int, ...], tuple[object, ...]]:
    from replicator.binlog.constants import ColumnType as T
    from replicator.binlog.schema import ColumnDef
    from replicator.snapshot.columns import converter
    from replicator.snapshot.fastread import kind

    defs = [
        ColumnDef(0, T.LONGLONG, 0, name="id"),
        ColumnDef(1, T.DOUBLE, 8, name="d"),
        ColumnDef(2, T.DATETIME2, 3, name="at"),
        ColumnDef(3, T.TIMESTAMP2, 0, name="ts"),
        ColumnDef(4, T.VARCHAR, 400, name="v", charset="utf-8"),
        ColumnDef(5, T.NEWDECIMAL, 12 << 8 | 2, name="m"),
        ColumnDef(6, T.BLOB, 4, name="b", charset="binary"),
        ColumnDef(7, T.DATE, 0, name="day"),
    ]
    return tuple(kind(c) for c in defs), tuple(converter(c) for c in defs)


ROW = [b"-9223372036854775808", b"0.1", b"2024-02-29 23:59:59.500", b"0000-00-00 00:00:00",
       "é€".encode(), b"-12.50", bytes(range(256)), b"2023-02-31"]  # fmt: skip
EXPECTED = (
    -(2**63), 0.1, dt.datetime(2024, 2, 29, 23, 59, 59, 500000),
    InvalidTemporal("0000-00-00 00:00:00"), "é€", Decimal("-12.50"), bytes(range(256)),
    InvalidTemporal("2023-02-31"),
)  # fmt: skip


def test_text_rows_reads_rows_to_the_end_of_the_result_set() -> None:
    core, (kinds, fallbacks) = _core(), _columns()
    row = _packet(b"".join(_lenenc(v) for v in ROW))
    nulls = _packet(b"\xfb" * 8)
    data = row + nulls + EOF_PACKET + b"trailing"
    rows, offset, state = core.text_rows(data, 0, kinds, fallbacks, False)  # type: ignore[attr-defined]
    assert (rows, state) == ([EXPECTED, (None,) * 8], 1)
    assert data[offset:] == b"trailing"
    # cut anywhere: the rows of whole packets, and where the incomplete one starts
    for cut in range(len(row) + len(nulls)):
        rows, offset, state = core.text_rows(data[:cut], 0, kinds, fallbacks, False)  # type: ignore[attr-defined]
        whole = 0 if cut < len(row) else 1
        assert (len(rows), offset, state) == (whole, whole * len(row), 0)


def test_text_rows_stops_at_an_error_packet_and_at_a_split_row() -> None:
    core, (kinds, fallbacks) = _core(), _columns()
    error = _packet(b"\xff\x28\x0c#HY000Query execution was interrupted")
    rows, offset, state = core.text_rows(error, 0, kinds, fallbacks, False)  # type: ignore[attr-defined]
    assert (rows, offset, state) == ([], 0, 2)
    split = b"\xff\xff\xff\x01" + b"x" * 16
    assert core.text_rows(split, 0, kinds, fallbacks, False) == ([], 0, 3)  # type: ignore[attr-defined]


def test_text_rows_names_a_packet_that_is_not_a_row() -> None:
    core, (kinds, fallbacks) = _core(), _columns()
    short = _packet(_lenenc(b"1") + _lenenc(b"2"))  # 2 of 8 columns
    with pytest.raises(ValueError, match="not a row of 8 columns"):
        core.text_rows(short, 0, kinds, fallbacks, False)  # type: ignore[attr-defined]
    bad_text = _packet(b"".join(_lenenc(v) for v in [*ROW[:4], b"\xff\xfe", *ROW[5:]]))
    with pytest.raises(Exception, match="column `v`: text is not valid utf-8"):
        core.text_rows(bad_text, 0, kinds, fallbacks, False)  # type: ignore[attr-defined]


def test_a_row_split_over_packets_is_joined() -> None:
    import io

    from replicator.snapshot.fastread import MAX_PAYLOAD, _joined

    core, (kinds, fallbacks) = _core(), _columns()
    big = b"\x01" * (MAX_PAYLOAD + 10)
    payload = b"".join(_lenenc(v) for v in [*ROW[:6], big, ROW[7]])
    first, rest = payload[:MAX_PAYLOAD], payload[MAX_PAYLOAD:]
    stream = _packet(first) + _packet(rest, 2) + EOF_PACKET
    head = stream[:100]
    (joined, after), offset = _joined(io.BufferedReader(io.BytesIO(stream[100:])), head, 0)
    assert joined == payload and offset == 0
    assert after.startswith(EOF_PACKET[:4])
    row = core.text_row(joined, kinds, fallbacks)  # type: ignore[attr-defined]
    assert row[6] == big and row[:6] == EXPECTED[:6]


# ------------------------------------------------------------- text rows into block buffers


def _buffer_columns() -> list[object]:
    from replicator.binlog.constants import ColumnType as T
    from replicator.binlog.schema import ColumnDef

    return [
        ColumnDef(0, T.TINY, 0, name="t"),
        ColumnDef(1, T.TINY, 0, name="tu", unsigned=True),
        ColumnDef(2, T.SHORT, 0, name="s"),
        ColumnDef(3, T.INT24, 0, name="m"),
        ColumnDef(4, T.LONG, 0, name="lu", unsigned=True),
        ColumnDef(5, T.LONGLONG, 0, name="q"),
        ColumnDef(6, T.LONGLONG, 0, name="qu", unsigned=True),
        ColumnDef(7, T.FLOAT, 4, name="f"),
        ColumnDef(8, T.DOUBLE, 8, name="d"),
        ColumnDef(9, T.NEWDECIMAL, 12 << 8 | 2, name="dec"),
        ColumnDef(10, T.NEWDECIMAL, 38 << 8 | 38, name="frac"),
        ColumnDef(11, T.DATE, 0, name="day"),
        ColumnDef(12, T.DATETIME2, 6, name="at"),
        ColumnDef(13, T.TIMESTAMP2, 3, name="ts"),
        ColumnDef(14, T.VARCHAR, 400, name="u", charset="utf-8"),
        ColumnDef(15, T.VARCHAR, 400, name="l", charset="cp1252"),
        ColumnDef(16, T.BLOB, 4, name="b", charset="binary"),
        ColumnDef(17, T.TIME2, 6, name="time"),
        ColumnDef(18, T.BIT, 1 << 8 | 4, name="bit12"),  # BIT(12): int64
        ColumnDef(19, T.BIT, 8 << 8, name="bit64"),  # BIT(64): uint64
        # ENUM, SET and BINARY(6) as snapshot.columns.column_def makes them from the catalog
        ColumnDef(
            20, T.STRING, T.ENUM << 8 | 1, name="e", charset="utf-8", enum_values=("a", "bé", "")
        ),
        ColumnDef(21, T.STRING, T.SET << 8 | 1, name="st", charset="cp1252", set_values=("x", "y")),
        ColumnDef(22, T.STRING, T.STRING << 8 | 6, name="bin6", charset="binary"),
        ColumnDef(23, T.NEWDECIMAL, 65 << 8 | 30, name="objects"),  # no buffer form: values
    ]


def _text_of(value: object) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, float):
        return repr(value).encode()
    return str(value).encode()


@st.composite
def _text_row(draw: st.DrawFn) -> list[bytes | None]:
    """One row as SELECT prints it, NULLs included, values the buffers hold or not."""

    def maybe(strategy: st.SearchStrategy[object]) -> object:
        return draw(st.one_of(st.none(), strategy))

    moment = st.datetimes(dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59))
    latin1 = st.text(st.characters(max_codepoint=0xFF), max_size=20).map(
        lambda s: s.encode("cp1252", "replace")  # ASCII or not (the object path then)
    )
    values = [
        maybe(st.integers(-128, 127)),
        maybe(st.integers(0, 255)),
        maybe(st.integers(-(2**15), 2**15 - 1)),
        maybe(st.integers(-(2**23), 2**23 - 1)),
        maybe(st.integers(0, 2**32 - 1)),
        maybe(st.integers(-(2**63), 2**63 - 1)),
        maybe(st.integers(0, 2**64 - 1)),
        maybe(st.floats(width=32, allow_nan=False, allow_infinity=False)),
        maybe(st.floats(allow_nan=False, allow_infinity=False)),
        maybe(st.decimals(-(10**10) + 1, 10**10 - 1, places=2).map(lambda d: f"{d:.2f}")),
        maybe(st.decimals(-1, 1, places=38).map(lambda d: f"{d:.38f}")),
        maybe(
            st.one_of(
                st.dates().map(lambda d: d.isoformat()),
                st.sampled_from(["0000-00-00", "2023-02-31", "0000-01-21"]),
            )
        ),
        maybe(
            st.one_of(
                moment.map(lambda m: m.isoformat(sep=" ", timespec="microseconds")),
                st.just("0000-00-00 00:00:00.000000"),
            )
        ),
        maybe(
            st.one_of(
                moment.map(lambda m: m.isoformat(sep=" ", timespec="milliseconds")),
                st.just("0000-00-00 00:00:00.000"),
            )
        ),
        maybe(st.text(max_size=20)),
        maybe(latin1),
        maybe(st.binary(max_size=20)),
        maybe(
            st.one_of(
                st.sampled_from(["-838:59:59", "00:00:00", "12:34:56", "-00:00:00.5", "9:05:01"]),
                st.builds(
                    lambda sign, h, m, s, f: f"{sign}{h:02d}:{m:02d}:{s:02d}{f}",
                    st.sampled_from(["", "-"]),
                    st.integers(0, 1000),
                    st.integers(0, 99),
                    st.integers(0, 99),
                    st.one_of(
                        st.just(""),
                        st.integers(0, 999_999).map(lambda n: f".{n:06d}"),
                        st.integers(0, 9).map(lambda n: f".{n}"),
                    ),
                ),
            )
        ),
        maybe(st.binary(min_size=1, max_size=2)),  # BIT(12) as the server sends it
        maybe(st.binary(min_size=1, max_size=9)),  # BIT(64), and a length no BIT has
        maybe(st.sampled_from(["a", "bé", ""])),
        maybe(st.sampled_from(["", "x", "x,y", "y", "é"])),  # non-ASCII: the object path
        maybe(st.binary(max_size=7)),  # BINARY(6): shorter ones padded, a longer one kept
        maybe(st.decimals(-1, 1, places=30).map(lambda d: f"{d:.30f}")),
    ]
    return [_text_of(v) for v in values]


@given(st.lists(_text_row(), max_size=12), st.integers(1, 20))
def test_text_blocks_hold_the_values_text_rows_give(
    rows: list[list[bytes | None]], max_rows: int
) -> None:
    """Blocks read straight into buffers (``text_block``, as ``fastread`` does) hold the same
    values as the rows the object path (``text_rows``) reads from the same packets: the
    rows up to a value buffers cannot hold, which ``text_block`` leaves to the object path
    with nothing of that row kept."""
    from replicator.snapshot.columns import converter
    from replicator.snapshot.fastread import buffer_spec, kind
    from tests.blocks import vector_values

    core, defs = _core(), _buffer_columns()
    kinds = tuple(kind(c) for c in defs)  # type: ignore[arg-type]
    fallbacks = tuple(converter(c) for c in defs)  # type: ignore[arg-type]
    found = [buffer_spec(c) for c in defs]  # type: ignore[arg-type]
    assert found[-1] is None and all(f is not None for f in found[:-1])
    specs = tuple((0, 0, 0) if f is None else f[0] for f in found)
    natives = tuple(None if f is None else f[1] for f in found)
    data = b"".join(_packet(b"".join(_lenenc(v) for v in row)) for row in rows) + EOF_PACKET
    expected, _, _ = core.text_rows(data, 0, kinds, fallbacks, False)  # type: ignore[attr-defined]
    got: list[tuple[object, ...]] = []
    offset, state = 0, 0
    while state == 0:
        vectors, n, offset, state, last = core.text_block(  # type: ignore[attr-defined]
            data, offset, specs, kinds, fallbacks, False, max_rows
        )
        assert n <= max_rows
        assert (last == -1) == (n == 0)
        columns = [vector_values(v, k, n) for v, k in zip(vectors, natives, strict=True)]
        got.extend(zip(*columns, strict=True))
        if state == 4:  # the rest as objects, from the row that stopped the block
            rest, offset, state = core.text_rows(data, offset, kinds, fallbacks, False)  # type: ignore[attr-defined]
            got.extend(rest)
    assert state == 1 and offset == len(data)
    assert got == expected


@given(
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["{!r}", "{:.17g}", "{:.15g}", "{:e}", "{:.6g}"]),
)
def test_text_doubles_read_as_pythons_float_reads_them(value: float, form: str) -> None:
    """A DOUBLE's text, in the forms a server prints, reads (as a value and into buffers)
    exactly as ``float()`` reads it: correctly rounded, the sign of zero kept, whatever the
    process's locale."""
    import struct

    from replicator.binlog.constants import ColumnType as T
    from replicator.binlog.schema import ColumnDef
    from replicator.snapshot.columns import converter
    from replicator.snapshot.fastread import buffer_spec, kind

    core = _core()
    text = form.format(value)
    # a shortened form of a value near the largest double can round past it: no server
    # prints that for a stored (finite) DOUBLE
    assume(math.isfinite(float(text)))
    col = ColumnDef(0, T.DOUBLE, 8, name="d")
    kinds, fallbacks = (kind(col),), (converter(col),)
    spec = buffer_spec(col)
    assert spec is not None
    data = _packet(_lenenc(text.encode())) + EOF_PACKET
    rows, _, _ = core.text_rows(data, 0, kinds, fallbacks, False)  # type: ignore[attr-defined]
    vectors, n, _, _, _ = core.text_block(  # type: ignore[attr-defined]
        data, 0, (spec[0],), kinds, fallbacks, False, 10
    )
    expected = float(text)
    assert n == 1
    ((read,),) = rows
    assert struct.pack("<d", read) == struct.pack("<d", expected)
    assert vectors[0][1] == struct.pack("<d", expected)
