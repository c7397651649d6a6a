"""Framing and parsing of real captured events: files and replication packet streams.

The captures under tests/data come from our own throwaway MariaDB (tests/data/make_samples.py).
Bytes are fed whole, one byte at a time, and with trailing garbage; corruption of any byte
of any event must be caught by the CRC32 check, never decoded.
"""

from __future__ import annotations

import zlib
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from replicator.binlog import events as ev
from replicator.binlog import native
from replicator.binlog.constants import CHECKSUM_CRC32, LOG_EVENT_BINLOG_IN_USE_F
from replicator.binlog.errors import ChecksumError, DecodeError, ServerError, TruncatedError
from replicator.binlog.framing import (
    END_OF_STREAM,
    MAX_PACKET,
    NEED_DATA,
    PacketFramer,
    _NeedData,
)
from replicator.binlog.parser import STEPPED_OVER, EventParser
from replicator.binlog.reader import read_lenenc, write_lenenc
from replicator.binlog.stream import BinlogFileDecoder, DumpStreamDecoder
from tests.hypothesis_budget import examples

from .test_native import require_native

DATA = Path(__file__).resolve().parents[1] / "data"
SAMPLE = DATA / "mariadb-full-metadata.000001"
COMPRESSED = DATA / "mariadb-compressed.000001"


def _events_of(decoder: BinlogFileDecoder | DumpStreamDecoder) -> list[ev.Event]:
    out: list[ev.Event] = []
    while True:
        item = decoder.next_event()
        if isinstance(item, _NeedData) or item is END_OF_STREAM:
            return out
        assert isinstance(item, ev.Event)
        out.append(item)


def _decode_file(data: bytes, chunk: int | None = None) -> list[ev.Event]:
    decoder = BinlogFileDecoder("sample.000001")
    events: list[ev.Event] = []
    step = chunk or len(data)
    for i in range(0, len(data), step):
        decoder.feed(data[i : i + step])
        events.extend(_events_of(decoder))
    decoder.finish()
    return events


def _raw_events(data: bytes) -> list[tuple[int, bytes]]:
    out, pos = [], 4
    while pos < len(data):
        size = int.from_bytes(data[pos + 9 : pos + 13], "little")
        out.append((pos, data[pos : pos + size]))
        pos += size
    return out


def test_sample_decodes_whole_and_byte_by_byte() -> None:
    data = SAMPLE.read_bytes()
    whole = _decode_file(data)
    assert _decode_file(data, chunk=1) == whole
    rows = [e for e in whole if isinstance(e, ev.RowsEvent)]
    assert [r.kind for r in rows] == [
        ev.RowsKind.INSERT,
        ev.RowsKind.INSERT,
        ev.RowsKind.UPDATE,
        ev.RowsKind.DELETE,
    ]
    first = rows[0].rows[0]
    assert first[:5] == (1, "caf\u00e9 \U0001f600", Decimal("12.50"), "a", "x,z")
    assert first[6:] == ("na\u00efve \u20ac", b"\x00\xff\x00")
    assert rows[2].after[0][4] == "y"


def test_compressed_sample_equals_plain_sample() -> None:
    def rows(path: Path) -> list[object]:
        return [
            (e.kind, e.rows, e.after)
            for e in _decode_file(path.read_bytes())
            if isinstance(e, ev.RowsEvent)
        ]

    compressed_types = {
        e.header.type_code
        for e in _decode_file(COMPRESSED.read_bytes())
        if isinstance(e, (ev.RowsEvent, ev.QueryEvent))
    }
    assert {166, 167, 168, 165} <= compressed_types
    assert rows(COMPRESSED) == rows(SAMPLE)


def test_trailing_garbage_is_reported_not_decoded() -> None:
    data = SAMPLE.read_bytes() + b"\x01\x02\x03"
    with pytest.raises(TruncatedError) as info:
        _decode_file(data)
    assert info.value.position == len(data) - 3


def test_file_cut_inside_an_event() -> None:
    data = SAMPLE.read_bytes()
    with pytest.raises(TruncatedError) as info:
        _decode_file(data[:-10])
    last_start = _raw_events(data)[-1][0]
    assert info.value.position == last_start


@settings(max_examples=examples(400), deadline=None)
@given(st.data())
def test_any_flipped_byte_is_detected(data: st.DataObject) -> None:
    raw = SAMPLE.read_bytes()
    events = _raw_events(raw)
    index = data.draw(st.integers(0, len(events) - 1), label="event")
    start, event = events[index]
    offset = data.draw(st.integers(0, len(event) - 1), label="byte")
    flip = data.draw(st.integers(1, 255), label="xor")
    # LOG_EVENT_BINLOG_IN_USE_F in the FORMAT_DESCRIPTION is the one bit the server itself
    # flips outside the CRC (set while the file is open): toggling it is not corruption.
    assume(not (event[4] == 15 and offset == 17 and flip == LOG_EVENT_BINLOG_IN_USE_F))
    corrupted = bytearray(raw)
    corrupted[start + offset] ^= flip
    with pytest.raises(DecodeError) as info:
        _decode_file(bytes(corrupted))
    # Whatever byte flips (a size field included), the error names the corrupted event's
    # start: nothing of it or after it was handed out.
    assert info.value.position == start


def test_flipped_payload_byte_names_file_and_position() -> None:
    raw = bytearray(SAMPLE.read_bytes())
    start, _ = _raw_events(bytes(raw))[5]
    raw[start + 25] ^= 0x40
    with pytest.raises(ChecksumError) as info:
        _decode_file(bytes(raw))
    assert info.value.position == start
    assert info.value.file == "sample.000001"
    assert f"sample.000001:{start}" in str(info.value)


def test_active_file_flag_does_not_break_the_checksum() -> None:
    raw = bytearray(SAMPLE.read_bytes())
    # the server sets LOG_EVENT_BINLOG_IN_USE_F in the FDE of the open file without updating
    # its CRC; a reader must verify with the flag clear
    raw[4 + 17] |= LOG_EVENT_BINLOG_IN_USE_F
    events = _decode_file(bytes(raw))
    assert isinstance(events[0], ev.FormatDescriptionEvent)
    assert events[0].header.flags & LOG_EVENT_BINLOG_IN_USE_F


# -- replication packets --------------------------------------------------------------------


def _packets(payload: bytes, sequence: int) -> tuple[bytes, int]:
    """Frame one payload as the server does, splitting at 0xFFFFFF."""
    out = bytearray()
    while True:
        part, payload = payload[:MAX_PACKET], payload[MAX_PACKET:]
        out += len(part).to_bytes(3, "little") + bytes([sequence & 0xFF]) + part
        sequence += 1
        if len(part) < MAX_PACKET:
            return bytes(out), sequence


def _dump_stream(events: list[bytes]) -> bytes:
    stream = bytearray()
    sequence = 1
    for event in events:
        framed, sequence = _packets(b"\x00" + event, sequence)
        stream += framed
    eof, _ = _packets(b"\xfe\x00\x00\x02\x00", sequence)
    return bytes(stream + eof)


def _artificial_rotate(name: bytes, position: int) -> bytes:
    body = position.to_bytes(8, "little") + name
    header = (
        (0).to_bytes(4, "little")
        + bytes([4])
        + (1).to_bytes(4, "little")
        + (19 + len(body) + 4).to_bytes(4, "little")
        + (0).to_bytes(4, "little")
        + (0x20).to_bytes(2, "little")
    )
    event = header + body
    return event + zlib.crc32(event).to_bytes(4, "little")


@pytest.mark.parametrize("chunk", [1, 13, 1 << 20])
def test_dump_stream_matches_file(chunk: int) -> None:
    raw = SAMPLE.read_bytes()
    events = [e for _, e in _raw_events(raw)]
    stream = _dump_stream([_artificial_rotate(b"sample.000001", 4), *events])
    decoder = DumpStreamDecoder(checksum_alg=CHECKSUM_CRC32)
    got: list[ev.Event] = []
    ended = False
    for i in range(0, len(stream), chunk):
        decoder.feed(stream[i : i + chunk])
        while True:
            item = decoder.next_event()
            if item is NEED_DATA:
                break
            if item is END_OF_STREAM:
                ended = True
                break
            assert isinstance(item, ev.Event)
            got.append(item)
    assert ended
    rotate, *rest = got
    assert isinstance(rotate, ev.RotateEvent) and rotate.artificial
    from_file = _decode_file(raw)
    assert [(e.position, e.next_position) for e in rest] == [
        (e.position, e.next_position) for e in from_file
    ]
    assert [type(e) for e in rest] == [type(e) for e in from_file]
    assert all(e.file == "sample.000001" for e in rest)


def test_event_over_16_mib_spans_packets() -> None:
    # a QUERY event whose statement is 17 MiB: the payload crosses one 0xFFFFFF boundary
    text = b"/*" + b"x" * (17 * 1024 * 1024) + b"*/"
    post = (
        (7).to_bytes(4, "little")
        + (0).to_bytes(4, "little")
        + bytes([0])
        + (0).to_bytes(2, "little")
        + (0).to_bytes(2, "little")
    )
    body = post + b"\x00" + text
    size = 19 + len(body) + 4
    header = (
        (1).to_bytes(4, "little")
        + bytes([2])
        + (1).to_bytes(4, "little")
        + size.to_bytes(4, "little")
        + (4 + size).to_bytes(4, "little")
        + (0).to_bytes(2, "little")
    )
    event = header + body
    event += zlib.crc32(event).to_bytes(4, "little")
    stream = _dump_stream([event])
    decoder = DumpStreamDecoder(checksum_alg=CHECKSUM_CRC32, position=4)
    decoder.feed(stream)
    query = decoder.next_event()
    assert isinstance(query, ev.QueryEvent)
    assert query.query.encode() == text
    assert query.next_position == 4 + size
    assert decoder.next_event() is END_OF_STREAM


def test_err_packet_becomes_server_error() -> None:
    message = b"Could not find first log file name in binary log index file"
    payload = b"\xff" + (1236).to_bytes(2, "little") + b"#HY000" + message
    framed, _ = _packets(payload, 1)
    decoder = DumpStreamDecoder()
    decoder.feed(framed)
    with pytest.raises(ServerError) as info:
        decoder.next_event()
    assert (info.value.code, info.value.sql_state) == (1236, "HY000")
    assert info.value.server_message == message.decode()
    assert info.value.exit_code == 3


def test_packet_sequence_gap_is_an_error() -> None:
    framer = PacketFramer(next_sequence=1)
    framer.feed(b"\x01\x00\x00\x02\x00")
    with pytest.raises(DecodeError, match="sequence id 2 where 1"):
        framer.next_payload()


@given(st.integers(0, 2**64 - 1))
def test_lenenc_round_trip(value: int) -> None:
    encoded = write_lenenc(value)
    assert read_lenenc(encoded + b"\xaa", 0) == (value, len(encoded))


def test_lenenc_truncated() -> None:
    with pytest.raises(TruncatedError):
        read_lenenc(b"\xfc\x01", 0)


def test_parser_positions_without_log_pos() -> None:
    """MariaDB 11.4+ may write log_pos 0 inside a transaction: positions follow sizes."""
    raw = SAMPLE.read_bytes()
    events = _raw_events(raw)
    parser = EventParser(checksum_alg=None, position=4, file="sample.000001")
    seen = []
    for _, event in events:
        patched = bytearray(event)
        if event[4] in (19, 23, 24, 25):  # TABLE_MAP and rows events: zero their log_pos
            patched[13:17] = b"\x00\x00\x00\x00"
            patched[-4:] = zlib.crc32(patched[:-4]).to_bytes(4, "little")
        seen.append(parser.parse(bytes(patched)))
    assert [e.position for e in seen] == [start for start, _ in events]


@pytest.mark.parametrize("flip", [0x01, 0x80, 0xFF])
def test_every_byte_of_every_event_is_covered(flip: int) -> None:
    """Exhaustive: flip each byte of the capture in turn; every flip is reported at the start
    of the event it hit, and no event from that one on is handed out."""
    raw = SAMPLE.read_bytes()
    starts = [start for start, _ in _raw_events(raw)]
    missed = []
    for offset in range(4, len(raw)):
        if offset == 4 + 17 and flip == LOG_EVENT_BINLOG_IN_USE_F:
            continue  # the in-use flag, outside the CRC by design
        corrupted = bytearray(raw)
        corrupted[offset] ^= flip
        hit = max(s for s in starts if s <= offset)
        try:
            _decode_file(bytes(corrupted))
        except DecodeError as exc:
            if exc.position != hit:
                missed.append((offset, exc.position))
        else:
            missed.append((offset, None))
    assert missed == []


def test_every_byte_of_a_dump_stream_is_covered() -> None:
    """Flip each byte of a replication stream (packet headers, markers, events): every flip
    raises DecodeError before a corrupted event comes out. Only the closing EOF packet,
    which carries no event, may change unnoticed."""
    raw = SAMPLE.read_bytes()
    events = [e for _, e in _raw_events(raw)]
    stream = _dump_stream([_artificial_rotate(b"sample.000001", 4), *events])
    eof_start = len(stream) - 9

    def decode(data: bytes) -> list[ev.Event]:
        decoder = DumpStreamDecoder(checksum_alg=CHECKSUM_CRC32)
        decoder.feed(data)
        return _events_of(decoder)

    clean = decode(stream)
    assert len(clean) == len(events) + 1
    missed = []
    for offset in range(eof_start):
        corrupted = bytearray(stream)
        corrupted[offset] ^= 0xFF
        try:
            got = decode(bytes(corrupted))
        except DecodeError:
            continue
        missed.append((offset, len(got)))
    assert missed == []


def _statements_only(data: bytes, chunk: int) -> list[ev.Event]:
    decoder = DumpStreamDecoder(checksum_alg=CHECKSUM_CRC32)
    decoder.parser.statements_only = True
    got: list[ev.Event] = []
    for i in range(0, len(data), chunk):
        decoder.feed(data[i : i + chunk])
        got.extend(_events_of(decoder))
    return got


@pytest.mark.parametrize("chunk", [1, 13, 1 << 20])
def test_a_read_of_statements_steps_over_rows_and_table_maps(chunk: int) -> None:
    """A DDL scan's read: rows and TABLE_MAP events are checked and passed over, every other
    event comes out as the full read gives it, at the same positions."""
    raw = SAMPLE.read_bytes()
    stream = _dump_stream(
        [_artificial_rotate(b"sample.000001", 4), *(e for _, e in _raw_events(raw))]
    )
    full = _decode_file(raw)
    stepped = [e for e in full if isinstance(e, (ev.RowsEvent, ev.TableMapEvent))]
    assert len(stepped) >= 8  # the sample has rows to step over
    expected = [e for e in full if not isinstance(e, (ev.RowsEvent, ev.TableMapEvent))]
    _, *got = _statements_only(stream, chunk)
    assert got == expected


def test_a_read_of_statements_still_checks_every_byte() -> None:
    """A flipped byte in a rows or TABLE_MAP event that is stepped over, or in any event
    between them (both natively when the core is built), is still a DecodeError (CRC32,
    packet length or sequence), not a silent skip."""
    raw = SAMPLE.read_bytes()
    events = [e for _, e in _raw_events(raw)]
    stream = _dump_stream([_artificial_rotate(b"sample.000001", 4), *events])
    rows_types = {e[4] for e in events if e[4] in (19, 23, 24, 25, 30, 31, 32)}
    assert 19 in rows_types and len(rows_types) > 1
    assert {e[4] for e in events} - rows_types >= {2, 16, 162}  # QUERY, XID, MariaDB GTID
    missed = []
    at = len(_dump_stream([_artificial_rotate(b"sample.000001", 4)])) - 9
    for event in events:
        framed = len(_packets(b"\x00" + event, 0)[0])
        # the packet header and marker, then a sample of the event's bytes
        for offset in [*range(at, at + 5), *range(at + 5, at + framed, 7)]:
            corrupted = bytearray(stream)
            corrupted[offset] ^= 0x5A
            try:
                _statements_only(bytes(corrupted), 1 << 20)
            except DecodeError:
                continue
            missed.append(offset)
        at += framed
    assert missed == []


def test_the_native_split_stops_before_a_flagged_type() -> None:
    """``split_events`` with ``stop`` frames the events up to the first one of a flagged type
    (what a read of statements only steps over), the same bytes as without it."""
    require_native()
    split_events = native.core().split_events
    events = [e for _, e in _raw_events(SAMPLE.read_bytes())]
    first = next(i for i, e in enumerate(events) if STEPPED_OVER[e[4]])
    assert first > 1  # events to take before the first stepped one
    framed = _dump_stream(events[1:])  # after the FORMAT_DESCRIPTION, which split leaves
    stream = framed[: len(framed) - 9]  # without the EOF packet
    _, _, whole = split_events(stream, 0, 1, zlib.crc32)
    offset, sequence, taken = split_events(stream, 0, 1, zlib.crc32, STEPPED_OVER)
    assert len(whole) > len(taken)
    assert taken == whole[: first - 1] == events[1:first]
    assert sequence == first  # the packets taken, counted from sequence id 1
    assert offset == len(_dump_stream(events[1:first])) - 9
    # at a flagged event: nothing taken, nothing moved
    assert split_events(stream, offset, sequence, zlib.crc32, STEPPED_OVER) == (offset, first, [])
    with pytest.raises(ValueError, match="256 bytes"):
        split_events(stream, 0, 1, zlib.crc32, b"\x01")


def test_the_native_file_split_takes_what_the_framer_would() -> None:
    """``split_file_events`` cuts a binlog file's bytes into the same events as the Python
    framer, CRC32 checked, and stops where the framer and parser must take over: at a
    FORMAT_DESCRIPTION, an event not whole yet, or a checksum that does not match."""
    require_native()
    split = native.core().split_file_events
    raw = SAMPLE.read_bytes()
    events = _raw_events(raw)
    after_format = events[1][0]  # the FORMAT_DESCRIPTION stays with the parser
    assert split(raw, 4, zlib.crc32) == (4, [])
    offset, taken = split(raw, after_format, zlib.crc32)
    assert offset == len(raw)
    assert taken == [event for _, event in events[1:]]
    cut = events[5][0] + 7  # inside the sixth event: the five before it
    assert split(raw[:cut], after_format, zlib.crc32) == (
        events[5][0],
        [event for _, event in events[1:5]],
    )
    corrupted = bytearray(raw)
    corrupted[events[3][0] + 20] ^= 0x01
    assert split(bytes(corrupted), after_format, zlib.crc32) == (
        events[3][0],
        [event for _, event in events[1:3]],
    )
    assert split(bytes(corrupted), after_format, None)[0] == len(raw)  # nothing to check


def _event(type_code: int, body: bytes, log_pos: int) -> bytes:
    size = 19 + len(body) + 4
    header = (
        (1).to_bytes(4, "little")
        + bytes([type_code])
        + (1).to_bytes(4, "little")
        + size.to_bytes(4, "little")
        + log_pos.to_bytes(4, "little")
        + (0).to_bytes(2, "little")
    )
    event = header + body
    return event + zlib.crc32(event).to_bytes(4, "little")


@pytest.mark.parametrize("chunk", [1 << 16, 1 << 22])
def test_a_read_of_statements_steps_over_a_rows_event_over_16_mib(chunk: int) -> None:
    """A rows event over 16 MiB arrives in several packets; a statements-only read passes over
    it too (its TABLE_MAP was passed over, so decoding it would fail), whatever the chunks."""
    raw = SAMPLE.read_bytes()
    events = [e for _, e in _raw_events(raw)]
    table_map = next(e for e in events if e[4] == 19)
    rows = _event(23, b"\x00" * (17 * 1024 * 1024), 0)  # WRITE_ROWS_V1, body never decoded
    query_body = (7).to_bytes(4, "little") + bytes(4 + 1 + 2 + 2) + b"\x00" + b"DROP TABLE t"
    query = _event(2, query_body, 0)
    stream = _dump_stream(
        [_artificial_rotate(b"sample.000001", 4), *events, table_map, rows, query]
    )
    got = _statements_only(stream, chunk)
    assert isinstance(got[-1], ev.QueryEvent) and got[-1].query == "DROP TABLE t"
    # the position moved to the TABLE_MAP's log_pos, then over the rows event by its size
    # (its log_pos is 0)
    assert got[-1].position == int.from_bytes(table_map[13:17], "little") + len(rows)
