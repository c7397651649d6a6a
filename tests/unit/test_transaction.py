"""Transaction boundaries on our own MariaDB capture: whole groups, never parts."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from replicator.binlog import events as ev
from replicator.binlog.block import Block
from replicator.binlog.constants import ColumnType
from replicator.binlog.gtid import MariadbGtid
from replicator.binlog.schema import ColumnDef
from replicator.binlog.transaction import Transaction, TransactionAssembler, TransactionPart

from .synthetic_events import Events
from .test_stream import SAMPLE, _decode_file


def _assemble(events: list[ev.Event]) -> tuple[list[Transaction], TransactionAssembler]:
    assembler = TransactionAssembler()
    out: list[Transaction] = []
    for event in events:
        out.extend(t for t in assembler.feed(event) if isinstance(t, Transaction))
    return out, assembler


def test_sample_transactions() -> None:
    events = _decode_file(SAMPLE.read_bytes())
    found, assembler = _assemble(events)
    assert [t.gtid for t in found] == [f"0-1-{n}" for n in range(1, 7)]
    assert [t.ending for t in found] == ["ddl", "ddl", "xid", "xid", "xid", "xid"]
    assert [t.row_count for t in found] == [0, 0, 1, 1, 1, 1]
    # each transaction ends where the next begins (GTID event to GTID event)
    for a, b in itertools.pairwise(found):
        assert a.end_position == b.position
    last_xid = [e for e in events if isinstance(e, ev.XidEvent)][-1]
    assert found[-1].end_position == last_xid.next_position
    assert assembler.discarded_incomplete == 0


def test_start_inside_a_transaction_drops_that_group() -> None:
    events = _decode_file(SAMPLE.read_bytes())
    found, _ = _assemble(events)
    third = found[2]
    # begin right after the third transaction's GTID event: its rows must not come out
    start = next(i for i, e in enumerate(events) if e.position > third.position)
    partial, assembler = _assemble(events[start:])
    assert [t.gtid for t in partial] == [t.gtid for t in found[3:]]
    assert assembler.discarded_incomplete == 1


def test_group_cut_by_a_new_gtid_is_dropped() -> None:
    events = _decode_file(SAMPLE.read_bytes())
    found, _ = _assemble(events)
    third, fourth = found[2], found[3]
    # remove the third transaction's XID: a crash before its commit was written
    cut = [
        e
        for e in events
        if not (
            isinstance(e, ev.XidEvent)
            and e.position < third.end_position
            and e.position >= third.position
        )
    ]
    again, assembler = _assemble(cut)
    assert third.gtid not in [t.gtid for t in again]
    assert fourth.gtid in [t.gtid for t in again]
    assert assembler.discarded_incomplete == 1


def test_format_description_drops_an_open_group() -> None:
    events = _decode_file(SAMPLE.read_bytes())
    found, _ = _assemble(events)
    last = found[-1]
    head = [
        e
        for e in events
        if e.position < last.end_position - 1
        and not (isinstance(e, ev.XidEvent) and e.position >= last.position)
    ]
    assembler = TransactionAssembler()
    out = []
    for e in head:
        out.extend(assembler.feed(e))
    assert assembler.in_transaction
    out = assembler.feed(events[0])  # the server restarted: a new FORMAT_DESCRIPTION
    assert out == [events[0]]
    assert assembler.discarded_incomplete == 1
    assert not assembler.in_transaction


def test_mysql_atomic_create_select_is_one_transaction() -> None:
    # MySQL 8.0.21+: CREATE TABLE ... START TRANSACTION, the rows, XID; the rows are kept
    e = Events()
    events = [
        e.gtid(1), e.query("CREATE TABLE t2 (a INT) START TRANSACTION"), e.table_map(), e.xid(9),
        e.gtid(2), e.query("CREATE TABLE t3 (a INT)"),
    ]  # fmt: skip
    assembler = TransactionAssembler()
    found = [t for x in events for t in assembler.feed(x) if isinstance(t, Transaction)]
    assert [t.ending for t in found] == ["xid", "ddl"]
    assert [type(x).__name__ for x in found[0].events] == ["QueryEvent", "IntvarEvent", "XidEvent"]
    assert found[0].xid == 9
    assert assembler.discarded_incomplete == 0


class _OtherRows(ev.RowsEvent):
    """A rows event the assembler's shortcut for ``RowsEvent`` (an exact type check) does not
    take: it goes the general way."""

    __slots__ = ()


class _OtherMap(ev.TableMapEvent):
    __slots__ = ()


_COLUMNS = (ColumnDef(index=0, type=ColumnType.LONG, meta=0, name="id"),)
_KINDS = ("gtid", "maria", "standalone", "begin", "commit", "rollback", "ddl", "map", "rows", "xid")


def _events(kinds: list[str], *, general: bool) -> list[ev.Event]:
    """One event per kind, in stream order; ``general``: rows and TABLE_MAP events of the
    subclasses above."""
    e = Events()
    out: list[ev.Event] = []
    table = None
    for n, kind in enumerate(kinds, start=1):
        if kind == "gtid":
            out.append(e.gtid(n))
        elif kind in ("maria", "standalone"):
            where = e._at(162)
            flags = ev.MariadbGtidFlags(1 if kind == "standalone" else 0)
            out.append(ev.MariadbGtidEvent(*where, MariadbGtid(0, 1, n), flags, None, None))
        elif kind in ("begin", "commit", "rollback", "ddl"):
            text = {"ddl": "CREATE TABLE t (id INT)"}.get(kind, kind.upper())
            out.append(e.query(text))
        elif kind == "map":
            made = _OtherMap if general else ev.TableMapEvent
            table = made(*e._at(19), 7, 0, "db", "t", _COLUMNS, (0,), True)
            out.append(table)
        elif kind == "rows":
            made_rows = _OtherRows if general else ev.RowsEvent
            block = Block.from_rows([(i,) for i in range(n % 3 + 1)], 1)
            # a map came first, or the test is of rows without one
            out.append(made_rows(*e._at(30), 7, 1, table, ev.RowsKind.INSERT, block))  # type: ignore[arg-type]
        else:
            out.append(e.xid(n))
    return out


def _shape(item: object) -> tuple[object, ...]:
    if isinstance(item, Transaction):
        return ("T", item.gtid, item.ending, tuple(e.position for e in item.events),
                item.position, item.end_position, item.parts)  # fmt: skip
    if isinstance(item, TransactionPart):
        return ("P", item.gtid, item.index, tuple(e.position for e in item.events), item.position)
    assert isinstance(item, ev.Event)
    return ("E", item.position)


@given(
    st.lists(st.sampled_from(_KINDS), max_size=40),
    st.sampled_from([None, 1, 4]),
    st.sampled_from([None, 50, 120]),
)
def test_the_shortcut_for_rows_events_assembles_as_the_general_way(
    kinds: list[str], part_rows: int | None, part_bytes: int | None
) -> None:
    results = []
    for general in (False, True):
        assembler = TransactionAssembler(part_rows=part_rows, part_bytes=part_bytes)
        out = [
            _shape(x) for event in _events(kinds, general=general) for x in assembler.feed(event)
        ]
        results.append((out, assembler.discarded_incomplete, assembler.in_transaction))
    assert results[0] == results[1]


def test_wide_rows_are_handed_out_in_parts_by_their_bytes() -> None:
    """Rows events of 50 bytes, a part at 100: few rows, but as many bytes as a part holds."""
    kinds = ["maria", "map", "rows", "rows", "rows", "rows", "rows", "xid"]
    assembler = TransactionAssembler(part_rows=1000, part_bytes=100)
    out = [x for event in _events(kinds, general=False) for x in assembler.feed(event)]
    shapes = [_shape(x) for x in out]
    assert [shape[0] for shape in shapes] == ["P", "P", "T"]
    first, second, last = out
    assert isinstance(first, TransactionPart) and isinstance(second, TransactionPart)
    assert [type(e) for e in first.events] == [ev.TableMapEvent, ev.RowsEvent, ev.RowsEvent]
    assert (first.row_bytes, second.row_bytes) == (100, 100)
    assert isinstance(last, Transaction)
    assert (last.parts, last.row_bytes, len(last.rows)) == (2, 50, 1)
