"""XA ids: the outcome statement's id matches the XA_PREPARE event's."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replicator.binlog import events as ev
from replicator.binlog.errors import DecodeError
from replicator.binlog.transaction import Transaction, TransactionAssembler
from replicator.binlog.xa import XaId, outcome_xa_id, parse_xid, xa_id_of

from .synthetic_events import UUID, Events


@given(st.integers(-(2**31), 2**31 - 1), st.binary(min_size=1, max_size=64), st.binary(max_size=64))
def test_serialized_form_round_trips(format_id: int, gtrid: bytes, bqual: bytes) -> None:
    xa = XaId(format_id, gtrid, bqual)
    assert outcome_xa_id(f"XA COMMIT {xa}") == ("COMMIT", xa)
    assert outcome_xa_id(f"xa rollback {xa};") == ("ROLLBACK", xa)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("X'616263',X'7131',7", XaId(7, b"abc", b"q1")),  # as MariaDB 10.11 logs it
        ("'abc'", XaId(1, b"abc", b"")),
        ("'ab''c', 'q'", XaId(1, b"ab'c", b"q")),
        ("'a\\'b', 0x0102, 3", XaId(3, b"a'b", b"\x01\x02")),
        ("\"dq\", X''", XaId(1, b"dq", b"")),
        ("'abc' ONE PHASE", XaId(1, b"abc", b"")),
    ],
)
def test_hand_typed_forms(text: str, expected: XaId) -> None:
    assert parse_xid(text) == expected


@pytest.mark.parametrize("text", ["", "abc", "'a',", "'a', 'b', 'c'", "'a', 7", "'a' 'b'"])
def test_not_an_id_is_an_error(text: str) -> None:
    with pytest.raises(DecodeError, match="not an XA transaction id"):
        parse_xid(text)


def test_other_statements_are_not_outcomes() -> None:
    assert outcome_xa_id("XA START 'a'") is None
    assert outcome_xa_id("COMMIT") is None


def test_key_is_a_file_name() -> None:
    assert XaId(7, b"abc", b"q1").key == "7-616263-7131"
    assert XaId(-1, b"/..", b"").key == "-1-2f2e2e-"


# --- MySQL's shapes through the transaction assembler (no MySQL XA binlog in the corpus) ---
# mysql-server logs a prepared XA transaction as GTID, QUERY "XA START <xid>", rows, QUERY
# "XA END <xid>", XA_PREPARE; its outcome as GTID, QUERY "XA COMMIT <xid>"; and
# XA COMMIT ... ONE PHASE as the first shape with XA_PREPARE's one_phase set.


def _assemble(events: list[ev.Event]) -> list[Transaction]:
    assembler = TransactionAssembler()
    return [t for e in events for t in assembler.feed(e) if isinstance(t, Transaction)]


def test_mysql_xa_shapes_end_and_match() -> None:
    xa, other = XaId(1, b"abc", b"q1"), XaId(7, b"x", b"")
    e = Events()
    found = _assemble(
        [
            e.gtid(1), e.query(f"XA START {xa}"), e.query(f"XA END {xa}"), e.prepare(xa),
            e.gtid(2), e.query(f"XA COMMIT {xa}"),
            e.gtid(3), e.query(f"XA START {other}"), e.query(f"XA END {other}"), e.prepare(other),
            e.gtid(4), e.query(f"XA ROLLBACK {other}"),
            e.gtid(5), e.query(f"XA START {other}"), e.query(f"XA END {other}"),
            e.prepare(other, one_phase=True),
        ]
    )  # fmt: skip
    assert [t.ending for t in found] == [
        "xa_prepare",
        "xa_commit",
        "xa_prepare",
        "xa_rollback",
        "xa_prepare",
    ]
    assert [xa_id_of(t) for t in found] == [xa, xa, other, other, other]
    assert [t.gtid for t in found] == [f"{UUID}:{n}" for n in range(1, 6)]
    one_phase = found[-1].events[-1]
    assert isinstance(one_phase, ev.XaPrepareEvent)
    assert one_phase.one_phase  # the pipeline lands this one at once


def test_ordinary_transactions_have_no_xa_id() -> None:
    e = Events()
    found = _assemble([e.gtid(1), e.query("BEGIN"), e.query("COMMIT"), e.gtid(2), e.query("DROP")])
    assert [t.ending for t in found] == ["commit", "ddl"]
    assert [xa_id_of(t) for t in found] == [None, None]
