"""Transaction boundaries on our own MariaDB capture: whole groups, never parts."""

from __future__ import annotations

import itertools

from replicator.binlog import events as ev
from replicator.binlog.transaction import Transaction, TransactionAssembler

from .synthetic_events import Events
from .test_stream import SAMPLE, _decode_file


def _assemble(events: list[ev.Event]) -> tuple[list[Transaction], TransactionAssembler]:
    assembler = TransactionAssembler()
    out = []
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
