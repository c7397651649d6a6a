"""A binlog file grows past 4 GiB when one transaction takes it there (a transaction is never
split across files), while an event header's ``log_pos`` has 4 bytes: the server writes the
end offset modulo 2**32 (MariaDB ``Log_event::write_header``, ``int4store``). Positions past
4 GiB must come out whole from every reader the stream uses, the parser's, the native
runs', the DDL scan's stepping and passing over, or the checkpoint saves a position near the
file's start."""

from __future__ import annotations

import zlib

import pytest

from replicator.binlog.parser import event_end
from replicator.binlog.transaction import Transaction

from .test_native import require_native
from .test_runs import NAME, _retagged, _sample, read
from .test_skip_row_transactions import scan_plain, scan_skipping
from .test_stream import _artificial_rotate, _dump_stream

LOW = 0xFFFFFFFF


def _without_position(event: bytes) -> bytes:
    """A FORMAT_DESCRIPTION as a dump from a position other than 4 sends it: log_pos 0."""
    body = bytearray(event[:-4])
    body[13:17] = bytes(4)
    return bytes(body) + zlib.crc32(body).to_bytes(4, "little")


def past_4_gib(transactions: int, base: int) -> tuple[bytes, list[int]]:
    """A dump from ``base`` in a file: the sample's preamble and DDL, then ``transactions``
    transactions of rows (the sample's four in turn, under new GTIDs), each event's log_pos
    its end modulo 2**32. Returns the stream and where each transaction of rows ends."""
    preamble, ddl, rows = _sample()
    fde, *rest = preamble
    out = [_artificial_rotate(NAME.encode(), base), _without_position(fde)]
    at = base
    for event in [*rest, *ddl]:
        at += len(event)
        out.append(_retagged(event, at & LOW))
    ends = []
    for n in range(transactions):
        for k, event in enumerate(rows[n % len(rows)]):
            at += len(event)
            out.append(_retagged(event, at & LOW, 100 + n if k == 0 else None))
        ends.append(at)
    return _dump_stream(out), ends


BASE = 2**32 - 1500  # the preamble and DDL below 4 GiB, the transactions across it


def test_event_end_takes_log_pos_as_the_low_32_bits() -> None:
    assert event_end(1000, 50, 1050) == 1050
    assert event_end(1000, 50, 0) == 1050  # MariaDB 11.4 inside a transaction
    assert event_end(2**32 - 10, 50, 40) == 2**32 + 40  # across 4 GiB
    assert event_end(2**33 + 100, 50, 150) == 2**33 + 150
    # events left out between: log_pos beyond this event, in the same 4 GiB
    assert event_end(1000, 50, 5000) == 5000
    assert event_end(2**32 + 1000, 50, 5000) == 2**32 + 5000


@pytest.mark.parametrize("chunk", [97, 1 << 20])
def test_transactions_past_4_gib_end_where_they_end(chunk: int) -> None:
    data, ends = past_4_gib(12, BASE)
    assert ends[0] < 2**32 < ends[-1]
    plain = read(data, chunk, runs=False)
    assert plain.error is None
    got = [i.end_position for i in plain.items if isinstance(i, Transaction) and i.ending]
    assert got[-12:] == ends
    assert plain.position == ends[-1]


def test_runs_past_4_gib_end_where_their_transactions_end() -> None:
    require_native()
    data, ends = past_4_gib(12, BASE)
    runs = read(data, 1 << 20, runs=True)
    assert runs.error is None and runs.runs
    taken = [run.taken.end_position for run in runs.runs]
    closing = [run.last.end_position for run in runs.runs if run.last is not None]
    alone = [
        item.end_position
        for item in runs.items
        if isinstance(item, Transaction) and item.ending and item.end_position >= ends[0]
    ]  # (the DDL's before them end below 4 GiB)
    assert set(taken) <= set(ends)
    assert set(closing) <= set(ends)
    assert set(alone) <= set(ends)
    assert runs.position == ends[-1]


@pytest.mark.parametrize("chunk", [97, 1 << 20])
def test_a_read_of_statements_past_4_gib_ends_where_the_stream_ends(chunk: int) -> None:
    require_native()
    data, ends = past_4_gib(12, BASE)
    _, position = scan_plain(data, name=NAME)
    assert position == ends[-1]
    assert scan_skipping(data, chunk, name=NAME).position == ends[-1]


def test_transactions_passed_over_past_4_gib_end_where_they_end() -> None:
    require_native()
    data, ends = past_4_gib(12, BASE)
    scan = scan_skipping(data, 1 << 20, name=NAME)
    assert scan.skipped == 12
    assert scan.position == ends[-1]


def test_an_event_after_events_left_out_starts_where_it_does() -> None:
    """A dump by GTID: the preamble, then the server skips to the start; the first
    transaction after it starts where its GTID event does, not where the preamble ended."""
    preamble, ddl, rows = _sample()
    fde, *rest = preamble
    out = [_artificial_rotate(NAME.encode(), 4), _without_position(fde)]
    at = 4 + len(fde)
    for event in [*rest, *ddl]:
        at += len(event)
        out.append(_retagged(event, at))
    at += 5000  # transactions the server did not send
    start = at
    for k, event in enumerate(rows[0]):
        at += len(event)
        out.append(_retagged(event, at, 500 if k == 0 else None))
    plain = read(_dump_stream(out), 1 << 20, runs=False)
    assert plain.error is None
    (first,) = [i for i in plain.items if isinstance(i, Transaction) and i.gtid == "0-1-500"]
    assert (first.position, first.end_position) == (start, at)
