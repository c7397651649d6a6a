"""XA ids: the outcome statement's id matches the XA_PREPARE event's."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replicator.binlog.errors import DecodeError
from replicator.binlog.xa import XaId, outcome_xa_id, parse_xid


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
