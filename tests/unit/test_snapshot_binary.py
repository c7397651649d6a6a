"""Binary result rows (COM_STMT_EXECUTE) read by the native core exactly as the text rows the
text protocol sends for the same stored values: the rows of the object path, the values of
block buffers, a row split over packets, and what no binary row may be.

The rows are drawn as typed values and sent both ways, as a server sends them: text as SELECT
prints it (fractions with the column's digits), binary with the shortest temporal length the
server uses (MySQL protocol "Binary Protocol Resultset Row"; MariaDB sql/protocol.cc).
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replicator.snapshot.fastread import BINARY_READABLE
from tests.unit.test_snapshot_units import EOF_PACKET, _buffer_columns, _core, _lenenc, _packet

Pair = tuple[bytes, bytes] | None  # (text, binary value) of one column; None is NULL


@dataclass(frozen=True)
class Wire:
    """A result column as the server describes it: its type, decimals and signedness."""

    type: int
    decimals: int = 0
    unsigned: bool = False


def _integer(fmt: str) -> Callable[[int], tuple[bytes, bytes]]:
    return lambda v: (str(v).encode(), struct.pack("<" + fmt, v))


def _double(v: float) -> tuple[bytes, bytes]:
    return repr(v).encode(), struct.pack("<d", v)


def _string(v: bytes) -> tuple[bytes, bytes]:
    return v, _lenenc(v)


def _date(v: tuple[int, int, int]) -> tuple[bytes, bytes]:
    y, m, d = v
    raw = b"\x00" if v == (0, 0, 0) else b"\x04" + struct.pack("<HBB", y, m, d)
    return f"{y:04d}-{m:02d}-{d:02d}".encode(), raw


def _datetime(digits: int) -> Callable[[tuple[int, ...]], tuple[bytes, bytes]]:
    def encode(v: tuple[int, ...]) -> tuple[bytes, bytes]:
        y, mo, d, h, mi, s, us = v
        text = f"{y:04d}-{mo:02d}-{d:02d} {h:02d}:{mi:02d}:{s:02d}"
        if digits:
            text += "." + f"{us:06d}"[:digits]
        if us:
            raw = b"\x0b" + struct.pack("<HBBBBBI", y, mo, d, h, mi, s, us)
        elif h or mi or s:
            raw = b"\x07" + struct.pack("<HBBBBB", y, mo, d, h, mi, s)
        elif y or mo or d:
            raw = b"\x04" + struct.pack("<HBB", y, mo, d)
        else:
            raw = b"\x00"
        return text.encode(), raw

    return encode


def _time(v: tuple[bool, int, int, int, int]) -> tuple[bytes, bytes]:
    negative, hours, minutes, seconds, us = v
    sign = "-" if negative else ""
    text = f"{sign}{hours:02d}:{minutes:02d}:{seconds:02d}.{us:06d}"
    days, hour = divmod(hours, 24)
    if us:
        raw = b"\x0c" + struct.pack("<BIBBBI", negative, days, hour, minutes, seconds, us)
    elif hours or minutes or seconds:
        raw = b"\x08" + struct.pack("<BIBBB", negative, days, hour, minutes, seconds)
    else:
        raw = b"\x00"
    return text.encode(), raw


_moment = st.datetimes(dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59)).map(
    lambda m: (m.year, m.month, m.day, m.hour, m.minute, m.second, m.microsecond)
)
_zero_or_invalid = st.sampled_from(
    [(0, 0, 0, 0, 0, 0, 0), (2023, 2, 31, 0, 0, 0, 0), (2020, 0, 0, 12, 0, 1, 0)]
)
_decimal = st.decimals(-(10**10) + 1, 10**10 - 1, places=2).map(lambda d: f"{d:.2f}".encode())
_time_value = st.tuples(
    st.booleans(), st.integers(0, 838), st.integers(0, 59), st.integers(0, 59),
    st.integers(0, 999_999),
).map(lambda v: (False, 0, 0, 0, 0) if v[1:] == (0, 0, 0, 0) else v)  # fmt: skip

# Each column of tests.unit.test_snapshot_units._buffer_columns: its result column, and its
# values as (text, binary value) pairs. FLOAT is read as CAST(f AS DOUBLE) (columns.py).
COLUMNS: list[tuple[Wire, st.SearchStrategy[tuple[bytes, bytes]]]] = [
    (Wire(1), st.integers(-128, 127).map(_integer("b"))),
    (Wire(1, unsigned=True), st.integers(0, 255).map(_integer("B"))),
    (Wire(2), st.integers(-(2**15), 2**15 - 1).map(_integer("h"))),
    (Wire(9), st.integers(-(2**23), 2**23 - 1).map(_integer("i"))),
    (Wire(3, unsigned=True), st.integers(0, 2**32 - 1).map(_integer("I"))),
    (Wire(8), st.integers(-(2**63), 2**63 - 1).map(_integer("q"))),
    (Wire(8, unsigned=True), st.integers(0, 2**64 - 1).map(_integer("Q"))),
    (Wire(5, 31), st.floats(width=32, allow_nan=False, allow_infinity=False).map(_double)),
    (Wire(5, 31), st.floats(allow_nan=False, allow_infinity=False).map(_double)),
    (Wire(246, 2), _decimal.map(_string)),
    (Wire(246, 38), st.decimals(-1, 1, places=38).map(lambda d: _string(f"{d:.38f}".encode()))),
    (Wire(10), st.one_of(st.dates().map(lambda d: (d.year, d.month, d.day)),
                         st.sampled_from([(0, 0, 0), (2023, 2, 31), (0, 1, 21)])).map(_date)),
    (Wire(12, 6), st.one_of(_moment, _zero_or_invalid).map(_datetime(6))),
    (Wire(7, 3), st.one_of(_moment.map(lambda m: (*m[:6], m[6] // 1000 * 1000)),
                           st.just((0, 0, 0, 0, 0, 0, 0))).map(_datetime(3))),
    (Wire(253), st.text(max_size=20).map(lambda s: _string(s.encode()))),
    (Wire(253), st.text(st.characters(max_codepoint=0xFF), max_size=20).map(
        lambda s: _string(s.encode("cp1252", "replace")))),
    (Wire(252), st.binary(max_size=20).map(_string)),
    (Wire(11, 6), _time_value.map(_time)),
    (Wire(16), st.binary(min_size=1, max_size=2).map(_string)),
    (Wire(16), st.binary(min_size=1, max_size=8).map(_string)),
    (Wire(254), st.sampled_from([b"a", "bé".encode(), b""]).map(_string)),
    (Wire(254), st.sampled_from([b"", b"x", b"x,y", b"y"]).map(_string)),
    (Wire(254), st.binary(max_size=6).map(_string)),
    (Wire(246, 30), st.decimals(-1, 1, places=30).map(lambda d: _string(f"{d:.30f}".encode()))),
]  # fmt: skip
WIRE = tuple((w.type, w.decimals, w.unsigned) for w, _ in COLUMNS)


@st.composite
def _row(draw: st.DrawFn) -> list[Pair]:
    return [draw(st.one_of(st.none(), values)) for _, values in COLUMNS]


def _text_payload(row: list[Pair]) -> bytes:
    return b"".join(_lenenc(None if pair is None else pair[0]) for pair in row)


def _binary_payload(row: list[Pair]) -> bytes:
    bitmap = bytearray((len(row) + 9) // 8)
    for k, pair in enumerate(row):
        if pair is None:
            bitmap[(k + 2) // 8] |= 1 << ((k + 2) % 8)
    return b"\x00" + bytes(bitmap) + b"".join(pair[1] for pair in row if pair is not None)


def _setup() -> tuple[
    object, tuple[int, ...], tuple[object, ...], tuple[object, ...], tuple[object, ...]
]:
    from replicator.snapshot.columns import converter
    from replicator.snapshot.fastread import buffer_spec, kind

    core, defs = _core(), _buffer_columns()
    assert len(defs) == len(COLUMNS)
    kinds = tuple(kind(c) for c in defs)  # type: ignore[arg-type]
    fallbacks = tuple(converter(c) for c in defs)  # type: ignore[arg-type]
    found = [buffer_spec(c) for c in defs]  # type: ignore[arg-type]
    specs = tuple((0, 0, 0) if f is None else f[0] for f in found)
    natives = tuple(None if f is None else f[1] for f in found)
    return core, kinds, fallbacks, specs, natives


def _same(a: object, b: object) -> bool:
    """Equal values, a float's sign of zero included."""
    if isinstance(a, float) and isinstance(b, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    return type(a) is type(b) and a == b


def _blocks(core: object, data: bytes, wire: object, max_rows: int) -> list[tuple[object, ...]]:
    """The rows of ``data`` as fastread reads them: blocks, then objects from a value the
    buffers cannot hold."""
    from tests.blocks import vector_values

    _, kinds, fallbacks, specs, natives = _setup()
    got: list[tuple[object, ...]] = []
    offset, state = 0, 0
    while state == 0:
        vectors, n, offset, state, _ = core.text_block(  # type: ignore[attr-defined]
            data, offset, specs, kinds, fallbacks, False, max_rows, wire
        )
        columns = [vector_values(v, k, n) for v, k in zip(vectors, natives, strict=True)]
        got.extend(zip(*columns, strict=True))
        if state == 4:
            rest, offset, state = core.text_rows(  # type: ignore[attr-defined]
                data, offset, kinds, fallbacks, False, wire
            )
            got.extend(rest)
    assert state == 1 and offset == len(data)
    return got


@given(st.lists(_row(), max_size=10), st.integers(1, 12))
def test_binary_rows_read_as_the_text_rows_of_the_same_values(
    rows: list[list[Pair]], max_rows: int
) -> None:
    """The object path and the block buffers give the same values from binary rows as from
    the text rows of the same stored values: integers at every width and sign, doubles bit
    for bit, zero and invalid dates, fractions, negative TIMEs, NULLs in any column."""
    core, kinds, fallbacks, _, _ = _setup()
    text = b"".join(_packet(_text_payload(row)) for row in rows) + EOF_PACKET
    binary = b"".join(_packet(_binary_payload(row)) for row in rows) + EOF_PACKET
    expected, _, _ = core.text_rows(text, 0, kinds, fallbacks, False)  # type: ignore[attr-defined]
    read, _, _ = core.text_rows(binary, 0, kinds, fallbacks, False, WIRE)  # type: ignore[attr-defined]
    assert len(read) == len(expected) == len(rows)
    for got_row, want_row in zip(read, expected, strict=True):
        assert all(_same(g, w) for g, w in zip(got_row, want_row, strict=True)), (got_row, want_row)
    from_text = _blocks(core, text, None, max_rows)
    from_binary = _blocks(core, binary, WIRE, max_rows)
    assert len(from_binary) == len(from_text) == len(rows)
    for got_row, want_row in zip(from_binary, from_text, strict=True):
        assert all(_same(g, w) for g, w in zip(got_row, want_row, strict=True)), (got_row, want_row)


@given(_row())
def test_a_whole_binary_payload_reads_as_its_text_row(row: list[Pair]) -> None:
    """``text_row`` (a row the server split over packets, joined) reads binary payloads too."""
    core, kinds, fallbacks, _, _ = _setup()
    want = core.text_row(_text_payload(row), kinds, fallbacks)  # type: ignore[attr-defined]
    got = core.text_row(_binary_payload(row), kinds, fallbacks, WIRE)  # type: ignore[attr-defined]
    assert all(_same(g, w) for g, w in zip(got, want, strict=True)), (got, want)


def test_what_is_not_a_binary_row_is_named() -> None:
    """A payload without the 0x00 header, one cut short, and a temporal length no type has
    are refused as not a row of the columns, never read as something else."""
    core, kinds, fallbacks, specs, _ = _setup()
    row: list[Pair] = [None] * len(COLUMNS)
    row[0] = (b"7", b"\x07")
    row[11] = _date((2024, 2, 29))
    good = _binary_payload(row)
    assert core.text_row(good, kinds, fallbacks, WIRE)[11] == dt.date(2024, 2, 29)  # type: ignore[attr-defined]
    date_at = good.index(b"\x04\xe8\x07")
    bad = {
        "header": b"\x01" + good[1:],
        "cut short": good[:-1],
        "date length 5": good[:date_at] + b"\x05" + good[date_at + 1 :] + b"\x00",
        "no bitmap": b"\x00",
    }
    for payload in bad.values():
        with pytest.raises(ValueError, match="not a row"):
            core.text_row(payload, kinds, fallbacks, WIRE)  # type: ignore[attr-defined]
        with pytest.raises(ValueError, match="not a row"):
            core.text_block(  # type: ignore[attr-defined]
                _packet(payload) + EOF_PACKET, 0, specs, kinds, fallbacks, False, 10, WIRE
            )


def test_the_binary_readable_types_are_the_ones_the_core_reads() -> None:
    """``fastread.BINARY_READABLE`` (which result types go binary) is exactly the set of wire
    types the native core takes; any other one is refused by name."""
    core = _core()
    taken, refused = set(), {}
    for code in range(256):
        try:
            core.text_rows(EOF_PACKET, 0, (0,), (bytes,), False, ((code, 0, False),))  # type: ignore[attr-defined]
        except ValueError as exc:
            refused[code] = str(exc)
        else:
            taken.add(code)
    assert taken == set(BINARY_READABLE)
    assert refused == {
        code: f"column 0: wire type {code} has no binary reading"
        for code in range(256)
        if code not in BINARY_READABLE
    }
    assert 6 not in taken  # MYSQL_TYPE_NULL: no column of a table has it


def test_a_fraction_is_kept_whatever_decimals_the_column_says() -> None:
    """A temporal result column of no fixed precision (decimals 31, as for an expression)
    keeps its microseconds: all six digits go to the converter."""
    core, kinds, fallbacks, _, _ = _setup()
    wire = list(WIRE)
    wire[12] = (12, 31, False)  # the DATETIME(6) column, as an expression would be described
    row: list[Pair] = [None] * len(COLUMNS)
    row[12] = (b"", b"\x0b" + struct.pack("<HBBBBBI", 2020, 1, 2, 3, 4, 5, 123456))
    got = core.text_row(_binary_payload(row), kinds, fallbacks, tuple(wire))[12]  # type: ignore[attr-defined]
    assert got == dt.datetime(2020, 1, 2, 3, 4, 5, 123456)


def test_a_time_past_its_range_is_not_buffered() -> None:
    """A binary TIME no server sends (days past TIME's 838 hours, an hour byte past 23) is
    left to the object path, never buffered as some other duration."""
    core, kinds, fallbacks, specs, _ = _setup()
    for days, hour in ((0xFFFFFFFF, 23), (35, 0), (0, 24)):
        row: list[Pair] = [None] * len(COLUMNS)
        row[17] = (b"", b"\x08" + struct.pack("<BIBBB", 0, days, hour, 59, 59))
        data = _packet(_binary_payload(row)) + EOF_PACKET
        _, n, offset, state, _ = core.text_block(  # type: ignore[attr-defined]
            data, 0, specs, kinds, fallbacks, False, 10, WIRE
        )
        assert (n, offset, state) == (0, 0, 4), (days, hour)
