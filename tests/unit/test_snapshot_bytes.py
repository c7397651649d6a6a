"""The byte cap of a snapshot read (``snapshot.fastread``), on packets built here: how many
rows reach the cap, and dropping the rest of a result set without parsing it."""

from __future__ import annotations

import io

import pymysql
import pytest

from replicator.snapshot.fastread import MAX_PAYLOAD, _drain, _rows_within


def _packet(payload: bytes) -> bytes:
    return len(payload).to_bytes(3, "little") + b"\x00" + payload


EOF_PACKET = _packet(b"\xfe\x00\x00\x02\x00")  # warnings 0, status: autocommit


def _row(size: int) -> bytes:
    """A text row packet of one value, ``size`` bytes of payload in all."""
    return _packet(bytes([size - 1]) + b"x" * (size - 1))


class _Reader(io.BytesIO):
    """A socket file that hands out odd pieces (as a socket does)."""

    def read1(self, size: int | None = -1) -> bytes:
        return super().read1(min(size, 4093) if size is not None and size > 0 else 4093)


def test_rows_within_takes_the_row_that_reaches_the_budget() -> None:
    buf = _row(100) * 10  # 104 bytes a packet
    assert _rows_within(buf, 0, 416, 1000) == 4  # exactly at the budget
    assert _rows_within(buf, 0, 417, 1000) == 5  # the fifth reaches it
    assert _rows_within(buf, 104, 1, 1000) == 1  # one larger row goes alone
    assert _rows_within(buf, 0, 10_000, 1000) == 1000  # the buffer ends first: no limit
    assert _rows_within(buf, 0, 10_000, 3) == 3
    assert _rows_within(EOF_PACKET, 0, 5000, 1000) == 1000  # the end: text_block tells


def test_drain_reads_through_the_end_of_the_result_set() -> None:
    split = _packet(b"\x01" + b"y" * (MAX_PAYLOAD - 1)) + _packet(b"z" * 10)  # a 16 MiB row
    rest = _row(50) + split + _row(20) + EOF_PACKET
    reader = _Reader(rest[9:])
    _drain(reader, rest[:9])  # reading past the EOF packet would fail: nothing follows it
    assert reader.tell() == len(rest) - 9
    with pytest.raises(pymysql.err.OperationalError, match="Lost connection"):
        _drain(_Reader(rest[9:-1]), rest[:9])  # a result set cut short is no end


def test_drain_raises_the_servers_error() -> None:
    error = _packet(b"\xff\x7a\x04#HY000Table 'd.t' doesn't exist")
    with pytest.raises(pymysql.err.ProgrammingError) as caught:
        _drain(_Reader(error[3:]), error[:3])
    assert caught.value.args[0] == 1146
